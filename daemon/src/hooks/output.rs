//! What a hook said: its exit code and output read as Claude Code reads
//! them, and the answers of a moment's hooks combined.
//!
//! Exit code 0: stdout is JSON output if it is a JSON object (plain text is
//! context for `SessionStart` and `SubagentStart`, and otherwise ignored).
//! Exit code 2: a blocking error whose stderr is the reason (the call is
//! denied for `PreToolUse` and `PermissionRequest`; the model is told for
//! `PostToolUse` and `PostToolUseFailure`; only the user is told for the
//! others). Any other code, output that is not JSON, a timeout: a
//! non-blocking error, and the call goes on.

use std::time::Duration;

use agentd_protocol::hooks::HookEvent;
use serde_json::Value;

/// How a hook ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit code 0 (or a socket hook's answer).
    Success,
    /// Exit code 2.
    Blocking,
    /// Another exit code, output that is not JSON, or no start.
    Error,
    /// Killed at its timeout (no answer in time).
    Timeout,
    /// Its call was cancelled first.
    Cancelled,
    /// The client that registered it left.
    Gone,
}

impl Outcome {
    /// The name `hook/completed` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Blocking => "blocking",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Gone => "gone",
        }
    }
}

/// What a hook decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// Run it (PreToolUse, PermissionRequest).
    Allow,
    /// Ask the user (PreToolUse).
    Ask,
    /// Refuse it (PreToolUse, PermissionRequest).
    Deny,
    /// Tell the model why (`decision: "block"`: PostToolUse, …).
    Block,
    /// `continue: false`: the harness should stop.
    Stop,
}

impl Decision {
    /// The name `hook/completed` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
            Decision::Block => "block",
            Decision::Stop => "stop",
        }
    }
}

/// One hook's answer.
#[derive(Debug, Clone)]
pub struct HookResult {
    /// How it ended.
    pub outcome: Outcome,
    /// What it decided.
    pub decision: Option<Decision>,
    /// Its reason (for the model when it denies or blocks), or its error.
    pub message: Option<String>,
    /// `updatedInput` (PreToolUse; PermissionRequest's allow).
    pub updated_input: Option<Value>,
    /// `additionalContext`, for the model.
    pub additional_context: Option<String>,
    /// `systemMessage`, for the user.
    pub system_message: Option<String>,
    /// `stopReason` with `continue: false`.
    pub stop_reason: Option<String>,
    /// `updatedToolOutput` (or the older `updatedMCPToolOutput`): PostToolUse.
    pub updated_mcp_output: Option<Value>,
    /// PermissionDenied's `retry`: the model may make the call again.
    pub retry: bool,
    /// Elicitation's and ElicitationResult's `action` and `content`.
    pub elicited: Option<(String, Option<Value>)>,
    /// WorktreeCreate's worktree: a command's last line of output, or
    /// `hookSpecificOutput.worktreePath`.
    pub worktree_path: Option<String>,
}

impl HookResult {
    fn ended(outcome: Outcome, message: Option<String>) -> HookResult {
        HookResult {
            outcome,
            decision: None,
            message,
            updated_input: None,
            additional_context: None,
            system_message: None,
            stop_reason: None,
            updated_mcp_output: None,
            retry: false,
            elicited: None,
            worktree_path: None,
        }
    }

    /// The client that registered a socket hook left.
    pub fn gone() -> HookResult {
        HookResult::ended(Outcome::Gone, Some("the client that registered the hook left; it was skipped".into()))
    }

    /// No answer within `timeout`.
    pub fn timed_out(timeout: Duration) -> HookResult {
        HookResult::ended(Outcome::Timeout, Some(format!("no answer within its timeout ({} s)", timeout.as_secs())))
    }

    /// Its call was cancelled first.
    pub fn cancelled() -> HookResult {
        HookResult::ended(Outcome::Cancelled, None)
    }

    /// The same, deciding nothing (an `async` hook's: nobody waited).
    pub fn without_effect(mut self) -> HookResult {
        self.decision = None;
        self.updated_input = None;
        self.additional_context = None;
        self.stop_reason = None;
        self.updated_mcp_output = None;
        self
    }
}

/// A command hook's run, read; with `fail_closed` (`onFailure: "block"`)
/// a hook that failed blocks as exit code 2 would.
pub fn from_command(event: HookEvent, ran: &super::run::Ran, timeout: Duration, fail_closed: bool) -> HookResult {
    let result = read_command(event, ran, timeout);
    if fail_closed { failing_closed(event, result) } else { result }
}

/// A hook's failure (an error, no answer in time, its client gone) as a
/// block, for a hook that blocks on failure (`onFailure: "block"`).
pub fn failing_closed(event: HookEvent, result: HookResult) -> HookResult {
    if !matches!(result.outcome, Outcome::Error | Outcome::Timeout | Outcome::Gone) {
        return result;
    }
    let why = result.message.unwrap_or_default();
    let mut blocked =
        HookResult::ended(Outcome::Blocking, Some(format!("the hook failed ({why}) and blocks on failure")));
    blocked.decision = blocking_decision(event);
    blocked
}

/// What exit code 2 decides at `event`.
fn blocking_decision(event: HookEvent) -> Option<Decision> {
    match event {
        // Claude Code 2.1 leaves a PermissionRequest exit code 2 to the
        // prompt; its documentation says it denies, and agentd fails closed.
        HookEvent::PreToolUse | HookEvent::PermissionRequest => Some(Decision::Deny),
        HookEvent::PostToolUse | HookEvent::PostToolUseFailure | HookEvent::SubagentStop => Some(Decision::Block),
        // Claude Code 2.1.332: "show stderr to model and prevent task
        // creation" (completion).
        HookEvent::TaskCreated
        | HookEvent::TaskCompleted
        | HookEvent::Elicitation
        | HookEvent::ElicitationResult
        | HookEvent::PostToolBatch => Some(Decision::Block),
        _ => None,
    }
}

fn read_command(event: HookEvent, ran: &super::run::Ran, timeout: Duration) -> HookResult {
    if let Some(why) = &ran.failed {
        return HookResult::ended(Outcome::Error, Some(why.clone()));
    }
    if ran.cancelled {
        return HookResult::cancelled();
    }
    if ran.timed_out {
        return HookResult::ended(Outcome::Timeout, Some(format!("killed at its timeout ({} s)", timeout.as_secs())));
    }
    let stderr = trimmed(&ran.stderr, ran.cut);
    match ran.code {
        Some(0) => {
            let text = ran.stdout.trim();
            if text.starts_with('{') {
                match serde_json::from_str::<Value>(text) {
                    Ok(value) => from_json(event, value),
                    Err(e) => HookResult::ended(
                        Outcome::Error,
                        Some(format!("its output is not valid JSON ({e}): {}", trimmed(text, ran.cut))),
                    ),
                }
            } else {
                let mut result = HookResult::ended(Outcome::Success, None);
                if event == HookEvent::SessionStart && !text.is_empty() {
                    result.additional_context = Some(trimmed(text, ran.cut));
                }
                if event == HookEvent::WorktreeCreate && !ran.cut {
                    result.worktree_path = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).map(str::to_owned);
                }
                result
            }
        }
        Some(2) => {
            let reason = if stderr.is_empty() { "(no reason given on stderr)".to_owned() } else { stderr };
            let mut result = HookResult::ended(Outcome::Blocking, Some(reason));
            result.decision = blocking_decision(event);
            result
        }
        code => {
            let code = code.map(|c| c.to_string()).unwrap_or_else(|| "none".into());
            let message =
                if stderr.is_empty() { format!("exit code {code}") } else { format!("exit code {code}: {stderr}") };
            HookResult::ended(Outcome::Error, Some(message))
        }
    }
}

fn trimmed(text: &str, cut: bool) -> String {
    let mut out: String = text.trim().chars().take(10_000).collect();
    if cut || out.len() < text.trim().len() {
        out.push_str(" … (cut)");
    }
    out
}

/// A string field of a hook's output, cut to what the model or a person
/// reads (10,000 characters, as Claude Code shows at most).
fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(|t| trimmed(t, false))
}

/// A hook's JSON output (a command hook's stdout, a socket hook's
/// `output`), read for `event`.
pub fn from_json(event: HookEvent, value: Value) -> HookResult {
    let mut result = HookResult::ended(Outcome::Success, None);
    if value.is_null() {
        return result;
    }
    let Value::Object(_) = &value else {
        return HookResult::ended(Outcome::Error, Some(format!("its output must be a JSON object, got {value}")));
    };
    result.system_message = string(&value, "systemMessage");
    let specific = value.get("hookSpecificOutput").filter(|v| v.is_object());
    if let Some(named) = specific.and_then(|s| s.get("hookEventName")).and_then(Value::as_str)
        && named != event.as_str()
    {
        return HookResult::ended(
            Outcome::Error,
            Some(format!("hookSpecificOutput.hookEventName is {named:?}, but the hook ran for {}", event.as_str())),
        );
    }
    let field = |key: &str| specific.and_then(|s| s.get(key));
    let reason = string(&value, "reason");
    let legacy = match value.get("decision") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) if d == "approve" || d == "block" => Some(d.as_str()),
        Some(other) if event != HookEvent::PermissionRequest => {
            return HookResult::ended(
                Outcome::Error,
                Some(format!("decision must be \"approve\" or \"block\", got {other}")),
            );
        }
        Some(_) => None,
    };
    match event {
        HookEvent::PreToolUse => {
            // The older top-level form.
            let older = match legacy {
                Some("approve") => Some("allow"),
                Some("block") => Some("deny"),
                _ => None,
            };
            let decision = field("permissionDecision").and_then(Value::as_str).or(older);
            result.decision = match decision {
                Some("allow") => Some(Decision::Allow),
                Some("deny") => Some(Decision::Deny),
                Some("ask") => Some(Decision::Ask),
                // Claude Code 2.1.332 ends a print-mode turn on it and runs
                // the call on resume; here the call is not run and the
                // model is told to call it again (fails closed).
                Some("defer") => {
                    result.decision = Some(Decision::Deny);
                    result.message = Some(
                        "a PreToolUse hook deferred this call: it did not run; make the call again when ready".into(),
                    );
                    return result;
                }
                Some(other) => {
                    return HookResult::ended(
                        Outcome::Error,
                        Some(format!("permissionDecision must be allow, deny, ask or defer, got {other:?}")),
                    );
                }
                None => None,
            };
            result.message = specific.and_then(|s| string(s, "permissionDecisionReason")).or(reason);
            result.updated_input = field("updatedInput").filter(|v| v.is_object()).cloned();
        }
        HookEvent::PermissionRequest => {
            let decision = field("decision").filter(|d| d.is_object());
            match decision.and_then(|d| d.get("behavior")).and_then(Value::as_str) {
                Some("allow") => {
                    result.decision = Some(Decision::Allow);
                    result.updated_input =
                        decision.and_then(|d| d.get("updatedInput")).filter(|v| v.is_object()).cloned();
                }
                Some("deny") => {
                    result.decision = Some(Decision::Deny);
                    result.message = decision.and_then(|d| string(d, "message"));
                    if decision.and_then(|d| d.get("interrupt")).and_then(Value::as_bool) == Some(true) {
                        result.stop_reason =
                            result.message.clone().or(Some("a PermissionRequest hook interrupted".into()));
                    }
                }
                Some(other) => {
                    return HookResult::ended(
                        Outcome::Error,
                        Some(format!("decision.behavior must be allow or deny, got {other:?}")),
                    );
                }
                None => {}
            }
        }
        HookEvent::PostToolUse
        | HookEvent::PostToolUseFailure
        | HookEvent::SubagentStop
        | HookEvent::TaskCreated
        | HookEvent::TaskCompleted
        | HookEvent::PostToolBatch => {
            if legacy == Some("block") {
                result.decision = Some(Decision::Block);
                result.message = Some(reason.unwrap_or_else(|| "(no reason given)".into()));
            }
            if event == HookEvent::PostToolUse {
                result.updated_mcp_output =
                    field("updatedToolOutput").or_else(|| field("updatedMCPToolOutput")).cloned();
            }
        }
        HookEvent::PermissionDenied => result.retry = field("retry").and_then(Value::as_bool) == Some(true),
        HookEvent::WorktreeCreate => {
            result.worktree_path = field("worktreePath").and_then(Value::as_str).map(str::to_owned);
        }
        HookEvent::Elicitation | HookEvent::ElicitationResult => {
            match field("action").and_then(Value::as_str) {
                Some(a @ ("accept" | "decline" | "cancel")) => {
                    result.elicited = Some((a.to_owned(), field("content").cloned()));
                }
                Some(other) => {
                    return HookResult::ended(
                        Outcome::Error,
                        Some(format!("action must be accept, decline or cancel, got {other:?}")),
                    );
                }
                None => {}
            }
            if legacy == Some("block") {
                result.decision = Some(Decision::Block);
                result.message = Some(reason.unwrap_or_else(|| "(no reason given)".into()));
            }
        }
        _ => {}
    }
    result.additional_context = field("additionalContext").and_then(Value::as_str).map(|c| trimmed(c, false));
    if value.get("continue").and_then(Value::as_bool) == Some(false) {
        result.decision = Some(Decision::Stop);
        result.stop_reason = Some(string(&value, "stopReason").unwrap_or_else(|| "a hook asked to stop".into()));
    }
    result
}

/// What a moment's hooks said together.
#[derive(Debug, Clone, Default)]
pub struct Combined {
    /// The strongest decision: stop over deny over ask over allow (block is
    /// kept beside them in `blocks`).
    pub decision: Option<Decision>,
    /// The reasons of the hooks that made `decision`, joined.
    pub reason: Option<String>,
    /// The last `updatedInput` of a hook that did not deny.
    pub updated_input: Option<Value>,
    /// Every hook's `additionalContext`, in order.
    pub context: Vec<String>,
    /// Reasons given to the model with `decision: "block"` or exit code 2
    /// (after the call).
    pub blocks: Vec<String>,
    /// `stopReason` of a `continue: false`.
    pub stop_reason: Option<String>,
    /// The last `updatedToolOutput`.
    pub updated_mcp_output: Option<Value>,
    /// A PermissionDenied hook said `retry`.
    pub retry: bool,
    /// The last Elicitation/ElicitationResult hook's answer.
    pub elicited: Option<(String, Option<Value>)>,
    /// The first WorktreeCreate hook's worktree.
    pub worktree_path: Option<String>,
    /// Why hooks failed (an error, no answer in time), in order.
    pub failures: Vec<String>,
    /// The `hook/completed` events [`super::Hooks::run`] left (with [`super::Completions::Returned`]) for
    /// its caller to push.
    pub events: Vec<agentd_protocol::turn::EventKind>,
}

impl Combined {
    /// Combines the answers of the hooks of one moment.
    pub fn of(event: HookEvent, results: Vec<HookResult>) -> Combined {
        let _ = event;
        let mut out = Combined::default();
        let rank = |d: Decision| match d {
            Decision::Allow => 1,
            Decision::Ask => 2,
            Decision::Deny => 3,
            Decision::Stop => 4,
            Decision::Block => 0,
        };
        let strongest =
            results.iter().filter_map(|r| r.decision).filter(|d| *d != Decision::Block).max_by_key(|d| rank(*d));
        out.decision = strongest;
        if let Some(d) = strongest {
            let reasons: Vec<&str> = results
                .iter()
                .filter(|r| r.decision == Some(d))
                .filter_map(|r| if d == Decision::Stop { r.stop_reason.as_deref() } else { r.message.as_deref() })
                .collect();
            if !reasons.is_empty() {
                out.reason = Some(reasons.join("; "));
            }
        }
        for r in &results {
            if r.decision != Some(Decision::Deny) && r.updated_input.is_some() {
                out.updated_input = r.updated_input.clone();
            }
            if let Some(c) = &r.additional_context {
                out.context.push(c.clone());
            }
            if r.decision == Some(Decision::Block)
                && let Some(m) = &r.message
            {
                out.blocks.push(m.clone());
            }
            if out.stop_reason.is_none() {
                out.stop_reason = r.stop_reason.clone();
            }
            if r.updated_mcp_output.is_some() {
                out.updated_mcp_output = r.updated_mcp_output.clone();
            }
            out.retry |= r.retry;
            if r.elicited.is_some() {
                out.elicited = r.elicited.clone();
            }
            if out.worktree_path.is_none() {
                out.worktree_path = r.worktree_path.clone();
            }
            if matches!(r.outcome, Outcome::Error | Outcome::Timeout | Outcome::Gone) {
                out.failures.push(r.message.clone().unwrap_or_else(|| "failed".into()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::run::Ran;
    use serde_json::json;

    fn ran(code: i32, stdout: &str, stderr: &str) -> Ran {
        Ran { code: Some(code), stdout: stdout.into(), stderr: stderr.into(), ..Ran::default() }
    }
    const T: Duration = Duration::from_secs(600);

    fn from_command_t(event: HookEvent, ran: &Ran, timeout: Duration) -> HookResult {
        from_command(event, ran, timeout, false)
    }

    #[test]
    fn a_hook_that_blocks_on_failure_fails_closed() {
        for ran in [
            ran(1, "", "crash"),
            ran(0, "{bad", ""),
            Ran { timed_out: true, ..Ran::default() },
            Ran { failed: Some("no such file".into()), ..Ran::default() },
        ] {
            let r = from_command(HookEvent::PreToolUse, &ran, T, true);
            assert_eq!((r.outcome, r.decision), (Outcome::Blocking, Some(Decision::Deny)), "{ran:?}");
            assert_eq!(from_command(HookEvent::PreToolUse, &ran, T, false).decision, None);
        }
        assert_eq!(from_command(HookEvent::PreToolUse, &ran(0, "{}", ""), T, true).outcome, Outcome::Success);
    }

    #[test]
    fn exit_codes_read_per_event() {
        let r = from_command_t(HookEvent::PreToolUse, &ran(2, "", "no rm here\n"), T);
        assert_eq!(
            (r.outcome, r.decision, r.message.as_deref()),
            (Outcome::Blocking, Some(Decision::Deny), Some("no rm here"))
        );
        let r = from_command_t(HookEvent::PostToolUse, &ran(2, "", "lint failed"), T);
        assert_eq!(r.decision, Some(Decision::Block));
        let r = from_command_t(HookEvent::Notification, &ran(2, "", "x"), T);
        assert_eq!((r.outcome, r.decision), (Outcome::Blocking, None));
        let r = from_command_t(HookEvent::PreToolUse, &ran(1, "{\"continue\": false}", "oops"), T);
        assert_eq!((r.outcome, r.decision, r.message.as_deref()), (Outcome::Error, None, Some("exit code 1: oops")));
        let r = from_command_t(HookEvent::PreToolUse, &ran(0, "{not json", ""), T);
        assert_eq!(r.outcome, Outcome::Error);
        assert!(r.message.unwrap().contains("{not json"));
        let r = from_command_t(HookEvent::PreToolUse, &ran(0, "plain words", ""), T);
        assert_eq!((r.outcome, r.decision, r.additional_context), (Outcome::Success, None, None));
        let r = from_command_t(HookEvent::SessionStart, &ran(0, "branch: main\n", ""), T);
        assert_eq!(r.additional_context.as_deref(), Some("branch: main"));
        let timed = Ran { timed_out: true, ..Ran::default() };
        assert_eq!(from_command_t(HookEvent::PreToolUse, &timed, T).outcome, Outcome::Timeout);
    }

    #[test]
    fn json_output_read_per_event() {
        let pre = |v: Value| from_json(HookEvent::PreToolUse, v);
        let r = pre(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "generated file"}}));
        assert_eq!((r.decision, r.message.as_deref()), (Some(Decision::Deny), Some("generated file")));
        let r = pre(json!({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}}));
        assert_eq!((r.decision, r.updated_input), (Some(Decision::Allow), Some(json!({"command": "ls"}))));
        assert_eq!(pre(json!({"decision": "block", "reason": "old"})).decision, Some(Decision::Deny));
        assert_eq!(pre(json!({"decision": "approve"})).decision, Some(Decision::Allow));
        let r = pre(json!({"continue": false, "stopReason": "enough", "systemMessage": "hi"}));
        assert_eq!(
            (r.decision, r.stop_reason.as_deref(), r.system_message.as_deref()),
            (Some(Decision::Stop), Some("enough"), Some("hi"))
        );
        assert_eq!(pre(json!({"hookSpecificOutput": {"permissionDecision": "maybe"}})).outcome, Outcome::Error);
        assert_eq!(pre(json!({"hookSpecificOutput": {"hookEventName": "PostToolUse"}})).outcome, Outcome::Error);
        assert_eq!(pre(json!([1])).outcome, Outcome::Error);
        assert_eq!(pre(json!({"decision": "maybe"})).outcome, Outcome::Error);
        let post = from_json(
            HookEvent::PostToolUse,
            json!({"decision": "block", "reason": "fix lint",
            "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "formatted"}}),
        );
        assert_eq!(
            (post.decision, post.message.as_deref(), post.additional_context.as_deref()),
            (Some(Decision::Block), Some("fix lint"), Some("formatted"))
        );
        let perm = from_json(
            HookEvent::PermissionRequest,
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "not on fridays", "interrupt": true}}}),
        );
        assert_eq!(
            (perm.decision, perm.message.as_deref(), perm.stop_reason.is_some()),
            (Some(Decision::Deny), Some("not on fridays"), true)
        );
    }

    #[test]
    fn deny_wins_over_ask_over_allow() {
        let with = |d: Decision, why: &str| HookResult {
            decision: Some(d),
            message: Some(why.into()),
            ..HookResult::cancelled()
        };
        let c = Combined::of(
            HookEvent::PreToolUse,
            vec![with(Decision::Allow, "a"), with(Decision::Deny, "d"), with(Decision::Ask, "q")],
        );
        assert_eq!((c.decision, c.reason.as_deref()), (Some(Decision::Deny), Some("d")));
        let c = Combined::of(HookEvent::PreToolUse, vec![with(Decision::Allow, "a"), with(Decision::Ask, "q")]);
        assert_eq!(c.decision, Some(Decision::Ask));
        let c = Combined::of(HookEvent::PreToolUse, vec![with(Decision::Allow, "a"), with(Decision::Allow, "b")]);
        assert_eq!((c.decision, c.reason.as_deref()), (Some(Decision::Allow), Some("a; b")));
        let mut rewrite = with(Decision::Deny, "d");
        rewrite.updated_input = Some(json!({"x": 1}));
        let c = Combined::of(HookEvent::PreToolUse, vec![rewrite]);
        assert_eq!(c.updated_input, None, "a denying hook's rewrite is not taken");
        assert_eq!(Combined::of(HookEvent::PreToolUse, vec![]).decision, None);
    }
}
