//! The resource tools of a session with MCP servers, with Claude Code's
//! inputs: `ListMcpResources` (every server's resources, or one's) and
//! `ReadMcpResource` (one resource; its bytes kept as a file of the call,
//! as a tool result's are).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::pool::Server;
use super::tools::{MAX_RESULT_CHARS, Servers, server_rule};
use crate::permission::Decision;
use crate::tool::erased::DynTool;
use crate::tool::{ExternalToolSource, ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Input of ListMcpResources.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ListInput {
    /// Optional server name to filter resources by.
    #[serde(default)]
    pub server: Option<String>,
}

/// ListMcpResources: the resources of the session's MCP servers.
pub struct ListMcpResources(pub Servers);

impl Tool for ListMcpResources {
    type Input = ListInput;
    type Output = String;

    const NAME: &'static str = "ListMcpResources";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn aliases(&self) -> &'static [&'static str] {
        &["ListMcpResourcesTool"]
    }

    fn description(&self) -> String {
        "Lists available resources from configured MCP servers. Each resource object includes a 'server' field \
         indicating which server it's from."
            .into()
    }

    fn check_permissions(&self, _input: &ListInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    // External: deferred whatever the session's size (so no
    // `should_defer`).
    fn is_external(&self) -> bool {
        true
    }

    async fn call(
        &self,
        input: ListInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        let denied = |s: &Arc<Server>| server_rule(&ctx, &s.name) == Some(crate::permission::rules::RuleKind::Deny);
        let servers: Vec<&Arc<Server>> = match &input.server {
            Some(name) => {
                let server = self.0.find(name)?;
                if denied(server) {
                    return Err(ToolError::new(format!("MCP server {name} is denied by a rule in this session")));
                }
                vec![server]
            }
            None => self.0.0.iter().filter(|s| !denied(s)).collect(),
        };
        let mut all = Vec::new();
        for server in servers {
            let listed = tokio::select! {
                listed = list_resources(server) => listed,
                _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
            };
            match listed {
                Ok(list) => all.extend(list),
                Err(e) if input.server.is_some() => return Err(ToolError::new(e)),
                Err(e) => tracing::debug!(server = %server.name, "no resources: {e}"),
            }
        }
        if all.is_empty() {
            return Ok(ToolOutput::new(
                "No resources found. MCP servers may still provide tools even if they have no resources.".into(),
            ));
        }
        Ok(ToolOutput::new(serde_json::to_string(&all).unwrap_or_default()))
    }

    fn render_use(&self, input: &ListInput) -> String {
        match &input.server {
            Some(s) => format!("Listing the resources of {s}"),
            None => "Listing MCP resources".into(),
        }
    }

    fn render_result(&self, output: &String) -> String {
        let n = serde_json::from_str::<Vec<Value>>(output).map(|v| v.len()).unwrap_or(0);
        format!("{n} resources")
    }
}

async fn list_resources(server: &Server) -> Result<Vec<Value>, String> {
    let name = &server.name;
    let peer = server.peer().await.map_err(|e| format!("MCP server {name} is not available: {e}"))?;
    let list = super::listing::paginate(
        |cursor| {
            let peer = peer.clone();
            async move {
                let params = cursor.map(|c| serde_json::from_value(serde_json::json!({ "cursor": c }))).transpose();
                let page = peer.list_resources(params.map_err(|e| e.to_string())?).await.map_err(|e| e.to_string())?;
                serde_json::to_value(&page).map_err(|e| e.to_string())
            }
        },
        "resources",
    )
    .await
    .map_err(|e| server.redact(format!("MCP server {name}: listing resources failed: {e}")))?;
    Ok(list
        .into_iter()
        .map(|mut v| {
            v["server"] = Value::String(name.clone());
            v
        })
        .collect())
}

/// Input of ReadMcpResource.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadInput {
    /// The MCP server name
    pub server: String,
    /// The resource URI to read
    pub uri: String,
}

/// ReadMcpResource: one resource of one of the session's MCP servers.
pub struct ReadMcpResource(pub Servers);

impl Tool for ReadMcpResource {
    type Input = ReadInput;
    type Output = String;

    const NAME: &'static str = "ReadMcpResource";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn aliases(&self) -> &'static [&'static str] {
        &["ReadMcpResourceTool"]
    }

    fn description(&self) -> String {
        "Reads a specific resource from an MCP server, identified by server name and resource URI.".into()
    }

    fn validate_input(&self, input: &ReadInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        self.0.find(&input.server).map(|_| ()).map_err(|e| ValidationError::new(e.message))
    }

    /// A resource may be anything the server can reach (files, mail):
    /// allowed only by a rule for the whole server, refused by a deny of
    /// it, asked otherwise.
    fn check_permissions(&self, input: &ReadInput, ctx: &ToolContext) -> Decision {
        use crate::permission::rules::RuleKind;
        match server_rule(ctx, &input.server) {
            Some(RuleKind::Deny) => {
                Decision::deny(format!("MCP server {} is denied by a rule in this session", input.server))
            }
            Some(RuleKind::Allow) => Decision::Allow,
            _ => Decision::Ask {
                reason: format!("read {} from MCP server {}", input.uri, input.server),
                suggestion: Some(format!("mcp__{}", input.server)),
            },
        }
    }

    // External: deferred whatever the session's size (so no
    // `should_defer`).
    fn is_external(&self) -> bool {
        true
    }

    async fn call(
        &self,
        input: ReadInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<String>, ToolError> {
        let server = self.0.find(&input.server)?;
        let name = &server.name;
        let read = async {
            let peer = server.peer().await.map_err(|e| format!("MCP server {name} is not available: {e}"))?;
            let _in_flight = server.elicit_targets().in_flight(&ctx.session_id);
            let failed = |e: &dyn std::fmt::Display| format!("MCP server {name}: reading {} failed: {e}", input.uri);
            let mut params = rmcp::model::ReadResourceRequestParams::new(input.uri.clone());
            // A server of MCP 2026-07-28 may ask for input first.
            for _round in 0..super::answers::MAX_ROUNDS {
                match peer.read_resource_once(params.clone()).await.map_err(|e| failed(&e))? {
                    rmcp::model::ReadResourceResponse::Complete(result) => return Ok(result),
                    rmcp::model::ReadResourceResponse::InputRequired(asked) => {
                        let elicit = server.elicit_targets();
                        let (responses, state) = super::answers::rounds(name, &server.workspace, elicit, asked)
                            .await
                            .map_err(|e| failed(&e))?;
                        params.input_responses = responses;
                        params.request_state = state;
                    }
                    _ => return Err(failed(&"the answer was not a resource")),
                }
            }
            Err(failed(&format_args!("it asked for input more than {} times", super::answers::MAX_ROUNDS)))
        };
        let result = tokio::select! {
            r = read => r.map_err(ToolError::new)?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
        };
        let value = serde_json::to_value(&result).unwrap_or_default();
        // Bytes are kept as files of the call, as a tool result's are (Read
        // reads them); the result says where.
        let prefix = format!("mcp-{}", uuid::Uuid::new_v4().simple());
        let mut saver = super::binary::Saver::new((*ctx.output_dir).clone(), &prefix);
        let contents: Vec<Value> = value
            .get("contents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| match c.get("blob").and_then(Value::as_str) {
                Some(blob) => {
                    let uri = c.get("uri").and_then(Value::as_str).unwrap_or_default();
                    let media_type = c.get("mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream");
                    let what = format!("resource {uri}");
                    let said = saver.save(super::binary::Binary { what: &what, media_type, data: blob });
                    serde_json::json!({ "uri": uri, "mimeType": media_type, "text": said })
                }
                None => c.clone(),
            })
            .collect();
        let text = serde_json::to_string(&serde_json::json!({ "contents": contents })).unwrap_or_default();
        if text.chars().count() > MAX_RESULT_CHARS {
            return Err(ToolError::new(format!(
                "the resource is {} characters, more than the {MAX_RESULT_CHARS} a result may hold",
                text.chars().count()
            )));
        }
        Ok(ToolOutput::new(text))
    }

    fn render_use(&self, input: &ReadInput) -> String {
        format!("Reading {} from {}", input.uri, input.server)
    }

    fn render_result(&self, output: &String) -> String {
        format!("{} characters", output.chars().count())
    }
}

/// The resource tools of a session with MCP servers.
pub struct ResourceTools(pub Vec<Arc<dyn DynTool>>);

impl ResourceTools {
    /// ListMcpResources and ReadMcpResource over `servers`.
    pub fn new(servers: Servers) -> Self {
        let list = Arc::new(crate::tool::erased::Erased::new(ListMcpResources(servers.clone())));
        let read = Arc::new(crate::tool::erased::Erased::new(ReadMcpResource(servers)));
        ResourceTools(vec![list, read])
    }
}

impl ExternalToolSource for ResourceTools {
    fn source_name(&self) -> &str {
        "mcp"
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.0.clone()
    }
}
