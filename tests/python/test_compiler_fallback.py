"""CPU kernels without a system C compiler: zig's, from the ziglang package
(pip install tack-arrays[cc]), run by the interpreter Tack runs in.

Each case is a child interpreter whose PATH holds no compiler and whose
TACK_CC is unset, with a kernel cache of its own.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import tack

KERNEL = textwrap.dedent(
    """
    import sys, tack
    x, y = tack.zeros(1000, tack.f32), tack.zeros(1000, tack.f32)
    x.fill(2.0)
    y.fill(1.0)
    try:
        k = tack.Kernel("void fma3(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }")
        k(3.0, x, y)
    except RuntimeError as exc:
        print("RuntimeError:", exc)
        sys.exit(3)
    values = set(memoryview(y).cast("B").cast("f"))
    print("values", sorted(values))
    sys.exit(0 if values == {7.0} else 4)
    """
)

needs_zig = pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                               reason="the ziglang package is not installed (pip install tack-arrays[cc])")


def no_compiler_env(tmp_path, cache, **extra):
    """This environment with PATH naming one empty directory, TACK_CC unset
    and the kernel cache `cache`."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TACK_CC", "TACK_CFLAGS")}
    env.update(PATH=str(empty), TACK_CACHE_DIR=str(cache), **extra)
    return env


def run(python, env, code=KERNEL, timeout=300):
    return subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def built(cache):
    """The shared objects in the kernel cache, and whether zig made each
    (its linker, LLD, signs the .comment section; GNU ld does not)."""
    return {p.name: b"Linker: LLD" in p.read_bytes() for p in pathlib.Path(cache).glob("cpu-*.so")}


@needs_zig
def test_without_a_system_compiler_zig_builds_the_kernel(tmp_path):
    cache = tmp_path / "cache"
    child = run(sys.executable, no_compiler_env(tmp_path, cache))
    assert child.returncode == 0, child.stdout + child.stderr
    assert "values [7.0]" in child.stdout
    objects = built(cache)
    assert len(objects) == 1 and all(objects.values()), objects


@needs_zig
def test_a_ziglang_in_the_working_directory_is_not_run(tmp_path):
    # python -m would find it first; a directory someone else filled (a
    # download, a shared checkout) must not choose the compiler.
    planted = tmp_path / "work" / "ziglang"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-code-ran"
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    cache = tmp_path / "cache"
    child = subprocess.run([sys.executable, "-c", KERNEL], cwd=planted.parent, env=no_compiler_env(tmp_path, cache),
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stdout + child.stderr
    assert not marker.exists(), "the working directory's ziglang ran"
    objects = built(cache)
    assert len(objects) == 1 and all(objects.values()), objects


@needs_zig
def test_the_cache_tells_the_compilers_apart(tmp_path):
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("TACK_CC", "TACK_CFLAGS")}
    env["TACK_CACHE_DIR"] = str(cache)
    first = run(sys.executable, env)
    assert first.returncode == 0, first.stdout + first.stderr
    by_system = built(cache)
    assert len(by_system) == 1 and not any(by_system.values()), by_system
    # The same kernel, now with zig alone: compiled again, not the system
    # compiler's object reused.
    second = run(sys.executable, no_compiler_env(tmp_path, cache))
    assert second.returncode == 0, second.stdout + second.stderr
    both = built(cache)
    assert len(both) == 2, both
    assert sorted(both.values()) == [False, True], both


def interpreter_without_zig(tmp_path):
    """A new venv's interpreter that imports Tack (and nothing else of this
    one's packages): the ziglang package is not there for it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    shown = tmp_path / "packages"
    shown.mkdir()
    (shown / "tack").symlink_to(os.path.dirname(tack.__file__))
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('ziglang'))"],
                           env={"PYTHONPATH": str(shown)}, capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr
    return str(python), str(shown)


def test_without_any_compiler_the_error_names_both_remedies(tmp_path):
    python, shown = interpreter_without_zig(tmp_path)
    cache = tmp_path / "cache"
    child = run(python, no_compiler_env(tmp_path, cache, PYTHONPATH=shown))
    assert child.returncode == 3, child.stdout + child.stderr
    message = child.stdout
    assert "no C compiler" in message, message
    assert "gcc" in message and "TACK_CC" in message, message
    assert "pip install tack-arrays[cc]" in message, message
    assert python in message, message  # the interpreter that has no ziglang
    assert not built(cache)


@needs_zig
def test_tack_cc_is_obeyed_even_where_zig_would_do(tmp_path):
    cache = tmp_path / "cache"
    missing = str(tmp_path / "no-such-cc")
    child = run(sys.executable, no_compiler_env(tmp_path, cache, TACK_CC=missing))
    assert child.returncode == 3, child.stdout + child.stderr
    assert f"'{missing}' (from TACK_CC) cannot be run" in child.stdout, child.stdout
    assert not built(cache)


def c_compiler_line(python, env):
    """The cpu block's C compiler entry of `python -m tack`, on one line."""
    child = subprocess.run([python, "-m", "tack"], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stdout + child.stderr
    cpu = next(block for block in child.stdout.split("\n\n") if block.startswith("cpu "))
    text = " ".join(cpu.split())
    assert "C compiler " in text, cpu
    return text[text.index("C compiler "):]


@needs_zig
def test_show_config_names_zig_where_it_serves(tmp_path):
    line = c_compiler_line(sys.executable, no_compiler_env(tmp_path, tmp_path / "cache"))
    version = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True,
                             timeout=120).stdout.strip()
    python = os.path.normpath(sys.executable)
    assert line.startswith(f"C compiler zig {version}, clang version "), line
    assert f"{python} -P -m ziglang cc" in line, line
    assert "no C compiler on PATH" in line, line


def test_show_config_without_any_compiler_names_both_remedies(tmp_path):
    python, shown = interpreter_without_zig(tmp_path)
    line = c_compiler_line(python, no_compiler_env(tmp_path, tmp_path / "cache", PYTHONPATH=shown))
    assert line.startswith("C compiler not found: no C compiler found"), line
    assert "apt-get install gcc" in line and "pip install tack-arrays[cc]" in line, line
