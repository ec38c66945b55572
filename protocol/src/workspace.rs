//! A session's workspace as files: what `agentctl mcp` serves as MCP
//! resources (`workspace/files`, `workspace/read`) and the session's
//! skills as MCP prompts (`skills/list`). Every file listed or read is one
//! the session's Read tool may read without asking: inside the workspace
//! (or an added directory), not under a `Read` deny or ask rule, not
//! agentd's own state or a secret file of its TLS face.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most files one `workspace/files` page holds.
pub const MAX_FILES_PAGE: usize = 1000;
/// The default page size of `workspace/files`.
pub const DEFAULT_FILES_PAGE: usize = 200;
/// Largest file `workspace/read` returns (bigger ones are refused).
pub const MAX_READ_BYTES: u64 = 8 << 20;

/// Params of `workspace/files`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFilesParams {
    /// The session.
    pub session_id: String,
    /// Where the previous page ended (its `next_cursor`); the first page
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Files in this page: 1 to 1000 (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only paths (relative to the workspace) that start with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// One file of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceFile {
    /// Its absolute path.
    pub path: String,
    /// Its path relative to the workspace.
    pub relative: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its media type, guessed from its name (`text/plain` when unknown).
    pub mime_type: String,
}

/// Result of `workspace/files`: files in path order, skipping what
/// `.gitignore` files ignore, hidden files and anything the session may
/// not Read unasked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceFilesResult {
    /// This page's files.
    pub files: Vec<WorkspaceFile>,
    /// Pass it as `cursor` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Params of `workspace/read`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceReadParams {
    /// The session.
    pub session_id: String,
    /// The file: absolute, or relative to the workspace.
    pub path: String,
    /// False: only its size and modification time, no content.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub content: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// Result of `workspace/read`: the file's bytes as UTF-8 `text`, or as
/// base64 `blob` when they are not UTF-8.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceReadResult {
    /// Its absolute path (symbolic links resolved).
    pub path: String,
    /// Its media type, guessed from its name and content.
    pub mime_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last modified, in milliseconds since the epoch.
    pub modified_ms: u64,
    /// Its content, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its content in base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// Params of `skills/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillsListParams {
    /// The session.
    pub session_id: String,
}

/// One skill of a session (a `SKILL.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillInfo {
    /// Its name: what the Skill tool's `skill` takes.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// `project` (the workspace's `.claude/skills`) or `user`.
    pub source: String,
}

/// Result of `skills/list`: the skills the session's Skill tool offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillsListResult {
    /// The skills, by name.
    pub skills: Vec<SkillInfo>,
}

/// Params of `workspace/trust`: what a session on `cwd` would obey from
/// inside it, and the user's approval of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceTrustParams {
    /// The workspace (absolute, existing).
    pub cwd: std::path::PathBuf,
    /// Files to trust, each with the SHA-256 of the content the user saw
    /// (as this method listed it): a file whose content changed since is
    /// refused, and nothing is recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approve: Vec<TrustApproval>,
    /// Files whose approval to withdraw; `cwd` itself withdraws every
    /// approval of a file under it (there now or not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoke: Vec<std::path::PathBuf>,
}

/// One file the user approved, as they saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustApproval {
    /// The file (as `workspace/trust` listed it).
    pub path: std::path::PathBuf,
    /// The SHA-256 of its content, lower-case hex (as listed).
    pub sha256: String,
}

/// What kind of file a workspace's project file is: what obeying it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProjectFileKind {
    /// `.agentd/settings.json`, `.claude/settings.json`,
    /// `.claude/settings.local.json`: permission rules and hooks.
    Settings,
    /// `.mcp.json`: MCP servers (programs started as the user).
    Mcp,
    /// `.claude/skills/*/SKILL.md`: instructions the model is given.
    Skill,
    /// `.claude/agents/*.md`: sub-agents' prompts and tools.
    Agent,
}

/// Whether the user approved a project file's present content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TrustStanding {
    /// Approved as it is now (or the daemon trusts every project file:
    /// `--trust-project-files`).
    Trusted,
    /// Never approved.
    New,
    /// Approved once, changed since.
    Changed,
}

/// A file inside a workspace that agentd obeys once the user trusts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProjectFile {
    /// The file.
    pub path: std::path::PathBuf,
    /// What obeying it does.
    pub kind: ProjectFileKind,
    /// The SHA-256 of its content, lower-case hex: what `approve` names.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
    /// Approved, new or changed.
    pub standing: TrustStanding,
    /// Its content (the first 64 KiB, invalid UTF-8 replaced), in
    /// `workspace/trust`'s answer only. It is the repository's: a client
    /// shows control characters escaped (a carriage return or an escape
    /// sequence could otherwise hide what is approved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Result of `workspace/trust`: every project file of the workspace, after
/// the approvals and withdrawals asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceTrustResult {
    /// The workspace (canonical).
    pub cwd: std::path::PathBuf,
    /// Its project files, each with its standing.
    pub files: Vec<ProjectFile>,
    /// The daemon trusts every project file without asking
    /// (`--trust-project-files`, for unattended use).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trust_all: bool,
}
