/* Kernels: one C-family function over a parallel index, compiled per backend.
 *
 *     void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }
 *
 * Tack reads only the kernel's signature. The first parameters, one to
 * three, are indices (`tack_index`, a 64-bit signed integer); a kernel of
 * two, void lap(tack_index i, tack_index j, ...), runs over a 2-D domain
 * (tack_kernel_launch_nd). The others are scalars of the dtypes' C types
 * (int8_t ... uint64_t, float, double, bool, tack_f16, tack_bf16,
 * tack_c64, tack_c128), passed by value, or pointers to them, bound to
 * arrays. A pointer without `const` before its element type is a
 * parameter the kernel may store through.
 *
 * The prelude of every backend defines the portable names. tack_f16 and
 * tack_bf16 are the compiler's own types where it has them (cpu: _Float16
 * and __bf16 as GCC and Clang provide them; cuda: __half and __nv_bfloat16
 * from the toolkit's cuda_fp16.h and cuda_bf16.h; hip: __half and
 * __hip_bfloat16; level_zero: half, with cl_khr_fp16), and otherwise a
 * two-byte struct that is loaded and stored whole; TACK_F16_NATIVE and
 * TACK_BF16_NATIVE say which. tack_f16_to_float, tack_f16_from_float,
 * tack_bf16_to_float and tack_bf16_from_float convert (round to nearest
 * even) on every backend and compiler. tack_c64 and tack_c128 are C99's
 * float _Complex and double _Complex, on the cpu backend alone. A backend
 * whose compiler lacks a dtype refuses a kernel with such a parameter
 * (TACK_ETYPE, naming the backend). Helper functions,
 * macros and typedefs may come before the kernel; the kernel is the last
 * function defined in the source unless it is named. The same source
 * compiles for every backend: a prelude defines tack_index, the fixed-width
 * integer types and one of TACK_BACKEND_CPU, TACK_BACKEND_CUDA,
 * TACK_BACKEND_HIP and TACK_BACKEND_LEVEL_ZERO, for the rare kernel that
 * must tell them apart. Within one index the kernel's
 * statements run in program order even when two pointers alias; different
 * indices may run in any order and at once (one per SIMD lane, too).
 *
 * Every backend's prelude defines the same atomics, relaxed and returning
 * the value before: tack_atomic_add(p, v) for p an int32_t, uint32_t,
 * int64_t, uint64_t, float or double pointer into an array, and
 * tack_atomic_min(p, v) and tack_atomic_max(p, v) for the four integer
 * types. Each is atomic with respect to every other tack_atomic_* on the
 * same element made at the same time by another index of the launch or
 * by another Tack launch: in this process, from any thread and any kernel
 * (on a GPU, launched on the same device), and in another process, on
 * memory both map (an exportable or imported array, or memory Tack
 * wrapped). It is not atomic with respect to other code writing the same
 * element at the same time, with atomic instructions of its own or
 * without: on the cpu backend a launch that runs on one thread alone (the
 * pool's choice, or TACK_NUM_THREADS=1) performs its kernel's own
 * tack_atomic_* as plain loads and stores when every array it may store
 * through is memory Tack allocated (not exportable, so that no other
 * process maps it) and no other launch with atomics runs in the process;
 * it keeps those launches waiting until it ends. Atomics in a helper
 * function the kernel calls stay locked instructions. On memory a kernel
 * reaches other than through its array parameters (an address passed as
 * an integer), only the guarantee within the process holds.
 */
#ifndef TACK_KERNEL_H
#define TACK_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "tack/array.h"
#include "tack/device.h"
#include "tack/dtype.h"
#include "tack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters after the indices, at most. */
#define TACK_KERNEL_MAX_PARAMS 64
/* Index parameters, at most: a kernel's domain has 1 to 3 dimensions. */
#define TACK_KERNEL_MAX_DIMS 3

typedef struct tack_kernel tack_kernel;

/* One parameter of a kernel (the indices excluded). */
typedef struct tack_kernel_param {
    const char *name; /* as written in the source; valid while the kernel lives */
    tack_dtype dtype; /* the scalar's or the pointed-to element's type */
    int is_array;     /* 1 for a pointer, bound to an array */
    int writable;     /* 1 for a pointer without const: the kernel may store through it */
} tack_kernel_param;

/* TACK_ARG_SCALAR_BITS is a scalar whose float value is taken as it is,
 * without the check for an integer field's bits (tack_arg): for a caller
 * that passes the smallest subnormals on purpose. */
typedef enum tack_arg_kind { TACK_ARG_SCALAR = 0, TACK_ARG_ARRAY = 1, TACK_ARG_SCALAR_BITS = 2 } tack_arg_kind;

/* One launch argument: an array (borrowed for the call) or a scalar of a
 * dtype; build them with the tack_arg_* helpers below. A scalar's .dtype
 * must be the parameter's, and its value is read from the field .dtype
 * names (.value.f64 for TACK_F64: the helper's suffix), never converted:
 * another dtype is TACK_ETYPE naming the field to fill. C cannot tell
 * which field of the union was written, so for a float parameter Tack
 * refuses (TACK_ETYPE, naming the field) the bits a small integer leaves
 * in an integer field: for TACK_F64 the bits of an int64 from 1 to 2^32
 * or -2^32 to -1 (.value.i64 = 3 beside .dtype = TACK_F64), which read as
 * a subnormal below 2.2e-314 or a NaN no arithmetic makes; for TACK_F32
 * those of an int32 from 1 to 2^16 or -2^16 to -1 (below 9.2e-41). Such a
 * value meant as a float (the smallest subnormals) passes as .kind =
 * TACK_ARG_SCALAR_BITS, as the Python package passes every float. A .kind
 * outside tack_arg_kind is TACK_ETYPE naming the value. */
typedef struct tack_arg {
    tack_arg_kind kind;
    tack_dtype dtype; /* scalars only */
    union {
        tack_array *array;
        int8_t i8;
        uint8_t u8;
        int16_t i16;
        uint16_t u16;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        double f64;
        uint8_t boolean;  /* 0 or 1 */
        uint16_t f16;     /* the bits (tack_float16_from_double) */
        uint16_t bf16;    /* the bits (tack_bfloat16_from_double) */
        float c64[2];     /* real, imaginary */
        double c128[2];   /* real, imaginary */
    } value;
} tack_arg;

/* Parses `source` and finds the kernel: the function called `name`, or the
 * last function defined when `name` is NULL. Nothing is compiled yet.
 * On error *out is untouched and the message names the source line:
 * TACK_EVALUE for no such function, a kernel that does not return void or
 * whose first parameter is not `tack_index`, an unnamed parameter or more
 * than TACK_KERNEL_MAX_PARAMS; TACK_ETYPE for a parameter whose type is not
 * one of the dtypes' C types or a pointer to one; TACK_ENOMEM. */
TACK_API tack_status tack_kernel_create(const char *source, const char *name, tack_kernel **out);

/* A kernel's own build options (tack_kernel_create_with); a zeroed struct
 * is the default. Each list holds `n...` strings, never split on spaces:
 * one entry is one word for the compiler. Copied by the call. */
typedef struct tack_kernel_options {
    /* Preprocessor definitions: "NAME" (as 1) or "NAME=VALUE", written as
     * #define lines before the kernel's source (after the backend's
     * prelude): a conditional the signature lies under may test them, and
     * they reach none of Tack's own code. A value holds no line break, opens
     * no comment and does not end with a backslash. */
    const char *const *defines;
    size_t ndefines;
    /* Directories the source's #include "..." searches, in order; a
     * relative one is taken against the working directory of the call
     * that creates the kernel. What the files under each are (names,
     * sizes, times; four levels deep, 4096 entries in all) keys the kept
     * code: an edited header compiles again. */
    const char *const *include_dirs;
    size_t ninclude_dirs;
    /* Further words for the backend's compiler, after TACK_CFLAGS's. */
    const char *const *options;
    size_t noptions;
    /* Nonzero: a checked build, in which every access of the body to an
     * array parameter's elements (a subscript either way round, through
     * parentheses and pointer casts, a dereference, an address) is checked
     * against its extent; a use checks cannot cover (the parameter
     * changed, its address taken) is TACK_EVALUE at creation. The kernels
     * guide says what stays unchecked. TACK_CHECKED=1 in the environment
     * makes every kernel checked. */
    int checked;
} tack_kernel_options;

/* tack_kernel_create with build options (NULL: none), which become part of
 * the key the kernel's code is kept under. Errors as tack_kernel_create;
 * TACK_EVALUE, naming the entry, for a list given as NULL with a nonzero
 * count, a NULL or empty entry, one with a line break, or a definition
 * whose name is not an identifier or whose value would not stay one line
 * (a comment it opens, a final backslash); TACK_ERUNTIME for a relative include
 * directory when the working directory cannot be read. */
TACK_API tack_status tack_kernel_create_with(const char *source, const char *name, const tack_kernel_options *options,
                                             tack_kernel **out);

/* Compiles the kernel for `device`'s backend, if not done yet, and loads it
 * there; a launch does this on first use, so calling it is only a way to
 * pay (and see the errors of) compilation early.
 * cpu: a C compiler (TACK_CC when set; else the first of cc, gcc and clang
 * on PATH; else zig's, see tack_kernel_set_python), with -O3 -march=native
 * -fno-math-errno -funroll-loops -fPIC -shared and then TACK_CFLAGS, run in
 * a process group of its own for at most TACK_COMPILE_TIMEOUT seconds
 * (default 600; 0: no limit; a question such as zig's version gets at most
 * 10 s) and stopped past it as tack_kernel_set_interrupt says, into a
 * shared object cached under TACK_CACHE_DIR (default ~/.cache/tack) keyed
 * by a hash of the generated source, the compiler, the flags, the host
 * CPU's model and features, and Tack's version; a cached object is loaded
 * without running the compiler once it is checked: its recorded size and
 * SHA-256 match, and it is a regular file the user owns that nobody else
 * can write (anything else is compiled again and replaced). The cache
 * directory is made 0700 when missing, and must be the user's and writable
 * by nobody else, with no directory above it through which others could
 * replace it.
 * cuda: NVRTC to a CUBIN for the GPU's own architecture (sm_XY: nothing is
 * compiled when it loads) when an NVRTC knows the architecture and the
 * driver loads that NVRTC's CUBINs (one of the driver's major version or an
 * older one: cuDriverGetVersion); otherwise PTX, for the newest
 * architecture the NVRTC knows up to the GPU's, from an NVRTC whose PTX the
 * driver reads (the driver's own CUDA version or older). A CUBIN the driver
 * refuses is replaced by PTX on the same terms, and the device gets PTX
 * from then on. Of several NVRTCs (see TACK_NVRTC_LIBRARY in the README)
 * the first that fits is used, CUBIN before PTX; when none fits,
 * TACK_ERUNTIME names the NVRTC to install for this driver. The code is
 * cached on disk like host objects and checked the same way, under a key
 * of what it is for (CUBIN or PTX, the architecture, the NVRTC's version).
 * level_zero: libocloc to SPIR-V for the device, cached and checked the
 * same way, under a key of libocloc's path and version (ocloc query
 * OCL_DRIVER_VERSION) and the device. hip: hipRTC to a code object for
 * the device, once per process.
 * On error nothing is kept: TACK_ETYPE for a parameter of a dtype the
 * backend's compiler lacks (as for tack_kernel_generated_source, the
 * message naming the backend); TACK_ECOMPILE for a compile error (the message
 * begins the compiler's log; tack_kernel_compile_log() has all of it, with
 * line numbers of the user's source); TACK_ERUNTIME for a C compiler that ran past its
 * time limit (the message names its command and the limit) or whose wait
 * the thread's interrupt check stopped, for a TACK_COMPILE_TIMEOUT that
 * is not a number of seconds, for no compiler (the message says
 * what to install, or how to set TACK_CC; for a GPU, what to install for
 * its compiler library), for an unusable cache directory or one that is
 * not private (the message names it), or for a backend that cannot run
 * kernels; TACK_ENOMEM. Thread-safe. */
TACK_API tack_status tack_kernel_build(tack_kernel *kernel, tack_device *device);

/* What the kernel's code on `device` is, building it there first as
 * tack_kernel_build does: "cubin sm_90 (CUDA 13.5)" or "ptx compute_121
 * (PTX ISA 9.5, CUDA 13.5)" on cuda, the kind of code elsewhere ("host",
 * "SPIR-V"). The text is owned by the kernel and lives as long as
 * it. On error *out is untouched: TACK_EVALUE for a NULL argument,
 * otherwise as tack_kernel_build. Thread-safe. */
TACK_API tack_status tack_kernel_target(tack_kernel *kernel, tack_device *device, const char **out);

/* create followed by build. On error nothing is kept and *out is untouched. */
TACK_API tack_status tack_kernel_compile(const char *source, const char *name, tack_device *device, tack_kernel **out);

/* Runs the kernel over the index range [0, n).
 * `device` may be NULL: the device of the array arguments. Every check is
 * made before anything runs, and a failed check runs nothing:
 * TACK_ETYPE for a wrong argument count, an array given for a scalar or a
 * scalar for a pointer, a kind that is neither, or a dtype that is not the
 * parameter's or a float's bits that are an integer field's (tack_arg; the
 * message names the parameter); TACK_EVALUE for a kernel, device or array
 * already released (reported, as tack_kernel_release says), a read-only array bound to a
 * parameter the kernel may store through (naming it), arrays from two
 * memory domains or from another domain than `device`, no array and no
 * device, or n < 0. n == 0 runs nothing. Then the kernel is built for the
 * device if needed (errors as tack_kernel_build).
 * On the cpu backend the launch is complete when this returns; the range is
 * split over tack_kernel_num_threads() threads when the kernel's measured
 * cost per index says that pays (TACK_SERIAL_BELOW=<n> fixes the choice
 * instead: serial below n indices, parallel from n on). Tack does not
 * know which elements a kernel touches: indexing an array past its size is
 * the kernel's bug, as in C. On a backend
 * with a queue it is enqueued and this returns at once, unless an array's
 * buffer is shared: then it is complete before returning. TACK_ERUNTIME for
 * a driver failure. Thread-safe. */
TACK_API tack_status tack_kernel_launch(tack_kernel *kernel, tack_device *device, int64_t n, const tack_arg *args,
                                        size_t nargs);

/* Runs the kernel over every index of a domain of `ndim` extents, one per
 * index parameter: for void k(tack_index i, tack_index j, ...) and shape
 * {h, w}, every (i, j) with 0 <= i < h and 0 <= j < w. The last index runs
 * fastest, as in a C array, so that k(i, j) touching a[i * w + j] walks
 * memory in order. tack_kernel_launch(k, d, n, ...) is this with ndim 1.
 * TACK_EVALUE, running nothing, for an ndim that is not the kernel's number
 * of indices, a negative extent, or a domain of more than 2^63 - 1 indices;
 * an empty domain runs nothing; otherwise checks and errors as
 * tack_kernel_launch. */
TACK_API tack_status tack_kernel_launch_nd(tack_kernel *kernel, tack_device *device, int ndim, const int64_t *shape,
                                           const tack_arg *args, size_t nargs);

/* What a caller does around the parts of a launch that may take long, so
 * that its other threads can run meanwhile (Python releases the GIL):
 * building the kernel for the device (a compiler process, or a driver
 * compiling), and running a launch expected to take more than `above_ns`
 * (tack_kernel_expected_ns; a launch whose time is not known yet, and
 * every launch on a backend with a queue, counts as taking longer).
 * begin(context) is called before and end(context) after, on the calling
 * thread, once each or not at all, with no Tack lock held. */
typedef struct tack_launch_hooks {
    uint64_t above_ns;
    void (*begin)(void *context);
    void (*end)(void *context);
    void *context;
} tack_launch_hooks;

/* tack_kernel_launch_nd, calling `hooks` (NULL: none) around what may
 * take long, as tack_launch_hooks says. It decides that from the device
 * and domain the launch runs on, after the checks, so that a short launch
 * costs the caller no second look at its arguments. Errors as
 * tack_kernel_launch_nd; a launch its checks refuse, and an empty one,
 * call no hook. */
TACK_API tack_status tack_kernel_launch_hooked(tack_kernel *kernel, tack_device *device, int ndim, const int64_t *shape,
                                               const tack_arg *args, size_t nargs, const tack_launch_hooks *hooks);
/* tack_kernel_call, calling `hooks` (NULL: none) as
 * tack_kernel_launch_hooked does. Errors as tack_kernel_call. */
TACK_API tack_status tack_kernel_call_hooked(tack_kernel *kernel, const tack_arg *args, size_t nargs,
                                             const tack_launch_hooks *hooks);

/* tack_kernel_launch_nd over the shape every array argument shares, when
 * that shape can mean only one domain: for a kernel of one index a 1-D
 * shape, whose size is n; for a kernel of two or three indices a shape of
 * that rank. Anything else could mean two domains (hist(v, bins): the
 * values or the bins; (N, 3) points: N points or 3N numbers) and runs
 * nothing: TACK_EVALUE, the message naming each array's shape and the
 * calls that take the domain (tack_kernel_launch, tack_kernel_launch_nd),
 * when the arrays' shapes differ, their rank is not the kernel's number
 * of indices, or the kernel has no array parameter. Otherwise errors as
 * tack_kernel_launch_nd; a wrong argument count, a missing array or one
 * of another dtype is reported as such, before the domain. */
TACK_API tack_status tack_kernel_call(tack_kernel *kernel, const tack_arg *args, size_t nargs);

/* Reference counting; both accept NULL. Thread-safe. A release after the
 * last one, or a launch or build after it, is reported on stderr naming the call
 * and the kernel, and aborts in builds with assertions; otherwise it
 * changes nothing (a launch returns TACK_EVALUE). This is certain for the
 * kernels, arrays, buffers and devices released lately (the last 128
 * records a thread freed are held back from malloc, so their addresses go
 * to no new object), and likely for older ones. */
TACK_API tack_kernel *tack_kernel_retain(tack_kernel *kernel);
TACK_API void tack_kernel_release(tack_kernel *kernel);

/* The kernel's function name and source as given. Never fail. */
TACK_API const char *tack_kernel_name(const tack_kernel *kernel);
TACK_API const char *tack_kernel_source(const tack_kernel *kernel);
/* The first index parameter's name ("i"). Never fails. */
TACK_API const char *tack_kernel_index_name(const tack_kernel *kernel);
/* The number of index parameters, 1 to TACK_KERNEL_MAX_DIMS. Never fails. */
TACK_API int tack_kernel_ndim(const tack_kernel *kernel);
/* The name of index parameter `d` (0-based); NULL for d out of range. */
TACK_API const char *tack_kernel_dim_name(const tack_kernel *kernel, int d);
/* Parameters after the indices. Never fails. */
TACK_API int tack_kernel_num_params(const tack_kernel *kernel);
/* Parameter `i` (0-based, after the indices). TACK_EVALUE for i out of range,
 * *out untouched. */
TACK_API tack_status tack_kernel_param_info(const tack_kernel *kernel, int i, tack_kernel_param *out);
/* Index of the first parameter the kernel may store through, -1 if none.
 * Never fails. */
TACK_API int tack_kernel_first_writable(const tack_kernel *kernel);

/* The source a backend compiles: the user's function with a prelude and the
 * backend's entry point around it. `backend` is a backend's name: "cpu"
 * (C), "cuda" (CUDA C), "hip" (HIP) or "level_zero" (OpenCL C). The text is
 * owned by the kernel and lives as long as it. TACK_EVALUE for another
 * name, TACK_ETYPE for a parameter of a dtype the backend's compiler lacks
 * (complex64 and complex128 off the cpu backend, bool on level_zero),
 * TACK_ENOMEM; *out untouched on error. */
TACK_API tack_status tack_kernel_generated_source(tack_kernel *kernel, const char *backend, const char **out);

/* PTX for CUDA, compiled by the first NVRTC Tack finds from the "cuda"
 * generated source, for the virtual architecture `arch` ("compute_90";
 * NULL: the oldest that NVRTC supports, which every newer GPU can run); a
 * launch on a GPU may run other code (tack_kernel_target). The entry point
 * is "tack_kernel_entry" with parameters (int64 n, the kernel's parameters);
 * it covers [0, n) with a grid-stride loop. Cached in memory and under
 * TACK_CACHE_DIR. The text (NUL-terminated; *size counts the NUL) is owned
 * by the kernel. On error *ptx and *size are untouched: TACK_ERUNTIME when
 * NVRTC cannot be loaded (the message says where Tack looked and how to set
 * TACK_NVRTC_LIBRARY); TACK_ECOMPILE for a compile error (the log as for
 * the C compiler); TACK_ENOMEM. Thread-safe. */
TACK_API tack_status tack_kernel_ptx(tack_kernel *kernel, const char *arch, const char **ptx, size_t *size);

/* The whole message of the last failed compilation on this thread: a first
 * line naming the kernel and the compiler, then the compiler's full log
 * (tack_last_error() may hold only its beginning). "" if none; valid until
 * the next failed compilation on this thread, and freed when the thread
 * exits. Never fails. */
TACK_API const char *tack_kernel_compile_log(void);

/* How long a launch of `n` indices of the kernel on `device` is expected
 * to take, in nanoseconds, from what the backend measured of the kernel's
 * earlier launches there (cpu: n times its cost per index, the serial
 * time, which a parallel launch does not exceed). UINT64_MAX when it
 * cannot say: nothing measured yet (no launch there, or the kernel last
 * ran on another device), or a backend that does not measure (those with
 * a queue, whose launch may wait for the device). 0 for n <= 0. A language binding asks it to decide whether a launch is long
 * enough to let other threads run meanwhile (Python: to release the GIL).
 * Never fails; thread-safe. */
TACK_API uint64_t tack_kernel_expected_ns(tack_kernel *kernel, const tack_device *device, int64_t n);

/* Names the Python interpreter Tack runs in: where TACK_CC is unset and no
 * C compiler is on PATH, CPU kernels are built with zig's C compiler from
 * that interpreter's ziglang package (pip install tack-arrays[cc]), run as
 * `<executable> -P -m ziglang cc` (-P: not a module of the working
 * directory's by that name). The Python extension calls it with
 * sys.executable when it is imported; NULL or "" forgets the interpreter.
 * Never fails. Thread-safe. */
TACK_API void tack_kernel_set_python(const char *executable);

/* Lets the calling thread stop a wait for a compiler process: while a
 * build on this thread waits for the C compiler of a cpu kernel (or for
 * a compiler's answer to a version query), `interrupted(context)` is
 * called on this thread whenever a signal interrupts the wait (EINTR) and
 * at least every 100 ms (a signal may have been delivered to another
 * thread). Nonzero stops the wait: the compiler's process group gets
 * SIGTERM, then SIGKILL after 0.5 s, it is reaped, nothing is cached and
 * the call fails with TACK_ERUNTIME ("interrupted"). It stays set for the
 * thread until set again; NULL removes it, and without one a signal does
 * not stop the wait (the time limit still holds). A language binding
 * passes a function that runs its signal handlers (Python's raises
 * KeyboardInterrupt); a program whose handlers only set a flag passes one
 * that reads the flag. Never fails. */
TACK_API void tack_kernel_set_interrupt(int (*interrupted)(void *context), void *context);

/* Threads the cpu backend splits a launch over (TACK_NUM_THREADS, default
 * the cores this process may run on). Never fails. */
TACK_API int tack_kernel_num_threads(void);

/* For tests and diagnostics, counted since the process started, on the
 * cpu backend: the runs on one thread (a launch, or the part of one run on
 * the launching thread alone) of kernels with atomics, on memory Tack
 * allocated, that performed their atomics as plain loads and stores
 * (*plain); those that kept locked atomics because another launch with
 * atomics was running or waiting (*refused); and the launches with locked
 * atomics that waited for a plain one to end (*waited). Any pointer may be
 * NULL. Never fails; thread-safe. */
TACK_API void tack_kernel_atomic_runs(long *plain, long *refused, long *waited);

/* Argument constructors: an array (borrowed for the call; NULL is refused
 * by the launch) or a scalar of each dtype. Never fail. */
static inline tack_arg tack_arg_array(tack_array *a)
{
    tack_arg r;
    r.kind = TACK_ARG_ARRAY;
    r.dtype = TACK_NDTYPES;
    r.value.array = a;
    return r;
}

#define TACK_ARG_SCALAR_FN(suffix, ctype, DT)                                                                \
    static inline tack_arg tack_arg_##suffix(ctype v)                                                        \
    {                                                                                                        \
        tack_arg r;                                                                                          \
        r.kind = TACK_ARG_SCALAR;                                                                            \
        r.dtype = DT;                                                                                        \
        r.value.suffix = v;                                                                                  \
        return r;                                                                                            \
    }
TACK_ARG_SCALAR_FN(i8, int8_t, TACK_I8)
TACK_ARG_SCALAR_FN(u8, uint8_t, TACK_U8)
TACK_ARG_SCALAR_FN(i16, int16_t, TACK_I16)
TACK_ARG_SCALAR_FN(u16, uint16_t, TACK_U16)
TACK_ARG_SCALAR_FN(i32, int32_t, TACK_I32)
TACK_ARG_SCALAR_FN(u32, uint32_t, TACK_U32)
TACK_ARG_SCALAR_FN(i64, int64_t, TACK_I64)
TACK_ARG_SCALAR_FN(u64, uint64_t, TACK_U64)
TACK_ARG_SCALAR_FN(f32, float, TACK_F32)
TACK_ARG_SCALAR_FN(f64, double, TACK_F64)
TACK_ARG_SCALAR_FN(f16, uint16_t, TACK_F16)
TACK_ARG_SCALAR_FN(bf16, uint16_t, TACK_BF16)
#undef TACK_ARG_SCALAR_FN

/* A bool: any nonzero value is true, as C converts it. */
static inline tack_arg tack_arg_bool(int v)
{
    tack_arg r;
    r.kind = TACK_ARG_SCALAR;
    r.dtype = TACK_BOOL;
    r.value.boolean = v != 0;
    return r;
}

/* A complex value from its real and imaginary parts. */
#define TACK_ARG_COMPLEX_FN(suffix, part, DT)                                                                \
    static inline tack_arg tack_arg_##suffix(part re, part im)                                               \
    {                                                                                                        \
        tack_arg r;                                                                                          \
        r.kind = TACK_ARG_SCALAR;                                                                            \
        r.dtype = DT;                                                                                        \
        r.value.suffix[0] = re;                                                                              \
        r.value.suffix[1] = im;                                                                              \
        return r;                                                                                            \
    }
TACK_ARG_COMPLEX_FN(c64, float, TACK_C64)
TACK_ARG_COMPLEX_FN(c128, double, TACK_C128)
#undef TACK_ARG_COMPLEX_FN

#ifdef __cplusplus
}
#endif

#endif
