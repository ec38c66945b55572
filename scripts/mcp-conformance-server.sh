#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios
# (@modelcontextprotocol/conformance, pinned in scripts/lib-conformance.sh,
# as for the client scenarios) against `agentctl mcp --http`, and prints a table
# scenario -> pass/fail.
#
#   scripts/mcp-conformance-server.sh [--tools DIR] [--bin DIR] [--out DIR] [--only-served]
#
#   --tools DIR   where the pinned npm packages are (default target/ci-tools/conformance;
#                 installed there when missing)
#   --bin DIR     where agentd, agentd-sandbox and agentctl are (default target/debug)
#   --out DIR     the suite's output, one log a scenario (default target/mcp-conformance-server)
#   --only-served skip the scenarios that need the suite's own fixtures
#
# The suite speaks streamable HTTP only and cannot send a header, so it
# reaches agentctl mcp --http through tests/mcp/bearer_proxy.py, which adds
# the bearer token and passes Host and Origin on untouched (the
# DNS-rebinding scenario tests agentctl's own checks). A daemon of its own
# (ephemeral, in a scratch HOME) serves a scratch workspace with a skill.
#
# Scenarios of what agentctl mcp serves must pass. Most of the others call
# the suite's own test fixtures by name (a tool `test_simple_text`, a
# resource `test://static-text`, a prompt `test_simple_prompt`, …), which an
# agentd session does not have: they are run too and listed apart, and do
# not change the exit status. Exits non-zero when a served scenario fails,
# or when the suite lists a scenario this script has not classified.
set -euo pipefail
. "$(dirname "$0")/lib-conformance.sh"

tools=$top/target/ci-tools/conformance
out=$top/target/mcp-conformance-server
conformance_options mcp-conformance-server --only-served 27 "$@"
for exe in agentd agentd-sandbox agentctl; do
  [ -x "$bin/$exe" ] || { echo "mcp-conformance-server: no $bin/$exe (build first)" >&2; exit 2; }
done

install_conformance "mcp-conformance-server: installing the suite $CONFORMANCE_VERSION and node $NODE_VERSION into $tools"

scratch=$(mktemp -d /tmp/agentd-conformance-server.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/home" "$scratch/state" "$scratch/run" "$scratch/ws/.claude/skills/greet"
printf 'hello\n' >"$scratch/ws/hello.txt"
printf -- '---\nname: greet\ndescription: Greets the user\n---\nSay hello.\n' >"$scratch/ws/.claude/skills/greet/SKILL.md"
export AGENTD_SOCKET=$scratch/run/s.sock
export HOME=$scratch/home XDG_CONFIG_HOME=$scratch/home/.config XDG_STATE_HOME=$scratch/home/.state
# The scratch workspace is this script's own: its skill is obeyed unasked.
"$bin/agentd" --socket "$AGENTD_SOCKET" --state-dir "$scratch/state" --ephemeral --trust-project-files \
  >"$scratch/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$AGENTD_SOCKET" ] && break; sleep 0.1; done
[ -S "$AGENTD_SOCKET" ] || { echo "agentd did not start:" >&2; cat "$scratch/daemon.log" >&2; exit 1; }

"$bin/agentctl" mcp --http 127.0.0.1:0 --cwd "$scratch/ws" --token-file "$scratch/token" 2>"$scratch/mcp.log" &
pids+=($!)
port=
for _ in $(seq 100); do
  # (The log may not be there yet: the redirection is the child's.)
  port=$(sed -n 's|.*serving MCP at http://127\.0\.0\.1:\([0-9]*\)/mcp.*|\1|p' "$scratch/mcp.log" 2>/dev/null || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "agentctl mcp --http did not start:" >&2; cat "$scratch/mcp.log" >&2; exit 1; }
exec 3< <(python3 "$top/tests/mcp/bearer_proxy.py" "$port" "$scratch/token")
pids+=($!)
read -r proxy <&3
url=http://127.0.0.1:$proxy/mcp

# What agentctl mcp serves (must pass), or why a scenario is not run for it.
reason() {
  case $1 in
    server-initialize | ping | logging-set-level | completion-complete | tools-list | resources-list \
      | prompts-list | resources-subscribe | resources-unsubscribe | server-sse-multiple-streams \
      | dns-rebinding-protection) ;;
    tools-call-* | resources-read-* | resources-templates-read | prompts-get-* | elicitation-sep* \
      | json-schema-2020-12 | server-sse-polling) echo "the suite's test fixtures" ;;
    *) echo "?" ;;
  esac
}

scenarios=$("$node" "$suite" list --server | sed -n 's/^  - \([^ ]*\).*/\1/p' | sort -u)
[ -n "$scenarios" ] || { echo "the suite lists no server scenarios" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
served_ok=0 served_bad=0 fixture_ok=0 fixture_bad=0 unknown=0
report=""
for s in $scenarios; do
  why=$(reason "$s")
  if [ -n "$why" ] && [ "$why" != "?" ] && [ "$only_served" = 1 ]; then
    report+=$(printf '\n  %-32s %s (%s)' "$s" "skipped" "$why")
    continue
  fi
  rc=0
  "$node" "$suite" server --url "$url" --scenario "$s" >"$out/$s.log" 2>&1 || rc=$?
  verdict=$([ $rc = 0 ] && echo pass || echo FAIL)
  case $why in
    "") if [ $rc = 0 ]; then served_ok=$((served_ok + 1)); else served_bad=$((served_bad + 1)); fi
        report+=$(printf '\n  %-32s %s' "$s" "$verdict") ;;
    "?") unknown=$((unknown + 1)); report+=$(printf '\n  %-32s %s (not classified: see the script)' "$s" "$verdict") ;;
    *) if [ $rc = 0 ]; then fixture_ok=$((fixture_ok + 1)); else fixture_bad=$((fixture_bad + 1)); fi
       report+=$(printf '\n  %-32s %s (%s)' "$s" "$verdict" "$why") ;;
  esac
done
echo "MCP conformance suite $CONFORMANCE_VERSION, server scenarios, against agentctl mcp --http:$report"
echo "served: $served_ok passed, $served_bad failed; fixtures: $fixture_ok passed, $fixture_bad failed; unclassified: $unknown"
for s in $scenarios; do
  if [ -z "$(reason "$s")" ] && [ -f "$out/$s.log" ] && ! grep -q "Passed:.* 0 failed" "$out/$s.log"; then
    echo "--- $s:"; sed 's/\x1b\[[0-9;]*m//g' "$out/$s.log" | tail -20
  fi
done
[ "$served_bad" = 0 ] && [ "$unknown" = 0 ]
