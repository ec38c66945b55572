//! What agentd does with what an MCP server sends or asks unasked: its
//! progress (routed by token, unless read off its pipe), its log messages
//! (to the sessions that want them), its lists' changes (signalled to the
//! pool), and its requests of an earlier revision — elicitation, sampling,
//! roots — answered as `answers` answers a 2026-07-28 server's rounds.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::service::{NotificationContext, RoleClient};

/// What agentd does with what a server sends unasked.
#[derive(Clone)]
pub(super) struct Handler {
    pub(super) progress: super::progress::Listeners,
    /// Progress is read off the server's pipe ([`super::progress::Tap`]),
    /// not handled here.
    pub(super) tapped: bool,
    /// The server's entry name (for its log messages).
    pub(super) name: String,
    /// The workspace it serves: its one root.
    pub(super) workspace: PathBuf,
    pub(super) logs: Arc<super::logs::LogRouter>,
    pub(super) elicit: Arc<super::elicit::Targets>,
    /// Its lists changed.
    pub(super) changes: super::changes::Signal,
}

impl rmcp::ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.changes.send(agentd_protocol::mcp::McpList::Tools);
    }

    async fn on_resource_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.changes.send(agentd_protocol::mcp::McpList::Resources);
    }

    async fn on_prompt_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.changes.send(agentd_protocol::mcp::McpList::Prompts);
    }

    async fn on_progress(&self, params: rmcp::model::ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        if self.tapped {
            return;
        }
        let token = serde_json::to_value(&params.progress_token).unwrap_or_default();
        super::progress::route(&self.progress, &token, params.progress, params.total, params.message.as_deref());
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.logs.route(&self.name, super::logs::level_of(params.level), params.logger, params.data);
    }

    /// The user, through the session whose call is in flight.
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let request = serde_json::to_value(&request).unwrap_or_default();
        let answer = super::answers::elicitation(&self.name, &self.elicit, request).await?;
        serde_json::from_value(answer).map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    /// A completion, from the harness of the session whose call is in flight.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let request = serde_json::to_value(&params).unwrap_or_default();
        let result = super::answers::sampling(&self.name, &self.elicit, request).await?;
        serde_json::from_value(result)
            .map_err(|e| rmcp::ErrorData::internal_error(format!("the client's completion: {e}"), None))
    }

    /// The workspace, and the added directories of the session whose call
    /// is in flight.
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        super::answers::roots(&self.workspace, &self.elicit)
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            // Roots (the workspace). Not listChanged: a server's workspace
            // does not change (a session in a worktree uses its own pool
            // entries).
            serde_json::from_value(
                serde_json::json!({ "roots": {}, "elicitation": { "form": {}, "url": {} }, "sampling": {} }),
            )
            .unwrap_or_default(),
            rmcp::model::Implementation::new("agentd", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
