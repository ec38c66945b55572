//! The helper's half of the network gate (the daemon's half is
//! the daemon's `sandbox/gate`): a call whose network is gated runs in a network
//! namespace of its own, where only loopback exists. Its one way out is the
//! endpoint the supervisor (PID 1 of the call) listens on, at
//! `127.0.0.1:<port>` inside that namespace: each connection accepted
//! there is handed, as a descriptor, to the daemon over the control socket
//! the helper got as its stdin. The daemon then speaks HTTP proxy or SOCKS5
//! on it and decides where it may go.
//!
//! No path names the control socket and no process of the command holds
//! it: the command's stdin is `/dev/null`, and the supervisor keeps its
//! copy close-on-exec. A connection is only ever a TCP socket of the
//! call's own namespace, so the daemon knows which call each came from by
//! the socket it arrived on.
#![allow(unsafe_code)] // ioctl, accept4, dup: plain system calls in the single-threaded helper

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

/// Brings up `lo` in this (new) network namespace, so the call's own
/// servers on `localhost` and the gate's endpoint work.
pub fn loopback_up() -> Result<(), String> {
    // SAFETY: plain socket and ioctl calls on a zeroed `ifreq`.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(format!("a socket to bring up loopback: {}", std::io::Error::last_os_error()));
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) < 0 {
            return Err(format!("read loopback's flags: {}", std::io::Error::last_os_error()));
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS as _, &ifr) < 0 {
            return Err(format!("bring up loopback: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// The supervisor's end of the gate: the control socket to the daemon and
/// the listener commands connect to.
pub struct Endpoint {
    control: OwnedFd,
    listener: OwnedFd,
    /// The listener's port on `127.0.0.1` (inside the call's namespace).
    pub port: u16,
}

impl Endpoint {
    /// Takes the control socket from stdin (a copy, close-on-exec) and
    /// listens on a port of loopback the kernel picks.
    pub fn open() -> Result<Endpoint, String> {
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // SAFETY: plain descriptor calls; every returned fd is owned once.
        unsafe {
            let control = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3);
            if control < 0 {
                return Err(err("take the gate's control socket"));
            }
            let control = OwnedFd::from_raw_fd(control);
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
            if fd < 0 {
                return Err(err("a socket for the gate's endpoint"));
            }
            let listener = OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            if libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) < 0 {
                return Err(err("bind the gate's endpoint"));
            }
            if libc::listen(fd, 128) < 0 {
                return Err(err("listen on the gate's endpoint"));
            }
            let mut got: libc::sockaddr_in = std::mem::zeroed();
            let mut got_len = len;
            if libc::getsockname(fd, (&mut got as *mut libc::sockaddr_in).cast(), &mut got_len) < 0 {
                return Err(err("the gate endpoint's port"));
            }
            Ok(Endpoint { control, listener, port: u16::from_be(got.sin_port) })
        }
    }

    /// The listener, to poll.
    pub fn listener_fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    /// Hands every connection waiting on the listener to the daemon. One
    /// the daemon cannot take at once (it is gone, or its queue is full)
    /// is closed: the command sees a reset, never a hang of the supervisor.
    pub fn hand_over(&self) {
        loop {
            // SAFETY: accept4 with no address buffer.
            let fd = unsafe {
                libc::accept4(self.listener.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC)
            };
            if fd < 0 {
                return;
            }
            // SAFETY: a descriptor accept4 just returned.
            let conn = unsafe { OwnedFd::from_raw_fd(fd) };
            let _ = super::unix_wall::send_fd_flags(self.control.as_raw_fd(), conn.as_raw_fd(), libc::MSG_DONTWAIT);
        }
    }
}

/// In the command's process, before exec: stdin is `/dev/null` (the
/// control socket was stdin), and the proxy variables every common tool
/// reads point at the endpoint.
pub fn prepare_command(port: u16) -> Result<(), String> {
    // SAFETY: open and dup2 of /dev/null onto stdin.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if null < 0 || libc::dup2(null, 0) < 0 {
            return Err(format!("stdin from /dev/null: {}", std::io::Error::last_os_error()));
        }
        libc::close(null);
    }
    for (name, value) in proxy_env(port, std::env::var("GIT_CONFIG_COUNT").ok().as_deref()) {
        // SAFETY: the process is single-threaded (a child of the helper
        // about to exec).
        unsafe { std::env::set_var(name, value) };
    }
    Ok(())
}

/// The variables that send a command's traffic to the gate at `port`:
/// the conventional ones, and those tools read on their own (npm, pip,
/// cargo, git, Node's fetch). `git_count` is the command's
/// `GIT_CONFIG_COUNT`, extended rather than replaced.
pub fn proxy_env(port: u16, git_count: Option<&str>) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let own = "localhost,127.0.0.0/8,::1".to_owned();
    let mut env: Vec<(String, String)> = [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("http_proxy", &http),
        ("https_proxy", &http),
        ("ALL_PROXY", &socks),
        ("all_proxy", &socks),
        ("NO_PROXY", &own),
        ("no_proxy", &own),
        ("npm_config_proxy", &http),
        ("npm_config_https_proxy", &http),
        ("PIP_PROXY", &http),
        ("CARGO_HTTP_PROXY", &http),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.clone()))
    .collect();
    env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    let n: u32 = git_count.and_then(|c| c.trim().parse().ok()).filter(|n| *n < 1000).unwrap_or(0);
    env.push((format!("GIT_CONFIG_KEY_{n}"), "http.proxy".into()));
    env.push((format!("GIT_CONFIG_VALUE_{n}"), http));
    env.push(("GIT_CONFIG_COUNT".into(), (n + 1).to_string()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_env_extends_git_config() {
        let env = proxy_env(4242, Some("2"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:4242"));
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:4242"));
        assert_eq!(get("GIT_CONFIG_KEY_2"), Some("http.proxy"));
        assert_eq!(get("GIT_CONFIG_COUNT"), Some("3"));
        let fresh = proxy_env(1, Some("nonsense"));
        assert!(fresh.iter().any(|(k, v)| k == "GIT_CONFIG_COUNT" && v == "1"));
    }
}
