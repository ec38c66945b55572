//! `agentctl mcp`: agentd's tools for any MCP client. A stdio MCP server
//! (the official SDK's server side) in front of one daemon session: MCP
//! `tools/list` is the session's `tools/list` (with each tool's hints as
//! annotations), `tools/call` is `tool/call` (same permission checks and
//! ordering), the call's `tool/progress` events become MCP progress
//! notifications, MCP cancellation becomes `turn/cancel` of that call, and
//! a permission request becomes an elicitation when the client supports
//! it (refused otherwise, saying how to allow it). `agentctl respond` from
//! another terminal answers as well; whichever answers first wins.
//!
//! Beside tools it serves the workspace's files as resources, the
//! session's skills as prompts, the session's events as log messages and
//! completion of file paths ([`served`]); over stdio, or over streamable
//! HTTP for remote clients ([`http`]: a bearer token, `Host`/`Origin`
//! checks, a daemon session per MCP session).

pub mod http;
mod results;
mod rounds;
pub mod served;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentd_protocol::methods::{PermissionRespond, ToolCall, ToolsList, TurnCancel};
use agentd_protocol::permission::{PermissionDecision, PermissionRespondParams};
use agentd_protocol::tools::{ToolCallParams, ToolCallResult, ToolsListParams};
use agentd_protocol::turn::{EventKind, TurnCancelParams};
use results::{convert, known};
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
    /// Its MCP client declared URL-mode elicitation.
    elicit_url: bool,
    /// Its MCP client declared sampling.
    sample: bool,
    /// A call of MCP 2026-07-28: its questions go back as `input_required`
    /// results (see [`rounds`]), never as requests to the client.
    rounds: Option<tokio::sync::mpsc::UnboundedSender<rounds::Question>>,
    /// Its request's log level (`_meta`, 2026-07-28): the call's events as
    /// log messages on its own stream, and how many were sent.
    log: Option<(usize, u32)>,
}

/// The MCP server. A client of MCP's earlier revisions has an MCP session
/// and a daemon session of its own (over HTTP, a bridge each); the requests
/// of 2026-07-28, which has no sessions, share one ([`Served`]), so what one
/// request does (ToolSearch loading a tool, a background job, a call
/// waiting for an answer) is there for the next.
pub struct Bridge {
    legacy: Arc<Served>,
    modern: Arc<Served>,
}

/// Whether the request is of MCP 2026-07-28 or later (no handshake: its
/// version and the client's capabilities come with it).
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| !v.has_initialize())
}

/// One daemon session served over MCP.
pub struct Served {
    /// The daemon connection, or how to make one of the bridge's own.
    link: Link,
    /// The session and its workspace, once attached.
    attached: tokio::sync::OnceCell<Attached>,
    /// How to get a session: one to serve, or one to open on first use
    /// (and close when the bridge goes).
    source: SessionSource,
    calls: Arc<Mutex<HashMap<String, Route>>>,
    asking: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
    log: Arc<Mutex<served::LogTarget>>,
    watched: Arc<Mutex<served::Watched>>,
    next: AtomicU64,
    prefix: String,
    /// Calls of 2026-07-28 waiting for their client's answer, by their
    /// `requestState`.
    suspended: Arc<Mutex<HashMap<String, rounds::Suspended>>>,
    /// `subscriptions/listen` of 2026-07-28 clients, open.
    listeners: Arc<Mutex<Vec<rmcp::service::SubscriptionSink>>>,
    /// The calls' start and result events, followed once a client asks
    /// for log messages (each costs a Read's worth of JSON a call).
    logging: tokio::sync::OnceCell<tokio::task::JoinHandle<()>>,
}

/// How a bridge reaches the daemon.
pub enum Link {
    /// Over this connection (stdio: one bridge a process). A lost
    /// connection ends the process.
    Shared(Arc<Client>),
    /// Over a connection of its own, made when it attaches, holding one of
    /// these slots while it lives (HTTP: a bridge a client; one client's
    /// requests cannot break another's connection, and a lost connection
    /// ends only that bridge).
    Own(agentd_client::Endpoint, Arc<tokio::sync::Semaphore>),
}

/// Where a bridge's session comes from.
#[derive(Clone)]
pub enum SessionSource {
    /// This session, kept open when the bridge goes.
    Existing(String),
    /// This session, opened for this bridge alone (its caller closes it):
    /// the bridge answers its servers' requests as its only client.
    Made(String),
    /// One opened with these parameters when first needed, closed with
    /// the bridge.
    Open(Box<agentd_protocol::session::SessionCreateParams>),
}

/// A bridge's session, followed.
struct Attached {
    client: Arc<Client>,
    session: String,
    root: String,
    owned: bool,
    follower: tokio::task::JoinHandle<()>,
    /// Said when the follower ends (the session closed, or the daemon went).
    closed: Arc<tokio::sync::Notify>,
    /// The bridge's place among those served at once (HTTP).
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for Served {
    fn drop(&mut self) {
        for (_, s) in lock(&self.suspended).drain() {
            s.call.abort();
        }
        let Some(a) = self.attached.get() else { return };
        a.follower.abort();
        if a.owned
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (client, id) = (a.client.clone(), a.session.clone());
            rt.spawn(async move {
                let _ = client.session_close(&id).await;
            });
        }
    }
}

/// A lock of the bridge's, poisoned or not (its data stays consistent across a panic).
pub(crate) use agentd_client::lock;

impl Bridge {
    /// A bridge to the session `source` names (or opens), reached by `link`,
    /// for every client (stdio: one process, one session).
    pub fn new(link: Link, source: SessionSource) -> Self {
        let served = Arc::new(Served::new(link, source));
        Bridge { legacy: served.clone(), modern: served }
    }

    /// A bridge with a session of its own for an MCP session of an earlier
    /// revision, and `modern` for requests of 2026-07-28 (HTTP).
    pub fn with_shared(link: Link, source: SessionSource, modern: Arc<Served>) -> Self {
        Bridge { legacy: Arc::new(Served::new(link, source)), modern }
    }

    /// What serves `context`'s request.
    fn served(&self, context: &RequestContext<RoleServer>) -> &Arc<Served> {
        if modern(context) { &self.modern } else { &self.legacy }
    }

    /// Serves MCP on stdin/stdout until the client goes away (or the
    /// session closes).
    pub async fn serve_stdio(self) -> Result<(), String> {
        let attached = self.legacy.attach().await?;
        let closed = attached.closed.clone();
        let _ = self.legacy.attached.set(attached);
        let service = match pipes() {
            Some(pipes) => self.serve(pipes).await,
            None => self.serve(rmcp::transport::stdio()).await,
        }
        .map_err(|e| format!("MCP handshake: {e}"))?;
        tokio::select! {
            _ = service.waiting() => {}
            _ = closed.notified() => eprintln!("agentctl mcp: the session was closed"),
        }
        Ok(())
    }
}

impl Served {
    /// The session `source` names (or opens), reached by `link`.
    pub fn new(link: Link, source: SessionSource) -> Self {
        Served {
            link,
            attached: tokio::sync::OnceCell::new(),
            source,
            calls: Arc::default(),
            asking: Arc::default(),
            log: Arc::default(),
            watched: Arc::default(),
            next: AtomicU64::new(0),
            prefix: format!("mcp-{}-{:x}", std::process::id(), rand_u32()),
            suspended: Arc::default(),
            listeners: Arc::default(),
            logging: tokio::sync::OnceCell::new(),
        }
    }

    /// The session, opened and followed on first use.
    async fn attached(&self) -> Result<&Attached, rmcp::ErrorData> {
        self.attached.get_or_try_init(|| self.attach()).await.map_err(internal)
    }

    /// The connection and the session.
    async fn session(&self) -> Result<(Arc<Client>, String), rmcp::ErrorData> {
        let a = self.attached().await?;
        Ok((a.client.clone(), a.session.clone()))
    }

    async fn attach(&self) -> Result<Attached, String> {
        let (client, slot) = match &self.link {
            Link::Shared(client) => (client.clone(), None),
            Link::Own(endpoint, slots) => {
                let slot = slots.clone().try_acquire_owned().map_err(|_| {
                    format!(
                        "agentctl mcp serves at most {} MCP sessions at once: end one (DELETE) first",
                        http::MAX_SESSIONS
                    )
                })?;
                let client = Client::connect_endpoint(endpoint, agentd_client::DEFAULT_REQUEST_TIMEOUT)
                    .await
                    .map_err(|e| e.to_string())?;
                (Arc::new(client), Some(slot))
            }
        };
        let (session, owned) = match &self.source {
            SessionSource::Existing(id) | SessionSource::Made(id) => (id.clone(), false),
            SessionSource::Open(params) => {
                (client.session_create((**params).clone()).await.map_err(|e| e.to_string())?.session_id, true)
            }
        };
        let info = client.session_get(&session).await.map_err(|e| e.to_string());
        let root = match info {
            Ok(info) => info.cwd.to_string_lossy().into_owned(),
            Err(e) => {
                if owned {
                    let _ = client.session_close(&session).await;
                }
                return Err(e);
            }
        };
        // What the bridge acts on (and logs); calls' starts and results
        // only once a client asks for logs (`follow_logs`).
        let kinds = [
            "tool/progress",
            "permission/request",
            "permission/resolved",
            "mcp/elicitation",
            "mcp/sampling",
            "sandbox/network",
            "mcp/log",
            "tools/changed",
        ];
        // It answers the elicitations and sampling requests of agentd's
        // own MCP servers: passed on to this bridge's client while one of
        // its calls runs for a client that can answer; otherwise refused
        // at once in a session of its own, and left to the session's
        // other clients in one it serves (`--session`).
        let answers = [agentd_protocol::mcp::ELICITATION_CAPABILITY, agentd_protocol::mcp::SAMPLING_CAPABILITY];
        let events = client.stream_with(&session, None, Some(&kinds), &answers).await;
        let events = match events {
            Ok(events) => events,
            Err(e) => {
                if owned {
                    let _ = client.session_close(&session).await;
                }
                return Err(e.to_string());
            }
        };
        let only_client = owned || matches!(self.source, SessionSource::Made(_));
        let closed = Arc::new(tokio::sync::Notify::new());
        let follower = tokio::spawn({
            let (closed, client, id) = (closed.clone(), client.clone(), session.clone());
            let routes = Routes {
                calls: self.calls.clone(),
                asking: self.asking.clone(),
                log: self.log.clone(),
                listeners: self.listeners.clone(),
            };
            async move {
                follow(events, client, id, only_client, routes).await;
                closed.notify_one();
            }
        });
        Ok(Attached { client, session, root, owned, follower, closed, _slot: slot })
    }

    /// Follows the calls' start and result events as log messages, from
    /// now on (before the call that asked starts, so none of its is missed).
    async fn follow_logs(&self) -> Result<(), rmcp::ErrorData> {
        let (client, session) = self.session().await?;
        let (log, calls) = (self.log.clone(), self.calls.clone());
        self.logging
            .get_or_try_init(|| async {
                let mut events = client
                    .stream_kinds(&session, None, Some(&["tool/started", "tool/result"]))
                    .await
                    .map_err(internal)?;
                Ok::<_, rmcp::ErrorData>(tokio::spawn(async move {
                    while let Some(Ok(event)) = events.next().await {
                        log_event(&event.kind, &log, &calls).await;
                    }
                }))
            })
            .await?;
        Ok(())
    }

    /// Tells the 2026-07-28 clients listening for it that the tools changed.
    async fn tools_changed(&self) {
        tell_listeners(&self.listeners).await;
    }
}

/// Where the follower sends what it sees.
struct Routes {
    calls: Arc<Mutex<HashMap<String, Route>>>,
    asking: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
    log: Arc<Mutex<served::LogTarget>>,
    listeners: Arc<Mutex<Vec<rmcp::service::SubscriptionSink>>>,
}

/// `notifications/tools/list_changed` to each listener that asked for it
/// (those whose subscription ended are forgotten).
async fn tell_listeners(listeners: &Mutex<Vec<rmcp::service::SubscriptionSink>>) {
    let sinks: Vec<_> = lock(listeners).clone();
    for sink in sinks {
        if sink.accepted().tools_list_changed == Some(true)
            && let Err(rmcp::service::SubscriptionSendError::SubscriptionClosed) = sink.notify_tool_list_changed().await
        {
            lock(listeners).retain(|s| s.id() != sink.id());
        }
    }
}

/// `event` as a log message: to the client that set a level, and to the
/// 2026-07-28 call that asked for its own events.
async fn log_event(event: &EventKind, log: &Mutex<served::LogTarget>, calls: &Mutex<HashMap<String, Route>>) {
    let message = lock(log).take(event);
    if let Some((peer, note)) = message
        && let Ok(note) = serde_json::from_value(note)
    {
        #[allow(deprecated)]
        let _ = peer.notify_logging_message(note).await;
    }
    if let Some((peer, note)) = served::call_log(event, |id, level| {
        let mut calls = lock(calls);
        let route = calls.get_mut(id)?;
        let (wanted, sent) = route.log.as_mut()?;
        (*sent < served::LOG_PER_CALL && level >= *wanted).then(|| {
            *sent += 1;
            route.peer.clone()
        })
    }) && let Ok(note) = serde_json::from_value(note)
    {
        #[allow(deprecated)]
        let _ = peer.notify_logging_message(note).await;
    }
}

/// Follows the session's events: progress and permission requests of the
/// bridge's calls go to their MCP client.
async fn follow(
    mut events: agentd_client::Subscription<agentd_protocol::turn::Event>,
    client: Arc<Client>,
    session: String,
    only_client: bool,
    routes: Routes,
) {
    let Routes { calls, asking, log, listeners } = routes;
    while let Some(Ok(event)) = events.next().await {
        log_event(&event.kind, &log, &calls).await;
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
                let route = lock(&calls).get(&tool_use_id).map(|r| (r.peer.clone(), r.elicit, r.rounds.clone()));
                let Some((peer, elicit, rounds)) = route else { continue };
                if elicit && let Some(rounds) = rounds {
                    let _ = rounds.send(rounds::Question::Permission { request_id, tool, reason, render, input });
                    continue;
                }
                let client = client.clone();
                let session = session.clone();
                let id = request_id.clone();
                let task = tokio::spawn(async move {
                    let (decision, message, no_user) = if elicit {
                        let (decision, message) = ask(&peer, &tool, &reason, &render, &input).await;
                        (decision, message, false)
                    } else {
                        (
                            PermissionDecision::Deny,
                            Some(format!(
                                "{tool} needs approval ({reason}) and this MCP client cannot ask the user (it \
                                 does not support elicitation). To allow such calls, start the bridge with a \
                                 rule (agentctl mcp --allow '{tool}') or a mode (agentctl mcp --mode \
                                 accept-edits, or bypass), or use a client that supports elicitation"
                            )),
                            true,
                        )
                    };
                    let params = PermissionRespondParams {
                        session_id: session,
                        request_id: id,
                        decision,
                        rule: None,
                        message,
                        answers: None,
                        no_user,
                    };
                    // Answered elsewhere meanwhile: the daemon says so; fine.
                    let _ = client.call::<PermissionRespond>(params).await;
                });
                lock(&asking).insert(request_id, task.abort_handle());
            }
            EventKind::ToolsChanged { .. } => {
                // An MCP server of the session added or removed tools.
                let lister = lock(&log).lister();
                if let Some(peer) = lister {
                    let _ = peer.notify_tool_list_changed().await;
                }
                tell_listeners(&listeners).await;
            }
            EventKind::McpElicitation {
                request_id, server, message, requested_schema, url, elicitation_id, ..
            } => {
                // The bridge's calls are the session's calls: ask the
                // client of one in flight (one that takes URLs, for a URL).
                let page = url.zip(elicitation_id);
                let route = lock(&calls)
                    .values()
                    .find(|r| r.elicit && (page.is_none() || r.elicit_url))
                    .map(|r| (r.peer.clone(), r.rounds.clone()));
                if let Some((_, Some(rounds))) = &route {
                    let schema = requested_schema;
                    let _ = rounds.send(rounds::Question::Elicitation { request_id, server, message, schema, page });
                    continue;
                }
                let peer = route.map(|(peer, _)| peer);
                if peer.is_none() && !only_client {
                    continue;
                }
                let client = client.clone();
                let session = session.clone();
                tokio::spawn(async move {
                    let (action, content) = match peer {
                        Some(peer) => pass_on(&peer, &server, &message, requested_schema, page).await,
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
            EventKind::McpSampling { request_id, server, request, .. } => {
                let route = lock(&calls).values().find(|r| r.sample).map(|r| (r.peer.clone(), r.rounds.clone()));
                if let Some((_, Some(rounds))) = &route {
                    let _ = rounds.send(rounds::Question::Sampling { request_id, server, request });
                    continue;
                }
                let peer = route.map(|(peer, _)| peer);
                if peer.is_none() && !only_client {
                    continue;
                }
                let client = client.clone();
                let session = session.clone();
                tokio::spawn(async move {
                    use agentd_protocol::mcp::McpSamplingDecision as Decision;
                    let (result, error) = match (peer, serde_json::from_value(request)) {
                        #[allow(deprecated)]
                        (Some(peer), Ok(params)) => match peer.create_message(params).await {
                            Ok(result) => (serde_json::to_value(result).ok(), None),
                            Err(e) => (None, Some(format!("{server}: the MCP client of agentctl mcp: {e}"))),
                        },
                        (Some(_), Err(e)) => (None, Some(format!("{server}: not a sampling request: {e}"))),
                        (None, _) => {
                            (None, Some("the MCP client of agentctl mcp does not support sampling".to_owned()))
                        }
                    };
                    let params = agentd_protocol::mcp::McpSamplingRespondParams {
                        session_id: session,
                        request_id,
                        // The MCP client asks its user (MCP's human in the loop).
                        decision: Decision::Allow,
                        result,
                        error,
                    };
                    let _ = client.call::<agentd_protocol::methods::McpSamplingRespond>(params).await;
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
    page: Option<(String, String)>,
) -> (agentd_protocol::mcp::McpElicitationAction, Option<serde_json::Map<String, Value>>) {
    use agentd_protocol::mcp::McpElicitationAction as Action;
    let params = elicitation_params(server, message, schema, page);
    let Ok(params) = serde_json::from_value(params) else { return (Action::Decline, None) };
    match peer.create_elicitation(params).await {
        Ok(answer) => elicited(&serde_json::to_value(&answer).unwrap_or_default()),
        Err(_) => (Action::Decline, None),
    }
}

/// The `elicitation/create` params that pass one of agentd's servers'
/// elicitations on: a form, or (URL mode) its page and id.
fn elicitation_params(server: &str, message: &str, schema: Value, page: Option<(String, String)>) -> Value {
    let message = format!("{server}: {message}");
    match page {
        Some((url, id)) => json!({ "mode": "url", "message": message, "url": url, "elicitationId": id }),
        None => json!({ "mode": "form", "message": message, "requestedSchema": schema }),
    }
}

/// An elicitation's answer as agentd takes it.
fn elicited(answer: &Value) -> (agentd_protocol::mcp::McpElicitationAction, Option<serde_json::Map<String, Value>>) {
    use agentd_protocol::mcp::McpElicitationAction as Action;
    match answer["action"].as_str() {
        Some("accept") => (Action::Accept, answer["content"].as_object().cloned()),
        Some("cancel") => (Action::Cancel, None),
        _ => (Action::Decline, None),
    }
}

/// The form that asks the MCP client's user about a call: what is
/// approved, shown (the call, and a plan in full, cut at 8,000 characters).
fn permission_form(tool: &str, reason: &str, render: &str, input: &Value) -> Value {
    let mut message = format!("agentd: allow {tool}? {reason}\n\n{render}");
    if let Some(plan) = input.get("plan").and_then(Value::as_str) {
        let cut: String = plan.chars().take(8000).collect();
        message.push_str(&format!("\n\nThe plan:\n{cut}"));
        if cut.len() < plan.len() {
            message.push_str("\n[plan cut at 8,000 characters]");
        }
    }
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "allow": { "type": "boolean", "title": "Allow", "description": format!("Run {tool} this once") } },
            "required": ["allow"]
        }
    })
}

/// The answer to [`permission_form`].
fn permission_answer(answer: &Value) -> (PermissionDecision, Option<String>) {
    if answer["action"] == "accept" && answer["content"]["allow"] == true {
        (PermissionDecision::Allow, None)
    } else {
        (PermissionDecision::Deny, Some("the user declined".into()))
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
    let Ok(params) = serde_json::from_value(permission_form(tool, reason, render, input)) else {
        return (PermissionDecision::Deny, Some("agentctl mcp could not ask".into()));
    };
    match peer.create_elicitation(params).await {
        Ok(answer) => permission_answer(&serde_json::to_value(&answer).unwrap_or_default()),
        Err(e) => (PermissionDecision::Deny, Some(format!("asking the user failed: {e}"))),
    }
}

// Logging is deprecated by a draft of MCP (SEP-2577) but is what clients
// of today's versions use.
#[allow(deprecated)]
impl rmcp::ServerHandler for Bridge {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let capabilities = rmcp::model::ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_logging()
            .enable_completions()
            .build();
        rmcp::model::ServerConfig::new(capabilities)
            .with_server_info(rmcp::model::Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agentd's coding tools (Bash, Read, Edit, Write, Glob, Grep, …) on one workspace, \
                 with agentd's permission checks and sandbox. Tools listed by name only are loaded \
                 with ToolSearch (query \"select:Name\") before they are called. Resources are the \
                 workspace's files (file:// URIs) the session may read unasked; prompts are its skills.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        let served = self.served(&context);
        let (client, session) = served.session().await?;
        if !modern(&context) {
            // 2026-07-28 clients hear of changes only by listening.
            lock(&served.log).listed(context.peer.clone());
        }
        let params = ToolsListParams { session_id: session, hints: true };
        let list = client.call::<ToolsList>(params).await.map_err(internal)?;
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
            // A labelled tool is tried with its label first: an icon MCP's
            // types do not take leaves the tool without its label, not the
            // list without the tool.
            let labelled = list.labels.get(&t.name).and_then(|label| {
                let mut labelled = tool.clone();
                if let Some(title) = &label.title {
                    labelled["title"] = json!(title);
                }
                if !label.icons.is_empty() {
                    labelled["icons"] = json!(label.icons);
                }
                serde_json::from_value(labelled).ok()
            });
            let tool = labelled.map_or_else(|| serde_json::from_value(tool), Ok);
            tools.push(tool.map_err(|e| internal(format!("tool {}: {e}", t.name)))?);
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, rmcp::ErrorData> {
        let (client, session) = self.served(&context).session().await?;
        served::list_resources(&client, &session, request.and_then(|r| r.cursor)).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, rmcp::ErrorData> {
        served::templates()
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, rmcp::ErrorData> {
        let (client, session) = self.served(&context).session().await?;
        Ok(served::read_resource(&client, &session, &request.uri).await?.into())
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let served = self.served(&context);
        let (client, session) = served.session().await?;
        let notify = served::Notify::Peer(context.peer);
        served::subscribe(&served.watched, &client, &session, request.uri, notify, None).await
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        served::unsubscribe(&self.served(&context).watched, &request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        // The tools' list and files' changes; the skills (prompts) and the
        // list of files are not followed.
        let mut accepted = rmcp::model::SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(accepted)
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), rmcp::ErrorData> {
        let served = &self.modern;
        let (client, session) = served.session().await?;
        served::listen(&served.listeners, &client, &session, context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, rmcp::ErrorData> {
        let (client, session) = self.served(&context).session().await?;
        served::list_prompts(&client, &session).await
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, rmcp::ErrorData> {
        let (client, session) = self.served(&context).session().await?;
        Ok(served::get_prompt(&client, &session, &request.name, request.arguments.as_ref()).await?.into())
    }

    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        if modern(&context) {
            // Gone in 2026-07-28: a request carries its own log level.
            return Err(rmcp::ErrorData::method_not_found::<rmcp::model::SetLevelRequestMethod>());
        }
        let served = self.served(&context);
        // Events flow once the session is followed.
        served.follow_logs().await?;
        let level = serde_json::to_value(request.level).map_err(internal)?;
        lock(&served.log).set(context.peer, &level);
        Ok(())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, rmcp::ErrorData> {
        let attached = self.served(&context).attached().await?;
        let request = serde_json::to_value(&request).map_err(internal)?;
        served::complete(&attached.client, &attached.session, &attached.root, &request).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let served = self.served(&context);
        if modern(&context) {
            return served.call_in_rounds(request, context).await;
        }
        let (id, call) = served.start_call(&request, &context, None).await?;
        let (client, session) = served.session().await?;
        let call = async { call.await.unwrap_or_else(|e| Err(e.to_string())) };
        tokio::pin!(call);
        let result = tokio::select! {
            r = &mut call => r,
            _ = context.ct.cancelled() => {
                let cancel = TurnCancelParams { session_id: session.clone(), turn_id: None, tool_use_id: Some(id.clone()) };
                let _ = client.call::<TurnCancel>(cancel).await;
                call.await
            }
        };
        let name = request.name.to_string();
        let result = known(&name, served.end_call(&id, result)?)?;
        if name == "ToolSearch" && !result.is_error {
            // Tools it loaded are in the session's list from now on.
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(CallToolResponse::Complete(convert(&name, result)))
    }
}

impl Served {
    /// Starts the daemon's call for `request` (its questions go to
    /// `rounds` when given): its `tool_use` id and the call, running.
    async fn start_call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        rounds: Option<tokio::sync::mpsc::UnboundedSender<rounds::Question>>,
    ) -> Result<(String, tokio::task::JoinHandle<Result<ToolCallResult, String>>), rmcp::ErrorData> {
        // The daemon takes lines up to 16 MiB; the call wraps the arguments.
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        if serde_json::to_string(&arguments).map_or(true, |t| t.len() > MAX_ARGUMENT_BYTES) {
            return Err(rmcp::ErrorData::invalid_params(
                format!("the arguments are larger than {} MiB", MAX_ARGUMENT_BYTES >> 20),
                None,
            ));
        }
        let (client, session) = self.session().await?;
        let id = format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed));
        // What the client can answer: this request says (2026-07-28), or
        // its handshake did.
        let capabilities = context.client_capabilities().and_then(|c| serde_json::to_value(c).ok());
        let declared = |what: &str| capabilities.as_ref().is_some_and(|c| !c[what].is_null());
        let (elicit, sample) = (declared("elicitation"), declared("sampling"));
        let elicit_url = capabilities.as_ref().is_some_and(|c| c["elicitation"].get("url").is_some());
        let progress = context.meta.get_progress_token();
        let log = context
            .meta
            .log_level()
            .and_then(|l| serde_json::to_value(l).ok())
            .map(|l| (served::rank(l.as_str().unwrap_or("info")), 0));
        if log.is_some() {
            self.follow_logs().await?;
        }
        let route = Route { peer: context.peer.clone(), progress, steps: 0, elicit, elicit_url, sample, rounds, log };
        lock(&self.calls).insert(id.clone(), route);
        let params = ToolCallParams {
            session_id: session,
            name: request.name.to_string(),
            input: arguments,
            tool_use_id: Some(id.clone()),
        };
        Ok((id, tokio::spawn(async move { client.call::<ToolCall>(params).await.map_err(|e| e.to_string()) })))
    }

    /// The call `id` is over: its route goes, and its result is read.
    fn end_call(&self, id: &str, result: Result<ToolCallResult, String>) -> Result<ToolCallResult, rmcp::ErrorData> {
        lock(&self.calls).remove(id);
        let lost = self.attached.get().is_some_and(|a| !a.client.is_connected());
        if result.is_err() && lost && matches!(self.link, Link::Shared(_)) {
            // Nothing more can be done for any call: end, so the client
            // sees the server go (the daemon closes the bridge's session).
            eprintln!("agentctl mcp: the connection to agentd is gone");
            std::process::exit(3);
        }
        result.map_err(internal)
    }
}

/// stdin and stdout as non-blocking pipes, when both are pipes of their
/// own (as an MCP client starts its servers): read and written on the
/// runtime itself. Otherwise (a terminal, a file, a socket, stderr on the
/// stdout pipe, whose messages must not meet a non-blocking pipe) `None`,
/// and rmcp's stdio, which hands each read and write to a blocking thread
/// (two thread hops per message, a third of the bridge's time per call).
/// The pipes stay non-blocking after agentctl ends: a wrapper that starts
/// it should `exec` it.
fn pipes() -> Option<(tokio::net::unix::pipe::Receiver, tokio::net::unix::pipe::Sender)> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    // All checked before either is made non-blocking.
    let stat = |fd: std::os::fd::BorrowedFd<'_>| nix::sys::stat::fstat(fd).ok();
    let fifo =
        |s: &Option<nix::sys::stat::FileStat>| s.is_some_and(|s| s.st_mode & nix::libc::S_IFMT == nix::libc::S_IFIFO);
    let (input, output) = (stat(stdin.as_fd()), stat(stdout.as_fd()));
    let errors = stat(std::io::stderr().as_fd());
    let same = |a: &Option<nix::sys::stat::FileStat>, b: &Option<nix::sys::stat::FileStat>| matches!((a, b), (Some(a), Some(b)) if a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    if !fifo(&input) || !fifo(&output) || same(&output, &errors) || same(&input, &output) {
        return None;
    }
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(stdin).ok()?;
    match tokio::net::unix::pipe::Sender::from_owned_fd(stdout) {
        Ok(writer) => Some((reader, writer)),
        // stdin back as it was, for rmcp's blocking reads.
        Err(_) => {
            let _ = reader.into_blocking_fd();
            None
        }
    }
}

fn internal(e: impl std::fmt::Display) -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error(e.to_string(), None)
}

fn rand_u32() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0)
}
