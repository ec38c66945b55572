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
//! Bounds: a line (or frame) is cut at [`MAX_LINE_CHARS`] characters in its
//! event; at most [`PER_SECOND`] events a second after a burst of
//! [`BURST`] — what is over is counted in the next event's `dropped` and
//! kept whole in the job's output file (readable by Read).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_protocol::turn::EventKind;
use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::process::jobs::{Job, JobEnd, JobKind, Watcher};
use crate::tool::context::SessionEvents;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};
use crate::tools::bash::{Bash, BashInput};

/// Its name.
pub const NAME: &str = "Monitor";
/// A watch's limit when it names none, and the most it may name (2.1.332's).
const DEFAULT_TIMEOUT_MS: u64 = 300_000;
const MAX_TIMEOUT_MS: u64 = 1_800_000;
/// The most of one line an event carries.
pub const MAX_LINE_CHARS: usize = 2_000;
/// Events a watch may send at once, then each second.
pub const BURST: f64 = 50.0;
pub const PER_SECOND: f64 = 10.0;
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
    /// The `ws://` or `wss://` URL.
    pub url: String,
    /// Subprotocols to offer (`Sec-WebSocket-Protocol`).
    #[serde(default)]
    pub protocols: Option<Vec<String>>,
}

/// Input of Monitor.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MonitorInput {
    /// What is watched and why, in a few words (shown with each event).
    pub description: String,
    /// A shell command whose every line of standard output is an event
    /// (e.g. `tail -f build.log | grep --line-buffered ERROR`). Filter it
    /// to the lines that matter; use `--line-buffered` with grep. Standard
    /// error is not delivered (it is in the output file).
    #[serde(default)]
    pub command: Option<String>,
    /// A WebSocket whose every text frame is an event, instead of a command.
    #[serde(default)]
    pub ws: Option<WsTarget>,
    /// How long the watch runs, in milliseconds (default 300000, at most
    /// 1800000).
    #[serde(default, deserialize_with = "crate::tool::input::opt_u64")]
    pub timeout_ms: Option<u64>,
}

impl MonitorInput {
    fn timeout(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
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
        format!(
            "Starts a watch in the background and returns at once: a shell command whose every line of standard \
             output becomes a notification to you (filter it: `tail -f log | grep --line-buffered ERROR`), or a \
             WebSocket (`ws`) whose every text frame does. Use it to be told when something happens (a build \
             fails, a server logs an error, a job finishes) instead of polling or sleeping. It ends when the \
             command exits or the socket closes, after timeout_ms (default {DEFAULT_TIMEOUT_MS}, at most \
             {MAX_TIMEOUT_MS}), or with TaskStop on its task id. Lines over {MAX_LINE_CHARS} characters are cut \
             and at most {PER_SECOND} notifications a second are sent; everything is kept in the output file the \
             result names."
        )
    }

    fn should_defer(&self) -> bool {
        true
    }

    fn validate_input(&self, input: &MonitorInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.description.trim().is_empty() {
            return Err(ValidationError::new("description is empty"));
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
            Some(0) => Err(ValidationError::new("timeout_ms must be at least 1")),
            Some(t) if t > MAX_TIMEOUT_MS => {
                Err(ValidationError::new(format!("timeout_ms must be at most {MAX_TIMEOUT_MS}")))
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
        let watch = Arc::new(Watch::new(events, input.description.trim().to_owned()));
        let job = match input.as_bash() {
            Some(bash) => Bash(self.0.clone()).start_job(&bash, &ctx, Some(watch.clone())).await?,
            None => self.start_ws(&input, &ctx, watch).await?,
        };
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

/// What the model reads when a watch starts.
fn started_text(out: &MonitorStarted) -> String {
    let file = out.output_file.as_ref().map(|f| format!(" Everything it sees is also written to: {}.", f.display()));
    format!(
        "Monitor started (task {id}, timeout {ms}ms). You will be notified on each event. Keep working — do not \
         poll or sleep. Events may arrive while you are waiting for the user — an event is not their reply.{file} \
         Stop it with TaskStop (task_id \"{id}\").",
        id = out.task_id,
        ms = out.timeout_ms,
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
        // needed a question is allowed here; the session's lists, deny
        // rules and strictAllowlist still refuse.
        if let crate::sandbox::gate::Verdict::Deny(why) =
            crate::sandbox::gate::decide(&canonical, &policy, &ctx.rules, Some("the user's answer".into()))
        {
            return Err(ToolError::new(format!("refused: {why}")));
        }
        if let Some(why) = crate::sandbox::gate::session_refuses(&host, &ctx.info.sandbox) {
            return Err(ToolError::new(format!("refused: {why}")));
        }
        let port = url.port_or_known_default().unwrap_or(if url.scheme() == "wss" { 443 } else { 80 });
        let allow_private = ctx.info.web.allow_private_network || policy.allow_private;
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
        jobs.start_work_as(&ws.url, JobKind::Monitor, Some(&file), move |token, job| {
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
                Some(Ok(Message::Close(_))) | None => {
                    end.how = JobEnd::Exited(0);
                    return Ok("[the WebSocket closed]\n".into());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    end.how = JobEnd::Exited(1);
                    return Err(format!("[the WebSocket failed: {e}]\n"));
                }
            },
            _ = &mut deadline => {
                end.how = JobEnd::TimedOut;
                let _ = socket.close(None).await;
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

/// One watch's side of the session: its events, bounded.
struct Watch {
    events: SessionEvents,
    description: String,
    started: Instant,
    delivered: AtomicU64,
    rate: Mutex<Bucket>,
}

/// The rate's bucket: events that may go now, and lines left out.
struct Bucket {
    tokens: f64,
    at: Instant,
    dropped: u64,
}

impl Watch {
    fn new(events: SessionEvents, description: String) -> Watch {
        let now = Instant::now();
        Watch {
            events,
            description,
            started: now,
            delivered: AtomicU64::new(0),
            rate: Mutex::new(Bucket { tokens: BURST, at: now, dropped: 0 }),
        }
    }

    /// Whether one more event may go now; `Some(dropped)` if so (the
    /// lines left out before it).
    fn take(&self) -> Option<u64> {
        let mut b = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * PER_SECOND).min(BURST);
        b.at = now;
        if b.tokens < 1.0 {
            b.dropped += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.dropped))
    }

    fn send(&self, job: &str, text: String, dropped: u64, ended: Option<&str>) {
        (self.events)(EventKind::MonitorEvent {
            task_id: job.to_owned(),
            description: self.description.clone(),
            text,
            dropped,
            ended: ended.map(str::to_owned),
        });
    }
}

impl Watcher for Watch {
    fn line(&self, job: &str, line: &str) {
        let Some(dropped) = self.take() else { return };
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.send(job, cut(line), dropped, None);
    }

    fn ended(&self, job: &str, how: JobEnd) {
        let dropped = std::mem::take(&mut self.rate.lock().unwrap_or_else(|e| e.into_inner()).dropped);
        let n = self.delivered.load(Ordering::Relaxed);
        let (text, name) = end_text(how, n, self.started.elapsed());
        self.send(job, text, dropped, Some(name));
    }
}

/// The line as an event carries it: at most [`MAX_LINE_CHARS`] characters.
fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}… [{} more characters]", &line[..at], line[at..].chars().count()),
        None => line.to_owned(),
    }
}

/// What the model reads when a watch ends, and the end's name.
fn end_text(how: JobEnd, delivered: u64, after: Duration) -> (String, &'static str) {
    let events = match delivered {
        0 => "no events delivered".to_owned(),
        1 => "1 event delivered".to_owned(),
        n => format!("{n} events delivered"),
    };
    match how {
        JobEnd::TimedOut => (
            format!(
                "[Monitor expired after {} with {events}. Re-arm it if you still need the watch{}.]",
                duration(after),
                if delivered == 0 { " — and widen the filter if silence was unexpected" } else { "" }
            ),
            "timed_out",
        ),
        JobEnd::Exited(code) => (format!("[Monitor ended: its command exited with code {code}, {events}.]"), "exited"),
        JobEnd::Stopped => (format!("[Monitor stopped, {events}.]"), "stopped"),
    }
}

/// `5m`, `1m 30s`, `45s`.
fn duration(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m {s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_cut_on_a_character() {
        let line = "é".repeat(MAX_LINE_CHARS + 5);
        let cut = cut(&line);
        assert!(cut.starts_with(&"é".repeat(MAX_LINE_CHARS)));
        assert!(cut.ends_with("… [5 more characters]"), "{cut}");
        assert_eq!(super::cut("short"), "short");
    }

    #[test]
    fn the_rate_lets_a_burst_through_then_counts_what_is_left_out() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let into = sent.clone();
        let events: SessionEvents = Arc::new(move |e| into.lock().unwrap().push(e));
        let watch = Watch::new(events, "d".into());
        for i in 0..(BURST as usize + 30) {
            watch.line("job_1", &format!("line {i}"));
        }
        watch.ended("job_1", JobEnd::Exited(0));
        let sent = sent.lock().unwrap();
        // The burst, maybe one refilled, then the end with the rest counted.
        assert!(sent.len() <= BURST as usize + 2, "{}", sent.len());
        let EventKind::MonitorEvent { dropped, ended, text, .. } = sent.last().unwrap() else { panic!() };
        assert_eq!(ended.as_deref(), Some("exited"));
        assert!(*dropped >= 28, "{dropped}");
        assert!(text.contains("exited with code 0"), "{text}");
    }

    #[test]
    fn end_texts_say_how_and_how_much() {
        let (t, n) = end_text(JobEnd::TimedOut, 0, Duration::from_secs(300));
        assert_eq!(n, "timed_out");
        assert!(t.starts_with("[Monitor expired after 5m with no events delivered."), "{t}");
        let (t, _) = end_text(JobEnd::TimedOut, 3, Duration::from_secs(90));
        assert!(t.contains("after 1m 30s with 3 events delivered"), "{t}");
        assert_eq!(end_text(JobEnd::Stopped, 1, Duration::ZERO).1, "stopped");
    }
}
