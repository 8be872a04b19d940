"""What a foreign array costs a kernel call, as ratios measured in the same run.

    python bench/kernel_args.py            # full run
    python bench/kernel_args.py --quick    # fewer repeats

A kernel argument may be a NumPy array (or anything tack.asarray takes),
imported without a copy for the call. Target: the extra time of a call per
foreign argument, k(numpy, ...) minus k(tack.Array, ...), is no more than
tack.from_dlpack of that array alone (ratio <= 1.0); also shown against the
same import made by hand beside the launch (the two in one statement, minus
the launch), which shares the call's cache and branch state. The arrays are
small, so that the time is the call's, not the kernel's.
"""

import argparse
import timeit

import numpy as np

import tack

ADD = "void add(tack_index i, const float *a, const float *b, float *c) { c[i] = a[i] + b[i]; }"


def measure(number, repeat, n):
    k = tack.Kernel(ADD)
    na, nb, nc = (np.ones(n, np.float32) for _ in range(3))
    ta, tb, tc = (tack.array(x) for x in (na, nb, nc))
    from_dlpack = tack.from_dlpack
    timers = {
        "k(tack, tack, tack)": lambda: k(ta, tb, tc),
        "k(tack, tack, numpy)": lambda: k(ta, tb, nc),
        "k(numpy, numpy, numpy)": lambda: k(na, nb, nc),
        "tack.from_dlpack(numpy)": lambda: from_dlpack(nc),
        # The import beside a launch, as a caller importing by hand pays it.
        "k(tack, tack, tack); from_dlpack": lambda: (k(ta, tb, tc), from_dlpack(nc)),
    }
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.ones(n, dtype=torch.float32)
        timers["k(tack, tack, torch)"] = lambda: k(ta, tb, t)
        timers["tack.from_dlpack(torch)"] = lambda: from_dlpack(t)
    best = {name: float("inf") for name in timers}
    # Many short batches, interleaved, the best of each kept: on a busy
    # machine a long batch is rarely run without being preempted.
    for _ in range(repeat):
        for name, fn in timers.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number) / number)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, default=16, help="elements per array (default 16)")
    args = parser.parse_args()
    number, repeat = (500, 30) if args.quick else (500, 200)
    best = measure(number, repeat, args.n)
    print(f"per-call times, {args.n}-element float32 arrays, best of {repeat} x {number}:")
    for name, t in best.items():
        print(f"  {name:34s} {t * 1e9:7.0f} ns")
    base, alone = best["k(tack, tack, tack)"], best["tack.from_dlpack(numpy)"]
    beside = best["k(tack, tack, tack); from_dlpack"] - base
    rows = [
        ("numpy, one argument", best["k(tack, tack, numpy)"] - base, alone),
        ("numpy, three arguments (each)", (best["k(numpy, numpy, numpy)"] - base) / 3, alone),
        ("numpy, one argument vs by hand", best["k(tack, tack, numpy)"] - base, beside),
    ]
    if "k(tack, tack, torch)" in best:
        rows.append(("torch, one argument", best["k(tack, tack, torch)"] - base, best["tack.from_dlpack(torch)"]))
    print("a call's extra time per foreign argument / tack.from_dlpack of it (target <= 1.0):")
    for label, extra, reference in rows:
        ratio = extra / reference
        print(f"  {label:32s} {extra * 1e9:6.0f} ns / {reference * 1e9:6.0f} ns = {ratio:.2f}  "
              f"{'PASS' if ratio <= 1.0 else 'MISS'}")
    print(f"k(numpy, numpy, numpy) / k(tack, tack, tack): {best['k(numpy, numpy, numpy)'] / base:.2f}x")


if __name__ == "__main__":
    main()
