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

/// Notifications a subscription holds before its reader falls behind:
/// the subscription then ends (its stream, and at the daemon).
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
    /// The reply could not be read.
    Unreadable(String),
}

/// A request waiting for its reply.
enum Waiting {
    Call(oneshot::Sender<Answer>),
    /// A subscription: when the reply names it, the reader files it before
    /// it reads on, so no notification is missed.
    Subscribe(oneshot::Sender<Answer>, Route),
    /// A subscription whose caller gave up before the reply: ended (told
    /// to the daemon) when the reply names it.
    Abandoned(&'static str),
}

/// Where one subscription's notifications go, and how it is ended.
struct Route {
    events: mpsc::Sender<Box<RawValue>>,
    unsubscribe: &'static str,
}

#[derive(Default)]
struct Routes {
    waiting: HashMap<u64, Waiting>,
    /// Subscriptions by their id as the daemon wrote it (JSON text).
    subscriptions: HashMap<Box<str>, Route>,
    next_id: u64,
    ended: Option<Ended>,
}

/// What the writer is handed.
enum Queued {
    /// A request line; `id`: written only while its caller still waits.
    Line(Option<u64>, Vec<u8>),
    /// The connection is over: close the write half.
    Close,
}

/// The shared half of a connection: what callers and the reader meet on.
pub(crate) struct Core {
    routes: Mutex<Routes>,
    lines: mpsc::UnboundedSender<Queued>,
    reader: std::sync::OnceLock<tokio::task::AbortHandle>,
}

impl Drop for Core {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.get() {
            reader.abort();
        }
    }
}

/// A Unix socket's two halves, each on its own (no lock between them).
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
    let core = Arc::new(Core { routes: Mutex::default(), lines, reader: std::sync::OnceLock::new() });
    tokio::spawn(write_lines(write, queued, Arc::downgrade(&core)));
    let framed = FramedRead::new(read, LinesCodec::new_with_max_length(MAX_REPLY_BYTES));
    let reader = tokio::spawn(read_lines(framed, Arc::downgrade(&core)));
    let _ = core.reader.set(reader.abort_handle());
    core
}

/// Writes the queued lines (a request whose caller gave up meanwhile is
/// not sent), flushing whenever nothing more is queued, until the
/// connection is over; then closes the write half (the daemon then ends
/// the connection).
async fn write_lines(
    mut write: Box<dyn AsyncWrite + Send + Unpin>,
    mut queued: mpsc::UnboundedReceiver<Queued>,
    core: std::sync::Weak<Core>,
) {
    while let Some(Queued::Line(id, line)) = queued.recv().await {
        if let (Some(id), Some(core)) = (id, core.upgrade())
            && !core.still_wanted(id)
        {
            continue;
        }
        let mut sent = write.write_all(&line).await;
        if sent.is_ok() && queued.is_empty() {
            sent = write.flush().await;
        }
        if sent.is_err() {
            if let Some(core) = core.upgrade() {
                core.end(Ended::Closed);
            }
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

/// `{"jsonrpc":"2.0","id":ID,"method":METHOD,"params":PARAMS}` and a newline.
fn request_line(id: u64, method: &str, params: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(method.len() + params.len() + 48);
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    line.extend_from_slice(id.to_string().as_bytes());
    // Method names are ours: plain ASCII, nothing to escape.
    line.extend_from_slice(br#","method":""#);
    line.extend_from_slice(method.as_bytes());
    line.extend_from_slice(br#"","params":"#);
    line.extend_from_slice(params.as_bytes());
    line.extend_from_slice(b"}\n");
    line
}

impl Core {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        crate::lock(&self.routes)
    }

    /// Sends `method` with `params`; the reply comes on the receiver.
    /// `subscription`: this request opens one, whose notifications go to
    /// the sender and which `unsubscribe` ends.
    pub(crate) fn send(
        &self,
        method: &str,
        params: &RawValue,
        subscription: Option<(mpsc::Sender<Box<RawValue>>, &'static str)>,
    ) -> Result<(u64, oneshot::Receiver<Answer>), Ended> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut routes = self.routes();
            if let Some(ended) = &routes.ended {
                return Err(ended.clone());
            }
            routes.next_id += 1;
            let id = routes.next_id;
            let waiting = match subscription {
                Some((events, unsubscribe)) => Waiting::Subscribe(tx, Route { events, unsubscribe }),
                None => Waiting::Call(tx),
            };
            routes.waiting.insert(id, waiting);
            id
        };
        if self.lines.send(Queued::Line(Some(id), request_line(id, method, params.get()))).is_err() {
            self.routes().waiting.remove(&id);
            return Err(Ended::Closed);
        }
        Ok((id, rx))
    }

    /// Stops waiting for the reply to `id` (its caller gave up): a
    /// subscription it would have opened is ended when the reply comes.
    pub(crate) fn forget(&self, id: u64) {
        let mut routes = self.routes();
        if let Some(Waiting::Subscribe(_, route)) = routes.waiting.remove(&id) {
            routes.waiting.insert(id, Waiting::Abandoned(route.unsubscribe));
        }
    }

    /// Whether the request `id` is still to be sent (its caller waits).
    fn still_wanted(&self, id: u64) -> bool {
        let mut routes = self.routes();
        match routes.waiting.get(&id) {
            Some(Waiting::Call(_) | Waiting::Subscribe(..)) => true,
            Some(Waiting::Abandoned(_)) => {
                // Never sent: nothing to end.
                routes.waiting.remove(&id);
                false
            }
            None => false,
        }
    }

    /// Ends the subscription `name` (JSON text): tells the daemon, without
    /// waiting for its answer.
    pub(crate) fn unsubscribe(&self, name: &str) {
        let mut routes = self.routes();
        if let Some(route) = routes.subscriptions.remove(name) {
            self.tell_unsubscribe(&mut routes, route.unsubscribe, name);
        }
    }

    /// Queues `unsubscribe [name]` (its answer is read and dropped like
    /// any reply nobody waits for).
    fn tell_unsubscribe(&self, routes: &mut Routes, unsubscribe: &str, name: &str) {
        if routes.ended.is_some() {
            return;
        }
        routes.next_id += 1;
        let _ = self.lines.send(Queued::Line(None, request_line(routes.next_id, unsubscribe, &format!("[{name}]"))));
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.routes().ended.is_none()
    }

    /// Hands one line to whoever waits for it; `Some` when the connection
    /// must end.
    fn route(&self, line: &str) -> Option<Ended> {
        let Ok(incoming) = serde_json::from_str::<Incoming<'_>>(line) else {
            self.unreadable(line);
            return None;
        };
        if let Some(Notified { subscription, result }) = incoming.params {
            let event = result.to_owned();
            let mut routes = self.routes();
            let name = subscription.get();
            if let Some(route) = routes.subscriptions.get(name)
                && route.events.try_send(event).is_err()
            {
                // Its reader fell behind (the stream ends rather than
                // grow) or is gone: the daemon is told to stop.
                if let Some(route) = routes.subscriptions.remove(name) {
                    self.tell_unsubscribe(&mut routes, route.unsubscribe, name);
                }
            }
            return None;
        }
        let Some(id) = incoming.id.map(|id| id.get().parse::<u64>().ok()) else {
            // `"id": null` (read as absent): the daemon could not read a
            // request and closes the connection.
            return incoming.error.map(|e| Ended::Refused { code: e.code, message: e.message, data: e.data });
        };
        let id = id?;
        let answer = match (incoming.result, incoming.error) {
            (_, Some(e)) => Answer::Error { code: e.code, message: e.message, data: e.data },
            (Some(result), None) => Answer::Result(result.to_owned()),
            (None, None) => Answer::Unreadable("a reply with neither result nor error".into()),
        };
        let mut routes = self.routes();
        match routes.waiting.remove(&id) {
            Some(Waiting::Call(reply)) => {
                let _ = reply.send(answer);
            }
            Some(Waiting::Subscribe(reply, route)) => {
                let Answer::Result(name) = &answer else {
                    let _ = reply.send(answer);
                    return None;
                };
                let name: Box<str> = name.get().into();
                routes.subscriptions.insert(name.clone(), route);
                if reply.send(answer).is_err() {
                    // Its caller left just now.
                    if let Some(route) = routes.subscriptions.remove(&name) {
                        self.tell_unsubscribe(&mut routes, route.unsubscribe, &name);
                    }
                }
            }
            Some(Waiting::Abandoned(unsubscribe)) => {
                if let Answer::Result(name) = &answer {
                    self.tell_unsubscribe(&mut routes, unsubscribe, name.get());
                }
            }
            None => {}
        }
        None
    }

    /// A line that is not JSON-RPC as expected: the request it names, if
    /// any, fails with why (rather than wait out its timeout).
    fn unreadable(&self, line: &str) {
        #[derive(Deserialize)]
        struct JustId {
            id: Option<u64>,
        }
        let Some(id) = serde_json::from_str::<JustId>(line).ok().and_then(|j| j.id) else { return };
        let why = serde_json::from_str::<serde::de::IgnoredAny>(line)
            .err()
            .map_or_else(|| "a reply that is not JSON-RPC".to_owned(), |e| format!("an unreadable reply: {e}"));
        if let Some(Waiting::Call(reply) | Waiting::Subscribe(reply, _)) = self.routes().waiting.remove(&id) {
            let _ = reply.send(Answer::Unreadable(why));
        }
    }

    /// The connection is over: every waiting request and subscription
    /// hears, and the write half is closed.
    pub(crate) fn end(&self, ended: Ended) {
        let mut routes = self.routes();
        if routes.ended.is_some() {
            return;
        }
        routes.ended = Some(ended.clone());
        for (_, waiting) in routes.waiting.drain() {
            if let Waiting::Call(reply) | Waiting::Subscribe(reply, _) = waiting {
                let _ = reply.send(Answer::Ended(ended.clone()));
            }
        }
        routes.subscriptions.clear();
        let _ = self.lines.send(Queued::Close);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    async fn pair() -> (Arc<Core>, Lines, tokio::net::unix::OwnedWriteHalf) {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (read, write) = theirs.into_split();
        (open_unix(ours), BufReader::new(read).lines(), write)
    }

    fn params(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    type Lines = tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>;

    /// The next request the daemon's side reads.
    async fn next_request(from_client: &mut Lines) -> serde_json::Value {
        serde_json::from_str(&from_client.next_line().await.unwrap().unwrap()).unwrap()
    }

    /// Sends `turn/stream` (buffering `capacity` notifications) and reads
    /// it on the daemon's side: its id, its reply, its notifications.
    async fn subscribe(
        core: &Core,
        from_client: &mut Lines,
        capacity: usize,
    ) -> (u64, oneshot::Receiver<Answer>, mpsc::Receiver<Box<RawValue>>) {
        let (events, received) = mpsc::channel(capacity);
        let (id, reply) = core.send("turn/stream", &params("{}"), Some((events, "turn/unstream"))).unwrap();
        next_request(from_client).await;
        (id, reply, received)
    }

    #[tokio::test]
    async fn replies_reach_their_requests_in_any_order() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (a, ra) = core.send("daemon/info", &params("{}"), None).unwrap();
        let (b, rb) = core.send("session/list", &params(r#"{"x":"\""}"#), None).unwrap();
        let first: serde_json::Value = next_request(&mut from_client).await;
        assert_eq!(first["method"], "daemon/info");
        let second: serde_json::Value = next_request(&mut from_client).await;
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
        let (id, reply, mut received) = subscribe(&core, &mut from_client, 4).await;
        // Reply and first notification in one write.
        let both = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"s1\"}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"turn/event\",\"params\":{{\"subscription\":\"s1\",\"result\":{{\"seq\":1}}}}}}\n"
        );
        to_client.write_all(both.as_bytes()).await.unwrap();
        assert!(matches!(reply.await.unwrap(), Answer::Result(r) if r.get() == "\"s1\""));
        assert_eq!(received.recv().await.unwrap().get(), r#"{"seq":1}"#);
        core.unsubscribe("\"s1\"");
        let unsub: serde_json::Value = next_request(&mut from_client).await;
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
    async fn a_subscription_whose_reader_falls_behind_ends_and_the_daemon_is_told() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (id, reply, mut received) = subscribe(&core, &mut from_client, 2).await;
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
        let told: serde_json::Value = next_request(&mut from_client).await;
        assert_eq!((&told["method"], &told["params"]), (&serde_json::json!("turn/unstream"), &serde_json::json!([7])));
    }

    #[tokio::test]
    async fn a_subscription_given_up_before_its_reply_is_ended_when_it_comes() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (id, reply, _received) = subscribe(&core, &mut from_client, 2).await;
        drop(reply);
        core.forget(id);
        to_client
            .write_all(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"s9\"}}\n").as_bytes())
            .await
            .unwrap();
        let told: serde_json::Value = next_request(&mut from_client).await;
        assert_eq!(
            (&told["method"], &told["params"]),
            (&serde_json::json!("turn/unstream"), &serde_json::json!(["s9"]))
        );
    }

    #[tokio::test]
    async fn an_unreadable_reply_fails_its_request_at_once() {
        let (core, mut from_client, mut to_client) = pair().await;
        let (id, reply) = core.send("daemon/info", &params("{}"), None).unwrap();
        from_client.next_line().await.unwrap();
        let bad = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":\"x\"}}}}\n");
        to_client.write_all(bad.as_bytes()).await.unwrap();
        assert!(matches!(reply.await.unwrap(), Answer::Unreadable(_)));
        assert!(core.is_connected(), "one bad line does not end the connection");
    }

    #[tokio::test]
    async fn an_ended_connection_closes_its_write_half() {
        let (core, mut from_client, _to_client) = pair().await;
        core.end(Ended::Closed);
        assert!(from_client.next_line().await.unwrap().is_none(), "the daemon sees the end");
    }
}
