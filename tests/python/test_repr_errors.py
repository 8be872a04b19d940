"""What a Tack array looks like when printed, and what it says when asked
for elements it does not give.

Host arrays print their values as NumPy prints them, over a view of the
memory; device arrays say how to see theirs (test_cuda_ecosystem.py).
Indexing, iteration, int() and float() raise TypeError naming what to use;
slices alone give NumPy's view of a block, which is what dask reads.
"""

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tack
from conftest import DTYPE_NAMES, live_counts, sample

PREFIX = "tack.Array("


def numpy_text(values):
    """NumPy's own rendering of the values, aligned after PREFIX."""
    return np.array2string(values, separator=", ", prefix=PREFIX, suffix=",")


# --------------------------------------------------------------------------
# repr and str of host arrays


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_host_arrays_print_their_values_as_numpy_does(name):
    values = sample(name, (3, 4))
    a = tack.array(values)
    assert repr(a) == f"{PREFIX}{numpy_text(values)}, dtype={name}, device='cpu')"
    assert str(a) == repr(a)


def test_the_values_are_the_arrays_own_memory_now():
    n = np.arange(4, dtype=np.float64)
    a = tack.from_dlpack(n)
    n[2] = 42.5
    assert "42.5" in repr(a)
    a.fill(-1)
    assert repr(a) == "tack.Array([-1., -1., -1., -1.], dtype=float64, device='cpu')"


def test_a_read_only_array_says_so():
    n = np.arange(3, dtype=np.int32)
    ro = tack.array_from_ptr(n.ctypes.data, "int32", 3)
    assert repr(ro) == "tack.Array([0, 1, 2], dtype=int32, device='cpu', writable=False)"


def test_rows_wrap_under_the_first_as_numpy_aligns_them():
    a = tack.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert repr(a) == ("tack.Array([[0., 1., 2.],\n"
                       "            [3., 4., 5.]], dtype=float32, device='cpu')")


def test_large_arrays_are_summarised_with_their_shape():
    a = tack.zeros((100, 100), tack.i16)
    text = repr(a)
    assert "..." in text
    assert text.endswith(", shape=(100, 100), dtype=int16, device='cpu')")
    assert len(text) < 600
    with np.printoptions(threshold=20_000):  # NumPy's print options apply
        assert "..." not in repr(a) and "shape=" not in repr(a)


def test_empty_and_zero_dimensional_arrays():
    assert repr(tack.zeros(0)) == "tack.Array([], dtype=float32, device='cpu')"
    assert repr(tack.zeros((0, 3), tack.u8)) == "tack.Array([], shape=(0, 3), dtype=uint8, device='cpu')"
    assert repr(tack.array(np.float64(2.5))) == "tack.Array(2.5, dtype=float64, device='cpu')"


def test_repr_changes_nothing():
    a = tack.array(np.arange(5, dtype=np.float32))
    gc.collect()
    base = live_counts()
    for _ in range(100):
        repr(a)
    assert live_counts() == base
    assert a.writable and a.to_numpy().tolist() == [0, 1, 2, 3, 4]


def test_without_numpy_a_host_array_says_why_its_values_are_missing():
    code = textwrap.dedent("""
        import sys
        sys.modules["numpy"] = None  # import numpy raises ImportError
        import tack
        a = tack.zeros((2, 3), "int32")
        text = repr(a)
        assert text == ("<tack.Array shape=(2, 3) dtype=int32 device='cpu': values not shown: NumPy, "
                        "which prints them, cannot be imported>"), text
        assert str(a) == text
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# --------------------------------------------------------------------------
# element access: refused, with what to use


def host():
    return tack.array(np.arange(12, dtype=np.float32).reshape(3, 4))


@pytest.mark.parametrize("what, action", [
    ("indices", lambda a: a[0]),
    ("indices", lambda a: a[0, 1]),
    ("indices", lambda a: a[-1]),
    ("indices", lambda a: a[None]),
    ("indices", lambda a: a[[0, 1]]),
    ("indices", lambda a: a[np.array([True, False, True])]),
    ("indices", lambda a: a[0:2, 1]),
    ("indices", lambda a: a["x"]),
    ("iteration", lambda a: list(a)),
    ("iteration", lambda a: [x for x in a]),
    ("iteration", lambda a: 1.0 in a),
    ("iteration", lambda a: tuple(a)),
    ("int()", lambda a: int(a)),
    ("float()", lambda a: float(a)),
    ("float()", lambda a: complex(a)),
    ("item assignment", lambda a: a.__setitem__(0, 1.0)),
    ("item assignment", lambda a: a.__setitem__((0, slice(None)), 1.0)),
])
def test_host_element_access_is_a_type_error_naming_numpy(what, action):
    a = host()
    before = a.to_numpy()
    with pytest.raises(TypeError) as info:
        action(a)
    text = str(info.value)
    assert what in text
    assert "np.asarray(a)" in text
    assert "no indexing or slicing" in text
    np.testing.assert_array_equal(a.to_numpy(), before)


def test_one_element_arrays_are_refused_too():
    one = tack.array(np.array([3.0]))
    for convert in (int, float):
        with pytest.raises(TypeError, match="np.asarray"):
            convert(one)
    zero_d = tack.array(np.float32(1.5))
    with pytest.raises(TypeError, match="np.asarray"):
        float(zero_d)


@pytest.mark.parametrize("shape", [(), (1,), (0,), (3,), (2, 2)])
def test_truth_testing_is_a_type_error_saying_what_to_ask_instead(shape):
    # NumPy's bool() reads a one-element array's value; answering by
    # length would say True for tack.zeros(1), where NumPy says False.
    a = tack.zeros(shape)
    for test in (bool, lambda a: not a, lambda a: 1 if a else 0):
        with pytest.raises(TypeError) as info:
            test(a)
        text = str(info.value)
        assert text.startswith("the truth value of a tack.Array is not defined"), text
        assert "bool(np.asarray(a))" in text and "a.size == 0" in text and "a is not None" in text, text
        assert "len()" not in text, text


def test_the_array_type_cannot_be_constructed_and_says_what_makes_one():
    for make in (lambda: tack.Array(), lambda: tack.Array(3), lambda: tack.Array.__new__(tack.Array)):
        with pytest.raises(TypeError) as info:
            make()
        text = str(info.value)
        assert text.startswith("tack.Array cannot be constructed directly"), text
        assert "tack.empty" in text and "tack.from_dlpack" in text and "tack.array_from_ptr" in text, text
    # No signature to show, as for other builtin types inspect cannot read:
    # not object's "()", which would say Array() works.
    import inspect
    with pytest.raises(ValueError, match="no signature found"):
        inspect.signature(tack.Array)


def test_deleting_elements_is_a_type_error():
    with pytest.raises(TypeError, match="cannot be deleted"):
        del host()[0]


@pytest.mark.parametrize("key", [
    (slice(None),),
    (slice(1, 3), slice(0, 4)),
    (slice(None), slice(2, None)),
    slice(0, 2),
    (Ellipsis, slice(1, 2)),
    Ellipsis,
    (slice(None, None, 2), slice(None)),
])
def test_slices_alone_give_numpys_view_of_the_block(key):
    a = host()
    block = a[key]
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)[key]
    assert isinstance(block, np.ndarray) and not isinstance(block, tack.Array)
    np.testing.assert_array_equal(block, expected)
    assert np.shares_memory(block, np.asarray(a))
    # The same memory: writes through the view are the array's.
    block[...] = -7
    np.testing.assert_array_equal(a.to_numpy()[key], np.full(expected.shape, -7, np.float32))


def test_the_empty_key_is_the_whole_array_even_at_zero_dimensions():
    a = tack.array(np.float32(2.0))
    whole = a[()]
    assert isinstance(whole, np.ndarray) and whole.shape == ()
    assert whole.ctypes.data == a.ptr
    assert host()[()].ctypes.data != 0


def test_a_read_only_array_gives_read_only_blocks():
    n = np.arange(4, dtype=np.float32)
    ro = tack.array_from_ptr(n.ctypes.data, "float32", 4)
    block = ro[1:3]
    assert block.ctypes.data == n.ctypes.data + 4
    assert not block.flags.writeable
