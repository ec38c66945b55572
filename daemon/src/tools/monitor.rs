//! Monitor: a watch that runs in the background and tells the session
//! what it sees, as Claude Code 2.1.332 has it. A `command` runs as a
//! background Bash job would (the same permission rules — `Bash(…)` rules
//! judge it — the same sandbox, TaskStop ends it); each line it writes to
//! standard output is a `monitor/event` of the session, at once, with the
//! text the model is given. A `ws` watch connects to a WebSocket (allowed
//! as WebFetch's hosts are, and held to the session's network lists and
//! `strictAllowlist` as the gate holds commands); each text frame is an
//! event. It ends when the command exits or the socket closes, at its
//! `timeout_ms`, or by TaskStop; its last event says which.
//!
//! Bounds, as 2.1.332's: lines that come within [`BATCH_WINDOW`] of each
//! other are one event; a line is cut at [`MAX_LINE_CHARS`] characters
//! and an event at [`MAX_EVENT_CHARS`]; events spend a bucket of
//! [`BUCKET`] refilled one each [`REFILL`] — what comes meanwhile is
//! counted and said in the next event, and a watch suppressed for
//! [`MAX_SUPPRESSED`] is stopped. Everything is kept whole in the job's
//! output file (readable by Read).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_protocol::turn::EventKind;
use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::process::jobs::{Job, JobEnd, JobKind, Watcher, xml};
use crate::sync::MutexExt;
use crate::tool::context::SessionEvents;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};
use crate::tools::bash::{Bash, BashInput};

/// Its name.
pub const NAME: &str = "Monitor";
/// A watch's limit when it names none, the most it runs (a longer one is
/// cut to it), and the most it may name (2.1.332's).
const DEFAULT_TIMEOUT_MS: u64 = 300_000;
const MAX_TIMEOUT_MS: u64 = 1_800_000;
const MAX_NAMED_TIMEOUT_MS: u64 = 3_600_000;
const MIN_TIMEOUT_MS: u64 = 1_000;
/// Lines that come within this of the first of a batch are one event.
pub const BATCH_WINDOW: Duration = Duration::from_millis(200);
/// The most of one line an event carries, and of one event.
pub const MAX_LINE_CHARS: usize = 500;
pub const MAX_EVENT_CHARS: usize = 3_000;
/// Events a watch may send at once; one more each `REFILL`.
pub const BUCKET: u32 = 10;
pub const REFILL: Duration = Duration::from_secs(2);
/// A watch whose events are suppressed this long is stopped.
pub const MAX_SUPPRESSED: Duration = Duration::from_secs(30);
/// Lines waiting for their batch, at most (more are counted as suppressed).
const MAX_PENDING_BYTES: usize = 1024 * 1024;
/// How long a WebSocket may take to connect and agree.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest WebSocket message read (a larger one ends the watch).
const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The Monitor tool (its WebSocket watches use the daemon's way to the web).
#[derive(Debug, Clone)]
pub struct Monitor(pub Arc<crate::web::Web>);

/// A WebSocket to watch.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WsTarget {
    /// ws:// or wss://.
    pub url: String,
    /// Subprotocols to offer.
    #[serde(default)]
    pub protocols: Option<Vec<String>>,
}

/// Input of Monitor.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorInput {
    /// What is watched, shown with each event.
    pub description: String,
    /// Each stdout line is an event; exit ends the watch.
    #[serde(default)]
    pub command: Option<String>,
    /// A WebSocket: each text frame is an event.
    #[serde(default)]
    pub ws: Option<WsTarget>,
    /// Milliseconds (default 300000, at most 1800000).
    #[serde(default, deserialize_with = "crate::tool::input::opt_u64")]
    pub timeout_ms: Option<u64>,
}

impl MonitorInput {
    fn timeout(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).min(MAX_TIMEOUT_MS)
    }

    /// The command as a background Bash call of it.
    fn as_bash(&self) -> Option<BashInput> {
        let command = self.command.clone()?;
        Some(BashInput {
            command,
            description: Some(self.description.clone()),
            timeout: Some(self.timeout()),
            run_in_background: true,
            on_interrupt: Default::default(),
            dangerously_disable_sandbox: false,
        })
    }

    fn host(&self) -> Option<String> {
        let ws = self.ws.as_ref()?;
        url::Url::parse(ws.url.trim()).ok()?.host_str().map(str::to_owned)
    }
}

/// A watch started.
#[derive(Debug, Clone, Serialize)]
pub struct MonitorStarted {
    /// Its background task (TaskStop takes it).
    #[serde(rename = "taskId")]
    pub task_id: String,
    /// What it watches.
    pub description: String,
    /// Where everything it sees is written (Read it).
    #[serde(rename = "outputFile", skip_serializing_if = "Option::is_none")]
    pub output_file: Option<std::path::PathBuf>,
    /// Its limit.
    #[serde(rename = "timeoutMs")]
    pub timeout_ms: u64,
}

impl Tool for Monitor {
    type Input = MonitorInput;
    type Output = MonitorStarted;

    const NAME: &'static str = NAME;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Shell;
    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::FAIL_CLOSED };

    fn description(&self) -> String {
        "Watches in the background and notifies you of each event: every stdout line of `command` (filter it: \
         `tail -f log | grep --line-buffered ERROR`) or text frame of `ws`. Use it instead of polling or sleep. \
         Ends when the source ends, after timeout_ms, or with TaskStop."
            .to_owned()
    }

    fn should_defer(&self) -> bool {
        true
    }

    fn validate_input(&self, input: &MonitorInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.description.trim().is_empty() {
            return Err(ValidationError::new("description is empty"));
        }
        // A watched command is a Bash command: a session without Bash
        // (disabled, or only the tools named) runs none.
        if input.command.is_some() && !ctx.tools.offers(crate::tools::bash::NAME) {
            return Err(ValidationError::new("this session has no Bash tool, so Monitor cannot run a command"));
        }
        match (&input.command, &input.ws) {
            (Some(c), None) if c.trim().is_empty() => return Err(ValidationError::new("command is empty")),
            (Some(_), None) => {}
            (None, Some(ws)) => {
                let url = url::Url::parse(ws.url.trim()).map_err(|e| ValidationError::new(format!("ws.url: {e}")))?;
                if !matches!(url.scheme(), "ws" | "wss") || url.host_str().is_none() {
                    return Err(ValidationError::new("ws.url must be a ws:// or wss:// URL with a host"));
                }
            }
            _ => return Err(ValidationError::new("give exactly one of command and ws")),
        }
        match input.timeout_ms {
            Some(t) if t < MIN_TIMEOUT_MS => {
                Err(ValidationError::new(format!("timeout_ms must be at least {MIN_TIMEOUT_MS}")))
            }
            Some(t) if t > MAX_NAMED_TIMEOUT_MS => {
                Err(ValidationError::new(format!("timeout_ms must be ≤ {MAX_NAMED_TIMEOUT_MS}")))
            }
            _ => Ok(()),
        }
    }

    /// The command is judged by `Bash(…)` rules, the socket's host by
    /// `WebFetch(domain:…)` rules.
    fn rule_family(&self, input: &MonitorInput) -> Option<&'static str> {
        Some(if input.ws.is_some() { "WebFetch" } else { crate::tools::bash::NAME })
    }

    fn permission_target(&self, input: &MonitorInput) -> crate::permission::PermissionTarget {
        match (&input.command, input.host()) {
            (Some(c), _) => crate::permission::PermissionTarget::Command(c.clone()),
            (None, Some(host)) => crate::permission::PermissionTarget::Domain(host),
            (None, None) => crate::permission::PermissionTarget::None,
        }
    }

    fn shell_facts(&self, input: &MonitorInput, ctx: &ToolContext) -> Option<crate::permission::policy::BashFacts> {
        Bash(self.0.clone()).shell_facts(&input.as_bash()?, ctx)
    }

    fn check_permissions(&self, input: &MonitorInput, ctx: &ToolContext) -> Decision {
        match input.as_bash() {
            // As a background command: asked unless a rule allows it.
            Some(bash) => Bash(self.0.clone()).check_permissions(&bash, ctx),
            None => {
                let host = input.host().unwrap_or_default();
                Decision::Ask {
                    reason: format!("watch a WebSocket on {host}"),
                    suggestion: Some(format!("WebFetch(domain:{host})")),
                }
            }
        }
    }

    fn is_read_only(&self, input: &MonitorInput) -> bool {
        input.ws.is_some()
    }

    async fn call(
        &self,
        input: MonitorInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<MonitorStarted>, ToolError> {
        let events = ctx
            .services
            .get::<SessionEvents>()
            .cloned()
            .ok_or_else(|| ToolError::new("this session cannot receive a watch's events"))?;
        let watch = Watch::new(events, input.description.trim().to_owned(), input.timeout());
        Watch::send_batches(&watch);
        let job = match input.as_bash() {
            Some(bash) => Bash(self.0.clone()).start_job(&bash, &ctx, Some(watch.clone())).await?,
            None => self.start_ws(&input, &ctx, watch.clone()).await?,
        };
        watch.started(&job);
        Ok(ToolOutput::new(MonitorStarted {
            task_id: job.id.clone(),
            description: input.description.trim().to_owned(),
            output_file: job.output_file.clone(),
            timeout_ms: input.timeout(),
        }))
    }

    fn result_content(&self, out: &MonitorStarted) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(started_text(out))]
    }

    fn structured(&self, out: &MonitorStarted) -> Option<serde_json::Value> {
        serde_json::to_value(out).ok()
    }

    fn render_use(&self, input: &MonitorInput) -> String {
        match (&input.command, &input.ws) {
            (Some(c), _) => format!("{}: {}", input.description, c.lines().next().unwrap_or_default()),
            (None, Some(ws)) => format!("{}: {}", input.description, ws.url),
            _ => input.description.clone(),
        }
    }

    fn render_result(&self, out: &MonitorStarted) -> String {
        format!("watching as {}", out.task_id)
    }
}

/// What the model reads when a watch starts (2.1.332's words, then where
/// its output goes).
fn started_text(out: &MonitorStarted) -> String {
    let file = out.output_file.as_ref().map(|f| format!(" Everything it sees is also written to: {}.", f.display()));
    format!(
        "Monitor started (task {id}, expires in {expires} unless the source ends first; you get one notice at \
         expiry — re-arm if you still need the watch). You will be notified on each event. Keep working — do not \
         poll or sleep. Events may arrive while you are waiting for the user — an event is not their reply.{file}",
        id = out.task_id,
        expires = duration(Duration::from_millis(out.timeout_ms)),
        file = file.unwrap_or_default()
    )
}

impl Monitor {
    /// Connects to the WebSocket (checked as the gate checks a command's
    /// connection) and runs the watch as a job of the session.
    async fn start_ws(
        &self,
        input: &MonitorInput,
        ctx: &ToolContext,
        watch: Arc<Watch>,
    ) -> Result<Arc<Job>, ToolError> {
        let ws = input.ws.clone().ok_or_else(|| ToolError::new("no ws"))?;
        let url = url::Url::parse(ws.url.trim()).map_err(|e| ToolError::new(format!("ws.url: {e}")))?;
        let host = url.host_str().map(str::to_owned).unwrap_or_default();
        let canonical = crate::permission::rules::canonical_host(&host)
            .ok_or_else(|| ToolError::new(format!("{host:?} is not a host name")))?;
        let bypass = crate::tools::plan_mode::current_mode(ctx) == agentd_protocol::session::PermissionMode::Bypass;
        let (policy, _) = crate::sandbox::gate::GatePolicy::from_options(&ctx.info.sandbox, bypass);
        // Admission asked the user unless a rule allowed it: what only
        // needed a question is allowed here; the session's lists
        // (denied_domains, a closed allowed_domains), deny rules and
        // strictAllowlist still refuse, as the gate decides.
        if let crate::sandbox::gate::Verdict::Deny(why) =
            crate::sandbox::gate::decide(&canonical, &policy, &ctx.rules, Some("the user's answer".into()))
        {
            return Err(ToolError::new(format!("refused: {why}")));
        }
        let port = url.port_or_known_default().unwrap_or(if url.scheme() == "wss" { 443 } else { 80 });
        // As WebFetch: the session's web setting, not the sandbox's.
        let allow_private = ctx.info.web.allow_private_network;
        let addrs = self
            .0
            .resolve_checked(&canonical, port, allow_private, "web.allow_private_network")
            .await
            .map_err(ToolError::new)?;
        let socket = tokio::time::timeout(CONNECT_TIMEOUT, connect(&url, &canonical, &addrs, ws.protocols.as_deref()))
            .await
            .map_err(|_| ToolError::new(format!("{} did not answer within {} s", ws.url, CONNECT_TIMEOUT.as_secs())))?
            .map_err(ToolError::new)?;
        let _ = std::fs::create_dir_all(&*ctx.output_dir);
        let file = ctx.output_dir.join(format!("monitor-{}.log", uuid::Uuid::new_v4().simple()));
        let limit = Duration::from_millis(input.timeout());
        let jobs = ctx.need::<crate::process::jobs::JobTable>()?;
        jobs.start_work_as(&ws.url, JobKind::Monitor, Some(&file), None, move |token, job| {
            run_ws(socket, job, watch, token, limit)
        })
        .map_err(|e| ToolError::new(e.to_string()))
    }
}

/// A WebSocket agreed on, over a plain or TLS connection.
type Socket = tokio_tungstenite::WebSocketStream<Box<dyn Io>>;

/// A connection's stream.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

async fn connect(
    url: &url::Url,
    host: &str,
    addrs: &[std::net::SocketAddr],
    protocols: Option<&[String]>,
) -> Result<Socket, String> {
    let tcp = tokio::net::TcpStream::connect(addrs).await.map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let stream: Box<dyn Io> = if url.scheme() == "wss" {
        crate::web::install_tls_provider();
        use rustls_platform_verifier::ConfigVerifierExt;
        let config = rustls::ClientConfig::with_platform_verifier().map_err(|e| format!("TLS: {e}"))?;
        let name =
            rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| format!("TLS name {host}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {host}: {e}"))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.as_str().into_client_request().map_err(|e| format!("{url}: {e}"))?;
    if let Some(protocols) = protocols.filter(|p| !p.is_empty()) {
        let value = protocols.join(", ");
        let value = value.parse().map_err(|_| format!("protocols {value:?} is not a header value"))?;
        request.headers_mut().insert("Sec-WebSocket-Protocol", value);
    }
    let mut config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
    config.max_message_size = Some(MAX_MESSAGE_BYTES);
    config.max_frame_size = Some(MAX_MESSAGE_BYTES);
    let (socket, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| format!("WebSocket handshake with {url}: {e}"))?;
    Ok(socket)
}

/// Reads the socket until it closes, the limit, or the job's end.
async fn run_ws(
    mut socket: Socket,
    job: Arc<Job>,
    watch: Arc<Watch>,
    token: tokio_util::sync::CancellationToken,
    limit: Duration,
) -> Result<String, String> {
    use tokio_tungstenite::tungstenite::Message;
    // However the job ends (TaskStop drops this future), the watcher hears.
    let mut end = EndOnDrop { watch: watch.clone(), job: job.id.clone(), how: JobEnd::Stopped };
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            message = socket.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    job.append(format!("{}\n", text.as_str()).as_bytes());
                    watch.line(&job.id, text.as_str());
                }
                Some(Ok(Message::Binary(bytes))) => {
                    let said = format!("[binary frame, {} bytes]", bytes.len());
                    job.append(format!("{said}\n").as_bytes());
                    watch.line(&job.id, &said);
                }
                Some(Ok(Message::Close(frame))) => {
                    let said = match frame {
                        Some(f) => format!("[WebSocket closed: {} {}]", u16::from(f.code), f.reason),
                        None => "[WebSocket closed]".to_owned(),
                    };
                    watch.line(&job.id, said.trim_end());
                    end.how = JobEnd::Exited(0);
                    return Ok(format!("{said}\n"));
                }
                None => {
                    end.how = JobEnd::Exited(0);
                    return Ok("[WebSocket closed]\n".into());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    let said = format!("[WebSocket error: {e}]");
                    watch.line(&job.id, &said);
                    end.how = JobEnd::Exited(1);
                    return Err(format!("{said}\n"));
                }
            },
            _ = &mut deadline => {
                end.how = JobEnd::TimedOut;
                // A peer that never reads must not hold the watch open.
                let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(None)).await;
                return Ok(format!("[stopped: the watch ran out of its timeout of {} ms]\n", limit.as_millis()));
            }
            _ = token.cancelled() => {
                let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(None)).await;
                return Err("[stopped]\n".into());
            }
        }
    }
}

/// Tells the watch how its job ended, when the job's future goes.
struct EndOnDrop {
    watch: Arc<Watch>,
    job: String,
    how: JobEnd,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.watch.ended(&self.job, self.how);
    }
}

/// One watch's side of the session: its lines batched, bounded and sent
/// as events.
struct Watch {
    events: SessionEvents,
    description: String,
    timeout_ms: u64,
    started: Instant,
    job: std::sync::OnceLock<Arc<Job>>,
    state: Mutex<WatchState>,
    wake: Arc<tokio::sync::Notify>,
}

/// What a watch holds between its lines and its events.
#[derive(Default)]
struct WatchState {
    task: String,
    /// Lines waiting for their batch, and their size.
    pending: Vec<String>,
    pending_bytes: usize,
    /// The first of them came then.
    since: Option<Instant>,
    /// Events that may go now, and when the bucket was last filled.
    tokens: u32,
    filled: Option<Instant>,
    /// Events left out since the last one sent; since when events keep
    /// being left out (a delivery in a flood does not end it), and the last.
    suppressed: u64,
    suppressed_since: Option<Instant>,
    last_suppressed: Option<Instant>,
    delivered: u64,
    /// The last notice is out: nothing more is sent.
    done: bool,
}

impl Watch {
    fn new(events: SessionEvents, description: String, timeout_ms: u64) -> Arc<Watch> {
        Arc::new(Watch {
            events,
            description,
            timeout_ms,
            started: Instant::now(),
            job: std::sync::OnceLock::new(),
            state: Mutex::new(WatchState { tokens: BUCKET, ..WatchState::default() }),
            wake: Arc::new(tokio::sync::Notify::new()),
        })
    }

    /// Sends each batch once its window is over, until the watch ends.
    fn send_batches(watch: &Arc<Watch>) {
        let weak = Arc::downgrade(watch);
        let wake = watch.wake.clone();
        tokio::spawn(async move {
            loop {
                let Some(watch) = weak.upgrade() else { return };
                let due = {
                    let s = watch.lock();
                    if s.done {
                        return;
                    }
                    s.since.map(|t| t + BATCH_WINDOW)
                };
                match due {
                    Some(due) => {
                        drop(watch);
                        tokio::time::sleep_until(due.into()).await;
                        if let Some(watch) = weak.upgrade() {
                            watch.flush(Instant::now());
                        }
                    }
                    None => {
                        let notified = wake.notified();
                        drop(watch);
                        // Woken by a line, or looked at again now and then
                        // (the watch may be gone).
                        let _ = tokio::time::timeout(Duration::from_secs(5), notified).await;
                    }
                }
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state.locked()
    }

    /// The job is known: it can be stopped when its output is too much.
    fn started(&self, job: &Arc<Job>) {
        let _ = self.job.set(job.clone());
    }

    /// Sends the pending batch, if the rate lets it at `now`; stops a
    /// watch held back for too long.
    fn flush(&self, now: Instant) {
        let mut s = self.lock();
        if s.done || s.pending.is_empty() {
            return;
        }
        let filled = *s.filled.get_or_insert(now);
        let refills = (now.duration_since(filled).as_millis() / REFILL.as_millis()) as u32;
        if refills > 0 {
            s.tokens = (s.tokens + refills).min(BUCKET);
            s.filled = Some(filled + REFILL * refills);
        }
        let lines = std::mem::take(&mut s.pending);
        s.pending_bytes = 0;
        s.since = None;
        if s.tokens == 0 {
            s.suppressed += 1;
            s.last_suppressed = Some(now);
            let since = *s.suppressed_since.get_or_insert(now);
            if now.duration_since(since) > MAX_SUPPRESSED {
                let text = format!(
                    "[Monitor stopped — too much output ({} events suppressed over {}s). Restart with a more \
                     selective source.]",
                    s.suppressed,
                    now.duration_since(since).as_secs()
                );
                s.done = true;
                let task = s.task.clone();
                let dropped = std::mem::take(&mut s.suppressed);
                self.send(&task, &text, dropped, Some("stopped"));
                drop(s);
                if let Some(job) = self.job.get() {
                    job.stop();
                }
            }
            return;
        }
        s.tokens -= 1;
        s.delivered += 1;
        let dropped = std::mem::take(&mut s.suppressed);
        // The flood is over only once nothing was left out for a while.
        if s.last_suppressed.is_none_or(|t| now.duration_since(t) > REFILL * 2) {
            s.suppressed_since = None;
        }
        let mut body = String::new();
        if dropped > 0 {
            body.push_str(&format!(
                "[{dropped} events suppressed — output rate too high. Consider using TaskStop to restart this \
                 monitor with a more selective filter.]\n"
            ));
        }
        body.push_str(&batch(&lines));
        let task = s.task.clone();
        self.send(&task, &body, dropped, None);
    }

    /// A task's last notice, as 2.1.332 writes it when its source ended.
    fn terminal(&self, task: &str, status: &str, summary: &str) -> String {
        let file = self.job.get().and_then(|j| j.output_file.as_ref());
        let file = file.map(|f| format!("<output-file>{}</output-file>\n", xml(&f.display().to_string())));
        format!(
            "<task-notification>\n<task-id>{}</task-id>\n{}<status>{status}</status>\n<summary>{}</summary>\n</task-notification>",
            xml(task),
            file.unwrap_or_default(),
            xml(summary)
        )
    }

    fn send(&self, task: &str, body: &str, dropped: u64, ended: Option<&str>) {
        (self.events)(EventKind::MonitorEvent {
            task_id: task.to_owned(),
            description: self.description.clone(),
            text: notification(task, &self.description, body),
            dropped,
            ended: ended.map(str::to_owned),
        });
    }
}

impl Watcher for Watch {
    fn line(&self, job: &str, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let mut s = self.lock();
        if s.done {
            return;
        }
        if s.task.is_empty() {
            s.task = job.to_owned();
        }
        if s.pending_bytes + line.len() > MAX_PENDING_BYTES {
            return;
        }
        s.pending_bytes += line.len();
        s.pending.push(cut(line));
        if s.since.is_none() {
            s.since = Some(Instant::now());
            self.wake.notify_one();
        }
    }

    fn ended(&self, job: &str, how: JobEnd) {
        // What waits for its window goes first, whatever the rate.
        let mut s = self.lock();
        if s.done {
            return;
        }
        s.task = job.to_owned();
        let last = std::mem::take(&mut s.pending);
        if !last.is_empty() {
            s.delivered += 1;
        }
        s.done = true;
        let delivered = s.delivered;
        let dropped = std::mem::take(&mut s.suppressed);
        drop(s);
        if !last.is_empty() {
            self.send(job, &batch(&last), dropped, None);
        }
        let elapsed = self.started.elapsed();
        tracing::debug!(task = job, ?elapsed, delivered, "a watch ended");
        let text = match how {
            // An expiry is one more event; an end is the task's last notice.
            JobEnd::TimedOut => notification(job, &self.description, &expired(delivered, self.timeout_ms)),
            JobEnd::Exited(code) => {
                let status = if code == 0 { "completed" } else { "failed" };
                self.terminal(job, status, &ended_text(&self.description, code, delivered))
            }
            JobEnd::Stopped => self.terminal(job, "killed", &format!("Monitor \"{}\" stopped", self.description)),
        };
        let name = match how {
            JobEnd::TimedOut => "timed_out",
            JobEnd::Exited(_) => "exited",
            JobEnd::Stopped => "stopped",
        };
        (self.events)(EventKind::MonitorEvent {
            task_id: job.to_owned(),
            description: self.description.clone(),
            text,
            dropped: 0,
            ended: Some(name.to_owned()),
        });
        self.wake.notify_one();
    }
}

/// A line as an event carries it: at most [`MAX_LINE_CHARS`] characters.
fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…(truncated)", &line[..at]),
        None => line.to_owned(),
    }
}

/// A batch's lines as one event's body: at most [`MAX_EVENT_CHARS`].
fn batch(lines: &[String]) -> String {
    let joined = lines.join("\n");
    match joined.char_indices().nth(MAX_EVENT_CHARS) {
        Some((at, _)) => format!("{}\n...(truncated)", &joined[..at]),
        None => joined,
    }
}

/// What the model is given for one event of the watch `task` (2.1.332's
/// `task-notification`; the harness adds its own system-reminder).
fn notification(task: &str, description: &str, body: &str) -> String {
    format!(
        "<task-notification>\n<task-id>{}</task-id>\n<summary>Monitor event: \"{}\"</summary>\n<event>{}</event>\n</task-notification>",
        xml(task),
        xml(description),
        xml(body)
    )
}

/// The notice of a watch that reached its time.
fn expired(delivered: u64, timeout_ms: u64) -> String {
    let after = duration(Duration::from_millis(timeout_ms));
    match delivered {
        0 => format!(
            "[Monitor expired after {after} with no events delivered. Re-arm it if you still need the watch — and \
             widen the filter if silence was unexpected.]"
        ),
        1 => format!("[Monitor expired after {after} with 1 event delivered. Re-arm it if you still need the watch.]"),
        n => {
            format!("[Monitor expired after {after} with {n} events delivered. Re-arm it if you still need the watch.]")
        }
    }
}

/// The notice of a watch whose source ended.
fn ended_text(description: &str, code: i32, delivered: u64) -> String {
    match (code, delivered) {
        (0, 0) => format!("Monitor \"{description}\" ended without producing output (exit 0)"),
        (0, _) => format!("Monitor \"{description}\" stream ended"),
        (code, _) => format!("Monitor \"{description}\" script failed (exit {code})"),
    }
}

/// `5m`, `1h`, `1m 30s`, `45s` (as 2.1.332 writes a duration).
fn duration(d: Duration) -> String {
    let s = (d.as_millis() as f64 / 1000.0).round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let parts: Vec<String> = [(h, "h"), (m, "m"), (s, "s")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if parts.is_empty() { "0s".to_owned() } else { parts.join(" ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_and_a_long_batch_are_cut_on_a_character() {
        let line = "é".repeat(MAX_LINE_CHARS + 5);
        assert_eq!(cut(&line), format!("{}…(truncated)", "é".repeat(MAX_LINE_CHARS)));
        assert_eq!(cut("short"), "short");
        let lines: Vec<String> = (0..10).map(|_| "x".repeat(400)).collect();
        let b = batch(&lines);
        assert!(b.ends_with("\n...(truncated)") && b.chars().count() == MAX_EVENT_CHARS + 15, "{}", b.len());
    }

    #[test]
    fn an_event_is_a_task_notification_with_its_text_escaped() {
        let n = notification("job_3", "errors in <log>", "ERROR a & b\nERROR c");
        assert_eq!(
            n,
            "<task-notification>\n<task-id>job_3</task-id>\n<summary>Monitor event: \"errors in &lt;log&gt;\"</summary>\n<event>ERROR a &amp; b\nERROR c</event>\n</task-notification>"
        );
    }

    #[test]
    fn end_texts_say_how_and_how_much() {
        assert!(expired(0, 300_000).starts_with("[Monitor expired after 5m with no events delivered."));
        assert!(expired(3, 5_400_000).contains("after 1h 30m with 3 events delivered"));
        assert_eq!(ended_text("d", 0, 0), "Monitor \"d\" ended without producing output (exit 0)");
        assert_eq!(ended_text("d", 1, 4), "Monitor \"d\" script failed (exit 1)");
        assert_eq!(duration(Duration::from_millis(1500)), "2s");
    }

    #[test]
    fn lines_are_batched_and_the_rate_suppresses_says_how_many_then_stops() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let into = sent.clone();
        let events: SessionEvents = Arc::new(move |e| into.lock().unwrap().push(e));
        let watch = Watch::new(events, "d".into(), 300_000);
        let texts = || -> Vec<(String, u64)> {
            sent.lock()
                .unwrap()
                .iter()
                .map(|e| match e {
                    EventKind::MonitorEvent { text, dropped, .. } => (text.clone(), *dropped),
                    _ => unreachable!(),
                })
                .collect()
        };
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Lines of one window: one event (blank lines dropped).
        for l in ["a", "  ", "b", "c"] {
            watch.line("job_1", l);
        }
        watch.flush(at(200));
        assert_eq!(texts().len(), 1);
        assert!(texts()[0].0.contains("<event>a\nb\nc</event>"), "{:?}", texts());
        // Nine more go (the bucket holds ten), the next two are held.
        for i in 0..11 {
            watch.line("job_1", &format!("l{i}"));
            watch.flush(at(400 + i * 10));
        }
        assert_eq!(texts().len(), 10, "{:?}", texts());
        // A refill later, the next event says how many were left out.
        watch.line("job_1", "after");
        watch.flush(at(2_300));
        let last = texts().last().cloned().unwrap();
        assert!(last.0.contains("[2 events suppressed — output rate too high.") && last.1 == 2, "{last:?}");
        // Held back for more than 30 s (one event every 2 s gets through):
        // stopped, with a last notice.
        for i in 0..200 {
            watch.line("job_1", "more");
            watch.flush(at(2_400 + i * 200));
        }
        let last = texts().last().cloned().unwrap();
        assert!(last.0.contains("[Monitor stopped — too much output ("), "{last:?}");
        let n = texts().len();
        watch.ended("job_1", JobEnd::Stopped);
        assert_eq!(texts().len(), n, "one last notice only");
    }

    #[test]
    fn the_end_sends_what_waits_then_says_how_it_ended() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let into = sent.clone();
        let events: SessionEvents = Arc::new(move |e| into.lock().unwrap().push(e));
        let watch = Watch::new(events, "d".into(), 300_000);
        watch.line("job_2", "last words");
        watch.ended("job_2", JobEnd::Exited(3));
        let sent = sent.lock().unwrap();
        let texts: Vec<String> = sent
            .iter()
            .map(|e| match e {
                EventKind::MonitorEvent { text, .. } => text.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert!(texts[0].contains("<event>last words</event>"), "{texts:?}");
        assert!(
            texts[1].contains("<status>failed</status>\n<summary>Monitor \"d\" script failed (exit 3)</summary>"),
            "{texts:?}"
        );
    }
}
