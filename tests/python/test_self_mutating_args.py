"""Arguments that change while Tack reads them. Every entry that reads a
sequence or a mapping (shapes, strides, export records, launch domains,
kernel arguments, CUDA Array Interface dicts, DLPack version and device
tuples, device options, pickled state, a socket's timeout) is given
objects whose __index__, __bool__, __float__ or __len__ empty, shrink, grow
or refill the containers being read, and then reuse the freed memory.

A reader that keeps borrowed items across such a call reads freed memory:
a segfault, or a plausible wrong answer. So each entry must end as it
ends for the same arguments without the mutation (it read a private copy),
or for __len__, which decides what a copy holds, at least in an ordinary
exception. All of it runs in child processes with a time limit, so that a
crash fails one test and names its entry."""

import subprocess
import sys
import textwrap

import pytest

LIMIT = 240

CHILD = r'''
import os, pickle, socket, sys
import numpy as np
import tack

# Objects freed by a mutation are overwritten at once by these, so that a
# read of a freed object reads something else (or crashes) rather than
# its old contents.
JUNK = []


def churn():
    JUNK[:] = [bytes(n % 72) for n in range(1000)] + [("s" * (n % 40)) + str(n) for n in range(1000)]
    JUNK.extend((n, n + 1) for n in range(500))


class Box:
    """The containers a mutation strikes, filled once they exist."""

    def __init__(self, how):
        self.how = how
        self.containers = []
        self.striking = False

    def strike(self):
        # Not again from inside a strike (a LenList's own __len__).
        if self.striking:
            return
        self.striking = True
        try:
            self.strike_all()
        finally:
            self.striking = False
        churn()

    def strike_all(self):
        for c in self.containers:
            try:
                if self.how == "clear":
                    c.clear()
                elif self.how == "pop":
                    if isinstance(c, dict):
                        if c:
                            c.popitem()
                    elif list.__len__(c):
                        c.pop(0)
                elif self.how == "grow":
                    if isinstance(c, dict):
                        for i in range(64):
                            c["junk%d" % i] = object()
                    else:
                        c.extend(object() for _ in range(64))
                elif self.how == "refill":
                    if isinstance(c, dict):
                        for k in list(c):
                            c[k] = "x" * 7
                    else:
                        c[:] = [object() for _ in c]
            except Exception:
                pass  # a container that refuses (an exported bytearray) stays


class Mutator:
    """A number that strikes its box whenever it is asked for its value."""

    def __init__(self, value, box):
        self.value = value
        self.box = box

    def __index__(self):
        self.box.strike()
        return int(self.value)

    def __float__(self):
        self.box.strike()
        return float(self.value)

    def __bool__(self):
        self.box.strike()
        return bool(self.value)


class LenList(list):
    """A list whose length, asked, empties its box (itself among them)."""

    box = None

    def __len__(self):
        if self.box is not None:
            self.box.strike()
        return list.__len__(self)


HOST = np.zeros(64, dtype=np.float32)
EXPORTED = tack.zeros(6, "float32", exportable=True)
KERNEL = None


def kernel():
    global KERNEL
    if KERNEL is None:
        KERNEL = tack.Kernel("void k(tack_index i, float *y, float a) { y[i] = a; }")
    return KERNEL


def kernel2():
    return tack.Kernel("void k2(tack_index i, tack_index j, float *y) { y[i * 3 + j] = 1; }")


# Each entry: (function(wrap, seq) -> what it returned, same). `wrap(v)`
# gives v itself for the plain run and a Mutator for the hostile one;
# `seq(items)` a list (or LenList) the box strikes. `same`: the hostile run
# must end exactly as the plain one.


def shape(wrap, seq):
    return seq([wrap(2), wrap(3)])


def e_zeros(wrap, seq):
    return tack.zeros(shape(wrap, seq), "float32").shape


def e_empty(wrap, seq):
    return tack.empty(shape(wrap, seq), "float32").shape


def e_reshape(wrap, seq):
    return tack.zeros(6, "float32").reshape(shape(wrap, seq)).shape


def e_array_from_ptr(wrap, seq):
    return tack.array_from_ptr(HOST.ctypes.data, "float32", shape(wrap, seq)).shape


def e_import_memory(wrap, seq):
    return tack.import_memory(EXPORTED.export_memory(), "float32", shape(wrap, seq)).shape


def e_import_record(wrap, seq):
    rec = seq(list(EXPORTED.export_memory())[:6])
    rec[3] = wrap(rec[3])  # the handle: must be an int
    return tack.import_memory(rec, "float32", seq([wrap(6)])).shape


def e_launch(wrap, seq):
    y = tack.zeros(6, "float32")
    kernel().launch(seq([wrap(6)]), y, wrap(2.5))
    return y.to_numpy().tolist()


def e_launch_2d(wrap, seq):
    y = tack.zeros(6, "float32")
    kernel2().launch(seq([wrap(2), wrap(3)]), y)
    return y.to_numpy().tolist()


def e_kernel_args(wrap, seq):
    y = tack.zeros(6, "float32")
    args = seq([y, wrap(1.5)])
    kernel()(*args)
    return y.to_numpy().tolist()


def cai(box, shape, read_only, strides):
    # The typestr is a new str that only the dict holds.
    d = {"version": 3, "typestr": "".join(["<", "f", "4"]), "shape": shape, "data": (HOST.ctypes.data, read_only),
         "strides": strides, "stream": None, "mask": None}
    if box is not None:
        box.containers.append(d)

    class Producer:
        @property
        def __cuda_array_interface__(self):
            return d

    return Producer()


def e_cai(wrap, seq):
    # Every number and the read-only flag may clear the dict.
    p = cai(getattr(seq, "box", None), (wrap(2), wrap(3)), wrap(False), (wrap(12), wrap(4)))
    return tack.asarray(p).shape


def e_cai_strides(wrap, seq):
    # The strides, a list, are read last: their own numbers may clear
    # them and the dict.
    p = cai(getattr(seq, "box", None), (2, 3), False, seq([wrap(12), wrap(4)]))
    return tack.asarray(p).shape


def e_rebuild(wrap, seq):
    values = bytearray(24)
    return pickle.loads(pickle.dumps(Rebuild(values, shape(wrap, seq)))).shape


class Rebuild:
    def __init__(self, values, shape):
        self.values, self.shape = values, shape

    def __reduce__(self):
        return tack._tack._rebuild_array, (bytes(self.values), "float32", self.shape, "cpu", True)


def e_rebuild_direct(wrap, seq):
    return tack._tack._rebuild_array(bytearray(24), "float32", shape(wrap, seq), "cpu", True).shape


def e_device_options(wrap, seq):
    options = {"external_context": {"context": wrap(1), "device": wrap(2)}}
    box = getattr(seq, "box", None)
    if box is not None:
        box.containers += [options, options["external_context"]]
    return tack.device("cpu", **options).name


def e_dlpack_export(wrap, seq):
    a = tack.zeros(4, "float32")
    seq([a])
    capsule = a.__dlpack__(max_version=(wrap(1), wrap(0)), copy=wrap(False))
    return type(capsule).__name__


def e_dlpack_device(wrap, seq):
    values = np.arange(4, dtype=np.float32)
    held = seq([values])

    class Producer:
        def __dlpack__(self, **kwargs):
            return values.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (wrap(1), wrap(0))

    return tack.from_dlpack(Producer()).to_numpy().tolist()


def e_socket_timeout(wrap, seq):
    left, right = socket.socketpair()
    held = seq([left, right])

    class Sock:
        def fileno(self):
            return left.fileno()

        def gettimeout(self):
            return wrap(5.0)

    try:
        tack.send_array(Sock(), tack.zeros(3, "float32", exportable=True))
        right.settimeout(5)
        return tack.receive_array(right).shape
    finally:
        left.close()
        right.close()


def e_array(wrap, seq):
    return tack.array(seq([wrap(1.0), wrap(2.0)]), "float32").shape


ENTRIES = {
    "zeros": (e_zeros, True),
    "empty": (e_empty, True),
    "reshape": (e_reshape, True),
    "array_from_ptr": (e_array_from_ptr, True),
    "import_memory": (e_import_memory, True),
    "import_memory_record": (e_import_record, False),
    "Kernel.launch": (e_launch, True),
    "Kernel.launch_2d": (e_launch_2d, True),
    "Kernel.__call__": (e_kernel_args, True),
    "asarray_cai": (e_cai, True),
    "asarray_cai_strides": (e_cai_strides, True),
    "pickle": (e_rebuild, True),
    "_rebuild_array": (e_rebuild_direct, True),
    "device_options": (e_device_options, False),
    "Array.__dlpack__": (e_dlpack_export, True),
    "from_dlpack_device": (e_dlpack_device, True),
    "socket_timeout": (e_socket_timeout, True),
    "array": (e_array, False),
}

ORDINARY = (TypeError, ValueError, RuntimeError, BufferError, IndexError, OverflowError)


def outcome(fn, wrap, seq):
    try:
        return ("ok", repr(fn(wrap, seq)))
    except ORDINARY as e:
        return (type(e).__name__, None)


def run(name, how, dunder, position):
    """One hostile call of entry `name` beside the plain one; raises
    AssertionError when they disagree."""
    fn, same = ENTRIES[name]
    box = Box(how)
    count = [0]

    def hostile(v):
        # Only the item at `position` mutates, so each item is tried as
        # the one read first, in the middle and last.
        count[0] += 1
        return Mutator(v, box) if count[0] - 1 == position % 3 or dunder != "__len__" and position >= 3 else v

    def hostile_seq(items):
        s = LenList(items) if dunder == "__len__" else list(items)
        if dunder == "__len__":
            s.box = box
        box.containers.append(s)
        return s

    hostile_seq.box = box
    plain = outcome(fn, lambda v: v, list)
    got = outcome(fn, hostile if dunder != "__len__" else (lambda v: v), hostile_seq)
    del box.containers[:]
    if same and dunder != "__len__":
        assert got == plain, (name, how, dunder, position, got, plain)
    return got
'''

HYPOTHESIS = r'''
from hypothesis import HealthCheck, given, settings, strategies as st

names = sys.argv[1].split(",")


@settings(max_examples=int(sys.argv[2]), deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(names), how=st.sampled_from(["clear", "pop", "grow", "refill"]),
       dunder=st.sampled_from(["__index__", "__len__"]), position=st.integers(0, 5))
def every_entry(name, how, dunder, position):
    print(name, how, dunder, position, flush=True)
    run(name, how, dunder, position)


every_entry()
print("ok")
'''

ONE = r'''
print(run(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
print("ok")
'''


def in_child(tail, *argv):
    try:
        r = subprocess.run([sys.executable, "-c", CHILD + tail, *map(str, argv)], capture_output=True, text=True,
                           timeout=LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung (killed after {LIMIT} s)")
    signalled = " (killed by a signal)" if r.returncode < 0 else ""
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (
        f"exit {r.returncode}{signalled}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r.stdout


ENTRY_NAMES = ["zeros", "empty", "reshape", "array_from_ptr", "import_memory", "import_memory_record",
               "Kernel.launch", "Kernel.launch_2d", "Kernel.__call__", "asarray_cai", "asarray_cai_strides", "pickle",
               "_rebuild_array", "device_options", "Array.__dlpack__", "from_dlpack_device", "socket_timeout", "array"]


@pytest.mark.parametrize("entry", ["zeros", "empty", "reshape", "array_from_ptr", "import_memory", "Kernel.launch",
                                   "Kernel.launch_2d", "asarray_cai_strides", "_rebuild_array"])
def test_a_shape_list_emptied_by_its_first_extent_is_read_as_it_was(entry):
    # The list is cleared by the first extent's __index__, with the second
    # still to be read.
    in_child(ONE, entry, "clear", "__index__", 0)


@pytest.mark.parametrize("how", ["clear", "refill"])
@pytest.mark.parametrize("position", [0, 1, 2, 3])
def test_a_cuda_array_interface_dict_emptied_while_read_is_read_as_it_was(how, position):
    # Positions 0-1: a shape extent, 2: the read-only flag (its __bool__);
    # 3: every number and the flag strike.
    in_child(ONE, "asarray_cai", how, "__index__", position)


def test_every_entry_reads_containers_that_change_under_it():
    # One process for all entries: a crash names its entry in the
    # falsifying example hypothesis prints (or in the last lines of
    # output before the signal).
    in_child(HYPOTHESIS, ",".join(ENTRY_NAMES), 400)
