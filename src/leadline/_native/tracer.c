/* The call tracer: one Session per recording, hooks for sys.monitoring (3.12+) or
 * PyEval_SetProfile (3.10, 3.11), per-thread event streams.
 *
 * Hot-path rules: every hook runs with the GIL held, so the session's plain fields need no
 * lock; a thread finds its stream through thread-local storage; the hot path never raises,
 * never calls back into Python (except once per new function, to read its line table and
 * apply user filters, with events from that call ignored) and never takes a lock except to
 * hand a full chunk to the writer, once per 64 KiB. */
#include "leadline.h"
#include "procmem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- pointer -> id map for C functions (open addressing, keys never removed) ---- */
typedef struct {
    const void **keys;
    uint64_t *vals;
    size_t cap, n;
} LLPtrMap;

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static uint64_t ptrmap_get(const LLPtrMap *m, const void *k) {
    if (!m->cap) return 0;
    for (size_t i = ptr_hash(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == k) return m->vals[i];
        if (!m->keys[i]) return 0;
    }
}

static int ptrmap_put(LLPtrMap *m, const void *k, uint64_t v) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 256;
        const void **nk = calloc(ncap, sizeof *nk);
        uint64_t *nv = calloc(ncap, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t j = ptr_hash(m->keys[i], ncap);
            while (nk[j]) j = (j + 1) & (ncap - 1);
            nk[j] = m->keys[i];
            nv[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
    }
    size_t i = ptr_hash(k, m->cap);
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

static void ptrmap_free(LLPtrMap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- session and thread streams ---- */
struct LLThreadStream {
    LLThreadStream *next;
    uint64_t serial;
    LLChunk *chunk;
    uint8_t *pos, *end;
    uint64_t deadline; /* tick after which the chunk is handed over even if not full */
    uint64_t last_t, last_rss, last_heap;
    uint64_t nevents;  /* events seen on this thread */
    uint64_t counted;  /* events accounted for in the stream (recorded or in a gap) */
    uint64_t nrecorded;
    uint64_t chunk_first; /* nrecorded when the current chunk began */
    uint64_t logged_rss; /* RSS at the last recorded event (--rss-trigger) */
    int64_t depth;
    /* --previous: the last event that was not recorded */
    int has_prev;
    uint8_t p_kind;
    uint64_t p_fid, p_t, p_rss, p_heap, p_n;
    int64_t p_off;
};

typedef struct LLSession {
    PyObject_HEAD
    LLWriter w;
    LLRss rss;
    uint64_t gen;
    uint64_t gen_tag; /* gen as the top 24 bits of a co_extra value hold it */
    int active;
    /* The top 32 bits of the co_extra value of a function whose events py_event_fast records:
     * gen_tag and no flag (LL_FN_EXCLUDED), in one compare; never matched (all ones) when the
     * session is not plain (a depth limit, an RSS trigger or exact RSS reads take the whole
     * way, on_py), or its gen_tag is 0 (the value of a code object never seen). */
    uint64_t fast_tag;
    int opened;
    int finished;
    int closed;
    int hook_only;
    int c_calls;
    int previous;
    int exact_rss;
    int64_t trigger_pages;
    int64_t max_depth;
    uint64_t flush_ticks;
    uint64_t resume_after; /* after a fork: tick at which the threads restart */
    int fork_held;         /* a fork under way through the recorder's wrapper, which restarts them */
    PyObject *filter;         /* callable(filename, qualname) -> bool, or NULL */
    PyObject *exclude_prefix; /* str: leadline's own files are never traced */
    PyObject *disable;        /* sys.monitoring.DISABLE, or NULL */
    PyObject *strings;        /* dict: str -> id */
    uint64_t next_string, next_func, next_thread;
    LLPtrMap cfuncs;
    LLThreadStream *threads;
    int in_define;
    uint64_t t_start, mono_start;
    double tick_ns;
    int profile_installed;
    int heap_installed;
    int rss_started;
    int stopped_early; /* the writer stopped (size limit, failed write): the hooks stand down */
} LLSession;

/* Encoding of the value kept in a code object's co_extra slot: the session generation in the
 * top 24 bits (a value left by an earlier session never matches), then flags, then the id. */
#define LL_FN_EXCLUDED (1ull << 32)
#define LL_FN_MASK ((1ull << 40) - 1)
#define LL_FN_ID(v) ((v) & 0xFFFFFFFFull)
#define LL_RESUME 2 /* value of Session.active in a parent right after fork() */

static Py_ssize_t code_extra_index = -1; /* requested once, at module init */
static pthread_key_t exit_key;            /* its destructor hands over an exiting thread's chunk */
static LLSession *active_session;         /* guarded by ll_global_lock */
static uint64_t session_gen;              /* guarded by ll_global_lock */

/* ---- emitting events ---- */

/* An event's time: the CPU's time-stamp counter, or with coarse_time, after the first
 * LL_COARSE_WARMUP_PERIODS of the RSS sampler, the clock it publishes at each wake-up (a load
 * from the line that holds the RSS; the counter's read takes 10-22 ns back to back, and in a
 * hook that does little else the processor hides only part of it).  A program shorter than the
 * warm-up is timed call by call, at little cost to a long one. */
static inline __attribute__((always_inline)) uint64_t session_now(LLSession *s) {
    return ll_rss_coarse(&s->rss) ? ll_rss_now(&s->rss) : ll_ticks();
}

/* Queues what a thread has recorded so far for the writer. */
static void hand_over(LLSession *s, LLThreadStream *ts) {
    if (!ts->chunk) return;
    ts->chunk->len = (size_t)(ts->pos - ts->chunk->data);
    ts->chunk->items = ts->nrecorded - ts->chunk_first;
    ll_writer_submit(&s->w, ts->chunk);
    ts->chunk = NULL;
    ts->pos = ts->end = NULL;
}

static void stop_early(LLSession *s);

static __attribute__((noinline)) int new_chunk(LLSession *s, LLThreadStream *ts, uint64_t now) {
    hand_over(s, ts);
    /* Whether the writer still takes chunks is asked here, once a chunk, so that the events
     * themselves pay nothing for it.  The event at hand still goes into a chunk (counted lost
     * with the others not written), so that events = recorded + lost + filtered holds. */
    if (LL_UNLIKELY(ll_writer_stopped(&s->w)) && !s->stopped_early) stop_early(s);
    LLChunk *c = ll_writer_buffer(&s->w, LL_CHUNK_EVENTS, ts->serial, LL_EVENTS_CHUNK_CAP);
    if (!c) return 0;
    uint8_t *p = c->data;
    p = ll_put_varint(p, ts->last_t);
    p = ll_put_varint(p, ts->last_rss);
    p = ll_put_varint(p, ts->last_heap);
    p = ll_put_varint(p, ts->counted);
    ts->chunk = c;
    ts->chunk_first = ts->nrecorded;
    ts->pos = p;
    ts->end = c->data + c->cap;
    ts->deadline = now + s->flush_ticks;
    return 1;
}

/* An event into the stream's chunk, which has room for it. */
static inline __attribute__((always_inline)) void emit_into(LLThreadStream *ts, int kind,
                                                            uint64_t fid, uint64_t t,
                                                            uint64_t rss, uint64_t heap,
                                                            int64_t off, uint64_t n) {
    if (LL_UNLIKELY(t < ts->last_t)) t = ts->last_t;
    uint8_t *p = ts->pos;
    uint8_t *h = p++;
    uint8_t head = (uint8_t)kind;
    p = ll_put_varint(p, fid);
    p = ll_put_varint(p, t - ts->last_t);
    uint64_t gap = n - 1 - ts->counted;
    if (gap) {
        head |= LL_HEAD_GAP;
        p = ll_put_varint(p, gap);
    }
    if (rss != ts->last_rss) {
        head |= LL_HEAD_RSS;
        p = ll_put_varint(p, ll_zigzag((int64_t)(rss - ts->last_rss)));
        ts->last_rss = rss;
    }
    if (heap != ts->last_heap) {
        head |= LL_HEAD_HEAP;
        p = ll_put_varint(p, heap - ts->last_heap);
        ts->last_heap = heap;
    }
    if (off >= 0) {
        head |= LL_HEAD_OFF;
        p = ll_put_varint(p, (uint64_t)off);
    }
    *h = head;
    ts->pos = p;
    ts->last_t = t;
    ts->counted = n;
    ts->nrecorded++;
}

static inline __attribute__((always_inline)) void emit(LLSession *s, LLThreadStream *ts, int kind, uint64_t fid, uint64_t t,
                        uint64_t rss, uint64_t heap, int64_t off, uint64_t n) {
    if (LL_UNLIKELY(ts->pos + LL_MAX_EVENT_BYTES > ts->end || t >= ts->deadline)) {
        if (!new_chunk(s, ts, t)) return; /* out of memory: the event is lost, counted as a gap */
    }
    emit_into(ts, kind, fid, t, rss, heap, off, n);
}

static __attribute__((noinline, cold)) void emit_previous(LLSession *s, LLThreadStream *ts) {
    emit(s, ts, ts->p_kind, ts->p_fid, ts->p_t, ts->p_rss, ts->p_heap, ts->p_off, ts->p_n);
    ts->has_prev = 0;
}

static __attribute__((noinline)) void save_previous(LLSession *s, LLThreadStream *ts, int kind,
                                                    uint64_t fid,
                                                    uint64_t rss, uint64_t heap, int64_t off) {
    ts->has_prev = 1;
    ts->p_kind = (uint8_t)kind;
    ts->p_fid = fid;
    ts->p_t = session_now(s);
    ts->p_rss = rss;
    ts->p_heap = heap;
    ts->p_off = off;
    ts->p_n = ts->nevents;
}

static inline __attribute__((always_inline)) void record(LLSession *s, LLThreadStream *ts, int kind, uint64_t fid, int64_t off) {
    uint64_t rss;
    if (LL_UNLIKELY(s->exact_rss | ll_tls.rss_dirty)) {
        ll_tls.rss_dirty = 0;
        rss = ll_rss_read_exact(&s->rss);
    } else {
        rss = ll_rss_published(&s->rss);
    }
    uint64_t heap = ll_tls.heap_bytes;
    if (s->trigger_pages) {
        int64_t d = (int64_t)(rss - ts->logged_rss);
        if (d < s->trigger_pages && -d < s->trigger_pages) {
            if (s->previous) save_previous(s, ts, kind, fid, rss, heap, off);
            return;
        }
        ts->logged_rss = rss;
        if (ts->has_prev) emit_previous(s, ts);
    }
    emit(s, ts, kind, fid, session_now(s), rss, heap, off, ts->nevents);
}

/* ---- threads ---- */

static void put_def(LLSession *s, uint8_t kind, const uint8_t *rec, size_t n) {
    ll_writer_define(&s->w, kind, rec, n);
}

static __attribute__((noinline, cold)) LLThreadStream *thread_attach(LLSession *s) {
    LLThreadStream *ts = calloc(1, sizeof *ts);
    if (!ts) return NULL;
    ts->serial = ++s->next_thread;
    ts->last_t = session_now(s);
    ts->last_rss = ll_rss_published(&s->rss);
    ts->last_heap = ll_tls.heap_bytes;
    pthread_mutex_lock(&s->w.mu);
    ts->next = s->threads;
    s->threads = ts;
    pthread_mutex_unlock(&s->w.mu);
    uint8_t rec[40], *p = rec;
    p = ll_put_varint(p, ts->serial);
    p = ll_put_varint(p, (uint64_t)syscall(SYS_gettid));
    p = ll_put_varint(p, (uint64_t)PyThread_get_thread_ident());
    put_def(s, LL_CHUNK_THREADS, rec, (size_t)(p - rec));
    ll_tls.ts = ts;
    ll_tls.gen = s->gen;
    pthread_setspecific(exit_key, (void *)1);
    return ts;
}

static inline LLThreadStream *current_stream(LLSession *s) {
    if (LL_LIKELY(ll_tls.gen == s->gen)) return ll_tls.ts;
    return thread_attach(s);
}

/* Runs when an OS thread exits (without the GIL): queue what it recorded so that a program
 * with many short-lived threads does not keep their buffers until the end. */
static void thread_exit(void *unused) {
    pthread_mutex_lock(&ll_global_lock);
    LLSession *s = active_session;
    if (s && ll_tls.gen == s->gen && ll_tls.ts) hand_over(s, ll_tls.ts);
    ll_tls.gen = 0;
    ll_tls.ts = NULL;
    pthread_mutex_unlock(&ll_global_lock);
}

/* ---- interning ---- */

static uint64_t intern_string(LLSession *s, PyObject *str) {
    if (!str || !PyUnicode_Check(str)) str = NULL;
    PyObject *key = str ? str : PyUnicode_FromString("");
    if (!key) return 0;
    PyObject *found = PyDict_GetItemWithError(s->strings, key);
    if (found) {
        uint64_t id = (uint64_t)PyLong_AsUnsignedLongLong(found);
        if (!str) Py_DECREF(key);
        return id;
    }
    uint64_t id = ++s->next_string;
    PyObject *v = PyLong_FromUnsignedLongLong(id);
    Py_ssize_t n = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key, &n);
    PyObject *escaped = NULL;
    if (!utf8 && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        /* A lone surrogate (an undecodable file name, a name the program built) cannot be
         * UTF-8: it is written as the text \udXXX, as Python's own error output shows it. */
        PyErr_Clear();
        escaped = PyUnicode_AsEncodedString(key, "utf-8", "backslashreplace");
        if (escaped) {
            utf8 = PyBytes_AS_STRING(escaped);
            n = PyBytes_GET_SIZE(escaped);
        }
    }
    if (!v || !utf8 || PyDict_SetItem(s->strings, key, v) < 0) {
        Py_XDECREF(v);
        Py_XDECREF(escaped);
        if (!str) Py_DECREF(key);
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(v);
    uint8_t *rec = malloc((size_t)n + 20);
    if (rec) {
        uint8_t *p = ll_put_varint(rec, id);
        p = ll_put_varint(p, (uint64_t)n);
        memcpy(p, utf8, (size_t)n);
        put_def(s, LL_CHUNK_STRINGS, rec, (size_t)(p - rec) + (size_t)n);
        free(rec);
    }
    Py_XDECREF(escaped);
    if (!str) Py_DECREF(key);
    return id;
}

static int starts_with(PyObject *str, PyObject *prefix) {
    if (!prefix || !str || !PyUnicode_Check(str)) return 0;
    Py_ssize_t r = PyUnicode_Tailmatch(str, prefix, 0, PY_SSIZE_T_MAX, -1);
    if (r < 0) PyErr_Clear();
    return r > 0;
}

/* Writes a FUNCS record (ll_encode_func): the line table is where co_lines() changes line. */
static void define_func(LLSession *s, uint64_t id, int kind, PyObject *file, PyObject *name,
                        long firstline, PyObject *code) {
    uint64_t fs = intern_string(s, file), ns = intern_string(s, name);
    size_t cap = 16, n = 0;
    LLLinePoint *pts = malloc(cap * sizeof *pts);
    if (code && pts) {
        /* co_lines() gives (start, end, line) in bytes; keep the points where the line changes. */
        PyObject *it = PyObject_CallMethod(code, "co_lines", NULL);
        PyObject *iter = it ? PyObject_GetIter(it) : NULL;
        Py_XDECREF(it);
        long prev_line = firstline;
        PyObject *item;
        while (iter && (item = PyIter_Next(iter))) {
            long start = -1, line = -1;
            if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 3 &&
                PyTuple_GET_ITEM(item, 2) != Py_None) {
                start = PyLong_AsLong(PyTuple_GET_ITEM(item, 0)) / 2;
                line = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
            }
            Py_DECREF(item);
            if (start < 0 || line < 0 || line == prev_line) continue;
            if (n == cap) {
                LLLinePoint *more = realloc(pts, cap * 2 * sizeof *pts);
                if (!more) break;
                pts = more;
                cap *= 2;
            }
            pts[n++] = (LLLinePoint){start, line};
            prev_line = line;
        }
        Py_XDECREF(iter);
        PyErr_Clear();
    }
    uint8_t *rec = malloc(LL_FUNC_RECORD_MAX(n));
    if (rec) {
        put_def(s, LL_CHUNK_FUNCS, rec, ll_encode_func(rec, id, kind, fs, ns, firstline, pts, n));
        free(rec);
    }
    free(pts);
}

/* First sight of a code object in this session: decide whether it is traced, give it an id and
 * write its definition.  Returns the co_extra value, or 0 to ignore the event. */
static __attribute__((noinline, cold)) uint64_t define_code(LLSession *s, PyObject *code) {
    if (s->in_define || !PyCode_Check(code)) return 0;
    s->in_define = 1;
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyCodeObject *co = (PyCodeObject *)code;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *name = co->co_qualname;
#else
    PyObject *name = co->co_name;
#endif
    uint64_t v;
    int excluded = starts_with(co->co_filename, s->exclude_prefix);
    if (!excluded && s->filter) {
        PyObject *r = PyObject_CallFunctionObjArgs(s->filter, co->co_filename, name, NULL);
        if (r) {
            excluded = !PyObject_IsTrue(r);
            Py_DECREF(r);
        }
        PyErr_Clear();
    }
    if (excluded) {
        v = LL_FN_EXCLUDED;
    } else {
        v = ++s->next_func;
        define_func(s, v, 0, co->co_filename, name, co->co_firstlineno, code);
    }
    v |= (s->gen & 0xFFFFFF) << 40;
    if (LL_Code_SetExtra(code, code_extra_index, (void *)(uintptr_t)v) < 0) PyErr_Clear();
    PyErr_Restore(exc_type, exc_value, exc_tb);
    s->in_define = 0;
    return v & LL_FN_MASK;
}

static inline uint64_t code_func(LLSession *s, PyObject *code) {
    uint64_t v = (uint64_t)(uintptr_t)ll_code_extra_get(code, code_extra_index);
    if (LL_LIKELY((v >> 40) == (s->gen & 0xFFFFFF))) return v & LL_FN_MASK;
    return define_code(s, code);
}

/* Builtin functions and methods, identified by their PyMethodDef (stable for the process). */
static const void *c_callable_key(PyObject *callable) {
    if (PyCFunction_Check(callable)) return ((PyCFunctionObject *)callable)->m_ml;
    if (Py_IS_TYPE(callable, &PyMethodDescr_Type)) return ((PyMethodDescrObject *)callable)->d_method;
    return NULL;
}

static uint64_t c_func(LLSession *s, PyObject *callable) {
    const void *key = c_callable_key(callable);
    if (!key) return 0;
    uint64_t id = ptrmap_get(&s->cfuncs, key);
    if (LL_LIKELY(id)) return id;
    if (s->in_define) return 0;
    s->in_define = 1;
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    id = ++s->next_func;
    PyObject *qual = PyObject_GetAttrString(callable, "__qualname__");
    if (!qual || !PyUnicode_Check(qual)) {
        Py_XDECREF(qual);
        PyErr_Clear();
        const PyMethodDef *ml = key;
        qual = PyUnicode_FromString(ml->ml_name ? ml->ml_name : "?");
    }
    PyObject *mod = NULL;
    if (PyCFunction_Check(callable)) {
        mod = PyObject_GetAttrString(callable, "__module__");
        if (!mod || !PyUnicode_Check(mod)) {
            Py_XDECREF(mod);
            PyErr_Clear();
            mod = NULL;
        }
    } else {
        PyTypeObject *tp = ((PyMethodDescrObject *)callable)->d_common.d_type;
        mod = PyObject_GetAttrString((PyObject *)tp, "__module__");
        if (!mod || !PyUnicode_Check(mod)) {
            Py_XDECREF(mod);
            PyErr_Clear();
            mod = NULL;
        }
    }
    if (!mod) mod = PyUnicode_FromString("builtins");
    PyErr_Clear();
    define_func(s, id, 1, mod, qual, 0, NULL);
    Py_XDECREF(qual);
    Py_XDECREF(mod);
    if (ptrmap_put(&s->cfuncs, key, id) < 0) id = 0;
    PyErr_Restore(exc_type, exc_value, exc_tb);
    s->in_define = 0;
    return id;
}

/* The writer takes nothing more (the capture reached --max-size, or a write failed): every
 * hook returns at its first test from now on (and on 3.12+ switches its location off, see
 * idle_result), the allocator hooks and marks stand down, and the RSS sampler stops by itself
 * (memory.c), so that the program runs on at full speed.  Called with the GIL held. */
static __attribute__((noinline, cold)) void stop_early(LLSession *s) {
    s->stopped_early = 1;
    s->active = 0; /* after a fork, also what keeps the paused RSS sampler from restarting */
    ll_marks_detach(&s->w);
    pthread_mutex_lock(&ll_global_lock);
    if (s->heap_installed) {
        ll_heap_hooks_uninstall();
        s->heap_installed = 0;
    }
    pthread_mutex_unlock(&ll_global_lock);
}

/* ---- the event paths shared by both hook mechanisms ---- */

/* The parent of a fork() restarts its writer and sampler (session_ready, session_fork_held). */
static __attribute__((noinline, cold)) int session_resume(LLSession *s) {
    pthread_mutex_lock(&ll_global_lock);
    if (s->active == LL_RESUME) {
        ll_writer_resume(&s->w);
        ll_rss_resume(&s->rss);
        s->active = 1;
    }
    pthread_mutex_unlock(&ll_global_lock);
    return s->active == 1;
}

/* Recording?  Just after a fork the parent records into its buffers as usual and restarts its
 * threads when os.fork has returned (the recorder's wrapper says when: fork_held), or, for a
 * fork that does not come through it, 1 ms later: 3.13's os.fork counts the process's threads
 * after running the Python after-fork callbacks, whose own events must not bring the threads
 * back before that (1 ms was not always enough: a busy machine kept the parent off its CPU
 * longer, and 3.13 warned about forking a multi-threaded process).  Meanwhile the RSS sampler,
 * stopped, does not move the coarse clock: each event moves it to now, or the after-fork hooks'
 * time (30 ms, in a test) would go to what runs after them. */
static inline int session_ready(LLSession *s) {
    if (LL_LIKELY(s->active == 1)) return 1;
    if (s->active != LL_RESUME) return 0;
    uint64_t now = ll_ticks();
    if (now >= s->resume_after)
        session_resume(s);
    else
        ll_rss_publish_now(&s->rss, now);
    return 1;
}

/* Returns 1 when the function is excluded (sys.monitoring may then disable the location). */
static inline __attribute__((always_inline)) int on_py(LLSession *s, PyObject *code, int kind, int64_t off) {
    LLThreadStream *ts = current_stream(s);
    if (LL_UNLIKELY(!ts)) return 0;
    uint64_t f = code_func(s, code);
    if (LL_UNLIKELY(!(f & 0xFFFFFFFFull))) return (f & LL_FN_EXCLUDED) ? 1 : 0;
    ts->nevents++;
    if (s->max_depth) {
        int64_t depth = kind == LL_EV_CALL ? ts->depth++ : --ts->depth;
        if (depth >= s->max_depth) return 0;
    }
    record(s, ts, kind, LL_FN_ID(f), off);
    return 0;
}

/* The common case of a Python function's event, with no call in it (so that the hook needs no
 * saved registers, which a call on any of its paths would make it save at its every event):
 * the session records, the thread has its stream, the function is named and not left out, no
 * depth limit, RSS trigger or exact RSS read, and room in the chunk.  1 if it was recorded; 0
 * (nothing changed) if the hook must take the whole way, on_py. */
static inline __attribute__((always_inline)) int py_event_fast(LLSession *s, PyObject *code,
                                                               int kind, int64_t off) {
    /* (session_ready; the thread's stream is this session's: thread_attach sets both) */
    if (LL_UNLIKELY(s->active != 1 || ll_tls.gen != s->gen)) return 0;
    uint64_t v = (uint64_t)(uintptr_t)ll_code_extra_get(code, code_extra_index);
    if (LL_UNLIKELY((v >> 32) != s->fast_tag || ll_tls.rss_dirty)) return 0;
    LLThreadStream *ts = ll_tls.ts;
    uint64_t t = session_now(s);
    if (LL_UNLIKELY(ts->pos + LL_MAX_EVENT_BYTES > ts->end || t >= ts->deadline)) return 0;
    ts->nevents++;
    emit_into(ts, kind, LL_FN_ID(v), t, ll_rss_published(&s->rss), ll_tls.heap_bytes, off,
              ts->nevents);
    return 1;
}

static inline void on_c(LLSession *s, PyObject *callable, int kind, int64_t off) {
    if (!c_callable_key(callable)) return;
    LLThreadStream *ts = current_stream(s);
    if (LL_UNLIKELY(!ts)) return;
    uint64_t f = c_func(s, callable);
    if (!f) return;
    ts->nevents++;
    if (s->max_depth) {
        int64_t depth = kind == LL_EV_C_CALL ? ts->depth++ : --ts->depth;
        if (depth >= s->max_depth) return;
    }
    record(s, ts, kind, f, off);
}

/* ---- hooks ---- */

/* The kinds of hook Session.hook(kind) makes, exported to Python as HOOK_KINDS:
 * ENTER_LOCAL (PY_START, PY_RESUME: may return DISABLE), ENTER (PY_THROW), EXIT_LOCAL
 * (PY_RETURN, PY_YIELD: may return DISABLE), EXIT (PY_UNWIND), CALL (a builtin being called),
 * C_RETURN, C_RAISE, and BOOTSTRAP (3.10/3.11: the threading.setprofile() callable that installs
 * the profile function in each new thread). */
enum {
#define LL_X(name, n) HK_##name = n,
    LL_HOOK_KIND_LIST(LL_X)
#undef LL_X
    HK_COUNT
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    LLSession *s;
    int kind;
} LLHook;

#if LL_HAVE_MONITORING
static inline int64_t offset_units(PyObject *o) {
    long v = ll_small_long(o);
    return v < 0 ? -1 : v / 2;
}
#else
static inline int64_t offset_units(PyObject *o) {
    long v = PyLong_AsLong(o);
    if (LL_UNLIKELY(v < 0)) {
        PyErr_Clear();
        return -1;
    }
    return v / 2;
}
#endif

static PyObject *empty_hook(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Py_RETURN_NONE;
}

#define HOOK_SESSION(self) (((LLHook *)(self))->s)
#define NARGS(n) (PyVectorcall_NARGS(n))

static PyObject *disable_or_none(LLSession *s, int excluded) {
    if (excluded && s->disable) return Py_NewRef(s->disable);
    Py_RETURN_NONE;
}

/* What a hook for a local event returns when it records nothing: after an early stop,
 * sys.monitoring.DISABLE, so that each location calls it at most once more and the program
 * runs at full speed (the next recording's restart_events() switches them back on). */
static PyObject *idle_result(LLSession *s) {
    if (s->stopped_early && s->disable) return Py_NewRef(s->disable);
    Py_RETURN_NONE;
}

static __attribute__((noinline)) PyObject *enter_local_slow(LLSession *s, PyObject *const *args,
                                                             size_t nargsf) {
    if (LL_UNLIKELY(!session_ready(s) || NARGS(nargsf) < 1)) return idle_result(s);
    return disable_or_none(s, on_py(s, args[0], LL_EV_CALL, -1));
}

static PyObject *hook_enter_local(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kw) {
    LLSession *s = HOOK_SESSION(self);
    if (LL_LIKELY(NARGS(nargsf) >= 1 && py_event_fast(s, args[0], LL_EV_CALL, -1)))
        Py_RETURN_NONE;
    return enter_local_slow(s, args, nargsf);
}

static PyObject *hook_enter(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    LLSession *s = HOOK_SESSION(self);
    if (LL_UNLIKELY(!session_ready(s) || NARGS(nargsf) < 1)) Py_RETURN_NONE;
    on_py(s, args[0], LL_EV_CALL, -1);
    Py_RETURN_NONE;
}

static __attribute__((noinline)) PyObject *exit_local_slow(LLSession *s, PyObject *const *args,
                                                            size_t nargsf) {
    if (LL_UNLIKELY(!session_ready(s) || NARGS(nargsf) < 2)) return idle_result(s);
    return disable_or_none(s, on_py(s, args[0], LL_EV_RETURN, offset_units(args[1])));
}

static PyObject *hook_exit_local(PyObject *self, PyObject *const *args, size_t nargsf,
                                 PyObject *kw) {
    LLSession *s = HOOK_SESSION(self);
#if PY_VERSION_HEX >= 0x030C0000
    if (LL_LIKELY(NARGS(nargsf) >= 2 && PyLong_CheckExact(args[1]) &&
                  _PyLong_IsCompact((PyLongObject *)args[1]))) {
        Py_ssize_t v = _PyLong_CompactValue((PyLongObject *)args[1]);
        if (LL_LIKELY(py_event_fast(s, args[0], LL_EV_RETURN, v < 0 ? -1 : v / 2)))
            Py_RETURN_NONE;
    }
#endif
    return exit_local_slow(s, args, nargsf);
}

static PyObject *hook_exit(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    LLSession *s = HOOK_SESSION(self);
    if (LL_UNLIKELY(!session_ready(s) || NARGS(nargsf) < 2)) Py_RETURN_NONE;
    on_py(s, args[0], LL_EV_RETURN, offset_units(args[1]));
    Py_RETURN_NONE;
}

static PyObject *hook_c(PyObject *self, PyObject *const *args, size_t nargsf, int kind) {
    LLSession *s = HOOK_SESSION(self);
    if (LL_UNLIKELY(!session_ready(s) || NARGS(nargsf) < 3)) {
        if (kind == LL_EV_C_CALL) return idle_result(s); /* CALL is a local event; the others not */
        Py_RETURN_NONE;
    }
    on_c(s, args[2], kind, offset_units(args[1]));
    Py_RETURN_NONE;
}
static PyObject *hook_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    return hook_c(self, args, nargsf, LL_EV_C_CALL);
}
static PyObject *hook_c_return(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kw) {
    return hook_c(self, args, nargsf, LL_EV_C_RETURN);
}
static PyObject *hook_c_raise(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    return hook_c(self, args, nargsf, LL_EV_C_EXCEPT);
}

#if !LL_HAVE_MONITORING
static __attribute__((noinline)) int profile_hook_slow(PyObject *obj, PyFrameObject *frame,
                                                       int what, PyObject *arg) {
    LLSession *s = (LLSession *)obj;
    if (LL_UNLIKELY(!session_ready(s))) {
        /* After an early stop each thread takes the hook off itself at its next event, so that
         * it runs at full speed (uninstall_profile does not count it as replaced). */
        if (s->stopped_early) PyEval_SetProfile(NULL, NULL);
        return 0;
    }
    switch (what) {
    case PyTrace_CALL:
        on_py(s, (PyObject *)ll_frame_code(frame), LL_EV_CALL, -1);
        break;
    case PyTrace_RETURN:
        on_py(s, (PyObject *)ll_frame_code(frame), LL_EV_RETURN, ll_frame_lasti(frame));
        break;
    case PyTrace_C_CALL:
        if (s->c_calls) on_c(s, arg, LL_EV_C_CALL, ll_frame_lasti(frame));
        break;
    case PyTrace_C_RETURN:
        if (s->c_calls) on_c(s, arg, LL_EV_C_RETURN, ll_frame_lasti(frame));
        break;
    case PyTrace_C_EXCEPTION:
        if (s->c_calls) on_c(s, arg, LL_EV_C_EXCEPT, ll_frame_lasti(frame));
        break;
    }
    return 0;
}

static int profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    LLSession *s = (LLSession *)obj;
    if (LL_LIKELY(what == PyTrace_CALL)) {
        if (LL_LIKELY(py_event_fast(s, (PyObject *)ll_frame_code(frame), LL_EV_CALL, -1)))
            return 0;
    } else if (LL_LIKELY(what == PyTrace_RETURN)) {
        if (LL_LIKELY(py_event_fast(s, (PyObject *)ll_frame_code(frame), LL_EV_RETURN,
                                    ll_frame_lasti(frame))))
            return 0;
    }
    return profile_hook_slow(obj, frame, what, arg);
}

static int empty_profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    return 0;
}

static Py_tracefunc session_profile_func(LLSession *s) {
    return s->hook_only ? empty_profile_hook : profile_hook;
}

/* threading.setprofile() calls this in each new thread as a Python-level profile function:
 * swap in the C hook for that thread, then handle the event that brought us here. */
static PyObject *hook_bootstrap(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kw) {
    LLSession *s = HOOK_SESSION(self);
    if (!session_ready(s) || NARGS(nargsf) < 3 || !PyFrame_Check(args[0])) {
        PyEval_SetProfile(NULL, NULL);
        Py_RETURN_NONE;
    }
    PyEval_SetProfile(session_profile_func(s), (PyObject *)s);
    const char *ev = PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8(args[1]) : NULL;
    int what = -1;
    if (!ev) PyErr_Clear();
    else if (!strcmp(ev, "call")) what = PyTrace_CALL;
    else if (!strcmp(ev, "return")) what = PyTrace_RETURN;
    else if (!strcmp(ev, "c_call")) what = PyTrace_C_CALL;
    else if (!strcmp(ev, "c_return")) what = PyTrace_C_RETURN;
    else if (!strcmp(ev, "c_exception")) what = PyTrace_C_EXCEPTION;
    if (what >= 0) session_profile_func(s)((PyObject *)s, (PyFrameObject *)args[0], what, args[2]);
    Py_RETURN_NONE;
}
#endif

static PyObject *hook_new(LLSession *s, int kind) {
    LLHook *h = PyObject_New(LLHook, &LLHook_Type);
    if (!h) return NULL;
    static const vectorcallfunc table[HK_COUNT] = {
        hook_enter_local, hook_enter, hook_exit_local, hook_exit,
        hook_call,        hook_c_return, hook_c_raise,
#if LL_HAVE_MONITORING
        empty_hook,
#else
        hook_bootstrap,
#endif
    };
    h->vectorcall = (s->hook_only && kind != HK_BOOTSTRAP) ? empty_hook : table[kind];
    h->s = s;
    h->kind = kind;
    Py_INCREF(s);
    return (PyObject *)h;
}

static void hook_dealloc(PyObject *self) {
    Py_XDECREF((PyObject *)((LLHook *)self)->s);
    PyObject_Free(self);
}

PyTypeObject LLHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "leadline._native.Hook",
    .tp_basicsize = sizeof(LLHook),
    .tp_dealloc = hook_dealloc,
    .tp_vectorcall_offset = offsetof(LLHook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A leadline event callback (sys.monitoring or threading.setprofile).",
};

/* ---- fork ----
 * Before fork() the writer and sampler threads are joined: the child then inherits no thread
 * that held a lock or waited on a condition variable, and os.fork() in the parent does not see
 * extra threads (3.12+ warns about forking a multi-threaded process).  The parent restarts them
 * when os.fork has returned through the recorder's wrapper (fork_held), or else at its first
 * event 1 ms after the fork (active == LL_RESUME); the child records nothing and never touches
 * the parent's file. */
static void atfork_prepare(void) {
    pthread_mutex_lock(&ll_global_lock);
    LLSession *s = active_session;
    if (s && s->active == 1) {
        ll_writer_pause(&s->w);
        ll_rss_pause(&s->rss);
    }
    if (s) pthread_mutex_lock(&s->w.mu);
}
static void atfork_parent(void) {
    LLSession *s = active_session;
    if (s) {
        pthread_mutex_unlock(&s->w.mu);
        if ((s->active == 1 && (s->w.paused || s->rss.paused)) ||
            (s->active == LL_RESUME && s->fork_held)) {
            s->resume_after = s->fork_held ? UINT64_MAX : ll_ticks() + s->flush_ticks / 1000;
            s->active = LL_RESUME;
        }
    }
    pthread_mutex_unlock(&ll_global_lock);
}
static void atfork_child(void) {
    LLSession *s = active_session;
    if (s) {
        s->active = 0;
        s->w.thread_started = 0;
        s->w.paused = 0;
        if (s->w.fd >= 0) close(s->w.fd);
        s->w.fd = -1;
        s->rss.running = 0;
        s->rss.paused = 0;
        ll_writer_init_sync(&s->w);
        active_session = NULL;
    }
    ll_tls.gen = 0;
    ll_tls.ts = NULL;
    pthread_mutex_unlock(&ll_global_lock);
}

#if !LL_HAVE_MONITORING && PY_VERSION_HEX >= 0x030B0000
int ll_iframe_at = -1, ll_iframe_code_at, ll_iframe_instr_at, ll_code_first_at;
#endif

int ll_tracer_init(void) {
#if !LL_HAVE_MONITORING && PY_VERSION_HEX >= 0x030B0000
    /* The offsets are a 64-bit release build's (a --with-trace-refs build's objects have a
     * longer header). */
    const LLLayout *L = ll_layout(11);
    if (!LL_FRAME_READS_BUILD) L = NULL;
    if (L && L->frameobj_iframe >= 0 && L->frame_code >= 0 && L->frame_instr >= 0 &&
        L->code_adaptive >= 0) {
        ll_iframe_code_at = L->frame_code;
        ll_iframe_instr_at = L->frame_instr;
        ll_code_first_at = L->code_adaptive;
        ll_iframe_at = L->frameobj_iframe;
    }
#endif
    code_extra_index = LL_RequestCodeExtraIndex(NULL);
    if (code_extra_index < 0) return -1;
    if (pthread_key_create(&exit_key, thread_exit) != 0) return -1;
    if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0) return -1;
    return 0;
}

/* ---- Session object ---- */

static PyObject *session_error(const char *msg) {
    PyErr_SetString(PyExc_RuntimeError, msg);
    return NULL;
}

static PyObject *session_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"fd",        "meta",     "hook_only", "c_calls",    "rss_trigger_pages",
                             "previous",  "max_depth", "exact_rss", "heap",      "rss_period_us",
                             "filter",    "exclude_prefix", "disable", "max_bytes", "coarse_time", NULL};
    int fd, hook_only = 0, c_calls = 0, previous = 0, exact_rss = 0, heap = 1, coarse_time = 0;
    long long trigger = 0, max_depth = 0;
    unsigned long long max_bytes = 0;
    unsigned int period = 1000;
    Py_buffer meta;
    PyObject *filter = Py_None, *prefix = Py_None, *disable = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iy*|ppLpLppIOOOKp", kwlist, &fd, &meta,
                                     &hook_only, &c_calls, &trigger, &previous, &max_depth,
                                     &exact_rss, &heap, &period, &filter, &prefix, &disable,
                                     &max_bytes, &coarse_time))
        return NULL;
    if (coarse_time && !period) {
        PyBuffer_Release(&meta);
        return session_error("coarse_time takes its clock from the RSS sampler: a period is needed");
    }
    pthread_mutex_lock(&ll_global_lock);
    int busy = active_session != NULL;
    pthread_mutex_unlock(&ll_global_lock);
    if (busy) {
        PyBuffer_Release(&meta);
        return session_error("a leadline recording is already active in this process");
    }
    LLSession *s = (LLSession *)type->tp_alloc(type, 0);
    if (!s) {
        PyBuffer_Release(&meta);
        return NULL;
    }
    s->w.fd = -1;
    s->rss.statm_fd = -1;
    s->hook_only = hook_only;
    s->c_calls = c_calls;
    s->previous = previous;
    s->exact_rss = exact_rss;
    s->trigger_pages = trigger > 0 ? trigger : 0;
    s->max_depth = max_depth > 0 ? max_depth : 0;
    s->strings = PyDict_New();
    if (filter != Py_None) s->filter = Py_NewRef(filter);
    if (prefix != Py_None) s->exclude_prefix = Py_NewRef(prefix);
    if (disable != Py_None) s->disable = Py_NewRef(disable);
    s->tick_ns = ll_tick_ns_calibrated();
    s->flush_ticks = (uint64_t)(1e9 / s->tick_ns); /* hand chunks over at least once a second */
    int err = ll_writer_open(&s->w, fd);
    if (err) {
        PyBuffer_Release(&meta);
        errno = err;
        Py_DECREF(s);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    s->opened = 1;
    s->w.max_bytes = max_bytes; /* before the first chunk is queued: no lock needed yet */
    ll_writer_put(&s->w, LL_CHUNK_META, meta.buf, (size_t)meta.len);
    PyBuffer_Release(&meta);
    /* A period of 0: no RSS is read (a record of calls and time alone: no thread for it). */
    uint64_t warmup = 0;
    if (coarse_time) {
        warmup = (uint64_t)((double)period * 1000.0 * LL_COARSE_WARMUP_PERIODS / s->tick_ns);
        if (!warmup) warmup = 1;
    }
    err = period ? ll_rss_start(&s->rss, &s->w, period, warmup) : 0;
    if (err) {
        errno = err;
        Py_DECREF(s);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    s->rss_started = period != 0;
    if (heap && !hook_only) s->heap_installed = ll_heap_hooks_install() >= 0;
    pthread_mutex_lock(&ll_global_lock);
    s->gen = ++session_gen;
    s->gen_tag = s->gen & 0xFFFFFF;
    int plain = !s->max_depth && !s->trigger_pages && !s->exact_rss;
    s->fast_tag = plain && s->gen_tag ? s->gen_tag << 8 : UINT64_MAX;
    active_session = s;
    pthread_mutex_unlock(&ll_global_lock);
    s->mono_start = ll_monotonic_ns();
    s->t_start = ll_ticks();
    ll_rss_publish_now(&s->rss, s->t_start); /* no event's time is before the start */
    s->active = 1;
    if (!hook_only) ll_marks_attach(&s->w);
    return (PyObject *)s;
}

static PyObject *session_hook(PyObject *self, PyObject *arg) {
    long kind = PyLong_AsLong(arg);
    if (kind < 0 || kind >= HK_COUNT) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "unknown hook kind");
        return NULL;
    }
    return hook_new((LLSession *)self, (int)kind);
}

#if !LL_HAVE_MONITORING
/* Installs the C profile hook on every existing thread; refuses if another profiler is set. */
/* 3.11: the frame reads at the generated offsets (compat.h) checked once against the API on
 * the frame that installs the hook; any difference and the API is used from then on. */
static void check_frame_reads(void) {
#  if PY_VERSION_HEX >= 0x030B0000
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (ll_iframe_at < 0 || !f) return;
    uintptr_t iframe = (uintptr_t)ll_iframe(f);
    PyCodeObject *code = PyFrame_GetCode(f);
    Py_DECREF(code);
    int b = PyFrame_GetLasti(f);
    int lasti = b < 0 ? -1 : b / 2;
    if (!iframe || iframe % sizeof(void *) || ll_frame_code(f) != code ||
        ll_frame_lasti(f) != lasti)
        ll_iframe_at = -1;
#  endif
}

static PyObject *session_install_profile(PyObject *self, PyObject *unused) {
    LLSession *s = (LLSession *)self;
    PyInterpreterState *interp = PyThreadState_GetInterpreter(PyThreadState_Get());
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
        if (t->c_profilefunc && t->c_profileobj != self) {
            PyObject *o = t->c_profileobj;
            PyErr_Format(PyExc_RuntimeError,
                         "another profiler is active (%s); stop it before starting leadline",
                         o ? Py_TYPE(o)->tp_name : "a C profile function");
            return NULL;
        }
    }
    check_frame_reads();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
        if (_PyEval_SetProfile(t, session_profile_func(s), self) < 0) return NULL;
    }
    s->profile_installed = 1;
    Py_RETURN_NONE;
}

/* Removes the hook from every thread; returns how many threads no longer had it (the program
 * called sys.setprofile while being traced, so events there are missing from then on). */
static int uninstall_profile(LLSession *s) {
    if (!s->profile_installed) return 0;
    int replaced = 0;
    PyInterpreterState *interp = PyThreadState_GetInterpreter(PyThreadState_Get());
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
        int ours = t->c_profileobj == (PyObject *)s ||
                   (t->c_profileobj && Py_IS_TYPE(t->c_profileobj, &LLHook_Type) &&
                    ((LLHook *)t->c_profileobj)->s == s);
        if (ours && _PyEval_SetProfile(t, NULL, NULL) < 0) PyErr_Clear();
        if (!ours && !(s->stopped_early && !t->c_profilefunc)) replaced++;
    }
    s->profile_installed = 0;
    return replaced;
}
#else
static PyObject *session_install_profile(PyObject *self, PyObject *unused) {
    return session_error("this Python uses sys.monitoring; there is no profile hook to install");
}
static int uninstall_profile(LLSession *s) { return 0; }
#endif

/* Stops recording: hooks become no-ops, threads' last chunks are queued.  Returns counters. */
static PyObject *session_finish(PyObject *self, PyObject *unused) {
    LLSession *s = (LLSession *)self;
    if (s->finished) return session_error("recording already finished");
    if (s->active == LL_RESUME) session_resume(s);
    s->active = 0;
    s->finished = 1;
    ll_marks_detach(&s->w);
    int replaced = uninstall_profile(s);
    if (s->heap_installed) ll_heap_hooks_uninstall();
    if (s->rss_started) ll_rss_stop(&s->rss);
    uint64_t t_end = ll_ticks(), mono_end = ll_monotonic_ns();
    uint64_t events = 0, recorded = 0;
    pthread_mutex_lock(&ll_global_lock);
    for (LLThreadStream *ts = s->threads; ts; ts = ts->next) {
        hand_over(s, ts);
        events += ts->nevents;
        recorded += ts->nrecorded;
    }
    if (active_session == s) active_session = NULL;
    pthread_mutex_unlock(&ll_global_lock);
    ll_tls.gen = 0;
    ll_tls.ts = NULL;
    double tick_ns = s->tick_ns;
    if (t_end > s->t_start && mono_end - s->mono_start > 50000000u)
        tick_ns = (double)(mono_end - s->mono_start) / (double)(t_end - s->t_start);
    /* coarse_from: when the events began to take the sampler's clock (0: they never did) */
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:d,s:K,s:K,s:i,s:K}", "events", events, "encoded",
                         recorded, "t_start", s->t_start, "t_end", t_end, "tick_ns", tick_ns,
                         "threads", s->next_thread, "functions", s->next_func, "hook_replaced",
                         replaced, "coarse_from", s->rss.coarse_from);
}

/* close([end]): drains the writer, writes END (bytes, or a callable that makes them from the
 * writer's figures: see ll_writer_close_py) and closes the file; returns those figures. */
static PyObject *session_close(PyObject *self, PyObject *args) {
    LLSession *s = (LLSession *)self;
    PyObject *end = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &end)) return NULL;
    if (!s->finished) {
        PyObject *r = session_finish(self, NULL);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    if (s->closed) return session_error("capture already closed");
    s->closed = 1;
    return ll_writer_close_py(&s->w, end);
}

static void session_dealloc(PyObject *self) {
    LLSession *s = (LLSession *)self;
    if (s->opened && !s->closed) {
        if (!s->finished) {
            PyObject *r = session_finish(self, NULL);
            Py_XDECREF(r);
            PyErr_Clear();
        }
        ll_writer_close(&s->w);
    }
    for (LLThreadStream *ts = s->threads; ts;) {
        LLThreadStream *n = ts->next;
        free(ts->chunk);
        free(ts);
        ts = n;
    }
    if (s->opened) {
        pthread_mutex_destroy(&s->w.mu);
        pthread_cond_destroy(&s->w.cv);
    }
    ptrmap_free(&s->cfuncs);
    Py_XDECREF(s->strings);
    Py_XDECREF(s->filter);
    Py_XDECREF(s->exclude_prefix);
    Py_XDECREF(s->disable);
    Py_TYPE(self)->tp_free(self);
}

/* fork_held(True) as os.fork is called through the recorder's wrapper: its threads, stopped
 * for the fork, stay stopped in the parent until fork_held(False), once os.fork has returned
 * (the wrapper counts forks under way at once, and holds them from its first to its last). */
static PyObject *session_fork_held(PyObject *self, PyObject *arg) {
    LLSession *s = (LLSession *)self;
    int held = PyObject_IsTrue(arg);
    if (held < 0) return NULL;
    pthread_mutex_lock(&ll_global_lock);
    s->fork_held = held;
    int resume = !held && s->active == LL_RESUME;
    pthread_mutex_unlock(&ll_global_lock);
    if (resume) session_resume(s);
    Py_RETURN_NONE;
}

static PyMethodDef session_methods[] = {
    {"hook", session_hook, METH_O, "hook(kind) -> callable for one event kind"},
    {"install_profile", session_install_profile, METH_NOARGS,
     "Install the C profile hook on every thread (Python < 3.12)."},
    {"fork_held", session_fork_held, METH_O,
     "fork_held(held): os.fork runs through the wrapper, which restarts the threads."},
    {"finish", session_finish, METH_NOARGS, "Stop recording; return counters."},
    {"close", session_close, METH_VARARGS, "Write END, flush and close the capture."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LLSession_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "leadline._native.Session",
    .tp_basicsize = sizeof(LLSession),
    .tp_dealloc = session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = session_new,
    .tp_methods = session_methods,
    .tp_doc = "One recording into one capture file.",
};
