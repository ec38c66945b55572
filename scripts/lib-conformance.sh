# Shared by scripts/mcp-conformance.sh and scripts/mcp-conformance-server.sh,
# which source it first: it moves to the checkout ($top), pins the suites, and
# reads the options both take and installs the pins.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$PWD

# Two pins, run one at a time (--suite): the stable suite (MCP 2025-11-25
# and before), and the pre-release that tests revision 2026-07-28, run at
# that revision's wire (--spec-version). They install side by side: the
# stable suite and Node in the tools directory, the pre-release in its
# subdirectory 2026-07-28 (its own npm prefix), on the same Node.
# .ci/run installs both, in the same places.
CONFORMANCE_VERSION=0.1.16
CONFORMANCE_PRERELEASE=2026-07-28
CONFORMANCE_PRERELEASE_VERSION=0.2.0-alpha.12
NODE_VERSION=22.23.3

# conformance_options NAME SWITCH HELP_END ARGS...: reads --tools DIR,
# --bin DIR and --out DIR into $tools, $bin and $out (made absolute; $tools
# and $out set to their defaults beforehand, $bin defaults to target/debug),
# --suite stable|2026-07-28 into $spec (default stable; with 2026-07-28 the
# default $out gets -2026-07-28 appended), the script's own SWITCH
# (--only-x) into $only_x (1 when given, else 0), and -h/--help, which
# prints lines 2 to HELP_END of the script. NAME starts the message of an
# unknown argument (exit 2). Then sets, for that suite, $version (its pin)
# and $spec_args (what its list, client and server commands take to list
# and run the scenarios of its revision, at its wire: nothing for stable).
conformance_options() {
  local name=$1 switch=$2 help_end=$3 flag out_given=0
  shift 3
  flag=${switch#--}
  flag=${flag//-/_}
  bin=$top/target/debug
  spec=stable
  printf -v "$flag" 0
  while [ $# -gt 0 ]; do
    case $1 in
      --tools) tools=$(realpath -m "$2"); shift 2 ;;
      --bin) bin=$(realpath -m "$2"); shift 2 ;;
      --out) out=$(realpath -m "$2"); out_given=1; shift 2 ;;
      --suite) spec=$2; shift 2 ;;
      "$switch") printf -v "$flag" 1; shift ;;
      -h | --help) sed -n "2,${help_end}p" "$0"; exit 0 ;;
      *) echo "$name: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  case $spec in
    stable) version=$CONFORMANCE_VERSION; spec_args=() ;;
    "$CONFORMANCE_PRERELEASE")
      version=$CONFORMANCE_PRERELEASE_VERSION
      spec_args=(--spec-version "$spec")
      [ "$out_given" = 1 ] || out=$out-$spec ;;
    *) echo "$name: --suite is stable or $CONFORMANCE_PRERELEASE, not $spec" >&2; exit 2 ;;
  esac
}

# install_conformance MESSAGE: installs node and the suite $spec names
# (pinned) into $tools (saying MESSAGE first) unless they are there, and
# sets $node and $suite to them.
install_conformance() {
  local dir=$tools
  [ "$spec" = stable ] || dir=$tools/$spec
  if ! conformance_installed "$dir" @modelcontextprotocol/conformance "$version" \
    || ! conformance_installed "$tools" node "$NODE_VERSION"; then
    echo "$1"
    mkdir -p "$tools" "$dir"
    if [ "$dir" = "$tools" ]; then
      npm install --silent --no-audit --no-fund --save-exact --prefix "$tools" \
        "@modelcontextprotocol/conformance@$version" "node@$NODE_VERSION" >/dev/null
    else
      conformance_installed "$tools" node "$NODE_VERSION" \
        || npm install --silent --no-audit --no-fund --save-exact --prefix "$tools" "node@$NODE_VERSION" >/dev/null
      npm install --silent --no-audit --no-fund --save-exact --prefix "$dir" \
        "@modelcontextprotocol/conformance@$version" >/dev/null
    fi
  fi
  node=$tools/node_modules/node/bin/node
  suite=$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js
}

# conformance_installed DIR PACKAGE VERSION: whether DIR has that version.
conformance_installed() {
  local dir=$1 pkg=$2 version=$3
  [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/$pkg/package.json" 2>/dev/null | head -1)" = "$version" ]
}
