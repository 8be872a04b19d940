"""Tack without NumPy: the package imports and works on its own arrays, and
what needs NumPy (tack.array, to_numpy) says how to install it.

Each case runs in a child interpreter in which `import numpy` fails the way
it does where NumPy is not installed (or, for one case, installed broken).
"""

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, sys

    class Hide:
        # A finder that answers for numpy first: not there, or broken.
        broken = False

        def find_spec(self, name, path=None, target=None):
            if name == "numpy" or name.startswith("numpy."):
                if self.broken:
                    raise ImportError("numpy's C extension failed to load")
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    hide = Hide()
    hide.broken = sys.argv[1] == "broken"
    for name in [m for m in sys.modules if m == "numpy" or m.startswith("numpy.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, hide)

    import tack

    report = {}
    a = tack.zeros(4, tack.f32)
    a.fill(2)
    k = tack.Kernel("void dbl(tack_index i, float *y) { y[i] = 2 * y[i]; }")
    k(a)
    report["own_arrays"] = list(memoryview(a).cast("B").cast("f"))

    def attempt(name, fn):
        try:
            fn()
            report[name] = None
        except BaseException as e:
            report[name] = {"type": type(e).__name__, "message": str(e),
                            "cause": type(e.__cause__).__name__ if e.__cause__ else None,
                            "is_import_error": isinstance(e, ImportError)}

    attempt("array", lambda: tack.array([1.0, 2.0]))
    attempt("to_numpy", lambda: a.to_numpy())
    # NumPy installed afterwards: the next call finds it.
    sys.meta_path.remove(hide)
    attempt("array_after_install", lambda: tack.array([1.0, 2.0]))
    print(json.dumps(report))
    """
)


def run_child(mode):
    r = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_tack_works_on_its_own_arrays_without_numpy():
    report = run_child("missing")
    assert report["own_arrays"] == [4.0, 4.0, 4.0, 4.0]


@pytest.mark.parametrize("call", ["array", "to_numpy"])
def test_missing_numpy_says_how_to_install_it(call):
    err = run_child("missing")[call]
    assert err is not None, f"{call} succeeded without NumPy"
    assert err["type"] == "ModuleNotFoundError" and err["cause"] == "ModuleNotFoundError"
    assert "NumPy" in err["message"]
    assert "pip install numpy" in err["message"] and "pip install tack-arrays" in err["message"]
    assert "No module named 'numpy'" in err["message"]


def test_a_broken_numpy_is_reported_with_its_own_error():
    err = run_child("broken")["array"]
    assert err["type"] == "ImportError" and err["is_import_error"] and err["cause"] == "ImportError"
    assert "numpy's C extension failed to load" in err["message"]
    assert "pip install numpy" in err["message"]


def test_numpy_found_later_is_used():
    assert run_child("missing")["array_after_install"] is None
