//! Which MCP servers a session uses: Claude Code's `mcpServers` entries
//! from three places, checked and expanded.
//!
//! Sources, lowest to highest precedence (a later one wins by name):
//! 1. the user's settings file (`$XDG_CONFIG_HOME/agentd/settings.json`,
//!    `mcpServers`);
//! 2. the workspace's `.mcp.json` — only when enabled, by `session/create`
//!    `enable_project_mcp` or by the user's settings
//!    (`enableAllProjectMcpServers: true`, at the top or under
//!    `projects.<workspace>`; the server's name in
//!    `projects.<workspace>.enabledMcpjsonServers`;
//!    `disabledMcpjsonServers` wins over both). A repository's own
//!    settings cannot enable it (opening a repository must not run its
//!    code), and its servers never replace the user's of the same name;
//! 3. `session/create` `mcp_servers`.
//!
//! `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env`,
//! `url` and `headers`, from the daemon's environment, as Claude Code does;
//! an unset variable without a default makes the entry unusable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentd_protocol::mcp::{McpServerEntry, McpSource};
use serde_json::Value;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set on top of the plain environment.
        env: BTreeMap<String, String>,
        /// Its working directory.
        cwd: PathBuf,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
        /// The OAuth client registered ahead, if any.
        client: super::auth::Client,
    },
}

impl Transport {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// One server a session uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its name.
    pub name: String,
    /// Where its entry came from.
    pub source: McpSource,
    /// How to reach it.
    pub transport: Transport,
    /// Values `${VAR}` expanded to (tokens, keys): never shown in errors.
    pub secrets: Vec<String>,
}

/// Names model APIs accept in a tool name part, and that keep
/// `mcp__<server>__<tool>` unambiguous: no `__` inside, no `_` at either
/// end (server `t_` with tool `add` would read as server `t`'s `_add`).
pub fn is_valid_server_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
}

/// The servers a session on `cwd` uses, and what could not be used (one
/// line each, naming the source and the server). The workspace's
/// `.mcp.json` counts only once `trust` says the user approved its content.
pub fn resolve(
    session: &BTreeMap<String, Value>,
    enable_project: bool,
    cwd: &Path,
    trust: &crate::trust::TrustStore,
) -> (Vec<ServerSpec>, Vec<String>) {
    let user_file = user_settings_file();
    let user: Option<Value> = user_file.as_ref().and_then(|f| read_json(f).ok().flatten());
    let mut chosen: BTreeMap<String, (McpSource, Value, String)> = BTreeMap::new();
    let mut errors = Vec::new();

    if let (Some(file), Some(user)) = (&user_file, &user) {
        collect(&mut chosen, &mut errors, McpSource::User, &file.display().to_string(), user.get("mcpServers"));
    }
    let project_file = cwd.join(".mcp.json");
    let text = read_text(&project_file);
    let trusted = matches!(&text, Ok(Some(t)) if trust.trusted(&project_file, t.as_bytes()));
    match text
        .and_then(|t| t.map(|t| serde_json::from_str::<Value>(&t).map_err(|e| format!("not JSON: {e}"))).transpose())
    {
        Ok(None) => {}
        Err(e) => errors.push(format!("{}: {e}", project_file.display())),
        Ok(Some(project)) => {
            // Enabling is the user's, per workspace: `projects.<workspace>`
            // in the user's settings (a name enabled for one repository
            // must not enable another repository's server of that name).
            let here =
                user.as_ref().and_then(|u| u.get("projects")).and_then(|p| p.get(cwd.to_string_lossy().as_ref()));
            let list = |scope: Option<&Value>, key: &str| -> Vec<String> {
                scope
                    .and_then(|u| u.get(key))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default()
            };
            let flag = |scope: Option<&Value>| {
                scope.and_then(|u| u.get("enableAllProjectMcpServers")).and_then(Value::as_bool) == Some(true)
            };
            let all = flag(user.as_ref()) || flag(here);
            let enabled = list(here, "enabledMcpjsonServers");
            let mut disabled = list(user.as_ref(), "disabledMcpjsonServers");
            disabled.extend(list(here, "disabledMcpjsonServers"));
            let mut servers = project.get("mcpServers").cloned();
            if let Some(Value::Object(map)) = &mut servers {
                map.retain(|name, _| !disabled.contains(name) && (enable_project || all || enabled.contains(name)));
                // A repository's server never takes the place of one of the
                // user's (and with it the user's rules for that name).
                map.retain(|name, _| {
                    let taken = chosen.contains_key(name);
                    if taken {
                        errors.push(format!(
                            "{}: server {name:?} is ignored: the user's settings define a server of that name",
                            project_file.display()
                        ));
                    }
                    !taken
                });
                if !trusted && !map.is_empty() {
                    errors.push(format!(
                        "{}: {} server(s) not started: the file's content is not trusted yet (approve it with \
                         `agentctl trust`)",
                        project_file.display(),
                        map.len()
                    ));
                    map.clear();
                }
            }
            collect(
                &mut chosen,
                &mut errors,
                McpSource::Project,
                &project_file.display().to_string(),
                servers.as_ref(),
            );
        }
    }
    let session = Value::Object(session.clone().into_iter().collect());
    collect(&mut chosen, &mut errors, McpSource::Session, "session/create mcp_servers", Some(&session));

    let mut specs = Vec::new();
    for (name, (source, entry, origin)) in chosen {
        match spec(&name, source, &entry, cwd) {
            Ok(spec) => specs.push(spec),
            Err(why) => errors.push(format!("{origin}: server {name:?}: {why}")),
        }
    }
    (specs, errors)
}

/// Adds the entries of one `mcpServers` object, replacing earlier ones of
/// the same name.
fn collect(
    chosen: &mut BTreeMap<String, (McpSource, Value, String)>,
    errors: &mut Vec<String>,
    source: McpSource,
    origin: &str,
    servers: Option<&Value>,
) {
    let Some(servers) = servers else { return };
    let Some(map) = servers.as_object() else {
        errors.push(format!("{origin}: mcpServers must be an object of name → entry"));
        return;
    };
    for (name, entry) in map {
        if !is_valid_server_name(name) {
            errors.push(format!(
                "{origin}: server {name:?}: a name must be 1 to 40 of A-Z a-z 0-9 _ - (no \"__\", no _ at either end), as tool names are"
            ));
            chosen.remove(name);
            continue;
        }
        chosen.insert(name.clone(), (source, entry.clone(), origin.to_owned()));
    }
}

/// One entry, checked and expanded.
fn spec(name: &str, source: McpSource, entry: &Value, cwd: &Path) -> Result<ServerSpec, String> {
    let entry: McpServerEntry =
        serde_json::from_value(entry.clone()).map_err(|e| format!("not a server entry: {e}"))?;
    let secrets = std::cell::RefCell::new(Vec::new());
    let expand = |text: &str| -> Result<String, String> {
        expand_with(text, |var| {
            let value = std::env::var(var).ok()?;
            if value.len() >= 4 {
                secrets.borrow_mut().push(value.clone());
            }
            Some(value)
        })
    };
    let kind = entry.transport.as_deref().unwrap_or(if entry.url.is_some() { "http" } else { "stdio" });
    let transport = match kind {
        "stdio" => {
            let command = entry.command.as_deref().ok_or("a stdio server needs `command`")?;
            let command = expand(command)?;
            if command.trim().is_empty() {
                return Err("`command` is empty".into());
            }
            let args = entry.args.iter().map(|a| expand(a)).collect::<Result<_, _>>()?;
            let mut env = BTreeMap::new();
            for (k, v) in &entry.env {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err(format!("env: {k:?} is not a variable name"));
                }
                env.insert(k.clone(), expand(v)?);
            }
            // Only a project's own server runs in the workspace by default:
            // launchers read files where they start (npx a local
            // node_modules and .npmrc, `python -m` the current directory),
            // so a user's server started there would run the repository's
            // code. Others start in the home directory unless told.
            let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
            let neutral = home.clone().unwrap_or_else(|| PathBuf::from("/"));
            let dir = match (&entry.cwd, source) {
                (Some(dir), McpSource::User) => neutral.join(expand(dir)?),
                (Some(dir), _) => cwd.join(expand(dir)?),
                (None, McpSource::Project) => cwd.to_owned(),
                (None, _) => neutral,
            };
            Transport::Stdio { command, args, env, cwd: dir }
        }
        "http" | "streamable-http" | "streamableHttp" => {
            let url = expand(entry.url.as_deref().ok_or("an http server needs `url`")?)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err("the url is not an http:// or https:// URL".into());
            }
            let mut headers = BTreeMap::new();
            for (k, v) in &entry.headers {
                let v = expand(v)?;
                http::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| format!("headers: {k:?} is not a header name"))?;
                http::HeaderValue::from_str(&v).map_err(|_| format!("headers: the value of {k:?} is not valid"))?;
                headers.insert(k.clone(), v);
            }
            let oauth = entry.oauth.clone().unwrap_or_default();
            let client = super::auth::Client {
                id: oauth.client_id.as_deref().map(&expand).transpose()?,
                secret: oauth.client_secret.as_deref().map(&expand).transpose()?,
                metadata_url: oauth.client_metadata_url.as_deref().map(&expand).transpose()?,
            };
            if let Some(document) = &client.metadata_url {
                let parsed = url::Url::parse(document).ok();
                if !parsed
                    .as_ref()
                    .is_some_and(|u| u.scheme() == "https" && u.path().len() > 1 && u.username().is_empty())
                {
                    return Err("oauth.clientMetadataUrl must be an https:// address with a path".into());
                }
            }
            if let Some(secret) = &client.secret {
                secrets.borrow_mut().push(secret.clone());
            }
            Transport::Http { url, headers, client }
        }
        "sse" => return Err("the SSE transport is deprecated and not supported; use \"type\": \"http\"".into()),
        other => return Err(format!("unknown type {other:?} (stdio or http)")),
    };
    let mut secrets = secrets.into_inner();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    Ok(ServerSpec { name: name.to_owned(), source, transport, secrets })
}

/// [`expand`] with variables from `lookup`.
pub fn expand_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((var, default)) => (var, Some(default)),
            None => (inner, None),
        };
        let valid = !var.is_empty()
            && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !var.as_bytes()[0].is_ascii_digit();
        if !valid {
            return Err(format!("${{{inner}}} is not a variable reference"));
        }
        match (lookup(var), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(format!("${{{var}}} is not set in the daemon's environment")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The user's settings file, where `$XDG_CONFIG_HOME` (or `~/.config`) is.
fn user_settings_file() -> Option<PathBuf> {
    let abs = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let config =
        abs(std::env::var_os("XDG_CONFIG_HOME")).or_else(|| abs(std::env::var_os("HOME")).map(|h| h.join(".config")));
    config.map(|c| c.join("agentd/settings.json"))
}

/// A JSON file: `None` when it does not exist.
fn read_json(path: &Path) -> Result<Option<Value>, String> {
    read_text(path)?.map(|t| serde_json::from_str(&t).map_err(|e| format!("not JSON: {e}"))).transpose()
}

/// A settings file's text: `None` when it does not exist.
fn read_text(path: &Path) -> Result<Option<String>, String> {
    match crate::fs::read_settings(path) {
        Ok(text) => Ok(Some(text)),
        // A directory is a sandbox's placeholder for a file that is not
        // there (or nothing agentd could read as one).
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        match var {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_as_claude_code_does() {
        assert_eq!(expand_with("Bearer ${TOKEN}", env).unwrap(), "Bearer s3cret");
        assert_eq!(expand_with("${MISSING:-fallback}/x", env).unwrap(), "fallback/x");
        assert_eq!(expand_with("${EMPTY:-d}", env).unwrap(), "", "set but empty is set");
        assert_eq!(expand_with("a${TOKEN}b${TOKEN}", env).unwrap(), "as3cretbs3cret");
        assert_eq!(expand_with("no vars, $TOKEN stays", env).unwrap(), "no vars, $TOKEN stays");
        assert_eq!(expand_with("unclosed ${TOKEN", env).unwrap(), "unclosed ${TOKEN");
        assert!(expand_with("${MISSING}", env).unwrap_err().contains("MISSING"));
        assert!(expand_with("${1X}", env).is_err());
        assert!(expand_with("${A B}", env).is_err());
        // A default is not expanded again (no second round through a value).
        assert_eq!(expand_with("${MISSING:-${TOKEN}", env).unwrap(), "${TOKEN");
    }

    #[test]
    fn names_are_tool_name_parts() {
        for ok in ["fs", "my-server", "a_b", "X9"] {
            assert!(is_valid_server_name(ok), "{ok}");
        }
        for bad in ["", "a b", "a.b", "a__b", "ünï", "a/b", "t_", "_t", &"x".repeat(41)] {
            assert!(!is_valid_server_name(bad), "{bad}");
        }
    }

    #[test]
    fn entries_are_checked() {
        let cwd = Path::new("/work");
        let ok = |v: Value| spec("s", McpSource::Session, &v, cwd);
        let stdio = ok(serde_json::json!({"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}})).unwrap();
        assert_eq!(
            stdio.transport,
            Transport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "x".into()],
                env: [("A".to_owned(), "1".to_owned())].into(),
                cwd: std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| "/".into())
            }
        );
        // A project's server runs in the workspace; a relative cwd of a
        // session's entry is the workspace's.
        let project = spec("p", McpSource::Project, &serde_json::json!({"command": "x"}), cwd).unwrap();
        assert!(matches!(project.transport, Transport::Stdio { cwd: ref d, .. } if d == cwd));
        let sub = ok(serde_json::json!({"command": "x", "cwd": "tools"})).unwrap();
        assert!(matches!(sub.transport, Transport::Stdio { cwd: ref d, .. } if d == &cwd.join("tools")));
        let http = ok(serde_json::json!({"type": "http", "url": "http://127.0.0.1:1/mcp"})).unwrap();
        assert_eq!(http.transport.kind(), "http");
        for (bad, needle) in [
            (serde_json::json!({"args": ["x"]}), "needs `command`"),
            (serde_json::json!({"type": "http"}), "needs `url`"),
            (serde_json::json!({"type": "http", "url": "file:///etc/passwd"}), "not an http"),
            (serde_json::json!({"type": "sse", "url": "http://x"}), "SSE"),
            (serde_json::json!({"type": "ws", "url": "http://x"}), "unknown type"),
            (serde_json::json!({"command": 5}), "not a server entry"),
            (serde_json::json!({"command": "x", "env": {"A=B": "1"}}), "not a variable name"),
            (serde_json::json!({"type": "http", "url": "http://x", "headers": {"a b": "1"}}), "not a header name"),
            (serde_json::json!({"type": "http", "url": "http://x", "headers": {"A": "x\ny"}}), "not valid"),
            (serde_json::json!({"command": "${AGENTD_SURELY_UNSET_VAR}"}), "not set"),
        ] {
            let err = ok(bad.clone()).unwrap_err();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }
}
