#include <string.h>

#include "internal.h"

static const struct {
    const char *name, *short_name, *c_type;
    uint8_t code, bits;
} dtypes[TACK_NDTYPES] = {
    [TACK_I8] = {"int8", "i8", "int8_t", kDLInt, 8},
    [TACK_U8] = {"uint8", "u8", "uint8_t", kDLUInt, 8},
    [TACK_I16] = {"int16", "i16", "int16_t", kDLInt, 16},
    [TACK_U16] = {"uint16", "u16", "uint16_t", kDLUInt, 16},
    [TACK_I32] = {"int32", "i32", "int32_t", kDLInt, 32},
    [TACK_U32] = {"uint32", "u32", "uint32_t", kDLUInt, 32},
    [TACK_I64] = {"int64", "i64", "int64_t", kDLInt, 64},
    [TACK_U64] = {"uint64", "u64", "uint64_t", kDLUInt, 64},
    [TACK_F32] = {"float32", "f32", "float", kDLFloat, 32},
    [TACK_F64] = {"float64", "f64", "double", kDLFloat, 64},
};

static int valid(tack_dtype d) { return (unsigned)d < TACK_NDTYPES; }

size_t tack_dtype_size(tack_dtype d) { return valid(d) ? dtypes[d].bits / 8u : 0; }
const char *tack_dtype_name(tack_dtype d) { return valid(d) ? dtypes[d].name : NULL; }
const char *tack_dtype_short_name(tack_dtype d) { return valid(d) ? dtypes[d].short_name : NULL; }
const char *tack_dtype_c_type(tack_dtype d) { return valid(d) ? dtypes[d].c_type : NULL; }

tack_status tack_dtype_from_name(const char *name, tack_dtype *out)
{
    if (!out)
        return tack_error_set(TACK_EVALUE, "tack_dtype_from_name: out is NULL");
    if (name) {
        for (int d = 0; d < TACK_NDTYPES; d++) {
            if (!strcmp(name, dtypes[d].name) || !strcmp(name, dtypes[d].short_name)) {
                *out = (tack_dtype)d;
                return TACK_OK;
            }
        }
    }
    return tack_error_set(TACK_ETYPE,
                          "unsupported dtype '%s'; use one of int8, uint8, int16, uint16, int32, uint32, "
                          "int64, uint64, float32, float64",
                          name ? name : "(null)");
}

tack_status tack_dtype_from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes, tack_dtype *out)
{
    if (!out)
        return tack_error_set(TACK_EVALUE, "tack_dtype_from_dlpack: out is NULL");
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
    return tack_error_set(TACK_ETYPE,
                          "DLPack dtype (code %u, bits %u) has no Tack equivalent; Tack arrays hold signed or "
                          "unsigned integers of 8-64 bits and 32- or 64-bit floats: convert the tensor first",
                          (unsigned)code, (unsigned)bits);
}

tack_status tack_dtype_to_dlpack(tack_dtype d, uint8_t *code, uint8_t *bits)
{
    if (!code || !bits)
        return tack_error_set(TACK_EVALUE, "tack_dtype_to_dlpack: code and bits must not be NULL");
    if (!valid(d))
        return tack_error_set(TACK_ETYPE, "dtype %d has no DLPack equivalent", (int)d);
    *code = dtypes[d].code;
    *bits = dtypes[d].bits;
    return TACK_OK;
}
