/* CUDA kernels: the generated source compiled to PTX by NVRTC, cached on
 * disk like host objects. PTX for a virtual architecture is what a CUDA
 * backend loads (cuModuleLoadData): the driver finishes it for whatever GPU
 * it runs on, so one cached PTX serves every GPU from that architecture on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../driver/nvrtc.h"
#include "kernel.h"

static tack_status nvrtc_error(const struct tack_nvrtc_api *api, nvrtcResult r, const char *what)
{
    return tack_error_set(r == NVRTC_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME, "NVRTC %s failed: %s", what,
                          api->nvrtcGetErrorString(r));
}

/* The oldest architecture this NVRTC targets, so that the PTX runs on every
 * GPU the toolkit supports. */
static void default_arch(const struct tack_nvrtc_api *api, char *out, size_t cap)
{
    int n = 0, archs[128];
    out[0] = 0;
    if (api->nvrtcGetNumSupportedArchs && api->nvrtcGetSupportedArchs &&
        api->nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= 128 &&
        api->nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS) {
        int lowest = archs[0];
        for (int i = 1; i < n; i++)
            lowest = archs[i] < lowest ? archs[i] : lowest;
        snprintf(out, cap, "compute_%d", lowest);
    }
}

static tack_status compile(const struct tack_nvrtc_api *api, const char *name, const char *source,
                           const char *const *opts, int nopts, char **ptx, size_t *size)
{
    nvrtcProgram prog = NULL;
    nvrtcResult r = api->nvrtcCreateProgram(&prog, source, "kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return nvrtc_error(api, r, "nvrtcCreateProgram");
    tack_status st = TACK_OK;
    r = api->nvrtcCompileProgram(prog, nopts, opts);
    if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
        size_t log_size = 0;
        char *log = NULL;
        if (api->nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size &&
            (log = malloc(log_size + 1)) && api->nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
            log[log_size] = 0;
        else if (log)
            log[0] = 0;
        st = tack_compile_failed(log, log ? strlen(log) : 0,
                                 "kernel '%s' failed to compile for CUDA (NVRTC %d.%d, %s):\n", name, api->major,
                                 api->minor, api->nvrtcGetErrorString(r));
        free(log);
    } else if (r != NVRTC_SUCCESS) {
        st = nvrtc_error(api, r, "nvrtcCompileProgram");
    } else {
        size_t n = 0;
        char *text = NULL;
        r = api->nvrtcGetPTXSize(prog, &n);
        if (r == NVRTC_SUCCESS && n == 0)
            r = NVRTC_ERROR_INVALID_PROGRAM;
        if (r == NVRTC_SUCCESS && !(text = malloc(n + 1)))
            st = tack_error_set(TACK_ENOMEM, "out of memory holding %zu bytes of PTX", n);
        else if (r == NVRTC_SUCCESS)
            r = api->nvrtcGetPTX(prog, text);
        if (st == TACK_OK && r != NVRTC_SUCCESS)
            st = nvrtc_error(api, r, "nvrtcGetPTX");
        if (st == TACK_OK) {
            /* The size NVRTC reports counts the NUL it writes. */
            text[n] = 0;
            *ptx = text;
            *size = strlen(text) + 1;
        } else {
            free(text);
        }
    }
    api->nvrtcDestroyProgram(&prog);
    return st;
}

tack_status tack_cuda_compile(const char *name, const char *source, const char *arch, char **ptx, size_t *size)
{
    const struct tack_nvrtc_api *api;
    tack_status st = tack_nvrtc_api_get(&api);
    if (st != TACK_OK)
        return st;
    char chosen[32], arch_opt[64];
    if (arch && *arch)
        snprintf(chosen, sizeof chosen, "%s", arch);
    else
        default_arch(api, chosen, sizeof chosen);
    const char *opts[4];
    int nopts = 0;
    /* User functions carry no __device__: NVRTC makes them device code. */
    opts[nopts++] = "--device-as-default-execution-space";
    if (chosen[0]) {
        snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", chosen);
        opts[nopts++] = arch_opt;
    }

    tack_sha256 h;
    tack_sha256_init(&h);
    char version[64];
    snprintf(version, sizeof version, "nvrtc %d.%d", api->major, api->minor);
    tack_sha256_field(&h, "tack " TACK_VERSION_STRING " cuda");
    tack_sha256_field(&h, version);
    for (int i = 0; i < nopts; i++)
        tack_sha256_field(&h, opts[i]);
    tack_sha256_field(&h, source);
    char hex[65];
    tack_sha256_hex(&h, hex);

    /* The cache only saves time; without a usable directory, compile. */
    char dir[4096], path[4300];
    int cached = tack_cache_dir(dir, sizeof dir) == TACK_OK;
    if (cached && snprintf(path, sizeof path, "%s/cuda-%s.ptx", dir, hex) >= (int)sizeof path)
        cached = 0;
    if (cached) {
        size_t n;
        char *text = tack_read_file(path, &n);
        if (text && n > 0) {
            *ptx = text;
            *size = strlen(text) + 1;
            return TACK_OK;
        }
        free(text);
    }
    st = compile(api, name, source, opts, nopts, ptx, size);
    if (st == TACK_OK && cached)
        (void)tack_write_file_atomic(dir, path, *ptx, *size - 1);
    return st;
}
