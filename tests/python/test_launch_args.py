"""Python's scalars reach a kernel as the values they are: the launch's
refusal of a float whose bits are an integer field's (a C caller's slip,
tack_arg in <tack/kernel.h>) never refuses a Python float, the smallest
subnormals included."""

import struct

import pytest

import tack


@pytest.mark.parametrize("dtype, ctype, values", [
    (tack.f64, "double", [5e-324, 1.5e-323, 2.1e-314, -5e-324, float("nan"), 1.0]),
    (tack.f32, "float", [1e-45, 9e-41, -1e-45, 1.0]),
])
def test_subnormal_scalars_reach_the_kernel(dtype, ctype, values):
    k = tack.Kernel(f"void put(tack_index i, {ctype} v, {ctype} *y) {{ y[i] = v; }}")
    fmt = "d" if ctype == "double" else "f"
    for v in values:
        y = tack.zeros(1, dtype)
        k(v, y)
        got = memoryview(y).cast("B").cast(fmt)[0]
        assert struct.pack(fmt, got) == struct.pack(fmt, v), (v, got)
