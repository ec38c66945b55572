//! The streaming executor (after Claude Code's StreamingToolExecutor): a
//! session's tool calls, submitted as the model streams them, scheduled,
//! run, and yielded in order.
//!
//! [`machine`] is the state machine, a pure function of (state, event);
//! [`SessionExecutor`] drives it: it prepares calls, carries out the
//! machine's actions (start a task, abort a token, yield a result, apply a
//! context modifier) and reports everything as events in the session's
//! [`events::EventLog`].
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
mod cancelling;
mod channel;
pub mod events;
mod hooked;
pub mod machine;
mod run;
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

use crate::permission::ask::{self, Answer, Asks};
use crate::permission::rules::RuleSet;

use crate::process::jobs::JobTable;
use crate::tool::context::{ProgressReport, ProgressReporter};
use crate::tool::{CallOutcome, InterruptBehavior, PreparedCall, SessionContext, ToolContext, ToolSet};
use events::EventLog;
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
        let outcome = CallOutcome::error("internal error: the call's task ended unexpectedly");
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
    batch: Option<events::Batch<'a>>,
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
}

/// Where a session keeps what outlives a call: files, events, and (for a
/// session restored after a restart) what it had before.
pub struct Storage {
    /// Where tools keep per-call files (full command output).
    pub output_dir: PathBuf,
    /// Where events are written as they happen.
    pub journal: Option<Arc<dyn crate::store::Journal>>,
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
        self.services.net_slots.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Shares `parent`'s gate slots (a child session: a tree of sessions
    /// has one budget, so children cannot multiply it).
    pub fn share_net_slots(&self, parent: &SessionExecutor) {
        let slots = parent.net_slots();
        *self.services.net_slots.lock().unwrap_or_else(|e| e.into_inner()) = slots;
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
        let Storage { output_dir, journal, restored } = storage;
        let (context, past, granted) = match restored {
            Some(r) => (r.context, r.events, r.granted_rules),
            None => (SessionContext::default(), Vec::new(), Vec::new()),
        };
        let durable = Mutex::new(crate::store::Durable::of(&context, granted.clone()));
        let mut forgotten = Forgotten::default();
        for e in &past {
            match &e.kind {
                // Every turn of a past daemon is over.
                EventKind::ToolQueued { tool_use_id, turn_id, .. } => {
                    forgotten.call(tool_use_id.clone());
                    if !forgotten.turn_set.contains(turn_id.as_str()) {
                        forgotten.turn(Arc::from(turn_id.as_str()));
                    }
                }
                EventKind::TurnCompleted { turn_id } | EventKind::TurnDiscarded { turn_id }
                    if !forgotten.turn_set.contains(turn_id.as_str()) =>
                {
                    forgotten.turn(Arc::from(turn_id.as_str()))
                }
                _ => {}
            }
        }
        let events = Arc::new(EventLog::durable(events::DEFAULT_LOG_CAPACITY, journal, past));
        let hooks = crate::hooks::Hooks::new(
            hooks,
            events.clone(),
            &info.session_id,
            info.cwd.clone(),
            tracker.clone(),
            cancel.child_token(),
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
                starts: Vec::new(),
            }),
            events,
            session_id: Arc::from(info.session_id.as_str()),
            cwd: Arc::new(info.cwd.clone()),
            tools: std::sync::RwLock::new(tools),
            services: SessionServices {
                info: Arc::new(info.clone()),
                output_dir: Arc::new(output_dir),
                jobs,
                rules: Arc::new(rules),
                asks: Arc::new(Asks::new(info.cwd.clone())),
                sandbox,
                hooks,
                net_slots: Mutex::new(Arc::new(tokio::sync::Semaphore::new(crate::sandbox::gate::SESSION_CONNECTIONS))),
            },
            cancel,
            tracker,
            me: me.clone(),
            id_prefix: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned() + "_",
            ids: std::sync::atomic::AtomicU64::new(1),
            revision: std::sync::atomic::AtomicU64::new(0),
            durable,
            agent_host: std::sync::OnceLock::new(),
        });
        executor.services.asks.restore_granted(&granted);
        executor
    }

    /// The session's hooks.
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        &self.services.hooks
    }

    /// The session's permission rules (every origin, each with its base).
    pub fn rules(&self) -> Arc<RuleSet> {
        self.services.rules.clone()
    }

    /// Gives the executor what makes child sessions for the Task tool.
    pub fn set_agent_host(&self, host: crate::agents::Host) {
        let _ = self.agent_host.set(host);
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
        let mut written = self.durable.lock().unwrap_or_else(|e| e.into_inner());
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
        Locked { guard: Some(self.inner.lock().unwrap_or_else(|e| e.into_inner())), tracker: &self.tracker, batch }
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

    /// Adds `tool_uses` to a turn (a new one when `turn_id` is absent or
    /// unknown); they start as soon as the rules allow. Returns the turn id.
    /// Refused as a whole, changing nothing, when an id is a duplicate or
    /// the turn has ended.
    pub fn submit(&self, turn_id: Option<String>, tool_uses: Vec<ToolUse>, end: bool) -> Result<String, TurnError> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(TurnError::Closed);
        }
        let mut seen = std::collections::HashSet::new();
        for tu in &tool_uses {
            if tu.id.is_empty() {
                return Err(TurnError::EmptyToolUseId);
            }
            if inner.tool_use_ids.contains_key(&tu.id)
                || inner.forgotten.call_set.contains(&tu.id)
                || !seen.insert(tu.id.as_str())
            {
                return Err(TurnError::DuplicateToolUse { id: tu.id.clone() });
            }
        }
        if let Some(id) = turn_id.as_deref().filter(|id| inner.forgotten.turn_set.contains(*id)) {
            return Err(TurnError::TurnEnded { turn_id: id.to_owned() });
        }
        let turn = match turn_id.as_deref().and_then(|id| inner.turn_ids.get(id).copied()) {
            Some(t) if inner.machine.turn_ended(t) => {
                return Err(TurnError::TurnEnded { turn_id: inner.turns[t].id.to_string() });
            }
            Some(t) => t,
            None => self.new_turn(&mut inner, turn_id),
        };
        let turn_id = inner.turns[turn].id.clone();
        for tu in tool_uses {
            let actions = self.enqueue(&mut inner, turn, tu, None);
            self.carry_out(&mut inner, actions);
        }
        if end {
            let actions = inner.machine.apply(Event::EndTurn(turn));
            self.carry_out(&mut inner, actions);
        }
        Ok(turn_id.to_string())
    }

    fn new_turn(&self, inner: &mut Inner, id: Option<String>) -> TurnIdx {
        let id: Arc<str> = Arc::from(id.unwrap_or_else(|| self.fresh_id("turn")));
        let t = inner.machine.new_turn();
        inner.turns.push(TurnSlot { id: id.clone(), token: self.cancel.child_token(), failed: None });
        inner.turn_ids.insert(id, t);
        t
    }

    /// Runs one call in a turn of its own and waits for its result
    /// (`tool/call`).
    ///
    /// # Cancellation safety
    /// Dropping the future leaves the call running; its result still goes
    /// to the event log.
    pub async fn call(
        &self,
        name: &str,
        input: serde_json::Value,
        tool_use_id: Option<String>,
    ) -> Result<ToolCallResult, TurnError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            if inner.closed {
                return Err(TurnError::Closed);
            }
            let id = match tool_use_id {
                Some(id) if id.is_empty() => return Err(TurnError::EmptyToolUseId),
                Some(id) if inner.tool_use_ids.contains_key(&id) || inner.forgotten.call_set.contains(&id) => {
                    return Err(TurnError::DuplicateToolUse { id });
                }
                Some(id) => id,
                None => self.fresh_id("call"),
            };
            let turn = self.new_turn(&mut inner, None);
            let tu = ToolUse { id, name: name.to_owned(), input };
            let mut actions = self.enqueue(&mut inner, turn, tu, Some(tx));
            actions.extend(inner.machine.apply(Event::EndTurn(turn)));
            self.carry_out(&mut inner, actions);
        }
        Ok(rx.await.unwrap_or_else(|_| ToolCallResult {
            name: name.to_owned(),
            content: vec![ContentBlock::text("the call was discarded before it finished")],
            is_error: true,
            render: "discarded".into(),
            render_use: name.to_owned(),
            sandbox: None,
            network: None,
            structured_content: None,
        }))
    }

    /// Looks the tool up and parses the input; what depends on the state
    /// of the session when the call runs (a deferred tool being loaded,
    /// validation, permission) is decided when it starts.
    fn enqueue(
        &self,
        inner: &mut Inner,
        turn: TurnIdx,
        tu: ToolUse,
        waiter: Option<oneshot::Sender<ToolCallResult>>,
    ) -> Vec<Action> {
        let turn_slot = &inner.turns[turn];
        let token = turn_slot.token.child_token();
        let parsed = match self.tools().find(&tu.name) {
            None => Err((tu.name.clone(), tu.name.clone(), self.unknown_tool(&tu.name, &inner.context))),
            Some(tool) => match tool.prepare(tu.input.clone()) {
                Ok(call) => Ok((tool.name().to_owned(), call, tool.cancels_siblings_on_failure())),
                Err(e) => Err((tool.name().to_owned(), tool.name().to_owned(), CallOutcome::error(e.to_string()))),
            },
        };
        let idx = inner.machine.next_call();
        inner.tool_use_ids.insert(tu.id.clone(), idx);
        let (name, render_use, spec, refused, prepared) = match parsed {
            Ok((name, call, cancels_siblings)) => {
                let block = call.interrupt_behavior() == InterruptBehavior::Block;
                let spec = CallSpec { turn, safe: call.is_concurrency_safe(), cancels_siblings, block };
                (name, call.render_use(), Some(spec), None, Some(call))
            }
            Err((name, render_use, outcome)) => (name, render_use, None, Some(outcome), None),
        };
        self.events.push(EventKind::ToolQueued {
            turn_id: turn_slot.id.to_string(),
            tool_use_id: tu.id.clone(),
            name: name.clone(),
            render: render_use.clone(),
        });
        inner.slots.push(Slot {
            tool_use_id: tu.id,
            name,
            turn_id: turn_slot.id.clone(),
            prepared,
            outcome: refused,
            token: Some(token),
            live: Arc::new(AtomicBool::new(true)),
            waiter,
            render_use,
            input: Some(tu.input),
            sandbox: None,
            network: None,
        });
        match spec {
            Some(spec) => inner.machine.apply(Event::Submit(spec)),
            None => inner.machine.apply(Event::SubmitRefused { turn }),
        }
    }

    fn unknown_tool(&self, name: &str, context: &SessionContext) -> CallOutcome {
        match self.tools().resolve_for_call(name, context) {
            Err(e) => CallOutcome::error(e.to_string()),
            Ok(_) => CallOutcome::error(format!("no tool named {name:?}")),
        }
    }

    /// The session's workspace as `context` has it: its directory and its
    /// settings (a worktree EnterWorktree made replaces the directory).
    fn workspace(&self, context: &SessionContext) -> (Arc<PathBuf>, Arc<SessionInfo>) {
        if context.worktree.is_none() && context.settings.is_empty() {
            return (self.cwd.clone(), self.services.info.clone());
        }
        let mut info = (*self.services.info).clone();
        context.apply_settings(&mut info);
        match &context.worktree {
            None => (self.cwd.clone(), Arc::new(info)),
            Some(w) => {
                info.cwd = w.cwd.clone();
                (Arc::new(w.cwd.clone()), Arc::new(info))
            }
        }
    }

    /// The session's tools now.
    pub fn tools(&self) -> Arc<ToolSet> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the session's tools (an MCP server's list changed); calls
    /// admitted before keep the tool they resolved. Returns the old set.
    pub fn replace_tools(&self, tools: Arc<ToolSet>) -> Arc<ToolSet> {
        std::mem::replace(&mut *self.tools.write().unwrap_or_else(|e| e.into_inner()), tools)
    }

    /// The session's workspace as calls see it now (a worktree's, once
    /// EnterWorktree moved there).
    pub fn workspace_dir(&self) -> PathBuf {
        self.with_context(|c| (*self.workspace(c).0).clone())
    }

    fn tool_context(&self, cancel: CancellationToken, context: &SessionContext) -> ToolContext {
        let (cwd, info) = self.workspace(context);
        let mut services = crate::tool::context::Services::default();
        services.provide(self.services.jobs.clone());
        services.provide(self.services.sandbox.clone());
        ToolContext {
            session_id: self.session_id.clone(),
            cwd,
            cancel,
            tools: self.tools(),
            session: Arc::new(context.clone()),
            info,
            output_dir: self.services.output_dir.clone(),
            rules: self.services.rules.clone(),
            grant: crate::tool::context::CallGrant::default(),
            services,
        }
    }

    /// Carries out the machine's actions, under the lock.
    fn carry_out(&self, inner: &mut Inner, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Start(i) => self.start(inner, i),
                Action::Abort(i) => {
                    if let Some(token) = &inner.slots[i].token {
                        token.cancel();
                    }
                }
                Action::Cancelled(_) => {}
                Action::Yield(i, reason) => self.yield_result(inner, i, reason),
                Action::Drop(i) => {
                    let slot = &mut inner.slots[i];
                    slot.live.store(false, Ordering::Relaxed);
                    slot.prepared = None;
                    slot.outcome = None;
                    slot.waiter = None;
                    // A running call's token must stay to be cancelled by
                    // the turn's; it goes when the call reports back.
                    if !inner.machine.is_running(i) {
                        slot.token = None;
                    }
                }
                Action::TurnCompleted(t) => {
                    self.events.push(EventKind::TurnCompleted { turn_id: inner.turns[t].id.to_string() });
                }
                Action::TurnDiscarded(t) => {
                    inner.turns[t].token.cancel();
                    self.events.push(EventKind::TurnDiscarded { turn_id: inner.turns[t].id.to_string() });
                }
            }
        }
    }

    fn start(&self, inner: &mut Inner, i: CallIdx) {
        let Some(call) = inner.slots[i].prepared.take() else {
            // Cannot happen (a call starts once); report it rather than hang.
            let actions = inner.machine.apply(Event::Finished { call: i, failed: false });
            inner.slots[i].outcome = Some(CallOutcome::error("internal error: the call was started twice"));
            return self.carry_out(inner, actions);
        };
        let token = inner.slots[i].token.clone().unwrap_or_default();
        // The user's PreToolUse hooks come first: the call goes on once
        // they have answered (see `hooked`).
        if self.services.hooks.wants(agentd_protocol::hooks::HookEvent::PreToolUse, &inner.slots[i].name) {
            let Some(me) = self.me.upgrade() else { return };
            let guard = ReportOnDrop { me: Some(me.clone()), call: i };
            let asked = self.pre_tool_use_input(inner, i);
            inner.starts.push(Box::pin(me.before_call(guard, i, call, token, asked)));
            return;
        }
        self.launch(inner, i, call, token, hooked::Pre::default());
    }

    fn finished(&self, i: CallIdx, outcome: CallOutcome, failed: bool) {
        let mut inner = self.lock();
        self.finished_locked(&mut inner, i, outcome, failed);
    }

    fn finished_locked(&self, inner: &mut Inner, i: CallIdx, outcome: CallOutcome, failed: bool) {
        if failed && let Some(t) = inner.machine.turn_of(i) {
            let who = (inner.slots[i].name.clone(), inner.slots[i].tool_use_id.clone());
            if let Some(turn) = inner.turns.get_mut(t) {
                turn.failed.get_or_insert(who);
            }
        }
        if inner.machine.state(i) != Some(machine::CallState::Discarded) {
            inner.slots[i].outcome = Some(outcome);
        } else {
            inner.slots[i].token = None;
        }
        let actions = inner.machine.apply(Event::Finished { call: i, failed });
        self.carry_out(inner, actions);
        self.report_closed(inner);
    }

    /// `session/closed` is the stream's last event: pushed once the session
    /// is closed and no call is running any more (their cancelled results
    /// come first).
    fn report_closed(&self, inner: &mut Inner) {
        if inner.closed && !inner.close_reported && inner.machine.running() == 0 {
            inner.close_reported = true;
            self.events.push(EventKind::SessionClosed {});
        }
    }

    fn yield_result(&self, inner: &mut Inner, i: CallIdx, reason: Option<CancelReason>) {
        let own = inner.slots[i].outcome.take();
        let mut outcome = match reason {
            Some(reason) => {
                let mut message = self.cancel_message(inner, i, &reason);
                // What a cancelled call had done so far (a command's output)
                // is still worth showing.
                if let Some(own) = own {
                    for block in own.content {
                        if let ContentBlock::Text { text } = block
                            && !text.is_empty()
                            && text != "cancelled"
                        {
                            message.push_str("\n\n");
                            message.push_str(&text);
                        }
                    }
                }
                CallOutcome::error(message)
            }
            None => own.unwrap_or_else(|| CallOutcome::error("the call produced no result")),
        };
        // The task list's tools: what they changed is sent after their result.
        let tasks_before = outcome.modifier.is_some().then(|| inner.context.tasks.clone());
        let worktree_before = inner.context.worktree.clone();
        if let Some(modifier) = outcome.modifier.take() {
            modifier(&mut inner.context);
        }
        // Before the result that announces it.
        self.changed(&inner.context);
        let tasks_changed = tasks_before.filter(|b| *b != inner.context.tasks).map(|_| inner.context.tasks.clone());
        // Sent with the result (and so journaled before anyone sees it): a
        // restart restores the worktree from it even before the session's
        // record is saved again.
        let worktree_changed = (worktree_before != inner.context.worktree).then(|| inner.context.worktree.clone());
        let slot = &mut inner.slots[i];
        slot.prepared = None;
        slot.token = None;
        slot.live.store(false, Ordering::Relaxed);
        self.events.push(EventKind::ToolResult {
            turn_id: slot.turn_id.to_string(),
            tool_use_id: slot.tool_use_id.clone(),
            name: slot.name.clone(),
            content: outcome.content.clone(),
            is_error: outcome.is_error,
            render: outcome.render.clone(),
            sandbox: slot.sandbox,
            network: slot.network,
            structured_content: outcome.structured.clone(),
        });
        if let Some(worktree) = worktree_changed {
            self.events.push(EventKind::WorktreeChanged {
                turn_id: slot.turn_id.to_string(),
                tool_use_id: slot.tool_use_id.clone(),
                worktree,
            });
        }
        if let Some(tasks) = tasks_changed {
            self.events.push(EventKind::TasksChanged {
                turn_id: slot.turn_id.to_string(),
                tool_use_id: slot.tool_use_id.clone(),
                tasks,
            });
        }
        if let Some(waiter) = slot.waiter.take() {
            let _ = waiter.send(ToolCallResult {
                name: slot.name.clone(),
                content: outcome.content,
                is_error: outcome.is_error,
                render: outcome.render,
                render_use: slot.render_use.clone(),
                sandbox: slot.sandbox,
                network: slot.network,
                structured_content: outcome.structured,
            });
        }
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

    /// Records kept now: calls, turns, and the event log's events and
    /// estimated bytes (what bounds a session's memory).
    pub fn kept(&self) -> (usize, usize, usize, usize) {
        let (calls, turns) = self.lock().machine.kept();
        let (events, bytes) = self.events.kept();
        (calls, turns, events, bytes)
    }

    /// Stops everything for a daemon shutdown: calls are cancelled (block
    /// tools too) and their results recorded, but the session is not
    /// closed: it is back after the restart.
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
