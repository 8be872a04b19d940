/* Kernels' code: source generated per dialect, compiled through the
 * backends' toolchains and the code store, loaded once per device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

void tack_built_free(struct tack_built *b)
{
    if (b->code.object)
        tack_store_unload(b->code.object);
    else
        free((void *)b->code.data);
    free(b->key);
    free(b);
}


void tack_param_describe(const struct tack_param *p, char *out, size_t cap)
{
    if (p->is_array)
        snprintf(out, cap, "%s%s *", p->writable ? "" : "const ", tack_dtype_c_type(p->dtype));
    else
        snprintf(out, cap, "%s", tack_dtype_c_type(p->dtype));
}

/* A device as a domain-mismatch message names it. A device that adopted
 * another library's context has the same name as the plain one on the same
 * GPU, so the context tells them apart. */

/* ---- generated source ---------------------------------------------------- */

/* TACK_ETYPE when a parameter has a dtype the dialect has no type for. */
static tack_status check_dtypes(const tack_kernel *k, const struct tack_dialect *d)
{
    for (int i = 0; d->lacks && i < k->sig.nparams; i++) {
        const struct tack_param *p = &k->sig.params[i];
        if (!d->lacks[p->dtype])
            continue;
        char t[64];
        tack_param_describe(p, t, sizeof t);
        return tack_error_set(TACK_ETYPE,
                              "parameter '%s' of kernel '%s' is %s (%s), which kernels on the %s backend cannot "
                              "take: %s",
                              p->name, k->sig.name, t, tack_dtype_name(p->dtype), d->name, d->lacks[p->dtype]);
    }
    return TACK_OK;
}

static tack_status generated_locked(tack_kernel *k, const struct tack_dialect *d, const char **out)
{
    tack_status st = check_dtypes(k, d);
    if (st != TACK_OK)
        return st;
    struct tack_generated *g;
    for (g = k->generated; g; g = g->next)
        if (g->dialect == d)
            break;
    if (!g) {
        g = calloc(1, sizeof *g);
        if (g && !(g->text = tack_generate(d, &k->sig, k->options.head, k->source))) {
            free(g);
            g = NULL;
        }
        if (!g)
            return tack_error_set(TACK_ENOMEM, "out of memory generating the source of kernel '%s'", k->sig.name);
        g->dialect = d;
        g->next = k->generated;
        k->generated = g;
    }
    *out = g->text;
    return TACK_OK;
}

tack_status tack_kernel_generated_source(tack_kernel *k, const char *backend, const char **out)
{
    TACK_PUBLIC_CALL();
    if (!k || !backend || !out)
        return tack_error_set(TACK_EVALUE, "arguments must not be NULL");
    tack_status live = tack_kernel_check_live(k, NULL, "tack_kernel_generated_source");
    if (live != TACK_OK)
        return live;
    const struct tack_backend_ops *ops = tack_backend_find(backend, strlen(backend));
    if (!ops || !tack_backend_dialect(ops)) {
        char list[256];
        size_t used = 0;
        int n = 0, shown = 0;
        list[0] = 0;
        for (int i = 0; tack_backends[i]; i++)
            n += tack_backend_dialect(tack_backends[i]) != NULL;
        for (int i = 0; tack_backends[i] && used < sizeof list; i++) {
            if (!tack_backend_dialect(tack_backends[i]))
                continue;
            shown++;
            used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'",
                                     shown == 1 ? "" : shown == n ? " and " : ", ", tack_backends[i]->name);
        }
        return tack_error_set(TACK_EVALUE, "no generated source for backend '%s'; Tack generates %s", backend, list);
    }
    pthread_mutex_lock(&k->lock);
    tack_status st = generated_locked(k, tack_backend_dialect(ops), out);
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* ---- compiled code -------------------------------------------------------- */

/* A compile or load that failed for the source's sake: the backend's
 * message and the compiler's log become the message and the thread's
 * compile log. The status stays the backend's. Frees the log. */
static tack_status report(tack_status st, struct tack_kernel_code *code)
{
    if (st != TACK_OK && code->failed)
        (void)tack_compile_failed(code->log, code->log_size, "%s", tack_last_error());
    free(code->log);
    code->log = NULL;
    code->log_size = 0;
    code->failed = 0;
    return st;
}

/* Where code under `job`'s key lies in the store: a digest of everything
 * that decided it. 0 when there is no usable directory: the store only
 * saves time, so then the code is compiled; but a directory others could
 * write into is refused (*refused), and file code, which lives only in the
 * store, cannot do without one (*refused too). */
static int cache_path(const struct tack_dialect *d, const struct tack_compile *job, char *dir, size_t dir_cap,
                      char *path, size_t path_cap, tack_status *refused)
{
    int unsafe;
    *refused = TACK_OK;
    tack_status st = tack_cache_dir(dir, dir_cap, &unsafe);
    if (st != TACK_OK) {
        if (unsafe || tack_code_kind_is_file(job->kind))
            *refused = st;
        else
            tack_error_clear(); /* compiled without the store, which only saves time */
        return 0;
    }
    char name[160];
    tack_store_name(d->name, job, name, sizeof name);
    int n = snprintf(path, path_cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < path_cap;
}

/* The backend's compile, through the store: file code is kept and loaded
 * there (tack_store_object); other code is read back from it when it is
 * there, and stored once compiled. */
static tack_status compile_kept(const struct tack_backend_ops *ops, struct tack_compile *job,
                                struct tack_kernel_code *code)
{
    char dir[4096], path[4400];
    tack_status refused = TACK_OK;
    int cached = tack_backend_keeps_code(ops) && cache_path(tack_backend_dialect(ops), job, dir, sizeof dir, path, sizeof path, &refused);
    if (refused != TACK_OK)
        return refused;
    if (tack_code_kind_is_file(job->kind)) {
        if (!cached)
            return tack_error_set(TACK_ERUNTIME, "the kernel cache directory's path is too long; set TACK_CACHE_DIR");
        code->kind = job->kind;
        return report(tack_store_object(dir, strrchr(path, '/') + 1, job, tack_backend_compiler(ops), code), code);
    }
    int text = tack_code_kind_is_text(job->kind);
    if (cached) {
        /* Checked: whole, and this user's to trust; else compiled again. */
        size_t n = 0;
        char *data = tack_cache_load(path, &n);
        if (data && n > 0) {
            code->kind = job->kind;
            code->data = data;
            /* Text is kept without its NUL, which the read adds back. */
            code->size = text ? strlen(data) + 1 : n;
            return TACK_OK;
        }
        free(data);
        tack_error_clear(); /* a miss, for whatever reason, is compiled */
    }
    tack_status st = report(tack_backend_kernel_compile(ops, job, code), code);
    /* Code the store could not keep is compiled again next time; the
     * compile itself succeeded, and leaves no message. */
    if (st == TACK_OK && cached && tack_cache_store(dir, path, code->data, text ? code->size - 1 : code->size))
        tack_error_clear();
    return st;
}

/* A compile that failed on the generated signature check
 * (tack_source_signature_check) is the user's type error, not the
 * compiler's: TACK_ETYPE naming the parameter whose type the compiler read
 * otherwise. The compile log stays for the details. Else `st` unchanged. */
static tack_status signature_mismatch(const tack_kernel *k, tack_status st)
{
    if (st != TACK_ECOMPILE && st != TACK_ERUNTIME)
        return st;
    const char *log = tack_kernel_compile_log();
    const char *at = log ? strstr(log, TACK_SIGNATURE_MARKER) : NULL;
    if (!at)
        return st;
    /* A parameter's own assertion names it; prefer it to the whole
     * function's, which may come first in the log. */
    for (const char *m = at; m; m = strstr(m + 1, TACK_SIGNATURE_MARKER)) {
        const char *num = m + strlen(TACK_SIGNATURE_MARKER);
        if (*num < '0' || *num > '9')
            continue;
        int pos = atoi(num);
        const struct tack_signature *sig = &k->sig;
        if (pos < 0 || pos >= sig->ndim + sig->nparams)
            break;
        if (pos < sig->ndim)
            return tack_error_set(TACK_ETYPE,
                                  "index parameter '%s' of kernel '%s': the compiler reads another type than the "
                                  "tack_index Tack read; declare it `tack_index %s`",
                                  sig->index_names[pos], sig->name, sig->index_names[pos]);
        char t[64];
        tack_param_describe(&sig->params[pos - sig->ndim], t, sizeof t);
        return tack_error_set(TACK_ETYPE,
                              "parameter '%s' of kernel '%s': the compiler reads another type than the %s Tack "
                              "read from the source (a macro, a conditional directive, or a definition in "
                              "TACK_CFLAGS or the kernel's options changes it for the compiler); write the type "
                              "plainly, so that both read the same",
                              sig->params[pos - sig->ndim].name, sig->name, t);
    }
    return tack_error_set(TACK_ETYPE,
                          "kernel '%s': the compiler reads other parameter types than Tack read from the source (a "
                          "macro, a conditional directive, or a definition in TACK_CFLAGS or the kernel's options "
                          "changes them for the compiler); write the signature plainly, so that both read the same",
                          k->sig.name);
}

/* The C library's headers, which only the cpu backend's compiler has. */
static const char *const c_headers[] = {"assert.h", "complex.h", "ctype.h", "errno.h", "float.h", "inttypes.h",
                                        "limits.h", "math.h", "stdarg.h", "stdbool.h", "stddef.h", "stdint.h",
                                        "stdio.h", "stdlib.h", "string.h", "time.h", NULL};

/* The C library header a GPU compiler's log says it could not open, or
 * NULL: NVRTC writes `cannot open source file "stdio.h"`, clang (hipRTC,
 * ocloc) `'stdio.h' file not found`. */
static const char *missing_c_header(const char *log)
{
    for (int i = 0; log && c_headers[i]; i++) {
        char nvrtc[64], clang[64];
        snprintf(nvrtc, sizeof nvrtc, "cannot open source file \"%s\"", c_headers[i]);
        snprintf(clang, sizeof clang, "'%s' file not found", c_headers[i]);
        if (strstr(log, nvrtc) || strstr(log, clang))
            return c_headers[i];
    }
    return NULL;
}

/* A GPU compile that failed on a C library header (printf's <stdio.h>,
 * <math.h>) is a kernel written for the CPU alone: the message says so,
 * and how to keep the include for the CPU. Else `st` unchanged. */
static tack_status c_header_advice(const struct tack_backend_ops *ops, tack_status st)
{
    const char *header = st == TACK_ECOMPILE && strcmp(ops->name, "cpu") ? missing_c_header(tack_kernel_compile_log())
                                                                         : NULL;
    char *message = header ? strdup(tack_last_error()) : NULL;
    if (!message)
        return st;
    st = tack_error_set(TACK_ECOMPILE,
                        "%s\nThe %s backend's compiler has no C library headers: its printf and math functions "
                        "need no include. Include <%s> for the cpu backend alone (#ifdef TACK_BACKEND_CPU)",
                        message, ops->name, header);
    free(message);
    return st;
}

/* Code for `ops` on `device`, or for `target` without one: kept from an
 * earlier build, found on disk, or compiled. */
static tack_status code_locked(tack_kernel *k, const struct tack_backend_ops *ops, tack_device *device,
                               const char *target, struct tack_built **out)
{
    const struct tack_dialect *d = tack_backend_dialect(ops);
    struct tack_compile job = {
        .name = k->sig.name,
        .uses_f64 = k->uses_f64,
        .dtypes = k->dtypes,
        .options = &k->options,
        .device = device,
        .target = target};
    tack_status st = generated_locked(k, d, &job.source);
    if (st == TACK_OK)
        st = tack_backend_kernel_key(ops, &job);
    if (st != TACK_OK)
        return st;
    /* Code is one per key. */
    for (struct tack_built *b = k->built; b; b = b->next) {
        if (b->dialect != d || b->compile != tack_backend_compiler(ops))
            continue;
        if (b->key && b->code.kind == job.kind && !strcmp(b->key, job.key)) {
            *out = b;
            return TACK_OK;
        }
    }
    struct tack_built *b = calloc(1, sizeof *b);
    if (!b || (tack_backend_keeps_code(ops) && !(b->key = strdup(job.key)))) {
        free(b);
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", k->sig.name);
    }
    st = c_header_advice(ops, signature_mismatch(k, compile_kept(ops, &job, &b->code)));
    if (st != TACK_OK) {
        free(b->key);
        free(b);
        return st;
    }
    b->dialect = d;
    b->compile = tack_backend_compiler(ops);
    b->next = k->built;
    k->built = b;
    *out = b;
    return TACK_OK;
}

/* Code without a key serves only the load it was compiled for. */
static void drop_unkept(tack_kernel *k, struct tack_built *b)
{
    if (b->key)
        return;
    for (struct tack_built **p = &k->built; *p; p = &(*p)->next) {
        if (*p == b) {
            *p = b->next;
            tack_built_free(b);
            return;
        }
    }
}

/* What a load of built code `b` is given: the code, its entry points'
 * names, and what the kernel's signature says. */
static void load_job(const tack_kernel *k, const struct tack_dialect *d, const struct tack_built *b,
                     struct tack_kernel_code *code)
{
    static const char *const entry_only[] = {TACK_ENTRY_NAME, NULL};
    *code = b->code;
    code->entries = d->entries ? d->entries : entry_only;
    code->nentries = 0;
    while (code->entries[code->nentries])
        code->nentries++;
    code->entry = code->entries[0];
    code->nargs = k->sig.nparams + k->nhidden;
    code->arg_sizes = k->arg_sizes;
    code->name = k->sig.name;
    code->uses_f64 = k->uses_f64;
    code->refused = 0;
    code->target[0] = 0;
}

/* Compiles for the device's backend and loads the code there, once per
 * device. A load the driver refuses for what the code is (code->refused)
 * is tried once more with the code the backend chooses instead. */
tack_status tack_kernel_build_locked(tack_kernel *k, tack_device *d, struct tack_loaded **loaded)
{
    *loaded = NULL;
    const struct tack_backend_ops *ops = d->ops;
    tack_status st = tack_backend_runs_kernels(d);
    if (st != TACK_OK)
        return st;
    for (struct tack_loaded *l = k->loaded; l; l = l->next) {
        if (l->device == d) {
            *loaded = l;
            return TACK_OK;
        }
    }
    struct tack_loaded *l = calloc(1, sizeof *l);
    if (!l)
        return tack_error_set(TACK_ENOMEM, "out of memory loading kernel '%s'", k->sig.name);
    struct tack_built *b;
    struct tack_kernel_code code;
    char *refused = NULL; /* the key of the code the driver refused */
    for (;;) {
        st = code_locked(k, ops, d, NULL, &b);
        if (st != TACK_OK)
            break;
        if (refused && b->key && !strcmp(b->key, refused)) {
            st = tack_error_set(TACK_ERUNTIME, "%s refused the code of kernel '%s', and the %s backend has no other",
                                d->name, k->sig.name, ops->name);
            break;
        }
        load_job(k, tack_backend_dialect(ops), b, &code);
        st = report(tack_backend_kernel_load(d, &code, &l->handle), &code);
        int again = st != TACK_OK && code.refused && !refused;
        if (again && !(refused = strdup(b->key ? b->key : ""))) {
            st = tack_error_set(TACK_ENOMEM, "out of memory loading kernel '%s'", k->sig.name);
            again = 0;
        }
        drop_unkept(k, b);
        if (!again)
            break;
    }
    free(refused);
    if (st != TACK_OK) {
        free(l);
        return st;
    }
    snprintf(l->target, sizeof l->target, "%s", code.target[0] ? code.target : tack_code_kind_name(code.kind));
    l->device = tack_device_retain(d);
    l->next = k->loaded;
    k->loaded = l;
    *loaded = l;
    return TACK_OK;
}

tack_status tack_kernel_build(tack_kernel *k, tack_device *d)
{
    TACK_PUBLIC_CALL();
    if (!k || !d)
        return tack_error_set(TACK_EVALUE, "kernel and device must not be NULL");
    tack_status live = tack_kernel_check_live(k, d, "tack_kernel_build");
    if (live != TACK_OK)
        return live;
    struct tack_loaded *l;
    pthread_mutex_lock(&k->lock);
    tack_status st = tack_kernel_build_locked(k, d, &l);
    pthread_mutex_unlock(&k->lock);
    if (st == TACK_OK)
        atomic_store_explicit(&k->last, l, memory_order_release);
    return st;
}

tack_status tack_kernel_target(tack_kernel *k, tack_device *d, const char **out)
{
    TACK_PUBLIC_CALL();
    if (!k || !d || !out)
        return tack_error_set(TACK_EVALUE, "kernel, device and out must not be NULL");
    tack_status live = tack_kernel_check_live(k, d, "tack_kernel_target");
    if (live != TACK_OK)
        return live;
    struct tack_loaded *l;
    pthread_mutex_lock(&k->lock);
    tack_status st = tack_kernel_build_locked(k, d, &l);
    pthread_mutex_unlock(&k->lock);
    if (st == TACK_OK) {
        atomic_store_explicit(&k->last, l, memory_order_release);
        *out = l->target;
    }
    return st;
}

tack_status tack_kernel_ptx(tack_kernel *k, const char *arch, const char **ptx, size_t *size)
{
    TACK_PUBLIC_CALL();
    if (!k || !ptx || !size)
        return tack_error_set(TACK_EVALUE, "kernel, ptx and size must not be NULL");
    tack_status live = tack_kernel_check_live(k, NULL, "tack_kernel_ptx");
    if (live != TACK_OK)
        return live;
    /* The backend whose code without a device is PTX. */
    const struct tack_backend_ops *ops = NULL;
    for (int i = 0; tack_backends[i] && !ops; i++)
        if (tack_backend_dialect(tack_backends[i]) &&
            tack_backend_dialect(tack_backends[i])->offline == TACK_CODE_PTX)
            ops = tack_backends[i];
    if (!ops)
        return tack_error_set(TACK_ERUNTIME, "no backend of this Tack compiles kernels to PTX");
    struct tack_built *b;
    pthread_mutex_lock(&k->lock);
    tack_status st = code_locked(k, ops, NULL, arch, &b);
    pthread_mutex_unlock(&k->lock);
    if (st == TACK_OK) {
        *ptx = b->code.data;
        *size = b->code.size;
    }
    return st;
}

