//! The network gate, the daemon's half (the helper's is [`super::netns`]):
//! a confined command's only way off its network namespace. Each
//! connection it makes to the endpoint arrives here as a descriptor, on the
//! call's own control socket, and speaks one of two proxy protocols (told
//! apart by its first byte): HTTP (`CONNECT host:port` for TLS and
//! anything else, or a plain request with an absolute `http://` URL) or
//! SOCKS5 (`CONNECT` only, names resolved here: `socks5h`).
//!
//! For each connection the host is made canonical (lower case, IDNA,
//! an IP literal in its one spelling: decimal, octal, hex and IPv4 in IPv6
//! all become the address), then [`decide`] looks at the rules:
//! the session's denied domains, `WebFetch(domain:…)` rules and the
//! settings' `sandbox.network` lists, the session's closed list, what the
//! user granted, bypass mode. A domain none of them covers asks the user
//! (`permission/request` with `kind: network`), once per host and command.
//! Allowed names are resolved here (pins first), every address passes the
//! SSRF guard WebFetch uses unless the session allows the private network,
//! and the connection goes to the address checked — never to the name
//! again, so an answer that changes between check and connect gains
//! nothing.
//!
//! Bounded: [`CALL_CONNECTIONS`] open connections per command and
//! [`SESSION_CONNECTIONS`] per session, a head of at most [`MAX_HEAD`] bytes
//! within [`HEAD_TIMEOUT`] (slowloris), [`MAX_ASKS`] questions per command,
//! and relay buffers of [`RELAY_BUFFER`] bytes each way.

pub mod line;
mod relay;
mod wire;

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_protocol::session::{NetworkAccess, SandboxOptions, SandboxProfile};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::permission::rules::{Facts, RuleKind, RuleSet, canonical_host, domain_covers, domain_rule};
use crate::sync::MutexExt;
use line::{CallChannel, MidCallAsk, NetworkNote};
use relay::{Audit, SPLICE_RELAYS, relay};
use wire::{absolute_http, authority, forward_head, one_line, parse_head, socks_reply};

/// Open connections one command may have through the gate at once.
pub const CALL_CONNECTIONS: usize = 64;
/// Open connections all commands of one session may have at once.
pub const SESSION_CONNECTIONS: usize = 256;
/// Largest request head (request line and headers, or a SOCKS5 request).
pub const MAX_HEAD: usize = 64 * 1024;
/// Longest a client may take to send its whole head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Domains one command may ask about; after that, new ones are refused.
pub const MAX_ASKS: usize = 16;
/// Bytes buffered per direction of a relayed connection.
pub const RELAY_BUFFER: usize = 32 * 1024;
/// Refusals kept for the model's note.
const MAX_REFUSALS: usize = 16;

/// The network one call has: a pure function of its profile, the session's
/// choice and whether this kernel can gate.
pub fn network_access(profile: SandboxProfile, options: &SandboxOptions, gate_available: bool) -> NetworkAccess {
    use agentd_protocol::session::SandboxNetwork;
    match profile {
        SandboxProfile::Off => NetworkAccess::All,
        SandboxProfile::ReadOnly => NetworkAccess::None,
        SandboxProfile::WorkspaceWrite => match &options.network {
            SandboxNetwork::Switch(false) => NetworkAccess::None,
            SandboxNetwork::Switch(true) if options.network_allow_all => NetworkAccess::All,
            _ if gate_available => NetworkAccess::Gated,
            _ => NetworkAccess::None,
        },
    }
}

/// A session's own part of the decision.
#[derive(Debug, Clone, Default)]
pub struct GatePolicy {
    /// The session's closed list (`allowed_domains`), checked domains.
    pub closed: Option<Vec<String>>,
    /// The session's `denied_domains`, checked.
    pub denied: Vec<String>,
    /// Private and local addresses may be reached.
    pub allow_private: bool,
    /// Bypass mode: what would ask is allowed.
    pub bypass: bool,
    /// `strictAllowlist`: what would ask is refused.
    pub strict: bool,
}

impl GatePolicy {
    /// The policy of a session's options; domains that do not parse are
    /// left out (a closed list then allows less, never more) and returned
    /// as errors for `rule_errors`.
    pub fn from_options(options: &SandboxOptions, bypass: bool) -> (GatePolicy, Vec<String>) {
        let mut errors = Vec::new();
        let mut check = |list: &[String], key: &str| -> Vec<String> {
            list.iter()
                .filter_map(|d| domain_rule(d).map_err(|e| errors.push(format!("sandbox.network.{key}: {e}"))).ok())
                .collect()
        };
        let gate = options.network.gate();
        let policy = GatePolicy {
            closed: gate.and_then(|g| g.allowed_domains.as_deref()).map(|l| check(l, "allowed_domains")),
            denied: gate.map(|g| check(&g.denied_domains, "denied_domains")).unwrap_or_default(),
            allow_private: gate.is_some_and(|g| g.allow_private_network),
            bypass,
            strict: options.strict_allowlist,
        };
        (policy, errors)
    }
}

/// Why the session's own network lists refuse `host` (its
/// `denied_domains`, or a closed `allowed_domains` without it), if they
/// do: WebFetch keeps to them as the gate does.
pub fn session_refuses(host: &str, options: &SandboxOptions) -> Option<String> {
    let (policy, _) = GatePolicy::from_options(options, false);
    let host = canonical_host(host)?;
    if let Some(d) = policy.denied.iter().find(|d| domain_covers(d, &host)) {
        return Some(format!("the session's sandbox.network.denied_domains names {d}"));
    }
    match &policy.closed {
        Some(closed) if !closed.iter().any(|d| domain_covers(d, &host)) => {
            Some(format!("{host} is not in the session's sandbox.network.allowed_domains"))
        }
        _ => None,
    }
}

/// What the rules say about one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let through; what allowed it.
    Allow(String),
    /// Refused; why.
    Deny(String),
    /// Nothing covers it: ask the user; why.
    Ask(String),
}

/// Decides a canonical `host`: deny rules first (the session's, then the
/// settings'), then the session's closed list (nothing else counts with
/// one), then allow and ask rules, what the user granted, bypass mode;
/// else ask.
pub fn decide(host: &str, policy: &GatePolicy, rules: &RuleSet, granted: Option<String>) -> Verdict {
    // Strict: only rules allow; bypass mode and earlier grants do not.
    let open;
    let (policy, granted) = if policy.strict {
        open = GatePolicy { bypass: false, ..policy.clone() };
        (&open, None)
    } else {
        (policy, granted)
    };
    match decide_open(host, policy, rules, granted) {
        // `strictAllowlist`: nothing asks; what no rule allows is refused.
        Verdict::Ask(why) if policy.strict => {
            Verdict::Deny(format!("{why}, and sandbox.network.strictAllowlist refuses what no rule allows"))
        }
        verdict => verdict,
    }
}

/// [`decide`] before `strictAllowlist` turns a question into a refusal.
fn decide_open(host: &str, policy: &GatePolicy, rules: &RuleSet, granted: Option<String>) -> Verdict {
    if let Some(d) = policy.denied.iter().find(|d| domain_covers(d, host)) {
        return Verdict::Deny(format!("the session's sandbox.network.denied_domains names {d}"));
    }
    let rule = rules.decide("WebFetch", &Facts::Domain(host.to_owned()));
    if let Some(r) = rule.filter(|r| r.kind == RuleKind::Deny) {
        return Verdict::Deny(format!("the deny rule {} ({})", r.text, r.origin.source));
    }
    if let Some(closed) = &policy.closed {
        return match closed.iter().find(|d| domain_covers(d, host)) {
            Some(d) => Verdict::Allow(format!("the session's sandbox.network.allowed_domains names {d}")),
            None => Verdict::Deny(format!("{host} is not in the session's sandbox.network.allowed_domains")),
        };
    }
    if let Some(r) = rule.filter(|r| r.kind == RuleKind::Ask) {
        return Verdict::Ask(format!("the ask rule {}", r.text));
    }
    // Only domain rules count (a bare `WebFetch` allow rule is about the
    // WebFetch tool), and not a workspace's own: a cloned repository must
    // not open the network to its own commands (it could name where to
    // send what they find).
    let facts = Facts::Domain(host.to_owned());
    let allows = |r: &&crate::permission::rules::Rule| {
        r.kind == RuleKind::Allow && r.matches("WebFetch", &facts) == crate::permission::rules::Match::All
    };
    if let Some(r) = rules.rules.iter().filter(allows).find(|r| r.names_domain() && !r.workspace) {
        return Verdict::Allow(format!("{} ({})", r.text, r.origin.source));
    }
    let only_workspace = rules.rules.iter().filter(allows).find(|r| r.workspace);
    if let Some(text) = granted {
        return Verdict::Allow(format!("{text} (granted in this session)"));
    }
    if policy.bypass {
        return Verdict::Allow("bypass mode".to_owned());
    }
    match only_workspace {
        Some(r) => Verdict::Ask(format!(
            "only the workspace's own settings allow {host} ({}), and a repository cannot open the network to its \
             own commands",
            r.origin.source
        )),
        None => Verdict::Ask(format!("no rule allows {host}")),
    }
}

/// The user's answer about one host, once given: allowed (what said so)
/// or refused (why).
type Answer = tokio::sync::OnceCell<Result<String, String>>;

/// What one call's gate knows and keeps.
pub struct Shared {
    policy: GatePolicy,
    rules: Arc<RuleSet>,
    channel: Option<Arc<dyn CallChannel>>,
    /// The Bash input, shown with a question.
    input: serde_json::Value,
    /// Hosts the user was asked about in this command: allowed (what
    /// said so) or refused (why).
    asked: Mutex<HashMap<String, Arc<Answer>>>,
    refused: Mutex<Vec<String>>,
    call_slots: Arc<Semaphore>,
    session_slots: Arc<Semaphore>,
    /// The daemon's resolver (its `--resolve` pins).
    web: Arc<crate::web::Web>,
}

impl Shared {
    /// A call's gate state: its session's policy and rules, the line to ask
    /// on, the Bash input to show, and the session's connection slots.
    pub fn new(
        policy: GatePolicy,
        rules: Arc<RuleSet>,
        channel: Option<Arc<dyn CallChannel>>,
        input: serde_json::Value,
        session_slots: Arc<Semaphore>,
        web: Arc<crate::web::Web>,
    ) -> Shared {
        Shared {
            policy,
            rules,
            channel,
            input,
            asked: Mutex::new(HashMap::new()),
            refused: Mutex::new(Vec::new()),
            call_slots: Arc::new(Semaphore::new(CALL_CONNECTIONS)),
            session_slots,
            web,
        }
    }

    /// Waits (at most `limit`) until no connection of the call is open:
    /// once the command has ended, its connections end too, and their
    /// `sandbox/network` events then come before the call's result.
    pub async fn settle(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.call_slots.available_permits() < CALL_CONNECTIONS && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// What the gate refused, one line each, for the model.
    pub fn refusals(&self) -> Vec<String> {
        lock(&self.refused).clone()
    }

    fn note_refusal(&self, host: &str, port: u16, why: &str) {
        let mut line = format!("{host}:{port}: {why}");
        if line.len() > 600 {
            let mut end = 600;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
            line.push('…');
        }
        let mut refused = lock(&self.refused);
        if refused.len() < MAX_REFUSALS && !refused.contains(&line) {
            refused.push(line);
        }
    }

    fn note(&self, note: NetworkNote) {
        if let Some(c) = &self.channel {
            c.network(note);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.locked()
}

/// One call's gate: serves its connections until dropped.
pub struct Gate {
    shared: Arc<Shared>,
    cancel: CancellationToken,
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Gate {
    /// Starts the gate of one call; the descriptor returned is the
    /// helper's end of the control socket (its stdin).
    pub fn start(shared: Shared) -> std::io::Result<(Gate, OwnedFd)> {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .map_err(std::io::Error::from)?;
        // The helper's end blocks (its own sends say MSG_DONTWAIT).
        nix::fcntl::fcntl(&theirs, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()))
            .map_err(std::io::Error::from)?;
        // SAFETY: `ours` is owned here and by nothing else; the AsyncFd
        // owns it from now on (the I/O-safety condition of `register`).
        #[allow(unsafe_code)]
        let control = unsafe { tokio::io::unix::AsyncFd::register(ours) }.map_err(std::io::Error::from)?;
        let shared = Arc::new(shared);
        let cancel = CancellationToken::new();
        tokio::spawn(accept_loop(control, shared.clone(), cancel.clone()));
        Ok((Gate { shared, cancel }, theirs))
    }

    /// The call's gate state (its refusals).
    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

/// What one receive on the control socket gave.
enum Received {
    Conn(OwnedFd),
    Nothing,
    Closed,
}

fn receive(fd: &OwnedFd) -> std::io::Result<Received> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg =
        recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT)
            .map_err(std::io::Error::from)?;
    let mut got = None;
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for raw in fds {
                // SAFETY: the kernel just gave this process the descriptor.
                #[allow(unsafe_code)]
                let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
                got.get_or_insert(owned);
            }
        }
    }
    Ok(match got {
        Some(fd) => Received::Conn(fd),
        None if msg.bytes == 0 => Received::Closed,
        None => Received::Nothing,
    })
}

/// Most connections open through every gate of the daemon at once.
pub const DAEMON_CONNECTIONS: usize = 2048;

/// The daemon-wide slots: [`DAEMON_CONNECTIONS`], fewer where the open-file
/// limit would not hold them (a buffered relay holds two descriptors, a
/// spliced one six; 1,024 are kept for everything else), past which new
/// connections are closed at once.
static DAEMON_SLOTS: std::sync::LazyLock<Arc<Semaphore>> = std::sync::LazyLock::new(|| {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map_or(1024, |(s, _)| s);
    let spare = usize::try_from(soft).unwrap_or(usize::MAX).saturating_sub(1024 + 4 * SPLICE_RELAYS);
    Arc::new(Semaphore::new((spare / 2).clamp(16, DAEMON_CONNECTIONS)))
});

/// The slots one connection holds while it is open.
type Slots = (tokio::sync::OwnedSemaphorePermit, tokio::sync::OwnedSemaphorePermit, tokio::sync::OwnedSemaphorePermit);

/// Takes a connection's slots: the command's first (so one command cannot
/// take its session's), then the session's, then the daemon's; `Err` is
/// why not.
fn take_slots(shared: &Shared) -> Result<Slots, String> {
    let call = shared
        .call_slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| format!("this command already has {CALL_CONNECTIONS} connections open through the gate"))?;
    let session = shared
        .session_slots
        .clone()
        .try_acquire_owned()
        .map_err(|_| format!("this session already has {SESSION_CONNECTIONS} connections open through the gate"))?;
    let daemon = DAEMON_SLOTS
        .clone()
        .try_acquire_owned()
        .map_err(|_| "the daemon has as many connections open through its gates as it can hold".to_owned())?;
    Ok((call, session, daemon))
}

async fn accept_loop(control: tokio::io::unix::AsyncFd<OwnedFd>, shared: Arc<Shared>, cancel: CancellationToken) {
    loop {
        let mut ready = tokio::select! {
            r = control.readable() => match r { Ok(r) => r, Err(_) => return },
            _ = cancel.cancelled() => return,
        };
        match ready.try_io(|fd| receive(fd.get_ref())) {
            Ok(Ok(Received::Conn(fd))) => {
                // Over a limit: closed at once, before any task or read.
                let slots = match take_slots(&shared) {
                    Ok(s) => s,
                    Err(why) => {
                        shared.note_refusal("(a new connection)", 0, &why);
                        continue;
                    }
                };
                let std = std::net::TcpStream::from(fd);
                if std.set_nonblocking(true).is_err() {
                    continue;
                }
                let Ok(stream) = TcpStream::from_std(std) else { continue };
                let (shared, cancel) = (shared.clone(), cancel.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = serve(stream, &shared) => {}
                        _ = cancel.cancelled() => {}
                    }
                    drop(slots);
                });
            }
            Ok(Ok(Received::Nothing)) => {}
            Ok(Ok(Received::Closed)) => return,
            // The descriptor could not be taken (the daemon is out of
            // them: the kernel truncates the message): that connection is
            // lost, the gate keeps serving, after a pause.
            Ok(Err(_)) => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = cancel.cancelled() => return,
                }
            }
            Err(_would_block) => {}
        }
    }
}

/// Why a connection was not let through.
struct Refusal {
    /// HTTP status for the proxy's answer.
    status: u16,
    /// SOCKS5 reply code.
    socks: u8,
    /// In words.
    why: String,
}

impl Refusal {
    fn new(status: u16, socks: u8, why: impl Into<String>) -> Refusal {
        Refusal { status, socks, why: why.into() }
    }
}

/// Serves one connection (its slots taken): the proxy protocol, the
/// decision, the relay.
async fn serve(mut client: TcpStream, shared: &Shared) {
    let _ = client.set_nodelay(true);
    let mut head = Vec::with_capacity(1024);
    let socks = match tokio::time::timeout(HEAD_TIMEOUT, read_some(&mut client, &mut head)).await {
        Ok(Ok(true)) => head[0] == 5,
        _ => return,
    };
    if socks {
        socks5(client, head, shared).await;
    } else {
        http(client, head, shared).await;
    }
}

/// Reads what is there into `buf`; false at EOF.
async fn read_some(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

/// Reads until `buf` holds at least `n` bytes, within the head's limits.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Result<(), ()> {
    while buf.len() < n {
        if buf.len() > MAX_HEAD || !read_some(stream, buf).await.map_err(|_| ())? {
            return Err(());
        }
    }
    Ok(())
}

/// Decides a connection to `raw_host:port` and opens it: the canonical
/// host, the upstream stream and what allowed it.
async fn open(shared: &Shared, raw_host: &str, port: u16) -> Result<(String, TcpStream, String), (String, Refusal)> {
    if raw_host.len() > MAX_HOST {
        return Err((shown(raw_host), Refusal::new(400, 1, format!("a host name longer than {MAX_HOST} bytes"))));
    }
    let Some(host) = canonical_host(raw_host).filter(|h| !h.is_empty() && h.len() <= MAX_HOST) else {
        return Err((shown(raw_host), Refusal::new(400, 1, "not a host name or address")));
    };
    if port == 0 {
        return Err((host, Refusal::new(400, 1, "port 0")));
    }
    let granted = shared.channel.as_ref().and_then(|c| c.granted_domain(&host));
    let rule = match decide(&host, &shared.policy, &shared.rules, granted) {
        Verdict::Allow(rule) => rule,
        Verdict::Deny(why) => return Err((host, Refusal::new(403, 2, why))),
        Verdict::Ask(why) => match ask(shared, &host, port, &why).await {
            Ok(rule) => rule,
            Err(why) => return Err((host, Refusal::new(403, 2, why))),
        },
    };
    let how =
        "sandbox.network.allow_private_network in session/create, agentctl session create --allow-private-network";
    let addrs = match shared.web.resolve_checked(&host, port, shared.policy.allow_private, how).await {
        Ok(a) => a,
        Err(why) => return Err((host, Refusal::new(if why.contains("private") { 403 } else { 502 }, 4, why))),
    };
    let mut last = String::new();
    for addr in addrs.iter().take(4) {
        match tokio::time::timeout(crate::web::CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok((host, stream, rule));
            }
            Ok(Err(e)) => last = format!("connecting to {addr} failed: {e}"),
            Err(_) => last = format!("connecting to {addr} timed out"),
        }
    }
    let code = if last.contains("refused") { 5 } else { 4 };
    Err((host, Refusal::new(502, code, last)))
}

/// Longest host name (DNS's limit).
const MAX_HOST: usize = 253;

/// A host as the client sent it, safe to show: control characters and
/// quotes escaped, at most 80 characters.
fn shown(raw: &str) -> String {
    let mut out: String = raw.chars().take(80).flat_map(char::escape_debug).collect();
    if raw.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// Asks the user about `host` once per command: the first connection asks,
/// the others to that host wait for that answer (connections to other
/// hosts do not: each host has its own cell, the map's lock is never held
/// across the question).
async fn ask(shared: &Shared, host: &str, port: u16, why: &str) -> Result<String, String> {
    let cell = {
        let mut asked = lock(&shared.asked);
        match asked.get(host) {
            Some(cell) => cell.clone(),
            // Not kept: the answers stay at most MAX_ASKS.
            None if asked.len() >= MAX_ASKS => {
                return Err(format!(
                    "{why}, and this command already asked about {MAX_ASKS} domains (no more questions)"
                ));
            }
            None => asked.entry(host.to_owned()).or_default().clone(),
        }
    };
    cell.get_or_init(|| async {
        match &shared.channel {
            None => Err(format!("{why}, and nobody can be asked")),
            Some(channel) => channel
                .ask(MidCallAsk {
                    reason: format!("the command connects to {host}:{port}: {why}"),
                    suggestions: vec![format!("WebFetch(domain:{host})")],
                    input: shared.input.clone(),
                    kind: "network",
                    host: Some(host.to_owned()),
                    port: Some(port),
                    changes: Vec::new(),
                    diff: None,
                })
                .await
                .map(|()| "asked: the user allowed it".to_owned()),
        }
    })
    .await
    .clone()
}

/// What to add so the gate lets `host` through, for a refusal's text.
fn how_to_allow(host: &str) -> String {
    format!(
        "to allow it, add \"WebFetch(domain:{host})\" to permissions.allow, or \"{host}\" to \
         sandbox.network.allowedDomains, in a settings file (or answer the question allow_always)"
    )
}

fn refused(shared: &Shared, host: &str, port: u16, why: &str) {
    shared.note_refusal(host, port, why);
    shared.note(NetworkNote {
        host: host.to_owned(),
        port,
        allowed: false,
        rule: why.to_owned(),
        bytes_up: 0,
        bytes_down: 0,
    });
}

// ---- SOCKS5 ----

async fn socks5(mut client: TcpStream, mut buf: Vec<u8>, shared: &Shared) {
    let request = tokio::time::timeout(HEAD_TIMEOUT, async {
        fill(&mut client, &mut buf, 2).await?;
        let methods = buf[1] as usize;
        fill(&mut client, &mut buf, 2 + methods).await?;
        if !buf[2..2 + methods].contains(&0) {
            let _ = client.write_all(&[5, 0xff]).await;
            return Err(());
        }
        client.write_all(&[5, 0]).await.map_err(|_| ())?;
        let mut req: Vec<u8> = buf.split_off(2 + methods);
        fill(&mut client, &mut req, 5).await?;
        if req[0] != 5 {
            return Err(());
        }
        let (cmd, atyp) = (req[1], req[3]);
        let (host, at) = match atyp {
            1 => {
                fill(&mut client, &mut req, 10).await?;
                (std::net::Ipv4Addr::new(req[4], req[5], req[6], req[7]).to_string(), 8)
            }
            3 => {
                let len = req[4] as usize;
                fill(&mut client, &mut req, 5 + len + 2).await?;
                (String::from_utf8_lossy(&req[5..5 + len]).into_owned(), 5 + len)
            }
            4 => {
                fill(&mut client, &mut req, 22).await?;
                let octets: [u8; 16] = req[4..20].try_into().map_err(|_| ())?;
                (format!("[{}]", std::net::Ipv6Addr::from(octets)), 20)
            }
            _ => {
                let _ = client.write_all(&socks_reply(8)).await;
                return Err(());
            }
        };
        let port = u16::from_be_bytes([req[at], req[at + 1]]);
        Ok((cmd, host, port, req.split_off(at + 2)))
    })
    .await;
    let Ok(Ok((cmd, host, port, early))) = request else { return };
    if cmd != 1 {
        let _ = client.write_all(&socks_reply(7)).await;
        return;
    }
    match open(shared, &host, port).await {
        Err((host, r)) => {
            refused(shared, &host, port, &r.why);
            let _ = client.write_all(&socks_reply(r.socks)).await;
        }
        Ok((host, mut upstream, rule)) => {
            // Audited from here on, whatever happens next.
            let audit = Audit { shared, host, port, rule, up: AtomicU64::new(0), down: AtomicU64::new(0) };
            if client.write_all(&socks_reply(0)).await.is_err()
                || (!early.is_empty() && upstream.write_all(&early).await.is_err())
            {
                return;
            }
            audit.up.fetch_add(early.len() as u64, Relaxed);
            relay(&client, &upstream, &audit).await;
        }
    }
}

async fn http(mut client: TcpStream, mut buf: Vec<u8>, shared: &Shared) {
    let end = tokio::time::timeout(HEAD_TIMEOUT, async {
        loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                return Ok(at);
            }
            if buf.len() > MAX_HEAD {
                return Err(431);
            }
            match read_some(&mut client, &mut buf).await {
                Ok(true) => {}
                _ => return Err(0),
            }
        }
    })
    .await;
    let at = match end {
        Ok(Ok(at)) => at,
        Ok(Err(431)) => {
            return answer(&mut client, 431, "the request head is larger than the gate takes (64 KiB)").await;
        }
        Ok(Err(_)) => return,
        Err(_) => return answer(&mut client, 408, "the request head did not arrive in time").await,
    };
    let early = buf.split_off(at + 4);
    let head = match parse_head(&buf[..at]) {
        Ok(h) => h,
        Err(why) => return answer(&mut client, 400, &why).await,
    };
    let connect = head.method == "CONNECT";
    let target =
        if connect { authority(&head.target).map(|(h, p)| (h, p, String::new())) } else { absolute_http(&head.target) };
    let Some((host, port, path)) = target else {
        let why = if connect {
            format!("CONNECT needs host:port, not {:?}", one_line(&head.target))
        } else if head.target.starts_with('/') {
            "this is agentd's network gate, a proxy: send it absolute http:// URLs, or CONNECT for anything else"
                .to_owned()
        } else {
            format!("the gate forwards http:// URLs (CONNECT for the rest), not {:?}", one_line(&head.target))
        };
        return answer(&mut client, 400, &why).await;
    };
    match open(shared, &host, port).await {
        Err((host, r)) => {
            refused(shared, &host, port, &r.why);
            let text = if r.status == 403 { format!("{}; {}", r.why, how_to_allow(&host)) } else { r.why };
            answer(&mut client, r.status, &format!("agentd's network gate refused {host}:{port}: {text}")).await;
        }
        Ok((host, mut upstream, rule)) => {
            let forwarded = if connect { Vec::new() } else { forward_head(&head, &path, &host, port) };
            let audit = Audit { shared, host, port, rule, up: AtomicU64::new(0), down: AtomicU64::new(0) };
            let ready = if connect {
                client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_ok()
            } else {
                upstream.write_all(&forwarded).await.is_ok()
            } && (early.is_empty() || upstream.write_all(&early).await.is_ok());
            if ready {
                audit.up.fetch_add((forwarded.len() + early.len()) as u64, Relaxed);
                relay(&client, &upstream, &audit).await;
            }
        }
    }
}

/// Answers the client with `status` and `text`, and closes.
async fn answer(client: &mut TcpStream, status: u16, text: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Bad Gateway",
    };
    let body = format!("{text}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nX-Agentd-Gate: refused\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests;
