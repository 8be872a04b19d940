/* The facts our CUDA declarations (src/driver/cuda.h) must share with the
 * toolkit's cuda.h: sizes, field offsets and enum values. Expanded once in
 * a file compiled against each header; test_cuda_abi.c compares the two. */
#ifndef TACK_TEST_CUDA_ABI_FACTS_H
#define TACK_TEST_CUDA_ABI_FACTS_H

#include <stddef.h>

struct cuda_abi_fact {
    const char *name;
    long long value;
};

#define CUDA_ABI_FACTS(SIZE, OFFSET, VALUE)                                                                    \
    SIZE(CUresult) SIZE(CUdevice) SIZE(CUdeviceptr) SIZE(CUmemGenericAllocationHandle) SIZE(CUcontext)         \
    SIZE(CUstream) SIZE(CUevent) SIZE(CUmodule) SIZE(CUfunction) SIZE(CUuuid) SIZE(CUdevice_attribute)                       \
    SIZE(CUpointer_attribute) SIZE(CUmemAllocationType) SIZE(CUmemAllocationHandleType) SIZE(CUmemLocationType) \
    SIZE(CUmemAccess_flags) SIZE(CUmemAllocationGranularity_flags) SIZE(CUmemLocation)                          \
    SIZE(CUmemAllocationProp) SIZE(CUmemAccessDesc)                                                            \
    OFFSET(CUuuid, bytes) OFFSET(CUmemLocation, type) OFFSET(CUmemLocation, id)                                \
    OFFSET(CUmemAllocationProp, type) OFFSET(CUmemAllocationProp, requestedHandleTypes)                        \
    OFFSET(CUmemAllocationProp, location) OFFSET(CUmemAllocationProp, win32HandleMetaData)                     \
    OFFSET(CUmemAllocationProp, allocFlags) OFFSET(CUmemAllocationProp, allocFlags.compressionType)            \
    OFFSET(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable) OFFSET(CUmemAllocationProp, allocFlags.usage)  \
    OFFSET(CUmemAllocationProp, allocFlags.reserved) OFFSET(CUmemAccessDesc, location)                         \
    OFFSET(CUmemAccessDesc, flags)                                                                             \
    VALUE(CUDA_SUCCESS) VALUE(CUDA_ERROR_INVALID_VALUE) VALUE(CUDA_ERROR_OUT_OF_MEMORY)                        \
    VALUE(CUDA_ERROR_NOT_INITIALIZED) VALUE(CUDA_ERROR_DEINITIALIZED) VALUE(CUDA_ERROR_STUB_LIBRARY)           \
    VALUE(CUDA_ERROR_NO_DEVICE) VALUE(CUDA_ERROR_INVALID_DEVICE) VALUE(CUDA_ERROR_INVALID_IMAGE)               \
    VALUE(CUDA_ERROR_INVALID_CONTEXT) VALUE(CUDA_ERROR_INVALID_PTX) VALUE(CUDA_ERROR_INVALID_HANDLE)           \
    VALUE(CUDA_ERROR_NOT_FOUND) VALUE(CUDA_ERROR_NOT_READY) VALUE(CUDA_ERROR_ILLEGAL_ADDRESS)                  \
    VALUE(CUDA_ERROR_CONTEXT_IS_DESTROYED) VALUE(CUDA_ERROR_NOT_PERMITTED) VALUE(CUDA_ERROR_NOT_SUPPORTED)     \
    VALUE(CUDA_ERROR_UNKNOWN) VALUE(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)                                 \
    VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) VALUE(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)              \
    VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)    \
    VALUE(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)                                             \
    VALUE(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)                                     \
    VALUE(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED)                                          \
    VALUE(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) VALUE(CU_POINTER_ATTRIBUTE_CONTEXT)                      \
    VALUE(CU_POINTER_ATTRIBUTE_MEMORY_TYPE) VALUE(CU_POINTER_ATTRIBUTE_IS_MANAGED)                             \
    VALUE(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) VALUE(CU_MEMORYTYPE_HOST) VALUE(CU_MEMORYTYPE_DEVICE)           \
    VALUE(CU_MEMORYTYPE_ARRAY) VALUE(CU_MEMORYTYPE_UNIFIED) VALUE(CU_STREAM_DEFAULT)                           \
    VALUE(CU_STREAM_NON_BLOCKING) VALUE(CU_EVENT_DEFAULT) VALUE(CU_EVENT_DISABLE_TIMING)                       \
    VALUE(CU_EVENT_WAIT_DEFAULT) VALUE(CU_MEM_ALLOCATION_TYPE_PINNED) VALUE(CU_MEM_HANDLE_TYPE_NONE)           \
    VALUE(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) VALUE(CU_MEM_HANDLE_TYPE_WIN32)                            \
    VALUE(CU_MEM_HANDLE_TYPE_WIN32_KMT) VALUE(CU_MEM_LOCATION_TYPE_DEVICE)                                     \
    VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE) VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM)                          \
    VALUE(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)

#define CUDA_ABI_SIZE(t) {"sizeof(" #t ")", (long long)sizeof(t)},
#define CUDA_ABI_OFFSET(t, f) {"offsetof(" #t ", " #f ")", (long long)offsetof(t, f)},
#define CUDA_ABI_VALUE(v) {#v, (long long)(v)},

#endif
