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
use crate::sync::MutexExt;
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
        only: info.tools.only.as_deref(),
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
            "{}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{}\u{0}{}\u{0}{}",
            options.simple,
            options.disabled,
            options.only,
            options.deny_rules,
            options.deferral,
            sources.mcp.identity(),
            sources.skills.identity(),
            sources.agents.identity()
        );
        let mut made = self.made.locked();
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

    /// After an MCP server's tool list changed: the session's tools made
    /// again; when its MCP tools differ, they replace the old ones and the
    /// session gets a `tools/changed` event for each server whose tools
    /// differ (another server's change taken in meanwhile is said too).
    pub fn refresh(&self, info: &SessionInfo, sources: &Sources, executor: &SessionExecutor) {
        let _one = self.refreshing.locked();
        let new = self.get(options(info), sources);
        let before = mcp_tools(&executor.tools());
        let after = mcp_tools(&new);
        drop(executor.replace_tools(new));
        let mut by_server: BTreeMap<&str, [Vec<String>; 3]> = BTreeMap::new();
        for (name, (server, definition)) in &after {
            match before.get(name) {
                None => by_server.entry(server).or_default()[0].push(name.clone()),
                Some((_, old)) if old != definition => by_server.entry(server).or_default()[2].push(name.clone()),
                Some(_) => {}
            }
        }
        for (name, (server, _)) in &before {
            if !after.contains_key(name) {
                by_server.entry(server).or_default()[1].push(name.clone());
            }
        }
        for (server, [added, removed, changed]) in by_server {
            tracing::info!(session_id = %info.session_id, server, added = added.len(), removed = removed.len(),
                changed = changed.len(), "the session's MCP tools changed");
            executor.events().push(EventKind::ToolsChanged { server: server.to_owned(), added, removed, changed });
        }
    }
}

/// The MCP tools a set offers (`mcp__<server>__<tool>`), by name, with
/// their server and definition.
fn mcp_tools(set: &ToolSet) -> BTreeMap<String, (String, ToolDefinition)> {
    set.definitions()
        .filter_map(|d| {
            let (server, _) = d.name.strip_prefix("mcp__")?.split_once("__")?;
            Some((d.name.clone(), (server.to_owned(), d.clone())))
        })
        .collect()
}
