//! The daemon's configuration, as the binary parsed it or a test built it.

use std::path::{Path, PathBuf};

/// Default cap on one request line: 16 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Default number of tool calls a session runs at once.
pub const DEFAULT_MAX_TOOL_CONCURRENCY: u32 = 10;

/// Largest `max_concurrency` a session may ask for.
pub const MAX_TOOL_CONCURRENCY_LIMIT: u32 = 256;

/// Where the listening socket comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketConfig {
    /// Bind this path (directory created 0700 if missing, socket 0600).
    Path(PathBuf),
    /// Take the socket systemd passed (`LISTEN_FDS`); fall back to the path
    /// when the environment carries no socket for this process.
    ActivatedOr(PathBuf),
}

impl SocketConfig {
    /// The path the socket lives at (or would be bound at).
    pub fn path(&self) -> &Path {
        match self {
            SocketConfig::Path(p) | SocketConfig::ActivatedOr(p) => p,
        }
    }
}

/// Everything the daemon needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The listening socket.
    pub socket: SocketConfig,
    /// Directory for persistent state (created 0700).
    pub state_dir: PathBuf,
    /// Longest request line accepted, in bytes; a longer one gets an error and
    /// the connection is closed.
    pub max_request_bytes: usize,
    /// The only uid allowed to connect; `None` means the daemon's own euid.
    pub allowed_uid: Option<u32>,
    /// Default tool concurrency for sessions that do not set one.
    pub max_tool_concurrency: u32,
    /// How long shutdown waits for in-flight work after cancelling it.
    pub shutdown_grace: std::time::Duration,
    /// The Bash sandbox: where its helper is, or that it is turned off.
    pub sandbox: crate::sandbox::SandboxConfig,
    /// Refuse every connection from a descendant of the daemon, not only
    /// from the processes of a tool call. True for the binary (it starts
    /// nothing else); a test that runs the daemon in its own process and
    /// starts clients as children turns it off.
    pub refuse_descendants: bool,
    /// What the session store keeps (sessions, log bytes, idle age).
    pub store_limits: crate::store::disk::StoreLimits,
    /// Keep sessions in the state directory across restarts (`false`:
    /// in memory only).
    pub persist: bool,
    /// Obey every workspace's project files without the user's approval
    /// (`--trust-project-files`; see [`crate::trust`]).
    pub trust_project_files: bool,
    /// The network face (`--listen-tls`): the protocol over mutual TLS.
    pub tls: Option<TlsConfig>,
    /// Where `GET /metrics` is served (`--metrics`, a loopback address).
    pub metrics: Option<std::net::SocketAddr>,
    /// The daemon's way to the web: `--resolve` pins, the WebSearch
    /// backend (`--web-search-url`), the HTTP clients.
    pub web: std::sync::Arc<crate::web::Web>,
}

impl Config {
    /// A configuration with defaults for everything but the socket and state.
    pub fn new(socket: SocketConfig, state_dir: PathBuf) -> Self {
        Config {
            socket,
            state_dir,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            allowed_uid: None,
            max_tool_concurrency: DEFAULT_MAX_TOOL_CONCURRENCY,
            shutdown_grace: std::time::Duration::from_secs(10),
            sandbox: crate::sandbox::SandboxConfig::default(),
            refuse_descendants: true,
            store_limits: crate::store::disk::StoreLimits::default(),
            tls: None,
            metrics: None,
            persist: true,
            trust_project_files: false,
            web: Default::default(),
        }
    }
}

/// `$XDG_STATE_HOME/agentd`, else `$HOME/.local/state/agentd`, else a
/// per-user directory under the temp dir.
pub fn default_state_dir() -> PathBuf {
    let abs = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(dir) = abs(std::env::var_os("XDG_STATE_HOME")) {
        return dir.join("agentd");
    }
    if let Some(home) = abs(std::env::var_os("HOME")) {
        return home.join(".local/state/agentd");
    }
    std::env::temp_dir().join(format!("agentd-state-{}", nix::unistd::geteuid().as_raw()))
}

/// The default socket path for this process (see
/// [`agentd_protocol::socket::default_socket_path`]).
pub fn default_socket_path() -> PathBuf {
    agentd_protocol::socket::default_socket_path(
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).as_deref(),
        nix::unistd::geteuid().as_raw(),
        &std::env::temp_dir(),
    )
}

/// `--listen-tls` and its files.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// Address to listen on (`HOST:PORT`; port 0 picks a free one).
    pub listen: String,
    /// The server's certificate chain (PEM).
    pub cert: std::path::PathBuf,
    /// The server's private key (PEM; PKCS#8, PKCS#1 or SEC1).
    pub key: std::path::PathBuf,
    /// The CA whose signature a client's certificate must carry (PEM; one
    /// or more certificates).
    pub client_ca: std::path::PathBuf,
}
