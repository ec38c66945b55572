//! `session/create`, `session/list`, `session/get`, `session/close`.

use agentd_protocol::methods::{SessionClose, SessionCreate, SessionGet, SessionList};
use agentd_protocol::session::{SessionCloseResult, SessionCreateResult, SessionListResult};
use jsonrpsee::RpcModule;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register::<SessionCreate, _, _>(module, |params, state| {
        let session = state.sessions.create(params).map_err(RpcError::from)?;
        Ok(SessionCreateResult {
            session_id: session.session_id.clone(),
            session,
        })
    });
    rpc::register::<SessionList, _, _>(module, |_params, state| {
        Ok(SessionListResult {
            sessions: state.sessions.list(),
        })
    });
    rpc::register::<SessionGet, _, _>(module, |params, state| {
        state
            .sessions
            .get(&params.session_id)
            .map_err(RpcError::from)
    });
    rpc::register::<SessionClose, _, _>(module, |params, state| {
        let closed = state
            .sessions
            .close(&params.session_id)
            .map_err(RpcError::from)?;
        Ok(SessionCloseResult {
            session_id: closed.session_id,
        })
    });
}
