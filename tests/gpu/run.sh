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
# missing). Takes well under 5 minutes. Exits non-zero if a test fails or a
# prerequisite is missing; the benchmark reports its targets as PASS/MISS.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=$ROOT/build/gpu
QUICK=
[ "${1:-}" = "--quick" ] && QUICK=--quick

# An interpreter that has PyTorch and CuPy.
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for candidate in "$ROOT/.venv/bin/python" python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch, cupy' 2>/dev/null; then
            PY=$candidate
            break
        fi
    done
fi
if [ -z "$PY" ]; then
    echo "tests/gpu/run.sh: no Python with both PyTorch and CuPy found; set PYTHON=<interpreter>" >&2
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
if [ -f "$BUILD/build.ninja" ]; then
    "$PY" -m mesonbuild.mesonmain setup "$BUILD" --reconfigure -Dpython=true -Dtests=false \
        -Dbuildtype=release >/dev/null
else
    "$PY" -m mesonbuild.mesonmain setup "$BUILD" -Dpython=true -Dtests=false -Dbuildtype=release >/dev/null
fi
ninja -C "$BUILD" >/dev/null
# The package from the checkout with the extension just built beside it.
rm -rf "$BUILD/pkg"
mkdir -p "$BUILD/pkg"
cp -r "$ROOT/python/tack" "$BUILD/pkg/tack"
cp "$BUILD"/src/python/_tack*.so "$BUILD/pkg/tack/"
export PYTHONPATH="$BUILD/pkg${PYTHONPATH:+:$PYTHONPATH}"

# NVRTC: the one that came with PyTorch (nvidia-cuda-nvrtc), unless told.
if [ -z "${TACK_NVRTC_LIBRARY:-}" ]; then
    NVRTC=$("$PY" - <<'PYEOF'
import glob, os, site, sysconfig
roots = set(site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()["purelib"]])
for root in sorted(roots):
    for path in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libnvrtc.so*"))):
        if "builtins" not in path and ".alt." not in path:
            print(path)
            raise SystemExit
PYEOF
)
    [ -n "$NVRTC" ] && export TACK_NVRTC_LIBRARY="$NVRTC" && echo "NVRTC: $NVRTC"
fi
export TACK_CACHE_DIR="$BUILD/cache"
mkdir -p "$TACK_CACHE_DIR"

echo "== CUDA cases against PyTorch and CuPy"
# Required: a skip here would hide that nothing ran.
TACK_GPU_REQUIRED=1 timeout 240 "$PY" -m pytest -q -p no:cacheprovider -rs "$ROOT/tests/python/test_cuda_gpu.py"

echo "== bench/gpu.py"
timeout 180 "$PY" "$ROOT/bench/gpu.py" $QUICK
