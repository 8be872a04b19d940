/*
 * The Level Zero backend's toolchain: libocloc, its version, the kernel's
 * cache key and compiling OpenCL C to SPIR-V. See src/backend/level_zero/level_zero.c.
 *
 * The generated source is OpenCL C, which libocloc (oclocInvoke, the
 * library form of Intel's ocloc) compiles in process to SPIR-V for the
 * device's PCI id; the kernel layer keeps it on disk. SPIR-V is what
 * zeModuleCreate takes; the driver finishes it for the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "level_zero.h"

/* OpenCL C 2.0 for its generic address space: the user's functions take
 * unqualified pointers, which the entry's __global ones convert to. */
#define OCLOC_OPTIONS "-cl-std=CL2.0"

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* What both steps check first: a device to compile for, and fp64 when the
 * kernel needs it (checked before compiling: the device would refuse the
 * module anyway, with a less useful message). Then loads libocloc, and
 * names the device as ocloc does: by its PCI device id (as well as by its
 * code name). */
static tack_status prepare(const struct tack_compile *job, const struct tack_ocloc_api **api, char device[32])
{
    if (!job->device)
        return tack_error_set(TACK_EVALUE, "Level Zero kernels compile for a device; kernel '%s' was given none",
                              job->name);
    struct ze_device_state *s = STATE(job->device);
    if (job->uses_f64 && !s->fp64)
        return tack_error_set(TACK_ERUNTIME,
                              "kernel '%s' takes float64 values, but Level Zero device %s (%s) has no fp64 "
                              "support (its module properties lack ZE_DEVICE_MODULE_FLAG_FP64); use float32 "
                              "on this device",
                              job->name, job->device->name, s->device_name);
    snprintf(device, 32, "0x%04" PRIx32, s->device_id);
    return tack_ocloc_load(api);
}

/* libocloc's version, as `ocloc query OCL_DRIVER_VERSION` gives it; ""
 * from a libocloc without that query. */
static void ocloc_version(const struct tack_ocloc_api *api, char *out, size_t cap)
{
    const char *argv[] = {"ocloc", "query", "OCL_DRIVER_VERSION"};
    uint32_t nout = 0;
    uint8_t **outputs = NULL;
    uint64_t *lens = NULL;
    char **names = NULL;
    out[0] = 0;
    int rc = api->oclocInvoke((unsigned)(sizeof argv / sizeof *argv), argv, 0, NULL, NULL, NULL, 0, NULL, NULL, NULL,
                              &nout, &outputs, &lens, &names);
    for (uint32_t i = 0; rc == 0 && outputs && names && lens && i < nout; i++) {
        if (!names[i] || strcmp(names[i], "OCL_DRIVER_VERSION") || !outputs[i])
            continue;
        size_t n = 0;
        while (n < lens[i] && n + 1 < cap && outputs[i][n] && outputs[i][n] != '\n' && outputs[i][n] != '\r')
            n++;
        memcpy(out, outputs[i], n);
        out[n] = 0;
    }
    if (outputs || names || lens)
        api->oclocFreeOutput(&nout, &outputs, &lens, &names);
}

/* The version of the libocloc loaded, asked once: the library stays
 * loaded for the process, and every kernel's key needs it. */
static pthread_mutex_t ocloc_version_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct tack_ocloc_api *ocloc_version_api;
static char ocloc_version_text[128];

void ze_loaded_ocloc_version(const struct tack_ocloc_api *api, char *out, size_t cap)
{
    pthread_mutex_lock(&ocloc_version_lock);
    if (ocloc_version_api != api) {
        ocloc_version(api, ocloc_version_text, sizeof ocloc_version_text);
        ocloc_version_api = api;
    }
    snprintf(out, cap, "%s", ocloc_version_text);
    pthread_mutex_unlock(&ocloc_version_lock);
}

/* ocloc's -options string for `job`: OCLOC_OPTIONS, then the kernel's
 * own options, "-I<dir>" and each option (its definitions are source, a
 * quoted string among them). ocloc hands the
 * string to its OpenCL front end, which splits it at blanks outside
 * double quotes and drops the quotes: a word with blanks is quoted whole,
 * and a double quote, which nothing can carry through, is refused
 * (TACK_EVALUE). *out is malloc'd, the caller's. TACK_ENOMEM. */
static tack_status options_string(const struct tack_compile *job, char **out)
{
    *out = NULL;
    size_t n = 0;
    char **words = tack_build_options_words(job->options, &n);
    if (!words)
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", job->name);
    size_t len = sizeof OCLOC_OPTIONS;
    for (size_t i = 0; i < n; i++) {
        if (strchr(words[i], '"')) {
            tack_status st = tack_error_set(TACK_EVALUE,
                                            "kernel '%s': the option %s holds a double quote, which ocloc's option "
                                            "string cannot pass on to its OpenCL C compiler (it reads quotes as "
                                            "grouping); define a string in the kernel's defines, which are source, "
                                            "or without quotes and make it one with the # operator",
                                            job->name, words[i]);
            free(words);
            return st;
        }
        len += strlen(words[i]) + 3;
    }
    char *text = malloc(len);
    if (!text) {
        free(words);
        return tack_error_set(TACK_ENOMEM, "out of memory compiling kernel '%s'", job->name);
    }
    size_t used = (size_t)snprintf(text, len, "%s", OCLOC_OPTIONS);
    for (size_t i = 0; i < n; i++) {
        const char *quote = strpbrk(words[i], " \t\v\f") ? "\"" : "";
        used += (size_t)snprintf(text + used, len - used, " %s%s%s", quote, words[i], quote);
    }
    free(words);
    *out = text;
    return TACK_OK;
}

/* SPIR-V depends on libocloc (its path, and its version, so that an
 * upgraded ocloc in the same place compiles again), the options and the
 * device. */
tack_status ze_kernel_key(struct tack_compile *job)
{
    const struct tack_ocloc_api *api;
    char device[32], version[128];
    tack_status st = prepare(job, &api, device);
    if (st != TACK_OK)
        return st;
    /* Options ocloc cannot take are refused before anything is kept. */
    char *options, own[65];
    if ((st = options_string(job, &options)) != TACK_OK)
        return st;
    free(options);
    ze_loaded_ocloc_version(api, version, sizeof version);
    tack_build_options_digest(job->options, own);
    snprintf(job->key, sizeof job->key, "%s %s %s %s options %s", tack_library_path(&api->library), version,
             OCLOC_OPTIONS, device, own);
    job->kind = TACK_CODE_SPIRV;
    return TACK_OK;
}

tack_status ze_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *out)
{
    const struct tack_ocloc_api *api;
    char device[32];
    tack_status st = prepare(job, &api, device);
    char *options = NULL;
    if (st == TACK_OK)
        st = options_string(job, &options);
    if (st != TACK_OK)
        return st;
    const char *argv[] = {"ocloc", "compile", "-file", "kernel.cl", "-spv_only", "-device", device,
                          "-options", options};
    const uint8_t *data[1] = {(const uint8_t *)job->source};
    const uint64_t len[1] = {strlen(job->source) + 1};
    const char *names[1] = {"kernel.cl"};
    uint32_t nout = 0;
    uint8_t **outputs = NULL;
    uint64_t *out_len = NULL;
    char **out_names = NULL;
    int rc = api->oclocInvoke((unsigned)(sizeof argv / sizeof *argv), argv, 1, data, len, names, 0, NULL, NULL, NULL,
                              &nout, &outputs, &out_len, &out_names);
    const unsigned char *bin = NULL;
    size_t bin_size = 0;
    const char *log = NULL;
    size_t log_size = 0;
    for (uint32_t i = 0; outputs && out_names && i < nout; i++) {
        if (!out_names[i])
            continue;
        if (ends_with(out_names[i], ".spv")) {
            bin = outputs[i];
            bin_size = (size_t)out_len[i];
        } else if (ends_with(out_names[i], ".log")) {
            log = (const char *)outputs[i];
            log_size = (size_t)out_len[i];
        }
    }
    /* The log need not be NUL-terminated. */
    while (log_size && log && log[log_size - 1] == 0)
        log_size--;
    unsigned char *spirv = NULL;
    if (rc != 0 || !bin || !bin_size) {
        /* The log is ocloc's, freed below: the kernel layer gets a copy. */
        out->failed = 1;
        if (log_size && (out->log = malloc(log_size))) {
            memcpy(out->log, log, log_size);
            out->log_size = log_size;
        }
        st = tack_error_set(TACK_ECOMPILE,
                            "kernel '%s' failed to compile for level_zero (libocloc '%s', ocloc returned %d):\n",
                            job->name, tack_library_path(&api->library), rc);
    } else if (!(spirv = malloc(bin_size))) {
        st = tack_error_set(TACK_ENOMEM, "out of memory holding %zu bytes of SPIR-V", bin_size);
    } else {
        memcpy(spirv, bin, bin_size);
        out->kind = TACK_CODE_SPIRV;
        out->data = spirv;
        out->size = bin_size;
    }
    if (outputs || out_names || out_len)
        api->oclocFreeOutput(&nout, &outputs, &out_len, &out_names);
    free(options);
    return st;
}

/* ocloc's SPIR-V, loaded and launched as modules (module.c); no measured
 * cost, so a launch's hooks are called around every launch. */
const struct tack_backend_toolchain tack_level_zero_toolchain = {
    .dialect = &ze_dialect,
    .kernel_key = ze_kernel_key,
    .kernel_compile = ze_kernel_compile,
    .kernel_load = ze_kernel_load,
    .kernel_launch = ze_kernel_launch,
    .kernel_unload = ze_kernel_unload,
};
