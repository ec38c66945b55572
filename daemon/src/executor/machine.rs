//! The streaming executor's state machine (after Claude Code's
//! StreamingToolExecutor), kept free of I/O: [`Machine::apply`] takes an
//! event and returns the actions the driver must carry out. The rules are the
//! numbered invariants in `executor/mod.rs`; each but 8 (context modifiers,
//! which the driver applies) has a unit test named after it in
//! `machine_tests.rs`.

/// Index of a call in the session's request order.
pub type CallIdx = usize;
/// Index of a turn in the session.
pub type TurnIdx = usize;

/// Records addressed by an index that only grows, of which only the recent
/// ones are kept: the oldest are dropped once they are done with
/// ([`Machine::compact`]), so a session's memory does not grow with the
/// number of calls it has made.
#[derive(Debug)]
pub struct Window<T> {
    /// The index of `items[0]`.
    base: usize,
    items: std::collections::VecDeque<T>,
}

impl<T> Default for Window<T> {
    fn default() -> Self {
        Window { base: 0, items: std::collections::VecDeque::new() }
    }
}

impl<T> Window<T> {
    /// The index the next pushed item gets.
    pub fn end(&self) -> usize {
        self.base + self.items.len()
    }

    /// The index of the oldest item kept.
    pub fn start(&self) -> usize {
        self.base
    }

    /// Appends an item; returns its index.
    pub fn push(&mut self, item: T) -> usize {
        self.items.push_back(item);
        self.end() - 1
    }

    /// The item at `i`, if it is still kept.
    pub fn get(&self, i: usize) -> Option<&T> {
        i.checked_sub(self.base).and_then(|j| self.items.get(j))
    }

    /// The item at `i`, if it is still kept.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        i.checked_sub(self.base).and_then(|j| self.items.get_mut(j))
    }

    /// The oldest item kept.
    pub fn front(&self) -> Option<&T> {
        self.items.front()
    }

    /// Drops the oldest item.
    pub fn pop_front(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        self.base += 1;
        Some(item)
    }

    /// Items kept.
    pub fn len(&self) -> usize {
        self.items.len()
    }
}

impl<T> std::ops::Index<usize> for Window<T> {
    type Output = T;
    /// Panics when the item was dropped: callers index only live records.
    fn index(&self, i: usize) -> &T {
        let base = self.base;
        self.get(i).unwrap_or_else(|| panic!("record {i} is no longer kept (oldest {base})"))
    }
}

impl<T> std::ops::IndexMut<usize> for Window<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        let base = self.base;
        self.get_mut(i).unwrap_or_else(|| panic!("record {i} is no longer kept (oldest {base})"))
    }
}

/// What [`Machine::compact`] dropped: the driver drops its records of the
/// same calls and turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compacted {
    /// Calls dropped from the front.
    pub calls: usize,
    /// Turns dropped from the front.
    pub turns: usize,
}

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// Accepted, waiting to start.
    Queued,
    /// Running.
    Executing,
    /// Finished (or cancelled before it ran); its result waits its turn.
    Completed,
    /// Its result was handed out.
    Yielded,
    /// Its turn was discarded; nothing of it will be handed out.
    Discarded,
}

/// Why a call was cancelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelReason {
    /// The client asked (`turn/cancel`).
    Client,
    /// An earlier failure of a call whose tool cancels its siblings (Bash).
    SiblingFailed {
        /// The call that failed.
        call: CallIdx,
    },
    /// The session is closing.
    SessionClosed,
    /// The daemon is stopping (the session stays, for after the restart).
    DaemonStopped,
}

/// What the machine needs to know about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSpec {
    /// Its turn.
    pub turn: TurnIdx,
    /// May run beside other safe calls.
    pub safe: bool,
    /// Its failure cancels its siblings (Bash).
    pub cancels_siblings: bool,
    /// Its tool lets a running call finish when interrupted.
    pub block: bool,
}

/// What to cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One call.
    Call(CallIdx),
    /// One turn's calls.
    Turn(TurnIdx),
    /// Every call of the session.
    All,
}

/// An input to the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A call that may run.
    Submit(CallSpec),
    /// A call refused before it could run (unknown tool, bad input,
    /// permission): completed at once, yielded in its place.
    SubmitRefused {
        /// Its turn.
        turn: TurnIdx,
    },
    /// A running call finished.
    Finished {
        /// The call.
        call: CallIdx,
        /// Its result is an error.
        failed: bool,
    },
    /// No more calls come in this turn.
    EndTurn(TurnIdx),
    /// Cancel calls.
    Cancel {
        /// Which.
        scope: Scope,
        /// Why.
        reason: CancelReason,
    },
    /// Discard a turn (streaming fallback).
    Discard(TurnIdx),
}

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start running the call.
    Start(CallIdx),
    /// Stop the running call (cancel its token).
    Abort(CallIdx),
    /// A queued call was cancelled before it ran (its error result follows
    /// in a `Yield`).
    Cancelled(CallIdx),
    /// Hand out the call's result: its own, or (when `Some`) an error saying
    /// why it was cancelled. Apply its context modifier now.
    Yield(CallIdx, Option<CancelReason>),
    /// Forget the call: its turn was discarded.
    Drop(CallIdx),
    /// The turn ended and every result of it is out.
    TurnCompleted(TurnIdx),
    /// The turn was discarded.
    TurnDiscarded(TurnIdx),
}

#[derive(Debug)]
struct Call {
    spec: CallSpec,
    state: CallState,
    /// Between `Start` and `Finished`, whatever the state says.
    running: bool,
    /// Set when the call's own result will not be used.
    aborted: Option<CancelReason>,
}

#[derive(Debug, Default)]
struct Turn {
    ended: bool,
    /// `TurnCompleted` or `TurnDiscarded` was emitted.
    done: bool,
    /// Calls not yet yielded or discarded.
    pending: usize,
    /// The failure that cancelled this turn's calls.
    sibling_failure: Option<CallIdx>,
}

/// The state of one session's calls.
#[derive(Debug)]
pub struct Machine {
    calls: Window<Call>,
    turns: Window<Turn>,
    cap: usize,
    sibling_cancel: bool,
    /// Every call before this one is started, done or discarded.
    queue_head: usize,
    /// Every call before this one is yielded or discarded.
    next_yield: usize,
    running: usize,
    running_unsafe: usize,
    /// Turns not yet completed or discarded.
    open_turns: std::collections::BTreeSet<TurnIdx>,
}

impl Machine {
    /// A machine running at most `cap` calls at once; `sibling_cancel`
    /// turns invariant 4 on.
    pub fn new(cap: usize, sibling_cancel: bool) -> Self {
        Machine {
            calls: Window::default(),
            turns: Window::default(),
            cap: cap.max(1),
            sibling_cancel,
            queue_head: 0,
            next_yield: 0,
            running: 0,
            running_unsafe: 0,
            open_turns: Default::default(),
        }
    }

    /// Opens a turn.
    pub fn new_turn(&mut self) -> TurnIdx {
        let t = self.turns.push(Turn::default());
        self.open_turns.insert(t);
        t
    }

    /// The index the next submitted call will get.
    pub fn next_call(&self) -> CallIdx {
        self.calls.end()
    }

    /// Drops the oldest records no event can concern any more: calls whose
    /// result is out (or that were discarded) and that are not running,
    /// and turns that are done. Returns how many of each, from the front.
    pub fn compact(&mut self) -> Compacted {
        let mut out = Compacted::default();
        while let Some(c) = self.calls.front() {
            let i = self.calls.start();
            let done = matches!(c.state, CallState::Yielded | CallState::Discarded) && !c.running;
            if !done || i >= self.next_yield || i >= self.queue_head {
                break;
            }
            self.calls.pop_front();
            out.calls += 1;
        }
        while self.turns.front().is_some_and(|t| t.done) {
            self.turns.pop_front();
            out.turns += 1;
        }
        out
    }

    /// Calls and turns kept now.
    pub fn kept(&self) -> (usize, usize) {
        (self.calls.len(), self.turns.len())
    }

    /// A call's state.
    pub fn state(&self, call: CallIdx) -> Option<CallState> {
        self.calls.get(call).map(|c| c.state)
    }

    /// A call's turn.
    pub fn turn_of(&self, call: CallIdx) -> Option<TurnIdx> {
        self.calls.get(call).map(|c| c.spec.turn)
    }

    /// Whether a turn has ended (or is done).
    pub fn turn_ended(&self, turn: TurnIdx) -> bool {
        self.turns.get(turn).is_some_and(|t| t.ended || t.done)
    }

    /// Whether a call is between `Start` and `Finished`.
    pub fn is_running(&self, call: CallIdx) -> bool {
        self.calls.get(call).is_some_and(|c| c.running)
    }

    /// Calls running now.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Applies `event`; returns what the driver must do, in order.
    pub fn apply(&mut self, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        match event {
            Event::Submit(spec) => self.submit(spec, &mut actions),
            Event::SubmitRefused { turn } => {
                self.push(CallSpec { turn, safe: true, cancels_siblings: false, block: false }, CallState::Completed);
            }
            Event::Finished { call, failed } => self.finished(call, failed, &mut actions),
            Event::EndTurn(turn) => {
                if let Some(t) = self.turns.get_mut(turn) {
                    t.ended = true;
                }
            }
            Event::Cancel { scope, reason } => {
                let targets: Vec<CallIdx> = self.scope(scope).collect();
                for call in targets {
                    self.cancel(call, reason.clone(), &mut actions);
                }
            }
            Event::Discard(turn) => self.discard(turn, &mut actions),
        }
        // Results first, then starts: the event stream then shows a call's
        // result before the calls its completion let start.
        self.yield_ready(&mut actions);
        self.schedule(&mut actions);
        self.complete_turns(&mut actions);
        actions
    }

    fn push(&mut self, spec: CallSpec, state: CallState) -> CallIdx {
        if let Some(t) = self.turns.get_mut(spec.turn) {
            t.pending += 1;
        }
        self.calls.push(Call { spec, state, running: false, aborted: None })
    }

    fn submit(&mut self, spec: CallSpec, _actions: &mut [Action]) {
        let failure = self.turns.get(spec.turn).and_then(|t| t.sibling_failure);
        let idx = self.push(spec, CallState::Queued);
        if let Some(call) = failure {
            // Invariant 4: the turn already lost a sibling-cancelling call.
            let c = &mut self.calls[idx];
            c.state = CallState::Completed;
            c.aborted = Some(CancelReason::SiblingFailed { call });
        }
    }

    fn finished(&mut self, call: CallIdx, failed: bool, actions: &mut Vec<Action>) {
        let Some(c) = self.calls.get_mut(call) else { return };
        if !c.running {
            return;
        }
        c.running = false;
        self.running -= 1;
        if !c.spec.safe {
            self.running_unsafe -= 1;
        }
        if c.state == CallState::Executing {
            c.state = CallState::Completed;
        }
        let spec = c.spec;
        let was_aborted = c.aborted.is_some();
        if failed && spec.cancels_siblings && self.sibling_cancel && !was_aborted {
            let turn = spec.turn;
            if let Some(t) = self.turns.get_mut(turn) {
                t.sibling_failure.get_or_insert(call);
            }
            let siblings: Vec<CallIdx> = self.scope(Scope::Turn(turn)).filter(|i| *i != call).collect();
            for sibling in siblings {
                self.cancel(sibling, CancelReason::SiblingFailed { call }, actions);
            }
        }
    }

    /// Calls in `scope` that are queued or executing (the ones a cancel
    /// can still change).
    fn scope(&self, scope: Scope) -> impl Iterator<Item = CallIdx> + '_ {
        let (start, end) = match scope {
            Scope::Call(i) => (i.max(self.calls.start()), (i + 1).min(self.calls.end())),
            // Everything before `next_yield` is yielded or discarded.
            Scope::Turn(_) | Scope::All => (self.next_yield, self.calls.end()),
        };
        (start..end).filter(move |i| {
            let c = &self.calls[*i];
            let in_scope = match scope {
                Scope::Turn(t) => c.spec.turn == t,
                Scope::Call(_) | Scope::All => true,
            };
            in_scope && matches!(c.state, CallState::Queued | CallState::Executing)
        })
    }

    fn cancel(&mut self, call: CallIdx, reason: CancelReason, actions: &mut Vec<Action>) {
        let c = &mut self.calls[call];
        match c.state {
            CallState::Queued => {
                c.state = CallState::Completed;
                c.aborted = Some(reason);
                actions.push(Action::Cancelled(call));
            }
            CallState::Executing => {
                // Invariant 7: a block tool finishes what it started when the
                // user interrupts; a failed sibling or a closing session
                // stop it all the same.
                if c.spec.block && reason == CancelReason::Client {
                    return;
                }
                if c.aborted.is_none() {
                    c.aborted = Some(reason);
                    actions.push(Action::Abort(call));
                }
            }
            CallState::Completed | CallState::Yielded | CallState::Discarded => {}
        }
    }

    fn discard(&mut self, turn: TurnIdx, actions: &mut Vec<Action>) {
        let Some(t) = self.turns.get(turn) else { return };
        if t.done {
            return;
        }
        for i in self.next_yield..self.calls.end() {
            let c = &mut self.calls[i];
            if c.spec.turn != turn || matches!(c.state, CallState::Yielded | CallState::Discarded) {
                continue;
            }
            let was_running = c.running;
            c.state = CallState::Discarded;
            if was_running && c.aborted.is_none() {
                // Invariant 5: even block tools; their processes end.
                c.aborted = Some(CancelReason::Client);
                actions.push(Action::Abort(i));
            }
            actions.push(Action::Drop(i));
        }
        let t = &mut self.turns[turn];
        t.pending = 0;
        t.done = true;
        t.ended = true;
        actions.push(Action::TurnDiscarded(turn));
    }

    /// Invariant 2: start queued calls in request order while allowed.
    fn schedule(&mut self, actions: &mut Vec<Action>) {
        while self.queue_head < self.calls.end() && self.calls[self.queue_head].state != CallState::Queued {
            self.queue_head += 1;
        }
        for i in self.queue_head..self.calls.end() {
            let c = &self.calls[i];
            if c.state != CallState::Queued {
                continue;
            }
            let allowed = self.running < self.cap && (self.running == 0 || (c.spec.safe && self.running_unsafe == 0));
            if !allowed {
                break;
            }
            let c = &mut self.calls[i];
            c.state = CallState::Executing;
            c.running = true;
            self.running += 1;
            if !c.spec.safe {
                self.running_unsafe += 1;
            }
            actions.push(Action::Start(i));
        }
    }

    /// Invariant 3: yield completed calls in request order within their
    /// turn. A turn's results never wait for another turn's: two clients'
    /// `tool/call`s in one session (each a turn of its own) come back as
    /// each finishes.
    fn yield_ready(&mut self, actions: &mut Vec<Action>) {
        // Turns with a call still to yield; once each of them has an earlier
        // call that is not complete, nothing further can be yielded.
        let mut unfinished =
            self.open_turns.iter().filter(|t| self.turns.get(**t).is_some_and(|t| t.pending > 0)).count();
        let mut blocked: Vec<TurnIdx> = Vec::new();
        let mut prefix = true;
        let mut i = self.next_yield;
        while i < self.calls.end() && blocked.len() < unfinished {
            let c = &mut self.calls[i];
            let turn = c.spec.turn;
            match c.state {
                CallState::Completed if !blocked.contains(&turn) => {
                    c.state = CallState::Yielded;
                    actions.push(Action::Yield(i, c.aborted.clone()));
                    if let Some(t) = self.turns.get_mut(turn) {
                        t.pending = t.pending.saturating_sub(1);
                        if t.pending == 0 {
                            unfinished -= 1;
                        }
                    }
                }
                CallState::Yielded | CallState::Discarded => {}
                CallState::Queued | CallState::Executing | CallState::Completed => {
                    if !blocked.contains(&turn) {
                        blocked.push(turn);
                    }
                    prefix = false;
                }
            }
            i += 1;
            if prefix {
                self.next_yield = i;
            }
        }
        if prefix {
            // Everything scanned is out; what follows (if anything) is
            // yielded or discarded up to the first call still pending.
            while self
                .calls
                .get(self.next_yield)
                .is_some_and(|c| matches!(c.state, CallState::Yielded | CallState::Discarded))
            {
                self.next_yield += 1;
            }
        }
    }

    /// Invariant 9: a turn completes once it ended and all of it is out.
    fn complete_turns(&mut self, actions: &mut Vec<Action>) {
        let mut finished = Vec::new();
        for &i in &self.open_turns {
            let t = &mut self.turns[i];
            if t.done {
                finished.push(i);
            } else if t.ended && t.pending == 0 {
                t.done = true;
                finished.push(i);
                actions.push(Action::TurnCompleted(i));
            }
        }
        for i in finished {
            self.open_turns.remove(&i);
        }
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
