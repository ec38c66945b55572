#!/usr/bin/env bash
# Builds agentd and agentctl, starts the daemon on a private socket, and
# drives it with agentctl: status, a session on this checkout, list, show,
# close; then a turn of tool calls streamed with `agentctl run` (a search, a
# listing, a read-only command, and a write that needs approval, denied
# because there is no terminal to ask on). Stops the daemon with SIGTERM at
# the end (or on Ctrl+C).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -p agentd -p agentctl
bin="$PWD/target/release"
run="$(mktemp -d)"
export AGENTD_SOCKET="$run/agentd.sock"

"$bin/agentd" --state-dir "$run/state" 2>"$run/agentd.log" &
pid=$!
cleanup() {
  kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  echo "--- agentd log ---"; cat "$run/agentd.log"
  rm -rf "$run"
}
trap cleanup EXIT

for _ in $(seq 100); do
  "$bin/agentctl" status >/dev/null 2>&1 && break
  sleep 0.05
done

step() { printf '\n$ agentctl %s\n' "$*"; "$bin/agentctl" "$@"; }
step status
sid=$("$bin/agentctl" session create --cwd "$PWD" --mode plan --allow 'Read(src/**)' --deny 'Bash(rm:*)')
printf '\n$ agentctl session create --cwd %s --mode plan ...\n%s\n' "$PWD" "$sid"
step session list
step tools --session "$sid"
step session show "$sid"
step --json session show "$sid"
step session close "$sid"
printf '\n$ agentctl session show %s   # closed: exit code 1\n' "$sid"
"$bin/agentctl" session show "$sid" || echo "(exit code $?)"

cat >"$run/turn.jsonl" <<'EOF'
{"id": "grep", "name": "Grep", "input": {"pattern": "fn main", "output_mode": "files_with_matches"}}
{"id": "docs", "name": "Glob", "input": {"pattern": "*.md"}}
{"id": "log", "name": "Bash", "input": {"command": "git log --oneline | head -3"}}
{"id": "write", "name": "Bash", "input": {"command": "touch demo-was-here"}}
EOF
printf '\n$ agentctl run turn.jsonl --cwd %s   # no terminal to ask on: the write is denied (exit code 4)\n' "$PWD"
"$bin/agentctl" run "$run/turn.jsonl" --cwd "$PWD" </dev/null || echo "(exit code $?)"
