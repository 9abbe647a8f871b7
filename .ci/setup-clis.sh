#!/usr/bin/env bash
# Install the real agent CLIs the proxy's end-to-end tests drive, at pinned
# versions, into a cache directory (default $HOME/.cache/prunesched-clis, or
# $PRUNESCHED_CLI_DIR). Idempotent: a CLI already installed at its pinned
# version is not fetched again. Prints the bin directory on the last line.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.332"
CODEX_VERSION="0.171.0"
OPENCODE_VERSION="1.18.33"

dir="${PRUNESCHED_CLI_DIR:-${HOME}/.cache/prunesched-clis}"
mkdir -p "$dir"

install() { # install <subdir> <package> <version> <bin>
  local sub="$1" pkg="$2" ver="$3" bin="$4"
  local d="$dir/$sub"
  if [ -f "$d/.installed-$ver" ] && [ -x "$d/node_modules/.bin/$bin" ]; then
    echo "setup-clis: $pkg@$ver already in $d" >&2
    return 0
  fi
  rm -rf "$d"; mkdir -p "$d"
  echo "setup-clis: installing $pkg@$ver into $d" >&2
  (cd "$d" && echo '{"private":true}' > package.json &&
    npm install --no-audit --no-fund --loglevel=error "$pkg@$ver" >&2)
  touch "$d/.installed-$ver"
}

if ! command -v npm >/dev/null 2>&1; then
  echo "setup-clis: npm not found; the CLI tests will skip" >&2
  exit 0
fi

install claude-code @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" claude &
p1=$!
install codex @openai/codex "$CODEX_VERSION" codex &
p2=$!
install opencode opencode-ai "$OPENCODE_VERSION" opencode &
p3=$!
rc=0
wait $p1 || rc=1
wait $p2 || rc=1
wait $p3 || rc=1
if [ $rc -ne 0 ]; then
  echo "setup-clis: an install failed; the tests of that CLI will skip" >&2
fi
echo "$dir"
