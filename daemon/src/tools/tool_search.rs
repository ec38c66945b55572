//! ToolSearch: loads the full definitions of deferred tools on demand
//! (deferred discovery, see `tool::toolset`). `select:A,B` loads exactly
//! those; any other query ranks the deferred tools by name and description.

use agentd_protocol::tools::{ContentBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Most results one search returns.
const MAX_RESULTS_LIMIT: usize = 50;

/// Loads deferred tools.
#[derive(Debug, Clone, Copy)]
pub struct ToolSearch;

/// Input of ToolSearch.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSearchInput {
    /// What to look for. Either `select:Name1,Name2` to load those tools by
    /// exact name, or keywords describing the capability you need (e.g.
    /// `slack send message`); prefix a keyword with `+` to require it.
    pub query: String,
    /// Most tools to return for a keyword query (default 5, at most 50).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub max_results: Option<usize>,
}

/// What ToolSearch found.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSearchOutput {
    /// The query.
    pub query: String,
    /// Full definitions of the tools found; they can be called now.
    pub matches: Vec<ToolDefinition>,
    /// Names in a `select:` query that no tool has.
    pub unknown: Vec<String>,
    /// Deferred tools not loaded by this search.
    pub still_deferred: Vec<String>,
}

impl Tool for ToolSearch {
    type Input = ToolSearchInput;
    type Output = ToolSearchOutput;

    const NAME: &'static str = crate::tool::toolset::TOOL_SEARCH;
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Loads the full definitions of deferred tools so you can call them. Some tools are listed \
         by name only (the deferred tools); before calling one, search for it here. Use \
         `select:Name1,Name2` when you know the names, or keywords for what you need. The tools \
         returned can be called right after this."
            .to_owned()
    }

    fn validate_input(&self, input: &ToolSearchInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.query.trim().is_empty() {
            return Err(ValidationError::new("query is empty: give tool names after `select:` or keywords"));
        }
        match input.max_results {
            Some(0) => Err(ValidationError::new("max_results must be at least 1")),
            Some(n) if n > MAX_RESULTS_LIMIT => {
                Err(ValidationError::new(format!("max_results must be at most {MAX_RESULTS_LIMIT}")))
            }
            _ => Ok(()),
        }
    }

    fn check_permissions(&self, _input: &ToolSearchInput, _ctx: &ToolContext) -> Decision {
        // It only reveals definitions of tools the session already has.
        Decision::Allow
    }

    fn always_load(&self) -> bool {
        true
    }

    async fn call(
        &self,
        input: ToolSearchInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<ToolSearchOutput>, ToolError> {
        let (matches, unknown) = ctx.tools.search(&input.query, input.max_results.unwrap_or(5));
        let loaded: Vec<String> = matches.iter().map(|d| d.name.clone()).filter(|n| ctx.tools.is_deferred(n)).collect();
        let still_deferred = ctx.tools.deferred_names().into_iter().filter(|n| !loaded.contains(n)).collect();
        let output = ToolSearchOutput { query: input.query, matches, unknown, still_deferred };
        Ok(ToolOutput::with_modifier(
            output,
            Box::new(move |session| {
                for name in loaded {
                    if !session.loaded_tools.contains(&name) {
                        session.loaded_tools.push(name);
                    }
                }
            }),
        ))
    }

    fn result_content(&self, out: &ToolSearchOutput) -> Vec<ContentBlock> {
        let mut text = String::new();
        if out.matches.is_empty() {
            text.push_str(&format!("No tools matched {:?}.", out.query));
        } else {
            text.push_str(&format!(
                "Loaded {} tool definition(s); you can call them now:\n<functions>\n",
                out.matches.len()
            ));
            for d in &out.matches {
                text.push_str(&serde_json::to_string(d).unwrap_or_default());
                text.push('\n');
            }
            text.push_str("</functions>");
        }
        if !out.unknown.is_empty() {
            text.push_str(&format!("\nNo tool is named: {}.", out.unknown.join(", ")));
        }
        if out.matches.is_empty() && !out.still_deferred.is_empty() {
            text.push_str(&format!("\nDeferred tools: {}.", out.still_deferred.join(", ")));
        }
        vec![ContentBlock::text(text)]
    }

    fn render_use(&self, input: &ToolSearchInput) -> String {
        format!("Searching tools for {:?}", input.query)
    }

    fn render_result(&self, out: &ToolSearchOutput) -> String {
        match out.matches.len() {
            0 => "No tools found".to_owned(),
            n => {
                let names: Vec<&str> = out.matches.iter().map(|d| d.name.as_str()).collect();
                format!("Loaded {n} tool{}: {}", if n == 1 { "" } else { "s" }, names.join(", "))
            }
        }
    }
}
