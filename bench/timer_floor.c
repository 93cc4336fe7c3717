/* The floor for missed ticks: a bare timer thread on leadline's sampler's schedule, doing
 * nothing but spin for a tick's worth of CPU, while a program runs.  How often it wakes a whole
 * interval or more late (a tick leadline counts as missed) is what the machine allows any
 * sampler, whatever the sampler does.
 *
 *   timer_floor RATE_HZ WORK_US OUT -- PROGRAM [ARGS...]
 *
 * Runs PROGRAM as its child and ticks until the child ends; then writes one JSON object to OUT
 * (ticks taken, ticks missed: the sum over ticks of lateness / interval, the timer's own CPU
 * seconds, the seconds it ran, lateness percentiles in microseconds) and exits with the
 * child's status.  The schedule is leadline's sampler's (src/leadline/_native/sampler.c,
 * sampler_main), its draws and slice request taken from the sampler's own schedule.h:
 * exponential intervals with mean 1/RATE (a Poisson process), absolute clock_nanosleep on
 * CLOCK_MONOTONIC, timer slack 1 ns, and (Linux 6.12+) a requested slice of 100 us.  Built by bench/sampling.py with the machine's C compiler (candidates timer-*). */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/leadline/_native/schedule.h" /* the sampler's own draws and slice request */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: timer_floor RATE_HZ WORK_US OUT -- PROGRAM [ARGS...]\n");
        return 2;
    }
    double rate = atof(argv[1]);
    uint64_t work_ns = (uint64_t)(atof(argv[2]) * 1000.0);
    if (rate <= 0 || rate > 100000) {
        fprintf(stderr, "timer_floor: RATE_HZ must be in (0, 100000]\n");
        return 2;
    }
    FILE *out = fopen(argv[3], "w");
    if (!out) {
        perror("timer_floor: OUT");
        return 2;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("timer_floor: fork");
        return 2;
    }
    if (child == 0) {
        execvp(argv[5], argv + 5);
        perror("timer_floor: exec");
        _exit(127);
    }
    uint64_t interval_ns = (uint64_t)(1e9 / rate);
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    ll_ask_short_turns();
    size_t cap = 1 << 16, n = 0;
    uint64_t *lates = malloc(cap * sizeof *lates);
    if (!lates) return 2;
    uint64_t rng = now_ns() ^ 0x9E3779B97F4A7C15u, missed = 0, ticks = 0;
    uint64_t start = now_ns(), next = start;
    int status = 0;
    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) break;
        next += ll_poisson_interval(&rng, interval_ns);
        struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {
        }
        uint64_t t = now_ns(), late = t > next ? t - next : 0;
        uint64_t k = late / interval_ns;
        missed += k;
        next += k * interval_ns;
        ticks++;
        if (n == cap) {
            uint64_t *more = realloc(lates, 2 * cap * sizeof *lates);
            if (more) {
                lates = more;
                cap *= 2;
            }
        }
        if (n < cap) lates[n++] = late;
        while (now_ns() - t < work_ns) {
        }
    }
    double seconds = (double)(now_ns() - start) / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    qsort(lates, n, sizeof *lates, cmp_u64);
    fprintf(out,
            "{\"ticks\": %llu, \"missed\": %llu, \"cpu_s\": %.6f, \"seconds\": %.6f, "
            "\"late_p50_us\": %.1f, \"late_p99_us\": %.1f, \"late_max_us\": %.1f}\n",
            (unsigned long long)ticks, (unsigned long long)missed, cpu, seconds,
            n ? (double)lates[n / 2] / 1e3 : 0.0, n ? (double)lates[n * 99 / 100] / 1e3 : 0.0,
            n ? (double)lates[n - 1] / 1e3 : 0.0);
    fclose(out);
    free(lates);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) kill(getpid(), WTERMSIG(status));
    return 1;
}
