"""Zero-copy exchange between Tack arrays and VTK data arrays.

A thin layer over DLPack and VTK's ``vtkmodules.util.dlpack_support``:

    vtk_to_array(vtk_array, flatten=False)              VTK -> Tack
    array_to_vtk(array, n_components=None, name=None)   Tack -> VTK
    init_level_zero()                                   share VTK's Level Zero context

Both directions share memory: writes on either side are seen on the other,
and each side keeps the memory alive for as long as it holds its array.
Host arrays work with any VTK that has ``dlpack_support``; device arrays need
a VTK built with Viskores.

On Level Zero a pointer is meaningful only in the context that allocated it,
and DLPack cannot say which context that was; the driver vouches for a
pointer from any context, so neither VTK nor the driver can catch a mismatch.
Tack knows the context it allocated in, so both exchange functions refuse a
Level Zero array unless its device uses the context VTK reports.
"""

from collections.abc import Mapping
import operator

import tack

__all__ = ["vtk_to_array", "array_to_vtk", "init_level_zero"]

_SUPPORT = "vtkmodules.util.dlpack_support"
# The modules whose absence means "this VTK cannot exchange through DLPack";
# any other missing module is a fault inside VTK and propagates as it is.
_MISSING_MEANS_NO_SUPPORT = {"vtkmodules", "vtkmodules.util", _SUPPORT}

_NO_LEVEL_ZERO_CONTEXT = (
    "VTK reports no Level Zero context: this VTK is too old "
    f"({_SUPPORT} has no level_zero_handles()), was built without Viskores on "
    "Kokkos' SYCL backend, or is not running on a Level Zero device"
)

_START_WITH_INIT = (
    "start Tack with tack.interop.vtk.init_level_zero() instead of "
    "tack.set_default_device('level_zero'), and allocate the arrays you exchange "
    "with VTK after it"
)


def _dlpack_support():
    """VTK's DLPack module.

    Raises RuntimeError naming the VTK needed when VTK, or its dlpack_support
    module, is not installed.
    """
    try:
        import vtkmodules.util.dlpack_support as support
    except ModuleNotFoundError as exc:
        if exc.name not in _MISSING_MEANS_NO_SUPPORT:
            raise
        installed = _installed_vtk()
        # Host memory needs no dlpack_support: VTK's arrays speak the buffer
        # protocol, and numpy_support wraps a NumPy view without a copy.
        route = (
            "; with this VTK, host arrays already cross without a copy: "
            "tack.asarray(vtk_array) shares a VTK array's memory, and "
            "vtkmodules.util.numpy_support.numpy_to_vtk(np.asarray(a), deep=False) "
            "shares a host tack.Array's (keep `a` alive while VTK uses it)"
            if installed else ""
        )
        raise RuntimeError(
            f"tack.interop.vtk needs {_SUPPORT}, and "
            f"{installed or 'VTK is not installed'}: install a VTK "
            f"whose Python package includes {_SUPPORT} (any build exchanges host "
            f"arrays; device arrays need VTK built with Viskores){route}"
        ) from exc
    return support


def _installed_vtk():
    """The sentence for a VTK without dlpack_support; "" without VTK."""
    try:
        from vtkmodules.vtkCommonCore import vtkVersion
    except ImportError:
        return ""
    return f"the installed VTK {vtkVersion.GetVTKVersion()} does not provide it"


def _level_zero_handles(support):
    """VTK's Level Zero handles as a dict, or None when this VTK has none."""
    report = getattr(support, "level_zero_handles", None)
    handles = report() if report is not None else None
    if not handles:
        return None
    if not isinstance(handles, Mapping):
        raise TypeError(
            f"{_SUPPORT}.level_zero_handles() returned {type(handles).__name__}; "
            "expected a mapping with 'driver', 'device' and 'context'"
        )
    return dict(handles)


def _require_shared_level_zero_context(device):
    """Refuses to exchange memory of a Level Zero device whose context is not
    the one VTK's device queue uses.

    Does nothing for any other backend. Raises RuntimeError when VTK reports
    no Level Zero context, or a different one, telling the caller to start
    Tack with init_level_zero().
    """
    if device.backend != "level_zero":
        return
    handles = _level_zero_handles(_dlpack_support())
    if handles is None:
        raise RuntimeError(
            f"cannot exchange a Level Zero array with VTK: {_NO_LEVEL_ZERO_CONTEXT}. "
            f"A Level Zero pointer is valid only in its own context; {_START_WITH_INIT}"
        )
    if handles.get("context") != device.context_handle:
        raise RuntimeError(
            f"cannot exchange this Level Zero array with VTK: it was allocated on "
            f"{device!r}, in a context VTK does not use, and a Level Zero pointer is "
            f"valid only in its own context; {_START_WITH_INIT}"
        )


def init_level_zero():
    """Makes Tack's default device Level Zero in the context VTK's device
    queue runs on, and returns that device.

    Raises RuntimeError when VTK lacks dlpack_support, when its
    dlpack_support has no level_zero_handles(), or when that returns nothing:
    the VTK is too old, was built without Viskores on Kokkos' SYCL backend,
    or is not running on a Level Zero device. Errors from Tack's Level Zero
    backend (ValueError for a null handle) propagate unchanged, and the
    default device is then left as it was.
    """
    handles = _level_zero_handles(_dlpack_support())
    if handles is None:
        raise RuntimeError(f"cannot start Tack in VTK's Level Zero context: {_NO_LEVEL_ZERO_CONTEXT}")
    return tack.set_default_device("level_zero", external_context=handles)


def vtk_to_array(vtk_array, flatten=False):
    """A Tack array over a VTK data array's memory, without a copy.

    One component gives a 1-D array of tuples; several give (tuples,
    components); flatten=True gives the flat interleaved (tuples *
    components,) array. The result holds VTK's export, so the VTK array may be
    dropped at once.

    Raises RuntimeError when VTK lacks dlpack_support or when the memory is
    on a Level Zero device in a context VTK does not use (the import is
    released first); errors from VTK's export and from tack.from_dlpack
    propagate unchanged.
    """
    array = tack.from_dlpack(_dlpack_support().vtk_to_dlpack(vtk_array))
    try:
        _require_shared_level_zero_context(array.device)
    except BaseException:
        array = None  # give VTK its export back now, not when the traceback goes
        raise
    if array.ndim == 2 and (flatten or array.shape[1] == 1):
        return array.reshape((array.shape[0] * array.shape[1],))
    return array


def array_to_vtk(array, n_components=None, name=None):
    """A VTK data array over a Tack array's memory, without a copy.

    VTK sees the array as (tuples, components), a reshaped view: a 2-D
    array as it is (n_components, if given, must be shape[1]); any other
    array as tuples of n_components consecutive elements (which must divide
    its size), one per tuple for a 0-D or 1-D array without n_components.
    Arrays of three or more dimensions need n_components. name, when given,
    names the VTK array. Tack's export keeps the memory alive until VTK
    releases the array, so the Tack array may be dropped at once.

    The layout is checked before VTK is touched: TypeError when array is not
    a tack.Array, or n_components not an integer, or name not a str;
    ValueError when n_components is below 1, contradicts a 2-D array's
    shape[1] or does not divide another array's size, or when it is missing
    for three or more dimensions. RuntimeError when VTK lacks dlpack_support or when a Level
    Zero array is not in the context VTK uses; errors from VTK's import
    propagate unchanged.
    """
    if not isinstance(array, tack.Array):
        raise TypeError(f"array_to_vtk takes a tack.Array, not {type(array).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    layout = _vtk_layout(tuple(array.shape), n_components)
    support = _dlpack_support()
    _require_shared_level_zero_context(array.device)
    view = array if tuple(array.shape) == layout else array.reshape(layout)
    vtk_array = support.dlpack_to_vtk(view)
    if name is not None:
        vtk_array.SetName(name)
    return vtk_array


def _vtk_layout(shape, n_components):
    """The (tuples, components) shape VTK gets for an array of `shape`.

    A 2-D array already is (tuples, components): n_components, when given,
    must be shape[1], and anything else contradicts the array. Any other
    array is split into tuples of n_components consecutive elements, so
    n_components must divide its size; without it a 0-D or 1-D array is one
    component per tuple, and three or more dimensions must say.
    """
    size = 1
    for extent in shape:
        size *= extent
    if n_components is None:
        if len(shape) == 0:
            return (1, 1)
        if len(shape) == 1:
            return (shape[0], 1)
        if len(shape) == 2:
            return shape
        raise ValueError(
            f"an array of shape {shape} has {len(shape)} dimensions; say how many of its "
            f"consecutive elements make one VTK tuple: n_components=1 for scalars over the grid, "
            f"n_components={shape[-1]} for {shape[-1]}-component tuples"
        )
    if isinstance(n_components, bool):
        raise TypeError("n_components must be an integer, not bool")
    try:
        components = operator.index(n_components)
    except TypeError:
        raise TypeError(f"n_components must be an integer, not {type(n_components).__name__}") from None
    if components < 1:
        raise ValueError(f"n_components must be at least 1, not {components}")
    if len(shape) == 2:
        if components != shape[1]:
            raise ValueError(
                f"n_components={components} contradicts the array's shape {shape}: a 2-D array is "
                f"(tuples, components), so its n_components is {shape[1]}; reshape it first "
                f"(array.reshape(-1) for one flat run of elements) to mean otherwise"
            )
        return shape
    if size % components:
        raise ValueError(
            f"n_components={components} does not divide the array's {size} elements (shape {shape})"
        )
    return (size // components, components)
