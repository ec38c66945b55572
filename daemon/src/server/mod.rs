//! The server: claims the socket, accepts connections, checks who is
//! connecting, and shuts down cleanly.
//!
//! **Invariant:** only `protocol` and this module know JSON-RPC; sessions and
//! everything below them see typed params and return typed results.
//!
//! Shutdown is close → cancel → wait: stop accepting, cancel the daemon's
//! token (every connection, session, turn and call is a child of it), wait
//! for tracked tasks up to the grace period, remove the socket file.

mod connection;
mod dispatch;
pub mod listen;
mod methods;
pub mod rpc;
pub mod systemd;
pub mod tls;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use jsonrpsee::Methods;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::Config;
use crate::error::DaemonError;
use crate::session::SessionManager;

/// What the RPC methods see: the daemon's state.
pub struct DaemonState {
    /// When the daemon started.
    pub started: Instant,
    /// The socket path, when known.
    pub socket: Option<PathBuf>,
    /// Whether systemd passed the socket.
    pub activated: bool,
    /// The address of the TLS face, when `--listen-tls` is given.
    pub tls: Option<std::net::SocketAddr>,
    /// Persistent state directory.
    pub state_dir: PathBuf,
    /// Open sessions.
    pub sessions: Arc<SessionManager>,
    /// Connections open now.
    pub connections: AtomicU64,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Every task the daemon spawned and still waits for at shutdown.
    pub tracker: TaskTracker,
    /// What the Bash sandbox can do here.
    pub sandbox: Arc<crate::sandbox::Facility>,
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) state: Arc<DaemonState>,
    pub(crate) methods: Methods,
    pub(crate) tracker: TaskTracker,
    pub(crate) max_request_bytes: usize,
    pub(crate) allowed_uid: u32,
    pub(crate) refuse_descendants: bool,
}

/// A daemon that holds its socket and is ready to serve.
pub struct Daemon {
    socket: listen::BoundSocket,
    listener: tokio::net::UnixListener,
    tls: Option<tls::TlsListener>,
    /// `--metrics`'s listener, served once the daemon serves.
    metrics: Option<std::net::TcpListener>,
    shared: Arc<Shared>,
    root: CancellationToken,
    config: Config,
    /// The state directory's lock, held while the daemon serves.
    _state_lock: nix::fcntl::Flock<std::fs::File>,
    /// The state directory and the TLS face's files, kept from every tool
    /// while the daemon (or any of its sessions) lives.
    _off_limits: Arc<crate::fs::OffLimits>,
}

impl Daemon {
    /// Claims the socket and the state directory. Call from within a tokio
    /// runtime. Fails when another daemon serves the same socket.
    pub fn bind(config: Config) -> Result<Daemon, DaemonError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&config.state_dir)
            .map_err(|e| DaemonError::io("create state directory", &config.state_dir, e))?;
        check_state_dir(&config.state_dir)?;
        // Before anything reads or changes the state (restoring sessions,
        // ending what a previous daemon left): one daemon per directory.
        let state_lock = listen::lock_state_dir(&config.state_dir, config.socket.path())?;
        crate::fs::pending::clean(&config.state_dir);
        // Layers a daemon that stopped mid-call left behind.
        crate::sandbox::layer::sweep(&config.state_dir);
        let (placeholders, _) = crate::sandbox::placeholders::Ledger::open(&config.state_dir);
        let (ledger, _) = crate::process::Ledger::open(&config.state_dir);
        if crate::BUILD_FEATURES.contains(&"test-tools") {
            tracing::warn!(
                "this build carries test-only tools (cargo feature test-tools); do not use it for real work"
            );
        }
        tracing::debug!(?config, "starting");
        crate::process::become_subreaper();
        raise_open_file_limit();
        // The TLS face before the socket: a face that cannot be set up
        // leaves no socket behind. Its files are read now and hidden from
        // every tool from now on.
        let tls = config.tls.as_ref().map(tls::bind).transpose()?;
        let metrics = config.metrics.map(crate::metrics::bind).transpose().map_err(DaemonError::Metrics)?;
        let secret_files =
            config.tls.as_ref().map(|t| vec![t.cert.clone(), t.key.clone(), t.client_ca.clone()]).unwrap_or_default();
        let off_limits = Arc::new(crate::fs::OffLimits::guard(&config.state_dir, &secret_files));
        let mut socket = listen::open(&config.socket)?;
        socket.register_for_emergency();
        let path = socket.path.clone().unwrap_or_else(|| config.socket.path().to_owned());
        // The server owns the only descriptor, so dropping it stops accepting.
        let listener = socket
            .listener
            .take()
            .map(tokio::net::UnixListener::from_std)
            .transpose()
            .map_err(|e| DaemonError::io("register listener", &path, e))?
            .ok_or_else(|| DaemonError::Activation("no listener".into()))?;
        crate::process::cloexec_inherited();
        let root = CancellationToken::new();
        let tracker = TaskTracker::new();
        // The probe tries a call's set-up in a directory of the state's (in
        // a container /tmp may be read-only).
        // (One daemon holds the state directory's lock: the name is ours.)
        let scratch = config.state_dir.join("probe");
        let _ = std::fs::remove_dir_all(&scratch);
        let made = std::fs::DirBuilder::new().mode(0o700).create(&scratch).is_ok();
        let mut facility = crate::sandbox::Facility::probe(&config.sandbox, made.then_some(scratch.as_path()), ledger);
        facility.placeholders = placeholders;
        if made {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        if config.sandbox.require
            && let Some(why) = facility.require_full()
        {
            return Err(DaemonError::SandboxRequired(why));
        }
        if tls.is_some() && !(facility.available && facility.namespaces) {
            tracing::warn!(
                "the TLS face's key is hidden from file tools, but the sandbox cannot hide it from commands \
                 here (every Bash command asks; a bypass session's read it): run with --require-sandbox"
            );
        }
        facility.state_dir = std::fs::canonicalize(&config.state_dir).ok();
        // The socket's directory is hidden from commands (they are refused
        // by the peer check anyway) — unless it holds the state directory,
        // where each call keeps its temporary directory and output.
        let socket_dir = path.parent().and_then(|d| std::fs::canonicalize(d).ok());
        match (&socket_dir, &facility.state_dir) {
            (Some(dir), Some(state)) if state.starts_with(dir) => tracing::info!(
                "the state directory {} is inside the socket's directory; that directory is not hidden from commands",
                state.display()
            ),
            (Some(dir), _) => facility.hide.push(dir.clone()),
            _ => {}
        }
        // Sessions' records and event logs (every session's commands and
        // results) are nobody's business inside a confined command.
        // The ledgers say which processes the next daemon kills.
        if let Some(state) = facility.state_dir.clone() {
            // Each call's own output directory under `sessions` stays.
            // And every session's plan file (a session reads its own with Read).
            {
                use std::os::unix::fs::DirBuilderExt;
                let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state.join("plans"));
                // MCP servers' OAuth tokens: never a command's.
                if config.persist {
                    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state.join("mcp-auth"));
                    // The user's approvals of workspaces' files name every
                    // trusted path on the machine.
                    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state.join("trust"));
                    // Schedules' prompts are the sessions' own.
                    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(state.join("schedules"));
                }
            }
            let private = [
                Some("plans"),
                Some("procs"),
                Some("pending-writes"),
                Some("sessions"),
                config.persist.then_some("store"),
                config.persist.then_some("mcp-tools"),
                config.persist.then_some("mcp-auth"),
                config.persist.then_some("trust"),
                config.persist.then_some("schedules"),
            ];
            for dir in private.into_iter().flatten().map(|d| state.join(d)) {
                // A directory under one already hidden is gone with it.
                if !facility.hide.iter().any(|h| dir.starts_with(h)) {
                    facility.hide.push(dir);
                }
            }
        }
        // Calls' temp directories at a short path (a socket bound there
        // fits the kernel's 108 bytes), hidden like the sessions' outputs:
        // a call sees its own only.
        if facility.helper.is_some()
            && let Some(base) = crate::sandbox::short_tmp_base()
        {
            facility.hide.push(base.clone());
            facility.call_tmp = Some(base);
        }
        let sandbox = Arc::new(facility);
        let state = Arc::new(DaemonState {
            started: Instant::now(),
            socket: socket.path.clone(),
            activated: socket.activated,
            tls: tls.as_ref().map(|t| t.local),
            state_dir: config.state_dir.clone(),
            sessions: crate::compose_sessions(
                &config,
                root.clone(),
                tracker.clone(),
                sandbox.clone(),
                off_limits.clone(),
            )?,
            connections: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            tracker: tracker.clone(),
            sandbox,
        });
        let restored = state.sessions.restore();
        if restored > 0 {
            tracing::info!(sessions = restored, "sessions restored from {}", config.state_dir.display());
        }
        state.sessions.start_schedules(&tracker, root.clone());
        // Said once where a user reads the log; daemon/info and each
        // session say it too.
        if let Some(note) = crate::session::claude_settings_not_imported() {
            tracing::warn!("{note}");
        }
        let methods: Methods = methods::module(state.clone()).into();
        let allowed_uid = config.allowed_uid.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        let shared = Arc::new(Shared {
            state,
            methods,
            tracker,
            max_request_bytes: config.max_request_bytes,
            allowed_uid,
            refuse_descendants: config.refuse_descendants,
        });
        Ok(Daemon {
            socket,
            listener,
            tls,
            metrics,
            shared,
            root,
            config,
            _state_lock: state_lock,
            _off_limits: off_limits,
        })
    }

    /// The socket path the daemon serves, when it has one.
    pub fn socket_path(&self) -> Option<&Path> {
        self.socket.path.as_deref()
    }

    /// The daemon's state, for in-process inspection (tests, benchmarks).
    pub fn state(&self) -> Arc<DaemonState> {
        self.shared.state.clone()
    }

    /// The names of every method the daemon serves (subscriptions and
    /// their unsubscribe methods included), sorted.
    pub fn method_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.shared.methods.method_names().map(str::to_owned).collect();
        names.sort();
        names
    }

    /// Serves until `shutdown` is cancelled, then shuts down cleanly.
    ///
    /// # Cancellation safety
    /// Cancel `shutdown` rather than dropping this future: dropping it skips
    /// the cleanup (in-flight work is then cancelled only as its tasks drop).
    pub async fn serve(self, shutdown: CancellationToken) -> Result<(), DaemonError> {
        let next_conn = AtomicUsize::new(1);
        self.shared.tracker.spawn(crate::process::reaper(self.root.clone()));
        if let Some(listener) = self.metrics {
            let state = self.shared.state.clone();
            let page = Arc::new(move || {
                let rss = crate::process::rss_kib(std::process::id() as i32).unwrap_or(0);
                state.sessions.metrics().render(&state.sessions.activity(), rss, crate::metrics::open_fds())
            });
            self.shared.tracker.spawn(crate::metrics::serve(listener, page, self.root.clone()));
        }
        // The sessions a restart brought back: their SessionStart hooks run
        // with `source: resume` (what they add is in their hook events).
        let restored: Vec<String> = self.shared.state.sessions.list().into_iter().map(|s| s.session_id).collect();
        if !restored.is_empty() {
            let sessions = self.shared.state.sessions.clone();
            self.shared.tracker.spawn(async move {
                use futures_util::StreamExt;
                // A few at a time: a store of a thousand sessions must not
                // start a thousand hook processes at once.
                let starts = restored.into_iter().map(|id| {
                    let sessions = sessions.clone();
                    async move { sessions.session_start(&id, "resume").await }
                });
                futures_util::stream::iter(starts).buffer_unordered(8).for_each(|_| async {}).await;
            });
        }
        // Saves what changed and syncs the event logs, in groups.
        let state = self.shared.state.clone();
        let stop_flushing = self.root.clone();
        self.shared.tracker.spawn(async move {
            let mut tick = tokio::time::interval(FLUSH_EVERY);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop_flushing.cancelled() => break,
                }
                let state = state.clone();
                let _ = tokio::task::spawn_blocking(move || state.sessions.flush()).await;
            }
        });
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let id = next_conn.fetch_add(1, Ordering::Relaxed);
                        let span = tracing::info_span!("conn", id);
                        let cancel = self.root.child_token();
                        let fut = connection::serve(stream, id, self.shared.clone(), cancel);
                        self.shared.tracker.spawn(fut.instrument(span));
                    }
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        if backed_off(&shutdown).await {
                            break;
                        }
                    }
                },
                accepted = tls::accept(self.tls.as_ref()), if self.tls.is_some() => {
                    match accepted {
                        Ok(pending) => {
                            let id = next_conn.fetch_add(1, Ordering::Relaxed);
                            let span = tracing::info_span!("conn", id, tls = true);
                            let cancel = self.root.child_token();
                            let shared = self.shared.clone();
                            let fut = async move {
                                // Nothing of the protocol before the client's certificate is verified.
                                let handshake = tokio::select! {
                                    done = pending.handshake() => done,
                                    _ = cancel.cancelled() => None,
                                };
                                if let Some(accepted) = handshake {
                                    connection::serve_tls(accepted, id, shared, cancel).await;
                                }
                            };
                            self.shared.tracker.spawn(fut.instrument(span));
                        }
                        Err(e) => {
                            tracing::warn!("TLS accept failed: {e}");
                            if backed_off(&shutdown).await {
                                break;
                            }
                        }
                    }
                }
            }
        }
        tracing::info!("shutting down");
        systemd::notify("STOPPING=1");
        drop(self.listener);
        drop(self.tls);
        // Sessions first, so their calls end as interrupted (not as
        // failures that would cancel siblings), with their results recorded;
        // the sessions stay in the store for the next daemon.
        self.shared.state.sessions.stop_all();
        self.shared.state.sessions.mcp_pool().stop_all().await;
        self.root.cancel();
        self.shared.tracker.close();
        if tokio::time::timeout(self.config.shutdown_grace, self.shared.tracker.wait()).await.is_err() {
            tracing::warn!(tasks = self.shared.tracker.len(), "tasks still running after the grace period");
        }
        self.shared.state.sessions.flush();
        self.socket.remove_socket_file();
        tracing::info!("stopped");
        Ok(())
    }
}

use std::os::unix::fs::DirBuilderExt;

/// After a failed accept (out of descriptors or similar): waits a
/// moment instead of spinning; true when the daemon is shutting down
/// meanwhile.
async fn backed_off(shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => false,
    }
}

/// Raises the soft limit of open descriptors to the hard one: every
/// connection, command and active session's event log holds some.
fn raise_open_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
    }
}

/// How often changed sessions are saved and event logs synced.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Why a directory only its group can also write is refused, and what to
/// do: a volume mounted with Kubernetes' `fsGroup` (or a shared group
/// directory) is group-writable, with the set-group-id bit.
pub(crate) fn group_writable(dir: &Path, mode: u32, gid: u32) -> String {
    let mounted = if mode & 0o2000 != 0 {
        " (set-group-id and group-writable, as a volume mounted with Kubernetes' fsGroup is)"
    } else {
        ""
    };
    format!(
        "its group (gid {gid}) can write to it (mode {:o}){mounted}; give agentd a directory of its own inside it, \
         which it makes private (e.g. --state-dir {}), or chmod g-w it",
        mode & 0o7777,
        dir.join("agentd").display()
    )
}

/// The state directory must be ours alone: owned by this user and not
/// writable by anyone else (it holds sessions, rules and command output).
fn check_state_dir(dir: &Path) -> Result<(), DaemonError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| DaemonError::io("inspect state directory", dir, e))?;
    let me = nix::unistd::geteuid().as_raw();
    let why = if meta.uid() != me {
        Some(format!("it belongs to uid {}, not {me}", meta.uid()))
    } else if meta.mode() & 0o002 == 0 && meta.mode() & 0o020 != 0 {
        Some(group_writable(dir, meta.mode(), meta.gid()))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!("others can write to it (mode {:o}); chmod 700 it", meta.mode() & 0o777))
    } else {
        None
    };
    match why {
        Some(why) => Err(DaemonError::UnsafeDirectory { path: dir.to_owned(), why }),
        None => Ok(()),
    }
}
