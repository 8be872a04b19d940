"""What a user of the installed wheel does first. Run by smoke.sh in a new
venv, outside the source tree; --without-numpy where NumPy is not
installed."""
import importlib.metadata
import importlib.util
import os
import sys

import tack
import tack._tack

here = sys.prefix
for module in (tack, tack._tack):
    assert os.path.realpath(module.__file__).startswith(os.path.realpath(here)), module.__file__
dist = importlib.metadata.distribution("tack-arrays")
assert dist.version == tack.__version__, (dist.version, tack.__version__)
assert any(r.replace(" ", "").startswith("numpy>=") for r in dist.requires or []), dist.requires

scale = tack.Kernel("void scale(tack_index i, float a, float *y) { y[i] = a * y[i]; }")

if "--zig" in sys.argv:
    # Installed as tack-arrays[cc], run where no C compiler is on PATH.
    import pathlib
    import shutil
    import subprocess

    assert shutil.which("cc") is None and not os.environ.get("TACK_CC"), "a C compiler is within reach"
    assert importlib.util.find_spec("ziglang") is not None, "tack-arrays[cc] did not bring ziglang"
    a = tack.zeros(8, tack.f32)
    a.fill(1.5)
    scale(2.0, a)
    assert list(memoryview(a).cast("B").cast("f")) == [3.0] * 8
    cache = pathlib.Path(os.environ["TACK_CACHE_DIR"])
    assert any(b"Linker: LLD" in p.read_bytes() for p in cache.glob("cpu-*.so")), "zig built no kernel"
    report = subprocess.run([sys.executable, "-m", "tack"], capture_output=True, text=True, check=True).stdout
    assert "-m ziglang cc" in report, report
    print("wheel with [cc] and no C compiler on PATH: zig's builds the kernels, python -m tack says so")
    sys.exit(0)

if "--without-numpy" in sys.argv:
    assert importlib.util.find_spec("numpy") is None, "NumPy is installed"
    a = tack.zeros(8, tack.f32)
    a.fill(1.5)
    scale(2.0, a)
    assert list(memoryview(a).cast("B").cast("f")) == [3.0] * 8
    try:
        tack.array([1.0, 2.0])
    except ModuleNotFoundError as e:
        assert "pip install numpy" in str(e), str(e)
    else:
        raise AssertionError("tack.array worked without NumPy")
    print("wheel without NumPy: imports, runs a kernel, and tack.array says to install NumPy")
    sys.exit(0)

import numpy as np

n = np.arange(1000, dtype=np.float32)
a = tack.from_dlpack(n)
assert a.ptr == n.ctypes.data, "tack.from_dlpack copied"
scale(2.0, a)  # in NumPy's memory
assert np.array_equal(n, 2 * np.arange(1000, dtype=np.float32))
y = tack.zeros(1000, tack.f32)
y.fill(3)
v = np.from_dlpack(y)
assert v.ctypes.data == y.ptr, "np.from_dlpack copied"
scale(0.5, y)
assert (v == 1.5).all()
import subprocess

report = subprocess.run([sys.executable, "-m", "tack"], capture_output=True, text=True, check=True).stdout
assert report.startswith("Tack ") and f"NumPy             {np.__version__}" in report, report
print(f"wheel with NumPy {np.__version__}: zero-copy both ways, kernels on the CPU, python -m tack")
