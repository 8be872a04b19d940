"""The HIP backend from Python, against the simulated runtime.

tests/sim/hip_sim.c keeps device memory where the host cannot touch it,
fills fresh memory with 0xA5, tracks a current device per thread and answers
pointer queries as ROCm 6 does. HIP has one context per device for the whole
process, so Tack adopts nothing and a device pointer means the same to every
library.

The cases need an interpreter that starts on the simulator; see simdriver.
"""

import ctypes
import gc

import numpy as np
import pytest

import simdriver
import tack

VARIABLE = "TACK_HIP_LIBRARY"
kDLROCM, kDLROCMHost = 10, 11
hipErrorInvalidValue = 1

test_cases_on_the_simulated_driver = simdriver.rerun_test(__file__, "hip", VARIABLE)


class Simulator:
    """The simulated runtime as another library in the process sees it."""

    def __init__(self, library):
        lib = self.lib = ctypes.CDLL(library)
        lib.tack_sim_hip_stats.restype = ctypes.c_longlong
        lib.tack_sim_hip_stats.argtypes = [ctypes.c_char_p]
        lib.tack_sim_hip_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.tack_sim_hip_host_address.restype = ctypes.c_void_p
        lib.tack_sim_hip_host_address.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
        lib.tack_sim_hip_allocation_device.argtypes = [ctypes.c_uint64]
        for name in ("hipMalloc", "hipHostMalloc", "hipMallocManaged"):
            getattr(lib, name).restype = ctypes.c_int
        lib.hipMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        lib.hipHostMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
        lib.hipMallocManaged.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
        lib.hipFree.argtypes = [ctypes.c_void_p]
        lib.hipHostFree.argtypes = [ctypes.c_void_p]
        lib.hipSetDevice.argtypes = [ctypes.c_int]
        lib.hipGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]

    def stat(self, name):
        value = self.lib.tack_sim_hip_stats(name.encode())
        assert value >= 0, f"the simulator has no counter {name}"
        return value

    def malloc(self, kind, size=256):
        p = ctypes.c_void_p()
        if kind == "device":
            r = self.lib.hipMalloc(ctypes.byref(p), size)
        elif kind == "pinned":
            r = self.lib.hipHostMalloc(ctypes.byref(p), size, 0)
        else:
            r = self.lib.hipMallocManaged(ctypes.byref(p), size, 1)
        assert r == 0 and p.value
        return p.value

    def free(self, kind, ptr):
        assert (self.lib.hipHostFree if kind == "pinned" else self.lib.hipFree)(ptr) == 0

    def current_device(self):
        d = ctypes.c_int(-1)
        assert self.lib.hipGetDevice(ctypes.byref(d)) == 0
        return d.value

    def stored(self, ptr, nbytes):
        addr = self.lib.tack_sim_hip_host_address(ptr, nbytes)
        assert addr, f"{ptr:#x} is not simulated HIP memory"
        return ctypes.string_at(addr, nbytes)


@pytest.fixture(scope="module")
def sim():
    library = simdriver.require(VARIABLE, "tack_sim_hip_stats")
    tack.device("hip")  # Tack initialises the runtime; the cases then act as another library
    return Simulator(library)


@pytest.fixture
def hip(sim):
    return tack.device("hip")


def test_devices_are_the_runtimes(sim, hip):
    assert hip.backend == "hip" and hip.name == "hip:0" and hip.index == 0
    assert not hip.shares_external_context
    assert hip.context_handle is None
    assert hip.dlpack_device() == (kDLROCM, 0)
    assert tack.device("hip:0") is hip
    one = tack.device("hip:1")
    assert one.dlpack_device() == (kDLROCM, 1) and one.memory_domain != hip.memory_domain
    with pytest.raises(RuntimeError, match="hip:5"):
        tack.device("hip:5")


def test_hip_takes_no_options(sim):
    with pytest.raises(ValueError, match="external_context"):
        tack.device("hip", external_context={"driver": 1, "device": 2, "context": 3})


def test_arrays_are_zeroed_on_their_device(sim, hip):
    a = tack.empty((8, 8), dtype="float32", device=hip)
    assert sim.stored(a.ptr, a.nbytes) == bytes(a.nbytes)
    assert sim.lib.tack_sim_hip_allocation_device(a.ptr) == 0
    np.testing.assert_array_equal(a.to_numpy(), np.zeros((8, 8), np.float32))
    # hip:1 allocates on device 1 and leaves the current device alone.
    before = sim.current_device()
    b = tack.zeros(4, device="hip:1")
    assert sim.lib.tack_sim_hip_allocation_device(b.ptr) == 1
    assert sim.current_device() == before


def test_copies_and_frees(sim, hip):
    frees, live = sim.stat("frees"), sim.stat("live_allocs")
    values = np.arange(20, dtype=np.int64).reshape(4, 5)
    a = tack.array(values, device=hip)
    assert sim.stored(a.ptr, a.nbytes) == values.tobytes()
    np.testing.assert_array_equal(a.to_numpy(), values)
    b = a.to_device("hip:1")
    np.testing.assert_array_equal(b.to_numpy(), values)
    c = b.to_device("cpu")
    np.testing.assert_array_equal(c.to_numpy(), values)
    del a, b, c
    gc.collect()
    assert sim.stat("frees") == frees + 2 and sim.stat("live_allocs") == live


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["legacy", "versioned"])
def test_dlpack_round_trip_is_zero_copy(sim, hip, max_version):
    values = np.linspace(0, 1, 9, dtype=np.float64).reshape(3, 3)
    a = tack.array(values, device="hip:1")
    assert a.__dlpack_device__() == (kDLROCM, 1)
    capsule = a.__dlpack__() if max_version is None else a.__dlpack__(max_version=max_version)
    b = tack.from_dlpack(capsule)
    assert b.ptr == a.ptr and b.device is a.device
    del a
    gc.collect()
    np.testing.assert_array_equal(b.to_numpy(), values)
    with pytest.raises(RuntimeError, match="hip:1"):
        tack.from_dlpack(b, device="cpu")
    with pytest.raises(RuntimeError, match="hip:1"):
        tack.from_dlpack(b, device=hip)


def test_another_librarys_tensor_is_wrapped_not_copied(sim, hip, probe):
    ptr = sim.malloc("device", 64)
    t = probe.tensor(shape=(16,), dtype=(2, 32, 1), data=ptr, device=(kDLROCM, 0))
    a = tack.from_dlpack(t.capsule())
    assert a.ptr == ptr and a.device is hip and a.writable
    np.testing.assert_array_equal(a.to_numpy(), np.frombuffer(b"\xa5" * 64, np.float32))
    del a
    gc.collect()
    assert t.deleter_calls == 1
    sim.free("device", ptr)


def test_rocm_host_tensors_go_to_the_cpu_backend(sim, hip, probe):
    t = probe.tensor(shape=(2, 3), dtype=(2, 32, 1), device=(kDLROCMHost, 0))
    a = tack.from_dlpack(t.capsule())
    assert a.device.backend == "cpu"
    np.testing.assert_array_equal(a.to_numpy(), t.expected("float32"))
    with pytest.raises(RuntimeError, match="cpu"):
        tack.from_dlpack(probe.tensor(device=(kDLROCMHost, 0)).capsule(), device=hip)


@pytest.mark.parametrize("kind", ["device", "pinned", "managed"])
def test_array_from_ptr_accepts_memory_a_kernel_can_address(sim, hip, kind):
    ptr = sim.malloc(kind, 64)
    a = tack.array_from_ptr(ptr, "float32", (16,), device=hip)
    assert a.ptr == ptr and not a.writable
    del a
    gc.collect()
    sim.free(kind, ptr)


def test_array_from_ptr_refuses_host_and_other_device_memory(sim, hip):
    host = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="host memory"):
        tack.array_from_ptr(host.ctypes.data, "float32", (16,), device=hip)
    assert sim.lib.tack_sim_hip_stats(b"pointer_queries") > 0
    assert sim.lib.hipSetDevice(1) == 0
    try:
        ptr = sim.malloc("device", 64)
    finally:
        assert sim.lib.hipSetDevice(0) == 0
    with pytest.raises(ValueError, match="hip:1"):
        tack.array_from_ptr(ptr, "float32", (16,), device=hip)
    a = tack.array_from_ptr(ptr, "float32", (16,), device="hip:1")
    assert a.device.name == "hip:1"
    del a
    sim.free("device", ptr)


@pytest.mark.parametrize("kind, space", [("device", "hip"), ("pinned", "hip_pinned"), ("managed", "hip_managed")])
def test_memory_space_is_what_the_runtime_reports(sim, hip, kind, space):
    ptr = sim.malloc(kind, 64)
    queries = sim.stat("pointer_queries")
    assert tack.memory_space(ptr) == space
    assert sim.stat("pointer_queries") > queries  # the runtime answered
    assert tack.memory_space(np.uint64(ptr)) == space
    sim.free(kind, ptr)
    host = np.zeros(4)
    queries = sim.stat("pointer_queries")
    assert tack.memory_space(host.ctypes.data) == "cpu"
    assert sim.stat("pointer_queries") > queries


def test_device_arrays_refuse_slice_writes_and_equality_saying_what_to_do(sim, hip):
    a = tack.zeros(4, device=hip)
    with pytest.raises(TypeError, match=r"a\.from_numpy\(x\)") as info:
        a[1:3] = 1
    assert "hip:0" in str(info.value)
    with pytest.raises(TypeError, match=r"a\.to_numpy\(\)"):
        a == tack.zeros(4, device=hip)  # noqa: B015
    assert a.to_numpy().tolist() == [0, 0, 0, 0]


def test_driver_failures_are_runtime_errors(sim, hip):
    assert sim.lib.tack_sim_hip_fail(b"hipMalloc", hipErrorInvalidValue, 1) == 0
    with pytest.raises(RuntimeError, match="hipMalloc"):
        tack.zeros(4, device=hip)
    a = tack.zeros(4, device=hip)
    assert sim.lib.tack_sim_hip_fail(b"hipMemcpy", hipErrorInvalidValue, 1) == 0
    with pytest.raises(RuntimeError, match="invalid argument"):
        a.to_numpy()


def test_export_memory_is_a_runtime_error(sim, hip):
    a = tack.zeros(4, device=hip)
    with pytest.raises(RuntimeError, match="Backend hip does not support memory export"):
        a.export_memory()


# --------------------------------------------------------------------------
# kernels: HIP source compiled by the simulated hipRTC (tests/sim/hiprtc_sim.c)


SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"
CAPTURE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                           ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint))
RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@pytest.fixture
def hiprtc(tmp_path, monkeypatch):
    library, why_not = simdriver.build("hiprtc", tmp_path)
    if library is None:
        pytest.skip(why_not)
    monkeypatch.setenv("TACK_HIPRTC_LIBRARY", library)
    return library


@pytest.fixture
def launches(sim):
    """Each launch's name, (n, a, x, y) and geometry; the stand-in runs saxpy."""
    seen = []

    def capture(name, params, grid, block):
        n = ctypes.cast(params[0], ctypes.POINTER(ctypes.c_int64))[0]
        a = ctypes.cast(params[1], ctypes.POINTER(ctypes.c_float))[0]
        x = ctypes.cast(params[2], ctypes.POINTER(ctypes.c_uint64))[0]
        y = ctypes.cast(params[3], ctypes.POINTER(ctypes.c_uint64))[0]
        seen.append((name.decode(), n, a, x, y, grid[0], block[0], sim.stat("copies")))
        return len(seen)

    def run(key):
        _, n, a, x, y, *_ = seen[key - 1]
        xs = np.frombuffer(sim.stored(x, 4 * n), np.float32)
        addr = sim.lib.tack_sim_hip_host_address(y, 4 * n)
        ys = np.ctypeslib.as_array(ctypes.cast(addr, ctypes.POINTER(ctypes.c_float)), (n,))
        ys += a * xs

    sim.lib.tack_sim_hip_set_kernel_hook.argtypes = [CAPTURE, RUN]
    hooks = (CAPTURE(capture), RUN(run))
    sim.lib.tack_sim_hip_set_kernel_hook(*hooks)
    yield seen
    sim.lib.tack_sim_hip_set_kernel_hook(CAPTURE(), RUN())


def test_a_launch_binds_its_arguments_in_order(sim, hip, hiprtc, launches):
    saxpy = tack.Kernel(SAXPY)
    x = tack.array(np.arange(300, dtype=np.float32), device=hip)
    y = tack.array(np.ones(300, np.float32), device=hip)
    copies = sim.stat("copies")
    saxpy(2.0, x, y)
    name, n, a, xp, yp, grid, block, copies_then = launches[-1]
    assert (name, n, a, xp, yp) == ("tack_kernel_entry", 300, 2.0, x.ptr, y.ptr)
    assert grid * block >= 300 and copies_then == copies
    np.testing.assert_array_equal(y.to_numpy(), 1 + 2 * np.arange(300, dtype=np.float32))
    assert 'extern "C" __global__ void tack_kernel_entry' in saxpy.generated_source("hip")


def test_zero_indices_run_nothing(sim, hip, hiprtc, launches):
    saxpy = tack.Kernel(SAXPY)
    x, y = tack.zeros(4, dtype="float32", device=hip), tack.zeros(4, dtype="float32", device=hip)
    before = sim.stat("launches")
    saxpy.launch(0, 1.0, x, y)
    assert sim.stat("launches") == before and not launches


def test_a_read_only_array_is_refused_where_the_kernel_stores(sim, hip, hiprtc, launches):
    saxpy = tack.Kernel(SAXPY)
    x, y = tack.zeros(4, dtype="float32", device=hip), tack.zeros(4, dtype="float32", device=hip)
    ro = tack.array_from_ptr(y.ptr, "float32", (4,), device=hip)
    with pytest.raises(ValueError, match="'y'.*read-only"):
        saxpy(1.0, x, ro)
    assert not launches


def test_without_hiprtc_a_launch_says_what_to_install(sim, hip, tmp_path, monkeypatch):
    monkeypatch.setenv("TACK_HIPRTC_LIBRARY", str(tmp_path / "libhiprtc.so"))
    k = tack.Kernel("void one(tack_index i, int32_t *y) { y[i] = 1; }")
    y = tack.zeros(4, dtype="int32", device=hip)
    with pytest.raises(RuntimeError, match="hipRTC.*TACK_HIPRTC_LIBRARY"):
        k(y)


def test_a_compile_error_carries_the_log(sim, hip, hiprtc):
    k = tack.Kernel("#ifdef TACK_BACKEND_HIP\n#error not on this GPU\n#endif\n"
                    "void f(tack_index i, float *y) { y[i] = 0; }")
    y = tack.zeros(4, dtype="float32", device=hip)
    with pytest.raises(RuntimeError, match=r"(?s)failed to compile for HIP.*kernel:2:.*not on this GPU"):
        k(y)
