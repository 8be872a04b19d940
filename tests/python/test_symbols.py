"""The extension exports its module entry point and nothing else.

libtack is linked into the extension statically. Were its functions
exported, a libtack.so (or a second copy of Tack) loaded earlier into the
global symbol scope would take over the extension's calls between them, and
one array would be handled by two copies' devices, registries and counters.
"""

import ctypes
import pathlib
import re

import tack

HEADERS = pathlib.Path(__file__).resolve().parents[2] / "include" / "tack"


def public_functions():
    names = set()
    for header in HEADERS.glob("*.h"):
        names.update(re.findall(r"\b(tack_[a-z0-9_]+)\s*\(", header.read_text()))
    return sorted(names)


def test_the_headers_name_functions_to_look_for():
    names = public_functions()
    assert "tack_array_release" in names and "tack_array_from_dlpack_versioned" in names
    assert len(names) > 50


def test_only_the_module_entry_point_is_exported():
    lib = ctypes.CDLL(tack._tack.__file__)
    assert hasattr(lib, "PyInit__tack")
    exported = [name for name in public_functions() if hasattr(lib, name)]
    assert exported == [], f"the extension exports libtack functions: {exported[:10]}"
