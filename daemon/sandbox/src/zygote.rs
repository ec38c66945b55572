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
//!   children with it. Its children are reaped by the kernel as they exit
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
            // The daemon closed the socket: it is done with us.
            Ok(None) => return 0,
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
    // SAFETY: this process has one thread.
    match unsafe { fork() } {
        Err(_) => None,
        Ok(ForkResult::Child) => std::process::exit(become_helper(&fds, zygote)),
        Ok(ForkResult::Parent { child }) => {
            drop(fds);
            // The child waits for its call: it does not exit by itself
            // before this, so the pidfd names it (its pid is reused only
            // after the kernel's pid numbers went round).
            // SAFETY: a plain system call on a pid of our own child.
            let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, child.as_raw(), 0) };
            if fd < 0 {
                let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
                return None;
            }
            // SAFETY: the kernel just gave this descriptor.
            Some((child.as_raw(), unsafe { OwnedFd::from_raw_fd(fd as i32) }))
        }
    }
}

/// In the child: dying with the zygote, its own process group, the
/// zygote's `SIGCHLD` disposition and dumpable flag undone (as a spawned
/// helper has them),
/// the three descriptors as stdin, stdout and stderr and no other, then
/// the helper's wait for its call. Returns its exit code.
fn become_helper(fds: &[OwnedFd], zygote: Pid) -> i32 {
    const SETUP_FAILED: i32 = 125;
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err()
        || nix::unistd::getppid() != zygote
        || nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0)).is_err()
        || set_sigchld(SigHandler::SigDfl).is_err()
        || sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).is_err()
        || nix::sys::prctl::set_dumpable(true).is_err()
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
