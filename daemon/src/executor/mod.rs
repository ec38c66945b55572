//! The streaming executor (after Claude Code's StreamingToolExecutor): a
//! session's tool calls, submitted as the model streams them, scheduled,
//! run, and yielded in order.
//!
//! [`machine`] is the state machine, a pure function of (state, event);
//! [`SessionExecutor`] drives it: it prepares calls, carries out the
//! machine's actions (start a task, abort a token, yield a result, apply a
//! context modifier) and reports everything as events in the session's
//! [`crate::events::EventLog`].
//!
//! # Invariants
//! Each but 8 has a test named after it in `machine_tests.rs`, on the machine
//! (8 is the driver's: the machine only says when a result is yielded); each
//! but 1 has one through the socket in `tests/e2e/turns.rs`.
//! 1. Every call moves queued → executing → completed → yielded (or is
//!    discarded), forward only, each step once.
//! 2. A queued call starts when nothing is executing, or when it and every
//!    executing call are concurrency safe, and fewer than the session's cap
//!    are running. Calls start in request order: a later safe call never
//!    overtakes an earlier unsafe one.
//! 3. Results are yielded in request order within their turn; a turn's
//!    results never wait for another turn's (two clients' `tool/call`s in
//!    one session each come back as they finish). Progress is forwarded at
//!    once, bypassing the order.
//! 4. A failing call of a tool that cancels siblings (Bash) cancels the
//!    queued and running calls of its turn, and any submitted to that turn
//!    later; each yields an error naming the failed call. Failures of other
//!    tools cancel nothing. `sibling_cancel: never` turns this off.
//! 5. Discarding a turn drops its queued, running and unyielded calls:
//!    nothing of theirs is yielded afterwards; running ones are stopped,
//!    block tools included.
//! 6. Cancelling a call reaches only that call; a turn, its calls; the
//!    session, all calls. Results already complete are yielded as they were.
//! 7. On cancel, running `cancel` tools stop and `block` tools finish (and
//!    yield their own result); closing the session stops both.
//! 8. Context modifiers are applied as results are yielded: in request order
//!    within a turn.
//! 9. A turn completes (`turn/completed`, once) when it has ended and all its
//!    results are out.
//!
//! Cancellation tokens: session → turn → call, built with `child_token()`.
//! Discard cancels the turn's token, closing the session the session's;
//! `turn/cancel` goes through the machine, which aborts call tokens one by
//! one so block tools can be spared.

mod admit;
mod asking;
mod calls;
mod cancelling;
mod channel;
mod hooked;
pub mod machine;
mod run;
mod submit;
mod yielding;
// The partitioning of Claude Code's batch path, the reference the machine is
// checked against.
#[cfg(test)]
pub mod partition;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_protocol::session::SessionInfo;
use agentd_protocol::tools::{ContentBlock, ToolCallResult};
use agentd_protocol::turn::{EventKind, ToolUse};
use futures_util::FutureExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::events::EventLog;
use crate::permission::ask::{self, Answer, Asks};
use crate::permission::rules::RuleSet;
use crate::process::jobs::JobTable;
use crate::sync::MutexExt;
use crate::tool::context::{ProgressReport, ProgressReporter};
use crate::tool::{CallOutcome, InterruptBehavior, PreparedCall, SessionContext, ToolContext, ToolSet};
use machine::{Action, CallIdx, CallSpec, CancelReason, Event, Machine, Scope, TurnIdx, Window};

/// How long a permission request waits for a first client on the stream
/// (one that submits, then subscribes) before it is denied for want of one.
const NO_CLIENT_GRACE: Duration = Duration::from_secs(2);

/// How long a cancelled call may take to stop on its own before it is dropped.
const ABORT_GRACE: Duration = Duration::from_secs(5);

/// Reports a call as finished if its task ends without doing so (a panic
/// that escaped, a runtime shutting down): the session must not wait forever.
struct ReportOnDrop {
    me: Option<Arc<SessionExecutor>>,
    call: CallIdx,
}

impl Drop for ReportOnDrop {
    fn drop(&mut self) {
        let Some(me) = self.me.take() else { return };
        // A task dropped while its executor's lock is held on this thread
        // (a runtime shutting down drops tasks as they are spawned) must not
        // lock again: it would deadlock. Nothing waits on it then anyway.
        let Ok(mut inner) = me.inner.try_lock() else { return };
        let outcome = CallOutcome::internal("the call's task ended unexpectedly");
        me.finished_locked(&mut inner, self.call, outcome, false);
    }
}

/// Why a `turn/submit`, `turn/cancel` or `turn/discard` was refused as a
/// whole (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    /// The turn was ended (or completed, or discarded).
    #[error("turn {turn_id} has ended; start a new turn for more tool_use blocks")]
    TurnEnded {
        /// The turn.
        turn_id: String,
    },
    /// A `tool_use` id was used before in this session (or twice in one submit).
    #[error("tool_use id {id:?} was already submitted in this session; ids must be unique")]
    DuplicateToolUse {
        /// The id.
        id: String,
    },
    /// A `tool_use` id is empty.
    #[error("a tool_use id must not be empty")]
    EmptyToolUseId,
    /// No turn has this id.
    #[error("no turn {turn_id:?} in this session")]
    UnknownTurn {
        /// The id.
        turn_id: String,
    },
    /// No call has this `tool_use` id.
    #[error("no tool_use {id:?} in this session")]
    UnknownToolUse {
        /// The id.
        id: String,
    },
    /// The session is closing.
    #[error("the session is closed")]
    Closed,
}

/// Most forgotten call and turn ids remembered, each: a `tool_use` id used
/// again, or a turn that ended, is still recognised for this long.
const FORGOTTEN_IDS: usize = 1024;

/// The ids of the most recently dropped calls and turns.
#[derive(Default)]
struct Forgotten {
    calls: std::collections::VecDeque<String>,
    call_set: std::collections::HashSet<String>,
    turns: std::collections::VecDeque<Arc<str>>,
    turn_set: std::collections::HashSet<Arc<str>>,
}

impl Forgotten {
    /// The calls and turns of a past daemon's events: every one of them
    /// is over.
    fn of_past(past: &[agentd_protocol::turn::Event]) -> Forgotten {
        let mut forgotten = Forgotten::default();
        for e in past {
            match &e.kind {
                EventKind::ToolQueued { tool_use_id, turn_id, .. } => {
                    forgotten.call(tool_use_id.clone());
                    if !forgotten.turn_set.contains(turn_id.as_str()) {
                        forgotten.turn(Arc::from(turn_id.as_str()));
                    }
                }
                EventKind::TurnCompleted { turn_id, .. } | EventKind::TurnDiscarded { turn_id }
                    if !forgotten.turn_set.contains(turn_id.as_str()) =>
                {
                    forgotten.turn(Arc::from(turn_id.as_str()))
                }
                _ => {}
            }
        }
        forgotten
    }

    fn call(&mut self, id: String) {
        if self.calls.len() == FORGOTTEN_IDS
            && let Some(old) = self.calls.pop_front()
        {
            self.call_set.remove(&old);
        }
        self.call_set.insert(id.clone());
        self.calls.push_back(id);
    }

    fn turn(&mut self, id: Arc<str>) {
        if self.turns.len() == FORGOTTEN_IDS
            && let Some(old) = self.turns.pop_front()
        {
            self.turn_set.remove(&old);
        }
        self.turn_set.insert(id.clone());
        self.turns.push_back(id);
    }
}

impl Inner {
    /// Drops the records of calls and turns the machine is done with, so a
    /// session's memory stays bounded however many calls it makes.
    fn compact(&mut self) {
        let dropped = self.machine.compact();
        for _ in 0..dropped.calls {
            if let Some(slot) = self.slots.pop_front() {
                self.tool_use_ids.remove(&slot.tool_use_id);
                self.forgotten.call(slot.tool_use_id);
            }
        }
        for _ in 0..dropped.turns {
            if let Some(turn) = self.turns.pop_front() {
                self.turn_ids.remove(&turn.id);
                self.forgotten.turn(turn.id);
            }
        }
        debug_assert_eq!(self.machine.kept(), (self.slots.len(), self.turns.len()), "records out of step");
    }
}

/// What the executor keeps about one call beside the machine's state.
struct Slot {
    tool_use_id: String,
    name: String,
    turn_id: Arc<str>,
    /// Until the call starts.
    prepared: Option<Box<dyn PreparedCall>>,
    /// The result, once there is one.
    outcome: Option<CallOutcome>,
    /// Until the call is yielded or dropped (a kept token would stay in its
    /// parent's list of children).
    token: Option<CancellationToken>,
    /// False once the call's result is out or dropped: late progress is
    /// not reported.
    live: Arc<AtomicBool>,
    /// A `tool/call` waiting for this call's result.
    waiter: Option<oneshot::Sender<ToolCallResult>>,
    render_use: String,
    /// The input as the model sent it, until the call starts (a
    /// permission request shows it).
    input: Option<serde_json::Value>,
    /// The sandbox profile a Bash call runs in.
    sandbox: Option<agentd_protocol::session::SandboxProfile>,
    /// When it was accepted (`daemon/activity`'s ages).
    since: std::time::Instant,
    /// The network it had (Bash).
    network: Option<agentd_protocol::session::NetworkAccess>,
}

/// A call waiting for the client's answer.
struct Waiting {
    request_id: String,
    answer: oneshot::Receiver<Answer>,
    turn_id: String,
    tool_use_id: String,
    /// The refusal when no client ever came to answer.
    no_client: String,
    /// The file outside the workspace the user is asked about.
    outside: Option<PathBuf>,
    /// A client was on the stream when the request was made.
    client_attached: bool,
}

struct TurnSlot {
    id: Arc<str>,
    token: CancellationToken,
    /// The first failed call of the turn (tool, `tool_use` id), for the
    /// message of the siblings it cancels after its own record is gone.
    failed: Option<(String, String)>,
    /// Its calls for PostToolBatch hooks (a `turn/submit` turn of a session with some).
    batch: Option<Vec<serde_json::Value>>,
}

struct Inner {
    machine: Machine,
    /// The calls still of interest (see [`Machine::compact`]).
    slots: Window<Slot>,
    /// The turns still open or holding calls.
    turns: Window<TurnSlot>,
    /// Ids of calls and turns already dropped, the most recent of them.
    forgotten: Forgotten,
    turn_ids: HashMap<Arc<str>, TurnIdx>,
    tool_use_ids: HashMap<String, CallIdx>,
    context: SessionContext,
    closed: bool,
    /// `session/closed` was pushed (after the last running call ended).
    close_reported: bool,
    /// Turns whose PostToolBatch hooks run (`turn/completed`, then `session/closed`, wait).
    batches_running: usize,
    /// Calls started under the lock, run once it is released.
    starts: Vec<crate::inline::BoxFuture<()>>,
}

/// The executor's lock. When it is released, the calls started under it
/// run: each on this thread until it first waits (a call that needs no
/// I/O is done before the lock's holder returns), then as a task.
struct Locked<'a> {
    guard: Option<std::sync::MutexGuard<'a, Inner>>,
    tracker: &'a TaskTracker,
    /// The events pushed meanwhile are written (and sent) together.
    batch: Option<crate::events::Batch<'a>>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        self.guard.as_deref().unwrap_or_else(|| unreachable!("the guard is only taken on drop"))
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!("the guard is only taken on drop"))
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else { return };
        guard.compact();
        let starts = std::mem::take(&mut guard.starts);
        drop(guard);
        for start in starts {
            crate::inline::run_or_spawn(self.tracker, start);
        }
        drop(self.batch.take());
    }
}

/// What calls of a session share beside the session context.
pub struct SessionServices {
    /// The session as created (its settings).
    pub info: Arc<SessionInfo>,
    /// Where tools keep per-call files (full command output).
    pub output_dir: Arc<PathBuf>,
    /// The session's plan file (plan mode).
    pub plan_file: Arc<crate::tool::context::PlanFile>,
    /// What no tool may touch, kept so while a call of the session runs.
    pub _off_limits: Arc<crate::fs::OffLimits>,
    /// Where the daemon records its writes in progress.
    pub pending_writes: Arc<crate::fs::pending::Records>,
    /// The session's background jobs.
    pub jobs: Arc<JobTable>,
    /// The session's permission rules (session, project and user settings).
    pub rules: Arc<RuleSet>,
    /// Open permission requests and the rules `allow_always` granted.
    pub asks: Arc<Asks>,
    /// What the Bash sandbox can do here.
    pub sandbox: Arc<crate::sandbox::Facility>,
    /// The session's hooks.
    pub hooks: Arc<crate::hooks::Hooks>,
    /// Connections all of the session's commands may have open through
    /// the network gate (a child session shares its parent's).
    pub net_slots: Mutex<Arc<tokio::sync::Semaphore>>,
    /// What its calls changed in the workspace, kept to diff and rewind.
    pub history: Arc<crate::fs::history::History>,
}

/// What the verdict grants a call beside running it.
#[derive(Default)]
struct Grant {
    /// The file outside the workspace it may open.
    approved_outside: Option<PathBuf>,
    /// The sandbox profile (Bash).
    profile: Option<agentd_protocol::session::SandboxProfile>,
    /// Nobody approved it: no secrets in its environment.
    scrub_env: bool,
    /// It runs unasked under `auto_allow: "effects"`: what it changes
    /// waits for approval.
    effects: bool,
}

/// What a mid-call request asks about, beyond the call itself.
struct Asked {
    /// `network` or `effects`.
    kind: &'static str,
    /// `network`: where the command connects.
    host: Option<String>,
    /// `network`: the port.
    port: Option<u16>,
    /// `effects`: what the command changed.
    changes: Vec<agentd_protocol::changes::FileChange>,
    /// `effects`: the changes as one unified diff.
    diff: Option<String>,
}

/// A call that may run only once the client approves it.
struct AskFor {
    reason: String,
    suggestions: Vec<String>,
    input: serde_json::Value,
    /// The file outside the workspace the user is asked about, if any.
    outside: Option<PathBuf>,
}

/// Which call a request or an event is about.
#[derive(Clone)]
struct CallIds {
    turn_id: String,
    tool_use_id: String,
    name: String,
    render: String,
}

/// Runs one session's tool calls.
pub struct SessionExecutor {
    inner: Mutex<Inner>,
    events: Arc<EventLog>,
    session_id: Arc<str>,
    cwd: Arc<PathBuf>,
    /// The session's tools: replaced when an MCP server's list changes.
    tools: std::sync::RwLock<Arc<ToolSet>>,
    services: SessionServices,
    cancel: CancellationToken,
    tracker: TaskTracker,
    me: std::sync::Weak<SessionExecutor>,
    /// Random per executor: ids it makes up are unique across restarts.
    id_prefix: String,
    /// Counter of the ids it made up.
    ids: std::sync::atomic::AtomicU64,
    /// See [`SessionExecutor::revision`].
    revision: std::sync::atomic::AtomicU64,
    /// The durable state last written to the journal.
    durable: Mutex<crate::store::Durable>,
    /// Makes child sessions for the Task tool (set once by the manager).
    agent_host: std::sync::OnceLock<crate::agents::Host>,
    /// The daemon's other sessions (ListAgents, SendMessage).
    peers: std::sync::OnceLock<crate::peers::PeerBook>,
    /// The daemon's schedules (CronCreate, CronList, CronDelete).
    schedules: std::sync::OnceLock<Arc<crate::schedule::Scheduler>>,
    /// The daemon's call counters (`--metrics`).
    metrics: std::sync::OnceLock<Arc<crate::metrics::Metrics>>,
    /// The session's open `agent/request`s.
    agent_requests: Arc<crate::agents::Requests>,
}

/// Where a session keeps what outlives a call: files, events, and (for a
/// session restored after a restart) what it had before.
pub struct Storage {
    /// Where tools keep per-call files (full command output).
    pub output_dir: PathBuf,
    /// The session's plan file (plan mode), in the daemon's state directory.
    pub plan_file: PathBuf,
    /// What no tool may touch, kept so while the session lives.
    pub off_limits: Arc<crate::fs::OffLimits>,
    /// Where events are written as they happen.
    pub journal: Option<Arc<dyn crate::store::Journal>>,
    /// What its calls changed in the workspace (read back after a restart).
    pub history: Arc<crate::fs::history::History>,
    /// The session as the store had it.
    pub restored: Option<Restored>,
}

/// What decides on a session's calls beside the mode: its permission
/// rules and its hooks.
pub struct Checks {
    /// Rules of every origin, each with its base.
    pub rules: RuleSet,
    /// Command hooks from the settings files and `session/create`.
    pub hooks: crate::hooks::HookSet,
}

/// A session's state as it was saved.
pub struct Restored {
    /// Its context.
    pub context: SessionContext,
    /// Its events (the last ones kept), oldest first.
    pub events: Vec<agentd_protocol::turn::Event>,
    /// Rules `allow_always` had granted.
    pub granted_rules: Vec<String>,
}

impl SessionExecutor {
    /// The slots for connections through the network gate.
    pub fn net_slots(&self) -> Arc<tokio::sync::Semaphore> {
        self.services.net_slots.locked().clone()
    }

    /// Shares `parent`'s gate slots (a child session: a tree of sessions
    /// has one budget, so children cannot multiply it).
    pub fn share_net_slots(&self, parent: &SessionExecutor) {
        let slots = parent.net_slots();
        *self.services.net_slots.locked() = slots;
    }

    /// An executor for the session `info`, whose token is `cancel`.
    pub fn new(
        info: &SessionInfo,
        tools: Arc<ToolSet>,
        storage: Storage,
        checks: Checks,
        sandbox: Arc<crate::sandbox::Facility>,
        cancel: CancellationToken,
        tracker: TaskTracker,
    ) -> Arc<SessionExecutor> {
        let Checks { rules, hooks } = checks;
        let sibling_cancel = info.sibling_cancel == agentd_protocol::turn::SiblingCancel::BashFailure;
        let jobs = Arc::new(JobTable::new(cancel.clone(), tracker.clone()));
        let Storage { output_dir, plan_file, off_limits, journal, history, restored } = storage;
        let (context, past, granted) = match restored {
            Some(r) => (r.context, r.events, r.granted_rules),
            None => (SessionContext::default(), Vec::new(), Vec::new()),
        };
        let durable = Mutex::new(crate::store::Durable::of(&context, granted.clone()));
        let forgotten = Forgotten::of_past(&past);
        let events = Arc::new(EventLog::durable(crate::events::DEFAULT_LOG_CAPACITY, journal, past));
        calls::tell_ends(&jobs, &events);
        let hooks = crate::hooks::Hooks::new(
            hooks,
            events.clone(),
            &info.session_id,
            info.cwd.clone(),
            tracker.clone(),
            cancel.child_token(),
            sandbox.ledger.clone(),
        );
        let executor = Arc::new_cyclic(|me| SessionExecutor {
            inner: Mutex::new(Inner {
                machine: Machine::new(info.max_concurrency as usize, sibling_cancel),
                slots: Window::default(),
                turns: Window::default(),
                forgotten,
                turn_ids: HashMap::new(),
                tool_use_ids: HashMap::new(),
                context,
                closed: false,
                close_reported: false,
                batches_running: 0,
                starts: Vec::new(),
            }),
            events,
            session_id: Arc::from(info.session_id.as_str()),
            cwd: Arc::new(info.cwd.clone()),
            tools: std::sync::RwLock::new(tools),
            services: SessionServices {
                info: Arc::new(info.clone()),
                output_dir: Arc::new(output_dir),
                plan_file: Arc::new(crate::tool::context::PlanFile(plan_file)),
                pending_writes: Arc::new(off_limits.pending_writes()),
                _off_limits: off_limits,
                jobs,
                rules: Arc::new(rules),
                asks: Arc::new(Asks::new(info.cwd.clone())),
                sandbox,
                hooks,
                net_slots: Mutex::new(Arc::new(tokio::sync::Semaphore::new(crate::sandbox::gate::SESSION_CONNECTIONS))),
                history,
            },
            cancel,
            tracker,
            me: me.clone(),
            id_prefix: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned() + "_",
            ids: std::sync::atomic::AtomicU64::new(1),
            revision: std::sync::atomic::AtomicU64::new(0),
            durable,
            agent_host: std::sync::OnceLock::new(),
            peers: std::sync::OnceLock::new(),
            schedules: std::sync::OnceLock::new(),
            metrics: std::sync::OnceLock::new(),
            agent_requests: Arc::default(),
        });
        executor.services.asks.restore_granted(&granted);
        executor
    }

    /// What the session's calls changed in the workspace (`turn/diff`,
    /// `turn/rewind`).
    pub fn history(&self) -> &Arc<crate::fs::history::History> {
        &self.services.history
    }

    /// The session's hooks.
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        &self.services.hooks
    }

    /// The session's permission rules (every origin, each with its base).
    pub fn rules(&self) -> Arc<RuleSet> {
        self.services.rules.clone()
    }

    /// The session's open `agent/request`s.
    pub fn agent_requests(&self) -> &Arc<crate::agents::Requests> {
        &self.agent_requests
    }

    /// Gives the executor what makes child sessions for the Task tool.
    pub fn set_agent_host(&self, host: crate::agents::Host) {
        let _ = self.agent_host.set(host);
    }

    /// Gives the executor the daemon's other sessions (ListAgents, SendMessage).
    pub fn set_peers(&self, book: crate::peers::PeerBook) {
        let _ = self.peers.set(book);
    }

    /// Gives the executor the daemon's schedules, for the Cron tools.
    pub fn set_schedules(&self, schedules: Arc<crate::schedule::Scheduler>) {
        let _ = self.schedules.set(schedules);
    }

    /// Counts changes worth saving (calls finished, rules granted): the
    /// store saves the session when it moves.
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Relaxed)
    }

    /// Something worth saving changed (a call finished, a rule was
    /// granted): the record is saved within the next flush, and what
    /// clients are told of at once ([`crate::store::Durable`]) is in the
    /// journal before this returns — the one place that keeps the store's
    /// invariant. Called with the executor's lock held.
    fn changed(&self, context: &SessionContext) {
        self.revision.fetch_add(1, Ordering::Relaxed);
        let now = crate::store::Durable::of(context, self.services.asks.granted_texts());
        let mut written = self.durable.locked();
        if *written != now {
            self.events.record_durable(&now);
            *written = now;
        }
    }

    /// A new id the daemon gives a turn or a call: a random prefix per
    /// executor and a counter (no system call per id).
    fn fresh_id(&self, kind: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        format!("{kind}_{}{n:x}", self.id_prefix)
    }

    fn lock(&self) -> Locked<'_> {
        let batch = Some(self.events.batch());
        Locked { guard: Some(self.inner.locked()), tracker: &self.tracker, batch }
    }

    /// The session's event log.
    pub fn events(&self) -> &Arc<EventLog> {
        &self.events
    }

    /// The session's background jobs.
    pub fn jobs(&self) -> &Arc<JobTable> {
        &self.services.jobs
    }

    /// A copy of the session context (what modifiers have changed).
    pub fn context(&self) -> SessionContext {
        self.lock().context.clone()
    }

    /// Runs `f` on the session context under the executor's lock.
    pub fn with_context<R>(&self, f: impl FnOnce(&SessionContext) -> R) -> R {
        f(&self.lock().context)
    }

    /// Closes the executor: cancels everything (block tools too), reports
    /// `session/closed`, refuses new work.
    pub fn close(&self) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        inner.closed = true;
        let actions = inner.machine.apply(Event::Cancel { scope: Scope::All, reason: CancelReason::SessionClosed });
        self.carry_out(&mut inner, actions);
        self.cancel.cancel();
        self.report_closed(&mut inner);
    }

    /// Calls, turns, events and their bytes kept now (a session's memory).
    pub fn kept(&self) -> (usize, usize, usize, usize) {
        let (calls, turns) = self.lock().machine.kept();
        let (events, bytes) = self.events.kept();
        (calls, turns, events, bytes)
    }

    /// Stops everything for a daemon shutdown: calls cancelled (block tools
    /// too), results recorded; the session is back after the restart.
    pub fn stop(&self) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        inner.closed = true;
        inner.close_reported = true;
        let actions = inner.machine.apply(Event::Cancel { scope: Scope::All, reason: CancelReason::DaemonStopped });
        self.carry_out(&mut inner, actions);
        self.cancel.cancel();
    }

    /// Whether the executor was closed.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}
