//! TestSleep (test builds only): waits, reporting progress, and can fail or
//! panic on request — deterministic timing and failures for executor tests.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput};

/// Sleeps.
#[derive(Debug, Clone, Copy)]
pub struct TestSleep;

/// Input of TestSleep.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestSleepInput {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
    /// Progress reports to send while sleeping (default 0).
    #[serde(default)]
    pub ticks: u32,
    /// Fail with this message after sleeping.
    #[serde(default)]
    pub fail: Option<String>,
    /// Panic after sleeping (tests that a tool bug becomes an error result).
    #[serde(default)]
    pub panic: bool,
    /// Whether the call may run beside other safe calls (default true).
    #[serde(default = "yes")]
    pub safe: bool,
}

fn yes() -> bool {
    true
}

/// A progress report of TestSleep.
#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    /// Which tick (1-based).
    pub tick: u32,
    /// Of how many.
    pub of: u32,
}

impl crate::tool::ToolProgress for Tick {
    fn render(&self) -> String {
        format!("tick {}/{}", self.tick, self.of)
    }
}

impl Tool for TestSleep {
    type Input = TestSleepInput;
    type Output = String;

    const NAME: &'static str = "TestSleep";

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: false, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn description(&self) -> String {
        "Sleeps for a while (a test tool).".to_owned()
    }

    fn check_permissions(&self, _input: &TestSleepInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    fn is_concurrency_safe(&self, input: &TestSleepInput) -> bool {
        input.safe
    }

    async fn call(
        &self,
        input: TestSleepInput,
        ctx: ToolContext,
        progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        let steps = input.ticks.max(1);
        let step = Duration::from_millis(input.ms) / steps;
        for tick in 1..=steps {
            tokio::select! {
                _ = tokio::time::sleep(step) => {}
                _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
            }
            if input.ticks > 0 {
                progress.send(Tick { tick, of: input.ticks });
            }
        }
        if input.panic {
            panic!("TestSleep was asked to panic");
        }
        match input.fail {
            Some(message) => Err(ToolError::new(message)),
            None => Ok(ToolOutput::new(format!("slept {} ms", input.ms))),
        }
    }

    fn render_use(&self, input: &TestSleepInput) -> String {
        format!("Sleeping {} ms", input.ms)
    }

    fn render_result(&self, output: &String) -> String {
        output.clone()
    }
}
