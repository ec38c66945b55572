//! `hooks/register`, `hooks/unregister` and `hook/respond`: hooks of a
//! client's own, asked over the session's event stream.

use agentd_protocol::hooks::{HookRespondResult, HooksRegisterResult, HooksUnregisterResult};
use agentd_protocol::methods::{HookRespond, HooksRegister, HooksUnregister};
use jsonrpsee::RpcModule;

use crate::hooks::HookError;
use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register_async_conn::<HooksRegister, _, _, _>(module, |p, state, conn| async move {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let hook_id = session
            .hooks()
            .register(
                p.event,
                p.matcher.as_deref(),
                p.timeout,
                p.on_failure == Some(agentd_protocol::hooks::OnFailure::Block),
                conn,
            )
            .map_err(|e| match &e {
                HookError::Invalid { field, .. } => RpcError::invalid_params(*field, e),
                HookError::Unknown(_) => RpcError::invalid_params("session_id", e),
            })?;
        Ok(HooksRegisterResult { hook_id })
    });
    rpc::register::<HooksUnregister, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        session.hooks().unregister(&p.hook_id).map_err(|e| RpcError::invalid_params("hook_id", e))?;
        Ok(HooksUnregisterResult { hook_id: p.hook_id })
    });
    rpc::register::<HookRespond, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        session.hooks().respond(&p.request_id, p.output).map_err(|e| match e {
            HookError::Unknown(_) => RpcError::invalid_params("request_id", e),
            HookError::Invalid { .. } => RpcError::invalid_params("output", e),
        })?;
        Ok(HookRespondResult { request_id: p.request_id })
    });
}
