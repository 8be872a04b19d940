"""The CUDA backend on a real NVIDIA GPU, against PyTorch and CuPy.

Skipped unless the real CUDA driver finds a GPU and PyTorch has CUDA (CuPy
cases also need CuPy); tests/gpu/run.sh runs them. The simulated driver's
own cases are in test_cuda.py.

The cases marked simulated_too need neither PyTorch nor CuPy on the GPU nor
a kernel that computes, only Tack and the driver: test_cuda.py runs them on
the simulated driver too (TACK_CUDA_LIBRARY naming it), so that a mistake
in a case's own logic shows before its first run on a GPU. Under the
simulator the other cases skip.

An import passes Tack's stream to the producer's __dlpack__(stream=...), so
the producer orders its queued writes before Tack's work; the tests still
wait for the producer (torch.cuda.synchronize, cupy's Device.synchronize)
before an import, so that what they check is the exchange itself. The other
direction needs no wait: an export completes Tack's queued launches first,
or, when the consumer passes stream= (as torch.from_dlpack does), orders the
consumer's stream after them on the GPU with an event.
"""

import ctypes
import gc
import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tack

# tests/gpu/run.sh sets TACK_GPU_REQUIRED=1: there, a missing GPU or library
# is a failure, not a skip that would hide that nothing ran.
REQUIRED = os.environ.get("TACK_GPU_REQUIRED") == "1"


def unavailable(reason):
    if REQUIRED:
        raise RuntimeError(f"the GPU tests cannot run: {reason}")
    pytest.skip(reason, allow_module_level=True)


def simulated_driver():
    """True when TACK_CUDA_LIBRARY names the simulated driver."""
    library = os.environ.get("TACK_CUDA_LIBRARY")
    if not library:
        return False
    try:
        return hasattr(ctypes.CDLL(library), "tack_sim_cuda_stats")
    except OSError:
        return False


SIMULATED = simulated_driver()
# The driver the cases call directly, as another library in the process.
DRIVER = os.environ.get("TACK_CUDA_LIBRARY") or "libcuda.so.1"

try:
    import torch
except ImportError:
    if not SIMULATED:
        unavailable("PyTorch is not installed")
    torch = None  # the simulated_too cases need none
if os.environ.get("TACK_CUDA_LIBRARY") and not SIMULATED:
    unavailable("TACK_CUDA_LIBRARY selects another driver; these cases need the real one (or the simulated one)")
if not SIMULATED and not torch.cuda.is_available():
    unavailable("no CUDA GPU for PyTorch")
try:
    DEV = tack.device("cuda")
except RuntimeError as e:
    unavailable(f"no CUDA device for Tack: {e}")

try:
    import cupy
except ImportError:
    if REQUIRED:
        raise
    cupy = None
needs_cupy = pytest.mark.skipif(cupy is None, reason="CuPy is not installed")
simulated_too = pytest.mark.simulated_too


@pytest.fixture(autouse=True)
def real_gpu_unless_simulated_too(request):
    if SIMULATED and request.node.get_closest_marker("simulated_too") is None:
        pytest.skip("needs a real GPU; on the simulated driver only the cases marked simulated_too run")


SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"


def live():
    return dict(tack._tack.live_counts())


# --------------------------------------------------------------------------
# PyTorch


def test_torch_tensor_to_tack_is_zero_copy_both_ways():
    t = torch.arange(1024, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    a = tack.from_dlpack(t)
    assert a.ptr == t.data_ptr()
    assert a.device is DEV and a.shape == (1024,) and a.writable
    assert (a.to_numpy() == np.arange(1024)).all()
    a.fill(5)
    assert bool((t == 5).all())
    t.mul_(2)
    torch.cuda.synchronize()
    assert (a.to_numpy() == 10).all()


def test_torch_deleter_runs_once_when_the_last_array_goes():
    torch.cuda.synchronize()
    t = torch.zeros(1 << 20, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    with_tensor = torch.cuda.memory_allocated()
    a = tack.from_dlpack(t)
    r = a.reshape(1024, 1024)
    del t, a
    gc.collect()
    # The reshape carries the hold: the tensor's memory is still allocated.
    assert torch.cuda.memory_allocated() == with_tensor
    assert r.to_numpy().sum() == 0
    del r
    gc.collect()
    assert torch.cuda.memory_allocated() == with_tensor - 4 * (1 << 20)


def test_tack_array_to_torch_is_zero_copy_and_kept_alive():
    gc.collect()  # no earlier garbage collected between the counts below
    before = live()
    a = tack.array(np.arange(1000, dtype=np.float32), device="cuda")
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr and t.device == torch.device("cuda", 0)
    t.add_(1)
    torch.cuda.synchronize()
    assert (a.to_numpy() == np.arange(1000) + 1).all()
    a.fill(3)
    assert float(t.sum()) == 3000.0
    del a
    gc.collect()
    # The export pins the array until PyTorch calls the deleter.
    assert live()["exports"] == before["exports"] + 1
    assert float(t.sum()) == 3000.0
    del t
    gc.collect()
    assert live() == before


def test_kernel_over_imported_torch_arrays_matches_torch():
    k = tack.Kernel(SAXPY, device="cuda")
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    expected = 2.5 * x + y
    torch.cuda.synchronize()
    # Imported arrays are shared: the launch is complete when it returns.
    k(2.5, tack.from_dlpack(x), tack.from_dlpack(y))
    assert torch.allclose(y, expected, rtol=1e-5, atol=1e-6)

    ik = tack.Kernel("void k(tack_index i, int32_t s, const int32_t *x, int32_t *y) { y[i] = s * x[i] + (int32_t)i; }",
                     device="cuda")
    xi = torch.arange(4096, dtype=torch.int32, device="cuda")
    yi = torch.zeros(4096, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    ik(3, tack.from_dlpack(xi), tack.from_dlpack(yi))
    assert torch.equal(yi, 3 * xi + torch.arange(4096, dtype=torch.int32, device="cuda"))


@simulated_too
def test_kernels_are_built_for_this_gpu(capsys):
    # A CUBIN for the GPU's own architecture where an NVRTC here knows it and
    # the driver loads its CUBINs; PTX otherwise. The simulated GPU is 9.0
    # unless the environment says otherwise.
    if SIMULATED:
        major, minor = map(int, os.environ.get("TACK_SIM_CUDA_COMPUTE_CAPABILITY", "9.0").split("."))
    else:
        major, minor = torch.cuda.get_device_capability()
    try:
        target = tack.Kernel(SAXPY, device="cuda").target("cuda")
    except RuntimeError as e:
        # Where the simulated driver runs without any NVRTC (a Python with
        # NumPy alone), the error says what to install.
        if SIMULATED and "NVRTC (libnvrtc) was not found" in str(e):
            assert "pip install nvidia-cuda-nvrtc" in str(e), e
            return
        raise
    with capsys.disabled():
        print(f"\nkernels on sm_{major}{minor}: {target}")
    assert target.startswith((f"cubin sm_{major}{minor} (CUDA ", "ptx compute_")), target
    if target.startswith("ptx"):
        assert int(target.split()[1].split("_")[1]) <= major * 10 + minor, target


def test_queued_launches_are_complete_when_exported():
    n = 1 << 26
    ramp = tack.Kernel("void ramp(tack_index i, float *y) { y[i] += (float)(i % 1000); }", device="cuda")
    y = tack.zeros(n, device="cuda")
    for _ in range(4):
        ramp(y)  # queued on Tack's stream, not waited for
    t = torch.from_dlpack(y)
    # PyTorch reads at once on its own stream, with no synchronize between.
    expected = (torch.arange(n, device="cuda") % 1000).float() * 4
    assert torch.equal(t, expected)


def test_array_from_ptr_takes_device_and_pinned_memory_and_refuses_host_memory():
    t = torch.arange(16, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    a = tack.array_from_ptr(t.data_ptr(), "float32", 16, device="cuda")
    assert a.writable is False and (a.to_numpy() == np.arange(16)).all()
    pinned = torch.arange(16, dtype=torch.float32).pin_memory()
    p = tack.array_from_ptr(pinned.data_ptr(), "float32", 16, device="cuda")
    assert (p.to_numpy() == np.arange(16)).all()
    host = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="host memory"):
        tack.array_from_ptr(host.ctypes.data, "float32", 16, device="cuda")


def test_tack_uses_the_primary_context_pytorch_uses():
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    cu = ctypes.CDLL(DRIVER)
    ctx = ctypes.c_void_p()
    assert cu.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
    assert ctx.value == DEV.context_handle
    assert DEV.shares_external_context is False


# --------------------------------------------------------------------------
# CuPy


@needs_cupy
def test_cupy_exchange_is_zero_copy_both_ways():
    c = cupy.arange(1000, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    a = tack.from_dlpack(c)
    assert a.ptr == c.data.ptr and a.device is DEV
    a.fill(2)
    assert float(c.sum()) == 2000.0
    b = tack.array(np.arange(10, dtype=np.int64), device="cuda")
    cb = cupy.from_dlpack(b)
    assert cb.data.ptr == b.ptr
    cb *= 3
    cupy.cuda.Device().synchronize()
    assert (b.to_numpy() == np.arange(10) * 3).all()


@needs_cupy
def test_cupy_memory_is_released_once_after_the_last_array():
    pool = cupy.get_default_memory_pool()
    c = cupy.zeros(1 << 20, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    used = pool.used_bytes()
    a = tack.from_dlpack(c)
    del c
    gc.collect()
    assert pool.used_bytes() == used
    del a
    gc.collect()
    assert pool.used_bytes() == used - 4 * (1 << 20)


@needs_cupy
def test_kernel_over_cupy_arrays():
    k = tack.Kernel(SAXPY, device="cuda")
    x = cupy.random.standard_normal(1 << 16, dtype=cupy.float32)
    y = cupy.random.standard_normal(1 << 16, dtype=cupy.float32)
    expected = 0.5 * x + y
    cupy.cuda.Device().synchronize()
    k(0.5, tack.from_dlpack(x), tack.from_dlpack(y))
    assert cupy.allclose(y, expected, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------
# Another process: the exported descriptor read there through the driver
# directly, and imported there by Tack (tack.receive_array,
# tack.import_memory), read and written on both sides.

# What every other process starts with: its end of a socket to the test
# and the steps that order the two processes.
PEER_PRELUDE = textwrap.dedent("""
    import ast, ctypes, faulthandler, gc, os, socket, sys
    import numpy as np
    # A hang prints every thread's stack and ends this process before the
    # test stops waiting for it.
    faulthandler.dump_traceback_later(100, exit=True)
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.settimeout(100)
    # The test sets TACK_CUDA_LIBRARY only to select the simulated driver,
    # on which kernels do not compute.
    SIMULATED = bool(os.environ.get("TACK_CUDA_LIBRARY"))
    DRIVER = os.environ.get("TACK_CUDA_LIBRARY") or "libcuda.so.1"

    def step():
        assert sock.recv(1) == b"s", "the test process went away"

    def done():
        sock.sendall(b"s")

    def launch(source, *args):
        # A kernel over imported memory: where kernels compute, the mapping
        # must be open to the device, not only to copies. The simulated
        # driver runs the launch and computes nothing (without an NVRTC
        # there, nothing is launched). Imported memory is shared, so the
        # launch is complete when it returns.
        import tack
        try:
            kernel = tack.Kernel(source, device="cuda")
        except RuntimeError as e:
            if SIMULATED and "NVRTC" in str(e):
                print("no kernel on the simulated driver:", e)
                return
            raise
        if SIMULATED:
            sim = ctypes.CDLL(DRIVER)
            sim.tack_sim_cuda_stats.restype = ctypes.c_longlong
            ran = sim.tack_sim_cuda_stats(b"launches_done")
        kernel(*args)
        if SIMULATED:
            assert sim.tack_sim_cuda_stats(b"launches_done") == ran + 1, "the launch was not complete on return"
""")


class Peer:
    """`body` after PEER_PRELUDE in a new interpreter, with `args` after its
    socket in sys.argv and `pass_fds` inherited."""

    def __init__(self, body, *args, pass_fds=()):
        self.sock, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-c", PEER_PRELUDE + textwrap.dedent(body),
                                      str(theirs.fileno()), *map(str, args)],
                                     pass_fds=[theirs.fileno(), *pass_fds], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        theirs.close()
        self.sock.settimeout(120)

    def step(self):
        """Waits until the other process has done its next step."""
        if self.sock.recv(1) != b"s":
            self.finish()  # it ended: fails with what it printed
            raise AssertionError("the other process ended without its step")

    def done(self):
        self.sock.sendall(b"s")

    def finish(self):
        """Waits for the other process; fails with its output unless it
        exited with status 0. Returns its output."""
        self.sock.close()
        try:
            out, _ = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise AssertionError(f"the other process hung:\n{out}")
        assert self.proc.returncode == 0, f"the other process exited with {self.proc.returncode}:\n{out}"
        return out

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None and self.proc.poll() is None:
            # The test failed first: its error is the one to see.
            self.proc.kill()
            print(self.proc.communicate()[0])


READER = """
    msg, fds, _, _ = socket.recv_fds(sock, 64, 1)
    size, nbytes = (int(v) for v in msg.decode().split())
    fd = fds[0]
    cu = ctypes.CDLL(DRIVER)
    def ok(r, what):
        if r != 0:
            print(f"{what} failed with CUDA error {r}")
            sys.exit(1)
    ok(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    h = ctypes.c_uint64()
    ok(cu.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd), 1), "cuMemImportFromShareableHandle")
    p = ctypes.c_uint64()
    ok(cu.cuMemAddressReserve(ctypes.byref(p), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(0),
                              ctypes.c_uint64(0)), "cuMemAddressReserve")
    ok(cu.cuMemMap(p, ctypes.c_size_t(size), ctypes.c_size_t(0), h, ctypes.c_uint64(0)), "cuMemMap")
    access = (ctypes.c_int * 3)(1, dev.value, 3)   # CUmemAccessDesc: this device, read-write
    ok(cu.cuMemSetAccess(p, ctypes.c_size_t(size), access, ctypes.c_size_t(1)), "cuMemSetAccess")
    out = np.empty(nbytes // 4, np.float32)
    ok(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), p, ctypes.c_size_t(nbytes)), "cuMemcpyDtoH")
    cu.cuMemUnmap(p, ctypes.c_size_t(size))
    cu.cuMemAddressFree(p, ctypes.c_size_t(size))
    cu.cuMemRelease(h)
    print(" ".join(str(v) for v in out[:4]), float(out.sum()))
"""


def import_elsewhere(record):
    """Sends the exported descriptor to a new process over a Unix socket;
    returns what that process read through cuMemImportFromShareableHandle."""
    with Peer(READER) as peer:
        socket.send_fds(peer.sock, [f"{record.allocation_size} {record.size}".encode()], [record.handle])
        # Its last line: anything the driver printed comes before.
        return peer.finish().splitlines()[-1].split()


@simulated_too
def test_exportable_array_is_read_by_another_process():
    a = tack.empty(1 << 20, "float32", device="cuda", exportable=True)
    a.from_numpy(np.arange(1 << 20, dtype=np.float32) % 7)
    e = a.export_memory()
    assert (e.backend, e.handle_type, e.size) == ("cuda", "posix_fd", 4 << 20)
    assert e.allocation_size >= e.size
    assert len(e.device_uuid) == 16
    # PyTorch reports the same device by its UUID where it exposes one (its
    # _CUuuid.bytes is a list of 16 ints).
    if not SIMULATED:
        uuid = getattr(getattr(torch.cuda.get_device_properties(0), "uuid", None), "bytes", None)
        if uuid is not None and len(uuid) == 16:
            assert e.device_uuid == bytes(uuid)
    assert a.export_memory().handle == e.handle
    got = import_elsewhere(e)
    assert got[:4] == ["0.0", "1.0", "2.0", "3.0"]
    assert float(got[4]) == float((np.arange(1 << 20) % 7).sum())


def test_plain_array_exports_a_copy_that_later_writes_miss():
    ramp = tack.Kernel("void ramp(tack_index i, float *y) { y[i] = (float)(i % 5); }", device="cuda")
    a = tack.zeros(1 << 16, device="cuda")
    ramp(a)  # queued: the export waits for it
    e = a.export_memory()
    a.fill(100)
    got = import_elsewhere(e)
    assert got[:4] == ["0.0", "1.0", "2.0", "3.0"]
    assert float(got[4]) == float((np.arange(1 << 16) % 5).sum())


RECEIVER = """
    import tack
    n = int(sys.argv[2])
    b = tack.receive_array(sock)                      # device=None: the device with the sender's UUID
    assert b.device is tack.device("cuda:0"), b.device
    assert (b.shape, b.dtype, b.writable) == ((n,), tack.f32, True), (b.shape, b.dtype, b.writable)
    got = b.to_numpy()
    assert (got == np.arange(n) % 7).all(), got[:8]
    b.from_numpy(np.arange(n, dtype=np.float32) * 2)
    launch("void bump(tack_index i, float *y) { y[i] += 1.0f; }", b)
    done()
    step()                                            # the sender wrote -1s
    got = b.to_numpy()
    assert (got == -1).all(), got[:8]
    del b
    gc.collect()
    print("receiver ok")
"""


@simulated_too
def test_array_received_by_another_process_is_read_and_written_there():
    n = 1 << 20
    a = tack.empty(n, "float32", device="cuda", exportable=True)
    a.from_numpy(np.arange(n, dtype=np.float32) % 7)
    with Peer(RECEIVER, n) as peer:
        tack.send_array(peer.sock, a)
        peer.step()
        got = a.to_numpy()
        expected = np.arange(n, dtype=np.float32) * 2 + (0 if SIMULATED else 1)
        assert (got == expected).all(), f"the other process's writes are not seen here: {got[:8]}"
        a.fill(-1)
        peer.done()
        assert "receiver ok" in peer.finish()
    # The other process's mapping is gone; the memory is still this array's.
    assert (a.to_numpy() == -1).all()


IMPORTER = """
    import tack
    record = tack.ExportedMemory(ast.literal_eval(sys.argv[2]))
    rows, cols = int(sys.argv[3]), int(sys.argv[4])
    os.fstat(record.handle)                           # inherited, at the same number
    whole = tack.import_memory(record, "int32", (rows, cols))
    assert whole.device is tack.device("cuda:0") and whole.shape == (rows, cols), (whole.device, whole.shape)
    got = whole.to_numpy()
    assert (got == np.arange(rows * cols).reshape(rows, cols)).all(), got[0, :8]
    print("imported once", flush=True)
    # A second mapping of the same memory in this process, over its start
    # and with another dtype: writes through one are read through the other.
    head = tack.import_memory(record, "uint8", (4 * cols,))
    head.fill(0xFF)
    assert (whole.to_numpy()[0] == -1).all(), whole.to_numpy()[0, :8]
    launch("void twice(tack_index i, int32_t *y) { y[i] = 2 * y[i] + 1; }", whole.reshape(rows * cols))
    done()
    step()                                            # the exporter checked
    del whole, head
    gc.collect()
    # The descriptor stays the caller's: Tack closed nothing.
    os.fstat(record.handle)
    # An array larger than the export maps nothing and says so.
    try:
        tack.import_memory(record, "int32", (rows + 1, cols))
    except ValueError as e:
        assert "does not fit" in str(e), e
    else:
        raise AssertionError("an array larger than the export was imported")
    os.close(record.handle)
    print("importer ok")
"""


@simulated_too
def test_import_memory_in_a_process_that_inherited_the_descriptor():
    rows, cols = 256, 1024
    a = tack.empty((rows, cols), "int32", device="cuda", exportable=True)
    a.from_numpy(np.arange(rows * cols, dtype=np.int32).reshape(rows, cols))
    e = a.export_memory()
    with Peer(IMPORTER, repr(tuple(e)), rows, cols, pass_fds=[e.handle]) as peer:
        peer.step()
        expected = np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)
        expected[0] = -1
        if not SIMULATED:
            expected = 2 * expected + 1
        got = a.to_numpy()
        assert (got == expected).all(), f"the other process's writes are not seen here: {got[0, :8]}, {got[1, :8]}"
        peer.done()
        assert "importer ok" in peer.finish()
    # This process's descriptor is the array's own, still open.
    os.fstat(e.handle)
    assert a.export_memory().handle == e.handle


# --------------------------------------------------------------------------
# Stream-ordered export: the consumer's stream waits for Tack's queued
# launches on the GPU; the host waits for nothing.

CU = ctypes.CDLL(DRIVER)
CUDA_ERROR_NOT_READY = 600
# A spin long enough (about 0.1 s) that nothing the host does meanwhile can
# see it finish: work queued behind it is certainly still pending.
SPIN_CYCLES = 200_000_000
FILL = "void fill(tack_index i, float v, float *y) { y[i] = v + (float)(i % 7); }"


def tack_stream():
    """Tack's stream on cuda:0, as its C exchange table names it."""
    from conftest import kDLCUDA
    from exchange_table import TACK

    s = ctypes.c_void_p()
    assert TACK.stream(kDLCUDA, 0, ctypes.byref(s)) == 0
    assert s.value
    return s.value


def pending(stream):
    return CU.cuStreamQuery(ctypes.c_void_p(stream)) == CUDA_ERROR_NOT_READY


def hold(stream):
    """Keeps `stream` busy on the GPU for SPIN_CYCLES: a spin PyTorch
    queues on it."""
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("this PyTorch has no torch.cuda._sleep to hold a stream with")
    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
        torch.cuda._sleep(SPIN_CYCLES)


def expected_fill(n, v, stream=None):
    with torch.cuda.stream(stream or torch.cuda.current_stream()):
        return (torch.arange(n, device="cuda") % 7).float() + v


@pytest.mark.parametrize("own_stream", [True, False], ids=["torch-stream", "legacy-default-stream"])
def test_torch_reads_queued_results_with_no_host_wait(own_stream):
    n = 1 << 24
    fill = tack.Kernel(FILL, device="cuda")
    y = tack.zeros(n, device="cuda")
    fill(1.0, y)  # compiled and loaded before anything is timed
    torch.from_dlpack(tack.zeros(1, device="cuda"))  # PyTorch's first-call work, too
    torch.cuda.synchronize()
    stream = tack_stream()
    s = torch.cuda.Stream() if own_stream else torch.cuda.default_stream()
    expected = expected_fill(n, 5.0, s)
    s.synchronize()
    hold(stream)
    fill(5.0, y)  # queued behind the spin
    with torch.cuda.stream(s):
        start = time.perf_counter()
        # PyTorch passes its current stream: s, or 1 for the legacy default.
        t = torch.from_dlpack(y)
        took = time.perf_counter() - start
        # Nothing waited on the host: Tack's launch has not even started.
        assert pending(stream)
        same = torch.equal(t, expected)  # PyTorch reads on s, after the event
    assert same
    assert took < 0.05, f"the export took {took:.3f} s: it waited for the GPU"
    assert t.data_ptr() == y.ptr


def test_tack_reads_torch_queued_writes_with_no_host_wait():
    # The other direction: tack.from_dlpack passes Tack's stream to
    # PyTorch's __dlpack__, which makes that stream wait, with an event,
    # for PyTorch's current stream. A Tack kernel then reads what PyTorch
    # queued, and the import itself waits for nothing.
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("this PyTorch has no torch.cuda._sleep to hold a stream with")
    n = 1 << 20
    copy = tack.Kernel("void copy(tack_index i, const float *x, float *y) { y[i] = x[i]; }", device="cuda")
    src = torch.zeros(n, device="cuda")
    out = tack.zeros(n, device="cuda")
    copy(tack.from_dlpack(src), out)  # compiled and loaded before anything is timed
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        src.fill_(3.0)  # queued behind the spin on s
        start = time.perf_counter()
        a = tack.from_dlpack(src)
        took = time.perf_counter() - start
        assert pending(s.cuda_stream), "the import waited for PyTorch's stream on the host"
    assert a.ptr == src.data_ptr()
    copy(a, out)  # on Tack's stream, after the event
    assert np.all(out.to_numpy() == 3.0), "Tack read the tensor before PyTorch's queued write"
    assert took < 0.05, f"the import took {took:.3f} s: it waited for the GPU"


def test_a_named_stream_is_ordered_through_dunder_dlpack():
    n = 1 << 20
    fill = tack.Kernel(FILL, device="cuda")
    y = tack.zeros(n, device="cuda")
    fill(1.0, y)
    torch.cuda.synchronize()
    stream = tack_stream()
    s = torch.cuda.Stream()
    expected = expected_fill(n, 2.0, s)
    s.synchronize()
    hold(stream)
    fill(2.0, y)
    # Unversioned: PyTorch before DLPack 1.0 support reads no versioned capsule.
    capsule = y.__dlpack__(stream=s.cuda_stream)
    assert pending(stream)
    with torch.cuda.stream(s):
        t = torch.from_dlpack(capsule)
        assert torch.equal(t, expected)
    # Shared from the export on: a later launch is complete when it returns.
    fill(3.0, y)
    assert not pending(stream)
    assert torch.equal(t, expected_fill(n, 3.0))


def test_table_export_waits_for_nothing_and_names_tacks_stream():
    # The exchange table's pattern: the consumer works on the producer's
    # current work stream, so queued work is in order without any wait.
    from exchange_table import TACK, Table

    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this PyTorch publishes no C exchange table (2.10+ does)")
    n = 1 << 20
    fill = tack.Kernel(FILL, device="cuda")
    y = tack.zeros(n, device="cuda")
    fill(1.0, y)
    torch.cuda.synchronize()
    stream = tack_stream()
    on_tack = torch.cuda.ExternalStream(stream)
    expected = expected_fill(n, 4.0, on_tack)
    hold(stream)
    fill(4.0, y)
    address = TACK.export(y)
    assert pending(stream)
    t = Table(torch.Tensor).adopt(address)  # a torch tensor over Tack's memory
    with torch.cuda.stream(on_tack):
        assert torch.equal(t, expected)
    del t


def test_stream_values_tack_refuses_on_the_gpu():
    y = tack.zeros(16, device="cuda")
    with pytest.raises(ValueError, match="ambiguous"):
        y.__dlpack__(stream=0)
    with pytest.raises(ValueError, match="not a stream value"):
        y.__dlpack__(stream=-7)
    # -1: the consumer orders its own work; accepted.
    y.__dlpack__(stream=-1, max_version=(1, 0))


@pytest.mark.skipif(torch is None or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_stream_of_another_gpu_is_refused():
    y = tack.zeros(16, device="cuda:0")
    other = torch.cuda.Stream(device=1)
    with pytest.raises(ValueError, match="device 1"):
        y.__dlpack__(stream=other.cuda_stream)
