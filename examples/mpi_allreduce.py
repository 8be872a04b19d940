"""Tack arrays through MPI with mpi4py, without a copy.

Each rank fills Tack arrays with a Tack kernel and hands them straight to
mpi4py's buffer-based calls -- Send/Recv around a ring, Bcast, Allreduce --
then checks every result against NumPy. mpi4py takes a host Tack array
through the buffer protocol (a build without it: through ``__dlpack__``,
which mpi4py 4 also reads), so MPI reads and writes the array's own memory:
no staging copy, no NumPy in between. CUDA arrays go to MPI the same way
(DLPack) when the MPI library is CUDA-aware; otherwise that part is skipped
and says why.

Needs mpi4py 4 and an MPI library; on Debian:

    apt-get install openmpi-bin libopenmpi-dev
    pip install mpi4py

Run with two or more ranks:

    mpirun -n 2 python examples/mpi_allreduce.py

Open MPI refuses to start as root without --allow-run-as-root, and more
ranks than cores without --oversubscribe:

    mpirun --allow-run-as-root --oversubscribe -n 2 python examples/mpi_allreduce.py

Options: --n N (elements per array, default 1M), --repeat R (timed
Allreduces), --via auto|dlpack|numpy (auto: the array itself; dlpack: only
its ``__dlpack__``; numpy: a NumPy view from np.from_dlpack). Rank 0 prints
a summary ending in "OK"; a failed check makes every rank exit 1.
"""

import argparse
import ctypes
import os
import sys
import time

import mpi4py
import numpy as np
from mpi4py import MPI

import tack

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def _abort(kind, value, traceback):
    # An exception on one rank would leave the others waiting in a
    # collective until the launcher's timeout; end them all now.
    sys.__excepthook__(kind, value, traceback)
    sys.stderr.flush()
    comm.Abort(1)


sys.excepthook = _abort

FILL = "void fill(tack_index i, int32_t rank, float *x) { x[i] = rank + i; }"


class DLPackOnly:
    """Shows mpi4py nothing but the array's DLPack methods, as an array
    without the buffer protocol (or a CUDA array) does."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def for_mpi(array, via):
    """What to pass to mpi4py for `array`, and how mpi4py reads it."""
    candidate = DLPackOnly(array) if via == "dlpack" else array
    if via != "numpy":
        try:
            view = MPI.buffer(candidate)  # the same acquisition Send/Recv/Allreduce make
        except (TypeError, BufferError, ValueError, NotImplementedError):
            if via == "dlpack":
                raise
        else:
            owner, address = view.obj, view.address
            view.release()
            if address != array.ptr:
                raise RuntimeError(f"mpi4py sees address {address:#x}, the Tack array is at {array.ptr:#x}")
            if type(owner).__name__ == "PyCapsule":
                return candidate, "DLPack"
            if array.device.backend == "cpu":
                return candidate, "buffer protocol"
            return candidate, "CUDA Array Interface"
    if array.device.backend != "cpu":
        raise RuntimeError("mpi4py does not take this CUDA array, and a NumPy view needs host memory")
    return np.from_dlpack(array), "NumPy view (np.from_dlpack)"


def mpi_is_cuda_aware():
    """(answer, why): whether the MPI library reads and writes CUDA memory."""
    forced = os.environ.get("TACK_MPI_CUDA_AWARE")
    if forced in ("0", "1"):
        return forced == "1", f"TACK_MPI_CUDA_AWARE={forced}"
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libmpi.so" in line}
    except OSError:
        paths = set()
    for path in sorted(paths):
        query = getattr(ctypes.CDLL(path), "MPIX_Query_cuda_support", None)
        if query is not None:
            query.restype = ctypes.c_int
            aware = bool(query())
            return aware, f"MPIX_Query_cuda_support() = {int(aware)}"
    return False, "this MPI has no MPIX_Query_cuda_support; set TACK_MPI_CUDA_AWARE=1 if it is CUDA-aware"


class Checks:
    """Comparisons against NumPy that record a failure instead of raising,
    so every rank reaches the end and they all exit with one verdict."""

    def __init__(self):
        self.failures = []

    def equal(self, what, got, expected):
        got, expected = np.asarray(got), np.asarray(expected)
        if got.shape != expected.shape or got.dtype != expected.dtype:
            self.failures.append(f"rank {rank}: {what}: got {got.dtype}{got.shape}, "
                                 f"expected {expected.dtype}{expected.shape}")
            return False
        wrong = np.flatnonzero(got != expected)
        if wrong.size:
            i = wrong[0]
            self.failures.append(f"rank {rank}: {what}: {wrong.size} wrong values, "
                                 f"first at [{i}]: {got[i]} != {expected[i]}")
            return False
        return True


def exchange_and_reduce(device, n, via, checks):
    """The ring, Bcast and Allreduce on arrays of `device`. Returns the
    mpi4py path and the arrays the timing reuses."""
    if hasattr(tack, "Kernel"):
        kernel = tack.Kernel(FILL, device=device)

        def fill(value, array):
            kernel(value, array)
    else:
        def fill(value, array):
            array.from_numpy(np.arange(value, value + array.size).astype(np.float32))

    x = tack.empty((n,), dtype=tack.f32, device=device)
    fill(rank, x)
    # MPI reads GPU memory outside Tack's queue: let the fill finish first.
    device.synchronize()
    x_mpi, path = for_mpi(x, via)
    checks.equal("the fill", x.to_numpy(), (np.arange(n) + rank).astype(np.float32))

    # Send/Recv around the ring: rank r sends to r+1 and receives from r-1.
    # Rank 0 sends first and every other rank receives first, so the ring
    # completes with blocking calls at any size.
    y = tack.empty((n,), dtype=tack.f32, device=device)
    y.fill(-1.0)
    device.synchronize()
    y_mpi, _ = for_mpi(y, via)
    landing = MPI.buffer(y_mpi)
    landed_in_place = landing.address == y.ptr
    landing.release()
    after, before = (rank + 1) % size, (rank - 1) % size
    if rank == 0:
        comm.Send([x_mpi, MPI.FLOAT], dest=after, tag=1)
        comm.Recv([y_mpi, MPI.FLOAT], source=before, tag=1)
    else:
        comm.Recv([y_mpi, MPI.FLOAT], source=before, tag=1)
        comm.Send([x_mpi, MPI.FLOAT], dest=after, tag=1)
    # Read back through Tack: the values MPI received are in the Tack
    # array's own buffer, which held -1 before the Recv.
    received = checks.equal("Recv into the Tack array", y.to_numpy(),
                            (np.arange(n) + before).astype(np.float32))
    if not landed_in_place:
        checks.failures.append(f"rank {rank}: MPI received at another address than the Tack array's")

    # Bcast an int32 array from rank 0 (the datatype comes from the array).
    p = tack.zeros((8,), dtype=tack.i32, device=device)
    params = np.arange(8, dtype=np.int32) * 7 + 3
    if rank == 0:
        p.from_numpy(params)
    device.synchronize()
    comm.Bcast(for_mpi(p, via)[0], root=0)
    checks.equal("Bcast", p.to_numpy(), params)

    # Allreduce SUM into a Tack array, and MAX in place.
    s = tack.empty((n,), dtype=tack.f32, device=device)
    s_mpi, _ = for_mpi(s, via)
    comm.Allreduce(x_mpi, s_mpi, op=MPI.SUM)
    expected = (np.arange(n, dtype=np.float64) * size + size * (size - 1) // 2).astype(np.float32)
    checks.equal("Allreduce SUM", s.to_numpy(), expected)

    m = tack.zeros((4,), dtype=tack.i32, device=device)
    m.from_numpy(np.array([rank, -rank, 10 * rank, 5], dtype=np.int32))
    device.synchronize()
    comm.Allreduce(MPI.IN_PLACE, for_mpi(m, via)[0], op=MPI.MAX)
    checks.equal("Allreduce MAX in place", m.to_numpy(),
                 np.array([size - 1, 0, 10 * (size - 1), 5], dtype=np.int32))

    return path, received and landed_in_place, y.ptr, (x_mpi, s_mpi)


def paired_seconds(calls, repeat):
    """Each call in `calls` timed `repeat` times, taking turns so that
    changes in the machine's load hit all of them alike; per call, the
    fastest run (the least disturbed), the slowest rank's."""
    times = [[] for _ in calls]
    for _ in range(repeat):
        for call, record in zip(calls, times):
            comm.Barrier()
            start = time.perf_counter()
            call()
            record.append(time.perf_counter() - start)
    return [comm.allreduce(min(record), op=MPI.MAX) for record in times]


def timings(tack_pair, n, via, repeat):
    """Allreduce of n float32 and of one float32 (the per-call cost), Tack
    arrays against NumPy arrays in the same run."""
    numpy_pair = (np.arange(n, dtype=np.float32) + rank, np.empty(n, dtype=np.float32))
    one_tack = [for_mpi(tack.zeros((1,), dtype=tack.f32), via)[0] for _ in range(2)]
    one_numpy = (np.zeros(1, dtype=np.float32), np.zeros(1, dtype=np.float32))
    calls = 100

    def allreduce(pair, times=1):
        def run():
            for _ in range(times):
                comm.Allreduce(pair[0], pair[1], op=MPI.SUM)
        return run

    large = paired_seconds([allreduce(tack_pair), allreduce(numpy_pair)], repeat)
    small = paired_seconds([allreduce(one_tack, calls), allreduce(one_numpy, calls)], repeat)
    return {"tack": large[0], "numpy": large[1],
            "tack_small": small[0] / calls, "numpy_small": small[1] / calls}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1 << 20, help="elements per array (default 1M)")
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per measurement")
    parser.add_argument("--via", choices=("auto", "dlpack", "numpy"), default="auto",
                        help="hand mpi4py the array itself, only its __dlpack__, or a NumPy view")
    args = parser.parse_args()
    if size < 2:
        if rank == 0:
            print("run with at least two ranks: mpirun -n 2 python examples/mpi_allreduce.py", file=sys.stderr)
        return 2
    # Every value and every partial sum must be exact in float32.
    if args.n < 1 or (args.n + size) * size >= 1 << 24:
        if rank == 0:
            print(f"--n must be in [1, {(1 << 24) // size - size}) for exact float32 sums", file=sys.stderr)
        return 2

    checks = Checks()
    lines = []
    host = tack.device("cpu")
    path, in_place, address, pair = exchange_and_reduce(host, args.n, args.via, checks)
    lines.append(f"host arrays reach MPI through: {path}")
    if in_place:
        lines.append(f"Send/Recv ring: received into the Tack array's own memory ({address:#x}), checked")
    lines.append(f"Bcast int32[8], Allreduce SUM float32[{args.n}] and MAX in place: checked against NumPy")

    t = timings(pair, args.n, args.via, args.repeat)
    lines.append(f"Allreduce {args.n} float32, best of {args.repeat}: Tack {t['tack'] * 1e3:.3f} ms, "
                 f"NumPy {t['numpy'] * 1e3:.3f} ms (Tack/NumPy {t['tack'] / t['numpy']:.2f})")
    lines.append(f"Allreduce 1 float32, per call: Tack {t['tack_small'] * 1e6:.1f} us, "
                 f"NumPy {t['numpy_small'] * 1e6:.1f} us")

    # CUDA arrays, where every rank has a CUDA device and the MPI reads CUDA memory.
    try:
        cuda, why_not = tack.device("cuda"), None
    except (RuntimeError, ValueError) as exc:
        cuda, why_not = None, f"no CUDA device ({str(exc).split('.')[0]})"
    if cuda is not None:
        aware, why = mpi_is_cuda_aware()
        if not aware:
            why_not = f"the MPI library is not CUDA-aware ({why})"
    if not comm.allreduce(why_not is None, op=MPI.LAND):
        lines.append(f"CUDA arrays: skipped: {why_not or 'another rank has no CUDA device or MPI support'}")
    else:
        # A NumPy view needs host memory: --via numpy hands CUDA arrays over as they are.
        via = "auto" if args.via == "numpy" else args.via
        cuda_path, _, _, _ = exchange_and_reduce(cuda, min(args.n, 1 << 16), via, checks)
        lines.append(f"CUDA arrays reach MPI through: {cuda_path}; ring, Bcast and Allreduce checked")

    failures = comm.gather(checks.failures, root=0)
    ok = comm.bcast(not any(failures) if rank == 0 else None, root=0)
    if rank == 0:
        library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
        print(f"Tack arrays through MPI: {size} ranks, {library}, "
              f"mpi4py {mpi4py.__version__}, tack {tack.__version__}")
        for line in lines:
            print("  " + line)
        for failure in (f for per_rank in failures for f in per_rank):
            print("  FAILED " + failure)
        print("OK" if ok else "FAILED")
        sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
