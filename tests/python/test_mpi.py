"""Tack arrays through MPI: examples/mpi_allreduce.py under mpirun.

The example fills Tack arrays on every rank, passes them to mpi4py as they
are (Send/Recv around a ring, Bcast, Allreduce) and checks every value
against NumPy; it exits 1 on any rank when a value is wrong. These tests
launch it with the system's mpirun and check the summary rank 0 prints.
They skip when mpirun or mpi4py is missing (Debian: openmpi-bin,
libopenmpi-dev; PyPI: mpi4py).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tack

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mpi_allreduce.py"
TIMEOUT = 25  # seconds per launch; a run takes about 2 s here

PROBE = """
import mpi4py
mpi4py.rc.initialize = False  # load the MPI library, start nothing
from mpi4py import MPI
print(mpi4py.__version__, MPI.Get_library_version().splitlines()[0], sep="|")
"""


@pytest.fixture(scope="module")
def launcher():
    """The mpirun command line for this machine's MPI."""
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        pytest.skip("no mpirun or mpiexec on PATH (Debian: apt-get install openmpi-bin libopenmpi-dev)")
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=TIMEOUT)
    if probe.returncode != 0:
        pytest.skip(f"mpi4py does not load in {sys.executable} (pip install mpi4py): "
                    f"{(probe.stderr.strip().splitlines() or ['no message'])[-1]}")
    version = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=TIMEOUT)
    command = [mpirun]
    if "Open MPI" in version.stdout + version.stderr:
        # Open MPI refuses root without this, and more ranks than cores
        # without --oversubscribe (CI machines and containers often have 2).
        if os.geteuid() == 0:
            command.append("--allow-run-as-root")
        command.append("--oversubscribe")
    return command


def launch(launcher, ranks, *options, script=EXAMPLE):
    """Runs the example on `ranks` ranks; returns (exit status, output)."""
    command = launcher + ["-n", str(ranks), sys.executable, str(script), *options]
    # A session of its own, so a hung run is ended with every rank it started.
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    try:
        output, _ = child.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        pytest.fail(f"{' '.join(command)} ran past {TIMEOUT} s:\n{output[-4000:]}")
    return child.returncode, output


def host_path():
    """How mpi4py should take a host Tack array: through the buffer
    protocol when Tack arrays export one, else through __dlpack__."""
    try:
        memoryview(tack.zeros((1,), dtype=tack.f32))
    except TypeError:
        return "DLPack"
    return "buffer protocol"


@pytest.mark.parametrize("ranks, via, options", [
    (2, "auto", []),
    (2, "dlpack", ["--n", "65536", "--repeat", "3"]),
    (2, "numpy", ["--n", "65536", "--repeat", "3"]),
    (3, "auto", ["--n", "65536", "--repeat", "3"]),
])
def test_exchange_and_reduce_tack_arrays(launcher, ranks, via, options):
    status, output = launch(launcher, ranks, "--via", via, *options)
    assert status == 0, f"exit status {status}:\n{output[-6000:]}"
    lines = [line.strip() for line in output.splitlines()]
    assert lines[-1] == "OK", output[-6000:]
    assert not any(line.startswith("FAILED") for line in lines), output[-6000:]
    assert any(line.startswith(f"Tack arrays through MPI: {ranks} ranks") for line in lines), output

    expected_path = {"auto": host_path(), "dlpack": "DLPack", "numpy": "NumPy view (np.from_dlpack)"}[via]
    assert f"host arrays reach MPI through: {expected_path}" in lines, output
    in_place = "Send/Recv ring: received into the Tack array's own memory"
    received = [line for line in lines if line.startswith(in_place)]
    assert received and received[0].endswith("checked"), output
    assert any("Allreduce SUM float32" in line and "checked against NumPy" in line for line in lines), output

    timing = [re.search(r"Tack ([\d.]+) ms, NumPy ([\d.]+) ms \(Tack/NumPy ([\d.]+)\)", line) for line in lines]
    timing = [match for match in timing if match]
    assert len(timing) == 1, output
    tack_ms, numpy_ms, ratio = map(float, timing[0].groups())
    assert tack_ms > 0 and numpy_ms > 0 and ratio > 0, output
    assert any(line.startswith("CUDA arrays: ") for line in lines), output


def test_a_wrong_value_fails_the_run(launcher, tmp_path):
    """The example's checks bite: a copy that expects wrong values after
    the Recv and the Allreduce reports both checks failed on every rank and
    exits non-zero."""
    source = EXAMPLE.read_text()
    for original, wrong in [("(np.arange(n) + before)", "(np.arange(n) + before + 1)"),
                            ("* size + size * (size - 1) // 2)", "* size + size * (size - 1) // 2 + 1)")]:
        assert source.count(original) == 1, f"the example no longer computes {original!r}"
        source = source.replace(original, wrong)
    broken = tmp_path / EXAMPLE.name
    broken.write_text(source)
    status, output = launch(launcher, 2, "--n", "4096", "--repeat", "1", script=broken)
    assert status != 0, output
    for rank in (0, 1):
        for check in ("Recv into the Tack array", "Allreduce SUM"):
            assert f"FAILED rank {rank}: {check}:" in output, output
    assert "FAILED" in [line.strip() for line in output.splitlines()], output


def test_mpi_refuses_to_receive_into_a_read_only_tack_array(launcher):
    """mpi4py takes a writable Tack array as a receive buffer and refuses a
    read-only one, whichever way it reads it (buffer protocol or DLPack),
    and leaves no DLPack export alive behind it."""
    script = PROBE + """
import numpy as np
import tack

class DLPackOnly:
    def __init__(self, array):
        self.array = array
    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)
    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

owner = tack.zeros((4,), dtype=tack.f32)
read_only = tack.array_from_ptr(owner.ptr, tack.f32, (4,))
assert not read_only.writable
for wrap in (lambda a: a, DLPackOnly):
    view = MPI.buffer.frombuffer(wrap(owner), readonly=False)
    assert view.address == owner.ptr and view.nbytes == 16 and not view.readonly
    view.release()
    assert MPI.buffer(wrap(read_only)).readonly
    try:
        MPI.buffer.frombuffer(wrap(read_only), readonly=False)
    except BufferError:
        pass
    else:
        raise AssertionError(f"mpi4py took a read-only Tack array as writable ({wrap})")
# mpi4py keeps the DLPack capsule while it holds the buffer and drops it
# on release: every export ends, however it ended.
before = dict(tack._tack.live_counts())
for _ in range(1000):
    MPI.buffer(DLPackOnly(owner)).release()
    try:
        MPI.buffer.frombuffer(DLPackOnly(read_only), readonly=False)
    except BufferError:
        pass
after = dict(tack._tack.live_counts())
assert after == before, (before, after)
print("refused")
"""
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT)
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.strip().endswith("refused"), child.stdout


def test_mpi4py_takes_a_cuda_tack_array_through_dlpack(launcher, tmp_path):
    """On the simulated CUDA driver: mpi4py takes a CUDA Tack array as it is,
    through __dlpack__, at the array's device address, writable. (No MPI
    call touches it: that needs a GPU and a CUDA-aware MPI, and the example
    runs it there.)"""
    import simdriver

    library, why_not = simdriver.build("cuda", tmp_path)
    if library is None:
        pytest.skip(why_not)
    script = PROBE + """
import tack
cuda = tack.device("cuda")
x = tack.zeros((1000,), dtype=tack.f32, device=cuda)
try:
    memoryview(x)
except BufferError:
    pass
else:
    raise AssertionError("a CUDA array exported a host buffer")
view = MPI.buffer.frombuffer(x, readonly=False)
assert type(view.obj).__name__ == "PyCapsule", f"not through DLPack: {view.obj!r}"
assert view.address == x.ptr, (hex(view.address), hex(x.ptr))
assert view.nbytes == 4000 and not view.readonly
view.release()
print("taken")
"""
    env = dict(os.environ, TACK_CUDA_LIBRARY=library)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.strip().endswith("taken"), child.stdout
