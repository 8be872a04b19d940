"""The cost of checked launches (tack.Kernel(src, checked=True)) on the CPU,
as ratios against the same kernel unchecked, measured in the same run.

    python bench/checked.py            # full run
    python bench/checked.py --quick    # smaller arrays, fewer repeats

Kernels: saxpy (y[i] = a * x[i] + y[i]) over 2^24 float32, and a 5-point
2-D stencil over a 2048 x 2048 float32 grid that reads its row length with
tack_extent (so both variants take the extents; only the checks differ).
A checked launch also allocates its small bounds record on the device and
reads it back after the launch (on a GPU that read waits for the launch).
Reported, not a target: the ratio checked / unchecked per kernel, and the
same for a launch of 1 element (the fixed cost of the record).
"""

import argparse
import timeit

import numpy as np

import tack

SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"
STENCIL = """
void stencil(tack_index i, tack_index j, const float *a, float *b)
{
    const tack_index h = tack_extent(a, 0), w = tack_extent(a, 1);
    if (i == 0 || j == 0 || i == h - 1 || j == w - 1) {
        b[i * w + j] = a[i * w + j];
        return;
    }
    b[i * w + j] = 0.25f * (a[(i - 1) * w + j] + a[(i + 1) * w + j] + a[i * w + j - 1] + a[i * w + j + 1]);
}
"""


def best(fn, number, repeat):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def pair(src, make_args, number, repeat):
    """Seconds per launch, unchecked and checked, interleaved so that both
    see the same machine."""
    plain, checked = tack.Kernel(src), tack.Kernel(src, checked=True)
    args = make_args()
    plain(*args)
    checked(*args)
    t_plain = t_checked = float("inf")
    for _ in range(repeat):
        t_plain = min(t_plain, best(lambda: plain(*args), number, 1))
        t_checked = min(t_checked, best(lambda: checked(*args), number, 1))
    return t_plain, t_checked


def row(name, t_plain, t_checked):
    print(f"{name:<22} unchecked {t_plain * 1e6:10.2f} us   checked {t_checked * 1e6:10.2f} us   "
          f"checked/unchecked {t_checked / t_plain:5.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    n = 1 << (20 if opts.quick else 24)
    side = 512 if opts.quick else 2048
    repeat = 3 if opts.quick else 7
    rng = np.random.default_rng(0)

    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    row(f"saxpy 2^{n.bit_length() - 1}", *pair(SAXPY, lambda: (np.float32(2), tack.array(x), tack.array(y)), 5,
                                                repeat))
    a = rng.standard_normal((side, side), dtype=np.float32)
    row(f"stencil {side}x{side}",
        *pair(STENCIL, lambda: (tack.array(a), tack.zeros((side, side), dtype="float32")), 5, repeat))
    one = np.ones(1, np.float32)
    row("saxpy, 1 element", *pair(SAXPY, lambda: (np.float32(2), tack.array(one), tack.array(one)), 2000,
                                  repeat))
    print(f"(cpu: {tack.device('cpu')}; threads as the CPU backend chooses)")


if __name__ == "__main__":
    main()
