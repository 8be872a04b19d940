"""Reductions: tack_reduce_add, _min and _max add every contribution to its
target by the end of the launch, in an unspecified order, on any memory
(Tack's own, NumPy's passed directly, memory another process maps).

The CPU cases run in child processes with a timeout, since a wrong flush
could write where it must not; the GPU dialects, which the simulated
drivers do not execute, are checked by compiling the generated source with
the real compilers this machine has (NVRTC, hipRTC, clang's OpenCL C)."""

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tack
from children import run_python
from conftest import nvrtc_or_skip

pytestmark = pytest.mark.usefixtures("private_kernel_cache")

HIST = "void hist(tack_index i, const uint8_t *v, uint32_t *bins) { tack_reduce_add(&bins[v[i]], 1u); }"


def run_child(script, args=(), env=None, timeout=240):
    """run_python, with HIST in `script` standing for the histogram's source."""
    return run_python(textwrap.dedent(script).replace("HIST", repr(HIST)), args, env, timeout)


def child_ok(script, args=()):
    """Runs `script` in a child interpreter, which must print ok last."""
    assert run_child(script, args).strip() == "ok"


INTEGERS = """
    import sys, numpy as np, tack
    dt = sys.argv[1]
    T = {"int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t"}[dt]
    k = tack.Kernel(f'''
    void red(tack_index i, const {T} *v, {T} *s, {T} *lo, {T} *hi, {T} *bins)
    {{
        tack_reduce_add(&s[0], v[i]);
        tack_reduce_min(&lo[0], v[i]);
        tack_reduce_max(&hi[0], v[i]);
        tack_reduce_add(&bins[(v[i] % 997 + 997) % 997], ({T})1);
    }}''')
    rng = np.random.default_rng(7)
    info = np.iinfo(dt)
    for n in (1, 1000, 1_000_003):
        # the whole range: sums wrap, as the atomics' do
        v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        s, lo, hi = np.full(1, 5, dt), np.array([info.max], dt), np.array([info.min], dt)
        bins = np.zeros(997, dt)
        k.launch(n, v, s, lo, hi, bins)
        with np.errstate(over="ignore"):
            want = np.sum(v, dtype=dt) + np.asarray(5, dt)
        assert s[0] == want, (dt, n, s[0], want)
        assert lo[0] == v.min() and hi[0] == v.max(), (dt, n)
        idx = (np.fmod(v, 997).astype(np.int64) + 997) % 997
        assert np.array_equal(bins.astype(np.int64), np.bincount(idx, minlength=997)), (dt, n)
    print("ok")
"""


@pytest.mark.parametrize("dt", ["int32", "uint32", "int64", "uint64"])
def test_integer_sums_mins_and_maxes_are_exact(dt):
    child_ok(INTEGERS, [dt])


def test_a_histogram_of_many_bins_is_exact():
    # 100,003 bins: most targets fall outside the range's window and past
    # its table, which flushes as it goes.
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel("void h(tack_index i, const int64_t *v, int64_t *bins) { tack_reduce_add(&bins[v[i]], (int64_t)1); }")
        v = np.random.default_rng(1).integers(0, 100003, 2_000_000)
        bins = tack.zeros(100003, tack.i64)
        k.launch(v.size, v, bins)
        assert np.array_equal(bins.to_numpy(), np.bincount(v, minlength=100003))
        print("ok")
    """)


# --------------------------------------------------------------------------
# floating point


def test_float_sums_within_tolerance_and_mins_maxes_exact():
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel('''
        void red(tack_index i, const float *x, const double *y, float *s, double *d, float *fm, double *dm)
        {
            tack_reduce_add(&s[0], x[i]);
            tack_reduce_add(&d[0], y[i]);
            tack_reduce_min(&fm[0], x[i]);
            tack_reduce_max(&fm[1], x[i]);
            tack_reduce_min(&dm[0], y[i]);
            tack_reduce_max(&dm[1], y[i]);
        }''')
        rng = np.random.default_rng(3)
        n = 3_000_001
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n)
        s, d = np.zeros(1, np.float32), np.zeros(1)
        fm, dm = np.array([np.inf, -np.inf], np.float32), np.array([np.inf, -np.inf])
        k.launch(n, x, y, s, d, fm, dm)
        scale = np.abs(x).astype(np.float64).sum()
        assert abs(s[0] - x.astype(np.float64).sum()) <= 1e-5 * scale, (s[0], x.astype(np.float64).sum())
        assert abs(d[0] - y.sum()) <= 1e-12 * np.abs(y).sum()
        assert fm[0] == x.min() and fm[1] == x.max()
        assert dm[0] == y.min() and dm[1] == y.max()
        print("ok")
    """)


# NaN: min and max ignore it, as np.fmin and np.fmax do; the target takes
# part as one more value, so an all-NaN input leaves it as it was, and a NaN
# target takes the numbers' min or max. Kernels through each of the cpu's
# paths: the table in the kernel's body, the atomics in a helper it calls
# (the direct path), each checked and not; one thread (the plain copy) and
# several, in child processes.
NAN = """
    import numpy as np, tack
    BODY = '''
    void red(tack_index i, const T *x, T *lo, T *hi) { tack_reduce_min(&lo[0], x[i]); tack_reduce_max(&hi[0], x[i]); }'''
    HELPER = '''
    static void both(T *lo, T *hi, T v) { tack_reduce_min(lo, v); tack_reduce_max(hi, v); }
    void red(tack_index i, const T *x, T *lo, T *hi) { both(&lo[0], &hi[0], x[i]); }'''
    sizes = (1, 2, 3, 4, 5, 8, 63, 64, 65, 255, 256, 257, 1000, 4097, 65536)
    rng = np.random.default_rng(11)
    for dt, T in ((np.float32, "float"), (np.float64, "double")):
        for path, src in (("body", BODY), ("helper", HELPER)):
            for checked in (False, True):
                k = tack.Kernel(src.replace("T ", T + " ").replace("T *", T + " *"), checked=checked)
                for n in sizes:
                    base = rng.uniform(-100, 100, n).astype(dt)
                    cases = {"first": [0], "last": [n - 1], "all": slice(None), "even": slice(0, None, 2),
                             "front": slice(0, (n + 1) // 2)}
                    for name, where in cases.items():
                        x = base.copy()
                        x[where] = np.nan
                        for init in ("inf", "nan", "7"):
                            lo0 = {"inf": np.inf, "nan": np.nan, "7": 7.0}[init]
                            hi0 = {"inf": -np.inf, "nan": np.nan, "7": 7.0}[init]
                            lo, hi = np.array([lo0], dt), np.array([hi0], dt)
                            k.launch(n, x, lo, hi)
                            want_lo = np.fmin.reduce(np.concatenate([[lo0], x]).astype(dt))
                            want_hi = np.fmax.reduce(np.concatenate([[hi0], x]).astype(dt))
                            what = (T, path, checked, n, name, init, lo[0], want_lo, hi[0], want_hi)
                            assert np.array_equal(lo, [want_lo], equal_nan=True), what
                            assert np.array_equal(hi, [want_hi], equal_nan=True), what
    print("ok")
"""


@pytest.mark.parametrize("threads", ["1", "4"])
def test_min_and_max_ignore_nan_as_fmin_and_fmax(threads):
    out = run_python(NAN, env={"TACK_NUM_THREADS": threads}, timeout=600)
    assert out.strip() == "ok"


def test_gpu_dialects_ignore_nan_in_min_and_max_too():
    # The same rule in CUDA's and HIP's combining and compare-and-swap, and
    # OpenCL C's: a NaN contribution gives up, a NaN target is replaced
    # (compiled with the real compilers by the cases below).
    k = tack.Kernel(DEVICE)
    for backend in ("cuda", "hip"):
        src = k.generated_source(backend)
        assert "OP == 1 ? (b < a || a != a ? b : a) : (b > a || a != a ? b : a)" in src, backend
        assert "if (v != v) return; U *q = (U *)p, old = *q, seen; " in src, backend
        assert "while ((OP == 1 ? v < from(old) : v > from(old)) || from(old) != from(old))" in src, backend
    src = k.generated_source("level_zero")
    assert "if (v != v) return; while (v cmp as_t(old) || as_t(old) != as_t(old))" in src


def test_a_dot_product():
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel("void dot(tack_index i, const float *x, const float *y, float *out) "
                        "{ tack_reduce_add(&out[0], x[i] * y[i]); }")
        rng = np.random.default_rng(4)
        n = 1 << 22
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        want = np.dot(x.astype(np.float64), y)
        scale = np.abs(x).astype(np.float64) @ np.abs(y)
        for out in (tack.zeros(1, tack.f32), np.zeros(1, np.float32)):
            k.launch(n, x, y, out)
            got = float(np.asarray(out)[0]) if isinstance(out, np.ndarray) else float(out.to_numpy()[0])
            assert abs(got - want) <= 1e-6 * scale, (got, want)
        print("ok")
    """)


TWO_AND_THREE = """
    import numpy as np, tack
    k2 = tack.Kernel('''
    void rows(tack_index i, tack_index j, int64_t w, const float *a, double *rowsum, int32_t *count)
    {
        tack_reduce_add(&rowsum[i], (double)a[i * w + j]);
        tack_reduce_add(&count[0], 1);
        tack_reduce_max(&count[1], (int32_t)j);
    }''')
    k3 = tack.Kernel('''
    void cube(tack_index i, tack_index j, tack_index k, float *s)
    {
        tack_reduce_add(&s[k], 1.0f);
        tack_reduce_min(&s[3], (float)(i + j + k));
    }''')
    a = np.random.default_rng(8).standard_normal((301, 517)).astype(np.float32)
    rowsum, count = np.zeros(301), np.zeros(2, np.int32)
    k2.launch(a.shape, a.shape[1], a, rowsum, count)
    assert np.allclose(rowsum, a.astype(np.float64).sum(axis=1), rtol=0, atol=1e-9)
    assert count.tolist() == [a.size, 516]
    s = np.array([0, 0, 0, 5], np.float32)
    k3.launch((7, 9, 3), s)
    assert s.tolist() == [63.0, 63.0, 63.0, 0.0]
    print("ok")
"""


def test_two_and_three_index_kernels_reduce_too():
    child_ok(TWO_AND_THREE)


# --------------------------------------------------------------------------
# any memory


def test_histogram_into_numpy_memory_passed_directly_is_exact():
    # The counts land in the NumPy array itself, and in a from_dlpack view
    # of another one (the same memory: pointer identity).
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel(HIST)
        v = np.random.default_rng(5).integers(0, 256, 10**6, dtype=np.uint8)
        want = np.bincount(v, minlength=256)
        bins = np.zeros(256, np.uint32)
        k.launch(v.size, v, bins)
        assert np.array_equal(bins, want)
        other = np.zeros(256, np.uint32)
        view = tack.from_dlpack(other)
        assert view.ptr == other.ctypes.data
        k.launch(v.size, tack.from_dlpack(v), view)
        k.launch(v.size, v, view)
        assert np.array_equal(other, 2 * want)
        print("ok")
    """)


def test_concurrent_launches_from_two_threads_on_one_target():
    # Two threads, each launching reductions into the same targets: Tack's
    # memory (where a launch on one thread may take plain updates) and
    # NumPy's; a third launches the tack_atomic_add histogram into Tack's.
    child_ok("""
        import threading, numpy as np, tack
        k = tack.Kernel(HIST)
        a = tack.Kernel(HIST.replace("tack_reduce_add", "tack_atomic_add"))
        v = np.random.default_rng(6).integers(0, 256, 200_000, dtype=np.uint8)
        tv = tack.array(v)
        owned, shared = tack.zeros(256, tack.u32), np.zeros(256, np.uint32)
        rounds = 40
        def work(kernel, out):
            for _ in range(rounds):
                kernel.launch(v.size, tv, out)
        threads = [threading.Thread(target=work, args=args) for args in
                   ((k, owned), (k, owned), (a, owned), (k, shared), (k, shared))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        want = np.bincount(v, minlength=256)
        assert np.array_equal(owned.to_numpy(), 3 * rounds * want)
        assert np.array_equal(shared, 2 * rounds * want)
        print("ok")
    """)


WORKER = """
    import sys, numpy as np, tack
    k = tack.Kernel(HIST)
    bins = np.memmap(sys.argv[1], dtype=np.uint32, mode="r+", shape=(256,))
    v = np.random.default_rng(int(sys.argv[2])).integers(0, 256, 300_000, dtype=np.uint8)
    sys.stdin.readline()  # start together
    for _ in range(30):
        k.launch(v.size, v, bins)
    print(" ".join(map(str, np.bincount(v, minlength=256))))
"""


def test_two_processes_reduce_into_one_shared_mapping(tmp_path):
    # A file both processes map: each flush is an atomic on memory the other
    # process updates at the same time.
    path = tmp_path / "bins"
    path.write_bytes(bytes(256 * 4))
    script = textwrap.dedent(WORKER).replace("HIST", repr(HIST))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), str(seed)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    try:
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (o, e) in zip(procs, outs):
        assert p.returncode == 0, o + e
    want = sum(np.array(o.split(), np.int64) for o, _ in outs) * 30
    got = np.fromfile(path, dtype=np.uint32)
    assert np.array_equal(got.astype(np.int64), want)


def test_a_reduction_in_a_helper_or_a_macro_still_counts():
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel('''
        static void bump(uint32_t *c) { tack_reduce_add(c, 1u); }
        #define TWICE(p) tack_reduce_add(p, 2u)
        void f(tack_index i, uint32_t *c) { bump(&c[i % 3]); TWICE(&c[3]); }''')
        c = tack.zeros(4, tack.u32)
        k.launch(100_000, c)
        assert c.to_numpy().tolist() == [33334, 33333, 33333, 200000], c.to_numpy()
        print("ok")
    """)


# --------------------------------------------------------------------------
# the window placed at the array the body's sums name


def test_the_array_a_sum_names_holds_the_window_and_others_still_add_up():
    # `small` is the body's first target, so its sums go to the window
    # placed at it from the range's start; `big`'s 100,003 targets of the
    # same type go to the table, which fills and flushes many times in a
    # range: each flush must empty the window and keep it in place, or
    # `small` counts twice.
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel('''
        void h(tack_index i, const int64_t *v, uint32_t *small, uint32_t *big)
        {
            tack_reduce_add(&small[v[i] & 255], 1u);
            tack_reduce_add(&big[v[i]], 1u);
        }''')
        assert "tack_rpin_(tack_rt_, (tack_uptr_)tack_p1_)" in k.generated_source("cpu")
        v = np.random.default_rng(5).integers(0, 100003, 2_000_000)
        small, big = np.zeros(256, np.uint32), np.zeros(100003, np.uint32)
        for _ in range(2):
            small[:] = 0
            big[:] = 0
            k.launch(v.size, v, small, big)
            assert np.array_equal(small, np.bincount(v & 255, minlength=256)), "small"
            assert np.array_equal(big, np.bincount(v, minlength=100003)), "big"
        print("ok")
    """)


def test_sums_through_a_name_that_hides_the_array_reach_their_own_addresses():
    # The window is placed at the parameter `bins`, but the body's `bins` is
    # a local that points elsewhere: into the same buffer after the
    # parameter's elements (inside the window's span) or before them
    # (outside it). Each count must land where the body aimed it.
    child_ok("""
        import numpy as np, tack
        k = tack.Kernel('''
        void h(tack_index i, const uint8_t *v, uint32_t *bins, uint32_t *other)
        {
            uint32_t *keep = bins;
            {
                uint32_t *bins = other;
                tack_reduce_add(&bins[v[i]], 1u);
            }
            tack_reduce_add(&keep[v[i] & 7], 2u);
        }''')
        v = np.random.default_rng(6).integers(0, 256, 1_000_003, dtype=np.uint8)
        want_other = np.bincount(v, minlength=256)
        want_bins = 2 * np.bincount(v & 7, minlength=8)
        for first, second in ((slice(0, 8), slice(8, 264)), (slice(256, 264), slice(0, 256))):
            buf = np.zeros(264, np.uint32)
            k.launch(v.size, v, buf[first], buf[second])
            assert np.array_equal(buf[first], want_bins), (first, buf[first])
            assert np.array_equal(buf[second], want_other), (second,)
        print("ok")
    """)


def test_which_array_holds_the_window():
    def pinned(src):
        text = tack.Kernel(src).generated_source("cpu")
        return [line.strip() for line in text.splitlines() if "tack_rpin_(tack_rt_" in line][:1]

    assert pinned(HIST) == ["tack_rpin_(tack_rt_, (tack_uptr_)tack_p1_);"]
    # the first sum's target: not a min's, nor one in a group the compiler skips
    assert pinned("""
        void f(tack_index i, const float *x, float *lo, double *s, float *t)
        {
            tack_reduce_min(&lo[0], x[i]);
        #if 0
            tack_reduce_add(&t[0], x[i]);
        #endif
            tack_reduce_add(&s[i % 4], (double)x[i]);
            tack_reduce_add(&t[0], x[i]);
        }""") == ["tack_rpin_(tack_rt_, (tack_uptr_)tack_p2_);"]
    # written as y + e too
    assert pinned("void f(tack_index i, uint32_t *c) { tack_reduce_add(c + i % 3, 1u); }") == [
        "tack_rpin_(tack_rt_, (tack_uptr_)tack_p0_);"]
    # none: a target through a pointer of the body's own, or no sum at all
    assert pinned("void f(tack_index i, uint32_t *c) { uint32_t *q = c + 1; tack_reduce_add(q, 1u); }") == []
    assert pinned("void f(tack_index i, const float *x, float *lo) { tack_reduce_min(&lo[0], x[i]); }") == []


def test_kernels_that_read_extents_or_are_checked_reduce_through_the_table():
    # tack_extent's hidden parameters (and a checked kernel's record) and
    # the table's leading ones in one copy.
    src = """
    void colsum(tack_index i, const int32_t *m, int64_t *sums)
    {
        for (tack_index j = 0; j < tack_extent(m, 1); j++)
            tack_reduce_add(&sums[j], (int64_t)m[i * tack_extent(m, 1) + j]);
        tack_reduce_max(&sums[tack_extent(m, 1)], (int64_t)tack_size(m));
    }"""
    assert "tack_rtab_ tack_rtab_v_" in tack.Kernel(src).generated_source("cpu")
    assert "tack_rtab_ tack_rtab_v_" in tack.Kernel(src, checked=True).generated_source("cpu")
    child_ok("""
        import sys, numpy as np, tack
        m = np.random.default_rng(4).integers(-1000, 1000, (300_001, 5), dtype=np.int32)
        for checked in (False, True):
            k = tack.Kernel(sys.argv[1], checked=checked)
            sums = np.zeros(6, np.int64)
            k.launch(m.shape[0], m, sums)
            assert sums[:5].tolist() == m.sum(0, dtype=np.int64).tolist(), sums
            assert sums[5] == m.size
        # A target out of bounds: reported, its contribution dropped, the rest counted.
        sums = np.zeros(5, np.int64)
        try:
            k.launch(m.shape[0], m, sums)
            raise SystemExit("sums[5] was not reported")
        except IndexError as e:
            assert "index 5 of parameter 'sums'" in str(e), e
        assert sums.tolist() == m.sum(0, dtype=np.int64).tolist(), sums
        print("ok")
    """, [src])


def test_only_a_kernel_with_reductions_gets_the_table():
    saxpy = tack.Kernel("void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }")
    assert "tack_rtab_" not in saxpy.generated_source("cpu")
    # a name in a comment or a string is not a reduction
    quoted = tack.Kernel('/* tack_reduce_add */ void q(tack_index i, uint8_t *y) '
                         '{ y[i] = (uint8_t)"tack_reduce_add"[0]; }')
    assert "tack_rtab_" not in quoted.generated_source("cpu")
    assert "tack_rtab_" in tack.Kernel(HIST).generated_source("cpu")


def test_a_const_target_does_not_compile():
    with pytest.raises(RuntimeError, match="failed to compile"):
        tack.Kernel("void f(tack_index i, const float *x, float *y) { tack_reduce_add(&x[0], 1.0f); y[i] = 0; }")


# --------------------------------------------------------------------------
# the GPU dialects, compiled by real compilers


DEVICE = """
void red(tack_index i, const float *x, int32_t *a, uint32_t *b, int64_t *c, uint64_t *d, float *e, double *f)
{
    float v = x[i];
    tack_reduce_add(&a[i % 4], 1);
    tack_reduce_add(&b[0], 1u);
    tack_reduce_add(&c[0], (int64_t)i);
    tack_reduce_add(&d[0], (uint64_t)i);
    tack_reduce_add(&e[0], v);
    tack_reduce_add(&f[0], (double)v);
    tack_reduce_min(&a[5], (int32_t)i);
    tack_reduce_max(&b[1], (uint32_t)i);
    tack_reduce_min(&c[1], -(int64_t)i);
    tack_reduce_max(&d[1], (uint64_t)i);
    tack_reduce_min(&e[1], v);
    tack_reduce_max(&f[1], (double)v);
}
"""


@pytest.mark.parametrize("arch", [None, "compute_90"])
def test_cuda_reductions_are_warp_aggregated(arch):
    nvrtc_or_skip()
    k = tack.Kernel(DEVICE)
    assert "__match_any_sync" in k.generated_source("cuda")
    ptx = k.ptx(arch)
    body = ptx[ptx.index(".entry tack_kernel_entry"):]
    # lanes with one target found and combined, then one atomic each
    assert "match.any.sync" in body and "shfl.sync" in body
    for op in ("atom.global.add.u32", "atom.global.add.u64", "atom.global.add.f32", "atom.global.add.f64",
               "atom.global.min.s32", "atom.global.max.u32", "atom.global.min.s64", "atom.global.max.u64",
               "atom.global.cas.b32", "atom.global.cas.b64"):
        assert op in body, op


def test_hip_reductions_compile_with_hiprtc():
    from test_kernels_nd import hiprtc_compile, hiprtc_or_skip

    lib = hiprtc_or_skip()
    src = tack.Kernel(DEVICE).generated_source("hip")
    assert "tack_reduce_<0>" in src
    result, log = hiprtc_compile(lib, src)
    assert result == 0, log


def test_opencl_reductions_compile_with_clang():
    clang = shutil.which("clang")
    if not clang:
        pytest.skip("no clang here (Debian: clang)")
    src = tack.Kernel(DEVICE).generated_source("level_zero")
    assert "tack_rpick_min" in src
    out = subprocess.run(
        [clang, "-x", "cl", "-cl-std=CL2.0", "-Xclang", "-finclude-default-header", "-target", "spir64",
         "-fsyntax-only", "-Werror=implicit-function-declaration", "-"],
        input=src, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
