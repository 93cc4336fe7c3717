/* The sampler's stacks (stackwalk.c): walking a Python thread's frames in a running process,
 * naming the code objects they run as functions, and interning the strings and stacks the
 * capture defines (FUNCS, STRINGS and STACKS records). */
#ifndef LEADLINE_STACKWALK_H
#define LEADLINE_STACKWALK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "leadline.h"
#include "procmem.h"

/* A frame whose owner is at least this is not a Python function's: 3.12/3.13 FRAME_OWNED_BY_CSTACK
 * (3), 3.14+ FRAME_OWNED_BY_INTERPRETER (3) and FRAME_OWNED_BY_CSTACK (4); 3.11 has none. */
#define LL_FIRST_OWNER_NOT_PYTHON 3

/* A frame of a walk: the function it runs and its instruction offset (code units). */
typedef struct {
    uint32_t func, off;
} LLFrame;

typedef struct LLStrSlot LLStrSlot;
typedef struct LLStackSlot LLStackSlot;
typedef struct LLCodeSlot LLCodeSlot;
typedef struct LLRawFrame LLRawFrame;
typedef struct LLVisitSlot LLVisitSlot;

/* What every walk of one sampler shares: where definitions go, the string and stack tables
 * (a capture defines each once, whichever process it came from), and the walk's buffers, for
 * max_depth frames. */
typedef struct {
    LLWriter *w; /* definition records (FUNCS, STRINGS, STACKS) go here */
    int max_depth;
    LLStrSlot *strs;
    size_t nstrs, cstrs;
    LLStackSlot *stacks;
    size_t nstacks, cstacks;
    uint32_t next_str, next_func, next_stack;
    uint32_t gc_func; /* ll_gc_func's id, 0 until defined */
    LLFrame *frames; /* the last walk's frames, innermost first */
    uint64_t *frame_addr; /* where each of them is in the program's memory */
    int has_gen;          /* the walk met a generator's or coroutine's frame (3.11+) */
    LLRawFrame *raw;
    uint64_t *uniq;   /* distinct code objects of a walk */
    uint8_t *codebuf; /* their first bytes, LL_MAX_CODE_SIZE each */
    /* The previous walk's (uniq, codebuf), read in round `read_round` of `read_proc`'s memory
     * (nread of them; 0: none to reuse), and the code objects a walk has still to read. */
    uint64_t *prev_uniq;
    uint8_t *prev_codebuf;
    int nread;
    const void *read_proc;
    uint32_t read_round;
    uint64_t *miss;
    int *miss_slot;
    uint8_t *missbuf;
    LLVisitSlot *visited; /* frames of the current walk: a power of two > 2 x max_depth */
    size_t nvisited;
    uint32_t visit_gen;
} LLStacks;

/* One process whose stacks are walked: how to read it, and the functions its code objects
 * were found to be. */
typedef struct {
    LLLayout layout; /* the offsets this process is read with (LLPyInfo.layout) */
    uint64_t code_type;
    LLMem mem;
    LLCodeSlot *codes;
    size_t ncodes, ccodes; /* ccodes: a power of two */
} LLProc;

enum { LL_WALK_OK = 0, LL_WALK_TORN = 1 };

int ll_stacks_init(LLStacks *st, LLWriter *w, int max_depth); /* 0, or -1: out of memory */
void ll_stacks_free(LLStacks *st);
int ll_proc_init(LLProc *p, pid_t pid, const LLPyInfo *info); /* 0, or -1 (ll_mem_init) */
void ll_proc_free(LLProc *p);

/* The id of a string or stack (parent stack, function, offset), defined in the capture the
 * first time it is seen; 0 if out of memory. */
uint32_t ll_intern_str(LLStacks *st, const char *s, size_t n);
uint32_t ll_intern_stack(LLStacks *st, uint32_t parent, uint32_t func, uint32_t off);
/* The stack of the last walk's n frames (ll_intern_stack from the outermost in, on the stack
 * `root`, 0 for none); 0 if out of memory. */
uint32_t ll_intern_walk(LLStacks *st, uint32_t root, int n);
/* The function standing for a garbage collection (`<GC>`), defined the first time it is asked
 * for; 0 if out of memory. */
uint32_t ll_gc_func(LLStacks *st);
/* A new function that is not Python code (kind LL_FUNC_C or LL_FUNC_TASK), of `module`, named
 * by the n bytes at `name`; 0 if out of memory. */
uint32_t ll_new_func(LLStacks *st, int kind, const char *module, const char *name, size_t n);

/* The innermost frame of the thread state whose first bytes are `ts` (*ok = 0 if a read
 * failed). */
uint64_t ll_top_frame(LLProc *p, const uint8_t *ts, int *ok);
/* A walk of the frame chain from `frame` (innermost), in two steps: ll_walk_read copies the
 * frames (*depth of them, *truncated if max_depth cut it) and the code objects they run, and
 * takes no lock and allocates nothing; ll_walk_name names them, into st->frames (*n frames).
 * Each gives LL_WALK_OK, or LL_WALK_TORN: the frames did not check out. */
int ll_walk_read(LLStacks *st, LLProc *p, uint64_t frame, int *depth, int *truncated);
int ll_walk_name(LLStacks *st, LLProc *p, int depth, int *n);
/* The frames at `frames` (depth of them, innermost first: suspended coroutines' frames, which
 * link to no caller), read and named into st->frames (*n frames), as a walk's are. */
int ll_walk_frames(LLStacks *st, LLProc *p, const uint64_t *frames, int depth, int *n);

#endif
