"""The README's examples, as a user's program would hold them.

`make test` checks this file with `mypy --strict` (mypy.ini beside it) and
runs it, so the examples both type-check against Tack's stubs and do what
the README says. Keep it in step with the README's tour.
"""

import copy
import pickle

import dask.array as da
import numpy as np
import torch

import tack

# The tour
n = np.arange(6, dtype=np.float32)
a = tack.from_dlpack(n)  # zero-copy: a.ptr == n.ctypes.data
assert a.ptr == n.ctypes.data
a.fill(7)  # NumPy sees 7s
assert n.tolist() == [7.0] * 6
t = torch.from_dlpack(a)  # zero-copy the other way
assert t.data_ptr() == a.ptr
v = a.reshape(2, 3)  # a view; it keeps the import alive too
assert v.ptr == a.ptr and v.shape == (2, 3)

b = tack.zeros((1024,), tack.f64)  # every allocation is zeroed
c = tack.array([[1, 2], [3, 4]])  # a copy of anything NumPy can read
r = tack.array_from_ptr(n.ctypes.data, "float32", 6)  # read-only unless writable=True
assert not r.writable

saxpy = tack.Kernel("""
void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }
""")
x, y = tack.array(np.ones(1000, np.float32)), tack.zeros(1000)
saxpy.launch(1000, 2.0, x, y)  # over i in [0, 1000)
saxpy(2.0, x, y)  # n = the size x and y share; shapes that differ: ValueError
assert float(np.asarray(y)[0]) == 4.0
saxpy(2.0, np.ones(1000, np.float32), y)  # NumPy, PyTorch, any tack.asarray input: no copy
assert float(np.asarray(y)[0]) == 6.0

# The buffer protocol and NumPy's view of a host array
m: memoryview = memoryview(a)
assert m.format == "f" and m.shape == (6,) and not m.readonly
view = np.asarray(a)
assert view.ctypes.data == a.ptr

# NumPy's dtype protocol
assert np.dtype(tack.f32) == np.float32
assert np.zeros(2, dtype=tack.f64).dtype == np.float64

# A default device for a block, on this thread
with tack.device("cpu") as d:
    assert tack.get_default_device() is d
    inside = tack.zeros(3)
assert inside.device is d

# Copies and pickles
same_values: tack.Array = copy.deepcopy(c)
assert same_values.ptr != c.ptr and np.array_equal(np.asarray(same_values), np.asarray(c))
restored = pickle.loads(pickle.dumps(r, protocol=5))
assert isinstance(restored, tack.Array) and not restored.writable

# "Arrays as Python expects them"
assert str(c) == "tack.Array([[1, 2],\n            [3, 4]], dtype=int64, device='cpu')"
assert np.dtype(tack.f32) == np.float32
dx = da.from_array(c)  # dask reads c in blocks, each a view of c's memory
assert int(dx.sum().compute()) == 10
dd = copy.deepcopy(c)
e = pickle.loads(pickle.dumps(c, protocol=5))
assert np.array_equal(np.asarray(e), np.asarray(c)) and dd.ptr != c.ptr
with tack.device("cpu") as dev:
    f = tack.zeros(3)
assert f.device is dev
try:
    c[0]  # type: ignore[index]  # mypy agrees: an integer is not a key
except TypeError as exc:
    assert "np.asarray(a)" in str(exc)
else:
    raise AssertionError("c[0] did not raise TypeError")
block = a[1:3]  # slices alone: NumPy's view of the block
assert block.ctypes.data == a.ptr + 4
assert c.dtype == np.int64 and np.result_type(c) == np.int64  # a numpy.dtype
c[:, 1:] = 0  # basic slices write a host array in place
assert np.asarray(c).tolist() == [[1, 0], [3, 0]]
try:
    c == dd  # noqa: B015
except TypeError as exc:
    assert "np.asarray(a)" in str(exc)
else:
    raise AssertionError("c == dd did not raise TypeError")
assert tack.memory_space(c.ptr) == "cpu" and tack.memory_space(np.uint64(c.ptr)) == "cpu"

print("README examples: ok")
