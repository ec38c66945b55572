//! Background jobs of the Bash tool (`run_in_background`): a session's
//! long-running commands, their unread output, and their end. Every job is
//! a child of the session's cancellation token, so closing the session
//! ends them all.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_protocol::session::JobInfo;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Capture, ProcessTree, spawn_bash};

use crate::sync::MutexExt;

/// Background jobs a session may have running at once.
const MAX_RUNNING_JOBS: usize = 32;

/// Unread output a job keeps; older unread output is dropped (and counted).
const MAX_UNREAD_BYTES: usize = 1024 * 1024;

/// What runs when a job's processes are gone; its lines are added to the
/// job's output.
pub type AtEnd = Box<dyn FnOnce() -> Vec<String> + Send>;

/// How a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    /// Still running.
    Running,
    /// Exited with this code.
    Exited(i32),
    /// Killed (`TaskStop`, or the session closed).
    Killed,
}

impl JobStatus {
    fn name(&self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Exited(_) => "exited",
            JobStatus::Killed => "killed",
        }
    }
}

struct JobState {
    unread: Vec<u8>,
    dropped: u64,
    status: JobStatus,
    capture: Capture,
}

/// What a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A Bash command (`run_in_background`).
    Shell,
    /// A sub-agent run in the background (Task).
    Agent,
    /// A watch (Monitor): a command or a WebSocket whose lines are events.
    Monitor,
}

impl JobKind {
    /// Claude Code's name for it (TaskStop's `task_type`).
    pub fn task_type(self) -> &'static str {
        match self {
            JobKind::Shell => "local_bash",
            JobKind::Agent => "local_agent",
            JobKind::Monitor => "monitor",
        }
    }
}

/// How a job ended, as its watcher is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    /// Its command exited with this code.
    Exited(i32),
    /// It reached its own time limit and was stopped.
    TimedOut,
    /// TaskStop, or the session closed.
    Stopped,
}

/// Who watches a job's standard output line by line (Monitor): each
/// complete line as it comes (without its newline; a last line without
/// one at the end), then the end. Called on the job's task: keep it quick.
pub trait Watcher: Send + Sync {
    /// One line of the job `job`'s standard output (lossy UTF-8).
    fn line(&self, job: &str, line: &str);
    /// The job is over.
    fn ended(&self, job: &str, how: JobEnd);
}

/// One background job.
pub struct Job {
    /// Its id.
    pub id: String,
    /// The command it runs.
    pub command: String,
    /// A name it also answers to (a named sub-agent's).
    pub name: Option<String>,
    /// A command or a sub-agent.
    pub kind: JobKind,
    /// The file that keeps its whole output, there from its start (so the
    /// session's Read can follow it, as Claude Code 2.1.332 has the model
    /// do instead of TaskOutput); none for a sub-agent.
    pub output_file: Option<PathBuf>,
    state: Mutex<JobState>,
    cancel: CancellationToken,
    finished: tokio::sync::Notify,
}

/// New output of a job since the last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutput {
    /// The output (lossy UTF-8).
    pub text: String,
    /// Bytes dropped because nobody read them in time.
    pub dropped: u64,
    /// The job's status now.
    pub status: JobStatus,
    /// Where the full output is.
    pub file: Option<PathBuf>,
}

impl Job {
    fn lock(&self) -> std::sync::MutexGuard<'_, JobState> {
        self.state.locked()
    }

    /// Takes the output written since the last call.
    pub fn read_new(&self) -> JobOutput {
        let mut s = self.lock();
        let text = String::from_utf8_lossy(&std::mem::take(&mut s.unread)).into_owned();
        let dropped = std::mem::take(&mut s.dropped);
        JobOutput { text, dropped, status: s.status.clone(), file: s.capture.summary().file }
    }

    /// Adds to the job's output (what a job run by [`JobTable::start_work_as`]
    /// writes as it goes).
    pub fn append(&self, bytes: &[u8]) {
        push(self, bytes);
    }

    /// How the job ended, as Claude Code 2.1.332 tells the model: its
    /// status (`completed`, `failed`, `killed`), a line, and the
    /// `<task-notification>` (a sub-agent's result in `<result>`).
    pub fn notice(&self) -> (&'static str, String, String) {
        let status = self.status();
        let (name, summary) = match (self.kind, &status) {
            (JobKind::Agent, JobStatus::Exited(0)) => ("completed", format!("Agent \"{}\" finished", self.what())),
            (JobKind::Agent, JobStatus::Exited(_)) => ("failed", format!("Agent \"{}\" failed", self.what())),
            (JobKind::Agent, _) => ("killed", format!("Agent \"{}\" was stopped", self.what())),
            (_, JobStatus::Exited(0)) => {
                ("completed", format!("Background command \"{}\" completed (exit code 0)", self.what()))
            }
            (_, JobStatus::Exited(code)) => {
                ("failed", format!("Background command \"{}\" failed with exit code {code}", self.what()))
            }
            (_, _) => ("killed", format!("Background command \"{}\" was stopped", self.what())),
        };
        let file = self
            .output_file
            .as_ref()
            .map(|f| format!("<output-file>{}</output-file>\n", xml(&f.display().to_string())));
        let result = match self.kind {
            JobKind::Agent => {
                let s = self.lock();
                format!("<result>{}</result>\n", xml(&String::from_utf8_lossy(&s.unread)))
            }
            _ => String::new(),
        };
        let text = format!(
            "<task-notification>\n<task-id>{}</task-id>\n{}<status>{name}</status>\n<summary>{}</summary>\n{result}</task-notification>",
            xml(&self.id),
            file.unwrap_or_default(),
            xml(&summary)
        );
        (name, summary, text)
    }

    /// What the job is, in a few words: a sub-agent's description, a
    /// command's first line (cut at 80 characters).
    fn what(&self) -> String {
        let what = match self.kind {
            JobKind::Agent => self.command.split_once(": ").map_or(self.command.as_str(), |(_, d)| d),
            _ => self.command.lines().next().unwrap_or_default(),
        };
        what.chars().take(80).collect()
    }

    /// The job's status.
    pub fn status(&self) -> JobStatus {
        self.lock().status.clone()
    }

    /// Waits until the job is over, at most `limit`.
    pub async fn wait(&self, limit: Duration) {
        let finished = self.finished.notified();
        if self.status() == JobStatus::Running {
            let _ = tokio::time::timeout(limit, finished).await;
        }
    }

    /// Asks the job to end (as [`Job::kill`] does) without waiting.
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Ends the job (SIGTERM, grace, SIGKILL, sweep) and waits until it is over.
    pub async fn kill(&self) {
        self.cancel.cancel();
        let finished = self.finished.notified();
        if self.status() == JobStatus::Running {
            let _ = tokio::time::timeout(Duration::from_secs(10), finished).await;
        }
    }

    fn info(&self) -> JobInfo {
        let status = self.status();
        JobInfo {
            job_id: self.id.clone(),
            command: self.command.clone(),
            status: status.name().to_owned(),
            exit_code: match status {
                JobStatus::Exited(code) => Some(code),
                _ => None,
            },
        }
    }
}

/// How a job's processes are started and where their files go.
pub struct JobRun<'a> {
    /// The marker in the processes' environment.
    pub marker: &'a str,
    /// The file that keeps the whole output.
    pub output_file: Option<&'a Path>,
    /// Directly or through the sandbox helper.
    pub launch: super::Launch<'a>,
    /// The session's command environment.
    pub env: &'a std::collections::BTreeMap<String, String>,
    /// The job's private temp directory, removed when it ends.
    pub tmp: Option<PathBuf>,
    /// How long the job may run before it is stopped (its `timeout`).
    pub limit: Duration,
    /// Run (on the blocking pool) when the job's processes are gone: what
    /// its sandbox guarded on its workspace is checked, and what it says
    /// goes to the job's output (settings it created moved aside).
    pub at_end: Option<AtEnd>,
    /// A Monitor's: told each line of standard output and the end (the
    /// job is then of [`JobKind::Monitor`]).
    pub watcher: Option<Arc<dyn Watcher>>,
}

/// What a job taken over from a foreground call keeps of it.
pub struct Adopted {
    /// How long it may run on from now.
    pub limit: Duration,
    /// The call's private temp directory, removed when the job ends.
    pub tmp: Option<PathBuf>,
    /// What runs when its processes are gone (see [`JobRun::at_end`]).
    pub at_end: Option<AtEnd>,
}

/// Claude Code 2.1.332's words when `max` sub-agents run already.
pub fn cap_reached(max: usize) -> String {
    format!(
        "Concurrent subagent limit reached. You can run {max} subagents at once. Do not retry. If the user wants \
         more concurrent subagents, ask them to raise the limit."
    )
}

/// One running sub-agent's place (see [`JobTable::agent_slot`]).
pub struct AgentSlot(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for AgentSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `text` with `&`, `<` and `>` escaped (for a `<task-notification>`).
pub fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Who hears that a job ended (the session's `task/notification`).
pub type Notify = Arc<dyn Fn(&Job) + Send + Sync>;

/// A session's jobs.
pub struct JobTable {
    notify: std::sync::OnceLock<Notify>,
    /// Sub-agents running now, in the foreground or the background, and
    /// started in all.
    agents: Arc<std::sync::atomic::AtomicUsize>,
    agents_started: AtomicU64,
    jobs: Mutex<Vec<Arc<Job>>>,
    next: AtomicU64,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl JobTable {
    /// Jobs whose tokens are children of `cancel` (the session's).
    pub fn new(cancel: CancellationToken, tracker: TaskTracker) -> Self {
        JobTable {
            notify: std::sync::OnceLock::new(),
            agents: Arc::default(),
            agents_started: AtomicU64::new(0),
            jobs: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            cancel,
            tracker,
        }
    }

    /// A place for one more sub-agent, held while it runs; refused (in
    /// Claude Code 2.1.332's words) when `max` run already, and once the
    /// session started `max_in_all`.
    pub fn agent_slot(&self, max: usize, max_in_all: u64) -> Result<AgentSlot, String> {
        let taken = self.agents.fetch_add(1, Ordering::SeqCst);
        let slot = AgentSlot(self.agents.clone());
        if taken >= max {
            return Err(cap_reached(max));
        }
        if self.agents_started.fetch_add(1, Ordering::SeqCst) >= max_in_all {
            return Err(format!(
                "this session has started {max_in_all} subagents, the most one session may; do the rest of the work \
                 directly with your tools"
            ));
        }
        Ok(slot)
    }

    /// Tells `notify` of every job that ends from now on (set once).
    pub fn notify_with(&self, notify: Notify) {
        let _ = self.notify.set(notify);
    }

    /// Who hears of a job's end (not a watch's: it says its own).
    fn notifier(&self, kind: JobKind) -> Option<Notify> {
        self.notify.get().filter(|_| kind != JobKind::Monitor).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Job>>> {
        self.jobs.locked()
    }

    /// Whether another job may start now.
    pub fn has_room(&self) -> bool {
        self.room().is_ok()
    }

    /// Whether another job may start.
    fn room(&self) -> std::io::Result<()> {
        let running = self.lock().iter().filter(|j| j.status() == JobStatus::Running).count();
        if running >= MAX_RUNNING_JOBS {
            return Err(std::io::Error::other(format!(
                "{running} background jobs are running; stop one with TaskStop first"
            )));
        }
        Ok(())
    }

    /// A running job for `command`, with the next id, its output also
    /// written to `output_file`.
    fn new_job(&self, command: &str, kind: JobKind, output_file: Option<&Path>) -> Arc<Job> {
        // The file is made now, not once output comes: its path is given
        // at the start for Read to follow, and must exist even while the
        // job is silent.
        let capture = Capture::new(1, output_file).opened();
        Arc::new(Job {
            id: format!("job_{}", self.next.fetch_add(1, Ordering::Relaxed)),
            command: command.to_owned(),
            name: None,
            kind,
            output_file: capture.file_path(),
            state: Mutex::new(JobState { unread: Vec::new(), dropped: 0, status: JobStatus::Running, capture }),
            cancel: self.cancel.child_token(),
            finished: tokio::sync::Notify::new(),
        })
    }

    /// Starts `script` (for `command`) in `cwd` as a job.
    pub fn start(&self, command: &str, script: &str, cwd: &Path, run: JobRun<'_>) -> std::io::Result<Arc<Job>> {
        let JobRun { marker, output_file, launch, env, tmp, limit, at_end, watcher } = run;
        self.room()?;
        let tree = spawn_bash(script, cwd, marker, env, launch)?;
        let kind = if watcher.is_some() { JobKind::Monitor } else { JobKind::Shell };
        let job = self.new_job(command, kind, output_file);
        self.lock().push(job.clone());
        let notify = self.notifier(kind);
        self.tracker.spawn(pump(job.clone(), tree, limit, tmp, at_end, watcher, notify));
        Ok(job)
    }

    /// Takes over a foreground command that ran out of its time: Claude
    /// Code 2.1.332 moves such a command to the background rather than
    /// kill it. Its processes and pipes (`tree`, the pipes put back) and
    /// its output so far (`capture`, whose file is made now if it was not
    /// yet, so Read can follow it) become the job's; that output is not
    /// unread (the call's result gave it). Check [`JobTable::has_room`]
    /// first: this does not refuse.
    pub fn adopt(&self, command: &str, tree: ProcessTree, capture: Capture, run: Adopted) -> Arc<Job> {
        let capture = capture.opened();
        let job = Arc::new(Job {
            id: format!("job_{}", self.next.fetch_add(1, Ordering::Relaxed)),
            command: command.to_owned(),
            name: None,
            kind: JobKind::Shell,
            output_file: capture.file_path(),
            state: Mutex::new(JobState { unread: Vec::new(), dropped: 0, status: JobStatus::Running, capture }),
            cancel: self.cancel.child_token(),
            finished: tokio::sync::Notify::new(),
        });
        self.lock().push(job.clone());
        let notify = self.notifier(JobKind::Shell);
        self.tracker.spawn(pump(job.clone(), tree, run.limit, run.tmp, run.at_end, None, notify));
        job
    }

    /// Starts `work` as a job named `what` (a sub-agent run in the
    /// background): what it gives, or why it failed, is the job's output,
    /// its end the job's end (exit code 0 or 1). It gets the job's token:
    /// TaskStop or the session's close cancels it, and it is dropped.
    pub fn start_work<F>(&self, what: &str, work: impl FnOnce(CancellationToken) -> F) -> std::io::Result<Arc<Job>>
    where
        F: std::future::Future<Output = Result<String, String>> + Send + 'static,
    {
        self.start_work_named(what, None, work)
    }

    /// [`JobTable::start_work`] for a job that also answers to `name`
    /// (refused while a running job of the session has it).
    pub fn start_work_named<F>(
        &self,
        what: &str,
        name: Option<&str>,
        work: impl FnOnce(CancellationToken) -> F,
    ) -> std::io::Result<Arc<Job>>
    where
        F: std::future::Future<Output = Result<String, String>> + Send + 'static,
    {
        if let Some(name) = name
            && self.lock().iter().any(|j| j.name.as_deref() == Some(name) && j.status() == JobStatus::Running)
        {
            return Err(std::io::Error::other(format!(
                "an agent named {name:?} is running already; choose another name"
            )));
        }
        self.start_work_as(what, JobKind::Agent, None, name, |token, _| work(token))
    }

    /// [`JobTable::start_work`] for a job of `kind` whose output also goes
    /// to `output_file` (a Monitor's WebSocket watch).
    pub fn start_work_as<F>(
        &self,
        what: &str,
        kind: JobKind,
        output_file: Option<&Path>,
        name: Option<&str>,
        work: impl FnOnce(CancellationToken, Arc<Job>) -> F,
    ) -> std::io::Result<Arc<Job>>
    where
        F: std::future::Future<Output = Result<String, String>> + Send + 'static,
    {
        self.room()?;
        let mut job = self.new_job(what, kind, output_file);
        if let Some(job) = Arc::get_mut(&mut job) {
            job.name = name.map(str::to_owned);
        }
        let work = work(job.cancel.clone(), job.clone());
        self.lock().push(job.clone());
        let done = job.clone();
        let notify = self.notifier(kind);
        self.tracker.spawn(async move {
            let status = tokio::select! {
                result = work => {
                    let (text, code) = match result {
                        Ok(text) => (text, 0),
                        Err(why) => (why, 1),
                    };
                    push(&done, text.as_bytes());
                    // Ended because it was stopped (the work saw the token
                    // first): stopped, not failed.
                    if code != 0 && done.cancel.is_cancelled() { JobStatus::Killed } else { JobStatus::Exited(code) }
                }
                _ = done.cancel.cancelled() => JobStatus::Killed,
            };
            done.lock().status = status;
            if let Some(notify) = notify {
                notify(&done);
            }
            done.finished.notify_waiters();
        });
        Ok(job)
    }

    /// The job `id`, or the latest job named `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        let jobs = self.lock();
        jobs.iter().find(|j| j.id == id).or_else(|| jobs.iter().rev().find(|j| j.name.as_deref() == Some(id))).cloned()
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<JobInfo> {
        self.lock().iter().map(|j| j.info()).collect()
    }
}

/// Moves a job's output into its state until the job's process group is
/// gone (not merely until EOF), or kills it when its token is cancelled.
async fn pump(
    job: Arc<Job>,
    mut tree: ProcessTree,
    limit: Duration,
    tmp: Option<PathBuf>,
    at_end: Option<AtEnd>,
    watcher: Option<Arc<dyn Watcher>>,
    notify: Option<Notify>,
) {
    let mut lines = watcher.map(|w| Lines { watcher: w, job: job.id.clone(), partial: Vec::new() });
    let end = pump_output(&job, &mut tree, limit, lines.as_mut()).await;
    if let Some(at_end) = at_end {
        for line in tokio::task::spawn_blocking(at_end).await.unwrap_or_default() {
            push(&job, format!("[{line}]\n").as_bytes());
        }
    }
    if let Some(report) = tree.report()
        && let Some(error) = report.error
    {
        push(&job, format!("[the sandbox could not be applied, nothing ran: {error}]\n").as_bytes());
    }
    if let Some(tmp) = tmp {
        let _ = std::fs::remove_dir_all(tmp);
    }
    if let Some(lines) = lines {
        lines.finish(end);
    }
    if let Some(notify) = notify {
        notify(&job);
    }
    job.finished.notify_waiters();
}

/// A watcher and the line it has not been given yet.
struct Lines {
    watcher: Arc<dyn Watcher>,
    job: String,
    partial: Vec<u8>,
}

/// The most of one line a watcher waits for: a longer one is given in
/// pieces of this size.
const MAX_WATCHED_LINE: usize = 64 * 1024;

impl Lines {
    fn push(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            match piece.strip_suffix(b"\n") {
                Some(end) => {
                    self.partial.extend_from_slice(end);
                    self.give();
                }
                None => {
                    self.partial.extend_from_slice(piece);
                    if self.partial.len() >= MAX_WATCHED_LINE {
                        self.give();
                    }
                }
            }
        }
    }

    fn give(&mut self) {
        let line = std::mem::take(&mut self.partial);
        let line = String::from_utf8_lossy(&line);
        self.watcher.line(&self.job, line.strip_suffix('\r').unwrap_or(&line));
    }

    fn finish(mut self, end: JobEnd) {
        if !self.partial.is_empty() {
            self.give();
        }
        self.watcher.ended(&self.job, end);
    }
}

async fn pump_output(job: &Arc<Job>, tree: &mut ProcessTree, limit: Duration, mut lines: Option<&mut Lines>) -> JobEnd {
    let (Some(mut out), Some(mut err)) = (tree.child.stdout.take(), tree.child.stderr.take()) else {
        return JobEnd::Stopped;
    };
    let mut timed_out = false;
    let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let (mut out_open, mut err_open) = (true, true);
    let mut exit: Option<i32> = None;
    // The first look at the group comes a period after the shell's end,
    // not at once.
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + POLL, POLL);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    let status = loop {
        tokio::select! {
            n = out.read(&mut out_buf), if out_open => match n {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => {
                    push(job, &out_buf[..n]);
                    if let Some(lines) = lines.as_deref_mut() {
                        lines.push(&out_buf[..n]);
                    }
                }
            },
            n = err.read(&mut err_buf), if err_open => match n {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => push(job, &err_buf[..n]),
            },
            code = tree.wait_shell(), if exit.is_none() => exit = Some(code.unwrap_or(-1)),
            _ = poll.tick(), if exit.is_some() => {
                // The shell is gone; output may still be held by a child of
                // the group. Stop once the group is gone, EOF or not.
                if !tree.group_alive() {
                    break JobStatus::Exited(exit.unwrap_or(-1));
                }
            }
            _ = job.cancel.cancelled() => {
                tree.terminate().await;
                break JobStatus::Killed;
            }
            _ = &mut deadline, if exit.is_none() => {
                tree.terminate().await;
                push(job, format!("[stopped: the job ran out of its timeout of {} ms]\n", limit.as_millis()).as_bytes());
                timed_out = true;
                break JobStatus::Killed;
            }
        }
        if !out_open && !err_open && exit.is_some() && !tree.group_alive() {
            break JobStatus::Exited(exit.unwrap_or(-1));
        }
    };
    // The group is gone, but what it wrote last may still be in the pipes:
    // read them to their end (bounded: with the sandbox off, a process
    // that left the group may still hold them).
    if matches!(status, JobStatus::Exited(_)) {
        let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
        if out_open {
            drain(job, &mut out, &mut out_buf, deadline, lines).await;
        }
        if err_open {
            drain(job, &mut err, &mut err_buf, deadline, None).await;
        }
    }
    // Whatever the command left behind goes with it.
    tree.kill_now();
    let end = match status {
        JobStatus::Exited(code) => JobEnd::Exited(code),
        _ if timed_out => JobEnd::TimedOut,
        _ => JobEnd::Stopped,
    };
    job.lock().status = status;
    end
}

/// Reads `pipe` into the job's output (and its watcher) until its end or
/// `deadline`.
async fn drain(
    job: &Job,
    pipe: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut [u8],
    deadline: tokio::time::Instant,
    mut lines: Option<&mut Lines>,
) {
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout_at(deadline, pipe.read(buf)).await {
        push(job, &buf[..n]);
        if let Some(lines) = lines.as_deref_mut() {
            lines.push(&buf[..n]);
        }
    }
}

/// How often a job whose shell ended looks whether its group is gone.
const POLL: Duration = Duration::from_millis(100);

/// How long a finished job's last output may take to be read.
const DRAIN_LIMIT: Duration = Duration::from_millis(250);

fn push(job: &Job, bytes: &[u8]) {
    let mut s = job.lock();
    s.capture.push(bytes);
    s.unread.extend_from_slice(bytes);
    if s.unread.len() > MAX_UNREAD_BYTES {
        let excess = s.unread.len() - MAX_UNREAD_BYTES;
        s.unread.drain(..excess);
        s.dropped += excess as u64;
    }
}
