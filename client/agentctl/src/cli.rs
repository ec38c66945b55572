//! `agentctl`: drive agentd from a terminal or a shell script. The binary's
//! `main` is one call to [`main`].
//!
//! Every command prints text for people, or with `--json` one JSON object a
//! script can parse. Exit codes are stable: see `EXIT CODES` in `--help`.

use agentd_client::protocol::permission::{PermissionDecision, PermissionRespondParams};
use std::path::PathBuf;
use std::process::ExitCode;

use agentd_client::protocol::session::{
    PermissionMode, PermissionRules, SessionCreateParams, SessionInfo, ToolOptions,
};
use agentd_client::protocol::turn::EventKind;
use agentd_client::{Client, ClientError, Endpoint, TlsEndpoint};
use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

mod ask;
use ask::*;
mod calls;
use calls::*;
mod changes;
use changes::describe_change;
mod mcp;
use mcp::*;
mod session;
use session::*;
mod activity;
mod trust;
use activity::{CronCommand, cron, top};

/// The daemon answered with an error.
const EXIT_ERROR: u8 = 1;
/// Bad command line, or input agentctl itself finds wrong.
const EXIT_USAGE: u8 = 2;
/// The daemon could not be reached.
const EXIT_UNREACHABLE: u8 = 3;
/// `call`: the tool ran and its result is an error.
const EXIT_TOOL_FAILED: u8 = 4;

/// How long agentctl waits for an answer before calling the daemon unreachable.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The `--help` heading of the flags every command takes (the connection,
/// `--json`), apart from the command's own.
const GLOBAL: &str = "Global options";

/// Control the agentd daemon: the tool system of an AI coding agent.
#[derive(Debug, Parser)]
#[command(
    name = "agentctl",
    version,
    about,
    after_help = "EXIT CODES:\n  0  success\n  1  the daemon refused the request (the message says why)\n  2  bad command line, or input agentctl finds wrong (not JSON, a turn file it cannot read)\n  3  the daemon is not reachable, does not answer, or stopped mid-request\n  4  call, run: a tool result is an error (run: any of them)"
)]
struct Cli {
    /// Socket of the daemon [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]
    #[arg(long, global = true, help_heading = GLOBAL, env = "AGENTD_SOCKET")]
    socket: Option<PathBuf>,
    /// Reach a daemon's TLS face instead of a socket: tls://HOST:PORT (mutual
    /// TLS: needs --cert, --key and --ca; give --cwd as a directory on the
    /// daemon's machine)
    #[arg(long, global = true, help_heading = GLOBAL, env = "AGENTD_CONNECT", value_name = "tls://HOST:PORT", conflicts_with = "socket")]
    connect: Option<String>,
    /// This client's certificate for --connect (PEM), signed by the CA the
    /// daemon trusts (its --tls-client-ca)
    #[arg(long, global = true, help_heading = GLOBAL, env = "AGENTD_CLIENT_CERT", value_name = "FILE")]
    cert: Option<PathBuf>,
    /// This client's private key for --connect (PEM)
    #[arg(long, global = true, help_heading = GLOBAL, env = "AGENTD_CLIENT_KEY", value_name = "FILE")]
    key: Option<PathBuf>,
    /// The CA that signed the daemon's certificate, for --connect (PEM)
    #[arg(long, global = true, help_heading = GLOBAL, env = "AGENTD_CA", value_name = "FILE")]
    ca: Option<PathBuf>,
    /// Print machine-readable JSON instead of text
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show whether the daemon runs, its version, uptime, counts and how
    /// whole its sandbox is
    Status {
        /// Exit non-zero unless the sandbox is whole (level `full`): a
        /// readiness probe for a container
        #[arg(long)]
        require_sandbox: bool,
    },
    /// Create, list, show and close sessions
    #[command(subcommand)]
    Session(SessionCommand),
    /// What every session on the daemon is doing now: calls queued and running, background
    /// jobs, schedules, questions waiting, with ages (all harnesses and clients)
    Top {
        /// Print it again after each change, until interrupted
        #[arg(long)]
        follow: bool,
    },
    /// List and delete a session's schedules (its CronCreate calls')
    #[command(subcommand)]
    Cron(CronCommand),
    /// List the tools a session offers the model: definitions, deferred
    /// names, estimated tokens
    Tools {
        /// Session to list [default: a temporary session on --cwd]
        #[arg(long)]
        session: Option<String>,
        /// Workspace of the temporary session [default: the current directory]
        #[arg(long, conflicts_with = "session")]
        cwd: Option<PathBuf>,
        /// Print each definition in full (description and input schema)
        #[arg(long)]
        all: bool,
    },
    /// Run one tool call and print its result (exit code 4 when the result is an error)
    Call {
        /// The tool, e.g. Read, Bash, Grep
        tool: String,
        /// The input as a JSON object, e.g. '{"file_path": "README.md"}'
        input: Option<String>,
        /// An input field (repeatable): key=value, the value parsed as JSON when it is JSON
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        args: Vec<String>,
        /// Session to run it in [default: a temporary session on --cwd]
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        new_session: TemporarySession,
    },
    /// Submit a turn of tool_use blocks ({"id"?, "name", "input"}, or the model API's
    /// {"type": "tool_use", ...}: JSON lines, one JSON array or one object) from a file or `-`
    /// (stdin) and stream its events until it completes (exit code 4 if any result is an error)
    Run {
        /// The file of tool_use blocks, or `-` for stdin
        file: String,
        /// Session to run them in [default: a temporary session on --cwd]
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        new_session: TemporarySession,
        /// Allow every permission request of the turn. Without it, requests
        /// are asked on the terminal (stdin, or /dev/tty when stdin is the
        /// turn or not a terminal), or denied when there is none
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Follow a session's events live: each call queued, started, progressing, done
    Watch {
        /// The session
        session: String,
        /// Replay the events after this seq first
        #[arg(long)]
        after_seq: Option<u64>,
    },
    /// Serve a session's tools over MCP on stdin/stdout, for any MCP client
    /// (e.g. `claude mcp add agentd -- agentctl mcp --cwd .`); `agentctl mcp
    /// list` lists the MCP servers agentd itself uses
    Mcp(McpArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `agentctl man | man -l -`, or a
    /// command's own (`agentctl man call`)
    Man {
        /// The command whose page to print
        command: Option<String>,
    },
    /// Cancel one call, one turn, or everything running in a session
    Cancel {
        /// The session
        session: String,
        /// Only this turn
        #[arg(long)]
        turn: Option<String>,
        /// Only this call (its tool_use id)
        #[arg(long)]
        tool: Option<String>,
    },
    /// Show what a turn's file tools changed: the paths and one unified diff
    Diff {
        /// The session
        session: String,
        /// The turn [default: the latest turn the session's history keeps]
        turn: Option<String>,
    },
    /// Restore the workspace to before a turn (or a call), undoing it and
    /// everything after it; files changed since by something else are
    /// conflicts, left alone unless --force
    Rewind {
        /// The session
        session: String,
        /// Back to before this turn
        #[arg(long, required_unless_present = "call", conflicts_with = "call")]
        turn: Option<String>,
        /// Back to before this call (its tool_use id)
        #[arg(long)]
        call: Option<String>,
        /// Only say what would be restored
        #[arg(long)]
        dry_run: bool,
        /// Restore conflicting files too
        #[arg(long)]
        force: bool,
    },
    /// Show what a workspace holds that agentd obeys only once you approve
    /// its content (settings, .mcp.json, skills, agent definitions), and
    /// approve it: sessions created after obey it
    Trust {
        /// The workspace [default: the current directory]
        dir: Option<PathBuf>,
        /// Approve without asking (unattended use)
        #[arg(long)]
        yes: bool,
        /// Withdraw every approval of the workspace's files
        #[arg(long, conflicts_with = "yes")]
        revoke: bool,
    },
    /// Answer a permission request (shown by `watch` and `run` as `asking`)
    Respond {
        /// The session
        session: String,
        /// The request's id
        request_id: String,
        /// allow, deny or allow-always
        decision: Decision,
        /// For allow-always: the rule to add (default: the request's first suggestion)
        #[arg(long)]
        rule: Option<String>,
        /// For deny: a message for the model
        #[arg(long)]
        message: Option<String>,
        /// For AskUserQuestion: `question=answer` (repeat for each question)
        #[arg(long = "answer", value_name = "QUESTION=ANSWER")]
        answers: Vec<String>,
    },
    /// Answer an agent/request (a Task call) with what the sub-agent found
    RespondAgent {
        /// The parent session (the Task call's)
        session: String,
        /// The request's id
        request_id: String,
        /// The sub-agent's result, for the model
        #[arg(long)]
        result: String,
        /// The sub-agent failed: the result is an error
        #[arg(long)]
        error: bool,
    },
}

/// An answer to a permission request.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Decision {
    Allow,
    Deny,
    AllowAlways,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct McpArgs {
    #[command(subcommand)]
    command: Option<McpCommand>,
    /// Workspace of the session the bridge opens [default: the current directory]
    #[arg(long, conflicts_with = "session")]
    cwd: Option<PathBuf>,
    /// Permission mode of that session
    #[arg(long, value_enum, conflicts_with = "session")]
    mode: Option<Mode>,
    /// Serve an existing session instead (it stays open when the client goes)
    #[arg(long)]
    session: Option<String>,
    /// Allow rule for the session, e.g. 'Bash(npm test:*)' (repeatable)
    #[arg(long = "allow", value_name = "RULE", conflicts_with = "session")]
    allow: Vec<String>,
    /// Deny rule (repeatable)
    #[arg(long = "deny", value_name = "RULE", conflicts_with = "session")]
    deny: Vec<String>,
    /// Serve MCP over streamable HTTP at this address (e.g. 127.0.0.1:8765)
    /// instead of stdin/stdout: at http://ADDR/mcp, with a bearer token; a
    /// session per MCP session (unless --session)
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// With --http: allow an address other machines reach (needs TLS)
    #[arg(long, requires = "http")]
    listen_public: bool,
    /// With --http: TLS certificate chain (PEM)
    #[arg(long, value_name = "FILE", requires_all = ["http", "http_tls_key"])]
    http_tls_cert: Option<PathBuf>,
    /// With --http: TLS private key (PEM)
    #[arg(long, value_name = "FILE", requires_all = ["http", "http_tls_cert"])]
    http_tls_key: Option<PathBuf>,
    /// With --http: where the bearer token is kept [default:
    /// $XDG_CONFIG_HOME/agentd/mcp-http-token]; made (0600) when missing
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// With --http: a host name clients use to reach this server, besides
    /// loopback (repeatable; checked against Host and Origin)
    #[arg(long = "allow-host", value_name = "NAME", requires = "http")]
    allow_host: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// List MCP servers: state, tool count, sessions, last error
    List {
        /// Only this session's servers (with where each entry came from,
        /// and the entries it could not use)
        #[arg(long)]
        session: Option<String>,
    },
    /// List the prompts of a session's MCP servers (Claude Code's
    /// /mcp__server__prompt slash commands)
    Prompts {
        /// The session
        #[arg(long)]
        session: String,
    },
    /// Log in to an HTTP MCP server that asks for OAuth: opens the
    /// authorization address in the browser and waits for it to come back
    /// to a listener on 127.0.0.1; agentd keeps the tokens
    Login {
        /// The server (its entry's name)
        server: String,
        /// A session that uses it [default: one opened on --cwd for the
        /// login, then closed]
        #[arg(long)]
        session: Option<String>,
        /// The workspace whose servers to use without --session
        /// [default: the current directory]
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The port to listen on (for a client registered ahead with a fixed
        /// redirect address) [default: any free one]
        #[arg(long)]
        port: Option<u16>,
        /// Only print the address (no browser is started)
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget an HTTP MCP server's OAuth tokens
    Logout {
        /// The server (its entry's name)
        server: String,
        /// A session that uses it [default: one opened on --cwd, then closed]
        #[arg(long)]
        session: Option<String>,
        /// The workspace whose servers to use without --session
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
    /// Print one prompt's messages, its arguments filled in
    Prompt {
        /// The session
        #[arg(long)]
        session: String,
        /// The server (its entry's name)
        server: String,
        /// The prompt
        name: String,
        /// An argument (repeatable): name=value
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
    },
}

/// `session create`'s network options: the session's `sandbox.network`
/// (naming them names the session's sandbox options, so the user's
/// `autoAllowBashIfSandboxed` does not apply to it).
#[derive(Debug, clap::Args)]
struct NetworkFlags {
    /// Commands get no network at all
    #[arg(long, conflicts_with_all = ["allow_domains", "deny_domains", "allow_private_network"])]
    no_network: bool,
    /// The only domain commands may reach (repeatable; `*.` covers
    /// subdomains): nothing else passes and nothing asks
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    allow_domains: Vec<String>,
    /// A domain always refused (repeatable)
    #[arg(long = "deny-domain", value_name = "DOMAIN")]
    deny_domains: Vec<String>,
    /// Let commands reach loopback, private and link-local addresses
    /// through the gate (refused by default)
    #[arg(long)]
    allow_private_network: bool,
}

impl NetworkFlags {
    /// The session's sandbox options, when a flag names any.
    fn sandbox(&self) -> Option<agentd_client::protocol::session::SandboxOptions> {
        use agentd_client::protocol::session::{NetworkGate, SandboxNetwork, SandboxOptions};
        let network = if self.no_network {
            SandboxNetwork::Switch(false)
        } else if !self.allow_domains.is_empty() || !self.deny_domains.is_empty() || self.allow_private_network {
            SandboxNetwork::Gate(NetworkGate {
                allowed_domains: (!self.allow_domains.is_empty()).then(|| self.allow_domains.clone()),
                denied_domains: self.deny_domains.clone(),
                allow_private_network: self.allow_private_network,
            })
        } else {
            return None;
        };
        Some(SandboxOptions { network, ..SandboxOptions::default() })
    }
}

/// A permission mode as the CLI takes it: agentd's names in either
/// spelling (`accept_edits`, `accept-edits`) and Claude Code's
/// (`acceptEdits`, `bypassPermissions`).
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Default,
    #[value(alias = "accept_edits", alias = "acceptEdits")]
    AcceptEdits,
    Plan,
    #[value(alias = "bypassPermissions", alias = "bypass_permissions")]
    Bypass,
}

impl From<Mode> for PermissionMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Default => PermissionMode::Default,
            Mode::AcceptEdits => PermissionMode::AcceptEdits,
            Mode::Plan => PermissionMode::Plan,
            Mode::Bypass => PermissionMode::Bypass,
        }
    }
}

/// Runs the `agentctl` command with the process's arguments.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    quiet_on_closed_pipe();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentctl: cannot start: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    // These need no daemon.
    match &cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "agentctl", &mut out);
            return write_out(&out);
        }
        Command::Man { command } => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let page = match command {
                None => cmd,
                Some(name) => match cmd.find_subcommand(name) {
                    // Once per process, for the page's title.
                    Some(sub) => sub.clone().name(&*Box::leak(format!("agentctl-{name}").into_boxed_str())),
                    None => {
                        eprintln!("agentctl: no command {name:?} (agentctl --help lists them)");
                        return ExitCode::from(EXIT_USAGE);
                    }
                },
            };
            let mut out = Vec::new();
            if let Err(e) = clap_mangen::Man::new(page).render(&mut out) {
                eprintln!("agentctl: cannot write the manual page: {e}");
                return ExitCode::from(EXIT_ERROR);
            }
            // Each command's page is `agentctl man <command>`, not a page
            // of its own on the system.
            let text = String::from_utf8_lossy(&out);
            let text = local_command_references(&text);
            return write_out(text.as_bytes());
        }
        _ => {}
    }
    let endpoint = match endpoint(&cli) {
        Ok(endpoint) => endpoint,
        Err(msg) => {
            eprintln!("agentctl: {msg}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let _ = REMOTE.set(matches!(endpoint, Endpoint::Tls(_)));
    match runtime.block_on(run(&cli, &endpoint)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Client(ClientError::Connect { path, source })) => {
            if cli.json {
                print_json(&serde_json::json!({
                    "error": { "kind": "unreachable", "socket": path, "message": source.to_string() }
                }));
            }
            if let Endpoint::Tls(_) = endpoint {
                eprintln!("agentctl: cannot reach agentd at {} ({source})", path.display());
                return ExitCode::from(EXIT_UNREACHABLE);
            }
            eprintln!("agentctl: agentd is not running at {} ({source})", path.display());
            eprintln!("start it with one of:");
            if cli.socket.is_some() {
                eprintln!("  agentd --socket {} &", path.display());
            } else {
                eprintln!("  agentd &");
            }
            eprintln!("  systemctl --user enable --now agentd.socket   (units in systemd/, see README)");
            ExitCode::from(EXIT_UNREACHABLE)
        }
        Err(Failure::Client(e @ (ClientError::Timeout { .. } | ClientError::WrongPeer { .. }))) => {
            if cli.json {
                print_json(&serde_json::json!({ "error": { "kind": "unreachable", "message": e.to_string() } }));
            }
            eprintln!("agentctl: {e}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
        Err(Failure::Client(e @ ClientError::Disconnected { .. })) => {
            if cli.json {
                print_json(&serde_json::json!({ "error": { "kind": "disconnected", "message": e.to_string() } }));
            }
            eprintln!("agentctl: {e}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
        Err(Failure::Client(e)) => {
            if cli.json {
                let (code, data) = match &e {
                    ClientError::Rpc { code, data, .. } => (Some(*code), data.clone()),
                    _ => (None, None),
                };
                print_json(&serde_json::json!({
                    "error": { "kind": e.code().map(|c| c.name()).unwrap_or("transport"), "code": code, "message": e.to_string(), "data": data }
                }));
            }
            eprintln!("agentctl: {e}");
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Local(msg)) => {
            eprintln!("agentctl: {msg}");
            ExitCode::from(EXIT_ERROR)
        }
        Err(Failure::Usage(msg)) => {
            if cli.json {
                print_json(&serde_json::json!({ "error": { "kind": "usage", "message": msg } }));
            }
            eprintln!("agentctl: {msg}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(Failure::ToolFailed) => ExitCode::from(EXIT_TOOL_FAILED),
        Err(Failure::DaemonStopped) => ExitCode::from(EXIT_UNREACHABLE),
    }
}

/// Whether the daemon is on another machine (`--connect tls://`): a local
/// directory means nothing there.
static REMOTE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// The daemon to talk to: `--connect`'s TLS face, else the socket.
fn endpoint(cli: &Cli) -> Result<Endpoint, String> {
    let Some(url) = &cli.connect else {
        if cli.cert.is_some() || cli.key.is_some() || cli.ca.is_some() {
            return Err("--cert, --key and --ca go with --connect tls://HOST:PORT".into());
        }
        return Ok(Endpoint::Unix(cli.socket.clone().unwrap_or_else(agentd_client::default_socket_path)));
    };
    let (Some(cert), Some(key), Some(ca)) = (&cli.cert, &cli.key, &cli.ca) else {
        return Err(format!(
            "--connect {url} needs --cert, --key and --ca (or AGENTD_CLIENT_CERT, AGENTD_CLIENT_KEY, AGENTD_CA)"
        ));
    };
    TlsEndpoint::parse(url, cert.clone(), key.clone(), ca.clone())
        .map(Endpoint::Tls)
        .map_err(|e| format!("--connect: {e}"))
}

/// `agentctl status | head`: a reader that leaves ends agentctl quietly,
/// with 0 as `write_out` does (`println!` panics on the closed pipe: Rust
/// ignores SIGPIPE, which is kept ignored so that a socket the daemon
/// closes is an error, not a kill).
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

enum Failure {
    Client(ClientError),
    /// agentctl itself failed (a signal it cannot listen for, a prompt).
    Local(String),
    /// What agentctl was given is wrong (an input that is not JSON, a turn
    /// file it cannot read): exit 2, as for a bad command line.
    Usage(String),
    /// The tool ran and its result is an error.
    ToolFailed,
    /// The daemon stopped mid-call and said so in the call's result
    /// (already printed): exit 3, as when the connection closed first.
    DaemonStopped,
}

/// The result (and its one-line render) of a call the daemon's clean stop
/// ended (README, Restarts).
const DAEMON_STOPPED: &str = "interrupted: the daemon stopped";

/// Writes `bytes` to stdout; a reader that went away (`| head`) ends it
/// quietly.
fn write_out(bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentctl: writing: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The manual page with its references to per-command pages
/// (`agentctl\-call(1)`) as what they are here: `agentctl man call`.
fn local_command_references(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for line in page.lines() {
        match line.strip_prefix("agentctl\\-").and_then(|rest| rest.strip_suffix("(1)")) {
            Some(name) if !name.contains(' ') => out.push_str(&format!("agentctl {name} (agentctl man {name})")),
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The sandbox's level in a line: `full`, `partial (missing: namespaces)`,
/// `none (why)`.
fn sandbox_line(status: &agentd_protocol::methods::SandboxStatus) -> String {
    use agentd_protocol::methods::SandboxLevel;
    match status.level {
        SandboxLevel::Full => "full".to_owned(),
        SandboxLevel::Partial => {
            let missing: Vec<&str> = status.walls.iter().filter(|w| !w.applied).map(|w| w.name.as_str()).collect();
            format!("partial (missing: {})", missing.join(", "))
        }
        SandboxLevel::None => format!("none ({})", status.reason.as_deref().unwrap_or("nothing is confined")),
    }
}

async fn run(cli: &Cli, endpoint: &Endpoint) -> Result<(), Failure> {
    let client = Client::connect_endpoint(endpoint, REQUEST_TIMEOUT).await?;
    match &cli.command {
        Command::Status { require_sandbox } => {
            let info = client.daemon_info().await?;
            let sandbox = sandbox_line(&info.sandbox);
            if cli.json {
                print_json(&info);
            } else {
                let activated = if info.socket_activated { " (socket-activated)" } else { "" };
                println!(
                    "agentd {} (protocol {}), pid {}, up {}",
                    info.version,
                    info.protocol_version,
                    info.pid,
                    human_duration(info.uptime_ms)
                );
                println!("socket:      {}{activated}", info.socket.as_deref().unwrap_or("?"));
                if let Some(tls) = &info.listen_tls {
                    println!("tls:         {tls} (mutual TLS)");
                }
                println!("state:       {}", info.state_dir);
                println!("sessions:    {}", info.sessions);
                println!("connections: {} ({} since start)", info.connections, info.connections_total);
                println!("sandbox:     {sandbox}");
                if !info.features.is_empty() {
                    println!("features:    {}", info.features.join(", "));
                }
                for note in &info.notes {
                    println!("note:        {note}");
                }
            }
            if *require_sandbox && info.sandbox.level != agentd_protocol::methods::SandboxLevel::Full {
                return Err(Failure::Local(format!("--require-sandbox: the sandbox is {sandbox}")));
            }
        }
        Command::Session(cmd) => session(cli, &client, cmd).await?,
        Command::Cron(cmd) => cron(cli.json, &client, cmd).await?,
        Command::Top { follow } => top(cli.json, &client, *follow).await?,
        Command::Mcp(McpArgs { command: Some(McpCommand::List { session }), .. }) => {
            mcp_list(cli, &client, session.as_deref()).await?
        }
        Command::Mcp(McpArgs { command: Some(McpCommand::Prompts { session }), .. }) => {
            mcp_prompts(cli, &client, session).await?
        }
        Command::Mcp(McpArgs { command: Some(McpCommand::Prompt { session, server, name, args }), .. }) => {
            mcp_prompt(cli, &client, session, server, name, args).await?
        }
        Command::Mcp(McpArgs {
            command: Some(McpCommand::Login { server, session, cwd, port, no_browser }), ..
        }) => {
            let login = mcp::Login { server, port: *port, browser: !no_browser };
            mcp::with_session(&client, session.as_deref(), cwd.as_deref(), |sid| {
                mcp::mcp_login(cli, &client, sid, &login)
            })
            .await?
        }
        Command::Mcp(McpArgs { command: Some(McpCommand::Logout { server, session, cwd }), .. }) => {
            mcp::with_session(&client, session.as_deref(), cwd.as_deref(), |sid| mcp::mcp_logout(&client, sid, server))
                .await?
        }
        Command::Mcp(args) => mcp_serve(client, endpoint, args).await?,
        Command::Tools { session, cwd, all } => tools(cli, &client, session.as_deref(), cwd.as_deref(), *all).await?,
        Command::Call { tool, input, args, session, new_session } => {
            let input = call_input(input.as_deref(), args)?;
            let mut signals = Interrupts::listen()?;
            // A tool call may run for minutes: wait as long as the daemon lets it.
            let client = Client::connect_endpoint(endpoint, agentd_client::DEFAULT_REQUEST_TIMEOUT).await?;
            // On a terminal, what the call reports while it runs goes to
            // stderr (its result, as ever, to stdout).
            let show = !cli.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
            let result = match session {
                Some(id) => call_showing_progress(&client, id, tool, input, show, &mut signals).await?,
                None => {
                    let (client, signals) = (&client, &mut signals);
                    let call = |sid: String| async move {
                        call_showing_progress(client, &sid, tool, input, show, signals).await
                    };
                    in_temporary_session(client, new_session.params()?, call).await?
                }
            };
            if cli.json {
                print_json(&result);
            } else {
                for block in &result.content {
                    match block {
                        agentd_client::protocol::tools::ContentBlock::Text { text } => print!("{text}"),
                        agentd_client::protocol::tools::ContentBlock::Image { source } => {
                            println!("[image {} ({} bytes of base64)]", source.media_type, source.data.len())
                        }
                    }
                }
                eprintln!("{}", result.render);
            }
            if result.is_error && result.render == DAEMON_STOPPED {
                return Err(Failure::DaemonStopped);
            }
            if result.is_error {
                return Err(Failure::ToolFailed);
            }
        }
        Command::Run { file, session, new_session, yes } => {
            let uses = read_tool_uses(file)?;
            // Asked on the terminal: stdin when it is one and not the
            // turn's input, else /dev/tty when there is one.
            let answer = match (*yes, Asker::find(file == "-")) {
                (true, _) => Answering::Yes,
                (false, Some(asker)) => Answering::Prompt(asker),
                (false, None) => Answering::Deny,
            };
            let client = Client::connect_endpoint(endpoint, agentd_client::DEFAULT_REQUEST_TIMEOUT).await?;
            let (sid, temporary) = match session {
                Some(id) => (id.clone(), false),
                None => (client.session_create(new_session.params()?).await?.session_id, true),
            };
            let outcome = run_turn(cli, &client, &sid, uses, answer).await;
            // The turn's failure first (a daemon that stopped cannot close
            // anything), then the close's.
            let closed = match temporary {
                true if client.is_connected() => client.session_close(&sid).await.map(drop),
                _ => Ok(()),
            };
            let failed = outcome?;
            closed?;
            if failed {
                return Err(Failure::ToolFailed);
            }
        }
        Command::Watch { session, after_seq } => {
            let mut events = client.stream(session, *after_seq).await?;
            let started = std::time::Instant::now();
            let mut first = true;
            loop {
                let next = if first && !cli.json {
                    first = false;
                    match tokio::time::timeout(std::time::Duration::from_secs(1), events.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            println!(
                                "session {session} is idle: nothing is running now; waiting for its next events (Ctrl+C stops)"
                            );
                            events.next().await
                        }
                    }
                } else {
                    events.next().await
                };
                let Some(event) = next else { break };
                let event = event.map_err(|e| Failure::Local(format!("bad event: {e}")))?;
                if cli.json {
                    print_json(&event);
                } else {
                    println!("{:>8.1}s {}", started.elapsed().as_secs_f64(), describe(&event, session));
                }
                if matches!(event.kind, EventKind::SessionClosed {}) {
                    return Ok(());
                }
            }
            // The stream ended with the session still open: if the daemon
            // went, say so (exit 3), as `call` and `run` do.
            client.daemon_info().await?;
        }
        Command::Completions { .. } | Command::Man { .. } => {}
        Command::Cancel { session, turn, tool } => {
            let params = agentd_client::protocol::turn::TurnCancelParams {
                session_id: session.clone(),
                turn_id: turn.clone(),
                tool_use_id: tool.clone(),
            };
            let result = client.call::<agentd_client::protocol::methods::TurnCancel>(params).await?;
            if cli.json {
                print_json(&result);
            } else if result.cancelled.is_empty() {
                println!("nothing was running");
            } else {
                println!("cancelled {}", result.cancelled.join(", "));
            }
        }
        Command::Trust { dir, yes, revoke } => {
            trust::trust(&client, cli.json, workspace(dir.as_deref())?, *yes, *revoke).await?
        }
        Command::Diff { session, turn } => changes::diff(&client, cli.json, session, turn.as_deref()).await?,
        Command::Rewind { session, turn, call, dry_run, force } => {
            changes::rewind(&client, cli.json, session, turn.as_deref(), call.as_deref(), *dry_run, *force).await?
        }
        Command::Respond { session, request_id, decision, rule, message, answers } => {
            let given = key_values(answers, |a| format!("--answer {a:?}: expected QUESTION=ANSWER"))?;
            let params = PermissionRespondParams {
                session_id: session.clone(),
                request_id: request_id.clone(),
                decision: match decision {
                    Decision::Allow => PermissionDecision::Allow,
                    Decision::Deny => PermissionDecision::Deny,
                    Decision::AllowAlways => PermissionDecision::AllowAlways,
                },
                rule: rule.clone(),
                message: message.clone(),
                answers: (!given.is_empty()).then_some(given),
                no_user: false,
            };
            let result = client.call::<agentd_client::protocol::methods::PermissionRespond>(params).await?;
            if cli.json {
                print_json(&result);
            } else if let Some(rule) = &result.rule_added {
                println!("answered {}; added the session rule {rule}", result.request_id);
            } else {
                println!("answered {}", result.request_id);
            }
        }
        Command::RespondAgent { session, request_id, result, error } => {
            let params = agentd_client::protocol::agent::AgentRespondParams {
                session_id: session.clone(),
                request_id: request_id.clone(),
                result: result.clone(),
                is_error: error.then_some(true),
            };
            let answered = client.call::<agentd_client::protocol::methods::AgentRespond>(params).await?;
            if cli.json {
                print_json(&answered);
            } else {
                println!("answered {}", answered.request_id);
            }
        }
    }
    Ok(())
}

/// A value as its wire name (`running`, `project`).
fn wire<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn mode_name(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Default => "default",
        PermissionMode::AcceptEdits => "accept_edits",
        PermissionMode::Plan => "plan",
        PermissionMode::Bypass => "bypass",
    }
}

fn print_json(value: &impl Serialize) {
    match serde_json::to_string(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("agentctl: cannot print JSON: {e}"),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_files_in_every_shape() {
        let lines = "{\"name\": \"Read\", \"input\": {\"file_path\": \"a\"}}\n\n{\"name\": \"Glob\", \"id\": \"g\"}\n";
        let uses = parse_tool_uses(lines, "x").unwrap();
        assert_eq!(uses.iter().map(|u| u.id.as_str()).collect::<Vec<_>>(), ["t1-x", "g"]);
        let array = "[{\"type\": \"tool_use\", \"id\": \"toolu_1\", \"name\": \"Bash\", \"input\": {\"command\": \"ls\"}},\n {\"name\": \"Read\", \"input\": {}}]";
        let uses = parse_tool_uses(array, "x").unwrap();
        assert_eq!((uses[0].id.as_str(), uses[1].id.as_str()), ("toolu_1", "t2-x"));
        let pretty = "{\n  \"type\": \"tool_use\",\n  \"name\": \"Read\",\n  \"input\": {\"file_path\": \"a\"}\n}\n";
        assert_eq!(parse_tool_uses(pretty, "x").unwrap()[0].name, "Read");
        for (bad, says) in [
            ("\"just a string\"", "block 1: not a tool_use block"),
            ("[1, 2]", "block 1: not a tool_use block"),
            ("{\"name\": \"Read\"}\nnot json", "line 2: not JSON"),
            ("[{\"name\": \"Read\"}", "not one JSON array"),
            ("{\"type\": \"text\", \"text\": \"hi\"}", "of type \"text\""),
            ("{\"nme\": \"Read\"}", "block 1: not a tool_use block"),
            ("", "no tool_use blocks"),
            ("[]", "no tool_use blocks"),
        ] {
            let err = parse_tool_uses(bad, "x").unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn modes_in_every_spelling() {
        for (spelled, want) in [
            ("accept-edits", PermissionMode::AcceptEdits),
            ("accept_edits", PermissionMode::AcceptEdits),
            ("acceptEdits", PermissionMode::AcceptEdits),
            ("bypass", PermissionMode::Bypass),
            ("bypassPermissions", PermissionMode::Bypass),
            ("plan", PermissionMode::Plan),
        ] {
            let mode = Mode::from_str(spelled, false).unwrap_or_else(|e| panic!("{spelled}: {e}"));
            assert_eq!(PermissionMode::from(mode), want, "{spelled}");
            let wire: PermissionMode = serde_json::from_value(serde_json::json!(spelled)).unwrap();
            assert_eq!(wire, want, "the protocol takes {spelled} too");
        }
    }
}
