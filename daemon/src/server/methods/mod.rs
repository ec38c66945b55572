//! The RPC surface: one file per method group, each registering its methods
//! on the daemon's module.

mod daemon;
mod hooks;
mod session;
mod tools;
mod turn;
mod workspace;

use std::sync::Arc;

use jsonrpsee::RpcModule;

use super::DaemonState;

/// Every method the daemon serves.
pub(crate) fn module(state: Arc<DaemonState>) -> RpcModule<DaemonState> {
    let mut module = RpcModule::from_arc(state);
    daemon::register(&mut module);
    hooks::register(&mut module);
    session::register(&mut module);
    tools::register(&mut module);
    turn::register(&mut module);
    workspace::register(&mut module);
    module
}
