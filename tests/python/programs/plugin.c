/* A plugin the host loads with dlopen: it makes Tack calls of its own on the
 * host's field. Linked against the shared libtack it is one more user of the
 * host's Tack; built from libtack.a it carries a copy of its own, which must
 * refuse to run beside the host's. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tack/tack.h>

static char said[8192], seen[8192];
static int left;

/* A message there after a call that succeeded was left behind by it or
 * before it (by the host, on this thread): each counted once. */
static void after_success(void)
{
    const char *message = tack_last_error();
    if (message[0] && strncmp(message, seen, sizeof seen - 1) != 0) {
        snprintf(seen, sizeof seen, "%s", message);
        left++;
    }
}

static int stop(int rc, const char *call)
{
    snprintf(said, sizeof said, "%s failed: %s", call, tack_last_error());
    return rc;
}

/* 0 when everything ran; *out says what the plugin saw or why it stopped. */
int plugin_run(tack_device *host_cpu, tack_array *field, long host_arrays, const char **out)
{
    *out = said;
    snprintf(seen, sizeof seen, "%s", tack_last_error());
    tack_device *cpu = NULL;
    tack_status status = tack_device_open("cpu", NULL, 0, &cpu);
    if (status != TACK_OK) {
        snprintf(said, sizeof said, "%s: %s", tack_status_name(status), tack_last_error());
        return 1;
    }
    after_success();
    /* One registry: the plugin's cpu device is the host's. A copy of Tack of
     * its own would have its own, and must not be handed the host's. */
    if (cpu != host_cpu) {
        snprintf(said, sizeof said, "another device registry: the plugin's cpu is %p, the host's %p (arrays: %ld, the "
                 "host's %ld)", (void *)cpu, (void *)host_cpu, tack_array_live_count(), host_arrays);
        tack_device_release(cpu);
        return 2;
    }
    /* One set of counters. */
    long arrays = tack_array_live_count();
    tack_kernel *add = NULL;
    tack_array *mine = NULL;
    int64_t n = (int64_t)tack_array_size(field);
    if (tack_kernel_compile("void add(tack_index i, float *u, float v) { u[i] += v; }", NULL, cpu, &add) != TACK_OK)
        return stop(3, "tack_kernel_compile");
    after_success();
    tack_arg args[2] = {tack_arg_array(field), tack_arg_f32(100.0f)};
    if (tack_kernel_launch(add, cpu, n, args, 2) != TACK_OK)
        return stop(4, "tack_kernel_launch");
    after_success();
    if (tack_device_synchronize(cpu) != TACK_OK)
        return stop(5, "tack_device_synchronize");
    after_success();
    if (tack_array_empty(cpu, TACK_F32, 1, &n, 0, &mine) != TACK_OK)
        return stop(6, "tack_array_empty");
    after_success();
    long with_mine = tack_array_live_count();
    tack_array_release(mine);
    tack_kernel_release(add);
    tack_device_release(cpu);
    snprintf(said, sizeof said, "same device: %d; arrays: %ld, the host's %ld, with one more %ld; messages left: %d",
             cpu == host_cpu, arrays, host_arrays, with_mine, left);
    return 0;
}
