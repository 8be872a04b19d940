"""NumPy's dtype protocol, and dask reading Tack arrays in place.

np.dtype(x) takes x.dtype when x has one, so a tack.DType is a dtype to
NumPy and to every library that asks NumPy (dask does, of an array's
dtype). dask.array.from_array then reads a host array in blocks through
slices, which are NumPy views of the array's memory: no copy.
"""

import numpy as np
import pytest

import tack
from conftest import DTYPES, ml_dtypes

da = pytest.importorskip("dask.array")


@pytest.mark.parametrize("short, name", [(s, n) for s, n, _, _ in DTYPES])
def test_np_dtype_of_every_tack_dtype(short, name):
    d = getattr(tack, short)
    assert np.dtype(d) == np.dtype(name)
    # NumPy's bfloat16 is ml_dtypes' type.
    assert np.dtype(d) == (ml_dtypes.bfloat16 if name == "bfloat16" else getattr(np, name))
    assert d.dtype == np.dtype(name) and type(d.dtype) is type(np.dtype(name))
    assert np.zeros(2, dtype=d).dtype == np.dtype(name)
    assert np.arange(3).astype(d).dtype == np.dtype(name)
    # And back: a NumPy dtype names the Tack dtype.
    assert tack.zeros(1, np.dtype(d)).dtype == d


def test_an_arrays_dtype_is_a_numpy_dtype_too():
    a = tack.zeros((2, 2), tack.u16)
    assert np.dtype(a.dtype) == np.uint16
    assert np.empty(a.shape, a.dtype).dtype == np.uint16


@pytest.mark.parametrize("chunks", [(2, 3), (1, 6), (4, 6), "auto"])
def test_dask_reads_a_host_array_in_place(chunks):
    values = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = tack.array(values)
    x = da.from_array(a, chunks=chunks)
    assert x.dtype == np.float64 and x.shape == (4, 6)
    assert float(x.sum().compute()) == values.sum()
    # Every block is a NumPy view of the Tack array's own memory.
    view = np.asarray(a)
    for block in x.to_delayed().ravel():
        chunk = block.compute()
        assert isinstance(chunk, np.ndarray)
        assert np.shares_memory(chunk, view)
        offset = chunk.__array_interface__["data"][0] - a.ptr
        row, col = divmod(offset // 8, 6)
        np.testing.assert_array_equal(chunk, values[row:row + chunk.shape[0], col:col + chunk.shape[1]])


def test_a_dask_computation_writes_the_tack_array_it_read():
    a = tack.array(np.arange(12, dtype=np.float32).reshape(3, 4))

    def double_in_place(block):
        block *= 2  # the block is the array's memory: nothing was copied
        return block

    da.from_array(a, chunks=(1, 4)).map_blocks(double_in_place).compute()
    np.testing.assert_array_equal(a.to_numpy(), 2 * np.arange(12, dtype=np.float32).reshape(3, 4))


def test_dask_of_a_zero_dimensional_array():
    a = tack.array(np.float32(2.5))
    assert float(da.from_array(a).compute()) == 2.5
