/* What several backends' dialects share (src/backend/prelude.c): pieces
 * of prelude text, CUDA's thread grid, which HIP's dialect takes too, and
 * the dtypes a C++ device compiler lacks. Private to src/backend/. */
#ifndef TACK_BACKEND_PRELUDE_H
#define TACK_BACKEND_PRELUDE_H

#include "../core/toolchain.h"

/* Tack's own names of the types its generated code uses after the
 * kernel's definitions and source (tack_source_type), where a #define of
 * the user's could take int64_t or bool: typedefs of the dialect's own
 * types, made before the definitions, so that each is exactly the type the
 * name meant then (a __builtin_types_compatible_p or _Generic against it
 * still matches int64_t). After the dialect's int8_t ... uint64_t; BOOL
 * and UPTR: its boolean type and an unsigned integer the size of a
 * pointer. Every spelling Tack keeps for itself begins tack_ or TACK_, and
 * a kernel's definitions may not (tack_build_options_copy). */
#define TACK_PRELUDE_TYPES(BOOL, UPTR)                                                                     \
    "typedef int8_t tack_i8_;\ntypedef uint8_t tack_u8_;\ntypedef int16_t tack_i16_;\n"                  \
    "typedef uint16_t tack_u16_;\ntypedef int32_t tack_i32_;\ntypedef uint32_t tack_u32_;\n"              \
    "typedef int64_t tack_i64_;\ntypedef uint64_t tack_u64_;\ntypedef " BOOL " tack_bool_;\n"            \
    "typedef " UPTR " tack_uptr_;\n"

/* CUDA's thread indices, which HIP shares: blocks of threads along x, y, z.
 * Functions the prelude defines (TACK_PRELUDE_CUDA_GRID, after TACK_RDEV_),
 * so that the entry, written after the user's source, names no member x,
 * y or z that a macro of the user's could replace. */
#define TACK_CUDA_GRID_INDEX {"tack_grid_index_x_()", "tack_grid_index_y_()", "tack_grid_index_z_()"}
#define TACK_CUDA_GRID_STRIDE {"tack_grid_stride_x_()", "tack_grid_stride_y_()", "tack_grid_stride_z_()"}
#define TACK_CUDA_GRID_DIM_(d)                                                                              \
    "TACK_RDEV_ tack_index tack_grid_index_" #d "_(void) { return (tack_index)blockIdx." #d " * blockDim." #d \
    " + threadIdx." #d "; }\nTACK_RDEV_ tack_index tack_grid_stride_" #d "_(void) { return (tack_index)blockDim." #d \
    " * gridDim." #d "; }\n"
#define TACK_PRELUDE_CUDA_GRID TACK_CUDA_GRID_DIM_(x) TACK_CUDA_GRID_DIM_(y) TACK_CUDA_GRID_DIM_(z)

/* Why a C++ device compiler (NVRTC, hipRTC) takes no complex parameter:
 * C++ has no C99 complex type. A dialect's `lacks`. */
extern const char *const tack_cxx_lacks[TACK_NDTYPES];

/* tack_f16 and tack_bf16 for a prelude whose compiler has no such type: a
 * two-byte struct that kernels load and store whole (its layout and
 * alignment are those of the compilers' own types, so parameters pass the
 * same way), and the conversions to and from float, rounding to nearest
 * even, in C that every dialect compiles. The prelude defines uint16_t,
 * uint32_t, TACK_INLINE_ (how its helpers are declared), and
 * tack_bits_of_float_(f) and tack_float_of_bits_(u), which reinterpret. */
#define TACK_PRELUDE_F16_STORAGE                                                                             \
    "typedef struct { uint16_t bits; } tack_f16;\n"                                                          \
    "#define TACK_F16_NATIVE 0\n"                                                                            \
    "TACK_INLINE_ float tack_f16_to_float(tack_f16 h)\n{\n"                                                  \
    "    uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;\n" \
    "    if (e == 0x1fu)\n        return tack_float_of_bits_(sign | 0x7f800000u | (m << 13));\n"               \
    "    if (e == 0u) {\n        float v = (float)m * 5.9604644775390625e-8f; /* 2^-24 */\n"                 \
    "        return sign ? -v : v;\n    }\n"                                                                 \
    "    return tack_float_of_bits_(sign | ((e + 112u) << 23) | (m << 13));\n}\n"                            \
    "TACK_INLINE_ tack_f16 tack_f16_from_float(float f)\n{\n"                                                \
    "    uint32_t x = tack_bits_of_float_(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;\n"             \
    "    tack_f16 h;\n"                                                                                      \
    "    if (a >= 0x47800000u) /* from 2^16: infinity, or a quiet NaN */\n"                                  \
    "        h.bits = (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u));\n"     \
    "    else if (a < 0x38800000u) /* below 2^-14: the sum's rounding is the subnormal's */\n"               \
    "        h.bits = (uint16_t)(sign | (tack_bits_of_float_(tack_float_of_bits_(a) + 0.5f) - 0x3f000000u));\n" \
    "    else /* rebias; half an ulp less one, plus the kept bit if odd, rounds to even */\n"                \
    "        h.bits = (uint16_t)(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));\n"           \
    "    return h;\n}\n"

/* The reductions for CUDA and HIP (C++): tack_reduce_add, _min and _max
 * over tack_reduce_<op>(p, v), which the prelude defines after this (its
 * combining, or none), and tack_rapply_<op>(p, v), the one atomic:
 * tack_atomic_add, _min or _max, a compare-and-swap loop for a float min
 * or max, which neither has. A float min or max ignores NaN, as C's fmin
 * and fmax do (the kernels guide, "Reductions"): tack_rjoin_ keeps the
 * other value where one is NaN, and the loop gives a NaN contribution up
 * at once and replaces a NaN target, so that an all-NaN input leaves the
 * target as it was. The value converts to the target's type; a const
 * target, or a type without atomics, does not compile. The prelude
 * defines the atomics and TACK_RDEV_ (how these are declared). */
#define TACK_PRELUDE_REDUCE_CXX                                                                              \
    "template <class T> struct tack_rid_ { typedef T type; };\n"                                             \
    "template <int OP, class T> TACK_RDEV_ T tack_rjoin_(T a, T b) "                                         \
    "{ return OP == 0 ? (T)(a + b) : OP == 1 ? (b < a || a != a ? b : a) : (b > a || a != a ? b : a); }\n"   \
    "#define TACK_RAPPLY_INT_(T) template <int OP> TACK_RDEV_ void tack_rapply_(T *p, T v) "                  \
    "{ if (OP == 0) tack_atomic_add(p, v); else if (OP == 1) tack_atomic_min(p, v); "                        \
    "else tack_atomic_max(p, v); }\n"                                                                        \
    "TACK_RAPPLY_INT_(int32_t) TACK_RAPPLY_INT_(uint32_t) TACK_RAPPLY_INT_(int64_t) TACK_RAPPLY_INT_(uint64_t)\n" \
    "#define TACK_RAPPLY_FLOAT_(T, U, to, from) template <int OP> TACK_RDEV_ void tack_rapply_(T *p, T v) "   \
    "{ if (OP == 0) { tack_atomic_add(p, v); return; } if (v != v) return; U *q = (U *)p, old = *q, seen; " \
    "while ((OP == 1 ? v < from(old) : v > from(old)) || from(old) != from(old)) { seen = old; "            \
    "old = atomicCAS(q, seen, to(v)); if (old == seen) break; } }\n"                                         \
    "TACK_RAPPLY_FLOAT_(float, unsigned, __float_as_uint, __uint_as_float)\n"                                \
    "TACK_RAPPLY_FLOAT_(double, unsigned long long, (unsigned long long)__double_as_longlong, "              \
    "__longlong_as_double)\n"                                                                                \
    "#define tack_reduce_add(p, v) tack_reduce_<0>((p), (v))\n"                                              \
    "#define tack_reduce_min(p, v) tack_reduce_<1>((p), (v))\n"                                              \
    "#define tack_reduce_max(p, v) tack_reduce_<2>((p), (v))\n"

/* The check record's flag, claimed by the first violation (tack_source_hidden),
 * for CUDA and HIP: atomicCAS is a name a macro of the user's could take
 * where the record's code is written, after the kernel's source. */
#define TACK_PRELUDE_CHECK_CLAIM_CXX \
    "TACK_RDEV_ bool tack_check_claim_(unsigned *f) { return atomicCAS(f, 0u, 1u) == 0u; }\n"

#define TACK_PRELUDE_BF16_STORAGE                                                                            \
    "typedef struct { uint16_t bits; } tack_bf16;\n"                                                         \
    "#define TACK_BF16_NATIVE 0\n"                                                                           \
    "TACK_INLINE_ float tack_bf16_to_float(tack_bf16 b)\n{\n"                                                \
    "    return tack_float_of_bits_((uint32_t)b.bits << 16);\n}\n"                                           \
    "TACK_INLINE_ tack_bf16 tack_bf16_from_float(float f)\n{\n"                                              \
    "    uint32_t x = tack_bits_of_float_(f);\n"                                                             \
    "    tack_bf16 b;\n"                                                                                     \
    "    if ((x & 0x7fffffffu) > 0x7f800000u)\n        b.bits = (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */\n" \
    "    else\n        b.bits = (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"                         \
    "    return b;\n}\n"

#endif
