//! Reading a sandbox helper's report.

/// The most of a helper's report that is read.
pub(super) const REPORT_MAX: usize = 64 * 1024;

/// Reads a helper's report into `bytes` until it is whole; pending for
/// ever at the end of the socket (the helper's exit then ends the wait).
/// Cancel-safe: what was read stays in `bytes`.
pub(super) async fn read_until_report(socket: &tokio::net::UnixStream, bytes: &mut Vec<u8>) {
    let mut chunk = [0u8; 4096];
    loop {
        if serde_json::from_slice::<agentd_sandbox::Report>(bytes).is_ok() {
            return;
        }
        if bytes.len() >= REPORT_MAX || socket.readable().await.is_err() {
            return std::future::pending().await;
        }
        match socket.try_read(&mut chunk) {
            Ok(0) => return std::future::pending().await,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::read_until_report;

    /// The report ends the wait only once it is whole, however it arrives
    /// and however often the wait is dropped and begun again (the Bash
    /// loop's `select!` does that on every line of output); a helper that
    /// ends without one leaves the wait to its exit.
    #[tokio::test]
    async fn a_report_ends_the_wait_only_once_whole() {
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let ours = tokio::net::UnixStream::from_std(ours).unwrap();
        let mut bytes = Vec::new();
        let body = br#"{"leftovers":2,"error":null,"status":3}"#;
        theirs.write_all(&body[..17]).unwrap();
        for _ in 0..3 {
            let waited = tokio::time::timeout(Duration::from_millis(50), read_until_report(&ours, &mut bytes)).await;
            assert!(waited.is_err(), "half a report ended the wait");
        }
        theirs.write_all(&body[17..]).unwrap();
        tokio::time::timeout(Duration::from_secs(10), read_until_report(&ours, &mut bytes)).await.expect("whole");
        let report: agentd_sandbox::Report = serde_json::from_slice(&bytes).unwrap();
        assert_eq!((report.leftovers, report.status), (2, Some(3)));

        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let ours = tokio::net::UnixStream::from_std(ours).unwrap();
        drop(theirs);
        let mut bytes = Vec::new();
        let waited = tokio::time::timeout(Duration::from_millis(100), read_until_report(&ours, &mut bytes)).await;
        assert!(waited.is_err(), "an end without a report is not one");
    }
}
