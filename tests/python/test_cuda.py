"""The CUDA backend from Python, against the simulated CUDA driver.

tests/sim/cuda_sim.c is compiled once per session (or taken from
TACK_TEST_CUDA_SIM) and selected with TACK_CUDA_LIBRARY. A process loads the
CUDA driver once and keeps its CUDA devices, and the other test files
assume no driver is loaded, so every case runs in a Python subprocess of its
own with the simulator selected before `import tack`.

The simulator defers queued work until a sync, fills fresh device memory
with 0xA5 and keeps device memory where the host cannot touch it, so a
missing wait, zero-fill or copy shows up as a wrong answer or a crash.
Numerical results of kernels need a GPU: tests/gpu/run.sh.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudasim import run

# --------------------------------------------------------------------------
# no driver, no device


def test_no_driver_is_a_runtime_error_and_everything_else_works():
    environ = dict(os.environ)
    environ["TACK_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1"
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    code = textwrap.dedent("""
        import numpy as np, tack
        for name in ("cuda", "cuda:0", "cuda:1"):
            try:
                tack.device(name)
            except RuntimeError as e:
                assert "CUDA is not available" in str(e), e
                assert "/nonexistent/libcuda.so.1" in str(e), e
            else:
                raise AssertionError("no error")
        a = tack.array(np.arange(6, dtype=np.float32))
        assert a.device.backend == "cpu"
        assert (tack.from_dlpack(a).to_numpy() == np.arange(6)).all()
        try:
            tack.zeros(3, device="cuda")
        except RuntimeError:
            pass
        else:
            raise AssertionError("no error")
    """)
    r = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_no_device_is_a_runtime_error(cuda_sim):
    environ = dict(os.environ, TACK_CUDA_LIBRARY=cuda_sim, TACK_SIM_CUDA_DEVICES="0",
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = textwrap.dedent("""
        import tack
        try:
            tack.device("cuda")
        except RuntimeError as e:
            assert "no CUDA device" in str(e), e
        else:
            raise AssertionError("no error")
        assert tack.zeros(2).device.backend == "cpu"
    """)
    r = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------
# devices and contexts


def test_device_identity_and_ordinals(cuda_sim):
    run(cuda_sim, """
        d = tack.device("cuda")
        assert d is tack.device("cuda:0")
        assert (d.backend, d.name, d.index) == ("cuda", "cuda:0", 0)
        assert d.dlpack_device() == (2, 0)
        assert d.shares_external_context is False
        assert isinstance(d.context_handle, int) and d.context_handle
        d1 = tack.device("cuda:1")
        assert d1.dlpack_device() == (2, 1)
        assert d1.memory_domain != d.memory_domain
        try:
            tack.device("cuda:2")
        except RuntimeError as e:
            assert "no CUDA device 2" in str(e), e
        else:
            raise AssertionError("no error")
        try:
            tack.device("cuda", context=1)
        except ValueError:
            pass
        else:
            raise AssertionError("an unknown option was accepted")
        # Tack made its context current only inside its own calls.
        assert current_context() is None
        assert stat("primary_retains") == 2
    """, TACK_SIM_CUDA_DEVICES=2)


def test_adopts_the_current_context_and_fails_cleanly_once_it_is_destroyed(cuda_sim):
    run(cuda_sim, """
        ctx = ctypes.c_void_p()
        assert SIM.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0
        d = tack.device("cuda")
        assert d.context_handle == ctx.value
        assert d.shares_external_context is True
        a = tack.array(np.arange(8, dtype=np.float32), device=d)
        assert (a.to_numpy() == np.arange(8)).all()
        assert SIM.cuCtxDestroy_v2(ctx) == 0
        for action in (a.to_numpy, lambda: a.fill(1), lambda: tack.zeros(4, device=d), d.synchronize,
                       a.export_memory):
            try:
                action()
            except RuntimeError as e:
                assert "destroyed" in str(e), e
            else:
                raise AssertionError("no error")
        # The allocation went with its context: Tack frees nothing.
        del a
        gc.collect()
        assert stat("invalid_frees") == 0
        assert stat("async_frees") == 0
        assert stat("contexts_destroyed") == 1
    """)


def test_works_from_any_thread(cuda_sim):
    run(cuda_sim, """
        a = tack.array(np.arange(100, dtype=np.float64), device="cuda")
        out = {}
        def work():
            out["ctx_before"] = current_context()
            out["values"] = a.to_numpy()
            b = tack.zeros(10, device="cuda")
            out["zeros"] = b.to_numpy()
            out["ctx_after"] = current_context()
        t = threading.Thread(target=work)
        t.start(); t.join()
        assert out["ctx_before"] is None and out["ctx_after"] is None
        assert (out["values"] == np.arange(100)).all()
        assert (out["zeros"] == 0).all()
    """)


# --------------------------------------------------------------------------
# memory


def test_arrays_are_zeroed_and_round_trip_every_dtype(cuda_sim):
    run(cuda_sim, """
        for dt in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"):
            for make in (tack.zeros, tack.empty):
                a = make((3, 5), dt, device="cuda")
                assert a.device.name == "cuda:0"
                # The simulator fills fresh device memory with 0xA5.
                assert device_bytes(a.ptr, a.nbytes) == bytes(a.nbytes)
                assert (a.to_numpy() == 0).all()
            values = (np.arange(15) % 100 + 1).astype(dt).reshape(3, 5)
            a = tack.array(values, device="cuda")
            assert a.to_numpy().dtype == values.dtype
            assert (a.to_numpy() == values).all()
            assert (a.reshape(15).to_numpy() == values.ravel()).all()
            assert (a.to_device("cpu").to_numpy() == values).all()
            a.fill(7)
            assert (a.to_numpy() == 7).all()
    """)


def test_device_memory_is_not_exported_as_host_memory(cuda_sim):
    run(cuda_sim, """
        a = tack.zeros(1000, "float32", device="cuda")
        try:
            np.from_dlpack(a)
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass
        else:
            raise AssertionError("NumPy read CUDA memory as host memory")
    """)


def test_frees_are_stream_ordered(cuda_sim):
    run(cuda_sim, """
        a = tack.zeros(1 << 16, device="cuda")
        live = stat("live_allocs")
        del a
        gc.collect()
        assert stat("async_frees") == 1
        assert stat("live_allocs") == live
        tack.device("cuda").synchronize()
        assert stat("live_allocs") == live - 1
        assert stat("invalid_frees") == 0 and stat("faults") == 0
    """)


def test_out_of_memory_is_a_memory_error(cuda_sim):
    run(cuda_sim, """
        try:
            tack.empty(1 << 20, "float64", device="cuda")
        except MemoryError as e:
            assert "cuda:0" in str(e), e
        else:
            raise AssertionError("no error")
        assert tack.zeros(4, device="cuda").to_numpy().sum() == 0
    """, TACK_SIM_CUDA_MEMORY=1 << 20)


# --------------------------------------------------------------------------
# raw pointers


def test_array_from_ptr_checks_the_memory_space(cuda_sim):
    run(cuda_sim, """
        d = tack.device("cuda")
        ctx = ctypes.c_void_p(d.context_handle)
        dev = ctypes.c_uint64()
        assert in_context(ctx, SIM.cuMemAlloc_v2, ctypes.byref(dev), 64) == 0
        managed = ctypes.c_uint64()
        assert in_context(ctx, SIM.cuMemAllocManaged, ctypes.byref(managed), 64, 1) == 0
        pinned = ctypes.c_void_p()
        assert in_context(ctx, SIM.cuMemAllocHost_v2, ctypes.byref(pinned), 64) == 0

        a = tack.array_from_ptr(dev.value, "float32", 16, device=d)
        assert a.ptr == dev.value and a.device is d and a.writable is False
        try:
            a.fill(1)
        except RuntimeError:
            pass
        else:
            raise AssertionError("a read-only wrap was written")
        w = tack.array_from_ptr(dev.value, "float32", (4, 4), writable=True, device="cuda")
        w.from_numpy(np.arange(16, dtype=np.float32).reshape(4, 4))
        out = (ctypes.c_float * 16)()
        assert in_context(ctx, SIM.cuMemcpyDtoH_v2, out, dev.value, 64) == 0
        assert list(out) == list(range(16))
        tack.array_from_ptr(managed.value, "float32", 16, device="cuda")
        tack.array_from_ptr(pinned.value, "float32", 16, device="cuda")

        host = np.zeros(16, np.float32)
        try:
            tack.array_from_ptr(host.ctypes.data, "float32", 16, device="cuda")
        except ValueError as e:
            assert "host memory" in str(e), e
        else:
            raise AssertionError("host memory accepted as CUDA memory")
        for bad in (-1, 1 << 64, 1.5, "0x10"):
            try:
                tack.array_from_ptr(bad, "float32", 16, device="cuda")
            except TypeError:
                pass
            else:
                raise AssertionError(f"{bad!r} accepted as an address")
        del a, w
        gc.collect()
        d.synchronize()
        # Wrapped memory is the caller's.
        assert stat("frees") == 0 and stat("async_frees") == 0 and stat("invalid_frees") == 0
        assert in_context(ctx, SIM.cuMemFree_v2, dev.value) == 0
    """)


def test_memory_space_is_what_the_driver_reports(cuda_sim):
    run(cuda_sim, """
        d = tack.device("cuda")
        ctx = ctypes.c_void_p(d.context_handle)
        dev = ctypes.c_uint64()
        assert in_context(ctx, SIM.cuMemAlloc_v2, ctypes.byref(dev), 64) == 0
        managed = ctypes.c_uint64()
        assert in_context(ctx, SIM.cuMemAllocManaged, ctypes.byref(managed), 64, 1) == 0
        pinned = ctypes.c_void_p()
        assert in_context(ctx, SIM.cuMemAllocHost_v2, ctypes.byref(pinned), 64) == 0
        host = np.zeros(16, np.float32)
        for ptr, space in ((dev.value, "cuda"), (dev.value + 32, "cuda"), (managed.value, "cuda_managed"),
                           (pinned.value, "cuda_pinned"), (host.ctypes.data, "cpu")):
            queries = stat("pointer_queries")
            assert tack.memory_space(ptr) == space, (hex(ptr), space)
            assert stat("pointer_queries") > queries  # the driver answered
            assert tack.memory_space(np.uint64(ptr)) == space
        assert tack.memory_space(tack.zeros(4, device=d).ptr) == "cuda"
        for bad in (-1, 1 << 64, 1.5, "0x10", True):
            try:
                tack.memory_space(bad)
            except TypeError:
                pass
            else:
                raise AssertionError(f"{bad!r} accepted as an address")
        assert in_context(ctx, SIM.cuMemFree_v2, dev.value) == 0
    """)


# --------------------------------------------------------------------------
# DLPack


def test_dlpack_export_and_import(cuda_sim):
    run(cuda_sim, """
        for name, ordinal in (("cuda", 0), ("cuda:1", 1)):
            a = tack.array(np.arange(12, dtype=np.float32).reshape(3, 4), device=name)
            assert a.__dlpack_device__() == (2, ordinal)
            for kwargs in ({}, {"max_version": (1, 0)}):
                cap = a.__dlpack__(**kwargs)
                # CUDA memory with the CPU as default device is a CUDA array.
                b = tack.from_dlpack(cap)
                assert b.ptr == a.ptr and b.device is a.device
                assert (b.to_numpy() == a.to_numpy()).all()
                del b, cap
            # from_dlpack on an object with __dlpack__, and a device that
            # cannot wrap it naming the one that can.
            assert tack.from_dlpack(a).ptr == a.ptr
            try:
                tack.from_dlpack(a, device="cpu")
            except RuntimeError as e:
                assert f"cuda:{ordinal}" in str(e), e
            else:
                raise AssertionError("no error")
            # A copy goes through the host.
            try:
                a.__dlpack__(copy=True)
            except BufferError:
                pass
            else:
                raise AssertionError("copy=True exported")
        gc.collect()
    """, TACK_SIM_CUDA_DEVICES=2)


# --------------------------------------------------------------------------
# export_memory


def test_exportable_array_exports_its_own_memory(cuda_sim):
    run(cuda_sim, """
        a = tack.empty((1000,), "float32", device="cuda", exportable=True)
        a.from_numpy(np.arange(1000, dtype=np.float32))
        e = a.export_memory()
        assert isinstance(e, tack.ExportedMemory)
        assert (e.backend, e.size, e.handle_type) == ("cuda", 4000, "posix_fd")
        assert e.allocation_size == 2 << 20 and e.allocation_size % (2 << 20) == 0
        assert e.device_uuid == b"TACK-SIM-GPU" + bytes(4) and len(e.device_uuid) == 16
        assert stat("vmm_creates") == 1 and stat("async_allocs") == 0
        # Zero-copy: the descriptor maps the array's memory, and later writes
        # show through it.
        m = mmap.mmap(e.handle, e.allocation_size, prot=mmap.PROT_READ)
        assert (np.frombuffer(m, np.float32, 1000) == np.arange(1000)).all()
        assert not any(m[4000:])
        a.fill(3)
        assert (np.frombuffer(m, np.float32, 1000) == 3).all()
        m.close()
        # Created once and cached.
        assert a.export_memory().handle == e.handle
        assert a.reshape(10, 100).export_memory().handle == e.handle
        assert stat("exports") == 1
        # A consumer that takes ownership imports a duplicate.
        mine = os.dup(e.handle)
        # The array's buffer closes the descriptor it exported, once the
        # array and the record (which keeps the buffer) have gone.
        handle, size = e.handle, e.allocation_size
        del a
        gc.collect()
        os.fstat(handle)  # the record still holds it
        del e
        try:
            os.fstat(handle)
        except OSError:
            pass
        else:
            raise AssertionError("the exported descriptor was left open")
        m = mmap.mmap(mine, size, prot=mmap.PROT_READ)
        assert (np.frombuffer(m, np.float32, 1000) == 3).all()
        m.close()
        os.close(mine)
    """)


def test_plain_array_exports_a_copy(cuda_sim):
    run(cuda_sim, """
        a = tack.array(np.arange(300, dtype=np.int32), device="cuda")
        e = a.export_memory()
        assert (e.backend, e.size, e.handle_type) == ("cuda", 1200, "posix_fd")
        assert e.allocation_size >= e.size
        assert stat("copies_dtod") == 1
        m = mmap.mmap(e.handle, e.allocation_size, prot=mmap.PROT_READ)
        assert (np.frombuffer(m, np.int32, 300) == np.arange(300)).all()
        # Later writes to the original are not reflected.
        a.fill(-1)
        assert (np.frombuffer(m, np.int32, 300) == np.arange(300)).all()
        m.close()
        again = a.export_memory()
        assert again.handle == e.handle
        assert stat("copies_dtod") == 1 and stat("exports") == 1
        del a
        gc.collect()
        assert stat("vmm_live") == 1  # the records hold the exported copy
        del e, again
        assert stat("vmm_live") == 0
    """)


def test_cpu_arrays_do_not_export_memory(cuda_sim):
    run(cuda_sim, """
        try:
            tack.zeros(4, device="cpu").export_memory()
        except RuntimeError as e:
            assert "does not support memory export" in str(e), e
        else:
            raise AssertionError("no error")
    """)


def test_exported_descriptor_reaches_another_process(cuda_sim):
    # The consumer gets the descriptor over a Unix socket and reads it both
    # directly and through the driver's import, as a CUDA consumer would.
    run(cuda_sim, r'''
        import socket, subprocess, textwrap
        parent, child = socket.socketpair()
        consumer = textwrap.dedent("""
            import ctypes, mmap, os, socket, sys
            import numpy as np
            s = socket.socket(fileno=int(sys.argv[1]))
            msg, fds, _, _ = socket.recv_fds(s, 64, 1)
            size = int(msg.decode())
            fd = fds[0]
            m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            assert (np.frombuffer(m, np.float32, 500) == np.arange(500) * 4).all()
            m.close()
            cu = ctypes.CDLL(os.environ["TACK_CUDA_LIBRARY"])
            assert cu.cuInit(0) == 0
            ctx = ctypes.c_void_p()
            assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
            assert cu.cuCtxPushCurrent_v2(ctx) == 0
            h = ctypes.c_uint64()
            assert cu.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd), 1) == 0
            os.close(fd)
            p = ctypes.c_uint64()
            assert cu.cuMemAddressReserve(ctypes.byref(p), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                          ctypes.c_uint64(0), ctypes.c_uint64(0)) == 0
            assert cu.cuMemMap(p, ctypes.c_size_t(size), ctypes.c_size_t(0), h, ctypes.c_uint64(0)) == 0
            access = (ctypes.c_int * 3)(1, 0, 3)   # CUmemAccessDesc: device 0, read-write
            assert cu.cuMemSetAccess(p, ctypes.c_size_t(size), access, ctypes.c_size_t(1)) == 0
            out = (ctypes.c_float * 500)()
            assert cu.cuMemcpyDtoH_v2(out, p, ctypes.c_size_t(2000)) == 0
            assert list(out) == [i * 4.0 for i in range(500)]
            print("consumer ok")
        """)
        proc = subprocess.Popen([sys.executable, "-c", consumer, str(child.fileno())], pass_fds=[child.fileno()],
                                stdout=subprocess.PIPE, text=True)
        child.close()
        a = tack.array(np.arange(500, dtype=np.float32) * 4, device="cuda")
        b = tack.empty(500, "float32", device="cuda", exportable=True)
        b.from_numpy(a.to_numpy())
        e = b.export_memory()
        socket.send_fds(parent, [str(e.allocation_size).encode()], [e.handle])
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "consumer ok" in out, out
    ''')


def test_the_gpu_cases_marked_simulated_too_pass_here(cuda_sim, tmp_path):
    # test_cuda_gpu.py's cross-process cases, on this driver before a GPU
    # runs them: their own steps, descriptors and checks. Deselected, not
    # skipped, are the cases that need a real GPU.
    environ = dict(os.environ, TACK_CUDA_LIBRARY=cuda_sim, TACK_CACHE_DIR=str(tmp_path),
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    environ.pop("TACK_GPU_REQUIRED", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "simulated_too",
                        "test_cuda_gpu.py"], cwd=Path(__file__).parent, env=environ, capture_output=True, text=True,
                       timeout=300)
    report = r.stdout[-8000:] + r.stderr[-3000:]
    assert r.returncode == 0, report
    summary = r.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "deselected" in summary, report
    assert "skipped" not in summary, report
    assert int(summary.split(" passed")[0].split()[-1]) >= 3, report


# --------------------------------------------------------------------------
# kernels: queued launches, sharing, the checks before anything runs


def test_kernel_launches_are_queued_and_shared_buffers_wait(cuda_sim, tmp_path):
    out = run(cuda_sim, """
        try:
            k = tack.Kernel("void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }",
                            device="cuda")
        except RuntimeError as e:
            if "NVRTC" in str(e) and ("not found" in str(e) or "could not be loaded" in str(e)):
                print("SKIP", e)
                sys.exit(0)
            raise
        assert stat("modules_loaded") == 1
        x = tack.zeros(1000, device="cuda")
        y = tack.zeros(1000, device="cuda")
        k(2.0, x, y)
        # Queued: it returned before it ran.
        assert stat("launches") == 1 and stat("launches_done") == 0
        # Reading y waits for it.
        y.to_numpy()
        assert stat("launches_done") == 1
        # A read-only array where the kernel stores: nothing runs.
        ro = tack.array_from_ptr(y.ptr, "float32", 1000, device="cuda")
        try:
            k(2.0, x, ro)
        except ValueError as e:
            assert "y" in str(e), e
        else:
            raise AssertionError("no error")
        assert stat("launches") == 1
        # A wrapped (shared) buffer: complete before the call returns.
        w = tack.array_from_ptr(y.ptr, "float32", 1000, writable=True, device="cuda")
        k(2.0, x, w)
        assert stat("launches") == 2 and stat("launches_done") == 2
        # An export shares the buffer; launches on it wait from then on.
        k(1.0, x, y)
        assert stat("launches_done") == 2
        cap = y.__dlpack__()
        assert stat("launches_done") == 3
        k(1.0, x, y)
        assert stat("launches_done") == 4
        # Two memory domains never meet in one launch.
        try:
            k(1.0, tack.zeros(1000, device="cpu"), y)
        except ValueError:
            pass
        else:
            raise AssertionError("no error")
        print("ran")
    """, TACK_CACHE_DIR=tmp_path)
    if out.startswith("SKIP"):
        pytest.skip(out.strip())
    assert "ran" in out
