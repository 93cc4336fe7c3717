/* The stack sampler: a native thread that, at a set rate, reads the Python stacks of every
 * thread of one or more processes (its own, or others) and writes them as SAMPLES chunks.
 *
 * It never takes the GIL and never stops the target: the interpreter state is read with
 * process_vm_readv (procmem.c) while the target runs.  A stack can change while it is read; a
 * walk whose frames do not check out (a code pointer that is not a code object, an instruction
 * outside its code, a read that faults, a chain that does not end) is read again and, if it
 * keeps failing, counted as torn and dropped.  Nothing here can crash or block the program.
 *
 * Output (docs/format.md): functions as FUNCS records (the tracer's layout), stacks as STACKS
 * records (parent stack, function, instruction offset), threads as TASKS records, samples as
 * SAMPLES chunks.  Lines are resolved from the offsets when the capture is read. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "leadline.h"
#include "procmem.h"

/* A frame whose owner is at least this is not a Python function's: 3.12/3.13 FRAME_OWNED_BY_CSTACK
 * (3), 3.14+ FRAME_OWNED_BY_INTERPRETER (3) and FRAME_OWNED_BY_CSTACK (4); 3.11 has none. */
#define LL_FIRST_OWNER_NOT_PYTHON 3
/* 3.14+ keep what a frame runs as a _PyStackRef: the object's address with tag bits in the low
 * bits (objects are at least 8-byte aligned, so clearing them is right on every version). */
#define LL_STACKREF_TAGS ((uint64_t)7)
#define LL_MAX_THREADS_PER_TICK 512
#define LL_MAX_STR 4096
#define LL_SCAN_NS 100000000u   /* look for new child processes every 100 ms */
#define LL_FLUSH_NS 1000000000u /* a partly filled chunk reaches the file within 1 s */
/* A busy thread pushes and pops frames every 100 ns or so, so the innermost frame often moves
 * between reading the pointer to it and reading it (a system call apart): such a walk is read
 * again, at most this many times in all, before the sample counts as torn. */
#define LL_WALK_ATTEMPTS 4
#define LL_MAX_CODE_SIZE 256 /* sizeof(PyCodeObject) is 176-216 bytes in 3.10-3.15 */

enum { SF_IDLE = 1, SF_RSS = 2, SF_TRUNCATED = 4 };

typedef struct {
    uint64_t addr, filename, name;
    int32_t firstline;
    uint32_t func; /* 0: empty slot */
} CodeSlot;

typedef struct {
    uint64_t ident; /* the thread's pthread_t, as CPython stores it */
    pid_t tid;
    uint32_t serial;
    int fd;      /* /proc/PID/task/TID/schedstat, or -1 */
    int stat_fd; /* /proc/PID/task/TID/stat (its state: running or not), or -1 */
    int clock;   /* the thread's CPU clock can be read (same process) */
    uint64_t cpu_ns, wall_ns; /* at the last sample */
    uint64_t seen;            /* tick it was last seen in */
} ThreadSlot;

typedef struct {
    pid_t pid;
    LLLayout layout; /* the offsets this target is read with (LLPyInfo.layout) */
    uint64_t runtime, code_type;
    LLMem mem;
    int statm_fd;
    uint64_t rss_pages;
    int have_rss;
    ThreadSlot *threads;
    int nthreads, cthreads;
    CodeSlot *codes;
    size_t ncodes, ccodes; /* ccodes: a power of two */
    int dead;
    int failures; /* ticks in a row in which the interpreter could not be read */
} Target;

typedef struct {
    uint32_t parent, func, off, id;
} StackSlot;

typedef struct {
    uint64_t hash;
    uint32_t id, len;
    char *s;
} StrSlot;

typedef struct {
    uint32_t func, off;
} FrameRef;

typedef struct {
    uint64_t addr;
    uint32_t gen;
} VisitSlot;

typedef struct {
    uint64_t code;
    int64_t instr;         /* instruction pointer (3.11+) or f_lasti (3.10) */
    int slot;              /* its index among the walk's code objects read */
} RawFrame;

typedef struct {
    ThreadSlot *slot;
    uint32_t stack;
    uint8_t flags;
    uint64_t cpu;
    int64_t drss;
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
    int cpu_mode, memory, subprocesses, max_depth, in_process;
    Target *targets;
    int ntargets, ctargets;
    pid_t *known; /* descendants seen (Python or not), for --subprocesses */
    size_t nknown, cknown;
    StrSlot *strs;
    size_t nstrs, cstrs;
    StackSlot *stacks;
    size_t nstacks, cstacks;
    uint32_t next_str, next_func, next_stack, next_serial;
    LLChunk *chunk;
    uint64_t chunk_prev_t, chunk_started_ns;
    uint64_t chunk_first; /* samples when the chunk began */
    FrameRef *frames;
    RawFrame *raw;
    uint64_t *uniq;   /* distinct code objects of a walk */
    uint8_t *codebuf; /* their first bytes, LL_MAX_CODE_SIZE each */
    VisitSlot *visited; /* frames of the current walk: a power of two > 2 x max_depth */
    size_t nvisited;
    uint32_t visit_gen;
    Pending *pending;
    uint64_t ticks, samples, missed, torn, retried, truncated;
    uint64_t sampler_cpu_ns, t_end, last_scan_ns, rng, fork_ns;
    uint64_t now_ns; /* CLOCK_MONOTONIC at this tick */
    /* Targets still alive, published by the sampler thread for running(): the thread may
     * reallocate `targets` (a new child process) while the Python thread asks. */
    int alive_targets;
    int writer_open; /* `w` was opened: it must be closed before this object is freed */
    int finished, closed, fork_pending, active;
} Sampler;

/* The in-process sampler, for fork().  Its own lock: the tracer's fork handlers hold
 * ll_global_lock from prepare to parent/child, and both sets of handlers run in one fork(). */
static pthread_mutex_t sampler_lock = PTHREAD_MUTEX_INITIALIZER;
static Sampler *active_sampler;

/* ---- interning ---- */

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211u;
    return h | 1;
}

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

static void define(Sampler *S, uint8_t kind, const uint8_t *rec, size_t n) {
    ll_writer_define(&S->w, kind, rec, n);
}

/* Open addressing; the table doubles at half full.  Returns the id, 0 if out of memory. */
static uint32_t intern_str(Sampler *S, const char *s, size_t n) {
    if (S->nstrs * 2 >= S->cstrs) {
        size_t nc = S->cstrs ? S->cstrs * 2 : 1024;
        StrSlot *t = calloc(nc, sizeof *t);
        if (!t) return 0;
        for (size_t i = 0; i < S->cstrs; i++) {
            if (!S->strs[i].id) continue;
            size_t j = S->strs[i].hash & (nc - 1);
            while (t[j].id) j = (j + 1) & (nc - 1);
            t[j] = S->strs[i];
        }
        free(S->strs);
        S->strs = t;
        S->cstrs = nc;
    }
    uint64_t h = fnv(s, n);
    size_t j = h & (S->cstrs - 1);
    for (; S->strs[j].id; j = (j + 1) & (S->cstrs - 1)) {
        StrSlot *e = &S->strs[j];
        if (e->hash == h && e->len == n && !memcmp(e->s, s, n)) return e->id;
    }
    char *copy = malloc(n + 1);
    uint8_t *rec = malloc(n + 20);
    if (!copy || !rec) {
        free(copy);
        free(rec);
        return 0;
    }
    memcpy(copy, s, n);
    uint32_t id = ++S->next_str;
    S->strs[j] = (StrSlot){h, id, (uint32_t)n, copy};
    S->nstrs++;
    uint8_t *p = ll_put_varint(rec, id);
    p = ll_put_varint(p, n);
    memcpy(p, s, n);
    define(S, LL_CHUNK_STRINGS, rec, (size_t)(p - rec) + n);
    free(rec);
    return id;
}

static uint32_t intern_stack(Sampler *S, uint32_t parent, uint32_t func, uint32_t off) {
    if (S->nstacks * 2 >= S->cstacks) {
        size_t nc = S->cstacks ? S->cstacks * 2 : 4096;
        StackSlot *t = calloc(nc, sizeof *t);
        if (!t) return 0;
        for (size_t i = 0; i < S->cstacks; i++) {
            StackSlot e = S->stacks[i];
            if (!e.id) continue;
            size_t j = fnv((const char *)&e, 12) & (nc - 1);
            while (t[j].id) j = (j + 1) & (nc - 1);
            t[j] = e;
        }
        free(S->stacks);
        S->stacks = t;
        S->cstacks = nc;
    }
    StackSlot key = {parent, func, off, 0};
    size_t j = fnv((const char *)&key, 12) & (S->cstacks - 1);
    for (; S->stacks[j].id; j = (j + 1) & (S->cstacks - 1)) {
        StackSlot *e = &S->stacks[j];
        if (e->parent == parent && e->func == func && e->off == off) return e->id;
    }
    key.id = ++S->next_stack;
    S->stacks[j] = key;
    S->nstacks++;
    uint8_t rec[40], *p = rec;
    p = ll_put_varint(p, key.id);
    p = ll_put_varint(p, parent);
    p = ll_put_varint(p, func);
    p = ll_put_varint(p, off);
    define(S, LL_CHUNK_STACKS, rec, (size_t)(p - rec));
    return key.id;
}

/* ---- functions ---- */

static uint64_t rd64(const uint8_t *b, int off) {
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}
static int32_t rd32(const uint8_t *b, int off) {
    int32_t v;
    memcpy(&v, b + off, 4);
    return v;
}

static void define_func(Sampler *S, Target *T, uint32_t id, uint64_t filename, uint64_t name,
                        long firstline, uint64_t linetable) {
    const LLLayout *L = &T->layout;
    char *text = malloc(LL_MAX_STR * 4 + 1);
    if (!text) return;
    long n = ll_read_str(&T->mem, L, filename, text, LL_MAX_STR * 4 + 1);
    uint32_t fs = intern_str(S, n >= 0 ? text : "<unknown>", n >= 0 ? (size_t)n : 9);
    n = ll_read_str(&T->mem, L, name, text, LL_MAX_STR * 4 + 1);
    uint32_t ns = intern_str(S, n >= 0 ? text : "<unknown>", n >= 0 ? (size_t)n : 9);
    free(text);
    uint8_t hdr[48];
    uint8_t *raw = NULL;
    LLLinePoint *pts = NULL;
    size_t npts = 0;
    int64_t len = 0;
    if (linetable && !ll_mem_read(&T->mem, linetable, hdr, (size_t)L->bytes_sval)) {
        memcpy(&len, hdr + L->bytes_size, 8);
        if (len > 0 && len < (1 << 20) && (raw = malloc((size_t)len)) &&
            !ll_mem_read(&T->mem, linetable + (uint64_t)L->bytes_sval, raw, (size_t)len) &&
            (pts = malloc(sizeof *pts * (size_t)len)))
            npts = ll_decode_linetable(L->minor, firstline, raw, (size_t)len, pts, (size_t)len);
    }
    uint8_t *rec = malloc(LL_FUNC_RECORD_MAX(npts));
    if (rec) {
        define(S, LL_CHUNK_FUNCS, rec, ll_encode_func(rec, id, 0, fs, ns, firstline, pts, npts));
        free(rec);
    }
    free(raw);
    free(pts);
}

static size_t code_hash(uint64_t addr, size_t cap) {
    return (size_t)((addr >> 4) * 0x9E3779B97F4A7C15u >> 20) & (cap - 1);
}

/* The function id of the code object at `code`, whose first code_size bytes are `cb`; *units
 * is its length in code units (-1 if the version does not say).  0: not a code object;
 * UINT32_MAX: out of memory. */
static uint32_t code_func(Sampler *S, Target *T, uint64_t code, const uint8_t *cb,
                          int64_t *units) {
    const LLLayout *L = &T->layout;
    if (rd64(cb, 8) != T->code_type) return 0;
    uint64_t filename = rd64(cb, L->code_filename);
    uint64_t name = rd64(cb, L->code_qualname >= 0 ? L->code_qualname : L->code_name);
    int32_t firstline = rd32(cb, L->code_firstlineno);
    *units = L->code_adaptive >= 0 ? (int64_t)rd64(cb, 16) : -1;
    if (T->ncodes * 2 >= T->ccodes) {
        size_t nc = T->ccodes ? T->ccodes * 2 : 1024;
        CodeSlot *t = calloc(nc, sizeof *t);
        if (!t) return UINT32_MAX;
        for (size_t i = 0; i < T->ccodes; i++) {
            if (!T->codes[i].func) continue;
            size_t j = code_hash(T->codes[i].addr, nc);
            while (t[j].func) j = (j + 1) & (nc - 1);
            t[j] = T->codes[i];
        }
        free(T->codes);
        T->codes = t;
        T->ccodes = nc;
    }
    size_t j = code_hash(code, T->ccodes);
    for (; T->codes[j].func; j = (j + 1) & (T->ccodes - 1)) {
        CodeSlot *e = &T->codes[j];
        if (e->addr != code) continue;
        if (e->filename == filename && e->name == name && e->firstline == firstline) {
            return e->func;
        }
        /* The address now holds another code object: define it anew in this slot. */
        break;
    }
    uint32_t id = ++S->next_func;
    if (!T->codes[j].func) T->ncodes++;
    T->codes[j] = (CodeSlot){code, filename, name, firstline, id};
    define_func(S, T, id, filename, name, firstline, rd64(cb, L->code_linetable));
    return id;
}

/* ---- threads ---- */

/* CPU time a thread has used.  A thread of this process has a precise CPU clock; for another
 * process's thread the kernel only offers schedstat, updated at scheduler ticks and switches. */
static uint64_t read_cpu_ns(const ThreadSlot *t) {
    if (t->clock) {
        struct timespec ts;
        clockid_t id = (clockid_t)((~(unsigned)t->tid << 3) | 6); /* thread, CPUCLOCK_SCHED */
        if (clock_gettime(id, &ts) == 0)
            return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    char buf[96];
    ssize_t n = t->fd >= 0 ? pread(t->fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return 0;
    buf[n] = 0;
    return strtoull(buf, NULL, 10);
}

/* Is the thread on a CPU (or waiting for one)?  'R' in /proc/.../stat; -1 if unknown.  A thread
 * blocked in a system call, a sleep, or waiting for the GIL is idle. */
static int is_running(const ThreadSlot *t) {
    char buf[512];
    ssize_t n = t->stat_fd >= 0 ? pread(t->stat_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] == 'R' : -1;
}

static ThreadSlot *thread_slot(Sampler *S, Target *T, uint64_t ident, pid_t tid, uint64_t now) {
    for (int i = 0; i < T->nthreads; i++) {
        ThreadSlot *t = &T->threads[i];
        if (t->ident == ident && t->tid == tid) return t;
    }
    void *arr = T->threads;
    size_t cap = (size_t)T->cthreads;
    if (grow(&arr, &cap, sizeof(ThreadSlot), (size_t)T->nthreads + 1)) return NULL;
    T->threads = arr;
    T->cthreads = (int)cap;
    ThreadSlot *t = &T->threads[T->nthreads++];
    char path[96], name[64] = "";
    t->ident = ident;
    t->tid = tid;
    t->serial = ++S->next_serial;
    t->fd = t->stat_fd = -1;
    t->clock = tid > 0 && T->pid == getpid();
    if (tid > 0) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)T->pid, (int)tid);
        if (!t->clock) {
            t->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
            snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)T->pid, (int)tid);
            t->fd = open(path, O_RDONLY | O_CLOEXEC);
        }
        snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)T->pid, (int)tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, name, sizeof name - 1);
            name[n > 0 ? n : 0] = 0;
            name[strcspn(name, "\n")] = 0;
            close(fd);
        }
    }
    if (tid == T->pid) strcpy(name, "MainThread");
    t->cpu_ns = read_cpu_ns(t);
    t->wall_ns = now;
    uint32_t nid = name[0] ? intern_str(S, name, strlen(name)) : 0;
    uint8_t rec[64], *p = rec;
    p = ll_put_varint(p, t->serial);
    p = ll_put_varint(p, (uint64_t)T->pid);
    p = ll_put_varint(p, (uint64_t)(tid > 0 ? tid : 0));
    p = ll_put_varint(p, ident);
    p = ll_put_varint(p, nid);
    define(S, LL_CHUNK_TASKS, rec, (size_t)(p - rec));
    return t;
}

/* Threads not seen for 64 ticks have ended: close their files and drop their slots (their
 * serials stay in the capture). */
static void forget_threads(Sampler *S, Target *T) {
    int k = 0;
    for (int i = 0; i < T->nthreads; i++) {
        ThreadSlot *t = &T->threads[i];
        if (t->seen + 64 < S->ticks) {
            if (t->fd >= 0) close(t->fd);
            if (t->stat_fd >= 0) close(t->stat_fd);
            continue;
        }
        T->threads[k++] = *t;
    }
    T->nthreads = k;
}

/* ---- one stack ---- */

enum { WALK_OK = 0, WALK_TORN = 1 };

/* Marks a frame as seen in this walk; 0 if it already was.  A chain read while the thread
 * pushes and pops frames can loop back on itself. */
static int visit(Sampler *S, uint64_t frame) {
    size_t mask = S->nvisited - 1;
    for (size_t j = (size_t)((frame >> 3) * 0x9E3779B97F4A7C15u >> 24) & mask;;
         j = (j + 1) & mask) {
        VisitSlot *v = &S->visited[j];
        if (v->gen != S->visit_gen) {
            *v = (VisitSlot){frame, S->visit_gen};
            return 1;
        }
        if (v->addr == frame) return 0;
    }
}

/* Whether a frame read in a walk can be part of a running stack.  A generator's frame has a
 * caller only while it runs: suspended (or made and not yet started) its link to one is
 * cleared.  3.10's frame objects are also reused: one nothing refers to is dead, the zombie its
 * code keeps for the next call (its f_back stale) or one on the free list (linked through
 * f_back, its f_code stale).  A walk that reaches any of these was reading a stack that has
 * moved on (a frame popped, its memory reused, pages read at different moments); followed, it
 * joins pieces of stacks into one that never was (seen: `down` under `churn` under 127 `down`s
 * that recurse at most 50 deep; stacks that start at a generator).  On 3.10, callers are
 * running (or returning or unwinding, when a trace function or __del__ runs from there); the
 * innermost frame may also be just made, not yet running. */
static int live_frame(const LLLayout *L, const uint8_t *fb, uint64_t prev, int innermost) {
    enum { OWNED_BY_GENERATOR = 1, CREATED = -2, EXECUTING = 0, RAISED = 3 };
    if (L->frame_owner >= 0) return fb[L->frame_owner] != OWNED_BY_GENERATOR || prev != 0;
    if (L->frame_refcnt < 0) return 1;
    if (rd64(fb, L->frame_refcnt) == 0) return 0;
    int state = (int8_t)fb[L->frame_state];
    int running = state >= EXECUTING && state <= RAISED;
    if (rd64(fb, L->frame_gen)) return running && prev != 0;
    return running || (innermost && state == CREATED);
}

/* Walks the frame chain from `frame` (innermost) into S->frames; *n frames.  First the frames
 * (through the page cache: 3.11+ frames sit next to each other), then the code objects they
 * run, all in one system call, then the checks. */
static int walk(Sampler *S, Target *T, uint64_t frame, int *n, int *truncated) {
    const LLLayout *L = &T->layout;
    int need = L->frame_previous;
    if (L->frame_code > need) need = L->frame_code;
    if (L->frame_instr > need) need = L->frame_instr;
    if (L->frame_owner > need) need = L->frame_owner;
    if (L->frame_refcnt > need) need = L->frame_refcnt;
    if (L->frame_state > need) need = L->frame_state;
    if (L->frame_gen > need) need = L->frame_gen;
    need += 8;
    uint8_t fb[128];
    int depth = 0, steps = 0;
    *n = 0;
    *truncated = 0;
    if (++S->visit_gen == 0) {
        memset(S->visited, 0, sizeof(VisitSlot) * S->nvisited);
        S->visit_gen = 1;
    }
    while (frame) {
        /* Frames skipped (3.11+ C-stack entries) count too: the visited table stays sparse. */
        if (depth >= S->max_depth || steps >= 2 * S->max_depth) {
            *truncated = 1;
            break;
        }
        int innermost = steps++ == 0;
        if (!visit(S, frame)) return WALK_TORN; /* a cycle: frames were reused under us */
        if ((size_t)need > sizeof fb || ll_mem_read(&T->mem, frame, fb, (size_t)need))
            return WALK_TORN;
        uint64_t code = rd64(fb, L->frame_code) & ~LL_STACKREF_TAGS;
        uint64_t prev = rd64(fb, L->frame_previous);
        if (!live_frame(L, fb, prev, innermost)) return WALK_TORN;
        frame = prev;
        if (L->frame_owner >= 0 && fb[L->frame_owner] >= LL_FIRST_OWNER_NOT_PYTHON) continue;
        if (!code) {
            if (L->minor < 13) return WALK_TORN;
            continue;
        }
        int64_t instr = L->code_adaptive < 0 ? rd32(fb, L->frame_instr) /* 3.10: f_lasti */
                                              : (int64_t)rd64(fb, L->frame_instr);
        S->raw[depth++] = (RawFrame){code, instr};
    }
    /* One read of every distinct code object of the stack (recursion repeats them), each
     * sample: a code object freed (a module's, after its import) and another one made at its
     * address (imports make many) must not be named as the old one, even for a moment. */
    size_t csize = (size_t)L->code_size;
    if (csize > LL_MAX_CODE_SIZE) return WALK_TORN;
    int nu = 0;
    for (int i = 0; i < depth; i++) {
        RawFrame *r = &S->raw[i];
        r->slot = -1;
        int k = i > 0 && S->raw[i - 1].code == r->code ? S->raw[i - 1].slot : -1;
        for (int u = nu - 1; k < 0 && u >= 0 && u >= nu - 64; u--)
            if (S->uniq[u] == r->code) k = u;
        if (k < 0) {
            k = nu;
            S->uniq[nu++] = r->code;
        }
        r->slot = k;
    }
    if (nu && ll_mem_read_many(T->mem.pid, S->uniq, (size_t)nu, S->codebuf, csize) != (size_t)nu)
        return WALK_TORN;
    for (int i = 0; i < depth; i++) {
        const RawFrame *r = &S->raw[i];
        int64_t units = -1;
        uint32_t func = code_func(S, T, r->code, S->codebuf + (size_t)r->slot * csize, &units);
        if (func == UINT32_MAX) return WALK_TORN;
        if (func == 0) {
            /* 3.13 frames may run something that is not a code object; before, it is torn. */
            if (L->minor < 13) return WALK_TORN;
            continue;
        }
        int64_t off = r->instr;
        if (L->code_adaptive >= 0) {
            /* In unsigned arithmetic: a torn read may give any instruction pointer, and the
             * signed difference could overflow (undefined; the range check below rejects it). */
            off = (int64_t)((uint64_t)r->instr - (r->code + (uint64_t)L->code_adaptive)) / 2;
            if (units >= 0 && (off < -1 || off > units)) return WALK_TORN;
        }
        if (off < 0) off = 0;
        S->frames[(*n)++] = (FrameRef){func, (uint32_t)off};
    }
    return WALK_OK;
}

static uint64_t top_frame(Target *T, const uint8_t *ts, int *ok) {
    const LLLayout *L = &T->layout;
    uint64_t f = rd64(ts, L->tstate_frame);
    if (L->cframe_current_frame >= 0 && f) {
        uint64_t cur = 0;
        if (ll_mem_read(&T->mem, f + (uint64_t)L->cframe_current_frame, &cur, 8)) *ok = 0;
        f = cur;
    }
    return f;
}

/* ---- output ---- */

static void flush_chunk(Sampler *S) {
    if (S->chunk) {
        S->chunk->items = S->samples - S->chunk_first;
        ll_writer_submit(&S->w, S->chunk);
        S->chunk = NULL;
    }
}

static void emit(Sampler *S, uint64_t t, const Pending *p, uint64_t now) {
    if (S->chunk && S->chunk->len + LL_MAX_EVENT_BYTES > S->chunk->cap) flush_chunk(S);
    if (!S->chunk) {
        S->chunk = ll_writer_buffer(&S->w, LL_CHUNK_SAMPLES, 0, LL_EVENTS_CHUNK_CAP);
        if (!S->chunk) return;
        S->chunk->len = (size_t)(ll_put_varint(S->chunk->data, t) - S->chunk->data);
        S->chunk_prev_t = t;
        S->chunk_started_ns = now;
        S->chunk_first = S->samples;
    }
    uint8_t *q = S->chunk->data + S->chunk->len;
    q = ll_put_varint(q, t - S->chunk_prev_t);
    q = ll_put_varint(q, p->slot->serial);
    *q++ = p->flags;
    q = ll_put_varint(q, p->stack);
    q = ll_put_varint(q, p->cpu);
    if (p->flags & SF_RSS) q = ll_put_varint(q, ll_zigzag(p->drss));
    S->chunk->len = (size_t)(q - S->chunk->data);
    S->chunk_prev_t = t;
    S->samples++;
}

/* ---- one tick of one process ---- */

static void sample_target(Sampler *S, Target *T, uint64_t t, uint64_t now) {
    const LLLayout *L = &T->layout;
    ll_mem_forget(&T->mem);
    uint64_t interp = 0, tstate = 0;
    int err = ll_mem_read(&T->mem, T->runtime + (uint64_t)L->runtime_interpreters_head, &interp, 8);
    if (!err && interp)
        err = ll_mem_read(&T->mem, interp + (uint64_t)L->interp_threads_head, &tstate, 8);
    if (err == ESRCH) {
        T->dead = 1;
        return;
    }
    if (err || !interp) {
        T->failures++;
        return;
    }
    T->failures = 0;
    int ts_size = L->tstate_thread_id;
    if (L->tstate_native_thread_id > ts_size) ts_size = L->tstate_native_thread_id;
    if (L->tstate_frame > ts_size) ts_size = L->tstate_frame;
    if (L->tstate_next > ts_size) ts_size = L->tstate_next;
    ts_size += 8;
    int tid_off = ll_pthread_tid_offset();
    int np = 0;
    while (tstate && np < LL_MAX_THREADS_PER_TICK) {
        uint8_t ts[256];
        if ((size_t)ts_size > sizeof ts || ll_mem_read(&T->mem, tstate, ts, (size_t)ts_size)) {
            S->torn++;
            break;
        }
        uint64_t ident = rd64(ts, L->tstate_thread_id);
        pid_t tid = 0;
        if (L->tstate_native_thread_id >= 0) {
            tid = (pid_t)rd64(ts, L->tstate_native_thread_id);
        } else if (tid_off >= 0 && ident) {
            int32_t v = 0;
            if (!ll_mem_read(&T->mem, ident + (uint64_t)tid_off, &v, 4)) tid = v;
        }
        ThreadSlot *slot = thread_slot(S, T, ident, tid, now);
        uint64_t next = rd64(ts, L->tstate_next);
        if (!slot) break;
        slot->seen = S->ticks;
        uint64_t cpu_now = read_cpu_ns(slot);
        uint64_t cpu = cpu_now > slot->cpu_ns ? cpu_now - slot->cpu_ns : 0;
        uint64_t wall = now - slot->wall_ns;
        slot->cpu_ns = cpu_now;
        slot->wall_ns = now;
        /* Idle: off CPU.  A thread of this process has a precise CPU clock, so "used less than
         * a tenth of the time since its last sample" says it without reading /proc; another
         * process's thread is asked for its state (schedstat is too coarse for this). */
        int running = slot->clock ? (wall == 0 || cpu * 10 >= wall) : is_running(slot);
        uint8_t flags = running == 0 ? SF_IDLE : 0;
        if (S->cpu_mode && running == 0 && cpu == 0) {
            tstate = next; /* CPU mode: only threads that ran */
            continue;
        }
        int n = 0, truncated = 0, status = WALK_TORN;
        for (int attempt = 0; attempt < LL_WALK_ATTEMPTS && status != WALK_OK; attempt++) {
            if (attempt) {
                S->retried++;
                ll_mem_forget(&T->mem);
                if (ll_mem_read(&T->mem, tstate, ts, (size_t)ts_size)) break;
            }
            int ok = 1;
            uint64_t frame = top_frame(T, ts, &ok);
            status = ok ? walk(S, T, frame, &n, &truncated) : WALK_TORN;
        }
        tstate = next;
        if (status != WALK_OK) {
            S->torn++;
            continue;
        }
        uint32_t stack = 0;
        for (int i = n - 1; i >= 0; i--) {
            stack = intern_stack(S, stack, S->frames[i].func, S->frames[i].off);
            if (!stack) break;
        }
        if (truncated) flags |= SF_TRUNCATED;
        if (truncated) S->truncated++;
        S->pending[np++] = (Pending){slot, stack, flags, cpu, 0};
    }
    if (S->memory && np) {
        char buf[128];
        ssize_t r = T->statm_fd >= 0 ? pread(T->statm_fd, buf, sizeof buf - 1, 0) : -1;
        if (r > 0) {
            buf[r] = 0;
            char *sp = strchr(buf, ' ');
            uint64_t rss = sp ? strtoull(sp + 1, NULL, 10) : 0;
            int64_t d = T->have_rss ? (int64_t)rss - (int64_t)T->rss_pages : 0;
            T->rss_pages = rss;
            T->have_rss = 1;
            /* The process's growth since the last tick goes to the threads that ran. */
            int active = 0;
            for (int i = 0; i < np; i++) active += !(S->pending[i].flags & SF_IDLE);
            int share_to = active ? active : 1, k = 0;
            for (int i = 0; i < np; i++) {
                Pending *p = &S->pending[i];
                if (active && (p->flags & SF_IDLE)) continue;
                if (!active && i > 0) continue;
                p->flags |= SF_RSS;
                p->drss = d / share_to + (k == 0 ? d % share_to : 0);
                k++;
            }
        }
    }
    for (int i = 0; i < np; i++) emit(S, t, &S->pending[i], now);
    if ((S->ticks & 127) == 0) forget_threads(S, T);
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
    T->layout = info->layout;
    T->runtime = info->runtime;
    T->code_type = info->code_type;
    T->statm_fd = -1;
    if (ll_mem_init(&T->mem, pid)) return -1;
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
    free(T->codes);
    ll_mem_free(&T->mem);
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
                !memcmp(&have->layout, &info.layout, sizeof info.layout))
                continue;
            close_target(have);
        }
        add_target(S, pid, &info);
    }
}

/* ---- the thread ---- */

static uint64_t next_interval(Sampler *S) {
    /* xorshift; the interval is uniform in [0.75, 1.25] x the period, against aliasing with
     * periodic work in the program. */
    S->rng ^= S->rng << 13;
    S->rng ^= S->rng >> 7;
    S->rng ^= S->rng << 17;
    double u = (double)(S->rng >> 11) / 9007199254740992.0;
    return (uint64_t)((double)S->interval_ns * (0.75 + 0.5 * u));
}

static void *sampler_main(void *arg) {
    Sampler *S = arg;
    S->tid = ll_gettid();
    pthread_setname_np(pthread_self(), "leadline-sampl"); /* for top -H, perf, gdb */
    uint64_t next = ll_monotonic_ns() + next_interval(S);
    pthread_mutex_lock(&S->mu);
    while (!S->stopping) {
        struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
        int r = pthread_cond_timedwait(&S->cv, &S->mu, &ts);
        if (S->stopping) break;
        if (r != ETIMEDOUT) continue;
        pthread_mutex_unlock(&S->mu);
        uint64_t now = ll_monotonic_ns();
        if (now > next + S->interval_ns) {
            S->missed += (now - next) / S->interval_ns;
            next = now;
        }
        uint64_t t = ll_ticks();
        S->ticks++;
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
        __atomic_store_n(&S->alive_targets, still, __ATOMIC_RELAXED);
        next += next_interval(S);
        pthread_mutex_lock(&S->mu);
        if (!alive && !S->subprocesses && !S->in_process) break; /* the target is gone */
        /* The writer takes nothing more (a failed write): sampling on would only cost CPU. */
        if (ll_writer_stopped(&S->w)) break;
    }
    pthread_mutex_unlock(&S->mu);
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
 * after-fork hook (os.fork() counts threads before running it, and 3.12+ warns about
 * multi-threaded forks), or at once when the fork did not come through os.fork(). */
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
        pthread_mutex_init(&S->w.mu, NULL);
        pthread_cond_init(&S->w.cv, NULL);
        pthread_mutex_init(&S->mu, NULL);
        pthread_cond_init(&S->cv, NULL);
        active_sampler = NULL;
    }
    pthread_mutex_unlock(&sampler_lock);
}

int ll_sampler_init(void) {
    return pthread_atfork(atfork_prepare, atfork_parent, atfork_child) == 0 ? 0 : -1;
}

/* ---- the Python type ---- */

static PyObject *inspect_error(int code, const char *why) {
    PyObject *exc = code == LL_E_NOPROC ? PyExc_ProcessLookupError
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

static PyObject *sampler_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fd",     "meta",         "pid",       "rate_hz", "cpu",
                             "memory", "subprocesses", "max_depth", NULL};
    int fd, pid, cpu = 0, memory = 0, subprocesses = 0, max_depth = 8192;
    double rate;
    Py_buffer meta;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iy*id|pppi", kwlist, &fd, &meta, &pid, &rate,
                                     &cpu, &memory, &subprocesses, &max_depth))
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
    Py_END_ALLOW_THREADS if (rc) {
        PyBuffer_Release(&meta);
        return inspect_error(rc, why);
    }
    Sampler *S = (Sampler *)type->tp_alloc(type, 0);
    if (!S) {
        PyBuffer_Release(&meta);
        return NULL;
    }
    pthread_mutex_init(&S->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&S->cv, &ca);
    pthread_condattr_destroy(&ca);
    S->interval_ns = (uint64_t)(1e9 / rate);
    S->cpu_mode = cpu;
    S->memory = memory;
    S->subprocesses = subprocesses;
    S->max_depth = max_depth;
    S->in_process = pid == getpid();
    S->rng = ll_monotonic_ns() | 1;
    S->frames = malloc(sizeof(FrameRef) * (size_t)max_depth);
    S->raw = malloc(sizeof(RawFrame) * (size_t)max_depth);
    S->uniq = malloc(sizeof(uint64_t) * (size_t)max_depth);
    S->codebuf = malloc(LL_MAX_CODE_SIZE * (size_t)max_depth);
    S->nvisited = 64;
    while (S->nvisited <= 2 * (size_t)max_depth) S->nvisited *= 2;
    S->visited = calloc(S->nvisited, sizeof(VisitSlot));
    S->pending = malloc(sizeof(Pending) * LL_MAX_THREADS_PER_TICK);
    void *arr = S->known;
    int err = !S->frames || !S->raw || !S->uniq || !S->codebuf || !S->visited || !S->pending || grow(&arr, &S->cknown, sizeof(pid_t), 1) ||
              add_target(S, (pid_t)pid, &info);
    S->known = arr;
    if (!err) {
        S->known[S->nknown++] = (pid_t)pid;
        err = ll_writer_open(&S->w, fd);
        S->writer_open = !err;
    }
    if (err) {
        PyBuffer_Release(&meta);
        Py_DECREF(S);
        PyErr_SetString(PyExc_RuntimeError, "leadline: cannot start the sampler");
        return NULL;
    }
    ll_writer_put(&S->w, LL_CHUNK_META, meta.buf, (size_t)meta.len);
    PyBuffer_Release(&meta);
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
    Py_END_ALLOW_THREADS flush_chunk(S);
    S->t_end = ll_ticks();
    S->finished = 1;
}

static PyObject *sampler_finish(PyObject *self, PyObject *unused) {
    Sampler *S = (Sampler *)self;
    sampler_stop(S);
    uint64_t reads = 0;
    for (int i = 0; i < S->ntargets; i++) reads += S->targets[i].mem.reads;
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:K,s:K,s:K}", "ticks",
        (unsigned long long)S->ticks, "samples", (unsigned long long)S->samples, "missed",
        (unsigned long long)S->missed, "torn", (unsigned long long)S->torn, "retried",
        (unsigned long long)S->retried, "truncated", (unsigned long long)S->truncated,
        "sampler_cpu_ns", (unsigned long long)S->sampler_cpu_ns, "t_end",
        (unsigned long long)S->t_end, "reads", (unsigned long long)reads, "tick_ns",
        ll_tick_ns_calibrated(), "stacks", (unsigned long long)S->nstacks, "functions",
        (unsigned long long)S->next_func, "processes", (unsigned long long)S->ntargets);
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
    for (size_t i = 0; i < S->cstrs; i++) free(S->strs[i].s);
    free(S->strs);
    free(S->stacks);
    free(S->known);
    free(S->frames);
    free(S->raw);
    free(S->uniq);
    free(S->codebuf);
    free(S->visited);
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
