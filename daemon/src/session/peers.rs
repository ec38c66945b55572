//! The daemon's sessions as one session sees them ([`crate::peers`]):
//! ListAgents' listing, SendMessage's delivery into the target's event log,
//! and `notify_when_idle`'s one notice.

use super::*;
use crate::peers::{Delivered, MAX_IDLE_WATCHERS, Outgoing, Peer, PeerBook, Peers};
use crate::sync::MutexExt;

/// The [`Peers`] of a [`SessionManager`] (held weakly: sessions hold it).
pub(super) struct PeerDesk(std::sync::Weak<SessionManager>);

impl SessionManager {
    /// Gives sessions (those open now and to come) the daemon's other
    /// sessions, for ListAgents and SendMessage.
    pub fn install_peers(self: &Arc<Self>) {
        let book: PeerBook = Arc::new(PeerDesk(Arc::downgrade(self)));
        for session in self.lock().values() {
            session.executor.set_peers(book.clone());
        }
        let _ = self.peers.set(book);
    }

    /// What every open session is doing now (`daemon/activity`), oldest
    /// first.
    pub fn activity(&self) -> Vec<agentd_protocol::methods::SessionActivity> {
        let mut sessions: Vec<Arc<Session>> = self.lock().values().cloned().collect();
        sessions.sort_by_key(|s| s.seq);
        sessions
            .into_iter()
            .map(|s| {
                let (_, _, events, bytes) = s.executor.kept();
                let schedules = self.schedules.list(&s.info.session_id);
                agentd_protocol::methods::SessionActivity {
                    session_id: s.info.session_id.clone(),
                    name: s.info.name.clone(),
                    cwd: s.info.cwd.clone(),
                    parent_session_id: s.info.parent_session_id.clone(),
                    state: if s.executor.busy() { "running" } else { "idle" }.to_owned(),
                    age_ms: now_ms().saturating_sub(s.info.created_at_ms),
                    calls: s.executor.calls_now(),
                    jobs: s.executor.jobs().list().into_iter().filter(|j| j.status == "running").collect(),
                    schedules: schedules.iter().map(crate::schedule::Job::protocol).collect(),
                    questions: s.executor.pending_permissions(),
                    events_kept: events as u64,
                    event_bytes: bytes as u64,
                }
            })
            .collect()
    }

    /// Whether `name` is taken by an open session.
    pub(super) fn name_taken(&self, name: &str) -> bool {
        self.lock().values().any(|s| s.info.name.as_deref() == Some(name))
    }

    /// The session `to` names for `caller` (a name, an id, `name [id]`, or
    /// `main`), if `caller` may reach it.
    fn reach(&self, caller: &Session, to: &str) -> Result<Arc<Session>, String> {
        let to = to.trim();
        let id = match to {
            "main" => caller.info.parent_session_id.clone().ok_or(
                "\"main\" is the session you are a sub-agent of, and this session is not a sub-agent".to_owned(),
            )?,
            _ => match to.rsplit_once(" [").and_then(|(_, r)| r.strip_suffix(']')) {
                Some(id) => id.to_owned(),
                None => to.to_owned(),
            },
        };
        let map = self.lock();
        let found = map.get(&id).or_else(|| map.values().find(|s| s.info.name.as_deref() == Some(id.as_str())));
        let Some(target) = found.filter(|s| reachable(caller, s)) else {
            return Err(format!("no session {to:?} to reach (ListAgents lists those you can)"));
        };
        if target.info.session_id == caller.info.session_id {
            return Err("that is this session: a message to oneself is not sent".into());
        }
        Ok(target.clone())
    }

    /// One `session/idle` for `sender` when `target` next finishes a turn
    /// with nothing open, or closes.
    fn notify_when_idle(self: &Arc<Self>, target: &Arc<Session>, sender: &Arc<Session>) -> Result<(), String> {
        let key = target.info.session_id.clone();
        let sender_id = sender.info.session_id.clone();
        let mut watching = self.idle_watchers.locked();
        let senders = watching.entry(key.clone()).or_default();
        // One notice a sender: asking again changes nothing.
        if senders.contains(&sender_id) {
            return Ok(());
        }
        if senders.len() >= MAX_IDLE_WATCHERS {
            return Err(format!("{MAX_IDLE_WATCHERS} other sessions already wait for this one to be idle"));
        }
        let mut watch = target.executor.events().watch().map_err(|e| format!("cannot watch it: {e}"))?;
        senders.insert(sender_id.clone());
        drop(watching);
        let executor = Arc::downgrade(&target.executor);
        let log = sender.executor.events().clone();
        let (session_id, name) = (key.clone(), target.info.name.clone());
        let manager = Arc::downgrade(self);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            let idle = || executor.upgrade().is_none_or(|e| !e.busy());
            let closed = loop {
                let turn_end = match watch.receiver.recv().await {
                    Ok(event) => match event.kind {
                        EventKind::SessionClosed {} => break true,
                        EventKind::TurnCompleted { .. } | EventKind::TurnDiscarded { .. } => true,
                        _ => false,
                    },
                    // Events were missed: look at where it stands.
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => break true,
                };
                if turn_end && idle() {
                    break false;
                }
            };
            log.push(EventKind::SessionIdle { session_id: session_id.clone(), name, closed });
            if let Some(manager) = manager.upgrade() {
                let mut watching = manager.idle_watchers.locked();
                if let Some(senders) = watching.get_mut(&session_id) {
                    senders.remove(&sender_id);
                    if senders.is_empty() {
                        watching.remove(&session_id);
                    }
                }
            }
        });
        Ok(())
    }
}

/// Whether `caller` may reach `target`: a discoverable session, or one of
/// its own family (its parent, its sub-agents) whatever they say.
fn reachable(caller: &Session, target: &Session) -> bool {
    let family = caller.info.parent_session_id.as_deref() == Some(target.info.session_id.as_str())
        || target.info.parent_session_id.as_deref() == Some(caller.info.session_id.as_str());
    !target.removed.load(Ordering::Relaxed) && (target.info.discoverable || family)
}

impl Peers for PeerDesk {
    fn list(&self, caller: &str) -> Vec<Peer> {
        let Some(manager) = self.0.upgrade() else { return Vec::new() };
        let Ok(me) = manager.handle(caller) else { return Vec::new() };
        let map = manager.lock();
        let mut sessions: Vec<&Arc<Session>> =
            map.values().filter(|s| s.info.session_id != caller && reachable(&me, s)).collect();
        sessions.sort_by_key(|s| s.seq);
        sessions
            .into_iter()
            .map(|s| Peer {
                session_id: s.info.session_id.clone(),
                name: s.info.name.clone(),
                cwd: s.info.cwd.clone(),
                state: if s.executor.busy() { "running" } else { "idle" },
                // A parent the caller cannot reach is not named.
                parent: s
                    .info
                    .parent_session_id
                    .clone()
                    .filter(|p| map.get(p).is_some_and(|p| p.info.session_id == caller || reachable(&me, p))),
                is_parent: me.info.parent_session_id.as_deref() == Some(s.info.session_id.as_str()),
            })
            .collect()
    }

    fn send(&self, caller: &str, to: &str, outgoing: Outgoing) -> Result<Delivered, String> {
        let manager = self.0.upgrade().ok_or("the daemon is stopping")?;
        let me = manager.handle(caller).map_err(|e| e.to_string())?;
        let target = manager.reach(&me, to)?;
        let watching = outgoing.notify_when_idle;
        if watching {
            manager.notify_when_idle(&target, &me)?;
        }
        let log = target.executor.events();
        let attached = log.subscriber_count() > 0;
        if !outgoing.message.trim().is_empty() {
            log.push(EventKind::MessageReceived {
                from: me.info.session_id.clone(),
                from_name: me.info.name.clone(),
                summary: outgoing.summary.filter(|s| !s.trim().is_empty()),
                message: outgoing.message,
            });
        }
        Ok(Delivered { session_id: target.info.session_id.clone(), name: target.info.name.clone(), attached, watching })
    }
}
