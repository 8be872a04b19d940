/* The host CPU's description, which the kernel cache's key takes so that
 * code built with -march=native on one CPU is never loaded on another:
 * against what the kernel says of the CPU in /proc/cpuinfo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/cpu/host_cpu.h"
#include "check.h"

/* The value of `key` in the first processor's block of /proc/cpuinfo. */
static int cpuinfo(const char *key, char *out, size_t cap)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        size_t kl = strlen(key);
        if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != '\t' && line[kl] != ':'))
            continue;
        const char *colon = strchr(line, ':');
        if (!colon)
            continue;
        snprintf(out, cap, "%s", colon + 2);
        out[strcspn(out, "\n")] = 0;
        found = 1;
    }
    fclose(f);
    return found;
}

static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return 1;
    return 0;
}

/* Bit `bit` of the word after `tag` ("7:" then three words, the first
 * being leaf 7's EBX) in the description. */
static int bit_of(const char *desc, const char *tag, int word, int bit)
{
    const char *p = strstr(desc, tag);
    if (!p)
        return -1;
    p += strlen(tag);
    for (int w = 0; w < word; w++) {
        p = strchr(p, '.');
        if (!p)
            return -1;
        p++;
    }
    unsigned long v = strtoul(p, NULL, 16);
    return (int)((v >> bit) & 1);
}

static void test_description_names_this_cpu(void)
{
    const char *d = tack_host_cpu();
    CHECK(d && d == tack_host_cpu());
    CHECK(d && strlen(d) > 10);
#if defined(__x86_64__)
    char vendor[64], flags[8192];
    if (!cpuinfo("vendor_id", vendor, sizeof vendor) || !cpuinfo("flags", flags, sizeof flags)) {
        printf("no /proc/cpuinfo: only the description's presence is checked\n");
        return;
    }
    char head[128];
    snprintf(head, sizeof head, "x86 %s ", vendor);
    CHECK(!strncmp(d, head, strlen(head)));
    /* Feature bits the compiler reads for -march=native, as the kernel
     * reports them: leaf 1 ECX (word 1 after "1:"), leaf 7 EBX (word 0). */
    CHECK(bit_of(d, " 1:", 1, 20) == has_flag(flags, "sse4_2"));
    CHECK(bit_of(d, " 1:", 1, 12) == has_flag(flags, "fma"));
    CHECK(bit_of(d, " 7:", 0, 5) == has_flag(flags, "avx2"));
    CHECK(bit_of(d, " 7:", 0, 16) == has_flag(flags, "avx512f"));
    /* The register state the OS saves, without which AVX is unusable. */
    CHECK(strstr(d, " xcr0:") != NULL);
#endif
}

int main(void)
{
    RUN(test_description_names_this_cpu);
    CHECK_DONE();
}
