"""Cross-process arrays against hostile and broken peers. Every peer is a
real process on the other end of a real socket: it forges headers, sends
descriptors of memory it can shrink or of regular files, stops in the middle
of a message, or never sends at all. The receiving side runs in a process of
its own too, with a time limit, since what these tests guard against is a
receiver killed by SIGBUS or hung for good.

Each case prints one JSON line of what it saw; the figures the README's
Reliability table quotes (time to TimeoutError, time from SIGINT to
KeyboardInterrupt) are measured here."""

import errno
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tack

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd") or not hasattr(os, "memfd_create"),
                                reason="needs Linux descriptors and memfd_create")

# How long a process of a case may take before it counts as hung.
LIMIT = 20

COMMON = r"""
import errno, fcntl, json, os, signal, socket, struct, sys, time
sock = socket.socket(fileno=int(sys.argv[1]))
ctl = socket.socket(fileno=int(sys.argv[2])) if len(sys.argv) > 2 else None

def fd_count():
    return len(os.listdir("/proc/self/fd"))

def mappings(tag):
    with open("/proc/self/maps") as f:
        return sum(tag in line for line in f)

def say(word):
    ctl.sendall(word.encode() + b"\n")

def hear():
    data = b""
    while not data.endswith(b"\n"):
        more = ctl.recv(64)
        if not more:
            return ""
        data += more
    return data.decode().strip()

def report(**figures):
    print(json.dumps(figures), flush=True)

def header(nbytes, *, version=1, header_size=608, magic=b"TACKARR\0", alloc=None, flags=0,
           dtype=(2, 32, 1), backend=b"cpu", shape=None):
    # The 608-byte version-1 layout of include/tack/array.h, written by hand.
    shape = (nbytes // 4,) if shape is None else shape
    h = bytearray(608)
    struct.pack_into("=8sIIBBHIiIQQ16s16s16s", h, 0, magic, version, header_size, dtype[0], dtype[1], dtype[2],
                     flags, len(shape), 0, nbytes, nbytes if alloc is None else alloc, backend, b"posix_fd",
                     bytes(16))
    struct.pack_into(f"={len(shape)}q", h, 96, *shape)
    return bytes(h)

def fill(s):
    # Leaves no room in the socket's send buffer.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.setblocking(False)
    try:
        while True:
            s.send(bytes(4096))
    except BlockingIOError:
        pass

def memory(size, seals=0, name="hostile"):
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd
"""

RECEIVER = COMMON + r"""
import numpy as np
import tack
"""


def start(body, *fds, prelude=RECEIVER, args=()):
    """Runs `body` after `prelude` in another interpreter, with the sockets
    `fds` as its sock and ctl (see COMMON), then `args`, on its command line."""
    argv = [str(f.fileno()) for f in fds] + [str(a) for a in args]
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(body)] + argv,
                            pass_fds=[f.fileno() for f in fds], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc, what):
    try:
        out, err = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the {what} hung (killed after {LIMIT} s)\n{out}\n{err}")
    if proc.returncode < 0:
        pytest.fail(f"the {what} was killed by {signal.Signals(-proc.returncode).name}\n{out}\n{err}")
    assert proc.returncode == 0, f"the {what} failed (exit {proc.returncode})\n{out}\n{err}"
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def pair(receiver, peer, kind=socket.SOCK_STREAM):
    """Runs `receiver` (with Tack) and `peer` (plain Python: the hostile
    end) in two processes joined by a socket of `kind` and a control
    socket; returns what each reported."""
    theirs, mine = socket.socketpair(socket.AF_UNIX, kind)
    ctl_r, ctl_p = socket.socketpair()
    r = start(receiver, theirs, ctl_r)
    p = start(peer, mine, ctl_p, prelude=COMMON)
    for s in (theirs, mine, ctl_r, ctl_p):
        s.close()
    got = finish(r, "receiver")
    return got, finish(p, "peer")


# --------------------------------------------------------------------------
# descriptors that can shrink under the mapping

SHRINKABLE = {
    "unsealed memfd": "fd = memory(4096)",
    "memfd sealed against growing and writing only": "fd = memory(4096, fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)",
    "regular file": "import tempfile; fd = os.open(tempfile.mkdtemp(), os.O_TMPFILE | os.O_RDWR); "
                    "os.ftruncate(fd, 4096)",
}

RECEIVE_OR_DIE = r"""
    before, maps, counts = fd_count(), mappings("hostile"), dict(tack._tack.live_counts())
    try:
        a = tack.receive_array(sock)
    except ValueError as e:
        say("refused")
        report(refused=str(e), fds=fd_count() - before, maps=mappings("hostile") - maps,
               counts=dict(tack._tack.live_counts()) == counts)
    else:
        say("mapped")
        assert hear() == "shrunk"
        a.to_numpy()   # the pages are gone: SIGBUS, unless refused above
        report(refused=None)
"""

SEND_THEN_SHRINK = r"""
    {make}
    sock.sendmsg([header(4096)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
    if hear() == "mapped":
        os.ftruncate(fd, 0)
        say("shrunk")
    report(size=os.fstat(fd).st_size)
"""


@pytest.mark.parametrize("make", SHRINKABLE.values(), ids=SHRINKABLE.keys())
def test_receive_refuses_memory_the_sender_could_shrink(make):
    got, peer = pair(RECEIVE_OR_DIE, SEND_THEN_SHRINK.format(make=make))
    assert got["refused"] and "F_SEAL_SHRINK" in got["refused"], got
    assert "SIGBUS" in got["refused"]
    # The received descriptor is closed, nothing is mapped, nothing is live.
    assert got["fds"] == 0 and got["maps"] == 0 and got["counts"], got
    assert peer["size"] == 4096  # the sender's memory is as it was


IMPORT_OR_DIE = r"""
    {make}
    record = tack.ExportedMemory(("cpu", 4096, 4096, fd, "posix_fd", bytes(16)))
    before, maps, counts = fd_count(), mappings("hostile"), dict(tack._tack.live_counts())
    try:
        a = tack.import_memory(record, "float32", 1024)
    except ValueError as e:
        report(refused=str(e), fds=fd_count() - before, maps=mappings("hostile") - maps,
               counts=dict(tack._tack.live_counts()) == counts, kept=os.fstat(fd).st_size)
    else:
        os.ftruncate(fd, 0)  # what whoever else holds the descriptor may do
        a.to_numpy()         # SIGBUS, unless refused above
        report(refused=None)
"""


@pytest.mark.parametrize("make", SHRINKABLE.values(), ids=SHRINKABLE.keys())
def test_import_memory_refuses_memory_that_could_shrink(make):
    theirs, mine = socket.socketpair()
    got = finish(start(IMPORT_OR_DIE.format(make=make), theirs), "importer")
    theirs.close()
    mine.close()
    assert got["refused"] and "F_SEAL_SHRINK" in got["refused"], got
    # The caller's descriptor stays the caller's; nothing else stays.
    assert got["fds"] == 0 and got["maps"] == 0 and got["counts"] and got["kept"] == 4096, got


def test_memory_sealed_against_shrinking_is_mapped_and_stays():
    receiver = r"""
        a = tack.receive_array(sock)
        values = a.to_numpy().tolist()
        a.fill(7)
        say("written")
        assert hear() == "tried"
        report(values=values, after=a.to_numpy().tolist(), writable=a.writable)
    """
    peer = r"""
        import mmap
        fd = memory(4096, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        with mmap.mmap(fd, 4096) as m:
            m[:16] = struct.pack("=4i", 1, 2, 3, 4)
        sock.sendmsg([header(16, dtype=(0, 32, 1))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
        assert hear() == "written"
        try:
            os.ftruncate(fd, 0)
        except PermissionError:
            shrunk = False
        else:
            shrunk = True
        with mmap.mmap(fd, 4096) as m:
            seen = list(struct.unpack_from("=4i", m))
        say("tried")
        report(shrunk=shrunk, seen=seen)
    """
    got, peer = pair(receiver, peer)
    assert got == {"values": [1, 2, 3, 4], "after": [7, 7, 7, 7], "writable": True}
    assert peer == {"shrunk": False, "seen": [7, 7, 7, 7]}


# --------------------------------------------------------------------------
# messages that never end: the socket's timeout, and Ctrl-C

STALL = {
    "nothing at all": "",
    "the magic and nothing more": 'sock.sendall(b"TACKARR\\0")',
    "a header claiming more than it sends": "sock.sendmsg([header(4096, version=2, header_size=4096)], "
                                            "[(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack('i', memory(4096)))])",
}


@pytest.mark.parametrize("send", STALL.values(), ids=STALL.keys())
def test_receive_times_out_as_the_socket_says(send):
    # 0.3 s: a timeout the old wait, adding up 0.1 s steps in floating
    # point, never reached.
    receiver = r"""
        sock.settimeout(0.3)
        before = fd_count()
        t0 = time.monotonic()
        try:
            tack.receive_array(sock)
        except TimeoutError as e:
            report(after=time.monotonic() - t0, message=str(e), fds=fd_count() - before)
        say("done")
    """
    peer = send + "\nhear()\nreport()\n"
    got, _ = pair(receiver, peer)
    print(f"TimeoutError {got['after']:.3f} s after a receive with a 0.3 s timeout began")
    assert 0.29 <= got["after"] < 0.3 + 0.5, got
    assert "timed out" in got["message"] and got["fds"] == 0, got


def test_send_times_out_on_a_peer_that_never_reads():
    receiver = r"""
        fill(sock)
        sock.settimeout(0.2)
        a = tack.empty(4, tack.f32, exportable=True)
        t0 = time.monotonic()
        try:
            tack.send_array(sock, a)
        except TimeoutError as e:
            report(after=time.monotonic() - t0, message=str(e))
        say("done")
    """
    got, _ = pair(receiver, "hear()\nreport()\n")
    print(f"TimeoutError {got['after']:.3f} s after a send with a 0.2 s timeout began")
    assert 0.19 <= got["after"] < 0.2 + 0.5, got
    assert "timed out" in got["message"], got


def interrupted(body, peer):
    """Runs `body` (a receive or send that blocks) with no timeout in a
    receiver process; SIGINT arrives 0.2 s after it starts. Returns the
    receiver's report and the time the signal was sent."""
    theirs, mine = socket.socketpair()
    ctl_r, ctl_p = socket.socketpair()
    r = start("print('ready', flush=True)\nt0 = time.monotonic()\n" + textwrap.dedent(body), theirs, ctl_r)
    p = start(peer, mine, ctl_p, prelude=COMMON)
    for s in (theirs, mine, ctl_r, ctl_p):
        s.close()
    ready, _, _ = select.select([r.stdout], [], [], LIMIT)
    assert ready and r.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    sent = time.monotonic()
    r.send_signal(signal.SIGINT)
    got = finish(r, "receiver")
    finish(p, "peer")
    return got, sent


@pytest.mark.parametrize("send", [v for k, v in STALL.items() if k != "nothing at all"],
                         ids=[k for k in STALL if k != "nothing at all"])
def test_ctrl_c_interrupts_a_receive_that_never_ends(send):
    body = r"""
        try:
            tack.receive_array(sock)
        except KeyboardInterrupt:
            report(entered=t0, raised=time.monotonic())
        say("done")
    """
    got, sent = interrupted(body, send + "\nhear()\nreport()\n")
    print(f"KeyboardInterrupt {1000 * (got['raised'] - sent):.2f} ms after SIGINT, in a receive")
    assert got["entered"] < sent, "the signal came before the receive began"
    assert got["raised"] - sent < 0.5, got


def test_ctrl_c_interrupts_a_send_that_never_ends():
    body = r"""
        fill(sock)
        sock.setblocking(True)
        a = tack.empty(4, tack.f32, exportable=True)
        try:
            tack.send_array(sock, a)
        except KeyboardInterrupt:
            report(entered=t0, raised=time.monotonic())
        say("done")
    """
    got, sent = interrupted(body, "hear()\nreport()\n")
    print(f"KeyboardInterrupt {1000 * (got['raised'] - sent):.2f} ms after SIGINT, in a send")
    assert got["raised"] - sent < 0.5, got


def test_a_signal_whose_handler_returns_lets_the_receive_go_on():
    # PEP 475: a handler that raises nothing does not end the call; the
    # whole message's timeout still holds.
    receiver = r"""
        calls = []
        signal.signal(signal.SIGUSR1, lambda *a: calls.append(1))
        signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
        signal.signal(signal.SIGALRM, lambda *a: os.kill(os.getpid(), signal.SIGUSR1))
        sock.settimeout(0.3)
        t0 = time.monotonic()
        try:
            tack.receive_array(sock)
        except TimeoutError:
            pass
        after = time.monotonic() - t0
        signal.setitimer(signal.ITIMER_REAL, 0)
        report(after=after, handled=len(calls))
        say("done")
    """
    got, _ = pair(receiver, 'sock.sendall(b"TACKARR\\0")\nhear()\nreport()\n')
    assert got["handled"] >= 2 and 0.29 <= got["after"] < 0.8, got


# --------------------------------------------------------------------------
# sockets that are not connected


def test_listening_socket_is_an_os_error_at_once(tmp_path):
    body = r"""
        path = sys.argv[3]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen()
        a = tack.empty(4, tack.f32, exportable=True)
        seen = {}
        for what, call in (("send", lambda: tack.send_array(s, a)), ("receive", lambda: tack.receive_array(s)),
                           ("socket.send", lambda: s.send(b"x")), ("socket.recv", lambda: s.recv(1))):
            t0 = time.monotonic()
            try:
                call()
            except OSError as e:
                seen[what] = [type(e).__name__, errno.errorcode.get(e.errno), time.monotonic() - t0]
        report(**seen)
    """
    theirs, mine = socket.socketpair()
    got = finish(start(body, theirs, theirs, args=[tmp_path / "listening"]), "sender")
    theirs.close()
    mine.close()
    # As socket.send and socket.recv: the same OSError, at once.
    assert got["send"][:2] == got["socket.send"][:2] == ["OSError", "ENOTCONN"], got
    assert got["receive"][:2] == got["socket.recv"][:2] == ["OSError", "EINVAL"], got
    assert got["send"][2] < 0.1 and got["receive"][2] < 0.1, got


def test_a_non_blocking_socket_with_nothing_waiting_would_block():
    left, right = socket.socketpair()
    right.setblocking(False)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(BlockingIOError, match="would block"):
        tack.receive_array(right)
    assert len(os.listdir("/proc/self/fd")) == before
    # Once a message is there, it is received whole.
    a = tack.empty(3, tack.i32, exportable=True)
    a.from_numpy(np.arange(3, dtype=np.int32))
    tack.send_array(left, a)
    assert tack.receive_array(right).to_numpy().tolist() == [0, 1, 2]
    left.close()
    right.close()


# --------------------------------------------------------------------------
# forged messages, on each kind of socket

KINDS = {"stream": socket.SOCK_STREAM, "seqpacket": socket.SOCK_SEQPACKET, "datagram": socket.SOCK_DGRAM}

FORGED = [
    # (what, the peer's message and descriptors, the exception, words of its message)
    ("bad magic", "header(4096, magic=b'XXXXXXX\\0')", 1, "ValueError", "bad magic"),
    ("version 0", "header(4096, version=0)", 1, "ValueError", "version is 0"),
    ("sizes", "header(4096, alloc=16)", 1, "ValueError", "sizes do not agree"),
    ("shape", "header(4096, shape=(-1,))", 1, "ValueError", None),
    ("dtype", "header(4096, dtype=(10, 8, 1))", 1, "ValueError", "not a Tack dtype"),
    ("flags", "header(4096, flags=0x40)", 1, "ValueError", "flags"),
    ("header_size", "header(4096, header_size=600)", 1, "ValueError", "says it is 600 bytes"),
    ("no descriptor", "header(4096)", 0, "ValueError", "carried 0"),
    ("two descriptors", "header(4096)", 2, "ValueError", "carried 2"),
    ("regular file", "header(4096)", "file", "ValueError", "F_SEAL_SHRINK"),
    ("a pipe", "header(4096)", "pipe", "ValueError", "not host memory"),
    ("backend", "header(4096, backend=b'metal')", 1, "ValueError", "'metal'"),
]
MESSAGE_ONLY = [
    # Messages that only sockets with boundaries keep whole.
    ("longer than a header", "header(4096) + bytes(92)", 1, "ValueError",
     "a message of 700 bytes is not a version 1 array header, which is 608 bytes"),
    ("shorter than a header", "header(4096)[:300]", 1, "ValueError",
     "a message of 300 bytes is not a version 1 array header, which is 608 bytes"),
]

# One receiver and one forger per kind of socket; for each case the forger
# makes a fresh socket pair, hands one end to the receiver over the control
# socket and sends its forgery on the other, so that a stream a refusal
# leaves mid-message does not carry into the next case.
FORGER = r"""
    import tempfile
    def descriptors(kind):
        if kind == "file":
            fd = os.open(tempfile.mkdtemp(), os.O_TMPFILE | os.O_RDWR)
            os.ftruncate(fd, 4096)
            return [fd]
        if kind == "pipe":
            return [os.pipe()[0]]
        return [memory(4096, fcntl.F_SEAL_SHRINK) for _ in range(kind)]
    for what, message, fds in {cases!r}:
        mine, theirs = socket.socketpair(socket.AF_UNIX, {kind})
        socket.send_fds(ctl, [what.encode()], [theirs.fileno()])
        theirs.close()
        fds = descriptors(fds)
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{{len(fds)}}i", *fds))] if fds else []
        mine.sendmsg([eval(message)], ancillary)
        for fd in fds:
            os.close(fd)
        assert ctl.recv(4) == b"next"
        mine.close()
    ctl.sendall(b"end")
    report()
"""

REFUSE = r"""
    seen = {}
    while True:
        what, fds, _, _ = socket.recv_fds(ctl, 256, 1)
        if not fds:
            break
        s = socket.socket(fileno=fds[0])
        s.settimeout(5)
        before, counts = fd_count(), dict(tack._tack.live_counts())
        try:
            tack.receive_array(s)
        except Exception as e:
            seen[what.decode()] = [type(e).__name__, str(e), fd_count() - before,
                                   dict(tack._tack.live_counts()) == counts]
        else:
            seen[what.decode()] = [None]
        s.close()
        ctl.sendall(b"next")
    report(**seen)
"""


@pytest.mark.parametrize("kind", KINDS.values(), ids=KINDS.keys())
def test_forged_messages_are_refused_on_every_kind_of_socket(kind):
    # A stream has no message boundaries: a longer or shorter message is
    # another message's bytes there.
    cases = FORGED + (MESSAGE_ONLY if kind != socket.SOCK_STREAM else [])
    forger = FORGER.format(cases=[(what, message, fds) for what, message, fds, _, _ in cases], kind=int(kind))
    got, _ = pair(REFUSE, forger)
    assert sorted(got) == sorted(c[0] for c in cases)
    wrong = {}
    for what, _, _, exception, words in cases:
        seen = got[what]
        # The exception named, with words that say what was wrong; every
        # received descriptor closed and nothing left alive.
        if seen[0] != exception or (words and words not in seen[1]) or seen[2:] != [0, True]:
            wrong[what] = seen
    assert not wrong, wrong


def test_a_header_says_which_limit_ran_out_when_descriptors_do():
    receiver = r"""
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_count() + 16, hard))
        held = []
        try:
            while True:
                held.append(os.dup(0))
        except OSError:
            pass
        say("full")
        assert hear() == "sent"
        try:
            tack.receive_array(sock)
        except OSError as e:
            seen = [type(e).__name__, errno.errorcode.get(e.errno), str(e)]
        except Exception as e:
            seen = [type(e).__name__, None, str(e)]
        for fd in held:
            os.close(fd)
        # The stream stays in step: the next array arrives.
        sock.settimeout(5)
        again = tack.receive_array(sock).to_numpy().tolist()
        report(seen=seen, again=again)
        say("done")
    """
    peer = r"""
        assert hear() == "full"
        fd = memory(4096, fcntl.F_SEAL_SHRINK)
        sock.sendmsg([header(16)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
        sock.sendmsg([header(16)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
        say("sent")
        hear()
        report()
    """
    got, _ = pair(receiver, peer)
    kind, code, message = got["seen"]
    assert (kind, code) == ("OSError", "EMFILE"), got
    assert "EMFILE" in message or "descriptor" in message, got
    assert "ulimit" in message, got
    assert got["again"] == [0.0, 0.0, 0.0, 0.0]


# --------------------------------------------------------------------------
# the export record and the descriptor it names


def test_an_export_record_keeps_its_descriptor_for_as_long_as_it_lives(tmp_path):
    body = r"""
        import gc
        rec = tack.empty((1024,), tack.f32, exportable=True).export_memory()
        gc.collect()
        # The array is gone; its record is not. A file opened now must not
        # take the record's descriptor number.
        path = sys.argv[3]
        with open(path, "wb") as f:
            f.write(b"the user's own file".ljust(4096, b"."))
        fd = os.open(path, os.O_RDWR)
        seen = {"same_number": fd == rec.handle}
        try:
            b = tack.import_memory(rec, tack.f32, 1024)
        except ValueError as e:
            seen["import"] = str(e)
        else:
            b.fill(1.0)
            seen["import"] = "mapped"
        with open(path, "rb") as f:
            seen["file_intact"] = f.read(19) == b"the user's own file"
        handle = rec.handle
        del rec
        gc.collect()
        try:
            os.fstat(handle) if handle != fd else None
            seen["closed_with_record"] = handle == fd
        except OSError:
            seen["closed_with_record"] = True
        report(**seen)
    """
    theirs, mine = socket.socketpair()
    got = finish(start(body, theirs, theirs, args=[tmp_path / "mine.txt"]), "process")
    theirs.close()
    mine.close()
    assert got == {"same_number": False, "import": "mapped", "file_intact": True, "closed_with_record": True}


def test_an_export_record_stays_a_record_of_plain_values():
    a = tack.empty(8, tack.u8, exportable=True)
    e = a.export_memory()
    assert tuple(e) == (e.backend, e.size, e.allocation_size, e.handle, e.handle_type, e.device_uuid)
    assert len(e) == 6 and type(e.handle) is int
    # One made by hand has no owner: its descriptor is the caller's.
    assert tack.ExportedMemory(tuple(e)).owner is None


def test_an_export_record_is_not_pickled_or_deep_copied_and_says_what_to_do():
    import copy
    import pickle
    a = tack.empty(8, tack.u8, exportable=True)
    e = a.export_memory()
    for attempt in (lambda: pickle.dumps(e), lambda: pickle.dumps(e, protocol=0),
                    lambda: pickle.dumps([e], protocol=5), lambda: copy.deepcopy(e), lambda: copy.deepcopy({"e": e})):
        with pytest.raises(TypeError) as info:
            attempt()
        message = str(info.value)
        assert f"its handle {e.handle} is a descriptor number of this process" in message, message
        assert "means nothing in another process" in message, message
        assert "tack.send_array" in message and "tack.receive_array" in message and "SCM_RIGHTS" in message, message
        assert "capsule" not in message.lower(), message
    # The record is immutable: a shallow copy is the record, owner and all.
    assert copy.copy(e) is e
