//! Running tool calls. Today: one call at a time for `tool/call`, through
//! the whole path a call takes — lookup (deferred tools must be loaded),
//! input parsing, validation, the tool's permission view, execution,
//! context modifier. The streaming executor of DESIGN.md §4 (partitioning,
//! ordering, sibling cancellation) is the executor issue and will take this
//! path over.
//!
//! Permission: the rule engine and asking the client are the permissions
//! issue. Until then the path is fail-closed: a call the tool wants to ask
//! about is refused with a message saying so, never run.

use std::sync::Arc;

use agentd_protocol::tools::{ContentBlock, ToolCallResult};
use serde_json::Value;

use crate::permission::Decision;
use crate::session::Session;
use crate::tool::{CallOutcome, InterruptBehavior, ToolContext};

/// Runs one call of `name` with `input` in `session`.
///
/// # Cancellation safety
/// Dropping the future drops the tool's future, which ends the call. The
/// session's cancellation (close, shutdown) ends a call whose tool cancels
/// on interrupt; a `block` tool is let finish.
pub async fn call_one(session: Arc<Session>, name: &str, input: Value) -> ToolCallResult {
    let resolved = session.tools.resolve_for_call(name, &session.context());
    let tool = match resolved {
        Ok(tool) => tool,
        Err(e) => return refused(name, name.to_owned(), e.to_string()),
    };
    let prepared = match tool.prepare(input) {
        Ok(p) => p,
        Err(e) => return refused(tool.name(), tool.name().to_owned(), e.to_string()),
    };
    let render_use = prepared.render_use();
    let ctx = ToolContext {
        session_id: Arc::from(session.info.session_id.as_str()),
        cwd: Arc::new(session.info.cwd.clone()),
        cancel: session.cancel.child_token(),
        tools: session.tools.clone(),
    };
    if let Err(e) = prepared.validate(&ctx) {
        return refused(tool.name(), render_use, format!("invalid input for {}: {e}", tool.name()));
    }
    match prepared.check_permissions(&ctx) {
        Decision::Allow => {}
        Decision::Deny { reason } => {
            let render = prepared.render_rejected(&reason);
            return outcome_result(
                tool.name(),
                render_use,
                CallOutcome {
                    content: vec![ContentBlock::text(format!("permission denied: {reason}"))],
                    is_error: true,
                    render,
                    modifier: None,
                },
            );
        }
        Decision::Ask { reason, .. } => {
            let message = format!(
                "permission required: {reason}. This agentd cannot ask the client for approval yet, so calls \
                 that need it are refused"
            );
            let render = prepared.render_rejected(&message);
            return outcome_result(
                tool.name(),
                render_use,
                CallOutcome { content: vec![ContentBlock::text(message)], is_error: true, render, modifier: None },
            );
        }
    }
    let cancel = ctx.cancel.clone();
    let run = prepared.run(ctx, None);
    let mut outcome = match tool.interrupt_behavior() {
        InterruptBehavior::Block => run.await,
        InterruptBehavior::Cancel => tokio::select! {
            outcome = run => outcome,
            _ = cancel.cancelled() => CallOutcome::error(format!("{} was cancelled: its session is closing", tool.name())),
        },
    };
    if let Some(modifier) = outcome.modifier.take() {
        modifier(&mut session.context());
    }
    outcome_result(tool.name(), render_use, outcome)
}

fn refused(name: &str, render_use: String, message: String) -> ToolCallResult {
    outcome_result(name, render_use, CallOutcome::error(message))
}

fn outcome_result(name: &str, render_use: String, outcome: CallOutcome) -> ToolCallResult {
    ToolCallResult {
        name: name.to_owned(),
        content: outcome.content,
        is_error: outcome.is_error,
        render: outcome.render,
        render_use,
    }
}
