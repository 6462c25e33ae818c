#!/usr/bin/env bash
# The deployment recipes' checks (deploy/test_deploy.py): the Kubernetes Job's exit-code
# mapping and the Dockerfile, in a venv of their own under target/ (PyYAML and pytest from the
# package registry). The image itself is built only where a container engine answers: there
# the test must run (KEEL_CI_REQUIRE_ENGINE=1 turns its skip into a failure); elsewhere it is
# skipped, saying why, and the skip is recorded in the file named by KEEL_CI_NOT_RUN.
#
# `run.sh --setup` only installs the venv (.ci/run does that in the background while it builds).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/deploy-venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import yaml, pytest" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "pyyaml>=6,<7" "pytest>=8,<9"
fi
[ "${1:-}" = --setup ] && exit 0
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  export KEEL_CI_REQUIRE_ENGINE=1
else
  msg="deploy: the container image build (no container engine answers on this machine)"
  echo "!! NOT RUN: $msg"
  echo "$msg" >> "${KEEL_CI_NOT_RUN:-/dev/null}"
fi
exec "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider "$ROOT/deploy/test_deploy.py"
