/*
 * The CUDA backend's kernels on the device: what a CUBIN or PTX is (read
 * before the driver sees it), loading it as a module, launching it on the
 * device's stream, unloading it. See src/backend/cuda/cuda.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

/* ---- kernels: what the code is ---------------------------------------------- */

/* A CUDA ELF file's header fields Tack reads (ELF64, little-endian). */
#define ELF_CUDA_MACHINE 190
#define ELF_NOTE 7
#define ELF_NOBITS 8

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The CUBIN's architecture (sm_<arch>) and the CUDA release of the
 * toolkit that made it (10 * major + minor; 0 when it does not say), read
 * within its `size` bytes. 0 when it is no whole CUDA ELF file: a driver
 * reads the headers without a size, so a file shorter than they say must
 * not reach it. */
static int cubin_facts(const unsigned char *image, size_t size, int *arch, int *toolkit)
{
    if (size < 64 || memcmp(image, "\177ELF", 4) || image[4] != 2 || image[5] != 1 ||
        le(image + 18, 2) != ELF_CUDA_MACHINE)
        return 0;
    uint64_t shoff = le(image + 40, 8), phoff = le(image + 32, 8);
    uint64_t shentsize = le(image + 58, 2), shnum = le(image + 60, 2);
    uint64_t phentsize = le(image + 54, 2), phnum = le(image + 56, 2);
    if (shentsize < 64 || shoff > size || shnum > (size - shoff) / shentsize || phoff > size ||
        (phentsize && phnum > (size - phoff) / phentsize))
        return 0;
    /* The architecture: the flags' low byte in the first CUDA ELF ABI
     * (version 7), their second byte from version 8 on. */
    uint64_t flags = le(image + 48, 4);
    *arch = (int)(image[8] < 8 ? flags & 0xff : (flags >> 8) & 0xff);
    /* Every section with contents lies within the file. The toolkit:
     * .note.nv.cuinfo, owner "NVIDIA Corp", type 1000, whose description is
     * 16-bit words: note version, architecture, toolkit. */
    *toolkit = 0;
    for (uint64_t i = 0; i < shnum; i++) {
        const unsigned char *sh = image + shoff + i * shentsize;
        uint64_t type = le(sh + 4, 4), off = le(sh + 24, 8), len = le(sh + 32, 8);
        if (type != ELF_NOBITS && (off > size || len > size - off))
            return 0;
        if (type != ELF_NOTE || len < 12 + 12 + 6)
            continue;
        const unsigned char *note = image + off;
        if (le(note, 4) == 12 && le(note + 4, 4) >= 6 && le(note + 8, 4) == 1000 &&
            !memcmp(note + 12, "NVIDIA Corp", 12))
            *toolkit = (int)le(note + 24 + 4, 2);
    }
    return 1;
}

/* What `code` is, as tack_kernel_target says it; 0 for a CUBIN that is no
 * whole CUDA ELF file. */
static int describe(const struct tack_kernel_code *code, char *out, size_t cap)
{
    char made[32] = "";
    if (code->kind == TACK_CODE_CUBIN) {
        int arch, toolkit;
        if (!cubin_facts(code->data, code->size, &arch, &toolkit))
            return 0;
        if (toolkit)
            snprintf(made, sizeof made, " (CUDA %d.%d)", toolkit / 10, toolkit % 10);
        snprintf(out, cap, "cubin sm_%d%s", arch, made);
        return 1;
    }
    const char *text = code->data, *v = strstr(text, ".version "), *t = strstr(text, ".target sm_"),
               *r = strstr(text, "compilation tools, release ");
    int major = 0, minor = 0, arch = 0, cmajor = 0, cminor = 0;
    if (v)
        sscanf(v, ".version %d.%d", &major, &minor);
    if (t)
        sscanf(t, ".target sm_%d", &arch);
    if (r && sscanf(r, "compilation tools, release %d.%d", &cmajor, &cminor) == 2)
        snprintf(made, sizeof made, ", CUDA %d.%d", cmajor, cminor);
    snprintf(out, cap, "ptx compute_%d (PTX ISA %d.%d%s)", arch, major, minor, made);
    return 1;
}

/* A load that failed for what the code is, not for a fault of the driver or
 * the context, nor for memory. */
static int refuses_code(CUresult r)
{
    return r != CUDA_ERROR_OUT_OF_MEMORY && r != CUDA_ERROR_NOT_INITIALIZED && r != CUDA_ERROR_DEINITIALIZED &&
           r != CUDA_ERROR_INVALID_CONTEXT && r != CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* ---- kernels: modules and launches ---------------------------------------- */

/* A loaded kernel: the module holding the code, its entry point, and the
 * parameter count of the entry (n, then the kernel's parameters). */
struct cuda_kernel {
    CUmodule module;
    CUfunction function;
    int nargs;
    CUcontext ctx;
    unsigned long long ctx_id;
};

/* The driver refused the code in `code`, described as `what`, with `r`. */
static tack_status refused(tack_device *d, struct cuda_device *cd, struct tack_kernel_code *code, const char *what,
                           CUresult r)
{
    char text[200], advice[160];
    tack_cuda_error_text(r, text, sizeof text);
    if (code->kind == TACK_CODE_CUBIN) {
        /* Later kernels on the device are PTX; this one is tried again so. */
        pthread_mutex_lock(&cd->code_lock);
        cd->cubin_refused = 1;
        snprintf(cd->refusal, sizeof cd->refusal, "a %s with %s", what, text);
        pthread_mutex_unlock(&cd->code_lock);
        code->refused = 1;
        return tack_error_set(TACK_ERUNTIME, "%s refused the kernel's code, a %s: %s", d->name, what, text);
    }
    int driver = cd->cu->driver_version;
    int update = cuda_advise(driver, cd->arch, advice, sizeof advice);
    return tack_error_set(TACK_ERUNTIME,
                          "%s (compute capability %d.%d, CUDA %d.%d driver) refused the kernel's code, %s: %s. "
                          "Install %s%s",
                          d->name, cd->arch / 10, cd->arch % 10, driver / 1000, driver % 1000 / 10, what, text,
                          advice, update ? ", or update the driver" : "");
}

tack_status cuda_kernel_load(tack_device *d, struct tack_kernel_code *code, void **out)
{
    struct cuda_device *cd = impl_of(d);
    char what[sizeof code->target];
    if (!code || (code->kind != TACK_CODE_PTX && code->kind != TACK_CODE_CUBIN) || !code->data || !code->entry)
        return tack_error_set(TACK_ERUNTIME, "%s runs PTX and CUBIN kernels; it was given %s code", d->name,
                              tack_code_kind_name(code ? code->kind : TACK_CODE_NONE));
    if ((code->kind == TACK_CODE_PTX && (!code->size || ((const char *)code->data)[code->size - 1])) ||
        !describe(code, what, sizeof what))
        return tack_error_set(TACK_ERUNTIME, "the kernel's %s (%zu bytes) is damaged; nothing was loaded",
                              tack_code_kind_name(code->kind), code->size);
    struct cuda_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory loading a kernel");
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    CUresult r = cd->cu->cuModuleLoadData(&k->module, code->data);
    if (r != CUDA_SUCCESS)
        st = refuses_code(r) ? refused(d, cd, code, what, r) : cuda_driver_error(TACK_ERUNTIME, r, "loading a kernel", d);
    else if ((r = cd->cu->cuModuleGetFunction(&k->function, k->module, code->entry)) != CUDA_SUCCESS) {
        st = cuda_driver_error(TACK_ERUNTIME, r, "finding the kernel's entry point", d);
        cd->cu->cuModuleUnload(k->module);
    }
    cuda_pop_context(cd->cu, pushed);
    if (st != TACK_OK) {
        free(k);
        return st;
    }
    k->nargs = code->nargs;
    k->ctx = cd->ctx;
    k->ctx_id = cd->ctx_id;
    snprintf(code->target, sizeof code->target, "%s", what);
    *out = k;
    return TACK_OK;
}

/* Threads per block; the entry point strides over the grid, so any grid
 * covers [0, n) and the grid need only fill the GPU. */
#define LAUNCH_BLOCK 256u
#define BLOCKS_PER_SM 32

tack_status cuda_kernel_launch(tack_device *d, void *kernel, const struct tack_launch *l)
{
    struct cuda_device *cd = impl_of(d);
    struct cuda_kernel *k = kernel;
    if (l->n < 0)
        return tack_error_set(TACK_EVALUE, "a launch covers n >= 0 indices, not %lld", (long long)l->n);
    if (l->n == 0)
        return TACK_OK;
    /* The entry takes the extents first, then the kernel's parameters; the
     * driver reads every value before cuLaunchKernel returns. */
    void *params[TACK_KERNEL_MAX_DIMS + TACK_KERNEL_MAX_PARAMS];
    (void)tack_launch_params(l, k->nargs, params);
    uint32_t block[3], grid[3];
    uint64_t fill = (uint64_t)(cd->sm_count > 0 ? cd->sm_count : 1) * BLOCKS_PER_SM;
    /* One dimension: enough blocks to fill the GPU. More: y and z are
     * limited to 65535 blocks by CUDA itself. */
    tack_launch_geometry(l, LAUNCH_BLOCK, l->ndim == 1 ? fill : 65535, block, grid);
    int pushed;
    tack_status st = cuda_enter(d, cd, &pushed);
    if (st != TACK_OK)
        return st;
    CUresult r = cd->cu->cuLaunchKernel(k->function, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0,
                                        cd->stream, params, NULL);
    cuda_pop_context(cd->cu, pushed);
    return r == CUDA_SUCCESS ? TACK_OK : cuda_driver_error(TACK_ERUNTIME, r, "launching a kernel", d);
}

void cuda_kernel_unload(tack_device *d, void *kernel)
{
    struct cuda_device *cd = impl_of(d);
    struct cuda_kernel *k = kernel;
    int pushed = 0;
    /* A module whose context is gone went with it. Launches of it may still
     * be queued: they finish before the module goes. */
    if (!atomic_load(&cd->gone) && cuda_context_alive(cd, k->ctx, k->ctx_id)) {
        if (cuda_push_context(cd->cu, k->ctx, &pushed) == CUDA_SUCCESS) {
            cd->cu->cuStreamSynchronize(cd->stream);
            cd->cu->cuModuleUnload(k->module);
            cuda_pop_context(cd->cu, pushed);
        }
    }
    free(k);
}
