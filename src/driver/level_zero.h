/*
 * The Level Zero (oneAPI) driver API, loaded at run time.
 *
 * Declared by Tack from the Level Zero specification's ze_api.h: only the
 * calls, values and structures Tack uses, under tack_ze_ names so that a
 * test can include the vendor header beside this one and compare sizes,
 * offsets and values (tests/c/test_level_zero_abi.c). No Level Zero SDK is
 * needed to build Tack.
 *
 * The library is libze_loader.so.1, or the file named by the environment
 * variable TACK_LEVEL_ZERO_LIBRARY (the simulated driver in tests/sim/),
 * opened through the loader (library.h). Its compiler, libocloc, is a
 * library of its own (ocloc.h).
 */
#ifndef TACK_DRIVER_LEVEL_ZERO_H
#define TACK_DRIVER_LEVEL_ZERO_H

#include <stddef.h>
#include <stdint.h>

#include "library.h"
#include "tack/status.h"

/* ze_result_t */
typedef uint32_t tack_ze_result;
#define TACK_ZE_SUCCESS 0u
#define TACK_ZE_NOT_READY 1u
#define TACK_ZE_ERROR_DEVICE_LOST 0x70000001u
#define TACK_ZE_ERROR_OUT_OF_HOST_MEMORY 0x70000002u
#define TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY 0x70000003u
#define TACK_ZE_ERROR_MODULE_BUILD_FAILURE 0x70000004u
#define TACK_ZE_ERROR_UNINITIALIZED 0x78000001u
#define TACK_ZE_ERROR_UNSUPPORTED_FEATURE 0x78000003u
#define TACK_ZE_ERROR_INVALID_ARGUMENT 0x78000004u
#define TACK_ZE_ERROR_INVALID_NULL_HANDLE 0x78000005u
#define TACK_ZE_ERROR_INVALID_NULL_POINTER 0x78000007u
#define TACK_ZE_ERROR_INVALID_SIZE 0x78000008u
#define TACK_ZE_ERROR_UNSUPPORTED_SIZE 0x78000009u
#define TACK_ZE_ERROR_INVALID_ENUMERATION 0x7800000cu
#define TACK_ZE_ERROR_UNKNOWN 0x7ffffffeu

/* Opaque handles. */
typedef struct tack_ze_driver_object *tack_ze_driver;
typedef struct tack_ze_device_object *tack_ze_device;
typedef struct tack_ze_context_object *tack_ze_context;
typedef struct tack_ze_command_queue_object *tack_ze_command_queue;
typedef struct tack_ze_command_list_object *tack_ze_command_list;
typedef struct tack_ze_event_object *tack_ze_event;
typedef struct tack_ze_fence_object *tack_ze_fence;
typedef struct tack_ze_module_object *tack_ze_module;
typedef struct tack_ze_module_build_log_object *tack_ze_module_build_log;
typedef struct tack_ze_kernel_object *tack_ze_kernel;

/* ze_init_flag_t */
#define TACK_ZE_INIT_FLAG_GPU_ONLY 1u

/* ze_structure_type_t */
#define TACK_ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES 0x1u
#define TACK_ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES 0x3u
#define TACK_ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES 0x4u
#define TACK_ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES 0x5u
#define TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES 0x6u
#define TACK_ZE_STRUCTURE_TYPE_CONTEXT_DESC 0xdu
#define TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC 0xeu
#define TACK_ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC 0xfu
#define TACK_ZE_STRUCTURE_TYPE_FENCE_DESC 0x12u
#define TACK_ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC 0x15u
#define TACK_ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES 0x17u
#define TACK_ZE_STRUCTURE_TYPE_MODULE_DESC 0x1bu
#define TACK_ZE_STRUCTURE_TYPE_KERNEL_DESC 0x1du
#define TACK_ZE_STRUCTURE_TYPE_DRIVER_MEMORY_FREE_EXT_PROPERTIES 0x10009u
#define TACK_ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC 0x1000au

/* ze_memory_type_t */
#define TACK_ZE_MEMORY_TYPE_UNKNOWN 0u
#define TACK_ZE_MEMORY_TYPE_HOST 1u
#define TACK_ZE_MEMORY_TYPE_DEVICE 2u
#define TACK_ZE_MEMORY_TYPE_SHARED 3u

/* ze_command_queue_mode_t */
#define TACK_ZE_COMMAND_QUEUE_MODE_DEFAULT 0u
#define TACK_ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS 1u
#define TACK_ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS 2u

/* ze_command_queue_group_property_flag_t */
#define TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE 1u
#define TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY 2u

/* ze_driver_memory_free_policy_ext_flag_t */
#define TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE 1u
#define TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE 2u

/* ze_device_module_flag_t */
#define TACK_ZE_DEVICE_MODULE_FLAG_FP64 2u

/* ze_module_format_t */
#define TACK_ZE_MODULE_FORMAT_IL_SPIRV 0u

#define TACK_ZE_MAX_DEVICE_NAME 256
#define TACK_ZE_MAX_UUID_SIZE 16
#define TACK_ZE_SUBGROUPSIZE_COUNT 8

/* ze_driver_properties_t */
typedef struct tack_ze_driver_properties {
    uint32_t stype;
    void *pNext;
    uint8_t uuid[TACK_ZE_MAX_UUID_SIZE];
    uint32_t driverVersion;
} tack_ze_driver_properties;

/* ze_driver_memory_free_ext_properties_t, chained on the driver properties */
typedef struct tack_ze_driver_memory_free_ext_properties {
    uint32_t stype;
    void *pNext;
    uint32_t freePolicies;
} tack_ze_driver_memory_free_ext_properties;

/* ze_memory_free_ext_desc_t */
typedef struct tack_ze_memory_free_ext_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t freePolicy;
} tack_ze_memory_free_ext_desc;

/* ze_device_properties_t */
typedef struct tack_ze_device_properties {
    uint32_t stype;
    void *pNext;
    uint32_t type;
    uint32_t vendorId;
    uint32_t deviceId;
    uint32_t flags;
    uint32_t subdeviceId;
    uint32_t coreClockRate;
    uint64_t maxMemAllocSize;
    uint32_t maxHardwareContexts;
    uint32_t maxCommandQueuePriority;
    uint32_t numThreadsPerEU;
    uint32_t physicalEUSimdWidth;
    uint32_t numEUsPerSubslice;
    uint32_t numSubslicesPerSlice;
    uint32_t numSlices;
    uint64_t timerResolution;
    uint32_t timestampValidBits;
    uint32_t kernelTimestampValidBits;
    uint8_t uuid[TACK_ZE_MAX_UUID_SIZE];
    char name[TACK_ZE_MAX_DEVICE_NAME];
} tack_ze_device_properties;

/* ze_device_compute_properties_t */
typedef struct tack_ze_device_compute_properties {
    uint32_t stype;
    void *pNext;
    uint32_t maxTotalGroupSize;
    uint32_t maxGroupSizeX;
    uint32_t maxGroupSizeY;
    uint32_t maxGroupSizeZ;
    uint32_t maxGroupCountX;
    uint32_t maxGroupCountY;
    uint32_t maxGroupCountZ;
    uint32_t maxSharedLocalMemory;
    uint32_t numSubGroupSizes;
    uint32_t subGroupSizes[TACK_ZE_SUBGROUPSIZE_COUNT];
} tack_ze_device_compute_properties;

/* ze_device_module_properties_t */
typedef struct tack_ze_device_module_properties {
    uint32_t stype;
    void *pNext;
    uint32_t spirvVersionSupported;
    uint32_t flags;
    uint32_t fp16flags;
    uint32_t fp32flags;
    uint32_t fp64flags;
    uint32_t maxArgumentsSize;
    uint32_t printfBufferSize;
    uint8_t nativeKernelSupported[TACK_ZE_MAX_UUID_SIZE];
} tack_ze_device_module_properties;

/* ze_command_queue_group_properties_t */
typedef struct tack_ze_command_queue_group_properties {
    uint32_t stype;
    void *pNext;
    uint32_t flags;
    size_t maxMemoryFillPatternSize;
    uint32_t numQueues;
} tack_ze_command_queue_group_properties;

/* ze_context_desc_t */
typedef struct tack_ze_context_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
} tack_ze_context_desc;

/* ze_command_queue_desc_t */
typedef struct tack_ze_command_queue_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t ordinal;
    uint32_t index;
    uint32_t flags;
    uint32_t mode;
    uint32_t priority;
} tack_ze_command_queue_desc;

/* ze_command_list_desc_t */
typedef struct tack_ze_command_list_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t commandQueueGroupOrdinal;
    uint32_t flags;
} tack_ze_command_list_desc;

/* ze_fence_desc_t */
typedef struct tack_ze_fence_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
} tack_ze_fence_desc;

/* ze_device_mem_alloc_desc_t */
typedef struct tack_ze_device_mem_alloc_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
    uint32_t ordinal;
} tack_ze_device_mem_alloc_desc;

/* ze_memory_allocation_properties_t */
typedef struct tack_ze_memory_allocation_properties {
    uint32_t stype;
    void *pNext;
    uint32_t type;
    uint64_t id;
    uint64_t pageSize;
} tack_ze_memory_allocation_properties;

/* ze_module_desc_t */
typedef struct tack_ze_module_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t format;
    size_t inputSize;
    const uint8_t *pInputModule;
    const char *pBuildFlags;
    const void *pConstants;
} tack_ze_module_desc;

/* ze_kernel_desc_t */
typedef struct tack_ze_kernel_desc {
    uint32_t stype;
    const void *pNext;
    uint32_t flags;
    const char *pKernelName;
} tack_ze_kernel_desc;

/* ze_group_count_t */
typedef struct tack_ze_group_count {
    uint32_t groupCountX;
    uint32_t groupCountY;
    uint32_t groupCountZ;
} tack_ze_group_count;

/*
 * Every entry point Tack calls, listed once in the drivers' shape
 * (src/driver/library.h). An entry not required may be missing from an
 * older loader; its pointer is then NULL and the caller takes the
 * documented fallback. Tack calls no ...Destroy function: it destroys no
 * Level Zero object.
 */
#define TACK_ZE_FUNCTIONS(X)                                                                                       \
    X(tack_ze_result, zeInit, zeInit, 1, (uint32_t flags))                                                         \
    X(tack_ze_result, zeDriverGet, zeDriverGet, 1, (uint32_t * pCount, tack_ze_driver * phDrivers))                \
    X(tack_ze_result, zeDriverGetProperties, zeDriverGetProperties, 1,                                             \
      (tack_ze_driver hDriver, tack_ze_driver_properties * pProps))                                                \
    X(tack_ze_result, zeDeviceGet, zeDeviceGet, 1,                                                                 \
      (tack_ze_driver hDriver, uint32_t * pCount, tack_ze_device * phDevices))                                     \
    X(tack_ze_result, zeDeviceGetProperties, zeDeviceGetProperties, 1,                                             \
      (tack_ze_device hDevice, tack_ze_device_properties * pProps))                                                \
    X(tack_ze_result, zeDeviceGetComputeProperties, zeDeviceGetComputeProperties, 1,                               \
      (tack_ze_device hDevice, tack_ze_device_compute_properties * pProps))                                        \
    X(tack_ze_result, zeDeviceGetModuleProperties, zeDeviceGetModuleProperties, 1,                                 \
      (tack_ze_device hDevice, tack_ze_device_module_properties * pProps))                                         \
    X(tack_ze_result, zeDeviceGetCommandQueueGroupProperties, zeDeviceGetCommandQueueGroupProperties, 1,           \
      (tack_ze_device hDevice, uint32_t * pCount, tack_ze_command_queue_group_properties * pProps))                \
    X(tack_ze_result, zeContextCreate, zeContextCreate, 1,                                                         \
      (tack_ze_driver hDriver, const tack_ze_context_desc *desc, tack_ze_context *phContext))                      \
    X(tack_ze_result, zeCommandQueueCreate, zeCommandQueueCreate, 1,                                               \
      (tack_ze_context hContext, tack_ze_device hDevice, const tack_ze_command_queue_desc *desc,                   \
       tack_ze_command_queue *phQueue))                                                                            \
    X(tack_ze_result, zeCommandQueueExecuteCommandLists, zeCommandQueueExecuteCommandLists, 1,                     \
      (tack_ze_command_queue hQueue, uint32_t numLists, tack_ze_command_list * phLists, tack_ze_fence hFence))     \
    X(tack_ze_result, zeCommandQueueSynchronize, zeCommandQueueSynchronize, 1,                                     \
      (tack_ze_command_queue hQueue, uint64_t timeout))                                                            \
    X(tack_ze_result, zeFenceCreate, zeFenceCreate, 1,                                                             \
      (tack_ze_command_queue hQueue, const tack_ze_fence_desc *desc, tack_ze_fence *phFence))                      \
    X(tack_ze_result, zeFenceHostSynchronize, zeFenceHostSynchronize, 1, (tack_ze_fence hFence, uint64_t timeout)) \
    X(tack_ze_result, zeFenceReset, zeFenceReset, 1, (tack_ze_fence hFence))                                       \
    X(tack_ze_result, zeCommandListCreate, zeCommandListCreate, 1,                                                 \
      (tack_ze_context hContext, tack_ze_device hDevice, const tack_ze_command_list_desc *desc,                    \
       tack_ze_command_list *phList))                                                                              \
    X(tack_ze_result, zeCommandListCreateImmediate, zeCommandListCreateImmediate, 1,                               \
      (tack_ze_context hContext, tack_ze_device hDevice, const tack_ze_command_queue_desc *desc,                   \
       tack_ze_command_list *phList))                                                                              \
    X(tack_ze_result, zeCommandListClose, zeCommandListClose, 1, (tack_ze_command_list hList))                     \
    X(tack_ze_result, zeCommandListReset, zeCommandListReset, 1, (tack_ze_command_list hList))                     \
    X(tack_ze_result, zeCommandListAppendMemoryCopy, zeCommandListAppendMemoryCopy, 1,                             \
      (tack_ze_command_list hList, void *dst, const void *src, size_t size, tack_ze_event hSignal,                 \
       uint32_t numWait, tack_ze_event *phWait))                                                                   \
    X(tack_ze_result, zeCommandListAppendMemoryFill, zeCommandListAppendMemoryFill, 1,                             \
      (tack_ze_command_list hList, void *ptr, const void *pattern, size_t patternSize, size_t size,                \
       tack_ze_event hSignal, uint32_t numWait, tack_ze_event *phWait))                                            \
    X(tack_ze_result, zeCommandListAppendLaunchKernel, zeCommandListAppendLaunchKernel, 1,                         \
      (tack_ze_command_list hList, tack_ze_kernel hKernel, const tack_ze_group_count *pCount,                      \
       tack_ze_event hSignal, uint32_t numWait, tack_ze_event *phWait))                                            \
    X(tack_ze_result, zeMemAllocDevice, zeMemAllocDevice, 1,                                                       \
      (tack_ze_context hContext, const tack_ze_device_mem_alloc_desc *desc, size_t size, size_t alignment,         \
       tack_ze_device hDevice, void **pptr))                                                                       \
    X(tack_ze_result, zeMemFree, zeMemFree, 1, (tack_ze_context hContext, void *ptr))                              \
    X(tack_ze_result, zeMemFreeExt, zeMemFreeExt, 0,                                                               \
      (tack_ze_context hContext, const tack_ze_memory_free_ext_desc *desc, void *ptr))                             \
    X(tack_ze_result, zeMemGetAllocProperties, zeMemGetAllocProperties, 1,                                         \
      (tack_ze_context hContext, const void *ptr, tack_ze_memory_allocation_properties *pProps,                    \
       tack_ze_device *phDevice))                                                                                  \
    X(tack_ze_result, zeModuleCreate, zeModuleCreate, 1,                                                           \
      (tack_ze_context hContext, tack_ze_device hDevice, const tack_ze_module_desc *desc,                          \
       tack_ze_module *phModule, tack_ze_module_build_log *phLog))                                                 \
    X(tack_ze_result, zeModuleBuildLogGetString, zeModuleBuildLogGetString, 1,                                     \
      (tack_ze_module_build_log hLog, size_t * pSize, char *pLog))                                                 \
    X(tack_ze_result, zeKernelCreate, zeKernelCreate, 1,                                                           \
      (tack_ze_module hModule, const tack_ze_kernel_desc *desc, tack_ze_kernel *phKernel))                         \
    X(tack_ze_result, zeKernelSetArgumentValue, zeKernelSetArgumentValue, 1,                                       \
      (tack_ze_kernel hKernel, uint32_t index, size_t size, const void *value))                                    \
    X(tack_ze_result, zeKernelSetGroupSize, zeKernelSetGroupSize, 1,                                               \
      (tack_ze_kernel hKernel, uint32_t x, uint32_t y, uint32_t z))                                                \
    X(tack_ze_result, zeKernelSuggestGroupSize, zeKernelSuggestGroupSize, 1,                                       \
      (tack_ze_kernel hKernel, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t * x, uint32_t * y,                  \
       uint32_t * z))

/* The loaded entry points. */
struct tack_ze_api {
#define TACK_ZE_POINTER(ret, field, symbol, required, params) ret(*field) params;
    TACK_ZE_FUNCTIONS(TACK_ZE_POINTER)
#undef TACK_ZE_POINTER
    struct tack_library library;
};

/* Loads the library and resolves every entry point, once per process
 * (thread-safe); later calls return the same table or the same failure.
 * On error (library missing, a required symbol missing) returns
 * TACK_ERUNTIME with a message naming the library and what to install or
 * set, and leaves *out untouched. The library is never unloaded. */
tack_status tack_ze_load(const struct tack_ze_api **out);

/* The specification's name of a result code ("ZE_RESULT_ERROR_DEVICE_LOST"),
 * or "an unknown ze_result_t" for another value. Never fails. */
const char *tack_ze_result_name(tack_ze_result result);

#endif
