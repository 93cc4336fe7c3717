/* The background writer: traced threads only append to in-memory chunks; this thread owns the
 * file descriptor and does every write(2), so a slow or full disk never blocks the program. */
#include "leadline.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

pthread_mutex_t ll_global_lock = PTHREAD_MUTEX_INITIALIZER;

/* A bounded queue: beyond this many waiting chunks (16 MiB of events) new chunks are dropped and
 * counted, so a stalled disk cannot make the profiled program's memory grow without bound. */
#define LL_MAX_QUEUED 256
#define LL_MAX_FREE 32

/* How the writer waits for chunks.  Waking a thread that waits is a system call for the one
 * that wakes it, and on a virtual machine an interrupt to the other CPU.  Once a 64 KiB chunk,
 * with a write() each, that was 2-3% of a densely traced program's CPU time
 * (bench/results/check-writer-py3.1[12]-2026-11-30.md).  So while chunks keep coming the
 * writer looks for them every LL_WRITER_POLL_NS and writes up to LL_WRITE_BATCH of them in one
 * system call; the threads that hand chunks over wake it only when LL_WAKE_QUEUED are waiting
 * (well before the queue's bound) or when it waits for good.  It waits for good, to be woken
 * by the next chunk, once a whole period brought nothing: an idle program costs no wake-ups. */
#define LL_WRITER_POLL_NS 10000000u
#define LL_WAKE_QUEUED 32
#define LL_WRITE_BATCH 32

#if defined(__x86_64__)
/* CRC-32 (the zlib / ISO-HDLC one) of whole 16-byte blocks by carry-less multiplication:
 * the data folded 64 bytes at a time into four 128-bit accumulators, then into one, then
 * reduced to 32 bits (Barrett).  `crc` and the result are zlib's (inverted) values. */

__attribute__((target("pclmul,sse4.1"))) static inline __m128i ll_fold(__m128i x, __m128i k,
                                                                      __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)),
                         next);
}

/* n: a multiple of 16, at least 64. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t ll_crc32_clmul(uint32_t crc,
                                                                       const uint8_t *p,
                                                                       size_t n) {
    const __m128i k12 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
    const __m128i k34 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
    const __m128i poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);
    const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x1 = ll_fold(x1, k12, _mm_loadu_si128((const __m128i *)p));
        x2 = ll_fold(x2, k12, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = ll_fold(x3, k12, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = ll_fold(x4, k12, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x1 = ll_fold(x1, k34, x2);
    x1 = ll_fold(x1, k34, x3);
    x1 = ll_fold(x1, k34, x4);
    for (; n >= 16; p += 16, n -= 16) x1 = ll_fold(x1, k34, _mm_loadu_si128((const __m128i *)p));
    /* 128 bits to 64, then to 32 (with the 32 bits of zeros the CRC's definition appends). */
    __m128i t = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k34, 0x10), t);
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), t);
    /* Barrett reduction by the polynomial. */
    t = x1;
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return ~(uint32_t)_mm_extract_epi32(x1, 1);
}

/* Whether this CPU multiplies without carries (PCLMULQDQ, with SSE4.1): asked once. */
static int have_clmul(void) {
    static int known = -1;
    if (known < 0)
        known = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") ? 1 : 0;
    return known;
}
#endif

/* A chunk's CRC-32, as zlib computes it: the whole 16-byte blocks by carry-less multiplication
 * where the CPU has it (at 2.8 instructions a byte, zlib's was an eighth of what a trace costs
 * the program's process beyond the bare hook), the rest by zlib. */
uint32_t ll_crc32(const uint8_t *p, size_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
#if defined(__x86_64__)
    if (n >= 64 && have_clmul()) {
        size_t whole = n & ~(size_t)15;
        c = ll_crc32_clmul((uint32_t)c, p, whole);
        p += whole;
        n -= whole;
    }
#endif
    while (n > 0) {
        uInt step = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, step);
        p += step;
        n -= step;
    }
    return (uint32_t)c;
}

uint64_t ll_monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

double ll_tick_ns_calibrated(void) {
    static double cached; /* written once under ll_global_lock */
    pthread_mutex_lock(&ll_global_lock);
    if (cached == 0.0) {
        uint64_t n0 = ll_monotonic_ns(), t0 = ll_ticks();
        uint64_t n1;
        do {
            n1 = ll_monotonic_ns();
        } while (n1 - n0 < 2000000);
        uint64_t t1 = ll_ticks();
        cached = t1 > t0 ? (double)(n1 - n0) / (double)(t1 - t0) : 1.0;
    }
    double v = cached;
    pthread_mutex_unlock(&ll_global_lock);
    return v;
}

/* Writes n buffers whole, however many calls it takes; *done (if not NULL) is the number of
 * bytes written, also when a call fails (the errno returned). */
static int write_all(int fd, const struct iovec *iov_in, int n, size_t *done) {
    struct iovec iov[2 * LL_WRITE_BATCH];
    memcpy(iov, iov_in, sizeof(struct iovec) * (size_t)n);
    int i = 0;
    size_t total = 0;
    int err = 0;
    while (i < n) {
        ssize_t r = writev(fd, iov + i, n - i);
        if (r < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        size_t left = (size_t)r;
        total += left;
        while (i < n && left >= iov[i].iov_len) {
            left -= iov[i].iov_len;
            i++;
        }
        if (i < n) {
            iov[i].iov_base = (char *)iov[i].iov_base + left;
            iov[i].iov_len -= left;
        }
    }
    if (done) *done = total;
    return err;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_header(uint8_t *h, uint8_t kind, uint64_t stream, const uint8_t *data, size_t n) {
    memcpy(h, "LLCK", 4);
    h[4] = kind;
    h[5] = h[6] = h[7] = 0;
    put_u32(h + 8, (uint32_t)n);
    put_u32(h + 12, ll_crc32(data, n));
    for (int i = 0; i < 8; i++) h[16 + i] = (uint8_t)(stream >> (8 * i));
}

static int write_payload(int fd, uint8_t kind, uint64_t stream, const uint8_t *data, size_t n) {
    uint8_t h[LL_CHUNK_HEADER_SIZE];
    put_header(h, kind, stream, data, n);
    struct iovec iov[2] = {{h, sizeof h}, {(void *)data, n}};
    return write_all(fd, iov, 2, NULL);
}

/* The n chunks of a list, in one system call where the kernel takes them all; *whole is how
 * many of them reached the file complete (all of them unless an errno is returned). */
static int write_chunks(int fd, const LLChunk *c, int n, int *whole) {
    uint8_t h[LL_WRITE_BATCH][LL_CHUNK_HEADER_SIZE];
    struct iovec iov[2 * LL_WRITE_BATCH];
    const LLChunk *first = c;
    for (int i = 0; i < n; i++, c = c->next) {
        put_header(h[i], c->kind, c->stream, c->data, c->len);
        iov[2 * i] = (struct iovec){h[i], LL_CHUNK_HEADER_SIZE};
        iov[2 * i + 1] = (struct iovec){(void *)c->data, c->len};
    }
    size_t done = 0;
    int err = write_all(fd, iov, 2 * n, &done);
    *whole = 0;
    for (c = first; *whole < n && done >= LL_CHUNK_HEADER_SIZE + c->len; c = c->next) {
        done -= LL_CHUNK_HEADER_SIZE + c->len;
        ++*whole;
    }
    return err;
}

/* After a failed write: cut the file back to the end of its last complete chunk, so that it
 * is a valid capture that END can still follow, and so that the space the partial chunk took
 * on a full disk is the program's again.  Called by the thread that writes (the writer, or
 * the closer once the writer is joined).  1 if the file now ends at bytes_written. */
static int rewind_file(LLWriter *w) {
    if (w->base < 0 || w->fd < 0) return 0;
    off_t end = (off_t)(w->base + (int64_t)w->bytes_written);
    return ftruncate(w->fd, end) == 0 && lseek(w->fd, end, SEEK_SET) == end;
}

/* The first reason stays: a write that fails after the size limit was reached does not
 * change why recording stopped (it is reported as write_error all the same). */
static void stop_locked(LLWriter *w, int why) {
    if (w->stopped) return;
    w->stop_ticks = ll_ticks();
    __atomic_store_n(&w->stopped, why, __ATOMIC_RELAXED);
}

/* A chunk written whole, where the file ended before it. */
static void note_written_locked(LLWriter *w, const LLChunk *c) {
    uint64_t at = w->bytes_written;
    w->bytes_written += LL_CHUNK_HEADER_SIZE + c->len;
    if (c->kind < LL_CHUNK_KINDS) w->written_items[c->kind] += c->items;
    if (w->nrecent == LL_RECENT_CHUNKS) {
        memmove(w->recent, w->recent + 1, sizeof w->recent[0] * (LL_RECENT_CHUNKS - 1));
        w->nrecent--;
    }
    w->recent[w->nrecent++] = (LLWritten){.offset = at, .items = c->items, .kind = c->kind};
}

static void recycle_locked(LLWriter *w, LLChunk *c) {
    if (c->cap == LL_EVENTS_CHUNK_CAP && w->nfree < LL_MAX_FREE) {
        c->next = w->free_list;
        w->free_list = c;
        w->nfree++;
    } else {
        free(c);
    }
}

/* A chunk that will never be written: what it held is counted as lost. */
static void lose_locked(LLWriter *w, LLChunk *c) {
    w->dropped_chunks++;
    if (c->kind < LL_CHUNK_KINDS) w->lost_items[c->kind] += c->items;
    recycle_locked(w, c);
}

/* pthread_join returns once the thread's kernel id is cleared, a moment before the kernel
 * takes the thread out of the process's thread count.  A fork() in that moment, right after
 * threads were joined for it, would still count the thread, and Python 3.12+ warns about
 * forking a multi-threaded process.  So wait until /proc no longer lists it. */
/* A signal sent to the process goes to any thread that does not block it, so leadline's
 * threads block them all: a signal must reach the program's threads.  Otherwise a program
 * that blocks a signal to sigwait() for it dies of it when a thread of ours takes it, and a
 * handler does not cut the main thread's sleep short.  The new thread inherits the mask of the
 * one that creates it, whatever that one's is (a thread restarted after fork() is created by
 * whichever thread of the program comes next), so the mask is set around pthread_create. */
int ll_thread_start(pthread_t *t, void *(*start)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(t, NULL, start, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

void ll_join(pthread_t t, const pid_t *tid) {
    pthread_join(t, NULL);
    if (*tid <= 0) return;
    char path[48];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)*tid);
    /* A joined thread's task can outlive the join by a while on a busy machine (it needs a CPU
     * to finish exiting): seen, still listed when the program forked next, and 3.12+'s fork()
     * warned that the process was multi-threaded (under `trace`, two test workers on two
     * cores).  Waited for up to a second by the clock, not a count of sleeps. */
    uint64_t until = ll_monotonic_ns() + 1000000000u;
    while (access(path, F_OK) == 0 && ll_monotonic_ns() < until) {
        struct timespec ts = {0, 20000}; /* 20 us */
        nanosleep(&ts, NULL);
    }
}

static void *writer_main(void *arg) {
    LLWriter *w = arg;
    w->tid = ll_gettid();
    /* The file header is written here too, so that a full disk from the first byte on is
     * handled like one later: recording stops, the program runs on. */
    uint8_t h[16] = {'L', 'E', 'A', 'D', 'L', 'I', 'N', 'E', LL_FORMAT_MAJOR, 0, LL_FORMAT_MINOR, 0,
                     0, 0, 0, 0};
    struct iovec iov = {h, sizeof h};
    int herr = w->header_done ? 0 : write_all(w->fd, &iov, 1, NULL);
    int hclean = herr ? rewind_file(w) : 1;
    pthread_mutex_lock(&w->mu);
    if (!w->header_done) {
        w->header_done = 1;
        if (herr) {
            w->error = herr;
            w->clean = hclean;
            stop_locked(w, LL_STOP_WRITE_ERROR);
        } else {
            w->bytes_written += sizeof h;
        }
    }
    int busy = 0; /* the last look found chunks: look again in a period, unwoken */
    for (;;) {
        if (!w->head && !w->stopping) {
            if (busy) {
                struct timespec until = ll_timespec_ns(ll_monotonic_ns() + LL_WRITER_POLL_NS);
                while (!w->head && !w->stopping &&
                       pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
                }
                busy = w->head != NULL;
                continue;
            }
            w->idle = 1;
            while (!w->head && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
            w->idle = 0;
        }
        LLChunk *batch = w->head;
        if (!batch) break; /* stopping and drained */
        int n = 1;
        LLChunk *last = batch;
        while (n < LL_WRITE_BATCH && last->next) {
            last = last->next;
            n++;
        }
        w->head = last->next;
        if (!w->head) w->tail = NULL;
        last->next = NULL;
        w->queued -= (size_t)n;
        busy = 1;
        int err = w->error, whole = 0;
        if (!err) {
            pthread_mutex_unlock(&w->mu);
            err = write_chunks(w->fd, batch, n, &whole);
            pthread_mutex_lock(&w->mu);
        }
        for (int i = 0; batch; i++) {
            LLChunk *c = batch;
            batch = c->next;
            if (i < whole) {
                note_written_locked(w, c);
                recycle_locked(w, c);
            } else {
                lose_locked(w, c);
            }
        }
        if (err && !w->error) {
            /* e.g. ENOSPC: stop recording, keep the program running; the file is cut back to
             * the end of the last chunk written whole */
            w->error = err;
            w->clean = rewind_file(w);
            stop_locked(w, LL_STOP_WRITE_ERROR);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void ll_cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

void ll_writer_init_sync(LLWriter *w) {
    pthread_mutex_init(&w->mu, NULL);
    ll_cond_init_monotonic(&w->cv);
}

int ll_writer_open(LLWriter *w, int fd) {
    memset(w, 0, sizeof *w);
    w->fd = fd;
    /* Where the capture starts, to cut it back to a chunk boundary after a failed write; a
     * pipe has no position (-1), and is never cut. */
    off_t at = lseek(fd, 0, SEEK_CUR);
    w->base = at < 0 ? -1 : (int64_t)at;
    w->clean = 1;
    w->accepted = 16; /* the file header */
    ll_writer_init_sync(w);
    int err = ll_thread_start(&w->thread, writer_main, w);
    if (err) return err;
    w->thread_started = 1;
    return 0;
}

LLChunk *ll_writer_buffer(LLWriter *w, uint8_t kind, uint64_t stream, size_t cap) {
    LLChunk *c = NULL;
    if (cap == LL_EVENTS_CHUNK_CAP) {
        pthread_mutex_lock(&w->mu);
        if (w->free_list) {
            c = w->free_list;
            w->free_list = c->next;
            w->nfree--;
        }
        pthread_mutex_unlock(&w->mu);
    }
    if (!c) c = malloc(sizeof(LLChunk) + cap);
    if (!c) return NULL;
    c->next = NULL;
    c->kind = kind;
    c->stream = stream;
    c->len = 0;
    c->cap = cap;
    c->items = 0;
    return c;
}

static void enqueue_locked(LLWriter *w, LLChunk *c) {
    uint64_t size = LL_CHUNK_HEADER_SIZE + c->len;
    /* The limit is checked here, once per chunk, never per event; META passes whatever the
     * limit, since a file without it is not a capture. */
    if (w->max_bytes && c->kind != LL_CHUNK_META && w->accepted + size > w->max_bytes)
        stop_locked(w, LL_STOP_SIZE_LIMIT);
    if (w->stopped || w->error || w->queued >= LL_MAX_QUEUED || w->fd < 0) {
        lose_locked(w, c);
        return;
    }
    w->accepted += size;
    c->next = NULL;
    if (w->tail) w->tail->next = c;
    else w->head = c;
    w->tail = c;
    w->queued++;
}

/* Definitions (strings, functions, threads) always reach the file before any chunk that was
 * submitted after them, so every chunk can be decoded with what precedes it. */
static void submit_locked(LLWriter *w, LLChunk *c) {
    static const int order[] = {LL_CHUNK_STRINGS, LL_CHUNK_FUNCS, LL_CHUNK_THREADS, LL_CHUNK_STACKS,
                                LL_CHUNK_TASKS};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int k = order[i];
        if (w->pending[k] && w->pending[k]->len) {
            enqueue_locked(w, w->pending[k]);
            w->pending[k] = NULL;
        }
    }
    if (c) enqueue_locked(w, c);
    if (w->idle || w->queued >= LL_WAKE_QUEUED) pthread_cond_signal(&w->cv);
}

void ll_writer_submit(LLWriter *w, LLChunk *c) {
    pthread_mutex_lock(&w->mu);
    submit_locked(w, c);
    pthread_mutex_unlock(&w->mu);
}

void ll_writer_put(LLWriter *w, uint8_t kind, const void *data, size_t n) {
    LLChunk *c = ll_writer_buffer(w, kind, 0, n);
    if (!c) return;
    memcpy(c->data, data, n);
    c->len = n;
    ll_writer_submit(w, c);
}

void ll_writer_define(LLWriter *w, uint8_t kind, const uint8_t *rec, size_t n) {
    pthread_mutex_lock(&w->mu);
    LLChunk *c = w->pending[kind];
    if (c && c->len + n > c->cap) {
        /* Strings must precede the functions that name them: queue in kind order. */
        submit_locked(w, NULL);
        c = NULL;
    }
    if (!c) {
        /* Not from the free list (that one holds event-sized buffers), so no second lock. */
        size_t cap = n > 60000 ? n : 60000;
        c = malloc(sizeof(LLChunk) + cap);
        if (!c) {
            w->dropped_chunks++;
            pthread_mutex_unlock(&w->mu);
            return;
        }
        *c = (LLChunk){.kind = kind, .cap = cap};
        w->pending[kind] = c;
    }
    memcpy(c->data + c->len, rec, n);
    c->len += n;
    pthread_mutex_unlock(&w->mu);
}

/* fork(): the thread is joined before and started again after, in the parent, so that the
 * child inherits no thread mid-wait (and the parent looks single-threaded to os.fork()). */
void ll_writer_pause(LLWriter *w) {
    if (!w->thread_started) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    ll_join(w->thread, &w->tid);
    w->thread_started = 0;
    w->stopping = 0;
    w->paused = 1;
}

int ll_writer_resume(LLWriter *w) {
    if (!w->paused) return 0;
    w->paused = 0;
    int err = ll_thread_start(&w->thread, writer_main, w);
    if (!err) w->thread_started = 1;
    return err;
}

/* Everything queued reaches the file (or is dropped and counted); the thread is joined, the
 * descriptor stays open. */
static void writer_drain(LLWriter *w) {
    ll_writer_resume(w); /* a paused writer still has a queue to drain */
    pthread_mutex_lock(&w->mu);
    submit_locked(w, NULL);
    w->stopping = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->thread_started) {
        ll_join(w->thread, &w->tid);
        w->thread_started = 0;
    }
}

void ll_writer_close(LLWriter *w) {
    writer_drain(w);
    if (w->fd >= 0) {
        if (close(w->fd) != 0 && !w->error && errno != EINTR) w->error = errno;
        w->fd = -1;
    }
    while (w->free_list) {
        LLChunk *c = w->free_list;
        w->free_list = c->next;
        free(c);
    }
    w->nfree = 0;
}

/* END, from the closing thread once the writer is drained.  After a failed write it still
 * follows the last complete chunk when the file could be cut back to it. */
static int write_end(LLWriter *w, const uint8_t *data, size_t n) {
    if (w->fd < 0 || w->bytes_written == 0 || !w->clean) return w->error ? w->error : EIO;
    int err = write_payload(w->fd, LL_CHUNK_END, 0, data, n);
    if (err) {
        w->clean = rewind_file(w);
        if (!w->error) w->error = err;
        stop_locked(w, LL_STOP_WRITE_ERROR);
        return err;
    }
    w->bytes_written += LL_CHUNK_HEADER_SIZE + n;
    w->end_written = 1;
    return 0;
}

/* END did not fit (a full disk, a file size limit): the newest data chunk makes room for it.
 * The capture loses its last moments rather than its END, which every report needs to read it
 * right (thread names, counts, why recording stopped).  1 if a chunk was given back. */
static int give_back(LLWriter *w) {
    if (!w->nrecent || !w->clean) return 0;
    LLWritten r = w->recent[w->nrecent - 1];
    if (r.kind == LL_CHUNK_META) return 0;
    uint64_t had = w->bytes_written;
    w->bytes_written = r.offset;
    if (!rewind_file(w)) {
        w->bytes_written = had;
        w->clean = 0;
        return 0;
    }
    w->nrecent--;
    if (r.kind < LL_CHUNK_KINDS) {
        w->written_items[r.kind] -= r.items;
        w->lost_items[r.kind] += r.items;
    }
    w->dropped_chunks++;
    return 1;
}

static int set_item(PyObject *d, const char *key, PyObject *v) {
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

/* The writer's figures, for END and for the recording's result (docs/format.md, END). */
static PyObject *writer_stats(const LLWriter *w) {
    static const char *const reasons[] = {NULL, "size_limit", "write_error"};
    static const struct {
        const char *written, *lost;
        int kind;
    } items[] = {{"events_written", "events_lost", LL_CHUNK_EVENTS},
                 {"samples_written", "samples_lost", LL_CHUNK_SAMPLES},
                 {"marks_written", "marks_lost", LL_CHUNK_MARKS}};
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    int bad = set_item(d, "bytes_written", PyLong_FromUnsignedLongLong(w->bytes_written)) ||
              set_item(d, "dropped_chunks", PyLong_FromUnsignedLongLong(w->dropped_chunks)) ||
              set_item(d, "max_bytes", PyLong_FromUnsignedLongLong(w->max_bytes)) ||
              set_item(d, "write_error",
                       w->error ? PyUnicode_FromString(strerror(w->error)) : Py_NewRef(Py_None)) ||
              set_item(d, "stopped",
                       w->stopped ? PyUnicode_FromString(reasons[w->stopped]) : Py_NewRef(Py_None)) ||
              set_item(d, "t_stopped",
                       w->stopped ? PyLong_FromUnsignedLongLong(w->stop_ticks) : Py_NewRef(Py_None)) ||
              set_item(d, "end_written", PyBool_FromLong(w->end_written));
    for (size_t i = 0; !bad && i < sizeof items / sizeof items[0]; i++) {
        bad = set_item(d, items[i].written,
                       PyLong_FromUnsignedLongLong(w->written_items[items[i].kind])) ||
              set_item(d, items[i].lost, PyLong_FromUnsignedLongLong(w->lost_items[items[i].kind]));
    }
    if (bad) Py_CLEAR(d);
    return d;
}

PyObject *ll_writer_close_py(LLWriter *w, PyObject *end) {
    Py_BEGIN_ALLOW_THREADS
    writer_drain(w);
    Py_END_ALLOW_THREADS
    int failed = 0;
    /* Each pass makes END from the figures as they are now: giving a chunk back changes them. */
    for (int attempt = 0; end && end != Py_None; attempt++) {
        PyObject *payload;
        if (PyCallable_Check(end)) {
            PyObject *stats = writer_stats(w);
            payload = stats ? PyObject_CallOneArg(end, stats) : NULL;
            Py_XDECREF(stats);
        } else {
            payload = Py_NewRef(end);
        }
        Py_buffer b;
        if (!payload || PyObject_GetBuffer(payload, &b, PyBUF_SIMPLE) < 0) {
            Py_XDECREF(payload);
            failed = 1;
            break;
        }
        int err;
        Py_BEGIN_ALLOW_THREADS
        err = write_end(w, b.buf, (size_t)b.len);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&b);
        Py_DECREF(payload);
        int no_room = err == ENOSPC || err == EFBIG || err == EDQUOT;
        if (!err || !no_room || attempt >= LL_RECENT_CHUNKS || !give_back(w)) break;
    }
    Py_BEGIN_ALLOW_THREADS
    ll_writer_close(w);
    Py_END_ALLOW_THREADS
    return failed ? NULL : writer_stats(w);
}

size_t ll_encode_func(uint8_t *rec, uint64_t id, int kind, uint64_t file, uint64_t name,
                      long firstline, const LLLinePoint *pts, size_t npts) {
    uint8_t *p = ll_put_varint(rec, id);
    *p++ = (uint8_t)kind;
    p = ll_put_varint(p, file);
    p = ll_put_varint(p, name);
    p = ll_put_varint(p, firstline > 0 ? (uint64_t)firstline : 0);
    p = ll_put_varint(p, npts);
    long prev_off = 0, prev_line = firstline;
    for (size_t i = 0; i < npts; i++) {
        /* Offsets and lines decoded from another process's table may be anything: the deltas
         * wrap, never overflow (a reader gets the same values back by adding them). */
        p = ll_put_varint(p, (uint64_t)pts[i].offset - (uint64_t)prev_off);
        p = ll_put_varint(p, ll_zigzag((int64_t)((uint64_t)pts[i].line - (uint64_t)prev_line)));
        prev_off = pts[i].offset;
        prev_line = pts[i].line;
    }
    return (size_t)(p - rec);
}
