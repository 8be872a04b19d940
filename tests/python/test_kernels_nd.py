"""Kernels over 2-D and 3-D index domains, the portable atomics, and the CPU
build's variants (code for the host CPU, a restrict variant used only for
launches whose written arrays overlap nothing else), on the CPU backend,
against NumPy."""

import subprocess
import sys

import numpy as np
import pytest

import tack
from children import run_python
from conftest import nvrtc_or_skip


pytestmark = pytest.mark.usefixtures("private_kernel_cache")


def run_child(script, env=None, args=(), timeout=120):
    return run_python(script, args, env, timeout)


COORDS2 = """
void coords(tack_index i, tack_index j, int64_t w, int64_t *out, uint32_t *hits)
{
    out[i * w + j] = i * 100000 + j;
    hits[i * w + j] += 1;
}
"""

COORDS3 = """
void coords(tack_index i, tack_index j, tack_index k, int64_t h, int64_t w, int64_t *out, uint32_t *hits)
{
    tack_index at = (i * h + j) * w + k;
    out[at] = (i * 1000 + j) * 1000 + k;
    hits[at] += 1;
}
"""


def expected2(h, w):
    i, j = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return (i * 100000 + j).ravel()


def expected3(d, h, w):
    i, j, k = np.meshgrid(np.arange(d), np.arange(h), np.arange(w), indexing="ij")
    return ((i * 1000 + j) * 1000 + k).ravel()


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (1, 100003), (100003, 1), (257, 129), (1024, 1024)])
def test_2d_launch_covers_every_index_once(shape):
    h, w = shape
    k = tack.Kernel(COORDS2)
    out, hits = tack.zeros(h * w, tack.i64), tack.zeros(h * w, tack.u32)
    k.launch((h, w), w, out, hits)
    assert np.array_equal(out.to_numpy(), expected2(h, w))
    assert (hits.to_numpy() == 1).all()


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 5), (1, 1, 70001), (70001, 1, 1), (3, 70001, 1), (64, 65, 66)])
def test_3d_launch_covers_every_index_once(shape):
    d, h, w = shape
    k = tack.Kernel(COORDS3)
    out, hits = tack.zeros(d * h * w, tack.i64), tack.zeros(d * h * w, tack.u32)
    k.launch(shape, h, w, out, hits)
    assert np.array_equal(out.to_numpy(), expected3(d, h, w))
    assert (hits.to_numpy() == 1).all()


@pytest.mark.parametrize(
    "env",
    [{"TACK_NUM_THREADS": "1"}, {"TACK_SERIAL_BELOW": "0"}, {"TACK_NUM_THREADS": "3", "TACK_SERIAL_BELOW": "0"}],
    ids=["serial", "always-parallel", "3-threads"],
)
def test_nd_chunks_split_rows_anywhere(env):
    """The pool splits the flattened domain where it likes, also inside a
    row: every index still runs once, with the right coordinates."""
    script = """
        import sys
        import numpy as np, tack
        k2 = tack.Kernel(sys.argv[1])
        k3 = tack.Kernel(sys.argv[2])
        for h, w in ((7, 3), (2, 50001), (3001, 17)):
            out, hits = tack.zeros(h * w, tack.i64), tack.zeros(h * w, tack.u32)
            for _ in range(3):
                k2.launch((h, w), w, out, hits)
            i, j = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            assert (out.to_numpy() == (i * 100000 + j).ravel()).all(), (h, w)
            assert (hits.to_numpy() == 3).all(), (h, w)
        for d, h, w in ((3, 5, 7), (2, 3, 20011), (401, 3, 5)):
            out, hits = tack.zeros(d * h * w, tack.i64), tack.zeros(d * h * w, tack.u32)
            for _ in range(3):
                k3.launch((d, h, w), h, w, out, hits)
            i, j, l = np.meshgrid(np.arange(d), np.arange(h), np.arange(w), indexing="ij")
            assert (out.to_numpy() == ((i * 1000 + j) * 1000 + l).ravel()).all(), (d, h, w)
            assert (hits.to_numpy() == 3).all(), (d, h, w)
        print("ok")
    """
    assert run_child(script, env, (COORDS2, COORDS3)).split() == ["ok"]


def test_call_without_a_shape_takes_the_first_writable_arrays_shape():
    k = tack.Kernel(
        "void k(tack_index i, tack_index j, const float *a, float *out) { out[i * 6 + j] = a[i * 6 + j] * 2.0f; }"
    )
    a = tack.array(np.arange(24, dtype=np.float32).reshape(4, 6))
    out = tack.zeros((4, 6), tack.f32)
    k(a, out)
    assert np.array_equal(out.to_numpy(), np.arange(24, dtype=np.float32).reshape(4, 6) * 2)


def test_call_without_a_shape_needs_an_array_of_the_domains_rank():
    k = tack.Kernel("void k(tack_index i, tack_index j, float *out) { out[i] = (float)j; }")
    with pytest.raises(ValueError, match=r"2 indices.*1-D.*launch\(\(h, w\)"):
        k(tack.zeros(8, tack.f32))


def test_one_index_launch_keeps_its_meaning():
    k = tack.Kernel("void k(tack_index i, int64_t *out) { out[i] = i; }")
    out = tack.zeros(10, tack.i64)
    k.launch(10, out)
    assert np.array_equal(out.to_numpy(), np.arange(10))
    out2 = tack.zeros(10, tack.i64)
    k.launch((10,), out2)
    assert np.array_equal(out2.to_numpy(), np.arange(10))
    k.launch([5], out2 := tack.zeros(10, tack.i64))
    assert np.array_equal(out2.to_numpy(), np.r_[np.arange(5), np.zeros(5)])


def test_introspection_names_every_index():
    k = tack.Kernel(COORDS3)
    assert k.ndim == 3
    assert k.signature == (
        "coords(tack_index i, tack_index j, tack_index k, int64_t h, int64_t w, int64_t *out, uint32_t *hits)"
    )
    assert [p[0] for p in k.params] == ["h", "w", "out", "hits"]
    assert tack.Kernel("void f(tack_index i, float *y) { y[i] = 1.0f; }").ndim == 1


def test_more_than_three_indices_is_refused():
    with pytest.raises(ValueError, match="at most 3 index parameters"):
        tack.Kernel("void f(tack_index a, tack_index b, tack_index c, tack_index d, float *y) { y[a] = 1.0f; }")


@pytest.mark.parametrize(
    "shape, exc, match",
    [
        (10, ValueError, r"2 indices.*a shape of 2 extents"),
        ((10,), ValueError, r"2 indices.*a shape of 2 extents"),
        ((2, 3, 4), ValueError, r"2 indices.*a shape of 2 extents"),
        ((2, -1), ValueError, r"extent -1.*>= 0"),
        ((2, 2.0), TypeError, "integers"),
        ("ab", TypeError, "an integer or a tuple"),
        ((1 << 40, 1 << 40), ValueError, "more than 2\\^63"),
    ],
)
def test_bad_shapes_run_nothing(shape, exc, match):
    k = tack.Kernel("void k(tack_index i, tack_index j, uint32_t *hits) { hits[0] += 1; }")
    hits = tack.zeros(1, tack.u32)
    with pytest.raises(exc, match=match):
        k.launch(shape, hits)
    assert hits.to_numpy()[0] == 0


def test_an_empty_extent_runs_nothing():
    k = tack.Kernel("void k(tack_index i, tack_index j, uint32_t *hits) { hits[0] += 1; }")
    hits = tack.zeros(1, tack.u32)
    k.launch((0, 5), hits)
    k.launch((5, 0), hits)
    assert hits.to_numpy()[0] == 0


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


def test_2d_stencil_matches_numpy():
    """Within 4 float32 epsilons of the sum of the terms' magnitudes (four
    roundings, and the compiler may contract the multiply-add into one fused
    operation, which rounds once)."""
    h, w = 301, 517
    un = np.random.default_rng(0).standard_normal((h, w), dtype=np.float32)
    k = tack.Kernel(STENCIL)
    out = tack.zeros((h, w), tack.f32)
    k(h, w, tack.array(un), out)
    want = np.zeros((h, w), np.float64)
    u64 = un.astype(np.float64)
    want[1:-1, 1:-1] = u64[:-2, 1:-1] + u64[2:, 1:-1] + u64[1:-1, :-2] + u64[1:-1, 2:] - 4 * u64[1:-1, 1:-1]
    scale = 4 * np.abs(u64) + np.finfo(np.float32).tiny
    a = np.abs(u64)
    scale[1:-1, 1:-1] += a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
    assert np.all(np.abs(out.to_numpy() - want) <= 4 * np.finfo(np.float32).eps * scale)


# --------------------------------------------------------------------------
# atomics

ATOMIC_TYPES = [("int32", "int32_t"), ("uint32", "uint32_t"), ("int64", "int64_t"), ("uint64", "uint64_t"),
                ("float32", "float"), ("float64", "double")]


@pytest.mark.parametrize("dtype, ctype", ATOMIC_TYPES)
def test_atomic_add_of_every_type_loses_nothing(dtype, ctype):
    """Every index adds into the same few elements from all threads; the
    values are small integers, so float sums are exact too. The old value
    each add returns is distinct per element: each add saw the one before."""
    n = 200_000
    src = f"""
    void add(tack_index i, const {ctype} *v, {ctype} *sum, {ctype} *old)
    {{
        old[i] = tack_atomic_add(&sum[i % 4], v[i]);
    }}
    """
    k = tack.Kernel(src)
    vn = (np.arange(n) % 3 + 1).astype(dtype)
    v, total, old = tack.array(vn), tack.zeros(4, dtype), tack.zeros(n, dtype)
    k.launch(n, v, total, old)
    want = np.array([vn[r::4].sum(dtype=np.float64) for r in range(4)])
    assert np.array_equal(total.to_numpy().astype(np.float64), want)
    olds = old.to_numpy()
    for r in range(4):
        assert len(np.unique(olds[r::4])) == len(olds[r::4]), "two adds saw the same old value"


@pytest.mark.parametrize("dtype, ctype", [t for t in ATOMIC_TYPES if not t[1].startswith(("float", "double"))])
def test_atomic_min_max_of_every_integer_type(dtype, ctype):
    n = 100_003
    src = f"""
    void mm(tack_index i, const {ctype} *v, {ctype} *lo, {ctype} *hi)
    {{
        tack_atomic_min(&lo[0], v[i]);
        tack_atomic_max(&hi[0], v[i]);
    }}
    """
    info = np.iinfo(dtype)
    vn = np.random.default_rng(1).integers(info.min // 2, info.max // 2, n, dtype=dtype, endpoint=True)
    k = tack.Kernel(src)
    lo, hi = tack.array(np.array([info.max], dtype)), tack.array(np.array([info.min], dtype))
    k.launch(n, tack.array(vn), lo, hi)
    assert lo.to_numpy()[0] == vn.min() and hi.to_numpy()[0] == vn.max()


def test_histogram_of_ten_million_values_across_threads_equals_bincount():
    """Every launch runs on every thread (TACK_SERIAL_BELOW=0), so the
    threads contend for the same 256 counters."""
    script = """
        import numpy as np, tack
        k = tack.Kernel("void h(tack_index i, const uint8_t *v, uint32_t *bins) { tack_atomic_add(&bins[v[i]], 1u); }")
        vn = np.random.default_rng(7).integers(0, 256, 10**7, dtype=np.uint8)
        v, bins = tack.array(vn), tack.zeros(256, tack.u32)
        for _ in range(3):
            k.launch(vn.size, v, bins)
        assert (bins.to_numpy() == 3 * np.bincount(vn, minlength=256)).all()
        print("ok")
    """
    assert run_child(script, {"TACK_SERIAL_BELOW": "0"}).split() == ["ok"]


def test_atomics_are_in_every_backends_source():
    # Generated text, kept: the GPU backends' code cannot run without a GPU
    # (the simulated drivers run host stand-ins; tests/gpu/ runs it for
    # real), and the fault this catches is real there: a generator that
    # left tack_atomic_add a plain read-modify-write would lose counts on a
    # GPU and on nothing here. The CPU's atomics run above.
    k = tack.Kernel("void h(tack_index i, const uint8_t *v, uint32_t *bins) { tack_atomic_add(&bins[v[i]], 1u); }")
    assert "__atomic_fetch_" in k.generated_source("cpu") and "__atomic_compare_exchange" in k.generated_source("cpu")
    assert "atomicAdd" in k.generated_source("cuda")
    assert "atomicAdd" in k.generated_source("hip")
    assert "atomic_add" in k.generated_source("level_zero")


# --------------------------------------------------------------------------
# the restrict variant

TWICE = """
void twice(tack_index i, const float *a, float *b)
{
    b[i] = a[i] + 1.0f;
    b[i] += a[i];
}
"""


def test_an_aliased_launch_keeps_program_order_within_an_index():
    """With a and b the same array, the second statement reads what the
    first wrote: (a + 1) + (a + 1). Code that assumed no aliasing would
    keep a's first value in a register: 2a + 1."""
    k = tack.Kernel(TWICE)
    n = 4099
    x = tack.array(np.arange(n, dtype=np.float32))
    k(x, x)
    assert np.array_equal(x.to_numpy(), 2 * (np.arange(n, dtype=np.float32) + 1))


def test_an_overlapping_view_keeps_program_order_within_an_index():
    n = 4099
    base = np.arange(n + 1, dtype=np.float32)
    k = tack.Kernel(
        """
        void f(tack_index i, const float *a, float *b, float *seen)
        {
            b[i] = 7.0f;          /* b[i] is a[i + 1] */
            seen[i] = a[i + 1];
        }
        """
    )
    a = tack.from_dlpack(base)
    b = tack.array_from_ptr(base.ctypes.data + 4, "float32", n, writable=True)
    seen = tack.zeros(n, tack.f32)
    k.launch(n - 1, a, b, seen)
    assert (seen.to_numpy()[: n - 1] == 7.0).all()


def test_a_separate_launch_gives_the_same_result():
    k = tack.Kernel(TWICE)
    n = 4099
    a = tack.array(np.arange(n, dtype=np.float32))
    b = tack.zeros(n, tack.f32)
    k(a, b)
    assert np.array_equal(b.to_numpy(), 2 * np.arange(n, dtype=np.float32) + 1)


def test_the_cpu_source_carries_both_variants():
    # Generated text, kept: the restrict variant computes what the other
    # does (the cases above), so only its presence tells that it exists; a
    # generator that stopped emitting it would lose the vectorised loop,
    # which no result shows.
    src = tack.Kernel(TWICE).generated_source("cpu")
    assert "twice_tack_restrict_(tack_index i, const float *restrict a, float *restrict b)" in src
    assert "void tack_kernel_entry_restrict(" in src
    # One array, or none written: restrict would say nothing.
    for one in ("void f(tack_index i, float *y) { y[i] = 1.0f; }",
                "void f(tack_index i, const float *x, const float *y, float s) { (void)x; (void)y; (void)s; }"):
        src = tack.Kernel(one).generated_source("cpu")
        assert "tack_restrict_" not in src and "tack_kernel_entry_restrict" not in src


# --------------------------------------------------------------------------
# the device dialects, through real compilers where this machine has them:
# NVRTC (a pip package, no GPU needed), hipRTC (Debian's libamdhip64
# compiles for a named GPU without one) and clang's OpenCL C for SPIR-V

DEVICE_KERNEL = """
void scatter(tack_index i, tack_index j, int64_t w, const float *v, int32_t *a, uint32_t *b, int64_t *c,
             uint64_t *d, float *e, double *f)
{
    float x = v[i * w + j];
    tack_atomic_add(&a[0], 1);
    tack_atomic_add(&b[0], 1u);
    tack_atomic_add(&c[0], (int64_t)i);
    tack_atomic_add(&d[0], (uint64_t)j);
    tack_atomic_add(&e[0], x);
    tack_atomic_add(&f[0], (double)x);
    tack_atomic_min(&a[1], (int32_t)j);
    tack_atomic_min(&b[1], (uint32_t)j);
    tack_atomic_min(&c[1], -(int64_t)i);
    tack_atomic_min(&d[1], (uint64_t)i);
    tack_atomic_max(&a[2], (int32_t)j);
    tack_atomic_max(&b[2], (uint32_t)j);
    tack_atomic_max(&c[2], -(int64_t)i);
    tack_atomic_max(&d[2], (uint64_t)i);
}
"""


@pytest.mark.parametrize("arch", [None, "compute_90"])
def test_cuda_2d_entry_and_atomics_compile_with_nvrtc(arch):
    nvrtc_or_skip()
    ptx = tack.Kernel(DEVICE_KERNEL).ptx(arch)
    assert ".entry tack_kernel_entry" in ptx
    assert ptx.count(".param ") == 2 + 8  # the two extents, then the parameters
    body = ptx[ptx.index(".entry tack_kernel_entry"):]
    for op in ("atom.global.add.u32", "atom.global.add.u64", "atom.global.add.f32", "atom.global.min.s32",
               "atom.global.min.u32", "atom.global.min.s64", "atom.global.max.u64"):
        assert op in body, op
    # both grid dimensions index the domain
    assert "%ctaid.y" in body and "%ctaid.x" in body


def hiprtc_or_skip():
    import ctypes
    import ctypes.util

    for name in ("libhiprtc.so", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"):
        try:
            lib = ctypes.CDLL(name)
            lib.hiprtcCreateProgram
            return lib
        except (OSError, AttributeError):
            continue
    pytest.skip("no hipRTC here (Debian: libamdhip64-5)")


def hiprtc_compile(lib, source):
    """Compiles `source` with hipRTC for gfx90a: (hipRTC's result, its log)."""
    import ctypes

    prog = ctypes.c_void_p()
    assert lib.hiprtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.hip", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(b"--offload-arch=gfx90a")
    result = lib.hiprtcCompileProgram(prog, 1, opts)
    size = ctypes.c_size_t()
    lib.hiprtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    lib.hiprtcGetProgramLog(prog, log)
    lib.hiprtcDestroyProgram(ctypes.byref(prog))
    return result, log.value.decode(errors="replace")


def test_hip_2d_entry_and_atomics_compile_with_hiprtc():
    import ctypes

    lib = hiprtc_or_skip()
    src = tack.Kernel(DEVICE_KERNEL).generated_source("hip").encode()
    prog = ctypes.c_void_p()
    assert lib.hiprtcCreateProgram(ctypes.byref(prog), src, b"kernel.hip", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(b"--offload-arch=gfx90a")
    result = lib.hiprtcCompileProgram(prog, 1, opts)
    size = ctypes.c_size_t()
    lib.hiprtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    lib.hiprtcGetProgramLog(prog, log)
    code = ctypes.c_size_t()
    lib.hiprtcGetCodeSize(prog, ctypes.byref(code))
    lib.hiprtcDestroyProgram(ctypes.byref(prog))
    assert result == 0, log.value.decode(errors="replace")
    assert code.value > 0


def test_opencl_2d_entry_and_atomics_compile_with_clang():
    import shutil

    clang = shutil.which("clang")
    if not clang:
        pytest.skip("no clang here (Debian: clang)")
    src = tack.Kernel(DEVICE_KERNEL).generated_source("level_zero")
    out = subprocess.run(
        [clang, "-x", "cl", "-cl-std=CL2.0", "-Xclang", "-finclude-default-header", "-target", "spir64",
         "-fsyntax-only", "-Werror=implicit-function-declaration", "-"],
        input=src, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "tack_global_id_(1)" in src and "tack_global_id_(0)" in src
