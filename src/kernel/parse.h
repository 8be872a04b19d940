/* The signature reader's tokens and scan, shared by its files (parse.c,
 * conditionals.c). Not installed. */
#ifndef TACK_KERNEL_PARSE_H
#define TACK_KERNEL_PARSE_H

#include <string.h>

#include "kernel.h"

enum { T_IDENT, T_NUMBER, T_STRING, T_PUNCT };

struct tok {
    const char *s;
    int len;
    int line;
    int kind;
    int dir; /* 0 in code; the directive's number inside a preprocessor directive; -1 in a group
              * of a conditional the compiler skips */
    int uncertain; /* in a conditional group Tack cannot tell taken or not: the line of its directive */
};

struct toks {
    struct tok *v;
    int n, cap;
};

static inline int tok_is(const struct tok *t, const char *s)
{
    return t->len == (int)strlen(s) && !memcmp(t->s, s, (size_t)t->len);
}

static inline int punct(const struct tok *t, char c) { return t->kind == T_PUNCT && t->s[0] == c; }

static inline void tok_copy(const struct tok *t, char *out, size_t cap)
{
    size_t n = (size_t)t->len < cap - 1 ? (size_t)t->len : cap - 1;
    memcpy(out, t->s, n);
    out[n] = 0;
}

/* An alias: an object-like #define or a typedef, whose replacement is a run
 * of tokens. */
struct alias {
    const struct tok *name;
    int begin, end; /* token indices of the replacement */
};

struct def {
    int name;         /* token index */
    int ret_begin;    /* first token of the return type */
    int params_begin; /* first token after '(' */
    int params_end;   /* the ')' */
    int body_open;    /* the body's '{' */
    int body_close;   /* and its '}' */
};

struct scan {
    const char *src;
    struct toks t;
    struct alias *aliases;
    int naliases;
    struct def *defs;
    int ndefs;
    /* Refusals found by follow_conditionals, reported once the kernel is
     * found: the line of a conditional group whose braces do not balance
     * and which Tack cannot tell taken or not (0: none). */
    int unbalanced_line;
    /* Set by expand: the line of the uncertain conditional an alias the
     * signature used lies under (0: none). */
    int uncertain_alias;
    /* Steps left of the parse's work budget (PARSE_BUDGET and
     * PARSE_STEPS_PER_TOKEN): every token
     * a scan or an expansion visits and every alias compared costs one.
     * Depth and output limits alone do not bound the work: macros that
     * expand to nothing produce no output, and 24 of them at each of 8
     * levels make 24^8 visits. */
    long budget;
};

/* The budget beyond a few steps per token, which the linear scans of any
 * source take: far above what any real signature's macros cost, far below
 * a second's work. */
#define PARSE_BUDGET (16L * 1024 * 1024)
#define PARSE_STEPS_PER_TOKEN 4

/* Charges `n` steps; 0 while the budget lasts, -1 once it is spent (and
 * from then on). */
static inline int spend(struct scan *s, long n)
{
    s->budget -= n;
    return s->budget < 0 ? -1 : 0;
}

static inline tack_status too_complex(void)
{
    return tack_error_set(TACK_EVALUE,
                          "the kernel source is too complex to read its signature: finding it took more than "
                          "%ld million steps beyond the source's length (macros or typedefs that expand into many "
                          "others); write the kernel's signature with fewer levels of macros",
                          PARSE_BUDGET >> 20);
}

/* The nearest code token (not in a directive) before or after i; -1 or
 * the token count when there is none. */
static inline int scan_prev(const struct scan *s, int i)
{
    for (i--; i >= 0; i--)
        if (!s->t.v[i].dir)
            return i;
    return -1;
}

static inline int scan_next(const struct scan *s, int i)
{
    for (i++; i < s->t.n; i++)
        if (!s->t.v[i].dir)
            return i;
    return s->t.n;
}

/* Index of the bracket matching the one at i, scanning in `step` direction
 * over code tokens; -1 if unbalanced or past the work budget (parse.c). */
int tack_scan_match(struct scan *s, int i, char open, char close, int step);

/* What the body uses and says (body.c). Whether the source names an
 * identifier beginning `prefix` anywhere (comments and strings are not
 * identifiers). */
int tack_names_prefixed(const struct toks *t, const char *prefix);
/* Bit k for each array parameter k named by tack_extent( or tack_size(. */
uint64_t tack_extents_named(const struct toks *t, const struct tack_signature *sig);
/* The array parameter, plus one, that the body's first
 * tack_reduce_add(&y[ or tack_reduce_add(y + names as y; 0 when none
 * (sig->reduce_target). */
int tack_reduce_target(const struct scan *s, const struct def *d, const struct tack_signature *sig);
/* TACK_EVALUE for tack_extent or tack_size in the body of something that
 * is no array parameter. */
tack_status tack_extents_check(const struct scan *s, const struct def *d, const struct tack_signature *sig);
/* The body with every access to an array parameter's elements checked
 * (*out malloc'd): TACK_EVALUE for a use of a parameter that checks
 * cannot cover, TACK_ENOMEM. The body reduced to its directives
 * (malloc'd; NULL out of memory). */
tack_status tack_body_checked(struct scan *s, const struct def *d, const struct tack_signature *sig, char **out);
char *tack_body_stub(const struct scan *s, const struct def *d);

/* Follows the conditional directives (conditionals.c): marks the tokens of
 * groups the compiler skips (dir -1) and those of groups Tack cannot tell
 * taken or not (uncertain). TACK_EVALUE past the work budget or for
 * directives nested too deep; TACK_ENOMEM. */
tack_status tack_follow_conditionals(struct scan *s);

#endif
