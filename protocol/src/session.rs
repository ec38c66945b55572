//! Sessions: one workspace, its configuration and (later) its turns.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the permission pipeline treats calls that no rule decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionMode {
    /// Reads inside the workspace are allowed; everything else asks.
    #[default]
    Default,
    /// Like `default`, and file edits inside the workspace are allowed too
    /// (also spelled `accept-edits`, and Claude Code's `acceptEdits`).
    #[serde(alias = "accept-edits", alias = "acceptEdits")]
    AcceptEdits,
    /// Read-only tools only.
    Plan,
    /// Everything but deny rules is allowed (also Claude Code's
    /// `bypassPermissions`).
    #[serde(alias = "bypassPermissions")]
    Bypass,
}

/// Permission rules in Claude Code's settings syntax, e.g. `Bash(npm test:*)`,
/// `Read(src/**)`. Deny beats ask beats allow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionRules {
    /// Calls matching these run without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Calls matching these are refused.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Calls matching these ask the client first.
    #[serde(default)]
    pub ask: Vec<String>,
}

/// Which tools the session offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOptions {
    /// Simple mode: offer only Bash, Read and Edit.
    #[serde(default)]
    pub simple: bool,
    /// Names of tools not to offer.
    #[serde(default)]
    pub disabled: Vec<String>,
    /// When given, only tools these names answer to are offered (a
    /// sub-agent's `tools:`), whatever is added later (an MCP server's
    /// tools added at run time included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
    /// Deferred discovery (ToolSearch) settings; daemon defaults when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer: Option<crate::tools::DeferralOptions>,
}

/// How a session confines the processes the Bash tool starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Commands run without asking (judged read-only) run `read_only`;
    /// every other command runs `workspace_write`.
    #[default]
    Auto,
    /// Every approved command runs `workspace_write` (what runs unasked
    /// still runs `read_only`).
    WorkspaceWrite,
    /// Every command runs `read_only`.
    ReadOnly,
    /// No confinement (the call's processes still end with it).
    Off,
}

/// The confinement one Bash call ran under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxProfile {
    /// Nothing writable but `/dev/null` and a private temp directory; reads
    /// limited to the workspace and system directories; no sockets, no
    /// network, no signals or ptrace outside the call.
    ReadOnly,
    /// Writable: the workspace roots (but the files that configure agentd or
    /// run code later), a private temp directory, `/dev/null`; network as
    /// the session says.
    WorkspaceWrite,
    /// Not confined.
    Off,
}

/// `session/create`'s `sandbox`: the kernel wall around Bash commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxOptions {
    /// Which profile commands run in (default `auto`).
    #[serde(default)]
    pub mode: SandboxMode,
    /// The network of `workspace_write` commands (`read_only` never has
    /// any): `false` none; `true` (the default) through the network gate,
    /// where domains the rules allow pass and a new one asks (the whole
    /// network only when the user's own settings say
    /// `sandbox.network.allowAll`); or the gate with the session's own
    /// domain lists.
    #[serde(default)]
    pub network: SandboxNetwork,
    /// The user's settings say `sandbox.network.allowAll: true`: with
    /// `network: true`, commands reach the whole network, ungated. Set
    /// from the user's settings file only (what a client sends is ignored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network_allow_all: bool,
    /// Claude Code's `autoAllowBashIfSandboxed`: `true`, every command
    /// that no deny or ask rule matches runs without asking, in
    /// `workspace_write`; `"effects"`, it runs so too, and what it changed
    /// in the workspace then waits for approval (a `permission/request` of
    /// `kind: effects` carrying the changes and a diff) unless an Edit
    /// would apply it unasked in the session's mode.
    #[serde(default)]
    pub auto_allow: AutoAllow,
    /// Unix sockets outside the sandbox that confined commands may connect
    /// to (absolute paths; Claude Code's `sandbox.network.allowUnixSockets`
    /// in the user's settings adds to it). Every other socket outside the
    /// call is refused; agentd's own socket can never be named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<String>,
    /// Any Unix socket may be connected to (Claude Code's
    /// `allowAllUnixSockets`): the Unix-socket wall is off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_all_unix_sockets: bool,
    /// Credential files and directories (`~/.ssh`, `~/.aws`, …) confined
    /// commands may read; every other one of the list is hidden.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_credentials: Vec<String>,
    /// Claude Code's `sandbox.network.strictAllowlist` (here, or in the
    /// user's settings): a domain no rule allows is refused at the network
    /// gate rather than asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict_allowlist: bool,
}

/// `sandbox.auto_allow`: `true`, `false`, or `"effects"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum AutoAllow {
    /// `true`: commands run unasked, confined; `false`: they ask.
    Switch(bool),
    /// `"effects"`: commands run unasked, confined, and their changes to
    /// the workspace wait for approval.
    Word(AutoAllowWord),
}

/// The word `sandbox.auto_allow` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AutoAllowWord {
    /// Permission by effect.
    Effects,
}

impl Default for AutoAllow {
    fn default() -> Self {
        AutoAllow::Switch(false)
    }
}

impl AutoAllow {
    /// Commands run without asking first.
    pub fn runs_unasked(&self) -> bool {
        !matches!(self, AutoAllow::Switch(false))
    }

    /// What commands change waits for approval.
    pub fn effects(&self) -> bool {
        matches!(self, AutoAllow::Word(AutoAllowWord::Effects))
    }
}

impl From<bool> for AutoAllow {
    fn from(on: bool) -> Self {
        AutoAllow::Switch(on)
    }
}

/// `sandbox.network` of `session/create`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxNetwork {
    /// `false`: no network; `true`: the gate with the rules of the settings
    /// files (or, with the user's `allowAll`, the whole network).
    Switch(bool),
    /// The gate, with the session's own domain lists.
    Gate(NetworkGate),
}

impl Default for SandboxNetwork {
    fn default() -> Self {
        SandboxNetwork::Switch(true)
    }
}

impl SandboxNetwork {
    /// Whether commands have any network at all.
    pub fn enabled(&self) -> bool {
        !matches!(self, SandboxNetwork::Switch(false))
    }

    /// The session's own domain lists (none for `true`).
    pub fn gate(&self) -> Option<&NetworkGate> {
        match self {
            SandboxNetwork::Gate(g) => Some(g),
            SandboxNetwork::Switch(_) => None,
        }
    }
}

/// A session's own rules for the network gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkGate {
    /// The only domains commands may reach (`*.` covers subdomains; a
    /// domain covers its subdomains anyway), in every mode, `bypass`
    /// included: nothing else passes and nothing asks. Absent: the
    /// settings' rules decide and a domain none covers asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_domains: Option<Vec<String>>,
    /// Domains always refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_domains: Vec<String>,
    /// Let commands reach loopback, private, link-local and metadata
    /// addresses through the gate (refused by default, as for WebFetch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_private_network: bool,
}

/// What network one Bash call had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    /// None at all.
    None,
    /// Through the network gate: only what the rules or the user allowed.
    Gated,
    /// The whole network (the user's `sandbox.network.allowAll`, or an
    /// unconfined command).
    All,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            mode: SandboxMode::Auto,
            network: SandboxNetwork::default(),
            network_allow_all: false,
            auto_allow: AutoAllow::Switch(false),
            allow_unix_sockets: Vec::new(),
            allow_all_unix_sockets: false,
            allow_credentials: Vec::new(),
            strict_allowlist: false,
        }
    }
}

/// Limits of the Bash tool in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashOptions {
    /// Timeout of a command that names none, in milliseconds (default 120000).
    #[serde(default = "default_timeout_ms")]
    pub default_timeout_ms: u64,
    /// Longest timeout a command may ask for, in milliseconds (default 600000).
    #[serde(default = "max_timeout_ms")]
    pub max_timeout_ms: u64,
    /// Characters of output a result keeps; the middle of longer output is
    /// elided (default 30000). The full output is kept in a file.
    #[serde(default = "max_output_chars")]
    pub max_output_chars: u64,
}

fn default_timeout_ms() -> u64 {
    120_000
}
fn max_timeout_ms() -> u64 {
    600_000
}
fn max_output_chars() -> u64 {
    30_000
}

impl Default for BashOptions {
    fn default() -> Self {
        BashOptions {
            default_timeout_ms: default_timeout_ms(),
            max_timeout_ms: max_timeout_ms(),
            max_output_chars: max_output_chars(),
        }
    }
}

/// A background job of the Bash tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobInfo {
    /// The job's id (`BashOutput` and `TaskStop` take it).
    pub job_id: String,
    /// The command.
    pub command: String,
    /// `running`, `exited` or `killed`.
    pub status: String,
    /// The exit code, once it exited.
    pub exit_code: Option<i32>,
}

/// One entry of a session's todo list (the TodoWrite tool's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// What is to be done, in the imperative ("Run the tests").
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: TodoStatus,
    /// The same in the present continuous, shown while it is in progress
    /// ("Running the tests").
    #[serde(default, rename = "activeForm", skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

/// The state of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One task of a session's task list (TaskCreate, TaskUpdate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskItem {
    /// Its id ("1", "2", …; never reused in the session).
    pub id: String,
    /// A short title, in the imperative.
    pub subject: String,
    /// What is to be done, in full.
    pub description: String,
    /// The state.
    pub status: TodoStatus,
    /// Shown while in progress ("Running the tests").
    #[serde(default, rename = "activeForm", skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    /// Who works on it (an agent's name), if anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Tasks that cannot start before this one is done.
    #[serde(default)]
    pub blocks: Vec<String>,
    /// Tasks that must be done before this one.
    #[serde(default, rename = "blockedBy")]
    pub blocked_by: Vec<String>,
    /// Free-form data the model attached.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Params of `session/create`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCreateParams {
    /// Absolute path of the workspace directory. It must exist; the daemon
    /// stores it canonical (symlinks resolved).
    pub cwd: PathBuf,
    /// Permission mode; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// Session-level permission rules, on top of the settings files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<PermissionRules>,
    /// Which tools to offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolOptions>,
    /// Most tool calls run at once in this session (1 to 256); the daemon's
    /// default (10, or `AGENTD_MAX_TOOL_CONCURRENCY`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// When a failed call cancels the other calls of its turn
    /// (`bash_failure`, the default, or `never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sibling_cancel: Option<crate::turn::SiblingCancel>,
    /// Limits of the Bash tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bash: Option<BashOptions>,
    /// How long a `permission/request` waits for `permission/respond`
    /// before the call is denied, in milliseconds (10 to 86400000; default
    /// 300000, five minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_timeout_ms: Option<u64>,
    /// More directories that count as the workspace (absolute, existing;
    /// at most 32): file tools work in them as in `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_dirs: Option<Vec<PathBuf>>,
    /// The kernel sandbox around the Bash tool's processes; `auto` with
    /// network when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxOptions>,
    /// MCP servers of this session, by name, as Claude Code's `mcpServers`
    /// entries (see [`crate::mcp::McpServerEntry`]); on top of the user's
    /// settings file and, when enabled, the workspace's `.mcp.json`. An
    /// entry that cannot be used is reported in `mcp_errors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Start the servers of the workspace's `.mcp.json` (off by default: a
    /// repository must not run code by being opened; the user's settings
    /// can also enable them, with `enableAllProjectMcpServers` or
    /// `enabledMcpjsonServers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_project_mcp: Option<bool>,
    /// How long one MCP tool call may take, in milliseconds (1000 to
    /// 86400000; default 600000, ten minutes); then it ends with an error
    /// result and the server is told to cancel it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_tool_timeout_ms: Option<u64>,
    /// The least severe MCP server log messages the session's event stream
    /// gets (`mcp/log` events; default `warning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_log_level: Option<crate::mcp::McpLogLevel>,
    /// WebFetch and WebSearch options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<WebOptions>,
    /// Close the session when the connection that created it closes (an
    /// MCP bridge, a script): nothing it started outlives its client, and
    /// a restart does not bring it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_with_connection: Option<bool>,
    /// Make a child of this session: it inherits the parent's workspace,
    /// mode, permission rules (and granted ones), sandbox and web options,
    /// has its own file state, events, todos and tools (`tools` may narrow
    /// them; `permissions` may only add deny and ask rules), and closes with
    /// the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// Hooks of this session, in Claude Code's `hooks` shape (`{"PreToolUse":
    /// [{"matcher": "Bash", "hooks": [{"type": "command", "command": "…"}]}]}`),
    /// on top of the settings files'. An entry that cannot be used is
    /// reported in `hook_errors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<serde_json::Value>,
    /// Run the hooks of the workspace's own settings files
    /// (`.agentd/settings.json`, `.claude/settings.json`,
    /// `.claude/settings.local.json`); off by default: a repository must
    /// not run code by being opened (the user's settings can also enable
    /// them, with `projects.<workspace>.enableProjectHooks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_project_hooks: Option<bool>,
    /// Environment variables for the session's commands (Bash, background
    /// jobs) and command hooks, on top of the user's settings' `env`
    /// (Claude Code's key; the session's win). They are given to confined
    /// commands too: `PATH` is how a socket-activated daemon's commands find
    /// `~/.cargo/bin`. Names are `[A-Za-z_][A-Za-z0-9_]*`, not `AGENTD_*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// A name other sessions reach this one by (SendMessage's `to`,
    /// ListAgents): 1 to 64 letters, digits, `-`, `_` or `.`, unique among
    /// the daemon's sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether other sessions may list and message this one (default
    /// true); `false` keeps it out of ListAgents and refuses messages to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discoverable: Option<bool>,
}

/// A git worktree the session works in (EnterWorktree made it; ExitWorktree
/// leaves it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorktreeInfo {
    /// The worktree's top directory (`<repository>/.claude/worktrees/<name>`).
    pub path: PathBuf,
    /// The branch made for it (`worktree/<name>`).
    pub branch: String,
    /// The session's working directory and workspace root while there.
    pub cwd: PathBuf,
    /// Where the session was before (its working directory again after
    /// ExitWorktree).
    pub original_cwd: PathBuf,
    /// The main repository's top directory.
    pub repository: PathBuf,
    /// The repository's common git directory (objects, refs, hooks).
    pub common_dir: PathBuf,
    /// The worktree's own git directory (`<common_dir>/worktrees/<name>`).
    #[serde(default)]
    pub git_dir: PathBuf,
    /// The commit the branch started from (`None` in a repository without
    /// commits).
    #[serde(default)]
    pub base: Option<String>,
    /// The session entered a worktree that was there before
    /// (EnterWorktree `path`), on a branch it did not make: ExitWorktree
    /// keeps it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entered: bool,
    /// A WorktreeCreate hook made it (in place of git): it has no branch
    /// or git directories of agentd's, and WorktreeRemove hooks remove it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_hook: bool,
}

/// What the web tools may reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebOptions {
    /// Let WebFetch reach loopback, private, link-local and metadata
    /// addresses (refused by default: a page must not become a way into
    /// this machine's or network's services).
    #[serde(default)]
    pub allow_private_network: bool,
}

impl SessionCreateParams {
    /// A session on `cwd` with every option at its default.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        SessionCreateParams {
            cwd: cwd.into(),
            mode: None,
            permissions: None,
            tools: None,
            max_concurrency: None,
            sibling_cancel: None,
            bash: None,
            permission_timeout_ms: None,
            add_dirs: None,
            sandbox: None,
            mcp_servers: None,
            enable_project_mcp: None,
            mcp_tool_timeout_ms: None,
            mcp_log_level: None,
            web: None,
            close_with_connection: None,
            parent_session_id: None,
            hooks: None,
            enable_project_hooks: None,
            env: None,
            name: None,
            discoverable: None,
        }
    }
}

/// Result of `session/create`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionCreateResult {
    /// Id to pass to every later call about this session.
    pub session_id: String,
    /// The session as stored.
    pub session: SessionInfo,
    /// What `SessionStart` hooks added for the model (their
    /// `additionalContext`, or the plain text they printed), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_context: Vec<String>,
}

/// Params of `session/get` and `session/close`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionIdParams {
    /// The session's id, as `session/create` returned it.
    pub session_id: String,
}

/// Params of `session/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListParams {}

/// Result of `session/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionListResult {
    /// Open sessions, oldest first.
    pub sessions: Vec<SessionInfo>,
}

/// Result of `session/close`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionCloseResult {
    /// The session that was closed.
    pub session_id: String,
}

/// A session as the daemon holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    /// The session's id.
    pub session_id: String,
    /// Canonical absolute path of the workspace.
    pub cwd: PathBuf,
    /// Permission mode.
    pub mode: PermissionMode,
    /// Session-level permission rules.
    pub permissions: PermissionRules,
    /// Tool options.
    pub tools: ToolOptions,
    /// Most tool calls run at once.
    pub max_concurrency: u32,
    /// When a failed call cancels its siblings.
    #[serde(default)]
    pub sibling_cancel: crate::turn::SiblingCancel,
    /// Limits of the Bash tool.
    #[serde(default)]
    pub bash: BashOptions,
    /// Background jobs of the Bash tool (filled in by `session/get` and
    /// `session/list`).
    #[serde(default)]
    pub jobs: Vec<JobInfo>,
    /// The todo list the model keeps with TodoWrite (filled in by
    /// `session/get` and `session/list`).
    #[serde(default)]
    pub todos: Vec<TodoItem>,
    /// The task list the model keeps with TaskCreate and TaskUpdate
    /// (filled in by `session/get` and `session/list`).
    #[serde(default)]
    pub tasks: Vec<TaskItem>,
    /// Permission rules (from the session or settings files) that could not
    /// be read, with where they came from; they are ignored.
    #[serde(default)]
    pub rule_errors: Vec<String>,
    /// How long a permission request waits for an answer, in milliseconds.
    #[serde(default = "default_permission_timeout_ms")]
    pub permission_timeout_ms: u64,
    /// Rules added by `allow_always` answers, in order.
    #[serde(default)]
    pub granted_rules: Vec<String>,
    /// Permission requests waiting for `permission/respond` (their
    /// `request_id`s; the `permission/request` events carry the details).
    #[serde(default)]
    pub pending_permissions: Vec<String>,
    /// Directories added to the workspace (canonical).
    #[serde(default)]
    pub add_dirs: Vec<PathBuf>,
    /// The sandbox the session's Bash commands run in.
    #[serde(default)]
    pub sandbox: SandboxOptions,
    /// The session's own MCP server entries, as `session/create` gave them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mcp_servers: std::collections::BTreeMap<String, serde_json::Value>,
    /// Whether the workspace's `.mcp.json` servers were enabled by
    /// `session/create`.
    #[serde(default)]
    pub enable_project_mcp: bool,
    /// How long one MCP tool call may take, in milliseconds.
    #[serde(default = "default_mcp_tool_timeout_ms")]
    pub mcp_tool_timeout_ms: u64,
    /// The least severe MCP server log messages its event stream gets.
    #[serde(default)]
    pub mcp_log_level: crate::mcp::McpLogLevel,
    /// The MCP servers the session uses (from every source) and how they
    /// stand (filled in by `session/get` and `session/list`).
    #[serde(default)]
    pub mcp: Vec<crate::mcp::McpServerStatus>,
    /// MCP server entries that could not be used, with where they came
    /// from and why; those servers are not started.
    #[serde(default)]
    pub mcp_errors: Vec<String>,
    /// What the web tools may reach.
    #[serde(default)]
    pub web: WebOptions,
    /// The session closes with the connection that created it.
    #[serde(default)]
    pub close_with_connection: bool,
    /// The session this one is a child of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// Its open child sessions (filled in by `session/get`).
    #[serde(default)]
    pub children: Vec<String>,
    /// Sub-agent definitions (`.claude/agents/<name>.md`) that could not be
    /// used, with why.
    #[serde(default)]
    pub agent_errors: Vec<String>,
    /// Skill files (`.claude/skills/<name>/SKILL.md`) that could not be
    /// used, with why; they are left out of the Skill tool.
    #[serde(default)]
    pub skill_errors: Vec<String>,
    /// The git worktree EnterWorktree moved the session into, while it is
    /// there (filled in by `session/get` and `session/list`; `cwd` stays
    /// the directory the session was opened on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeInfo>,
    /// The session's own hooks, as `session/create` gave them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_hooks: Option<serde_json::Value>,
    /// Whether the workspace's own hooks run (`session/create`'s
    /// `enable_project_hooks`, or the user's settings).
    #[serde(default)]
    pub enable_project_hooks: bool,
    /// The hooks in force (settings files, the session's, the clients'),
    /// filled in by `session/get`.
    #[serde(default)]
    pub hooks: Vec<crate::hooks::HookInfo>,
    /// Hook entries that cannot be used (with the file and where in it), and
    /// the workspace's hooks left out because the workspace is not trusted;
    /// they do not run.
    #[serde(default)]
    pub hook_errors: Vec<String>,
    /// The session's own environment variables, as `session/create` gave
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_env: Option<std::collections::BTreeMap<String, String>>,
    /// The environment variables its commands and command hooks get beyond
    /// the plain environment: the user's settings' `env`, then the
    /// session's own. A workspace's settings files cannot set them (said in
    /// `rule_errors`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// The permission rules in force, each with where it comes from: the
    /// session's own, the settings files' (the workspace's, the user's,
    /// the imported Claude Code file) and those `allow_always` granted
    /// (filled in by `session/get`). Rules listed in `rule_errors` are not
    /// here.
    #[serde(default)]
    pub rules_in_force: Vec<RuleInForce>,
    /// Things about the settings the session reads that the user may not
    /// expect, in a sentence each: e.g. `~/.claude/settings.json` exists
    /// but is not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings_notes: Vec<String>,
    /// The workspace's project files this session does not obey because
    /// the user has not approved their present content (new or changed
    /// since): approve them with `workspace/trust` (`agentctl trust`) and
    /// open a new session. Settings files not trusted still add their
    /// `deny` and `ask` rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted: Vec<crate::workspace::ProjectFile>,
    /// When the session was created, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The name other sessions reach it by, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether other sessions may list and message it.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub discoverable: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

/// A permission rule in force for a session, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuleInForce {
    /// Allow, deny or ask.
    pub kind: RuleKind,
    /// The rule as written, e.g. `Bash(npm test:*)`.
    pub rule: String,
    /// Where it comes from.
    pub source: RuleSource,
    /// The settings file, for a rule from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

/// What a permission rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// Runs the call without asking.
    Allow,
    /// Refuses it.
    Deny,
    /// Asks.
    Ask,
}

/// Where a permission rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleSource {
    /// `session/create`'s `permissions`.
    Session,
    /// An `allow_always` answer (also in `granted_rules`).
    Granted,
    /// A workspace's own settings file (`.agentd/settings.json`,
    /// `.claude/settings.json`, `.claude/settings.local.json`).
    Project,
    /// The user's agentd settings file (`~/.config/agentd/settings.json`).
    User,
    /// The user's Claude Code settings (`~/.claude/settings.json`), read
    /// because agentd's own says `"importClaudeSettings": true`.
    ClaudeImport,
}

/// The default `permission_timeout_ms`: five minutes.
pub const DEFAULT_PERMISSION_TIMEOUT_MS: u64 = 300_000;

fn default_mcp_tool_timeout_ms() -> u64 {
    crate::mcp::DEFAULT_MCP_TOOL_TIMEOUT_MS
}

fn default_permission_timeout_ms() -> u64 {
    DEFAULT_PERMISSION_TIMEOUT_MS
}
