"""tack.interop.vtk on Level Zero, against the simulated driver: the context
guard and init_level_zero.

The simulated driver, like the real one, reports a pointer from any context
as device memory, so nothing but Tack's guard stops an array allocated in
Tack's private context from reaching VTK. "VTK's" context is made here the
way another library makes one, with zeContextCreate through the driver, and
reported by the test-only dlpack_support provider's level_zero_handles(),
which wraps Level Zero tensors in real VTK arrays by address, as a VTK built
with Viskores holds device arrays. The host cannot touch simulated device
memory (it crashes, as on a GPU), so nothing here reads a VTK array over it:
values are read through Tack or through the simulator's backing storage.

Tack picks its Level Zero driver once per process, when Level Zero is first
opened, and other tests open it earlier. So unless TACK_LEVEL_ZERO_LIBRARY
already names the simulator, test_level_zero_cases_on_the_simulated_driver
runs this file again in a fresh interpreter that starts on it, and the cases
themselves run there.
"""

import ctypes
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("vtkmodules.vtkCommonCore", reason="VTK is not installed (pip install vtk)")

import tack  # noqa: E402
import vtk_dlpack_provider as provider  # noqa: E402
from conftest import live_counts, sample  # noqa: E402
from tack.interop import vtk as tvtk  # noqa: E402
from vtk_arrays import install, make_vtk, vtk_address  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
ON_NAMED_DRIVER = bool(os.environ.get("TACK_LEVEL_ZERO_LIBRARY"))
START_WITH_INIT = r"init_level_zero\(\) instead of tack\.set_default_device\('level_zero'\)"


def sanitized(library):
    """True when `library` was built with a sanitizer: loading it into an
    interpreter that was not aborts the process."""
    with open(library, "rb") as f:
        data = f.read()
    return b"libasan" in data or b"__asan_init" in data


def simulated_driver(scratch):
    """Path of the simulated Level Zero driver, and why not when there is none.

    TACK_LEVEL_ZERO_LIBRARY when set; else the one `make ctest` built, unless
    it carries a sanitizer; else the simulator's source compiled into
    `scratch` with the system C compiler."""
    named = os.environ.get("TACK_LEVEL_ZERO_LIBRARY")
    if named:
        return named, None
    built = ROOT / "build/ctest/tests/sim/libtack_level_zero_sim.so"
    if built.is_file() and not sanitized(built):
        return str(built), None
    source = ROOT / "tests/sim/level_zero_sim.c"
    if not source.is_file():
        return None, "the simulated Level Zero driver's source (tests/sim/level_zero_sim.c) is missing"
    library = scratch / "libtack_level_zero_sim.so"
    command = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-std=c11", f"-I{ROOT / 'include'}",
               "-o", str(library), str(source), "-lpthread"]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        return None, f"no C compiler ({command[0]}) to build the simulated Level Zero driver"
    except subprocess.CalledProcessError as exc:
        return None, f"the simulated Level Zero driver does not compile: {exc.stderr[-2000:]}"
    return str(library), None


class ContextDesc(ctypes.Structure):
    # ze_context_desc_t, from the Level Zero specification
    _fields_ = [("stype", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32)]


ZE_STRUCTURE_TYPE_CONTEXT_DESC = 0xD


def another_librarys_context(library):
    """Handles of a context made through the driver as VTK's SYCL runtime
    would make its own: {"driver", "device", "context"}."""
    ze = ctypes.CDLL(library)
    for name in ("zeInit", "zeDriverGet", "zeDeviceGet", "zeContextCreate"):
        getattr(ze, name).restype = ctypes.c_int
    ze.zeDriverGet.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_void_p)]
    ze.zeDeviceGet.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_void_p)]
    ze.zeContextCreate.argtypes = [ctypes.c_void_p, ctypes.POINTER(ContextDesc), ctypes.POINTER(ctypes.c_void_p)]

    def check(result, call):
        assert result == 0, f"{call} failed in the simulated driver: ze_result_t {result:#x}"

    check(ze.zeInit(0), "zeInit")
    count = ctypes.c_uint32(1)
    driver = ctypes.c_void_p()
    check(ze.zeDriverGet(ctypes.byref(count), ctypes.byref(driver)), "zeDriverGet")
    count = ctypes.c_uint32(1)
    device = ctypes.c_void_p()
    check(ze.zeDeviceGet(driver, ctypes.byref(count), ctypes.byref(device)), "zeDeviceGet")
    context = ctypes.c_void_p()
    desc = ContextDesc(ZE_STRUCTURE_TYPE_CONTEXT_DESC, None, 0)
    check(ze.zeContextCreate(driver, ctypes.byref(desc), ctypes.byref(context)), "zeContextCreate")
    return {"driver": driver.value, "device": device.value, "context": context.value}


class Simulator:
    """The simulated driver's test hooks."""

    def __init__(self, library):
        self.lib = ctypes.CDLL(library)
        self.lib.tack_sim_ze_host_address.restype = ctypes.c_void_p
        self.lib.tack_sim_ze_host_address.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
        self.lib.tack_sim_ze_allocation_context.restype = ctypes.c_uint64
        self.lib.tack_sim_ze_allocation_context.argtypes = [ctypes.c_uint64]

    def values(self, address, dtype, count):
        """What device memory at `address` holds, read from its backing storage."""
        dtype = np.dtype(dtype)
        storage = self.lib.tack_sim_ze_host_address(address, count * dtype.itemsize)
        assert storage, f"{address:#x} is not simulated device memory"
        raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(storage)
        return np.frombuffer(raw, dtype).copy()

    def context_of(self, address):
        return self.lib.tack_sim_ze_allocation_context(address)


@pytest.fixture(scope="module")
def simulator(vtk_context_handles):
    return Simulator(os.environ["TACK_LEVEL_ZERO_LIBRARY"])


@pytest.fixture(scope="module")
def simulated_library(tmp_path_factory):
    library, why_not = simulated_driver(tmp_path_factory.mktemp("level_zero_sim"))
    if library is None:
        pytest.skip(why_not)
    if sanitized(library):
        pytest.skip(f"{library} is built with a sanitizer and cannot be loaded into this interpreter")
    return library


@pytest.mark.skipif(ON_NAMED_DRIVER, reason="the cases run in this process, on TACK_LEVEL_ZERO_LIBRARY")
def test_level_zero_cases_on_the_simulated_driver(simulated_library):
    env = dict(os.environ, TACK_LEVEL_ZERO_LIBRARY=simulated_library)
    here = pathlib.Path(__file__)
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
               here.name, "-k", "not test_level_zero_cases_on_the_simulated_driver"]
    child = subprocess.run(command, cwd=here.parent, env=env, capture_output=True, text=True,
                           timeout=300)
    report = child.stdout[-6000:] + child.stderr[-3000:]
    assert child.returncode in (0, 5), f"the Level Zero cases failed on {simulated_library}:\n{report}"
    summary = child.stdout.strip().splitlines()[-1]
    if " passed" not in summary:
        pytest.skip(f"no Level Zero case ran on the simulated driver:\n{report}")
    assert "skipped" not in summary, f"Level Zero cases were skipped on the simulated driver:\n{report}"


@pytest.fixture(scope="module")
def vtk_context_handles():
    if not ON_NAMED_DRIVER:
        pytest.skip("run in a fresh interpreter by test_level_zero_cases_on_the_simulated_driver")
    library = os.environ["TACK_LEVEL_ZERO_LIBRARY"]
    if not hasattr(ctypes.CDLL(library), "tack_sim_ze_host_address"):
        pytest.skip(f"TACK_LEVEL_ZERO_LIBRARY={library} is not the simulated driver these cases need")
    try:
        tack.device("level_zero")
    except (ValueError, RuntimeError) as exc:
        pytest.skip(f"Tack's Level Zero backend is not available: {exc}")
    return another_librarys_context(library)


@pytest.fixture
def vtk_on_level_zero(vtk_context_handles, monkeypatch, restore_default_device):
    """A VTK whose device queue runs in its own Level Zero context."""
    provider.reset()
    install(monkeypatch, provider)
    provider.handles = dict(vtk_context_handles)
    provider.device_types.add(provider.kDLOneAPI)
    yield provider
    provider.reset()


def test_init_level_zero_starts_tack_in_vtks_context(vtk_on_level_zero):
    shared = tvtk.init_level_zero()
    assert shared.backend == "level_zero"
    assert shared.shares_external_context
    assert shared.context_handle == vtk_on_level_zero.handles["context"]
    assert tack.get_default_device() is shared
    private = tack.device("level_zero")
    assert not private.shares_external_context
    assert private.context_handle != shared.context_handle


def test_an_array_in_tacks_private_context_is_refused(vtk_on_level_zero):
    tack.set_default_device("level_zero")
    a = tack.array(sample("float32", (4, 2)))
    assert a.device.backend == "level_zero" and not a.device.shares_external_context
    base = live_counts()
    with pytest.raises(RuntimeError, match=START_WITH_INIT):
        tvtk.array_to_vtk(a)
    assert live_counts() == base, "the array was exported although the exchange was refused"


def test_arrays_made_before_init_level_zero_stay_refused_after_it(vtk_on_level_zero):
    early = tack.zeros(6, device=tack.device("level_zero"))
    tvtk.init_level_zero()
    with pytest.raises(RuntimeError, match=START_WITH_INIT):
        tvtk.array_to_vtk(early)


def test_the_adopted_context_is_accepted_both_ways(vtk_on_level_zero, simulator):
    shared = tvtk.init_level_zero()
    values = sample("float32", (5, 3))
    a = tack.array(values)
    assert a.device is shared
    assert simulator.context_of(a.ptr) == vtk_on_level_zero.handles["context"]
    v = tvtk.array_to_vtk(a, name="field")
    assert vtk_address(v) == a.ptr
    assert (v.GetNumberOfTuples(), v.GetNumberOfComponents(), v.GetName()) == (5, 3, "field")
    np.testing.assert_array_equal(simulator.values(vtk_address(v), "float32", 15), values.ravel())
    b = tvtk.vtk_to_array(v)
    assert b.ptr == a.ptr
    assert b.device.shares_external_context and b.device.context_handle == shared.context_handle
    del a, v
    np.testing.assert_array_equal(b.to_numpy(), values)


def test_an_import_landing_in_the_private_context_is_refused_and_released(vtk_on_level_zero, simulator):
    tvtk.init_level_zero()
    v = tvtk.array_to_vtk(tack.array(sample("int32", (8,))))
    tack.set_default_device("level_zero")
    base = live_counts()
    with pytest.raises(RuntimeError, match=START_WITH_INIT):
        tvtk.vtk_to_array(v)
    assert live_counts() == base, "the refused import still holds VTK's export"
    np.testing.assert_array_equal(simulator.values(vtk_address(v), "int32", 8), sample("int32", (8,)))


def test_the_guard_asks_vtk_at_every_exchange(vtk_on_level_zero, vtk_context_handles):
    tvtk.init_level_zero()
    a = tack.zeros(4)
    v = tvtk.array_to_vtk(a)
    queries = vtk_on_level_zero.handle_queries
    vtk_on_level_zero.handles = dict(vtk_context_handles, context=vtk_context_handles["context"] + 64)
    with pytest.raises(RuntimeError, match=START_WITH_INIT):
        tvtk.array_to_vtk(a)
    with pytest.raises(RuntimeError, match=START_WITH_INIT):
        tvtk.vtk_to_array(v)
    assert vtk_on_level_zero.handle_queries == queries + 2


def test_a_vtk_without_a_level_zero_context_refuses_level_zero_arrays(vtk_on_level_zero):
    vtk_on_level_zero.handles = None
    a = tack.zeros(4, device=tack.device("level_zero"))
    with pytest.raises(RuntimeError, match="no Level Zero context") as info:
        tvtk.array_to_vtk(a)
    assert "init_level_zero()" in str(info.value)


def test_host_exchanges_are_not_checked_while_level_zero_is_the_default(vtk_on_level_zero):
    tvtk.init_level_zero()
    vtk_on_level_zero.handles = None
    vtk_on_level_zero.handle_queries = 0
    v = make_vtk("vtkDoubleArray", [1.0, 2.0, 3.0])
    b = tvtk.vtk_to_array(v)
    assert b.device.backend == "cpu" and b.ptr == vtk_address(v)
    c = tvtk.array_to_vtk(tack.zeros(3, device=tack.device("cpu")))
    assert c.GetNumberOfTuples() == 3
    assert vtk_on_level_zero.handle_queries == 0
