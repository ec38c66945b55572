//! How agentctl drives calls and turns: `call` with its progress and its
//! own interrupt, `run`'s turn files and live view (its questions to the
//! user are in `ask`), and the one-line rendering of events that `run` and
//! `watch` print.

use super::*;

/// `tool/call`, with the call's progress on stderr when `show`. The call
/// has an id of agentctl's own, so Ctrl+C (or SIGTERM) cancels exactly it
/// — in a named session too, where other clients' work goes on — and its
/// cancelled result is printed; a second Ctrl+C leaves at once. `signals`
/// were listened for before anything was asked of the daemon, so an
/// interrupt that comes before the call is known there cancels it as soon
/// as it is.
pub(super) async fn call_showing_progress(
    client: &Client,
    session: &str,
    tool: &str,
    input: serde_json::Value,
    show: bool,
    signals: &mut Interrupts,
) -> Result<agentd_client::protocol::tools::ToolCallResult, Failure> {
    let tool_use_id = format!("call-{}", run_tag());
    let mut events = match show {
        true => Some(client.stream_kinds(session, None, Some(&["tool/progress"])).await?),
        false => None,
    };
    let params = agentd_client::protocol::tools::ToolCallParams {
        session_id: session.to_owned(),
        name: tool.to_owned(),
        input,
        tool_use_id: Some(tool_use_id.clone()),
    };
    let call = client.call::<agentd_client::protocol::methods::ToolCall>(params);
    tokio::pin!(call);
    let mut interrupted = false;
    let mut cancelled = false;
    let mut retry = tokio::time::interval(std::time::Duration::from_millis(50));
    loop {
        let progress = async {
            match events.as_mut() {
                Some(e) => e.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            result = &mut call => return Ok(result?),
            Some(Ok(event)) = progress => {
                if let EventKind::ToolProgress { render, .. } = event.kind {
                    for line in render.lines().filter(|l| !l.trim().is_empty()) {
                        eprintln!("  … {}", line.replace('\t', " "));
                    }
                }
            }
            _ = signals.next() => {
                if interrupted {
                    std::process::exit(130);
                }
                interrupted = true;
                eprintln!("agentctl: cancelling the call (Ctrl+C again to quit)");
            }
            _ = retry.tick(), if interrupted && !cancelled => {
                let params = agentd_client::protocol::turn::TurnCancelParams {
                    session_id: session.to_owned(),
                    turn_id: None,
                    tool_use_id: Some(tool_use_id.clone()),
                };
                // Not known yet (the call is on its way): tried again.
                if let Ok(r) = client.call::<agentd_client::protocol::methods::TurnCancel>(params).await {
                    cancelled = r.cancelled.contains(&tool_use_id);
                }
            }
        }
    }
}

/// Ctrl+C and SIGTERM, listened for.
pub(super) struct Interrupts {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Interrupts {
    pub(super) fn listen() -> Result<Interrupts, Failure> {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind| signal(kind).map_err(|e| Failure::Local(format!("listening for signals: {e}")));
        Ok(Interrupts { int: listen(SignalKind::interrupt())?, term: listen(SignalKind::terminate())? })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// Tool-use blocks from a file or stdin: JSON lines, one JSON array, or
/// one (pretty-printed) object; each `{name, input, id?}` or the model
/// API's own `{"type": "tool_use", id, name, input}`. Blocks without an id
/// get `t1-<run>`, `t2-<run>`, … (`<run>` random per run, so a second run
/// in the same session does not reuse them).
pub(super) fn read_tool_uses(file: &str) -> Result<Vec<agentd_client::protocol::turn::ToolUse>, Failure> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| Failure::Usage(format!("stdin: {e}")))?;
        s
    } else {
        std::fs::read_to_string(file).map_err(|e| Failure::Usage(format!("{file}: {e}")))?
    };
    parse_tool_uses(&text, &run_tag()).map_err(Failure::Usage)
}

/// A few random hex digits for this run's ids.
pub(super) fn run_tag() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{:06x}", h.finish() & 0xff_ffff)
}

/// [`read_tool_uses`]'s parsing: the blocks (`where`: "line N" or "block
/// N") or an error naming the first bad one.
pub(super) fn parse_tool_uses(text: &str, tag: &str) -> Result<Vec<agentd_client::protocol::turn::ToolUse>, String> {
    let trimmed = text.trim();
    // One JSON value (an array, or an object over several lines), else
    // JSON lines.
    let blocks: Vec<(String, serde_json::Value)> = match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(serde_json::Value::Array(items)) => {
            items.into_iter().enumerate().map(|(i, v)| (format!("block {}", i + 1), v)).collect()
        }
        Ok(value) => vec![("block 1".to_owned(), value)],
        Err(_) if trimmed.starts_with('[') => {
            return Err("the file starts with '[' but is not one JSON array".to_owned());
        }
        Err(_) => {
            let mut out = Vec::new();
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                let value = serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", n + 1))?;
                out.push((format!("line {}", n + 1), value));
            }
            out
        }
    };
    if blocks.is_empty() {
        return Err("no tool_use blocks (write one JSON object a line, or a JSON array of them)".to_owned());
    }
    let mut uses = Vec::new();
    for (at, mut value) in blocks {
        let Some(object) = value.as_object_mut() else {
            return Err(format!("{at}: not a tool_use block (a JSON object with name and input), but {value}"));
        };
        match object.remove("type") {
            None => {}
            Some(serde_json::Value::String(t)) if t == "tool_use" => {}
            Some(other) => return Err(format!("{at}: a block of type {other}, not tool_use")),
        }
        if !object.contains_key("id") {
            object.insert("id".into(), serde_json::json!(format!("t{}-{tag}", uses.len() + 1)));
        }
        let tu: agentd_client::protocol::turn::ToolUse =
            serde_json::from_value(value).map_err(|e| format!("{at}: not a tool_use block: {e}"))?;
        uses.push(tu);
    }
    Ok(uses)
}

/// Submits `uses` as one turn and prints its events until it is done.
/// Returns whether any result was an error.
pub(super) async fn run_turn(
    cli: &Cli,
    client: &Client,
    session: &str,
    uses: Vec<agentd_client::protocol::turn::ToolUse>,
    answering: Answering,
) -> Result<bool, Failure> {
    // Listen for Ctrl+C before the turn exists: its commands may start
    // before the submit's reply arrives, and an interrupt then must cancel
    // the turn, not kill agentctl with the default action.
    let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| Failure::Local(format!("listening for Ctrl+C: {e}")))?;
    // agentctl runs no model, but it shows an agent/request with how to
    // answer it (agentctl respond-agent) and waits for the answer.
    // At a terminal it answers the session's MCP servers' elicitations
    // too (a form, field by field).
    let mut answers = vec![agentd_client::protocol::agent::AGENTS_CAPABILITY];
    if matches!(answering, Answering::Prompt(_)) {
        answers.push(agentd_client::protocol::mcp::ELICITATION_CAPABILITY);
    }
    let mut events = client.stream_with(session, None, None, &answers).await?;
    let params = agentd_client::protocol::turn::TurnSubmitParams {
        session_id: session.to_owned(),
        turn_id: None,
        tool_uses: uses,
        end: true,
    };
    let turn = client.call::<agentd_client::protocol::methods::TurnSubmit>(params).await?.turn_id;
    let mut failed = false;
    let mut stopped = false;
    let mut done = false;
    let mut interrupted = false;
    let paint = Paint::for_stdout();
    let live = (!cli.json && std::io::IsTerminal::is_terminal(&std::io::stdout())).then(Live::new);
    let say = |line: String| match &live {
        Some(l) => l.println(line),
        None => println!("{line}"),
    };
    loop {
        // Ctrl+C cancels the turn (tools that block on interrupt finish);
        // a second Ctrl+C leaves at once.
        let next = tokio::select! {
            next = events.next() => next,
            _ = interrupts.recv() => {
                if interrupted {
                    std::process::exit(130);
                }
                interrupted = true;
                eprintln!("agentctl: cancelling the turn (Ctrl+C again to quit)");
                let params = agentd_client::protocol::turn::TurnCancelParams {
                    session_id: session.to_owned(),
                    turn_id: Some(turn.clone()),
                    tool_use_id: None,
                };
                client.call::<agentd_client::protocol::methods::TurnCancel>(params).await?;
                continue;
            }
        };
        let Some(event) = next else { break };
        let event = event.map_err(|e| Failure::Local(format!("bad event: {e}")))?;
        if let EventKind::McpElicitation { request_id, server, message, requested_schema, url, .. } = &event.kind
            && let Answering::Prompt(asker) = answering
        {
            // URL mode: the page is shown, not opened; yes says the user
            // goes there.
            let message = match url {
                Some(url) => format!("{message}\n  the page: {url} (open it yourself if you agree)"),
                None => message.clone(),
            };
            let (server, message, schema) = (server.clone(), message, requested_schema.clone());
            let multi = live.as_ref().map(|l| l.multi.clone());
            let (client, session, request_id) = (client, session.to_owned(), request_id.clone());
            // Asked again while the values do not fit (the daemon says why).
            for _ in 0..3 {
                let (server, message, schema) = (server.clone(), message.clone(), schema.clone());
                let multi = multi.clone();
                let asked = tokio::task::spawn_blocking(move || match multi {
                    Some(m) => m.suspend(|| elicit_prompt(asker, &server, &message, &schema)),
                    None => elicit_prompt(asker, &server, &message, &schema),
                })
                .await
                .map_err(|e| Failure::Local(format!("prompt: {e}")))?;
                let params = agentd_client::protocol::mcp::McpElicitationRespondParams {
                    session_id: session.clone(),
                    request_id: request_id.clone(),
                    action: asked.0,
                    content: asked.1,
                };
                match client.call::<agentd_client::protocol::methods::McpElicitationRespond>(params).await {
                    Ok(_) => break,
                    Err(e) => eprintln!("agentctl: {e}"),
                }
            }
            continue;
        }
        let ours = event_turn(&event.kind).is_some_and(|t| t == turn);
        if !ours && !matches!(event.kind, EventKind::SessionClosed {}) {
            continue;
        }
        if let EventKind::ToolResult { is_error, render, .. } = &event.kind {
            failed |= *is_error;
            stopped |= *is_error && render == DAEMON_STOPPED;
        }
        if cli.json {
            print_json(&event);
        } else {
            match &event.kind {
                EventKind::ToolResult { tool_use_id, content, is_error, render, .. } => {
                    if let Some(l) = &live {
                        l.done(tool_use_id);
                    }
                    let mark = if *is_error { paint.red("✗") } else { paint.green("✓") };
                    say(format!("{mark} {tool_use_id}: {render}"));
                    for block in content {
                        if let agentd_client::protocol::tools::ContentBlock::Text { text } = block {
                            for line in text.lines() {
                                say(format!("    {line}"));
                            }
                        }
                    }
                }
                EventKind::ToolStarted { tool_use_id, render, .. } if live.is_some() => {
                    if let Some(l) = &live {
                        l.start(tool_use_id, render);
                    }
                }
                EventKind::ToolProgress { tool_use_id, render, .. } if live.is_some() => {
                    if let Some(l) = &live {
                        l.progress(tool_use_id, render);
                    }
                }
                // The respond hint only where someone may answer it: with
                // --yes (or nobody to ask) agentctl answers at once.
                EventKind::PermissionRequest { tool_use_id, reason, render, .. }
                    if !matches!(answering, Answering::Prompt(_)) =>
                {
                    let how = match answering {
                        Answering::Yes => "allowing: --yes",
                        _ => "refusing: nobody to ask",
                    };
                    say(format!("asking    {tool_use_id}  {render}: {reason} ({how})"))
                }
                _ => say(describe(&event, session)),
            }
        }
        if let EventKind::PermissionRequest { request_id, tool, input, suggestions, changes, diff, .. } = &event.kind {
            let (decision, answers, message) = match answering {
                Answering::Yes => (PermissionDecision::Allow, None, None),
                Answering::Deny => {
                    let why = "agentctl run has no terminal to ask on (stdin is not one and there is no \
                               /dev/tty); pass --yes, or use a rule or mode that allows it";
                    eprintln!("agentctl: denied: {why}");
                    (PermissionDecision::Deny, None, Some(why.to_owned()))
                }
                Answering::Prompt(asker) => {
                    let (tool, input, suggestions) = (tool.clone(), input.clone(), suggestions.clone());
                    // A command's changes waiting for approval: shown first.
                    let mut shown = String::new();
                    for change in changes {
                        shown.push_str(&format!("would change {}\n", super::describe_change(change)));
                    }
                    shown.push_str(diff.as_deref().unwrap_or_default());
                    let multi = live.as_ref().map(|l| l.multi.clone());
                    let ask = move || {
                        if !shown.is_empty() {
                            eprint!("{shown}");
                        }
                        prompt(asker, &tool, &input, &suggestions)
                    };
                    let asked = tokio::task::spawn_blocking(move || match multi {
                        Some(m) => m.suspend(ask),
                        None => ask(),
                    });
                    let answered = tokio::select! {
                        a = asked => a.map_err(|e| Failure::Local(format!("prompt: {e}")))?,
                        _ = interrupts.recv() => {
                            // Not left open: the question is refused, then
                            // agentctl stops (a temporary session closes
                            // with its connection).
                            let params = PermissionRespondParams {
                                session_id: session.to_owned(),
                                request_id: request_id.clone(),
                                decision: PermissionDecision::Deny,
                                rule: None,
                                message: Some("the user interrupted agentctl".into()),
                                answers: None,
                                no_user: false,
                            };
                            let _ = client.call::<agentd_client::protocol::methods::PermissionRespond>(params).await;
                            // Said, not a silent exit (issue 49 #13).
                            eprintln!();
                            eprintln!("agentctl: interrupted at the prompt: {request_id} refused; stopping");
                            std::process::exit(130)
                        }
                    };
                    (answered.0, answered.1, None)
                }
            };
            let params = PermissionRespondParams {
                session_id: session.to_owned(),
                request_id: request_id.clone(),
                decision,
                rule: None,
                message,
                answers,
                // Nobody was asked when agentctl had nowhere to ask.
                no_user: matches!(answering, Answering::Deny),
            };
            match client.call::<agentd_client::protocol::methods::PermissionRespond>(params).await {
                Ok(answered) => {
                    if let Some(rule) = answered.rule_added {
                        say(format!("          rule added for this session: {rule}"));
                    }
                }
                Err(e) => eprintln!("agentctl: answering {request_id}: {e}"),
            }
        }
        if matches!(
            event.kind,
            EventKind::TurnCompleted { .. } | EventKind::TurnDiscarded { .. } | EventKind::SessionClosed {}
        ) {
            done = true;
            break;
        }
    }
    if stopped {
        eprintln!("agentctl: {DAEMON_STOPPED}");
        return Err(Failure::DaemonStopped);
    }
    if !done {
        // The stream ended before the turn did: the connection is gone.
        return Err(Failure::Client(ClientError::Disconnected { path: client.socket().to_owned() }));
    }
    Ok(failed)
}

/// A spinner per running call, on a terminal: elapsed time and the
/// call's latest progress line. Finished calls are printed above them.
pub(super) struct Live {
    multi: indicatif::MultiProgress,
    bars: std::sync::Mutex<std::collections::HashMap<String, indicatif::ProgressBar>>,
}

impl Live {
    fn new() -> Live {
        Live { multi: indicatif::MultiProgress::new(), bars: std::sync::Mutex::new(std::collections::HashMap::new()) }
    }

    fn bars(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, indicatif::ProgressBar>> {
        crate::mcp_bridge::lock(&self.bars)
    }

    /// Prints `line` above the spinners as it is, ended by a newline: the
    /// spinners are cleared, the text written, the spinners drawn again
    /// (indicatif's own `println` pads each line to the width it counts,
    /// which tabs, wide characters and long lines throw off).
    fn println(&self, line: String) {
        self.multi.suspend(|| println!("{line}"));
    }

    fn start(&self, id: &str, render: &str) {
        // `wide_msg`: the message is cut to the terminal's width, so a
        // spinner line never wraps.
        let style = indicatif::ProgressStyle::with_template("{spinner} {elapsed:>4} {wide_msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        let bar = self.multi.add(indicatif::ProgressBar::new_spinner().with_style(style));
        bar.set_message(format!("{id}  {}", render.replace('\t', " ")));
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        self.bars().insert(id.to_owned(), bar);
    }

    fn progress(&self, id: &str, render: &str) {
        if let Some(bar) = self.bars().get(id) {
            let line = render.lines().last().unwrap_or_default().replace('\t', " ");
            bar.set_message(format!(
                "{id}  {}",
                line.chars().filter(|c| !c.is_control()).take(200).collect::<String>()
            ));
        }
    }

    fn done(&self, id: &str) {
        if let Some(bar) = self.bars().remove(id) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
    }
}

/// Colour for people: only on a terminal, never with `NO_COLOR` set.
pub(super) struct Paint {
    on: bool,
}

impl Paint {
    fn for_stdout() -> Paint {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
        Paint { on: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) }
    }

    fn wrap(&self, code: &str, text: &str) -> String {
        if self.on { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    fn red(&self, text: &str) -> String {
        self.wrap("31", text)
    }

    fn green(&self, text: &str) -> String {
        self.wrap("32", text)
    }
}

pub(super) fn event_turn(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::ToolQueued { turn_id, .. }
        | EventKind::ToolStarted { turn_id, .. }
        | EventKind::ToolProgress { turn_id, .. }
        | EventKind::ToolResult { turn_id, .. }
        | EventKind::PermissionRequest { turn_id, .. }
        | EventKind::PermissionResolved { turn_id, .. }
        | EventKind::TurnCompleted { turn_id, .. }
        | EventKind::TurnDiscarded { turn_id }
        | EventKind::TasksChanged { turn_id, .. }
        | EventKind::WorktreeChanged { turn_id, .. }
        | EventKind::AgentRequest { turn_id, .. }
        | EventKind::UserMessage { turn_id, .. }
        | EventKind::SandboxNetwork { turn_id, .. } => Some(turn_id),
        EventKind::HookRequest { turn_id, .. }
        | EventKind::HookStarted { turn_id, .. }
        | EventKind::HookCompleted { turn_id, .. } => turn_id.as_deref(),
        EventKind::SessionClosed {}
        | EventKind::McpLog { .. }
        | EventKind::McpElicitation { .. }
        | EventKind::McpSampling { .. }
        | EventKind::ToolsChanged { .. }
        | EventKind::McpListChanged { .. }
        | EventKind::McpAuthRequired { .. }
        | EventKind::TrustRequired { .. }
        | EventKind::MessageReceived { .. }
        | EventKind::CronFired { .. }
        | EventKind::MonitorEvent { .. }
        | EventKind::TaskNotification { .. }
        | EventKind::SessionIdle { .. } => None,
    }
}

/// The session's network, as `session show` prints it: what confined
/// commands may reach (the domain rules themselves are in allow/deny).
pub(super) fn network_line(sandbox: &agentd_client::protocol::session::SandboxOptions) -> String {
    use agentd_client::protocol::session::SandboxNetwork;
    match &sandbox.network {
        SandboxNetwork::Switch(false) => "none".to_owned(),
        SandboxNetwork::Switch(true) if sandbox.network_allow_all => "all (the user's sandbox.network.allowAll)".into(),
        SandboxNetwork::Switch(true) => {
            "gated: WebFetch(domain:…) rules and sandbox.network.allowedDomains/deniedDomains decide; others ask"
                .to_owned()
        }
        SandboxNetwork::Gate(g) => {
            let mut parts = vec![match &g.allowed_domains {
                Some(list) => {
                    format!("gated: only {}", if list.is_empty() { "(nothing)".into() } else { list.join(", ") })
                }
                None => "gated: rules decide, others ask".to_owned(),
            }];
            if !g.denied_domains.is_empty() {
                parts.push(format!("denied {}", g.denied_domains.join(", ")));
            }
            if g.allow_private_network {
                parts.push("private addresses allowed".into());
            }
            parts.join("; ")
        }
    }
}

/// One line for an event, as a person reads it.
pub(super) fn describe(event: &agentd_client::protocol::turn::Event, session: &str) -> String {
    match &event.kind {
        EventKind::ToolQueued { tool_use_id, render, .. } => format!("queued    {tool_use_id}  {render}"),
        EventKind::ToolStarted { tool_use_id, render, .. } => format!("executing {tool_use_id}  {render}"),
        EventKind::ToolProgress { tool_use_id, render, .. } => format!("  …       {tool_use_id}  {render}"),
        EventKind::ToolResult { tool_use_id, render, is_error, changes, .. } => {
            let mut line = format!("{} {tool_use_id}  {render}", if *is_error { "failed   " } else { "yielded  " });
            // What the call changed, one line each.
            for change in changes {
                line.push_str(&format!("\n          changed {}", super::describe_change(change)));
            }
            line
        }
        EventKind::PermissionRequest {
            tool_use_id,
            request_id,
            reason,
            render,
            kind,
            host,
            port,
            changes,
            diff,
            ..
        } => {
            let what = match (kind.as_deref(), host, port) {
                (Some("network"), Some(host), Some(port)) => format!("network {host}:{port} for {render}"),
                (Some("effects"), _, _) => format!("the changes of {render}"),
                _ => render.clone(),
            };
            let mut line = format!(
                "asking    {tool_use_id}  {what}: {reason} (agentctl respond {session} {request_id} allow|deny|allow-always)"
            );
            // What a command changed, waiting for the answer: each path,
            // then the diff.
            for change in changes {
                line.push_str(&format!("\n          would change {}", super::describe_change(change)));
            }
            if let Some(diff) = diff {
                for l in diff.lines() {
                    line.push_str(&format!("\n          {l}"));
                }
            }
            line
        }
        EventKind::SandboxNetwork { tool_use_id, host, port, allowed, rule, bytes_up, bytes_down, .. } => {
            if *allowed {
                format!("network   {tool_use_id}  {host}:{port} ({rule}): {bytes_up} B up, {bytes_down} B down")
            } else {
                format!("network   {tool_use_id}  {host}:{port} refused: {rule}")
            }
        }
        EventKind::McpElicitation { server, message, request_id, url, .. } => {
            let page = url.as_ref().map(|u| format!(" [the page {u}]")).unwrap_or_default();
            format!("mcp asks {server}: {message}{page} (answer with mcp/elicitation_respond {session} {request_id})")
        }
        EventKind::McpSampling { server, request_id, .. } => {
            format!("mcp asks {server} for a completion (answer with mcp/sampling_respond {session} {request_id})")
        }
        EventKind::McpLog { server, level, logger, data, dropped } => {
            let text = match data {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let logger = logger.as_deref().map(|l| format!(" {l}")).unwrap_or_default();
            let dropped = if *dropped > 0 { format!(" ({dropped} dropped before)") } else { String::new() };
            format!("mcp log   {server}{logger} {}: {text}{dropped}", super::wire(level))
        }
        EventKind::ToolsChanged { server, added, removed, changed } => {
            let mut parts = Vec::new();
            for (what, names) in [("added", added), ("removed", removed), ("changed", changed)] {
                if !names.is_empty() {
                    parts.push(format!("{what} {}", names.join(", ")));
                }
            }
            format!("tools     MCP server {server}: {}", parts.join("; "))
        }
        EventKind::McpListChanged { server, list } => {
            format!("mcp       {server}: its {} changed", super::wire(list))
        }
        EventKind::McpAuthRequired { message, .. } => format!("mcp       {message}"),
        EventKind::MessageReceived { from, from_name, message, .. } => {
            let who = from_name.as_deref().map_or_else(|| from.clone(), |n| format!("{n} [{from}]"));
            let first = message.lines().next().unwrap_or_default();
            format!("message   from {}: {}", super::trust::visible(&who), super::trust::visible(first))
        }
        EventKind::CronFired { cron_id, prompt, missed, .. } => {
            let first = prompt.lines().next().unwrap_or_default();
            let late = if *missed { " (missed while the daemon was down)" } else { "" };
            format!("cron      {cron_id}{late}: {}", super::trust::visible(first))
        }
        EventKind::MonitorEvent { task_id, description, text, dropped, .. } => {
            // What it saw (the notice's body), else how it ended.
            let between =
                |open: &str, close: &str| text.split_once(open).and_then(|(_, r)| r.split_once(close)).map(|(b, _)| b);
            let body = between("<event>", "</event>").or_else(|| between("<summary>", "</summary>")).unwrap_or(text);
            let over =
                if *dropped > 0 { format!(" ({dropped} events left out: over the rate)") } else { String::new() };
            format!(
                "monitor   {task_id} {}: {}{over}",
                super::trust::visible(description),
                super::trust::visible(body.lines().next().unwrap_or_default())
            )
        }
        EventKind::TaskNotification { task_id, status, summary, .. } => {
            format!("task      {task_id} {status}: {}", super::trust::visible(summary))
        }
        EventKind::SessionIdle { session_id, name, closed } => {
            let who = name.as_deref().map_or_else(|| session_id.clone(), |n| format!("{n} [{session_id}]"));
            format!(
                "idle      {} {}",
                super::trust::visible(&who),
                if *closed { "closed" } else { "finished its turn" }
            )
        }
        EventKind::TrustRequired { files } => format!(
            "trust     {} project file(s) not obeyed until approved (agentctl trust): {}",
            files.len(),
            files.iter().map(|f| super::trust::visible(&f.path.display().to_string())).collect::<Vec<_>>().join(", ")
        ),
        EventKind::PermissionResolved { tool_use_id, allowed, reason, .. } => {
            format!("{} {tool_use_id}  {reason}", if *allowed { "approved " } else { "refused  " })
        }
        EventKind::TurnCompleted { turn_id, additional_context, stop_reason } => {
            let mut text = format!("turn {turn_id} completed");
            if let Some(c) = additional_context {
                text.push_str(&format!("\n          context for the model: {}", super::trust::visible(c)));
            }
            if let Some(r) = stop_reason {
                text.push_str(&format!("\n          a hook stops the loop: {}", super::trust::visible(r)));
            }
            text
        }
        EventKind::TurnDiscarded { turn_id } => format!("turn {turn_id} discarded"),
        EventKind::TasksChanged { tasks, .. } => {
            let mut text = format!("tasks     {} task(s)", tasks.len());
            for t in tasks {
                let mark = match t.status {
                    agentd_client::protocol::session::TodoStatus::Pending => "[ ]",
                    agentd_client::protocol::session::TodoStatus::InProgress => "[~]",
                    agentd_client::protocol::session::TodoStatus::Completed => "[x]",
                };
                text.push_str(&format!("\n          {mark} #{} {}", t.id, t.subject));
            }
            text
        }
        EventKind::WorktreeChanged { worktree, .. } => match worktree {
            Some(w) => format!("worktree  now in {} ({})", w.cwd.display(), w.branch),
            None => "worktree  left".to_owned(),
        },
        EventKind::AgentRequest { tool_use_id, request_id, child_session_id, subagent_type, description, .. } => {
            format!(
                "agent     {tool_use_id}  {subagent_type}: {description} (child session {child_session_id}; answer with \
                 agentctl respond-agent <session> {request_id} --result TEXT)"
            )
        }
        EventKind::UserMessage { message, .. } => {
            let mut lines = message.lines();
            let mut text = format!("message   {}", lines.next().unwrap_or_default());
            for line in lines {
                text.push_str(&format!("\n          {line}"));
            }
            text
        }
        EventKind::HookRequest { tool_use_id, event, request_id, .. } => {
            format!(
                "hook      {}  {} asks its client (request {request_id})",
                tool_use_id.as_deref().unwrap_or("-"),
                event.as_str()
            )
        }
        EventKind::HookStarted { tool_use_id, event, hook, .. } => {
            format!("hook      {}  {} {hook}", tool_use_id.as_deref().unwrap_or("-"), event.as_str())
        }
        EventKind::HookCompleted { tool_use_id, event, outcome, decision, message, duration_ms, .. } => {
            let mut text = format!("hook      {}  {} {outcome}", tool_use_id.as_deref().unwrap_or("-"), event.as_str());
            if let Some(d) = decision {
                text.push_str(&format!(": {d}"));
            }
            if let Some(m) = message {
                text.push_str(&format!(" ({m})"));
            }
            text.push_str(&format!(" in {duration_ms} ms"));
            text
        }
        EventKind::SessionClosed {} => "session closed".to_owned(),
    }
}

/// A call's input: the JSON object given, then each `key=value` on top.
pub(super) fn call_input(json: Option<&str>, args: &[String]) -> Result<serde_json::Value, Failure> {
    let mut input = match json {
        Some(text) => serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| Failure::Usage(format!("the input is not JSON: {e}")))?,
        None => serde_json::json!({}),
    };
    let Some(object) = input.as_object_mut() else {
        return Err(Failure::Usage("the input must be a JSON object".into()));
    };
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(Failure::Usage(format!("--arg {arg:?} is not key=value")));
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        object.insert(key.to_owned(), value);
    }
    Ok(input)
}

/// `KEY=VALUE` arguments as a map (a later key wins); `bad` words the
/// failure of the first one with no `=`.
pub(super) fn key_values(
    args: &[String],
    bad: impl Fn(&str) -> String,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((key, value)) => Ok((key.to_owned(), value.to_owned())),
            None => Err(Failure::Usage(bad(a))),
        })
        .collect()
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Client(e)
    }
}
