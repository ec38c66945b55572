//! OAuth 2.1 for HTTP MCP servers, as MCP's authorization specification
//! and Claude Code have it, on rmcp's `auth`: discovery (the server's 401
//! challenge, protected-resource metadata, authorization-server metadata,
//! the older fallbacks), client registration (dynamic, unless the entry
//! names a client), authorization code with PKCE (S256) and the `resource`
//! parameter, token refresh, scope step-up on 403.
//!
//! The daemon has no browser: `mcp/login` gives a client the authorization
//! address for a redirect address on its loopback interface, where it
//! listens (`agentctl mcp login`); `mcp/login_complete` brings back the
//! redirect, whose state is checked before the code is exchanged. Tokens
//! are kept per server address in `<state>/mcp-auth/` (directory 0700,
//! files 0600, written whole and renamed), or in memory for an ephemeral
//! daemon, and are never logged, shown to tools, or put in a result.
//!
//! Addresses the metadata names are checked by rmcp: a loopback one only
//! for a server on loopback, a private one only for a server on a private
//! address; others never (link-local, cloud metadata hosts).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession, CredentialStore, StoredCredentials,
};

use crate::sync::MutexExt;

/// How long a login started with `mcp/login` may wait for its redirect.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);
/// Logins waiting at once (the oldest goes first).
const MAX_LOGINS: usize = 16;
/// Largest token file read.
const MAX_FILE: u64 = 256 * 1024;

/// One server address's tokens: a file, or memory for an ephemeral daemon.
/// Clones share the same tokens.
#[derive(Clone)]
pub struct Credentials(Arc<Inner>);

struct Inner {
    /// The server address the tokens are for (kept in the file and
    /// checked on read: a file copied or renamed is not used for another).
    url: String,
    file: Option<PathBuf>,
    memory: Mutex<Option<StoredCredentials>>,
}

/// A tokens file: the address and what rmcp keeps.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    url: String,
    credentials: StoredCredentials,
}

impl Credentials {
    /// Tokens of `url` kept under `dir` (`None`: in memory).
    pub fn new(dir: Option<&Path>, url: &str) -> Self {
        let file = dir.map(|d| d.join(format!("{}.json", super::listing::file_key(url))));
        Credentials(Arc::new(Inner { url: url.to_owned(), file, memory: Mutex::new(None) }))
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Option<StoredCredentials>> {
        self.0.memory.locked()
    }

    /// What is kept, if anything (a file that is not the daemon's own, not
    /// 0600, too large or not readable counts as nothing).
    pub fn stored(&self) -> Option<StoredCredentials> {
        let Some(file) = &self.0.file else { return self.memory().clone() };
        let bytes = read_private(file)?;
        match serde_json::from_slice::<Kept>(&bytes) {
            Ok(kept) if kept.url == self.0.url => Some(kept.credentials),
            Ok(_) => {
                tracing::warn!(file = %file.display(), "MCP tokens file ignored: it is another server's");
                None
            }
            Err(e) => {
                tracing::warn!(file = %file.display(), "MCP tokens file is not readable: {e}");
                None
            }
        }
    }

    /// Whether tokens are kept.
    pub fn has_tokens(&self) -> bool {
        self.stored().is_some_and(|c| c.token_response.is_some())
    }

    fn save_now(&self, credentials: StoredCredentials) -> Result<(), String> {
        let Some(file) = &self.0.file else {
            *self.memory() = Some(credentials);
            return Ok(());
        };
        let kept = Kept { url: self.0.url.clone(), credentials };
        let json = serde_json::to_vec(&kept).map_err(|e| e.to_string())?;
        if json.len() as u64 > MAX_FILE {
            return Err(format!("the authorization server's tokens take over {} KiB: not kept", MAX_FILE / 1024));
        }
        write_private(file, &json).map_err(|e| format!("cannot keep the tokens in {}: {e}", file.display()))
    }

    /// Forgets the tokens; whether there were any.
    pub fn forget(&self) -> bool {
        let had = self.stored().is_some();
        match &self.0.file {
            Some(file) => {
                let _ = std::fs::remove_file(file);
            }
            None => *self.memory() = None,
        }
        had
    }
}

impl CredentialStore for Credentials {
    fn load<'a, 'b>(
        &'a self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Option<StoredCredentials>, AuthError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move { Ok(self.stored()) })
    }

    fn save<'a, 'b>(
        &'a self,
        credentials: StoredCredentials,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), AuthError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move { self.save_now(credentials).map_err(AuthError::InternalError) })
    }

    fn clear<'a, 'b>(&'a self) -> std::pin::Pin<Box<dyn Future<Output = Result<(), AuthError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            self.forget();
            Ok(())
        })
    }
}

/// A file of the daemon's own with mode 0600, read without following a
/// link, within [`MAX_FILE`].
fn read_private(file: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc_nofollow()).open(file).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        tracing::warn!(file = %file.display(), "MCP tokens file ignored: not a 0600 file of the daemon's user");
        return None;
    }
    let mut bytes = Vec::new();
    f.take(MAX_FILE + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_FILE {
        tracing::warn!(file = %file.display(), "MCP tokens file ignored: over {} KiB", MAX_FILE / 1024);
        return None;
    }
    Some(bytes)
}

fn libc_nofollow() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits()
}

/// Removes what a write cut short left in `dir` (a daemon stopped between
/// writing a new tokens file and renaming it), and makes `dir` 0700.
pub fn tidy(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().contains(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Writes `bytes` to `file` whole: a new 0600 file beside it, renamed over
/// it; the directory is made 0700.
fn write_private(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = file.parent().ok_or_else(|| std::io::Error::other("no directory"))?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = file.with_extension(format!("tmp{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all()).and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A client registered ahead for a server (its entry's `oauth`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Client {
    /// `oauth.clientId`.
    pub id: Option<String>,
    /// `oauth.clientSecret`.
    pub secret: Option<String>,
    /// `oauth.clientMetadataUrl`: a Client ID Metadata Document's address.
    pub metadata_url: Option<String>,
}

/// An authorization manager for the server at `url`, keeping tokens in
/// `credentials`. Addresses metadata names may be private only when the
/// server's own address is.
pub async fn manager(url: &str, credentials: &Credentials) -> Result<AuthorizationManager, String> {
    let private = url::Url::parse(url).ok().and_then(|u| match u.host() {
        Some(url::Host::Ipv4(a)) => Some(a.is_private()),
        Some(url::Host::Ipv6(a)) => Some((a.segments()[0] & 0xfe00) == 0xfc00),
        _ => None,
    }) == Some(true);
    let made = if private {
        AuthorizationManager::new_allowing_private_addresses(url).await
    } else {
        AuthorizationManager::new(url).await
    };
    let mut manager = made.map_err(|e| format!("OAuth for {url}: {e}"))?;
    manager.set_credential_store(credentials.clone());
    Ok(manager)
}

/// Checks a client's redirect address: `http://` on the loopback
/// interface, with a port, without credentials or a fragment.
pub fn check_redirect(uri: &str) -> Result<(), String> {
    let url = url::Url::parse(uri).map_err(|e| format!("redirect_uri {uri:?} is not an address: {e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() != "http" || !loopback || url.port().is_none() {
        return Err(format!(
            "redirect_uri {uri:?} must be http:// on the loopback interface with a port (http://127.0.0.1:PORT/callback): \
             the browser is sent back to the client's own listener"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(format!("redirect_uri {uri:?} must have no user, password or fragment"));
    }
    Ok(())
}

/// A login waiting for its redirect.
struct Waiting {
    key: String,
    redirect_uri: String,
    session: AuthorizationSession,
    started: Instant,
}

/// The logins started with `mcp/login`, each taken once by
/// `mcp/login_complete`, gone after [`LOGIN_TTL`].
#[derive(Default)]
pub struct Logins {
    waiting: tokio::sync::Mutex<HashMap<String, Waiting>>,
}

impl Logins {
    /// Starts the authorization of the server at `url` (pool key `key`):
    /// discovery from its last challenge, registration, PKCE. Returns the
    /// login's id and the address for the user's browser.
    pub async fn begin(
        &self,
        key: &str,
        url: &str,
        credentials: &Credentials,
        client: &Client,
        challenge: Option<String>,
        redirect_uri: &str,
    ) -> Result<(String, String), String> {
        check_redirect(redirect_uri)?;
        let mut manager = manager(url, credentials).await?;
        let resolved = manager
            .resolve_metadata_from_challenge(challenge.as_deref())
            .await
            .map_err(|e| format!("OAuth discovery for {url} failed: {e}"))?;
        manager.set_metadata(resolved.metadata);
        let mut request = AuthorizationRequest::new(redirect_uri).with_client_name("agentd");
        // A step-up asks for what was granted before and what the server
        // asks for now (MCP 2026-07-28, SEP-2350): the scopes accumulate.
        let before = credentials.stored().map(|c| c.granted_scopes).unwrap_or_default();
        if !before.is_empty() {
            let asked = challenge.as_deref().map(challenged_scopes).unwrap_or_default();
            let mut scopes = before;
            scopes.extend(asked.into_iter().filter(|s| !scopes.contains(s)).collect::<Vec<_>>());
            request = request.with_scopes(scopes);
        }
        if let Some(challenge) = challenge {
            request = request.with_challenge(challenge);
        }
        if let Some(id) = &client.id {
            request = request.with_preregistered_client(id.clone());
            if let Some(secret) = &client.secret {
                request = request.with_client_secret(secret.clone());
            }
        } else if let Some(document) = &client.metadata_url {
            // Its address is the client id where the authorization server
            // takes such documents; elsewhere agentd registers itself.
            request = request.with_client_metadata_url(document.clone());
        }
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, e)| format!("OAuth authorization for {url} could not start: {e}"))?;
        let address = session.get_authorization_url().to_owned();
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut waiting = self.waiting.lock().await;
        waiting.retain(|_, w| w.started.elapsed() < LOGIN_TTL);
        while waiting.len() >= MAX_LOGINS {
            let oldest = waiting.iter().min_by_key(|(_, w)| w.started).map(|(id, _)| id.clone());
            let Some(oldest) = oldest else { break };
            waiting.remove(&oldest);
        }
        let redirect_uri = redirect_uri.to_owned();
        waiting.insert(id.clone(), Waiting { key: key.to_owned(), redirect_uri, session, started: Instant::now() });
        Ok((id, address))
    }

    /// Completes login `id` with the address the browser was sent back to:
    /// it must be the login's redirect address, with the login's state; the
    /// code is exchanged for tokens, which are kept. Returns the pool key
    /// of the server and the scopes granted. The login is used up either
    /// way (a second try starts again).
    pub async fn complete(&self, id: &str, callback_url: &str) -> Result<(String, Vec<String>), String> {
        let waiting = {
            let mut all = self.waiting.lock().await;
            all.retain(|_, w| w.started.elapsed() < LOGIN_TTL);
            all.remove(id)
        };
        let Some(waiting) = waiting else {
            return Err(format!("no login {id:?} is waiting (each is used once, within 10 minutes)"));
        };
        let back = url::Url::parse(callback_url).map_err(|e| format!("callback_url is not an address: {e}"))?;
        let expected = url::Url::parse(&waiting.redirect_uri).map_err(|e| e.to_string())?;
        if back.origin() != expected.origin() || back.path() != expected.path() {
            return Err(format!("callback_url is not the login's redirect address {}", waiting.redirect_uri));
        }
        if let Some(error) = back.query_pairs().find(|(k, _)| k == "error").map(|(_, v)| v.into_owned()) {
            let detail = back.query_pairs().find(|(k, _)| k == "error_description").map(|(_, v)| v.into_owned());
            return Err(format!(
                "the authorization server refused: {error}{}",
                detail.map(|d| format!(" ({d})")).unwrap_or_default()
            ));
        }
        let tokens = waiting
            .session
            .handle_callback_url(callback_url)
            .await
            .map_err(|e| format!("the login could not be completed: {e}"))?;
        Ok((waiting.key, granted_scopes(&tokens)))
    }
}

/// The scopes a `WWW-Authenticate` challenge asks for (its `scope`
/// parameter, RFC 6750 §3): its auth-params read in order, quoted values
/// whole (a `scope=` inside another's quoted value is not it).
fn challenged_scopes(challenge: &str) -> Vec<String> {
    let mut rest = challenge.trim_start();
    // The scheme (`Bearer`).
    rest = rest.split_once(char::is_whitespace).map_or("", |(_, r)| r);
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        let Some((name, after)) = rest.split_once('=') else { return Vec::new() };
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((v, a)) => (v, a),
                None => (quoted, ""),
            },
            None => after.split_once([',', ' ']).unwrap_or((after, "")),
        };
        if name.trim().eq_ignore_ascii_case("scope") {
            return value.split_whitespace().map(str::to_owned).collect();
        }
        rest = after;
    }
}

/// The scopes a token response says were granted.
fn granted_scopes(tokens: &rmcp::transport::auth::OAuthTokenResponse) -> Vec<String> {
    let scope =
        serde_json::to_value(tokens).ok().and_then(|v| v.get("scope").and_then(|s| s.as_str()).map(str::to_owned));
    scope.map(|s| s.split_whitespace().map(str::to_owned).collect()).unwrap_or_default()
}

/// The `WWW-Authenticate` challenge in an error's chain, when a server
/// answered 401 (`Required`) or 403 for more scope.
pub fn challenge_in(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        for prefix in ["authorization required: ", "insufficient scope: "] {
            if let Some(header) = text.strip_prefix(prefix) {
                return Some(header.to_owned());
            }
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_addresses_with_a_port_are_redirect_addresses() {
        for ok in
            ["http://127.0.0.1:8080/callback", "http://[::1]:9/cb", "http://localhost:33418/", "http://127.0.0.1:1"]
        {
            assert!(check_redirect(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1:8080/callback",
            "http://127.0.0.1/callback",
            "http://evil.example:8080/callback",
            "http://10.0.0.1:8080/cb",
            "http://127.0.0.1.evil.example:80/cb",
            "http://user:pw@127.0.0.1:8080/cb",
            "http://127.0.0.1:8080/cb#frag",
            "javascript:alert(1)",
            "not an address",
        ] {
            assert!(check_redirect(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_are_kept_0600_read_only_from_such_a_file_and_forgotten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("mcp-auth");
        let creds = Credentials::new(Some(&auth), "https://mcp.example/mcp");
        assert!(creds.stored().is_none() && !creds.has_tokens());
        creds.save_now(StoredCredentials::new("client-1".into(), None, vec!["a".into()], None)).unwrap();
        let files: Vec<_> = std::fs::read_dir(&auth).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "one file, no leftovers: {files:?}");
        assert_eq!(std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&auth).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(creds.stored().unwrap().client_id, "client-1");
        // Another address has its own file.
        assert!(Credentials::new(Some(&auth), "https://other.example/mcp").stored().is_none());
        // A file others can read is not trusted; nor a link.
        std::fs::set_permissions(&files[0], std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(creds.stored().is_none());
        std::fs::set_permissions(&files[0], std::fs::Permissions::from_mode(0o600)).unwrap();
        let real = dir.path().join("real.json");
        std::fs::rename(&files[0], &real).unwrap();
        std::os::unix::fs::symlink(&real, &files[0]).unwrap();
        assert!(creds.stored().is_none(), "a link is not followed");
        std::fs::remove_file(&files[0]).unwrap();
        std::fs::rename(&real, &files[0]).unwrap();
        assert!(creds.forget());
        assert!(!files[0].exists() && creds.stored().is_none());
        // Tokens too large to read back are refused, not kept half.
        let huge = StoredCredentials::new("x".repeat(300 * 1024), None, vec![], None);
        assert!(creds.save_now(huge).unwrap_err().contains("KiB"));
        assert!(!files[0].exists());
        // A file renamed to another address's name is not used for it.
        creds.save_now(StoredCredentials::new("client-1".into(), None, vec![], None)).unwrap();
        let other = Credentials::new(Some(&auth), "https://other.example/mcp");
        let other_file = auth.join(format!("{}.json", super::super::listing::file_key("https://other.example/mcp")));
        std::fs::rename(&files[0], &other_file).unwrap();
        assert!(other.stored().is_none());
        // What a write cut short left is removed.
        std::fs::write(auth.join("x.tmp1-2"), "half").unwrap();
        tidy(&auth);
        assert_eq!(std::fs::read_dir(&auth).unwrap().count(), 1);
        // In memory (an ephemeral daemon): clones share.
        let memory = Credentials::new(None, "https://mcp.example/mcp");
        memory.clone().save_now(StoredCredentials::new("c".into(), None, vec![], None)).unwrap();
        assert_eq!(memory.stored().unwrap().client_id, "c");
    }

    #[test]
    fn a_challenges_scope_parameter_is_read_alone() {
        let c = r#"Bearer error="insufficient_scope", scope="mcp:write mcp:profile", resource_metadata="https://x/y""#;
        assert_eq!(challenged_scopes(c), ["mcp:write", "mcp:profile"]);
        assert_eq!(challenged_scopes(r#"Bearer resource_scope="no", scope=read"#), ["read"]);
        assert!(challenged_scopes(r#"Bearer resource_metadata="https://x/?scope=1", realm="a""#).is_empty());
        assert!(challenged_scopes("Bearer realm=\"x\"").is_empty());
        assert_eq!(challenged_scopes(r#"Bearer error="a, scope=b", scope="c""#), ["c"]);
    }

    #[test]
    fn a_challenge_is_found_anywhere_in_an_error_chain() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "Transport send error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other("authorization required: Bearer resource_metadata=\"x\""));
        assert_eq!(challenge_in(&e).as_deref(), Some("Bearer resource_metadata=\"x\""));
        assert_eq!(challenge_in(&Outer(std::io::Error::other("connection refused"))), None);
    }
}
