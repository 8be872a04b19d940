#!/usr/bin/env bash
# The CUDA backend on a real NVIDIA GPU: builds Tack, runs the CUDA cases
# against PyTorch and CuPy (tests/python/test_cuda_gpu.py: zero-copy exchange
# both ways, deleters, kernels over imported arrays checked against PyTorch,
# queued launches seen complete by a consumer, export_memory read back by a
# second process through cuMemImportFromShareableHandle), then bench/gpu.py.
#
#     tests/gpu/run.sh            # PYTHON=<interpreter with torch and cupy> to choose one
#     tests/gpu/run.sh --quick    # the benchmark's quick mode
#
# Needs: an NVIDIA GPU and its driver, a Python with PyTorch (CUDA) and CuPy,
# a C compiler, and meson + ninja for that Python (installed with pip if
# missing). Takes well under 5 minutes. The benchmark runs even when a test
# fails; the exit status is non-zero if a test fails, the benchmark fails or
# a prerequisite is missing; the benchmark reports its targets as PASS/MISS.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=$ROOT/build/gpu
QUICK=
[ "${1:-}" = "--quick" ] && QUICK=--quick

# An interpreter that has CuPy and a PyTorch that sees the GPU (a CPU-only
# PyTorch, as in a development virtual environment, does not count).
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for candidate in "$ROOT/.venv/bin/python" python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys, torch, cupy; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
            PY=$candidate
            break
        fi
    done
fi
if [ -z "$PY" ]; then
    echo "tests/gpu/run.sh: no Python with both CuPy and a PyTorch that sees a CUDA GPU found;" \
        "set PYTHON=<interpreter>" >&2
    exit 1
fi
# The real driver, not the simulator.
unset TACK_CUDA_LIBRARY TACK_SIM_CUDA_DEVICES

"$PY" - <<'PYEOF'
import sys
import torch
import cupy
if not torch.cuda.is_available():
    sys.exit("tests/gpu/run.sh: PyTorch sees no CUDA GPU (torch.cuda.is_available() is False)")
print(f"Python {sys.version.split()[0]}, PyTorch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"CuPy {cupy.__version__}, GPU: {torch.cuda.get_device_name(0)}")
PYEOF

# meson and ninja run by that interpreter, so the extension is built for it.
SCRIPTS=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
export PATH="$SCRIPTS:$HOME/.local/bin:$PATH"
if ! "$PY" -c 'import mesonbuild' 2>/dev/null || ! command -v ninja >/dev/null 2>&1; then
    echo "installing meson and ninja for $PY"
    "$PY" -m pip install -q meson ninja || "$PY" -m pip install -q --user meson ninja
fi
"$PY" -c 'import pytest' 2>/dev/null || "$PY" -m pip install -q pytest || "$PY" -m pip install -q --user pytest

echo "== building Tack in $BUILD"
# From scratch (a few seconds), so that nothing configured elsewhere or
# half-configured is reused. Without -Werror: a compiler newer than the one
# the project is developed with may warn where that one did not. Meson and
# ninja report errors on stdout: their output goes to a log, shown when a
# step fails.
rm -rf "$BUILD"
mkdir -p "$ROOT/build"
LOG="$ROOT/build/gpu-build.log"
if ! "$PY" -m mesonbuild.mesonmain setup "$BUILD" -Dpython=true -Dtests=false -Dbuildtype=release \
    -Dwerror=false >"$LOG" 2>&1 || ! ninja -C "$BUILD" >>"$LOG" 2>&1; then
    tail -n 60 "$LOG" >&2
    echo "tests/gpu/run.sh: building Tack failed (full log: $LOG)" >&2
    exit 1
fi
# The package from the checkout with the extension just built beside it.
rm -rf "$BUILD/pkg"
mkdir -p "$BUILD/pkg"
cp -r "$ROOT/python/tack" "$BUILD/pkg/tack"
cp "$BUILD"/src/python/_tack*.so "$BUILD/pkg/tack/"
export PYTHONPATH="$BUILD/pkg${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import tack; print("Tack", tack.__version__, "from", tack.__file__)'

# NVRTC: Tack loads the PTX it makes with the driver, which refuses PTX from
# an NVRTC newer than itself. So, unless told: of the NVRTCs of the Python
# packages (PyTorch's nvidia-cuda-nvrtc) and of the CUDA toolkits here, the
# newest the driver supports.
if [ -z "${TACK_NVRTC_LIBRARY:-}" ]; then
    NVRTC=$("$PY" - <<'PYEOF'
import ctypes, glob, os, shutil, site, sys, sysconfig

# Versions as CUDA writes them: 1000 * major + 10 * minor.
def driver_version():
    v = ctypes.c_int()
    try:
        return v.value if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0 else 0
    except OSError:
        return 0

def nvrtc_version(path):
    major, minor = ctypes.c_int(), ctypes.c_int()
    try:
        ok = ctypes.CDLL(path).nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0
    except (OSError, AttributeError):
        return 0
    return major.value * 1000 + minor.value * 10 if ok else 0

def show(v):
    return f"{v // 1000}.{v % 1000 // 10}" if v else "unknown"

driver = driver_version()
roots = site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()["purelib"]]
patterns = [os.path.join(r, "nvidia", "*", "lib", "libnvrtc.so*") for r in roots]
toolkits = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
if shutil.which("nvcc"):
    toolkits.append(os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("nvcc")))))
toolkits += sorted(glob.glob("/usr/local/cuda-*"))
for t in filter(None, toolkits):
    patterns += [os.path.join(t, d, "libnvrtc.so*") for d in ("lib64", "lib", "targets/*/lib")]
patterns.append("/usr/lib/*-linux-gnu/libnvrtc.so*")
found, seen = [], set()
for pattern in patterns:
    for path in sorted(glob.glob(pattern)):
        name = os.path.basename(path)
        real = os.path.realpath(path)
        if "builtins" in name or ".alt." in name or real in seen:
            continue
        seen.add(real)
        v = nvrtc_version(path)
        if v:
            found.append((v, path))
usable = [f for f in found if not driver or f[0] <= driver]
say = lambda text: print(text, file=sys.stderr)
say(f"CUDA driver {show(driver)}; NVRTC found: " + (", ".join(f"{show(v)} {p}" for v, p in found) or "none"))
if usable:
    # The newest usable; the first found (the Python packages') among equals.
    best = max(usable, key=lambda f: f[0])
    print(best[1])
elif found:
    say("tests/gpu/run.sh: every NVRTC found is newer than the driver: kernels will not load")
PYEOF
) || NVRTC=
    [ -n "$NVRTC" ] && export TACK_NVRTC_LIBRARY="$NVRTC" && echo "NVRTC: $NVRTC"
fi
export TACK_CACHE_DIR="$BUILD/cache"
mkdir -p "$TACK_CACHE_DIR"

echo "== CUDA cases against PyTorch and CuPy"
# Required: a skip here would hide that nothing ran. The benchmark runs
# whatever the tests found; the status reports both.
status=0
TACK_GPU_REQUIRED=1 timeout -k 10 150 "$PY" -m pytest -v -ra -p no:cacheprovider "$ROOT/tests/python/test_cuda_gpu.py" ||
    status=$?

echo "== bench/gpu.py"
bench=0
timeout -k 10 120 "$PY" "$ROOT/bench/gpu.py" $QUICK || bench=$?
[ "$status" -ne 0 ] || status=$bench
exit "$status"
