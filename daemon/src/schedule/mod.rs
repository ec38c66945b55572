//! Schedules owned by the daemon: CronCreate's prompts, fired at their
//! cron times into their session's event log as `cron/fired` events (sent
//! to its subscribers at once, replayed to a client that attaches later).
//! Durable ones are kept in `<state>/schedules/jobs.json` and fire after a
//! restart; a firing missed while the daemon was down fires once when it
//! is back, and says so. A session's schedules end with it.

pub mod cron;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentd_protocol::turn::EventKind;
use chrono::{DateTime, Local, TimeZone};
use serde::{Deserialize, Serialize};

use crate::sync::MutexExt;

/// Most schedules of one session.
pub const MAX_PER_SESSION: usize = 50;
/// Most schedules of the daemon.
pub const MAX_PER_DAEMON: usize = 1000;
/// A recurring schedule ends this long after it was made (Claude Code's
/// 30 days).
pub const RECURRING_DAYS: i64 = 30;
/// Longest prompt, in bytes.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// A firing this late (the daemon was down, or busy) says it was missed.
const LATE_MS: u64 = 60_000;

/// One schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its id (what CronDelete takes).
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// The cron expression.
    pub cron: String,
    /// What is enqueued at each firing.
    pub prompt: String,
    /// Fires at every match until deleted or expired; else once.
    pub recurring: bool,
    /// Kept across restarts.
    pub durable: bool,
    /// When it was made (ms since the epoch).
    pub created_at_ms: u64,
    /// Its next firing (ms since the epoch).
    pub next_at_ms: u64,
}

impl Job {
    /// As the protocol shows it.
    pub fn protocol(&self) -> agentd_protocol::schedule::CronJob {
        agentd_protocol::schedule::CronJob {
            cron_id: self.id.clone(),
            cron: self.cron.clone(),
            prompt: self.prompt.clone(),
            recurring: self.recurring,
            durable: self.durable,
            next_at_ms: self.next_at_ms,
        }
    }

    /// When a recurring schedule ends.
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.recurring.then(|| self.created_at_ms + RECURRING_DAYS as u64 * 86_400_000)
    }
}

/// Where firings go: `true` when the session is there to take it.
pub type Deliver = Arc<dyn Fn(&str, EventKind) -> bool + Send + Sync>;

/// The daemon's schedules.
pub struct Scheduler {
    jobs: Mutex<BTreeMap<String, Job>>,
    /// `<state>/schedules/jobs.json`, for the durable ones.
    file: Option<PathBuf>,
    wake: tokio::sync::Notify,
}

fn now() -> DateTime<Local> {
    Local::now()
}

fn ms(t: DateTime<Local>) -> u64 {
    t.timestamp_millis().max(0) as u64
}

fn local(ms: u64) -> DateTime<Local> {
    Local.timestamp_millis_opt(ms as i64).single().unwrap_or_else(now)
}

impl Scheduler {
    /// The schedules kept in `state_dir` (none when `persist` is off).
    pub fn open(state_dir: &std::path::Path, persist: bool) -> Scheduler {
        let file = persist.then(|| state_dir.join("schedules/jobs.json"));
        let entries: Vec<serde_json::Value> = match file.as_deref().map(std::fs::read) {
            Some(Ok(bytes)) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                // Kept aside, not overwritten by the next change.
                let aside = file.as_ref().map(|f| f.with_extension("json.unreadable"));
                if let (Some(f), Some(aside)) = (&file, &aside) {
                    let _ = std::fs::rename(f, aside);
                }
                tracing::warn!("schedules/jobs.json is not what agentd writes ({e}): moved aside, none kept");
                Vec::new()
            }),
            _ => Vec::new(),
        };
        let jobs: Vec<Job> = entries
            .into_iter()
            .filter_map(|e| {
                serde_json::from_value(e)
                    .map_err(|e| {
                        tracing::warn!("a schedule in schedules/jobs.json is not one agentd wrote ({e}): dropped")
                    })
                    .ok()
            })
            .collect();
        let jobs = jobs.into_iter().filter(|j| j.durable).map(|j| (j.id.clone(), j)).collect();
        Scheduler { jobs: Mutex::new(jobs), file, wake: tokio::sync::Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Job>> {
        self.jobs.locked()
    }

    /// Writes the durable schedules whole.
    fn save(&self, jobs: &BTreeMap<String, Job>) -> std::io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        if let Some(dir) = file.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        let durable: Vec<&Job> = jobs.values().filter(|j| j.durable).collect();
        let body = serde_json::to_vec(&durable)?;
        crate::store::disk::write_atomically(&file.with_extension("json.tmp"), file, &body)
    }

    /// CronCreate: a schedule of `session_id`. The expression must fire
    /// within eight years; bounds per session and per daemon. A durable
    /// schedule that cannot be saved is made session-only, and `Ok` says so
    /// with `durable: false`.
    pub fn create(
        &self,
        session_id: &str,
        expression: &str,
        prompt: &str,
        recurring: bool,
        durable: bool,
    ) -> Result<Job, String> {
        let parsed = cron::Cron::parse(expression)?;
        if prompt.trim().is_empty() {
            return Err("the prompt is empty".into());
        }
        if prompt.len() > MAX_PROMPT_BYTES {
            return Err(format!("the prompt is longer than {MAX_PROMPT_BYTES} bytes"));
        }
        let next = parsed.next_after(now()).ok_or("the expression never fires (no match within eight years)")?;
        let mut jobs = self.lock();
        if jobs.len() >= MAX_PER_DAEMON {
            return Err(format!("the daemon has {MAX_PER_DAEMON} schedules, its most"));
        }
        if jobs.values().filter(|j| j.session_id == session_id).count() >= MAX_PER_SESSION {
            return Err(format!("this session has {MAX_PER_SESSION} schedules, its most: delete one first"));
        }
        let mut job = Job {
            id: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
            session_id: session_id.to_owned(),
            cron: expression.split_whitespace().collect::<Vec<_>>().join(" "),
            prompt: prompt.to_owned(),
            recurring,
            durable,
            created_at_ms: ms(now()),
            next_at_ms: ms(next),
        };
        jobs.insert(job.id.clone(), job.clone());
        if durable && let Err(e) = self.save(&jobs) {
            tracing::warn!("a durable schedule could not be saved ({e}): it is session-only");
            job.durable = false;
            jobs.insert(job.id.clone(), job.clone());
        }
        drop(jobs);
        self.wake.notify_one();
        Ok(job)
    }

    /// CronList: the session's schedules, soonest first.
    pub fn list(&self, session_id: &str) -> Vec<Job> {
        let mut out: Vec<Job> = self.lock().values().filter(|j| j.session_id == session_id).cloned().collect();
        out.sort_by_key(|j| j.next_at_ms);
        out
    }

    /// CronDelete: the session's schedule `id`, gone.
    pub fn delete(&self, session_id: &str, id: &str) -> Result<Job, String> {
        let mut jobs = self.lock();
        match jobs.get(id) {
            Some(j) if j.session_id == session_id => {}
            _ => return Err(format!("no schedule {id:?} in this session (CronList lists them)")),
        }
        let job = jobs.remove(id).ok_or("gone meanwhile")?;
        if job.durable
            && let Err(e) = self.save(&jobs)
        {
            tracing::warn!("the schedules could not be saved: {e}");
        }
        Ok(job)
    }

    /// Keeps only the schedules of sessions `open` says are there.
    pub fn keep_sessions(&self, open: impl Fn(&str) -> bool) {
        let mut jobs = self.lock();
        let before = jobs.len();
        jobs.retain(|_, j| open(&j.session_id));
        if jobs.len() != before {
            tracing::info!(dropped = before - jobs.len(), "schedules of sessions that are gone were dropped");
            if let Err(e) = self.save(&jobs) {
                tracing::warn!("the schedules could not be saved: {e}");
            }
        }
    }

    /// A closed session's schedules go with it.
    pub fn session_closed(&self, session_id: &str) {
        let mut jobs = self.lock();
        let before = jobs.len();
        jobs.retain(|_, j| j.session_id != session_id);
        if jobs.len() != before
            && let Err(e) = self.save(&jobs)
        {
            tracing::warn!("the schedules could not be saved: {e}");
        }
    }

    /// Fires what is due, then sleeps until the next firing (or a change),
    /// until `stop`.
    pub async fn run(self: Arc<Self>, deliver: Deliver, stop: tokio_util::sync::CancellationToken) {
        loop {
            let next = self.fire_due(&deliver);
            let sleep = match next {
                Some(at) => std::time::Duration::from_millis(at.saturating_sub(ms(now())).min(3_600_000)),
                None => std::time::Duration::from_secs(3600),
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.wake.notified() => {}
                _ = stop.cancelled() => return,
            }
        }
    }

    /// Fires every schedule whose time has come; the next time any fires.
    fn fire_due(&self, deliver: &Deliver) -> Option<u64> {
        let now = now();
        let mut due = Vec::new();
        {
            let mut jobs = self.lock();
            let mut changed = false;
            for job in jobs.values_mut().filter(|j| j.next_at_ms <= ms(now)) {
                due.push(job.clone());
                let expired = job.expires_at_ms().is_some_and(|end| ms(now) >= end);
                // The next match from now: a schedule missed many times
                // while the daemon was down fires once.
                let next = cron::Cron::parse(&job.cron).ok().and_then(|c| c.next_after(now));
                match next {
                    Some(at) if job.recurring && !expired => job.next_at_ms = ms(at),
                    _ => job.next_at_ms = u64::MAX,
                }
                changed |= job.durable;
            }
            jobs.retain(|_, j| j.next_at_ms != u64::MAX);
            if changed && let Err(e) = self.save(&jobs) {
                tracing::warn!("the schedules could not be saved: {e}");
            }
        }
        for job in due {
            let event = EventKind::CronFired {
                cron_id: job.id.clone(),
                prompt: job.prompt.clone(),
                scheduled_at: local(job.next_at_ms).to_rfc3339(),
                fired_at: now.to_rfc3339(),
                missed: ms(now).saturating_sub(job.next_at_ms) > LATE_MS,
            };
            if !deliver(&job.session_id, event) {
                tracing::info!(cron_id = %job.id, session_id = %job.session_id, "its session is gone: schedule dropped");
                self.session_closed(&job.session_id);
            }
        }
        self.lock().values().map(|j| j.next_at_ms).min()
    }
}
