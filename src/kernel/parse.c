/* Kernel signatures: find the kernel in the user's source and read its
 * parameters. Only the signature matters to Tack, so this is a tokenizer
 * and a scan for top-level function definitions, not a C parser: bodies are
 * skipped by brace matching, directives are set aside (object-like #defines
 * and simple typedefs are kept as aliases, since a signature may use them). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"


static int push(struct toks *t, struct tok k)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        struct tok *v = realloc(t->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = k;
    return 0;
}

static int is_ident_start(int c) { return isalpha(c) || c == '_'; }
static int is_ident_char(int c) { return isalnum(c) || c == '_'; }

static tack_status lex(const char *src, int first_line, struct toks *out)
{
    const char *p = src;
    int line = first_line, dir = 0, ndirs = 0, line_start = 1;
    while (*p) {
        char c = *p;
        if (c == '\n') {
            line++;
            p++;
            dir = 0;
            line_start = 1;
            continue;
        }
        if (c == '\\' && (p[1] == '\n' || (p[1] == '\r' && p[2] == '\n'))) {
            p += p[1] == '\n' ? 2 : 3;
            line++;
            continue;
        }
        if (isspace((unsigned char)c)) {
            p++;
            continue;
        }
        if (c == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (c == '/' && p[1] == '*') {
            p += 2;
            while (*p && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n')
                    line++;
                p++;
            }
            if (*p)
                p += 2;
            continue;
        }
        struct tok t = {p, 1, line, T_PUNCT, dir, 0};
        if (c == '#' && line_start) {
            dir = ++ndirs;
            t.dir = dir;
        } else if (is_ident_start((unsigned char)c)) {
            while (is_ident_char((unsigned char)p[t.len]))
                t.len++;
            t.kind = T_IDENT;
        } else if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)p[1]))) {
            while (is_ident_char((unsigned char)p[t.len]) || p[t.len] == '.' ||
                   ((p[t.len] == '+' || p[t.len] == '-') && strchr("eEpP", p[t.len - 1])))
                t.len++;
            t.kind = T_NUMBER;
        } else if (c == '"' || c == '\'') {
            while (p[t.len] && p[t.len] != c && p[t.len] != '\n')
                t.len += p[t.len] == '\\' && p[t.len + 1] ? 2 : 1;
            if (p[t.len] == c)
                t.len++;
            t.kind = T_STRING;
        }
        line_start = 0;
        if (push(out, t))
            return tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
        p += t.len;
    }
    return TACK_OK;
}


/* Index of the bracket matching the one at i, scanning in `step` direction
 * over code tokens; -1 if unbalanced. */
int tack_scan_match(struct scan *s, int i, char open, char close, int step)
{
    int depth = 0;
    for (; i >= 0 && i < s->t.n; i += step) {
        if (spend(s, 1))
            return -1;
        const struct tok *t = &s->t.v[i];
        if (t->dir)
            continue;
        if (punct(t, open))
            depth++;
        else if (punct(t, close) && --depth == 0)
            return i;
    }
    return -1;
}

static tack_status add_alias(struct scan *s, const struct tok *name, int begin, int end)
{
    struct alias *a = realloc(s->aliases, (size_t)(s->naliases + 1) * sizeof *a);
    if (!a)
        return tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
    s->aliases = a;
    a[s->naliases++] = (struct alias){name, begin, end};
    return TACK_OK;
}

/* Records object-like #defines: `# define NAME replacement`. A name
 * followed at once by '(' is a function-like macro, which a signature
 * cannot meaningfully use, so it is not an alias. */
static tack_status collect_defines(struct scan *s)
{
    for (int i = 0; i + 2 < s->t.n; i++) {
        const struct tok *t = s->t.v;
        if (t[i].dir <= 0 || !punct(&t[i], '#') || t[i + 1].dir != t[i].dir || !tok_is(&t[i + 1], "define") ||
            t[i + 2].dir != t[i].dir || t[i + 2].kind != T_IDENT)
            continue;
        int body = i + 3, end = body;
        while (end < s->t.n && s->t.v[end].dir == t[i].dir)
            end++;
        if (body < end && punct(&t[body], '(') && t[body].s == t[i + 2].s + t[i + 2].len)
            continue;
        tack_status st = add_alias(s, &t[i + 2], body, end);
        if (st != TACK_OK)
            return st;
    }
    return TACK_OK;
}

/* Finds top-level function definitions and typedefs. */
static tack_status scan_top(struct scan *s)
{
    int stmt = scan_next(s, -1), paren = 0;
    for (int i = stmt; i < s->t.n; i = scan_next(s, i)) {
        const struct tok *t = &s->t.v[i];
        if (punct(t, '('))
            paren++;
        else if (punct(t, ')'))
            paren--;
        else if (punct(t, ';') && paren == 0) {
            /* typedef <type tokens> NAME ; */
            const struct tok *v = s->t.v;
            int last = scan_prev(s, i);
            if (stmt < last && tok_is(&v[stmt], "typedef") && v[last].kind == T_IDENT) {
                int simple = 1;
                for (int k = stmt; k < last; k = scan_next(s, k))
                    simple = simple && (v[k].kind == T_IDENT || punct(&v[k], '*'));
                /* The replacement may contain directive tokens between
                 * code tokens; expansion skips them. */
                if (simple) {
                    tack_status st = add_alias(s, &v[last], scan_next(s, stmt), last);
                    if (st != TACK_OK)
                        return st;
                }
            }
            stmt = scan_next(s, i);
        } else if (punct(t, '{') && paren == 0) {
            int close = scan_prev(s, i), is_def = 0, name = -1;
            while (close >= 0 && punct(&s->t.v[close], ')')) {
                int open = tack_scan_match(s, close, ')', '(', -1);
                if (s->budget < 0)
                    return too_complex();
                name = open > 0 ? scan_prev(s, open) : -1;
                if (name < 0 || s->t.v[name].kind != T_IDENT)
                    break;
                /* void f(...) __attribute__((x)) { */
                if (tok_is(&s->t.v[name], "__attribute__")) {
                    close = scan_prev(s, name);
                    continue;
                }
                is_def = name >= stmt;
                if (is_def) {
                    struct def *d = realloc(s->defs, (size_t)(s->ndefs + 1) * sizeof *d);
                    if (!d)
                        return tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
                    s->defs = d;
                    d[s->ndefs++] = (struct def){name, stmt, scan_next(s, open), close, i, -1};
                }
                break;
            }
            int end = tack_scan_match(s, i, '{', '}', 1);
            if (s->budget < 0)
                return too_complex();
            if (end < 0)
                return tack_error_set(TACK_EVALUE, "line %d: this '{' is never closed", t->line);
            if (is_def)
                s->defs[s->ndefs - 1].body_close = end;
            i = end;
            if (is_def)
                stmt = scan_next(s, i);
        }
    }
    return TACK_OK;
}

static const struct alias *find_alias(struct scan *s, const struct tok *t)
{
    if (spend(s, 1 + s->naliases))
        return NULL;
    for (int i = s->naliases - 1; i >= 0; i--)
        if (s->aliases[i].name->len == t->len && !memcmp(s->aliases[i].name->s, t->s, (size_t)t->len))
            return &s->aliases[i];
    return NULL;
}

#define PARAM_TOKS 64

struct ptoks {
    const struct tok *v[PARAM_TOKS];
    int n;
};

/* Appends tokens [begin, end), replacing aliases by what they stand for.
 * -1 when the output would pass PARAM_TOKS or the budget is spent. */
static int expand(struct scan *s, int begin, int end, int skip_dir, struct ptoks *out, int depth)
{
    for (int i = begin; i < end; i++) {
        if (spend(s, 1))
            return -1;
        const struct tok *t = &s->t.v[i];
        if (skip_dir && t->dir)
            continue;
        const struct alias *a = t->kind == T_IDENT && depth < 8 ? find_alias(s, t) : NULL;
        if (s->budget < 0)
            return -1;
        if (a) {
            if (a->name->uncertain && !s->uncertain_alias)
                s->uncertain_alias = a->name->uncertain;
            int in_dir = s->t.v[a->begin < s->t.n ? a->begin : 0].dir != 0;
            if (expand(s, a->begin, a->end, !in_dir, out, depth + 1))
                return -1;
            continue;
        }
        if (out->n == PARAM_TOKS)
            return -1;
        out->v[out->n++] = t;
    }
    return 0;
}

/* Every spelling of a dtype's C type: the portable names every prelude
 * defines, and the compilers' own, which a kernel written for one backend
 * uses. Words that are not reserved identifiers (half, complex) are left
 * out: they could be a parameter's name. */
static const struct {
    const char *word;
    tack_dtype dtype;
} type_words[] = {
    {"int8_t", TACK_I8},      {"uint8_t", TACK_U8},     {"int16_t", TACK_I16},       {"uint16_t", TACK_U16},
    {"int32_t", TACK_I32},    {"uint32_t", TACK_U32},   {"int64_t", TACK_I64},       {"uint64_t", TACK_U64},
    {"float", TACK_F32},      {"double", TACK_F64},     {"tack_index", TACK_I64},    {"bool", TACK_BOOL},
    {"_Bool", TACK_BOOL},     {"tack_f16", TACK_F16},   {"_Float16", TACK_F16},      {"__half", TACK_F16},
    {"tack_bf16", TACK_BF16}, {"__bf16", TACK_BF16},    {"__nv_bfloat16", TACK_BF16}, {"__hip_bfloat16", TACK_BF16},
    {"tack_c64", TACK_C64},   {"tack_c128", TACK_C128},
};

static int type_word(const struct tok *t, tack_dtype *dtype)
{
    for (size_t i = 0; i < sizeof type_words / sizeof *type_words; i++) {
        if (tok_is(t, type_words[i].word)) {
            *dtype = type_words[i].dtype;
            return 1;
        }
    }
    return 0;
}

static int ignored_qualifier(const struct tok *t)
{
    static const char *const words[] = {"volatile", "restrict", "__restrict", "__restrict__", "register", NULL};
    for (int i = 0; words[i]; i++)
        if (tok_is(t, words[i]))
            return 1;
    return 0;
}

static void join(const struct ptoks *p, const struct tok *skip, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < p->n && used + 1 < cap; i++) {
        if (p->v[i] == skip)
            continue;
        /* "const float *", "unsigned int" */
        int sp = used && ((p->v[i]->kind == T_IDENT && out[used - 1] != '*') ||
                          (punct(p->v[i], '*') && out[used - 1] != '*'));
        int w = snprintf(out + used, cap - used, "%s%.*s", sp ? " " : "", p->v[i]->len, p->v[i]->s);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used >= cap)
        out[cap - 1] = 0;
}

static const char accepted_types[] =
    "a kernel parameter is one of int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, "
    "float, double, bool, tack_f16, tack_bf16, tack_c64 (float _Complex), tack_c128 (double _Complex) (by "
    "value), or a pointer to one of them (an array; const for one the kernel only reads)";

/* Reads one parameter from tokens [begin, end). `pos` counts from 0 for
 * the index. */
static tack_status parse_param(struct scan *s, const char *kname, int pos, int begin, int end,
                               struct tack_param *out)
{
    struct ptoks p = {.n = 0};
    int line = begin < s->t.n ? s->t.v[begin].line : 0;
    if (expand(s, begin, end, 1, &p, 0)) {
        if (s->budget < 0)
            return too_complex();
        return tack_error_set(TACK_EVALUE, "line %d: parameter %d of kernel '%s' is too long to read", line, pos,
                              kname);
    }
    int stars = 0, pointee_const = 0, have_type = 0, unknown = 0, complex = 0;
    tack_dtype dtype = TACK_NDTYPES;
    const struct tok *name = NULL, *bad = NULL;
    for (int i = 0; i < p.n; i++) {
        const struct tok *t = p.v[i];
        tack_dtype d;
        if (t->kind == T_IDENT && tok_is(t, "const")) {
            if (!stars)
                pointee_const = 1;
        } else if (t->kind == T_IDENT && ignored_qualifier(t)) {
        } else if (t->kind == T_IDENT && tok_is(t, "_Complex")) {
            /* C99's complex types, in either order: float _Complex. */
            if (complex)
                bad = t;
            complex = 1;
        } else if (t->kind == T_IDENT && type_word(t, &d)) {
            if (have_type)
                bad = t;
            have_type = 1;
            dtype = d;
        } else if (t->kind == T_IDENT) {
            /* The declarator's name is the last plain identifier; any other
             * is a type word Tack does not know (int, unsigned, struct). */
            if (name)
                unknown = 1;
            name = t;
        } else if (punct(t, '*')) {
            stars++;
        } else if (punct(t, '[') && name) {
            /* float x[] and float x[N] declare a pointer parameter. */
            stars++;
            while (i < p.n && !punct(p.v[i], ']'))
                i++;
        } else {
            bad = t;
        }
    }
    char type[160];
    join(&p, name, type, sizeof type);
    if (p.n == 0)
        return tack_error_set(TACK_EVALUE, "line %d: kernel '%s' has an empty parameter %d", line, kname, pos);
    if (!name)
        return tack_error_set(TACK_EVALUE, "line %d: parameter %d of kernel '%s' ('%s') has no name", line, pos,
                              kname, type);
    if (name->len >= TACK_NAME_MAX)
        return tack_error_set(TACK_EVALUE, "line %d: parameter name '%.40s...' is too long", name->line,
                              name->s);
    if (complex)
        dtype = dtype == TACK_F32 ? TACK_C64 : dtype == TACK_F64 ? TACK_C128 : TACK_NDTYPES;
    if (!have_type || unknown || bad || stars > 1 || dtype == TACK_NDTYPES)
        return tack_error_set(TACK_ETYPE, "line %d: parameter '%.*s' of kernel '%s' has type '%s'; %s",
                              name->line, name->len, name->s, kname, type, accepted_types);
    tok_copy(name, out->name, sizeof out->name);
    out->dtype = dtype;
    out->is_array = stars == 1;
    out->writable = stars == 1 && !pointee_const;
    return TACK_OK;
}

static int is_decl_specifier(const struct tok *t)
{
    static const char *const words[] = {"static", "inline", "__inline", "__inline__", "extern",
                                        "__device__", "__host__", "__forceinline__", NULL};
    for (int i = 0; words[i]; i++)
        if (tok_is(t, words[i]))
            return 1;
    return 0;
}

static tack_status check_return(struct scan *s, const struct def *d, const char *kname)
{
    struct ptoks p = {.n = 0};
    int voids = 0, other = 0;
    if (expand(s, d->ret_begin, d->name, 1, &p, 0) == 0) {
        for (int i = 0; i < p.n; i++) {
            if (tok_is(p.v[i], "__attribute__") && i + 1 < p.n && punct(p.v[i + 1], '(')) {
                int depth = 0;
                for (i++; i < p.n; i++) {
                    depth += punct(p.v[i], '(') - punct(p.v[i], ')');
                    if (depth == 0)
                        break;
                }
            } else if (tok_is(p.v[i], "void")) {
                voids++;
            } else if (!is_decl_specifier(p.v[i])) {
                other++;
            }
        }
    } else if (s->budget < 0) {
        return too_complex();
    } else {
        other = 1;
    }
    if (voids == 1 && !other)
        return TACK_OK;
    char type[160];
    join(&p, NULL, type, sizeof type);
    return tack_error_set(TACK_EVALUE, "line %d: kernel '%s' returns '%s'; a kernel returns void and stores its "
                                       "results through pointer parameters",
                          s->t.v[d->name].line, kname, type);
}

/* Where the definition's parameter list and body lie in the source, and
 * whether a directive sits among the parameters. */
static void record_spans(const struct scan *s, const struct def *d, struct tack_signature *out)
{
    const struct tok *pb = &s->t.v[d->params_begin], *pe = &s->t.v[d->params_end];
    out->params_begin = (size_t)(pb->s - s->src);
    out->params_end = (size_t)(pe->s - s->src);
    out->params_line = pb->line;
    out->params_plain = 1;
    for (int i = d->params_begin; i < d->params_end; i++)
        out->params_plain &= s->t.v[i].dir == 0;
    const struct tok *open = &s->t.v[d->body_open], *close = &s->t.v[d->body_close];
    out->body_begin = (size_t)(open->s - s->src);
    out->body_end = (size_t)(close->s + close->len - s->src);
    out->body_line = open->line;
}

static tack_status read_signature(struct scan *s, const struct def *d, struct tack_signature *out)
{
    const struct tok *nt = &s->t.v[d->name];
    if (nt->len >= TACK_NAME_MAX)
        return tack_error_set(TACK_EVALUE, "line %d: kernel name '%.40s...' is too long", nt->line, nt->s);
    tok_copy(nt, out->name, sizeof out->name);
    out->line = nt->line;
    tack_status st = check_return(s, d, out->name);
    if (st != TACK_OK)
        return st;
    /* Split the parameter list on top-level commas. */
    int pos = 0, begin = d->params_begin, depth = 0;
    out->nparams = 0;
    out->ndim = 0;
    int indices_done = 0;
    struct tack_param index = {{0}, TACK_NDTYPES, 0, 0};
    int empty = begin >= d->params_end;
    for (int i = d->params_begin; i <= d->params_end && !empty; i = scan_next(s, i)) {
        const struct tok *t = &s->t.v[i];
        if (i < d->params_end && (punct(t, '(') || punct(t, '[')))
            depth++;
        else if (i < d->params_end && (punct(t, ')') || punct(t, ']')))
            depth--;
        if (i < d->params_end && !(punct(t, ',') && depth == 0))
            continue;
        int is_index = 0;
        if (!indices_done) {
            int is_void = pos == 0 && scan_next(s, begin) == i && tok_is(&s->t.v[begin], "void");
            if (is_void)
                break;
            st = parse_param(s, out->name, pos, begin, i, &index);
            if (st != TACK_OK && st != TACK_ETYPE)
                return st;
            is_index = st == TACK_OK && !index.is_array && index.dtype == TACK_I64;
            /* Only tack_index marks an index: an int64_t parameter could as
             * well be meant as a scalar argument. */
            for (int k = begin; is_index && k < i; k++)
                if (s->t.v[k].kind == T_IDENT && tok_is(&s->t.v[k], "int64_t"))
                    is_index = 0;
            if (!is_index && pos == 0)
                break;
            if (is_index && out->ndim == TACK_KERNEL_MAX_DIMS)
                return tack_error_set(TACK_EVALUE,
                                      "line %d: kernel '%s' has more than %d index parameters; a kernel takes at "
                                      "most %d index parameters (a domain of 1 to %d dimensions)",
                                      t->line, out->name, TACK_KERNEL_MAX_DIMS, TACK_KERNEL_MAX_DIMS,
                                      TACK_KERNEL_MAX_DIMS);
            indices_done = !is_index;
        }
        if (is_index) {
            memcpy(out->index_names[out->ndim++], index.name, sizeof out->index_names[0]);
        } else {
            if (out->nparams == TACK_KERNEL_MAX_PARAMS)
                return tack_error_set(TACK_EVALUE,
                                      "line %d: kernel '%s' has more than %d parameters after the indices", t->line,
                                      out->name, TACK_KERNEL_MAX_PARAMS);
            st = parse_param(s, out->name, pos, begin, i, &out->params[out->nparams]);
            if (st != TACK_OK)
                return st;
            out->nparams++;
        }
        pos++;
        begin = scan_next(s, i);
    }
    if (pos == 0)
        return tack_error_set(TACK_EVALUE, "line %d: the first parameter of kernel '%s' must be the index, "
                                           "declared `tack_index i` (any name)",
                              nt->line, out->name);
    record_spans(s, d, out);
    return TACK_OK;
}

static tack_status uncertain_error(int line, const char *kname, int cond_line)
{
    return tack_error_set(TACK_EVALUE,
                          "line %d: the signature of kernel '%s' depends on the conditional directive at line %d, "
                          "which Tack cannot evaluate: it follows conditions on numbers and on macros the source or "
                          "the kernel's defines define, not on macros the compiler or a -D flag may define; define "
                          "the macro in the source or in the kernel's defines (Kernel(..., defines={...}); C: "
                          "tack_kernel_options.defines), or write the signature without the conditional",
                          line, kname, cond_line);
}

/* Refuses a kernel whose signature lies in a group follow_conditionals
 * could not settle, and counts the conditionals that cross the body's
 * ends (body_if, body_endif), for a copy of the body alone. */
static tack_status conditionals_check(struct scan *s, const struct def *d, const char *kname,
                                      struct tack_signature *out)
{
    const struct tok *v = s->t.v;
    for (int i = d->ret_begin; i <= d->body_open; i++)
        if (v[i].uncertain && v[i].dir >= 0)
            return uncertain_error(v[d->name].line, kname, v[i].uncertain);
    /* Chains that cross the body's ends: those its #else, #elif or
     * #endif continue from before its '{' (the '{' lies in a taken group,
     * so "#if 1" stands for how the chain began), and those left open at
     * its '}'. */
    int depth = 0, outer_closed = 0;
    out->body_if = 0;
    for (int i = d->body_open; i <= d->body_close; i++) {
        if (v[i].dir <= 0 || !punct(&v[i], '#') || (i > 0 && v[i - 1].dir == v[i].dir) || i + 1 > d->body_close ||
            v[i + 1].dir != v[i].dir)
            continue;
        const struct tok *w = &v[i + 1];
        if (tok_is(w, "if") || tok_is(w, "ifdef") || tok_is(w, "ifndef")) {
            depth++;
        } else if (tok_is(w, "elif") || tok_is(w, "else") || tok_is(w, "endif")) {
            if (depth == 0 && out->body_if < outer_closed + 1)
                out->body_if = outer_closed + 1;
            if (tok_is(w, "endif") && depth == 0)
                outer_closed++;
            else if (tok_is(w, "endif"))
                depth--;
        }
    }
    out->body_endif = depth;
    return TACK_OK;
}

void tack_signature_free(struct tack_signature *sig)
{
    free(sig->body_stub);
    free(sig->body_checked);
    sig->body_stub = sig->body_checked = NULL;
}

tack_status tack_signature_parse(const char *source, const char *name, struct tack_signature *out)
{
    return tack_signature_parse_checked(source, NULL, name, 0, out);
}

/* The head (the kernel's definitions) read before the source, as the
 * compiler reads it: its lines numbered up to 0, so that the source's
 * begin at 1, and offsets taken from the source's first character. */
tack_status tack_signature_parse_checked(const char *source, const char *head, const char *name, int checked,
                                         struct tack_signature *out)
{
    out->body_stub = out->body_checked = NULL;
    if (!source)
        return tack_error_set(TACK_EVALUE, "kernel source is NULL");
    size_t headlen = head ? strlen(head) : 0;
    int head_lines = 0;
    for (size_t i = 0; i < headlen; i++)
        head_lines += head[i] == '\n';
    char *text = NULL;
    if (headlen) {
        size_t srclen = strlen(source);
        if (!(text = malloc(headlen + srclen + 1)))
            return tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
        memcpy(text, head, headlen);
        memcpy(text + headlen, source, srclen + 1);
    }
    struct scan s;
    memset(&s, 0, sizeof s);
    s.src = text ? text + headlen : source;
    tack_status st = lex(text ? text : source, 1 - head_lines, &s.t);
    s.budget = PARSE_BUDGET + PARSE_STEPS_PER_TOKEN * (long)s.t.n;
    if (st == TACK_OK)
        st = tack_follow_conditionals(&s);
    if (st == TACK_OK && s.unbalanced_line)
        st = tack_error_set(TACK_EVALUE,
                            "line %d: the braces in a group of this conditional directive do not balance, and Tack "
                            "cannot evaluate its condition (it follows conditions on numbers and on macros the "
                            "source or the kernel's defines define), so it cannot find the kernel's body as the "
                            "compiler will; balance the braces within each group, or define the macro in the source "
                            "or in the kernel's defines",
                            s.unbalanced_line);
    if (st == TACK_OK)
        st = collect_defines(&s);
    if (st == TACK_OK)
        st = scan_top(&s);
    if (st != TACK_OK)
        goto done;
    const struct def *found = NULL;
    for (int i = s.ndefs - 1; i >= 0 && !found; i--)
        if (!name || tok_is(&s.t.v[s.defs[i].name], name))
            found = &s.defs[i];
    if (!found && !name) {
        st = tack_error_set(TACK_EVALUE, "no function definition found in the kernel source; write one such as "
                                         "`void k(tack_index i, const float *x, float *y) { y[i] = x[i]; }`");
        goto done;
    }
    if (!found) {
        char names[256] = "";
        size_t used = 0;
        for (int i = 0; i < s.ndefs && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s'%.*s'", i ? ", " : "",
                                     s.t.v[s.defs[i].name].len, s.t.v[s.defs[i].name].s);
        st = tack_error_set(TACK_EVALUE, "no function named '%s' is defined in the kernel source; defined: %s", name,
                            s.ndefs ? names : "none");
        goto done;
    }
    char kname[TACK_NAME_MAX];
    tok_copy(&s.t.v[found->name], kname, sizeof kname);
    st = conditionals_check(&s, found, kname, out);
    if (st == TACK_OK)
        st = read_signature(&s, found, out);
    if (st == TACK_OK && s.uncertain_alias)
        st = uncertain_error(s.t.v[found->name].line, out->name, s.uncertain_alias);
    if (st == TACK_OK) {
        out->uses_atomics = tack_names_prefixed(&s.t, "tack_atomic_");
        out->uses_reductions = tack_names_prefixed(&s.t, "tack_reduce_");
        out->extents_used = tack_extents_named(&s.t, out);
        out->reduce_target = tack_reduce_target(&s, found, out);
        st = tack_extents_check(&s, found, out);
    }
    if (st == TACK_OK) {
        out->body_end_line = s.t.v[found->body_close].line;
        if ((out->extents_used || checked) && !(out->body_stub = tack_body_stub(&s, found)))
            st = TACK_ENOMEM;
        if (st != TACK_OK)
            st = tack_error_set(TACK_ENOMEM, "out of memory reading a kernel's source");
        if (st == TACK_OK && checked)
            st = tack_body_checked(&s, found, out, &out->body_checked);
        if (st != TACK_OK)
            tack_signature_free(out);
    }
done:
    free(s.t.v);
    free(s.aliases);
    free(s.defs);
    free(text);
    return st;
}
