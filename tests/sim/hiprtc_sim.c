/*
 * A simulated hipRTC for CI machines without ROCm: the calls Tack makes,
 * without a compiler behind them. Select it with
 * TACK_HIPRTC_LIBRARY=<path to this library>.
 *
 * A "compile" checks only what a test needs to see handled: a source with
 * an #error directive fails with HIPRTC_ERROR_COMPILATION and a log line
 * "<file>:<line>: error: <text>" that follows the source's #line
 * directives, as a real compiler's does; an option hipRTC would reject
 * (one not starting with '-') fails with HIPRTC_ERROR_INVALID_OPTION.
 * Anything else "compiles" to a code object that the simulated HIP runtime
 * (hip_sim.c) loads: a header line, then the source, so that
 * hipModuleGetFunction can find the entry by name.
 *
 * Test hooks: tack_sim_hiprtc_stats(name) returns a counter ("programs",
 * "compiles", "failed_compiles", "destroyed"); tack_sim_hiprtc_last_source()
 * the last source compiled; tack_sim_hiprtc_last_options() the last
 * compile's options, one a line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/driver/hiprtc.h"
#include "sim_common.h"
#include "sim_compile.h"

TACK_HIPRTC_FUNCTIONS(SIM_PROTOTYPE)
SIM_API long long tack_sim_hiprtc_stats(const char *name);
SIM_API const char *tack_sim_hiprtc_last_source(void);
SIM_API const char *tack_sim_hiprtc_last_options(void);

struct tack_hiprtc_program_object {
    char *source;
    char *name;
    char *log;
    char *code;
    size_t code_size;
};

#define SIM_STATS(X) X(programs) X(compiles) X(failed_compiles) X(destroyed)

SIM_DEFINE_STATS(SIM_STATS);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* guards last_source, last_options */
static char *last_source;
static char last_options[4096];

SIM_API tack_hiprtc_result hiprtcVersion(int *major, int *minor)
{
    if (!major || !minor)
        return 1;
    *major = 6;
    *minor = 2;
    return TACK_HIPRTC_SUCCESS;
}

SIM_API const char *hiprtcGetErrorString(tack_hiprtc_result r)
{
    switch (r) {
    case TACK_HIPRTC_SUCCESS: return "HIPRTC_SUCCESS";
    case TACK_HIPRTC_ERROR_OUT_OF_MEMORY: return "HIPRTC_ERROR_OUT_OF_MEMORY";
    case TACK_HIPRTC_ERROR_INVALID_OPTION: return "HIPRTC_ERROR_INVALID_OPTION";
    case TACK_HIPRTC_ERROR_COMPILATION: return "HIPRTC_ERROR_COMPILATION";
    default: return "HIPRTC_ERROR_INTERNAL_ERROR";
    }
}

SIM_API tack_hiprtc_result hiprtcCreateProgram(tack_hiprtc_program *prog, const char *src, const char *name,
                                               int numHeaders, const char **headers, const char **includeNames)
{
    (void)headers;
    (void)includeNames;
    if (!prog || !src || numHeaders < 0)
        return 3; /* HIPRTC_ERROR_INVALID_INPUT */
    struct tack_hiprtc_program_object *p = calloc(1, sizeof *p);
    if (!p || !(p->source = strdup(src)) || !(p->name = strdup(name ? name : "default_program"))) {
        if (p)
            free(p->source);
        free(p);
        return TACK_HIPRTC_ERROR_OUT_OF_MEMORY;
    }
    COUNT(programs);
    *prog = p;
    return TACK_HIPRTC_SUCCESS;
}

SIM_API tack_hiprtc_result hiprtcCompileProgram(tack_hiprtc_program p, int numOptions, const char **options)
{
    if (!p || numOptions < 0 || (numOptions && !options))
        return 3;
    COUNT(compiles);
    pthread_mutex_lock(&lock);
    free(last_source);
    last_source = strdup(p->source);
    size_t used = 0;
    last_options[0] = 0;
    for (int i = 0; options && i < numOptions && used < sizeof last_options; i++)
        used += (size_t)snprintf(last_options + used, sizeof last_options - used, "%s%s", i ? "\n" : "",
                                 options[i] ? options[i] : "(null)");
    pthread_mutex_unlock(&lock);
    free(p->log);
    p->log = NULL;
    for (int i = 0; i < numOptions; i++) {
        if (!options[i] || options[i][0] != '-') {
            size_t n = 64 + (options[i] ? strlen(options[i]) : 0);
            if ((p->log = malloc(n)))
                snprintf(p->log, n, "error: unknown option '%s'\n", options[i] ? options[i] : "(null)");
            return TACK_HIPRTC_ERROR_INVALID_OPTION;
        }
    }
    p->log = sim_find_error(p->source, strlen(p->source), p->name, "1 error generated.\n");
    if (p->log) {
        COUNT(failed_compiles);
        return TACK_HIPRTC_ERROR_COMPILATION;
    }
    size_t n = strlen(SIM_HIP_CODE_OBJECT_MAGIC) + strlen(p->source) + 1;
    free(p->code);
    if (!(p->code = malloc(n)))
        return TACK_HIPRTC_ERROR_OUT_OF_MEMORY;
    snprintf(p->code, n, "%s%s", SIM_HIP_CODE_OBJECT_MAGIC, p->source);
    p->code_size = n;
    return TACK_HIPRTC_SUCCESS;
}

SIM_API tack_hiprtc_result hiprtcGetCodeSize(tack_hiprtc_program p, size_t *size)
{
    if (!p || !size || !p->code)
        return 3;
    *size = p->code_size;
    return TACK_HIPRTC_SUCCESS;
}

SIM_API tack_hiprtc_result hiprtcGetCode(tack_hiprtc_program p, char *code)
{
    if (!p || !code || !p->code)
        return 3;
    memcpy(code, p->code, p->code_size);
    return TACK_HIPRTC_SUCCESS;
}

/* The log's size counts its NUL, as hipRTC's does. */
SIM_API tack_hiprtc_result hiprtcGetProgramLogSize(tack_hiprtc_program p, size_t *size)
{
    if (!p || !size)
        return 3;
    *size = p->log ? strlen(p->log) + 1 : 1;
    return TACK_HIPRTC_SUCCESS;
}

SIM_API tack_hiprtc_result hiprtcGetProgramLog(tack_hiprtc_program p, char *log)
{
    if (!p || !log)
        return 3;
    strcpy(log, p->log ? p->log : "");
    return TACK_HIPRTC_SUCCESS;
}

SIM_API tack_hiprtc_result hiprtcDestroyProgram(tack_hiprtc_program *prog)
{
    if (!prog || !*prog)
        return 3;
    struct tack_hiprtc_program_object *p = *prog;
    free(p->source);
    free(p->name);
    free(p->log);
    free(p->code);
    free(p);
    *prog = NULL;
    COUNT(destroyed);
    return TACK_HIPRTC_SUCCESS;
}

/* The counter called `name`, or -1 for an unknown name. */
SIM_API long long tack_sim_hiprtc_stats(const char *name)
{
    return SIM_STAT(name);
}

/* The source of the last compile, or NULL; valid until the next compile. */
SIM_API const char *tack_sim_hiprtc_last_source(void)
{
    pthread_mutex_lock(&lock);
    const char *s = last_source;
    pthread_mutex_unlock(&lock);
    return s;
}

SIM_API const char *tack_sim_hiprtc_last_options(void)
{
    pthread_mutex_lock(&lock);
    const char *s = last_options;
    pthread_mutex_unlock(&lock);
    return s;
}
