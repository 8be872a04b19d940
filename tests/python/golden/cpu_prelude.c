#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <math.h>
typedef int64_t tack_index;
#define TACK_BACKEND_CPU 1
#if defined(__GNUC__)
#define TACK_INLINE_ static inline __attribute__((unused))
#else
#define TACK_INLINE_ static inline
#endif
TACK_INLINE_ uint32_t tack_bits_of_float_(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
}
TACK_INLINE_ float tack_float_of_bits_(uint32_t u)
{
    union { uint32_t u; float f; } v;
    v.u = u;
    return v.f;
}
#if defined(__FLT16_MAX__)
__extension__ typedef _Float16 tack_f16;
#define TACK_F16_NATIVE 1
TACK_INLINE_ float tack_f16_to_float(tack_f16 h) { return (float)h; }
TACK_INLINE_ tack_f16 tack_f16_from_float(float f) { return (tack_f16)f; }
#else
typedef struct { uint16_t bits; } tack_f16;
#define TACK_F16_NATIVE 0
TACK_INLINE_ float tack_f16_to_float(tack_f16 h)
{
    uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
    if (e == 0x1fu)
        return tack_float_of_bits_(sign | 0x7f800000u | (m << 13));
    if (e == 0u) {
        float v = (float)m * 5.9604644775390625e-8f; /* 2^-24 */
        return sign ? -v : v;
    }
    return tack_float_of_bits_(sign | ((e + 112u) << 23) | (m << 13));
}
TACK_INLINE_ tack_f16 tack_f16_from_float(float f)
{
    uint32_t x = tack_bits_of_float_(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    tack_f16 h;
    if (a >= 0x47800000u) /* from 2^16: infinity, or a quiet NaN */
        h.bits = (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u));
    else if (a < 0x38800000u) /* below 2^-14: the sum's rounding is the subnormal's */
        h.bits = (uint16_t)(sign | (tack_bits_of_float_(tack_float_of_bits_(a) + 0.5f) - 0x3f000000u));
    else /* rebias; half an ulp less one, plus the kept bit if odd, rounds to even */
        h.bits = (uint16_t)(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
    return h;
}
#endif
#if defined(__BFLT16_MAX__)
__extension__ typedef __bf16 tack_bf16;
#define TACK_BF16_NATIVE 1
TACK_INLINE_ float tack_bf16_to_float(tack_bf16 b) { return (float)b; }
TACK_INLINE_ tack_bf16 tack_bf16_from_float(float f) { return (tack_bf16)f; }
#else
typedef struct { uint16_t bits; } tack_bf16;
#define TACK_BF16_NATIVE 0
TACK_INLINE_ float tack_bf16_to_float(tack_bf16 b)
{
    return tack_float_of_bits_((uint32_t)b.bits << 16);
}
TACK_INLINE_ tack_bf16 tack_bf16_from_float(float f)
{
    uint32_t x = tack_bits_of_float_(f);
    tack_bf16 b;
    if ((x & 0x7fffffffu) > 0x7f800000u)
        b.bits = (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    else
        b.bits = (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    return b;
}
#endif
typedef float _Complex tack_c64;
typedef double _Complex tack_c128;
#define TACK_ATOMIC_FETCH_(op, T, s) static inline T tack_atomic_##op##_##s##_(T *p, T v) { return __atomic_fetch_##op(p, v, __ATOMIC_RELAXED); }
#define TACK_ATOMIC_CAS_ADD_(T, s) static inline T tack_atomic_add_##s##_(T *p, T v) { T old, next; __atomic_load(p, &old, __ATOMIC_RELAXED); do { next = old + v; } while (!__atomic_compare_exchange(p, &old, &next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); return old; }
#define TACK_ATOMIC_PICK_(op, cmp, T, s) static inline T tack_atomic_##op##_##s##_(T *p, T v) { T old; __atomic_load(p, &old, __ATOMIC_RELAXED); while (v cmp old && !__atomic_compare_exchange(p, &old, &v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return old; }
TACK_ATOMIC_FETCH_(add, int32_t, i32) TACK_ATOMIC_FETCH_(add, uint32_t, u32)
TACK_ATOMIC_FETCH_(add, int64_t, i64) TACK_ATOMIC_FETCH_(add, uint64_t, u64)
TACK_ATOMIC_CAS_ADD_(float, f32) TACK_ATOMIC_CAS_ADD_(double, f64)
TACK_ATOMIC_PICK_(min, <, int32_t, i32) TACK_ATOMIC_PICK_(min, <, uint32_t, u32)
TACK_ATOMIC_PICK_(min, <, int64_t, i64) TACK_ATOMIC_PICK_(min, <, uint64_t, u64)
TACK_ATOMIC_PICK_(max, >, int32_t, i32) TACK_ATOMIC_PICK_(max, >, uint32_t, u32)
TACK_ATOMIC_PICK_(max, >, int64_t, i64) TACK_ATOMIC_PICK_(max, >, uint64_t, u64)
#define TACK_ATOMIC_INT_(op, p, v) _Generic((p), int32_t *: tack_atomic_##op##_i32_, uint32_t *: tack_atomic_##op##_u32_, int64_t *: tack_atomic_##op##_i64_, uint64_t *: tack_atomic_##op##_u64_)((p), (v))
#define tack_atomic_add(p, v) _Generic((p), int32_t *: tack_atomic_add_i32_, uint32_t *: tack_atomic_add_u32_, int64_t *: tack_atomic_add_i64_, uint64_t *: tack_atomic_add_u64_, float *: tack_atomic_add_f32_, double *: tack_atomic_add_f64_)((p), (v))
#define tack_atomic_min(p, v) TACK_ATOMIC_INT_(min, p, v)
#define tack_atomic_max(p, v) TACK_ATOMIC_INT_(max, p, v)
