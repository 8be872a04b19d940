"""DLPack between Tack and NumPy, and the layout of Tack's own exports."""

import gc

import numpy as np
import pytest

import tack
from conftest import DL_CODES, DTYPES, NUMPY_NAMES, READ_ONLY, capsule_name, capsule_tensor, sample

NAMES = [name for _, name, _, _ in DTYPES]


def address(n):
    return n.__array_interface__["data"][0]


# --------------------------------------------------------------------------
# NumPy -> Tack


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_numpy_to_tack_every_dtype_zero_copy(name):
    n = sample(name)
    a = tack.from_dlpack(n)
    assert a.ptr == address(n) == n.ctypes.data
    assert a.shape == (3, 4)
    assert a.dtype == name
    assert a.writable is True
    np.testing.assert_array_equal(a.to_numpy(), sample(name))

    a.fill(7)  # Tack writes, NumPy sees them
    np.testing.assert_array_equal(n, np.full((3, 4), 7, name))
    n[1, 2] = 42  # NumPy writes, Tack sees them
    assert a.to_numpy()[1, 2] == np.array(42).astype(name)


@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3, 4), (0,), (3, 0)])
def test_numpy_to_tack_shapes(shape):
    n = sample("float64", shape) if 0 not in shape else np.zeros(shape)
    a = tack.from_dlpack(n)
    assert a.shape == shape
    assert a.size == n.size
    if n.size:
        assert a.ptr == n.ctypes.data
    np.testing.assert_array_equal(a.to_numpy(), n)


def test_numpy_source_may_be_dropped_at_once():
    a = tack.from_dlpack(sample("int32", (100,)))
    gc.collect()
    np.testing.assert_array_equal(a.to_numpy(), sample("int32", (100,)))


@pytest.mark.parametrize(
    "view",
    [
        lambda n: n[:, ::2],
        lambda n: n.T,
        lambda n: np.asfortranarray(n),
        lambda n: n[::-1],
        lambda n: n.ravel()[::3],
    ],
    ids=["columns", "transpose", "fortran", "reversed", "step"],
)
def test_numpy_non_contiguous_is_a_value_error(view):
    n = view(np.arange(24, dtype=np.float32).reshape(4, 6))
    with pytest.raises(ValueError):
        tack.from_dlpack(n)
    # the copying path reads NumPy's strides correctly
    a = tack.from_dlpack(n, copy=True)
    assert a.ptr != n.ctypes.data
    np.testing.assert_array_equal(a.to_numpy(), n)


# NumPy exports through DLPack no dtype that Tack lacks: its copies are
# refused instead.
@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble])
def test_numpy_dtype_without_equivalent_is_a_type_error(dtype):
    with pytest.raises(TypeError, match="unsupported dtype"):
        tack.from_dlpack(np.zeros(3, dtype), copy=True)


def test_numpy_read_only_imports_read_only():
    n = sample("float32")
    n.flags.writeable = False
    a = tack.from_dlpack(n)
    assert a.ptr == n.ctypes.data
    assert a.writable is False
    with pytest.raises(RuntimeError):
        a.fill(0)
    with pytest.raises(RuntimeError):
        a.from_numpy(np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(n, sample("float32"))
    b = a.reshape(-1)
    assert b.writable is False


def test_copy_true_makes_a_writable_copy():
    n = sample("int16")
    n.flags.writeable = False
    a = tack.from_dlpack(n, copy=True)
    assert a.ptr != n.ctypes.data
    assert a.writable is True
    np.testing.assert_array_equal(a.to_numpy(), n)
    a.fill(0)
    np.testing.assert_array_equal(n, sample("int16"))


def test_import_on_an_explicit_cpu_device():
    cpu = tack.device("cpu")
    n = sample("float64")
    for device in ("cpu", cpu):
        a = tack.from_dlpack(n, device=device)
        assert a.device is cpu
        assert a.ptr == n.ctypes.data


# --------------------------------------------------------------------------
# Tack -> NumPy


@pytest.mark.parametrize("name", NAMES)
def test_tack_to_numpy_every_dtype_zero_copy(name):
    if name == "bfloat16":
        # NumPy's DLPack import has no bfloat16 (np.asarray(a) views it
        # through ml_dtypes instead): NumPy's own refusal.
        with pytest.raises(RuntimeError, match="Unsupported dtype"):
            np.from_dlpack(tack.zeros(3, tack.bf16))
        return
    a = tack.array(sample(name))
    n = np.from_dlpack(a)
    assert address(n) == a.ptr
    assert n.dtype == np.dtype(name)
    assert n.shape == (3, 4)
    assert n.flags.writeable
    assert n.flags.c_contiguous
    np.testing.assert_array_equal(n, sample(name))

    n[...] = 5  # NumPy writes, Tack sees them
    np.testing.assert_array_equal(a.to_numpy(), np.full((3, 4), 5, name))
    a.fill(3)  # Tack writes, NumPy sees them
    np.testing.assert_array_equal(n, np.full((3, 4), 3, name))


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 1, 3), (0,), (4, 0)])
def test_tack_to_numpy_shapes(shape):
    a = tack.zeros(shape, tack.f64)
    a.fill(1.5)
    n = np.from_dlpack(a)
    assert n.shape == shape
    if a.size:
        assert address(n) == a.ptr
    np.testing.assert_array_equal(n, np.full(shape, 1.5))


def test_tack_read_only_exports_read_only_to_numpy():
    backing = sample("float32")
    a = tack.array_from_ptr(backing.ctypes.data, tack.f32, (3, 4))
    n = np.from_dlpack(a)
    assert address(n) == backing.ctypes.data
    assert n.flags.writeable is False
    with pytest.raises(ValueError):
        n[0, 0] = 1
    np.testing.assert_array_equal(n, backing)


def test_reshape_view_exports():
    a = tack.array(np.arange(12, dtype=np.int64))
    v = a.reshape(3, 4)
    n = np.from_dlpack(v)
    assert n.shape == (3, 4)
    assert address(n) == a.ptr
    n[2, 3] = -1
    assert a.to_numpy()[11] == -1


def test_round_trip_tack_numpy_tack_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    a = tack.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    n = np.from_dlpack(a)
    b = tack.from_dlpack(n)
    t = torch.from_dlpack(b)
    assert address(n) == b.ptr == t.data_ptr() == a.ptr
    assert b.shape == tuple(t.shape) == (2, 3)
    t[1, 2] = 99.0
    assert a.to_numpy()[1, 2] == 99.0
    assert n[1, 2] == 99.0
    a.fill(-2)
    assert torch.equal(t, torch.full((2, 3), -2.0))


def test_tack_to_tack_zero_copy():
    a = tack.array(sample("uint32"))
    b = tack.from_dlpack(a)
    assert b.ptr == a.ptr
    assert b.writable is True
    b.fill(8)
    np.testing.assert_array_equal(a.to_numpy(), np.full((3, 4), 8, np.uint32))


def test_tack_read_only_to_tack():
    backing = sample("float64")
    ro = tack.array_from_ptr(backing.ctypes.data, tack.f64, (3, 4))
    b = tack.from_dlpack(ro)
    assert b.ptr == backing.ctypes.data
    assert b.writable is False
    # The legacy struct has no flags: a read-only array exported that way
    # arrives writable, as the protocol cannot say otherwise.
    c = tack.from_dlpack(ro.__dlpack__())
    assert c.ptr == backing.ctypes.data
    assert c.writable is True
    d = tack.from_dlpack(ro.__dlpack__(max_version=(1, 0)))
    assert d.writable is False


# --------------------------------------------------------------------------
# the export itself


def test_dlpack_device_is_cpu_zero():
    assert tack.zeros(3).__dlpack_device__() == (1, 0)


@pytest.mark.parametrize(
    "max_version, name",
    [(None, "dltensor"), ((0, 8), "dltensor"), ((1, 0), "dltensor_versioned"), ((1, 3), "dltensor_versioned"), ((2, 0), "dltensor_versioned")],
)
def test_capsule_kind_follows_max_version(max_version, name):
    a = tack.zeros(3)
    capsule = a.__dlpack__(max_version=max_version)
    assert capsule_name(capsule) == name


@pytest.mark.parametrize("short, name, code, bits", DTYPES, ids=NAMES)
@pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])
def test_exported_tensor_layout(short, name, code, bits, versioned):
    a = tack.zeros((2, 3, 4), getattr(tack, short))
    capsule = a.__dlpack__(max_version=(1, 0) if versioned else None)
    m = capsule_tensor(capsule)
    t = m.dl_tensor
    if versioned:
        assert m.version.major == 1
        assert m.flags & READ_ONLY == 0
    assert m.deleter
    assert t.data == a.ptr
    assert (t.device.device_type, t.device.device_id) == (1, 0)
    assert t.ndim == 3
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, 1)
    assert DL_CODES[(t.dtype.code, t.dtype.bits)] == name
    assert [t.shape[i] for i in range(3)] == [2, 3, 4]
    assert [t.strides[i] for i in range(3)] == [12, 4, 1]
    assert t.byte_offset == 0


def test_exported_view_has_its_own_shape():
    a = tack.zeros((2, 3))
    v = a.reshape(3, 2)
    capsule = v.__dlpack__()
    t = capsule_tensor(capsule).dl_tensor
    assert t.data == a.ptr
    assert [t.shape[i] for i in range(2)] == [3, 2]
    assert [t.strides[i] for i in range(2)] == [2, 1]
    assert a.shape == (2, 3)


def test_exported_zero_dimensional_tensor():
    a = tack.zeros(())
    capsule = a.__dlpack__(max_version=(1, 0))
    t = capsule_tensor(capsule).dl_tensor
    assert t.ndim == 0
    assert t.data == a.ptr


def test_versioned_export_of_read_only_array_is_flagged():
    backing = np.zeros(4, np.float32)
    ro = tack.array_from_ptr(backing.ctypes.data, tack.f32, (4,))
    capsule = ro.__dlpack__(max_version=(1, 0))
    assert capsule_tensor(capsule).flags & READ_ONLY
    rw = tack.array_from_ptr(backing.ctypes.data, tack.f32, (4,), writable=True)
    capsule = rw.__dlpack__(max_version=(1, 0))
    assert not capsule_tensor(capsule).flags & READ_ONLY


def test_copy_true_is_a_buffer_error():
    a = tack.zeros(3)
    with pytest.raises(BufferError):
        a.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        a.__dlpack__(max_version=(1, 0), copy=True)


def test_unused_keywords_are_accepted():
    a = tack.zeros(3)
    for kwargs in (
        {"stream": None},
        {"copy": False},
        {"copy": None},
        {"dl_device": (1, 0)},
        {"stream": None, "max_version": (1, 1), "dl_device": (1, 0), "copy": False},
    ):
        capsule = a.__dlpack__(**kwargs)
        assert capsule_name(capsule) in ("dltensor", "dltensor_versioned")
    assert np.from_dlpack(a, device="cpu").ctypes.data == a.ptr
