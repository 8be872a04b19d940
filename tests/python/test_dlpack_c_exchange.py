"""The DLPack C exchange API Tack's Array publishes.

type(a).__dlpack_c_exchange_api__ is a capsule named "dlpack_exchange_api"
over a process-lifetime DLPackExchangeAPI (DLPack 1.3): C functions a
consumer calls without going through Python. These tests call them as a C
consumer would, through ctypes, and hand tensors between Tack's table and
PyTorch's (torch.Tensor publishes one too).

PyTorch 2.13 publishes its table but does not consume other types' tables:
torch.from_dlpack(x) calls x.__dlpack__() and torch._C._from_dlpack, so
torch.from_dlpack(tack_array) goes through __dlpack__ (test_dlpack_torch.py).
The consumer side of tables is tack.from_dlpack (and, in C, libraries such
as tvm-ffi).
"""

import ctypes
import sys

import numpy as np
import pytest

import tack
from conftest import DLPackExchangeAPI, DLTensor, kDLCPU, kDLCUDAHost, kDLMetal, READ_ONLY
from cudasim import run
from exchange_table import TACK, SetError, Table, delete, live, versioned

# --------------------------------------------------------------------------
# the capsule and the table


def test_the_table_is_published_on_the_type():
    capsule = tack.Array.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    assert "dlpack_exchange_api" in repr(capsule)
    # The same process-lifetime table every time, and through instances.
    assert Table(tack.Array).address == TACK.address
    assert tack.zeros(2).__dlpack_c_exchange_api__ is capsule
    s = TACK.struct
    assert (s.major, s.minor) == (1, 3)
    assert s.prev_api is None
    for name, _ in DLPackExchangeAPI._fields_[3:]:
        assert getattr(s, name), f"{name} is NULL"
    # The type stays immutable to Python code.
    with pytest.raises(TypeError):
        tack.Array.__dlpack_c_exchange_api__ = None


# --------------------------------------------------------------------------
# managed_tensor_from_py_object_no_sync


@pytest.mark.parametrize("dtype, code, bits", [("float32", 2, 32), ("int64", 0, 64), ("uint8", 1, 8)])
def test_from_py_object_exports_a_versioned_view(dtype, code, bits):
    a = tack.array(np.arange(24).reshape(2, 3, 4).astype(dtype))
    before = live()
    address = TACK.export(a)
    m = versioned(address)
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags == 0
    t = m.dl_tensor
    assert t.data == a.ptr and t.byte_offset == 0
    assert (t.device.device_type, t.device.device_id) == (kDLCPU, 0)
    assert t.ndim == 3 and [t.shape[i] for i in range(3)] == [2, 3, 4]
    assert [t.strides[i] for i in range(3)] == [12, 4, 1]
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, 1)
    assert live()["exports"] == before["exports"] + 1
    # The tensor keeps the array: dropping the Python object frees nothing.
    del a
    assert live()["arrays"] == before["arrays"]
    delete(address)
    after = live()
    assert after["exports"] == before["exports"]
    assert after["arrays"] == before["arrays"] - 1


def test_from_py_object_says_read_only():
    backing = np.zeros(4, np.float32)
    ro = tack.array_from_ptr(backing.ctypes.data, tack.f32, (4,))
    address = TACK.export(ro)
    assert versioned(address).flags & READ_ONLY
    delete(address)


@pytest.mark.parametrize("obj", [np.zeros(3), None, 1, "x", object()])
def test_from_py_object_refuses_anything_but_a_tack_array(obj):
    out = ctypes.c_void_p()
    with pytest.raises(TypeError, match="tack.Array"):
        TACK.from_py(obj, ctypes.byref(out))
    assert out.value is None


def test_from_py_object_with_no_out_is_a_value_error():
    a = tack.zeros(2)
    before = live()["exports"]
    with pytest.raises(ValueError, match="out"):
        TACK.from_py(a, None)
    assert live()["exports"] == before


# --------------------------------------------------------------------------
# managed_tensor_to_py_object_no_sync


def test_to_py_object_adopts_a_tensor(probe):
    h = probe.tensor(shape=(2, 3), dtype=(2, 64, 1))
    b = TACK.adopt(h.address)
    assert type(b) is tack.Array
    assert sys.getrefcount(b) == 2  # ours, and getrefcount's argument
    assert b.ptr == h.data and b.shape == (2, 3) and b.dtype == "float64" and b.writable
    np.testing.assert_array_equal(b.to_numpy(), h.expected("float64"))
    assert h.deleter_calls == 0
    r = b.reshape(6)
    del b
    assert h.deleter_calls == 0  # the reshape still holds the memory
    del r
    assert h.deleter_calls == 1


def test_to_py_object_honours_read_only(probe):
    h = probe.tensor(shape=(4,), flags=READ_ONLY)
    b = TACK.adopt(h.address)
    assert b.writable is False
    with pytest.raises(RuntimeError):
        b.fill(1)
    del b
    assert h.deleter_calls == 1


@pytest.mark.parametrize("kwargs, error", [
    ({"dtype": (2, 32, 2)}, TypeError),                # lanes != 1
    ({"data": None}, ValueError),                        # null data
    ({"strides": (1, 2)}, ValueError),                   # not C-contiguous
    ({"device": (kDLMetal, 0)}, ValueError),
])
def test_to_py_object_steals_the_tensor_even_when_it_refuses_it(probe, kwargs, error):
    # "The ownership of the tensor is stolen": on failure, the callee has
    # called the deleter, exactly once.
    h = probe.tensor(**kwargs)
    out = ctypes.c_void_p()
    with pytest.raises(error):
        TACK.to_py(h.address, ctypes.byref(out))
    assert out.value is None
    assert h.deleter_calls == 1


def test_to_py_object_of_a_future_major_version_calls_the_deleter_once(probe):
    h = probe.tensor(version=(2, 0))
    with pytest.raises(BufferError):
        TACK.to_py(h.address, ctypes.byref(ctypes.c_void_p()))
    assert h.deleter_calls == 1


def test_to_py_object_with_no_out_deletes_the_tensor(probe):
    h = probe.tensor()
    with pytest.raises(ValueError):
        TACK.to_py(h.address, None)
    assert h.deleter_calls == 1
    with pytest.raises(ValueError):
        TACK.to_py(None, ctypes.byref(ctypes.c_void_p()))


def test_round_trip_through_the_table():
    a = tack.array(np.arange(6, dtype=np.float32))
    before = live()
    b = TACK.adopt(TACK.export(a))
    assert b is not a and b.ptr == a.ptr
    b.fill(7)
    assert (a.to_numpy() == 7).all()
    assert live()["exports"] == before["exports"] + 1
    del b
    assert live()["exports"] == before["exports"]


# --------------------------------------------------------------------------
# dltensor_from_py_object_no_sync


def test_dltensor_borrows_the_arrays_shape():
    a = tack.array(np.arange(24, dtype=np.int32).reshape(4, 6))
    before = live()
    t = DLTensor()
    assert TACK.dltensor(a, ctypes.byref(t)) == 0
    assert t.data == a.ptr and t.byte_offset == 0
    assert (t.device.device_type, t.device.device_id) == (kDLCPU, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (0, 32, 1)
    assert t.ndim == 2 and [t.shape[0], t.shape[1]] == [4, 6]
    assert not t.strides  # NULL: C-contiguous
    # A borrow: nothing exported, nothing retained.
    assert live() == before
    # The shape pointer is the array's own record, stable while it lives.
    t2 = DLTensor()
    TACK.dltensor(a, ctypes.byref(t2))
    assert ctypes.addressof(t.shape.contents) == ctypes.addressof(t2.shape.contents)


def test_dltensor_of_a_zero_dimensional_array():
    a = tack.zeros((), tack.f64)
    t = DLTensor()
    assert TACK.dltensor(a, ctypes.byref(t)) == 0
    assert t.ndim == 0 and t.data == a.ptr and (t.dtype.code, t.dtype.bits) == (2, 64)


def test_dltensor_refuses_anything_but_a_tack_array():
    with pytest.raises(TypeError, match="tack.Array"):
        TACK.dltensor(np.zeros(3), ctypes.byref(DLTensor()))
    with pytest.raises(ValueError):
        TACK.dltensor(tack.zeros(1), None)


# --------------------------------------------------------------------------
# managed_tensor_allocator


def test_allocator_makes_a_zeroed_tack_array():
    before = live()
    address, errors = TACK.allocate((3, 5), dtype=(0, 16, 1))
    assert not errors
    m = versioned(address)
    t = m.dl_tensor
    assert (m.version.major, m.flags) == (1, 0)
    assert (t.device.device_type, t.ndim, t.dtype.code, t.dtype.bits) == (kDLCPU, 2, 0, 16)
    assert [t.shape[0], t.shape[1]] == [3, 5] and [t.strides[0], t.strides[1]] == [5, 1]
    data = np.ctypeslib.as_array((ctypes.c_int16 * 15).from_address(t.data))
    assert (data == 0).all()
    after = live()
    assert after["arrays"] == before["arrays"] + 1 and after["exports"] == before["exports"] + 1
    # The tensor owns the array: the deleter frees it.
    delete(address)
    assert live() == before


def test_allocated_tensor_becomes_a_tack_array():
    address, _ = TACK.allocate((4,))
    b = TACK.adopt(address)
    assert b.shape == (4,) and b.dtype == "float32" and (b.to_numpy() == 0).all()
    del b


@pytest.mark.parametrize("kwargs, kind, says", [
    ({"dtype": (10, 8, 1)}, "TypeError", ""),             # no float8_e4m3fn in Tack
    ({"dtype": (2, 32, 4)}, "TypeError", ""),             # vector lanes
    ({"device": (kDLMetal, 0)}, "ValueError", ""),
    ({"device": (99, 0)}, "ValueError", ""),
    ({"device": (kDLCUDAHost, 0)}, "ValueError", "prototype"),  # pinned memory is not plain host memory
    ({"shape": (2, -1)}, "ValueError", ""),
])
def test_allocator_reports_through_set_error(kwargs, kind, says):
    before = live()
    shape = kwargs.pop("shape", (2, 2))
    address, errors = TACK.allocate(shape, **kwargs)
    assert address is None
    assert len(errors) == 1
    ctx, got_kind, message = errors[0]
    assert ctx == 0x5EED and got_kind == kind and message and says in message
    assert live() == before


def test_allocator_with_no_prototype_reports_an_error():
    errors = []
    set_error = SetError(lambda ctx, kind, message: errors.append(kind.decode()))
    assert TACK.allocator(None, ctypes.byref(ctypes.c_void_p()), None, set_error) == -1
    assert errors == ["ValueError"]
    # A consumer without SetError still gets -1, and nothing crashes.
    proto = DLTensor()
    proto.ndim = 1
    assert TACK.allocator(ctypes.byref(proto), ctypes.byref(ctypes.c_void_p()), None, SetError()) == -1


# --------------------------------------------------------------------------
# current_work_stream


def test_current_work_stream_is_null_for_host_memory():
    for device_type in (kDLCPU, kDLCUDAHost):
        out = ctypes.c_void_p(1234)
        assert TACK.stream(device_type, 0, ctypes.byref(out)) == 0
        assert out.value is None


def test_current_work_stream_of_an_unknown_device_is_a_value_error():
    out = ctypes.c_void_p()
    for device_type in (kDLMetal, 99):
        with pytest.raises(ValueError):
            TACK.stream(device_type, 0, ctypes.byref(out))
    with pytest.raises(ValueError):
        TACK.stream(kDLCPU, 0, None)


# --------------------------------------------------------------------------
# tack.from_dlpack takes Tack's own table


def test_tack_from_dlpack_of_a_tack_array_is_zero_copy():
    a = tack.array(np.arange(5, dtype=np.float32))
    before = live()
    b = tack.from_dlpack(a)
    assert b is not a and b.ptr == a.ptr
    assert live()["exports"] == before["exports"] + 1
    del b
    assert live()["exports"] == before["exports"]


class Wrapper:
    """A producer over a Tack array that publishes Tack's table on its type
    (which refuses it: not a tack.Array), so imports fall back to the
    __dlpack__ it forwards."""

    __dlpack_c_exchange_api__ = tack.Array.__dlpack_c_exchange_api__

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_a_type_without_requires_grad_is_not_asked_per_import():
    # The import reads requires_grad only from types that have it (for
    # PyTorch's sake); others are not asked on every import.
    looked_up = []

    class Producer(Wrapper):
        def __getattr__(self, name):
            looked_up.append(name)
            raise AttributeError(name)

    a = tack.array(np.arange(3, dtype=np.float32))
    for _ in range(3):
        # Tack's table refuses a Producer (TypeError, cleared): the import
        # falls back to __dlpack__.
        b = tack.from_dlpack(Producer(a))
        assert b.ptr == a.ptr
        del b
    assert "requires_grad" not in looked_up


def test_only_pytorch_tensors_are_asked_for_lazy_bits():
    # is_conj() and is_neg() mean PyTorch's bits on PyTorch's tensor types
    # alone: another producer's methods of those names are never called.
    asked = []

    class Producer(Wrapper):
        def is_conj(self):
            asked.append("is_conj")
            return True

        def is_neg(self):
            asked.append("is_neg")
            return True

    a = tack.array(np.arange(3, dtype=np.complex64))
    assert tack.from_dlpack(Producer(a)).ptr == a.ptr
    assert asked == []


def test_a_producer_type_is_looked_up_once_until_it_changes():
    # The table and requires_grad are read from the type once and kept
    # while the type's version tag stands; modifying the type renews it.
    lookups = []

    class Counting(type):
        def __getattribute__(cls, name):
            if name in ("__dlpack_c_exchange_api__", "requires_grad"):
                lookups.append(name)
            return super().__getattribute__(name)

    class Producer(Wrapper, metaclass=Counting):
        pass

    a = tack.array(np.arange(3, dtype=np.float32))
    assert tack.from_dlpack(Producer(a)).ptr == a.ptr
    first = len(lookups)
    assert first >= 1
    for _ in range(5):
        assert tack.from_dlpack(Producer(a)).ptr == a.ptr
    assert len(lookups) == first, f"the type was looked up again on every import: {lookups}"
    Producer.note = "changed"
    assert tack.from_dlpack(Producer(a)).ptr == a.ptr
    assert len(lookups) > first, "a modified type was not looked up again"


# --------------------------------------------------------------------------
# against PyTorch's table

@pytest.fixture(scope="module")
def torch_table():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this PyTorch publishes no C exchange table (2.10+ does)")
    return torch, Table(torch.Tensor)


def test_tack_tensor_becomes_a_torch_tensor(torch_table):
    torch, table = torch_table
    a = tack.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    before = live()
    t = table.adopt(TACK.export(a))
    assert isinstance(t, torch.Tensor)
    assert t.data_ptr() == a.ptr and tuple(t.shape) == (3, 4) and t.dtype == torch.float32
    t.mul_(2)
    np.testing.assert_array_equal(a.to_numpy(), np.arange(12).reshape(3, 4) * 2)
    del a
    assert live()["arrays"] == before["arrays"]  # PyTorch holds it now
    del t
    after = live()
    assert after["exports"] == before["exports"] and after["arrays"] == before["arrays"] - 1


def test_torch_tensor_becomes_a_tack_array(torch_table):
    torch, table = torch_table
    t = torch.arange(10, dtype=torch.int64)
    b = TACK.adopt(table.export(t))
    assert b.ptr == t.data_ptr() and b.shape == (10,) and b.dtype == "int64"
    b.fill(3)
    assert bool((t == 3).all())
    del t  # the tensor's memory stays with the Tack array
    assert (b.to_numpy() == 3).all()
    del b


def test_each_table_allocates_for_the_other(torch_table):
    torch, table = torch_table
    before = live()
    address, errors = TACK.allocate((2, 3))
    t = table.adopt(address)
    assert tuple(t.shape) == (2, 3) and bool((t == 0).all())
    assert live()["arrays"] == before["arrays"] + 1
    del t
    assert live() == before
    address, errors = table.allocate((5,), dtype=(0, 32, 1))
    assert not errors
    b = TACK.adopt(address)
    assert b.shape == (5,) and b.dtype == "int32"
    del b


def test_torch_and_tack_agree_on_host_streams(torch_table):
    torch, table = torch_table
    for t in (table, TACK):
        out = ctypes.c_void_p(1)
        assert t.stream(kDLCPU, 0, ctypes.byref(out)) == 0 and out.value is None


# --------------------------------------------------------------------------
# CUDA, on the simulated driver


def test_cuda_table_functions_order_nothing_and_name_tacks_stream(cuda_sim, tmp_path):
    out = run(cuda_sim, """
        from conftest import kDLCUDA
        from exchange_table import TACK, versioned, delete
        from cudasim import CONSUMER
        exec(CONSUMER)
        s = ctypes.c_void_p()
        assert TACK.stream(kDLCUDA, 0, ctypes.byref(s)) == 0
        assert s.value  # Tack's own stream on cuda:0
        s1 = ctypes.c_void_p()
        assert TACK.stream(kDLCUDA, 1, ctypes.byref(s1)) == 0
        assert s1.value and s1.value != s.value
        try:
            TACK.stream(kDLCUDA, 7, ctypes.byref(s1))
        except RuntimeError as e:
            assert "no CUDA device 7" in str(e), e
        else:
            raise AssertionError("no error")

        # The allocator hands out zeroed device memory.
        address, errors = TACK.allocate((16,), device=(kDLCUDA, 0))
        assert not errors
        t = versioned(address).dl_tensor
        assert (t.device.device_type, t.device.device_id) == (kDLCUDA, 0)
        assert device_bytes(t.data, 64) == bytes(64)
        delete(address)

        k = kernel()
        y = tack.zeros(100, device="cuda")
        k(1.0, y)
        waits = host_waits()
        address = TACK.export(y)
        # No sync: not on the host, not with an event; the launch is queued.
        assert host_waits() == waits and stat("event_waits") == 0
        assert stat("launches_done") == 0
        assert versioned(address).dl_tensor.data == y.ptr
        # A consumer working on Tack's stream comes after it.
        SIM.cuStreamSynchronize(ctypes.c_void_p(s.value))
        assert stat("launches_done") == 1
        # The tensor may be kept: the buffer is shared from now on.
        k(2.0, y)
        assert stat("launches_done") == 2
        delete(address)

        # The borrowed view marks nothing.
        from conftest import DLTensor
        z = tack.zeros(10, device="cuda")
        v = DLTensor()
        assert TACK.dltensor(z, ctypes.byref(v)) == 0
        assert v.data == z.ptr and v.device.device_type == kDLCUDA
        k(3.0, z)
        assert stat("launches_done") == 2
        print("ran")
    """, TACK_CACHE_DIR=tmp_path, TACK_SIM_CUDA_DEVICES=2)
    if out.startswith("SKIP"):
        pytest.skip(out.strip())
    assert "ran" in out


def test_a_modified_tensor_type_is_looked_up_again(torch_table):
    torch, table = torch_table
    # What the import knows of a type (its table, its requires_grad) is
    # kept while the type is unchanged, and read again once it changes.
    dunder_calls, grad_reads = [], []

    class Sub(torch.Tensor):
        pass

    t = torch.arange(4, dtype=torch.float32).as_subclass(Sub)
    b = tack.from_dlpack(t)
    assert b.ptr == t.data_ptr()
    del b

    def reads_false(self):
        grad_reads.append(1)
        return False

    Sub.requires_grad = property(reads_false)
    b = tack.from_dlpack(t)
    assert grad_reads == [1] and b.ptr == t.data_ptr()
    del b

    # A tensor that says it requires grad goes to __dlpack__.
    def dunder(self, **kwargs):
        dunder_calls.append(kwargs)
        return torch.Tensor.__dlpack__(self.as_subclass(torch.Tensor), **kwargs)

    Sub.requires_grad = property(lambda self: True)
    Sub.__dlpack__ = dunder
    b = tack.from_dlpack(t)
    assert len(dunder_calls) == 1 and b.ptr == t.data_ptr()
    del b
