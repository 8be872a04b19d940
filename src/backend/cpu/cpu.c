/* The host backend: memory from the C allocator, every address accepted;
 * kernels built from host C by the system compiler and run on a pool of
 * threads, complete when the launch returns.
 *
 * This file holds the table, open and describe, and the code generation
 * with the kernel slots; cpu/ holds the rest, by topic: memory.c (memory,
 * exportable memory from a memfd), pool.c (the thread pool), policy.c (one
 * thread or the pool, and the constants that decide it, in cpu/cpu.h) and
 * atomics.c (plain atomics: the process-wide registry); reduce.h holds
 * the text of the reductions. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/internal.h"
#include "../../core/toolchain.h"
#include "cpu.h"
#include "../prelude.h"
#include "reduce.h"
#include "toolchain.h"

static tack_status cpu_open(tack_device *device, const tack_option *options, size_t n_options)
{
    (void)options;
    (void)n_options;
    if (device->ordinal != 0)
        return tack_error_set(TACK_EVALUE, "the cpu backend has one device, cpu:0, not cpu:%d", device->ordinal);
    return TACK_OK;
}

/* ---- kernels: the dialect, load and launch ------------------------------ */

/* The atomics: GCC's and Clang's __atomic builtins, relaxed; a
 * compare-and-swap loop where x86 has no one instruction (float and double
 * adds, min and max). _Generic picks the function for the pointer's type,
 * so a pointer of another type, or a const one, does not compile; the
 * macros, which expand in the user's code, name the types in Tack's own
 * spelling (TACK_PRELUDE_TYPES), which no definition of the user's takes.
 * A float min or max ignores NaN as fmin and fmax do: a NaN contribution
 * changes nothing, a NaN target takes the number (the kernels guide,
 * "Reductions"). */
#define CPU_ATOMICS                                                                                                \
    "#define TACK_ATOMIC_FETCH_(op, T, s) static inline T tack_atomic_##op##_##s##_(T *p, T v) "                 \
    "{ return __atomic_fetch_##op(p, v, __ATOMIC_RELAXED); }\n"                                                   \
    "#define TACK_ATOMIC_CAS_ADD_(T, s) static inline T tack_atomic_add_##s##_(T *p, T v) { T old, next; "        \
    "__atomic_load(p, &old, __ATOMIC_RELAXED); do { next = old + v; } while (!__atomic_compare_exchange(p, &old, " \
    "&next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); return old; }\n"                                             \
    "#define TACK_ATOMIC_PICK_(op, cmp, T, s) static inline T tack_atomic_##op##_##s##_(T *p, T v) { T old; "     \
    "__atomic_load(p, &old, __ATOMIC_RELAXED); if (v != v) return old; while ((v cmp old || old != old) && "     \
    "!__atomic_compare_exchange(p, &old, &v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} return old; }\n"         \
    "TACK_ATOMIC_FETCH_(add, int32_t, i32) TACK_ATOMIC_FETCH_(add, uint32_t, u32)\n"                             \
    "TACK_ATOMIC_FETCH_(add, int64_t, i64) TACK_ATOMIC_FETCH_(add, uint64_t, u64)\n"                             \
    "TACK_ATOMIC_CAS_ADD_(float, f32) TACK_ATOMIC_CAS_ADD_(double, f64)\n"                                       \
    "TACK_ATOMIC_PICK_(min, <, int32_t, i32) TACK_ATOMIC_PICK_(min, <, uint32_t, u32)\n"                         \
    "TACK_ATOMIC_PICK_(min, <, int64_t, i64) TACK_ATOMIC_PICK_(min, <, uint64_t, u64)\n"                         \
    "TACK_ATOMIC_PICK_(max, >, int32_t, i32) TACK_ATOMIC_PICK_(max, >, uint32_t, u32)\n"                         \
    "TACK_ATOMIC_PICK_(max, >, int64_t, i64) TACK_ATOMIC_PICK_(max, >, uint64_t, u64)\n"                         \
    "#define TACK_ATOMIC_INT_(op, p, v) _Generic((p), tack_i32_ *: tack_atomic_##op##_i32_, "                    \
    "tack_u32_ *: tack_atomic_##op##_u32_, tack_i64_ *: tack_atomic_##op##_i64_, "                               \
    "tack_u64_ *: tack_atomic_##op##_u64_)((p), (v))\n"                                                          \
    "#define tack_atomic_add(p, v) _Generic((p), tack_i32_ *: tack_atomic_add_i32_, "                            \
    "tack_u32_ *: tack_atomic_add_u32_, tack_i64_ *: tack_atomic_add_i64_, tack_u64_ *: tack_atomic_add_u64_, "  \
    "float *: tack_atomic_add_f32_, double *: tack_atomic_add_f64_)((p), (v))\n"                                 \
    "#define tack_atomic_min(p, v) TACK_ATOMIC_INT_(min, p, v)\n"                                                 \
    "#define tack_atomic_max(p, v) TACK_ATOMIC_INT_(max, p, v)\n"                                                 \
    "TACK_ATOMIC_PICK_(min, <, float, f32) TACK_ATOMIC_PICK_(min, <, double, f64)\n"                             \
    "TACK_ATOMIC_PICK_(max, >, float, f32) TACK_ATOMIC_PICK_(max, >, double, f64)\n" CPU_REDUCE_DIRECT

/* The same atomics as plain loads and stores, for the copy of the kernel
 * that runs launches on one thread alone (see "plain atomics" above): one
 * index at a time, nothing else at once, so a read-modify-write needs no
 * lock. Integer adds wrap as the locked ones do, through the unsigned
 * type; TACK_INLINE_ (the prelude's) keeps those a kernel leaves unused
 * quiet. The functions are written before the user's source (cpu_head);
 * CPU_PLAIN_ATOMICS, after it, makes the macros name them for the rest of
 * the source, which is the copy and the entries (which use none). */
#define CPU_PLAIN_FUNCTIONS                                                                                        \
    "#define TACK_PLAIN_ADD_(T, U, s) TACK_INLINE_ T tack_plain_add_##s##_(T *p, T v) "                            \
    "{ T old = *p; *p = (T)((U)old + (U)v); return old; }\n"                                                     \
    "#define TACK_PLAIN_PICK_(op, cmp, T, s) TACK_INLINE_ T tack_plain_##op##_##s##_(T *p, T v) "                 \
    "{ T old = *p; if (v cmp old) *p = v; return old; }\n"                                                        \
    "TACK_PLAIN_ADD_(int32_t, uint32_t, i32) TACK_PLAIN_ADD_(uint32_t, uint32_t, u32)\n"                         \
    "TACK_PLAIN_ADD_(int64_t, uint64_t, i64) TACK_PLAIN_ADD_(uint64_t, uint64_t, u64)\n"                         \
    "TACK_PLAIN_ADD_(float, float, f32) TACK_PLAIN_ADD_(double, double, f64)\n"                                  \
    "TACK_PLAIN_PICK_(min, <, int32_t, i32) TACK_PLAIN_PICK_(min, <, uint32_t, u32)\n"                           \
    "TACK_PLAIN_PICK_(min, <, int64_t, i64) TACK_PLAIN_PICK_(min, <, uint64_t, u64)\n"                           \
    "TACK_PLAIN_PICK_(max, >, int32_t, i32) TACK_PLAIN_PICK_(max, >, uint32_t, u32)\n"                           \
    "TACK_PLAIN_PICK_(max, >, int64_t, i64) TACK_PLAIN_PICK_(max, >, uint64_t, u64)\n"

#define CPU_PLAIN_ATOMICS                                                                                          \
    "#undef TACK_ATOMIC_INT_\n#undef tack_atomic_add\n#undef tack_atomic_min\n#undef tack_atomic_max\n"          \
    "#define TACK_ATOMIC_INT_(op, p, v) _Generic((p), tack_i32_ *: tack_plain_##op##_i32_, "                     \
    "tack_u32_ *: tack_plain_##op##_u32_, tack_i64_ *: tack_plain_##op##_i64_, "                                 \
    "tack_u64_ *: tack_plain_##op##_u64_)((p), (v))\n"                                                           \
    "#define tack_atomic_add(p, v) _Generic((p), tack_i32_ *: tack_plain_add_i32_, "                             \
    "tack_u32_ *: tack_plain_add_u32_, tack_i64_ *: tack_plain_add_i64_, tack_u64_ *: tack_plain_add_u64_, "     \
    "float *: tack_plain_add_f32_, double *: tack_plain_add_f64_)((p), (v))\n"                                  \
    "#define tack_atomic_min(p, v) TACK_ATOMIC_INT_(min, p, v)\n"                                                 \
    "#define tack_atomic_max(p, v) TACK_ATOMIC_INT_(max, p, v)\n"

/* The parameters a reduction's copy of the kernel takes before the
 * kernel's own: the range's table of reductions, its held targets and a
 * lane of them (CPU_REDUCE_TABLE), which its body's tack_reduce_* combine
 * into. */
#define CPU_REDUCE_PARAMS                                                                                     \
    "tack_rtab_ *restrict tack_rt_, tack_rhot_ *restrict tack_rh_, unsigned tack_rl_, unsigned tack_ra_, "       \
    "tack_uptr_ tack_rk_, "

/* The array whose sums the table's window holds from a range's start
 * (reduce.h, "Pinned"): sig->reduce_target where its element type is one
 * the window holds; -1 for none. *tag is the type's tag in the table. */
static int cpu_reduce_pin(const struct tack_signature *sig, int *tag)
{
    *tag = -1;
    static const tack_dtype tags[] = {TACK_I32, TACK_U32, TACK_I64, TACK_U64, TACK_F32, TACK_F64};
    const int k = sig->reduce_target - 1;
    if (k < 0 || !sig->params[k].writable)
        return -1;
    for (int t = 0; t < (int)(sizeof tags / sizeof *tags); t++)
        if (sig->params[k].dtype == tags[t]) {
            *tag = t;
            return k;
        }
    return -1;
}

/* The loop of a 1-index entry with reductions: four indices a turn, each
 * its own lane by a constant (the rest in lane 0), so that a float sum's
 * lanes in tack_rh_v_ are never indexed by a variable and can live in
 * registers. Only the first index may take the held target (tack_radopt_):
 * after it the held address does not change in the loop, so the compiler
 * can test it once (a dot product's loop then has no test at all). */
static void cpu_reduce_loop(struct tack_source *b, const struct tack_signature *sig, const char *function,
                            const char *flush)
{
    tack_source_put(b, "    (void)tack_shape_;\n    tack_index tack_b_ = tack_begin_;\n"
                       "    if (tack_b_ < tack_end_) {\n        const tack_index tack_i_ = tack_b_++;\n"
                       "        const unsigned tack_rlane_ = 0u, tack_radopt_ = 1u;\n        ");
    tack_source_call(b, sig, function);
    tack_source_put(b, "    }\n    for (; tack_end_ - tack_b_ >= 4; tack_b_ += 4) {\n");
    for (int lane = 0; lane < 4; lane++) {
        tack_source_put(b, "        {\n            const tack_index tack_i_ = tack_b_ + %d;\n"
                           "            const unsigned tack_rlane_ = %du, tack_radopt_ = 0u;\n            ", lane, lane);
        tack_source_call(b, sig, function);
        tack_source_put(b, "        }\n");
    }
    tack_source_put(b, "    }\n    for (; tack_b_ < tack_end_; tack_b_++) {\n"
                       "        const tack_index tack_i_ = tack_b_;\n"
                       "        const unsigned tack_rlane_ = 0u, tack_radopt_ = 0u;\n        ");
    tack_source_call(b, sig, function);
    tack_source_put(b, "    }\n%s}\n", flush);
}

/* One entry point: [begin, end) of the flattened domain, row-major. A
 * range may begin and end inside a row (the pool cuts the domain where it
 * likes); each row's part is one loop over the last index, contiguous in
 * memory for a kernel that indexes a[i * w + j], and vectorisable: indices
 * are independent by contract, which TACK_SIMD_ tells the compiler, unless
 * `simd` is 0 (the plain atomics' entry: there two indices may update the
 * same element, and lanes that load it together would lose all but one
 * update; Clang does vectorise a histogram so). The position of begin
 * costs a division per range, not per index. `reduce`: 0 for a kernel
 * without reductions, 1 for a copy that takes the table, 2 for the plain
 * copy, which takes it for floats only. */
static void cpu_entry_point(struct tack_source *b, const struct tack_signature *sig, const char *entry,
                            const char *function, int simd, int reduce)
{

    tack_source_put(b,
                    "TACK_EXPORT_ void %s(tack_i64_ tack_begin_, tack_i64_ tack_end_, const tack_i64_ *tack_shape_, "
                    "void *const *tack_args_);\n"
                    "TACK_EXPORT_ void %s(tack_i64_ tack_begin_, tack_i64_ tack_end_, const tack_i64_ *tack_shape_, "
                    "void *const *tack_args_)\n{\n",
                    entry, entry);
    for (int k = 0; k < sig->nparams; k++) {
        const struct tack_param *p = &sig->params[k];
        const char *q = p->writable ? "" : "const ", *type = tack_source_type(p->dtype);
        if (p->is_array)
            tack_source_put(b, "    %s%s *tack_p%d_ = *(%s%s *const *)tack_args_[%d];\n", q, type, k, q, type, k);
        else
            tack_source_put(b, "    %s tack_p%d_ = *(const %s *)tack_args_[%d];\n", type, k, type, k);
    }
    /* The hidden parameters follow the kernel's own (tack_signature_hidden). */
    int at = sig->nparams;
    for (int k = 0; k < sig->nparams; k++)
        if (sig->extents_passed >> k & 1)
            tack_source_put(b, "    const tack_extents_ tack_ext_%s_ = *(const tack_extents_ *)tack_args_[%d];\n",
                            sig->params[k].name, at++);
    if (sig->checked)
        tack_source_put(b, "    tack_check_record_ *tack_check_ = *(tack_check_record_ *const *)tack_args_[%d];\n", at);
    if (sig->nparams == 0 && !tack_signature_hidden(sig))
        tack_source_put(b, "    (void)tack_args_;\n");
    /* The plain copy adds integers in place (CPU_REDUCE_PLAIN): there only
     * a float target's window is worth its clearing. */
    int tag, pin = reduce ? cpu_reduce_pin(sig, &tag) : -1;
    if (reduce == 2 && tag < 4)
        pin = -1;
    if (reduce)
        tack_source_put(b, "    tack_rtab_ tack_rtab_v_, *const tack_rt_ = &tack_rtab_v_;\n    tack_rinit_(tack_rt_);\n"
                           "    tack_rhot_ tack_rh_v_ = {0};\n");
    if (pin >= 0)
        tack_source_put(b, "    tack_rpin_(tack_rt_, (tack_uptr_)tack_p%d_);\n", pin);
    const char *flush = reduce ? "    tack_rhflush_(tack_rh_v_);\n    tack_rdone_(tack_rt_);\n" : "";
    if (sig->ndim == 1 && reduce) {
        cpu_reduce_loop(b, sig, function, flush);
        return;
    }
    if (sig->ndim == 1) {
        tack_source_put(b,
                        "    (void)tack_shape_;\n%s"
                        "    for (tack_index tack_i_ = tack_begin_; tack_i_ < tack_end_; tack_i_++)\n        ",
                        simd ? "    TACK_SIMD_\n" : "");
        tack_source_call(b, sig, function);
        tack_source_put(b, "%s}\n", flush);
        return;
    }
    const char *last = sig->ndim == 2 ? "tack_j_" : "tack_k_";
    tack_source_put(b, "    const tack_index tack_w_ = tack_shape_[%d];\n", sig->ndim - 1);
    if (sig->ndim == 2)
        tack_source_put(b, "    tack_index tack_i_ = tack_begin_ / tack_w_, tack_at_ = tack_begin_ %% tack_w_;\n");
    else
        tack_source_put(b, "    const tack_index tack_h_ = tack_shape_[1];\n"
                           "    tack_index tack_row_ = tack_begin_ / tack_w_, tack_at_ = tack_begin_ %% tack_w_;\n"
                           "    tack_index tack_i_ = tack_row_ / tack_h_, tack_j_ = tack_row_ %% tack_h_;\n");
    tack_source_put(b,
                    "    while (tack_begin_ < tack_end_) {\n"
                    "        const tack_index tack_stop_ = tack_end_ - tack_begin_ < tack_w_ - tack_at_ ? "
                    "tack_at_ + (tack_end_ - tack_begin_) : tack_w_;\n"
                    "        tack_begin_ += tack_stop_ - tack_at_;\n"
                    "%s"
                    "        for (tack_index %s = tack_at_; %s < tack_stop_; %s++)\n            ",
                    simd ? "        TACK_SIMD_\n" : "", last, last, last);
    tack_source_call(b, sig, function);
    tack_source_put(b, "        tack_at_ = 0;\n");
    if (sig->ndim == 2)
        tack_source_put(b, "        tack_i_++;\n");
    else
        tack_source_put(b, "        if (++tack_j_ == tack_h_) {\n            tack_j_ = 0;\n            tack_i_++;\n"
                           "        }\n");
    tack_source_put(b, "    }\n%s}\n", flush);
}

/* The entry `entry` over the copy `<name><copy>` (NULL: the kernel
 * itself). With `lane` (a reduction's, for a kernel with them) the copy
 * takes the table first, through a macro `<name><call>`, and runs without
 * simd (two indices may meet in one slot), `simd` 0 saying it is the plain
 * copy's; else simd as `simd` says. */
static void cpu_variant_entry(struct tack_source *b, const struct tack_signature *sig, const char *entry,
                              const char *copy, const char *call, const char *lane, int simd)
{
    char name[TACK_NAME_MAX + 32];
    if (lane) {
        int tag, pin = cpu_reduce_pin(sig, &tag);
        tack_source_put(b, "#define %s%s(...) %s%s(tack_rt_, &tack_rh_v_, %s, (tack_uptr_)", sig->name, call,
                        sig->name, copy, lane);
        if (pin >= 0)
            tack_source_put(b, "tack_p%d_, __VA_ARGS__)\n", pin);
        else
            tack_source_put(b, "0, __VA_ARGS__)\n");
        snprintf(name, sizeof name, "%s%s", sig->name, call);
        cpu_entry_point(b, sig, entry, name, 0, simd ? 1 : 2);
        return;
    }
    if (copy)
        snprintf(name, sizeof name, "%s%s", sig->name, copy);
    cpu_entry_point(b, sig, entry, copy ? name : NULL, simd, 0);
}

/* What the entries and the copies use, before the user's source: the
 * reductions' table (its window placed as cpu_reduce_pin says) and the
 * plain atomics' functions, for a kernel that has them. Written after the
 * source, a macro of the user's named like one of their locals (n, p, v)
 * would break them. */
static void cpu_head(struct tack_source *b, const struct tack_signature *sig)
{
    if (sig->uses_reductions) {
        int tag;
        cpu_reduce_pin(sig, &tag);
        tack_source_put(b, "#define TACK_RPIN_TAG_ %d\n", tag);
        tack_source_append(b, CPU_REDUCE_TABLE);
    }
    if (sig->uses_atomics || sig->uses_reductions)
        tack_source_append(b, CPU_PLAIN_FUNCTIONS);
}

/* The entry points are host C that the system compiler builds
 * (cpu/toolchain.c), named as tack_cpu_entry_names lists them:
 * TACK_ENTRY_NAME; where restrict
 * can matter, TACK_ENTRY_NAME "_restrict" over the restrict copy; and for
 * a kernel whose source uses Tack's atomics, TACK_ENTRY_NAME "_plain"
 * over the plain copy. Each unpacks the argument array into typed locals
 * and runs a range of the domain. A kernel without atomics gets the same
 * source as before there was a plain entry, so its cached object stays. */
static void cpu_entry(struct tack_source *b, const struct tack_signature *sig, const char *source)
{
    /* Restrict says nothing of a kernel with one array, or none it stores
     * through: then there is no second entry (a fifth of a small kernel's
     * compile time). */
    int arrays = 0, written = 0;
    for (int k = 0; k < sig->nparams; k++) {
        arrays += sig->params[k].is_array;
        written |= sig->params[k].writable;
    }
    int variant = arrays > 1 && written;
    /* Atomics in a helper the kernel calls stay locked in the plain copy
     * too (only the kernel's own body is copied): slower, still right. */
    /* Reductions: every entry but the plain one runs a copy that
     * combines them in a table (CPU_REDUCE_TABLE); the plain one takes
     * integers as plain updates (CPU_REDUCE_PLAIN). A kernel with them
     * registers its launches as one with atomics does. A kernel without
     * them gets the source it had before. */
    int reduce = sig->uses_reductions;
    int atomics = sig->uses_atomics || sig->uses_reductions;
    if (reduce) {
        tack_source_append(b, CPU_REDUCE_TABLED);
        tack_source_kernel_copy(b, sig, source, "_tack_reduce_", "", CPU_REDUCE_PARAMS, TACK_CHECK_C);
    }
    /* `<name>_tack_restrict_` has every array restrict: a compiler takes
     * restrict from a function's own parameters, not its caller's, so only
     * a copy of the kernel can tell it that no array overlaps another. Its
     * entry runs only launches whose arrays are disjoint (checked per launch
     * by the kernel layer). `<name>_tack_plain_` is compiled under the plain
     * atomics (CPU_PLAIN_ATOMICS), for launches that run on one thread alone. */
    if (variant)
        tack_source_kernel_copy(b, sig, source, "_tack_restrict_", "restrict ", reduce ? CPU_REDUCE_PARAMS : "",
                                TACK_CHECK_C);
    if (atomics) {
        tack_source_append(b, CPU_PLAIN_ATOMICS);
        if (reduce)
            tack_source_append(b, CPU_REDUCE_PLAIN);
        tack_source_kernel_copy(b, sig, source, "_tack_plain_", "", reduce ? CPU_REDUCE_PARAMS : "", TACK_CHECK_C);
    }
    /* Clang expands macros in a loop pragma's arguments: the user's go
     * first (nothing of theirs follows the entries). */
    tack_source_put(b, "#if defined(__GNUC__)\n"
                       "#define TACK_EXPORT_ __attribute__((__visibility__(\"default\")))\n#else\n"
                       "#define TACK_EXPORT_\n#endif\n"
                       "#if defined(__clang__)\n#undef vectorize\n#undef assume_safety\n"
                       "#define TACK_SIMD_ _Pragma(\"clang loop vectorize(assume_safety)\")\n"
                       "#elif defined(__GNUC__)\n#define TACK_SIMD_ _Pragma(\"GCC ivdep\")\n"
                       "#else\n#define TACK_SIMD_\n#endif\n");
    /* A reduction's lane (CPU_REDUCE_TABLE): the fastest index's last
     * bits; a constant in the 1-D entry, which runs four indices a turn. */
    const char *lane = !reduce            ? NULL
                       : sig->ndim == 1   ? "tack_rlane_, tack_radopt_"
                       : sig->ndim == 2   ? "(unsigned)tack_j_ & 3u, 1u"
                                          : "(unsigned)tack_k_ & 3u, 1u";
    cpu_variant_entry(b, sig, TACK_ENTRY_NAME, reduce ? "_tack_reduce_" : NULL, "_tack_rcall_", lane, 1);
    if (variant)
        cpu_variant_entry(b, sig, TACK_ENTRY_NAME "_restrict", "_tack_restrict_", "_tack_rrcall_", lane, 1);
    if (atomics)
        cpu_variant_entry(b, sig, TACK_ENTRY_NAME "_plain", "_tack_plain_", "_tack_rpcall_", lane, 0);
}

const struct tack_dialect cpu_dialect = {
    .name = "cpu",
    .head = cpu_head,
    .prelude = "#include <stddef.h>\n#include <stdint.h>\n#include <stdbool.h>\n#include <math.h>\n"
               "typedef int64_t tack_index;\n" TACK_PRELUDE_TYPES("_Bool", "uintptr_t")
               "#define TACK_BACKEND_CPU 1\n"
               /* Helpers a kernel may leave unused, which Clang's -Wall
                * would report in a source file. */
               "#if defined(__GNUC__)\n#define TACK_INLINE_ static inline __attribute__((__unused__))\n"
               "#else\n#define TACK_INLINE_ static inline\n#endif\n"
               "TACK_INLINE_ uint32_t tack_bits_of_float_(float f)\n"
               "{\n    union { float f; uint32_t u; } v;\n    v.f = f;\n    return v.u;\n}\n"
               "TACK_INLINE_ float tack_float_of_bits_(uint32_t u)\n"
               "{\n    union { uint32_t u; float f; } v;\n    v.u = u;\n    return v.f;\n}\n"
               /* The compilers say which types they have: GCC from 12 and
                * Clang from 15 define __FLT16_MAX__ where _Float16 is an
                * arithmetic type, GCC from 13 __BFLT16_MAX__ where __bf16
                * is. Without the macro __bf16 is a storage type at most, no
                * better than the struct. */
               "#if defined(__FLT16_MAX__)\n"
               /* __extension__: _Float16 is not ISO C, which -pedantic says. */
               "__extension__ typedef _Float16 tack_f16;\n"
               "#define TACK_F16_NATIVE 1\n"
               "TACK_INLINE_ float tack_f16_to_float(tack_f16 h) { return (float)h; }\n"
               "TACK_INLINE_ tack_f16 tack_f16_from_float(float f) { return (tack_f16)f; }\n"
               "#else\n" TACK_PRELUDE_F16_STORAGE "#endif\n"
               "#if defined(__BFLT16_MAX__)\n"
               "__extension__ typedef __bf16 tack_bf16;\n"
               "#define TACK_BF16_NATIVE 1\n"
               "TACK_INLINE_ float tack_bf16_to_float(tack_bf16 b) { return (float)b; }\n"
               "TACK_INLINE_ tack_bf16 tack_bf16_from_float(float f) { return (tack_bf16)f; }\n"
               "#else\n" TACK_PRELUDE_BF16_STORAGE "#endif\n"
               /* C99's complex types; <complex.h> stays the kernel's choice,
                * since its `I` would take a common name. */
               "typedef float _Complex tack_c64;\n"
               "typedef double _Complex tack_c128;\n" CPU_ATOMICS,
    .language = TACK_CHECK_C,
    .entry = cpu_entry,
    .offline = TACK_CODE_HOST,
    .entries = tack_cpu_entry_names,
};

/* A loaded kernel: its entries, and its measured cost of one index. */
struct cpu_kernel {
    tack_host_entry entry, entry_restrict;
    tack_host_entry entry_plain; /* NULL: the kernel uses no atomics */
    struct run_costs costs;
};

tack_status cpu_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out)
{
    tack_host_entry e[TACK_CPU_ENTRIES];
    tack_cpu_entries(code, e);
    if (code->kind != TACK_CODE_HOST || !e[TACK_CPU_ENTRY])
        return tack_error_set(TACK_ERUNTIME, "%s runs host code; it was given %s code", device->name,
                              tack_code_kind_name(code->kind));
    struct cpu_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tack_error_set(TACK_ENOMEM, "out of memory loading a kernel");
    k->entry = e[TACK_CPU_ENTRY];
    k->entry_restrict = e[TACK_CPU_ENTRY_RESTRICT] ? e[TACK_CPU_ENTRY_RESTRICT] : e[TACK_CPU_ENTRY];
    k->entry_plain = e[TACK_CPU_ENTRY_PLAIN];
    if (k->entry_plain)
        pthread_once(&atomics_once, atomics_register_fork);
    atomic_init(&k->costs.cost_ps, 0);
    atomic_init(&k->costs.serial_ps, 0);
    atomic_init(&k->costs.plain_ps, 0);
    atomic_init(&k->costs.joined_ps, 0);
    atomic_init(&k->costs.kept, 0);
    atomic_init(&k->costs.probed, 0);
    *out = k;
    return TACK_OK;
}

/* n indices at `ps` picoseconds each, in nanoseconds; UINT64_MAX for a
 * cost not measured yet. */
static uint64_t expected_ns(uint64_t ps, int64_t n)
{
    if (!ps)
        return UINT64_MAX;
    /* Both below 2^32 (4 ms an index, 4e9 indices): the product fits, and
     * the check costs no division. */
    if (((uint64_t)n | ps) >> 32 && (uint64_t)n > UINT64_MAX / ps)
        return UINT64_MAX;
    return (uint64_t)n * ps / 1000;
}

/* A launch that is not one short index without atomics. Out of line, so
 * that the launch of one (cpu_kernel_launch) builds no frame for it. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void run_launch(struct cpu_kernel *k, tack_host_entry e, uint64_t ps, const struct tack_launch *l)
{
    if (l->n < 2 && ps) {
        /* One index: plain atomics would save nothing; a kernel with
         * atomics keeps out of a plain run's way. */
        if (k->entry_plain)
            locked_begin();
        e(0, l->n, l->shape, l->args);
        if (k->entry_plain)
            locked_end();
    } else {
        struct job j = {e, l->private_memory ? k->entry_plain : NULL, k->entry_plain != NULL, l->shape, l->args,
                        &k->costs};
        pool_run(&j, l->n);
    }
}

/* Complete on return: the backend has no queue. */
tack_status cpu_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l)
{
    (void)device;
    struct cpu_kernel *k = kernel;
    tack_host_entry e = l->disjoint ? k->entry_restrict : k->entry;
    uint64_t ps = atomic_load_explicit(&k->costs.cost_ps, memory_order_relaxed);
    if (l->n < 2 && ps && !k->entry_plain)
        e(0, l->n, l->shape, l->args);
    else
        run_launch(k, e, ps, l);
    return TACK_OK;
}

/* Serial time: what one thread takes, which the pool does not exceed. */
uint64_t cpu_kernel_expected_ns(void *kernel, int64_t n)
{
    struct cpu_kernel *k = kernel;
    return expected_ns(atomic_load_explicit(&k->costs.cost_ps, memory_order_relaxed), n);
}

void cpu_kernel_unload(tack_device *device, void *kernel)
{
    (void)device;
    free(kernel);
}

static const DLDeviceType cpu_wraps[] = {kDLCPU, kDLCUDAHost, kDLROCMHost, 0};

/* No driver; one device, the host: its processor as the kernel sees it
 * and the threads a launch is split over. */
static void cpu_describe(tack_backend_report *out)
{
    out->driver.found = 1;
    snprintf(out->driver.note, sizeof out->driver.note, "none needed: kernels run on the host");
    out->device_count = 1;
    char model[96] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && !model[0] && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (colon && !strncmp(line, "model name", 10)) {
            colon++;
            while (*colon == ' ' || *colon == '\t')
                colon++;
            snprintf(model, sizeof model, "%.*s", (int)strcspn(colon, "\n"), colon);
        }
    }
    if (f)
        fclose(f);
    int threads = cpu_pool_threads();
    snprintf(out->devices[0], sizeof out->devices[0], "%s%s%d thread%s", model, model[0] ? ", " : "", threads,
             threads == 1 ? "" : "s");
    tack_c_compiler_describe(&out->compiler);
    tack_cpu_target_describe(out->kernel_code[0], sizeof out->kernel_code[0]);
}

const struct tack_backend_ops tack_cpu_backend = {
    .name = "cpu",
    .dl_type = kDLCPU,
    .wraps = cpu_wraps,
    .describe = cpu_describe,
    .open = cpu_open,
    .memory = &tack_cpu_memory,
    .toolchain = &tack_cpu_toolchain,
};
