"""CPU kernels against Numba, as time ratios measured in the same run.

    python bench/vs_numba.py            # full sizes
    python bench/vs_numba.py --quick    # smaller problems, fewer repeats

Each case runs the same computation on the same data through a Tack kernel
and a Numba function compiled with parallel=True (its loops under prange),
checks that the results agree, and prints Tack's time over Numba's (below 1:
Tack is faster). Both are warmed up first; each time is the best of several
runs, taken in turns so that drift in the machine's speed touches both.

Targets (Tack / Numba):
  saxpy, 2^24 float32 (bandwidth-bound)                      <= 1.0x
  5-point stencil on 4096 x 4096 float32 (Tack: a 2-D domain;
    Numba: nested loops, the outer under prange)              <= 0.9x
  Mandelbrot, 2^20 points x 200 iterations                    <= 1.0x
  256-bin histogram of 10^7 values (Tack: atomics;
    Numba: a partial histogram per thread)                    <= 3.0x
  all-pairs n-body step, 4096 bodies                          <= 0.9x
  a call over 1 element (per call)                            <= 0.3x
  the same of the histogram's kernel (Numba: the saxpy call)   <= 0.3x
  dot product of 2^24 float32 with tack_reduce_add
    (the other side: np.dot, not Numba)                       <= 1.3x
  the histogram with tack_reduce_add on NumPy memory passed
    directly (imported), against Numba's per-thread one       <= 1.0x
  the histogram with tack_reduce_add on tack.zeros memory
    (the other side: the tack_atomic_add kernel above)        <= 1.0x
  cold compile and first call of a new kernel                 <= 0.3x

In the rows whose other side is not Numba, the "numba" column is that side.

Agreement: integers exactly. Floating point within a tolerance, since
Tack's compiler may contract a * b + c into one fused multiply-add (one
rounding instead of two) where Numba's does not: for saxpy and the stencil
1e-6 of the sum of the magnitudes of the terms (a few units in the last
place of float32; the result itself may be far smaller where terms cancel),
for the n-body accelerations 1e-4 of the largest (sums of 4096 terms). A Mandelbrot point on the set's edge can
escape one iteration earlier or later for the same reason: at most 0.1% of
the points may differ, each by at most a few iterations.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import tack

try:
    import numba
    from numba import njit, prange
except ImportError:  # pragma: no cover - the bench needs it, the library does not
    sys.exit("bench/vs_numba.py needs Numba: pip install numba (it is in requirements-dev.txt)")


# ---- the kernels, each written once for Tack and once for Numba -------------

SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"


@njit(parallel=True)
def nb_saxpy(a, x, y):
    for i in prange(x.shape[0]):
        y[i] = a * x[i] + y[i]


STENCIL = """
void lap(tack_index i, tack_index j, int64_t h, int64_t w, const float *u, float *out)
{
    tack_index k = i * w + j;
    if (i == 0 || j == 0 || i == h - 1 || j == w - 1) {
        out[k] = 0.0f;
        return;
    }
    out[k] = u[k - w] + u[k + w] + u[k - 1] + u[k + 1] - 4.0f * u[k];
}
"""


@njit(parallel=True)
def nb_stencil(u, out):
    h, w = u.shape
    for i in prange(h):
        for j in range(w):
            if i == 0 or j == 0 or i == h - 1 or j == w - 1:
                out[i, j] = 0.0
            else:
                out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - np.float32(4.0) * u[i, j]


MANDELBROT = """
void mandel(tack_index k, int64_t w, int64_t h, int32_t iters, int32_t *out)
{
    double cr = -2.0 + 2.5 * (double)(k % w) / (double)w;
    double ci = -1.25 + 2.5 * (double)(k / w) / (double)h;
    double zr = 0.0, zi = 0.0;
    int32_t n = 0;
    while (n < iters && zr * zr + zi * zi <= 4.0) {
        double t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        n++;
    }
    out[k] = n;
}
"""


@njit(parallel=True)
def nb_mandelbrot(w, h, iters, out):
    for k in prange(w * h):
        cr = -2.0 + 2.5 * (k % w) / w
        ci = -1.25 + 2.5 * (k // w) / h
        zr = 0.0
        zi = 0.0
        n = 0
        while n < iters and zr * zr + zi * zi <= 4.0:
            t = zr * zr - zi * zi + cr
            zi = 2.0 * zr * zi + ci
            zr = t
            n += 1
        out[k] = n


HISTOGRAM = """
void hist(tack_index i, const uint8_t *v, uint32_t *bins)
{
    tack_atomic_add(&bins[v[i]], 1u);
}
"""


HISTOGRAM_REDUCE = HISTOGRAM.replace("tack_atomic_add", "tack_reduce_add")

DOT = "void dot(tack_index i, const float *x, const float *y, float *out) { tack_reduce_add(&out[0], x[i] * y[i]); }"


@njit(parallel=True)
def nb_histogram(v, bins, nthreads):
    n = v.shape[0]
    part = np.zeros((nthreads, bins.shape[0]), np.uint32)
    step = (n + nthreads - 1) // nthreads
    for t in prange(nthreads):
        for i in range(t * step, min(n, (t + 1) * step)):
            part[t, v[i]] += 1
    for t in range(nthreads):
        for b in range(bins.shape[0]):
            bins[b] += part[t, b]


NBODY = """
void accel(tack_index i, int64_t n, float eps2, const float *x, const float *y, const float *z,
           const float *m, float *ax, float *ay, float *az)
{
    float xi = x[i], yi = y[i], zi = z[i];
    float sx = 0.0f, sy = 0.0f, sz = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float dx = x[j] - xi, dy = y[j] - yi, dz = z[j] - zi;
        float r2 = dx * dx + dy * dy + dz * dz + eps2;
        float inv = 1.0f / sqrtf(r2);
        float s = m[j] * inv * inv * inv;
        sx += s * dx;
        sy += s * dy;
        sz += s * dz;
    }
    ax[i] = sx;
    ay[i] = sy;
    az[i] = sz;
}
"""


@njit(parallel=True)
def nb_nbody(eps2, x, y, z, m, ax, ay, az):
    n = x.shape[0]
    for i in prange(n):
        xi = x[i]
        yi = y[i]
        zi = z[i]
        sx = np.float32(0.0)
        sy = np.float32(0.0)
        sz = np.float32(0.0)
        for j in range(n):
            dx = x[j] - xi
            dy = y[j] - yi
            dz = z[j] - zi
            r2 = dx * dx + dy * dy + dz * dz + eps2
            inv = np.float32(1.0) / np.sqrt(r2)
            s = m[j] * inv * inv * inv
            sx += s * dx
            sy += s * dy
            sz += s * dz
        ax[i] = sx
        ay[i] = sy
        az[i] = sz


# ---- timing -----------------------------------------------------------------


# Between the two peers' turns: both keep worker threads that spin for a
# while after a parallel run before they sleep (Tack's for 50 us, Numba's
# OpenMP workers for up to 300,000 pause instructions), and on two cores one
# peer's spinning workers would take a core from the other's next run. So
# each timed run starts with the other's workers asleep, and its own too.
SETTLE = 0.02


def race(tack_fn, numba_fn, repeat, number=1):
    """Best time per call of each, taken in turns."""
    tack_fn()
    numba_fn()
    t_tack = t_numba = float("inf")
    for _ in range(repeat):
        time.sleep(SETTLE)
        t0 = time.perf_counter()
        for _ in range(number):
            tack_fn()
        t_tack = min(t_tack, (time.perf_counter() - t0) / number)
        time.sleep(SETTLE)
        t0 = time.perf_counter()
        for _ in range(number):
            numba_fn()
        t_numba = min(t_numba, (time.perf_counter() - t0) / number)
    return t_tack, t_numba


def close(got, want, rtol, scale, what):
    """|got - want| <= rtol * scale elementwise, where scale is the sum of the
    magnitudes of the terms: a relative error of the result itself means
    nothing where terms cancel."""
    err = np.abs(np.asarray(got, np.float64) - want) / scale
    assert np.all(err <= rtol), f"{what}: Tack and Numba differ by {err.max():.3g} of the terms' magnitude"


def case_saxpy(quick, repeat):
    n = 1 << (20 if quick else 24)
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(n, dtype=np.float32)
    yn = rng.standard_normal(n, dtype=np.float32)
    a = np.float32(2.5)
    k = tack.Kernel(SAXPY)
    x, y = tack.array(xn), tack.array(yn)
    y_nb = yn.copy()
    k(a, x, y)
    nb_saxpy(a, xn, y_nb)
    close(y.to_numpy(), y_nb, 1e-6, np.abs(a * xn) + np.abs(yn), "saxpy")
    return race(lambda: k(a, x, y), lambda: nb_saxpy(a, xn, y_nb), repeat)


def case_stencil(quick, repeat):
    h = w = 1024 if quick else 4096
    un = np.random.default_rng(1).standard_normal((h, w), dtype=np.float32)
    k = tack.Kernel(STENCIL)
    u, out = tack.array(un), tack.zeros((h, w), tack.f32)
    out_nb = np.empty_like(un)

    def run_tack():
        k.launch((h, w), h, w, u, out)

    run_tack()
    nb_stencil(un, out_nb)
    scale = np.abs(un) * 4
    scale[1:-1, 1:-1] += np.abs(un[:-2, 1:-1]) + np.abs(un[2:, 1:-1]) + np.abs(un[1:-1, :-2]) + np.abs(un[1:-1, 2:])
    close(out.to_numpy(), out_nb, 1e-6, scale + np.finfo(np.float32).tiny, "stencil")
    return race(run_tack, lambda: nb_stencil(un, out_nb), repeat)


def case_mandelbrot(quick, repeat):
    w = h = 512 if quick else 1024
    iters = 200
    k = tack.Kernel(MANDELBROT)
    out = tack.zeros(w * h, tack.i32)
    out_nb = np.zeros(w * h, np.int32)
    k(w, h, iters, out)
    nb_mandelbrot(w, h, iters, out_nb)
    got = out.to_numpy()
    differ = np.count_nonzero(got != out_nb)
    assert differ <= 0.001 * got.size, f"mandelbrot: {differ} of {got.size} points differ"
    assert differ == 0 or np.max(np.abs(got - out_nb)) <= 5, "mandelbrot: a point differs by more than 5 iterations"
    return race(lambda: k(w, h, iters, out), lambda: nb_mandelbrot(w, h, iters, out_nb), repeat)


def histogram_vs_numba(quick, repeat, source, imported):
    """The 256-bin histogram through `source` against Numba's per-thread
    one: on Tack memory, or with `imported` on NumPy memory passed to the
    kernel directly (memory others may write, where plain atomics never
    apply)."""
    n = 10**6 if quick else 10**7
    vn = np.random.default_rng(2).integers(0, 256, n, dtype=np.uint8)
    threads = numba.get_num_threads()
    k = tack.Kernel(source)
    v, bins = (vn, np.zeros(256, np.uint32)) if imported else (tack.array(vn), tack.zeros(256, tack.u32))
    bins_nb = np.zeros(256, np.uint32)

    def run_tack():
        bins.fill(0)
        k.launch(n, v, bins)

    def run_numba():
        bins_nb.fill(0)
        nb_histogram(vn, bins_nb, threads)

    run_tack()
    run_numba()
    want = np.bincount(vn, minlength=256)
    # A copy: an export would make Tack's memory shared, where plain atomics never apply.
    got = bins if imported else bins.to_numpy()
    assert np.array_equal(got, want), "histogram: Tack's differs from np.bincount"
    assert np.array_equal(bins_nb, want), "histogram: Numba's differs from np.bincount"
    return race(run_tack, run_numba, repeat)


def case_histogram(quick, repeat):
    return histogram_vs_numba(quick, repeat, HISTOGRAM, imported=False)


def case_dot(quick, repeat):
    n = 1 << (20 if quick else 24)
    rng = np.random.default_rng(3)
    xn = rng.standard_normal(n, dtype=np.float32)
    yn = rng.standard_normal(n, dtype=np.float32)
    k = tack.Kernel(DOT)
    x, y, out = tack.array(xn), tack.array(yn), tack.zeros(1, tack.f32)

    def run_tack():
        out.fill(0)
        k.launch(n, x, y, out)

    run_tack()
    close(out.to_numpy()[0], np.dot(xn.astype(np.float64), yn), 1e-5, np.abs(xn) @ np.abs(yn), "dot")
    return race(run_tack, lambda: np.dot(xn, yn), repeat)


def case_histogram_imported(quick, repeat):
    return histogram_vs_numba(quick, repeat, HISTOGRAM_REDUCE, imported=True)


def case_histogram_reduce_owned(quick, repeat):
    """tack_reduce_add against tack_atomic_add, both on tack.zeros memory.
    The atomics' side is fast only where the scheduling policy runs it on
    one thread with plain atomics; taken in turns with another kernel's
    launches it has run locked instead (4 ms against 37 to 50 ms for 10^7
    values on the two-core machine, from run to run)."""
    n = 10**6 if quick else 10**7
    vn = np.random.default_rng(2).integers(0, 256, n, dtype=np.uint8)
    k, atomics = tack.Kernel(HISTOGRAM_REDUCE), tack.Kernel(HISTOGRAM)
    v, bins, bins_at = tack.array(vn), tack.zeros(256, tack.u32), tack.zeros(256, tack.u32)

    def run_tack():
        bins.fill(0)
        k.launch(n, v, bins)

    def run_atomics():
        bins_at.fill(0)
        atomics.launch(n, v, bins_at)

    run_tack()
    run_atomics()
    want = np.bincount(vn, minlength=256)
    assert np.array_equal(bins.to_numpy(), want), "histogram (reduce, owned): Tack's differs from np.bincount"
    assert np.array_equal(bins_at.to_numpy(), want), "histogram (atomics): Tack's differs from np.bincount"
    return race(run_tack, run_atomics, repeat)


def case_nbody(quick, repeat):
    n = 1024 if quick else 4096
    rng = np.random.default_rng(3)
    pos = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    mn = rng.uniform(0.5, 1.5, n).astype(np.float32)
    eps2 = np.float32(1e-3)
    k = tack.Kernel(NBODY)
    x, y, z, m = (tack.array(p) for p in (*pos, mn))
    acc = [tack.zeros(n, tack.f32) for _ in range(3)]
    acc_nb = [np.zeros(n, np.float32) for _ in range(3)]

    def run_tack():
        k(n, eps2, x, y, z, m, *acc)

    def run_numba():
        nb_nbody(eps2, *pos, mn, *acc_nb)

    run_tack()
    run_numba()
    for a, b in zip(acc, acc_nb):
        close(a.to_numpy(), b, 1e-4, np.max(np.abs(b)), "n-body")
    return race(run_tack, run_numba, repeat)


def case_per_call(quick, repeat):
    k = tack.Kernel(SAXPY)
    x, y = tack.zeros(1), tack.zeros(1)
    xn, yn = np.zeros(1, np.float32), np.zeros(1, np.float32)
    a = np.float32(2.0)
    number = 20_000 if quick else 200_000
    return race(lambda: k(a, x, y), lambda: nb_saxpy(a, xn, yn), repeat, number)


# Lines printed after the table.
NOTES = []


def case_per_call_atomic(quick, repeat):
    """The same for the histogram's kernel, whose launches register as
    launches with atomics; Numba has no atomics on the CPU, so its side is
    the saxpy call again. What registering costs is the difference from
    the same kernel written with a plain +=, timed in turns with it."""
    k = tack.Kernel(HISTOGRAM)
    plain = tack.Kernel(HISTOGRAM.replace("tack_atomic_add(&bins[v[i]], 1u)", "bins[v[i]] += 1u"))
    v, bins = tack.zeros(1, tack.u8), tack.zeros(256, tack.u32)
    xn, yn = np.zeros(1, np.float32), np.zeros(1, np.float32)
    a = np.float32(2.0)
    number = 20_000 if quick else 200_000
    t_atomic, t_plain = race(lambda: k.launch(1, v, bins), lambda: plain.launch(1, v, bins), repeat, number)
    NOTES.append(f"a 1-element call of the histogram's kernel: {fmt(t_atomic).strip()} with atomics, "
                 f"{fmt(t_plain).strip()} with a plain +=")
    return race(lambda: k.launch(1, v, bins), lambda: nb_saxpy(a, xn, yn), repeat, number)


COLD = r"""
import sys, time
import numpy as np
import tack
from numba import njit, prange

salt = sys.argv[1]
x = np.ones(1 << 16, np.float32)
y = np.zeros(1 << 16, np.float32)
tx, ty = tack.array(x), tack.array(y)

# One kernel of each first, so that neither pays its one-time start-up in
# the timed compile below.
def warm(x, y):
    for i in prange(x.shape[0]):
        y[i] = x[i]
njit(parallel=True)(warm)(x, y)
tack.Kernel("void warm(tack_index i, const float *x, float *y) { y[i] = x[i]; }")(tx, ty)

t0 = time.perf_counter()
k = tack.Kernel("void f(tack_index i, const float *x, float *y) { y[i] = 3.0f * x[i] + " + salt + ".0f; }")
k(tx, ty)
t_tack = time.perf_counter() - t0

src = "def f(x, y):\n    for i in prange(x.shape[0]):\n        y[i] = np.float32(3.0) * x[i] + np.float32(" + salt + ")\n"
scope = {"np": np, "prange": prange}
exec(src, scope)
t0 = time.perf_counter()
njit(parallel=True)(scope["f"])(x, y)
t_numba = time.perf_counter() - t0
print(t_tack, t_numba)
"""


def case_cold(quick, repeat):
    """Compile a kernel neither has seen (a new constant each time) and run it
    once, in a fresh process with an empty Tack cache."""
    runs = 3 if quick else 5
    t_tack = t_numba = float("inf")
    with tempfile.TemporaryDirectory(prefix="tack-bench-cache-") as cache:
        env = dict(os.environ, TACK_CACHE_DIR=cache, NUMBA_CACHE_DIR=cache)
        for r in range(runs):
            salt = str(time.time_ns() % 1000003 + r)
            out = subprocess.run([sys.executable, "-c", COLD, salt], check=True, env=env, capture_output=True, text=True)
            a, b = (float(v) for v in out.stdout.split())
            t_tack, t_numba = min(t_tack, a), min(t_numba, b)
    return t_tack, t_numba


CASES = [
    ("saxpy, 2^24 float32", "saxpy 2^20", case_saxpy, 1.0),
    ("stencil, 4096 x 4096 float32", "stencil 1024^2", case_stencil, 0.9),
    ("Mandelbrot, 2^20 points x 200", "Mandelbrot 2^18", case_mandelbrot, 1.0),
    ("histogram, 10^7 values, 256 bins", "histogram 10^6", case_histogram, 3.0),
    ("n-body step, 4096 bodies", "n-body 1024", case_nbody, 0.9),
    ("call over 1 element", "call over 1 element", case_per_call, 0.3),
    ("call over 1 element, atomics", "call over 1 element, atomics", case_per_call_atomic, 0.3),
    ("cold compile + first call", "cold compile", case_cold, 0.3),
    ("dot 2^24 f32, reduce (vs np.dot)", "dot 2^20, reduce (vs np.dot)", case_dot, 1.3),
    ("histogram 10^7, reduce, imported", "histogram 10^6, reduce, imported", case_histogram_imported, 1.0),
    ("histogram 10^7, reduce (vs atomics)", "histogram 10^6, reduce (vs atomics)", case_histogram_reduce_owned, 1.0),
]


def fmt(t):
    return f"{t * 1e3:9.3f} ms" if t >= 1e-4 else f"{t * 1e6:9.3f} us"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller problems, fewer repeats")
    parser.add_argument("cases", nargs="*", help="run only the cases whose name contains one of these words")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 11
    print(
        f"tack {tack.__version__}, numba {numba.__version__}, numpy {np.__version__}, {os.cpu_count()} cores; "
        f"threads: tack {os.environ.get('TACK_NUM_THREADS', 'all cores')}, numba {numba.get_num_threads()}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'case':<36} {'tack':>12} {'numba':>12} {'ratio':>7} {'target':>8}")
    missed = 0
    for full, small, fn, target in CASES:
        name = small if args.quick else full
        if args.cases and not any(w.lower() in name.lower() for w in args.cases):
            continue
        t_tack, t_numba = fn(args.quick, repeat)
        ratio = t_tack / t_numba
        ok = ratio <= target
        missed += not ok
        print(f"{name:<36} {fmt(t_tack)} {fmt(t_numba)} {ratio:6.2f}x {'<= ' + str(target) + 'x':>8} {'PASS' if ok else 'MISS'}")
    for note in NOTES:
        print(note)
    try:
        print(f"numba threading layer: {numba.threading_layer()}")
    except ValueError:  # no parallel function ran
        pass
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
