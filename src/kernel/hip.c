/* HIP kernels: the generated HIP source compiled by hipRTC to a code object
 * for the current device's GPU, which hipModuleLoadData loads. Not cached
 * on disk: the code object is specific to the GPU's architecture, which
 * hipRTC picks from the current device without saying which, so a cache
 * key could not tell two GPUs apart. A kernel compiles once per device
 * and process (the kernel layer keeps what it loaded). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../driver/hiprtc.h"
#include "kernel.h"

static tack_status rtc_error(const struct tack_hiprtc_api *api, tack_hiprtc_result r, const char *what)
{
    const char *s = api->hiprtcGetErrorString ? api->hiprtcGetErrorString(r) : NULL;
    return tack_error_set(r == TACK_HIPRTC_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME,
                          "hipRTC %s failed: %s (hiprtcResult %d)", what, s ? s : "unknown error", r);
}

static tack_status compile_error(const struct tack_hiprtc_api *api, tack_hiprtc_program prog, const char *name,
                                 tack_hiprtc_result r)
{
    size_t log_size = 0;
    char *log = NULL;
    if (api->hiprtcGetProgramLogSize(prog, &log_size) == TACK_HIPRTC_SUCCESS && log_size &&
        (log = malloc(log_size + 1)) && api->hiprtcGetProgramLog(prog, log) == TACK_HIPRTC_SUCCESS)
        log[log_size] = 0;
    else if (log)
        log[0] = 0;
    const char *what = api->hiprtcGetErrorString ? api->hiprtcGetErrorString(r) : NULL;
    tack_status st = tack_compile_failed(log, log ? strlen(log) : 0,
                                         "kernel '%s' failed to compile for HIP (hipRTC %d.%d from '%s', %s):\n",
                                         name, api->major, api->minor, tack_library_path(&api->library),
                                         what ? what : "compilation error");
    free(log);
    return st;
}

tack_status tack_hip_compile(const char *name, const char *source, char **code, size_t *size)
{
    if (!name || !source || !code || !size)
        return tack_error_set(TACK_EVALUE, "tack_hip_compile: arguments must not be NULL");
    const struct tack_hiprtc_api *api;
    tack_status st = tack_hiprtc_load(&api);
    if (st != TACK_OK)
        return st;
    tack_hiprtc_program prog = NULL;
    tack_hiprtc_result r = api->hiprtcCreateProgram(&prog, source, "kernel.hip", 0, NULL, NULL);
    if (r != TACK_HIPRTC_SUCCESS)
        return rtc_error(api, r, "hiprtcCreateProgram");
    /* No architecture option: hipRTC compiles for the current device, which
     * the backend made the kernel's device. */
    const char *opts[] = {"-O3"};
    r = api->hiprtcCompileProgram(prog, 1, opts);
    if (r == TACK_HIPRTC_ERROR_COMPILATION || r == TACK_HIPRTC_ERROR_INVALID_OPTION) {
        st = compile_error(api, prog, name, r);
    } else if (r != TACK_HIPRTC_SUCCESS) {
        st = rtc_error(api, r, "hiprtcCompileProgram");
    } else {
        size_t n = 0;
        char *bin = NULL;
        r = api->hiprtcGetCodeSize(prog, &n);
        if (r != TACK_HIPRTC_SUCCESS || n == 0)
            st = r != TACK_HIPRTC_SUCCESS ? rtc_error(api, r, "hiprtcGetCodeSize")
                                          : tack_error_set(TACK_ERUNTIME, "hipRTC made an empty code object for "
                                                                          "kernel '%s'", name);
        else if (!(bin = malloc(n)))
            st = tack_error_set(TACK_ENOMEM, "out of memory holding a %zu-byte HIP code object", n);
        else if ((r = api->hiprtcGetCode(prog, bin)) != TACK_HIPRTC_SUCCESS)
            st = rtc_error(api, r, "hiprtcGetCode");
        if (st == TACK_OK) {
            *code = bin;
            *size = n;
        } else {
            free(bin);
        }
    }
    api->hiprtcDestroyProgram(&prog);
    return st;
}
