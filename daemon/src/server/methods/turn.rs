//! `turn/submit`, `turn/cancel`, `turn/discard`, `turn/diff`,
//! `turn/rewind` and the `turn/stream` subscription.

use std::sync::Arc;

use agentd_protocol::methods::{TURN_EVENT, TURN_STREAM, TURN_UNSTREAM, TurnCancel, TurnDiscard, TurnSubmit};
use agentd_protocol::turn::{EventKind, TurnCancelResult, TurnDiscardResult, TurnStreamParams, TurnSubmitResult};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{PendingSubscriptionSink, RpcModule, SubscriptionMessage};
use tracing::Instrument;

use agentd_protocol::methods::PermissionRespond;
use agentd_protocol::permission::PermissionRespondResult;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register::<TurnSubmit, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let turn_id = session.submit(p.turn_id, p.tool_uses, p.end).map_err(RpcError::from)?;
        Ok(TurnSubmitResult { turn_id })
    });
    rpc::register::<TurnCancel, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let cancelled = session.cancel(p.turn_id.as_deref(), p.tool_use_id.as_deref()).map_err(RpcError::from)?;
        // Everything the session runs includes its children's work.
        if p.turn_id.is_none() && p.tool_use_id.is_none() {
            state.sessions.cancel_children(&p.session_id);
        }
        Ok(TurnCancelResult { cancelled })
    });
    rpc::register::<TurnDiscard, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let discarded = session.discard(&p.turn_id).map_err(RpcError::from)?;
        Ok(TurnDiscardResult { discarded })
    });
    rpc::register_async::<agentd_protocol::methods::TurnDiff, _, _, _>(module, |p, state| async move {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let history = session.history();
        drop(session);
        blocking(move || history.diff(p.turn_id.as_deref()).map_err(|e| history_error(e, "turn_id"))).await
    });
    rpc::register_async::<agentd_protocol::methods::TurnRewind, _, _, _>(module, |p, state| async move {
        use crate::fs::history::Target;
        let field = if p.tool_use_id.is_some() { "tool_use_id" } else { "turn_id" };
        let target = match (p.turn_id, p.tool_use_id) {
            (Some(turn), None) => Target::Turn(turn),
            (None, Some(call)) => Target::Call(call),
            (Some(_), Some(_)) => {
                return Err(RpcError::invalid_params("tool_use_id", "name a turn_id or a tool_use_id, not both"));
            }
            (None, None) => {
                return Err(RpcError::invalid_params(
                    "turn_id",
                    "name the turn_id (or the tool_use_id) to rewind to before",
                ));
            }
        };
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let history = session.history();
        drop(session);
        blocking(move || history.rewind(&target, p.dry_run, p.force).map_err(|e| history_error(e, field))).await
    });
    rpc::register::<agentd_protocol::methods::AgentRespond, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        session
            .respond_agent(&p.request_id, p.result, p.is_error.unwrap_or(false))
            .map_err(|e| RpcError::invalid_params("request_id", e))?;
        Ok(agentd_protocol::agent::AgentRespondResult { request_id: p.request_id })
    });
    rpc::register::<agentd_protocol::methods::McpElicitationRespond, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let request_id = p.request_id.clone();
        session.respond_elicitation(p).map_err(|e| RpcError::invalid_params("request_id", e))?;
        Ok(agentd_protocol::mcp::McpElicitationRespondResult { request_id })
    });
    rpc::register::<agentd_protocol::methods::McpSamplingRespond, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let request_id = p.request_id.clone();
        session.respond_sampling(p).map_err(|e| RpcError::invalid_params("request_id", e))?;
        Ok(agentd_protocol::mcp::McpSamplingRespondResult { request_id })
    });
    rpc::register::<PermissionRespond, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let rule_added = session.respond(&p).map_err(RpcError::from)?;
        Ok(PermissionRespondResult { request_id: p.request_id, rule_added })
    });
    let registered =
        module.register_subscription_raw(TURN_STREAM, TURN_EVENT, TURN_UNSTREAM, |params, pending, state, _| {
            let parsed: Result<TurnStreamParams, RpcError> = rpc::parse_params(&params);
            let span = tracing::debug_span!("stream");
            // Spawned on the daemon's tracker (not jsonrpsee's bare spawn), so
            // shutdown waits for it and it ends with the connection.
            state.tracker.spawn(stream(pending, parsed, state.clone()).instrument(span));
        });
    if let Err(e) = registered {
        tracing::error!("registering {TURN_STREAM} failed: {e}");
    }
}

/// Replays the events after `after_seq`, then follows the log until the
/// session closes (its last event is `session/closed`) or the client leaves.
async fn stream(pending: PendingSubscriptionSink, params: Result<TurnStreamParams, RpcError>, state: Arc<DaemonState>) {
    let params = match params {
        Ok(p) => p,
        Err(e) => return pending.reject(ErrorObjectOwned::from(e)).await,
    };
    let session = match state.sessions.handle(&params.session_id) {
        Ok(s) => s,
        Err(e) => return pending.reject(ErrorObjectOwned::from(RpcError::from(e))).await,
    };
    let runs_agents =
        params.capabilities.as_ref().is_some_and(|c| c.iter().any(|c| c == agentd_protocol::agent::AGENTS_CAPABILITY));
    let answers_elicitation = params
        .capabilities
        .as_ref()
        .is_some_and(|c| c.iter().any(|c| c == agentd_protocol::mcp::ELICITATION_CAPABILITY));
    let answers_sampling =
        params.capabilities.as_ref().is_some_and(|c| c.iter().any(|c| c == agentd_protocol::mcp::SAMPLING_CAPABILITY));
    let (mut follow, _runner) = match session.follow(params.after_seq, runs_agents) {
        Ok(f) => f,
        Err(e) => return pending.reject(ErrorObjectOwned::from(RpcError::invalid_params("after_seq", e))).await,
    };
    let _elicitor = answers_elicitation.then(|| session.elicitor());
    let _sampler = answers_sampling.then(|| session.sampler());
    drop(session);
    let Ok(sink) = pending.accept().await else { return };
    loop {
        let event = tokio::select! {
            event = follow.next() => event,
            _ = sink.closed() => return,
        };
        let Some(event) = event else { return };
        // A client that runs agents always gets their requests.
        let always = matches!(event.kind, EventKind::SessionClosed {})
            || (runs_agents && matches!(event.kind, EventKind::AgentRequest { .. }))
            || (answers_elicitation && matches!(event.kind, EventKind::McpElicitation { .. }))
            || (answers_sampling && matches!(event.kind, EventKind::McpSampling { .. }));
        if !always
            && let Some(kinds) = &params.kinds
            && !kinds.iter().any(|k| k == event.kind.type_name())
        {
            continue;
        }
        let Ok(raw) = serde_json::value::to_raw_value(&*event) else { continue };
        tokio::select! {
            sent = sink.send(SubscriptionMessage::from(raw)) => if sent.is_err() { return },
            _ = sink.closed() => return,
        }
    }
}

/// Runs `f` (file work) on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, RpcError> + Send + 'static) -> Result<T, RpcError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(RpcError::new(agentd_protocol::ErrorCode::InternalError, format!("the history's work failed: {e}")))
    })
}

/// A history's error as an answer: an unknown turn or call names `field`.
fn history_error(e: crate::fs::history::HistoryError, field: &str) -> RpcError {
    match e {
        crate::fs::history::HistoryError::Unknown(_) => RpcError::invalid_params(field, e),
        other => RpcError::new(agentd_protocol::ErrorCode::InternalError, other.to_string()),
    }
}
