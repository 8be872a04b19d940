"""Cost of crossing library lines with DLPack, measured against the peers'
own exchange in the same run, and resident-memory growth over many cycles.

    python bench/exchange.py            # full run (1,000,000 cycles)
    python bench/exchange.py --quick    # fewer repeats and cycles

Targets: each ratio <= 1.0x its baseline; growth < 4 MiB over 1,000,000
export/import cycles.
"""

import argparse
import gc
import sys
import timeit

import numpy as np

import tack

RATIO_TARGET = 1.0
GROWTH_TARGET_MIB = 4.0


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def per_call_us(calls, number, repeat):
    """Best-of-`repeat` cost of each call in microseconds. Each call is
    timed as the statement `f(x)`, with no wrapper function around it; the
    calls are timed in turn within each repeat, so drift in machine speed
    affects all of them alike."""
    timers = {name: timeit.Timer("f(x)", globals={"f": f, "x": x}) for name, (f, x) in calls.items()}
    best = {name: float("inf") for name in calls}
    for _ in range(repeat):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(number) / number * 1e6)
    return best


def verdict(ok):
    return "PASS" if ok else "MISS"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and cycles")
    args = parser.parse_args(argv)

    number = 20_000 if args.quick else 100_000
    repeat = 5 if args.quick else 9
    cycles = 100_000 if args.quick else 1_000_000

    n = np.zeros(1024, np.float32)
    a = tack.zeros(1024, tack.f32)
    functions = {
        "np.from_dlpack(numpy_array)": (np.from_dlpack, n),
        "tack.from_dlpack(numpy_array)": (tack.from_dlpack, n),
        "np.from_dlpack(tack_array)": (np.from_dlpack, a),
    }
    comparisons = [
        ("tack.from_dlpack(numpy_array)", "np.from_dlpack(numpy_array)"),
        ("np.from_dlpack(tack_array)", "np.from_dlpack(numpy_array)"),
    ]
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: its comparisons are skipped")
    if torch is not None:
        t = torch.zeros(1024, dtype=torch.float32)
        functions.update(
            {
                "torch.from_dlpack(numpy_array)": (torch.from_dlpack, n),
                "tack.from_dlpack(torch_tensor)": (tack.from_dlpack, t),
                "torch.from_dlpack(tack_array)": (torch.from_dlpack, a),
            }
        )
        comparisons += [
            ("tack.from_dlpack(torch_tensor)", "torch.from_dlpack(numpy_array)"),
            ("torch.from_dlpack(tack_array)", "torch.from_dlpack(numpy_array)"),
        ]

    print(f"per-call cost, best of {repeat} x {number:,} calls (Python {sys.version.split()[0]}, "
          f"NumPy {np.__version__}" + (f", PyTorch {torch.__version__}" if torch else "") + ")")
    cost = per_call_us(functions, number, repeat)
    width = max(len(k) for k in functions)
    for name, us in cost.items():
        print(f"  {name:<{width}}  {us:7.3f} us")

    print(f"\nratios (target <= {RATIO_TARGET:.1f}x)")
    all_ok = True
    for name, baseline in comparisons:
        ratio = cost[name] / cost[baseline]
        ok = ratio <= RATIO_TARGET
        all_ok &= ok
        print(f"  {name:<{width}} / {baseline:<{width}}  {ratio:5.2f}x  {verdict(ok)}")

    # One cycle: Tack exports to NumPy, Tack imports from NumPy.
    def cycle(count):
        for _ in range(count):
            tack.from_dlpack(np.from_dlpack(a))

    cycle(min(cycles // 10, 100_000))
    gc.collect()
    before = rss_mib()
    cycle(cycles)
    gc.collect()
    growth = rss_mib() - before
    ok = growth < GROWTH_TARGET_MIB
    all_ok &= ok
    print(f"\nresident memory over {cycles:,} export/import cycles: {growth:+.2f} MiB "
          f"(target < {GROWTH_TARGET_MIB:.0f} MiB)  {verdict(ok)}")
    print(f"live Tack objects afterwards: {dict(tack._tack.live_counts())}")
    print("\nall targets met" if all_ok else "\nsome targets missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
