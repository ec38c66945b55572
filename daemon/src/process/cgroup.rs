//! A cgroup per call, where the daemon may make them: a memory limit
//! (opt-in: `agentd --call-memory-limit`) and a process limit that holds
//! root too (`pids.max`, beside the `RLIMIT_NPROC` that the kernel does not
//! hold root to).
//!
//! Built for cgroup v1 hierarchies the daemon can write (its own cgroup's
//! directory in the `memory` and `pids` hierarchies: a container or VM
//! running it as root, or a hierarchy delegated to its user). On cgroup v2
//! a daemon must first move itself into a leaf of a delegated subtree to
//! give its children controllers; that is not built, and `daemon/info`
//! says so. The helper joins the call's cgroups (writes `0` to their
//! `cgroup.procs`) before it starts anything, so every process of the call
//! is in them; the daemon removes them when the call's processes are gone.

use std::path::{Path, PathBuf};

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

/// The directories the calls' cgroups are made in, per controller.
#[derive(Debug, Default)]
pub struct Cgroups {
    bases: Vec<(Controller, PathBuf)>,
    memory_limit: Option<u64>,
    pids_limit: u64,
    /// Why calls get no cgroup of their own (`None`: they do).
    reason: Option<String>,
}

/// Where `/proc/self/cgroup` puts this process in each v1 hierarchy that
/// `mountinfo` shows mounted: the directory of each of `wanted`.
pub fn own_dirs(cgroup: &str, mountinfo: &str, wanted: &[Controller]) -> Vec<(Controller, PathBuf)> {
    let mut found = Vec::new();
    for line in cgroup.lines() {
        // `ID:CONTROLLERS:PATH`; v2's line is `0::PATH`.
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
        for controller in wanted {
            if !controllers.split(',').any(|c| c == controller.name()) {
                continue;
            }
            if let Some(dir) = mounted_at(mountinfo, *controller, path) {
                found.push((*controller, dir));
            }
        }
    }
    found
}

/// The directory of cgroup `path` in the v1 hierarchy of `controller`.
fn mounted_at(mountinfo: &str, controller: Controller, path: &str) -> Option<PathBuf> {
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
        // Mounted from its root, or from a part holding this cgroup (a
        // container's view).
        let inside = if root == "/" { path } else { path.strip_prefix(root)? };
        let inside = inside.trim_start_matches('/');
        if inside.split('/').any(|c| c == "..") {
            return None;
        }
        Some(Path::new(point).join(inside))
    })
}

impl Cgroups {
    /// Finds where calls' cgroups can be made (a directory `agentd-PID` in
    /// the daemon's own cgroup of each hierarchy), removing those of
    /// daemons that are gone. `memory_limit`: the opt-in limit of a call's
    /// memory, in bytes.
    pub fn probe(memory_limit: Option<u64>, pids_limit: u64) -> Cgroups {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let (cgroup, mountinfo) = (read("/proc/self/cgroup"), read("/proc/self/mountinfo"));
        let mut wanted = vec![Controller::Pids];
        if memory_limit.is_some() {
            wanted.push(Controller::Memory);
        }
        let mut bases = Vec::new();
        let mut failed = Vec::new();
        for (controller, dir) in own_dirs(&cgroup, &mountinfo, &wanted) {
            remove_stale(&dir);
            let base = dir.join(format!("agentd-{}", std::process::id()));
            match std::fs::create_dir(&base) {
                Ok(()) => bases.push((controller, base)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bases.push((controller, base)),
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
                "no cgroup v1 hierarchy of it is mounted".to_owned()
            };
            format!("no {} cgroup per call: {why}", missing.join(" or "))
        });
        if let Some(why) = &reason {
            tracing::info!("{why}");
        }
        Cgroups { bases, memory_limit, pids_limit, reason }
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
    /// where there are none to make. An error when one cannot be set up:
    /// the call then does not run (a limit the user asked for is not
    /// silently dropped).
    pub fn for_call(&self, marker: &str) -> Result<Option<CallCgroup>, String> {
        if self.bases.is_empty() {
            return Ok(None);
        }
        let mut call = CallCgroup { dirs: Vec::new(), memory_limit: self.memory_limit };
        for (controller, base) in &self.bases {
            let dir = base.join(format!("call-{marker}"));
            std::fs::create_dir(&dir).map_err(|e| format!("make the call's cgroup {}: {e}", dir.display()))?;
            call.dirs.push((*controller, dir.clone()));
            let set = |file: &str, value: u64| {
                std::fs::write(dir.join(file), value.to_string())
                    .map_err(|e| format!("set {file} of the call's cgroup: {e}"))
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
        Ok(Some(call))
    }
}

/// Removes the calls' cgroups of a daemon that is gone (`agentd-PID` with
/// no such process): empty ones only, as the kernel allows.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("agentd-")).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() as i32 || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(calls) = std::fs::read_dir(entry.path()) {
            for call in calls.flatten().filter(|c| c.file_name().to_string_lossy().starts_with("call-")) {
                let _ = std::fs::remove_dir(call.path());
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

/// One call's cgroups; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct CallCgroup {
    dirs: Vec<(Controller, PathBuf)>,
    memory_limit: Option<u64>,
}

impl CallCgroup {
    /// The `cgroup.procs` files the helper writes itself into.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(_, d)| d.join("cgroup.procs")).collect()
    }

    /// The memory limit, when the kernel killed a process of the call for
    /// reaching it.
    pub fn memory_limit_hit(&self) -> Option<u64> {
        let (_, dir) = self.dirs.iter().find(|(c, _)| *c == Controller::Memory)?;
        let control = std::fs::read_to_string(dir.join("memory.oom_control")).ok()?;
        let kills = control.lines().find_map(|l| l.strip_prefix("oom_kill "))?.trim().parse::<u64>().ok()?;
        self.memory_limit.filter(|_| kills > 0)
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        let dirs: Vec<PathBuf> = self.dirs.drain(..).map(|(_, d)| d).collect();
        let remove = move || dirs.iter().all(|d| !d.exists() || std::fs::remove_dir(d).is_ok());
        if remove() {
            return;
        }
        // Killed processes take a moment to leave; a job's may linger.
        let _ = std::thread::Builder::new().name("cgroup-cleanup".into()).spawn(move || {
            for _ in 0..100 {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if remove() {
                    return;
                }
            }
            tracing::warn!("a call's cgroup could not be removed: its processes outlived it");
        });
    }
}

/// A size as the user writes it: bytes, or with `K`, `M`, `G` (powers of
/// 1,024; `KiB`, `MB`… read the same).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let number: u64 = number.parse().map_err(|_| format!("not a size: {text:?} (say 512M or 2G)"))?;
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches('B').trim_end_matches('I') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("not a size: {text:?} (say 512M or 2G)")),
    };
    let bytes = number.checked_shl(shift).filter(|b| b >> shift == number).ok_or(format!("too large: {text:?}"))?;
    if bytes < 16 << 20 {
        return Err(format!("{text:?} is less than 16 MiB: no command would start"));
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
        assert_eq!(
            found,
            [
                (Controller::Pids, PathBuf::from("/sys/fs/cgroup/pids")),
                (Controller::Memory, PathBuf::from("/sys/fs/cgroup/memory/process_api/x")),
            ]
        );
        // A hierarchy mounted from a part of it (a container's view).
        let pids = "2:cpu,cpuacct,pids:/docker/abc/y\n";
        assert_eq!(
            own_dirs(pids, CONTAINER, &[Controller::Pids]),
            [(Controller::Pids, "/sys/fs/cgroup/cpu,cpuacct/y".into())]
        );
    }

    #[test]
    fn v2_or_unmounted_or_escaping_paths_give_no_directory() {
        assert!(own_dirs("0::/user.slice/agentd.service\n", MOUNTINFO, &[Controller::Memory]).is_empty());
        assert!(own_dirs("4:memory:/x\n", "", &[Controller::Memory]).is_empty());
        assert!(own_dirs("4:memory:/a/../../etc\n", MOUNTINFO, &[Controller::Memory]).is_empty());
        // Outside the part a hierarchy is mounted from.
        assert!(own_dirs("2:cpu,cpuacct,pids:/elsewhere\n", CONTAINER, &[Controller::Pids]).is_empty());
    }

    #[test]
    fn sizes_read_as_a_user_writes_them() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("67108864"), Ok(64 << 20));
        assert!(parse_size("1M").unwrap_err().contains("less than 16 MiB"));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-5G").is_err());
        assert!(parse_size("99999999999999T").unwrap_err().contains("too large"));
    }
}
