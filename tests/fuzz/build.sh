#!/bin/sh
# Builds the DLPack import fuzzer straight from the library sources with
# clang: libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer (every
# report fatal). Meson is not involved, so the fuzzer builds even where the
# project's own configuration does not.
#
#   tests/fuzz/build.sh [output]     default: build/fuzz/fuzz_import
#
# Exit status 77 means "cannot build here": no clang, or a clang without the
# libFuzzer runtime (Debian: apt-get install clang libclang-rt-14-dev).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build/fuzz/fuzz_import}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cc=${FUZZ_CC:-}
if [ -z "$cc" ]; then
    for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
        if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
    done
fi
if [ -z "$cc" ]; then
    echo "fuzz: clang not found; install it (apt-get install -y clang libclang-rt-14-dev) to build the fuzzer" >&2
    exit 77
fi

cd "$root"
# The library is every C file under src/ except the Python extension: each
# backend, driver table and kernel layer file registers itself through the
# tables in src/core, so all of them are linked.
sources=$(find src -name '*.c' ! -path 'src/python/*' | LC_ALL=C sort)
target=tests/fuzz/fuzz_import.c

# Rebuild only when a source or header is newer than the binary.
if [ -x "$out" ] && [ -z "$(find src include tests/fuzz -newer "$out" \( -name '*.c' -o -name '*.h' -o -name build.sh \) 2>/dev/null | head -n 1)" ]; then
    exit 0
fi

mkdir -p "$(dirname "$out")"
# The registry of backends, as meson passes it: from the one list in
# src/backend/meson.build.
registry=$(sed -n "s/^backends = \[\(.*\)\]/\1/p" src/backend/meson.build | tr -d "' " | tr ',' '\n' |
    sed 's/.*/X(&)/' | tr -d '\n')
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Iinclude -Isrc/core -pthread
       -DTACK_BACKENDS(X)=$registry -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; return (int)(n & 0); }\n' \
    >"$probe/p.c"
# shellcheck disable=SC2086
if ! "$cc" $flags -o "$probe/p" "$probe/p.c" >"$probe/log" 2>&1; then
    echo "fuzz: $cc cannot link -fsanitize=fuzzer (install libclang-rt-dev for it):" >&2
    sed 's/^/  /' "$probe/log" >&2
    exit 77
fi
# shellcheck disable=SC2086
"$cc" $flags -o "$out.tmp" $target $sources -ldl -lm
mv "$out.tmp" "$out"
echo "fuzz: built $out with $cc"
