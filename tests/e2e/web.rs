//! WebFetch and WebSearch through the socket, against a real HTTP server
//! on loopback started by the test: pages, redirects (same host, another
//! host, loops), a huge body, a slow body, binary and mislabelled bodies,
//! the SSRF guard, rules and permissions, and a SearXNG-shaped backend.

use std::time::Duration;

use agentd_tests::{RawConn, StandaloneDaemon, within};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A small HTTP/1.1 server: one response per connection, by path.
async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else { return };
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let Ok(n) = stream.read(&mut buf).await else { return };
                if n == 0 || (request.is_empty() && buf[0] == 0x16) {
                    // Closed, or a TLS handshake: this server speaks plain HTTP.
                    return;
                }
                request.extend_from_slice(&buf[..n]);
                if request.windows(4).any(|w| w == b"\r\n\r\n") || request.len() > 65536 {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&request).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
            let reply = |status: &str, headers: &str, body: &[u8]| {
                let mut out = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n",
                    body.len()
                )
                .into_bytes();
                out.extend_from_slice(body);
                out
            };
            let out = match path.split('?').next().unwrap_or("") {
                "/page" => reply(
                    "200 OK",
                    "Content-Type: text/html; charset=utf-8\r\n",
                    b"<html><head><title>T</title><script>steal()</script></head><body><h1>Hello page</h1><p>Some <b>bold</b> words and <a href=\"/x\">a link</a>.</p></body></html>",
                ),
                "/long" => {
                    // 250,000 characters: "0123456789" with a marker every 100,000.
                    let mut body: Vec<u8> = (0..250_000).map(|i| b'0' + (i % 10) as u8).collect();
                    body[100_000..100_006].copy_from_slice(b"MARK-1");
                    body[200_000..200_006].copy_from_slice(b"MARK-2");
                    reply("200 OK", "Content-Type: text/plain\r\n", &body)
                }
                "/same" => reply("302 Found", "Location: /page\r\n", b""),
                "/other" => reply("301 Moved", &format!("Location: http://localhost:{port}/page\r\n"), b""),
                "/loop" => reply("302 Found", "Location: /loop\r\n", b""),
                "/binary" => reply("200 OK", "Content-Type: image/png\r\n", b"\x89PNG\r\n\x1a\n\0\0\0"),
                "/mislabelled" => reply("200 OK", "Content-Type: text/plain\r\n", b"text\0\x01\x02 binary"),
                "/huge" => {
                    // Claims 20 MB and sends them until the client stops reading.
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n";
                    let _ = stream.write_all(head.as_bytes()).await;
                    let chunk = vec![b'a'; 64 * 1024];
                    for _ in 0..(20 * 16) {
                        if stream.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                "/slow" => {
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nstart";
                    let _ = stream.write_all(head.as_bytes()).await;
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    return;
                }
                "/search" => {
                    let body = json!({ "query": "q", "results": [
                        { "title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language" },
                        { "title": "Docs", "url": "https://docs.rs/tokio", "content": "Tokio docs" },
                        { "title": "Blocked", "url": "https://spam.example.com/", "content": "spam" }
                    ]});
                    reply("200 OK", "Content-Type: application/json\r\n", body.to_string().as_bytes())
                }
                _ => reply("404 Not Found", "Content-Type: text/plain\r\n", b"nothing here"),
            };
            let _ = stream.write_all(&out).await;
        });
    }
}

async fn server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(serve(listener));
    port
}

async fn session(c: &mut RawConn, extra: Value) -> String {
    let mut params = json!({ "cwd": std::env::temp_dir() });
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    c.session(params).await
}

async fn fetch(c: &mut RawConn, sid: &str, url: &str) -> (bool, String) {
    fetch_at(c, sid, url, 0).await
}

async fn fetch_at(c: &mut RawConn, sid: &str, url: &str, offset: usize) -> (bool, String) {
    let mut input = json!({ "url": url, "prompt": "summarise" });
    if offset > 0 {
        input["offset"] = json!(offset);
    }
    let r = within("WebFetch", c.tool(sid, "WebFetch", input)).await;
    (r["is_error"] == true, r["content"][0]["text"].as_str().unwrap_or_default().to_owned())
}

fn names(list: &Value) -> Vec<String> {
    list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn web_fetch_reads_pages_and_refuses_what_it_must() {
    let d = StandaloneDaemon::start(&[], &[("AGENTD_WEB_TIMEOUT_MS", "1500")]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let port = server().await;
        let base = format!("http://127.0.0.1:{port}");
        let mut c = RawConn::connect(&d.socket).await;
        let open = session(&mut c, json!({ "mode": "bypass", "web": { "allow_private_network": true } })).await;

        // A page, as Markdown, with the prompt beside it (https tried
        // first; this server speaks only http).
        let (err, text) = fetch(&mut c, &open, &format!("{base}/page")).await;
        assert!(!err, "{text}");
        assert!(text.contains("Prompt: summarise") && text.contains("# Hello page") && text.contains("**bold**"), "{text}");
        assert!(!text.contains("steal()"), "scripts are dropped: {text}");
        assert!(text.contains(&format!("URL: {base}/page")), "{text}");
        // Same host: followed. Another host: named, not followed.
        let (err, text) = fetch(&mut c, &open, &format!("{base}/same")).await;
        assert!(!err && text.contains("# Hello page"), "{text}");
        let (err, text) = fetch(&mut c, &open, &format!("{base}/other")).await;
        assert!(!err && text.contains("another host") && text.contains(&format!("http://localhost:{port}/page")), "{text}");
        // A long page comes in windows of 100,000 characters, each saying
        // the offset to read on from (Claude Code 2.1's `offset`).
        let long = format!("{base}/long");
        let (err, first) = fetch(&mut c, &open, &long).await;
        assert!(!err && first.contains("call WebFetch again with offset 100000"), "{}", &first[first.len() - 200..]);
        assert!(!first.contains("MARK-1"), "the first window ends before character 100,000");
        let (err, second) = fetch_at(&mut c, &open, &long, 100_000).await;
        assert!(!err && second.contains("\n\nMARK-1") && !second.contains("MARK-2"), "{}", &second[..200]);
        assert!(second.contains("characters 100000..200000 of 250000 shown; call WebFetch again with offset 200000"));
        let (err, last) = fetch_at(&mut c, &open, &long, 200_000).await;
        assert!(!err && last.contains("MARK-2") && !last.contains("offset"), "the last window says nothing more");
        let (err, past) = fetch_at(&mut c, &open, &long, 250_000).await;
        assert!(err && past.contains("past the end of the page text (250000 characters)"), "{past}");
        // What must fail, failing with a reason.
        for (path, needle) in [
            ("/loop", "redirects"),
            ("/binary", "image/png"),
            ("/mislabelled", "binary"),
            ("/huge", "more than"),
            ("/slow", "too slow"),
        ] {
            let (err, text) = fetch(&mut c, &open, &format!("{base}{path}")).await;
            assert!(err && text.contains(needle), "{path}: {text}");
        }
        for (url, needle) in [("file:///etc/passwd", "only http"), ("not a url", "not a URL"), ("ftp://x/y", "only http")] {
            let (err, text) = fetch(&mut c, &open, url).await;
            assert!(err && text.contains(needle), "{url}: {text}");
        }

        // Without the session option: loopback, private and metadata
        // addresses are refused, also behind a name.
        let guarded = session(&mut c, json!({ "mode": "bypass" })).await;
        for url in [
            format!("{base}/page"),
            format!("http://localhost:{port}/page"),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "http://[::1]/".to_owned(),
            "http://0x7f000001/".to_owned(),
        ] {
            let (err, text) = fetch(&mut c, &guarded, &url).await;
            assert!(err && text.contains("private or local address"), "{url}: {text}");
        }

        // Permissions: unknown domains ask in default mode; a domain rule allows.
        let asking = session(&mut c, json!({ "permission_timeout_ms": 10, "web": { "allow_private_network": true } })).await;
        let (err, text) = fetch(&mut c, &asking, &format!("{base}/page")).await;
        assert!(err && !text.contains("Hello page"), "asked, nobody answered: {text}");
        let ruled = session(
            &mut c,
            json!({ "permissions": { "allow": ["WebFetch(domain:127.0.0.1)"] }, "web": { "allow_private_network": true } }),
        )
        .await;
        let (err, text) = fetch(&mut c, &ruled, &format!("{base}/page")).await;
        assert!(!err && text.contains("Hello page"), "{text}");
        let list = c.ok("tools/list", json!({ "session_id": ruled })).await;
        assert!(names(&list).contains(&"WebFetch".to_owned()));
        assert!(!names(&list).contains(&"WebSearch".to_owned()), "no backend, no WebSearch");
    });
}

#[test]
fn web_search_is_offered_with_a_backend_and_filters_domains() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let port = rt.block_on(server());
    let backend = format!("http://127.0.0.1:{port}/");
    let d = StandaloneDaemon::start(&[], &[("AGENTD_WEB_SEARCH_URL", backend.as_str())]);
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = session(&mut c, json!({ "mode": "bypass" })).await;
        let list = c.ok("tools/list", json!({ "session_id": sid })).await;
        assert!(names(&list).contains(&"WebSearch".to_owned()), "{list}");
        let call = |input: Value| json!({ "session_id": sid, "name": "WebSearch", "input": input });
        let r = c.ok("tool/call", call(json!({ "query": "rust async" }))).await;
        let text = r["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.contains("https://www.rust-lang.org/") && text.contains("Tokio docs"), "{text}");
        let r = c.ok("tool/call", call(json!({ "query": "rust", "allowed_domains": ["docs.rs"] }))).await;
        let text = r["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(text.contains("docs.rs") && !text.contains("rust-lang.org"), "{text}");
        let r = c.ok("tool/call", call(json!({ "query": "rust", "blocked_domains": ["example.com"] }))).await;
        assert!(!r["content"][0]["text"].as_str().unwrap().contains("spam"), "{r}");
        let r = c.ok("tool/call", call(json!({ "query": "x" }))).await;
        assert_eq!(r["is_error"], true, "too short a query: {r}");
    });
}
