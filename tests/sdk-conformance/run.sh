#!/usr/bin/env bash
# The official SDKs are keel's conformance suite: the Python SDK (claude-agent-sdk, PyPI) and,
# when Node.js is present, the TypeScript SDK (@anthropic-ai/claude-agent-sdk, npm) drive the
# keel binary against keel-mock. Installs the SDKs under target/, builds keel and keel-mock,
# runs both suites. Exit 0 only if everything that ran passed; a failed npm install skips the
# TypeScript part (and says why), everything else failing is a failure.
#
# Knobs: KEEL_SDK_PY_VERSION, KEEL_SDK_TS_VERSION (the versions the reference was measured
# with by default), KEEL_SDK_VENV, KEEL_SDK_NODE_DIR, KEEL_BIN, KEEL_MOCK_BIN.
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

echo "== sdk-conformance: building keel and keel-mock"
cargo build -q -p keel-cli -p keel-mock || { echo "sdk-conformance: cargo build failed"; exit 1; }

echo "== sdk-conformance: Python SDK claude-agent-sdk==$PY_SDK_VERSION"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" || { echo "sdk-conformance: cannot create a venv at $VENV"; exit 1; }
fi
"$VENV/bin/pip" install -q --disable-pip-version-check "claude-agent-sdk==$PY_SDK_VERSION" pytest \
  || { echo "sdk-conformance: pip install of claude-agent-sdk failed"; exit 1; }

status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/sdk-conformance" || status=1

echo "== sdk-conformance: TypeScript SDK @anthropic-ai/claude-agent-sdk@$TS_SDK_VERSION"
pkg="$NODE_DIR/node_modules/@anthropic-ai/claude-agent-sdk/package.json"
have=""
if [ -f "$pkg" ]; then
  have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg" | head -1)
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "sdk-conformance: TypeScript part skipped: node or npm is not installed"
elif [ "$have" != "$TS_SDK_VERSION" ] && ! npm install --prefix "$NODE_DIR" --omit=optional --no-audit --no-fund \
      "@anthropic-ai/claude-agent-sdk@$TS_SDK_VERSION" > "$TARGET/sdk-npm.log" 2>&1; then
  echo "sdk-conformance: TypeScript part skipped: npm install failed (last lines of $TARGET/sdk-npm.log):"
  tail -n 15 "$TARGET/sdk-npm.log"
else
  # --omit=optional leaves out the SDK's own native CLI: only keel can answer.
  KEEL_SDK_NODE_DIR="$NODE_DIR" node --test "$ROOT/tests/sdk-conformance/ts_sdk.test.mjs" || status=1
fi

if [ "$status" -ne 0 ]; then
  echo "sdk-conformance: FAILED"
else
  echo "sdk-conformance: all SDK conformance tests passed"
fi
exit "$status"
