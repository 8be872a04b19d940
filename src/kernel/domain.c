/* The domain of a kernel called without one (tack_kernel_call, and Python's
 * k(...)): the shape every array argument shares. Taking it from one array
 * (once the first the kernel may store through) ran hist(v, bins) over the
 * 256 bins instead of the values, and a per-point kernel over (N, 3) points
 * over 3N indices, both silently; so where the arrays could mean two
 * domains the call is refused and the caller names the domain. */
#include <stdio.h>
#include <string.h>

#include "kernel.h"

/* Appends a's shape to buf[*used..cap) as Python writes a tuple. */
static void shape_text(char *buf, size_t cap, size_t *used, const tack_array *a)
{
    if (*used >= cap)
        return;
    int w = snprintf(buf + *used, cap - *used, "(");
    for (int d = 0; d < a->ndim && w >= 0; d++) {
        *used += (size_t)w;
        if (*used >= cap)
            return;
        w = snprintf(buf + *used, cap - *used, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
    }
    if (w >= 0) {
        *used += (size_t)w;
        if (*used < cap)
            w = snprintf(buf + *used, cap - *used, a->ndim == 1 ? ",)" : ")");
        if (w >= 0)
            *used += (size_t)w;
    }
}

static int same_shape(const tack_array *a, const tack_array *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]);
}

/* What the caller writes instead, in both languages. */
#define SAY_WHICH                                                                                                \
    "; call it over the domain meant: .launch(n, ...) or .launch((h, w), ...) in Python, tack_kernel_launch or "  \
    "tack_kernel_launch_nd in C"

tack_status tack_kernel_call_domain(const tack_kernel *k, const tack_arg *args, size_t nargs,
                                    int64_t shape[TACK_KERNEL_MAX_DIMS])
{
    const struct tack_signature *sig = &k->sig;
    if (!k->narrays)
        return tack_error_set(TACK_EVALUE, "kernel '%s' has no array parameter to take its domain from" SAY_WHICH,
                              sig->name);
    for (int d = 0; d < TACK_KERNEL_MAX_DIMS; d++)
        shape[d] = 0;
    /* An argument the launch will refuse is left to it, so that a wrong
     * count or type is reported as such rather than as a domain. */
    if (nargs != (size_t)sig->nparams)
        return TACK_OK;
    const tack_array *first = NULL;
    int agree = 1;
    for (int i = 0; i < sig->nparams; i++) {
        if (!sig->params[i].is_array)
            continue;
        const tack_array *a = args[i].kind == TACK_ARG_ARRAY ? args[i].value.array : NULL;
        if (!a || a->dtype != sig->params[i].dtype)
            return TACK_OK;
        if (!first)
            first = a;
        else
            agree &= same_shape(a, first);
    }
    char shapes[640];
    size_t used = 0;
    if (!agree) {
        shapes[0] = '\0';
        for (int i = 0; i < sig->nparams && used < sizeof shapes; i++) {
            if (!sig->params[i].is_array)
                continue;
            int w = snprintf(shapes + used, sizeof shapes - used, "%s'%s' is ", used ? ", " : "",
                             sig->params[i].name);
            if (w < 0)
                break;
            used += (size_t)w;
            shape_text(shapes, sizeof shapes, &used, args[i].value.array);
        }
        return tack_error_set(TACK_EVALUE,
                              "kernel '%s' was called without a domain, and its arrays disagree on one: %s" SAY_WHICH,
                              sig->name, shapes);
    }
    if (first->ndim != sig->ndim) {
        shape_text(shapes, sizeof shapes, &used, first);
        if (sig->ndim == 1 && first->ndim > 1)
            return tack_error_set(TACK_EVALUE,
                                  "kernel '%s' takes 1 index, and its arrays are %s, %d-D: the domain could be "
                                  "its %lld rows or its %zu elements" SAY_WHICH,
                                  sig->name, shapes, first->ndim, (long long)first->shape[0], first->size);
        return tack_error_set(TACK_EVALUE, "kernel '%s' takes %d ind%s, and its arrays are %s, %d-D" SAY_WHICH,
                              sig->name, sig->ndim, sig->ndim == 1 ? "ex" : "ices", shapes, first->ndim);
    }
    if (sig->ndim == 1)
        shape[0] = (int64_t)first->size;
    else
        memcpy(shape, first->shape, (size_t)sig->ndim * sizeof shape[0]);
    return TACK_OK;
}
