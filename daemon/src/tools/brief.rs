//! Brief: a message from the model for the user, shown outside the tool
//! results (a `user/message` event; `agentctl run` and `watch` print it).
//! The model uses it to report progress or a conclusion to the person,
//! not to itself.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// The tool's name (the executor gives it its message sink).
pub const NAME: &str = "Brief";
/// Longest message, in bytes.
const MAX_MESSAGE: usize = 20_000;

/// The Brief tool.
#[derive(Debug, Clone, Copy)]
pub struct Brief;

/// Input of Brief.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BriefInput {
    /// The message for the user, in Markdown
    pub message: String,
}

/// What Brief did.
#[derive(Debug, Clone, Serialize)]
pub struct BriefOutput {
    /// Whether a client was there to be sent it (the event is kept for
    /// replay either way).
    pub sent: bool,
}

impl Tool for Brief {
    type Input = BriefInput;
    type Output = BriefOutput;

    const NAME: &'static str = NAME;
    const CONCURRENCY_SAFE: bool = true;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Messages;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: false, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn description(&self) -> String {
        "Sends a short message to the user, shown apart from tool results: what you found, what you are \
         doing next, or a question you are not blocked on. Markdown."
            .to_owned()
    }

    fn validate_input(&self, input: &BriefInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.message.trim().is_empty() {
            return Err(ValidationError::new("the message is empty"));
        }
        if input.message.len() > MAX_MESSAGE {
            return Err(ValidationError::new(format!("the message is longer than {MAX_MESSAGE} bytes")));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &BriefInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: BriefInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<BriefOutput>, ToolError> {
        let sent = match ctx.services.get::<crate::tool::context::UserMessages>() {
            Some(send) => {
                send(input.message);
                true
            }
            None => false,
        };
        Ok(ToolOutput::new(BriefOutput { sent }))
    }

    fn result_content(&self, out: &BriefOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(if out.sent {
            "The message was sent to the user."
        } else {
            "The message could not be sent."
        })]
    }

    fn render_use(&self, input: &BriefInput) -> String {
        let first = input.message.lines().next().unwrap_or_default();
        format!("Message: {}", first.chars().take(80).collect::<String>())
    }

    fn render_result(&self, _out: &BriefOutput) -> String {
        "sent".to_owned()
    }
}
