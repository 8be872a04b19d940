/*
 * The CUDA backend's toolchain: which NVRTC makes what code for a device,
 * the kernel's cache key, and compiling with NVRTC. See src/backend/cuda/cuda.c.
 *
 * The generated source is CUDA C, which NVRTC compiles in process. For a
 * device, the code is a CUBIN for the GPU's own architecture when an NVRTC
 * knows it and makes CUBINs the driver loads: nothing is compiled when it
 * loads, and a CUBIN has no PTX version for the driver to refuse. Else it
 * is PTX, which the driver's JIT finishes for the GPU, from an NVRTC whose
 * PTX the driver reads: a driver refuses PTX newer than itself, whatever
 * the architecture, so the newest NVRTC's PTX runs only on the newest
 * drivers. Without a device (tack_kernel_ptx) it is PTX of the first
 * NVRTC, for the architecture named, or the oldest it knows. The kernel
 * layer keeps the code on disk under a key that says all of that.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

/* Longest architecture name taken ("compute_100a" and the like fit). */
#define ARCH_MAX 32

static tack_status nvrtc_error(const struct tack_nvrtc_api *api, nvrtcResult r, const char *what)
{
    return tack_error_set(r == NVRTC_ERROR_OUT_OF_MEMORY ? TACK_ENOMEM : TACK_ERUNTIME, "NVRTC %s failed: %s", what,
                          api->nvrtcGetErrorString(r));
}

/* The PTX ISA version (10 * major + minor) the NVRTC of CUDA `version`
 * writes and the driver of CUDA `version` reads, versions being 1000 *
 * major + 10 * minor as nvrtcVersion and cuDriverGetVersion tell them. From
 * NVIDIA's PTX ISA release history: CUDA 11.x brought PTX 7.x; 12.0 to 12.5
 * brought 8.0 to 8.5, 12.6 kept 8.5, 12.8 and 12.9 brought 8.7 and 8.8;
 * 13.x brings 9.x. 0 for a release the history does not reach. */
static int ptx_isa(int version)
{
    int major = version / 1000, minor = version % 1000 / 10;
    switch (major) {
    case 11: return 70 + minor;
    case 12: return minor <= 5 ? 80 + minor : 79 + minor;
    case 13: return 90 + minor;
    default: return 0;
    }
}

static int nvrtc_version(const struct tack_nvrtc_api *api) { return 1000 * api->major + 10 * api->minor; }

/* Whether a driver of CUDA `driver` reads the PTX `api` writes: no newer
 * than its own. Past the history, the newer release writes the newer PTX. */
static int reads_ptx_of(int driver, const struct tack_nvrtc_api *api)
{
    int version = nvrtc_version(api), isa = ptx_isa(version), own = ptx_isa(driver);
    return isa && own ? isa <= own : version <= driver;
}

/* Whether a driver of CUDA `driver` loads the CUBINs `api` makes. Minor
 * version compatibility: a driver loads the CUBINs of every toolkit of its
 * major version, newer minors included, and of older major versions; not
 * of a newer major version. */
static int loads_cubin_of(int driver, const struct tack_nvrtc_api *api) { return api->major <= driver / 1000; }

static int lists(const struct tack_nvrtc_api *api, int arch)
{
    for (int i = 0; i < api->narchs; i++)
        if (api->archs[i] == arch)
            return 1;
    return 0;
}

/* The newest architecture `api` targets that a GPU of `arch` runs the PTX
 * of (none newer than the GPU); 0 if there is none. */
int cuda_newest_up_to(const struct tack_nvrtc_api *api, int arch)
{
    int best = 0;
    for (int i = 0; i < api->narchs; i++)
        if (api->archs[i] <= arch && api->archs[i] > best)
            best = api->archs[i];
    return best;
}

static int makes_cubins(const struct tack_nvrtc_api *api) { return api->nvrtcGetCUBINSize && api->nvrtcGetCUBIN; }

/* What to install for a driver of CUDA `driver` and a GPU of `arch`: the
 * NVRTC of the driver's release, whose CUBINs and PTX it loads; for a GPU
 * older than that release knows (CUDA 13 starts at sm_75, 12 at sm_50),
 * the last release that knows it. Returns 1 when a newer driver would do
 * as well, 0 when it is the GPU's age that decides. */
int cuda_advise(int driver, int arch, char *out, size_t cap)
{
    int major = driver / 1000, minor = driver % 1000 / 10, newer_driver = 1;
    if (major >= 13 && arch < 75) {
        major = 12;
        minor = 9;
        newer_driver = 0;
    }
    if (major == 12 && arch < 50) {
        major = 11;
        minor = 8;
        newer_driver = 0;
    }
    if (major >= 13)
        snprintf(out, cap, "the NVRTC of CUDA %d.%d (pip install \"nvidia-cuda-nvrtc==%d.%d.*\")", major, minor,
                 major, minor);
    else if (major >= 11)
        snprintf(out, cap, "the NVRTC of CUDA %d.%d (pip install \"nvidia-cuda-nvrtc-cu%d==%d.%d.*\")", major,
                 minor, major, major, minor);
    else
        snprintf(out, cap, "an NVRTC that knows sm_%d and a driver of CUDA 11 or newer", arch);
    return newer_driver;
}

/* Why `api` makes no code a driver of CUDA `driver` loads on a GPU of
 * `arch`; `refused`: the driver refused a CUBIN on that GPU. */
static void why_not(const struct tack_nvrtc_api *api, int driver, int arch, int refused, char *out, size_t cap)
{
    if (!api->narchs) {
        snprintf(out, cap, "lists no architectures (NVRTC before CUDA 11.2)");
        return;
    }
    if (!cuda_newest_up_to(api, arch)) {
        snprintf(out, cap, "knows sm_%d to sm_%d, nothing as old as sm_%d", api->archs[0],
                 api->archs[api->narchs - 1], arch);
        return;
    }
    char cubin[128];
    if (!lists(api, arch))
        snprintf(cubin, sizeof cubin, "knows no sm_%d", arch);
    else if (refused)
        snprintf(cubin, sizeof cubin, "makes a CUBIN the driver refused");
    else if (!makes_cubins(api))
        snprintf(cubin, sizeof cubin, "makes no CUBINs");
    else
        snprintf(cubin, sizeof cubin, "makes CUBINs that need a CUDA %d driver", api->major);
    int isa = ptx_isa(nvrtc_version(api)), own = ptx_isa(driver);
    if (isa && own)
        snprintf(out, cap, "%s, and writes PTX ISA %d.%d, newer than the driver reads (%d.%d)", cubin, isa / 10,
                 isa % 10, own / 10, own % 10);
    else
        snprintf(out, cap, "%s, and writes PTX newer than the driver reads", cubin);
}

/* Why no NVRTC makes code that a GPU of `arch` called `gpu` runs with a
 * driver of CUDA `driver` (`refused`: the driver refused a CUBIN there,
 * for `refusal`), and what to install. Returns TACK_ERUNTIME. */
tack_status cuda_none_fits(const char *gpu, int arch, int driver, int refused, const char *refusal)
{
    char found[1200], why[300], advice[160];
    size_t used = 0;
    found[0] = 0;
    const struct tack_nvrtc_api *api;
    for (int i = 0; used < sizeof found && tack_nvrtc_api_at(i, &api) == TACK_OK; i++) {
        why_not(api, driver, arch, refused, why, sizeof why);
        used += (size_t)snprintf(found + used, sizeof found - used, "%sNVRTC %d.%d (%s) %s", i ? "; " : "",
                                 api->major, api->minor, tack_library_path(&api->library), why);
    }
    int update = cuda_advise(driver, arch, advice, sizeof advice);
    return tack_error_set(TACK_ERUNTIME,
                          "no NVRTC here makes code that %s (compute capability %d.%d) runs with its CUDA %d.%d "
                          "driver%s%s: %s. %s%s%s%s",
                          gpu, arch / 10, arch % 10, driver / 1000, driver % 1000 / 10,
                          refused ? ", which refused " : "", refused ? refusal : "", found,
                          tack_nvrtc_forced() ? "TACK_NVRTC_LIBRARY names the one NVRTC Tack uses: point it at the "
                                                "libnvrtc.so of "
                                              : "Install ",
                          advice,
                          tack_nvrtc_forced() ? ", or unset it to let Tack look"
                                              : ": Tack finds it beside its own Python package, or set "
                                                "TACK_NVRTC_LIBRARY to its libnvrtc.so",
                          update ? ". Or update the driver" : "");
}

/* The code for a GPU of `arch` with a driver of CUDA `driver`: a CUBIN
 * from the first NVRTC that makes one the driver loads for the GPU (unless
 * the driver `refused` one there), else PTX from the first whose PTX the
 * driver reads. A driver whose version is unknown (0) is taken to load
 * anything. 0 when none fits; TACK_ERUNTIME when no NVRTC is found at all
 * (the message says where Tack looked). */
tack_status cuda_pick(int driver, int arch, int refused, struct cuda_choice *c, int *fits)
{
    const struct tack_nvrtc_api *api;
    tack_status st = tack_nvrtc_api_get(&api);
    *fits = 0;
    if (st != TACK_OK)
        return st;
    for (int i = 0; !refused && tack_nvrtc_api_at(i, &api) == TACK_OK; i++) {
        if (makes_cubins(api) && lists(api, arch) && (!driver || loads_cubin_of(driver, api))) {
            *c = (struct cuda_choice){i, api, TACK_CODE_CUBIN};
            *fits = 1;
            return TACK_OK;
        }
    }
    for (int i = 0; tack_nvrtc_api_at(i, &api) == TACK_OK; i++) {
        if (cuda_newest_up_to(api, arch) && (!driver || reads_ptx_of(driver, api))) {
            *c = (struct cuda_choice){i, api, TACK_CODE_PTX};
            *fits = 1;
            return TACK_OK;
        }
    }
    return TACK_OK;
}

/* The code for device `d`, as cuda_pick chooses it for its GPU and driver and
 * what the driver refused there before. */
static tack_status cuda_choose(const tack_device *d, struct cuda_device *cd, struct cuda_choice *c)
{
    char refusal[sizeof cd->refusal];
    pthread_mutex_lock(&cd->code_lock);
    int refused = cd->cubin_refused;
    memcpy(refusal, cd->refusal, sizeof refusal);
    pthread_mutex_unlock(&cd->code_lock);
    int fits;
    tack_status st = cuda_pick(cd->cu->driver_version, cd->arch, refused, c, &fits);
    if (st != TACK_OK || fits)
        return st;
    return cuda_none_fits(d->name, cd->arch, cd->cu->driver_version, refused, refusal);
}

/* The architecture option's value for `job`'s code from `api`: the one
 * named; for a device, its own (a CUBIN) or the newest the NVRTC knows up
 * to it (PTX); else the oldest the NVRTC knows, so that the PTX runs on
 * every GPU it supports ("" when it lists none: NVRTC's default). */
static void arch_of(const struct tack_compile *job, const struct tack_nvrtc_api *api, char *out, size_t cap)
{
    if (job->target && *job->target)
        snprintf(out, cap, "%s", job->target);
    else if (job->device && job->kind == TACK_CODE_CUBIN)
        snprintf(out, cap, "sm_%d", impl_of(job->device)->arch);
    else if (job->device)
        snprintf(out, cap, "compute_%d", cuda_newest_up_to(api, impl_of(job->device)->arch));
    else if (api->narchs)
        snprintf(out, cap, "compute_%d", api->archs[0]);
    else
        out[0] = 0;
}

/* NVRTC's options for `job`'s code from `api`: Tack's (opts[0..nopts)),
 * then the kernel's own (own, each one option), in `all` for the compile. */
struct nvrtc_options {
    const char *opts[3];
    int nopts;
    char arch_opt[64];
    char include_opt[4100];
    char **own;
    size_t nown;
    const char **all;
};

static void options_free(struct nvrtc_options *o)
{
    free(o->own);
    free(o->all);
}

/* TACK_ENOMEM, with nothing left to free. */
static tack_status options_of(const struct tack_compile *job, const struct tack_nvrtc_api *api,
                              struct nvrtc_options *o)
{
    char arch[ARCH_MAX];
    arch_of(job, api, arch, sizeof arch);
    o->own = NULL;
    o->all = NULL;
    o->nopts = 0;
    /* User functions carry no __device__: NVRTC makes them device code. */
    o->opts[o->nopts++] = "--device-as-default-execution-space";
    if (arch[0]) {
        snprintf(o->arch_opt, sizeof o->arch_opt, "--gpu-architecture=%s", arch);
        o->opts[o->nopts++] = o->arch_opt;
    }
    /* The toolkit's headers, for the prelude's half-precision types. */
    if (api->include_dir[0]) {
        snprintf(o->include_opt, sizeof o->include_opt, "-I%s", api->include_dir);
        o->opts[o->nopts++] = o->include_opt;
    }
    /* The kernel's own after Tack's. NVRTC reads each entry as one
     * option, blanks and all. */
    if (!(o->own = tack_build_options_words(job->options, &o->nown)) ||
        o->nown > (size_t)INT_MAX - (size_t)o->nopts ||
        !(o->all = malloc(((size_t)o->nopts + o->nown) * sizeof *o->all))) {
        options_free(o);
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", job->name);
    }
    for (int i = 0; i < o->nopts; i++)
        o->all[i] = o->opts[i];
    for (size_t i = 0; i < o->nown; i++)
        o->all[(size_t)o->nopts + i] = o->own[i];
    return TACK_OK;
}

/* The code depends on the NVRTC's version and the options, the
 * architecture among them; which kind it is, on the device and its driver
 * (cuda_choose). */
tack_status cuda_kernel_key(struct tack_compile *job)
{
    if (job->target && strlen(job->target) >= ARCH_MAX)
        return tack_error_set(TACK_EVALUE, "'%s' is not a CUDA architecture name such as compute_90", job->target);
    const struct tack_nvrtc_api *api;
    tack_status st;
    if (job->device) {
        struct cuda_choice c = {0, NULL, TACK_CODE_NONE};
        if ((st = cuda_choose(job->device, impl_of(job->device), &c)) != TACK_OK)
            return st;
        api = c.api;
        job->kind = c.kind;
        job->compiler = c.nvrtc;
    } else {
        if ((st = tack_nvrtc_api_get(&api)) != TACK_OK)
            return st;
        job->kind = TACK_CODE_PTX;
        job->compiler = 0;
    }
    struct nvrtc_options o;
    if ((st = options_of(job, api, &o)) != TACK_OK)
        return st;
    int used = snprintf(job->key, sizeof job->key, "nvrtc %d.%d", api->major, api->minor);
    for (int i = 0; i < o.nopts && used > 0 && (size_t)used < sizeof job->key; i++)
        used += snprintf(job->key + used, sizeof job->key - (size_t)used, " %s", o.opts[i]);
    /* The kernel's own options, of any length, as their digest. */
    char own[65];
    tack_build_options_digest(job->options, own);
    if (used > 0 && (size_t)used < sizeof job->key)
        snprintf(job->key + used, sizeof job->key - (size_t)used, " options %s", own);
    options_free(&o);
    return TACK_OK;
}

/* The program's log after a failed compile, malloc'd and NUL-terminated,
 * or NULL. */
static char *program_log(const struct tack_nvrtc_api *api, nvrtcProgram prog)
{
    size_t size = 0;
    char *log = NULL;
    if (api->nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || !size || !(log = malloc(size + 1)))
        return NULL;
    if (api->nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
        log[0] = 0;
    log[size] = 0;
    return log;
}

/* The compiled program's PTX (NUL-terminated, the NUL counted) or CUBIN. */
static tack_status program_code(const struct tack_nvrtc_api *api, nvrtcProgram prog, enum tack_code_kind kind,
                                struct tack_kernel_code *out)
{
    int cubin = kind == TACK_CODE_CUBIN;
    size_t n = 0;
    char *data = NULL;
    nvrtcResult r = cubin ? api->nvrtcGetCUBINSize(prog, &n) : api->nvrtcGetPTXSize(prog, &n);
    if (r == NVRTC_SUCCESS && n == 0)
        r = NVRTC_ERROR_INVALID_PROGRAM;
    if (r == NVRTC_SUCCESS && !(data = malloc(n + 1)))
        return tack_error_set(TACK_ENOMEM, "out of memory holding %zu bytes of %s", n, tack_code_kind_name(kind));
    if (r == NVRTC_SUCCESS)
        r = cubin ? api->nvrtcGetCUBIN(prog, data) : api->nvrtcGetPTX(prog, data);
    if (r != NVRTC_SUCCESS) {
        free(data);
        return nvrtc_error(api, r, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX");
    }
    /* The PTX size NVRTC reports counts the NUL it writes. */
    data[n] = 0;
    out->kind = kind;
    out->data = data;
    out->size = cubin ? n : strlen(data) + 1;
    return TACK_OK;
}

tack_status cuda_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out)
{
    const struct tack_nvrtc_api *api;
    tack_status st = tack_nvrtc_api_at(job->compiler, &api);
    if (st != TACK_OK)
        return st;
    if (job->kind == TACK_CODE_CUBIN && !makes_cubins(api))
        return tack_error_set(TACK_ERUNTIME, "NVRTC %d.%d (%s) makes no CUBINs", api->major, api->minor,
                              tack_library_path(&api->library));
    struct nvrtc_options o;
    if ((st = options_of(job, api, &o)) != TACK_OK)
        return st;
    nvrtcProgram prog = NULL;
    nvrtcResult r = api->nvrtcCreateProgram(&prog, job->source, "kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        options_free(&o);
        return nvrtc_error(api, r, "nvrtcCreateProgram");
    }
    r = api->nvrtcCompileProgram(prog, o.nopts + (int)o.nown, o.all);
    if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION) {
        out->failed = 1;
        out->log = program_log(api, prog);
        out->log_size = out->log ? strlen(out->log) : 0;
        st = tack_error_set(TACK_ECOMPILE, "kernel '%s' failed to compile for CUDA (NVRTC %d.%d, %s):\n", job->name,
                            api->major, api->minor, api->nvrtcGetErrorString(r));
    } else if (r != NVRTC_SUCCESS) {
        st = nvrtc_error(api, r, "nvrtcCompileProgram");
    } else {
        st = program_code(api, prog, job->kind == TACK_CODE_CUBIN ? TACK_CODE_CUBIN : TACK_CODE_PTX, out);
    }
    api->nvrtcDestroyProgram(&prog);
    options_free(&o);
    return st;
}

/* NVRTC's code, loaded and launched as modules (module.c); no measured
 * cost, so a launch's hooks are called around every launch. */
const struct tack_backend_toolchain tack_cuda_toolchain = {
    .dialect = &cuda_dialect,
    .kernel_key = cuda_kernel_key,
    .kernel_compile = cuda_kernel_compile,
    .kernel_load = cuda_kernel_load,
    .kernel_launch = cuda_kernel_launch,
    .kernel_unload = cuda_kernel_unload,
};
