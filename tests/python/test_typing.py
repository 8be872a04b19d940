"""Stubs and signatures: what type checkers and inspect see of Tack.

- tests/typing/readme_examples.py holds the README's examples; mypy --strict
  accepts it and it runs.
- mypy's stubtest finds the stub (python/tack/__init__.pyi) and the runtime
  in agreement: every name, every signature, positional-only parameters
  included.
- inspect.signature works for every public function and method, and says
  the truth about how each takes its arguments.
"""

import inspect
import os
import pathlib
import subprocess
import sys

import pytest

import tack

ROOT = pathlib.Path(__file__).resolve().parents[2]
TYPING = ROOT / "tests" / "typing"


def mypy_available():
    try:
        import mypy  # noqa: F401
    except ImportError:
        return False
    return True


needs_mypy = pytest.mark.skipif(not mypy_available(), reason="mypy is not installed (requirements-dev.txt has it)")


def run_in_typing(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, *args], cwd=TYPING, env=env, capture_output=True, text=True,
                          timeout=timeout)


@needs_mypy
def test_mypy_strict_accepts_the_readme_examples():
    pytest.importorskip("torch")
    r = run_in_typing("-m", "mypy", "--config-file", "mypy.ini", "readme_examples.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout


def test_the_readme_examples_run():
    pytest.importorskip("torch")
    r = run_in_typing("readme_examples.py", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("README examples: ok")


@needs_mypy
def test_stubtest_finds_the_stub_and_the_runtime_in_agreement():
    r = run_in_typing("-m", "mypy.stubtest", "tack", "--mypy-config-file", "stubtest.ini",
                      "--allowlist", "stubtest-allowlist.txt", "--ignore-unused-allowlist", "--concise")
    assert r.returncode == 0, r.stdout + r.stderr


# Types with no constructor: inspect.signature raises for them, as for a
# builtin type whose signature it cannot tell (test_repr_errors.py checks
# that), rather than showing object's "()"; their methods are listed.
NOT_CONSTRUCTIBLE = (tack.Array,)


def public_callables():
    for name in sorted(tack.__all__):
        obj = getattr(tack, name)
        if isinstance(obj, tack.DType):
            continue
        if obj not in NOT_CONSTRUCTIBLE:
            yield f"tack.{name}", obj
        if isinstance(obj, type) and obj is not tack.ExportedMemory:
            for attr, value in sorted(vars(obj).items()):
                public = not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__"))
                if public and callable(value) and attr not in ("__new__", "__init__", "__init_subclass__"):
                    yield f"tack.{name}.{attr}", getattr(obj, attr)


PUBLIC = list(public_callables())


@pytest.mark.parametrize("label, obj", PUBLIC, ids=[label for label, _ in PUBLIC])
def test_inspect_signature_works(label, obj):
    sig = inspect.signature(obj)
    for p in sig.parameters.values():
        assert p.name.isidentifier(), (label, sig)


def test_every_method_takes_self_first_and_by_position_only():
    for label, obj in PUBLIC:
        if label.count(".") != 2 or inspect.isclass(obj) or "__call__" in label:
            continue
        params = list(inspect.signature(obj).parameters.values())
        assert params and params[0].name == "self", (label, params)
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY, label


@pytest.mark.parametrize("func, args, keyword", [
    (tack.empty, (3,), "dtype"),
    (tack.zeros, (3,), "dtype"),
    (tack.array, ([1],), "dtype"),
])
def test_a_default_in_a_signature_is_the_functions_default(func, args, keyword):
    default = inspect.signature(func).parameters[keyword].default
    assert func(*args, **{keyword: default}).dtype == func(*args).dtype


@pytest.mark.parametrize("func, positional", [
    (tack.device, "name"),
    (tack.set_default_device, "name_or_device"),
    (tack.from_dlpack, "source"),
    (tack.asarray, "obj"),
])
def test_positional_only_parameters_are_refused_by_keyword(func, positional, restore_default_device):
    p = inspect.signature(func).parameters[positional]
    assert p.kind is inspect.Parameter.POSITIONAL_ONLY
    with pytest.raises((TypeError, ValueError)):
        func(**{positional: "cpu" if "device" in positional or positional == "name" else tack.zeros(1)})


def test_keyword_parameters_are_taken_by_keyword():
    for func, kwargs in [
        (tack.empty, dict(shape=2, dtype="int8", device=None, exportable=False)),
        (tack.zeros, dict(shape=2, dtype="int8", device=None, exportable=False)),
        (tack.array, dict(obj=[1, 2], dtype=None, device=None)),
        (tack.from_dlpack, dict(device=None, copy=False)),
        (tack.asarray, dict(device=None)),
    ]:
        names = set(inspect.signature(func).parameters)
        assert set(kwargs) <= names, (func, names)
        if func in (tack.from_dlpack, tack.asarray):
            func(tack.zeros(2), **kwargs)
        else:
            func(**kwargs)
