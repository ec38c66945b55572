//! `session/create`, `session/list`, `session/get`, `session/close`, and
//! `mcp/list` (the servers sessions share), `mcp/prompts` and
//! `mcp/get_prompt` (a session's servers' prompts).

use agentd_protocol::mcp::{McpListResult, McpPromptsResult};
use agentd_protocol::methods::{
    McpGetPrompt, McpList, McpLogin, McpLoginComplete, McpLogout, McpPrompts, SessionClose, SessionCreate, SessionGet,
    SessionList,
};
use agentd_protocol::session::{SessionCloseResult, SessionCreateResult, SessionListResult};
use jsonrpsee::RpcModule;

use agentd_protocol::ErrorCode;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

/// How long `session/create` waits for the file system.
const FS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `f` (which touches the file system) off the connection's thread,
/// within [`FS_DEADLINE`].
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::session::SessionError> + Send + 'static,
) -> Result<T, RpcError> {
    match tokio::time::timeout(FS_DEADLINE, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(done)) => done.map_err(RpcError::from),
        Ok(Err(join)) => Err(RpcError::new(ErrorCode::InternalError, format!("session/create failed: {join}"))),
        Err(_) => Err(RpcError::invalid_params(
            "cwd",
            format!("the file system did not answer within {} s (a hung network mount?)", FS_DEADLINE.as_secs()),
        )),
    }
}

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    // Resolving `cwd` touches the file system, which can hang (a dead
    // network mount): off the connection's thread, with a deadline.
    // Resolving `cwd` touches the file system, which can hang (a dead
    // network mount): off the connection's thread, with a deadline. MCP
    // servers whose tools were never seen are started in between, each
    // within its own start-up timeout.
    rpc::register_async_conn::<SessionCreate, _, _, _>(module, |params, state, conn| async move {
        let prepared = {
            let state = state.clone();
            blocking(move || state.sessions.prepare(params)).await?
        };
        prepared.mcp.discover().await;
        let sessions = state.clone();
        let session = blocking(move || sessions.sessions.commit(prepared)).await?;
        if session.close_with_connection {
            match conn {
                Some(conn) => state.sessions.own(conn, &session.session_id),
                None => tracing::warn!("close_with_connection: no connection id; the session stays open"),
            }
        }
        let additional_context = state.sessions.session_start(&session.session_id, "startup").await;
        Ok(SessionCreateResult { session_id: session.session_id.clone(), session, additional_context })
    });
    rpc::register::<McpList, _, _>(module, |_params, state| {
        Ok(McpListResult { servers: state.sessions.mcp_pool().list() })
    });
    rpc::register_async::<McpPrompts, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let (prompts, errors) = session.mcp().prompts().await;
        Ok(McpPromptsResult { prompts, errors })
    });
    rpc::register_async::<McpGetPrompt, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        if !session.mcp().has_server(&params.server) {
            return Err(RpcError::invalid_params(
                "server",
                format!("this session has no MCP server {:?}", params.server),
            ));
        }
        session
            .mcp()
            .get_prompt(&params.server, &params.name, &params.arguments)
            .await
            .map_err(|e| RpcError::new(ErrorCode::McpServerFailed, e))
    });
    rpc::register_async::<McpLogin, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let server = session.mcp().server(&params.server).map_err(|e| RpcError::invalid_params("server", e))?.clone();
        crate::mcp::auth::check_redirect(&params.redirect_uri)
            .map_err(|e| RpcError::invalid_params("redirect_uri", e))?;
        let (login_id, authorization_url) = state
            .sessions
            .mcp_pool()
            .login(&server, &params.redirect_uri)
            .await
            .map_err(|e| RpcError::new(ErrorCode::McpServerFailed, e))?;
        Ok(agentd_protocol::mcp::McpLoginResult { login_id, authorization_url })
    });
    rpc::register_async::<McpLoginComplete, _, _, _>(module, |params, state| async move {
        let (server, scopes) = state
            .sessions
            .mcp_pool()
            .complete_login(&params.login_id, &params.callback_url)
            .await
            .map_err(|e| RpcError::new(ErrorCode::McpServerFailed, e))?;
        let (state, last_error) = server.state();
        Ok(agentd_protocol::mcp::McpLoginCompleteResult { server: server.name.clone(), scopes, state, last_error })
    });
    rpc::register_async::<McpLogout, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let server = session.mcp().server(&params.server).map_err(|e| RpcError::invalid_params("server", e))?.clone();
        Ok(agentd_protocol::mcp::McpLogoutResult { forgotten: server.logout().await })
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
