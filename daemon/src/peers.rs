//! Sessions that talk: what a session's ListAgents and SendMessage see of
//! the daemon's other sessions. The daemon is the one process that owns
//! every session on the machine, so a message is an event in the target's
//! log (replayed to whichever client attaches later), not a file to poll.

use std::sync::Arc;

/// Longest message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// Longest summary kept, in characters (Claude Code truncates it there).
pub const MAX_SUMMARY_CHARS: usize = 200;
/// Most `notify_when_idle` requests waiting on one session.
pub const MAX_IDLE_WATCHERS: usize = 64;

/// A session another may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its id.
    pub session_id: String,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Its workspace.
    pub cwd: std::path::PathBuf,
    /// `running` (a turn is open) or `idle`.
    pub state: &'static str,
    /// The session it is a sub-agent of.
    pub parent: Option<String>,
    /// It is the caller's parent (what `main` names).
    pub is_parent: bool,
}

/// A message to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Its text (may be empty with `notify_when_idle`).
    pub message: String,
    /// The sender's few words on it.
    pub summary: Option<String>,
    /// Tell the sender once when the target next finishes a turn or closes.
    pub notify_when_idle: bool,
}

/// What became of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The target's id.
    pub session_id: String,
    /// The target's name, if any.
    pub name: Option<String>,
    /// A client was attached to be sent it at once (it waits in the log
    /// otherwise).
    pub attached: bool,
    /// The sender will be told when the target is next idle.
    pub watching: bool,
}

/// The daemon's sessions as one session sees them.
pub trait Peers: Send + Sync {
    /// The sessions `caller` may reach (not itself, none that is not
    /// discoverable), oldest first.
    fn list(&self, caller: &str) -> Vec<Peer>;
    /// Delivers `outgoing` from `caller` to the session `to` names (a name,
    /// an id, `name [id]` as listed, or `main`: the caller's parent).
    fn send(&self, caller: &str, to: &str, outgoing: Outgoing) -> Result<Delivered, String>;
}

/// The handle a session's calls are given.
pub type PeerBook = Arc<dyn Peers>;

/// Whether `name` may name a session: not `main` (a sub-agent's parent),
/// not shaped like a session id (it would take the place of one).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.eq_ignore_ascii_case("main")
        && uuid::Uuid::parse_str(name).is_err()
}
