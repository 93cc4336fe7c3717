/* The sampler's schedule, in plain C (no Python headers): its random draws and its request for
 * short turns on a CPU.  Shared by the sampler (sampler.c), the RSS sampler (memory.c) and the
 * benchmark's bare timer (bench/timer_floor.c), which must keep the sampler's schedule to be
 * the floor it is compared with. */
#ifndef LEADLINE_SCHEDULE_H
#define LEADLINE_SCHEDULE_H

#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LL_SAMPLER_SLICE_NS 100000u /* the least the kernel grants */

/* The next of a xorshift64 sequence (state never 0): the sampler's Poisson ticks, the RSS
 * sampler's drawn waits. */
static inline uint64_t ll_xorshift(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* The time to the next tick: exponential, its mean `interval_ns` (the ticks are a Poisson
 * process), at most LL_MAX_INTERVALS intervals.  A tick changes what the scheduler does next
 * (it takes a CPU from a thread, which then finds its turn over), and on a busy machine the
 * threads then run in turns that begin at the ticks; with the interval in a narrow band, the
 * next tick comes at about the same point of a turn, so the threads' state at ticks is not
 * their state over time.  Seen: pinned to one CPU beside a CPU hog, support.ALTERNATING's
 * function that took 70.6% of the CPU was found running at 80.7% of its fair samples, with an
 * interval uniform in [0.75, 1.25] x the period (every read right: the program's own timeline
 * put it there at each tick).  Ticks at exponential intervals see the time average whatever
 * they change afterwards (Poisson arrivals see time averages); a model of that machine gives
 * 82.7% for a 75% function one way, 74.6-75.1% the other (docs/run.md, "Busy machines"). */
#define LL_MAX_INTERVALS 10.0
static inline uint64_t ll_poisson_interval(uint64_t *rng, uint64_t interval_ns) {
    double u = (double)(ll_xorshift(rng) >> 11) / 9007199254740992.0; /* [0, 1) */
    double x = -log1p(-u);
    return (uint64_t)((double)interval_ns * (x < LL_MAX_INTERVALS ? x : LL_MAX_INTERVALS));
}

/* Asks the scheduler for short turns on a CPU for the calling thread (Linux 6.12+: a fair-class
 * thread's requested slice, sched_attr.sched_runtime; older kernels ignore it): a thread that
 * asks for short turns is let in sooner when it wakes on a CPU that another runs on.  The
 * sampler wakes for a few tens of microseconds a tick; beside CPU hogs, with the default slice
 * it waited behind them for a CPU, and ticks were late or missed.  Best effort, no privilege
 * needed; a thread with another policy is left as it is. */
static inline void ll_ask_short_turns(void) {
#ifdef SYS_sched_setattr
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
        uint32_t util_min, util_max;
    } a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) || a.policy != SCHED_OTHER) return;
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = LL_SAMPLER_SLICE_NS;
    (void)syscall(SYS_sched_setattr, 0, &a, 0);
#endif
}

#endif
