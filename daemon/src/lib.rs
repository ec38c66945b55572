//! agentd: the tool system of an AI coding agent, served on a Unix socket.
//!
//! The binary (`main.rs`) only parses arguments and sets up logging; all of the
//! daemon is here so tests can start it in-process. [`Daemon::bind`] claims the
//! socket (or takes the one systemd passed), [`Daemon::serve`] runs until the
//! shutdown token is cancelled, and [`run`] does both and tells systemd.

pub(crate) mod agents;
pub mod cli;
pub mod config;
pub(crate) mod definitions;
pub mod error;
pub(crate) mod events;
pub(crate) mod executor;
pub(crate) mod fs;
pub(crate) mod hooks;
pub(crate) mod inline;
pub(crate) mod mcp;
pub mod metrics;
pub mod peers;
pub(crate) mod permission;
pub(crate) mod process;
pub mod sandbox;
pub mod schedule;
pub mod server;
pub mod session;
pub(crate) mod shell;
pub(crate) mod store;
pub(crate) mod sync;
pub(crate) mod tool;
pub(crate) mod tools;
pub mod trust;
pub mod web;

pub use config::{Config, SocketConfig};

/// Optional cargo features compiled into this build.
pub const BUILD_FEATURES: &[&str] = &[
    #[cfg(feature = "test-tools")]
    "test-tools",
];
pub use error::DaemonError;
pub use server::Daemon;
/// Grep's budget per line (the e2e tests check it holds).
pub use tools::grep::MAX_LINE_BYTES as GREP_MAX_LINE_BYTES;

use tokio_util::sync::CancellationToken;

/// The composition root: the session manager with its store (on disk, or
/// in memory for `--ephemeral`), the built-in tool registry, external tool
/// sources, the MCP pool, and itself as the Task tool's host.
pub fn compose_sessions(
    config: &Config,
    root: CancellationToken,
    tracker: tokio_util::task::TaskTracker,
    sandbox: std::sync::Arc<sandbox::Facility>,
    off_limits: std::sync::Arc<fs::OffLimits>,
) -> Result<std::sync::Arc<session::SessionManager>, DaemonError> {
    use std::sync::Arc;
    let store: Arc<dyn store::Store> = if config.persist {
        Arc::new(
            store::DiskStore::open(&config.state_dir, config.store_limits)
                .map_err(|e| DaemonError::io("open the session store in", &config.state_dir, e))?,
        )
    } else {
        Arc::new(store::MemoryStore::default())
    };
    let ledger = sandbox.ledger.clone();
    let sessions = session::SessionManager::new(
        root,
        store,
        config.max_tool_concurrency,
        Arc::new(tools::builtin_registry(config.web.clone())),
        tools::external_sources(),
        tracker,
        config.state_dir.clone(),
        sandbox,
    )
    .with_mcp_pool(Arc::new(mcp::Pool::new(config.persist.then(|| config.state_dir.clone()), ledger)))
    .with_off_limits(off_limits)
    .with_trust(Arc::new(trust::TrustStore::open(&config.state_dir, config.trust_project_files, config.persist)))
    .with_schedules(Arc::new(schedule::Scheduler::open(&config.state_dir, config.persist)));
    let sessions = Arc::new(sessions);
    sessions.install_agent_host();
    sessions.install_peers();
    Ok(sessions)
}

/// Binds, tells systemd the daemon is ready, serves until `shutdown` is
/// cancelled, then tells systemd it is stopping and cleans up.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), DaemonError> {
    web::install_tls_provider();
    let daemon = Daemon::bind(config)?;
    server::systemd::notify("READY=1");
    daemon.serve(shutdown).await
}
