//! KillShell: ends a background job started by Bash with
//! `run_in_background`, and everything it started.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::Decision;
use crate::process::jobs::JobStatus;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput};

/// Ends a background job.
#[derive(Debug, Clone, Copy)]
pub struct KillShell;

/// Input of KillShell.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillShellInput {
    /// The id Bash returned for a `run_in_background` command.
    #[serde(alias = "job_id", alias = "task_id", alias = "bash_id")]
    pub shell_id: String,
}

impl Tool for KillShell {
    type Input = KillShellInput;
    type Output = String;
    type Progress = ();

    const NAME: &'static str = "KillShell";

    fn description(&self) -> String {
        "Stops a background job started by Bash with run_in_background, with every process it started.".to_owned()
    }

    fn aliases(&self) -> &'static [&'static str] {
        // Claude Code's earlier and later names for it.
        &["KillBash", "TaskStop"]
    }

    fn check_permissions(&self, _input: &KillShellInput, _ctx: &ToolContext) -> Decision {
        // It only ends what this session started.
        Decision::Allow
    }

    async fn call(
        &self,
        input: KillShellInput,
        ctx: ToolContext,
        _progress: ProgressSink<()>,
    ) -> Result<ToolOutput<String>, ToolError> {
        let job = ctx
            .jobs
            .get(&input.shell_id)
            .ok_or_else(|| ToolError::new(format!("no background job {:?} in this session", input.shell_id)))?;
        let before = job.status();
        job.kill().await;
        Ok(ToolOutput::new(match before {
            JobStatus::Running => format!("job {} killed", job.id),
            JobStatus::Exited(code) => format!("job {} had already exited with code {code}", job.id),
            JobStatus::Killed => format!("job {} was already killed", job.id),
        }))
    }

    fn render_use(&self, input: &KillShellInput) -> String {
        format!("Stopping {}", input.shell_id)
    }

    fn render_result(&self, output: &String) -> String {
        output.clone()
    }
}
