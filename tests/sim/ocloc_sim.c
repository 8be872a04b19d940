/*
 * A simulated libocloc for CI machines without Intel's compiler: the
 * library entry points Tack calls (oclocInvoke, oclocFreeOutput) with no
 * compiler behind them. Select it with TACK_OCLOC_LIBRARY=<its path>.
 *
 * oclocInvoke takes ocloc's command line: "compile -file <name>" must name
 * one of the in-memory sources. A source with an #error directive fails as
 * ocloc does (a nonzero return and a "stdout.log" output whose line
 * "<file>:<line>:<col>: error: <text>" follows the source's #line
 * directives); anything else "compiles" to "<name>.spv": the SPIR-V magic
 * number, then the source, which the simulated Level Zero driver
 * (level_zero_sim.c) accepts and searches for kernel names.
 * "query OCL_DRIVER_VERSION" answers TACK_SIM_OCLOC_VERSION (default
 * 0.0.0-tack-sim) in an output of that name, as ocloc answers it, so that
 * a case can stand for an upgraded ocloc.
 *
 * Test hooks: tack_sim_ocloc_stats(name) returns a counter ("invocations",
 * "failed", "freed"); tack_sim_ocloc_last_args() the last command line,
 * arguments joined by single spaces.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/driver/ocloc.h"
#include "sim_common.h"
#include "sim_compile.h"

TACK_OCLOC_FUNCTIONS(SIM_PROTOTYPE)
SIM_API long long tack_sim_ocloc_stats(const char *name);
SIM_API const char *tack_sim_ocloc_last_args(void);

/* ocloc's OCLOC_INVALID_COMMAND_LINE and OCLOC_BUILD_PROGRAM_FAILURE. */
#define OCLOC_INVALID_COMMAND_LINE (-5150)
#define OCLOC_BUILD_PROGRAM_FAILURE (-11)

#define SIM_STATS(X) X(invocations) X(failed) X(freed)

SIM_DEFINE_STATS(SIM_STATS);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* guards last_args */
static char last_args[2048];

/* Outputs as oclocInvoke hands them back: arrays the caller frees with
 * oclocFreeOutput. */
static int outputs(uint32_t n, const char *const *names, const void *const *data, const uint64_t *sizes,
                   uint32_t *numOutputs, uint8_t ***dataOutputs, uint64_t **lenOutputs, char ***nameOutputs)
{
    *numOutputs = n;
    *dataOutputs = calloc(n, sizeof **dataOutputs);
    *lenOutputs = calloc(n, sizeof **lenOutputs);
    *nameOutputs = calloc(n, sizeof **nameOutputs);
    if (!*dataOutputs || !*lenOutputs || !*nameOutputs)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        (*dataOutputs)[i] = malloc(sizes[i] ? sizes[i] : 1);
        (*nameOutputs)[i] = strdup(names[i]);
        if (!(*dataOutputs)[i] || !(*nameOutputs)[i])
            return -1;
        memcpy((*dataOutputs)[i], data[i], sizes[i]);
        (*lenOutputs)[i] = sizes[i];
    }
    return 0;
}

SIM_API int oclocInvoke(unsigned int numArgs, const char *argv[], const uint32_t numSources,
                        const uint8_t **dataSources, const uint64_t *lenSources, const char **nameSources,
                        const uint32_t numInputHeaders, const uint8_t **dataInputHeaders,
                        const uint64_t *lenInputHeaders, const char **nameInputHeaders, uint32_t *numOutputs,
                        uint8_t ***dataOutputs, uint64_t **lenOutputs, char ***nameOutputs)
{
    (void)numInputHeaders;
    (void)dataInputHeaders;
    (void)lenInputHeaders;
    (void)nameInputHeaders;
    if (!numOutputs || !dataOutputs || !lenOutputs || !nameOutputs)
        return OCLOC_INVALID_COMMAND_LINE;
    *numOutputs = 0;
    *dataOutputs = NULL;
    *lenOutputs = NULL;
    *nameOutputs = NULL;
    const char *file = NULL;
    int compile = 0, query_version = 0;
    COUNT(invocations);
    pthread_mutex_lock(&lock);
    size_t used = 0;
    last_args[0] = 0;
    for (unsigned i = 0; argv && i < numArgs; i++) {
        if (!argv[i])
            break;
        used += (size_t)snprintf(last_args + used, used < sizeof last_args ? sizeof last_args - used : 0, "%s%s",
                                 i ? " " : "", argv[i]);
        if (used >= sizeof last_args)
            used = sizeof last_args - 1;
        if (!strcmp(argv[i], "compile"))
            compile = 1;
        if (!strcmp(argv[i], "query") && i + 1 < numArgs && argv[i + 1] && !strcmp(argv[i + 1], "OCL_DRIVER_VERSION"))
            query_version = 1;
        if (!strcmp(argv[i], "-file") && i + 1 < numArgs)
            file = argv[i + 1];
    }
    pthread_mutex_unlock(&lock);
    const uint8_t *src = NULL;
    size_t src_len = 0;
    for (uint32_t i = 0; file && i < numSources; i++) {
        if (nameSources && nameSources[i] && !strcmp(nameSources[i], file)) {
            src = dataSources[i];
            src_len = (size_t)lenSources[i];
        }
    }
    if (query_version) {
        /* As ocloc query writes it: one output named after the query. */
        char version[128];
        const char *given = getenv("TACK_SIM_OCLOC_VERSION");
        snprintf(version, sizeof version, "%s\n", given && *given ? given : "0.0.0-tack-sim");
        const char *names[] = {"OCL_DRIVER_VERSION"};
        const void *data[] = {version};
        const uint64_t sizes[] = {strlen(version)};
        return outputs(1, names, data, sizes, numOutputs, dataOutputs, lenOutputs, nameOutputs) ? -6 : 0;
    }
    if (!compile || !src) {
        static const char msg[] = "Error: no compile command, or -file names no given source\n";
        const char *names[] = {"stdout.log"};
        const void *data[] = {msg};
        const uint64_t sizes[] = {sizeof msg - 1};
        outputs(1, names, data, sizes, numOutputs, dataOutputs, lenOutputs, nameOutputs);
        return OCLOC_INVALID_COMMAND_LINE;
    }
    char *error = sim_find_error((const char *)src, src_len, file, "\nBuild failed with error code: -11\n");
    if (error) {
        COUNT(failed);
        const char *names[] = {"stdout.log"};
        const void *data[] = {error};
        const uint64_t sizes[] = {strlen(error)};
        outputs(1, names, data, sizes, numOutputs, dataOutputs, lenOutputs, nameOutputs);
        free(error);
        return OCLOC_BUILD_PROGRAM_FAILURE;
    }
    size_t n = 4 + src_len;
    unsigned char *spv = malloc(n);
    if (!spv)
        return -6; /* OCLOC_OUT_OF_HOST_MEMORY */
    const uint32_t magic = 0x07230203u;
    memcpy(spv, &magic, 4);
    memcpy(spv + 4, src, src_len);
    char spv_name[300];
    const char *dot = strrchr(file, '.');
    snprintf(spv_name, sizeof spv_name, "%.*s.spv", (int)(dot ? (size_t)(dot - file) : strlen(file)), file);
    const char *names[] = {spv_name, "stdout.log"};
    const void *data[] = {spv, ""};
    const uint64_t sizes[] = {n, 0};
    int r = outputs(2, names, data, sizes, numOutputs, dataOutputs, lenOutputs, nameOutputs);
    free(spv);
    return r ? -6 : 0;
}

SIM_API int oclocFreeOutput(uint32_t *numOutputs, uint8_t ***dataOutputs, uint64_t **lenOutputs,
                            char ***nameOutputs)
{
    if (!numOutputs || !dataOutputs || !lenOutputs || !nameOutputs)
        return OCLOC_INVALID_COMMAND_LINE;
    for (uint32_t i = 0; i < *numOutputs; i++) {
        if (*dataOutputs)
            free((*dataOutputs)[i]);
        if (*nameOutputs)
            free((*nameOutputs)[i]);
    }
    free(*dataOutputs);
    free(*lenOutputs);
    free(*nameOutputs);
    *dataOutputs = NULL;
    *lenOutputs = NULL;
    *nameOutputs = NULL;
    *numOutputs = 0;
    COUNT(freed);
    return 0;
}

/* The counter called `name`, or -1 for an unknown name. */
SIM_API long long tack_sim_ocloc_stats(const char *name)
{
    return SIM_STAT(name);
}

/* The last command line, arguments joined by spaces; valid until the next
 * invocation. */
SIM_API const char *tack_sim_ocloc_last_args(void)
{
    return last_args;
}
