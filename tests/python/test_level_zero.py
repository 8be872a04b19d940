"""The Level Zero backend from Python, against the simulated driver.

tests/sim/level_zero_sim.c models what the spec's Level Zero section says
the real driver does: several contexts on one device, allocations tagged by
context, and zeMemGetAllocProperties reporting device memory for a pointer
from any context, so only Tack's bookkeeping (memory domains) tells two
contexts' arrays apart. It keeps device memory where the host cannot touch
it, fills fresh memory with 0xA5 and counts every destroy call.

The cases need an interpreter that starts on the simulator; see simdriver.
"""

import ctypes
import gc

import numpy as np
import pytest

import simdriver
import tack

VARIABLE = "TACK_LEVEL_ZERO_LIBRARY"
kDLOneAPI = 14
ZE_RESULT_ERROR_DEVICE_LOST = 0x70000001
USM_HOST, USM_DEVICE, USM_SHARED = 1, 2, 3

test_cases_on_the_simulated_driver = simdriver.rerun_test(__file__, "level_zero", VARIABLE)


class Simulator:
    """The simulated driver as another library in the process sees it."""

    def __init__(self, library):
        lib = self.lib = ctypes.CDLL(library)
        lib.tack_sim_ze_stats.restype = ctypes.c_longlong
        lib.tack_sim_ze_stats.argtypes = [ctypes.c_char_p]
        lib.tack_sim_ze_fail.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int]
        lib.tack_sim_ze_create_context.restype = ctypes.c_uint32
        lib.tack_sim_ze_create_context.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
        lib.tack_sim_ze_alloc.restype = ctypes.c_uint64
        lib.tack_sim_ze_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_size_t]
        lib.tack_sim_ze_free.restype = ctypes.c_uint32
        lib.tack_sim_ze_free.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
        lib.tack_sim_ze_allocation_context.restype = ctypes.c_uint64
        lib.tack_sim_ze_allocation_context.argtypes = [ctypes.c_uint64]
        lib.tack_sim_ze_allocation_device.argtypes = [ctypes.c_uint64]
        lib.tack_sim_ze_allocations_in.restype = ctypes.c_long
        lib.tack_sim_ze_allocations_in.argtypes = [ctypes.c_uint64]
        lib.tack_sim_ze_lists_in.restype = ctypes.c_long
        lib.tack_sim_ze_lists_in.argtypes = [ctypes.c_uint64, ctypes.c_int]
        lib.tack_sim_ze_queues_in.restype = ctypes.c_long
        lib.tack_sim_ze_queues_in.argtypes = [ctypes.c_uint64, ctypes.c_int]
        lib.tack_sim_ze_immediate_lists_in.restype = ctypes.c_long
        lib.tack_sim_ze_immediate_lists_in.argtypes = [ctypes.c_uint64]
        lib.tack_sim_ze_launches_pending.restype = ctypes.c_long
        lib.tack_sim_ze_launches_pending.argtypes = []
        lib.tack_sim_ze_host_address.restype = ctypes.c_void_p
        lib.tack_sim_ze_host_address.argtypes = [ctypes.c_uint64, ctypes.c_size_t]

    def stat(self, name):
        value = self.lib.tack_sim_ze_stats(name.encode())
        assert value >= 0, f"the simulator has no counter {name}"
        return value

    def other_library(self, device_index=0):
        """Handles of a context another library (a SYCL runtime) made."""
        h = (ctypes.c_uint64 * 3)()
        assert self.lib.tack_sim_ze_create_context(device_index, h) == 0
        return {"driver": h[0], "device": h[1], "context": h[2]}

    def alloc(self, handles, kind, size=256):
        ptr = self.lib.tack_sim_ze_alloc(handles["context"], handles["device"], kind, size)
        assert ptr
        return ptr

    def free(self, context, ptr):
        assert self.lib.tack_sim_ze_free(context, ptr) == 0

    def context_of(self, ptr):
        return self.lib.tack_sim_ze_allocation_context(ptr)

    def device_of(self, ptr):
        return self.lib.tack_sim_ze_allocation_device(ptr)

    def stored(self, ptr, nbytes):
        """What the simulated GPU holds at ptr, read from its storage."""
        addr = self.lib.tack_sim_ze_host_address(ptr, nbytes)
        assert addr, f"{ptr:#x} is not simulated USM memory"
        return ctypes.string_at(addr, nbytes)

    def fail(self, symbol, result, nth=1):
        assert self.lib.tack_sim_ze_fail(symbol.encode(), result, nth) == 0


@pytest.fixture(scope="module")
def sim():
    return Simulator(simdriver.require(VARIABLE, "tack_sim_ze_create_context"))


@pytest.fixture
def plain(sim):
    return tack.device("level_zero")


def adopt(handles, **extra):
    return tack.device("level_zero", external_context=dict(handles, **extra))


# --------------------------------------------------------------------------
# the plain device


def test_plain_device_uses_a_context_of_tacks_own(sim, plain):
    assert plain.backend == "level_zero" and plain.name == "level_zero:0" and plain.index == 0
    assert not plain.shares_external_context
    assert plain.dlpack_device() == (kDLOneAPI, 0)
    assert isinstance(plain.context_handle, int) and plain.context_handle
    assert tack.device("level_zero") is plain and tack.device("level_zero:0") is plain
    # Tack's immediate list is in that context, on a group that computes.
    assert sim.lib.tack_sim_ze_lists_in(plain.context_handle, 1) >= 1
    # So is the queue its launches go to.
    assert sim.lib.tack_sim_ze_queues_in(plain.context_handle, 1) == 1
    one = tack.device("level_zero:1")
    assert one.context_handle == plain.context_handle
    assert one.memory_domain != plain.memory_domain
    with pytest.raises(RuntimeError, match="level_zero:7"):
        tack.device("level_zero:7")


def test_arrays_are_zeroed_and_live_in_device_memory(sim, plain):
    a = tack.empty((16, 4), dtype="float64", device=plain)
    # The driver filled fresh memory with 0xA5; Tack zeroed it on the device.
    assert sim.stored(a.ptr, a.nbytes) == bytes(a.nbytes)
    assert sim.context_of(a.ptr) == plain.context_handle
    np.testing.assert_array_equal(a.to_numpy(), np.zeros((16, 4)))
    values = np.arange(64, dtype=np.float64).reshape(16, 4)
    b = tack.array(values, device=plain)
    assert sim.stored(b.ptr, b.nbytes) == values.tobytes()
    np.testing.assert_array_equal(b.to_numpy(), values)
    b.fill(7)
    np.testing.assert_array_equal(b.to_numpy(), np.full((16, 4), 7.0))
    c = tack.zeros(5, dtype="int32", device="level_zero:1")
    assert sim.device_of(c.ptr) == 1


def test_frees_are_deferred_to_the_driver(sim, plain):
    frees, deferred = sim.stat("frees"), sim.stat("deferred_frees")
    a = tack.zeros(100, device=plain)
    ptr = a.ptr
    del a
    gc.collect()
    assert sim.stat("frees") == frees + 1 and sim.stat("deferred_frees") == deferred + 1
    assert sim.context_of(ptr) == 0
    assert sim.stat("wrong_context_frees") == 0


# --------------------------------------------------------------------------
# external_context: validation


@pytest.mark.parametrize(
    "given, named, not_named",
    [
        ({"driver"}, ["'device'", "'context'"], ["'driver'"]),
        ({"driver", "device"}, ["'context'"], ["'driver'", "'device'"]),
        ({"context"}, ["'driver'", "'device'"], ["'context'"]),
        pytest.param(set(), ["'driver'", "'device'", "'context'"], [], id="empty-dict"),
    ],
    ids=["driver only", "no context", "context only", "empty"],
)
def test_missing_handles_are_named(sim, given, named, not_named):
    handles = sim.other_library()
    contexts, lists = sim.stat("contexts_created"), sim.stat("lists_created")
    with pytest.raises(ValueError) as info:
        tack.device("level_zero", external_context={k: v for k, v in handles.items() if k in given})
    for word in named:
        assert word in str(info.value)
    for word in not_named:
        assert word not in str(info.value)
    # Nothing constructed, nothing of Tack's own filled in.
    assert sim.stat("contexts_created") == contexts and sim.stat("lists_created") == lists


@pytest.mark.parametrize("null", [0, None])
@pytest.mark.parametrize("field", ["driver", "device", "context"])
def test_null_handles_are_named(sim, field, null):
    handles = sim.other_library()
    with pytest.raises(ValueError, match=f"'{field}'") as info:
        adopt(handles, **{field: null})
    assert "null" in str(info.value)
    for other in {"driver", "device", "context"} - {field}:
        assert f"'{other}'" not in str(info.value)


def test_malformed_external_context_is_a_value_error(sim):
    handles = sim.other_library()
    with pytest.raises(ValueError, match="'ctx'"):
        tack.device("level_zero", external_context={"driver": handles["driver"], "device": handles["device"],
                                                      "ctx": handles["context"]})
    with pytest.raises(ValueError, match="dict"):
        tack.device("level_zero", external_context=handles["context"])
    with pytest.raises(ValueError, match="'driver', 'device', 'context'"):
        tack.device("level_zero", external_context=None)
    with pytest.raises(ValueError):
        adopt(handles, context=-1)
    with pytest.raises(TypeError):
        adopt(handles, context="0x1234")


def test_misspelled_or_misplaced_option_is_refused_by_name(sim):
    handles = sim.other_library()
    contexts = sim.stat("contexts_created")
    with pytest.raises(ValueError) as info:
        tack.device("level_zero", external_contxt=handles)
    assert "external_contxt" in str(info.value) and "external_context" in str(info.value)
    with pytest.raises(ValueError, match="external_context"):
        tack.device("cpu", external_context=handles)
    with pytest.raises(ValueError, match="external_context"):
        tack.set_default_device("cpu", external_context=handles)
    assert sim.stat("contexts_created") == contexts


# --------------------------------------------------------------------------
# external_context: adoption


def test_adopted_context_receives_every_allocation(sim):
    handles = sim.other_library()
    contexts = sim.stat("contexts_created")
    shared = adopt(handles)
    assert shared.shares_external_context
    assert shared.context_handle == handles["context"]
    assert shared.backend == "level_zero" and shared.name == "level_zero:0"
    assert "external_context" in repr(shared)
    assert sim.stat("contexts_created") == contexts, "Tack made a context although one was given"
    # Its copy list, launch queue and launch lists are all in that context.
    assert sim.lib.tack_sim_ze_immediate_lists_in(handles["context"]) == 1
    assert sim.lib.tack_sim_ze_queues_in(handles["context"], -1) == 1
    assert sim.lib.tack_sim_ze_lists_in(handles["context"], -1) > 1
    arrays = [tack.zeros(10, device=shared), tack.array(np.arange(6.0), device=shared),
              tack.empty((2, 3), dtype="int8", device=shared)]
    for a in arrays:
        assert sim.context_of(a.ptr) == handles["context"]
    assert sim.lib.tack_sim_ze_allocations_in(handles["context"]) == 3
    np.testing.assert_array_equal(arrays[1].to_numpy(), np.arange(6.0))
    del a, arrays
    gc.collect()
    assert sim.lib.tack_sim_ze_allocations_in(handles["context"]) == 0
    assert sim.stat("wrong_context_frees") == 0


def test_handles_are_taken_as_any_integer_like_address(sim):
    handles = sim.other_library()
    shared = adopt({k: np.uint64(v) for k, v in handles.items()})
    assert shared.shares_external_context and shared.context_handle == handles["context"]
    assert sim.context_of(tack.zeros(4, device=shared).ptr) == handles["context"]
    with pytest.raises(TypeError, match="integer handle"):
        adopt(dict(handles, context=True))


def test_set_default_device_adopts_too(sim, restore_default_device):
    handles = sim.other_library()
    shared = tack.set_default_device("level_zero", external_context=handles)
    assert tack.get_default_device() is shared
    assert shared.shares_external_context and shared.context_handle == handles["context"]
    a = tack.zeros(4)
    assert a.device is shared
    assert sim.context_of(a.ptr) == handles["context"]


def test_adopted_device_takes_its_index_from_the_handles(sim):
    handles = sim.other_library(device_index=1)
    shared = adopt(handles)
    assert shared.name == "level_zero:1" and shared.dlpack_device() == (kDLOneAPI, 1)
    a = tack.zeros(3, device=shared)
    assert sim.device_of(a.ptr) == 1 and sim.context_of(a.ptr) == handles["context"]


def test_memory_domains_include_the_context(sim, plain):
    handles, others = sim.other_library(), sim.other_library()
    shared = adopt(handles)
    a, b = tack.zeros(4, device=plain), tack.zeros(4, device=shared)
    assert a.device.memory_domain != b.device.memory_domain
    assert adopt(others).memory_domain not in (plain.memory_domain, shared.memory_domain)
    # The same context adopted again is the same memory.
    assert adopt(handles).memory_domain == shared.memory_domain


@pytest.mark.skipif(not hasattr(tack, "Kernel"), reason="this build has no tack.Kernel")
def test_one_launch_never_mixes_two_contexts(sim, plain):
    shared = adopt(sim.other_library())
    saxpy = tack.Kernel("void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }")
    x = tack.zeros(8, dtype="float32", device=plain)
    y = tack.zeros(8, dtype="float32", device=shared)
    with pytest.raises(ValueError, match="memory domain"):
        saxpy(2.0, x, y)
    with pytest.raises(ValueError, match="memory domain"):
        saxpy.launch(8, 2.0, y, x)
    np.testing.assert_array_equal(y.to_numpy(), np.zeros(8, np.float32))


def test_arrays_made_before_adoption_keep_their_device(sim, plain):
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    early = tack.array(values, device=plain)
    domain = early.device.memory_domain
    handles = sim.other_library()
    shared = adopt(handles)
    late = tack.zeros((3, 4), dtype="float32", device=shared)
    assert early.device is plain and early.device.memory_domain == domain
    assert not early.device.shares_external_context
    assert sim.context_of(early.ptr) == plain.context_handle
    assert early.device.memory_domain != late.device.memory_domain
    np.testing.assert_array_equal(early.to_numpy(), values)
    # to_device goes through the host into the adopted context.
    moved = early.to_device(shared)
    assert moved.device is shared and moved.ptr != early.ptr
    assert sim.context_of(moved.ptr) == handles["context"]
    np.testing.assert_array_equal(moved.to_numpy(), values)


# --------------------------------------------------------------------------
# DLPack


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["legacy", "versioned"])
def test_dlpack_round_trip_is_zero_copy(sim, plain, max_version):
    values = np.arange(10, dtype=np.int32)
    a = tack.array(values, device=plain)
    assert a.__dlpack_device__() == (kDLOneAPI, 0)
    capsule = a.__dlpack__() if max_version is None else a.__dlpack__(max_version=max_version)
    b = tack.from_dlpack(capsule)
    assert b.ptr == a.ptr
    assert b.device is plain
    assert b.__dlpack_device__() == (kDLOneAPI, 0)
    del a
    gc.collect()
    np.testing.assert_array_equal(b.to_numpy(), values)
    c = tack.from_dlpack(b)
    assert c.ptr == b.ptr and c.device is plain


def test_dlpack_import_onto_an_adopted_device(sim, plain):
    handles = sim.other_library()
    shared = adopt(handles)
    a = tack.array(np.ones(4, np.float32), device=shared)
    # Without device= a kDLOneAPI tensor lands on the plain device: neither
    # DLPack nor the driver can say which context the pointer belongs to.
    b = tack.from_dlpack(a)
    assert b.ptr == a.ptr and b.device is plain
    c = tack.from_dlpack(a, device=shared)
    assert c.ptr == a.ptr and c.device is shared
    with pytest.raises(RuntimeError, match="level_zero"):
        tack.from_dlpack(a, device="cpu")


def test_another_librarys_tensor_is_wrapped_not_copied(sim, plain, probe):
    handles = sim.other_library()
    ptr = sim.alloc(handles, USM_DEVICE, 64)
    t = probe.tensor(shape=(16,), dtype=(2, 32, 1), data=ptr, device=(kDLOneAPI, 0))
    shared = adopt(handles)
    a = tack.from_dlpack(t.capsule(), device=shared)
    assert a.ptr == ptr and a.device is shared and a.shape == (16,)
    np.testing.assert_array_equal(a.to_numpy(), np.frombuffer(b"\xa5" * 64, np.float32))
    assert t.deleter_calls == 0
    del a
    gc.collect()
    assert t.deleter_calls == 1
    sim.free(handles["context"], ptr)


# --------------------------------------------------------------------------
# memory spaces and export


def test_array_from_ptr_accepts_device_and_shared_memory(sim, plain):
    mine = {"context": plain.context_handle, "device": sim.other_library()["device"]}
    for kind in (USM_DEVICE, USM_SHARED):
        ptr = sim.alloc(mine, kind, 64)
        a = tack.array_from_ptr(ptr, "float32", (16,), device=plain)
        assert a.ptr == ptr and not a.writable
        del a
        sim.free(plain.context_handle, ptr)


def test_array_from_ptr_refuses_host_memory(sim, plain):
    host = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="not a Level Zero allocation"):
        tack.array_from_ptr(host.ctypes.data, "float32", (16,), device=plain)
    usm_host = sim.alloc({"context": plain.context_handle, "device": 0}, USM_HOST, 64)
    with pytest.raises(ValueError, match="host memory"):
        tack.array_from_ptr(usm_host, "float32", (16,), device=plain)
    sim.free(plain.context_handle, usm_host)


def test_a_failed_pointer_query_is_a_runtime_error(sim, plain):
    ptr = sim.alloc({"context": plain.context_handle, "device": sim.other_library()["device"]}, USM_DEVICE, 64)
    sim.fail("zeMemGetAllocProperties", ZE_RESULT_ERROR_DEVICE_LOST)
    with pytest.raises(RuntimeError, match="zeMemGetAllocProperties"):
        tack.array_from_ptr(ptr, "float32", (16,), device=plain)
    sim.free(plain.context_handle, ptr)


def test_memory_space_is_what_the_driver_reports(sim, plain):
    mine = {"context": plain.context_handle, "device": sim.other_library()["device"]}
    for kind, space in ((USM_DEVICE, "level_zero"), (USM_SHARED, "level_zero_shared"), (USM_HOST, "level_zero_host")):
        ptr = sim.alloc(mine if kind != USM_HOST else dict(mine, device=0), kind, 64)
        queries = sim.stat("pointer_queries")
        assert tack.memory_space(ptr) == space
        assert sim.stat("pointer_queries") > queries  # the driver answered
        sim.free(plain.context_handle, ptr)
    host = np.zeros(4)
    assert tack.memory_space(host.ctypes.data) == "cpu"
    # A failed query is a fault, not a verdict that the memory is the host's.
    sim.fail("zeMemGetAllocProperties", ZE_RESULT_ERROR_DEVICE_LOST)
    with pytest.raises(RuntimeError, match="zeMemGetAllocProperties"):
        tack.memory_space(host.ctypes.data)


def test_export_memory_is_a_runtime_error(sim, plain):
    a = tack.zeros(4, device=plain)
    with pytest.raises(RuntimeError, match="Backend level_zero does not support memory export"):
        a.export_memory()


# --------------------------------------------------------------------------
# last: nothing destroyed, by any case above


def test_tack_destroys_no_level_zero_object(sim, plain):
    handles = sim.other_library()
    for _ in range(3):
        shared = adopt(handles)
        a = tack.zeros(8, device=shared)
        b = a.to_device(plain)
        del a, b, shared
        gc.collect()
    assert sim.stat("destroys") == 0
    assert sim.stat("contexts_destroyed") == 0 and sim.stat("lists_destroyed") == 0
    # The adopted context still serves its owner.
    ptr = sim.alloc(handles, USM_DEVICE)
    sim.free(handles["context"], ptr)


# --------------------------------------------------------------------------
# kernels: OpenCL C compiled by the simulated libocloc (tests/sim/ocloc_sim.c)


SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"


@pytest.fixture
def ocloc(tmp_path, monkeypatch):
    """The simulated libocloc, with a fresh compile cache."""
    library, why_not = simdriver.build("ocloc", tmp_path)
    if library is None:
        pytest.skip(why_not)
    monkeypatch.setenv("TACK_OCLOC_LIBRARY", library)
    monkeypatch.setenv("TACK_CACHE_DIR", str(tmp_path / "cache"))
    return ctypes.CDLL(library)


class Launches:
    """A host stand-in for the GPU, installed as the simulator's kernel hook:
    records each launch's arguments and runs saxpy over the device memory."""

    CAPTURE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.POINTER(ctypes.c_uint32),
                               ctypes.POINTER(ctypes.c_uint32))
    RUN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def __init__(self, sim):
        self.sim, self.seen, self.pending = sim, [], {}
        self._capture, self._run = self.CAPTURE(self.capture), self.RUN(self.run)
        sim.lib.tack_sim_ze_set_kernel_hook(self._capture, self._run)

    def capture(self, name, args, sizes, nargs, groups, group_size):
        values = [ctypes.string_at(args[i], sizes[i]) for i in range(nargs)]
        self.seen.append((name.decode(), values, groups[0], group_size[0], self.sim.stat("copies")))
        self.pending[len(self.seen)] = values
        return len(self.seen)

    def run(self, key):
        n, a, x, y = self.pending.pop(key)
        n = int.from_bytes(n, "little")
        a = np.frombuffer(a, np.float32)[0]
        x, y = int.from_bytes(x, "little"), int.from_bytes(y, "little")
        xs = np.frombuffer(self.sim.stored(x, 4 * n), np.float32)
        addr = self.sim.lib.tack_sim_ze_host_address(y, 4 * n)
        ys = np.ctypeslib.as_array(ctypes.cast(addr, ctypes.POINTER(ctypes.c_float)), (n,))
        ys += a * xs

    def close(self):
        self.sim.lib.tack_sim_ze_set_kernel_hook(self.CAPTURE(), self.RUN())


@pytest.fixture
def launches(sim):
    sim.lib.tack_sim_ze_set_kernel_hook.argtypes = [Launches.CAPTURE, Launches.RUN]
    hook = Launches(sim)
    yield hook
    hook.close()


def test_a_launch_binds_its_arguments_in_order(sim, plain, ocloc, launches):
    saxpy = tack.Kernel(SAXPY)
    x = tack.array(np.arange(100, dtype=np.float32), device=plain)
    y = tack.array(np.ones(100, np.float32), device=plain)
    copies = sim.stat("copies")
    saxpy(2.0, x, y)
    name, values, groups, group_size, copies_then = launches.seen[-1]
    assert name == "tack_kernel_entry"
    assert int.from_bytes(values[0], "little") == 100
    assert np.frombuffer(values[1], np.float32)[0] == 2.0
    assert int.from_bytes(values[2], "little") == x.ptr and int.from_bytes(values[3], "little") == y.ptr
    assert groups * group_size >= 100 and copies_then == copies
    np.testing.assert_array_equal(y.to_numpy(), 1 + 2 * np.arange(100, dtype=np.float32))
    assert "__global float *tack_p2_" in saxpy.generated_source("level_zero")
    ocloc.tack_sim_ocloc_last_args.restype = ctypes.c_char_p
    assert b"-spv_only" in ocloc.tack_sim_ocloc_last_args()


def test_a_launch_is_queued_until_the_host_needs_its_result(sim, plain, ocloc, launches):
    saxpy = tack.Kernel(SAXPY)
    x = tack.array(np.arange(100, dtype=np.float32), device=plain)
    y = tack.array(np.ones(100, np.float32), device=plain)
    saxpy(2.0, x, y)
    # Queued, not run: the simulated GPU's memory still holds the old y.
    assert sim.lib.tack_sim_ze_launches_pending() == 1
    assert np.frombuffer(sim.stored(y.ptr, 400), np.float32)[7] == 1.0
    np.testing.assert_array_equal(y.to_numpy(), 1 + 2 * np.arange(100, dtype=np.float32))
    assert sim.lib.tack_sim_ze_launches_pending() == 0
    # An export waits too: the consumer reads the memory at once.
    saxpy(1.0, x, y)
    assert sim.lib.tack_sim_ze_launches_pending() == 1
    capsule = y.__dlpack__()
    assert sim.lib.tack_sim_ze_launches_pending() == 0
    assert np.frombuffer(sim.stored(y.ptr, 400), np.float32)[7] == 1 + 3 * 7
    # From then on y is shared, and launches on it complete before returning.
    saxpy(1.0, x, y)
    assert sim.lib.tack_sim_ze_launches_pending() == 0
    assert np.frombuffer(sim.stored(y.ptr, 400), np.float32)[7] == 1 + 4 * 7
    del capsule
    assert sim.stat("destroys") == 0


def test_zero_indices_run_nothing(sim, plain, ocloc, launches):
    saxpy = tack.Kernel(SAXPY)
    x, y = tack.zeros(4, dtype="float32", device=plain), tack.zeros(4, dtype="float32", device=plain)
    before = sim.stat("launches")
    saxpy.launch(0, 1.0, x, y)
    assert sim.stat("launches") == before and not launches.seen


def test_a_read_only_array_is_refused_where_the_kernel_stores(sim, plain, ocloc, launches):
    saxpy = tack.Kernel(SAXPY)
    x = tack.zeros(4, dtype="float32", device=plain)
    y = tack.zeros(4, dtype="float32", device=plain)
    ro = tack.array_from_ptr(y.ptr, "float32", (4,), device=plain)
    with pytest.raises(ValueError, match="'y'.*read-only"):
        saxpy(1.0, x, ro)
    assert not launches.seen


def test_plain_and_adopted_devices_never_meet_in_a_launch(sim, plain, ocloc, launches):
    shared = adopt(sim.other_library())
    saxpy = tack.Kernel(SAXPY)
    x = tack.zeros(8, dtype="float32", device=plain)
    y = tack.zeros(8, dtype="float32", device=shared)
    with pytest.raises(ValueError, match=r"sharing another library's context") as info:
        saxpy(2.0, x, y)
    assert "Tack's own context" in str(info.value)
    assert not launches.seen


def test_without_libocloc_a_launch_says_what_to_install(sim, plain, tmp_path, monkeypatch):
    monkeypatch.setenv("TACK_OCLOC_LIBRARY", str(tmp_path / "libocloc.so"))
    monkeypatch.setenv("TACK_CACHE_DIR", str(tmp_path / "cache"))
    k = tack.Kernel("void one(tack_index i, int32_t *y) { y[i] = 1; }")
    y = tack.zeros(4, dtype="int32", device=plain)
    with pytest.raises(RuntimeError, match="libocloc.*apt-get install intel-opencl-icd"):
        k(y)


def test_a_compile_error_carries_the_log(sim, plain, ocloc):
    # Compiles on the host (where Kernel() first builds it), not for the GPU.
    k = tack.Kernel("#ifdef TACK_BACKEND_LEVEL_ZERO\n#error not on this GPU\n#endif\n"
                    "void f(tack_index i, float *y) { y[i] = 0; }")
    y = tack.zeros(4, dtype="float32", device=plain)
    with pytest.raises(RuntimeError, match=r"(?s)failed to compile for level_zero.*kernel:2:.*not on this GPU"):
        k(y)
