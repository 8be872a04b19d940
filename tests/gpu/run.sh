#!/usr/bin/env bash
# The CUDA backend on a real NVIDIA GPU: builds Tack, says what its kernels
# are built as there (a CUBIN for the GPU, or PTX), runs the CUDA cases
# against PyTorch and CuPy (tests/python/test_cuda_gpu.py: zero-copy exchange
# both ways, deleters, kernels over imported arrays checked against PyTorch,
# queued launches seen complete by a consumer, export_memory read back by a
# second process through the driver and imported there with
# tack.import_memory / tack.receive_array), then bench/gpu.py.
#
#     tests/gpu/run.sh            # PYTHON=<interpreter with torch and cupy> to choose one
#     tests/gpu/run.sh --quick    # the benchmark's quick mode
#     OUT=<dir> tests/gpu/run.sh  # also keep the logs in <dir>
#
# With OUT set, <dir> receives gpu-run.log (everything the script prints,
# an early stop such as "no GPU" included), gpu-build.log (the whole build)
# and junit.xml (pytest's report): a machine that hands back only a file
# folder and the end of the output loses nothing.
#
# Needs: an NVIDIA GPU and its driver, a Python with PyTorch (CUDA) and CuPy,
# a C compiler, and meson + ninja for that Python (installed with pip if
# missing). Takes well under 5 minutes. The benchmark runs even when a test
# fails; the exit status is non-zero if a test fails, the benchmark fails or
# a prerequisite is missing; the benchmark reports its targets as PASS/MISS.
# A step that hangs prints every Python thread's stack before it is killed.
set -Eeuo pipefail
export PYTHONUNBUFFERED=1

# The whole run once more, its output copied to the log as it comes. The
# pipeline waits for tee, so the log is complete when the script returns,
# and the status is the run's, not tee's.
if [ -n "${OUT:-}" ] && [ -z "${TACK_GPU_RUN_LOGGING:-}" ]; then
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    export OUT TACK_GPU_RUN_LOGGING=1
    set +e
    "${BASH:-bash}" "${BASH_SOURCE[0]}" "$@" 2>&1 | tee "$OUT/gpu-run.log"
    status=${PIPESTATUS[0]}
    exit "$status"
fi

# Whatever else stops the run says where.
trap 'echo "tests/gpu/run.sh: stopped: the command at line $LINENO failed (status $?)" >&2' ERR

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD=$ROOT/build/gpu
QUICK=
[ "${1:-}" = "--quick" ] && QUICK=--quick

stop() {
    echo "tests/gpu/run.sh: stopped: $*" >&2
    exit 1
}

# Copies a file into $OUT, when there is one.
keep() {
    if [ -n "${OUT:-}" ] && [ -f "$1" ]; then
        cp "$1" "$OUT/" || echo "tests/gpu/run.sh: could not copy $1 to $OUT" >&2
    fi
}

echo "== tests/gpu/run.sh $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n), kernel $(uname -r)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
        echo "nvidia-smi failed (status $?)"
else
    echo "nvidia-smi: not found"
fi

# An interpreter that has CuPy and a PyTorch that sees the GPU (a CPU-only
# PyTorch, as in a development virtual environment, does not count). The
# probe says why an interpreter does not do, cheapest check first.
PROBE='import importlib.util, sys
for name, what in (("torch", "PyTorch"), ("cupy", "CuPy")):
    if importlib.util.find_spec(name) is None:
        sys.exit(f"it has no {what}")
import torch
if not torch.cuda.is_available():
    sys.exit(f"its PyTorch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)")'

# Why "$1" cannot run the tests; nothing when it can.
unfit() {
    command -v "$1" >/dev/null 2>&1 || { echo "not found"; return 0; }
    local why status
    why=$("$1" -c "$PROBE" 2>&1 >/dev/null) && return 0
    status=$?
    why=${why##*$'\n'}
    echo "${why:-its probe exited with status $status}"
}

PY=${PYTHON:-}
if [ -n "$PY" ]; then
    why=$(unfit "$PY")
    [ -z "$why" ] || stop "PYTHON=$PY cannot run the GPU tests: $why"
else
    tried=
    for candidate in "$ROOT/.venv/bin/python" python3 python; do
        why=$(unfit "$candidate")
        if [ -z "$why" ]; then
            PY=$candidate
            break
        fi
        tried="$tried; $candidate: $why"
    done
    [ -n "$PY" ] || stop "no Python with both CuPy and a PyTorch that sees a CUDA GPU (${tried#; });" \
        "set PYTHON=<interpreter>"
fi
# The real driver, not the simulator.
unset TACK_CUDA_LIBRARY TACK_SIM_CUDA_DEVICES

"$PY" - <<'PYEOF'
import sys
import torch
import cupy
print(f"Python {sys.version.split()[0]} ({sys.executable}), PyTorch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"CuPy {cupy.__version__}, GPU: {torch.cuda.get_device_name(0)}")
PYEOF

# meson and ninja run by that interpreter, so the extension is built for it.
# A machine with no network fails the installs in seconds, not minutes.
SCRIPTS=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
export PATH="$SCRIPTS:$HOME/.local/bin:$PATH"
pip_install() {
    "$PY" -m pip install -q --retries 1 --timeout 15 "$@" ||
        "$PY" -m pip install -q --retries 1 --timeout 15 --user "$@"
}
if ! "$PY" -c 'import mesonbuild' 2>/dev/null || ! command -v ninja >/dev/null 2>&1; then
    echo "installing meson and ninja for $PY"
    pip_install meson ninja || stop "meson and ninja are missing for $PY and pip could not install them"
fi
if ! "$PY" -c 'import pytest' 2>/dev/null; then
    echo "installing pytest for $PY"
    pip_install pytest || stop "pytest is missing for $PY and pip could not install it"
fi

echo "== building Tack in $BUILD"
# From scratch (a few seconds), so that nothing configured elsewhere or
# half-configured is reused. Without -Werror: a compiler newer than the one
# the project is developed with may warn where that one did not. Meson and
# ninja report errors on stdout: their output goes to a log, kept in $OUT
# and shown here when a step fails.
rm -rf "$BUILD"
mkdir -p "$ROOT/build"
LOG="$ROOT/build/gpu-build.log"
built=0
"$PY" -m mesonbuild.mesonmain setup "$BUILD" -Dpython=true -Dtests=false -Dbuildtype=release \
    -Dwerror=false >"$LOG" 2>&1 && ninja -C "$BUILD" >>"$LOG" 2>&1 && built=1
keep "$LOG"
if [ "$built" != 1 ]; then
    tail -n 60 "$LOG" >&2
    stop "building Tack failed (full log: $LOG${OUT:+, and $OUT/gpu-build.log})"
fi
# The package from the checkout with the extension just built beside it.
rm -rf "$BUILD/pkg"
mkdir -p "$BUILD/pkg"
cp -r "$ROOT/python/tack" "$BUILD/pkg/tack"
cp "$BUILD"/src/python/_tack*.so "$BUILD/pkg/tack/"
export PYTHONPATH="$BUILD/pkg${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import tack; print("Tack", tack.__version__, "from", tack.__file__)'

export TACK_CACHE_DIR="$BUILD/cache"
mkdir -p "$TACK_CACHE_DIR"

# What kernels are built as here: a CUBIN for the GPU when an NVRTC Tack
# finds knows it and the driver loads that NVRTC's CUBINs, else PTX the
# driver reads, else an error naming the NVRTC to install (the cases below
# then fail with it).
echo "== kernel code"
timeout -k 10 60 "$PY" - <<'PYEOF' || echo "tests/gpu/run.sh: no kernel could be built (above)" >&2
import ctypes, os
import tack
v = ctypes.c_int()
ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
print(f"CUDA driver {v.value // 1000}.{v.value % 1000 // 10}; TACK_NVRTC_LIBRARY="
      f"{os.environ.get('TACK_NVRTC_LIBRARY') or '(unset: Tack looks)'}")
k = tack.Kernel("void fill(tack_index i, float v, float *y) { y[i] = v; }", device="cuda")
print(f"kernels on {tack.device('cuda').name} are {k.target('cuda')}")
PYEOF

# Runs "$PY" on a script or -m module for at most $1 seconds. A hang shows
# where: faulthandler prints every thread's stack when timeout's SIGTERM
# arrives (SIGKILL follows 10 s later), and -X faulthandler prints it on a
# crash. A child process started with the same environment does the same
# (PYTHONFAULTHANDLER).
WATCH='import faulthandler, os, runpy, signal, sys
faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
sys.argv = sys.argv[1:]
if sys.argv[0] == "-m":
    del sys.argv[0]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    runpy.run_path(sys.argv[0], run_name="__main__")'
limited() {
    local limit=$1
    shift
    PYTHONFAULTHANDLER=1 timeout -k 10 "$limit" "$PY" -X faulthandler -c "$WATCH" "$@"
}

echo "== CUDA cases against PyTorch and CuPy"
# Required: a skip here would hide that nothing ran. Cases marked
# simulator_only pass handles a real driver may crash on (an unknown or
# destroyed stream) and are never run here. A case that runs over 60 s
# prints every thread's stack (pytest's faulthandler_timeout), well before
# the 150 s limit. The benchmark runs whatever the tests found; the status
# reports both.
status=0
TACK_GPU_REQUIRED=1 limited 150 -m pytest -v -ra -p no:cacheprovider -m "not simulator_only" \
    -o faulthandler_timeout=60 --durations=10 ${OUT:+--junitxml="$OUT/junit.xml"} \
    "$ROOT/tests/python/test_cuda_gpu.py" || status=$?
[ "$status" -eq 0 ] || echo "tests/gpu/run.sh: the CUDA cases failed (status $status)" >&2

echo "== bench/gpu.py"
bench=0
limited 120 "$ROOT/bench/gpu.py" $QUICK || bench=$?
[ "$bench" -eq 0 ] || echo "tests/gpu/run.sh: bench/gpu.py failed (status $bench)" >&2
[ "$status" -ne 0 ] || status=$bench
echo "== tests/gpu/run.sh: exit status $status"
exit "$status"
