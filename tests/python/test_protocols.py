"""The buffer protocol, __array_interface__ and __cuda_array_interface__,
both ways: Tack arrays read by NumPy, memoryview and the struct module, and
tack.asarray sharing the memory of anything that speaks DLPack, the CUDA
Array Interface or the buffer protocol.

Zero-copy is asserted by pointer identity and by writes seen on the other
side; lifetime by dropping one side and reading, and by Tack's live-object
counts. The CUDA cases run in fresh interpreters on the simulated driver
(see test_cuda.py), the HIP case on the simulated HIP runtime.
"""

import array
import ctypes
import gc
import mmap
import os
import struct
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import simdriver
import tack
from conftest import NUMPY_NAMES
from cudasim import run

asarray = tack._tack.asarray

# bfloat16's protocols are NumPy-less (test_dtypes.py).
DTYPES = NUMPY_NAMES


def live():
    return dict(tack._tack.live_counts())


def address_of(buffer_owner):
    """The address of a writable exporter's memory, as ctypes sees it."""
    return ctypes.addressof((ctypes.c_char * 1).from_buffer(buffer_owner))


def read_only_array(values):
    """A read-only Tack array: a DLPack import of a read-only NumPy array."""
    n = np.array(values)
    n.flags.writeable = False
    a = tack.from_dlpack(n)
    assert a.writable is False
    return a


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


PyBUF_WRITABLE = 0x0001
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def request_writable_buffer(obj):
    """PyObject_GetBuffer(obj, PyBUF_WRITABLE), released at once; raises what
    the exporter raises (ctypes.pythonapi passes Python errors through)."""
    view = _PyBuffer()
    _get_buffer(obj, ctypes.byref(view), PyBUF_WRITABLE)
    readonly = view.readonly
    _release_buffer(ctypes.byref(view))
    return readonly


# --------------------------------------------------------------------------
# Tack -> others: the buffer protocol and __array_interface__


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_reads_a_host_array_in_place(dtype):
    a = tack.array(np.arange(12).reshape(3, 4), dtype=dtype)
    n = np.asarray(a)
    assert n.ctypes.data == a.ptr
    assert n.dtype == np.dtype(dtype) and n.shape == (3, 4) and n.flags.c_contiguous
    assert n.flags.writeable
    assert (n == np.arange(12).reshape(3, 4).astype(dtype)).all()
    # One memory: a write on either side is seen on the other.
    n[1, 2] = 100
    assert a.to_numpy()[1, 2] == np.array(100).astype(dtype)
    a.fill(7)
    assert (n == np.array(7).astype(dtype)).all()


def test_memoryview_describes_the_array():
    a = tack.array(np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    m = memoryview(a)
    assert (m.format, m.itemsize, m.ndim) == ("i", 4, 3)
    assert m.shape == (2, 3, 4) and m.strides == (48, 16, 4)
    assert m.readonly is False and m.nbytes == 96 and m.c_contiguous
    assert m[1, 2, 3] == 23
    m[0, 0, 1] = -5
    assert a.to_numpy()[0, 0, 1] == -5
    m.release()


def test_zero_d_and_empty_arrays_export():
    a = tack.array(np.float64(2.5))
    m = memoryview(a)
    assert m.ndim == 0 and m.shape == () and m[()] == 2.5
    m.release()
    n = np.asarray(a)
    assert n.shape == () and n.ctypes.data == a.ptr and n[()] == 2.5
    e = tack.zeros((0, 3), tack.f32)
    assert np.asarray(e).shape == (0, 3) and memoryview(e).nbytes == 0


def test_struct_and_other_buffer_readers_share_the_memory():
    a = tack.zeros(4, tack.u32)
    struct.pack_into("<II", a, 4, 11, 12)  # a writable-buffer request
    assert list(a.to_numpy()) == [0, 11, 12, 0]
    assert struct.unpack_from("<4I", a) == (0, 11, 12, 0)
    assert bytes(a) == np.array([0, 11, 12, 0], np.uint32).tobytes()
    assert address_of(a) == a.ptr


def test_read_only_arrays_export_read_only_buffers():
    ro = read_only_array(np.arange(4, dtype=np.float32))
    m = memoryview(ro)
    assert m.readonly is True
    with pytest.raises(TypeError):
        m[0] = 1.0
    m.release()
    n = np.asarray(ro)
    assert n.ctypes.data == ro.ptr and n.flags.writeable is False
    with pytest.raises(ValueError):
        n[0] = 1.0
    with pytest.raises(BufferError, match="read-only"):
        request_writable_buffer(ro)
    with pytest.raises(TypeError):
        struct.pack_into("f", ro, 0, 1.0)
    assert ro.__array_interface__["data"] == (ro.ptr, True)
    # The same request on a writable array is granted.
    assert request_writable_buffer(tack.zeros(4)) == 0
    assert (ro.to_numpy() == np.arange(4)).all()


def test_a_buffer_keeps_the_array_alive():
    before = live()["arrays"]
    a = tack.array(np.arange(6, dtype=np.float64))
    m = memoryview(a)
    n = np.asarray(a)
    pointer = a.ptr
    del a
    gc.collect()
    # Both readers still hold the Tack array, so its memory is not freed.
    assert live()["arrays"] == before + 1
    assert list(m) == [0, 1, 2, 3, 4, 5]
    n[5] = 50
    assert m[5] == 50 and n.ctypes.data == pointer
    m.release()
    assert live()["arrays"] == before + 1
    del n
    gc.collect()
    assert live()["arrays"] == before


def test_array_interface_of_a_host_array():
    a = tack.zeros((2, 5), tack.i16)
    ai = a.__array_interface__
    assert ai == {"shape": (2, 5), "typestr": "<i2", "data": (a.ptr, False), "strides": None, "version": 3}
    assert tack.zeros(3, tack.u8).__array_interface__["typestr"] == "|u1"
    assert [tack.zeros(1, d).__array_interface__["typestr"] for d in DTYPES] == [
        np.dtype(d).str for d in DTYPES]


def test_numpy_reads_the_array_interface_and_holds_the_producer():
    class OnlyInterface:
        # An object that speaks __array_interface__ alone, as a consumer
        # reading the dictionary sees Tack's array.
        def __init__(self, a):
            self.a = a

        @property
        def __array_interface__(self):
            return self.a.__array_interface__

    before = live()["arrays"]
    n = np.asarray(OnlyInterface(tack.array(np.arange(5, dtype=np.int64))))
    gc.collect()
    assert live()["arrays"] == before + 1  # n's base holds the producer
    assert list(n) == [0, 1, 2, 3, 4]
    assert n.ctypes.data == n.base.a.ptr
    del n
    gc.collect()
    assert live()["arrays"] == before


def test_array_dunder_gives_a_view_or_a_copy():
    a = tack.array(np.arange(4, dtype=np.float32))
    v = a.__array__()
    assert v.ctypes.data == a.ptr and v.tolist() == [0, 1, 2, 3]
    c = a.__array__(copy=True)
    assert c.ctypes.data != a.ptr and c.tolist() == [0, 1, 2, 3]
    d = a.__array__(np.float64)
    assert d.dtype == np.float64 and d.tolist() == [0, 1, 2, 3]
    del v, c, d


def test_host_arrays_have_no_cuda_array_interface():
    a = tack.zeros(3)
    assert not hasattr(a, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="not CUDA memory"):
        a.__cuda_array_interface__


# --------------------------------------------------------------------------
# others -> Tack: tack.asarray


def test_asarray_is_exported_by_the_package():
    assert tack.asarray is tack._tack.asarray


def test_asarray_of_a_tack_array_is_the_array():
    a = tack.zeros(3)
    assert asarray(a) is a
    assert asarray(a, device="cpu") is a
    assert asarray(a, device=a.device) is a


def test_asarray_prefers_dlpack():
    n = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = asarray(n)
    assert a.ptr == n.ctypes.data and a.shape == (2, 3) and a.dtype == tack.f32 and a.writable
    n[0, 0] = 9
    assert a.to_numpy()[0, 0] == 9

    calls = []

    class Both:
        # Speaks DLPack and the CUDA Array Interface, and on Python 3.12+
        # the buffer protocol (__buffer__): DLPack must win.
        def __init__(self):
            self.n = np.arange(4, dtype=np.int32)

        def __dlpack__(self, **kwargs):
            calls.append("dlpack")
            return self.n.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.n.__dlpack_device__()

        def __buffer__(self, flags):
            calls.append("buffer")
            return memoryview(self.n)

        @property
        def __cuda_array_interface__(self):
            calls.append("cai")
            raise AssertionError("CAI read although DLPack was offered")

    b = Both()
    t = asarray(b)
    assert calls == ["dlpack"] and t.ptr == b.n.ctypes.data
    # A capsule is DLPack too.
    c = asarray(np.ones(3).__dlpack__())
    assert c.dtype == tack.f64 and (c.to_numpy() == 1).all()


def test_asarray_of_a_read_only_dlpack_producer_is_read_only():
    n = np.arange(3.0)
    n.flags.writeable = False
    a = asarray(n)
    assert a.ptr == n.ctypes.data and a.writable is False
    with pytest.raises(RuntimeError):
        a.fill(0)


@pytest.mark.parametrize(
    "typecode,dtype",
    [("b", "i8"), ("B", "u8"), ("h", "i16"), ("H", "u16"), ("i", "i32"), ("I", "u32"), ("l", "i64"),
     ("L", "u64"), ("q", "i64"), ("Q", "u64"), ("f", "f32"), ("d", "f64")],
)
def test_asarray_wraps_a_buffer_in_place(typecode, dtype):
    source = array.array(typecode, range(1, 7))
    a = asarray(source)
    assert a.dtype.name == getattr(tack, dtype).name
    assert a.shape == (6,) and a.writable and a.device.backend == "cpu"
    assert a.ptr == source.buffer_info()[0]
    a.fill(3)
    assert list(source) == [3] * 6
    source[0] = 9
    assert a.to_numpy()[0] == 9


def test_asarray_of_bytes_and_bytearray():
    ba = bytearray(range(8))
    a = asarray(ba)
    assert a.dtype == tack.u8 and a.shape == (8,) and a.writable and a.ptr == address_of(ba)
    a.fill(5)
    assert ba == bytearray([5] * 8)
    ro = asarray(b"\x01\x02\x03")
    assert ro.writable is False and list(ro.to_numpy()) == [1, 2, 3]
    with pytest.raises(RuntimeError):
        ro.fill(0)
    # A read-only import exports read-only again.
    assert memoryview(ro).readonly is True
    with pytest.raises(BufferError):
        request_writable_buffer(ro)


def test_asarray_keeps_the_shape_of_a_multidimensional_buffer():
    ba = bytearray(48)
    m = memoryview(ba).cast("B", (2, 24)).cast("B").cast("i", (3, 4))
    a = asarray(m)
    assert a.shape == (3, 4) and a.dtype == tack.i32 and a.ptr == address_of(ba)
    del a
    m.release()  # possible only once the array has let go of its export
    s = asarray(memoryview(bytearray(8)).cast("d", ()))
    assert s.shape == () and s.dtype == tack.f64


def test_asarray_keeps_the_exporter_alive():
    source = array.array("d", [1.5, 2.5, 3.5, 4.5])
    ref = weakref.ref(source)
    a = asarray(source)
    v = a.reshape(2, 2)
    del source
    gc.collect()
    assert ref() is not None
    del a
    gc.collect()
    # The view carries the hold: the exporter is still there, and read.
    assert ref() is not None
    assert (v.to_numpy() == [[1.5, 2.5], [3.5, 4.5]]).all()
    del v
    gc.collect()
    assert ref() is None


def test_asarray_releases_the_buffer_with_the_last_array():
    ba = bytearray(16)
    a = asarray(ba)
    n = np.asarray(a)  # a reader of the Tack array holds it, and so the export
    with pytest.raises(BufferError):
        ba.append(0)  # a bytearray cannot resize while exported
    del a
    gc.collect()
    with pytest.raises(BufferError):
        ba.append(0)
    del n
    gc.collect()
    ba.append(0)
    assert len(ba) == 17


def test_asarray_refusals_release_the_buffer_and_change_nothing():
    before = live()
    ba = bytearray(12)
    cases = [
        (memoryview(ba)[::2], ValueError, "C-contiguous"),
        (memoryview(ba)[:8].cast("P"), TypeError, "no Tack dtype"),
        (memoryview(ba).cast("c"), TypeError, "no Tack dtype"),
        (memoryview(np.arange(3, dtype=">i4")), TypeError, "byte order"),
        (memoryview(ba)[1:9].cast("f"), ValueError, "aligned"),
    ]
    for obj, exc, match in cases:
        with pytest.raises(exc, match=match):
            asarray(obj)
        if isinstance(obj, memoryview):
            obj.release()
    ba.append(0)  # nothing still holds an export of it
    assert live() == before


def test_asarray_of_a_memory_map_is_page_aligned_and_shared(tmp_path):
    path = tmp_path / "data"
    path.write_bytes(np.arange(1024, dtype=np.float32).tobytes())
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
    a = asarray(mm).reshape(-1)
    assert a.dtype == tack.u8 and a.nbytes == 4096 and a.ptr % mmap.PAGESIZE == 0
    f32 = asarray(memoryview(mm).cast("f"))
    assert f32.ptr == a.ptr and f32.to_numpy()[1023] == 1023
    f32.fill(2.0)
    del a, f32
    gc.collect()
    mm.flush()
    mm.close()  # closing needs every export released
    assert np.frombuffer(path.read_bytes(), np.float32)[7] == 2.0


def test_asarray_refuses_objects_that_speak_nothing():
    for obj in ([1, 2, 3], 3, "abc", None, object()):
        with pytest.raises(TypeError, match="speaks none of"):
            asarray(obj)
    with pytest.raises(TypeError):
        asarray()
    with pytest.raises(TypeError):
        asarray(b"", stream=1)


def test_asarray_passes_on_a_producers_own_errors():
    class Broken:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("the producer failed")

    with pytest.raises(RuntimeError, match="the producer failed"):
        asarray(Broken())


def test_a_buffer_import_released_on_a_thread_without_python(probe):
    """A C consumer of a DLPack export of the import may release it on a
    thread of its own: the hold takes the GIL there."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    set_name = ctypes.pythonapi.PyCapsule_SetName
    set_name.restype, set_name.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]

    before = live()
    ba = bytearray(64)
    a = asarray(ba)
    capsule = a.__dlpack__(max_version=(1, 0))
    tensor = get_pointer(capsule, b"dltensor_versioned")
    assert set_name(capsule, b"used_dltensor_versioned") == 0  # adopted by "C"
    del a, capsule
    gc.collect()
    with pytest.raises(BufferError):
        ba.append(0)
    assert probe.lib.probe_release_on_thread(tensor, 1) == 0
    ba.append(0)
    assert live() == before


def test_a_buffer_import_released_after_the_interpreter_finalized(probe, tmp_path):
    """... or from a C atexit handler, after Python has finalized: the hold
    then leaves the exporter alone instead of taking the GIL."""
    code = textwrap.dedent(f"""
        import ctypes, gc
        import tack
        lib = ctypes.CDLL({probe.path!r})
        lib.probe_release_at_exit.argtypes = [ctypes.c_void_p, ctypes.c_int]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        set_name = ctypes.pythonapi.PyCapsule_SetName
        set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
        keep = []
        for n in range(3):
            a = tack._tack.asarray(bytearray(64))
            cap = a.__dlpack__(max_version=(1, 0))
            assert lib.probe_release_at_exit(get_pointer(cap, b"dltensor_versioned"), 1) == 0
            set_name(cap, b"used_dltensor_versioned")
            del a, cap
        gc.collect()
        print("exported", tack._tack.live_counts()["exports"])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "exported 3" in r.stdout
    assert r.stderr == ""


# --------------------------------------------------------------------------
# CUDA (simulated driver): __cuda_array_interface__ both ways


def test_cuda_arrays_export_the_cuda_array_interface(cuda_sim):
    run(cuda_sim, """
        a = tack.zeros((3, 4), device="cuda")
        cai = a.__cuda_array_interface__
        stream = cai.pop("stream")
        assert cai == {"shape": (3, 4), "typestr": "<f4", "data": (a.ptr, False), "strides": None, "version": 3}
        # The stream is Tack's own on that device: an int, never 0.
        assert isinstance(stream, int) and stream not in (0, 1, 2)
        assert tack.zeros(1, tack.u8, device="cuda").__cuda_array_interface__["stream"] == stream
        other = tack.zeros(1, device="cuda:1").__cuda_array_interface__["stream"]
        assert other != stream
        for d in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"):
            assert tack.zeros(2, d, device="cuda").__cuda_array_interface__["typestr"] == np.dtype(d).str
        ro = tack.array_from_ptr(a.ptr, "float32", 12, device="cuda")
        assert ro.__cuda_array_interface__["data"] == (a.ptr, True)
        # The interface gives 0 for a zero-size array.
        assert tack.zeros((0, 2), device="cuda").__cuda_array_interface__["data"][0] == 0

        # Device memory has no host buffer and no __array_interface__.
        try:
            memoryview(a)
        except BufferError as e:
            assert "cuda:0" in str(e) and "device memory" in str(e), e
        else:
            raise AssertionError("a CUDA array exported a host buffer")
        assert not hasattr(a, "__array_interface__")
        assert hasattr(a, "__cuda_array_interface__")
        # NumPy falls back to __array__, which refuses device memory instead
        # of letting NumPy build a 0-d object array around the Tack array.
        try:
            np.asarray(a)
        except TypeError as e:
            assert "cuda:0" in str(e) and "to_numpy" in str(e), e
        else:
            raise AssertionError("np.asarray accepted a CUDA array")
        try:
            tack.zeros(1).__cuda_array_interface__
        except AttributeError:
            pass
        else:
            raise AssertionError("a host array exported the CUDA Array Interface")
        print("ran")
    """, TACK_SIM_CUDA_DEVICES=2)


def test_cuda_array_interface_export_waits_for_queued_launches(cuda_sim, tmp_path):
    out = run(cuda_sim, """
        try:
            k = tack.Kernel("void add(tack_index i, float a, float *y) { y[i] += a; }", device="cuda")
            k.build("cuda")
        except RuntimeError as e:
            if "NVRTC" in str(e):
                print("SKIP", e)
                sys.exit(0)
            raise
        y = tack.zeros(64, device="cuda")
        k(1.0, y)
        assert stat("launches") == 1 and stat("launches_done") == 0
        y.__cuda_array_interface__
        # The export waited: the consumer may read at once on any stream.
        assert stat("launches_done") == 1
        # ... and the buffer is shared: later launches complete in the call.
        k(1.0, y)
        assert stat("launches_done") == 2
        print("ran")
    """, TACK_CACHE_DIR=tmp_path)
    if out.startswith("SKIP"):
        pytest.skip(out.strip())
    assert "ran" in out


def test_asarray_wraps_the_cuda_array_interface(cuda_sim):
    run(cuda_sim, """
        import weakref
        asarray = tack._tack.asarray
        d = tack.device("cuda")
        ctx = ctypes.c_void_p(d.context_handle)
        tack_stream = tack.zeros(1, device=d).__cuda_array_interface__["stream"]

        class Producer:
            # A CAI-only producer (Numba-style) over memory it owns.
            def __init__(self, n, typestr="<f4", itemsize=4, **extra):
                self.ptr = ctypes.c_uint64()
                assert in_context(ctx, SIM.cuMemAlloc_v2, ctypes.byref(self.ptr), max(n * itemsize, 1)) == 0
                self.cai = {"shape": (n,), "typestr": typestr, "data": (self.ptr.value, False), "version": 3,
                            "strides": None, "stream": None}
                self.cai.update(extra)
            @property
            def __cuda_array_interface__(self):
                return dict(self.cai)
            def __del__(self):
                freed.append(self.ptr.value)
                in_context(ctx, SIM.cuMemFree_v2, self.ptr.value)

        freed = []
        p = Producer(16)
        ptr = p.ptr.value
        ref = weakref.ref(p)
        a = asarray(p)
        assert a.ptr == ptr and a.device is d and a.shape == (16,) and a.dtype == tack.f32 and a.writable
        a.from_numpy(np.arange(16, dtype=np.float32))
        assert np.frombuffer(device_bytes(ptr, 64), np.float32)[15] == 15
        # The array holds the producer, and so the memory.
        v = a.reshape(4, 4)
        del p, a
        gc.collect()
        assert ref() is not None and freed == []
        assert v.to_numpy()[3, 3] == 15
        del v
        gc.collect()
        assert ref() is None and freed == [ptr]

        # Read-only, C-contiguous strides, 2-D, zero-size.
        q = Producer(12)
        q.cai["data"] = (q.ptr.value, True)
        q.cai["shape"] = (3, 4)
        q.cai["strides"] = (16, 4)
        r = asarray(q)
        assert r.writable is False and r.shape == (3, 4) and r.ptr == q.ptr.value
        # The pointer as an integer-like object (numpy.uint64, CUdeviceptr).
        u = Producer(4)
        u.cai["data"] = (np.uint64(u.ptr.value), False)
        assert asarray(u).ptr == u.ptr.value
        z = Producer(0)
        z.cai["data"] = (0, False)
        assert asarray(z).shape == (0,)

        # Tack's own stream and None need nothing.
        syncs, waits = stat("stream_syncs"), stat("event_waits")
        asarray(Producer(4, stream=tack_stream))
        asarray(Producer(4))
        assert stat("stream_syncs") == syncs and stat("event_waits") == waits
        # A producer's stream is waited for on the device, with an event:
        # work it queued before handing the memory over comes before
        # Tack's read, and the host never waits for it.
        SIM.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        SIM.cuStreamDestroy_v2.argtypes = [ctypes.c_void_p]
        SIM.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
        theirs = ctypes.c_void_p()
        assert in_context(ctx, SIM.cuStreamCreate, ctypes.byref(theirs), 1) == 0
        w = Producer(4, typestr="|u1", itemsize=1)
        assert in_context(ctx, SIM.cuMemsetD8Async, w.ptr.value, 7, 4, theirs) == 0
        assert device_bytes(w.ptr.value, 4) != bytes([7] * 4)  # still queued
        w.cai["stream"] = theirs.value
        b = asarray(w)
        assert stat("stream_syncs") == syncs and stat("event_waits") == waits + 1
        assert b.to_numpy().tolist() == [7, 7, 7, 7]
        del b, w
        gc.collect()
        in_context(ctx, SIM.cuStreamDestroy_v2, theirs)

        # Refusals, each leaving no reference to the producer behind.
        bad = Producer(8)
        host = np.zeros(8, np.float32)
        cases = [
            ({"strides": (8,)}, ValueError, "not C-contiguous"),
            ({"typestr": ">f4"}, TypeError, "no Tack dtype"),
            ({"typestr": "<c4"}, TypeError, "no Tack dtype"),
            ({"typestr": "|V2"}, TypeError, "no Tack dtype"),
            ({"version": 4}, ValueError, "versions 0 to 3"),
            ({"mask": object()}, ValueError, "mask"),
            ({"stream": 0}, ValueError, "disallows 0"),
            ({"stream": 1.5}, TypeError, "stream"),
            ({"data": (host.ctypes.data, False)}, ValueError, "host memory"),
            ({"data": ("0x10", False)}, TypeError, "not an int"),
            ({"data": (0, False)}, ValueError, "not a valid address"),
            ({"shape": (-1,)}, ValueError, "negative"),
            ({"shape": (2**62, 2**62)}, ValueError, "overflow"),
            ({"shape": (1,) * 100}, ValueError, "at most 64"),
            ({"shape": 8}, ValueError, "not a tuple"),
            ({"typestr": "xyz"}, TypeError, "no Tack dtype"),
            ({"typestr": 4}, ValueError, "lacks"),
            ({"version": "3"}, ValueError, "versions 0 to 3"),
            ({"data": 8}, ValueError, "lacks"),
            ({"data": (8,)}, ValueError, "lacks"),
            ({"data": (-8, False)}, TypeError, "not an address"),
            ({"data": (2**70, False)}, TypeError, "not an address"),
            ({"stream": -5}, ValueError, "not a stream"),
        ]
        good = dict(bad.cai)
        refs = sys.getrefcount(bad)
        for change, exc, text in cases:
            bad.cai = dict(good, **change)
            try:
                asarray(bad)
            except exc as e:
                assert text in str(e), (change, e)
            else:
                raise AssertionError(f"{change} accepted")
        # Whatever the interface is instead of a dict, or a lookup that
        # raises: the producer's type is named, or its own error passes on.
        class Broken:
            def __init__(self, cai):
                self.cai = cai
            @property
            def __cuda_array_interface__(self):
                if isinstance(self.cai, Exception):
                    raise self.cai
                return self.cai
        for cai, exc, text in [([1, 2], TypeError, "is a list, not a dict"),
                               (None, TypeError, "is a NoneType, not a dict"),
                               ({}, ValueError, "has version None"),
                               ({k: v for k, v in good.items() if k != "shape"}, ValueError, "lacks a shape"),
                               (RuntimeError("the producer broke"), RuntimeError, "the producer broke")]:
            try:
                asarray(Broken(cai))
            except exc as e:
                assert text in str(e), (cai, e)
            else:
                raise AssertionError(f"{cai!r} accepted")
        assert sys.getrefcount(bad) == refs
        bad.cai = good
        try:
            asarray(bad, device="cpu")
        except RuntimeError as e:
            assert "cannot be wrapped by device cpu" in str(e), e
        else:
            raise AssertionError("CUDA memory wrapped on the cpu device")
        # Host memory is not wrapped on a CUDA device either, and the
        # refused export is released.
        ba = bytearray(16)
        try:
            asarray(ba, device="cuda")
        except RuntimeError as e:
            assert "cannot be wrapped by device cuda:0" in str(e), e
        else:
            raise AssertionError("a host buffer wrapped on a CUDA device")
        ba.append(0)

        # A Tack array seen only through the interface comes back in place.
        class Seen:
            def __init__(self, a):
                self.a = a
            @property
            def __cuda_array_interface__(self):
                return self.a.__cuda_array_interface__
        t = tack.zeros(5, tack.i32, device="cuda")
        assert asarray(Seen(t)).ptr == t.ptr

        # DLPack is preferred over the interface; the interface over a buffer.
        calls = []
        class Both(Seen):
            def __dlpack__(self, **kw):
                calls.append("dlpack")
                return self.a.__dlpack__(**kw)
            def __dlpack_device__(self):
                return self.a.__dlpack_device__()
        assert asarray(Both(t)).ptr == t.ptr and calls == ["dlpack"]
        if sys.version_info >= (3, 12):
            class CaiAndBuffer(Seen):
                def __buffer__(self, flags):
                    raise AssertionError("buffer read although the interface was offered")
            assert asarray(CaiAndBuffer(t)).device is d
        del r, q, z, bad, t
        gc.collect()
        print("ran")
    """)


def test_asarray_of_the_cuda_array_interface_on_another_ordinal(cuda_sim):
    """The interface names no device ordinal: a CUDA device other than the
    first may wrap the memory, asked for or as the default, and the pointer
    check, not the ordinal, decides."""
    run(cuda_sim, """
        asarray = tack._tack.asarray
        class Seen:
            def __init__(self, a, **change):
                self.cai = dict(a.__cuda_array_interface__, **change)
            @property
            def __cuda_array_interface__(self):
                return self.cai
        d1 = tack.device("cuda:1")
        t = tack.zeros(6, tack.f32, device=d1)
        a = asarray(Seen(t), device=d1)
        assert a.ptr == t.ptr and a.device is d1
        tack.set_default_device(d1)
        b = asarray(Seen(t))
        assert b.ptr == t.ptr and b.device is d1
        try:
            asarray(Seen(t, strides=(4, 4)))
        except ValueError as e:
            assert "2 strides for 1 dimensions" in str(e), e
        else:
            raise AssertionError("strides of another length accepted")
        print("ran")
    """, TACK_SIM_CUDA_DEVICES=2)


def test_other_device_arrays_refuse_every_host_protocol(tmp_path):
    library, why_not = simdriver.build("hip", tmp_path)
    if library is None:
        pytest.skip(why_not)
    code = textwrap.dedent("""
        import tack
        a = tack.zeros(4, device="hip")
        try:
            memoryview(a)
        except BufferError as e:
            assert "hip" in str(e), e
        else:
            raise AssertionError("a HIP array exported a host buffer")
        assert not hasattr(a, "__array_interface__")
        assert not hasattr(a, "__cuda_array_interface__")
        print("ran")
    """)
    env = dict(os.environ, TACK_HIP_LIBRARY=library, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ran" in r.stdout


def test_asarray_of_a_torch_tensor_shares_it():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (requirements-dev.txt)")
    t = torch.arange(6, dtype=torch.float32)
    a = asarray(t)
    assert a.ptr == t.data_ptr() and a.dtype == tack.f32
    a.fill(4.0)
    assert (t == 4.0).all()
    # ... and PyTorch reads Tack's host arrays through the buffer protocol.
    b = tack.zeros(3, tack.i64)
    u = torch.frombuffer(b, dtype=torch.int64)
    assert u.data_ptr() == b.ptr
