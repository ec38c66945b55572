//! KillShell: ends a background job started by Bash with
//! `run_in_background`, and everything it started.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::Decision;
use crate::process::jobs::JobStatus;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Ends a background job.
#[derive(Debug, Clone, Copy)]
pub struct KillShell;

/// Input of KillShell: the job by either name Claude Code gave the field
/// (`task_id` is 2.1's, `shell_id` the older one).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillShellInput {
    /// The id Bash returned for a `run_in_background` command.
    #[serde(default, alias = "job_id", alias = "bash_id")]
    pub shell_id: Option<String>,
    /// The same id, by Claude Code 2.1's name for the field.
    #[serde(default)]
    pub task_id: Option<String>,
}

impl KillShellInput {
    /// The job named (validated: exactly one, or both the same).
    fn id(&self) -> &str {
        self.task_id.as_deref().or(self.shell_id.as_deref()).unwrap_or_default()
    }
}

impl Tool for KillShell {
    type Input = KillShellInput;
    type Output = String;

    const NAME: &'static str = "KillShell";

    fn description(&self) -> String {
        "Stops a background job started by Bash with run_in_background, with every process it started.".to_owned()
    }

    fn aliases(&self) -> &'static [&'static str] {
        // Claude Code's earlier and later names for it.
        &["KillBash", "TaskStop"]
    }

    fn validate_input(&self, input: &KillShellInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        match (input.task_id.as_deref(), input.shell_id.as_deref()) {
            (None, None) => Err(ValidationError::new("task_id is required: the id of the background job to stop")),
            (Some(a), Some(b)) if a != b => {
                Err(ValidationError::new(format!("task_id {a:?} and shell_id {b:?} name different jobs: give one")))
            }
            _ => Ok(()),
        }
    }

    fn check_permissions(&self, _input: &KillShellInput, _ctx: &ToolContext) -> Decision {
        // It only ends what this session started.
        Decision::Allow
    }

    async fn call(
        &self,
        input: KillShellInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        let id = input.id();
        let job = ctx
            .need::<crate::process::jobs::JobTable>()?
            .get(id)
            .ok_or_else(|| ToolError::new(format!("no background job {id:?} in this session")))?;
        let before = job.status();
        job.kill().await;
        Ok(ToolOutput::new(match before {
            JobStatus::Running => format!("job {} killed", job.id),
            JobStatus::Exited(code) => format!("job {} had already exited with code {code}", job.id),
            JobStatus::Killed => format!("job {} was already killed", job.id),
        }))
    }

    fn render_use(&self, input: &KillShellInput) -> String {
        format!("Stopping {}", input.id())
    }

    fn render_result(&self, output: &String) -> String {
        output.clone()
    }
}
