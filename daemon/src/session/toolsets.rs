//! Sessions' tool sets. Sessions with the same options and the same
//! sources share one (its definitions are most of a session's memory). A
//! session's set is made again when one of its MCP servers' tool list
//! changes, and the session is told what changed (`tools/changed`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

use agentd_protocol::session::SessionInfo;
use agentd_protocol::tools::ToolDefinition;
use agentd_protocol::turn::EventKind;

use crate::executor::SessionExecutor;
use crate::tool::toolset::ToolSetOptions;
use crate::tool::{DeferralSettings, ExternalToolSource, Registry, ToolSet};

/// What a session's tools are made of beside the daemon's own.
#[derive(Clone)]
pub struct Sources {
    /// Its MCP servers.
    pub mcp: crate::mcp::tools::Servers,
    /// Its skills, as found when it opened.
    pub skills: Arc<crate::tools::skill::SkillSource>,
    /// Its sub-agent definitions, likewise.
    pub agents: Arc<crate::tools::task::AgentSource>,
}

/// Makes tool sets, sharing those already made.
pub struct ToolSets {
    registry: Arc<Registry>,
    external: Vec<Arc<dyn ExternalToolSource>>,
    made: Mutex<HashMap<String, Weak<ToolSet>>>,
    /// Held while a session's set is made again and replaced, so two
    /// servers changing at once cannot leave a session with the older set.
    refreshing: Mutex<()>,
}

/// The pipeline's options for the session `info`.
pub fn options(info: &SessionInfo) -> ToolSetOptions<'_> {
    ToolSetOptions {
        simple: info.tools.simple,
        disabled: &info.tools.disabled,
        deny_rules: &info.permissions.deny,
        deferral: DeferralSettings::from(info.tools.defer.as_ref()),
    }
}

impl ToolSets {
    /// Tool sets of `registry`'s tools and `external`'s, beside each
    /// session's own sources.
    pub fn new(registry: Arc<Registry>, external: Vec<Arc<dyn ExternalToolSource>>) -> Self {
        ToolSets { registry, external, made: Mutex::new(HashMap::new()), refreshing: Mutex::new(()) }
    }

    /// The tool set for `options` and `sources`: the one a live session
    /// already has, or a new one.
    pub fn get(&self, options: ToolSetOptions<'_>, sources: &Sources) -> Arc<ToolSet> {
        let key = format!(
            "{}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{}\u{0}{}\u{0}{}",
            options.simple,
            options.disabled,
            options.deny_rules,
            options.deferral,
            sources.mcp.identity(),
            sources.skills.identity(),
            sources.agents.identity()
        );
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = made.get(&key).and_then(Weak::upgrade) {
            return set;
        }
        let mut external = self.external.clone();
        external.extend(sources.mcp.sources());
        external.push(sources.skills.clone());
        external.push(sources.agents.clone());
        let set = Arc::new(ToolSet::build(&self.registry, &external, options));
        made.retain(|_, weak| weak.strong_count() > 0);
        made.insert(key, Arc::downgrade(&set));
        set
    }

    /// After `server`'s tool list changed: the session's tools made again;
    /// when its tools of that server differ, they replace the old ones
    /// and the session gets a `tools/changed` event.
    pub fn refresh(&self, info: &SessionInfo, sources: &Sources, executor: &SessionExecutor, server: &str) {
        let _one = self.refreshing.lock().unwrap_or_else(|e| e.into_inner());
        let new = self.get(options(info), sources);
        let prefix = format!("mcp__{server}__");
        let before = of_server(&executor.tools(), &prefix);
        let after = of_server(&new, &prefix);
        let old = executor.replace_tools(new);
        let added: Vec<String> = after.keys().filter(|n| !before.contains_key(*n)).cloned().collect();
        let removed: Vec<String> = before.keys().filter(|n| !after.contains_key(*n)).cloned().collect();
        let changed: Vec<String> =
            after.iter().filter(|(n, d)| before.get(*n).is_some_and(|b| b != *d)).map(|(n, _)| n.clone()).collect();
        drop(old);
        if added.is_empty() && removed.is_empty() && changed.is_empty() {
            return;
        }
        tracing::info!(session_id = %info.session_id, server, added = added.len(), removed = removed.len(),
            changed = changed.len(), "the session's MCP tools changed");
        executor.events().push(EventKind::ToolsChanged { server: server.to_owned(), added, removed, changed });
    }
}

/// The definitions of a set's tools whose names start with `prefix`.
fn of_server(set: &ToolSet, prefix: &str) -> BTreeMap<String, ToolDefinition> {
    set.definitions().filter(|d| d.name.starts_with(prefix)).map(|d| (d.name.clone(), d.clone())).collect()
}
