//! `daemon/info` and `daemon/activity`.

use agentd_protocol::PROTOCOL_VERSION;
use std::sync::Arc;

use agentd_protocol::methods::{
    DAEMON_ACTIVITY_EVENT, DAEMON_UNWATCH, DAEMON_WATCH, DaemonActivity, DaemonActivityResult, DaemonInfo,
    DaemonInfoResult,
};
use jsonrpsee::RpcModule;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionMessage};

use crate::server::DaemonState;
use crate::server::rpc;

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register::<DaemonActivity, _, _>(module, |_params, state| Ok(activity(state)));
    let registered = module.register_subscription_raw(
        DAEMON_WATCH,
        DAEMON_ACTIVITY_EVENT,
        DAEMON_UNWATCH,
        |_, pending, state, _| {
            state.tracker.spawn(watch(pending, state.clone()));
        },
    );
    if let Err(e) = registered {
        tracing::error!("registering {DAEMON_WATCH} failed: {e}");
    }
    rpc::register::<DaemonInfo, _, _>(module, |_params, state| {
        use std::sync::atomic::Ordering::Relaxed;
        Ok(DaemonInfoResult {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol_version: PROTOCOL_VERSION,
            pid: std::process::id(),
            uptime_ms: state.started.elapsed().as_millis() as u64,
            socket: state.socket.as_ref().map(|p| p.display().to_string()),
            socket_activated: state.activated,
            state_dir: state.state_dir.display().to_string(),
            sessions: state.sessions.len() as u64,
            connections: state.connections.load(Relaxed),
            connections_total: state.connections_total.load(Relaxed),
            tasks: state.tracker.len() as u64,
            features: crate::BUILD_FEATURES.iter().map(|f| (*f).to_owned()).collect(),
            sandbox: agentd_protocol::methods::SandboxStatus {
                network_allow_all: crate::session::user_network_allow_all(),
                warm_helpers: state.sandbox.warm.as_ref().map(|w| w.status()),
                ..state.sandbox.status.clone()
            },
            store_bytes: state.sessions.store_size(),
            listen_tls: state.tls.map(|a| a.to_string()),
            notes: crate::session::claude_settings_not_imported()
                .into_iter()
                .chain(state.sessions.trust().trusts_all().then(|| {
                    "every workspace's settings, .mcp.json, skills and agent definitions are obeyed without your \
                     approval (--trust-project-files)"
                        .to_owned()
                }))
                .collect(),
        })
    });
}

fn activity(state: &DaemonState) -> DaemonActivityResult {
    DaemonActivityResult {
        sessions: state.sessions.activity(),
        rss_kib: crate::process::rss_kib(std::process::id() as i32).unwrap_or(0),
    }
}

/// `daemon/watch`: the activity now, then again after each change (a
/// burst coalesced: at most one snapshot every 200 ms), until the client
/// leaves or the daemon stops.
async fn watch(pending: PendingSubscriptionSink, state: Arc<DaemonState>) {
    let Ok(sink) = pending.accept().await else { return };
    let bell = state.sessions.bell().clone();
    loop {
        let seen = bell.rings();
        let Ok(raw) = serde_json::value::to_raw_value(&activity(&state)) else { return };
        tokio::select! {
            sent = sink.send(SubscriptionMessage::from(raw)) => if sent.is_err() { return },
            _ = sink.closed() => return,
        }
        tokio::select! {
            _ = bell.after(seen) => {}
            _ = sink.closed() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
            _ = sink.closed() => return,
        }
    }
}
