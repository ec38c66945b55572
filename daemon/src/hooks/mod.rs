//! Hooks: the user's own gate, as Claude Code runs it. Command hooks from
//! the settings files and `session/create` (see [`config`]), and hooks a
//! client registers over the socket (`hooks/register`), asked with a
//! `hook/request` event and answered with `hook/respond`. Every hook of a
//! moment runs at once; their answers combine as [`output::Combined`]
//! says (deny over ask over allow).
//!
//! Where they sit in a call's life is the executor's: `PreToolUse` after
//! the input is valid and before the permission decision, `PermissionRequest`
//! before the client is asked, `PostToolUse`/`PostToolUseFailure` after the
//! result.

pub mod config;
pub mod output;
mod run;
mod watch;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_protocol::hooks::{HookEvent, HookInfo};
use agentd_protocol::turn::EventKind;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::events::EventLog;
use crate::sync::MutexExt;

pub use config::HookSet;
pub use output::{Combined, Decision};

/// A SessionEnd hook's timeout when it names none (Claude Code's).
const SESSION_END_TIMEOUT: Duration = Duration::from_millis(1500);

/// Most socket hooks a session has (each is sent every matching call's
/// input).
const MAX_SOCKET_HOOKS: usize = 16;

/// A hook a client registered.
#[derive(Clone)]
struct SocketHook {
    id: String,
    event: HookEvent,
    matcher: config::Matcher,
    timeout: Duration,
    /// `on_failure: "block"`: no answer, or its client gone, blocks.
    fail_closed: bool,
    conn: Option<usize>,
}

/// An asked socket hook, until its answer.
struct Pending {
    conn: Option<usize>,
    answer: oneshot::Sender<Answer>,
}

enum Answer {
    Output(Value),
    /// The client that registered the hook left.
    Gone,
}

/// Why `hooks/register` or `hook/respond` was refused.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// A field has a value that cannot be used.
    #[error("{why}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        why: String,
    },
    /// No such hook or request.
    #[error("{0}")]
    Unknown(String),
}

/// Which call (or none: a session moment) a moment is about.
#[derive(Clone, Default)]
pub struct About {
    /// The call's turn.
    pub turn_id: Option<String>,
    /// The call.
    pub tool_use_id: Option<String>,
    /// The tool.
    pub tool_name: Option<String>,
}

/// A session's hooks and the socket hooks' open requests.
pub struct Hooks {
    set: HookSet,
    socket: Mutex<Vec<SocketHook>>,
    pending: Mutex<HashMap<String, Pending>>,
    events: Arc<EventLog>,
    session_id: String,
    cwd: PathBuf,
    ids: std::sync::atomic::AtomicU64,
    /// The session closed: hooks still run (SessionEnd) but report nothing
    /// (its event stream has ended) and ask no client.
    closed: std::sync::atomic::AtomicBool,
    /// `once` hooks that have run.
    ran_once: Mutex<std::collections::HashSet<String>>,
    /// Where `async` hooks run, and what ends them.
    tracker: tokio_util::task::TaskTracker,
    background: CancellationToken,
    me: std::sync::Weak<Hooks>,
    /// A child session's parent's hooks: its clients' socket hooks guard
    /// the child's calls too (they are asked on the parent's stream).
    parent: std::sync::OnceLock<Arc<Hooks>>,
    /// Where command hooks' processes are recorded.
    ledger: Arc<crate::process::Ledger>,
    /// What calls `mcp_tool` hooks' tools: the session's MCP servers.
    mcp: std::sync::OnceLock<Arc<dyn McpCaller>>,
}

/// What runs an `mcp_tool` hook: a tool of one of the session's MCP
/// servers (set by the session's MCP part once it exists).
pub trait McpCaller: Send + Sync {
    /// Calls `tool` of the server `server` with `arguments` within
    /// `timeout`: its text (text blocks joined by newlines) and whether
    /// the tool said it failed; `Err` when it could not be called.
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: serde_json::Map<String, Value>,
        timeout: std::time::Duration,
        cancel: &'a CancellationToken,
    ) -> futures_util::future::BoxFuture<'a, Result<(String, bool), String>>;
}

/// Runs a command hook in `cwd` (also its project directory) and reads
/// what it said.
async fn command(
    event: HookEvent,
    hook: &config::CommandHook,
    input: &[u8],
    cwd: &std::path::Path,
    means: Means<'_>,
    cancel: &CancellationToken,
) -> output::HookResult {
    let Means { env, ledger, mcp } = means;
    let ran = match (&hook.http, &hook.mcp) {
        (Some(target), _) => run::post(target, input, hook.timeout, env, !hook.workspace, cancel).await,
        (_, Some(target)) => mcp_tool(target, input, hook.timeout, mcp, cancel).await,
        _ => {
            let program = run::Program { command: &hook.command, args: hook.args.as_deref(), bash: hook.bash, ledger };
            run::command(program, input, cwd, cwd, hook.timeout, env, cancel).await
        }
    };
    // An `async` hook's failure blocks nothing: nobody waits for it.
    output::from_command(event, &ran, hook.timeout, hook.fail_closed && !hook.background)
}

/// What a hook runs with: the session's environment, where processes are
/// recorded, and what calls MCP tools.
#[derive(Clone, Copy)]
struct Means<'a> {
    env: &'a std::collections::BTreeMap<String, String>,
    ledger: &'a Arc<crate::process::Ledger>,
    mcp: Option<&'a Arc<dyn McpCaller>>,
}

/// Calls an `mcp_tool` hook's tool with the moment's JSON filled into its
/// input: what it answered read as a command's output (its text as
/// stdout, exit code 0), a tool error or a failed call as a hook error.
async fn mcp_tool(
    target: &config::McpToolTarget,
    input: &[u8],
    timeout: std::time::Duration,
    mcp: Option<&Arc<dyn McpCaller>>,
    cancel: &CancellationToken,
) -> run::Ran {
    let failed = |why: String| run::Ran { failed: Some(why), ..run::Ran::default() };
    let Some(mcp) = mcp else { return failed("the session has no MCP servers".into()) };
    let moment: Value = serde_json::from_slice(input).unwrap_or_default();
    match mcp.call(&target.server, &target.tool, target.arguments(&moment), timeout, cancel).await {
        Ok((text, false)) => run::Ran { code: Some(0), stdout: text, ..run::Ran::default() },
        Ok((text, true)) => failed(format!("{} {} failed: {}", target.server, target.tool, text.trim())),
        Err(why) if cancel.is_cancelled() => run::Ran { cancelled: true, failed: None, ..failed(why) },
        Err(why) => failed(why),
    }
}

/// A permission mode as Claude Code names it in a hook's `permission_mode`.
pub fn mode_name(mode: agentd_protocol::session::PermissionMode) -> &'static str {
    use agentd_protocol::session::PermissionMode;
    match mode {
        PermissionMode::Default => "default",
        PermissionMode::AcceptEdits => "acceptEdits",
        PermissionMode::Plan => "plan",
        PermissionMode::Bypass => "bypassPermissions",
    }
}

/// Where a hook run's `hook/completed` events go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completions {
    /// Into the session's events at once.
    Pushed,
    /// Into [`Combined::events`], for the caller to push with its own.
    Returned,
}

impl Hooks {
    /// The hooks of a session whose workspace is `cwd`; their events go to
    /// `events`; `async` hooks run on `tracker` until `cancel`; their
    /// processes are recorded in `ledger`.
    pub fn new(
        set: HookSet,
        events: Arc<EventLog>,
        session_id: &str,
        cwd: PathBuf,
        tracker: tokio_util::task::TaskTracker,
        cancel: CancellationToken,
        ledger: Arc<crate::process::Ledger>,
    ) -> Arc<Hooks> {
        let hooks = Arc::new_cyclic(|me| Hooks {
            set,
            socket: Mutex::new(Vec::new()),
            pending: Mutex::new(HashMap::new()),
            events,
            session_id: session_id.to_owned(),
            cwd,
            ids: std::sync::atomic::AtomicU64::new(1),
            closed: std::sync::atomic::AtomicBool::new(false),
            ran_once: Mutex::new(std::collections::HashSet::new()),
            tracker,
            background: cancel,
            me: me.clone(),
            parent: std::sync::OnceLock::new(),
            ledger,
            mcp: std::sync::OnceLock::new(),
        });
        watch::start(&hooks);
        hooks
    }

    /// Makes these a child session's hooks: the parent's socket hooks
    /// apply too.
    pub fn set_parent(&self, parent: Arc<Hooks>) {
        let _ = self.parent.set(parent);
    }

    /// The socket hooks for `event` on `subject`, each with the hooks (the
    /// session) that asks it: this session's, then its parent's.
    fn socket_hooks(&self, event: HookEvent, subject: &str) -> Vec<(&Hooks, SocketHook)> {
        let mut out = Vec::new();
        for owner in std::iter::once(self).chain(self.parent.get().map(|p| &**p)) {
            if owner.is_closed() {
                continue;
            }
            let sockets = owner.sockets();
            out.extend(
                sockets
                    .iter()
                    .filter(|h| h.event == event && h.matcher.selects(event, subject))
                    .map(|h| (owner, h.clone())),
            );
        }
        out
    }

    /// Whether a `once` hook runs now (the first time it matches).
    fn first_time(&self, hook: &config::CommandHook) -> bool {
        self.ran_once.locked().insert(format!("{}\0{}", hook.source, hook.key()))
    }

    /// The session closed: see [`Hooks::run`].
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sockets().clear();
        let pending: Vec<Pending> = self.pendings().drain().map(|(_, p)| p).collect();
        for p in pending {
            let _ = p.answer.send(Answer::Gone);
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn sockets(&self) -> std::sync::MutexGuard<'_, Vec<SocketHook>> {
        self.socket.locked()
    }

    fn pendings(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.locked()
    }

    /// The command hooks (settings and session), for a child session to
    /// share.
    pub fn set(&self) -> &HookSet {
        &self.set
    }

    /// Whether any hook would run for `event` on `subject` (cheap: no
    /// hook, no cost on a call's path).
    pub fn wants(&self, event: HookEvent, subject: &str) -> bool {
        self.set.wants(event, subject) || !self.socket_hooks(event, subject).is_empty()
    }

    /// The hooks in force, for `session/get`.
    pub fn info(&self) -> Vec<HookInfo> {
        let mut out = self.set.info();
        out.extend(self.sockets().iter().map(|h| HookInfo {
            event: h.event,
            matcher: h.matcher.text().to_owned(),
            command: None,
            hook_id: Some(h.id.clone()),
            source: "socket".into(),
            timeout: h.timeout.as_secs(),
        }));
        out
    }

    /// `hooks/register`: a hook of connection `conn`'s.
    pub fn register(
        &self,
        event: HookEvent,
        matcher: Option<&str>,
        timeout: Option<u64>,
        fail_closed: bool,
        conn: Option<usize>,
    ) -> Result<String, HookError> {
        let matcher = config::Matcher::parse(matcher.unwrap_or(""))
            .map_err(|why| HookError::Invalid { field: "matcher", why })?;
        let timeout = timeout.unwrap_or(config::DEFAULT_TIMEOUT_S);
        if !(1..=config::MAX_TIMEOUT_S).contains(&timeout) {
            return Err(HookError::Invalid {
                field: "timeout",
                why: format!("must be from 1 to {} seconds, got {timeout}", config::MAX_TIMEOUT_S),
            });
        }
        let mut sockets = self.sockets();
        if sockets.len() >= MAX_SOCKET_HOOKS {
            return Err(HookError::Invalid {
                field: "event",
                why: format!("a session has at most {MAX_SOCKET_HOOKS} socket hooks"),
            });
        }
        let id = format!("hook_{}", self.ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        sockets.push(SocketHook {
            id: id.clone(),
            event,
            matcher,
            timeout: Duration::from_secs(timeout),
            fail_closed,
            conn,
        });
        Ok(id)
    }

    /// What calls `mcp_tool` hooks' tools (the session's MCP servers).
    pub fn set_mcp(&self, caller: Arc<dyn McpCaller>) {
        let _ = self.mcp.set(caller);
    }

    /// `hooks/unregister`.
    pub fn unregister(&self, id: &str) -> Result<(), HookError> {
        let mut sockets = self.sockets();
        let before = sockets.len();
        sockets.retain(|h| h.id != id);
        if sockets.len() == before {
            return Err(HookError::Unknown(format!("no hook {id:?} is registered on this session")));
        }
        Ok(())
    }

    /// The connection `conn` closed: its hooks go, and what they were asked
    /// goes on as if they were not there.
    pub fn connection_closed(&self, conn: usize) {
        self.sockets().retain(|h| h.conn != Some(conn));
        let gone: Vec<Pending> = {
            let mut pending = self.pendings();
            let ids: Vec<String> =
                pending.iter().filter(|(_, p)| p.conn == Some(conn)).map(|(k, _)| k.clone()).collect();
            ids.into_iter().filter_map(|id| pending.remove(&id)).collect()
        };
        for p in gone {
            let _ = p.answer.send(Answer::Gone);
        }
    }

    /// `hook/respond`.
    pub fn respond(&self, request_id: &str, output: Value) -> Result<(), HookError> {
        let pending = self
            .pendings()
            .remove(request_id)
            .ok_or_else(|| HookError::Unknown(format!("no hook request {request_id:?} is waiting for an answer")))?;
        let _ = pending.answer.send(Answer::Output(output));
        Ok(())
    }

    /// Runs every hook for `event` on `subject` at once, with `input` (the
    /// moment's own fields; the common ones are added here), and combines
    /// what they say. Each hook's start and end are events of the session;
    /// `completions` says whether the `hook/completed` events are pushed at
    /// once or left in the result's `events` for the caller to push with its
    /// own (one journal write for a call's hooks and its start or result).
    ///
    /// # Cancellation safety
    /// Dropping the future kills the command hooks still running and
    /// forgets the socket hooks' requests.
    pub async fn run(
        &self,
        event: HookEvent,
        subject: &str,
        input: Value,
        about: &About,
        cancel: &CancellationToken,
        completions: Completions,
    ) -> Combined {
        let deferred = (completions == Completions::Returned).then(|| Mutex::new(Vec::new()));
        let mut combined = self.run_now(event, subject, input, about, cancel, deferred.as_ref()).await;
        if let Some(deferred) = deferred {
            combined.events = deferred.into_held();
        }
        combined
    }

    async fn run_now(
        &self,
        event: HookEvent,
        subject: &str,
        mut input: Value,
        about: &About,
        cancel: &CancellationToken,
        deferred: Option<&Mutex<Vec<EventKind>>>,
    ) -> Combined {
        if let Value::Object(map) = &mut input {
            map.insert("session_id".into(), Value::String(self.session_id.clone()));
            map.insert("transcript_path".into(), Value::Null);
            map.entry("cwd").or_insert_with(|| Value::String(self.cwd.display().to_string()));
            map.insert("hook_event_name".into(), Value::String(event.as_str().into()));
        }
        let commands = self.set.matching(event, subject);
        let sockets = if self.is_closed() { Vec::new() } else { self.socket_hooks(event, subject) };
        if commands.is_empty() && sockets.is_empty() {
            return Combined::default();
        }
        let bytes = if commands.is_empty() { Vec::new() } else { serde_json::to_vec(&input).unwrap_or_default() };
        let mut runs: Vec<futures_util::future::BoxFuture<'_, output::HookResult>> = Vec::new();
        for mut hook in commands {
            if hook.condition.as_deref().is_some_and(|rule| !self.condition_holds(event, rule, &input)) {
                continue;
            }
            if hook.once && !self.first_time(&hook) {
                continue;
            }
            // SessionEnd hooks must not hold a closing session up: 1.5 s
            // unless they say otherwise, as in Claude Code.
            if event == HookEvent::SessionEnd && !hook.timeout_set {
                hook.timeout = SESSION_END_TIMEOUT;
            }
            let (bytes, cwd) = (bytes.clone(), self.cwd.clone());
            let name = hook.command.clone();
            if hook.background {
                // Not waited for; what it says is not read (its end is an
                // event of the session like any hook's).
                let Some(me) = self.me.upgrade() else { continue };
                let (about, token, env) = (about.clone(), self.background.child_token(), self.set.env.clone());
                self.tracker.spawn(async move {
                    let run = async {
                        let means = Means { env: &env, ledger: &me.ledger, mcp: me.mcp.get() };
                        command(event, &hook, &bytes, &cwd, means, &token).await.without_effect()
                    };
                    me.reported(event, &about, name, run, true, None).await;
                });
                continue;
            }
            runs.push(Box::pin(self.reported(
                event,
                about,
                name,
                async move {
                    let means = Means { env: &self.set.env, ledger: &self.ledger, mcp: self.mcp.get() };
                    command(event, &hook, &bytes, &cwd, means, cancel).await
                },
                true,
                deferred,
            )));
        }
        for (owner, hook) in &sockets {
            let name = format!("socket {}", hook.id);
            let ask = owner.ask_socket(event, hook, &input, about, cancel);
            // Its hook/request is its start.
            runs.push(Box::pin(self.reported(event, about, name, ask, false, deferred)));
        }
        let results = futures_util::future::join_all(runs).await;
        Combined::of(event, results)
    }

    /// Runs the hooks of a moment a tool makes happen (TaskCreated,
    /// TaskCompleted, CwdChanged) with `input`, for the call `ctx` is of;
    /// `Err` holds why one blocked it (exit code 2 or `decision:
    /// "block"`), for the model. Nothing runs (and no time is spent) when
    /// no hook wants the moment.
    pub async fn moment(ctx: &crate::tool::ToolContext, event: HookEvent, input: Value) -> Result<(), String> {
        let Some(hooks) = ctx.services.get::<Hooks>() else { return Ok(()) };
        if !hooks.wants(event, "") {
            return Ok(());
        }
        let about = About { turn_id: None, tool_use_id: None, tool_name: None };
        let said = hooks.run(event, "", input, &about, &ctx.cancel, Completions::Pushed).await;
        if said.blocks.is_empty() {
            Ok(())
        } else {
            Err(format!("{} hook: {}", event.as_str(), said.blocks.join("; ")))
        }
    }

    /// Whether a hook's `if` lets it run for this call: the call's tool and
    /// input (as the model sent them) match the rule, read with the
    /// session's workspace for relative paths. Only tool events have a
    /// call to match; on the others the hook does not run.
    fn condition_holds(&self, event: HookEvent, rule: &str, input: &Value) -> bool {
        if !event.is_about_a_call() {
            return false;
        }
        // Paths are judged where they lead (links followed), from the
        // workspace as it really is.
        let cwd = crate::fs::canonical(&self.cwd).unwrap_or_else(|_| self.cwd.clone());
        let origin = crate::permission::rules::Origin::session("hook if", &cwd);
        let Ok(rule) = crate::permission::rules::parse(rule, crate::permission::rules::RuleKind::Allow, &origin, 0)
        else {
            return false;
        };
        let tool = input.get("tool_name").and_then(Value::as_str).unwrap_or_default();
        let tool_input = input.get("tool_input").unwrap_or(&Value::Null);
        rule.covers_input(tool, tool_input)
            || config::family_of(tool).is_some_and(|family| rule.covers_input(family, tool_input))
    }

    /// `run` with its `hook/started` (when `announce`) and `hook/completed`
    /// events.
    async fn reported(
        &self,
        event: HookEvent,
        about: &About,
        hook: String,
        run: impl std::future::Future<Output = output::HookResult>,
        announce: bool,
        deferred: Option<&Mutex<Vec<EventKind>>>,
    ) -> output::HookResult {
        let hook: String = hook.chars().take(200).collect();
        if self.is_closed() {
            let result = run.await;
            tracing::debug!(
                hook,
                event = event.as_str(),
                outcome = result.outcome.as_str(),
                "hook of a closed session"
            );
            return result;
        }
        if announce {
            self.events.push(EventKind::HookStarted {
                turn_id: about.turn_id.clone(),
                tool_use_id: about.tool_use_id.clone(),
                event,
                hook: hook.clone(),
            });
        }
        let started = Instant::now();
        let result = run.await;
        if self.is_closed() {
            return result;
        }
        let completed = EventKind::HookCompleted {
            turn_id: about.turn_id.clone(),
            tool_use_id: about.tool_use_id.clone(),
            event,
            hook,
            duration_ms: started.elapsed().as_millis() as u64,
            outcome: result.outcome.as_str().to_owned(),
            decision: result.decision.map(|d| d.as_str().to_owned()),
            message: result.message.clone(),
            system_message: result.system_message.clone(),
            additional_context: result.additional_context.clone(),
        };
        match deferred {
            Some(later) => later.locked().push(completed),
            None => {
                self.events.push(completed);
            }
        }
        result
    }

    /// Asks a socket hook: a `hook/request` event, then its answer, its
    /// timeout, or its client leaving.
    async fn ask_socket(
        &self,
        event: HookEvent,
        hook: &SocketHook,
        input: &Value,
        about: &About,
        cancel: &CancellationToken,
    ) -> output::HookResult {
        let request_id = format!("hookreq_{}", uuid::Uuid::new_v4().simple());
        let (tx, rx) = oneshot::channel();
        self.pendings().insert(request_id.clone(), Pending { conn: hook.conn, answer: tx });
        // The hook may have gone between matching and asking.
        if !self.sockets().iter().any(|h| h.id == hook.id) {
            self.pendings().remove(&request_id);
            let gone = output::HookResult::gone();
            return if hook.fail_closed { output::failing_closed(event, gone) } else { gone };
        }
        struct Forget<'a>(&'a Hooks, &'a str);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.pendings().remove(self.1);
            }
        }
        let _forget = Forget(self, &request_id);
        self.events.push(EventKind::HookRequest {
            turn_id: about.turn_id.clone(),
            tool_use_id: about.tool_use_id.clone(),
            request_id: request_id.clone(),
            hook_id: hook.id.clone(),
            event,
            tool_name: about.tool_name.clone(),
            input: input.clone(),
        });
        let result = tokio::select! {
            answer = rx => match answer {
                Ok(Answer::Output(value)) => output::from_json(event, value),
                Ok(Answer::Gone) | Err(_) => output::HookResult::gone(),
            },
            _ = tokio::time::sleep(hook.timeout) => output::HookResult::timed_out(hook.timeout),
            _ = cancel.cancelled() => output::HookResult::cancelled(),
        };
        if hook.fail_closed { output::failing_closed(event, result) } else { result }
    }
}
