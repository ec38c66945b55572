//! The daemon's network face: the same NDJSON protocol as the socket, over
//! TLS 1.3 on TCP, for a harness on another machine (`--listen-tls`).
//!
//! **Invariant:** mutual TLS only. A client whose certificate does not chain
//! to `--tls-client-ca` fails the handshake and is sent nothing of the
//! protocol: no request is read before the handshake has verified it.
//!
//! The files (certificate, key, client CA) are read once at start-up and
//! hidden from every tool like the state directory (see
//! [`crate::fs::OffLimits`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::DaemonError;
use crate::sync::MutexExt;

/// How long a client has to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Handshakes in progress at once; a connection beyond them ends the
/// oldest one in progress (a real client finishes within a round trip, one
/// that opens connections and never speaks is the oldest), so idle
/// connections cannot pile up or lock clients out.
const MAX_HANDSHAKES: usize = 64;

/// Handshakes in progress at once from one address (an IPv6 address's /64,
/// which one host may hold whole): a new one beyond them is refused.
const MAX_HANDSHAKES_PER_ADDRESS: usize = 4;

/// Idle time before TCP keepalive probes, their interval and count: a link
/// cut without a FIN (a laptop that sleeps, a dropped route) is noticed in
/// about a minute, and the connection's requests end as for a client that
/// left.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_PROBES: u32 = 3;

pub use crate::config::TlsConfig;

/// A bound TLS listener, ready to accept.
pub(crate) struct TlsListener {
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    handshakes: Arc<Slots>,
    per_address: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    refusals: Arc<Refusals>,
    /// The address bound (the port when 0 was asked).
    pub(crate) local: SocketAddr,
}

fn bad(what: impl std::fmt::Display) -> DaemonError {
    DaemonError::Tls(what.to_string())
}

/// Reads the files, builds the server's TLS configuration and binds the
/// address. Every failure is one line naming the file or address.
pub(crate) fn bind(config: &TlsConfig) -> Result<TlsListener, DaemonError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    check_key_private(&config.key)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&config.cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| bad(format_args!("--tls-cert {}: {e}", config.cert.display())))?;
    if certs.is_empty() {
        return Err(bad(format_args!("--tls-cert {}: no certificate in it", config.cert.display())));
    }
    let key = PrivateKeyDer::from_pem_file(&config.key)
        .map_err(|e| bad(format_args!("--tls-key {}: {e}", config.key.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    let cas: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&config.client_ca)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| bad(format_args!("--tls-client-ca {}: {e}", config.client_ca.display())))?;
    for ca in cas {
        roots.add(ca).map_err(|e| bad(format_args!("--tls-client-ca {}: {e}", config.client_ca.display())))?;
    }
    if roots.is_empty() {
        return Err(bad(format_args!("--tls-client-ca {}: no certificate in it", config.client_ca.display())));
    }
    // No anonymous clients: a client without a certificate fails the
    // handshake (rustls' default for this verifier).
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| bad(format_args!("--tls-client-ca {}: {e}", config.client_ca.display())))?;
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(bad)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| bad(format_args!("--tls-cert/--tls-key: {e}")))?;
    // No resumption: every connection shows a certificate the CA signed and
    // that is valid now (a resumed session would skip both).
    server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    server.send_tls13_tickets = 0;
    let std_listener = std::net::TcpListener::bind(&config.listen)
        .map_err(|e| bad(format_args!("cannot listen on {}: {e}", config.listen)))?;
    std_listener.set_nonblocking(true).map_err(|e| bad(format_args!("{}: {e}", config.listen)))?;
    let local = std_listener.local_addr().map_err(|e| bad(format_args!("{}: {e}", config.listen)))?;
    let listener = tokio::net::TcpListener::from_std(std_listener).map_err(|e| bad(format_args!("{local}: {e}")))?;
    if !local.ip().is_loopback() {
        tracing::info!(%local, "listening for TLS clients (mutual TLS) on a non-loopback address");
    } else {
        tracing::info!(%local, "listening for TLS clients (mutual TLS)");
    }
    Ok(TlsListener {
        listener,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
        handshakes: Arc::default(),
        per_address: Default::default(),
        refusals: Default::default(),
        local,
    })
}

/// A private key every user can read is refused: whoever reads it can
/// answer as the daemon. (One its group can read is let through: a
/// Kubernetes Secret volume with `fsGroup` gives its files to the pod's
/// group.)
fn check_key_private(key: &Path) -> Result<(), DaemonError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(key).map_err(|e| bad(format_args!("--tls-key {}: {e}", key.display())))?;
    if meta.mode() & 0o004 != 0 {
        return Err(bad(format_args!(
            "--tls-key {}: other users can read it (mode {:o}); chmod o-r it",
            key.display(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// A verified connection: the TLS stream and who is on the other end.
pub(crate) struct Accepted {
    pub(crate) stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    pub(crate) peer: SocketAddr,
}

impl TlsListener {
    /// Waits for the next TCP connection. The handshake is not done here
    /// (a slow client must not hold up the accept loop): call
    /// [`Pending::handshake`] in a task of its own.
    pub(crate) async fn accept(&self) -> std::io::Result<Pending> {
        let (tcp, peer) = self.listener.accept().await?;
        Ok(Pending {
            tcp,
            peer,
            acceptor: self.acceptor.clone(),
            handshakes: self.handshakes.clone(),
            per_address: self.per_address.clone(),
            refusals: self.refusals.clone(),
        })
    }
}

/// The next connection of `listener`; never, without one.
pub(crate) async fn accept(listener: Option<&TlsListener>) -> std::io::Result<Pending> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// A TCP connection whose handshake has not happened yet.
pub(crate) struct Pending {
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    handshakes: Arc<Slots>,
    per_address: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    refusals: Arc<Refusals>,
}

/// Handshakes refused for want of a slot, logged at most once a second
/// (a flood must not flood the log).
#[derive(Default)]
struct Refusals {
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

impl Refusals {
    fn note(&self, peer: SocketAddr, why: &str) {
        let mut state = self.state.locked();
        state.1 += 1;
        let now = std::time::Instant::now();
        if state.0.is_none_or(|last| now.duration_since(last) >= Duration::from_secs(1)) {
            tracing::warn!(%peer, refused = state.1, "TLS connection closed: {why}");
            *state = (Some(now), 0);
        }
    }
}

/// The handshakes in progress, oldest first, each with the token that ends
/// it.
#[derive(Default)]
struct Slots {
    pending: std::sync::Mutex<std::collections::VecDeque<(u64, tokio_util::sync::CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
}

impl Slots {
    /// A slot for a new handshake: when all are taken, the oldest
    /// handshake is ended to make room.
    fn take(self: &Arc<Self>) -> (Slot, Option<u64>) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = tokio_util::sync::CancellationToken::new();
        let mut pending = self.pending.locked();
        let evicted = if pending.len() >= MAX_HANDSHAKES {
            pending.pop_front().map(|(old, t)| {
                t.cancel();
                old
            })
        } else {
            None
        };
        pending.push_back((id, token.clone()));
        (Slot { slots: self.clone(), id, token }, evicted)
    }
}

/// One handshake's slot, given back when dropped.
struct Slot {
    slots: Arc<Slots>,
    id: u64,
    token: tokio_util::sync::CancellationToken,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut pending = self.slots.pending.locked();
        if let Some(i) = pending.iter().position(|(id, _)| *id == self.id) {
            pending.remove(i);
        }
    }
}

/// The address a handshake counts against: an IPv4 address (an
/// IPv4-mapped IPv6 one as itself), or an IPv6 address's /64.
fn address_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    use std::net::{IpAddr, Ipv6Addr};
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// A handshake slot of one address, given back when dropped.
struct AddressSlot {
    map: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    ip: std::net::IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut map = self.map.locked();
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

impl Pending {
    /// Runs the handshake within [`HANDSHAKE_TIMEOUT`]; `None` (logged)
    /// when the client has no certificate the CA signed, is too slow, or
    /// too many handshakes are in progress.
    pub(crate) async fn handshake(self) -> Option<Accepted> {
        let key = address_key(self.peer.ip());
        let _address_slot = {
            let mut map = self.per_address.locked();
            let n = map.entry(key).or_insert(0);
            if *n >= MAX_HANDSHAKES_PER_ADDRESS {
                drop(map);
                self.refusals.note(self.peer, "too many TLS handshakes in progress from this address");
                return None;
            }
            *n += 1;
            AddressSlot { map: self.per_address.clone(), ip: key }
        };
        let (slot, evicted) = self.handshakes.take();
        if evicted.is_some() {
            self.refusals.note(self.peer, "too many TLS handshakes in progress: the oldest was ended");
        }
        let _ = self.tcp.set_nodelay(true);
        keepalive(&self.tcp);
        let handshake = async {
            tokio::select! {
                done = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(self.tcp)) => Some(done),
                _ = slot.token.cancelled() => None,
            }
        };
        let done = handshake.await?;
        match done {
            Ok(Ok(stream)) => Some(Accepted { stream, peer: self.peer }),
            Ok(Err(e)) => {
                self.refusals.note(self.peer, &format!("TLS handshake refused: {e}"));
                None
            }
            Err(_) => {
                self.refusals
                    .note(self.peer, &format!("TLS handshake not done within {} s", HANDSHAKE_TIMEOUT.as_secs()));
                None
            }
        }
    }
}

fn keepalive(tcp: &tokio::net::TcpStream) {
    use nix::sys::socket::{setsockopt, sockopt};
    let set = || -> nix::Result<()> {
        setsockopt(tcp, sockopt::KeepAlive, &true)?;
        setsockopt(tcp, sockopt::TcpKeepIdle, &(KEEPALIVE_IDLE.as_secs() as u32))?;
        setsockopt(tcp, sockopt::TcpKeepInterval, &(KEEPALIVE_INTERVAL.as_secs() as u32))?;
        setsockopt(tcp, sockopt::TcpKeepCount, &KEEPALIVE_PROBES)
    };
    if let Err(e) = set() {
        tracing::debug!("cannot set TCP keepalive: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_ends_the_oldest_handshake_and_addresses_count_by_host() {
        let slots = Arc::new(Slots::default());
        let mut held: Vec<Slot> = (0..MAX_HANDSHAKES).map(|_| slots.take().0).collect();
        assert!(held.iter().all(|s| !s.token.is_cancelled()));
        let (newest, evicted) = slots.take();
        assert_eq!(evicted, Some(held[0].id), "the oldest makes room");
        assert!(held[0].token.is_cancelled() && !newest.token.is_cancelled());
        // Ended slots give their place back; nothing is counted twice.
        held.drain(..10);
        assert_eq!(slots.pending.lock().unwrap().len(), MAX_HANDSHAKES - 9);
        drop(newest);
        drop(held);
        assert!(slots.pending.lock().unwrap().is_empty());

        let v6 = |s: &str| address_key(s.parse().unwrap());
        assert_eq!(v6("2001:db8:1:2:aaaa::1"), v6("2001:db8:1:2:ffff::9"), "one /64, one host");
        assert_ne!(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
        assert_eq!(v6("::ffff:192.0.2.7"), v6("192.0.2.7"), "a mapped address is its IPv4 one");
        assert_ne!(v6("127.0.0.2"), v6("127.0.0.3"));
    }
}
