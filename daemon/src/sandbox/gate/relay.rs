//! The gate's relay of an allowed connection: both ways, in the kernel
//! (`splice(2)`) while a splice slot is free, else through buffers; audited
//! when it ends or is cut off.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::line::NetworkNote;
use super::{RELAY_BUFFER, Shared};

/// Bytes a relay's pipe holds each way (pages are taken only as bytes
/// pass).
const PIPE_BYTES: usize = 256 * 1024;

/// Relays spliced in the kernel at once, daemon-wide (each holds two
/// 256 KiB pipes: four descriptors and up to 128 pages of the user's pipe
/// quota); the others copy through buffers of [`RELAY_BUFFER`] bytes.
pub(super) const SPLICE_RELAYS: usize = 32;

static SPLICE_SLOTS: std::sync::LazyLock<Arc<Semaphore>> =
    std::sync::LazyLock::new(|| Arc::new(Semaphore::new(SPLICE_RELAYS)));

/// How long a connection one side of which has ended may go without a
/// byte moving the other way before it is closed.
const HALF_CLOSED_IDLE: Duration = Duration::from_secs(60);

/// An allowed connection's `sandbox/network` event, sent when it ends —
/// also when it is cut off (the gate dropped with its call).
pub(super) struct Audit<'a> {
    pub(super) shared: &'a Shared,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) rule: String,
    pub(super) up: AtomicU64,
    pub(super) down: AtomicU64,
}

impl Drop for Audit<'_> {
    fn drop(&mut self) {
        self.shared.note(NetworkNote {
            host: std::mem::take(&mut self.host),
            port: self.port,
            allowed: true,
            rule: std::mem::take(&mut self.rule),
            bytes_up: self.up.load(Relaxed),
            bytes_down: self.down.load(Relaxed),
        });
    }
}

/// Copies both ways until both sides end, either fails, or one side has
/// ended and nothing moved the other way for [`HALF_CLOSED_IDLE`];
/// counting into `audit` as bytes pass. In the kernel (`splice` through a
/// pipe each way: the bytes never reach this process) while a splice slot
/// is free, else through buffers.
pub(super) async fn relay(client: &TcpStream, upstream: &TcpStream, audit: &Audit<'_>) {
    let splice = SPLICE_SLOTS.clone().try_acquire_owned().ok();
    let spliced = splice.is_some();
    let up = pump(client, upstream, &audit.up, spliced);
    let down = pump(upstream, client, &audit.down, spliced);
    tokio::pin!(up, down);
    let (up_ended, ok) = tokio::select! {
        r = &mut up => (true, r.is_ok()),
        r = &mut down => (false, r.is_ok()),
    };
    if !ok {
        return;
    }
    // Only the direction still open is polled from here on (an ended
    // future must not be polled again).
    let other_moved = if up_ended { &audit.down } else { &audit.up };
    let (mut seen, mut since) = (other_moved.load(Relaxed), tokio::time::Instant::now());
    loop {
        tokio::select! {
            _ = &mut up, if !up_ended => return,
            _ = &mut down, if up_ended => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                let now = other_moved.load(Relaxed);
                if now != seen {
                    (seen, since) = (now, tokio::time::Instant::now());
                } else if since.elapsed() >= HALF_CLOSED_IDLE {
                    return;
                }
            }
        }
    }
}

use std::sync::atomic::AtomicU64;

use std::sync::atomic::Ordering::Relaxed;

/// One direction of [`relay`]: from `from` to `to` until `from` ends (then
/// `to`'s writing half is shut); `moved` counts. With `splice`, through a
/// pipe in the kernel (falling back to a buffer where the kernel will not
/// splice these sockets).
async fn pump(from: &TcpStream, to: &TcpStream, moved: &AtomicU64, splice: bool) -> std::io::Result<()> {
    use tokio::io::Interest;
    let pipe = if splice {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).ok().inspect(|(_, w)| {
            // Fewer wake-ups per byte than the default 64 KiB (where the
            // kernel refuses, the default does).
            let _ = nix::fcntl::fcntl(w, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES as _));
        })
    } else {
        None
    };
    let mut buf = Vec::new();
    let flags = nix::fcntl::SpliceFFlags::SPLICE_F_NONBLOCK | nix::fcntl::SpliceFFlags::SPLICE_F_MOVE;
    let mut pipe = pipe;
    loop {
        // Read: into the pipe, or into the buffer.
        let n = loop {
            from.readable().await?;
            let got = match &pipe {
                Some((_, pipe_in)) => from.try_io(Interest::READABLE, || {
                    nix::fcntl::splice(from, None, pipe_in, None, PIPE_BYTES, flags).map_err(std::io::Error::from)
                }),
                None => {
                    buf.resize(RELAY_BUFFER, 0);
                    from.try_read(&mut buf)
                }
            };
            match got {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) && pipe.is_some() => pipe = None,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            let _ = nix::sys::socket::shutdown(std::os::fd::AsRawFd::as_raw_fd(to), nix::sys::socket::Shutdown::Write);
            return Ok(());
        }
        // Write all of it on (counted as it is delivered).
        let mut done = 0;
        while done < n {
            to.writable().await?;
            let put = match &pipe {
                Some((pipe_out, _)) => to.try_io(Interest::WRITABLE, || {
                    nix::fcntl::splice(pipe_out, None, to, None, n - done, flags).map_err(std::io::Error::from)
                }),
                None => to.try_write(&buf[done..n]),
            };
            match put {
                Ok(m) => {
                    done += m;
                    moved.fetch_add(m as u64, Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}
