//! What a tool call sees (`ToolContext`), how it reports progress
//! (`ProgressSink`), and how it changes the session afterwards
//! (`ContextModifier` applied to `SessionContext`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// Session state that tool calls change through context modifiers, applied
/// in request order as results are yielded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SessionContext {
    /// Deferred tools ToolSearch has loaded, in load order.
    pub loaded_tools: Vec<String>,
    /// Where the Bash tool's last command left the shell (`cd` persists
    /// between calls); the workspace when `None`.
    pub shell_cwd: Option<PathBuf>,
    /// The file-state cache: what this session last read or wrote of each
    /// file (canonical path), so Edit and Write can refuse to clobber a
    /// file that changed since.
    pub files: std::collections::HashMap<PathBuf, crate::fs::FileState>,
    /// The todo list TodoWrite keeps.
    pub todos: Vec<agentd_protocol::session::TodoItem>,
    /// The permission mode, once EnterPlanMode or ExitPlanMode changed it
    /// (the session's own mode when `None`).
    pub mode: Option<agentd_protocol::session::PermissionMode>,
    /// What the mode was before EnterPlanMode (restored by ExitPlanMode).
    pub mode_before_plan: Option<agentd_protocol::session::PermissionMode>,
    /// The git worktree EnterWorktree moved the session into: while set,
    /// its `cwd` is the session's working directory and workspace root.
    pub worktree: Option<agentd_protocol::session::WorktreeInfo>,
    /// The task list TaskCreate and TaskUpdate keep.
    pub tasks: Vec<agentd_protocol::session::TaskItem>,
    /// The last task id given (ids are never reused).
    pub last_task_id: u64,
    /// Settings the model changed with Config (only those it may).
    pub settings: std::collections::BTreeMap<String, serde_json::Value>,
}

impl SessionContext {
    /// The session's settings with the model's changes (Config) applied.
    pub fn apply_settings(&self, info: &mut agentd_protocol::session::SessionInfo) {
        self.apply_bash_settings(&mut info.bash);
    }

    /// The Bash limits with the model's changes applied: it may lower
    /// them, never raise them past the session's.
    pub fn apply_bash_settings(&self, bash: &mut agentd_protocol::session::BashOptions) {
        for (setting, value) in &self.settings {
            let Some(n) = value.as_u64() else { continue };
            match setting.as_str() {
                "bash.default_timeout_ms" => bash.default_timeout_ms = n.min(bash.max_timeout_ms),
                "bash.max_output_chars" => bash.max_output_chars = n.min(bash.max_output_chars),
                _ => {}
            }
        }
    }
}

/// The session's tools as a call sees them: what ToolSearch needs, and no
/// more (the tool set itself lives above calls).
pub trait ToolCatalogue: Send + Sync {
    /// ToolSearch's query: the definitions found, and names not known.
    fn search(&self, query: &str, max_results: usize) -> (Vec<agentd_protocol::tools::ToolDefinition>, Vec<String>);
    /// Whether the tool `name` is deferred.
    fn is_deferred(&self, name: &str) -> bool;
    /// Names of the deferred tools.
    fn deferred_names(&self) -> Vec<String>;
    /// Whether the session has the tool `name` (listed, deferred or legacy).
    fn offers(&self, name: &str) -> bool;
}

pub use crate::sandbox::gate::line::{CallChannel, MidCallAsk, NetworkNote};

/// A change to the session made by a finished call.
pub type ContextModifier = Box<dyn FnOnce(&mut SessionContext) + Send>;

/// What a running call can see.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's id.
    pub session_id: Arc<str>,
    /// The session's workspace (canonical).
    pub cwd: Arc<PathBuf>,
    /// Cancelled when the call is cancelled (or its turn, or its session).
    pub cancel: CancellationToken,
    /// The session's tool catalogue, for tools that need it (ToolSearch).
    pub tools: Arc<dyn ToolCatalogue>,
    /// The session context as it was when the call started.
    pub session: Arc<SessionContext>,
    /// The session's settings.
    pub info: Arc<agentd_protocol::session::SessionInfo>,
    /// Where the call may keep files of its own (full command output).
    pub output_dir: Arc<PathBuf>,
    /// The session's permission rules (Glob and Grep skip what `Read` deny
    /// rules forbid; the sandbox hides the files they name).
    pub rules: Arc<crate::permission::rules::RuleSet>,
    /// What the permission check and the user granted this call.
    pub grant: CallGrant,
    /// What a tool asks for by type: the session's background jobs, the
    /// sandbox, and the lines a call of some kinds gets back to its session
    /// (see [`Services`]).
    pub services: Services,
}

/// What the permission check and the user granted one call (by default,
/// nothing: no sandbox, which only a call judged to need none runs in).
#[derive(Clone)]
pub struct CallGrant {
    /// The user's answers given with the approval of this call
    /// (AskUserQuestion).
    pub answers: Option<Arc<crate::permission::ask::Answers>>,
    /// A file outside the workspace (canonical) that a rule, bypass mode or
    /// the user explicitly allowed this call to open (Read).
    pub approved_outside: Option<Arc<PathBuf>>,
    /// The sandbox profile the permission check chose for this call (Bash).
    pub sandbox_profile: agentd_protocol::session::SandboxProfile,
    /// Nobody approved this call: a command gets no secrets.
    pub scrub_env: bool,
    /// The user approved this call (or the session is in bypass mode): a
    /// file tool may write a protected file it names.
    pub may_write_protected: bool,
    /// It runs unasked under `auto_allow: "effects"`: what it changes in
    /// the workspace waits for the user's approval (Bash, behind its
    /// layer).
    pub effects: bool,
}

impl Default for CallGrant {
    fn default() -> Self {
        CallGrant {
            answers: None,
            approved_outside: None,
            sandbox_profile: agentd_protocol::session::SandboxProfile::Off,
            scrub_env: false,
            may_write_protected: false,
            effects: false,
        }
    }
}

/// Services a tool asks its context for by type, which the executor
/// provides: the session's background jobs and sandbox to every call, a
/// line back to the session (a [`CallLine`], [`UserMessages`], the agent
/// host) only to calls of the kinds that use one. The context itself names
/// none of them.
#[derive(Clone, Default)]
pub struct Services {
    items: Vec<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Services {
    /// Provides `item` (in place of one of the same type).
    pub fn provide<T: std::any::Any + Send + Sync>(&mut self, item: Arc<T>) {
        self.items.retain(|i| !i.is::<T>());
        self.items.push(item);
    }

    /// The service of type `T`, if provided.
    pub fn get<T: std::any::Any + Send + Sync>(&self) -> Option<&T> {
        self.items.iter().find_map(|i| i.downcast_ref::<T>())
    }

    /// The service of type `T`, shared, if provided.
    pub fn shared<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.items.iter().find_map(|i| i.clone().downcast::<T>().ok())
    }
}

/// The session's plan file (plan mode): the one file of agentd's state
/// directory file tools may write, provided to every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFile(pub PathBuf);

/// A running call's line back to its session (mid-call asks, network
/// events): provided to shell calls.
pub type CallLine = Arc<dyn CallChannel>;

/// The session's event log, for what a call's work says after the call
/// (a Monitor's `monitor/event`s): provided to shell calls.
pub type SessionEvents = Arc<dyn Fn(agentd_protocol::turn::EventKind) + Send + Sync>;

/// Where a message for the user goes (a `user/message` event): provided to
/// calls of [`super::ToolKind::Messages`].
pub type UserMessages = Arc<dyn Fn(String) + Send + Sync>;

/// One progress report, type-erased: the data and its render text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgressReport {
    /// The tool's progress value, as JSON.
    pub data: serde_json::Value,
    /// One line for a UI.
    pub render: String,
}

/// Where a progress report goes once erased (the executor's event stream).
pub type ProgressReporter = Arc<dyn Fn(ProgressReport) + Send + Sync>;

/// What a tool reports while it runs: a value the event stream carries as
/// JSON, and its one line for a UI. A tool names no progress type; each
/// report is typed where it is sent.
pub trait ToolProgress: Serialize {
    /// One line for a progress report. Default: the value as JSON.
    fn render(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A call's progress channel. Reports are forwarded at once, ahead of
/// results.
pub struct ProgressSink {
    report: Option<ProgressReporter>,
}

impl ProgressSink {
    /// A sink that forwards to `report`.
    pub fn new(report: Option<ProgressReporter>) -> Self {
        ProgressSink { report }
    }

    /// A sink that drops every report.
    pub fn discard() -> Self {
        ProgressSink { report: None }
    }

    /// Reports progress (rendered and serialised only when someone listens).
    pub fn send(&self, progress: impl ToolProgress) {
        if let Some(report) = &self.report {
            let render = progress.render();
            let data = serde_json::to_value(&progress).unwrap_or(serde_json::Value::Null);
            report(ProgressReport { data, render });
        }
    }
}

impl ToolContext {
    /// What the Bash sandbox can do here: nothing when none was provided
    /// (a command granted a sandbox profile is then refused: see the Bash
    /// tool's launch).
    pub fn sandbox(&self) -> &crate::sandbox::Facility {
        static NONE: std::sync::LazyLock<crate::sandbox::Facility> =
            std::sync::LazyLock::new(crate::sandbox::Facility::none);
        self.services.get::<crate::sandbox::Facility>().unwrap_or(&NONE)
    }

    /// Writes `content` to `path` atomically ([`crate::fs::write_atomic_guarded`]):
    /// a protected file is refused, but the one the call named and the user
    /// approved (a grant covers that file, not a protected one a directory
    /// swapped for a link meanwhile would carry the write to); the temporary
    /// file is recorded where the daemon keeps its writes in progress. When
    /// the call has a [`crate::fs::history::CallRecorder`], what the file
    /// was is kept in the session's history first, and the change recorded
    /// once written (so the call's result lists it and a rewind undoes it).
    pub fn write_file(
        &self,
        path: &crate::fs::WsPath,
        content: &[u8],
    ) -> Result<crate::fs::Written, crate::fs::FsError> {
        use crate::permission::names_protected;
        let records = self.services.get::<crate::fs::pending::Records>().unwrap_or(&crate::fs::pending::Records::NONE);
        let named = path.abs();
        let approved = self.grant.may_write_protected && names_protected(&path.root, &named);
        // What the file was, kept in the session's history first (not the
        // plan file, which is agentd's own).
        let plan = self.services.get::<PlanFile>().is_some_and(|p| p.0 == named);
        let inside = self.inside(&named) && crate::fs::real_path(&named).is_none_or(|r| self.inside(&r));
        let capture = self
            .services
            .get::<crate::fs::history::CallRecorder>()
            .filter(|_| !plan)
            .map(|recorder| recorder.capture(path, inside));
        let protected = move |root: &Path, real: &Path| names_protected(root, real) && !(approved && real == named);
        let written = crate::fs::write_atomic_guarded(path, content, Some(&protected), records)?;
        if let Some(capture) = capture {
            capture.commit(&written.state);
        }
        Ok(written)
    }

    /// The service of type `T`, or an error naming what is missing.
    pub fn need<T: std::any::Any + Send + Sync>(&self) -> Result<&T, super::ToolError> {
        self.services
            .get::<T>()
            .ok_or_else(|| super::ToolError::new(format!("this session has no {}", std::any::type_name::<T>())))
    }

    /// Whether a (canonical) path is inside the workspace.
    pub fn inside(&self, path: &Path) -> bool {
        crate::fs::is_inside(&self.cwd, &self.info.add_dirs, path)
    }

    /// Checks a path the model gave: malformed is an error; outside the
    /// workspace is not (the permission check asks about it).
    pub fn validate_path(&self, input: &str) -> Result<(), crate::fs::FsError> {
        match self.resolve(input) {
            Ok(_) | Err(crate::fs::FsError::Outside { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The path a call works on: inside the workspace, or outside it only
    /// the path that was explicitly approved for this call.
    pub fn target_path(&self, input: &str) -> Result<crate::fs::WsPath, crate::fs::FsError> {
        match &self.grant.approved_outside {
            Some(approved) => Ok(crate::fs::approved_outside(approved)),
            None => self.resolve(input),
        }
    }

    /// `", outside the workspace"` when `input` is (its real path is)
    /// outside the workspace, for permission reasons; empty otherwise.
    pub fn outside_note(&self, input: &str) -> &'static str {
        let inside = self.resolve(input).is_ok_and(|p| crate::fs::real_path(&p.abs()).is_none_or(|r| self.inside(&r)));
        if inside { "" } else { ", outside the workspace" }
    }

    /// Resolves `input` (absolute, or relative to the session's cwd) inside
    /// one of the workspace's directories.
    pub fn resolve(&self, input: &str) -> Result<crate::fs::WsPath, crate::fs::FsError> {
        self.resolve_from(&self.cwd, input)
    }

    /// Like [`ToolContext::resolve`], relative paths starting at `here`.
    pub fn resolve_from(&self, here: &Path, input: &str) -> Result<crate::fs::WsPath, crate::fs::FsError> {
        crate::fs::resolve_in(&self.cwd, &self.info.add_dirs, here, input)
    }
}

/// A catalogue of no tools, for unit tests of tools that need none.
#[cfg(test)]
pub struct NoTools;

#[cfg(test)]
impl ToolCatalogue for NoTools {
    fn search(&self, _: &str, _: usize) -> (Vec<agentd_protocol::tools::ToolDefinition>, Vec<String>) {
        (Vec::new(), Vec::new())
    }
    fn is_deferred(&self, _: &str) -> bool {
        false
    }
    fn deferred_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn offers(&self, _: &str) -> bool {
        false
    }
}

#[cfg(test)]
impl ToolContext {
    /// A context for unit tests: a session in the temp dir with `tools`.
    pub fn for_test(tools: Arc<dyn ToolCatalogue>) -> ToolContext {
        use agentd_protocol::session::{PermissionMode, PermissionRules, SessionInfo, ToolOptions};
        let cancel = CancellationToken::new();
        let info = SessionInfo {
            session_id: "test".into(),
            cwd: std::env::temp_dir(),
            mode: PermissionMode::Default,
            permissions: PermissionRules::default(),
            tools: ToolOptions::default(),
            max_concurrency: 10,
            sibling_cancel: Default::default(),
            bash: Default::default(),
            jobs: Vec::new(),
            todos: Vec::new(),
            rule_errors: Vec::new(),
            permission_timeout_ms: agentd_protocol::session::DEFAULT_PERMISSION_TIMEOUT_MS,
            granted_rules: Vec::new(),
            pending_permissions: Vec::new(),
            add_dirs: Vec::new(),
            sandbox: Default::default(),
            mcp_servers: Default::default(),
            enable_project_mcp: false,
            mcp_tool_timeout_ms: agentd_protocol::mcp::DEFAULT_MCP_TOOL_TIMEOUT_MS,
            mcp_log_level: Default::default(),
            mcp: Vec::new(),
            mcp_errors: Vec::new(),
            web: Default::default(),
            worktree: None,
            tasks: Vec::new(),
            close_with_connection: false,
            skill_errors: Vec::new(),
            parent_session_id: None,
            children: Vec::new(),
            agent_errors: Vec::new(),
            session_hooks: None,
            enable_project_hooks: false,
            hooks: Vec::new(),
            hook_errors: Vec::new(),
            session_env: None,
            env: Default::default(),
            rules_in_force: Vec::new(),
            settings_notes: Vec::new(),
            untrusted: Vec::new(),
            name: None,
            discoverable: true,
            created_at_ms: 0,
        };
        let mut services = Services::default();
        services.provide(Arc::new(crate::process::jobs::JobTable::new(
            cancel.clone(),
            tokio_util::task::TaskTracker::new(),
        )));
        services.provide(Arc::new(crate::sandbox::Facility::none()));
        ToolContext {
            session_id: Arc::from("test"),
            cwd: Arc::new(std::env::temp_dir()),
            cancel: cancel.clone(),
            tools,
            session: Arc::new(SessionContext::default()),
            info: Arc::new(info),
            output_dir: Arc::new(std::env::temp_dir().join("agentd-test-output")),
            rules: Arc::new(crate::permission::rules::RuleSet::default()),
            grant: CallGrant { may_write_protected: true, ..CallGrant::default() },
            services,
        }
    }
}
