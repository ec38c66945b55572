//! Hooks: the user's own programs (Claude Code's `hooks` settings), run at
//! points of a call's life, and hooks a client registers over the socket
//! (`hooks/register`), asked with `hook/request` events and answered with
//! `hook/respond`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When a hook runs (Claude Code's event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub enum HookEvent {
    /// After a call's input is valid, before the permission decision: may
    /// allow, deny, ask, or rewrite the input.
    PreToolUse,
    /// After a call succeeded: may add context or a reason for the model.
    PostToolUse,
    /// After a call failed: may add context for the model.
    PostToolUseFailure,
    /// Before the client is asked to approve a call: may answer for it.
    PermissionRequest,
    /// When agentd needs the user (a permission request).
    Notification,
    /// When a session is created or restored: may add context.
    SessionStart,
    /// When a session closes.
    SessionEnd,
    /// When the Task tool asks for a sub-agent: may add context for it.
    SubagentStart,
    /// When a sub-agent's answer comes back.
    SubagentStop,
    /// When a call is refused without anyone asked (a deny rule, the
    /// policy): may tell the model it can try again (`retry`).
    PermissionDenied,
    /// When TaskCreate makes a task: exit code 2 prevents it.
    TaskCreated,
    /// When TaskUpdate marks a task completed: exit code 2 prevents it.
    TaskCompleted,
    /// When the session's shell directory moved (a Bash `cd` that carries).
    CwdChanged,
    /// When an MCP server asks the user for input: may answer for them
    /// (`action`, `content`), exit code 2 declines.
    Elicitation,
    /// When the answer to an elicitation is known: may change it; exit
    /// code 2 declines.
    ElicitationResult,
    /// Once every call of a turn (one message's tool calls) has its
    /// result, before `turn/completed`: `tool_calls` with each call's
    /// input and response; may add context for the model once for the
    /// batch, or stop the harness's loop (exit code 2, `decision:
    /// "block"`, `continue: false`). Its matcher is ignored.
    PostToolBatch,
    /// Instead of `git worktree add` (EnterWorktree, Agent's `isolation:
    /// "worktree"`): makes a worktree named `name` and prints its path
    /// (a command's last line of output; `hookSpecificOutput.worktreePath`
    /// in JSON). Its matcher is ignored.
    WorktreeCreate,
    /// When agentd removes a worktree (`worktree_path`): a worktree a
    /// WorktreeCreate hook made is removed by these hooks alone. Its
    /// matcher is ignored.
    WorktreeRemove,
    /// When a file its matcher names (`.envrc|.env`: paths from the
    /// session's workspace, or absolute) appears, changes or goes
    /// (`file_path`, `event`: `add`, `change`, `unlink`); looked at once a
    /// second. Observed, not decided.
    FileChanged,
    /// When one of the session's settings files changes (`source`:
    /// `user_settings`, `project_settings`, `local_settings`; `file_path`),
    /// looked at once a second. Observed: agentd reads a session's
    /// settings when it opens, so the change counts for sessions opened
    /// after (a block changes nothing). Its matcher names sources.
    ConfigChange,
}

impl HookEvent {
    /// Every event, in the order above.
    pub const ALL: [HookEvent; 20] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::PermissionRequest,
        HookEvent::Notification,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::PermissionDenied,
        HookEvent::TaskCreated,
        HookEvent::TaskCompleted,
        HookEvent::CwdChanged,
        HookEvent::Elicitation,
        HookEvent::ElicitationResult,
        HookEvent::PostToolBatch,
        HookEvent::WorktreeCreate,
        HookEvent::WorktreeRemove,
        HookEvent::FileChanged,
        HookEvent::ConfigChange,
    ];

    /// The name as settings files and `hook_event_name` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::Notification => "Notification",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PermissionDenied => "PermissionDenied",
            HookEvent::TaskCreated => "TaskCreated",
            HookEvent::TaskCompleted => "TaskCompleted",
            HookEvent::CwdChanged => "CwdChanged",
            HookEvent::Elicitation => "Elicitation",
            HookEvent::ElicitationResult => "ElicitationResult",
            HookEvent::PostToolBatch => "PostToolBatch",
            HookEvent::WorktreeCreate => "WorktreeCreate",
            HookEvent::WorktreeRemove => "WorktreeRemove",
            HookEvent::FileChanged => "FileChanged",
            HookEvent::ConfigChange => "ConfigChange",
        }
    }

    /// Whether the event is about one tool call (its input has
    /// `tool_name` and `tool_input`; a hook's `if` can be checked).
    pub fn is_about_a_call(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
                | HookEvent::PermissionDenied
        )
    }

    /// Whether a hook's matcher chooses among this event's moments (a tool
    /// name, a notification type, …); Claude Code ignores the matcher of
    /// the others, and so does agentd.
    pub fn has_matcher(self) -> bool {
        !matches!(
            self,
            HookEvent::TaskCreated
                | HookEvent::TaskCompleted
                | HookEvent::CwdChanged
                | HookEvent::PostToolBatch
                | HookEvent::WorktreeCreate
                | HookEvent::WorktreeRemove
        )
    }

    /// The event named `name`, if agentd runs it.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

/// Params of `hooks/register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksRegisterParams {
    /// The session.
    pub session_id: String,
    /// When it runs.
    pub event: HookEvent,
    /// What it matches, as a settings file's `matcher` (a tool name,
    /// names joined by `|`, a regular expression; absent, empty or `*`:
    /// everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Seconds to wait for `hook/respond` (1 to 86400; default 600, as a
    /// command hook's); then the hook counts as a non-blocking error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What a failure counts for (Claude Code's `onFailure`): `continue`
    /// (the default: no answer in time, output that cannot be read, or this
    /// connection closing lets the call go on) or `block` (each of those
    /// blocks, as exit code 2 would: a guard that fails closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
}

/// A hook's `onFailure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Its failure is a non-blocking error.
    Continue,
    /// Its failure blocks.
    Block,
}

/// Result of `hooks/register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HooksRegisterResult {
    /// Pass this to `hooks/unregister`; `hook/request` events carry it.
    pub hook_id: String,
}

/// Params of `hooks/unregister`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksUnregisterParams {
    /// The session.
    pub session_id: String,
    /// What `hooks/register` returned.
    pub hook_id: String,
}

/// Result of `hooks/unregister`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HooksUnregisterResult {
    /// The hook removed.
    pub hook_id: String,
}

/// Params of `hook/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookRespondParams {
    /// The session.
    pub session_id: String,
    /// The `request_id` of the `hook/request` event being answered.
    pub request_id: String,
    /// What a command hook would print on stdout: its JSON output
    /// (`hookSpecificOutput`, `decision`, `continue`, `systemMessage`, …);
    /// `{}` lets the call go on as if the hook were not there.
    #[serde(default)]
    pub output: serde_json::Value,
}

/// Result of `hook/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookRespondResult {
    /// The request answered.
    pub request_id: String,
}

/// A hook in force in a session (`session/get`'s `hooks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookInfo {
    /// When it runs.
    pub event: HookEvent,
    /// Its matcher (empty: everything).
    pub matcher: String,
    /// The command it runs (`None` for a socket hook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For a socket hook: its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_id: Option<String>,
    /// Where it comes from: a settings file's path, `session` (`session/create`)
    /// or `socket` (`hooks/register`).
    pub source: String,
    /// Seconds it may take.
    pub timeout: u64,
}
