"""Kernel speed, as ratios against NumPy measured in the same run.

    python bench/kernels.py            # full run
    python bench/kernels.py --quick    # smaller arrays, fewer repeats

Targets:
  - saxpy over 2^26 float32: >= 1.5x faster than NumPy's `y += a * x`, and
    >= 70% of the bandwidth of a plain copy (np.copyto) of the same arrays;
    bandwidth counts the bytes each must move: saxpy reads x and y and
    writes y (12 bytes an element), a copy reads and writes (8 an element).
  - a 1-element launch from Python: <= 3x np.add(a, b, out=c) on 1-element
    arrays.
  - the CPU backend's own choice between one thread and all, for saxpy of
    2^20 elements and more (where threads clearly pay): <= 1.5x the time of
    the better of the two forced (single runs of each vary by up to 1.25x).
Reported: the first compile of a small kernel, its load from the cache by a
new Kernel in a process that has not loaded it, and where the CPU backend
switches from serial to parallel for saxpy (TACK_NUM_THREADS=1 against the
default, per launch size).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

import tack

SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"
ADD = "void add(tack_index i, const float *a, const float *b, float *c) { c[i] = a[i] + b[i]; }"


def best(fn, number, repeat):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def verdict(ok):
    return "PASS" if ok else "MISS"


def saxpy_bench(log2n, repeat):
    n = 1 << log2n
    a = np.float32(2.0)
    xn = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    yn = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    k = tack.Kernel(SAXPY)
    x, y = tack.from_dlpack(xn.copy()), tack.from_dlpack(yn.copy())
    y_check = tack.array(yn)
    k(a, x, y_check)
    expected = a * xn + yn
    assert np.array_equal(y_check.to_numpy(), expected), "saxpy result differs from NumPy"
    del y_check

    yn2 = yn.copy()
    dst = np.empty_like(xn)
    # Interleaved, so that drift in machine speed affects all alike.
    t_tack = t_numpy = t_copy = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        k(a, x, y)
        t_tack = min(t_tack, time.perf_counter() - t0)
        t0 = time.perf_counter()
        yn2 += a * xn
        t_numpy = min(t_numpy, time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.copyto(dst, xn)
        np.copyto(dst, yn2)
        t_copy = min(t_copy, (time.perf_counter() - t0) / 2)
    bw_tack = 12 * n / t_tack / 1e9
    bw_copy = 8 * n / t_copy / 1e9
    return n, t_tack, t_numpy, t_copy, bw_tack, bw_copy


def small_launch_bench(number, repeat):
    k = tack.Kernel(ADD)
    a, b, c = tack.zeros(1), tack.zeros(1), tack.zeros(1)
    na, nb, nc = np.zeros(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    timers = {
        "np.add(a, b, out=c)": timeit.Timer("f(a, b, out=c)", globals={"f": np.add, "a": na, "b": nb, "c": nc}),
        "kernel(a, b, c)": timeit.Timer("k(a, b, c)", globals={"k": k, "a": a, "b": b, "c": c}),
        "kernel.launch(1, a, b, c)": timeit.Timer("f(1, a, b, c)", globals={"f": k.launch, "a": a, "b": b, "c": c}),
    }
    result = {name: float("inf") for name in timers}
    for _ in range(repeat):
        for name, timer in timers.items():
            result[name] = min(result[name], timer.timeit(number) / number)
    return result


def compile_bench():
    env_dir = tempfile.mkdtemp(prefix="tack-bench-cache-")
    saved = os.environ.get("TACK_CACHE_DIR")
    os.environ["TACK_CACHE_DIR"] = env_dir
    try:
        src = f"void fresh(tack_index i, float *y) {{ y[i] = {time.time_ns()}.0f; }}"
        t0 = time.perf_counter()
        tack.Kernel(src)
        first = time.perf_counter() - t0
        # A source compiled by another process: this one loads it from disk.
        other = src.replace("fresh", "other")
        subprocess.run([sys.executable, "-c", f"import tack; tack.Kernel({other!r})"], check=True, env=dict(os.environ))
        t0 = time.perf_counter()
        tack.Kernel(other)
        from_disk = time.perf_counter() - t0
        # Again in this process, while a kernel of it is alive: loaded.
        keep = tack.Kernel(other)
        t0 = time.perf_counter()
        for _ in range(100):
            tack.Kernel(other)
        again = (time.perf_counter() - t0) / 100
        del keep
    finally:
        if saved is None:
            os.environ.pop("TACK_CACHE_DIR", None)
        else:
            os.environ["TACK_CACHE_DIR"] = saved
    return first, from_disk, again


SWEEP = r"""
import sys, time, numpy as np, tack
k = tack.Kernel(sys.argv[1])
for log2n in range(8, 23):
    n = 1 << log2n
    x, y = tack.zeros(n), tack.zeros(n)
    for _ in range(20):
        k(2.0, x, y)
    number = max(3, (1 << 22) // n)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(number):
            k(2.0, x, y)
        best = min(best, (time.perf_counter() - t0) / number)
    print(n, best)
"""


def threshold_bench():
    """Per-launch time of saxpy by size: serial only, always parallel, and
    the default (Tack's measured decision)."""
    runs = {}
    for label, extra in (("serial", {"TACK_NUM_THREADS": "1"}), ("parallel", {"TACK_SERIAL_BELOW": "0"}), ("default", {})):
        env = dict(os.environ)
        env.pop("TACK_NUM_THREADS", None)
        env.pop("TACK_SERIAL_BELOW", None)
        env.update(extra)
        out = subprocess.run([sys.executable, "-c", SWEEP, SAXPY], check=True, env=env, capture_output=True, text=True)
        runs[label] = {int(n): float(t) for n, t in (line.split() for line in out.stdout.split("\n") if line)}
    return runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^24 elements, fewer repeats")
    args = parser.parse_args(argv)
    repeat = 5 if args.quick else 10

    print(f"tack {tack.__version__}, numpy {np.__version__}, {os.cpu_count()} cores")
    print()
    n, t_tack, t_numpy, t_copy, bw_tack, bw_copy = saxpy_bench(24 if args.quick else 26, repeat)
    speedup = t_numpy / t_tack
    frac = bw_tack / bw_copy
    print(f"saxpy over {n:,} float32 (n = 2^{n.bit_length() - 1})")
    print(f"  tack kernel            {t_tack * 1e3:8.2f} ms   {bw_tack:6.1f} GB/s")
    print(f"  numpy y += a * x       {t_numpy * 1e3:8.2f} ms")
    print(f"  numpy copyto (1 array) {t_copy * 1e3:8.2f} ms   {bw_copy:6.1f} GB/s")
    print(f"  speed-up over numpy    {speedup:8.2f}x  (target >= 1.5x)   {verdict(speedup >= 1.5)}")
    print(f"  bandwidth / copy's     {frac * 100:7.0f}%   (target >= 70%)   {verdict(frac >= 0.7)}")
    print()

    small = small_launch_bench(20_000 if args.quick else 100_000, repeat)
    base = small["np.add(a, b, out=c)"]
    print("1-element launch, per call")
    for name, t in small.items():
        print(f"  {name:<26} {t * 1e9:7.0f} ns   {t / base:5.2f}x")
    worst = max(small["kernel(a, b, c)"], small["kernel.launch(1, a, b, c)"]) / base
    print(f"  target <= 3x np.add                          {verdict(worst <= 3.0)}")
    print()

    first, from_disk, again = compile_bench()
    print("compile and load of a small kernel")
    print(f"  first compile (cc)              {first * 1e3:8.1f} ms")
    print(f"  cached, loaded from disk        {from_disk * 1e3:8.2f} ms")
    print(f"  cached, already loaded          {again * 1e6:8.1f} us")
    print()

    runs = threshold_bench()
    print(f"saxpy per launch by size ({os.cpu_count()} cores): serial, always parallel, default (measured decision)")
    print(f"  {'n':>9} {'serial':>10} {'parallel':>10} {'default':>10}  default / best")
    crossover = None
    for size in sorted(runs["serial"]):
        s, p, d = runs["serial"][size], runs["parallel"][size], runs["default"][size]
        if crossover is None and p < s:
            crossover = size
        print(f"  {size:>9} {s * 1e6:8.2f}us {p * 1e6:8.2f}us {d * 1e6:8.2f}us  {d / min(s, p):5.2f}")
    print(f"  parallel first beats serial at n = {crossover}")
    large = [runs["default"][n] / min(runs["serial"][n], runs["parallel"][n]) for n in runs["serial"] if n >= 1 << 20]
    print(f"  default / best from n = 2^20 up: at most {max(large):.2f}  (target <= 1.5)   {verdict(max(large) <= 1.5)}")


if __name__ == "__main__":
    main()
