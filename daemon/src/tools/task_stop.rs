//! TaskStop: ends a background job (a Bash command started with
//! `run_in_background`, and everything it started, or a sub-agent run in
//! the background). Claude Code 2.1.332 offers it by this name; KillShell
//! and KillBash, its earlier names, stay aliases (rules and hook matchers
//! naming them still apply, see `permission::rules::TOOL_ALIASES`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::process::jobs::JobStatus;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Ends a background job.
#[derive(Debug, Clone, Copy)]
pub struct TaskStop;

/// Input of TaskStop: the job by either name Claude Code gave the field
/// (`task_id` is 2.1's, `shell_id` the older one, deprecated there).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStopInput {
    /// The id of the background task to stop: a Bash `run_in_background`
    /// command's or a background sub-agent's.
    #[serde(default)]
    pub task_id: Option<String>,
    /// Deprecated: use task_id instead.
    #[serde(default, alias = "job_id", alias = "bash_id")]
    pub shell_id: Option<String>,
}

/// What TaskStop did, with Claude Code's `TaskStopOutput` fields (what a
/// PostToolUse hook gets as `tool_response`).
#[derive(Debug, Clone, Serialize)]
pub struct TaskStopResult {
    /// What happened, as the model reads it.
    pub message: String,
    /// The job stopped.
    pub task_id: String,
    /// `local_bash` or `local_agent`.
    pub task_type: String,
    /// The command or description of the job.
    pub command: String,
}

impl TaskStopInput {
    /// The job named (validated: exactly one, or both the same).
    fn id(&self) -> &str {
        self.task_id.as_deref().or(self.shell_id.as_deref()).unwrap_or_default()
    }
}

impl Tool for TaskStop {
    type Input = TaskStopInput;
    type Output = TaskStopResult;

    const NAME: &'static str = "TaskStop";

    fn description(&self) -> String {
        "Stops a background task by its id: a command started by Bash with run_in_background (with every \
         process it started) or a sub-agent run in the background."
            .to_owned()
    }

    fn aliases(&self) -> &'static [&'static str] {
        // Claude Code's earlier names for it (agentd offered KillShell
        // until Claude Code 2.1.332 named it TaskStop).
        &["KillShell", "KillBash"]
    }

    fn validate_input(&self, input: &TaskStopInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        match (input.task_id.as_deref(), input.shell_id.as_deref()) {
            (None, None) => Err(ValidationError::new("task_id is required: the id of the background job to stop")),
            (Some(a), Some(b)) if a != b => {
                Err(ValidationError::new(format!("task_id {a:?} and shell_id {b:?} name different jobs: give one")))
            }
            _ => Ok(()),
        }
    }

    fn check_permissions(&self, _input: &TaskStopInput, _ctx: &ToolContext) -> Decision {
        // It only ends what this session started.
        Decision::Allow
    }

    async fn call(
        &self,
        input: TaskStopInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<TaskStopResult>, ToolError> {
        let id = input.id();
        let job = ctx
            .need::<crate::process::jobs::JobTable>()?
            .get(id)
            .ok_or_else(|| ToolError::new(format!("no background job {id:?} in this session")))?;
        let before = job.status();
        job.kill().await;
        // Claude Code 2.1.332's words.
        let message = match before {
            JobStatus::Running => format!("Successfully stopped task: {} ({})", job.id, job.command),
            JobStatus::Exited(code) => format!("Task {} is not running (status: exited with code {code})", job.id),
            JobStatus::Killed => format!("Task {} is not running (status: killed)", job.id),
        };
        Ok(ToolOutput::new(TaskStopResult {
            message,
            task_id: job.id.clone(),
            task_type: job.kind.task_type().to_owned(),
            command: job.command.clone(),
        }))
    }

    fn render_use(&self, input: &TaskStopInput) -> String {
        format!("Stopping {}", input.id())
    }

    /// A JSON string, as 2.1.332 gives it.
    fn result_content(&self, r: &TaskStopResult) -> Vec<agentd_protocol::tools::ContentBlock> {
        let json = serde_json::json!({
            "message": r.message,
            "task_id": r.task_id,
            "task_type": r.task_type,
            "command": r.command,
        });
        vec![agentd_protocol::tools::ContentBlock::text(json.to_string())]
    }

    fn render_result(&self, r: &TaskStopResult) -> String {
        r.message.clone()
    }
}
