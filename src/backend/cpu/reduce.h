/* The cpu dialect's reductions (tack_reduce_add, _min and _max): the
 * text cpu.c puts in the prelude (CPU_REDUCE_DIRECT, after the atomics),
 * before the user's source of a kernel that uses them (CPU_REDUCE_TABLE,
 * whose short local names no macro of the user's may reach) and around
 * its copies (the macros). Private to src/backend/cpu.c. */
#ifndef TACK_BACKEND_CPU_REDUCE_H
#define TACK_BACKEND_CPU_REDUCE_H

/* The reductions outside the kernel's own body (in a helper it calls) and
 * in the plain copy: each contribution one atomic (there, a plain one).
 * Floating-point min and max by compare-and-swap, as x86 has no
 * instruction for them, ignoring NaN as fmin and fmax do (CPU_ATOMICS):
 * a NaN contribution changes nothing, an all-NaN input leaves the target
 * as it was. Every macro here and below that expands in the user's code
 * names types in Tack's own spelling (TACK_PRELUDE_TYPES). */
#define CPU_REDUCE_DIRECT                                                                                          \
    "#define TACK_REDUCE_PICK_(op, p, v) _Generic((p), tack_i32_ *: tack_atomic_##op##_i32_, "                   \
    "tack_u32_ *: tack_atomic_##op##_u32_, tack_i64_ *: tack_atomic_##op##_i64_, "                               \
    "tack_u64_ *: tack_atomic_##op##_u64_, float *: tack_atomic_##op##_f32_, "                                   \
    "double *: tack_atomic_##op##_f64_)((p), (v))\n"                                                              \
    "#define tack_reduce_add(p, v) ((void)tack_atomic_add(p, v))\n"                                               \
    "#define tack_reduce_min(p, v) ((void)TACK_REDUCE_PICK_(min, p, v))\n"                                        \
    "#define tack_reduce_max(p, v) ((void)TACK_REDUCE_PICK_(max, p, v))\n"

/* The reductions in the kernel's body: each range an entry runs keeps a
 * private table (tack_rtab_), which the entry flushes at the end of its
 * range with one real atomic per target it holds.
 *
 * Pinned: where the body's first sum names an array parameter as its
 * target (sig->reduce_target) of a type the window holds, the entry
 * places the window at that array's first element before its range
 * (tack_rpin_) and keeps it there (TACK_RPIN_TAG_ is the type's tag, -1
 * for none; tack_rk_ the array's address). The window's test is then
 * against the parameter itself, so the compiler sees y + e - y: the
 * subtraction goes, and the test with it where it knows e is in the
 * window (a uint8_t bin). An address outside [y, y + span) fails the test
 * and takes the other paths, so which array is pinned decides speed only.
 * A flush inside the range (a full table) zeroes the window again and
 * keeps it; tack_rdone_, the range's last, does not.
 *
 * Sums go to a window: 16 KiB holding the partial sums of one run of
 * elements of one type, from 512 elements before the first target an add
 * met to 512 after (256 for 8-byte partial sums), so a histogram of up to
 * 512 bins (256 of 8 bytes) costs a subtraction, a test and an add. The window's zeros are what the flush skips (adding 0
 * changes nothing), so it never touches an element no index targeted.
 * Each element has TACK_RLANES_ partial sums, the index's last bits
 * choosing one: consecutive indices that meet in one element (a dot
 * product: every index) make independent chains of additions through
 * memory instead of one, each waiting for the last. A float sum is kept
 * in double until the flush, so that a range's many small terms do not
 * round away against their large sum; integer sums wrap as atomics do.
 *
 * Sums outside the window, and every min and max, go to a table of 256
 * slots, open-addressed by address (a target found within TACK_RPROBES_ of
 * its home slot, the address over the element's size), each slot one
 * target under one operation and type, with lanes as above; it flushes
 * itself when a new target finds no free slot, and is cleared only once a
 * range uses it. tack_rclaim_ returns 1 for a slot it claimed for the
 * target (the caller stores the first value), 0 for the target's slot
 * found past its home. A min or max slot's lanes all start at its first
 * value, which may be NaN: its combining replaces a NaN lane by the next
 * value, so that one NaN does not hide the numbers after it, and a lane
 * that stays NaN reaches the atomic, which ignores it.
 *
 * Before the window: the float and the double sum target of a range's
 * first index (tack_ra_ says which index may take one) are held apart,
 * in tack_rhot_, whose lanes the compiler keeps in registers: a dot
 * product's one target costs an add.
 *
 * The kernel's copy takes the table (tack_rt_), the held targets
 * (tack_rh_), the lane (tack_rl_) and whether it may take a held target
 * (tack_ra_) as its first parameters. The window's base, one per type, is
 * UINTPTR_MAX where the window is not that type's, which makes every
 * address fail the test. */
#define CPU_REDUCE_TABLE                                                                                           \
    "#define TACK_RSLOTS_ 256\n#define TACK_RPROBES_ 8\n#define TACK_RLANES_ 4\n#define TACK_RWIN_ 16384\n"         \
    "typedef union { int32_t i32; uint32_t u32; int64_t i64; uint64_t u64; float f32; double f64; } tack_rval_;\n" \
    "typedef struct { void *key; int tag; tack_rval_ v[TACK_RLANES_]; } tack_rslot_;\n"                            \
    "typedef struct { float *p32; double *p64; double a32[TACK_RLANES_], a64[TACK_RLANES_]; } tack_rhot_;\n"     \
    "typedef struct {\n    uintptr_t wbase[6];\n    int wtag, n, cleared, pinned;\n    uint16_t used[TACK_RSLOTS_];\n"       \
    "    tack_rslot_ s[TACK_RSLOTS_];\n    _Alignas(64) unsigned char win[TACK_RWIN_];\n} tack_rtab_;\n"             \
    "static inline void tack_rinit_(tack_rtab_ *t)\n{\n    for (int k = 0; k < 6; k++)\n"                           \
    "        t->wbase[k] = UINTPTR_MAX;\n    t->wtag = -1;\n    t->n = t->cleared = t->pinned = 0;\n}\n"                         \
    "static void tack_rflush_(tack_rtab_ *t);\n"                                                                   \
    "__attribute__((noinline)) static int tack_rclaim_(tack_rtab_ *t, void *p, int tag, unsigned h, "             \
    "tack_rslot_ **out)\n{\n"                                                                                       \
    "    for (unsigned k = 0; k < TACK_RPROBES_; k++) {\n"                                                         \
    "        tack_rslot_ *e = &t->s[(h + k) & (TACK_RSLOTS_ - 1)];\n"                                               \
    "        if (e->key == p && e->tag == tag) { *out = e; return 0; }\n"                                           \
    "        if (!e->key) {\n            e->key = p;\n            e->tag = tag;\n"                                  \
    "            t->used[t->n++] = (uint16_t)((h + k) & (TACK_RSLOTS_ - 1));\n            *out = e;\n"             \
    "            return 1;\n        }\n    }\n"                                                                      \
    "    tack_rflush_(t);\n    return tack_rclaim_(t, p, tag, h, out);\n}\n"                                        \
    "#define TACK_RPUT_(op, T, S, F, TAG, COMBINE, FIRST) "                                                        \
    "static inline void tack_rslot_##op##_##S##_(tack_rtab_ *t, unsigned l, T *p, T v) "                          \
    "{ if (__builtin_expect(!t->cleared, 0)) { __builtin_memset(t->s, 0, sizeof t->s); t->cleared = 1; } "        \
    "const unsigned h = (unsigned)((uintptr_t)p / sizeof(T)) & (TACK_RSLOTS_ - 1); tack_rslot_ *e = &t->s[h]; "   \
    "if (__builtin_expect(e->key != p || e->tag != TAG, 0) && tack_rclaim_(t, p, TAG, h, &e)) "                 \
    "{ for (unsigned k = 0; k < TACK_RLANES_; k++) e->v[k].F = FIRST; e->v[l].F = v; return; } "                  \
    "__typeof__(e->v[0].F) *a = &e->v[l].F; COMBINE; } "                                                           \
    "static inline void tack_rflush_##op##_##S##_(tack_rslot_ *e) { __typeof__(e->v[0].F) *a = &e->v[0].F; "      \
    "for (unsigned k = 1; k < TACK_RLANES_; k++) { __typeof__(e->v[0].F) v = e->v[k].F; COMBINE; } "              \
    "(void)tack_atomic_##op##_##S##_(e->key, (T)*a); }\n"                                                          \
    "#define TACK_RPUT_PICK_(T, s, tag) TACK_RPUT_(min, T, s, s, tag + 6, if (v < *a || *a != *a) *a = v, v) "    \
    "TACK_RPUT_(max, T, s, s, tag + 12, if (v > *a || *a != *a) *a = v, v) "                                      \
    "static inline void tack_rmin_##s##_(tack_rtab_ *t, tack_rhot_ *h, unsigned l, unsigned ad, uintptr_t rk, "     \
    "T *p, T v) { (void)h; (void)ad; (void)rk; tack_rslot_min_##s##_(t, l, p, v); } "                             \
    "static inline void tack_rmax_##s##_(tack_rtab_ *t, tack_rhot_ *h, unsigned l, unsigned ad, uintptr_t rk, "     \
    "T *p, T v) { (void)h; (void)ad; (void)rk; tack_rslot_max_##s##_(t, l, p, v); }\n"                              \
    "#define TACK_RSUM_(T, A, S, F, TAG) TACK_RPUT_(add, T, S, F, TAG, *a = (__typeof__(*a))(*a + v), 0) "          \
    "TACK_RPUT_PICK_(T, S, TAG) "                                                                                 \
    "enum { tack_rspan_##S##_ = TACK_RWIN_ / (TACK_RLANES_ * (int)sizeof(A)), tack_rblock_##S##_ = 64 / "           \
    "(TACK_RLANES_ * (int)sizeof(A)) }; "                                                                         \
    "__attribute__((noinline)) static void tack_rmiss_##S##_(tack_rtab_ *t, unsigned l, T *p, T v) { if "           \
    "(t->wtag >= 0) { tack_rslot_add_##S##_(t, l, p, v); return; } "                                              \
    "__builtin_memset(t->win, 0, sizeof t->win); t->wtag = TAG; t->wbase[TAG] = (uintptr_t)p - "                    \
    "(uintptr_t)(tack_rspan_##S##_ / 2) * sizeof(T); "                                                            \
    "((A *)(t->win + ((uintptr_t)p - t->wbase[TAG]) / sizeof(T) * (TACK_RLANES_ * sizeof(A))))[l] = (A)v; } "     \
    "static inline void tack_rwadd_##S##_(tack_rtab_ *t, unsigned l, uintptr_t rk, T *p, T v) { const int "         \
    "pinned = TAG == TACK_RPIN_TAG_; "                                                                            \
    "const uintptr_t off = (uintptr_t)p - (pinned ? rk : t->wbase[TAG]); "                                        \
    "if (__builtin_expect(!(off & (~(uintptr_t)(tack_rspan_##S##_ * sizeof(T) - 1) | (sizeof(T) - 1))), 1)) "     \
    "{ A *a = (A *)(t->win + off * (TACK_RLANES_ * sizeof(A) / sizeof(T))) + l; *a += (A)v; return; } "           \
    "tack_rmiss_##S##_(t, l, p, v); } "                                                                           \
    "static void tack_rwflush_##S##_(tack_rtab_ *t) { for (uintptr_t k = 0; k < tack_rspan_##S##_; k += "           \
    "tack_rblock_##S##_) { "                                                                                      \
    "const unsigned char *b = t->win + k * (TACK_RLANES_ * sizeof(A)); uint64_t q[8]; __builtin_memcpy(q, b, "      \
    "sizeof q); "                                                                                                 \
    "if (!(q[0] | q[1] | q[2] | q[3] | q[4] | q[5] | q[6] | q[7])) continue; const A *w = (const A *)b; "         \
    "for (uintptr_t e = k; e < k + tack_rblock_##S##_; e++, w += TACK_RLANES_) { A sum = (A)0; "                  \
    "for (int j = 0; j < TACK_RLANES_; j++) sum += w[j]; "                                                        \
    "if (sum != (A)0) (void)tack_atomic_add_##S##_((T *)(t->wbase[TAG] + e * sizeof(T)), (T)sum); } } }\n"          \
    "TACK_RSUM_(int32_t, uint32_t, i32, i32, 0) TACK_RSUM_(uint32_t, uint32_t, u32, u32, 1)\n"                      \
    "TACK_RSUM_(int64_t, uint64_t, i64, i64, 2) TACK_RSUM_(uint64_t, uint64_t, u64, u64, 3)\n"                      \
    "TACK_RSUM_(float, double, f32, f64, 4) TACK_RSUM_(double, double, f64, f64, 5)\n"                              \
    "#define TACK_RINT_(T, S) static inline void tack_radd_##S##_(tack_rtab_ *t, tack_rhot_ *h, unsigned l, "       \
    "unsigned ad, uintptr_t rk, T *p, T v) { (void)h; (void)ad; tack_rwadd_##S##_(t, l, rk, p, v); }\n"             \
    "TACK_RINT_(int32_t, i32) TACK_RINT_(uint32_t, u32) TACK_RINT_(int64_t, i64) TACK_RINT_(uint64_t, u64)\n"       \
    "#define TACK_RHOT_(T, S, P, A) static inline void tack_radd_##S##_(tack_rtab_ *t, tack_rhot_ *h, "             \
    "unsigned l, unsigned ad, uintptr_t rk, T *p, T v) { if (__builtin_expect(h->P == p, 1) || (ad && !h->P "       \
    "&& (h->P = p))) { h->A[l] += v; return; } tack_rwadd_##S##_(t, l, rk, p, v); }\n"                              \
    "TACK_RHOT_(float, f32, p32, a32) TACK_RHOT_(double, f64, p64, a64)\n"                                          \
    "static inline void tack_rhflush_(tack_rhot_ h)\n"                                                              \
    "{\n"                                                                                                           \
    "    if (h.p32)\n"                                                                                              \
    "        (void)tack_atomic_add_f32_(h.p32, (float)((h.a32[0] + h.a32[1]) + (h.a32[2] + h.a32[3])));\n"          \
    "    if (h.p64)\n"                                                                                              \
    "        (void)tack_atomic_add_f64_(h.p64, (h.a64[0] + h.a64[1]) + (h.a64[2] + h.a64[3]));\n"                   \
    "}\n"                                                                                                           \
    "#define TACK_RFLUSH_(base, op) case base: tack_rflush_##op##_i32_(e); break; case base + 1: "                  \
    "tack_rflush_##op##_u32_(e); break; case base + 2: tack_rflush_##op##_i64_(e); break; case base + 3: "          \
    "tack_rflush_##op##_u64_(e); break; case base + 4: tack_rflush_##op##_f32_(e); break; case base + 5: "          \
    "tack_rflush_##op##_f64_(e); break;\n"                                                                          \
    "__attribute__((noinline)) static void tack_rflush_(tack_rtab_ *t)\n"                                           \
    "{\n"                                                                                                           \
    "    for (int i = 0; i < t->n; i++) {\n"                                                                        \
    "        tack_rslot_ *e = &t->s[t->used[i]];\n"                                                                 \
    "        switch (e->tag) { TACK_RFLUSH_(0, add) TACK_RFLUSH_(6, min) TACK_RFLUSH_(12, max) }\n"                 \
    "        e->key = 0;\n"                                                                                         \
    "    }\n"                                                                                                       \
    "    t->n = 0;\n"                                                                                               \
    "    switch (t->wtag) { case 0: tack_rwflush_i32_(t); break; case 1: tack_rwflush_u32_(t); break; case 2: "     \
    "tack_rwflush_i64_(t); break; case 3: tack_rwflush_u64_(t); break; case 4: tack_rwflush_f32_(t); break; "       \
    "case 5: tack_rwflush_f64_(t); break; }\n"                                                                      \
    "    if (t->pinned) {\n"                                                                                        \
    "        __builtin_memset(t->win, 0, sizeof t->win);\n"                                                         \
    "        return;\n"                                                                                             \
    "    }\n"                                                                                                       \
    "    if (t->wtag >= 0)\n"                                                                                       \
    "        t->wbase[t->wtag] = UINTPTR_MAX;\n"                                                                    \
    "    t->wtag = -1;\n"                                                                                           \
    "}\n"                                                                                                           \
    "#if TACK_RPIN_TAG_ >= 0\n"                                                                                     \
    "static inline void tack_rpin_(tack_rtab_ *t, uintptr_t rk)\n"                                                  \
    "{\n"                                                                                                           \
    "    __builtin_memset(t->win, 0, sizeof t->win);\n"                                                             \
    "    t->wtag = TACK_RPIN_TAG_;\n"                                                                               \
    "    t->wbase[TACK_RPIN_TAG_] = rk;\n"                                                                          \
    "    t->pinned = 1;\n"                                                                                          \
    "}\n"                                                                                                           \
    "#endif\n"                                                                                                      \
    "static inline void tack_rdone_(tack_rtab_ *t)\n"                                                               \
    "{\n"                                                                                                           \
    "    t->pinned = 0;\n"                                                                                          \
    "    tack_rflush_(t);\n"                                                                                        \
    "}\n"

/* The kernel's reductions into the table, tack_rt_ (CPU_REDUCE_TABLE). */
#define CPU_REDUCE_TABLED                                                                                          \
    "#undef tack_reduce_add\n#undef tack_reduce_min\n#undef tack_reduce_max\n"                                    \
    "#define TACK_RTABLE_(op, p, v) _Generic((p), tack_i32_ *: tack_r##op##_i32_, "                               \
    "tack_u32_ *: tack_r##op##_u32_, tack_i64_ *: tack_r##op##_i64_, tack_u64_ *: tack_r##op##_u64_, "            \
    "float *: tack_r##op##_f32_, "                                                                                \
    "double *: tack_r##op##_f64_)(tack_rt_, tack_rh_, tack_rl_, tack_ra_, tack_rk_, (p), (v))\n"                                                          \
    "#define tack_reduce_add(p, v) TACK_RTABLE_(add, p, v)\n"                                                     \
    "#define tack_reduce_min(p, v) TACK_RTABLE_(min, p, v)\n"                                                     \
    "#define tack_reduce_max(p, v) TACK_RTABLE_(max, p, v)\n"

/* The reductions in the plain copy (after CPU_PLAIN_ATOMICS): integers
 * as plain updates, exact in any order; floats still in the table, whose
 * double sums keep the precision the other entries give. Every branch of
 * a _Generic must compile, so the integers' own names float pointers too
 * (never chosen). */
#define CPU_REDUCE_PLAIN                                                                                           \
    "#undef tack_reduce_add\n#undef tack_reduce_min\n#undef tack_reduce_max\n"                                    \
    "#define TACK_RPLAIN_(op, p, v, INT) ((void)_Generic((p), "                                                   \
    "float *: tack_r##op##_f32_(tack_rt_, tack_rh_, tack_rl_, tack_ra_, tack_rk_, (float *)(p), (float)(v)), "                        \
    "double *: tack_r##op##_f64_(tack_rt_, tack_rh_, tack_rl_, tack_ra_, tack_rk_, (double *)(p), (double)(v)), default: INT))\n"              \
    "#define tack_reduce_add(p, v) TACK_RPLAIN_(add, p, v, tack_atomic_add(p, v))\n"                             \
    "#define TACK_RPLAIN_PICK_(op, p, v) _Generic((p), tack_i32_ *: tack_plain_##op##_i32_, "                     \
    "tack_u32_ *: tack_plain_##op##_u32_, tack_i64_ *: tack_plain_##op##_i64_, "                                 \
    "tack_u64_ *: tack_plain_##op##_u64_, "                                                                       \
    "float *: tack_atomic_##op##_f32_, double *: tack_atomic_##op##_f64_)((p), (v))\n"                           \
    "#define tack_reduce_min(p, v) TACK_RPLAIN_(min, p, v, TACK_RPLAIN_PICK_(min, p, v))\n"                      \
    "#define tack_reduce_max(p, v) TACK_RPLAIN_(max, p, v, TACK_RPLAIN_PICK_(max, p, v))\n"

#endif
