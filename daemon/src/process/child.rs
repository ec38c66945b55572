//! A process a [`super::ProcessTree`] runs: one the daemon spawned (its own
//! child, whose exit status it reads), or a sandbox helper the zygote
//! forked (the zygote's child: the daemon holds a pidfd of it, which says
//! when it exited and signals exactly it, never a process that reused its
//! pid; its status comes with the helper's report).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// A running process and the daemon's ends of its standard streams.
pub struct Child {
    /// Its stdin, when piped.
    pub stdin: Option<ChildStdin>,
    /// Its stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// Its stderr, when piped.
    pub stderr: Option<ChildStderr>,
    inner: Inner,
}

enum Inner {
    Spawned(tokio::process::Child),
    Forked {
        /// Readable once the process exited.
        pidfd: AsyncFd<OwnedFd>,
        exited: bool,
    },
}

/// What a forked helper's exit says when nothing else does (its status is
/// its report's): killed.
const UNKNOWN: i32 = nix::libc::SIGKILL;

impl Child {
    /// A child the daemon spawned, its pipes taken out.
    pub fn spawned(mut child: tokio::process::Child) -> Child {
        Child {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            inner: Inner::Spawned(child),
        }
    }

    /// A process the daemon did not spawn, known by `pidfd`, with the read
    /// ends of its stdout and stderr pipes. Must be called within the
    /// runtime.
    #[allow(unsafe_code)]
    pub fn forked(pidfd: OwnedFd, stdout: OwnedFd, stderr: OwnedFd) -> std::io::Result<Child> {
        // SAFETY: `pidfd` is owned here and by nothing else; the AsyncFd
        // owns it from now on (the I/O-safety condition of `register`).
        let pidfd =
            unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }.map_err(std::io::Error::from)?;
        Ok(Child {
            stdin: None,
            stdout: Some(ChildStdout::from_std(std::process::ChildStdout::from(stdout))?),
            stderr: Some(ChildStderr::from_std(std::process::ChildStderr::from(stderr))?),
            inner: Inner::Forked { pidfd, exited: false },
        })
    }

    /// Whether the daemon can read its exit status (it spawned it).
    pub fn is_spawned(&self) -> bool {
        matches!(self.inner, Inner::Spawned(_))
    }

    /// Waits for it to exit.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match &mut self.inner {
            Inner::Spawned(child) => child.wait().await,
            Inner::Forked { pidfd, exited } => {
                while !*exited {
                    let mut ready = pidfd.readable().await?;
                    *exited = !crate::process::pidfd_alive(pidfd.get_ref());
                    if !*exited {
                        ready.clear_ready();
                    }
                }
                Ok(ExitStatus::from_raw(UNKNOWN))
            }
        }
    }

    /// Its status if it exited (reaping a spawned one), else `None`.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match &mut self.inner {
            Inner::Spawned(child) => child.try_wait(),
            Inner::Forked { pidfd, exited } => {
                *exited = *exited || !crate::process::pidfd_alive(pidfd.get_ref());
                Ok(exited.then(|| ExitStatus::from_raw(UNKNOWN)))
            }
        }
    }

    /// SIGKILL to it (not waiting).
    #[allow(unsafe_code)]
    pub fn start_kill(&mut self) -> std::io::Result<()> {
        match &mut self.inner {
            Inner::Spawned(child) => child.start_kill(),
            Inner::Forked { pidfd, exited } => {
                if *exited {
                    return Ok(());
                }
                // SAFETY: a plain system call on a descriptor we own.
                let rc = unsafe {
                    nix::libc::syscall(
                        nix::libc::SYS_pidfd_send_signal,
                        pidfd.get_ref().as_raw_fd(),
                        nix::libc::SIGKILL,
                        std::ptr::null::<nix::libc::siginfo_t>(),
                        0u32,
                    )
                };
                if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            }
        }
    }
}
