"""Writes the seed corpus of tests/fuzz/fuzz_import.c into tests/fuzz/corpus/.

Each seed is one hand-described tensor in the byte layout read_recipe()
reads; the fuzzer grows the rest. Run from anywhere:

    python3 tests/fuzz/seeds.py

The files are committed; rerun after changing the layout.
"""

import pathlib

HERE = pathlib.Path(__file__).resolve().parent

VERSIONED, ASK_CPU, DEFAULT_CPU, NULL_DELETER = 1, 2, 4, 8
NULL_OUT, NULL_TENSOR, NO_CALLED, ROUND_TRIP = 0x20, 0x30, 0x40, 0x80
BUFFER, NULL, WILD, MISALIGNED = range(4)
S_NULL, S_C, S_RAW, S_PERTURBED = range(4)

DTYPES = {"i8": 0, "u8": 1, "i16": 2, "u16": 3, "i32": 4, "u32": 5, "i64": 6, "u64": 7, "f32": 8, "f64": 9,
          "bool": 10, "f16": 11, "bf16": 12, "c64": 13, "c128": 14}
DEVICE_TYPES = [1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 19]
INT64_MAX = (1 << 63) - 1
SPECIAL = [
    -1, -2, -(1 << 63), INT64_MAX, 1 << 62, (1 << 62) + 1, 1 << 61, 1 << 60,
    1 << 32, (1 << 32) + 1, 1 << 31, 3037000500, INT64_MAX // 4, INT64_MAX // 8 + 1, 65536, 0x5555555555555555,
]


def u8(v):
    return bytes([v & 0xFF])


def raw(v, n):
    return (v & ((1 << (8 * n)) - 1)).to_bytes(n, "little")


def i64(v):
    if 0 <= v < 16:
        return u8(v)
    if v in SPECIAL:
        return u8(0xA0 | SPECIAL.index(v))
    if -15 <= v < 0:
        return u8(0xB0 | -v)
    return u8(0xC0) + raw(v, 8)


def seed(
    *,
    mode=0,
    data=BUFFER,
    misalign=0,
    strides=S_NULL,
    major=1,
    minor=1,
    flags=0,
    device_type=1,
    device_id=0,
    shape=(2, 3),
    ndim=None,
    dtype="f32",
    code_bits=None,
    lanes=1,
    null_shape=False,
    byte_offset=0,
    wild=0,
    views=(),
    drop_seed=0x12345,
    raw_strides=(),
    perturb=None,
):
    out = u8(mode) + u8(data) + u8(misalign) + u8(strides)
    out += u8(0) if major == 1 else (u8(0x80 + major) if 0 <= major < 0x40 else u8(0xC0) + raw(major, 4))
    out += u8(minor) if 0 <= minor < 16 else u8(0xF0) + raw(minor, 4)
    out += u8(flags) if flags < 8 else u8(0x80) + raw(flags, 8)
    if device_type == 1:
        out += u8(0)
    elif device_type in DEVICE_TYPES:
        out += u8(0x80 | DEVICE_TYPES.index(device_type))
    else:
        out += u8(0xC0) + raw(device_type, 4)
    out += u8(0) if device_id == 0 else u8(0xC0) + raw(device_id, 4)
    nd = len(shape) if ndim is None else ndim
    if 0 <= nd < 8:
        out += u8(nd)
    elif 50 <= nd <= 81:
        out += u8(0xC0 + nd - 50)
    else:
        out += u8(0xF0) + raw(nd, 4)
    if code_bits is None:
        out += u8(DTYPES[dtype])
    else:
        out += u8(0xE0) + u8(code_bits[0]) + u8(code_bits[1])
    out += u8(0) if lanes == 1 else u8(0xF0) + raw(lanes, 2)
    out += u8(0xFF if null_shape else 0)
    if byte_offset == 0:
        out += u8(0)
    elif byte_offset < 0x40:
        out += u8(0x80 | byte_offset)
    else:
        out += u8(0xD0) + raw(byte_offset, 8)
    if data == WILD:
        out += u8(0x80) + raw(wild, 8)
    out += u8(len(views)) + raw(drop_seed, 4)
    entries = max(0, min(nd, 64))
    extents = list(shape) + [1] * (entries - len(shape))
    for e in extents[:entries]:
        out += i64(e)
    if strides == S_RAW:
        for s in raw_strides:
            out += i64(s)
    if strides == S_PERTURBED:
        out += u8(perturb[0]) + i64(perturb[1])
    for v in views:
        kind = v[0]
        out += u8(kind)
        if kind == 2:
            out += u8(v[1])
        elif kind == 3:
            out += u8(len(v[1]))
            for e in v[1]:
                out += i64(e)
    return out


SEEDS = {
    # accepted tensors
    "accept_legacy_f32_2x3": seed(),
    "accept_versioned_f64_4x5": seed(mode=VERSIONED, dtype="f64", shape=(4, 5)),
    "accept_versioned_read_only": seed(mode=VERSIONED, flags=1, dtype="u16", shape=(7,)),
    "accept_versioned_other_flags": seed(mode=VERSIONED, flags=6, dtype="i32", shape=(3, 1, 2)),
    "accept_future_minor": seed(mode=VERSIONED, minor=0xFFFFFFFF, dtype="i64", shape=(2, 2)),
    "accept_zero_dim_null_shape": seed(mode=VERSIONED, shape=(), null_shape=True, dtype="u64"),
    "accept_zero_dim": seed(shape=(), dtype="i8"),
    "accept_zero_size_wild_data": seed(data=WILD, wild=(1 << 64) - 3, shape=(4, 0), dtype="f64"),
    "accept_c_strides": seed(mode=VERSIONED, strides=S_C, shape=(2, 3, 4), dtype="i16"),
    "accept_stride_of_unit_extent": seed(strides=S_PERTURBED, shape=(3, 1, 4), perturb=(1, -7)),
    "accept_byte_offset": seed(mode=VERSIONED, byte_offset=16, shape=(5,), dtype="f64"),
    "accept_bf16_round_trip": seed(mode=VERSIONED | ROUND_TRIP, shape=(3, 2), dtype="bf16", views=[(0,)]),
    "accept_legacy_f16": seed(shape=(4,), dtype="f16"),
    "accept_bool": seed(mode=VERSIONED, shape=(5,), dtype="bool"),
    # complex128 needs its parts' alignment (8), not its size (16)
    "accept_c128_aligned_to_parts": seed(mode=VERSIONED, byte_offset=8, shape=(2,), dtype="c128"),
    "accept_c64": seed(shape=(2, 2), dtype="c64"),
    "accept_cuda_host": seed(device_type=3, device_id=7, shape=(6,)),
    "accept_rocm_host_on_cpu": seed(mode=ASK_CPU | DEFAULT_CPU, device_type=11, shape=(6,), dtype="u8"),
    "accept_max_ndim": seed(mode=VERSIONED, ndim=64, shape=(1,) * 63 + (3,), dtype="u32"),
    "accept_null_deleter": seed(mode=VERSIONED | NULL_DELETER, shape=(4,)),
    "accept_views_and_round_trip": seed(
        mode=VERSIONED | ROUND_TRIP,
        shape=(2, 3, 4),
        views=[(0,), (1,), (2, 1), (3, (4, 6)), (3, (5, 5))],
        drop_seed=0xDEADBEEF,
    ),
    "accept_legacy_views_round_trip": seed(
        mode=ROUND_TRIP, shape=(6, 2), dtype="i8", views=[(2, 0), (3, (3, -1, 2)), (1,)], drop_seed=7
    ),
    "accept_read_only_round_trip": seed(
        mode=VERSIONED | ROUND_TRIP, flags=1, shape=(3,), views=[(0,)], drop_seed=0xFFFFFFFE
    ),
    # refused: shape and ndim
    "refuse_ndim_negative": seed(ndim=-1, shape=()),
    "refuse_ndim_65": seed(mode=VERSIONED, ndim=65, shape=()),
    "refuse_ndim_int32_max": seed(ndim=0x7FFFFFFF, shape=()),
    "refuse_null_shape": seed(mode=VERSIONED, null_shape=True, shape=(2, 3)),
    "refuse_negative_extent": seed(shape=(3, -1)),
    "refuse_int64_min_extent": seed(mode=VERSIONED, shape=(-(1 << 63),)),
    "refuse_overflow_int64": seed(shape=(INT64_MAX, 2)),
    "refuse_overflow_square": seed(mode=VERSIONED, shape=(3037000500, 3037000500)),
    "refuse_overflow_bytes": seed(shape=(INT64_MAX // 4,), dtype="f64"),
    "zero_extent_beside_huge": seed(shape=(0, INT64_MAX)),
    # refused: strides, dtype, data
    "refuse_fortran_strides": seed(strides=S_RAW, shape=(2, 3), raw_strides=(1, 2)),
    "refuse_zero_strides": seed(mode=VERSIONED, strides=S_RAW, shape=(4, 4), raw_strides=(0, 0)),
    "refuse_perturbed_stride": seed(strides=S_PERTURBED, shape=(3, 4), perturb=(0, 5)),
    "refuse_huge_stride": seed(strides=S_RAW, shape=(2, 2), raw_strides=(INT64_MAX, 1)),
    "refuse_float8": seed(code_bits=(10, 8)),
    "refuse_bool_16": seed(mode=VERSIONED, code_bits=(6, 16)),
    "refuse_complex32": seed(code_bits=(5, 32)),
    "refuse_misaligned_c128": seed(data=MISALIGNED, misalign=4, dtype="c128", shape=(2,)),
    "refuse_opaque_bits_0": seed(mode=VERSIONED, code_bits=(3, 0)),
    "refuse_lanes_4": seed(lanes=4),
    "refuse_lanes_0": seed(mode=VERSIONED, lanes=0),
    "refuse_null_data": seed(data=NULL, shape=(3,)),
    "refuse_misaligned_f64": seed(data=MISALIGNED, misalign=3, dtype="f64", shape=(2,)),
    "refuse_misaligned_offset": seed(mode=VERSIONED, byte_offset=2, dtype="i32", shape=(2,)),
    "refuse_offset_wraps": seed(data=WILD, wild=(1 << 64) - 64, byte_offset=1 << 62, shape=(1,), dtype="u8"),
    # refused: devices
    "refuse_metal": seed(device_type=8),
    "refuse_opencl": seed(mode=VERSIONED, device_type=4),
    "refuse_unknown_device": seed(device_type=999),
    "refuse_negative_device": seed(device_type=-5),
    "refuse_cuda_on_cpu": seed(mode=ASK_CPU, device_type=2, device_id=1),
    "refuse_oneapi_on_cpu": seed(mode=VERSIONED | ASK_CPU, device_type=14),
    "gpu_without_device": seed(mode=DEFAULT_CPU, device_type=10, device_id=-1),
    # versions and null arguments
    "refuse_major_2": seed(mode=VERSIONED, major=2),
    "refuse_major_0": seed(mode=VERSIONED, major=0, minor=9),
    "refuse_major_huge_no_called": seed(mode=VERSIONED | NO_CALLED, major=0xFFFFFFFF),
    "refuse_major_2_null_deleter": seed(mode=VERSIONED | NULL_DELETER, major=2),
    "refuse_major_2_null_out": seed(mode=VERSIONED | NULL_OUT, major=2),
    "refuse_null_out_legacy": seed(mode=NULL_OUT),
    "refuse_null_out_versioned": seed(mode=VERSIONED | NULL_OUT | NO_CALLED),
    "refuse_null_tensor_legacy": seed(mode=NULL_TENSOR),
    "refuse_null_tensor_versioned": seed(mode=VERSIONED | NULL_TENSOR),
    "empty": b"",
    # Once defects, now fixed: kept as regressions.

    # a zero-size tensor with a NULL data pointer: import.c computes
    # NULL + byte_offset, undefined behaviour even for an offset of 0
    "zero_size_null_data": seed(mode=VERSIONED, data=NULL, shape=(0, 5)),
    # the same sum with a real pointer and an offset that wraps past the top
    # of the address space: a pointer overflow
    "zero_size_offset_wraps": seed(shape=(0,), byte_offset=(1 << 64) - 1),
    # a zero-size tensor whose other extents' product overflows int64: the
    # export computes its strides with a signed overflow
    "zero_extent_unrepresentable_strides": seed(
        mode=VERSIONED | ROUND_TRIP, shape=(0, 12, 867835745674527246), dtype="f32"
    ),
}

# Inputs that still break an invariant of the library: kept apart so that
# the corpus run passes, and checked by run_corpus.sh to still fail, so
# that each moves into the corpus once the library is fixed.
KNOWN = {}


def write(directory, seeds):
    directory.mkdir(exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    for name, data in seeds.items():
        (directory / name).write_bytes(data)
    print(f"wrote {len(seeds)} inputs to {directory}")


def main():
    write(HERE / "corpus", SEEDS)
    write(HERE / "known", KNOWN)


if __name__ == "__main__":
    main()
