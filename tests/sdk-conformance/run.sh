#!/usr/bin/env bash
# The official SDKs are keel's conformance suite: the Python SDK (claude-agent-sdk, PyPI) and,
# when Node.js is present, the TypeScript SDK (@anthropic-ai/claude-agent-sdk, npm) drive the
# keel binary against keel-mock. Installs the SDKs under target/, builds keel and keel-mock,
# runs both suites. Exit 0 only if everything passed. An SDK that cannot be installed is a
# failure; only a machine without node or npm leaves the TypeScript part out, and says so
# loudly (and in the file named by KEEL_CI_NOT_RUN, which .ci/run prints in its summary).
#
# `run.sh --setup` only installs the SDKs (.ci/run does that in the background while it
# builds). Knobs: KEEL_SDK_PY_VERSION, KEEL_SDK_TS_VERSION (the versions the reference was
# measured with by default), KEEL_SDK_VENV, KEEL_SDK_NODE_DIR, KEEL_BIN, KEEL_MOCK_BIN,
# KEEL_SKIP_BUILD=1 (the binaries are already built).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PY_SDK_VERSION=${KEEL_SDK_PY_VERSION:-0.2.187}
TS_SDK_VERSION=${KEEL_SDK_TS_VERSION:-0.3.330}
VENV=${KEEL_SDK_VENV:-$TARGET/sdk-venv}
NODE_DIR=${KEEL_SDK_NODE_DIR:-$TARGET/sdk-node}
export KEEL_BIN=${KEEL_BIN:-$TARGET/debug/keel}
export KEEL_MOCK_BIN=${KEEL_MOCK_BIN:-$TARGET/debug/keel-mock}
export PYTHONDONTWRITEBYTECODE=1

have_node() { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }

# Both SDKs, each installed only when the wanted version is not there yet.
setup() {
  echo "== sdk-conformance: Python SDK claude-agent-sdk==$PY_SDK_VERSION"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" || { echo "sdk-conformance: cannot create a venv at $VENV"; return 1; }
  fi
  local have_py
  have_py=$("$VENV/bin/python" -c 'import pytest, importlib.metadata as m; print(m.version("claude-agent-sdk"))' 2>/dev/null)
  if [ "$have_py" != "$PY_SDK_VERSION" ]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check "claude-agent-sdk==$PY_SDK_VERSION" pytest \
      || { echo "sdk-conformance: pip install of claude-agent-sdk==$PY_SDK_VERSION failed"; return 1; }
  fi
  have_node || return 0
  echo "== sdk-conformance: TypeScript SDK @anthropic-ai/claude-agent-sdk@$TS_SDK_VERSION"
  local pkg="$NODE_DIR/node_modules/@anthropic-ai/claude-agent-sdk/package.json" have_ts=""
  if [ -f "$pkg" ]; then
    have_ts=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg" | head -1)
  fi
  [ "$have_ts" = "$TS_SDK_VERSION" ] && return 0
  # --omit=optional leaves out the SDK's own native CLI: only keel can answer.
  if ! npm install --prefix "$NODE_DIR" --omit=optional --no-audit --no-fund \
      "@anthropic-ai/claude-agent-sdk@$TS_SDK_VERSION" > "$TARGET/sdk-npm.log" 2>&1; then
    echo "sdk-conformance: npm install of the TypeScript SDK failed (last lines of $TARGET/sdk-npm.log):"
    tail -n 15 "$TARGET/sdk-npm.log"
    return 1
  fi
}

mkdir -p "$TARGET"
setup || exit 1
[ "${1:-}" = --setup ] && exit 0

if [ -z "${KEEL_SKIP_BUILD:-}" ]; then
  echo "== sdk-conformance: building keel and keel-mock"
  cargo build -q -p keel-cli -p keel-mock || { echo "sdk-conformance: cargo build failed"; exit 1; }
fi

status=0
echo "== sdk-conformance: the Python SDK drives keel"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/sdk-conformance" || status=1

if have_node; then
  echo "== sdk-conformance: the TypeScript SDK drives keel"
  KEEL_SDK_NODE_DIR="$NODE_DIR" node --test "$ROOT"/tests/sdk-conformance/*.test.mjs || status=1
else
  msg="the TypeScript SDK conformance suite: node or npm is not installed on this machine"
  echo "!! NOT RUN: $msg"
  echo "$msg" >> "${KEEL_CI_NOT_RUN:-/dev/null}"
fi

if [ "$status" -ne 0 ]; then
  echo "sdk-conformance: FAILED"
else
  echo "sdk-conformance: all SDK conformance tests passed"
fi
exit "$status"
