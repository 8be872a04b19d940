/* What the kernel layer reads of a kernel's body (body.c): whether it uses
 * Tack's atomics and reductions, which arrays' extents it asks, and the
 * body rewritten for a checked launch. The signature reader is parse.c;
 * this is what the launch needs of the rest. */
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* Whether the source names an identifier that begins `prefix`
 * (tack_atomic_: one of Tack's atomics; tack_reduce_: a reduction),
 * wherever it is (in a helper the kernel calls, or a
 * macro, it still makes the kernel's updates atomic ones). Comments and
 * strings are not identifiers. */
int tack_names_prefixed(const struct toks *t, const char *prefix)
{
    const int n = (int)strlen(prefix);
    for (int i = 0; i < t->n; i++)
        if (t->v[i].kind == T_IDENT && t->v[i].len >= n && !strncmp(t->v[i].s, prefix, (size_t)n))
            return 1;
    return 0;
}

/* The array parameter named by token t, or -1. */
static int array_param(const struct tack_signature *sig, const struct tok *t)
{
    if (t->kind != T_IDENT)
        return -1;
    for (int k = 0; k < sig->nparams; k++)
        if (sig->params[k].is_array && tok_is(t, sig->params[k].name))
            return k;
    return -1;
}

/* The array parameters whose extents the source asks for: tack_extent( or
 * tack_size( followed by a parameter's name, anywhere (in a macro's
 * definition too, which the body may use). */
uint64_t tack_extents_named(const struct toks *t, const struct tack_signature *sig)
{
    uint64_t used = 0;
    for (int i = 0; i + 2 < t->n; i++) {
        const struct tok *v = &t->v[i];
        if (v->kind != T_IDENT || !(tok_is(v, "tack_extent") || tok_is(v, "tack_size")) || !punct(&v[1], '('))
            continue;
        int k = array_param(sig, &v[2]);
        if (k >= 0)
            used |= (uint64_t)1 << k;
    }
    return used;
}

/* The target written &y[...] or y + ...; code tokens only: a skipped
 * group's or a directive's are not the body's. */
int tack_reduce_target(const struct scan *s, const struct def *d, const struct tack_signature *sig)
{
    const struct tok *v = s->t.v;
    for (int i = d->body_open + 1; i + 4 < d->body_close; i++) {
        if (v[i].dir || v[i].kind != T_IDENT || !tok_is(&v[i], "tack_reduce_add") || !punct(&v[i + 1], '(') ||
            v[i + 1].dir || v[i + 2].dir || v[i + 3].dir)
            continue;
        int k = array_param(sig, &v[i + 3]);
        if (punct(&v[i + 2], '&') && k >= 0 && punct(&v[i + 4], '[') && !v[i + 4].dir)
            return k + 1;
        k = array_param(sig, &v[i + 2]);
        if (k >= 0 && punct(&v[i + 3], '+'))
            return k + 1;
    }
    return 0;
}

/* TACK_EVALUE for tack_extent( or tack_size( in the body whose first
 * argument is not one of the kernel's array parameters: there is no
 * array for it to read. */
tack_status tack_extents_check(const struct scan *s, const struct def *d, const struct tack_signature *sig)
{
    const struct tok *v = s->t.v;
    for (int i = d->body_open + 1; i + 2 < d->body_close; i++) {
        if (v[i].dir || v[i].kind != T_IDENT || !(tok_is(&v[i], "tack_extent") || tok_is(&v[i], "tack_size")) ||
            !punct(&v[i + 1], '('))
            continue;
        if (array_param(sig, &v[i + 2]) >= 0)
            continue;
        return tack_error_set(TACK_EVALUE,
                              "line %d: %.*s(%.*s, ...) in kernel '%s': its first argument must name one of the "
                              "kernel's array parameters, whose extents the launch passes; '%.*s' is not one",
                              v[i].line, v[i].len, v[i].s, v[i + 2].len, v[i + 2].s, sig->name, v[i + 2].len,
                              v[i + 2].s);
    }
    return TACK_OK;
}

/* Whether a code token ends an operand, so that a '&' or '*' after it is
 * the binary operator. */
static int ends_operand(const struct tok *t)
{
    if (t->kind == T_IDENT)
        return !tok_is(t, "return") && !tok_is(t, "case") && !tok_is(t, "sizeof");
    return t->kind == T_NUMBER || t->kind == T_STRING || punct(t, ')') || punct(t, ']');
}

/* The checked rewrite works on the body's code tokens alone (a
 * directive's or a skipped group's are not the compiler's code there):
 * c[0..nc) their indices, match[] each bracket's partner. What it writes
 * is text put before a token (pre), in place of it (drop), after it
 * (post); the text between tokens (blanks, comments, line breaks) is
 * kept, so lines stay the user's. */
struct edit {
    struct tack_source pre, post;
    int drop;
};

struct rewrite {
    struct scan *s;
    const struct tack_signature *sig;
    const struct def *d;
    int *c, *match, nc;
    char *claimed; /* per code token: a checked access's */
    struct edit *edits; /* per token of the body, from its '{' */
};

static const struct tok *ct(const struct rewrite *w, int p) { return &w->s->t.v[w->c[p]]; }
static struct edit *ce(const struct rewrite *w, int p) { return &w->edits[w->c[p] - w->d->body_open]; }
/* Two punctuation tokens written as one operator (->, ++, +=). */
static int joined(const struct rewrite *w, int p, char a, char b)
{
    return p >= 0 && p + 1 < w->nc && punct(ct(w, p), a) && punct(ct(w, p + 1), b) &&
           ct(w, p)->s + 1 == ct(w, p + 1)->s;
}
static int is_open(const struct rewrite *w, int p, char open) { return p >= 0 && p < w->nc && punct(ct(w, p), open); }

/* The array parameter code token p names as a variable (not a member
 * after '.' or '->'), or -1. */
static int param_at(const struct rewrite *w, int p)
{
    if (p < 0 || p >= w->nc)
        return -1;
    if (p > 0 && (punct(ct(w, p - 1), '.') || joined(w, p - 2, '-', '>')))
        return -1;
    return array_param(w->sig, ct(w, p));
}

/* Whether the parenthesised group [o, m] is a cast to a pointer type:
 * names and '*' only, a '*' among them, ending in '*' or a qualifier (an
 * expression in parentheses never ends so). */
static int pointer_cast(const struct rewrite *w, int o, int m)
{
    int star = 0;
    if (m - o < 3 || punct(ct(w, o + 1), '*'))
        return 0;
    for (int q = o + 1; q < m; q++) {
        const struct tok *t = ct(w, q);
        if (punct(t, '*'))
            star = 1;
        else if (t->kind != T_IDENT)
            return 0;
    }
    const struct tok *last = ct(w, m - 1);
    return star && (punct(last, '*') || tok_is(last, "const") || tok_is(last, "volatile") ||
                    tok_is(last, "restrict") || tok_is(last, "__restrict") || tok_is(last, "__restrict__"));
}

/* An expression over [a, b] read as an array parameter plus an offset:
 * the parameter's name, through parentheses and pointer casts (the
 * outermost cast gives the accessed type), or an additive chain at one
 * level, `y + e`, `e + y`, `y - e` (y added once: with its name written
 * 0 the chain is the offset, in y's elements). */
struct base {
    int k, name;
    int cast_open, cast_close; /* -1: no cast */
};

static int read_base(const struct rewrite *w, int a, int b, struct base *out)
{
    out->cast_open = out->cast_close = -1;
    for (;;) {
        if (a > b)
            return 0;
        if (a == b) {
            out->name = a;
            return (out->k = param_at(w, a)) >= 0;
        }
        if (!is_open(w, a, '('))
            break;
        int m = w->match[a];
        if (m == b) {
            a++, b--;
            continue;
        }
        if (m < b && pointer_cast(w, a, m)) {
            if (out->cast_open < 0)
                out->cast_open = a, out->cast_close = m;
            a = m + 1;
            continue;
        }
        break;
    }
    /* An additive chain: its terms split at '+' and '-' between operands,
     * one level deep; an operator that binds less tightly at that level
     * makes it something else. */
    int name = -1, terms = 0, term = a, sign = 1;
    for (int q = a; q <= b + 1; q++) {
        if (q <= b && (is_open(w, q, '(') || is_open(w, q, '['))) {
            q = w->match[q];
            continue;
        }
        int split = q > b;
        if (!split) {
            const struct tok *t = ct(w, q);
            if (t->kind != T_PUNCT)
                continue;
            if ((punct(t, '+') || punct(t, '-')) && q > term && ends_operand(ct(w, q - 1)) &&
                !joined(w, q, '+', '+') && !joined(w, q, '-', '-') && !joined(w, q - 1, '+', '+') &&
                !joined(w, q - 1, '-', '-') && !joined(w, q, '-', '>'))
                split = 1;
            else if (strchr("<>=&|^?:,", t->s[0]))
                return 0;
            else
                continue;
        }
        struct base inner;
        int p = term, e = q - 1;
        while (p < e && is_open(w, p, '(') && w->match[p] == e)
            p++, e--;
        if (p == e && param_at(w, p) >= 0) {
            if (name >= 0 || sign < 0)
                return 0;
            name = p;
        } else if ((term != a || q - 1 != b) && read_base(w, term, q - 1, &inner) && inner.cast_open >= 0) {
            return 0; /* a cast inside the chain: its arithmetic is in another type */
        }
        terms++;
        if (q <= b)
            sign = punct(ct(w, q), '-') ? -1 : 1, term = q + 1;
    }
    if (name < 0 || terms < 2)
        return 0;
    out->name = name;
    out->k = param_at(w, name);
    return 1;
}

static int keyword_before_paren(const struct tok *t)
{
    static const char *const words[] = {"if", "while", "for", "switch", "return", "sizeof", "_Alignof", "alignof",
                                        "case", "do", "else", "_Generic", NULL};
    for (int i = 0; words[i]; i++)
        if (tok_is(t, words[i]))
            return 1;
    return 0;
}

/* The first code token of the postfix expression that ends at q (the
 * left operand of a '[' at q + 1), or -1 where Tack cannot tell: after a
 * parenthesised group that may be a cast or a callee, after a compound
 * literal. */
static int postfix_start(const struct rewrite *w, int q)
{
    while (q >= 0) {
        const struct tok *t = ct(w, q);
        if (punct(t, ']')) {
            q = w->match[q] - 1;
            continue;
        }
        if (joined(w, q - 1, '+', '+') || joined(w, q - 1, '-', '-')) {
            q -= 2;
            continue;
        }
        int start;
        if (punct(t, ')')) {
            int o = w->match[q];
            if (o > 0 && punct(ct(w, o - 1), ')'))
                return -1;
            if (o > 0 && ct(w, o - 1)->kind == T_IDENT && !keyword_before_paren(ct(w, o - 1))) {
                q = o - 1; /* a call */
                continue;
            }
            start = o;
        } else if (t->kind == T_IDENT || t->kind == T_NUMBER || t->kind == T_STRING) {
            start = q;
        } else {
            return -1;
        }
        if (start > 0 && punct(ct(w, start - 1), '.')) {
            q = start - 2;
            continue;
        }
        if (start > 1 && joined(w, start - 2, '-', '>')) {
            q = start - 3;
            continue;
        }
        return start;
    }
    return -1;
}

/* Whether the tokens [a, b], through the parentheses around them, are
 * the operand of a unary '&': an address. */
static int address_taken(const struct rewrite *w, int a, int b)
{
    while (a > 0 && b + 1 < w->nc && is_open(w, a - 1, '(') && w->match[a - 1] == b + 1)
        a--, b++;
    int p = a - 1;
    if (p < 0 || !punct(ct(w, p), '&'))
        return 0;
    return p == 0 || !(ends_operand(ct(w, p - 1)) || joined(w, p - 1, '&', '&'));
}

static void put_tokens(struct tack_source *b, const struct rewrite *w, int a, int z)
{
    for (int q = a; q <= z; q++)
        tack_source_put(b, "%s%.*s", q > a ? " " : "", ct(w, q)->len, ct(w, q)->s);
}

/* Within the side of an access that holds the base: its cast dropped,
 * its name written 0 (the rest is the offset). */
static void base_side(struct rewrite *w, const struct base *base)
{
    if (base->cast_open >= 0)
        for (int q = base->cast_open; q <= base->cast_close; q++)
            ce(w, q)->drop = 1;
    ce(w, base->name)->drop = 1;
    tack_source_put(&ce(w, base->name)->pre, "0");
    w->claimed[base->name] = 1;
}

/* One access: the tokens [a, z], left side [a, m - 1], right side
 * [m + 1, z - 1] (m the '[', z the ']'; for *b and an atomic's address
 * m = -1: the base alone, [a, z]). */
static void rewrite_access(struct rewrite *w, const struct base *base, int base_left, int a, int m, int z,
                           int ref)
{
    const char *name = w->sig->params[base->k].name;
    const int k = base->k;
    struct edit *first = ce(w, a);
    if (base->cast_open >= 0) {
        /* Checked in bytes: the cast's type is not y's. */
        struct tack_source cast = {0};
        put_tokens(&cast, w, base->cast_open, base->cast_close);
        char *text = tack_source_finish(&cast);
        const char *t = text ? text : "";
        tack_source_put(&first->pre, "(*%s TACK_BYTES_(%d, %s, sizeof(*%s 0), %d, %d, (", t, k, name, t, ref,
                        base_left);
        free(text);
    } else {
        tack_source_put(&first->pre, "%s(%d, %s, (", ref ? "TACK_REF_" : "TACK_AT_", k, name);
    }
    const char *close = base->cast_open >= 0 ? ")))" : "))";
    const char *sep = base->cast_open >= 0 ? ", " : " + ";
    if (m < 0) {
        tack_source_put(&ce(w, z)->post, ")%s(0%s", sep, close);
    } else {
        ce(w, m)->drop = ce(w, z)->drop = 1;
        tack_source_put(&ce(w, m)->pre, ")%s(", sep);
        tack_source_put(&ce(w, z)->pre, "%s", close);
    }
    base_side(w, base);
}

/* A parameter's name in [a, b] that no rewrite took, outside any call's
 * arguments (a pointer a helper makes of it is the helper's) and any
 * inner subscript's index; -1 when none. */
static int loose_param(const struct rewrite *w, int a, int b)
{
    for (int q = a; q <= b; q++) {
        if (is_open(w, q, '[') || (is_open(w, q, '(') && q > 0 && ct(w, q - 1)->kind == T_IDENT &&
                                   !keyword_before_paren(ct(w, q - 1)))) {
            q = w->match[q];
            continue;
        }
        if (!w->claimed[q] && param_at(w, q) >= 0)
            return q;
    }
    return -1;
}

/* Whether code token p lies directly in a struct's or union's braces: a
 * member's declaration. */
static int in_member_list(const struct rewrite *w, int p)
{
    for (int q = p - 1; q >= 0; q--) {
        if (punct(ct(w, q), '}') || punct(ct(w, q), ')') || punct(ct(w, q), ']')) {
            q = w->match[q];
            continue;
        }
        if (!punct(ct(w, q), '{'))
            continue;
        int r = q - 1;
        if (r >= 0 && ct(w, r)->kind == T_IDENT && !tok_is(ct(w, r), "struct") && !tok_is(ct(w, r), "union"))
            r--;
        return r >= 0 && (tok_is(ct(w, r), "struct") || tok_is(ct(w, r), "union"));
    }
    return 0;
}

/* Whether the code at p assigns to what precedes it: ++, --, =, and the
 * compound assignments (+=, <<=, ...). */
static int assigned(const struct rewrite *w, int p)
{
    if (p >= w->nc || ct(w, p)->kind != T_PUNCT)
        return 0;
    const char c = ct(w, p)->s[0];
    if (joined(w, p, '+', '+') || joined(w, p, '-', '-'))
        return 1;
    if (c == '=')
        return !joined(w, p, '=', '=');
    if (strchr("+-*/%&|^", c) && joined(w, p, c, '='))
        return 1;
    return (c == '<' || c == '>') && joined(w, p, c, c) && joined(w, p + 1, c, '=');
}

static tack_status refuse(const struct rewrite *w, int p, const char *why)
{
    const struct tok *t = ct(w, p);
    return tack_error_set(TACK_EVALUE,
                          "line %d: kernel '%s' is checked, and Tack cannot check this use of its array parameter "
                          "'%.*s': %s; write the access as %.*s[index] (or &%.*s[index] for an address), or build "
                          "the kernel unchecked",
                          t->line, w->sig->name, t->len, t->s, why, t->len, t->s, t->len, t->s);
}

/* The body from '{' to '}' with the edits made; NULL out of memory. */
static char *edited_text(const struct rewrite *w)
{
    const struct tok *v = w->s->t.v;
    const struct def *d = w->d;
    struct tack_source b = {0};
    for (int i = d->body_open; i <= d->body_close; i++) {
        if (i > d->body_open) {
            const char *from = v[i - 1].s + v[i - 1].len;
            tack_source_put(&b, "%.*s", (int)(v[i].s - from), from);
        }
        const struct edit *e = &w->edits[i - d->body_open];
        if (e->pre.text)
            tack_source_append(&b, e->pre.text);
        if (!e->drop)
            tack_source_put(&b, "%.*s", v[i].len, v[i].s);
        if (e->post.text)
            tack_source_append(&b, e->post.text);
        if (e->pre.failed || e->post.failed)
            b.failed = 1;
    }
    return tack_source_finish(&b);
}

/* Every access of the body to an array parameter's elements, rewritten
 * as checked (tack_source_hidden's TACK_AT_, TACK_REF_ and TACK_BYTES_):
 * a subscript whichever side of '[' the parameter is on, through
 * parentheses and pointer casts and with an offset added (y[e], e[y],
 * (y)[e], ((float *)y)[e], (y + k)[e]), a dereference (*y, *(y + e)), an
 * atomic's or a reduction's address (y + e); with '&' before it, through
 * parentheses, an address (TACK_REF_, whose out-of-bounds address is the
 * sink). What would make a check wrong or be an access Tack cannot
 * rewrite is refused: the parameter modified or its own address taken, a
 * subscript or dereference of an expression of it that is not one of
 * those. A pointer the body hands on (to a helper, into a local) is
 * checked where it is formed, not where it is used; subscripts inside a
 * directive (a macro's definition) are left alone. */
tack_status tack_body_checked(struct scan *s, const struct def *d, const struct tack_signature *sig, char **out)
{
    *out = NULL;
    const int n = d->body_close - d->body_open + 1;
    struct rewrite w = {.s = s, .sig = sig, .d = d};
    w.edits = calloc((size_t)n, sizeof *w.edits);
    w.c = malloc((size_t)n * sizeof *w.c);
    w.match = malloc((size_t)n * sizeof *w.match);
    w.claimed = calloc((size_t)n, 1);
    int *stack = malloc((size_t)n * sizeof *stack);
    tack_status st = TACK_OK;
    if (!w.edits || !w.c || !w.match || !w.claimed || !stack) {
        st = tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
        goto done;
    }
    const struct tok *v = s->t.v;
    for (int i = d->body_open + 1; i < d->body_close; i++)
        if (!v[i].dir)
            w.c[w.nc++] = i;
    /* The body's brackets balance (its end was found by them); a group
     * left open by a conditional Tack cannot follow matches nothing. */
    int depth = 0;
    for (int p = 0; p < w.nc; p++) {
        w.match[p] = -1;
        const struct tok *t = ct(&w, p);
        if (punct(t, '(') || punct(t, '[') || punct(t, '{')) {
            stack[depth++] = p;
        } else if ((punct(t, ')') || punct(t, ']') || punct(t, '}')) && depth > 0) {
            int o = stack[--depth];
            w.match[p] = o;
            w.match[o] = p;
        }
    }
    for (int p = 0; p < w.nc; p++)
        if ((punct(ct(&w, p), '(') || punct(ct(&w, p), '[') || punct(ct(&w, p), ')') || punct(ct(&w, p), ']')) &&
            w.match[p] < 0) {
            /* Balanced for the compiler, which takes one group of a
             * conditional, yet not in the groups Tack keeps. */
            st = tack_error_set(TACK_EVALUE,
                                "line %d: kernel '%s' is checked, and this bracket has no partner in the code Tack "
                                "reads of its body (conditionals it cannot tell taken or not keep both groups): "
                                "close each bracket inside the group that opens it, or build the kernel unchecked",
                                ct(&w, p)->line, sig->name);
            goto done;
        }
    for (int m = 0; m < w.nc; m++) {
        /* Subscripts: the parameter on either side. */
        if (!punct(ct(&w, m), '[') || m == 0)
            continue;
        int z = w.match[m], a = postfix_start(&w, m - 1);
        struct base base;
        if (a < 0)
            continue;
        int left = read_base(&w, a, m - 1, &base);
        if (!left && !read_base(&w, m + 1, z - 1, &base))
            continue;
        if (w.claimed[base.name])
            continue;
        if (left && base.cast_open < 0 && base.name == a && a == m - 1) {
            /* y[e], written as before: TACK_AT_(k, y, (e)). */
            int ref = address_taken(&w, a, z);
            tack_source_put(&ce(&w, a)->pre, "%s(%d, ", ref ? "TACK_REF_" : "TACK_AT_", base.k);
            ce(&w, m)->drop = ce(&w, z)->drop = 1;
            tack_source_put(&ce(&w, m)->pre, ", (");
            tack_source_put(&ce(&w, z)->pre, "))");
            w.claimed[a] = 1;
            continue;
        }
        rewrite_access(&w, &base, left, a, m, z, address_taken(&w, a, z));
    }
    for (int p = 0; p < w.nc; p++) {
        const struct tok *t = ct(&w, p);
        /* Dereferences: a unary '*' before casts and the base, nothing
         * postfix after it. */
        if (punct(t, '*') && !(p > 0 && ends_operand(ct(&w, p - 1))) && p + 1 < w.nc) {
            int q = p + 1;
            while (is_open(&w, q, '(') && w.match[q] > q && pointer_cast(&w, q, w.match[q]))
                q = w.match[q] + 1;
            int z = q < w.nc && is_open(&w, q, '(') ? w.match[q] : q;
            struct base base;
            if (z < w.nc - 1 && z >= q && !is_open(&w, z + 1, '[') && !is_open(&w, z + 1, '(') &&
                !punct(ct(&w, z + 1), '.') && !joined(&w, z + 1, '-', '>') && !joined(&w, z + 1, '+', '+') &&
                !joined(&w, z + 1, '-', '-') && read_base(&w, p + 1, z, &base) && !w.claimed[base.name]) {
                ce(&w, p)->drop = 1;
                rewrite_access(&w, &base, 1, p, -1, z, address_taken(&w, p, z));
            }
            continue;
        }
        /* An atomic's or a reduction's address, y + e: its first argument. */
        if (t->kind == T_IDENT && (!strncmp(t->s, "tack_atomic_", 12) || !strncmp(t->s, "tack_reduce_", 12)) &&
            is_open(&w, p + 1, '(')) {
            int a = p + 2, z = a, end = w.match[p + 1];
            while (z < end && !punct(ct(&w, z), ',')) {
                if (is_open(&w, z, '(') || is_open(&w, z, '['))
                    z = w.match[z];
                z++;
            }
            struct base base;
            if (z > a && read_base(&w, a, z - 1, &base) && !w.claimed[base.name]) {
                tack_source_put(&ce(&w, a)->pre, "&");
                rewrite_access(&w, &base, 1, a, -1, z - 1, 1);
            }
        }
    }
    /* A subscript or dereference left as it was whose array may be an
     * expression of a parameter ((c ? y : x)[i]): not an access Tack can
     * check. */
    for (int p = 0; p < w.nc; p++) {
        int q = -1;
        if (punct(ct(&w, p), '[') && p > 0 && !ce(&w, p)->drop) {
            int a = postfix_start(&w, p - 1);
            q = loose_param(&w, a < 0 ? p - 1 : a, p - 1);
            if (q < 0)
                q = loose_param(&w, p + 1, w.match[p] - 1);
        } else if (punct(ct(&w, p), '*') && !ce(&w, p)->drop && !(p > 0 && ends_operand(ct(&w, p - 1))) &&
                   p + 1 < w.nc) {
            int o = p + 1;
            while (is_open(&w, o, '(') && pointer_cast(&w, o, w.match[o]))
                o = w.match[o] + 1;
            if (o < w.nc)
                q = loose_param(&w, p + 1, is_open(&w, o, '(') ? w.match[o] : o);
        }
        if (q >= 0) {
            st = refuse(&w, q, "it is subscripted or dereferenced through an expression Tack does not read as the "
                               "parameter plus an offset");
            goto done;
        }
    }
    /* What is left of the parameters' names: refused where it would make
     * a check wrong or is an access Tack did not rewrite. */
    for (int p = 0; p < w.nc; p++) {
        if (w.claimed[p] || param_at(&w, p) < 0)
            continue;
        int a = p, z = p;
        while (a > 0 && z + 1 < w.nc && is_open(&w, a - 1, '(') && w.match[a - 1] == z + 1)
            a--, z++;
        int t = p - 1;
        while (t >= 0 && (punct(ct(&w, t), '*') || tok_is(ct(&w, t), "const") || tok_is(ct(&w, t), "volatile") ||
                          tok_is(ct(&w, t), "restrict")))
            t--;
        if (t >= 0 && t < p && ct(&w, t)->kind == T_IDENT && !keyword_before_paren(ct(&w, t)) &&
            !tok_is(ct(&w, t), "goto")) {
            if (in_member_list(&w, p))
                continue;
            st = refuse(&w, p, "a local of that name hides it, and the checks would be the parameter's; rename the "
                               "local");
        } else if (address_taken(&w, p, p))
            st = refuse(&w, p, "its own address is taken, through which it could be changed");
        else if (joined(&w, a - 2, '+', '+') || joined(&w, a - 2, '-', '-') || assigned(&w, z + 1))
            st = refuse(&w, p, "the parameter itself is changed, which its checks would not follow");
        else if (is_open(&w, z + 1, '[') || (a > 0 && is_open(&w, a - 1, '[')) ||
                 (a > 0 && punct(ct(&w, a - 1), '*') && !(a > 1 && ends_operand(ct(&w, a - 2)))))
            st = refuse(&w, p, "it is subscripted or dereferenced through an expression Tack does not read as the "
                               "parameter plus an offset");
        else
            continue;
        goto done;
    }
    *out = edited_text(&w);
    if (!*out)
        st = tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
done:
    if (w.edits)
        for (int i = 0; i < n; i++) {
            free(w.edits[i].pre.text);
            free(w.edits[i].post.text);
        }
    free(w.edits);
    free(w.c);
    free(w.match);
    free(w.claimed);
    free(stack);
    return st;
}

/* The body with its code taken out: '{', each directive inside it on a
 * line of its own (so that conditionals that cross the body's ends, and
 * macros defined inside it, stay as they were), '}'. NULL out of memory. */
char *tack_body_stub(const struct scan *s, const struct def *d)
{
    struct tack_source b = {0};
    const struct tok *v = s->t.v;
    tack_source_put(&b, "{\n");
    for (int i = d->body_open + 1; i < d->body_close; i++) {
        if (v[i].dir <= 0 || v[i - 1].dir == v[i].dir)
            continue;
        int j = i;
        while (j + 1 < d->body_close && v[j + 1].dir == v[i].dir)
            j++;
        tack_source_put(&b, "%.*s\n", (int)(v[j].s + v[j].len - v[i].s), v[i].s);
    }
    tack_source_put(&b, "}");
    return tack_source_finish(&b);
}

