/* Memory as the simulated drivers (cuda_sim.c, hip_sim.c, level_zero_sim.c)
 * keep it, over host pages: fresh allocations for all three, and the table
 * of allocations that HIP's and Level Zero's simulators keep. Header only,
 * like sim_common.h. */
#ifndef TACK_SIM_MEMORY_H
#define TACK_SIM_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- pages --------------------------------------------------------------- */

/* Whole pages that hold n bytes (one page for none). */
static inline size_t sim_page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n == 0)
        n = 1;
    return (n + page - 1) / page * page;
}

/* Maps fresh memory for `size` bytes, in whole pages (*map_size): the
 * storage where the bytes live (*store), filled with 0xA5 because fresh
 * memory holds whatever was there before, and the address callers see
 * (*base). For device memory that is a separate range the host cannot touch
 * (PROT_NONE), so that host code which dereferences a device pointer
 * crashes as it would on a GPU; otherwise it is the storage itself.
 * Returns 0, or -1 with nothing mapped. */
static inline int sim_pages_map(size_t size, int device, uintptr_t *base, char **store, size_t *map_size)
{
    size_t m = sim_page_round(size);
    void *s = mmap(NULL, m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return -1;
    void *va = s;
    if (device) {
        va = mmap(NULL, m, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (va == MAP_FAILED) {
            munmap(s, m);
            return -1;
        }
    }
    memset(s, 0xA5, size);
    *base = (uintptr_t)va;
    *store = s;
    *map_size = m;
    return 0;
}

/* Unmaps what sim_pages_map mapped. */
static inline void sim_pages_unmap(uintptr_t base, char *store, size_t map_size)
{
    if (base != (uintptr_t)store)
        munmap((void *)base, map_size);
    munmap(store, map_size);
}

/* ---- a table of allocations ---------------------------------------------- */

/* An allocation on a simulator's list: the first member of its own record,
 * so that the record is found from it. Device memory is the one kind whose
 * base is not its storage. */
struct sim_region {
    uintptr_t base;   /* the address callers see */
    size_t size;      /* bytes asked for */
    size_t map_size;  /* bytes mapped (whole pages) */
    char *store;      /* where the bytes live */
    struct sim_region *next;
};

/* Maps fresh memory for `size` bytes into `r` (sim_pages_map) and puts it
 * first on `list`. Returns 0, or -1 with nothing mapped or listed. */
static inline int sim_region_add(struct sim_region **list, struct sim_region *r, size_t size, int device)
{
    if (sim_pages_map(size, device, &r->base, &r->store, &r->map_size))
        return -1;
    r->size = size;
    r->next = *list;
    *list = r;
    return 0;
}

/* Takes `r` off `list` and unmaps its memory; the record stays the
 * caller's to free. */
static inline void sim_region_remove(struct sim_region **list, struct sim_region *r)
{
    for (struct sim_region **p = list; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    sim_pages_unmap(r->base, r->store, r->map_size);
}

/* The allocation on `list` that holds all of [addr, addr + n), or NULL. */
static inline struct sim_region *sim_region_find(struct sim_region *list, uintptr_t addr, size_t n)
{
    for (struct sim_region *r = list; r; r = r->next)
        if (addr >= r->base && addr - r->base < r->size && n <= r->size - (addr - r->base))
            return r;
    return NULL;
}

/* The storage behind [addr, addr + n) of an allocation on `list`, or NULL. */
static inline char *sim_region_store(struct sim_region *list, uintptr_t addr, size_t n)
{
    struct sim_region *r = sim_region_find(list, addr, n);
    return r ? r->store + (addr - r->base) : NULL;
}

/* The host address of [addr, addr + n) as the device sees it (unified
 * addressing): the storage of an allocation on `list`, or the address
 * itself for host memory the device reads directly (as a real GPU reads
 * system memory). NULL for a range that runs off device memory. */
static inline char *sim_region_bytes(struct sim_region *list, uintptr_t addr, size_t n)
{
    char *s = sim_region_store(list, addr, n);
    if (s)
        return s;
    for (struct sim_region *r = list; r; r = r->next)
        if (r->base != (uintptr_t)r->store && addr < r->base + r->map_size && addr + n > r->base)
            return NULL;
    return (char *)addr;
}

#endif
