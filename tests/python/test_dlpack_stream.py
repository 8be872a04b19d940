"""Array.__dlpack__(stream=...): stream-ordered export.

A consumer that names its stream gets it ordered after Tack's queued
launches with an event (cuEventRecord on Tack's stream, cuStreamWaitEvent on
the consumer's) instead of a host wait, and the buffer is marked shared for
the launches after it. Stream values follow the array API standard: None
(the host wait of share()), -1 (no synchronisation), 1 and 2 (CUDA's legacy
and per-thread default streams), other integers (stream handles); 0 is
ambiguous on CUDA and refused.

The CUDA cases run on the simulated driver (see test_cuda.py), whose
counters tell event waits from host syncs (it counts launches but cannot
run PTX, so values are checked on a GPU); the GPU cases are in
test_cuda_gpu.py.
"""

import textwrap

import numpy as np
import pytest

import tack
from cudasim import CONSUMER, run


# --------------------------------------------------------------------------
# argument checks, on the cpu


def test_stream_values_on_the_cpu():
    a = tack.array(np.arange(4, dtype=np.float32))
    # No queue to order: every stream value is served by share(), and -1
    # by nothing at all.
    for stream in (None, -1, 1, 2, 0, 12345):
        for max_version in (None, (1, 0)):
            capsule = a.__dlpack__(stream=stream, max_version=max_version)
            assert type(capsule).__name__ == "PyCapsule"
            del capsule
    assert (np.from_dlpack(a) == np.arange(4)).all()


@pytest.mark.parametrize("stream, error", [
    (-2, ValueError),
    (-(2**62), ValueError),
    (2**64, ValueError),
    (-(2**70), ValueError),
    ("1", TypeError),
    (1.0, TypeError),
    (True, TypeError),
    (object(), TypeError),
])
def test_bad_stream_values_are_refused_before_anything_is_exported(stream, error):
    a = tack.zeros(3)
    before = dict(tack._tack.live_counts())["exports"]
    for max_version in (None, (1, 0)):
        with pytest.raises(error, match="stream"):
            a.__dlpack__(stream=stream, max_version=max_version)
    assert dict(tack._tack.live_counts())["exports"] == before


# --------------------------------------------------------------------------
# CUDA, on the simulated driver

def run_sim(sim, body, tmp_path, **env):
    out = run(sim, CONSUMER + textwrap.dedent(body), TACK_CACHE_DIR=tmp_path, **env)
    if out.startswith("SKIP"):
        pytest.skip(out.strip())
    assert "ran" in out
    return out


def test_a_consumer_stream_waits_for_an_event_not_the_host(cuda_sim, tmp_path):
    run_sim(cuda_sim, """
        ctx = primary()
        cs = new_stream(ctx)
        k = kernel()
        y = tack.zeros(1000, device="cuda")
        k(3.0, y)
        assert stat("launches") == 1 and stat("launches_done") == 0
        waits = host_waits()
        capsule = y.__dlpack__(stream=cs, max_version=(1, 0))
        # Ordered on the GPU: the host waited for nothing, the launch has
        # not run, and the consumer's stream holds the wait.
        assert host_waits() == waits
        assert stat("launches_done") == 0
        assert stat("event_records") == 1 and stat("event_waits") == 1
        assert stat("event_waits_done") == 0
        # The consumer's stream reaches the wait: the launch runs first.
        assert in_context(ctx, SIM.cuStreamSynchronize, cs) == 0
        assert stat("event_waits_done") == 1 and stat("launches_done") == 1
        # The buffer is shared from the export on: a later launch on it
        # completes before it returns.
        k(4.0, y)
        assert stat("launches_done") == 2
        del capsule
        # The legacy export takes the stream too.
        z = tack.zeros(10, device="cuda")
        k(1.0, z)
        waits = host_waits()
        capsule = z.__dlpack__(stream=cs)
        assert host_waits() == waits and stat("launches_done") == 2
        assert in_context(ctx, SIM.cuStreamSynchronize, cs) == 0
        assert stat("launches_done") == 3
        del capsule
        # stream=None keeps the host wait of share().
        w = tack.zeros(10, device="cuda")
        k(2.0, w)
        waits = host_waits()
        capsule = w.__dlpack__()
        assert host_waits() == waits + 1 and stat("launches_done") == 4
        del capsule
        assert in_context(ctx, SIM.cuStreamDestroy_v2, cs) == 0
        print("ran")
    """, tmp_path)


def test_minus_one_and_the_default_streams(cuda_sim, tmp_path):
    run_sim(cuda_sim, """
        k = kernel()
        y = tack.zeros(100, device="cuda")
        k(1.0, y)
        waits = host_waits()
        capsule = y.__dlpack__(stream=-1, max_version=(1, 0))
        # -1: the consumer synchronises; Tack enqueues and waits for nothing.
        assert host_waits() == waits and stat("events_created") == 0
        assert stat("launches_done") == 0
        del capsule
        # Marked shared all the same: the next launch completes at once
        # (and, on the one stream, the one before it).
        k(2.0, y)
        assert stat("launches_done") == 2
        # 1 and 2, the default streams: event waits, not host syncs. The
        # simulator runs default-stream work at once, so the launch runs
        # when the wait is issued.
        for value in (1, 2):
            x = tack.zeros(100, device="cuda")
            k(float(value), x)
            done, waits = stat("launches_done"), host_waits()
            capsule = x.__dlpack__(stream=value, max_version=(1, 0))
            assert host_waits() == waits
            assert stat("event_waits_done") == value and stat("launches_done") == done + 1
            del capsule
        print("ran")
    """, tmp_path)


def test_invalid_and_foreign_streams_are_refused(cuda_sim, tmp_path):
    run_sim(cuda_sim, """
        k = kernel()
        y = tack.zeros(100, device="cuda")
        k(1.0, y)
        other = primary(1)
        foreign = new_stream(other)
        refused(y, [(0, "ambiguous"), (-3, "not a stream value"), (foreign, "device 1")])
        # A stream of cuda:1 is fine for an array on cuda:1.
        z = tack.zeros(10, device="cuda:1")
        capsule = z.__dlpack__(stream=foreign, max_version=(1, 0))
        del capsule
        assert in_context(other, SIM.cuStreamDestroy_v2, foreign) == 0
        print("ran")
    """, tmp_path, TACK_SIM_CUDA_DEVICES=2)


# Simulator behaviour, not a promise: a handle that is no live stream (never
# made, or destroyed) is the caller's error, as in CUDA, where the driver
# may crash on it rather than return an error. The simulated driver knows
# its streams and refuses such a handle, and Tack turns that into a
# ValueError; this checks that the refusal changes nothing. Never run on a
# real GPU (tests/gpu/run.sh deselects simulator_only).
@pytest.mark.simulator_only
def test_unknown_and_destroyed_streams_on_the_simulated_driver(cuda_sim, tmp_path):
    run_sim(cuda_sim, """
        k = kernel()
        y = tack.zeros(100, device="cuda")
        k(1.0, y)
        gone = new_stream(primary(0))
        assert in_context(primary(0), SIM.cuStreamDestroy_v2, gone) == 0
        refused(y, [(0x1234, "not a CUDA stream"), (gone, "not a CUDA stream")])
        print("ran")
    """, tmp_path)


def test_tack_imports_its_own_cuda_array_through_the_stream(cuda_sim, tmp_path):
    # tack.from_dlpack(a) asks a GPU producer for its tensor on Tack's
    # stream; when the producer is Tack, that is already in order.
    run_sim(cuda_sim, """
        k = kernel()
        y = tack.zeros(100, device="cuda")
        k(5.0, y)
        waits = host_waits()
        b = tack.from_dlpack(y)
        assert b.ptr == y.ptr and b.device is y.device
        assert stat("event_waits") == 0 and host_waits() == waits
        del b
        print("ran")
    """, tmp_path)
