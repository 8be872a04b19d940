/* A plugin the host loads with dlopen: it makes Tack calls of its own on the
 * host's field. Linked against the shared libtack it is one more user of the
 * host's Tack; built from libtack.a it carries a copy of its own, which must
 * refuse to run beside the host's. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tack/tack.h>

static char said[4096];

static int say(int rc, const char *what, const char *message)
{
    snprintf(said, sizeof said, "%s%s%s", what, message[0] ? ": " : "", message);
    return rc;
}

/* 0 when everything ran; *out says what the plugin saw or why it stopped. */
int plugin_run(tack_device *host_cpu, tack_array *field, long host_arrays, const char **out)
{
    *out = said;
    tack_device *cpu = NULL;
    tack_status status = tack_device_open("cpu", NULL, 0, &cpu);
    if (status != TACK_OK)
        return say(1, tack_status_name(status), tack_last_error());
    if (tack_last_error()[0])
        return say(2, "message left after tack_device_open", tack_last_error());
    /* One registry: the plugin's cpu device is the host's. A copy of Tack of
     * its own would have its own, and must not be handed the host's. */
    if (cpu != host_cpu) {
        snprintf(said, sizeof said, "another device registry: the plugin's cpu is %p, the host's %p (arrays: %ld, the "
                 "host's %ld)", (void *)cpu, (void *)host_cpu, tack_array_live_count(), host_arrays);
        tack_device_release(cpu);
        return 3;
    }
    /* One set of counters. */
    long arrays = tack_array_live_count();
    tack_kernel *add = NULL;
    tack_array *mine = NULL;
    int64_t n = (int64_t)tack_array_size(field);
    if (tack_kernel_compile("void add(tack_index i, float *u, float v) { u[i] += v; }", NULL, cpu, &add) != TACK_OK)
        return say(4, "tack_kernel_compile", tack_last_error());
    if (tack_last_error()[0])
        return say(5, "message left after tack_kernel_compile", tack_last_error());
    tack_arg args[2] = {tack_arg_array(field), tack_arg_f32(100.0f)};
    if (tack_kernel_launch(add, cpu, n, args, 2) != TACK_OK || tack_device_synchronize(cpu) != TACK_OK)
        return say(6, "tack_kernel_launch", tack_last_error());
    if (tack_array_empty(cpu, TACK_F32, 1, &n, 0, &mine) != TACK_OK)
        return say(7, "tack_array_empty", tack_last_error());
    long with_mine = tack_array_live_count();
    if (tack_last_error()[0])
        return say(8, "message left after a launch and an allocation", tack_last_error());
    tack_array_release(mine);
    tack_kernel_release(add);
    tack_device_release(cpu);
    snprintf(said, sizeof said, "same device: %d; arrays: %ld, the host's %ld, with one more %ld", cpu == host_cpu,
             arrays, host_arrays, with_mine);
    return 0;
}
