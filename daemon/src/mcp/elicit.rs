//! A server's `elicitation/create` (the server asks the user for a few
//! values during a call), routed to the session whose call to that server
//! is in flight (else the only session using it), sent to that session's
//! client as an `mcp/elicitation` event and answered with
//! `mcp/elicitation_respond`. Without a client that declares it answers
//! elicitations, or without an answer within the session's permission
//! timeout, the server is told the user declined.
//!
//! A server's `sampling/createMessage` (it asks for a completion) takes the
//! same route as an `mcp/sampling` event: the harness asks the user (per
//! server; "allow always" holds for the session), calls its own model and
//! answers with `mcp/sampling_respond`. agentd owns tools, not the model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use agentd_protocol::hooks::HookEvent;
use agentd_protocol::mcp::McpElicitationAction;
use serde_json::{Map, Value, json};

use crate::events::EventLog;
use crate::sync::MutexExt;

/// Elicitations one session waits on at once; more are declined.
const MAX_PENDING: usize = 4;

/// Properties a requested schema may have.
const MAX_PROPERTIES: usize = 32;

/// What the user answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Accept, decline or cancel.
    pub action: McpElicitationAction,
    /// With accept: the values.
    pub content: Option<Map<String, Value>>,
}

impl Answer {
    fn decline() -> Answer {
        Answer { action: McpElicitationAction::Decline, content: None }
    }
}

/// A URL-mode elicitation (MCP 2025-11-25): the user is sent to `url`
/// (the server's own page: a login, a payment) rather than asked for
/// values; the answer is whether they consent to go.
pub struct UrlRequest {
    /// Where: `https://`, or `http://` on the loopback interface.
    pub url: String,
    /// The server's id for it.
    pub elicitation_id: String,
}

impl UrlRequest {
    /// `url` and `elicitation_id` of a URL-mode request, checked.
    pub fn of(request: &Value) -> Result<UrlRequest, String> {
        let url = request.get("url").and_then(Value::as_str).ok_or("a URL elicitation needs url")?;
        let elicitation_id =
            request.get("elicitationId").and_then(Value::as_str).ok_or("a URL elicitation needs elicitationId")?;
        if url.len() > 4096
            || elicitation_id.len() > 256
            || url.chars().chain(elicitation_id.chars()).any(char::is_control)
        {
            return Err("the URL or its elicitationId is too long or holds control characters".into());
        }
        let parsed = url::Url::parse(url).map_err(|e| format!("url is not an address: {e}"))?;
        let loopback = matches!(parsed.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        let credentials = !parsed.username().is_empty() || parsed.password().is_some();
        if !(parsed.scheme() == "https" || parsed.scheme() == "http" && loopback) || credentials {
            return Err("url must be https:// (or http:// on the loopback interface), without credentials".into());
        }
        Ok(UrlRequest { url: parsed.to_string(), elicitation_id: elicitation_id.to_owned() })
    }
}

struct Pending {
    /// `Null` for a URL-mode request (no values).
    schema: Value,
    answer: tokio::sync::oneshot::Sender<Answer>,
}

/// What a harness answered a sampling request: MCP's
/// `CreateMessageResult`, or why there is none.
pub type Sampled = Result<Value, String>;

/// One session's side of elicitations and sampling requests.
pub struct Elicitations {
    session_id: String,
    events: Weak<EventLog>,
    timeout: Duration,
    pending: Mutex<HashMap<String, Pending>>,
    /// Waiting sampling requests: the server, where the answer goes.
    samples: Mutex<HashMap<String, (String, tokio::sync::oneshot::Sender<Sampled>)>>,
    /// Servers the user allowed always to sample.
    sampling_allowed: Mutex<std::collections::HashSet<String>>,
    /// The session's added directories (`add_dirs`), offered as roots
    /// beside the workspace while its call is in flight.
    add_dirs: Vec<std::path::PathBuf>,
    next: AtomicU64,
    /// The session's hooks (Elicitation, ElicitationResult), once known.
    hooks: std::sync::OnceLock<Weak<crate::hooks::Hooks>>,
}

impl Elicitations {
    /// For the session `session_id`, whose events go to `events`.
    pub fn new(session_id: &str, events: &Arc<EventLog>, timeout: Duration) -> Self {
        Self::with_dirs(session_id, events, timeout, Vec::new())
    }

    /// As [`Elicitations::new`], for a session with added directories.
    pub fn with_dirs(
        session_id: &str,
        events: &Arc<EventLog>,
        timeout: Duration,
        add_dirs: Vec<std::path::PathBuf>,
    ) -> Self {
        Elicitations {
            session_id: session_id.to_owned(),
            events: Arc::downgrade(events),
            timeout,
            pending: Mutex::new(HashMap::new()),
            samples: Mutex::new(HashMap::new()),
            sampling_allowed: Mutex::new(Default::default()),
            add_dirs,
            next: AtomicU64::new(1),
            hooks: std::sync::OnceLock::new(),
        }
    }

    /// The session's hooks, which hear (and may answer) its elicitations.
    pub fn set_hooks(&self, hooks: &Arc<crate::hooks::Hooks>) {
        let _ = self.hooks.set(Arc::downgrade(hooks));
    }

    /// Asks the client as [`Elicitations::ask_client`] does, with the
    /// session's Elicitation hooks first (one that answers, answers for the
    /// user; exit code 2 declines) and its ElicitationResult hooks after
    /// (they may change the answer; exit code 2 declines), as Claude Code
    /// 2.1.332 runs them.
    pub async fn ask(&self, server: &str, message: &str, schema: Value, url: Option<&UrlRequest>) -> Answer {
        let hooks = self.hooks.get().and_then(Weak::upgrade);
        let about = crate::hooks::About { turn_id: None, tool_use_id: None, tool_name: None };
        let token = tokio_util::sync::CancellationToken::new();
        let pushed = crate::hooks::Completions::Pushed;
        let mut answer = None;
        if let Some(hooks) = hooks.as_ref().filter(|h| h.wants(HookEvent::Elicitation, server)) {
            let mut input = json!({ "mcp_server_name": server, "message": message, "mode": "form" });
            match url {
                Some(u) => {
                    input["mode"] = json!("url");
                    input["url"] = json!(u.url);
                    input["elicitation_id"] = json!(u.elicitation_id);
                }
                None => input["requested_schema"] = schema.clone(),
            }
            let said = hooks.run(HookEvent::Elicitation, server, input, &about, &token, pushed).await;
            if !said.blocks.is_empty() {
                return Answer::decline();
            }
            answer = said.elicited.and_then(|(action, content)| self.answer_of(&schema, &action, content));
        }
        let mut answer = match answer {
            Some(answer) => answer,
            None => self.ask_client(server, message, schema.clone(), url).await,
        };
        if let Some(hooks) = hooks.as_ref().filter(|h| h.wants(HookEvent::ElicitationResult, server)) {
            let mode = if url.is_some() { "url" } else { "form" };
            let mut input =
                json!({ "mcp_server_name": server, "mode": mode, "action": answer.action, "content": answer.content });
            if let Some(u) = url {
                input["elicitation_id"] = json!(u.elicitation_id);
            }
            let said = hooks.run(HookEvent::ElicitationResult, server, input, &about, &token, pushed).await;
            if !said.blocks.is_empty() {
                return Answer::decline();
            }
            if let Some(changed) = said.elicited.and_then(|(action, content)| self.answer_of(&schema, &action, content))
            {
                answer = changed;
            }
        }
        answer
    }

    /// A hook's answer, if it is one: an accept's content must fit the
    /// schema, as a client's must.
    fn answer_of(&self, schema: &Value, action: &str, content: Option<Value>) -> Option<Answer> {
        let action: McpElicitationAction = serde_json::from_value(Value::String(action.to_owned())).ok()?;
        let content = match action {
            McpElicitationAction::Accept if schema.is_null() => None,
            McpElicitationAction::Accept => {
                let map = content.and_then(|c| c.as_object().cloned()).unwrap_or_default();
                Some(fits(schema, map).map_err(|e| tracing::warn!("an Elicitation hook's content: {e}")).ok()?)
            }
            _ => None,
        };
        Some(Answer { action, content })
    }

    /// Asks the session's client for a completion (`request` is MCP's
    /// `CreateMessageRequest` params): refused when nobody can answer, too
    /// many wait, the user declines, or no answer comes in time.
    /// `in_flight`: a call of the session to the server is running (else
    /// the user is asked whatever they allowed before).
    pub async fn sample(&self, server: &str, request: Value, in_flight: bool) -> Sampled {
        let Some(events) = self.events.upgrade() else { return Err("the session closed".into()) };
        if serde_json::to_string(&request).map_or(true, |t| t.len() > MAX_SAMPLING_REQUEST_BYTES) {
            return Err(format!("the request is larger than {} KiB", MAX_SAMPLING_REQUEST_BYTES >> 10));
        }
        if !events.has_sampler() {
            return Err(
                "no client of the agentd session answers sampling requests (capabilities: [\"sampling\"])".into()
            );
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let request_id = format!("sample-{}", self.next.fetch_add(1, Ordering::Relaxed));
        {
            let mut samples = self.samples.locked();
            if samples.len() >= MAX_PENDING {
                return Err(format!("{MAX_PENDING} sampling requests of this session already wait for an answer"));
            }
            samples.insert(request_id.clone(), (server.to_owned(), tx));
        }
        let needs_approval = !in_flight || !self.sampling_allowed.locked().contains(server);
        events.push(agentd_protocol::turn::EventKind::McpSampling {
            request_id: request_id.clone(),
            server: server.to_owned(),
            request,
            needs_approval,
        });
        drop(events);
        let answer = tokio::time::timeout(self.timeout, rx).await;
        self.samples.locked().remove(&request_id);
        match answer {
            Ok(Ok(answer)) => answer,
            _ => Err(format!("no completion within {} ms", self.timeout.as_millis())),
        }
    }

    /// `mcp/sampling_respond`: with allow, the completion must be MCP's
    /// `CreateMessageResult` (or an `error`); a bad one is refused and the
    /// request keeps waiting.
    pub fn respond_sample(
        &self,
        request_id: &str,
        decision: agentd_protocol::mcp::McpSamplingDecision,
        result: Option<Value>,
        error: Option<String>,
    ) -> Result<(), String> {
        use agentd_protocol::mcp::McpSamplingDecision as D;
        let mut samples = self.samples.locked();
        if !samples.contains_key(request_id) {
            return Err(format!("no sampling request {request_id:?} waits for an answer in this session"));
        }
        let answer = match (decision, result, error) {
            (D::Deny, ..) => Err("the user declined the sampling request".to_owned()),
            (_, Some(result), None) => Ok(completion(result)?),
            (_, None, Some(error)) => {
                Err(format!("the client's model failed: {}", error.chars().take(1000).collect::<String>()))
            }
            _ => return Err("with allow, give either result or error".into()),
        };
        let Some((server, waiting)) = samples.remove(request_id) else { return Err("answered already".into()) };
        if decision == D::AllowAlways {
            self.sampling_allowed.locked().insert(server);
        }
        let _ = waiting.send(answer);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.locked()
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The session's added directories.
    pub fn add_dirs(&self) -> &[std::path::PathBuf] {
        &self.add_dirs
    }

    /// Asks the session's client; declines when nobody can answer, too
    /// many are waiting, or no answer comes in time.
    async fn ask_client(&self, server: &str, message: &str, schema: Value, url: Option<&UrlRequest>) -> Answer {
        let Some(events) = self.events.upgrade() else { return Answer::decline() };
        if !events.has_elicitor() {
            tracing::info!(server, "MCP elicitation declined: no client of the session answers elicitations");
            return Answer::decline();
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let request_id = format!("elicit-{}", self.next.fetch_add(1, Ordering::Relaxed));
        {
            let mut pending = self.lock();
            if pending.len() >= MAX_PENDING {
                tracing::warn!(server, "MCP elicitation declined: {MAX_PENDING} already wait for an answer");
                return Answer::decline();
            }
            pending.insert(request_id.clone(), Pending { schema: schema.clone(), answer: tx });
        }
        events.push(agentd_protocol::turn::EventKind::McpElicitation {
            request_id: request_id.clone(),
            server: server.to_owned(),
            message: message.chars().take(4000).collect(),
            requested_schema: schema,
            tool_use_id: None,
            url: url.map(|u| u.url.clone()),
            elicitation_id: url.map(|u| u.elicitation_id.clone()),
        });
        drop(events);
        let answer = tokio::time::timeout(self.timeout, rx).await;
        self.lock().remove(&request_id);
        match answer {
            Ok(Ok(answer)) => answer,
            _ => {
                tracing::info!(server, "MCP elicitation declined: no answer within {} ms", self.timeout.as_millis());
                Answer::decline()
            }
        }
    }

    /// `mcp/elicitation_respond`: an accept's values must fit the schema.
    pub fn respond(
        &self,
        request_id: &str,
        action: McpElicitationAction,
        content: Option<Map<String, Value>>,
    ) -> Result<(), String> {
        let mut pending = self.lock();
        let Some(waiting) = pending.get(request_id) else {
            return Err(format!("no elicitation {request_id:?} waits for an answer in this session"));
        };
        let content = match action {
            // A URL's consent carries no values.
            McpElicitationAction::Accept if waiting.schema.is_null() => None,
            McpElicitationAction::Accept => Some(fits(&waiting.schema, content.unwrap_or_default())?),
            _ => None,
        };
        let Some(waiting) = pending.remove(request_id) else { return Err("answered already".into()) };
        let _ = waiting.answer.send(Answer { action, content });
        Ok(())
    }
}

/// Largest sampling request passed on to a harness (it goes into the
/// session's event log).
const MAX_SAMPLING_REQUEST_BYTES: usize = 1 << 20;

/// Largest completion passed on to a server.
const MAX_COMPLETION_BYTES: usize = 4 << 20;

/// `result` checked as MCP's `CreateMessageResult`: an assistant message
/// with text, image or audio content, the model that made it.
fn completion(result: Value) -> Result<Value, String> {
    if serde_json::to_string(&result).map_or(true, |t| t.len() > MAX_COMPLETION_BYTES) {
        return Err(format!("result: larger than {} MiB", MAX_COMPLETION_BYTES >> 20));
    }
    if result.get("role").and_then(Value::as_str) != Some("assistant") {
        return Err("result: role must be \"assistant\"".into());
    }
    if !result.get("model").is_some_and(Value::is_string) {
        return Err("result: model (the model that answered) is required".into());
    }
    let content = result.get("content").ok_or("result: content is required")?;
    let ok = match content.get("type").and_then(Value::as_str) {
        Some("text") => content.get("text").is_some_and(Value::is_string),
        Some("image" | "audio") => {
            content.get("data").is_some_and(Value::is_string) && content.get("mimeType").is_some_and(Value::is_string)
        }
        _ => false,
    };
    if !ok {
        return Err("result: content must be {type: text, text} or {type: image|audio, data, mimeType}".into());
    }
    Ok(result)
}

/// Whether `schema` is what MCP lets a server ask for: an object whose
/// properties are each a string (maybe with `enum` of strings), number,
/// integer or boolean, nothing nested.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema must be of type object".into());
    }
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    if properties.len() > MAX_PROPERTIES {
        return Err(format!("the requested schema has more than {MAX_PROPERTIES} properties"));
    }
    for (name, p) in &properties {
        match p.get("type").and_then(Value::as_str) {
            // A string, or a single choice: `enum`, or `oneOf` of
            // `{const, title}`.
            Some("string") => {
                choices(p).map_err(|e| format!("property {name}: {e}"))?;
            }
            Some("number" | "integer" | "boolean") => {}
            // Several choices (MCP 2025-11-25): `items` with `enum`, or
            // `anyOf` of `{const, title}`.
            Some("array") => {
                let items = p.get("items").ok_or_else(|| format!("property {name}: an array needs items"))?;
                if items.get("type").is_some_and(|t| t != "string") || !matches!(choices(items), Ok(Some(_))) {
                    return Err(format!(
                        "property {name}: an array must list choices of strings (items.enum or items.anyOf)"
                    ));
                }
            }
            other => {
                return Err(format!(
                    "property {name}: type {} is not one MCP allows (string, number, integer, boolean, array of choices)",
                    other.unwrap_or("(none)")
                ));
            }
        }
    }
    Ok(())
}

/// The choices a schema offers (`enum`, or `oneOf`/`anyOf` of `{const}`),
/// strings all; `None` when it offers none.
fn choices(schema: &Value) -> Result<Option<Vec<&Value>>, String> {
    if let Some(values) = schema.get("enum") {
        let values = values.as_array().filter(|v| v.iter().all(Value::is_string)).ok_or("enum must list strings")?;
        return Ok(Some(values.iter().collect()));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema.get(key) {
            let consts: Option<Vec<&Value>> = options
                .as_array()
                .map(|o| o.iter().map(|c| c.get("const").filter(|v| v.is_string())).collect::<Option<Vec<_>>>())
                .unwrap_or(None);
            return consts.map(Some).ok_or_else(|| format!("{key} must list {{const, title}} of strings"));
        }
    }
    Ok(None)
}

/// `content` checked against `schema`: required properties present, each
/// of its type (an enum's value among its values), none unknown.
fn fits(schema: &Value, content: Map<String, Value>) -> Result<Map<String, Value>, String> {
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    for required in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !content.contains_key(required) {
            return Err(format!("content: {required} is required"));
        }
    }
    for (name, value) in &content {
        let Some(p) = properties.get(name) else {
            return Err(format!("content: {name} is not asked for"));
        };
        let among = |schema: &Value, v: &Value| matches!(choices(schema), Ok(Some(c)) if c.contains(&v));
        let ok = match p.get("type").and_then(Value::as_str) {
            Some("string") => value.is_string() && (matches!(choices(p), Ok(None)) || among(p, value)),
            Some("array") => {
                let items = p.get("items").cloned().unwrap_or_default();
                value.as_array().is_some_and(|picked| picked.iter().all(|v| among(&items, v)))
            }
            Some("number") => value.is_number(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("boolean") => value.is_boolean(),
            _ => false,
        };
        if !ok {
            return Err(format!("content: {name} does not fit its schema {p}"));
        }
    }
    Ok(content)
}

/// The sessions a server's elicitations may go to: by session id, and the
/// ones with a call to it in flight (most recent last).
#[derive(Default)]
pub struct Targets {
    inner: Mutex<TargetsInner>,
}

#[derive(Default)]
struct TargetsInner {
    /// By session id.
    sessions: HashMap<String, Arc<Elicitations>>,
    /// Sessions with a call in flight, one entry a call, latest last.
    in_flight: Vec<String>,
    /// Sessions whose call ended within [`RECENT`], when: a request the
    /// server sent during that call may be handled after it ended (rmcp
    /// hands each message to a task of its own).
    ended: Vec<(String, std::time::Instant)>,
}

/// How long a session whose call ended still counts when a request is
/// routed.
const RECENT: Duration = Duration::from_secs(2);

impl Targets {
    fn lock(&self) -> std::sync::MutexGuard<'_, TargetsInner> {
        self.inner.locked()
    }

    /// Adds a session; it is a target while the guard lives.
    pub fn add(self: &Arc<Self>, target: Arc<Elicitations>) -> TargetGuard {
        let id = target.session_id().to_owned();
        self.lock().sessions.insert(id.clone(), target);
        TargetGuard { targets: self.clone(), session_id: id }
    }

    /// Marks a call of `session_id` in flight while the guard lives.
    pub fn in_flight(self: &Arc<Self>, session_id: &str) -> FlightGuard {
        self.lock().in_flight.push(session_id.to_owned());
        FlightGuard { targets: self.clone(), session_id: session_id.to_owned() }
    }

    /// Where a server's request goes: the session with a call to it in
    /// flight (`true`), else the only session using it (`false`). Nowhere
    /// when calls of two sessions are in flight: which one made the
    /// request cannot be told (guessing would show one session's request
    /// to another's client, and answer it with another's approvals).
    /// A session whose call ended within [`RECENT`] counts as one with a
    /// call in flight for telling sessions apart (but not for approvals).
    pub fn route(&self) -> Option<(Arc<Elicitations>, bool)> {
        let mut inner = self.lock();
        let now = std::time::Instant::now();
        inner.ended.retain(|(_, at)| now.duration_since(*at) < RECENT);
        let mut active = inner.in_flight.iter().chain(inner.ended.iter().map(|(s, _)| s));
        if let Some(first) = active.next() {
            if active.any(|s| s != first) {
                return None;
            }
            let in_flight = !inner.in_flight.is_empty();
            return inner.sessions.get(first).cloned().map(|t| (t, in_flight));
        }
        (inner.sessions.len() == 1).then(|| inner.sessions.values().next().cloned().map(|t| (t, false))).flatten()
    }
}

/// Removes a session from the targets when dropped.
pub struct TargetGuard {
    targets: Arc<Targets>,
    session_id: String,
}

impl Drop for TargetGuard {
    fn drop(&mut self) {
        self.targets.lock().sessions.remove(&self.session_id);
    }
}

/// Ends a call's being in flight when dropped.
pub struct FlightGuard {
    targets: Arc<Targets>,
    session_id: String,
}

impl Drop for FlightGuard {
    fn drop(&mut self) {
        let mut inner = self.targets.lock();
        if let Some(i) = inner.in_flight.iter().rposition(|s| *s == self.session_id) {
            inner.in_flight.remove(i);
        }
        inner.ended.retain(|(s, _)| *s != self.session_id);
        inner.ended.push((self.session_id.clone(), std::time::Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_flat_schemas_of_mcps_types_are_let_through() {
        let ok = json!({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
            "color": {"type": "string", "enum": ["red", "blue"]}, "yes": {"type": "boolean"}}, "required": ["name"]});
        assert_eq!(check_schema(&ok), Ok(()));
        for bad in [
            json!({"type": "array"}),
            json!({"type": "object", "properties": {"x": {"type": "object"}}}),
            json!({"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}}}}),
            json!({"type": "object", "properties": {"x": {"type": "string", "enum": [1, 2]}}}),
            json!({"type": "object", "properties": {"x": {}}}),
        ] {
            assert!(check_schema(&bad).is_err(), "{bad}");
        }
        let c = |v: Value| v.as_object().unwrap().clone();
        assert!(fits(&ok, c(json!({"name": "a", "n": 3, "color": "red", "yes": true}))).is_ok());
        assert!(fits(&ok, c(json!({"n": 3}))).unwrap_err().contains("name is required"));
        assert!(fits(&ok, c(json!({"name": "a", "n": 3.5}))).is_err());
        assert!(fits(&ok, c(json!({"name": "a", "color": "green"}))).is_err());
        assert!(fits(&ok, c(json!({"name": "a", "extra": 1}))).unwrap_err().contains("not asked for"));
        // MCP 2025-11-25's choices: titled single choice, multiple choices.
        let choices = json!({"type": "object", "properties": {
            "one": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
            "many": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
            "titled": {"type": "array", "items": {"anyOf": [{"const": "p", "title": "P"}]}}}});
        assert_eq!(check_schema(&choices), Ok(()));
        assert!(fits(&choices, c(json!({"one": "a", "many": ["x", "y"], "titled": ["p"]}))).is_ok());
        assert!(fits(&choices, c(json!({"one": "c"}))).is_err());
        assert!(fits(&choices, c(json!({"many": ["x", "z"]}))).is_err());
        assert!(fits(&choices, c(json!({"many": "x"}))).is_err());
        assert!(fits(&choices, c(json!({"titled": [1]}))).is_err());
        for bad in [
            json!({"type": "object", "properties": {"x": {"type": "array", "items": {"type": "integer", "enum": [1]}}}}),
            json!({"type": "object", "properties": {"x": {"type": "array", "items": {"anyOf": [{"title": "no const"}]}}}}),
            json!({"type": "object", "properties": {"x": {"type": "string", "oneOf": [{"const": 1}]}}}),
            json!({"type": "object", "properties": {"x": {"type": "array"}}}),
        ] {
            assert!(check_schema(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn elicitations_go_to_the_session_with_a_call_in_flight() {
        let log = Arc::new(EventLog::new(16));
        let targets = Arc::new(Targets::default());
        let a = targets.add(Arc::new(Elicitations::new("a", &log, Duration::from_secs(1))));
        let routed = |t: &Targets| t.route().map(|(t, in_flight)| (t.session_id().to_owned(), in_flight));
        assert_eq!(routed(&targets), Some(("a".into(), false)), "the only one");
        let _b = targets.add(Arc::new(Elicitations::new("b", &log, Duration::from_secs(1))));
        assert!(targets.route().is_none(), "two sessions, no call: nobody can tell");
        let flight = targets.in_flight("b");
        assert_eq!(routed(&targets), Some(("b".into(), true)));
        let second = targets.in_flight("b");
        assert_eq!(routed(&targets), Some(("b".into(), true)), "two calls of one session");
        let other = targets.in_flight("a");
        assert!(targets.route().is_none(), "calls of two sessions: nobody can tell which asked");
        drop(other);
        // a's call just ended: a request it sent may be handled now.
        assert!(targets.route().is_none(), "a session whose call just ended still counts");
        drop((second, flight));
        drop(a);
        assert!(targets.route().is_none(), "within the window");
        targets.lock().ended.clear();
        assert_eq!(routed(&targets), Some(("b".into(), false)));
    }
}
