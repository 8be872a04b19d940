"""Builds and runs the in-situ example (make demo, make test):

    python examples/insitu/run.py [--prefix P] [--build B] [--out O]

with the Python that has tack installed. The C library comes from P (an
install of make install-c), by default one built from this source tree
into build/demo-c/prefix, the one `make demo` shows the C API with (a few
seconds, once). CMake builds heat.c against it and this Python's
libpython into B (build/insitu); heat runs with this Python's module
path, writes its PNGs into O (build/insitu/png) and must end with "ok".
Exits with heat's status; 0 with a line saying why when a tool it needs
(cmake, make, a C compiler) is missing.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def tools_missing():
    for tool in ("cmake", "make", "cc"):
        if shutil.which(tool) is None:
            return tool
    return None


def c_install(prefix):
    """libtack installed under `prefix` by make install-c; str: why not."""
    # Meson runs in an environment of its own: this module path is not its.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    build = ROOT / "build" / "demo-c" / "build"
    r = subprocess.run(["make", "--no-print-directory", "install-c", f"PREFIX={prefix}", f"C_BUILD={build}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return f"make install-c failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", type=pathlib.Path, help="an installed Tack (default: built into build/demo-c)")
    ap.add_argument("--build", type=pathlib.Path, default=ROOT / "build" / "insitu")
    ap.add_argument("--out", type=pathlib.Path, help="where heat writes its PNGs (default: <build>/png)")
    args = ap.parse_args(argv)
    print("\n== In situ: a C simulation hands its field to Python without a copy (examples/insitu)")
    missing = tools_missing()
    if missing:
        print(f"   skipped: no {missing} on PATH to build examples/insitu")
        return 0
    prefix = args.prefix
    if prefix is None:
        prefix = ROOT / "build" / "demo-c" / "prefix"
        why = c_install(prefix)
        if why:
            print(why, file=sys.stderr)
            return 1
    out = args.out or args.build / "png"
    out.mkdir(parents=True, exist_ok=True)
    configure = ["cmake", "-S", str(HERE), "-B", str(args.build), f"-DCMAKE_PREFIX_PATH={prefix.resolve()}",
                 f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"]
    for command in (configure, ["cmake", "--build", str(args.build)]):
        r = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(f"{' '.join(command)} failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}", file=sys.stderr)
            return 1
    # The embedded interpreter imports tack and NumPy from where this one does.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([str(args.build / "heat"), str(out)], env=env, capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        print(f"   {line}")
    if r.returncode != 0 or r.stdout.splitlines()[-1:] != ["ok"]:
        print(f"heat failed (exit status {r.returncode}):\n{r.stderr}", file=sys.stderr)
        return r.returncode or 1
    print(f"   PNGs of the field in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
