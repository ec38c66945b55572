//! Running a future on the calling thread until it first has to wait.
//!
//! A tool call that needs no I/O wait (TodoWrite, a small Read) finishes
//! in its first poll. Spawning it would cost a task, a wake-up of another
//! worker and a hop back with the result, several times what the call
//! itself costs; so futures are polled once here, and only spawned when
//! they are still pending. The poll uses a no-op waker: a pending future
//! registers the real waker when the spawned task polls it again, as every
//! well-behaved future does on each poll.
//!
//! Inline runs nest (a call that finishes may start the next one); past a
//! small depth the rest are spawned, so a chain of quick calls cannot
//! grow the stack.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio_util::task::TaskTracker;

/// Nesting of inline polls on one thread beyond which futures are spawned.
const MAX_DEPTH: u32 = 4;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// A future that can cross tasks.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Polls `fut` once on this thread; returns its output if it is done,
/// or the future (pinned, polled once) if it must wait.
pub fn poll_once<T>(mut fut: BoxFuture<T>) -> Result<T, BoxFuture<T>> {
    let depth = DEPTH.with(Cell::get);
    if depth >= MAX_DEPTH {
        return Err(fut);
    }
    DEPTH.with(|d| d.set(depth + 1));
    let polled = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    DEPTH.with(|d| d.set(depth));
    match polled {
        Poll::Ready(out) => Ok(out),
        Poll::Pending => Err(fut),
    }
}

/// Runs `fut` here until it first waits, then as a task `tracker` tracks.
/// Must be called within a tokio runtime.
pub fn run_or_spawn(tracker: &TaskTracker, fut: impl Future<Output = ()> + Send + 'static) {
    if let Err(pending) = poll_once(Box::pin(tracker.track_future(fut))) {
        tokio::spawn(pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_ready_future_runs_here_and_a_waiting_one_finishes_as_a_task() {
        let tracker = TaskTracker::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        run_or_spawn(&tracker, async move {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1, "ran before run_or_spawn returned");
        assert!(tracker.is_empty());

        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let r = ran.clone();
        run_or_spawn(&tracker, async move {
            let _ = rx.await;
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(tracker.len(), 1, "spawned and tracked");
        tx.send(()).unwrap();
        tracker.close();
        tokio::time::timeout(std::time::Duration::from_secs(10), tracker.wait()).await.unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 2, "woken through the task's own waker");
    }

    #[tokio::test]
    async fn nesting_is_bounded() {
        fn nest(tracker: TaskTracker, depth: Arc<AtomicUsize>, left: usize) {
            if left == 0 {
                return;
            }
            let t = tracker.clone();
            run_or_spawn(&tracker, async move {
                depth.fetch_max(DEPTH.with(Cell::get) as usize, Ordering::SeqCst);
                nest(t, depth, left - 1);
            });
        }
        let tracker = TaskTracker::new();
        let depth = Arc::new(AtomicUsize::new(0));
        nest(tracker.clone(), depth.clone(), 100);
        tracker.close();
        tokio::time::timeout(std::time::Duration::from_secs(10), tracker.wait()).await.unwrap();
        assert!(depth.load(Ordering::SeqCst) <= MAX_DEPTH as usize);
    }
}
