"""tack.interop.vtk against real VTK arrays: zero-copy both ways, lifetimes,
layout errors, and the errors when VTK lacks dlpack_support.

The PyPI vtk wheel has no vtkmodules.util.dlpack_support; when it is absent
the tests install the test-only provider in vtk_dlpack_provider.py (over the
same wheel) for the duration of each test. The Level Zero context guard is
tested in test_vtk_level_zero.py.
"""

import gc
import importlib.util
import sys

import numpy as np
import pytest

vtk_core = pytest.importorskip("vtkmodules.vtkCommonCore", reason="VTK is not installed (pip install vtk)")
from vtkmodules.util import numpy_support  # noqa: E402
from vtkmodules.vtkCommonDataModel import vtkImageData  # noqa: E402

import tack  # noqa: E402
import vtk_dlpack_provider as provider  # noqa: E402
from conftest import live_counts, sample  # noqa: E402
from tack.interop import vtk as tvtk  # noqa: E402
from vtk_arrays import SUPPORT, install, make_vtk, vtk_address, vtk_values  # noqa: E402

WHEEL_HAS_SUPPORT = importlib.util.find_spec(SUPPORT) is not None

# Every VTK array class whose element type Tack has, with that type.
VTK_CLASSES = [
    ("vtkSignedCharArray", "int8"),
    ("vtkUnsignedCharArray", "uint8"),
    ("vtkShortArray", "int16"),
    ("vtkUnsignedShortArray", "uint16"),
    ("vtkIntArray", "int32"),
    ("vtkUnsignedIntArray", "uint32"),
    ("vtkLongLongArray", "int64"),
    ("vtkUnsignedLongLongArray", "uint64"),
    ("vtkIdTypeArray", "int64"),
    ("vtkFloatArray", "float32"),
    ("vtkDoubleArray", "float64"),
]
DTYPE_NAMES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


@pytest.fixture
def support(monkeypatch):
    """VTK's dlpack_support: the wheel's own when it has one, else the provider."""
    if WHEEL_HAS_SUPPORT:
        yield importlib.import_module(SUPPORT)
        return
    provider.reset()
    install(monkeypatch, provider)
    yield provider
    provider.reset()


@pytest.fixture
def absent(monkeypatch):
    """A VTK without dlpack_support."""
    install(monkeypatch, None)


def vtk_dtype(vtk_array):
    return np.dtype(numpy_support.get_vtk_to_numpy_typemap()[vtk_array.GetDataType()])


def watch_deletion(vtk_object):
    """A list that gains an entry when VTK destroys vtk_object."""
    deleted = []
    vtk_object.AddObserver("DeleteEvent", lambda obj, event: deleted.append(event))
    return deleted


def scribble(nbytes, rounds=8):
    """Allocates and fills memory of about nbytes, so freed memory is reused."""
    keep = []
    for r in range(rounds):
        a = vtk_core.vtkUnsignedCharArray()
        a.SetNumberOfValues(nbytes)
        a.Fill(0xA5 + r)
        keep.append(a)
        keep.append(np.full(nbytes, 0x5A, np.uint8))
    return keep


# --------------------------------------------------------------------------
# VTK -> Tack


@pytest.mark.parametrize("components", [1, 3])
@pytest.mark.parametrize("class_name, dtype", VTK_CLASSES)
def test_vtk_to_array_every_dtype_zero_copy(support, class_name, dtype, components):
    values = sample(dtype, (4, components))
    v = make_vtk(class_name, values if components > 1 else values[:, 0])
    a = tvtk.vtk_to_array(v)
    assert a.dtype == dtype
    assert a.shape == ((4,) if components == 1 else (4, components))
    assert a.ptr == vtk_address(v)
    assert a.device == tack.device("cpu")
    assert a.writable
    np.testing.assert_array_equal(a.to_numpy().ravel(), values.ravel())


@pytest.mark.parametrize("class_name, dtype", VTK_CLASSES)
def test_writes_to_an_imported_vtk_array_are_seen_both_ways(support, class_name, dtype):
    values = sample(dtype, (5, 2))
    v = make_vtk(class_name, values)
    a = tvtk.vtk_to_array(v)
    replacement = (values[::-1] + 1).astype(dtype)
    a.from_numpy(replacement)
    assert vtk_values(v) == replacement.ravel().tolist()
    v.SetValue(3, 42)
    seen = a.to_numpy()
    assert seen[1, 1] == 42
    assert seen.ravel().tolist()[:3] == replacement.ravel().tolist()[:3]


@pytest.mark.parametrize("components", [1, 3])
def test_flatten_gives_the_interleaved_values(support, components):
    values = sample("float32", (6, components))
    v = make_vtk("vtkFloatArray", values)
    flat = tvtk.vtk_to_array(v, flatten=True)
    assert flat.shape == (6 * components,)
    assert flat.ptr == vtk_address(v)
    np.testing.assert_array_equal(flat.to_numpy(), values.ravel())
    flat.fill(2.5)
    assert vtk_values(v) == [2.5] * (6 * components)


def test_vtk_to_array_keeps_components_when_they_are_not_one(support):
    v = make_vtk("vtkDoubleArray", sample("float64", (4, 9)))
    assert tvtk.vtk_to_array(v).shape == (4, 9)
    one = make_vtk("vtkDoubleArray", sample("float64", (4, 1)))
    assert tvtk.vtk_to_array(one).shape == (4,)


def test_an_empty_vtk_array_gives_an_empty_array(support):
    v = vtk_core.vtkFloatArray()
    v.SetNumberOfComponents(3)
    assert tvtk.vtk_to_array(v).shape == (0, 3)
    assert tvtk.vtk_to_array(v, flatten=True).shape == (0,)


def test_vtk_bit_arrays_are_refused(support):
    bits = vtk_core.vtkBitArray()
    bits.SetNumberOfValues(8)
    with pytest.raises(TypeError):
        tvtk.vtk_to_array(bits)


@pytest.mark.parametrize("flatten", [False, True])
def test_the_vtk_array_may_be_dropped_while_the_tack_array_lives(support, flatten):
    n = 1 << 14
    values = np.arange(n * 2, dtype=np.float64)
    v = vtk_core.vtkDoubleArray()
    v.SetNumberOfComponents(2)
    v.SetNumberOfTuples(n)
    np.frombuffer(v, np.float64)[:] = values
    deleted = watch_deletion(v)
    a = tvtk.vtk_to_array(v, flatten=flatten)
    address = a.ptr
    del v
    gc.collect()
    assert deleted == [], "VTK destroyed the array while Tack still uses its memory"
    junk = scribble(values.nbytes)
    assert a.ptr == address
    np.testing.assert_array_equal(a.to_numpy().ravel(), values)
    del junk
    del a
    gc.collect()
    assert deleted == ["DeleteEvent"], "VTK's array outlived the last Tack array over it"


def test_an_array_held_by_a_vtk_dataset_outlives_its_python_wrapper(support):
    image = vtkImageData()
    image.SetDimensions(4, 3, 2)
    scalars = make_vtk("vtkFloatArray", np.arange(24, dtype=np.float32))
    image.GetPointData().SetScalars(scalars)
    del scalars
    a = tvtk.vtk_to_array(image.GetPointData().GetScalars())
    deleted = watch_deletion(image.GetPointData().GetScalars())
    del image
    gc.collect()
    assert deleted == []
    np.testing.assert_array_equal(a.to_numpy(), np.arange(24, dtype=np.float32))
    del a
    gc.collect()
    assert deleted == ["DeleteEvent"]


# --------------------------------------------------------------------------
# Tack -> VTK


@pytest.mark.parametrize("components", [1, 3])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_array_to_vtk_every_dtype_zero_copy(support, dtype, components):
    values = sample(dtype, (4, components))
    a = tack.array(values if components > 1 else values[:, 0])
    v = tvtk.array_to_vtk(a)
    assert vtk_dtype(v) == np.dtype(dtype)
    assert v.GetNumberOfTuples() == 4
    assert v.GetNumberOfComponents() == components
    assert vtk_address(v) == a.ptr
    assert vtk_values(v) == values.ravel().tolist()


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_writes_to_an_exported_array_are_seen_both_ways(support, dtype):
    a = tack.array(sample(dtype, (3, 2)))
    v = tvtk.array_to_vtk(a)
    a.fill(9)
    assert vtk_values(v) == [9] * 6
    v.SetValue(4, 17)
    assert a.to_numpy().ravel().tolist() == [9, 9, 9, 9, 17, 9]


def test_the_tack_array_may_be_dropped_while_the_vtk_array_lives(support):
    base = live_counts()
    values = np.linspace(-1.0, 1.0, 3 * 4096)
    a = tack.array(values.reshape(4096, 3))
    v = tvtk.array_to_vtk(a)
    address = a.ptr
    del a
    gc.collect()
    assert live_counts()["buffers"] == base["buffers"] + 1, "Tack freed memory VTK still uses"
    junk = scribble(values.nbytes)
    assert vtk_address(v) == address
    np.testing.assert_array_equal(np.array(vtk_values(v)), values)
    del junk
    deleted = watch_deletion(v)
    del v
    gc.collect()
    assert deleted == ["DeleteEvent"]
    assert live_counts() == base, "VTK released the array but Tack's export is still pinned"


def test_an_exported_array_lives_as_long_as_the_dataset_holding_it(support):
    base = live_counts()
    image = vtkImageData()
    image.SetDimensions(3, 2, 2)
    image.GetPointData().SetScalars(tvtk.array_to_vtk(tack.array(np.arange(12, dtype=np.int32)), name="ids"))
    gc.collect()
    assert live_counts()["buffers"] == base["buffers"] + 1
    assert vtk_values(image.GetPointData().GetArray("ids")) == list(range(12))
    del image
    gc.collect()
    assert live_counts() == base


def test_a_round_trip_comes_back_to_the_same_memory(support):
    a = tack.array(sample("int16", (5, 4)))
    b = tvtk.vtk_to_array(tvtk.array_to_vtk(a))
    assert b.ptr == a.ptr and b.shape == (5, 4) and b.dtype == "int16"
    b.fill(-3)
    np.testing.assert_array_equal(a.to_numpy(), np.full((5, 4), -3, np.int16))


def test_name_names_the_vtk_array(support):
    a = tack.zeros(4)
    assert tvtk.array_to_vtk(a, name="radius").GetName() == "radius"
    assert tvtk.array_to_vtk(a).GetName() is None


# --------------------------------------------------------------------------
# Layout: worked out before VTK is touched

LAYOUTS = [
    # shape, n_components, (tuples, components) VTK gets. The spec's rule:
    # a 2-D array is (tuples, components) and n_components must be shape[1];
    # for any other array n_components must divide the size.
    ((), None, (1, 1)),
    ((), 1, (1, 1)),
    ((12,), None, (12, 1)),
    ((12,), 1, (12, 1)),
    ((12,), 3, (4, 3)),
    ((12,), 12, (1, 12)),
    ((4, 3), None, (4, 3)),
    ((4, 3), 3, (4, 3)),
    ((2, 3, 4), 1, (24, 1)),
    ((2, 3, 4), 2, (12, 2)),
    ((2, 3, 4), 4, (6, 4)),
    ((2, 3, 4), 6, (4, 6)),
    ((2, 3, 4), 8, (3, 8)),
    ((2, 3, 4), 12, (2, 12)),
    ((2, 3, 4), 24, (1, 24)),
    ((5, 3, 3), 9, (5, 9)),
    ((0, 3), None, (0, 3)),
    ((0, 3), 3, (0, 3)),
    ((0, 2, 3), 4, (0, 4)),
]


@pytest.mark.parametrize("shape, n_components, expected", LAYOUTS)
def test_layout_reshapes_to_tuples_and_components_as_a_view(support, shape, n_components, expected):
    a = tack.array(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))
    v = tvtk.array_to_vtk(a, n_components=n_components)
    assert (v.GetNumberOfTuples(), v.GetNumberOfComponents()) == expected
    if a.size:
        assert vtk_address(v) == a.ptr
        assert vtk_values(v) == list(range(a.size))


BAD_LAYOUTS = [
    # shape, n_components, exception, words the message must contain
    ((2, 3, 4), None, ValueError, "n_components"),
    ((2, 3, 4, 3), None, ValueError, "n_components"),
    ((12,), 5, ValueError, "does not divide"),
    ((), 2, ValueError, "does not divide"),
    ((2, 3, 4), 5, ValueError, "does not divide"),
    ((2, 3, 4), 48, ValueError, "does not divide"),
    ((4, 3), 1, ValueError, "contradicts"),
    ((4, 3), 2, ValueError, "contradicts"),
    ((4, 3), 4, ValueError, "contradicts"),
    ((4, 3), 5, ValueError, "contradicts"),
    ((4, 3), 6, ValueError, "contradicts"),
    ((4, 3), 12, ValueError, "contradicts"),
    ((4, 6), 3, ValueError, "contradicts"),
    ((0, 3), 1, ValueError, "contradicts"),
    ((12,), 0, ValueError, "at least 1"),
    ((12,), -3, ValueError, "at least 1"),
    ((12,), 1.5, TypeError, "integer"),
    ((12,), "3", TypeError, "integer"),
    ((12,), True, TypeError, "integer"),
]


@pytest.mark.parametrize("shape, n_components, error, words", BAD_LAYOUTS)
def test_layout_errors_come_before_vtk_is_touched(support, monkeypatch, shape, n_components, error, words):
    calls = []
    monkeypatch.setattr(support, "dlpack_to_vtk", lambda obj: calls.append(obj), raising=True)
    a = tack.zeros(shape)
    base = live_counts()
    with pytest.raises(error, match=words):
        tvtk.array_to_vtk(a, n_components=n_components)
    assert calls == []
    assert live_counts() == base


@pytest.mark.parametrize("shape, n_components, error, words", BAD_LAYOUTS[:3])
def test_a_layout_error_is_reported_even_without_dlpack_support(absent, shape, n_components, error, words):
    with pytest.raises(error, match=words):
        tvtk.array_to_vtk(tack.zeros(shape), n_components=n_components)


def test_array_to_vtk_takes_only_tack_arrays(support):
    with pytest.raises(TypeError, match="tack.Array"):
        tvtk.array_to_vtk(np.zeros(3))
    with pytest.raises(TypeError, match="name"):
        tvtk.array_to_vtk(tack.zeros(3), name=3)


# --------------------------------------------------------------------------
# Without dlpack_support


def test_without_dlpack_support_both_directions_raise_runtime_error(absent):
    version = vtk_core.vtkVersion.GetVTKVersion()
    with pytest.raises(RuntimeError, match=r"vtkmodules\.util\.dlpack_support") as info:
        tvtk.vtk_to_array(make_vtk("vtkFloatArray", [1.0, 2.0]))
    assert version in str(info.value)
    with pytest.raises(RuntimeError, match=r"vtkmodules\.util\.dlpack_support") as info:
        tvtk.array_to_vtk(tack.zeros(3))
    assert version in str(info.value)
    with pytest.raises(RuntimeError, match=r"vtkmodules\.util\.dlpack_support"):
        tvtk.init_level_zero()


def test_without_dlpack_support_the_message_names_the_route_that_works(absent):
    with pytest.raises(RuntimeError) as info:
        tvtk.vtk_to_array(make_vtk("vtkFloatArray", [1.0, 2.0]))
    text = str(info.value)
    assert "tack.asarray(vtk_array)" in text
    assert "numpy_support.numpy_to_vtk(np.asarray(a), deep=False)" in text
    # The route works with this VTK, without a copy either way.
    v = make_vtk("vtkFloatArray", [1.0, 2.0, 3.0])
    a = tack.asarray(v)
    assert a.ptr == vtk_address(v) and a.to_numpy().tolist() == [1.0, 2.0, 3.0]
    b = tack.array(np.arange(4, dtype=np.float32))
    w = numpy_support.numpy_to_vtk(np.asarray(b), deep=False)
    assert vtk_address(w) == b.ptr
    b.fill(5)
    assert w.GetValue(3) == 5


@pytest.mark.skipif(WHEEL_HAS_SUPPORT, reason="this VTK wheel provides dlpack_support")
def test_the_pypi_wheel_really_lacks_dlpack_support():
    """Without the provider installed, the real wheel gives the RuntimeError."""
    assert sys.modules.get(SUPPORT) is None
    with pytest.raises(RuntimeError, match=r"does not provide"):
        tvtk.array_to_vtk(tack.zeros(3))


def test_without_vtk_at_all_the_error_says_so(monkeypatch):
    for name in [m for m in sys.modules if m == "vtkmodules" or m.startswith("vtkmodules.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(RuntimeError, match="VTK is not installed"):
        tvtk.array_to_vtk(tack.zeros(3))


# --------------------------------------------------------------------------
# init_level_zero without a Level Zero context in VTK, and the guard's
# silence on other backends (the Level Zero cases: test_vtk_level_zero.py)

REASONS = ["too old", "without Viskores on Kokkos' SYCL backend", "not running on a Level Zero device"]


@pytest.fixture
def own_provider(monkeypatch):
    """The provider, even where the wheel has its own dlpack_support."""
    provider.reset()
    install(monkeypatch, provider)
    yield provider
    provider.reset()


@pytest.mark.parametrize("handles", ["absent", None, {}])
def test_init_level_zero_without_handles_gives_the_three_reasons(
    own_provider, monkeypatch, restore_default_device, handles
):
    if handles == "absent":
        monkeypatch.delattr(own_provider, "level_zero_handles")
    else:
        own_provider.handles = handles
    before = tack.get_default_device()
    with pytest.raises(RuntimeError) as info:
        tvtk.init_level_zero()
    for reason in REASONS:
        assert reason in str(info.value)
    assert tack.get_default_device() is before


def test_no_level_zero_check_on_the_cpu_backend(own_provider):
    """VTK reports no Level Zero context, and host exchanges neither ask nor care."""
    a = tack.array(np.arange(6, dtype=np.float32))
    v = tvtk.array_to_vtk(a, n_components=2)
    b = tvtk.vtk_to_array(v)
    assert b.ptr == a.ptr
    assert own_provider.handle_queries == 0
