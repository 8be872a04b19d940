/*
 * Tack's HIP declarations (src/driver/hip.h) against AMD's
 * hip_runtime_api.h, where it is installed (Debian: libamdhip64-dev): the
 * same sizes, field offsets and values, for the ROCm major version the
 * header describes. Without the header there is nothing to compare and the
 * test is skipped; Tack itself never needs it.
 */
#include <stddef.h>
#include <stdio.h>

#if defined(__has_include)
#if __has_include(<hip/hip_runtime_api.h>)
#define HAVE_HIP_API 1
#endif
#endif

#ifdef HAVE_HIP_API
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>

#include "../../src/driver/hip.h"
#include "abi.h"
#include "check.h"
#include "tack/tack.h"

static void test_values(void)
{
    SAME_SIZE(tack_hip_error, hipError_t);
    SAME_VALUE(TACK_HIP_SUCCESS, hipSuccess);
    SAME_VALUE(TACK_HIP_ERROR_INVALID_VALUE, hipErrorInvalidValue);
    SAME_VALUE(TACK_HIP_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory);
    SAME_VALUE(TACK_HIP_ERROR_NOT_INITIALIZED, hipErrorNotInitialized);
    SAME_VALUE(TACK_HIP_ERROR_NO_DEVICE, hipErrorNoDevice);
    SAME_VALUE(TACK_HIP_ERROR_INVALID_DEVICE, hipErrorInvalidDevice);
    SAME_SIZE(int, hipMemcpyKind);
    SAME_VALUE(TACK_HIP_MEMCPY_HOST_TO_DEVICE, hipMemcpyHostToDevice);
    SAME_VALUE(TACK_HIP_MEMCPY_DEVICE_TO_HOST, hipMemcpyDeviceToHost);
    SAME_VALUE(TACK_HIP_MEMCPY_DEFAULT, hipMemcpyDefault);
    SAME_SIZE(int, enum hipMemoryType);
#if HIP_VERSION_MAJOR >= 6
    SAME_VALUE(TACK_HIP6_MEMORY_TYPE_UNREGISTERED, hipMemoryTypeUnregistered);
    SAME_VALUE(TACK_HIP6_MEMORY_TYPE_HOST, hipMemoryTypeHost);
    SAME_VALUE(TACK_HIP6_MEMORY_TYPE_DEVICE, hipMemoryTypeDevice);
    SAME_VALUE(TACK_HIP6_MEMORY_TYPE_MANAGED, hipMemoryTypeManaged);
    SAME_VALUE(TACK_HIP6_MEMORY_TYPE_ARRAY, hipMemoryTypeArray);
    SAME_VALUE(TACK_HIP6_MEMORY_TYPE_UNIFIED, hipMemoryTypeUnified);
#else
    SAME_VALUE(TACK_HIP5_MEMORY_TYPE_HOST, hipMemoryTypeHost);
    SAME_VALUE(TACK_HIP5_MEMORY_TYPE_DEVICE, hipMemoryTypeDevice);
    SAME_VALUE(TACK_HIP5_MEMORY_TYPE_ARRAY, hipMemoryTypeArray);
    SAME_VALUE(TACK_HIP5_MEMORY_TYPE_UNIFIED, hipMemoryTypeUnified);
#endif
    /* hipRuntimeGetVersion reports HIP_VERSION, whose major part Tack reads
     * as version / 10000000. */
    SAME_VALUE(HIP_VERSION / 10000000, HIP_VERSION_MAJOR);
}

static void test_pointer_attributes(void)
{
    SAME_STRUCT(tack_hip_pointer_attributes, hipPointerAttribute_t, device, devicePointer, hostPointer, isManaged,
                allocationFlags);
    /* The first field is memoryType in ROCm 5 and type in ROCm 6. */
    SAME_VALUE(offsetof(tack_hip_pointer_attributes, type), 0);
}

/* Every entry point Tack resolves is one the header declares: naming each
 * one (unevaluated, so nothing is linked) fails to compile if the vendor
 * spells one differently. */
static void test_entry_points_exist_in_the_header(void)
{
#define NAMED(ret, field, symbol, required, params) (void)sizeof(&symbol);
    TACK_HIP_FUNCTIONS(NAMED)
#undef NAMED
}

int main(void)
{
    RUN(test_values);
    RUN(test_pointer_attributes);
    RUN(test_entry_points_exist_in_the_header);
    CHECK_DONE();
}

#else

int main(void)
{
    printf("skipped: no hip/hip_runtime_api.h to compare with (Debian: apt-get install libamdhip64-dev)\n");
    return 77;
}

#endif
