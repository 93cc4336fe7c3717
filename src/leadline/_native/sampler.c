/* The stack sampler: a native thread that, at a set rate, reads the Python stacks of every
 * thread of one or more processes (its own, or others) and writes them as SAMPLES chunks.
 *
 * It never takes the GIL and never stops the target: the interpreter state is read with
 * process_vm_readv (procmem.c) while the target runs, and each thread's stack is walked by
 * stackwalk.c.  A stack can change while it is read; a walk whose frames do not check out (a
 * code pointer that is not a code object, an instruction outside its code, a read that faults,
 * a chain that does not end) is read again and, if it keeps failing, counted as torn and
 * dropped.  Nothing here can crash or block the program.
 *
 * Output (docs/format.md): functions as FUNCS records (the tracer's layout), stacks as STACKS
 * records (parent stack, function, instruction offset), both defined by stackwalk.c, threads as
 * TASKS records, samples as SAMPLES chunks.  Lines are resolved from the offsets when the
 * capture is read. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "leadline.h"
#include "locals.h"
#include "native.h"
#include "procmem.h"
#include "pyobjects.h"
#include "stackwalk.h"
#include "tasks.h"

#define LL_MAX_THREADS_PER_TICK 512
/* The most thread states a tick visits, sampled or not: the list is read while threads come and
 * go, and a thread state freed under the sampler (its memory reused) can link back into itself
 * (seen: CPython's threading tests, beside two CPU hogs, once in ~100 runs; every walk from
 * those states was torn, so no sample counted and the tick never ended, nor did the run). */
#define LL_MAX_THREAD_STATES (4 * LL_MAX_THREADS_PER_TICK)
#define LL_SCAN_NS 100000000u   /* look for new child processes every 100 ms */
#define LL_FLUSH_NS 1000000000u /* a partly filled chunk reaches the file within 1 s */
/* A busy thread pushes and pops frames every 100 ns or so, so the innermost frame often moves
 * between reading the pointer to it and reading it (a system call apart): such a walk is read
 * again, at most this many times in all, before the sample counts as torn. */
#define LL_WALK_ATTEMPTS 4
/* How long the sampler waits for a thread of its process to stop for a reading (parking, below): a
 * signal reaches a thread running on another CPU in a few microseconds; one that is waiting for
 * a CPU is not changing its stack, and is read without. */
#define LL_PARK_WAIT_NS 100000u
/* A thread whose first walks raced this often lately (x 2^16: 5%) is read parked while it runs. */
#define LL_RACY 3277u
/* What a thread's samples stand for ("fair samples", below) goes to its pool, and each fair
 * sample takes the same from it: the mean of what came in per fair sample over about the last
 * LL_MEAN_OVER (pay_flat), if the last fair one was taken recently: within LL_RECENT_NS of the
 * schedule, in ticks, LL_RECENT_MIN_TICKS to LL_RECENT_TICKS (256 at 1 kHz: beside two CPU hogs
 * and more, a window of 64 left the cpu-mode accuracy test's heaviest function 2.2 points low
 * once, its samples counted where they were found; 256 ticks at 100 Hz, the default rate, were
 * 2.6 s, and a program's phase of a second or two with no fair read gave all its time to the
 * phase before: a thread that blocked the parking signal from a line on had no sample after
 * it, in a CI stage); else a sample that is not fair stays where it was found, and what waited
 * in the pool goes to the last fair ones.  LL_RECENT: the last fair stacks a thread's pool goes
 * to then, and when its sampling ends. */
#define LL_RECENT 32
#define LL_RECENT_NS 500000000u
#define LL_RECENT_MIN_TICKS 32
#define LL_RECENT_TICKS 256
#define LL_MEAN_OVER 4.0
/* A tick is on time when the sampler, woken, waited at most this long for a CPU (the kernel's
 * run-queue delay for its thread, /proc/self/task/TID/schedstat): the moment it then reads the
 * threads is the timer's, not one the scheduler chose when a running thread stopped at a system
 * call.  How late the timer itself fires owes nothing to the program: on a virtual machine it is
 * 25 to 700 us, 85 median, phase after phase of the host.  Where the kernel does not say, a tick
 * is on time when it began within this of the earliest a tick began lately (the machine's own
 * wake-up latency): the later a tick, the likelier the sampler was let run by a thread stopping
 * at a system call (seen: the share of samples at such a call doubled from ticks 0-3 us later
 * than the earliest to 9-12).  That rule took most ticks of a quiet virtual machine for late:
 * 50 to 97% of a run's samples deferred, and a program alternating two functions every 4 ms
 * came out 43 to 84% in the one that took 70% of its time. */
#define LL_ON_TIME_NS 10000u
/* A thread that ran all the time since the previous tick but between these two (two context
 * switches, the sampler's in and its own out, take 2-20 us) was running when the sampler woke
 * and took its CPU.  Less than the least a switch takes, and it stopped by itself just before
 * the sampler ran (seen: three samples in four of those at a system call). */
#define LL_SWITCH_MIN_NS 2000u
#define LL_SWITCH_NS 20000u
/* A thread of this process that looks idle by its CPU clock (off a CPU, and it ran less than a
 * tenth of the time since the previous tick) but ran within this long is asked for its state:
 * on a machine with several runnable threads per CPU a busy thread waits that long for a CPU
 * (seen: beside two CPU hogs, two test suites and a benchmark on two cores, a function that
 * spun for 0.4 s was found only in such samples, counted idle, and left out of the report).
 * A thread that has slept longer is not asked: a read of /proc costs a few microseconds. */
#define LL_RAN_LATELY_NS 250000000u
/* A thread of this process that ran within this long has its innermost frame read before its
 * CPU clock (sample_thread); one that has slept longer is not read until it is seen running. */
#define LL_RAN_RECENTLY_NS 50000000u

/* SF_GIVEN: the record is no stack read of its own but weight given to one (a tick a read
 * stands for beyond its first, or what other reads stood for, spread over the thread's fair
 * samples): the evidence a capture holds is its reads, whatever weight they carry. */
enum { SF_IDLE = 1, SF_RSS = 2, SF_TRUNCATED = 4, SF_GIVEN = 8 };
/* Bits 4-5: the thread and the GIL when it was read (0: not known: a version or a record
 * that cannot tell, such as weight given to an earlier read). */
enum { SF_GIL_HELD = 1 << 4, SF_GIL_WAIT = 2 << 4, SF_GIL_NONE = 3 << 4 };
/* Bit 6: the thread was raising an exception or handling one when it was read. */
enum { SF_EXCEPTION = 1 << 6 };
/* Bit 7 (--async all): the stack of an asyncio task waiting on the thread's loop, not the
 * thread's own. */
enum { SF_TASK_WAITING = 1 << 7 };
/* How many items of a thread's stack of handled exceptions are looked at (the top ones are
 * empty after a handler in a running generator ends, and on 3.11 and 3.12 hold None). */
#define LL_EXC_ITEMS 4

typedef struct {
    uint64_t ident; /* the thread's pthread_t, as CPython stores it */
    pid_t tid;
    uint32_t serial;
    int fd;      /* /proc/PID/task/TID/schedstat, or -1 */
    int stat_fd; /* /proc/PID/task/TID/stat (its state: running or not), or -1 */
    int clock;   /* the thread's CPU clock can be read (same process) */
    uint64_t cpu_ns;   /* its CPU time when it was last looked at */
    uint64_t ran_ns;   /* CLOCK_MONOTONIC when its CPU clock was last seen moving */
    uint64_t pool_ns;  /* CPU time it used that no fair sample stands for yet */
    uint64_t pool_ticks; /* wall mode: ticks it was busy that no fair sample stands for yet */
    uint32_t last_stack; /* the stack its last sample found */
    uint32_t recent[LL_RECENT]; /* its last fair samples' stacks */
    uint32_t nrecent;           /* fair samples taken (recent[] holds the last ones) */
    uint64_t since_ns, since_ticks; /* what came into the pool since its last fair sample */
    double mean_ns, mean_ticks;     /* what a fair sample took from it lately (pay_flat) */
    double owed_ticks; /* the part of a record (a tick; cpu mode: a period) its next is owed */
    uint64_t fair_tick;         /* the schedule's tick (due_tick) of its last fair sample */
    int stretch; /* its reads since its last fair one have been found ones (weigh) */
    uint64_t seen; /* tick it was last seen in */
    uint32_t raced; /* the fraction of its recent first walks that raced, x 2^16 (walk_thread) */
    int park;       /* it can be parked: 1 yes, -1 no (it blocks the signal), 0 not known yet */
    int gil_wait;   /* its last read found it waiting for the GIL */
    int held;         /* stopped before its walk (hold_thread) until let go (release_thread) */
    int held_sig;     /* the signal to give back then */
    /* Its state for this tick's sample as hold_thread read it (thread_state: 1 running, 0 not,
     * -1 unknown), so that the sample does not read it again; STATE_UNREAD if it did not. */
    int tick_state;
    uint64_t held_ns, held_total_ns; /* when it was stopped; for how long, in all */
    int stop_pending; /* asked to stop, it did not in time: traced until it stops (stop_slot) */
    /* --native: its last stack with C frames, the CPU time it had used then, and its Python
     * frames then (walk_key): a thread that has not run since has that stack still. */
    uint32_t native_stack;
    uint64_t native_cpu_ns, native_key;
    int native_settle; /* stopped at its last unwind: the next look absorbs what that cost it */
    /* attach --native: how many times it had been on a CPU when it was let go after its last
     * unwind (schedstat), 0 if not known: the same count later, it has not run since. */
    uint64_t native_runs;
    /* The pages its last two walks used (a stack that moves between two shapes, a loop around
     * a call, uses two sets), first use first. */
    uint64_t pages[2][LL_PAGES_AHEAD];
    int npages[2];
    uint64_t stack_lo, stack_hi; /* run --native: the mapping its stack pointer was last in */
} ThreadSlot;

typedef struct {
    pid_t pid;
    LLProc proc; /* how it is read: its layout, memory, code objects */
    LLNative *native; /* --native: its C stacks' unwinder, once one is needed */
    int native_own;   /* it is this process: its threads' C stacks come from their contexts */
    int native_failed; /* it could not be made */
    uint64_t runtime;
    int statm_fd;
    uint64_t rss_pages;
    int64_t rss_carry; /* growth no sample has taken yet (pages) */
    int have_rss;
    ThreadSlot *threads;
    int nthreads, cthreads;
    int dead;
    int failures; /* ticks in a row in which the interpreter could not be read */
    /* This tick's interpreter (read_interp): where its GIL is (0: not known), whether it is
     * held and by which thread state, and whether a garbage collection is running. */
    uint64_t interp, gil, gil_holder;
    int gil_locked, gc_collecting;
    LLTasks tasks; /* its asyncio tasks (tasks.c) */
    uint64_t none; /* the address of None, once an object was found to be it (0: not yet) */
    /* The pages a tick read before its first walk (the runtime, the interpreter, the first
     * thread state, on 3.11 and 3.12 the C stack that holds its innermost frame), read at once
     * at the next tick's start; nhead < 0: not taken yet in this tick. */
    uint64_t head[LL_PAGES_AHEAD];
    int nhead;
} Target;

typedef struct {
    /* The thread's serial, not its slot: a slot moves when a thread found later in the same
     * tick makes its target's array of slots grow. */
    uint32_t serial;
    uint32_t stack;
    uint8_t flags;
    uint64_t cpu;
    int64_t drss;
    uint64_t repeat; /* records: the ticks it stands for (wall mode), 1 in CPU mode */
} Pending;

typedef struct {
    PyObject_HEAD
    LLWriter w;
    pthread_t thread;
    pid_t tid;          /* the sampler thread's kernel id, set by the thread */
    pthread_mutex_t mu; /* guards stopping and the condition variable's wait */
    pthread_cond_t cv;
    int thread_started, stopping;
    uint64_t interval_ns;
    uint64_t recent_ticks; /* LL_RECENT_NS in ticks, LL_RECENT_MIN_TICKS to LL_RECENT_TICKS */
    int cpu_mode, memory, subprocesses, in_process;
    /* A thread running an asyncio task: its stack from the task (tasks.c); 2: and each tick,
     * the stacks of the tasks waiting on its loop (--async all). */
    int tasks;
    /* Ticks to take, then stop (0: until stopped); every read is then written as it was read,
     * where it was found (a snapshot: `leadline dump`), none weighed against the others. */
    uint64_t max_ticks;
    /* A snapshot's innermost frames whose local variables are read (dump --locals), and what
     * was read of them (records of locals.h). */
    int locals_frames;
    int native; /* each thread's C frames too (dump, attach and run --native) */
    uint64_t native_stops; /* threads stopped to unwind their C stacks */
    uint64_t native_unread; /* --native samples with their Python frames alone (native_stack) */
    uint64_t native_unanswered; /* run --native: parks refused or not answered in time */
    /* run --native: the registers and stack copy of the thread of this process whose walk was
     * just read parked (ctx.tid 0: none), unwound after it has gone on; the copy's buffer. */
    LLNativeContext ctx;
    uint8_t *ctx_stack;
    LLLocals locals;
    uint64_t snapshot_gil_until; /* a snapshot: when it stops watching threads (gil_state) */
    Target *targets;
    int ntargets, ctargets;
    pid_t *known; /* descendants seen (Python or not), for --subprocesses */
    size_t nknown, cknown;
    LLStacks st; /* the walk, and the strings and stacks defined */
    uint32_t next_serial;
    LLChunk *chunk;
    uint64_t chunk_prev_t, chunk_started_ns;
    uint64_t chunk_first; /* samples when the chunk began */
    Pending *pending;
    int rss_grew; /* the RSS grew since the tick before: samples count where they were found */
    uint64_t ticks, samples, missed, torn, retried, parked, truncated, deferred;
    /* Every read's GIL state by thread serial (held, waiting, neither), deferred reads
     * included: END's gil_reads. */
    uint64_t (*gil_reads)[3];
    size_t ngil_reads;
    uint64_t sampler_cpu_ns, t_end, last_scan_ns, rng, fork_ns;
    uint64_t exit_t; /* ticks when the first process was found gone (0: it was not) */
    uint64_t now_ns;      /* CLOCK_MONOTONIC when this tick began */
    uint64_t late_ns;     /* how long after its time this tick began */
    uint64_t floor_ns[2]; /* the least late_ns of this block of 128 ticks, and of the last */
    uint64_t held;        /* ticks at which the sampler was held up (not on time) */
    uint64_t prev_end_ns; /* CLOCK_MONOTONIC when the previous tick's work ended */
    uint64_t covers;      /* ticks this one stands for: 1 + those missed just before it */
    int on_time;          /* the sampler was not held up this tick (LL_ON_TIME_NS) */
    /* Targets still alive, published by the sampler thread for running(): the thread may
     * reallocate `targets` (a new child process) while the Python thread asks. */
    int alive_targets;
    int writer_open; /* `w` was opened: it must be closed before this object is freed */
    /* In-process: the thread that started sampling, and its CPU time then.  Its CPU time counts
     * from then, not from when the sampler thread first got a CPU to look at it (on a busy
     * machine, a tenth of a second of the program's work later). */
    pid_t creator_tid;
    uint64_t creator_cpu_ns;
    /* Whether this process's threads are seen in /proc/self/task (not so where /proc is
     * another pid namespace's): only then is a thread state's kernel id checked there. */
    int own_tasks_listed;
    int finished, closed, fork_pending, active;
} Sampler;

/* The in-process sampler, for fork().  Its own lock: the tracer's fork handlers hold
 * ll_global_lock from prepare to parent/child, and both sets of handlers run in one fork(). */
static pthread_mutex_t sampler_lock = PTHREAD_MUTEX_INITIALIZER;
static Sampler *active_sampler;

/* An array of `elem`-byte items with room for at least `want` (it doubles); -1 if out of
 * memory. */
static int grow(void **arr, size_t *cap, size_t elem, size_t want) {
    if (want <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < want) nc *= 2;
    void *n = realloc(*arr, nc * elem);
    if (!n) return -1;
    *arr = n;
    *cap = nc;
    return 0;
}

/* ---- threads ---- */

/* The first numbers of the schedstat file open as `fd` (/proc/.../task/TID/schedstat: the time
 * the thread has run on a CPU, the time it has waited for one, and the times it has been put on
 * one) into f[0..2]: how many were read, 0 if none could be. */
static int read_schedstat(int fd, unsigned long long f[3]) {
    char buf[96];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = buf, *end;
    int got = 0;
    for (; got < 3; got++, p = end) {
        f[got] = strtoull(p, &end, 10);
        if (end == p) break;
    }
    return got;
}

/* CPU time a thread has used, into *out (left alone if it cannot be read: a thread that has
 * ended, whose slot is not forgotten yet, must not count its whole CPU time again when a read
 * succeeds).  A thread of this process has a precise CPU clock, which includes the time it has
 * run on a CPU up to now; for another process's thread the kernel only offers schedstat,
 * updated at scheduler ticks and switches. */
static void read_cpu_ns(const ThreadSlot *t, uint64_t *out) {
    if (t->clock) {
        struct timespec ts;
        clockid_t id = (clockid_t)((~(unsigned)t->tid << 3) | 6); /* thread, CPUCLOCK_SCHED */
        if (clock_gettime(id, &ts) == 0) {
            *out = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
            return;
        }
    }
    unsigned long long f[3];
    if (read_schedstat(t->fd, f) >= 1) *out = f[0];
}

/* How many times another process's thread has been put on a CPU (its schedstat's third
 * field, counted as it arrives there, so never behind as its run time can be), 0 if unknown. */
static uint64_t runs_of(const ThreadSlot *t) {
    unsigned long long f[3];
    return read_schedstat(t->fd, f) == 3 ? f[2] : 0;
}

/* The text of /proc/PID/task/TID/`file` into buf (n bytes at most, NUL-terminated): its
 * length, or -1.  No descriptor is kept open (a program with a thousand threads must not lose a
 * thousand descriptors to its profiler). */
static ssize_t read_task_file(pid_t pid, pid_t tid, const char *file, char *buf, size_t n) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/%s", (int)pid, (int)tid, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;
    if (fd >= 0) close(fd);
    buf[r > 0 ? r : 0] = 0;
    return r > 0 ? r : -1;
}

/* Is the thread on a CPU (or waiting for one)?  'R' in the text of its /proc/.../stat; -1 if
 * unknown.  A thread blocked in a system call, a sleep, or waiting for the GIL is idle. */
static int stat_running(const char *stat) {
    const char *p = strrchr(stat, ')');
    return p && p[1] == ' ' ? p[2] == 'R' : -1;
}

/* The same, from another process's thread's stat file kept open as `fd`. */
static int state_running(int fd) {
    char buf[512];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return -1;
    buf[n] = 0;
    return stat_running(buf);
}

static int is_running(const ThreadSlot *t) { return state_running(t->stat_fd); }

#define STATE_UNREAD (-2) /* a ThreadSlot's tick_state: not read this tick */

/* Whether a thread of this process that its clock says is idle ran lately (LL_RAN_LATELY_NS)
 * and is runnable: waiting for a CPU, not sleeping. */
static int waits_for_cpu(const ThreadSlot *t, uint64_t now) {
    if (now - t->ran_ns >= LL_RAN_LATELY_NS) return 0;
    char buf[512];
    return read_task_file(getpid(), t->tid, "stat", buf, sizeof buf) > 0 && stat_running(buf) == 1;
}

/* A slot for a thread not seen before (thread_of has looked for it); NULL if out of memory. */
static ThreadSlot *new_thread_slot(Sampler *S, Target *T, uint64_t ident, pid_t tid) {
    void *arr = T->threads;
    size_t cap = (size_t)T->cthreads;
    if (grow(&arr, &cap, sizeof(ThreadSlot), (size_t)T->nthreads + 1)) return NULL;
    T->threads = arr;
    T->cthreads = (int)cap;
    ThreadSlot *t = &T->threads[T->nthreads++];
    memset(t, 0, sizeof *t);
    char path[96], name[64] = "";
    t->ident = ident;
    t->tid = tid;
    t->serial = ++S->next_serial;
    t->fd = t->stat_fd = -1;
    t->tick_state = STATE_UNREAD;
    t->clock = tid > 0 && T->pid == getpid();
    if (tid > 0) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)T->pid, (int)tid);
        if (!t->clock) {
            t->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
            snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)T->pid, (int)tid);
            t->fd = open(path, O_RDONLY | O_CLOEXEC);
        }
        read_task_file(T->pid, tid, "comm", name, sizeof name);
        name[strcspn(name, "\n")] = 0;
    }
    if (tid == T->pid) strcpy(name, "MainThread");
    t->cpu_ns = 0;
    if (t->clock && tid == S->creator_tid) {
        t->cpu_ns = S->creator_cpu_ns;
        S->creator_tid = 0; /* once: a later thread with its tid is another thread */
    } else {
        read_cpu_ns(t, &t->cpu_ns);
    }
    uint32_t nid = name[0] ? ll_intern_str(&S->st, name, strlen(name)) : 0;
    uint8_t rec[64], *p = rec;
    p = ll_put_varint(p, t->serial);
    p = ll_put_varint(p, (uint64_t)T->pid);
    p = ll_put_varint(p, (uint64_t)(tid > 0 ? tid : 0));
    p = ll_put_varint(p, ident);
    p = ll_put_varint(p, nid);
    ll_writer_define(&S->w, LL_CHUNK_TASKS, rec, (size_t)(p - rec));
    return t;
}

static void flush_pool(Sampler *S, ThreadSlot *t, uint64_t tick);

/* Threads not seen for 64 ticks have ended: close their files and drop their slots (their
 * serials stay in the capture). */
static void forget_threads(Sampler *S, Target *T, uint64_t tick) {
    int k = 0;
    for (int i = 0; i < T->nthreads; i++) {
        ThreadSlot *t = &T->threads[i];
        if (t->seen + 64 < S->ticks) {
            flush_pool(S, t, tick);
            if (t->fd >= 0) close(t->fd);
            if (t->stat_fd >= 0) close(t->stat_fd);
            continue;
        }
        T->threads[k++] = *t;
    }
    T->nthreads = k;
}

/* ---- output ---- */

static void flush_chunk(Sampler *S) {
    if (S->chunk) {
        S->chunk->items = S->samples - S->chunk_first;
        ll_writer_submit(&S->w, S->chunk);
        S->chunk = NULL;
    }
}

/* Writes a sample: once, and again (with no CPU time or RSS) for each further tick it stands
 * for. */
static void emit(Sampler *S, uint64_t t, const Pending *p, uint64_t now) {
    for (uint64_t r = 0; r < (p->repeat ? p->repeat : 1); r++) {
        if (S->chunk && S->chunk->len + LL_MAX_EVENT_BYTES > S->chunk->cap) flush_chunk(S);
        if (!S->chunk) {
            S->chunk = ll_writer_buffer(&S->w, LL_CHUNK_SAMPLES, 0, LL_EVENTS_CHUNK_CAP);
            if (!S->chunk) return;
            S->chunk->len = (size_t)(ll_put_varint(S->chunk->data, t) - S->chunk->data);
            S->chunk_prev_t = t;
            S->chunk_started_ns = now;
            S->chunk_first = S->samples;
        }
        uint8_t flags = r ? (uint8_t)((p->flags & ~SF_RSS) | SF_GIVEN) : p->flags;
        uint8_t *q = S->chunk->data + S->chunk->len;
        q = ll_put_varint(q, t - S->chunk_prev_t);
        q = ll_put_varint(q, p->serial);
        *q++ = flags;
        q = ll_put_varint(q, p->stack);
        q = ll_put_varint(q, r ? 0 : p->cpu);
        if (flags & SF_RSS) q = ll_put_varint(q, ll_zigzag(p->drss));
        S->chunk->len = (size_t)(q - S->chunk->data);
        S->chunk_prev_t = t;
        /* Only this thread writes it; progress() reads it from another (a store that cannot
         * tear, no locked instruction). */
        __atomic_store_n(&S->samples, S->samples + 1, __ATOMIC_RELAXED);
    }
}

/* ---- fair samples ----
 * The stack a sample finds is a fair draw from where a thread spends its time only if the
 * moment it was read owes nothing to what the thread was doing.  The tick's own moment does
 * (the sampler's timer), a moment the scheduler chose does not, and on a busy machine both
 * things that can go wrong do:
 *   - A thread that is not on a CPU is wherever the scheduler stopped it.  The kernel notices
 *     that a thread has used up its time slice at a timer tick, or earlier at a system call
 *     that updates its CPU time (reading a CPU clock, waking or waiting), so threads are
 *     stopped at such calls far more often than their CPU time is spent there.  Seen: a
 *     program that reads its CPU clock between small units of work, beside two CPU hogs on
 *     two cores, was found stopped at that call in 36% of its samples for 3% of its CPU time,
 *     and its heaviest function lost 16 points.
 *   - A sampler that wakes late got a CPU when the scheduler gave it one: when a running
 *     thread reached such a call, or at a timer tick at which the scheduler also resumed a
 *     thread it had stopped (its first instructions after the stop, again).
 * So a sample is fair when the tick began on time and the thread was running then: its CPU
 * clock (precise for a thread of this process) moved while its stack was read (its innermost
 * frame, read just before the clock, aside: sample_thread), or it had run
 * all the time since the previous tick, so the sampler's wake-up took its CPU.  Another
 * process's thread (attach) has no precise clock (schedstat moves at scheduler ticks): it is
 * taken as running when /proc says it is runnable, and a thread waiting for a CPU cannot be
 * told from one on a CPU.
 *
 * A sample that is not fair records nothing of its own: what it stands for (the CPU time the
 * thread used since its previous sample; in wall mode also the ticks) goes to the thread's
 * pool, which its fair samples draw on (pay_flat); if it had none lately (a machine so busy
 * that the thread is hardly ever seen running on time), it counts where it was found, biased
 * as that is, rather than in another phase of the program.  Fair samples are fair draws, and
 * as each weighs what the others do, the shares are right; the pool keeps the sums right (CPU
 * time used; ticks the thread was busy, missed ticks included: a tick taken late stands for
 * the ones it covers). */

/* Emits what is left in a thread's pool as its sampling ends (it ended, or sampling stops), or
 * at the first found read of a stretch without fair ones (weigh): spread over its last fair
 * stacks, or at the last stack it was seen in if it had none. */
static void flush_pool(Sampler *S, ThreadSlot *t, uint64_t tick) {
    uint64_t now = ll_monotonic_ns();
    uint32_t n = t->nrecent < LL_RECENT ? t->nrecent : LL_RECENT;
    if (n == 0) {
        t->recent[0] = t->last_stack;
        n = 1;
    }
    /* Its records: in wall mode the ticks it holds; in cpu mode the periods of CPU time, with
     * what the thread's records owe (pay_flat), one at least.  (A record a stack, whatever the
     * pool held, gave a 4 s program 32 records for 25 ms of CPU at 100 Hz: 18% more samples
     * than its CPU time's periods, pushed to the fleet as such.) */
    uint64_t ticks = t->pool_ticks;
    if (S->cpu_mode) {
        if (!t->pool_ns) return;
        double want = t->owed_ticks + (double)t->pool_ns / (double)S->interval_ns;
        ticks = want >= 1.0 ? (uint64_t)want : 1;
        /* What a record more or less leaves over is owed to the next, as in pay_flat (a
         * found read's flush, weigh, is followed by more records). */
        t->owed_ticks = want - (double)ticks;
        if (t->owed_ticks < -1.0) t->owed_ticks = -1.0;
    }
    if (!t->pool_ns && !ticks) return;
    if (ticks < n) n = ticks ? (uint32_t)ticks : 1;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t share = t->pool_ns / n + (i == 0 ? t->pool_ns % n : 0);
        uint64_t k = ticks / n + (i == 0 ? ticks % n : 0);
        /* Wall mode, CPU time and no tick: an idle record carries it (not a busy tick). */
        uint8_t flags = (k == 0 ? SF_IDLE : 0) | SF_GIVEN;
        Pending p = {t->serial, t->recent[i], flags, share, 0, k ? k : 1};
        if (k || share) emit(S, tick, &p, now);
    }
    t->pool_ns = t->pool_ticks = 0;
}

/* This tick's place in the schedule: ticks taken and missed, this one and those it covers. */
static uint64_t due_tick(const Sampler *S) { return S->ticks + S->missed; }

/* Whether the thread had a fair sample within recent_ticks ticks of the schedule (taken or
 * missed: time, not the sampler's luck) before the stretch this tick stands for began.  A late
 * tick's weight goes to the fair samples from before the sampler was held up; a thread seen
 * running on time only now and then is not given samples from far back in its run. */
static int recent_fair(const Sampler *S, const ThreadSlot *t) {
    uint64_t before = due_tick(S) - S->covers; /* the previous tick taken */
    return t->nrecent && before - t->fair_tick <= S->recent_ticks;
}

/* What the thread used that no fair sample stands for yet (`cpu` ns; `ticks` in wall mode)
 * goes to its pool. */
static void to_pool(ThreadSlot *t, uint64_t cpu, uint64_t ticks) {
    t->pool_ns += cpu;
    t->pool_ticks += ticks;
    t->since_ns += cpu;
    t->since_ticks += ticks;
}

/* A fair sample's weight, into *p: each takes the same from the thread's pool, the mean of what
 * came into it per fair sample lately (each new one counts for 1/LL_MEAN_OVER), as far as the
 * pool holds it.  A sample that took what it stood for (the CPU time since the read before it,
 * the share of the pool that had waited for it) would weigh more where the thread runs in long
 * turns without a break, and on a busy machine the turns begin where the scheduler stops it
 * (at its system calls, at the ticks): bench/tick_model.py, pinned beside a CPU hog, puts a
 * function with 75% of the CPU at 75% of the fair samples and at 77-78% of what they stood for
 * that way (CPU time since the read before and a quarter of the pool, the unfair reads' time
 * half to the four latest fair samples), at 74.5-75.0% flat. */
static void pay_flat(const Sampler *S, ThreadSlot *t, Pending *p) {
    if (t->nrecent == 0) {
        t->mean_ns = (double)t->since_ns;
        t->mean_ticks = (double)t->since_ticks;
    } else {
        t->mean_ns += ((double)t->since_ns - t->mean_ns) / LL_MEAN_OVER;
        t->mean_ticks += ((double)t->since_ticks - t->mean_ticks) / LL_MEAN_OVER;
    }
    t->since_ns = t->since_ticks = 0;
    uint64_t ns = (uint64_t)(t->mean_ns + 0.5);
    if (ns > t->pool_ns) ns = t->pool_ns;
    /* Its records: in wall mode a record is a tick; in cpu mode one stands for a period of
     * CPU time, as a pprof's or Pyroscope's sample count does (so many records of a fair
     * sample that takes several periods), one at least.  What a record more or less leaves
     * over (at most one) is owed to the next. */
    double want = t->owed_ticks + (S->cpu_mode ? (double)ns / (double)S->interval_ns
                                               : t->mean_ticks);
    uint64_t k = want >= 1.0 ? (uint64_t)want : 1;
    if (!S->cpu_mode && k > t->pool_ticks) k = t->pool_ticks;
    t->owed_ticks = want - (double)k;
    if (t->owed_ticks < -1.0) t->owed_ticks = -1.0;
    if (t->owed_ticks > 1.0) t->owed_ticks = 1.0;
    t->pool_ns -= ns;
    if (!S->cpu_mode) t->pool_ticks -= k;
    p->cpu = ns;
    p->repeat = k;
}

/* Whether the sample just read can stand for where the thread's time goes.  `state`: /proc's
 * runnable or not (another process's thread), else -1; `used`: its CPU time from its previous
 * sample to c1, read before its stack (but for its innermost frame); c2, read after it. */
static int fair(const Sampler *S, const ThreadSlot *t, int state, uint64_t used, uint64_t c1,
                uint64_t c2) {
    if (!S->on_time) return 0;
    if (!t->clock) return state != 0;
    if (c2 > c1) return 1;
    uint64_t window = S->now_ns > S->prev_end_ns ? S->now_ns - S->prev_end_ns : 0;
    return window && used + LL_SWITCH_NS >= window && used + LL_SWITCH_MIN_NS <= window;
}

/* The process is gone (or a zombie): nothing more to read.  The first process's end is kept
 * for the capture (attach reports when its target exited). */
static void target_gone(Sampler *S, Target *T, uint64_t tick) {
    T->dead = 1;
    if (T == &S->targets[0] && !S->exit_t) S->exit_t = tick;
}

/* ---- one tick of one process ---- */

/* The GIL and the garbage collector of the interpreter at `interp`, into T: the GIL is in the
 * runtime up to 3.11 and behind the interpreter's pointer from 3.12 on; `locked` and
 * `last_holder` are read apart, so a GIL changing hands meanwhile can name the thread before
 * (its holder is set just after it is locked).  The fields are in the pages the tick reads
 * first (the runtime's, the interpreter's), read with them at the next tick's start. */
static void read_interp(Target *T, uint64_t interp) {
    const LLLayout *L = &T->proc.layout;
    LLMem *m = &T->proc.mem;
    uint64_t gil = 0, holder = 0;
    int32_t locked = 0, collecting = 0;
    if (L->runtime_gil >= 0)
        gil = T->runtime + (uint64_t)L->runtime_gil;
    else if (L->interp_gil >= 0 && ll_mem_read(m, interp + (uint64_t)L->interp_gil, &gil, 8))
        gil = 0;
    if (gil && (L->gil_locked < 0 || L->gil_holder < 0 ||
                ll_mem_read(m, gil + (uint64_t)L->gil_locked, &locked, 4) ||
                ll_mem_read(m, gil + (uint64_t)L->gil_holder, &holder, 8)))
        gil = 0;
    if (L->interp_gc_collecting < 0 ||
        ll_mem_read(m, interp + (uint64_t)L->interp_gc_collecting, &collecting, 4))
        collecting = 0;
    T->interp = interp;
    T->gil = gil;
    T->gil_locked = gil && locked == 1;
    T->gil_holder = gil ? holder : 0;
    T->gc_collecting = collecting != 0;
}

/* Whether a thread that is off a CPU sleeps on the GIL's condition variable: the system call
 * /proc says it is blocked in is a futex wait on a word of that variable (glibc's condition
 * variable waits on words inside it).  Costs an open and a read of /proc: asked only of a
 * thread that ran lately or waited for the GIL at its last read. */
static int sleeps_on_gil(const Target *T, const ThreadSlot *t, int *runnable) {
    const LLLayout *L = &T->proc.layout;
    *runnable = 0;
    if (!T->gil || t->tid <= 0 || L->gil_cond < 0 || L->gil_cond_size <= 0) return 0;
    char buf[256];
    if (read_task_file(T->pid, t->tid, "syscall", buf, sizeof buf) <= 0) return 0;
    *runnable = strncmp(buf, "running", 7) == 0;
    char *end;
    long nr = strtol(buf, &end, 10);
    if (end == buf || nr != SYS_futex) return 0;
    unsigned long long uaddr = strtoull(end, NULL, 16);
    uint64_t cond = T->gil + (uint64_t)L->gil_cond;
    return uaddr >= cond && uaddr < cond + (uint64_t)L->gil_cond_size;
}

static int waits_for_gil(const Target *T, const ThreadSlot *t) {
    int runnable;
    return sleeps_on_gil(T, t, &runnable);
}

/* The same for a snapshot, which has no earlier read to go by.  /proc names no system call for
 * a runnable thread, and a thread waiting for the GIL is woken every switch interval (5 ms) to
 * ask the holder for it: on a busy machine it may then wait for a CPU for milliseconds before
 * it goes back to sleep on the GIL.  So a runnable thread is asked again, every 100 µs, until
 * *until (LL_SNAPSHOT_GIL_NS after the snapshot first watched one, for all its threads: a
 * process with many threads in C code without the GIL, which stay runnable or block elsewhere,
 * is dumped as fast as one with a single such thread). */
#define LL_SNAPSHOT_GIL_NS 100000000u
static int snapshot_waits_for_gil(const Target *T, const ThreadSlot *t, uint64_t *until) {
    int runnable;
    for (;;) {
        if (sleeps_on_gil(T, t, &runnable)) return 1;
        if (!runnable) return 0;
        uint64_t now = ll_monotonic_ns();
        if (!*until) *until = now + LL_SNAPSHOT_GIL_NS;
        if (now >= *until) return 0;
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
}

/* The thread and the GIL at this read (SF_GIL_*): holding it, waiting for it (asleep on it),
 * or neither (running without it, in C code that let it go, or idle); 0 when the interpreter's
 * GIL could not be read.  An idle thread is asked whether it waits for the GIL if it ran
 * lately or waited at its last read; with `ask_until` (a snapshot, which has no last read)
 * every thread that does not hold it is, and a runnable one is watched until it sleeps again
 * (snapshot_waits_for_gil). */
static uint8_t gil_state(const Target *T, ThreadSlot *slot, uint64_t tstate, int idle,
                         uint64_t now, uint64_t *ask_until) {
    if (!T->gil) return 0;
    if (T->gil_locked && T->gil_holder == tstate) {
        slot->gil_wait = 0;
        return SF_GIL_HELD;
    }
    if (ask_until) {
        slot->gil_wait = snapshot_waits_for_gil(T, slot, ask_until);
        return slot->gil_wait ? SF_GIL_WAIT : SF_GIL_NONE;
    }
    int lately = slot->ran_ns && now - slot->ran_ns <= LL_RAN_LATELY_NS;
    slot->gil_wait = idle && (lately || slot->gil_wait) && waits_for_gil(T, slot);
    return slot->gil_wait ? SF_GIL_WAIT : SF_GIL_NONE;
}

/* Whether the object at `obj` is None: its type's name is "NoneType" (ob_type at 8, tp_name
 * at 24 on every 64-bit version), remembered once found (None never moves). */
static int is_none(Target *T, uint64_t obj) {
    if (T->none) return obj == T->none;
    LLMem *m = &T->proc.mem;
    uint64_t type = 0, name = 0;
    char text[9];
    if (ll_mem_read(m, obj + 8, &type, 8) || !type || ll_mem_read(m, type + 24, &name, 8) ||
        !name || ll_mem_read(m, name, text, sizeof text) || memcmp(text, "NoneType", 9))
        return 0;
    T->none = obj;
    return 1;
}

/* Whether the thread whose state is `ts` was raising an exception (the thread state's current
 * exception: from the raise until a handler takes it) or handling one (the top item of its
 * stack of handled exceptions, a running generator's if it is in one, that holds one: an
 * item's value is NULL when empty, and None on 3.11 and 3.12 after a handler ended). */
static int in_exception(Target *T, const uint8_t *ts) {
    const LLLayout *L = &T->proc.layout;
    if (L->tstate_curexc >= 0 && ll_rd64(ts, L->tstate_curexc)) return 1;
    if (L->tstate_exc_info < 0 || L->stackitem_exc_value < 0 || L->stackitem_previous < 0)
        return 0;
    uint64_t item = ll_rd64(ts, L->tstate_exc_info);
    for (int i = 0; item && i < LL_EXC_ITEMS; i++) {
        uint64_t value = 0;
        if (ll_mem_read(&T->proc.mem, item + (uint64_t)L->stackitem_exc_value, &value, 8))
            return 0;
        if (value && !is_none(T, value)) return 1;
        if (ll_mem_read(&T->proc.mem, item + (uint64_t)L->stackitem_previous, &item, 8))
            return 0;
    }
    return 0;
}

/* Counts a read's GIL state for its thread (END's gil_reads). */
static void count_gil(Sampler *S, uint32_t serial, uint8_t gil) {
    if (!gil) return;
    if (serial >= S->ngil_reads) {
        void *arr = S->gil_reads;
        size_t cap = S->ngil_reads;
        if (grow(&arr, &cap, sizeof S->gil_reads[0], (size_t)serial + 1)) return;
        memset((uint64_t(*)[3])arr + S->ngil_reads, 0, (cap - S->ngil_reads) * sizeof S->gil_reads[0]);
        S->gil_reads = arr;
        S->ngil_reads = cap;
    }
    S->gil_reads[serial][(gil >> 4) - 1]++;
}

/* The first thread state of the target's interpreter into *tstate (0: it has none); -1 if the
 * interpreter could not be read, or the process has ended. */
static int first_thread(Sampler *S, Target *T, uint64_t t, uint64_t *tstate) {
    const LLLayout *L = &T->proc.layout;
    LLMem *m = &T->proc.mem;
    uint64_t interp = 0;
    int err = ll_mem_read(m, T->runtime + (uint64_t)L->runtime_interpreters_head, &interp, 8);
    if (!err && interp) err = ll_mem_read(m, interp + (uint64_t)L->interp_threads_head, tstate, 8);
    if (!err && interp) read_interp(T, interp);
    if (err == ESRCH) { /* gone, or a zombie: it has ended */
        target_gone(S, T, t);
        return -1;
    }
    if (err || !interp) {
        T->failures++;
        return -1;
    }
    T->failures = 0;
    return 0;
}

/* The bytes of a thread state the sampler reads: up to the last of the fields it looks at. */
static int tstate_size(const LLLayout *L) {
    int ts_size = L->tstate_thread_id;
    if (L->tstate_curexc > ts_size) ts_size = L->tstate_curexc;
    if (L->tstate_exc_info > ts_size) ts_size = L->tstate_exc_info;
    if (L->tstate_native_thread_id > ts_size) ts_size = L->tstate_native_thread_id;
    if (L->tstate_frame > ts_size) ts_size = L->tstate_frame;
    if (L->tstate_next > ts_size) ts_size = L->tstate_next;
    return ts_size + 8;
}

/* Whether the thread `tid` is one of this process's own (its /proc entry exists). */
static int own_task_exists(pid_t tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return access(path, F_OK) == 0;
}

/* The slot of the thread whose state is `ts`; NULL if out of memory, or with *stale set if the
 * state names no thread that runs: its kernel id is 0 where one is known (3.11+ keep it in the
 * state; this process's own pthread structs give it on 3.10), or, sampling this process, no
 * such thread exists.  A state is read without the interpreter's lock, so a walk can reach one
 * that was freed as it ran: its fields are an ended thread's, or other data.  Seen on 3.10 in
 * CI, 400 threads started one after another: two unnamed threads, with kernel ids 0 and
 * 1953067887, beside the real ones.  Checked only for a thread not seen before. */
static ThreadSlot *thread_of(Sampler *S, Target *T, const uint8_t *ts, int tid_off, int *stale) {
    const LLLayout *L = &T->proc.layout;
    uint64_t ident = ll_rd64(ts, L->tstate_thread_id);
    pid_t tid = 0;
    int own = T->pid == getpid();
    int tid_known = L->tstate_native_thread_id >= 0 || (own && tid_off >= 0);
    if (L->tstate_native_thread_id >= 0) {
        tid = (pid_t)ll_rd64(ts, L->tstate_native_thread_id);
    } else if (tid_off >= 0 && ident) {
        int32_t v = 0;
        if (!ll_mem_read(&T->proc.mem, ident + (uint64_t)tid_off, &v, 4)) tid = v;
    }
    *stale = 0;
    for (int i = 0; i < T->nthreads; i++) {
        if (T->threads[i].ident == ident && T->threads[i].tid == tid) return &T->threads[i];
    }
    int gone = own && tid > 0 && S->own_tasks_listed && !own_task_exists(tid);
    if ((tid_known && tid <= 0) || gone) {
        *stale = 1;
        return NULL;
    }
    return new_thread_slot(S, T, ident, tid);
}

/* ---- parking: holding a thread of this process still while its stack is read ----
 *
 * The sampler reads stacks while the program runs.  A program whose stack changes
 * faster than a walk reads it (a pipeline of generators that yield every microsecond or two, on
 * a machine with a CPU for the sampler and another for the program) fails most walks; read
 * again, the walks that succeed are the ones that happened on a frame that lasts, so short-lived
 * frames vanish from the profile (seen: lizard's tokenizer stages, 10% of its time each when the
 * program was stopped for every read, at 0-0.3%).  So a walk of a thread of this process that
 * raced is done again with the thread held still: the sampler sends it a real-time signal whose
 * handler says it has stopped and waits (on its CPU for LL_PARK_SPIN_NS, then on a futex) until
 * the sampler has copied its frames and code objects.  A thread is only asked when a walk raced while its CPU clock moved (it runs
 * Python code, not a blocking system call, which the signal would interrupt), and only ever
 * waits LL_PARK_MAX_NS, whatever the sampler does.  A thread that does not answer in time
 * (waiting for a CPU) is read as before; one that blocks the signal is never asked.
 *
 * The handler only touches atomics, errno and the futex: nothing that can block on a lock. */
#define LL_PARK_MAX_NS 5000000u /* 5 ms: a stopped thread goes on by itself after this */
/* A stopped thread first waits on its CPU this long, then on the futex: a read of its stack
 * takes a few microseconds, and a thread that slept goes back to the run queue, behind every
 * other runnable thread of a busy machine (seen, beside two CPU hogs: the program's wall time
 * 1.40 of its own while its CPU time was unchanged). */
#define LL_PARK_SPIN_NS 50000u

/* The request: (generation << 32) | tid, 0 when none, LL_PARK_CLAIMED added by the handler
 * that takes it (so that a handler that comes too late, the sampler having taken the request
 * back, cannot take it, nor write the registers of the next one); the one the handler
 * answered; the one whose handler left by itself (LL_PARK_MAX_NS) before it was let go; the
 * last generation let go (the futex word). */
#define LL_PARK_CLAIMED (1ull << 31) /* above any thread id (pid_max is at most 2^22) */
static _Atomic uint64_t request, answered, left_alone;
static _Atomic uint32_t released;
/* Counts the handler's answers (the futex word the sampler sleeps on while it waits for one,
 * `waiting` set meanwhile). */
static _Atomic uint32_t answers;
static _Atomic int waiting;
static uint32_t generation;
static _Atomic int installed; /* 1: ours; -1: the program's signal, never used */
static _Atomic int sleeping;  /* the parked thread went to sleep on the futex */
/* run --native: the request also asks for the thread's registers, which the handler saves here
 * (in the DWARF numbering of native.h) before it answers. */
static _Atomic int want_regs;
static uint64_t parked_regs[LL_NATIVE_REGS];

static void save_regs(const void *context) {
#if LL_NATIVE_CONTEXTS
    const greg_t *g = ((const ucontext_t *)context)->uc_mcontext.gregs;
    static const int dwarf_order[LL_NATIVE_REGS] = {
        REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
        REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
    for (int i = 0; i < LL_NATIVE_REGS; i++) parked_regs[i] = (uint64_t)g[dwarf_order[i]];
#else
    (void)context;
#endif
}

static int park_signal(void) { return SIGRTMAX - 3; }

static inline void ll_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void on_park(int sig, siginfo_t *info, void *context) {
    (void)sig, (void)info;
    int saved = errno;
    uint64_t r = atomic_load(&request);
    if (r && !(r & LL_PARK_CLAIMED) && (pid_t)(uint32_t)r == (pid_t)syscall(SYS_gettid) &&
        atomic_compare_exchange_strong(&request, &r, r | LL_PARK_CLAIMED)) {
        uint64_t mine = r | LL_PARK_CLAIMED;
        uint32_t gen = (uint32_t)(r >> 32);
        uint64_t deadline = ll_monotonic_ns() + LL_PARK_MAX_NS;
        uint64_t spin_end = ll_monotonic_ns() + LL_PARK_SPIN_NS;
        if (atomic_load(&want_regs)) save_regs(context);
        atomic_store(&answered, r);
        atomic_fetch_add(&answers, 1);
        if (atomic_load(&waiting))
            syscall(SYS_futex, &answers, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        for (;;) {
            uint32_t seen = atomic_load(&released);
            if (seen == gen || atomic_load(&request) != mine) break;
            uint64_t now = ll_monotonic_ns();
            if (now >= deadline) {
                atomic_store(&left_alone, r);
                break;
            }
            if (now < spin_end) {
                ll_cpu_relax();
                continue;
            }
            atomic_store(&sleeping, 1);
            if (atomic_load(&released) == seen && atomic_load(&request) == mine) {
                struct timespec left = {0, (long)(deadline - now)};
                syscall(SYS_futex, &released, FUTEX_WAIT_PRIVATE, seen, &left, NULL, 0);
            }
            atomic_store(&sleeping, 0);
        }
    }
    errno = saved;
}

/* Installs the handler that parks a thread: 0, or -1 if the signal is the program's (then
 * nothing is ever parked).  Once per process; the handler stays. */
static int ll_park_install(void) {
    if (installed) return installed > 0 ? 0 : -1;
    struct sigaction old, sa;
    if (sigaction(park_signal(), NULL, &old) || (old.sa_flags & SA_SIGINFO) ||
        (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
        installed = -1; /* the program's */
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_park;
    /* SA_NODEFER: the signal is not blocked while the handler runs, so that a thread's SigBlk
     * is the program's own mask even when a late signal is being handled (a thread seen
     * "blocking" it then was never asked again, and its stacks were read racing). */
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(park_signal(), &sa, NULL) == 0 ? 1 : -1;
    return installed > 0 ? 0 : -1;
}

/* Whether thread `tid` of this process blocks the signal, and whether it has one pending: 0,
 * or -1 if that cannot be told. */
static int ll_park_signal_state(pid_t tid, int *blocked, int *pending) {
    char buf[2048];
    if (read_task_file(getpid(), tid, "status", buf, sizeof buf) < 0) return -1;
    const char *pnd = strstr(buf, "\nSigPnd:"), *blk = strstr(buf, "\nSigBlk:");
    if (!pnd || !blk) return -1;
    int bit = park_signal() - 1;
    *blocked = (int)(strtoull(blk + 8, NULL, 16) >> bit & 1);
    *pending = (int)(strtoull(pnd + 8, NULL, 16) >> bit & 1);
    return 0;
}

/* Whether thread `tid` of this process blocks the signal, 1 if that cannot be told: such a
 * thread is not asked, or the signal would wait in it, where the program could see it. */
static int ll_park_blocked(pid_t tid) {
    int blocked, pending;
    return ll_park_signal_state(tid, &blocked, &pending) || blocked;
}

/* Asks thread `tid` of this process to stop where it is and waits up to `wait_ns` for it (on
 * this CPU for the first `spin_ns`, then asleep until its handler answers, which leaves the
 * CPU to it): 1 if it has stopped (ll_unpark() lets it go; it goes by itself after
 * LL_PARK_MAX_NS), else 0.
 * Between the two, the caller must not take a lock or allocate: the stopped thread may hold
 * any lock of the process. */
static int ll_park(pid_t tid, uint64_t wait_ns, uint64_t spin_ns, int check_mask) {
    if (installed <= 0 || tid <= 0) return 0;
    struct sigaction cur;
    if (sigaction(park_signal(), NULL, &cur) || !(cur.sa_flags & SA_SIGINFO) ||
        cur.sa_sigaction != on_park) {
        installed = -1; /* the program has taken the signal since: never send it again */
        return 0;
    }
    /* check_mask (run --native, which parks each running thread at every tick): a thread that
     * blocks the signal now (the program may change its mask at any time) is not sent it:
     * asked once while it let it through, it was then sent it at every tick, to wait pending
     * where the program's sigpending() saw it.  A walk that raced parks its thread far less
     * often, and reads the mask when it first parks it and after a park that failed: the
     * read, of a /proc file, before each of its parks left a generator pipeline sampled at
     * 2 kHz with 3.1% of its samples torn where 1% is its bound (under AddressSanitizer).
     * One that has the signal pending still (asked at an earlier tick, kept off a CPU past
     * that wait, and not on one since) is not sent another, which would queue behind it: the
     * pending one answers this request when the thread runs (the handler takes any request
     * for its thread).  Refused instead, a thread kept off a CPU for a tick lost its C frames
     * at every tick until it ran.  The request is made before the mask is read: a pending
     * signal taken between the two (the thread given a CPU just then) finds it, instead of
     * finding none and leaving the sampler to wait for an answer that cannot come. */
    if (++generation == 0) generation = 1;
    uint64_t r = (uint64_t)generation << 32 | (uint32_t)tid;
    atomic_store(&request, r);
    int send = 1;
    if (check_mask) {
        int blocked, pending;
        if (ll_park_signal_state(tid, &blocked, &pending) || blocked) {
            uint64_t expected = r;
            if (atomic_compare_exchange_strong(&request, &expected, 0)) return 0;
            send = 0; /* taken by a pending signal meanwhile: its handler answers */
        } else {
            send = !pending && atomic_load(&request) == r;
        }
    }
    if (send && syscall(SYS_tgkill, getpid(), tid, park_signal())) {
        uint64_t expected = r;
        if (atomic_compare_exchange_strong(&request, &expected, 0)) return 0;
    }
    uint64_t start = ll_monotonic_ns();
    for (;;) {
        uint32_t seen = atomic_load(&answers);
        if (atomic_load(&answered) == r) return 1;
        uint64_t elapsed = ll_monotonic_ns() - start;
        uint64_t expected = r;
        /* Taken back unless a handler has just taken it: then it answers in a moment. */
        if (elapsed >= wait_ns && atomic_compare_exchange_strong(&request, &expected, 0))
            return 0; /* a late handler finds no request and goes on */
        if (elapsed < spin_ns) {
            ll_cpu_relax();
            continue;
        }
        /* Asleep until an answer (the handler wakes the futex when `waiting` is set; set
         * before `answered` is looked at again, one of the two sees the other), or a moment
         * for a handler that took the request as the wait ended (it may be kept off its CPU
         * between the two, where spinning would compete with it). */
        uint64_t left = expected != r ? 20000u : wait_ns - elapsed;
        atomic_store(&waiting, 1);
        if (atomic_load(&answered) != r) {
            struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
            syscall(SYS_futex, &answers, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
        }
        atomic_store(&waiting, 0);
    }
}

static void ll_unpark(void) {
    atomic_store(&released, generation);
    atomic_store(&request, 0);
    if (atomic_load(&sleeping)) syscall(SYS_futex, &released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* ---- run --native: a thread of this process, parked, as its C stack is ----
 *
 * A process cannot stop its own threads with ptrace, and an unwind inside the signal handler
 * would run libdw where the thread was stopped, holding whatever lock it held.  So the thread
 * is parked as above, its handler saving the registers it was stopped with; while it waits
 * there its Python frames are read and its stack, from its stack pointer to the top of the
 * mapping it is in, is copied (one system call: no lock, no allocation); once it has gone on,
 * the copy is unwound by libdw from those registers (native.c) and merged with the Python
 * frames. */
#define LL_NATIVE_STACK_COPY (512u << 10) /* the most of a stack copied (deeper: cut short) */
/* How long the sampler waits for a thread to answer (past LL_PARK_WAIT_NS, asleep): one kept
 * off a CPU by others answers when it is given one, which on a busy machine takes longer than
 * the walk of a raced thread may wait; one that does not is sampled without its C frames.  Its
 * stack is the one it had at the tick, however late it answers: off a CPU it runs no code of
 * its own, and the signal is taken before any.  So the wait is up to half an interval from
 * the tick's start, and no less than LL_NATIVE_PARK_WAIT_NS: a budget the tick's threads share
 * (a thread asked once it is spent waits LL_PARK_WAIT_NS), so that a tick with several threads
 * kept off a CPU is not late by 2 ms for each, as it was (seen in CI, two CPU hogs beside,
 * a 2 ms wait at 200 Hz: 291 of 545 samples of a numpy program without their C frames).  Three
 * quarters made the ticks late more often (a numpy program at 200 Hz, its thread at nice 5
 * beside two CPU hogs: 12-29 ticks missed of 440, against 8-21 at half and 3-8 before) and
 * read no more stacks (9-12% of the samples without C frames, 6-12% at half, 11-18% before). */
#define LL_NATIVE_PARK_WAIT_NS 2000000u
static uint64_t native_park_wait(const Sampler *S) {
    uint64_t budget = S->interval_ns / 2, now = ll_monotonic_ns();
    if (budget < LL_NATIVE_PARK_WAIT_NS) budget = LL_NATIVE_PARK_WAIT_NS;
    uint64_t until = S->now_ns + budget;
    return until > now + LL_PARK_WAIT_NS ? until - now : LL_PARK_WAIT_NS;
}

/* The mapping of this process that holds `addr`, from /proc/self/maps, read with system calls
 * alone (the thread whose stack it is may be parked holding the allocator's or stdio's lock):
 * 0, or -1 if none does. */
static int mapping_of(uint64_t addr, uint64_t *lo, uint64_t *hi) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096];
    size_t have = 0;
    int found = -1, skipping = 0; /* skipping: the rest of a line longer than the buffer */
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            if (skipping) {
                skipping = 0;
                line = nl + 1;
                continue;
            }
            char *end;
            unsigned long long a = strtoull(line, &end, 16);
            unsigned long long b = *end == '-' ? strtoull(end + 1, NULL, 16) : 0;
            if (addr >= a && addr < b) {
                *lo = a;
                *hi = b;
                found = 0;
                break;
            }
            line = nl + 1;
        }
        if (found == 0) break;
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof buf - 1) { /* a line longer than the buffer: its end is skipped */
            have = 0;
            skipping = 1;
        }
    }
    close(fd);
    return found;
}

/* Parks thread `slot` of this process with its registers saved: 1, the caller then reads its
 * Python frames and calls context_taken, which lets it go; 0 if it could not be parked (it
 * blocks the signal now, or did not answer in time: waiting for a CPU). */
static int park_for_context(Sampler *S, ThreadSlot *slot) {
    if (!S->ctx_stack || !slot->tid) return 0;
    atomic_store(&want_regs, 1);
    int parked = ll_park(slot->tid, native_park_wait(S), LL_PARK_WAIT_NS, 1);
    atomic_store(&want_regs, 0);
    if (parked) {
        slot->held_ns = ll_monotonic_ns();
        S->native_stops++;
    } else {
        S->native_unanswered++;
    }
    return parked;
}

/* The parked thread's registers and stack into S->ctx (if `keep`: its walk was read), then it
 * goes on.  The copy begins below the stack pointer by the red zone (128 bytes a function may
 * use without moving it, where a leaf function may have saved a register), which the kernel
 * leaves as it was when it puts the signal's frame below. */
#define LL_RED_ZONE 128u
static void context_taken(Sampler *S, ThreadSlot *slot, int keep) {
    LLNativeContext *c = &S->ctx;
    memcpy(c->regs, parked_regs, sizeof c->regs);
    uint64_t sp = c->regs[7]; /* rsp */
    c->sp = sp - LL_RED_ZONE;
    c->tid = 0;
    if (keep && (sp < slot->stack_lo || sp >= slot->stack_hi) &&
        mapping_of(sp, &slot->stack_lo, &slot->stack_hi))
        slot->stack_lo = slot->stack_hi = 0;
    if (keep && c->sp >= slot->stack_lo && sp < slot->stack_hi) {
        /* Read, not copied with memcpy: the mapping's end, as /proc tells it, can be that of
         * a neighbour merged with the stack (anonymous mappings side by side are one), which
         * may be unmapped since (seen on Debian sid: a fault at the page past a sleeping
         * thread's stack).  The system call stops at the first page that is not there. */
        size_t want = (size_t)(slot->stack_hi - c->sp);
        if (want > LL_NATIVE_STACK_COPY) want = LL_NATIVE_STACK_COPY;
        struct iovec local = {S->ctx_stack, want}, remote = {(void *)(uintptr_t)c->sp, want};
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got > 0) {
            c->top = slot->stack_hi;
            c->len = (size_t)got;
            c->stack = S->ctx_stack;
            c->tid = slot->tid;
        }
    }
    /* Its handler gave up waiting (the sampler was held up past LL_PARK_MAX_NS): the thread
     * ran on while its stack was read, and what was read is of no one moment. */
    if (atomic_load(&left_alone) == ((uint64_t)generation << 32 | (uint32_t)slot->tid)) c->tid = 0;
    ll_unpark();
    slot->held_total_ns += ll_monotonic_ns() - slot->held_ns;
}

/* The innermost frame of a thread, where a reading of its stack starts; ok = 0: it could not be
 * read, and the walk from it is torn. */
typedef struct {
    uint64_t frame;
    int ok;
} TopFrame;

/* The innermost frame from the thread state `ts` (no allocation, no lock: the thread may be
 * parked): in `ts` itself on 3.10 and 3.13+, through the thread's C stack on 3.11 and 3.12. */
static TopFrame top_frame(Target *T, const uint8_t *ts) {
    TopFrame top = {0, 1};
    top.frame = ll_top_frame(&T->proc, ts, &top.ok);
    return top;
}

/* Walks the thread's stack, reading its thread state (`ts`, ts_size bytes, read at `tstate`)
 * again before each further attempt.  The first walk starts from `early`, the innermost frame
 * read before the thread's CPU clock (sample_thread), if it was; every other from the frame in
 * the thread state just read.  A thread of this process that ran while its first walk
 * raced (its CPU clock, `c1` before the walk, moved) is read the second time parked (above):
 * read again while it runs, the walks that succeed would be the ones that fell on a frame that
 * lasts.  That is not enough for a thread whose walks race often (LL_RACY of its recent ones):
 * first walks that succeed are still more often those of frames that last (seen: lizard's
 * tokenizer stages at half the share they had with the program stopped for every read), so
 * while it runs, each of its samples is read parked, whatever the first walk found.  *drawn:
 * the stack kept was read at a moment that owes nothing to what the thread was doing (its first
 * walk, or a racy thread's parked one); a walk read again because the first raced was read just
 * after the stack changed, at the start of a call or back in its caller, and is no fair draw
 * ("fair samples", above: its weight goes to the thread's fair samples; seen, such reads kept
 * as fair put the synthetic diff program's `run`, the loop between its calls, beyond noise
 * between two runs of the same program).  *gone: the process ended meanwhile. */
static int walk_thread(Sampler *S, Target *T, ThreadSlot *slot, uint64_t tstate, uint8_t *ts,
                       size_t ts_size, const TopFrame *early, uint64_t c1, int context, int *n,
                       int *truncated, int *gone, int *drawn) {
    int status = LL_WALK_TORN, depth = 0;
    int racy = slot->raced > LL_RACY;
    *drawn = 1;
    S->ctx.tid = 0;
    for (int attempt = 0; attempt < LL_WALK_ATTEMPTS; attempt++) {
        int parked = 0;
        /* run --native: the first walk is read parked, with the thread's registers and stack
         * (context_taken), so that its C frames are of the same moment. */
        int for_context = attempt == 0 && context && park_for_context(S, slot);
        if (for_context) {
            ll_mem_refresh(&T->proc.mem);
            if (ll_mem_read(&T->proc.mem, tstate, ts, ts_size)) {
                context_taken(S, slot, 0);
                continue;
            }
        } else if (attempt) {
            uint64_t c = c1;
            if (attempt == 1 && slot->clock) read_cpu_ns(slot, &c);
            /* Not running during the first walk: its stack stood still, the walk stands.  Asked
             * and not answering: it is waiting for a CPU, read again. */
            if (c == c1 && status == LL_WALK_OK) break;
            if (c > c1 && !slot->park) slot->park = ll_park_blocked(slot->tid) ? -1 : 1;
            parked = c > c1 && slot->park > 0 && ll_park(slot->tid, LL_PARK_WAIT_NS, LL_PARK_WAIT_NS, 0);
            if (parked)
                S->parked++;
            else if (status != LL_WALK_OK)
                S->retried++; /* a walk that raced, read again running (a racy thread's walk
                                 that checked out, read again because it did not answer, is
                                 not: it waits for a CPU, its stack still) */
            if (c > c1 && slot->park > 0 && !parked && ll_park_blocked(slot->tid))
                slot->park = -1; /* it blocked the signal since: it is never asked again */
            ll_mem_refresh(&T->proc.mem);
            int rerr = ll_mem_read(&T->proc.mem, tstate, ts, ts_size);
            *gone = rerr == ESRCH;
            if (rerr) {
                if (parked) ll_unpark();
                break;
            }
        }
        TopFrame top = attempt || !early || for_context ? top_frame(T, ts) : *early;
        status = top.ok ? ll_walk_read(&S->st, &T->proc, top.frame, &depth, truncated)
                        : LL_WALK_TORN;
        if (parked) ll_unpark();
        if (for_context) /* (a further walk, if this one failed, is of another moment) */
            context_taken(S, slot, status == LL_WALK_OK);
        *drawn = attempt == 0 || (attempt == 1 && parked && racy);
        if (status == LL_WALK_OK) status = ll_walk_name(&S->st, &T->proc, depth, n);
        if (!attempt) /* the fraction of its first walks that raced, lately (x 2^16) */
            slot->raced = slot->raced - slot->raced / 16 + (status != LL_WALK_OK ? 4096u : 0u);
        if (status == LL_WALK_OK && (for_context || !(attempt == 0 && racy && slot->clock)))
            break;
    }
    return status;
}

/* What the sample just read stands for ("fair samples", above), into *p, which comes with the
 * thread's CPU time since its previous sample and the ticks this one covers: 1 if *p is to be
 * written, 0 if it went to the thread's pool. */
static int weigh(Sampler *S, ThreadSlot *slot, int idle, int is_fair, Pending *p,
                 uint64_t tick) {
    uint64_t cpu = p->cpu, ticks = S->cpu_mode ? 0 : S->covers;
    if (S->cpu_mode) p->repeat = 1; /* but a fair sample's (pay_flat) */
    if (S->max_ticks) { /* a snapshot: each read stands for itself, once */
        if (idle) p->flags |= SF_IDLE;
        p->repeat = 1; /* (not the ticks a late first tick covers: seen, 3 records a read) */
        return 1;
    }
    if (idle) {
        /* Where a thread waits is where it waits, whenever it is read; what little CPU it
         * used since its previous sample goes to the pool. */
        p->flags |= SF_IDLE;
        to_pool(slot, cpu, 0);
        p->cpu = 0;
        return !S->cpu_mode;
    }
    if (is_fair) {
        slot->stretch = 0;
        to_pool(slot, cpu, ticks);
        pay_flat(S, slot, p);
        slot->recent[slot->nrecent++ % LL_RECENT] = p->stack;
        slot->fair_tick = due_tick(S);
        /* Wall mode: a record is a tick (it takes one at least: each brings its own). */
        return S->cpu_mode || p->repeat > 0;
    }
    if (!recent_fair(S, slot)) {
        /* No fair sample lately: the machine is so busy that the thread is hardly ever seen
         * running on time.  What it stands for stays where it was found: given to fair
         * samples further away in time, it would go to another phase of the program (seen: a
         * function that ran 0.4 s of a 2 s run missing from the report, its time given to the
         * function before it).  What waited in the pool came in while its last fair samples
         * were recent, and goes to them (flush_pool), as when its sampling ends: put on this
         * one read, found just after a stretch of unfair ones (up to recent_ticks of the
         * thread's time), it made a few reads most of a busy run's weight (in the pipeline
         * test's program, sanitized and beside a second one, 8 of 683 reads carried 14% of its
         * CPU time, and a stage's share moved 10 points between identical runs).  That is at
         * the stretch's first found read; later ones take what came in since (the CPU of idle
         * reads, the ticks of torn ones: not worth a record of their own, which a flush of
         * them made, nor their place in an earlier phase). */
        if (!slot->stretch) {
            flush_pool(S, slot, tick);
            slot->stretch = 1;
        } else {
            p->cpu += slot->pool_ns;
            p->repeat += slot->pool_ticks;
            slot->pool_ns = slot->pool_ticks = 0;
        }
        slot->since_ns = slot->since_ticks = 0;
        return 1;
    }
    S->deferred++;
    to_pool(slot, cpu, ticks);
    return 0;
}

enum { THREAD_SKIPPED, THREAD_PENDING, THREAD_GONE };

/* The pages a thread's walk is likely to use, into out (LL_PAGES_AHEAD at most): those of its
 * last walk, then those of the one before that the last did not use; how many. */
static int likely_pages(const ThreadSlot *slot, uint64_t *out) {
    int n = slot->npages[0];
    memcpy(out, slot->pages[0], (size_t)n * sizeof out[0]);
    for (int i = 0; i < slot->npages[1] && n < LL_PAGES_AHEAD; i++) {
        int seen = 0;
        for (int j = 0; j < slot->npages[0] && !seen; j++) seen = out[j] == slot->pages[1][i];
        if (!seen) out[n++] = slot->pages[1][i];
    }
    return n;
}

static int stop_slot(ThreadSlot *slot);
static void release_thread(ThreadSlot *slot, int sig);

/* The walk's Python frames (S->st.frames, n of them) as one number (FNV-1a). */
static uint64_t walk_key(const LLStacks *st, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        h = (h ^ st->frames[i].func) * 1099511628211ull;
        h = (h ^ st->frames[i].off) * 1099511628211ull;
    }
    return h ^ (uint64_t)n;
}

/* --native: the thread's stack with its C frames (native.c), read while it is stopped
 * (held already, before its walk, but for a thread that ran during the walk after it was
 * found asleep: stopped now); how many frames are in S->st.frames, -1 (S->st.frames left as
 * the walk read them) where the thread cannot be unwound. */
static int native_frames(Sampler *S, Target *T, ThreadSlot *slot, int n) {
    if (slot->tid <= 0 || T->native_failed) return -1;
    if (!T->native) {
        char why[256];
        if (!(T->native = ll_native_open(T->pid, S->max_ticks != 0, why, sizeof why))) {
            T->native_failed = 1;
            return -1;
        }
    }
    if (T->native_own) { /* run --native: its context, taken with its walk (context_taken) */
        if (S->ctx.tid != slot->tid) return -1;
        S->ctx.tid = 0;
        int unwound = ll_native_unwind_context(T->native, &S->ctx);
        return unwound > 0 ? ll_native_merge(T->native, &S->st, &T->proc, n) : -1;
    }
    int sig = slot->held ? slot->held_sig : stop_slot(slot);
    if (sig == -1) return -1;
    if (!slot->held) {
        slot->held_ns = ll_monotonic_ns();
        S->native_stops++;
    }
    int unwound = ll_native_unwind(T->native, slot->tid);
    /* Stopped, it is on no CPU: its count of arrivals there grows only once it runs again. */
    slot->native_runs = runs_of(slot);
    /* Let go before its frames are named (the slow part); held on for a snapshot's
     * variables, read after. */
    if (!slot->held || !S->locals_frames) release_thread(slot, sig);
    return unwound > 0 ? ll_native_merge(T->native, &S->st, &T->proc, n) : -1;
}

/* --native: whether the thread's last C stack stands for it still, with `cpu_ns` its CPU time
 * now: it has run no more since that stack was read, but for what the stop to read it cost it
 * (its system call ended, and was started again, after its CPU time was read; a thread of this
 * process, the end of its signal handler: found with little more, at most
 * LL_NATIVE_SETTLE_NS, at the next look, what it used since is that). */
#define LL_NATIVE_SETTLE_NS 100000u
static int native_unchanged(const ThreadSlot *slot, uint64_t cpu_ns) {
    return slot->native_stack && (slot->fd >= 0 || slot->clock) &&
           (cpu_ns == slot->native_cpu_ns ||
            (slot->native_settle && cpu_ns - slot->native_cpu_ns <= LL_NATIVE_SETTLE_NS));
}

/* attach --native: another process's thread found runnable (its state 'R') that has not been on
 * a CPU since it was let go after its last unwind: still waiting for one to end the stop's
 * interruption of its system call (a busy machine keeps it waiting for milliseconds).  It has
 * not run: its C stack is the one read then.  Taken for running, it was stopped a second time
 * (a sleeping thread's two stops, beside two CPU hogs). */
static int native_not_run_since(const ThreadSlot *slot) {
    return slot->native_settle && slot->native_runs && runs_of(slot) == slot->native_runs;
}

/* Another process's thread: running (1), not (0), unknown (-1); with --native, a thread that
 * has not been on a CPU since its last unwind is not running (native_not_run_since). */
static int thread_state(const Sampler *S, const ThreadSlot *slot) {
    int state = is_running(slot);
    if (state == 1 && S->native && native_not_run_since(slot)) state = 0;
    return state;
}

/* --native: the sample's stack, its C frames with the Python frames (n in S->st.frames) in
 * place of the eval loop's; the Python frames alone where the C stack cannot be read.  A thread
 * that is not running and has used no CPU time since its C stack was last read (its schedstat
 * run time, which counts every run that ended), with the same Python frames, is not stopped
 * again: its stack is the one read then (but for the CPU the stop itself cost it, below).  So
 * a thread that sleeps is stopped once, not at every sample (a stop ends the system call it
 * waits in, which the kernel starts again or, for a few calls, returns EINTR to the program). */
static uint32_t native_stack(Sampler *S, Target *T, ThreadSlot *slot, int n, uint64_t cpu_ns,
                             int state, int *unread) {
    uint64_t key = walk_key(&S->st, n);
    if (!slot->held && (state == 0 || slot->clock) && key == slot->native_key &&
        native_unchanged(slot, cpu_ns)) {
        if (cpu_ns != slot->native_cpu_ns) slot->native_settle = 0;
        slot->native_cpu_ns = cpu_ns;
        return slot->native_stack;
    }
    int nframes = native_frames(S, T, slot, n);
    *unread = nframes < 0;
    uint32_t stack = ll_intern_walk(&S->st, 0, nframes < 0 ? n : nframes);
    slot->native_stack = nframes < 0 ? 0 : stack;
    slot->native_cpu_ns = cpu_ns;
    slot->native_key = key;
    slot->native_settle = nframes >= 0;
    return stack;
}

/* One thread of a tick: its CPU time, its stack, what the sample stands for.  THREAD_PENDING:
 * *out is to be written; THREAD_GONE: the process ended while the stack was read. */
static int sample_thread(Sampler *S, Target *T, ThreadSlot *slot, uint64_t tstate, uint8_t *ts,
                         size_t ts_size, uint64_t t, uint64_t now, Pending *out) {
    slot->seen = S->ticks;
    /* The innermost frame of a thread that ran lately is read before its CPU clock: reading
     * the clock of a thread that is on a CPU takes its run queue's lock, and a thread that
     * reads its own CPU clock meanwhile (or otherwise needs that lock) waits for it there, so
     * a stack read just after the clock finds it at such calls far more often than it spends
     * time there.  Seen on 3.11, whose innermost frame is reached through the
     * thread's C stack (3.12's too): a program reading its CPU clock between units of work,
     * beside two CPU hogs, was found in the loop around the units in 4.6 and 6.8% of the
     * samples taken while it had run all the time since the previous one, and in 2.2 and 2.8%
     * with the clock left unread; on 3.13, which keeps the frame in the thread state (read
     * before, as 3.10 does), 2.3 and 2.8% against 2.6 and 4.1%.  Not for a thread that has not
     * run for LL_RAN_RECENTLY_NS (asleep: off a CPU, its clock is read without the lock, and in
     * cpu mode it is skipped unread), nor for another process's (its schedstat takes no lock).
     * A busy thread kept off a CPU for a tick or two by others is no sleeper: taken for one
     * after a single tick without CPU time, beside two CPU hogs, the loop's share went back to
     * 2.5-4.3% (four runs). */
    TopFrame top;
    const TopFrame *early = NULL;
    if (slot->clock && slot->ran_ns && now - slot->ran_ns <= LL_RAN_RECENTLY_NS) {
        top = top_frame(T, ts);
        early = &top;
    }
    uint64_t c1 = slot->cpu_ns;
    read_cpu_ns(slot, &c1);
    uint64_t used = c1 > slot->cpu_ns ? c1 - slot->cpu_ns : 0;
    /* Another process's thread is asked for its state (schedstat is too coarse to tell);
     * a thread of this process that used no CPU since its last sample is not running (its
     * clock counts the time it has been on a CPU up to now). */
    int state = slot->tick_state; /* read by hold_thread, for this tick only */
    slot->tick_state = STATE_UNREAD;
    if (slot->clock) state = -1;
    else if (state == STATE_UNREAD) state = thread_state(S, slot);
    if (S->cpu_mode && used == 0 && state != 1)
        return THREAD_SKIPPED; /* CPU mode: only threads that ran */
    int n = 0, truncated = 0, gone = 0, drawn = 1;
    /* The pages its previous walks used (its frames, their code objects: mostly the same from
     * tick to tick), read in one system call after its clock, not one by one during the walk;
     * read after the clock, they are read when its stack is (fair samples, above).  With the
     * tick's first pages read at once (sample_target), a busy loop's tick made 2 reads of the
     * program's memory where it made 5 (3.11) to 11 (3.10, whose frames are objects of their
     * own); the call-dense workload, 11-15 where it made 20 (3.10), 3-5 where 5-6 (3.11). */
    LLMem *mem = &T->proc.mem;
    if (T->nhead < 0) { /* what the tick read before its first walk (sample_target) */
        memcpy(T->head, mem->used, (size_t)mem->nused * sizeof mem->used[0]);
        T->nhead = mem->nused;
    }
    ll_mem_new_walk(mem);
    uint64_t ahead[LL_PAGES_AHEAD];
    int nahead = likely_pages(slot, ahead);
    ll_mem_prefetch(mem, ahead, nahead);
    /* run --native: a thread of this process whose C stack is to be read (native_stack). */
    int context = S->native && T->native_own && !T->native_failed && !native_unchanged(slot, c1);
    int status = walk_thread(S, T, slot, tstate, ts, ts_size, early, c1, context, &n, &truncated,
                             &gone, &drawn);
    /* Read with the walk's pages, so that its page (the thread state's handled-exception item,
     * past the bytes read of it) joins the ones the next tick reads at once. */
    int exc = status == LL_WALK_OK && !gone && in_exception(T, ts);
    /* Likewise the task it runs, if any: its stack is cut below the task's coroutine. */
    uint32_t task = 0;
    if (status == LL_WALK_OK && !gone && S->tasks && ll_tasks_supported(&T->proc.layout))
        ll_task_stack(&T->tasks, &S->st, &T->proc, T->interp, tstate, &n, &task, now);
    memcpy(slot->pages[1], slot->pages[0], sizeof slot->pages[0]);
    slot->npages[1] = slot->npages[0];
    memcpy(slot->pages[0], mem->used, (size_t)mem->nused * sizeof mem->used[0]);
    slot->npages[0] = mem->nused;
    uint64_t c2 = c1;
    read_cpu_ns(slot, &c2);
    uint64_t cpu = c2 > slot->cpu_ns ? c2 - slot->cpu_ns : 0;
    slot->cpu_ns = c2;
    if (gone) { /* the process ended while its stack was read: not a torn sample */
        target_gone(S, T, t);
        return THREAD_GONE;
    }
    /* Idle: off a CPU now and (for a thread with a precise clock) ran less than a tenth of
     * the time since the previous tick: sleeping, blocked, waiting for the GIL; unless it ran
     * lately and is waiting for a CPU (runnable: a busy machine's busy thread). */
    uint64_t window = now > S->prev_end_ns ? now - S->prev_end_ns : 0;
    if (c2 > c1 || used) slot->ran_ns = now;
    int idle = slot->clock ? c2 == c1 && used * 10 < window && !waits_for_cpu(slot, now)
                           : state == 0;
    /* A tick in which the RSS grew: a thread that ran since its previous sample, however
     * briefly, may be what grew it, and is read where it was found (the growth is shared
     * among such samples).  Left idle, a thread that allocates and then sleeps (a cache
     * filled between waits) had none: in cpu mode its growth waited for the next busy sample
     * (seen: 48 MB grown in steps between 40 ms sleeps given to the fork that followed). */
    if (idle && S->rss_grew && (used || c2 > c1)) idle = 0;
    if (status != LL_WALK_OK) {
        S->torn++; /* what it stands for goes to the pool, as an unfair sample's */
        to_pool(slot, cpu, idle || S->cpu_mode ? 0 : S->covers);
        return THREAD_SKIPPED;
    }
    uint8_t gil =
        gil_state(T, slot, tstate, idle, now, S->max_ticks ? &S->snapshot_gil_until : NULL);
    /* --native: its C frames, the eval loop's replaced by the Python frames just read. */
    int unread = 0; /* --native: its C stack could not be read (END's native_unread) */
    uint32_t stack =
        S->native && !task
            ? native_stack(S, T, slot, n, c2, state, &unread)
            : ll_intern_walk(&S->st, task ? ll_intern_stack(&S->st, 0, task, 0) : 0, n);
    count_gil(S, slot->serial, gil);
    if (S->max_ticks && gil == SF_GIL_WAIT) idle = 1; /* a snapshot: waiting, whatever its state */
    /* A collection runs on the thread that holds the GIL: its frames are the ones that
     * started it (an allocation, or gc.collect()), and <GC> is on top of them. */
    uint32_t gc = gil == SF_GIL_HELD && T->gc_collecting && stack ? ll_gc_func(&S->st) : 0;
    if (gc) stack = ll_intern_stack(&S->st, stack, gc, 0);
    slot->last_stack = stack;
    /* A snapshot with --locals: the innermost frames' variables, read just after their walk. */
    for (int i = 0; i < S->locals_frames && i < n; i++)
        ll_frame_locals(&S->locals, &T->proc, S->st.frame_addr[i], slot->serial, i,
                        slot->held);
    uint8_t flags = (uint8_t)((truncated ? SF_TRUNCATED : 0) | gil);
    if (exc) flags |= SF_EXCEPTION;
    Pending p = {slot->serial, stack, flags, cpu, 0, S->covers};
    int is_fair = !idle && (S->rss_grew || (drawn && fair(S, slot, state, used, c1, c2)));
    if (!weigh(S, slot, idle, is_fair, &p, t))
        return THREAD_SKIPPED;
    if (truncated) S->truncated++;
    if (unread) S->native_unread++;
    *out = p;
    return THREAD_PENDING;
}

#define LL_HOLD_WAIT_NS 100000000u
/* What a stop of a traced thread gives back when it goes on: the signal it stopped at (one
 * that arrived before the interrupt), none for the interrupt's own stop. */
static int stop_signal(int status) {
    return (status >> 16) != PTRACE_EVENT_STOP ? WSTOPSIG(status) : 0;
}

/* Stops the slot's thread, of another process (PTRACE_SEIZE, then PTRACE_INTERRUPT: no
 * signal, nothing the process or its parent sees): the signal to give back when it goes on (one
 * that arrived meanwhile), 0; -1 if it is not stopped.  It stops at once if it runs or waits in
 * a system call (which goes on once it is let go); one in a sleep that ignores signals (disk
 * I/O, a frozen cgroup), or whose stop another thread of this process waited for first, may
 * not: given up after LL_HOLD_WAIT_NS, it stays traced with its stop to come (a thread only
 * stopped can be let go), so it is "pending": each later call looks whether it has stopped,
 * lets it go then (or forgets it once it has ended), and does not stop it again meanwhile. */
static int stop_slot(ThreadSlot *slot) {
    pid_t tid = slot->tid;
    int status = 0;
    if (slot->stop_pending) {
        pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
        if (r == 0) return -1; /* not stopped yet */
        slot->stop_pending = 0;
        if (r == tid && WIFSTOPPED(status))
            ptrace(PTRACE_DETACH, tid, 0, (void *)(intptr_t)stop_signal(status));
        return -1; /* stopped and let go, ended, or no longer traced: this sample goes without */
    }
    if (ptrace(PTRACE_SEIZE, tid, 0, 0)) return -1;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        return -1;
    }
    uint64_t deadline = ll_monotonic_ns() + LL_HOLD_WAIT_NS;
    for (;;) {
        pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
        if (r == tid) break;
        if (r < 0 && errno != EINTR) return -1; /* gone, or no longer traced */
        if (ll_monotonic_ns() >= deadline) {
            slot->stop_pending = 1;
            return -1;
        }
        struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
    }
    if (!WIFSTOPPED(status)) return -1; /* it ended (and was reaped here) */
    /* Stopped by the interrupt, or at a signal that arrived first: given back on release. */
    return stop_signal(status);
}
/* A thread of another process is stopped while its stack is read (PTRACE_SEIZE, then
 * PTRACE_INTERRUPT: no signal, nothing the process or its parent sees), its thread state read
 * again once it is:
 * - dump --locals: one found running Python code (holding the GIL), as a variable of a running
 *   frame changes under the reads, and an object it held may be freed and its memory reused
 *   meanwhile (seen: a loop's int counter read as a range object).  Only Python code changes
 *   Python variables, and only the thread holding the GIL runs it: another one running waits
 *   for the GIL (and is watched for it, gil_state) or runs C code without it, and its frames
 *   stay as they are.  Where the GIL cannot be read, every running thread is held.
 * - --native: any thread whose C stack is to be read (all but one that has not run since its
 *   last was, native_unchanged), so that its Python and C frames are of one moment.  Left
 *   running through its walk, a thread that held no GIL when the GIL was read (in numpy's
 *   matrix product) took it back, ran its loop's next line, and was stopped in the next
 *   product: the C frames of one line under the other (seen beside two CPU hogs).
 * The signal to give back when it goes on (one that arrived meanwhile), 0; -1: not stopped
 * (none of those, or ptrace refused: then read as it runs). */
static int hold_thread(Sampler *S, Target *T, ThreadSlot *slot, uint64_t tstate, uint8_t *ts,
                       size_t ts_size) {
    slot->held = 0;
    slot->tick_state = STATE_UNREAD;
    if ((!S->locals_frames && !S->native) || slot->clock || slot->tid <= 0) return -1;
    slot->tick_state = thread_state(S, slot);
    int running = slot->tick_state == 1;
    if (S->native) {
        uint64_t cpu = slot->cpu_ns;
        if (!running) read_cpu_ns(slot, &cpu);
        if (!running && native_unchanged(slot, cpu)) return -1;
    } else if (!running || (T->gil && !(T->gil_locked && T->gil_holder == tstate))) {
        return -1;
    }
    int sig = stop_slot(slot);
    if (sig < 0) return -1;
    if (S->native) S->native_stops++;
    slot->held = 1;
    slot->held_sig = sig;
    slot->held_ns = ll_monotonic_ns();
    ll_mem_forget(&T->proc.mem);
    uint8_t fresh[256];
    if (ts_size <= sizeof fresh && !ll_mem_read(&T->proc.mem, tstate, fresh, ts_size))
        memcpy(ts, fresh, ts_size);
    return sig;
}

static void release_thread(ThreadSlot *slot, int sig) {
    if (ptrace(PTRACE_DETACH, slot->tid, 0, (void *)(intptr_t)sig) && errno == ESRCH) {
        /* Not stopped any more: killed while it was held (the process exiting).  A traced
         * thread that ended waits to be reaped by its tracer: reaped here, or at a later look
         * (stop_slot) if it has not quite ended yet, so the process's exit is not held up. */
        int status;
        if (waitpid(slot->tid, &status, __WALL | WNOHANG) == 0) slot->stop_pending = 1;
    }
    slot->held_total_ns += ll_monotonic_ns() - slot->held_ns;
    slot->held = 0;
}

/* Every thread of the target from `tstate` on (at most LL_MAX_THREADS_PER_TICK), into
 * S->pending; how many are pending.  The list ends at a cycle (Brent's: the state `mark` is
 * compared with each next one, and moves there after 1, 2, 4, ... steps), or after
 * LL_MAX_THREAD_STATES states, whatever their samples came to. */
static int sample_threads(Sampler *S, Target *T, uint64_t tstate, uint64_t t, uint64_t now) {
    const LLLayout *L = &T->proc.layout;
    int ts_size = tstate_size(L);
    int tid_off = ll_pthread_tid_offset();
    int np = 0, visited = 0;
    uint64_t mark = tstate;
    int lap = 1, steps = 0;
    while (tstate && np < LL_MAX_THREADS_PER_TICK) {
        if (visited++ && tstate == mark) { /* read while states were freed and reused */
            S->torn++;
            break;
        }
        if (visited > LL_MAX_THREAD_STATES) {
            S->torn++;
            break;
        }
        if (++steps == lap) {
            mark = tstate;
            lap *= 2;
            steps = 0;
        }
        uint8_t ts[256];
        int terr = (size_t)ts_size > sizeof ts
                       ? EINVAL
                       : ll_mem_read(&T->proc.mem, tstate, ts, (size_t)ts_size);
        if (terr == ESRCH) { /* the process ended: the samples read so far in this tick stand */
            target_gone(S, T, t);
            break;
        }
        if (terr) {
            S->torn++;
            break;
        }
        uint64_t next = ll_rd64(ts, L->tstate_next);
        if (!ll_rd64(ts, L->tstate_thread_id)) {
            /* A thread state no OS thread has taken yet (3.12+: Thread.start() made it, the
             * thread has not run): nothing to read, and keyed by a zero ident it became a
             * thread of its own, unnamed, beside the one it turns into (seen in CI under
             * load: "thread-1" with idle samples beside MainThread and sleepy). */
            tstate = next;
            continue;
        }
        int stale;
        ThreadSlot *slot = thread_of(S, T, ts, tid_off, &stale);
        if (stale) { /* read as it was freed (or, in a forked child, of a thread left behind) */
            S->torn++;
            tstate = next;
            continue;
        }
        if (!slot) break;
        /* A snapshot reads each thread against the GIL's state of that moment: watching one
         * for the GIL (gil_state) can take milliseconds, and the GIL may change hands. */
        if (S->max_ticks && T->interp) {
            ll_mem_forget(&T->proc.mem);
            read_interp(T, T->interp);
        }
        int sig = hold_thread(S, T, slot, tstate, ts, (size_t)ts_size);
        int r = sample_thread(S, T, slot, tstate, ts, (size_t)ts_size, t, now, &S->pending[np]);
        if (slot->held) release_thread(slot, sig);
        if (r == THREAD_GONE) break;
        if (r == THREAD_PENDING) np++;
        if (S->tasks == 2 && !S->cpu_mode && np < LL_MAX_THREADS_PER_TICK) {
            /* Wall mode: a sample a waiting task, on the thread whose loop it waits on. */
            uint32_t stacks[LL_MAX_THREADS_PER_TICK];
            int nw = ll_waiting_tasks(&T->tasks, &S->st, &T->proc, tstate, stacks,
                                      LL_MAX_THREADS_PER_TICK - np);
            for (int i = 0; i < nw; i++)
                S->pending[np++] =
                    (Pending){slot->serial, stacks[i], SF_TASK_WAITING, 0, 0, S->covers};
        }
        tstate = next;
    }
    return np;
}

/* The process's RSS growth since it was last read (pages), read once a tick before its threads
 * are: a tick in which it grew takes every thread sample where it was found (sample_thread), so
 * that the growth goes to the code that was running, not to other samples of the thread (its
 * latest fair ones, as they once were: at a phase change still the phase before; seen: a
 * function that allocated 64 MB shown with 30 of them, the other 34 given to the phase after
 * it). */
static int64_t read_rss(Target *T) {
    char buf[128];
    ssize_t r = T->statm_fd >= 0 ? pread(T->statm_fd, buf, sizeof buf - 1, 0) : -1;
    if (r <= 0) return 0;
    buf[r] = 0;
    char *sp = strchr(buf, ' ');
    uint64_t rss = sp ? strtoull(sp + 1, NULL, 10) : 0;
    int64_t d = T->have_rss ? (int64_t)rss - (int64_t)T->rss_pages : 0;
    T->rss_pages = rss;
    T->have_rss = 1;
    return d;
}

/* The growth `d` goes to the np pending samples of the threads that ran (SF_RSS). */
static void share_rss(Sampler *S, int np, int64_t d) {
    int active = 0;
    for (int i = 0; i < np; i++) active += !(S->pending[i].flags & (SF_IDLE | SF_TASK_WAITING));
    int share_to = active ? active : 1, k = 0;
    for (int i = 0; i < np; i++) {
        Pending *p = &S->pending[i];
        if (p->flags & SF_TASK_WAITING) continue; /* no thread's growth */
        if (active && (p->flags & SF_IDLE)) continue;
        if (!active && i > 0) continue;
        p->flags |= SF_RSS;
        p->drss = d / share_to + (k == 0 ? d % share_to : 0);
        k++;
    }
}

static void sample_target(Sampler *S, Target *T, uint64_t t, uint64_t now) {
    /* The pages the previous tick read before its first walk (the runtime, the interpreter,
     * the first thread state; on 3.11 and 3.12 the C stack that holds its innermost frame),
     * read again in one system call, not one by one: reads of the program's memory a page at
     * a time were 44% of the sampler's CPU.  Not its stacks' pages: a thread's stack (but for
     * its innermost frame, see sample_thread) must be read between the two readings of its CPU
     * clock that say whether it ran then ("fair samples"); read at the tick's start, before
     * them, it was judged by a clock that did not see it, and twin runs of one program
     * differed beyond noise under load.  Those are read at once after its clock. */
    ll_mem_new_round(&T->proc.mem);
    ll_mem_prefetch(&T->proc.mem, T->head, T->nhead > 0 ? T->nhead : 0);
    T->nhead = -1;
    uint64_t tstate = 0;
    if (first_thread(S, T, t, &tstate)) return;
    int64_t d = S->memory ? T->rss_carry + read_rss(T) : 0;
    S->rss_grew = d != 0;
    int np = sample_threads(S, T, tstate, t, now);
    if (T->nhead < 0) {
        /* No thread was walked (cpu mode, every thread off its CPU: a busy machine's busy
         * thread, preempted): what the tick read is still the next one's head.  Left empty,
         * the next tick read those pages one at a time: 3.2 reads a tick instead of 2 beside
         * four CPU hogs. */
        memcpy(T->head, T->proc.mem.used, (size_t)T->proc.mem.nused * sizeof T->head[0]);
        T->nhead = T->proc.mem.nused;
    }
    T->rss_carry = np ? 0 : d; /* no sample this tick: the next one takes it */
    if (S->memory && np) share_rss(S, np, d);
    for (int i = 0; i < np; i++) emit(S, t, &S->pending[i], now);
    if ((S->ticks & 127) == 0) forget_threads(S, T, t);
}

/* ---- processes ---- */

static int add_target(Sampler *S, pid_t pid, const LLPyInfo *info) {
    void *arr = S->targets;
    size_t cap = (size_t)S->ctargets;
    if (grow(&arr, &cap, sizeof(Target), (size_t)S->ntargets + 1)) return -1;
    S->targets = arr;
    S->ctargets = (int)cap;
    Target *T = &S->targets[S->ntargets];
    memset(T, 0, sizeof *T);
    T->pid = pid;
    T->native_own = pid == getpid();
    T->runtime = info->runtime;
    T->statm_fd = -1;
    if (ll_proc_init(&T->proc, pid, info)) return -1;
    if (S->memory) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
        T->statm_fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    S->ntargets++;
    return 0;
}

static void close_target(Target *T) {
    for (int i = 0; i < T->nthreads; i++) {
        if (T->threads[i].fd >= 0) close(T->threads[i].fd);
        if (T->threads[i].stat_fd >= 0) close(T->threads[i].stat_fd);
    }
    if (T->statm_fd >= 0) close(T->statm_fd);
    free(T->threads);
    ll_tasks_free(&T->tasks);
    ll_native_close(T->native);
    T->native = NULL;
    ll_proc_free(&T->proc);
    memset(T, 0, sizeof *T);
    T->dead = 1;
    T->statm_fd = -1;
}

static int is_known(Sampler *S, pid_t pid) {
    for (size_t i = 0; i < S->nknown; i++)
        if (S->known[i] == pid) return 1;
    return 0;
}

static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    int ppid = -1;
    if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1) return -1;
    return (pid_t)ppid;
}

/* Finds processes descended from the targets and samples those that run a supported Python.
 * A child may still be between fork() and exec(): it is looked at again at every scan until it
 * runs Python, and a target that stops answering is inspected again (it may have exec'd). */
static void scan_children(Sampler *S) {
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (is_known(S, pid)) continue;
        pid_t ppid = parent_of(pid);
        if (ppid <= 0 || !is_known(S, ppid)) continue;
        void *arr = S->known;
        if (grow(&arr, &S->cknown, sizeof(pid_t), S->nknown + 1)) break;
        S->known = arr;
        S->known[S->nknown++] = pid;
    }
    closedir(d);
    for (size_t i = 0; i < S->nknown; i++) {
        pid_t pid = S->known[i];
        Target *have = NULL;
        for (int k = 0; k < S->ntargets; k++)
            if (S->targets[k].pid == pid && !S->targets[k].dead) have = &S->targets[k];
        if (have && have->failures < 5) continue;
        LLPyInfo info;
        if (ll_inspect(pid, &info, NULL, 0) != 0) continue;
        if (have) {
            if (have->runtime == info.runtime &&
                !memcmp(&have->proc.layout, &info.layout, sizeof info.layout))
                continue;
            close_target(have);
        }
        add_target(S, pid, &info);
    }
}

/* ---- the thread ---- */

/* The time to the next tick: exponential, its mean the period (schedule.h says why). */
static uint64_t next_interval(Sampler *S) { return ll_poisson_interval(&S->rng, S->interval_ns); }

/* The run-queue delay of the thread whose schedstat is open as `fd` (its second number: the
 * time it spent runnable, waiting for a CPU), into *out; 0 if it cannot be read. */
static int read_run_delay(int fd, uint64_t *out) {
    unsigned long long f[3];
    if (read_schedstat(fd, f) < 2) return 0;
    *out = f[1];
    return 1;
}

static void *sampler_main(void *arg) {
    Sampler *S = arg;
    S->tid = ll_gettid();
    S->own_tasks_listed = own_task_exists(S->tid);
    pthread_setname_np(pthread_self(), "leadline-sampl"); /* for top -H, perf, gdb */
    /* Whether a tick is on time: its own run-queue delay (LL_ON_TIME_NS). */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)S->tid);
    int sched_fd = open(path, O_RDONLY | O_CLOEXEC);
    uint64_t delay_before = 0, delay_after = 0;
    /* Wake at the tick's own moment: the kernel may otherwise defer a sleeping thread's timer
     * by up to 50 us to batch wake-ups, and a tick's lateness tells fair samples (above). */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    ll_ask_short_turns();
    /* How late this machine wakes the sampler when nothing holds it up: the least of a few
     * short sleeps (until ticks show it, a late first tick would count as on time). */
    S->floor_ns[0] = S->floor_ns[1] = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t due = ll_monotonic_ns() + 50000u;
        struct timespec ts = ll_timespec_ns(due);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        uint64_t late = ll_monotonic_ns() - due;
        if (late < S->floor_ns[1]) S->floor_ns[1] = late;
    }
    S->prev_end_ns = ll_monotonic_ns();
    uint64_t next = S->prev_end_ns + next_interval(S);
    pthread_mutex_lock(&S->mu);
    while (!S->stopping) {
        struct timespec ts = ll_timespec_ns(next);
        int known = read_run_delay(sched_fd, &delay_before);
        int r = pthread_cond_timedwait(&S->cv, &S->mu, &ts);
        if (S->stopping) break;
        if (r != ETIMEDOUT) continue;
        pthread_mutex_unlock(&S->mu);
        uint64_t now = ll_monotonic_ns();
        known = known && read_run_delay(sched_fd, &delay_after);
        S->late_ns = now > next ? now - next : 0;
        if (S->late_ns < S->floor_ns[0]) S->floor_ns[0] = S->late_ns;
        uint64_t floor = S->floor_ns[0] < S->floor_ns[1] ? S->floor_ns[0] : S->floor_ns[1];
        if (known)
            S->on_time = delay_after - delay_before <= LL_ON_TIME_NS;
        else
            S->on_time = S->late_ns <= floor + LL_ON_TIME_NS;
        S->held += !S->on_time;
        if ((S->ticks & 127) == 127) { /* the earliest of the last 128 to 256 ticks */
            S->floor_ns[1] = S->floor_ns[0];
            S->floor_ns[0] = UINT64_MAX;
        }
        /* A tick that comes a whole interval or more late takes the place of the ticks due
         * since: they are missed, this one stands for them, and the schedule goes on from the
         * last of them (so that ticks + missed = the run's length x the rate). */
        uint64_t k = S->late_ns / S->interval_ns;
        S->missed += k;
        S->covers = 1 + k;
        next += k * S->interval_ns;
        uint64_t t = ll_ticks();
        __atomic_store_n(&S->ticks, S->ticks + 1, __ATOMIC_RELAXED); /* progress() reads it */
        S->now_ns = now;
        int alive = 0;
        for (int i = 0; i < S->ntargets; i++) {
            Target *T = &S->targets[i];
            if (T->dead) continue;
            sample_target(S, T, t, now);
            alive += !T->dead;
        }
        if (S->subprocesses && now - S->last_scan_ns >= LL_SCAN_NS) {
            S->last_scan_ns = now;
            scan_children(S);
        }
        if (S->chunk && now - S->chunk_started_ns >= LL_FLUSH_NS) flush_chunk(S);
        int still = 0; /* the children scan_children just found count too */
        for (int i = 0; i < S->ntargets; i++) still += !S->targets[i].dead;
        int done = S->max_ticks && S->ticks >= S->max_ticks;
        if (done) still = 0; /* the snapshot is taken: nothing more to sample */
        __atomic_store_n(&S->alive_targets, still, __ATOMIC_RELAXED);
        next += next_interval(S);
        S->prev_end_ns = ll_monotonic_ns();
        pthread_mutex_lock(&S->mu);
        if (!alive && !S->subprocesses && !S->in_process) break; /* the target is gone */
        if (done) break;
        /* The writer takes nothing more (a failed write): sampling on would only cost CPU. */
        if (ll_writer_stopped(&S->w)) break;
    }
    pthread_mutex_unlock(&S->mu);
    if (sched_fd >= 0) close(sched_fd);
    struct timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        S->sampler_cpu_ns += (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
    return NULL;
}

static int start_thread(Sampler *S) {
    S->stopping = 0;
    int err = ll_thread_start(&S->thread, sampler_main, S);
    if (!err) S->thread_started = 1;
    return err;
}

static void stop_thread(Sampler *S) {
    if (!S->thread_started) return;
    pthread_mutex_lock(&S->mu);
    S->stopping = 1;
    pthread_cond_signal(&S->cv);
    pthread_mutex_unlock(&S->mu);
    ll_join(S->thread, &S->tid);
    S->thread_started = 0;
}

/* ---- fork (in-process sampling only) ----
 * As for the tracer: the sampler and writer threads are joined before fork(), the child gets
 * neither and records nothing.  In the parent they are restarted by leadline's Python
 * after-fork hook up to 3.12 (os.fork() counts threads before running it, and 3.12+ warns about
 * multi-threaded forks); on 3.13, which counts them after its hooks, once os.fork has returned
 * through the recorder's wrapper, or 1 ms after the fork (resume(later=True)) for one that did
 * not come through it; at once when the fork did not come through os.fork(). */
static void atfork_prepare(void) {
    pthread_mutex_lock(&sampler_lock);
    Sampler *S = active_sampler;
    if (S && S->active && S->thread_started) {
        stop_thread(S);
        ll_writer_pause(&S->w);
        S->active = 2; /* paused by fork */
    }
}
static void atfork_parent(void) {
    Sampler *S = active_sampler;
    if (S) S->fork_ns = ll_monotonic_ns();
    if (S && S->active == 2 && !S->fork_pending) {
        ll_writer_resume(&S->w);
        start_thread(S);
        S->active = 1;
    }
    pthread_mutex_unlock(&sampler_lock);
}
static void atfork_child(void) {
    Sampler *S = active_sampler;
    if (S) {
        S->active = 0;
        S->thread_started = 0;
        S->w.thread_started = 0;
        S->w.paused = 0;
        if (S->w.fd >= 0) close(S->w.fd);
        S->w.fd = -1;
        ll_writer_init_sync(&S->w);
        pthread_mutex_init(&S->mu, NULL);
        ll_cond_init_monotonic(&S->cv);
        active_sampler = NULL;
    }
    pthread_mutex_unlock(&sampler_lock);
}

int ll_sampler_init(void) {
    return pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0 ? 0 : -1;
}

/* ---- the Python type ---- */

static PyObject *inspect_error(int code, const char *why) {
    PyObject *exc = code == LL_E_NOPROC || code == LL_E_EXITED ? PyExc_ProcessLookupError
                    : code == LL_E_PERM ? PyExc_PermissionError
                                        : PyExc_ValueError;
    PyErr_SetString(exc, why);
    return NULL;
}

static PyObject *layout_dict(const LLLayout *L);

PyObject *ll_inspect_process(PyObject *module, PyObject *args) {
    int pid;
    if (!PyArg_ParseTuple(args, "i", &pid)) return NULL;
    LLPyInfo info;
    char why[512] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = ll_inspect((pid_t)pid, &info, why, sizeof why);
    Py_END_ALLOW_THREADS if (rc) return inspect_error(rc, why);
    PyObject *offsets = layout_dict(&info.layout);
    const LLLayout *c = ll_layout(info.minor);
    PyObject *compiled = c ? layout_dict(c) : Py_NewRef(Py_None);
    PyObject *out = NULL;
    if (offsets && compiled)
        out = Py_BuildValue(
            "{s:i,s:K,s:K,s:s,s:s,s:i,s:s,s:O,s:O}", "minor", info.minor, "runtime",
            (unsigned long long)info.runtime, "code_type", (unsigned long long)info.code_type,
            "path", info.path, "layout_source",
            info.source == LL_LAYOUT_PUBLISHED ? "published" : "compiled", "published",
            info.published, "warning", info.warning, "offsets", offsets, "compiled", compiled);
    Py_XDECREF(offsets);
    Py_XDECREF(compiled);
    return out;
}

/* {field: offset} of a layout, for tests and diagnostics. */
static PyObject *layout_dict(const LLLayout *L) {
    PyObject *d = PyDict_New();
    const int *v = (const int *)L;
    for (size_t i = 1; d && i < sizeof ll_layout_names / sizeof ll_layout_names[0]; i++) {
        PyObject *n = PyLong_FromLong(v[i]);
        if (!n || PyDict_SetItemString(d, ll_layout_names[i], n)) Py_CLEAR(d);
        Py_XDECREF(n);
    }
    return d;
}

/* layout_from_debug_offsets(table: bytes, minor) -> {offsets, published, warning}: what the
 * sampler makes of a _Py_DebugOffsets table (for tests of damaged and newer tables). */
PyObject *ll_layout_from_table(PyObject *module, PyObject *args) {
    Py_buffer b;
    int minor;
    if (!PyArg_ParseTuple(args, "y*i", &b, &minor)) return NULL;
    LLPyInfo info;
    memset(&info, 0, sizeof info);
    info.minor = minor;
    char why[512] = "";
    int rc = ll_layout_from_debug_offsets(b.buf, (size_t)b.len, minor, &info, why, sizeof why);
    PyBuffer_Release(&b);
    if (rc) return inspect_error(rc, why);
    PyObject *offsets = layout_dict(&info.layout);
    if (!offsets) return NULL;
    PyObject *out = Py_BuildValue("{s:O,s:i,s:s}", "offsets", offsets, "published",
                                  info.published, "warning", info.warning);
    Py_DECREF(offsets);
    return out;
}

PyObject *ll_line_table(PyObject *module, PyObject *args) {
    int minor;
    long firstline;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "ily*", &minor, &firstline, &b)) return NULL;
    size_t cap = (size_t)b.len + 1;
    LLLinePoint *pts = malloc(sizeof *pts * cap);
    if (!pts) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    size_t n = ll_decode_linetable(minor, firstline, b.buf, (size_t)b.len, pts, cap);
    PyBuffer_Release(&b);
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        PyObject *item = Py_BuildValue("(ll)", pts[i].offset, pts[i].line);
        if (!item) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    free(pts);
    return out;
}

/* The sampler's locks, buffers, first target and writer (the file header written, its thread
 * started): 0, or -1 if one of them could not be had. */
static int sampler_open(Sampler *S, int fd, pid_t pid, const LLPyInfo *info, int max_depth,
                        int ended) {
    pthread_mutex_init(&S->mu, NULL);
    ll_cond_init_monotonic(&S->cv);
    int err = ll_stacks_init(&S->st, &S->w, max_depth);
    S->pending = malloc(sizeof(Pending) * LL_MAX_THREADS_PER_TICK);
    void *arr = S->known;
    err = err || !S->pending || grow(&arr, &S->cknown, sizeof(pid_t), 1) ||
          add_target(S, pid, info);
    S->known = arr;
    if (!err) {
        S->known[S->nknown++] = pid;
        err = ll_writer_open(&S->w, fd);
        S->writer_open = !err;
    }
    if (!err && ended) target_gone(S, &S->targets[0], ll_ticks());
    return err ? -1 : 0;
}

/* Sampling begins: an in-process sampler becomes the process's (for fork() and marks), unless
 * it already has one.  The new reference, or NULL with an exception. */
static PyObject *sampler_start(Sampler *S) {
    pthread_mutex_lock(&sampler_lock);
    if (S->in_process) {
        if (active_sampler) {
            pthread_mutex_unlock(&sampler_lock);
            ll_writer_close(&S->w);
            S->closed = 1;
            Py_DECREF(S);
            PyErr_SetString(PyExc_RuntimeError, "another leadline profile is already running");
            return NULL;
        }
        active_sampler = S;
        ll_marks_attach(&S->w);
    }
    S->active = 1;
    S->alive_targets = 1;
    start_thread(S);
    pthread_mutex_unlock(&sampler_lock);
    return (PyObject *)S;
}

static PyObject *sampler_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fd",    "meta",  "pid",    "rate_hz", "cpu",
                             "memory", "subprocesses", "max_depth", "tasks", "ticks",
                             "locals", "native", NULL};
    int fd, pid, cpu = 0, memory = 0, subprocesses = 0, max_depth = 8192, tasks = 1, locals = 0;
    int native = 0;
    unsigned long long ticks = 0;
    double rate;
    Py_buffer meta;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iy*id|pppiiKip", kwlist, &fd, &meta, &pid, &rate,
                                     &cpu, &memory, &subprocesses, &max_depth, &tasks, &ticks,
                                     &locals, &native))
        return NULL;
    if (!(rate >= 1.0 && rate <= 20000.0) || max_depth < 1 || max_depth > 1000000) {
        PyBuffer_Release(&meta);
        PyErr_SetString(PyExc_ValueError, "rate must be 1-20000 Hz and max_depth positive");
        return NULL;
    }
    LLPyInfo info;
    char why[512] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = ll_inspect((pid_t)pid, &info, why, sizeof why);
    Py_END_ALLOW_THREADS
    /* Another process that ended since it was last looked at (attach inspects it first, and a
     * starved attach can take seconds to get here) has left nothing more to sample: the
     * sampler starts with it gone, and the capture says when it was found gone. */
    int ended = pid != getpid() && (rc == LL_E_NOPROC || rc == LL_E_EXITED);
    if (rc && !ended) {
        PyBuffer_Release(&meta);
        return inspect_error(rc, why);
    }
    Sampler *S = (Sampler *)type->tp_alloc(type, 0);
    if (!S) {
        PyBuffer_Release(&meta);
        return NULL;
    }
    S->interval_ns = (uint64_t)(1e9 / rate);
    S->recent_ticks = LL_RECENT_NS / (S->interval_ns ? S->interval_ns : 1);
    if (S->recent_ticks < LL_RECENT_MIN_TICKS) S->recent_ticks = LL_RECENT_MIN_TICKS;
    if (S->recent_ticks > LL_RECENT_TICKS) S->recent_ticks = LL_RECENT_TICKS;
    S->cpu_mode = cpu;
    S->memory = memory;
    S->subprocesses = subprocesses;
    S->tasks = tasks;
    S->max_ticks = ticks;
    S->locals_frames = ticks && locals > 0 ? locals : 0;
    S->in_process = pid == getpid();
    /* This process's threads (run --native) are unwound from contexts (park_for_context),
     * where the platform's registers are known; another process's are stopped. */
    S->native = native && (!S->in_process || LL_NATIVE_CONTEXTS);
    if (S->native && S->in_process && !(S->ctx_stack = malloc(LL_NATIVE_STACK_COPY)))
        S->native = 0;
    if (S->in_process) {
        ll_park_install();
        struct timespec ts;
        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
            S->creator_tid = (pid_t)syscall(SYS_gettid);
            S->creator_cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
    }
    S->rng = ll_monotonic_ns() | 1;
    if (sampler_open(S, fd, (pid_t)pid, &info, max_depth, ended)) {
        PyBuffer_Release(&meta);
        Py_DECREF(S);
        PyErr_SetString(PyExc_RuntimeError, "leadline: cannot start the sampler");
        return NULL;
    }
    ll_writer_put(&S->w, LL_CHUNK_META, meta.buf, (size_t)meta.len);
    PyBuffer_Release(&meta);
    return sampler_start(S);
}

/* Stops sampling (once): marks no longer go to this capture, the sampler thread is joined and
 * its last chunk queued. */
static void sampler_stop(Sampler *S) {
    if (S->finished) return;
    ll_marks_detach(&S->w);
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&sampler_lock);
    if (S->active == 2) { /* stopped between a fork and its resume */
        ll_writer_resume(&S->w);
    }
    stop_thread(S);
    if (active_sampler == S) active_sampler = NULL;
    S->active = 0;
    pthread_mutex_unlock(&sampler_lock);
    Py_END_ALLOW_THREADS uint64_t tick = ll_ticks();
    /* What waits in the threads' pools for fair samples goes to the last ones they had. */
    for (int i = 0; i < S->ntargets; i++)
        for (int k = 0; k < S->targets[i].nthreads; k++)
            flush_pool(S, &S->targets[i].threads[k], tick);
    flush_chunk(S);
    S->t_end = ll_ticks();
    S->finished = 1;
}

PyObject *ll_native_unavailable(PyObject *self, PyObject *unused) {
    char why[256];
    if (ll_native_available(why, sizeof why) == 0) Py_RETURN_NONE;
    return PyUnicode_FromString(why);
}

/* The records of dump --locals as a list of (serial, frame, kind, name, type name, value),
 * each as the bytes read (record/locals.py decodes them and makes the repr). */
static PyObject *locals_list(const LLLocals *l) {
    PyObject *list = PyList_New(0);
    size_t at = 0;
    while (list && at + 7 <= l->n) {
        uint32_t serial;
        uint16_t frame, len[3];
        const uint8_t *field[3];
        memcpy(&serial, l->data + at, 4);
        memcpy(&frame, l->data + at + 4, 2);
        uint8_t kind = l->data[at + 6];
        at += 7;
        for (int k = 0; k < 3; k++) {
            memcpy(&len[k], l->data + at, 2);
            field[k] = l->data + at + 2;
            at += 2 + (size_t)len[k];
        }
        PyObject *item = Py_BuildValue("(IHBy#y#y#)", serial, frame, kind, field[0],
                                       (Py_ssize_t)len[0], field[1], (Py_ssize_t)len[1],
                                       field[2], (Py_ssize_t)len[2]);
        if (!item || PyList_Append(list, item)) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

/* The names another process's program gave its threads (ll_thread_names: the system has
 * none of them before 3.14, and their first 15 bytes after), as a list of (pid, ident, name);
 * read once sampling has stopped, from a process that may have ended meanwhile (then none). */
static PyObject *thread_names_list(Sampler *S) {
    PyObject *list = PyList_New(0);
    size_t cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    for (int i = 0; list && buf && i < S->ntargets; i++) {
        Target *T = &S->targets[i];
        if (T->pid == getpid() || !T->interp || !ll_instances_supported(&T->proc.layout)) continue;
        ll_mem_forget(&T->proc.mem);
        long n = ll_thread_names(&T->proc, T->interp, buf, cap);
        for (long at = 0; n > 0 && list && at + 10 <= n;) {
            uint64_t ident;
            uint16_t len;
            memcpy(&ident, buf + at, 8);
            memcpy(&len, buf + at + 8, 2);
            PyObject *item = Py_BuildValue("(iKs#)", (int)T->pid, (unsigned long long)ident,
                                           (const char *)buf + at + 10, (Py_ssize_t)len);
            if (!item || PyList_Append(list, item)) Py_CLEAR(list);
            Py_XDECREF(item);
            at += 10 + (long)len;
        }
    }
    free(buf);
    return list;
}

static PyObject *sampler_finish(PyObject *self, PyObject *unused) {
    Sampler *S = (Sampler *)self;
    sampler_stop(S);
    uint64_t reads = 0;
    for (int i = 0; i < S->ntargets; i++) reads += S->targets[i].proc.mem.reads;
    PyObject *gil = PyDict_New();
    for (size_t i = 0; gil && i < S->ngil_reads; i++) {
        const uint64_t *c = S->gil_reads[i];
        if (!(c[0] | c[1] | c[2])) continue;
        PyObject *v = Py_BuildValue("[KKK]", (unsigned long long)c[0], (unsigned long long)c[1],
                                    (unsigned long long)c[2]);
        char key[24];
        snprintf(key, sizeof key, "%zu", i);
        if (!v || PyDict_SetItemString(gil, key, v)) Py_CLEAR(gil);
        Py_XDECREF(v);
    }
    if (!gil) return NULL;
    PyObject *locals = locals_list(&S->locals);
    if (!locals) {
        Py_DECREF(gil);
        return NULL;
    }
    PyObject *names = thread_names_list(S);
    if (!names) {
        Py_DECREF(gil);
        Py_DECREF(locals);
        return NULL;
    }
    uint64_t held_ns = 0;
    for (int i = 0; i < S->ntargets; i++)
        for (int k = 0; k < S->targets[i].nthreads; k++)
            held_ns += S->targets[i].threads[k].held_total_ns;
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:N,s:K,s:N,s:i,"
        "s:K,s:K,s:K}",
        "ticks",
        (unsigned long long)S->ticks, "samples", (unsigned long long)S->samples, "missed",
        (unsigned long long)S->missed, "torn", (unsigned long long)S->torn, "deferred",
        (unsigned long long)S->deferred, "retried",
        (unsigned long long)S->retried, "truncated", (unsigned long long)S->truncated,
        "sampler_cpu_ns", (unsigned long long)S->sampler_cpu_ns, "t_end",
        (unsigned long long)S->t_end, "reads", (unsigned long long)reads, "tick_ns",
        ll_tick_ns_calibrated(), "stacks", (unsigned long long)S->st.nstacks, "functions",
        (unsigned long long)S->st.next_func, "processes", (unsigned long long)S->ntargets, "exit_t",
        (unsigned long long)S->exit_t, "parked", (unsigned long long)S->parked, "held",
        (unsigned long long)S->held, "gil_reads", gil, "locals", locals, "locals_held_ns",
        (unsigned long long)held_ns, "thread_names", names, "native", S->native, "native_stops",
        (unsigned long long)S->native_stops, "native_unread", (unsigned long long)S->native_unread,
        "native_unanswered", (unsigned long long)S->native_unanswered);
}

/* close(end): END is bytes, or a callable that makes them (see ll_writer_close_py). */
static PyObject *sampler_close(PyObject *self, PyObject *args) {
    Sampler *S = (Sampler *)self;
    PyObject *end;
    if (!PyArg_ParseTuple(args, "O", &end)) return NULL;
    if (!S->finished) {
        PyObject *r = sampler_finish(self, NULL);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    if (S->closed) {
        PyErr_SetString(PyExc_RuntimeError, "capture already closed");
        return NULL;
    }
    S->closed = 1;
    return ll_writer_close_py(&S->w, end);
}

static PyObject *sampler_before_fork(PyObject *self, PyObject *unused) {
    ((Sampler *)self)->fork_pending = 1;
    Py_RETURN_NONE;
}

/* After os.fork() in the parent: start the threads joined for the fork. */
static void resume_now(Sampler *S) {
    pthread_mutex_lock(&sampler_lock);
    S->fork_pending = 0;
    if (S->active == 2) {
        ll_writer_resume(&S->w);
        start_thread(S);
        S->active = 1;
    }
    pthread_mutex_unlock(&sampler_lock);
}

static int resume_pending(void *arg) {
    Sampler *S = arg;
    /* The pending call may run inside the remaining after-fork hooks; 1 ms after the fork
     * os.fork() has long returned. */
    if (ll_monotonic_ns() - S->fork_ns < 1000000u && Py_AddPendingCall(resume_pending, S) == 0)
        return 0;
    resume_now(S);
    Py_DECREF(S);
    return 0;
}

/* resume(later=False): 3.13 runs the after-fork hooks before it counts the process's threads
 * for its multi-threaded-fork warning, so there the restart is a pending call of the main
 * thread, 1 ms after the fork (the tracer waits as long, for the same reason). */
static PyObject *sampler_resume(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"later", NULL};
    int later = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &later)) return NULL;
    Sampler *S = (Sampler *)self;
    if (later) {
        Py_INCREF(S);
        if (Py_AddPendingCall(resume_pending, S) == 0) Py_RETURN_NONE;
        Py_DECREF(S);
    }
    resume_now(S);
    Py_RETURN_NONE;
}

static PyObject *sampler_running(PyObject *self, PyObject *unused) {
    Sampler *S = (Sampler *)self;
    /* Not S->targets itself: with subprocesses the sampler thread may be reallocating it. */
    return PyBool_FromLong(S->active && __atomic_load_n(&S->alive_targets, __ATOMIC_RELAXED) &&
                           !ll_writer_stopped(&S->w));
}

static PyObject *sampler_progress(PyObject *self, PyObject *unused) {
    Sampler *S = (Sampler *)self;
    /* Read while the sampler thread counts: each value is whole (an aligned 64-bit load), the
     * two may be a tick apart, which a progress line does not mind. */
    return Py_BuildValue("(KK)", (unsigned long long)__atomic_load_n(&S->ticks, __ATOMIC_RELAXED),
                         (unsigned long long)__atomic_load_n(&S->samples, __ATOMIC_RELAXED));
}

static void sampler_dealloc(PyObject *self) {
    Sampler *S = (Sampler *)self;
    /* Dropped without close(): never finished, or an exception came between finish() and
     * close().  Both left work inside this object that outlived it (valgrind saw each): mark()
     * still wrote into `w` of an unfinished in-process sampler, and the writer thread of a
     * finished one still waited on `w` (its descriptor and the queued chunks never closed or
     * written).  Stop and close as finish() and close() would. */
    if (S->writer_open && !S->closed) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        sampler_stop(S);
        ll_writer_close(&S->w);
        S->closed = 1;
        PyErr_Restore(et, ev, tb);
    }
    for (int i = 0; i < S->ntargets; i++) close_target(&S->targets[i]);
    free(S->targets);
    free(S->ctx_stack);
    free(S->known);
    free(S->gil_reads);
    ll_stacks_free(&S->st);
    ll_locals_free(&S->locals);
    free(S->pending);
    if (S->chunk) free(S->chunk);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef sampler_methods[] = {
    {"finish", sampler_finish, METH_NOARGS, "Stop sampling; return the counters."},
    {"close", sampler_close, METH_VARARGS, "Write END and close the capture."},
    {"before_fork", sampler_before_fork, METH_NOARGS, "os.fork() is about to run."},
    {"resume", (PyCFunction)(void (*)(void))sampler_resume, METH_VARARGS | METH_KEYWORDS,
     "os.fork() returned in the parent (later: once it has returned)."},
    {"running", sampler_running, METH_NOARGS, "Sampling, and a target is alive."},
    {"progress", sampler_progress, METH_NOARGS, "(ticks, samples) so far, while it samples."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LLSampler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "leadline._native.Sampler",
    .tp_basicsize = sizeof(Sampler),
    .tp_dealloc = sampler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = sampler_new,
    .tp_methods = sampler_methods,
    .tp_doc = "Samples the Python stacks of a process from a native thread.",
};
