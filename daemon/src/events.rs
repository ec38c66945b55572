//! A session's event log: every event gets the next `seq`, the last
//! events are kept for replay (`turn/stream {after_seq}`) — at most
//! `capacity` of them and about [`DEFAULT_LOG_BYTES`] of their content —
//! and live subscribers get each event as it is pushed. The channel to
//! live subscribers exists only once a client has subscribed (an idle
//! session holds no buffer for it), and is small: a subscriber that falls
//! behind catches up from the log.
//!
//! **Invariant:** events are pushed under the executor's lock when they
//! report a state change, so their order is the order things happened.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agentd_protocol::turn::{Event, EventKind};
use tokio::sync::broadcast;

use crate::sync::MutexExt;

pub use crate::store::DEFAULT_LOG_CAPACITY;
/// Bytes of events (their text, estimated) kept for replay per session.
pub const DEFAULT_LOG_BYTES: usize = 4 * 1024 * 1024;
/// Events a live subscriber may be behind before it catches up from the log.
const LIVE_CAPACITY: usize = 256;
/// What an event costs beside its text (its fields, the `Arc`, the slot).
const EVENT_OVERHEAD: usize = 160;

/// Why a replay cannot start where asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The events after `after_seq` are partly gone.
    #[error(
        "events after seq {after_seq} are no longer kept (the oldest kept is {oldest}); resync from the current state"
    )]
    Gone {
        /// What the client asked for.
        after_seq: u64,
        /// The oldest seq still kept.
        oldest: u64,
    },
    /// `after_seq` lies beyond the last event.
    #[error("after_seq {after_seq} is ahead of the log (the last seq is {last})")]
    Ahead {
        /// What the client asked for.
        after_seq: u64,
        /// The last seq.
        last: u64,
    },
}

/// A new subscriber's start: what to replay, then what to follow.
pub struct Subscription {
    /// Events to send first.
    pub replay: Vec<Arc<Event>>,
    /// Every event pushed after `last_seq`.
    pub receiver: broadcast::Receiver<Arc<Event>>,
    /// The last seq pushed when the subscription started.
    pub last_seq: u64,
}

struct LogInner {
    /// Each event with its estimated size.
    events: VecDeque<(Arc<Event>, usize)>,
    /// The sum of the kept events' sizes.
    bytes: usize,
    /// The seq the next event gets (seqs start at 1).
    next_seq: u64,
    /// Live subscribers' channel, once there has been one.
    live: Option<broadcast::Sender<Arc<Event>>>,
    /// While a batch is open: journal lines not written yet, and the events
    /// not sent yet (they are sent once their lines are written).
    unwritten: Vec<u8>,
    unsent: Vec<Arc<Event>>,
}

impl LogInner {
    /// Sends the events held (a batch's, then the one pushed), in order,
    /// to the live subscribers; with none, they are dropped. The buffer
    /// keeps its capacity.
    fn send_unsent(&mut self) {
        let live = self.live.as_ref().filter(|l| l.receiver_count() > 0);
        for event in self.unsent.drain(..) {
            if let Some(live) = live {
                let _ = live.send(event);
            }
        }
    }

    /// Drops the oldest events beyond `capacity` or `max_bytes` (the newest
    /// is kept whatever its size).
    fn trim(&mut self, capacity: usize, max_bytes: usize) {
        while self.events.len() > capacity || (self.bytes > max_bytes && self.events.len() > 1) {
            if let Some((_, gone)) = self.events.pop_front() {
                self.bytes -= gone;
            }
        }
    }
}

/// A session's events.
pub struct EventLog {
    closed: std::sync::atomic::AtomicBool,
    inner: Mutex<LogInner>,
    capacity: usize,
    max_bytes: usize,
    /// Where events are written as they are pushed (the durable store).
    journal: Option<Arc<dyn crate::store::Journal>>,
    /// Open batches ([`EventLog::batch`]).
    batches: std::sync::atomic::AtomicUsize,
    /// Streams whose client runs sub-agents (`capabilities: ["agents"]`).
    agent_runners: std::sync::atomic::AtomicUsize,
    /// Streams whose client answers MCP elicitations
    /// (`capabilities: ["elicitation"]`).
    elicitors: std::sync::atomic::AtomicUsize,
    /// Streams whose client answers MCP sampling requests
    /// (`capabilities: ["sampling"]`).
    samplers: std::sync::atomic::AtomicUsize,
    /// Receivers of the daemon's own ([`EventLog::watch`]).
    internal: Arc<std::sync::atomic::AtomicUsize>,
    /// Rung at each event (`daemon/watch`).
    bell: std::sync::OnceLock<Arc<Bell>>,
}

/// Rung at every event of every session (and when sessions come and go):
/// what wakes `daemon/watch`'s subscribers. Cheap when nobody waits.
#[derive(Debug, Default)]
pub struct Bell {
    rings: std::sync::atomic::AtomicU64,
    /// Tasks waiting in [`Bell::after`]: with none, a ring is one atomic add.
    waiting: std::sync::atomic::AtomicUsize,
    notify: tokio::sync::Notify,
}

impl Bell {
    /// Something changed.
    pub fn ring(&self) {
        self.rings.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// How many times it rang.
    pub fn rings(&self) -> u64 {
        self.rings.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits for the next ring after `seen` rings.
    pub async fn after(&self, seen: u64) {
        struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        self.waiting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the count is read again: no ring is lost.
            notified.as_mut().enable();
            if self.rings.load(std::sync::atomic::Ordering::SeqCst) != seen {
                return;
            }
            notified.await;
        }
    }
}

/// A receiver of a log's events for the daemon's own use.
pub struct InternalSubscription {
    /// Every event pushed after it was made.
    pub receiver: broadcast::Receiver<Arc<Event>>,
    count: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for InternalSubscription {
    fn drop(&mut self) {
        self.count.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl EventLog {
    /// A log keeping the last `capacity` events, within [`DEFAULT_LOG_BYTES`].
    pub fn new(capacity: usize) -> Self {
        Self::with_bytes(capacity, DEFAULT_LOG_BYTES)
    }

    /// A log keeping the last `capacity` events, within about `max_bytes`
    /// (the newest event is kept whatever its size).
    pub fn with_bytes(capacity: usize, max_bytes: usize) -> Self {
        EventLog {
            closed: Default::default(),
            inner: Mutex::new(LogInner {
                events: VecDeque::new(),
                bytes: 0,
                next_seq: 1,
                live: None,
                unwritten: Vec::new(),
                unsent: Vec::new(),
            }),
            capacity: capacity.max(1),
            max_bytes,
            journal: None,
            batches: Default::default(),
            agent_runners: Default::default(),
            elicitors: Default::default(),
            samplers: Default::default(),
            internal: Default::default(),
            bell: std::sync::OnceLock::new(),
        }
    }

    /// A log that writes each event to `journal` before anyone is sent it,
    /// holding `past` (a restored session's events) to begin with.
    pub fn durable(capacity: usize, journal: Option<Arc<dyn crate::store::Journal>>, past: Vec<Event>) -> Self {
        let mut log = Self::new(capacity);
        log.journal = journal;
        {
            let mut inner = log.lock();
            for event in past {
                inner.next_seq = event.seq + 1;
                let size = approx_size(&event.kind);
                inner.events.push_back((Arc::new(event), size));
                inner.bytes += size;
            }
            inner.trim(log.capacity, log.max_bytes);
        }
        log
    }

    /// The events kept now, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Event>> {
        self.lock().events.iter().map(|(e, _)| e.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.locked()
    }

    /// Appends an event; returns its seq.
    pub fn push(&self, kind: EventKind) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        if matches!(kind, EventKind::SessionClosed {}) {
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let size = approx_size(&kind);
        let event = Arc::new(Event { seq, kind });
        let batched = self.batches.load(std::sync::atomic::Ordering::Acquire) > 0;
        inner.events.push_back((event.clone(), size));
        inner.bytes += size;
        inner.trim(self.capacity, self.max_bytes);
        if let Some(journal) = &self.journal {
            // Written before any client is sent it; in a batch, with the
            // batch's other events, in one write when the batch ends.
            crate::store::journal_line(&event, &mut inner.unwritten);
            if batched {
                inner.unsent.push(event);
                return seq;
            }
            journal.append_lines(&inner.unwritten);
            inner.unwritten.clear();
        }
        // Events of a batch that just ended go first, in order.
        inner.unsent.push(event);
        inner.send_unsent();
        drop(inner);
        if let Some(bell) = self.bell.get() {
            bell.ring();
        }
        seq
    }

    /// Rings `bell` at each event from now on.
    pub fn ring_on_push(&self, bell: Arc<Bell>) {
        let _ = self.bell.set(bell);
    }

    /// Writes the session's durable state (see [`crate::store::Durable`])
    /// to the journal: with the batch's events when a batch is open (before
    /// any of them is sent), else at once — before whatever announces the
    /// change is pushed or answered.
    pub fn record_durable(&self, durable: &crate::store::Durable) {
        let Some(journal) = &self.journal else { return };
        let mut line = Vec::new();
        crate::store::durable_line(durable, &mut line);
        let mut inner = self.lock();
        journal.remember_durable(&line);
        inner.unwritten.extend_from_slice(&line);
        if self.batches.load(std::sync::atomic::Ordering::Acquire) > 0 {
            return;
        }
        journal.append_lines(&inner.unwritten);
        inner.unwritten.clear();
    }

    /// Opens a batch: until the last open batch ends, pushed events are
    /// held, then written to the journal in one write and only then sent.
    /// The executor opens one for as long as it holds its lock (and runs
    /// what it started inline), so a turn's burst of events costs one write.
    pub fn batch(&self) -> Batch<'_> {
        self.batches.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Batch(self)
    }

    fn end_batch(&self) {
        if self.batches.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) != 1 {
            return;
        }
        let mut inner = self.lock();
        if let Some(journal) = &self.journal
            && !inner.unwritten.is_empty()
        {
            journal.append_lines(&inner.unwritten);
            inner.unwritten.clear();
        }
        inner.send_unsent();
        drop(inner);
        if let Some(bell) = self.bell.get() {
            bell.ring();
        }
    }

    /// The events after `after_seq` (none when `None`), a receiver of
    /// every later event, and the last seq before those: no gap and no
    /// overlap between replay and receiver.
    pub fn subscribe(&self, after_seq: Option<u64>) -> Result<Subscription, ReplayError> {
        let mut inner = self.lock();
        let receiver = inner.live.get_or_insert_with(|| broadcast::channel(LIVE_CAPACITY).0).subscribe();
        let replay = match after_seq {
            None => Vec::new(),
            Some(after) => self.after(&inner, after)?,
        };
        // Events of an open batch are not written yet: they come live.
        Ok(Subscription { replay, receiver, last_seq: committed(&inner) })
    }

    /// The events after `after_seq`, for a subscriber that fell behind.
    pub fn since(&self, after_seq: u64) -> Result<Vec<Arc<Event>>, ReplayError> {
        let inner = self.lock();
        self.after(&inner, after_seq)
    }

    fn after(&self, inner: &LogInner, after: u64) -> Result<Vec<Arc<Event>>, ReplayError> {
        let last = inner.next_seq - 1;
        if after > last {
            return Err(ReplayError::Ahead { after_seq: after, last });
        }
        let oldest = inner.events.front().map(|(e, _)| e.seq).unwrap_or(inner.next_seq);
        if after + 1 < oldest {
            return Err(ReplayError::Gone { after_seq: after, oldest });
        }
        let skip = (after + 1 - oldest) as usize;
        let committed = committed(inner);
        Ok(inner.events.iter().skip(skip).map(|(e, _)| e.clone()).take_while(|e| e.seq <= committed).collect())
    }

    /// Follows the log: the events after `after_seq` (only new ones when
    /// `None`), then each new one as it comes, catching up from the log
    /// when the live channel ran ahead; ends after `session/closed`.
    pub fn follow(self: &Arc<Self>, after_seq: Option<u64>) -> Result<Follow, ReplayError> {
        let sub = self.subscribe(after_seq)?;
        Ok(Follow {
            log: self.clone(),
            last: after_seq.unwrap_or(sub.last_seq),
            backlog: sub.replay.into(),
            receiver: sub.receiver,
            ended: false,
        })
    }

    /// Counts a stream whose client runs sub-agents while the returned
    /// guard lives.
    pub fn agent_runner(self: &Arc<Self>) -> AgentRunner {
        self.agent_runners.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        AgentRunner(self.clone())
    }

    /// Whether a client that runs sub-agents follows the session now.
    /// Counts a stream whose client answers MCP elicitations while the
    /// returned guard lives.
    pub fn elicitor(self: &Arc<Self>) -> Elicitor {
        self.elicitors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Elicitor(self.clone(), false)
    }

    /// Counts a stream whose client answers MCP sampling requests while
    /// the returned guard lives.
    pub fn sampler(self: &Arc<Self>) -> Elicitor {
        self.samplers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Elicitor(self.clone(), true)
    }

    /// Whether a client that answers MCP sampling requests follows the log.
    pub fn has_sampler(&self) -> bool {
        self.samplers.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// Whether a client that answers MCP elicitations follows the log.
    pub fn has_elicitor(&self) -> bool {
        self.elicitors.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    pub fn has_agent_runner(&self) -> bool {
        self.agent_runners.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// How many live subscribers (attached streams) there are.
    pub fn subscriber_count(&self) -> usize {
        let all = self.lock().live.as_ref().map_or(0, broadcast::Sender::receiver_count);
        all.saturating_sub(self.internal.load(std::sync::atomic::Ordering::Acquire))
    }

    /// A receiver of every later event for the daemon's own use (a
    /// `notify_when_idle` watch): not a client, so not counted by
    /// [`EventLog::subscriber_count`] (a question must not wait for an
    /// answer nobody will give).
    pub fn watch(&self) -> Result<InternalSubscription, ReplayError> {
        let receiver = self.subscribe(None)?.receiver;
        self.internal.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(InternalSubscription { receiver, count: self.internal.clone() })
    }

    /// Events and estimated bytes kept now.
    pub fn kept(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.events.len(), inner.bytes)
    }

    /// Whether `session/closed` was pushed: nothing follows it.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The last seq pushed (0 when none).
    pub fn last_seq(&self) -> u64 {
        self.lock().next_seq - 1
    }
}

/// The last seq written (and so sendable): what an open batch holds is not.
fn committed(inner: &LogInner) -> u64 {
    inner.next_seq - 1 - inner.unsent.len() as u64
}

/// An open batch of a log; it ends when dropped.
pub struct Batch<'a>(&'a EventLog);

/// A subscriber's view of the log ([`EventLog::follow`]): replay, then
/// live events, in `seq` order with no gap and no repeat.
pub struct Follow {
    log: Arc<EventLog>,
    last: u64,
    backlog: VecDeque<Arc<Event>>,
    receiver: broadcast::Receiver<Arc<Event>>,
    ended: bool,
}

impl Follow {
    /// The next event, or `None` once the session closed (after its
    /// `session/closed`) or the subscriber fell further behind than the log
    /// keeps.
    pub async fn next(&mut self) -> Option<Arc<Event>> {
        loop {
            if self.ended {
                return None;
            }
            while let Some(event) = self.backlog.pop_front() {
                if event.seq <= self.last {
                    continue;
                }
                self.last = event.seq;
                self.ended = matches!(event.kind, EventKind::SessionClosed {});
                return Some(event);
            }
            if self.log.is_closed() && self.last >= self.log.last_seq() {
                return None;
            }
            match self.receiver.recv().await {
                Ok(event) => self.backlog.push_back(event),
                // Fell behind the live channel: catch up from the log.
                Err(broadcast::error::RecvError::Lagged(_)) => match self.log.since(self.last) {
                    Ok(events) => self.backlog = events.into(),
                    Err(e) => {
                        tracing::warn!("stream subscriber fell too far behind: {e}");
                        return None;
                    }
                },
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// A stream that runs sub-agents, counted while it lives.
pub struct AgentRunner(Arc<EventLog>);

/// A subscriber that answers MCP elicitations (or, `true`, sampling
/// requests), counted while it lives.
pub struct Elicitor(Arc<EventLog>, bool);

impl Drop for Elicitor {
    fn drop(&mut self) {
        let count = if self.1 { &self.0.samplers } else { &self.0.elicitors };
        count.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for AgentRunner {
    fn drop(&mut self) {
        self.0.agent_runners.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.0.end_batch();
    }
}

/// An event's size for the log's byte bound: its text and values, plus a
/// fixed overhead. Cheap (no serialisation), within a small factor.
fn approx_size(kind: &EventKind) -> usize {
    use agentd_protocol::tools::ContentBlock;
    let content = |blocks: &[ContentBlock]| -> usize {
        blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => text.len(),
                ContentBlock::Image { source } => source.data.len() + source.media_type.len(),
            })
            .sum()
    };
    EVENT_OVERHEAD
        + match kind {
            EventKind::ToolResult { content: blocks, render, structured_content, content_meta, .. } => {
                content(blocks)
                    + render.len()
                    + structured_content.as_ref().map_or(0, value_size)
                    + content_meta.iter().map(|m| value_size(&m.block)).sum::<usize>()
            }
            EventKind::ToolProgress { data, render, .. } => value_size(data) + render.len(),
            EventKind::PermissionRequest { input, reason, render, suggestions, .. } => {
                value_size(input) + reason.len() + render.len() + suggestions.iter().map(String::len).sum::<usize>()
            }
            EventKind::ToolQueued { render, .. } | EventKind::ToolStarted { render, .. } => render.len(),
            EventKind::TasksChanged { tasks, .. } => serde_json::to_string(tasks).map_or(0, |t| t.len()),
            EventKind::WorktreeChanged { worktree, .. } => serde_json::to_string(worktree).map_or(0, |t| t.len()),
            EventKind::UserMessage { message, .. } => message.len(),
            EventKind::AgentRequest { prompt, instructions, description, tools, .. } => {
                prompt.len()
                    + description.len()
                    + instructions.as_ref().map_or(0, String::len)
                    + tools.iter().map(String::len).sum::<usize>()
            }
            EventKind::McpSampling { request, server, .. } => value_size(request) + server.len(),
            EventKind::McpElicitation { message, requested_schema, server, url, elicitation_id, .. } => {
                message.len()
                    + value_size(requested_schema)
                    + server.len()
                    + url.as_ref().map_or(0, String::len)
                    + elicitation_id.as_ref().map_or(0, String::len)
            }
            EventKind::McpLog { data, server, .. } => value_size(data) + server.len(),
            EventKind::ToolsChanged { server, added, removed, changed } => {
                server.len() + added.iter().chain(removed).chain(changed).map(String::len).sum::<usize>()
            }
            EventKind::MessageReceived { from, from_name, summary, message } => {
                from.len()
                    + from_name.as_ref().map_or(0, String::len)
                    + summary.as_ref().map_or(0, String::len)
                    + message.len()
            }
            EventKind::CronFired { cron_id, prompt, scheduled_at, fired_at, .. } => {
                cron_id.len() + prompt.len() + scheduled_at.len() + fired_at.len()
            }
            EventKind::TrustRequired { files } => files.iter().map(|f| f.path.as_os_str().len() + 96).sum(),
            _ => 0,
        }
}

fn value_size(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(value_size).sum::<usize>() + 2,
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + 3 + value_size(v)).sum::<usize>() + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(turn: &str) -> EventKind {
        EventKind::turn_completed(turn)
    }

    #[test]
    fn replay_is_exact_bounded_and_says_when_it_cannot() {
        let log = EventLog::new(3);
        for t in ["a", "b", "c", "d"] {
            log.push(done(t));
        }
        let sub = log.subscribe(Some(2)).unwrap();
        assert_eq!(sub.replay.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(sub.last_seq, 4);
        assert_eq!(log.subscribe(Some(1)).unwrap().replay.len(), 3, "the oldest kept is 2");
        assert_eq!(
            log.subscribe(Some(0)).err().map(|e| e.to_string()),
            Some(ReplayError::Gone { after_seq: 0, oldest: 2 }.to_string())
        );
        assert_eq!(
            log.subscribe(Some(9)).err().map(|e| e.to_string()),
            Some(ReplayError::Ahead { after_seq: 9, last: 4 }.to_string())
        );
        assert!(log.subscribe(Some(4)).unwrap().replay.is_empty());
    }

    #[tokio::test]
    async fn live_events_follow_the_replay_without_a_gap() {
        let log = EventLog::new(10);
        log.push(done("a"));
        let mut sub = log.subscribe(Some(0)).unwrap();
        log.push(done("b"));
        assert_eq!(sub.replay[0].seq, 1);
        assert_eq!(sub.receiver.recv().await.unwrap().seq, 2);
    }

    #[test]
    fn the_log_is_bounded_in_bytes_too() {
        let log = EventLog::with_bytes(10_000, 64 * 1024);
        let big = |i: usize| EventKind::ToolResult {
            turn_id: "t".into(),
            tool_use_id: format!("c{i}"),
            name: "T".into(),
            content: vec![agentd_protocol::tools::ContentBlock::text("x".repeat(10_000))],
            is_error: false,
            render: String::new(),
            sandbox: None,
            network: None,
            structured_content: None,
            content_meta: Vec::new(),
            changes: Vec::new(),
            changes_omitted: None,
        };
        for i in 0..100 {
            log.push(big(i));
        }
        let (events, bytes) = log.kept();
        assert!(events < 10 && bytes <= 64 * 1024, "{events} events, {bytes} bytes");
        assert_eq!(log.last_seq(), 100);
        // The newest is kept whatever its size; replay says what is gone.
        let huge = EventLog::with_bytes(10, 1000);
        huge.push(big(0));
        huge.push(big(1));
        assert_eq!(huge.kept().0, 1);
        assert!(matches!(huge.since(0), Err(ReplayError::Gone { oldest: 2, .. })));
    }

    #[test]
    fn an_idle_log_has_no_live_channel() {
        let log = EventLog::new(10);
        log.push(done("a"));
        assert!(log.lock().live.is_none());
        let _sub = log.subscribe(None).unwrap();
        assert!(log.lock().live.is_some());
        assert_eq!(log.subscriber_count(), 1);
    }

    #[derive(Default)]
    struct Counting {
        writes: Mutex<Vec<usize>>,
    }

    impl crate::store::Journal for Counting {
        fn append_lines(&self, lines: &[u8]) {
            let n = lines.iter().filter(|b| **b == b'\n').count();
            self.writes.lock().unwrap().push(n);
        }
    }

    #[tokio::test]
    async fn a_batch_is_written_once_and_sent_only_after_it_is_written() {
        let journal = Arc::new(Counting::default());
        let log = EventLog::durable(100, Some(journal.clone()), Vec::new());
        let mut sub = log.subscribe(None).unwrap();
        {
            let _batch = log.batch();
            for t in ["a", "b", "c"] {
                log.push(done(t));
            }
            assert!(journal.writes.lock().unwrap().is_empty(), "nothing written inside the batch");
            assert!(sub.receiver.try_recv().is_err(), "nothing sent before it is written");
        }
        assert_eq!(*journal.writes.lock().unwrap(), [3], "one write of three lines");
        for seq in 1..=3 {
            assert_eq!(sub.receiver.recv().await.unwrap().seq, seq);
        }
        log.push(done("d"));
        assert_eq!(*journal.writes.lock().unwrap(), [3, 1], "outside a batch: at once");
        assert_eq!(sub.receiver.recv().await.unwrap().seq, 4);
        // A subscriber that comes during a batch replays only what is
        // written; the rest reaches it live once written.
        let batch = log.batch();
        log.push(done("e"));
        let mut late = log.subscribe(Some(0)).unwrap();
        assert_eq!(late.replay.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(late.last_seq, 4);
        drop(batch);
        assert_eq!(late.receiver.recv().await.unwrap().seq, 5);
    }
}
