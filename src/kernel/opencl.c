/* Level Zero kernels: the generated OpenCL C compiled to SPIR-V in process
 * by libocloc (oclocInvoke, the library form of Intel's ocloc), cached on
 * disk by source, options and device id. SPIR-V is what zeModuleCreate
 * takes; the driver finishes it for the GPU. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../driver/ocloc.h"
#include "kernel.h"

/* OpenCL C 2.0 for its generic address space: the user's functions take
 * unqualified pointers, which the entry's __global ones convert to. */
#define OCLOC_OPTIONS "-cl-std=CL2.0"

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

static tack_status invoke(const struct tack_ocloc_api *api, const char *name, const char *source, const char *device,
                          unsigned char **spirv, size_t *size)
{
    const char *argv[] = {"ocloc", "compile", "-file", "kernel.cl", "-spv_only", "-device", device,
                          "-options", OCLOC_OPTIONS};
    const uint8_t *data[1] = {(const uint8_t *)source};
    const uint64_t len[1] = {strlen(source) + 1};
    const char *names[1] = {"kernel.cl"};
    uint32_t nout = 0;
    uint8_t **out = NULL;
    uint64_t *out_len = NULL;
    char **out_names = NULL;
    int rc = api->oclocInvoke((unsigned)(sizeof argv / sizeof *argv), argv, 1, data, len, names, 0, NULL, NULL, NULL,
                              &nout, &out, &out_len, &out_names);
    const unsigned char *bin = NULL;
    size_t bin_size = 0;
    const char *log = NULL;
    size_t log_size = 0;
    for (uint32_t i = 0; out && out_names && i < nout; i++) {
        if (!out_names[i])
            continue;
        if (ends_with(out_names[i], ".spv")) {
            bin = out[i];
            bin_size = (size_t)out_len[i];
        } else if (ends_with(out_names[i], ".log")) {
            log = (const char *)out[i];
            log_size = (size_t)out_len[i];
        }
    }
    /* The log need not be NUL-terminated. */
    while (log_size && log && log[log_size - 1] == 0)
        log_size--;
    tack_status st = TACK_OK;
    if (rc != 0 || !bin || !bin_size) {
        st = tack_compile_failed(log, log_size,
                                 "kernel '%s' failed to compile for level_zero (libocloc '%s', ocloc returned %d):\n",
                                 name, tack_library_path(&api->library), rc);
    } else if (!(*spirv = malloc(bin_size))) {
        st = tack_error_set(TACK_ENOMEM, "out of memory holding %zu bytes of SPIR-V", bin_size);
    } else {
        memcpy(*spirv, bin, bin_size);
        *size = bin_size;
    }
    if (out || out_names || out_len)
        api->oclocFreeOutput(&nout, &out, &out_len, &out_names);
    return st;
}

tack_status tack_opencl_compile(const char *name, const char *source, uint32_t device_id, unsigned char **spirv,
                                size_t *size)
{
    if (!name || !source || !spirv || !size)
        return tack_error_set(TACK_EVALUE, "tack_opencl_compile: arguments must not be NULL");
    const struct tack_ocloc_api *api;
    tack_status st = tack_ocloc_load(&api);
    if (st != TACK_OK)
        return st;
    /* ocloc names a GPU by its PCI device id as well as by its code name. */
    char device[32];
    snprintf(device, sizeof device, "0x%04" PRIx32, device_id);

    tack_sha256 h;
    tack_sha256_init(&h);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING " level_zero spirv");
    /* libocloc offers no version query; its path stands for the compiler. */
    tack_sha256_field(&h, tack_library_path(&api->library));
    tack_sha256_field(&h, OCLOC_OPTIONS);
    tack_sha256_field(&h, device);
    tack_sha256_field(&h, source);
    char hex[65];
    tack_sha256_hex(&h, hex);

    /* The cache only saves time; without a usable directory, compile. */
    char dir[4096], path[4300];
    int cached = tack_cache_dir(dir, sizeof dir) == TACK_OK;
    if (cached && snprintf(path, sizeof path, "%s/level_zero-%s.spv", dir, hex) >= (int)sizeof path)
        cached = 0;
    if (cached) {
        size_t n = 0;
        char *bin = tack_read_file(path, &n);
        if (bin && n > 0) {
            *spirv = (unsigned char *)bin;
            *size = n;
            return TACK_OK;
        }
        free(bin);
    }
    st = invoke(api, name, source, device, spirv, size);
    if (st == TACK_OK && cached)
        (void)tack_write_file_atomic(dir, path, *spirv, *size);
    return st;
}
