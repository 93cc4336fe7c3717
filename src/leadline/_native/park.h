/* Holding a thread of this process still while its stack is read (park.c). */
#ifndef LEADLINE_PARK_H
#define LEADLINE_PARK_H

#include <stdint.h>
#include <sys/types.h>

/* Installs the signal handler that parks a thread: 0, or -1 if the signal is the program's
 * (then nothing is ever parked).  Once per process; the handler stays. */
int ll_park_install(void);
/* Asks thread `tid` of this process to stop where it is and waits up to `wait_ns` for it:
 * 1 if it has stopped (ll_unpark() lets it go; it goes by itself after LL_PARK_MAX_NS), else 0.
 * Between the two, the caller must not take a lock or allocate: the stopped thread may hold
 * any lock of the process. */
int ll_park(pid_t tid, uint64_t wait_ns);
/* Whether thread `tid` of this process blocks the signal (1 if that cannot be told): such a
 * thread is never asked, or the signal would wait in it, where the program could see it. */
int ll_park_blocked(pid_t tid);
void ll_unpark(void);

#endif
