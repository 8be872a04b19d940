/* Element types and their DLPack equivalents. */
#ifndef TACK_DTYPE_H
#define TACK_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tack_dtype {
    TACK_I8 = 0,
    TACK_U8,
    TACK_I16,
    TACK_U16,
    TACK_I32,
    TACK_U32,
    TACK_I64,
    TACK_U64,
    TACK_F32,
    TACK_F64,
    /* After the first ten, so that their values stay what they were. */
    TACK_BOOL, /* one byte, 0 or 1 (DLPack kDLBool, 8 bits) */
    TACK_F16,  /* IEEE 754 binary16 */
    TACK_BF16, /* bfloat16: the upper half of a binary32 */
    TACK_C64,  /* two float32, real then imaginary */
    TACK_C128, /* two float64, real then imaginary */
    TACK_NDTYPES
} tack_dtype;

/* Size in bytes of one element; 0 for a value outside the enum. */
TACK_API size_t tack_dtype_size(tack_dtype dtype);

/* NumPy-style name ("float32"); NULL for a value outside the enum. */
TACK_API const char *tack_dtype_name(tack_dtype dtype);

/* Short name ("f32", "bf16", "bool"); NULL for a value outside the enum. */
TACK_API const char *tack_dtype_short_name(tack_dtype dtype);

/* The C type a kernel uses for it ("float", "int32_t", "tack_f16"); NULL
 * outside the enum. The tack_ names are those every backend's kernel
 * prelude defines. */
TACK_API const char *tack_dtype_c_type(tack_dtype dtype);

/* Parses "float32", "f32", "int8", "u8", "bfloat16", "bool", ... On error
 * returns TACK_ETYPE, leaves *out untouched and sets the message. */
TACK_API tack_status tack_dtype_from_name(const char *name, tack_dtype *out);

/* Maps a DLPack (code, bits, lanes) to a dtype. On error (no equivalent, or
 * lanes != 1) returns TACK_ETYPE and leaves *out untouched. */
TACK_API tack_status tack_dtype_from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes, tack_dtype *out);

/* The DLPack (code, bits) of a dtype, lanes being 1. TACK_ETYPE outside the enum. */
TACK_API tack_status tack_dtype_to_dlpack(tack_dtype dtype, uint8_t *code, uint8_t *bits);

/* The Python array protocols' spellings, for exporters and importers of
 * the buffer protocol and the array interfaces. */

/* NumPy's kind letter ('i' signed, 'u' unsigned, 'f' floating point, 'b'
 * boolean, 'c' complex; 'V' for bfloat16, which NumPy knows only through
 * ml_dtypes, as two opaque bytes), as typestrs spell it; 0 for a value
 * outside the enum. */
TACK_API char tack_dtype_kind(tack_dtype dtype);

/* The buffer protocol's (struct-module) format, as NumPy exports the type
 * ("f", "l", "?", "e", "Zf"); NULL for bfloat16, which has no format (the
 * struct module and PEP 3118 define none, and NumPy exports none for
 * ml_dtypes' bfloat16), and for a value outside the enum. */
TACK_API const char *tack_dtype_format(tack_dtype dtype);

/* The array interfaces' typestr in the machine's byte order ("<f4",
 * "|u1", "|b1", "<c8"; bfloat16 is "<V2", as ml_dtypes' bfloat16 and
 * PyTorch's __cuda_array_interface__ spell it), written with its NUL into
 * `out` of `n` bytes (8 always suffice).
 * On error (TACK_ETYPE outside the enum, TACK_EVALUE for a NULL or short
 * `out`) *out is untouched. */
TACK_API tack_status tack_dtype_typestr(tack_dtype dtype, char *out, size_t n);

/* Maps a typestr (__array_interface__, __cuda_array_interface__) to a
 * dtype; "<V2" (on a little-endian machine) is bfloat16, while NumPy's
 * plain two-byte void, "|V2", is no Tack dtype. On error (TACK_ETYPE: no
 * Tack dtype, the other byte order included; TACK_EVALUE for a NULL out)
 * *out is untouched. */
TACK_API tack_status tack_dtype_from_typestr(const char *typestr, tack_dtype *out);

/* Maps a buffer-protocol format (NULL: unsigned bytes) and the exporter's
 * itemsize to a dtype: integer codes by their size, whatever C type they
 * name. On error (TACK_ETYPE: no Tack dtype, the other byte order
 * included; TACK_EVALUE for a NULL out) *out is untouched. */
TACK_API tack_status tack_dtype_from_format(const char *format, size_t itemsize, tack_dtype *out);

/* The bits of the float16 and bfloat16 nearest `value`, ties to even, as
 * one rounding from double (NumPy's float16 casts round so; PyTorch and
 * ml_dtypes round a double to float32 first, and can differ in the last
 * bit). Beyond the largest finite value the result is an infinity; a NaN
 * stays a NaN of the same sign: float16 keeps the top of its payload, as
 * NumPy does, bfloat16 is the quiet NaN 0x7fc0 with the sign, as ml_dtypes
 * makes it. Never fail. */
TACK_API uint16_t tack_float16_from_double(double value);
TACK_API uint16_t tack_bfloat16_from_double(double value);

/* The exact value of float16 and bfloat16 bits. Never fail. */
TACK_API double tack_float16_to_double(uint16_t bits);
TACK_API double tack_bfloat16_to_double(uint16_t bits);

#ifdef __cplusplus
}
#endif

#endif
