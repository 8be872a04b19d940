/*
 * The DLPack ABI, version 1.3, declared by Tack from the DLPack specification
 * (https://dmlc.github.io/dlpack/latest/): versions, devices, data types,
 * tensors, managed tensors and their flags, and the C exchange API. Names,
 * values and layouts are upstream's, so C and C++ users pass tensors between
 * Tack and any other DLPack implementation.
 *
 * One translation unit may include this header and the DLPack project's
 * dlpack/dlpack.h (or a library's copy of it, such as PyTorch's
 * ATen/dlpack.h) in either order. The block below is guarded by upstream's
 * own include guard, DLPACK_DLPACK_H_, so whichever header comes first
 * declares the ABI and the other one is skipped whole. Two copies could not
 * both be seen anyway: neither C nor C++ lets one translation unit define a
 * struct twice. Including the upstream header from here when __has_include
 * finds it was the other way, and it was not taken: every library ships its
 * copy under a path of its own (PyTorch's is not at dlpack/dlpack.h), so
 * such a probe misses the copy the user has and the guard would have to be
 * shared all the same; and Tack's own build would then compile against
 * whatever dlpack.h happened to be on the include path instead of the ABI it
 * was written for. With the guard shared, every copy whatever its path keeps
 * the other out, and Tack always builds against this one.
 *
 * When an upstream header comes first its version is the one in force; Tack's
 * public declarations need DLPack 1.x (the versioned managed tensor), which
 * is checked after the block.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

/* Symbol export for Windows DLLs; empty elsewhere. */
#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor whose major version differs from the consumer's must not be read
 * past its deleter (the layout may have changed); a newer minor version only
 * adds enumeration values. */
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Where the memory is. C++ fixes the enumeration's size, as upstream does. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3, /* pinned host memory from cudaMallocHost */
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11, /* pinned host memory from hipMallocHost */
    kDLExtDev = 12,   /* reserved for experiments; meaning left to the implementation */
    kDLCUDAManaged = 13,
    kDLOneAPI = 14, /* oneAPI unified shared memory */
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
    kDLTrn = 18,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id; /* 0 for host, pinned and managed memory */
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5, /* two floats of bits / 2 each, real first */
    kDLBool = 6,    /* stored in 8 bits */
    kDLFloat8_e3m4 = 7,
    kDLFloat8_e4m3 = 8,
    kDLFloat8_e4m3b11fnuz = 9,
    kDLFloat8_e4m3fn = 10,
    kDLFloat8_e4m3fnuz = 11,
    kDLFloat8_e5m2 = 12,
    kDLFloat8_e5m2fnuz = 13,
    kDLFloat8_e8m0fnu = 14,
    kDLFloat6_e2m3fn = 15, /* bits must be 6 */
    kDLFloat6_e3m2fn = 16, /* bits must be 6 */
    kDLFloat4_e2m1fn = 17, /* bits must be 4 */
} DLDataTypeCode;

/* code holds a DLDataTypeCode in one byte. Sub-byte types are packed,
 * element i in bits [i * bits, (i + 1) * bits), unless the tensor's flags
 * say padded. */
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

/* A view of memory, owning nothing. The first element is at
 * (char *)data + byte_offset. Since 1.2 strides (in elements) may be NULL
 * only when ndim is 0; before, NULL meant C-contiguous. shape may be NULL
 * when ndim is 0. A tensor of size zero may have a NULL data pointer. */
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

/* The legacy (pre-1.0) managed tensor: dl_tensor first, no version and no
 * flags. deleter (may be NULL) releases the tensor and whatever backs it. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* Flags of a DLManagedTensorVersioned. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* The producer made a copy: the consumer owns the memory until the deleter. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/* A sub-byte dtype is padded to whole bytes rather than packed. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* The versioned (1.x) managed tensor. Everything up to and including flags
 * keeps its place in every later major version, so a consumer can always
 * read the version and call the deleter; dl_tensor comes last. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/*
 * The C exchange API (1.3). A Python tensor type publishes, as the type
 * attribute __dlpack_c_exchange_api__, a capsule named "dlpack_exchange_api"
 * over a DLPackExchangeAPI that lives as long as the process. py_object
 * arguments are PyObject pointers of that type. Each function returns 0, or
 * -1 with a Python exception set (the allocator reports through SetError
 * instead), throws no C++ exception, and synchronises no stream: a consumer
 * runs its work on the stream current_work_stream names.
 */

/* A new tensor from the producer, like `prototype` in dtype, ndim, shape and
 * device (its other fields are ignored). On failure SetError is called. */
typedef int (*DLPackManagedTensorAllocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                                            void (*SetError)(void *error_ctx, const char *kind,
                                                             const char *message));

/* A managed tensor over py_object's memory (owning: the consumer calls its
 * deleter); a BufferError where DLPack cannot describe the data. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object, DLManagedTensorVersioned **out);

/* A borrowed view filled into *out (shape and strides stay the producer's),
 * valid until control returns to the producer. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);

/* The producer's current stream on a device; NULL for the CPU. */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id, void **out_current_stream);

/* A new Python tensor of the producer's type that takes the tensor over. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor, void **out_py_object);

/* The part that stays the same across versions: a consumer checks the
 * major version, and may follow prev_api (NULL if none) to an older table. */
typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    DLPackManagedTensorAllocator managed_tensor_allocator;
    DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
    DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
    DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync; /* may be NULL */
    DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif

#endif /* DLPACK_DLPACK_H_ */

#ifndef TACK_DLPACK_H
#define TACK_DLPACK_H

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1
#error "tack/dlpack.h: the dlpack.h included before Tack's headers is not DLPack 1.x, which Tack's API uses"
#endif

/* Not an upstream name: the type of the allocator's SetError callback,
 * declared outside the shared block so that it exists whichever header came
 * first. */
#ifdef __cplusplus
extern "C" {
#endif

typedef void (*DLPackSetError)(void *error_ctx, const char *kind, const char *message);

#ifdef __cplusplus
}
#endif

#endif /* TACK_DLPACK_H */
