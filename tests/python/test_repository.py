"""Rules the source tree keeps, checked over the files git tracks: the
library (src/, include/) has no branch for Windows, which Tack does not
support (README), beyond the DLPack header's export macro, which is
upstream's."""

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
