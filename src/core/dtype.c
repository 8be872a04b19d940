/* Every mapping Tack makes for a dtype comes from the one table below, a row
 * per dtype: its names, the C type kernels use, its DLPack (code, bits), the
 * kind letter of array-interface typestrs, the buffer protocol's format and
 * the alignment its elements need. A new dtype is a new enum value and a
 * new row. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* NumPy exports int64 as 'l' where a long has 64 bits, so a round trip
 * through the buffer protocol keeps the type NumPy would give it. */
#if LONG_MAX == INT64_MAX
#define FORMAT_I64 "l"
#define FORMAT_U64 "L"
#else
#define FORMAT_I64 "q"
#define FORMAT_U64 "Q"
#endif

static const struct {
    const char *name, *short_name, *c_type;
    uint8_t code, bits;
    char kind;          /* NumPy's dtype.kind, as typestrs spell it */
    const char *format; /* struct-module format, as NumPy exports it; NULL: none */
    uint8_t align;      /* a complex number's is its parts' */
} dtypes[TACK_NDTYPES] = {
    [TACK_I8] = {"int8", "i8", "int8_t", kDLInt, 8, 'i', "b", 1},
    [TACK_U8] = {"uint8", "u8", "uint8_t", kDLUInt, 8, 'u', "B", 1},
    [TACK_I16] = {"int16", "i16", "int16_t", kDLInt, 16, 'i', "h", 2},
    [TACK_U16] = {"uint16", "u16", "uint16_t", kDLUInt, 16, 'u', "H", 2},
    [TACK_I32] = {"int32", "i32", "int32_t", kDLInt, 32, 'i', "i", 4},
    [TACK_U32] = {"uint32", "u32", "uint32_t", kDLUInt, 32, 'u', "I", 4},
    [TACK_I64] = {"int64", "i64", "int64_t", kDLInt, 64, 'i', FORMAT_I64, 8},
    [TACK_U64] = {"uint64", "u64", "uint64_t", kDLUInt, 64, 'u', FORMAT_U64, 8},
    [TACK_F32] = {"float32", "f32", "float", kDLFloat, 32, 'f', "f", 4},
    [TACK_F64] = {"float64", "f64", "double", kDLFloat, 64, 'f', "d", 8},
    [TACK_BOOL] = {"bool", "bool", "bool", kDLBool, 8, 'b', "?", 1},
    [TACK_F16] = {"float16", "f16", "tack_f16", kDLFloat, 16, 'f', "e", 2},
    /* No struct-module format, and NumPy's kind for ml_dtypes' bfloat16. */
    [TACK_BF16] = {"bfloat16", "bf16", "tack_bf16", kDLBfloat, 16, 'V', NULL, 2},
    [TACK_C64] = {"complex64", "c64", "tack_c64", kDLComplex, 64, 'c', "Zf", 4},
    [TACK_C128] = {"complex128", "c128", "tack_c128", kDLComplex, 128, 'c', "Zd", 8},
};

static int valid(tack_dtype d) { return (unsigned)d < TACK_NDTYPES; }

size_t tack_dtype_size(tack_dtype d) { return valid(d) ? dtypes[d].bits / 8u : 0; }
const char *tack_dtype_name(tack_dtype d) { return valid(d) ? dtypes[d].name : NULL; }
const char *tack_dtype_short_name(tack_dtype d) { return valid(d) ? dtypes[d].short_name : NULL; }
const char *tack_dtype_c_type(tack_dtype d) { return valid(d) ? dtypes[d].c_type : NULL; }
char tack_dtype_kind(tack_dtype d) { return valid(d) ? dtypes[d].kind : 0; }
const char *tack_dtype_format(tack_dtype d) { return valid(d) ? dtypes[d].format : NULL; }
size_t tack_dtype_alignment(tack_dtype d) { return valid(d) ? dtypes[d].align : 0; }

/* "int8, uint8, ..., float64" for messages, so that they name every dtype
 * the table has. */
static const char *all_names(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < TACK_NDTYPES && used < n; d++) {
        int w = snprintf(buf + used, n - used, "%s%s", d ? ", " : "", dtypes[d].name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* The dtype of a kind letter and an element size in bytes, or -1. */
static int by_kind(char kind, size_t size)
{
    for (int d = 0; d < TACK_NDTYPES; d++)
        if (dtypes[d].kind == kind && dtypes[d].bits / 8u == size)
            return d;
    return -1;
}

tack_status tack_dtype_from_name(const char *name, tack_dtype *out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    if (name) {
        for (int d = 0; d < TACK_NDTYPES; d++) {
            if (!strcmp(name, dtypes[d].name) || !strcmp(name, dtypes[d].short_name)) {
                *out = (tack_dtype)d;
                return TACK_OK;
            }
        }
    }
    char names[320];
    return tack_error_set(TACK_ETYPE, "unsupported dtype '%s'; use one of %s", name ? name : "(null)",
                          all_names(names, sizeof names));
}

tack_status tack_dtype_from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes, tack_dtype *out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    if (lanes != 1)
        return tack_error_set(TACK_ETYPE,
                              "DLPack dtype with %u lanes has no Tack equivalent; only lanes == 1 (scalar "
                              "elements) can be imported",
                              (unsigned)lanes);
    for (int d = 0; d < TACK_NDTYPES; d++) {
        if (dtypes[d].code == code && dtypes[d].bits == bits) {
            *out = (tack_dtype)d;
            return TACK_OK;
        }
    }
    char names[320];
    return tack_error_set(TACK_ETYPE,
                          "DLPack dtype (code %u, bits %u) has no Tack equivalent; Tack arrays hold %s: convert "
                          "the tensor first",
                          (unsigned)code, (unsigned)bits, all_names(names, sizeof names));
}

tack_status tack_dtype_to_dlpack(tack_dtype d, uint8_t *code, uint8_t *bits)
{
    TACK_PUBLIC_CALL();
    if (!code || !bits)
        return tack_error_set(TACK_EVALUE, "code and bits must not be NULL");
    if (!valid(d))
        return tack_error_set(TACK_ETYPE, "dtype %d has no DLPack equivalent", (int)d);
    *code = dtypes[d].code;
    *bits = dtypes[d].bits;
    return TACK_OK;
}

/* Byte-order marks: '|' says the order does not matter (single bytes). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NATIVE_ORDER '>'
#define FOREIGN_ORDER '<'
#else
#define NATIVE_ORDER '<'
#define FOREIGN_ORDER '>'
#endif

tack_status tack_dtype_typestr(tack_dtype d, char *out, size_t n)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    if (!valid(d))
        return tack_error_set(TACK_ETYPE, "dtype %d has no typestr", (int)d);
    size_t size = tack_dtype_size(d);
    char text[8];
    snprintf(text, sizeof text, "%c%c%zu", size == 1 ? '|' : NATIVE_ORDER, dtypes[d].kind, size);
    if (strlen(text) >= n)
        return tack_error_set(TACK_EVALUE, "%zu bytes cannot hold '%s'", n, text);
    memcpy(out, text, strlen(text) + 1);
    return TACK_OK;
}

tack_status tack_dtype_from_typestr(const char *typestr, tack_dtype *out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    const char *t = typestr ? typestr : "";
    /* A byte order, a kind letter and a size in bytes without a leading
     * zero: "<f4", "|u1", "<c16". */
    size_t size = 0;
    int ok = t[0] && strchr("<>|=", t[0]) && t[1] && t[2] >= '1' && t[2] <= '9';
    const char *p = t + 2;
    while (ok && *p >= '0' && *p <= '9' && p - t < 5)
        size = size * 10 + (size_t)(*p++ - '0');
    int d = ok && !*p ? by_kind(t[1], size) : -1;
    /* A void of two bytes is bfloat16 only as ml_dtypes and PyTorch spell
     * it, with a byte order; NumPy's own "|V2" is any two bytes. */
    if (d >= 0 && t[1] == 'V' && t[0] != NATIVE_ORDER && t[0] != FOREIGN_ORDER)
        d = -1;
    if (d >= 0 && t[0] == FOREIGN_ORDER && size > 1)
        return tack_error_set(TACK_ETYPE,
                              "typestr '%s' has no Tack dtype: it is of the other byte order, and Tack arrays are "
                              "in the machine's ('%c'): byte-swap the data first",
                              t, NATIVE_ORDER);
    if (d < 0) {
        char names[320];
        return tack_error_set(TACK_ETYPE, "typestr '%s' has no Tack dtype; Tack arrays hold %s", t,
                              all_names(names, sizeof names));
    }
    *out = (tack_dtype)d;
    return TACK_OK;
}

/* The kind of a struct-module format code: integer codes name C types whose
 * sizes vary by platform, so the exporter's itemsize decides among them;
 * the others have one size, which the itemsize must be (*size), and "Z"
 * before a float code is a complex number of twice its size. 0 for codes
 * without one. */
static char format_kind(const char *f, size_t *size)
{
    static const char floats[] = "efd";
    static const size_t float_size[] = {2, 4, 8};
    *size = 0;
    if (f[0] == 'Z' && f[1] && !f[2] && strchr(floats, f[1])) {
        *size = 2 * float_size[strchr(floats, f[1]) - floats];
        return 'c';
    }
    if (!f[0] || f[1])
        return 0;
    if (strchr("bhilqn", f[0]))
        return 'i';
    if (strchr("BHILQN", f[0]))
        return 'u';
    if (strchr(floats, f[0])) {
        *size = float_size[strchr(floats, f[0]) - floats];
        return 'f';
    }
    if (f[0] == '?') {
        *size = 1;
        return 'b';
    }
    return 0;
}

tack_status tack_dtype_from_format(const char *format, size_t itemsize, tack_dtype *out)
{
    TACK_PUBLIC_CALL();
    if (!out)
        return tack_error_set(TACK_EVALUE, "out is NULL");
    /* A NULL format means unsigned bytes, as the buffer protocol says. */
    const char *shown = format ? format : "B", *f = shown;
    char order = '@';
    if (*f && strchr("@=<>!", *f))
        order = *f++;
    size_t size;
    char kind = format_kind(f, &size);
    int d = kind && (!size || size == itemsize) ? by_kind(kind, itemsize) : -1;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    int foreign = order == '<';
#else
    int foreign = order == '>' || order == '!';
#endif
    if (d >= 0 && foreign && itemsize > 1)
        return tack_error_set(TACK_ETYPE,
                              "the buffer's format '%s' is of the other byte order; Tack arrays are in the "
                              "machine's order: byte-swap it first (np.asarray(obj).astype(...))",
                              shown);
    if (d < 0) {
        char names[320];
        return tack_error_set(TACK_ETYPE, "the buffer's format '%s' (%zu-byte items) has no Tack dtype; Tack arrays hold %s",
                              shown, itemsize, all_names(names, sizeof names));
    }
    *out = (tack_dtype)d;
    return TACK_OK;
}

/* ---- float16 and bfloat16 ------------------------------------------------ */

/* The nearest value with `mbits` stored significand bits and an exponent
 * field of `ebits` bits (IEEE 754 layout), ties to even, rounded once from
 * the double. NaNs are the callers'. */
static uint16_t narrow(uint64_t b, int mbits, int ebits)
{
    uint16_t sign = (uint16_t)((b >> 63) << (mbits + ebits));
    int e = (int)((b >> 52) & 0x7ff);
    uint64_t sig = (b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int bias = (1 << (ebits - 1)) - 1, top = (1 << ebits) - 1;
    uint16_t inf = (uint16_t)(top << mbits);
    /* Subnormal doubles lie far below half the smallest subnormal of
     * either format. */
    if (e == 0)
        return sign;
    int exp = e - 1023 + bias;
    if (exp >= top)
        return sign | inf;
    /* Bits of the 53-bit significand to drop: more below the normal range,
     * where the result is subnormal. */
    int shift = 52 - mbits + (exp < 1 ? 1 - exp : 0);
    if (shift > 62)
        return sign;
    uint64_t kept = sig >> shift, rest = sig & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
    if (rest > half || (rest == half && (kept & 1)))
        kept++;
    /* Normal: the significand's leading bit adds one to the exponent field,
     * and a carry out of the significand moves the exponent up, to the
     * infinity at the top. Subnormal: a carry makes the smallest normal. */
    uint64_t bits = exp < 1 ? kept : ((uint64_t)(exp - 1) << mbits) + kept;
    return sign | (uint16_t)(bits >= inf ? inf : bits);
}

static uint64_t double_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static int is_nan_bits(uint64_t b) { return (b & 0x7ff0000000000000u) == 0x7ff0000000000000u && (b << 12); }

uint16_t tack_float16_from_double(double value)
{
    uint64_t b = double_bits(value);
    if (is_nan_bits(b)) {
        /* The payload's top bits, and never an infinity. */
        uint16_t payload = (uint16_t)((b >> 42) & 0x3ff);
        return (uint16_t)((b >> 48) & 0x8000) | 0x7c00 | (payload ? payload : 1);
    }
    return narrow(b, 10, 5);
}

uint16_t tack_bfloat16_from_double(double value)
{
    uint64_t b = double_bits(value);
    if (is_nan_bits(b))
        return (uint16_t)((b >> 48) & 0x8000) | 0x7fc0;
    return narrow(b, 7, 8);
}

double tack_float16_to_double(uint16_t bits)
{
    int e = (bits >> 10) & 0x1f;
    uint64_t m = bits & 0x3ffu;
    uint64_t sign = (uint64_t)(bits >> 15) << 63, d;
    if (e == 0x1f) {
        /* Infinity, or a NaN with the same payload. */
        d = sign | 0x7ff0000000000000u | (m << 42);
    } else if (e == 0) {
        double v = ldexp((double)m, -24);
        return bits >> 15 ? -v : v;
    } else {
        d = sign | ((uint64_t)(e - 15 + 1023) << 52) | (m << 42);
    }
    double v;
    memcpy(&v, &d, sizeof v);
    return v;
}

double tack_bfloat16_to_double(uint16_t bits)
{
    /* The upper half of a float32: exact, NaN payloads included. */
    uint32_t f = (uint32_t)bits << 16;
    float v;
    memcpy(&v, &f, sizeof v);
    return (double)v;
}
