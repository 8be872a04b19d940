/*
 * The kernel toolchain as the backend table carries it: what the kernel
 * layer (src/kernel/) hands a backend and what the backend hands back, and
 * the services the kernel layer offers a backend's toolchain (the compile
 * log, the process runner, C compiler discovery). Not installed.
 *
 * For a kernel on a device, the kernel layer
 *   1. generates source with the backend's dialect: a first line naming the
 *      kernel and backend, the dialect's prelude, the user's source, then
 *      the entry points the dialect's `entry` writes;
 *   2. asks the backend's kernel_key what decides the code besides the
 *      source, and keeps the code in its one trusted store on disk under a
 *      digest of both (src/kernel/store.c), compiling it with the backend's
 *      kernel_compile when the store has none: code of most kinds is bytes
 *      the store reads back, host code a shared object the store checks
 *      and loads (dlopen) itself;
 *   3. loads the code on the device (kernel_load), once per device, and
 *      launches it there (kernel_launch).
 * Each step but the store is the backend's, in its own files, which name
 * nothing outside themselves, this header and their driver tables.
 */
#ifndef TACK_TOOLCHAIN_H
#define TACK_TOOLCHAIN_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "internal.h"

/* ---- what the source says -------------------------------------------- */

#define TACK_NAME_MAX 128

/* The entry point every dialect's generated source defines. */
#define TACK_ENTRY_NAME "tack_kernel_entry"

/* One parameter after the index, as the parser read it. */
struct tack_param {
    char name[TACK_NAME_MAX];
    tack_dtype dtype;
    int is_array;
    int writable;
};

/* The kernel's signature (src/kernel/parse.c). */
struct tack_signature {
    char name[TACK_NAME_MAX];
    int ndim; /* index parameters, 1 to TACK_KERNEL_MAX_DIMS */
    char index_names[TACK_KERNEL_MAX_DIMS][TACK_NAME_MAX];
    int line; /* of the kernel's name in the user's source, from 1 */
    /* The body, '{' to '}', as offsets into the source, and its first line. */
    size_t body_begin, body_end;
    int body_line;
    /* A copy of the body alone keeps the compiler's reading of the
     * conditional directives that cross its ends (a chain that began before
     * its '{', one that ends after its '}') when it is preceded by
     * body_if lines "#if 1" and followed by body_endif lines "#endif": the
     * body's ends lie in groups the compiler takes. */
    int body_if, body_endif;
    /* The parameter list as written, after '(' to before ')', as offsets
     * into the source, and its first line; params_plain is 0 when a
     * directive lies inside it (then it is not copied). */
    size_t params_begin, params_end;
    int params_line, params_plain;
    int nparams;
    struct tack_param params[TACK_KERNEL_MAX_PARAMS];
    /* The source names one of Tack's atomics: an identifier beginning
     * tack_atomic_, anywhere in it (a helper's or a macro's included). */
    int uses_atomics;
    /* The array parameters the source asks the extents of (tack_extent(y,
     * d) or tack_size(y) names y, anywhere in it): bit k for parameter k. */
    uint64_t extents_used;
    /* Set by the kernel layer before it generates source: the hidden
     * parameters the entry takes after the kernel's own, and hands a copy
     * of the kernel that has them too (tack_source_hidden). In order: for
     * each bit k of extents_passed, parameter k's extents (a tack_extents_
     * by value, TACK_EXTENTS_SIZE bytes); then, when checked, the check
     * record (a pointer to TACK_CHECK_RECORD_SIZE bytes of device memory,
     * zeroed before the launch). A kernel without them is generated as
     * before they existed. */
    uint64_t extents_passed;
    int checked;
    /* The line of the body's '}'. */
    int body_end_line;
    /* malloc'd, the signature's (tack_signature_free); NULL when not made:
     * the kernel's own body with no code left in it, only its directives
     * (what the kernel's own function keeps when the entry calls the copy
     * with hidden parameters: tack_extent means nothing there), and the
     * body with every subscript of an array parameter rewritten to a
     * checked access (TACK_AT_ and TACK_REF_, tack_source_hidden). */
    char *body_stub;
    char *body_checked;
    /* The source names a reduction: an identifier beginning tack_reduce_,
     * anywhere in it. */
    int uses_reductions;
    /* The array parameter the body's first sum names as its target, as
     * tack_reduce_add(&y[...], ...) or (y + ..., ...), plus one; 0 when none does
     * (tack_reduce_target). A backend may keep that array's sums apart
     * (the cpu's table places its window there); which target it is
     * decides speed, never a result. */
    int reduce_target;
};

/* The extents a kernel sees of an array (tack_extent): the first
 * TACK_EXTENT_DIMS of them; a body that asks the extents of an array of
 * more dimensions is refused at launch. */
#define TACK_EXTENT_DIMS 4
/* int64 size, ndim, extents[TACK_EXTENT_DIMS]: tack_extents_. */
#define TACK_EXTENTS_SIZE (8 * (2 + TACK_EXTENT_DIMS))
/* uint32 flag (0: no violation), uint32 parameter, int64 index, int64
 * extent, int64 line, uint64 sink (the address an access out of bounds
 * through an address, &y[e], gets: memory of no array, set by the
 * launch), 8 bytes unused: tack_check_record_. */
#define TACK_CHECK_RECORD_SIZE 48

/* Whether the entry of `sig` takes hidden parameters. */
static inline int tack_signature_hidden(const struct tack_signature *sig)
{
    return sig->extents_passed != 0 || sig->checked;
}

/* ---- generated source ------------------------------------------------- */

/* A growing text. A failed allocation marks it failed; everything after
 * is ignored, and tack_source_finish returns NULL. */
struct tack_source {
    char *text;
    size_t len, cap;
    int failed;
};

void tack_source_put(struct tack_source *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* tack_source_put(s, "%s", text), without a format to scan: for the
 * long pieces (a prelude, the user's source). */
void tack_source_append(struct tack_source *s, const char *text);
/* The text (malloc'd, the caller's), or NULL if an allocation failed. */
char *tack_source_finish(struct tack_source *s);

/* What Tack's generated code names a dtype's C type by, after the user's
 * definitions and source: never a name a #define of theirs can take
 * (int32_t, bool), only a keyword (float, double) or a spelling of Tack's
 * own, tack_i8_ ... tack_u64_, tack_bool_, tack_f16 ..., which every
 * dialect's prelude defines before the definitions (TACK_PRELUDE_TYPES in
 * src/backend/prelude.h). NULL for an invalid dtype. */
const char *tack_source_type(tack_dtype dtype);

/* The pieces every entry point shares. Inside an entry, the indices are
 * `tack_i_`, `tack_j_` and `tack_k_` (as many as the kernel has; the last
 * runs fastest) and parameter k is `tack_p<k>_`. */
/* The call of the user's function, or of `function` when not NULL:
 * "name(tack_i_, ..., tack_p0_, ...);\n". */
void tack_source_call(struct tack_source *s, const struct tack_signature *sig, const char *function);
/* The parameters after a leading one, each as ", <type> tack_p<k>_";
 * arrays are pointers with `space` (an address-space qualifier and a
 * space, or "") in front. */
void tack_source_params(struct tack_source *s, const struct tack_signature *sig, const char *space);
/* The text a failed compile-time signature check leaves in the
 * compiler's log, followed by the parameter's position (from 0, indices
 * included) or "all" (tack_source_signature_check). */
#define TACK_SIGNATURE_MARKER "tack_signature_mismatch:"

enum tack_check_language {
    TACK_CHECK_C,
    TACK_CHECK_CXX,
    /* OpenCL C: as C, but per parameter only (it has no function
     * pointers to compare a function's type through). */
    TACK_CHECK_OPENCL
};

/* Writes, after the user's source, compile-time assertions that the
 * kernel's function has exactly the parameter types Tack read (`sig`):
 * C11 _Static_assert with __builtin_types_compatible_p, per parameter
 * over a copy of the user's own parameter list, and on the function's
 * type; C++ static_assert on each parameter of the function's type. The
 * type words Tack writes are kept from macros while they are compared, so
 * that a -D flag that renames one is caught. A failure leaves
 * TACK_SIGNATURE_MARKER in the log. */
void tack_source_signature_check(struct tack_source *s, const struct tack_signature *sig, const char *source,
                                 enum tack_check_language language);

/* For a kernel with hidden parameters (tack_signature_hidden; else
 * nothing), after the signature check and before the entry: the types and
 * helpers tack_extent, tack_size and checked accesses use, and the copy of
 * the kernel the entry calls, `<name>_tack_x_` (tack_source_kernel_copy).
 * tack_source_params and tack_source_call add the hidden parameters. */
void tack_source_hidden(struct tack_source *s, const struct tack_signature *sig, const char *source,
                        enum tack_check_language language);
/* The kernel again as `static inline void <name><suffix>`, with
 * `leading` (parameter declarations each followed by ", ", or "") before
 * the kernel's own, `qualifier` ("restrict " or "") after the `*` of every
 * array parameter and the hidden parameters after them: the user's body
 * (its checked rewrite for a checked kernel) under Tack's own declaration
 * of the parameters. Never fails (an allocation failure marks `s`). */
void tack_source_kernel_copy(struct tack_source *s, const struct tack_signature *sig, const char *source,
                             const char *suffix, const char *qualifier, const char *leading,
                             enum tack_check_language language);

/* How a GPU dialect's entry reaches its indices (tack_source_device_entry). */
struct tack_device_grid {
    /* What comes before TACK_ENTRY_NAME (qualifiers, return type). */
    const char *head;
    /* Before every array parameter's type: its address space, or "". */
    const char *space;
    /* Grid dimension d's first index for this thread, and its stride. */
    const char *index[TACK_KERNEL_MAX_DIMS];
    const char *stride[TACK_KERNEL_MAX_DIMS];
};

/* A device entry over the domain: the grid's head,
 * TACK_ENTRY_NAME(tack_index tack_n0_, ... one extent per index, <params>),
 * and a body of a loop nest, one loop per index, each striding over the
 * launch's threads in one dimension of the grid (dimension 0 is the
 * fastest, which the last index takes). */
void tack_source_device_entry(struct tack_source *s, const struct tack_signature *sig,
                              const struct tack_device_grid *grid);


/* ---- compiled code ---------------------------------------------------- */

/* What a compile makes and a load takes. */
enum tack_code_kind {
    TACK_CODE_NONE = 0,
    TACK_CODE_HOST,       /* a shared object of host code, kept as a file (tack_code_kind_is_file) */
    TACK_CODE_PTX,        /* NUL-terminated PTX text, for any GPU of its virtual architecture on */
    TACK_CODE_CUBIN,      /* a CUDA binary for one GPU architecture */
    TACK_CODE_SPIRV,      /* a SPIR-V module */
    TACK_CODE_OPENCL_C,   /* NUL-terminated OpenCL C source, compiled by the driver at load */
    TACK_CODE_HIP_OBJECT, /* an AMD GPU code object (hipModuleLoadData) */
    TACK_CODE_KINDS
};

/* The kind's name for messages ("PTX"), and the file name extension its
 * code is kept under on disk ("ptx"). Never fail. */
const char *tack_code_kind_name(enum tack_code_kind kind);
const char *tack_code_kind_extension(enum tack_code_kind kind);
/* Whether the kind's code is NUL-terminated text (its size counts the NUL). */
int tack_code_kind_is_text(enum tack_code_kind kind);
/* Whether the kind's code is a file the dynamic loader maps (a shared
 * object): the store keeps and loads it as a file, and hands the backend
 * the loaded object (tack_kernel_code.object), not its bytes. */
int tack_code_kind_is_file(enum tack_code_kind kind);

/* A host entry point: runs the kernel for every index in [begin, end) of
 * its domain of extents shape[0..ndim), flattened in row-major order (a
 * range may begin and end inside a row). args[i] points at the value of
 * the kernel's parameter i (for an array, at its data pointer). */
typedef void (*tack_host_entry)(int64_t begin, int64_t end, const int64_t *shape, void *const *args);

/* One launch, as the kernel layer hands it to a backend's kernel_launch. */
struct tack_launch {
    int ndim;             /* the kernel's number of indices */
    const int64_t *shape; /* ndim extents, each > 0; the last index runs fastest */
    int64_t n;            /* their product: the indices in all */
    void *const *args;    /* args[i] points at the value of parameter i (an array's data pointer) */
    /* Every array the kernel may store through is private memory
     * (tack_buffer_is_private) and overlaps no other array argument: code
     * that assumes no aliasing (restrict) computes the same. Checked for
     * launches of more than one index only; 0 for one. */
    int disjoint;
    /* Set only for a kernel whose source uses Tack's atomics: no array it
     * may store through is memory anything else can write (each is
     * private: tack_buffer_is_private), so that only this process's
     * launches can update it at the same time. */
    int private_memory;
};

/* Code for one backend, as its kernel_compile makes it and its kernel_load
 * takes it. Its entry points are named `entries` (TACK_ENTRY_NAME first,
 * then the variants the dialect may write: a backend's load resolves each
 * by name, and one the code lacks is not an error). The first, called
 * `entry`, takes (int64 n, the kernel's parameters) and covers [0, n),
 * except host code's, each a tack_host_entry. */
struct tack_kernel_code {
    enum tack_code_kind kind;
    const void *data; /* `size` bytes (text: NUL-terminated, the NUL counted) */
    size_t size;
    const char *entry;
    /* File code (tack_code_kind_is_file): the object as the store loaded
     * it (a dlopen handle, the store's to close), in place of data. */
    void *object;
    /* The kernel's parameters after the index, then its hidden ones
     * (tack_signature_hidden), and each one's bytes. */
    int nargs;
    const size_t *arg_sizes;
    const char *name; /* the kernel's, for messages */
    int uses_f64;     /* a parameter is double or double *: needs fp64 */
    /* Set by a compile or load that fails because the code does not build
     * (as opposed to a missing compiler or a driver fault), with the
     * compiler's or driver's log when there is one (malloc'd, `log_size`
     * bytes, handed over): the kernel layer makes the message and the log
     * the thread's compile log (tack_kernel_compile_log). */
    int failed;
    char *log;
    size_t log_size;
    /* Set by a load the driver refused for what the code is (its kind, its
     * version, its architecture): not a fault, and not the source's doing.
     * The kernel layer then asks kernel_key once more, which chooses other
     * code after such a refusal, and loads that. */
    int refused;
    /* Written by a load that succeeds: what the code is, as
     * tack_kernel_target says it ("cubin sm_90 (CUDA 13.5)"); left empty,
     * the kind's name says it. */
    char target[96];
    /* The entry points' names, `entry` first (the dialect's `entries`). */
    const char *const *entries;
    int nentries;
};

/* A kernel's own build options (tack_kernel_options), as the kernel layer
 * keeps them: its own copies, checked (src/kernel/options.c). */
struct tack_build_options {
    char **defines; /* "NAME" or "NAME=VALUE" */
    size_t ndefines;
    char **include_dirs;
    size_t ninclude_dirs;
    char **options; /* one compiler word each */
    size_t noptions;
    int checked;
    /* All of the above as one text, for the key code is kept under. */
    char *text;
    /* The definitions as source, "#define NAME VALUE\n" each (VALUE 1 for
     * a bare NAME, as -D has it); NULL for none. The kernel layer writes
     * them after the backend's prelude and before the user's source
     * (tack_generate), and reads the signature after them: so they reach
     * the user's code and its #if, and never Tack's own definitions. */
    char *head;
};

/* The options as words for a compiler that spells them as the C
 * compilers do: "-I<dir>" for each include directory (absolute: relative
 * ones were resolved when the kernel was made), then each option as given
 * (the definitions are source: `head`); *count words, then NULL. One
 * allocation: free() releases it. NULL out of memory. NULL options are
 * none, here and in the digest. */
char **tack_build_options_words(const struct tack_build_options *o, size_t *count);
/* A digest of the options, for a backend's key: their text, and what the
 * files under each include directory are (names, sizes, times), so that
 * an edited header compiles again. Never fails. */
void tack_build_options_digest(const struct tack_build_options *o, char out[65]);

/* One compile, as the kernel layer asks a backend for it. */
struct tack_compile {
    const char *name;   /* the kernel's, for messages */
    const char *source; /* generated by the backend's dialect, NUL-terminated */
    int uses_f64;
    uint32_t dtypes; /* 1u << d for each dtype d of a parameter */
    /* The kernel's own options; never NULL. A backend's compile passes
     * the definitions, include directories and options to its compiler;
     * the kernel layer keys kept code by them (options->text). */
    const struct tack_build_options *options;
    /* The device the code is for; NULL for code asked for by target alone
     * (tack_kernel_ptx), which only a dialect with `offline` code makes. */
    tack_device *device;
    /* A target the caller named ("compute_90"); NULL: the device's, or,
     * without a device, the compiler's oldest. */
    const char *target;
    /* Filled by kernel_key: the kind of code the compile will make, and
     * what decides that code besides the source (the compiler and its
     * version, the options, the target), as text. */
    enum tack_code_kind kind;
    char key[1024];
    /* Filled by kernel_key for kernel_compile: which of the backend's
     * compilers makes the code (the backend's own numbering), so that the
     * compile is the one the key describes. */
    int compiler;
    /* Filled by the kernel layer for file code (tack_code_kind_is_file),
     * which kernel_compile writes into the store rather than returning it:
     * the store's directory, open as `dirfd` (a program that tack_run
     * gives it reaches it as /proc/self/fd/TACK_STORE_CHILD_FD), the name
     * there of the generated source, written already, and the name of the
     * file to write. The store seals and publishes that file once
     * kernel_compile returns TACK_OK; on an error it removes it. */
    int dirfd;
    const char *source_file, *output;
};

/* The blocks (work-groups) a GPU launch of `l` runs as: `threads` per
 * block, along the last index for one or two dimensions, shaped 32 wide
 * for more (a warp along the contiguous index), and a grid of blocks
 * covering the domain, each of its dimensions at most `cap` (a device
 * entry's loops stride over the rest). Dimension 0 of both is the last
 * index's. Never fails. */
void tack_launch_geometry(const struct tack_launch *l, uint32_t threads, uint64_t cap, uint32_t block[3],
                          uint32_t grid[3]);

/* The values a device entry takes, in order: the domain's extents (one
 * each; n alone for one index), then the kernel's parameters. `out` has
 * room for TACK_KERNEL_MAX_DIMS + nargs pointers; returns how many it
 * filled. Never fails. */
int tack_launch_params(const struct tack_launch *l, int nargs, void **out);

/* ---- the dialect ------------------------------------------------------ */

struct tack_dialect {
    /* The backend's name, as the generated source's first line says it and
     * its cached code's file names begin. */
    const char *name;
    /* What the user's source may assume: tack_index, the fixed-width
     * integer types, TACK_BACKEND_<NAME>; and whatever the entry needs
     * before the user's source. */
    const char *prelude;
    /* Optional: writes what the entry needs of this kernel before the
     * user's source (after the prelude): definitions whose names no macro
     * of the user's (a per-kernel define, a #define of the source's own)
     * may reach, as it would text written after the source. */
    void (*head)(struct tack_source *out, const struct tack_signature *sig);
    /* The language of the compile-time checks the kernel layer writes
     * after the user's source (tack_source_signature_check, then
     * tack_source_hidden), before the entry. */
    enum tack_check_language language;
    /* Writes the entry point, after those checks (`source`, the user's,
     * it may copy from): TACK_ENTRY_NAME, which calls the kernel
     * (tack_source_call) for each index. NULL: the device entry over
     * `grid` (tack_source_device_entry). */
    void (*entry)(struct tack_source *out, const struct tack_signature *sig, const char *source);
    struct tack_device_grid grid;
    /* The kind of code the backend compiles with no device (for a target
     * named by the caller, or the compiler's oldest), TACK_CODE_NONE if it
     * compiles only for a device. */
    enum tack_code_kind offline;
    /* Optional (NULL: TACK_ENTRY_NAME alone): the names of the entry
     * points `entry` may write, TACK_ENTRY_NAME first, NULL-terminated. */
    const char *const *entries;
    /* Optional (NULL: the dialect has a type for every dtype). Indexed by
     * dtype: why the backend's compiler has no type for that dtype's
     * parameters, NULL where it has one. A kernel with such a parameter is
     * TACK_ETYPE on the backend, with the reason. */
    const char *const *lacks;
};

/* ---- services of the kernel layer (src/kernel/) to backends ------------ */

/* The thread's compile log (compile_log.c): `len` bytes of text, NULL to
 * empty it. */
void tack_compile_log_set(const char *text, size_t len);
/* A failed compilation: the message formatted from `fmt`, then the
 * compiler's log (`log_len` bytes, may be NULL), becomes the compile log and
 * the error message. Returns TACK_ECOMPILE. Out of memory, the compile log is
 * emptied and the message still carries both. */
tack_status tack_compile_failed(const char *log, size_t log_len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Running a program that may hang (run.c): against a deadline, in a
 * process group of its own, stopped when the thread's interrupt check
 * (tack_kernel_set_interrupt) says so. */

/* The descriptor a program run with a directory reaches it by, as
 * /proc/self/fd/TACK_STORE_CHILD_FD: the directory Tack checked, whatever
 * its path names by then. */
#define TACK_STORE_CHILD_FD 3

/* How a tack_run ended. */
enum tack_run_end { TACK_RUN_EXITED, TACK_RUN_NOT_STARTED, TACK_RUN_TIMED_OUT, TACK_RUN_INTERRUPTED };

struct tack_run_result {
    enum tack_run_end end;
    int status;   /* TACK_RUN_EXITED: the exit status, 128 + the signal that ended it */
    int err;      /* TACK_RUN_NOT_STARTED: why (an errno) */
    char *output; /* standard output and error together, NUL-terminated, malloc'd; may be NULL */
    size_t output_len;
};

/* Runs argv (argv[0] a path), collecting its standard output and error,
 * for at most limit_ns (-1: no limit). A run past its limit, or whose wait
 * the interrupt check stops, has its process group ended and reaped
 * before this returns. A `dirfd` other than -1 (above TACK_STORE_CHILD_FD)
 * is the program's TACK_STORE_CHILD_FD. Never fails: *r says how it went
 * (r->output malloc'd, the caller's). */
void tack_run(char *const *argv, int64_t limit_ns, int dirfd, struct tack_run_result *r);
/* The limit on one compile in ns, -1 for none (TACK_COMPILE_TIMEOUT).
 * TACK_ERUNTIME for a value that is not a number of seconds. */
tack_status tack_compile_limit(int64_t *ns);
/* A question's limit (`--version`): 10 s or the compile limit if shorter. */
int64_t tack_query_limit(void);
/* "600 s": a limit as TACK_COMPILE_TIMEOUT would say it. */
void tack_limit_text(int64_t ns, char *out, size_t cap);
/* The first line of `text`, without surrounding blanks. */
void tack_first_line(const char *text, char *out, size_t cap);
/* Why a question (`asked`) put to a program got no answer. */
void tack_run_trouble(const struct tack_run_result *r, const char *asked, char *out, size_t cap);

/* SHA-256 (sha256.c), for keys. */
typedef struct tack_sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t used;
} tack_sha256;
void tack_sha256_init(tack_sha256 *s);
void tack_sha256_update(tack_sha256 *s, const void *data, size_t len);
/* Hashes a string and its terminating NUL, so that fields cannot run together. */
void tack_sha256_field(tack_sha256 *s, const char *text);
void tack_sha256_hex(tack_sha256 *s, char out[65]);

/* The advice that goes with a file operation of the store that failed
 * with `err` (store.c): a process out of descriptors or a full disk is not
 * helped by another cache directory. Never fails. */
const char *tack_store_advice(int err);

/* The C compiler host code is built with (compilers.c). */
struct tack_c_compiler {
    char *spec;  /* TACK_CC as given (or a compiler's name), split in place into argv; malloc'd */
    char **argv; /* argc words, then NULL; malloc'd */
    int argc;
    char path[4096]; /* argv[0] as run: found on PATH, or the interpreter that runs zig */
    struct stat st;
    /* What else tells this compiler from another that the key must: zig's
     * version, run by an interpreter whose file says nothing of it. */
    char identity[96];
    const char *display; /* its name in messages */
    char how[PATH_MAX + 160]; /* how it was chosen, for reports */
};
/* TACK_CC (every word of it), a system compiler on PATH, or zig's.
 * TACK_ERUNTIME when there is none, saying what to install; TACK_ENOMEM.
 * On error nothing is left to free; on success tack_c_compiler_free
 * releases c. */
tack_status tack_c_compiler_find(struct tack_c_compiler *c);
void tack_c_compiler_free(struct tack_c_compiler *c);
/* The compiler host kernels would be built with now, as
 * tack_backend_describe reports it: its file, version and how it was
 * chosen, or why there is none. Never fails. */
void tack_c_compiler_describe(tack_component_report *out);
/* The blank-separated words of `s`, and `s` split into them in place
 * (words has tack_words_count(s) slots). */
int tack_words_count(const char *s);
int tack_words_split(char *s, char **words);

#endif
