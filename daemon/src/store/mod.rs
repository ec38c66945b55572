//! The store: what survives a restart, behind one interface. Per session, a
//! [`SessionRecord`] (the session, its context, granted rules, jobs) saved
//! as a whole, and its events appended to a [`Journal`] one at a time.
//!
//! [`DiskStore`] (`disk.rs`) keeps them in `--state-dir`; [`MemoryStore`]
//! keeps them for the life of the process (tests of other parts).

pub mod disk;

use std::collections::BTreeMap;
use std::sync::Mutex;

use agentd_protocol::session::{JobInfo, SessionInfo};
use agentd_protocol::turn::Event;
use serde::{Deserialize, Serialize};

pub use disk::DiskStore;

use crate::sync::MutexExt;
use crate::tool::SessionContext;

/// Events kept for replay per session.
pub const DEFAULT_LOG_CAPACITY: usize = 10_000;

/// A failure to read or write the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backing storage failed.
    #[error("store {op} for session {session_id}: {why}")]
    Backend {
        /// What was being done.
        op: &'static str,
        /// On which session.
        session_id: String,
        /// Why it failed.
        why: String,
        /// The error that caused it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What is saved of a session beside its events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The format's version.
    pub version: u32,
    /// The session as created.
    pub info: SessionInfo,
    /// What its calls have changed: shell directory, file-state cache,
    /// todos, mode, loaded tools.
    #[serde(default)]
    pub context: SessionContext,
    /// Rules `allow_always` granted.
    #[serde(default)]
    pub granted_rules: Vec<String>,
    /// Its background jobs (none survives a restart: they are reported as
    /// killed).
    #[serde(default)]
    pub jobs: Vec<JobInfo>,
}

/// The version of [`SessionRecord`] this build writes.
pub const RECORD_VERSION: u32 = 1;

/// A session as the store had it: its record and its last events.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The record.
    pub record: SessionRecord,
    /// Its events, oldest first (the last ones kept).
    pub events: Vec<Event>,
    /// The last [`Durable`] line of its journal: newer than the record
    /// for what it holds.
    pub durable: Option<Durable>,
}

/// What of a session a client or a tool changes and is told of at once —
/// granted rules, the mode, todos, tasks, the worktree, Config settings,
/// loaded tools. **Invariant:** each change is in the journal (a
/// `{"durable": …}` line, written with the events of the same moment)
/// before the answer or event that announces it leaves the daemon; the
/// executor's `changed` is the one place that writes it, and the session
/// record, saved lazily, is a snapshot that the last such line overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Durable {
    /// The mode EnterPlanMode or ExitPlanMode set.
    pub mode: Option<agentd_protocol::session::PermissionMode>,
    /// The mode before plan mode.
    pub mode_before_plan: Option<agentd_protocol::session::PermissionMode>,
    /// TodoWrite's list.
    pub todos: Vec<agentd_protocol::session::TodoItem>,
    /// The task list.
    pub tasks: Vec<agentd_protocol::session::TaskItem>,
    /// The last task id given.
    pub last_task_id: u64,
    /// The worktree the session is in.
    pub worktree: Option<agentd_protocol::session::WorktreeInfo>,
    /// Config's settings.
    pub settings: BTreeMap<String, serde_json::Value>,
    /// Deferred tools ToolSearch loaded.
    pub loaded_tools: Vec<String>,
    /// Rules `allow_always` granted.
    pub granted_rules: Vec<String>,
}

impl Durable {
    /// What `context` and `granted` hold of it.
    pub fn of(context: &SessionContext, granted: Vec<String>) -> Durable {
        Durable {
            mode: context.mode,
            mode_before_plan: context.mode_before_plan,
            todos: context.todos.clone(),
            tasks: context.tasks.clone(),
            last_task_id: context.last_task_id,
            worktree: context.worktree.clone(),
            settings: context.settings.clone(),
            loaded_tools: context.loaded_tools.clone(),
            granted_rules: granted,
        }
    }

    /// Puts it into `context` (a worktree change sends the shell back to
    /// the workspace); returns the granted rules.
    pub fn apply(self, context: &mut SessionContext) -> Vec<String> {
        if context.worktree != self.worktree {
            context.shell_cwd = None;
        }
        context.mode = self.mode;
        context.mode_before_plan = self.mode_before_plan;
        context.todos = self.todos;
        context.tasks = self.tasks;
        context.last_task_id = context.last_task_id.max(self.last_task_id);
        context.worktree = self.worktree;
        context.settings = self.settings;
        context.loaded_tools = self.loaded_tools;
        self.granted_rules
    }
}

/// A journal line that is not an event.
#[derive(Serialize, Deserialize)]
pub(crate) struct DurableLine {
    pub durable: Durable,
}

/// Appends `durable`'s journal line to `out` (framed as events are).
pub fn durable_line(durable: &Durable, out: &mut Vec<u8>) {
    framed(&DurableLine { durable: durable.clone() }, out);
}

/// Where a session's events go as they happen.
pub trait Journal: Send + Sync + 'static {
    /// Appends lines made by [`journal_line`], in one write. Called in seq
    /// order under the event log's lock; must not block for long (a write,
    /// no sync).
    fn append_lines(&self, lines: &[u8]);

    /// The last [`durable_line`] written (appended by `append_lines` too):
    /// kept when the journal is rewritten shorter.
    fn remember_durable(&self, _line: &[u8]) {}

    /// Appends one event.
    fn append(&self, event: &Event) {
        let mut line = Vec::new();
        journal_line(event, &mut line);
        self.append_lines(&line);
    }
}

/// Appends an event's journal line to `out`: `<crc32 in hex> <JSON>\n`.
pub fn journal_line(event: &Event, out: &mut Vec<u8>) {
    framed(event, out);
}

fn framed(value: &impl Serialize, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(b"00000000 ");
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(start);
        return;
    }
    let crc = disk::crc32(&out[start + 9..]);
    out[start..start + 8].copy_from_slice(format!("{crc:08x}").as_bytes());
    out.push(b'\n');
}

/// Durable session records.
pub trait Store: Send + Sync + 'static {
    /// Saves (creates or replaces) a session's record.
    fn save(&self, record: &SessionRecord) -> Result<(), StoreError>;
    /// Removes a session's record, events and files; removing a missing one
    /// is not an error.
    fn remove_session(&self, session_id: &str) -> Result<(), StoreError>;
    /// Every stored session, in no particular order. Sessions that cannot
    /// be read are reported and left out.
    fn load_sessions(&self) -> Result<Vec<Stored>, StoreError>;
    /// The journal of a session's events, if this store keeps them.
    fn journal(&self, session_id: &str) -> Option<std::sync::Arc<dyn Journal>>;
    /// Makes what was written durable (journals are synced to disk).
    fn sync(&self) {}
    /// Bytes the store takes.
    fn size(&self) -> u64 {
        0
    }
    /// Sessions whose event log has outgrown its limit.
    fn oversized(&self) -> Vec<String> {
        Vec::new()
    }
    /// Rewrites a session's event log with only `events`.
    fn compact(&self, _session_id: &str, _events: &[std::sync::Arc<Event>]) {}
}

/// A store that lives as long as the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<BTreeMap<String, SessionRecord>>,
}

impl Store for MemoryStore {
    fn save(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let mut map = self.sessions.locked();
        map.insert(record.info.session_id.clone(), record.clone());
        Ok(())
    }

    fn remove_session(&self, session_id: &str) -> Result<(), StoreError> {
        let mut map = self.sessions.locked();
        map.remove(session_id);
        Ok(())
    }

    fn load_sessions(&self) -> Result<Vec<Stored>, StoreError> {
        let map = self.sessions.locked();
        Ok(map.values().map(|r| Stored { record: r.clone(), events: Vec::new(), durable: None }).collect())
    }

    fn journal(&self, _session_id: &str) -> Option<std::sync::Arc<dyn Journal>> {
        None
    }
}
