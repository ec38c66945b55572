//! TestBlock (test builds only): a tool whose interrupt behaviour is
//! `block` — a cancelled turn lets it finish, as a test suite would.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::Decision;
use crate::tool::{InterruptBehavior, ProgressSink, Tool, ToolContext, ToolError, ToolOutput};

/// Runs to completion when interrupted.
#[derive(Debug, Clone, Copy)]
pub struct TestBlock;

/// Input of TestBlock.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestBlockInput {
    /// Milliseconds to run.
    pub ms: u64,
}

impl Tool for TestBlock {
    type Input = TestBlockInput;
    type Output = String;

    const NAME: &'static str = "TestBlock";
    const CONCURRENCY_SAFE: bool = true;

    fn description(&self) -> String {
        "Runs for a while and cannot be interrupted (a test tool).".to_owned()
    }

    fn check_permissions(&self, _input: &TestBlockInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    fn interrupt_behavior(&self, _input: &TestBlockInput) -> InterruptBehavior {
        InterruptBehavior::Block
    }

    async fn call(
        &self,
        input: TestBlockInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        // Only a hard stop (discard, session close) cancels the token.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(input.ms)) => Ok(ToolOutput::new("finished".to_owned())),
            _ = ctx.cancel.cancelled() => Err(ToolError::new("stopped")),
        }
    }

    fn render_use(&self, input: &TestBlockInput) -> String {
        format!("Blocking for {} ms", input.ms)
    }

    fn render_result(&self, output: &String) -> String {
        output.clone()
    }
}
