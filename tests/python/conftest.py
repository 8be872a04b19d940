"""Shared helpers for the Python tests.

Hand-built DLPack producers live here. The DLPack structs are declared with
ctypes from the DLPack specification and filled in Python; the deleter and
the capsule destructor are a few lines of C compiled once per test session.
They have to be C: a producer's deleter may legitimately be called while a
Python exception is being raised (an import refusing a tensor, an array
released during unwinding), and a ctypes callback cannot run then -- it
replaces the pending exception with SystemError and prints "Exception
ignored". A C deleter, like NumPy's or PyTorch's, has no such restriction.
"""

import ctypes
import gc
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

try:  # NumPy's bfloat16; tests of its absence run in a subprocess that hides it
    import ml_dtypes  # noqa: F401
except ImportError:
    ml_dtypes = None

import tack
from cudasim import ROOT, SIM_SOURCE as CUDA_SIM_SOURCE

# A shell starts background jobs with SIGINT ignored, and an ignored signal
# stays ignored in every child: the tests of Ctrl-C would wait for an
# interrupt that never comes. Handled here, it is the default again in each
# child the tests start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# --------------------------------------------------------------------------
# dtypes

# (short name, NumPy name, DLPack code, bits)
DTYPES = [
    ("i8", "int8", 0, 8),
    ("u8", "uint8", 1, 8),
    ("i16", "int16", 0, 16),
    ("u16", "uint16", 1, 16),
    ("i32", "int32", 0, 32),
    ("u32", "uint32", 1, 32),
    ("i64", "int64", 0, 64),
    ("u64", "uint64", 1, 64),
    ("f32", "float32", 2, 32),
    ("f64", "float64", 2, 64),
    ("bool", "bool", 6, 8),
    ("f16", "float16", 2, 16),
    ("bf16", "bfloat16", 4, 16),
    ("c64", "complex64", 5, 64),
    ("c128", "complex128", 5, 128),
]
# Every DLPack code Tack imports; the dtype tests below skip bfloat16 where
# NumPy cannot have it (no ml_dtypes: the NumPy-only run on other Pythons).
DL_CODES = {(code, bits): name for _, name, code, bits in DTYPES}
if ml_dtypes is None:
    DTYPES = [entry for entry in DTYPES if entry[1] != "bfloat16"]
DTYPE_NAMES = [name for _, name, _, _ in DTYPES]
# NumPy's DLPack (both ways) and array interface know every dtype but
# bfloat16, which NumPy has only as ml_dtypes' type.
NUMPY_NAMES = [name for name in DTYPE_NAMES if name != "bfloat16"]

kDLCPU, kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLMetal = 1, 2, 3, 4, 7, 8
kDLROCM, kDLROCMHost, kDLCUDAManaged, kDLOneAPI = 10, 11, 13, 14
READ_ONLY = 1 << 0
IS_COPIED = 1 << 1


def numpy_name(name):
    """The NumPy dtype that reads an array of dtype `name`: bfloat16 as its
    bits where NumPy lacks it."""
    return "uint16" if name == "bfloat16" and ml_dtypes is None else name


def host_values(a):
    """A host array's values as NumPy reads them (see numpy_name)."""
    if numpy_name(a.dtype.name) != a.dtype.name:
        return tack.array_from_ptr(a.ptr, "uint16", a.shape).to_numpy() if a.size else np.zeros(a.shape, np.uint16)
    return a.to_numpy()


def sample(name, shape=(3, 4)):
    """Exactly representable values of dtype `name`, distinct where the
    dtype has room (bool alternates)."""
    n = int(np.prod(shape, dtype=np.int64))
    values = (np.arange(n) % 100) + 1
    if name == "bool":
        return (values % 2 == 0).reshape(shape)
    if name.startswith("complex"):
        return (values + 1j * (values % 7)).astype(name).reshape(shape)
    if name == "bfloat16" and ml_dtypes is None:
        pytest.skip("NumPy has bfloat16 through ml_dtypes only, which is not installed")
    # bfloat16 is ml_dtypes' (imported above); its 8 bits hold 1 to 100 exactly.
    return values.astype(name).reshape(shape)


# --------------------------------------------------------------------------
# DLPack ABI, from the DLPack specification (dlpack.h, version 1.x)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLPackExchangeAPI(ctypes.Structure):
    """The C exchange table (DLPack 1.3): the header (version, prev_api),
    then five function pointers."""

    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80
assert ctypes.sizeof(DLPackExchangeAPI) == 56

_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


def capsule_name(capsule):
    """The capsule's current name, as str."""
    name = _capsule_get_name(capsule)
    return None if name is None else name.decode()


_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(("PyCapsule_SetName", ctypes.pythonapi))


def adopt(probe, capsule):
    """Takes over an exported tensor as a C consumer does: renames the
    capsule (to a name that lives as long as the process) and returns
    (tensor address, versioned); calling its deleter is then ours to do."""
    name = _capsule_get_name(capsule)
    address = _capsule_get_pointer(capsule, name)
    versioned = name == b"dltensor_versioned"
    used = "probe_used_versioned" if versioned else "probe_used_legacy"
    _capsule_set_name(capsule, ctypes.addressof(ctypes.c_char.in_dll(probe.lib, used)))
    return address, int(versioned)


def capsule_tensor(capsule):
    """The managed tensor inside an exported capsule (still owned by it)."""
    name = _capsule_get_name(capsule)
    address = _capsule_get_pointer(capsule, name)
    if name == b"dltensor_versioned":
        return DLManagedTensorVersioned.from_address(address)
    return DLManagedTensor.from_address(address)


# --------------------------------------------------------------------------
# The C half of the hand-built producer: counting deleters and a capsule
# destructor that releases a capsule nobody adopted, as every producer must.

_PROBE_SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct _object PyObject;
extern const char *PyCapsule_GetName(PyObject *);
extern void *PyCapsule_GetPointer(PyObject *, const char *);
extern void PyErr_Fetch(PyObject **, PyObject **, PyObject **);
extern void PyErr_Restore(PyObject *, PyObject *, PyObject *);

typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data; DLDevice device; int32_t ndim; DLDataType dtype;
    int64_t *shape, *strides; uint64_t byte_offset;
} DLTensor;
typedef struct Legacy {
    DLTensor dl_tensor; void *manager_ctx; void (*deleter)(struct Legacy *);
} Legacy;
typedef struct Versioned {
    uint32_t major, minor; void *manager_ctx; void (*deleter)(struct Versioned *);
    uint64_t flags; DLTensor dl_tensor;
} Versioned;

#define SLOTS (1 << 18)
static long counts[SLOTS];
static const void *expected[SLOTS];
static long stray;

void probe_register(long slot, const void *tensor) { expected[slot] = tensor; }
long probe_count(long slot) { return __atomic_load_n(&counts[slot], __ATOMIC_SEQ_CST); }
long probe_stray(void) { return __atomic_load_n(&stray, __ATOMIC_SEQ_CST); }

/* A deleter given some other pointer than the tensor it belongs to is a
   consumer bug; count it instead of trusting it. */
static void count(const void *tensor, void *ctx) {
    uintptr_t slot = (uintptr_t)ctx;
    if (slot == 0 || slot >= SLOTS || expected[slot] != tensor)
        __atomic_add_fetch(&stray, 1, __ATOMIC_SEQ_CST);
    else
        __atomic_add_fetch(&counts[slot], 1, __ATOMIC_SEQ_CST);
}

void probe_delete_legacy(Legacy *self) { count(self, self->manager_ctx); }
void probe_delete_versioned(Versioned *self) { count(self, self->manager_ctx); }

/* A C consumer releasing a tensor it adopted: on a thread of its own that
   has never touched Python, or from a C atexit handler, which runs after
   the interpreter has finalized. */
const char probe_used_legacy[] = "used_dltensor";
const char probe_used_versioned[] = "used_dltensor_versioned";

static void release(void *tensor, int versioned) {
    if (versioned) ((Versioned *)tensor)->deleter(tensor);
    else ((Legacy *)tensor)->deleter(tensor);
}

struct job { void *tensor; int versioned; };
static void *release_job(void *arg) {
    struct job *j = arg;
    release(j->tensor, j->versioned);
    return NULL;
}

int probe_release_on_thread(void *tensor, int versioned) {
    struct job j = {tensor, versioned};
    pthread_t thread;
    if (pthread_create(&thread, NULL, release_job, &j) != 0) return -1;
    return pthread_join(thread, NULL);
}

static struct job at_exit_jobs[16];
static int at_exit_count;
static void release_at_exit(void) {
    for (int i = 0; i < at_exit_count; i++) release(at_exit_jobs[i].tensor, at_exit_jobs[i].versioned);
}

int probe_release_at_exit(void *tensor, int versioned) {
    if (at_exit_count == 16) return -1;
    if (at_exit_count == 0 && atexit(release_at_exit) != 0) return -1;
    at_exit_jobs[at_exit_count].tensor = tensor;
    at_exit_jobs[at_exit_count].versioned = versioned;
    at_exit_count++;
    return 0;
}

void probe_capsule_destructor(PyObject *capsule) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    const char *name = PyCapsule_GetName(capsule);
    if (name && strcmp(name, "dltensor") == 0) {
        Legacy *m = PyCapsule_GetPointer(capsule, "dltensor");
        if (m && m->deleter) m->deleter(m);
    } else if (name && strcmp(name, "dltensor_versioned") == 0) {
        Versioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m && m->deleter) m->deleter(m);
    }
    PyErr_Restore(type, value, traceback);
}
"""


class Probe:
    """Loaded C half plus the Python registry of hand-built tensors."""

    def __init__(self, library_path):
        self.lib = ctypes.CDLL(library_path)
        self.lib.probe_register.argtypes = [ctypes.c_long, ctypes.c_void_p]
        self.lib.probe_count.argtypes = [ctypes.c_long]
        self.lib.probe_count.restype = ctypes.c_long
        self.lib.probe_stray.restype = ctypes.c_long
        self.lib.probe_release_on_thread.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.lib.probe_release_at_exit.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.path = library_path
        self.delete_legacy = ctypes.cast(self.lib.probe_delete_legacy, ctypes.c_void_p).value
        self.delete_versioned = ctypes.cast(self.lib.probe_delete_versioned, ctypes.c_void_p).value
        self.destructor = ctypes.cast(self.lib.probe_capsule_destructor, ctypes.c_void_p).value
        self._slots = itertools.count(1)
        self._lock = threading.Lock()
        # Every tensor stays referenced for the whole session, so a late or
        # repeated deleter call never touches freed memory and no address is
        # reused by a later tensor.
        self.tensors = []
        self._names = {}

    def name_pointer(self, name):
        if name not in self._names:
            self._names[name] = ctypes.create_string_buffer(name.encode())
        return ctypes.addressof(self._names[name])

    def stray(self):
        return self.lib.probe_stray()

    def tensor(self, **kwargs):
        return HandTensor(self, **kwargs)


class HandTensor:
    """A DLPack managed tensor built by hand.

    shape:   extents (ints); `ndim` overrides the ndim field independently,
             and `shape_array` the shape entries (False: a null pointer).
    strides: "c" for C-contiguous element strides, None for a null pointer,
             or a sequence.
    data:    "auto" (a zero-initialised NumPy buffer large enough, when that
             is small), None for a null pointer, or an int address.
    """

    def __init__(
        self,
        probe,
        *,
        versioned=True,
        shape=(2, 3),
        dtype=(2, 32, 1),
        strides=None,
        data="auto",
        device=(kDLCPU, 0),
        ndim=None,
        shape_array=None,
        byte_offset=0,
        flags=0,
        version=(1, 1),
        fill=True,
    ):
        self.probe = probe
        with probe._lock:
            self.slot = next(probe._slots)
        self.versioned = versioned
        self.shape = tuple(shape)
        code, bits, lanes = dtype
        self.itemsize = max(1, bits // 8) * max(1, lanes)
        ndim = len(self.shape) if ndim is None else ndim

        if shape_array is None:
            shape_array = list(self.shape)
        null_shape = shape_array is False
        self._shape = None if null_shape else (ctypes.c_int64 * max(1, len(shape_array)))(*shape_array)
        if strides == "c":
            strides = c_strides(self.shape)
        self._strides = None if strides is None else (ctypes.c_int64 * max(1, len(strides)))(*strides)

        self.buffer = None
        if data == "auto":
            count = element_count(self.shape)
            nbytes = byte_offset + (count if count is not None else 0) * self.itemsize
            if count is None or nbytes > (1 << 20):
                nbytes = byte_offset + 64  # never read: the import must refuse or only wrap
            self.buffer = np.zeros(max(nbytes, 1), dtype=np.uint8)
            if fill:
                self.buffer[:] = np.arange(self.buffer.size) % 251 + 1
            data = self.buffer.ctypes.data
        self.data = data

        if versioned:
            m = DLManagedTensorVersioned()
            m.version.major, m.version.minor = version
            m.flags = flags
            m.deleter = probe.delete_versioned
        else:
            m = DLManagedTensor()
            m.deleter = probe.delete_legacy
        m.manager_ctx = self.slot
        t = m.dl_tensor
        t.data = data
        t.device.device_type, t.device.device_id = device
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = None if null_shape else ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = None if self._strides is None else ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self.struct = m
        self.address = ctypes.addressof(m)
        probe.lib.probe_register(self.slot, self.address)
        probe.tensors.append(self)

    @property
    def deleter_calls(self):
        return self.probe.lib.probe_count(self.slot)

    def capsule(self, name=None):
        if name is None:
            name = "dltensor_versioned" if self.versioned else "dltensor"
        return _capsule_new(self.address, self.probe.name_pointer(name), self.probe.destructor)

    def expected(self, dtype_name):
        """The values the tensor's memory holds, as NumPy reads them."""
        count = element_count(self.shape)
        if self.buffer is None:
            return np.zeros(self.shape, numpy_name(dtype_name))  # only meaningful when empty
        offset = self.struct.dl_tensor.byte_offset
        raw = self.buffer[offset : offset + count * self.itemsize]
        return raw.view(numpy_name(dtype_name)).reshape(self.shape)


class Producer:
    """An object with __dlpack__ that hands out capsules from `make` and
    remembers every call and every capsule (so capsules die in test code,
    not inside the consumer)."""

    def __init__(self, make, *, versioned_ok=True, device=(kDLCPU, 0)):
        self.make = make
        self.versioned_ok = versioned_ok
        self.device = device
        self.calls = []
        self.capsules = []

    def __dlpack__(self, **kwargs):
        self.calls.append(dict(kwargs))
        if "max_version" in kwargs and not self.versioned_ok:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        result = self.make(**kwargs)
        self.capsules.append(result)
        return result

    def __dlpack_device__(self):
        return self.device


def c_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def element_count(shape):
    """Product of the extents, or None when one is negative or it does not
    fit in an int64."""
    n = 1
    for extent in shape:
        if extent < 0:
            return None
        n *= extent
    return n if n < (1 << 63) else None


# --------------------------------------------------------------------------
# fixtures


def build_c_library(source_text, directory, what):
    """Compiles `source_text` into a shared library in `directory` with the
    system C compiler (Python's symbols resolve from the process); fails
    the test, naming `what`, when it cannot."""
    cc = os.environ.get("CC", "cc")
    source, library = directory / "lib.c", directory / "lib.so"
    source.write_text(source_text)
    flags = ["-shared", "-fPIC", "-O1", "-std=c11", "-pthread"]
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    try:
        subprocess.run([cc, *flags, "-o", str(library), str(source)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"cannot build {what} with {cc}: {exc}")
    return str(library)


@pytest.fixture(scope="session")
def probe(tmp_path_factory):
    return Probe(build_c_library(_PROBE_SOURCE, tmp_path_factory.mktemp("probe"), "the hand-built DLPack producer"))


def live_counts():
    return dict(tack._tack.live_counts())


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.call_failed = report.failed


@pytest.fixture(autouse=True)
def no_leaks(request):
    """Every test leaves no Tack array, buffer or export alive."""
    before = live_counts()
    yield
    if getattr(request.node, "call_failed", False):
        return  # the failure's traceback still holds the test's locals
    after = live_counts()
    if after != before:
        gc.collect()
        after = live_counts()
    leaked = {k: after[k] - before[k] for k in before if after[k] > before[k]}
    assert not leaked, f"live Tack objects left behind: {leaked} (before {before}, after {after})"


@pytest.fixture(autouse=True)
def no_stray_deletes(request):
    """No hand-built tensor's deleter is ever called with a wrong pointer."""
    if "probe" not in request.fixturenames:
        yield
        return
    p = request.getfixturevalue("probe")
    before = p.stray()
    yield
    assert p.stray() == before, "a deleter was called with a pointer it was not given"


@pytest.fixture
def restore_default_device():
    previous = tack.get_default_device()
    yield
    tack.set_default_device(previous)


def pytest_configure(config):
    # An exception swallowed in a deleter or destructor is a failure, not noise.
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnraisableExceptionWarning")
    config.addinivalue_line(
        "markers",
        "simulator_only: checks what the simulated driver does with a handle a real driver may crash on "
        "(an unknown or destroyed stream); simulator behaviour, not a promise of Tack's: tests/gpu/run.sh "
        "never runs these")
    config.addinivalue_line(
        "markers",
        "simulated_too: a GPU case (test_cuda_gpu.py) that needs only Tack and the driver, so test_cuda.py "
        "runs it on the simulated driver as well")


# --------------------------------------------------------------------------
# kernels


@pytest.fixture(scope="module")
def private_kernel_cache(tmp_path_factory):
    """Kernels compile into a cache of this test module's own, with the
    system compiler, whatever the environment says."""
    saved = {k: os.environ.get(k) for k in ("TACK_CACHE_DIR", "TACK_CC", "TACK_CFLAGS")}
    os.environ["TACK_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    os.environ.pop("TACK_CC", None)
    os.environ.pop("TACK_CFLAGS", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def nvrtc_or_skip():
    """Skips the test where NVRTC cannot be loaded (it needs no GPU)."""
    probe = tack.Kernel("void probe(tack_index i, float *y) { y[i] = 0; }")
    try:
        probe.ptx()
    except RuntimeError as exc:
        if "NVRTC" in str(exc) and "not" in str(exc):
            pytest.skip(f"NVRTC is not available: {exc}")
        raise


# --------------------------------------------------------------------------
# the run against the extension built with AddressSanitizer and
# UndefinedBehaviorSanitizer (make pytest-asan), which sets TACK_SANITIZED
# to the folder that build is installed in

SANITIZED = os.environ.get("TACK_SANITIZED")

# Files that do not run there, and why. Everything else does, so a new test
# file runs under the sanitizers unless it is named here.
NOT_SANITIZED = {
    "test_repository.py": "checks the source tree, not the extension",
    "test_typing.py": "checks the stubs with mypy; nothing there is the extension's memory",
    "test_symbols.py": "checks the release build's symbol table; the sanitized build's is the sanitizers' too",
    "test_gpu_script.py": "checks tests/gpu/run.sh, not the extension",
    "test_soak.py": "a soak run; its exchanges are covered by the DLPack tests, which do run",
    "test_demo.py": "runs the whole tour in child interpreters (MPI, JAX, Warp), minutes under the sanitizers",
    "test_mpi.py": "mpirun's process tree; Tack's side is covered by the IPC and DLPack tests, which do run",
    "test_lifetime.py::test_export_import_cycles_do_not_grow":
        "ASan holds freed memory in quarantine, so resident memory grows by design",
    "test_kernel_cache.py::test_sources_of_kernels_gone_are_not_kept":
        "measures resident memory after sources are freed; ASan holds freed memory in quarantine",
    "test_kernel_atomics_plain.py::test_launches_left_to_the_pool_take_the_plain_entry":
        "asserts the pool's choice from measured launch times, which the sanitizers' slowdown changes",
    "test_show_config.py::test_nvrtc_from_its_wheel":
        "checks the path of NVRTC's wheel, which the sanitized build reaches through a link into the venv",
}


def pytest_sessionstart(session):
    session.config.addinivalue_line(
        "markers", "not_asan: a case that does not run against the sanitized build (the mark's reason says why)")
    if SANITIZED:
        # A run that imported the release build instead would pass and prove nothing.
        where = os.path.realpath(tack._tack.__file__)
        if not where.startswith(os.path.realpath(SANITIZED) + os.sep):
            raise pytest.UsageError(f"TACK_SANITIZED is {SANITIZED}, but tack._tack was imported from {where}")


def pytest_collection_modifyitems(config, items):
    if not SANITIZED:
        return
    for item in items:
        reason = NOT_SANITIZED.get(item.path.name) or NOT_SANITIZED.get(f"{item.path.name}::{item.originalname}")
        mark = item.get_closest_marker("not_asan")
        if mark is not None:
            reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "marked not_asan")
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"not under the sanitizers: {reason}"))


# The simulated CUDA driver (cudasim.py runs Python on it), shared by every
# test file with CUDA cases.
@pytest.fixture(scope="module")
def cuda_sim(tmp_path_factory):
    given = os.environ.get("TACK_TEST_CUDA_SIM")
    if given:
        return given
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.fail("a C compiler (cc, or $CC) is needed to build the simulated CUDA driver; "
                    "or set TACK_TEST_CUDA_SIM to a built libtack_cuda_sim.so")
    out = tmp_path_factory.mktemp("cuda-sim") / "libtack_cuda_sim.so"
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-std=c11", "-pthread", "-I", str(ROOT / "include"),
                        str(CUDA_SIM_SOURCE), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(out)
