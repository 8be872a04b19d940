/* What the kernel layer and the backends' toolchains share: the text
 * generated source is built in, the pieces of it every entry point has,
 * and the kinds of compiled code. */
#include "toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and a NUL, doubling; 0 (and failed) when out of
 * memory. */
static int grow(struct tack_source *b, size_t n)
{
    if (b->text && b->cap - b->len > n)
        return 1;
    size_t cap = (b->cap ? b->cap * 2 : 4096) + n;
    char *text = realloc(b->text, cap);
    if (!text) {
        b->failed = 1;
        return 0;
    }
    b->text = text;
    b->cap = cap;
    return 1;
}

void tack_source_put(struct tack_source *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->text ? b->text + b->len : NULL, b->text ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->text && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        if (!grow(b, (size_t)n))
            return;
    }
}

void tack_source_append(struct tack_source *b, const char *text)
{
    size_t n = strlen(text);
    if (b->failed || !grow(b, n))
        return;
    memcpy(b->text + b->len, text, n + 1);
    b->len += n;
}

char *tack_source_finish(struct tack_source *b)
{
    if (b->failed) {
        free(b->text);
        return NULL;
    }
    return b->text;
}

static const char *const index_vars[TACK_KERNEL_MAX_DIMS] = {"tack_i_", "tack_j_", "tack_k_"};
/* A device entry's extent of index d; one index keeps the plain n. */
static const char *extent_var(const struct tack_signature *sig, int d)
{
    static const char *const vars[TACK_KERNEL_MAX_DIMS] = {"tack_n0_", "tack_n1_", "tack_n2_"};
    return sig->ndim == 1 ? "tack_n_" : d >= 0 && d < TACK_KERNEL_MAX_DIMS ? vars[d] : "";
}

void tack_source_call(struct tack_source *b, const struct tack_signature *sig, const char *function)
{
    tack_source_put(b, "%s(", function ? function : sig->name);
    for (int d = 0; d < sig->ndim; d++)
        tack_source_put(b, "%s%s", d ? ", " : "", index_vars[d]);
    for (int k = 0; k < sig->nparams; k++)
        tack_source_put(b, ", tack_p%d_", k);
    tack_source_put(b, ");\n");
}

void tack_source_params(struct tack_source *b, const struct tack_signature *sig, const char *space)
{
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        const char *type = tack_dtype_c_type(p->dtype);
        if (p->is_array)
            tack_source_put(b, ", %s%s%s *tack_p%d_", space, p->writable ? "" : "const ", type, k);
        else
            tack_source_put(b, ", %s tack_p%d_", type, k);
    }
}

void tack_source_device_entry(struct tack_source *b, const struct tack_signature *sig, const char *head,
                              const char *space, const char *const dims[TACK_KERNEL_MAX_DIMS],
                              const char *const steps[TACK_KERNEL_MAX_DIMS])
{
    tack_source_put(b, "%s" TACK_ENTRY_NAME "(", head);
    for (int d = 0; d < sig->ndim; d++)
        tack_source_put(b, "%stack_index %s", d ? ", " : "", extent_var(sig, d));
    tack_source_params(b, sig, space);
    tack_source_put(b, ")\n{\n");
    /* Index d takes grid dimension ndim - 1 - d: the last index, which
     * runs fastest in memory, the fastest-varying threads. */
    for (int d = 0; d < sig->ndim; d++) {
        int g = sig->ndim - 1 - d;
        tack_source_put(b, "%*sfor (tack_index %s = %s; %s < %s; %s += %s)\n", 4 * (d + 1), "", index_vars[d],
                        dims[g], index_vars[d], extent_var(sig, d), index_vars[d], steps[g]);
    }
    tack_source_put(b, "%*s", 4 * (sig->ndim + 1), "");
    tack_source_call(b, sig, NULL);
    tack_source_put(b, "}\n");
}

void tack_launch_geometry(const struct tack_launch *l, uint32_t threads, uint64_t cap, uint32_t block[3],
                          uint32_t grid[3])
{
    block[0] = threads;
    block[1] = block[2] = 1;
    if (l->ndim > 1 && threads > 32) {
        /* 2-D: 32 x threads/32; 3-D: 32 x threads/64 x 2. */
        block[0] = 32;
        block[1] = threads / 32 / (l->ndim > 2 ? 2 : 1);
        block[2] = l->ndim > 2 ? 2 : 1;
    }
    for (int g = 0; g < 3; g++) {
        uint64_t extent = g < l->ndim ? (uint64_t)l->shape[l->ndim - 1 - g] : 1;
        uint64_t blocks = (extent + block[g] - 1) / block[g];
        grid[g] = (uint32_t)(blocks > cap ? cap : blocks ? blocks : 1);
    }
}

int tack_launch_params(const struct tack_launch *l, int nargs, void **out)
{
    int n = 0;
    for (int d = 0; d < l->ndim; d++)
        out[n++] = (void *)&l->shape[d];
    for (int i = 0; i < nargs; i++)
        out[n++] = l->args[i];
    return n;
}

static const struct {
    const char *name, *extension;
    int text;
} kinds[TACK_CODE_KINDS] = {
    [TACK_CODE_NONE] = {"no", "bin", 0},
    [TACK_CODE_HOST] = {"host", "so", 0},
    [TACK_CODE_PTX] = {"PTX", "ptx", 1},
    [TACK_CODE_CUBIN] = {"CUBIN", "cubin", 0},
    [TACK_CODE_SPIRV] = {"SPIR-V", "spv", 0},
    [TACK_CODE_OPENCL_C] = {"OpenCL C", "cl", 1},
    [TACK_CODE_HIP_OBJECT] = {"HIP code object", "hsaco", 0},
};

static int known(enum tack_code_kind kind) { return (int)kind >= 0 && kind < TACK_CODE_KINDS; }

const char *tack_code_kind_name(enum tack_code_kind kind) { return kinds[known(kind) ? kind : 0].name; }

const char *tack_code_kind_extension(enum tack_code_kind kind) { return kinds[known(kind) ? kind : 0].extension; }

int tack_code_kind_is_text(enum tack_code_kind kind) { return known(kind) && kinds[kind].text; }
