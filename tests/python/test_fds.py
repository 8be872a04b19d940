"""File descriptors: memory export attempts, DLPack exchanges and the
consumers of exported descriptors leave the process's descriptor count
(/proc/self/fd) where it started, on every backend that can run here.

The CUDA cases run against the simulated driver (tests/sim/cuda_sim.c),
built here without sanitizers so that it loads into this interpreter; they
run in a child process because the driver library is chosen by
TACK_CUDA_LIBRARY when the CUDA backend first loads it.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import tack

ROOT = pathlib.Path(__file__).resolve().parents[2]
FD_DIR = "/proc/self/fd"

pytestmark = pytest.mark.skipif(not os.path.isdir(FD_DIR), reason="needs /proc/self/fd")


def fd_count():
    return len(os.listdir(FD_DIR))


def live():
    return dict(tack._tack.live_counts())


def test_descriptor_count_sees_one_descriptor():
    """The yardstick itself: one more open file is one more descriptor."""
    before = fd_count()
    with tempfile.TemporaryFile() as f:
        assert fd_count() == before + 1
        dup = os.dup(f.fileno())
        assert fd_count() == before + 2
        os.close(dup)
    assert fd_count() == before


def cpu_arrays():
    n = np.arange(12, dtype=np.float32)
    yield tack.zeros(16)
    yield tack.zeros(0, tack.u8)
    yield tack.zeros((2, 3), tack.i64).reshape(-1)
    yield tack.from_dlpack(n)
    yield tack.from_dlpack(n.__dlpack__())
    yield tack.array_from_ptr(n.ctypes.data, tack.f32, (12,))


def test_cpu_export_memory_attempts_leave_descriptors_and_objects():
    before, counts = fd_count(), live()
    refused = 0
    for _ in range(200):
        for a in cpu_arrays():
            with pytest.raises(RuntimeError, match="does not support memory export"):
                a.export_memory()
            refused += 1
    del a
    assert refused == 200 * 6
    assert fd_count() == before
    assert live() == counts


def test_exchanges_leave_descriptors():
    torch = pytest.importorskip("torch")

    def exchanges(rounds):
        for i in range(rounds):
            a = tack.zeros(64, tack.f64)
            n = np.from_dlpack(a)
            b = tack.from_dlpack(n.__dlpack__() if i % 2 else n)
            t = torch.from_dlpack(b.reshape(8, 8))
            c = tack.from_dlpack(torch.utils.dlpack.to_dlpack(t) if i % 3 else t)
            d = tack.from_dlpack(c.__dlpack__(max_version=(1, 0)))
            del a, n, b, t, c, d

    exchanges(200)  # libraries open what they keep (thread pools, caches) once
    before, counts = fd_count(), live()
    exchanges(3000)
    assert fd_count() == before
    assert live() == counts


# --------------------------------------------------------------------------
# CUDA, on the simulated driver

CUDA_SCRIPT = r"""
import json, mmap, os, sys
import numpy as np
import tack

def fds():
    return len(os.listdir("/proc/self/fd"))

def live():
    return dict(tack._tack.live_counts())

try:
    cuda = tack.device("cuda")
except RuntimeError as exc:
    print(json.dumps({"skip": f"the CUDA backend cannot start on the simulated driver: {exc}"}))
    sys.exit(0)

def consume(record, expected):
    # A consumer that takes ownership of what it imports gets a duplicate,
    # maps it and closes it, as the spec advises.
    dup = os.dup(record.handle)
    try:
        with mmap.mmap(dup, record.allocation_size, prot=mmap.PROT_READ) as m:
            got = np.frombuffer(m, dtype=expected.dtype, count=expected.size).copy()
    finally:
        os.close(dup)
    return got

figures = {"rounds": 0, "peak_extra": 0}
values = np.arange(1000, dtype=np.float32)

def rounds(count):
    peak = 0
    for i in range(count):
        # zero-copy export of exportable memory: one descriptor, cached
        a = tack.array(values, device=cuda) if i % 2 else tack.zeros(1000, device=cuda, exportable=True)
        if not i % 2:
            a.from_numpy(values)
        record = a.export_memory()
        assert record.backend == "cuda" and record.handle_type == "posix_fd", record
        assert record.size == values.nbytes and record.allocation_size >= record.size, record
        again = a.export_memory()
        assert again.handle == record.handle, "a second export made a second descriptor"
        view = a.reshape(10, 100)
        assert view.export_memory().handle == record.handle, "a view's export made another descriptor"
        got = consume(record, values)
        assert (got == values).all(), "the exported descriptor does not hold the array's bytes"
        # a DLPack exchange within the CUDA backend, and an export of the import
        b = tack.from_dlpack(a)
        try:
            b.export_memory()
        except RuntimeError:
            pass
        peak = max(peak, fds())
        handle = record.handle
        del a, view, b, record, again
        # the buffer closed its descriptor when it went
        try:
            os.fstat(handle)
            still_open = True
        except OSError:
            still_open = False
        assert not still_open, f"descriptor {handle} outlived its array"
        figures["rounds"] += 1
    return peak

rounds(5)
before, counts = fds(), live()
peak = rounds(200)
figures.update(before=before, after=fds(), peak_extra=peak - before, counts_before=counts, counts_after=live())

# failures change nothing either: read-only and zero-size arrays, and a
# refused allocation
for make in (lambda: tack.zeros(0, device=cuda), lambda: tack.zeros(0, device=cuda, exportable=True)):
    z = make()
    try:
        z.export_memory()
    except (RuntimeError, ValueError):
        pass
    del z
try:
    tack.zeros(1 << 62, tack.u8, device=cuda, exportable=True)
except (MemoryError, RuntimeError, ValueError):
    pass
figures.update(after_failures=fds(), counts_after_failures=live())
print(json.dumps(figures))
"""


def simulated_cuda_driver(directory):
    """A sanitizer-free build of the simulated CUDA driver, or a reason."""
    given = os.environ.get("TACK_CUDA_LIBRARY")
    if given and os.path.exists(given):
        return given, None
    source = ROOT / "tests" / "sim" / "cuda_sim.c"
    if not source.exists():
        return None, "no simulated CUDA driver (tests/sim/cuda_sim.c) in this tree"
    library = os.path.join(directory, "libtack_cuda_sim.so")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-shared", "-fPIC", "-O1", "-std=c11", "-D_GNU_SOURCE", "-pthread", f"-I{ROOT / 'include'}",
           "-o", library, str(source)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        return None, f"cannot build the simulated CUDA driver: {detail}"
    return library, None


def test_cuda_export_memory_descriptors_on_the_simulated_driver(tmp_path):
    library, why = simulated_cuda_driver(str(tmp_path))
    if library is None:
        pytest.skip(why)
    env = dict(os.environ, TACK_CUDA_LIBRARY=library)
    proc = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in figures:
        pytest.skip(figures["skip"])
    assert figures["rounds"] == 205
    assert figures["after"] == figures["before"], f"descriptors leaked: {figures}"
    assert figures["counts_after"] == figures["counts_before"], f"objects leaked: {figures}"
    # At most two exported allocations live at once (the array's, and the
    # copy made to export its DLPack import), each with two descriptors (the
    # simulated driver's backing memfd and the exported one): never one
    # more per export call.
    assert figures["peak_extra"] <= 4, f"too many descriptors open at once: {figures}"
    assert figures["after_failures"] == figures["before"], f"a failed export leaked: {figures}"
    assert figures["counts_after_failures"] == figures["counts_before"], figures
