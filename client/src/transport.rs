//! One connection to the daemon: JSON-RPC requests and subscriptions over a
//! byte stream (the Unix socket, or the TLS face) with one JSON message per
//! line.
//!
//! A writer task sends the lines callers queue (a caller that gives up
//! mid-way never leaves half a line on the socket); a reader task hands each
//! reply to the request waiting for it and each notification to its
//! subscription. Nothing else runs per request: no timer thread, no second
//! task hop (jsonrpsee's async client armed two `futures_timer` delays per
//! request, each waking its global timer thread: a fifth of `agentctl mcp`'s
//! time per call).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec};

/// Longest reply line the client accepts (tool results can be large).
const MAX_REPLY_BYTES: usize = 1 << 30;

/// Notifications a subscription holds before its reader falls behind and
/// the subscription ends (as jsonrpsee's client did).
pub(crate) const SUBSCRIPTION_BUFFER: usize = 1024;

/// Why a connection ended.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// The daemon closed it, or the socket failed.
    Closed,
    /// A reply line could not be read (longer than the client takes).
    Line(String),
    /// The daemon answered with an error that names no request (`"id":
    /// null`: it could not read a request, e.g. a line over its size
    /// limit) and closes the connection: its words are kept.
    Refused {
        /// The JSON-RPC error code.
        code: i32,
        /// The daemon's message.
        message: String,
        /// Structured detail, if any.
        data: Option<serde_json::Value>,
    },
}

/// What a request came back with.
pub(crate) enum Answer {
    /// The result, as sent.
    Result(Box<RawValue>),
    /// The daemon's error.
    Error { code: i32, message: String, data: Option<serde_json::Value> },
    /// The connection ended first.
    Ended(Ended),
}

/// A request waiting for its reply.
enum Waiting {
    Call(oneshot::Sender<Answer>),
    /// A subscription: when the reply names it, the reader files `events`
    /// under that name before it reads on, so no notification is missed.
    Subscribe(oneshot::Sender<Answer>, mpsc::Sender<Box<RawValue>>),
}

#[derive(Default)]
struct Routes {
    waiting: HashMap<u64, Waiting>,
    /// Subscriptions by their id as the daemon wrote it (JSON text).
    subscriptions: HashMap<Box<str>, mpsc::Sender<Box<RawValue>>>,
    next_id: u64,
    ended: Option<Ended>,
}

/// The shared half of a connection: what callers and the reader meet on.
pub(crate) struct Core {
    routes: Mutex<Routes>,
    lines: mpsc::UnboundedSender<Vec<u8>>,
    reader: tokio::task::AbortHandle,
}

impl Drop for Core {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The two halves of a Unix socket, each on its own (no lock between them).
pub(crate) fn open_unix(stream: tokio::net::UnixStream) -> Arc<Core> {
    let (read, write) = stream.into_split();
    open(Box::new(read), Box::new(write))
}

/// Any other stream (a TLS one).
pub(crate) fn open_io<S: AsyncRead + AsyncWrite + Send + 'static>(stream: S) -> Arc<Core> {
    let (read, write) = tokio::io::split(stream);
    open(Box::new(read), Box::new(write))
}

fn open(read: Box<dyn AsyncRead + Send + Unpin>, write: Box<dyn AsyncWrite + Send + Unpin>) -> Arc<Core> {
    let (lines, queued) = mpsc::unbounded_channel();
    tokio::spawn(write_lines(write, queued));
    Arc::new_cyclic(|core: &std::sync::Weak<Core>| {
        let reader = tokio::spawn(read_lines(
            FramedRead::new(read, LinesCodec::new_with_max_length(MAX_REPLY_BYTES)),
            core.clone(),
        ));
        Core { routes: Mutex::default(), lines, reader: reader.abort_handle() }
    })
}

/// Writes the queued lines until every sender is gone, then closes the
/// write half (the daemon then ends the connection).
async fn write_lines(mut write: Box<dyn AsyncWrite + Send + Unpin>, mut queued: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(line) = queued.recv().await {
        if write.write_all(&line).await.is_err() {
            // The reader sees the connection end and tells the callers.
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// Reads replies and notifications until the connection ends.
async fn read_lines(mut lines: FramedRead<Box<dyn AsyncRead + Send + Unpin>, LinesCodec>, core: std::sync::Weak<Core>) {
    let ended = loop {
        let line = match lines.next().await {
            Some(Ok(line)) => line,
            Some(Err(tokio_util::codec::LinesCodecError::MaxLineLengthExceeded)) => {
                break Ended::Line(format!("a reply longer than {MAX_REPLY_BYTES} bytes"));
            }
            Some(Err(_)) | None => break Ended::Closed,
        };
        let Some(core) = core.upgrade() else { return };
        if let Some(ended) = core.route(&line) {
            break ended;
        }
    };
    if let Some(core) = core.upgrade() {
        core.end(ended);
    }
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    /// Present (`null` too) or absent.
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
    #[serde(default, borrow)]
    params: Option<Notified<'a>>,
}

/// A field that is there, whatever its value (`null` is a result).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct ErrorObject {
    code: i32,
    message: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Notified<'a> {
    #[serde(borrow)]
    subscription: &'a RawValue,
    #[serde(borrow)]
    result: &'a RawValue,
}

impl Core {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        crate::lock(&self.routes)
    }

    /// Sends `method` with `params` (JSON text); the reply comes on the
    /// receiver. `events`: this request opens a subscription whose
    /// notifications go there.
    pub(crate) fn send(
        &self,
        method: &str,
        params: &RawValue,
        events: Option<mpsc::Sender<Box<RawValue>>>,
    ) -> Result<(u64, oneshot::Receiver<Answer>), Ended> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut routes = self.routes();
            if let Some(ended) = &routes.ended {
                return Err(ended.clone());
            }
            routes.next_id += 1;
            let id = routes.next_id;
            let waiting = match events {
                Some(events) => Waiting::Subscribe(tx, events),
                None => Waiting::Call(tx),
            };
            routes.waiting.insert(id, waiting);
            id
        };
        let mut line = Vec::with_capacity(method.len() + params.get().len() + 48);
        line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        line.extend_from_slice(id.to_string().as_bytes());
        line.extend_from_slice(br#","method":"#);
        // Method names are ours: plain ASCII, nothing to escape.
        line.push(b'"');
        line.extend_from_slice(method.as_bytes());
        line.extend_from_slice(br#"","params":"#);
        line.extend_from_slice(params.get().as_bytes());
        line.extend_from_slice(b"}\n");
        if self.lines.send(line).is_err() {
            self.forget(id);
            return Err(Ended::Closed);
        }
        Ok((id, rx))
    }

    /// Stops waiting for the reply to `id` (its caller gave up).
    pub(crate) fn forget(&self, id: u64) {
        self.routes().waiting.remove(&id);
    }

    /// Tells the daemon a subscription is over (`unsubscribe` with its id),
    /// without waiting for the answer.
    pub(crate) fn unsubscribe(&self, unsubscribe: &str, subscription: &str) {
        let removed = self.routes().subscriptions.remove(subscription).is_some();
        if removed && let Ok(params) = RawValue::from_string(format!("[{subscription}]")) {
            // Its answer is read and dropped like any late reply.
            if let Ok((id, _)) = self.send(unsubscribe, &params, None) {
                self.forget(id);
            }
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.routes().ended.is_none()
    }

    /// Hands one line to whoever waits for it; `Some` when the connection
    /// must end.
    fn route(&self, line: &str) -> Option<Ended> {
        let Ok(incoming) = serde_json::from_str::<Incoming<'_>>(line) else { return None };
        if let Some(Notified { subscription, result }) = incoming.params {
            let mut routes = self.routes();
            let key = subscription.get();
            if let Some(events) = routes.subscriptions.get(key)
                && let Err(mpsc::error::TrySendError::Full(_)) = events.try_send(result.to_owned())
            {
                // The reader fell behind: its stream ends rather than grow.
                routes.subscriptions.remove(key);
            }
            return None;
        }
        let id = incoming.id.and_then(|id| id.get().parse::<u64>().ok());
        let Some(id) = id else {
            return incoming
                .error
                .map(|e| Ended::Refused { code: e.code, message: e.message, data: e.data })
                .filter(|_| incoming.id.is_none_or(|id| id.get() == "null"));
        };
        let answer = match (incoming.result, incoming.error) {
            (_, Some(e)) => Answer::Error { code: e.code, message: e.message, data: e.data },
            (Some(result), None) => Answer::Result(result.to_owned()),
            (None, None) => return None,
        };
        let mut routes = self.routes();
        match routes.waiting.remove(&id) {
            Some(Waiting::Call(reply)) => {
                let _ = reply.send(answer);
            }
            Some(Waiting::Subscribe(reply, events)) => {
                if let Answer::Result(name) = &answer {
                    routes.subscriptions.insert(name.get().into(), events);
                }
                let _ = reply.send(answer);
            }
            None => {}
        }
        None
    }

    /// The connection is over: every waiting request and subscription hears.
    fn end(&self, ended: Ended) {
        let mut routes = self.routes();
        routes.ended.get_or_insert(ended.clone());
        for (_, waiting) in routes.waiting.drain() {
            let (Waiting::Call(reply) | Waiting::Subscribe(reply, _)) = waiting;
            let _ = reply.send(Answer::Ended(ended.clone()));
        }
        routes.subscriptions.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    async fn pair()
    -> (Arc<Core>, tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>, tokio::net::unix::OwnedWriteHalf) {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (read, write) = theirs.into_split();
        (open_unix(ours), BufReader::new(read).lines(), write)
    }

    fn params(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[tokio::test]
    async fn replies_reach_their_requests_in_any_order() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (a, ra) = core.send("daemon/info", &params("{}"), None).unwrap();
        let (b, rb) = core.send("session/list", &params(r#"{"x":"\""}"#), None).unwrap();
        let first: serde_json::Value = serde_json::from_str(&from_client.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(first["method"], "daemon/info");
        let second: serde_json::Value = serde_json::from_str(&from_client.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(second["params"]["x"], "\"");
        let reply = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{b},\"result\":2}}\n{{\"jsonrpc\":\"2.0\",\"id\":{a},\"error\":{{\"code\":-32601,\"message\":\"no\"}}}}\n"
        );
        to_client.write_all(reply.as_bytes()).await.unwrap();
        assert!(matches!(rb.await.unwrap(), Answer::Result(r) if r.get() == "2"));
        assert!(matches!(ra.await.unwrap(), Answer::Error { code: -32601, .. }));
    }

    #[tokio::test]
    async fn a_notification_right_after_the_subscription_reply_is_kept() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (events, mut received) = mpsc::channel(4);
        let (id, reply) = core.send("turn/stream", &params("{}"), Some(events)).unwrap();
        from_client.next_line().await.unwrap();
        // Reply and first notification in one write.
        let both = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"s1\"}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"turn/event\",\"params\":{{\"subscription\":\"s1\",\"result\":{{\"seq\":1}}}}}}\n"
        );
        to_client.write_all(both.as_bytes()).await.unwrap();
        assert!(matches!(reply.await.unwrap(), Answer::Result(r) if r.get() == "\"s1\""));
        assert_eq!(received.recv().await.unwrap().get(), r#"{"seq":1}"#);
        core.unsubscribe("turn/unstream", "\"s1\"");
        let unsub: serde_json::Value = serde_json::from_str(&from_client.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(unsub["method"], "turn/unstream");
        assert_eq!(unsub["params"], serde_json::json!(["s1"]));
    }

    #[tokio::test]
    async fn an_unaddressed_error_ends_the_connection_with_its_words() {
        let (core, _from_client, mut to_client) = pair().await;
        let (_, reply) = core.send("daemon/info", &params("{}"), None).unwrap();
        to_client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"line too long\"}}\n")
            .await
            .unwrap();
        assert!(matches!(reply.await.unwrap(), Answer::Ended(Ended::Refused { code: -32600, .. })));
        assert!(!core.is_connected());
        assert!(matches!(core.send("daemon/info", &params("{}"), None), Err(Ended::Refused { .. })));
    }

    #[tokio::test]
    async fn a_closed_connection_ends_waiting_requests() {
        let (core, from_client, to_client) = pair().await;
        let (_, reply) = core.send("daemon/info", &params("{}"), None).unwrap();
        drop((from_client, to_client));
        assert!(matches!(reply.await.unwrap(), Answer::Ended(Ended::Closed)));
    }

    #[tokio::test]
    async fn a_subscription_whose_reader_falls_behind_ends() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (events, mut received) = mpsc::channel(2);
        let (id, reply) = core.send("turn/stream", &params("{}"), Some(events)).unwrap();
        from_client.next_line().await.unwrap();
        let mut lines = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":7}}\n");
        for seq in 0..5 {
            lines += &format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"turn/event\",\"params\":{{\"subscription\":7,\"result\":{seq}}}}}\n"
            );
        }
        to_client.write_all(lines.as_bytes()).await.unwrap();
        reply.await.unwrap();
        let mut seen = Vec::new();
        while let Some(event) = received.recv().await {
            seen.push(event.get().to_owned());
        }
        assert_eq!(seen, ["0", "1"]);
    }
}
