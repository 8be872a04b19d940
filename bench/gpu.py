"""CUDA exchange and kernel speed on an NVIDIA GPU, as ratios against PyTorch
and CuPy measured in the same run.

    python bench/gpu.py            # full run: saxpy over 2^28 float32
    python bench/gpu.py --quick    # 2^26 elements, fewer repeats

Targets:
  - Tack's kDLCUDA import (tack.from_dlpack of a CuPy array) and export
    (torch.from_dlpack of a Tack array) each cost at most 1.0x
    torch.from_dlpack of a CuPy array, per call.
  - saxpy over 2^28 float32 reaches at least 80% of the bandwidth of a
    device-to-device copy of the same bytes; bandwidth counts the bytes each
    must move: saxpy reads x and y and writes y (12 bytes an element), a
    copy reads and writes (8 an element).
Needs a GPU, the CUDA driver, PyTorch with CUDA and CuPy; run by
tests/gpu/run.sh.
"""

import argparse
import sys
import time
import timeit

import tack

RATIO_TARGET = 1.0
BANDWIDTH_TARGET = 0.80
SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"
INIT = "void init(tack_index i, float *x, float scale) { x[i] = (float)(i % 1024) * scale; }"


def verdict(ok):
    return "PASS" if ok else "MISS"


def per_call_us(calls, number, repeat):
    """Best-of-`repeat` cost of each call in microseconds, the calls timed in
    turn within each repeat so that drift in machine speed affects all alike.
    What a call returns is dropped at once, so each cost includes releasing
    what it made (the DLPack deleter)."""
    timers = {name: timeit.Timer("f(x)", globals={"f": f, "x": x}) for name, (f, x) in calls.items()}
    best = {name: float("inf") for name in calls}
    for _ in range(repeat):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(number) / number * 1e6)
    return best


def exchange(torch, cupy, number, repeat):
    c = cupy.zeros(1024, dtype=cupy.float32)
    a = tack.zeros(1024, "float32", device="cuda")
    cupy.cuda.Device().synchronize()
    calls = {
        "torch.from_dlpack(cupy_array)": (torch.from_dlpack, c),
        "tack.from_dlpack(cupy_array)": (tack.from_dlpack, c),
        "torch.from_dlpack(tack_array)": (torch.from_dlpack, a),
        "cupy.from_dlpack(tack_array)": (cupy.from_dlpack, a),
    }
    # Zero-copy both ways, before anything is timed.
    assert tack.from_dlpack(c).ptr == c.data.ptr
    assert torch.from_dlpack(a).data_ptr() == a.ptr
    cost = per_call_us(calls, number, repeat)
    width = max(len(k) for k in calls)
    print(f"per-call cost, best of {repeat} x {number:,} calls (PyTorch {torch.__version__}, CuPy {cupy.__version__})")
    for name, us in cost.items():
        print(f"  {name:<{width}}  {us:7.3f} us")
    baseline = "torch.from_dlpack(cupy_array)"
    ok = True
    print(f"\nratios (target <= {RATIO_TARGET:.1f}x)")
    for name in ("tack.from_dlpack(cupy_array)", "torch.from_dlpack(tack_array)"):
        ratio = cost[name] / cost[baseline]
        ok &= ratio <= RATIO_TARGET
        print(f"  {name:<{width}} / {baseline}  {ratio:5.2f}x  {verdict(ratio <= RATIO_TARGET)}")
    return ok


def best_seconds(fn, sync, repeat, inner):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t) / inner)
    return best


def bandwidth(torch, log2n, repeat):
    n = 1 << log2n
    dev = tack.device("cuda")
    # Tack's own arrays: launches over them are queued, not waited for.
    x = tack.empty(n, "float32", device=dev)
    y = tack.empty(n, "float32", device=dev)
    init = tack.Kernel(INIT, device=dev)
    saxpy = tack.Kernel(SAXPY, device=dev)
    init(x, 1.0)
    init(y, 0.5)

    # Correct first: one saxpy against PyTorch on copies of the inputs.
    xt = torch.from_dlpack(x).clone()
    yt = torch.from_dlpack(y).clone()
    check = tack.from_dlpack(yt.clone())
    saxpy(2.0, tack.from_dlpack(xt), check)
    torch.cuda.synchronize()
    assert torch.allclose(torch.from_dlpack(check), 2.0 * xt + yt, rtol=1e-6, atol=1e-6), "saxpy differs from torch"
    del xt, yt, check
    # The exports above shared x and y: fresh arrays for the timing.
    x2 = tack.empty(n, "float32", device=dev)
    y2 = tack.empty(n, "float32", device=dev)
    init(x2, 1.0)
    init(y2, 0.5)
    del x, y

    t_saxpy = best_seconds(lambda: saxpy(2.0, x2, y2), dev.synchronize, repeat, 10)
    src = torch.empty(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    t_copy = best_seconds(lambda: dst.copy_(src), torch.cuda.synchronize, repeat, 10)
    bw_saxpy = 12 * n / t_saxpy / 1e9
    bw_copy = 8 * n / t_copy / 1e9
    ratio = bw_saxpy / bw_copy
    print(f"\nsaxpy over 2^{log2n} float32: {t_saxpy * 1e3:.3f} ms, {bw_saxpy:.0f} GB/s")
    print(f"device-to-device copy of 2^{log2n} float32 (torch): {t_copy * 1e3:.3f} ms, {bw_copy:.0f} GB/s")
    print(f"saxpy bandwidth / copy bandwidth: {ratio:.2f} (target >= {BANDWIDTH_TARGET:.2f})  "
          f"{verdict(ratio >= BANDWIDTH_TARGET)}")
    return ratio >= BANDWIDTH_TARGET


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^26 elements and fewer repeats")
    args = parser.parse_args(argv)
    try:
        import cupy
        import torch
    except ImportError as e:
        print(f"bench/gpu.py needs PyTorch and CuPy: {e}")
        return 1
    if not torch.cuda.is_available():
        print("bench/gpu.py needs a CUDA GPU: torch.cuda.is_available() is False")
        return 1
    dev = tack.device("cuda")
    print(f"{torch.cuda.get_device_name(0)}; Tack device {dev.name}")
    ok = exchange(torch, cupy, 2_000 if args.quick else 20_000, 5 if args.quick else 9)
    ok &= bandwidth(torch, 26 if args.quick else 28, 3 if args.quick else 7)
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
