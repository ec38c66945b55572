#!/usr/bin/env bash
# Runs the agentd image (scripts/build-image.sh) under podman as a restricted
# pod would run it, and checks that its Bash sandbox is whole there:
#
#   1. With the settings the sandbox needs (deploy/seccomp/agentd.json and an
#      unmasked /proc, see FULL below) the daemon starts under
#      AGENTD_REQUIRE_SANDBOX=1, its socket appears in the private directory
#      it makes inside the shared (world-writable) /run/agentd, and
#      `agentctl status --require-sandbox` succeeds.
#   2. A Bash call sees a /proc of its own (its PID namespace's).
#   3. In a scratch git repository in /workspace, a Bash call that writes
#      .git/hooks/pre-commit fails and leaves no file (the call is approved:
#      the kernel's wall stops it, not the permission engine), while a write
#      to an ordinary file in the same call's workspace succeeds.
#   4. The daemon stops cleanly on SIGTERM (exit 0).
#   5. The same holds with the container in a user namespace of its own
#      (what Kubernetes' hostUsers: false gives a pod).
#   6. The same container under the default container seccomp profile
#      (Docker's and containerd's, i.e. Kubernetes' RuntimeDefault on most
#      clusters) refuses to start, saying in one line which walls are
#      missing.
#   7. Under podman's own default profile (which allows unshare and mount)
#      with /proc masked, agentd refuses to start too: a PID namespace's own
#      /proc cannot be mounted there, and a call would see every process.
#
#   scripts/smoke-image.sh [IMAGE]     (default localhost/agentd:latest)
#
# Run as root (or a user whose rootless podman works). Installs podman and
# runc with apt-get when they are missing and it can. Exits non-zero on any
# failed check.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
image=${1:-localhost/agentd:latest}

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "smoke-image: installing podman and runc (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null
  fi
fi
command -v podman >/dev/null 2>&1 || { echo "smoke-image: podman is not installed (Debian package podman)" >&2; exit 1; }
podman image exists "$image" || { echo "smoke-image: no image $image: run scripts/build-image.sh" >&2; exit 1; }

python3 scripts/make-seccomp-profile.py --check

# This machine's own needs for running any container (cgroups, limits).
. scripts/container-host.sh

work=$(mktemp -d)
tag="agentd-smoke-$$"
started=()
cleanup() {
  for c in "${started[@]}"; do podman rm -f "$c" >/dev/null 2>&1 || true; done
  podman volume rm -f "$tag-state" "$tag-userns-state" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
# Each check's output. Set before any check: under `set -u` a check that
# reports what an earlier one left (section 5 after a daemon that never came
# up in section 1) must not abort the script before its summary (issue 49:
# "out: unbound variable" hid which checks had failed).
out=""
ok() { echo "  ok: $*"; }
failed() { echo "  FAILED: $*"; failures=$((failures + 1)); }
section() { printf '\n== %s\n' "$*"; }
indent() { sed 's/^/    /'; }

# What every run shares, as a restricted pod has it: no capabilities, no
# privilege escalation, a read-only root file system with nothing writable
# but its volumes; the state on a volume; /run/agentd and /tmp like
# Kubernetes emptyDirs (host directories, mode 0777 and 1777: the daemon must
# make its own private directory inside the first); /workspace a volume too.
# /tmp must be writable: the sandbox helper's start-up probe makes it the
# writable root of a trial call, and under a read-only /tmp it reports the
# namespaces (and so network) walls missing.
mkdir -p "$work/run" "$work/tmp" "$work/workspace"
chmod 0777 "$work/run" "$work/workspace"
chmod 1777 "$work/tmp"
podman volume create "$tag-state" >/dev/null
pod_like() {
  local name=$1 state=${2:-$tag-state}
  rm -rf "${work:?}/run/"* "${work:?}/workspace/"*
  POD=(--name "$name" "${ENGINE_OPTS[@]}"
    --cap-drop ALL --security-opt no-new-privileges
    --read-only --read-only-tmpfs=false
    -v "$state:/var/lib/agentd" -v "$work/run:/run/agentd" -v "$work/tmp:/tmp" -v "$work/workspace:/workspace")
}

# The settings the sandbox needs, on top:
# - our seccomp profile: the default one refuses unshare, mount and
#   mount_setattr (the call's namespaces) and pidfd_getfd (the Unix-socket
#   wall) to a process without capabilities;
# - /proc unmasked: the runtime covers parts of the container's /proc
#   (/proc/sys, /proc/irq, /proc/keys, ...), and the kernel refuses a fresh
#   procfs in a new PID namespace while any of /proc is hidden that way, so a
#   call would see the container's processes instead of its own;
# - where AppArmor is on, no AppArmor profile: the container default denies
#   every mount, even in a user namespace the call owns.
FULL=(--security-opt "seccomp=$top/deploy/seccomp/agentd.json" --security-opt 'unmask=/proc/*')
if [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ]; then
  FULL+=(--security-opt apparmor=unconfined)
  echo "smoke-image: AppArmor is enabled here: the full run also has apparmor=unconfined"
else
  echo "smoke-image: AppArmor is not enabled on this kernel: nothing to unconfine"
fi

# Waits up to 30 s for the daemon's socket in container $1; fails early if
# the container exits.
wait_socket() {
  local c=$1
  for _ in $(seq 150); do
    [ "$(podman inspect -f '{{.State.Running}}' "$c" 2>/dev/null)" = true ] || return 1
    podman exec "$c" test -S /run/agentd/private/agentd.sock 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# The level and the missing walls from `agentctl --json status`, one line.
walls_of() {
  python3 -c '
import json, sys
s = json.load(sys.stdin)["sandbox"]
missing = [w["name"] for w in s["walls"] if not w["applied"]]
print("level", s["level"] + (", missing " + ", ".join(missing) if missing else ", every wall applied"))'
}

# A Bash call in container $1, workspace $2, approved (bypass): its output
# and, last, "exit N" of agentctl.
bash_call() {
  local c=$1 cwd=$2 command=$3 input
  input=$(python3 -c 'import json, sys; print(json.dumps({"command": sys.argv[1]}))' "$command")
  set +e
  podman exec "$c" agentctl call --mode bypass --cwd "$cwd" Bash "$input" 2>&1
  echo "agentctl exit $?"
  set -e
}

# ---------------------------------------------------------------------------
section "1. full: seccomp=deploy/seccomp/agentd.json, unmask=/proc/*, AGENTD_REQUIRE_SANDBOX=1"
full="$tag-full"
pod_like "$full"
echo "  \$ podman run -d ${POD[*]} ${FULL[*]} $image"
podman run -d "${POD[@]}" "${FULL[@]}" "$image" >/dev/null
started+=("$full")
if wait_socket "$full"; then
  ok "socket /run/agentd/private/agentd.sock is up"
  mode=$(podman exec "$full" stat -c '%a %U' /run/agentd/private)
  if [ "$mode" = "700 agentd" ]; then
    ok "the daemon made /run/agentd/private 0700 inside the 0777 shared directory"
  else
    failed "/run/agentd/private is $mode, not 700 agentd"
  fi
  if out=$(podman exec "$full" agentctl status --require-sandbox 2>&1); then
    ok "agentctl status --require-sandbox exits 0"
  else
    failed "agentctl status --require-sandbox exits non-zero"
  fi
  indent <<<"$out"
  echo "    $(podman exec "$full" agentctl --json status | walls_of)"

  section "2. a Bash call has a /proc of its own"
  out=$(bash_call "$full" /workspace 'tr "\0" " " </proc/1/cmdline | cut -c1-60; ls /proc | grep -c "^[0-9]"')
  indent <<<"$out"
  if echo "$out" | grep -q '^/usr/local/bin/agentd-sandbox'; then
    ok "PID 1 of the call's /proc is its own agentd-sandbox, not the container's agentd"
  else
    failed "the call's /proc is not its own PID namespace's"
  fi

  section "3. a Bash call cannot plant a git hook"
  podman exec "$full" git init -q /workspace/scratch
  out=$(bash_call "$full" /workspace/scratch 'printf "#!/bin/sh\necho planted\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit')
  indent <<<"$out"
  if echo "$out" | grep -q 'Read-only file system' && echo "$out" | grep -q 'agentctl exit 4'; then
    ok "the write to .git/hooks/pre-commit failed (read-only file system), the call is an error"
  else
    failed "the write to .git/hooks/pre-commit did not fail as the sandbox makes it"
  fi
  if podman exec "$full" test -e /workspace/scratch/.git/hooks/pre-commit; then
    failed ".git/hooks/pre-commit exists after the call"
  else
    ok ".git/hooks/pre-commit does not exist"
  fi
  out=$(bash_call "$full" /workspace/scratch 'echo written > notes.txt')
  if podman exec "$full" grep -qx written /workspace/scratch/notes.txt; then
    ok "the same kind of call writes notes.txt in the workspace (the wall is selective)"
  else
    failed "a write inside the workspace failed too"; indent <<<"$out"
  fi

  section "4. SIGTERM stops the daemon cleanly"
  podman stop -t 20 "$full" >/dev/null
  code=$(podman inspect -f '{{.State.ExitCode}}' "$full")
  if [ "$code" = 0 ]; then ok "exit code 0 after podman stop"; else failed "exit code $code after podman stop"; fi
else
  failed "the daemon's socket did not appear; its log:"
  podman logs "$full" 2>&1 | tail -n 20 | indent
fi

# ---------------------------------------------------------------------------
section "5. full in a user namespace of its own (as Kubernetes' hostUsers: false runs a pod)"
userns="$tag-userns"
out=""
pod_like "$userns" "$tag-userns-state"
# Container root is host uid 200000, agentd (10001) host uid 210001: the
# sandbox's user namespaces then nest in the container's.
podman run -d "${POD[@]}" --uidmap 0:200000:65536 --gidmap 0:200000:65536 "${FULL[@]}" "$image" >/dev/null
started+=("$userns")
if wait_socket "$userns" && out=$(podman exec "$userns" agentctl status --require-sandbox 2>&1); then
  ok "agentctl status --require-sandbox exits 0: $(podman exec "$userns" agentctl --json status | walls_of)"
  out=$(bash_call "$userns" /workspace 'tr "\0" " " </proc/1/cmdline | cut -c1-40')
  if echo "$out" | grep -q '^/usr/local/bin/agentd-sandbox'; then
    ok "a Bash call there has a /proc of its own too"
  else
    failed "a Bash call's /proc in the user-namespaced container is not its own"; indent <<<"$out"
  fi
else
  failed "the daemon in a user namespace is not up with a full sandbox:"
  { echo "$out"; podman logs "$userns" 2>&1 | tail -n 5; } | indent
fi

# ---------------------------------------------------------------------------
section "6. the default container seccomp profile (Docker's, containerd's): agentd must refuse to start"
python3 scripts/make-seccomp-profile.py --baseline -o "$work/default.json" 2>/dev/null
refused="$tag-default"
pod_like "$refused"
set +e
# Everything as in 1 but the seccomp profile.
out=$(timeout 60 podman run "${POD[@]}" --security-opt "seccomp=$work/default.json" --security-opt 'unmask=/proc/*' "$image" 2>&1)
code=$?
set -e
started+=("$refused")
line=$(echo "$out" | grep -- '--require-sandbox:' | head -n 1 || true)
if [ "$code" != 0 ] && [ -n "$line" ]; then
  ok "agentd exited $code at start, saying:"
  echo "    $line"
else
  failed "agentd did not refuse to start (exit $code):"
  tail -n 5 <<<"$out" | indent
fi

# ---------------------------------------------------------------------------
section "7. podman's own default seccomp profile, /proc masked: agentd must refuse to start"
plain="$tag-plain"
pod_like "$plain"
podman run -d "${POD[@]}" "$image" >/dev/null 2>&1 || true
started+=("$plain")
if wait_socket "$plain"; then
  failed "agentd started with a masked /proc: $(podman exec "$plain" agentctl --json status | walls_of)"
else
  line=$(podman logs "$plain" 2>&1 | grep -- '--require-sandbox:' | head -n 1 || true)
  if grep -q "/proc cannot be mounted" <<<"$line"; then
    ok "agentd refused to start, naming the masked /proc"
    echo "$line" | indent
  else
    failed "agentd did not start, but not for the masked /proc: $line"
  fi
fi

echo
if [ "$failures" = 0 ]; then
  echo "smoke-image: every check passed ($image)"
else
  echo "smoke-image: $failures check(s) failed ($image)"
  exit 1
fi
