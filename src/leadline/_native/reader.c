/* Decoding of EVENTS and RSS chunk payloads for the Python analysis.
 *
 * The Aggregator folds event streams into a call tree (one node per distinct call path, per
 * thread) with time, RSS and heap totals, in one pass and bounded memory: a 100 M-event capture
 * has to be summarised in well under a minute, which a Python loop over events cannot do.
 * Everything built on the tree (per-function totals, diffs, rendering) is Python. */
#include "leadline.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t t, rss, heap, n;
} Base;

typedef struct {
    int kind;
    uint64_t fid, t, rss, heap, n;
    int64_t off;
} Event;

/* Iterates the events of one payload; returns 1 per event, 0 at the end, -1 on bad input. */
typedef struct {
    const uint8_t *p, *end;
    Base cur;
} Cursor;

static int cursor_init(Cursor *c, const uint8_t *p, size_t n) {
    int ok = 1;
    c->p = p;
    c->end = p + n;
    c->cur.t = ll_get_varint(&c->p, c->end, &ok);
    c->cur.rss = ll_get_varint(&c->p, c->end, &ok);
    c->cur.heap = ll_get_varint(&c->p, c->end, &ok);
    c->cur.n = ll_get_varint(&c->p, c->end, &ok);
    return ok ? 0 : -1;
}

static int cursor_next(Cursor *c, Event *e) {
    if (c->p >= c->end) return 0;
    int ok = 1;
    uint8_t head = *c->p++;
    if (head & 0x80 || (head & 7) > LL_EV_C_EXCEPT) return -1;
    e->kind = head & 7;
    e->fid = ll_get_varint(&c->p, c->end, &ok);
    c->cur.t += ll_get_varint(&c->p, c->end, &ok);
    uint64_t gap = (head & LL_HEAD_GAP) ? ll_get_varint(&c->p, c->end, &ok) : 0;
    if (head & LL_HEAD_RSS) c->cur.rss += (uint64_t)ll_unzigzag(ll_get_varint(&c->p, c->end, &ok));
    if (head & LL_HEAD_HEAP) c->cur.heap += ll_get_varint(&c->p, c->end, &ok);
    e->off = (head & LL_HEAD_OFF) ? (int64_t)ll_get_varint(&c->p, c->end, &ok) : -1;
    if (!ok) return -1;
    c->cur.n += gap + 1;
    e->t = c->cur.t;
    e->rss = c->cur.rss;
    e->heap = c->cur.heap;
    e->n = c->cur.n;
    return 1;
}

static PyObject *bad_payload(void) {
    PyErr_SetString(PyExc_ValueError, "malformed event chunk");
    return NULL;
}

/* decode_events(payload) -> list of (number, kind, func, t, rss_pages, heap, offset) */
PyObject *ll_decode_events(PyObject *module, PyObject *args) {
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "y*", &b)) return NULL;
    Cursor c;
    PyObject *out = PyList_New(0);
    if (!out || cursor_init(&c, b.buf, (size_t)b.len) < 0) {
        PyBuffer_Release(&b);
        Py_XDECREF(out);
        return out ? bad_payload() : NULL;
    }
    Event e;
    int r;
    while ((r = cursor_next(&c, &e)) == 1) {
        PyObject *t = Py_BuildValue("(KiKKKKL)", e.n, e.kind, e.fid, e.t, e.rss, e.heap,
                                    (long long)e.off);
        if (!t || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            PyBuffer_Release(&b);
            return NULL;
        }
        Py_DECREF(t);
    }
    PyBuffer_Release(&b);
    if (r < 0) {
        Py_DECREF(out);
        return bad_payload();
    }
    return out;
}

/* decode_rss(payload) -> (times: bytes, rss_pages: bytes), both native uint64 arrays */
PyObject *ll_decode_rss(PyObject *module, PyObject *args) {
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "y*", &b)) return NULL;
    const uint8_t *p = b.buf, *end = p + b.len;
    int ok = 1;
    size_t cap = (size_t)b.len / 2 + 1, n = 0;
    uint64_t *ts = malloc(cap * 8), *rs = malloc(cap * 8);
    uint64_t t = ll_get_varint(&p, end, &ok), rss = 0;
    while (ok && p < end && ts && rs) {
        t += ll_get_varint(&p, end, &ok);
        rss += (uint64_t)ll_unzigzag(ll_get_varint(&p, end, &ok));
        if (!ok) break;
        ts[n] = t;
        rs[n] = rss;
        n++;
    }
    PyBuffer_Release(&b);
    PyObject *r = NULL;
    if (!ts || !rs) PyErr_NoMemory();
    else if (!ok) PyErr_SetString(PyExc_ValueError, "malformed RSS chunk");
    else r = Py_BuildValue("(y#y#)", (char *)ts, (Py_ssize_t)(n * 8), (char *)rs,
                           (Py_ssize_t)(n * 8));
    free(ts);
    free(rs);
    return r;
}

/* ---- Aggregator ---- */

typedef struct {
    int64_t parent; /* node index, or -1 */
    uint64_t fid, thread, calls, incl_t, self_t, incl_heap, self_heap, peak_growth, peak_abs;
    int64_t incl_rss, self_rss;
    double incl_sq, self_sq; /* sums of squared per-call times (ticks^2): their spread */
} ANode;

typedef struct {
    size_t node;
    uint64_t fid, t0, rss0, heap0, child_t, child_heap, peak;
    int64_t child_rss;
    uint64_t seq0; /* the thread's count of events at its call */
} AFrame;

typedef struct {
    uint64_t serial, first_t, last_t, last_rss, last_heap, events, unmatched;
    AFrame *stack;
    size_t depth, cap;
    size_t cursor; /* position in the RSS timeline */
    int started;
} AThread;

typedef struct {
    uint64_t fid, thread, t0, t1;
    int64_t drss;
    uint64_t seq0, seq1; /* its thread's count of events at its call and at its return: what
                          * nests calls that a clock moving every millisecond gives equal times */
} AMover;

#define LL_MOVERS 20

typedef struct {
    PyObject_HEAD
    ANode *nodes;
    size_t nnodes, capnodes;
    int64_t *slots; /* hash of (parent, thread, fid) -> node index + 1 */
    size_t capslots;
    AThread *threads;
    size_t nthreads, capthreads;
    uint64_t *tl_t, *tl_rss;
    size_t ntl;
    AMover movers[LL_MOVERS];
    size_t nmovers;
} LLAggregator;

static size_t node_hash(int64_t parent, uint64_t thread, uint64_t fid, size_t cap) {
    uint64_t x = (uint64_t)parent * 0x9E3779B97F4A7C15ULL ^ fid * 0xC2B2AE3D27D4EB4FULL ^
                 thread * 0x165667B19E3779F9ULL;
    x ^= x >> 29;
    return (size_t)x & (cap - 1);
}

static int grow_slots(LLAggregator *a) {
    size_t ncap = a->capslots ? a->capslots * 2 : 1024;
    int64_t *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < a->nnodes; i++) {
        ANode *n = &a->nodes[i];
        size_t j = node_hash(n->parent, n->thread, n->fid, ncap);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = (int64_t)i + 1;
    }
    free(a->slots);
    a->slots = ns;
    a->capslots = ncap;
    return 0;
}

static int64_t node_get(LLAggregator *a, int64_t parent, uint64_t thread, uint64_t fid) {
    if ((a->nnodes + 1) * 2 > a->capslots && grow_slots(a) < 0) return -1;
    size_t j = node_hash(parent, thread, fid, a->capslots);
    while (a->slots[j]) {
        ANode *n = &a->nodes[a->slots[j] - 1];
        if (n->parent == parent && n->fid == fid && n->thread == thread) return a->slots[j] - 1;
        j = (j + 1) & (a->capslots - 1);
    }
    if (a->nnodes == a->capnodes) {
        size_t ncap = a->capnodes ? a->capnodes * 2 : 1024;
        ANode *nn = realloc(a->nodes, ncap * sizeof *nn);
        if (!nn) return -1;
        a->nodes = nn;
        a->capnodes = ncap;
    }
    ANode *n = &a->nodes[a->nnodes];
    memset(n, 0, sizeof *n);
    n->parent = parent;
    n->thread = thread;
    n->fid = fid;
    a->slots[j] = (int64_t)a->nnodes + 1;
    return (int64_t)a->nnodes++;
}

static AThread *thread_get(LLAggregator *a, uint64_t serial) {
    for (size_t i = 0; i < a->nthreads; i++)
        if (a->threads[i].serial == serial) return &a->threads[i];
    if (a->nthreads == a->capthreads) {
        size_t ncap = a->capthreads ? a->capthreads * 2 : 8;
        AThread *nt = realloc(a->threads, ncap * sizeof *nt);
        if (!nt) return NULL;
        a->threads = nt;
        a->capthreads = ncap;
    }
    AThread *t = &a->threads[a->nthreads++];
    memset(t, 0, sizeof *t);
    t->serial = serial;
    return t;
}

/* Sums of RSS changes from a capture wrap rather than overflow: a damaged or crafted one may hold
 * any value, and signed overflow is undefined (CPython's -fwrapv, which extensions inherit, is
 * not the C's to rely on; UBSan, built without it, found these). */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline uint64_t magnitude(int64_t v) { return v < 0 ? -(uint64_t)v : (uint64_t)v; }

/* Keeps the LL_MOVERS activations that changed RSS the most, by absolute size. */
static void mover_offer(LLAggregator *a, uint64_t fid, uint64_t thread, uint64_t t0, uint64_t t1,
                        int64_t drss, uint64_t seq0, uint64_t seq1) {
    if (drss == 0) return;
    size_t slot = a->nmovers;
    if (a->nmovers == LL_MOVERS) {
        slot = 0; /* the smallest one kept so far */
        for (size_t i = 1; i < LL_MOVERS; i++)
            if (magnitude(a->movers[i].drss) < magnitude(a->movers[slot].drss)) slot = i;
        if (magnitude(a->movers[slot].drss) >= magnitude(drss)) return;
    } else {
        a->nmovers++;
    }
    a->movers[slot] = (AMover){fid, thread, t0, t1, drss, seq0, seq1};
}

static void pop_frame(LLAggregator *a, AThread *th, uint64_t t, uint64_t rss, uint64_t heap) {
    AFrame *f = &th->stack[--th->depth];
    ANode *n = &a->nodes[f->node];
    uint64_t dt = t - f->t0;
    int64_t drss = (int64_t)(rss - f->rss0);
    uint64_t dheap = heap - f->heap0;
    if (rss > f->peak) f->peak = rss;
    uint64_t self_dt = dt > f->child_t ? dt - f->child_t : 0;
    n->incl_t += dt;
    n->self_t += self_dt;
    n->incl_sq += (double)dt * (double)dt;
    n->self_sq += (double)self_dt * (double)self_dt;
    n->incl_rss = wrap_add(n->incl_rss, drss);
    n->self_rss = wrap_add(n->self_rss, wrap_sub(drss, f->child_rss));
    n->incl_heap += dheap;
    n->self_heap += dheap > f->child_heap ? dheap - f->child_heap : 0;
    if (f->peak - f->rss0 > n->peak_growth) n->peak_growth = f->peak - f->rss0;
    if (f->peak > n->peak_abs) n->peak_abs = f->peak;
    mover_offer(a, f->fid, th->serial, f->t0, t, drss, f->seq0, th->events);
    if (th->depth) {
        AFrame *p = &th->stack[th->depth - 1];
        p->child_t += dt;
        p->child_rss = wrap_add(p->child_rss, drss);
        p->child_heap += dheap;
        if (f->peak > p->peak) p->peak = f->peak;
    }
}

static int apply(LLAggregator *a, AThread *th, const Event *e) {
    if (!th->started) {
        th->started = 1;
        th->first_t = e->t;
    }
    th->events++;
    /* RSS samples taken up to this event raise the peak of the function running then. */
    while (th->cursor < a->ntl && a->tl_t[th->cursor] <= e->t) {
        if (th->depth && a->tl_rss[th->cursor] > th->stack[th->depth - 1].peak)
            th->stack[th->depth - 1].peak = a->tl_rss[th->cursor];
        th->cursor++;
    }
    if (th->depth && e->rss > th->stack[th->depth - 1].peak) th->stack[th->depth - 1].peak = e->rss;
    th->last_t = e->t;
    th->last_rss = e->rss;
    th->last_heap = e->heap;
    if (e->kind == LL_EV_CALL || e->kind == LL_EV_C_CALL) {
        int64_t parent = th->depth ? (int64_t)th->stack[th->depth - 1].node : -1;
        int64_t node = node_get(a, parent, th->serial, e->fid);
        if (node < 0) return -1;
        if (th->depth == th->cap) {
            size_t ncap = th->cap ? th->cap * 2 : 64;
            AFrame *ns = realloc(th->stack, ncap * sizeof *ns);
            if (!ns) return -1;
            th->stack = ns;
            th->cap = ncap;
        }
        a->nodes[node].calls++;
        th->stack[th->depth++] = (AFrame){(size_t)node, e->fid, e->t, e->rss, e->heap, 0, 0,
                                          e->rss, 0, th->events};
        return 0;
    }
    /* A return: normally of the frame on top.  If frames above it were never closed (an event
     * lost to a full disk, a filter), close them too; a return with no matching call is a frame
     * that started before recording did. */
    size_t i = th->depth;
    while (i > 0 && th->stack[i - 1].fid != e->fid && th->depth - i < 64) i--;
    if (i == 0 || th->stack[i - 1].fid != e->fid) {
        th->unmatched++;
        return 0;
    }
    while (th->depth >= i) pop_frame(a, th, e->t, e->rss, e->heap);
    return 0;
}

static int agg_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    LLAggregator *a = (LLAggregator *)self;
    Py_buffer t, r;
    if (!PyArg_ParseTuple(args, "y*y*", &t, &r)) return -1;
    size_t n = (size_t)(t.len < r.len ? t.len : r.len) / 8;
    a->tl_t = malloc(n * 8 + 8);
    a->tl_rss = malloc(n * 8 + 8);
    if (!a->tl_t || !a->tl_rss) {
        PyBuffer_Release(&t);
        PyBuffer_Release(&r);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(a->tl_t, t.buf, n * 8);
    memcpy(a->tl_rss, r.buf, n * 8);
    a->ntl = n;
    PyBuffer_Release(&t);
    PyBuffer_Release(&r);
    return 0;
}

static PyObject *agg_feed(PyObject *self, PyObject *args) {
    LLAggregator *a = (LLAggregator *)self;
    unsigned long long stream;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "Ky*", &stream, &b)) return NULL;
    AThread *th = thread_get(a, stream);
    Cursor c;
    if (!th || cursor_init(&c, b.buf, (size_t)b.len) < 0) {
        PyBuffer_Release(&b);
        return th ? bad_payload() : PyErr_NoMemory();
    }
    Event e;
    int r;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    while ((r = cursor_next(&c, &e)) == 1) {
        if (apply(a, th, &e) < 0) {
            r = -2;
            break;
        }
        count++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (r == -2) return PyErr_NoMemory();
    if (r < 0) return bad_payload();
    return PyLong_FromSsize_t(count);
}

/* finish() -> (nodes, movers, threads); closes frames still open at each thread's last event. */
static PyObject *agg_finish(PyObject *self, PyObject *unused) {
    LLAggregator *a = (LLAggregator *)self;
    for (size_t i = 0; i < a->nthreads; i++) {
        AThread *th = &a->threads[i];
        while (th->depth) pop_frame(a, th, th->last_t, th->last_rss, th->last_heap);
    }
    PyObject *nodes = PyList_New((Py_ssize_t)a->nnodes);
    if (!nodes) return NULL;
    for (size_t i = 0; i < a->nnodes; i++) {
        ANode *n = &a->nodes[i];
        PyObject *t = Py_BuildValue("(nLKKKKKLLKKKKdd)", (Py_ssize_t)i, (long long)n->parent,
                                    n->fid, n->thread, n->calls, n->incl_t, n->self_t,
                                    (long long)n->incl_rss, (long long)n->self_rss, n->incl_heap,
                                    n->self_heap, n->peak_growth, n->peak_abs, n->incl_sq,
                                    n->self_sq);
        if (!t) {
            Py_DECREF(nodes);
            return NULL;
        }
        PyList_SET_ITEM(nodes, (Py_ssize_t)i, t);
    }
    PyObject *movers = PyList_New(0);
    for (size_t i = 0; movers && i < a->nmovers; i++) {
        AMover *m = &a->movers[i];
        PyObject *t = Py_BuildValue("(KKKKLKK)", m->fid, m->thread, m->t0, m->t1,
                                    (long long)m->drss, m->seq0, m->seq1);
        if (!t || PyList_Append(movers, t) < 0) Py_CLEAR(movers);
        Py_XDECREF(t);
    }
    PyObject *threads = PyList_New(0);
    for (size_t i = 0; threads && i < a->nthreads; i++) {
        AThread *th = &a->threads[i];
        PyObject *t = Py_BuildValue("(KKKKK)", th->serial, th->first_t, th->last_t, th->events,
                                    th->unmatched);
        if (!t || PyList_Append(threads, t) < 0) Py_CLEAR(threads);
        Py_XDECREF(t);
    }
    if (!movers || !threads) {
        Py_DECREF(nodes);
        Py_XDECREF(movers);
        Py_XDECREF(threads);
        return NULL;
    }
    return Py_BuildValue("(NNN)", nodes, movers, threads);
}

static void agg_dealloc(PyObject *self) {
    LLAggregator *a = (LLAggregator *)self;
    for (size_t i = 0; i < a->nthreads; i++) free(a->threads[i].stack);
    free(a->threads);
    free(a->nodes);
    free(a->slots);
    free(a->tl_t);
    free(a->tl_rss);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef agg_methods[] = {
    {"feed", agg_feed, METH_VARARGS, "feed(stream, payload) -> events decoded"},
    {"finish", agg_finish, METH_NOARGS, "finish() -> (nodes, movers, threads)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LLAggregator_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "leadline._native.Aggregator",
    .tp_basicsize = sizeof(LLAggregator),
    .tp_dealloc = agg_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = agg_init,
    .tp_methods = agg_methods,
    .tp_doc = "Folds event chunks into a call tree with time and memory totals.",
};
