"""The first launch of a CPU kernel: the system C compiler against zig's
(the ziglang package, used where no system compiler is on PATH), with zig's
own cache cold and warm, and a launch served from Tack's kernel cache.

    python bench/first_compile.py            # 5 runs of each (3 cold)
    python bench/first_compile.py --quick    # 3 runs of each (1 cold)

Each run is a new interpreter with a new kernel cache, timing import tack,
tack.Kernel() and its first launch: what a user waits for the first time a
kernel runs. A cache hit with zig still asks the interpreter for zig's
version (once per process), which the kernel cache's key holds. zig keeps
what it builds once (its C library stubs, compiler_rt) in its global cache
(ZIG_GLOBAL_CACHE_DIR, default ~/.cache/zig); "cold" gives each run an
empty one. Ratios are against the system compiler in the same run.
"""

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import sys, time
start = time.perf_counter()
import tack
k = tack.Kernel("void first_%s(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }")
x, y = tack.zeros(1000, tack.f32), tack.zeros(1000, tack.f32)
k(2.0, x, y)
print(time.perf_counter() - start)
"""


def launch(env, tag):
    run = subprocess.run([sys.executable, "-c", CHILD % tag], env=env, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise SystemExit(f"the kernel did not run:\n{run.stdout}{run.stderr}")
    return float(run.stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, cold_runs = (3, 1) if args.quick else (5, 3)
    if importlib.util.find_spec("ziglang") is None:
        raise SystemExit("the ziglang package is not installed: pip install tack-arrays[cc]")
    if shutil.which("cc") is None:
        raise SystemExit("no system C compiler (cc) on PATH to compare with")

    work = tempfile.mkdtemp(prefix="tack-first-compile-")
    empty = os.path.join(work, "empty-bin")
    os.mkdir(empty)
    base = {k: v for k, v in os.environ.items() if k not in ("TACK_CC", "TACK_CFLAGS", "ZIG_GLOBAL_CACHE_DIR")}
    counter = iter(range(10**6))

    def fresh(**extra):
        env = dict(base, TACK_CACHE_DIR=os.path.join(work, f"cache-{next(counter)}"), **extra)
        return env

    def zig_env(zig_cache):
        return fresh(PATH=empty, ZIG_GLOBAL_CACHE_DIR=zig_cache)

    results = {}
    try:
        results["system cc"] = [launch(fresh(), f"s{i}") for i in range(runs)]
        warm = os.path.join(work, "zig-warm")
        results["zig cc, zig cache cold"] = [launch(zig_env(os.path.join(work, f"zig-cold-{i}")), f"c{i}")
                                             for i in range(cold_runs)]
        launch(zig_env(warm), "prime")  # fills the warm cache
        results["zig cc, zig cache warm"] = [launch(zig_env(warm), f"w{i}") for i in range(runs)]
        hit = fresh()
        launch(hit, "hit")
        results["Tack cache hit (system cc)"] = [launch(hit, "hit") for _ in range(runs)]
        hit_zig = zig_env(warm)
        launch(hit_zig, "hitz")
        results["Tack cache hit (zig)"] = [launch(hit_zig, "hitz") for _ in range(runs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    system = statistics.median(results["system cc"])
    version = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    zig = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True).stdout.strip()
    print(f"first kernel launch in a new process (median of runs; cc is {version}, zig {zig}):")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"  {name:<28} {median * 1000:9.1f} ms   {median / system:6.2f}x system cc   ({len(times)} runs)")


if __name__ == "__main__":
    main()
