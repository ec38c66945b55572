//! What a Bash call returns: `BashResult`, the text the model reads (the
//! output, then bracketed notes; where Claude Code 2.1.332 says something
//! to the model, in its words), and the structured fields a client reads
//! by 2.1.332's names.

use std::path::PathBuf;

use agentd_protocol::session::SandboxProfile;
use serde::Serialize;

use super::launch::{network_of, walls_missing};
use crate::process;
use crate::tool::ToolContext;

/// Why a command was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KillReason {
    /// It ran out of time.
    Timeout,
    /// The call was cancelled (the user, a failed sibling, the session).
    Cancelled,
    /// What it wrote passed its layer's bounds (nothing of it applies).
    Overflow,
}

/// The result of a command.
#[derive(Debug, Clone, Serialize)]
pub struct BashResult {
    /// The exit code (128+signal when a signal ended the shell).
    pub exit_code: Option<i32>,
    /// Set when the daemon stopped the command.
    pub killed: Option<KillReason>,
    /// The output (stdout and stderr as they came), its middle elided when long.
    pub output: String,
    /// Characters of output left out.
    pub elided_chars: u64,
    /// The file with the whole output.
    pub output_file: Option<PathBuf>,
    /// What a non-zero exit code means by the command's convention (Claude
    /// Code 2.1.332's `returnCodeInterpretation`, in its words).
    pub note: Option<String>,
    /// Files of the session's read cache whose modification time moved
    /// while the command ran (its `staleReadFileStateHint` names them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_reads: Vec<PathBuf>,
    /// The note naming them, paths relative to the shell's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_read_hint: Option<String>,
    /// All the output, in bytes (what the file holds, up to its cap).
    pub output_bytes: u64,
    /// Processes the command left running, ended with it.
    pub ended_leftovers: usize,
    /// The shell's directory after the command, when it changed.
    pub cwd: Option<PathBuf>,
    /// That directory is outside the working directories: the next command
    /// starts at the session's cwd instead.
    pub cwd_reset: bool,
    /// Where the next command starts when `cwd_reset` (the session's cwd,
    /// Claude Code's "start folder").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_to: Option<PathBuf>,
    /// The job id, for a command started in the background.
    pub job_id: Option<String>,
    /// Set when the command reached its timeout in the foreground and was
    /// moved to the background (as `job_id`) instead of killed: the
    /// timeout, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out_after_ms: Option<u64>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// Its timeout, in milliseconds.
    pub timeout_ms: u64,
    /// The sandbox profile it ran in.
    pub sandbox: SandboxProfile,
    /// The network it had.
    pub network: agentd_protocol::session::NetworkAccess,
    /// Connections the network gate refused (host:port: why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_refused: Vec<String>,
    /// Settings files the command created, moved aside (from → to).
    pub quarantined: Vec<String>,
    /// Older outputs of the session removed to keep its outputs within
    /// their bound, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs_removed: Option<String>,
    /// What could not be examined after the command (an unreadable
    /// directory it left), and what was done with it: moved aside, or
    /// calls refused there until the user gives it its permissions back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexamined: Vec<String>,
    /// In a worktree: objects the command wrote that were not taken into
    /// the repository (not what their names say, packs), and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects_refused: Vec<String>,
    /// Walls of the sandbox this kernel could not apply to the command
    /// (`daemon/info`'s `sandbox.walls`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub walls_missing: Vec<String>,
    /// It ran with the workspace behind a copy-on-write layer: what it
    /// changed was judged, and applied or not, when it ended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub layered: bool,
    /// What it changed (`changes`), what was not applied and why.
    #[serde(flatten)]
    pub effects: super::effects::Effects,
}

impl BashResult {
    /// Claude Code 2.1.332's names for what its Bash output carries beside
    /// stdout, each only when it applies (a plain command has none).
    pub(super) fn structured(&self) -> Option<serde_json::Value> {
        let mut fields = serde_json::Map::new();
        let mut put = |name: &str, value: serde_json::Value| {
            fields.insert(name.to_owned(), value);
        };
        if let Some(note) = &self.note {
            put("returnCodeInterpretation", note.as_str().into());
        }
        if let Some(hint) = &self.stale_read_hint {
            put("staleReadFileStateHint", hint.as_str().into());
        }
        if let Some(job) = &self.job_id {
            put("backgroundTaskId", job.as_str().into());
            if let Some(file) = &self.output_file {
                put("backgroundOutputPath", file.display().to_string().into());
            }
        }
        if let Some(ms) = self.timed_out_after_ms {
            put("timedOutAfterMs", ms.into());
        }
        if self.elided_chars > 0
            && let Some(file) = &self.output_file
        {
            put("persistedOutputPath", file.display().to_string().into());
            put("persistedOutputSize", self.output_bytes.into());
        }
        (!fields.is_empty()).then_some(serde_json::Value::Object(fields))
    }
}

/// The result of a command moved to the background at its timeout: its
/// output so far, and the job it goes on as.
pub(super) fn moved_result(
    ctx: &ToolContext,
    summary: process::CaptureSummary,
    job: &process::jobs::Job,
    timeout_ms: u64,
    started: std::time::Instant,
    network_refused: Vec<String>,
) -> BashResult {
    // A background job's start, with what the call saw before it moved.
    BashResult {
        output: summary.text,
        elided_chars: summary.elided_chars,
        output_bytes: summary.total_bytes,
        timed_out_after_ms: Some(timeout_ms),
        duration_ms: started.elapsed().as_millis() as u64,
        network_refused,
        ..BashResult::started(job.id.clone(), job.output_file.clone(), timeout_ms, ctx)
    }
}

impl BashResult {
    /// A background job's start (`run_in_background`): its id and the file
    /// its output goes to (made as it started; none only when it could not
    /// be written).
    pub(super) fn started(
        job_id: String,
        output_file: Option<std::path::PathBuf>,
        timeout_ms: u64,
        ctx: &ToolContext,
    ) -> BashResult {
        let profile = ctx.grant.sandbox_profile;
        BashResult {
            exit_code: None,
            killed: None,
            output: String::new(),
            elided_chars: 0,
            output_file,
            note: None,
            stale_reads: Vec::new(),
            stale_read_hint: None,
            output_bytes: 0,
            ended_leftovers: 0,
            cwd: None,
            cwd_reset: false,
            reset_to: None,
            job_id: Some(job_id),
            timed_out_after_ms: None,
            duration_ms: 0,
            timeout_ms,
            sandbox: profile,
            network: network_of(ctx, profile),
            network_refused: Vec::new(),
            quarantined: Vec::new(),
            outputs_removed: None,
            unexamined: Vec::new(),
            objects_refused: Vec::new(),
            walls_missing: walls_missing(ctx, profile),
            layered: false,
            effects: super::effects::Effects::default(),
        }
    }
}

/// The text the model reads: the output, then bracketed notes.
pub(super) fn result_text(r: &BashResult) -> String {
    let mut text = r.output.clone();
    let mut note = |line: String| {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
    };
    if let Some(job) = &r.job_id {
        // Claude Code 2.1.332's sentence, which models are trained on; the
        // file is where it has them Read the output (TaskOutput is
        // deprecated there).
        let file = r.output_file.as_ref().map(|f| format!(" Output is being written to: {}.", f.display()));
        let file = file.unwrap_or_default();
        match r.timed_out_after_ms {
            Some(ms) => note(format!(
                "Command did not complete within its {}s timeout and was moved to the background (ID: {job}).{file}",
                ms as f64 / 1000.0
            )),
            None => note(format!("Command running in background with ID: {job}.{file}")),
        }
        note(format!("[read its output with Read on that file or BashOutput; stop it with TaskStop (task_id {job})]"));
    }
    match r.killed {
        Some(KillReason::Timeout) => note(format!("[killed: timed out after {} ms]", r.timeout_ms)),
        Some(KillReason::Cancelled) => note("[killed: cancelled]".to_owned()),
        Some(KillReason::Overflow) => note("[killed: what it wrote passed the layer's bounds]".to_owned()),
        None => {}
    }
    if let Some(code) = r.exit_code
        && code != 0
    {
        match &r.note {
            Some(n) => note(format!("[exit code {code}: {n}]")),
            None => note(format!("[exit code {code}]")),
        }
    }
    if r.ended_leftovers > 0 {
        note(format!(
            "[ended {} process(es) the command left running; use run_in_background for long-running processes]",
            r.ended_leftovers
        ));
    }
    if r.elided_chars > 0
        && let Some(file) = &r.output_file
    {
        note(format!("[{} characters of output elided; the full output is in {}]", r.elided_chars, file.display()));
    }
    if let Some(hint) = &r.stale_read_hint {
        note(hint.clone());
    }
    for refused in &r.objects_refused {
        note(format!("[an object the command wrote was not taken into the repository: {refused}]"));
    }
    for refused in &r.network_refused {
        note(format!("[the network gate refused a connection: {refused}]"));
    }
    if !r.network_refused.is_empty() {
        note(
            "[confined commands reach the network only through agentd's gate (HTTP_PROXY/ALL_PROXY are set); \
             domains need a rule: WebFetch(domain:HOST) in permissions.allow or sandbox.network.allowedDomains]"
                .to_owned(),
        );
    }
    if !r.walls_missing.is_empty() {
        note(format!("[this kernel could not apply these walls of the sandbox: {}]", r.walls_missing.join(", ")));
    }
    for moved in &r.quarantined {
        note(format!(
            "[the command created {moved}: settings agentd or other tools would obey, so they were moved aside; \
             write settings with the Write tool, which asks the user]"
        ));
    }
    for what in &r.unexamined {
        note(format!("[{what}]"));
    }
    if let Some(removed) = &r.outputs_removed {
        note(format!("[{removed}]"));
    }
    for line in r.effects.lines() {
        note(line);
    }
    match (&r.cwd, &r.reset_to) {
        (Some(dir), None) => note(format!("[the shell's directory is now {}]", dir.display())),
        // Claude Code 2.1.332's sentence, after agentd's why.
        (Some(dir), Some(start)) => note(format!(
            "[{} is outside the working directories; the next command starts in {} again]\nShell cwd was reset to {}",
            dir.display(),
            start.display(),
            start.display()
        )),
        (None, _) => {}
    }
    text
}
