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

pthread_mutex_t ll_global_lock = PTHREAD_MUTEX_INITIALIZER;

/* A bounded queue: beyond this many waiting chunks (16 MiB of events) new chunks are dropped and
 * counted, so a stalled disk cannot make the profiled program's memory grow without bound. */
#define LL_MAX_QUEUED 256
#define LL_MAX_FREE 32

uint32_t ll_crc32(const uint8_t *p, size_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
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

static int write_all(int fd, const struct iovec *iov_in, int n) {
    struct iovec iov[2];
    memcpy(iov, iov_in, sizeof(struct iovec) * (size_t)n);
    int i = 0;
    while (i < n) {
        ssize_t r = writev(fd, iov + i, n - i);
        if (r < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        size_t left = (size_t)r;
        while (i < n && left >= iov[i].iov_len) {
            left -= iov[i].iov_len;
            i++;
        }
        if (i < n) {
            iov[i].iov_base = (char *)iov[i].iov_base + left;
            iov[i].iov_len -= left;
        }
    }
    return 0;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static int write_chunk(int fd, const LLChunk *c) {
    uint8_t h[LL_CHUNK_HEADER_SIZE];
    memcpy(h, "LLCK", 4);
    h[4] = c->kind;
    h[5] = h[6] = h[7] = 0;
    put_u32(h + 8, (uint32_t)c->len);
    put_u32(h + 12, ll_crc32(c->data, c->len));
    for (int i = 0; i < 8; i++) h[16 + i] = (uint8_t)(c->stream >> (8 * i));
    struct iovec iov[2] = {{h, sizeof h}, {(void *)c->data, c->len}};
    return write_all(fd, iov, 2);
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
    for (int i = 0; i < 1000 && access(path, F_OK) == 0; i++) {
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
    int herr = w->header_done ? 0 : write_all(w->fd, &iov, 1);
    pthread_mutex_lock(&w->mu);
    if (!w->header_done) {
        w->header_done = 1;
        if (herr) w->error = herr;
        else w->bytes_written += sizeof h;
    }
    for (;;) {
        while (!w->head && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
        LLChunk *c = w->head;
        if (!c) break; /* stopping and drained */
        w->head = c->next;
        if (!w->head) w->tail = NULL;
        w->queued--;
        int err = 0;
        if (!w->error) {
            pthread_mutex_unlock(&w->mu);
            err = write_chunk(w->fd, c);
            pthread_mutex_lock(&w->mu);
            if (err) w->error = err; /* e.g. ENOSPC: stop writing, keep the program running */
            else w->bytes_written += LL_CHUNK_HEADER_SIZE + c->len;
        } else {
            w->dropped_chunks++;
        }
        recycle_locked(w, c);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int ll_writer_open(LLWriter *w, int fd) {
    memset(w, 0, sizeof *w);
    w->fd = fd;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
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
    return c;
}

static void enqueue_locked(LLWriter *w, LLChunk *c) {
    if (w->error || w->queued >= LL_MAX_QUEUED || w->fd < 0) {
        w->dropped_chunks++;
        recycle_locked(w, c);
        return;
    }
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
    pthread_cond_signal(&w->cv);
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

void ll_writer_close(LLWriter *w) {
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
