#!/usr/bin/env bash
# Remakes crates/cli/order/keel.order: the functions of the release `keel` binary that short
# runs execute (start-up and a text turn, each file tool, a shell command, stream-json input),
# recorded with valgrind's callgrind against keel-mock. The build script hands the list to the
# linker, which lays those functions out together (see crates/cli/build.rs).
#
# Run it after changes that move what a run executes, or with a new compiler (the names carry
# hashes that change with it). Needs valgrind; takes a few minutes (a release build, then the
# runs under valgrind).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
command -v valgrind >/dev/null || { echo "make.sh: valgrind is needed (it records which functions run)" >&2; exit 2; }

# keel is built alone, as `cargo install --path crates/cli` builds it: built beside another
# package (or an example, with the dev-dependencies), shared crates get other features and so
# other symbol hashes, and the list would not match the binary users run.
if [ -z "${KEEL_ORDER_NO_BUILD:-}" ]; then
  cargo build --release -p keel-cli --bin keel
  cargo build --release -p keel-mock --bin keel-mock
fi
keel="$root/target/release/keel"
mock_bin="$root/target/release/keel-mock"

work=$(mktemp -d)
mock=""
cleanup() { [ -n "$mock" ] && kill "$mock" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/home" "$work/cwd" "$work/cg"
runs=0
printf 'one\ntwo\nthree needle\n' > "$work/cwd/notes.txt"

# One recorded run: $1 scenario JSON, then keel's arguments; stdin is passed on.
record() {
  local scenario=$1; shift
  runs=$((runs + 1))
  mkdir -p "$work/cg/$runs"
  printf '%s\n' "$scenario" > "$work/scenario.json"
  "$mock_bin" --scenario "$work/scenario.json" > "$work/mock.out" 2>&1 &
  mock=$!
  for _ in $(seq 100); do [ -s "$work/mock.out" ] && break; sleep 0.1; done
  local url; url=$(head -1 "$work/mock.out")
  if ! (cd "$work/cwd" && env -i PATH="$PATH" HOME="$work/home" KEEL_HOME="$work/home/.keel" \
    ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=order \
    valgrind --quiet --tool=callgrind --trace-children=yes --demangle=no \
      --compress-strings=no --compress-pos=no --callgrind-out-file="$work/cg/$runs/%p" \
      "$keel" "$@" > "$work/out" 2>&1); then
    echo "make.sh: a recorded run failed (keel $*):" >&2
    cat "$work/out" >&2
    exit 1
  fi
  kill "$mock"; wait "$mock" 2>/dev/null || true; mock=""
}

text='{"steps": [{"kind": "text", "text": "Hello."}]}'
record "$text" -p hi --output-format stream-json --verbose < /dev/null
record "$text" -p hi < /dev/null
record "$text" -p hi --output-format json < /dev/null
printf '%s\n' '{"type":"user","message":{"role":"user","content":"hi"}}' |
  record "$text" -p --input-format stream-json --output-format stream-json --verbose
tools='{"steps": [
  {"kind": "tool_use", "calls": [{"name": "Bash", "input": {"command": "true"}}]},
  {"kind": "tool_use", "calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]},
  {"kind": "tool_use", "calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}]},
  {"kind": "tool_use", "calls": [{"name": "Grep", "input": {"pattern": "needle", "output_mode": "content"}}]},
  {"kind": "tool_use", "calls": [{"name": "Write", "input": {"file_path": "new.txt", "content": "a\nb\n"}}]},
  {"kind": "tool_use", "calls": [{"name": "Read", "input": {"file_path": "new.txt"}}]},
  {"kind": "tool_use", "calls": [{"name": "Edit", "input": {"file_path": "new.txt", "old_string": "a", "new_string": "c"}}]},
  {"kind": "text", "text": "Done."}]}'
record "$tools" -p go --output-format stream-json --verbose \
  --allowedTools Bash,Read,Glob,Grep,Write,Edit < /dev/null

# Every function keel's image ran (in keel, its launcher and the supervisors), as the linker
# names them, once each: those of the first run first (a plain text turn, what most runs do),
# then what each later run added, so a short run's code is the most tightly packed.
nm --defined-only "$keel" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u > "$work/text"
: > "$work/seen"
: > "$work/order"
for n in $(seq "$runs"); do
  awk -v keel="$keel" '
    /^ob=/  { ob = substr($0, 4); next }
    /^cob=/ { cob = substr($0, 5); next }
    /^fn=/  { if (ob == keel) print substr($0, 4); next }
    /^cfn=/ { if ((cob != "" ? cob : ob) == keel) print substr($0, 5); cob = ""; next }
  ' "$work/cg/$n"/* | sort -u | comm -12 - "$work/text" | comm -23 - "$work/seen" > "$work/new"
  cat "$work/new" >> "$work/order"
  sort -u "$work/seen" "$work/new" -o "$work/seen"
done
cp "$work/order" crates/cli/order/keel.order
echo "crates/cli/order/keel.order: $(wc -l < crates/cli/order/keel.order) functions"
