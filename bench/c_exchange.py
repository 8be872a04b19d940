"""Cost of an import through a producer's DLPack C exchange table, against
the peers' own exchange and against an empty call of a C function, all in
the same run.

    python bench/c_exchange.py            # full run
    python bench/c_exchange.py --quick    # fewer repeats

tack.from_dlpack(torch_tensor) takes PyTorch's __dlpack_c_exchange_api__
(torch.Tensor publishes one): a C call for the tensor, no Python-level
__dlpack__ call and no capsule.

Targets (issue 8):
  tack.from_dlpack(torch_tensor)  <= 0.5x  torch.from_dlpack(numpy_array)
  tack.from_dlpack(torch_tensor)  <= 2.0x  an empty call of a C function

Beside them it prints what PyTorch's table costs by itself (bench/table_floor.c,
built here with the system C compiler: the table's export and deleter looped
in C), and so the least any consumer importing through the table can cost.

The empty call is id(tensor): a builtin taking one positional argument that
does no work but return a new object, as an import must. operator.not_(None)
(no argument work, returns a singleton) is printed beside it as the floor of
any call from Python. Each timing is the statement `f(x)`, so the call
overhead of the interpreter is in every figure alike; the result is dropped
at once, so an import's figure includes releasing it (PyTorch's deleter).
"""

import argparse
import ctypes
import operator
import os
import pathlib
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import timeit

import numpy as np

import tack

PEER_TARGET = 0.5
EMPTY_TARGET = 2.0


HERE = pathlib.Path(__file__).resolve().parent


def build_floor(workdir):
    """Builds bench/table_floor.c against this Python and Tack's DLPack
    header; returns the loaded library, or None (with the reason printed)
    when no C compiler works here."""
    cc = shlex.split(os.environ.get("CC", "cc"))
    lib = pathlib.Path(workdir) / "table_floor.so"
    cmd = [*cc, "-O2", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], "-I", str(HERE.parent / "include"),
           str(HERE / "table_floor.c"), "-o", str(lib)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"  (the table's own cost is not measured: {' '.join(cmd[:1])} failed: "
              f"{getattr(e, 'stderr', '') or e})")
        return None
    floor = ctypes.PyDLL(str(lib))
    floor.table_round_trip_ns.restype = ctypes.c_double
    floor.table_round_trip_ns.argtypes = [ctypes.py_object, ctypes.c_long, ctypes.c_int]
    return floor


def per_call_ns(calls, number, repeat):
    """Best-of-`repeat` cost of each call in nanoseconds; the calls are
    timed in turn within each repeat, so drift affects all alike."""
    timers = {name: timeit.Timer("f(x)", globals={"f": f, "x": x}) for name, (f, x) in calls.items()}
    best = {name: float("inf") for name in calls}
    for _ in range(repeat):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(number) / number * 1e9)
    return best


class Dunder:
    """A tensor reachable through __dlpack__ only: the import without the table."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and calls")
    args = parser.parse_args(argv)
    number = 50_000 if args.quick else 200_000
    repeat = 5 if args.quick else 11

    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to measure (pip install torch)")
        return 0
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        print(f"PyTorch {torch.__version__} publishes no C exchange table (2.10+ does): nothing to measure")
        return 0

    t = torch.zeros(1024, dtype=torch.float32)
    n = np.zeros(1024, np.float32)
    a = tack.zeros(1024, tack.f32)
    main_case = "tack.from_dlpack(torch_tensor)"
    peer = "torch.from_dlpack(numpy_array)"
    empty = "id(torch_tensor)"
    floor = "operator.not_(None)"
    calls = {
        main_case: (tack.from_dlpack, t),
        peer: (torch.from_dlpack, n),
        empty: (id, t),
        floor: (operator.not_, None),
        # For reference: the same import through __dlpack__, and Tack's
        # own table (tack.from_dlpack of a tack.Array).
        "tack.from_dlpack(torch via __dlpack__)": (tack.from_dlpack, Dunder(t)),
        "tack.from_dlpack(tack_array)": (tack.from_dlpack, a),
        "np.from_dlpack(numpy_array)": (np.from_dlpack, n),
    }
    # Warm the caches (the table lookups, the allocator) before timing.
    for f, x in calls.values():
        for _ in range(1000):
            f(x)

    print(f"per-call cost, best of {repeat} x {number:,} calls (Python {sys.version.split()[0]}, "
          f"NumPy {np.__version__}, PyTorch {torch.__version__})")
    cost = per_call_ns(calls, number, repeat)
    width = max(len(k) for k in calls)
    for name, ns in cost.items():
        print(f"  {name:<{width}}  {ns:8.1f} ns")

    # PyTorch's share, measured from C: its export and its deleter with
    # nothing else around them. With the empty call, that is the least any
    # consumer importing through the table could cost.
    with tempfile.TemporaryDirectory() as workdir:
        floor_lib = build_floor(workdir)
        table_ns = floor_lib.table_round_trip_ns(t, number, repeat) if floor_lib else None
    if table_ns is not None:
        bound = cost[empty] + table_ns
        rows = {
            "PyTorch's table alone (export + deleter, from C)": table_ns,
            f"least any consumer can cost ({empty} + that)": bound,
            f"Tack's share ({main_case} - least)": cost[main_case] - bound,
        }
        w = max(len(k) for k in rows)
        print()
        for name, ns in rows.items():
            print(f"  {name:<{w}}  {ns:8.1f} ns")
        print(f"  so no consumer of this table gets below {bound / cost[empty]:.2f}x {empty}")

    results = []
    for baseline, target in ((peer, PEER_TARGET), (empty, EMPTY_TARGET)):
        ratio = cost[main_case] / cost[baseline]
        results.append(ratio <= target)
        print(f"\n  {main_case} / {baseline}: {ratio:5.2f}x  (target <= {target:.1f}x)  "
              f"{'PASS' if results[-1] else 'MISS'}")
    print(f"  {main_case} / {floor}: {cost[main_case] / cost[floor]:5.2f}x  (for reference)")
    print(f"\nlive Tack objects afterwards: {dict(tack._tack.live_counts())}")
    print("\nall targets met" if all(results) else "\nsome targets missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
