/*
 * The Level Zero backend's dialect: the OpenCL C prelude every generated
 * kernel starts with (integer widths, atomics, half), its entry point, and
 * the dtypes it cannot take. See src/backend/level_zero/level_zero.c.
 */
#include "../prelude.h"
#include "level_zero.h"

#define NO_COMPLEX "OpenCL C has no complex type; complex parameters work on the cpu backend"
static const char *const ze_lacks[TACK_NDTYPES] = {
    [TACK_BOOL] = "OpenCL C allows no bool kernel parameter (the size of its bool is the device's); pass 0 and 1 "
                  "as uint8_t",
    [TACK_C64] = NO_COMPLEX,
    [TACK_C128] = NO_COMPLEX,
};
#undef NO_COMPLEX

const struct tack_dialect ze_dialect = {
    .name = "level_zero",
    .prelude = "#ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
               "#ifdef cl_khr_int64_base_atomics\n#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n#endif\n"
               "#ifdef cl_khr_int64_extended_atomics\n"
               "#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable\n#endif\n"
               /* OpenCL C fixes its integer widths (char is signed 8 bits,
                * long 64) and has no stdint.h. */
               "typedef char int8_t;\ntypedef uchar uint8_t;\n"
               "typedef short int16_t;\ntypedef ushort uint16_t;\n"
               "typedef int int32_t;\ntypedef uint uint32_t;\n"
               "typedef long int64_t;\ntypedef ulong uint64_t;\n"
               "typedef long tack_index;\n" TACK_PRELUDE_TYPES("bool", "__UINTPTR_TYPE__")
               /* The atomics: OpenCL's own on 32 bits, the int64 extensions'
                * on 64, compare-and-swap loops for floating point. Every
                * array is __global (the entry's parameters are), so the
                * user's generic pointers cast to it. Overloadable, as every
                * OpenCL C compiler that Level Zero drives is clang. A 64-bit
                * one on a device without the extension does not compile. */
               "#define TACK_ATOMIC_(op, fn, T) static inline __attribute__((overloadable)) T "
               "tack_atomic_##op(T *p, T v) { return fn((volatile __global T *)p, v); }\n"
               "#define TACK_ATOMIC_FLOAT_(T, U, cas, as_t, as_u) static inline __attribute__((overloadable)) T "
               "tack_atomic_add(T *p, T v) { volatile __global U *q = (volatile __global U *)p; U old = *q, seen; "
               "do { seen = old; old = cas(q, seen, as_u(as_t(seen) + v)); } while (old != seen); "
               "return as_t(old); }\n"
               "TACK_ATOMIC_(add, atomic_add, int) TACK_ATOMIC_(add, atomic_add, uint)\n"
               "TACK_ATOMIC_(min, atomic_min, int) TACK_ATOMIC_(min, atomic_min, uint)\n"
               "TACK_ATOMIC_(max, atomic_max, int) TACK_ATOMIC_(max, atomic_max, uint)\n"
               "TACK_ATOMIC_FLOAT_(float, uint, atomic_cmpxchg, as_float, as_uint)\n"
               "#ifdef cl_khr_int64_base_atomics\n"
               "TACK_ATOMIC_(add, atom_add, long) TACK_ATOMIC_(add, atom_add, ulong)\n"
               "#ifdef cl_khr_fp64\nTACK_ATOMIC_FLOAT_(double, ulong, atom_cmpxchg, as_double, as_ulong)\n#endif\n"
               "#endif\n"
               "#ifdef cl_khr_int64_extended_atomics\n"
               "TACK_ATOMIC_(min, atom_min, long) TACK_ATOMIC_(min, atom_min, ulong)\n"
               "TACK_ATOMIC_(max, atom_max, long) TACK_ATOMIC_(max, atom_max, ulong)\n"
               "#endif\n"
               /* The reductions: each work-item applies its own
                * contribution through the atomics above, one atomic each
                * (no sub-group combining: correct, and no faster than
                * tack_atomic_*); a float min or max by compare-and-swap,
                * which OpenCL C has no atomic for, ignoring NaN as fmin
                * and fmax do (a NaN contribution gives up, a NaN target
                * is replaced). The value converts to the target's type; a
                * const target does not compile. */
               "#define TACK_RPICK_(op, T) static inline __attribute__((overloadable)) void tack_rpick_##op(T *p, T v) "
               "{ (void)tack_atomic_##op(p, v); }\n"
               "#define TACK_RPICK_FLOAT_(op, cmp, T, U, cas, as_t, as_u) static inline __attribute__((overloadable)) "
               "void tack_rpick_##op(T *p, T v) { volatile __global U *q = (volatile __global U *)p; U old = *q, seen; "
               "if (v != v) return; while (v cmp as_t(old) || as_t(old) != as_t(old)) { seen = old; "
               "old = cas(q, seen, as_u(v)); if (old == seen) break; } }\n"
               "TACK_RPICK_(min, int) TACK_RPICK_(min, uint) TACK_RPICK_(max, int) TACK_RPICK_(max, uint)\n"
               "TACK_RPICK_FLOAT_(min, <, float, uint, atomic_cmpxchg, as_float, as_uint)\n"
               "TACK_RPICK_FLOAT_(max, >, float, uint, atomic_cmpxchg, as_float, as_uint)\n"
               "#if defined(cl_khr_int64_base_atomics) && defined(cl_khr_fp64)\n"
               "TACK_RPICK_FLOAT_(min, <, double, ulong, atom_cmpxchg, as_double, as_ulong)\n"
               "TACK_RPICK_FLOAT_(max, >, double, ulong, atom_cmpxchg, as_double, as_ulong)\n#endif\n"
               "#ifdef cl_khr_int64_extended_atomics\n"
               "TACK_RPICK_(min, long) TACK_RPICK_(min, ulong) TACK_RPICK_(max, long) TACK_RPICK_(max, ulong)\n#endif\n"
               "#define tack_reduce_add(p, v) ((void)tack_atomic_add((p), (__typeof__(*(p)))(v)))\n"
               "#define tack_reduce_min(p, v) tack_rpick_min((p), (__typeof__(*(p)))(v))\n"
               "#define tack_reduce_max(p, v) tack_rpick_max((p), (__typeof__(*(p)))(v))\n"
               "#define TACK_BACKEND_LEVEL_ZERO 1\n"
               "#define TACK_INLINE_ static inline\n"
               /* What the code after the kernel's source calls, where
                * OpenCL's own names (get_global_id, atomic_cmpxchg) could
                * be a macro of the user's. */
               "static inline tack_index tack_global_id_(unsigned d) { return (tack_index)get_global_id(d); }\n"
               "static inline tack_index tack_global_size_(unsigned d) { return (tack_index)get_global_size(d); }\n"
               "static inline bool tack_check_claim_(volatile __global unsigned *f) "
               "{ return atomic_cmpxchg(f, 0u, 1u) == 0u; }\n"
               "#define tack_bits_of_float_(f) as_uint(f)\n"
               "#define tack_float_of_bits_(u) as_float(u)\n"
               /* half is a type of its own, parameters and arithmetic, on a
                * device with cl_khr_fp16; OpenCL C has no bfloat16. */
               "#ifdef cl_khr_fp16\n#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
               "typedef half tack_f16;\n"
               "#define TACK_F16_NATIVE 1\n"
               "static inline float tack_f16_to_float(tack_f16 h) { return (float)h; }\n"
               "static inline tack_f16 tack_f16_from_float(float f) { return (tack_f16)f; }\n"
               "#else\n" TACK_PRELUDE_F16_STORAGE "#endif\n" TACK_PRELUDE_BF16_STORAGE,
    .language = TACK_CHECK_OPENCL,
    /* Work-items, each index one's, the last index along dimension 0;
     * each loop strides over its global size, so any group count covers
     * the domain. */
    .grid = {.head = "__kernel void ",
             .space = "__global ",
             .index = {"tack_global_id_(0)", "tack_global_id_(1)", "tack_global_id_(2)"},
             .stride = {"tack_global_size_(0)", "tack_global_size_(1)", "tack_global_size_(2)"}},
    .offline = TACK_CODE_NONE,
    .lacks = ze_lacks,
};
