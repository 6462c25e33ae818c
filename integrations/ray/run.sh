#!/usr/bin/env bash
# keel-ray's tests on a local Ray cluster (ray.init on loopback) against keel-mock: Ray and
# pytest in a venv of their own under target/. If Ray cannot be installed here, the step says
# SKIPPED and why (CI installs it where it can).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT" || exit 1
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/ray-venv"
cargo build -q -p keel-cli -p keel-mock || { echo "keel-ray: cargo build failed"; exit 1; }
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ray, pytest" 2>/dev/null; then
  python3 -m venv "$VENV" \
    && "$VENV/bin/pip" install -q --disable-pip-version-check "ray>=2.9" "pytest>=8,<9" \
    || { echo "SKIPPED keel-ray: installing Ray from the package registry failed"; exit 0; }
fi
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e "$HERE" >/dev/null \
  || { echo "keel-ray: installing the package failed"; exit 1; }
export KEEL_BIN="${KEEL_BIN:-$TARGET/debug/keel}" KEEL_MOCK_BIN="${KEEL_MOCK_BIN:-$TARGET/debug/keel-mock}"
# Ray keeps its session files under the temp directory; a scratch one is removed afterwards.
export RAY_TMPDIR="$(mktemp -d)"
trap 'rm -rf "$RAY_TMPDIR"' EXIT
"$VENV/bin/python" -m pytest -q -s -p no:cacheprovider "$HERE/tests"
