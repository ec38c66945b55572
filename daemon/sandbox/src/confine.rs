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
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev", "/proc", "/nix", "/snap"];

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
    if spec.namespaces && spec.profile != SandboxProfile::Off {
        // The call's own tmpfs (helper::enter_namespaces), not the host's.
        grants.push((PathBuf::from("/dev/shm"), fs_all));
    }
    for root in &spec.roots {
        let access = if spec.profile == SandboxProfile::WorkspaceWrite { fs_all } else { read };
        grants.push((root.clone(), access));
    }
    // The sandbox's own package caches, bound over the tools' places by
    // then (helper::enter_namespaces): the rule holds the bound directory.
    if spec.profile == SandboxProfile::WorkspaceWrite && spec.namespaces {
        for (_, target) in &spec.caches {
            grants.push((target.clone(), fs_all));
        }
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

/// Drops every capability (effective, permitted, inheritable, ambient and
/// the bounding set): a user who is root, or root in the call's user
/// namespace, keeps no power over files it does not own and cannot mount.
#[allow(unsafe_code)]
pub fn drop_capabilities() -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments. EINVAL past the last one.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            break;
        }
    }
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) };
    let header = Header { version: VERSION_3, pid: 0 };
    let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: a version-3 header and the two data structs it expects.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    if rc != 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(())
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
        // Ownership and extended attributes: nothing a command needs, and
        // Landlock does not cover them.
        libc::SYS_chown,
        libc::SYS_fchown,
        libc::SYS_lchown,
        libc::SYS_fchownat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
    ];
    for nr in always {
        rules.insert(*nr, Vec::new());
    }
    let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| format!("seccomp: {e}"))
    };
    let rule = |c: Vec<SeccompCondition>| SeccompRule::new(c).map_err(|e| format!("seccomp: {e}"));
    // Socket families: none in read_only; Unix only without network; with
    // it, also IPv4, IPv6 and routing netlink (getaddrinfo asks it) — never
    // VSOCK (the hypervisor's host), packet, crypto, Bluetooth or the rest.
    // No Unix datagram sockets at all: an unconnected one sends to any
    // path (journald, syslog, the service manager's notify socket) and no
    // connect is there for the wall to check.
    let unix = libc::AF_UNIX as u64;
    // Unix sockets: stream and seqpacket only (SOCK_RAW is a datagram
    // socket to the kernel, and so may be any type to come): one rule per
    // other value of the type's low bits.
    let unix_other_types = || -> Result<Vec<SeccompRule>, String> {
        let (stream, seqpacket) = (libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64);
        (0u64..16)
            .filter(|t| *t != stream && *t != seqpacket)
            .map(|t| rule(vec![cond(0, SeccompCmpOp::Eq, unix)?, cond(1, SeccompCmpOp::MaskedEq(0xf), t)?]))
            .collect()
    };
    let mut socket_rules = unix_other_types()?;
    if spec.profile == SandboxProfile::ReadOnly {
        socket_rules = Vec::new(); // an empty list: every socket() refused
    } else if !spec.network {
        socket_rules.push(rule(vec![cond(0, SeccompCmpOp::Ne, unix)?])?);
    } else {
        let (inet, inet6, netlink) = (libc::AF_INET as u64, libc::AF_INET6 as u64, libc::AF_NETLINK as u64);
        socket_rules.push(rule(vec![
            cond(0, SeccompCmpOp::Ne, unix)?,
            cond(0, SeccompCmpOp::Ne, inet)?,
            cond(0, SeccompCmpOp::Ne, inet6)?,
            cond(0, SeccompCmpOp::Ne, netlink)?,
        ])?);
        socket_rules.push(rule(vec![
            cond(0, SeccompCmpOp::Eq, netlink)?,
            cond(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE as u64)?,
        ])?);
    }
    rules.insert(libc::SYS_socket, socket_rules);
    // socketpair: Unix stream and seqpacket only (a datagram pair can still
    // send to any path).
    let mut pair_rules = vec![rule(vec![cond(0, SeccompCmpOp::Ne, unix)?])?];
    pair_rules.extend(unix_other_types()?);
    rules.insert(libc::SYS_socketpair, pair_rules);
    // No setuid or setgid bits (the mode argument's position per call).
    for (nr, arg) in [(libc::SYS_chmod, 1u8), (libc::SYS_fchmod, 1), (libc::SYS_fchmodat, 2), (452, 2)] {
        let mut r = Vec::new();
        for bit in [libc::S_ISUID as u64, libc::S_ISGID as u64] {
            r.push(rule(vec![cond(arg, SeccompCmpOp::MaskedEq(bit), bit)?])?);
        }
        rules.insert(nr, r);
    }
    // Typing into the terminal of someone else's shell.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCSTI)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, libc::TIOCLINUX)?])?,
        ],
    );
    let arch: TargetArch = std::env::consts::ARCH.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    let mut program: seccompiler::BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    // The x32 numbering reaches the same calls on x86_64: refused as a
    // whole, ahead of the table (a table twice as long cost the kernel
    // twice as long to check and cache at every install).
    #[cfg(target_arch = "x86_64")]
    {
        use seccompiler::sock_filter;
        const X32: u32 = 0x4000_0000;
        let ret_errno = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let prefix = [
            // A = the syscall number (offset 0 of seccomp_data).
            sock_filter { code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, jt: 0, jf: 0, k: 0 },
            // An x32 number: on to the refusal; else past it.
            sock_filter { code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16, jt: 0, jf: 1, k: X32 },
            sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: ret_errno },
        ];
        program.splice(0..0, prefix);
    }
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
