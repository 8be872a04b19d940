/* One Tack per process: this program links libtack.a, and the plugin it
 * loads carries a copy of its own (one_copy_plugin.c, TACK_ONE_COPY_PLUGIN
 * names it). The plugin's copy, loaded second, refuses its calls, naming
 * both files; the program's copy goes on working, in a fork child too
 * (every case here runs in one). */
#include <dlfcn.h>
#include <limits.h>

#include "check.h"

struct plugin {
    void *handle;
    int (*call)(char *, size_t);
    void (*release)(tack_array *);
};

static int load(struct plugin *p)
{
    const char *path = getenv("TACK_ONE_COPY_PLUGIN");
    p->handle = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!p->handle) {
        fprintf(stderr, "cannot load the plugin (%s): %s\n", path ? path : "TACK_ONE_COPY_PLUGIN unset", dlerror());
        return 0;
    }
    p->call = (int (*)(char *, size_t))dlsym(p->handle, "plugin_call");
    p->release = (void (*)(tack_array *))dlsym(p->handle, "plugin_release");
    return p->call && p->release;
}

static void test_the_plugins_copy_refuses_naming_both_files(void)
{
    struct plugin p;
    CHECK(load(&p));
    if (!p.handle)
        return;
    char message[4096], exe[PATH_MAX], want[3 * PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = '\0';
    CHECK(p.call(message, sizeof message) == TACK_ERUNTIME);
    snprintf(want, sizeof want, "tack_device_open: this is a second copy of Tack in the process: %s, loaded after %s",
             getenv("TACK_ONE_COPY_PLUGIN"), exe);
    CHECK(strstr(message, want) != NULL);
    CHECK(strstr(message, "Link or load one libtack only") != NULL);
    if (!strstr(message, want))
        fprintf(stderr, "wanted: %s\ngot:    %s\n", want, message);
    /* The program's own copy is untouched. */
    tack_device *cpu = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &cpu));
    tack_device_release(cpu);
}

static void test_the_refused_copy_leaves_the_programs_handles_alone(void)
{
    struct plugin p;
    CHECK(load(&p));
    if (!p.handle)
        return;
    tack_device *cpu = NULL;
    CHECK_OK(tack_device_open("cpu", NULL, 0, &cpu));
    int64_t n = 4;
    tack_array *a = NULL;
    CHECK_OK(tack_array_empty(cpu, TACK_F32, 1, &n, 0, &a));
    long alive = tack_array_live_count();
    p.release(a);
    float two = 2;
    CHECK_OK(tack_array_fill(a, &two));
    CHECK(tack_array_live_count() == alive);
    tack_array_release(a);
    tack_device_release(cpu);
}

int main(void)
{
    check_each_leaves_nothing();
    RUN(test_the_plugins_copy_refuses_naming_both_files);
    RUN(test_the_refused_copy_leaves_the_programs_handles_alone);
    CHECK_DONE();
}
