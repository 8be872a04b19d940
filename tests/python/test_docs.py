"""Every code example in the documentation and the README runs.

Each ``.. code-block:: python`` of docs/ and each fenced ```python block of
README.md runs alone, in a child process with a time limit, so an example
that lost an import, calls an API that changed or raises fails here, named
by its file and line. Each C block is a whole program: it is compiled
against the libtack of the installed package (python -m tack --cflags
--libs) and run. Blocks in other languages (console, text, cmake) are not
run. The tutorials under examples/tutorials run as they are, as the docs
build runs them (make docs)."""
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TIMEOUT = 120

# Child interpreters and compilers, checking the pages rather than the
# extension's memory: not repeated against the sanitized build.
pytestmark = pytest.mark.not_asan(reason="runs the pages' examples in child processes; the other tests cover "
                                         "the extension's memory")


def missing_module(code):
    """The first module an example imports that this interpreter lacks (the
    suite also runs on other CPythons with NumPy alone)."""
    for m in re.finditer(r"^\s*(?:import|from)\s+([A-Za-z_][\w.]*)", code, re.M):
        top = m.group(1).split(".")[0]
        if importlib.util.find_spec(top) is None:
            return top
    return None


def rst_blocks(path):
    """(language, first line, code) of each code-block in a reST file."""
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)\.\. code-block::\s*(\w+)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, language, start = len(m.group(1)), m.group(2), i + 1
        i += 1
        while i < len(lines) and re.match(r"^\s+:\w[\w-]*:", lines[i]):  # options
            i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        width = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
        yield language, start, "\n".join(b[width:] for b in body) + "\n"


def markdown_blocks(path):
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        language, start, i = m.group(1), i + 1, i + 1
        body = []
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        yield language, start, "\n".join(body) + "\n"


def pages():
    found = [p for p in sorted(DOCS.rglob("*.rst")) if "tutorials" not in p.relative_to(DOCS).parts]
    return found + [ROOT / "README.md"]


def blocks(language):
    out = []
    for page in pages():
        reader = markdown_blocks if page.suffix == ".md" else rst_blocks
        for lang, line, code in reader(page):
            if lang == language:
                out.append(pytest.param(code, id=f"{page.relative_to(ROOT)}:{line}"))
    return out


PYTHON_BLOCKS = blocks("python")
C_BLOCKS = blocks("c")


def test_the_pages_have_examples():
    """The readers find the blocks (a reader that finds none would pass
    every page)."""
    assert len(PYTHON_BLOCKS) >= 10 and len(C_BLOCKS) >= 2
    assert any(p.id.startswith("README.md:") for p in PYTHON_BLOCKS)
    assert any(p.id.startswith("README.md:") for p in C_BLOCKS)


def child_env():
    return dict(os.environ, MPLBACKEND="Agg")


@pytest.mark.parametrize("code", PYTHON_BLOCKS)
def test_python_example_runs(code, tmp_path):
    lacking = missing_module(code)
    if lacking:
        pytest.skip(f"the example imports {lacking}, which this Python does not have")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT, env=child_env())
    assert r.returncode == 0, f"the example failed:\n{code}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"


def cflags():
    r = subprocess.run([sys.executable, "-m", "tack", "--cflags", "--libs"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize("code", C_BLOCKS)
def test_c_example_compiles_and_runs(code, tmp_path):
    assert "int main" in code, "a C example in the docs is a whole program, so that it can be checked"
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler on PATH")
    (tmp_path / "example.c").write_text(code)
    build = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "example.c", "-o", "example", *cflags()],
                           cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert build.returncode == 0, f"the example does not compile:\n{code}\n{build.stderr}"
    run = subprocess.run([str(tmp_path / "example")], cwd=tmp_path, capture_output=True, text=True,
                         timeout=TIMEOUT, env=child_env())
    assert run.returncode == 0, f"the example failed:\n{code}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"


def test_the_heat_equation_tutorial_runs(tmp_path):
    pytest.importorskip("matplotlib")
    script = ROOT / "examples" / "tutorials" / "tutorial_heat_equation.py"
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT, env=child_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "total heat" in r.stdout
