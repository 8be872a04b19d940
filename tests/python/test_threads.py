"""Threads: eight Python threads exchanging arrays with NumPy and PyTorch,
handing exports and imports to each other and launching kernels, at once;
and the deleters of Tack's exports called from threads Python never saw.

No crash, every write lands where it should, and Tack's live counters are
back where they started. The fast variant runs the eight threads for about
two seconds; tests/stress/threads.py runs them for ten (``make stress``).
"""

import ctypes
import gc
import os
import queue
import random
import subprocess
import threading
import time
import weakref

import numpy as np
import pytest

import tack

torch = pytest.importorskip("torch")

THREADS = 8


def live():
    return dict(tack._tack.live_counts())


# --------------------------------------------------------------------------
# eight threads at once


def make_kernel():
    """A kernel that adds to every element, or None where Tack has none."""
    if not hasattr(tack, "Kernel"):
        return None
    return tack.Kernel("void bump(tack_index i, int32_t v, int32_t *x) { x[i] += v; }")


class Worker:
    def __init__(self, index, deadline, handoff, kernel):
        self.rng = random.Random(1000 + index)
        self.deadline = deadline
        self.handoff = handoff
        self.kernel = kernel
        self.exchanges = 0
        self.launches = 0
        self.handed = 0
        self.taken = 0
        self.error = None

    def run(self):
        try:
            while time.perf_counter() < self.deadline:
                op = self.rng.randrange(10)
                if op < 4:
                    self.round_trip()
                elif op < 6:
                    self.give()
                elif op < 8:
                    self.take()
                else:
                    self.launch()
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def round_trip(self):
        """NumPy -> Tack -> (reshape) -> PyTorch -> Tack -> NumPy, writing at
        the far end and reading at the near one."""
        rng = self.rng
        n = np.arange(24, dtype=np.int32)
        a = tack.from_dlpack(n) if rng.randrange(2) else tack.from_dlpack(n.__dlpack__())
        v = a.reshape(rng.choice([(4, 6), (2, 3, 4), (24,)]))
        t = torch.from_dlpack(v)
        b = tack.from_dlpack(t) if rng.randrange(2) else tack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
        m = np.from_dlpack(b)
        self.exchanges += 5
        assert m.__array_interface__["data"][0] == n.__array_interface__["data"][0]
        marker = rng.randrange(1, 1 << 30)
        m.flat[7] = marker
        assert n[7] == marker, "a write through the chain did not reach the NumPy array it came from"
        objects = [n, a, v, t, b, m]
        del n, a, v, t, b, m
        rng.shuffle(objects)
        while objects:
            objects.pop()

    def give(self):
        """Hands something over DLPack to whichever thread takes it."""
        rng = self.rng
        kind = rng.randrange(5)
        a = tack.zeros(rng.choice([1, 16, 1000]), tack.i32)
        if kind == 0:
            item = a
        elif kind == 1:
            item = a.__dlpack__()  # legacy capsule, adopted or dropped elsewhere
        elif kind == 2:
            item = a.__dlpack__(max_version=(1, 0))
        elif kind == 3:
            item = np.from_dlpack(a)
        else:
            item = torch.from_dlpack(a)
        self.exchanges += kind > 0
        try:
            self.handoff.put_nowait(item)
            self.handed += 1
        except queue.Full:
            pass

    def take(self):
        try:
            item = self.handoff.get_nowait()
        except queue.Empty:
            return
        self.taken += 1
        if self.rng.randrange(4) == 0:
            return  # dropped here: deleters and destructors run on this thread
        a = tack.from_dlpack(item)
        self.exchanges += 1
        del item
        a.fill(self.rng.randrange(100))
        if self.rng.randrange(2):
            try:
                self.handoff.put_nowait(a.reshape(-1))
            except queue.Full:
                pass

    def launch(self):
        if self.kernel is None:
            self.round_trip()
            return
        n = np.full(64, 5, dtype=np.int32)
        a = tack.from_dlpack(n)
        self.exchanges += 1
        self.kernel(3, a)
        self.launches += 1
        assert (n == 8).all(), "a kernel launch on an imported array did not reach NumPy"
        del a
        del n


def run_threads(seconds, threads=THREADS):
    """Runs the workers for `seconds`; returns the figures."""
    kernel = make_kernel()
    if kernel is not None:
        kernel.build()  # compile before the clock starts
    gc.collect()
    before = live()
    handoff = queue.Queue(maxsize=256)
    deadline = time.perf_counter() + seconds
    workers = [Worker(i, deadline, handoff, kernel) for i in range(threads)]
    pool = [threading.Thread(target=w.run, name=f"tack-worker-{i}") for i, w in enumerate(workers)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(seconds + 60)
    hung = [t.name for t in pool if t.is_alive()]
    errors = [w.error for w in workers if w.error is not None]
    while True:
        try:
            handoff.get_nowait()
        except queue.Empty:
            break
    gc.collect()
    return {
        "threads": threads,
        "seconds": seconds,
        "exchanges": sum(w.exchanges for w in workers),
        "launches": sum(w.launches for w in workers),
        "handed": sum(w.handed for w in workers),
        "taken": sum(w.taken for w in workers),
        "hung": hung,
        "errors": errors,
        "before": before,
        "after": live(),
    }


def check(figures):
    assert not figures["hung"], f"threads did not finish: {figures['hung']}"
    if figures["errors"]:
        raise figures["errors"][0]
    assert figures["after"] == figures["before"], f"live counters unbalanced: {figures}"
    assert figures["exchanges"] > 1000, f"the threads barely ran: {figures}"
    assert figures["taken"] > 0


def test_eight_threads_exchanging_and_launching():
    seconds = float(os.environ.get("TACK_THREADS_SECONDS", "2"))
    figures = run_threads(seconds)
    check(figures)


# --------------------------------------------------------------------------
# deleters called from native threads

HELPER_SOURCE = r"""
#include <pthread.h>
#include <stdint.h>

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

struct job { void *const *tensors; const int *versioned; long n, first, step; };

static pthread_barrier_t start;

static void *run(void *arg)
{
    const struct job *j = arg;
    pthread_barrier_wait(&start); /* all threads delete at once */
    for (long i = j->first; i < j->n; i += j->step) {
        if (j->versioned[i]) {
            Versioned *m = j->tensors[i];
            m->deleter(m);
        } else {
            Legacy *m = j->tensors[i];
            m->deleter(m);
        }
    }
    return 0;
}

/* Calls every tensor's deleter, spread over `threads` new threads that
   start together; returns how many threads could be started. */
int delete_on_threads(void *const *tensors, const int *versioned, long n, int threads)
{
    pthread_t ids[64];
    struct job jobs[64];
    if (threads > 64)
        threads = 64;
    pthread_barrier_init(&start, 0, (unsigned)threads);
    int started = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (struct job){tensors, versioned, n, t, threads};
        if (pthread_create(&ids[t], 0, run, &jobs[t]) != 0)
            break;
        started++;
    }
    if (started < threads) {
        /* cannot release the barrier safely; the caller reports it */
        return started;
    }
    for (int t = 0; t < started; t++)
        pthread_join(ids[t], 0);
    pthread_barrier_destroy(&start);
    return started;
}
"""


def build_helper(directory):
    cc = os.environ.get("CC", "cc")
    source = os.path.join(directory, "native_deleters.c")
    library = os.path.join(directory, "native_deleters.so")
    with open(source, "w") as f:
        f.write(HELPER_SOURCE)
    try:
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-pthread", "-o", library, source], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"cannot build the native-thread helper with {cc}: {exc}")
    lib = ctypes.CDLL(library)
    lib.delete_on_threads.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int), ctypes.c_long,
                                      ctypes.c_int]
    lib.delete_on_threads.restype = ctypes.c_int
    return lib


_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))
_USED = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}


def adopt(capsule):
    """Takes the tensor out of a capsule as a C consumer does: the capsule is
    renamed, so it no longer releases the tensor, and the deleter is ours to
    call. Returns (address, versioned)."""
    name = _get_name(capsule)
    address = _get_pointer(capsule, name)
    assert _set_name(capsule, _USED[name]) == 0
    return address, name == b"dltensor_versioned"


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    return build_helper(str(tmp_path_factory.mktemp("native")))


def native_round(helper, per_source=64, threads=THREADS):
    """Exports of arrays over NumPy, PyTorch and Tack memory, adopted and
    then deleted from `threads` native threads at once. The sources are
    dropped first, so the last reference to each goes on a native thread,
    which then releases the producer's memory from there too."""
    freed = []
    sources = []
    keep = []
    n = np.arange(100, dtype=np.float64)
    weakref.finalize(n, freed.append, "numpy")
    t = torch.arange(100, dtype=torch.float32)
    weakref.finalize(t, freed.append, "torch")
    sources.append(tack.from_dlpack(n))
    sources.append(tack.from_dlpack(t).reshape(10, 10))
    sources.append(tack.zeros(100, tack.u8))
    del n, t
    tensors = []
    for a in sources:
        for i in range(per_source):
            capsule = a.__dlpack__(max_version=(1, 0)) if i % 2 else a.__dlpack__()
            tensors.append(adopt(capsule))
            keep.append(capsule)
    exports = live()["exports"]
    del sources, a
    gc.collect()
    assert not freed, "a producer was released while Tack exports of it were alive"
    addresses = (ctypes.c_void_p * len(tensors))(*[address for address, _ in tensors])
    versioned = (ctypes.c_int * len(tensors))(*[int(v) for _, v in tensors])
    started = helper.delete_on_threads(addresses, versioned, len(tensors), threads)
    assert started == threads, f"only {started} of {threads} native threads started"
    del keep
    return exports, sorted(freed)


def test_export_deleters_on_native_threads(helper):
    before = live()
    exports, freed = native_round(helper)
    assert exports - before["exports"] == 3 * 64
    assert freed == ["numpy", "torch"], "the producers were not released by the last native deleter"
    assert live() == before


def test_export_deleters_on_native_threads_while_python_threads_exchange(helper):
    before = live()
    stop = time.perf_counter() + 1.0
    figures = {}
    side = threading.Thread(target=lambda: figures.update(run_threads(1.0, threads=4)))
    side.start()
    rounds = 0
    while time.perf_counter() < stop or rounds < 3:
        _, freed = native_round(helper, per_source=32)
        assert freed == ["numpy", "torch"]
        rounds += 1
    side.join(120)
    assert not side.is_alive()
    # The side's own before/after straddle the native rounds; the balance
    # that counts is this test's, below.
    figures["after"] = figures["before"]
    check(figures)
    gc.collect()
    assert live() == before


def test_deleter_called_through_ctypes_with_the_gil_released():
    """A deleter called through ctypes, which drops the GIL for the call,
    from a Python thread: the shape of a C consumer living in a thread."""
    before = live()
    n = np.arange(12, dtype=np.int64)
    freed = []
    weakref.finalize(n, freed.append, True)
    a = tack.from_dlpack(n).reshape(3, 4)
    legacy_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    calls = []
    for capsule in (a.__dlpack__(), a.__dlpack__(max_version=(1, 0))):
        address, versioned = adopt(capsule)
        offset = 16 if versioned else 56  # where the deleter sits in each struct
        deleter = ctypes.c_void_p.from_address(address + offset).value
        calls.append((legacy_type(deleter), address))
        del capsule
    del a, n
    gc.collect()
    assert not freed
    threads = [threading.Thread(target=fn, args=(address,)) for fn, address in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert freed == [True]
    assert live() == before
