//! Sessions: a workspace, its configuration, and the cancellation node under
//! which all of its work runs (daemon → session → turn → call).

pub use crate::events::{AgentRunner, Follow, ReplayError};
pub use crate::executor::TurnError;
pub use crate::permission::ask::RespondError;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use agentd_protocol::hooks::HookEvent;
use agentd_protocol::session::{JobInfo, SessionCreateParams, SessionInfo};
use agentd_protocol::tools::ToolsListResult;
use agentd_protocol::turn::{Event, EventKind};
use tokio_util::sync::CancellationToken;

use crate::config::MAX_TOOL_CONCURRENCY_LIMIT;
use crate::executor::{Restored, SessionExecutor, Storage};
use crate::hooks::Completions;
use crate::store::{RECORD_VERSION, SessionRecord, Store, StoreError, Stored};
use crate::sync::MutexExt;
use crate::tool::{ExternalToolSource, Registry, SessionContext, ToolSet};

mod children;
mod files;
mod peers;
mod restore;
mod settings;
mod toolsets;
pub(crate) use settings::claude_settings_not_imported;
pub use settings::user_network_allow_all;
use settings::{
    bypass_disabled_by, check_env, session_env, session_hooks, session_rules, settings_files, user_sandbox_settings,
    user_trusts_project_hooks,
};

/// Why a session request was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No open session has this id.
    #[error("no open session with id {session_id:?}")]
    Unknown {
        /// The id asked for.
        session_id: String,
    },
    /// A field of `session/create` has a value the daemon cannot use.
    #[error("{field}: {why}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong, with the value.
        why: String,
    },
    /// The store failed; nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An open session.
pub struct Session {
    /// The session as stored.
    pub info: SessionInfo,
    /// Creation order, to list sessions oldest first.
    seq: u64,
    /// Cancelled when the session closes; the parent of its turns and calls.
    pub cancel: CancellationToken,
    /// Runs the session's tool calls; owns the session context.
    pub executor: Arc<SessionExecutor>,
    /// Background jobs of the daemon that ran it before a restart.
    past_jobs: Vec<JobInfo>,
    /// The executor's revision when the session was last saved.
    saved: AtomicU64,
    /// Closed and deleted: never saved again.
    removed: std::sync::atomic::AtomicBool,
    /// Its MCP servers.
    mcp: crate::mcp::SessionMcp,
    /// Its skills, as found when it opened (what the Skill tool offers).
    skills: Vec<agentd_protocol::workspace::SkillInfo>,
    /// `workspace/read`s of it served at once.
    read_slots: tokio::sync::Semaphore,
}

impl Session {
    /// What the session's calls changed in the workspace, kept to diff
    /// and rewind (`turn/diff`, `turn/rewind`).
    pub fn history(&self) -> Arc<crate::fs::history::History> {
        self.executor.history().clone()
    }

    /// Its MCP servers.
    pub fn mcp(&self) -> &crate::mcp::SessionMcp {
        &self.mcp
    }

    /// Its skills, by name.
    pub fn skills(&self) -> &[agentd_protocol::workspace::SkillInfo] {
        &self.skills
    }

    /// A copy of the session's context (what tool calls have changed).
    pub fn context(&self) -> SessionContext {
        self.executor.context()
    }

    /// The session as stored, with its background jobs as they are now.
    pub fn current_info(&self) -> SessionInfo {
        let mut info = self.info.clone();
        info.jobs = self.past_jobs.iter().cloned().chain(self.executor.jobs().list()).collect();
        info.todos = self.executor.with_context(|c| c.todos.clone());
        info.worktree = self.executor.with_context(|c| c.worktree.clone());
        info.tasks = self.executor.with_context(|c| c.tasks.clone());
        if let Some(mode) = self.executor.with_context(|c| c.mode) {
            info.mode = mode;
        }
        info.granted_rules = self.executor.granted_rules();
        info.rules_in_force.extend(info.granted_rules.iter().map(|rule| agentd_protocol::session::RuleInForce {
            kind: agentd_protocol::session::RuleKind::Allow,
            rule: rule.clone(),
            source: agentd_protocol::session::RuleSource::Granted,
            file: None,
        }));
        info.pending_permissions = self.executor.pending_permissions();
        info.mcp = self.mcp.status();
        info.hooks = self.executor.hooks().info();
        info
    }

    /// What the store keeps of the session now.
    fn record(&self) -> SessionRecord {
        SessionRecord {
            version: RECORD_VERSION,
            info: self.info.clone(),
            context: self.context(),
            granted_rules: self.executor.granted_rules(),
            jobs: self.past_jobs.iter().cloned().chain(self.executor.jobs().list()).collect(),
        }
    }

    /// The session's hooks (`hooks/register`, `hook/respond`).
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        self.executor.hooks()
    }

    /// `turn/submit`: adds tool uses to a turn; they start at once.
    pub fn submit(
        &self,
        turn_id: Option<String>,
        uses: Vec<agentd_protocol::turn::ToolUse>,
        end: bool,
    ) -> Result<String, TurnError> {
        self.executor.submit(turn_id, uses, end)
    }

    /// `tool/call`: one call, through the same path as a turn's.
    pub async fn call(
        &self,
        name: &str,
        input: serde_json::Value,
        tool_use_id: Option<String>,
    ) -> Result<agentd_protocol::tools::ToolCallResult, TurnError> {
        self.executor.call(name, input, tool_use_id).await
    }

    /// `turn/cancel`: one call, one turn, or everything.
    pub fn cancel(&self, turn_id: Option<&str>, tool_use_id: Option<&str>) -> Result<Vec<String>, TurnError> {
        self.executor.cancel(turn_id, tool_use_id)
    }

    /// `turn/discard`: drops a turn's calls.
    pub fn discard(&self, turn_id: &str) -> Result<Vec<String>, TurnError> {
        self.executor.discard(turn_id)
    }

    /// `permission/respond`: answers a permission request; the rule added,
    /// if any.
    pub fn respond(
        &self,
        params: &agentd_protocol::permission::PermissionRespondParams,
    ) -> Result<Option<String>, RespondError> {
        self.executor.respond(params)
    }

    /// `agent/respond`: answers one of this session's agent requests.
    pub fn respond_agent(&self, request_id: &str, result: String, is_error: bool) -> Result<(), String> {
        let answer = crate::agents::AgentAnswer { result, is_error };
        self.executor.agent_requests().respond(&self.info.session_id, request_id, answer)
    }

    /// `turn/stream`: the session's events after `after_seq`, then live;
    /// with `runs_agents`, the subscriber counts as a client that runs
    /// sub-agents (Task is offered) while the returned guard lives.
    pub fn follow(
        &self,
        after_seq: Option<u64>,
        runs_agents: bool,
    ) -> Result<(Follow, Option<AgentRunner>), ReplayError> {
        let log = self.executor.events();
        let follow = log.follow(after_seq)?;
        Ok((follow, runs_agents.then(|| log.agent_runner())))
    }

    /// Counts a subscriber that answers MCP elicitations while the guard
    /// lives.
    pub fn elicitor(&self) -> crate::events::Elicitor {
        self.executor.events().elicitor()
    }

    /// Counts a subscriber that answers MCP sampling requests while the
    /// guard lives.
    pub fn sampler(&self) -> crate::events::Elicitor {
        self.executor.events().sampler()
    }

    /// `mcp/sampling_respond`.
    pub fn respond_sampling(&self, params: agentd_protocol::mcp::McpSamplingRespondParams) -> Result<(), String> {
        self.mcp.respond_sampling(params)
    }

    /// `mcp/elicitation_respond`.
    pub fn respond_elicitation(&self, params: agentd_protocol::mcp::McpElicitationRespondParams) -> Result<(), String> {
        self.mcp.respond_elicitation(&params.request_id, params.action, params.content)
    }

    /// The MCP-style hints of one of the session's tools.
    pub fn hints(&self, name: &str) -> Option<agentd_protocol::tools::ToolHints> {
        self.tools().find(name).map(|t| t.hints())
    }

    /// The title and icons of one of the session's tools, if it has any.
    pub fn label(&self, name: &str) -> Option<agentd_protocol::tools::ToolLabel> {
        self.tools().find(name).and_then(|t| t.label())
    }

    /// `tools/list` for this session: Task only while a client that runs
    /// sub-agents follows it.
    pub fn tools_list(&self) -> ToolsListResult {
        let runner = self.executor.events().has_agent_runner();
        let tools = self.tools();
        self.executor.with_context(|ctx| tools.list_where(ctx, |name| runner || name != crate::tools::task::NAME))
    }

    /// The session's tools now: fixed when it opens (the list must not
    /// change under a prompt cache), except when one of its MCP servers
    /// says its list changed.
    pub fn tools(&self) -> Arc<ToolSet> {
        self.executor.tools()
    }
}

/// Sessions that close with their connection.
#[derive(Default)]
struct Owned {
    /// By connection.
    by_conn: HashMap<usize, Vec<String>>,
    /// Connections that have closed (the most recent ones).
    gone: std::collections::BTreeSet<usize>,
}

/// Every open session of the daemon.
pub struct SessionManager {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    next_seq: std::sync::atomic::AtomicU64,
    root: CancellationToken,
    store: Arc<dyn Store>,
    default_concurrency: u32,
    tracker: tokio_util::task::TaskTracker,
    state_dir: PathBuf,
    sandbox: Arc<crate::sandbox::Facility>,
    /// Makes sessions' tool sets.
    toolsets: Arc<toolsets::ToolSets>,
    /// Held while sessions are saved and while one is deleted, so a save
    /// never brings back a session just closed.
    saving: Mutex<()>,
    /// Sessions that close with the connection that created them.
    owned: Mutex<Owned>,
    /// Makes child sessions for the Task tool (set once the daemon's state
    /// exists).
    agent_host: std::sync::OnceLock<crate::agents::Host>,
    /// The daemon's MCP servers.
    mcp: Arc<crate::mcp::Pool>,
    /// What no tool may touch (the state directory, the TLS face's
    /// files), kept so while any session lives.
    off_limits: Arc<crate::fs::OffLimits>,
    /// The user's approvals of what workspaces hold (settings, `.mcp.json`,
    /// skills, agent definitions).
    trust: Arc<crate::trust::TrustStore>,
    /// The daemon's sessions as each sees the others (set once).
    peers: std::sync::OnceLock<crate::peers::PeerBook>,
    /// How many `notify_when_idle` requests wait on each session.
    idle_watchers: Mutex<HashMap<String, std::collections::HashSet<String>>>,
    /// The sessions' schedules.
    schedules: Arc<crate::schedule::Scheduler>,
    /// The daemon's call counters.
    metrics: Arc<crate::metrics::Metrics>,
    /// Held while a named session is committed.
    naming: Mutex<()>,
    /// Rung at every session's every event, and as sessions come and go
    /// (`daemon/watch`).
    bell: Arc<crate::events::Bell>,
}

/// A `session/create` checked, its MCP servers leased but not started:
/// [`SessionManager::commit`] opens it.
pub struct Prepared {
    info: SessionInfo,
    rules: crate::permission::rules::RuleSet,
    hooks: crate::hooks::HookSet,
    /// The session's MCP servers.
    pub mcp: crate::mcp::SessionMcp,
}

impl SessionManager {
    /// Sessions whose tokens are children of `root` (the daemon's token),
    /// offering tools from `registry` and `external`.
    // The composition root's parts, one each; issue 20 gathers them.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        root: CancellationToken,
        store: Arc<dyn Store>,
        default_concurrency: u32,
        registry: Arc<Registry>,
        external: Vec<Arc<dyn ExternalToolSource>>,
        tracker: tokio_util::task::TaskTracker,
        state_dir: PathBuf,
        sandbox: Arc<crate::sandbox::Facility>,
    ) -> Self {
        let ledger = sandbox.ledger.clone();
        SessionManager {
            sessions: Mutex::new(HashMap::new()),
            next_seq: std::sync::atomic::AtomicU64::new(0),
            root,
            store,
            default_concurrency,
            tracker,
            off_limits: Arc::new(crate::fs::OffLimits::guard(&state_dir, &[])),
            state_dir,
            sandbox,
            toolsets: Arc::new(toolsets::ToolSets::new(registry, external)),
            saving: Mutex::new(()),
            owned: Mutex::new(Owned::default()),
            agent_host: std::sync::OnceLock::new(),
            mcp: Arc::new(crate::mcp::Pool::new(None, ledger)),
            trust: Arc::new(crate::trust::TrustStore::open(Path::new("/nonexistent"), false, false)),
            peers: std::sync::OnceLock::new(),
            idle_watchers: Mutex::new(HashMap::new()),
            schedules: Arc::new(crate::schedule::Scheduler::open(Path::new("/nonexistent"), false)),
            metrics: Arc::default(),
            naming: Mutex::new(()),
            bell: Arc::default(),
        }
    }

    /// Uses `schedules` (the daemon's, durable ones kept in its state
    /// directory) in place of one that keeps nothing.
    pub fn with_schedules(mut self, schedules: Arc<crate::schedule::Scheduler>) -> Self {
        self.schedules = schedules;
        self
    }

    /// What rings when any session's work changes (`daemon/watch`).
    pub fn bell(&self) -> &Arc<crate::events::Bell> {
        &self.bell
    }

    /// The daemon's call counters (`--metrics`).
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// The sessions' schedules.
    pub fn schedules(&self) -> &Arc<crate::schedule::Scheduler> {
        &self.schedules
    }

    /// Starts firing schedules (after the sessions were restored: a
    /// durable schedule's session must be there to take it), until `stop`.
    pub fn start_schedules(self: &Arc<Self>, tracker: &tokio_util::task::TaskTracker, stop: CancellationToken) {
        let sessions = Arc::downgrade(self);
        let deliver: crate::schedule::Deliver = Arc::new(move |session_id: &str, event: EventKind| {
            let Some(sessions) = sessions.upgrade() else { return false };
            match sessions.handle(session_id) {
                Ok(session) => {
                    session.executor.events().push(event);
                    true
                }
                Err(_) => false,
            }
        });
        // Durable schedules of sessions that were not restored go now.
        self.schedules.keep_sessions(|id| self.handle(id).is_ok());
        tracker.spawn(self.schedules.clone().run(deliver, stop));
    }

    /// Uses `trust` for what workspaces hold (the daemon's, kept in its
    /// state directory) in place of one that trusts nothing and keeps
    /// nothing.
    pub fn with_trust(mut self, trust: Arc<crate::trust::TrustStore>) -> Self {
        self.trust = trust;
        self
    }

    /// The user's approvals of what workspaces hold.
    pub fn trust(&self) -> &Arc<crate::trust::TrustStore> {
        &self.trust
    }

    /// Uses `pool` for MCP servers (the daemon's, keeping tool lists in
    /// its state directory).
    pub fn with_mcp_pool(mut self, pool: Arc<crate::mcp::Pool>) -> Self {
        self.mcp = pool;
        self
    }

    /// Uses the daemon's [`crate::fs::OffLimits`] (with its TLS face's
    /// files) in place of the state directory's alone.
    pub fn with_off_limits(mut self, off_limits: Arc<crate::fs::OffLimits>) -> Self {
        self.off_limits = off_limits;
        self
    }

    /// The daemon's MCP servers.
    pub fn mcp_pool(&self) -> &Arc<crate::mcp::Pool> {
        &self.mcp
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.locked()
    }

    /// Opens a session without starting its MCP servers (those never seen
    /// offer no tools). Every field is checked before anything is stored, so
    /// a refused request changes nothing.
    pub fn create(&self, params: SessionCreateParams) -> Result<SessionInfo, SessionError> {
        let prepared = self.prepare(params)?;
        self.commit(prepared)
    }

    /// Checks a `session/create` and leases its MCP servers; nothing is
    /// stored or started.
    pub fn prepare(&self, params: SessionCreateParams) -> Result<Prepared, SessionError> {
        let Some(parent_id) = params.parent_session_id.clone() else { return self.prepare_own(params) };
        let asked = params.permissions.clone().unwrap_or_default();
        let params = self.inherit(&parent_id, params)?;
        let mut prepared = self.prepare_own(params)?;
        prepared.info.parent_session_id = Some(parent_id.clone());
        // The rules are the parent's own, as it has them (its session rules,
        // its workspace's and the user's settings, each anchored where it
        // was), with what the parent was granted and what the child adds:
        // nothing read again from the child's directory.
        let parent = self.handle(&parent_id)?;
        let mut rules = (*parent.executor.rules()).clone();
        let base = parent.info.cwd.clone();
        use crate::permission::rules::Origin;
        let granted = parent.executor.granted_rules();
        rules.add(&Origin::session("granted to the parent", &base), &granted, &[], &[]);
        rules.add(&Origin::session("child session", &base), &[], &asked.deny, &asked.ask);
        prepared.info.rule_errors = rules.errors.iter().map(|e| e.to_string()).collect();
        prepared.rules = rules;
        // The parent's hooks, as it has them (not read again).
        prepared.hooks = parent.executor.hooks().set().clone();
        prepared.info.hook_errors = prepared.hooks.errors.clone();
        prepared.info.hooks = prepared.hooks.info();
        prepared.info.enable_project_hooks = parent.info.enable_project_hooks;
        Ok(prepared)
    }

    fn prepare_own(&self, params: SessionCreateParams) -> Result<Prepared, SessionError> {
        let cwd = canonical_workspace(&params.cwd)?;
        // Settings a still-running job created are not obeyed: moved aside
        // before any is read (the workspace's, and the home directory's).
        let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
        for dir in std::iter::once(cwd.as_path()).chain(home.as_deref()) {
            for moved in crate::sandbox::quarantine_live(dir) {
                tracing::warn!("a running background job created {moved}: settings moved aside, not obeyed");
            }
        }
        let files = settings_files(&cwd, &self.trust);
        if params.mode == Some(agentd_protocol::session::PermissionMode::Bypass)
            && let Some(by) = bypass_disabled_by(&files)
        {
            return Err(SessionError::Invalid { field: "mode", why: format!("bypass mode is disabled by {by}") });
        }
        for (name, value) in params.env.iter().flatten() {
            check_env(name, value)
                .map_err(|why| SessionError::Invalid { field: "env", why: format!("{name}: {why}") })?;
        }
        if let Some(n) = params.max_concurrency {
            between("max_concurrency", "", n.into(), 1..=MAX_TOOL_CONCURRENCY_LIMIT.into())?;
        }
        let max_concurrency = params.max_concurrency.unwrap_or(self.default_concurrency);
        let bash = params.bash.unwrap_or_default();
        if bash.default_timeout_ms == 0 || bash.default_timeout_ms > bash.max_timeout_ms {
            return Err(SessionError::Invalid {
                field: "bash",
                why: format!(
                    "default_timeout_ms ({}) must be at least 1 and at most max_timeout_ms ({})",
                    bash.default_timeout_ms, bash.max_timeout_ms
                ),
            });
        }
        between("bash", "max_output_chars ", bash.max_output_chars, 100..=10_000_000)?;
        let permission_timeout_ms =
            params.permission_timeout_ms.unwrap_or(agentd_protocol::session::DEFAULT_PERMISSION_TIMEOUT_MS);
        between("permission_timeout_ms", "", permission_timeout_ms, 10..=86_400_000)?;
        let requested = params.add_dirs.unwrap_or_default();
        at_most("add_dirs", requested.len(), 32, "")?;
        let mcp_tool_timeout_ms =
            params.mcp_tool_timeout_ms.unwrap_or(agentd_protocol::mcp::DEFAULT_MCP_TOOL_TIMEOUT_MS);
        between("mcp_tool_timeout_ms", "", mcp_tool_timeout_ms, 1000..=86_400_000)?;
        let mcp_servers = params.mcp_servers.unwrap_or_default();
        at_most("mcp_servers", mcp_servers.len(), 64, " servers")?;
        let enable_project_mcp = params.enable_project_mcp.unwrap_or(false);
        if let Some(hooks) = &params.hooks
            && !hooks.is_object()
        {
            return Err(SessionError::Invalid {
                field: "hooks",
                why: "must be an object of event names (Claude Code's hooks shape)".into(),
            });
        }
        let enable_project_hooks = params.enable_project_hooks.unwrap_or(false) || user_trusts_project_hooks(&cwd);
        if let Some(name) = &params.name {
            if !crate::peers::valid_name(name) {
                return Err(SessionError::Invalid {
                    field: "name",
                    why: "1 to 64 letters, digits, '-', '_' or '.' (not \"main\", not a session id)".into(),
                });
            }
            if self.name_taken(name) {
                return Err(SessionError::Invalid { field: "name", why: format!("a session named {name:?} is open") });
            }
        }
        let mut add_dirs: Vec<PathBuf> = Vec::new();
        for dir in &requested {
            let dir = canonical_workspace(dir).map_err(|e| match e {
                SessionError::Invalid { why, .. } => SessionError::Invalid { field: "add_dirs", why },
                other => other,
            })?;
            if !dir.starts_with(&cwd) && !add_dirs.contains(&dir) {
                add_dirs.push(dir);
            }
        }
        let mut info = SessionInfo {
            session_id: uuid::Uuid::new_v4().to_string(),
            cwd,
            mode: params.mode.unwrap_or_default(),
            permissions: params.permissions.unwrap_or_default(),
            tools: params.tools.unwrap_or_default(),
            max_concurrency,
            sibling_cancel: params.sibling_cancel.unwrap_or_default(),
            bash,
            jobs: Vec::new(),
            todos: Vec::new(),
            rule_errors: Vec::new(),
            permission_timeout_ms,
            granted_rules: Vec::new(),
            pending_permissions: Vec::new(),
            add_dirs,
            sandbox: user_sandbox_settings(params.sandbox),
            mcp_servers,
            enable_project_mcp,
            mcp_tool_timeout_ms,
            mcp_log_level: params.mcp_log_level.unwrap_or_default(),
            mcp: Vec::new(),
            mcp_errors: Vec::new(),
            web: params.web.unwrap_or_default(),
            worktree: None,
            tasks: Vec::new(),
            close_with_connection: params.close_with_connection.unwrap_or(false),
            skill_errors: Vec::new(),
            parent_session_id: None,
            children: Vec::new(),
            agent_errors: Vec::new(),
            session_hooks: params.hooks,
            enable_project_hooks,
            hooks: Vec::new(),
            hook_errors: Vec::new(),
            session_env: params.env,
            env: Default::default(),
            rules_in_force: Vec::new(),
            settings_notes: Vec::new(),
            untrusted: Vec::new(),
            created_at_ms: now_ms(),
            name: params.name,
            discoverable: params.discoverable.unwrap_or(true),
        };
        let rules = session_rules(&mut info, &files);
        session_env(&mut info, &files);
        let hooks = session_hooks(&mut info, &files);
        info.untrusted = crate::trust::untrusted(&info.cwd, &self.trust);
        info.hooks = hooks.info();
        let mcp = self.session_mcp(&mut info);
        Ok(Prepared { info, rules, hooks, mcp })
    }

    /// The MCP servers `info` names (with the settings files), leased;
    /// what cannot be used goes to `info.mcp_errors`.
    fn session_mcp(&self, info: &mut SessionInfo) -> crate::mcp::SessionMcp {
        let (specs, errors) =
            crate::mcp::config::resolve(&info.mcp_servers, info.enable_project_mcp, &info.cwd, &self.trust);
        for e in &errors {
            tracing::warn!(session_id = %info.session_id, "MCP configuration: {e}");
        }
        info.mcp_errors = errors.clone();
        crate::mcp::SessionMcp::new(&self.mcp, &info.cwd, specs, errors, info.mcp_log_level)
    }

    /// Stores and opens a prepared session.
    pub fn commit(&self, prepared: Prepared) -> Result<SessionInfo, SessionError> {
        let Prepared { mut info, rules, hooks, mcp } = prepared;
        // A name is checked again and taken under one lock: two creates
        // asking for it at once get it once.
        let _naming = info.name.is_some().then(|| self.naming.locked());
        if let Some(name) = &info.name
            && self.name_taken(name)
        {
            return Err(SessionError::Invalid { field: "name", why: format!("a session named {name:?} is open") });
        }
        info.mcp = mcp.status();
        self.store.save(&SessionRecord {
            version: RECORD_VERSION,
            info: info.clone(),
            context: SessionContext::default(),
            granted_rules: Vec::new(),
            jobs: Vec::new(),
        })?;
        let info = self.open(info, rules, hooks, None, Vec::new(), mcp);
        // A child whose parent closed meanwhile goes at once.
        if let Some(parent) = &info.parent_session_id
            && self.handle(parent).is_err()
        {
            let _ = self.close(&info.session_id);
            return Err(SessionError::Unknown { session_id: parent.clone() });
        }
        tracing::info!(session_id = %info.session_id, cwd = %info.cwd.display(), "session created");
        Ok(info)
    }

    /// Puts a session in the table: a new one, or one the store had.
    fn open(
        &self,
        info: SessionInfo,
        rules: crate::permission::rules::RuleSet,
        hooks: crate::hooks::HookSet,
        restored: Option<Restored>,
        past_jobs: Vec<JobInfo>,
        mcp: crate::mcp::SessionMcp,
    ) -> SessionInfo {
        let mut info = info;
        // Skills, found now (the workspace's and the user's).
        let (skills, skill_errors) = crate::tools::skill::discover(&info.cwd, &rules, &self.trust);
        info.skill_errors = skill_errors;
        let mut skill_list: Vec<agentd_protocol::workspace::SkillInfo> = skills
            .iter()
            .map(|s| agentd_protocol::workspace::SkillInfo {
                name: s.name.clone(),
                description: s.description.clone(),
                source: s.source.to_owned(),
            })
            .collect();
        skill_list.sort_by(|a, b| a.name.cmp(&b.name));
        let skills = Arc::new(crate::tools::skill::SkillSource::new(skills));
        // Sub-agent definitions, likewise.
        let (agents, agent_errors) = crate::agents::discover(&info.cwd, &rules, &self.trust);
        info.agent_errors = agent_errors;
        let agents = Arc::new(crate::tools::task::AgentSource::new(agents));
        let sources = toolsets::Sources { mcp: mcp.servers(), skills, agents };
        let tools = self.toolsets.get(toolsets::options(&info), &sources);
        let seq = self.next_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancel = self.root.child_token();
        let storage = Storage {
            output_dir: self.state_dir.join("sessions").join(&info.session_id).join("output"),
            plan_file: self.off_limits.plan_file(&info.session_id),
            off_limits: self.off_limits.clone(),
            journal: self.store.journal(&info.session_id),
            history: Arc::new(crate::fs::history::History::open(
                self.state_dir.join("sessions").join(&info.session_id).join("history"),
                history_bounds(),
                self.off_limits.pending_writes(),
            )),
            restored,
        };
        let executor = SessionExecutor::new(
            &info,
            tools.clone(),
            storage,
            crate::executor::Checks { rules, hooks },
            self.sandbox.clone(),
            cancel.clone(),
            self.tracker.clone(),
        );
        if let Some(host) = self.agent_host.get() {
            executor.set_agent_host(host.clone());
        }
        if let Some(book) = self.peers.get() {
            executor.set_peers(book.clone());
        }
        executor.set_schedules(self.schedules.clone());
        executor.set_metrics(self.metrics.clone());
        executor.events().ring_on_push(self.bell.clone());
        if !info.untrusted.is_empty() {
            executor.events().push(EventKind::TrustRequired { files: info.untrusted.clone() });
        }
        if let Some(parent) = info.parent_session_id.as_ref().and_then(|p| self.lock().get(p).cloned()) {
            executor.share_net_slots(&parent.executor);
            executor.hooks().set_parent(parent.executor.hooks().clone());
        }
        let timeout = std::time::Duration::from_millis(info.permission_timeout_ms);
        mcp.attach(&info.session_id, executor.events(), timeout, &info.add_dirs, executor.hooks());
        mcp.watch_notices(self.on_notice(&info, sources, &executor));
        let saved = AtomicU64::new(executor.revision());
        let removed = Default::default();
        let session = Session {
            info: info.clone(),
            seq,
            cancel,
            executor,
            past_jobs,
            saved,
            removed,
            mcp,
            skills: skill_list,
            read_slots: tokio::sync::Semaphore::new(files::READ_SLOTS),
        };
        self.lock().insert(info.session_id.clone(), Arc::new(session));
        self.bell.ring();
        info
    }

    /// Saves what changed in each session since it was last saved, and
    /// syncs the event logs (called every 200 ms and at shutdown).
    pub fn flush(&self) {
        let _saving = self.saving.locked();
        let sessions: Vec<Arc<Session>> = self.lock().values().cloned().collect();
        for session in sessions {
            if session.removed.load(Ordering::Relaxed) {
                continue;
            }
            let revision = session.executor.revision();
            if session.saved.swap(revision, Ordering::Relaxed) == revision {
                continue;
            }
            let record = session.record();
            if let Err(e) = self.store.save(&record) {
                tracing::warn!("{e}");
            }
        }
        self.store.sync();
        for id in self.store.oversized() {
            if let Ok(session) = self.handle(&id) {
                self.store.compact(&id, &session.executor.events().snapshot());
            }
        }
    }

    /// Bytes the store takes.
    pub fn store_size(&self) -> u64 {
        self.store.size()
    }

    /// What a session does when one of its MCP servers says a list
    /// changed: its tools are made again (tools), or its clients are told
    /// (resources, prompts, a login needed).
    fn on_notice(
        &self,
        info: &SessionInfo,
        sources: toolsets::Sources,
        executor: &Arc<SessionExecutor>,
    ) -> crate::mcp::changes::NoticeSink {
        let sets = self.toolsets.clone();
        let info = info.clone();
        let executor = Arc::downgrade(executor);
        Arc::new(move |server: &str, notice: crate::mcp::changes::Notice| {
            use crate::mcp::changes::Notice;
            let Some(executor) = executor.upgrade() else { return };
            let event = match notice {
                Notice::List(agentd_protocol::mcp::McpList::Tools) => {
                    return sets.refresh(&info, &sources, &executor);
                }
                Notice::List(list) => EventKind::McpListChanged { server: server.to_owned(), list },
                Notice::AuthRequired(message) => EventKind::McpAuthRequired { server: server.to_owned(), message },
            };
            executor.events().push(event);
        })
    }

    /// Every open session, oldest first.
    pub fn list(&self) -> Vec<SessionInfo> {
        let map = self.lock();
        let mut sessions: Vec<&Arc<Session>> = map.values().collect();
        sessions.sort_by_key(|s| s.seq);
        sessions.into_iter().map(|s| s.current_info()).collect()
    }

    /// One session.
    pub fn get(&self, session_id: &str) -> Result<SessionInfo, SessionError> {
        let mut info = self.handle(session_id).map(|s| s.current_info())?;
        info.children = self.children(session_id);
        Ok(info)
    }

    /// One open session, to work in.
    pub fn handle(&self, session_id: &str) -> Result<Arc<Session>, SessionError> {
        self.lock().get(session_id).cloned().ok_or_else(|| SessionError::Unknown { session_id: session_id.to_owned() })
    }

    /// Cancels everything a session runs.
    pub fn cancel_all(&self, session_id: &str) {
        if let Ok(session) = self.handle(session_id) {
            let _ = session.executor.cancel(None, None);
        }
    }

    /// Notes that `session_id` closes when connection `conn` does.
    /// A connection that is already gone closes the session at once (its
    /// `session/create` finished after the connection ended).
    pub fn own(&self, conn: usize, session_id: &str) {
        let mut owned = self.owned.locked();
        if owned.gone.contains(&conn) {
            drop(owned);
            let _ = self.close(session_id);
            return;
        }
        owned.by_conn.entry(conn).or_default().push(session_id.to_owned());
    }

    /// Closes the sessions connection `conn` created to close with it.
    pub fn close_owned(&self, conn: usize) {
        let ids = {
            let mut owned = self.owned.locked();
            // Remembered (the last few thousand) for a create still running.
            owned.gone.insert(conn);
            while owned.gone.len() > 4096 {
                owned.gone.pop_first();
            }
            owned.by_conn.remove(&conn).unwrap_or_default()
        };
        // The hooks it registered go, and what they were asked goes on.
        let sessions: Vec<Arc<Session>> = self.lock().values().cloned().collect();
        for session in sessions {
            session.executor.hooks().connection_closed(conn);
        }
        for id in ids {
            if self.close(&id).is_ok() {
                tracing::info!(session_id = %id, "closed with its connection");
            }
        }
    }

    /// Closes a session: cancels everything running under it and forgets it.
    pub fn close(&self, session_id: &str) -> Result<SessionInfo, SessionError> {
        let session = self
            .lock()
            .remove(session_id)
            .ok_or_else(|| SessionError::Unknown { session_id: session_id.to_owned() })?;
        // Its children go with it: found after it left the table, so a child
        // committed meanwhile is either seen here or refused by `commit`.
        for child in self.children(session_id) {
            let _ = self.close(&child);
        }
        self.schedules.session_closed(session_id);
        self.bell.ring();
        let hooks = session.executor.hooks().clone();
        hooks.close();
        session.executor.close();
        session.cancel.cancel();
        session.mcp.release();
        if hooks.wants(HookEvent::SessionEnd, "other") {
            // After the session: nobody waits for it, and the daemon's
            // shutdown ends it.
            let token = self.root.child_token();
            self.tracker.spawn(async move {
                let input = serde_json::json!({ "reason": "other" });
                let about = crate::hooks::About::default();
                hooks.run(HookEvent::SessionEnd, "other", input, &about, &token, Completions::Pushed).await;
            });
        }
        crate::tools::web_fetch::forget_session(session_id);
        let _saving = self.saving.locked();
        session.removed.store(true, Ordering::Relaxed);
        // Full outputs of its commands go with the session.
        let dir = self.state_dir.join("sessions").join(session_id);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(session_id, "could not remove {}: {e}", dir.display());
        }
        // And its plan file (where the file tools wrote it).
        let plan = self.off_limits.plan_file(session_id);
        if let Err(e) = std::fs::remove_file(&plan)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(session_id, "could not remove {}: {e}", plan.display());
        }
        if let Err(e) = self.store.remove_session(session_id) {
            tracing::warn!(session_id, "session closed but its record stays: {e}");
        }
        tracing::info!(session_id, "session closed");
        Ok(session.info.clone())
    }

    /// Runs the session's `SessionStart` hooks (`source`: `startup` for a
    /// new session, `resume` for one a restart brought back) and returns
    /// the context they added.
    pub async fn session_start(&self, session_id: &str, source: &str) -> Vec<String> {
        let Ok(session) = self.handle(session_id) else { return Vec::new() };
        let hooks = session.executor.hooks().clone();
        if !hooks.wants(HookEvent::SessionStart, source) {
            return Vec::new();
        }
        let input = serde_json::json!({ "source": source });
        let cancel = session.cancel.child_token();
        drop(session);
        let about = crate::hooks::About::default();
        hooks.run(HookEvent::SessionStart, source, input, &about, &cancel, Completions::Pushed).await.context
    }

    /// Stops every session for a daemon shutdown: each cancels its calls
    /// and jobs (their results are recorded); the sessions stay in the
    /// store, to be restored by the next daemon.
    pub fn stop_all(&self) {
        let sessions: Vec<Arc<Session>> = self.lock().values().cloned().collect();
        for session in sessions {
            session.executor.stop();
            session.cancel.cancel();
        }
    }

    /// The number of open sessions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `value` (of `field`, or of its part `what`) within `range`.
fn between(
    field: &'static str,
    what: &str,
    value: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<(), SessionError> {
    if range.contains(&value) {
        return Ok(());
    }
    let (low, high) = range.into_inner();
    Err(SessionError::Invalid { field, why: format!("{what}must be between {low} and {high}, got {value}") })
}

/// At most `max` entries (`unit` names them) in `field`.
fn at_most(field: &'static str, len: usize, max: usize, unit: &str) -> Result<(), SessionError> {
    if len <= max {
        return Ok(());
    }
    Err(SessionError::Invalid { field, why: format!("at most {max}{unit}, got {len}") })
}

/// An absolute, existing directory, with symlinks and `..` resolved.
pub(crate) fn canonical_workspace(cwd: &Path) -> Result<PathBuf, SessionError> {
    let invalid = |why: String| SessionError::Invalid { field: "cwd", why };
    if !cwd.is_absolute() {
        return Err(invalid(format!("must be an absolute path, got {:?}", cwd.display().to_string())));
    }
    let canonical = std::fs::canonicalize(cwd).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => invalid(format!("{} does not exist", cwd.display())),
        _ => invalid(format!("cannot resolve {}: {e}", cwd.display())),
    })?;
    if !canonical.is_dir() {
        return Err(invalid(format!("{} is not a directory", cwd.display())));
    }
    Ok(canonical)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The bounds of a session's change history: the defaults, or in a test
/// build a smaller per-file bound from `AGENTD_TEST_HISTORY_FILE_BYTES`
/// (so a test need not write 64 MiB).
fn history_bounds() -> crate::fs::history::Bounds {
    let bounds = crate::fs::history::Bounds::default();
    #[cfg(feature = "test-tools")]
    if let Some(n) = std::env::var("AGENTD_TEST_HISTORY_FILE_BYTES").ok().and_then(|n| n.parse().ok()) {
        return crate::fs::history::Bounds { file_bytes: n, ..bounds };
    }
    bounds
}
#[cfg(test)]
mod tests;
