//! `agentd-sandbox --zygote DAEMON_PID`: one process per daemon, started
//! once, that forks the helpers which then wait for their calls, so a call's
//! helper costs a `fork` of a small process instead of an `exec` of this
//! program (its loader, relocations and runtime start: ~1.3 ms of CPU).
//!
//! - It is single-threaded and does nothing but fork: it never sees a
//!   call. On its stdin (a Unix socket) the daemon sends one byte with three
//!   descriptors — the new helper's control socket, and the write ends of
//!   its stdout and stderr pipes — and gets back the helper's pid (4 bytes,
//!   little-endian; 0 when it could not fork) with a pidfd of it.
//! - The child drops everything of the zygote's — its descriptors (all
//!   closed above stderr), its blocked signals — and becomes exactly what
//!   `agentd-sandbox --warm` is after its start: a helper that waits on its
//!   control socket for its one call (`helper::warm`), and exits after it.
//!   The call's request is parsed in the child, never here, so no call's
//!   data is ever in the zygote's memory, and no child sees another call.
//! - Nothing here enters a namespace, applies Landlock or seccomp: the
//!   walls are built per call in the child, as for any helper.
//! - The zygote dies with the daemon (`PR_SET_PDEATHSIG`), and its
//!   children with it. When the daemon closes its socket (it gave this
//!   zygote up), it forks no more and exits once its last child has: the
//!   calls its helpers run are not cut short. Its children are reaped by the kernel as they exit
//!   (`SIGCHLD` ignored), so none is left a zombie in its process group
//!   that the daemon would count alive once its pidfd says it exited.
#![allow(unsafe_code)] // fork, in a single-threaded process

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, sigaction, sigprocmask};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::unistd::{ForkResult, Pid, fork};

/// The byte that asks for a helper.
pub const FORK: u8 = b'f';

/// The zygote's `main`; `daemon` is the pid it must be the child of.
pub fn main(daemon: Option<&std::ffi::OsStr>) -> i32 {
    let daemon: Option<i32> = daemon.and_then(|d| d.to_str()?.parse().ok());
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || daemon != Some(nix::unistd::getppid().as_raw()) {
        return 1;
    }
    // Out of reach of `ptrace` and /proc/PID/mem of the user's other
    // processes (a command run with the sandbox off): what is planted in
    // the zygote would be in every helper it forks.
    if nix::sys::prctl::set_dumpable(false).is_err() {
        return 1;
    }
    // Children reaped as they exit: the daemon learns of their end from
    // their pidfds, and their status from their reports.
    if set_sigchld(SigHandler::SigIgn).is_err() {
        return 1;
    }
    loop {
        match receive() {
            Ok(Some(fds)) => answer(fork_helper(fds)),
            // The daemon closed the socket (it is done with us: it exits,
            // or it gave us up and started another) or it is broken: no
            // more helpers. Those made are running calls, and would die
            // with us (their death signal): we go when the last has.
            Ok(None) | Err(_) => return outlive_children(),
        }
    }
}

/// Waits until no child is left (with `SIGCHLD` ignored, `wait` returns
/// only then, with `ECHILD`).
fn outlive_children() -> i32 {
    loop {
        match nix::sys::wait::wait() {
            Err(Errno::ECHILD) => return 0,
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return 1,
        }
    }
}

fn set_sigchld(handler: SigHandler) -> nix::Result<SigAction> {
    // SAFETY: no handler function: ignored, or the default.
    unsafe { sigaction(Signal::SIGCHLD, &SigAction::new(handler, SaFlags::empty(), SigSet::empty())) }
}

/// One request: its byte and three descriptors; `None` at the end of the
/// socket. A request without exactly three is refused (its descriptors
/// closed) with `Some(vec![])`.
fn receive() -> Result<Option<Vec<OwnedFd>>, Errno> {
    let mut byte = [0u8; 1];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 3]);
    loop {
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        match recvmsg::<()>(0, &mut iov, Some(space.as_mut_slice()), MsgFlags::MSG_CMSG_CLOEXEC) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(list) = c {
                        // SAFETY: the kernel just gave these descriptors.
                        fds.extend(list.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
                    }
                }
                if msg.bytes == 0 {
                    return Ok(None);
                }
                let whole = byte[0] == FORK && fds.len() == 3;
                return Ok(Some(if whole { fds } else { Vec::new() }));
            }
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Forks a helper on `fds` (its control socket, stdout, stderr): its pid
/// and a pidfd of it, or `None` when it could not be made.
fn fork_helper(fds: Vec<OwnedFd>) -> Option<(i32, OwnedFd)> {
    if fds.len() != 3 {
        return None;
    }
    let zygote = nix::unistd::getpid();
    match fork_with_pidfd() {
        Err(_) => None,
        Ok(None) => std::process::exit(become_helper(&fds, zygote)),
        Ok(Some(made)) => Some(made),
    }
}

/// `fork`, with a pidfd of the child taken by the kernel as it is made
/// (`clone3` with `CLONE_PIDFD`): a child that dies at once, reaped at once
/// (`SIGCHLD` is ignored), can never leave its pid to another process
/// before the pidfd names it. Where `clone3` is refused (an older kernel,
/// a container's seccomp profile), `fork` then `pidfd_open`. `None` in the
/// child.
fn fork_with_pidfd() -> Result<Option<(i32, OwnedFd)>, Errno> {
    /// `struct clone_args` as of Linux 5.3 (`CLONE_ARGS_SIZE_VER0`).
    #[repr(C)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
    }
    let mut pidfd: nix::libc::c_int = -1;
    let args = CloneArgs {
        flags: nix::libc::CLONE_PIDFD as u64,
        pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: nix::libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
    };
    // SAFETY: a fork (no stack, no shared memory) of a process with one
    // thread; the kernel writes the pidfd into `pidfd`, which lives here.
    let pid = unsafe {
        nix::libc::syscall(nix::libc::SYS_clone3, std::ptr::addr_of!(args), std::mem::size_of::<CloneArgs>())
    };
    match pid {
        0 => return Ok(None),
        1.. => {
            // SAFETY: the kernel just gave this descriptor.
            return Ok(Some((pid as i32, unsafe { OwnedFd::from_raw_fd(pidfd) })));
        }
        _ => {}
    }
    match Errno::last() {
        Errno::ENOSYS | Errno::EPERM | Errno::EINVAL => {}
        e => return Err(e),
    }
    // SAFETY: this process has one thread.
    match unsafe { fork() }? {
        ForkResult::Child => Ok(None),
        ForkResult::Parent { child } => {
            // The child waits for its call: it does not exit by itself
            // before this (only if its set-up fails, or something kills
            // it; then the pidfd may name a process that reused the pid
            // only after the kernel's pid numbers went round).
            // SAFETY: a plain system call on a pid of our own child.
            let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, child.as_raw(), 0) };
            if fd < 0 {
                let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
                return Err(Errno::last());
            }
            // SAFETY: the kernel just gave this descriptor.
            Ok(Some((child.as_raw(), unsafe { OwnedFd::from_raw_fd(fd as i32) })))
        }
    }
}

/// In the child: dying with the zygote, its own process group, the
/// zygote's `SIGCHLD` disposition undone (as a spawned helper has it; not
/// dumpable, as a helper is while it waits),
/// the three descriptors as stdin, stdout and stderr and no other, then
/// the helper's wait for its call. Returns its exit code.
fn become_helper(fds: &[OwnedFd], zygote: Pid) -> i32 {
    const SETUP_FAILED: i32 = 125;
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err()
        || nix::unistd::getppid() != zygote
        || nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0)).is_err()
        || set_sigchld(SigHandler::SigDfl).is_err()
        || sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).is_err()
    {
        return SETUP_FAILED;
    }
    for (fd, target) in fds.iter().zip(0..) {
        // SAFETY: dup2 onto the standard descriptors of this process.
        if unsafe { nix::libc::dup2(fd.as_raw_fd(), target) } != target {
            return SETUP_FAILED;
        }
    }
    // SAFETY: closes every descriptor above stderr; nothing of this
    // process uses one any more (the copies in `fds` among them).
    if unsafe { nix::libc::syscall(nix::libc::SYS_close_range, 3u32, u32::MAX, 0u32) } != 0 {
        return SETUP_FAILED;
    }
    // (`fds` is never dropped: this process ends in `exit`.)
    super::helper::warm()
}

/// Sends the daemon the helper's pid and pidfd (pid 0 and none: not made).
fn answer(made: Option<(i32, OwnedFd)>) {
    let pid = made.as_ref().map_or(0, |(pid, _)| *pid);
    let head = pid.to_le_bytes();
    let iov = [std::io::IoSlice::new(&head)];
    let raw: Vec<std::os::fd::RawFd> = made.iter().map(|(_, fd)| fd.as_raw_fd()).collect();
    let cmsgs: Vec<ControlMessage<'_>> =
        if raw.is_empty() { Vec::new() } else { vec![ControlMessage::ScmRights(&raw)] };
    loop {
        match sendmsg::<()>(0, &iov, &cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Err(Errno::EINTR) => continue,
            _ => return,
        }
    }
}
