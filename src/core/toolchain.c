/* What the kernel layer and the backends' toolchains share: the text
 * generated source is built in, the pieces of it every entry point has,
 * and the kinds of compiled code. */
#include "toolchain.h"

#include <ctype.h>
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

const char *tack_source_type(tack_dtype dtype)
{
    static const char *const types[TACK_NDTYPES] = {
        [TACK_I8] = "tack_i8_",   [TACK_U8] = "tack_u8_",    [TACK_I16] = "tack_i16_", [TACK_U16] = "tack_u16_",
        [TACK_I32] = "tack_i32_", [TACK_U32] = "tack_u32_",  [TACK_I64] = "tack_i64_", [TACK_U64] = "tack_u64_",
        [TACK_F32] = "float",     [TACK_F64] = "double",     [TACK_BOOL] = "tack_bool_", [TACK_F16] = "tack_f16",
        [TACK_BF16] = "tack_bf16", [TACK_C64] = "tack_c64", [TACK_C128] = "tack_c128",
    };
    return (unsigned)dtype < TACK_NDTYPES ? types[dtype] : NULL;
}

static const char *const index_vars[TACK_KERNEL_MAX_DIMS] = {"tack_i_", "tack_j_", "tack_k_"};
/* A device entry's extent of index d; one index keeps the plain n. */
static const char *extent_var(const struct tack_signature *sig, int d)
{
    static const char *const vars[TACK_KERNEL_MAX_DIMS] = {"tack_n0_", "tack_n1_", "tack_n2_"};
    return sig->ndim == 1 ? "tack_n_" : d >= 0 && d < TACK_KERNEL_MAX_DIMS ? vars[d] : "";
}

/* The hidden parameters (tack_signature_hidden) after the kernel's own:
 * as a declaration's (`decl`, arrays in `space`) or a call's. Inside an
 * entry and a copy they have the same names, tack_ext_<name>_ (a macro
 * over the name finds them) and tack_check_. */
static void hidden_params(struct tack_source *b, const struct tack_signature *sig, int decl, const char *space)
{
    for (int k = 0; k < sig->nparams; k++)
        if (sig->extents_passed >> k & 1)
            tack_source_put(b, ", %stack_ext_%s_", decl ? "tack_extents_ " : "", sig->params[k].name);
    if (sig->checked)
        tack_source_put(b, ", %s%stack_check_", decl ? space : "", decl ? "tack_check_record_ *" : "");
}

void tack_source_call(struct tack_source *b, const struct tack_signature *sig, const char *function)
{
    const int hidden = tack_signature_hidden(sig);
    tack_source_put(b, "%s%s(", function ? function : sig->name, !function && hidden ? "_tack_x_" : "");
    for (int d = 0; d < sig->ndim; d++)
        tack_source_put(b, "%s%s", d ? ", " : "", index_vars[d]);
    for (int k = 0; k < sig->nparams; k++)
        tack_source_put(b, ", tack_p%d_", k);
    if (hidden)
        hidden_params(b, sig, 0, "");
    tack_source_put(b, ");\n");
}

void tack_source_params(struct tack_source *b, const struct tack_signature *sig, const char *space)
{
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        const char *type = tack_source_type(p->dtype);
        if (p->is_array)
            tack_source_put(b, ", %s%s%s *tack_p%d_", space, p->writable ? "" : "const ", type, k);
        else
            tack_source_put(b, ", %s tack_p%d_", type, k);
    }
    if (tack_signature_hidden(sig))
        hidden_params(b, sig, 1, space);
}

void tack_source_kernel_copy(struct tack_source *b, const struct tack_signature *sig, const char *source,
                             const char *suffix, const char *qualifier, const char *leading,
                             enum tack_check_language language)
{
    const char *space = language == TACK_CHECK_OPENCL ? "__global " : "";
    tack_source_put(b, "static inline void %s%s(%s", sig->name, suffix, leading);
    for (int d = 0; d < sig->ndim; d++)
        tack_source_put(b, "%stack_index %s", d ? ", " : "", sig->index_names[d]);
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        const char *type = tack_source_type(p->dtype);
        if (p->is_array)
            /* Checked, the parameter cannot be changed: its checks are
             * against the array it starts as. */
            tack_source_put(b, ", %s%s *%s%s%s", p->writable ? "" : "const ", type, qualifier,
                            sig->checked ? "const " : "", p->name);
        else
            tack_source_put(b, ", %s %s", type, p->name);
    }
    if (tack_signature_hidden(sig))
        hidden_params(b, sig, 1, space);
    tack_source_put(b, ")\n{\n");
    /* Where a checked load out of bounds reads its 0 and a store goes:
     * the calling thread's own, so that concurrent violations cannot make
     * a load read anything else. */
    for (int k = 0; sig->checked && k < sig->nparams; k++)
        if (sig->params[k].is_array)
            tack_source_put(b, "%s tack_sink%d_;\n(void)&tack_sink%d_;\n", tack_source_type(sig->params[k].dtype),
                            k, k);
    for (int i = 0; i < sig->body_if; i++)
        tack_source_put(b, "#if 1\n");
    tack_source_put(b, "#line %d \"kernel\"\n", sig->body_line);
    if (sig->checked && sig->body_checked)
        tack_source_append(b, sig->body_checked);
    else
        tack_source_put(b, "%.*s", (int)(sig->body_end - sig->body_begin), source + sig->body_begin);
    tack_source_put(b, "\n");
    for (int i = 0; i < sig->body_endif; i++)
        tack_source_put(b, "#endif\n");
    tack_source_put(b, "#line 1 \"<tack entry>\"\n}\n");
}

void tack_source_hidden(struct tack_source *b, const struct tack_signature *sig, const char *source,
                        enum tack_check_language language)
{
    if (!tack_signature_hidden(sig))
        return;
    const int cxx = language == TACK_CHECK_CXX;
    const char *space = language == TACK_CHECK_OPENCL ? "__global " : "";
    /* Passed by value, all int64: one layout on the host and every device. */
    tack_source_put(b,
                    "typedef struct { tack_i64_ tack_size_; tack_i64_ tack_ndim_; tack_i64_ tack_n_[%d]; } "
                    "tack_extents_;\n"
                    "TACK_INLINE_ tack_index tack_extent_of_(tack_extents_ tack_e_, tack_index tack_d_)\n"
                    "{\n    return tack_d_ >= 0 && tack_d_ < tack_e_.tack_ndim_ && tack_d_ < %d ? "
                    "tack_e_.tack_n_[tack_d_] : 0;\n}\n"
                    "#define tack_extent(y, d) tack_extent_of_(tack_ext_##y##_, (tack_index)(d))\n"
                    "#define tack_size(y) ((tack_index)tack_ext_##y##_.tack_size_)\n",
                    TACK_EXTENT_DIMS, TACK_EXTENT_DIMS);
    if (!sig->checked) {
        tack_source_kernel_copy(b, sig, source, "_tack_x_", "", "", language);
        return;
    }
    const char *cas = language == TACK_CHECK_C
                          ? "__atomic_compare_exchange_n(&tack_r_->tack_flag_, &tack_expected_, 1u, 0, "
                            "__ATOMIC_RELAXED, __ATOMIC_RELAXED)"
                      : cxx ? "tack_check_claim_((unsigned *)&tack_r_->tack_flag_)"
                            : "tack_check_claim_((volatile __global unsigned *)&tack_r_->tack_flag_)";
    /* The first violation wins the flag and writes the rest; the host
     * reads the record once the launch is complete. */
    tack_source_put(b,
                    "typedef struct { tack_u32_ tack_flag_; tack_u32_ tack_param_; tack_i64_ tack_index_; "
                    "tack_i64_ tack_extent_; tack_i64_ tack_line_; tack_u64_ tack_sink_; tack_u64_ tack_unused_; } "
                    "tack_check_record_;\n"
                    "%s void tack_check_fail_(%stack_check_record_ *tack_r_, int tack_param_, tack_index tack_i_, "
                    "tack_index tack_n_, int tack_line_)\n{\n"
                    "    tack_u32_ tack_expected_ = 0;\n    (void)tack_expected_;\n"
                    "    if (%s) {\n"
                    "        tack_r_->tack_param_ = (tack_u32_)tack_param_;\n        tack_r_->tack_index_ = tack_i_;\n"
                    "        tack_r_->tack_extent_ = tack_n_;\n        tack_r_->tack_line_ = tack_line_;\n    }\n}\n"
                    "#define TACK_AT_(k, a, i) (*tack_at##k##_(a, (tack_index)(i), tack_ext_##a##_.tack_size_, "
                    "__LINE__, tack_check_, &tack_sink##k##_))\n"
                    "#define TACK_REF_(k, a, i) (*tack_ref##k##_(a, (tack_index)(i), tack_ext_##a##_.tack_size_, "
                    "__LINE__, tack_check_))\n"
                    /* Through a pointer cast, in bytes: an offset o in the
                     * array's elements and an index in the cast type's,
                     * written in the order the source has them (bl). */
                    "#define TACK_BYTES_(k, a, s, ref, bl, l, r) tack_bytes##k##_(a, (tack_index)((bl) ? (l) : (r)), "
                    "(tack_index)((bl) ? (r) : (l)), (tack_index)(s), tack_ext_##a##_.tack_size_, __LINE__, "
                    "tack_check_, ref)\n",
                    /* Out of line on the host, so that the accesses in
                     * bounds stay small enough to unroll and inline. */
                    language == TACK_CHECK_C ? "static __attribute__((__noinline__, __cold__, __unused__))"
                                             : "TACK_INLINE_",
                    space,
                    cas);
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        if (!p->is_array)
            continue;
        const char *type = tack_source_type(p->dtype), *c = p->writable ? "" : "const ";
        /* An index is in bounds when 0 <= i < n: one unsigned compare. A
         * load out of bounds reads the thread's zeroed sink, a store goes
         * there; an address (&y[e], an atomic's) is the record's sink: the
         * middle of memory that belongs to no array (the host's between
         * inaccessible pages), since the kernel may go on to index from
         * it (a row), which one element on the stack would not survive.
         * The flag is set before the address is handed out, so that what
         * follows cannot hide the violation. */
        tack_source_put(b,
                        "TACK_INLINE_ %s%s *tack_at%d_(%s%s *tack_a_, tack_index tack_i_, tack_index tack_n_, "
                        "int tack_line_, %stack_check_record_ *tack_r_, %s *tack_sink_)\n{\n"
                        "    if (__builtin_expect((tack_u64_)tack_i_ < (tack_u64_)tack_n_, 1))\n"
                        "        return tack_a_ + tack_i_;\n"
                        "    tack_check_fail_(tack_r_, %d, tack_i_, tack_n_, tack_line_);\n",
                        c, type, k, c, type, space, type, k);
        if (cxx)
            tack_source_put(b, "    *tack_sink_ = %s{};\n", type);
        else
            tack_source_put(b, "    *tack_sink_ = (%s){0};\n", type);
        tack_source_put(b,
                        "    return tack_sink_;\n}\n"
                        "TACK_INLINE_ %s%s *tack_ref%d_(%s%s *tack_a_, tack_index tack_i_, tack_index tack_n_, "
                        "int tack_line_, %stack_check_record_ *tack_r_)\n{\n"
                        "    if (__builtin_expect((tack_u64_)tack_i_ < (tack_u64_)tack_n_, 1))\n"
                        "        return tack_a_ + tack_i_;\n"
                        "    tack_check_fail_(tack_r_, %d, tack_i_, tack_n_, tack_line_);\n"
                        "    return (%s%s *)tack_r_->tack_sink_;\n}\n",
                        c, type, k, c, type, space, k, space, type);
        /* Through a cast to another type: the access of s bytes at byte
         * o * sizeof(y's type) + i * s, reported in the cast type's
         * elements. Out of bounds a load reads zeros the sink was given
         * (up to 256 bytes of them). */
        tack_source_put(b,
                        "TACK_INLINE_ void *tack_bytes%d_(const %s *tack_a_, tack_index tack_o_, tack_index tack_i_, "
                        "tack_index tack_s_, tack_index tack_n_, int tack_line_, %stack_check_record_ *tack_r_, "
                        "int tack_ref_)\n{\n"
                        "    const tack_index tack_size_ = tack_n_ * (tack_index)sizeof(%s),\n"
                        "                     tack_at_ = tack_o_ * (tack_index)sizeof(%s) + tack_i_ * tack_s_;\n"
                        "    if (__builtin_expect(tack_s_ <= tack_size_ && (tack_u64_)tack_at_ <= "
                        "(tack_u64_)(tack_size_ - tack_s_), 1))\n"
                        "        return (void *)((const char *)tack_a_ + tack_at_);\n"
                        "    tack_check_fail_(tack_r_, %d, tack_at_ < 0 ? -((tack_s_ - 1 - tack_at_) / tack_s_) : "
                        "tack_at_ / tack_s_, tack_size_ / tack_s_, tack_line_);\n"
                        "    for (tack_index tack_q_ = 0; !tack_ref_ && tack_q_ < tack_s_ && tack_q_ < 256; "
                        "tack_q_++)\n"
                        "        ((%schar *)tack_r_->tack_sink_)[tack_q_] = 0;\n"
                        "    return (%svoid *)tack_r_->tack_sink_;\n}\n",
                        k, type, space, type, type, k, space, space);
    }
    tack_source_kernel_copy(b, sig, source, "_tack_x_", "", "", language);
}

/* The keywords a Tack-written type may contain: a -D flag or a #define can
 * rename them for the user's source, never for Tack's side of a check. */
static const char *const type_keywords[] = {"void", "const", "float", "double", "_Bool", "bool", NULL};

/* Tack's reading of parameter k (-1 - d for index d), in `language`: as
 * the check compares it, in Tack's own spelling (tack_source_type), which
 * no definition of the user's reaches; `shown`, as the check's message
 * names it. */
static void check_type(char *out, size_t cap, const struct tack_signature *sig, int k,
                       enum tack_check_language language, int shown)
{
    if (k < 0) {
        snprintf(out, cap, "tack_index");
        return;
    }
    const struct tack_param *p = &sig->params[k];
    const char *type = shown ? tack_dtype_c_type(p->dtype) : tack_source_type(p->dtype);
    if (shown && p->dtype == TACK_BOOL && language != TACK_CHECK_CXX)
        type = "_Bool";
    snprintf(out, cap, "%s%s%s", p->is_array && !p->writable ? "const " : "", type, p->is_array ? " *" : "");
}

/* Whether `word` occurs as a whole word in `text`. */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        int before = p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

/* Keeps the keywords `types` uses from macros (on), or gives them back.
 * NVRTC has no push_macro and warns of every one it meets, before any
 * message of the user's: there the keywords are only freed (a check that
 * a macro would have changed fails all the same). */
static void keywords_protect(struct tack_source *b, const char *types, int on)
{
    for (int i = 0; type_keywords[i]; i++) {
        if (!has_word(types, type_keywords[i]))
            continue;
        if (on)
            tack_source_put(b, "#ifndef __CUDACC_RTC__\n#pragma push_macro(\"%s\")\n#endif\n#undef %s\n",
                            type_keywords[i], type_keywords[i]);
        else
            tack_source_put(b, "#ifndef __CUDACC_RTC__\n#pragma pop_macro(\"%s\")\n#endif\n", type_keywords[i]);
    }
}

void tack_source_signature_check(struct tack_source *b, const struct tack_signature *sig, const char *source,
                                 enum tack_check_language language)
{
    const int total = sig->ndim + sig->nparams;
    char type[96], shown[96];
    /* Every type word Tack writes below, for keywords_protect; "void" for
     * the function's type. */
    char words[TACK_KERNEL_MAX_PARAMS * 24 + 16] = "void";
    for (int k = 0; k < sig->nparams; k++) {
        check_type(type, sizeof type, sig, k, language, 0);
        size_t used = strlen(words);
        snprintf(words + used, sizeof words - used, " %s", type);
    }
    if (language == TACK_CHECK_CXX) {
        /* Every name Tack's own, never one a user's macro takes: a kernel
         * built with defines={"N": 4} or {"value": 1} still compiles. */
        tack_source_put(b, "template <class tack_A_, class tack_B_> struct tack_same_ "
                           "{ static const bool tack_value_ = false; };\n"
                           "template <class tack_A_> struct tack_same_<tack_A_, tack_A_> "
                           "{ static const bool tack_value_ = true; };\n"
                           "template <int tack_N_, class tack_F_> struct tack_param_ { typedef void tack_type_; };\n"
                           "template <class tack_R_, class tack_P_, class... tack_Q_> "
                           "struct tack_param_<0, tack_R_(tack_P_, tack_Q_...)> { typedef tack_P_ tack_type_; };\n"
                           "template <int tack_N_, class tack_R_, class tack_P_, class... tack_Q_> "
                           "struct tack_param_<tack_N_, tack_R_(tack_P_, tack_Q_...)> "
                           "{ typedef typename tack_param_<tack_N_ - 1, tack_R_(tack_Q_...)>::tack_type_ "
                           "tack_type_; };\n"
                           "template <class tack_F_> struct tack_arity_;\n"
                           "template <class tack_R_, class... tack_P_> struct tack_arity_<tack_R_(tack_P_...)> "
                           "{ static const int tack_value_ = sizeof...(tack_P_); };\n");
        keywords_protect(b, words, 1);
        tack_source_put(b, "static_assert(tack_arity_<decltype(%s)>::tack_value_ == %d, \"" TACK_SIGNATURE_MARKER
                           "all: kernel '%s' has another number of parameters than Tack read\");\n",
                        sig->name, total, sig->name);
        for (int k = 0; k < total; k++) {
            check_type(type, sizeof type, sig, k < sig->ndim ? -1 - k : k - sig->ndim, language, 0);
            check_type(shown, sizeof shown, sig, k < sig->ndim ? -1 - k : k - sig->ndim, language, 1);
            const char *name = k < sig->ndim ? sig->index_names[k] : sig->params[k - sig->ndim].name;
            tack_source_put(b,
                            "static_assert(tack_same_<tack_param_<%d, decltype(%s)>::tack_type_, %s>::tack_value_, "
                            "\"" TACK_SIGNATURE_MARKER "%d: parameter '%s' of kernel '%s' is not %s\");\n",
                            k, sig->name, type, k, name, sig->name, shown);
        }
        keywords_protect(b, words, 0);
        return;
    }
    /* C: each parameter by name, in a function over the user's own
     * parameter list (where it has no directive inside), whose types are
     * the compiler's reading; then the whole function's type. */
    if (sig->params_plain) {
        tack_source_put(b, "#line %d \"kernel\"\nstatic inline void %s_tack_check_(%.*s)\n#line 1 \"<tack entry>\"\n{\n",
                        sig->params_line, sig->name, (int)(sig->params_end - sig->params_begin),
                        source + sig->params_begin);
        keywords_protect(b, words + 4, 1);
        for (int k = 0; k < total; k++) {
            check_type(type, sizeof type, sig, k < sig->ndim ? -1 - k : k - sig->ndim, language, 0);
            check_type(shown, sizeof shown, sig, k < sig->ndim ? -1 - k : k - sig->ndim, language, 1);
            const char *name = k < sig->ndim ? sig->index_names[k] : sig->params[k - sig->ndim].name;
            tack_source_put(b,
                            "_Static_assert(__builtin_types_compatible_p(__typeof__(%s), %s), \"" TACK_SIGNATURE_MARKER
                            "%d: parameter '%s' of kernel '%s' is not %s\");\n",
                            name, type, k, name, sig->name, shown);
        }
        keywords_protect(b, words + 4, 0);
        for (int k = 0; k < total; k++)
            tack_source_put(b, "%s(void)%s;", k ? " " : "",
                            k < sig->ndim ? sig->index_names[k] : sig->params[k - sig->ndim].name);
        tack_source_put(b, "\n}\n");
    }
    if (language == TACK_CHECK_OPENCL)
        return;
    keywords_protect(b, words, 1);
    tack_source_put(b, "_Static_assert(__builtin_types_compatible_p(__typeof__(&%s), void (*)(", sig->name);
    for (int k = 0; k < total; k++) {
        check_type(type, sizeof type, sig, k < sig->ndim ? -1 - k : k - sig->ndim, language, 0);
        tack_source_put(b, "%s%s", k ? ", " : "", type);
    }
    tack_source_put(b, ")), \"" TACK_SIGNATURE_MARKER "all: kernel '%s' has other parameter types than Tack read\");\n",
                    sig->name);
    keywords_protect(b, words, 0);
}

void tack_source_device_entry(struct tack_source *b, const struct tack_signature *sig,
                              const struct tack_device_grid *grid)
{
    tack_source_put(b, "%s" TACK_ENTRY_NAME "(", grid->head);
    for (int d = 0; d < sig->ndim; d++)
        tack_source_put(b, "%stack_index %s", d ? ", " : "", extent_var(sig, d));
    tack_source_params(b, sig, grid->space);
    tack_source_put(b, ")\n{\n");
    /* Index d takes grid dimension ndim - 1 - d: the last index, which
     * runs fastest in memory, the fastest-varying threads. */
    for (int d = 0; d < sig->ndim; d++) {
        int g = sig->ndim - 1 - d;
        tack_source_put(b, "%*sfor (tack_index %s = %s; %s < %s; %s += %s)\n", 4 * (d + 1), "", index_vars[d],
                        grid->index[g], index_vars[d], extent_var(sig, d), index_vars[d], grid->stride[g]);
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
int tack_code_kind_is_file(enum tack_code_kind kind) { return kind == TACK_CODE_HOST; }
