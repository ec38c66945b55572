//! agentd: the tool system of an AI coding agent, served on a Unix socket.
//!
//! The binary (`main.rs`) only parses arguments and sets up logging; all of the
//! daemon is here so tests can start it in-process. [`Daemon::bind`] claims the
//! socket (or takes the one systemd passed), [`Daemon::serve`] runs until the
//! shutdown token is cancelled, and [`run`] does both and tells systemd.

pub mod agents;
pub mod cli;
pub mod config;
pub mod error;
pub mod executor;
pub mod fs;
pub mod inline;
pub mod mcp;
pub mod permission;
pub mod process;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod shell;
pub mod store;
pub mod tool;
pub mod tools;
pub mod web;

pub use config::{Config, SocketConfig};

/// Optional cargo features compiled into this build.
pub const BUILD_FEATURES: &[&str] = &[
    #[cfg(feature = "test-tools")]
    "test-tools",
];
pub use error::DaemonError;
pub use server::Daemon;

use tokio_util::sync::CancellationToken;

/// Binds, tells systemd the daemon is ready, serves until `shutdown` is
/// cancelled, then tells systemd it is stopping and cleans up.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), DaemonError> {
    web::install_tls_provider();
    let daemon = Daemon::bind(config)?;
    server::systemd::notify("READY=1");
    daemon.serve(shutdown).await
}
