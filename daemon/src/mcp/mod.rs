//! MCP client (a session's external tools): servers from Claude Code's
//! `mcpServers` configuration (`config`), one pool of running servers per
//! daemon (`pool`), and their tools as deferred agentd tools (`tools`).

pub mod answers;
pub mod auth;
pub mod binary;
pub mod changes;
pub mod config;
pub mod elicit;
mod handler;
pub mod listing;
pub mod logs;
pub mod pool;
pub mod progress;
pub mod prompts;
pub mod resources;
pub mod tools;

use std::sync::{Arc, Mutex};

use agentd_protocol::mcp::McpServerStatus;

use crate::sync::MutexExt;

pub use config::ServerSpec;
pub use pool::{Lease, Pool};

/// A session's MCP servers: what it was configured with, what could not be
/// used, and its leases on the pool's servers (given back on close).
#[derive(Default)]
pub struct SessionMcp {
    specs: Vec<ServerSpec>,
    servers: tools::Servers,
    leases: Mutex<Vec<Lease>>,
    /// The session listens to its servers' log messages while these live.
    logs: Mutex<Vec<logs::LogGuard>>,
    /// The session hears of its servers' list changes while these live.
    lists: Mutex<Vec<changes::NoticeGuard>>,
    /// The session's event log, once it exists.
    events: Arc<std::sync::OnceLock<std::sync::Weak<crate::events::EventLog>>>,
    /// Its servers' elicitations, and its place among their targets.
    elicitations: Mutex<Option<Arc<elicit::Elicitations>>>,
    targets: Mutex<Vec<elicit::TargetGuard>>,
    /// Entries that could not be used, one line each.
    pub errors: Vec<String>,
}

impl SessionMcp {
    /// The servers of `specs` on `workspace`, leased from `pool`.
    /// The session listens to their log messages at `log_level` or above
    /// from now on (before any server starts, so a starting server is told
    /// that level); they reach its events once [`SessionMcp::attach`]ed.
    pub fn new(
        pool: &Arc<Pool>,
        workspace: &std::path::Path,
        specs: Vec<ServerSpec>,
        errors: Vec<String>,
        log_level: agentd_protocol::mcp::McpLogLevel,
    ) -> Self {
        let leases: Vec<Lease> =
            specs.iter().map(|s| pool.acquire(&s.name, workspace, &s.transport, &s.secrets)).collect();
        let servers = tools::Servers(Arc::new(leases.iter().map(|l| l.server.clone()).collect()));
        let mcp = SessionMcp {
            specs,
            servers,
            leases: Mutex::new(leases),
            logs: Mutex::new(Vec::new()),
            lists: Mutex::new(Vec::new()),
            events: Arc::default(),
            elicitations: Mutex::new(None),
            targets: Mutex::new(Vec::new()),
            errors,
        };
        mcp.watch_logs(log_level);
        mcp
    }

    /// Whether one of the session's servers is named `name`.
    pub fn has_server(&self, name: &str) -> bool {
        self.servers.iter().any(|s| s.name == name)
    }

    /// The prompts of the session's servers (`mcp/prompts`).
    pub async fn prompts(&self) -> (Vec<agentd_protocol::mcp::McpPrompt>, Vec<String>) {
        prompts::list(&self.servers.0).await
    }

    /// One prompt of one of the session's servers (`mcp/get_prompt`).
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: &std::collections::BTreeMap<String, String>,
    ) -> Result<agentd_protocol::mcp::McpGetPromptResult, String> {
        let Some(found) = self.servers.iter().find(|s| s.name == server) else {
            let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
            return Err(format!("this session has no MCP server {server:?} (it has: {})", names.join(", ")));
        };
        prompts::get(found, name, arguments).await
    }

    /// Joins the session `session_id` to its servers once its event log
    /// exists: their log messages become `mcp/log` events, their
    /// elicitations `mcp/elicitation` events (answered within `timeout`),
    /// until the session closes.
    pub fn attach(
        &self,
        session_id: &str,
        events: &Arc<crate::events::EventLog>,
        timeout: std::time::Duration,
        add_dirs: &[std::path::PathBuf],
        hooks: &Arc<crate::hooks::Hooks>,
    ) {
        let _ = self.events.set(Arc::downgrade(events));
        let elicitations = Arc::new(elicit::Elicitations::with_dirs(session_id, events, timeout, add_dirs.to_vec()));
        elicitations.set_hooks(hooks);
        hooks.set_mcp(Arc::new(self.servers.clone()));
        let guards = self.servers.iter().map(|s| s.elicit_targets().add(elicitations.clone()));
        self.targets.locked().extend(guards);
        *self.elicitations.locked() = Some(elicitations);
    }

    /// `mcp/elicitation_respond`.
    pub fn respond_elicitation(
        &self,
        request_id: &str,
        action: agentd_protocol::mcp::McpElicitationAction,
        content: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<(), String> {
        let elicitations = self.elicitations.locked().clone();
        match elicitations {
            Some(e) => e.respond(request_id, action, content),
            None => Err(format!("no elicitation {request_id:?} waits for an answer in this session")),
        }
    }

    /// `mcp/sampling_respond`.
    pub fn respond_sampling(&self, params: agentd_protocol::mcp::McpSamplingRespondParams) -> Result<(), String> {
        let elicitations = self.elicitations.locked().clone();
        let Some(e) = elicitations else {
            return Err(format!("no sampling request {:?} waits for an answer in this session", params.request_id));
        };
        e.respond_sample(&params.request_id, params.decision, params.result, params.error)
    }

    /// Listens to each server's log messages at `level` or above; they
    /// become `mcp/log` events of the session once it is attached, until
    /// it closes.
    fn watch_logs(&self, level: agentd_protocol::mcp::McpLogLevel) {
        let slot = self.events.clone();
        let sink: logs::LogSink = Arc::new(move |entry: logs::LogEntry| {
            if let Some(events) = slot.get().and_then(std::sync::Weak::upgrade) {
                events.push(agentd_protocol::turn::EventKind::McpLog {
                    server: entry.server,
                    level: entry.level,
                    logger: entry.logger,
                    data: entry.data,
                    dropped: entry.dropped,
                });
            }
        });
        let guards = self.servers.iter().map(|s| s.watch_logs(level, sink.clone()));
        self.logs.locked().extend(guards);
    }

    /// Tells `sink` when one of its servers' lists changes (tools: once the
    /// pool has read the new list) or one needs a login (now, for those
    /// that already do), until the session closes.
    pub fn watch_notices(&self, sink: changes::NoticeSink) {
        for server in self.servers.iter() {
            if let Some(why) = server.auth_required() {
                sink(&server.name, changes::Notice::AuthRequired(why));
            }
        }
        let guards = self.servers.iter().map(|s| s.notices().watch(sink.clone()));
        self.lists.locked().extend(guards);
    }

    /// One of its servers, by name.
    pub fn server(&self, name: &str) -> Result<&Arc<pool::Server>, String> {
        self.servers.iter().find(|s| s.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
            format!("this session has no MCP server {name:?} (it has: {})", names.join(", "))
        })
    }

    /// Its servers, to make its tool set from (again, when one's tools
    /// change).
    pub fn servers(&self) -> tools::Servers {
        self.servers.clone()
    }

    /// Starts the servers whose tools were never seen (in parallel, each
    /// within the start-up timeout), so the session's tool list has them.
    pub async fn discover(&self) {
        futures_util::future::join_all(self.servers.iter().map(|s| s.discover())).await;
    }

    /// How each server stands.
    pub fn status(&self) -> Vec<McpServerStatus> {
        self.specs
            .iter()
            .zip(self.servers.iter())
            .map(|(spec, server)| {
                let (state, last_error) = server.state();
                McpServerStatus {
                    name: spec.name.clone(),
                    source: spec.source,
                    transport: spec.transport.kind().to_owned(),
                    state,
                    tools: server.tools().map_or(0, |t| t.len() as u32),
                    last_error,
                    auth: server.auth_state(),
                }
            })
            .collect()
    }

    /// Gives the leases back: a server no other session uses stops.
    pub fn release(&self) {
        self.logs.locked().clear();
        self.lists.locked().clear();
        self.targets.locked().clear();
        self.leases.locked().clear();
    }
}
