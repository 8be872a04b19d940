/* What the kernel layer and the backends' toolchains share: the text
 * generated source is built in, the pieces of it every entry point has,
 * and the kinds of compiled code. */
#include "toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *text = realloc(b->text, cap);
        if (!text) {
            b->failed = 1;
            return;
        }
        b->text = text;
        b->cap = cap;
    }
}

char *tack_source_finish(struct tack_source *b)
{
    if (b->failed) {
        free(b->text);
        return NULL;
    }
    return b->text;
}

void tack_source_call(struct tack_source *b, const struct tack_signature *sig)
{
    tack_source_put(b, "%s(tack_i_", sig->name);
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
                              const char *space, const char *loop)
{
    tack_source_put(b, "%s" TACK_ENTRY_NAME "(tack_index tack_n_", head);
    tack_source_params(b, sig, space);
    tack_source_put(b, ")\n{\n%s", loop);
    tack_source_call(b, sig);
    tack_source_put(b, "}\n");
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
