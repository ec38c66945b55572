//! A server's lists changing (`notifications/tools/list_changed`, and the
//! same for resources and prompts). The connection's handler only signals;
//! one task per connection acts on the signals: it waits a moment so a
//! burst counts once, and acts at most once a second per server, so a
//! server that floods these notifications costs one `tools/list` a second
//! at most. Tools are read again and kept by the pool (and its cache file);
//! the sessions using the server are told of every list that changed
//! ([`Notices`], which also carry a server's need for an authorization).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agentd_protocol::mcp::McpList;
use rmcp::service::{Peer, RoleClient};

use super::pool::Server;

use crate::sync::MutexExt;

/// A burst of notifications closer together than this is one change.
const SETTLE: Duration = Duration::from_millis(200);
/// At most one round of work a second per server...
const INTERVAL: Duration = Duration::from_secs(1);
/// ...and one every ten seconds for a server that changed more than
/// [`BUSY`] times in the last minute (each round may read 10,000 tools
/// and remake every session's set).
const SLOW_INTERVAL: Duration = Duration::from_secs(10);
const BUSY: usize = 10;
/// How long a server may take to acknowledge that agentd listens.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Signals that may wait (more are dropped: one of each kind is enough).
const WAITING: usize = 8;

/// What a server's sessions are told unasked.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// One of its lists changed (tools: after the pool read them again and
    /// they differ).
    List(McpList),
    /// It needs an OAuth authorization: why, and what to do.
    AuthRequired(String),
}

/// Where a session hears of a server's notices: the server's name and
/// the notice.
pub type NoticeSink = Arc<dyn Fn(&str, Notice) + Send + Sync>;

/// The sessions listening to one server's notices.
#[derive(Default)]
pub struct Notices {
    sinks: Mutex<HashMap<u64, NoticeSink>>,
    next: AtomicU64,
}

impl Notices {
    fn sinks(&self) -> std::sync::MutexGuard<'_, HashMap<u64, NoticeSink>> {
        self.sinks.locked()
    }

    /// Adds a listener; it listens while the guard lives.
    pub fn watch(self: &Arc<Self>, sink: NoticeSink) -> NoticeGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.sinks().insert(id, sink);
        NoticeGuard { router: self.clone(), id }
    }

    /// Tells every listener `notice` of `server`.
    pub fn tell(&self, server: &str, notice: Notice) {
        let sinks: Vec<NoticeSink> = self.sinks().values().cloned().collect();
        for sink in sinks {
            sink(server, notice.clone());
        }
    }
}

/// Stops a listener when dropped.
pub struct NoticeGuard {
    router: Arc<Notices>,
    id: u64,
}

impl Drop for NoticeGuard {
    fn drop(&mut self) {
        self.router.sinks().remove(&self.id);
    }
}

/// The handler's side: signals that a list changed, never blocking.
#[derive(Clone)]
pub struct Signal(tokio::sync::mpsc::Sender<McpList>);

impl Signal {
    /// `list` changed.
    pub fn send(&self, list: McpList) {
        let _ = self.0.try_send(list);
    }
}

/// The signal a connection's handler holds, and what its task reads.
pub fn channel() -> (Signal, tokio::sync::mpsc::Receiver<McpList>) {
    let (tx, rx) = tokio::sync::mpsc::channel(WAITING);
    (Signal(tx), rx)
}

/// A server of MCP 2026-07-28 says that its lists changed only to a
/// client that listens (`subscriptions/listen`): for such a server, a
/// task listens for the lists it says may change and signals them, until
/// the connection ends. Nothing for a server of an earlier revision (its
/// notifications reach the handler).
pub async fn listen(peer: &Peer<RoleClient>, signal: Signal) {
    let Some(info) = peer.peer_info().filter(|_| super::pool::modern(peer)) else { return };
    let caps = &info.capabilities;
    let mut filter = rmcp::model::SubscriptionFilter::new();
    let changes = |c: Option<bool>| c.unwrap_or(false).then_some(true);
    filter.tools_list_changed = caps.tools.as_ref().and_then(|t| changes(t.list_changed));
    filter.prompts_list_changed = caps.prompts.as_ref().and_then(|p| changes(p.list_changed));
    filter.resources_list_changed = caps.resources.as_ref().and_then(|r| changes(r.list_changed));
    if filter == rmcp::model::SubscriptionFilter::new() {
        return;
    }
    // Established (acknowledged) before the caller lists anything.
    let Ok(Ok(mut subscription)) = tokio::time::timeout(LISTEN_TIMEOUT, peer.listen(filter)).await else {
        tracing::warn!("an MCP server did not acknowledge subscriptions/listen: its list changes are not followed");
        return;
    };
    tokio::spawn(async move {
        while let Ok(Some(note)) = subscription.next().await {
            match note {
                rmcp::model::ServerNotification::ToolListChangedNotification(_) => signal.send(McpList::Tools),
                rmcp::model::ServerNotification::PromptListChangedNotification(_) => signal.send(McpList::Prompts),
                rmcp::model::ServerNotification::ResourceListChangedNotification(_) => signal.send(McpList::Resources),
                _ => {}
            }
        }
    });
}

/// Acts on one connection's signals until the connection ends (its
/// handler, which holds the signal, is dropped with it).
pub fn spawn(mut signals: tokio::sync::mpsc::Receiver<McpList>, server: Weak<Server>, peer: Peer<RoleClient>) {
    tokio::spawn(async move {
        let mut last: Option<Instant> = None;
        let mut rounds: std::collections::VecDeque<Instant> = std::collections::VecDeque::new();
        while let Some(first) = signals.recv().await {
            rounds.retain(|t| t.elapsed() < Duration::from_secs(60));
            let interval = if rounds.len() > BUSY { SLOW_INTERVAL } else { INTERVAL };
            let since = last.map_or(interval, |t| t.elapsed());
            tokio::time::sleep(SETTLE.max(interval.saturating_sub(since))).await;
            rounds.push_back(Instant::now());
            let mut lists = BTreeSet::from([first]);
            while let Ok(list) = signals.try_recv() {
                lists.insert(list);
            }
            last = Some(Instant::now());
            let Some(server) = server.upgrade() else { return };
            for list in lists {
                match list {
                    McpList::Tools => server.read_tools_again(&peer).await,
                    other => server.notices().tell(&server.name, Notice::List(other)),
                }
            }
        }
    });
}
