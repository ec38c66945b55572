//! The `agentd` command line: parses arguments, sets up logging and signals,
//! and hands over to [`crate::run`]. The binary's `main` is one call to
//! [`main`]; the e2e tests build the same function into a binary of their own
//! so `cargo test` always runs the current code.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// agentd: the tool system of an AI coding agent, as a daemon on a Unix socket.
#[derive(Debug, Parser)]
#[command(name = "agentd", version, about, long_about = None)]
struct Args {
    /// Socket to listen on [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]
    #[arg(long, env = "AGENTD_SOCKET")]
    socket: Option<PathBuf>,
    /// Directory for persistent state [default: $XDG_STATE_HOME/agentd]
    #[arg(long, env = "AGENTD_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Longest request line accepted, in bytes
    #[arg(long, env = "AGENTD_MAX_REQUEST_BYTES", default_value_t = crate::config::DEFAULT_MAX_REQUEST_BYTES)]
    max_request_bytes: usize,
    /// Tool calls a session runs at once unless it says otherwise
    #[arg(long, env = "AGENTD_MAX_TOOL_CONCURRENCY", default_value_t = crate::config::DEFAULT_MAX_TOOL_CONCURRENCY,
          value_parser = clap::value_parser!(u32).range(1..=crate::config::MAX_TOOL_CONCURRENCY_LIMIT as i64))]
    max_tool_concurrency: u32,
    /// Seconds shutdown waits for cancelled work to finish
    #[arg(long, env = "AGENTD_SHUTDOWN_GRACE", default_value_t = 10)]
    shutdown_grace: u64,
    /// Ignore a socket passed by systemd and bind the path instead
    #[arg(long)]
    no_socket_activation: bool,
    /// The sandbox helper executable [default: agentd-sandbox beside agentd]
    #[arg(long, env = "AGENTD_SANDBOX_HELPER")]
    sandbox_helper: Option<PathBuf>,
    /// Act as if the kernel had no Landlock: Bash commands run unconfined,
    /// and those that would run without asking in the read-only sandbox ask
    #[arg(long, env = "AGENTD_NO_SANDBOX", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false)]
    no_sandbox: bool,
    /// Refuse to start unless the sandbox is whole (`daemon/info`'s
    /// `sandbox.level` is `full`): one line says which wall is missing and
    /// what provides it (a readiness guarantee in a container)
    #[arg(long, env = "AGENTD_REQUIRE_SANDBOX", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false)]
    require_sandbox: bool,
    /// Act as if the kernel could not apply these walls of the sandbox
    /// (filesystem, syscalls, namespaces, unix_sockets, network;
    /// comma-separated): to see what a container's conditions do
    #[arg(long, env = "AGENTD_SANDBOX_WITHOUT", value_delimiter = ',', value_name = "WALL")]
    sandbox_without: Vec<String>,
    /// The most memory one Bash call's processes may use together (512M,
    /// 2G): past it the kernel kills a process of the call, and the result
    /// says so. Held by a cgroup per call where the daemon can make one
    /// (`agentctl status` says whether it holds)
    #[arg(long, env = "AGENTD_CALL_MEMORY_LIMIT", value_name = "SIZE", value_parser = crate::process::cgroup::parse_size)]
    call_memory_limit: Option<u64>,
    /// Keep nothing across restarts: sessions and their events live in
    /// memory only
    #[arg(long, env = "AGENTD_EPHEMERAL", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false)]
    ephemeral: bool,
    /// Obey every workspace's settings, .mcp.json, skills and agent
    /// definitions without the user's approval of their content (for
    /// unattended use on workspaces that are the user's own)
    #[arg(long, env = "AGENTD_TRUST_PROJECT_FILES", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false)]
    trust_project_files: bool,
    /// Sessions the store keeps; at start the least recently used beyond this are removed
    #[arg(long, env = "AGENTD_STORE_MAX_SESSIONS", default_value_t = 1000)]
    store_max_sessions: usize,
    /// Bytes of one session's event log before it is rewritten with only what replay keeps
    #[arg(long, env = "AGENTD_STORE_MAX_LOG_BYTES", default_value_t = 64 * 1024 * 1024)]
    store_max_log_bytes: u64,
    /// Days a session may stay untouched before the store removes it at start
    #[arg(long, env = "AGENTD_STORE_MAX_IDLE_DAYS", default_value_t = 30)]
    store_max_idle_days: u64,
    /// A SearXNG instance the WebSearch tool asks (its JSON API); without
    /// one (here or `webSearch.searxngUrl` in the user's settings) WebSearch
    /// is not offered
    #[arg(long, env = "AGENTD_WEB_SEARCH_URL")]
    web_search_url: Option<String>,
    /// Pin a host name to an address for the network gate and WebFetch, as
    /// curl's --resolve does (split DNS; tests): HOST:ADDRESS, repeatable,
    /// or comma-separated in AGENTD_RESOLVE. The address still passes the
    /// guard against private addresses
    #[arg(long = "resolve", env = "AGENTD_RESOLVE", value_delimiter = ',', value_name = "HOST:ADDRESS")]
    resolve: Vec<String>,
    /// Also serve the protocol over TLS 1.3 on this TCP address (HOST:PORT),
    /// for a harness on another machine. Mutual TLS only: needs --tls-cert,
    /// --tls-key and --tls-client-ca
    #[arg(long, env = "AGENTD_LISTEN_TLS", value_name = "HOST:PORT", requires_all = ["tls_cert", "tls_key", "tls_client_ca"])]
    listen_tls: Option<String>,
    /// The server's certificate chain for --listen-tls (PEM)
    #[arg(long, env = "AGENTD_TLS_CERT", value_name = "FILE", requires = "listen_tls")]
    tls_cert: Option<PathBuf>,
    /// The server's private key for --listen-tls (PEM; not readable by others)
    #[arg(long, env = "AGENTD_TLS_KEY", value_name = "FILE", requires = "listen_tls")]
    tls_key: Option<PathBuf>,
    /// The CA that signs the certificates of the clients --listen-tls lets
    /// in (PEM); a client without one gets nothing
    #[arg(long, env = "AGENTD_TLS_CLIENT_CA", value_name = "FILE", requires = "listen_tls")]
    tls_client_ca: Option<PathBuf>,
    /// Serve the signals a fleet scales on (sessions, calls, jobs,
    /// questions waiting, call durations by tool, memory, descriptors) in
    /// OpenMetrics text at http://ADDR/metrics; a loopback address only
    #[arg(long, env = "AGENTD_METRICS", value_name = "HOST:PORT")]
    metrics: Option<std::net::SocketAddr>,
}

/// Runs the `agentd` command with the process's arguments.
pub fn main() -> std::process::ExitCode {
    let args = Args::parse();
    init_tracing();
    match start(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("agentd: {e:#}\n"));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Allocations from this size are mapped and unmapped whole.
#[cfg(target_env = "gnu")]
const MMAP_THRESHOLD: nix::libc::c_int = 128 << 10;

/// glibc's allocator kept for a long-lived daemon: a fixed threshold for
/// mapped allocations (by default it rises after each large free, up to
/// 32 MiB, and later large buffers stay in the heap for good), free memory
/// at the heap's top given back from that size, and one arena per core
/// (by default up to 8 per core: the blocking pool's threads, started and
/// ended as files are read, spread the heap over arenas that each keep
/// their free pages). Measured: `bench calls`, RSS growth between 20,000
/// and 80,000 Reads in one session about 160 KiB per 10,000 calls without
/// the thresholds, 65 with; `bench soak` (200 mixed calls a second),
/// +171 KiB/min over the second half with the default arenas, +34 with
/// one per core.
#[allow(unsafe_code)] // mallopt(3), which nix does not wrap
fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
        let arenas = nix::libc::c_int::try_from(cores).unwrap_or(2);
        for (param, value) in [
            (nix::libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (nix::libc::M_TRIM_THRESHOLD, MMAP_THRESHOLD),
            (nix::libc::M_ARENA_MAX, arenas),
        ] {
            // SAFETY: mallopt only sets a parameter of glibc's allocator;
            // it is called before any other thread exists.
            if unsafe { nix::libc::mallopt(param, value) } != 1 {
                tracing::debug!("mallopt({param}) refused");
            }
        }
    }
}

fn start(args: Args) -> anyhow::Result<()> {
    tune_allocator();
    // Out of reach of `ptrace`, /proc/PID/mem and `pidfd_getfd` of the
    // user's other processes: a command run with the sandbox off would
    // otherwise take the daemon's descriptors (its socket, the TLS key)
    // and memory. (No core dumps either.)
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("cannot make the daemon non-dumpable: {e}");
    }
    let socket_path = args.socket.unwrap_or_else(crate::config::default_socket_path);
    let socket = if args.no_socket_activation {
        crate::SocketConfig::Path(socket_path)
    } else {
        crate::SocketConfig::ActivatedOr(socket_path)
    };
    let state_dir = args.state_dir.unwrap_or_else(crate::config::default_state_dir);
    let mut config = crate::Config::new(socket, state_dir);
    config.max_request_bytes = args.max_request_bytes;
    config.max_tool_concurrency = args.max_tool_concurrency;
    config.shutdown_grace = std::time::Duration::from_secs(args.shutdown_grace);
    if let Some(bad) = args.sandbox_without.iter().find(|w| !crate::sandbox::WALLS.contains(&w.as_str())) {
        anyhow::bail!("--sandbox-without: no wall {bad:?}; the walls are {}", crate::sandbox::WALLS.join(", "));
    }
    config.sandbox = crate::sandbox::SandboxConfig {
        helper: args.sandbox_helper,
        disabled: args.no_sandbox,
        without: args.sandbox_without,
        require: args.require_sandbox,
        memory_limit: args.call_memory_limit,
    };
    config.persist = !args.ephemeral;
    config.trust_project_files = args.trust_project_files;
    config.metrics = args.metrics;
    if let (Some(listen), Some(cert), Some(key), Some(client_ca)) =
        (args.listen_tls, args.tls_cert, args.tls_key, args.tls_client_ca)
    {
        config.tls = Some(crate::server::tls::TlsConfig { listen, cert, key, client_ca });
    }
    config.store_limits = crate::store::disk::StoreLimits {
        max_sessions: args.store_max_sessions.max(1),
        max_log_bytes: args.store_max_log_bytes.max(64 * 1024),
        max_idle: std::time::Duration::from_secs(args.store_max_idle_days.saturating_mul(24 * 3600)),
        ..Default::default()
    };

    config.web =
        std::sync::Arc::new(crate::web::Web::new(&args.resolve, args.web_search_url).map_err(anyhow::Error::msg)?);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("agentd")
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        spawn_signal_handler(shutdown.clone())?;
        crate::run(config, shutdown).await.map_err(anyhow::Error::from)
    })
}

/// SIGTERM, SIGINT or SIGHUP (a closed terminal) starts a clean shutdown
/// (sessions are kept for the next start). A second one exits at once, but
/// not before every command's process tree is killed and the socket file
/// removed. SIGXFSZ is caught (and nothing done), so a file-size limit
/// fails the write that hit it instead of killing the daemon (Rust already
/// ignores SIGPIPE, and gives it back to what it spawns).
fn spawn_signal_handler(shutdown: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    catch_sigxfsz();
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    tokio::spawn(async move {
        for round in 0.. {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = hup.recv() => "SIGHUP",
            };
            if round == 0 {
                tracing::info!(signal = name, "shutdown requested");
                shutdown.cancel();
            } else {
                tracing::warn!(signal = name, "second signal: killing every command and exiting without waiting");
                crate::process::ledger::kill_all();
                crate::server::listen::emergency_remove();
                std::process::exit(130);
            }
        }
    });
    Ok(())
}

#[allow(unsafe_code)]
fn catch_sigxfsz() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    // Caught by a handler that does nothing rather than ignored: an
    // ignored signal stays ignored across `exec` in everything the daemon
    // spawns (`posix_spawn` keeps it cheap, so no `pre_exec` resets it),
    // while a caught one is the default again there.
    extern "C" fn nothing(_: nix::libc::c_int) {}
    let action = SigAction::new(SigHandler::Handler(nothing), SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: the handler touches nothing.
    if let Err(e) = unsafe { sigaction(Signal::SIGXFSZ, &action) } {
        tracing::warn!("cannot catch SIGXFSZ: {e}");
    }
}

/// The log's sink: stderr until a write to it fails (the terminal closed,
/// a pipe whose reader left, a full disk), then nothing. Nothing waits on
/// it and nothing panics over it: shutdown never depends on logging.
struct LogSink;

static LOG_BROKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering;
        if !LOG_BROKEN.load(Ordering::Relaxed) && std::io::stderr().write_all(buf).is_err() {
            LOG_BROKEN.store(true, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogSink)
        // A failed write is not reported on stderr (that is what failed):
        // tracing-subscriber would `eprintln!`, which panics there.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // journald stamps every line itself.
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().init();
    } else {
        builder.init();
    }
}
