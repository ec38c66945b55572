//! Claiming the listening socket: from systemd, or by binding a path guarded
//! by a lock file so a second daemon cannot steal a live socket.
//!
//! **Invariant:** a socket file is only ever unlinked by the daemon holding
//! its lock, and only if it is still the inode that daemon bound.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::config::SocketConfig;
use crate::error::DaemonError;
use crate::server::systemd;

/// A listening socket and what is needed to give it back cleanly.
#[derive(Debug)]
pub struct BoundSocket {
    /// The listener, non-blocking, ready for tokio; taken by the server.
    pub listener: Option<std::os::unix::net::UnixListener>,
    /// The socket's path, when it has one.
    pub path: Option<PathBuf>,
    /// True when systemd passed the socket; the file is then systemd's.
    pub activated: bool,
    /// `(dev, ino)` of the socket file this daemon created, to unlink at exit.
    created: Option<(u64, u64)>,
    /// The held lock; released when dropped.
    _lock: Option<Flock<File>>,
}

impl BoundSocket {
    /// Removes the socket file if this daemon created it and it is still the
    /// same file (another daemon may have replaced it after a forced stop).
    pub fn remove_socket_file(&self) {
        let (Some(path), Some((dev, ino))) = (&self.path, self.created) else {
            return;
        };
        remove_if_same(path, dev, ino);
        // The lock file goes too, while still locked, if it is still ours
        // (issue 49 #13: it stayed after a clean stop). A daemon that opened
        // it meanwhile finds it unlinked once it gets the lock, and tries
        // again on a new file (see `take_lock`).
        if let Some(lock) = &self._lock
            && let Ok(meta) = lock.metadata()
        {
            remove_if_same(&lock_path(path), meta.dev(), meta.ino());
        }
    }

    /// Lets [`emergency_remove`] remove the socket file on an exit that
    /// skips the clean shutdown.
    pub fn register_for_emergency(&self) {
        if let (Some(path), Some((dev, ino))) = (&self.path, self.created) {
            let _ = EMERGENCY.set((path.clone(), dev, ino));
        }
    }
}

static EMERGENCY: std::sync::OnceLock<(std::path::PathBuf, u64, u64)> = std::sync::OnceLock::new();

/// Removes the socket file this daemon created, if it is still that file.
pub fn emergency_remove() {
    if let Some((path, dev, ino)) = EMERGENCY.get() {
        remove_if_same(path, *dev, *ino);
    }
}

fn remove_if_same(path: &std::path::Path, dev: u64, ino: u64) {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.dev() == dev && meta.ino() == ino => {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(path = %path.display(), "could not remove socket file: {e}");
            }
        }
        _ => {}
    }
}

/// Claims the socket described by `config`.
pub fn open(config: &SocketConfig) -> Result<BoundSocket, DaemonError> {
    if let SocketConfig::ActivatedOr(_) = config
        && let Some((listener, path)) = systemd::take_listener()?
    {
        // Hold the lock too, so a hand-started daemon cannot replace
        // systemd's socket file; not fatal if someone else holds it.
        let lock = path.as_deref().and_then(|p| match lock(p) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::warn!("socket activated but not locked: {e}");
                None
            }
        });
        tracing::info!(path = ?path, "using socket passed by systemd");
        return Ok(BoundSocket { listener: Some(listener), path, activated: true, created: None, _lock: lock });
    }
    bind_path(config.path())
}

fn bind_path(path: &Path) -> Result<BoundSocket, DaemonError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        prepare_dir(dir)?;
    }
    let lock = lock(path)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(DaemonError::AlreadyRunning {
                    socket: path.to_owned(),
                    lock: lock_path(path),
                    holder: ", and something answers on the socket".into(),
                });
            }
            tracing::info!(path = %path.display(), "replacing stale socket file");
            std::fs::remove_file(path).map_err(|e| DaemonError::io("remove stale socket", path, e))?;
        }
        Ok(_) => {
            return Err(DaemonError::NotASocket { path: path.to_owned() });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(DaemonError::io("inspect", path, e)),
    }
    // Between bind and chmod the socket has the umask's mode; the umask is
    // not borrowed to close that gap because it is process-wide (other
    // threads create files). The directory (0700 when we create it) and the
    // peer-uid check guard the gap.
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(|e| DaemonError::io("bind", path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| DaemonError::io("chmod 0600", path, e))?;
    // A burst of clients must queue, not get EAGAIN from connect().
    nix::sys::socket::listen(&listener, nix::sys::socket::Backlog::MAXCONN)
        .map_err(|e| DaemonError::io("listen", path, e.into()))?;
    listener.set_nonblocking(true).map_err(|e| DaemonError::io("set non-blocking", path, e))?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| DaemonError::io("inspect", path, e))?;
    tracing::info!(path = %path.display(), "listening");
    Ok(BoundSocket {
        listener: Some(listener),
        path: Some(path.to_owned()),
        activated: false,
        created: Some((meta.dev(), meta.ino())),
        _lock: Some(lock),
    })
}

/// Creates the socket's directory 0700 when missing, and refuses one that
/// another user could use to replace the socket or plant the lock file:
/// owned by someone else (unless it is a sticky root directory like /tmp),
/// or writable by others without the sticky bit.
fn prepare_dir(dir: &Path) -> Result<(), DaemonError> {
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| DaemonError::io("create directory", dir, e))?;
    }
    let meta = std::fs::metadata(dir).map_err(|e| DaemonError::io("inspect", dir, e))?;
    let unsafe_dir = |why: String| DaemonError::UnsafeDirectory { path: dir.to_owned(), why };
    if !meta.is_dir() {
        return Err(unsafe_dir("not a directory".into()));
    }
    let euid = nix::unistd::geteuid().as_raw();
    let sticky = meta.mode() & 0o1000 != 0;
    if meta.uid() != euid && !(meta.uid() == 0 && sticky) {
        return Err(unsafe_dir(format!(
            "it belongs to uid {}, not to this user ({euid}); pick another --socket",
            meta.uid()
        )));
    }
    if meta.mode() & 0o002 == 0 && meta.mode() & 0o020 != 0 && !sticky {
        return Err(unsafe_dir(super::group_writable(dir, meta.mode(), meta.gid())));
    }
    if meta.mode() & 0o022 != 0 && !sticky {
        return Err(unsafe_dir(format!(
            "other users can write to it (mode {:o}); chmod go-w it or pick another --socket",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// `agentd.sock` → `agentd.sock.lock`, beside it.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    socket.with_file_name(name)
}

/// Locks the state directory for this daemon's lifetime (`<dir>/daemon.lock`,
/// `flock`: the kernel drops it when the process dies, so a restart right
/// after a SIGKILL starts), writing this daemon's pid and socket into it.
pub fn lock_state_dir(dir: &Path, socket: &Path) -> Result<Flock<File>, DaemonError> {
    let contents = format!("{}\n{}", std::process::id(), socket.display());
    take_lock(&dir.join("daemon.lock"), &contents)?.map_err(|text| {
        let mut lines = text.lines().map(str::trim);
        let holder = match (lines.next().filter(|p| !p.is_empty()), lines.next().filter(|s| !s.is_empty())) {
            (Some(pid), Some(socket)) => format!(" (pid {pid}, socket {socket})"),
            (Some(pid), None) => format!(" (pid {pid})"),
            _ => String::new(),
        };
        DaemonError::StateInUse { state_dir: dir.to_owned(), holder }
    })
}

/// Takes the exclusive lock for `socket`, writing our pid into the lock file.
/// A clean stop removes the file while it holds the lock; [`take_lock`]
/// checks that the file it locked is still the one at the path, so two
/// daemons never lock different inodes of the same name.
fn lock(socket: &Path) -> Result<Flock<File>, DaemonError> {
    let path = lock_path(socket);
    take_lock(&path, &std::process::id().to_string())?.map_err(|text| {
        let pid = text.trim();
        DaemonError::AlreadyRunning {
            socket: socket.to_owned(),
            lock: path.clone(),
            holder: if pid.is_empty() { String::new() } else { format!(" by pid {pid}") },
        }
    })
}

/// Opens (creating) the lock file `path` and takes its exclusive `flock`
/// without waiting, writing `contents` into it: `Ok(Ok(lock))`, or
/// `Ok(Err(text))` with what the holder wrote when another process holds it.
fn take_lock(path: &Path, contents: &str) -> Result<Result<Flock<File>, String>, DaemonError> {
    // A lock file unlinked by the daemon that held it (its clean stop)
    // while this one waited for it: locked, it is a lock on nothing; the
    // next round opens the file now at the path.
    for _ in 0..100 {
        if let Some(taken) = take_lock_once(path, contents)? {
            return Ok(taken);
        }
    }
    Err(DaemonError::io("lock", path, std::io::Error::other("the lock file keeps being replaced")))
}

/// One round of [`take_lock`]: `None` when the file locked is no longer
/// the one at `path`.
fn take_lock_once(path: &Path, contents: &str) -> Result<Option<Result<Flock<File>, String>>, DaemonError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // A planted symlink must not make us truncate someone's file.
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|e| DaemonError::io("open lock file", path, e))?;
    let meta = file.metadata().map_err(|e| DaemonError::io("inspect lock file", path, e))?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(DaemonError::UnsafeDirectory {
            path: path.to_owned(),
            why: "the lock file is not a regular file of this user".into(),
        });
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut locked) => {
            let same = std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
            if !same {
                return Ok(None);
            }
            let _ = locked.set_len(0);
            let _ = locked.rewind();
            let _ = writeln!(locked, "{contents}");
            Ok(Some(Ok(locked)))
        }
        Err((mut file, errno)) if errno == nix::errno::Errno::EWOULDBLOCK => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Ok(Some(Err(text)))
        }
        Err((_, errno)) => Err(DaemonError::io("lock", path, std::io::Error::from(errno))),
    }
}
