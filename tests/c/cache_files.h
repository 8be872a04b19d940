/* Cached files made unfit to use, every way the cache must notice: for the
 * tests of each on-disk cache (host objects, PTX, SPIR-V). */
#ifndef TACK_TEST_CACHE_FILES_H
#define TACK_TEST_CACHE_FILES_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The one file in TACK_CACHE_DIR whose name starts with `prefix`, as a
 * path in `out`. Zero when there is none, or more than one. */
static inline int cached_file(const char *prefix, char *out, size_t cap)
{
    const char *dir = getenv("TACK_CACHE_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && !strstr(e->d_name, ".c"))
            found += snprintf(out, cap, "%s/%s", dir, e->d_name) < (int)cap;
    if (d)
        closedir(d);
    return found == 1;
}

/* The ways a cached file can be unfit to use: cut short, damaged, open to
 * other users' writes, another user's, or a link to elsewhere. */
enum { SPOIL_CUT, SPOIL_FLIP, SPOIL_OPEN, SPOIL_FOREIGN, SPOIL_LINK, SPOIL_WAYS };
static const char *const spoil_names[SPOIL_WAYS] = {"cut short", "one byte flipped", "writable by others",
                                                    "owned by another user", "a link"};

/* Spoils the file at `path` one way; *was receives the file's identity
 * before. Zero when that way cannot be set up here (another user's file
 * needs root), having said so. */
static inline int spoil(const char *path, int how, struct stat *was)
{
    if (stat(path, was) != 0)
        return 0;
    char moved[PATH_MAX + 16];
    switch (how) {
    case SPOIL_CUT: return truncate(path, was->st_size / 2) == 0;
    case SPOIL_FLIP: {
        FILE *f = fopen(path, "r+b");
        int ok = f && fseek(f, was->st_size / 3, SEEK_SET) == 0;
        int c = ok ? fgetc(f) : EOF;
        ok = ok && c != EOF && fseek(f, was->st_size / 3, SEEK_SET) == 0 && fputc(c ^ 1, f) != EOF;
        if (f)
            ok = (fclose(f) == 0) && ok;
        return ok;
    }
    case SPOIL_OPEN: return chmod(path, 0666) == 0;
    case SPOIL_FOREIGN:
        if (geteuid() != 0) {
            printf("skip: a cached file owned by another user needs root to set up\n");
            return 0;
        }
        return chown(path, 65534, 65534) == 0;
    case SPOIL_LINK:
        snprintf(moved, sizeof moved, "%s.elsewhere", path);
        return rename(path, moved) == 0 && symlink(moved, path) == 0;
    }
    return 0;
}

/* The file at `path` was built again: another file than `was`, this
 * user's, a regular file nobody else can write. */
static inline int rebuilt(const char *path, const struct stat *was)
{
    struct stat now;
    return lstat(path, &now) == 0 && S_ISREG(now.st_mode) && now.st_ino != was->st_ino &&
           now.st_uid == geteuid() && !(now.st_mode & (S_IWGRP | S_IWOTH));
}

#endif
