"""Cross-process arrays: exportable host memory (a memfd), tack.import_memory,
and tack.send_array / tack.receive_array over a Unix socket between two
processes, with the descriptors of each process counted in /proc/self/fd.

The other process is a fresh interpreter (subprocess) given one end of a
socketpair. The CUDA cases run both processes on the simulated CUDA driver
(tests/sim/cuda_sim.c, built here without sanitizers), whose exportable
allocations live in memfds, so that two processes share them as two
processes share a GPU allocation.
"""

import mmap
import os
import socket
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tack
import simdriver

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd") or not hasattr(socket, "send_fds"),
                                reason="needs Linux descriptors and socket.send_fds")

HEADER_SIZE = 608
VERSION_OFFSET, HEADER_SIZE_OFFSET, SIZE_OFFSET = 8, 12, 32


def fd_count():
    return len(os.listdir("/proc/self/fd"))


def is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def sample(shape=(3, 4), dtype="int32", base=0):
    return (np.arange(int(np.prod(shape))) + base).astype(dtype).reshape(shape)


def exportable(values):
    a = tack.empty(values.shape, values.dtype.name, exportable=True)
    a.from_numpy(values)
    return a


# What every other process starts with: its end of the socket, the
# descriptor count and the byte that orders the two processes' steps.
CHILD_PRELUDE = r"""
import os, socket, sys
import numpy as np
import tack

sock = socket.socket(fileno=int(sys.argv[1]))
# A socket to the other process of the test, where there is one.
peer = socket.socket(fileno=int(sys.argv[2])) if len(sys.argv) > 2 else None

def fd_count():
    return len(os.listdir("/proc/self/fd"))

def step():
    assert sock.recv(1) == b"s"

def done():
    sock.sendall(b"s")
"""


def spawn(body, env=None, peer=None):
    """Starts `body` after CHILD_PRELUDE in another interpreter, with `peer`
    (a socket) passed on as its `peer`; returns (process, this process's end
    of its control socket)."""
    mine, theirs = socket.socketpair()
    environ = dict(os.environ if env is None else env)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    fds = [theirs.fileno()] + ([peer.fileno()] if peer is not None else [])
    proc = subprocess.Popen([sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(body)] + [str(f) for f in fds],
                            pass_fds=fds, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    theirs.close()
    return proc, mine


def finish(proc, sock):
    sock.close()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"the other process failed (exit {proc.returncode}):\n{out}\n{err}"
    return out


def capture(sock):
    """One message as tack.send_array wrote it: (header bytes, descriptor)."""
    data, fds, _, _ = socket.recv_fds(sock, HEADER_SIZE, 4)
    assert len(data) == HEADER_SIZE and len(fds) == 1
    return bytearray(data), fds[0]


# --------------------------------------------------------------------------
# exportable host memory


def test_exportable_host_array_exports_a_memfd():
    before = fd_count()
    a = exportable(sample((1000,), "float32"))
    assert fd_count() == before + 1  # made with the allocation
    e = a.export_memory()
    assert isinstance(e, tack.ExportedMemory)
    page = os.sysconf("SC_PAGE_SIZE")
    assert (e.backend, e.size, e.handle_type) == ("cpu", 4000, "posix_fd")
    assert e.allocation_size == page * ((4000 + page - 1) // page)
    assert e.device_uuid == bytes(16)  # the host has no device UUID
    # Created once and cached, also through a reshape.
    assert a.export_memory().handle == e.handle
    assert a.reshape(10, 100).export_memory().handle == e.handle
    assert fd_count() == before + 1
    # The descriptor is the array's memory: writes show through a mapping of
    # it, and the pages past the array read as zeros.
    m = mmap.mmap(e.handle, e.allocation_size)
    view = np.frombuffer(m, np.float32)
    assert (view[:1000] == np.arange(1000)).all() and not view[1000:].any()
    a.fill(2.5)
    assert (view[:1000] == 2.5).all()
    view[7] = -1
    assert a.to_numpy()[7] == -1
    del view
    m.close()
    # Sealed: a receiver cannot shrink it under the exporter.
    with pytest.raises(PermissionError):
        os.ftruncate(e.handle, 0)
    # The record keeps the buffer, and so its descriptor, alive; the buffer
    # closes the descriptor when the last of the two goes.
    handle = e.handle
    del a
    assert is_open(handle) and fd_count() == before + 1
    del e
    assert not is_open(handle)
    assert fd_count() == before


def test_plain_host_arrays_still_refuse_export_and_send():
    a = tack.zeros(4)
    left, right = socket.socketpair()
    before = fd_count()
    with pytest.raises(RuntimeError, match="Backend cpu does not support memory export.*exportable=True"):
        a.export_memory()
    with pytest.raises(RuntimeError, match="does not support memory export"):
        tack.send_array(left, a)
    assert fd_count() == before
    left.close()
    right.close()


def test_import_memory_in_one_process():
    a = exportable(sample())
    e = a.export_memory()
    before = fd_count()
    b = tack.import_memory(e, "int32", 12)
    assert fd_count() == before + 1  # the array's own duplicate
    assert is_open(e.handle)  # the caller's descriptor is left alone
    assert b.device == tack.device("cpu") and b.shape == (12,) and b.writable
    assert (b.to_numpy() == np.arange(12)).all()
    b.fill(9)
    assert (a.to_numpy() == 9).all()
    a.fill(4)
    assert (b.to_numpy() == 4).all()
    # A view of the start with another dtype and shape, on a named device.
    c = tack.import_memory(e, tack.i64, (2, 3), device="cpu")
    assert (c.to_numpy() == (4 << 32) | 4).all()
    # Imported memory exports again (its duplicate is the handle), and it
    # outlives the exporter's array.
    assert b.export_memory().handle not in (e.handle, -1)
    del a, c
    assert (b.to_numpy() == 4).all()
    del b
    assert fd_count() == before  # the record still holds a's memfd
    del e
    assert fd_count() == before - 1  # which went with the record


def record(e, **changes):
    fields = dict(zip(("backend", "size", "allocation_size", "handle", "handle_type", "device_uuid"), tuple(e)))
    fields.update(changes)
    return tack.ExportedMemory(tuple(fields.values()))


def test_a_read_only_descriptor_gives_a_read_only_array():
    a = exportable(sample())
    e = a.export_memory()
    before = fd_count()
    ro = os.open(f"/proc/self/fd/{e.handle}", os.O_RDONLY)
    b = tack.import_memory(record(e, handle=ro), "int32", (3, 4))
    assert not b.writable and (b.to_numpy() == sample()).all()
    with pytest.raises(RuntimeError):
        b.fill(1)
    del b
    os.close(ro)
    del a, e
    assert fd_count() == before - 1  # a's memfd went with the array and its record


def test_import_memory_refusals_leave_no_descriptor():
    a = exportable(sample())
    e = a.export_memory()
    r, w = os.pipe()
    before, counts = fd_count(), dict(tack._tack.live_counts())
    cases = [
        (TypeError, "ExportedMemory", lambda: tack.import_memory(42, "int32", 12)),
        (TypeError, "ExportedMemory", lambda: tack.import_memory((1, 2), "int32", 12)),
        (TypeError, "device_uuid", lambda: tack.import_memory(record(e, device_uuid=b"x"), "int32", 12)),
        (TypeError, "handle", lambda: tack.import_memory(record(e, handle="3"), "int32", 12)),
        (ValueError, "does not fit", lambda: tack.import_memory(e, "int32", 13)),
        (ValueError, "not an open file descriptor", lambda: tack.import_memory(record(e, handle=1000), "int32", 12)),
        (ValueError, "not a file descriptor", lambda: tack.import_memory(record(e, handle=-1), "int32", 12)),
        (ValueError, "not host memory", lambda: tack.import_memory(record(e, handle=r), "int32", 12)),
        (ValueError, "posix_fd", lambda: tack.import_memory(record(e, handle_type="win32_kmt"), "int32", 12)),
        (ValueError, "sizes", lambda: tack.import_memory(record(e, size=e.allocation_size + 1), "int32", 12)),
        (ValueError, "'metal'", lambda: tack.import_memory(record(e, backend="metal"), "int32", 12)),
        (ValueError, "cannot be imported on", lambda: tack.import_memory(record(e, backend="cuda"), "int32", 12,
                                                                         device="cpu")),
        (TypeError, None, lambda: tack.import_memory(e, "float8", 12)),
        (ValueError, None, lambda: tack.import_memory(e, "int32", -1)),
    ]
    for exc, text, call in cases:
        with pytest.raises(exc) as info:
            call()
        if text:
            assert text in str(info.value), (text, str(info.value))
        assert fd_count() == before, f"{text}: a descriptor was left open"
    assert dict(tack._tack.live_counts()) == counts
    os.close(r)
    os.close(w)
    del a


# --------------------------------------------------------------------------
# send_array / receive_array


def test_descriptors_are_closed_exactly_once_in_one_process():
    left, right = socket.socketpair()
    before = fd_count()
    a = exportable(sample())
    tack.send_array(left, a)
    assert fd_count() == before + 1  # sending made no descriptor here
    b = tack.receive_array(right.fileno())  # a plain descriptor works too
    assert fd_count() == before + 2  # the received one closed, the mapping's own kept
    assert b.shape == (3, 4) and b.dtype == tack.i32 and (b.to_numpy() == sample()).all()
    # A descriptor closed twice would close whatever took its number since.
    sentinel = os.dup(2)
    del b
    assert is_open(sentinel)
    sentinel2 = os.dup(2)
    del a
    assert is_open(sentinel) and is_open(sentinel2)
    os.close(sentinel)
    os.close(sentinel2)
    assert fd_count() == before
    left.close()
    right.close()


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "float32", "float64"])
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (7,), (2, 3, 4)])
def test_every_dtype_and_shape_arrives_as_sent(dtype, shape):
    left, right = socket.socketpair()
    before = fd_count()
    values = (np.arange(int(np.prod(shape))) % 100).astype(dtype).reshape(shape)
    a = tack.empty(shape, dtype, exportable=True)
    a.from_numpy(values)
    tack.send_array(left, a)
    b = tack.receive_array(right)
    assert b.shape == shape and b.dtype == a.dtype and b.writable
    assert np.array_equal(b.to_numpy(), values)
    del a, b
    assert fd_count() == before
    left.close()
    right.close()


def test_writes_in_either_process_are_seen_in_the_other():
    before = fd_count()
    proc, sock = spawn(r"""
        before = fd_count()
        got = tack.receive_array(sock)
        assert got.shape == (3, 4) and got.dtype == tack.i32 and got.device == tack.device("cpu")
        assert (got.to_numpy() == np.arange(12).reshape(3, 4)).all()
        got.from_numpy(np.full((3, 4), 7, np.int32))     # the parent sees this
        mine = tack.empty(5, "float64", exportable=True)
        mine.from_numpy(np.arange(5) * 0.5)
        tack.send_array(sock, mine)
        step()                                            # the parent wrote into mine
        assert (mine.to_numpy() == [1, 2, 3, 4, 5]).all(), mine.to_numpy()
        assert (got.to_numpy() == 8).all()                # and into its own array
        del got, mine
        assert fd_count() == before, (before, fd_count())
        counts = dict(tack._tack.live_counts())
        assert counts["arrays"] == 0 and counts["buffers"] == 0, counts
        print("child ok")
    """)
    a = exportable(sample())
    tack.send_array(sock, a)
    theirs = tack.receive_array(sock)
    assert (a.to_numpy() == 7).all()
    assert (theirs.to_numpy() == np.arange(5) * 0.5).all()
    theirs.from_numpy(np.arange(1, 6, dtype=np.float64))
    a.fill(8)
    sock.sendall(b"s")
    assert "child ok" in finish(proc, sock)
    # The other process's memory outlives it: the mapping holds it.
    assert (theirs.to_numpy() == [1, 2, 3, 4, 5]).all()
    del a, theirs
    assert fd_count() == before


def test_a_future_header_is_refused_and_its_descriptor_closed():
    a = exportable(sample(base=3))
    left, right = socket.socketpair()
    tack.send_array(left, a)
    good, fd = capture(right)
    assert good[:8] == b"TACKARR\0"
    assert struct.unpack_from("=II", good, VERSION_OFFSET) == (1, HEADER_SIZE)
    assert struct.unpack_from("=Q", good, SIZE_OFFSET) == (48,)
    assert bytes(good[48:51]) == b"cpu" and bytes(good[80:96]) == bytes(16)
    before = fd_count()

    future = good + bytes(200)
    struct.pack_into("=II", future, VERSION_OFFSET, 2, len(future))
    socket.send_fds(left, [bytes(future)], [fd])
    tack.send_array(left, a)  # the stream stays in step: this one arrives
    with pytest.raises(ValueError, match="version 2, newer"):
        tack.receive_array(right)
    assert fd_count() == before
    b = tack.receive_array(right)
    assert (b.to_numpy() == sample(base=3)).all()
    del b
    assert fd_count() == before

    def refused(header, fds, match):
        l2, r2 = socket.socketpair()
        socket.send_fds(l2, [bytes(header)], fds)
        l2.shutdown(socket.SHUT_WR)
        with pytest.raises(ValueError, match=match):
            tack.receive_array(r2)
        l2.close()
        r2.close()
        assert fd_count() == before, match

    bad = bytearray(good)
    bad[0:1] = b"X"
    refused(bad, [fd], "bad magic")
    bad = bytearray(good)
    struct.pack_into("=Q", bad, SIZE_OFFSET, 44)
    refused(bad, [fd], "sizes do not agree")
    bad = bytearray(good)
    struct.pack_into("=I", bad, VERSION_OFFSET, 0)
    refused(bad, [fd], "version is 0")
    refused(good, [fd, fd], "carried 2")
    refused(good, [], "carried 0")
    os.close(fd)
    left.close()
    right.close()
    del a


def test_receive_honours_the_socket_timeout_and_a_closed_peer():
    left, right = socket.socketpair()
    right.settimeout(0.2)
    before = fd_count()
    with pytest.raises(TimeoutError):
        tack.receive_array(right)
    left.close()
    with pytest.raises(RuntimeError, match="closed by the sending end"):
        tack.receive_array(right)
    a = exportable(sample())
    with pytest.raises(BrokenPipeError, match="closed"):
        tack.send_array(right, a)  # no SIGPIPE: the error socket.send raises
    with pytest.raises(TypeError):
        tack.send_array(object(), a)
    with pytest.raises(TypeError):
        tack.send_array(right, np.zeros(3))
    r, w = os.pipe()
    with pytest.raises(ValueError, match="not a socket"):
        tack.send_array(w, a)
    os.close(r)
    os.close(w)
    del a
    right.close()
    assert fd_count() == before - 2


def test_round_trip_many_times_leaves_no_descriptor():
    left, right = socket.socketpair()
    before, counts = fd_count(), dict(tack._tack.live_counts())
    for i in range(300):
        a = exportable(sample(base=i))
        tack.send_array(left, a)
        b = tack.receive_array(right)
        tack.send_array(right, b)
        c = tack.receive_array(left)
        assert int(c.to_numpy()[0, 0]) == i
        del a, b, c
    assert fd_count() == before
    assert dict(tack._tack.live_counts()) == counts
    left.close()
    right.close()


# --------------------------------------------------------------------------
# CUDA, on the simulated driver in both processes


@pytest.fixture(scope="module")
def cuda_env(tmp_path_factory):
    library, why_not = simdriver.build("cuda", tmp_path_factory.mktemp("cuda_sim"))
    if library is None:
        pytest.skip(why_not)
    return dict(os.environ, TACK_CUDA_LIBRARY=library, TACK_SIM_CUDA_DEVICES="2")


def test_cuda_array_sent_to_another_process_shows_the_same_bytes(cuda_env):
    # Two processes on the simulated driver, connected directly; this one
    # (which has no CUDA driver loaded) only orders their steps.
    receiver = r"""
        import ctypes
        before = fd_count()
        got = tack.receive_array(peer)                    # device=None: found by UUID
        assert got.device == tack.device("cuda:0"), got.device
        assert got.shape == (1000,) and got.dtype == tack.f32
        assert (got.to_numpy() == np.arange(1000) * 0.25).all()
        got.fill(3)                                       # the sender sees this
        copy = tack.receive_array(peer)                   # a plain array's exported copy
        assert copy.dtype == tack.i64 and (copy.to_numpy() == np.arange(6)).all()
        try:
            tack.receive_array(peer, device="cuda:1")
        except ValueError as e:
            assert "UUID" in str(e), e
        else:
            raise AssertionError("imported on a device with another UUID")
        done()
        step()                                            # the sender wrote -1s
        assert (got.to_numpy() == -1).all(), got.to_numpy()[:4]
        sim = ctypes.CDLL(os.environ["TACK_CUDA_LIBRARY"])
        sim.tack_sim_cuda_stats.restype = ctypes.c_longlong
        assert sim.tack_sim_cuda_stats(b"imports") == 2, sim.tack_sim_cuda_stats(b"imports")
        del got, copy
        assert sim.tack_sim_cuda_stats(b"vmm_live") == 0
        assert fd_count() == before, (before, fd_count())
        print("receiver ok")
    """
    sender = r"""
        before = fd_count()
        a = tack.empty(1000, "float32", device="cuda", exportable=True)
        a.from_numpy(np.arange(1000, dtype=np.float32) * 0.25)
        tack.send_array(peer, a)
        plain = tack.array(np.arange(6, dtype=np.int64), device="cuda")
        tack.send_array(peer, plain)
        tack.send_array(peer, a)                          # refused there: another device's UUID
        step()                                            # the receiver wrote 3s
        assert (a.to_numpy() == 3).all(), a.to_numpy()[:4]
        a.fill(-1)
        done()
        del a, plain
        assert fd_count() == before, (before, fd_count())
        print("sender ok")
    """
    left, right = socket.socketpair()
    send_proc, send_ctl = spawn(sender, cuda_env, peer=left)
    recv_proc, recv_ctl = spawn(receiver, cuda_env, peer=right)
    left.close()
    right.close()
    try:
        assert recv_ctl.recv(1) == b"s"  # the receiver wrote 3s
        send_ctl.sendall(b"s")
        assert send_ctl.recv(1) == b"s"  # the sender saw them and wrote -1s
        recv_ctl.sendall(b"s")
    finally:
        out_r = finish(recv_proc, recv_ctl)
        out_s = finish(send_proc, send_ctl)
    assert "receiver ok" in out_r and "sender ok" in out_s
