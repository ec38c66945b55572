//! `agentctl mcp`: serving a session over MCP, and the `list`, `prompts`
//! and `prompt` subcommands about a session's MCP servers.

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
        None => return Err(Failure::Local("mcp: no place for the token: give --token-file".into())),
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
    if listed.prompts.is_empty() {
        println!("no MCP prompts in this session");
    }
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
    let mut arguments = std::collections::BTreeMap::new();
    for arg in args {
        let Some((k, v)) = arg.split_once('=') else {
            return Err(Failure::Local(format!("--arg {arg:?} is not name=value")));
        };
        arguments.insert(k.to_owned(), v.to_owned());
    }
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
        if list.servers.is_empty() {
            println!("no MCP servers");
        }
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
    if info.mcp.is_empty() {
        println!("no MCP servers in this session");
    }
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
