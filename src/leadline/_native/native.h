/* Native frames (native.c): a stopped thread's C stack, unwound by elfutils' libdw, with the
 * interpreter's eval-loop frames replaced by the Python frames each was running. */
#ifndef LEADLINE_NATIVE_H
#define LEADLINE_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stackwalk.h"

typedef struct LLNative LLNative;

/* Whether libdw can be loaded: 0, or -1 with why not in `why`. */
int ll_native_available(char *why, size_t n);

/* A session unwinding threads of process `pid` (its modules as they are mapped now, and those
 * mapped later when a frame is found in one); NULL with why not in `why`.  `by_offset`: code no
 * symbol covers is named by its offset in its file (a snapshot), else it is its file's
 * "[unknown]" (sampling). */
LLNative *ll_native_open(pid_t pid, int by_offset, char *why, size_t n);
void ll_native_close(LLNative *nat);

/* The C stack of thread `tid`, which the caller holds in a ptrace stop: its frames' addresses,
 * kept for ll_native_merge (how many; -1 if it cannot be unwound).  Only this needs the thread
 * stopped: naming the frames (which may read symbol tables and debug files) comes after. */
int ll_native_unwind(LLNative *nat, pid_t tid);

/* A thread of this process as its signal handler found it (run --native): its registers in the
 * DWARF numbering (x86-64's 17, the last its pc) and a copy of its stack from its stack pointer
 * up, taken while it waited in the handler. */
#define LL_NATIVE_REGS 17
typedef struct {
    pid_t tid;
    uint64_t regs[LL_NATIVE_REGS];
    uint64_t sp;          /* where the copy begins */
    uint64_t top;         /* where the stack ends: beyond the copy, up to here, is not read */
    const uint8_t *stack; /* the copy */
    size_t len;
} LLNativeContext;

/* Whether this process's threads can be unwound from contexts here (x86-64 only). */
#if defined(__x86_64__) && defined(__linux__)
#define LL_NATIVE_CONTEXTS 1
#else
#define LL_NATIVE_CONTEXTS 0
#endif

/* ll_native_unwind for a thread of this process, from its context (`nat` opened for this
 * process); nothing needs to be stopped: the copy is what is read. */
int ll_native_unwind_context(LLNative *nat, const LLNativeContext *ctx);

/* The last unwind's thread, whose Python frames the walk read (st->frames and st->frame_addr,
 * `npy` of them, innermost first): its C frames with each eval-loop frame replaced by the Python
 * frames that call of the loop runs, into st->frames (at most st->max_depth; how many).
 * st->frame_addr is left as it is (the Python frames' addresses, which --locals numbers). */
int ll_native_merge(LLNative *nat, LLStacks *st, LLProc *p, int npy);

#endif
