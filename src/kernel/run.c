/* Running a program Tack does not trust to finish: a compiler, or a
 * question put to one. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"
#include "store.h"

extern char **environ;

/* ---- running the compiler --------------------------------------------------
 *
 * A compiler is a program like any other input: it may hang (a compiler
 * reading a file on a dead network mount, a wrapper waiting for a licence
 * server, a TACK_CC that never exits). So it runs against a deadline on the
 * monotonic clock, in a process group of its own so that what it started
 * (cc1, as, ld, the shell's children) goes with it, and the wait lets the
 * calling thread's interrupt check run when a signal arrives. */

/* A compile's limit unless TACK_COMPILE_TIMEOUT says otherwise, and the
 * most a question such as `--version` may take. */
#define COMPILE_LIMIT_S 600
#define QUERY_LIMIT_S 10
/* While waiting, the interrupt check runs at least this often, since a
 * signal may have been delivered to another thread of the process, and a
 * compiler that has exited is noticed even though something it left
 * running still holds its output open. */
#define TICK_MS 100
/* A compiler stopped early gets SIGTERM first, which lets gcc and clang
 * delete their temporary files as they do on Ctrl-C; whatever of its
 * process group still runs this much later is killed. */
#define GRACE_MS 500
/* The most of a compiler's output that is kept. */
#define MAX_OUTPUT ((size_t)16 << 20)

static _Thread_local int (*interrupt_check)(void *context);
static _Thread_local void *interrupt_context;

void tack_kernel_set_interrupt(int (*interrupted)(void *context), void *context)
{
    interrupt_check = interrupted;
    interrupt_context = interrupted ? context : NULL;
}

static int interrupted_now(void) { return interrupt_check && interrupt_check(interrupt_context); }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The limit on one compile in ns, -1 for none: TACK_COMPILE_TIMEOUT
 * seconds (0: none), else COMPILE_LIMIT_S. TACK_ERUNTIME for a value that
 * is not a number of seconds. */
tack_status tack_compile_limit(int64_t *ns)
{
    const char *text = getenv("TACK_COMPILE_TIMEOUT");
    *ns = (int64_t)COMPILE_LIMIT_S * 1000000000;
    if (!text || !*text)
        return TACK_OK;
    char *end;
    errno = 0;
    double s = strtod(text, &end);
    while (end != text && (*end == ' ' || *end == '\t'))
        end++;
    /* !(s >= 0) is also true of NaN; 1e9 s keeps the sum in range. */
    if (errno || end == text || *end || !(s >= 0) || s > 1e9)
        return tack_error_set(TACK_ERUNTIME,
                              "TACK_COMPILE_TIMEOUT=%s is not a number of seconds: set it to the longest a "
                              "kernel's compile may take (for example 600), 0 for no limit, or unset it for the "
                              "default of %d s",
                              text, COMPILE_LIMIT_S);
    *ns = s == 0 ? -1 : (int64_t)(s * 1e9) + 1;
    return TACK_OK;
}

/* A question's limit: QUERY_LIMIT_S, or the compile limit when that is
 * shorter (one that cannot be read leaves the question its own). */
int64_t tack_query_limit(void)
{
    int64_t compile, query = (int64_t)QUERY_LIMIT_S * 1000000000;
    if (tack_compile_limit(&compile) != TACK_OK)
        return query;
    return compile >= 0 && compile < query ? compile : query;
}

/* "600 s", "0.5 s": a limit as TACK_COMPILE_TIMEOUT would say it. */
void tack_limit_text(int64_t ns, char *out, size_t cap) { snprintf(out, cap, "%.3g s", (double)ns / 1e9); }

/* 1 once `pid` has exited, leaving it to be reaped (so that its process
 * group's number cannot be taken by another). A child that SIGCHLD's
 * disposition reaped already counts as exited. */
static int has_exited(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno != EINTR;
    return info.si_pid == pid;
}

static void sleep_ms(int ms) { (void)poll(NULL, 0, ms); }

/* Ends the process group `pid` leads: SIGTERM, GRACE_MS for the leader to
 * go, then SIGKILL for everything of the group still there. */
static void stop_group(pid_t pid)
{
    (void)kill(-pid, SIGTERM);
    for (int waited = 0; waited < GRACE_MS && !has_exited(pid); waited += 5)
        sleep_ms(5);
    (void)kill(-pid, SIGKILL);
}

/* Waits for `pid`'s exit status. */
static int reap(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno == EINTR)
            continue;
        /* SIGCHLD ignored by the application: the child was reaped for us
         * and its status is lost; the output file tells. */
        return 0;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Appends what `fd` has to *r; 0 at end of file or on an error. */
static int take_output(int fd, struct tack_run_result *r, size_t *cap)
{
    char sink[4096];
    for (;;) {
        char *into = sink;
        size_t room = sizeof sink;
        if (r->output_len + 4096 > *cap && *cap < MAX_OUTPUT) {
            size_t ncap = *cap ? *cap * 2 : 8192;
            char *nb = realloc(r->output, ncap);
            if (nb) {
                r->output = nb;
                *cap = ncap;
            }
        }
        /* Past what is kept (or out of memory) the rest is read and
         * dropped, so that the compiler never blocks on a full pipe. */
        if (r->output && r->output_len + 1 < *cap) {
            into = r->output + r->output_len;
            room = *cap - r->output_len - 1;
        }
        ssize_t got = read(fd, into, room);
        if (got > 0) {
            if (into != sink)
                r->output_len += (size_t)got;
            continue;
        }
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 1;
        return 0;
    }
}

/* Runs argv (argv[0] a path), collecting its standard output and error,
 * for at most limit_ns (-1: no limit). A run that passes its limit, or
 * whose wait the thread's interrupt check stops, has its process group
 * ended (stop_group) and reaped before this returns: no process of it is
 * left running, and none is left unreaped. A `dirfd` other than -1 (above
 * CHILD_DIR_FD) is the program's CHILD_DIR_FD, and stays open for what it
 * starts. */
/* Starts argv in a process group of its own, its standard output and
 * error into a pipe whose reading end goes to *out (non-blocking), `dirfd`
 * (unless -1) its TACK_STORE_CHILD_FD. 0, or the errno that kept it from
 * starting. */
static int spawn(char *const *argv, int dirfd, pid_t *pid, int *out)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    if (dirfd >= 0)
        posix_spawn_file_actions_adddup2(&fa, dirfd, TACK_STORE_CHILD_FD);
    /* Its own process group, to be ended whole; no signal blocked, and the
     * signals that end it at their default, whatever this thread has (an
     * interpreter ignores SIGPIPE), so that SIGTERM lets it clean up. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int e = posix_spawn(pid, argv[0], &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e != 0) {
        close(fds[0]);
        return e;
    }
    (void)fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    *out = fds[0];
    return 0;
}

/* Collects `pid`'s output from `fd` until it exits, its deadline passes
 * (TACK_RUN_TIMED_OUT) or the interrupt check stops the wait
 * (TACK_RUN_INTERRUPTED), into r. */
static void wait_for(pid_t pid, int fd, int64_t limit_ns, struct tack_run_result *r)
{
    int64_t deadline = limit_ns < 0 ? -1 : now_ns() + limit_ns, next_check = now_ns() + (int64_t)TICK_MS * 1000000;
    size_t cap = 0;
    int reading = 1, pause = 1;
    r->end = TACK_RUN_EXITED;
    for (;;) {
        /* Exited with its output closed; or exited while something it
         * started holds its output open, which the wait need not outlast. */
        if (has_exited(pid)) {
            if (reading)
                (void)take_output(fd, r, &cap);
            break;
        }
        int ms = TICK_MS;
        if (!reading) {
            /* The output closed just before the exit: brief waits. */
            ms = pause;
            pause = pause < 16 ? pause * 2 : pause;
        }
        int64_t now = now_ns();
        if (deadline >= 0 && deadline - now <= 0) {
            r->end = TACK_RUN_TIMED_OUT;
            break;
        }
        if (deadline >= 0 && deadline - now < (int64_t)ms * 1000000)
            ms = (int)((deadline - now + 999999) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = reading ? poll(&p, 1, ms) : poll(NULL, 0, ms);
        int signalled = n < 0 && errno == EINTR;
        if (n < 0 && !signalled)
            sleep_ms(ms); /* no poll (ENOMEM): wait all the same */
        if (signalled || now_ns() >= next_check) {
            next_check = now_ns() + (int64_t)TICK_MS * 1000000;
            if (interrupted_now()) {
                r->end = TACK_RUN_INTERRUPTED;
                break;
            }
        }
        if (n > 0 && reading)
            reading = take_output(fd, r, &cap);
    }
}

void tack_run(char *const *argv, int64_t limit_ns, int dirfd, struct tack_run_result *r)
{
    memset(r, 0, sizeof *r);
    pid_t pid;
    int fd = -1;
    int e = spawn(argv, dirfd, &pid, &fd);
    if (e != 0) {
        r->end = TACK_RUN_NOT_STARTED;
        r->err = e;
        return;
    }
    wait_for(pid, fd, limit_ns, r);
    close(fd);
    if (r->end != TACK_RUN_EXITED)
        stop_group(pid);
    r->status = reap(pid);
    if (r->output)
        r->output[r->output_len] = 0;
}

/* The first line of `text`, without surrounding blanks, into out. */
void tack_first_line(const char *text, char *out, size_t cap)
{
    while (text && (*text == ' ' || *text == '\n' || *text == '\r' || *text == '\t'))
        text++;
    size_t n = text ? strcspn(text, "\r\n") : 0;
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), n ? text : "");
}

/* The last non-empty line of `text` (what an interpreter says last is why
 * it failed). */
static void last_line(const char *text, size_t len, char *out, size_t cap)
{
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        len--;
    size_t start = len;
    while (start && text[start - 1] != '\n')
        start--;
    snprintf(out, cap, "%.*s", (int)(len - start < cap ? len - start : cap - 1), text + start);
}

/* Why a question put to a program (`asked`: its argument) got no answer:
 * it could not be run, ran out of time or was interrupted, or what it said
 * last. */
void tack_run_trouble(const struct tack_run_result *r, const char *asked, char *out, size_t cap)
{
    char limit[32];
    tack_limit_text(tack_query_limit(), limit, sizeof limit);
    if (r->end == TACK_RUN_NOT_STARTED)
        snprintf(out, cap, "%s", strerror(r->err));
    else if (r->end == TACK_RUN_TIMED_OUT)
        snprintf(out, cap, "no answer to %s within %s; it was stopped", asked, limit);
    else if (r->end == TACK_RUN_INTERRUPTED)
        snprintf(out, cap, "interrupted while it answered %s", asked);
    else if (r->output && r->output_len)
        last_line(r->output, r->output_len, out, cap);
    else
        snprintf(out, cap, "no output");
}
