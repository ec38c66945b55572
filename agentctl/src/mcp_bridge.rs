//! `agentctl mcp`: agentd's tools for any MCP client. A stdio MCP server
//! (the official SDK's server side) in front of one daemon session: MCP
//! `tools/list` is the session's `tools/list` (with each tool's hints as
//! annotations), `tools/call` is `tool/call` (same permission checks and
//! ordering), the call's `tool/progress` events become MCP progress
//! notifications, MCP cancellation becomes `turn/cancel` of that call, and
//! a permission request becomes an elicitation when the client supports
//! it (refused otherwise, saying how to allow it). `agentctl respond` from
//! another terminal answers as well; whichever answers first wins.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentd_protocol::methods::{PermissionRespond, ToolCall, ToolsList, TurnCancel};
use agentd_protocol::permission::{PermissionDecision, PermissionRespondParams};
use agentd_protocol::tools::{ContentBlock, ToolCallParams, ToolCallResult, ToolsListParams};
use agentd_protocol::turn::{EventKind, TurnCancelParams};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams};
use rmcp::service::{Peer, RequestContext, RoleServer};
use serde_json::{Value, json};

use agentd_client::Client;

/// One call in flight: where its progress and questions go.
struct Route {
    peer: Peer<RoleServer>,
    progress: Option<rmcp::model::ProgressToken>,
    steps: u64,
    elicit: bool,
}

/// The MCP server: one session of the daemon.
pub struct Bridge {
    client: Arc<Client>,
    session: String,
    calls: Arc<Mutex<HashMap<String, Route>>>,
    asking: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
    next: AtomicU64,
    prefix: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Bridge {
    /// A bridge to `session` over `client`.
    pub fn new(client: Arc<Client>, session: String) -> Self {
        Bridge {
            client,
            session,
            calls: Arc::default(),
            asking: Arc::default(),
            next: AtomicU64::new(0),
            prefix: format!("mcp-{}-{:x}", std::process::id(), rand_u32()),
        }
    }

    /// Serves MCP on stdin/stdout until the client goes away (or the
    /// session closes).
    pub async fn serve_stdio(self) -> Result<(), String> {
        // Only what the bridge acts on: a Read then costs no notification.
        let kinds = ["tool/progress", "permission/request", "permission/resolved", "mcp/elicitation"];
        // It answers the elicitations of agentd's own MCP servers: passed
        // on to this bridge's client (declined when it cannot ask).
        let events = self
            .client
            .stream_with(&self.session, None, Some(&kinds), &[agentd_protocol::mcp::ELICITATION_CAPABILITY])
            .await
            .map_err(|e| e.to_string())?;
        let follower = tokio::spawn(follow(
            events,
            self.client.clone(),
            self.session.clone(),
            self.calls.clone(),
            self.asking.clone(),
        ));
        let service = self.serve(rmcp::transport::stdio()).await.map_err(|e| format!("MCP handshake: {e}"))?;
        tokio::select! {
            _ = service.waiting() => {}
            _ = follower => eprintln!("agentctl mcp: the session was closed"),
        }
        Ok(())
    }
}

/// Follows the session's events: progress and permission requests of the
/// bridge's calls go to their MCP client.
async fn follow(
    mut events: jsonrpsee::core::client::Subscription<agentd_protocol::turn::Event>,
    client: Arc<Client>,
    session: String,
    calls: Arc<Mutex<HashMap<String, Route>>>,
    asking: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
) {
    while let Some(Ok(event)) = events.next().await {
        match event.kind {
            EventKind::ToolProgress { tool_use_id, render, .. } => {
                let target = lock(&calls).get_mut(&tool_use_id).and_then(|r| {
                    r.steps += 1;
                    Some((r.peer.clone(), r.progress.clone()?, r.steps))
                });
                if let Some((peer, token, steps)) = target {
                    let note = json!({ "progressToken": token, "progress": steps, "message": render });
                    if let Ok(note) = serde_json::from_value(note) {
                        let _ = peer.notify_progress(note).await;
                    }
                }
            }
            EventKind::PermissionRequest { request_id, tool_use_id, tool, reason, input, render, .. } => {
                let route = lock(&calls).get(&tool_use_id).map(|r| (r.peer.clone(), r.elicit));
                let Some((peer, elicit)) = route else { continue };
                let client = client.clone();
                let session = session.clone();
                let id = request_id.clone();
                let task = tokio::spawn(async move {
                    let (decision, message) = if elicit {
                        ask(&peer, &tool, &reason, &render, &input).await
                    } else {
                        (
                            PermissionDecision::Deny,
                            Some(format!(
                                "{tool} needs approval ({reason}) and this MCP client cannot ask the user (it \
                                 does not support elicitation). To allow such calls, start the bridge with a \
                                 rule (agentctl mcp --allow '{tool}') or a mode (agentctl mcp --mode \
                                 accept-edits, or bypass), or use a client that supports elicitation"
                            )),
                        )
                    };
                    let params = PermissionRespondParams {
                        session_id: session,
                        request_id: id,
                        decision,
                        rule: None,
                        message,
                        answers: None,
                    };
                    // Answered elsewhere meanwhile: the daemon says so; fine.
                    let _ = client.call::<PermissionRespond>(params).await;
                });
                lock(&asking).insert(request_id, task.abort_handle());
            }
            EventKind::McpElicitation { request_id, server, message, requested_schema, .. } => {
                // The bridge's calls are the session's calls: ask the
                // client of one in flight.
                let peer = lock(&calls).values().find(|r| r.elicit).map(|r| r.peer.clone());
                let client = client.clone();
                let session = session.clone();
                tokio::spawn(async move {
                    let (action, content) = match peer {
                        Some(peer) => pass_on(&peer, &server, &message, requested_schema).await,
                        None => (agentd_protocol::mcp::McpElicitationAction::Decline, None),
                    };
                    let params = agentd_protocol::mcp::McpElicitationRespondParams {
                        session_id: session,
                        request_id,
                        action,
                        content,
                    };
                    let _ = client.call::<agentd_protocol::methods::McpElicitationRespond>(params).await;
                });
            }
            EventKind::PermissionResolved { request_id, .. } => {
                if let Some(task) = lock(&asking).remove(&request_id) {
                    task.abort();
                }
            }
            EventKind::SessionClosed {} => return,
            _ => {}
        }
    }
}

/// Largest `arguments` of one call, serialised.
const MAX_ARGUMENT_BYTES: usize = 8 << 20;

/// An elicitation of one of agentd's MCP servers, asked of this bridge's
/// client as it came (its message prefixed with the server's name).
async fn pass_on(
    peer: &Peer<RoleServer>,
    server: &str,
    message: &str,
    schema: Value,
) -> (agentd_protocol::mcp::McpElicitationAction, Option<serde_json::Map<String, Value>>) {
    use agentd_protocol::mcp::McpElicitationAction as Action;
    let params = json!({ "mode": "form", "message": format!("{server}: {message}"), "requestedSchema": schema });
    let Ok(params) = serde_json::from_value(params) else { return (Action::Decline, None) };
    match peer.create_elicitation(params).await {
        Ok(answer) => {
            let answer = serde_json::to_value(&answer).unwrap_or_default();
            match answer["action"].as_str() {
                Some("accept") => (Action::Accept, answer["content"].as_object().cloned()),
                Some("cancel") => (Action::Cancel, None),
                _ => (Action::Decline, None),
            }
        }
        Err(_) => (Action::Decline, None),
    }
}

/// Asks the MCP client's user about a call, with an elicitation.
async fn ask(
    peer: &Peer<RoleServer>,
    tool: &str,
    reason: &str,
    render: &str,
    input: &Value,
) -> (PermissionDecision, Option<String>) {
    // What is approved, shown: the call, and a plan in full (cut at 8,000
    // characters).
    let mut message = format!("agentd: allow {tool}? {reason}\n\n{render}");
    if let Some(plan) = input.get("plan").and_then(Value::as_str) {
        let cut: String = plan.chars().take(8000).collect();
        message.push_str(&format!("\n\nThe plan:\n{cut}"));
        if cut.len() < plan.len() {
            message.push_str("\n[plan cut at 8,000 characters]");
        }
    }
    let params = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "allow": { "type": "boolean", "title": "Allow", "description": format!("Run {tool} this once") } },
            "required": ["allow"]
        }
    });
    let Ok(params) = serde_json::from_value(params) else {
        return (PermissionDecision::Deny, Some("agentctl mcp could not ask".into()));
    };
    match peer.create_elicitation(params).await {
        Ok(answer) => {
            let answer = serde_json::to_value(&answer).unwrap_or_default();
            let allowed = answer["action"] == "accept" && answer["content"]["allow"] == true;
            if allowed {
                (PermissionDecision::Allow, None)
            } else {
                (PermissionDecision::Deny, Some("the user declined".into()))
            }
        }
        Err(e) => (PermissionDecision::Deny, Some(format!("asking the user failed: {e}"))),
    }
}

impl rmcp::ServerHandler for Bridge {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let mut tools = rmcp::model::ToolsCapability::default();
        tools.list_changed = Some(true);
        let mut capabilities = rmcp::model::ServerCapabilities::default();
        capabilities.tools = Some(tools);
        rmcp::model::ServerConfig::new(capabilities)
            .with_server_info(rmcp::model::Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agentd's coding tools (Bash, Read, Edit, Write, Glob, Grep, …) on one workspace, \
                 with agentd's permission checks and sandbox. Tools listed by name only are loaded \
                 with ToolSearch (query \"select:Name\") before they are called.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        let params = ToolsListParams { session_id: self.session.clone(), hints: true };
        let list = self.client.call::<ToolsList>(params).await.map_err(internal)?;
        let mut tools = Vec::with_capacity(list.tools.len());
        for t in &list.tools {
            let hints = list.hints.get(&t.name).copied().unwrap_or_default();
            let tool = json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema,
                "annotations": {
                    "readOnlyHint": hints.read_only,
                    "destructiveHint": hints.destructive,
                    "idempotentHint": hints.idempotent,
                    "openWorldHint": hints.open_world,
                },
            });
            tools.push(serde_json::from_value(tool).map_err(|e| internal(format!("tool {}: {e}", t.name)))?);
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        // The daemon takes lines up to 16 MiB; the call wraps the arguments.
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        if serde_json::to_string(&arguments).map_or(true, |t| t.len() > MAX_ARGUMENT_BYTES) {
            return Err(rmcp::ErrorData::invalid_params(
                format!("the arguments are larger than {} MiB", MAX_ARGUMENT_BYTES >> 20),
                None,
            ));
        }
        let id = format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed));
        let elicit = context.peer.peer_info().is_some_and(|info| {
            serde_json::to_value(&info.capabilities).map(|c| !c["elicitation"].is_null()).unwrap_or(false)
        });
        let progress = context.meta.get_progress_token();
        lock(&self.calls).insert(id.clone(), Route { peer: context.peer.clone(), progress, steps: 0, elicit });
        let name = request.name.to_string();
        let params = ToolCallParams {
            session_id: self.session.clone(),
            name: name.clone(),
            input: arguments,
            tool_use_id: Some(id.clone()),
        };
        let call = self.client.call::<ToolCall>(params);
        tokio::pin!(call);
        let result = tokio::select! {
            r = &mut call => r,
            _ = context.ct.cancelled() => {
                let cancel = TurnCancelParams { session_id: self.session.clone(), turn_id: None, tool_use_id: Some(id.clone()) };
                let _ = self.client.call::<TurnCancel>(cancel).await;
                call.await
            }
        };
        lock(&self.calls).remove(&id);
        if result.is_err() && !self.client.is_connected() {
            // Nothing more can be done for any call: end, so the client
            // sees the server go (the daemon closes the bridge's session).
            eprintln!("agentctl mcp: the connection to agentd is gone");
            std::process::exit(3);
        }
        let result = result.map_err(internal)?;
        if name == "ToolSearch" && !result.is_error {
            // Tools it loaded are in the session's list from now on.
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(CallToolResponse::Complete(convert(result)))
    }
}

/// A `tool/call` result as an MCP `CallToolResult`.
fn convert(result: ToolCallResult) -> rmcp::model::CallToolResult {
    let content: Vec<Value> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => json!({ "type": "text", "text": text }),
            ContentBlock::Image { source } => {
                json!({ "type": "image", "data": source.data, "mimeType": source.media_type })
            }
        })
        .collect();
    let value = json!({ "content": content, "isError": result.is_error });
    serde_json::from_value(value)
        .unwrap_or_else(|_| rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(result.render)]))
}

fn internal(e: impl std::fmt::Display) -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(e.to_string(), None)
}

fn rand_u32() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0)
}
