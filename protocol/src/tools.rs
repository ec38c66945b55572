//! Tool definitions as a model API takes them, tool results as a model API
//! reads them, and the `tools/list` and `tool/call` methods.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One tool as a model API's `tools` field takes it (Anthropic's shape;
/// other APIs map 1:1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDefinition {
    /// The tool's name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What the tool does and when to use it, written for the model.
    pub description: String,
    /// JSON Schema (an object schema) of the tool's input.
    pub input_schema: serde_json::Value,
}

/// How a session hides tools behind ToolSearch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeferralMode {
    /// Defer deferrable tools once the session passes a threshold.
    #[default]
    Auto,
    /// Always defer deferrable tools.
    Always,
    /// Never defer: every tool is listed in full.
    Never,
}

/// Deferred discovery settings of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeferralOptions {
    /// `auto` (the default), `always` or `never`.
    #[serde(default)]
    pub mode: DeferralMode,
    /// In `auto` mode, defer when the session has more tools than this
    /// (default 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tools: Option<u32>,
    /// In `auto` mode, defer when all definitions together are estimated at
    /// more tokens than this (default 8000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// Params of `tools/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsListParams {
    /// The session whose tools to list.
    pub session_id: String,
    /// Also return each listed tool's behaviour hints (`hints`), as MCP's
    /// tool annotations want them, and its title and icons (`labels`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hints: bool,
}

impl ToolsListParams {
    /// `tools/list` of `session_id`, without hints.
    pub fn new(session_id: impl Into<String>) -> Self {
        ToolsListParams { session_id: session_id.into(), hints: false }
    }
}

/// What a tool does, whatever its input, as far as the tool knows (MCP's
/// tool annotations). Fail-closed: a tool that says nothing may destroy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolHints {
    /// It only reads (never changes its environment).
    pub read_only: bool,
    /// It may destroy or overwrite (meaningful when not read-only).
    pub destructive: bool,
    /// Calling it again with the same input has no further effect.
    pub idempotent: bool,
    /// It reaches beyond the machine (the network, other people).
    pub open_world: bool,
}

impl Default for ToolHints {
    fn default() -> Self {
        ToolHints::FAIL_CLOSED
    }
}

impl ToolHints {
    /// What a tool that says nothing may do: change and destroy.
    pub const FAIL_CLOSED: ToolHints =
        ToolHints { read_only: false, destructive: true, idempotent: false, open_world: false };
    /// A tool that only reads, locally.
    pub const READ_ONLY: ToolHints =
        ToolHints { read_only: true, destructive: false, idempotent: true, open_world: false };
    /// A tool that changes local state but destroys nothing (a task list,
    /// a worktree of its own).
    pub const ADDITIVE: ToolHints =
        ToolHints { read_only: false, destructive: false, idempotent: false, open_world: false };
}

/// Result of `tools/list`: ready for a model API's `tools` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolsListResult {
    /// Tools to send in full: sorted by name, then the deferred tools that
    /// ToolSearch has loaded since, in load order (so the prefix a prompt
    /// cache holds does not change).
    pub tools: Vec<ToolDefinition>,
    /// Tools listed by name only; the model loads them with ToolSearch.
    pub deferred: Vec<String>,
    /// Estimated tokens of `tools` (about 4 characters a token).
    pub estimated_tokens: u64,
    /// Estimated tokens the deferred definitions would have cost.
    pub deferred_tokens_saved: u64,
    /// Each tool of `tools`, by name: its behaviour hints (only when asked
    /// for with `hints: true`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hints: std::collections::BTreeMap<String, ToolHints>,
    /// Tools of `tools` whose server gave a title or icons, by name (only
    /// when asked for with `hints: true`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, ToolLabel>,
}

/// A block of a `tool_result`'s content, as model APIs read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Where the image data is.
        source: ImageSource,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// What an MCP server said of one block of a result beyond what a model
/// reads: the block as the server sent it without its text or data (those
/// are `content[index]`'s). Its `annotations` (`audience`, `priority`,
/// `lastModified`) and `_meta`; for a `resource_link` (whose `content` block
/// is a line of text) the link itself (`uri`, `name`, `title`,
/// `description`, `mimeType`, `size`, `icons`); for an embedded `resource`,
/// the resource's `uri` and `mimeType` (its text or blob is `content`'s
/// text or image). A block saved to a file (audio, a binary resource) is
/// a `text` block here. At most 64 KiB of them a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContentMeta {
    /// The block of `content` it describes.
    pub index: u32,
    /// The server's block, without its text or data.
    pub block: serde_json::Value,
}

/// How a client shows a tool beyond its name (MCP's `title` and `icons`),
/// as the tool's server gave them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolLabel {
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `Icon`s (`src`, `mimeType`, `sizes`, `theme`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<serde_json::Value>,
}

/// The data of an image block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ImageSource {
    /// Always `base64`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The image bytes, base64-encoded.
    pub data: String,
}

/// Params of `tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallParams {
    /// The session to run the call in.
    pub session_id: String,
    /// Tool name (or an alias).
    pub name: String,
    /// The tool's input, as the model wrote it.
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
    /// The call's `tool_use` id (unique in the session), so its events can
    /// be told apart and `turn/cancel` can name it; a fresh one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// Result of `tool/call`: a `tool_result` and how to show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallResult {
    /// The tool that ran (its canonical name, even when called by alias).
    pub name: String,
    /// The `tool_result` content for the model.
    pub content: Vec<ContentBlock>,
    /// True when the call failed or was refused; the model must see it.
    pub is_error: bool,
    /// Short text for a UI: what the call did or why it failed.
    pub render: String,
    /// One-line description of the call, as a UI shows it while it runs.
    pub render_use: String,
    /// The sandbox profile a Bash command ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::session::SandboxProfile>,
    /// The network a Bash command had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::session::NetworkAccess>,
    /// An MCP tool's `structuredContent`, checked against the tool's
    /// `outputSchema` when it declares one (its JSON is also the text
    /// content when the server sent no other). A built-in tool's
    /// structured fields, for clients to read without parsing the text:
    /// a Bash command's are Claude Code 2.1.332's names for them
    /// (`returnCodeInterpretation`, `staleReadFileStateHint`,
    /// `backgroundTaskId`, `backgroundOutputPath`, `timedOutAfterMs`,
    /// `persistedOutputPath`, `persistedOutputSize`), each only when it
    /// applies, and only on a result that is not an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<serde_json::Value>,
    /// An MCP tool's content blocks as their server described them, beyond
    /// what a model reads in `content` (a client that passes MCP results on
    /// rebuilds them from the two): only blocks that say more than their
    /// kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_meta: Vec<ContentMeta>,
    /// What the call changed in the workspace (Write, Edit, NotebookEdit,
    /// and a foreground Bash command behind its layer), in the order it
    /// changed it: the first 1,000 (`turn/diff` has all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<crate::changes::FileChange>,
    /// How many more changes the call made than `changes` lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes_omitted: Option<u64>,
}
