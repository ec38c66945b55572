//! The gate's wire formats, pure: HTTP proxy request heads (parsed
//! strictly, forwarded in origin form) and SOCKS5 replies.

pub(super) fn socks_reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

// ---- HTTP ----

/// A parsed request head.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) version: String,
    pub(super) headers: Vec<(String, String)>,
}

/// Parses a request head (without its final blank line).
pub(super) fn parse_head(raw: &[u8]) -> Result<Head, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "the request head is not text".to_owned())?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("a bad request line: {:?}", one_line(line)));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) || !version.starts_with("HTTP/1.") {
        return Err(format!("a bad request line: {:?}", one_line(line)));
    }
    // Lines end with CRLF and nothing else: a bare CR or LF, or another
    // control character, could make the server read a different request
    // than the one decided on (a second Host, a smuggled request).
    let bad = |c: char| c.is_control() && c != '\t';
    if text.split("\r\n").any(|l| l.contains(bad)) {
        return Err("a request head with a bare CR or LF or another control character".to_owned());
    }
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("a bad header line: {:?}", one_line(line)));
        };
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(token) {
            return Err(format!("a bad header name: {:?}", one_line(name)));
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Head { method: method.to_owned(), target: target.to_owned(), version: version.to_owned(), headers })
}

pub(super) fn one_line(s: &str) -> String {
    s.chars().take(120).collect()
}

/// `host:port` of a CONNECT, IPv6 bracketed.
pub(super) fn authority(target: &str) -> Option<(String, u16)> {
    let (host, port) = match target.strip_prefix('[') {
        Some(rest) => {
            let (v6, tail) = rest.split_once(']')?;
            (format!("[{v6}]"), tail.strip_prefix(':')?)
        }
        None => {
            let (h, p) = target.rsplit_once(':')?;
            (h.to_owned(), p)
        }
    };
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return None;
    }
    Some((host, port.parse().ok()?))
}

/// Host, port and origin-form path of an absolute `http://` URL.
pub(super) fn absolute_http(target: &str) -> Option<(String, u16, String)> {
    if !target.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("http://")) {
        return None;
    }
    let url = url::Url::parse(target).ok()?;
    let host = url.host_str()?.to_owned();
    let port = url.port_or_known_default()?;
    let path = url[url::Position::BeforePath..url::Position::AfterQuery].to_owned();
    Some((host, port, if path.is_empty() { "/".to_owned() } else { path }))
}

/// The request as the server gets it: origin-form, the proxy's own
/// headers dropped, one request per connection.
pub(super) fn forward_head(head: &Head, path: &str, host: &str, port: u16) -> Vec<u8> {
    // One request per connection, never upgraded (a protocol switched to
    // would carry requests the gate never saw; CONNECT is for those).
    let hop = [
        "proxy-connection",
        "proxy-authorization",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "te",
        "upgrade",
        "trailer",
    ];
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    // The host decided on, not the client's `Host` (a shared address must
    // not serve another name than the one allowed).
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() };
    out.push_str(&if port == 80 { format!("Host: {host}\r\n") } else { format!("Host: {host}:{port}\r\n") });
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        if hop.contains(&lower.as_str()) || lower == "host" {
            continue;
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_targets_parse_strictly() {
        let head = parse_head(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443").unwrap();
        assert_eq!((head.method.as_str(), head.target.as_str()), ("CONNECT", "example.com:443"));
        for bad in [
            &b"GET  http://x/ HTTP/1.1"[..],
            b"get http://x/ HTTP/1.1",
            b"GET http://x/ HTTP/2",
            b"GET http://x/ HTTP/1.1\r\n folded",
            b"GET http://x/ HTTP/1.1\r\nBad Name: x",
            b"\xff\xfe",
        ] {
            assert!(parse_head(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(authority("example.com:443"), Some(("example.com".into(), 443)));
        assert_eq!(authority("[::1]:8080"), Some(("[::1]".into(), 8080)));
        for bad in ["example.com", "example.com:", "example.com:99999", ":443", "a/b:1", "[::1]443", "u@h:1"] {
            assert_eq!(authority(bad), None, "{bad}");
        }
        assert_eq!(absolute_http("http://Example.com/a?b=1"), Some(("example.com".into(), 80, "/a?b=1".into())));
        assert_eq!(absolute_http("HTTP://h.test:8080"), Some(("h.test".into(), 8080, "/".into())));
        assert_eq!(absolute_http("https://h.test/"), None);
        assert_eq!(absolute_http("/just/a/path"), None);
    }

    #[test]
    fn smuggling_shapes_are_refused_and_nothing_is_upgraded() {
        for bad in [
            &b"GET http://gate.test/ HTTP/1.1\nHost: evil.test"[..],
            b"GET http://gate.test/ HTTP/1.1\r\nX: a\nHost: evil.test",
            b"GET http://gate.test/ HTTP/1.1\r\nX: a\rHost: evil.test",
            b"GET http://gate.test/ HTTP/1.1\r\nX: \x00",
            b"GET http://gate.test/\x0b HTTP/1.1",
        ] {
            assert!(parse_head(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let head = parse_head(
            b"GET http://h.test/ HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nHost: evil.test\r\nX: a\tb",
        )
        .unwrap();
        let out = String::from_utf8(forward_head(&head, "/", "h.test", 80)).unwrap();
        assert!(out.contains("Connection: close\r\n") && !out.to_ascii_lowercase().contains("upgrade"), "{out}");
        assert_eq!(out.matches("Host:").count(), 1, "{out}");
        assert!(out.contains("Host: h.test\r\n") && out.contains("X: a\tb"), "{out}");
    }

    #[test]
    fn forwarded_heads_drop_the_proxy_headers() {
        let head = parse_head(
            b"GET http://h.test/x HTTP/1.1\r\nHost: h.test\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: secret\r\nAccept: */*",
        )
        .unwrap();
        let out = String::from_utf8(forward_head(&head, "/x", "h.test", 80)).unwrap();
        assert!(out.starts_with("GET /x HTTP/1.1\r\n"), "{out}");
        assert!(!out.to_ascii_lowercase().contains("proxy-"), "{out}");
        assert!(out.ends_with("Connection: close\r\n\r\n") && out.contains("Accept: */*"), "{out}");
    }
}
