/* Loading libraries with the dynamic linker (POSIX dlopen). A port to
 * another system replaces this file and no other. */
#include "library.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

int tack_library_open(const char *name, struct tack_library *lib)
{
    memset(lib, 0, sizeof *lib);
    lib->handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        const char *why = dlerror();
        snprintf(lib->error, sizeof lib->error, "%s", why ? why : "dlopen failed");
        return -1;
    }
    const char *found = name;
#if defined(__GLIBC__) || defined(RTLD_DI_LINKMAP)
    /* The linker records the file it opened: for a bare name, the one its
     * search found, which is what a user asking "which driver?" needs. */
    struct link_map *map = NULL;
    if (dlinfo(lib->handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
        found = map->l_name;
#endif
    snprintf(lib->path, sizeof lib->path, "%s", found);
    return 0;
}

int tack_library_symbol(struct tack_library *lib, const char *symbol, void *slot, size_t size)
{
    void *address = lib->handle ? dlsym(lib->handle, symbol) : NULL;
    /* dlsym returns an object pointer; POSIX guarantees it converts to a
     * function pointer, and copying the bytes says so without a cast ISO C
     * would warn about. */
    memset(slot, 0, size);
    if (!address) {
        snprintf(lib->error, sizeof lib->error, "%s has no %s", lib->path[0] ? lib->path : "the library", symbol);
        return -1;
    }
    memcpy(slot, &address, size < sizeof address ? size : sizeof address);
    return 0;
}

void tack_library_close(struct tack_library *lib)
{
    if (lib->handle)
        dlclose(lib->handle);
    lib->handle = NULL;
}

const char *tack_library_error(const struct tack_library *lib) { return lib->error; }

const char *tack_library_path(const struct tack_library *lib) { return lib->path; }
