//! TestEcho (test builds only): returns its text. Concurrency safe, read
//! only, allowed without asking; answers to the old name `Echo`, to test
//! aliases.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Echoes its input.
#[derive(Debug, Clone, Copy)]
pub struct TestEcho;

/// Input of TestEcho.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestEchoInput {
    /// The text to return.
    pub text: String,
    /// Return the text this many times (default 1, at most 1000).
    #[serde(default)]
    pub repeat: Option<u32>,
}

impl Tool for TestEcho {
    type Input = TestEchoInput;
    type Output = String;

    const NAME: &'static str = "TestEcho";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: false, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn aliases(&self) -> &'static [&'static str] {
        &["Echo"]
    }

    fn description(&self) -> String {
        "Returns the given text (a test tool).".to_owned()
    }

    fn validate_input(&self, input: &TestEchoInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        match input.repeat {
            Some(0) | Some(1001..) => Err(ValidationError::new("repeat must be between 1 and 1000")),
            _ => Ok(()),
        }
    }

    fn check_permissions(&self, _input: &TestEchoInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: TestEchoInput,
        _ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        Ok(ToolOutput::new(input.text.repeat(input.repeat.unwrap_or(1) as usize)))
    }

    fn render_use(&self, input: &TestEchoInput) -> String {
        format!("Echoing {:?}", input.text)
    }

    fn render_result(&self, output: &String) -> String {
        format!("Echoed {} characters", output.chars().count())
    }

    fn render_grouped(&self, inputs: &[&TestEchoInput]) -> String {
        format!("Echoing {} texts", inputs.len())
    }
}
