#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios
# (@modelcontextprotocol/conformance, pinned in scripts/lib-conformance.sh,
# as for the client scenarios) against `agentctl mcp --http`, and prints a table
# scenario -> pass/fail.
#
#   scripts/mcp-conformance-server.sh [--suite stable|2026-07-28] [--tools DIR] [--bin DIR]
#                                     [--out DIR] [--only-served]
#
#   --suite S     stable (default: the stable pin, MCP 2025-11-25) or 2026-07-28
#                 (the pinned pre-release, its scenarios of that revision, at its wire)
#   --tools DIR   where the pinned npm packages are (default target/ci-tools/conformance,
#                 the pre-release in its subdirectory 2026-07-28; installed there when missing)
#   --bin DIR     where agentd, agentd-sandbox and agentctl are (default target/debug)
#   --out DIR     the suite's output, one log a scenario (default target/mcp-conformance-server,
#                 with -2026-07-28 for the pre-release)
#   --only-served skip the scenarios that need the suite's own fixtures
#
# The suite speaks streamable HTTP only and cannot send a header, so it
# reaches agentctl mcp --http through tests/mcp/bearer_proxy.py, which adds
# the bearer token and passes Host and Origin on untouched (the
# DNS-rebinding scenario tests agentctl's own checks). A daemon of its own
# (ephemeral, in a scratch HOME) serves a scratch workspace with a skill.
#
# Scenarios of what agentctl mcp serves must pass: no failed check and no
# warning. Most of the others call the suite's own test fixtures by name (a
# tool `test_simple_text`, a resource `test://static-text`, a prompt
# `test_simple_prompt`, …), which an agentd session does not have: they are
# run too and listed apart, with the fixture, and do not change the exit
# status; so are the few checks of a served scenario that call one (the
# 2026-07-28 server-stateless's test_missing_capability). Exits non-zero
# when a served scenario fails, or when the suite lists a scenario this
# script has not classified.
set -euo pipefail
. "$(dirname "$0")/lib-conformance.sh"

tools=$top/target/ci-tools/conformance
out=$top/target/mcp-conformance-server
conformance_options mcp-conformance-server --only-served 33 "$@"
for exe in agentd agentd-sandbox agentctl; do
  [ -x "$bin/$exe" ] || { echo "mcp-conformance-server: no $bin/$exe (build first)" >&2; exit 2; }
done

install_conformance "mcp-conformance-server: installing the suite $version and node $NODE_VERSION into $tools"

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

# What agentctl mcp serves (must pass), or why a scenario is not run for it:
# the fixture it calls by name, which an agentd session cannot have (its
# tools are agentd's and its MCP servers', its prompts its skills, its
# resources the workspace's files).
reason() {
  case $spec:$1 in
    stable:server-initialize | stable:ping | stable:logging-set-level | stable:completion-complete \
      | stable:tools-list | stable:resources-list | stable:prompts-list | stable:resources-subscribe \
      | stable:resources-unsubscribe | stable:server-sse-multiple-streams | stable:dns-rebinding-protection) ;;
    stable:tools-call-* | stable:resources-read-* | stable:resources-templates-read | stable:prompts-get-* \
      | stable:elicitation-sep* | stable:json-schema-2020-12 | stable:server-sse-polling)
      echo "the suite's test fixtures" ;;
    2026-07-28:server-stateless | 2026-07-28:completion-complete | 2026-07-28:tools-list \
      | 2026-07-28:resources-list | 2026-07-28:prompts-list | 2026-07-28:caching \
      | 2026-07-28:sep-2164-resource-not-found | 2026-07-28:server-sse-multiple-streams \
      | 2026-07-28:dns-rebinding-protection | 2026-07-28:http-header-validation \
      | 2026-07-28:input-required-result-unsupported-methods) ;;
    2026-07-28:tools-call-simple-text) echo "the suite's tool test_simple_text" ;;
    2026-07-28:tools-call-image) echo "the suite's tool test_image_content" ;;
    2026-07-28:tools-call-audio) echo "the suite's tool test_audio_content" ;;
    2026-07-28:tools-call-embedded-resource) echo "the suite's tool test_embedded_resource" ;;
    2026-07-28:tools-call-mixed-content) echo "the suite's tool test_multiple_content_types" ;;
    2026-07-28:tools-call-error) echo "the suite's tool test_error_handling" ;;
    2026-07-28:tools-call-with-progress) echo "the suite's tool test_tool_with_progress" ;;
    2026-07-28:json-schema-2020-12) echo "the suite's tool json_schema_2020_12_tool" ;;
    2026-07-28:http-custom-header-server-validation) echo "a tool with x-mcp-header parameters (agentd's have none)" ;;
    2026-07-28:resources-read-text) echo "the suite's resource test://static-text" ;;
    2026-07-28:resources-read-binary) echo "the suite's resource test://static-binary" ;;
    2026-07-28:resources-templates-read) echo "the suite's resource template test://template/{id}/data" ;;
    2026-07-28:prompts-get-simple) echo "the suite's prompt test_simple_prompt" ;;
    2026-07-28:prompts-get-with-args) echo "the suite's prompt test_prompt_with_arguments" ;;
    2026-07-28:prompts-get-embedded-resource) echo "the suite's prompt test_prompt_with_embedded_resource" ;;
    2026-07-28:prompts-get-with-image) echo "the suite's prompt test_prompt_with_image" ;;
    2026-07-28:input-required-result-non-tool-request) echo "the suite's prompt test_input_required_result_prompt" ;;
    2026-07-28:input-required-result-basic-elicitation | 2026-07-28:input-required-result-result-type \
      | 2026-07-28:input-required-result-missing-input-response | 2026-07-28:input-required-result-validate-input \
      | 2026-07-28:input-required-result-ignore-extra-params)
      echo "the suite's tool test_input_required_result_elicitation" ;;
    2026-07-28:input-required-result-basic-sampling) echo "the suite's tool test_input_required_result_sampling" ;;
    2026-07-28:input-required-result-basic-list-roots) echo "the suite's tool test_input_required_result_list_roots" ;;
    2026-07-28:input-required-result-request-state) echo "the suite's tool test_input_required_result_request_state" ;;
    2026-07-28:input-required-result-multiple-input-requests) echo "the suite's tool test_input_required_result_multiple_inputs" ;;
    2026-07-28:input-required-result-multi-round) echo "the suite's tool test_input_required_result_multi_round" ;;
    2026-07-28:input-required-result-tampered-state) echo "the suite's tool test_input_required_result_tampered_state" ;;
    2026-07-28:input-required-result-capability-check) echo "the suite's tool test_input_required_result_capabilities" ;;
    *) echo "?" ;;
  esac
}

# Checks of a served scenario that call a fixture by name, and which: the
# scenario passes when these are its only failures and warnings.
fixture_check() {
  case $spec:$1:$2 in
    2026-07-28:server-stateless:sep-2575-server-rejects-undeclared-capability \
      | 2026-07-28:server-stateless:sep-2575-missing-capability-http-400)
      echo "the suite's tool test_missing_capability" ;;
    2026-07-28:server-stateless:sep-2575-server-sends-tools-list-changed-on-subscription)
      echo "the suite's tool test_trigger_tool_change" ;;
    # Passed without the tool while an unknown tool was a failed call;
    # since it is -32602 (as MCP asks) the suite says it cannot test them.
    2026-07-28:server-stateless:sep-2575-http-server-no-independent-requests-on-stream)
      echo "the suite's tool test_streaming_elicitation" ;;
    2026-07-28:server-stateless:sep-2575-server-no-log-without-loglevel)
      echo "the suite's tool test_logging_tool" ;;
  esac
}

# bad_checks SCENARIO: the failures and warnings of its run, one a line:
# status, check id, message (tab-separated); "none" when the suite wrote
# no checks.json.
bad_checks() {
  python3 - "$out/results" "$1" <<'EOF'
import glob, json, os, re, sys

results, scenario = sys.argv[1:]
stamp = re.compile("server-" + re.escape(scenario) + r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
found = sorted(
    f
    for f in glob.glob(os.path.join(results, "server-" + glob.escape(scenario) + "-*", "checks.json"))
    if stamp.fullmatch(os.path.basename(os.path.dirname(f)))
)
if not found:
    print("none")
    sys.exit()
with open(found[-1]) as f:
    checks = json.load(f)
for c in checks:
    if c["status"] in ("FAILURE", "WARNING"):
        message = " ".join((c.get("errorMessage") or c.get("description") or "").split())
        print(f"{c['status']}\t{c['id']}\t{message[:400]}")
EOF
}

scenarios=$("$node" "$suite" list --server "${spec_args[@]}" | sed -n '/^Server scenarios/,/^$/ s/^  - \([^ ]*\).*/\1/p' | sort -u)
[ -n "$scenarios" ] || { echo "the suite lists no server scenarios" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
served_ok=0 served_bad=0 fixture_ok=0 fixture_bad=0 unknown=0
report="" failures=""
for s in $scenarios; do
  why=$(reason "$s")
  if [ -n "$why" ] && [ "$why" != "?" ] && [ "$only_served" = 1 ]; then
    report+=$(printf '\n  %-46s %s (%s)' "$s" "skipped" "$why")
    continue
  fi
  rc=0
  "$node" "$suite" server --url "$url" --scenario "$s" "${spec_args[@]}" -o "$out/results" >"$out/$s.log" 2>&1 || rc=$?
  # A run whose only failures are connections reset under it (seen once
  # on a loaded 2-core machine, never reproduced) is run once more, and
  # the table says so; a second failure counts.
  retried=""
  bad=$(bad_checks "$s")
  if grep -q "Request failed: read ECONNRESET" <<<"$bad" && ! grep -v "Request failed: read ECONNRESET" <<<"$bad" | grep -q .; then
    retried=" (run again: a connection of the first run was reset)"
    rc=0
    "$node" "$suite" server --url "$url" --scenario "$s" "${spec_args[@]}" -o "$out/results" >"$out/$s.log" 2>&1 || rc=$?
  fi
  # (A scenario the suite finds not applicable at the revision is skipped
  # with status 0: it was not run, so it did not pass.)
  if grep -q "^SKIPPED: " "$out/$s.log"; then rc=skipped; fi
  verdict=$([ "$rc" = 0 ] && echo pass || echo FAIL)
  case $why in
    "")
      # A served scenario passes with no failure and no warning, but for
      # those of its checks that call a fixture (listed under it).
      unlisted="" listed=""
      [ "$rc" != skipped ] || unlisted+=$'\n'"    skipped by the suite (not applicable at $spec)"
      while IFS=$'\t' read -r status id message; do
        case $status in
          "") ;;
          none) unlisted+=$'\n'"    the suite wrote no checks.json (see $out/$s.log)" ;;
          *) w=$(fixture_check "$s" "$id")
             if [ -n "$w" ]; then listed+=$(printf '\n  %-46s   %s %s (not counted: %s)' "" "$status" "$id" "$w")
             else unlisted+=$'\n'"    $status $id: $message"; fi ;;
        esac
      done <<<"$(bad_checks "$s")"
      verdict=$([ -z "$unlisted" ] && echo pass || echo FAIL)
      if [ "$verdict" = pass ]; then served_ok=$((served_ok + 1)); else served_bad=$((served_bad + 1)); fi
      report+=$(printf '\n  %-46s %s' "$s" "$verdict")$retried$listed
      [ -z "$unlisted" ] || failures+=$'\n'"--- $s:$unlisted" ;;
    "?") unknown=$((unknown + 1)); report+=$(printf '\n  %-46s %s (not classified: see the script)' "$s" "$verdict") ;;
    *) if [ "$rc" = 0 ]; then fixture_ok=$((fixture_ok + 1)); else fixture_bad=$((fixture_bad + 1)); fi
       report+=$(printf '\n  %-46s %s (%s)' "$s" "$verdict" "$why") ;;
  esac
done
echo "MCP conformance suite $version$([ "$spec" = stable ] || echo " (MCP $spec)"), server scenarios, against agentctl mcp --http:$report"
echo "served: $served_ok passed, $served_bad failed; fixtures: $fixture_ok passed, $fixture_bad failed; unclassified: $unknown"
[ -z "$failures" ] || echo "${failures#$'\n'}"
[ "$served_bad" = 0 ] && [ "$unknown" = 0 ]
