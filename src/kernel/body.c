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

/* Whether a code token ends an operand, so that a '&' after it is the
 * binary operator. */
static int ends_operand(const struct tok *t)
{
    if (t->kind == T_IDENT)
        return !tok_is(t, "return") && !tok_is(t, "case") && !tok_is(t, "sizeof");
    return t->kind == T_NUMBER || t->kind == T_STRING || punct(t, ')') || punct(t, ']');
}

/* The kernel's body as text, from '{' to '}', with what `edit` says per
 * token put before it (pre) or in its place (repl). The text between
 * tokens (blanks, comments, line breaks) is kept, so lines stay the
 * user's. NULL out of memory. */
struct edit {
    int kind; /* 0: none; 1: TACK_AT_ before; 2: TACK_REF_ before; 3: '[' opens; 4: ']' closes */
    int param;
};

static char *body_text(const struct scan *s, const struct def *d, const struct edit *edits)
{
    struct tack_source b = {0};
    const struct tok *v = s->t.v;
    for (int i = d->body_open; i <= d->body_close; i++) {
        if (i > d->body_open) {
            const char *from = v[i - 1].s + v[i - 1].len;
            tack_source_put(&b, "%.*s", (int)(v[i].s - from), from);
        }
        const struct edit *e = edits ? &edits[i - d->body_open] : NULL;
        if (e && (e->kind == 1 || e->kind == 2))
            tack_source_put(&b, "%s(%d, ", e->kind == 1 ? "TACK_AT_" : "TACK_REF_", e->param);
        if (e && e->kind == 3)
            tack_source_put(&b, ", (");
        else if (e && e->kind == 4)
            tack_source_put(&b, "))");
        else
            tack_source_put(&b, "%.*s", v[i].len, v[i].s);
    }
    return tack_source_finish(&b);
}

/* Every subscript of an array parameter in the body, y[e], becomes
 * TACK_AT_(k, y, (e)), and one whose address is taken, &y[e], the '&'
 * kept, TACK_REF_(k, y, (e)): checked accesses (tack_source_hidden).
 * Subscripts inside a directive (a macro's definition) and a name after
 * '.' or '->' (a member) are left alone. NULL out of memory. */
char *tack_body_checked(struct scan *s, const struct def *d, const struct tack_signature *sig)
{
    const int n = d->body_close - d->body_open + 1;
    struct edit *edits = calloc((size_t)n, sizeof *edits);
    if (!edits)
        return NULL;
    const struct tok *v = s->t.v;
    for (int i = d->body_open + 1; i < d->body_close; i++) {
        int k = v[i].dir ? -1 : array_param(sig, &v[i]);
        if (k < 0 || v[i + 1].dir || !punct(&v[i + 1], '['))
            continue;
        int p = scan_prev(s, i);
        if (p >= 0 && (punct(&v[p], '.') || (punct(&v[p], '>') && p > 0 && punct(&v[p - 1], '-') &&
                                             v[p - 1].s + 1 == v[p].s)))
            continue;
        int close = tack_scan_match(s, i + 1, '[', ']', 1);
        if (close < 0 || close >= d->body_close)
            continue;
        int address = 0;
        if (p >= 0 && punct(&v[p], '&')) {
            int pp = scan_prev(s, p);
            address = pp < 0 || !(ends_operand(&v[pp]) || (punct(&v[pp], '&') && v[pp].s + 1 == v[p].s));
        }
        edits[i - d->body_open] = (struct edit){address ? 2 : 1, k};
        edits[i + 1 - d->body_open] = (struct edit){3, k};
        edits[close - d->body_open] = (struct edit){4, k};
    }
    char *text = body_text(s, d, edits);
    free(edits);
    return text;
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

