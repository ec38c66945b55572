//! `session/create`, `session/list`, `session/get`, `session/close`.

use agentd_protocol::methods::{SessionClose, SessionCreate, SessionGet, SessionList};
use agentd_protocol::session::{SessionCloseResult, SessionCreateResult, SessionListResult};
use jsonrpsee::RpcModule;

use agentd_protocol::ErrorCode;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

/// How long `session/create` waits for the file system.
const FS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    // Resolving `cwd` touches the file system, which can hang (a dead
    // network mount): off the connection's thread, with a deadline.
    rpc::register_async::<SessionCreate, _, _, _>(module, |params, state| async move {
        let creating = tokio::task::spawn_blocking(move || state.sessions.create(params));
        match tokio::time::timeout(FS_DEADLINE, creating).await {
            Ok(Ok(created)) => {
                let session = created.map_err(RpcError::from)?;
                Ok(SessionCreateResult { session_id: session.session_id.clone(), session })
            }
            Ok(Err(join)) => Err(RpcError::new(ErrorCode::InternalError, format!("session/create failed: {join}"))),
            Err(_) => Err(RpcError::invalid_params(
                "cwd",
                format!("the file system did not answer within {} s (a hung network mount?)", FS_DEADLINE.as_secs()),
            )),
        }
    });
    rpc::register::<SessionList, _, _>(module, |_params, state| {
        Ok(SessionListResult { sessions: state.sessions.list() })
    });
    rpc::register::<SessionGet, _, _>(module, |params, state| {
        state.sessions.get(&params.session_id).map_err(RpcError::from)
    });
    rpc::register::<SessionClose, _, _>(module, |params, state| {
        let closed = state.sessions.close(&params.session_id).map_err(RpcError::from)?;
        Ok(SessionCloseResult { session_id: closed.session_id })
    });
}
