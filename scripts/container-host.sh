# shellcheck shell=bash
# Sourced by build-image.sh and smoke-image.sh: the options this machine's
# podman or buildah needs to run any container at all, found from the
# machine's own facts and each said with its reason. Neither matters to the
# image; both are the build or test host's peculiarities.
#
# Sets ENGINE_OPTS (an array) for `podman run` and `buildah bud` alike.

ENGINE_OPTS=()

engine_note() { printf '%s: %s\n' "$(basename "$0" .sh)" "$*"; }

# crun refuses a cgroup "hybrid" layout (v1 controllers mounted with a
# cgroup2 tree at /sys/fs/cgroup/unified): "cgroups in hybrid mode not
# supported". runc accepts it.
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] \
  && grep -q ' /sys/fs/cgroup/unified cgroup2 ' /proc/mounts 2>/dev/null; then
  if command -v runc >/dev/null 2>&1; then
    ENGINE_OPTS+=(--runtime runc)
    engine_note "cgroups are in hybrid mode, which crun refuses: using runc"
  else
    engine_note "cgroups are in hybrid mode, which crun refuses, and runc is not installed (Debian package runc)" >&2
  fi
fi

# podman asks for 1048576 open files and processes in every container. Root
# without CAP_SYS_RESOURCE (a machine that is itself a container or a
# restricted VM) cannot raise its hard limits, and the runtime fails with
# "setrlimit RLIMIT_NOFILE: Operation not permitted". Then the container
# gets the limits podman itself runs with: the hard open-file limit, and
# processes up to the hard limit or pid_max, whichever is lower (podman
# lowers its own to pid_max).
cap_eff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
if [ -n "$cap_eff" ] && [ $(( 0x$cap_eff >> 24 & 1 )) = 0 ]; then
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  pid_max=$(cat /proc/sys/kernel/pid_max)
  [ "$nproc" = unlimited ] && nproc=$pid_max
  [ "$nproc" -gt "$pid_max" ] && nproc=$pid_max
  if [ "$nofile" != unlimited ] && [ "$nofile" -lt 1048576 ] || [ "$nproc" -lt 1048576 ]; then
    ENGINE_OPTS+=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    engine_note "no CAP_SYS_RESOURCE to raise limits: containers get nofile=$nofile, nproc=$nproc"
  fi
fi
unset cap_eff nofile nproc pid_max
