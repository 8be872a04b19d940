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
# Public headers whose functions libtack does not define: DLPack's own
# declarations, and the C-to-Python bridge (reached through the extension).
NOT_LIBTACK = {"dlpack.h", "python.h"}


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


def api_declarations():
    """The functions the public headers mark TACK_API."""
    names = set()
    for header in HEADERS.glob("*.h"):
        if header.name in NOT_LIBTACK:
            continue
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        names.update(re.findall(r"^TACK_API\b[^;(]*?\b(tack_[a-z0-9_]+)\s*\(", text, flags=re.M))
    return names


def libtack_path():
    return str(next(pathlib.Path(tack.get_library_dir()).glob("libtack.so.*")))


def test_libtack_exports_exactly_the_api():
    """nm -D of libtack against the headers, both ways: nothing internal
    exported (tack_error_set, tack_sha256_*, the backend tables), nothing
    declared missing; each in the TACK_0.1 version node."""
    declared = api_declarations()
    assert {"tack_array_release", "tack_version", "tack_import_array"} <= declared
    if not shutil.which("nm"):
        pytest.skip("no nm")
    run = subprocess.run(["nm", "-D", "--defined-only", libtack_path()], capture_output=True, text=True, check=True)
    exported, versions = set(), set()
    for line in run.stdout.splitlines():
        name = line.split()[-1]
        if name == "TACK_0.1":
            continue
        base, _, version = name.partition("@@")
        exported.add(base)
        versions.add(version)
    assert sorted(exported - declared) == [], "exported, declared in no public header"
    assert sorted(declared - exported) == [], "declared TACK_API, not exported"
    assert versions == {"TACK_0.1"}, versions


def test_every_public_function_is_marked():
    """A declaration without TACK_API would be hidden: every function
    declared in a public header (not static inline) carries it."""
    unmarked = []
    for header in HEADERS.glob("*.h"):
        if header.name in NOT_LIBTACK:
            continue
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        for m in re.finditer(r"^(?!TACK_API|static|typedef|#)([A-Za-z][^;{}()]*?\b(tack_[a-z0-9_]+)\s*\()", text,
                             flags=re.M):
            unmarked.append(f"{header.name}: {m.group(2)}")
    assert unmarked == []


def test_version_at_run_time_matches_the_headers():
    import ctypes

    text = (HEADERS / "version.h").read_text()
    macro = {k: int(v) for k, v in re.findall(r"#define TACK_VERSION_(MAJOR|MINOR|PATCH) (\d+)", text)}
    string = re.search(r'#define TACK_VERSION_STRING "([^"]+)"', text).group(1)
    assert string == f"{macro['MAJOR']}.{macro['MINOR']}.{macro['PATCH']}" == tack.__version__
    lib = ctypes.CDLL(libtack_path())
    lib.tack_version.restype = ctypes.c_char_p
    assert lib.tack_version().decode() == string
    assert lib.tack_version_number() == macro["MAJOR"] * 10000 + macro["MINOR"] * 100 + macro["PATCH"]
    meson = (HEADERS.parents[1] / "meson.build").read_text()
    assert re.search(r"version\s*:\s*'([^']+)'", meson).group(1) == string
