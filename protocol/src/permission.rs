//! Asking the client: `permission/request` events and `permission/respond`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A client's answer to a `permission/request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionDecision {
    /// Run this call.
    Allow,
    /// Refuse this call; the model sees the reason.
    Deny,
    /// Run this call and add a session allow rule (`rule`, or the request's
    /// first suggestion) so calls like it run without asking.
    AllowAlways,
}

/// Params of `permission/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionRespondParams {
    /// The session.
    pub session_id: String,
    /// The `request_id` of the `permission/request` event being answered.
    pub request_id: String,
    /// The answer.
    pub decision: PermissionDecision,
    /// For `allow_always`: the rule to add (Claude Code syntax, e.g.
    /// `Bash(npm test:*)`); the request's first suggestion when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// For `deny`: words for the model (why, or what to do instead).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "reason")]
    pub message: Option<String>,
    /// For AskUserQuestion: the user's answer to each question, keyed by
    /// the question's text; the chosen option's label (labels joined with
    /// ", " for a multi-select question) or the user's own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<std::collections::BTreeMap<String, String>>,
    /// For `deny`: no person was asked; the client refused on its own
    /// (nobody at a terminal, an MCP client that cannot ask). The call's
    /// result then says so, not that the user refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_user: bool,
}

/// Result of `permission/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRespondResult {
    /// The request answered.
    pub request_id: String,
    /// The rule added to the session (for `allow_always`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_added: Option<String>,
}
