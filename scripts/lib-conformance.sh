# Shared by scripts/mcp-conformance.sh and scripts/mcp-conformance-server.sh,
# which source it first: it moves to the checkout ($top), pins the suite, and
# reads the options both take and installs the pins.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$PWD

CONFORMANCE_VERSION=0.1.16
NODE_VERSION=22.23.3

# conformance_options NAME SWITCH HELP_END ARGS...: reads --tools DIR,
# --bin DIR and --out DIR into $tools, $bin and $out (made absolute; $tools
# and $out set to their defaults beforehand, $bin defaults to target/debug),
# the script's own SWITCH (--only-x) into $only_x (1 when given, else 0), and
# -h/--help, which prints lines 2 to HELP_END of the script. NAME starts the
# message of an unknown argument (exit 2).
conformance_options() {
  local name=$1 switch=$2 help_end=$3 flag
  shift 3
  flag=${switch#--}
  flag=${flag//-/_}
  bin=$top/target/debug
  printf -v "$flag" 0
  while [ $# -gt 0 ]; do
    case $1 in
      --tools) tools=$(realpath -m "$2"); shift 2 ;;
      --bin) bin=$(realpath -m "$2"); shift 2 ;;
      --out) out=$(realpath -m "$2"); shift 2 ;;
      "$switch") printf -v "$flag" 1; shift ;;
      -h | --help) sed -n "2,${help_end}p" "$0"; exit 0 ;;
      *) echo "$name: unknown argument $1" >&2; exit 2 ;;
    esac
  done
}

# install_conformance MESSAGE: installs the pinned suite and node into
# $tools (saying MESSAGE first) unless they are there, and sets $node and
# $suite to them.
install_conformance() {
  if ! conformance_installed @modelcontextprotocol/conformance "$CONFORMANCE_VERSION" \
    || ! conformance_installed node "$NODE_VERSION"; then
    echo "$1"
    mkdir -p "$tools"
    npm install --silent --no-audit --no-fund --save-exact --prefix "$tools" \
      "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "node@$NODE_VERSION" >/dev/null
  fi
  node=$tools/node_modules/node/bin/node
  suite=$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js
}

# conformance_installed PACKAGE VERSION: whether $tools has that version.
conformance_installed() {
  local pkg=$1 version=$2
  [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$tools/node_modules/$pkg/package.json" 2>/dev/null | head -1)" = "$version" ]
}
