//! A server's progress notifications, handed to the call they belong to.
//!
//! rmcp runs a notification's handler in a task of its own, so the last
//! progress a server sends right before its result could be handled after
//! the call had its result and stopped listening (and be lost). For a
//! server on pipes, [`Tap`] reads the notifications off its stdout as the
//! bytes go by, before rmcp sees the result that follows them; servers
//! over HTTP go through rmcp's handler.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

use crate::sync::MutexExt;
use crate::tool::context::{ProgressReport, ProgressReporter};

/// Calls listening for progress, by their token (as JSON text).
pub type Listeners = Arc<Mutex<HashMap<String, ProgressReporter>>>;

/// Longest progress message passed on.
const MAX_MESSAGE_CHARS: usize = 1000;
/// Longest line of the server's output looked into (a longer one is a
/// result, not a progress notification).
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Reports one notification's progress to the call listening for `token`.
pub fn route(listeners: &Listeners, token: &Value, progress: f64, total: Option<f64>, message: Option<&str>) {
    let key = serde_json::to_string(token).unwrap_or_default();
    let Some(report) = listeners.locked().get(&key).cloned() else { return };
    let message = message.map(|m| match m.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((i, _)) => format!("{}…", &m[..i]),
        None => m.to_owned(),
    });
    let render = match (&message, total) {
        (Some(m), _) => m.clone(),
        (None, Some(total)) => format!("{progress}/{total}"),
        (None, None) => format!("{progress}"),
    };
    let data = serde_json::json!({ "progress": progress, "total": total, "message": message });
    report(ProgressReport { data, render });
}

/// A server's stdout, with its progress notifications routed as they are
/// read.
pub struct Tap<R> {
    inner: R,
    line: Vec<u8>,
    /// The line being read is too long to look into.
    skipping: bool,
    listeners: Listeners,
}

impl<R> Tap<R> {
    /// `inner`, its progress going to `listeners`.
    pub fn new(inner: R, listeners: Listeners) -> Self {
        Tap { inner, line: Vec::new(), skipping: false, listeners }
    }

    fn scan(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            if !self.skipping {
                if self.line.len() + body.len() > MAX_LINE_BYTES {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(body);
                }
            }
            if ends {
                if !self.skipping {
                    self.look_at_line();
                }
                self.line.clear();
                self.skipping = false;
            }
        }
    }

    fn look_at_line(&self) {
        const METHOD: &[u8] = b"notifications/progress";
        if !self.line.windows(METHOD.len()).any(|w| w == METHOD) {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&self.line) else { return };
        if message["method"] != "notifications/progress" {
            return;
        }
        let params = &message["params"];
        let Some(progress) = params["progress"].as_f64() else { return };
        route(
            &self.listeners,
            &params["progressToken"],
            progress,
            params["total"].as_f64(),
            params["message"].as_str(),
        );
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Tap<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            this.scan(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn progress_is_routed_as_it_is_read_in_any_pieces() {
        let listeners: Listeners = Arc::new(Mutex::new(HashMap::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let report: ProgressReporter = Arc::new(move |r: ProgressReport| into.lock().unwrap().push(r.render));
        listeners.lock().unwrap().insert("\"t1\"".into(), report);
        let mut wire = String::new();
        for i in 1..=3 {
            let n = serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/progress",
                "params": { "progressToken": "t1", "progress": i, "total": 3, "message": format!("step {i}") } });
            wire.push_str(&format!("{n}\n"));
        }
        // Another call's, a result, and a line too long to look into.
        wire.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":9,\"progress\":1}}\n");
        wire.push_str(&format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"x\":\"{}\"}}}}\n", "y".repeat(100_000)));
        // Read in 7-byte pieces through a duplex pipe.
        let (mut tx, rx) = tokio::io::duplex(7);
        let bytes = wire.clone().into_bytes();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            tx.write_all(&bytes).await.unwrap();
        });
        let mut tap = Tap::new(rx, listeners);
        let mut out = Vec::new();
        tap.read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        assert_eq!(out, wire.as_bytes(), "the bytes pass unchanged");
        assert_eq!(*seen.lock().unwrap(), ["step 1", "step 2", "step 3"]);
    }
}
