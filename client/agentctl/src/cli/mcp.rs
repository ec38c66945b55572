//! `agentctl mcp`: serving a session over MCP, and the `list`, `prompts`,
//! `prompt`, `login` and `logout` subcommands about a session's MCP
//! servers.

use super::*;

/// `agentctl mcp`: opens (or attaches to) a session and serves it over
/// MCP on stdin/stdout until the client goes away; a session it opened is
/// closed then.
pub(super) async fn mcp_serve(client: Client, endpoint: &Endpoint, args: &McpArgs) -> Result<(), Failure> {
    let client = std::sync::Arc::new(client);
    if let Some(addr) = args.http {
        return mcp_serve_http(client, endpoint, args, addr).await;
    }
    let (session, owned) = match &args.session {
        Some(id) => (client.session_get(id).await?.session_id, false),
        None => (client.session_create(bridge_session(args)?).await?.session_id, true),
    };
    let source = if owned {
        crate::mcp_bridge::SessionSource::Made(session.clone())
    } else {
        crate::mcp_bridge::SessionSource::Existing(session.clone())
    };
    let link = crate::mcp_bridge::Link::Shared(client.clone());
    let served = crate::mcp_bridge::Bridge::new(link, source).serve_stdio().await;
    if owned {
        let _ = client.session_close(&session).await;
    }
    served.map_err(|e| Failure::Local(format!("mcp: {e}")))
}

/// The session a bridge opens: `--cwd`, `--mode`, `--allow`, `--deny`;
/// whatever ends the bridge's connection (EOF, a signal, a crash) ends the
/// session and what it runs.
fn bridge_session(args: &McpArgs) -> Result<SessionCreateParams, Failure> {
    let rules = PermissionRules { allow: args.allow.clone(), deny: args.deny.clone(), ask: Vec::new() };
    Ok(SessionCreateParams {
        mode: args.mode.map(Into::into),
        permissions: (rules != PermissionRules::default()).then_some(rules),
        close_with_connection: Some(true),
        ..SessionCreateParams::new(workspace(args.cwd.as_deref())?)
    })
}

/// `agentctl mcp --http`: each MCP session opens a session of its own
/// (closed when it ends), or all serve `--session`.
async fn mcp_serve_http(
    client: std::sync::Arc<Client>,
    endpoint: &Endpoint,
    args: &McpArgs,
    addr: std::net::SocketAddr,
) -> Result<(), Failure> {
    use crate::mcp_bridge::{SessionSource, http};
    let source = match &args.session {
        Some(id) => SessionSource::Existing(client.session_get(id).await?.session_id),
        None => SessionSource::Open(Box::new(bridge_session(args)?)),
    };
    let token_file = match args.token_file.clone().or_else(http::default_token_file) {
        Some(f) => f,
        None => return Err(Failure::Usage("mcp: no place for the token: give --token-file".into())),
    };
    let options = http::HttpOptions {
        addr,
        public: args.listen_public,
        tls: args.http_tls_cert.clone().zip(args.http_tls_key.clone()),
        token_file,
        hosts: args.allow_host.clone(),
    };
    // Each MCP session reaches the daemon over a connection of its own.
    http::serve(endpoint.clone(), source, options).await.map_err(|e| Failure::Local(format!("mcp: {e}")))
}

/// `agentctl mcp prompts`: one line a prompt, as a slash command with its
/// arguments (`<required>`, `[optional]`) and its title or description.
pub(super) async fn mcp_prompts(cli: &Cli, client: &Client, session: &str) -> Result<(), Failure> {
    use agentd_client::protocol::mcp::McpPromptsParams;
    let listed = client
        .call::<agentd_client::protocol::methods::McpPrompts>(McpPromptsParams { session_id: session.to_owned() })
        .await?;
    if cli.json {
        print_json(&listed);
        return Ok(());
    }
    say_if_none(&listed.prompts, "no MCP prompts in this session");
    for p in &listed.prompts {
        let args: Vec<String> = p
            .arguments
            .iter()
            .map(|a| if a.required { format!("<{}>", a.name) } else { format!("[{}]", a.name) })
            .collect();
        let about = p.title.as_deref().or(p.description.as_deref()).unwrap_or("");
        let usage = std::iter::once(p.command.clone()).chain(args).collect::<Vec<_>>().join(" ");
        println!("{usage}  {about}");
    }
    for e in &listed.errors {
        eprintln!("agentctl: {e}");
    }
    Ok(())
}

/// `agentctl mcp prompt`: the prompt's messages, `role: text` each (other
/// content as JSON).
pub(super) async fn mcp_prompt(
    cli: &Cli,
    client: &Client,
    session: &str,
    server: &str,
    name: &str,
    args: &[String],
) -> Result<(), Failure> {
    use agentd_client::protocol::mcp::McpGetPromptParams;
    let arguments = key_values(args, |arg| format!("--arg {arg:?} is not name=value"))?;
    let params = McpGetPromptParams {
        session_id: session.to_owned(),
        server: server.to_owned(),
        name: name.to_owned(),
        arguments,
    };
    let got = client.call::<agentd_client::protocol::methods::McpGetPrompt>(params).await?;
    if cli.json {
        print_json(&got);
        return Ok(());
    }
    for m in &got.messages {
        match (m.content.get("type").and_then(|t| t.as_str()), m.content.get("text").and_then(|t| t.as_str())) {
            (Some("text"), Some(text)) => println!("{}: {text}", m.role),
            _ => println!("{}: {}", m.role, m.content),
        }
    }
    Ok(())
}

/// `agentctl mcp list`.
pub(super) async fn mcp_list(cli: &Cli, client: &Client, session: Option<&str>) -> Result<(), Failure> {
    let Some(id) = session else {
        let list = client.call::<agentd_client::protocol::methods::McpList>(Default::default()).await?;
        if cli.json {
            print_json(&list);
            return Ok(());
        }
        say_if_none(&list.servers, "no MCP servers");
        for s in &list.servers {
            let pid = s.pid.map(|p| format!(", pid {p}")).unwrap_or_default();
            println!(
                "{}  {}  {}  {} tools  {} sessions  {} starts{pid}  {}",
                s.name,
                s.transport,
                wire(&s.state),
                s.tools,
                s.sessions,
                s.starts,
                s.workspace.display()
            );
            if let Some(e) = &s.last_error {
                println!("    last error: {e}");
            }
        }
        return Ok(());
    };
    let info = client.session_get(id).await?;
    if cli.json {
        print_json(&serde_json::json!({ "mcp": info.mcp, "mcp_errors": info.mcp_errors }));
        return Ok(());
    }
    say_if_none(&info.mcp, "no MCP servers in this session");
    for s in &info.mcp {
        println!("{}  {}  {}  {} tools  (from {})", s.name, s.transport, wire(&s.state), s.tools, wire(&s.source));
        if let Some(e) = &s.last_error {
            println!("    last error: {e}");
        }
    }
    for e in &info.mcp_errors {
        println!("not used: {e}");
    }
    Ok(())
}

/// Prints `none` when a list has nothing to show.
fn say_if_none<T>(items: &[T], none: &str) {
    if items.is_empty() {
        println!("{none}");
    }
}

/// Runs `work` with a session: `session`, or one opened on `cwd` for it
/// and closed after.
pub(super) async fn with_session<'a, F, Fut>(
    client: &Client,
    session: Option<&str>,
    cwd: Option<&std::path::Path>,
    work: F,
) -> Result<(), Failure>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), Failure>> + 'a,
{
    if let Some(id) = session {
        return work(id.to_owned()).await;
    }
    let made = client.session_create(SessionCreateParams::new(workspace(cwd)?)).await?.session_id;
    let done = work(made.clone()).await;
    let _ = client.session_close(&made).await;
    done
}

/// What `agentctl mcp login` was asked.
pub(super) struct Login<'a> {
    pub server: &'a str,
    pub port: Option<u16>,
    pub browser: bool,
}

/// How long `agentctl mcp login` waits for the browser to come back.
const LOGIN_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// `agentctl mcp login`: a listener on 127.0.0.1, `mcp/login` with its
/// address, the browser sent to the authorization address, and the first
/// request to `/callback` given to `mcp/login_complete`.
pub(super) async fn mcp_login(cli: &Cli, client: &Client, session: String, login: &Login<'_>) -> Result<(), Failure> {
    use agentd_client::protocol::mcp::{McpLoginCompleteParams, McpLoginParams};
    use agentd_client::protocol::methods::{McpLogin, McpLoginComplete};
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", login.port.unwrap_or(0)))
        .await
        .map_err(|e| Failure::Local(format!("mcp login: cannot listen on 127.0.0.1: {e}")))?;
    let port = listener.local_addr().map_err(|e| Failure::Local(e.to_string()))?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let params =
        McpLoginParams { session_id: session, server: login.server.to_owned(), redirect_uri: redirect_uri.clone() };
    let started = client.call::<McpLogin>(params).await?;
    eprintln!("Log in to {} in your browser:\n\n  {}\n", login.server, started.authorization_url);
    if login.browser {
        open_browser(&started.authorization_url);
    }
    let target = tokio::time::timeout(LOGIN_WAIT, callback(&listener, login.server))
        .await
        .map_err(|_| {
            Failure::Local(format!("mcp login: the browser did not come back within {} s", LOGIN_WAIT.as_secs()))
        })?
        .map_err(Failure::Local)?;
    let callback_url = format!("http://127.0.0.1:{port}{target}");
    let done =
        client.call::<McpLoginComplete>(McpLoginCompleteParams { login_id: started.login_id, callback_url }).await?;
    if cli.json {
        print_json(&done);
        return Ok(());
    }
    let scopes = if done.scopes.is_empty() { String::new() } else { format!(" (scopes: {})", done.scopes.join(" ")) };
    println!("logged in to {}{scopes}; it is {}", done.server, wire(&done.state));
    match done.last_error {
        Some(e) => Err(Failure::Local(format!("mcp login: {} did not start: {e}", done.server))),
        None => Ok(()),
    }
}

/// Starts the user's browser on `address` ($BROWSER, else xdg-open or
/// open), without waiting; the address is printed anyway.
fn open_browser(address: &str) {
    let browser = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty());
    let candidates: Vec<String> = match browser {
        Some(b) => vec![b],
        None => vec!["xdg-open".into(), "open".into()],
    };
    for program in candidates {
        let started = std::process::Command::new(&program)
            .arg(address)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = started {
            // Reaped in the background (xdg-open ends at once).
            std::thread::spawn(move || child.wait());
            return;
        }
    }
}

/// Waits for the browser's request to `/callback`; answers it (and any
/// other request, with 404) and returns its target (path and query).
async fn callback(listener: &tokio::net::TcpListener, server: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| format!("mcp login: {e}"))?;
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0u8; 1024];
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                let n = stream.read(&mut buf).await.ok()?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            Some(())
        })
        .await;
        if !matches!(read, Ok(Some(()))) {
            continue;
        }
        let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
        let target = match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["GET", target, _] if target.starts_with("/callback?") => target.to_owned(),
            _ => {
                let _ =
                    stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                continue;
            }
        };
        let body = format!("agentd: back from logging in to {server}; you can close this window.\n");
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        return Ok(target);
    }
}

/// `agentctl mcp logout`.
pub(super) async fn mcp_logout(client: &Client, session: String, server: &str) -> Result<(), Failure> {
    use agentd_client::protocol::mcp::McpLogoutParams;
    let done = client
        .call::<agentd_client::protocol::methods::McpLogout>(McpLogoutParams {
            session_id: session,
            server: server.to_owned(),
        })
        .await?;
    println!(
        "{}",
        if done.forgotten {
            format!("forgot the tokens of {server}")
        } else {
            format!("no tokens were kept for {server}")
        }
    );
    Ok(())
}
