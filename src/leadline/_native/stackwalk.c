/* The sampler's stacks: one Python thread's frame chain, read from a running process with
 * process_vm_readv (procmem.c) without its GIL, named as functions and interned as stacks.
 *
 * A walk reads the frames first, then every distinct code object they run, then checks each:
 * a frame that is not live, a code pointer that is not a code object, an instruction outside
 * its code, a read that faults or a chain that loops make the walk torn (the sampler reads it
 * again, sampler.c).  Code objects are named once per process (FUNCS records, the tracer's
 * layout), strings and stacks once per capture (STRINGS and STACKS records: parent stack,
 * function, instruction offset; docs/format.md). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "stackwalk.h"

#include <stdlib.h>
#include <string.h>

/* 3.14+ keep what a frame runs as a _PyStackRef: the object's address with tag bits in the low
 * bits (objects are at least 8-byte aligned, so clearing them is right on every version). */
#define LL_STACKREF_TAGS ((uint64_t)7)
#define LL_MAX_STR 4096
#define LL_MAX_CODE_SIZE 256 /* sizeof(PyCodeObject) is 176-216 bytes in 3.10-3.15 */

struct LLCodeSlot {
    uint64_t addr, filename, name;
    int32_t firstline;
    uint32_t func; /* 0: empty slot */
};

struct LLStackSlot {
    uint32_t parent, func, off, id;
};

struct LLStrSlot {
    uint64_t hash;
    uint32_t id, len;
    char *s;
};

struct LLVisitSlot {
    uint64_t addr;
    uint32_t gen;
};

struct LLRawFrame {
    uint64_t frame;
    uint64_t code;
    int64_t instr;         /* instruction pointer (3.11+) or f_lasti (3.10) */
    int slot;              /* its index among the walk's code objects read */
};

int ll_stacks_init(LLStacks *st, LLWriter *w, int max_depth) {
    memset(st, 0, sizeof *st);
    st->w = w;
    st->max_depth = max_depth;
    st->frames = malloc(sizeof(LLFrame) * (size_t)max_depth);
    st->frame_addr = malloc(sizeof(uint64_t) * (size_t)max_depth);
    st->raw = malloc(sizeof(LLRawFrame) * (size_t)max_depth);
    st->uniq = malloc(sizeof(uint64_t) * (size_t)max_depth);
    st->codebuf = malloc(LL_MAX_CODE_SIZE * (size_t)max_depth);
    st->prev_uniq = malloc(sizeof(uint64_t) * (size_t)max_depth);
    st->prev_codebuf = malloc(LL_MAX_CODE_SIZE * (size_t)max_depth);
    st->miss = malloc(sizeof(uint64_t) * (size_t)max_depth);
    st->miss_slot = malloc(sizeof(int) * (size_t)max_depth);
    st->missbuf = malloc(LL_MAX_CODE_SIZE * (size_t)max_depth);
    st->nvisited = 64;
    while (st->nvisited <= 2 * (size_t)max_depth) st->nvisited *= 2;
    st->visited = calloc(st->nvisited, sizeof(LLVisitSlot));
    return st->frames && st->frame_addr && st->raw && st->uniq && st->codebuf && st->visited && st->prev_uniq &&
                   st->prev_codebuf && st->miss && st->miss_slot && st->missbuf
               ? 0
               : -1;
}

void ll_stacks_free(LLStacks *st) {
    for (size_t i = 0; i < st->cstrs; i++) free(st->strs[i].s);
    free(st->strs);
    free(st->stacks);
    free(st->frames);
    free(st->frame_addr);
    free(st->raw);
    free(st->uniq);
    free(st->codebuf);
    free(st->prev_uniq);
    free(st->prev_codebuf);
    free(st->miss);
    free(st->miss_slot);
    free(st->missbuf);
    free(st->visited);
    memset(st, 0, sizeof *st);
}

int ll_proc_init(LLProc *p, pid_t pid, const LLPyInfo *info) {
    memset(p, 0, sizeof *p);
    p->layout = info->layout;
    p->code_type = info->code_type;
    return ll_mem_init(&p->mem, pid);
}

void ll_proc_free(LLProc *p) {
    free(p->codes);
    ll_mem_free(&p->mem);
    memset(p, 0, sizeof *p);
}

/* ---- interning ---- */

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211u;
    return h | 1;
}

static void define(LLStacks *st, uint8_t kind, const uint8_t *rec, size_t n) {
    ll_writer_define(st->w, kind, rec, n);
}

/* Open addressing; the table doubles at half full.  Returns the id, 0 if out of memory. */
uint32_t ll_intern_str(LLStacks *st, const char *s, size_t n) {
    if (st->nstrs * 2 >= st->cstrs) {
        size_t nc = st->cstrs ? st->cstrs * 2 : 1024;
        LLStrSlot *t = calloc(nc, sizeof *t);
        if (!t) return 0;
        for (size_t i = 0; i < st->cstrs; i++) {
            if (!st->strs[i].id) continue;
            size_t j = st->strs[i].hash & (nc - 1);
            while (t[j].id) j = (j + 1) & (nc - 1);
            t[j] = st->strs[i];
        }
        free(st->strs);
        st->strs = t;
        st->cstrs = nc;
    }
    uint64_t h = fnv(s, n);
    size_t j = h & (st->cstrs - 1);
    for (; st->strs[j].id; j = (j + 1) & (st->cstrs - 1)) {
        LLStrSlot *e = &st->strs[j];
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
    uint32_t id = ++st->next_str;
    st->strs[j] = (LLStrSlot){h, id, (uint32_t)n, copy};
    st->nstrs++;
    uint8_t *p = ll_put_varint(rec, id);
    p = ll_put_varint(p, n);
    memcpy(p, s, n);
    define(st, LL_CHUNK_STRINGS, rec, (size_t)(p - rec) + n);
    free(rec);
    return id;
}

uint32_t ll_intern_stack(LLStacks *st, uint32_t parent, uint32_t func, uint32_t off) {
    if (st->nstacks * 2 >= st->cstacks) {
        size_t nc = st->cstacks ? st->cstacks * 2 : 4096;
        LLStackSlot *t = calloc(nc, sizeof *t);
        if (!t) return 0;
        for (size_t i = 0; i < st->cstacks; i++) {
            LLStackSlot e = st->stacks[i];
            if (!e.id) continue;
            size_t j = fnv((const char *)&e, 12) & (nc - 1);
            while (t[j].id) j = (j + 1) & (nc - 1);
            t[j] = e;
        }
        free(st->stacks);
        st->stacks = t;
        st->cstacks = nc;
    }
    LLStackSlot key = {parent, func, off, 0};
    size_t j = fnv((const char *)&key, 12) & (st->cstacks - 1);
    for (; st->stacks[j].id; j = (j + 1) & (st->cstacks - 1)) {
        LLStackSlot *e = &st->stacks[j];
        if (e->parent == parent && e->func == func && e->off == off) return e->id;
    }
    key.id = ++st->next_stack;
    st->stacks[j] = key;
    st->nstacks++;
    uint8_t rec[40], *p = rec;
    p = ll_put_varint(p, key.id);
    p = ll_put_varint(p, parent);
    p = ll_put_varint(p, func);
    p = ll_put_varint(p, off);
    define(st, LL_CHUNK_STACKS, rec, (size_t)(p - rec));
    return key.id;
}

uint32_t ll_intern_walk(LLStacks *st, uint32_t root, int n) {
    uint32_t stack = root;
    for (int i = n - 1; i >= 0; i--) {
        stack = ll_intern_stack(st, stack, st->frames[i].func, st->frames[i].off);
        if (!stack) break;
    }
    return stack;
}

/* ---- functions ---- */

uint32_t ll_new_func(LLStacks *st, int kind, const char *module, const char *name, size_t n) {
    uint32_t ns = ll_intern_str(st, name, n);
    uint32_t ms = ll_intern_str(st, module, strlen(module));
    uint8_t *rec = malloc(LL_FUNC_RECORD_MAX(0));
    if (!ns || !ms || !rec) {
        free(rec);
        return 0;
    }
    uint32_t id = ++st->next_func;
    define(st, LL_CHUNK_FUNCS, rec, ll_encode_func(rec, id, kind, ms, ns, 0, NULL, 0));
    free(rec);
    return id;
}

uint32_t ll_gc_func(LLStacks *st) {
    /* A C function of the gc module, as the tracer names the builtins it calls. */
    if (!st->gc_func)
        st->gc_func = ll_new_func(st, LL_FUNC_C, "gc", LL_GC_FUNCTION, strlen(LL_GC_FUNCTION));
    return st->gc_func;
}

static void define_func(LLStacks *st, LLProc *p, uint32_t id, uint64_t filename, uint64_t name,
                        long firstline, uint64_t linetable) {
    const LLLayout *L = &p->layout;
    char *text = malloc(LL_MAX_STR * 4 + 1);
    if (!text) return;
    long n = ll_read_str(&p->mem, L, filename, text, LL_MAX_STR * 4 + 1);
    uint32_t fs = ll_intern_str(st, n >= 0 ? text : "<unknown>", n >= 0 ? (size_t)n : 9);
    n = ll_read_str(&p->mem, L, name, text, LL_MAX_STR * 4 + 1);
    uint32_t ns = ll_intern_str(st, n >= 0 ? text : "<unknown>", n >= 0 ? (size_t)n : 9);
    free(text);
    uint8_t hdr[48];
    uint8_t *raw = NULL;
    LLLinePoint *pts = NULL;
    size_t npts = 0;
    int64_t len = 0;
    if (linetable && !ll_mem_read(&p->mem, linetable, hdr, (size_t)L->bytes_sval)) {
        memcpy(&len, hdr + L->bytes_size, 8);
        if (len > 0 && len < (1 << 20) && (raw = malloc((size_t)len)) &&
            !ll_mem_read(&p->mem, linetable + (uint64_t)L->bytes_sval, raw, (size_t)len) &&
            (pts = malloc(sizeof *pts * (size_t)len)))
            npts = ll_decode_linetable(L->minor, firstline, raw, (size_t)len, pts, (size_t)len);
    }
    uint8_t *rec = malloc(LL_FUNC_RECORD_MAX(npts));
    if (rec) {
        define(st, LL_CHUNK_FUNCS, rec, ll_encode_func(rec, id, 0, fs, ns, firstline, pts, npts));
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
static uint32_t code_func(LLStacks *st, LLProc *p, uint64_t code, const uint8_t *cb,
                          int64_t *units) {
    const LLLayout *L = &p->layout;
    if (ll_rd64(cb, 8) != p->code_type) return 0;
    uint64_t filename = ll_rd64(cb, L->code_filename);
    uint64_t name = ll_rd64(cb, L->code_qualname >= 0 ? L->code_qualname : L->code_name);
    int32_t firstline = ll_rd32(cb, L->code_firstlineno);
    *units = L->code_adaptive >= 0 ? (int64_t)ll_rd64(cb, 16) : -1;
    if (p->ncodes * 2 >= p->ccodes) {
        size_t nc = p->ccodes ? p->ccodes * 2 : 1024;
        LLCodeSlot *t = calloc(nc, sizeof *t);
        if (!t) return UINT32_MAX;
        for (size_t i = 0; i < p->ccodes; i++) {
            if (!p->codes[i].func) continue;
            size_t j = code_hash(p->codes[i].addr, nc);
            while (t[j].func) j = (j + 1) & (nc - 1);
            t[j] = p->codes[i];
        }
        free(p->codes);
        p->codes = t;
        p->ccodes = nc;
    }
    size_t j = code_hash(code, p->ccodes);
    for (; p->codes[j].func; j = (j + 1) & (p->ccodes - 1)) {
        LLCodeSlot *e = &p->codes[j];
        if (e->addr != code) continue;
        if (e->filename == filename && e->name == name && e->firstline == firstline) {
            return e->func;
        }
        /* The address now holds another code object: define it anew in this slot. */
        break;
    }
    uint32_t id = ++st->next_func;
    if (!p->codes[j].func) p->ncodes++;
    p->codes[j] = (LLCodeSlot){code, filename, name, firstline, id};
    define_func(st, p, id, filename, name, firstline, ll_rd64(cb, L->code_linetable));
    return id;
}

/* ---- one stack ---- */

#define LL_REUSE_CODES 128

/* Marks a frame as seen in this walk; 0 if it already was.  A chain read while the thread
 * pushes and pops frames can loop back on itself. */
static int visit(LLStacks *st, uint64_t frame) {
    size_t mask = st->nvisited - 1;
    for (size_t j = (size_t)((frame >> 3) * 0x9E3779B97F4A7C15u >> 24) & mask;;
         j = (j + 1) & mask) {
        LLVisitSlot *v = &st->visited[j];
        if (v->gen != st->visit_gen) {
            *v = (LLVisitSlot){frame, st->visit_gen};
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
 * innermost frame may also be just made, not yet running, and a generator's may be yielding or
 * resuming: its state says suspended (or made) while it is still, or already, the thread's
 * frame, its caller linked (a few instructions at each yield, in which a thread stopped by the
 * sampler or the scheduler stays: seen, 0.8% of a generator pipeline's samples, every read of
 * them torn, the generators' time given to the rest). */
static int live_frame(const LLLayout *L, const uint8_t *fb, uint64_t prev, int innermost) {
    enum { OWNED_BY_GENERATOR = 1, CREATED = -2, SUSPENDED = -1, EXECUTING = 0, RAISED = 3 };
    if (L->frame_owner >= 0) return fb[L->frame_owner] != OWNED_BY_GENERATOR || prev != 0;
    if (L->frame_refcnt < 0) return 1;
    if (ll_rd64(fb, L->frame_refcnt) == 0) return 0;
    int state = (int8_t)fb[L->frame_state];
    int running = state >= EXECUTING && state <= RAISED;
    if (ll_rd64(fb, L->frame_gen))
        return prev != 0 && (running || (innermost && (state == SUSPENDED || state == CREATED)));
    return running || (innermost && state == CREATED);
}

/* The bytes of a frame a walk reads: up to the last of the fields it looks at. */
static int frame_size(const LLLayout *L) {
    int need = L->frame_previous;
    if (L->frame_code > need) need = L->frame_code;
    if (L->frame_instr > need) need = L->frame_instr;
    if (L->frame_owner > need) need = L->frame_owner;
    if (L->frame_refcnt > need) need = L->frame_refcnt;
    if (L->frame_state > need) need = L->frame_state;
    if (L->frame_gen > need) need = L->frame_gen;
    return need + 8;
}

/* The walk's first phase: the frame chain from `frame`, each frame read through the page cache
 * and checked, into st->raw (*depth of them: those that run code). */
static int read_frames(LLStacks *st, LLProc *p, uint64_t frame, int *depth, int *truncated) {
    const LLLayout *L = &p->layout;
    int need = frame_size(L);
    uint8_t fb[128];
    int steps = 0;
    int root = 0; /* the last frame read is an entry frame, not a Python function's */
    enum { OWNED_BY_GENERATOR = 1 };
    st->has_gen = 0;
    if (++st->visit_gen == 0) {
        memset(st->visited, 0, sizeof(LLVisitSlot) * st->nvisited);
        st->visit_gen = 1;
    }
    while (frame) {
        /* Frames skipped (3.11+ C-stack entries) count too: the visited table stays sparse. */
        if (*depth >= st->max_depth || steps >= 2 * st->max_depth) {
            *truncated = 1;
            break;
        }
        int innermost = steps++ == 0;
        uint64_t at = frame;
        if (!visit(st, frame)) return LL_WALK_TORN; /* a cycle: frames were reused under us */
        if ((size_t)need > sizeof fb || ll_mem_read(&p->mem, frame, fb, (size_t)need))
            return LL_WALK_TORN;
        uint64_t code = ll_rd64(fb, L->frame_code) & ~LL_STACKREF_TAGS;
        uint64_t prev = ll_rd64(fb, L->frame_previous);
        if (!live_frame(L, fb, prev, innermost)) return LL_WALK_TORN;
        frame = prev;
        root = L->frame_owner >= 0 && fb[L->frame_owner] >= LL_FIRST_OWNER_NOT_PYTHON;
        if (root) continue;
        if (L->frame_owner >= 0 && fb[L->frame_owner] == OWNED_BY_GENERATOR) st->has_gen = 1;
        if (!code) {
            if (L->minor < 13) return LL_WALK_TORN;
            continue;
        }
        int64_t instr = L->code_adaptive < 0 ? ll_rd32(fb, L->frame_instr) /* 3.10: f_lasti */
                                              : (int64_t)ll_rd64(fb, L->frame_instr);
        st->raw[(*depth)++] = (LLRawFrame){at, code, instr, 0};
    }
    /* From 3.12 on every chain of frames ends at an entry frame (the C stack's, and from 3.14
     * the thread's base frame): one that ends at a Python function's frame was read through a
     * link that changed under the walk (seen on 3.15: a stack of `down`s with nothing under
     * them, 3 of 2,045 samples of the 5 kHz churn test). */
    if (steps && !frame && !*truncated && L->minor >= 12 && !root) return LL_WALK_TORN;
    return LL_WALK_OK;
}

/* The second: one read of every distinct code object of the stack (recursion repeats them),
 * each sample: a code object freed (a module's, after its import) and another one made at its
 * address (imports make many) must not be named as the old one, even for a moment.  A walk read
 * again in the same round (a thread that raced, read parked microseconds later) takes the code
 * objects the walk before it read from that read, and reads only the others. */
static int read_codes(LLStacks *st, LLProc *p, int depth) {
    size_t csize = (size_t)p->layout.code_size;
    if (csize > LL_MAX_CODE_SIZE) return LL_WALK_TORN;
    /* (Looked up one by one: a stack of more distinct code objects than LL_REUSE_CODES is read
     * whole.) */
    int nprev = st->read_proc == p && st->read_round == p->mem.round ? st->nread : 0;
    if (nprev > LL_REUSE_CODES) nprev = 0;
    if (nprev) { /* the previous walk's codes become prev_*; this walk's go to uniq, codebuf */
        uint64_t *u = st->uniq;
        uint8_t *b = st->codebuf;
        st->uniq = st->prev_uniq;
        st->codebuf = st->prev_codebuf;
        st->prev_uniq = u;
        st->prev_codebuf = b;
    }
    st->nread = 0;
    int nu = 0;
    for (int i = 0; i < depth; i++) {
        LLRawFrame *r = &st->raw[i];
        r->slot = -1;
        int k = i > 0 && st->raw[i - 1].code == r->code ? st->raw[i - 1].slot : -1;
        for (int u = nu - 1; k < 0 && u >= 0 && u >= nu - 64; u--)
            if (st->uniq[u] == r->code) k = u;
        if (k < 0) {
            k = nu;
            st->uniq[nu++] = r->code;
        }
        r->slot = k;
    }
    int nmiss = 0;
    for (int u = 0; u < nu; u++) {
        int k = -1;
        for (int j = 0; j < nprev && k < 0; j++)
            if (st->prev_uniq[j] == st->uniq[u]) k = j;
        if (k >= 0) {
            memcpy(st->codebuf + (size_t)u * csize, st->prev_codebuf + (size_t)k * csize, csize);
        } else {
            st->miss[nmiss] = st->uniq[u];
            st->miss_slot[nmiss++] = u;
        }
    }
    if (nmiss &&
        ll_mem_read_many(p->mem.pid, st->miss, (size_t)nmiss, st->missbuf, csize) != (size_t)nmiss)
        return LL_WALK_TORN;
    for (int i = 0; i < nmiss; i++)
        memcpy(st->codebuf + (size_t)st->miss_slot[i] * csize, st->missbuf + (size_t)i * csize,
               csize);
    st->nread = nu;
    st->read_proc = p;
    st->read_round = p->mem.round;
    return LL_WALK_OK;
}

/* The third: each frame's code object named as a function, its instruction as an offset in it,
 * into st->frames (*n of them). */
static int name_frames(LLStacks *st, LLProc *p, int depth, int *n) {
    const LLLayout *L = &p->layout;
    size_t csize = (size_t)L->code_size;
    for (int i = 0; i < depth; i++) {
        const LLRawFrame *r = &st->raw[i];
        int64_t units = -1;
        uint32_t func = code_func(st, p, r->code, st->codebuf + (size_t)r->slot * csize, &units);
        if (func == UINT32_MAX) return LL_WALK_TORN;
        if (func == 0) {
            /* 3.13 frames may run something that is not a code object; before, it is torn. */
            if (L->minor < 13) return LL_WALK_TORN;
            continue;
        }
        int64_t off = r->instr;
        if (L->code_adaptive >= 0) {
            /* In unsigned arithmetic: a torn read may give any instruction pointer, and the
             * signed difference could overflow (undefined; the range check below rejects it). */
            off = (int64_t)((uint64_t)r->instr - (r->code + (uint64_t)L->code_adaptive)) / 2;
            if (units >= 0 && (off < -1 || off > units)) return LL_WALK_TORN;
        }
        if (off < 0) off = 0;
        st->frame_addr[*n] = r->frame;
        st->frames[(*n)++] = (LLFrame){func, (uint32_t)off};
    }
    return LL_WALK_OK;
}

/* A walk: first the frames (through the page cache: 3.11+ frames sit next to each other), then
 * the code objects they run, all in one system call (ll_walk_read, which only copies and
 * checks: no allocation, no lock), then the checks that name them (ll_walk_name). */
int ll_walk_read(LLStacks *st, LLProc *p, uint64_t frame, int *depth, int *truncated) {
    *depth = 0;
    *truncated = 0;
    if (read_frames(st, p, frame, depth, truncated) != LL_WALK_OK) return LL_WALK_TORN;
    return read_codes(st, p, *depth);
}

int ll_walk_frames(LLStacks *st, LLProc *p, const uint64_t *frames, int depth, int *n) {
    enum { OWNED_BY_GENERATOR = 1 };
    const LLLayout *L = &p->layout;
    int need = frame_size(L);
    uint8_t fb[128];
    *n = 0;
    if ((size_t)need > sizeof fb || depth > st->max_depth || L->frame_owner < 0)
        return LL_WALK_TORN;
    for (int i = 0; i < depth; i++) {
        if (ll_mem_read(&p->mem, frames[i], fb, (size_t)need)) return LL_WALK_TORN;
        uint64_t code = ll_rd64(fb, L->frame_code) & ~LL_STACKREF_TAGS;
        if (!code || fb[L->frame_owner] != OWNED_BY_GENERATOR) return LL_WALK_TORN;
        st->raw[i] = (LLRawFrame){frames[i], code, (int64_t)ll_rd64(fb, L->frame_instr), 0};
    }
    if (read_codes(st, p, depth) != LL_WALK_OK) return LL_WALK_TORN;
    return name_frames(st, p, depth, n);
}

int ll_walk_name(LLStacks *st, LLProc *p, int depth, int *n) {
    *n = 0;
    return name_frames(st, p, depth, n);
}

uint64_t ll_top_frame(LLProc *p, const uint8_t *ts, int *ok) {
    const LLLayout *L = &p->layout;
    uint64_t f = ll_rd64(ts, L->tstate_frame);
    if (L->cframe_current_frame >= 0 && f) {
        uint64_t cur = 0;
        if (ll_mem_read(&p->mem, f + (uint64_t)L->cframe_current_frame, &cur, 8)) *ok = 0;
        f = cur;
    }
    return f;
}
