/* Native frames (native.c): a stopped thread's C stack, unwound by elfutils' libdw, with the
 * interpreter's eval-loop frames replaced by the Python frames each was running. */
#ifndef LEADLINE_NATIVE_H
#define LEADLINE_NATIVE_H

#include <stddef.h>
#include <sys/types.h>

#include "stackwalk.h"

typedef struct LLNative LLNative;

/* Whether libdw can be loaded: 0, or -1 with why not in `why`. */
int ll_native_available(char *why, size_t n);

/* A session unwinding threads of process `pid` (its modules as they are mapped now); NULL with
 * why not in `why`. */
LLNative *ll_native_open(pid_t pid, char *why, size_t n);
void ll_native_close(LLNative *nat);

/* The stack of thread `tid`, which the caller holds in a ptrace stop, whose Python frames the
 * walk just read (st->frames and st->frame_addr, `npy` of them, innermost first): its C frames
 * with each eval-loop frame replaced by the Python frames that call of the loop runs, into
 * st->frames (at most st->max_depth; how many).  st->frame_addr is left as it is (the Python
 * frames' addresses, which --locals numbers).  `npy` if the thread cannot be unwound. */
int ll_native_merge(LLNative *nat, LLStacks *st, LLProc *p, pid_t tid, int npy);

#endif
