//! Method names and their params/result types, one type per method.
//!
//! Names follow `noun/verb` like LSP and MCP. This is the contract clients and
//! editor plugins are written against: extend, never rename.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::session::{
    SessionCloseResult, SessionCreateParams, SessionCreateResult, SessionIdParams, SessionInfo, SessionListParams,
    SessionListResult,
};

/// A JSON-RPC method: its wire name and the types of its params and result.
pub trait Method {
    /// The method name on the wire.
    const NAME: &'static str;
    /// The params object (always passed by name).
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// The `result` member of a successful response.
    type Result: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// What the method does (its doc comment), for generated documentation.
    const DOC: &'static str = "";
}

macro_rules! method {
    ($(#[doc = $doc:literal])* $ty:ident, $name:literal, $params:ty => $result:ty) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            type Params = $params;
            type Result = $result;
            const DOC: &'static str = concat!($($doc, "\n"),*);
        }
    };
}

/// Something that wants every request method of the protocol with its types.
pub trait MethodVisitor {
    /// Called once per method, in [`METHOD_NAMES`] order.
    fn visit<M: Method>(&mut self);
}

macro_rules! method_list {
    ($($ty:ident),* $(,)?) => {
        /// Calls `visitor` for every request method of the protocol. This is
        /// the one list: the JSON Schema and `docs/protocol.md` are generated
        /// from it, and a test checks the daemon serves exactly these (plus
        /// the `turn/stream` subscription).
        pub fn visit_methods(visitor: &mut impl MethodVisitor) {
            $( visitor.visit::<$ty>(); )*
        }

        /// The wire names of the request methods, in [`visit_methods`] order.
        pub const METHOD_NAMES: &[&str] = &[$( <$ty as Method>::NAME ),*];
    };
}

method_list!(
    DaemonInfo,
    DaemonActivity,
    SessionCreate,
    SessionList,
    SessionGet,
    SessionClose,
    ToolsList,
    ToolCall,
    TurnSubmit,
    TurnCancel,
    TurnDiscard,
    PermissionRespond,
    AgentRespond,
    HooksRegister,
    HooksUnregister,
    HookRespond,
    McpList,
    McpPrompts,
    McpGetPrompt,
    McpElicitationRespond,
    WorkspaceFiles,
    WorkspaceRead,
    SkillsList,
    WorkspaceTrust,
    CronList,
    CronDelete,
    McpSamplingRespond,
    McpLogin,
    McpLoginComplete,
    McpLogout,
    TurnDiff,
    TurnRewind,
);

method!(
    /// `daemon/info`: version, protocol version, uptime and counts.
    DaemonInfo, "daemon/info", DaemonInfoParams => DaemonInfoResult
);
method!(
    /// `daemon/activity`: what every session is doing now — its calls
    /// queued and running, background jobs, schedules and questions
    /// waiting for an answer, with ages — across harnesses and clients.
    DaemonActivity, "daemon/activity", DaemonActivityParams => DaemonActivityResult
);
method!(
    /// `session/create`: open a session on a workspace.
    SessionCreate, "session/create", SessionCreateParams => SessionCreateResult
);
method!(
    /// `session/list`: every open session.
    SessionList, "session/list", SessionListParams => SessionListResult
);
method!(
    /// `session/get`: one session.
    SessionGet, "session/get", SessionIdParams => SessionInfo
);
method!(
    /// `session/close`: end a session and cancel everything it runs.
    SessionClose, "session/close", SessionIdParams => SessionCloseResult
);

method!(
    /// `tools/list`: the session's tools, ready for a model API.
    ToolsList, "tools/list", crate::tools::ToolsListParams => crate::tools::ToolsListResult
);
method!(
    /// `tool/call`: run one tool call in a session.
    ToolCall, "tool/call", crate::tools::ToolCallParams => crate::tools::ToolCallResult
);

method!(
    /// `turn/submit`: add `tool_use` blocks to a turn; they start at once.
    TurnSubmit, "turn/submit", crate::turn::TurnSubmitParams => crate::turn::TurnSubmitResult
);
method!(
    /// `turn/cancel`: cancel one call, one turn, or everything in the session.
    TurnCancel, "turn/cancel", crate::turn::TurnCancelParams => crate::turn::TurnCancelResult
);
method!(
    /// `turn/discard`: drop a turn's queued and running calls; nothing more is yielded for them.
    TurnDiscard, "turn/discard", crate::turn::TurnDiscardParams => crate::turn::TurnDiscardResult
);
method!(
    /// `turn/diff`: every change a turn's file tools made to the workspace,
    /// as a list and one unified diff.
    TurnDiff, "turn/diff", crate::changes::TurnDiffParams => crate::changes::TurnDiffResult
);
method!(
    /// `turn/rewind`: restore the workspace to before a turn (or a call),
    /// undoing it and everything after it; a file changed since by
    /// something else is a conflict, left alone unless `force`.
    TurnRewind, "turn/rewind", crate::changes::TurnRewindParams => crate::changes::TurnRewindResult
);

method!(
    /// `permission/respond`: answer a `permission/request` event.
    PermissionRespond, "permission/respond",
    crate::permission::PermissionRespondParams => crate::permission::PermissionRespondResult
);

method!(
    /// `agent/respond`: answer an `agent/request` event with what the
    /// sub-agent found (the Task call's result).
    AgentRespond, "agent/respond",
    crate::agent::AgentRespondParams => crate::agent::AgentRespondResult
);

method!(
    /// `hooks/register`: a hook of the client's own on a session; matching
    /// moments send it a `hook/request` event, answered with `hook/respond`.
    /// It is removed when the connection that registered it closes.
    HooksRegister, "hooks/register",
    crate::hooks::HooksRegisterParams => crate::hooks::HooksRegisterResult
);

method!(
    /// `hooks/unregister`: remove a hook `hooks/register` added.
    HooksUnregister, "hooks/unregister",
    crate::hooks::HooksUnregisterParams => crate::hooks::HooksUnregisterResult
);

method!(
    /// `hook/respond`: answer a `hook/request` event with the hook's output.
    HookRespond, "hook/respond",
    crate::hooks::HookRespondParams => crate::hooks::HookRespondResult
);

method!(
    /// `mcp/sampling_respond`: answers an `mcp/sampling` event (a server
    /// asking for a completion during a call): the user's decision, and
    /// with allow the harness's model's completion.
    McpSamplingRespond, "mcp/sampling_respond",
    crate::mcp::McpSamplingRespondParams => crate::mcp::McpSamplingRespondResult
);

method!(
    /// `workspace/files`: the workspace's files the session may Read
    /// unasked, a page at a time (what `agentctl mcp` lists as resources).
    WorkspaceFiles, "workspace/files",
    crate::workspace::WorkspaceFilesParams => crate::workspace::WorkspaceFilesResult
);

method!(
    /// `workspace/read`: one file's content, through the same checks as a
    /// Read call that would run unasked (refused otherwise).
    WorkspaceRead, "workspace/read",
    crate::workspace::WorkspaceReadParams => crate::workspace::WorkspaceReadResult
);

method!(
    /// `skills/list`: the session's skills (what `agentctl mcp` serves as
    /// prompts).
    SkillsList, "skills/list",
    crate::workspace::SkillsListParams => crate::workspace::SkillsListResult
);

method!(
    /// `cron/list`: the session's schedules (CronCreate's), soonest first.
    CronList, "cron/list",
    crate::schedule::CronListParams => crate::schedule::CronListResult
);

method!(
    /// `cron/delete`: removes one of the session's schedules.
    CronDelete, "cron/delete",
    crate::schedule::CronDeleteParams => crate::schedule::CronDeleteResult
);

method!(
    /// `workspace/trust`: the files inside a workspace that agentd obeys
    /// only once the user approved their content (settings, `.mcp.json`,
    /// skills, agent definitions), each with its standing; with `approve`
    /// or `revoke`, records the user's answer first. Sessions created
    /// after obey what is approved.
    WorkspaceTrust, "workspace/trust",
    crate::workspace::WorkspaceTrustParams => crate::workspace::WorkspaceTrustResult
);

/// `daemon/watch`: a subscription of `daemon/activity` (params: none). The
/// subscribe call answers with a subscription id; a
/// [`DaemonActivityResult`] arrives at once as a notification of method
/// [`DAEMON_ACTIVITY_EVENT`], then again whenever any session's work
/// changes (an event in any session's log, a session opened or closed; a
/// burst is sent once, within 200 ms). `daemon/unwatch` with the id ends it.
pub const DAEMON_WATCH: &str = "daemon/watch";
/// Notification method of `daemon/watch`.
pub const DAEMON_ACTIVITY_EVENT: &str = "daemon/activity_event";
/// Unsubscribe method of `daemon/watch`.
pub const DAEMON_UNWATCH: &str = "daemon/unwatch";

/// `turn/stream`: a subscription of the session's events. The subscribe
/// call answers with a subscription id (a string); events arrive as
/// notifications of method [`TURN_EVENT`] whose `params.result` is an
/// [`crate::turn::Event`]. `turn/unstream` with the id ends it.
pub const TURN_STREAM: &str = "turn/stream";
/// Notification method of `turn/stream` events.
pub const TURN_EVENT: &str = "turn/event";
/// Unsubscribe method of `turn/stream`.
pub const TURN_UNSTREAM: &str = "turn/unstream";

/// Params of `daemon/info` (none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DaemonInfoParams {}

/// Result of `daemon/info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct DaemonInfoResult {
    /// The daemon's version (its crate version).
    pub version: String,
    /// [`crate::PROTOCOL_VERSION`] of the daemon.
    pub protocol_version: u32,
    /// The daemon's process id.
    pub pid: u32,
    /// Milliseconds since the daemon started.
    pub uptime_ms: u64,
    /// Path of the socket it serves, when it is known.
    pub socket: Option<String>,
    /// Whether the socket came from systemd socket activation.
    pub socket_activated: bool,
    /// Directory of the daemon's persistent state.
    pub state_dir: String,
    /// Open sessions.
    pub sessions: u64,
    /// Client connections open now.
    pub connections: u64,
    /// Connections accepted since start.
    pub connections_total: u64,
    /// Daemon tasks alive now (connections, requests, tool calls).
    pub tasks: u64,
    /// Optional cargo features this build carries (e.g. `test-tools`, which
    /// a release build never should).
    pub features: Vec<String>,
    /// What the kernel sandbox around Bash commands can do here.
    #[serde(default)]
    pub sandbox: SandboxStatus,
    /// Bytes the session store takes in `state_dir` (0 when the daemon
    /// keeps nothing across restarts).
    #[serde(default)]
    pub store_bytes: u64,
    /// The address of the daemon's TLS face (`--listen-tls`, mutual TLS),
    /// when it has one.
    #[serde(default)]
    pub listen_tls: Option<String>,
    /// Things the user may not expect, in a sentence each: e.g.
    /// `~/.claude/settings.json` exists but is not read (no
    /// `"importClaudeSettings": true` in agentd's own settings file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// `daemon/info`'s `sandbox`: what was found when the daemon started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct SandboxStatus {
    /// Whether commands can be confined (Landlock and seccomp work and the
    /// helper executable was found). When false, commands that would run
    /// without asking in the read-only profile ask instead.
    pub available: bool,
    /// Why not, when not available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The kernel's Landlock ABI version (0: none).
    pub landlock_abi: u32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    /// Whether each call gets its own user, PID and mount namespaces (the
    /// kernel then ends all of a call's processes with it).
    pub pid_namespaces: bool,
    /// The helper executable that applies the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper: Option<String>,
    /// Each wall of the sandbox and whether this kernel lets it stand.
    #[serde(default)]
    pub walls: Vec<SandboxWall>,
    /// The user's settings say `sandbox.network.allowAll`: sessions with
    /// `network: true` give commands the whole network, ungated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network_allow_all: bool,
    /// How whole the sandbox is: `full` (every wall stands), `partial`
    /// (some wall is missing: `walls` says which; what would run unasked
    /// and needs it asks), `none` (nothing is confined).
    #[serde(default)]
    pub level: SandboxLevel,
    /// The helpers started ahead of their calls (absent without a helper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_helpers: Option<WarmHelpers>,
    /// The limit on a confined call's processes.
    #[serde(default)]
    pub processes: ProcessLimit,
    /// The limit on a confined call's inotify instances and watches.
    #[serde(default)]
    pub inotify: InotifyLimit,
    /// The limit on a call's memory (opt-in: `agentd --call-memory-limit`).
    #[serde(default)]
    pub memory: MemoryLimit,
}

/// How much memory one call's processes may use together: a cgroup of the
/// call's own, where the daemon can make one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct MemoryLimit {
    /// The limit in bytes; `null` when none was asked for.
    pub per_call_bytes: Option<u64>,
    /// Whether the kernel holds calls to it: a process of a call past it
    /// is killed, and the call's result says so.
    pub enforced: bool,
    /// Why a limit asked for is not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How many inotify instances and watches one confined call may have at
/// once: the counts of its own user namespace, which the kernel checks
/// beside the user's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct InotifyLimit {
    /// Instances: half of the user's (`fs.inotify.max_user_instances`).
    pub instances_per_call: u64,
    /// Watches: half of the user's (`fs.inotify.max_user_watches`).
    pub watches_per_call: u64,
    /// Whether the kernel holds calls to it (the calls' user namespaces,
    /// and a kernel that counts per namespace).
    pub enforced: bool,
}

/// How many processes (threads included) one confined call may have at
/// once: its `RLIMIT_NPROC` in its own user namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct ProcessLimit {
    /// The limit: half the daemon user's own `RLIMIT_NPROC`, at most 4,096.
    pub per_call: u64,
    /// Whether the kernel holds calls to it: in the calls' user
    /// namespaces (not root: the kernel does not hold root to
    /// `RLIMIT_NPROC`), or by a cgroup per call (`pids.max`; root too).
    pub enforced: bool,
}

/// The sandbox helpers started ahead of their calls: at most one waits at
/// a time; each serves one call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct WarmHelpers {
    /// Helpers waiting now (0 or 1).
    pub waiting: u32,
    /// The resident memory of the waiting helper, in KiB.
    pub waiting_rss_kib: u64,
    /// Helpers started since the daemon started.
    pub started: u64,
    /// Calls that found none waiting and started their own.
    pub cold_starts: u64,
    /// The zygote that forks the helpers; `null` while none runs (before
    /// the first call, or where it cannot: helpers are then spawned one by
    /// one).
    #[serde(default)]
    pub zygote: Option<ZygoteStatus>,
}

/// The sandbox zygote: one small process that forks each helper, so a
/// call's helper costs a `fork`, not an `exec`. It never sees a call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct ZygoteStatus {
    /// Its pid.
    pub pid: u32,
    /// Its resident memory, in KiB (it keeps nothing per call: this does
    /// not grow with calls).
    pub rss_kib: u64,
    /// Zygotes started since the daemon started (more than one: one died
    /// and was replaced).
    pub starts: u64,
    /// Helpers forked.
    pub forks: u64,
}

/// How whole the sandbox is (`daemon/info`'s `sandbox.level`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxLevel {
    /// Every wall stands.
    Full,
    /// Commands are confined, but some wall is missing.
    Partial,
    /// Nothing is confined.
    #[default]
    None,
}

/// One wall of the sandbox, in `daemon/info`'s `sandbox.walls`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
pub struct SandboxWall {
    /// Its name: `filesystem` (Landlock), `syscalls` (seccomp),
    /// `namespaces` (user, PID, mount), `unix_sockets`, `network` (each
    /// call's own network namespace, its only way out the gate).
    pub name: String,
    /// Whether it is applied to confined commands.
    pub applied: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
method!(
    /// `mcp/list`: the daemon's pool of MCP servers (every session's), with
    /// their state, tool counts, processes and last errors.
    McpList, "mcp/list", crate::mcp::McpListParams => crate::mcp::McpListResult
);
method!(
    /// `mcp/prompts`: the prompts of a session's MCP servers (Claude Code's
    /// `/mcp__server__prompt` slash commands).
    McpPrompts, "mcp/prompts", crate::mcp::McpPromptsParams => crate::mcp::McpPromptsResult
);
method!(
    /// `mcp/elicitation_respond`: answers an `mcp/elicitation` event (a
    /// server asking the user for values during a call).
    McpElicitationRespond, "mcp/elicitation_respond",
    crate::mcp::McpElicitationRespondParams => crate::mcp::McpElicitationRespondResult
);
method!(
    /// `mcp/login`: starts an OAuth authorization of a session's HTTP MCP
    /// server; the client opens the URL and listens on its redirect address.
    McpLogin, "mcp/login", crate::mcp::McpLoginParams => crate::mcp::McpLoginResult
);
method!(
    /// `mcp/login_complete`: the browser's redirect back; the daemon gets
    /// and keeps the tokens and starts the server again.
    McpLoginComplete, "mcp/login_complete",
    crate::mcp::McpLoginCompleteParams => crate::mcp::McpLoginCompleteResult
);
method!(
    /// `mcp/logout`: forgets an HTTP MCP server's tokens.
    McpLogout, "mcp/logout", crate::mcp::McpLogoutParams => crate::mcp::McpLogoutResult
);
method!(
    /// `mcp/get_prompt`: one prompt's messages, with its arguments filled in.
    McpGetPrompt, "mcp/get_prompt", crate::mcp::McpGetPromptParams => crate::mcp::McpGetPromptResult
);

/// Params of `daemon/activity`: none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DaemonActivityParams {}

/// One call queued or running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ActiveCall {
    /// Its `tool_use` id.
    pub tool_use_id: String,
    /// Its turn.
    pub turn_id: String,
    /// The tool.
    pub name: String,
    /// What it does, in a line.
    pub render: String,
    /// Running (else queued, or waiting for an answer).
    pub running: bool,
    /// Since it was accepted, in milliseconds.
    pub age_ms: u64,
}

/// What one session is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionActivity {
    /// The session.
    pub session_id: String,
    /// Its name, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its workspace.
    pub cwd: std::path::PathBuf,
    /// The session it is a sub-agent of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// `running` (a turn is open) or `idle`.
    pub state: String,
    /// Since it was created, in milliseconds.
    pub age_ms: u64,
    /// Its calls queued or running.
    pub calls: Vec<ActiveCall>,
    /// Its background jobs still running.
    pub jobs: Vec<crate::session::JobInfo>,
    /// Its schedules.
    pub schedules: Vec<crate::schedule::CronJob>,
    /// Its permission requests waiting for an answer (their ids).
    pub questions: Vec<String>,
    /// Events its log keeps, and their estimated bytes (its memory).
    pub events_kept: u64,
    /// See `events_kept`.
    pub event_bytes: u64,
}

/// Result of `daemon/activity`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DaemonActivityResult {
    /// Every open session, oldest first.
    pub sessions: Vec<SessionActivity>,
    /// The daemon's resident memory, in KiB.
    pub rss_kib: u64,
}
