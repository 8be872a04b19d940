/* A plugin that carries a copy of Tack inside it (libtack.a, its symbols
 * kept to itself), for test_one_copy.c. */
#include <stdio.h>

#include "tack/tack.h"

int plugin_call(char *message, size_t cap);
void plugin_release(tack_array *a);

int plugin_call(char *message, size_t cap)
{
    tack_device *cpu = NULL;
    tack_status st = tack_device_open("cpu", NULL, 0, &cpu);
    snprintf(message, cap, "%s", st == TACK_OK ? "" : tack_last_error());
    tack_device_release(cpu);
    return (int)st;
}

void plugin_release(tack_array *a) { tack_array_release(a); }
