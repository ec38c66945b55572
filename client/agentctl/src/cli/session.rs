//! `agentctl session`: create, list, show and close sessions; the
//! workspace a session is opened on, and the temporary session `call`,
//! `run` and `tools` open when not given `--session`.

use super::*;
use agentd_client::protocol::session::{RuleInForce, RuleKind, RuleSource};

// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(super) enum SessionCommand {
    /// Open a session on a workspace; prints its id
    Create {
        /// Workspace directory [default: the current directory]
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Permission mode
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// Allow rule, e.g. 'Bash(npm test:*)' (repeatable)
        #[arg(long = "allow", value_name = "RULE")]
        allow: Vec<String>,
        /// Deny rule (repeatable)
        #[arg(long = "deny", value_name = "RULE")]
        deny: Vec<String>,
        /// Ask rule (repeatable)
        #[arg(long = "ask", value_name = "RULE")]
        ask: Vec<String>,
        /// Offer only Bash, Read and Edit
        #[arg(long)]
        simple: bool,
        /// Do not offer this tool (repeatable)
        #[arg(long = "disable", value_name = "TOOL")]
        disable: Vec<String>,
        /// Tool calls run at once
        #[arg(long)]
        max_concurrency: Option<u32>,
        /// An environment variable for the session's commands and hooks,
        /// NAME=VALUE (repeatable)
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Another directory that counts as the workspace (repeatable)
        #[arg(long = "add-dir", value_name = "DIR")]
        add_dirs: Vec<PathBuf>,
        /// Run the hooks of the workspace's own settings files (off by
        /// default: a repository must not run code by being opened)
        #[arg(long)]
        enable_project_hooks: bool,
        /// Start the MCP servers of the workspace's .mcp.json (off by default)
        #[arg(long)]
        enable_project_mcp: bool,
        /// A name other sessions reach it by (SendMessage, ListAgents), unique among the daemon's
        #[arg(long)]
        name: Option<String>,
        /// Keep it out of other sessions' ListAgents and refuse their messages
        #[arg(long)]
        hidden: bool,
        #[command(flatten)]
        network: NetworkFlags,
    },
    /// List open sessions
    List,
    /// Show one session
    Show {
        /// Session id
        session_id: String,
    },
    /// Close a session, cancelling everything it runs
    Close {
        /// Session id
        session_id: String,
    },
}

/// `agentctl session …`.
pub(super) async fn session(cli: &Cli, client: &Client, cmd: &SessionCommand) -> Result<(), Failure> {
    match cmd {
        SessionCommand::Create {
            cwd,
            mode,
            allow,
            deny,
            ask,
            simple,
            disable,
            max_concurrency,
            env,
            add_dirs,
            enable_project_hooks,
            enable_project_mcp,
            name,
            hidden,
            network,
        } => {
            // The daemon wants an absolute path; resolve a relative one here,
            // where "relative" means something.
            let cwd = workspace(cwd.as_deref())?;
            let rules = PermissionRules { allow: allow.clone(), deny: deny.clone(), ask: ask.clone() };
            let tools = ToolOptions { defer: None, simple: *simple, disabled: disable.clone(), only: None };
            let params = SessionCreateParams {
                mode: mode.map(Into::into),
                permissions: (rules != PermissionRules::default()).then_some(rules),
                tools: (tools != ToolOptions::default()).then_some(tools),
                max_concurrency: *max_concurrency,
                env: (!env.is_empty()).then(|| env_pairs(env)).transpose()?,
                // Relative to where agentctl runs, as --cwd is.
                add_dirs: match add_dirs.is_empty() {
                    true => None,
                    false => Some(add_dirs.iter().map(|d| workspace(Some(d))).collect::<Result<_, _>>()?),
                },
                enable_project_hooks: enable_project_hooks.then_some(true),
                enable_project_mcp: enable_project_mcp.then_some(true),
                sandbox: network.sandbox(),
                name: name.clone(),
                discoverable: hidden.then_some(false),
                ..SessionCreateParams::new(cwd)
            };
            let created = client.session_create(params).await?;
            if cli.json {
                print_json(&created);
            } else {
                println!("{}", created.session_id);
                for note in &created.session.settings_notes {
                    eprintln!("agentctl: note: {note}");
                }
                if !created.session.untrusted.is_empty() {
                    eprintln!(
                        "agentctl: note: {} project file(s) not obeyed until you approve them: `agentctl trust {}`",
                        created.session.untrusted.len(),
                        created.session.cwd.display()
                    );
                }
            }
        }
        SessionCommand::List => {
            let sessions = client.session_list().await?;
            if cli.json {
                print_json(&serde_json::json!({ "sessions": sessions }));
            } else if sessions.is_empty() {
                println!("no open sessions");
            } else {
                println!("{:<36}  {:<12}  {:>6}  CWD", "SESSION", "MODE", "AGE");
                let now = now_ms();
                for s in &sessions {
                    println!(
                        "{:<36}  {:<12}  {:>6}  {}",
                        s.session_id,
                        mode_name(s.mode),
                        human_duration(now.saturating_sub(s.created_at_ms)),
                        s.cwd.display()
                    );
                }
            }
        }
        SessionCommand::Show { session_id } => {
            let s = client.session_get(session_id).await?;
            if cli.json {
                print_json(&s);
            } else {
                show_session(&s);
            }
        }
        SessionCommand::Close { session_id } => {
            let closed = client.session_close(session_id).await?;
            if cli.json {
                print_json(&closed);
            } else {
                println!("closed {}", closed.session_id);
            }
        }
    }
    Ok(())
}

pub(super) fn show_session(s: &SessionInfo) {
    let list = |v: &[String]| {
        if v.is_empty() { "-".to_owned() } else { v.join(", ") }
    };
    println!("session:         {}", s.session_id);
    if let Some(name) = &s.name {
        println!("name:            {name}{}", if s.discoverable { "" } else { " (hidden)" });
    }
    println!("cwd:             {}", s.cwd.display());
    if !s.add_dirs.is_empty() {
        let dirs: Vec<String> = s.add_dirs.iter().map(|d| d.display().to_string()).collect();
        println!("add dirs:        {}", dirs.join(", "));
    }
    println!("mode:            {}", mode_name(s.mode));
    for (label, kind, own) in [
        ("allow:  ", RuleKind::Allow, &s.permissions.allow),
        ("deny:   ", RuleKind::Deny, &s.permissions.deny),
        ("ask:    ", RuleKind::Ask, &s.permissions.ask),
    ] {
        // Every rule in force with where it comes from (a daemon older than
        // `rules_in_force` sends only the session's own).
        let in_force: Vec<String> = match s.rules_in_force.is_empty() {
            true => own.iter().map(|r| format!("{r} (session)")).collect(),
            false => s.rules_in_force.iter().filter(|r| r.kind == kind).map(rule_with_source).collect(),
        };
        println!("{label}         {}", in_force.first().map_or("-", String::as_str));
        for rule in in_force.iter().skip(1) {
            println!("                 {rule}");
        }
    }
    println!("granted:         {}", list(&s.granted_rules));
    println!("network:         {}", network_line(&s.sandbox));
    println!("waiting asks:    {}", list(&s.pending_permissions));
    println!("simple tools:    {}", if s.tools.simple { "yes" } else { "no" });
    println!("disabled tools:  {}", list(&s.tools.disabled));
    println!("max concurrency: {}", s.max_concurrency);
    let hooks: Vec<String> = s
        .hooks
        .iter()
        .map(|h| {
            let what = h.command.clone().unwrap_or_else(|| format!("socket {}", h.hook_id.as_deref().unwrap_or("?")));
            let matcher = if h.matcher.is_empty() { "*" } else { h.matcher.as_str() };
            format!("{} {matcher}: {what}", h.event.as_str())
        })
        .collect();
    println!("hooks:           {}", list(&hooks));
    for e in &s.hook_errors {
        println!("hook error:      {e}");
    }
    // Names only: values may be tokens.
    println!("environment:     {}", list(&s.env.keys().cloned().collect::<Vec<_>>()));
    for e in &s.rule_errors {
        println!("settings error:  {e}");
    }
    for note in &s.settings_notes {
        println!("settings note:   {note}");
    }
    for f in &s.untrusted {
        let path = super::trust::visible(&f.path.display().to_string());
        println!("not trusted:     {path} ({:?}, {:?})", f.kind, f.standing);
    }
    println!("age:             {}", human_duration(now_ms().saturating_sub(s.created_at_ms)));
}

/// `Bash(npm test:*) (project: /ws/.claude/settings.json)`.
fn rule_with_source(r: &RuleInForce) -> String {
    let source = match r.source {
        RuleSource::Session => "session",
        RuleSource::Granted => "granted",
        RuleSource::Project => "project",
        RuleSource::User => "user",
        RuleSource::ClaudeImport => "imported Claude Code settings",
    };
    match &r.file {
        Some(file) => format!("{} ({source}: {})", r.rule, file.display()),
        None => format!("{} ({source})", r.rule),
    }
}

/// `--env NAME=VALUE` arguments as a map.
pub(super) fn env_pairs(args: &[String]) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
            _ => Err(Failure::Usage(format!("--env {a:?}: expected NAME=VALUE"))),
        })
        .collect()
}

/// The session `call` and `run` open when not given `--session`.
#[derive(Debug, clap::Args)]
pub(super) struct TemporarySession {
    /// Workspace of the temporary session [default: the current directory]
    #[arg(long, conflicts_with = "session")]
    pub(super) cwd: Option<PathBuf>,
    /// Permission mode of the temporary session
    #[arg(long, value_enum, conflicts_with = "session")]
    pub(super) mode: Option<Mode>,
}

impl TemporarySession {
    /// Its parameters: the daemon closes it when this connection goes
    /// (Ctrl+C, SIGTERM, a crash), and nothing is left running.
    pub(super) fn params(&self) -> Result<SessionCreateParams, Failure> {
        Ok(SessionCreateParams {
            mode: self.mode.map(Into::into),
            close_with_connection: Some(true),
            ..SessionCreateParams::new(workspace(self.cwd.as_deref())?)
        })
    }
}

/// An absolute workspace path: `dir` resolved against the current directory,
/// or the current directory itself.
pub(super) fn workspace(dir: Option<&std::path::Path>) -> Result<PathBuf, Failure> {
    if REMOTE.get() == Some(&true) {
        return match dir {
            Some(d) if d.is_absolute() => Ok(d.to_owned()),
            _ => Err(Failure::Usage(
                "over --connect the workspace is on the daemon's machine: give --cwd as an absolute path there".into(),
            )),
        };
    }
    let here = std::env::current_dir().map_err(|e| Failure::Local(format!("current directory: {e}")))?;
    Ok(match dir {
        Some(d) if d.is_absolute() => d.to_owned(),
        Some(d) => here.join(d),
        None => here,
    })
}

/// Runs `work` in a session opened with `params` for it, and closes the
/// session after: `work`'s failure first, then the close's.
pub(super) async fn in_temporary_session<T, E, F, Fut>(
    client: &Client,
    params: SessionCreateParams,
    work: F,
) -> Result<T, Failure>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    Failure: From<E>,
{
    let temp = client.session_create(params).await?;
    let result = work(temp.session_id.clone()).await;
    let closed = client.session_close(&temp.session_id).await;
    let result = result?;
    closed?;
    Ok(result)
}

/// `agentctl tools`: the tools a session offers the model.
pub(super) async fn tools(
    cli: &Cli,
    client: &Client,
    session: Option<&str>,
    cwd: Option<&std::path::Path>,
    all: bool,
) -> Result<(), Failure> {
    let list = match session {
        Some(id) => client.tools_list(id).await?,
        None => {
            let params = TemporarySession { cwd: cwd.map(ToOwned::to_owned), mode: None }.params()?;
            in_temporary_session(client, params, |sid: String| async move { client.tools_list(&sid).await }).await?
        }
    };
    if cli.json {
        print_json(&list);
        return Ok(());
    }
    println!("tools ({}, ~{} tokens):", list.tools.len(), list.estimated_tokens);
    let width = list.tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for tool in &list.tools {
        if all {
            println!("\n{}\n  {}", tool.name, tool.description.replace('\n', "\n  "));
            let schema = serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default();
            println!("  input_schema: {}", schema.replace('\n', "\n  "));
        } else {
            let first = tool.description.lines().next().unwrap_or("");
            println!("  {:<width$}  {}", tool.name, first);
        }
    }
    if !list.deferred.is_empty() {
        println!(
            "deferred ({}, ~{} tokens saved; loaded on demand with ToolSearch):",
            list.deferred.len(),
            list.deferred_tokens_saved
        );
        for name in &list.deferred {
            println!("  {name}");
        }
    }
    Ok(())
}
