/* The library's version, and the one-copy rule: one Tack per process.
 *
 * A second copy of libtack in a process (a plugin linked against
 * libtack.a, or another install's libtack.so loaded by path, beside the
 * one the Python extension or the program uses) has its own device
 * registry, worker pool, counts and released-record quarantine, and a
 * handle made by one copy means nothing to the other's functions: that
 * failure would be silent and far from its cause. So every copy carries a
 * mark that every other copy can see whatever its symbols' visibility (an
 * ELF note, which the loader maps and dl_iterate_phdr lists for every
 * loaded object, executable and static copies included), and when a copy
 * is loaded it looks for the marks of the objects loaded before it. The
 * first copy in the loader's list (the one loaded first) is the process's
 * Tack; any other refuses every fallible call with TACK_ERUNTIME and a
 * message naming both files (TACK_PUBLIC_CALL). The rule needs no state
 * of the process's (no file, no socket, nothing named by the pid), so a
 * fork child inherits the decision with the copies, and an exec starts
 * afresh. The cost on each call is one load of tack_copy_refused. */
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

const char *tack_version(void) { return TACK_VERSION_STRING; }

/* From the headers this libtack was built with: a program compares them
 * with the macros of the headers it was built with. */
int tack_version_number(void) { return TACK_VERSION_NUMBER; }

/* The mark: a note of owner "Tack" and type TACK_COPY_NOTE, its descriptor
 * the version number. Written in assembly because only there can a
 * section be given the note type, which is what makes the linker put it in
 * a PT_NOTE segment; the symbol lets this copy tell its own mark from
 * another's, and keeps the section from being collected as unused. */
#define TACK_COPY_NOTE 0x7ac0
#define TACK_STR_(x) #x
#define TACK_STR(x) TACK_STR_(x)
__asm__(".pushsection .note.tack,\"a\",%note\n"
        ".balign 4\n"
        "tack_copy_note_:\n"
        ".long 5\n"                              /* namesz: "Tack" and its NUL */
        ".long 4\n"                              /* descsz */
        ".long " TACK_STR(TACK_COPY_NOTE) "\n" /* type */
        ".asciz \"Tack\"\n"
        ".balign 4\n"
        ".long " TACK_STR(TACK_VERSION_NUMBER) "\n"
        ".popsection\n"
        ".hidden tack_copy_note_\n");
extern const char tack_copy_note_[];

int tack_copy_refused;
static char refusal[2 * PATH_MAX + 512];

/* Whether the note segment at `start` of `size` bytes holds a Tack mark,
 * and whether it is this copy's (*own). */
static int has_mark(const char *start, size_t size, size_t align, int *own)
{
    size_t at = 0, pad = align == 8 ? 7 : 3;
    while (at + sizeof(ElfW(Nhdr)) <= size) {
        const ElfW(Nhdr) *n = (const void *)(start + at);
        size_t name = (n->n_namesz + pad) & ~pad, desc = (n->n_descsz + pad) & ~pad;
        if (n->n_type == TACK_COPY_NOTE && n->n_namesz == 5 && at + sizeof *n + 5 <= size &&
            !memcmp(start + at + sizeof *n, "Tack", 5)) {
            *own = start + at == tack_copy_note_;
            return 1;
        }
        at += sizeof *n + name + desc;
    }
    return 0;
}

struct copies {
    int seen;          /* copies found so far, in the loader's order */
    int own;           /* this copy's place among them, from 1; 0 until found */
    char first[PATH_MAX];
    char self[PATH_MAX];
};

/* The file an object was loaded from: the executable has no name in the
 * loader's list. */
static void object_file(const char *name, char *out, size_t cap)
{
    if (name && name[0]) {
        snprintf(out, cap, "%s", name);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n < 0)
        snprintf(out, cap, "the program itself");
    else
        out[n] = '\0';
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct copies *c = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        int own = 0;
        if (ph->p_type != PT_NOTE || !has_mark((const char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, ph->p_align,
                                                    &own))
            continue;
        c->seen++;
        if (c->seen == 1)
            object_file(info->dlpi_name, c->first, sizeof c->first);
        if (own) {
            c->own = c->seen;
            object_file(info->dlpi_name, c->self, sizeof c->self);
        }
        break;
    }
    return 0;
}

/* At load, before any call: whether a copy was loaded before this one. */
__attribute__((constructor)) static void claim_process(void)
{
    struct copies c = {0, 0, "", ""};
    dl_iterate_phdr(visit, &c);
    if (c.own <= 1)
        return;
    snprintf(refusal, sizeof refusal,
             "this is a second copy of Tack in the process: %s, loaded after %s, which holds the process's "
             "devices, worker pool and counts (a handle of one copy means nothing to the other); every call of "
             "the second copy is refused. Link or load one libtack only: build the program or plugin against "
             "the shared libtack the first one is (for the Python package's, the flags `python -m tack --libs` "
             "prints), not against libtack.a or another install",
             c.self, c.first);
    tack_copy_refused = 1;
    /* Said once at load too: a plugin that does not check its first
     * call's status would otherwise fail with no word. */
    fprintf(stderr, "tack: %s\n", refusal);
}

tack_status tack_copy_refuse(void) { return tack_error_set(TACK_ERUNTIME, "%s", refusal); }
