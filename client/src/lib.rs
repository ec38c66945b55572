//! `agentd-client`: a typed async client for the agentd daemon.
//!
//! It speaks the same NDJSON JSON-RPC as any other client (one connection,
//! requests and subscriptions multiplexed on it: `transport`), and calls
//! methods through the protocol crate's [`Method`] types so params and
//! results are checked at compile time.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentd_client::ClientError> {
//! let client = agentd_client::Client::connect(agentd_client::default_socket_path()).await?;
//! let info = client.daemon_info().await?;
//! println!("agentd {} up {} ms", info.version, info.uptime_ms);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod tls;
mod transport;

pub use tls::TlsEndpoint;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_protocol::methods::{
    DaemonInfo, DaemonInfoParams, DaemonInfoResult, SessionClose, SessionCreate, SessionGet, SessionList,
};
use agentd_protocol::methods::{ToolCall, ToolsList};
use agentd_protocol::session::{
    SessionCloseResult, SessionCreateParams, SessionCreateResult, SessionIdParams, SessionInfo, SessionListParams,
};
use agentd_protocol::tools::{ToolCallParams, ToolCallResult, ToolsListParams, ToolsListResult};
use agentd_protocol::{ErrorCode, Method};
use serde::de::DeserializeOwned;

pub use agentd_protocol as protocol;

/// How long one request may take before the client gives up. Tool calls can
/// run for ten minutes; leave room beyond that.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached: the daemon is probably not running.
    #[error("cannot connect to agentd at {path}: {source}")]
    Connect {
        /// The socket path tried.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The daemon answered with an error.
    #[error("{message} ({})", ErrorCode::from_code(*.code).map(|c| c.name()).unwrap_or("error"))]
    Rpc {
        /// The JSON-RPC error code (see [`ErrorCode`]).
        code: i32,
        /// The daemon's message.
        message: String,
        /// Structured detail, if any.
        data: Option<serde_json::Value>,
    },
    /// The daemon did not answer in time.
    #[error("agentd at {path} did not answer within {} s", .timeout.as_secs())]
    Timeout {
        /// The socket.
        path: PathBuf,
        /// How long the client waited.
        timeout: Duration,
    },
    /// Something that is not this user's agentd answers on the socket.
    #[error("refusing to talk to {path}: it is served by uid {uid}, not by this user ({own})")]
    WrongPeer {
        /// The socket.
        path: PathBuf,
        /// The uid serving it.
        uid: u32,
        /// Our uid.
        own: u32,
    },
    /// The daemon ended the connection before answering: it stopped (a
    /// clean stop answers running calls first, but a reply may not make it
    /// out), crashed, or was killed.
    #[error("interrupted: the daemon stopped (it closed the connection at {path} before answering)")]
    Disconnected {
        /// The socket.
        path: PathBuf,
    },
    /// The connection failed or the reply could not be understood.
    #[error("talking to agentd: {0}")]
    Transport(String),
}

impl ClientError {
    /// The protocol error code, when the daemon sent one of ours.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Rpc { code, .. } => ErrorCode::from_code(*code),
            _ => None,
        }
    }
}

impl ClientError {
    /// Why a connection to `path` ended, in agentd's words: a connection
    /// that ended is [`ClientError::Disconnected`], and an error the daemon
    /// sent before closing it (a request over its size limit) is that error.
    fn ended(ended: transport::Ended, path: &Path) -> ClientError {
        match ended {
            transport::Ended::Closed => ClientError::Disconnected { path: path.to_owned() },
            transport::Ended::Line(why) => ClientError::Transport(why),
            transport::Ended::Refused { code, message, data } => ClientError::Rpc { code, message, data },
        }
    }
}

#[doc(hidden)]
/// A lock held only for bookkeeping that cannot be left half done (a map
/// insert or remove), taken over even if a panic poisoned it: the one place
/// the client and `agentctl` say so.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The socket clients connect to when not told otherwise: `$AGENTD_SOCKET`,
/// else the daemon's default path.
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os(agentd_protocol::socket::SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    agentd_protocol::socket::default_socket_path(
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).as_deref(),
        nix::unistd::geteuid().as_raw(),
        &std::env::temp_dir(),
    )
}

/// Connects to a Unix socket, waiting briefly while the daemon's accept
/// queue is full (connect on a Unix socket fails with EAGAIN then, where TCP
/// would wait).
pub async fn connect_socket(path: &Path) -> std::io::Result<tokio::net::UnixStream> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut pause = Duration::from_micros(100);
    loop {
        match tokio::net::UnixStream::connect(path).await {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Where a daemon is: its Unix socket, or its TLS face.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The socket path (a daemon of this user on this machine).
    Unix(PathBuf),
    /// `tls://HOST:PORT`, with this client's certificate.
    Tls(TlsEndpoint),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
            Endpoint::Tls(tls) => f.write_str(&tls.url()),
        }
    }
}

/// A connection to the daemon. Cheap to share by reference; calls may run
/// concurrently over the one connection. It needs a tokio runtime with time
/// enabled (the request timeout); dropping it closes the connection, and
/// its subscriptions end.
pub struct Client {
    core: std::sync::Arc<transport::Core>,
    socket: PathBuf,
    timeout: Duration,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.core.end(transport::Ended::Closed);
    }
}

impl Client {
    /// Connects to the daemon's socket.
    pub async fn connect(path: impl AsRef<Path>) -> Result<Client, ClientError> {
        Self::connect_with_timeout(path, DEFAULT_REQUEST_TIMEOUT).await
    }

    /// Connects to `endpoint`, giving each request at most `timeout`.
    pub async fn connect_endpoint(endpoint: &Endpoint, timeout: Duration) -> Result<Client, ClientError> {
        match endpoint {
            Endpoint::Unix(path) => Self::connect_with_timeout(path, timeout).await,
            Endpoint::Tls(tls) => {
                let failed = |source| ClientError::Connect { path: PathBuf::from(tls.url()), source };
                let stream = tls::connect(tls).await.map_err(failed)?;
                let client = Client { core: transport::open_io(stream), socket: PathBuf::from(tls.url()), timeout };
                // Under TLS 1.3 the daemon judges this client's certificate
                // after the handshake; a refusal arrives as an alert on the
                // first read. One round trip here makes it a connect error
                // ("refused this client's certificate"), not a lost reply.
                match client.daemon_info().await {
                    Ok(_) | Err(ClientError::Rpc { .. }) => Ok(client),
                    Err(e) => Err(failed(std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        format!("the daemon refused this client ({e})"),
                    ))),
                }
            }
        }
    }

    /// Connects, giving each request at most `timeout`.
    pub async fn connect_with_timeout(path: impl AsRef<Path>, timeout: Duration) -> Result<Client, ClientError> {
        let path = path.as_ref();
        let stream =
            connect_socket(path).await.map_err(|source| ClientError::Connect { path: path.to_owned(), source })?;
        // A socket in a shared directory could be someone else's trap.
        let own = nix::unistd::geteuid().as_raw();
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == own || own == 0 => {}
            Ok(cred) => return Err(ClientError::WrongPeer { path: path.to_owned(), uid: cred.uid(), own }),
            Err(source) => return Err(ClientError::Connect { path: path.to_owned(), source }),
        }
        Ok(Client { core: transport::open_unix(stream), socket: path.to_owned(), timeout })
    }

    /// Whether the connection to the daemon is still up (a daemon that
    /// closed it, say for a line over its limit, cannot be talked to again).
    pub fn is_connected(&self) -> bool {
        self.core.is_connected()
    }

    /// The socket this client is connected to (`tls://HOST:PORT` for the
    /// TLS face).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Calls method `M` with `params`.
    pub async fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        let params = serde_json::value::to_raw_value(&params).map_err(|e| ClientError::Transport(e.to_string()))?;
        let result = self.request(M::NAME, &params, None).await?;
        serde_json::from_str(result.get())
            .map_err(|e| ClientError::Transport(format!("reading {}'s result: {e}", M::NAME)))
    }

    /// Sends one request and waits, at most the request timeout, for its
    /// result (`subscription`: it opens one, which sends there and which
    /// that method ends).
    async fn request(
        &self,
        method: &str,
        params: &serde_json::value::RawValue,
        subscription: Option<(tokio::sync::mpsc::Sender<Box<serde_json::value::RawValue>>, &'static str)>,
    ) -> Result<Box<serde_json::value::RawValue>, ClientError> {
        let (id, reply) =
            self.core.send(method, params, subscription).map_err(|e| ClientError::ended(e, &self.socket))?;
        // A caller that gives up (dropped, or out of time) is forgotten.
        struct Forget<'a>(&'a transport::Core, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.forget(self.1);
            }
        }
        let _forget = Forget(&self.core, id);
        match tokio::time::timeout(self.timeout, reply).await {
            Err(_) => Err(ClientError::Timeout { path: self.socket.clone(), timeout: self.timeout }),
            Ok(Err(_)) => Err(ClientError::Disconnected { path: self.socket.clone() }),
            Ok(Ok(transport::Answer::Result(result))) => Ok(result),
            Ok(Ok(transport::Answer::Error { code, message, data })) => Err(ClientError::Rpc { code, message, data }),
            Ok(Ok(transport::Answer::Ended(ended))) => Err(ClientError::ended(ended, &self.socket)),
            Ok(Ok(transport::Answer::Unreadable(why))) => Err(ClientError::Transport(why)),
        }
    }

    /// Opens a subscription: `method` with `params`, ended by `unsubscribe`.
    async fn subscribe<T: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl serde::Serialize,
        unsubscribe: &'static str,
    ) -> Result<Subscription<T>, ClientError> {
        let params = serde_json::value::to_raw_value(params).map_err(|e| ClientError::Transport(e.to_string()))?;
        let (events, received) = tokio::sync::mpsc::channel(transport::SUBSCRIPTION_BUFFER);
        let name = self.request(method, &params, Some((events, unsubscribe))).await?;
        Ok(Subscription { received, name: name.get().into(), core: self.core.clone(), _of: std::marker::PhantomData })
    }

    /// `daemon/info`.
    pub async fn daemon_info(&self) -> Result<DaemonInfoResult, ClientError> {
        self.call::<DaemonInfo>(DaemonInfoParams {}).await
    }

    /// `session/create`.
    pub async fn session_create(&self, params: SessionCreateParams) -> Result<SessionCreateResult, ClientError> {
        self.call::<SessionCreate>(params).await
    }

    /// `session/list`.
    pub async fn session_list(&self) -> Result<Vec<SessionInfo>, ClientError> {
        Ok(self.call::<SessionList>(SessionListParams {}).await?.sessions)
    }

    /// `session/get`.
    pub async fn session_get(&self, session_id: &str) -> Result<SessionInfo, ClientError> {
        self.call::<SessionGet>(SessionIdParams { session_id: session_id.to_owned() }).await
    }

    /// `tools/list`.
    pub async fn tools_list(&self, session_id: &str) -> Result<ToolsListResult, ClientError> {
        self.call::<ToolsList>(ToolsListParams::new(session_id)).await
    }

    /// `tool/call`.
    pub async fn tool_call(
        &self,
        session_id: &str,
        name: &str,
        input: serde_json::Value,
    ) -> Result<ToolCallResult, ClientError> {
        let params =
            ToolCallParams { session_id: session_id.to_owned(), name: name.to_owned(), input, tool_use_id: None };
        self.call::<ToolCall>(params).await
    }

    /// `turn/stream`: the session's events (after `after_seq` when given),
    /// until the session closes or the subscription is dropped.
    pub async fn stream(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
    ) -> Result<Subscription<agentd_protocol::turn::Event>, ClientError> {
        self.stream_kinds(session_id, after_seq, None).await
    }

    /// `turn/stream` of only the events of `kinds` (every event when
    /// `None`; `session/closed` always).
    pub async fn stream_kinds(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
        kinds: Option<&[&str]>,
    ) -> Result<Subscription<agentd_protocol::turn::Event>, ClientError> {
        self.stream_with(session_id, after_seq, kinds, &[]).await
    }

    /// `turn/stream` declaring `capabilities` (`"agents"`: this client
    /// answers `agent/request`, so the session offers the Task tool).
    pub async fn stream_with(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
        kinds: Option<&[&str]>,
        capabilities: &[&str],
    ) -> Result<Subscription<agentd_protocol::turn::Event>, ClientError> {
        let kinds = kinds.map(|k| k.iter().map(|s| (*s).to_owned()).collect());
        let params = agentd_protocol::turn::TurnStreamParams {
            session_id: session_id.to_owned(),
            after_seq,
            kinds,
            capabilities: (!capabilities.is_empty()).then(|| capabilities.iter().map(|s| (*s).to_owned()).collect()),
        };
        self.subscribe(agentd_protocol::methods::TURN_STREAM, &params, agentd_protocol::methods::TURN_UNSTREAM).await
    }

    /// `daemon/watch`: what every session does, now and after each change.
    pub async fn watch_activity(
        &self,
    ) -> Result<Subscription<agentd_protocol::methods::DaemonActivityResult>, ClientError> {
        self.subscribe(
            agentd_protocol::methods::DAEMON_WATCH,
            &agentd_protocol::methods::DaemonActivityParams {},
            agentd_protocol::methods::DAEMON_UNWATCH,
        )
        .await
    }

    /// `session/close`.
    pub async fn session_close(&self, session_id: &str) -> Result<SessionCloseResult, ClientError> {
        self.call::<SessionClose>(SessionIdParams { session_id: session_id.to_owned() }).await
    }
}

/// A subscription's notifications, in order: a stream of `T` that ends when
/// the connection does (the [`Client`] dropped too), or when this side fell
/// more than a thousand notifications behind (read them as they come; the
/// daemon is then told to stop). Dropping it tells the daemon.
pub struct Subscription<T> {
    received: tokio::sync::mpsc::Receiver<Box<serde_json::value::RawValue>>,
    /// Its id as the daemon wrote it (JSON text).
    name: Box<str>,
    core: std::sync::Arc<transport::Core>,
    _of: std::marker::PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Subscription<T> {
    /// The next notification; `None` once the subscription is over.
    pub async fn next(&mut self) -> Option<Result<T, ClientError>> {
        futures_util::StreamExt::next(self).await
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        self.core.unsubscribe(&self.name);
    }
}

impl<T: DeserializeOwned> futures_util::Stream for Subscription<T> {
    type Item = Result<T, ClientError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.received.poll_recv(cx).map(|next| {
            next.map(|raw| {
                serde_json::from_str(raw.get())
                    .map_err(|e| ClientError::Transport(format!("reading a notification: {e}")))
            })
        })
    }
}
