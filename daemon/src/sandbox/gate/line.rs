//! A gated call's line back to its session: the gate asks the user about a
//! domain no rule covers while the command runs, sees what the user granted
//! since the call started, and reports each connection. The executor
//! provides one to every shell call (see `tool::context::CallLine`).

use std::sync::Arc;

/// What a running call asks the user, mid-call (the network gate: a
/// command connects to a domain no rule covers).
#[derive(Debug, Clone)]
pub struct MidCallAsk {
    /// Why approval is needed.
    pub reason: String,
    /// Rules `allow_always` would add, best first.
    pub suggestions: Vec<String>,
    /// The call's input, as the client should see it.
    pub input: serde_json::Value,
    /// What is asked for (`network`, `effects`).
    pub kind: &'static str,
    /// The host asked for (`network`).
    pub host: Option<String>,
    /// The port (`network`).
    pub port: Option<u16>,
    /// What the command changed (`effects`).
    pub changes: Vec<agentd_protocol::changes::FileChange>,
    /// The changes as one unified diff (`effects`).
    pub diff: Option<String>,
}

/// A connection the network gate let through or refused, for the
/// session's `sandbox/network` event.
#[derive(Debug, Clone)]
pub struct NetworkNote {
    /// The host asked for.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Let through.
    pub allowed: bool,
    /// What decided.
    pub rule: String,
    /// Bytes sent and received.
    pub bytes_up: u64,
    /// Bytes received.
    pub bytes_down: u64,
}

/// A running call's line back to its session: ask the user while it runs,
/// see what the user granted since it started, report what it did.
pub trait CallChannel: Send + Sync {
    /// Asks the user (a `permission/request` event) and waits for the
    /// answer, the session's timeout, or the call's cancellation: `Err` is
    /// why it was refused.
    fn ask(&self, ask: MidCallAsk) -> futures_util::future::BoxFuture<'static, Result<(), String>>;
    /// The `WebFetch(domain:…)` rule `allow_always` answers granted in the
    /// session that covers `host`, if any (its text).
    fn granted_domain(&self, host: &str) -> Option<String>;
    /// The session's slots for connections through the network gate.
    fn connection_slots(&self) -> Arc<tokio::sync::Semaphore>;
    /// Reports a connection of the network gate.
    fn network(&self, note: NetworkNote);
}
