"""A test-only vtkmodules.util.dlpack_support over the PyPI VTK wheel.

The vtk wheel on PyPI (9.7.2 when this was written) has no
vtkmodules.util.dlpack_support, the module tack.interop.vtk is built on. This
module provides the same three functions over the real wheel so the tests
exercise tack.interop.vtk against real VTK arrays and real NumPy; it is
installed into sys.modules by test fixtures only and is never shipped.

Host memory only, zero-copy both ways:

- vtk_to_dlpack(vtk_array) views the VTK array's memory through its buffer
  protocol as a (tuples, components) NumPy array and returns NumPy's DLPack
  capsule over it. The capsule holds the view, the view holds the VTK array,
  so VTK's memory lives until the consumer's deleter runs.
- dlpack_to_vtk(obj) imports obj with np.from_dlpack and wraps the view with
  numpy_support.numpy_to_vtk(deep=False), which ties the view to the VTK
  array: the producer's deleter runs when VTK releases the array.
- level_zero_handles() returns `handles` (None unless a test sets it) and
  counts its calls in `handle_queries`.

Device memory: a test that runs Tack on a simulated driver lists the DLPack
device type in `device_types` (kDLOneAPI). dlpack_to_vtk then wraps tensors of
that type in VTK arrays as a VTK built with Viskores holds a device array: by
address, without reading them (the host cannot touch them). NumPy, used only
to carry the address, is handed the capsule relabelled as host memory; its
deleter and Tack's ignore the label. vtk_to_dlpack exports such VTK arrays
back under their own device type. Nothing here reads device memory; neither
may a test, through VTK, for arrays made this way.
"""

import ctypes
import weakref

import numpy as np
from vtkmodules.util import numpy_support
from vtkmodules.vtkCommonCore import VTK_BIT, vtkDataArray

kDLCPU, kDLOneAPI = 1, 14

handles = None
handle_queries = 0
# DLPack device types dlpack_to_vtk wraps as VTK device arrays.
device_types = set()
# data address -> [(device type, device id), how many VTK arrays wrap it]
_device_memory = {}


def level_zero_handles():
    global handle_queries
    handle_queries += 1
    return handles


def reset():
    """Back to a plain host-only provider with no Level Zero context."""
    global handles, handle_queries
    handles = None
    handle_queries = 0
    device_types.clear()
    _device_memory.clear()


def vtk_to_dlpack(vtk_array):
    """A DLPack capsule, shaped (tuples, components), over vtk_array's memory."""
    if not isinstance(vtk_array, vtkDataArray):
        raise TypeError(f"vtk_to_dlpack takes a vtkDataArray, not {type(vtk_array).__name__}")
    kind = vtk_array.GetDataType()
    types = numpy_support.get_vtk_to_numpy_typemap()
    if kind == VTK_BIT or kind not in types:
        raise TypeError(f"{vtk_array.GetClassName()} has no DLPack data type")
    # The buffer protocol hands out VTK's own memory (implicit arrays have none
    # and refuse), and the view's memoryview keeps the VTK array referenced.
    flat = np.frombuffer(vtk_array, dtype=types[kind])
    view = flat.reshape(vtk_array.GetNumberOfTuples(), vtk_array.GetNumberOfComponents())
    capsule = view.__dlpack__(max_version=(1, 0))
    if view.ctypes.data in _device_memory:
        _relabel(capsule, _device_memory[view.ctypes.data][0])
    return capsule


def dlpack_to_vtk(obj):
    """A vtkDataArray over the memory of obj (anything with __dlpack__)."""
    device = tuple(obj.__dlpack_device__())
    if device[0] != kDLCPU:
        if device[0] not in device_types:
            raise ValueError(f"dlpack_to_vtk takes host memory only, not DLPack device {device}")
        obj = _AddressOnly(obj.__dlpack__(max_version=(1, 0)))
    view = np.from_dlpack(obj)
    if not view.flags.writeable:
        # A VTK array has no read-only mode: wrapping would let VTK write
        # memory its producer said is read-only.
        raise ValueError("dlpack_to_vtk cannot wrap read-only memory")
    if view.ndim not in (1, 2):
        raise ValueError(f"dlpack_to_vtk takes (tuples, components) or (tuples,), not shape {view.shape}")
    vtk_array = numpy_support.numpy_to_vtk(view, deep=False)
    if device[0] != kDLCPU:
        address = view.ctypes.data
        _device_memory.setdefault(address, [device, 0])[1] += 1
        weakref.finalize(view, _forget_device_memory, address)
    return vtk_array


def _forget_device_memory(address):
    entry = _device_memory.get(address)
    if entry is not None:
        entry[1] -= 1
        if entry[1] == 0:
            del _device_memory[address]


# --------------------------------------------------------------------------
# Relabelling a capsule's device (device_types only)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensorHead(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice)]


# DLManagedTensorVersioned: version (8 bytes), manager_ctx, deleter, flags (8
# bytes each), then the DLTensor.
_VERSIONED_TENSOR_OFFSET = 32

_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


def _relabel(capsule, device):
    name = _get_name(capsule)
    if name != b"dltensor_versioned":
        raise ValueError(f"expected an unconsumed versioned DLPack capsule, got {name!r}")
    head = _DLTensorHead.from_address(_get_pointer(capsule, name) + _VERSIONED_TENSOR_OFFSET)
    head.device.device_type, head.device.device_id = device


class _AddressOnly:
    """Presents a capsule over device memory to NumPy as host memory, so that
    NumPy carries the address and the producer's deleter; never read it."""

    def __init__(self, capsule):
        _relabel(capsule, (kDLCPU, 0))
        self._capsule = capsule

    def __dlpack__(self, **kwargs):
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self):
        return (kDLCPU, 0)
