"""Running Python on the simulated CUDA driver (tests/sim/cuda_sim.c), for
the test files that need it; the `cuda_sim` fixture (conftest.py) builds
the driver. A process loads the CUDA driver once and keeps its CUDA devices,
and the other test files assume no driver is loaded, so every case runs in a
Python subprocess of its own with the simulator selected before
`import tack`. Not a test file: pytest collects nothing here.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIM_SOURCE = ROOT / "tests" / "sim" / "cuda_sim.c"

# What every case starts with: the simulator as "another library" in the
# process (ctypes), and its counters.
PRELUDE = r"""
import ctypes, gc, mmap, os, sys, threading
import numpy as np
import tack

SIM = ctypes.CDLL(os.environ["TACK_CUDA_LIBRARY"])
SIM.tack_sim_cuda_stats.restype = ctypes.c_longlong
SIM.tack_sim_cuda_stats.argtypes = [ctypes.c_char_p]
SIM.tack_sim_cuda_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
SIM.tack_sim_cuda_host_address.restype = ctypes.c_void_p
SIM.tack_sim_cuda_host_address.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
for name in ("cuCtxCreate_v2", "cuCtxDestroy_v2", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
             "cuDevicePrimaryCtxRetain", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocHost_v2",
             "cuMemAllocManaged", "cuMemcpyDtoH_v2", "cuCtxGetCurrent"):
    getattr(SIM, name).restype = ctypes.c_int
SIM.cuCtxDestroy_v2.argtypes = [ctypes.c_void_p]
SIM.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
SIM.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
SIM.cuMemFree_v2.argtypes = [ctypes.c_uint64]
SIM.cuMemAllocManaged.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_uint]
SIM.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
assert SIM.cuInit(0) == 0


def stat(name):
    value = SIM.tack_sim_cuda_stats(name.encode())
    assert value >= 0, name
    return value


def in_context(ctx, fn, *args):
    # Calls a driver function with `ctx` current, as another library would.
    assert SIM.cuCtxPushCurrent_v2(ctx) == 0
    try:
        return fn(*args)
    finally:
        SIM.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


def current_context():
    c = ctypes.c_void_p()
    SIM.cuCtxGetCurrent(ctypes.byref(c))
    return c.value


def device_bytes(ptr, n):
    # What the simulated GPU holds, without any sync.
    addr = SIM.tack_sim_cuda_host_address(ptr, n)
    assert addr
    return ctypes.string_at(addr, n)
"""


def run(sim, body, **env):
    """Runs `body` after PRELUDE in a fresh interpreter with the simulator
    selected; returns its stdout. Fails with its output when it fails."""
    environ = dict(os.environ)
    environ["TACK_CUDA_LIBRARY"] = sim
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    environ.update({k: str(v) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=environ,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    return r.stdout


# What a consumer of Tack's CUDA arrays (PyTorch, CuPy) does with streams,
# in the simulated driver's terms: run after PRELUDE.
CONSUMER = """
SIM.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
SIM.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
SIM.cuStreamDestroy_v2.argtypes = [ctypes.c_void_p]
SIM.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]

def primary(device=0):
    ctx = ctypes.c_void_p()
    assert SIM.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) == 0
    return ctx

def new_stream(ctx):
    # A stream of the consumer's own, as PyTorch or CuPy makes one.
    s = ctypes.c_void_p()
    assert in_context(ctx, SIM.cuStreamCreate, ctypes.byref(s), 1) == 0
    return s.value

def host_waits():
    return stat("stream_syncs") + stat("ctx_syncs") + stat("event_syncs")

def kernel():
    try:
        return tack.Kernel("void fill(tack_index i, float v, float *y) { y[i] = v; }", device="cuda")
    except RuntimeError as e:
        if "NVRTC" in str(e) and ("not found" in str(e) or "could not be loaded" in str(e)):
            print("SKIP", e)
            sys.exit(0)
        raise

def refused(y, cases):
    # Each stream value is refused with a ValueError that says `says`, and
    # leaves nothing exported, ordered or waited for.
    for value, says in cases:
        for max_version in (None, (1, 0)):
            try:
                y.__dlpack__(stream=value, max_version=max_version)
            except ValueError as e:
                assert says in str(e), (value, e)
            else:
                raise AssertionError(f"stream={value} was accepted")
    assert dict(tack._tack.live_counts())["exports"] == 0
    assert stat("event_waits") == 0 and stat("launches_done") == 0
"""
