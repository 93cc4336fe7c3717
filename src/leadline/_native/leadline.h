/* Shared types of leadline's native core.
 *
 * The core collects and nothing else: a call hook, a background writer that streams chunks of
 * the capture format (docs/format.md), an RSS sampler thread and allocator hooks.  It also
 * decodes event chunks for the Python analysis, because a 100 M-event capture has to be read in
 * seconds.  All state lives in one Session struct that is passed explicitly; the few
 * process-wide values (the active session, the allocator that was replaced) are guarded by
 * ll_global_lock. */
#ifndef LEADLINE_H
#define LEADLINE_H

#include "compat.h"
#include "procmem.h" /* LLLinePoint */
#include "schedule.h" /* ll_xorshift */

#include <pthread.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#  define LL_LIKELY(x) __builtin_expect(!!(x), 1)
#  define LL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define LL_LIKELY(x) (x)
#  define LL_UNLIKELY(x) (x)
#endif

/* ---- capture format constants (docs/format.md) ---- */
#define LL_FORMAT_MAJOR 1
#define LL_FORMAT_MINOR 10

/* Each list below exists once: the C code uses its enum, and the module exports it to Python
 * as a dict of name -> number (CHUNK_KINDS, EVENT_KINDS, MARK_KINDS), so nothing is copied. */
#define LL_CHUNK_KIND_LIST(X)                                                                   \
    X(META, 1) X(STRINGS, 2) X(FUNCS, 3) X(THREADS, 4) X(EVENTS, 5) X(RSS, 6) X(END, 7)        \
    X(SAMPLES, 8) X(STACKS, 9) X(TASKS, 10) X(MARKS, 11)
enum {
#define LL_X(name, n) LL_CHUNK_##name = n,
    LL_CHUNK_KIND_LIST(LL_X)
#undef LL_X
    LL_CHUNK_KINDS = 12, /* one more than the largest */
};

/* An event's kind: the low 3 bits of its head byte (docs/format.md, EVENTS). */
#define LL_EVENT_KIND_LIST(X) X(CALL, 0) X(RETURN, 1) X(C_CALL, 2) X(C_RETURN, 3) X(C_EXCEPT, 4)
enum {
#define LL_X(name, n) LL_EV_##name = n,
    LL_EVENT_KIND_LIST(LL_X)
#undef LL_X
};

/* The kinds of tracer hook (tracer.c says what each is for). */
#define LL_HOOK_KIND_LIST(X)                                                                    \
    X(ENTER_LOCAL, 0) X(ENTER, 1) X(EXIT_LOCAL, 2) X(EXIT, 3) X(CALL, 4) X(C_RETURN, 5)         \
    X(C_RAISE, 6) X(BOOTSTRAP, 7)

/* A mark's kind (docs/format.md, MARKS): a mark, or the begin or end of a span. */
#define LL_MARK_KIND_LIST(X) X(MARK, 0) X(BEGIN, 1) X(END, 2)
enum {
#define LL_X(name, n) LL_MARK_##name = n,
    LL_MARK_KIND_LIST(LL_X)
#undef LL_X
};

#define LL_HEAD_RSS 0x08
#define LL_HEAD_HEAP 0x10
#define LL_HEAD_GAP 0x20
#define LL_HEAD_OFF 0x40

#define LL_CHUNK_HEADER_SIZE 24
#define LL_EVENTS_CHUNK_CAP (64 * 1024)
#define LL_MAX_EVENT_BYTES 64 /* head + 6 varints of at most 10 bytes */

/* What a FUNCS record's function is: Python code, a C function, or an asyncio task (the
 * root of a task's stack, named as the task; its file is "asyncio"). */
#define LL_FUNC_KIND_LIST(X) X(PY, 0) X(C, 1) X(TASK, 2)
enum {
#define LL_X(name, n) LL_FUNC_##name = n,
    LL_FUNC_KIND_LIST(LL_X)
#undef LL_X
};

/* One FUNCS record (docs/format.md): id, kind (LL_FUNC_*), file and name string ids, first
 * line, and the line table as deltas from the first line.  The tracer (from co_lines()) and the
 * sampler (from a remote code object's line table) both write it here.  `rec` needs
 * LL_FUNC_RECORD_MAX(npts) bytes; returns the record's length. */
#define LL_FUNC_RECORD_MAX(npts) (64 + (size_t)(npts) * 20)
/* The name of the function a sample taken during a garbage collection has on top (sampler). */
#define LL_GC_FUNCTION "<GC>"
size_t ll_encode_func(uint8_t *rec, uint64_t id, int kind, uint64_t file, uint64_t name,
                      long firstline, const LLLinePoint *pts, size_t npts);

/* ---- varints ---- */
static inline uint8_t *ll_put_varint_slow(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}
/* Most values in an event (ids, tick gaps, offsets) fit in one or two bytes. */
static inline uint8_t *ll_put_varint(uint8_t *p, uint64_t v) {
    if (LL_LIKELY(v < 0x80)) {
        *p = (uint8_t)v;
        return p + 1;
    }
    if (v < 0x4000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7);
        return p + 2;
    }
    return ll_put_varint_slow(p, v);
}
static inline uint64_t ll_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t ll_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Reads a varint; on truncated input sets *ok to 0 and returns 0. */
static inline uint64_t ll_get_varint(const uint8_t **pp, const uint8_t *end, int *ok) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    int shift = 0;
    while (p < end && shift < 64) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            return v;
        }
        shift += 7;
    }
    *ok = 0;
    *pp = end;
    return 0;
}

/* ---- clock ----
 * Events are stamped with the TSC on x86-64 (about 10 ns here, against 23 ns for
 * clock_gettime through the vDSO) shifted right by LL_TICK_SHIFT so that typical gaps between
 * events fit in one varint byte; elsewhere with CLOCK_MONOTONIC nanoseconds.  The tick length
 * is calibrated against CLOCK_MONOTONIC and stored in META/END. */
#if defined(__x86_64__)
#  include <x86intrin.h>
#  define LL_TICK_SHIFT 4
static inline uint64_t ll_ticks(void) { return __rdtsc() >> LL_TICK_SHIFT; }
#  define LL_CLOCK_NAME "tsc"
#else
#  include <time.h>
static inline uint64_t ll_ticks(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#  define LL_CLOCK_NAME "monotonic"
#endif
uint64_t ll_monotonic_ns(void);
double ll_tick_ns_calibrated(void); /* once per process: a 2 ms comparison with the OS clock */

/* ---- chunks and the background writer ---- */
typedef struct LLChunk {
    struct LLChunk *next;
    uint8_t kind;
    uint64_t stream;
    size_t len;
    size_t cap;
    uint64_t items; /* events, samples or marks in it: what is lost if it is not written */
    uint8_t data[];
} LLChunk;

/* The calling thread's kernel id. */
static inline pid_t ll_gettid(void) { return (pid_t)syscall(SYS_gettid); }
/* pthread_join(t), then wait (20 ms at most) until the kernel has taken the thread, whose
 * kernel id the thread stored in *tid, out of the process; see capture.c. */
void ll_join(pthread_t t, const pid_t *tid);
/* pthread_create for leadline's own threads, which start with every signal blocked. */
int ll_thread_start(pthread_t *t, void *(*start)(void *), void *arg);

/* Why a writer records nothing more: the capture reached its size limit, or a write failed
 * (a full disk, a file size limit, an I/O error).  Either way the program runs on, the queued
 * chunks are dropped and counted, and END still closes the capture (ll_writer_close_py). */
enum { LL_STOP_NONE = 0, LL_STOP_SIZE_LIMIT = 1, LL_STOP_WRITE_ERROR = 2 };

/* The last chunks written, newest last: after a write failure, END may take the place of the
 * newest ones (see ll_writer_close_py). */
#define LL_RECENT_CHUNKS 8
typedef struct {
    uint64_t offset; /* where the chunk starts in the file */
    uint64_t items;
    uint8_t kind;
} LLWritten;

typedef struct {
    int fd;
    int64_t base; /* the file offset of the header: where the capture starts (-1: not seekable) */
    pthread_t thread;
    pid_t tid; /* the writer thread's kernel id, set by the thread */
    int thread_started;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    LLChunk *head, *tail;
    size_t queued;
    LLChunk *free_list;
    size_t nfree;
    LLChunk *pending[LL_CHUNK_KINDS]; /* definitions not yet queued, by kind */
    int stopping;
    int idle;        /* the writer waits to be woken (not only for its next look) */
    int paused;      /* joined around a fork(), restarted at the next event */
    int header_done; /* the file header is written once, by the first writer thread */
    int error; /* errno of the first failed write; nothing is written after it */
    int clean; /* the file ends where the last complete chunk does (bytes_written) */
    /* LL_STOP_*: set once, under mu; producers read it with a relaxed load, once per chunk. */
    int stopped;
    uint64_t stop_ticks;  /* ll_ticks() when it stopped */
    uint64_t max_bytes;   /* 0: no limit; else the header and chunks before END stay within it */
    uint64_t accepted;    /* bytes of the header and of the chunks queued so far */
    uint64_t bytes_written;
    uint64_t dropped_chunks;
    uint64_t written_items[LL_CHUNK_KINDS], lost_items[LL_CHUNK_KINDS]; /* by chunk kind */
    LLWritten recent[LL_RECENT_CHUNKS];
    int nrecent;
    int end_written;
} LLWriter;

int ll_writer_open(LLWriter *w, int fd); /* writes the file header, starts the thread */
void ll_writer_init_sync(LLWriter *w);    /* its lock and condition (also anew after fork()) */
void ll_cond_init_monotonic(pthread_cond_t *cv); /* timed waits on it use CLOCK_MONOTONIC */
static inline struct timespec ll_timespec_ns(uint64_t ns) {
    return (struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
}
LLChunk *ll_writer_buffer(LLWriter *w, uint8_t kind, uint64_t stream, size_t cap);
void ll_writer_submit(LLWriter *w, LLChunk *c);                    /* takes ownership */
void ll_writer_define(LLWriter *w, uint8_t kind, const uint8_t *rec, size_t n); /* a record */
void ll_writer_put(LLWriter *w, uint8_t kind, const void *data, size_t n); /* a whole chunk */
void ll_writer_close(LLWriter *w); /* drains the queue, joins the thread, closes fd */
void ll_writer_pause(LLWriter *w);
int ll_writer_resume(LLWriter *w);
static inline int ll_writer_stopped(const LLWriter *w) {
    return __atomic_load_n(&w->stopped, __ATOMIC_RELAXED);
}
/* close(end) of every recording: drains the queue, writes END and closes the file.  `end` is
 * the END payload (bytes), or a callable that makes it from the writer's figures (a dict:
 * what was written and lost, whether and why recording stopped early); returns those figures,
 * final.  NULL with an exception if `end` raised (the file is closed all the same). */
PyObject *ll_writer_close_py(LLWriter *w, PyObject *end);
uint32_t ll_crc32(const uint8_t *p, size_t n);

/* ---- memory ---- */
typedef struct {
    int statm_fd;
    long page_size;
    uint64_t rss_pages; /* published by the sampler; read with relaxed atomics */
    uint64_t now_ticks; /* ll_ticks() at the sampler's last wake-up, never decreasing: the
                         * clock of a trace with coarse_time (published like rss_pages) */
    int coarse;         /* events read now_ticks, not the counter; set once by the sampler at
                         * its first wake-up after coarse_after (read with relaxed atomics) */
    uint64_t coarse_after; /* ll_ticks() from which the events take now_ticks; 0: never */
    uint64_t coarse_from;  /* now_ticks when coarse was set; 0 while it is not */
    unsigned period_us;
    pthread_t thread;
    pid_t tid; /* the sampler thread's kernel id, set by the thread */
    int running; /* atomic */
    int paused;
    LLChunk *timeline;
    uint64_t tl_last_t, tl_last_rss;
    LLWriter *w;
} LLRss;

/* coarse_after: ticks from the start after which the events of a trace take the sampler's
 * clock (0: they never do) */
int ll_rss_start(LLRss *r, LLWriter *w, unsigned period_us, uint64_t coarse_after);
/* A trace with coarse_time reads the counter for its first this many RSS periods (20 ms by
 * default): a short program is timed call by call, a long one pays for the counter briefly. */
#define LL_COARSE_WARMUP_PERIODS 20
void ll_rss_stop(LLRss *r); /* joins the sampler and queues its last timeline chunk */
void ll_rss_pause(LLRss *r);
int ll_rss_resume(LLRss *r);
uint64_t ll_rss_read_exact(LLRss *r);
static inline uint64_t ll_rss_published(LLRss *r) {
    return __atomic_load_n(&r->rss_pages, __ATOMIC_RELAXED);
}
static inline uint64_t ll_rss_now(LLRss *r) {
    return __atomic_load_n(&r->now_ticks, __ATOMIC_RELAXED);
}
static inline int ll_rss_coarse(LLRss *r) {
    return __atomic_load_n(&r->coarse, __ATOMIC_RELAXED);
}
void ll_rss_publish_now(LLRss *r, uint64_t t); /* now_ticks = max(now_ticks, t) */

/* Per-thread counters that the allocator hooks and the tracer share.  Thread-local storage
 * with the initial-exec model is a single %fs-relative load: no lock, no atomic, and each
 * thread's heap bytes are its own. */
typedef struct LLThreadStream LLThreadStream;
typedef struct {
    LLThreadStream *ts;
    uint64_t gen;        /* session generation that ts belongs to */
    uint64_t heap_bytes; /* bytes this thread allocated from the Python heap, ever */
    int rss_dirty;       /* a large block came or went: read RSS exactly at the next event */
} LLTls;
extern __thread LLTls ll_tls __attribute__((tls_model("initial-exec")));

#define LL_LARGE_ALLOC (1u << 20)
int ll_heap_hooks_install(void);
void ll_heap_hooks_uninstall(void);

/* ---- the process-wide lock ---- */
extern pthread_mutex_t ll_global_lock;

/* ---- tracer ---- */
PyObject *ll_session_new(PyObject *module, PyObject *args, PyObject *kwargs);
extern PyTypeObject LLSession_Type;
extern PyTypeObject LLHook_Type;

/* ---- sampler ---- */
int ll_sampler_init(void);
extern PyTypeObject LLSampler_Type;
PyObject *ll_inspect_process(PyObject *module, PyObject *args);
PyObject *ll_native_unavailable(PyObject *module, PyObject *unused);
PyObject *ll_layout_from_table(PyObject *module, PyObject *args);
PyObject *ll_line_table(PyObject *module, PyObject *args);

/* ---- reader ---- */
extern PyTypeObject LLAggregator_Type;
PyObject *ll_decode_events(PyObject *module, PyObject *args);
PyObject *ll_decode_rss(PyObject *module, PyObject *args);

/* ---- marks (marks.c) ---- */
int ll_marks_init(void);
void ll_marks_attach(LLWriter *w); /* a recording listens for marks from now on */
void ll_marks_detach(LLWriter *w); /* hands its buffered marks over and stops listening */
PyObject *ll_mark(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *ll_mark_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ll_marks_active(PyObject *module, PyObject *unused);
extern PyTypeObject LLJournal_Type;

/* ---- probe (probe.c) ---- */
int ll_probe_add_functions(PyObject *module);

#endif
