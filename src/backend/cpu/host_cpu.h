/* The host CPU as the kernel cache keys code built for it (host_cpu.c). */
#ifndef TACK_HOST_CPU_H
#define TACK_HOST_CPU_H

/* A line naming the host CPU's model and every feature that decides what
 * -march=native compiles for; two CPUs that could run different code give
 * different lines. Computed once per process; never fails (a CPU it cannot
 * query gives what it could read, possibly ""). Thread-safe. */
const char *tack_host_cpu(void);

#endif
