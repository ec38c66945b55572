//! A session's event log: every event gets the next `seq`, the last
//! `capacity` events are kept for replay (`turn/stream {after_seq}`), and
//! live subscribers get each event as it is pushed.
//!
//! **Invariant:** events are pushed under the executor's lock when they
//! report a state change, so their order is the order things happened.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agentd_protocol::turn::{Event, EventKind};
use tokio::sync::broadcast;

/// Events kept for replay per session.
pub const DEFAULT_LOG_CAPACITY: usize = 10_000;

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
    events: VecDeque<Arc<Event>>,
    /// The seq the next event gets (seqs start at 1).
    next_seq: u64,
}

/// A session's events.
pub struct EventLog {
    closed: std::sync::atomic::AtomicBool,
    inner: Mutex<LogInner>,
    capacity: usize,
    live: broadcast::Sender<Arc<Event>>,
}

impl EventLog {
    /// A log keeping the last `capacity` events.
    pub fn new(capacity: usize) -> Self {
        let (live, _) = broadcast::channel(4096);
        EventLog {
            closed: Default::default(),
            inner: Mutex::new(LogInner { events: VecDeque::new(), next_seq: 1 }),
            capacity: capacity.max(1),
            live,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends an event; returns its seq.
    pub fn push(&self, kind: EventKind) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        if matches!(kind, EventKind::SessionClosed {}) {
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let event = Arc::new(Event { seq, kind });
        inner.events.push_back(event.clone());
        if inner.events.len() > self.capacity {
            inner.events.pop_front();
        }
        // No receiver is fine: nobody is streaming.
        let _ = self.live.send(event);
        seq
    }

    /// The events after `after_seq` (none when `None`), a receiver of
    /// every later event, and the last seq before those: no gap and no
    /// overlap between replay and receiver.
    pub fn subscribe(&self, after_seq: Option<u64>) -> Result<Subscription, ReplayError> {
        let inner = self.lock();
        let receiver = self.live.subscribe();
        let replay = match after_seq {
            None => Vec::new(),
            Some(after) => self.after(&inner, after)?,
        };
        Ok(Subscription { replay, receiver, last_seq: inner.next_seq - 1 })
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
        let oldest = inner.events.front().map(|e| e.seq).unwrap_or(inner.next_seq);
        if after + 1 < oldest {
            return Err(ReplayError::Gone { after_seq: after, oldest });
        }
        let skip = (after + 1 - oldest) as usize;
        Ok(inner.events.iter().skip(skip).cloned().collect())
    }

    /// How many live subscribers (attached streams) there are.
    pub fn subscriber_count(&self) -> usize {
        self.live.receiver_count()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn done(turn: &str) -> EventKind {
        EventKind::TurnCompleted { turn_id: turn.into() }
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
}
