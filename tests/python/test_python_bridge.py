"""<tack/python.h>: a C program that embeds Python hands a tack_array to
Python and gets it back, without a copy (tests/python/bridge_program.c).

The program is built as a C user builds one, with the flags of the tack
installed in this interpreter (python -m tack --cflags --libs): it links
the package's libtack, the one the extension loads, so C and Python share
one Tack (one mapping of libtack, one set of counters, the same
tack_array). Each mode runs in a child process with a timeout.
"""
import os
import pathlib
import re
import subprocess
import sys
import sysconfig

import pytest

import tack

PROGRAM = pathlib.Path(__file__).with_name("bridge_program.c")
WARN = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"]


def compile_(command):
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        pytest.skip(f"no C compiler ({command[0]})")
    assert r.returncode == 0, f"{' '.join(command)}\n{r.stderr[-4000:]}"


def tack_flags(option):
    """What `python -m tack <option>` (--cflags, --libs) tells a C build."""
    r = subprocess.run([sys.executable, "-m", "tack", option], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython to embed")
    work = tmp_path_factory.mktemp("bridge")
    exe = work / "bridge_program"
    libdir = sysconfig.get_config_var("LIBDIR")
    # The libraries after the program, which needs them (--as-needed).
    compile_([os.environ.get("CC", "cc"), *WARN, "-D_GNU_SOURCE", *tack_flags("--cflags"),
              f"-I{sysconfig.get_paths()['include']}", "-o", str(exe), str(PROGRAM), *tack_flags("--libs"),
              f"-L{libdir}", f"-Wl,-rpath,{libdir}", f"-lpython{sysconfig.get_config_var('LDVERSION')}", "-lpthread",
              "-lm"])
    return exe


def package_libtack():
    names = [n for n in os.listdir(tack.get_library_dir()) if n.startswith("libtack.so.")]
    assert len(names) == 1, names
    return os.path.realpath(os.path.join(tack.get_library_dir(), names[0]))


def run(program, mode, timeout=120, **extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **extra)
    r = subprocess.run([str(program), mode], capture_output=True, text=True, timeout=timeout, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert r.stdout.splitlines()[-1] == f"ok {mode}", out
    return out


def test_an_array_goes_from_c_to_python_and_back_without_a_copy(program, tmp_path):
    # In the program: Python counts the arrays C made (one set of counters),
    # tack.Array.ptr and NumPy's address are the C array's
    # data pointer, NumPy's write is read in C, tack_py_to_array returns the
    # same tack_array, a NumPy array arrives over its own memory, and every
    # count returns to where it was.
    out = run(program, "roundtrip", TACK_NUM_THREADS="4", TACK_SERIAL_BELOW="0", TACK_CACHE_DIR=str(tmp_path))
    # One Tack: the extension bound to the libtack the program links, and
    # Python's kernel ran on the pool C's started (the main thread and 3
    # workers; a second pool would add 3 more).
    mappings = re.findall(r"libtack mapping: (.*)", out)
    assert [os.path.realpath(m.strip()) for m in mappings] == [package_libtack()], out
    assert "threads: 4 after C's kernel, 4 after Python's" in out, out


@pytest.mark.parametrize("python_side", ["atomics", "foreign"], ids=["tack_kernel", "library_given_the_address"])
def test_atomics_are_exact_between_a_c_thread_and_python_on_one_array(program, tmp_path, python_side):
    # A C thread launches a tack_atomic_add histogram on an array allocated
    # in C and handed to Python by the bridge while Python updates it too,
    # at once: with the same kernel, or through a library (ctypes) that
    # Python gives the array's address and that adds by hardware atomics.
    # 10 runs of 2 x 50 passes over 400,000 values; every C launch runs on
    # one thread (TACK_SERIAL_BELOW), where private memory may take plain
    # atomics, which a writer outside Tack would interleave with.
    out = run(program, python_side, timeout=600, TACK_SERIAL_BELOW=str(1 << 40), TACK_CACHE_DIR=str(tmp_path))
    runs = re.findall(r"run \d+: (-?\d+) of 40000000 updates lost", out)
    assert runs == ["0"] * 10, out
    # None of them used plain read-modify-writes on the handed-over memory.
    assert "lost in all: 0; launches with plain atomics: 0" in out, out


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


def test_after_py_finalize_each_wrapper_fails_with_tacks_message(program):
    # Before, tack_py_from_array ran the extension without an interpreter
    # and returned an object. Now each wrapper returns NULL (or -1) and
    # tack_last_error() names it; a new interpreter does not take the
    # finalized one's table.
    out = run(program, "finalized")
    for call in ("tack_py_from_array", "tack_py_to_array", "tack_py_import"):
        assert f"{call}: {call}: no Python interpreter is running" in out, out
    assert "RuntimeError: tack_py_from_array: call tack_py_import() first" in out, out


def test_the_extension_publishes_the_capsule():
    import tack

    capsule = tack._tack._C_API
    assert type(capsule).__name__ == "PyCapsule"
    assert "tack._tack._C_API" in repr(capsule)
