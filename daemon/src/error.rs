//! Errors of the daemon's own machinery (socket, lock, state directory), each
//! saying what was being done and on what.

use std::path::PathBuf;

/// A failure to start or run the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// `--require-sandbox`, and the sandbox is not whole.
    #[error("{0}")]
    SandboxRequired(String),
    /// `--listen-tls` cannot be set up (a file, a key, the address).
    #[error("--listen-tls: {0}")]
    Tls(String),
    /// `--metrics` cannot be served (not a loopback address, taken).
    #[error("{0}")]
    Metrics(String),
    /// A file-system or socket operation on a path failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`bind`, `create directory`, …).
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Another daemon holds the lock for this socket.
    #[error("another agentd is already serving {socket} (lock {lock} is held{holder})")]
    AlreadyRunning {
        /// The socket it serves.
        socket: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// `, pid N` when the lock file names the holder.
        holder: String,
    },
    /// Another daemon uses the same state directory.
    #[error(
        "another agentd{holder} is using the state directory {state_dir}; stop it, or give this one a state \
         directory of its own (--state-dir, AGENTD_STATE_DIR)"
    )]
    StateInUse {
        /// The state directory.
        state_dir: PathBuf,
        /// ` (pid N, socket S)` when the lock file names the holder.
        holder: String,
    },
    /// The socket path is taken by something that is not a socket.
    #[error("refusing to replace {path}: it exists and is not a socket")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The socket or state directory (or a lock file in it) is not
    /// private to this user.
    #[error("{path} is not private: {why}")]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// systemd passed sockets we cannot use.
    #[error("socket activation: {0}")]
    Activation(String),
}

impl DaemonError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DaemonError::Io { op, path: path.into(), source }
    }
}
