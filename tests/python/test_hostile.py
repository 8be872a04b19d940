"""Hand-built DLPack capsules and producers for every row of the failure
table. A refused tensor is never adopted: its deleter is not called by the
import, and the producer's capsule destructor releases it exactly once."""

import gc
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tack
from conftest import (
    DL_CODES,
    IS_COPIED,
    READ_ONLY,
    Producer,
    c_strides,
    capsule_name,
    element_count,
    host_values,
    kDLCPU,
    kDLCUDA,
    kDLCUDAHost,
    kDLCUDAManaged,
    kDLMetal,
    kDLOneAPI,
    kDLOpenCL,
    kDLROCM,
    kDLROCMHost,
    kDLVulkan,
)

versions = pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])


def refused(probe, exception, match=None, *, versioned=True, import_on=None, **fields):
    """Imports a hand-built capsule that must be refused; checks the deleter
    was not called and that the capsule was left for its producer."""
    t = probe.tensor(versioned=versioned, **fields)
    capsule = t.capsule()
    kwargs = {} if import_on is None else {"device": import_on}
    with pytest.raises(exception, match=match) as info:
        tack.from_dlpack(capsule, **kwargs)
    assert t.deleter_calls == 0, "a refused tensor's deleter was called by the import"
    assert capsule_name(capsule) == ("dltensor_versioned" if versioned else "dltensor")
    del capsule
    assert t.deleter_calls == 1, "the producer's capsule destructor did not release the refused tensor"
    return info.value


# --------------------------------------------------------------------------
# accepted tensors


@versions
def test_hand_built_capsule_is_adopted(probe, versioned):
    t = probe.tensor(versioned=versioned, shape=(2, 3), dtype=(2, 32, 1))
    capsule = t.capsule()
    a = tack.from_dlpack(capsule)
    assert a.ptr == t.data
    assert a.shape == (2, 3)
    assert a.dtype == tack.f32
    assert a.writable is True
    np.testing.assert_array_equal(a.to_numpy(), t.expected("float32"))
    assert capsule_name(capsule) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    del capsule  # adopted: the producer's destructor must not release it
    assert t.deleter_calls == 0
    a.fill(1.0)
    np.testing.assert_array_equal(t.expected("float32"), np.ones((2, 3), np.float32))
    del a
    assert t.deleter_calls == 1


@pytest.mark.parametrize("code, bits", sorted(DL_CODES), ids=sorted(DL_CODES.values()))
def test_every_dtype_code(probe, code, bits):
    t = probe.tensor(shape=(4,), dtype=(code, bits, 1))
    capsule = t.capsule()
    a = tack.from_dlpack(capsule)
    name = DL_CODES[(code, bits)]
    assert a.dtype == name
    np.testing.assert_array_equal(host_values(a), t.expected(name))
    del a, capsule
    assert t.deleter_calls == 1


@versions
def test_explicit_c_strides_are_accepted(probe, versioned):
    t = probe.tensor(versioned=versioned, shape=(2, 3, 4), strides="c")
    a = tack.from_dlpack(t.capsule())
    assert a.shape == (2, 3, 4)
    np.testing.assert_array_equal(a.to_numpy(), t.expected("float32"))
    del a
    assert t.deleter_calls == 1


def test_byte_offset_is_added_to_data(probe):
    t = probe.tensor(shape=(3,), dtype=(0, 32, 1), byte_offset=8)
    a = tack.from_dlpack(t.capsule())
    assert a.ptr == t.data + 8
    np.testing.assert_array_equal(a.to_numpy(), t.expected("int32"))
    del a
    assert t.deleter_calls == 1


@pytest.mark.parametrize("device_type", [kDLCPU, kDLCUDAHost, kDLROCMHost], ids=["CPU", "CUDAHost", "ROCMHost"])
def test_host_device_types_import_on_cpu(probe, device_type):
    t = probe.tensor(device=(device_type, 0))
    a = tack.from_dlpack(t.capsule())
    assert a.device is tack.device("cpu")
    assert a.ptr == t.data
    del a
    assert t.deleter_calls == 1


def test_read_only_flag_makes_a_read_only_array(probe):
    t = probe.tensor(shape=(4,), flags=READ_ONLY)
    a = tack.from_dlpack(t.capsule())
    assert a.writable is False
    before = t.expected("float32").copy()
    with pytest.raises(RuntimeError):
        a.fill(0)
    with pytest.raises(RuntimeError):
        a.reshape(2, 2).from_numpy(np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(t.expected("float32"), before)
    del a
    assert t.deleter_calls == 1


def test_other_flags_leave_the_array_writable(probe):
    t = probe.tensor(shape=(4,), flags=IS_COPIED)
    a = tack.from_dlpack(t.capsule())
    assert a.writable is True
    del a
    assert t.deleter_calls == 1


def test_newer_minor_version_is_accepted(probe):
    t = probe.tensor(version=(1, 99))
    a = tack.from_dlpack(t.capsule())
    assert a.shape == (2, 3)
    del a
    assert t.deleter_calls == 1


def test_zero_dimensional_with_null_shape(probe):
    t = probe.tensor(shape=(), shape_array=False, dtype=(2, 64, 1))
    a = tack.from_dlpack(t.capsule())
    assert a.shape == ()
    np.testing.assert_array_equal(a.to_numpy(), t.expected("float64"))
    del a
    assert t.deleter_calls == 1


@versions
def test_null_deleter_is_allowed(probe, versioned):
    # DLPack lets a producer with nothing to release leave the deleter NULL.
    t = probe.tensor(versioned=versioned, shape=(3,))
    t.struct.deleter = None
    capsule = t.capsule()
    a = tack.from_dlpack(capsule)
    v = a.reshape(1, 3)
    np.testing.assert_array_equal(v.to_numpy().ravel(), t.expected("float32"))
    del a, v, capsule
    gc.collect()
    assert t.deleter_calls == 0


def test_null_deleter_with_future_major_version(probe):
    t = probe.tensor(version=(2, 0))
    t.struct.deleter = None
    capsule = t.capsule()
    with pytest.raises(BufferError):
        tack.from_dlpack(capsule)
    del capsule
    assert t.deleter_calls == 0


# --------------------------------------------------------------------------
# refused tensors: ValueError


@versions
def test_null_data(probe, versioned):
    refused(probe, ValueError, versioned=versioned, data=None)


@versions
@pytest.mark.parametrize(
    "shape, strides",
    [((2, 3), (1, 2)), ((2, 3), (4, 1)), ((2, 3), (3, 2)), ((6,), (2,)), ((6,), (-1,)), ((2, 3), (0, 1)), ((4, 5), (5, 0))],
)
def test_non_c_contiguous_strides(probe, versioned, shape, strides):
    refused(probe, ValueError, versioned=versioned, shape=shape, strides=strides)


@versions
@pytest.mark.parametrize("device_type", [0, kDLOpenCL, kDLVulkan, 5, 6, 9, 12, 15, 16, 99, -1, 2**31 - 1])
def test_unknown_device_type(probe, versioned, device_type):
    refused(probe, ValueError, versioned=versioned, device=(device_type, 0))


@versions
def test_metal_is_refused_pointing_to_copy(probe, versioned):
    error = refused(probe, ValueError, versioned=versioned, device=(kDLMetal, 0))
    assert "copy=True" in str(error)


@versions
@pytest.mark.parametrize("ndim", [-1, -(2**31), 65, 1000])
def test_bad_ndim(probe, versioned, ndim):
    # the shape array is as long as ndim claims, where ndim is positive
    length = max(ndim, 1)
    refused(probe, ValueError, versioned=versioned, shape=(1,) * length, ndim=ndim)


def test_absurd_ndim_is_refused_before_reading_the_shape(tmp_path):
    # ndim = 2**31 - 1 over a one-entry shape array: reading the shape first
    # would crash, so this runs in its own process.
    script = textwrap.dedent(
        """
        import pathlib, subprocess, sys
        sys.path.insert(0, %r)
        import conftest, tack
        from conftest import Probe
        d = pathlib.Path(%r)
        (d / "p.c").write_text(conftest._PROBE_SOURCE)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / "p.so"), str(d / "p.c")], check=True)
        probe = Probe(str(d / "p.so"))
        t = probe.tensor(shape=(1,), ndim=2**31 - 1)
        c = t.capsule()
        try:
            tack.from_dlpack(c)
        except ValueError:
            pass
        else:
            raise SystemExit("accepted")
        assert t.deleter_calls == 0
        del c
        assert t.deleter_calls == 1
        print("ok")
        """
        % (str(pathlib.Path(__file__).parent), str(tmp_path))
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@versions
def test_null_shape_with_dimensions(probe, versioned):
    refused(probe, ValueError, versioned=versioned, shape=(2, 3), shape_array=False)


@versions
@pytest.mark.parametrize("shape", [(-1,), (3, -2), (0, -1), (-(2**63),)])
def test_negative_extent(probe, versioned, shape):
    refused(probe, ValueError, versioned=versioned, shape=shape)


@versions
@pytest.mark.parametrize("shape", [(2**40, 2**40), (2**62, 4), (2**63 - 1, 2)])
def test_overflowing_size(probe, versioned, shape):
    refused(probe, ValueError, versioned=versioned, shape=shape)


@pytest.mark.parametrize("name", ["used_dltensor", "used_dltensor_versioned", "something_else"])
def test_consumed_or_foreign_capsule(probe, name):
    t = probe.tensor(versioned=name.endswith("versioned"))
    capsule = t.capsule(name)
    with pytest.raises(ValueError):
        tack.from_dlpack(capsule)
    assert capsule_name(capsule) == name
    del capsule
    gc.collect()
    # not ours to release, and not the producer's any more either
    assert t.deleter_calls == 0


@versions
def test_capsule_imported_twice(probe, versioned):
    t = probe.tensor(versioned=versioned)
    capsule = t.capsule()
    a = tack.from_dlpack(capsule)
    with pytest.raises(ValueError):
        tack.from_dlpack(capsule)
    del capsule
    assert t.deleter_calls == 0
    del a
    assert t.deleter_calls == 1


# --------------------------------------------------------------------------
# refused tensors: TypeError


@versions
@pytest.mark.parametrize(
    "dtype",
    [
        (3, 64, 1),  # opaque handle
        (4, 32, 1),  # a bfloat of 32 bits
        (5, 32, 1),  # complex32
        (6, 16, 1),  # a bool of 16 bits
        (10, 8, 1),  # float8_e4m3fn
        (7, 32, 1),
        (200, 32, 1),
        (0, 7, 1),
        (1, 12, 1),
        (2, 7, 1),
        (2, 24, 1),
        (0, 128, 1),
        (2, 0, 1),
    ],
)
def test_unknown_dtype(probe, versioned, dtype):
    refused(probe, TypeError, versioned=versioned, dtype=dtype)


@versions
@pytest.mark.parametrize("lanes", [0, 2, 4, 65535])
def test_lanes_other_than_one(probe, versioned, lanes):
    refused(probe, TypeError, versioned=versioned, dtype=(2, 32, lanes))


# --------------------------------------------------------------------------
# devices that cannot wrap the tensor: RuntimeError, never a copy


def backend_available(name):
    try:
        tack.device(name)
    except (RuntimeError, ValueError):
        return False
    return True


@pytest.mark.parametrize(
    "device_type, backend",
    [(kDLCUDA, "cuda"), (kDLCUDAManaged, "cuda"), (kDLROCM, "hip"), (kDLOneAPI, "level_zero")],
    ids=["CUDA", "CUDAManaged", "ROCM", "OneAPI"],
)
def test_device_tensor_on_cpu_is_a_runtime_error_naming_its_device(probe, device_type, backend):
    for device in ("cpu", tack.device("cpu")):
        t = probe.tensor(device=(device_type, 0))
        capsule = t.capsule()
        with pytest.raises(RuntimeError) as info:
            tack.from_dlpack(capsule, device=device)
        assert backend in str(info.value)
        assert t.deleter_calls == 0
        assert capsule_name(capsule) == "dltensor_versioned"
        del capsule
        assert t.deleter_calls == 1


@pytest.mark.parametrize(
    "device_type, backend",
    [(kDLCUDA, "cuda"), (kDLROCM, "hip"), (kDLOneAPI, "level_zero")],
    ids=["CUDA", "ROCM", "OneAPI"],
)
def test_device_tensor_without_its_backend_is_a_runtime_error(probe, device_type, backend):
    if backend_available(backend):
        pytest.skip(f"{backend} is available here")
    t = probe.tensor(device=(device_type, 0))
    capsule = t.capsule()
    with pytest.raises(RuntimeError):
        tack.from_dlpack(capsule)
    assert t.deleter_calls == 0
    del capsule
    assert t.deleter_calls == 1


def test_failed_import_changes_nothing(probe):
    if backend_available("cuda"):
        pytest.skip("cuda is available here")
    t = probe.tensor()
    capsule = t.capsule()
    with pytest.raises((RuntimeError, ValueError)):
        tack.from_dlpack(capsule, device="cuda")
    assert t.deleter_calls == 0
    assert capsule_name(capsule) == "dltensor_versioned"
    a = tack.from_dlpack(capsule)
    assert a.ptr == t.data
    del a, capsule
    assert t.deleter_calls == 1


# --------------------------------------------------------------------------
# versions


@pytest.mark.parametrize("major", [2, 3, 255, 2**32 - 1])
def test_future_major_version_is_a_buffer_error_and_deleted(probe, major):
    t = probe.tensor(version=(major, 0), data=None, dtype=(99, 3, 7), device=(99, 0))
    capsule = t.capsule()
    with pytest.raises(BufferError):
        tack.from_dlpack(capsule)
    assert t.deleter_calls == 1, "a tensor of unknown major version must be deleted by the consumer"
    del capsule
    gc.collect()
    assert t.deleter_calls == 1, "the refused tensor was deleted twice"


def test_future_major_version_from_a_producer(probe):
    t = probe.tensor(version=(2, 0))
    producer = Producer(lambda **kw: t.capsule())
    with pytest.raises(BufferError):
        tack.from_dlpack(producer)
    assert t.deleter_calls == 1
    del producer
    assert t.deleter_calls == 1


# --------------------------------------------------------------------------
# producers


def test_producer_is_asked_for_versioned_first(probe):
    t = probe.tensor(versioned=True)
    producer = Producer(lambda **kw: t.capsule())
    a = tack.from_dlpack(producer)
    assert len(producer.calls) == 1
    assert producer.calls[0].get("max_version") == (1, 0)
    assert a.ptr == t.data
    del producer  # the source may go at once
    assert t.deleter_calls == 0
    del a
    assert t.deleter_calls == 1


def test_producer_without_max_version_falls_back_to_legacy(probe):
    t = probe.tensor(versioned=False)
    producer = Producer(lambda **kw: t.capsule(), versioned_ok=False)
    a = tack.from_dlpack(producer)
    assert len(producer.calls) == 2
    assert producer.calls[0].get("max_version") == (1, 0)
    assert "max_version" not in producer.calls[1]
    assert a.ptr == t.data
    del producer, a
    assert t.deleter_calls == 1


def test_producer_ignoring_max_version_with_legacy_capsule(probe):
    t = probe.tensor(versioned=False)
    producer = Producer(lambda **kw: t.capsule())
    a = tack.from_dlpack(producer)
    assert len(producer.calls) == 1
    assert a.ptr == t.data
    assert a.writable is True
    del producer, a
    assert t.deleter_calls == 1


def test_producer_refusing_a_tensor_leaves_it_to_the_producer(probe):
    t = probe.tensor(data=None)
    producer = Producer(lambda **kw: t.capsule())
    with pytest.raises(ValueError):
        tack.from_dlpack(producer)
    assert t.deleter_calls == 0
    del producer
    assert t.deleter_calls == 1


@pytest.mark.parametrize("error", [RuntimeError("boom"), BufferError("no"), ValueError("bad"), KeyError("k")])
def test_producer_raising_propagates(error):
    def make(**kw):
        raise error

    with pytest.raises(type(error)) as info:
        tack.from_dlpack(Producer(make))
    assert info.value is error


def test_producer_raising_type_error_twice_propagates():
    def make(**kw):
        raise TypeError("never")

    producer = Producer(make)
    with pytest.raises(TypeError, match="never"):
        tack.from_dlpack(producer)
    assert len(producer.calls) == 2


@pytest.mark.parametrize("result", [42, None, "dltensor", b"\x00" * 8, np.zeros(3)], ids=["int", "None", "str", "bytes", "ndarray"])
def test_producer_returning_a_non_capsule_is_a_type_error(result):
    with pytest.raises(TypeError):
        tack.from_dlpack(Producer(lambda **kw: result))


def test_object_without_dlpack_is_a_type_error():
    with pytest.raises(TypeError):
        tack.from_dlpack(object())
    with pytest.raises(TypeError):
        tack.from_dlpack([1.0, 2.0])


def test_producer_returning_a_consumed_capsule(probe):
    t = probe.tensor()
    producer = Producer(lambda **kw: t.capsule("used_dltensor_versioned"))
    with pytest.raises(ValueError):
        tack.from_dlpack(producer)
    del producer
    assert t.deleter_calls == 0


# --------------------------------------------------------------------------
# fuzz: hand-built tensors with random fields never crash, and either import
# correctly or raise the documented exception


MAX_NDIM = 64
HOST_DEVICES = {kDLCPU, kDLCUDAHost, kDLROCMHost}
ALLOWED = (ValueError, TypeError, BufferError)


@st.composite
def tensors(draw):
    ndim_choice = draw(st.sampled_from(["normal", "normal", "normal", "bad"]))
    if ndim_choice == "normal":
        shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=4)))
        if draw(st.integers(0, 9)) == 0:
            i = draw(st.integers(0, max(len(shape) - 1, 0)))
            shape = shape[:i] + (draw(st.sampled_from([-1, -7, 2**40, 2**62, 2**63 - 1])),) + shape[i + 1 :]
        ndim = len(shape)
    else:
        ndim = draw(st.sampled_from([-1, -100, 65, 70]))
        shape = (1,) * max(ndim, 0)
    stride_choice = draw(st.sampled_from(["null", "c", "c", "random", "swap"]))
    if stride_choice == "null" or ndim != len(shape):
        strides = None
    elif stride_choice == "c":
        strides = c_strides(shape)
    elif stride_choice == "swap" and len(shape) >= 2:
        strides = list(c_strides(shape))
        strides[0], strides[-1] = strides[-1], strides[0]
        strides = tuple(strides)
    else:
        strides = tuple(draw(st.lists(st.integers(-3, 30), min_size=len(shape), max_size=len(shape))))
    dtype = draw(
        st.one_of(
            st.sampled_from(sorted(DL_CODES)).map(lambda cb: (cb[0], cb[1], 1)),
            st.tuples(st.integers(0, 8), st.sampled_from([0, 1, 7, 8, 16, 32, 64, 128]), st.sampled_from([1, 1, 2, 4])),
        )
    )
    device = draw(st.sampled_from([kDLCPU, kDLCPU, kDLCPU, kDLCUDAHost, kDLROCMHost, kDLMetal, kDLOpenCL, 0, 99]))
    versioned = draw(st.booleans())
    major = draw(st.sampled_from([1, 1, 1, 1, 2])) if versioned else 1
    flags = draw(st.sampled_from([0, 0, READ_ONLY, IS_COPIED, READ_ONLY | IS_COPIED])) if versioned else 0
    null_data = draw(st.integers(0, 9)) == 0
    itemsize = max(1, dtype[1] // 8)
    byte_offset = itemsize * draw(st.integers(0, 3))
    return dict(
        versioned=versioned,
        shape=shape,
        ndim=ndim,
        strides=strides,
        dtype=dtype,
        device=(device, 0),
        version=(major, 0),
        flags=flags,
        data=None if null_data else "auto",
        byte_offset=byte_offset,
    )


def expectation(f):
    """(faults, ambiguous): exception types that must (one of them) be
    raised, and ones that may be raised instead of succeeding."""
    if f["versioned"] and f["version"][0] > 1:
        return {BufferError}, set()
    faults, ambiguous = set(), set()
    shape, ndim = f["shape"], f["ndim"]
    if f["data"] is None:
        # A zero-size tensor may come with a null pointer (PyTorch exports
        # empty tensors that way); otherwise null data is refused.
        (ambiguous if element_count(shape) == 0 else faults).add(ValueError)
    if ndim < 0 or ndim > MAX_NDIM:
        faults.add(ValueError)
    count = element_count(shape)
    if count is None:  # a negative extent, or more than 2**63 elements
        faults.add(ValueError)
    code, bits, lanes = f["dtype"]
    nbytes = None if count is None else count * max(1, bits // 8) * max(1, lanes)
    if lanes != 1 or (code, bits) not in DL_CODES:
        faults.add(TypeError)
        if nbytes is not None and nbytes >= 2**63:
            ambiguous.add(ValueError)
    elif nbytes is not None and nbytes >= 2**63:
        faults.add(ValueError)
    elif nbytes is not None and nbytes > 2**48:
        ambiguous.update({ValueError, MemoryError})
    if count == 0:
        rest = element_count([e for e in shape if e])
        if rest is None or rest * max(1, bits // 8) > 2**48:
            ambiguous.add(ValueError)  # empty, but the other extents are absurd (NumPy refuses too)
    strides = f["strides"]
    if strides is not None and ndim == len(shape) and tuple(strides) != c_strides(shape):
        meaningful = [i for i, e in enumerate(shape) if e > 1]
        if count == 0 or all(strides[i] == c_strides(shape)[i] for i in meaningful):
            ambiguous.add(ValueError)  # differs only where an extent is 0 or 1
        else:
            faults.add(ValueError)
    if f["device"][0] not in HOST_DEVICES:
        faults.add(ValueError)
    return faults, ambiguous


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(fields=tensors())
def test_fuzz_hand_built_tensors(probe, fields):
    faults, ambiguous = expectation(fields)
    t = probe.tensor(**fields)
    capsule = t.capsule()
    try:
        a = tack.from_dlpack(capsule)
    except ALLOWED + (MemoryError,) as exc:
        event(type(exc).__name__)
        assert faults or ambiguous, f"refused a valid tensor: {exc!r}"
        assert isinstance(exc, tuple(faults | ambiguous)), f"{exc!r} but expected one of {faults | ambiguous}"
        expected_calls = 1 if isinstance(exc, BufferError) else 0
        assert t.deleter_calls == expected_calls
        del capsule
        assert t.deleter_calls == 1
        return
    event("accepted")
    assert not faults, f"accepted a tensor that should raise one of {faults}"
    assert a.shape == tuple(fields["shape"])
    assert a.dtype == DL_CODES[fields["dtype"][:2]]
    if t.data is not None:
        assert a.ptr == t.data + fields["byte_offset"]
    assert a.writable is not bool(fields["flags"] & READ_ONLY)
    if a.nbytes <= (1 << 20):
        np.testing.assert_array_equal(host_values(a), t.expected(a.dtype.name))
    views = [a.reshape(-1)] if a.size and a.nbytes <= (1 << 20) else []
    del capsule
    assert t.deleter_calls == 0
    del a
    assert t.deleter_calls == (0 if views else 1)
    del views
    assert t.deleter_calls == 1
