#!/usr/bin/env bash
# Transcripts in object storage against a real S3-compatible server: moto's server (from the
# package registry, in a venv under target/) runs on loopback and the fleet test that needs it
# is run with KEEL_TEST_MOTO_SERVER pointing at it. Without moto that test reports itself
# SKIPPED (the file:// and unreachable-bucket tests run everywhere); here, if moto cannot be
# installed, this step says so and why.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/moto-venv"
if [ ! -x "$VENV/bin/moto_server" ]; then
  python3 -m venv "$VENV" \
    && "$VENV/bin/pip" install -q --disable-pip-version-check "moto[server]>=5,<6" \
    || { echo "SKIPPED object storage against moto: installing moto[server] failed"; exit 0; }
fi
KEEL_TEST_MOTO_SERVER="$VENV/bin/moto_server" \
  cargo test -q -p keel-cli --test all fleet:: -- --nocapture
