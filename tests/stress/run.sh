#!/bin/sh
# make stress: the long variants of the hardening tests.
#   1. the lifetime soak, 1,000,000 exchanges (resident growth < 4 MiB)
#   2. eight Python threads exchanging and launching for 10 s, and export
#      deleters called from native threads
#   3. the C API from eight threads under ThreadSanitizer (needs clang)
#   4. the C tests under valgrind (a build without sanitizers)
#   5. the soak under valgrind (errors involving Tack fail it)
# Each step runs whatever the others do; the summary says which failed.
# Steps that need a program this machine lacks (clang, valgrind) say so and pass.
# STRESS_EXCHANGES, STRESS_SECONDS, STRESS_VALGRIND_EXCHANGES override the sizes.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
py=${STRESS_PYTHON:-$root/.venv/bin/python}
meson=${STRESS_MESON:-$root/.venv/bin/meson}
build=${STRESS_BUILD:-build}
exchanges=${STRESS_EXCHANGES:-1000000}
seconds=${STRESS_SECONDS:-10}
vg_exchanges=${STRESS_VALGRIND_EXCHANGES:-20000}
failed=""

step() {
    name=$1
    shift
    echo "==== stress: $name"
    if "$@"; then
        echo "==== stress: $name: ok"
    else
        echo "==== stress: $name: FAILED"
        failed="$failed $name"
    fi
}

soak() { "$py" tests/stress/soak.py --exchanges "$exchanges"; }

threads() { "$py" tests/stress/threads.py --seconds "$seconds"; }

tsan_threads() {
    cc=""
    for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
        command -v "$c" >/dev/null 2>&1 && { cc=$c; break; }
    done
    if [ -z "$cc" ]; then
        echo "skipped: ThreadSanitizer needs clang"
        return 0
    fi
    mkdir -p "$build/tsan"
    # The backend registry as meson passes it, from src/backend/meson.build's list.
    registry=$(sed -n "s/^backends = \[\(.*\)\]/\1/p" src/backend/meson.build | tr -d "' " | tr ',' '\n' |
        sed 's/.*/X(&)/' | tr -d '\n')
    # shellcheck disable=SC2046
    "$cc" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=thread -pthread -Iinclude -Isrc/core -Itests/c \
        "-DTACK_BACKENDS(X)=$registry" \
        -o "$build/tsan/test_threads" tests/c/test_threads.c \
        $(find src -name '*.c' ! -path 'src/python/*' | LC_ALL=C sort) -ldl -lm || return 1
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" TACK_THREADS_ITERATIONS=200000 \
        "$build/tsan/test_threads"
}

valgrind_c() {
    command -v valgrind >/dev/null 2>&1 || { echo "skipped: valgrind not installed"; return 0; }
    if [ ! -f "$build/valgrind/build.ninja" ]; then
        # plain debug build: valgrind cannot run sanitized code
        "$meson" setup "$build/valgrind" -Dpython=false -Dtests=true -Dbuildtype=debug -Dwerror=true >/dev/null ||
            "$meson" setup --wipe "$build/valgrind" -Dpython=false -Dtests=true -Dbuildtype=debug -Dwerror=true || return 1
    fi
    "$meson" compile -C "$build/valgrind" >/dev/null || return 1
    # Each case runs in a child (tests/c/check.h): its report is the one to
    # see, and its time limit grows with meson's.
    CHECK_TIMEOUT=600 "$meson" test -C "$build/valgrind" --print-errorlogs --timeout-multiplier 20 \
        --wrap "valgrind -q --suppressions=$root/tests/stress/valgrind.supp --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect"
}

valgrind_soak() {
    command -v valgrind >/dev/null 2>&1 || { echo "skipped: valgrind not installed"; return 0; }
    mkdir -p "$build/valgrind"
    rm -f "$build"/valgrind/soak.*.xml
    PYTHONMALLOC=malloc valgrind --suppressions="$root/tests/stress/valgrind.supp" --xml=yes --xml-file="$build/valgrind/soak.%p.xml" --leak-check=full \
        --errors-for-leak-kinds=definite --child-silent-after-fork=yes \
        "$py" tests/stress/soak.py --exchanges "$vg_exchanges" --no-rss || return 1
    "$py" tests/stress/valgrind_filter.py "$build"/valgrind/soak.*.xml
}

# tests/stress/run.sh [step ...] runs only the steps named.
wanted=" ${*:-soak threads tsan-threads valgrind-c-tests valgrind-soak} "
for s in soak:soak threads:threads tsan-threads:tsan_threads valgrind-c-tests:valgrind_c \
         valgrind-soak:valgrind_soak; do
    case "$wanted" in *" ${s%%:*} "*) step "${s%%:*}" "${s#*:}" ;; esac
done

if [ -n "$failed" ]; then
    echo "stress: FAILED:$failed"
    exit 1
fi
echo "stress: all passed"
