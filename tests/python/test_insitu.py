"""The in-situ example (examples/insitu): a C heat-equation code built with
CMake against this package's libtack (find_package(Tack) from
python -m tack --cmake-dir), embedding this Python, hands its field to
analysis.py every 100 steps through <tack/python.h>.

heat itself checks that one libtack is mapped once tack is imported, that
NumPy's and Tack's addresses of the field are its own (zero copy), that
Python's sum is C's, and that every count returns to where it was; it
prints a step's line only after those checks pass, and "ok" last.
"""
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import pytest

import tack

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "insitu" / "run.py"


@pytest.mark.skipif(any(shutil.which(t) is None for t in ("cmake", "make", "cc")),
                    reason="needs cmake, make and cc to build the example")
def test_the_simulation_hands_python_its_own_memory_and_everything_is_released(tmp_path):
    r = subprocess.run([sys.executable, str(RUN), "--build", str(tmp_path / "build"), "--out", str(tmp_path / "png")],
                       capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    # The extension bound to the very libtack the simulation links.
    lib = re.findall(r"one libtack in the process, shared by C and Python: (.*)", r.stdout)
    names = [n for n in os.listdir(tack.get_library_dir()) if n.startswith("libtack.so.")]
    assert len(lib) == 1 and len(names) == 1, out
    assert os.path.realpath(lib[0].strip()) == os.path.realpath(os.path.join(tack.get_library_dir(), names[0])), out
    steps = re.findall(r"step +(\d+): total heat [\d.]+, .* field at (0x[0-9a-f]+) in C, NumPy and Tack, PNG written",
                       r.stdout)
    assert [int(s) for s, _ in steps] == [100, 200, 300, 400], out
    assert "every array, buffer and export released, in C and in Python" in r.stdout, out
    assert "   ok" in r.stdout.splitlines(), out
    pngs = sorted((tmp_path / "png").glob("heat_*.png"))
    assert [p.name for p in pngs] == [f"heat_{s:05d}.png" for s in (100, 200, 300, 400)]
    for p in pngs:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
        assert struct.unpack(">II", data[16:24]) == (128, 128)
