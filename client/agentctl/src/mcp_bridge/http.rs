//! `agentctl mcp --http ADDR`: the bridge over MCP's streamable HTTP, for
//! clients on other machines or that speak only HTTP. Every request must
//! carry the bearer token (`Authorization: Bearer …`, compared in constant
//! time; 401 otherwise, before anything else is looked at); rmcp's own
//! checks then refuse (403) a `Host` that is not this server's (DNS
//! rebinding) and an `Origin` that is not one of its own. Each MCP session
//! (`Mcp-Session-Id`) is a bridge of its own, with a daemon connection and
//! session opened on first use and closed when the MCP session ends
//! (DELETE, or 30 minutes without requests). It listens only on loopback
//! addresses unless `--listen-public` is given, and then only over TLS.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::{Bridge, Link, Served, SessionSource};

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";
/// How long an MCP session lives without requests.
const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// MCP sessions served at once (each a daemon connection and session).
pub const MAX_SESSIONS: usize = 64;
/// Connections served at once. When all are taken, a new one ends the
/// oldest that has not yet made an authorized request (idle connections
/// cannot lock clients out); when every one has, the new one is closed.
const MAX_CONNECTIONS: usize = 128;
/// A request's head must arrive within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request body (a tool call's arguments are at most 8 MiB).
const MAX_BODY: usize = 9 << 20;

/// How `agentctl mcp --http` serves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// A non-loopback address is allowed (with TLS).
    pub public: bool,
    /// TLS certificate chain and key (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Where the token is kept.
    pub token_file: PathBuf,
    /// Host names besides loopback clients may use to reach this server.
    pub hosts: Vec<String>,
}

/// The token file's default place: `$XDG_CONFIG_HOME/agentd/mcp-http-token`
/// (`~/.config/agentd/…`).
pub fn default_token_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("agentd").join("mcp-http-token"))
}

/// `N` random bytes from the kernel, as hex (a bearer token, a round's
/// `requestState`).
pub(super) fn random_hex<const N: usize>() -> std::io::Result<String> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The token in `path`, or a new one written there (0600, never replacing
/// a file) and returned with `true`. A token file that is not a regular
/// file of this user's, or that others may read, is refused; it is read
/// from the descriptor that was checked (a link swapped in is not
/// followed).
pub fn token(path: &Path) -> Result<(String, bool), String> {
    use std::io::Read as _;
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
    let shown = |e: std::io::Error| format!("{}: {e}", path.display());
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path);
    match opened {
        Ok(mut file) => {
            let meta = file.metadata().map_err(shown)?;
            if !meta.is_file() {
                return Err(format!("{}: not a regular file", path.display()));
            }
            if meta.uid() != nix::unistd::geteuid().as_raw() {
                return Err(format!("{}: another user's file", path.display()));
            }
            if meta.mode() & 0o077 != 0 {
                return Err(format!(
                    "{}: others may read it (mode {:o}): chmod 600 it, or remove it for a new token",
                    path.display(),
                    meta.mode() & 0o777
                ));
            }
            let mut text = String::new();
            (&mut file).take(4096).read_to_string(&mut text).map_err(shown)?;
            let token = text.trim().to_owned();
            if token.len() < 32 || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return Err(format!("{}: not a token (at least 32 letters, digits, - or _)", path.display()));
            }
            Ok((token, false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            let token = random_hex::<32>().map_err(|e| format!("no randomness for a token: {e}"))?;
            let mut file =
                std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(shown)?;
            file.write_all(format!("{token}\n").as_bytes()).map_err(shown)?;
            Ok((token, true))
        }
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            Err(format!("{}: a symbolic link (give the file itself)", path.display()))
        }
        Err(e) => Err(shown(e)),
    }
}

/// Whether `header` is `Bearer <token>`, compared in constant time.
fn authorized(header: Option<&http::HeaderValue>, token: &str) -> bool {
    let Some(given) = header.and_then(|v| v.as_bytes().strip_prefix(b"Bearer ")) else { return false };
    let want = token.as_bytes();
    let mut diff = (given.len() ^ want.len()) as u8;
    for (i, w) in want.iter().enumerate() {
        diff |= w ^ given.get(i).copied().unwrap_or(0);
    }
    diff == 0 && given.len() == want.len()
}

fn plain(
    status: http::StatusCode,
    text: &'static str,
) -> http::Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>> {
    let mut response = http::Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    if status == http::StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
    }
    response
}

/// Where the protected resource metadata of RFC 9728 is served (the
/// root's, and the path-based one of `/mcp`), without a token.
const METADATA_PATHS: [&str; 2] =
    ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"];

/// `scheme://host:port` of this server as the request named it, when it
/// named one of the allowed hosts (else its local address).
fn base_address(
    scheme: &str,
    host: Option<&http::HeaderValue>,
    hosts: &[String],
    local: std::net::SocketAddr,
) -> String {
    let named = host.and_then(|h| h.to_str().ok()).filter(|h| {
        let name = match h.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => h,
        };
        let name = name.trim_start_matches('[').trim_end_matches(']');
        hosts.iter().any(|allowed| allowed.eq_ignore_ascii_case(name))
    });
    match named {
        Some(host) => format!("{scheme}://{host}"),
        None => format!("{scheme}://{local}"),
    }
}

/// The protected resource metadata (RFC 9728): the MCP endpoint, taking
/// a bearer token in the header, which no authorization server issues
/// (agentctl mcp --http saved it; its user gives it to the client).
fn resource_metadata(
    base: &str,
) -> http::Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>> {
    let document = serde_json::json!({
        "resource": format!("{base}{MCP_PATH}"),
        "authorization_servers": [],
        "bearer_methods_supported": ["header"],
        "resource_name": "agentd (agentctl mcp)",
        "resource_documentation": "The bearer token is the one `agentctl mcp --http` saved in its token file (mode 0600).",
    });
    let mut response = http::Response::new(Full::new(Bytes::from(document.to_string())).boxed());
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

/// Serves until interrupted. `source` says where each MCP session's daemon
/// session comes from.
pub async fn serve(
    endpoint: agentd_client::Endpoint,
    source: SessionSource,
    options: HttpOptions,
) -> Result<(), String> {
    let ip = options.addr.ip();
    if !ip.is_loopback() && !options.public {
        return Err(format!(
            "{ip} is not a loopback address: serving MCP to other machines needs --listen-public (with \
             --http-tls-cert and --http-tls-key)"
        ));
    }
    if options.public && options.tls.is_none() {
        return Err("--listen-public needs TLS: give --http-tls-cert and --http-tls-key".into());
    }
    let tls = match &options.tls {
        Some((cert, key)) => Some(acceptor(cert, key)?),
        None => None,
    };
    let (token, made) = token(&options.token_file)?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.addr))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let scheme = if tls.is_some() { "https" } else { "http" };

    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !ip.is_unspecified() {
        hosts.push(ip.to_string());
    }
    hosts.extend(options.hosts.iter().cloned());
    let origins: Vec<String> = hosts
        .iter()
        .flat_map(|h| {
            let h = if h.contains(':') { format!("[{h}]") } else { h.clone() };
            [format!("http://{h}:*"), format!("https://{h}:*"), format!("http://{h}"), format!("https://{h}")]
        })
        .collect();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_max_request_body_bytes(MAX_BODY);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_SESSIONS));
    // Cheap and without effects: rmcp makes throwaway instances too (and
    // one for each request of MCP 2026-07-28); a bridge connects and opens
    // its daemon session on first use. The requests of 2026-07-28 share
    // one session, closed when the server stops.
    let modern = Arc::new(Served::new(Link::Own(endpoint.clone(), slots.clone()), source.clone()));
    let factory =
        move || Ok(Bridge::with_shared(Link::Own(endpoint.clone(), slots.clone()), source.clone(), modern.clone()));
    let mcp = StreamableHttpService::new(factory, Arc::new(sessions), config);

    eprintln!("agentctl mcp: serving MCP at {scheme}://{local}{MCP_PATH} (streamable HTTP)");
    if made {
        eprintln!(
            "agentctl mcp: a new bearer token, saved in {} (mode 0600); clients send \
             'Authorization: Bearer {token}'",
            options.token_file.display()
        );
    } else {
        eprintln!("agentctl mcp: clients send the bearer token saved in {}", options.token_file.display());
    }

    let token: Arc<str> = token.into();
    let conns = Arc::new(Conns::default());
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, say: wait a little, do not spin.
                    eprintln!("agentctl mcp: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Some((id, authorized_once)) = conns.admit() else { continue };
        let _ = stream.set_nodelay(true);
        let (mcp, token, tls, done) = (mcp.clone(), token.clone(), tls.clone(), conns.clone());
        let (hosts, scheme) = (hosts.clone(), scheme);
        let task = tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let (mcp, token, authorized_once) = (mcp.clone(), token.clone(), authorized_once.clone());
                let base = base_address(scheme, request.headers().get(http::header::HOST), &hosts, local);
                async move {
                    if request.method() == http::Method::GET && METADATA_PATHS.contains(&request.uri().path()) {
                        return Ok::<_, std::convert::Infallible>(resource_metadata(&base));
                    }
                    if !authorized(request.headers().get(http::header::AUTHORIZATION), &token) {
                        let mut refused = plain(
                            http::StatusCode::UNAUTHORIZED,
                            "a bearer token is needed (Authorization: Bearer <the token agentctl mcp --http saved>)\n",
                        );
                        // Where a client reads how to authorize (RFC 9728):
                        // a bearer token given out of band, no authorization
                        // server.
                        let challenge = format!("Bearer resource_metadata=\"{base}{}\"", METADATA_PATHS[1]);
                        if let Ok(value) = http::HeaderValue::from_str(&challenge) {
                            refused.headers_mut().insert(http::header::WWW_AUTHENTICATE, value);
                        }
                        return Ok(refused);
                    }
                    authorized_once.store(true, std::sync::atomic::Ordering::Relaxed);
                    if request.uri().path() != MCP_PATH {
                        return Ok(plain(http::StatusCode::NOT_FOUND, "MCP is served at /mcp\n"));
                    }
                    let deleting = request.method() == http::Method::DELETE;
                    let mut response = mcp.handle(request).await;
                    // DELETE with a session id ends the session: 200, as MCP's
                    // streamable HTTP has it, where rmcp answers 202 (and the
                    // Python SDK then logs a failed termination on every close:
                    // issue 49 #13).
                    if deleting && response.status() == http::StatusCode::ACCEPTED {
                        *response.status_mut() = http::StatusCode::OK;
                    }
                    Ok(response)
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
            match tls {
                Some(tls) => {
                    if let Ok(Ok(stream)) = tokio::time::timeout(HEADER_TIMEOUT, tls.accept(stream)).await {
                        let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
                    }
                }
                None => {
                    let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
                }
            }
            done.end(id);
        });
        conns.started(id, task.abort_handle());
    }
}

/// The connections being served, oldest first.
#[derive(Default)]
struct Conns {
    live: std::sync::Mutex<(u64, std::collections::BTreeMap<u64, Conn>)>,
}

struct Conn {
    /// It made an authorized request.
    authorized: Arc<std::sync::atomic::AtomicBool>,
    task: Option<tokio::task::AbortHandle>,
}

impl Conns {
    /// A place for a new connection: when all are taken, the oldest that
    /// never made an authorized request is ended; `None` when every one
    /// has (the new one is then closed).
    fn admit(&self) -> Option<(u64, Arc<std::sync::atomic::AtomicBool>)> {
        let mut guard = crate::mcp_bridge::lock(&self.live);
        let (next, live) = &mut *guard;
        if live.len() >= MAX_CONNECTIONS {
            let idle = live
                .iter()
                .find(|(_, c)| !c.authorized.load(std::sync::atomic::Ordering::Relaxed))
                .map(|(id, _)| *id)?;
            if let Some(task) = live.remove(&idle).and_then(|c| c.task) {
                task.abort();
            }
        }
        *next += 1;
        let authorized = Arc::new(std::sync::atomic::AtomicBool::new(false));
        live.insert(*next, Conn { authorized: authorized.clone(), task: None });
        Some((*next, authorized))
    }

    fn started(&self, id: u64, task: tokio::task::AbortHandle) {
        let mut guard = crate::mcp_bridge::lock(&self.live);
        // Gone already when it ended (or was ended) first.
        if let Some(conn) = guard.1.get_mut(&id) {
            conn.task = Some(task);
        }
    }

    fn end(&self, id: u64) {
        crate::mcp_bridge::lock(&self.live).1.remove(&id);
    }
}

/// A TLS acceptor for the certificate chain and key in these PEM files.
fn acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect())
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("the TLS certificate and key: {e}"))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        let token = "a".repeat(64);
        let ok = http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        assert!(authorized(Some(&ok), &token));
        for bad in [
            format!("Bearer {}", "a".repeat(63)),
            format!("Bearer {token}a"),
            format!("bearer {token}"),
            token.clone(),
            "Bearer ".into(),
        ] {
            let bad = http::HeaderValue::from_str(&bad).unwrap();
            assert!(!authorized(Some(&bad), &token), "{bad:?}");
        }
        assert!(!authorized(None, &token));
    }

    #[test]
    fn a_token_is_made_once_private_and_a_readable_one_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("token");
        let (first, made) = token(&path).unwrap();
        assert!(made);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (again, made) = token(&path).unwrap();
        assert!(!made);
        assert_eq!(first, again);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(token(&path).unwrap_err().contains("others may read it"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "short\n").unwrap();
        assert!(token(&path).unwrap_err().contains("not a token"));
        // A link is not followed, even to a good token.
        std::fs::write(&path, format!("{}\n", "b".repeat(64))).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(token(&link).unwrap_err().contains("symbolic link"));
        assert!(token(dir.path()).unwrap_err().contains("not a regular file"));
    }
}
