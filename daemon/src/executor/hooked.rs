//! Where the user's hooks sit in a call's life: `PreToolUse` after the
//! input is valid and before the permission decision (its deny wins over
//! every allow; its allow counts as an allow rule for the call — a deny or
//! ask rule still decides, as in Claude Code 2.1, and what only a person
//! may answer still asks; its
//! `updatedInput` is parsed, validated and decided on again; its ask forces
//! a request), `PermissionRequest` before the client is asked (its allow
//! answers; its `updatedInput` is validated and held to the deny rules),
//! `PostToolUse`/`PostToolUseFailure` after the result (what they add is
//! appended to the result the model sees).

use std::sync::Arc;

use agentd_protocol::hooks::HookEvent;
use agentd_protocol::tools::ContentBlock;
use agentd_protocol::turn::EventKind;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{AskFor, CallIds, Grant, Inner, ReportOnDrop, SessionExecutor, Slot, Waiting};
use crate::hooks::{About, Completions, Decision};
use crate::tool::{CallOutcome, PreparedCall, ToolContext};

/// What a call's PreToolUse hooks said, for the permission decision.
#[derive(Default)]
pub(super) struct Pre {
    decision: Option<Decision>,
    reason: Option<String>,
    /// Their `additionalContext`, appended to the result.
    pub context: Vec<String>,
}

impl Pre {
    /// Its allow, which `admit` counts as an allow rule for the call.
    pub(super) fn allows(&self) -> bool {
        self.decision == Some(Decision::Allow)
    }

    /// The verdict with the hooks' ask: a call that would run asks first.
    /// A refusal stands.
    pub(super) fn overrule(
        &self,
        admitted: Result<Option<AskFor>, CallOutcome>,
        slot: &Slot,
    ) -> Result<Option<AskFor>, CallOutcome> {
        match (self.decision, admitted) {
            (Some(Decision::Ask), Ok(None)) => Ok(Some(AskFor {
                reason: match &self.reason {
                    Some(r) => format!("a PreToolUse hook asks: {r}"),
                    None => "a PreToolUse hook asks".into(),
                },
                suggestions: Vec::new(),
                input: slot.input.clone().unwrap_or_default(),
                outside: None,
            })),
            (_, admitted) => admitted,
        }
    }
}

/// How a call gets to run once admitted.
pub(super) enum Gate {
    /// At once.
    Run,
    /// Once the client allows it.
    Ask(Waiting),
    /// Once its PermissionRequest hooks, or else the client, allow it.
    HooksFirst(AskFor, CallIds),
}

/// What a call's PreToolUse hooks are given.
pub(super) struct Asked {
    name: String,
    input: Value,
    about: About,
    mode: &'static str,
    cwd: String,
}

/// What a call's PostToolUse hooks are given.
pub(super) struct After {
    name: String,
    /// A shell's result is also its `stdout`.
    kind: crate::tool::ToolKind,
    /// The input that ran (a PermissionRequest hook may rewrite it).
    pub(super) input: Value,
    about: About,
    mode: &'static str,
    cwd: String,
}

fn about(slot: &Slot) -> About {
    About {
        turn_id: Some(slot.turn_id.to_string()),
        tool_use_id: Some(slot.tool_use_id.clone()),
        tool_name: Some(slot.name.clone()),
    }
}

impl SessionExecutor {
    fn mode_and_cwd(&self, inner: &Inner) -> (&'static str, String) {
        let mode = crate::hooks::mode_name(inner.context.mode.unwrap_or(self.services.info.mode));
        let (workspace, _) = self.workspace(&inner.context);
        let cwd = inner.context.shell_cwd.clone().unwrap_or_else(|| (*workspace).clone());
        (mode, cwd.display().to_string())
    }

    pub(super) fn pre_tool_use_input(&self, inner: &Inner, i: super::CallIdx) -> Asked {
        let slot = &inner.slots[i];
        let (mode, cwd) = self.mode_and_cwd(inner);
        Asked { name: slot.name.clone(), input: slot.input.clone().unwrap_or_default(), about: about(slot), mode, cwd }
    }

    /// What the PostToolUse hooks of the call in slot `i` will need, if it
    /// has any.
    pub(super) fn after_call_input(
        &self,
        inner: &Inner,
        i: super::CallIdx,
        kind: crate::tool::ToolKind,
    ) -> Option<After> {
        let slot = &inner.slots[i];
        let hooks = &self.services.hooks;
        if !hooks.wants(HookEvent::PostToolUse, &slot.name) && !hooks.wants(HookEvent::PostToolUseFailure, &slot.name) {
            return None;
        }
        let (mode, cwd) = self.mode_and_cwd(inner);
        Some(After {
            name: slot.name.clone(),
            kind,
            input: slot.input.clone().unwrap_or_default(),
            about: about(slot),
            mode,
            cwd,
        })
    }

    /// Runs the call's PreToolUse hooks, then admits and starts it as they
    /// decided (or refuses it).
    pub(super) async fn before_call(
        self: Arc<Self>,
        mut guard: ReportOnDrop,
        i: super::CallIdx,
        call: Box<dyn PreparedCall>,
        token: CancellationToken,
        asked: Asked,
    ) {
        let input =
            pre_tool_use_json(&asked.name, &asked.input, asked.about.tool_use_id.as_deref(), asked.mode, &asked.cwd);
        let hooks = &self.services.hooks;
        let mut said =
            hooks.run(HookEvent::PreToolUse, &asked.name, input, &asked.about, &token, Completions::Returned).await;
        let completed = std::mem::take(&mut said.events);
        let refuse = super::admit::refused;
        let reason = said.reason.clone().unwrap_or_else(|| "(no reason given)".into());
        let mut refusal = match said.decision {
            _ if token.is_cancelled() => {
                Some(CallOutcome::error("cancelled").failed_as(crate::metrics::Failure::Cancelled))
            }
            Some(Decision::Stop) => Some(refuse(call.as_ref(), format!("stopped by a PreToolUse hook: {reason}"))),
            Some(Decision::Deny) => Some(refuse(call.as_ref(), format!("denied by a PreToolUse hook: {reason}"))),
            _ => None,
        };
        let mut call = call;
        let mut rewritten = None;
        if refusal.is_none()
            && let Some(updated) = said.updated_input
        {
            match self.tools().find(&asked.name).map(|t| t.prepare(updated.clone())) {
                Some(Ok(new)) => {
                    call = new;
                    rewritten = Some(updated);
                }
                Some(Err(e)) => {
                    let message =
                        format!("a PreToolUse hook's updatedInput is not valid input for {}: {e}", asked.name);
                    refusal = Some(refuse(call.as_ref(), message));
                }
                None => refusal = Some(CallOutcome::input_error(format!("no tool named {:?}", asked.name))),
            }
        }
        guard.me.take();
        // The hooks' ends go out with what follows them, in one write.
        let mut inner = self.lock();
        for event in completed {
            self.events.push(event);
        }
        if let Some(refusal) = refusal {
            self.finished_locked(&mut inner, i, refusal, false);
            return;
        }
        if let Some(input) = rewritten {
            inner.slots[i].input = Some(input);
            // What is shown (a permission request, the call's start and
            // result) is the call that runs.
            inner.slots[i].render_use = call.render_use();
        }
        let pre = Pre { decision: said.decision, reason: said.reason, context: said.context };
        self.launch(&mut inner, i, call, token, pre);
    }

    /// Waits until the call may run: the client's answer, or first its
    /// PermissionRequest hooks'. `Ok` holds the input a hook rewrote the
    /// call into, if one did; `Err` is the refusal.
    pub(super) async fn approval(
        &self,
        gate: Gate,
        call: &mut Box<dyn PreparedCall>,
        ctx: &mut ToolContext,
        i: super::CallIdx,
        token: &CancellationToken,
    ) -> Result<Option<Value>, String> {
        let mut rewritten = None;
        let wait = match gate {
            Gate::Run => return Ok(None),
            Gate::Ask(wait) => wait,
            Gate::HooksFirst(ask, ids) => {
                let about = About {
                    turn_id: Some(ids.turn_id.clone()),
                    tool_use_id: Some(ids.tool_use_id.clone()),
                    tool_name: Some(ids.name.clone()),
                };
                let mode = {
                    let inner = self.lock();
                    crate::hooks::mode_name(inner.context.mode.unwrap_or(self.services.info.mode))
                };
                let input = json!({
                    "tool_name": ids.name,
                    "tool_input": ask.input,
                    "tool_use_id": ids.tool_use_id,
                    "permission_mode": mode,
                    "permission_suggestions": suggestions(&ask.suggestions),
                });
                let hooks = &self.services.hooks;
                let said =
                    hooks.run(HookEvent::PermissionRequest, &ids.name, input, &about, token, Completions::Pushed).await;
                if token.is_cancelled() {
                    return Err("cancelled while waiting for permission".into());
                }
                let reason = said.reason.clone().unwrap_or_else(|| "(no reason given)".into());
                match said.decision {
                    Some(Decision::Deny | Decision::Stop) => {
                        return Err(format!("permission denied by a PermissionRequest hook: {reason}"));
                    }
                    Some(Decision::Allow) => match said.updated_input {
                        None => {
                            ctx.grant.may_write_protected = true;
                            ctx.grant.approved_outside = ask.outside.map(Arc::new);
                            return Ok(None);
                        }
                        Some(updated) => {
                            // The hook approved the call it was shown; what it
                            // rewrote the call into is decided on again, its
                            // allow counting as an allow rule: what still asks
                            // asks the client.
                            let (new, asks) = self.rewritten(&ids.name, updated.clone(), ctx, i)?;
                            *call = new;
                            rewritten = Some(updated.clone());
                            match asks {
                                None => return Ok(rewritten),
                                Some(mut ask) => {
                                    ask.input = updated;
                                    let rendered = CallIds { render: call.render_use(), ..ids };
                                    self.open_request(&rendered, ask, None)
                                }
                            }
                        }
                    },
                    _ => self.open_request(&ids, ask, None),
                }
            }
        };
        let outside = wait.outside.clone();
        let answers = self.wait_for_answer(wait, token).await?;
        ctx.grant.answers = answers.map(Arc::new);
        ctx.grant.may_write_protected = true;
        ctx.grant.approved_outside = outside.map(Arc::new);
        Ok(rewritten)
    }

    /// A PermissionRequest hook's `updatedInput`, as a call: parsed,
    /// validated and admitted again as the model's input would be, the
    /// hook's allow counting as an allow rule (a refusal stands; what would
    /// still ask is returned), with the sandbox profile decided for it.
    fn rewritten(
        &self,
        name: &str,
        updated: Value,
        ctx: &mut ToolContext,
        i: super::CallIdx,
    ) -> Result<(Box<dyn PreparedCall>, Option<AskFor>), String> {
        let bad = |e: String| format!("a PermissionRequest hook's updatedInput is not valid input for {name}: {e}");
        let tool = self.tools().find(name).cloned().ok_or_else(|| format!("no tool named {name:?}"))?;
        let call = tool.prepare(updated.clone()).map_err(|e| bad(e.to_string()))?;
        let mut inner = self.lock();
        inner.slots[i].input = Some(updated);
        let mut grant = Grant::default();
        let admitted = self.admit(&inner.slots[i], call.as_ref(), &inner.context, ctx, &mut grant, true);
        inner.slots[i].input = None;
        let asks = admitted.map_err(|refused| text_of(&refused.content))?;
        ctx.grant.approved_outside = grant.approved_outside.map(Arc::new);
        ctx.grant.scrub_env = grant.scrub_env;
        if let Some(profile) = grant.profile {
            self.confine(&mut inner, i, ctx, profile);
        }
        inner.slots[i].render_use = call.render_use();
        Ok((call, asks))
    }

    /// Runs the call's PostToolUse (or, for an error result,
    /// PostToolUseFailure) hooks and adds what they say to `outcome`; the
    /// hooks' `hook/completed` events are for the caller to push.
    pub(super) async fn after_call(
        &self,
        after: After,
        mut outcome: CallOutcome,
        token: &CancellationToken,
    ) -> (CallOutcome, Vec<agentd_protocol::turn::EventKind>) {
        let event = if outcome.is_error { HookEvent::PostToolUseFailure } else { HookEvent::PostToolUse };
        if !self.services.hooks.wants(event, &after.name) {
            return (outcome, Vec::new());
        }
        let text = text_of(&outcome.content);
        let mut input = json!({
            "tool_name": after.name,
            "tool_input": after.input,
            "tool_use_id": after.about.tool_use_id,
            "permission_mode": after.mode,
            "cwd": after.cwd,
        });
        if outcome.is_error {
            input["error"] = Value::String(text);
            input["is_interrupt"] = Value::Bool(false);
        } else {
            let mut response = json!({ "success": true, "content": text });
            if let Some(path) = after.input.get("file_path").or_else(|| after.input.get("notebook_path")) {
                response["filePath"] = path.clone();
            }
            if after.kind == crate::tool::ToolKind::Shell {
                response["stdout"] = response["content"].clone();
                // What Claude Code 2.1.332's Bash output carries beside
                // stdout (returnCodeInterpretation, backgroundTaskId, …),
                // by its names, as its hooks get them.
                if let Some(Value::Object(fields)) = &outcome.structured {
                    for (name, value) in fields {
                        response[name] = value.clone();
                    }
                }
            }
            input["tool_response"] = response;
        }
        let mut said =
            self.services.hooks.run(event, &after.name, input, &after.about, token, Completions::Returned).await;
        let completed = std::mem::take(&mut said.events);
        if event == HookEvent::PostToolUse
            && after.name.starts_with("mcp__")
            && let Some(replaced) = said.updated_mcp_output
        {
            outcome.content = match replaced {
                Value::String(s) => vec![ContentBlock::text(s)],
                other => serde_json::from_value::<Vec<ContentBlock>>(other.clone())
                    .unwrap_or_else(|_| vec![ContentBlock::text(other.to_string())]),
            };
            // What the server said beside its content goes with it: a hook
            // that hid the content hides its links and structured fields.
            outcome.content_meta = Box::default();
            outcome.structured = None;
        }
        for reason in &said.blocks {
            outcome.content.push(ContentBlock::text(format!("{} hook feedback: {reason}", event.as_str())));
        }
        let mut outcome = with_context(outcome, event.as_str(), &said.context);
        if let Some(stop) = said.stop_reason {
            outcome.content.push(ContentBlock::text(format!("stopped by a {} hook: {stop}", event.as_str())));
        }
        (outcome, completed)
    }
}

impl SessionExecutor {
    /// The turn `t` is over: `turn/completed` — after the session's
    /// PostToolBatch hooks have answered, when the turn kept its calls for
    /// them (what they add for the model and a stop ride on the event).
    pub(super) fn turn_completed(&self, inner: &mut Inner, t: super::TurnIdx) {
        let turn_id = inner.turns[t].id.to_string();
        let batch = inner.turns[t].batch.take().filter(|b| !b.is_empty());
        let (Some(calls), Some(me)) = (batch, self.me.upgrade()) else {
            self.events.push(EventKind::turn_completed(turn_id));
            return;
        };
        inner.batches_running += 1;
        // The turn's: `turn/cancel` (and the session's end) stop the hooks.
        let cancel = inner.turns[t].token.clone();
        inner.starts.push(Box::pin(async move {
            let about = About { turn_id: Some(turn_id.clone()), tool_use_id: None, tool_name: None };
            let (mode, cwd) = me.mode_and_cwd(&me.lock());
            let input = json!({"tool_calls": calls, "permission_mode": mode, "cwd": cwd});
            let said =
                me.services.hooks.run(HookEvent::PostToolBatch, "", input, &about, &cancel, Completions::Pushed).await;
            let stop_reason = said.stop_reason.or_else(|| (!said.blocks.is_empty()).then(|| said.blocks.join("; ")));
            let additional_context = (!said.context.is_empty()).then(|| said.context.join("\n\n"));
            let mut inner = me.lock();
            inner.batches_running -= 1;
            me.events.push(EventKind::TurnCompleted { turn_id, additional_context, stop_reason });
            me.report_closed(&mut inner);
        }));
    }
}

/// `outcome` with the hooks' `additionalContext` for the model after it.
pub(super) fn with_context(mut outcome: CallOutcome, event: &str, context: &[String]) -> CallOutcome {
    for c in context.iter().filter(|c| !c.trim().is_empty()) {
        outcome.content.push(ContentBlock::text(format!("{event} hook additional context: {c}")));
    }
    outcome
}

/// What a PreToolUse hook is given on stdin (Claude Code's fields).
pub(super) fn pre_tool_use_json(name: &str, input: &Value, tool_use_id: Option<&str>, mode: &str, cwd: &str) -> Value {
    json!({
        "tool_name": name,
        "tool_input": input,
        "tool_use_id": tool_use_id,
        "permission_mode": mode,
        "cwd": cwd,
    })
}

/// A result's content as the model is sent it: its text when it is all
/// text, the blocks otherwise (PostToolBatch's `tool_response`).
pub(super) fn as_sent(content: &[ContentBlock]) -> Value {
    if content.iter().all(|b| matches!(b, ContentBlock::Text { .. })) {
        let text = text_of(content);
        // A hook reads what it needs of a long result; the turn keeps
        // its calls' responses until it ends.
        match text.char_indices().nth(BATCH_RESPONSE_CHARS) {
            Some((cut, _)) => {
                Value::String(format!("{}\n[cut: {} characters in all]", &text[..cut], text.chars().count()))
            }
            None => Value::String(text),
        }
    } else {
        serde_json::to_value(content).unwrap_or_default()
    }
}

/// Characters of a call's response a PostToolBatch hook is given.
const BATCH_RESPONSE_CHARS: usize = 30_000;

/// The text blocks of `content`, one a line.
pub(super) fn text_of(content: &[ContentBlock]) -> String {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// Rule suggestions as Claude Code gives them to a PermissionRequest hook
/// (`addRules` updates for the session).
fn suggestions(rules: &[String]) -> Value {
    let updates: Vec<Value> = rules
        .iter()
        .map(|rule| {
            let (tool, content) = match rule.split_once('(') {
                Some((tool, rest)) => (tool, rest.strip_suffix(')').map(str::to_owned)),
                None => (rule.as_str(), None),
            };
            let mut r = json!({ "toolName": tool });
            if let Some(content) = content {
                r["ruleContent"] = Value::String(content);
            }
            json!({ "type": "addRules", "rules": [r], "behavior": "allow", "destination": "session" })
        })
        .collect();
    Value::Array(updates)
}

/// A call refused without anyone asked, for the session's PermissionDenied
/// hooks (Claude Code 2.1.332's, there for its auto mode): they hear it
/// (`tool_name`, `tool_input`, `tool_use_id`, `reason`), and one that says
/// `retry` tells the model it may make the call again. The refusal is the
/// call's result either way.
pub(super) fn denied(
    me: Arc<SessionExecutor>,
    slot: &super::Slot,
    i: super::CallIdx,
    refused: CallOutcome,
    token: CancellationToken,
) -> crate::inline::BoxFuture<()> {
    let reason = text_of(&refused.content);
    let input = json!({
        "tool_name": slot.name,
        "tool_input": slot.input.clone().unwrap_or_default(),
        "tool_use_id": slot.tool_use_id,
        "reason": reason,
    });
    let about = crate::hooks::About {
        turn_id: Some(slot.turn_id.to_string()),
        tool_use_id: Some(slot.tool_use_id.clone()),
        tool_name: Some(slot.name.clone()),
    };
    let name = slot.name.clone();
    let mut guard = super::ReportOnDrop { me: Some(me.clone()), call: i };
    Box::pin(async move {
        let said =
            me.services.hooks.run(HookEvent::PermissionDenied, &name, input, &about, &token, Completions::Pushed).await;
        let mut outcome = refused;
        if said.retry {
            outcome
                .content
                .push(ContentBlock::text("A PermissionDenied hook says you may make this call again (retry)."));
        }
        if let Some(me) = guard.me.take() {
            me.finished(i, outcome, false);
        }
    })
}
