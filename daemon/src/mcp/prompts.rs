//! A session's MCP prompts (`mcp/prompts`, `mcp/get_prompt`): in Claude
//! Code the slash commands `/mcp__<server>__<prompt>`, offered here for a
//! harness to offer the same way. Asked of the servers that declare
//! prompts; nothing a model calls (a prompt is the user's choice).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentd_protocol::mcp::{McpGetPromptResult, McpPrompt, McpPromptArgument, McpPromptMessage};
use serde_json::Value;

use super::pool::Server;

/// How long a server may take to list or fill in its prompts.
const PROMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest prompt passed on (its messages as JSON).
const MAX_PROMPT_BYTES: usize = 1 << 20;

/// Whether the running server declared prompts.
fn offers_prompts(peer: &rmcp::service::Peer<rmcp::service::RoleClient>) -> bool {
    peer.peer_info().is_some_and(|i| i.capabilities.prompts.is_some())
}

/// The prompts of `servers`, and one line for each server that could not
/// be asked.
pub async fn list(servers: &[Arc<Server>]) -> (Vec<McpPrompt>, Vec<String>) {
    let asked = futures_util::future::join_all(servers.iter().map(|s| list_one(s))).await;
    let mut prompts = Vec::new();
    let mut errors = Vec::new();
    for result in asked {
        match result {
            Ok(list) => prompts.extend(list),
            Err(e) => errors.push(e),
        }
    }
    (prompts, errors)
}

async fn list_one(server: &Server) -> Result<Vec<McpPrompt>, String> {
    let name = &server.name;
    let listing = async {
        let peer = server.peer().await.map_err(|e| format!("MCP server {name} is not available: {e}"))?;
        if !offers_prompts(&peer) {
            return Ok(Vec::new());
        }
        super::listing::paginate(
            |cursor| {
                let peer = peer.clone();
                async move {
                    let params = cursor.map(|c| serde_json::from_value(serde_json::json!({ "cursor": c }))).transpose();
                    let page =
                        peer.list_prompts(params.map_err(|e| e.to_string())?).await.map_err(|e| e.to_string())?;
                    serde_json::to_value(&page).map_err(|e| e.to_string())
                }
            },
            "prompts",
        )
        .await
        .map_err(|e| format!("MCP server {name}: listing prompts failed: {e}"))
    };
    let listed = tokio::time::timeout(PROMPT_TIMEOUT, listing)
        .await
        .unwrap_or_else(|_| Err(format!("MCP server {name}: listing prompts took over {} s", PROMPT_TIMEOUT.as_secs())))
        .map_err(|e| server.redact(e))?;
    Ok(listed.iter().filter_map(|p| prompt_of(name, p)).collect())
}

/// One entry of `prompts/list`; `None` without a name.
fn prompt_of(server: &str, p: &Value) -> Option<McpPrompt> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let name = text(p, "name").filter(|n| !n.is_empty())?;
    let arguments = p
        .get("arguments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some(McpPromptArgument {
                name: text(a, "name")?,
                description: text(a, "description"),
                required: a.get("required").and_then(Value::as_bool).unwrap_or(false),
            })
        })
        .collect();
    Some(McpPrompt {
        server: server.to_owned(),
        command: format!("/mcp__{server}__{name}"),
        name,
        title: text(p, "title"),
        description: text(p, "description"),
        arguments,
    })
}

/// `prompts/get` of `name` on `server` with `arguments`.
pub async fn get(
    server: &Server,
    name: &str,
    arguments: &BTreeMap<String, String>,
) -> Result<McpGetPromptResult, String> {
    let server_name = &server.name;
    let getting = async {
        let peer = server.peer().await.map_err(|e| format!("MCP server {server_name} is not available: {e}"))?;
        if !offers_prompts(&peer) {
            return Err(format!("MCP server {server_name} offers no prompts"));
        }
        let params: rmcp::model::GetPromptRequestParams =
            serde_json::from_value(serde_json::json!({ "name": name, "arguments": arguments }))
                .map_err(|e| e.to_string())?;
        let result =
            peer.get_prompt(params).await.map_err(|e| format!("MCP server {server_name}: prompt {name}: {e}"))?;
        serde_json::to_value(&result).map_err(|e| e.to_string())
    };
    let value = tokio::time::timeout(PROMPT_TIMEOUT, getting)
        .await
        .unwrap_or_else(|_| {
            Err(format!("MCP server {server_name}: prompt {name} took over {} s", PROMPT_TIMEOUT.as_secs()))
        })
        .map_err(|e| server.redact(e))?;
    let size = value.to_string().len();
    if size > MAX_PROMPT_BYTES {
        return Err(format!(
            "MCP server {server_name}: prompt {name} is {size} bytes, over the {MAX_PROMPT_BYTES} passed on"
        ));
    }
    let messages = value
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| McpPromptMessage {
            role: m.get("role").and_then(Value::as_str).unwrap_or("user").to_owned(),
            content: m.get("content").cloned().unwrap_or(Value::Null),
        })
        .collect();
    Ok(McpGetPromptResult {
        description: value.get("description").and_then(Value::as_str).map(str::to_owned),
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_entries_become_slash_commands_with_their_arguments() {
        let p = serde_json::json!({"name": "review", "title": "Review", "description": "Reviews code",
            "arguments": [{"name": "file", "required": true}, {"name": "style"}, {"description": "no name"}]});
        let prompt = prompt_of("git", &p).unwrap();
        assert_eq!(prompt.command, "/mcp__git__review");
        assert_eq!(prompt.arguments.len(), 2);
        assert!(prompt.arguments[0].required && !prompt.arguments[1].required);
        assert_eq!(prompt_of("git", &serde_json::json!({"name": ""})), None);
        assert_eq!(prompt_of("git", &serde_json::json!({"title": "x"})), None);
    }
}
