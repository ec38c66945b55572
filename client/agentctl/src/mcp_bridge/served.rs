//! What `agentctl mcp` serves beside tools: the workspace's files as
//! resources (`file://` URIs, paged; subscriptions polled), the session's
//! skills as prompts, the session's events as log messages at the level
//! the client sets, and completion of a resource template's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use agentd_client::Client;
use agentd_protocol::methods::{SkillsList, ToolCall, WorkspaceFiles, WorkspaceRead};
use agentd_protocol::tools::{ContentBlock, ToolCallParams};
use agentd_protocol::turn::EventKind;
use agentd_protocol::workspace::{SkillsListParams, WorkspaceFilesParams, WorkspaceReadParams};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};

use super::{internal, lock};

/// Resources one client may watch at once.
pub const MAX_SUBSCRIPTIONS: usize = 100;
/// How often watched files are looked at.
const POLL: std::time::Duration = std::time::Duration::from_secs(1);
/// How recent a change to a file a 2026-07-28 listener names counts as
/// possibly after its acknowledgement (reported at the first look).
const RECENT_MS: u64 = 2_000;
/// Log messages sent a second at most (the rest are counted and said).
const LOG_PER_SECOND: u32 = 50;
/// Log messages one call of MCP 2026-07-28 is sent at most (its request's
/// own log level asks for them).
pub const LOG_PER_CALL: u32 = 200;
/// The resource template: any file of the workspace by its absolute path.
pub const FILE_TEMPLATE: &str = "file://{+path}";
/// Longest `args` of a prompt.
const MAX_PROMPT_ARGS: usize = 64 << 10;
/// Values one completion answers at most (MCP's own limit).
const MAX_COMPLETIONS: usize = 100;

/// The `file://` URI of an absolute path.
pub fn uri_of(path: &str) -> String {
    url::Url::from_file_path(path).map(String::from).unwrap_or_else(|_| format!("file://{path}"))
}

/// The path a `file://` URI names.
pub fn path_of(uri: &str) -> Result<String, rmcp::ErrorData> {
    let url = url::Url::parse(uri).map_err(|e| rmcp::ErrorData::invalid_params(format!("{uri:?}: {e}"), None))?;
    if url.scheme() != "file" || url.host_str().is_some_and(|h| !h.is_empty() && h != "localhost") {
        return Err(rmcp::ErrorData::resource_not_found(
            format!("{uri}: agentd's resources are the workspace's files (file:// URIs)"),
            Some(json!({ "uri": uri })),
        ));
    }
    let path = url.to_file_path().map_err(|_| rmcp::ErrorData::invalid_params(format!("{uri}: no path"), None))?;
    Ok(path.to_string_lossy().into_owned())
}

/// A result from its JSON, complete: MCP 2026-07-28 requires `resultType`
/// on every result (rmcp takes it off again for a client of an earlier
/// revision).
fn from_value<T: serde::de::DeserializeOwned>(mut v: Value) -> Result<T, rmcp::ErrorData> {
    if let Value::Object(map) = &mut v {
        map.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(v).map_err(internal)
}

/// An agentd error as the MCP client sees it: a refusal is a refusal.
fn refused(e: agentd_client::ClientError) -> rmcp::ErrorData {
    rmcp::ErrorData::invalid_params(e.to_string(), None)
}

/// `resources/list`: a page of the workspace's files.
pub async fn list_resources(
    client: &Client,
    session: &str,
    cursor: Option<String>,
) -> Result<rmcp::model::ListResourcesResult, rmcp::ErrorData> {
    let params = WorkspaceFilesParams { session_id: session.to_owned(), cursor, limit: None, prefix: None };
    let page = client.call::<WorkspaceFiles>(params).await.map_err(refused)?;
    let resources: Vec<Value> = page
        .files
        .iter()
        .map(|f| {
            json!({
                "uri": uri_of(&f.path),
                "name": f.relative,
                "mimeType": f.mime_type,
                "size": f.size,
            })
        })
        .collect();
    from_value(json!({ "resources": resources, "nextCursor": page.next_cursor }))
}

/// `resources/templates/list`: one template, a file by its path.
pub fn templates() -> Result<rmcp::model::ListResourceTemplatesResult, rmcp::ErrorData> {
    from_value(json!({ "resourceTemplates": [{
        "uriTemplate": FILE_TEMPLATE,
        "name": "workspace-file",
        "title": "A file of the workspace",
        "description": "Any file of the session's workspace the session may read without asking, by its absolute path (completion offers paths).",
    }]}))
}

/// `resources/read`: one file, as text or base64.
pub async fn read_resource(
    client: &Client,
    session: &str,
    uri: &str,
) -> Result<rmcp::model::ReadResourceResult, rmcp::ErrorData> {
    let path = path_of(uri)?;
    let params = WorkspaceReadParams { session_id: session.to_owned(), path, content: true };
    let read = client.call::<WorkspaceRead>(params).await.map_err(refused)?;
    let mut content = json!({ "uri": uri, "mimeType": read.mime_type });
    match (read.text, read.blob) {
        (Some(text), _) => content["text"] = json!(text),
        (None, Some(blob)) => content["blob"] = json!(blob),
        (None, None) => content["text"] = json!(""),
    }
    from_value(json!({ "contents": [content] }))
}

/// `prompts/list`: the session's skills.
pub async fn list_prompts(client: &Client, session: &str) -> Result<rmcp::model::ListPromptsResult, rmcp::ErrorData> {
    let skills =
        client.call::<SkillsList>(SkillsListParams { session_id: session.to_owned() }).await.map_err(refused)?;
    let prompts: Vec<Value> = skills
        .skills
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "description": if s.description.is_empty() { format!("The {} skill", s.name) } else { s.description.clone() },
                "arguments": [{ "name": "args", "description": "What to pass the skill (free text)", "required": false }],
            })
        })
        .collect();
    from_value(json!({ "prompts": prompts }))
}

/// `prompts/get`: the skill's instructions, loaded by the Skill tool (its
/// checks and hooks, as a model's call), as one user message.
pub async fn get_prompt(
    client: &Client,
    session: &str,
    name: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<rmcp::model::GetPromptResult, rmcp::ErrorData> {
    let skills =
        client.call::<SkillsList>(SkillsListParams { session_id: session.to_owned() }).await.map_err(refused)?;
    let Some(skill) = skills.skills.iter().find(|s| s.name == name) else {
        return Err(rmcp::ErrorData::invalid_params(
            format!("no prompt {name:?} (the session's skills are its prompts)"),
            None,
        ));
    };
    let mut input = json!({ "skill": name });
    match arguments.and_then(|a| a.get("args")) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= MAX_PROMPT_ARGS => input["args"] = json!(s),
        Some(Value::String(_)) => {
            return Err(rmcp::ErrorData::invalid_params(
                format!("args is longer than {} KiB", MAX_PROMPT_ARGS >> 10),
                None,
            ));
        }
        Some(_) => return Err(rmcp::ErrorData::invalid_params("args must be a string (prompt arguments are)", None)),
    }
    let params = ToolCallParams { session_id: session.to_owned(), name: "Skill".into(), input, tool_use_id: None };
    let result = client.call::<ToolCall>(params).await.map_err(internal)?;
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if result.is_error {
        return Err(rmcp::ErrorData::invalid_params(format!("{name}: {}", text.join("\n")), None));
    }
    from_value(json!({
        "description": skill.description,
        "messages": [{ "role": "user", "content": { "type": "text", "text": text.join("\n") } }],
    }))
}

/// `completion/complete`: paths for the file template's `path` (absolute,
/// or relative to the workspace); nothing for anything else (skills take
/// free text).
pub async fn complete(
    client: &Client,
    session: &str,
    root: &str,
    request: &Value,
) -> Result<rmcp::model::CompleteResult, rmcp::ErrorData> {
    let empty = || from_value(json!({ "completion": { "values": [], "hasMore": false } }));
    let is_template = request["ref"]["type"] == "ref/resource" && request["ref"]["uri"] == FILE_TEMPLATE;
    if !is_template || request["argument"]["name"] != "path" {
        return empty();
    }
    let value = request["argument"]["value"].as_str().unwrap_or("");
    let root_slash = format!("{}/", root.trim_end_matches('/'));
    let prefix = if let Some(rel) = value.strip_prefix(&root_slash) {
        rel.to_owned()
    } else if root_slash.starts_with(value) {
        String::new()
    } else if value.starts_with('/') {
        return empty();
    } else {
        value.to_owned()
    };
    let params = WorkspaceFilesParams {
        session_id: session.to_owned(),
        cursor: None,
        limit: Some(MAX_COMPLETIONS),
        prefix: Some(prefix),
    };
    let page = client.call::<WorkspaceFiles>(params).await.map_err(refused)?;
    let values: Vec<&str> = page.files.iter().map(|f| f.path.as_str()).collect();
    from_value(json!({ "completion": { "values": values, "hasMore": page.next_cursor.is_some() } }))
}

/// MCP's log levels, least severe first.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A log level's place among [`LEVELS`].
pub fn rank(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(0)
}

/// Where the session's events go unasked: as log messages, to the client
/// that last set a level, at that level; that its tools changed, to the
/// client that last listed them.
#[derive(Default)]
pub struct LogTarget {
    peer: Option<Peer<RoleServer>>,
    lister: Option<Peer<RoleServer>>,
    level: usize,
    second: Option<std::time::Instant>,
    sent: u32,
    dropped: u64,
}

impl LogTarget {
    /// `logging/setLevel`.
    pub fn set(&mut self, peer: Peer<RoleServer>, level: &Value) {
        self.peer = Some(peer);
        self.level = rank(level.as_str().unwrap_or("info"));
    }

    /// `tools/list`: `peer` is told when the list changes.
    pub fn listed(&mut self, peer: Peer<RoleServer>) {
        self.lister = Some(peer);
    }

    /// The client to tell that the tools changed.
    pub fn lister(&self) -> Option<Peer<RoleServer>> {
        self.lister.clone().filter(|p| !p.is_transport_closed())
    }

    /// The message to send for `event`, if it is at or above the level and
    /// within the rate.
    pub fn take(&mut self, event: &EventKind) -> Option<(Peer<RoleServer>, Value)> {
        let peer = self.peer.clone()?;
        let (level, data) = log_line(event)?;
        if rank(level) < self.level {
            return None;
        }
        let now = std::time::Instant::now();
        if self.second.is_none_or(|s| now.duration_since(s) >= std::time::Duration::from_secs(1)) {
            self.second = Some(now);
            self.sent = 0;
        }
        if self.sent >= LOG_PER_SECOND {
            self.dropped += 1;
            return None;
        }
        self.sent += 1;
        let mut data = data;
        if self.dropped > 0 {
            data["dropped"] = json!(std::mem::take(&mut self.dropped));
        }
        Some((peer, json!({ "level": level, "logger": "agentd", "data": data })))
    }
}

/// The log message of `event`, about a call, for the request that asked
/// for its call's events (MCP 2026-07-28's per-request log level):
/// `wants(tool_use_id, rank)` says where it goes, if anywhere.
pub fn call_log(
    event: &EventKind,
    wants: impl FnOnce(&str, usize) -> Option<Peer<RoleServer>>,
) -> Option<(Peer<RoleServer>, Value)> {
    let id = match event {
        EventKind::ToolStarted { tool_use_id, .. }
        | EventKind::ToolResult { tool_use_id, .. }
        | EventKind::PermissionRequest { tool_use_id, .. }
        | EventKind::SandboxNetwork { tool_use_id, .. } => tool_use_id.as_str(),
        _ => return None,
    };
    let (level, data) = log_line(event)?;
    let peer = wants(id, rank(level))?;
    Some((peer, json!({ "level": level, "logger": "agentd", "data": data })))
}

/// An event as a log message: its level and data.
fn log_line(event: &EventKind) -> Option<(&'static str, Value)> {
    Some(match event {
        EventKind::ToolStarted { tool_use_id, name, render, .. } => {
            ("debug", json!({ "event": "tool/started", "tool": name, "tool_use_id": tool_use_id, "message": render }))
        }
        EventKind::ToolResult { tool_use_id, name, is_error, render, .. } => (
            if *is_error { "warning" } else { "info" },
            json!({ "event": "tool/result", "tool": name, "tool_use_id": tool_use_id, "is_error": is_error, "message": render }),
        ),
        EventKind::PermissionRequest { tool, reason, .. } => {
            ("notice", json!({ "event": "permission/request", "tool": tool, "message": reason }))
        }
        EventKind::SandboxNetwork { host, port, allowed, rule, .. } => (
            if *allowed { "info" } else { "warning" },
            json!({ "event": "sandbox/network", "host": host, "port": port, "allowed": allowed, "message": rule }),
        ),
        EventKind::McpLog { server, level, data, .. } => {
            let level = serde_json::to_value(level).ok()?;
            let level = LEVELS.get(rank(level.as_str().unwrap_or("info")))?;
            (level, json!({ "event": "mcp/log", "server": server, "message": data }))
        }
        _ => return None,
    })
}

/// What was last seen of a watched file: its modification time and size
/// (`None`: gone, or refused).
type Seen = Option<(u64, u64)>;

/// Watched resources: each URI's path and what was last seen of it.
#[derive(Default)]
pub struct Watched {
    files: HashMap<String, (String, Seen)>,
    polling: bool,
}

/// Who hears that a watched file changed: the client that subscribed (an
/// earlier revision's `resources/subscribe`), or a 2026-07-28 listener.
#[derive(Clone)]
pub enum Notify {
    Peer(Peer<RoleServer>),
    Listener(rmcp::service::SubscriptionSink),
}

impl Notify {
    /// `notifications/resources/updated` for `uri`; false once nobody hears.
    async fn updated(&self, uri: &str) -> bool {
        match self {
            Notify::Peer(peer) => {
                if let Ok(note) = serde_json::from_value(json!({ "uri": uri })) {
                    let _ = peer.notify_resource_updated(note).await;
                }
                !peer.is_transport_closed()
            }
            Notify::Listener(sink) => !matches!(
                sink.notify_resource_updated(uri).await,
                Err(rmcp::service::SubscriptionSendError::SubscriptionClosed)
            ),
        }
    }

    fn gone(&self) -> bool {
        match self {
            Notify::Peer(peer) => peer.is_transport_closed(),
            Notify::Listener(_) => false,
        }
    }
}

/// `subscriptions/listen` (MCP 2026-07-28): the listener hears that the
/// tools changed (through `listeners`) and that the files it named did,
/// until it goes.
pub async fn listen(
    listeners: &Mutex<Vec<rmcp::service::SubscriptionSink>>,
    client: &Arc<Client>,
    session: &str,
    context: rmcp::service::SubscriptionContext,
) -> Result<(), rmcp::ErrorData> {
    let sink = context.sink().clone();
    let watched = Arc::new(Mutex::new(Watched::default()));
    let uris = context.accepted().resource_subscriptions.clone().unwrap_or_default();
    if uris.len() > MAX_SUBSCRIPTIONS {
        return Err(rmcp::ErrorData::invalid_params(
            format!("at most {MAX_SUBSCRIPTIONS} resources are watched by one subscription"),
            None,
        ));
    }
    // The acknowledgement went before this runs: a file changed meanwhile
    // (or just before) is said to have changed at the first look.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        .saturating_sub(RECENT_MS);
    for uri in uris {
        subscribe(&watched, client, session, uri, Notify::Listener(sink.clone()), Some(since)).await?;
    }
    lock(listeners).push(sink.clone());
    context.cancelled().await;
    lock(listeners).retain(|s| s.id() != sink.id());
    // The poller ends with the last reference to what it watches.
    drop(watched);
    Ok(())
}

/// `resources/subscribe`: the file's state is noted now; a poller (one a
/// client, ended with the client) says `notifications/resources/updated`
/// when its size or modification time changes, or it goes away.
pub async fn subscribe(
    watched: &Arc<Mutex<Watched>>,
    client: &Arc<Client>,
    session: &str,
    uri: String,
    notify: Notify,
    changed_since: Option<u64>,
) -> Result<(), rmcp::ErrorData> {
    let path = match path_of(&uri) {
        Ok(path) => path,
        // A URI that is not a file is never updated: nothing to watch.
        Err(_) => return Ok(()),
    };
    let mut seen = stat(client, session, &path).await;
    if let (Some(since), Some((modified, _))) = (changed_since, seen)
        && modified >= since
    {
        // Not what was seen: the first look reports it.
        seen = Some((u64::MAX, u64::MAX));
    }
    let start = {
        let mut w = lock(watched);
        if !w.files.contains_key(&uri) && w.files.len() >= MAX_SUBSCRIPTIONS {
            return Err(rmcp::ErrorData::invalid_params(
                format!("at most {MAX_SUBSCRIPTIONS} resources are watched at once: unsubscribe from one first"),
                None,
            ));
        }
        w.files.insert(uri, (path, seen));
        !std::mem::replace(&mut w.polling, true)
    };
    if start {
        tokio::spawn(poll(Arc::downgrade(watched), client.clone(), session.to_owned(), notify));
    }
    Ok(())
}

/// `resources/unsubscribe`.
pub fn unsubscribe(watched: &Mutex<Watched>, uri: &str) {
    lock(watched).files.remove(uri);
}

async fn stat(client: &Client, session: &str, path: &str) -> Seen {
    let params = WorkspaceReadParams { session_id: session.to_owned(), path: path.to_owned(), content: false };
    client.call::<WorkspaceRead>(params).await.ok().map(|r| (r.modified_ms, r.size))
}

async fn poll(watched: Weak<Mutex<Watched>>, client: Arc<Client>, session: String, notify: Notify) {
    loop {
        tokio::time::sleep(POLL).await;
        let Some(strong) = watched.upgrade() else { return };
        let files: Vec<(String, String, Seen)> =
            lock(&strong).files.iter().map(|(u, (p, s))| (u.clone(), p.clone(), *s)).collect();
        drop(strong);
        if notify.gone() {
            return;
        }
        for (uri, path, before) in files {
            let now = stat(&client, &session, &path).await;
            if now == before {
                continue;
            }
            let Some(strong) = watched.upgrade() else { return };
            if let Some(entry) = lock(&strong).files.get_mut(&uri) {
                entry.1 = now;
            }
            drop(strong);
            if !notify.updated(&uri).await {
                return;
            }
        }
    }
}
