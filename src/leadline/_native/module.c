/* leadline._native: the module object.  Its whole surface is typed in _native.pyi. */
#include "leadline.h"
#include "procmem.h"

int ll_tracer_init(void);

static PyObject *tick_ns(PyObject *module, PyObject *unused) {
    return PyFloat_FromDouble(ll_tick_ns_calibrated());
}

static PyObject *ticks(PyObject *module, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(ll_ticks());
}

/* The CRC-32 the writer gives each chunk, of any bytes: for the tests, against zlib's. */
static PyObject *crc32(PyObject *module, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t c = ll_crc32((const uint8_t *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}


static PyMethodDef module_methods[] = {
    {"decode_events", ll_decode_events, METH_VARARGS,
     "decode_events(payload) -> [(number, kind, func, t, rss_pages, heap, offset)]"},
    {"decode_rss", ll_decode_rss, METH_VARARGS, "decode_rss(payload) -> (times, rss_pages)"},
    {"inspect_process", ll_inspect_process, METH_VARARGS,
     "inspect_process(pid) -> {minor, runtime, code_type, path, layout_source, published, "
     "warning, offsets, compiled}; raises if not readable"},
    {"layout_from_debug_offsets", ll_layout_from_table, METH_VARARGS,
     "layout_from_debug_offsets(table, minor) -> {offsets, published, warning}; raises if the "
     "table is damaged or of an unsupported build"},
    {"native_unavailable", ll_native_unavailable, METH_NOARGS,
     "native_unavailable() -> None if C stacks can be unwound (libdw loads), else why not"},
    {"line_table", ll_line_table, METH_VARARGS,
     "line_table(minor, firstline, raw) -> [(offset, line)] from CPython's own encoding"},
    {"tick_ns", tick_ns, METH_NOARGS, "Nanoseconds per clock tick (calibrated once)."},
    {"ticks", ticks, METH_NOARGS, "The event clock now, in ticks."},
    {"crc32", crc32, METH_O, "crc32(data) -> the CRC-32 a chunk of these bytes is given."},
    {"mark", (PyCFunction)(void (*)(void))ll_mark, METH_FASTCALL | METH_KEYWORDS,
     "mark(name, **fields): record a tracepoint when a recording listens; else nothing."},
    {"mark_at", (PyCFunction)(void (*)(void))ll_mark_at, METH_FASTCALL,
     "mark_at(kind, name, file, line, fields): a mark at a known location (0 mark, 1 begin, "
     "2 end)."},
    {"marks_active", ll_marks_active, METH_NOARGS, "Whether a recording listens for marks."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "leadline._native", "leadline's native core.", -1, module_methods,
};

/* Adds `name`: a dict of each kind's name -> number, from one of leadline.h's lists. */
static int add_kinds(PyObject *m, const char *name, const char *const *names, const int *numbers,
                     size_t n) {
    PyObject *d = PyDict_New();
    if (!d) return -1;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLong(numbers[i]);
        if (!v || PyDict_SetItemString(d, names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return -1;
        }
        Py_DECREF(v);
    }
    int r = PyModule_AddObjectRef(m, name, d);
    Py_DECREF(d);
    return r;
}

#define LL_NAME(name, n) #name,
#define LL_NUMBER(name, n) n,
#define ADD_KINDS(m, pyname, LIST)                                                              \
    add_kinds(m, pyname, (const char *const[]){LIST(LL_NAME)}, (const int[]){LIST(LL_NUMBER)}, \
              sizeof((const int[]){LIST(LL_NUMBER)}) / sizeof(int))

PyMODINIT_FUNC PyInit__native(void) {
    if (ll_tracer_init() < 0 || ll_sampler_init() < 0 || ll_marks_init() < 0) {
        PyErr_SetString(PyExc_ImportError, "leadline: cannot initialise the tracer");
        return NULL;
    }
    if (PyType_Ready(&LLSession_Type) < 0 || PyType_Ready(&LLHook_Type) < 0 ||
        PyType_Ready(&LLAggregator_Type) < 0 || PyType_Ready(&LLSampler_Type) < 0 ||
        PyType_Ready(&LLJournal_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Session", (PyObject *)&LLSession_Type) < 0 ||
        PyModule_AddObjectRef(m, "Aggregator", (PyObject *)&LLAggregator_Type) < 0 ||
        PyModule_AddObjectRef(m, "Sampler", (PyObject *)&LLSampler_Type) < 0 ||
        PyModule_AddObjectRef(m, "Journal", (PyObject *)&LLJournal_Type) < 0 ||
        PyModule_AddStringConstant(m, "CLOCK", LL_CLOCK_NAME) < 0 ||
        PyModule_AddIntConstant(m, "MONITORING", LL_HAVE_MONITORING) < 0 ||
        PyModule_AddIntConstant(m, "COARSE_WARMUP_PERIODS", LL_COARSE_WARMUP_PERIODS) < 0 ||
        PyModule_AddIntConstant(m, "FORMAT_MAJOR", LL_FORMAT_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "FORMAT_MINOR", LL_FORMAT_MINOR) < 0 ||
        ADD_KINDS(m, "CHUNK_KINDS", LL_CHUNK_KIND_LIST) < 0 ||
        ADD_KINDS(m, "EVENT_KINDS", LL_EVENT_KIND_LIST) < 0 ||
        ADD_KINDS(m, "HOOK_KINDS", LL_HOOK_KIND_LIST) < 0 ||
        ADD_KINDS(m, "MARK_KINDS", LL_MARK_KIND_LIST) < 0 ||
        ADD_KINDS(m, "FUNC_KINDS", LL_FUNC_KIND_LIST) < 0 ||
        ll_probe_add_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
