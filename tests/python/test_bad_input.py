"""Bad input at every public Python entry point: wrong types, wrong shapes,
overflowing and negative sizes, huge integers, None where a value is needed.

Each case raises exactly the documented exception type (TypeError for a
value of the wrong type, ValueError for a value out of range or of the
wrong shape, MemoryError for an allocation the system refuses, RuntimeError
for an operation the backend cannot do, BufferError for an export that
cannot be made as asked), with a message that says what was wrong, and
leaves Tack's live counters and the default device as they were.

Cases where NumPy itself reads the input (tack.array) raise what NumPy
raises for it.
"""

import gc

import numpy as np
import pytest

import tack

BIG = 2**64
HUGE = 10**400


def live():
    return dict(tack._tack.live_counts())


def f32(shape=(2, 3)):
    return tack.zeros(shape, tack.f32)


def i64(shape=(4,)):
    return tack.zeros(shape, tack.i64)


def u8(shape=(4,)):
    return tack.zeros(shape, tack.u8)


class NoIndex:
    """Neither an int nor a sequence."""


class BadIndex:
    """An object whose __index__ raises."""

    def __index__(self):
        raise ZeroDivisionError("index refused")


_buffer = np.zeros(8, dtype=np.float64)
ADDRESS = _buffer.ctypes.data  # a real address for array_from_ptr

# (id, call, documented exception)
CASES = [
    # ---- empty / zeros: shape
    ("zeros-shape-None", lambda: tack.zeros(None), TypeError),
    ("zeros-shape-str", lambda: tack.zeros("3"), TypeError),
    ("zeros-shape-float", lambda: tack.zeros(3.0), TypeError),
    ("zeros-shape-float-item", lambda: tack.zeros([2, 2.5]), TypeError),
    ("zeros-shape-None-item", lambda: tack.zeros((2, None)), TypeError),
    ("zeros-shape-object", lambda: tack.zeros(NoIndex()), TypeError),
    ("zeros-shape-dict", lambda: tack.zeros({"a": 1}), TypeError),
    ("zeros-shape-negative", lambda: tack.zeros(-1), ValueError),
    ("zeros-shape-negative-item", lambda: tack.zeros((2, -3)), ValueError),
    ("zeros-shape-int64-min", lambda: tack.zeros((-(2**63),)), ValueError),
    ("zeros-shape-beyond-int64", lambda: tack.zeros(2**63), ValueError),
    ("zeros-shape-beyond-uint64", lambda: tack.zeros((BIG,)), ValueError),
    ("zeros-shape-below-int64", lambda: tack.zeros(-(2**63) - 1), ValueError),
    ("zeros-shape-huge-int", lambda: tack.zeros((HUGE, 1)), ValueError),
    ("zeros-shape-product-overflows", lambda: tack.zeros((2**62, 2**62)), ValueError),
    ("zeros-shape-three-2**31", lambda: tack.zeros((2**31,) * 3), ValueError),
    ("zeros-shape-bytes-overflow", lambda: tack.zeros((2**61,), tack.f64), ValueError),
    ("zeros-zero-size-beyond-strides", lambda: tack.zeros((0, 12, 867835745674527246)), ValueError),
    ("zeros-65-dims", lambda: tack.zeros((1,) * 65), ValueError),
    ("zeros-1000-dims", lambda: tack.zeros([1] * 1000), ValueError),
    ("empty-shape-negative", lambda: tack.empty((0, -1)), ValueError),
    ("empty-absurd-allocation", lambda: tack.empty((2**57,), tack.f64), MemoryError),
    ("zeros-absurd-allocation", lambda: tack.zeros((2**20, 2**40), tack.u8), MemoryError),
    # ---- empty / zeros: dtype, device, arguments
    ("zeros-dtype-unknown-name", lambda: tack.zeros(3, "float8"), TypeError),
    ("zeros-dtype-int", lambda: tack.zeros(3, 5), TypeError),
    ("zeros-dtype-object", lambda: tack.zeros(3, NoIndex()), TypeError),
    ("zeros-dtype-longdouble", lambda: tack.zeros(3, np.longdouble), TypeError),
    ("zeros-dtype-datetime", lambda: tack.zeros(3, np.dtype("M8[s]")), TypeError),
    ("zeros-dtype-object-dtype", lambda: tack.zeros(3, object), TypeError),
    ("zeros-device-int", lambda: tack.zeros(3, device=5), TypeError),
    ("zeros-device-bytes", lambda: tack.zeros(3, device=b"cpu"), TypeError),
    ("zeros-device-unknown", lambda: tack.zeros(3, device="tpu"), ValueError),
    ("zeros-device-empty-name", lambda: tack.zeros(3, device=""), ValueError),
    ("zeros-device-bad-ordinal", lambda: tack.zeros(3, device="cpu:1"), ValueError),
    ("zeros-device-malformed", lambda: tack.zeros(3, device="cpu:x"), ValueError),
    ("zeros-no-shape", lambda: tack.zeros(), TypeError),
    ("zeros-unknown-keyword", lambda: tack.zeros(3, shape=3), TypeError),
    ("zeros-device-positional", lambda: tack.zeros(3, tack.f32, "cpu"), TypeError),
    ("empty-unknown-keyword", lambda: tack.empty(3, order="C"), TypeError),
    # ---- array
    ("array-object", lambda: tack.array(NoIndex()), TypeError),
    ("array-str", lambda: tack.array("abc"), TypeError),
    ("array-clongdouble", lambda: tack.array(np.ones(2, np.clongdouble)), TypeError),
    ("array-ragged", lambda: tack.array([1, [2, 3]]), ValueError),
    ("array-dtype-unknown", lambda: tack.array([1, 2], dtype="bogus"), TypeError),
    ("array-dtype-object", lambda: tack.array([1, 2], dtype=object), TypeError),
    ("array-device-int", lambda: tack.array([1, 2], device=3), TypeError),
    ("array-device-unknown", lambda: tack.array([1, 2], device="nope"), ValueError),
    ("array-int-beyond-int64", lambda: tack.array([2**70], dtype="int64"), OverflowError),
    ("array-negative-to-uint8", lambda: tack.array([-1], dtype="uint8"), OverflowError),
    ("array-huge-python-int", lambda: tack.array([HUGE]), TypeError),
    ("array-no-argument", lambda: tack.array(), TypeError),
    # ---- array_from_ptr
    ("from-ptr-str", lambda: tack.array_from_ptr("0x1000", tack.f32, 4), TypeError),
    ("from-ptr-float", lambda: tack.array_from_ptr(float(ADDRESS), tack.f64, 4), TypeError),
    ("from-ptr-None", lambda: tack.array_from_ptr(None, tack.f32, 4), TypeError),
    ("from-ptr-bool", lambda: tack.array_from_ptr(True, tack.u8, 1), TypeError),
    ("from-ptr-negative", lambda: tack.array_from_ptr(-8, tack.f32, 4), TypeError),
    ("from-ptr-beyond-uint64", lambda: tack.array_from_ptr(BIG, tack.f32, 4), TypeError),
    ("from-ptr-huge", lambda: tack.array_from_ptr(HUGE, tack.f32, 4), TypeError),
    ("from-ptr-null", lambda: tack.array_from_ptr(0, tack.f32, 4), ValueError),
    ("from-ptr-numpy-bool", lambda: tack.array_from_ptr(np.bool_(True), tack.u8, 1), TypeError),
    ("from-ptr-index-negative", lambda: tack.array_from_ptr(np.int64(-8), tack.f32, 4), TypeError),
    # ---- memory_space
    ("memory-space-bool", lambda: tack.memory_space(True), TypeError),
    ("memory-space-str", lambda: tack.memory_space("0x1000"), TypeError),
    ("memory-space-beyond-uint64", lambda: tack.memory_space(BIG), TypeError),
    ("from-ptr-dtype-unknown", lambda: tack.array_from_ptr(ADDRESS, "bogus", 4), TypeError),
    ("from-ptr-dtype-None", lambda: tack.array_from_ptr(ADDRESS, None, 4), TypeError),
    ("from-ptr-shape-None", lambda: tack.array_from_ptr(ADDRESS, tack.f64, None), TypeError),
    ("from-ptr-shape-negative", lambda: tack.array_from_ptr(ADDRESS, tack.f64, (-1,)), ValueError),
    ("from-ptr-shape-overflow", lambda: tack.array_from_ptr(ADDRESS, tack.f64, (2**62, 4)), ValueError),
    ("from-ptr-shape-huge", lambda: tack.array_from_ptr(ADDRESS, tack.f64, HUGE), ValueError),
    ("from-ptr-device-int", lambda: tack.array_from_ptr(ADDRESS, tack.f64, 4, device=1), TypeError),
    ("from-ptr-device-unknown", lambda: tack.array_from_ptr(ADDRESS, tack.f64, 4, device="x"), ValueError),
    ("from-ptr-missing-shape", lambda: tack.array_from_ptr(ADDRESS, tack.f64), TypeError),
    ("from-ptr-unknown-keyword", lambda: tack.array_from_ptr(ADDRESS, tack.f64, 4, strides=8), TypeError),
    # ---- from_dlpack
    ("from-dlpack-no-argument", lambda: tack.from_dlpack(), TypeError),
    ("from-dlpack-two-positional", lambda: tack.from_dlpack(np.zeros(2), "cpu"), TypeError),
    ("from-dlpack-unknown-keyword", lambda: tack.from_dlpack(np.zeros(2), stream=1), TypeError),
    ("from-dlpack-None", lambda: tack.from_dlpack(None), TypeError),
    ("from-dlpack-int", lambda: tack.from_dlpack(5), TypeError),
    ("from-dlpack-list", lambda: tack.from_dlpack([1.0, 2.0]), TypeError),
    ("from-dlpack-device-int", lambda: tack.from_dlpack(np.zeros(2), device=0), TypeError),
    ("from-dlpack-device-unknown", lambda: tack.from_dlpack(np.zeros(2), device="tpu"), ValueError),
    ("from-dlpack-device-bad-ordinal", lambda: tack.from_dlpack(np.zeros(2), device="cpu:2"), ValueError),
    ("from-dlpack-copy-device-unknown", lambda: tack.from_dlpack(np.zeros(2), copy=True, device="tpu"),
     ValueError),
    ("from-dlpack-copy-int", lambda: tack.from_dlpack(5, copy=True), TypeError),
    ("from-dlpack-copy-list", lambda: tack.from_dlpack([1.0], copy=True), TypeError),
    # ---- device and default device
    ("device-no-argument", lambda: tack.device(), TypeError),
    ("device-None", lambda: tack.device(None), TypeError),
    ("device-int", lambda: tack.device(0), TypeError),
    ("device-bytes", lambda: tack.device(b"cpu"), TypeError),
    ("device-empty", lambda: tack.device(""), ValueError),
    ("device-unknown", lambda: tack.device("tpu"), ValueError),
    ("device-colon-only", lambda: tack.device("cpu:"), ValueError),
    ("device-no-backend", lambda: tack.device(":0"), ValueError),
    ("device-negative-ordinal", lambda: tack.device("cpu:-1"), ValueError),
    ("device-huge-ordinal", lambda: tack.device("cpu:" + "9" * 40), ValueError),
    ("device-long-name", lambda: tack.device("x" * 10000), ValueError),
    ("device-embedded-nul", lambda: tack.device("cpu\0:5"), ValueError),
    ("device-unknown-option", lambda: tack.device("cpu", bogus=1), ValueError),
    ("device-too-many-options", lambda: tack.device("cpu", **{f"o{i}": 1 for i in range(40)}), ValueError),
    ("device-options-on-a-device", lambda: tack.device(tack.device("cpu"), bogus=1), ValueError),
    ("device-context-not-a-handle", lambda: tack.device("level_zero", external_context=5.0), TypeError),
    ("device-context-str-handle", lambda: tack.device("level_zero", external_context={"driver": "x"}),
     TypeError),
    ("device-context-negative-handle", lambda: tack.device("level_zero", external_context={"driver": -1}),
     ValueError),
    ("device-context-huge-handle", lambda: tack.device("level_zero", external_context={"driver": BIG}),
     ValueError),
    ("device-context-missing-handles", lambda: tack.device("level_zero", external_context={"driver": 1}),
     ValueError),
    ("device-context-null-handles",
     lambda: tack.device("level_zero", external_context={"driver": 0, "device": 0, "context": 0}), ValueError),
    ("set-default-None", lambda: tack.set_default_device(None), TypeError),
    ("set-default-int", lambda: tack.set_default_device(1), TypeError),
    ("set-default-unknown", lambda: tack.set_default_device("tpu"), ValueError),
    ("set-default-bad-ordinal", lambda: tack.set_default_device("cpu:3"), ValueError),
    ("set-default-unknown-option", lambda: tack.set_default_device("cpu", bogus=True), ValueError),
    ("set-default-no-argument", lambda: tack.set_default_device(), TypeError),
    ("get-default-argument", lambda: tack.get_default_device("cpu"), TypeError),
    # ---- types that are not made directly
    ("new-Array", lambda: tack.Array(), TypeError),
    ("new-Device", lambda: tack.Device(), TypeError),
    ("new-DType", lambda: tack.DType(), TypeError),
    # ---- Array.reshape
    ("reshape-None", lambda: f32().reshape(None), TypeError),
    ("reshape-str", lambda: f32().reshape("6"), TypeError),
    ("reshape-float", lambda: f32().reshape(6.0), TypeError),
    ("reshape-object", lambda: f32().reshape(NoIndex()), TypeError),
    ("reshape-index-raises", lambda: f32().reshape(BadIndex()), ZeroDivisionError),
    ("reshape-keyword", lambda: f32().reshape(shape=6), TypeError),
    ("reshape-other-size", lambda: f32().reshape(7), ValueError),
    ("reshape-two-inferred", lambda: f32().reshape(-1, -1), ValueError),
    ("reshape-negative", lambda: f32().reshape(-2, -3), ValueError),
    ("reshape-inferred-beside-zero", lambda: f32().reshape(-1, 0), ValueError),
    ("reshape-beyond-int64", lambda: f32().reshape(2**63), ValueError),
    ("reshape-huge", lambda: f32().reshape((HUGE,)), ValueError),
    ("reshape-overflow", lambda: f32().reshape(2**62, 2**62, 0), ValueError),
    ("reshape-65-dims", lambda: f32((1,)).reshape((1,) * 65), ValueError),
    # ---- Array.to_device
    ("to-device-int", lambda: f32().to_device(5), TypeError),
    ("to-device-unknown", lambda: f32().to_device("tpu"), ValueError),
    ("to-device-nothing", lambda: f32().to_device(), TypeError),
    # ---- Array.from_numpy / fill
    ("from-numpy-other-shape", lambda: f32().from_numpy(np.zeros(5)), ValueError),
    ("from-numpy-not-numbers", lambda: f32().from_numpy("abc"), ValueError),
    ("from-numpy-None", lambda: f32().from_numpy(None), ValueError),
    ("from-numpy-ragged", lambda: f32().from_numpy([[1, 2, 3], [4, 5]]), ValueError),
    ("from-numpy-nothing", lambda: f32().from_numpy(), TypeError),
    ("fill-None", lambda: f32().fill(None), TypeError),
    ("fill-str", lambda: i64().fill("1"), TypeError),
    ("fill-list", lambda: i64().fill([1]), TypeError),
    ("fill-nothing", lambda: f32().fill(), TypeError),
    ("fill-int-beyond-int64", lambda: i64().fill(2**63), ValueError),
    ("fill-int-below-int64", lambda: i64().fill(-(2**63) - 1), ValueError),
    ("fill-huge-int", lambda: i64().fill(HUGE), ValueError),
    ("fill-negative-unsigned", lambda: u8().fill(-1), ValueError),
    ("fill-beyond-uint8", lambda: u8().fill(256), ValueError),
    ("fill-nan-integer", lambda: i64().fill(float("nan")), TypeError),
    ("fill-inf-integer", lambda: i64().fill(float("inf")), TypeError),
    ("fill-huge-float", lambda: f32().fill(HUGE), ValueError),
    # ---- Array.export_memory, __dlpack__, __dlpack_device__
    ("export-memory-cpu", lambda: f32().export_memory(), RuntimeError),
    ("export-memory-argument", lambda: f32().export_memory(1), TypeError),
    ("dlpack-positional", lambda: f32().__dlpack__(None), TypeError),
    ("dlpack-unknown-keyword", lambda: f32().__dlpack__(version=(1, 0)), TypeError),
    ("dlpack-copy", lambda: f32().__dlpack__(copy=True), BufferError),
    ("dlpack-max-version-int", lambda: f32().__dlpack__(max_version=1), TypeError),
    ("dlpack-max-version-list", lambda: f32().__dlpack__(max_version=[1, 0]), TypeError),
    ("dlpack-max-version-empty", lambda: f32().__dlpack__(max_version=()), TypeError),
    ("dlpack-max-version-str", lambda: f32().__dlpack__(max_version=("1", "0")), TypeError),
    ("dlpack-device-argument", lambda: f32().__dlpack_device__(1), TypeError),
]

# ---- Kernel (where this build of Tack has kernels)
HAS_KERNEL = hasattr(tack, "Kernel")
BUMP = "void bump(tack_index i, int32_t v, int32_t *x) { x[i] += v; }"
_kernels = {}


def bump():
    if "bump" not in _kernels:
        _kernels["bump"] = tack.Kernel(BUMP)
    return _kernels["bump"]


def i32(n=4):
    return tack.zeros(n, tack.i32)


KERNEL_CASES = [
    ("kernel-source-None", lambda: tack.Kernel(None), TypeError),
    ("kernel-source-bytes", lambda: tack.Kernel(BUMP.encode()), TypeError),
    ("kernel-source-empty", lambda: tack.Kernel(""), ValueError),
    ("kernel-source-garbage", lambda: tack.Kernel("x" * 100000), ValueError),
    ("kernel-name-int", lambda: tack.Kernel(BUMP, 5), TypeError),
    ("kernel-name-missing", lambda: tack.Kernel(BUMP, name="missing"), ValueError),
    ("kernel-device-int", lambda: tack.Kernel(BUMP, device=5), TypeError),
    ("kernel-device-unknown", lambda: tack.Kernel(BUMP, device="tpu"), ValueError),
    ("kernel-parameter-type", lambda: tack.Kernel("void f(tack_index i, int *y) { }"), TypeError),
    ("kernel-does-not-compile", lambda: tack.Kernel("void f(tack_index i, float *x) { x[i] = ; }"), RuntimeError),
    ("launch-nothing", lambda: bump().launch(), TypeError),
    ("launch-n-str", lambda: bump().launch("4", 1, i32()), TypeError),
    ("launch-n-float", lambda: bump().launch(4.0, 1, i32()), TypeError),
    ("launch-n-negative", lambda: bump().launch(-1, 1, i32()), ValueError),
    ("launch-n-beyond-int64", lambda: bump().launch(2**63, 1, i32()), ValueError),
    ("launch-n-huge", lambda: bump().launch(HUGE, 1, i32()), ValueError),
    ("launch-too-few", lambda: bump().launch(4, 1), TypeError),
    ("launch-too-many", lambda: bump().launch(4, 1, i32(), i32()), TypeError),
    ("launch-array-None", lambda: bump().launch(4, 1, None), TypeError),
    ("launch-array-list", lambda: bump().launch(4, 1, [0, 0, 0, 0]), TypeError),
    ("launch-array-numpy-strided", lambda: bump().launch(4, 1, np.zeros(8, np.int32)[::2]), ValueError),
    ("launch-array-dtype", lambda: bump().launch(4, 1, f32((4,))), TypeError),
    ("launch-scalar-str", lambda: bump().launch(4, "1", i32()), TypeError),
    ("launch-scalar-None", lambda: bump().launch(4, None, i32()), TypeError),
    ("launch-scalar-array", lambda: bump().launch(4, i32(), i32()), TypeError),
    ("launch-scalar-overflow", lambda: bump().launch(4, 2**31, i32()), ValueError),
    ("launch-scalar-huge", lambda: bump().launch(4, HUGE, i32()), ValueError),
    ("launch-read-only", lambda: bump()(1, tack.array_from_ptr(ADDRESS, tack.i32, 4)), ValueError),
    ("call-keyword", lambda: bump()(1, x=i32()), TypeError),
    ("build-device-int", lambda: bump().build(device=5), TypeError),
    ("target-device-int", lambda: bump().target(device=5), TypeError),
    ("target-device-unknown", lambda: bump().target("tpu"), ValueError),
    ("generated-source-unknown", lambda: bump().generated_source(backend="tpu"), ValueError),
]
if HAS_KERNEL:
    CASES += KERNEL_CASES

# Known defects: the correct behaviour is asserted, and the marker comes
# off when the defect is fixed (strict: an unexpected pass fails).
KNOWN = {
}


def params():
    for name, call, exc in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[name])] if name in KNOWN else []
        yield pytest.param(call, exc, id=name, marks=marks)


@pytest.mark.parametrize("call, exc", list(params()))
def test_bad_input_raises_the_documented_error_and_changes_nothing(call, exc):
    before = live()
    default = tack.get_default_device()
    with pytest.raises(BaseException) as info:
        call()
    error = info.value
    del info
    assert type(error) is exc, f"raised {type(error).__name__}: {error}"
    message = str(error)
    assert len(message) >= 10, f"the message says too little: {message!r}"
    del error
    if live() != before:
        gc.collect()  # only a reference cycle may hold what a failure made
    assert live() == before, "a failed call left Tack objects behind"
    assert tack.get_default_device() is default, "a failed call changed the default device"


def test_case_ids_are_unique():
    names = [name for name, _, _ in CASES]
    assert len(names) == len(set(names))
    assert set(KNOWN) <= set(names)


# --------------------------------------------------------------------------
# values that are legal although they look hostile: these must work


def test_legal_edges_work():
    before = live()
    assert tack.zeros((0, 2**40)).shape == (0, 2**40)
    assert tack.zeros(()).shape == ()
    assert tack.zeros((1,) * 64).ndim == 64
    a = tack.zeros((2, 3))
    assert a.reshape(np.int64(6)).shape == (6,)
    assert a.reshape([np.int32(3), -1]).shape == (3, 2)
    assert tack.array_from_ptr(0, tack.f32, (0,)).size == 0
    assert tack.array_from_ptr(2**64 - 8, tack.u8, 0).ptr == 2**64 - 8
    i = tack.zeros(2, tack.i64)
    i.fill(2**63 - 1)
    assert i.to_numpy().tolist() == [2**63 - 1] * 2
    u = tack.zeros(2, tack.u64)
    u.fill(2**64 - 1)
    assert u.to_numpy().tolist() == [2**64 - 1] * 2
    cap = a.__dlpack__(max_version=(-1, 0))  # below 1.0: legacy
    del cap
    del a, i, u
    assert live() == before


def test_an_integral_float_is_refused_by_an_int64_array_and_its_int_taken():
    # As a kernel's int64_t parameter: a float is refused even when exact.
    a = tack.zeros(1, tack.i64)
    with pytest.raises(TypeError, match=r"int\(\) or round\(\)"):
        a.fill(2.0**53)
    assert a.to_numpy()[0] == 0
    a.fill(int(2.0**53))
    assert a.to_numpy()[0] == 2**53


def test_max_version_from_the_far_future_gets_a_versioned_capsule():
    capsule = tack.zeros(3).__dlpack__(max_version=(2**70, 0))
    assert type(capsule).__name__ == "PyCapsule"


def test_default_device_survives_a_failed_change(restore_default_device):
    cpu = tack.set_default_device("cpu")
    for bad in ("tpu", "cpu:9", 3, None):
        with pytest.raises((TypeError, ValueError)):
            tack.set_default_device(bad)
        assert tack.get_default_device() is cpu


# A message from the C layer begins with the call that failed, in the
# spelling of the API the user called, and then the C call it ran, which a
# C user would find in the headers.
NAMED = [
    (lambda: tack.empty((2, -1)), ValueError, "tack.empty (tack_array_empty): shape[1] is negative"),
    (lambda: f32().reshape((4, 2)), ValueError, "Array.reshape (tack_array_reshape): cannot reshape"),
    (lambda: f32().reshape((-1, -1)), ValueError, "Array.reshape (tack_array_reshape): only one extent"),
    (lambda: tack.device("tpu"), ValueError, "tack.device (tack_device_open): unknown device 'tpu'"),
    (lambda: f32().export_memory(), RuntimeError, "Array.export_memory (tack_array_export_memory): "),
    (lambda: tack.array_from_ptr(ADDRESS + 1, tack.f32, (2,)), ValueError,
     "tack.array_from_ptr (tack_array_wrap): address 0x"),
    (lambda: tack.from_dlpack(np.zeros((4, 4))[:, ::2]), ValueError,
     "tack.from_dlpack (tack_array_from_dlpack_versioned): DLPack tensor is not C-contiguous"),
]


@pytest.mark.parametrize("call, error, start", NAMED, ids=[n[2].split(" ")[0] for n in NAMED])
def test_message_names_the_python_call_and_the_c_call(call, error, start):
    with pytest.raises(error) as info:
        call()
    assert str(info.value).startswith(start), str(info.value)


def test_python_names_of_c_calls_are_public_c_functions():
    """The extension's table of Python spellings names C calls that exist:
    a row left behind by a renamed function would never match."""
    from pathlib import Path
    import re

    root = Path(__file__).resolve().parents[2]
    table = (root / "src/python/errors.c").read_text()
    rows = re.findall(r'\{"(tack_[a-z0-9_]+)", "([A-Za-z_.]+)"\}', table)
    assert len(rows) > 20
    declared = set()
    for header in (root / "include/tack").glob("*.h"):
        declared |= set(re.findall(r"\b(tack_[a-z0-9_]+)\(", header.read_text()))
    assert [c for c, _ in rows if c not in declared] == []
    for _, python in rows:
        head, _, attr = python.partition(".")
        owner = tack if head == "tack" else getattr(tack, head)
        assert hasattr(owner, attr), python


def test_every_public_call_of_a_file_that_names_calls_names_itself():
    """A message is named by TACK_PUBLIC_CALL() on the first line of the
    public function: in a file that uses it, a fallible public function
    without it would leave its messages unnamed, which the C test sees only
    for the calls it lists. The kernel layer's files use it throughout."""
    from pathlib import Path
    import re

    root = Path(__file__).resolve().parents[2]
    public = set()
    for header in (root / "include/tack").glob("*.h"):
        public |= set(re.findall(r"TACK_API tack_status (tack_[a-z0-9_]+)\(", header.read_text()))
    definition = re.compile(r"^tack_status (tack_[a-z0-9_]+)\([^;{]*?\)\s*\{\n(.*)$", re.M)
    adopted, unnamed = [], []
    kernel_layer = root / "src/kernel"
    for source in sorted((root / "src").rglob("*.c")):
        text = source.read_text()
        if "TACK_PUBLIC_CALL();" not in text and source.parent != kernel_layer:
            continue
        adopted.append(source.relative_to(root).as_posix())
        unnamed += [f"{source.name}: {name}" for name, first in definition.findall(text)
                    if name in public and first.strip() != "TACK_PUBLIC_CALL();"]
    for path in ("src/core/array.c", "src/dlpack/import.c", "src/kernel/kernel.c", "src/kernel/build.c"):
        assert path in adopted, adopted
    assert unnamed == []
