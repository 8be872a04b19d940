"""Tack's DLPack C exchange table (type(a).__dlpack_c_exchange_api__), its
functions callable through ctypes as a C consumer calls them; shared by the
test files that hand tensors through it, and importable in a case's
subprocess. Not a test file: pytest collects nothing here.
"""

import ctypes

import tack
from conftest import DLManagedTensorVersioned, DLPackExchangeAPI, DLTensor, kDLCPU

# --------------------------------------------------------------------------
# the table, declared from the DLPack specification (dlpack.h 1.3)

SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
# The allocator needs no Python: called without the GIL, as a C consumer may.
Allocator = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(ctypes.c_void_p),
                             ctypes.c_void_p, SetError)
# The others report errors as Python exceptions: called with the GIL held,
# and ctypes raises the exception they set.
FromPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
ToPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
DLTensorFromPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CurrentWorkStream = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_decref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_DecRef", ctypes.pythonapi))


class Table:
    """A type's exchange table, its functions callable."""

    def __init__(self, cls):
        capsule = cls.__dlpack_c_exchange_api__
        self.address = _get_pointer(capsule, b"dlpack_exchange_api")
        self.struct = DLPackExchangeAPI.from_address(self.address)
        s = self.struct
        self.allocator = Allocator(s.managed_tensor_allocator)
        self.from_py = FromPyObject(s.managed_tensor_from_py_object_no_sync)
        self.to_py = ToPyObject(s.managed_tensor_to_py_object_no_sync)
        self.dltensor = DLTensorFromPyObject(s.dltensor_from_py_object_no_sync)
        self.stream = CurrentWorkStream(s.current_work_stream)

    def export(self, obj):
        """managed_tensor_from_py_object_no_sync: the tensor's address."""
        out = ctypes.c_void_p()
        assert self.from_py(obj, ctypes.byref(out)) == 0
        assert out.value
        return out.value

    def adopt(self, tensor):
        """managed_tensor_to_py_object_no_sync: the new object, owned."""
        out = ctypes.c_void_p()
        assert self.to_py(tensor, ctypes.byref(out)) == 0
        return steal(out.value)

    def allocate(self, shape, dtype=(2, 32, 1), device=(kDLCPU, 0)):
        """managed_tensor_allocator: (tensor address or None, errors)."""
        errors = []

        @SetError
        def set_error(ctx, kind, message):
            errors.append((ctx, kind.decode(), message.decode()))

        extents = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        proto = DLTensor()
        proto.device.device_type, proto.device.device_id = device
        proto.ndim = len(shape)
        proto.dtype.code, proto.dtype.bits, proto.dtype.lanes = dtype
        proto.shape = ctypes.cast(extents, ctypes.POINTER(ctypes.c_int64))
        out = ctypes.c_void_p()
        r = self.allocator(ctypes.byref(proto), ctypes.byref(out), 0x5EED, set_error)
        assert (r == 0) == (not errors), (r, errors)
        assert r in (0, -1)
        return (out.value if r == 0 else None), errors


def steal(address):
    """The object at `address`, taking over the reference the callee made."""
    obj = ctypes.cast(address, ctypes.py_object).value
    _decref(obj)
    return obj


def versioned(address):
    return DLManagedTensorVersioned.from_address(address)


def delete(address):
    Deleter(versioned(address).deleter)(address)


def live():
    return dict(tack._tack.live_counts())


TACK = Table(tack.Array)
