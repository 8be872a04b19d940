"""Simulated GPU drivers (tests/sim/) for the Python tests of one backend.

Tack picks a backend's driver library once per process, when the backend is
first opened, and other test files open backends with no driver selected. So
a test file for a GPU backend keeps its cases for an interpreter that starts
with the simulator selected: when the variable (TACK_LEVEL_ZERO_LIBRARY,
TACK_HIP_LIBRARY) is unset, one test, made by `rerun_test`, runs the file
again in a fresh interpreter with it set, and the cases run there.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sanitized(library):
    """True when `library` was built with a sanitizer: loading it into an
    interpreter that was not aborts the process."""
    with open(library, "rb") as f:
        data = f.read()
    return b"libasan" in data or b"__asan_init" in data


def build(name, scratch):
    """Path of the simulated driver tests/sim/<name>_sim.c, and why not when
    there is none: the one `make ctest` built unless it carries a sanitizer,
    else the source compiled into `scratch` with the system C compiler."""
    built = ROOT / f"build/ctest/tests/sim/libtack_{name}_sim.so"
    source = ROOT / f"tests/sim/{name}_sim.c"
    # The simulator's source is its .c file and the headers the simulators
    # share: a change to either makes the built library stale.
    inputs = [source, *source.parent.glob("*.h")] if source.is_file() else []
    if built.is_file() and not sanitized(built) and all(built.stat().st_mtime >= p.stat().st_mtime for p in inputs):
        return str(built), None
    if not source.is_file():
        return None, f"the simulated driver's source ({source}) is missing"
    library = pathlib.Path(scratch) / f"libtack_{name}_sim.so"
    command = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-std=c11", f"-I{ROOT / 'include'}",
               "-o", str(library), str(source), "-lpthread"]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        return None, f"no C compiler ({command[0]}) to build the simulated driver {source.name}"
    except subprocess.CalledProcessError as exc:
        return None, f"the simulated driver {source.name} does not compile: {exc.stderr[-2000:]}"
    return str(library), None


def rerun_test(test_file, name, variable):
    """A test that runs `test_file` in a fresh interpreter with `variable`
    naming the simulated driver `name`, and passes when every case passed
    there. Skipped when `variable` is already set: then the cases run in
    this process."""

    @pytest.mark.skipif(bool(os.environ.get(variable)), reason=f"the cases run in this process, on {variable}")
    def test_cases_on_the_simulated_driver(tmp_path_factory):
        library, why_not = build(name, tmp_path_factory.mktemp(f"{name}_sim"))
        if library is None:
            pytest.skip(why_not)
        here = pathlib.Path(test_file)
        env = dict(os.environ, **{variable: library})
        command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", here.name,
                   "-k", "not test_cases_on_the_simulated_driver"]
        child = subprocess.run(command, cwd=here.parent, env=env, capture_output=True, text=True, timeout=600)
        report = child.stdout[-8000:] + child.stderr[-3000:]
        assert child.returncode == 0, f"the cases failed on {library}:\n{report}"
        summary = child.stdout.strip().splitlines()[-1]
        assert " passed" in summary, f"no case ran on {library}:\n{report}"
        assert "skipped" not in summary, f"cases were skipped on {library}:\n{report}"

    return test_cases_on_the_simulated_driver


def require(variable, hook):
    """Skips a case unless `variable` names a simulated driver (one that
    exports `hook`); returns its path."""
    library = os.environ.get(variable)
    if not library:
        pytest.skip(f"runs in a fresh interpreter with {variable} set (test_cases_on_the_simulated_driver)")
    import ctypes

    if not hasattr(ctypes.CDLL(library), hook):
        pytest.skip(f"{variable}={library} is not the simulated driver these cases need")
    return library
