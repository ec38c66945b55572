//! WebSearch: results from a search backend the user configured, in
//! SearXNG's JSON API (`/search?q=…&format=json`). agentd has no search
//! engine of its own: without a backend (`AGENTD_WEB_SEARCH_URL`, or
//! `webSearch.searxngUrl` in the user's settings) the tool is not offered
//! at all. The backend is the user's choice, so it may be on this machine
//! or network (the SSRF guard does not apply to it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Most results returned.
const MAX_RESULTS: usize = 10;

/// The WebSearch tool: the daemon's backend and client.
#[derive(Debug, Clone)]
pub struct WebSearch(pub std::sync::Arc<crate::web::Web>);

/// Input of WebSearch.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchInput {
    /// The search query to use
    pub query: String,
    /// Only include search results from these domains
    #[serde(default)]
    pub allowed_domains: Option<Vec<String>>,
    /// Never include search results from these domains
    #[serde(default)]
    pub blocked_domains: Option<Vec<String>>,
}

/// One result.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    /// Its title.
    pub title: String,
    /// Its URL.
    pub url: String,
    /// A snippet of its text.
    pub snippet: String,
}

/// What a search found.
#[derive(Debug, Clone, Serialize)]
pub struct WebSearchOutput {
    /// The query.
    pub query: String,
    /// The results, best first.
    pub results: Vec<SearchHit>,
}

fn host_in(url: &str, domains: &[String]) -> bool {
    let host =
        reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase)).unwrap_or_default();
    domains.iter().any(|d| {
        let d = d.trim().trim_start_matches("*.").to_ascii_lowercase();
        host == d || host.ends_with(&format!(".{d}"))
    })
}

impl Tool for WebSearch {
    type Input = WebSearchInput;
    type Output = WebSearchOutput;

    const NAME: &'static str = "WebSearch";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn description(&self) -> String {
        "Searches the web and returns results (title, URL, snippet), best first. Use it for information \
         newer than your knowledge or to find pages to read with WebFetch. `allowed_domains` keeps only \
         results from those domains, `blocked_domains` drops theirs."
            .into()
    }

    fn is_enabled(&self) -> bool {
        self.0.search_backend().is_some()
    }

    fn validate_input(&self, input: &WebSearchInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.query.trim().chars().count() < 2 {
            return Err(ValidationError::new("the query must be at least 2 characters"));
        }
        if input.allowed_domains.as_ref().is_some_and(|a| !a.is_empty())
            && input.blocked_domains.as_ref().is_some_and(|b| !b.is_empty())
        {
            return Err(ValidationError::new("give allowed_domains or blocked_domains, not both"));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &WebSearchInput, _ctx: &ToolContext) -> Decision {
        Decision::Ask { reason: "search the web".into(), suggestion: Some("WebSearch".into()) }
    }

    async fn call(
        &self,
        input: WebSearchInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<WebSearchOutput>, ToolError> {
        let Some(base) = self.0.search_backend() else {
            return Err(ToolError::new("no web search backend is configured"));
        };
        let mut url = base.join("search").map_err(|e| ToolError::new(format!("the backend URL: {e}")))?;
        url.query_pairs_mut().append_pair("q", input.query.trim()).append_pair("format", "json");
        // The backend is the user's: it may be local.
        let client = self.0.client(true).map_err(ToolError::new)?;
        let request = client.get(url).header("accept", "application/json").send();
        let response = tokio::select! {
            r = request => r.map_err(|e| ToolError::new(format!("the search backend failed: {}", crate::web::describe(&e))))?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
        };
        let status = response.status();
        let body = crate::web::body(response, &ctx.cancel).await.map_err(ToolError::new)?;
        if !status.is_success() {
            return Err(ToolError::new(format!("the search backend answered HTTP {}", status.as_u16())));
        }
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ToolError::new(format!("the search backend's answer is not SearXNG's JSON: {e}")))?;
        let list = value["results"]
            .as_array()
            .ok_or_else(|| ToolError::new("the search backend's answer has no results list"))?;
        let allowed = input.allowed_domains.unwrap_or_default();
        let blocked = input.blocked_domains.unwrap_or_default();
        let results = list
            .iter()
            .filter_map(|r| {
                let url = r["url"].as_str()?.to_owned();
                let text = |k: &str| r[k].as_str().unwrap_or_default().chars().take(500).collect::<String>();
                Some(SearchHit { title: text("title"), snippet: text("content"), url })
            })
            .filter(|hit| allowed.is_empty() || host_in(&hit.url, &allowed))
            .filter(|hit| !host_in(&hit.url, &blocked))
            .take(MAX_RESULTS)
            .collect();
        Ok(ToolOutput::new(WebSearchOutput { query: input.query, results }))
    }

    fn result_content(&self, output: &WebSearchOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = format!("Web search results for {:?}:\n", output.query);
        if output.results.is_empty() {
            text.push_str("\nNo results.\n");
        }
        for (i, hit) in output.results.iter().enumerate() {
            text.push_str(&format!("\n{}. {}\n   {}\n   {}\n", i + 1, hit.title, hit.url, hit.snippet));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &WebSearchInput) -> String {
        format!("Searching the web for {:?}", input.query)
    }

    fn render_result(&self, output: &WebSearchOutput) -> String {
        format!("{} results", output.results.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49: a field no version had is refused.
    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_value::<WebSearchInput>(serde_json::json!({"query": "q", "domains": ["x"]}));
        assert!(err.unwrap_err().to_string().contains("unknown field"));
        let schema = serde_json::to_value(schemars::schema_for!(WebSearchInput)).unwrap();
        assert_eq!(schema["additionalProperties"], false, "{schema}");
    }

    #[test]
    fn domains_match_hosts_and_subdomains() {
        let d = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(host_in("https://docs.rs/x", &d(&["docs.rs"])));
        assert!(host_in("https://a.b.example.com/", &d(&["example.com"])));
        assert!(!host_in("https://notexample.com/", &d(&["example.com"])));
        assert!(!host_in("not a url", &d(&["example.com"])));
    }
}
