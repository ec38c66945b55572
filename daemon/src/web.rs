//! Fetching from the web for WebFetch and WebSearch: a daemon's [`Web`],
//! whose HTTP client (reqwest, rustls on ring, the system's certificates,
//! no proxy) sends every connection to an address this module resolved and
//! checked; the network gate resolves through it too.
//!
//! **SSRF guard.** Unless a session allows the private network, a host
//! that is (or resolves to) a loopback, private, link-local, shared
//! (CGNAT), multicast or unspecified address — cloud metadata endpoints
//! included — is refused. The check runs on the addresses the connection
//! will use (the resolver below is the client's only resolver), so a name
//! that resolves differently a second time (DNS rebinding) gains nothing.
//! Redirects are never followed by the client: WebFetch follows those to
//! the same host itself, each hop checked again.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::sync::MutexExt;

/// Most bytes of a response body read.
pub const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// Longest a request may take, body included (`AGENTD_WEB_TIMEOUT_MS`
/// changes it, for tests).
pub static REQUEST_TIMEOUT: LazyLock<Duration> = LazyLock::new(|| {
    let ms = std::env::var("AGENTD_WEB_TIMEOUT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(60_000);
    Duration::from_millis(ms)
});
/// Longest a connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Installs rustls' crypto provider (ring) for the process; once, at
/// start-up, before any TLS connection (WebFetch, HTTPS MCP servers).
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Whether connecting to `ip` could reach something only this machine or
/// its network should: loopback, private ranges, link-local (cloud
/// metadata), CGNAT, multicast, unspecified, and IPv6's equivalents
/// (with IPv4 addresses mapped or translated into IPv6 judged as IPv4).
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                // Benchmarking (often internal infrastructure) and documentation.
                || (a == 198 && (18..20).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 2)
                || (a == 198 && b == 51 && v4.octets()[2] == 100)
                || (a == 203 && b == 0 && v4.octets()[2] == 113)
                || a >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let v4 = std::net::Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                return is_private(IpAddr::V4(v4));
            }
            // 6to4 (2002::/16) carries one in its second and third groups.
            if s[0] == 0x2002 {
                let v4 = std::net::Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
                return is_private(IpAddr::V4(v4));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                // Link-local and the deprecated site-local.
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || (s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == 0 && s[5] == 0)
                // Teredo (its client address is obfuscated: all of it).
                || (s[0] == 0x2001 && s[1] == 0)
                // Local-use NAT64 and documentation.
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
                || (s[0] == 0x2001 && s[1] == 0xdb8)
        }
    }
}

/// Whether `ip` is refused: private (see [`is_private`]) or one of this
/// machine's own addresses (a public address on an interface reaches
/// services listening on all addresses).
pub fn is_refused(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    is_private(ip) || local_addresses().contains(&ip)
}

/// This machine's interface addresses, read at most every 5 s.
fn local_addresses() -> Vec<IpAddr> {
    static SEEN: std::sync::Mutex<Option<(std::time::Instant, Vec<IpAddr>)>> = std::sync::Mutex::new(None);
    let mut seen = SEEN.locked();
    if let Some((at, addrs)) = seen.as_ref()
        && at.elapsed() < Duration::from_secs(5)
    {
        return addrs.clone();
    }
    let addrs: Vec<IpAddr> = nix::ifaddrs::getifaddrs()
        .map(|list| {
            list.filter_map(|i| i.address)
                .filter_map(|a| {
                    a.as_sockaddr_in()
                        .map(|v4| IpAddr::V4(v4.ip()))
                        .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
                })
                .collect()
        })
        .unwrap_or_default();
    *seen = Some((std::time::Instant::now(), addrs.clone()));
    addrs
}

/// Names pinned to addresses, as curl's `--resolve` does (for split DNS,
/// and for tests): canonical host → addresses.
type Pins = std::collections::HashMap<String, Vec<IpAddr>>;

/// A daemon's way to the web, from its command line: the names it pins
/// (`--resolve`), its two HTTP clients (guarded, and reaching private
/// addresses; built on first use, each resolving through these pins), and
/// the WebSearch backend (`--web-search-url`, else `AGENTD_WEB_SEARCH_URL`,
/// else `webSearch.searxngUrl` in the user's settings). Each daemon has its
/// own, so two daemons in one process each keep what they were started
/// with. WebFetch, WebSearch and the network gate use it.
pub struct Web {
    pins: Arc<Pins>,
    public: std::sync::OnceLock<Option<reqwest::Client>>,
    any: std::sync::OnceLock<Option<reqwest::Client>>,
    search: Option<reqwest::Url>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web").field("pins", &self.pins).field("search", &self.search).finish_non_exhaustive()
    }
}

impl Default for Web {
    /// No pins; the search backend from the environment or the settings.
    fn default() -> Web {
        Web::with(Pins::new(), search_backend(None))
    }
}

impl Web {
    /// Parses `HOST:ADDR` pins (comma-separated lists too; an IPv6 address
    /// may be bracketed) and finds the search backend (`search_url` first).
    pub fn new(resolve: &[String], search_url: Option<String>) -> Result<Web, String> {
        let mut pins = Pins::new();
        for pin in resolve.iter().flat_map(|p| p.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
            let (host, addr) = pin.split_once(':').ok_or_else(|| format!("--resolve {pin:?}: write HOST:ADDRESS"))?;
            let addr = addr.trim_start_matches('[').trim_end_matches(']');
            let ip: IpAddr = addr.parse().map_err(|_| format!("--resolve {pin:?}: {addr:?} is not an IP address"))?;
            let host = crate::permission::rules::canonical_host(host)
                .filter(|h| h.parse::<IpAddr>().is_err())
                .ok_or_else(|| format!("--resolve {pin:?}: {host:?} is not a host name"))?;
            pins.entry(host).or_default().push(ip);
        }
        Ok(Web::with(pins, search_backend(search_url)))
    }

    fn with(pins: Pins, search: Option<reqwest::Url>) -> Web {
        Web { pins: Arc::new(pins), public: Default::default(), any: Default::default(), search }
    }

    /// The client: guarded, or (`allow_private`) reaching private addresses.
    pub fn client(&self, allow_private: bool) -> Result<&reqwest::Client, String> {
        let cell = if allow_private { &self.any } else { &self.public };
        cell.get_or_init(|| build(allow_private, self.pins.clone()))
            .as_ref()
            .ok_or_else(|| "the HTTP client could not be set up (see the daemon's log)".into())
    }

    /// The WebSearch backend's base URL, if one is configured.
    pub fn search_backend(&self) -> Option<&reqwest::Url> {
        self.search.as_ref()
    }

    /// Resolves `host` (a canonical name) for a connection to `port`: its
    /// pins, else the system's resolver (within [`CONNECT_TIMEOUT`]).
    /// Refused when any address is private or local, unless
    /// `allow_private` (and the addresses returned are the ones checked:
    /// connect to them, not to the name again). `allow_how` says how a
    /// session would allow it.
    pub async fn resolve_checked(
        &self,
        host: &str,
        port: u16,
        allow_private: bool,
        allow_how: &str,
    ) -> Result<Vec<SocketAddr>, String> {
        resolve_with(&self.pins, host, port, allow_private, allow_how).await
    }
}

/// The search backend: `from_flag`, else `AGENTD_WEB_SEARCH_URL`, else the
/// user's settings; none when it is not an http(s) URL (said in the log).
fn search_backend(from_flag: Option<String>) -> Option<reqwest::Url> {
    let from_env = from_flag
        .filter(|u| !u.trim().is_empty())
        .or_else(|| std::env::var("AGENTD_WEB_SEARCH_URL").ok().filter(|v| !v.trim().is_empty()));
    let from_settings = || {
        let abs = |v: Option<std::ffi::OsString>| v.map(std::path::PathBuf::from).filter(|p| p.is_absolute());
        let config = abs(std::env::var_os("XDG_CONFIG_HOME"))
            .or_else(|| abs(std::env::var_os("HOME")).map(|h| h.join(".config")))?;
        let text = std::fs::read_to_string(config.join("agentd/settings.json")).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        value["webSearch"]["searxngUrl"].as_str().map(str::to_owned)
    };
    let raw = from_env.or_else(from_settings)?;
    match reqwest::Url::parse(raw.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Some(url),
        _ => {
            tracing::warn!("the web search backend {raw:?} is not an http(s) URL; WebSearch is off");
            None
        }
    }
}

async fn resolve_with(
    pins: &Pins,
    host: &str,
    port: u16,
    allow_private: bool,
    allow_how: &str,
) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = match pins.get(host) {
        Some(ips) => ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect(),
        None => match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(addrs)) => addrs.collect(),
            Ok(Err(e)) => return Err(format!("{host} cannot be resolved: {e}")),
            Err(_) => return Err(format!("{host} was not resolved within {} s", CONNECT_TIMEOUT.as_secs())),
        },
    };
    if addrs.is_empty() {
        return Err(format!("{host} has no address"));
    }
    if !allow_private && let Some(bad) = addrs.iter().find(|a| is_refused(a.ip())) {
        return Err(format!(
            "{host} resolves to {}, a private or local address; reaching it is refused (a session may allow it \
             with {allow_how})",
            bad.ip()
        ));
    }
    Ok(addrs)
}

/// The client's resolver: resolves (through the daemon's pins), then
/// refuses names with any private address (unless allowed).
struct Guarded {
    allow_private: bool,
    pins: Arc<Pins>,
}

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let pins = self.pins.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let host = crate::permission::rules::canonical_host(&host).unwrap_or(host);
            resolve_with(&pins, &host, 0, allow_private, "web.allow_private_network")
                .await
                .map(|addrs| Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
                .map_err(|why| Box::new(Refused(why)) as Box<dyn std::error::Error + Send + Sync>)
        })
    }
}

/// A refusal of the SSRF guard.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

fn build(allow_private: bool, pins: Arc<Pins>) -> Option<reqwest::Client> {
    install_tls_provider();
    reqwest::Client::builder()
        .dns_resolver(Arc::new(Guarded { allow_private, pins }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(*REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION"), " (WebFetch)"))
        .build()
        .map_err(|e| tracing::error!("cannot build the HTTP client: {e}"))
        .ok()
}

/// Checks a URL before any connection: http or https, a host, and (unless
/// allowed) not an IP literal of a private address. Names are checked when
/// resolved.
pub fn check_url(url: &reqwest::Url, allow_private: bool) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("only http and https URLs can be fetched, not {}:", url.scheme()));
    }
    let host = url.host().ok_or("the URL has no host")?;
    let ip = match host {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    };
    if !allow_private && let Some(ip) = ip.filter(|ip| is_refused(*ip)) {
        return Err(format!(
            "{ip} is a private or local address; fetching it is refused (a session may allow it with \
             web.allow_private_network)"
        ));
    }
    Ok(())
}

/// Reads a response's body, at most [`MAX_BODY_BYTES`], or until `cancel`.
pub async fn body(
    response: reqwest::Response,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Vec<u8>, String> {
    use futures_util::StreamExt;
    if let Some(len) = response.content_length().filter(|l| *l as usize > MAX_BODY_BYTES) {
        return Err(format!("the response is {len} bytes, more than the {MAX_BODY_BYTES} a fetch may read"));
    }
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    loop {
        let chunk = tokio::select! {
            c = stream.next() => c,
            _ = cancel.cancelled() => return Err("cancelled".into()),
        };
        let Some(chunk) = chunk else { return Ok(body) };
        let chunk = chunk.map_err(|e| format!("reading the response failed: {}", describe(&e)))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(format!("the response is more than the {MAX_BODY_BYTES} bytes a fetch may read"));
        }
        body.extend_from_slice(&chunk);
    }
}

/// A request error in words, with the guard's refusal when that is why.
pub fn describe(e: &reqwest::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<Refused>() {
            return refused.0.clone();
        }
        source = s.source();
    }
    if e.is_timeout() {
        return format!("no complete answer within {:.1} s (too slow)", REQUEST_TIMEOUT.as_secs_f64());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two daemons' `Web`s in one process: each resolves through its own
    /// pins (once process-wide, where the first daemon's command line won).
    #[tokio::test]
    async fn each_daemon_resolves_through_its_own_pins() {
        let a = Web::new(&["Pinned.Test:127.0.0.1, other.test:[::1]".to_owned()], None).unwrap();
        let b = Web::new(&["pinned.test:127.0.0.2".to_owned()], None).unwrap();
        let at = |r: Result<Vec<SocketAddr>, String>| r.unwrap().iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(at(a.resolve_checked("pinned.test", 80, true, "x").await), ["127.0.0.1:80"]);
        assert_eq!(at(a.resolve_checked("other.test", 443, true, "x").await), ["[::1]:443"]);
        assert_eq!(at(b.resolve_checked("pinned.test", 80, true, "x").await), ["127.0.0.2:80"]);
        // Pinned to loopback is still refused unless the private network is allowed.
        let refused = a.resolve_checked("pinned.test", 80, false, "the option").await.unwrap_err();
        assert!(refused.contains("127.0.0.1") && refused.contains("the option"), "{refused}");
        // A daemon without pins asks the system, which knows no `.test` name.
        assert!(Web::default().resolve_checked("pinned.test", 80, true, "x").await.is_err());
        for bad in ["nocolon", "host:notanip", "127.0.0.1:127.0.0.1", ":1.2.3.4"] {
            assert!(Web::new(&[bad.to_owned()], None).is_err(), "{bad}");
        }
        let search = Web::new(&[], Some("http://127.0.0.1:1/".to_owned())).unwrap();
        assert_eq!(search.search_backend().map(|u| u.as_str()), Some("http://127.0.0.1:1/"));
        assert!(Web::new(&[], Some("ftp://x/".to_owned())).unwrap().search_backend().is_none());
    }

    #[test]
    fn private_and_local_addresses_are_recognised() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "::127.0.0.1",
            "198.18.0.1",
            "198.19.255.1",
            "192.0.2.2",
            "198.51.100.7",
            "203.0.113.9",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378::1",
            "64:ff9b:1::a00:1",
            "fec0::1",
            "2001:db8::1",
        ] {
            assert!(is_private(bad.parse().unwrap()), "{bad}");
        }
        // This machine's own addresses, whatever they are.
        for addr in local_addresses() {
            assert!(is_refused(addr), "{addr}");
        }
        assert!(!is_refused("1.1.1.1".parse().unwrap()));
        for good in [
            "93.184.215.14",
            "1.1.1.1",
            "2606:4700::1111",
            "172.32.0.1",
            "100.128.0.1",
            "2002:5db8:d70e::1",
            "198.20.0.1",
        ] {
            assert!(!is_private(good.parse().unwrap()), "{good}");
        }
    }

    #[test]
    fn urls_are_checked_before_connecting() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(check_url(&url("https://example.com/x"), false).is_ok());
        assert!(check_url(&url("file:///etc/passwd"), false).unwrap_err().contains("only http"));
        assert!(check_url(&url("ftp://example.com/"), false).is_err());
        assert!(check_url(&url("http://127.0.0.1:8080/"), false).unwrap_err().contains("private"));
        assert!(check_url(&url("http://[::ffff:7f00:1]/"), false).unwrap_err().contains("private"));
        assert!(check_url(&url("http://2130706433/"), false).unwrap_err().contains("private"), "decimal 127.0.0.1");
        assert!(check_url(&url("http://127.0.0.1:8080/"), true).is_ok());
    }
}
