//! `turn/submit`, `turn/cancel`, `turn/discard` and the `turn/stream`
//! subscription.

use std::sync::Arc;

use agentd_protocol::ErrorCode;
use agentd_protocol::methods::{TURN_EVENT, TURN_STREAM, TURN_UNSTREAM, TurnCancel, TurnDiscard, TurnSubmit};
use agentd_protocol::turn::{EventKind, TurnCancelResult, TurnDiscardResult, TurnStreamParams, TurnSubmitResult};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{PendingSubscriptionSink, RpcModule, SubscriptionMessage};
use tokio::sync::broadcast::error::RecvError;
use tracing::Instrument;

use agentd_protocol::methods::PermissionRespond;
use agentd_protocol::permission::PermissionRespondResult;

use crate::executor::TurnError;
use crate::executor::events::EventLog;
use crate::permission::ask::RespondError;
use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

impl From<TurnError> for RpcError {
    fn from(e: TurnError) -> Self {
        let field = match &e {
            TurnError::TurnEnded { .. } | TurnError::UnknownTurn { .. } => "turn_id",
            TurnError::DuplicateToolUse { .. } | TurnError::EmptyToolUseId => "tool_uses",
            TurnError::UnknownToolUse { .. } => "tool_use_id",
            TurnError::Closed => return RpcError::new(ErrorCode::UnknownSession, e.to_string()),
        };
        RpcError::invalid_params(field, e)
    }
}

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register::<TurnSubmit, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let turn_id = session.executor.submit(p.turn_id, p.tool_uses, p.end).map_err(RpcError::from)?;
        Ok(TurnSubmitResult { turn_id })
    });
    rpc::register::<TurnCancel, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let cancelled =
            session.executor.cancel(p.turn_id.as_deref(), p.tool_use_id.as_deref()).map_err(RpcError::from)?;
        Ok(TurnCancelResult { cancelled })
    });
    rpc::register::<TurnDiscard, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let discarded = session.executor.discard(&p.turn_id).map_err(RpcError::from)?;
        Ok(TurnDiscardResult { discarded })
    });
    rpc::register::<agentd_protocol::methods::AgentRespond, _, _>(module, |p, state| {
        state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let answer = crate::agents::AgentAnswer { result: p.result, is_error: p.is_error.unwrap_or(false) };
        crate::agents::respond(&p.session_id, &p.request_id, answer)
            .map_err(|e| RpcError::invalid_params("request_id", e))?;
        Ok(agentd_protocol::agent::AgentRespondResult { request_id: p.request_id })
    });
    rpc::register::<PermissionRespond, _, _>(module, |p, state| {
        let session = state.sessions.handle(&p.session_id).map_err(RpcError::from)?;
        let rule_added = session.executor.respond(&p).map_err(|e| match e {
            RespondError::UnknownRequest(_) => RpcError::invalid_params("request_id", e),
            RespondError::NoRule | RespondError::BadRule(_) => RpcError::invalid_params("rule", e),
        })?;
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
    let log: Arc<EventLog> = session.executor.events().clone();
    drop(session);
    let sub = match log.subscribe(params.after_seq) {
        Ok(sub) => sub,
        Err(e) => return pending.reject(ErrorObjectOwned::from(RpcError::invalid_params("after_seq", e))).await,
    };
    let Ok(sink) = pending.accept().await else { return };
    let _runner = params
        .capabilities
        .as_ref()
        .is_some_and(|c| c.iter().any(|c| c == agentd_protocol::agent::AGENTS_CAPABILITY))
        .then(|| log.agent_runner());
    let mut last = params.after_seq.unwrap_or(sub.last_seq);
    let mut receiver = sub.receiver;
    let mut backlog = sub.replay;
    loop {
        for event in backlog.drain(..) {
            if event.seq <= last {
                continue;
            }
            last = event.seq;
            let ended = matches!(event.kind, EventKind::SessionClosed {});
            if !ended
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
            if ended {
                return;
            }
        }
        if log.is_closed() && last >= log.last_seq() {
            return;
        }
        let next = tokio::select! {
            next = receiver.recv() => next,
            _ = sink.closed() => return,
        };
        match next {
            Ok(event) => backlog.push(event),
            // Fell behind the live channel: catch up from the log.
            Err(RecvError::Lagged(_)) => match log.since(last) {
                Ok(events) => backlog = events,
                Err(e) => {
                    tracing::warn!("stream subscriber fell too far behind: {e}");
                    return;
                }
            },
            Err(RecvError::Closed) => return,
        }
    }
}
