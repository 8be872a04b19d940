"""Hostile producers of the DLPack C exchange table.

tack.from_dlpack(x) reads type(x).__dlpack_c_exchange_api__ and, when it is
a usable table, takes the tensor from its managed_tensor_from_py_object_no_sync
instead of calling x.__dlpack__(). Here the table is built by hand: a
capsule over a ctypes struct whose export function is a few lines of C that
misbehave on request. What must hold, whatever the table does:

- a table Tack cannot use (wrong capsule, wrong name, another major
  version, no export function) is never called: the import goes through
  __dlpack__ as if there were no table;
- an export that fails, or succeeds with no tensor, or hands over a tensor
  that needs what the table cannot give (device memory, another major
  version), falls back to __dlpack__; any tensor it handed over is deleted
  exactly once;
- a tensor Tack must refuse (null data, strides, absurd shapes, dtypes) is
  refused with the exception the spec names, and deleted exactly once: the
  table handed its ownership to Tack;
- a good tensor is wrapped in place and deleted once, when the last array
  over it goes.
"""

import ctypes

import numpy as np
import pytest

import tack
from conftest import DLPackExchangeAPI, READ_ONLY, _capsule_new, build_c_library, kDLCPU, kDLCUDA

_TABLE_SOURCE = r"""
typedef struct _object PyObject;
extern PyObject *PyExc_RuntimeError;
extern void PyErr_SetString(PyObject *, const char *);

enum { HAND_OVER, FAIL_WITH_ERROR, FAIL_SILENTLY, NO_TENSOR };
static int mode;
static void *tensor;
static long calls;

void table_set(int m, void *t) { mode = m; tensor = t; calls = 0; }
long table_calls(void) { return calls; }

int table_export(PyObject *obj, void **out)
{
    (void)obj;
    calls++;
    switch (mode) {
    case HAND_OVER: *out = tensor; return 0;
    case FAIL_WITH_ERROR: PyErr_SetString(PyExc_RuntimeError, "this producer refuses"); return -1;
    case FAIL_SILENTLY: return -1;
    case NO_TENSOR: *out = 0; return 0;
    }
    return -1;
}
"""

HAND_OVER, FAIL_WITH_ERROR, FAIL_SILENTLY, NO_TENSOR = range(4)


class Lib:
    def __init__(self, path):
        # PyDLL: table_set and table_calls are called with the GIL held.
        self.lib = ctypes.PyDLL(path)
        self.lib.table_set.argtypes = [ctypes.c_int, ctypes.c_void_p]
        self.lib.table_calls.restype = ctypes.c_long
        self.export = ctypes.cast(self.lib.table_export, ctypes.c_void_p).value
        self.keep = []  # structs and names live as long as the session

    def table(self, *, major=1, minor=3, export=True):
        api = DLPackExchangeAPI(major=major, minor=minor)
        api.managed_tensor_from_py_object_no_sync = self.export if export else None
        self.keep.append(api)
        return api

    def capsule(self, api, name=b"dlpack_exchange_api"):
        name_buffer = ctypes.create_string_buffer(name)
        self.keep.append(name_buffer)
        return _capsule_new(ctypes.addressof(api), ctypes.addressof(name_buffer), None)

    def set(self, mode, tensor=None):
        self.lib.table_set(mode, tensor.address if tensor is not None else None)

    def calls(self):
        return self.lib.table_calls()


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return Lib(build_c_library(_TABLE_SOURCE, tmp_path_factory.mktemp("table"), "the hand-built exchange table"))


def producer_type(exchange_api):
    """A fresh producer type (so no earlier lookup of a type is reused)
    publishing `exchange_api`, whose __dlpack__ hands out `fallback`'s
    capsule and counts the calls."""

    class Producer:
        __dlpack_c_exchange_api__ = exchange_api

        def __init__(self, fallback=None):
            self.fallback = fallback
            self.dunder_calls = 0

        def __dlpack__(self, **kwargs):
            self.dunder_calls += 1
            if self.fallback is None:
                raise BufferError("this producer has no capsule to give")
            return self.fallback.capsule()

        def __dlpack_device__(self):
            return (kDLCPU, 0)

    return Producer


def live():
    return dict(tack._tack.live_counts())


def data_of(tensor):
    return tensor.struct.dl_tensor.data + tensor.struct.dl_tensor.byte_offset


# --------------------------------------------------------------------------
# a good table


def test_a_tensor_from_the_table_is_wrapped_in_place_and_deleted_once(lib, probe):
    t = probe.tensor(shape=(2, 3), dtype=(2, 32, 1))
    lib.set(HAND_OVER, t)
    Producer = producer_type(lib.capsule(lib.table()))
    source = Producer()
    a = tack.from_dlpack(source)
    assert lib.calls() == 1 and source.dunder_calls == 0, "the import did not take the table's tensor"
    assert a.ptr == data_of(t) and a.shape == (2, 3) and a.writable
    np.testing.assert_array_equal(np.asarray(a), t.expected("float32"))
    v = a.reshape(6)
    np.asarray(v)[0] = 42.0
    assert t.expected("float32").reshape(-1)[0] == 42.0, "a write through Tack is not in the producer's memory"
    del a
    assert t.deleter_calls == 0, "deleted while a view was alive"
    del v
    assert t.deleter_calls == 1


def test_the_tables_read_only_flag_is_honoured(lib, probe):
    t = probe.tensor(flags=READ_ONLY)
    lib.set(HAND_OVER, t)
    a = tack.from_dlpack(producer_type(lib.capsule(lib.table()))())
    assert not a.writable
    with pytest.raises(RuntimeError):
        a.fill(1.0)
    del a
    assert t.deleter_calls == 1


def test_a_tensor_with_no_deleter_is_wrapped(lib, probe):
    t = probe.tensor()
    t.struct.deleter = None
    lib.set(HAND_OVER, t)
    a = tack.from_dlpack(producer_type(lib.capsule(lib.table()))())
    assert a.ptr == data_of(t)
    del a
    assert t.deleter_calls == 0


def test_a_newer_minor_table_version_is_used(lib, probe):
    t = probe.tensor()
    lib.set(HAND_OVER, t)
    a = tack.from_dlpack(producer_type(lib.capsule(lib.table(minor=99)))())
    assert lib.calls() == 1 and a.ptr == data_of(t)
    del a
    assert t.deleter_calls == 1


# --------------------------------------------------------------------------
# tables Tack cannot use: never called, __dlpack__ answers


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda lib: lib.capsule(lib.table(), name=b"dlpack_exchange_api_v2"), id="capsule-name"),
        pytest.param(lambda lib: lib.capsule(lib.table(major=2)), id="major-version-2"),
        pytest.param(lambda lib: lib.capsule(lib.table(major=0)), id="major-version-0"),
        pytest.param(lambda lib: lib.capsule(lib.table(export=False)), id="no-export-function"),
        pytest.param(lambda lib: 42, id="not-a-capsule"),
        pytest.param(lambda lib: None, id="none"),
    ],
)
def test_an_unusable_table_is_never_called(lib, probe, make):
    table_tensor, dunder_tensor = probe.tensor(), probe.tensor()
    lib.set(HAND_OVER, table_tensor)
    source = producer_type(make(lib))(dunder_tensor)
    a = tack.from_dlpack(source)
    assert lib.calls() == 0, "Tack called a table it cannot read"
    assert source.dunder_calls == 1 and a.ptr == data_of(dunder_tensor)
    del a
    assert dunder_tensor.deleter_calls == 1 and table_tensor.deleter_calls == 0


# --------------------------------------------------------------------------
# exports that fail or hand over nothing: __dlpack__ answers


@pytest.mark.parametrize("mode", [FAIL_WITH_ERROR, FAIL_SILENTLY, NO_TENSOR],
                         ids=["error-set", "no-error-set", "success-without-tensor"])
def test_a_failed_export_falls_back_to_dunder_dlpack(lib, probe, mode):
    t = probe.tensor()
    lib.set(mode)
    source = producer_type(lib.capsule(lib.table()))(t)
    a = tack.from_dlpack(source)
    assert lib.calls() == 1 and source.dunder_calls == 1 and a.ptr == data_of(t)
    del a
    assert t.deleter_calls == 1


@pytest.mark.parametrize("mode", [FAIL_WITH_ERROR, FAIL_SILENTLY])
def test_a_failed_export_without_dunder_dlpack_reports_the_producers_refusal(lib, mode):
    lib.set(mode)
    before = live()
    with pytest.raises(BufferError, match="no capsule to give"):
        tack.from_dlpack(producer_type(lib.capsule(lib.table()))())
    assert live() == before


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"device": (kDLCUDA, 0)}, id="device-memory"),
        pytest.param({"version": (2, 0)}, id="major-version-2"),
    ],
)
def test_a_tensor_the_table_cannot_give_is_deleted_and_dunder_dlpack_answers(lib, probe, fields):
    from_table, from_dunder = probe.tensor(**fields), probe.tensor()
    lib.set(HAND_OVER, from_table)
    source = producer_type(lib.capsule(lib.table()))(from_dunder)
    a = tack.from_dlpack(source)
    assert from_table.deleter_calls == 1, "the table's tensor was not deleted exactly once"
    assert source.dunder_calls == 1 and a.ptr == data_of(from_dunder)
    del a
    assert from_dunder.deleter_calls == 1 and from_table.deleter_calls == 1


# --------------------------------------------------------------------------
# tensors Tack must refuse: the spec's exception, deleted exactly once


@pytest.mark.parametrize(
    "fields, exception, match",
    [
        pytest.param({"data": None}, ValueError, "NULL data", id="null-data"),
        pytest.param({"shape": (2, 3), "strides": (1, 2)}, ValueError, "not C-contiguous", id="fortran-strides"),
        pytest.param({"shape": (2, 3), "strides": (3, 0)}, ValueError, "not C-contiguous", id="zero-stride"),
        pytest.param({"shape": (2, 3), "strides": (-3, 1)}, ValueError, "not C-contiguous", id="negative-stride"),
        pytest.param({"shape": (-1, 3)}, ValueError, "extents must be >= 0", id="negative-extent"),
        pytest.param({"shape": (1 << 40, 1 << 40)}, ValueError, "too large", id="overflowing-shape"),
        pytest.param({"ndim": -1}, ValueError, "ndim", id="negative-ndim"),
        pytest.param({"ndim": 1000, "shape_array": [1]}, ValueError, "ndim", id="absurd-ndim"),
        pytest.param({"shape_array": False}, ValueError, "NULL shape", id="null-shape"),
        pytest.param({"dtype": (2, 32, 4)}, TypeError, "lanes", id="lanes-4"),
        pytest.param({"dtype": (2, 24, 1)}, TypeError, None, id="float24"),
        pytest.param({"dtype": (99, 32, 1)}, TypeError, None, id="unknown-code"),
        pytest.param({"data": 0x1003, "shape": (4,)}, ValueError, "not aligned", id="misaligned"),
    ],
)
def test_a_refused_tensor_is_deleted_once_and_nothing_is_left(lib, probe, fields, exception, match):
    t = probe.tensor(**fields)
    lib.set(HAND_OVER, t)
    source = producer_type(lib.capsule(lib.table()))(probe.tensor())
    before = live()
    with pytest.raises(exception, match=match):
        tack.from_dlpack(source)
    assert lib.calls() == 1 and source.dunder_calls == 0, "a refused tensor is not answered by __dlpack__"
    assert t.deleter_calls == 1, "the import owned the tensor and must delete it exactly once"
    assert live() == before

