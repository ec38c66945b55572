//! The Unix-socket wall (issue 24): a confined command connects to no Unix
//! socket outside its call — not the user's D-Bus, `docker.sock`, the
//! ssh-agent, a display, another daemon — but those its own processes
//! listen on, and those the session names.
//!
//! Landlock scopes pathname sockets only from ABI 9 and seccomp cannot read
//! the address a `connect` points at, so every `connect` of the command is
//! handed to the call's supervisor (seccomp user notification). The
//! supervisor never lets the kernel go on with the call's own arguments
//! (another thread could rewrite them, or `dup2` another socket onto the
//! descriptor, between the check and the connect): it takes a copy of the
//! socket (`pidfd_getfd`), decides on what the address names, and performs
//! the connect itself on that copy — for a pathname socket through an
//! `O_PATH` descriptor of the very inode it checked. The command sees
//! `connect`'s result as if it had made it.
//!
//! A listener belongs to the call when the socket bound at that inode (or
//! abstract name) is held by a process of the call's PID namespace: the
//! kernel's socket table (`NETLINK_SOCK_DIAG`) maps the inode to the
//! listening socket, the call's own `/proc` says who holds it.
#![allow(unsafe_code)] // seccomp, ioctl, pidfd and netlink system calls

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::libc;

/// The x32 bit of x86_64 system call numbers.
const X32: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Connects the supervisor may have in flight at once, each on a thread of
/// its own (a slow host must not stall the call's other connects).
const MAX_BLOCKING: usize = 64;

/// In the command's process, after the other filters: hands every
/// `connect` to the supervisor. Returns the listener (close-on-exec).
pub fn install_notifier() -> Result<OwnedFd, String> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let connect = libc::SYS_connect as u32;
    let program = [
        op(LD_W_ABS, 0, 0, 4),          // arch
        op(JEQ_K, 0, 5, AUDIT_ARCH),    // another arch: the main filter kills it
        op(LD_W_ABS, 0, 0, 0),          // nr
        op(JEQ_K, 2, 0, connect),       // connect → the supervisor
        op(JEQ_K, 0, 2, connect | X32), // x32's connect → refused
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut libc::sock_filter };
    // SAFETY: a valid filter program that outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(format!("seccomp listener for connect: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the kernel just gave this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A `msghdr` over one buffer and a control buffer with room for one
/// descriptor (both must outlive its use).
fn one_fd_msghdr(iov: &mut libc::iovec, control: &mut Vec<u8>) -> libc::msghdr {
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    control.resize(space, 0);
    // SAFETY: msghdr is plain data; the pointers set are the caller's.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    msg
}

/// Sends `fd` over the (connected) socket `over`, as one message "L".
pub fn send_fd(over: RawFd, fd: RawFd) -> Result<(), String> {
    send_fd_flags(over, fd, 0)
}

/// [`send_fd`] with `sendmsg` flags (`MSG_DONTWAIT`).
pub fn send_fd_flags(over: RawFd, fd: RawFd, flags: libc::c_int) -> Result<(), String> {
    let mut byte = *b"L";
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = Vec::new();
    let msg = one_fd_msghdr(&mut iov, &mut control);
    // SAFETY: the control buffer has room for one header and one fd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    // SAFETY: a fully initialised msghdr.
    if unsafe { libc::sendmsg(over, &msg, flags | libc::MSG_NOSIGNAL) } != 1 {
        return Err(format!("pass a descriptor: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// What the supervisor got from the command's process before its exec:
/// the listener, and the text of an error (empty when it exec'd).
pub fn receive_setup(from: RawFd) -> (Option<OwnedFd>, String) {
    let mut listener = None;
    let mut why = Vec::new();
    loop {
        let mut buf = [0u8; 4096];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut control = Vec::new();
        let mut msg = one_fd_msghdr(&mut iov, &mut control);
        // SAFETY: a valid msghdr.
        let n = unsafe { libc::recvmsg(from, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break;
        }
        if n == 0 {
            break;
        }
        // SAFETY: walking the control messages the kernel wrote.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        let mut got_fd = false;
        while !cmsg.is_null() {
            // SAFETY: cmsg points into `control`.
            unsafe {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
                    listener = Some(OwnedFd::from_raw_fd(fd));
                    got_fd = true;
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if !got_fd {
            why.extend_from_slice(&buf[..n as usize]);
        }
    }
    (listener, String::from_utf8_lossy(&why).into_owned())
}

/// Whether this process could act for another one as the wall must
/// (`pidfd_getfd` on a child; Yama's ptrace scope 2 and 3 forbid it):
/// probed on a child that waits.
pub fn can_take_fds() -> bool {
    let Ok((a, b)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else { return false };
    // SAFETY: called from the single-threaded helper.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(b);
            let mut byte = [0u8; 1];
            let _ = nix::unistd::read(&a, &mut byte);
            std::process::exit(0)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            let ok = pidfd_open(child.as_raw()).and_then(|p| take_fd(&p, a.as_raw_fd())).is_some();
            drop(b);
            let _ = nix::sys::wait::waitpid(child, None);
            ok
        }
        Err(_) => false,
    }
}

/// The process (thread group) of thread `tid`, from its `/proc` status.
fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh descriptor from the kernel.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn take_fd(pidfd: &OwnedFd, target: RawFd) -> Option<OwnedFd> {
    // SAFETY: integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
    // SAFETY: a fresh descriptor from the kernel (close-on-exec).
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The supervisor's half: answers the command's connects.
pub struct Notifier {
    listener: Arc<OwnedFd>,
    /// Sockets the session named (`allow_unix_sockets`), as (dev, ino).
    allowed: Vec<(u64, u64)>,
    /// `/proc` is the call's own (PID 1 is this process), so who holds a
    /// listener can be told; otherwise only named sockets are reachable.
    own_proc: bool,
    blocking: Arc<AtomicUsize>,
    /// Socket files found to be the call's own, with an `O_PATH`
    /// descriptor that keeps each inode (and so its number) alive: a socket
    /// file is bound by one socket only, ever, so the answer cannot change.
    ours: std::sync::Mutex<Vec<((u64, u64), OwnedFd)>>,
}

/// Socket files [`Notifier`] remembers as the call's own.
const OURS_KEPT: usize = 256;

impl Notifier {
    /// `allowed`: the socket paths the session named (those that exist now).
    pub fn new(listener: OwnedFd, allowed: &[PathBuf]) -> Notifier {
        let allowed = allowed
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .filter(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
            .map(|m| (std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m)))
            .collect();
        let own_proc = std::process::id() == 1 && std::fs::read_link("/proc/self").is_ok_and(|l| l == Path::new("1"));
        Notifier {
            listener: Arc::new(listener),
            allowed,
            own_proc,
            blocking: Arc::new(AtomicUsize::new(0)),
            ours: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The descriptor to poll for notifications.
    pub fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    /// Receives one notification and answers it (a blocking connect is
    /// answered from a thread when it completes).
    pub fn answer_one(&self) {
        // SAFETY: a zeroed seccomp_notif, as the kernel requires.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the listener and a properly sized buffer.
        if unsafe { libc::ioctl(self.fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
            return; // the caller died meanwhile (ENOENT), or a signal
        }
        match self.prepare(&req) {
            Err(errno) => respond(&self.listener, req.id, Err(errno)),
            // The socket's blocking mode may change between the check and
            // the connect (it is the caller's): every connect is made on a
            // thread, so none can stall this loop.
            Ok(conn) => {
                if self.blocking.fetch_add(1, Ordering::SeqCst) >= MAX_BLOCKING {
                    self.blocking.fetch_sub(1, Ordering::SeqCst);
                    return respond(&self.listener, req.id, Err(libc::EAGAIN));
                }
                let (listener, count, id) = (self.listener.clone(), self.blocking.clone(), req.id);
                let spawned = std::thread::Builder::new().stack_size(64 * 1024).spawn(move || {
                    respond(&listener, id, conn.run());
                    count.fetch_sub(1, Ordering::SeqCst);
                });
                if spawned.is_err() {
                    self.blocking.fetch_sub(1, Ordering::SeqCst);
                    respond(&self.listener, req.id, Err(libc::EAGAIN));
                }
            }
        }
    }

    /// Reads what the caller asked, takes its socket, and decides.
    fn prepare(&self, req: &libc::seccomp_notif) -> Result<Connect, i32> {
        if req.data.nr as libc::c_long != libc::SYS_connect {
            return Err(libc::EPERM);
        }
        let [fd, addr, len, ..] = req.data.args;
        // The caller may be any thread: its memory is its thread's, its
        // descriptors its process's (pidfd_open takes a process).
        let tid = req.pid as i32;
        let pid = thread_group(tid).ok_or(libc::ESRCH)?;
        let valid = || id_valid(&self.listener, req.id);
        let len = (len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        let mut bytes = vec![0u8; len];
        let mem = std::fs::File::open(format!("/proc/{tid}/mem")).map_err(|_| libc::EACCES)?;
        if !valid() {
            return Err(libc::EINTR);
        }
        if len > 0 && mem.read_exact_at(&mut bytes, addr).is_err() {
            return Err(libc::EFAULT);
        }
        let pidfd = pidfd_open(pid).ok_or(libc::ESRCH)?;
        let socket = take_fd(&pidfd, fd as RawFd).ok_or(libc::EBADF)?;
        if !valid() {
            return Err(libc::EINTR);
        }
        let domain = sockopt(&socket, libc::SO_DOMAIN).ok_or(libc::ENOTSOCK)?;
        let family = bytes.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        if domain != libc::AF_UNIX || family != Some(libc::AF_UNIX as u16) || len <= 2 {
            // Not a Unix socket (its own walls apply), or an address the
            // kernel refuses for it anyway: connected as asked.
            return Ok(Connect { socket, address: bytes, _path: None });
        }
        let path = &bytes[2..];
        if path[0] == 0 {
            // An abstract name: only the call's own.
            let name = path;
            if !self.own_proc || !held_by_call(|l| l.name.as_deref() == Some(name)) {
                return Err(libc::EACCES);
            }
            return Ok(Connect { socket, address: bytes, _path: None });
        }
        let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
        let target = open_target(tid, &path[..end])?;
        let meta = fstat(&target).ok_or(libc::ENOENT)?;
        if meta.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(libc::ECONNREFUSED);
        }
        let (dev, ino) = (meta.st_dev, meta.st_ino);
        let named = self.allowed.contains(&(dev, ino));
        let known = || self.ours.lock().is_ok_and(|o| o.iter().any(|(k, _)| *k == (dev, ino)));
        let ours = || {
            let (major, minor) = (libc::major(dev), libc::minor(dev));
            let held = held_by_call(|l| {
                l.vfs.is_some_and(|(vdev, vino)| {
                    vino == ino as u32 && (vdev >> 20) == major && (vdev & 0xf_ffff) == minor
                })
            });
            if held
                && let Ok(mut kept) = self.ours.lock()
                && kept.len() < OURS_KEPT
                && let Ok(pin) = target.try_clone()
            {
                kept.push(((dev, ino), pin));
            }
            held
        };
        if !named && !(self.own_proc && (known() || ours())) {
            return Err(libc::EACCES);
        }
        // Connect through the inode checked, not the name again.
        let via = format!("/proc/self/fd/{}", target.as_raw_fd());
        let mut address = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        address.extend_from_slice(via.as_bytes());
        address.push(0);
        Ok(Connect { socket, address, _path: Some(target) })
    }
}

/// One connect the supervisor makes for the command.
struct Connect {
    socket: OwnedFd,
    address: Vec<u8>,
    /// The `O_PATH` descriptor `address` names, kept open until connected.
    _path: Option<OwnedFd>,
}

impl Connect {
    fn run(&self) -> Result<i64, i32> {
        loop {
            // SAFETY: `address` is a sockaddr of its own length.
            let rc = unsafe {
                libc::connect(
                    self.socket.as_raw_fd(),
                    self.address.as_ptr().cast(),
                    self.address.len() as libc::socklen_t,
                )
            };
            if rc == 0 {
                return Ok(0);
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(e) => return Err(e),
                None => return Err(libc::EIO),
            }
        }
    }
}

fn respond(listener: &OwnedFd, id: u64, result: Result<i64, i32>) {
    let (val, error) = match result {
        Ok(v) => (v, 0),
        Err(e) => (0, -e),
    };
    let mut resp = libc::seccomp_notif_resp { id, val, error, flags: 0 };
    // SAFETY: the listener and a filled response.
    let _ = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
}

fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the listener and a u64.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) == 0 }
}

fn sockopt(fd: &OwnedFd, name: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized option buffer.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, name, (&mut value as *mut libc::c_int).cast(), &mut len)
    };
    (rc == 0).then_some(value)
}

fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    // SAFETY: a zeroed stat buffer for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and buffer.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st)
}

/// Opens (`O_PATH`) what `path` names for process `pid`: relative to its
/// working directory, or from the root, which must be this process's (a
/// command in a root of its own is refused).
fn open_target(pid: i32, path: &[u8]) -> Result<OwnedFd, i32> {
    let same_root =
        std::fs::metadata(format!("/proc/{pid}/root")).ok().zip(std::fs::metadata("/").ok()).is_some_and(|(a, b)| {
            use std::os::unix::fs::MetadataExt;
            a.dev() == b.dev() && a.ino() == b.ino()
        });
    if !same_root {
        return Err(libc::EACCES);
    }
    let c_path = CString::new(path).map_err(|_| libc::EINVAL)?;
    let base = if path.first() == Some(&b'/') {
        None
    } else {
        let cwd = CString::new(format!("/proc/{pid}/cwd")).map_err(|_| libc::EINVAL)?;
        // SAFETY: a valid C string.
        let fd = unsafe { libc::open(cwd.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(libc::ENOENT);
        }
        // SAFETY: fresh descriptor.
        Some(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let dir = base.as_ref().map_or(libc::AT_FDCWD, |b| b.as_raw_fd());
    // SAFETY: a valid directory descriptor (or AT_FDCWD) and C string.
    let fd = unsafe { libc::openat(dir, c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOENT));
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A listening Unix socket as the kernel's socket table shows it.
struct Listener {
    /// Its inode in sockfs (what `/proc/<pid>/fd` links name).
    ino: u32,
    /// Where it is bound: the kernel's (dev, ino) of the socket file.
    vfs: Option<(u32, u32)>,
    /// Its bound name (an abstract one starts with a NUL byte).
    name: Option<Vec<u8>>,
}

/// Whether a listener `matches` picks is held by a process of the call.
fn held_by_call(matches: impl Fn(&Listener) -> bool) -> bool {
    let inodes: Vec<u32> = listeners().into_iter().filter(|l| matches(l)).map(|l| l.ino).collect();
    !inodes.is_empty() && call_holds_any(&inodes)
}

/// Every listening Unix socket of this network namespace.
fn listeners() -> Vec<Listener> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const UDIAG_SHOW_NAME: u32 = 1;
    const UDIAG_SHOW_VFS: u32 = 2;
    const TCP_LISTEN: u32 = 10;
    let mut out = Vec::new();
    // SAFETY: integer arguments.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return out;
    }
    // SAFETY: fresh descriptor.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = Vec::with_capacity(40);
    req.extend_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // seq
    req.extend_from_slice(&0u32.to_ne_bytes()); // pid
    req.extend_from_slice(&[libc::AF_UNIX as u8, 0, 0, 0]); // family, protocol, pad
    req.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes()); // states
    req.extend_from_slice(&0u32.to_ne_bytes()); // ino
    req.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_VFS).to_ne_bytes());
    req.extend_from_slice(&[0xff; 8]); // cookie: none
    // SAFETY: a buffer of its own length.
    if unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } != req.len() as isize {
        return out;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let u32_at = |b: &[u8], i: usize| b.get(i..i + 4).map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]));
    let u16_at = |b: &[u8], i: usize| b.get(i..i + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]));
    loop {
        // SAFETY: a buffer of its own length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return out;
        }
        let data = &buf[..n as usize];
        let mut at = 0usize;
        while let (Some(len), Some(kind)) = (u32_at(data, at), u16_at(data, at + 4)) {
            let len = len as usize;
            if len < 16 || at + len > data.len() {
                return out;
            }
            if kind == libc::NLMSG_DONE as u16 || kind == libc::NLMSG_ERROR as u16 {
                return out;
            }
            let msg = &data[at + 16..at + len];
            if let Some(ino) = u32_at(msg, 4) {
                let mut listener = Listener { ino, vfs: None, name: None };
                let mut a = 16usize;
                while let (Some(alen), Some(atype)) = (u16_at(msg, a), u16_at(msg, a + 2)) {
                    let alen = alen as usize;
                    if alen < 4 || a + alen > msg.len() {
                        break;
                    }
                    let payload = &msg[a + 4..a + alen];
                    match atype {
                        0 => listener.name = Some(payload.to_vec()),
                        1 => listener.vfs = u32_at(payload, 0).zip(u32_at(payload, 4)).map(|(i, d)| (d, i)),
                        _ => {}
                    }
                    a += (alen + 3) & !3;
                }
                out.push(listener);
            }
            at += (len + 3) & !3;
        }
    }
}

/// Whether any process in this `/proc` (the call's) holds one of `inodes`.
fn call_holds_any(inodes: &[u32]) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    for entry in procs.flatten() {
        let name = entry.file_name();
        if !name.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else { continue };
            let link = link.as_os_str().as_bytes();
            if let Some(ino) = link.strip_prefix(b"socket:[").and_then(|r| r.strip_suffix(b"]"))
                && let Some(ino) = std::str::from_utf8(ino).ok().and_then(|s| s.parse::<u32>().ok())
                && inodes.contains(&ino)
            {
                return true;
            }
        }
    }
    false
}
