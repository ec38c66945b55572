//! What agentd answers an MCP server that asks its client something: an
//! elicitation (the user, through the session whose call is in flight),
//! a sampling request (that session's harness: agentd has no model), or
//! its roots (the workspace, and that session's added directories).
//!
//! A server of an earlier revision asks with a request of its own
//! ([`super::pool`]'s handler answers it); a server of MCP 2026-07-28 asks
//! in the result (`input_required`), and the call is made again with the
//! answers ([`rounds`]). Both are answered here, the same way.

use std::path::Path;

use rmcp::model::{InputRequest, InputRequiredResult, InputResponses};
use serde_json::{Value, json};

use super::elicit::Targets;

/// Rounds of one request a server may ask for input in, at most.
pub const MAX_ROUNDS: usize = 10;
/// Input requests of one round, at most (each may be a question to the
/// user or a completion of the harness's model).
pub const MAX_REQUESTS: usize = 8;

/// An elicitation: a flat form of MCP's types, or a page of the server's
/// the user is sent to (URL mode); anything else is refused to the
/// server; declined when no client can answer.
pub async fn elicitation(server: &str, elicit: &Targets, request: Value) -> Result<Value, rmcp::ErrorData> {
    let invalid = |e: String| rmcp::ErrorData::invalid_params(e, None);
    let (schema, url) = match request.get("mode").and_then(Value::as_str) {
        None | Some("form") => {
            let schema = request.get("requestedSchema").cloned().unwrap_or_default();
            super::elicit::check_schema(&schema).map_err(invalid)?;
            (schema, None)
        }
        // The user is sent to a page of the server's: the harness shows
        // the address and asks whether to go.
        Some("url") => (Value::Null, Some(super::elicit::UrlRequest::of(&request).map_err(invalid)?)),
        Some(other) => return Err(invalid(format!("agentd does not answer {other:?} elicitations"))),
    };
    let message = request.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some((target, _)) = elicit.route() else {
        tracing::info!(server, "MCP elicitation declined: no one session's call to it is in flight");
        return Ok(json!({ "action": "decline" }));
    };
    let answer = target.ask(server, &message, schema, url.as_ref()).await;
    let mut result = json!({ "action": serde_json::to_value(answer.action).unwrap_or_default() });
    if let Some(content) = answer.content {
        result["content"] = Value::Object(content);
    }
    Ok(result)
}

/// A completion, from the harness of the session whose call is in flight:
/// refused when no client can answer or the user declines.
pub async fn sampling(server: &str, elicit: &Targets, request: Value) -> Result<Value, rmcp::ErrorData> {
    let Some((target, in_flight)) = elicit.route() else {
        return Err(rmcp::ErrorData::invalid_request(
            "no one agentd session's call to this server is in flight to answer sampling",
            None,
        ));
    };
    target.sample(server, request, in_flight).await.map_err(|e| {
        tracing::debug!(server, "MCP sampling refused: {e}");
        rmcp::ErrorData::invalid_request(e, None)
    })
}

/// The workspace the server serves (servers are pooled per workspace),
/// and the added directories of the session whose call is in flight.
/// Roots are deprecated by MCP 2026-07-28 and still asked by the servers
/// of earlier revisions (and may be by the revision's).
#[allow(deprecated)]
pub fn roots(workspace: &Path, elicit: &Targets) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
    let root = |dir: &Path| {
        let uri = url::Url::from_directory_path(dir).ok()?;
        let mut root = rmcp::model::Root::new(uri.to_string());
        root.name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        Some(root)
    };
    let mut roots = vec![
        root(workspace)
            .ok_or_else(|| rmcp::ErrorData::internal_error("the workspace is not an absolute path", None))?,
    ];
    if let Some((target, true)) = elicit.route() {
        roots.extend(target.add_dirs().iter().filter_map(|d| root(d)));
    }
    Ok(rmcp::model::ListRootsResult::new(roots))
}

/// The answers to a 2026-07-28 server's `input_required` result, and the
/// state to send back with them: each input request answered as the
/// same request sent on its own would be. An elicitation that cannot be
/// asked is declined; a sampling request or roots that cannot be answered
/// end the call (MCP's answers have no error of their own): `Err` says why.
pub async fn rounds(
    server: &str,
    workspace: &Path,
    elicit: &Targets,
    asked: InputRequiredResult,
) -> Result<(Option<InputResponses>, Option<String>), String> {
    let mut responses = InputResponses::new();
    let requests = asked.input_requests.unwrap_or_default();
    if requests.len() > MAX_REQUESTS {
        return Err(format!(
            "it asked for {} inputs in one round; agentd answers {MAX_REQUESTS} at most",
            requests.len()
        ));
    }
    for (key, request) in requests {
        let answer = match request {
            InputRequest::Elicitation(r) => {
                let request = serde_json::to_value(&r.params).unwrap_or_default();
                elicitation(server, elicit, request).await.unwrap_or_else(|_| json!({ "action": "decline" }))
            }
            InputRequest::CreateMessage(r) => {
                let request = serde_json::to_value(&r.params).unwrap_or_default();
                sampling(server, elicit, request).await.map_err(|e| format!("its sampling request: {}", e.message))?
            }
            InputRequest::ListRoots(_) => roots(workspace, elicit)
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .map_err(|e| format!("its roots request: {}", e.message))?,
            _ => return Err("it asked for a kind of input agentd does not answer".into()),
        };
        responses.insert(key, answer);
    }
    Ok(((!responses.is_empty()).then_some(responses), asked.request_state))
}
