#!/usr/bin/env bash
# Python SDK parse check: the official `claude-agent-sdk` (PyPI) must parse keel's stream-json.
#
# Runs keel against keel-mock twice (tests/python-sdk/scenario.json: text, thinking, Bash and
# Read calls, a denied Write, a 529 that is retried; then a run that stops at --max-turns),
# saves the transcripts under target/python-sdk/, and feeds every line through the SDK's own
# message parser (check_parse.py). Prints "python-sdk-parse: N passed, M failed".
#
# Idempotent: the venv (target/py-sdk-venv) is created and the SDK installed only once.
# `run.sh --setup` only installs the SDK (.ci/run does that in the background while it builds).
# Env: CLAUDE_AGENT_SDK_VERSION pins the SDK version; KEEL_SKIP_BUILD=1 skips `cargo build`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/py-sdk-venv"
OUT="$TARGET/python-sdk"
KEEL="$TARGET/debug/keel"
MOCK="$TARGET/debug/keel-mock"
SCENARIO="$ROOT/tests/python-sdk/scenario.json"

# The SDK, in a venv of its own (reused on later runs).
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
want="claude-agent-sdk${CLAUDE_AGENT_SDK_VERSION:+==$CLAUDE_AGENT_SDK_VERSION}"
have="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("claude-agent-sdk"))' 2>/dev/null || true)"
if [ -z "$have" ] || { [ -n "${CLAUDE_AGENT_SDK_VERSION:-}" ] && [ "$have" != "$CLAUDE_AGENT_SDK_VERSION" ]; }; then
    "$VENV/bin/pip" install -q --disable-pip-version-check "$want" \
        || { echo "python-sdk-parse: could not install $want from PyPI" >&2; exit 1; }
fi
[ "${1:-}" = --setup ] && exit 0

if [ -z "${KEEL_SKIP_BUILD:-}" ]; then
    cargo build -q -p keel-cli -p keel-mock
fi
for bin in "$KEEL" "$MOCK"; do
    [ -x "$bin" ] || { echo "python-sdk-parse: $bin is missing; run cargo build" >&2; exit 1; }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/keel-python-sdk.XXXXXX")"
MOCK_PID=""
cleanup() {
    if [ -n "$MOCK_PID" ]; then
        kill "$MOCK_PID" 2>/dev/null || true
        wait "$MOCK_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$WORK/project" "$WORK/home" "$OUT"
rm -f "$OUT"/*.jsonl "$OUT"/*.exit "$OUT"/*.stderr # keel-mock --log appends
printf 'the only line\n' > "$WORK/project/notes.txt"

"$MOCK" --scenario "$SCENARIO" --port 0 --log "$OUT/requests.jsonl" \
    > "$WORK/mock.url" 2> "$WORK/mock.stderr" &
MOCK_PID=$!
for _ in $(seq 200); do
    [ -s "$WORK/mock.url" ] && break
    kill -0 "$MOCK_PID" 2>/dev/null || break
    sleep 0.05
done
URL="$(head -n1 "$WORK/mock.url" || true)"
case "$URL" in
    http://*) ;;
    *) echo "python-sdk-parse: keel-mock did not start: $(cat "$WORK/mock.stderr")" >&2; exit 1 ;;
esac

# run_keel NAME ARGS...: one keel run in the scratch project; saves NAME.jsonl and NAME.exit.
run_keel() {
    local name="$1"; shift
    local rc=0
    (
        cd "$WORK/project"
        env -i PATH="$PATH" HOME="$WORK/home" KEEL_HOME="$WORK/home/.keel" \
            ANTHROPIC_BASE_URL="$URL" ANTHROPIC_API_KEY=test \
            "$KEEL" "$@" --output-format stream-json --verbose --include-partial-messages \
            > "$OUT/$name.jsonl" 2> "$OUT/$name.stderr"
    ) || rc=$?
    echo "$rc" > "$OUT/$name.exit"
}

run_keel full -p "PARSE-CHECK-FULL: look around, then write out.txt" --allowedTools Bash
run_keel max_turns -p "PARSE-CHECK-MAX-TURNS: run one command" --max-turns 1 --allowedTools Bash
run_keel agents -p "PARSE-CHECK-AGENTS: delegate and run in the background" --allowedTools Bash

"$VENV/bin/python" "$ROOT/tests/python-sdk/check_parse.py" "$OUT"
