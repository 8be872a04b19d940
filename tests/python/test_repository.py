"""Rules the source tree keeps, checked over the files git tracks: every
shell script is shellcheck-clean, and the library (src/, include/) has no
branch for Windows, which Tack does not support (README), beyond the DLPack
header's export macro, which is upstream's."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tracked():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (git ls-files)")
    r = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [ROOT / name for name in r.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def shell_scripts():
    """Tracked files ending in .sh, and those whose first line starts a shell."""
    scripts = []
    for path in tracked():
        with open(path, "rb") as f:
            first = f.readline(200)
        shell = first.startswith(b"#!") and any(s in first for s in (b"/sh", b"bash", b"dash", b" sh"))
        if path.suffix == ".sh" or shell:
            scripts.append(path)
    return scripts


def test_the_shell_scripts_are_found():
    names = {str(p.relative_to(ROOT)) for p in shell_scripts()}
    assert {".ci/run", "tests/gpu/run.sh", "tests/stress/run.sh", "tests/fuzz/run_corpus.sh"} <= names, names


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (Debian: shellcheck)")
def test_every_shell_script_is_shellcheck_clean():
    scripts = shell_scripts()
    r = subprocess.run(["shellcheck", *map(str, scripts)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_source_branches_for_windows():
    allowed = {ROOT / "include" / "tack" / "dlpack.h"}
    found = []
    for path in tracked():
        library = path.relative_to(ROOT).parts[0] in ("src", "include")
        if not library or path.suffix not in (".c", ".h") or path in allowed:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.lstrip().startswith("#") and "_WIN32" in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)
