//! The tool protocol: the `Tool` trait with its five elements —
//! name and aliases, input schema, permission layers, execution with a
//! context modifier, and render text — plus the type-erased form the
//! registry holds (`erased`), the registry (`registry`), and the per-session
//! filter pipeline with deferred discovery (`toolset`).
//!
//! Defaults are fail-closed, as in Claude Code's `buildTool`: a tool that says
//! nothing is not concurrency safe, not read-only, destructive, and asks
//! before it runs.

pub mod context;
pub mod erased;
pub mod input;
pub mod memo;
pub mod registry;
pub mod toolset;

use std::future::Future;

use agentd_protocol::tools::ContentBlock;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use context::{
    CallChannel, ContextModifier, MidCallAsk, NetworkNote, ProgressSink, SessionContext, ToolContext, ToolProgress,
};
pub use erased::{CallOutcome, DynTool, PreparedCall};
pub use registry::Registry;
pub use toolset::{DeferralSettings, ExternalToolSource, ToolSet};

use crate::permission::Decision;

/// What a tool does when the user interrupts the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptBehavior {
    /// Stop now.
    Cancel,
    /// Let it finish; its result is still worth having (e.g. a test suite).
    Block,
}

/// What the executor and the permission policy treat a tool as, whatever
/// its name: a tool declares it ([`Tool::KIND`]), so neither names a tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolKind {
    /// Nothing treated apart.
    #[default]
    Other,
    /// Reads the one file it names (Read): the session's own output and
    /// plan file are open to it.
    ReadsFile,
    /// Reads the files of a tree (Grep, Glob, LS): the session's own output
    /// is open to it.
    Searches,
    /// Changes the text of the one file it names (Edit, Write): protected
    /// files ask, and the session's plan file may be written in plan mode.
    EditsFile,
    /// Changes the one notebook it names (NotebookEdit): protected files
    /// ask; never the plan file.
    EditsNotebook,
    /// Asks the user (AskUserQuestion): only a person answers it, and the
    /// answers come with the approval.
    Question,
    /// Runs a shell command (Bash): it has [`Tool::shell_facts`], runs in a
    /// sandbox profile, and gets a line back to its session for what it
    /// asks while it runs (the network gate).
    Shell,
    /// Starts sub-agents (Task): it gets the session's agent host.
    Agents,
    /// Sends the user messages (Brief): it gets a way to send them.
    Messages,
    /// Reaches the daemon's other sessions (ListAgents, SendMessage): it
    /// gets the session's [`crate::peers::PeerBook`].
    Peers,
    /// Makes and lists the session's schedules (CronCreate, CronList,
    /// CronDelete): it gets the daemon's [`crate::schedule::Scheduler`].
    Schedules,
}

/// A call's input was legal JSON of the right shape but is not acceptable
/// (first permission layer, before any rule is consulted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    /// What is wrong, for the model to fix and retry.
    pub message: String,
}

impl ValidationError {
    /// A validation error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        ValidationError { message: message.into() }
    }
}

/// A tool failed while running. The model sees the message as an error
/// `tool_result`; it is data, not an RPC error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What failed, on what.
    pub message: String,
}

impl ToolError {
    /// A tool error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError { message: message.into() }
    }
}

/// What a successful call returns: its output and, optionally, a change to
/// the session applied after the call (in request order, by the executor).
pub struct ToolOutput<O> {
    /// The output.
    pub output: O,
    /// A change to the session's context, e.g. the file-state cache.
    pub modifier: Option<ContextModifier>,
}

impl<O> ToolOutput<O> {
    /// An output without a context modifier.
    pub fn new(output: O) -> Self {
        ToolOutput { output, modifier: None }
    }

    /// An output with a context modifier.
    pub fn with_modifier(output: O, modifier: ContextModifier) -> Self {
        ToolOutput { output, modifier: Some(modifier) }
    }
}

/// A tool. Implement this in one file under `tools/`, then add one line to
/// [`crate::tools::builtin_registry`].
pub trait Tool: Send + Sync + Sized + 'static {
    /// The input, as the model writes it. Its doc comments become the field
    /// descriptions of the input schema: write them for a model.
    type Input: DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static;
    /// The output. (What a tool reports while it runs is typed where it
    /// is sent: [`ToolProgress`].)
    type Output: Serialize + Send + 'static;

    // --- element one: name and aliases ---

    /// The tool's name, as the model calls it.
    const NAME: &'static str;

    /// What the executor and the permission policy treat this tool as.
    /// Default: nothing apart.
    const KIND: ToolKind = ToolKind::Other;

    /// May its calls run beside other concurrency-safe calls, whatever
    /// their input? Default: no ([`Tool::is_concurrency_safe`] says it per
    /// input when that depends on the input).
    const CONCURRENCY_SAFE: bool = false;

    /// Old names that still reach this tool after a rename.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    // --- element two: the input schema (generated from `Input`) ---

    /// What the tool does and when to use it, for the model.
    fn description(&self) -> String;

    // --- element three: permission layers and runtime properties ---

    /// First layer: is this input legal at all (before any rule)?
    fn validate_input(&self, _input: &Self::Input, _ctx: &ToolContext) -> Result<(), ValidationError> {
        Ok(())
    }

    /// Second layer: the tool's own view of whether the call may run. Rules
    /// and the session's mode are consulted around it by the permission
    /// pipeline. Default: ask.
    fn check_permissions(&self, _input: &Self::Input, _ctx: &ToolContext) -> Decision {
        Decision::ask(format!("{} wants to run", Self::NAME))
    }

    /// What permission rules look at in this call (its command, its path).
    fn permission_target(&self, _input: &Self::Input) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::None
    }

    /// The tool whose rules also judge this call, beside the tool's own
    /// (Monitor's command is judged by `Bash(…)` rules, its WebSocket by
    /// `WebFetch(domain:…)`): the stricter of the two answers holds, and
    /// the user's "always" answers are kept under that name.
    fn rule_family(&self, _input: &Self::Input) -> Option<&'static str> {
        None
    }

    /// The facts the permission policy decides a shell command on, from
    /// one parse of it (tools of [`ToolKind::Shell`] only).
    fn shell_facts(&self, _input: &Self::Input, _ctx: &ToolContext) -> Option<crate::permission::policy::BashFacts> {
        None
    }

    /// May this call run beside other concurrency-safe calls? Default:
    /// [`Tool::CONCURRENCY_SAFE`].
    fn is_concurrency_safe(&self, _input: &Self::Input) -> bool {
        Self::CONCURRENCY_SAFE
    }

    /// Does this call only read? Default: what [`Tool::hints`] says.
    fn is_read_only(&self, _input: &Self::Input) -> bool {
        self.hints().read_only
    }

    /// Could this call destroy something? Default: what [`Tool::hints`]
    /// says (unknown counts as yes).
    fn is_destructive(&self, _input: &Self::Input) -> bool {
        self.hints().destructive
    }

    /// What an interrupt does to a running call. Default: cancel it.
    fn interrupt_behavior(&self, _input: &Self::Input) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }

    /// Does a failed call of this tool cancel the other calls of its turn?
    /// Bash's does, as in Claude Code (its commands tend to depend on each
    /// other); other tools' failures are local. Default: no.
    fn cancels_siblings_on_failure(&self) -> bool {
        false
    }

    /// Is the tool available at all here (platform, configuration)?
    fn is_enabled(&self) -> bool {
        true
    }

    /// Never hide this tool behind ToolSearch.
    fn always_load(&self) -> bool {
        false
    }

    /// Is this a tool of an earlier Claude Code version (`LS`, `MultiEdit`)?
    /// Models trained on it still call it, so it runs when called, but it
    /// is never offered: not in `tools/list`, not found by ToolSearch.
    fn is_legacy(&self) -> bool {
        false
    }

    /// May this tool be hidden behind ToolSearch when a session has many
    /// tools? Core tools say no (the default); rarely used ones say yes.
    fn should_defer(&self) -> bool {
        false
    }

    /// Does this tool belong to external (MCP) tools, deferred like them
    /// (the MCP resource tools)? Default: no.
    fn is_external(&self) -> bool {
        false
    }

    /// What the tool does whatever its input (MCP tool annotations): the one
    /// place a tool says it only reads or may destroy. Default: fail-closed
    /// (may destroy).
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::FAIL_CLOSED;

    /// [`Tool::HINTS`], for a tool whose hints are not fixed (an MCP
    /// server's tool says them when it is listed).
    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        Self::HINTS
    }

    // --- element four: execution ---

    /// Runs the call. Reports progress through `progress`; returns the
    /// output and an optional context modifier.
    ///
    /// # Cancellation safety
    /// The future may be dropped at any await point when the call is
    /// cancelled (and `ctx.cancel` is cancelled first); a tool that starts
    /// work outside the future (a process) must end it when dropped.
    fn call(
        &self,
        input: Self::Input,
        ctx: ToolContext,
        progress: ProgressSink,
    ) -> impl Future<Output = Result<ToolOutput<Self::Output>, ToolError>> + Send;

    /// The `tool_result` content for an output. Default: the output as text
    /// (a string as it is, anything else as JSON).
    fn result_content(&self, output: &Self::Output) -> Vec<ContentBlock> {
        let value = serde_json::to_value(output).unwrap_or(serde_json::Value::Null);
        let text = match value {
            serde_json::Value::String(s) => s,
            other => serde_json::to_string_pretty(&other).unwrap_or_default(),
        };
        vec![ContentBlock::text(text)]
    }

    /// Fields a client reads without parsing the text (the result's
    /// `structured_content`). Default: none.
    fn structured(&self, _output: &Self::Output) -> Option<serde_json::Value> {
        None
    }

    // --- element five: render text for UIs ---

    /// One line while the call is queued or running, e.g. "Reading src/foo.rs".
    fn render_use(&self, input: &Self::Input) -> String;

    /// Short text for a finished call.
    fn render_result(&self, output: &Self::Output) -> String;

    /// Short text for a call the permission pipeline refused.
    fn render_rejected(&self, input: &Self::Input, reason: &str) -> String {
        format!("{} refused: {reason}", self.render_use(input))
    }

    /// Short text for a call that failed.
    fn render_error(&self, input: &Self::Input, error: &ToolError) -> String {
        format!("{} failed: {error}", self.render_use(input))
    }

    /// One line for several calls of this tool running side by side.
    fn render_grouped(&self, inputs: &[&Self::Input]) -> String {
        match inputs {
            [one] => self.render_use(one),
            many => format!("{} ×{}", Self::NAME, many.len()),
        }
    }
}
