//! One connection's JSON-RPC dispatcher over jsonrpsee's `Methods`.
//!
//! jsonrpsee's own server speaks HTTP and WebSocket only, so this module does
//! what it would do for one NDJSON line: tell a request from a notification,
//! a batch or garbage, call the method with this connection's id and sink (so
//! subscriptions are per connection and end with it), and build the reply.
//! `Methods::raw_json_request` is not used: it shares one connection id
//! across clients and cannot parse batches.
//!
//! **Invariant:** every line that is not a notification gets exactly one
//! reply line; a notification gets none.

use std::pin::Pin;
use std::sync::Arc;

use agentd_protocol::ErrorCode;
use jsonrpsee::core::id_providers::RandomStringIdProvider;
use jsonrpsee::types::{Id, Params, Request};
use jsonrpsee::{
    BoundedSubscriptions, ConnectionId, Extensions, MethodCallback, MethodResponse, MethodSink, Methods,
    SubscriptionState,
};
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::Instrument;

/// A reply line (without its newline).
pub type Reply = Box<RawValue>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What handling one line produced.
pub enum Handled {
    /// The reply, or `None` when nothing is to be sent (a notification).
    Ready(Option<Reply>),
    /// Work to run off the connection's task; yields the reply, if any.
    Later(BoxFuture<Option<Reply>>),
}

/// Most subscriptions one connection may hold.
const MAX_SUBSCRIPTIONS_PER_CONNECTION: u32 = 64;

/// Dispatches lines for one connection.
pub struct Dispatcher {
    methods: Methods,
    conn_id: ConnectionId,
    sink: MethodSink,
    subscriptions: BoundedSubscriptions,
    ids: RandomStringIdProvider,
    extensions: Extensions,
}

impl Dispatcher {
    /// A dispatcher whose replies and subscription messages go to `sink`.
    pub fn new(mut methods: Methods, conn_id: usize, sink: MethodSink) -> Self {
        let conn_id = ConnectionId(conn_id);
        let mut extensions = methods.extensions().clone();
        extensions.insert(conn_id);
        Dispatcher {
            methods,
            conn_id,
            sink,
            subscriptions: BoundedSubscriptions::new(MAX_SUBSCRIPTIONS_PER_CONNECTION),
            // String ids: Neovim's JSON encoder turns 53-bit integers into floats.
            ids: RandomStringIdProvider::new(16),
            extensions,
        }
    }

    /// Handles one line (a request, a notification or a batch).
    pub fn handle(self: &Arc<Self>, line: &str) -> Handled {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            return self.batch(trimmed);
        }
        match self.single(trimmed, false) {
            Single::Ready(reply) => Handled::Ready(reply),
            Single::Later(fut) => Handled::Later(fut),
        }
    }

    fn single(&self, raw: &str, in_batch: bool) -> Single {
        match serde_json::from_str::<Request<'_>>(raw) {
            Ok(mut req) => {
                if matches!(&req.id, Id::Str(s) if s.starts_with(RAW_ID_PREFIX)) {
                    req.id = raw_id(raw).unwrap_or(Id::Null);
                }
                self.call(req, in_batch)
            }
            Err(_) => self.not_a_request(raw, in_batch),
        }
    }

    fn call(&self, req: Request<'_>, in_batch: bool) -> Single {
        let Request { id, method, params, .. } = req;
        let params = Params::new(params.as_ref().map(|p| p.get()));
        let span = tracing::debug_span!("request", method = %method);
        let _enter = span.enter();
        let ext = self.extensions.clone();
        match self.methods.method(&method) {
            None => Single::Ready(Some(error_reply(
                id,
                ErrorCode::MethodNotFound,
                format!(
                    "unknown method {method:?}; the protocol's methods are listed in protocol/schema/agentd-protocol.json"
                ),
            ))),
            Some(MethodCallback::Sync(cb)) => Single::Ready(Some(finish((cb)(id, params, usize::MAX, ext)))),
            Some(MethodCallback::Unsubscription(cb)) => {
                Single::Ready(Some(finish((cb)(id, params, self.conn_id, usize::MAX, ext))))
            }
            Some(MethodCallback::Async(cb)) => {
                let fut = (cb)(id.into_owned(), params.into_owned(), self.conn_id, usize::MAX, ext);
                drop(_enter);
                Single::Later(Box::pin(async move { Some(finish(fut.await)) }.instrument(span.clone())))
            }
            Some(MethodCallback::Subscription(_)) if in_batch => Single::Ready(Some(error_reply(
                id,
                ErrorCode::InvalidRequest,
                format!("{method:?} opens a subscription, which cannot be part of a batch; send it on its own line"),
            ))),
            Some(MethodCallback::Subscription(cb)) => {
                let Some(permit) = self.subscriptions.acquire() else {
                    return Single::Ready(Some(error_reply(
                        id,
                        ErrorCode::InvalidRequest,
                        format!(
                            "this connection already has {MAX_SUBSCRIPTIONS_PER_CONNECTION} subscriptions; close one or open another connection"
                        ),
                    )));
                };
                let state =
                    SubscriptionState { conn_id: self.conn_id, id_provider: &self.ids, subscription_permit: permit };
                let fut = (cb)(id, params, self.sink.clone(), state, ext);
                drop(_enter);
                Single::Later(Box::pin(
                    async move {
                        let rp = fut.await;
                        // Accept and reject answer through the sink themselves;
                        // only a callback that did neither leaves a reply to send.
                        if rp.is_subscription() {
                            let _ = finish(rp);
                            None
                        } else {
                            Some(finish(rp))
                        }
                    }
                    .instrument(span.clone()),
                ))
            }
        }
    }

    /// The line did not parse as a request: a notification, or an error to
    /// explain as precisely as the line allows.
    fn not_a_request(&self, raw: &str, in_batch: bool) -> Single {
        let value: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                return Single::Ready(Some(error_reply(Id::Null, ErrorCode::ParseError, format!("parse error: {e}"))));
            }
        };
        let Value::Object(obj) = &value else {
            return Single::Ready(Some(error_reply(
                Id::Null,
                ErrorCode::InvalidRequest,
                format!(
                    "a request must be a JSON object{}, got {}",
                    if in_batch { "" } else { " (or an array of them for a batch)" },
                    agentd_protocol::json_kind(&value)
                ),
            )));
        };
        let id = match obj.get("id") {
            None => None,
            Some(Value::Null) => Some(Id::Null),
            Some(Value::String(s)) if !s.starts_with(RAW_ID_PREFIX) => Some(Id::Str(s.clone().into())),
            Some(v) if v.is_number() || v.is_string() => match raw_id(raw) {
                Some(id) => Some(id),
                None => Some(Id::Null),
            },
            Some(v) => {
                return Single::Ready(Some(error_reply(
                    Id::Null,
                    ErrorCode::InvalidRequest,
                    format!("\"id\" must be a string, a number or null, got {}", agentd_protocol::json_kind(v)),
                )));
            }
        };
        let reply_id = id.clone().unwrap_or(Id::Null);
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Single::Ready(Some(error_reply(
                reply_id,
                ErrorCode::InvalidRequest,
                "\"jsonrpc\" must be \"2.0\"",
            )));
        }
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            return Single::Ready(Some(error_reply(
                reply_id,
                ErrorCode::InvalidRequest,
                "\"method\" is missing or not a string",
            )));
        };
        if let Some(id) = id {
            if matches!(obj.get("id"), Some(v) if v.is_number()) {
                // A number jsonrpsee cannot hold (negative, fractional,
                // huge): the call runs under a stand-in id that the reply
                // trades back for the client's, byte for byte.
                let params = obj.get("params").and_then(|p| serde_json::value::to_raw_value(p).ok());
                let method = method.to_owned();
                return self.call(Request::borrowed(&method, params.as_deref(), id), in_batch);
            }
            return Single::Ready(Some(error_reply(id, ErrorCode::InvalidRequest, "not a valid JSON-RPC 2.0 request")));
        }
        // A notification: run it, send nothing back (JSON-RPC 2.0 §4.1).
        let params = obj.get("params").map(|p| p.to_string());
        self.notification(method, params.as_deref())
    }

    fn notification(&self, method: &str, params: Option<&str>) -> Single {
        let params = Params::new(params);
        let ext = self.extensions.clone();
        match self.methods.method(method) {
            Some(MethodCallback::Sync(cb)) => {
                let _ = finish((cb)(Id::Null, params, usize::MAX, ext));
                Single::Ready(None)
            }
            Some(MethodCallback::Async(cb)) => {
                let fut = (cb)(Id::Null, params.into_owned(), self.conn_id, usize::MAX, ext);
                Single::Later(Box::pin(async move {
                    let _ = finish(fut.await);
                    None
                }))
            }
            Some(MethodCallback::Unsubscription(cb)) => {
                let _ = finish((cb)(Id::Null, params, self.conn_id, usize::MAX, ext));
                Single::Ready(None)
            }
            Some(MethodCallback::Subscription(_)) | None => {
                tracing::debug!(method, "ignored notification");
                Single::Ready(None)
            }
        }
    }

    /// Members run in order: a member waiting for an async method holds
    /// back the ones after it, so a batch means what it says in sequence.
    fn batch(self: &Arc<Self>, raw: &str) -> Handled {
        let items: Vec<&RawValue> = match serde_json::from_str(raw) {
            Ok(items) => items,
            Err(e) => {
                let reply = match serde_json::from_str::<Value>(raw) {
                    Err(_) => error_reply(Id::Null, ErrorCode::ParseError, format!("parse error: {e}")),
                    Ok(_) => error_reply(Id::Null, ErrorCode::InvalidRequest, format!("invalid batch: {e}")),
                };
                return Handled::Ready(Some(reply));
            }
        };
        if items.is_empty() {
            return Handled::Ready(Some(error_reply(Id::Null, ErrorCode::InvalidRequest, "empty batch")));
        }
        let mut replies = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match self.single(item.get(), true) {
                Single::Ready(reply) => replies.extend(reply),
                Single::Later(fut) => {
                    let rest: Vec<String> = items[i + 1..].iter().map(|r| r.get().to_owned()).collect();
                    let me = self.clone();
                    return Handled::Later(Box::pin(async move {
                        replies.extend(fut.await);
                        for item in rest {
                            match me.single(&item, true) {
                                Single::Ready(reply) => replies.extend(reply),
                                Single::Later(fut) => replies.extend(fut.await),
                            }
                        }
                        join_batch(replies)
                    }));
                }
            }
        }
        Handled::Ready(join_batch(replies))
    }
}

enum Single {
    Ready(Option<Reply>),
    Later(BoxFuture<Option<Reply>>),
}

/// How every stand-in id begins. A client's own string id that begins so
/// is carried by a stand-in too, so a reply never mistakes one for the other.
const RAW_ID_PREFIX: &str = "\u{1}agentd-id";

/// Random for this process: the stand-ins it mints (and only those) end
/// their mark with it, so a client cannot forge one.
static NONCE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| uuid::Uuid::new_v4().simple().to_string()[..16].to_owned());

/// Marks a stand-in id: a string jsonrpsee can carry that holds the
/// client's id as it was written, in hex.
static RAW_ID_MARK: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| format!("{RAW_ID_PREFIX}-{}:", *NONCE));

/// How a reply holding a stand-in id begins (jsonrpsee writes `jsonrpc`,
/// then `id`, then the payload).
static RAW_ID_REPLY: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{{\"jsonrpc\":\"2.0\",\"id\":\"\\u0001agentd-id-{}:", *NONCE));

/// The stand-in id for the id of the request in `line`, as the client
/// wrote it; `None` when the line has no id.
fn raw_id(line: &str) -> Option<Id<'static>> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
    }
    let probe: Probe<'_> = serde_json::from_str(line).ok()?;
    let text = probe.id?.get();
    let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
    Some(Id::Str(format!("{}{hex}", *RAW_ID_MARK).into()))
}

/// Puts the client's own id back into a reply made under a stand-in id.
/// Every reply passes through here; one without a stand-in costs a prefix
/// comparison.
pub fn restore_id(reply: &str) -> std::borrow::Cow<'_, str> {
    let Some(rest) = reply.strip_prefix(RAW_ID_REPLY.as_str()) else { return reply.into() };
    let Some(end) = rest.find('"') else { return reply.into() };
    let (hex, tail) = (&rest[..end], &rest[end + 1..]);
    let raw: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    // Only what a client can have sent as an id goes back: one JSON number
    // or string, nothing more.
    let id = raw
        .and_then(|r| String::from_utf8(r).ok())
        .filter(|id| matches!(serde_json::from_str::<Value>(id), Ok(Value::Number(_) | Value::String(_))));
    match id {
        Some(id) => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}{tail}").into(),
        None => reply.into(),
    }
}

/// A batch's replies as one array; nothing when every member was a notification.
fn join_batch(replies: Vec<Reply>) -> Option<Reply> {
    if replies.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(replies.iter().map(|r| r.get().len() + 1).sum::<usize>() + 1);
    out.push('[');
    for (i, r) in replies.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&restore_id(r.get()));
    }
    out.push(']');
    RawValue::from_string(out).ok()
}

/// Finalises a method response: fires its completion hook, returns its JSON.
fn finish(rp: MethodResponse) -> Reply {
    let ok = rp.is_success();
    let (json, notify, _) = rp.into_parts();
    if let Some(n) = notify {
        n.notify(ok);
    }
    json
}

/// The reply to a line refused because `limit` requests of its connection
/// are still running: the request's id when it has one.
pub fn busy_reply(line: &str, limit: usize) -> Reply {
    let id = serde_json::from_str::<jsonrpsee::types::InvalidRequest<'_>>(line)
        .map(|r| r.id.into_owned())
        .ok()
        .filter(|id| !matches!(id, Id::Str(s) if s.starts_with(RAW_ID_PREFIX)))
        .or_else(|| raw_id(line))
        .unwrap_or(Id::Null);
    error_reply(
        id,
        ErrorCode::TooManyRequests,
        format!(
            "{limit} requests of this connection are still running; wait for their replies or open another connection"
        ),
    )
}

/// An error reply with one of our codes.
pub fn error_reply(id: Id<'_>, code: ErrorCode, message: impl Into<String>) -> Reply {
    let err = jsonrpsee::types::ErrorObjectOwned::from(crate::server::rpc::RpcError::new(code, message));
    MethodResponse::error(id, err).into_json()
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
