//! jsonrpsee's client transport traits over a Unix stream with one JSON
//! message per line.

use futures_util::StreamExt;
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use jsonrpsee::core::traits::ToRpcParams;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
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
}

pub(crate) struct Sender(OwnedWriteHalf);
pub(crate) struct Receiver(FramedRead<OwnedReadHalf, LinesCodec>);

pub(crate) fn split(stream: UnixStream) -> (Sender, Receiver) {
    let (read, write) = stream.into_split();
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
                Some(Ok(line)) => return Ok(ReceivedMessage::Text(line)),
                Some(Err(e)) => return Err(e.into()),
                None => return Err(TransportError::Closed),
            }
        }
    }
}

/// Params passed by name: the protocol's params structs serialize to objects.
pub(crate) struct ByName<T>(pub(crate) T);

impl<T: Serialize> ToRpcParams for ByName<T> {
    fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        serde_json::value::to_raw_value(&self.0).map(Some)
    }
}
