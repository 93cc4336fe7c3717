/* The floor of a tracing profiler: an empty hook of the kind leadline's tracer installs, and
 * nothing else.  On 3.10 and 3.11 a C profile function (PyEval_SetProfile) that returns 0; from
 * 3.12 on an empty C callable registered with sys.monitoring for the six events leadline's
 * `trace` hooks (PY_START, PY_RESUME, PY_THROW, PY_RETURN, PY_YIELD, PY_UNWIND; with c_calls
 * also CALL, C_RETURN and C_RAISE, as `trace --c-calls`).  Whatever a
 * profiler of this kind records costs at least this: bench/run.py divides by it.
 *
 * install() hooks the calling thread (and, through threading.setprofile on 3.10/3.11, threads
 * started later); uninstall() takes the hook off.  Bench-only: not part of leadline. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#if PY_VERSION_HEX >= 0x030C0000
#define BH_MONITORING 1
#else
#define BH_MONITORING 0
#endif

#if BH_MONITORING
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
} EmptyHook;

static PyObject *empty_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw) {
    (void)self;
    (void)args;
    (void)nargsf;
    (void)kw;
    Py_RETURN_NONE;
}

static PyTypeObject EmptyHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "barehook.EmptyHook",
    .tp_basicsize = sizeof(EmptyHook),
    .tp_vectorcall_offset = offsetof(EmptyHook, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A sys.monitoring callback that does nothing.",
};

/* The tool id leadline's tracer uses (sys.monitoring.PROFILER_ID). */
#define BH_TOOL 2
static const char *const bh_events[] = {"PY_START",  "PY_RESUME", "PY_THROW", "PY_RETURN",
                                        "PY_YIELD",  "PY_UNWIND", "CALL",     "C_RETURN",
                                        "C_RAISE"};
#define BH_PY_EVENTS 6 /* the first six; with c_calls, all nine (trace --c-calls) */

/* sys.monitoring, a new reference (a namespace of sys, not an importable module). */
static PyObject *monitoring(void) {
    PyObject *mon = PySys_GetObject("monitoring");
    if (!mon) PyErr_SetString(PyExc_RuntimeError, "sys.monitoring is missing");
    return Py_XNewRef(mon);
}

static PyObject *install(PyObject *mod, PyObject *args, PyObject *kwargs) {
    (void)mod;
    static char *kwlist[] = {"c_calls", NULL};
    int c_calls = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", kwlist, &c_calls)) return NULL;
    size_t n_events = c_calls ? sizeof bh_events / sizeof bh_events[0] : BH_PY_EVENTS;
    PyObject *mon = monitoring();
    if (!mon) return NULL;
    PyObject *events = PyObject_GetAttrString(mon, "events");
    EmptyHook *hook = PyObject_New(EmptyHook, &EmptyHook_Type);
    PyObject *r = NULL;
    long mask = 0;
    if (!events || !hook) goto done;
    hook->vectorcall = empty_call;
    r = PyObject_CallMethod(mon, "use_tool_id", "is", BH_TOOL, "barehook");
    if (!r) goto done;
    Py_DECREF(r);
    for (size_t i = 0; i < n_events; i++) {
        PyObject *ev = PyObject_GetAttrString(events, bh_events[i]);
        if (!ev) goto fail;
        mask |= PyLong_AsLong(ev);
        r = PyObject_CallMethod(mon, "register_callback", "iOO", BH_TOOL, ev, (PyObject *)hook);
        Py_DECREF(ev);
        if (!r) goto fail;
        Py_DECREF(r);
    }
    r = PyObject_CallMethod(mon, "set_events", "il", BH_TOOL, mask);
    goto done;
fail:
    r = NULL;
done:
    Py_XDECREF((PyObject *)hook);
    Py_XDECREF(events);
    Py_DECREF(mon);
    return r;
}

static PyObject *uninstall(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    PyObject *mon = monitoring();
    if (!mon) return NULL;
    PyObject *r = PyObject_CallMethod(mon, "set_events", "ii", BH_TOOL, 0);
    if (r) {
        Py_DECREF(r);
        r = PyObject_CallMethod(mon, "free_tool_id", "i", BH_TOOL);
    }
    Py_DECREF(mon);
    return r;
}
#else
static int empty_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    (void)obj;
    (void)frame;
    (void)what;
    (void)arg;
    return 0;
}

/* threading.setprofile's callable: installs the C function in each new thread. */
static PyObject *bootstrap(PyObject *mod, PyObject *args) {
    (void)mod;
    (void)args;
    PyEval_SetProfile(empty_profile, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef bootstrap_def = {
    .ml_name = "bootstrap", .ml_meth = bootstrap, .ml_flags = METH_VARARGS};

static PyObject *set_threading_profile(PyObject *mod, int on) {
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading) return NULL;
    PyObject *fn = on ? PyCFunction_New(&bootstrap_def, mod) : Py_NewRef(Py_None);
    PyObject *r = fn ? PyObject_CallMethod(threading, "setprofile", "O", fn) : NULL;
    Py_XDECREF(fn);
    Py_DECREF(threading);
    return r;
}

/* A profile function is called for C calls whatever it wants: c_calls changes nothing here. */
static PyObject *install(PyObject *mod, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"c_calls", NULL};
    int c_calls = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", kwlist, &c_calls)) return NULL;
    PyObject *r = set_threading_profile(mod, 1);
    if (!r) return NULL;
    Py_DECREF(r);
    PyEval_SetProfile(empty_profile, NULL);
    Py_RETURN_NONE;
}

static PyObject *uninstall(PyObject *mod, PyObject *unused) {
    (void)unused;
    PyEval_SetProfile(NULL, NULL);
    return set_threading_profile(mod, 0);
}
#endif

static PyMethodDef methods[] = {
    {"install", (PyCFunction)(void (*)(void))install, METH_VARARGS | METH_KEYWORDS,
     "install(c_calls=False): hook the calling thread (and threads started later)."},
    {"uninstall", uninstall, METH_NOARGS, "Take the hook off."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "barehook",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit_barehook(void) {
#if BH_MONITORING
    if (PyType_Ready(&EmptyHook_Type) < 0) return NULL;
#endif
    return PyModule_Create(&moddef);
}
