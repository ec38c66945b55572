//! `tools/list` and `tool/call`.

use agentd_protocol::methods::{ToolCall, ToolsList};
use jsonrpsee::RpcModule;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register::<ToolsList, _, _>(module, |params, state| {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        Ok(session.tools_list())
    });
    rpc::register_async::<ToolCall, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        session.executor.call(&params.name, params.input).await.map_err(RpcError::from)
    });
}
