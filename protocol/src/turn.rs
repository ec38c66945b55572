//! Turns: the model's `tool_use` blocks submitted as they stream in, the
//! events that report on them, and cancellation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tools::ContentBlock;

/// One `tool_use` block, as the model API streams it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolUse {
    /// The block's id; its `tool_result` carries it back. Unique in the session.
    pub id: String,
    /// The tool's name (or an alias).
    pub name: String,
    /// The tool's input.
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// Params of `turn/submit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnSubmitParams {
    /// The session.
    pub session_id: String,
    /// The turn to add to; a new turn when absent (or when no turn has this id yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Blocks to run, in the order the model wrote them. Each starts as soon
    /// as it is allowed to, before the turn ends.
    #[serde(default)]
    pub tool_uses: Vec<ToolUse>,
    /// No more blocks come in this turn.
    #[serde(default)]
    pub end: bool,
}

/// Result of `turn/submit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnSubmitResult {
    /// The turn the blocks joined; pass it with the next blocks.
    pub turn_id: String,
}

/// Params of `turn/stream`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnStreamParams {
    /// The session whose events to stream.
    pub session_id: String,
    /// Replay the events after this `seq` first (a reconnecting client passes
    /// the last `seq` it saw); only new events when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
    /// Only events of these types (e.g. `["tool/progress"]`); every event
    /// when absent. `session/closed` always comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    /// What this subscriber does beside watching: `"agents"` — it runs
    /// sub-agents (answers `agent/request`), so the session offers the
    /// Task tool while it is subscribed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
}

/// Params of `turn/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnCancelParams {
    /// The session.
    pub session_id: String,
    /// Cancel this turn's calls (all turns when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Cancel only this call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
}

/// Result of `turn/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnCancelResult {
    /// Calls that were queued or running and are now cancelled.
    pub cancelled: Vec<String>,
}

/// Params of `turn/discard`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnDiscardParams {
    /// The session.
    pub session_id: String,
    /// The turn to discard.
    pub turn_id: String,
}

/// Result of `turn/discard`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnDiscardResult {
    /// Calls whose results will never be yielded.
    pub discarded: Vec<String>,
}

/// One event of a session's stream. `seq` grows by one per event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// Position in the session's event log.
    pub seq: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What an event reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum EventKind {
    /// A call was accepted and waits to run.
    #[serde(rename = "tool/queued")]
    ToolQueued {
        /// Its turn.
        turn_id: String,
        /// Its `tool_use` id.
        tool_use_id: String,
        /// The tool (canonical name).
        name: String,
        /// One line describing the call.
        render: String,
    },
    /// A call started running.
    #[serde(rename = "tool/started")]
    ToolStarted {
        /// Its turn.
        turn_id: String,
        /// Its `tool_use` id.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// One line describing the call.
        render: String,
    },
    /// A running call reported progress (sent at once, ahead of results).
    #[serde(rename = "tool/progress")]
    ToolProgress {
        /// Its turn.
        turn_id: String,
        /// Its `tool_use` id.
        tool_use_id: String,
        /// The tool's progress value.
        data: serde_json::Value,
        /// One line for a UI.
        render: String,
    },
    /// A call's `tool_result`, in request order within its turn (a turn's
    /// results never wait for another turn's).
    #[serde(rename = "tool/result")]
    ToolResult {
        /// Its turn.
        turn_id: String,
        /// The `tool_use` id this result answers.
        tool_use_id: String,
        /// The tool.
        name: String,
        /// The `tool_result` content for the model.
        content: Vec<ContentBlock>,
        /// The model must read it as a failure.
        is_error: bool,
        /// Short text for a UI.
        render: String,
        /// The sandbox profile a Bash command ran in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<crate::session::SandboxProfile>,
        /// The network a Bash command had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<crate::session::NetworkAccess>,
        /// An MCP tool's `structuredContent`, or a built-in tool's
        /// structured fields (see `tool/call`'s result).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured_content: Option<serde_json::Value>,
        /// An MCP tool's blocks as their server described them (see
        /// `tool/call`'s result).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        content_meta: Vec<crate::tools::ContentMeta>,
        /// What the call changed in the workspace (Write, Edit,
        /// NotebookEdit, and a foreground Bash command behind its layer), in
        /// the order it changed it: the first 1,000 (`turn/diff` has all).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<crate::changes::FileChange>,
        /// How many more changes the call made than `changes` lists.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changes_omitted: Option<u64>,
    },
    /// A call needs the user's approval before it runs. Answer with
    /// `permission/respond`; until then the call waits (calls behind an
    /// unsafe one wait too, other safe calls keep running). No answer within
    /// the session's `permission_timeout_ms`, or no client left on the
    /// stream, denies it.
    #[serde(rename = "permission/request")]
    PermissionRequest {
        /// Its turn.
        turn_id: String,
        /// The call's `tool_use` id.
        tool_use_id: String,
        /// Pass this to `permission/respond`.
        request_id: String,
        /// The tool (canonical name).
        tool: String,
        /// The call's input, as the model sent it.
        input: serde_json::Value,
        /// Why approval is needed (the rule or the tool's reason).
        reason: String,
        /// One line describing the call.
        render: String,
        /// Rules that `allow_always` would add, best first.
        suggestions: Vec<String>,
        /// What is asked for when it is not the call itself: `network` (a
        /// running command connects to a domain no rule covers; `host` and
        /// `port` say where).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        /// For `kind: network`: the host the command connects to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
        /// For `kind: network`: the port.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// For `kind: effects` (a command that ran unasked under
        /// `sandbox.auto_allow: "effects"`): what it changed, waiting for
        /// the answer (`allow` applies them, `deny` discards them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changes: Vec<crate::changes::FileChange>,
        /// For `kind: effects`: the changes as one unified diff (bounded
        /// per file; binaries as one line with their sizes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// A `permission/request` was answered (by a client, a timeout, or the
    /// last client leaving); UIs showing it can dismiss it.
    #[serde(rename = "permission/resolved")]
    PermissionResolved {
        /// Its turn.
        turn_id: String,
        /// The call's `tool_use` id.
        tool_use_id: String,
        /// The request.
        request_id: String,
        /// Whether the call may run.
        allowed: bool,
        /// Who decided, in words (`client: allow`, `timeout`, ...).
        reason: String,
    },
    /// The turn ended and all its results are out (after the session's
    /// PostToolBatch hooks, when it has any, have answered).
    #[serde(rename = "turn/completed")]
    TurnCompleted {
        /// The turn.
        turn_id: String,
        /// What PostToolBatch hooks added for the model, once for the
        /// whole batch (joined by blank lines): the harness puts it before
        /// its next request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        additional_context: Option<String>,
        /// A PostToolBatch hook asked the harness to stop its loop (exit
        /// code 2, `decision: "block"` or `continue: false`): why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<String>,
    },
    /// The turn was discarded: nothing more comes for it.
    #[serde(rename = "turn/discarded")]
    TurnDiscarded {
        /// The turn.
        turn_id: String,
    },
    /// The session's task list changed (TaskCreate, TaskUpdate): the
    /// whole list as it is now.
    #[serde(rename = "tasks/changed")]
    TasksChanged {
        /// The turn of the call that changed it.
        turn_id: String,
        /// The call that changed it.
        tool_use_id: String,
        /// The list.
        tasks: Vec<crate::session::TaskItem>,
    },
    /// The session moved into a worktree (EnterWorktree) or out of it
    /// (ExitWorktree): its working directory and workspace changed.
    #[serde(rename = "worktree/changed")]
    WorktreeChanged {
        /// The turn of the call that moved it.
        turn_id: String,
        /// The call that moved it.
        tool_use_id: String,
        /// The worktree the session is in now (`null`: none, back in its
        /// own directory).
        worktree: Option<crate::session::WorktreeInfo>,
    },
    /// The Task tool asks for a sub-agent: a client that runs agents runs
    /// the sub-agent's model on `child_session_id` (its calls go to that
    /// session) and answers with `agent/respond`.
    #[serde(rename = "agent/request")]
    AgentRequest {
        /// The turn of the Task call.
        turn_id: String,
        /// The Task call.
        tool_use_id: String,
        /// Pass this to `agent/respond`.
        request_id: String,
        /// The child session the sub-agent works in.
        child_session_id: String,
        /// The kind of sub-agent (`general-purpose`, or a definition's name).
        subagent_type: String,
        /// A few words on the task.
        description: String,
        /// The task, for the sub-agent's model.
        prompt: String,
        /// The sub-agent's instructions from its definition (its system
        /// prompt), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instructions: Option<String>,
        /// The tools the child session offers.
        tools: Vec<String>,
        /// The model the call (or the definition) asked for: `sonnet`,
        /// `opus`, `haiku`, `fable`, or `inherit` (the parent's); absent:
        /// the client's choice (as `inherit`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The reasoning effort the call asked for (`low` … `max`), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
    },
    /// A message for the user from the model (the Brief tool), to show as
    /// it is, outside the tool results.
    #[serde(rename = "user/message")]
    UserMessage {
        /// Its turn.
        turn_id: String,
        /// The call that sent it.
        tool_use_id: String,
        /// The message (Markdown).
        message: String,
    },
    /// A log message of one of the session's MCP servers
    /// (`notifications/message`), at or above the session's
    /// `mcp_log_level`. At most 20 a second per server reach sessions; the
    /// next one delivered counts those dropped.
    #[serde(rename = "mcp/log")]
    McpLog {
        /// The server (its entry's name).
        server: String,
        /// Its level.
        level: crate::mcp::McpLogLevel,
        /// The logger's name, when the server gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        /// What the server logged (any JSON; cut to a string of 4,000
        /// characters when larger).
        data: serde_json::Value,
        /// Messages of this server dropped since the last one delivered
        /// (over the rate).
        #[serde(default, skip_serializing_if = "is_zero")]
        dropped: u64,
    },
    /// An MCP server asks the user for values (`elicitation/create`) during
    /// a call of this session: answer with `mcp/elicitation_respond`. Sent
    /// only while a `turn/stream` subscriber declares `capabilities:
    /// ["elicitation"]`; unanswered within the session's
    /// `permission_timeout_ms`, it is declined.
    #[serde(rename = "mcp/elicitation")]
    McpElicitation {
        /// Answer with this.
        request_id: String,
        /// The server (its entry's name).
        server: String,
        /// What the server says it needs.
        message: String,
        /// The values asked for: a flat JSON Schema object whose properties
        /// are strings (maybe an `enum`), numbers, integers or booleans;
        /// `null` when the server sends the user to `url` instead.
        requested_schema: serde_json::Value,
        /// The call in flight on that server, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
        /// URL mode (MCP 2025-11-25): the server's page the user is sent
        /// to (a login, a payment: what should not pass through agentd),
        /// `https://` or `http://` on the loopback interface. Show it,
        /// and open it only if the user agrees; `accept` says they did
        /// (no `content`), `decline` or `cancel` that they did not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// The server's id of a URL-mode request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elicitation_id: Option<String>,
    },
    /// An MCP server asks for a completion (`sampling/createMessage`)
    /// during a call of this session: the harness asks the user (unless
    /// `needs_approval` is false: allowed always for this server), calls
    /// its model and answers with `mcp/sampling_respond`. Sent only while a
    /// `turn/stream` subscriber declares `capabilities: ["sampling"]`;
    /// unanswered within the session's `permission_timeout_ms`, the server
    /// is told no completion came.
    #[serde(rename = "mcp/sampling")]
    McpSampling {
        /// Answer with this.
        request_id: String,
        /// The server (its entry's name).
        server: String,
        /// MCP's `CreateMessageRequest` params as the server sent them:
        /// `messages`, `maxTokens`, `systemPrompt`, `temperature`,
        /// `stopSequences`, `modelPreferences`, `metadata`.
        request: serde_json::Value,
        /// Whether the user must approve it (false once allowed always).
        needs_approval: bool,
    },
    /// The session's tools changed: an MCP server said its tool list
    /// changed (`notifications/tools/list_changed`) and the list read again
    /// differs. `tools/list` (and ToolSearch) give the new list; a deferred
    /// tool the session loaded and the server removed is gone from it.
    /// Servers are read again at most once a second.
    #[serde(rename = "tools/changed")]
    ToolsChanged {
        /// The server (its entry's name).
        server: String,
        /// Full names of the tools it added (`mcp__server__tool`), sorted.
        added: Vec<String>,
        /// Full names of the tools it removed, sorted.
        removed: Vec<String>,
        /// Full names of the tools it kept whose definition changed, sorted.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed: Vec<String>,
    },
    /// A schedule of the session fired (CronCreate): its prompt, for the
    /// harness to hand to its model.
    #[serde(rename = "cron/fired")]
    CronFired {
        /// The schedule (what CronDelete takes).
        cron_id: String,
        /// What to enqueue.
        prompt: String,
        /// The time it was due (RFC 3339, local time).
        scheduled_at: String,
        /// When it fired.
        fired_at: String,
        /// It fired late: the daemon was down (a firing missed meanwhile
        /// fires once, when the daemon is back).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        missed: bool,
    },
    /// A watch of the session (its Monitor tool) saw something: lines its
    /// command wrote to standard output (those within 200 ms are one
    /// event), a frame of its WebSocket, or it ended (`ended`). `text` is
    /// what the model is given, as Claude Code 2.1.332 gives it (a
    /// `<task-notification>`; wrap it as the harness wraps notices). A line
    /// is cut at 500 characters and an event at 3,000; a watch sends at
    /// most 10 events at once and one more each 2 s: what comes meanwhile
    /// is counted in the next event's `dropped` (and said in its text), and
    /// a watch held back for 30 s is stopped. Everything is kept whole in
    /// the job's output file.
    #[serde(rename = "monitor/event")]
    MonitorEvent {
        /// The watch's background task (what TaskStop takes).
        task_id: String,
        /// What it watches, in the model's words.
        description: String,
        /// For the model.
        text: String,
        /// Events left out since the last one sent (over the rate).
        #[serde(default, skip_serializing_if = "is_zero")]
        dropped: u64,
        /// Set on its last event: `exited`, `timed_out` or `stopped`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended: Option<String>,
    },
    /// A background task of the session ended: a Bash job
    /// (`run_in_background`, or a command moved there at its timeout) or a
    /// sub-agent run in the background. `text` is Claude Code 2.1.332's
    /// `<task-notification>` for the model (a sub-agent's result in
    /// `<result>`): hand it over as the harness hands over notices.
    /// (Monitor's watches say their end in `monitor/event`.)
    #[serde(rename = "task/notification")]
    TaskNotification {
        /// The task (its job id).
        task_id: String,
        /// `local_bash` or `local_agent`.
        task_type: String,
        /// `completed`, `failed` or `killed`.
        status: String,
        /// One line on how it ended.
        summary: String,
        /// For the model.
        text: String,
    },
    /// Another session of the daemon sent this one a message (its
    /// SendMessage tool): for the harness to hand to its model.
    #[serde(rename = "message/received")]
    MessageReceived {
        /// The sender's session id.
        from: String,
        /// The sender's name, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_name: Option<String>,
        /// The sender's few words on it, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// The message.
        message: String,
    },
    /// A session this one asked about (SendMessage `notify_when_idle`)
    /// finished its turn, or closed: sent once.
    #[serde(rename = "session/idle")]
    SessionIdle {
        /// That session's id.
        session_id: String,
        /// Its name, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// It closed rather than finished a turn.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        closed: bool,
    },
    /// The session does not obey some of its workspace's project files
    /// (settings, `.mcp.json`, skills, agent definitions): the user has not
    /// approved their present content. Approve them with `workspace/trust`
    /// (`agentctl trust`); sessions created after obey them.
    #[serde(rename = "trust/required")]
    TrustRequired {
        /// The files, each new or changed.
        files: Vec<crate::workspace::ProjectFile>,
    },
    /// An HTTP MCP server of the session needs an OAuth authorization: it
    /// answered 401 (or 403 for more scope). Log in with `mcp/login`
    /// (`agentctl mcp login SERVER`); until then its tools fail with this
    /// message.
    #[serde(rename = "mcp/auth_required")]
    McpAuthRequired {
        /// The server (its entry's name).
        server: String,
        /// What it said, and what to do.
        message: String,
    },
    /// An MCP server of the session said its resources or prompts changed
    /// (`notifications/resources/list_changed`,
    /// `notifications/prompts/list_changed`): ask again
    /// (`ListMcpResources`, `mcp/prompts`). At most one a second per server
    /// and list.
    #[serde(rename = "mcp/list_changed")]
    McpListChanged {
        /// The server (its entry's name).
        server: String,
        /// Which list: `resources` or `prompts`.
        list: crate::mcp::McpList,
    },
    /// A confined command's connection through the network gate, when it
    /// was refused or when it ended (at most 256 per call; the result
    /// counts the rest).
    #[serde(rename = "sandbox/network")]
    SandboxNetwork {
        /// The Bash call's turn.
        turn_id: String,
        /// The Bash call (or the job's call).
        tool_use_id: String,
        /// The host asked for (a domain, or an address).
        host: String,
        /// The port.
        port: u16,
        /// Whether it was let through.
        allowed: bool,
        /// What decided (the rule, `asked: allow`, `bypass mode`, or why it
        /// was refused).
        rule: String,
        /// Bytes the command sent.
        bytes_up: u64,
        /// Bytes it received.
        bytes_down: u64,
    },
    /// A hook a client registered (`hooks/register`) is asked about a
    /// moment it matches; answer with `hook/respond` (its output is what a
    /// command hook would print). Until then the call waits; no answer
    /// within the hook's timeout, or the registering client leaving, lets
    /// it go on as if the hook were not there.
    #[serde(rename = "hook/request")]
    HookRequest {
        /// The call's turn (absent for session moments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        /// The call (absent for session moments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
        /// Pass this to `hook/respond`.
        request_id: String,
        /// The hook asked (what `hooks/register` returned).
        hook_id: String,
        /// The moment.
        event: crate::hooks::HookEvent,
        /// The tool, for tool moments.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_name: Option<String>,
        /// What a command hook gets on stdin (`hook_event_name`,
        /// `tool_input`, `tool_response`, …).
        input: serde_json::Value,
    },
    /// A command hook started (a socket hook's start is its `hook/request`).
    #[serde(rename = "hook/started")]
    HookStarted {
        /// The call's turn (absent for session moments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        /// The call (absent for session moments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
        /// The moment.
        event: crate::hooks::HookEvent,
        /// The hook: its command, or `socket <hook_id>`.
        hook: String,
    },
    /// A hook ended, and what it decided.
    #[serde(rename = "hook/completed")]
    HookCompleted {
        /// The call's turn (absent for session moments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
        /// The call (absent for session moments).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
        /// The moment.
        event: crate::hooks::HookEvent,
        /// The hook: its command, or `socket <hook_id>`.
        hook: String,
        /// How long it took.
        duration_ms: u64,
        /// How it ended: `success`, `blocking` (exit code 2), `error` (another
        /// exit code, or output that is not JSON), `timeout`, `cancelled`, or
        /// `gone` (the client that registered it left).
        outcome: String,
        /// What it decided, if anything: `allow`, `deny`, `ask`, `block`,
        /// `stop` (`continue: false`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<String>,
        /// Its reason, or the error (stderr, cut), for the user.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Its `systemMessage`, for the user.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_message: Option<String>,
        /// Context it added for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        additional_context: Option<String>,
    },
    /// The session closed; the stream ends after this event.
    #[serde(rename = "session/closed")]
    SessionClosed {},
}

/// When a failed call cancels its siblings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SiblingCancel {
    /// A failing Bash call cancels the other calls of its turn (as in Claude Code).
    #[default]
    BashFailure,
    /// Failures never cancel other calls.
    Never,
}

impl EventKind {
    /// `turn/completed` of `turn_id`, with nothing from PostToolBatch hooks.
    pub fn turn_completed(turn_id: impl Into<String>) -> EventKind {
        EventKind::TurnCompleted { turn_id: turn_id.into(), additional_context: None, stop_reason: None }
    }

    /// The event's `type` on the wire (`tool/result`, …).
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::ToolQueued { .. } => "tool/queued",
            EventKind::ToolStarted { .. } => "tool/started",
            EventKind::ToolProgress { .. } => "tool/progress",
            EventKind::ToolResult { .. } => "tool/result",
            EventKind::PermissionRequest { .. } => "permission/request",
            EventKind::PermissionResolved { .. } => "permission/resolved",
            EventKind::TurnCompleted { .. } => "turn/completed",
            EventKind::TurnDiscarded { .. } => "turn/discarded",
            EventKind::TasksChanged { .. } => "tasks/changed",
            EventKind::WorktreeChanged { .. } => "worktree/changed",
            EventKind::UserMessage { .. } => "user/message",
            EventKind::AgentRequest { .. } => "agent/request",
            EventKind::SandboxNetwork { .. } => "sandbox/network",
            EventKind::McpLog { .. } => "mcp/log",
            EventKind::ToolsChanged { .. } => "tools/changed",
            EventKind::McpListChanged { .. } => "mcp/list_changed",
            EventKind::McpAuthRequired { .. } => "mcp/auth_required",
            EventKind::TrustRequired { .. } => "trust/required",
            EventKind::MessageReceived { .. } => "message/received",
            EventKind::CronFired { .. } => "cron/fired",
            EventKind::MonitorEvent { .. } => "monitor/event",
            EventKind::TaskNotification { .. } => "task/notification",
            EventKind::SessionIdle { .. } => "session/idle",
            EventKind::McpElicitation { .. } => "mcp/elicitation",
            EventKind::McpSampling { .. } => "mcp/sampling",
            EventKind::HookRequest { .. } => "hook/request",
            EventKind::HookStarted { .. } => "hook/started",
            EventKind::HookCompleted { .. } => "hook/completed",
            EventKind::SessionClosed {} => "session/closed",
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
