"""Warp and JAX (their CPU builds from PyPI): arrays cross both ways without
a copy. Zero-copy is asserted by pointer identity and by writes seen on the
other side; lifetime by dropping the producer and reading.

Each library's cases skip, saying why, when it is not importable: install
warp-lang and jax (requirements-dev.txt).
"""

import gc
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tack

# tack.asarray (test_protocols.py checks that the package exports it).
asarray = tack._tack.asarray


def live():
    return dict(tack._tack.live_counts())


def quiet_init(warp, kernel_cache_dir):
    """Starts Warp without its banner (Warp 1.19 has no `quiet`: messages
    below config.log_level are not printed, and the banner is at INFO),
    compiling kernels into `kernel_cache_dir`, not the user's cache."""
    warp.config.log_level = warp.LOG_WARNING
    warp.config.kernel_cache_dir = kernel_cache_dir
    warp.init()


@pytest.fixture(scope="module")
def wp(tmp_path_factory):
    try:
        import warp
    except ImportError as e:
        pytest.skip(f"Warp is not importable ({e}); pip install warp-lang")
    quiet_init(warp, str(tmp_path_factory.mktemp("warp-kernels")))
    return warp


@pytest.fixture(scope="module")
def jax():
    try:
        import jax
        import jax.dlpack  # noqa: F401
        import jax.numpy  # noqa: F401
    except ImportError as e:
        pytest.skip(f"JAX is not importable ({e}); pip install jax")
    if jax.default_backend() != "cpu":
        pytest.skip(f"these cases are for JAX's CPU backend, not {jax.default_backend()}")
    return jax


def aligned_array(n):
    """A float32 Tack array over page-aligned memory (an anonymous mapping,
    shared through the buffer protocol)."""
    mm = mmap.mmap(-1, max(4 * n, 1))
    a = asarray(memoryview(mm).cast("f"))
    assert a.ptr % mmap.PAGESIZE == 0
    return a


# --------------------------------------------------------------------------
# Warp


def test_warp_starts_without_its_banner(wp, tmp_path):
    # In a fresh interpreter: the module's Warp has started already.
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import warp
        from test_warp_jax import quiet_init
        quiet_init(warp, {str(tmp_path)!r})
        print(warp.zeros(4, dtype=warp.float32, device="cpu").numpy().tolist())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[0.0, 0.0, 0.0, 0.0]", r.stdout
    said = r.stdout + r.stderr
    assert f"Warp {wp.config.version} initialized" not in said and "Kernel cache:" not in said, said


def test_warp_wraps_a_tack_array_in_place(wp):
    before = live()
    a = tack.array(np.arange(8, dtype=np.float32))
    w = wp.from_dlpack(a)
    assert w.ptr == a.ptr and w.dtype == wp.float32 and w.shape == (8,) and str(w.device) == "cpu"
    a.fill(5.0)
    assert (w.numpy() == 5.0).all()
    # The export keeps Tack's memory alive after the Tack array is dropped.
    del a
    gc.collect()
    assert (w.numpy() == 5.0).all()
    # Warp also reads Tack arrays through __array_interface__, in place.
    b = tack.zeros(4, tack.i32)
    v = wp.array(b, dtype=wp.int32, copy=False, device="cpu")
    assert v.ptr == b.ptr
    del w, v, b
    gc.collect()
    assert live() == before


def test_a_warp_kernel_writes_a_tack_array(wp):
    @wp.kernel
    def scale(x: wp.array(dtype=wp.float32), s: wp.float32):
        i = wp.tid()
        x[i] = x[i] * s

    a = tack.array(np.arange(16, dtype=np.float32))
    # Passed as it is: Warp takes the pointer from __array_interface__.
    wp.launch(scale, dim=16, inputs=[a, 3.0], device="cpu")
    wp.synchronize_device("cpu")
    assert (a.to_numpy() == 3.0 * np.arange(16)).all()


def test_tack_wraps_a_warp_array_in_place(wp):
    before = live()
    w = wp.array(np.arange(10, dtype=np.float64), dtype=wp.float64, device="cpu")
    ptr = w.ptr
    t = tack.from_dlpack(w)
    u = asarray(w)
    assert t.ptr == ptr and u.ptr == ptr and t.dtype == tack.f64 and t.writable
    t.fill(2.0)
    assert (w.numpy() == 2.0).all()
    # Tack holds Warp's export: dropping the Warp array leaves the memory.
    del w
    gc.collect()
    assert (t.to_numpy() == 2.0).all() and (u.to_numpy() == 2.0).all()
    del t, u
    gc.collect()
    assert live() == before


# --------------------------------------------------------------------------
# JAX


def test_tack_wraps_a_jax_array_in_place(jax):
    before = live()
    x = jax.numpy.arange(1024, dtype=jax.numpy.float32).block_until_ready()
    ptr = x.unsafe_buffer_pointer()
    t = tack.from_dlpack(x)
    u = asarray(x)
    assert t.ptr == ptr and u.ptr == ptr and t.shape == (1024,) and t.dtype == tack.f32
    # Tack holds JAX's export: dropping the JAX array leaves the memory.
    del x
    gc.collect()
    assert (t.to_numpy() == np.arange(1024)).all()
    del t, u
    gc.collect()
    assert live() == before


def test_jax_wraps_a_tack_array_in_place(jax):
    before = live()
    # XLA wraps host memory in place only at 64-byte alignment (it copies
    # otherwise), so the array is over page-aligned memory.
    a = aligned_array(256)
    a.fill(1.5)
    y = jax.dlpack.from_dlpack(a)
    z = jax.numpy.from_dlpack(a)
    assert y.unsafe_buffer_pointer() == a.ptr and z.unsafe_buffer_pointer() == a.ptr
    assert float(y.sum()) == 1.5 * 256
    # One memory: a Tack write is what JAX reads next.
    a.fill(2.0)
    assert float(jax.numpy.sum(y)) == 2.0 * 256
    # The export keeps Tack's memory alive after the Tack array is dropped.
    del a
    gc.collect()
    assert float(z[255]) == 2.0
    del y, z
    gc.collect()
    assert live() == before


@pytest.mark.parametrize("n", [1, 3, 1000, 300_000])
def test_jax_wraps_tack_allocations_in_place(jax, n):
    # Tack's own allocations are 64-byte aligned, so XLA wraps them without
    # copying whatever their size.
    a = tack.zeros(n, tack.f32)
    assert a.ptr % 64 == 0
    y = jax.dlpack.from_dlpack(a)
    assert y.unsafe_buffer_pointer() == a.ptr
    a.fill(3.0)
    assert float(y[n - 1]) == 3.0
    del y, a
    gc.collect()


def test_jax_reads_any_tack_array(jax):
    # An allocation of any alignment arrives with the right values (in place
    # or, below 64-byte alignment, as XLA's copy).
    a = tack.array(np.arange(3, dtype=np.int32))
    y = jax.dlpack.from_dlpack(a)
    assert y.dtype == jax.numpy.int32 and list(np.asarray(y)) == [0, 1, 2]
