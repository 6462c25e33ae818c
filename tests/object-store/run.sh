#!/usr/bin/env bash
# Transcripts in object storage against a real S3-compatible server: moto's server (from the
# package registry, in a venv under target/) runs on loopback, and the fleet tests that need
# it (ignored by plain `cargo test`: "needs moto_server") are run with KEEL_TEST_MOTO_SERVER
# pointing at it. The file:// and unreachable-bucket tests run everywhere with the rest of the
# suite. Then the official Python SDK's session-store helpers read, through a minimal S3 store
# in the SDK stores' key layout, a session keel uploaded, and keel resumes one the store holds
# (test_sdk_store.py). If moto cannot be installed this step fails: it would otherwise check
# nothing.
#
# `run.sh --setup` only installs moto (.ci/run does that in the background while it builds).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/moto-venv"
# The official Python SDK (the version the conformance suite pins) reads what keel uploads.
PY_SDK_VERSION=$(sed -n 's/^PY_SDK_VERSION=${KEEL_SDK_PY_VERSION:-\(.*\)}$/\1/p' "$ROOT/tests/sdk-conformance/run.sh")
PY_SDK_VERSION=${KEEL_SDK_PY_VERSION:-$PY_SDK_VERSION}
have_sdk=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("claude-agent-sdk"))' 2>/dev/null)
if [ ! -x "$VENV/bin/moto_server" ] || [ "$have_sdk" != "$PY_SDK_VERSION" ] || ! "$VENV/bin/python" -c 'import pytest' 2>/dev/null; then
  python3 -m venv "$VENV" \
    && "$VENV/bin/pip" install -q --disable-pip-version-check "moto[server]>=5,<6" \
         "claude-agent-sdk==$PY_SDK_VERSION" "pytest>=8,<9" \
    || { echo "object-store: installing moto[server] and the SDK from the package registry failed" >&2; exit 1; }
fi
[ "${1:-}" = --setup ] && exit 0
if [ -z "${KEEL_SKIP_BUILD:-}" ]; then
  cargo build -q -p keel-cli -p keel-mock || { echo "object-store: cargo build failed"; exit 1; }
fi
status=0
KEEL_TEST_MOTO_SERVER="$VENV/bin/moto_server" "$ROOT/.ci/run-ignored" all \
  suite::fleet::a_session_killed_mid_turn_resumes_elsewhere_from_an_s3_bucket \
  suite::fleet::transcripts_go_to_an_s3_compatible_server_and_come_back || status=1
KEEL_TEST_MOTO_SERVER="$VENV/bin/moto_server" "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
  "$ROOT/tests/object-store" || status=1
exit "$status"
