//! MCP servers a session uses: how they are configured (Claude Code's
//! `mcpServers` entries) and how they stand.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The default `mcp_tool_timeout_ms`: ten minutes (Claude Code's
/// `MCP_TOOL_TIMEOUT`).
pub const DEFAULT_MCP_TOOL_TIMEOUT_MS: u64 = 600_000;

/// One `mcpServers` entry, in Claude Code's format. A stdio server:
/// `{"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}}` (`type`
/// `"stdio"` or absent). A streamable HTTP server: `{"type": "http", "url":
/// "https://…", "headers": {"Authorization": "Bearer ${TOKEN}"}}`.
/// `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env`,
/// `url` and `headers` from the daemon's environment. Fields of other
/// clients' formats (`timeout`, `oauth`, …) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerEntry {
    /// `stdio` (the default when `command` is given) or `http`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// The program to start (stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments (stdio).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for it (stdio), on top of a plain
    /// environment (PATH, HOME, locale; none of the daemon's secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its working directory (stdio); the session's workspace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The endpoint (http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request (http).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// OAuth client registered ahead with the server's authorization
    /// server (http; without it the client registers itself when the
    /// server allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<McpOAuthEntry>,
}

/// An entry's `oauth`: a client registered ahead (Claude Code's names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpOAuthEntry {
    /// The client's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Its secret, for a confidential client (`${VAR}` expanded, never
    /// shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The address of a Client ID Metadata Document describing agentd as
    /// a client (`https://`, with a path; hosted by the user): used as
    /// the client id with an authorization server that says it takes them
    /// (`client_id_metadata_document_supported`), in place of registering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
}

/// Where a server's entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpSource {
    /// `session/create`'s `mcp_servers`.
    Session,
    /// The workspace's `.mcp.json` (only when enabled).
    Project,
    /// The user's settings file (`mcpServers`).
    User,
}

/// How a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpServerState {
    /// Not running: started on the next call that needs it.
    Idle,
    /// Being started.
    Starting,
    /// Running and connected.
    Running,
    /// It failed to start, or died; `last_error` says how. The next call
    /// tries once more.
    Failed,
}

/// A session's MCP server as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerStatus {
    /// Its name (`mcp__<name>__<tool>`).
    pub name: String,
    /// Where its entry came from.
    pub source: McpSource,
    /// `stdio` or `http`.
    pub transport: String,
    /// Running, idle or failed.
    pub state: McpServerState,
    /// How many tools it offers (as last seen; 0 when never seen).
    pub tools: u32,
    /// What went wrong last, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Its OAuth authorization (HTTP servers that asked for one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<McpAuthState>,
}

/// Params of `mcp/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpListParams {}

/// One server of the daemon's pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpPoolServer {
    /// Its name.
    pub name: String,
    /// The workspace it serves.
    pub workspace: PathBuf,
    /// `stdio` or `http`.
    pub transport: String,
    /// Running, idle or failed.
    pub state: McpServerState,
    /// How many tools it offers (as last seen).
    pub tools: u32,
    /// How many open sessions use it.
    pub sessions: u32,
    /// The server process (stdio, while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How many times it was started.
    pub starts: u32,
    /// What went wrong last, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Its OAuth authorization (HTTP servers that asked for one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<McpAuthState>,
    /// The MCP revision agentd speaks with it (`2026-07-28`, or
    /// `2025-11-25` with a server of that revision), while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
}

/// An HTTP server's OAuth authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpAuthState {
    /// It answered 401 (or 403, more scope): a user must log in
    /// (`mcp/login`, `agentctl mcp login`).
    Required,
    /// Tokens are kept for it (refreshed when they expire).
    Authorized,
}

/// Params of `mcp/login`: starts an OAuth authorization of a session's
/// HTTP server (discovery, client registration when needed, PKCE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpLoginParams {
    /// The session.
    pub session_id: String,
    /// The server (its entry's name; an HTTP one).
    pub server: String,
    /// Where the user's browser is sent back: an `http://` address on the
    /// loopback interface with a port (`http://127.0.0.1:PORT/callback`),
    /// where the client listens.
    pub redirect_uri: String,
}

/// Result of `mcp/login`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpLoginResult {
    /// Give this to `mcp/login_complete` (valid 10 minutes, once).
    pub login_id: String,
    /// Open this in the user's browser.
    pub authorization_url: String,
}

/// Params of `mcp/login_complete`: the address the browser was sent back
/// to (with `code` and `state`); the daemon checks the state, exchanges
/// the code for tokens and keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpLoginCompleteParams {
    /// From `mcp/login`.
    pub login_id: String,
    /// The whole redirect address the browser was sent to.
    pub callback_url: String,
}

/// Result of `mcp/login_complete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpLoginCompleteResult {
    /// The server (its entry's name).
    pub server: String,
    /// The scopes granted, when the server said.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The server's state after starting again with its tokens.
    pub state: McpServerState,
    /// Why it did not start, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Params of `mcp/logout`: forgets a session's HTTP server's tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpLogoutParams {
    /// The session.
    pub session_id: String,
    /// The server (its entry's name).
    pub server: String,
}

/// Result of `mcp/logout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpLogoutResult {
    /// Whether tokens were kept for it.
    pub forgotten: bool,
}

/// Result of `mcp/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpListResult {
    /// Every server of the pool, by name then workspace.
    pub servers: Vec<McpPoolServer>,
}

/// A list of an MCP server's that it may say changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpList {
    /// Its tools (the session's tool list follows: `tools/changed`).
    Tools,
    /// Its resources.
    Resources,
    /// Its prompts.
    Prompts,
}

/// An MCP logging level (RFC 5424's, as MCP names them), least severe
/// first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpLogLevel {
    /// Debugging detail.
    Debug,
    /// Information.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning (the default: what a session sees unless it asks for more).
    #[default]
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The server is unusable.
    Emergency,
}

/// Params of `mcp/prompts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpPromptsParams {
    /// The session whose servers are asked.
    pub session_id: String,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpPromptArgument {
    /// Its name.
    pub name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether `mcp/get_prompt` must give it.
    #[serde(default)]
    pub required: bool,
}

/// A prompt an MCP server offers: in Claude Code, the slash command
/// `/mcp__<server>__<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpPrompt {
    /// The server (its entry's name).
    pub server: String,
    /// The prompt's name on that server.
    pub name: String,
    /// The slash command a harness can offer for it:
    /// `/mcp__<server>__<name>`.
    pub command: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Vec<McpPromptArgument>,
}

/// Result of `mcp/prompts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpPromptsResult {
    /// Every prompt of the session's servers that offer prompts.
    pub prompts: Vec<McpPrompt>,
    /// Servers that could not be asked, one line each.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// Params of `mcp/get_prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpGetPromptParams {
    /// The session.
    pub session_id: String,
    /// The server (its entry's name).
    pub server: String,
    /// The prompt's name on it.
    pub name: String,
    /// Its arguments, by name.
    #[serde(default)]
    pub arguments: BTreeMap<String, String>,
}

/// One message of a prompt, as the server gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpPromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// MCP content: `{"type": "text", "text": …}`, an image, audio, a
    /// resource link or an embedded resource.
    pub content: serde_json::Value,
}

/// Result of `mcp/get_prompt`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpGetPromptResult {
    /// The prompt's description, when the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its messages, in order.
    pub messages: Vec<McpPromptMessage>,
}

/// The capability a `turn/stream` subscriber declares when it answers MCP
/// servers' elicitations (`capabilities: ["elicitation"]`); while none is
/// attached, a server's elicitation is declined at once.
pub const ELICITATION_CAPABILITY: &str = "elicitation";

/// The capability a `turn/stream` subscriber declares when it answers MCP
/// servers' sampling requests (`capabilities: ["sampling"]`): the harness
/// asks the user, then calls its model. While none is attached, a
/// server's `sampling/createMessage` is refused at once.
pub const SAMPLING_CAPABILITY: &str = "sampling";

/// How a harness answered an `mcp/sampling` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpSamplingDecision {
    /// The user allowed it; `result` is the completion (or `error` why
    /// the model failed).
    Allow,
    /// As allow, and this server's later requests in the session do not
    /// need the user's approval (`needs_approval: false`).
    AllowAlways,
    /// The user refused: the server is told so.
    Deny,
}

/// Params of `mcp/sampling_respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpSamplingRespondParams {
    /// The session.
    pub session_id: String,
    /// The `mcp/sampling` event's `request_id`.
    pub request_id: String,
    /// The user's decision.
    pub decision: McpSamplingDecision,
    /// With allow: MCP's `CreateMessageResult`: `{role: "assistant",
    /// content: {type: "text", text} | {type: "image" | "audio", data,
    /// mimeType}, model, stopReason?}` (checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// With allow, instead of `result`: why no completion came (the
    /// server is told).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Result of `mcp/sampling_respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpSamplingRespondResult {
    /// The request answered.
    pub request_id: String,
}

/// How a user answered an elicitation (MCP's actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpElicitationAction {
    /// The user gave the values asked for (`content`).
    Accept,
    /// The user said no.
    Decline,
    /// The user dismissed it without choosing.
    Cancel,
}

/// Params of `mcp/elicitation_respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpElicitationRespondParams {
    /// The session.
    pub session_id: String,
    /// The `mcp/elicitation` event's `request_id`.
    pub request_id: String,
    /// The answer.
    pub action: McpElicitationAction,
    /// With `accept`: the values, by the requested schema's property
    /// names (strings, numbers, integers, booleans; checked against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Result of `mcp/elicitation_respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpElicitationRespondResult {
    /// The request answered.
    pub request_id: String,
}
