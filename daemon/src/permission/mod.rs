//! Permission decisions. The rule engine and modes (DESIGN.md §5) come in
//! the permissions issue; this module defines the decision every layer
//! returns, so tools can already say what they think of a call.

pub mod ask;
pub mod policy;
pub mod rules;

use serde::Serialize;

/// What rules look at in a call: its command or its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionTarget {
    /// Nothing but the tool's name.
    None,
    /// A shell command (Bash).
    Command(String),
    /// A path as the model wrote it (file and search tools).
    Path(String),
}

/// Names of files and directories that configure agentd or run code
/// later (`.git` hooks and config, agentd's and Claude Code's settings,
/// MCP servers): a write to one asks in every mode but `bypass`, whatever
/// a rule or `accept_edits` says.
pub const PROTECTED_NAMES: &[&str] = &[".git", ".agentd", ".claude", ".mcp.json"];

/// Whether writing `path` would change such a file: any component of it
/// is one of [`PROTECTED_NAMES`].
pub fn is_protected(path: &std::path::Path) -> bool {
    path.components().any(|c| PROTECTED_NAMES.iter().any(|n| c.as_os_str() == *n))
}

/// The first setting in a repository's own git configuration
/// (`.git/config`, `.git/config.worktree`) that makes git run a program
/// of the repository's choosing (`core.fsmonitor`, `diff.external`, a
/// textconv or filter driver, a pager, hooks elsewhere, includes that
/// could hold any of these). Git commands in such a repository are neither
/// read-only nor allowed by rules: they ask.
pub fn git_config_runs_code(root: &std::path::Path) -> Option<String> {
    const KEYS: &[&str] = &[
        "fsmonitor",
        "hookspath",
        "textconv",
        "external",
        "command",
        "pager",
        "sshcommand",
        "askpass",
        "editor",
        "process",
        "clean",
        "smudge",
        "gpgprogram",
        "program",
        "helper",
    ];
    for file in [".git/config", ".git/config.worktree"] {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        for line in text.lines() {
            let line = line.trim().to_ascii_lowercase();
            if line.starts_with("[include") || line.starts_with("[filter") {
                return Some(format!("{file}: {line}"));
            }
            let key = line.split('=').next().unwrap_or("").trim();
            if !line.starts_with('[') && line.contains('=') && KEYS.contains(&key) {
                return Some(format!("{file}: {key}"));
            }
        }
    }
    None
}

/// What a permission layer says about one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it; the model sees the reason.
    Deny {
        /// Why, in words the model and the user can act on.
        reason: String,
    },
    /// Ask the client (the user) first.
    Ask {
        /// What the user is asked to approve.
        reason: String,
        /// A rule that would allow calls like this one from now on, e.g.
        /// `Bash(npm test:*)`, offered as "always allow".
        suggestion: Option<String>,
    },
}

impl Decision {
    /// An `ask` without a suggested rule.
    pub fn ask(reason: impl Into<String>) -> Self {
        Decision::Ask { reason: reason.into(), suggestion: None }
    }

    /// A `deny`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Decision::Deny { reason: reason.into() }
    }
}
