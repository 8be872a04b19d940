/* What the host CPU is, as the kernel cache keys code built for it. CPU
 * kernels are compiled for the host's instruction set (-march=native), so
 * an object built on one machine may hold instructions another lacks: a
 * home directory shared between the nodes of a cluster must never hand one
 * node the other's code. The description is what -march=native reads: the
 * vendor, the model and stepping, the brand string, every feature word and
 * the register state the OS saves (XCR0: AVX-512 the CPU has but the OS
 * does not enable cannot be used). Read once, from cpuid, in microseconds:
 * asking the compiler what -march=native means would cost a compiler run
 * in every process that loads a cached kernel. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static void leaf(uint32_t l, uint32_t sub, uint32_t r[4])
{
    r[0] = r[1] = r[2] = r[3] = 0;
    __cpuid_count(l, sub, r[0], r[1], r[2], r[3]);
}

static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static size_t describe(char *out, size_t cap)
{
    uint32_t r[4];
    leaf(0, 0, r);
    uint32_t max = r[0];
    char vendor[13];
    memcpy(vendor, &r[1], 4);
    memcpy(vendor + 4, &r[3], 4);
    memcpy(vendor + 8, &r[2], 4);
    vendor[12] = 0;
    leaf(0x80000000u, 0, r);
    uint32_t max_ext = r[0];
    char brand[49] = "";
    if (max_ext >= 0x80000004u) {
        for (uint32_t i = 0; i < 3; i++) {
            leaf(0x80000002u + i, 0, r);
            memcpy(brand + 16 * i, r, 16);
        }
        brand[48] = 0;
    }
    int n = snprintf(out, cap, "x86 %s '%s'", vendor, brand);
    size_t used = n < 0 ? 0 : (size_t)n;
    uint32_t l1[4] = {0};
    if (max >= 1) {
        leaf(1, 0, l1);
        /* EBX holds the APIC id of the core that ran this: not the CPU's. */
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " 1:%08x.%08x.%08x", l1[0], l1[2], l1[3]);
    }
    if (max >= 7) {
        leaf(7, 0, r);
        uint32_t subs = r[0];
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " 7:%08x.%08x.%08x", r[1], r[2], r[3]);
        if (subs >= 1) {
            leaf(7, 1, r);
            used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " 7.1:%08x.%08x.%08x", r[0], r[1],
                                     r[3]);
        }
    }
    if (max >= 0xd) {
        leaf(0xd, 1, r);
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " d.1:%08x", r[0]);
    }
    if (max_ext >= 0x80000001u) {
        leaf(0x80000001u, 0, r);
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " e1:%08x.%08x", r[2], r[3]);
    }
    /* OSXSAVE: xgetbv exists and says which register state the OS saves. */
    if (l1[2] & (1u << 27))
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " xcr0:%llx", (unsigned long long)xcr0());
    return used;
}

#else
#include <stdlib.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif

/* Elsewhere: the feature words the kernel reports (AT_HWCAP, AT_HWCAP2) and
 * the lines of /proc/cpuinfo that name the CPU (its implementer, part and
 * revision on Arm; its model elsewhere), from the first processor. */
static size_t describe(char *out, size_t cap)
{
    unsigned long hw = 0, hw2 = 0;
#if defined(__linux__) && defined(AT_HWCAP)
    hw = getauxval(AT_HWCAP);
#if defined(AT_HWCAP2)
    hw2 = getauxval(AT_HWCAP2);
#endif
#endif
    int n = snprintf(out, cap, "hwcap %lx %lx", hw, hw2);
    size_t used = n < 0 ? 0 : (size_t)n;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return used;
    static const char *const keys[] = {"CPU implementer", "CPU architecture", "CPU variant", "CPU part",
                                       "CPU revision",    "model name",       "cpu model",   "cpu",
                                       "isa",             "uarch"};
    char line[512];
    int blank_seen = 0;
    while (!blank_seen && fgets(line, sizeof line, f)) {
        if (line[0] == '\n') {
            blank_seen = used > 0;
            continue;
        }
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            size_t kl = strlen(keys[k]);
            size_t at = kl;
            while (line[at] == ' ' || line[at] == '\t')
                at++;
            /* The whole key: "cpu" is not "cpu MHz", which changes. */
            if (!strncmp(line, keys[k], kl) && line[at] == ':') {
                line[strcspn(line, "\n")] = 0;
                used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, " | %s", line);
                break;
            }
        }
    }
    fclose(f);
    return used;
}
#endif

static char description[1024];
static pthread_once_t described = PTHREAD_ONCE_INIT;

static void describe_once(void)
{
    if (describe(description, sizeof description) >= sizeof description)
        description[sizeof description - 1] = 0;
}

const char *tack_host_cpu(void)
{
    pthread_once(&described, describe_once);
    return description;
}
