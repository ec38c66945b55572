//! jsonrpsee's client transport traits over a byte stream (the Unix socket,
//! or the TLS face) with one JSON message per line.

use futures_util::StreamExt;
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use jsonrpsee::core::traits::ToRpcParams;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

/// Longest reply line the client accepts (tool results can be large).
const MAX_REPLY_BYTES: usize = 1 << 30;

/// A transport failure.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// A reply line could not be read.
    #[error("reading a reply: {0}")]
    Line(#[from] LinesCodecError),
    /// The daemon closed the connection.
    #[error("the daemon closed the connection")]
    Closed,
    /// The daemon answered with an error that names no request (`"id":
    /// null`: it could not read the request, e.g. a line over its size
    /// limit) and closes the connection. jsonrpsee cannot route such a
    /// reply, so it ends the connection with this error, which keeps the
    /// daemon's words.
    #[error("{message}")]
    Refused {
        /// The JSON-RPC error code.
        code: i32,
        /// The daemon's message.
        message: String,
        /// Structured detail, if any.
        data: Option<serde_json::Value>,
    },
}

pub(crate) struct Sender(Box<dyn AsyncWrite + Send + Unpin>);
pub(crate) struct Receiver(FramedRead<Box<dyn AsyncRead + Send + Unpin>, LinesCodec>);

/// The two halves of a Unix socket, each on its own (no lock between them).
pub(crate) fn split_unix(stream: tokio::net::UnixStream) -> (Sender, Receiver) {
    let (read, write) = stream.into_split();
    halves(Box::new(read), Box::new(write))
}

/// The two halves of any other stream (a TLS one).
pub(crate) fn split_io<S: AsyncRead + AsyncWrite + Send + 'static>(stream: S) -> (Sender, Receiver) {
    let (read, write) = tokio::io::split(stream);
    halves(Box::new(read), Box::new(write))
}

fn halves(read: Box<dyn AsyncRead + Send + Unpin>, write: Box<dyn AsyncWrite + Send + Unpin>) -> (Sender, Receiver) {
    (Sender(write), Receiver(FramedRead::new(read, LinesCodec::new_with_max_length(MAX_REPLY_BYTES))))
}

impl TransportSenderT for Sender {
    type Error = TransportError;

    async fn send(&mut self, mut msg: String) -> Result<(), TransportError> {
        msg.push('\n');
        self.0.write_all(msg.as_bytes()).await?;
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.0.shutdown().await?;
        Ok(())
    }
}

impl TransportReceiverT for Receiver {
    type Error = TransportError;

    async fn receive(&mut self) -> Result<ReceivedMessage, TransportError> {
        loop {
            match self.0.next().await {
                Some(Ok(line)) if line.trim().is_empty() => continue,
                Some(Ok(line)) => match unaddressed_error(&line) {
                    Some(refused) => return Err(refused),
                    None => return Ok(ReceivedMessage::Text(line)),
                },
                Some(Err(e)) => return Err(e.into()),
                None => return Err(TransportError::Closed),
            }
        }
    }
}

/// An error reply with `"id": null` as [`TransportError::Refused`], or
/// `None` for any other line.
fn unaddressed_error(line: &str) -> Option<TransportError> {
    // Cheap test first: replies are many and large.
    if !line.contains("\"error\"") || !line.contains("null") {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Reply {
        id: Option<serde_json::Value>,
        error: Option<Error>,
    }
    #[derive(serde::Deserialize)]
    struct Error {
        code: i32,
        message: String,
        data: Option<serde_json::Value>,
    }
    let reply: Reply = serde_json::from_str(line).ok()?;
    match (reply.id, reply.error) {
        (None | Some(serde_json::Value::Null), Some(e)) => {
            Some(TransportError::Refused { code: e.code, message: e.message, data: e.data })
        }
        _ => None,
    }
}

/// Params passed by name: the protocol's params structs serialize to objects.
pub(crate) struct ByName<T>(pub(crate) T);

impl<T: Serialize> ToRpcParams for ByName<T> {
    fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        serde_json::value::to_raw_value(&self.0).map(Some)
    }
}
