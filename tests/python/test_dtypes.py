"""bool, float16, bfloat16, complex64 and complex128: creation, element
values, host copies and the exchange paths, against NumPy, ml_dtypes and
PyTorch.

The zero-copy DLPack round trips of every dtype with NumPy and PyTorch are
in test_dlpack_numpy.py and test_dlpack_torch.py, pickling in
test_pickle_copy.py and printing in test_repr_errors.py (all parametrized
over conftest.DTYPES); this file holds what is particular to these five.
"""

import copy
import gc
import hashlib
import math
import os
import pickle
import platform
import shutil
import struct
import subprocess
import sys
import textwrap
import weakref
from fractions import Fraction

import numpy as np
import pytest

import tack
from conftest import capsule_tensor, ml_dtypes
from cudasim import run
from exchange_table import TACK, delete, versioned

torch = pytest.importorskip("torch", reason="PyTorch is not installed; pip install torch==2.13.0")
needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed (requirements-dev.txt)")

# short name, NumPy's name, DLPack (code, bits), itemsize, buffer format, typestr
NEW = [
    ("bool", "bool", (6, 8), 1, "?", "|b1"),
    ("f16", "float16", (2, 16), 2, "e", "<f2"),
    ("bf16", "bfloat16", (4, 16), 2, None, "<V2"),
    ("c64", "complex64", (5, 64), 8, "Zf", "<c8"),
    ("c128", "complex128", (5, 128), 16, "Zd", "<c16"),
]
NEW_IDS = [row[1] for row in NEW]
NUMPY_NEW = [row for row in NEW if row[1] != "bfloat16"]


def live():
    return dict(tack._tack.live_counts())


def bits16(a):
    """The stored bits of a float16 or bfloat16 array, read by PyTorch."""
    return [v & 0xFFFF for v in torch.from_dlpack(a).reshape(-1).view(torch.int16).tolist()]


def raw(a):
    """The stored bytes of an array, read by PyTorch."""
    return bytes(torch.from_dlpack(a).reshape(-1).view(torch.uint8).tolist())


def filled(dtype, value):
    a = tack.zeros(1, dtype)
    a.fill(value)
    return a


# --------------------------------------------------------------------------
# the dtypes themselves


@pytest.mark.parametrize("short, name, code_bits, size, fmt, typestr", NEW, ids=NEW_IDS)
def test_names_codes_and_sizes(short, name, code_bits, size, fmt, typestr):
    d = getattr(tack, short)
    assert isinstance(d, tack.DType) and d.name == name == str(d) and repr(d) == f"tack.{short}"
    assert d.itemsize == size
    assert d == name and d == short and d == getattr(torch, name) and tack.zeros(1, getattr(torch, name)).dtype == d
    for versioned_ in (None, (1, 0)):
        t = capsule_tensor(tack.zeros((2, 2), d).__dlpack__(max_version=versioned_)).dl_tensor
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (*code_bits, 1)
    assert pickle.loads(pickle.dumps(d)) is d and copy.deepcopy(d) is d


def test_bool_is_no_star_import_shadow():
    space = {}
    exec("from tack import *", space)
    assert "bool" not in space and "bf16" in space and tack.bool.name == "bool"


@pytest.mark.parametrize("short, name, code_bits, size, fmt, typestr", NUMPY_NEW, ids=NEW_IDS[:2] + NEW_IDS[3:])
def test_numpy_dtypes_name_them(short, name, code_bits, size, fmt, typestr):
    d = getattr(tack, short)
    assert np.dtype(d) == np.dtype(name) and tack.zeros(1, np.dtype(name)).dtype == d
    assert tack.zeros(1, getattr(np, name if name != "bool" else "bool_")).dtype == d


def test_creation_infers_the_new_dtypes():
    assert tack.array([True, False]).dtype == tack.bool
    assert tack.array([1 + 2j]).dtype == tack.c128
    assert tack.array(np.ones(3, np.complex64)).dtype == tack.c64
    assert tack.array(np.ones(3, np.float16)).dtype == tack.f16
    z = tack.zeros((2, 3), tack.c128)
    assert z.nbytes == 96 and (z.to_numpy() == 0).all() and z.to_numpy().dtype == np.complex128
    e = tack.empty(4, "bool")
    assert e.to_numpy().tolist() == [False] * 4


@pytest.mark.parametrize("short, name, code_bits, size, fmt, typestr", NEW, ids=NEW_IDS)
def test_host_copies_both_ways(short, name, code_bits, size, fmt, typestr):
    if name == "bfloat16" and not ml_dtypes:
        pytest.skip("NumPy has bfloat16 through ml_dtypes only")
    values = np.arange(6).reshape(2, 3).astype(name)
    if name.startswith("complex"):
        values = values + 1j * np.array([[1, 0, -1], [2, 0, 5]], name)
    a = tack.zeros((2, 3), short)
    a.from_numpy(values)
    back = a.to_numpy()
    assert back.dtype == values.dtype and (back == values).all() and back.ctypes.data != a.ptr
    as_torch = torch.from_numpy(values.astype(np.float32) if name == "bfloat16" else values)
    assert torch.equal(torch.from_dlpack(a), as_torch.to(getattr(torch, name)))
    for b in (tack.array(a), a.to_device("cpu"), tack.array(values)):  # copies through the host
        assert b.ptr != a.ptr and b.dtype is a.dtype and (b.to_numpy() == values).all()


# --------------------------------------------------------------------------
# element values: fill and kernel scalars


def nearest_even(v, mant, emin, emax):
    """The value of the binary format with `mant` stored significand bits
    and exponents emin..emax nearest v, ties to even: exact arithmetic,
    as a reference independent of the C code."""
    if v == 0 or math.isinf(v):
        return v
    x = Fraction(abs(v))
    e = math.frexp(abs(v))[1] - 1  # abs(v) = 1.f * 2**e
    step = Fraction(2) ** (max(e, emin) - mant)
    q = x / step
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2):
        n += 1
    r = n * step
    if r >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, v)
    return math.copysign(float(r), v)


def bf16_bits_of(value):
    # exact in float32, whose upper half bfloat16 is
    return int(np.array([value], np.float32).view(np.uint32)[0]) >> 16


def random_doubles(n, seed):
    """Doubles across both formats' ranges: random bits, and values near
    their boundaries (ties, the largest values, subnormals)."""
    rng = np.random.default_rng(seed)
    mantissas = rng.random(n) + 1.0
    exponents = rng.integers(-140, 130, n)
    values = [float(m * 2.0 ** int(e)) * (1 if i % 3 else -1) for i, (m, e) in enumerate(zip(mantissas, exponents))]
    for k in range(-24, 17):
        for frac in (1 + 2**-11, 1 + 2**-8, 1 + 3 * 2**-11, 1.5, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40):
            values.append(frac * 2.0**k)
    values += [65504.0, 65519.99, 65520.0, 2.0**-24, 2.0**-25, 1.5 * 2**-24, 3.3895313892515355e38,
               3.396e38, 2.0**-133, 2.0**-134, 5e-324, -0.0, 0.0, math.inf, -math.inf, 1e300, -1e300]
    return values


def test_float16_fill_rounds_as_numpy_bit_for_bit():
    values = random_doubles(3000, 1)
    a = tack.zeros(1, tack.f16)
    got = []
    for v in values:
        a.fill(v)
        got.append(bits16(a)[0])
    with np.errstate(over="ignore"):  # the values beyond float16's range are meant
        expected = np.array(values, np.float64).astype(np.float16).view(np.uint16).tolist()
    mismatched = [(v, hex(g), hex(e)) for v, g, e in zip(values, got, expected) if g != e]
    assert not mismatched, mismatched[:10]
    # And the exact reference agrees with both.
    for v in values[:500]:
        r = nearest_even(v, 10, -14, 15)
        assert np.float16(r).view(np.uint16) == bits16(filled(tack.f16, v))[0] or math.isnan(r)


def test_bfloat16_fill_is_one_correct_rounding_from_double():
    values = random_doubles(3000, 2)
    a = tack.zeros(1, tack.bf16)
    mismatched = []
    for v in values:
        a.fill(v)
        want = nearest_even(v, 7, -126, 127)
        want_bits = (0x7F80 if want > 0 else 0xFF80) if math.isinf(want) else bf16_bits_of(want)
        if bits16(a)[0] != want_bits:
            mismatched.append((v, hex(bits16(a)[0]), hex(want_bits)))
    assert not mismatched, mismatched[:10]


@needs_ml_dtypes
def test_bfloat16_matches_ml_dtypes_and_torch_where_they_round_once():
    # ml_dtypes and PyTorch round a double to float32 first; for a value a
    # float32 holds exactly they round once, and agree with Tack.
    values = [float(np.float32(v)) for v in random_doubles(2000, 3) if abs(v) < 3e38]
    a = tack.zeros(1, tack.bf16)
    got = []
    for v in values:
        a.fill(v)
        got.append(bits16(a)[0])
    ml = np.array(values, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).tolist()
    th = [b & 0xFFFF for b in torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).view(torch.int16).tolist()]
    assert got == ml == th
    # Where the double lies just above a bfloat16 tie, float32 turns it into
    # the tie, which goes to even: one rounding goes up, as it should.
    v = 1.00390625 + 2**-40
    assert bits16(filled(tack.bf16, v)) == [0x3F81]
    # ml_dtypes before 0.7 rounds a double through float32 too; 0.7 rounds
    # it once, as Tack does.
    once = tuple(int(x) for x in ml_dtypes.__version__.split(".")[:2]) >= (0, 7)
    assert np.array([v]).astype(ml_dtypes.bfloat16).view(np.uint16)[0] == (0x3F81 if once else 0x3F80)
    assert torch.tensor([v], dtype=torch.float64).to(torch.bfloat16).view(torch.int16).item() == 0x3F80
    # float16 from PyTorch rounds twice too; NumPy rounds once, as Tack does.
    w = 1 + 2**-11 + 2**-40
    assert bits16(filled(tack.f16, w)) == [0x3C01] == [int(np.float16(w).view(np.uint16))]
    assert torch.tensor([w], dtype=torch.float64).to(torch.float16).view(torch.int16).item() == 0x3C00


def test_nan_keeps_its_sign_and_stays_nan():
    assert bits16(filled(tack.f16, math.nan)) == [0x7E00] == [int(np.float16(math.nan).view(np.uint16))]
    assert bits16(filled(tack.f16, -math.nan)) == [0xFE00] == [int(np.float16(-math.nan).view(np.uint16))]
    assert bits16(filled(tack.bf16, math.nan)) == [0x7FC0]
    assert bits16(filled(tack.bf16, -math.nan)) == [0xFFC0]
    if ml_dtypes:
        assert np.array([math.nan, -math.nan]).astype(ml_dtypes.bfloat16).view(np.uint16).tolist() == [0x7FC0, 0xFFC0]
    # A signaling NaN's payload, whose top bits are 0, never becomes infinity.
    signaling = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]
    assert bits16(filled(tack.f16, signaling)) == [0x7C01]


@pytest.mark.parametrize("value", [0, 1, 2, -1, 0.0, 0.5, -0.0, math.nan, True, False, 1j, 0j, np.bool_(True),
                                   np.float32(0), np.int8(-3)])
def test_bool_fill_is_numpys_cast(value):
    assert filled(tack.bool, value).to_numpy()[0] == np.array(value).astype(bool)


@pytest.mark.parametrize("short", ["c64", "c128"])
@pytest.mark.parametrize("value", [1 + 2j, -3, 2.5, True, np.complex64(1 - 1j), np.float32(0.1), 1e300 + 1e-300j])
def test_complex_fill_is_numpys_cast(short, value):
    name = getattr(tack, short).name
    got = filled(short, value).to_numpy()
    with np.errstate(over="ignore"):  # 1e300 overflows complex64, to an infinity
        np.testing.assert_array_equal(got, np.array([value]).astype(name))


@pytest.mark.parametrize("short, value, exc", [
    ("bool", "yes", TypeError), ("bool", None, TypeError), ("bool", [1], TypeError),
    ("f16", 1j, TypeError), ("bf16", "1.0", TypeError), ("f16", 10**400, ValueError),
    ("c64", "1+2j", TypeError), ("c128", 10**400, ValueError), ("c64", None, TypeError),
])
def test_fill_refusals_change_nothing(short, value, exc):
    a = filled(short, 1)
    before = raw(a)
    with pytest.raises(exc):
        a.fill(value)
    assert raw(a) == before


# --------------------------------------------------------------------------
# the buffer protocol and the array interfaces


@pytest.mark.parametrize("short, name, code_bits, size, fmt, typestr", NUMPY_NEW, ids=NEW_IDS[:2] + NEW_IDS[3:])
def test_buffer_protocol_formats_and_typestrs(short, name, code_bits, size, fmt, typestr):
    a = tack.array(np.arange(6).reshape(2, 3).astype(name))
    m = memoryview(a)
    assert (m.format, m.itemsize, m.shape, m.readonly) == (fmt, size, (2, 3), False)
    assert fmt == memoryview(np.zeros(1, name)).format  # as NumPy spells it
    n = np.asarray(m)
    assert n.dtype == np.dtype(name) and n.ctypes.data == a.ptr
    m.release()
    ai = a.__array_interface__
    assert ai["typestr"] == typestr == np.dtype(name).str and ai["data"] == (a.ptr, False)
    # Each spelling comes back as the dtype, without a copy.
    b = tack.asarray(memoryview(np.zeros(4, name)))
    assert b.dtype == getattr(tack, short)


def test_memoryview_reads_bool_and_float16_elements():
    a = tack.array(np.array([True, False, True]))
    assert list(memoryview(a)) == [True, False, True]
    h = tack.array(np.array([1.5, -2.0], np.float16))
    assert struct.unpack("<2e", bytes(memoryview(h))) == (1.5, -2.0)
    struct.pack_into("<e", h, 2, 0.25)  # a writable buffer of float16s
    assert h.to_numpy().tolist() == [1.5, 0.25]


def test_bfloat16_has_no_buffer_format_and_no_array_interface():
    a = tack.zeros(4, tack.bf16)
    with pytest.raises(BufferError, match="no buffer-protocol format"):
        memoryview(a)
    with pytest.raises(AttributeError, match="'<V2'"):
        a.__array_interface__
    assert not hasattr(a, "__array_interface__")
    # Consumers that take bytes without a format still read them in place.
    a.fill(1.0)
    assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b"\x80\x3f" * 4).hexdigest()


@needs_ml_dtypes
def test_numpy_views_bfloat16_through_ml_dtypes_without_a_copy():
    a = tack.zeros((2, 3), tack.bf16)
    a.fill(2.5)
    n = np.asarray(a)
    assert n.dtype == ml_dtypes.bfloat16 and n.shape == (2, 3) and n.ctypes.data == a.ptr
    n[1, 2] = 7  # NumPy writes, Tack sees them
    assert bits16(a)[5] == bf16_bits_of(7.0)
    a.fill(-1)  # Tack writes, NumPy sees them
    assert (n == -1).all()
    # The view holds the memory once the array is gone.
    del a
    gc.collect()
    assert (n == -1).all()
    counts = live()
    del n
    gc.collect()
    assert live()["arrays"] < counts["arrays"]
    # A read-only array gives a read-only view.
    ro = tack.array_from_ptr(tack.zeros(3, tack.bf16).ptr, tack.bf16, 3)
    assert not np.asarray(ro).flags.writeable


@needs_ml_dtypes
def test_ml_dtypes_arrays_come_in_without_a_copy():
    n = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 3)
    # NumPy refuses bfloat16 to DLPack, as it does for every ml_dtypes type.
    with pytest.raises(BufferError):
        n.__dlpack__()
    a = tack.asarray(n)
    assert a.dtype == tack.bf16 and a.ptr == n.ctypes.data and a.shape == (2, 3) and a.writable
    a.fill(3)
    assert (n == 3).all()
    n.flags.writeable = False
    assert tack.asarray(n).writable is False
    # The array holds NumPy's memory once NumPy's array is gone.
    base = n.ctypes.data
    del n
    gc.collect()
    assert a.ptr == base and bits16(a) == [bf16_bits_of(3.0)] * 6
    # Copies: tack.array, from_numpy and to_numpy keep the type.
    m = np.array([1.5, -2.25], ml_dtypes.bfloat16)
    assert tack.array(m).dtype == tack.bf16 and bits16(tack.array(m)) == [0x3FC0, 0xC010]
    b = tack.zeros(2, tack.bf16)
    b.from_numpy(m)
    assert b.to_numpy().dtype == ml_dtypes.bfloat16 and (b.to_numpy() == m).all()
    assert (tack.array([1.5, -2.25], dtype=tack.bf16).to_numpy() == m).all()


def test_numpys_own_dlpack_refusals_stay_numpys():
    with pytest.raises(BufferError, match="longdouble"):
        tack.asarray(np.zeros(3, np.longdouble))


def test_a_dtype_numpy_lacks_through_dlpack_is_numpys_refusal():
    # NumPy's DLPack import knows no bfloat16: its own error, not a wrong type.
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        np.from_dlpack(tack.zeros(2, tack.bf16))


# --------------------------------------------------------------------------
# the C exchange table, both ways


@pytest.mark.parametrize("short, name, code_bits, size, fmt, typestr", NEW, ids=NEW_IDS)
def test_exchange_table_allocates_and_exports_every_new_dtype(short, name, code_bits, size, fmt, typestr):
    gc.collect()
    before = live()
    address, errors = TACK.allocate((2, 5), dtype=(*code_bits, 1))
    assert errors == [] and address
    t = versioned(address).dl_tensor
    assert (t.dtype.code, t.dtype.bits) == code_bits
    a = TACK.adopt(address)
    assert a.dtype == name and a.shape == (2, 5) and a.nbytes == 10 * size
    exported = TACK.export(a)
    e = versioned(exported).dl_tensor
    assert (e.dtype.code, e.dtype.bits, e.dtype.lanes) == (*code_bits, 1) and e.data == a.ptr
    delete(exported)
    del a
    gc.collect()
    assert live() == before


# --------------------------------------------------------------------------
# CUDA: the CUDA Array Interface's typestrs (simulated driver)


def test_cuda_array_interface_spells_the_new_dtypes(cuda_sim):
    run(cuda_sim, """
        d = tack.device("cuda")
        for short, typestr in [("bool", "|b1"), ("f16", "<f2"), ("bf16", "<V2"), ("c64", "<c8"), ("c128", "<c16")]:
            a = tack.zeros(3, getattr(tack, short), device=d)
            cai = a.__cuda_array_interface__
            assert cai["typestr"] == typestr, (short, cai)
            # As PyTorch spells bfloat16 ("<V2", ml_dtypes' dtype.str): it reads back as bfloat16.
            class Producer:
                __cuda_array_interface__ = cai
            b = tack.asarray(Producer())
            assert b.dtype == a.dtype and b.ptr == a.ptr and b.device is d
            assert tack.from_dlpack(a).dtype == a.dtype
        # NumPy's plain two-byte void is no dtype of Tack's.
        class Void:
            __cuda_array_interface__ = dict(tack.zeros(2, tack.bf16, device=d).__cuda_array_interface__,
                                            typestr="|V2")
        try:
            tack.asarray(Void())
            raise AssertionError("|V2 was taken")
        except TypeError as e:
            assert "no Tack dtype" in str(e)
    """)


# --------------------------------------------------------------------------
# kernels


KERNEL = """
void k(tack_index i, bool f, tack_f16 h, tack_bf16 b, tack_c64 z, tack_c128 w,
       const tack_f16 *hx, bool *fy, tack_f16 *hy, tack_bf16 *by, tack_c64 *zy, tack_c128 *wy, int32_t *native)
{
    fy[i] = f && (i % 2);
    hy[i] = tack_f16_from_float(tack_f16_to_float(hx[i]) * tack_f16_to_float(h));
    by[i] = tack_bf16_from_float(tack_bf16_to_float(b) + (float)i);
    zy[i] = z * (float)i;
    wy[i] = w + (double)i;
    native[0] = TACK_F16_NATIVE;
    native[1] = TACK_BF16_NATIVE;
}
"""


def run_new_dtype_kernel(variant):
    # `variant` makes the source new, so the kernel is built afresh.
    k = tack.Kernel(KERNEL + f"/* {variant} */\n")
    hx = tack.array(np.array([1, 2, 0.5, -4], np.float16))
    outs = [tack.zeros(4, d) for d in (tack.bool, tack.f16, tack.bf16, tack.c64, tack.c128)] + [tack.zeros(2, tack.i32)]
    k.launch(4, True, 1.5, 0.25, 1 - 2j, 2 + 0.5j, hx, *outs)
    return [torch.from_dlpack(o).tolist() for o in outs], outs[-1].to_numpy().tolist()


def compiler_has(cc, macro):
    # Tack builds CPU kernels for this CPU (-march=native on x86-64 and
    # AArch64), where Clang 14 has _Float16 with AVX512-FP16 alone.
    native = ["-march=native"] if platform.machine() in ("x86_64", "aarch64") else []
    out = subprocess.run([cc, *native, "-dM", "-E", "-"], input="", capture_output=True, text=True).stdout
    return f"#define {macro} " in out


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_new_dtype_kernels_give_the_same_bits_native_or_not(cc, monkeypatch):
    if not shutil.which(cc):
        pytest.skip(f"{cc} is not installed")
    monkeypatch.setenv("TACK_CC", cc)
    values, native = run_new_dtype_kernel(cc)
    # The prelude uses the compiler's own half types exactly where it has them.
    assert native == [int(compiler_has(cc, "__FLT16_MAX__")), int(compiler_has(cc, "__BFLT16_MAX__"))]
    assert values[0] == [False, True, False, True]
    assert values[1] == [1.5, 3.0, 0.75, -6.0]
    assert values[2] == [0.25, 1.25, 2.25, 3.25]
    assert values[3] == [0j, 1 - 2j, 2 - 4j, 3 - 6j]
    assert values[4] == [2 + 0.5j, 3 + 0.5j, 4 + 0.5j, 5 + 0.5j]


def test_kernel_scalars_are_checked_like_c_arguments():
    k = tack.Kernel("void k(tack_index i, bool f, tack_bf16 b, tack_c64 z, tack_bf16 *y) { y[i] = b; }")
    y = tack.zeros(1, tack.bf16)
    k(True, 0.1, 1j, y)
    assert bits16(y) == [bf16_bits_of(nearest_even(0.1, 7, -126, 127))]
    k(np.True_, 1, 2, y)
    k(0, 1.0, 1.5, y)
    for args, exc, says in [
        ((2, 0.1, 1j, y), ValueError, "out of range for bool"),
        ((1.0, 0.1, 1j, y), TypeError, "expected a bool"),
        (("yes", 0.1, 1j, y), TypeError, "expected a bool"),
        ((True, 1j, 1j, y), TypeError, "expected a real number"),
        ((True, 0.1, "1j", y), TypeError, "complex64"),
        ((True, tack.zeros(1, tack.bf16), 1j, y), TypeError, "parameter 'b'"),
    ]:
        with pytest.raises(exc, match=says):
            k(*args)
    with pytest.raises(TypeError, match="parameter 'y'.*bfloat16.*float16"):
        k(True, 0.1, 1j, tack.zeros(1, tack.f16))


@pytest.mark.parametrize("src, backend, dtype", [
    ("void k(tack_index i, tack_c64 *y) { }", "cuda", "complex64"),
    ("void k(tack_index i, double _Complex z, double *y) { }", "hip", "complex128"),
    ("void k(tack_index i, const float _Complex *x, float *y) { }", "level_zero", "complex64"),
    ("void k(tack_index i, bool b, float *y) { }", "level_zero", "bool"),
])
def test_a_dtype_the_backends_compiler_lacks_is_a_type_error_naming_it(src, backend, dtype):
    k = tack.Kernel(src)
    with pytest.raises(TypeError, match=rf"{dtype}.*on the {backend} backend"):
        k.generated_source(backend)
    assert "tack_kernel_entry" in k.generated_source("cpu")


def test_half_types_on_every_backend_generate():
    k = tack.Kernel("void k(tack_index i, tack_f16 a, const tack_bf16 *x, tack_f16 *y) { }")
    assert "typedef __half tack_f16;" in k.generated_source("cuda")
    assert "typedef __hip_bfloat16 tack_bf16;" in k.generated_source("hip")
    assert "typedef half tack_f16;" in k.generated_source("level_zero")
    assert [p[1] for p in k.params] == [tack.f16, tack.bf16, tack.f16]


# hipRTC compiles without a GPU when told the architecture: ROCm's own
# (Debian's libamdhip64-5 carries it) checks the HIP source Tack generates,
# which the simulated hipRTC does not compile.
HIPRTC_CHILD = r"""
import ctypes, sys
for name in ("libhiprtc.so", "libhiprtc.so.6", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"):
    try:
        lib = ctypes.CDLL(name)
        lib.hiprtcCreateProgram
        break
    except (OSError, AttributeError):
        lib = None
if lib is None:
    print("no hipRTC")
    sys.exit(0)
for path in sys.argv[1:]:
    prog = ctypes.c_void_p()
    assert lib.hiprtcCreateProgram(ctypes.byref(prog), open(path, "rb").read(), b"kernel.hip", 0, None, None) == 0
    opts = (ctypes.c_char_p * 2)(b"-O3", b"--gpu-architecture=gfx906")
    r = lib.hiprtcCompileProgram(prog, 2, opts)
    n = ctypes.c_size_t()
    lib.hiprtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value + 1)
    lib.hiprtcGetProgramLog(prog, log)
    size = ctypes.c_size_t()
    lib.hiprtcGetCodeSize(prog, ctypes.byref(size))
    print(path, r, size.value, log.value.decode(errors="replace")[:2000])
"""


def test_the_hip_source_compiles_with_a_real_hiprtc(tmp_path):
    sources = {
        "halves": "void k(tack_index i, bool f, tack_f16 a, const tack_bf16 *x, tack_f16 *y, bool *z) {\n"
                  "    float v = tack_f16_to_float(a) * tack_bf16_to_float(x[i]);\n"
                  "    y[i] = tack_f16_from_float(v) + a; /* __half's own arithmetic */\n"
                  "    z[i] = f && tack_bf16_to_float(tack_bf16_from_float(v)) > 0.0f;\n}\n",
        "integers": "void k(tack_index i, int8_t a, const uint8_t *b, int16_t *c, const uint16_t *d, int32_t *e,\n"
                    "       const uint32_t *f, int64_t *g, const uint64_t *h, float *p, const double *q) {\n"
                    "    c[i] = (int16_t)(a + b[i] + d[i]); e[i] = (int32_t)f[i]; g[i] = (int64_t)h[i] + i;\n"
                    "    p[i] = (float)q[i];\n}\n",
    }
    paths = []
    for name, src in sources.items():
        path = tmp_path / f"{name}.hip"
        path.write_text(tack.Kernel(src).generated_source("hip"))
        paths.append(str(path))
    r = subprocess.run([sys.executable, "-c", HIPRTC_CHILD, *paths], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if r.stdout.strip() == "no hipRTC":
        pytest.skip("no hipRTC here (Debian: apt-get install libamdhip64-dev)")
    for line in r.stdout.strip().splitlines():
        path, status, size, *log = line.split(" ", 3)
        assert status == "0" and int(size) > 0, line


# ocloc is Intel's and absent here, but Clang compiles OpenCL C 2.0 for
# SPIR too: the Level Zero source is checked for a device with
# cl_khr_fp16 (tack_f16 is half) and one without (the struct).
@pytest.mark.parametrize("fp16", ["+cl_khr_fp16", "-cl_khr_fp16"])
def test_the_level_zero_source_compiles_as_opencl_c(fp16, tmp_path):
    if not shutil.which("clang"):
        pytest.skip("clang is not installed")
    src = ("void k(tack_index i, tack_f16 a, const tack_bf16 *x, tack_f16 *y, uint8_t *z) {\n"
           "    float v = tack_f16_to_float(a) * tack_bf16_to_float(x[i]);\n"
           "    y[i] = tack_f16_from_float(v);\n"
           "    z[i] = tack_bf16_to_float(tack_bf16_from_float(v)) > 0.0f;\n}\n")
    path = tmp_path / "kernel.cl"
    path.write_text(tack.Kernel(src).generated_source("level_zero"))
    flags = ["clang", "-x", "cl", "-cl-std=CL2.0", "-target", "spir64", "-Xclang", "-finclude-default-header",
             "-Xclang", f"-cl-ext={fp16},+cl_khr_fp64", str(path)]
    r = subprocess.run(flags + ["-fsyntax-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    pre = subprocess.run(flags + ["-E"], capture_output=True, text=True, timeout=120).stdout
    assert ("typedef half tack_f16;" in pre) == (fp16 == "+cl_khr_fp16")


# --------------------------------------------------------------------------
# pickle and copy


@pytest.mark.parametrize("short, name, code_bits, size, fmt, typestr", NEW, ids=NEW_IDS)
def test_pickle_and_copy_keep_the_bits(short, name, code_bits, size, fmt, typestr):
    a = tack.zeros((2, 3), short)
    a.fill(1 + 1j if name.startswith("complex") else 1)
    before = raw(a)
    for b in (pickle.loads(pickle.dumps(a, protocol=2)), pickle.loads(pickle.dumps(a, protocol=5)),
              copy.copy(a), copy.deepcopy(a)):
        assert b.dtype is a.dtype and b.shape == a.shape and b.ptr != a.ptr
        assert raw(b) == before
    # Protocol 5 hands the memory itself out of band, bfloat16 too.
    buffers = []
    data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and len(data) < 300
    view = buffers[0].raw()
    assert view.nbytes == a.nbytes and np.frombuffer(view, np.uint8).ctypes.data == a.ptr
    back = pickle.loads(data, buffers=buffers)
    assert raw(back) == before


# --------------------------------------------------------------------------
# without ml_dtypes


def test_without_ml_dtypes_bfloat16_still_crosses_and_numpy_says_what_is_missing():
    code = textwrap.dedent("""
        import sys
        sys.modules["ml_dtypes"] = None  # as if it were not installed
        import pickle
        import numpy as np, torch, tack

        a = tack.zeros(3, tack.bf16)
        a.fill(2.5)
        def refused(call, exc, words):
            try:
                call()
            except exc as e:
                assert words in str(e), str(e)
                return e
            raise AssertionError(f"{call} was not refused")
        for call in (lambda: np.asarray(a), lambda: a.to_numpy(), lambda: np.dtype(tack.bf16),
                     lambda: tack.bf16.numpy, lambda: tack.array([1.0], tack.bf16),
                     lambda: a.from_numpy(np.zeros(3))):
            e = refused(call, TypeError, "pip install ml-dtypes")
            assert isinstance(e.__cause__, ImportError)
        refused(lambda: memoryview(a), BufferError, "no buffer-protocol format")
        # NumPy's own refusals are still NumPy's, about its own dtype.
        e = refused(lambda: tack.asarray(np.zeros(3, np.longdouble)), BufferError, "longdouble")
        assert "bfloat16" not in str(e)
        assert "values not shown" in repr(a) and "ml-dtypes" in repr(a) and "bfloat16" in repr(a)
        # The other dtypes need no ml_dtypes.
        assert np.asarray(tack.zeros(2, tack.f16)).dtype == np.float16
        # PyTorch has bfloat16: zero-copy both ways, and pickling, still work.
        t = torch.from_dlpack(a)
        assert t.dtype == torch.bfloat16 and t.data_ptr() == a.ptr and t.tolist() == [2.5] * 3
        u = torch.full((2,), -1.5, dtype=torch.bfloat16)
        b = tack.from_dlpack(u)
        assert b.ptr == u.data_ptr() and b.dtype is tack.bf16
        assert torch.from_dlpack(pickle.loads(pickle.dumps(a, protocol=5))).tolist() == [2.5] * 3
        assert "ml_dtypes" not in sys.modules or sys.modules["ml_dtypes"] is None
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


# --------------------------------------------------------------------------
# from_dlpack(copy=True): Tack copies what its zero-copy import reads, so
# bfloat16 (which NumPy's from_dlpack lacks) copies like the others.

COPIED = {
    "bf16": ([1.5, -2.25, 3.0, 0.0], torch.bfloat16, np.int16),
    "f16": ([1.5, -2.25, 3.0, 0.0], torch.float16, np.float16),
    "c64": ([1 + 2j, -3.5j, 0, 4], torch.complex64, np.complex64),
    "bool": ([True, False, True, True], torch.bool, np.bool_),
}


def torch_over_numpy(short):
    """A PyTorch tensor over a NumPy array's memory, and a weak reference
    to that array: it dies only once every PyTorch reference to the
    storage (a DLPack export's included) is gone."""
    values, dtype, backing_dtype = COPIED[short]
    expected = torch.tensor(values).to(dtype)
    # bfloat16 by its bits: NumPy has no bfloat16 of its own.
    backing = expected.view(torch.int16).numpy().copy() if short == "bf16" else expected.numpy().copy()
    assert backing.dtype == backing_dtype
    t = torch.from_numpy(backing)
    if short == "bf16":
        t = t.view(torch.bfloat16)
    return t, expected, weakref.ref(backing)


@pytest.mark.parametrize("short", COPIED)
def test_copy_true_from_torch_is_tacks_own_copy(short):
    t, expected, backing = torch_over_numpy(short)
    a = tack.from_dlpack(t, copy=True)
    assert a.dtype == getattr(tack, short) and a.shape == (4,) and a.writable
    assert a.ptr != t.data_ptr()
    assert torch.equal(torch.from_dlpack(a), expected)
    # Neither sees the other's writes.
    a.fill(0)
    assert torch.equal(t, expected)
    t.copy_(torch.ones(4).to(t.dtype))
    assert torch.equal(torch.from_dlpack(a), torch.zeros(4).to(t.dtype))
    # The producer's export was released with the import: the copy does
    # not hold PyTorch's storage.
    del t
    gc.collect()
    assert backing() is None, "the copy kept PyTorch's tensor alive"


@pytest.mark.parametrize("short", COPIED)
def test_copy_true_from_tack_is_a_new_array(short):
    _, expected, _ = torch_over_numpy(short)
    src = tack.zeros(4, getattr(tack, short))
    torch.from_dlpack(src).copy_(expected)
    gc.collect()
    before = dict(tack._tack.live_counts())
    b = tack.from_dlpack(src, copy=True)
    assert b is not src and b.ptr != src.ptr and b.dtype == src.dtype
    assert torch.equal(torch.from_dlpack(b), expected)
    # The export the copy read from is gone: its deleter ran.
    assert dict(tack._tack.live_counts())["exports"] == before["exports"]
    b.fill(0)
    assert torch.equal(torch.from_dlpack(src), expected)
    src.fill(1)
    assert torch.equal(torch.from_dlpack(b), torch.zeros(4).to(expected.dtype))


def test_copy_true_of_a_capsule_copies_bfloat16():
    src = tack.zeros(3, tack.bf16)
    src.fill(2.5)
    b = tack.from_dlpack(src.__dlpack__(max_version=(1, 0)), copy=True)
    assert b.dtype == tack.bf16 and b.ptr != src.ptr
    assert torch.from_dlpack(b).tolist() == [2.5] * 3


def test_copy_true_of_strided_torch_memory_still_copies():
    # The zero-copy import refuses strides; the copy reads them through NumPy.
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    a = tack.from_dlpack(t, copy=True)
    assert a.shape == (4, 3)
    np.testing.assert_array_equal(a.to_numpy(), t.numpy())
    # Strided bfloat16 has neither route: the import's refusal says why.
    with pytest.raises(ValueError, match="contiguous"):
        tack.from_dlpack(t.to(torch.bfloat16), copy=True)


def test_copy_true_of_device_memory(cuda_sim):
    # A CUDA array copies through the host, after its queued launches, onto
    # device= or the default device.
    run(cuda_sim, """
        d = tack.device("cuda")
        src = tack.zeros(3, tack.bf16, device=d)
        src.fill(1.5)
        host = tack.from_dlpack(src, copy=True)
        import torch
        assert host.device.backend == "cpu" and host.dtype == tack.bf16
        assert torch.from_dlpack(host).tolist() == [1.5] * 3
        same = tack.from_dlpack(src, copy=True, device=d)
        assert same.device is d and same.ptr != src.ptr and same.dtype == tack.bf16
        src.fill(0)
        assert torch.from_dlpack(tack.from_dlpack(same, copy=True)).tolist() == [1.5] * 3
        assert torch.from_dlpack(tack.from_dlpack(src, copy=True)).tolist() == [0.0] * 3
        print("ok")
    """)
