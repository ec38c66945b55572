//! What the pool reads from a server and keeps: its tools, checked for
//! what a model API would reject (`check_tool`, `schema_problem`), listed
//! page by page within bounds (`paginate`), and kept in a cache file named
//! by a hash of the entry (`file_key`).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rmcp::service::{Peer, RoleClient};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::pool::{MAX_LISTED, ServerTool};

use crate::sync::MutexExt;

/// Most pages read for one list.
const MAX_PAGES: usize = 64;

/// A tool from a server's `tools/list`, checked for what a model API
/// would reject: its full name must be a valid tool name, its schema an
/// object schema whose types are JSON Schema's.
pub fn check_tool(server: &str, tool: Value) -> ServerTool {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let description = tool.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let hint = |name: &str| tool.get("annotations").and_then(|a| a.get(name)).and_then(Value::as_bool);
    let read_only = hint("readOnlyHint").unwrap_or(false);
    let full = format!("mcp__{server}__{name}");
    let unusable = if name.is_empty() || name.starts_with('_') {
        Some(format!("its name {name:?} is empty or starts with _ (it would read as another server's tool)"))
    } else if !crate::tool::registry::is_valid_tool_name(&full) {
        Some(format!("its name {full:?} is not 1 to 64 of A-Z a-z 0-9 _ -"))
    } else if schema.get("type").and_then(Value::as_str) != Some("object") {
        Some("its input schema is not an object schema".into())
    } else if tool.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required") {
        Some("its server runs it only as an MCP task (execution.taskSupport: required), which agentd's client does not support yet".into())
    } else {
        schema_problem(&schema, "inputSchema")
    };
    ServerTool {
        name,
        description,
        schema,
        read_only,
        destructive: hint("destructiveHint"),
        idempotent: hint("idempotentHint"),
        open_world: hint("openWorldHint"),
        unusable,
        output_schema: tool.get("outputSchema").filter(|s| s.is_object()).cloned(),
        label: label(&tool),
    }
}

/// Most icons kept of a tool.
const MAX_ICONS: usize = 8;
/// Most bytes of a tool's title and icons kept.
const MAX_LABEL_BYTES: usize = 64 << 10;

/// Whether a server's icon is one a client may load: an object whose `src`
/// is `https:` or a raster `data:image/` URI, as MCP asks clients to take
/// them (no `file:`, `javascript:` or plain `http:`; no SVG, which may
/// hold script where a client inlines it).
pub(super) fn loadable_icon(icon: &Value) -> bool {
    let src = icon.get("src").and_then(Value::as_str).unwrap_or_default();
    // The media type as a reader of the URI sees it: blanks and controls
    // dropped, in any case (`data:image/ SVG+xml` is SVG).
    let read: String = src.chars().filter(|c| !c.is_whitespace() && !c.is_control()).collect();
    icon.is_object()
        && (src.starts_with("https://")
            || (src.starts_with("data:image/") && !read.to_ascii_lowercase().starts_with("data:image/svg")))
}

/// A tool's `title` (or, as earlier revisions put it, `annotations.title`)
/// and its [`loadable_icon`]s, within [`MAX_ICONS`] and [`MAX_LABEL_BYTES`].
fn label(tool: &Value) -> Option<agentd_protocol::tools::ToolLabel> {
    let title = tool
        .get("title")
        .or_else(|| tool.pointer("/annotations/title"))
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .map(str::to_owned);
    let mut budget = MAX_LABEL_BYTES.saturating_sub(title.as_ref().map_or(0, String::len));
    let mut icons = Vec::new();
    for icon in tool.get("icons").and_then(Value::as_array).into_iter().flatten() {
        let size = icon.to_string().len();
        if !loadable_icon(icon) || size > budget || icons.len() == MAX_ICONS {
            continue;
        }
        budget -= size;
        icons.push(icon.clone());
    }
    let label = agentd_protocol::tools::ToolLabel { title: title.filter(|t| t.len() <= MAX_LABEL_BYTES), icons };
    (label.title.is_some() || !label.icons.is_empty()).then_some(label)
}

/// The first thing in `schema` that is not JSON Schema a model API takes.
pub fn schema_problem(schema: &Value, at: &str) -> Option<String> {
    const TYPES: [&str; 7] = ["object", "array", "string", "number", "integer", "boolean", "null"];
    let map = match schema {
        Value::Bool(_) => return None,
        Value::Object(map) => map,
        _ => return Some(format!("{at} is not a schema")),
    };
    if let Some(t) = map.get("type") {
        let ok = match t {
            Value::String(s) => TYPES.contains(&s.as_str()),
            Value::Array(a) => a.iter().all(|t| t.as_str().is_some_and(|s| TYPES.contains(&s))),
            _ => false,
        };
        if !ok {
            return Some(format!("{at}.type {t} is not a JSON Schema type"));
        }
    }
    if let Some(r) = map.get("required")
        && !r.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        return Some(format!("{at}.required is not a list of names"));
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(props) = map.get(key) {
            let Some(props) = props.as_object() else { return Some(format!("{at}.{key} is not an object")) };
            for (name, sub) in props {
                if let Some(p) = schema_problem(sub, &format!("{at}.{key}.{name}")) {
                    return Some(p);
                }
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = map.get(key)
            && let Some(p) = schema_problem(sub, &format!("{at}.{key}"))
        {
            return Some(p);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = map.get(key) {
            let Some(list) = list.as_array() else { return Some(format!("{at}.{key} is not a list")) };
            for (i, sub) in list.iter().enumerate() {
                if let Some(p) = schema_problem(sub, &format!("{at}.{key}[{i}]")) {
                    return Some(p);
                }
            }
        }
    }
    None
}

#[derive(Serialize, Deserialize)]
struct Cached {
    hash: String,
    tools: Vec<ServerTool>,
}

pub fn read_cache(file: &Path, hash: &str) -> Option<Arc<Vec<ServerTool>>> {
    let bytes = std::fs::read(file).ok()?;
    let cached: Cached = serde_json::from_slice(&bytes).ok()?;
    (cached.hash == hash).then(|| Arc::new(cached.tools))
}

pub fn write_cache(file: &Path, hash: &str, tools: &[ServerTool]) {
    let cached = Cached { hash: hash.to_owned(), tools: tools.to_vec() };
    let Ok(json) = serde_json::to_vec(&cached) else { return };
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, json).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// A file name for `text` (which may hold secrets): two FNV-1a hashes.
pub fn file_key(text: &str) -> String {
    format!("{:016x}{:016x}", fnv(text, 0xcbf2_9ce4_8422_2325), fnv(text, 0x6c62_272e_07bb_0142))
}

/// FNV-1a from `seed`: two of them name a cache file (and are checked on
/// read).
fn fnv(text: &str, seed: u64) -> u64 {
    text.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Why a `tools/list` failed, and the server's OAuth challenge when it
/// answered 401 or 403.
pub struct ListFailure {
    /// What went wrong.
    pub message: String,
    /// The server's challenge, when it asked for authorization.
    pub challenge: Option<String>,
}

/// Every page of a server's `tools/list`, as JSON, within bounds.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Value>, ListFailure> {
    let challenge = Mutex::new(None);
    let listed = paginate(
        |cursor| {
            let challenge = &challenge;
            async move {
                let params = cursor.map(|c| serde_json::from_value(serde_json::json!({ "cursor": c }))).transpose();
                let page = peer.list_tools(params.map_err(|e| e.to_string())?).await.map_err(|e| {
                    *challenge.locked() = super::auth::challenge_in(&e);
                    e.to_string()
                })?;
                serde_json::to_value(&page).map_err(|e| e.to_string())
            }
        },
        "tools",
    )
    .await;
    listed.map_err(|message| ListFailure { message, challenge: challenge.into_held() })
}

/// Follows `nextCursor` through pages of `key` items: at most
/// [`MAX_LISTED`] items over at most 64 pages; a repeated cursor ends it.
pub async fn paginate<F, Fut>(mut fetch: F, key: &str) -> Result<Vec<Value>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Value, String>>,
{
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let page = fetch(cursor.clone()).await?;
        if let Some(list) = page.get(key).and_then(Value::as_array) {
            items.extend(list.iter().cloned());
        }
        if items.len() > MAX_LISTED {
            return Err(format!("it lists more than {MAX_LISTED} {key}"));
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if seen.insert(next.to_owned()) => cursor = Some(next.to_owned()),
            _ => return Ok(items),
        }
    }
    Err(format!("its {key} list goes on past {MAX_PAGES} pages"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Icons a client may load: https: and raster data: images; not SVG
    /// however its type is written, not http:, file: or javascript:.
    #[test]
    fn only_loadable_icons_are_kept() {
        for (src, kept) in [
            ("https://example.com/i.png", true),
            ("data:image/png;base64,AAAA", true),
            ("data:image/svg+xml;base64,PHN2Zz4=", false),
            ("data:image/SVG+xml,<svg/>", false),
            ("data:image/\tsvg+xml,<svg/>", false),
            ("data:image/ svg+xml,<svg/>", false),
            ("http://example.com/i.png", false),
            ("file:///etc/passwd", false),
            ("javascript:alert(1)", false),
            (" https://example.com/i.png", false),
        ] {
            assert_eq!(loadable_icon(&serde_json::json!({ "src": src })), kept, "{src:?}");
        }
        assert!(!loadable_icon(&serde_json::json!("https://example.com/i.png")), "not an object");
    }

    #[test]
    fn schemas_a_model_api_rejects_are_found() {
        let ok = serde_json::json!({"type": "object", "properties": {"a": {"type": ["string", "null"]},
            "b": {"type": "array", "items": {"type": "integer"}}, "c": true,
            "d": {"anyOf": [{"type": "string"}, {"type": "number"}]}}, "required": ["a"]});
        assert_eq!(schema_problem(&ok, "inputSchema"), None);
        for (bad, needle) in [
            (serde_json::json!({"type": "object", "properties": {"x": {"type": "integral"}}}), "properties.x.type"),
            (serde_json::json!({"type": "object", "properties": []}), "properties is not an object"),
            (serde_json::json!({"type": "object", "required": "x"}), "required"),
            (serde_json::json!({"type": "object", "properties": {"x": 5}}), "not a schema"),
            (serde_json::json!({"type": "object", "properties": {"x": {"items": {"type": 3}}}}), "items.type"),
            (serde_json::json!({"type": "object", "anyOf": {}}), "anyOf"),
        ] {
            let p = schema_problem(&bad, "inputSchema").unwrap_or_default();
            assert!(p.contains(needle), "{bad}: {p:?}");
        }
    }

    #[test]
    fn tools_with_bad_names_or_schemas_are_marked() {
        let good = check_tool(
            "fs",
            serde_json::json!({"name": "read_file", "description": "d",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
        );
        assert!(good.unusable.is_none() && good.read_only);
        let named = check_tool("fs", serde_json::json!({"name": "bad name!", "inputSchema": {"type": "object"}}));
        assert!(named.unusable.unwrap().contains("name"));
        let long = check_tool("fs", serde_json::json!({"name": "x".repeat(60), "inputSchema": {"type": "object"}}));
        assert!(long.unusable.is_some());
        let not_object = check_tool("fs", serde_json::json!({"name": "t", "inputSchema": {"type": "string"}}));
        assert!(not_object.unusable.unwrap().contains("not an object schema"));
        for name in ["", "_add"] {
            let odd = check_tool("fs", serde_json::json!({"name": name, "inputSchema": {"type": "object"}}));
            assert!(odd.unusable.unwrap().contains("starts with _"), "{name:?}");
        }
        let no_hint = check_tool("fs", serde_json::json!({"name": "t", "inputSchema": {"type": "object"}}));
        assert!(!no_hint.read_only, "fail closed without readOnlyHint");
        assert_eq!((no_hint.destructive, no_hint.idempotent, no_hint.open_world), (None, None, None));
        let hinted = check_tool(
            "fs",
            serde_json::json!({"name": "t", "inputSchema": {"type": "object"},
            "annotations": {"destructiveHint": false, "idempotentHint": true, "openWorldHint": false}}),
        );
        assert_eq!((hinted.destructive, hinted.idempotent, hinted.open_world), (Some(false), Some(true), Some(false)));
        for support in ["optional", "forbidden"] {
            let t = check_tool(
                "fs",
                serde_json::json!({"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": support}}),
            );
            assert!(t.unusable.is_none(), "{support}");
        }
        let task = check_tool(
            "fs",
            serde_json::json!({"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}),
        );
        assert!(task.unusable.unwrap().contains("taskSupport"));
    }
}
