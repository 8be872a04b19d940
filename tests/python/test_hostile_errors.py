"""Hostile and careless input that must end in the exception its fault
names: messages that are not UTF-8, pickles of impossible shapes, sockets
that cannot carry descriptors, producers interrupted mid-query, fileno()
answers that are no descriptor, descriptors running out mid-receive, empty
messages, and files mistaken for others. Whatever could crash, hang or
take the process's descriptors runs in a process of its own with a time
limit."""

import json
import os
import pickle
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tack

LIMIT = 60


def child(body, env=None):
    """Runs `body` after `import tack` in another interpreter and returns
    the JSON it printed last; a crash or a hang fails the test."""
    code = "import json, os, socket, sys\nimport numpy as np\nimport tack\n" + textwrap.dedent(body)
    try:
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LIMIT,
                             env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung (killed after {LIMIT} s)")
    assert run.returncode == 0, f"the child failed (exit {run.returncode})\n{run.stdout}\n{run.stderr}"
    return json.loads(run.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# messages are decoded whatever their bytes


def test_a_device_name_cut_inside_a_character_is_a_value_error():
    # 511 two-byte characters fill the message buffer past its end, and the
    # cut may fall inside one of them.
    with pytest.raises(ValueError) as info:
        tack.device("\u00e9" * 511)
    # UnicodeDecodeError is a ValueError too, but not the one meant.
    assert not isinstance(info.value, UnicodeError), repr(info.value)
    assert "\u00e9\u00e9\u00e9" in str(info.value)


def test_a_compiler_log_that_is_not_utf8_is_a_runtime_error_with_the_log(tmp_path):
    header = tmp_path / "latin1.h"
    # A Latin-1 comment and an error on the same line: the compiler quotes
    # the line, and its bytes, in the log.
    header.write_bytes(b"int broken = ; /* caf\xe9 */\n")
    got = child(f"""
        try:
            k = tack.Kernel('#include "{header}"\\nvoid k(tack_index i, float *y) {{ y[i] = 1; }}')
            k(tack.zeros(4, "float32"))
        except Exception as e:
            print(json.dumps([type(e).__name__, str(e)]))
        else:
            print(json.dumps(["built", ""]))
    """)
    kind, message = got
    assert kind == "RuntimeError", got
    assert "broken" in message and "latin1.h" in message, got
    assert "\\xe9" in message, got  # the byte shown, not lost


# --------------------------------------------------------------------------
# pickles


class _Rebuild:
    def __init__(self, shape, values=b""):
        self.shape = shape
        self.values = values

    def __reduce__(self):
        return tack._tack._rebuild_array, (self.values, "float32", self.shape, "cpu", True)


@pytest.mark.parametrize("ndim", [65, 1000])
def test_a_pickle_of_more_than_64_dimensions_is_refused_naming_the_limit(ndim):
    data = pickle.dumps(_Rebuild((1,) * ndim))
    refused = f"cannot unpickle a tack.Array: .*ndim is {ndim}; Tack arrays have at most 64 dimensions"
    with pytest.raises(ValueError, match=refused):
        pickle.loads(data)


def test_a_pickle_of_64_dimensions_still_loads():
    a = pickle.loads(pickle.dumps(_Rebuild((1,) * 64, bytes(4))))
    assert a.shape == (1,) * 64


# --------------------------------------------------------------------------
# sockets


def test_send_array_on_a_tcp_socket_is_a_value_error_at_the_sender():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    a = tack.zeros(4, "float32", exportable=True)
    try:
        with pytest.raises(ValueError, match="only AF_UNIX sockets carry descriptors"):
            tack.send_array(client, a)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.recv(1)  # nothing was sent
    finally:
        for s in (client, server, listener):
            s.close()


class _Fileno:
    def __init__(self, value):
        self.value = value

    def fileno(self):
        return self.value


@pytest.mark.parametrize("value, exception", [(2**40, ValueError), (-2, ValueError), (2**70, ValueError),
                                              ("3", TypeError), (3.0, TypeError), (True, TypeError)])
def test_a_fileno_that_is_no_descriptor_says_what_fileno_returned(value, exception):
    a = tack.zeros(4, "float32", exportable=True)
    with pytest.raises(exception, match=r"fileno\(\) returned") as info:
        tack.send_array(_Fileno(value), a)
    assert "closed" not in str(info.value)
    with pytest.raises(exception, match=r"fileno\(\) returned"):
        tack.receive_array(_Fileno(value))


def test_a_fileno_of_minus_one_is_still_a_closed_socket():
    with pytest.raises(ValueError, match="closed"):
        tack.receive_array(_Fileno(-1))


def test_an_empty_seqpacket_message_is_not_a_closed_peer():
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        left.send(b"")
        right.settimeout(5)
        with pytest.raises(ValueError, match="empty message") as info:
            tack.receive_array(right)
        assert "closed" not in str(info.value)
        # A closed peer still says so.
        left.close()
        with pytest.raises(RuntimeError, match="closed by the sending end"):
            tack.receive_array(right)
    finally:
        left.close()
        right.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux descriptors")
def test_the_last_free_descriptor_taken_by_a_receive_is_emfile():
    got = child("""
        import errno, resource
        left, right = socket.socketpair()
        a = tack.zeros(4, "float32", exportable=True)
        tack.send_array(left, a)
        count = len(os.listdir("/proc/self/fd"))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (count + 16, hard))
        held = []
        try:
            while True:
                held.append(os.dup(0))
        except OSError:
            pass
        os.close(held.pop())  # one free: the descriptor that arrives takes it
        try:
            tack.receive_array(right)
        except OSError as e:
            seen = [type(e).__name__, errno.errorcode.get(e.errno), str(e)]
        except Exception as e:
            seen = [type(e).__name__, None, str(e)]
        else:
            seen = ["received", None, ""]
        for fd in held:
            os.close(fd)
        print(json.dumps(seen))
    """)
    kind, code, message = got
    assert (kind, code) == ("OSError", "EMFILE"), got
    assert "no descriptor free" in message and "ulimit" in message, got


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm")
def test_a_dev_shm_file_is_not_called_a_memfd(tmp_path):
    path = f"/dev/shm/tack-test-{os.getpid()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, 4096)
        record = ("cpu", 4096, 4096, fd, "posix_fd", bytes(16))
        with pytest.raises(ValueError, match="shared-memory file") as info:
            tack.import_memory(record, "float32", 1024, device="cpu")
        assert "memfd not sealed" not in str(info.value)
        assert "SIGBUS" in str(info.value)  # still says why it is refused
    finally:
        os.close(fd)
        os.unlink(path)


def test_an_unsealed_memfd_is_still_called_a_memfd():
    fd = os.memfd_create("tack-test", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 4096)
        with pytest.raises(ValueError, match="a memfd not sealed against shrinking"):
            tack.import_memory(("cpu", 4096, 4096, fd, "posix_fd", bytes(16)), "float32", 1024, device="cpu")
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# producers interrupted in the middle of a DLPack import


class _Producer:
    """A NumPy array's DLPack, with a __dlpack_device__ or __dlpack__ that
    raises `raised` (a class) when it is asked."""

    def __init__(self, raised, where):
        self.values = np.arange(4, dtype=np.float32)
        self.raised = raised
        self.where = where

    def __dlpack__(self, **kwargs):
        if self.where == "__dlpack__":
            raise self.raised()
        return self.values.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        if self.where == "__dlpack_device__":
            raise self.raised()
        return self.values.__dlpack_device__()


@pytest.mark.parametrize("where", ["__dlpack_device__", "__dlpack__"])
@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, MemoryError])
@pytest.mark.parametrize("entry", ["from_dlpack", "asarray"])
def test_a_producer_interrupted_mid_query_is_not_swallowed(raised, where, entry):
    with pytest.raises(raised):
        getattr(tack, entry)(_Producer(raised, where))


def test_a_failing_dlpack_device_query_is_still_optional():
    a = tack.from_dlpack(_Producer(LookupError, "__dlpack_device__"))
    assert a.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
