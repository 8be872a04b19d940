"""<tack/python.h>: a C program that embeds Python hands a tack_array to
Python and gets it back, without a copy (tests/python/bridge_program.c).

The program is built here against the headers of this source tree and a
libtack compiled from its sources, and imports the tack installed in this
interpreter, whose extension publishes the C-API capsule. Each mode runs in
a child process with a timeout.
"""
import os
import pathlib
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = pathlib.Path(__file__).with_name("bridge_program.c")
WARN = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"]


def compile_(command):
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        pytest.skip(f"no C compiler ({command[0]})")
    assert r.returncode == 0, f"{' '.join(command)}\n{r.stderr[-4000:]}"


def libtack(directory):
    """libtack.so from this tree's sources, as a C program links it."""
    sources = [str(p) for p in sorted((ROOT / "src").rglob("*.c")) if "python" not in p.parts]
    out = directory / "libtack.so"
    compile_([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-std=c11", "-D_GNU_SOURCE",
              f"-I{ROOT / 'include'}", f"-I{ROOT / 'src' / 'core'}", "-o", str(out), *sources,
              "-lpthread", "-ldl", "-lm"])
    return out


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython to embed")
    work = tmp_path_factory.mktemp("bridge")
    lib = libtack(work)
    exe = work / "bridge_program"
    libdir = sysconfig.get_config_var("LIBDIR")
    compile_([os.environ.get("CC", "cc"), *WARN, f"-I{ROOT / 'include'}", f"-I{sysconfig.get_paths()['include']}",
              "-o", str(exe), str(PROGRAM), str(lib), f"-Wl,-rpath,{work}", f"-L{libdir}", f"-Wl,-rpath,{libdir}",
              f"-lpython{sysconfig.get_config_var('LDVERSION')}", "-lm"])
    return exe


def run(program, mode):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([str(program), mode], capture_output=True, text=True, timeout=120, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert r.stdout.splitlines()[-1] == f"ok {mode}", out
    return out


def test_an_array_goes_from_c_to_python_and_back_without_a_copy(program):
    # In the program: tack.Array.ptr and NumPy's address are the C array's
    # data pointer, NumPy's write is read in C, tack_py_to_array returns the
    # same tack_array, a NumPy array arrives over its own memory, and every
    # count returns to where it was.
    run(program, "roundtrip")


def test_a_table_of_another_abi_version_is_refused_with_an_import_error(program):
    out = run(program, "mismatch")
    assert "tack_py_import: the tack module's C API is ABI version 2" in out, out
    assert "rebuild it with the headers of the installed tack" in out, out


def test_without_tack_the_import_fails_with_an_import_error(program):
    out = run(program, "missing")
    assert "ModuleNotFoundError" in out or "ImportError" in out, out


def test_the_bridge_before_tack_py_import_raises_and_says_what_to_call(program):
    out = run(program, "unimported")
    assert "RuntimeError: tack_py_from_array: call tack_py_import() first" in out, out


def test_the_extension_publishes_the_capsule():
    import tack

    capsule = tack._tack._C_API
    assert type(capsule).__name__ == "PyCapsule"
    assert "tack._tack._C_API" in repr(capsule)
