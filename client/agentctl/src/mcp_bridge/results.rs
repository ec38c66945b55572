//! What a `tool/call` result becomes for an MCP client: a `CallToolResult`
//! whose blocks are rebuilt from the result's content and its server's
//! descriptions of them, or the request's error for a tool the session
//! does not have.

use agentd_protocol::tools::{ContentBlock, ToolCallResult};
use serde_json::{Value, json};

/// A `tool/call` result of the tool `name` as an MCP `CallToolResult`.
/// An MCP server's `structuredContent` goes on as its own; agentd's own
/// tools' structured fields do not: they declare no output schema, and
/// Claude Code 2.1.332 hands a model the structured JSON instead of the
/// text when there is some (a Bash result would then be only its
/// `returnCodeInterpretation`, Monitor's only its ids).
pub(super) fn convert(name: &str, result: ToolCallResult) -> rmcp::model::CallToolResult {
    let theirs = name.starts_with("mcp__");
    let described = |described: bool| -> Value {
        let content: Vec<Value> = (result.content.iter().enumerate())
            .map(|(i, block)| {
                let meta = result.content_meta.iter().find(|m| m.index as usize == i).map(|m| &m.block);
                as_mcp(block, meta.filter(|_| described && theirs))
            })
            .collect();
        let mut value = json!({ "content": content, "isError": result.is_error, "resultType": "complete" });
        if let Some(structured) = result.structured_content.as_ref().filter(|_| theirs) {
            value["structuredContent"] = structured.clone();
        }
        value
    };
    // A description MCP's types do not take leaves the blocks plain.
    serde_json::from_value(described(true))
        .or_else(|_| serde_json::from_value(described(false)))
        .unwrap_or_else(|_| rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(result.render)]))
}

/// `result`, unless it says the session has no tool `name`: MCP wants that
/// as the request's error (-32602), not a tool's failure.
pub(super) fn known(name: &str, result: ToolCallResult) -> Result<ToolCallResult, rmcp::ErrorData> {
    // The daemon's words for it (agentd's `LookupError::Unknown`), with
    // the name as it quotes it: no tool's own failure renders so.
    if result.is_error && result.render.starts_with(&format!("no tool named {name:?} ")) {
        return Err(rmcp::ErrorData::invalid_params(format!("Unknown tool: {name}"), None));
    }
    Ok(result)
}

/// A block of a result as an MCP content block: its server's description
/// of it (`meta`: annotations, a resource link, an embedded resource's
/// URI) filled with its text or data again.
fn as_mcp(block: &ContentBlock, meta: Option<&Value>) -> Value {
    let plain = match block {
        ContentBlock::Text { text } => json!({ "type": "text", "text": text }),
        ContentBlock::Image { source } => {
            json!({ "type": "image", "data": source.data, "mimeType": source.media_type })
        }
    };
    let Some(Value::Object(meta)) = meta else { return plain };
    let mut out = meta.clone();
    match (meta.get("type").and_then(Value::as_str), block) {
        // The link itself; the text is agentd's line for the model.
        (Some("resource_link"), _) => {}
        (Some("resource"), ContentBlock::Text { text }) if out["resource"].is_object() => {
            out["resource"]["text"] = json!(text);
        }
        (Some("resource"), ContentBlock::Image { source }) if out["resource"].is_object() => {
            out["resource"]["blob"] = json!(source.data);
            out["resource"]["mimeType"] = json!(source.media_type);
        }
        _ => {
            let Value::Object(plain) = plain else { return plain };
            out.retain(|k, _| k == "annotations" || k == "_meta");
            out.extend(plain);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(structured: Value) -> ToolCallResult {
        serde_json::from_value(json!({
            "tool_use_id": "t", "name": "x", "is_error": false,
            "content": [{ "type": "text", "text": "a\nb\n" }],
            "render": "r", "render_use": "u", "structured_content": structured
        }))
        .unwrap()
    }

    /// Claude Code 2.1.332 shows a model the structured JSON instead of the
    /// text: agentd's own tools' fields stay off, an MCP server's go on.
    #[test]
    fn only_an_mcp_servers_structured_content_goes_on() {
        let own = serde_json::to_value(convert("Bash", result(json!({ "returnCodeInterpretation": "x" })))).unwrap();
        assert!(own.get("structuredContent").is_none(), "{own}");
        assert_eq!(own["content"][0]["text"], "a\nb\n");
        let theirs = serde_json::to_value(convert("mcp__t__weather", result(json!({ "celsius": 21 })))).unwrap();
        assert_eq!(theirs["structuredContent"], json!({ "celsius": 21 }), "{theirs}");
    }

    /// A server's description of a block goes on with the block; one MCP's
    /// types do not take leaves the block plain rather than failing the
    /// result; agentd's own tools have none to pass on.
    #[test]
    fn a_blocks_description_goes_on_unless_it_is_not_mcp() {
        let mut r = result(Value::Null);
        let meta = |block: Value| serde_json::from_value(json!({ "index": 0, "block": block })).unwrap();
        r.content_meta = vec![meta(json!({ "type": "text", "annotations": { "audience": ["user"] } }))];
        let out = serde_json::to_value(convert("mcp__t__x", r.clone())).unwrap();
        assert_eq!(
            out["content"][0],
            json!({ "type": "text", "text": "a\nb\n", "annotations": { "audience": ["user"] } })
        );
        assert!(serde_json::to_value(convert("Read", r.clone())).unwrap()["content"][0].get("annotations").is_none());
        r.content_meta = vec![meta(json!({ "type": "text", "annotations": { "audience": "everyone" } }))];
        let out = serde_json::to_value(convert("mcp__t__x", r)).unwrap();
        assert_eq!(out["content"][0], json!({ "type": "text", "text": "a\nb\n" }), "{out}");
        assert_eq!(out["isError"], false, "{out}");
    }
}
