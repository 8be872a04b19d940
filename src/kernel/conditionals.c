/* The conditional directives of a kernel's source, as the compiler will
 * take them where Tack can tell: which groups are skipped, and which it
 * cannot decide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* ---- conditional directives ----------------------------------------------
 *
 * The compiler keeps one group of each #if chain; Tack must read the same
 * source it compiles. A condition Tack can evaluate (numbers, defined(),
 * macros the source itself, or the kernel's defines before it, define or
 * undefine, arithmetic) is followed:
 * the tokens of every group not taken are set aside (dir -1). One it cannot
 * (a macro the compiler or a -D flag may define, a function-like macro)
 * leaves its groups in place, marked uncertain: a signature that depends on
 * them is refused, never guessed. The generated entry's compile-time
 * assertion checks whatever this misses. */

enum { C_NO, C_YES, C_MAYBE };

/* A macro as far as the directives so far say: defined here (with its
 * replacement), undefined here, or changed under an uncertain group. */
struct macro {
    const struct tok *name;
    int state; /* C_YES defined, C_NO undefined, C_MAYBE unknown */
    int begin, end, function_like;
};

struct cond_eval {
    struct scan *s;
    const struct macro *macros;
    int nmacros;
    int i, end; /* the expression's tokens */
    int depth;  /* of macros being evaluated */
    int nest;   /* of operators being parsed: bounds the recursion */
};

struct cval {
    int known;
    long long v;
};

static const struct macro *macro_find(const struct cond_eval *e, const struct tok *t)
{
    for (int i = e->nmacros - 1; i >= 0; i--)
        if (e->macros[i].name->len == t->len && !memcmp(e->macros[i].name->s, t->s, (size_t)t->len))
            return &e->macros[i];
    return NULL;
}

static const struct tok *ev_peek(const struct cond_eval *e, int k)
{
    return e->i + k < e->end ? &e->s->t.v[e->i + k] : NULL;
}

/* Whether the next tokens spell the operator `op`, of one or two
 * characters (the lexer splits "&&" into two adjacent '&'); a one-character
 * operator is not the first half of a two-character one. */
static int ev_op(const struct cond_eval *e, const char *op)
{
    const struct tok *a = ev_peek(e, 0), *b = ev_peek(e, 1);
    if (!a || a->kind != T_PUNCT || a->s[0] != op[0])
        return 0;
    char pair[3] = {a->s[0], 0, 0};
    if (b && b->kind == T_PUNCT && b->s == a->s + 1)
        pair[1] = b->s[0];
    int two = pair[1] && strstr("&& || == != <= >= << >>", pair) != NULL;
    return op[1] ? two && pair[1] == op[1] : !two;
}

static struct cval ev_cond(struct cond_eval *e);

static struct cval unknown_value(void) { return (struct cval){0, 0}; }

static struct cval ev_tokens(struct cond_eval *e, int begin, int end)
{
    if (e->depth >= 8)
        return unknown_value();
    struct cond_eval sub = *e;
    sub.i = begin;
    sub.end = end;
    sub.depth++;
    struct cval v = ev_cond(&sub);
    return sub.i == end ? v : unknown_value();
}

static struct cval ev_primary(struct cond_eval *e)
{
    const struct tok *t = ev_peek(e, 0);
    if (!t || spend(e->s, 1))
        return unknown_value();
    if (punct(t, '(')) {
        e->i++;
        struct cval v = ev_cond(e);
        if (ev_peek(e, 0) && punct(ev_peek(e, 0), ')'))
            e->i++;
        else
            v.known = 0;
        return v;
    }
    if (t->kind == T_NUMBER) {
        e->i++;
        char buf[32];
        if (t->len >= (int)sizeof buf)
            return unknown_value(); /* cut short, it would be another number */
        tok_copy(t, buf, sizeof buf);
        char *endp;
        unsigned long long v = strtoull(buf, &endp, 0);
        while (*endp && strchr("uUlL", *endp))
            endp++;
        return *endp ? unknown_value() : (struct cval){1, (long long)v};
    }
    if (t->kind == T_IDENT && tok_is(t, "defined")) {
        e->i++;
        int paren = ev_peek(e, 0) && punct(ev_peek(e, 0), '(');
        e->i += paren;
        const struct tok *name = ev_peek(e, 0);
        if (!name || name->kind != T_IDENT)
            return unknown_value();
        e->i++;
        if (paren) {
            if (!ev_peek(e, 0) || !punct(ev_peek(e, 0), ')'))
                return unknown_value();
            e->i++;
        }
        const struct macro *m = macro_find(e, name);
        if (!m || m->state == C_MAYBE)
            return unknown_value();
        return (struct cval){1, m->state == C_YES};
    }
    if (t->kind == T_IDENT) {
        e->i++;
        const struct macro *m = macro_find(e, t);
        if (!m || m->state == C_MAYBE || (m->state == C_YES && m->function_like))
            return unknown_value();
        if (m->state == C_NO)
            return (struct cval){1, 0};
        return ev_tokens(e, m->begin, m->end);
    }
    e->i++;
    return unknown_value();
}

static struct cval ev_unary(struct cond_eval *e)
{
    const struct tok *t = ev_peek(e, 0);
    if (t && t->kind == T_PUNCT && strchr("!-+~", t->s[0])) {
        e->i++;
        if (++e->nest > 256)
            return unknown_value();
        struct cval v = ev_unary(e);
        e->nest--;
        switch (t->s[0]) {
        case '!': v.v = !v.v; break;
        case '-': v.v = (long long)(0ULL - (unsigned long long)v.v); break;
        case '~': v.v = ~v.v; break;
        default: break;
        }
        return v;
    }
    return ev_primary(e);
}

/* Binary operators by precedence, lowest first; each a space-separated
 * list of spellings. */
static const char *const levels[] = {"||", "&&", "|", "^", "&", "== !=", "<= >= < >", "<< >>", "+ -", "* / %"};

static struct cval ev_binary(struct cond_eval *e, int level)
{
    /* Each level an operand passes through costs, as its operators are
     * looked for: some four steps' work. */
    if (spend(e->s, 4))
        return unknown_value();
    if (level == (int)(sizeof levels / sizeof *levels))
        return ev_unary(e);
    struct cval l = ev_binary(e, level + 1);
    for (;;) {
        char op[3] = "";
        for (const char *p = levels[level]; *p;) {
            size_t n = strcspn(p, " ");
            char cand[3] = {p[0], n > 1 ? p[1] : 0, 0};
            if (ev_op(e, cand)) {
                memcpy(op, cand, sizeof op);
                break;
            }
            p += n + (p[n] == ' ');
        }
        if (!op[0])
            return l;
        e->i += op[1] ? 2 : 1;
        struct cval r = ev_binary(e, level + 1);
        long long a = l.v, b = r.v;
        int known = l.known && r.known;
        if (!strcmp(op, "||")) {
            l = (l.known && a) || (r.known && b) ? (struct cval){1, 1} : (struct cval){known, 0};
            continue;
        }
        if (!strcmp(op, "&&")) {
            l = (l.known && !a) || (r.known && !b) ? (struct cval){1, 0} : (struct cval){known, 1};
            continue;
        }
        long long v = 0;
        unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
        switch (op[0]) {
        case '|': v = a | b; break;
        case '^': v = a ^ b; break;
        case '&': v = a & b; break;
        case '=': v = a == b; break;
        case '!': v = a != b; break;
        case '<': v = op[1] == '<' ? (long long)(ua << (ub & 63)) : op[1] == '=' ? a <= b : a < b; break;
        case '>': v = op[1] == '>' ? a >> (ub & 63) : op[1] == '=' ? a >= b : a > b; break;
        case '+': v = (long long)(ua + ub); break;
        case '-': v = (long long)(ua - ub); break;
        case '*': v = (long long)(ua * ub); break;
        default:
            /* The compiler refuses a division by zero; overflow is left unknown. */
            if (!b || (a == INT64_MIN && b == -1))
                known = 0;
            else
                v = op[0] == '/' ? a / b : a % b;
        }
        l = (struct cval){known, v};
    }
}

static struct cval ev_cond(struct cond_eval *e)
{
    if (++e->nest > 256) {
        e->i = e->end + 1; /* never a whole expression */
        return unknown_value();
    }
    struct cval c = ev_binary(e, 0);
    e->nest--;
    if (!ev_peek(e, 0) || !punct(ev_peek(e, 0), '?'))
        return c;
    e->i++;
    struct cval a = ev_cond(e);
    if (!ev_peek(e, 0) || !punct(ev_peek(e, 0), ':'))
        return unknown_value();
    e->i++;
    struct cval b = ev_cond(e);
    if (c.known)
        return c.v ? a : b;
    return a.known && b.known && a.v == b.v ? a : unknown_value();
}

/* C_YES, C_NO or C_MAYBE for the condition in tokens [begin, end). */
static int evaluate(struct scan *s, const struct macro *macros, int nmacros, int begin, int end)
{
    struct cond_eval e = {s, macros, nmacros, begin, end, 0, 0};
    if (begin == end)
        return C_MAYBE;
    struct cval v = ev_cond(&e);
    if (!v.known || e.i != end)
        return C_MAYBE;
    return v.v ? C_YES : C_NO;
}

#define COND_MAX 64

struct group {
    int outer;  /* the status around the chain: C_YES, C_NO, C_MAYBE */
    int status; /* of the group now open */
    int taken;  /* an earlier group of the chain is taken for certain */
    int maybe;  /* an earlier group may have been taken */
    int line;   /* of the directive that opened the group now open */
    int braces; /* '{' less '}' in the group now open */
};

/* Closes the open group: an uncertain one must balance its braces, or
 * Tack could not find the kernel's body the way the compiler does. */
static void group_close(struct scan *s, struct group *g)
{
    if (g->status == C_MAYBE && g->braces && !s->unbalanced_line)
        s->unbalanced_line = g->line;
}

/* Follows #if, #ifdef, #ifndef, #elif, #else and #endif (see above). Errors
 * only for memory and the budget. */
/* The value of the #if, #ifdef or #ifndef (`w`) of the directive
 * tokens [i, end), in a group the compiler does not skip. */
static int if_value(struct scan *s, const struct macro *macros, int nmacros, const struct tok *w, int i, int end)
{
    if (tok_is(w, "if"))
        return evaluate(s, macros, nmacros, i + 2, end);
    struct cond_eval e = {s, macros, nmacros, 0, 0, 0, 0};
    const struct macro *m = i + 2 < end && s->t.v[i + 2].kind == T_IDENT ? macro_find(&e, &s->t.v[i + 2]) : NULL;
    int v = !m || m->state == C_MAYBE ? C_MAYBE : m->state;
    if (tok_is(w, "ifndef") && v != C_MAYBE)
        v = v == C_YES ? C_NO : C_YES;
    return v;
}

/* Moves group g to its next branch, the #elif or #else of directive
 * tokens [i, end); the branch's status. */
static int next_group(struct scan *s, struct group *g, const struct macro *macros, int nmacros, int i, int end)
{
    const struct tok *w = &s->t.v[i + 1];
    group_close(s, g);
    int v = C_NO;
    if (g->outer != C_NO && !g->taken)
        v = tok_is(w, "else") ? C_YES : evaluate(s, macros, nmacros, i + 2, end);
    int inner = g->outer == C_NO || g->taken || v == C_NO                 ? C_NO
                : g->outer == C_MAYBE || g->maybe || v == C_MAYBE ? C_MAYBE
                                                                         : C_YES;
    g->taken |= v == C_YES && !g->maybe;
    g->maybe |= v == C_MAYBE;
    g->status = inner;
    g->line = s->t.v[i].line;
    g->braces = 0;
    return inner;
}

/* Records the #define or #undef of directive tokens [i, end) in a group
 * of `status`; -1 out of memory (nothing recorded). */
static int macro_add(struct scan *s, struct macro **macros, int *nmacros, int *cap, int status, int i, int end)
{
    if (*nmacros == *cap) {
        int ncap = *cap ? *cap * 2 : 32;
        struct macro *m = realloc(*macros, (size_t)ncap * sizeof *m);
        if (!m)
            return -1;
        *macros = m;
        *cap = ncap;
    }
    const struct tok *w = &s->t.v[i + 1], *name = &s->t.v[i + 2];
    int fl = i + 3 < end && punct(&s->t.v[i + 3], '(') && s->t.v[i + 3].s == name->s + name->len;
    (*macros)[(*nmacros)++] = (struct macro){name, status == C_MAYBE ? C_MAYBE : tok_is(w, "define") ? C_YES : C_NO,
                                             i + 3, end, fl};
    return 0;
}

tack_status tack_follow_conditionals(struct scan *s)
{
    struct group stack[COND_MAX];
    int depth = 0, overflow = 0, status = C_YES;
    struct macro *macros = NULL;
    int nmacros = 0, cap = 0;
    tack_status st = TACK_OK;
    for (int i = 0; i < s->t.n; i++) {
        struct tok *t = &s->t.v[i];
        if (spend(s, 1 + depth)) {
            st = too_complex();
            break;
        }
        int starts = t->dir > 0 && punct(t, '#') && (i == 0 || s->t.v[i - 1].dir != t->dir);
        if (!starts) {
            if (status == C_NO) {
                t->dir = -1;
            } else {
                if (status == C_MAYBE)
                    t->uncertain = stack[depth - 1].line;
                if (!t->dir && (punct(t, '{') || punct(t, '}')))
                    for (int g = 0; g < depth; g++)
                        stack[g].braces += punct(t, '{') ? 1 : -1;
            }
            continue;
        }
        int end = i + 1;
        while (end < s->t.n && s->t.v[end].dir == t->dir)
            end++;
        const struct tok *w = i + 1 < end ? &s->t.v[i + 1] : NULL;
        int is_if = w && (tok_is(w, "if") || tok_is(w, "ifdef") || tok_is(w, "ifndef"));
        int is_elif = w && (tok_is(w, "elif") || tok_is(w, "else"));
        int is_endif = w && tok_is(w, "endif");
        if (is_if) {
            int v = status == C_NO ? C_NO : if_value(s, macros, nmacros, w, i, end);
            if (depth == COND_MAX) {
                overflow++;
                continue;
            }
            int inner = status == C_NO ? C_NO : status == C_MAYBE && v != C_NO ? C_MAYBE : v;
            stack[depth++] = (struct group){status, inner, v == C_YES, v == C_MAYBE, t->line, 0};
            status = inner;
        } else if ((is_elif || is_endif) && overflow) {
            overflow -= is_endif;
        } else if (is_elif && depth) {
            status = next_group(s, &stack[depth - 1], macros, nmacros, i, end);
        } else if (is_endif && depth) {
            group_close(s, &stack[depth - 1]);
            status = stack[--depth].outer;
        } else if (status == C_NO) {
            for (int k = i; k < end; k++)
                s->t.v[k].dir = -1;
        } else if (w && (tok_is(w, "define") || tok_is(w, "undef")) && i + 2 < end &&
                   s->t.v[i + 2].kind == T_IDENT) {
            if (macro_add(s, &macros, &nmacros, &cap, status, i, end)) {
                st = tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
                break;
            }
        }
        /* A directive in an uncertain group is uncertain too: a #define
         * there may or may not exist. */
        if (status == C_MAYBE && depth)
            for (int k = i; k < end; k++)
                if (!s->t.v[k].uncertain && s->t.v[k].dir > 0 && !is_if && !is_elif && !is_endif)
                    s->t.v[k].uncertain = stack[depth - 1].line;
        i = end - 1;
    }
    while (st == TACK_OK && depth)
        group_close(s, &stack[--depth]);
    free(macros);
    return st;
}

