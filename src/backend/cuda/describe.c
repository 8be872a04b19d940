/*
 * The CUDA backend's part of tack_report: the driver, every NVRTC found,
 * each GPU and the code its kernels would be built as. See
 * src/backend/cuda/cuda.c.
 */
#include <stdio.h>

#include "cuda.h"

/* What kernels for GPU `index`, of `arch`, would be built as with a driver
 * of CUDA `driver`, as cuda_pick chooses (no CUBIN refused yet), or why none. */
static void describe_code(int driver, int arch, int index, char *out, size_t cap)
{
    struct cuda_choice c;
    int fits;
    if (cuda_pick(driver, arch, 0, &c, &fits) != TACK_OK) {
        snprintf(out, cap, "none: %s", tack_last_error());
        return;
    }
    if (!fits) {
        char gpu[32];
        snprintf(gpu, sizeof gpu, "cuda:%d", index);
        cuda_none_fits(gpu, arch, driver, 0, "");
        snprintf(out, cap, "none: %s", tack_last_error());
        return;
    }
    int target = c.kind == TACK_CODE_CUBIN ? arch : cuda_newest_up_to(c.api, arch);
    snprintf(out, cap, "%s %s_%d from NVRTC %d.%d (%s)%s", c.kind == TACK_CODE_CUBIN ? "CUBIN" : "PTX",
             c.kind == TACK_CODE_CUBIN ? "sm" : "compute", target, c.api->major, c.api->minor,
             tack_library_path(&c.api->library),
             c.kind == TACK_CODE_CUBIN ? "" : ", which the driver compiles when it loads it");
}

void cuda_describe(tack_backend_report *out)
{
    const struct tack_cuda_api *cu;
    tack_status st = tack_cuda_api_get(&cu);
    char version[32] = "";
    /* cuDriverGetVersion's 12080 is CUDA 12.8. */
    if (st == TACK_OK && cu->driver_version > 0)
        snprintf(version, sizeof version, "%d.%d", cu->driver_version / 1000, cu->driver_version % 1000 / 10);
    tack_report_component(&out->driver, "driver", st, st == TACK_OK ? tack_library_path(&cu->library) : NULL,
                          version);
    int count = 0;
    if (st != TACK_OK || cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 0)
        count = 0;
    out->device_count = count;
    /* Every NVRTC found, in the order a device's code is chosen from. */
    const struct tack_nvrtc_api *nvrtc;
    tack_status found = tack_nvrtc_api_get(&nvrtc);
    if (found == TACK_OK)
        snprintf(version, sizeof version, "%d.%d", nvrtc->major, nvrtc->minor);
    tack_report_component(&out->compiler, "NVRTC", found,
                          found == TACK_OK ? tack_library_path(&nvrtc->library) : NULL, version);
    for (int i = 0; found == TACK_OK && i < TACK_REPORT_COMPILERS && tack_nvrtc_api_at(i, &nvrtc) == TACK_OK; i++) {
        snprintf(version, sizeof version, "%d.%d", nvrtc->major, nvrtc->minor);
        tack_report_component(&out->compilers[i], "NVRTC", TACK_OK, tack_library_path(&nvrtc->library), version);
        out->compiler_count = i + 1;
    }
    for (int i = 0; i < count && i < TACK_REPORT_DEVICES; i++) {
        CUdevice dev;
        char name[96] = "";
        int major = 0, minor = 0;
        if (cu->cuDeviceGet(&dev, i) != CUDA_SUCCESS)
            continue;
        if (cu->cuDeviceGetName(name, (int)sizeof name, dev) != CUDA_SUCCESS)
            name[0] = 0;
        name[sizeof name - 1] = 0;
        cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        snprintf(out->devices[i], sizeof out->devices[i], "%s, compute capability %d.%d",
                 name[0] ? name : "(no name)", major, minor);
        describe_code(cu->driver_version, 10 * major + minor, i, out->kernel_code[i], sizeof out->kernel_code[i]);
    }
}
