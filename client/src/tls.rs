//! The daemon's TLS face from the client's side (`tls://HOST:PORT`):
//! TLS 1.3, the daemon's certificate checked against the CA given (not the
//! system's), and this client's certificate and key presented (the daemon
//! lets in no client without one).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Where a daemon's TLS face is and the files to reach it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsEndpoint {
    /// Host name or address; the daemon's certificate must name it.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// This client's certificate chain (PEM), signed by the daemon's
    /// `--tls-client-ca`.
    pub cert: PathBuf,
    /// This client's private key (PEM).
    pub key: PathBuf,
    /// The CA that signed the daemon's certificate (PEM).
    pub ca: PathBuf,
}

impl TlsEndpoint {
    /// Parses `tls://HOST:PORT` (`tls://[::1]:7443` for an IPv6 address).
    pub fn parse(url: &str, cert: PathBuf, key: PathBuf, ca: PathBuf) -> Result<TlsEndpoint, String> {
        let rest = url.strip_prefix("tls://").ok_or_else(|| format!("{url:?} is not tls://HOST:PORT"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = rest.rsplit_once(':').ok_or_else(|| format!("{url:?} has no :PORT"))?;
        let port: u16 = port.parse().map_err(|_| format!("{url:?}: the port {port:?} is not a number"))?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if host.is_empty() || host.contains(['/', '@', '?', '#']) {
            return Err(format!("{url:?}: {host:?} is not a host"));
        }
        ServerName::try_from(host.to_owned()).map_err(|e| format!("{url:?}: {e}"))?;
        Ok(TlsEndpoint { host: host.to_owned(), port, cert, key, ca })
    }

    /// `tls://HOST:PORT`.
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("tls://[{}]:{}", self.host, self.port)
        } else {
            format!("tls://{}:{}", self.host, self.port)
        }
    }
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, what)
}

fn config(endpoint: &TlsEndpoint) -> std::io::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let read_certs = |path: &PathBuf, what: &str| -> std::io::Result<Vec<CertificateDer<'static>>> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| invalid(format!("{what} {}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(invalid(format!("{what} {}: no certificate in it", path.display())));
        }
        Ok(certs)
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in read_certs(&endpoint.ca, "--ca")? {
        roots.add(ca).map_err(|e| invalid(format!("--ca {}: {e}", endpoint.ca.display())))?;
    }
    let chain = read_certs(&endpoint.cert, "--cert")?;
    let key = PrivateKeyDer::from_pem_file(&endpoint.key)
        .map_err(|e| invalid(format!("--key {}: {e}", endpoint.key.display())))?;
    rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| invalid(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| invalid(format!("--cert/--key: {e}")))
}

/// Connects and completes the handshake.
pub(crate) async fn connect(
    endpoint: &TlsEndpoint,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config(endpoint)?));
    let name = ServerName::try_from(endpoint.host.clone()).map_err(|e| invalid(e.to_string()))?;
    let connecting = async {
        let tcp = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await?;
        tcp.set_nodelay(true)?;
        connector.connect(name, tcp).await
    };
    // A listener that accepts and never speaks must not hold the client.
    // Under TLS 1.3 the daemon judges this client's certificate after the
    // handshake: a refused one shows as a fatal alert on the first read
    // ("received fatal alert: UnknownCA"), which the caller's first call
    // (Client::connect_endpoint's) reports.
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(done) => done,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no TLS handshake within {} s", CONNECT_TIMEOUT.as_secs()),
        )),
    }
}

/// How long connecting and the handshake may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<TlsEndpoint, String> {
        TlsEndpoint::parse(url, "c".into(), "k".into(), "a".into())
    }

    #[test]
    fn urls_parse_to_host_and_port() {
        let e = parse("tls://devbox.example:7443").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("devbox.example", 7443));
        let e = parse("tls://[::1]:7443").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 7443));
        assert_eq!(e.url(), "tls://[::1]:7443");
        assert_eq!(parse("tls://127.0.0.1:1/").unwrap().url(), "tls://127.0.0.1:1");
        for bad in ["https://h:1", "tls://h", "tls://h:x", "tls://:1", "tls://u@h:1", "tls://h:70000", "tls://h/p:1"] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }
}
