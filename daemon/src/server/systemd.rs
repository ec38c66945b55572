//! The two systemd interfaces the daemon speaks: socket activation
//! (`LISTEN_PID`/`LISTEN_FDS`, sd_listen_fds(3)) and readiness notification
//! (`NOTIFY_SOCKET`, sd_notify(3)). Both are small enough that a crate would
//! add more than it saves.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::socket::{SockType, UnixAddr, getsockname, getsockopt, sockopt};

use crate::error::DaemonError;

/// First file descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

static TAKEN: AtomicBool = AtomicBool::new(false);

/// The listening Unix socket systemd passed to this process, with its path,
/// or `None` when the environment carries none for us.
///
/// Takes the descriptor at most once per process: a second call returns
/// `None`, so two daemons in one process never share it.
pub fn take_listener() -> Result<Option<(UnixListener, Option<PathBuf>)>, DaemonError> {
    let pid_matches = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        .is_some_and(|p| p == std::process::id());
    let count = std::env::var("LISTEN_FDS").ok().and_then(|n| n.trim().parse::<i32>().ok());
    let Some(count) = count.filter(|n| *n > 0 && pid_matches) else {
        return Ok(None);
    };
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    if count > 1 {
        tracing::warn!(count, "systemd passed more than one socket; serving the first only");
    }
    // SAFETY: LISTEN_PID names this process, so by the sd_listen_fds(3)
    // protocol descriptor 3 is open and was handed to us; TAKEN guarantees we
    // wrap it in an owner exactly once.
    #[allow(unsafe_code)]
    let fd = unsafe { OwnedFd::from_raw_fd(LISTEN_FDS_START) };
    let bad = |what: String| DaemonError::Activation(what);
    // systemd passes the descriptor without close-on-exec; tools must not inherit it.
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map_err(|e| bad(format!("set close-on-exec on fd 3: {e}")))?;
    let sock_type = getsockopt(&fd, sockopt::SockType).map_err(|e| bad(format!("fd 3 is not a socket: {e}")))?;
    if sock_type != SockType::Stream {
        return Err(bad(format!("fd 3 is a {sock_type:?} socket, not a stream socket")));
    }
    let listening = getsockopt(&fd, sockopt::AcceptConn).unwrap_or(false);
    if !listening {
        return Err(bad("fd 3 is not a listening socket".into()));
    }
    let addr: UnixAddr = getsockname(std::os::fd::AsRawFd::as_raw_fd(&fd))
        .map_err(|e| bad(format!("fd 3 is not a Unix socket: {e}")))?;
    let path = addr.path().map(PathBuf::from);
    let listener = UnixListener::from(fd);
    listener.set_nonblocking(true).map_err(|e| bad(format!("set fd 3 non-blocking: {e}")))?;
    Ok(Some((listener, path)))
}

/// Sends `state` (e.g. `READY=1`) to the service manager when `NOTIFY_SOCKET`
/// is set; does nothing otherwise. Failures are logged, never fatal: the
/// daemon works the same without systemd.
pub fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str());
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(PathBuf::from(&target)),
    };
    let sent = addr.and_then(|addr| UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &addr));
    match sent {
        Ok(_) => tracing::debug!(state, "notified service manager"),
        Err(e) => tracing::warn!(state, socket = ?target, "sd_notify failed: {e}"),
    }
}
