/* What the simulated kernel compilers (hiprtc_sim.c, ocloc_sim.c) share:
 * finding the #error a source carries and reporting it where a compiler
 * would. Header only, like sim_common.h. */
#ifndef TACK_SIM_COMPILE_H
#define TACK_SIM_COMPILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first #error directive in `source` (`size` bytes, or up to a NUL
 * before that), reported as a compiler reports it:
 * "<file>:<line>:<column>: error: <text>\n", then `trailer`. The file and
 * line follow the source's #line directives, from `file` and line 1.
 * Returns the report (malloc'd), or NULL when there is no #error or no
 * memory for the report. */
static inline char *sim_find_error(const char *source, size_t size, const char *file, const char *trailer)
{
    int line = 1;
    char name[256];
    snprintf(name, sizeof name, "%s", file);
    const char *stop = source + size;
    for (const char *p = source; p < stop && *p;) {
        const char *end = memchr(p, '\n', (size_t)(stop - p));
        size_t len = end ? (size_t)(end - p) : strnlen(p, (size_t)(stop - p));
        const char *q = p;
        while (q < p + len && (*q == ' ' || *q == '\t'))
            q++;
        int directive_line;
        char directive_file[256];
        if (sscanf(q, "#line %d \"%255[^\"]\"", &directive_line, directive_file) == 2) {
            snprintf(name, sizeof name, "%s", directive_file);
            line = directive_line;
        } else if (!strncmp(q, "#error", 6)) {
            const char *text = q + 6;
            while (text < p + len && (*text == ' ' || *text == '\t'))
                text++;
            size_t n = len + strlen(name) + strlen(trailer) + 64;
            char *msg = malloc(n);
            if (msg)
                snprintf(msg, n, "%s:%d:%d: error: %.*s\n%s", name, line, (int)(q - p) + 2, (int)(p + len - text),
                         text, trailer);
            return msg;
        } else {
            line++;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return NULL;
}

#endif
