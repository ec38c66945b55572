//! One client connection: NDJSON framing, the peer check, and a single task
//! that reads requests and writes replies.
//!
//! Synchronous methods are answered on this task, with no hand-off to another
//! thread (a cross-core wake costs 35–55 µs here); asynchronous
//! methods and subscriptions run in tasks of their own and send their replies
//! back through the connection's `MethodSink`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentd_protocol::ErrorCode;
use futures_util::StreamExt;
use jsonrpsee::MethodSink;
use jsonrpsee::types::Id;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::dispatch::{Dispatcher, Handled, Reply, busy_reply, error_reply};
use super::{DaemonState, Shared};

/// Replies and subscription messages queued for one connection before
/// senders wait.
const OUTBOX_CAPACITY: usize = 1024;

/// How often a connection whose client stopped sending checks that the
/// client process is still there.
const PEER_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// How long a connection closed for a too-long line keeps discarding input.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a refused peer's input is discarded before closing.
const REFUSED_DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Requests of one connection running at once; more are refused.
const MAX_IN_FLIGHT: usize = 1024;

/// How long one reply may take to write before the client is dropped.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long closing a connection may wait to flush.
const SHUTDOWN_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves one accepted connection until the client leaves, the line limit is
/// broken, or the daemon shuts down.
pub(crate) async fn serve(stream: UnixStream, conn_id: usize, shared: Arc<Shared>, cancel: CancellationToken) {
    let allowed = shared.allowed_uid;
    // The process that connected, pinned: its pid cannot be reused by
    // another process while we look at its parents.
    let pidfd = {
        use std::os::fd::AsFd;
        crate::process::peer_pidfd(stream.as_fd())
    };
    let gone = |pidfd: &Option<std::os::fd::OwnedFd>| pidfd.as_ref().is_some_and(|p| !crate::process::pidfd_alive(p));
    match stream.peer_cred() {
        Ok(cred)
            if cred.uid() == allowed
                && (gone(&pidfd)
                    || cred
                        .pid()
                        .is_some_and(|pid| crate::process::is_tool_process(pid, shared.refuse_descendants))
                    || gone(&pidfd)) =>
        {
            // A tool's process must not open a session of its own (in
            // bypass mode, say) through the daemon that confines it.
            tracing::warn!(pid = ?cred.pid(), "refused connection from a tool's process");
            let reply = error_reply(
                Id::Null,
                ErrorCode::PeerNotAllowed,
                "connections from processes started by agentd's tools are refused".to_owned(),
            );
            let mut stream = stream;
            if write_line(&mut stream, &reply).await.is_ok() {
                let _ = stream.shutdown().await;
            }
            return;
        }
        Ok(cred) if cred.uid() == allowed => {}
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), pid = ?cred.pid(), allowed, "refused connection from another user");
            let reply = error_reply(
                Id::Null,
                ErrorCode::PeerNotAllowed,
                format!("this agentd serves uid {allowed} only; connection from uid {} refused", cred.uid()),
            );
            let mut stream = stream;
            if write_line(&mut stream, &reply).await.is_ok() {
                let _ = stream.shutdown().await;
                drain(&mut stream, REFUSED_DRAIN_LIMIT, &cancel).await;
            }
            return;
        }
        Err(e) => {
            tracing::warn!("refused connection: cannot read peer credentials: {e}");
            return;
        }
    }

    let (read, write) = stream.into_split();
    serve_lines(read, write, pidfd, conn_id, shared, cancel).await;
}

/// Serves a connection of the TLS face, whose client's certificate the
/// handshake verified. There is no process to watch: the connection ends
/// when the client closes it, a write times out, or TCP keepalive finds the
/// link gone.
pub(crate) async fn serve_tls(
    accepted: super::tls::Accepted,
    conn_id: usize,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    tracing::info!(peer = %accepted.peer, "TLS client connected");
    let (read, write) = tokio::io::split(accepted.stream);
    serve_lines(read, write, None, conn_id, shared, cancel).await;
}

/// The protocol on a connection whose peer is let in: requests read line
/// by line, replies written in order. `pidfd`, when known, is the client
/// process, whose requests end when it is gone.
async fn serve_lines<R, W>(
    read: R,
    write: W,
    pidfd: Option<std::os::fd::OwnedFd>,
    conn_id: usize,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let _count = ConnectionCount::new(&shared.state);
    let gone = |pidfd: &Option<std::os::fd::OwnedFd>| pidfd.as_ref().is_some_and(|p| !crate::process::pidfd_alive(p));
    let mut frames = FramedRead::new(read, LineCodec::new(shared.max_request_bytes));
    let mut writer = BufWriter::new(write);
    let (tx, mut outbox) = mpsc::channel::<Reply>(OUTBOX_CAPACITY);
    let sink = MethodSink::new(tx);
    let dispatcher = Arc::new(Dispatcher::new(shared.methods.clone(), conn_id, sink.clone()));
    let in_flight = TaskTracker::new();
    let mut reading = true;
    // Once the client stops sending, its requests are still answered — as
    // long as the process that connected is alive: when it is gone, so is
    // the reader of any answer, and its long calls end now.
    let mut peer_check = tokio::time::interval(PEER_CHECK);

    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = peer_check.tick(), if !reading => {
                if gone(&pidfd) {
                    tracing::debug!("the client process is gone; ending its requests");
                    break;
                }
            }
            Some(reply) = outbox.recv() => {
                if write_reply(&mut writer, &reply, outbox.is_empty(), &cancel).await.is_err() {
                    break;
                }
            }
            frame = frames.next(), if reading => {
                let line = match frame {
                    None => {
                        // The client is done sending; answer what it asked, then close.
                        reading = false;
                        in_flight.close();
                        continue;
                    }
                    Some(Err(LineError::TooLong)) => {
                        let reply = error_reply(
                            Id::Null,
                            ErrorCode::RequestTooLarge,
                            format!(
                                "request line exceeds the {}-byte limit (agentd --max-request-bytes); closing the connection",
                                shared.max_request_bytes
                            ),
                        );
                        if write_reply(&mut writer, &reply, true, &cancel).await.is_ok() {
                            let _ = writer.shutdown().await;
                            drain(frames.get_mut(), DRAIN_LIMIT, &cancel).await;
                        }
                        break;
                    }
                    Some(Err(LineError::Io(e))) => {
                        tracing::debug!("read failed: {e}");
                        break;
                    }
                    Some(Ok(line)) => line,
                };
                let text = match std::str::from_utf8(&line) {
                    Ok(text) => text.trim_end_matches('\r'),
                    Err(e) => {
                        let reply = error_reply(Id::Null, ErrorCode::ParseError, format!("parse error: request is not valid UTF-8 ({e})"));
                        if write_reply(&mut writer, &reply, outbox.is_empty(), &cancel).await.is_err() {
                            break;
                        }
                        continue;
                    }
                };
                if text.trim().is_empty() {
                    continue;
                }
                if in_flight.len() >= MAX_IN_FLIGHT {
                    // Refuse rather than stop reading: the replies this
                    // client waits for may need a later line (a cancel).
                    let reply = busy_reply(text, MAX_IN_FLIGHT);
                    if write_reply(&mut writer, &reply, outbox.is_empty(), &cancel).await.is_err() {
                        break;
                    }
                    continue;
                }
                match dispatcher.handle(text) {
                    Handled::Ready(None) => {}
                    Handled::Ready(Some(reply)) => {
                        if write_reply(&mut writer, &reply, outbox.is_empty(), &cancel).await.is_err() {
                            break;
                        }
                    }
                    Handled::Later(fut) => {
                        // Most requests need no wait (a quick tool call):
                        // answered here, without a task and a hop back.
                        let fut = match crate::inline::poll_once(fut) {
                            Ok(reply) => {
                                if let Some(reply) = reply
                                    && write_reply(&mut writer, &reply, outbox.is_empty(), &cancel).await.is_err()
                                {
                                    break;
                                }
                                continue;
                            }
                            Err(pending) => pending,
                        };
                        let sink = sink.clone();
                        let cancel = cancel.clone();
                        let task = in_flight.track_future(async move {
                            tokio::select! {
                                reply = fut => {
                                    if let Some(reply) = reply {
                                        let _ = sink.send(reply).await;
                                    }
                                }
                                _ = cancel.cancelled() => {}
                            }
                        });
                        shared.tracker.spawn(task.in_current_span());
                    }
                }
            }
            _ = in_flight.wait(), if !reading => {
                // Every request is answered; flush what is queued and leave.
                while let Ok(reply) = outbox.try_recv() {
                    if write_reply(&mut writer, &reply, outbox.is_empty(), &cancel).await.is_err() {
                        break;
                    }
                }
                break;
            }
        }
    }
    // Ends this connection's requests and subscriptions: dropping the outbox
    // closes the sink they hold.
    cancel.cancel();
    drop(outbox);
    in_flight.close();
    let _ = tokio::time::timeout(SHUTDOWN_WRITE_LIMIT, writer.shutdown()).await;
    // Sessions made to close with this connection close now.
    let closing = shared.clone();
    let _ = tokio::task::spawn_blocking(move || closing.state.sessions.close_owned(conn_id)).await;
    tracing::debug!("connection closed");
}

/// Writes one reply line; flushes when nothing else is queued.
async fn write_reply(
    writer: &mut BufWriter<impl tokio::io::AsyncWrite + Unpin>,
    reply: &Reply,
    flush: bool,
    cancel: &CancellationToken,
) -> std::io::Result<()> {
    let text = super::dispatch::restore_id(reply.get());
    let write = async {
        writer.write_all(text.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        if flush {
            writer.flush().await?;
        }
        Ok(())
    };
    // A client that stops reading must not hold the connection (and the
    // daemon's shutdown) forever.
    tokio::select! {
        r = tokio::time::timeout(WRITE_TIMEOUT, write) => match r {
            Ok(r) => r.inspect_err(|e| tracing::debug!("write failed: {e}")),
            Err(_) => {
                tracing::warn!("client has not read its replies for {} s; closing the connection", WRITE_TIMEOUT.as_secs());
                Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "client stopped reading"))
            }
        },
        _ = cancel.cancelled() => Err(std::io::Error::other("connection cancelled")),
    }
}

/// Reads and discards what the client is still sending, until it stops or
/// a few seconds pass. Closing a Unix socket with unread input resets the
/// connection, and the client would lose the error it was just sent.
async fn drain(read: &mut (impl tokio::io::AsyncRead + Unpin), limit: std::time::Duration, cancel: &CancellationToken) {
    use tokio::io::AsyncReadExt;
    let mut scratch = vec![0u8; 64 * 1024];
    let drained = async { while matches!(read.read(&mut scratch).await, Ok(n) if n > 0) {} };
    tokio::select! {
        _ = drained => {}
        _ = tokio::time::sleep(limit) => {}
        _ = cancel.cancelled() => {}
    }
}

async fn write_line(stream: &mut UnixStream, reply: &Reply) -> std::io::Result<()> {
    stream.write_all(reply.get().as_bytes()).await?;
    stream.write_all(b"\n").await?;
    stream.flush().await
}

/// Keeps `daemon/info`'s connection count honest however the task ends.
struct ConnectionCount<'a>(&'a DaemonState);

impl<'a> ConnectionCount<'a> {
    fn new(state: &'a DaemonState) -> Self {
        state.connections.fetch_add(1, Ordering::Relaxed);
        state.connections_total.fetch_add(1, Ordering::Relaxed);
        ConnectionCount(state)
    }
}

impl Drop for ConnectionCount<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why no line could be read.
#[derive(Debug)]
pub(crate) enum LineError {
    /// The line grew past the limit before its newline.
    TooLong,
    /// The socket failed.
    Io(std::io::Error),
}

impl From<std::io::Error> for LineError {
    fn from(e: std::io::Error) -> Self {
        LineError::Io(e)
    }
}

/// Splits the byte stream at `\n`, refusing a line longer than `max` bytes
/// as soon as it is known to be too long (not once it has all arrived).
pub(crate) struct LineCodec {
    max: usize,
    /// How far the buffer has been searched for a newline already.
    searched: usize,
}

impl LineCodec {
    pub(crate) fn new(max: usize) -> Self {
        LineCodec { max, searched: 0 }
    }
}

impl Decoder for LineCodec {
    type Item = BytesMut;
    type Error = LineError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, LineError> {
        match buf[self.searched..].iter().position(|b| *b == b'\n') {
            Some(pos) => {
                let end = self.searched + pos;
                self.searched = 0;
                if end > self.max {
                    return Err(LineError::TooLong);
                }
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                Ok(Some(line))
            }
            None if buf.len() > self.max => Err(LineError::TooLong),
            None => {
                self.searched = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, LineError> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        // A last line without its newline still counts.
        self.searched = 0;
        Ok(Some(buf.split_to(buf.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(codec: &mut LineCodec, input: &[u8]) -> Vec<Result<Vec<u8>, String>> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(line)) => out.push(Ok(line.to_vec())),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(format!("{e:?}")));
                    break;
                }
            }
        }
        if let Ok(Some(line)) = codec.decode_eof(&mut buf) {
            out.push(Ok(line.to_vec()));
        }
        out
    }

    #[test]
    fn splits_lines_and_keeps_a_last_line_without_newline() {
        let mut codec = LineCodec::new(100);
        let got = decode_all(&mut codec, b"a\nbb\n\nccc");
        let want: Vec<Result<Vec<u8>, String>> =
            vec![Ok(b"a".to_vec()), Ok(b"bb".to_vec()), Ok(b"".to_vec()), Ok(b"ccc".to_vec())];
        assert_eq!(got, want);
    }

    #[test]
    fn refuses_a_line_over_the_limit_before_its_newline() {
        let mut codec = LineCodec::new(4);
        let mut buf = BytesMut::from(&b"12345"[..]);
        assert!(matches!(codec.decode(&mut buf), Err(LineError::TooLong)));
        let mut codec = LineCodec::new(4);
        let mut buf = BytesMut::from(&b"1234\n12345\n"[..]);
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().as_ref(), b"1234");
        assert!(matches!(codec.decode(&mut buf), Err(LineError::TooLong)));
    }
}
