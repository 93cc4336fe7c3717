/* Holding a thread of this process still while the sampler reads its stack.
 *
 * The sampler reads stacks while the program runs (sampler.c).  A program whose stack changes
 * faster than a walk reads it (a pipeline of generators that yield every microsecond or two, on
 * a machine with a CPU for the sampler and another for the program) fails most walks; read
 * again, the walks that succeed are the ones that happened on a frame that lasts, so short-lived
 * frames vanish from the profile (seen: lizard's tokenizer stages, 10% of its time each when the
 * program was stopped for every read, at 0-0.3%).  So a walk of a thread of this process that
 * raced is done again with the thread held still: the sampler sends it a real-time signal whose
 * handler says it has stopped and waits on a futex until the sampler has copied its frames and
 * code objects.  A thread is only asked when a walk raced while its CPU clock moved (it runs
 * Python code, not a blocking system call, which the signal would interrupt), and only ever
 * waits LL_PARK_MAX_NS, whatever the sampler does.  A thread that does not answer in time (the
 * signal blocked, or the thread waiting for a CPU) is read as before.
 *
 * The handler only touches atomics, errno and the futex: nothing that can block on a lock. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "park.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LL_PARK_MAX_NS 5000000u /* 5 ms: a stopped thread goes on by itself after this */

/* The request: (generation << 32) | tid, 0 when none; the one the handler answered; the last
 * generation let go (the futex word). */
static _Atomic uint64_t request, answered;
static _Atomic uint32_t released;
static uint32_t generation;
static _Atomic int installed; /* 1: ours; -1: the program's signal, never used */

static int park_signal(void) { return SIGRTMAX - 3; }

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_park(int sig) {
    (void)sig;
    int saved = errno;
    uint64_t r = atomic_load(&request);
    if (r && (pid_t)(uint32_t)r == (pid_t)syscall(SYS_gettid)) {
        uint32_t gen = (uint32_t)(r >> 32);
        uint64_t deadline = mono_ns() + LL_PARK_MAX_NS;
        atomic_store(&answered, r);
        for (;;) {
            uint32_t seen = atomic_load(&released);
            if (seen == gen || atomic_load(&request) != r) break;
            uint64_t now = mono_ns();
            if (now >= deadline) break;
            struct timespec left = {0, (long)(deadline - now)};
            syscall(SYS_futex, &released, FUTEX_WAIT_PRIVATE, seen, &left, NULL, 0);
        }
    }
    errno = saved;
}

int ll_park_install(void) {
    if (installed) return installed > 0 ? 0 : -1;
    struct sigaction old, sa;
    if (sigaction(park_signal(), NULL, &old) || (old.sa_flags & SA_SIGINFO) ||
        (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
        installed = -1; /* the program's */
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_park;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(park_signal(), &sa, NULL) == 0 ? 1 : -1;
    return installed > 0 ? 0 : -1;
}

int ll_park_blocked(pid_t tid) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 1;
    buf[n] = 0;
    const char *p = strstr(buf, "\nSigBlk:");
    if (!p) return 1;
    unsigned long long mask = strtoull(p + 8, NULL, 16);
    return (int)(mask >> (park_signal() - 1) & 1);
}

int ll_park(pid_t tid, uint64_t wait_ns) {
    if (installed <= 0 || tid <= 0) return 0;
    struct sigaction cur;
    if (sigaction(park_signal(), NULL, &cur) || (cur.sa_flags & SA_SIGINFO) ||
        cur.sa_handler != on_park) {
        installed = -1; /* the program has taken the signal since: never send it again */
        return 0;
    }
    if (++generation == 0) generation = 1;
    uint64_t r = (uint64_t)generation << 32 | (uint32_t)tid;
    atomic_store(&request, r);
    if (syscall(SYS_tgkill, getpid(), tid, park_signal())) {
        atomic_store(&request, 0);
        return 0;
    }
    uint64_t deadline = mono_ns() + wait_ns;
    while (atomic_load(&answered) != r) {
        if (mono_ns() >= deadline) {
            atomic_store(&request, 0); /* a late handler finds no request and goes on */
            return 0;
        }
    }
    return 1;
}

void ll_unpark(void) {
    atomic_store(&released, generation);
    atomic_store(&request, 0);
    syscall(SYS_futex, &released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
