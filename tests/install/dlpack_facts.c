/* Every name, value, size, offset and type of the DLPack 1.3 ABI, printed
 * one per line. headers.py builds this twice, against the upstream header
 * (DLPACK_UPSTREAM) and against Tack's, and requires the same output, so
 * Tack's declarations are upstream's in everything a compiler can see.
 * A field's type is checked with _Generic: exact, not merely convertible. */
#include <stddef.h>
#include <stdio.h>

#ifdef DLPACK_UPSTREAM
#include <dlpack/dlpack.h>
#else
#include "tack/dlpack.h"
#endif

#define STR(x) #x
#define SHOW(x) STR(x)

#define VALUE(name) printf("%s = %lld\n", #name, (long long)(name))
#define MACRO(name) printf("%s -> [%s]\n", #name, SHOW(name))
#define TYPE(T) printf("%s: size %zu align %zu\n", #T, sizeof(T), _Alignof(T))
#define FIELD(T, f, type)                                                                                    \
    printf("%s.%s: offset %zu size %zu type %s\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f),              \
           _Generic(((T *)0)->f, type: #type, default: "other"))
/* A typedef of a pointer type against the type spelled out; a struct
 * typedef against its tag, through pointers to both. */
#define SAME(T, type) printf("%s is %s: %d\n", #T, #type, _Generic((T)0, type: 1, default: 0))
#define TAG(T, tag) printf("%s is %s: %d\n", #T, #tag, _Generic((T *)0, tag *: 1, default: 0))

typedef void (*set_error_fn)(void *, const char *, const char *);

int main(void)
{
    MACRO(DLPACK_DLPACK_H_);
    MACRO(DLPACK_EXTERN_C);
    MACRO(DLPACK_DLL);
    VALUE(DLPACK_MAJOR_VERSION);
    VALUE(DLPACK_MINOR_VERSION);
    VALUE(DLPACK_FLAG_BITMASK_READ_ONLY);
    VALUE(DLPACK_FLAG_BITMASK_IS_COPIED);
    VALUE(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    printf("flag type size %zu\n", sizeof(DLPACK_FLAG_BITMASK_READ_ONLY));

    TYPE(DLPackVersion);
    FIELD(DLPackVersion, major, uint32_t);
    FIELD(DLPackVersion, minor, uint32_t);

    TYPE(DLDeviceType);
    VALUE(kDLCPU);
    VALUE(kDLCUDA);
    VALUE(kDLCUDAHost);
    VALUE(kDLOpenCL);
    VALUE(kDLVulkan);
    VALUE(kDLMetal);
    VALUE(kDLVPI);
    VALUE(kDLROCM);
    VALUE(kDLROCMHost);
    VALUE(kDLExtDev);
    VALUE(kDLCUDAManaged);
    VALUE(kDLOneAPI);
    VALUE(kDLWebGPU);
    VALUE(kDLHexagon);
    VALUE(kDLMAIA);
    VALUE(kDLTrn);

    TYPE(DLDevice);
    FIELD(DLDevice, device_type, DLDeviceType);
    FIELD(DLDevice, device_id, int32_t);

    TYPE(DLDataTypeCode);
    VALUE(kDLInt);
    VALUE(kDLUInt);
    VALUE(kDLFloat);
    VALUE(kDLOpaqueHandle);
    VALUE(kDLBfloat);
    VALUE(kDLComplex);
    VALUE(kDLBool);
    VALUE(kDLFloat8_e3m4);
    VALUE(kDLFloat8_e4m3);
    VALUE(kDLFloat8_e4m3b11fnuz);
    VALUE(kDLFloat8_e4m3fn);
    VALUE(kDLFloat8_e4m3fnuz);
    VALUE(kDLFloat8_e5m2);
    VALUE(kDLFloat8_e5m2fnuz);
    VALUE(kDLFloat8_e8m0fnu);
    VALUE(kDLFloat6_e2m3fn);
    VALUE(kDLFloat6_e3m2fn);
    VALUE(kDLFloat4_e2m1fn);

    TYPE(DLDataType);
    FIELD(DLDataType, code, uint8_t);
    FIELD(DLDataType, bits, uint8_t);
    FIELD(DLDataType, lanes, uint16_t);

    TYPE(DLTensor);
    FIELD(DLTensor, data, void *);
    FIELD(DLTensor, device, DLDevice);
    FIELD(DLTensor, ndim, int32_t);
    FIELD(DLTensor, dtype, DLDataType);
    FIELD(DLTensor, shape, int64_t *);
    FIELD(DLTensor, strides, int64_t *);
    FIELD(DLTensor, byte_offset, uint64_t);

    TYPE(DLManagedTensor);
    TAG(DLManagedTensor, struct DLManagedTensor);
    FIELD(DLManagedTensor, dl_tensor, DLTensor);
    FIELD(DLManagedTensor, manager_ctx, void *);
    FIELD(DLManagedTensor, deleter, void (*)(struct DLManagedTensor *));

    TYPE(DLManagedTensorVersioned);
    TAG(DLManagedTensorVersioned, struct DLManagedTensorVersioned);
    FIELD(DLManagedTensorVersioned, version, DLPackVersion);
    FIELD(DLManagedTensorVersioned, manager_ctx, void *);
    FIELD(DLManagedTensorVersioned, deleter, void (*)(struct DLManagedTensorVersioned *));
    FIELD(DLManagedTensorVersioned, flags, uint64_t);
    FIELD(DLManagedTensorVersioned, dl_tensor, DLTensor);

    SAME(DLPackManagedTensorAllocator,
         int (*)(DLTensor *, DLManagedTensorVersioned **, void *, set_error_fn));
    SAME(DLPackManagedTensorFromPyObjectNoSync, int (*)(void *, DLManagedTensorVersioned **));
    SAME(DLPackManagedTensorToPyObjectNoSync, int (*)(DLManagedTensorVersioned *, void **));
    SAME(DLPackDLTensorFromPyObjectNoSync, int (*)(void *, DLTensor *));
    SAME(DLPackCurrentWorkStream, int (*)(DLDeviceType, int32_t, void **));

    TYPE(DLPackExchangeAPIHeader);
    TAG(DLPackExchangeAPIHeader, struct DLPackExchangeAPIHeader);
    FIELD(DLPackExchangeAPIHeader, version, DLPackVersion);
    FIELD(DLPackExchangeAPIHeader, prev_api, struct DLPackExchangeAPIHeader *);

    TYPE(DLPackExchangeAPI);
    TAG(DLPackExchangeAPI, struct DLPackExchangeAPI);
    FIELD(DLPackExchangeAPI, header, DLPackExchangeAPIHeader);
    FIELD(DLPackExchangeAPI, managed_tensor_allocator, DLPackManagedTensorAllocator);
    FIELD(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync, DLPackManagedTensorFromPyObjectNoSync);
    FIELD(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync, DLPackManagedTensorToPyObjectNoSync);
    FIELD(DLPackExchangeAPI, dltensor_from_py_object_no_sync, DLPackDLTensorFromPyObjectNoSync);
    FIELD(DLPackExchangeAPI, current_work_stream, DLPackCurrentWorkStream);
    return 0;
}
