/* Every Python-version difference that the native core depends on, in one place.
 *
 * The portable shim header that other extensions vendor is not published on any package
 * registry this project installs from, so the handful of shims leadline needs are written
 * here instead, each next to the versions it covers. */
#ifndef LEADLINE_COMPAT_H
#define LEADLINE_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#if PY_VERSION_HEX < 0x030A0000
#  error "leadline supports CPython 3.10 and later (tested on 3.10 to 3.15)"
#endif
/* A free-threaded build has other object headers, reference counts and thread states, and runs
 * Python on several threads at once: the tracer's per-thread state and the sampler's reads
 * would be wrong.  setup.py says so in one line before the compiler gets here. */
#ifdef Py_GIL_DISABLED
#  error "leadline does not support free-threaded CPython builds (Py_GIL_DISABLED)"
#endif

/* 3.12 introduced PEP 669 (sys.monitoring); before it the tracer uses PyEval_SetProfile. */
#if PY_VERSION_HEX >= 0x030C0000
#  define LL_HAVE_MONITORING 1
#else
#  define LL_HAVE_MONITORING 0
#endif

/* Per-code-object scratch slot (co_extra), renamed to the PyUnstable_ API in 3.12; it is read
 * inline by ll_code_extra_get below. */
#if PY_VERSION_HEX >= 0x030C0000
#  define LL_Code_SetExtra PyUnstable_Code_SetExtra
#  define LL_RequestCodeExtraIndex PyUnstable_Eval_RequestCodeExtraIndex
#else
#  define LL_Code_SetExtra _PyCode_SetExtra
#  define LL_RequestCodeExtraIndex _PyEval_RequestCodeExtraIndex
#endif

/* The co_extra slots, read inline on every event instead of through a call to
 * _PyCode_GetExtra.  The layout is _PyCodeObjectExtra (Include/internal/pycore_code.h up to
 * 3.13, Objects/codeobject.c since), unchanged from 3.7 to 3.15. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} ll_code_extra;

static inline void *ll_code_extra_get(PyObject *code, Py_ssize_t index) {
    ll_code_extra *e = (ll_code_extra *)((PyCodeObject *)code)->co_extra;
    return (e && index < e->ce_size) ? e->ce_extras[index] : NULL;
}

/* An instruction offset given to sys.monitoring callbacks as an int; small and compact. */
#if PY_VERSION_HEX >= 0x030C0000
static inline long ll_small_long(PyObject *o) {
    if (PyLong_CheckExact(o) && _PyLong_IsCompact((PyLongObject *)o))
        return (long)_PyLong_CompactValue((PyLongObject *)o);
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    return v;
}
#endif

#if !LL_HAVE_MONITORING
/* The code object and last instruction (in 2-byte code units) of a frame seen by a
 * PyEval_SetProfile hook.  The returned code is a borrowed reference. */
#  if PY_VERSION_HEX >= 0x030B0000
/* 3.11: where a frame object's interpreter frame is, and in it the code object and the last
 * instruction; the code's first instruction (tools/gen_layouts.py measures them from this
 * Python's own headers; set by ll_tracer_init).  ll_iframe_at < 0 (a layout without them):
 * read through PyFrame_GetCode and PyFrame_GetLasti, two calls an event. */
extern int ll_iframe_at, ll_iframe_code_at, ll_iframe_instr_at, ll_code_first_at;
#    if defined(Py_TRACE_REFS) || SIZEOF_VOID_P != 8
#      define LL_FRAME_READS_BUILD 0
#    else
#      define LL_FRAME_READS_BUILD 1
#    endif
static inline const char *ll_iframe(PyFrameObject *f) {
    return *(const char *const *)((const char *)f + ll_iframe_at);
}
#  endif
static inline PyCodeObject *ll_frame_code(PyFrameObject *f) {
#  if PY_VERSION_HEX >= 0x030B0000
    if (__builtin_expect(ll_iframe_at < 0, 0)) {
        PyCodeObject *c = PyFrame_GetCode(f); /* new reference; the frame keeps its own */
        Py_DECREF(c);
        return c;
    }
    return *(PyCodeObject *const *)(ll_iframe(f) + ll_iframe_code_at); /* the frame's own */
#  else
    return f->f_code;
#  endif
}
static inline int ll_frame_lasti(PyFrameObject *f) {
#  if PY_VERSION_HEX >= 0x030B0000
    if (__builtin_expect(ll_iframe_at < 0, 0)) {
        int b = PyFrame_GetLasti(f); /* bytes, or -1 */
        return b < 0 ? -1 : b / 2;
    }
    /* As PyFrame_GetLasti: the last instruction's distance from the first, in code units. */
    const char *i = ll_iframe(f);
    const char *code = *(const char *const *)(i + ll_iframe_code_at);
    const char *prev = *(const char *const *)(i + ll_iframe_instr_at);
    Py_ssize_t units = (prev - (code + ll_code_first_at)) / 2;
    return units < 0 ? -1 : (int)units;
#  else
    return f->f_lasti; /* 3.10 keeps it in code units */
#  endif
}
#endif

#endif
