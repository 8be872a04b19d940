"""DLPack between Tack and PyTorch (CPU tensors)."""

import gc
import weakref

import numpy as np
import pytest

import tack
from conftest import DTYPES, sample

torch = pytest.importorskip("torch", reason="PyTorch is not installed; pip install torch==2.13.0")

NAMES = [name for _, name, _, _ in DTYPES]


def torch_dtype(name):
    return getattr(torch, name)


class Dunder:
    """Hands out a tensor through __dlpack__ only, so the import takes the
    Python protocol rather than PyTorch's C exchange table."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


# tack.from_dlpack(tensor) may use PyTorch's __dlpack_c_exchange_api__;
# every import test runs both ways.
paths = pytest.mark.parametrize("via", [lambda t: t, Dunder], ids=["tensor", "dunder"])


def tensor(name, shape=(3, 4)):
    # PyTorch takes no ml_dtypes array: its bfloat16 is converted from float32.
    if name == "bfloat16":
        return torch.from_numpy(sample("float32", shape).copy()).to(torch.bfloat16)
    return torch.from_numpy(sample(name, shape).copy())


@paths
@pytest.mark.parametrize("name", NAMES)
def test_torch_to_tack_every_dtype_zero_copy(name, via):
    t = tensor(name)
    a = tack.from_dlpack(via(t))
    assert a.ptr == t.data_ptr()
    assert a.shape == (3, 4)
    assert a.dtype == name
    assert a.writable is True
    np.testing.assert_array_equal(a.to_numpy(), sample(name))

    a.fill(6)  # Tack writes, PyTorch sees them
    assert torch.equal(t, torch.full((3, 4), 6, dtype=torch_dtype(name)))
    t.fill_(2)  # PyTorch writes, Tack sees them
    np.testing.assert_array_equal(a.to_numpy(), np.full((3, 4), 2, name))


@pytest.mark.parametrize("name", NAMES)
def test_tack_to_torch_every_dtype_zero_copy(name):
    a = tack.array(sample(name))
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr
    assert t.dtype == torch_dtype(name)
    assert tuple(t.shape) == (3, 4)
    assert t.is_contiguous()
    assert t.device.type == "cpu"
    assert torch.equal(t, tensor(name))

    t[2, 3] = 77  # PyTorch writes, Tack sees them
    assert a.to_numpy()[2, 3] == np.array(77).astype(name)
    a.fill(1)  # Tack writes, PyTorch sees them
    assert torch.equal(t, torch.ones((3, 4), dtype=torch_dtype(name)))


def test_torch_legacy_capsule_both_ways():
    from torch.utils.dlpack import from_dlpack, to_dlpack

    t = torch.arange(5, dtype=torch.float64)
    a = tack.from_dlpack(to_dlpack(t))
    assert a.ptr == t.data_ptr()
    b = tack.array(np.arange(4, dtype=np.int32))
    u = from_dlpack(b.__dlpack__())
    assert u.data_ptr() == b.ptr
    assert u.tolist() == [0, 1, 2, 3]


@paths
@pytest.mark.parametrize("shape", [(), (1,), (6,), (2, 1, 3)])
def test_shapes_both_ways(shape, via):
    t = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
    a = tack.from_dlpack(via(t))
    assert a.shape == shape
    assert a.ptr == t.data_ptr()
    back = torch.from_dlpack(a)
    assert tuple(back.shape) == shape
    assert back.data_ptr() == t.data_ptr()


@paths
def test_torch_tensor_with_storage_offset(via):
    base = torch.arange(10, dtype=torch.int64)
    t = base[3:]
    a = tack.from_dlpack(via(t))
    assert a.ptr == t.data_ptr() == base.data_ptr() + 3 * 8
    np.testing.assert_array_equal(a.to_numpy(), np.arange(3, 10))


@pytest.mark.parametrize(
    "view",
    [lambda t: t.t(), lambda t: t[:, ::2], lambda t: t.flip(0)[::2]],
    ids=["transpose", "columns", "step"],
)
@paths
def test_torch_non_contiguous(view, via):
    backing = np.arange(24, dtype=np.float32)
    ref = weakref.ref(backing)
    t = view(torch.from_numpy(backing).reshape(4, 6))
    if t.is_contiguous():
        pytest.fail("the view was meant to be non-contiguous")
    with pytest.raises(ValueError):
        tack.from_dlpack(via(t))
    del t, backing
    gc.collect()
    assert ref() is None, "a refused tensor was never released"


@paths
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "complex32"])
def test_torch_dtype_without_equivalent_is_a_type_error(dtype, via):
    t = torch.zeros(3, dtype=getattr(torch, dtype))
    with pytest.raises(TypeError):
        tack.from_dlpack(via(t))


@paths
@pytest.mark.parametrize(
    "make", [lambda: torch.ones(3, requires_grad=True), lambda: torch.eye(3).to_sparse()], ids=["requires_grad", "sparse"]
)
def test_torch_refusals_match_pytorch(make, via):
    # What PyTorch refuses to export, Tack does not import by another route.
    t = make()
    with pytest.raises(BufferError):
        t.__dlpack__()
    with pytest.raises(BufferError):
        tack.from_dlpack(via(t))


@paths
def test_torch_source_may_be_dropped_at_once(via):
    a = tack.from_dlpack(via(torch.arange(50, dtype=torch.int32)))
    gc.collect()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(50))


def test_round_trip_tack_numpy_tack_torch():
    a = tack.array(sample("float64"))
    n = np.from_dlpack(a)
    b = tack.from_dlpack(n)
    t = torch.from_dlpack(b)
    assert n.ctypes.data == b.ptr == t.data_ptr() == a.ptr
    t.mul_(2)
    np.testing.assert_array_equal(a.to_numpy(), sample("float64") * 2)
    np.testing.assert_array_equal(n, sample("float64") * 2)


def test_round_trip_torch_tack_numpy_tack_torch():
    t = torch.arange(12, dtype=torch.int16).reshape(3, 4)
    a = tack.from_dlpack(t)
    n = np.from_dlpack(a)
    b = tack.from_dlpack(n)
    u = torch.from_dlpack(b.reshape(12))
    assert u.data_ptr() == b.ptr == n.ctypes.data == a.ptr == t.data_ptr()
    u[0] = 1000
    assert t[0, 0].item() == 1000


def test_reshape_view_exports_to_torch():
    a = tack.zeros(12, tack.f32)
    t = torch.from_dlpack(a.reshape(2, 2, 3))
    assert tuple(t.shape) == (2, 2, 3)
    assert t.stride() == (6, 3, 1)
    assert t.data_ptr() == a.ptr


def test_tack_read_only_export_to_torch_keeps_the_address():
    # PyTorch has no read-only tensors and ignores the flag; the exchange
    # must still share the memory.
    backing = sample("float32")
    ro = tack.array_from_ptr(backing.ctypes.data, tack.f32, (3, 4))
    t = torch.from_dlpack(ro)
    assert t.data_ptr() == backing.ctypes.data
    assert torch.equal(t, torch.from_numpy(backing))


# PyTorch's lazy conjugation and negation: torch.conj(x) of a complex
# tensor, and a negative-bit view (torch._neg_view, torch.conj(x).imag),
# keep the values from before the operation in memory and mark the tensor
# with a bit a DLPack tensor cannot carry. PyTorch's C exchange table
# exports them as stored; Tack refuses them, as PyTorch's own __dlpack__
# refuses the conjugate bit, whichever way the import goes.
LAZY = {
    "conj": lambda: torch.conj(torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)),
    "conj-c128-detached": lambda: torch.conj(torch.tensor([1 + 2j], dtype=torch.complex128)).detach(),
    "neg-f32": lambda: torch._neg_view(torch.arange(4, dtype=torch.float32)),
    "neg-c64": lambda: torch._neg_view(torch.tensor([1 + 2j], dtype=torch.complex64)),
    "neg-i64": lambda: torch._neg_view(torch.arange(4, dtype=torch.int64)),
    "conj-imag": lambda: torch.conj(torch.tensor([1 + 2j], dtype=torch.complex64)).imag,
}


@pytest.mark.parametrize("import_", [tack.from_dlpack, tack.asarray], ids=["from_dlpack", "asarray"])
@pytest.mark.parametrize("kind", LAZY)
def test_torch_lazy_bits_are_a_buffer_error(kind, import_):
    t = LAZY[kind]()
    assert t.is_conj() or t.is_neg(), "the tensor was meant to carry a lazy bit"
    with pytest.raises(BufferError, match="resolve_conj" if t.is_conj() else "resolve_neg"):
        import_(t)
    resolved = t.resolve_conj().resolve_neg()
    a = import_(resolved)
    assert a.ptr == resolved.data_ptr()
    np.testing.assert_array_equal(a.to_numpy(), resolved.numpy())


@pytest.mark.parametrize("kind", ["conj", "conj-c128-detached"])
def test_torch_conjugate_bit_is_refused_through_dunder_too(kind):
    with pytest.raises(BufferError):
        tack.from_dlpack(Dunder(LAZY[kind]()))


def test_torch_lazy_bit_refusal_releases_the_tensor():
    # The table's export is deleted on refusal: nothing keeps the memory.
    backing = np.arange(6, dtype=np.float32)
    ref = weakref.ref(backing)
    t = torch._neg_view(torch.from_numpy(backing))
    with pytest.raises(BufferError):
        tack.from_dlpack(t)
    del t, backing
    gc.collect()
    assert ref() is None, "a refused tensor was never released"


def test_torch_lazy_bits_refused_as_kernel_arguments():
    k = tack.Kernel("void k(tack_index i, float *y) { y[i] = 1; }")
    t = torch._neg_view(torch.zeros(4))
    with pytest.raises(BufferError):
        k.launch(4, t)
    assert torch.equal(t.resolve_neg(), torch.zeros(4))


def test_torch_plain_tensor_still_takes_the_table():
    # The bits are read as well, yet a tensor without them is imported
    # through the table, zero-copy, and its __dlpack__ is never called;
    # the conjugate bit is asked of complex tensors only.
    calls = []

    class Sub(torch.Tensor):
        def __dlpack__(self, **kwargs):
            calls.append("__dlpack__")
            return torch.Tensor.__dlpack__(self.as_subclass(torch.Tensor), **kwargs)

        def is_conj(self):
            calls.append("is_conj")
            return torch.Tensor.is_conj(self)

        def is_neg(self):
            calls.append("is_neg")
            return torch.Tensor.is_neg(self)

    real = torch.arange(4, dtype=torch.float32).as_subclass(Sub)
    complex_ = torch.zeros(4, dtype=torch.complex64).as_subclass(Sub)
    calls.clear()
    assert tack.from_dlpack(real).ptr == real.data_ptr()
    assert calls == ["is_neg"]
    calls.clear()
    assert tack.from_dlpack(complex_).ptr == complex_.data_ptr()
    assert calls == ["is_conj", "is_neg"]
