"""copy.copy, copy.deepcopy and pickle of Tack arrays, dtypes and devices.

A copy is new memory with the same values on the same device. A pickle goes
through the host: it carries the values, dtype, shape, the device's name and
the writable flag. From protocol 5 the values are a PickleBuffer over the
array's own memory, so an out-of-band pickle copies nothing and an in-band
one copies the values once into the stream; the unpickled array uses the
buffer it is given in place when it can. The device cases on the simulated
CUDA driver are in test_cuda_ecosystem.py.
"""

import copy
import ctypes
import gc
import pickle

import numpy as np
import pytest

import tack
from conftest import DTYPE_NAMES, live_counts, sample


def address_of(buffer):
    """The address of a writable buffer's first byte (bytearray, NumPy)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def bytes_address(b):
    """The address of a bytes object's first byte."""
    return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value


# --------------------------------------------------------------------------
# copy


@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_a_copy_is_new_memory_with_the_same_values(name, how):
    values = sample(name, (3, 4))
    a = tack.array(values)
    b = how(a)
    assert type(b) is tack.Array
    assert b.ptr != a.ptr
    assert (b.shape, b.dtype, b.device) == (a.shape, a.dtype, a.device)
    np.testing.assert_array_equal(b.to_numpy(), values)
    b.fill(0)
    np.testing.assert_array_equal(a.to_numpy(), values)


def test_a_copy_of_a_read_only_array_is_writable_and_independent():
    n = np.arange(4, dtype=np.float32)
    ro = tack.array_from_ptr(n.ctypes.data, "float32", 4)
    for b in (copy.copy(ro), copy.deepcopy(ro)):
        assert b.writable and b.ptr != n.ctypes.data
        b.fill(9)
        assert n.tolist() == [0, 1, 2, 3]


def test_deepcopy_keeps_shared_references_shared():
    a = tack.zeros(3)
    first, second = copy.deepcopy([a, a])
    assert first is second and first.ptr != a.ptr


def test_copies_of_empty_and_zero_dimensional_arrays():
    for a in (tack.zeros(0), tack.zeros((0, 5), "int8"), tack.array(np.float64(3.5))):
        b = copy.copy(a)
        assert b.shape == a.shape and b.dtype == a.dtype
        np.testing.assert_array_equal(b.to_numpy(), a.to_numpy())


def test_copying_leaves_nothing_behind():
    a = tack.array(np.arange(100, dtype=np.int64))
    gc.collect()
    base = live_counts()
    for _ in range(50):
        copy.copy(a)
        copy.deepcopy(a)
    gc.collect()
    assert live_counts() == base


# --------------------------------------------------------------------------
# pickle


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_pickle_round_trips_values_dtype_shape_and_device(name, protocol):
    values = sample(name, (2, 3, 2))
    a = tack.array(values)
    b = pickle.loads(pickle.dumps(a, protocol=protocol))
    assert (b.shape, b.dtype, b.device, b.writable) == (a.shape, a.dtype, a.device, True)
    np.testing.assert_array_equal(b.to_numpy(), values)
    b.fill(1)
    np.testing.assert_array_equal(a.to_numpy(), values)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_read_only_array_comes_back_read_only(protocol):
    n = np.arange(6, dtype=np.int16)
    ro = tack.array_from_ptr(n.ctypes.data, "int16", (2, 3))
    b = pickle.loads(pickle.dumps(ro, protocol=protocol))
    assert not b.writable
    np.testing.assert_array_equal(b.to_numpy(), n.reshape(2, 3))
    with pytest.raises(RuntimeError):
        b.fill(0)


def test_protocol_5_hands_out_the_arrays_own_memory_and_restores_it_in_place():
    a = tack.array(np.arange(1 << 16, dtype=np.float64))
    buffers = []
    data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
    assert len(data) < 300  # the values are not in the stream
    assert len(buffers) == 1
    raw = buffers[0].raw()
    assert raw.nbytes == a.nbytes and not raw.readonly
    assert np.frombuffer(raw, np.uint8).ctypes.data == a.ptr  # nothing copied to pickle
    b = pickle.loads(data, buffers=buffers)
    assert b.ptr == a.ptr and b.writable  # nor to unpickle
    del a, raw, buffers
    gc.collect()
    np.testing.assert_array_equal(b.to_numpy(), np.arange(1 << 16, dtype=np.float64))


def test_an_out_of_band_buffer_from_elsewhere_is_used_in_place_and_kept_alive():
    a = tack.array(np.arange(8, dtype=np.int32))
    buffers = []
    data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
    received = bytearray(buffers[0].raw())  # as a transport would deliver it
    b = pickle.loads(data, buffers=[received])
    assert b.ptr == address_of(received) and b.writable
    del received
    gc.collect()
    np.testing.assert_array_equal(b.to_numpy(), np.arange(8, dtype=np.int32))


def test_a_read_only_buffer_for_a_writable_array_is_copied_not_aliased():
    a = tack.array(np.arange(8, dtype=np.int32))
    buffers = []
    data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
    frozen = bytes(buffers[0].raw())
    b = pickle.loads(data, buffers=[frozen])
    assert b.writable and b.ptr != bytes_address(frozen)
    b.fill(5)
    assert frozen == np.arange(8, dtype=np.int32).tobytes()


def test_a_writable_buffer_for_a_read_only_array_gives_a_read_only_array():
    n = np.arange(4, dtype=np.float32)
    ro = tack.array_from_ptr(n.ctypes.data, "float32", 4)
    buffers = []
    data = pickle.dumps(ro, protocol=5, buffer_callback=buffers.append)
    assert buffers[0].raw().readonly
    received = bytearray(buffers[0].raw())
    b = pickle.loads(data, buffers=[received])
    assert b.ptr == address_of(received) and not b.writable


def test_an_in_band_protocol_5_pickle_is_read_into_its_array_once():
    a = tack.array(np.arange(1000, dtype=np.float32))
    data = pickle.dumps(a, protocol=5)
    assert a.nbytes < len(data) < a.nbytes + 300  # the values once
    # What the unpickler passes: a bytearray of the values, which becomes
    # the array's memory instead of being copied again.
    function, args = a.__reduce_ex__(5)
    payload = bytearray(bytes(args[0].raw()))
    b = function(payload, *args[1:])
    assert b.ptr == address_of(payload)
    np.testing.assert_array_equal(b.to_numpy(), a.to_numpy())


def test_misaligned_values_are_copied_into_aligned_memory():
    backing = bytearray(8 * 4 + 1)
    view = memoryview(backing)[1:]
    np.frombuffer(view, np.float64)[:] = np.arange(4)
    b = tack._tack._rebuild_array(view, "float64", (4,), "cpu", True)
    assert b.ptr % 8 == 0 and b.ptr != address_of(backing) + 1
    assert b.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_zero_size_and_zero_dimensional_arrays_pickle():
    for protocol in (2, 5):
        for a in (tack.zeros(0), tack.zeros((3, 0), "uint16"), tack.array(np.int8(-4))):
            b = pickle.loads(pickle.dumps(a, protocol=protocol))
            assert b.shape == a.shape and b.dtype == a.dtype
            np.testing.assert_array_equal(b.to_numpy(), a.to_numpy())


def test_pickling_leaves_nothing_behind():
    a = tack.array(np.arange(64, dtype=np.float32))
    gc.collect()
    base = live_counts()
    for protocol in (2, 4, 5):
        for _ in range(20):
            pickle.loads(pickle.dumps(a, protocol=protocol))
    gc.collect()
    assert live_counts() == base


# A pickle is input like any other: every argument of the rebuild is checked.
BAD_PICKLES = [
    # values, dtype, shape, device, writable, exception, words
    (b"\0" * 8, "float32", (3,), "cpu", True, ValueError, "8 bytes of values"),
    (b"\0" * 8, "float32", (1,), "cpu", True, ValueError, "8 bytes of values"),
    (b"\0" * 8, "float32", (-2,), "cpu", True, ValueError, "negative"),
    (b"\0" * 8, "float32", (1 << 62, 1 << 62), "cpu", True, ValueError, "overflow"),
    (b"\0" * 8, "float8", (8,), "cpu", True, TypeError, "unsupported dtype"),
    (b"\0" * 8, "float32", "ab", "cpu", True, TypeError, "shape"),
    (b"\0" * 8, "float32", (2,), "nosuch", True, ValueError, "nosuch"),
    (b"\0" * 8, "float32", (2,), 0, True, TypeError, "str"),
    ("12345678", "float32", (2,), "cpu", True, TypeError, "buffer"),
    (np.zeros((4, 4), np.float32)[:, ::2], "float32", (8,), "cpu", True, ValueError, "C-contiguous"),
]


@pytest.mark.parametrize("values, dtype, shape, device, writable, error, words", BAD_PICKLES)
def test_a_bad_pickle_is_a_clear_error_that_leaves_nothing(values, dtype, shape, device, writable, error, words):
    gc.collect()
    base = live_counts()
    with pytest.raises(error, match=words):
        tack._tack._rebuild_array(values, dtype, shape, device, writable)
    gc.collect()
    assert live_counts() == base


# --------------------------------------------------------------------------
# dtypes and devices


@pytest.mark.parametrize("short", ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64"])
def test_dtypes_pickle_and_copy_as_the_same_objects(short):
    d = getattr(tack, short)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(d, protocol=protocol)) is d
    assert copy.copy(d) is d and copy.deepcopy(d) is d


def test_the_cpu_device_pickles_by_name():
    d = tack.device("cpu")
    assert pickle.loads(pickle.dumps(d)) is d
    assert copy.deepcopy(d) is d
