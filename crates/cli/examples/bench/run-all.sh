#!/bin/sh
# The standing benchmark table of docs/benchmarks.md in one command: the machine, keel's table
# (`bench --table`: first request, one-turn RSS, keel's own share of Bash and Read turns at 50
# and 500 turns, the flatness of a 200-turn session), Reads at offsets in big files, resume.
#
#   crates/cli/examples/bench/run-all.sh [--runs N] [--rt]      (default 7 runs)
#
# Run it on an otherwise idle machine: the load average is printed before and after. On a busy
# one, --rt runs keel's table under `chrt -f 10` (root or CAP_SYS_NICE): a turn then no longer
# waits a time slice behind other work for a core, which no nice value prevents.
set -eu
runs=7
rt=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="${2:?--runs takes a number}"; shift 2 ;;
        --rt) rt="chrt -f 10"; shift ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "run-all.sh: unknown argument $1 (only --runs N, --rt)" >&2; exit 2 ;;
    esac
done
case "$runs" in ''|*[!0-9]*|0) echo "run-all.sh: --runs takes a number ≥ 1, not $runs" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../../../.."
target="${CARGO_TARGET_DIR:-target}"

echo "building (release) …" >&2
# The binaries as users install them first, each alone, as `cargo install` builds it and as
# order/make.sh recorded it: built together with another package or with the example (and its
# dev-dependencies), shared crates get other features and so other symbol hashes, and the
# linker's code order would no longer match their functions. The example does not relink them.
cargo build --release -q -p keel-cli --bin keel
cargo build --release -q -p keel-mock --bin keel-mock
cargo build --release -q -p keel-cli --example bench
cargo build --release -q -p keel-tools --example bench_files
cargo build --release -q -p keel-core --example bench_resume

echo "## keel benchmark table — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')), kernel $(uname -r)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- keel: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), release build"
echo
echo "### Per turn, first request, memory"
# shellcheck disable=SC2086 # $rt is empty or a command and its arguments
$rt "$target/release/examples/bench" --table --runs "$runs"
echo
echo "### Read at offsets (bench_files --reads-only)"
echo '```'
"$target/release/examples/bench_files" --reads-only --runs "$runs"
echo '```'
echo
echo "### Resume (bench_resume)"
echo '```'
"$target/release/examples/bench_resume"
echo '```'
echo
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
