"""The extension exports its module entry point and defines no libtack
function of its own.

The extension links the shared libtack (tack/lib/libtack.so.<abi>) rather
than a copy: were libtack's functions defined in the extension too, a
program that links libtack and imports tack would hold two copies, with two
device registries, worker pools and counters (tests/python/test_one_libtack.py).
"""

import pathlib
import re
import shutil
import subprocess

import pytest

import tack

HEADERS = pathlib.Path(__file__).resolve().parents[2] / "include" / "tack"


def public_functions():
    names = set()
    for header in HEADERS.glob("*.h"):
        names.update(re.findall(r"\b(tack_[a-z0-9_]+)\s*\(", header.read_text()))
    return sorted(names)


def dynamic_symbols(path, *options):
    if not shutil.which("nm"):
        pytest.skip("no nm")
    run = subprocess.run(["nm", "-D", *options, path], capture_output=True, text=True, check=True)
    return {line.split()[-1].split("@")[0] for line in run.stdout.splitlines() if line.strip()}


def test_the_headers_name_functions_to_look_for():
    names = public_functions()
    assert "tack_array_release" in names and "tack_array_from_dlpack_versioned" in names
    assert len(names) > 50


def test_only_the_module_entry_point_is_exported():
    defined = dynamic_symbols(tack._tack.__file__, "--defined-only")
    assert "PyInit__tack" in defined
    own = sorted(name for name in defined if name.startswith("tack_"))
    assert own == [], f"the extension defines libtack functions itself: {own[:10]}"
    used = dynamic_symbols(tack._tack.__file__, "--undefined-only")
    assert "tack_array_release" in used, "the extension does not call the shared libtack"
