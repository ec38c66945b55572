//! TestShell (test builds only): stands in for Bash in executor tests — its
//! failure cancels its siblings, as Bash's does. Sleeps, then "exits" with
//! the given code; a non-zero code is a failed call.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput};

/// A pretend shell command.
#[derive(Debug, Clone, Copy)]
pub struct TestShell;

/// Input of TestShell.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestShellInput {
    /// Milliseconds to run before exiting.
    #[serde(default)]
    pub ms: u64,
    /// The exit code (default 0); non-zero fails the call.
    #[serde(default)]
    pub exit: i32,
    /// Whether the call may run beside other safe calls (default false).
    #[serde(default)]
    pub safe: bool,
}

impl Tool for TestShell {
    type Input = TestShellInput;
    type Output = String;

    const NAME: &'static str = "TestShell";

    fn description(&self) -> String {
        "Pretends to run a shell command (a test tool).".to_owned()
    }

    fn check_permissions(&self, _input: &TestShellInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    fn is_concurrency_safe(&self, input: &TestShellInput) -> bool {
        input.safe
    }

    fn cancels_siblings_on_failure(&self) -> bool {
        true
    }

    async fn call(
        &self,
        input: TestShellInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(input.ms)) => {}
            _ = ctx.cancel.cancelled() => return Err(ToolError::new("killed")),
        }
        match input.exit {
            0 => Ok(ToolOutput::new("exit 0".to_owned())),
            code => Err(ToolError::new(format!("exit {code}"))),
        }
    }

    fn render_use(&self, input: &TestShellInput) -> String {
        format!("Running a {} ms command", input.ms)
    }

    fn render_result(&self, output: &String) -> String {
        output.clone()
    }
}
