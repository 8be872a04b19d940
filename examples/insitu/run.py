"""Builds and runs the in-situ example (make demo, make test):

    python examples/insitu/run.py [--prefix P] [--build B] [--out O]

with the Python that has tack installed. CMake finds Tack where this
Python's tack says (python -m tack --cmake-dir): the libtack the package
carries, the very file the extension loads, so the simulation and its
analysis share one Tack; --prefix P takes another install (make install-c)
of the same SONAME instead, which the extension then binds to. CMake builds
heat.c against it and this Python's libpython into B (build/insitu); heat
runs with this Python's module path, writes its PNGs into O
(build/insitu/png) and must end with "ok". Exits with heat's status; 0
with a line saying why when a tool it needs (cmake, make, a C compiler) is
missing.
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


def package_cmake_dir():
    """The CMake package of the tack this Python imports, whose libtack is
    the one the extension loads; str: why not."""
    r = subprocess.run([sys.executable, "-m", "tack", "--cmake-dir"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, f"python -m tack --cmake-dir failed (is tack installed in {sys.executable}?):\n{r.stderr}"
    return pathlib.Path(r.stdout.strip()), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", type=pathlib.Path,
                    help="another install of the same Tack (default: the package's, python -m tack --cmake-dir)")
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
        prefix, why = package_cmake_dir()
        if why:
            print(why, file=sys.stderr)
            return 1
    out = args.out or args.build / "png"
    out.mkdir(parents=True, exist_ok=True)
    configure = ["cmake", "-S", str(HERE), "-B", str(args.build), f"-DCMAKE_PREFIX_PATH={prefix.resolve()}",
                 f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"]
    # A build folder configured before remembers the Tack it found.
    tack_dir = prefix if args.prefix is None else prefix / "lib" / "cmake" / "Tack"
    configure.append(f"-DTack_DIR={tack_dir.resolve()}")
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
