//! What the helper does to the command's process just before `execve`:
//! Landlock (the filesystem, TCP, signals and abstract sockets) and a
//! seccomp filter (sockets, ptrace, mounts, io_uring, terminal injection).
//! Both are inherited by everything the command starts and cannot be
//! lifted; `no_new_privs` (set by Landlock) keeps setuid programs from
//! escaping them.

use std::path::{Path, PathBuf};

use agentd_protocol::session::SandboxProfile;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::libc;

use super::Spec;

/// The newest Landlock ABI this code asks for; older kernels get what they
/// support (best effort), newer ones are not asked for more.
const ABI_WANTED: ABI = ABI::V6;

/// System directories every profile may read and execute from.
pub const SYSTEM_READ: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev", "/proc"];

/// Device files every profile may write (and read).
const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Applies Landlock to this process.
pub fn landlock(spec: &Spec) -> Result<(), String> {
    let fs_all = AccessFs::from_all(ABI_WANTED);
    let read = AccessFs::from_read(ABI_WANTED);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(fs_all)
        .map_err(|e| format!("landlock: {e}"))?;
    if !spec.network || spec.profile == SandboxProfile::ReadOnly {
        // Handled with no rule: no TCP bind or connect at all.
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI_WANTED)).map_err(|e| format!("landlock: {e}"))?;
    }
    let ruleset = ruleset.scope(Scope::Signal | Scope::AbstractUnixSocket).map_err(|e| format!("landlock: {e}"))?;
    let mut created = ruleset.create().map_err(|e| format!("landlock: {e}"))?;

    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    match spec.profile {
        SandboxProfile::WorkspaceWrite => grants.push((PathBuf::from("/"), read)),
        _ => {
            for dir in SYSTEM_READ {
                grants.push((PathBuf::from(dir), read));
            }
            for path in &spec.read {
                grants.push((path.clone(), read));
            }
        }
    }
    for dev in DEVICES_RW {
        grants.push((PathBuf::from(dev), AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate));
    }
    grants.push((spec.tmp.clone(), fs_all));
    for root in &spec.roots {
        let access = if spec.profile == SandboxProfile::WorkspaceWrite { fs_all } else { read };
        grants.push((root.clone(), access));
    }
    for (path, access) in grants {
        let Ok(fd) = PathFd::new(&path) else { continue };
        let access = if is_dir(&path) { access } else { access & AccessFs::from_file(ABI_WANTED) };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("landlock rule for {}: {e}", path.display()))?;
    }
    let status = created.restrict_self().map_err(|e| format!("landlock: {e}"))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("landlock: the kernel enforced nothing".into());
    }
    Ok(())
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// Installs the seccomp filter (after Landlock, which set `no_new_privs`).
pub fn seccomp(spec: &Spec) -> Result<(), String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;

    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let always: &[libc::c_long] = &[
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        // io_uring can open sockets and files past the filter.
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        // Mounts could undo the read-only binds over protected files.
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_bpf,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ];
    for nr in always {
        rules.insert(*nr, Vec::new());
    }
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| format!("seccomp: {e}"))
    };
    let rule = |c: Vec<SeccompCondition>| SeccompRule::new(c).map_err(|e| format!("seccomp: {e}"));
    if spec.profile == SandboxProfile::ReadOnly {
        // No sockets at all (socketpair is another call and stays).
        rules.insert(libc::SYS_socket, Vec::new());
    } else if !spec.network {
        // Local (AF_UNIX) sockets only.
        rules.insert(libc::SYS_socket, vec![rule(vec![cond(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?])?]);
    }
    // Typing into the terminal of someone else's shell.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCSTI)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCLINUX)?])?,
        ],
    );
    // The x32 numbering reaches the same calls on x86_64.
    #[cfg(target_arch = "x86_64")]
    {
        const X32: i64 = 0x4000_0000;
        let native: Vec<(i64, Vec<SeccompRule>)> = rules.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (nr, r) in native {
            rules.insert(nr | X32, r);
        }
    }
    let arch: TargetArch = std::env::consts::ARCH.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    let program: seccompiler::BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// The kernel's Landlock ABI version, 0 when it has none (or it is off).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
    // SAFETY: the version query passes no pointer the kernel would read.
    #[allow(unsafe_code)]
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}
