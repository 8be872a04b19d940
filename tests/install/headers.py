"""Tack's public headers against the upstream DLPack header, as C and C++.

    python tests/install/headers.py [--upstream PATH/TO/dlpack.h]

The upstream header defaults to the copy PyTorch ships
(torch/include/ATen/dlpack.h of the torch this Python imports); it is put
where DLPack users include it from, dlpack/dlpack.h. Checked, with each C
compiler (cc, clang) and C++ compiler (c++, clang++) found:

- a translation unit includes dlpack/dlpack.h and tack/tack.h in either
  order and compiles with -Wall -Wextra -Werror -pedantic, as C11 and C++17;
- Tack's DLPack declarations equal upstream's: dlpack_facts.c prints every
  name's value, every struct's size, alignment, offsets and field types,
  built once against each header, and the outputs must be the same; every
  name the upstream header declares is among those printed, and Tack's
  shared block declares no name upstream lacks;
- an upstream header of another major version, included first, stops the
  compile with Tack's message;
- every public header compiles on its own, as C11 and as C++17.

Prints one line per failure and "headers: N passed, M failed"; exits 1 on
any failure. Build products go to build/headers.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from results import check, summary

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
WARN = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
C_STD = ["-x", "c", "-std=c11"]
CXX_STD = ["-x", "c++", "-std=c++17"]

def compilers():
    """(label, command, language flags) for each C and C++ compiler found."""
    found = []
    for label, names, std in (("C", [os.environ.get("CC", "cc"), "clang"], C_STD),
                              ("C++", [os.environ.get("CXX", "c++"), "clang++"], CXX_STD)):
        seen = set()
        for name in names:
            path = shutil.which(name)
            if path and os.path.realpath(path) not in seen:
                seen.add(os.path.realpath(path))
                found.append((f"{label} ({name})", path, std))
    return found


def compile_(cmd, args):
    r = subprocess.run([cmd, *args], capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def upstream_header(explicit):
    if explicit:
        return pathlib.Path(explicit)
    # The copy PyTorch ships, found without importing torch (slow).
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return pathlib.Path("torch (not installed)/include/ATen/dlpack.h")
    return pathlib.Path(spec.submodule_search_locations[0]) / "include" / "ATen" / "dlpack.h"


def declared_names(text):
    """The names a DLPack header declares: macros, enumerators, typedefs, tags."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    names = set(re.findall(r"#\s*define\s+(\w+)", text))
    names |= set(re.findall(r"\b(kDL\w+)\s*=", text))
    names |= set(re.findall(r"}\s*(\w+)\s*;", text))
    names |= set(re.findall(r"typedef\s+\w+\s*\(\s*\*\s*(\w+)\s*\)", text))
    names |= set(re.findall(r"typedef\s+struct\s+(\w+)", text))
    # Macros of the header's own machinery, not of the ABI.
    return names - {"DLPACK_EXPORTS"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", help="an upstream dlpack.h (default: PyTorch's copy)")
    args = ap.parse_args()

    upstream = upstream_header(args.upstream)
    if not upstream.is_file():
        print(f"headers: no upstream DLPack header at {upstream}")
        return 1
    out = ROOT / "build" / "headers"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "dlpack").mkdir()
        (tmp / "dlpack" / "dlpack.h").symlink_to(upstream)
        # tack/python.h includes <Python.h>: this interpreter's.
        inc = ["-I", str(ROOT / "include"), "-I", str(tmp), "-I", sysconfig.get_paths()["include"]]
        tools = compilers()
        if not any(label.startswith("C++") for label, _, _ in tools):
            check("a C++ compiler is installed (c++ or clang++)", False)

        # Both orders, as C and as C++, with the Tack API used on DLPack types.
        for order in ("upstream_first", "tack_first"):
            src = HERE / f"{order}.c"
            for label, cmd, std in tools:
                ok, log = compile_(cmd, [*std, *WARN, *inc, "-fsyntax-only", str(src)])
                check(f"{order}.c compiles warning-free as {label}", ok, log)

        # The same facts from both headers.
        results = {}
        for which, define in (("tack", []), ("upstream", ["-DDLPACK_UPSTREAM"])):
            exe = tmp / f"facts_{which}"
            ok, log = compile_(tools[0][1] if tools else "cc",
                               [*C_STD, *WARN, *inc, *define, str(HERE / "dlpack_facts.c"), "-o", str(exe)])
            check(f"dlpack_facts.c builds against the {which} header", ok, log)
            if ok:
                results[which] = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        if len(results) == 2:
            t, u = results["tack"].splitlines(), results["upstream"].splitlines()
            diff = [f"  tack:     {a}\n  upstream: {b}" for a, b in zip(t, u) if a != b]
            if len(t) != len(u):
                diff.append(f"  {len(t)} facts against {len(u)}")
            check("Tack's DLPack names, values, sizes, offsets and types are upstream's", not diff,
                  "\n".join(diff))

        # Nothing upstream declares goes unchecked; nothing extra is declared.
        up_names = declared_names(upstream.read_text())
        facts = set(re.findall(r"\w+", (HERE / "dlpack_facts.c").read_text()))
        missing = sorted(up_names - facts)
        check("dlpack_facts.c checks every name the upstream header declares", not missing,
              "  unchecked: " + " ".join(missing))
        ours = (ROOT / "include" / "tack" / "dlpack.h").read_text()
        shared_block = ours.split("#endif /* DLPACK_DLPACK_H_ */")[0]
        extra = sorted(declared_names(shared_block) - up_names)
        check("Tack's shared DLPack block declares no name upstream lacks", not extra,
              "  extra: " + " ".join(extra))

        # An upstream header of another major version, included first, is
        # refused by name rather than failing somewhere in Tack's headers.
        old = tmp / "old" / "dlpack"
        old.mkdir(parents=True)
        (old / "dlpack.h").write_text("#ifndef DLPACK_DLPACK_H_\n#define DLPACK_DLPACK_H_\n"
                                      "#define DLPACK_MAJOR_VERSION 0\n#define DLPACK_MINOR_VERSION 8\n#endif\n")
        for label, cmd, std in tools:
            ok, log = compile_(cmd, [*std, *WARN, "-I", str(ROOT / "include"), "-I", str(old.parent),
                                     "-fsyntax-only", str(HERE / "upstream_first.c")])
            check(f"a DLPack 0.x header first is refused with Tack's message ({label})",
                  not ok and "not DLPack 1.x" in next((line for line in log.splitlines() if "error" in line), ""),
                  log[:600])

        # Each public header alone, as C and as C++.
        for header in sorted((ROOT / "include" / "tack").glob("*.h")):
            src = tmp / f"alone_{header.stem}.c"
            src.write_text(f"#include <tack/{header.name}>\n")
            for label, cmd, std in tools:
                ok, log = compile_(cmd, [*std, *WARN, *inc, "-fsyntax-only", str(src)])
                check(f"tack/{header.name} compiles on its own as {label}", ok, log)

    return summary("headers")


if __name__ == "__main__":
    sys.exit(main())
