/*
 * The one loader of driver and compiler libraries (the CUDA driver, NVRTC,
 * HIP, hipRTC, Level Zero, ocloc): what differs between operating systems
 * in opening a shared library sits behind these functions and nowhere
 * else. Not installed.
 *
 * Each driver table lists its entry points once, with one X-macro shape:
 *
 *     X(return type, field, symbol, required, parameters)
 *
 * `field` is the member of the table, `symbol` the name resolved in the
 * library (an identifier, so that an ABI test can name the vendor's own
 * declaration of it), `required` 1 when the table is unusable without it
 * (its absence fails the load) and 0 when the member may stay NULL and the
 * caller takes a documented fallback.
 */
#ifndef TACK_DRIVER_LIBRARY_H
#define TACK_DRIVER_LIBRARY_H

#include <stddef.h>

/* An open library, or the reason it is not one. */
struct tack_library {
    void *handle;
    /* Where it was found: the file the dynamic linker opened (a full path
     * for a name it searched for), else the name as given. */
    char path[1024];
    char error[1536];
};

/* Opens the library `name` (a path, or a file name the dynamic linker
 * searches for) with its symbols kept to itself, so that they interpose on
 * no one else's. Returns 0 on success; -1 otherwise, when
 * tack_library_error(lib) says why and nothing is open. Either way `lib` is
 * set, and tack_library_close on it is safe. */
int tack_library_open(const char *name, struct tack_library *lib);

/* Stores the address of `symbol` in the function-pointer object at `slot`
 * (`size` bytes, the size of that object). Returns 0; -1 when the library
 * has no such symbol, with *slot set to NULL and tack_library_error(lib)
 * saying so. */
int tack_library_symbol(struct tack_library *lib, const char *symbol, void *slot, size_t size);

/* Closes the library (nothing if it is not open). Driver libraries are
 * never closed once their table is in use: memory and callbacks they
 * handed out may be used until the process exits. */
void tack_library_close(struct tack_library *lib);

/* Why the last open or symbol lookup failed; "" if none did. */
const char *tack_library_error(const struct tack_library *lib);

/* Where the library was found (see struct tack_library); "" before a
 * successful open. */
const char *tack_library_path(const struct tack_library *lib);

#endif
