"""Kernel arguments that are not tack.Arrays (NumPy arrays, PyTorch CPU
tensors, the NumPy views Tack's slicing returns) shared for the call without
a copy, under from_dlpack's rules; and calls without .launch, whose domain
must be the one shape every array argument has."""

import sys

import numpy as np
import pytest

import tack

pytestmark = pytest.mark.usefixtures("private_kernel_cache")

SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"
# Where the kernel sees the array bound to x: the proof that nothing was copied.
ADDRESS = "void address(tack_index i, float *x, uint64_t *out) { out[i] = (uint64_t)(size_t)x; }"
HIST = "void hist(tack_index i, const int32_t *v, int32_t *bins) { tack_atomic_add(&bins[v[i]], 1); }"
PER_POINT = "void norm1(tack_index i, const float *p, float *out) { out[i] = p[3 * i] + p[3 * i + 1] + p[3 * i + 2]; }"
ROWS = "void rows(tack_index i, tack_index j, const float *c, float *y) { y[i * 3 + j] = c[j] + (float)i; }"
SCALARS_ONLY = "void scalars(tack_index i, float a) { (void)i; (void)a; }"


@pytest.fixture(scope="module")
def saxpy():
    return tack.Kernel(SAXPY)


@pytest.fixture(scope="module")
def address():
    return tack.Kernel(ADDRESS)


def seen_address(address, x):
    """The address the kernel received for x (x itself passed, as given)."""
    out = np.zeros(1, np.uint64)
    address.launch(1, x, out)
    return int(out[0])


# --------------------------------------------------------------------------
# any array in


def test_numpy_arrays_are_shared_for_the_call(saxpy, address):
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    saxpy(2.0, x, y)
    np.testing.assert_array_equal(y, 2 * np.arange(8, dtype=np.float32) + 1)
    assert seen_address(address, y) == y.ctypes.data


def test_numpy_and_tack_arrays_mix(saxpy):
    x = tack.array(np.arange(4, dtype=np.float32))
    y = np.zeros(4, np.float32)
    saxpy(3.0, x, y)
    np.testing.assert_array_equal(y, [0, 3, 6, 9])
    ty = tack.zeros(4)
    saxpy(1.0, np.full(4, 5, np.float32), ty)
    np.testing.assert_array_equal(ty.to_numpy(), [5, 5, 5, 5])


def test_torch_cpu_tensors_are_shared_for_the_call(saxpy, address):
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32)
    y = torch.ones(6, dtype=torch.float32)
    saxpy(2.0, x, y)
    assert y.tolist() == [1, 3, 5, 7, 9, 11]
    assert seen_address(address, y) == y.data_ptr()


def test_the_numpy_view_of_a_tack_slice_is_tack_memory(saxpy, address):
    a = tack.zeros(8)
    view = a[2:6]
    assert isinstance(view, np.ndarray)
    saxpy(1.0, np.ones(4, np.float32), view)
    np.testing.assert_array_equal(a.to_numpy(), [0, 0, 1, 1, 1, 1, 0, 0])
    base = np.asarray(a).ctypes.data
    assert seen_address(address, view) == base + 2 * 4
    del view


def test_an_import_lives_for_the_call_only(saxpy):
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)
    before = sys.getrefcount(x), sys.getrefcount(y)
    for _ in range(3):
        saxpy(1.0, x, y)
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before
    assert y.tolist() == [3.0] * 16


def test_an_import_is_released_when_the_call_fails(saxpy):
    # y is imported before x's dtype is refused: the import must not leak.
    x, y = np.ones(4), np.zeros(4, np.float32)
    before = sys.getrefcount(y)
    for _ in range(3):
        with pytest.raises(TypeError):
            saxpy(1.0, y, x)
    assert sys.getrefcount(y) == before


def test_what_a_numpy_buffer_cannot_say_gets_from_dlpacks_answer(saxpy):
    # Byte order is refused by DLPack with the producer's own exception.
    swapped, y = np.ones(4, ">f4"), np.zeros(4, np.float32)
    with pytest.raises(BufferError) as direct:
        tack.from_dlpack(swapped)
    with pytest.raises(BufferError) as passed:
        saxpy(1.0, swapped, y)
    assert str(passed.value) == f"parameter 'x' of kernel 'saxpy' (float): {direct.value}"
    assert not y.any()


def test_buffer_protocol_memory_is_shared_for_the_call(saxpy, address):
    # No __dlpack__: the buffer protocol's way, as tack.asarray takes it.
    raw = bytearray(16)
    view = memoryview(raw).cast("f")
    assert seen_address(address, view) == np.frombuffer(raw, np.uint8).ctypes.data
    saxpy(2.0, np.ones(4, np.float32), view)
    assert view.tolist() == [2.0] * 4


def test_bfloat16_numpy_arrays_take_the_buffer_fallback():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    k = tack.Kernel("void twice(tack_index i, tack_bf16 *x) "
                    "{ x[i] = tack_bf16_from_float(2.0f * tack_bf16_to_float(x[i])); }")
    x = np.ones(8, ml_dtypes.bfloat16)
    k(x)
    assert x.astype(np.float32).tolist() == [2.0] * 8


def test_a_read_only_array_is_refused_where_the_kernel_may_store(saxpy):
    frozen = np.ones(4, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError,
                       match=r"parameter 'y' of kernel 'saxpy'.*read-only; pass a writable array, or declare the "
                             r"parameter const"):
        saxpy(2.0, np.ones(4, np.float32), frozen)
    np.testing.assert_array_equal(frozen, np.ones(4, np.float32))
    y = np.zeros(4, np.float32)
    saxpy(2.0, frozen, y)  # const: read-only is fine
    np.testing.assert_array_equal(y, [2, 2, 2, 2])


def test_a_strided_view_is_refused_as_from_dlpack_refuses_it(saxpy):
    y = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match=r"parameter 'y' of kernel 'saxpy'.*contiguous"):
        saxpy(1.0, np.ones(4, np.float32), y[::2])
    assert not y.any()


def test_another_dtype_names_the_parameter(saxpy):
    with pytest.raises(TypeError, match=r"parameter 'x'.*float32.*float64"):
        saxpy(1.0, np.ones(4), np.zeros(4, np.float32))


def test_what_no_protocol_shares_is_refused_naming_the_parameter(saxpy):
    y = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"parameter 'x' of kernel 'saxpy' is an array \(const float \*\); got "
                                        r"float\. Pass a tack\.Array or an array tack\.asarray shares"):
        saxpy(1.0, 1.0, y)
    with pytest.raises(TypeError, match=r"parameter 'x'.*list"):
        saxpy(1.0, [1.0, 2.0, 3.0, 4.0], y)
    assert not y.any()


# --------------------------------------------------------------------------
# calls without .launch


def test_hist_of_values_and_bins_asks_for_the_domain():
    hist = tack.Kernel(HIST)
    v = (np.arange(1_000_000) % 256).astype(np.int32)
    bins = np.zeros(256, np.int32)
    with pytest.raises(ValueError) as e:
        hist(v, bins)
    message = str(e.value)
    assert "'v' is (1000000,)" in message and "'bins' is (256,)" in message
    assert ".launch(n, ...)" in message and ".launch((h, w), ...)" in message
    assert not bins.any(), "a refused call ran"
    hist.launch(v.size, v, bins)
    assert bins.tolist() == np.bincount(v, minlength=256).tolist()


def test_hist_over_tack_arrays_no_longer_counts_the_bins_only():
    # Once the domain was the first array the kernel may store through:
    # 256 of the values counted, silently.
    hist = tack.Kernel(HIST)
    v = tack.array((np.arange(100_000) % 256).astype(np.int32))
    bins = tack.zeros(256, tack.i32)
    with pytest.raises(ValueError, match=r"'v' is \(100000,\), 'bins' is \(256,\)"):
        hist(v, bins)
    assert not bins.to_numpy().any(), "a refused call ran"


def test_points_for_a_per_point_kernel_ask_for_the_domain():
    norm1 = tack.Kernel(PER_POINT)
    points = np.ones((3970, 3), np.float32)
    out = np.zeros(3970, np.float32)
    with pytest.raises(ValueError, match=r"'p' is \(3970, 3\), 'out' is \(3970,\).*\.launch\(n, \.\.\.\)"):
        norm1(points, out)
    flat = np.zeros((3970, 3), np.float32)
    with pytest.raises(ValueError, match=r"takes 1 index.*\(3970, 3\), 2-D.*3970 rows.*11910 elements"):
        norm1(points, flat)
    assert not out.any() and not flat.any()
    norm1.launch(3970, points, out)
    assert out.tolist() == [3.0] * 3970


def test_a_2d_kernel_takes_the_shape_its_arrays_share():
    rows = tack.Kernel(ROWS)
    c = np.tile(np.arange(3, dtype=np.float32), (4, 1))
    y = np.zeros((4, 3), np.float32)
    rows(c, y)
    np.testing.assert_array_equal(y, np.arange(3, dtype=np.float32) + np.arange(4, dtype=np.float32)[:, None])
    y[:] = 0
    with pytest.raises(ValueError, match=r"'c' is \(3,\), 'y' is \(4, 3\).*\.launch\(\(h, w\), \.\.\.\)"):
        rows(np.arange(3, dtype=np.float32), y)
    with pytest.raises(ValueError, match=r"takes 2 indices.*\(12,\), 1-D"):
        rows(np.zeros(12, np.float32), np.zeros(12, np.float32))
    assert not y.any()
    rows.launch((4, 3), np.arange(3, dtype=np.float32), y)
    assert y[3].tolist() == [3, 4, 5]


def test_equal_shapes_give_the_domain(saxpy):
    x, y = tack.array(np.ones((2, 5), np.float32)), tack.zeros((2, 5))
    with pytest.raises(ValueError, match=r"\(2, 5\), 2-D.*2 rows.*10 elements"):
        saxpy(1.0, x, y)
    x1, y1 = tack.array(np.ones(10, np.float32)), tack.zeros(10)
    saxpy(1.0, x1, y1)
    assert y1.to_numpy().tolist() == [1.0] * 10


def test_a_kernel_without_arrays_has_no_domain_to_take():
    k = tack.Kernel(SCALARS_ONLY)
    with pytest.raises(ValueError, match="no array parameter.*\\.launch\\(n, \\.\\.\\.\\)"):
        k(1.0)
