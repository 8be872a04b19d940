/*
 * The HIP backend (AMD GPUs through ROCm).
 *
 * HIP keeps one context per device for the whole process, shared by every
 * library (PyTorch, CuPy, VTK), so a device pointer means the same to all of
 * them and Tack creates and destroys no context. Device hip:N is the
 * runtime's device N: each call makes it current on the calling thread and
 * then restores the caller's current device, so Tack never changes which
 * device the application's own HIP calls go to.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "../../core/toolchain.h"
#include "../../driver/hip.h"
#include "../../driver/hiprtc.h"
#include "../prelude.h"
#include "tack/kernel.h"

struct hip_device_state {
    const struct tack_hip_api *hip;
};

#define HIP(d) (((struct hip_device_state *)(d)->impl)->hip)

static tack_status hip_fail(const struct tack_hip_api *hip, const char *call, tack_hip_error e)
{
    tack_status st = e == TACK_HIP_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME;
    return tack_error_set(st, "HIP %s failed: %s (hipError_t %d)", call, tack_hip_error_string(hip, e), e);
}

/* Makes the device current on this thread; *previous receives the device
 * to restore. */
static tack_status enter(const tack_device *device, int *previous)
{
    const struct tack_hip_api *hip = HIP(device);
    tack_hip_error e = hip->hipGetDevice(previous);
    if (e != TACK_HIP_SUCCESS)
        return hip_fail(hip, "hipGetDevice", e);
    if (*previous != device->ordinal) {
        e = hip->hipSetDevice(device->ordinal);
        if (e != TACK_HIP_SUCCESS)
            return hip_fail(hip, "hipSetDevice", e);
    }
    return TACK_OK;
}

static void leave(const tack_device *device, int previous)
{
    if (previous != device->ordinal)
        (void)HIP(device)->hipSetDevice(previous);
}

static tack_status hip_open(tack_device *device, const tack_option *options, size_t n_options)
{
    (void)options;
    (void)n_options; /* the backend declares no options; the core refused any */
    const struct tack_hip_api *hip;
    tack_status st = tack_hip_load(&hip);
    if (st != TACK_OK)
        return st;
    int count = 0;
    tack_hip_error e = hip->hipGetDeviceCount(&count);
    if (e != TACK_HIP_SUCCESS)
        return hip_fail(hip, "hipGetDeviceCount", e);
    if (device->ordinal >= count)
        return tack_error_set(TACK_ENODEVICE, "no HIP device hip:%d: the runtime sees %d device(s)", device->ordinal,
                              count);
    struct hip_device_state *s = calloc(1, sizeof *s);
    if (!s)
        return tack_error_set(TACK_ENOMEM, "out of memory opening a HIP device");
    s->hip = hip;
    device->impl = s;
    device->external_context = 0;
    return TACK_OK;
}

static void hip_close(tack_device *device)
{
    free(device->impl);
    device->impl = NULL;
}

static tack_status hip_alloc(tack_device *device, size_t nbytes, int exportable, void **data, void **ctx)
{
    (void)exportable; /* HIP has no memory export here; the core refuses it */
    const struct tack_hip_api *hip = HIP(device);
    int previous;
    tack_status st = enter(device, &previous);
    if (st != TACK_OK)
        return st;
    void *p = NULL;
    size_t n = nbytes ? nbytes : 1;
    tack_hip_error e = hip->hipMalloc(&p, n);
    if (e != TACK_HIP_SUCCESS) {
        st = e == TACK_HIP_ERROR_OUT_OF_MEMORY
                 ? tack_error_set(TACK_ENOMEM, "out of HIP device memory allocating %zu bytes on %s", nbytes,
                                  device->name)
                 : hip_fail(hip, "hipMalloc", e);
        goto done;
    }
    /* hipMemset is ordered on the null stream, so anything that later reads
     * the memory sees the zeros. */
    e = hip->hipMemset(p, 0, n);
    if (e != TACK_HIP_SUCCESS) {
        (void)hip->hipFree(p);
        st = hip_fail(hip, "hipMemset", e);
        goto done;
    }
    *data = p;
    *ctx = NULL;
done:
    leave(device, previous);
    return st;
}

static void hip_free(tack_device *device, void *data, void *ctx)
{
    (void)ctx;
    /* hipFree finds the device from the pointer and waits for the work
     * queued on it before freeing. A failure has no caller to report to. */
    (void)HIP(device)->hipFree(data);
}

/* Accepts device memory of this device, pinned host memory and managed
 * memory: what a kernel on this device can address. */
static tack_status hip_check_pointer(tack_device *device, uint64_t address)
{
    const struct tack_hip_api *hip = HIP(device);
    if (address == 0)
        return TACK_OK; /* only an empty array has it, and nothing is read */
    tack_hip_pointer_attributes a = {0, -1, NULL, NULL, 0, 0};
    tack_hip_error e = hip->hipPointerGetAttributes(&a, (const void *)(uintptr_t)address);
    int host = 0, device_memory = 0;
    if (e != TACK_HIP_SUCCESS) {
        /* Memory the runtime does not know is ordinary host memory; the
         * failed query also left a sticky error, which must not surface in
         * the application's next unrelated HIP call. */
        (void)hip->hipGetLastError();
        host = 1;
    } else if (hip->major_version >= 6) {
        host = a.type == TACK_HIP6_MEMORY_TYPE_UNREGISTERED;
        device_memory = a.type == TACK_HIP6_MEMORY_TYPE_DEVICE && !a.isManaged;
        if (a.type == TACK_HIP6_MEMORY_TYPE_ARRAY)
            return tack_error_set(TACK_EVALUE, "0x%" PRIx64 " is a HIP array, which kernels cannot address",
                                  address);
    } else {
        device_memory = a.type == TACK_HIP5_MEMORY_TYPE_DEVICE && !a.isManaged;
        if (a.type == TACK_HIP5_MEMORY_TYPE_ARRAY)
            return tack_error_set(TACK_EVALUE, "0x%" PRIx64 " is a HIP array, which kernels cannot address",
                                  address);
    }
    if (host)
        return tack_error_set(TACK_EVALUE,
                              "0x%" PRIx64 " is host memory the HIP runtime does not know; %s wraps device, "
                              "pinned host or managed memory. Wrap host memory on tack.device('cpu')",
                              address, device->name);
    if (device_memory && a.device != device->ordinal)
        return tack_error_set(TACK_EVALUE,
                              "0x%" PRIx64 " is device memory of hip:%d, not of %s; wrap it on "
                              "tack.device('hip:%d')",
                              address, a.device, device->name, a.device);
    return TACK_OK;
}

/* tack_memory_space's answer from hipPointerGetAttributes, whose memory
 * types ROCm 6 renumbered; memory the runtime does not know is NULL. */
static tack_status hip_memory_space(tack_device *device, uint64_t address, const char **out)
{
    const struct tack_hip_api *hip = HIP(device);
    tack_hip_pointer_attributes a = {0, -1, NULL, NULL, 0, 0};
    if (hip->hipPointerGetAttributes(&a, (const void *)(uintptr_t)address) != TACK_HIP_SUCCESS) {
        /* Not left sticky for the application's next HIP call. */
        (void)hip->hipGetLastError();
        *out = NULL;
        return TACK_OK;
    }
    int v6 = hip->major_version >= 6;
    int type = (int)a.type;
    if (v6 && type == TACK_HIP6_MEMORY_TYPE_UNREGISTERED)
        *out = NULL;
    else if (type == (v6 ? TACK_HIP6_MEMORY_TYPE_HOST : TACK_HIP5_MEMORY_TYPE_HOST))
        *out = "hip_pinned";
    else if (type == (v6 ? TACK_HIP6_MEMORY_TYPE_ARRAY : TACK_HIP5_MEMORY_TYPE_ARRAY))
        *out = "hip_array";
    else if (a.isManaged || type == (v6 ? TACK_HIP6_MEMORY_TYPE_MANAGED : TACK_HIP5_MEMORY_TYPE_UNIFIED) ||
             (v6 && type == TACK_HIP6_MEMORY_TYPE_UNIFIED))
        *out = "hip_managed";
    else
        *out = "hip";
    return TACK_OK;
}

static tack_status hip_copy(tack_device *device, void *dst, const void *src, size_t nbytes, const char *what)
{
    const struct tack_hip_api *hip = HIP(device);
    int previous;
    tack_status st = enter(device, &previous);
    if (st != TACK_OK)
        return st;
    /* hipMemcpy is ordered after the device's queued work and returns when
     * the copy is done. The runtime infers the direction from the pointers,
     * since a wrapped array may be pinned host or managed memory. */
    tack_hip_error e = hip->hipMemcpy(dst, src, nbytes, TACK_HIP_MEMCPY_DEFAULT);
    if (e != TACK_HIP_SUCCESS)
        st = tack_error_set(TACK_ERUNTIME, "HIP copy of %zu bytes %s on %s failed: %s (hipError_t %d)", nbytes, what,
                            device->name,
                            tack_hip_error_string(hip, e), e);
    leave(device, previous);
    return st;
}

static tack_status hip_copy_to_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return hip_copy(device, dst, src, nbytes, "to the host");
}

static tack_status hip_copy_from_host(tack_device *device, void *dst, const void *src, size_t nbytes)
{
    return hip_copy(device, dst, src, nbytes, "from the host");
}

static tack_status hip_synchronize(tack_device *device)
{
    int previous;
    tack_status st = enter(device, &previous);
    if (st != TACK_OK)
        return st;
    tack_hip_error e = HIP(device)->hipDeviceSynchronize();
    if (e != TACK_HIP_SUCCESS)
        st = hip_fail(HIP(device), "hipDeviceSynchronize", e);
    leave(device, previous);
    return st;
}

/* ---- kernels: the dialect and hipRTC --------------------------------------
 *
 * The generated source is HIP, which hipRTC compiles in process to a code
 * object for the current device's GPU, and hipModuleLoadData loads. Not
 * kept (no kernel_key): the code object is specific to the GPU's
 * architecture, which hipRTC picks from the current device without saying
 * which, so a key could not tell two GPUs apart. A kernel compiles once per
 * device and process (the kernel layer keeps what it loaded). */

static const struct tack_dialect hip_dialect = {
    .name = "hip",
    /* hipRTC's runtime header, which it includes before the source, may
     * declare some of these itself, and as other types (ROCm 5.2 makes
     * int64_t long long, where clang's __INT64_TYPE__ is long): a second
     * typedef of another type is an error in C++. Macros over names of
     * Tack's own never meet the header's. */
    .prelude = "#define int8_t tack_int8_\n#define uint8_t tack_uint8_\n"
               "#define int16_t tack_int16_\n#define uint16_t tack_uint16_\n"
               "#define int32_t tack_int32_\n#define uint32_t tack_uint32_\n"
               "#define int64_t tack_int64_\n#define uint64_t tack_uint64_\n"
               "typedef __INT8_TYPE__ int8_t;\ntypedef __UINT8_TYPE__ uint8_t;\n"
               "typedef __INT16_TYPE__ int16_t;\ntypedef __UINT16_TYPE__ uint16_t;\n"
               "typedef __INT32_TYPE__ int32_t;\ntypedef __UINT32_TYPE__ uint32_t;\n"
               "typedef __INT64_TYPE__ int64_t;\ntypedef __UINT64_TYPE__ uint64_t;\n"
               "typedef int64_t tack_index;\n" TACK_PRELUDE_TYPES("bool", "__UINTPTR_TYPE__")
               "#define TACK_BACKEND_HIP 1\n"
               /* The atomics, as overloads of HIP's own, through the types
                * every HIP version declares them for. Not every HIP has a
                * signed 64-bit min or max: a compare-and-swap loop. */
               "#define TACK_ATOMIC_(op, fn, T, U) static __device__ inline T tack_atomic_##op(T *p, T v) "
               "{ return (T)fn((U *)p, (U)v); }\n"
               "TACK_ATOMIC_(add, atomicAdd, int32_t, int) TACK_ATOMIC_(add, atomicAdd, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(add, atomicAdd, int64_t, unsigned long long)\n"
               "TACK_ATOMIC_(add, atomicAdd, uint64_t, unsigned long long)\n"
               "TACK_ATOMIC_(add, atomicAdd, float, float) TACK_ATOMIC_(add, atomicAdd, double, double)\n"
               "TACK_ATOMIC_(min, atomicMin, int32_t, int) TACK_ATOMIC_(min, atomicMin, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(min, atomicMin, uint64_t, unsigned long long)\n"
               "TACK_ATOMIC_(max, atomicMax, int32_t, int) TACK_ATOMIC_(max, atomicMax, uint32_t, unsigned)\n"
               "TACK_ATOMIC_(max, atomicMax, uint64_t, unsigned long long)\n"
               "#define TACK_ATOMIC_PICK_(op, cmp) static __device__ inline int64_t tack_atomic_##op(int64_t *p, "
               "int64_t v) { unsigned long long *q = (unsigned long long *)p, old = *q, seen; "
               "while ((int64_t)old cmp v) { seen = old; old = atomicCAS(q, seen, (unsigned long long)v); "
               "if (old == seen) break; } return (int64_t)old; }\n"
               "TACK_ATOMIC_PICK_(min, >) TACK_ATOMIC_PICK_(max, <)\n"
               /* The reductions: each lane applies its own contribution,
                * one atomic each (HIP has no __match_any_sync in every
                * version; a wavefront's combining would need it). Correct,
                * and no faster than tack_atomic_*. */
               "#define TACK_RDEV_ static __device__ inline\n" TACK_PRELUDE_REDUCE_CXX TACK_PRELUDE_CUDA_GRID
                   TACK_PRELUDE_CHECK_CLAIM_CXX
               "template <int OP, class T> TACK_RDEV_ void tack_reduce_(T *p, typename tack_rid_<T>::type v) "
               "{ tack_rapply_<OP>(p, v); }\n"
               /* hipRTC has __half of its own: before ROCm 5.7 defined
                * before any source (including HIP's hip_fp16.h again then
                * defines it twice), from 5.7 in the hip_fp16.h it carries
                * with hip_bf16.h, whose __hip_bfloat16 is new in 5.7. Included
                * before the pragma below, which would make their host code
                * device code too. */
               "#if __has_include(<hip/hip_bf16.h>)\n"
               "#include <hip/hip_fp16.h>\n#include <hip/hip_bf16.h>\n#define TACK_HIP_BF16_ 1\n#endif\n"
               /* The user's functions carry no __device__; clang's pragma
                * makes every function up to the matching end (the entry's
                * first line) callable on the GPU, the prelude's helpers
                * too. */
               "#pragma clang force_cuda_host_device begin\n"
               "#define TACK_INLINE_ static inline\n"
               "typedef __half tack_f16;\n"
               "#define TACK_F16_NATIVE 1\n"
               "static inline float tack_f16_to_float(tack_f16 h) { return __half2float(h); }\n"
               "static inline tack_f16 tack_f16_from_float(float f) { return __float2half(f); }\n"
               "#if defined(TACK_HIP_BF16_)\n"
               "typedef __hip_bfloat16 tack_bf16;\n"
               "#define TACK_BF16_NATIVE 1\n"
               "static inline float tack_bf16_to_float(tack_bf16 b) { return __bfloat162float(b); }\n"
               "static inline tack_bf16 tack_bf16_from_float(float f) { return __float2bfloat16(f); }\n"
               "#else\n"
               "static inline uint32_t tack_bits_of_float_(float f)\n"
               "{\n    uint32_t u;\n    __builtin_memcpy(&u, &f, sizeof u);\n    return u;\n}\n"
               "static inline float tack_float_of_bits_(uint32_t u)\n"
               "{\n    float f;\n    __builtin_memcpy(&f, &u, sizeof f);\n    return f;\n}\n" TACK_PRELUDE_BF16_STORAGE
               "#endif\n"
               "#define restrict __restrict__\n",
    .language = TACK_CHECK_CXX,
    /* CUDA's grid; the prelude's host-device region ends before it. Clang
     * expands macros in the pragma's argument: a user's `end` goes first
     * (nothing of the user's follows the entry). */
    .grid = {.head = "#undef end\n#pragma clang force_cuda_host_device end\nextern \"C\" __global__ void ",
             .space = "",
             .index = TACK_CUDA_GRID_INDEX,
             .stride = TACK_CUDA_GRID_STRIDE},
    .offline = TACK_CODE_NONE,
    .lacks = tack_cxx_lacks,
};

static tack_status rtc_error(const struct tack_hiprtc_api *api, tack_hiprtc_result r, const char *what)
{
    const char *s = api->hiprtcGetErrorString ? api->hiprtcGetErrorString(r) : NULL;
    return tack_error_set(r == TACK_HIPRTC_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME,
                          "hipRTC %s failed: %s (hiprtcResult %d)", what, s ? s : "unknown error", r);
}

/* A compile that failed for the source's sake: the message, and hipRTC's
 * log handed to the kernel layer with it. */
static tack_status compile_error(const struct tack_hiprtc_api *api, tack_hiprtc_program prog, const char *name,
                                 tack_hiprtc_result r, struct tack_kernel_code *out)
{
    size_t log_size = 0;
    char *log = NULL;
    if (api->hiprtcGetProgramLogSize(prog, &log_size) == TACK_HIPRTC_SUCCESS && log_size &&
        (log = malloc(log_size + 1)) && api->hiprtcGetProgramLog(prog, log) == TACK_HIPRTC_SUCCESS)
        log[log_size] = 0;
    else if (log)
        log[0] = 0;
    out->failed = 1;
    out->log = log;
    out->log_size = log ? strlen(log) : 0;
    const char *what = api->hiprtcGetErrorString ? api->hiprtcGetErrorString(r) : NULL;
    return tack_error_set(TACK_ECOMPILE, "kernel '%s' failed to compile for HIP (hipRTC %d.%d from '%s', %s):\n", name,
                          api->major, api->minor, tack_library_path(&api->library),
                          what ? what : "compilation error");
}

/* hipRTC with the device current (it compiles for the current device). */
static tack_status rtc_compile(const struct tack_hiprtc_api *api, const struct tack_compile *job,
                               struct tack_kernel_code *out)
{
    tack_hiprtc_program prog = NULL;
    tack_hiprtc_result r = api->hiprtcCreateProgram(&prog, job->source, "kernel.hip", 0, NULL, NULL);
    if (r != TACK_HIPRTC_SUCCESS)
        return rtc_error(api, r, "hiprtcCreateProgram");
    /* No architecture option: hipRTC compiles for the current device.
     * The kernel's own options follow Tack's, each one option. */
    size_t nown = 0;
    char **own = tack_build_options_words(job->options, &nown);
    const char **opts = own && nown < INT_MAX ? malloc((nown + 1) * sizeof *opts) : NULL;
    if (!opts) {
        free(own);
        api->hiprtcDestroyProgram(&prog);
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", job->name);
    }
    opts[0] = "-O3";
    for (size_t i = 0; i < nown; i++)
        opts[1 + i] = own[i];
    tack_status st = TACK_OK;
    r = api->hiprtcCompileProgram(prog, (int)nown + 1, opts);
    free(opts);
    free(own);
    if (r == TACK_HIPRTC_ERROR_COMPILATION || r == TACK_HIPRTC_ERROR_INVALID_OPTION) {
        st = compile_error(api, prog, job->name, r, out);
    } else if (r != TACK_HIPRTC_SUCCESS) {
        st = rtc_error(api, r, "hiprtcCompileProgram");
    } else {
        size_t n = 0;
        char *bin = NULL;
        r = api->hiprtcGetCodeSize(prog, &n);
        if (r != TACK_HIPRTC_SUCCESS || n == 0)
            st = r != TACK_HIPRTC_SUCCESS ? rtc_error(api, r, "hiprtcGetCodeSize")
                                          : tack_error_set(TACK_ERUNTIME, "hipRTC made an empty code object for "
                                                                          "kernel '%s'", job->name);
        else if (!(bin = malloc(n)))
            st = tack_error_set(TACK_ENOMEM, "out of memory holding a %zu-byte HIP code object", n);
        else if ((r = api->hiprtcGetCode(prog, bin)) != TACK_HIPRTC_SUCCESS)
            st = rtc_error(api, r, "hiprtcGetCode");
        if (st == TACK_OK) {
            out->kind = TACK_CODE_HIP_OBJECT;
            out->data = bin;
            out->size = n;
        } else {
            free(bin);
        }
    }
    api->hiprtcDestroyProgram(&prog);
    return st;
}

static tack_status hip_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out)
{
    if (!job->device)
        return tack_error_set(TACK_EVALUE, "HIP kernels compile for a device; kernel '%s' was given none",
                              job->name);
    const struct tack_hiprtc_api *api;
    tack_status st = tack_hiprtc_load(&api);
    if (st != TACK_OK)
        return st;
    int previous;
    st = enter(job->device, &previous);
    if (st != TACK_OK)
        return st;
    st = rtc_compile(api, job, out);
    leave(job->device, previous);
    return st;
}

static void hip_describe(tack_backend_report *out)
{
    const struct tack_hip_api *hip;
    tack_status st = tack_hip_load(&hip);
    char version[32] = "";
    int v = 0;
    /* HIP_VERSION is major * 10000000 + minor * 100000 + patch. */
    if (st == TACK_OK && hip->hipRuntimeGetVersion(&v) == TACK_HIP_SUCCESS && v > 0)
        snprintf(version, sizeof version, "%d.%d.%d", v / 10000000, v / 100000 % 100, v % 100000);
    tack_report_component(&out->driver, "driver", st, st == TACK_OK ? tack_library_path(&hip->library) : NULL,
                          version);
    int count = 0;
    if (st != TACK_OK || hip->hipGetDeviceCount(&count) != TACK_HIP_SUCCESS || count < 0)
        count = 0;
    out->device_count = count;
    for (int i = 0; i < count && i < TACK_REPORT_DEVICES; i++) {
        char name[sizeof out->devices[i]] = "";
        if (hip->hipDeviceGetName && hip->hipDeviceGetName(name, (int)sizeof name, i) == TACK_HIP_SUCCESS)
            name[sizeof name - 1] = 0;
        else
            snprintf(name, sizeof name, "(no name)");
        memcpy(out->devices[i], name, sizeof name);
    }
    const struct tack_hiprtc_api *rtc;
    st = tack_hiprtc_load(&rtc);
    if (st == TACK_OK)
        snprintf(version, sizeof version, "%d.%d", rtc->major, rtc->minor);
    tack_report_component(&out->compiler, "hipRTC", st, st == TACK_OK ? tack_library_path(&rtc->library) : NULL,
                          version);
}

/* Launches go on the null stream: hipMemcpy and hipMemset, which Tack's
 * copies and zero-fills use, are ordered with it, and hipDeviceSynchronize
 * (synchronize) waits for it. */
#define BLOCK 256u

struct hip_loaded_kernel {
    tack_hip_module module;
    tack_hip_function function;
    int nargs;
};

static tack_status hip_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out)
{
    const struct tack_hip_api *hip = HIP(device);
    if (code->kind != TACK_CODE_HIP_OBJECT)
        return tack_error_set(TACK_ERUNTIME, "%s runs HIP kernels compiled by hipRTC; it was given %s code",
                              device->name, tack_code_kind_name(code->kind));
    struct hip_loaded_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory loading a kernel");
    /* A module belongs to the current device. */
    int previous;
    tack_status st = enter(device, &previous);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    tack_hip_error e = hip->hipModuleLoadData(&k->module, code->data);
    if (e != TACK_HIP_SUCCESS) {
        st = tack_error_set(TACK_ERUNTIME, "loading kernel '%s' on %s failed: %s (hipError_t %d)", code->name,
                            device->name, tack_hip_error_string(hip, e), e);
    } else if ((e = hip->hipModuleGetFunction(&k->function, k->module, code->entry)) != TACK_HIP_SUCCESS) {
        st = tack_error_set(TACK_ERUNTIME, "kernel '%s' has no entry %s on %s: %s (hipError_t %d)", code->name,
                            code->entry, device->name, tack_hip_error_string(hip, e), e);
        (void)hip->hipModuleUnload(k->module);
    }
    leave(device, previous);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    k->nargs = code->nargs;
    *out = k;
    return TACK_OK;
}

static tack_status hip_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l)
{
    const struct tack_hip_api *hip = HIP(device);
    struct hip_loaded_kernel *k = kernel;
    /* The entry takes the extents first, then the kernel's parameters; the
     * runtime copies the values before returning. */
    void *params[TACK_KERNEL_MAX_DIMS + TACK_KERNEL_MAX_PARAMS];
    (void)tack_launch_params(l, k->nargs, params);
    /* 65536 blocks a dimension are enough to fill any GPU; the loops do
     * the rest (and y and z take at most 65535). */
    uint32_t block[3], grid[3];
    tack_launch_geometry(l, BLOCK, l->ndim == 1 ? 65536 : 65535, block, grid);
    int previous;
    tack_status st = enter(device, &previous);
    if (st != TACK_OK)
        return st;
    tack_hip_error e = hip->hipModuleLaunchKernel(k->function, grid[0], grid[1], grid[2], block[0], block[1],
                                                  block[2], 0, NULL, params, NULL);
    if (e != TACK_HIP_SUCCESS)
        st = hip_fail(hip, "hipModuleLaunchKernel", e);
    leave(device, previous);
    return st;
}

static void hip_kernel_unload(tack_device *device, void *kernel)
{
    /* The kernel layer synchronized first: nothing queued runs this code.
     * HIP modules are Tack's own, unlike any context. */
    struct hip_loaded_kernel *k = kernel;
    (void)HIP(device)->hipModuleUnload(k->module);
    free(k);
}

/* kDLROCMHost (pinned host memory) is host-addressable and stays with cpu. */
static const DLDeviceType hip_wraps[] = {kDLROCM, 0};

static const struct tack_backend_memory hip_memory = {
    .alloc = hip_alloc,
    .free = hip_free,
    .check_pointer = hip_check_pointer,
    .copy_to_host = hip_copy_to_host,
    .copy_from_host = hip_copy_from_host,
    .memory_space = hip_memory_space,
};

/* No stream slots: a consumer's reads are ordered by a host wait. */
static const struct tack_backend_queue hip_queue = {
    .synchronize = hip_synchronize,
};

/* No kernel_key: the code object is compiled for each GPU that loads it. */
static const struct tack_backend_toolchain hip_toolchain = {
    .dialect = &hip_dialect,
    .kernel_compile = hip_kernel_compile,
    .kernel_load = hip_kernel_load,
    .kernel_launch = hip_kernel_launch,
    .kernel_unload = hip_kernel_unload,
};

const struct tack_backend_ops tack_hip_backend = {
    .name = "hip",
    .dl_type = kDLROCM,
    .wraps = hip_wraps,
    .describe = hip_describe,
    .open = hip_open,
    .close = hip_close,
    .memory = &hip_memory,
    .queue = &hip_queue,
    .toolchain = &hip_toolchain,
};
