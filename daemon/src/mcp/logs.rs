//! A server's log messages (`notifications/message`), handed to the
//! sessions that use it as `mcp/log` events, each at or above its own
//! `mcp_log_level`, at a bounded rate.
//!
//! rmcp marks MCP logging deprecated (a future revision of the protocol
//! drops it); today's servers and Claude Code's client still use it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentd_protocol::mcp::McpLogLevel;
use serde_json::Value;

use crate::sync::MutexExt;

/// Messages a second one server may pass on (the rest are counted).
const RATE: f64 = 20.0;
/// Messages passed on at once after a quiet spell.
const BURST: f64 = 50.0;
/// Longest text of one message's data passed on, in characters.
const MAX_DATA_CHARS: usize = 4000;

/// One message, as a session gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// The server's name.
    pub server: String,
    /// Its level.
    pub level: McpLogLevel,
    /// The logger, when named.
    pub logger: Option<String>,
    /// The data, bounded.
    pub data: Value,
    /// Dropped since the last one passed on.
    pub dropped: u64,
}

/// Where a session's messages go.
pub type LogSink = Arc<dyn Fn(LogEntry) + Send + Sync>;

#[derive(Default)]
struct Inner {
    sinks: HashMap<u64, (McpLogLevel, LogSink)>,
    next: u64,
    tokens: f64,
    refilled: Option<Instant>,
    dropped: u64,
}

/// A server's listeners and its rate.
#[derive(Default)]
pub struct LogRouter {
    inner: Mutex<Inner>,
}

impl LogRouter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Adds a listener for messages at `level` or above; it listens while
    /// the guard lives.
    pub fn watch(self: &Arc<Self>, level: McpLogLevel, sink: LogSink) -> LogGuard {
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        inner.sinks.insert(id, (level, sink));
        LogGuard { router: self.clone(), id }
    }

    /// The least severe level any listener wants (what to ask the server
    /// for with `logging/setLevel`); `None` without listeners.
    pub fn wanted(&self) -> Option<McpLogLevel> {
        self.lock().sinks.values().map(|(level, _)| *level).min()
    }

    /// Passes one message of `server` on, within the rate.
    pub fn route(&self, server: &str, level: McpLogLevel, logger: Option<String>, data: Value) {
        let (sinks, dropped) = {
            let mut inner = self.lock();
            let now = Instant::now();
            let elapsed = inner.refilled.map_or(BURST / RATE, |t| now.duration_since(t).as_secs_f64());
            inner.tokens = (inner.tokens + elapsed * RATE).min(BURST);
            inner.refilled = Some(now);
            let wanted: Vec<LogSink> =
                inner.sinks.values().filter(|(min, _)| level >= *min).map(|(_, s)| s.clone()).collect();
            if wanted.is_empty() {
                return;
            }
            if inner.tokens < 1.0 {
                inner.dropped += 1;
                return;
            }
            inner.tokens -= 1.0;
            (wanted, std::mem::take(&mut inner.dropped))
        };
        let entry = LogEntry { server: server.to_owned(), level, logger, data: bounded(data), dropped };
        for sink in sinks {
            sink(entry.clone());
        }
    }
}

/// Data small enough to pass on as it is; else its text, cut.
fn bounded(data: Value) -> Value {
    let text = match &data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() <= MAX_DATA_CHARS {
        return data;
    }
    let cut: String = text.chars().take(MAX_DATA_CHARS).collect();
    Value::String(format!("{cut}… (cut)"))
}

/// Stops a listener when dropped.
pub struct LogGuard {
    router: Arc<LogRouter>,
    id: u64,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.router.lock().sinks.remove(&self.id);
    }
}

/// rmcp's level as agentd's.
pub fn level_of(level: rmcp::model::LoggingLevel) -> McpLogLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => McpLogLevel::Debug,
        L::Info => McpLogLevel::Info,
        L::Notice => McpLogLevel::Notice,
        L::Warning => McpLogLevel::Warning,
        L::Error => McpLogLevel::Error,
        L::Critical => McpLogLevel::Critical,
        L::Alert => McpLogLevel::Alert,
        L::Emergency => McpLogLevel::Emergency,
    }
}

/// agentd's level as rmcp's.
pub fn rmcp_level(level: McpLogLevel) -> rmcp::model::LoggingLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        McpLogLevel::Debug => L::Debug,
        McpLogLevel::Info => L::Info,
        McpLogLevel::Notice => L::Notice,
        McpLogLevel::Warning => L::Warning,
        McpLogLevel::Error => L::Error,
        McpLogLevel::Critical => L::Critical,
        McpLogLevel::Alert => L::Alert,
        McpLogLevel::Emergency => L::Emergency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collector() -> (LogSink, Arc<Mutex<Vec<LogEntry>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        (Arc::new(move |e| into.lock().unwrap().push(e)), seen)
    }

    #[test]
    fn each_listener_gets_its_levels_and_a_flood_is_cut_to_the_rate() {
        let router = Arc::new(LogRouter::default());
        let (warn_sink, warned) = collector();
        let (debug_sink, debugged) = collector();
        let w = router.watch(McpLogLevel::Warning, warn_sink);
        assert_eq!(router.wanted(), Some(McpLogLevel::Warning));
        let d = router.watch(McpLogLevel::Debug, debug_sink);
        assert_eq!(router.wanted(), Some(McpLogLevel::Debug));
        router.route("s", McpLogLevel::Info, None, Value::from("info"));
        router.route("s", McpLogLevel::Error, Some("db".into()), Value::from("error"));
        assert_eq!(warned.lock().unwrap().len(), 1);
        assert_eq!(warned.lock().unwrap()[0].logger.as_deref(), Some("db"));
        assert_eq!(debugged.lock().unwrap().len(), 2);
        // A flood: the burst passes, the rest is counted on the next one.
        for i in 0..1000 {
            router.route("s", McpLogLevel::Error, None, Value::from(i));
        }
        let n = debugged.lock().unwrap().len();
        assert!(n < 2 + BURST as usize + 5, "{n} passed");
        std::thread::sleep(std::time::Duration::from_millis(120));
        router.route("s", McpLogLevel::Error, None, Value::from("after"));
        let last = debugged.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last.data, Value::from("after"));
        assert!(last.dropped > 900, "{last:?}");
        drop(d);
        assert_eq!(router.wanted(), Some(McpLogLevel::Warning));
        drop(w);
        assert_eq!(router.wanted(), None);
        // Nobody listening: nothing is counted against anyone.
        router.route("s", McpLogLevel::Emergency, None, Value::Null);
    }

    #[test]
    fn large_data_is_cut_to_text() {
        let big = Value::from("x".repeat(100_000));
        let Value::String(s) = bounded(big) else { panic!() };
        assert!(s.len() < MAX_DATA_CHARS + 20 && s.ends_with("(cut)"));
        let small = serde_json::json!({"a": 1});
        assert_eq!(bounded(small.clone()), small);
    }
}
