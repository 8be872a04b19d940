/*
 * Tack's Level Zero declarations (src/driver/level_zero.h) against the
 * vendor's ze_api.h, where it is installed (Debian: libze-dev): the same
 * sizes, field offsets and values, so a call through Tack's table passes
 * what the driver expects. Without the header there is nothing to compare
 * and the test is skipped; Tack itself never needs it.
 */
#include <stddef.h>
#include <stdio.h>

#if defined(__has_include)
#if __has_include(<level_zero/ze_api.h>)
#define HAVE_ZE_API 1
#endif
#endif

#ifdef HAVE_ZE_API
#include <level_zero/ze_api.h>

#include "../../src/driver/level_zero.h"
#include "abi.h"
#include "check.h"
#include "tack/tack.h"

static void test_scalars_and_handles(void)
{
    SAME_SIZE(tack_ze_result, ze_result_t);
    SAME_SIZE(tack_ze_driver, ze_driver_handle_t);
    SAME_SIZE(tack_ze_context, ze_context_handle_t);
    SAME_SIZE(tack_ze_command_list, ze_command_list_handle_t);
    SAME_SIZE(uint32_t, ze_structure_type_t);
    SAME_SIZE(uint32_t, ze_memory_type_t);
    SAME_SIZE(uint32_t, ze_command_queue_mode_t);
    SAME_SIZE(uint32_t, ze_module_format_t);
}

static void test_values(void)
{
    SAME_VALUE(TACK_ZE_SUCCESS, ZE_RESULT_SUCCESS);
    SAME_VALUE(TACK_ZE_NOT_READY, ZE_RESULT_NOT_READY);
    SAME_VALUE(TACK_ZE_ERROR_DEVICE_LOST, ZE_RESULT_ERROR_DEVICE_LOST);
    SAME_VALUE(TACK_ZE_ERROR_OUT_OF_HOST_MEMORY, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    SAME_VALUE(TACK_ZE_ERROR_OUT_OF_DEVICE_MEMORY, ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    SAME_VALUE(TACK_ZE_ERROR_MODULE_BUILD_FAILURE, ZE_RESULT_ERROR_MODULE_BUILD_FAILURE);
    SAME_VALUE(TACK_ZE_ERROR_UNINITIALIZED, ZE_RESULT_ERROR_UNINITIALIZED);
    SAME_VALUE(TACK_ZE_ERROR_UNSUPPORTED_FEATURE, ZE_RESULT_ERROR_UNSUPPORTED_FEATURE);
    SAME_VALUE(TACK_ZE_ERROR_INVALID_ARGUMENT, ZE_RESULT_ERROR_INVALID_ARGUMENT);
    SAME_VALUE(TACK_ZE_ERROR_INVALID_NULL_HANDLE, ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    SAME_VALUE(TACK_ZE_ERROR_INVALID_NULL_POINTER, ZE_RESULT_ERROR_INVALID_NULL_POINTER);
    SAME_VALUE(TACK_ZE_ERROR_INVALID_SIZE, ZE_RESULT_ERROR_INVALID_SIZE);
    SAME_VALUE(TACK_ZE_ERROR_UNSUPPORTED_SIZE, ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    SAME_VALUE(TACK_ZE_ERROR_INVALID_ENUMERATION, ZE_RESULT_ERROR_INVALID_ENUMERATION);
    SAME_VALUE(TACK_ZE_ERROR_UNKNOWN, ZE_RESULT_ERROR_UNKNOWN);
    SAME_VALUE(TACK_ZE_INIT_FLAG_GPU_ONLY, ZE_INIT_FLAG_GPU_ONLY);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES, ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES, ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES, ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES,
               ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_CONTEXT_DESC, ZE_STRUCTURE_TYPE_CONTEXT_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_FENCE_DESC, ZE_STRUCTURE_TYPE_FENCE_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES, ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_MODULE_DESC, ZE_STRUCTURE_TYPE_MODULE_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_KERNEL_DESC, ZE_STRUCTURE_TYPE_KERNEL_DESC);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_DRIVER_MEMORY_FREE_EXT_PROPERTIES,
               ZE_STRUCTURE_TYPE_DRIVER_MEMORY_FREE_EXT_PROPERTIES);
    SAME_VALUE(TACK_ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC, ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC);
    SAME_VALUE(TACK_ZE_MEMORY_TYPE_UNKNOWN, ZE_MEMORY_TYPE_UNKNOWN);
    SAME_VALUE(TACK_ZE_MEMORY_TYPE_HOST, ZE_MEMORY_TYPE_HOST);
    SAME_VALUE(TACK_ZE_MEMORY_TYPE_DEVICE, ZE_MEMORY_TYPE_DEVICE);
    SAME_VALUE(TACK_ZE_MEMORY_TYPE_SHARED, ZE_MEMORY_TYPE_SHARED);
    SAME_VALUE(TACK_ZE_COMMAND_QUEUE_MODE_DEFAULT, ZE_COMMAND_QUEUE_MODE_DEFAULT);
    SAME_VALUE(TACK_ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    SAME_VALUE(TACK_ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
    SAME_VALUE(TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE);
    SAME_VALUE(TACK_ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY);
    SAME_VALUE(TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE,
               ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE);
    SAME_VALUE(TACK_ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE, ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE);
    SAME_VALUE(TACK_ZE_DEVICE_MODULE_FLAG_FP64, ZE_DEVICE_MODULE_FLAG_FP64);
    SAME_VALUE(TACK_ZE_MODULE_FORMAT_IL_SPIRV, ZE_MODULE_FORMAT_IL_SPIRV);
    SAME_VALUE(TACK_ZE_MAX_DEVICE_NAME, ZE_MAX_DEVICE_NAME);
    SAME_VALUE(TACK_ZE_MAX_UUID_SIZE, ZE_MAX_DEVICE_UUID_SIZE);
    SAME_VALUE(TACK_ZE_MAX_UUID_SIZE, ZE_MAX_DRIVER_UUID_SIZE);
    SAME_VALUE(TACK_ZE_MAX_UUID_SIZE, ZE_MAX_NATIVE_KERNEL_UUID_SIZE);
    SAME_VALUE(TACK_ZE_SUBGROUPSIZE_COUNT, ZE_SUBGROUPSIZE_COUNT);
}

static void test_structures(void)
{
    SAME_STRUCT(tack_ze_driver_properties, ze_driver_properties_t, pNext, uuid, driverVersion);
    SAME_STRUCT(tack_ze_driver_memory_free_ext_properties, ze_driver_memory_free_ext_properties_t, freePolicies);
    SAME_STRUCT(tack_ze_memory_free_ext_desc, ze_memory_free_ext_desc_t, freePolicy);
    SAME_STRUCT(tack_ze_device_properties, ze_device_properties_t, type, flags, maxMemAllocSize, numSlices,
                timerResolution, kernelTimestampValidBits, uuid, name);
    SAME_STRUCT(tack_ze_device_compute_properties, ze_device_compute_properties_t, maxTotalGroupSize, maxGroupCountZ,
                subGroupSizes);
    SAME_STRUCT(tack_ze_device_module_properties, ze_device_module_properties_t, flags, fp64flags,
                nativeKernelSupported);
    SAME_STRUCT(tack_ze_command_queue_group_properties, ze_command_queue_group_properties_t, flags,
                maxMemoryFillPatternSize, numQueues);
    SAME_STRUCT(tack_ze_context_desc, ze_context_desc_t, flags);
    SAME_STRUCT(tack_ze_command_queue_desc, ze_command_queue_desc_t, ordinal, index, flags, mode, priority);
    SAME_STRUCT(tack_ze_command_list_desc, ze_command_list_desc_t, commandQueueGroupOrdinal, flags);
    SAME_STRUCT(tack_ze_fence_desc, ze_fence_desc_t, flags);
    SAME_STRUCT(tack_ze_device_mem_alloc_desc, ze_device_mem_alloc_desc_t, flags, ordinal);
    SAME_STRUCT(tack_ze_memory_allocation_properties, ze_memory_allocation_properties_t, type, id, pageSize);
    SAME_STRUCT(tack_ze_module_desc, ze_module_desc_t, format, inputSize, pInputModule, pBuildFlags, pConstants);
    SAME_STRUCT(tack_ze_kernel_desc, ze_kernel_desc_t, flags, pKernelName);
    SAME_STRUCT(tack_ze_group_count, ze_group_count_t, groupCountZ);
}

/* Every entry point Tack resolves is one the header declares: naming each
 * one (unevaluated, so nothing is linked) fails to compile if the vendor
 * spells one differently. */
static void test_entry_points_exist_in_the_header(void)
{
#define NAMED(ret, field, symbol, required, params) (void)sizeof(&symbol);
    TACK_ZE_FUNCTIONS(NAMED)
#undef NAMED
}

int main(void)
{
    RUN(test_scalars_and_handles);
    RUN(test_values);
    RUN(test_structures);
    RUN(test_entry_points_exist_in_the_header);
    CHECK_DONE();
}

#else

int main(void)
{
    printf("skipped: no level_zero/ze_api.h to compare with (Debian: apt-get install libze-dev)\n");
    return 77;
}

#endif
