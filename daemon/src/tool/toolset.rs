//! A session's tools: the filter pipeline and deferred discovery.
//!
//! Pipeline, in this order:
//! 1. **mode**: simple mode keeps Bash, Read and Edit only;
//! 2. **blanket deny**: a deny rule that names a tool with no pattern
//!    (`Bash`, not `Bash(rm:*)`), or a tool in the session's `disabled`
//!    list, removes it; `mcp__server` removes every tool of that server;
//! 3. **enabled**: tools whose `is_enabled()` is false go;
//! 4. **merge** built-in and external tools, sort by name, dedupe with the
//!    built-in winning.
//!
//! Steps 1–3 apply to external tools too: simple mode means three tools,
//! and a deny rule means the model never sees the tool, wherever it is from.
//!
//! Then **deferral**: external (MCP) tools are listed by name only in
//! `auto` and `always` mode; built-ins that say `should_defer` too in
//! `always` mode, and in `auto` mode once the session has more than
//! `max_tools` tools or their definitions more than `max_tokens` estimated
//! tokens; `always_load` tools never are. ToolSearch, never deferred, is
//! listed only when something is deferred.
//!
//! Tools of earlier Claude Code versions (`is_legacy`: `LS`, `MultiEdit`)
//! are never listed nor found by ToolSearch, but a call that names them runs.
//!
//! The result is computed once per session and serialized the same way every
//! time, so the list is byte-identical across calls (prompt caches).

use std::sync::Arc;

use agentd_protocol::tools::{DeferralMode, DeferralOptions, ToolDefinition, ToolsListResult};

use super::context::SessionContext;
use super::erased::DynTool;
use super::registry::Registry;

/// The name of the tool that loads deferred tools.
pub const TOOL_SEARCH: &str = "ToolSearch";

/// The tools simple mode keeps.
pub const SIMPLE_MODE_TOOLS: [&str; 3] = ["Bash", "Read", "Edit"];

/// Default `max_tools` of auto deferral.
pub const DEFAULT_DEFER_MAX_TOOLS: u32 = 40;
/// Default `max_tokens` of auto deferral.
pub const DEFAULT_DEFER_MAX_TOKENS: u32 = 8000;

/// A source of tools from outside the daemon (an MCP server). Its tools are
/// always deferrable.
pub trait ExternalToolSource: Send + Sync {
    /// The source's name (the MCP server's), used in `mcp__<name>__<tool>`.
    fn source_name(&self) -> &str;
    /// The source's tools now.
    fn tools(&self) -> Vec<Arc<dyn DynTool>>;
}

/// Deferral settings with the defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferralSettings {
    /// auto, always or never.
    pub mode: DeferralMode,
    /// Auto: defer above this many tools.
    pub max_tools: u32,
    /// Auto: defer above this many estimated tokens of definitions.
    pub max_tokens: u32,
}

impl From<Option<&DeferralOptions>> for DeferralSettings {
    fn from(o: Option<&DeferralOptions>) -> Self {
        DeferralSettings {
            mode: o.map(|o| o.mode).unwrap_or_default(),
            max_tools: o.and_then(|o| o.max_tools).unwrap_or(DEFAULT_DEFER_MAX_TOOLS),
            max_tokens: o.and_then(|o| o.max_tokens).unwrap_or(DEFAULT_DEFER_MAX_TOKENS),
        }
    }
}

/// What the pipeline needs to know about the session.
#[derive(Debug, Clone, Copy)]
pub struct ToolSetOptions<'a> {
    /// Simple mode.
    pub simple: bool,
    /// Tool names the session does not want offered.
    pub disabled: &'a [String],
    /// When given, the only names whose tools may be offered.
    pub only: Option<&'a [String]>,
    /// The session's deny rules (only blanket ones matter here).
    pub deny_rules: &'a [String],
    /// Deferral.
    pub deferral: DeferralSettings,
}

/// Why a call cannot find its tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The session has no such tool.
    #[error("no tool named {name:?} is available in this session; the available tools are: {available}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names the model can use.
        available: String,
    },
    /// The tool is deferred and was never loaded.
    #[error(
        "{name} is a deferred tool whose definition has not been loaded yet; call {TOOL_SEARCH} with query \"select:{name}\" first, then call {name}"
    )]
    NotLoaded {
        /// The tool's name.
        name: String,
    },
}

/// One tool with its definition serialized once.
#[derive(Clone)]
struct Entry {
    tool: Arc<dyn DynTool>,
    definition: ToolDefinition,
    tokens: u64,
}

impl Entry {
    fn new(tool: Arc<dyn DynTool>) -> Self {
        let definition = tool.definition();
        let tokens = estimate_tokens(&definition);
        Entry { tool, definition, tokens }
    }
}

/// The estimated tokens of a definition: about four characters a token, the
/// usual rule of thumb for JSON and English.
pub fn estimate_tokens(definition: &ToolDefinition) -> u64 {
    let chars = serde_json::to_string(definition).map(|s| s.chars().count()).unwrap_or(0);
    (chars as u64).div_ceil(4)
}

/// A session's tools after the pipeline.
#[derive(Clone, Default)]
pub struct ToolSet {
    /// Listed in full, sorted by name.
    listed: Vec<Entry>,
    /// Listed by name only, sorted by name.
    deferred: Vec<Entry>,
    /// Never listed, but callable: tools of earlier Claude Code versions.
    legacy: Vec<Entry>,
}

impl ToolSet {
    /// Runs the pipeline over `registry` and `external`.
    pub fn build(
        registry: &Registry,
        external: &[Arc<dyn ExternalToolSource>],
        options: ToolSetOptions<'_>,
    ) -> ToolSet {
        let keep = |tool: &Arc<dyn DynTool>| -> bool {
            // 1. mode
            if options.simple && !SIMPLE_MODE_TOOLS.contains(&tool.name()) {
                return false;
            }
            // 2. blanket deny, disabled, and not among the only ones
            if options.deny_rules.iter().any(|rule| blanket_rule_matches(rule, tool.as_ref()))
                || options.disabled.iter().any(|name| tool.answers_to(name.trim()))
                || options.only.is_some_and(|only| !only.iter().any(|name| tool.answers_to(name.trim())))
            {
                return false;
            }
            // 3. enabled
            tool.is_enabled()
        };
        let builtin: Vec<Arc<dyn DynTool>> = registry.tools().iter().filter(|t| keep(t)).cloned().collect();
        let external: Vec<Arc<dyn DynTool>> = external.iter().flat_map(|s| s.tools()).filter(|t| keep(t)).collect();

        // 4. merge, sort, dedupe (built-ins first, so they win).
        let mut merged: Vec<Arc<dyn DynTool>> = Vec::with_capacity(builtin.len() + external.len());
        // (A set: a server may list 10,000 tools, and sets are remade when
        // its list changes.)
        let mut names = std::collections::HashSet::with_capacity(builtin.len() + external.len());
        for tool in builtin.into_iter().chain(external) {
            if !names.insert(tool.name().to_owned()) {
                tracing::warn!(tool = tool.name(), "an external tool has the name of another tool; it is not offered");
                continue;
            }
            merged.push(tool);
        }
        merged.sort_by(|a, b| a.name().cmp(b.name()));

        let (legacy, merged): (Vec<_>, Vec<_>) = merged.into_iter().partition(|t| t.is_legacy());
        let legacy: Vec<Entry> = legacy.into_iter().map(Entry::new).collect();

        // Deferral.
        let (search, rest): (Vec<_>, Vec<_>) = merged.into_iter().partition(|t| t.name() == TOOL_SEARCH);
        let entries: Vec<Entry> = rest.into_iter().map(Entry::new).collect();
        let total_tokens: u64 = entries.iter().map(|e| e.tokens).sum();
        let over = entries.len() as u64 > u64::from(options.deferral.max_tools)
            || total_tokens > u64::from(options.deferral.max_tokens);
        // External (MCP) tools are deferred in auto mode whatever their
        // number (as in Claude Code); built-ins that say `should_defer` only
        // once the session is over a threshold.
        let deferrable = |e: &Entry| {
            !e.tool.always_load()
                && match options.deferral.mode {
                    DeferralMode::Never => false,
                    DeferralMode::Always => e.tool.is_external() || e.tool.should_defer(),
                    DeferralMode::Auto => e.tool.is_external() || (over && e.tool.should_defer()),
                }
        };
        // Without ToolSearch (denied, simple mode) nothing could load a
        // deferred tool, so nothing is deferred.
        let defer = !search.is_empty() && entries.iter().any(deferrable);
        if !defer {
            return ToolSet { listed: entries, deferred: Vec::new(), legacy };
        }
        let (deferred, mut listed): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(|e| deferrable(e));
        listed.extend(search.into_iter().map(Entry::new));
        listed.sort_by(|a, b| a.definition.name.cmp(&b.definition.name));
        ToolSet { listed, deferred, legacy }
    }

    /// The tool a call names, if the session has it (listed, deferred or
    /// legacy).
    pub fn find(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        let all = || self.listed.iter().chain(&self.deferred).chain(&self.legacy);
        all().find(|e| e.tool.name() == name).or_else(|| all().find(|e| e.tool.answers_to(name))).map(|e| &e.tool)
    }

    /// Is `name` (canonical) a deferred tool?
    pub fn is_deferred(&self, name: &str) -> bool {
        self.deferred.iter().any(|e| e.tool.name() == name)
    }

    /// Names of the deferred tools, sorted.
    pub fn deferred_names(&self) -> Vec<String> {
        self.deferred.iter().map(|e| e.definition.name.clone()).collect()
    }

    /// The definitions of the tools offered (listed and deferred).
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.listed.iter().chain(&self.deferred).map(|e| &e.definition)
    }

    /// Names of the tools listed in full, sorted.
    pub fn listed_names(&self) -> Vec<String> {
        self.listed.iter().map(|e| e.definition.name.clone()).collect()
    }

    /// The tool a call may use: listed tools, and deferred tools once loaded.
    pub fn resolve_for_call(&self, name: &str, ctx: &SessionContext) -> Result<Arc<dyn DynTool>, LookupError> {
        let Some(tool) = self.find(name) else {
            let mut available = self.listed_names();
            available.extend(ctx.loaded_tools.iter().cloned());
            return Err(LookupError::Unknown { name: name.to_owned(), available: available.join(", ") });
        };
        if self.is_deferred(tool.name()) && !ctx.loaded_tools.iter().any(|n| n == tool.name()) {
            return Err(LookupError::NotLoaded { name: tool.name().to_owned() });
        }
        Ok(tool.clone())
    }

    /// The `tools/list` result: listed definitions, then the deferred ones
    /// loaded since (in load order, so the cached prefix stays the same).
    pub fn list(&self, ctx: &SessionContext) -> ToolsListResult {
        self.list_where(ctx, |_| true)
    }

    /// Like [`ToolSet::list`], with only the listed tools `keep` accepts.
    pub fn list_where(&self, ctx: &SessionContext, keep: impl Fn(&str) -> bool) -> ToolsListResult {
        let shown: Vec<&Entry> = self.listed.iter().filter(|e| keep(&e.definition.name)).collect();
        let mut tools: Vec<ToolDefinition> = shown.iter().map(|e| e.definition.clone()).collect();
        let mut estimated_tokens: u64 = shown.iter().map(|e| e.tokens).sum();
        let loaded = |e: &&Entry| ctx.loaded_tools.contains(&e.definition.name);
        for name in &ctx.loaded_tools {
            if let Some(e) = self.deferred.iter().find(|e| e.definition.name == *name) {
                tools.push(e.definition.clone());
                estimated_tokens += e.tokens;
            }
        }
        let still_deferred: Vec<&Entry> = self.deferred.iter().filter(|e| !loaded(e)).collect();
        ToolsListResult {
            tools,
            deferred: still_deferred.iter().map(|e| e.definition.name.clone()).collect(),
            estimated_tokens,
            deferred_tokens_saved: still_deferred.iter().map(|e| e.tokens).sum(),
            hints: Default::default(),
            labels: Default::default(),
        }
    }

    /// ToolSearch: `select:A,B` returns exactly those (and the names it did
    /// not know); otherwise the query's words rank deferred tools by name
    /// (strongly) and description (weakly); `+word` must match.
    pub fn search(&self, query: &str, max_results: usize) -> (Vec<ToolDefinition>, Vec<String>) {
        if let Some(list) = query.trim().strip_prefix("select:") {
            let mut found = Vec::new();
            let mut unknown = Vec::new();
            for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let definition = self.find(name).filter(|t| !t.is_legacy()).and_then(|t| self.definition_of(t.name()));
                match definition {
                    Some(d) if !found.iter().any(|f: &ToolDefinition| f.name == d.name) => found.push(d),
                    Some(_) => {}
                    None => unknown.push(name.to_owned()),
                }
            }
            return (found, unknown);
        }
        let words: Vec<(bool, String)> = query
            .split_whitespace()
            .map(|w| match w.strip_prefix('+') {
                Some(req) => (true, req.to_lowercase()),
                None => (false, w.to_lowercase()),
            })
            .filter(|(_, w)| !w.is_empty())
            .collect();
        let mut scored: Vec<(u32, &Entry)> = self
            .deferred
            .iter()
            .filter_map(|e| {
                let name = e.definition.name.to_lowercase();
                let parts = name_parts(&e.definition.name);
                let description = e.definition.description.to_lowercase();
                let mut score = 0;
                for (required, word) in &words {
                    let mut s = 0;
                    if parts.iter().any(|p| p == word) {
                        s += 10;
                    } else if name.contains(word.as_str()) {
                        s += 5;
                    }
                    if description.contains(word.as_str()) {
                        s += 2;
                    }
                    if *required && s == 0 {
                        return None;
                    }
                    score += s;
                }
                (score > 0).then_some((score, e))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.definition.name.cmp(&b.1.definition.name)));
        let found = scored.into_iter().take(max_results).map(|(_, e)| e.definition.clone()).collect();
        (found, Vec::new())
    }

    fn definition_of(&self, name: &str) -> Option<ToolDefinition> {
        self.listed.iter().chain(&self.deferred).find(|e| e.definition.name == name).map(|e| e.definition.clone())
    }
}

/// Does a deny rule remove `tool` outright? `Name` (no pattern) names a
/// tool or alias; `mcp__server` and `mcp__server__*` name every tool of
/// that MCP server.
pub fn blanket_rule_matches(rule: &str, tool: &dyn DynTool) -> bool {
    let mut rule = rule.trim();
    // `Bash(*)` is every command, so the tool itself.
    if let Some((name, inner)) = rule.strip_suffix(')').and_then(|r| r.split_once('('))
        && inner.trim() == "*"
        && tool.name() == "Bash"
    {
        rule = name.trim();
    }
    if rule.is_empty() || rule.contains('(') {
        return false;
    }
    if tool.answers_to(rule) {
        return true;
    }
    crate::permission::rules::mcp_server_rule_names(rule, tool.name())
}

/// A tool name split into lower-case words: `mcp__slack__send_message` →
/// mcp, slack, send, message; `NotebookEdit` → notebook, edit.
fn name_parts(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for chunk in name.split(['_', '-']).filter(|c| !c.is_empty()) {
        let mut current = String::new();
        for ch in chunk.chars() {
            if ch.is_uppercase() && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            current.extend(ch.to_lowercase());
        }
        if !current.is_empty() {
            parts.push(current);
        }
    }
    parts
}

#[cfg(test)]
#[path = "toolset_tests.rs"]
mod tests;

impl super::context::ToolCatalogue for ToolSet {
    fn search(&self, query: &str, max_results: usize) -> (Vec<ToolDefinition>, Vec<String>) {
        ToolSet::search(self, query, max_results)
    }

    fn is_deferred(&self, name: &str) -> bool {
        ToolSet::is_deferred(self, name)
    }

    fn deferred_names(&self) -> Vec<String> {
        ToolSet::deferred_names(self)
    }

    fn offers(&self, name: &str) -> bool {
        self.find(name).is_some()
    }
}
