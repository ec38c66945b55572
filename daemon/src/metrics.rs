//! The signals a fleet scales on, in OpenMetrics text: `agentd --metrics
//! ADDR` serves `GET /metrics` on a loopback address (a TLS proxy in
//! front exposes it further). Gauges are read at each scrape from the
//! sessions (`daemon/activity`'s figures) and the process; calls are
//! counted as they end, by tool and outcome, with their durations (from
//! acceptance to result) in a histogram per tool.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::sync::MutexExt;

/// Upper bounds of the duration histogram's buckets, in seconds.
const BOUNDS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 600.0];
/// Upper bounds of the sandbox set-up histogram's buckets, in seconds.
const SETUP_BOUNDS: [f64; 9] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];
/// Tools counted by name; the calls of any more (MCP servers' tools are
/// many) count as `other`.
const MAX_TOOLS: usize = 256;
/// Scrapes served at once.
const MAX_SCRAPES: usize = 16;
/// How long a scrape may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// One tool's calls.
#[derive(Default)]
struct Calls {
    ok: u64,
    error: u64,
    /// Per bucket of [`BOUNDS`] (not cumulative), then the rest.
    buckets: [u64; BOUNDS.len() + 1],
    seconds: f64,
}

/// Durations of one kind, by bucket of [`SETUP_BOUNDS`].
#[derive(Default)]
struct Setups {
    /// Per bucket (not cumulative), then the rest.
    buckets: [u64; SETUP_BOUNDS.len() + 1],
    seconds: f64,
    count: u64,
}

/// Why a call failed, as the daemon counts it (`agentd_call_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    /// What the model sent: invalid input, an unknown or unloaded tool.
    Input,
    /// Refused before it ran: a rule, the user, a hook, a protected path.
    Refused,
    /// The tool ran and failed (a command's non-zero exit is not one: its
    /// result is the tool's to judge).
    Tool,
    /// Cancelled: by the client, a sibling's failure, the session or the
    /// daemon ending.
    Cancelled,
    /// The daemon's own fault (a task that ended without a result).
    Internal,
}

impl Failure {
    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Input => "input",
            Failure::Refused => "refused",
            Failure::Tool => "tool",
            Failure::Cancelled => "cancelled",
            Failure::Internal => "internal",
        }
    }

    /// Every kind, for a complete exposition.
    pub const ALL: [Failure; 5] =
        [Failure::Input, Failure::Refused, Failure::Tool, Failure::Cancelled, Failure::Internal];
}

/// The daemon's call counters.
#[derive(Default)]
pub struct Metrics {
    tools: Mutex<BTreeMap<String, Calls>>,
    /// Failed calls by why (every tool together).
    failures: Mutex<BTreeMap<Failure, u64>>,
    /// Bash commands' set-up, by sandbox profile.
    setups: Mutex<BTreeMap<&'static str, Setups>>,
}

impl Metrics {
    /// A call of `tool` ended after `took`, failed for `failure` if it did.
    pub fn record(&self, tool: &str, took: Duration, failure: Option<Failure>) {
        if let Some(why) = failure {
            *self.failures.locked().entry(why).or_default() += 1;
        }
        let failed = failure.is_some();
        let mut tools = self.tools.locked();
        // A name seen before costs no allocation.
        if !tools.contains_key(tool) {
            let name = if tools.len() < MAX_TOOLS { tool } else { "other" };
            tools.entry(name.to_owned()).or_default();
        }
        let name = if tools.contains_key(tool) { tool } else { "other" };
        let Some(calls) = tools.get_mut(name) else { return };
        let seconds = took.as_secs_f64();
        if failed {
            calls.error += 1;
        } else {
            calls.ok += 1;
        }
        let bucket = BOUNDS.iter().position(|b| seconds <= *b).unwrap_or(BOUNDS.len());
        calls.buckets[bucket] += 1;
        calls.seconds += seconds;
    }

    /// A Bash command in the sandbox `profile` (`read_only`,
    /// `workspace_write`, `off`) started `took` after its call did (its
    /// checks, layer, walls and process).
    pub fn sandbox_setup(&self, profile: &'static str, took: Duration) {
        let mut setups = self.setups.locked();
        let s = setups.entry(profile).or_default();
        let seconds = took.as_secs_f64();
        s.buckets[SETUP_BOUNDS.iter().position(|b| seconds <= *b).unwrap_or(SETUP_BOUNDS.len())] += 1;
        s.seconds += seconds;
        s.count += 1;
    }

    /// The exposition: `activity` (the open sessions), the daemon's
    /// resident memory and open descriptors, and the calls so far.
    pub fn render(&self, activity: &[agentd_protocol::methods::SessionActivity], rss_kib: u64, fds: u64) -> String {
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, value: u64| {
            out.push_str(&format!("# TYPE {name} gauge\n# HELP {name} {help}\n{name} {value}\n"));
        };
        let sum = |f: &dyn Fn(&agentd_protocol::methods::SessionActivity) -> usize| {
            activity.iter().map(f).sum::<usize>() as u64
        };
        gauge("agentd_sessions", "Open sessions.", activity.len() as u64);
        gauge("agentd_sessions_running", "Sessions with a turn open.", sum(&|s| usize::from(s.state == "running")));
        gauge("agentd_calls_running", "Calls running now.", sum(&|s| s.calls.iter().filter(|c| c.running).count()));
        gauge(
            "agentd_calls_queued",
            "Calls waiting to start.",
            sum(&|s| s.calls.iter().filter(|c| !c.running).count()),
        );
        gauge("agentd_jobs_running", "Background jobs running.", sum(&|s| s.jobs.len()));
        gauge("agentd_questions_waiting", "Permission requests waiting for an answer.", sum(&|s| s.questions.len()));
        gauge("agentd_resident_memory_bytes", "The daemon's resident memory.", rss_kib * 1024);
        gauge("agentd_open_fds", "The daemon's open file descriptors.", fds);
        let tools = self.tools.locked();
        out.push_str("# TYPE agentd_calls counter\n# HELP agentd_calls Calls ended, by tool and outcome.\n");
        for (tool, calls) in tools.iter() {
            let tool = label(tool);
            out.push_str(&format!("agentd_calls_total{{tool=\"{tool}\",outcome=\"ok\"}} {}\n", calls.ok));
            out.push_str(&format!("agentd_calls_total{{tool=\"{tool}\",outcome=\"error\"}} {}\n", calls.error));
        }
        out.push_str(
            "# TYPE agentd_call_errors counter\n# HELP agentd_call_errors Failed calls by kind: input (what the \
             model sent), refused (a rule, the user, a hook), tool (the tool failed), cancelled, internal.\n",
        );
        let failures = self.failures.locked();
        for why in Failure::ALL {
            let n = failures.get(&why).copied().unwrap_or(0);
            out.push_str(&format!("agentd_call_errors_total{{kind=\"{}\"}} {n}\n", why.name()));
        }
        drop(failures);
        out.push_str(
            "# TYPE agentd_call_duration_seconds histogram\n# HELP agentd_call_duration_seconds From a call's \
             acceptance to its result.\n",
        );
        for (tool, calls) in tools.iter() {
            let tool = label(tool);
            let mut seen = 0;
            for (i, bound) in BOUNDS.iter().enumerate() {
                seen += calls.buckets[i];
                out.push_str(&format!(
                    "agentd_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {seen}\n"
                ));
            }
            let count = calls.ok + calls.error;
            out.push_str(&format!("agentd_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {count}\n"));
            out.push_str(&format!("agentd_call_duration_seconds_sum{{tool=\"{tool}\"}} {}\n", calls.seconds));
            out.push_str(&format!("agentd_call_duration_seconds_count{{tool=\"{tool}\"}} {count}\n"));
        }
        drop(tools);
        out.push_str(
            "# TYPE agentd_sandbox_setup_seconds histogram\n# HELP agentd_sandbox_setup_seconds From a Bash \
             call's start to its command's, by sandbox profile.\n",
        );
        for (profile, s) in self.setups.locked().iter() {
            let mut seen = 0;
            for (i, bound) in SETUP_BOUNDS.iter().enumerate() {
                seen += s.buckets[i];
                out.push_str(&format!(
                    "agentd_sandbox_setup_seconds_bucket{{profile=\"{profile}\",le=\"{bound}\"}} {seen}\n"
                ));
            }
            out.push_str(&format!(
                "agentd_sandbox_setup_seconds_bucket{{profile=\"{profile}\",le=\"+Inf\"}} {}\n",
                s.count
            ));
            out.push_str(&format!("agentd_sandbox_setup_seconds_sum{{profile=\"{profile}\"}} {}\n", s.seconds));
            out.push_str(&format!("agentd_sandbox_setup_seconds_count{{profile=\"{profile}\"}} {}\n", s.count));
        }
        out.push_str("# EOF\n");
        out
    }
}

/// A label value as OpenMetrics quotes it.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The daemon's open file descriptors.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Binds `addr` for [`serve`]: a loopback address only (the figures name
/// no secret but say what the user does; a TLS proxy exposes them further).
pub fn bind(addr: std::net::SocketAddr) -> Result<std::net::TcpListener, String> {
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--metrics {addr}: metrics are served on a loopback address only (put a TLS proxy in front to reach them \
             from elsewhere)"
        ));
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|e| format!("--metrics {addr}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("--metrics {addr}: {e}"))?;
    Ok(listener)
}

/// Serves `GET /metrics` on `listener` until `stop`, each scrape the
/// exposition `page` makes then.
pub async fn serve(
    listener: std::net::TcpListener,
    page: std::sync::Arc<dyn Fn() -> String + Send + Sync>,
    stop: tokio_util::sync::CancellationToken,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_SCRAPES));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.cancelled() => return,
        };
        let Ok((mut stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // Past the limit a scrape is dropped, not queued.
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let page = page.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
                while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            });
            if !matches!(read.await, Ok(true)) {
                return;
            }
            let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
            let (status, kind, body) = if line.starts_with(b"GET /metrics ") {
                ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", page())
            } else {
                ("404 Not Found", "text/plain", "metrics are at /metrics\n".to_owned())
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_tool_and_bucketed_cumulatively() {
        let m = Metrics::default();
        m.record("Read", Duration::from_millis(2), None);
        m.record("Read", Duration::from_millis(200), Some(Failure::Refused));
        m.record("Bash", Duration::from_secs(900), None);
        let text = m.render(&[], 1, 7);
        assert!(text.contains("agentd_calls_total{tool=\"Read\",outcome=\"ok\"} 1\n"), "{text}");
        assert!(text.contains("agentd_calls_total{tool=\"Read\",outcome=\"error\"} 1\n"), "{text}");
        assert!(text.contains("agentd_call_duration_seconds_bucket{tool=\"Read\",le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("agentd_call_duration_seconds_bucket{tool=\"Read\",le=\"0.25\"} 2\n"), "{text}");
        assert!(text.contains("agentd_call_duration_seconds_bucket{tool=\"Bash\",le=\"600\"} 0\n"), "{text}");
        assert!(text.contains("agentd_call_duration_seconds_bucket{tool=\"Bash\",le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.contains("agentd_open_fds 7\n") && text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("agentd_call_errors_total{kind=\"refused\"} 1\n"), "{text}");
        assert!(text.contains("agentd_call_errors_total{kind=\"internal\"} 0\n"), "every kind, even at 0: {text}");
        for n in 0..300 {
            m.record(&format!("mcp__s__t{n}"), Duration::ZERO, None);
        }
        let text = m.render(&[], 1, 7);
        assert!(text.contains("tool=\"other\",outcome=\"ok\"} 46\n"), "at most {MAX_TOOLS} names: {text}");
    }
}
