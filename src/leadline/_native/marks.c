/* leadline.mark(): tracepoints that cost one load and a branch when nothing records.
 *
 * A recording (trace, profile or probe) attaches its writer here when it starts and detaches it
 * when it stops.  mark() reads that pointer and returns when it is NULL: no argument is looked
 * at, no frame is inspected, nothing is formatted.  When a recording listens, the mark's
 * time, thread, caller's file:line, name and fields (as JSON) are appended to a MARKS chunk
 * (docs/format.md).  Everything here runs with the GIL held, which guards the buffer; the
 * writer pointer is also read with a relaxed atomic load so that the fast path stays a plain
 * load.  Nothing here raises into the caller: a mark that cannot be encoded is dropped. */
#include "leadline.h"

#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MARKS_CHUNK_CAP (64 * 1024)
#define MARK_MAX_BYTES (16 * 1024) /* a longer record is cut (its fields become {}) */

static LLWriter *mark_writer;  /* the listening recording's writer, or NULL */
static LLChunk *mark_chunk;    /* records not yet handed to the writer */
static uint64_t mark_chunk_t0; /* ll_ticks() of the chunk's first record */
static uint64_t mark_flush_ticks;
static uint64_t marks_recorded, marks_dropped;
static __thread pid_t mark_tid;

static void flush_locked(void) {
    if (mark_chunk && mark_writer && mark_chunk->len) {
        ll_writer_submit(mark_writer, mark_chunk);
        mark_chunk = NULL;
        /* The writer takes nothing more (size limit, failed write): mark() is free again. */
        if (ll_writer_stopped(mark_writer)) __atomic_store_n(&mark_writer, NULL, __ATOMIC_RELAXED);
    }
}

void ll_marks_attach(LLWriter *w) {
    if (mark_writer && mark_writer != w) flush_locked();
    free(mark_chunk);
    mark_chunk = NULL;
    if (!mark_flush_ticks) mark_flush_ticks = (uint64_t)(2e8 / ll_tick_ns_calibrated());
    marks_recorded = marks_dropped = 0;
    __atomic_store_n(&mark_writer, w, __ATOMIC_RELAXED);
}

void ll_marks_detach(LLWriter *w) {
    if (mark_writer != w) return;
    flush_locked();
    free(mark_chunk);
    mark_chunk = NULL;
    __atomic_store_n(&mark_writer, NULL, __ATOMIC_RELAXED);
}

/* The child of a fork() records nothing into its parent's file. */
static void marks_atfork_child(void) {
    mark_writer = NULL;
    /* The child's copy of the parent's unsubmitted records: the child never submits them, so
     * they are freed here (left, valgrind reports 64 KiB definitely lost in every child forked
     * while marks are recorded).  malloc is usable in a child handler: glibc resets its locks
     * before running them, and os.fork() holds the GIL that every write to the chunk holds. */
    free(mark_chunk);
    mark_chunk = NULL;
    mark_tid = 0;
}

int ll_marks_init(void) { return pthread_atfork(NULL, NULL, marks_atfork_child) == 0 ? 0 : -1; }

/* ---- a growable byte buffer for one record ---- */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int full;
} Buf;

static void put(Buf *b, const void *data, size_t n) {
    if (b->full || b->len + n > b->cap) {
        b->full = 1;
        return;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_varint(Buf *b, uint64_t v) {
    uint8_t tmp[10];
    put(b, tmp, (size_t)(ll_put_varint_slow(tmp, v) - tmp));
}

/* The UTF-8 of a str object, or NULL (no exception left set).  A lone surrogate (a name the
 * program built, an undecodable file name), which UTF-8 cannot hold, is written as the text
 * \udXXX, as the tracer and the sampler write it; *owner then holds those bytes, to release. */
static const char *utf8_of(PyObject *s, Py_ssize_t *n, PyObject **owner) {
    *owner = NULL;
    const char *u = PyUnicode_AsUTF8AndSize(s, n);
    if (u) return u;
    PyErr_Clear();
    *owner = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
    if (!*owner) {
        PyErr_Clear();
        return NULL;
    }
    *n = PyBytes_GET_SIZE(*owner);
    return PyBytes_AS_STRING(*owner);
}

/* JSON string body (without quotes) of a str object. */
static void put_json_str(Buf *b, PyObject *s) {
    Py_ssize_t n;
    PyObject *owner;
    const char *u = utf8_of(s, &n, &owner);
    if (!u) {
        put(b, "?", 1);
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(b, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            put(b, e, 6);
        } else {
            put(b, &u[i], 1);
        }
    }
    Py_XDECREF(owner);
}

static void put_quoted(Buf *b, PyObject *s) {
    put(b, "\"", 1);
    put_json_str(b, s);
    put(b, "\"", 1);
}

/* A field value as JSON: None, bools, ints and finite floats as themselves, str as a string,
 * anything else as the string of its str(). */
static void put_json_value(Buf *b, PyObject *v) {
    if (v == Py_None) {
        put(b, "null", 4);
    } else if (v == Py_True) {
        put(b, "true", 4);
    } else if (v == Py_False) {
        put(b, "false", 5);
    } else if (PyUnicode_Check(v)) {
        put_quoted(b, v);
    } else if (PyLong_Check(v) || (PyFloat_Check(v) && isfinite(PyFloat_AS_DOUBLE(v)))) {
        PyObject *r = PyLong_Check(v) ? PyObject_Str(v) : PyObject_Repr(v);
        if (r) {
            Py_ssize_t n;
            const char *u = PyUnicode_AsUTF8AndSize(r, &n);
            if (u) put(b, u, (size_t)n);
            else put(b, "null", 4);
            Py_DECREF(r);
        }
        if (PyErr_Occurred()) PyErr_Clear();
    } else {
        PyObject *r = PyObject_Str(v);
        if (r) {
            put_quoted(b, r);
            Py_DECREF(r);
        } else {
            PyErr_Clear();
            put(b, "\"<unprintable>\"", 15);
        }
    }
}

static pid_t current_tid(void) {
    if (!mark_tid) mark_tid = (pid_t)syscall(SYS_gettid);
    return mark_tid;
}

/* Appends one record: varint t, varint tid, u8 kind, varint line, then name, file and the
 * fields' JSON, each as varint length + UTF-8 bytes. */
static void record(int kind, PyObject *name, PyObject *file, long line, PyObject *const *values,
                   PyObject *keys, PyObject *dict) {
    uint64_t t = ll_ticks();
    uint8_t fields_buf[MARK_MAX_BYTES];
    Buf f = {fields_buf, 0, sizeof fields_buf, 0};
    put(&f, "{", 1);
    int first = 1;
    if (keys) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) {
            if (!first) put(&f, ",", 1);
            first = 0;
            put_quoted(&f, PyTuple_GET_ITEM(keys, i));
            put(&f, ":", 1);
            put_json_value(&f, values[i]);
        }
    } else if (dict && PyDict_Check(dict)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(dict, &pos, &k, &v)) {
            if (!PyUnicode_Check(k)) continue;
            if (!first) put(&f, ",", 1);
            first = 0;
            put_quoted(&f, k);
            put(&f, ":", 1);
            put_json_value(&f, v);
        }
    }
    put(&f, "}", 1);
    if (f.full) {
        f.len = 2;
        memcpy(fields_buf, "{}", 2);
        f.full = 0;
    }
    uint8_t rec_buf[MARK_MAX_BYTES + 4096];
    Buf r = {rec_buf, 0, sizeof rec_buf, 0};
    put_varint(&r, t);
    put_varint(&r, (uint64_t)current_tid());
    uint8_t k = (uint8_t)kind;
    put(&r, &k, 1);
    put_varint(&r, line > 0 ? (uint64_t)line : 0);
    PyObject *strs[2] = {name, file};
    for (int i = 0; i < 2; i++) {
        Py_ssize_t n = 0;
        PyObject *owner = NULL;
        const char *u = strs[i] && PyUnicode_Check(strs[i]) ? utf8_of(strs[i], &n, &owner) : "";
        if (!u) {
            u = "";
            n = 0;
        }
        if (n > 1024) n = 1024; /* may cut a UTF-8 sequence: the reader decodes with replace */
        put_varint(&r, (uint64_t)n);
        put(&r, u, (size_t)n);
        Py_XDECREF(owner);
    }
    put_varint(&r, f.len);
    put(&r, fields_buf, f.len);
    if (r.full) {
        marks_dropped++;
        return;
    }
    if (mark_chunk && (mark_chunk->len + r.len > mark_chunk->cap ||
                       t - mark_chunk_t0 > mark_flush_ticks))
        flush_locked();
    /* Nobody listens any more: the fields' str() ran Python code, during which the recording
     * stopped, or the flush found that its writer takes nothing more. */
    if (!mark_writer) {
        marks_dropped++;
        return;
    }
    if (!mark_chunk) {
        mark_chunk = ll_writer_buffer(mark_writer, LL_CHUNK_MARKS, 0, MARKS_CHUNK_CAP);
        if (!mark_chunk) {
            marks_dropped++;
            return;
        }
        mark_chunk_t0 = t;
    }
    memcpy(mark_chunk->data + mark_chunk->len, rec_buf, r.len);
    mark_chunk->len += r.len;
    mark_chunk->items++;
    marks_recorded++;
}

/* The caller's file and line, from the innermost Python frame. */
static void caller(PyObject **file, long *line) {
    *file = NULL;
    *line = 0;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    if (!f) return;
    PyCodeObject *code = PyFrame_GetCode(f);
    *file = Py_NewRef(code->co_filename);
    Py_DECREF(code);
    *line = PyFrame_GetLineNumber(f);
}

/* mark(name, **fields) */
PyObject *ll_mark(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (LL_LIKELY(__atomic_load_n(&mark_writer, __ATOMIC_RELAXED) == NULL)) Py_RETURN_NONE;
    if (nargs < 1) Py_RETURN_NONE;
    PyObject *name = PyUnicode_Check(args[0]) ? Py_NewRef(args[0]) : PyObject_Str(args[0]);
    if (name) {
        PyObject *file;
        long line;
        caller(&file, &line);
        record(LL_MARK_MARK, name, file, line, args + nargs, kwnames, NULL);
        Py_XDECREF(file);
        Py_DECREF(name);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    Py_RETURN_NONE;
}

/* mark_at(kind, name, file, line, fields): a mark whose location the caller knows (a log
 * record's, a decorated function's); kind 0 mark, 1 span begin, 2 span end. */
PyObject *ll_mark_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (__atomic_load_n(&mark_writer, __ATOMIC_RELAXED) == NULL) Py_RETURN_NONE;
    if (nargs != 5) Py_RETURN_NONE;
    long kind = PyLong_AsLong(args[0]);
    long line = PyLong_AsLong(args[3]);
    PyErr_Clear();
    PyObject *name = PyUnicode_Check(args[1]) ? Py_NewRef(args[1]) : PyObject_Str(args[1]);
    if (name && kind >= LL_MARK_MARK && kind <= LL_MARK_END)
        record((int)kind, name, args[2], line, NULL, NULL, args[4]);
    Py_XDECREF(name);
    if (PyErr_Occurred()) PyErr_Clear();
    Py_RETURN_NONE;
}

/* marks_active() -> bool: is a recording listening? */
PyObject *ll_marks_active(PyObject *module, PyObject *unused) {
    return PyBool_FromLong(__atomic_load_n(&mark_writer, __ATOMIC_RELAXED) != NULL);
}

/* ---- Journal: a capture that holds only marks (and META/END), for probe sessions ---- */
typedef struct {
    PyObject_HEAD
    LLWriter w;
    int opened, finished, closed;
    uint64_t t_end, marks, dropped;
} Journal;

static PyObject *journal_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    int fd;
    Py_buffer meta;
    if (!PyArg_ParseTuple(args, "iy*", &fd, &meta)) return NULL;
    Journal *j = (Journal *)type->tp_alloc(type, 0);
    if (!j) {
        PyBuffer_Release(&meta);
        return NULL;
    }
    int err = ll_writer_open(&j->w, fd);
    if (err) {
        PyBuffer_Release(&meta);
        Py_DECREF(j);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    j->opened = 1;
    ll_writer_put(&j->w, LL_CHUNK_META, meta.buf, (size_t)meta.len);
    PyBuffer_Release(&meta);
    ll_marks_attach(&j->w);
    return (PyObject *)j;
}

/* finish(): stop listening for marks; the counters for END. */
static PyObject *journal_finish(PyObject *self, PyObject *unused) {
    Journal *j = (Journal *)self;
    if (!j->finished) {
        j->marks = marks_recorded;
        j->dropped = marks_dropped;
        ll_marks_detach(&j->w);
        j->t_end = ll_ticks();
        j->finished = 1;
    }
    return Py_BuildValue("{s:K,s:d,s:K,s:K}", "t_end", (unsigned long long)j->t_end, "tick_ns",
                         ll_tick_ns_calibrated(), "marks", (unsigned long long)j->marks,
                         "marks_dropped", (unsigned long long)j->dropped);
}

/* close(end): write END (bytes, or a callable: see ll_writer_close_py), drain and close. */
static PyObject *journal_close(PyObject *self, PyObject *args) {
    Journal *j = (Journal *)self;
    PyObject *end;
    if (!PyArg_ParseTuple(args, "O", &end)) return NULL;
    if (j->closed) {
        PyErr_SetString(PyExc_RuntimeError, "capture already closed");
        return NULL;
    }
    PyObject *r = journal_finish(self, NULL);
    Py_XDECREF(r);
    j->closed = 1;
    return ll_writer_close_py(&j->w, end);
}

static void journal_dealloc(PyObject *self) {
    Journal *j = (Journal *)self;
    if (j->opened && !j->closed) {
        ll_marks_detach(&j->w);
        ll_writer_close(&j->w);
    }
    if (j->opened) {
        pthread_mutex_destroy(&j->w.mu);
        pthread_cond_destroy(&j->w.cv);
    }
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef journal_methods[] = {
    {"finish", journal_finish, METH_NOARGS, "Stop recording marks; return the counters."},
    {"close", journal_close, METH_VARARGS, "Write END, flush and close the capture."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LLJournal_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "leadline._native.Journal",
    .tp_basicsize = sizeof(Journal),
    .tp_dealloc = journal_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = journal_new,
    .tp_methods = journal_methods,
    .tp_doc = "Journal(fd, meta): a capture of marks only (probe sessions).",
};
