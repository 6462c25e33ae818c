#!/usr/bin/env bash
# keel-ray's tests on a local Ray cluster (ray.init on loopback) against keel-mock: Ray and
# pytest in a venv of their own under target/. If Ray cannot be installed here the step fails:
# it would otherwise check nothing.
#
# `run.sh --setup` only installs Ray (.ci/run does that in the background while it builds);
# KEEL_SKIP_BUILD=1: keel and keel-mock are already built.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT" || exit 1
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/ray-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ray, pytest" 2>/dev/null; then
  python3 -m venv "$VENV" \
    && "$VENV/bin/pip" install -q --disable-pip-version-check "ray>=2.9" "pytest>=8,<9" \
    || { echo "keel-ray: installing Ray from the package registry failed" >&2; exit 1; }
fi
# The package itself, editable: installed once per venv (it then follows the checkout).
if ! "$VENV/bin/python" -c "import keel_ray, sys; sys.exit(not keel_ray.__file__.startswith('$HERE/'))" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e "$HERE" >/dev/null \
    || { echo "keel-ray: installing the package failed"; exit 1; }
fi
[ "${1:-}" = --setup ] && exit 0
if [ -z "${KEEL_SKIP_BUILD:-}" ]; then
  cargo build -q -p keel-cli -p keel-mock || { echo "keel-ray: cargo build failed"; exit 1; }
fi
export KEEL_BIN="${KEEL_BIN:-$TARGET/debug/keel}" KEEL_MOCK_BIN="${KEEL_MOCK_BIN:-$TARGET/debug/keel-mock}"
# Ray keeps its session files under the temp directory; a scratch one is removed afterwards.
export RAY_TMPDIR="$(mktemp -d)"
trap 'rm -rf "$RAY_TMPDIR"' EXIT
"$VENV/bin/python" -m pytest -q -s -p no:cacheprovider "$HERE/tests" || exit 1
# Again, the cancellation alone, from a process that ignores SIGINT (as one started with nohup
# or as a background job does, and passes on to the cluster's workers): Ray's cancellation of a
# running attempt must still arrive.
"$VENV/bin/python" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])' \
  "$VENV/bin/python" -m pytest -q -s -p no:cacheprovider "$HERE/tests" -k cancelling
