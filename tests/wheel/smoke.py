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

# The C side of the wheel: the libtack the extension uses, under its SONAME
# beside it (not renamed by auditwheel, so a host's libtack of that SONAME
# is the one bound), with the headers, tack.pc and the CMake package.
import pathlib
import re
import shutil
import tempfile

package = pathlib.Path(tack.__file__).parent
libs = sorted(p.name for p in pathlib.Path(tack.get_library_dir()).glob("libtack.so*"))
assert libs == ["libtack.so.0.1"], libs
assert not list(package.parent.glob("tack_arrays.libs")), "auditwheel grafted a renamed copy"
if shutil.which("readelf"):
    dynamic = subprocess.run(["readelf", "-dW", tack._tack.__file__], capture_output=True, text=True).stdout
    assert "[libtack.so.0.1]" in dynamic and "[$ORIGIN/lib]" in dynamic, dynamic
assert (pathlib.Path(tack.get_include()) / "tack" / "tack.h").is_file()
assert (pathlib.Path(tack.get_library_dir()) / "pkgconfig" / "tack.pc").is_file()
cmake_dir = subprocess.run([sys.executable, "-m", "tack", "--cmake-dir"], capture_output=True, text=True,
                           check=True).stdout.strip()
assert (pathlib.Path(cmake_dir) / "TackConfig.cmake").is_file(), cmake_dir
flags = subprocess.run([sys.executable, "-m", "tack", "--cflags", "--libs"], capture_output=True, text=True,
                       check=True).stdout.split()
if shutil.which("cc"):
    with tempfile.TemporaryDirectory() as work:
        src = pathlib.Path(work, "uses_tack.c")
        src.write_text('#include <stdio.h>\n#include <tack/tack.h>\n'
                       'int main(void) { printf("%s\\n", tack_status_name(TACK_ETYPE)); return 0; }\n')
        exe = pathlib.Path(work, "uses_tack")
        subprocess.run(["cc", "-std=c11", str(src), "-o", str(exe), *flags], check=True)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "TACK_ETYPE", out
        if shutil.which("readelf"):
            dynamic = subprocess.run(["readelf", "-dW", str(exe)], capture_output=True, text=True).stdout
            assert re.search(r"NEEDED.*\[libtack\.so\.0\.1\]", dynamic), dynamic
print("wheel: libtack.so.0.1 beside the extension, headers, tack.pc, CMake package, python -m tack --cflags --libs")
