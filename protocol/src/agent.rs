//! Sub-agents: the Task tool asks a client that runs models to run one in
//! a child session (an `agent/request` event), and the client answers
//! with `agent/respond`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Params of `agent/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRespondParams {
    /// The parent session (the one whose Task call asked).
    pub session_id: String,
    /// The `request_id` of the `agent/request` event being answered.
    pub request_id: String,
    /// What the sub-agent found: the Task tool's result for the model.
    pub result: String,
    /// The sub-agent failed: the result is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// Result of `agent/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AgentRespondResult {
    /// The request answered.
    pub request_id: String,
}

/// The capability a `turn/stream` subscriber declares when it runs
/// sub-agents (`capabilities: ["agents"]`); without one, the Task tool is
/// not offered.
pub const AGENTS_CAPABILITY: &str = "agents";
