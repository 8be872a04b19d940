"""`make demo` (python -m tack.demo): the tour runs, says only what it shows,
and skips a library that is missing in one line that says why."""

import os
import re
import subprocess
import sys

import pytest

SECTIONS = ["NumPy <-> Tack", "PyTorch", "Who keeps the memory alive", "A Tack kernel on NumPy memory", "VTK",
            "JAX", "Warp", "Another process writes a Tack array", "MPI <-> Tack", "The C API"]

# What the tour prints for a library it cannot import.
SKIPS = {
    "torch": "== PyTorch <-> Tack: skipped, PyTorch is not installed (pip install torch)",
    "vtkmodules": "== VTK <-> Tack: skipped, VTK is not installed (pip install vtk)",
    "jax": "== JAX <-> Tack: skipped, JAX is not installed (pip install jax)",
    "warp": "== Warp <-> Tack: skipped, Warp is not installed (pip install warp-lang)",
    "mpi4py": "== MPI <-> Tack: skipped, mpi4py is not installed (pip install mpi4py)",
}


def run_demo(hide=()):
    """Runs the tour in a fresh interpreter, with the modules in `hide`
    made unimportable; returns its output. Fails on any stderr output."""
    code = ("import runpy, sys\n"
            f"for name in {list(hide)!r}:\n"
            "    sys.modules[name] = None\n"
            "runpy.run_module('tack.demo', run_name='__main__')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == "", r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def tour():
    return run_demo()


def test_every_section_runs_or_says_why_not(tour):
    headings = [line for line in tour.splitlines() if line.startswith("== ")]
    assert len(headings) == len(SECTIONS), headings
    for heading, name in zip(headings, SECTIONS):
        assert name in heading, (heading, name)
        if "skipped" in heading:
            # Only for what this machine lacks, and then with the reason.
            assert re.search(r": skipped, .+", heading), heading


# The sections that cross a library line in this process, each showing the
# addresses on both sides at least once.
CROSSING = ["NumPy <-> Tack", "PyTorch", "A Tack kernel on NumPy memory", "VTK", "JAX", "Warp"]


def test_every_crossing_shares_memory(tour):
    for part in tour.split("\n== ")[1:]:
        heading = part.splitlines()[0]
        if "skipped" not in heading and any(name in heading for name in CROSSING):
            assert "on both sides: nothing copied" in part, part
    crossings = [line for line in tour.splitlines() if "on both sides" in line]
    assert len(crossings) >= 3, tour
    for line in crossings:
        assert line.rstrip().endswith("nothing copied"), line
        address = re.search(r"(0x[0-9a-f]+) on both sides", line)
        assert address and int(address.group(1), 16) != 0, line
    assert "copy was made" not in tour


def test_no_timings(tour):
    # Timings belong to bench/, which measures peers in the same run.
    assert not re.search(r"\d\s*(us|µs|ns|ms|s)\b(?!\w)", tour.replace("1 << 20", "")), tour
    assert "per call" not in tour and "cost" not in tour.lower()


def test_messages_are_whole(tour):
    # The kernel's refusal is printed in full, wrapped, not cut mid-word.
    joined = " ".join(line.strip() for line in tour.splitlines())
    assert ("ValueError: Kernel.__call__ (tack_kernel_call_hooked): parameter 'v' of kernel 'scale_add' is float *, which the kernel may store through, "
            "but the array bound to it is read-only; pass a writable array, or declare the parameter const "
            "float * if the kernel only reads it") in joined
    assert "..." not in tour.replace("tack.Array(", "")


def test_values_printed_are_the_values(tour):
    assert "a.fill(7); NumPy reads" in tour and "[7.0, 7.0, 7.0, 7.0, 7.0, 7.0]" in tour
    assert "tack.Array([[42.,  7.,  7.]," in tour
    assert "scale_add(10.0, 1.0, a); NumPy reads  [1.0, 11.0, 21.0, 31.0, 41.0, 51.0]" in tour
    # The 2-D kernel's atomic counts, checked against NumPy's by the tour.
    assert "2-D kernel" in tour and "tack_index i, tack_index j" in tour and "as np.add.at counts" in tour
    if "== Warp" in tour and "skipped" not in tour.split("== Warp")[1].splitlines()[0]:
        # A Warp kernel wrote the Tack array.
        assert "wp.launch(ramp, inputs=[c, 0.5]); Tack reads" in tour and "[0.0, 0.5, 1.0, 1.5, 2.0]" in tour
    if "Another process" in tour:
        assert "this process reads                    7 to 7 in all 1048576 elements, in place" in tour


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_c_section(cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", "import tack.demo; tack.demo.c_api()"], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == "", r.stderr
    return r.stdout


def test_the_c_example_is_built_and_run_in_the_source_tree():
    import shutil

    if shutil.which("cc") is None or shutil.which("make") is None:
        pytest.skip("needs cc and make to build libtack and the example")
    out = run_c_section(ROOT)
    lines = out.strip().splitlines()
    assert lines[0] == "== The C API (examples/c/exchange.c)", out
    joined = " ".join(out.split())
    assert "built with cc -std=c11 examples/c/exchange.c" in joined and "-ltack" in joined, out
    # What the program printed, in its order, ending with its own verdict.
    for said in ("./exchange prints Tack 0.1.0, DLPack 1.3", "saxpy over 1000 elements on cpu",
                 "deleter called once", "re-imported the export: the same memory as y"):
        assert said in joined, out
    assert lines[-1].split() == ["ok"], out


def test_outside_the_source_tree_the_c_section_says_why(tmp_path):
    out = run_c_section(tmp_path)
    assert out.strip() == ("== The C API (examples/c/exchange.c): skipped, examples/c/exchange.c is in Tack's "
                           "source tree, not in the package: run make demo there"), out


def test_missing_libraries_are_skipped_in_one_line_each():
    out = run_demo(hide=list(SKIPS))
    for line in SKIPS.values():
        assert line in out.splitlines(), (line, out)
    # The tour still does its main job without them.
    assert "nothing copied" in out and "Another process writes a Tack array" in out
