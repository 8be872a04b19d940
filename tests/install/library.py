"""The installed C library, used the way C and C++ users use it.

    python tests/install/library.py --prefix P --destdir D --work W

P is a prefix that `make install-c PREFIX=P` filled, D a DESTDIR that
`make install-c PREFIX=P DESTDIR=D` filled; W is scratch space. Checked:

- the files: every public header, libtack.so -> libtack.so.<abi> ->
  libtack.so.<version> with that SONAME, libtack.a with default visibility,
  tack.pc, the CMake package; the DESTDIR tree holds the same files;
- meson.build does not make warnings errors by default (a user's build),
  while this build did (CI);
- examples/c/exchange.c built with pkg-config (shared, and static with
  Libs.private) and with CMake find_package(Tack) (Tack::tack and
  Tack::tack_static), each run to "ok"; the static ones need no libtack.so;
- the CMake version file accepts the versions it should and no others;
- every public function links from C++ (the headers' extern "C");
- libtack.so exports exactly the functions the headers declare TACK_API,
  each in the TACK_0.1 version node.

Prints one line per failure and "install: N passed, M failed"; exits 1 on
any failure.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

from results import check, summary

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "c"
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"]

def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return r.returncode, (r.stdout + r.stderr).strip()


def project_version():
    text = (ROOT / "meson.build").read_text()
    return re.search(r"version\s*:\s*'([^']+)'", text).group(1)


def soversion(version):
    major, minor = version.split(".")[:2]
    return f"0.{minor}" if major == "0" else major


def needed(exe):
    rc, out = run(["readelf", "-d", str(exe)])
    return re.findall(r"\(NEEDED\).*\[(.+?)\]", out)


def run_example(exe, env, label):
    rc, out = run([str(exe)], env=env, timeout=120)
    return check(f"{label}: runs to ok", rc == 0 and out.splitlines()[-1:] == ["ok"], out)


def check_files(prefix, destdir, version):
    so = soversion(version)
    inc, lib = prefix / "include" / "tack", prefix / "lib"
    for header in sorted((ROOT / "include" / "tack").glob("*.h")):
        check(f"include/tack/{header.name} installed", (inc / header.name).read_bytes() == header.read_bytes())
    check("lib/libtack.so -> libtack.so.%s" % so, os.readlink(lib / "libtack.so") == f"libtack.so.{so}")
    check(f"lib/libtack.so.{so} -> libtack.so.{version}",
          os.readlink(lib / f"libtack.so.{so}") == f"libtack.so.{version}")
    rc, out = run(["readelf", "-d", str(lib / f"libtack.so.{version}")])
    check(f"SONAME libtack.so.{so}", f"[libtack.so.{so}]" in out and "SONAME" in out, out)
    rc, out = run(["readelf", "-sW", str(lib / "libtack.a")])
    exported = [line for line in out.splitlines() if line.endswith(" tack_array_empty")]
    check("libtack.a exports the API with default visibility",
          exported and all(" GLOBAL DEFAULT " in line for line in exported), "\n".join(exported))
    for f in ("pkgconfig/tack.pc", "cmake/Tack/TackConfig.cmake", "cmake/Tack/TackConfigVersion.cmake"):
        check(f"lib/{f} installed", (lib / f).is_file())

    def tree(root):
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())

    staged = pathlib.Path(str(destdir) + str(prefix))
    check("DESTDIR: the same files, under DESTDIR", tree(staged) == tree(prefix) and tree(prefix),
          f"  {tree(staged)}\n  {tree(prefix)}")
    check("DESTDIR: nothing outside DESTDIR + prefix",
          [p for p in destdir.rglob("*") if not p.is_dir() and staged not in p.parents] == [])


def check_exports(prefix, version):
    """nm -D of the installed libtack.so against the headers' TACK_API
    declarations, both ways."""
    declared = set()
    for header in (prefix / "include" / "tack").glob("*.h"):
        if header.name == "python.h":
            continue  # the C-to-Python bridge, reached through the extension
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        declared.update(re.findall(r"^TACK_API\b[^;(]*?\b(tack_[a-z0-9_]+)\s*\(", text, flags=re.M))
    rc, out = run(["nm", "-D", "--defined-only", str(prefix / "lib" / f"libtack.so.{version}")])
    exported = {line.split()[-1] for line in out.splitlines() if line.strip()} - {"TACK_0.1"}
    names = {e.partition("@")[0] for e in exported}
    check("libtack.so exports no function the headers do not declare", rc == 0 and not names - declared,
          sorted(names - declared)[:20])
    check("libtack.so exports every function the headers declare", rc == 0 and declared and not declared - names,
          sorted(declared - names)[:20])
    check("libtack.so's symbols are in the TACK_0.1 version node",
          rc == 0 and all(e.endswith("@@TACK_0.1") for e in exported), sorted(exported)[:20])


def check_werror(build):
    # What a user's build gets: the project's default options (meson
    # introspect of a source tree does not apply them, so they are read
    # here) and whatever pyproject.toml passes to meson-python.
    project = re.search(r"project\((.*?)\)\s*\n", (ROOT / "meson.build").read_text(), flags=re.S).group(1)
    defaults = re.search(r"default_options\s*:\s*\[(.*?)\]", project, flags=re.S)
    defaults = re.findall(r"'([^']*)'", defaults.group(1)) if defaults else []
    pyproject = (ROOT / "pyproject.toml").read_text()
    check("a user's build does not make warnings errors",
          defaults and not any(o.replace(" ", "").startswith("werror=true") for o in defaults)
          and "werror" not in pyproject, f"  default_options: {defaults}")

    meson = ROOT / ".venv" / "bin" / "meson"
    rc, out = run([str(meson) if meson.exists() else "meson", "introspect", "--buildoptions", str(build)])
    options = {o["name"]: o["value"] for o in json.loads(out)} if rc == 0 else {}
    check("the CI build of the C library made warnings errors", options.get("werror") is True, out[:500])


def check_pkg_config(prefix, work, env, version):
    pc = ["pkg-config"]
    rc, out = run([*pc, "--modversion", "tack"], env=env)
    if not check("pkg-config finds tack", rc == 0 and out == version, out):
        return
    _, cflags = run([*pc, "--cflags", "tack"], env=env)
    _, libs = run([*pc, "--libs", "tack"], env=env)
    _, static = run([*pc, "--static", "--libs", "tack"], env=env)
    _, libdir = run([*pc, "--variable=libdir", "tack"], env=env)
    check("pkg-config --static adds Libs.private", all(f in static.split() for f in ("-pthread", "-ldl", "-lm")),
          static)

    exe = work / "exchange_pkgconfig"
    rc, out = run(["cc", *CFLAGS, str(EXAMPLE / "exchange.c"), "-o", str(exe), *cflags.split(), *libs.split(),
                   f"-Wl,-rpath,{libdir}"])
    if check("pkg-config: builds against libtack.so", rc == 0, out):
        check("pkg-config: links libtack.so", f"libtack.so.{soversion(version)}" in needed(exe), needed(exe))
        run_example(exe, env, "pkg-config, shared")

    # A static link: libtack.a, then what Libs.private lists.
    exe = work / "exchange_pkgconfig_static"
    private = [f for f in static.split() if f != "-ltack" and not f.startswith("-L")]
    rc, out = run(["cc", *CFLAGS, str(EXAMPLE / "exchange.c"), "-o", str(exe), *cflags.split(),
                   str(pathlib.Path(libdir) / "libtack.a"), *private])
    if check("pkg-config: builds against libtack.a", rc == 0, out):
        check("pkg-config, static: needs no libtack.so", not any("libtack" in n for n in needed(exe)), needed(exe))
        run_example(exe, env, "pkg-config, static")


def check_cmake(prefix, work, env, version):
    build = work / "cmake"
    rc, out = run(["cmake", "-S", str(EXAMPLE), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}",
                   "-DCMAKE_C_FLAGS=-Werror -pedantic"], env=env)
    if not check("CMake: find_package(Tack 0.1) configures", rc == 0, out):
        return
    rc, out = run(["cmake", "--build", str(build)], env=env)
    if not check("CMake: builds against Tack::tack and Tack::tack_static", rc == 0, out):
        return
    shared, static = build / "exchange", build / "exchange_static"
    check("CMake: Tack::tack links libtack.so", f"libtack.so.{soversion(version)}" in needed(shared),
          needed(shared))
    check("CMake: Tack::tack_static needs no libtack.so", not any("libtack" in n for n in needed(static)),
          needed(static))
    run_example(shared, env, "CMake, Tack::tack")
    run_example(static, env, "CMake, Tack::tack_static")

    # What the version file answers, with CMake's own variables set as
    # find_package sets them.
    version_file = prefix / "lib" / "cmake" / "Tack" / "TackConfigVersion.cmake"
    major, minor = version.split(".")[:2]
    cases = {
        f"{major}.{minor}": True,
        version: True,
        f"{major}.{int(minor) + 1}": False,
        f"{int(major) + 1}.0": False,
        f"{major}.{max(int(minor) - 1, 0)}": int(major) > 0 or int(minor) == 0,
        f"{major}.{minor}...<{int(major) + 1}.0": True,
        f"{major}.{int(minor) + 1}...{int(major) + 1}.0": False,
        "": True,
    }
    for wanted, expect in cases.items():
        script = work / "version.cmake"
        lines = ["set(CMAKE_SIZEOF_VOID_P 8)"]
        if "..." in wanted:
            lo, hi = wanted.split("...")
            lines += [f"set(PACKAGE_FIND_VERSION_RANGE {wanted})", f"set(PACKAGE_FIND_VERSION_MIN {lo})",
                      f"set(PACKAGE_FIND_VERSION {lo})", "set(PACKAGE_FIND_VERSION_RANGE_MIN INCLUDE)",
                      f"set(PACKAGE_FIND_VERSION_MAX {hi.lstrip('<')})",
                      f"set(PACKAGE_FIND_VERSION_RANGE_MAX {'EXCLUDE' if hi.startswith('<') else 'INCLUDE'})"]
        elif wanted:
            lines.append(f"set(PACKAGE_FIND_VERSION {wanted})")
        lines += [f'include("{version_file}")', 'message("compatible=${PACKAGE_VERSION_COMPATIBLE}")']
        script.write_text("\n".join(lines) + "\n")
        rc, out = run(["cmake", "-P", str(script)])
        got = re.search(r"compatible=(\w*)", out)
        got = got and got.group(1) == "TRUE"
        check(f"CMake: Tack {version} {'satisfies' if expect else 'refuses'} {wanted or 'any version'}",
              rc == 0 and got == expect, out)


def check_cxx_linkage(prefix, work, env):
    """Every function the headers declare, referenced from C++ and linked."""
    names = []
    for header in sorted((prefix / "include" / "tack").glob("*.h")):
        text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
        for decl in re.findall(r"^[A-Za-z_][\w \*]*?\b(tack_\w+)\s*\([^;{]*\)\s*;", text, flags=re.M):
            names.append(decl)
    if not check("the headers declare functions", len(names) > 20, str(names)):
        return
    src = work / "linkage.cpp"
    body = ",\n    ".join(f"reinterpret_cast<void (*)()>(&{n})" for n in sorted(set(names)))
    src.write_text("#include <tack/tack.h>\n#include <cstdio>\n\n"
                   f"static void (*const functions[])() = {{\n    {body}\n}};\n\n"
                   "int main() { std::printf(\"%zu\\n\", sizeof functions / sizeof functions[0]); return 0; }\n")
    exe = work / "linkage"
    rc, out = run(["c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{prefix / 'include'}",
                   str(src), "-o", str(exe), f"-L{prefix / 'lib'}", "-ltack", f"-Wl,-rpath,{prefix / 'lib'}"])
    if check(f"C++: all {len(set(names))} public functions link with C linkage", rc == 0, out):
        rc, out = run([str(exe)], env=env)
        check("C++: the linked program runs", rc == 0 and out == str(len(set(names))), out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True, type=pathlib.Path)
    ap.add_argument("--destdir", required=True, type=pathlib.Path)
    ap.add_argument("--work", required=True, type=pathlib.Path)
    ap.add_argument("--build", type=pathlib.Path, help="the build directory (default: beside the prefix)")
    args = ap.parse_args()
    prefix, work = args.prefix.resolve(), args.work.resolve()
    if work.exists():
        shutil.rmtree(work / "cmake", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    version = project_version()
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"),
               TACK_CACHE_DIR=str(work / "kernel-cache"))

    missing = [t for t in ("cc", "c++", "pkg-config", "cmake", "readelf") if not shutil.which(t)]
    if missing:
        print(f"install: FAIL: missing {' '.join(missing)} (Debian: apt-get install gcc g++ pkg-config cmake binutils)")
        return 1
    check_files(prefix, args.destdir.resolve(), version)
    check_exports(prefix, version)
    check_werror(args.build or prefix.parent / "build")
    check_pkg_config(prefix, work, env, version)
    check_cmake(prefix, work, env, version)
    check_cxx_linkage(prefix, work, env)
    return summary("install")


if __name__ == "__main__":
    sys.exit(main())
