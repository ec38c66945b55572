//! One pool of MCP servers per daemon. A server is shared by the sessions
//! that name the same entry on the same workspace, started on first use,
//! its tool list kept (in memory and in `<state>/mcp-tools`, so a session
//! knows the names of deferred tools without starting anything once seen),
//! started again by the next call after it died (one shared attempt: calls
//! that waited for a failed start get its error), and stopped when the last
//! session using it closes, or with the daemon.
//!
//! Stdio servers run through the process layer (`process::spawn_server`):
//! their own process group, a marker, the process ledger, a plain
//! environment plus their entry's `env`.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_protocol::mcp::{McpPoolServer, McpServerState};
use rmcp::service::{ClientInitializeError, ClientServiceExt};
use rmcp::service::{Peer, RoleClient, RunningService};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};

use super::config::Transport;
use super::handler::Handler;
use super::listing::{ListFailure, check_tool, file_key, list_tools, read_cache, write_cache};
use crate::sync::MutexExt;
use crate::tool::context::ProgressReporter;

/// How long a server may take to start and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Lines of a server's stderr kept for error messages (each cut at 500
/// characters; longer ones are read in pieces and mostly dropped).
const STDERR_LINES: usize = 8;

/// Most tools (and resources) taken from one server (and `listing`'s most
/// pages): a server that lists forever cannot grow the daemon.
pub const MAX_LISTED: usize = 10_000;

/// A tool as the server described it, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerTool {
    /// The server's own name for it.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema.
    pub schema: Value,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`, `idempotentHint`, `openWorldHint` as the server
    /// gave them (`None`: not given; MCP's defaults then apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
    /// Why a model API would reject it, if it would: it is then not
    /// offered, and a call that names it says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
    /// Its `outputSchema`: what its `structuredContent` must fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Its `title` and `icons`, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<agentd_protocol::tools::ToolLabel>,
}

/// The daemon's servers.
pub struct Pool {
    servers: Mutex<HashMap<String, Arc<Server>>>,
    cache_dir: Option<PathBuf>,
    /// Where OAuth tokens are kept (`None`: in memory).
    auth_dir: Option<PathBuf>,
    /// Tokens by server address, shared by the pool's entries for it.
    credentials: Mutex<HashMap<String, super::auth::Credentials>>,
    /// Logins waiting for their redirect.
    logins: super::auth::Logins,
    /// Where stdio servers' processes are recorded.
    ledger: Arc<crate::process::Ledger>,
}

impl Pool {
    /// A pool that keeps tool lists under `<dir>/mcp-tools` and OAuth
    /// tokens under `<dir>/mcp-auth` (`None`: in memory), and records its
    /// servers' processes in `ledger`.
    pub fn new(dir: Option<PathBuf>, ledger: Arc<crate::process::Ledger>) -> Self {
        let cache_dir = dir.as_ref().map(|d| d.join("mcp-tools"));
        if let Some(dir) = &cache_dir {
            let _ = std::fs::create_dir_all(dir);
        }
        // Made now, 0700: the sandbox hides it from commands, and a
        // directory must exist to be hidden.
        if let Some(dir) = &dir {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir.join("mcp-auth"));
            super::auth::tidy(&dir.join("mcp-auth"));
        }
        Pool {
            servers: Mutex::new(HashMap::new()),
            cache_dir,
            auth_dir: dir.map(|d| d.join("mcp-auth")),
            credentials: Mutex::new(HashMap::new()),
            logins: super::auth::Logins::default(),
            ledger,
        }
    }

    /// The tokens kept for the server at `url`.
    fn credentials(&self, url: &str) -> super::auth::Credentials {
        let mut all = self.credentials.locked();
        all.entry(url.to_owned())
            .or_insert_with(|| super::auth::Credentials::new(self.auth_dir.as_deref(), url))
            .clone()
    }

    /// `mcp/login`: starts the authorization of `server` (an HTTP one);
    /// the login's id and the address for the user's browser.
    pub async fn login(&self, server: &Arc<Server>, redirect_uri: &str) -> Result<(String, String), String> {
        let Transport::Http { url, client, .. } = &server.transport else {
            return Err(format!("MCP server {} is not an HTTP server: it has no OAuth login", server.name));
        };
        let credentials = server.credentials.clone().unwrap_or_else(|| self.credentials(url));
        let challenge = server.auth().challenge.clone();
        self.logins
            .begin(&server.key, url, &credentials, client, challenge, redirect_uri)
            .await
            .map_err(|e| server.redact(e))
    }

    /// `mcp/login_complete`: the tokens are kept; the server starts again
    /// with them (its sessions follow its tools). The server, the scopes
    /// granted.
    pub async fn complete_login(
        &self,
        login_id: &str,
        callback_url: &str,
    ) -> Result<(Arc<Server>, Vec<String>), String> {
        let (key, scopes) = self.logins.complete(login_id, callback_url).await?;
        let server =
            self.lock().get(&key).cloned().ok_or("the server of this login is no longer used by any session")?;
        server.authorized().await;
        Ok((server, scopes))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Server>>> {
        self.servers.locked()
    }

    /// The server for `name` with `transport` on `workspace`, counted as
    /// used by one more session until the lease is dropped.
    pub fn acquire(self: &Arc<Self>, name: &str, workspace: &Path, transport: &Transport, secrets: &[String]) -> Lease {
        let key = format!("{name}\u{0}{}\u{0}{transport:?}", workspace.display());
        let mut servers = self.lock();
        let server = servers
            .entry(key.clone())
            .or_insert_with(|| {
                // The key holds expanded secrets: files keep only its hash.
                let hash = file_key(&key);
                let cache_file = self.cache_dir.as_ref().map(|d| d.join(format!("{hash}.json")));
                let tools = cache_file.as_ref().and_then(|f| read_cache(f, &hash));
                let credentials = match transport {
                    Transport::Http { url, .. } => Some(self.credentials(url)),
                    Transport::Stdio { .. } => None,
                };
                Arc::new_cyclic(|me| Server {
                    credentials,
                    auth: Mutex::new(AuthStatus::default()),
                    me: me.clone(),
                    key: key.clone(),
                    name: name.to_owned(),
                    workspace: workspace.to_owned(),
                    transport: transport.clone(),
                    conn: tokio::sync::Mutex::new(None),
                    status: Mutex::new(Status { tools, ..Status::default() }),
                    sessions: AtomicU32::new(0),
                    progress: Arc::new(Mutex::new(HashMap::new())),
                    logs: Arc::new(super::logs::LogRouter::default()),
                    elicit: Arc::new(super::elicit::Targets::default()),
                    notices: Arc::new(super::changes::Notices::default()),
                    log_level: Mutex::new(None),
                    legacy_only: Default::default(),
                    cache_file,
                    hash,
                    secrets: secrets.to_vec(),
                    ledger: self.ledger.clone(),
                })
            })
            .clone();
        server.sessions.fetch_add(1, Ordering::SeqCst);
        Lease { server, pool: Arc::downgrade(self) }
    }

    /// Every server, for `mcp/list`.
    pub fn list(&self) -> Vec<McpPoolServer> {
        let mut out: Vec<McpPoolServer> = self.lock().values().map(|s| s.pool_status()).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.workspace.cmp(&b.workspace)));
        out
    }

    /// Stops every server (daemon shutdown), all at once, within a few
    /// seconds; what is still running then is killed.
    pub async fn stop_all(&self) {
        let servers: Vec<Arc<Server>> = self.lock().drain().map(|(_, s)| s).collect();
        let stopping = futures_util::future::join_all(servers.iter().map(|s| s.stop()));
        if tokio::time::timeout(Duration::from_secs(5), stopping).await.is_err() {
            for server in &servers {
                server.kill_now();
            }
        }
    }

    fn release(&self, server: &Arc<Server>) {
        if server.sessions.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        let mut servers = self.lock();
        // A session may have acquired it again meanwhile.
        if server.sessions.load(Ordering::SeqCst) == 0 {
            servers.remove(&server.key);
            drop(servers);
            let server = server.clone();
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move { server.stop().await });
                }
                Err(_) => server.kill_now(),
            }
        }
    }
}

/// A session's use of a server: the server stops when the last lease goes.
pub struct Lease {
    /// The server.
    pub server: Arc<Server>,
    pool: std::sync::Weak<Pool>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.release(&self.server);
        }
    }
}

#[derive(Default)]
struct Status {
    state: Option<McpServerState>,
    tools: Option<Arc<Vec<ServerTool>>>,
    last_error: Option<String>,
    starts: u32,
    /// Start attempts so far (to share one attempt between waiting calls).
    attempts: u64,
    pid: Option<u32>,
    peer: Option<Peer<RoleClient>>,
}

/// An HTTP server's OAuth standing.
#[derive(Default)]
struct AuthStatus {
    /// `None`: it never asked for an authorization.
    state: Option<agentd_protocol::mcp::McpAuthState>,
    /// Its last `WWW-Authenticate` challenge (where discovery starts).
    challenge: Option<String>,
    /// What its sessions were told.
    message: Option<String>,
}

/// One server of the pool.
pub struct Server {
    me: std::sync::Weak<Server>,
    /// Its OAuth tokens (HTTP servers).
    credentials: Option<super::auth::Credentials>,
    auth: Mutex<AuthStatus>,
    key: String,
    /// Its name.
    pub name: String,
    /// The workspace it serves.
    pub workspace: PathBuf,
    transport: Transport,
    conn: tokio::sync::Mutex<Option<Conn>>,
    status: Mutex<Status>,
    sessions: AtomicU32,
    progress: Arc<Mutex<HashMap<String, ProgressReporter>>>,
    /// Its log messages' listeners (sessions).
    logs: Arc<super::logs::LogRouter>,
    /// The sessions its elicitations may go to.
    elicit: Arc<super::elicit::Targets>,
    /// The sessions told when its lists change or it needs a login.
    notices: Arc<super::changes::Notices>,
    /// The level last asked of the running server (`logging/setLevel`).
    log_level: Mutex<Option<agentd_protocol::mcp::McpLogLevel>>,
    cache_file: Option<PathBuf>,
    hash: String,
    secrets: Vec<String>,
    /// Where its process is recorded.
    ledger: Arc<crate::process::Ledger>,
    /// It speaks MCP 2025-11-25 only, as its last start found.
    legacy_only: std::sync::atomic::AtomicBool,
}

struct Conn {
    service: RunningService<RoleClient, Handler>,
    process: Option<crate::process::ProcessTree>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Server {
    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.locked()
    }

    /// `stdio` or `http`.
    pub fn transport_kind(&self) -> &'static str {
        self.transport.kind()
    }

    /// `message` with every value a `${VAR}` of the entry expanded to
    /// replaced by `***`.
    pub fn redact(&self, message: impl Into<String>) -> String {
        let mut message = message.into();
        for secret in &self.secrets {
            if message.contains(secret.as_str()) {
                message = message.replace(secret.as_str(), "***");
            }
        }
        message
    }

    /// Its state now: a running server whose connection closed counts as
    /// failed.
    pub fn state(&self) -> (McpServerState, Option<String>) {
        let status = self.status();
        let state = status.state.unwrap_or(McpServerState::Idle);
        if state == McpServerState::Running && status.peer.as_ref().is_some_and(|p| p.is_transport_closed()) {
            let why = status.last_error.clone().unwrap_or_else(|| "the server closed the connection".into());
            return (McpServerState::Failed, Some(why));
        }
        (state, status.last_error.clone())
    }

    /// Its tools as last seen (`None`: never seen).
    pub fn tools(&self) -> Option<Arc<Vec<ServerTool>>> {
        self.status().tools.clone()
    }

    fn pool_status(&self) -> McpPoolServer {
        let (state, last_error) = self.state();
        let status = self.status();
        McpPoolServer {
            name: self.name.clone(),
            workspace: self.workspace.clone(),
            transport: self.transport.kind().to_owned(),
            state,
            tools: status.tools.as_ref().map_or(0, |t| t.len() as u32),
            sessions: self.sessions.load(Ordering::SeqCst),
            pid: if state == McpServerState::Running { status.pid } else { None },
            starts: status.starts,
            last_error,
            auth: self.auth_state(),
            protocol_version: (state == McpServerState::Running)
                .then(|| status.peer.as_ref()?.peer_info().map(|i| i.protocol_version.to_string()))
                .flatten(),
        }
    }

    /// Learns the server's tools if they were never seen: starts it (and
    /// leaves it running for the calls to come).
    pub async fn discover(&self) {
        if self.tools().is_none() {
            let _ = self.peer().await;
        }
    }

    /// A connection to the server: the running one, or a new one when
    /// there is none or it died. Calls waiting while a start fails all get
    /// that start's error rather than each trying again.
    pub async fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let seen = self.status().attempts;
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_ref()
            && !c.service.is_transport_closed()
        {
            return Ok(c.service.peer().clone());
        }
        if let Some(dead) = conn.take() {
            let why = self.redact(Self::end(dead).await);
            tracing::warn!(server = %self.name, "MCP server {}: {why}", self.name);
            self.status().last_error = Some(why);
        }
        {
            let status = self.status();
            if status.attempts != seen && status.state == Some(McpServerState::Failed) {
                return Err(status.last_error.clone().unwrap_or_else(|| "it failed to start".into()));
            }
        }
        {
            let mut status = self.status();
            status.attempts += 1;
            status.state = Some(McpServerState::Starting);
        }
        let started = tokio::time::timeout(STARTUP_TIMEOUT, self.start())
            .await
            .unwrap_or_else(|_| {
                Err(format!("it did not start and list its tools within {} s", STARTUP_TIMEOUT.as_secs()))
            })
            .map_err(|e| self.redact(e));
        match started {
            Ok((c, tools)) => {
                let peer = c.service.peer().clone();
                let pid = c.process.as_ref().map(|p| p.pgid() as u32);
                if let Some(file) = &self.cache_file {
                    write_cache(file, &self.hash, &tools);
                }
                let mut status = self.status();
                // A list not seen before, or seen (or cached) and
                // different: sessions that offer the old one are told.
                let changed = status.tools.as_deref() != Some(&tools);
                status.state = Some(McpServerState::Running);
                status.tools = Some(Arc::new(tools));
                status.last_error = None;
                status.starts += 1;
                status.pid = pid;
                status.peer = Some(peer.clone());
                drop(status);
                *conn = Some(c);
                tracing::info!(server = %self.name, workspace = %self.workspace.display(), "MCP server started");
                if changed {
                    self.notices.tell(&self.name, super::changes::Notice::List(agentd_protocol::mcp::McpList::Tools));
                }
                Ok(peer)
            }
            Err(why) => {
                tracing::warn!(server = %self.name, "MCP server {} failed to start: {why}", self.name);
                let mut status = self.status();
                status.state = Some(McpServerState::Failed);
                status.last_error = Some(why.clone());
                status.peer = None;
                Err(why)
            }
        }
    }

    /// After a call saw the connection close: what happened to the server
    /// (its exit status and last stderr lines), recorded as its last error.
    pub async fn died(&self) -> String {
        let mut conn = self.conn.lock().await;
        let why = match conn.take() {
            Some(dead) => self.redact(Self::end(dead).await),
            None => self.status().last_error.clone().unwrap_or_else(|| "the connection closed".into()),
        };
        let mut status = self.status();
        status.state = Some(McpServerState::Failed);
        status.last_error = Some(why.clone());
        status.peer = None;
        why
    }

    /// Starts the server (stdio) or reaches it (HTTP) and meets it as
    /// `lifecycle` says.
    async fn connect(
        &self,
        handler: Handler,
        lifecycle: rmcp::service::ClientLifecycleMode,
        stderr: &Arc<Mutex<VecDeque<String>>>,
    ) -> Result<(RunningService<RoleClient, Handler>, Option<crate::process::ProcessTree>), Refused> {
        let started = match &self.transport {
            Transport::Stdio { command, args, env, cwd } => {
                let marker = format!("mcp-{}", uuid::Uuid::new_v4().simple());
                let mut tree = crate::process::spawn_server(command, args, cwd, env, &marker, &self.ledger)
                    .map_err(|e| Refused::Other(format!("cannot start {command:?}: {e}")))?;
                let (Some(stdin), Some(stdout)) = (tree.child.stdin.take(), tree.child.stdout.take()) else {
                    return Err(Refused::Other("its pipes could not be opened".into()));
                };
                if let Some(err) = tree.child.stderr.take() {
                    let tail = stderr.clone();
                    let name = self.name.clone();
                    tokio::spawn(async move {
                        // Bytes, in bounded pieces: a line without end or
                        // not UTF-8 neither grows the daemon nor stops the
                        // draining (a server blocked on a full pipe hangs).
                        let mut reader = tokio::io::BufReader::new(err);
                        let mut piece = Vec::with_capacity(4096);
                        loop {
                            piece.clear();
                            match (&mut reader).take(4096).read_until(b'\n', &mut piece).await {
                                Ok(0) | Err(_) => break,
                                Ok(_) => {}
                            }
                            let line = String::from_utf8_lossy(&piece);
                            let line = line.trim_end();
                            tracing::debug!(server = %name, "stderr: {line}");
                            let mut tail = tail.locked();
                            if tail.len() == STDERR_LINES {
                                tail.pop_front();
                            }
                            tail.push_back(line.chars().take(500).collect());
                        }
                    });
                }
                // Progress read off the pipe, in order with the results.
                let stdout = super::progress::Tap::new(stdout, self.progress.clone());
                let handler = Handler { tapped: true, ..handler };
                match handler.serve_with_lifecycle((stdout, stdin), lifecycle).await {
                    Ok(service) => (service, Some(tree)),
                    Err(e) => {
                        let dead = Self::exit_note(&mut tree, stderr).await;
                        tree.terminate().await;
                        // A server that answered, but not as either revision
                        // has it, may yet take 2025-11-25's handshake; one
                        // that died or closed its pipes is not tried again.
                        let answered = !matches!(
                            e,
                            ClientInitializeError::ConnectionClosed(_)
                                | ClientInitializeError::TransportError { .. }
                                | ClientInitializeError::LegacyFallbackFailed { .. }
                        );
                        let why = format!("the MCP handshake failed ({e}){dead}");
                        return Err(if answered { Refused::Protocol(why) } else { Refused::Other(why) });
                    }
                }
            }
            Transport::Http { url, headers, .. } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let mut map = HashMap::new();
                for (k, v) in headers {
                    let (Ok(k), Ok(v)) = (http::HeaderName::from_bytes(k.as_bytes()), http::HeaderValue::from_str(v))
                    else {
                        return Err(Refused::Other(format!("header {k:?} is not valid")));
                    };
                    map.insert(k, v);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
                let started = match self.authorized_manager(url).await.map_err(Refused::Other)? {
                    Some(manager) => {
                        let client = rmcp::transport::auth::AuthClient::new(reqwest::Client::new(), manager);
                        let transport = StreamableHttpClientTransport::with_client(client, config);
                        handler.serve_with_lifecycle(transport, lifecycle).await
                    }
                    None => {
                        let transport = StreamableHttpClientTransport::from_config(config);
                        handler.serve_with_lifecycle(transport, lifecycle).await
                    }
                };
                let service = match started {
                    Ok(service) => service,
                    Err(rmcp::service::ClientInitializeError::TransportError { error, .. })
                        if let Some(challenge) = super::auth::challenge_in(&error) =>
                    {
                        return Err(Refused::Other(self.needs_login(challenge)));
                    }
                    // Over HTTP nothing was started: any other failure may
                    // be a server of 2025-11-25 refusing the revision's way.
                    Err(e) => return Err(Refused::Protocol(format!("cannot connect to {url}: {e}"))),
                };
                (service, None)
            }
        };
        Ok(started)
    }

    async fn start(&self) -> Result<(Conn, Vec<ServerTool>), String> {
        let (signal, signals) = super::changes::channel();
        let listening = signal.clone();
        let handler = Handler {
            changes: signal,
            progress: self.progress.clone(),
            tapped: false,
            name: self.name.clone(),
            workspace: self.workspace.clone(),
            logs: self.logs.clone(),
            elicit: self.elicit.clone(),
        };
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let first = if self.legacy_only.load(Ordering::Relaxed) {
            rmcp::service::ClientLifecycleMode::Initialize
        } else {
            lifecycle()
        };
        let (service, process) = match self.connect(handler.clone(), first, &stderr).await {
            Ok(connected) => connected,
            Err(Refused::Other(why)) => return Err(why),
            Err(Refused::Protocol(why)) if self.legacy_only.load(Ordering::Relaxed) => return Err(why),
            Err(Refused::Protocol(why)) => {
                tracing::info!(server = %self.name, "MCP 2026-07-28 failed ({why}); trying 2025-11-25's handshake");
                let initialize = rmcp::service::ClientLifecycleMode::Initialize;
                let connected = self.connect(handler, initialize, &stderr).await.map_err(Refused::why)?;
                // It is one of 2025-11-25: its next start goes there at once.
                self.legacy_only.store(true, Ordering::Relaxed);
                connected
            }
        };
        // Listening before listing: no change between the two is missed.
        super::changes::listen(service.peer(), listening).await;
        let listed = list_tools(service.peer()).await;
        let mut conn = Conn { service, process, stderr };
        let listed = match listed {
            Ok(listed) => listed,
            Err(ListFailure { challenge: Some(challenge), .. }) => {
                Self::end(conn).await;
                return Err(self.needs_login(challenge));
            }
            Err(e) => {
                let why = format!("listing its tools failed: {}", e.message);
                Self::end(conn).await;
                return Err(why);
            }
        };
        let tools = listed.into_iter().map(|t| check_tool(&self.name, t)).collect();
        super::changes::spawn(signals, self.me.clone(), conn.service.peer().clone());
        // Its log messages at the level the sessions want (MCP's servers
        // send everything until told).
        let logs = conn.service.peer().peer_info().is_some_and(|i| i.capabilities.logging.is_some());
        *self.log_level.locked() = None;
        if logs {
            let level = self.logs.wanted().unwrap_or_default();
            // MCP 2026-07-28 has no setLevel: each request carries the
            // level (see `request_meta`).
            if modern(conn.service.peer()) || set_level(conn.service.peer(), level).await {
                *self.log_level.locked() = Some(level);
            }
        }
        if let Some(p) = conn.process.as_mut() {
            // Its stderr is read by the task above; nothing else to keep.
            let _ = p.pgid();
        }
        Ok((conn, tools))
    }

    /// Ends a connection and its process; says how the process ended.
    async fn end(mut conn: Conn) -> String {
        let _ = conn.service.close_with_timeout(Duration::from_millis(200)).await;
        match conn.process.as_mut() {
            Some(tree) => {
                let note = Self::exit_note(tree, &conn.stderr).await;
                tree.terminate().await;
                format!("the server's connection closed{note}")
            }
            None => "the server's connection closed".into(),
        }
    }

    /// ", the process exited with status N; stderr: …" as far as known.
    async fn exit_note(tree: &mut crate::process::ProcessTree, stderr: &Mutex<VecDeque<String>>) -> String {
        // The process may take a moment to be reaped after its pipes close.
        let status = tokio::time::timeout(Duration::from_millis(500), tree.child.wait()).await;
        // Let the stderr reader catch the last lines.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut note = match status {
            Ok(Ok(status)) => {
                use std::os::unix::process::ExitStatusExt;
                match (status.code(), status.signal()) {
                    (Some(code), _) => format!(", the process exited with status {code}"),
                    (None, Some(sig)) => format!(", the process was killed by signal {sig}"),
                    _ => String::new(),
                }
            }
            _ => String::new(),
        };
        let tail: Vec<String> = stderr.locked().iter().cloned().collect();
        if !tail.is_empty() {
            note.push_str(&format!("; its stderr ended with: {}", tail.join(" | ")));
        }
        note
    }

    /// Stops the server (last session gone, or daemon shutdown).
    pub async fn stop(&self) {
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn {
            Self::end(conn).await;
            tracing::info!(server = %self.name, workspace = %self.workspace.display(), "MCP server stopped");
        }
        let mut status = self.status();
        status.state = Some(McpServerState::Idle);
        status.peer = None;
        status.pid = None;
    }

    /// SIGKILL to the server's processes now (no runtime to stop it in).
    fn kill_now(&self) {
        if let Ok(mut conn) = self.conn.try_lock()
            && let Some(mut conn) = conn.take()
            && let Some(tree) = conn.process.as_mut()
        {
            tree.kill_now();
        }
    }

    /// The `_meta` a request to a server of MCP 2026-07-28 carries for its
    /// log messages (the level the sessions want; a server of an earlier
    /// revision was told it with `logging/setLevel`).
    pub fn request_meta(&self, peer: &Peer<RoleClient>) -> Option<rmcp::model::RequestMetaObject> {
        if !modern(peer) {
            return None;
        }
        let level = (*self.log_level.locked())?;
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_log_level(super::logs::rmcp_level(level));
        Some(meta)
    }

    /// Passes the server's log messages at `level` or above to `sink` while
    /// the guard lives; a running server already told a more severe level
    /// is told this one.
    pub fn watch_logs(
        &self,
        level: agentd_protocol::mcp::McpLogLevel,
        sink: super::logs::LogSink,
    ) -> super::logs::LogGuard {
        let guard = self.logs.watch(level, sink);
        let sent = *self.log_level.locked();
        if let Some(sent) = sent
            && level < sent
            && let Some(peer) = self.status().peer.clone()
        {
            *self.log_level.locked() = Some(level);
            if modern(&peer) {
                return guard;
            }
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    set_level(&peer, level).await;
                });
            }
        }
        guard
    }

    fn auth(&self) -> std::sync::MutexGuard<'_, AuthStatus> {
        self.auth.locked()
    }

    /// Its OAuth standing (`None`: it never asked for an authorization).
    pub fn auth_state(&self) -> Option<agentd_protocol::mcp::McpAuthState> {
        self.auth().state
    }

    /// Why it needs a login, when it does.
    pub fn auth_required(&self) -> Option<String> {
        let auth = self.auth();
        (auth.state == Some(agentd_protocol::mcp::McpAuthState::Required)).then(|| auth.message.clone()).flatten()
    }

    /// An authorization manager with its kept tokens, when it has some.
    async fn authorized_manager(
        &self,
        url: &str,
    ) -> Result<Option<rmcp::transport::auth::AuthorizationManager>, String> {
        let Some(credentials) = self.credentials.as_ref().filter(|c| c.has_tokens()) else { return Ok(None) };
        let mut manager = super::auth::manager(url, credentials).await?;
        match manager.initialize_from_store().await {
            Ok(true) => {
                self.auth().state = Some(agentd_protocol::mcp::McpAuthState::Authorized);
                Ok(Some(manager))
            }
            Ok(false) => Ok(None),
            Err(e) => Err(format!("its OAuth tokens could not be used: {e}")),
        }
    }

    /// The server answered 401 (or 403 for more scope): it needs a login;
    /// its sessions are told. The message to fail with.
    fn needs_login(&self, challenge: String) -> String {
        let message = format!(
            "MCP server {} needs an OAuth login: run `agentctl mcp login {}` (or the mcp/login method), then call again",
            self.name, self.name
        );
        {
            let mut auth = self.auth();
            auth.state = Some(agentd_protocol::mcp::McpAuthState::Required);
            auth.challenge = Some(challenge);
            auth.message = Some(message.clone());
        }
        tracing::info!(server = %self.name, "MCP server needs an OAuth login");
        self.notices.tell(&self.name, super::changes::Notice::AuthRequired(message.clone()));
        message
    }

    /// When `error` (of a request to the server) carries an OAuth
    /// challenge, the server needs a login (its sessions are told): the
    /// message to fail with.
    pub fn auth_failure(&self, error: &rmcp::ServiceError) -> Option<String> {
        super::auth::challenge_in(error).map(|challenge| self.needs_login(challenge))
    }

    /// After a login: its tokens are kept; it starts again with them (a
    /// running connection without them ends first).
    async fn authorized(&self) {
        {
            let mut auth = self.auth();
            auth.state = Some(agentd_protocol::mcp::McpAuthState::Authorized);
            auth.message = None;
        }
        if let Some(conn) = self.conn.lock().await.take() {
            Self::end(conn).await;
        }
        let _ = self.peer().await;
    }

    /// `mcp/logout`: forgets its tokens and ends its connection; whether
    /// there were tokens.
    pub async fn logout(&self) -> bool {
        let forgotten = self.credentials.as_ref().is_some_and(super::auth::Credentials::forget);
        *self.auth() = AuthStatus::default();
        if let Some(conn) = self.conn.lock().await.take() {
            Self::end(conn).await;
        }
        self.status().state = Some(McpServerState::Idle);
        forgotten
    }

    /// The sessions told when its lists change or it needs a login.
    pub fn notices(&self) -> &Arc<super::changes::Notices> {
        &self.notices
    }

    /// After the server said its tools changed: reads them again, and if
    /// they differ keeps them (and in the cache file) and tells the
    /// sessions. A failed read keeps the list as it was.
    pub async fn read_tools_again(&self, peer: &Peer<RoleClient>) {
        let listed = match tokio::time::timeout(STARTUP_TIMEOUT, list_tools(peer)).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                return tracing::warn!(server = %self.name, "MCP server's tools could not be read again: {}", e.message);
            }
            Err(_) => return tracing::warn!(server = %self.name, "MCP server's tools could not be read again in time"),
        };
        let tools: Vec<ServerTool> = listed.into_iter().map(|t| check_tool(&self.name, t)).collect();
        {
            let mut status = self.status();
            if status.tools.as_deref() == Some(&tools) {
                return;
            }
            status.tools = Some(Arc::new(tools.clone()));
        }
        tracing::info!(server = %self.name, tools = tools.len(), "MCP server's tools changed");
        // The cache file and the sessions' sets are work for the blocking
        // pool, not the runtime.
        let (file, hash, notices, name) =
            (self.cache_file.clone(), self.hash.clone(), self.notices.clone(), self.name.clone());
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(file) = &file {
                write_cache(file, &hash, &tools);
            }
            notices.tell(&name, super::changes::Notice::List(agentd_protocol::mcp::McpList::Tools));
        })
        .await;
    }

    /// The sessions its elicitations may go to.
    pub fn elicit_targets(&self) -> &Arc<super::elicit::Targets> {
        &self.elicit
    }

    /// Routes the server's progress notifications for `token` to `report`
    /// while the guard lives.
    pub fn watch_progress(&self, token: &impl Serialize, report: ProgressReporter) -> ProgressGuard {
        let key = serde_json::to_string(token).unwrap_or_default();
        self.progress.locked().insert(key.clone(), report);
        ProgressGuard { map: self.progress.clone(), key }
    }
}

/// Stops routing progress for one call when dropped.
pub struct ProgressGuard {
    map: Arc<Mutex<HashMap<String, ProgressReporter>>>,
    key: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.map.locked().remove(&self.key);
    }
}

/// `logging/setLevel`, within a few seconds; whether the server took it.
#[allow(deprecated)]
async fn set_level(peer: &Peer<RoleClient>, level: agentd_protocol::mcp::McpLogLevel) -> bool {
    let params = rmcp::model::SetLevelRequestParams::new(super::logs::rmcp_level(level));
    matches!(tokio::time::timeout(Duration::from_secs(5), peer.set_level(params)).await, Ok(Ok(())))
}

/// Whether agentd speaks MCP 2026-07-28 or later with the server behind
/// `peer` (no handshake; each request carries what it needs).
pub fn modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|i| !i.protocol_version.has_initialize())
}

/// Why a server could not be met.
enum Refused {
    /// It answered, but not as expected (or, over HTTP, refused): a
    /// server of 2025-11-25 may, met the revision's way.
    Protocol(String),
    /// Anything else (it did not start, died, needs a login).
    Other(String),
}

impl Refused {
    fn why(self) -> String {
        match self {
            Refused::Protocol(why) | Refused::Other(why) => why,
        }
    }
}

/// How agentd meets a server: MCP 2026-07-28 first (`server/discover`,
/// then every request carries its version and agentd's capabilities),
/// and a server that answers that it does not know it (or nothing within
/// 10 s) with 2025-11-25's handshake, on the same connection. A server
/// that answers otherwise is met again, on a new one, with that handshake
/// (see `Server::start`).
fn lifecycle() -> rmcp::service::ClientLifecycleMode {
    rmcp::service::ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: Some(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}
