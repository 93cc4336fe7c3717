/* leadline probe: counters on chosen lines and function entries, with no change to the code.
 *
 * The Python side (leadline/probe.py) finds the code objects that hold a probed line or
 * function and registers each (code, line) pair here: watch() gives it a counter.  Counting is
 * a hash lookup and an increment, under the GIL:
 *   3.12+  sys.monitoring LINE and PY_START callbacks (line_event, start_event), enabled on the
 *          probed code objects only; a LINE location that is not probed returns DISABLE, so
 *          each other line of a probed function costs one callback, once.
 *   3.10/3.11  a C trace function (PyEval_SetTrace).  Its call event turns line events off
 *          for every frame whose code has no probed line (f_trace_lines = 0), so only probed
 *          functions pay for line events; the interpreter's tracing mode still costs every
 *          frame a call and a return event.
 * New code objects (imports, exec) reach the Python side through an audit hook on "exec". */
#include "leadline.h"

#include <structmember.h>

#include <stdlib.h>
#include <string.h>

#define ENTRY_LINE (-1) /* a watch on the function's entry rather than a line */
#define HAS_LINES (-2)  /* marker: this code object has at least one probed line */

typedef struct {
    PyObject *code; /* strong reference; NULL: empty slot */
    int line;
    int counter;
    int start_lasti; /* ENTRY_LINE on 3.11: the byte offset of the RESUME that starts it */
} Watch;

static Watch *watches;
static size_t nwatch_slots, nwatches;
static uint64_t *counters;
static int ncounters, ccounters;
static int probing;             /* counting is on */
static PyObject *disable_obj;   /* sys.monitoring.DISABLE */
static PyObject *discover_cb;   /* called with each code object that "exec" runs */
static int audit_installed;

static size_t slot_of(PyObject *code, int line) {
    uint64_t h = ((uint64_t)(uintptr_t)code >> 4) * 0x9E3779B97F4A7C15u ^ (uint64_t)(line + 7) * 0xC2B2AE3D27D4EB4Fu;
    return (size_t)(h >> 17) & (nwatch_slots - 1);
}

static Watch *find(PyObject *code, int line) {
    if (!nwatch_slots) return NULL;
    for (size_t i = slot_of(code, line);; i = (i + 1) & (nwatch_slots - 1)) {
        Watch *w = &watches[i];
        if (!w->code) return NULL;
        if (w->code == code && w->line == line) return w;
    }
}

static int grow_watches(void) {
    size_t n = nwatch_slots ? nwatch_slots * 2 : 64;
    Watch *fresh = calloc(n, sizeof(Watch));
    if (!fresh) return -1;
    Watch *old = watches;
    size_t old_n = nwatch_slots;
    watches = fresh;
    nwatch_slots = n;
    for (size_t i = 0; i < old_n; i++) {
        if (!old[i].code) continue;
        size_t j = slot_of(old[i].code, old[i].line);
        while (watches[j].code) j = (j + 1) & (n - 1);
        watches[j] = old[i];
    }
    free(old);
    return 0;
}

static Watch *insert(PyObject *code, int line) {
    Watch *w = find(code, line);
    if (w) return w;
    if ((nwatches + 1) * 2 > nwatch_slots && grow_watches() < 0) return NULL;
    size_t j = slot_of(code, line);
    while (watches[j].code) j = (j + 1) & (nwatch_slots - 1);
    w = &watches[j];
    w->code = Py_NewRef(code);
    w->line = line;
    w->counter = -1;
    w->start_lasti = -1;
    nwatches++;
    return w;
}

static void clear_watches(void) {
    for (size_t i = 0; i < nwatch_slots; i++) Py_XDECREF(watches[i].code);
    free(watches);
    watches = NULL;
    nwatch_slots = nwatches = 0;
    free(counters);
    counters = NULL;
    ncounters = ccounters = 0;
}

/* ---- 3.12+: sys.monitoring callbacks ---- */

static inline void count(Watch *w) {
    if (w->counter >= 0) counters[w->counter]++;
}

#if LL_HAVE_MONITORING
/* LINE: (code, line_number) */
static PyObject *line_event(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs == 2 && probing) {
        Watch *w = find(args[0], (int)ll_small_long(args[1]));
        if (w) {
            count(w);
            Py_RETURN_NONE;
        }
    }
    return Py_NewRef(disable_obj ? disable_obj : Py_None);
}

/* PY_START: (code, instruction_offset) */
static PyObject *start_event(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs >= 1 && probing) {
        Watch *w = find(args[0], ENTRY_LINE);
        if (w) {
            count(w);
            Py_RETURN_NONE;
        }
    }
    return Py_NewRef(disable_obj ? disable_obj : Py_None);
}
#else
/* ---- 3.10/3.11: a C trace function ---- */
static Py_ssize_t f_trace_lines_offset = -1; /* of PyFrameObject, from its member table */

static int trace_func(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    if (!probing) {
        PyEval_SetTrace(NULL, NULL);
        return 0;
    }
    PyObject *code = (PyObject *)ll_frame_code(frame);
    if (what == PyTrace_CALL) {
        Watch *entry = find(code, ENTRY_LINE);
        if (entry) {
#  if PY_VERSION_HEX >= 0x030B0000
            int start = PyFrame_GetLasti(frame) == entry->start_lasti;
#  else
            int start = frame->f_lasti < 0;
#  endif
            if (start) count(entry);
        }
        if (!find(code, HAS_LINES) && f_trace_lines_offset >= 0)
            *((char *)frame + f_trace_lines_offset) = 0;
    } else if (what == PyTrace_LINE) {
        Watch *w = find(code, PyFrame_GetLineNumber(frame));
        if (w) count(w);
    }
    return 0;
}

/* threading.settrace() calls this in each new thread: swap in the C trace function for the
 * thread, then handle the call event that brought us here. */
static PyObject *trace_bootstrap(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (!probing || nargs < 3 || !PyFrame_Check(args[0])) {
        PyEval_SetTrace(NULL, NULL);
        Py_RETURN_NONE;
    }
    PyEval_SetTrace(trace_func, NULL);
    trace_func(NULL, (PyFrameObject *)args[0], PyTrace_CALL, Py_None);
    Py_RETURN_NONE;
}
#endif

/* ---- the audit hook: code objects run by exec() (imports, runpy, the program itself) ---- */
static int audit_hook(const char *event, PyObject *args, void *data) {
    if (!probing || !discover_cb || event[0] != 'e' || strcmp(event, "exec") != 0) return 0;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1 || !PyCode_Check(PyTuple_GET_ITEM(args, 0)))
        return 0;
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *r = PyObject_CallOneArg(discover_cb, PyTuple_GET_ITEM(args, 0));
    Py_XDECREF(r);
    if (!r) PyErr_Clear(); /* the program's exec must never fail because of a probe */
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return 0;
}

/* ---- module functions ---- */

/* probe_begin(discover, disable): reset the counters and start counting. */
static PyObject *probe_begin(PyObject *m, PyObject *args) {
    PyObject *discover, *disable;
    if (!PyArg_ParseTuple(args, "OO", &discover, &disable)) return NULL;
    if (probing) {
        PyErr_SetString(PyExc_RuntimeError, "a probe session is already running");
        return NULL;
    }
    clear_watches();
    Py_XSETREF(discover_cb, discover == Py_None ? NULL : Py_NewRef(discover));
    Py_XSETREF(disable_obj, disable == Py_None ? NULL : Py_NewRef(disable));
#if !LL_HAVE_MONITORING
    if (f_trace_lines_offset < 0) {
        for (PyMemberDef *d = PyFrame_Type.tp_members; d && d->name; d++)
            if (!strcmp(d->name, "f_trace_lines")) f_trace_lines_offset = d->offset;
    }
#endif
    if (!audit_installed) {
        if (PySys_AddAuditHook(audit_hook, NULL) < 0) return NULL;
        audit_installed = 1;
    }
    probing = 1;
    Py_RETURN_NONE;
}

/* probe_watch(code, line, start_lasti) -> counter: count `line` of `code` (-1: its entry; on
 * 3.11 start_lasti is the byte offset at which an entry starts rather than resumes). */
static PyObject *probe_watch(PyObject *m, PyObject *args) {
    PyObject *code;
    int line, start_lasti = -1;
    if (!PyArg_ParseTuple(args, "O!i|i", &PyCode_Type, &code, &line, &start_lasti)) return NULL;
    Watch *w = insert(code, line);
    if (!w) return PyErr_NoMemory();
    /* The counter is kept by value: the HAS_LINES insert below may grow the table, which frees
     * the array `w` points into (valgrind saw it read after the free once a module had more
     * probed code objects than the first table holds). */
    int counter = w->counter;
    if (counter < 0) {
        if (ncounters == ccounters) {
            int n = ccounters ? ccounters * 2 : 16;
            uint64_t *c = realloc(counters, sizeof(uint64_t) * (size_t)n);
            if (!c) return PyErr_NoMemory();
            counters = c;
            ccounters = n;
        }
        counters[ncounters] = 0;
        counter = w->counter = ncounters++;
        w->start_lasti = start_lasti;
        w = NULL; /* not valid past the next insert */
        if (line != ENTRY_LINE && !insert(code, HAS_LINES)) return PyErr_NoMemory();
    }
    return PyLong_FromLong(counter);
}

/* probe_counts() -> list of every counter's value, by counter number. */
static PyObject *probe_counts(PyObject *m, PyObject *unused) {
    PyObject *list = PyList_New(ncounters);
    if (!list) return NULL;
    for (int i = 0; i < ncounters; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(counters[i]);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, v);
    }
    return list;
}

/* probe_end(): stop counting (the counters stay readable until the next begin). */
static PyObject *probe_end(PyObject *m, PyObject *unused) {
    probing = 0;
    Py_CLEAR(discover_cb);
#if !LL_HAVE_MONITORING
    PyEval_SetTrace(NULL, NULL);
#endif
    Py_RETURN_NONE;
}

#if !LL_HAVE_MONITORING
/* probe_install_trace(): the C trace function for this thread. */
static PyObject *probe_install_trace(PyObject *m, PyObject *unused) {
    PyEval_SetTrace(trace_func, NULL);
    Py_RETURN_NONE;
}
#endif

static PyMethodDef probe_methods[] = {
    {"probe_begin", probe_begin, METH_VARARGS, "probe_begin(discover, disable): start counting."},
    {"probe_watch", probe_watch, METH_VARARGS,
     "probe_watch(code, line, start_lasti=-1) -> counter number."},
    {"probe_counts", probe_counts, METH_NOARGS, "The counters' values."},
    {"probe_end", probe_end, METH_NOARGS, "Stop counting."},
#if LL_HAVE_MONITORING
    {"probe_line_event", (PyCFunction)(void (*)(void))line_event, METH_FASTCALL,
     "sys.monitoring LINE callback."},
    {"probe_start_event", (PyCFunction)(void (*)(void))start_event, METH_FASTCALL,
     "sys.monitoring PY_START callback."},
#else
    {"probe_install_trace", probe_install_trace, METH_NOARGS,
     "Install the counting trace function in this thread."},
    {"probe_trace_bootstrap", (PyCFunction)(void (*)(void))trace_bootstrap, METH_FASTCALL,
     "threading.settrace() function that installs the C one in a new thread."},
#endif
    {NULL, NULL, 0, NULL},
};

int ll_probe_add_functions(PyObject *module) { return PyModule_AddFunctions(module, probe_methods); }
