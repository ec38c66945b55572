//! MCP tools as agentd tools: `mcp__<server>__<tool>`, always deferred
//! (external), asking before they run, read-only and concurrency-safe only
//! when the server says `readOnlyHint` (the resource tools are in
//! [`super::resources`]).

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use agentd_protocol::tools::{ContentBlock, ContentMeta, ImageSource};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;

use super::pool::{Server, ServerTool};
use crate::permission::Decision;
use crate::tool::erased::{BoxFuture, InputError};
use crate::tool::{
    CallOutcome, DynTool, ExternalToolSource, PreparedCall, ToolContext, ToolError, context::ProgressReporter,
};

/// Most characters of a tool result kept for the model (Claude Code's
/// `MAX_MCP_OUTPUT_TOKENS` of 25,000 tokens, at about four a token).
pub const MAX_RESULT_CHARS: usize = 100_000;

/// Image types model APIs take, and the most base64 of one image (5 MiB
/// of image, as Read's limit).
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const MAX_IMAGE_BASE64: usize = 5 * 1024 * 1024 / 3 * 4;

/// One server's tools, as a session sees them.
pub struct ServerSource {
    server: Arc<Server>,
    tools: Vec<Arc<dyn DynTool>>,
}

impl ServerSource {
    /// The tools `server` was last seen to offer.
    pub fn new(server: Arc<Server>) -> Self {
        let tools = server
            .tools()
            .map(|list| {
                list.iter().map(|t| Arc::new(McpTool::new(server.clone(), t.clone())) as Arc<dyn DynTool>).collect()
            })
            .unwrap_or_default();
        ServerSource { server, tools }
    }
}

impl ExternalToolSource for ServerSource {
    fn source_name(&self) -> &str {
        &self.server.name
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.tools.clone()
    }
}

struct McpTool {
    full_name: String,
    server: Arc<Server>,
    tool: ServerTool,
}

impl McpTool {
    fn new(server: Arc<Server>, tool: ServerTool) -> Self {
        McpTool { full_name: format!("mcp__{}__{}", server.name, tool.name), server, tool }
    }
}

impl DynTool for McpTool {
    fn name(&self) -> &str {
        &self.full_name
    }

    fn aliases(&self) -> &[&'static str] {
        &[]
    }

    fn description(&self) -> String {
        self.tool.description.clone()
    }

    fn input_schema(&self) -> &Value {
        &self.tool.schema
    }

    /// The server's annotations as it gave them; where it gave none, MCP's
    /// defaults (not read-only, destructive, not idempotent, open world).
    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        let t = &self.tool;
        agentd_protocol::tools::ToolHints {
            read_only: t.read_only,
            destructive: !t.read_only && t.destructive.unwrap_or(true),
            idempotent: t.read_only || t.idempotent.unwrap_or(false),
            open_world: t.open_world.unwrap_or(true),
        }
    }

    fn label(&self) -> Option<agentd_protocol::tools::ToolLabel> {
        self.tool.label.clone()
    }

    /// A tool a model API would reject is never offered; a call that names
    /// it anyway is told why.
    fn is_legacy(&self) -> bool {
        self.tool.unusable.is_some()
    }

    fn prepare(&self, input: Value) -> Result<Box<dyn PreparedCall>, InputError> {
        let fail = |detail: String| InputError { tool: self.full_name.clone(), field: ".".into(), detail };
        if let Some(why) = &self.tool.unusable {
            return Err(fail(format!(
                "MCP server {} offers this tool, but {why}, so it is not offered to models",
                self.server.name
            )));
        }
        let Value::Object(arguments) = input else {
            return Err(fail("the input must be a JSON object".into()));
        };
        Ok(Box::new(McpCall {
            full_name: self.full_name.clone(),
            server: self.server.clone(),
            tool: self.tool.name.clone(),
            read_only: self.tool.read_only,
            output_schema: self.tool.output_schema.clone(),
            arguments,
        }))
    }

    fn render_grouped(&self, calls: &[&dyn PreparedCall]) -> String {
        format!("{} ×{}", self.full_name, calls.len())
    }
}

struct McpCall {
    full_name: String,
    server: Arc<Server>,
    tool: String,
    read_only: bool,
    output_schema: Option<Value>,
    arguments: serde_json::Map<String, Value>,
}

impl PreparedCall for McpCall {
    fn tool_name(&self) -> &str {
        &self.full_name
    }

    fn input_any(&self) -> &dyn Any {
        &self.arguments
    }

    fn is_concurrency_safe(&self) -> bool {
        self.read_only
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn is_destructive(&self) -> bool {
        !self.read_only
    }

    fn check_permissions(&self, _ctx: &ToolContext) -> Decision {
        Decision::Ask {
            reason: format!("{} (MCP server {}) wants to run", self.tool, self.server.name),
            suggestion: Some(self.full_name.clone()),
        }
    }

    fn render_use(&self) -> String {
        format!("{} ({})", self.tool, self.server.name)
    }

    fn run(self: Box<Self>, ctx: ToolContext, progress: Option<ProgressReporter>) -> BoxFuture<CallOutcome> {
        Box::pin(async move {
            let McpCall { full_name, server, tool, arguments, output_schema, .. } = *self;
            let timeout = Duration::from_millis(ctx.info.mcp_tool_timeout_ms);
            match call_tool(&server, &tool, arguments, timeout, &ctx, progress).await {
                Ok(value) => {
                    let prefix = format!("mcp-{}", uuid::Uuid::new_v4().simple());
                    let mut saver = super::binary::Saver::new((*ctx.output_dir).clone(), &prefix);
                    let (content, is_error) = convert_result(&value, &mut |b| saver.save(b));
                    let content_meta = content_meta(&value, &content);
                    let structured = value.get("structuredContent").cloned();
                    let structured = match structured_checked(structured, output_schema.as_ref(), is_error) {
                        Ok(structured) => structured,
                        Err(why) => {
                            return CallOutcome::error(format!(
                                "MCP server {}: {tool} answered with structured content that {why}",
                                server.name
                            ));
                        }
                    };
                    let render =
                        if is_error { format!("{tool} ({}) failed", server.name) } else { format!("{full_name} done") };
                    CallOutcome {
                        content,
                        is_error,
                        render,
                        modifier: None,
                        structured,
                        content_meta: content_meta.into(),
                        failure: None,
                    }
                }
                Err(message) => CallOutcome::error(message),
            }
        })
    }
}

/// Sends `notifications/cancelled` for a request unless disarmed: the call
/// was cancelled, timed out, or its future was dropped.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
    reason: &'static str,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            let reason = self.reason.to_owned();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let note = rmcp::model::CancelledNotificationParam::new(Some(id), Some(reason));
                    let _ = peer.notify_cancelled(note).await;
                });
            }
        }
    }
}

async fn call_tool(
    server: &Server,
    tool: &str,
    arguments: serde_json::Map<String, Value>,
    timeout: Duration,
    ctx: &ToolContext,
    progress: Option<ProgressReporter>,
) -> Result<Value, String> {
    let name = &server.name;
    let peer = tokio::select! {
        peer = server.peer() => peer.map_err(|e| format!("MCP server {name} is not available: {e}"))?,
        _ = ctx.cancel.cancelled() => return Err("cancelled".into()),
    };
    let redact = |e: String| server.redact(e);
    // Its elicitations go to this session while the call runs.
    let _in_flight = server.elicit_targets().in_flight(&ctx.session_id);
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = Some(arguments);
    let deadline = tokio::time::Instant::now() + timeout;
    // A server of MCP 2026-07-28 asks for input in its result: the call is
    // made again with the answers, a round at a time.
    for _round in 0..super::answers::MAX_ROUNDS {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let mut options = PeerRequestOptions::no_options();
        options.meta = server.request_meta(&peer);
        let handle = peer.send_cancellable_request(request, options).await.map_err(|e| {
            server
                .auth_failure(&e)
                .unwrap_or_else(|| redact(format!("MCP server {name}: sending the call failed: {e}")))
        })?;
        let _progress = progress.clone().map(|report| server.watch_progress(&handle.progress_token, report));
        let mut guard =
            CancelOnDrop { peer: peer.clone(), id: Some(handle.id.clone()), reason: "cancelled by the user" };
        let answer = tokio::select! {
            answer = handle.await_response() => answer,
            _ = ctx.cancel.cancelled() => return Err("cancelled".into()),
            _ = tokio::time::sleep_until(deadline) => {
                guard.reason = "timed out";
                return Err(format!(
                    "MCP server {name}: {tool} did not answer within {} s (the session's mcp_tool_timeout_ms); the call was cancelled",
                    timeout.as_secs_f64()
                ));
            }
        };
        guard.id = None;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => {
                return Ok(serde_json::to_value(&result).unwrap_or_default());
            }
            Ok(ServerResult::InputRequiredResult(asked)) => {
                let elicit = server.elicit_targets();
                let answered = super::answers::rounds(name, &server.workspace, elicit, asked);
                // Answering counts within the call's timeout, as a server's
                // own requests during a call do.
                let (responses, state) = tokio::select! {
                    answered = answered => answered.map_err(|why| format!("MCP server {name}: {tool}: {why}"))?,
                    _ = ctx.cancel.cancelled() => return Err("cancelled".into()),
                    _ = tokio::time::sleep_until(deadline) => {
                        return Err(format!(
                            "MCP server {name}: {tool}: its questions were not answered within {} s (the session's mcp_tool_timeout_ms)",
                            timeout.as_secs_f64()
                        ));
                    }
                };
                params.input_responses = responses;
                params.request_state = state;
            }
            Ok(_) => return Err(format!("MCP server {name}: the answer to {tool} was not a tool result")),
            Err(rmcp::ServiceError::McpError(e)) => {
                return Err(redact(format!("MCP server {name}: {tool} failed: {}", e.message)));
            }
            Err(e) if let Some(why) = server.auth_failure(&e) => return Err(why),
            Err(rmcp::ServiceError::TransportClosed) | Err(rmcp::ServiceError::TransportSend(_)) => {
                let why = server.died().await;
                return Err(format!(
                    "MCP server {name} stopped during the call to {tool}: {why}; the next call starts it again"
                ));
            }
            Err(e) => return Err(redact(format!("MCP server {name}: {tool} failed: {e}"))),
        }
    }
    Err(format!(
        "MCP server {name}: {tool} asked for input more than {} times; the call was given up",
        super::answers::MAX_ROUNDS
    ))
}

/// Largest `structuredContent` kept, serialised.
const MAX_STRUCTURED_BYTES: usize = 1 << 20;
/// Schema nodes and enum values one check may visit: a check that would
/// take more (a huge schema, `anyOf` over long arrays) fails closed.
const CHECK_BUDGET: usize = 200_000;

/// A result's `structuredContent` as MCP requires it of a tool with an
/// `outputSchema`: present (unless the call failed) and fitting it; a
/// tool without one may send any, up to [`MAX_STRUCTURED_BYTES`].
/// `Err` says what is wrong.
fn structured_checked(
    structured: Option<Value>,
    schema: Option<&Value>,
    is_error: bool,
) -> Result<Option<Value>, String> {
    let Some(value) = structured else {
        return match schema {
            Some(_) if !is_error => Err("is missing (the tool declares an output schema)".into()),
            _ => Ok(None),
        };
    };
    if serde_json::to_string(&value).map_or(true, |t| t.len() > MAX_STRUCTURED_BYTES) {
        return Err(format!("is larger than {} MiB", MAX_STRUCTURED_BYTES >> 20));
    }
    if let Some(schema) = schema
        && !is_error
    {
        let mut budget = CHECK_BUDGET;
        if let Err(misfit) = fits(&value, schema, &mut budget, 0) {
            return Err(match misfit {
                Misfit::At(path, what) => format!("does not fit its output schema at structuredContent{path}: {what}"),
                Misfit::TooCostly => "is too costly to check against its output schema".into(),
            });
        }
    }
    Ok(Some(value))
}

/// Why a value does not fit: where (a path built on the way out, so a
/// failed `anyOf` branch costs no text) and what; or the check ran out
/// of budget.
#[derive(Debug)]
enum Misfit {
    At(String, String),
    TooCostly,
}

impl Misfit {
    fn under(self, step: impl FnOnce() -> String) -> Misfit {
        match self {
            Misfit::At(path, what) => Misfit::At(format!("{}{path}", step()), what),
            costly => costly,
        }
    }
}

/// Whether `value` fits `schema`, for JSON Schema's common keywords
/// (`type`, `enum`, `const`, `properties`, `required`,
/// `additionalProperties`, `items`, `anyOf`/`oneOf`/`allOf`); others
/// (`$ref`, formats, bounds) are not checked.
fn fits(value: &Value, schema: &Value, budget: &mut usize, depth: usize) -> Result<(), Misfit> {
    *budget = budget.checked_sub(1).ok_or(Misfit::TooCostly)?;
    let Some(schema) = schema.as_object() else {
        return if schema == &Value::Bool(false) {
            Err(Misfit::At(String::new(), "nothing fits".into()))
        } else {
            Ok(())
        };
    };
    if depth > 32 {
        return Ok(());
    }
    let wrong = |what: String| Err(Misfit::At(String::new(), what));
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let is = |t: &str| match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => true,
        };
        if !names.is_empty() && !names.iter().any(|t| is(t)) {
            return wrong(format!("{} is not of type {}", short(value), names.join(" or ")));
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        *budget = budget.checked_sub(values.len()).ok_or(Misfit::TooCostly)?;
        if !values.contains(value) {
            return wrong(format!("{} is not one of its enum's {} values", short(value), values.len()));
        }
    }
    if let Some(want) = schema.get("const")
        && want != value
    {
        return wrong(format!("{} is not its const", short(value)));
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
        {
            *budget = budget.checked_sub(1).ok_or(Misfit::TooCostly)?;
            if !object.contains_key(required) {
                return wrong(format!("{required} is required"));
            }
        }
        let extra = schema.get("additionalProperties");
        for (key, v) in object {
            *budget = budget.checked_sub(1).ok_or(Misfit::TooCostly)?;
            let sub = match properties.and_then(|p| p.get(key)) {
                Some(sub) => sub,
                None if extra == Some(&Value::Bool(false)) => return wrong(format!("{key} is not allowed")),
                None => match extra.filter(|s| s.is_object()) {
                    Some(sub) => sub,
                    None => continue,
                },
            };
            fits(v, sub, budget, depth + 1).map_err(|m| m.under(|| format!(".{key}")))?;
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items").filter(|i| i.is_object()), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            fits(v, items, budget, depth + 1).map_err(|m| m.under(|| format!("[{i}]")))?;
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            fits(value, sub, budget, depth + 1)?;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(any) = schema.get(key).and_then(Value::as_array)
            && !any.is_empty()
        {
            let mut fitted = false;
            for sub in any {
                match fits(value, sub, budget, depth + 1) {
                    Ok(()) => {
                        fitted = true;
                        break;
                    }
                    Err(Misfit::TooCostly) => return Err(Misfit::TooCostly),
                    Err(Misfit::At(..)) => {}
                }
            }
            if !fitted {
                return wrong(format!("{} fits none of its {key}", short(value)));
            }
        }
    }
    Ok(())
}

/// A value in a message, briefly: a scalar as JSON (a string cut at 60
/// characters), an array or object by its size (never serialised whole).
fn short(value: &Value) -> String {
    match value {
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(o) => format!("an object of {} properties", o.len()),
        Value::String(s) if s.chars().count() > 60 => {
            format!("{:?}…", s.chars().take(60).collect::<String>())
        }
        other => other.to_string(),
    }
}

/// The strongest rule that names every tool of `server` (`mcp__server`,
/// `mcp__server__*`): the resource tools obey them as the server's tools do.
pub(super) fn server_rule(ctx: &ToolContext, server: &str) -> Option<crate::permission::rules::RuleKind> {
    let all = format!("mcp__{server}__*");
    ctx.rules.decide(&all, &crate::permission::rules::Facts::Other).map(|r| r.kind)
}

/// A `CallToolResult` (as JSON) as tool_result content: text as it is,
/// images as images, embedded resources as their text, links as a line;
/// `structuredContent` when there is no content. Text beyond
/// [`MAX_RESULT_CHARS`] is cut with a note.
pub fn convert_result(
    result: &Value,
    save: &mut dyn FnMut(super::binary::Binary<'_>) -> String,
) -> (Vec<ContentBlock>, bool) {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut blocks = Vec::new();
    for block in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => blocks.push(ContentBlock::text(str_of(block, "text"))),
            Some("image") => {
                let media_type = str_of(block, "mimeType");
                let data = str_of(block, "data");
                if !IMAGE_TYPES.contains(&media_type.as_str()) {
                    blocks.push(ContentBlock::text(format!("[image of type {media_type:?}, not shown]")));
                } else if data.len() > MAX_IMAGE_BASE64 {
                    blocks.push(ContentBlock::text(format!(
                        "[image of {} bytes, too large to show]",
                        data.len() / 4 * 3
                    )));
                } else {
                    blocks
                        .push(ContentBlock::Image { source: ImageSource { kind: "base64".into(), media_type, data } });
                }
            }
            Some("resource") => {
                let r = block.get("resource").cloned().unwrap_or_default();
                let (media_type, blob) = (str_of(&r, "mimeType"), str_of(&r, "blob"));
                match r.get("text").and_then(Value::as_str) {
                    Some(text) => blocks.push(ContentBlock::text(text)),
                    // An image the model can see is an image block.
                    None if IMAGE_TYPES.contains(&media_type.as_str()) && blob.len() <= MAX_IMAGE_BASE64 => blocks
                        .push(ContentBlock::Image {
                            source: ImageSource { kind: "base64".into(), media_type, data: blob },
                        }),
                    None => {
                        let what = format!("resource {}", str_of(&r, "uri"));
                        blocks.push(ContentBlock::text(save(super::binary::Binary {
                            what: &what,
                            media_type: &media_type,
                            data: &blob,
                        })))
                    }
                }
            }
            Some("resource_link") => blocks.push(ContentBlock::text(format!(
                "[resource {}: {}]",
                str_of(block, "name"),
                str_of(block, "uri")
            ))),
            Some("audio") => {
                let (media_type, data) = (str_of(block, "mimeType"), str_of(block, "data"));
                blocks.push(ContentBlock::text(save(super::binary::Binary {
                    what: "audio",
                    media_type: &media_type,
                    data: &data,
                })))
            }
            _ => blocks.push(ContentBlock::text(block.to_string())),
        }
    }
    if blocks.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        blocks.push(ContentBlock::text(structured.to_string()));
    }
    if blocks.is_empty() {
        blocks.push(ContentBlock::text(if is_error { "(the tool failed without a message)" } else { "(no content)" }));
    }
    let mut budget = MAX_RESULT_CHARS;
    for block in &mut blocks {
        if let ContentBlock::Text { text } = block {
            let chars = text.chars().count();
            if chars > budget {
                let cut: String = text.chars().take(budget).collect();
                *text = format!("{cut}\n[output cut: {chars} characters, at most {MAX_RESULT_CHARS} are kept]");
                budget = 0;
            } else {
                budget -= chars;
            }
        }
    }
    (blocks, is_error)
}

/// Most bytes of [`ContentMeta`] kept for one result.
const MAX_META_BYTES: usize = 64 << 10;

/// What the server said of each block of `result` beyond what a model
/// reads in `content` (one block each, in order, as [`convert_result`]
/// made them): the block without its text or data, when it says more
/// than its kind. A block [`convert_result`] saved to a file (audio, a
/// binary resource) keeps only its annotations, as a text block's.
pub fn content_meta(result: &Value, content: &[ContentBlock]) -> Vec<ContentMeta> {
    let mut out = Vec::new();
    let mut budget = MAX_META_BYTES;
    let blocks = result.get("content").and_then(Value::as_array).into_iter().flatten();
    for (index, (block, shown)) in blocks.zip(content).enumerate() {
        let Some(mut kept) = block.as_object().cloned() else { continue };
        kept.remove("text");
        kept.remove("data");
        let kind = kept.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        if let Some(Value::Object(resource)) = kept.get_mut("resource") {
            resource.remove("text");
            resource.remove("blob");
            tidy_priority(resource);
        }
        tidy_priority(&mut kept);
        let saved = match kind.as_str() {
            "audio" => true,
            "resource" => block.pointer("/resource/blob").is_some() && matches!(shown, ContentBlock::Text { .. }),
            _ => false,
        };
        if saved {
            kept.retain(|k, _| k == "annotations" || k == "_meta");
            kept.insert("type".into(), "text".into());
        }
        if kind == "resource_link" && !safe_link(&mut kept) {
            continue;
        }
        if !kept.keys().any(|k| !matches!(k.as_str(), "type" | "mimeType")) {
            continue;
        }
        let kept = Value::Object(kept);
        let size = kept.to_string().len();
        if size > budget {
            continue;
        }
        budget -= size;
        out.push(ContentMeta { index: index as u32, block: kept });
    }
    out
}

/// Whether a server's resource link may go on as a link, its icons cut to
/// those a client may load (see [`super::listing::loadable_icon`]): not a
/// `javascript:`, `vbscript:` or `data:` URI a client could open. A URL
/// parser drops tabs, newlines and leading controls before it reads the
/// scheme (`java\tscript:` is `javascript:`), so they are dropped here too.
fn safe_link(link: &mut serde_json::Map<String, Value>) -> bool {
    let uri: String = (link.get("uri").and_then(Value::as_str).unwrap_or_default().chars())
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect::<String>()
        .to_ascii_lowercase();
    if ["javascript:", "vbscript:", "data:"].iter().any(|s| uri.starts_with(s)) {
        return false;
    }
    if let Some(Value::Array(icons)) = link.get_mut("icons") {
        icons.retain(super::listing::loadable_icon);
    }
    true
}

/// An annotation's `priority` as the server wrote it: rmcp reads it as an
/// `f32`, so 0.9 comes back 0.8999999761581421; the shortest `f32` text
/// gives 0.9 again.
fn tidy_priority(block: &mut serde_json::Map<String, Value>) {
    if let Some(p) = block.get_mut("annotations").and_then(|a| a.get_mut("priority"))
        && let Some(f) = p.as_f64()
        && let Ok(shortest) = (f as f32).to_string().parse::<f64>()
    {
        *p = serde_json::json!(shortest);
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The session's servers, for the resource tools.
#[derive(Clone, Default)]
pub struct Servers(pub Arc<Vec<Arc<Server>>>);

impl Servers {
    /// The servers, in the session's order.
    pub fn iter(&self) -> std::slice::Iter<'_, Arc<Server>> {
        self.0.iter()
    }

    /// The session's tool sources: each server's tools as last seen, and
    /// the resource tools when there is any server.
    pub fn sources(&self) -> Vec<Arc<dyn ExternalToolSource>> {
        let mut out: Vec<Arc<dyn ExternalToolSource>> =
            self.iter().map(|s| Arc::new(ServerSource::new(s.clone())) as Arc<dyn ExternalToolSource>).collect();
        if !self.0.is_empty() {
            out.push(Arc::new(super::resources::ResourceTools::new(self.clone())));
        }
        out
    }

    /// What makes two sessions' MCP tools the same (for sharing tool sets):
    /// the same servers with the same tool lists.
    pub fn identity(&self) -> String {
        self.iter()
            .map(|s| format!("{:p}/{:?}", Arc::as_ptr(s), s.tools().map(|t| Arc::as_ptr(&t))))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(super) fn find(&self, name: &str) -> Result<&Arc<Server>, ToolError> {
        self.0.iter().find(|s| s.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.0.iter().map(|s| s.name.as_str()).collect();
            ToolError::new(format!(
                "no MCP server named {name:?} in this session; its servers are: {}",
                names.join(", ")
            ))
        })
    }
}

/// `mcp_tool` hooks call a tool of one of the session's servers: as the
/// user's own configuration, without the session's permission checks
/// (a hook is not the model's call), one round (a server that asks for
/// input gets none).
impl crate::hooks::McpCaller for Servers {
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        cancel: &'a tokio_util::sync::CancellationToken,
    ) -> futures_util::future::BoxFuture<'a, Result<(String, bool), String>> {
        Box::pin(async move {
            let found = self.find(server).map_err(|e| e.message)?;
            let calling = async {
                let peer = found.peer().await.map_err(|e| format!("MCP server {server} is not available: {e}"))?;
                let mut params = CallToolRequestParams::new(tool.to_owned());
                params.arguments = Some(arguments);
                match peer.call_tool_once(params).await {
                    Ok(rmcp::model::CallToolResponse::Complete(result)) => {
                        let value = serde_json::to_value(&result).unwrap_or_default();
                        let text: Vec<&str> = value["content"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|b| b["type"] == "text")
                            .filter_map(|b| b["text"].as_str())
                            .collect();
                        Ok((text.join("\n"), value["isError"] == true))
                    }
                    Ok(_) => Err(format!("MCP server {server}: {tool} asked for input, which a hook cannot give")),
                    Err(e) => Err(found.redact(format!("MCP server {server}: {tool} failed: {e}"))),
                }
            };
            tokio::select! {
                done = tokio::time::timeout(timeout, calling) => {
                    done.unwrap_or_else(|_| Err(format!("MCP server {server}: {tool} did not answer within its timeout")))
                }
                _ = cancel.cancelled() => Err("cancelled".into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `convert_result` with binary content said, not kept.
    fn convert_result_kept(result: &Value) -> (Vec<ContentBlock>, bool) {
        convert_result(result, &mut |b| format!("[{} kept]", b.what))
    }

    /// A link a client could run (`javascript:`, `data:`) is not passed on
    /// as a link; a link's icons are the loadable ones only.
    #[test]
    fn a_link_a_client_could_run_stays_text() {
        let result = serde_json::json!({"content": [
            {"type": "resource_link", "uri": " JavaScript:alert(1)", "name": "x"},
            {"type": "resource_link", "uri": "java\tscript:alert(1)", "name": "x"},
            {"type": "resource_link", "uri": "\u{1}\nDATA:text/html,x", "name": "x"},
            {"type": "resource_link", "uri": "vb\rscript:x", "name": "x"},
            {"type": "resource_link", "uri": "file:///n.md", "name": "n", "icons": [
                {"src": "https://example.com/i.png"}, {"src": "file:///etc/passwd"},
                {"src": "data:image/svg+xml;base64,PHN2Zz4="}]},
        ]});
        let (content, _) = convert_result_kept(&result);
        let meta = serde_json::to_value(content_meta(&result, &content)).unwrap();
        assert_eq!(
            meta,
            serde_json::json!([{"index": 4, "block": {"type": "resource_link", "uri": "file:///n.md", "name": "n",
                "icons": [{"src": "https://example.com/i.png"}]}}])
        );
    }

    /// A block saved to a file keeps only its annotations (as a text
    /// block's); an image blob stays an embedded resource; a block that
    /// says nothing beyond its kind has no description.
    #[test]
    fn a_saved_block_is_described_as_text() {
        let result = serde_json::json!({"content": [
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav", "annotations": {"priority": 0.5}},
            {"type": "resource", "resource": {"uri": "file:///p.png", "mimeType": "image/png", "blob": "AAAA"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]});
        let (content, _) = convert_result_kept(&result);
        let meta = serde_json::to_value(content_meta(&result, &content)).unwrap();
        assert_eq!(
            meta,
            serde_json::json!([
                {"index": 0, "block": {"type": "text", "annotations": {"priority": 0.5}}},
                {"index": 1, "block": {"type": "resource", "resource": {"uri": "file:///p.png", "mimeType": "image/png"}}},
            ])
        );
    }

    #[test]
    fn results_become_content_blocks() {
        let (blocks, err) = convert_result_kept(&serde_json::json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA", "mimeType": "x/y"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///d.png", "blob": "AAAA", "mimeType": "image/png"}}
        ], "isError": false}));
        assert!(!err);
        assert_eq!(blocks[0], ContentBlock::text("hello"));
        assert!(matches!(&blocks[1], ContentBlock::Image { source } if source.media_type == "image/png"));
        assert_eq!(blocks[2], ContentBlock::text("inside"));
        assert_eq!(blocks[3], ContentBlock::text("[resource file:///b kept]"));
        assert!(matches!(&blocks[4], ContentBlock::Text { text } if text.contains("file:///c")));
        assert_eq!(blocks[5], ContentBlock::text("[audio kept]"));
        assert!(matches!(&blocks[6], ContentBlock::Image { source } if source.data == "AAAA"));
        let (blocks, err) =
            convert_result_kept(&serde_json::json!({"content": [], "structuredContent": {"a": 1}, "isError": true}));
        assert!(err);
        assert_eq!(blocks, vec![ContentBlock::text("{\"a\":1}")]);
        let big = "x".repeat(MAX_RESULT_CHARS + 10);
        let (blocks, _) = convert_result_kept(&serde_json::json!({"content": [{"type": "text", "text": big}]}));
        assert!(matches!(&blocks[0], ContentBlock::Text { text } if text.contains("output cut")));
    }

    #[test]
    fn structured_content_must_fit_the_output_schema() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "celsius": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"enum": ["a", "b"]},
                "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["city"],
            "additionalProperties": false
        });
        let ok = serde_json::json!({"city": "Oslo", "celsius": 3, "tags": ["x"], "kind": "a", "either": null});
        assert_eq!(structured_checked(Some(ok.clone()), Some(&schema), false), Ok(Some(ok)));
        for (bad, says) in [
            (serde_json::json!({"celsius": 3}), "city is required"),
            (serde_json::json!({"city": 1}), "structuredContent.city: 1 is not of type string"),
            (serde_json::json!({"city": "x", "celsius": 2.5}), "not of type integer"),
            (serde_json::json!({"city": "x", "tags": ["a", 2]}), "structuredContent.tags[1]"),
            (serde_json::json!({"city": "x", "kind": "c"}), "is not one of its enum's 2 values"),
            (serde_json::json!({"city": "x", "either": 3}), "fits none of its anyOf"),
            (serde_json::json!({"city": "x", "extra": 1}), "extra is not allowed"),
            (serde_json::json!([1]), "an array of 1 items is not of type object"),
        ] {
            let e = structured_checked(Some(bad.clone()), Some(&schema), false).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(structured_checked(None, Some(&schema), false).unwrap_err().contains("missing"));
        // A failed call need not fit; a tool without a schema sends any.
        assert_eq!(structured_checked(None, Some(&schema), true), Ok(None));
        let any = serde_json::json!({"anything": [1, 2]});
        assert_eq!(structured_checked(Some(any.clone()), None, false), Ok(Some(any)));
        let huge = serde_json::json!({"x": "y".repeat(2 << 20)});
        assert!(structured_checked(Some(huge), None, false).unwrap_err().contains("larger"));
        // A check that would take long fails closed, at once.
        let names: Vec<String> = (0..10_000).map(|i| format!("n{i}")).collect();
        let costly = serde_json::json!({"properties": {"a": {"items": {"anyOf": [{"enum": names}, {}]}}}});
        let started = std::time::Instant::now();
        let e = structured_checked(Some(serde_json::json!({"a": vec![1; 5000]})), Some(&costly), false).unwrap_err();
        assert!(e.contains("too costly"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        // Keys the schema does not name cost too: many anyOf branches that
        // each walk 80,000 keys before failing on the last.
        let mut value = serde_json::Map::new();
        for i in 0..80_000 {
            value.insert(format!("k{i:05}"), serde_json::json!(1));
        }
        value.insert("zzzz".into(), serde_json::json!(1));
        let branches = vec![serde_json::json!({"properties": {"zzzz": false}}); 2000];
        let keys = serde_json::json!({"type": "object", "anyOf": branches});
        let started = std::time::Instant::now();
        let e = structured_checked(Some(Value::Object(value)), Some(&keys), false).unwrap_err();
        assert!(e.contains("too costly"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
