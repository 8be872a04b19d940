/* The cpu backend's toolchain slots (toolchain.c). Not installed. */
#ifndef TACK_BACKEND_CPU_TOOLCHAIN_H
#define TACK_BACKEND_CPU_TOOLCHAIN_H

#include "../../core/toolchain.h"

/* The entry points the cpu dialect writes, by name (the dialect's
 * `entries`): the kernel over a range of its domain; the same with every
 * array restrict, where restrict can matter; and, for a kernel whose source
 * uses Tack's atomics, the same with its atomics as plain loads and
 * stores. */
enum { TACK_CPU_ENTRY, TACK_CPU_ENTRY_RESTRICT, TACK_CPU_ENTRY_PLAIN, TACK_CPU_ENTRIES };
extern const char *const tack_cpu_entry_names[TACK_CPU_ENTRIES + 1];

/* kernel_key: the C compiler that would build the code (its words, its
 * file's identity), Tack's flags, TACK_CFLAGS and the host CPU, as a
 * digest; kind TACK_CODE_HOST. TACK_ERUNTIME when TACK_COMPILE_TIMEOUT is
 * not a number of seconds or there is no C compiler (saying what to
 * install); TACK_ENOMEM. */
tack_status tack_cpu_kernel_key(struct tack_compile *job);
/* What CPU kernels are built for (TACK_CPU_TARGET), or why the value is
 * refused, as a line of the backend's report. Never fails. */
void tack_cpu_target_describe(char *out, size_t cap);
/* kernel_compile: runs the C compiler on job->source_file into
 * job->output, in the store's directory job->dirfd, within
 * TACK_COMPILE_TIMEOUT. TACK_ECOMPILE with the compiler's log when the
 * source does not compile (or no object appears); TACK_ERUNTIME when the
 * compiler cannot be run, runs out of time or is interrupted; TACK_ENOMEM.
 * Leaves nothing to free. */
tack_status tack_cpu_kernel_compile(const struct tack_compile *job, struct tack_kernel_code *code);
/* The dialect and the slots on loaded code (cpu.c): kernel_load resolves
 * the entries of host code (TACK_ERUNTIME for code of another kind,
 * TACK_ENOMEM); kernel_launch runs on the pool, complete on return;
 * kernel_expected_ns says what the launches so far measured. */
extern const struct tack_dialect cpu_dialect;
tack_status cpu_kernel_load(tack_device *device, struct tack_kernel_code *code, void **out);
tack_status cpu_kernel_launch(tack_device *device, void *kernel, const struct tack_launch *l);
uint64_t cpu_kernel_expected_ns(void *kernel, int64_t n);
void cpu_kernel_unload(tack_device *device, void *kernel);
/* The table of the above, the cpu backend's toolchain. */
extern const struct tack_backend_toolchain tack_cpu_toolchain;

/* The code's entry points by their index above, resolved by name in its
 * loaded object; NULL for one it does not define. Never fails. */
void tack_cpu_entries(const struct tack_kernel_code *code, tack_host_entry out[TACK_CPU_ENTRIES]);

#endif
