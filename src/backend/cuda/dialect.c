/*
 * The CUDA backend's dialect: the CUDA C prelude every generated kernel
 * starts with (integer widths, half types, atomics), its entry point, and
 * the dtypes it cannot take. See src/backend/cuda/cuda.c.
 */
#include "../prelude.h"
#include "cuda.h"

const struct tack_dialect cuda_dialect = {
    .name = "cuda",
    /* NVRTC has no C library headers; these are the LP64 and LLP64
     * widths alike, since long long is 64 bits on both. NVRTC warns of
     * every helper a kernel leaves unused (#177), ahead of the user's own
     * messages in a failed compile's log: not of the prelude's. */
    .prelude = "#pragma nv_diag_suppress 177\n"
               "typedef signed char int8_t;\ntypedef unsigned char uint8_t;\n"
               "typedef short int16_t;\ntypedef unsigned short uint16_t;\n"
               "typedef int int32_t;\ntypedef unsigned int uint32_t;\n"
               "typedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"
               "typedef int64_t tack_index;\n" TACK_PRELUDE_TYPES("bool", "unsigned long long")
               "#define TACK_INLINE_ static inline\n"
               /* __half and __nv_bfloat16 are the toolkit's headers', which
                * Tack puts on NVRTC's include path when it finds them
                * (tack_nvrtc_api_get); without them the types are the
                * storage structs, which pass and load the same way. */
               "#if __has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>)\n"
               "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
               "typedef __half tack_f16;\ntypedef __nv_bfloat16 tack_bf16;\n"
               "#define TACK_F16_NATIVE 1\n#define TACK_BF16_NATIVE 1\n"
               "static inline float tack_f16_to_float(tack_f16 h) { return __half2float(h); }\n"
               "static inline tack_f16 tack_f16_from_float(float f) { return __float2half_rn(f); }\n"
               "static inline float tack_bf16_to_float(tack_bf16 b) { return __bfloat162float(b); }\n"
               "static inline tack_bf16 tack_bf16_from_float(float f) { return __float2bfloat16_rn(f); }\n"
               "#else\n"
               "#define tack_bits_of_float_(f) __float_as_uint(f)\n"
               "#define tack_float_of_bits_(u) __uint_as_float(u)\n" TACK_PRELUDE_F16_STORAGE
                   TACK_PRELUDE_BF16_STORAGE "#endif\n"
               /* The source is C; CUDA is C++, which spells C99's restrict so. */
               "#define restrict __restrict__\n"
               "#define TACK_BACKEND_CUDA 1\n"
               /* The atomics, as overloads of CUDA's own. CUDA has no
                * signed 64-bit add: two's complement adds the same bits
                * unsigned. A double add is native from sm_60; before it,
                * a compare-and-swap loop. */
               "#define TACK_ATOMIC_(op, fn, T, U) static __device__ __forceinline__ T tack_atomic_##op(T *p, T v) "
               "{ return (T)fn((U *)p, (U)v); }\n"
               "TACK_ATOMIC_(add, atomicAdd, int32_t, int) TACK_ATOMIC_(add, atomicAdd, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(add, atomicAdd, int64_t, unsigned long long)\n"
               "TACK_ATOMIC_(add, atomicAdd, uint64_t, unsigned long long) TACK_ATOMIC_(add, atomicAdd, float, float)\n"
               "TACK_ATOMIC_(min, atomicMin, int32_t, int) TACK_ATOMIC_(min, atomicMin, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(min, atomicMin, int64_t, long long)\n"
               "TACK_ATOMIC_(min, atomicMin, uint64_t, unsigned long long)\n"
               "TACK_ATOMIC_(max, atomicMax, int32_t, int) TACK_ATOMIC_(max, atomicMax, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(max, atomicMax, int64_t, long long)\n"
               "TACK_ATOMIC_(max, atomicMax, uint64_t, unsigned long long)\n"
               "static __device__ __forceinline__ double tack_atomic_add(double *p, double v)\n{\n"
               "#if __CUDA_ARCH__ >= 600\n    return atomicAdd(p, v);\n#else\n"
               "    unsigned long long *q = (unsigned long long *)p, old = *q, seen;\n"
               "    do {\n        seen = old;\n"
               "        old = atomicCAS(q, seen, (unsigned long long)__double_as_longlong("
               "__longlong_as_double((long long)seen) + v));\n"
               "    } while (old != seen);\n"
               "    return __longlong_as_double((long long)old);\n#endif\n}\n"
               /* The reductions, warp-aggregated from sm_70 (where
                * __match_any_sync is): the active lanes that share a target
                * combine their values by pointer jumping along the lanes of
                * their group (each step a lane adds the value of the lane
                * `next` groups on, then takes that lane's next, so after
                * log2(group) steps the group's lowest lane holds the whole),
                * and that lane alone applies it, one atomic per target and
                * warp. Every active lane takes every step (the shuffles
                * need them all), whatever its group. Before sm_70 each lane
                * applies its own. */
               "#define TACK_RDEV_ static __device__ __forceinline__\n" TACK_PRELUDE_REDUCE_CXX TACK_PRELUDE_CUDA_GRID
                   TACK_PRELUDE_CHECK_CLAIM_CXX
               "template <int OP, class T> TACK_RDEV_ void tack_reduce_(T *p, typename tack_rid_<T>::type v)\n{\n"
               "#if __CUDA_ARCH__ >= 700\n"
               "    const unsigned active = __activemask();\n"
               "    const unsigned peers = __match_any_sync(active, (unsigned long long)p);\n"
               "    unsigned lane;\n"
               "    asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
               "    const unsigned above = peers & ~((2u << lane) - 1u);\n"
               "    unsigned next = above ? (unsigned)__ffs(above) - 1u : 32u;\n"
               "    while (__any_sync(active, next < 32u)) {\n"
               "        const unsigned from = next < 32u ? next : lane;\n"
               "        const T other = __shfl_sync(active, v, from);\n"
               "        const unsigned further = __shfl_sync(active, next, from);\n"
               "        if (next < 32u) {\n            v = tack_rjoin_<OP>(v, other);\n            next = further;\n        }\n"
               "    }\n"
               "    if ((unsigned)__ffs(peers) - 1u == lane)\n        tack_rapply_<OP>(p, v);\n"
               "#else\n    tack_rapply_<OP>(p, v);\n#endif\n}\n"
               "#pragma nv_diag_default 177\n",
    .language = TACK_CHECK_CXX,
    /* Blocks of threads, each index a thread's, the last index along x;
     * each loop strides over its grid dimension, so any grid covers the
     * domain. */
    .grid = {.head = "extern \"C\" __global__ void ", .space = "", .index = TACK_CUDA_GRID_INDEX,
             .stride = TACK_CUDA_GRID_STRIDE},
    .offline = TACK_CODE_PTX,
    .lacks = tack_cxx_lacks,
};
