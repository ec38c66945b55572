//! WebFetch: a URL's content as Markdown, with the model's `prompt` passed
//! back beside it (agentd runs no model; the client's model applies it).
//!
//! As Claude Code does: `http` is tried as `https` first (plain http only
//! when the host has no TLS); a redirect to the same host is followed, one
//! to any other host (its `www.` twin too) is returned as a result naming
//! the new URL, for the model to fetch (and the rules to judge); results are kept 15 minutes per session. Rules:
//! `WebFetch(domain:example.com)` (subdomains too); unknown domains ask in
//! `default` mode. The SSRF guard is `crate::web`'s.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::{Decision, PermissionTarget};
use crate::sync::MutexExt;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// How long a fetched page is reused within a session.
pub const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
/// Most bytes of pages kept in the cache, all sessions together.
const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Most characters of Markdown returned by one call (`offset` reads on).
pub const MAX_CHARS: usize = 100_000;
/// Most characters of a page's Markdown kept (and so reachable with
/// `offset`); the rest is cut when the page is converted.
const MAX_KEPT_CHARS: usize = 2_000_000;
/// Most redirects followed on one host.
const MAX_REDIRECTS: usize = 10;

/// The WebFetch tool: the daemon's clients.
#[derive(Debug, Clone)]
pub struct WebFetch(pub Arc<crate::web::Web>);

/// Input of WebFetch.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchInput {
    /// The URL to fetch content from
    pub url: String,
    /// The prompt to run on the fetched content
    pub prompt: String,
    /// Character position in the page text to start reading from. Use it
    /// to read on through a page too long for one call, with the value the
    /// previous result gave.
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub offset: Option<usize>,
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
    /// The first character of the page text shown.
    offset: usize,
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
                let (shown, rest) = window(text, self.offset);
                let mut out = format!("URL: {url} (HTTP {status})\nPrompt: {}\n\n{shown}", self.prompt);
                if let Some(Window { end, total }) = rest {
                    out.push_str(&format!(
                        "\n\n[page text cut: characters {}..{end} of {total} shown; call WebFetch again with \
                         offset {end} to read on]",
                        self.offset
                    ));
                }
                out
            }
            Fetched::Redirect { from, to, status } => format!(
                "{from} redirects (HTTP {status}) to another host: {to}\nTo fetch it, call WebFetch again with \
                 url \"{to}\" and the same prompt."
            ),
        }
    }
}

/// Where a cut window of page text ends, and how long the text is.
struct Window {
    end: usize,
    total: usize,
}

/// The at most [`MAX_CHARS`] characters of `text` from character
/// `offset`, and where they end when text is left after them.
fn window(text: &str, offset: usize) -> (&str, Option<Window>) {
    let byte_at = |chars: usize| text.char_indices().nth(chars).map_or(text.len(), |(i, _)| i);
    let start = byte_at(offset);
    let rest = &text[start..];
    let end = rest.char_indices().nth(MAX_CHARS).map(|(i, _)| i);
    match end {
        None => (rest, None),
        Some(cut) => {
            let total = offset + MAX_CHARS + rest[cut..].chars().count();
            (&rest[..cut], Some(Window { end: offset + MAX_CHARS, total }))
        }
    }
}

type CacheMap = HashMap<(String, String), (Instant, Fetched)>;
static CACHE: LazyLock<Mutex<CacheMap>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn cache() -> std::sync::MutexGuard<'static, CacheMap> {
    CACHE.locked()
}

/// Most pages kept, all sessions together.
const CACHE_ENTRIES: usize = 512;

fn remember(session: &str, url: &str, fetched: &Fetched) {
    let mut cache = cache();
    cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
    let size = |(s, u): &(String, String), f: &Fetched| {
        64 + s.len()
            + u.len()
            + match f {
                Fetched::Page { text, url, .. } => text.len() + url.len(),
                Fetched::Redirect { to, from, .. } => to.len() + from.len(),
            }
    };
    let key = (session.to_owned(), url.to_owned());
    let mut total: usize = cache.iter().map(|(k, (_, f))| size(k, f)).sum();
    while !cache.is_empty() && (total + size(&key, fetched) > CACHE_BYTES || cache.len() >= CACHE_ENTRIES) {
        let Some(oldest) = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone()) else { break };
        if let Some((_, f)) = cache.remove(&oldest) {
            total -= size(&oldest, &f);
        }
    }
    cache.insert(key, (Instant::now(), fetched.clone()));
}

/// Drops a closed session's pages.
pub fn forget_session(session: &str) {
    cache().retain(|(s, _), _| s != session);
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

/// Fetches `url`: https first for an http URL, same-host redirects
/// followed, another host's returned.
pub async fn fetch(
    web: &crate::web::Web,
    url: &str,
    allow_private: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Fetched, String> {
    let asked = parse(url)?;
    crate::web::check_url(&asked, allow_private)?;
    let client = web.client(allow_private)?;
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
            // Converting a large page takes a while: off the runtime's
            // threads, two at a time.
            static CONVERTING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
            let _turn = CONVERTING.acquire().await.map_err(|_| "the daemon is stopping".to_owned())?;
            if cancel.is_cancelled() {
                return Err("cancelled".into());
            }
            let text = tokio::task::spawn_blocking(move || to_text(&content_type, &body))
                .await
                .map_err(|e| format!("the page could not be converted: {e}"))??;
            if cancel.is_cancelled() {
                return Err("cancelled".into());
            }
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
        // Only the very host asked about (its rules and its approval): a
        // redirect anywhere else, `www.` twin included, is the model's to
        // fetch, and is judged again then.
        if !next.host_str().unwrap_or_default().eq_ignore_ascii_case(asked.host_str().unwrap_or_default()) {
            return Ok(Fetched::Redirect { from: asked.to_string(), to: next.to_string(), status: status.as_u16() });
        }
        crate::web::check_url(&next, allow_private)?;
        current = next;
        response = send(client, &current, cancel).await.map_err(Sent::message)?;
    }
    Err(format!("more than {MAX_REDIRECTS} redirects (a loop?)"))
}

/// Most bytes of HTML converted (the Markdown is cut to `MAX_CHARS`
/// anyway; conversion time grows with the page).
const MAX_HTML_BYTES: usize = 2 * 1024 * 1024;
/// Deepest element nesting htmd converts (its walk recurses per level; a
/// deeper page would overflow the stack): deeper pages give their text.
const MAX_HTML_DEPTH: usize = 200;
/// Tags whose text is not content.
const SKIPPED_TAGS: &[&str] = &["script", "style", "noscript", "svg", "head", "template"];

/// Nesting beyond which a page is not even parsed.
const MAX_ROUGH_DEPTH: usize = 1000;

/// Elements that never hold others, or that the parser closes by itself.
const NOT_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr", "p", "li",
    "dt", "dd", "tr", "td", "th", "option", "!doctype",
];

/// How deeply the tags of `html` nest, counted without parsing (an upper
/// bound for well-formed pages).
fn rough_depth(html: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let bytes = html.as_bytes();
    let mut i = 0;
    while let Some(at) = memchr_lt(&bytes[i..]) {
        i += at + 1;
        let rest = &html[i..];
        if rest.starts_with("!--") {
            i += rest.find("-->").map_or(rest.len(), |e| e + 3);
            continue;
        }
        let closing = rest.starts_with('/');
        let name: String = rest
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .take(16)
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() || NOT_NESTING.contains(&name.as_str()) {
            continue;
        }
        let self_closing = rest.find('>').is_some_and(|e| rest[..e].ends_with('/'));
        if closing {
            depth = depth.saturating_sub(1);
        } else if !self_closing {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    deepest
}

fn memchr_lt(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'<')
}

/// The text of `html` with its tags (and comments) taken out.
fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match (in_tag, c) {
            (false, '<') => in_tag = true,
            (true, '>') => {
                in_tag = false;
                if !out.ends_with(char::is_whitespace) {
                    out.push(' ');
                }
            }
            (false, c) => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// HTML as Markdown, or as plain text when it nests too deeply to convert.
fn html_to_markdown(html: &str) -> Result<String, String> {
    use markup5ever_rcdom::NodeData;
    let mut cut = html.len().min(MAX_HTML_BYTES);
    while !html.is_char_boundary(cut) {
        cut -= 1;
    }
    let html = &html[..cut];
    // html5ever's tree building slows down with depth (its open-element
    // scope checks): a page that plainly nests deeper than any real one is
    // not parsed, its tags are stripped.
    if rough_depth(html) > MAX_ROUGH_DEPTH {
        return Ok(format!(
            "[the page nests too deeply to convert to Markdown; its text follows]\n\n{}",
            strip_tags(html)
        ));
    }
    let converter = htmd::HtmlToMarkdown::builder().skip_tags(SKIPPED_TAGS.to_vec()).build();
    let tree = converter.html_to_tree(html).map_err(|e| format!("the page could not be parsed: {e}"))?;
    // The depth, without recursion.
    let mut deepest = 0;
    let mut stack = vec![(tree.clone(), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        if deepest > MAX_HTML_DEPTH {
            break;
        }
        stack.extend(node.children.borrow().iter().map(|c| (c.clone(), depth + 1)));
    }
    if deepest <= MAX_HTML_DEPTH {
        return Ok(converter.tree_to_markdown(&tree));
    }
    // Too deep: the text, in document order, one block per line.
    let mut text = String::from("[the page nests too deeply to convert to Markdown; its text follows]\n\n");
    // (The tree stays whole while walked: dropping its last handle empties
    // every node below, shared or not.)
    let mut stack = vec![tree.clone()];
    while let Some(node) = stack.pop() {
        match &node.data {
            NodeData::Text { contents } => {
                let t = contents.borrow();
                let t = t.trim();
                if !t.is_empty() {
                    text.push_str(t);
                    text.push('\n');
                }
            }
            NodeData::Element { name, .. } if SKIPPED_TAGS.contains(&name.local.as_ref()) => continue,
            _ => {}
        }
        stack.extend(node.children.borrow().iter().rev().cloned());
    }
    drop(tree);
    Ok(text)
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
    let text = if html { html_to_markdown(&text)? } else { text.into_owned() };
    Ok(match text.char_indices().nth(MAX_KEPT_CHARS) {
        Some((cut, _)) => {
            format!("{}\n\n[the page goes on: only its first {MAX_KEPT_CHARS} characters are kept]", &text[..cut])
        }
        None => text,
    })
}

impl Tool for WebFetch {
    type Input = WebFetchInput;
    type Output = WebFetchOutput;

    const NAME: &'static str = "WebFetch";
    const CONCURRENCY_SAFE: bool = true;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::READ_ONLY };

    fn description(&self) -> String {
        "Fetches a URL and returns its content as Markdown, with your prompt beside it: read the content \
         with the prompt in mind. HTTP URLs are tried as HTTPS first. A redirect to another host is not \
         followed: the result names the new URL; fetch it again to follow. At most 100,000 characters \
         of page text come back per call; a longer page's result says the `offset` to read on from. Results \
         are kept for 15 minutes. Read-only; it cannot reach this machine's or its network's private addresses."
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

    async fn call(
        &self,
        input: WebFetchInput,
        ctx: ToolContext,
        _progress: ProgressSink,
    ) -> Result<ToolOutput<WebFetchOutput>, ToolError> {
        let url = input.url.trim().to_owned();
        // The session's own network lists hold for WebFetch too (it follows
        // redirects to the same host only, so the first host is the one).
        if let Some(why) = reqwest::Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .and_then(|host| crate::sandbox::gate::session_refuses(&host, &ctx.info.sandbox))
        {
            return Err(ToolError::new(format!("refused: {why}")));
        }
        let fetched = match recall(&ctx.session_id, &url) {
            Some(hit) => hit,
            None => {
                let fetched = fetch(&self.0, &url, ctx.info.web.allow_private_network, &ctx.cancel)
                    .await
                    .map_err(ToolError::new)?;
                remember(&ctx.session_id, &url, &fetched);
                fetched
            }
        };
        let offset = input.offset.unwrap_or(0);
        if let Fetched::Page { text, .. } = &fetched {
            let total = text.chars().count();
            if offset > 0 && offset >= total {
                return Err(ToolError::new(format!(
                    "offset {offset} is past the end of the page text ({total} characters)"
                )));
            }
        }
        Ok(ToolOutput::new(WebFetchOutput { fetched, prompt: input.prompt, offset }))
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

    /// Issue 49: a field no version had is refused, and the published
    /// schema says so.
    #[test]
    fn unknown_fields_are_refused() {
        let input = serde_json::json!({"url": "https://example.com", "prompt": "p", "offset": 10});
        assert!(serde_json::from_value::<WebFetchInput>(input).is_ok());
        let err = serde_json::from_value::<WebFetchInput>(serde_json::json!({"url": "u", "prompt": "p", "max": 1}));
        assert!(err.unwrap_err().to_string().contains("unknown field"));
        let schema = serde_json::to_value(schemars::schema_for!(WebFetchInput)).unwrap();
        assert_eq!(schema["additionalProperties"], false, "{schema}");
    }

    #[test]
    fn bodies_become_text_or_a_clear_refusal() {
        let md = to_text("text/html; charset=utf-8", b"<html><head><title>t</title><script>x()</script></head><body><h1>Title</h1><p>Some <b>bold</b> text</p></body></html>").unwrap();
        assert!(md.contains("# Title") && md.contains("**bold**") && !md.contains("x()"), "{md}");
        assert_eq!(to_text("application/json", b"{\"a\": 1}").unwrap(), "{\"a\": 1}");
        assert!(to_text("image/png", b"\x89PNG").unwrap_err().contains("image/png"));
        assert!(to_text("text/plain", b"looks like text\0but is not").unwrap_err().contains("binary"), "mislabelled");
        let long = "x".repeat(MAX_KEPT_CHARS + 5);
        let kept = to_text("text/plain", long.as_bytes()).unwrap();
        assert!(kept.contains("only its first 2000000 characters are kept"), "{}", &kept[kept.len() - 100..]);
    }

    #[test]
    fn a_window_of_page_text_says_where_to_read_on() {
        let text: String = (0..MAX_CHARS + 10).map(|i| if i % 2 == 0 { 'é' } else { 'a' }).collect();
        let (shown, rest) = window(&text, 0);
        assert_eq!(shown.chars().count(), MAX_CHARS);
        let Some(Window { end, total }) = rest else { panic!("no rest") };
        assert_eq!((end, total), (MAX_CHARS, MAX_CHARS + 10));
        let (tail, none) = window(&text, end);
        assert_eq!(tail.chars().count(), 10);
        assert!(none.is_none());
        assert_eq!(format!("{shown}{tail}"), text, "the windows cover the text exactly");
        let (empty, none) = window("short", 99);
        assert!(empty.is_empty() && none.is_none());
    }

    #[test]
    fn a_page_nested_too_deeply_gives_its_text_and_no_crash() {
        // Too deep for htmd's walk (parsed), and too deep to parse at all.
        for n in [600, 200_000] {
            let html = format!("<html><body>{}deep text{}</body></html>", "<div>".repeat(n), "</div>".repeat(n));
            let text = to_text("text/html", html.as_bytes()).unwrap();
            assert!(text.contains("nests too deeply") && text.contains("deep text"), "{n}: {text}");
        }
        // Unclosed paragraphs and list items do not count as nesting.
        let long = "<p>para <li>item ".repeat(5000);
        assert!(rough_depth(&long) < 5);
        assert_eq!(rough_depth("<div><br><img src=x/><span>a</span><!-- <div> --></div>"), 2);
        let shallow = format!("{}<b>fine</b>{}", "<div>".repeat(50), "</div>".repeat(50));
        assert!(to_text("text/html", shallow.as_bytes()).unwrap().contains("**fine**"));
    }
}
