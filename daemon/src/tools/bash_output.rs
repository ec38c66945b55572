//! BashOutput: the new output of a background job started by Bash with
//! `run_in_background`, and whether it is still running.

use std::time::Duration;

use grep_matcher::Matcher;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::process::jobs::JobStatus;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Reads a background job's output.
#[derive(Debug, Clone, Copy)]
pub struct BashOutput;

/// Input of BashOutput.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashOutputInput {
    /// The id Bash returned for a `run_in_background` command.
    #[serde(alias = "job_id", alias = "task_id", alias = "shell_id")]
    pub bash_id: String,
    /// Only lines matching this regular expression are returned; the
    /// others are read and dropped.
    #[serde(default)]
    pub filter: Option<String>,
}

/// Reads a background job's output, waiting for it to end first: Claude
/// Code's later name for BashOutput, with its inputs. Not offered (the
/// session offers BashOutput); it runs when a model calls it.
#[derive(Debug, Clone, Copy)]
pub struct TaskOutput;

/// Longest TaskOutput waits (its `timeout` is capped there).
const MAX_WAIT_MS: u64 = 600_000;
/// TaskOutput's wait when no `timeout` is given.
const DEFAULT_WAIT_MS: u64 = 30_000;

/// Input of TaskOutput.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskOutputInput {
    /// The id Bash returned for a `run_in_background` command.
    #[serde(alias = "bash_id", alias = "job_id", alias = "shell_id")]
    pub task_id: String,
    /// Wait for the job to end before answering (default true).
    #[serde(default, deserialize_with = "crate::tool::input::opt_flag")]
    pub block: Option<bool>,
    /// Longest wait in milliseconds (default 30000, at most 600000).
    #[serde(default, deserialize_with = "crate::tool::input::opt_u64")]
    pub timeout: Option<u64>,
    /// Only lines matching this regular expression are returned.
    #[serde(default)]
    pub filter: Option<String>,
}

/// A job's new output and status.
#[derive(Debug, Clone, Serialize)]
pub struct BashOutputResult {
    /// The job.
    pub job_id: String,
    /// Output since the last BashOutput call for this job.
    pub output: String,
    /// Bytes dropped because they were not read in time.
    pub dropped_bytes: u64,
    /// `running`, `exited` or `killed`.
    pub status: String,
    /// The exit code, once exited.
    pub exit_code: Option<i32>,
    /// The file with the job's whole output (up to 64 MiB), which the
    /// session's Read reads: Claude Code 2.1.332 has models Read it
    /// instead of calling TaskOutput.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file: Option<std::path::PathBuf>,
}

impl Tool for BashOutput {
    type Input = BashOutputInput;
    type Output = BashOutputResult;

    const NAME: &'static str = "BashOutput";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Returns the output a background job (started by Bash with run_in_background) has written \
         since the last time you asked, and whether it is still running."
            .to_owned()
    }

    fn validate_input(&self, input: &BashOutputInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        line_filter(input.filter.as_deref()).map(|_| ())
    }

    fn check_permissions(&self, _input: &BashOutputInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: BashOutputInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<BashOutputResult>, ToolError> {
        let job = find_job(&ctx, &input.bash_id)?;
        read(&job, input.filter.as_deref()).map(ToolOutput::new)
    }

    fn result_content(&self, r: &BashOutputResult) -> Vec<agentd_protocol::tools::ContentBlock> {
        result_text(r)
    }

    fn render_use(&self, input: &BashOutputInput) -> String {
        format!("Reading output of {}", input.bash_id)
    }

    fn render_result(&self, r: &BashOutputResult) -> String {
        render(r)
    }
}

impl Tool for TaskOutput {
    type Input = TaskOutputInput;
    type Output = BashOutputResult;

    const NAME: &'static str = "TaskOutput";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Returns a background job's output once it has ended (or its output so far, after `timeout` \
         milliseconds or with `block: false`)."
            .to_owned()
    }

    fn is_legacy(&self) -> bool {
        true
    }

    fn validate_input(&self, input: &TaskOutputInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        line_filter(input.filter.as_deref()).map(|_| ())
    }

    fn check_permissions(&self, _input: &TaskOutputInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: TaskOutputInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<BashOutputResult>, ToolError> {
        let job = find_job(&ctx, &input.task_id)?;
        if input.block.unwrap_or(true) {
            let wait = Duration::from_millis(input.timeout.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS));
            tokio::select! {
                _ = job.wait(wait) => {}
                _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
            }
        }
        read(&job, input.filter.as_deref()).map(ToolOutput::new)
    }

    fn result_content(&self, r: &BashOutputResult) -> Vec<agentd_protocol::tools::ContentBlock> {
        result_text(r)
    }

    fn render_use(&self, input: &TaskOutputInput) -> String {
        format!("Waiting for {}", input.task_id)
    }

    fn render_result(&self, r: &BashOutputResult) -> String {
        render(r)
    }
}

/// The `filter` as a regex (none: every line).
fn line_filter(filter: Option<&str>) -> Result<Option<grep_regex::RegexMatcher>, ValidationError> {
    filter
        .filter(|f| !f.is_empty())
        .map(|f| {
            grep_regex::RegexMatcher::new(f)
                .map_err(|e| ValidationError::new(format!("filter is not a valid regular expression: {e}")))
        })
        .transpose()
}

fn find_job(ctx: &ToolContext, id: &str) -> Result<std::sync::Arc<crate::process::jobs::Job>, ToolError> {
    let jobs = ctx.need::<crate::process::jobs::JobTable>()?;
    jobs.get(id).ok_or_else(|| {
        let known: Vec<String> = jobs.list().into_iter().map(|j| j.job_id).collect();
        ToolError::new(format!("no background job {id:?}; this session's jobs: {}", known.join(", ")))
    })
}

/// Takes the job's new output, keeping the lines `filter` matches.
fn read(job: &crate::process::jobs::Job, filter: Option<&str>) -> Result<BashOutputResult, ToolError> {
    let filter = line_filter(filter).map_err(|e| ToolError::new(e.message))?;
    let out = job.read_new();
    let (status, exit_code) = match out.status {
        JobStatus::Running => ("running", None),
        JobStatus::Exited(code) => ("exited", Some(code)),
        JobStatus::Killed => ("killed", None),
    };
    let output = match filter {
        None => out.text,
        Some(re) => out
            .text
            .split_inclusive('\n')
            .filter(|l| re.is_match(l.trim_end_matches('\n').as_bytes()).unwrap_or(false))
            .collect(),
    };
    Ok(BashOutputResult {
        job_id: job.id.clone(),
        output,
        dropped_bytes: out.dropped,
        status: status.to_owned(),
        exit_code,
        output_file: job.output_file.clone(),
    })
}

fn result_text(r: &BashOutputResult) -> Vec<agentd_protocol::tools::ContentBlock> {
    let mut text = r.output.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if r.dropped_bytes > 0 {
        text.push_str(&format!("[{} bytes of older output were dropped]\n", r.dropped_bytes));
    }
    match r.exit_code {
        Some(code) => text.push_str(&format!("[job {} exited with code {code}]", r.job_id)),
        None => text.push_str(&format!("[job {} is {}]", r.job_id, r.status)),
    }
    if let Some(file) = &r.output_file {
        text.push_str(&format!("\n[its whole output is in {}; Read it there]", file.display()));
    }
    vec![agentd_protocol::tools::ContentBlock::text(text)]
}

fn render(r: &BashOutputResult) -> String {
    let lines = crate::tools::counted(r.output.lines().count(), "line", "lines");
    format!("{}: {} ({lines} new)", r.job_id, r.status)
}
