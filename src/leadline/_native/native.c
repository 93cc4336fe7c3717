/* Native frames: a thread's C stack, unwound by elfutils' libdw from the registers of the thread
 * (stopped by the caller with ptrace) and the call frame information of each module (.eh_frame,
 * .debug_frame), named from the modules' symbol tables (and their separate debug files where
 * installed).  libdw is loaded when first needed, so that leadline builds and runs without it;
 * its few functions are declared here as elfutils' libdwfl.h declares them.
 *
 * The C stack of a thread running Python has a frame of the interpreter's eval loop
 * (_PyEval_EvalFrameDefault) for each call of the loop, and each call runs one Python frame
 * (3.10) or a chain of them (3.11+: a Python function called from Python runs in the same
 * call): each such C frame is replaced by the Python frames of its call, which the walk read.
 * Where a call of the loop ends among the Python frames is read from them: 3.11's frames say
 * which began a call (is_entry), 3.12+ put an entry frame of the C stack's own under the first
 * frame of each call. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "native.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leadline.h"
#include "procmem.h"

#define LL_NATIVE_MAX 512      /* C frames of a thread unwound */
#define LL_NATIVE_FUNCS 4096   /* distinct C functions named (then the rest share one) */
#define LL_FIRST_OWNER_NOT_PYTHON 3
#define LL_EVAL_FUNCTION "_PyEval_EvalFrameDefault"

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Frame Dwfl_Frame;
typedef uint64_t Dwarf_Addr;
typedef struct {
    void *find_elf, *find_debuginfo, *section_address;
    char **debuginfo_path;
} Dwfl_Callbacks;

static struct {
    int tried, loaded;
    char why[160];
    Dwfl *(*begin)(const Dwfl_Callbacks *);
    void (*end)(Dwfl *);
    int (*proc_report)(Dwfl *, pid_t);
    int (*report_end)(Dwfl *, void *, void *);
    int (*proc_attach)(Dwfl *, pid_t, bool);
    int (*getthread_frames)(Dwfl *, pid_t, int (*)(Dwfl_Frame *, void *), void *);
    bool (*frame_pc)(Dwfl_Frame *, Dwarf_Addr *, bool *);
    Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
    const char *(*module_addrname)(Dwfl_Module *, Dwarf_Addr);
    const char *(*module_info)(Dwfl_Module *, void ***, Dwarf_Addr *, Dwarf_Addr *, Dwarf_Addr *,
                               Dwarf_Addr *, const char **, const char **);
    int (*errno_)(void);
    const char *(*errmsg)(int);
    void *find_elf, *find_debuginfo;
} dw;

static int load(void) {
    if (dw.tried) return dw.loaded ? 0 : -1;
    dw.tried = 1;
    void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(dw.why, sizeof dw.why, "elfutils' libdw (libdw.so.1) is not installed");
        return -1;
    }
    struct {
        void **at;
        const char *name;
    } syms[] = {
        {(void **)&dw.begin, "dwfl_begin"},
        {(void **)&dw.end, "dwfl_end"},
        {(void **)&dw.proc_report, "dwfl_linux_proc_report"},
        {(void **)&dw.report_end, "dwfl_report_end"},
        {(void **)&dw.proc_attach, "dwfl_linux_proc_attach"},
        {(void **)&dw.getthread_frames, "dwfl_getthread_frames"},
        {(void **)&dw.frame_pc, "dwfl_frame_pc"},
        {(void **)&dw.addrmodule, "dwfl_addrmodule"},
        {(void **)&dw.module_addrname, "dwfl_module_addrname"},
        {(void **)&dw.module_info, "dwfl_module_info"},
        {(void **)&dw.errno_, "dwfl_errno"},
        {(void **)&dw.errmsg, "dwfl_errmsg"},
        {&dw.find_elf, "dwfl_linux_proc_find_elf"},
        {&dw.find_debuginfo, "dwfl_standard_find_debuginfo"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        if (!(*syms[i].at = dlsym(h, syms[i].name))) {
            snprintf(dw.why, sizeof dw.why, "libdw.so.1 has no %s (elfutils 0.158+ needed)",
                     syms[i].name);
            return -1;
        }
    }
    dw.loaded = 1;
    return 0;
}

int ll_native_available(char *why, size_t n) {
    if (load() == 0) return 0;
    snprintf(why, n, "%s", dw.why);
    return -1;
}

typedef struct {
    char *key; /* "module\0symbol" */
    size_t len;
    uint32_t func;
} NativeFunc;

struct LLNative {
    Dwfl *dwfl;
    Dwfl_Callbacks callbacks;
    pid_t pid;
    NativeFunc *funcs;
    size_t nfuncs, cfuncs;
    uint32_t other; /* the function the C frames beyond LL_NATIVE_FUNCS share */
};

LLNative *ll_native_open(pid_t pid, char *why, size_t n) {
    if (load()) {
        snprintf(why, n, "%s", dw.why);
        return NULL;
    }
    LLNative *nat = calloc(1, sizeof *nat);
    if (!nat) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    nat->pid = pid;
    nat->callbacks.find_elf = dw.find_elf;
    nat->callbacks.find_debuginfo = dw.find_debuginfo;
    nat->dwfl = dw.begin(&nat->callbacks);
    /* The threads are stopped by the caller (assume_ptrace_stopped): libdw reads their
     * registers and never attaches or stops them itself. */
    if (!nat->dwfl || dw.proc_report(nat->dwfl, pid) || dw.report_end(nat->dwfl, NULL, NULL) ||
        dw.proc_attach(nat->dwfl, pid, true)) {
        snprintf(why, n, "libdw cannot read process %d: %s", (int)pid, dw.errmsg(-1));
        ll_native_close(nat);
        return NULL;
    }
    return nat;
}

void ll_native_close(LLNative *nat) {
    if (!nat) return;
    if (nat->dwfl) dw.end(nat->dwfl);
    for (size_t i = 0; i < nat->nfuncs; i++) free(nat->funcs[i].key);
    free(nat->funcs);
    free(nat);
}

/* A C frame: its return address (or, innermost, where it is) and its function. */
typedef struct {
    Dwarf_Addr pc[LL_NATIVE_MAX];
    int n;
} Unwound;

static int on_frame(Dwfl_Frame *state, void *arg) {
    Unwound *u = arg;
    Dwarf_Addr pc;
    bool activation = false;
    if (!dw.frame_pc(state, &pc, &activation)) return 1; /* DWARF_CB_ABORT */
    /* A return address is just past its call: the call's own instruction names the caller. */
    u->pc[u->n++] = activation ? pc : pc - 1;
    return u->n < LL_NATIVE_MAX ? 0 : 1;
}

/* The function that stands for the C code at `pc`: one a (module, symbol); a pc no symbol
 * covers is named by its offset in its module. */
static uint32_t native_func(LLNative *nat, LLStacks *st, Dwarf_Addr pc, int *is_eval) {
    Dwfl_Module *mod = dw.addrmodule(nat->dwfl, pc);
    const char *file = NULL, *sym = NULL;
    Dwarf_Addr start = 0;
    char text[512], module[256] = "?";
    if (mod) {
        dw.module_info(mod, NULL, &start, NULL, NULL, NULL, &file, NULL);
        sym = dw.module_addrname(mod, pc);
        if (file) {
            const char *base = strrchr(file, '/');
            snprintf(module, sizeof module, "%s", base ? base + 1 : file);
        }
    }
    if (sym) {
        snprintf(text, sizeof text, "%s", sym);
        /* Not part of the function's name: a symbol's version (memcpy@@GLIBC_2.14), and the
         * suffix of a part or copy of it the compiler made (link-time optimisation's
         * .lto_priv.0, a cold path's .cold, .part.0, .constprop.0, .isra.0), which a C
         * name never contains. */
        size_t cut = strcspn(text, "@.");
        if (cut > 0) text[cut] = 0;
    } else {
        snprintf(text, sizeof text, "0x%llx", (unsigned long long)(pc - start));
    }
    *is_eval = !strcmp(text, LL_EVAL_FUNCTION);
    size_t ml = strlen(module), tl = strlen(text), len = ml + 1 + tl;
    for (size_t i = 0; i < nat->nfuncs; i++)
        if (nat->funcs[i].len == len && !memcmp(nat->funcs[i].key, module, ml + 1) &&
            !memcmp(nat->funcs[i].key + ml + 1, text, tl))
            return nat->funcs[i].func;
    if (nat->nfuncs >= LL_NATIVE_FUNCS) {
        if (!nat->other) nat->other = ll_new_func(st, LL_FUNC_C, "?", "<native>", 8);
        return nat->other;
    }
    if (nat->nfuncs == nat->cfuncs) {
        size_t cap = nat->cfuncs ? 2 * nat->cfuncs : 64;
        NativeFunc *f = realloc(nat->funcs, cap * sizeof *f);
        if (!f) return 0;
        nat->funcs = f;
        nat->cfuncs = cap;
    }
    uint32_t id = ll_new_func(st, LL_FUNC_C, module, text, tl);
    char *key = malloc(len + 1);
    if (!id || !key) {
        free(key);
        return id;
    }
    memcpy(key, module, ml + 1);
    memcpy(key + ml + 1, text, tl + 1);
    nat->funcs[nat->nfuncs++] = (NativeFunc){key, len, id};
    return id;
}

/* Whether the Python frame at `frame` is the first its call of the eval loop ran (the
 * outermost of that call's frames). */
static int begins_call(LLProc *p, uint64_t frame) {
    const LLLayout *L = &p->layout;
    if (L->minor <= 10) return 1; /* one call a frame */
    if (L->frame_is_entry >= 0) {   /* 3.11 */
        uint8_t entry = 1;
        if (ll_mem_read(&p->mem, frame + (uint64_t)L->frame_is_entry, &entry, 1)) return 1;
        return entry != 0;
    }
    uint64_t prev = 0;
    uint8_t owner = LL_FIRST_OWNER_NOT_PYTHON;
    if (ll_mem_read(&p->mem, frame + (uint64_t)L->frame_previous, &prev, 8) || !prev ||
        ll_mem_read(&p->mem, prev + (uint64_t)L->frame_owner, &owner, 1))
        return 1;
    return owner >= LL_FIRST_OWNER_NOT_PYTHON;
}

int ll_native_merge(LLNative *nat, LLStacks *st, LLProc *p, pid_t tid, int npy) {
    Unwound *u = malloc(sizeof *u);
    LLFrame *out = malloc(sizeof *out * (size_t)st->max_depth);
    if (!u || !out) {
        free(u);
        free(out);
        return npy;
    }
    u->n = 0;
    int rc = dw.getthread_frames(nat->dwfl, tid, on_frame, u);
    /* (An unwind that stops short, at a frame without call frame information, is kept.) */
    if (rc != 0 && u->n == 0) {
        free(u);
        free(out);
        return npy;
    }
    int n = 0, py = 0;
    for (int i = 0; i < u->n && n < st->max_depth; i++) {
        int is_eval = 0;
        uint32_t func = native_func(nat, st, u->pc[i], &is_eval);
        if (is_eval && py < npy) {
            /* This call of the loop: the Python frames up to the one that began it. */
            while (py < npy && n < st->max_depth) {
                int first = begins_call(p, st->frame_addr[py]);
                out[n++] = st->frames[py++];
                if (first) break;
            }
            continue;
        }
        if (func) out[n++] = (LLFrame){func, 0};
    }
    /* Python frames no eval-loop frame was found for (an unwind cut short) go outermost. */
    while (py < npy && n < st->max_depth) out[n++] = st->frames[py++];
    memcpy(st->frames, out, sizeof *out * (size_t)n);
    free(u);
    free(out);
    return n;
}
