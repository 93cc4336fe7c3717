/* Memory without a system call per event.
 *
 * RSS: a sampler thread preads /proc/self/statm from a kept-open descriptor every period
 * (0.5 us a read, against 2.5 us for open+read+close) and publishes the page count with a
 * relaxed atomic store; the tracer's read of it is a plain load (about 2 ns).  Every change is
 * also appended to the RSS timeline of the capture, which is how transient peaks between two
 * events are seen.
 *
 * Heap: PyMem_SetAllocator hooks on the MEM and OBJ domains add each request's size to a
 * thread-local counter.  Frees are passed through untouched: learning the size of a freed block
 * would need a table of every live block (what tracemalloc pays for), so the heap figure is
 * allocation volume, and retained memory is read from RSS.  Allocating or freeing a block of
 * 1 MiB or more sets rss_dirty, so that the next event reads RSS exactly instead of trusting a
 * sample that may predate the change. */
#include "leadline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__thread LLTls ll_tls __attribute__((tls_model("initial-exec")));

#define LL_TIMELINE_CAP 16384

static uint64_t parse_statm_resident(const char *buf, ssize_t n) {
    ssize_t i = 0;
    while (i < n && buf[i] != ' ') i++; /* skip "size" */
    i++;
    uint64_t v = 0;
    while (i < n && buf[i] >= '0' && buf[i] <= '9') v = v * 10 + (uint64_t)(buf[i++] - '0');
    return v;
}

uint64_t ll_rss_read_exact(LLRss *r) {
    char buf[128];
    ssize_t n = pread(r->statm_fd, buf, sizeof buf, 0);
    if (n <= 0) return ll_rss_published(r);
    uint64_t v = parse_statm_resident(buf, n);
    __atomic_store_n(&r->rss_pages, v, __ATOMIC_RELAXED);
    return v;
}

static void timeline_flush(LLRss *r) {
    if (r->timeline && r->timeline->len) {
        ll_writer_submit(r->w, r->timeline);
        r->timeline = NULL;
    }
}

static void timeline_add(LLRss *r, uint64_t t, uint64_t rss) {
    if (r->timeline && r->timeline->len + 24 > r->timeline->cap) timeline_flush(r);
    if (!r->timeline) {
        r->timeline = ll_writer_buffer(r->w, LL_CHUNK_RSS, 0, LL_TIMELINE_CAP);
        if (!r->timeline) return;
        uint8_t *p = ll_put_varint(r->timeline->data, t);
        r->timeline->len = (size_t)(p - r->timeline->data);
        r->tl_last_t = t;
        r->tl_last_rss = 0;
    }
    uint8_t *p = r->timeline->data + r->timeline->len;
    p = ll_put_varint(p, t - r->tl_last_t);
    p = ll_put_varint(p, ll_zigzag((int64_t)rss - (int64_t)r->tl_last_rss));
    r->timeline->len = (size_t)(p - r->timeline->data);
    r->tl_last_t = t;
    r->tl_last_rss = rss;
}

void ll_rss_publish_now(LLRss *r, uint64_t t) {
    uint64_t cur = __atomic_load_n(&r->now_ticks, __ATOMIC_RELAXED);
    while (cur < t && !__atomic_compare_exchange_n(&r->now_ticks, &cur, t, 1, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {
    }
}

static void *sampler_main(void *arg) {
    LLRss *r = arg;
    r->tid = ll_gettid();
    uint64_t next = ll_monotonic_ns();
    uint64_t last = UINT64_MAX;
    uint64_t last_flush = ll_monotonic_ns();
    uint64_t draw = ll_ticks() ^ ((uint64_t)r->tid << 32) ^ 0x9E3779B97F4A7C15u;
    uint64_t period_ns = (uint64_t)r->period_us * 1000u;
    while (__atomic_load_n(&r->running, __ATOMIC_ACQUIRE)) {
        /* The writer takes nothing more (size limit, failed write): stop reading, so that the
         * program gets this core back.  The thread is joined when the recording finishes. */
        if (ll_writer_stopped(r->w)) break;
        uint64_t v = ll_rss_read_exact(r);
        uint64_t t = ll_ticks();
        ll_rss_publish_now(r, t);
        if (r->coarse_after && t >= r->coarse_after && !r->coarse) {
            /* From here the events take this clock.  One that read the counter a moment ago
             * is ahead of it: its thread's next times are held at its last (tracer.c). */
            r->coarse_from = ll_rss_now(r);
            __atomic_store_n(&r->coarse, 1, __ATOMIC_RELEASE);
        }
        if (v != last) {
            timeline_add(r, t, v);
            last = v;
        }
        /* Hand the timeline over at least once a second so that a killed process loses little. */
        uint64_t now = ll_monotonic_ns();
        if (now - last_flush > 1000000000u) {
            timeline_flush(r);
            last_flush = now;
        }
        /* A period on average, drawn from half a period to one and a half: the wake-ups keep
         * no fixed phase with a program that repeats itself.  What an event takes from them
         * must be a fair draw: the coarse clock (--coarse-time) times a function by the
         * wake-ups inside its calls, and every 1 ms on the dot a loop of about 250 us was woken
         * in the same part of its turn run after run (two functions' totals 10-24% off, the one
         * up, the other down); the RSS growth an event is given is read at these moments too. */
        next += period_ns / 2 + ll_xorshift(&draw) % (period_ns + 1);
        struct timespec until = ll_timespec_ns(next);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
        }
    }
    return NULL;
}

int ll_rss_start(LLRss *r, LLWriter *w, unsigned period_us, uint64_t coarse_after) {
    memset(r, 0, sizeof *r);
    r->w = w;
    r->period_us = period_us ? period_us : 1000;
    r->page_size = sysconf(_SC_PAGESIZE);
    r->statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (r->statm_fd < 0) return errno;
    ll_rss_read_exact(r);
    uint64_t t = ll_ticks();
    ll_rss_publish_now(r, t);
    if (coarse_after) r->coarse_after = t + coarse_after;
    timeline_add(r, t, ll_rss_published(r));
    r->running = 1;
    int err = ll_thread_start(&r->thread, sampler_main, r);
    if (err) {
        r->running = 0;
        return err;
    }
    return 0;
}

void ll_rss_pause(LLRss *r) {
    if (__atomic_exchange_n(&r->running, 0, __ATOMIC_ACQ_REL)) {
        ll_join(r->thread, &r->tid);
        r->paused = 1;
    }
}

int ll_rss_resume(LLRss *r) {
    if (!r->paused) return 0;
    r->paused = 0;
    r->running = 1;
    int err = ll_thread_start(&r->thread, sampler_main, r);
    if (err) r->running = 0;
    return err;
}

void ll_rss_stop(LLRss *r) {
    if (__atomic_exchange_n(&r->running, 0, __ATOMIC_ACQ_REL)) ll_join(r->thread, &r->tid);
    if (r->statm_fd >= 0) {
        timeline_add(r, ll_ticks(), ll_rss_read_exact(r));
        close(r->statm_fd);
        r->statm_fd = -1;
    }
    timeline_flush(r);
}

/* ---- allocator hooks ---- */

/* The allocators that were active before the hooks; each hook's ctx points at its own entry.
 * Written only by install/uninstall, with the GIL and ll_global_lock held. */
static PyMemAllocatorEx orig_mem, orig_obj;
static int hooks_installed;

/* Live blocks of LL_LARGE_ALLOC bytes or more, so that freeing one also makes the next event
 * read RSS exactly (a 64 MiB munmap takes milliseconds, during which a sample is half-way).
 * Direct-mapped by address: a colliding block is simply not remembered, and its free falls back
 * to the sampled RSS.  The MEM and OBJ allocators run with the GIL held, so no lock. */
#define LL_LARGE_SLOTS 256
static void *large_blocks[LL_LARGE_SLOTS];
static unsigned n_large;

static inline size_t large_slot(const void *p) {
    uintptr_t x = (uintptr_t)p >> 12;
    return (size_t)((x ^ (x >> 8)) & (LL_LARGE_SLOTS - 1));
}

static inline void large_add(void *p, size_t n) {
    if (LL_LIKELY(n < LL_LARGE_ALLOC) || !p) return;
    ll_tls.rss_dirty = 1;
    size_t i = large_slot(p);
    if (!large_blocks[i]) {
        large_blocks[i] = p;
        n_large++;
    }
}

static inline void large_remove(void *p) {
    if (LL_LIKELY(!n_large) || !p) return;
    size_t i = large_slot(p);
    if (large_blocks[i] == p) {
        large_blocks[i] = NULL;
        n_large--;
        ll_tls.rss_dirty = 1;
    }
}

static void *hk_malloc(void *ctx, size_t n) {
    PyMemAllocatorEx *o = ctx;
    ll_tls.heap_bytes += n;
    void *p = o->malloc(o->ctx, n);
    large_add(p, n);
    return p;
}
static void *hk_calloc(void *ctx, size_t nelem, size_t elsize) {
    PyMemAllocatorEx *o = ctx;
    size_t n = nelem * elsize;
    ll_tls.heap_bytes += n;
    void *p = o->calloc(o->ctx, nelem, elsize);
    large_add(p, n);
    return p;
}
static void *hk_realloc(void *ctx, void *p, size_t n) {
    PyMemAllocatorEx *o = ctx;
    ll_tls.heap_bytes += n;
    large_remove(p);
    void *q = o->realloc(o->ctx, p, n);
    large_add(q, n);
    return q;
}
static void hk_free(void *ctx, void *p) {
    PyMemAllocatorEx *o = ctx;
    large_remove(p);
    o->free(o->ctx, p);
}

int ll_heap_hooks_install(void) {
    if (hooks_installed) return 0;
    memset(large_blocks, 0, sizeof large_blocks); /* blocks freed while not hooked */
    n_large = 0;
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &orig_mem);
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &orig_obj);
    PyMemAllocatorEx mem = {&orig_mem, hk_malloc, hk_calloc, hk_realloc, hk_free};
    PyMemAllocatorEx obj = {&orig_obj, hk_malloc, hk_calloc, hk_realloc, hk_free};
    PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &mem);
    PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &obj);
    hooks_installed = 1;
    return 1;
}

/* Restores the previous allocators only if ours are still the active ones: if another tool
 * (tracemalloc) wrapped ours since, removing ours would cut it out too, so the hooks stay in
 * place, counting harmlessly, and are passed through. */
void ll_heap_hooks_uninstall(void) {
    if (!hooks_installed) return;
    PyMemAllocatorEx cur_mem, cur_obj;
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &cur_mem);
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &cur_obj);
    if (cur_mem.malloc == hk_malloc && cur_mem.ctx == &orig_mem && cur_obj.malloc == hk_malloc &&
        cur_obj.ctx == &orig_obj) {
        PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &orig_mem);
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &orig_obj);
        hooks_installed = 0;
    }
}
