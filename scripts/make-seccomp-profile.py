#!/usr/bin/env python3
"""Writes deploy/seccomp/agentd.json, the seccomp profile for agentd's container.

agentd confines every Bash command in a sandbox of its own: user, PID, mount
and network namespaces, Landlock and a seccomp filter (agentd-sandbox). In a
container that sandbox nests inside the container's own seccomp filter, and
the usual default (Docker's and containerd's, which Kubernetes' RuntimeDefault
is on most clusters) refuses what nesting needs to a process without
capabilities: unshare, mount, pidfd_getfd. This profile is that default's
allowlist for a container without capabilities, plus those few calls, each
held as narrowly as a seccomp rule can.

    scripts/make-seccomp-profile.py            write deploy/seccomp/agentd.json
    scripts/make-seccomp-profile.py --check    exit 1 if that file is stale
    scripts/make-seccomp-profile.py --baseline -o FILE
                                               the default's allowlist alone
                                               (what a container gets
                                               without our profile)
    scripts/make-seccomp-profile.py --compare DEFAULT.json
                                               show how the baseline differs
                                               from a Docker default.json

The output is in the OCI runtime-spec format (`architectures`, no
`includes`/`excludes`), the one format every consumer reads the same way:
podman and CRI-O (--security-opt seccomp=FILE), Docker, and containerd under
Kubernetes (seccompProfile type Localhost), which decodes the file straight
into the OCI structure and would silently drop Docker's conditional fields.
Because of that, the default's rules that apply only to a container holding a
capability (CAP_SYS_ADMIN's mount and unshare, CAP_SYS_PTRACE's pidfd_getfd,
...) are left out: agentd's container runs as an unprivileged user with no
capabilities, where those rules never apply.

Standard library only. Edit the rule lists below, never the JSON.
"""

import argparse
import json
import os
import sys

# Linux clone(2)/unshare(2) flags that make a namespace.
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)

EPERM = 1
ENOSYS = 38

# Address families socket(2) may not open: AF_ALG (38, the kernel's crypto
# API) and AF_VSOCK (40, the hypervisor's sockets), as in the default.
AF_ALG = 38
AF_VSOCK = 40

# The default's allowlist for a container without capabilities, by topic.
# A name an architecture does not have (the 32-bit *64 variants on x86_64,
# the ARM-only calls on x86) is skipped by the runtime when it loads the
# filter, so one list serves every architecture.
BASELINE = {
    "files and directories": """
        access faccessat faccessat2 chdir fchdir getcwd
        chmod fchmod fchmodat fchmodat2 chown chown32 fchown fchown32 fchownat lchown lchown32
        creat open openat openat2 close close_range dup dup2 dup3 fcntl fcntl64 flock
        fsync fdatasync sync syncfs sync_file_range fallocate ftruncate ftruncate64 truncate truncate64
        getdents getdents64 link linkat symlink symlinkat readlink readlinkat
        rename renameat renameat2 unlink unlinkat mkdir mkdirat rmdir mknod mknodat
        stat stat64 lstat lstat64 fstat fstat64 fstatat64 newfstatat statx
        statfs statfs64 fstatfs fstatfs64 umask utime utimes utimensat utimensat_time64 futimesat
        name_to_handle_at lseek _llseek
        read readv pread64 preadv preadv2 write writev pwrite64 pwritev pwritev2
        sendfile sendfile64 splice tee vmsplice copy_file_range readahead fadvise64 fadvise64_64 cachestat
    """,
    "extended attributes": """
        getxattr lgetxattr fgetxattr getxattrat setxattr lsetxattr fsetxattr setxattrat
        listxattr llistxattr flistxattr listxattrat removexattr lremovexattr fremovexattr removexattrat
    """,
    "waiting on descriptors": """
        inotify_init inotify_init1 inotify_add_watch inotify_rm_watch fanotify_mark
        poll ppoll ppoll_time64 select _newselect pselect6 pselect6_time64
        epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_wait epoll_wait_old epoll_pwait epoll_pwait2
        eventfd eventfd2 signalfd signalfd4
        timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64
        pipe pipe2 ioctl
    """,
    "asynchronous I/O": """
        io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents io_pgetevents_time64
        ioprio_get ioprio_set
    """,
    "memory": """
        brk mmap mmap2 munmap mremap mprotect pkey_alloc pkey_free pkey_mprotect madvise mincore msync
        mlock mlock2 mlockall munlock munlockall membarrier memfd_create memfd_secret
        remap_file_pages map_shadow_stack mseal
    """,
    "processes and threads": """
        fork vfork execve execveat exit exit_group wait4 waitid waitpid
        kill tkill tgkill pidfd_open pidfd_send_signal process_mrelease
        getpid getppid gettid getpgid setpgid getpgrp getsid setsid
        set_tid_address set_robust_list get_robust_list set_thread_area get_thread_area rseq
        prctl capget capset getpriority setpriority getcpu getrusage times
        getrlimit setrlimit prlimit64 ugetrlimit
        sched_getaffinity sched_setaffinity sched_getattr sched_setattr sched_getparam sched_setparam
        sched_getscheduler sched_setscheduler sched_get_priority_max sched_get_priority_min
        sched_rr_get_interval sched_rr_get_interval_time64 sched_yield
        futex futex_time64 futex_waitv futex_wait futex_wake futex_requeue
        restart_syscall uretprobe riscv_hwprobe
    """,
    "credentials (within what the process already holds)": """
        getuid getuid32 geteuid geteuid32 getgid getgid32 getegid getegid32
        getresuid getresuid32 getresgid getresgid32 getgroups getgroups32
        setuid setuid32 setgid setgid32 setreuid setreuid32 setregid setregid32
        setresuid setresuid32 setresgid setresgid32 setfsuid setfsuid32 setfsgid setfsgid32
        setgroups setgroups32
    """,
    "signals": """
        rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend
        rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo
        sigaltstack sigprocmask sigreturn pause alarm
    """,
    "time": """
        clock_gettime clock_gettime64 clock_getres clock_getres_time64
        clock_nanosleep clock_nanosleep_time64 clock_adjtime clock_adjtime64 adjtimex
        gettimeofday time nanosleep getitimer setitimer
        timer_create timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
    """,
    "sockets (socket itself is below, by family)": """
        socketpair bind connect listen accept accept4 getsockname getpeername getsockopt setsockopt
        send sendto sendmsg sendmmsg recv recvfrom recvmsg recvmmsg recvmmsg_time64 shutdown socketcall
    """,
    "System V and POSIX IPC": """
        ipc msgget msgctl msgsnd msgrcv semget semctl semop semtimedop semtimedop_time64
        shmget shmat shmdt shmctl
        mq_open mq_unlink mq_getsetattr mq_notify mq_timedreceive mq_timedreceive_time64
        mq_timedsend mq_timedsend_time64
    """,
    "about the system": """
        uname sysinfo getrandom listmount statmount
    """,
    "confining oneself (Landlock, seccomp)": """
        seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self
    """,
    # Harmless since Linux 4.8, when ptrace stopped being a way around
    # seccomp; debuggers and strace need them.
    "tracing one's own processes": """
        ptrace process_vm_readv process_vm_writev
    """,
    # Each architecture's own calls, skipped elsewhere.
    "architecture-specific": """
        arch_prctl modify_ldt
        arm_fadvise64_64 arm_sync_file_range sync_file_range2 breakpoint cacheflush set_tls
        swapcontext s390_pci_mmio_read s390_pci_mmio_write s390_runtime_instr riscv_flush_icache
    """,
}

# personality(2) personas the default allows: Linux, with
# UNAME26 (0x20000), with PER_LINUX32 (8), both, and the query (0xffffffff).
PERSONAS = [0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF]

# What agentd's Bash sandbox needs on top, found by running the image with
# each call removed in turn (scripts/smoke-image.sh shows the level):
# (names, why, argument filters or None).
# The namespaces agentd-sandbox makes for each Bash call in one unshare,
# after joining the call's user namespace (see below): without and with the
# network namespace of the gated network.
CALL_NAMESPACES = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
CALL_NAMESPACES_GATED = CALL_NAMESPACES | CLONE_NEWNET

# What agentd's Bash sandbox needs on top, found by running the real helper
# under this profile (the test `the_container_profile_lets_the_sandbox_stand`
# in tests/e2e/seccomp.rs loads it as a filter around the real daemon and
# fails on any call it refuses) and the image with each call removed in turn
# (scripts/smoke-image.sh shows the level): (names, why, argument filters or
# None). Several filters in one entry are ANDed; entries are ORed.
AGENTD = [
    (
        ["unshare"],
        "agentd-sandbox makes each call's user namespace ahead of the call, in a process of its own, by an "
        "unshare holding CLONE_NEWUSER; inside a new user namespace the caller has capabilities over nothing "
        "of the container's",
        [{"index": 0, "value": CLONE_NEWUSER, "valueTwo": CLONE_NEWUSER, "op": "SCMP_CMP_MASKED_EQ"}],
    ),
    (
        ["setns"],
        "the call's helper joins that prepared user namespace; setns of a user namespace needs CAP_SYS_ADMIN "
        "in it, which an unprivileged process holds only in one it (its user) made, so this reaches nothing the "
        "unshare above does not; setns of any other namespace type stays refused",
        [{"index": 1, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_EQ"}],
    ),
    (
        ["unshare"],
        "then, inside that user namespace, the call's PID, mount, IPC and UTS namespaces in one unshare "
        "without CLONE_NEWUSER (the kernel allows it only to a process with CAP_SYS_ADMIN in its own user "
        "namespace, i.e. only inside the call's, never in the container's); exactly that set, no other",
        [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": CALL_NAMESPACES, "op": "SCMP_CMP_MASKED_EQ"}],
    ),
    (
        ["unshare"],
        "the same set with the network namespace, for a call whose network goes through agentd's gate",
        [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": CALL_NAMESPACES_GATED, "op": "SCMP_CMP_MASKED_EQ"}],
    ),
    (
        ["unshare"],
        "unshare without any namespace (CLONE_FILES, CLONE_FS, CLONE_SYSVSEM) changes only the caller",
        [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
    ),
    (
        ["mount", "mount_setattr"],
        "inside the call's mount namespace: / read-only, the workspace writable, protected paths bound "
        "read-only, a private /dev/shm and /proc (the kernel allows it only in a user namespace the caller owns, "
        "so nothing of the container's mounts can change)",
        None,
    ),
    (
        ["pidfd_getfd"],
        "the Unix-socket wall: the call's supervisor takes the socket a command passes to connect (the kernel "
        "still requires ptrace rights over that process, i.e. one of its own)",
        None,
    ),
]


def names(block):
    return block.split()


def baseline_rules():
    allow = sorted({n for block in BASELINE.values() for n in names(block)})
    rules = [{"names": allow, "action": "SCMP_ACT_ALLOW", "comment": "the default allowlist"}]
    # socket(2) by address family: everything but AF_ALG and AF_VSOCK.
    for op, value in [("SCMP_CMP_LT", AF_ALG), ("SCMP_CMP_EQ", AF_ALG + 1), ("SCMP_CMP_GT", AF_VSOCK)]:
        rules.append(
            {
                "names": ["socket"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": value, "valueTwo": 0, "op": op}],
                "comment": "socket: any family but AF_ALG and AF_VSOCK",
            }
        )
    for persona in PERSONAS:
        rules.append(
            {
                "names": ["personality"],
                "action": "SCMP_ACT_ALLOW",
                "args": [{"index": 0, "value": persona, "valueTwo": 0, "op": "SCMP_CMP_EQ"}],
                "comment": "personality: the Linux personas only",
            }
        )
    # clone(2) makes threads and processes, never namespaces (the flags are
    # its first argument on every architecture this image is built for;
    # s390 swaps them, and is not one of them).
    rules.append(
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
            "comment": "clone: no namespace flags",
        }
    )
    # clone3(2) takes its flags in a structure seccomp cannot read: it says
    # ENOSYS, and the C library falls back to clone, whose flags it can.
    rules.append(
        {
            "names": ["clone3"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": ENOSYS,
            "comment": "clone3: not implemented, so callers fall back to clone",
        }
    )
    return rules


def agentd_rules():
    rules = []
    for call_names, why, args in AGENTD:
        rule = {"names": call_names, "action": "SCMP_ACT_ALLOW"}
        if args:
            rule["args"] = args
        rule["comment"] = "agentd: " + why
        rules.append(rule)
    return rules


def profile(with_agentd):
    return {
        "comment": (
            "Generated by scripts/make-seccomp-profile.py from its rule lists; edit those and run it again. "
            + (
                "The default container allowlist plus what agentd's nested Bash sandbox needs."
                if with_agentd
                else "The default container allowlist alone (no additions for agentd)."
            )
        ),
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": EPERM,
        "architectures": [
            "SCMP_ARCH_X86_64",
            "SCMP_ARCH_X86",
            "SCMP_ARCH_X32",
            "SCMP_ARCH_AARCH64",
            "SCMP_ARCH_ARM",
        ],
        "syscalls": baseline_rules() + (agentd_rules() if with_agentd else []),
    }


def render(with_agentd):
    return json.dumps(profile(with_agentd), indent=2) + "\n"


def compare(path):
    """Prints how the baseline's plain allowlist differs from a Docker default.json's."""
    with open(path) as f:
        theirs = json.load(f)
    plain = set()
    for rule in theirs["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args") and not rule.get("includes", {}).get("caps"):
            plain.update(rule["names"])
    ours = {n for block in BASELINE.values() for n in names(block)}
    only_theirs, only_ours = sorted(plain - ours), sorted(ours - plain)
    print("in", path, "and not in the baseline:", " ".join(only_theirs) or "nothing")
    print("in the baseline and not in", path + ":", " ".join(only_ours) or "nothing")
    return 0 if not only_theirs and not only_ours else 1


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    default_out = os.path.join(top, "deploy", "seccomp", "agentd.json")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", default=None, help="where to write (default deploy/seccomp/agentd.json)")
    parser.add_argument("--baseline", action="store_true", help="the default allowlist alone, without agentd's calls")
    parser.add_argument("--check", action="store_true", help="exit 1 if the output file differs from the rules")
    parser.add_argument("--compare", metavar="DEFAULT_JSON", help="compare the baseline with a Docker default.json")
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare)
    out = args.output or default_out
    text = render(not args.baseline)
    if args.check:
        try:
            with open(out) as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print(f"{out} is stale: run scripts/make-seccomp-profile.py", file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
