//! Running one admitted call: its permission check and ask, its hooks,
//! the sandbox profile it runs in, its future and what it yields.

use super::*;
use crate::metrics::Failure;
use crate::tool::ToolKind;

/// An admitted call, ready to run: what its future needs.
struct Admitted {
    i: CallIdx,
    /// Reports the call finished however its future ends, even dropped
    /// before it first runs.
    guard: ReportOnDrop,
    call: Box<dyn PreparedCall>,
    ctx: ToolContext,
    token: CancellationToken,
    wait: hooked::Gate,
    started: EventKind,
    after: Option<hooked::After>,
    /// What its PreToolUse hooks added, appended to its result.
    pre_context: Vec<String>,
    reporter: ProgressReporter,
}

impl SessionExecutor {
    /// Admits the call in slot `i` and starts it (or its permission
    /// request): `pre` is what its PreToolUse hooks said.
    pub(super) fn launch(
        &self,
        inner: &mut Inner,
        i: CallIdx,
        call: Box<dyn PreparedCall>,
        token: CancellationToken,
        pre: hooked::Pre,
    ) {
        let mut ctx = self.tool_context(token.clone(), &inner.context);
        let mut grant = Grant::default();
        let admitted = self.admit(&inner.slots[i], call.as_ref(), &inner.context, &ctx, &mut grant, pre.allows());
        let admitted = pre.overrule(admitted, &inner.slots[i]);
        let Grant { approved_outside, profile, scrub_env, effects } = grant;
        ctx.grant.scrub_env = scrub_env;
        ctx.grant.effects = effects;
        ctx.grant.may_write_protected =
            inner.context.mode.unwrap_or(self.services.info.mode) == agentd_protocol::session::PermissionMode::Bypass;
        if let Some(profile) = profile {
            self.confine(inner, i, &mut ctx, profile);
        }
        let ask = match admitted {
            Ok(ask) => ask,
            Err(refused) => {
                if self.services.hooks.wants(agentd_protocol::hooks::HookEvent::PermissionDenied, &inner.slots[i].name)
                    && let Some(me) = self.me.upgrade()
                {
                    let denied = hooked::denied(me, &inner.slots[i], i, refused, token);
                    return inner.starts.push(denied);
                }
                inner.slots[i].outcome = Some(refused);
                let actions = inner.machine.apply(Event::Finished { call: i, failed: false });
                return self.carry_out(inner, actions);
            }
        };
        let kind = call.kind();
        let after = self.after_call_input(inner, i, kind);
        inner.slots[i].input = None;
        ctx.grant.approved_outside = approved_outside.map(Arc::new);
        let slot = &inner.slots[i];
        let started = EventKind::ToolStarted {
            turn_id: slot.turn_id.to_string(),
            tool_use_id: slot.tool_use_id.clone(),
            name: slot.name.clone(),
            render: slot.render_use.clone(),
        };
        let ids = CallIds {
            turn_id: slot.turn_id.to_string(),
            tool_use_id: slot.tool_use_id.clone(),
            name: slot.name.clone(),
            render: slot.render_use.clone(),
        };
        let wait = match ask {
            None => {
                self.events.push(started.clone());
                hooked::Gate::Run
            }
            Some(ask)
                if self.services.hooks.wants(agentd_protocol::hooks::HookEvent::PermissionRequest, &slot.name) =>
            {
                hooked::Gate::HooksFirst(ask, ids.clone())
            }
            Some(ask) => hooked::Gate::Ask(self.open_request(&ids, ask, None)),
        };
        self.provide_lines(&mut ctx, kind, slot, &ids);
        let reporter = self.progress_reporter(slot);
        // A strong reference: a closed session's executor lives until its
        // last call has reported back (and `session/closed` is pushed).
        let Some(me) = self.me.upgrade() else { return };
        // Debug level: an enabled span costs a registry slot and formatted
        // fields on every call.
        let span = tracing::debug_span!("tool", name = %slot.name, tool_use_id = %slot.tool_use_id);
        let guard = ReportOnDrop { me: Some(me), call: i };
        let admitted =
            Admitted { i, guard, call, ctx, token, wait, started, after, pre_context: pre.context, reporter };
        inner.starts.push(Box::pin(Self::drive(admitted).instrument(span)));
    }

    /// What a call of `kind` gets beside the session's services: a line
    /// back to its session for what it does while it runs.
    fn provide_lines(&self, ctx: &mut ToolContext, kind: ToolKind, slot: &Slot, ids: &CallIds) {
        // Calls that change files record what they change, under their ids.
        if matches!(kind, ToolKind::EditsFile | ToolKind::Shell) {
            ctx.services.provide(Arc::new(crate::fs::history::CallRecorder {
                history: self.services.history.clone(),
                turn_id: slot.turn_id.clone(),
                tool_use_id: slot.tool_use_id.clone(),
            }));
        }
        if kind == ToolKind::Agents
            && let Some(host) = self.agent_host.get()
        {
            let log = self.events.clone();
            let runners = self.events.clone();
            let (turn_id, tool_use_id) = (slot.turn_id.to_string(), slot.tool_use_id.clone());
            ctx.services.provide(Arc::new(crate::agents::AgentCall {
                host: host.clone(),
                requests: self.agent_requests.clone(),
                announce: Arc::new(move |a: crate::agents::Announce| {
                    log.push(EventKind::AgentRequest {
                        turn_id: turn_id.clone(),
                        tool_use_id: tool_use_id.clone(),
                        request_id: a.request_id,
                        child_session_id: a.child_session_id,
                        subagent_type: a.subagent_type,
                        description: a.description,
                        prompt: a.prompt,
                        instructions: a.instructions,
                        tools: a.tools,
                        model: a.model,
                        effort: a.effort,
                    });
                }),
                runner: Arc::new(move || runners.has_agent_runner()),
                hooks: self.services.hooks.clone(),
                about: crate::hooks::About {
                    turn_id: Some(slot.turn_id.to_string()),
                    tool_use_id: Some(slot.tool_use_id.clone()),
                    tool_name: Some(slot.name.clone()),
                },
            }));
        }
        if kind == ToolKind::Shell {
            let line: crate::tool::context::CallLine = Arc::new(channel::CallPort {
                executor: self.me.clone(),
                call: ids.clone(),
                token: ctx.cancel.clone(),
                notes: std::sync::atomic::AtomicUsize::new(0),
            });
            ctx.services.provide(Arc::new(line));
            let log = self.events.clone();
            let events: crate::tool::context::SessionEvents = Arc::new(move |event| {
                log.push(event);
            });
            ctx.services.provide(Arc::new(events));
        }
        if kind == ToolKind::Peers
            && let Some(book) = self.peers.get()
        {
            ctx.services.provide(Arc::new(book.clone()));
        }
        if kind == ToolKind::Schedules
            && let Some(schedules) = self.schedules.get()
        {
            ctx.services.provide(schedules.clone());
        }
        if kind == ToolKind::Messages {
            let log = self.events.clone();
            let (turn_id, tool_use_id) = (slot.turn_id.to_string(), slot.tool_use_id.clone());
            let messages: crate::tool::context::UserMessages = Arc::new(move |message: String| {
                log.push(EventKind::UserMessage {
                    turn_id: turn_id.clone(),
                    tool_use_id: tool_use_id.clone(),
                    message,
                });
            });
            ctx.services.provide(Arc::new(messages));
        }
    }

    /// Where the call's progress goes: its session's events, while the
    /// call is live (not discarded).
    fn progress_reporter(&self, slot: &Slot) -> ProgressReporter {
        let log = self.events.clone();
        let live = slot.live.clone();
        let (turn_id, tool_use_id) = (slot.turn_id.to_string(), slot.tool_use_id.clone());
        Arc::new(move |p: ProgressReport| {
            if live.load(Ordering::Relaxed) {
                log.push(EventKind::ToolProgress {
                    turn_id: turn_id.clone(),
                    tool_use_id: tool_use_id.clone(),
                    data: p.data,
                    render: p.render,
                });
            }
        })
    }

    /// Runs an admitted call: waits for its approval if it needs one,
    /// runs it (a grace period to stop on its own once cancelled), runs its
    /// PostToolUse hooks, and reports it finished.
    async fn drive(admitted: Admitted) {
        let Admitted { i, mut guard, call, mut ctx, token, wait, started, after, pre_context, reporter } = admitted;
        let Some(events) = guard.me.as_ref().map(|me| me.events.clone()) else { return };
        let mut after = after;
        let mut call = call;
        let mut started = started;
        match wait {
            hooked::Gate::Run => {}
            gate => {
                let Some(me) = guard.me.clone() else { return };
                match me.approval(gate, &mut call, &mut ctx, i, &token).await {
                    Ok(rewritten) => {
                        // A PermissionRequest hook's rewrite is what
                        // runs: what is shown and what PostToolUse
                        // hooks get say so.
                        if let Some(input) = rewritten {
                            if let EventKind::ToolStarted { render, .. } = &mut started {
                                *render = call.render_use();
                            }
                            if let Some(after) = &mut after {
                                after.input = input;
                            }
                        }
                        events.push(started);
                    }
                    Err(refusal) => {
                        let outcome = admit::refused(call.as_ref(), refusal);
                        if let Some(me) = guard.me.take() {
                            me.finished(i, outcome, false);
                        }
                        return;
                    }
                }
            }
        }
        let run = call.run(ctx, Some(reporter));
        // The token is cancelled only when the machine aborts the
        // call (or its turn or session ends). The tool gets a grace
        // period to stop on its own (a command's processes are ended
        // and its partial output kept); then it is dropped.
        let mut run = std::pin::pin!(AssertUnwindSafe(run).catch_unwind());
        let outcome = tokio::select! {
            outcome = &mut run => outcome,
            _ = token.cancelled() => match tokio::time::timeout(ABORT_GRACE, &mut run).await {
                Ok(outcome) => outcome,
                Err(_) => Ok(CallOutcome::error("cancelled").failed_as(Failure::Cancelled)),
            },
        };
        let outcome = outcome.unwrap_or_else(|_| CallOutcome::internal("the tool failed unexpectedly"));
        let (outcome, completed) = match (&guard.me, after) {
            (Some(me), Some(after)) if !token.is_cancelled() => me.after_call(after, outcome, &token).await,
            _ => (outcome, Vec::new()),
        };
        let outcome = hooked::with_context(outcome, "PreToolUse", &pre_context);
        // A failure that is the cancellation itself blames nobody.
        let failed = outcome.is_error && !token.is_cancelled();
        if let Some(me) = guard.me.take() {
            let mut inner = me.lock();
            // The hooks' ends go out with the result, in one write.
            for event in completed {
                me.events.push(event);
            }
            me.finished_locked(&mut inner, i, outcome, failed);
        }
    }

    /// Runs the call in slot `i` in the sandbox `profile` (Bash), with the
    /// network that profile has.
    pub(super) fn confine(
        &self,
        inner: &mut Inner,
        i: CallIdx,
        ctx: &mut ToolContext,
        profile: agentd_protocol::session::SandboxProfile,
    ) {
        ctx.grant.sandbox_profile = profile;
        inner.slots[i].sandbox = Some(profile);
        inner.slots[i].network = Some(crate::sandbox::gate::network_access(
            profile,
            &self.services.info.sandbox,
            self.services.sandbox.gate,
        ));
    }
}
