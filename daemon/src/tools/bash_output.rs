//! BashOutput: the new output of a background job started by Bash with
//! `run_in_background`, and whether it is still running.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::process::jobs::JobStatus;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput};

/// Reads a background job's output.
#[derive(Debug, Clone, Copy)]
pub struct BashOutput;

/// Input of BashOutput.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashOutputInput {
    /// The job id Bash returned for a `run_in_background` command.
    pub job_id: String,
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
}

impl Tool for BashOutput {
    type Input = BashOutputInput;
    type Output = BashOutputResult;
    type Progress = ();

    const NAME: &'static str = "BashOutput";

    fn description(&self) -> String {
        "Returns the output a background job (started by Bash with run_in_background) has written \
         since the last time you asked, and whether it is still running."
            .to_owned()
    }

    fn check_permissions(&self, _input: &BashOutputInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    fn is_concurrency_safe(&self, _input: &BashOutputInput) -> bool {
        true
    }

    fn is_read_only(&self, _input: &BashOutputInput) -> bool {
        true
    }

    fn is_destructive(&self, _input: &BashOutputInput) -> bool {
        false
    }

    async fn call(
        &self,
        input: BashOutputInput,
        ctx: ToolContext,
        _progress: ProgressSink<()>,
    ) -> Result<ToolOutput<BashOutputResult>, ToolError> {
        let job = ctx.jobs.get(&input.job_id).ok_or_else(|| {
            let known: Vec<String> = ctx.jobs.list().into_iter().map(|j| j.job_id).collect();
            ToolError::new(format!("no background job {:?}; this session's jobs: {}", input.job_id, known.join(", ")))
        })?;
        let out = job.read_new();
        let (status, exit_code) = match out.status {
            JobStatus::Running => ("running", None),
            JobStatus::Exited(code) => ("exited", Some(code)),
            JobStatus::Killed => ("killed", None),
        };
        Ok(ToolOutput::new(BashOutputResult {
            job_id: job.id.clone(),
            output: out.text,
            dropped_bytes: out.dropped,
            status: status.to_owned(),
            exit_code,
        }))
    }

    fn result_content(&self, r: &BashOutputResult) -> Vec<agentd_protocol::tools::ContentBlock> {
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
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &BashOutputInput) -> String {
        format!("Reading output of {}", input.job_id)
    }

    fn render_result(&self, r: &BashOutputResult) -> String {
        format!("{}: {} ({} lines new)", r.job_id, r.status, r.output.lines().count())
    }
}
