/* The code store's files, shared by the kernel layer's files that reach
 * them (store.c, store_dlopen.c). Not installed. */
#ifndef TACK_KERNEL_STORE_H
#define TACK_KERNEL_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../core/internal.h"
#include "../core/toolchain.h"

/* The store's directory `dir` (as tack_cache_dir made it) opened once and
 * checked through the descriptor itself: every file of the store is then
 * reached relative to it. The descriptor is above TACK_STORE_CHILD_FD,
 * close-on-exec. -1 with the thread's message set when the directory is
 * not private or cannot be opened. */
int tack_store_open_dir(const char *dir);
/* Opens `name` in the directory if this user may trust it: a regular
 * file, not a link, that the user owns and nobody else can write. -1
 * otherwise. */
int tack_store_open_trusted(int dirfd, const char *name, struct stat *st);
/* `size` bytes of fd (malloc'd, one more byte for a NUL); NULL on error. */
char *tack_store_read_all(int fd, size_t size);
/* Whether data[0, len) ends in a valid trailer for `name`; *payload is
 * then the size of what precedes it. */
int tack_store_trailer_matches(const char *name, const char *data, size_t len, size_t *payload);
/* Marks a file used now, for the least-recently-used eviction. */
void tack_store_touch(int fd);
/* A name no other thread or process uses in the directory. */
void tack_store_temp_name(char *out, size_t cap, const char *suffix);
/* 1 when all of data went to fd, 0 on an error (errno says). */
int tack_store_write_all(int fd, const void *data, size_t size);
/* The bound on the store's size from TACK_CACHE_MAX (0: none);
 * TACK_ERUNTIME for a value that is not a size. */
tack_status tack_store_max(uint64_t *bytes);
/* Removes the files used longest ago until the store holds at most `max`
 * bytes, never `keep`. Best effort. */
void tack_store_evict(int dirfd, const char *keep, uint64_t max);
/* Ends the file `tmp` with its trailer for `name` and takes away others'
 * write permission; 0 on an error (errno says). */
int tack_store_seal(int dirfd, const char *tmp, const char *name);
/* TACK_ERUNTIME for a file of the store that cannot be written, with the
 * advice that goes with `err`. */
tack_status tack_store_cannot_write(const char *dir, const char *name, int err);

#endif
