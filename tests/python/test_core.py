"""Arrays, dtypes, devices and raw pointers, without DLPack."""

import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import tack
from conftest import DTYPES, sample

def dtype_id(param):
    return param[1]


# --------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize("entry", DTYPES, ids=dtype_id)
def test_every_dtype_object(entry):
    short, name, _, _ = entry
    d = getattr(tack, short)
    assert isinstance(d, tack.DType)
    assert d.name == name
    assert d.itemsize == np.dtype(name).itemsize
    assert d == name
    assert d == short
    assert d == np.dtype(name)
    assert d == np.dtype(name).type
    for other_short, other_name, _, _ in DTYPES:
        if other_name != name:
            assert d != getattr(tack, other_short)
            assert d != other_name
            assert d != np.dtype(other_name)


@pytest.mark.parametrize("entry", DTYPES, ids=dtype_id)
def test_every_dtype_is_accepted_in_every_spelling(entry):
    short, name, _, _ = entry
    for spelling in (getattr(tack, short), name, short, np.dtype(name), np.dtype(name).type):
        a = tack.zeros((2, 3), dtype=spelling)
        assert a.dtype == getattr(tack, short)
        assert a.dtype.name == name
        assert a.nbytes == 6 * np.dtype(name).itemsize
        out = a.to_numpy()
        assert out.dtype == np.dtype(name)
        assert out.shape == (2, 3)
        assert not out.any()


@pytest.mark.parametrize("bad", ["complex32", np.longdouble, "float8", np.dtype("M8[s]"), "not-a-dtype", np.dtype("U3")])
def test_dtype_without_tack_equivalent_is_a_type_error(bad):
    with pytest.raises(TypeError):
        tack.zeros(3, dtype=bad)


def test_default_dtype_is_float32():
    assert tack.empty(4).dtype == tack.f32
    assert tack.zeros(4).dtype == tack.f32


# --------------------------------------------------------------------------
# creation and shapes


@pytest.mark.parametrize("make", [tack.empty, tack.zeros], ids=["empty", "zeros"])
@pytest.mark.parametrize("entry", DTYPES, ids=dtype_id)
def test_allocations_are_zeroed(make, entry):
    short, name, _, _ = entry
    a = make((5, 7), getattr(tack, short))
    assert a.shape == (5, 7)
    assert a.ndim == 2
    assert a.size == 35
    assert a.nbytes == 35 * np.dtype(name).itemsize
    assert a.writable is True
    np.testing.assert_array_equal(a.to_numpy(), np.zeros((5, 7), name))


def test_shape_spellings():
    assert tack.zeros(5).shape == (5,)
    assert tack.zeros((5,)).shape == (5,)
    assert tack.zeros([2, 3]).shape == (2, 3)
    assert tack.zeros(np.int64(4)).shape == (4,)
    assert tack.zeros((np.int32(2), 3)).shape == (2, 3)


def test_zero_dimensional_array():
    a = tack.zeros((), tack.f64)
    assert a.shape == ()
    assert a.ndim == 0
    assert a.size == 1
    assert a.nbytes == 8
    a.fill(2.5)
    out = a.to_numpy()
    assert out.shape == ()
    assert out == 2.5


def test_zero_dimensional_from_numpy():
    a = tack.zeros((), tack.f64)
    a.from_numpy(np.array(-4.5))
    assert a.to_numpy() == -4.5


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_zero_size_arrays(shape):
    a = tack.zeros(shape, tack.i32)
    assert a.shape == shape
    assert a.size == 0
    assert a.nbytes == 0
    assert a.to_numpy().shape == shape
    a.fill(3)  # nothing to write, and no error
    a.from_numpy(np.zeros(shape, np.int32))


@pytest.mark.parametrize("shape", [(-1,), (3, -2), (0, -1)])
def test_negative_extent_is_a_value_error(shape):
    with pytest.raises(ValueError):
        tack.empty(shape)


@pytest.mark.parametrize(
    "shape, dtype",
    [((2**40, 2**40), tack.f32), ((2**62,), tack.f64), ((2**31, 2**31, 2**31), tack.u8), ((2**63 - 1,), tack.i16)],
)
def test_absurd_sizes_are_refused(shape, dtype):
    with pytest.raises((ValueError, MemoryError)):
        tack.empty(shape, dtype)


def test_too_many_dimensions_is_a_value_error():
    with pytest.raises(ValueError):
        tack.zeros((1,) * 1000)


@pytest.mark.parametrize("shape", [(2.5,), ("3",), (None,)])
def test_non_integer_extent_is_a_type_error(shape):
    with pytest.raises(TypeError):
        tack.zeros(shape)


def test_len_is_the_first_extent():
    assert len(tack.zeros((4, 2))) == 4
    assert len(tack.zeros((0, 2))) == 0


def test_ptr_is_an_address_and_differs_between_allocations():
    a, b = tack.zeros(16), tack.zeros(16)
    assert isinstance(a.ptr, int) and a.ptr > 0
    assert a.ptr != b.ptr


# --------------------------------------------------------------------------
# tack.array


@pytest.mark.parametrize("entry", DTYPES, ids=dtype_id)
def test_array_copies_numpy_data(entry):
    _, name, _, _ = entry
    n = sample(name)
    a = tack.array(n)
    assert a.dtype == name
    assert a.shape == n.shape
    assert a.ptr != n.ctypes.data
    np.testing.assert_array_equal(a.to_numpy(), n)
    n[...] = 0
    np.testing.assert_array_equal(a.to_numpy(), sample(name))  # a copy, not a view


def test_array_from_python_sequences_follows_numpy_inference():
    a = tack.array([[1, 2, 3], [4, 5, 6]])
    assert a.dtype == np.asarray([1]).dtype
    assert a.shape == (2, 3)
    np.testing.assert_array_equal(a.to_numpy(), [[1, 2, 3], [4, 5, 6]])
    b = tack.array([0.5, 1.5])
    assert b.dtype == tack.f64
    np.testing.assert_array_equal(b.to_numpy(), [0.5, 1.5])


def test_array_with_dtype_converts():
    a = tack.array([1.75, 2.0, -3.0], dtype="i32")
    assert a.dtype == tack.i32
    np.testing.assert_array_equal(a.to_numpy(), [1, 2, -3])
    b = tack.array(np.arange(4, dtype=np.int64), dtype=tack.f32)
    assert b.dtype == tack.f32
    np.testing.assert_array_equal(b.to_numpy(), [0, 1, 2, 3])


@pytest.mark.parametrize("obj", [3.25, np.float64(3.25), np.array(3.25)], ids=["float", "numpy_scalar", "0d_array"])
def test_array_of_a_scalar_is_zero_dimensional(obj):
    a = tack.array(obj)
    assert a.shape == () == np.asarray(obj).shape
    assert a.to_numpy() == 3.25


def test_array_of_a_non_contiguous_numpy_array_copies_values():
    n = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = n[::2, 1::2].T
    a = tack.array(view)
    assert a.shape == view.shape
    np.testing.assert_array_equal(a.to_numpy(), view)


@pytest.mark.parametrize("obj", [np.zeros(3, np.longdouble), np.ones(2, np.clongdouble), np.zeros(2, "M8[s]"),
                                 np.array(["ab"])])
def test_array_of_a_dtype_tack_lacks_is_a_type_error(obj):
    with pytest.raises(TypeError):
        tack.array(obj)


def test_array_on_explicit_device():
    cpu = tack.device("cpu")
    assert tack.array([1, 2], device="cpu").device is cpu
    assert tack.array([1, 2], device=cpu).device is cpu


# --------------------------------------------------------------------------
# reshape


def test_reshape_is_a_view_over_the_same_memory():
    a = tack.array(np.arange(12, dtype=np.float32))
    for b in (a.reshape(3, 4), a.reshape((3, 4)), a.reshape(3, -1), a.reshape((-1, 2, 3)), a.reshape(12)):
        assert b.ptr == a.ptr
        assert b.size == 12
        np.testing.assert_array_equal(b.to_numpy().ravel(), np.arange(12))
    b = a.reshape(2, -1)
    assert b.shape == (2, 6)
    b.fill(7)
    np.testing.assert_array_equal(a.to_numpy(), np.full(12, 7, np.float32))
    c = b.reshape(-1)
    c.from_numpy(np.arange(12, dtype=np.float32) * 2)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(12) * 2)


def test_reshape_to_and_from_zero_dimensions():
    a = tack.zeros(1, tack.i64)
    s = a.reshape(())
    assert s.shape == ()
    assert s.ptr == a.ptr
    assert s.reshape(1, 1).shape == (1, 1)


@pytest.mark.parametrize("shape", [(5,), (4, 4), (-1, 5), (-1, -1), (3, -2)])
def test_reshape_to_another_size_is_a_value_error(shape):
    a = tack.zeros(12)
    with pytest.raises(ValueError):
        a.reshape(*shape)


def test_reshape_keeps_read_only():
    n = np.arange(6, dtype=np.float32)
    a = tack.array_from_ptr(n.ctypes.data, tack.f32, (6,))
    b = a.reshape(2, 3)
    assert b.writable is False
    with pytest.raises(RuntimeError):
        b.fill(1)
    np.testing.assert_array_equal(n, np.arange(6))


# --------------------------------------------------------------------------
# host reads and writes


@pytest.mark.parametrize("entry", DTYPES, ids=dtype_id)
def test_fill_from_numpy_to_numpy(entry):
    short, name, _, _ = entry
    a = tack.zeros((3, 4), getattr(tack, short))
    a.fill(9)
    np.testing.assert_array_equal(a.to_numpy(), np.full((3, 4), 9, name))
    a.from_numpy(sample(name))
    np.testing.assert_array_equal(a.to_numpy(), sample(name))


def test_fill_with_a_fraction():
    a = tack.zeros(3, tack.f64)
    a.fill(0.125)
    np.testing.assert_array_equal(a.to_numpy(), [0.125] * 3)


INTEGER_DTYPES = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"]
NOT_INTEGERS = [2.5, 2.0, -0.0, float("nan"), float("inf"), 1e300, np.float64(3.0), np.float32(1), Fraction(1, 2),
                Decimal("1")]


@pytest.mark.parametrize("short", INTEGER_DTYPES)
@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_integer_fill_refuses_what_a_kernel_scalar_refuses(short, value):
    # tack.zeros(3, tack.u8).fill(2.5) stored 2; a kernel's uint8_t
    # parameter refuses 2.5. Both refuse alike now, with the same advice,
    # and the refused fill writes nothing.
    a = tack.zeros(3, getattr(tack, short))
    a.fill(7)
    with pytest.raises(TypeError, match=r"int\(\) or round\(\)"):
        a.fill(value)
    np.testing.assert_array_equal(a.to_numpy(), [7, 7, 7])
    c_type = ("u" if short[0] == "u" else "") + "int" + short[1:] + "_t"
    k = tack.Kernel(f"void k(tack_index i, {c_type} s, {c_type} *y) {{ y[i] = s; }}")
    with pytest.raises(TypeError, match=r"int\(\) or round\(\)"):
        k.launch(3, value, a)
    np.testing.assert_array_equal(a.to_numpy(), [7, 7, 7])


@pytest.mark.parametrize("short", INTEGER_DTYPES)
def test_integer_fill_takes_what_a_kernel_scalar_takes(short):
    a = tack.zeros(3, getattr(tack, short))
    c_type = ("u" if short[0] == "u" else "") + "int" + short[1:] + "_t"
    k = tack.Kernel(f"void k(tack_index i, {c_type} s, {c_type} *y) {{ y[i] = s; }}")
    for value in [2, True, np.int8(3), np.uint64(4)]:
        a.fill(value)
        np.testing.assert_array_equal(a.to_numpy(), [int(value)] * 3)
        a.fill(0)
        k.launch(3, value, a)
        np.testing.assert_array_equal(a.to_numpy(), [int(value)] * 3)
    # Out of range is ValueError for both.
    with pytest.raises(ValueError):
        a.fill(2**64)
    with pytest.raises(ValueError):
        k.launch(3, 2**64, a)


def test_to_numpy_is_a_copy():
    a = tack.zeros(4, tack.i32)
    out = a.to_numpy()
    assert out.ctypes.data != a.ptr
    out[:] = 5
    np.testing.assert_array_equal(a.to_numpy(), [0, 0, 0, 0])


def test_from_numpy_reads_non_contiguous_input():
    n = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = tack.zeros((3, 4), tack.f64)
    a.from_numpy(n[1:, ::-1][:, :4])
    np.testing.assert_array_equal(a.to_numpy(), n[1:, ::-1][:, :4])


@pytest.mark.parametrize("shape", [(4, 3), (12,), (3, 4, 1), ()])
def test_from_numpy_with_another_shape_is_a_value_error(shape):
    a = tack.zeros((3, 4))
    a.fill(1)
    with pytest.raises(ValueError):
        a.from_numpy(np.zeros(shape, np.float32))
    np.testing.assert_array_equal(a.to_numpy(), np.ones((3, 4)))


def test_host_writes_to_a_read_only_array_are_runtime_errors():
    n = np.arange(6, dtype=np.int32)
    a = tack.array_from_ptr(n.ctypes.data, "int32", (2, 3))
    assert a.writable is False
    with pytest.raises(RuntimeError):
        a.fill(0)
    with pytest.raises(RuntimeError):
        a.from_numpy(np.zeros((2, 3), np.int32))
    np.testing.assert_array_equal(n, np.arange(6))
    np.testing.assert_array_equal(a.to_numpy(), np.arange(6).reshape(2, 3))


def test_to_device_copies():
    a = tack.array(np.arange(5, dtype=np.float32))
    b = a.to_device(tack.device("cpu"))
    assert b.ptr != a.ptr
    assert b.device is tack.device("cpu")
    assert b.shape == a.shape and b.dtype == a.dtype
    np.testing.assert_array_equal(b.to_numpy(), np.arange(5))
    b.fill(0)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(5))
    assert a.to_device("cpu").ptr != a.ptr


# --------------------------------------------------------------------------
# devices


def test_cpu_device_is_process_wide():
    cpu = tack.device("cpu")
    assert cpu is tack.device("cpu")
    assert isinstance(cpu, tack.Device)
    assert cpu.backend == "cpu"
    assert cpu.index == 0
    assert isinstance(cpu.name, str) and "cpu" in cpu.name.lower()
    assert cpu.shares_external_context is False
    assert isinstance(cpu.memory_domain, int)
    assert tack.zeros(2).device is tack.get_default_device()


def test_unknown_option_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="external_context"):
        tack.device("cpu", external_context={"driver": 1, "device": 2, "context": 3})
    with pytest.raises(ValueError, match="colour"):
        tack.device("cpu", colour="blue")


def test_unknown_option_is_refused_before_construction():
    # The misspelling must be reported as such even where the backend could
    # not start: an ignored keyword would silently create a private context.
    try:
        tack.device("level_zero")
    except ValueError:
        pytest.skip("this build has no level_zero backend")
    except RuntimeError:
        pass
    with pytest.raises(ValueError) as info:
        tack.device("level_zero", external_contxt={})
    assert "external_contxt" in str(info.value)
    assert "external_context" in str(info.value)


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="nosuchbackend"):
        tack.device("nosuchbackend")


def test_cuda_without_a_driver_is_a_runtime_error():
    # The default driver library, in a fresh interpreter (a process loads
    # the driver once) with no TACK_CUDA_LIBRARY; a machine that has the
    # driver cannot show this.
    code = textwrap.dedent("""
        import ctypes, sys
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            pass
        else:
            sys.exit(77)
        import tack
        try:
            tack.device("cuda")
        except RuntimeError as e:
            message = str(e)
        else:
            raise AssertionError("tack.device('cuda') succeeded without a driver")
        assert "CUDA is not available" in message and "libcuda.so.1" in message, message
        assert "Install the NVIDIA driver" in message, message
        assert tack.zeros(3).device.backend == "cpu"
    """)
    environ = {k: v for k, v in os.environ.items() if k != "TACK_CUDA_LIBRARY"}
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120)
    if r.returncode == 77:
        pytest.skip("a CUDA driver (libcuda.so.1) is installed")
    assert r.returncode == 0, r.stderr


def test_set_default_device(restore_default_device):
    cpu = tack.device("cpu")
    assert tack.set_default_device("cpu") is cpu
    assert tack.get_default_device() is cpu
    assert tack.set_default_device(cpu) is cpu
    assert tack.zeros(3).device is cpu
    with pytest.raises(ValueError, match="bogus"):
        tack.set_default_device("cpu", bogus=1)
    with pytest.raises(ValueError):
        tack.set_default_device("nosuchbackend")
    assert tack.get_default_device() is cpu


def test_device_keyword_on_allocation():
    cpu = tack.device("cpu")
    assert tack.zeros(3, device="cpu").device is cpu
    assert tack.empty(3, device=cpu).device is cpu
    with pytest.raises(ValueError):
        tack.zeros(3, device="nosuchbackend")


# --------------------------------------------------------------------------
# memory export


def test_plain_cpu_arrays_do_not_export_memory():
    # Only host memory allocated exportable has an OS handle (a memfd; see
    # test_ipc.py); a plain array says how to get one.
    with pytest.raises(RuntimeError, match="Backend cpu does not support memory export.*exportable=True"):
        tack.zeros(4).export_memory()


def test_exported_memory_record():
    fields = ("backend", "size", "allocation_size", "handle", "handle_type", "device_uuid")
    record = tack.ExportedMemory(("cuda", 100, 2097152, 7, "posix_fd", b"\x01" * 16))
    assert tuple(record) == ("cuda", 100, 2097152, 7, "posix_fd", b"\x01" * 16)
    for index, field in enumerate(fields):
        assert getattr(record, field) == record[index]
    assert tack.ExportedMemory.__match_args__ == fields


# --------------------------------------------------------------------------
# raw pointers


def test_array_from_ptr_wraps_without_copying():
    n = np.arange(12, dtype=np.float32)
    a = tack.array_from_ptr(n.ctypes.data, tack.f32, (3, 4))
    assert a.ptr == n.ctypes.data
    assert a.shape == (3, 4)
    assert a.writable is False
    np.testing.assert_array_equal(a.to_numpy(), n.reshape(3, 4))
    n[5] = 100
    assert a.to_numpy()[1, 1] == 100


@pytest.mark.parametrize("entry", DTYPES, ids=dtype_id)
def test_array_from_ptr_writable_writes_are_visible(entry):
    short, name, _, _ = entry
    n = sample(name, (6,))
    for spelling in (getattr(tack, short), name, np.dtype(name)):
        a = tack.array_from_ptr(n.ctypes.data, spelling, (2, 3), writable=True)
        assert a.writable is True
        assert a.dtype == name
        assert a.ptr == n.ctypes.data
        a.fill(4)
        np.testing.assert_array_equal(n, np.full(6, 4, name))
        a.from_numpy(sample(name, (2, 3)))
        np.testing.assert_array_equal(n, sample(name, (6,)))


@pytest.mark.parametrize("ptr", [1.0, "0x1000", None, b"\x00", [4096], complex(4096)])
def test_array_from_ptr_non_integer_is_a_type_error(ptr):
    with pytest.raises(TypeError):
        tack.array_from_ptr(ptr, tack.f32, (1,))


@pytest.mark.parametrize("ptr", [-1, -(2**63), 2**64, 2**64 + 4096, 2**200])
def test_array_from_ptr_out_of_range_is_a_type_error(ptr):
    with pytest.raises(TypeError):
        tack.array_from_ptr(ptr, tack.f32, (1,))


def test_array_from_ptr_refuses_null():
    with pytest.raises(ValueError):
        tack.array_from_ptr(0, tack.f32, (4,))


def test_array_from_ptr_does_not_extend_the_life_of_the_memory():
    import sys

    n = np.zeros(8, np.float64)
    before = sys.getrefcount(n)
    a = tack.array_from_ptr(n.ctypes.data, tack.f64, (8,))
    assert sys.getrefcount(n) == before
    del a
