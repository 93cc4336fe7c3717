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
#include <sys/uio.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leadline.h"
#include "procmem.h"

#define LL_NATIVE_MAX 512      /* C frames of a thread unwound */
#define LL_NATIVE_FUNCS 4096   /* distinct C functions named (then the rest share one) */
#define LL_NATIVE_PCS 16384    /* addresses whose function is remembered (a power of two) */
#define LL_EVAL_FUNCTION "_PyEval_EvalFrameDefault"
/* A pc in no module known: the process's modules are read again (a library loaded since:
 * numpy imported after attach began), at most this often. */
#define LL_NATIVE_REPORT_NS 1000000000ull

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Frame Dwfl_Frame;
typedef struct Dwfl_Thread Dwfl_Thread;
typedef uint64_t Dwarf_Addr;
typedef uint64_t Dwarf_Word;
typedef struct {
    void *find_elf, *find_debuginfo, *section_address;
    char **debuginfo_path;
} Dwfl_Callbacks;
/* How libdw reads the threads of a process it does not stop itself (this one's: each from the
 * registers its signal handler saved and a copy of its stack). */
typedef struct {
    pid_t (*next_thread)(Dwfl *, void *, void **);
    bool (*get_thread)(Dwfl *, pid_t, void *, void **);
    bool (*memory_read)(Dwfl *, Dwarf_Addr, Dwarf_Word *, void *);
    bool (*set_initial_registers)(Dwfl_Thread *, void *);
    void (*detach)(Dwfl *, void *);
    void (*thread_detach)(Dwfl_Thread *, void *);
} Dwfl_Thread_Callbacks;

static struct {
    int tried, loaded;
    char why[160];
    Dwfl *(*begin)(const Dwfl_Callbacks *);
    void (*end)(Dwfl *);
    int (*proc_report)(Dwfl *, pid_t);
    void (*report_begin_add)(Dwfl *);
    int (*report_end)(Dwfl *, void *, void *);
    int (*proc_attach)(Dwfl *, pid_t, bool);
    bool (*attach_state)(Dwfl *, void *, pid_t, const Dwfl_Thread_Callbacks *, void *);
    bool (*thread_state_registers)(Dwfl_Thread *, int, unsigned, const Dwarf_Word *);
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
        {(void **)&dw.report_begin_add, "dwfl_report_begin_add"},
        {(void **)&dw.proc_attach, "dwfl_linux_proc_attach"},
        {(void **)&dw.attach_state, "dwfl_attach_state"},
        {(void **)&dw.thread_state_registers, "dwfl_thread_state_registers"},
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

/* A C frame: its return address (or, innermost, where it is) and its function. */
typedef struct {
    Dwarf_Addr pc[LL_NATIVE_MAX];
    int n;
} Unwound;

/* What a C function is to the merge: the eval loop (its frames are replaced by Python's), the
 * handler that parks a thread of this process (run --native), or any other. */
enum { ROLE_OTHER, ROLE_EVAL, ROLE_PARK };
#define LL_PARK_HANDLER "on_park" /* sampler.c's */

/* An address already named: its function and role. */
typedef struct {
    Dwarf_Addr pc; /* 0: empty */
    uint32_t func;
    int role;
} PcSlot;

struct LLNative {
    Dwfl *dwfl;
    Unwound u; /* the last unwind (ll_native_unwind) */
    LLFrame *out; /* ll_native_merge's frames, kept from sample to sample */
    int cout;
    /* libdw finds an address's symbol by going through its module's symbol table (tens of
     * microseconds in the interpreter's), and a sampled stack is mostly the addresses of the
     * one before: each is named once. */
    PcSlot pcs[LL_NATIVE_PCS];
    Dwfl_Callbacks callbacks;
    pid_t pid;
    const LLNativeContext *ctx; /* this process's thread being unwound (ll_native_unwind_context) */
    NativeFunc *funcs;
    size_t nfuncs, cfuncs;
    uint32_t other; /* the function the C frames beyond LL_NATIVE_FUNCS share */
    uint64_t next_report_ns; /* when the modules may be read again */
    int by_offset; /* code no symbol covers: named by its offset (else one function a module) */
};

/* This process's threads, for libdw: the one asked for is the context being unwound; its memory
 * is read from the copy of its stack, and anything else (rare: a value a frame's rule finds
 * elsewhere) with a system call, which fails on an address that is not mapped instead of
 * faulting. */
static pid_t own_next_thread(Dwfl *dwfl, void *arg, void **thread_arg) {
    (void)dwfl, (void)arg, (void)thread_arg;
    return 0; /* none to list: each is asked for by its id */
}

static bool own_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg) {
    (void)dwfl;
    const LLNative *nat = arg;
    *thread_arg = (void *)nat;
    return nat->ctx && nat->ctx->tid == tid;
}

static bool own_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg) {
    (void)dwfl;
    const LLNativeContext *ctx = ((const LLNative *)arg)->ctx;
    if (ctx && addr >= ctx->sp && addr - ctx->sp <= ctx->len && ctx->len - (addr - ctx->sp) >= 8) {
        memcpy(result, ctx->stack + (addr - ctx->sp), 8);
        return true;
    }
    /* The rest of its stack (a copy cut short) has changed since: not read. */
    if (ctx && addr >= ctx->sp && addr < ctx->top) return false;
    struct iovec local = {result, 8}, remote = {(void *)(uintptr_t)addr, 8};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 8;
}

static bool own_initial_registers(Dwfl_Thread *thread, void *arg) {
    const LLNativeContext *ctx = ((const LLNative *)arg)->ctx;
    return ctx && dw.thread_state_registers(thread, 0, LL_NATIVE_REGS, ctx->regs);
}

static const Dwfl_Thread_Callbacks own_callbacks = {
    own_next_thread, own_get_thread, own_memory_read, own_initial_registers, NULL, NULL};

LLNative *ll_native_open(pid_t pid, int by_offset, char *why, size_t n) {
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
    nat->by_offset = by_offset;
    nat->callbacks.find_elf = dw.find_elf;
    nat->callbacks.find_debuginfo = dw.find_debuginfo;
    nat->dwfl = dw.begin(&nat->callbacks);
    /* Another process's threads are stopped by the caller (assume_ptrace_stopped): libdw
     * reads their registers and never attaches or stops them itself.  This process's are
     * given to it as contexts (ll_native_unwind_context). */
    int own = pid == getpid();
    if (!nat->dwfl || dw.proc_report(nat->dwfl, pid) || dw.report_end(nat->dwfl, NULL, NULL) ||
        (own ? !dw.attach_state(nat->dwfl, NULL, pid, &own_callbacks, nat)
             : dw.proc_attach(nat->dwfl, pid, true))) {
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
    free(nat->out);
    free(nat->funcs);
    free(nat);
}

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
 * covers is named by its offset in its module in a snapshot (dump), and is its module's
 * "[unknown]" when sampling, which would otherwise give each of its instructions a function of
 * its own (a stripped libz: dozens of them in a second at 100 Hz, none above 11%). */
static uint32_t native_func(LLNative *nat, LLStacks *st, Dwarf_Addr pc, int *role,
                            int *known) {
    Dwfl_Module *mod = dw.addrmodule(nat->dwfl, pc);
    if (!mod && ll_monotonic_ns() >= nat->next_report_ns) {
        /* Sampling goes on for seconds or hours: the modules mapped since they were read
         * are added (the ones known stay, and so do their functions' names). */
        nat->next_report_ns = ll_monotonic_ns() + LL_NATIVE_REPORT_NS;
        dw.report_begin_add(nat->dwfl);
        int failed = dw.proc_report(nat->dwfl, nat->pid);
        if (dw.report_end(nat->dwfl, NULL, NULL) == 0 && !failed)
            mod = dw.addrmodule(nat->dwfl, pc);
    }
    *known = mod != NULL;
    const char *file = NULL, *sym = NULL;
    Dwarf_Addr start = 0;
    char text[512], module[256] = "?";
    if (mod) {
        /* The symbol first: looking it up opens the module's file, which module_info names
         * only once it is open (a module reported since the last frame in it was named). */
        sym = dw.module_addrname(mod, pc);
        dw.module_info(mod, NULL, &start, NULL, NULL, NULL, &file, NULL);
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
    } else if (nat->by_offset) {
        snprintf(text, sizeof text, "0x%llx", (unsigned long long)(pc - start));
    } else {
        snprintf(text, sizeof text, "[unknown]");
    }
    *role = !strcmp(text, LL_EVAL_FUNCTION)                                   ? ROLE_EVAL
            : !strcmp(text, LL_PARK_HANDLER) && !strncmp(module, "_native.", 8) ? ROLE_PARK
                                                                              : ROLE_OTHER;
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

/* native_func, remembered by address (a full table keeps what it has, and names the rest). */
static uint32_t named(LLNative *nat, LLStacks *st, Dwarf_Addr pc, int *role) {
    uint64_t h = (pc * 0x9E3779B97F4A7C15ull) >> 32;
    for (int probe = 0; probe < 8; probe++) {
        PcSlot *s = &nat->pcs[(h + (uint64_t)probe) & (LL_NATIVE_PCS - 1)];
        if (s->pc == pc) {
            *role = s->role;
            return s->func;
        }
        if (!s->pc) {
            int known = 0;
            uint32_t func = native_func(nat, st, pc, role, &known);
            /* (An address in no module known yet is not kept: it is named again.) */
            if (func && known && pc) *s = (PcSlot){pc, func, *role};
            return func;
        }
    }
    int known;
    return native_func(nat, st, pc, role, &known);
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

int ll_native_unwind(LLNative *nat, pid_t tid) {
    Unwound *u = &nat->u;
    u->n = 0;
    int rc = dw.getthread_frames(nat->dwfl, tid, on_frame, u);
    /* (An unwind that stops short, at a frame without call frame information, is kept.) */
    return rc != 0 && u->n == 0 ? -1 : u->n;
}

int ll_native_unwind_context(LLNative *nat, const LLNativeContext *ctx) {
    nat->ctx = ctx;
    int n = ll_native_unwind(nat, ctx->tid);
    nat->ctx = NULL;
    return n;
}

int ll_native_merge(LLNative *nat, LLStacks *st, LLProc *p, int npy) {
    const Unwound *u = &nat->u;
    if (u->n == 0) return npy;
    if (nat->cout < st->max_depth) {
        LLFrame *grown = realloc(nat->out, sizeof *grown * (size_t)st->max_depth);
        if (!grown) return npy;
        nat->out = grown;
        nat->cout = st->max_depth;
    }
    LLFrame *out = nat->out;
    int n = 0, py = 0;
    for (int i = 0; i < u->n && n < st->max_depth; i++) {
        int role = ROLE_OTHER;
        uint32_t func = named(nat, st, u->pc[i], &role);
        if (role == ROLE_PARK) {
            /* A thread of this process asked again while it was still in the handler that
             * parked it last (run --native, on a busy machine): the frames from here in are
             * the handler's, and the program's go on past the signal frame under it. */
            i++; /* the signal's frame: __restore_rt, named or not (a stripped libc) */
            n = 0;
            continue;
        }
        if (role == ROLE_EVAL) {
            /* This call of the loop: the Python frames up to the one that began it.  (One
             * with none left, the Python walk having seen fewer, is left out: the stacks were
             * read at different moments, a thread that took the GIL between them.) */
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
    return n;
}
