//! `agentctl session`: create, list, show and close sessions.

use super::*;

/// `agentctl session …`.
pub(super) async fn session(cli: &Cli, client: &Client, cmd: &SessionCommand) -> Result<(), Failure> {
    match cmd {
        SessionCommand::Create { cwd, mode, allow, deny, ask, simple, disable, max_concurrency, env } => {
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
                ..SessionCreateParams::new(cwd)
            };
            let created = client.session_create(params).await?;
            if cli.json {
                print_json(&created);
            } else {
                println!("{}", created.session_id);
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
    println!("cwd:             {}", s.cwd.display());
    println!("mode:            {}", mode_name(s.mode));
    println!("allow:           {}", list(&s.permissions.allow));
    println!("deny:            {}", list(&s.permissions.deny));
    println!("ask:             {}", list(&s.permissions.ask));
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
    println!("age:             {}", human_duration(now_ms().saturating_sub(s.created_at_ms)));
}

/// `--env NAME=VALUE` arguments as a map.
pub(super) fn env_pairs(args: &[String]) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
            _ => Err(Failure::Local(format!("--env {a:?}: expected NAME=VALUE"))),
        })
        .collect()
}
