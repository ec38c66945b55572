//! Sub-agents. agentd runs no model: the Task tool makes a child session,
//! announces it with an `agent/request` event, and waits for a client that
//! runs models (one subscribed with `capabilities: ["agents"]`) to run the
//! sub-agent on that session and answer with `agent/respond`.
//!
//! Definitions are Claude Code's `.claude/agents/<name>.md` files (the
//! workspace's, then the user's): front matter `name`, `description`,
//! optionally `tools` (a comma-separated list; all of the parent's when
//! absent), and the body as the sub-agent's instructions. `general-purpose`
//! is always there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::sync::MutexExt;

/// Most definitions a session lists.
const MAX_AGENTS: usize = 50;
/// Largest definition file read.
const MAX_DEFINITION_BYTES: u64 = 256 * 1024;

/// One kind of sub-agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// Its name (what `subagent_type` takes).
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The tools it may use (`None`: the parent's).
    pub tools: Option<Vec<String>>,
    /// Tools it may not use, whatever `tools` says.
    pub disallowed: Vec<String>,
    /// The model it runs on (`None`: the parent's).
    pub model: Option<String>,
    /// Its instructions (the file's body).
    pub instructions: Option<String>,
}

/// The definition every session has.
pub fn general_purpose() -> AgentDef {
    AgentDef {
        name: "general-purpose".into(),
        description: "General-purpose agent for researching complex questions, searching for code, and \
                      executing multi-step tasks."
            .into(),
        tools: None,
        disallowed: Vec::new(),
        model: None,
        instructions: None,
    }
}

/// What Explore and Plan may not use: they read and report, never write.
const READ_ONLY_AGENT_DENIES: &[&str] = &["Task", "ExitPlanMode", "Edit", "Write", "NotebookEdit", "MultiEdit"];

/// The agent types Claude Code 2.1 ships (beside general-purpose), with
/// its tool sets and models: Explore and Plan cannot write (every tool but
/// the writing ones, Task and ExitPlanMode); statusline-setup has Read and
/// Edit; claude-code-guide Bash, Read, WebFetch and WebSearch. Their
/// instructions are the client's (agentd runs no model).
pub fn built_in() -> Vec<AgentDef> {
    let def =
        |name: &str, description: &str, tools: Option<&[&str]>, disallowed: &[&str], model: Option<&str>| AgentDef {
            name: name.into(),
            description: description.into(),
            tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
            disallowed: disallowed.iter().map(|s| (*s).to_owned()).collect(),
            model: model.map(str::to_owned),
            instructions: None,
        };
    vec![
        general_purpose(),
        def(
            "Explore",
            "Fast read-only agent for exploring a codebase: finding files by pattern, searching code for keywords, \
             answering questions about how the code works. It cannot change files.",
            None,
            READ_ONLY_AGENT_DENIES,
            Some("inherit"),
        ),
        def(
            "Plan",
            "Read-only software architect agent for designing an implementation plan: it explores the code and \
             returns step-by-step plans, critical files and trade-offs. It cannot change files.",
            None,
            READ_ONLY_AGENT_DENIES,
            Some("inherit"),
        ),
        def(
            "statusline-setup",
            "Configures the user's status line setting.",
            Some(&["Read", "Edit"]),
            &[],
            Some("sonnet"),
        ),
        def(
            "claude-code-guide",
            "Answers questions about Claude Code and the Claude Agent SDK: features, hooks, slash commands, MCP \
             servers, settings, IDE integrations.",
            Some(&["Bash", "Read", "WebFetch", "WebSearch"]),
            &[],
            Some("haiku"),
        ),
    ]
}

/// The sub-agent definitions of a workspace and the user (after the
/// built-in one), and what could not be read.
/// The workspace's own count only as `trust` approved them.
pub fn discover(
    cwd: &Path,
    rules: &crate::permission::rules::RuleSet,
    trust: &crate::trust::TrustStore,
) -> (Vec<AgentDef>, Vec<String>) {
    // The home directory's are the user's own (read below as theirs).
    let mut roots = vec![(cwd.join(".claude/agents"), Some(trust))];
    if crate::trust::is_home(cwd) {
        roots.clear();
    }
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()) {
        roots.push((home.join(".claude/agents"), None));
    }
    let mut defs = built_in();
    let mut errors = Vec::new();
    for (root, trust) in roots {
        let Ok(entries) = std::fs::read_dir(&root) else { continue };
        let mut files: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md")).collect();
        files.sort();
        for file in files {
            let shown = file.display();
            let (pairs, body) =
                match crate::definitions::read_definition(&root, &file, rules, MAX_DEFINITION_BYTES, trust) {
                    Ok(d) => (d.pairs, d.body),
                    Err(why) => {
                        errors.push(format!("{shown}: {why}"));
                        continue;
                    }
                };
            let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.trim().to_owned());
            let Some(name) = get("name").filter(|n| valid_name(n)) else {
                errors.push(format!("{shown}: no valid name (letters, digits, '-', '_')"));
                continue;
            };
            let Some(description) = get("description").filter(|d| !d.is_empty()) else {
                errors.push(format!("{shown}: no description"));
                continue;
            };
            if defs.iter().any(|d| d.name == name) {
                continue;
            }
            if defs.len() > MAX_AGENTS {
                errors.push(format!("{shown}: more than {MAX_AGENTS} definitions; not listed"));
                continue;
            }
            let tools = get("tools").filter(|t| !t.is_empty() && t != "*").map(|t| {
                t.trim_matches(['[', ']'])
                    .split(',')
                    .map(|s| s.trim().trim_matches(['"', '\'']).to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            });
            let body = body.trim();
            let list = |key: &str| -> Vec<String> {
                get(key)
                    .map(|t| {
                        t.trim_matches(['[', ']'])
                            .split(',')
                            .map(|s| s.trim().trim_matches(['"', '\'']).to_owned())
                            .filter(|s| !s.is_empty())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let model = get("model").filter(|m| !m.is_empty());
            defs.push(AgentDef {
                name,
                description,
                tools,
                disallowed: list("disallowedTools"),
                model,
                instructions: (!body.is_empty()).then(|| body.to_owned()),
            });
        }
    }
    (defs, errors)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// What the daemon does for the Task tool: child sessions.
pub trait AgentHost: Send + Sync {
    /// Makes a child session of `parent` whose tools are `tools` (all of
    /// the parent's when `None`) but `disallowed`, without Task itself;
    /// returns its id and the tools it offers.
    fn spawn_child(&self, parent: &str, child: ChildAsk<'_>) -> Result<(String, Vec<String>), String>;
    /// Cancels everything the child runs.
    fn cancel_child(&self, child: &str);
    /// Closes the child.
    fn close_child(&self, child: &str);
}

/// What a Task call asks of the child it makes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildAsk<'a> {
    /// Its tools (all the parent's when `None`), never Task.
    pub tools: Option<&'a [String]>,
    /// Tools it must not have.
    pub disallowed: &'a [String],
    /// The name other sessions reach it by while it runs (Agent's `name`).
    pub name: Option<&'a str>,
    /// The worktree it works in (Agent's `isolation: "worktree"`).
    pub worktree: Option<&'a agentd_protocol::session::WorktreeInfo>,
}

/// Sub-agents a session may run at once (Claude Code 2.1.332's default).
pub const MAX_CONCURRENT: usize = 20;
/// Sub-agents one session may start in all.
pub const MAX_PER_SESSION: u64 = 200;

/// The answer to an `agent/request`.
#[derive(Debug, Clone)]
pub struct AgentAnswer {
    /// The sub-agent's result.
    pub result: String,
    /// Whether it failed.
    pub is_error: bool,
}

/// A session's open `agent/request`s, each waiting for its
/// `agent/respond` (the session's executor holds them).
#[derive(Default)]
pub struct Requests {
    open: Mutex<HashMap<String, tokio::sync::oneshot::Sender<AgentAnswer>>>,
}

/// A request waiting for its answer; forgotten when dropped.
pub struct Waiting {
    requests: Arc<Requests>,
    request_id: String,
    /// Where the answer arrives.
    pub answer: tokio::sync::oneshot::Receiver<AgentAnswer>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.requests.lock().remove(&self.request_id);
    }
}

impl Requests {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, tokio::sync::oneshot::Sender<AgentAnswer>>> {
        self.open.locked()
    }

    /// Opens request `request_id` for an answer.
    pub fn wait_for(self: &Arc<Self>, request_id: &str) -> Waiting {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.lock().insert(request_id.to_owned(), tx);
        Waiting { requests: self.clone(), request_id: request_id.to_owned(), answer: rx }
    }

    /// Answers request `request_id` of the session `session`; an error
    /// when the session has no such open request.
    pub fn respond(&self, session: &str, request_id: &str, answer: AgentAnswer) -> Result<(), String> {
        let Some(tx) = self.lock().remove(request_id) else {
            return Err(format!("no open agent request {request_id:?} in session {session}"));
        };
        tx.send(answer).map_err(|_| format!("agent request {request_id:?} is no longer waiting"))
    }
}

/// Shared handle on the daemon's agent host, set once the daemon's state
/// exists.
pub type Host = Arc<dyn AgentHost>;

/// What the Task tool announces in its `agent/request` event.
#[derive(Debug, Clone)]
pub struct Announce {
    /// Pass this to `agent/respond`.
    pub request_id: String,
    /// The child session.
    pub child_session_id: String,
    /// The kind of sub-agent.
    pub subagent_type: String,
    /// A few words on the task.
    pub description: String,
    /// The task.
    pub prompt: String,
    /// The definition's instructions.
    pub instructions: Option<String>,
    /// The child's tools.
    pub tools: Vec<String>,
    /// The model asked for.
    pub model: Option<String>,
    /// The effort asked for.
    pub effort: Option<String>,
}

/// What a Task call gets from the executor: the host, a way to announce
/// its request, and whether a client that runs agents follows the session.
#[derive(Clone)]
pub struct AgentCall {
    /// Makes and ends child sessions.
    pub host: Host,
    /// The session's open requests, where the answer arrives.
    pub requests: Arc<Requests>,
    /// Sends the `agent/request` event.
    pub announce: Arc<dyn Fn(Announce) + Send + Sync>,
    /// Whether a client that runs agents is subscribed.
    pub runner: Arc<dyn Fn() -> bool + Send + Sync>,
    /// The parent session's hooks (SubagentStart, SubagentStop) and the
    /// call they are about.
    pub hooks: Arc<crate::hooks::Hooks>,
    /// The Task call.
    pub about: crate::hooks::About,
}
