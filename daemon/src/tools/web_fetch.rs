//! WebFetch: a URL's content as Markdown, with the model's `prompt` passed
//! back beside it (agentd runs no model; the client's model applies it).
//!
//! As Claude Code does: `http` is tried as `https` first (plain http only
//! when the host has no TLS); a redirect to the same host (or its `www.`
//! twin) is followed, one to another host is returned as a result naming
//! the new URL; results are kept 15 minutes per session. Rules:
//! `WebFetch(domain:example.com)` (subdomains too); unknown domains ask in
//! `default` mode. The SSRF guard is `crate::web`'s.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::{Decision, PermissionTarget};
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// How long a fetched page is reused within a session.
pub const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
/// Most bytes of pages kept in the cache, all sessions together.
const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Most characters of Markdown returned.
pub const MAX_CHARS: usize = 100_000;
/// Most redirects followed on one host.
const MAX_REDIRECTS: usize = 10;

/// The WebFetch tool.
#[derive(Debug, Clone, Copy)]
pub struct WebFetch;

/// Input of WebFetch.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WebFetchInput {
    /// The URL to fetch content from
    pub url: String,
    /// The prompt to run on the fetched content
    pub prompt: String,
}

/// What a fetch gave.
#[derive(Debug, Clone)]
pub enum Fetched {
    /// The page.
    Page {
        /// Where it was (after same-host redirects).
        url: String,
        /// HTTP status.
        status: u16,
        /// Its Markdown (or text).
        text: Arc<String>,
        /// Whether it came from the cache.
        cached: bool,
    },
    /// A redirect to another host, not followed.
    Redirect {
        /// The URL asked for.
        from: String,
        /// Where it points.
        to: String,
        /// HTTP status.
        status: u16,
    },
}

/// The tool's output: the fetched content and the prompt.
#[derive(Debug, Clone)]
pub struct WebFetchOutput {
    fetched: Fetched,
    prompt: String,
}

impl serde::Serialize for WebFetchOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

impl WebFetchOutput {
    fn text(&self) -> String {
        match &self.fetched {
            Fetched::Page { url, status, text, .. } => {
                format!("URL: {url} (HTTP {status})\nPrompt: {}\n\n{text}", self.prompt)
            }
            Fetched::Redirect { from, to, status } => format!(
                "{from} redirects (HTTP {status}) to another host: {to}\nTo fetch it, call WebFetch again with \
                 url \"{to}\" and the same prompt."
            ),
        }
    }
}

type CacheMap = HashMap<(String, String), (Instant, Fetched)>;
static CACHE: LazyLock<Mutex<CacheMap>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn cache() -> std::sync::MutexGuard<'static, CacheMap> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

fn remember(session: &str, url: &str, fetched: &Fetched) {
    let mut cache = cache();
    cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
    let size = |f: &Fetched| match f {
        Fetched::Page { text, .. } => text.len(),
        Fetched::Redirect { to, .. } => to.len(),
    };
    while !cache.is_empty() && cache.values().map(|(_, f)| size(f)).sum::<usize>() + size(fetched) > CACHE_BYTES {
        let Some(oldest) = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone()) else { break };
        cache.remove(&oldest);
    }
    cache.insert((session.to_owned(), url.to_owned()), (Instant::now(), fetched.clone()));
}

fn recall(session: &str, url: &str) -> Option<Fetched> {
    let cache = cache();
    let (at, fetched) = cache.get(&(session.to_owned(), url.to_owned()))?;
    if at.elapsed() >= CACHE_TTL {
        return None;
    }
    Some(match fetched.clone() {
        Fetched::Page { url, status, text, .. } => Fetched::Page { url, status, text, cached: true },
        other => other,
    })
}

fn parse(url: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(url.trim()).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("only http and https URLs can be fetched, not {}:", url.scheme()));
    }
    if url.host_str().is_none() {
        return Err("the URL has no host".into());
    }
    Ok(url)
}

/// The host without a leading `www.`, for "same site" redirects.
fn site(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    host.strip_prefix("www.").map(str::to_owned).unwrap_or(host)
}

/// Fetches `url`: https first for an http URL, same-host redirects
/// followed, another host's returned.
pub async fn fetch(
    url: &str,
    allow_private: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Fetched, String> {
    let asked = parse(url)?;
    crate::web::check_url(&asked, allow_private)?;
    let client = crate::web::client(allow_private)?;
    let mut current = asked.clone();
    if current.scheme() == "http" {
        let mut secure = current.clone();
        let _ = secure.set_scheme("https");
        if secure.port() == Some(80) {
            let _ = secure.set_port(None);
        }
        // Plain http only when the host does not speak TLS at all.
        match send(client, &secure, cancel).await {
            Ok(response) => return follow(client, response, secure, &asked, allow_private, cancel).await,
            Err(Sent::Refused(e)) => return Err(e),
            Err(Sent::Failed(_)) => {}
        }
    }
    let response = send(client, &current, cancel).await.map_err(Sent::message)?;
    current.set_fragment(None);
    follow(client, response, current, &asked, allow_private, cancel).await
}

enum Sent {
    /// The guard refused, or the call was cancelled: no fallback.
    Refused(String),
    /// The connection or request failed.
    Failed(String),
}

impl Sent {
    fn message(self) -> String {
        match self {
            Sent::Refused(m) | Sent::Failed(m) => m,
        }
    }
}

async fn send(
    client: &reqwest::Client,
    url: &reqwest::Url,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<reqwest::Response, Sent> {
    let request = client.get(url.clone()).header("accept", "text/markdown, text/html;q=0.9, */*;q=0.8").send();
    tokio::select! {
        r = request => r.map_err(|e| {
            let why = crate::web::describe(&e);
            if why.contains("private or local address") { Sent::Refused(why) } else { Sent::Failed(format!("fetching {url} failed: {why}")) }
        }),
        _ = cancel.cancelled() => Err(Sent::Refused("cancelled".into())),
    }
}

async fn follow(
    client: &reqwest::Client,
    mut response: reqwest::Response,
    mut current: reqwest::Url,
    asked: &reqwest::Url,
    allow_private: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Fetched, String> {
    for _ in 0..=MAX_REDIRECTS {
        let status = response.status();
        if !status.is_redirection() {
            let content_type =
                response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
            let body = crate::web::body(response, cancel).await?;
            let text = to_text(&content_type, &body)?;
            return Ok(Fetched::Page {
                url: current.to_string(),
                status: status.as_u16(),
                text: Arc::new(text),
                cached: false,
            });
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("HTTP {} without a Location", status.as_u16()))?;
        let next = current.join(location).map_err(|e| format!("the redirect to {location:?} is not a URL: {e}"))?;
        if site(&next) != site(asked) {
            return Ok(Fetched::Redirect { from: asked.to_string(), to: next.to_string(), status: status.as_u16() });
        }
        crate::web::check_url(&next, allow_private)?;
        current = next;
        response = send(client, &current, cancel).await.map_err(Sent::message)?;
    }
    Err(format!("more than {MAX_REDIRECTS} redirects (a loop?)"))
}

/// The body as text: HTML converted to Markdown, text and JSON as they
/// are, anything binary refused (whatever its declared type).
fn to_text(content_type: &str, body: &[u8]) -> Result<String, String> {
    let sniff = &body[..body.len().min(8192)];
    if sniff.contains(&0) {
        return Err(format!(
            "the response is binary ({}), not text",
            if content_type.is_empty() { "no content type" } else { content_type }
        ));
    }
    let textual = content_type.is_empty()
        || content_type.starts_with("text/")
        || ["json", "xml", "javascript", "markdown", "yaml", "toml", "csv"].iter().any(|t| content_type.contains(t));
    if !textual {
        return Err(format!("the response is {content_type}, not text"));
    }
    let text = String::from_utf8_lossy(body);
    let html = content_type.contains("html")
        || (content_type.is_empty()
            && text.trim_start().get(..15).is_some_and(|s| s.to_ascii_lowercase().starts_with("<!doctype html")));
    let text = if html {
        htmd::HtmlToMarkdown::builder()
            .skip_tags(vec!["script", "style", "noscript", "svg", "head"])
            .build()
            .convert(&text)
            .map_err(|e| format!("the page could not be converted: {e}"))?
    } else {
        text.into_owned()
    };
    let chars = text.chars().count();
    Ok(if chars > MAX_CHARS {
        let cut: String = text.chars().take(MAX_CHARS).collect();
        format!("{cut}\n\n[content cut: {chars} characters, the first {MAX_CHARS} shown]")
    } else {
        text
    })
}

impl Tool for WebFetch {
    type Input = WebFetchInput;
    type Output = WebFetchOutput;
    type Progress = ();

    const NAME: &'static str = "WebFetch";

    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::READ_ONLY }
    }

    fn description(&self) -> String {
        "Fetches a URL and returns its content as Markdown, with your prompt beside it: read the content \
         with the prompt in mind. HTTP URLs are tried as HTTPS first. A redirect to another host is not \
         followed: the result names the new URL; fetch it again to follow. Results are kept for 15 minutes. \
         Read-only; it cannot reach this machine's or its network's private addresses."
            .into()
    }

    fn validate_input(&self, input: &WebFetchInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        parse(&input.url).map_err(ValidationError::new)?;
        if input.url.len() > 2000 {
            return Err(ValidationError::new("the URL is longer than 2,000 characters"));
        }
        Ok(())
    }

    fn permission_target(&self, input: &WebFetchInput) -> PermissionTarget {
        let host = parse(&input.url).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase)).unwrap_or_default();
        PermissionTarget::Domain(host)
    }

    fn check_permissions(&self, input: &WebFetchInput, _ctx: &ToolContext) -> Decision {
        let host = parse(&input.url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
        Decision::Ask { reason: format!("fetch {host}"), suggestion: Some(format!("WebFetch(domain:{host})")) }
    }

    fn is_concurrency_safe(&self, _input: &WebFetchInput) -> bool {
        true
    }

    fn is_read_only(&self, _input: &WebFetchInput) -> bool {
        true
    }

    fn is_destructive(&self, _input: &WebFetchInput) -> bool {
        false
    }

    async fn call(
        &self,
        input: WebFetchInput,
        ctx: ToolContext,
        _progress: ProgressSink<()>,
    ) -> Result<ToolOutput<WebFetchOutput>, ToolError> {
        let url = input.url.trim().to_owned();
        let fetched = match recall(&ctx.session_id, &url) {
            Some(hit) => hit,
            None => {
                let fetched =
                    fetch(&url, ctx.info.web.allow_private_network, &ctx.cancel).await.map_err(ToolError::new)?;
                remember(&ctx.session_id, &url, &fetched);
                fetched
            }
        };
        Ok(ToolOutput::new(WebFetchOutput { fetched, prompt: input.prompt }))
    }

    fn render_use(&self, input: &WebFetchInput) -> String {
        format!("Fetching {}", input.url)
    }

    fn render_result(&self, output: &WebFetchOutput) -> String {
        match &output.fetched {
            Fetched::Page { status, text, cached, .. } => {
                format!("HTTP {status}, {} characters{}", text.chars().count(), if *cached { " (cached)" } else { "" })
            }
            Fetched::Redirect { to, .. } => format!("redirects to {to}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_become_text_or_a_clear_refusal() {
        let md = to_text("text/html; charset=utf-8", b"<html><head><title>t</title><script>x()</script></head><body><h1>Title</h1><p>Some <b>bold</b> text</p></body></html>").unwrap();
        assert!(md.contains("# Title") && md.contains("**bold**") && !md.contains("x()"), "{md}");
        assert_eq!(to_text("application/json", b"{\"a\": 1}").unwrap(), "{\"a\": 1}");
        assert!(to_text("image/png", b"\x89PNG").unwrap_err().contains("image/png"));
        assert!(to_text("text/plain", b"looks like text\0but is not").unwrap_err().contains("binary"), "mislabelled");
        let long = "x".repeat(MAX_CHARS + 5);
        assert!(to_text("text/plain", long.as_bytes()).unwrap().contains("content cut"));
    }

    #[test]
    fn same_site_is_the_host_with_or_without_www() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert_eq!(site(&u("https://www.Example.com/a")), site(&u("http://example.com/b")));
        assert_ne!(site(&u("https://example.com/")), site(&u("https://example.org/")));
    }
}
