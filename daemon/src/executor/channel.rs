//! What a running call (Bash, through the network gate) asks of its
//! session while it runs: a mid-call permission request, the domains the
//! session was granted, the gate's connection slots, `sandbox/network`
//! events.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentd_protocol::turn::EventKind;
use tokio_util::sync::CancellationToken;

use super::{AskFor, Asked, CallIds, SessionExecutor};

/// A running call's [`CallChannel`]: asks and events go to its session.
pub(super) struct CallPort {
    pub(super) executor: std::sync::Weak<SessionExecutor>,
    pub(super) call: CallIds,
    pub(super) token: CancellationToken,
    /// `sandbox/network` events sent so far (at most
    /// [`NETWORK_EVENTS_PER_CALL`]).
    pub(super) notes: std::sync::atomic::AtomicUsize,
}

/// Most `sandbox/network` events one call sends.
const NETWORK_EVENTS_PER_CALL: usize = 256;

impl crate::tool::CallChannel for CallPort {
    fn ask(&self, ask: crate::tool::MidCallAsk) -> futures_util::future::BoxFuture<'static, Result<(), String>> {
        let executor = self.executor.clone();
        let call = self.call.clone();
        let token = self.token.clone();
        Box::pin(async move {
            let Some(me) = executor.upgrade() else { return Err("the session is closed".to_owned()) };
            let what = Asked { kind: ask.kind, host: ask.host, port: ask.port, changes: ask.changes, diff: ask.diff };
            let wait = me.open_request(
                &call,
                AskFor { reason: ask.reason, suggestions: ask.suggestions, input: ask.input, outside: None },
                Some(what),
            );
            me.wait_for_answer(wait, &token).await.map(|_| ())
        })
    }

    fn granted_domain(&self, host: &str) -> Option<String> {
        let me = self.executor.upgrade()?;
        me.services.asks.granted_domain(host).map(|r| r.text)
    }

    fn connection_slots(&self) -> Arc<tokio::sync::Semaphore> {
        match self.executor.upgrade() {
            Some(me) => me.net_slots(),
            None => Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }

    fn network(&self, note: crate::tool::NetworkNote) {
        if self.notes.fetch_add(1, Ordering::Relaxed) >= NETWORK_EVENTS_PER_CALL {
            return;
        }
        let Some(me) = self.executor.upgrade() else { return };
        me.events.push(EventKind::SandboxNetwork {
            turn_id: self.call.turn_id.clone(),
            tool_use_id: self.call.tool_use_id.clone(),
            host: note.host,
            port: note.port,
            allowed: note.allowed,
            rule: note.rule,
            bytes_up: note.bytes_up,
            bytes_down: note.bytes_down,
        });
    }
}
