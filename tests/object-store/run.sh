#!/usr/bin/env bash
# Transcripts in object storage against a real S3-compatible server: moto's server (from the
# package registry, in a venv under target/) runs on loopback, and the fleet tests that need
# it (ignored by plain `cargo test`: "needs moto_server") are run with KEEL_TEST_MOTO_SERVER
# pointing at it. The file:// and unreachable-bucket tests run everywhere with the rest of the
# suite. If moto cannot be installed this step fails: it would otherwise check nothing.
#
# `run.sh --setup` only installs moto (.ci/run does that in the background while it builds).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/moto-venv"
if [ ! -x "$VENV/bin/moto_server" ]; then
  python3 -m venv "$VENV" \
    && "$VENV/bin/pip" install -q --disable-pip-version-check "moto[server]>=5,<6" \
    || { echo "object-store: installing moto[server] from the package registry failed" >&2; exit 1; }
fi
[ "${1:-}" = --setup ] && exit 0
KEEL_TEST_MOTO_SERVER="$VENV/bin/moto_server" exec "$ROOT/.ci/run-ignored" all \
  suite::fleet::a_session_killed_mid_turn_resumes_elsewhere_from_an_s3_bucket \
  suite::fleet::transcripts_go_to_an_s3_compatible_server_and_come_back
