#!/bin/sh
# Runs the DLPack import fuzzer once over its seed corpus (tests/fuzz/corpus)
# -- no mutation, a few seconds -- and checks that each input in
# tests/fuzz/known still fails: those reproduce library defects not fixed
# yet, and one that passes belongs in the corpus now (move its entry from
# KNOWN to SEEDS in tests/fuzz/seeds.py and run that script).
#
# Without clang and its libFuzzer runtime this prints why and succeeds, so
# that `make test` runs everywhere.
#
#   tests/fuzz/run_corpus.sh [fuzzer]     default: build/fuzz/fuzz_import
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/fuzz/fuzz_import}

"$root/tests/fuzz/build.sh" "$bin"
rc=$?
if [ "$rc" = 77 ]; then
    echo "fuzz-corpus: skipped: the fuzzer needs clang with libFuzzer (apt-get install -y clang libclang-rt-14-dev)"
    exit 0
fi
[ "$rc" = 0 ] || { echo "fuzz-corpus: FAILED to build the fuzzer" >&2; exit "$rc"; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0

count=$(find "$root/tests/fuzz/corpus" -mindepth 1 -maxdepth 1 -type f | wc -l)
if "$bin" -timeout=20 "$root"/tests/fuzz/corpus/* >"$log" 2>&1; then
    echo "fuzz-corpus: $count seed inputs pass"
else
    grep -v '^Running: \|^Executed \|^INFO: ' "$log" >&2
    echo "fuzz-corpus: FAILED: an input of tests/fuzz/corpus breaks an invariant (report above)" >&2
    status=1
fi

for input in "$root"/tests/fuzz/known/*; do
    [ -e "$input" ] || continue
    name=$(basename "$input")
    if "$bin" -timeout=20 "$input" >"$log" 2>&1; then
        echo "fuzz-corpus: FAILED: known defect '$name' no longer reproduces; move it into the corpus" >&2
        status=1
    else
        why=$(grep -m1 -E 'runtime error|invariant broken|ERROR: AddressSanitizer' "$log" | sed 's/^.*src\///')
        echo "fuzz-corpus: known defect still present: $name: $why"
    fi
done
exit $status
