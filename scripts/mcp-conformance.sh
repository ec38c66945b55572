#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios
# (@modelcontextprotocol/conformance, pinned in scripts/lib-conformance.sh)
# against agentd's MCP client, and prints a table scenario -> pass/fail.
#
#   scripts/mcp-conformance.sh [--suite stable|2026-07-28] [--tools DIR] [--bin DIR]
#                              [--out DIR] [--only-declared]
#
#   --suite S        stable (default: the stable pin, MCP 2025-11-25) or 2026-07-28
#                    (the pinned pre-release, its scenarios of that revision, whose
#                    test servers speak only that revision's wire)
#   --tools DIR      where the pinned npm packages go (default target/ci-tools/conformance,
#                    as in .ci/run; the pre-release in its subdirectory 2026-07-28)
#   --bin DIR        where agentd and agentd-sandbox are (default target/debug;
#                    this script builds nothing)
#   --out DIR        the suite's results, one folder a scenario, with the
#                    adapter's stderr (default target/mcp-conformance, with
#                    -2026-07-28 for the pre-release)
#   --only-declared  skip the scenarios of features agentd does not declare
#
# For each scenario the suite starts a test server and runs
# tests/mcp/conformance_client.py with its URL; the adapter drives a
# session of a daemon this script starts (ephemeral, in a scratch HOME),
# whose MCP client does the talking. A scenario passes when the suite says
# so (no failed check, no warning, the adapter exited 0).
#
# Scenarios of features agentd's client does not have (OAuth client id
# metadata documents, OAuth extensions, URL-mode elicitation, tasks) are
# run too, unless
# --only-declared, and listed apart as "not declared": they do not change
# the exit status. Exits non-zero when any other scenario fails, or when
# the suite lists a scenario this script has not classified (a newer pin).
#
# Needs python3 and npm (npm brings Node 22 as the `node` package: the
# suite needs Node >= 22). On 2 cores: about 32 s for every scenario (most
# of it the 22 OAuth ones, ~1.2 s each), 25 s with --only-declared, plus
# ~20 s for the first install (the pre-release: about 30 s, ~10 s more to
# install). The suite splits the adapter's command on spaces: the
# checkout's path must have none.
set -euo pipefail
. "$(dirname "$0")/lib-conformance.sh"

tools=$top/target/ci-tools/conformance
out=$top/target/mcp-conformance
conformance_options mcp-conformance --only-declared 39 "$@"

for exe in agentd agentd-sandbox; do
  if [ ! -x "$bin/$exe" ]; then
    echo "mcp-conformance: no $bin/$exe (build first: cargo build --workspace)" >&2
    exit 2
  fi
done

# The pinned packages.
install_conformance "mcp-conformance: installing @modelcontextprotocol/conformance@$version and node@$NODE_VERSION into $tools"
if [ "$("$node" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
  echo "mcp-conformance: $node is not Node $NODE_VERSION (did npm run the node package's install script?)" >&2
  exit 2
fi

# A daemon of our own.
scratch=$(mktemp -d /tmp/agentd-conformance.XXXXXX)
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ]; then
    kill "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/home" "$scratch/state" "$scratch/run"
export AGENTD_SOCKET=$scratch/run/s.sock
HOME=$scratch/home XDG_CONFIG_HOME=$scratch/home/.config XDG_STATE_HOME=$scratch/home/.state \
  "$bin/agentd" --socket "$AGENTD_SOCKET" --state-dir "$scratch/state" --ephemeral \
  >"$scratch/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
  [ -S "$AGENTD_SOCKET" ] && break
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "mcp-conformance: agentd did not start:" >&2
    cat "$scratch/daemon.log" >&2
    exit 1
  fi
  sleep 0.1
done
[ -S "$AGENTD_SOCKET" ] || { echo "mcp-conformance: agentd's socket did not appear" >&2; exit 1; }

# What agentd's MCP client does not declare, by scenario name: the reason,
# or nothing for a scenario it must pass. A scenario the suite has and this
# does not know fails the run until it is classified here.
not_declared() {
  case $1 in
    auth/2025-03-26-oauth-metadata-backcompat) echo "metadata whose issuer is not its address (refused, RFC 8414 3.3)" ;;
    auth/client-credentials-* | auth/cross-app-access-*) echo "OAuth extensions (client credentials, enterprise)" ;;
    auth/*) ;;
    *sampling*) echo "sampling" ;;
    *list-changed* | *list_changed* | *listchanged*) echo "list_changed notifications" ;;
    *url-elicitation* | *elicitation-url*) echo "URL-mode elicitation" ;;
    *task*) echo "tasks" ;;
    initialize | tools_call | elicitation-sep1034-client-defaults | sse-retry) ;;
    # MCP 2026-07-28's (the pre-release's): what its clients must do.
    request-metadata | sep-2322-client-request-state | http-standard-headers | http-custom-headers \
      | http-invalid-tool-headers | json-schema-ref-no-deref | json-schema-2020-12-preservation) ;;
    *) echo "?" ;;
  esac
}

scenarios=$("$node" "$suite" list --client "${spec_args[@]}" | sed -n '/^Client scenarios/,$ s/^  - \([^ ]*\).*/\1/p')
[ -n "$scenarios" ] || { echo "mcp-conformance: the suite lists no client scenarios" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"
rows=$out/rows.tsv
: >"$rows"
adapter="python3 $top/tests/mcp/conformance_client.py"
started=$(date +%s.%N)
for s in $scenarios; do
  reason=$(not_declared "$s")
  if [ -n "$reason" ] && [ "$reason" != "?" ] && [ "$only_declared" = 1 ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$s" "skipped" "0" "$reason" "" >>"$rows"
    continue
  fi
  log=$out/$(echo "$s" | tr / _).log
  t0=$(date +%s.%N)
  rc=0
  "$node" "$suite" client --command "$adapter" --scenario "$s" "${spec_args[@]}" --timeout 30000 -o "$out/results" \
    >"$log" 2>&1 || rc=$?
  secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
  printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$rc" "$secs" "$reason" "$log" >>"$rows"
done
total=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$started" "$(date +%s.%N)")

python3 - "$rows" "$out/results" "$total" "$version" "$spec" <<'EOF'
import glob, json, os, re, sys

rows_file, results, total, version, spec = sys.argv[1:]


def checks_of(scenario):
    stamp = re.compile(re.escape(os.path.basename(scenario)) + r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
    found = sorted(
        f
        for f in glob.glob(os.path.join(results, glob.escape(scenario) + "-*", "checks.json"))
        if stamp.fullmatch(os.path.basename(os.path.dirname(f)))
    )
    if not found:
        return None
    with open(found[-1]) as f:
        return json.load(f)


def summary(scenario, rc, log):
    checks = checks_of(scenario)
    if checks is None:
        return "no results", ["the suite wrote no checks.json (see " + log + ")"]
    ok = sum(c["status"] == "SUCCESS" for c in checks)
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    counted = ok + sum(c["status"] == "FAILURE" for c in checks)
    notes = [f"{c['status']} {c['id']}: {c.get('errorMessage') or c.get('description', '')}" for c in bad]
    text = open(log, errors="replace").read() if log else ""
    if "CLIENT TIMED OUT" in text:
        notes.append("the adapter timed out")
    adapter = [l for l in text.splitlines() if "[conformance_client] FAILED" in l]
    notes += [l.split("FAILED: ", 1)[1][:400] for l in adapter]
    return f"{ok}/{counted} checks", notes


declared, undeclared, unknown = [], [], []
for line in open(rows_file):
    scenario, rc, secs, reason, log = line.rstrip("\n").split("\t")
    if rc == "skipped":
        undeclared.append((scenario, "skipped", "", "", reason, []))
        continue
    verdict = "pass" if rc == "0" else "FAIL"
    counts, notes = summary(scenario, rc, log)
    row = (scenario, verdict, counts, secs + " s", reason, notes)
    (unknown if reason == "?" else undeclared if reason else declared).append(row)

width = max(len(r[0]) for r in declared + undeclared + unknown)
revision = "" if spec == "stable" else f" (MCP {spec})"
print(f"\nMCP conformance suite {version}{revision}, client scenarios, against agentd's MCP client\n")


def table(title, rows, with_reason=False):
    if not rows:
        return
    print(title)
    for scenario, verdict, counts, secs, reason, notes in rows:
        extra = f"  [{reason}]" if with_reason else ""
        print(f"  {scenario:<{width}}  {verdict:<7} {counts:<12} {secs:>6}{extra}")
        if verdict == "FAIL" and not with_reason:
            for n in notes:
                print(f"  {'':<{width}}    - {n}")
    print()


table("Declared (must pass):", declared)
table("Not classified (a newer suite? classify it in scripts/mcp-conformance.sh):", unknown)
table("Not declared by agentd (informational, not counted):", undeclared, with_reason=True)
failed = [r for r in declared + unknown if r[1] != "pass"]
passed = sum(r[1] == "pass" for r in declared)
print(f"declared: {passed} passed, {len(failed)} failed; not declared: "
      f"{sum(r[1] == 'pass' for r in undeclared)} of {len(undeclared)} pass anyway; {total} s")
sys.exit(1 if failed else 0)
EOF
