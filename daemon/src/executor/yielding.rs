//! Carrying out the machine's actions: starting calls, reporting them
//! finished, and yielding results in order with their context modifiers.

use super::*;
use crate::metrics::Failure;

impl SessionExecutor {
    /// Carries out the machine's actions, under the lock.
    pub(super) fn carry_out(&self, inner: &mut Inner, actions: Vec<Action>) {
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
                Action::TurnCompleted(t) => self.turn_completed(inner, t),
                Action::TurnDiscarded(t) => {
                    inner.turns[t].token.cancel();
                    self.events.push(EventKind::TurnDiscarded { turn_id: inner.turns[t].id.to_string() });
                }
            }
        }
    }

    pub(super) fn start(&self, inner: &mut Inner, i: CallIdx) {
        let Some(call) = inner.slots[i].prepared.take() else {
            // Cannot happen (a call starts once); report it rather than hang.
            let actions = inner.machine.apply(Event::Finished { call: i, failed: false });
            inner.slots[i].outcome = Some(CallOutcome::internal("the call was started twice"));
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

    pub(super) fn finished(&self, i: CallIdx, outcome: CallOutcome, failed: bool) {
        let mut inner = self.lock();
        self.finished_locked(&mut inner, i, outcome, failed);
    }

    pub(super) fn finished_locked(&self, inner: &mut Inner, i: CallIdx, outcome: CallOutcome, failed: bool) {
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
    pub(super) fn report_closed(&self, inner: &mut Inner) {
        if inner.closed && !inner.close_reported && inner.machine.running() == 0 && inner.batches_running == 0 {
            inner.close_reported = true;
            self.events.push(EventKind::SessionClosed {});
        }
    }

    pub(super) fn yield_result(&self, inner: &mut Inner, i: CallIdx, reason: Option<CancelReason>) {
        let own = inner.slots[i].outcome.take();
        let mut outcome = match reason {
            Some(reason) => {
                // The render is the one line saying why (a UI shows it as a
                // summary: issue 49 #7); the content adds what the call had
                // done so far (a command's output), still worth showing.
                let summary = self.cancel_message(inner, i, &reason);
                let mut message = summary.clone();
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
                CallOutcome { render: summary, ..CallOutcome::error(message).failed_as(Failure::Cancelled) }
            }
            None => own.unwrap_or_else(|| CallOutcome::internal("the call produced no result")),
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
        self.tally(inner, i, &outcome);
        let slot = &mut inner.slots[i];
        let mut changes = self.services.history.changes_of(&slot.turn_id, &slot.tool_use_id);
        // A result stays small: the first changes, and how many more.
        let changes_omitted = (changes.len() > RESULT_CHANGES).then(|| (changes.len() - RESULT_CHANGES) as u64);
        changes.truncate(RESULT_CHANGES);
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
            content_meta: outcome.content_meta.to_vec(),
            changes: changes.clone(),
            changes_omitted,
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
        answer_waiter(slot, outcome, changes, changes_omitted);
    }
}

/// A `tool/call` waiting for the call's result gets it.
/// The most changes a result lists.
const RESULT_CHANGES: usize = 1_000;

fn answer_waiter(
    slot: &mut Slot,
    outcome: CallOutcome,
    changes: Vec<agentd_protocol::changes::FileChange>,
    changes_omitted: Option<u64>,
) {
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
            content_meta: outcome.content_meta.into_vec(),
            changes,
            changes_omitted,
        });
    }
}

impl SessionExecutor {
    /// A call's result, counted (`--metrics`) and kept for its turn's
    /// PostToolBatch hooks when they want it.
    fn tally(&self, inner: &mut Inner, i: CallIdx, outcome: &CallOutcome) {
        let slot = &inner.slots[i];
        if let Some(metrics) = self.metrics.get() {
            let failure = outcome.failure.or(outcome.is_error.then_some(Failure::Tool));
            metrics.record(&slot.name, slot.since.elapsed(), failure);
        }
        if let Some(t) = inner.machine.turn_of(i)
            && let Some(batch) = inner.turns.get_mut(t).and_then(|turn| turn.batch.as_mut())
            && let Some(entry) = batch.iter_mut().find(|e| e["tool_use_id"] == slot.tool_use_id.as_str())
        {
            entry["tool_response"] = super::hooked::as_sent(&outcome.content);
        }
    }

    /// Gives the executor the daemon's call counters (`--metrics`).
    pub fn set_metrics(&self, metrics: Arc<crate::metrics::Metrics>) {
        let _ = self.metrics.set(metrics);
    }
}
