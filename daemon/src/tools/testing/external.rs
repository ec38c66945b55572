//! Test builds only: a synthetic external (MCP-like) tool source with as
//! many tools as asked, of realistic size, to exercise deferral and measure
//! the tokens it saves. Its tools implement `DynTool` directly, as MCP tools
//! will (their schemas arrive as JSON, not Rust types).

use std::any::Any;
use std::sync::Arc;

use agentd_protocol::tools::ContentBlock;
use serde_json::{Value, json};

use crate::tool::erased::{BoxFuture, InputError};
use crate::tool::{CallOutcome, DynTool, ExternalToolSource, PreparedCall, ToolContext, context::ProgressReporter};

const VERBS: [&str; 8] = ["create", "get", "list", "update", "delete", "search", "archive", "assign"];
const NOUNS: [&str; 8] = ["issue", "comment", "channel", "message", "file", "user", "project", "label"];

/// A source of `count` synthetic tools named `mcp__<source>__<verb>_<noun>`.
pub struct SyntheticSource {
    name: String,
    tools: Vec<Arc<dyn DynTool>>,
}

impl SyntheticSource {
    /// A source called `name` with `count` tools (at most 64).
    pub fn new(name: &str, count: usize) -> Self {
        let tools = VERBS
            .iter()
            .flat_map(|v| NOUNS.iter().map(move |n| (*v, *n)))
            .take(count)
            .map(|(verb, noun)| Arc::new(SyntheticTool::new(name, verb, noun)) as Arc<dyn DynTool>)
            .collect();
        SyntheticSource { name: name.to_owned(), tools }
    }
}

impl ExternalToolSource for SyntheticSource {
    fn source_name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.tools.clone()
    }
}

struct SyntheticTool {
    name: String,
    description: String,
    schema: Value,
}

impl SyntheticTool {
    fn new(source: &str, verb: &str, noun: &str) -> Self {
        let description = format!(
            "{verb} a {noun} in the {source} workspace. Use this when the user asks to {verb} a {noun} \
             or when a task needs the current state of one. Returns the {noun} as JSON with its id, \
             title, body, author, labels and timestamps; fails when the {noun} does not exist or the \
             token lacks access."
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "workspace": {"type": "string", "description": format!("The {source} workspace slug, e.g. `acme`.")},
                "id": {"type": "string", "description": format!("The {noun}'s id, as returned by list_{noun}.")},
                "title": {"type": "string", "description": format!("Title of the {noun} (create and update only).")},
                "body": {"type": "string", "description": "Markdown body; mentions like @name notify people."},
                "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels to set, replacing existing ones."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Most items to return (list and search)."},
                "cursor": {"type": "string", "description": "Pagination cursor from a previous call's `next_cursor`."}
            },
            "required": ["workspace"],
            "additionalProperties": false
        });
        SyntheticTool { name: format!("mcp__{source}__{verb}_{noun}"), description, schema }
    }
}

impl DynTool for SyntheticTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn aliases(&self) -> &[&'static str] {
        &[]
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn prepare(&self, input: Value) -> Result<Box<dyn PreparedCall>, InputError> {
        let has_workspace = input.get("workspace").is_some_and(Value::is_string);
        if !input.is_object() || !has_workspace {
            return Err(InputError {
                tool: self.name.clone(),
                field: "workspace".into(),
                detail: "field `workspace`: missing or not a string".into(),
            });
        }
        Ok(Box::new(SyntheticCall { tool: self.name.clone(), input }))
    }

    fn render_grouped(&self, calls: &[&dyn PreparedCall]) -> String {
        format!("{} ×{}", self.name, calls.len())
    }
}

struct SyntheticCall {
    tool: String,
    input: Value,
}

impl PreparedCall for SyntheticCall {
    fn tool_name(&self) -> &str {
        &self.tool
    }

    fn input_any(&self) -> &dyn Any {
        &self.input
    }

    fn render_use(&self) -> String {
        format!("Calling {}", self.tool)
    }

    fn render_rejected(&self, reason: &str) -> String {
        format!("{} refused: {reason}", self.tool)
    }

    fn run(self: Box<Self>, _ctx: ToolContext, _progress: Option<ProgressReporter>) -> BoxFuture<CallOutcome> {
        Box::pin(async move {
            CallOutcome {
                content: vec![ContentBlock::text(format!("{} called with {}", self.tool, self.input))],
                is_error: false,
                render: format!("{} done", self.tool),
                modifier: None,
                structured: None,
                content_meta: Box::default(),
                failure: None,
            }
        })
    }
}
