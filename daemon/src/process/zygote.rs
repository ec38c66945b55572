//! The daemon's side of the sandbox zygote (`agentd-sandbox --zygote`, see
//! `agentd_sandbox::zygote`): started once, it forks the helpers that wait
//! for their calls. Each fork is asked for with the new helper's control
//! socket and output pipes, made here, so the zygote never holds anything
//! of a call; what comes back is the helper's pid and a pidfd of it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long the zygote may take to answer a fork before it is given up.
const ANSWER_LIMIT: Duration = Duration::from_secs(5);

/// A running zygote.
pub(super) struct Zygote {
    child: tokio::process::Child,
    channel: UnixStream,
    pid: i32,
    /// The marker it (and each helper until its call) carries.
    marker: String,
    /// Where it is recorded.
    ledger: std::sync::Arc<super::Ledger>,
}

/// A helper the zygote forked, waiting for its call.
pub(super) struct Forked {
    pub pid: i32,
    pub pidfd: OwnedFd,
    /// The daemon's end of its control socket (its stdin).
    pub control: UnixStream,
    /// The read ends of its stdout and stderr.
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Zygote {
    /// Starts a zygote of `helper`, recorded in `ledger`.
    pub fn start(helper: &Path, ledger: std::sync::Arc<super::Ledger>) -> std::io::Result<Zygote> {
        let (channel, theirs) = UnixStream::pair()?;
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let mut cmd = tokio::process::Command::new(helper);
        cmd.arg("--zygote")
            .arg(std::process::id().to_string())
            .env_clear()
            .envs(super::command_env(true, None, &Default::default(), &marker).into_iter().map(|(k, v)| {
                use std::os::unix::ffi::OsStringExt;
                (std::ffi::OsString::from_vec(k), std::ffi::OsString::from_vec(v))
            }))
            .current_dir("/")
            .process_group(0)
            .stdin(std::process::Stdio::from(OwnedFd::from(theirs)))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let (child, pid) = super::spawn_recorded(&mut cmd, &marker, &ledger)?;
        channel.set_read_timeout(Some(ANSWER_LIMIT))?;
        channel.set_write_timeout(Some(ANSWER_LIMIT))?;
        Ok(Zygote { child, channel, pid, marker, ledger })
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The marker its helpers carry until their call.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Forks a helper waiting for its call.
    pub fn fork(&mut self) -> Result<Forked, ForkError> {
        use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
        let (control, theirs) = UnixStream::pair().map_err(ForkError::NotAsked)?;
        let (stdout, out_w) = pipe().map_err(ForkError::NotAsked)?;
        let (stderr, err_w) = pipe().map_err(ForkError::NotAsked)?;
        let fds = [theirs.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
        let byte = [agentd_sandbox::zygote::FORK];
        let iov = [std::io::IoSlice::new(&byte)];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        loop {
            match sendmsg::<()>(self.channel.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(ForkError::Broken(e.into())),
                Ok(_) => break,
            }
        }
        drop((theirs, out_w, err_w));
        let mut head = [0u8; 4];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let (got, mut pidfds) = loop {
            let mut iov = [std::io::IoSliceMut::new(&mut head)];
            match recvmsg::<()>(
                self.channel.as_raw_fd(),
                &mut iov,
                Some(space.as_mut_slice()),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(ForkError::Broken(e.into())),
                Ok(msg) => {
                    let mut fds = Vec::new();
                    for c in msg.cmsgs().map_err(|e| ForkError::Broken(e.into()))? {
                        if let ControlMessageOwned::ScmRights(list) = c {
                            // SAFETY: the kernel just gave these descriptors.
                            #[allow(unsafe_code)]
                            fds.extend(list.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
                        }
                    }
                    break (msg.bytes, fds);
                }
            }
        };
        if got < head.len() {
            use std::io::Read;
            (&self.channel).read_exact(&mut head[got..]).map_err(ForkError::Broken)?;
        }
        let pid = i32::from_le_bytes(head);
        match (pid, pidfds.pop(), pidfds.is_empty()) {
            (1.., Some(pidfd), true) => Ok(Forked { pid, pidfd, control, stdout, stderr }),
            // It answered: it could not fork now (a process limit); it is
            // still of use.
            (0, None, true) => Err(ForkError::NotMade),
            _ => Err(ForkError::Broken(std::io::Error::other("the sandbox zygote answered nonsense"))),
        }
    }

    /// Closes its channel: it makes no more helpers, and exits once those it
    /// made have.
    pub fn give_up(&self) {
        let _ = self.channel.shutdown(std::net::Shutdown::Both);
    }

    /// Ends it now, and with it the helpers it made (their death signal).
    pub fn kill(mut self) {
        let _ = self.child.start_kill();
    }
}

/// Why a zygote made no helper.
#[derive(Debug)]
pub(super) enum ForkError {
    /// It said it could not fork (now): it still serves.
    NotMade,
    /// The helper's descriptors could not be made here (out of
    /// descriptors): nothing was asked of it.
    NotAsked(std::io::Error),
    /// Its channel failed (it died, or it did not answer in time): it is of
    /// no more use.
    Broken(std::io::Error),
}

impl Drop for Zygote {
    fn drop(&mut self) {
        // Its channel closes: it makes no more helpers and exits once the
        // last it made has (never killed here: they run calls, and die
        // with it).
        self.ledger.forget(self.pid);
    }
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}
