"""Arrays that fit code written for NumPy, CuPy, dask and JAX arrays: a
numpy.dtype, refused == and !=, slice assignment, integer-like addresses,
tack.memory_space, and multiprocessing that shares exportable memory.

Cases that start interpreters (without NumPy, multiprocessing's children)
run in a child process with a timeout."""

import os
import pickle
import subprocess
import sys
import weakref

import numpy as np
import pytest

import tack
from children import run_python


def run_child(code, timeout=120):
    """run_python, with this interpreter's sys.path."""
    return run_python(code, env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}, timeout=timeout)


NAMES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64", "bool",
         "float16", "bfloat16", "complex64", "complex128"]


@pytest.mark.parametrize("name", NAMES)
def test_array_dtype_is_the_numpy_dtype(name):
    a = tack.zeros(3, name)
    expected = np.dtype(name) if name != "bfloat16" else np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    assert isinstance(a.dtype, np.dtype) and a.dtype == expected
    assert a.dtype.kind == expected.kind and a.dtype.itemsize == expected.itemsize
    assert np.dtype(a.dtype) == expected
    assert {expected: 1}[a.dtype] == 1
    # The tack.DType it names is one key with it, and equal to it.
    d = getattr(tack, {"int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32",
                       "uint32": "u32", "int64": "i64", "uint64": "u64", "float32": "f32", "float64": "f64",
                       "bool": "bool", "float16": "f16", "bfloat16": "bf16", "complex64": "c64",
                       "complex128": "c128"}[name])
    assert hash(d) == hash(expected) and d == expected and a.dtype == d
    assert {expected: "numpy"}[d] == "numpy" and {d: "tack"}[expected] == "tack"
    assert len({d, expected, a.dtype}) == 1


def test_numpy_and_jax_take_the_array_as_they_take_their_own():
    jnp = pytest.importorskip("jax.numpy")
    a = tack.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.result_type(a) == np.float32
    assert np.result_type(a, np.float64) == np.float64
    j = jnp.asarray(a)
    assert j.dtype == jnp.float32 and j.shape == (2, 3) and j.tolist() == [[0, 1, 2], [3, 4, 5]]
    i = jnp.asarray(tack.zeros(4, tack.i32))
    assert i.dtype == jnp.int32


def test_dtype_compares_as_numpy_does():
    assert tack.f32 == "f4" and tack.f32 == np.float32 and tack.f32 == np.dtype("<f4") and tack.f32 != "f8"
    assert (tack.f32 < tack.f64) is (np.dtype("f4") < np.dtype("f8")) is True
    assert (tack.f64 <= tack.i8) is (np.dtype("f8") <= np.dtype("i1")) is False
    assert tack.f32 != None and tack.f32 != object()  # noqa: E711


def test_without_numpy_the_dtype_is_tacks():
    out = run_child("""
        import pickle, sys
        sys.modules["numpy"] = None  # import numpy raises ImportError
        import tack
        a = tack.zeros(3, tack.i32)
        assert a.dtype is tack.i32 and a.dtype == "int32" and a.dtype.kind == "i" and a.dtype.itemsize == 4
        assert {tack.i32: 1}[a.dtype] == 1 and hash(a.dtype) == hash(tack.i32)
        b = pickle.loads(pickle.dumps(a))
        assert b.dtype is tack.i32 and b.ptr != a.ptr
        assert tack.memory_space(a.ptr) == "cpu"
        k = tack.Kernel("void inc(tack_index i, int32_t *y) { y[i] += 1; }")
        k(a)
        assert list(memoryview(a)) == [1, 1, 1]
        print("ok")
    """)
    assert out.strip() == "ok"


def test_without_ml_dtypes_bfloat16_is_tacks():
    out = run_child("""
        import sys
        sys.modules["ml_dtypes"] = None
        import numpy as np, tack
        a = tack.zeros(3, tack.bf16)
        assert a.dtype is tack.bf16 and a.dtype == "bfloat16" and a.dtype.kind == "V"
        assert isinstance(tack.zeros(3).dtype, np.dtype)
        print("ok")
    """)
    assert out.strip() == "ok"


# --------------------------------------------------------------------------
# == and != refused; identity is `is`


@pytest.mark.parametrize("other", [
    lambda a: tack.zeros(3),
    lambda a: a.reshape(3),
    lambda a: np.zeros(3, np.float32),
    lambda a: 0,
    lambda a: 0.0,
    lambda a: np.float32(0),
])
@pytest.mark.parametrize("op", ["==", "!="])
def test_equality_is_refused_saying_what_to_compare(other, op):
    a = tack.zeros(3)
    b = other(a)
    with pytest.raises(TypeError, match=r"np\.asarray\(a\)") as info:
        eval(f"a {op} b")
    assert "a is b" in str(info.value)


def test_arrays_stay_hashable_by_identity():
    a, b = tack.zeros(3), tack.zeros(3)
    assert hash(a) == object.__hash__(a) and hash(a) != hash(b)
    assert len({a, b, a}) == 2 and {a: 1}[a] == 1
    cache = weakref.WeakKeyDictionary()
    cache[a] = "a"
    assert cache[a] == "a"
    # An array equals itself (weak references and containers rely on it).
    assert a == a and not (a != a) and a in [a] and (a != None) and not (a == None)  # noqa: E711, PLR0124
    assert a != "a" and [a].index(a) == 0


# --------------------------------------------------------------------------
# slice assignment


def test_basic_slice_assignment_writes_in_place():
    a = tack.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    ptr = a.ptr
    a[:, 1:3] = 0
    assert np.asarray(a).tolist() == [[0, 0, 0], [3, 0, 0]] and a.ptr == ptr
    a[1:, ...] = [7, 8, 9]
    assert np.asarray(a).tolist() == [[0, 0, 0], [7, 8, 9]]
    a[...] = tack.array(np.ones((2, 3), np.float32))
    assert np.asarray(a).tolist() == [[1, 1, 1], [1, 1, 1]]
    a[:] = 5
    assert (np.asarray(a) == 5).all()


def test_slice_assignment_to_a_read_only_array_is_refused_as_other_writes():
    n = np.arange(4, dtype=np.float32)
    r = tack.array_from_ptr(n.ctypes.data, "float32", 4)
    with pytest.raises(RuntimeError, match="read-only") as info:
        r[1:3] = 0
    with pytest.raises(type(info.value)):
        r.fill(0)
    assert n.tolist() == [0, 1, 2, 3]


def test_slice_assignment_refuses_element_keys():
    a = tack.zeros(4)
    for key in (0, [0, 1], None, (0, slice(None))):
        with pytest.raises(TypeError, match="np.asarray"):
            a[key] = 1
    assert np.asarray(a).tolist() == [0, 0, 0, 0]


def test_dask_stores_into_a_tack_array():
    da = pytest.importorskip("dask.array")
    target = tack.zeros((6, 8), tack.f64)
    ptr = target.ptr
    x = da.arange(48, chunks=7, dtype=np.float64).reshape(6, 8)
    da.store(x, target, lock=False)
    assert np.asarray(target).tolist() == np.arange(48.0).reshape(6, 8).tolist() and target.ptr == ptr


# --------------------------------------------------------------------------
# addresses: anything with __index__


class Address:
    """An integer-like object, as cuda-python's CUdeviceptr is."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_array_from_ptr_takes_integer_like_addresses():
    n = np.arange(4, dtype=np.float32)
    for ptr in (np.uint64(n.ctypes.data), np.int64(n.ctypes.data), Address(n.ctypes.data)):
        a = tack.array_from_ptr(ptr, "float32", 4)
        assert a.ptr == n.ctypes.data and np.asarray(a).tolist() == [0, 1, 2, 3]
    # Above 2**63 only the unsigned form reaches: the check is the alignment's.
    with pytest.raises(ValueError, match="aligned"):
        tack.array_from_ptr(np.uint64(2**64 - 1), "float32", 0)
    a = tack.array_from_ptr(np.uint64(2**63 + 16), "float32", 0)
    assert a.ptr == 2**63 + 16
    for bad in (True, np.bool_(True), 1.5, "16", -1, 2**64, Address(-1), Address(2**64)):
        with pytest.raises(TypeError):
            tack.array_from_ptr(bad, "float32", 0)


# --------------------------------------------------------------------------
# tack.memory_space (the GPU drivers' answers: test_cuda.py, test_hip.py,
# test_level_zero.py, on the simulated drivers)


def test_memory_space_of_host_memory_is_cpu():
    a = tack.zeros(4)
    assert tack.memory_space(a.ptr) == "cpu" and tack.memory_space(np.uint64(a.ptr)) == "cpu"
    for bad in (True, 1.5, "0x10", -1, 2**64):
        with pytest.raises(TypeError):
            tack.memory_space(bad)


# --------------------------------------------------------------------------
# multiprocessing shares exportable host memory

SHARING = """
import multiprocessing as mp, pickle, sys
import numpy as np
import tack

def fill_from_queue(q, done):
    a = q.get(timeout=60)
    a.fill(7)
    done.put((a.ptr, a.shape, str(a.dtype)))

def fill_from_pipe(conn):
    a = conn.recv()
    a[1:3] = 9
    conn.send("done")

def fill_argument(a, done):
    a.fill(5)
    done.put("done")

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    shared = tack.zeros((2, 3), tack.i32, exportable=True)
    q, done = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=fill_from_queue, args=(q, done))
    p.start()
    q.put(shared)
    ptr, shape, dtype = done.get(timeout=60)
    p.join(60)
    assert p.exitcode == 0 and shape == (2, 3) and dtype == "int32", (p.exitcode, shape, dtype)
    assert np.asarray(shared).tolist() == [[7, 7, 7], [7, 7, 7]], np.asarray(shared)

    ours, theirs = ctx.Pipe()
    p = ctx.Process(target=fill_from_pipe, args=(theirs,))
    p.start()
    ours.send(shared.reshape(6))
    assert ours.recv() == "done"
    p.join(60)
    assert np.asarray(shared).ravel().tolist() == [7, 9, 9, 7, 7, 7], np.asarray(shared)

    # As a Process argument (pickled under spawn, inherited under fork).
    p = ctx.Process(target=fill_argument, args=(shared, done))
    p.start()
    assert done.get(timeout=60) == "done"
    p.join(60)
    assert (np.asarray(shared) == 5).all(), np.asarray(shared)

    # A plain array travels by value: the child's write stays there.
    plain = tack.zeros(3, tack.i32)
    p = ctx.Process(target=fill_from_queue, args=(q, done))
    p.start()
    q.put(plain)
    done.get(timeout=60)
    p.join(60)
    assert np.asarray(plain).tolist() == [0, 0, 0]

    # multiprocessing's pickle carries the descriptor, not the values;
    # plain pickle copies an exportable array too.
    from multiprocessing.reduction import ForkingPickler
    big = tack.zeros(1 << 16, tack.u8, exportable=True)
    assert len(ForkingPickler.dumps(big)) < 1000 < len(ForkingPickler.dumps(tack.zeros(1 << 16, tack.u8)))
    copy = pickle.loads(pickle.dumps(shared))
    assert copy.ptr != shared.ptr and np.asarray(copy).tolist() == np.asarray(shared).tolist()
    print("ok")
"""


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_multiprocessing_shares_exportable_host_arrays(method, tmp_path):
    script = tmp_path / "sharing.py"
    script.write_text(SHARING)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, str(script), method], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_multiprocessing_is_imported_with_the_first_exportable_array():
    # Importing multiprocessing costs more than the rest of `import tack`;
    # until an array can travel by descriptor, arrays pickle by value anyway.
    out = run_child("""
        import sys
        import tack
        assert "multiprocessing.reduction" not in sys.modules
        tack.zeros(3)
        assert "multiprocessing.reduction" not in sys.modules
        tack.zeros(3, exportable=True)
        from multiprocessing.reduction import ForkingPickler
        assert ForkingPickler._extra_reducers[tack.Array] is tack._tack._reduce_for_multiprocessing
        print("ok")
    """)
    assert out.strip() == "ok"
