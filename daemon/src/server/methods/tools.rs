//! `tools/list` and `tool/call`.

use agentd_protocol::methods::{ToolCall, ToolsList};
use jsonrpsee::RpcModule;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register::<ToolsList, _, _>(module, |params, state| {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let mut list = session.tools_list();
        if params.hints {
            list.hints = list.tools.iter().filter_map(|t| Some((t.name.clone(), session.hints(&t.name)?))).collect();
            list.labels = list.tools.iter().filter_map(|t| Some((t.name.clone(), session.label(&t.name)?))).collect();
        }
        Ok(list)
    });
    rpc::register_async::<ToolCall, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        session.call(&params.name, params.input, params.tool_use_id).await.map_err(RpcError::from)
    });
}
