"""Releases after the last one, from C through ctypes on the package's own
libtack: a stale release never frees the object that took its place, and
an extra release of the process's cpu device is reported, not ignored.
Each case runs in a child process: with assertions (a sanitized build) the
report aborts the child; without, the call returns and changes nothing.
"""

import os
import subprocess
import sys
import textwrap

import tack

PRELUDE = """
import ctypes, os, sys
import tack
names = [n for n in os.listdir(tack.get_library_dir()) if n.startswith("libtack.so.")]
lib = ctypes.CDLL(os.path.join(tack.get_library_dir(), names[0]))
lib.tack_status_name.restype = ctypes.c_char_p
for f in ("tack_array_release", "tack_device_release"):
    getattr(lib, f).argtypes = [ctypes.c_void_p]
cpu = ctypes.c_void_p()
assert lib.tack_device_open(b"cpu", None, ctypes.c_size_t(0), ctypes.byref(cpu)) == 0
n = ctypes.c_int64(4)
F32 = 8

def new_array():
    a = ctypes.c_void_p()
    assert lib.tack_array_empty(cpu, F32, 1, ctypes.byref(n), 0, ctypes.byref(a)) == 0
    return a.value
"""


def run(code):
    child = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True,
                           text=True, timeout=120)
    return child.returncode, child.stdout + child.stderr


def test_a_stale_release_never_frees_the_array_made_since():
    rc, out = run("""
        a = new_array()
        lib.tack_array_release(a)
        b = new_array()
        print("same address" if a == b else "another address", flush=True)
        lib.tack_array_release(a)
        one = ctypes.c_float(1)
        st = lib.tack_array_fill(ctypes.c_void_p(b), ctypes.byref(one))
        print("fill of the new array:", lib.tack_status_name(st).decode())
        lib.tack_array_release(b)
    """)
    assert "another address" in out, out
    assert "tack: tack_array_release: the array at 0x" in out and "was already released" in out, out
    # Without assertions the stale release returned, and b is untouched.
    assert rc != 0 or "fill of the new array: TACK_OK" in out, out


def test_an_extra_release_of_the_cpu_device_is_reported():
    rc, out = run("""
        lib.tack_device_release(cpu)
        print("balanced release: quiet", flush=True)
        lib.tack_device_release(cpu)
        a = new_array()  # the device itself lives on: it is the process's
        lib.tack_array_release(a)
        print("still works")
    """)
    assert "balanced release: quiet\n" in out, out
    assert "tack: tack_device_release: the device at 0x" in out, out
    assert rc != 0 or "still works" in out, out
    # The Python package's own reference to the device is intact.
    assert tack.zeros(2, tack.f32).device.name == "cpu"
