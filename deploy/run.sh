#!/usr/bin/env bash
# The deployment recipes' checks (deploy/test_deploy.py): the Kubernetes Job's exit-code
# mapping and the Dockerfile, in a venv of their own under target/ (PyYAML and pytest from the
# package registry). The image itself is built only where a container engine runs; the test
# says SKIPPED and why otherwise.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/deploy-venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check "pyyaml>=6,<7" "pytest>=8,<9"
exec "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider "$ROOT/deploy/test_deploy.py"
