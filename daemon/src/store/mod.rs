//! The store: where session state (and, later, the event log, permission
//! grants and file-state cache) is kept, behind one interface so that making
//! it durable changes this module and nothing that calls it.
//!
//! Today only [`MemoryStore`] exists: sessions do not yet survive a daemon
//! restart.

use std::collections::BTreeMap;
use std::sync::Mutex;

use agentd_protocol::session::SessionInfo;

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
    },
}

/// Durable session records.
pub trait Store: Send + Sync + 'static {
    /// Saves (creates or replaces) a session record.
    fn save_session(&self, session: &SessionInfo) -> Result<(), StoreError>;
    /// Removes a session record; removing a missing one is not an error.
    fn remove_session(&self, session_id: &str) -> Result<(), StoreError>;
    /// Every stored session, in no particular order.
    fn load_sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;
}

/// A store that lives as long as the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<BTreeMap<String, SessionInfo>>,
}

impl Store for MemoryStore {
    fn save_session(&self, session: &SessionInfo) -> Result<(), StoreError> {
        let mut map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(session.session_id.clone(), session.clone());
        Ok(())
    }

    fn remove_session(&self, session_id: &str) -> Result<(), StoreError> {
        let mut map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(session_id);
        Ok(())
    }

    fn load_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        Ok(map.values().cloned().collect())
    }
}
