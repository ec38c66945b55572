//! A cgroup per call, where the daemon may make them: a memory limit
//! (opt-in: `agentd --call-memory-limit`) and a process limit that holds
//! root too (`pids.max`, beside the `RLIMIT_NPROC` that the kernel does not
//! hold root to; made for a daemon running as root, or with a memory
//! limit). Joining one costs ~0.3 ms on cgroup v1 (an RCU wait).
//!
//! Built for cgroup v1 hierarchies the daemon can write (its own cgroup's
//! directory in the `memory` and `pids` hierarchies: a container or VM
//! running it as root, or a hierarchy delegated to its user). On cgroup v2
//! a daemon must first move itself into a leaf of a delegated subtree to
//! give its children controllers; that is not built, and `daemon/info`
//! says so. The daemon moves the call's helper into them before it hands
//! it the call, so every process of the call is in them; the daemon
//! removes them when the call's processes are gone.

use std::path::{Path, PathBuf};

use crate::sync::MutexExt;

/// A controller the calls' cgroups use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Memory,
    Pids,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }
}

/// Why a call's cgroup could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", .path.display())]
pub struct CgroupError {
    /// What was being done.
    what: &'static str,
    /// The directory or file.
    path: PathBuf,
    source: std::io::Error,
}

/// A size the user wrote that is not one.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a number with a unit.
    #[error("not a size: {0:?} (say 512M or 2G)")]
    Unreadable(String),
    /// Past what 64 bits hold.
    #[error("too large: {0:?}")]
    TooLarge(String),
    /// Below what any command needs.
    #[error("{0:?} is less than 16 MiB: no command would start")]
    TooSmall(String),
}

/// The directories the calls' cgroups are made in, per controller.
#[derive(Debug, Default)]
pub struct Cgroups {
    bases: Vec<(Controller, PathBuf)>,
    /// Where each hierarchy is mounted: kept read-only to calls whose
    /// writable roots hold it.
    mounts: Vec<PathBuf>,
    memory_limit: Option<u64>,
    pids_limit: u64,
    /// Why calls get no cgroup of their own (`None`: they do).
    reason: Option<String>,
    /// Calls' cgroups that could not be removed yet (a process outlived
    /// its call): tried again at each new call.
    leftovers: Leftovers,
}

/// Cgroups to remove later, each with whether what is in it may be killed.
type Leftovers = std::sync::Arc<std::sync::Mutex<Vec<(PathBuf, bool)>>>;

/// Where `/proc/self/cgroup` puts this process in each v1 hierarchy that
/// `mountinfo` shows mounted: the directory of each of `wanted`, and where
/// its hierarchy is mounted. A hierarchy shared with `cpuset` is passed
/// over (a new cpuset cgroup has no CPUs: nothing could join it).
pub fn own_dirs(cgroup: &str, mountinfo: &str, wanted: &[Controller]) -> Vec<(Controller, PathBuf, PathBuf)> {
    let mut found = Vec::new();
    for (controllers, path) in memberships(cgroup) {
        if controllers.split(',').any(|c| c == "cpuset") {
            continue;
        }
        for controller in wanted {
            if !controllers.split(',').any(|c| c == controller.name()) {
                continue;
            }
            if let Some((dir, mount)) = mounted_at(mountinfo, *controller, path) {
                found.push((*controller, dir, mount));
            }
        }
    }
    found
}

/// The lines of a `/proc/PID/cgroup`: `ID:CONTROLLERS:PATH` as
/// (controllers, path); v2's line is `0::PATH`.
fn memberships(cgroup: &str) -> impl Iterator<Item = (&str, &str)> {
    cgroup.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { return None };
        Some((controllers, path))
    })
}

/// The directory of cgroup `path` in the v1 hierarchy of `controller`, and
/// the hierarchy's mount point.
fn mounted_at(mountinfo: &str, controller: Controller, path: &str) -> Option<(PathBuf, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        // `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER`
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split(' ');
        let (fstype, _, options) = (fs.next()?, fs.next()?, fs.next()?);
        if fstype != "cgroup" || !options.split(',').any(|o| o == controller.name()) {
            return None;
        }
        let fields: Vec<&str> = mount.split(' ').collect();
        let (root, point) = (*fields.get(3)?, *fields.get(4)?);
        // Names with blanks are written as octal escapes: not ours to guess.
        if root.contains('\\') || point.contains('\\') || path.split('/').any(|c| c == "..") {
            return None;
        }
        // Mounted from its root, or from a part holding this cgroup (a
        // container's view).
        let inside = Path::new(path).strip_prefix(root).ok()?;
        Some((Path::new(point).join(inside), PathBuf::from(point)))
    })
}

impl Cgroups {
    /// Finds where calls' cgroups can be made (a directory of this daemon's
    /// own in its cgroup of each hierarchy), removing those of daemons
    /// that are gone. `memory_limit`: the opt-in limit of a call's memory,
    /// in bytes.
    pub fn probe(memory_limit: Option<u64>, pids_limit: u64) -> Cgroups {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let (cgroup, mountinfo) = (read("/proc/self/cgroup"), read("/proc/self/mountinfo"));
        // A cgroup costs ~0.3-0.5 ms (joining a v1 cgroup waits for
        // RCU): made for the process limit only where RLIMIT_NPROC cannot
        // hold it (a daemon running as root), and for a memory limit asked
        // for.
        let mut wanted = Vec::new();
        if nix::unistd::geteuid().is_root() || memory_limit.is_some() {
            wanted.push(Controller::Pids);
        }
        if memory_limit.is_some() {
            wanted.push(Controller::Memory);
        }
        if wanted.is_empty() {
            return Cgroups { pids_limit, ..Cgroups::default() };
        }
        let me = Owner::this();
        let (mut bases, mut mounts, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        for (controller, dir, mount) in own_dirs(&cgroup, &mountinfo, &wanted) {
            if let Some(me) = &me {
                remove_stale(&dir, me);
            }
            let base = dir.join(me.as_ref().map_or_else(|| format!("agentd-{}", std::process::id()), Owner::name));
            match make_dir(&base) {
                Ok(()) => {
                    bases.push((controller, base));
                    mounts.push(mount);
                }
                Err(e) => failed.push(format!("{}: {e}", dir.display())),
            }
        }
        let missing: Vec<&str> =
            wanted.iter().filter(|c| !bases.iter().any(|(b, _)| b == *c)).map(|c| c.name()).collect();
        let reason = (!missing.is_empty()).then(|| {
            let why = if !failed.is_empty() {
                format!("cannot make cgroups ({})", failed.join("; "))
            } else if cgroup.lines().any(|l| l.starts_with("0::")) && cgroup.lines().count() == 1 {
                "cgroup v2: a cgroup per call needs a delegated subtree the daemon moves into (not built)".to_owned()
            } else {
                "no cgroup v1 hierarchy of it is mounted (or it is shared with cpuset)".to_owned()
            };
            format!("no {} cgroup per call: {why}", missing.join(" or "))
        });
        if let Some(why) = &reason {
            tracing::info!("{why}");
        }
        Cgroups { bases, mounts, memory_limit, pids_limit, reason, leftovers: Default::default() }
    }

    /// No cgroups, and why (the limit asked for is still reported).
    pub fn without(reason: &str, memory_limit: Option<u64>) -> Cgroups {
        Cgroups { memory_limit, reason: Some(format!("no cgroup per call: {reason}")), ..Cgroups::default() }
    }

    /// Where the hierarchies the calls' cgroups are in are mounted.
    pub fn mounts(&self) -> &[PathBuf] {
        &self.mounts
    }

    /// Whether a call must not run without its cgroup (a memory limit was
    /// asked for; the process limit has RLIMIT_NPROC besides).
    pub fn required(&self) -> bool {
        self.memory_limit.is_some()
    }

    /// The call's memory limit and whether the kernel holds calls to it.
    pub fn memory(&self) -> (Option<u64>, bool) {
        (self.memory_limit, self.memory_limit.is_some() && self.has(Controller::Memory))
    }

    /// Whether calls' processes are limited by `pids.max` (root too).
    pub fn limits_pids(&self) -> bool {
        self.has(Controller::Pids)
    }

    /// Why some limit is not held by a cgroup.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    fn has(&self, controller: Controller) -> bool {
        self.bases.iter().any(|(c, _)| *c == controller)
    }

    /// The cgroups of the call marked `marker`, limits written; `None`
    /// where there are none to make. Where one cannot be set up, the call
    /// runs without if only the process limit was at stake (it has its
    /// `RLIMIT_NPROC`), and does not run when a memory limit was asked for
    /// (a limit the user set is not silently dropped).
    pub fn for_call(&self, marker: &str) -> Result<Option<CallCgroup>, CgroupError> {
        if self.bases.is_empty() {
            return Ok(None);
        }
        self.leftovers.locked().retain(|(dir, kill)| !remove_now(dir, *kill));
        match self.make_for_call(marker) {
            Ok(call) => Ok(Some(call)),
            Err(e) if !self.required() => {
                tracing::warn!("a call runs without its cgroup (its process limit is RLIMIT_NPROC's): {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn make_for_call(&self, marker: &str) -> Result<CallCgroup, CgroupError> {
        let mut call = CallCgroup {
            dirs: Vec::new(),
            memory_limit: self.memory_limit,
            leftovers: self.leftovers.clone(),
            kill: true,
        };
        for (controller, base) in &self.bases {
            let dir = base.join(format!("call-{marker}"));
            let made = std::fs::create_dir(&dir).or_else(|e| match e.kind() {
                // The daemon's directory went (systemd trims what it did not
                // make): made again.
                std::io::ErrorKind::NotFound => make_dir(base).and_then(|()| std::fs::create_dir(&dir)),
                _ => Err(e),
            });
            made.map_err(|source| CgroupError { what: "make the call's cgroup", path: dir.clone(), source })?;
            call.dirs.push((*controller, dir.clone()));
            let set = |file: &str, value: u64| {
                let path = dir.join(file);
                std::fs::write(&path, value.to_string()).map_err(|source| CgroupError {
                    what: "set the call's limit",
                    path,
                    source,
                })
            };
            match controller {
                Controller::Pids => set("pids.max", self.pids_limit)?,
                Controller::Memory => {
                    let limit = self.memory_limit.unwrap_or(u64::MAX);
                    set("memory.limit_in_bytes", limit)?;
                    // Swap counts too, where the kernel accounts it.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        set("memory.memsw.limit_in_bytes", limit)?;
                    }
                }
            }
        }
        Ok(call)
    }
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Who made a daemon's directory: its PID namespace, pid and start time,
/// so that only a daemon that is gone (seen from the same namespace: its
/// pid is free or another process's) has its directory removed.
struct Owner {
    pid_ns: u64,
    pid: i32,
    start: u64,
}

impl Owner {
    fn this() -> Option<Owner> {
        let pid = std::process::id() as i32;
        Some(Owner { pid_ns: pid_namespace()?, pid, start: start_time(pid)? })
    }

    fn name(&self) -> String {
        format!("agentd-{}-{}-{}", self.pid_ns, self.pid, self.start)
    }

    /// Whether the daemon that made `name` is gone, as far as `me` can tell.
    fn gone(name: &str, me: &Owner) -> bool {
        let mut parts = name.strip_prefix("agentd-").unwrap_or_default().split('-');
        let (Some(ns), Some(pid), Some(start), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let (Ok(ns), Ok(pid), Ok(start)) = (ns.parse::<u64>(), pid.parse::<i32>(), start.parse::<u64>()) else {
            return false;
        };
        ns == me.pid_ns && (pid, start) != (me.pid, me.start) && start_time(pid) != Some(start)
    }
}

fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// A process's start time (`/proc/PID/stat` field 22), `None` when there
/// is no such process.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// Removes the calls' cgroups of daemons that are gone (see [`Owner`]):
/// their processes are ended first.
fn remove_stale(dir: &Path, me: &Owner) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(|n| Owner::gone(n, me)) {
            continue;
        }
        if let Ok(calls) = std::fs::read_dir(entry.path()) {
            for call in calls.flatten().filter(|c| c.file_name().to_string_lossy().starts_with("call-")) {
                remove_now(&call.path(), true);
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

/// Removes the cgroup `dir` (first killing what is left in it, when
/// `kill`: the processes of a call that is over); whether it is gone.
fn remove_now(dir: &Path, kill: bool) -> bool {
    if !dir.exists() {
        return true;
    }
    if kill && let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        let me = std::process::id() as i32;
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()).filter(|p| *p > 1 && *p != me) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
    std::fs::remove_dir(dir).is_ok()
}

/// One call's cgroups; removed when dropped, after what is left in them
/// is killed (a process that left the call's group and session, with the
/// sandbox off, is still in its cgroup).
#[derive(Debug)]
pub struct CallCgroup {
    dirs: Vec<(Controller, PathBuf)>,
    memory_limit: Option<u64>,
    leftovers: Leftovers,
    /// What is left in it when it goes is killed: false once it may hold
    /// a process that is not the call's (see [`CallCgroup::disown`]).
    kill: bool,
}

impl CallCgroup {
    /// Moves process `pid` (a helper waiting for its call: nothing of the
    /// call has started) into the call's cgroups.
    pub fn adopt(&self, pid: i32) -> Result<(), CgroupError> {
        for (_, dir) in &self.dirs {
            let path = dir.join("cgroup.procs");
            std::fs::write(&path, pid.to_string()).map_err(|source| CgroupError {
                what: "move the call's helper into",
                path,
                source,
            })?;
        }
        Ok(())
    }

    /// Whether process `pid` is in every one of the call's cgroups now.
    pub fn holds(&self, pid: i32) -> bool {
        let Ok(own) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else { return false };
        self.dirs.iter().all(|(controller, dir)| {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            memberships(&own).any(|(controllers, path)| {
                controllers.split(',').any(|c| c == controller.name()) && path.ends_with(&format!("/{name}"))
            })
        })
    }

    /// Gives the cgroup up without killing anything in it: what is in it
    /// (perhaps not the call's: a helper's pid may be another process's
    /// once it died) goes back to the daemon's own cgroup, and the
    /// directories are removed. (A pid is a number: whoever moves a helper
    /// in checks afterwards that it still lives, and so held the number
    /// throughout.)
    pub fn disown(mut self) {
        self.kill = false;
        for (_, dir) in &self.dirs {
            let own = dir.parent().and_then(Path::parent).map(|d| d.join("cgroup.procs"));
            if let (Ok(procs), Some(own)) = (std::fs::read_to_string(dir.join("cgroup.procs")), own) {
                for pid in procs.lines() {
                    let _ = std::fs::write(&own, pid.trim());
                }
            }
        }
    }

    /// The memory limit, when the kernel killed a process of the call for
    /// reaching it (its `oom_kill` count, which a machine-wide shortage
    /// raises too, beside the limit's own failures).
    pub fn memory_limit_hit(&self) -> Option<u64> {
        let (_, dir) = self.dirs.iter().find(|(c, _)| *c == Controller::Memory)?;
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
        let control = read("memory.oom_control")?;
        let kills = control.lines().find_map(|l| l.strip_prefix("oom_kill "))?.trim().parse::<u64>().ok()?;
        // The call was at its limit: a charge refused (counted on some
        // kernels only), or its peak within a tenth of the limit. A kill in
        // a machine-wide shortage far below it is not blamed on the limit.
        let number = |file: &str| read(file).and_then(|n| n.trim().parse::<u64>().ok());
        let limit = self.memory_limit?;
        let refused = number("memory.failcnt").is_some_and(|n| n > 0)
            || number("memory.memsw.failcnt").is_some_and(|n| n > 0)
            || number("memory.max_usage_in_bytes").is_some_and(|peak| peak >= limit - limit / 10);
        (kills > 0 && refused).then_some(limit)
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        let kill = self.kill;
        let mut dirs: Vec<PathBuf> = self.dirs.drain(..).map(|(_, d)| d).collect();
        dirs.retain(|d| !remove_now(d, kill));
        if dirs.is_empty() {
            return;
        }
        // Killed processes take a moment to leave; what still does not is
        // tried again at the next call.
        let leftovers = self.leftovers.clone();
        let _ = std::thread::Builder::new().name("cgroup-cleanup".into()).spawn(move || {
            for _ in 0..50 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                dirs.retain(|d| !remove_now(d, kill));
                if dirs.is_empty() {
                    return;
                }
            }
            leftovers.locked().extend(dirs.into_iter().map(|d| (d, kill)));
        });
    }
}

/// A size as the user writes it: bytes, or with `K`, `M`, `G` (powers of
/// 1,024; `KiB`, `MB`… read the same).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: u64 = number.parse().map_err(|_| SizeError::Unreadable(text.to_owned()))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(SizeError::Unreadable(text.to_owned())),
    };
    let bytes =
        number.checked_shl(shift).filter(|b| b >> shift == number).ok_or(SizeError::TooLarge(text.to_owned()))?;
    if bytes < 16 << 20 {
        return Err(SizeError::TooSmall(text.to_owned()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
";

    /// A container's view: one hierarchy mounted from a part of it.
    const CONTAINER: &str =
        "40 31 0:37 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct,pids\n";

    #[test]
    fn a_v1_process_finds_its_own_directory_in_each_hierarchy() {
        let cgroup = "8:pids:/\n4:memory:/process_api/x\n2:cpu,cpuacct:/docker/abc/y\n0::/\n";
        let found = own_dirs(cgroup, MOUNTINFO, &[Controller::Memory, Controller::Pids]);
        let dirs: Vec<_> = found.iter().map(|(c, d, _)| (*c, d.clone())).collect();
        assert_eq!(
            dirs,
            [
                (Controller::Pids, PathBuf::from("/sys/fs/cgroup/pids")),
                (Controller::Memory, PathBuf::from("/sys/fs/cgroup/memory/process_api/x")),
            ]
        );
        assert_eq!(found[1].2, PathBuf::from("/sys/fs/cgroup/memory"));
        // A hierarchy mounted from a part of it (a container's view).
        let pids = "2:cpu,cpuacct,pids:/docker/abc/y\n";
        assert_eq!(
            own_dirs(pids, CONTAINER, &[Controller::Pids]),
            [(Controller::Pids, "/sys/fs/cgroup/cpu,cpuacct/y".into(), "/sys/fs/cgroup/cpu,cpuacct".into())]
        );
    }

    #[test]
    fn v2_or_unmounted_or_escaping_paths_give_no_directory() {
        assert!(own_dirs("0::/user.slice/agentd.service\n", MOUNTINFO, &[Controller::Memory]).is_empty());
        assert!(own_dirs("4:memory:/x\n", "", &[Controller::Memory]).is_empty());
        assert!(own_dirs("4:memory:/a/../../etc\n", MOUNTINFO, &[Controller::Memory]).is_empty());
        // Outside the part a hierarchy is mounted from.
        assert!(own_dirs("2:cpu,cpuacct,pids:/elsewhere\n", CONTAINER, &[Controller::Pids]).is_empty());
        // A name that only begins like the part mounted.
        assert!(own_dirs("2:cpu,cpuacct,pids:/docker/abcdef\n", CONTAINER, &[Controller::Pids]).is_empty());
        // Shared with cpuset: a new cgroup there has no CPUs to run on.
        let cpuset = "45 31 0:40 / /sys/fs/cgroup/cpuset,pids rw - cgroup cgroup rw,cpuset,pids\n";
        assert!(own_dirs("3:cpuset,pids:/x\n", cpuset, &[Controller::Pids]).is_empty());
    }

    #[test]
    fn only_a_gone_daemon_of_this_pid_namespace_loses_its_directory() {
        let me = Owner::this().unwrap();
        // This daemon, and another live process of this namespace.
        assert!(!Owner::gone(&me.name(), &me));
        let init = format!("agentd-{}-1-{}", me.pid_ns, start_time(1).unwrap());
        assert!(!Owner::gone(&init, &me));
        // A pid whose process started at another time: a reused pid.
        assert!(Owner::gone(&format!("agentd-{}-1-{}", me.pid_ns, start_time(1).unwrap() + 1), &me));
        // Another PID namespace's daemon: never judged from here.
        assert!(!Owner::gone(&format!("agentd-{}-999999-5", me.pid_ns + 1), &me));
        assert!(Owner::gone(&format!("agentd-{}-999999-5", me.pid_ns), &me) || start_time(999_999).is_some());
        assert!(!Owner::gone("agentd-123", &me) && !Owner::gone("agentd-x-y-z", &me));
    }

    #[test]
    fn sizes_read_as_a_user_writes_them() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("67108864"), Ok(64 << 20));
        assert_eq!(parse_size("1M"), Err(SizeError::TooSmall("1M".into())));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-5G").is_err());
        assert!(matches!(parse_size("99999999999999T"), Err(SizeError::TooLarge(_))));
        assert!(parse_size("2IB").is_err() && parse_size("16777216iiii").is_err() && parse_size("").is_err());
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
    }
}
