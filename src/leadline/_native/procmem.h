/* Reading a CPython process's interpreter state without its GIL (procmem.c). */
#ifndef LEADLINE_PROCMEM_H
#define LEADLINE_PROCMEM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "layouts.h"

#define LL_PAGE 4096
#define LL_PAGE_SLOTS 64

/* The bits of a type's flags (tp_flags) that say which built-in type it is or derives from. */
#define LL_TPFLAGS_HEAPTYPE (1UL << 9) /* a class made at run time (class statement) */
#define LL_TPFLAGS_LONG (1UL << 24)
#define LL_TPFLAGS_LIST (1UL << 25)
#define LL_TPFLAGS_TUPLE (1UL << 26)
#define LL_TPFLAGS_BYTES (1UL << 27)
#define LL_TPFLAGS_UNICODE (1UL << 28)
#define LL_TPFLAGS_DICT (1UL << 29)

/* Pages a round of reads used, read again together by ll_mem_refresh. */
#define LL_PAGES_AHEAD 16

typedef struct {
    uint64_t page;
    uint32_t gen;  /* valid while equal to LLMem.gen */
    uint32_t used; /* the round that last used it */
    uint8_t data[LL_PAGE];
} LLPageSlot;

typedef struct {
    pid_t pid;
    uint32_t gen, round;
    uint64_t reads; /* system calls made */
    LLPageSlot *slots;
    uint64_t used[LL_PAGES_AHEAD]; /* pages this round used, first use first */
    int nused;
} LLMem;

int ll_mem_init(LLMem *m, pid_t pid);
void ll_mem_free(LLMem *m);
void ll_mem_forget(LLMem *m); /* the cached pages are stale from now on */
/* A new round of reads (a tick): the cache is stale, and the list of the pages used (m->used,
 * read again at once by ll_mem_refresh) starts empty. */
void ll_mem_new_round(LLMem *m);
/* The cache is stale; the pages used since the round or walk began are read again at once. */
void ll_mem_refresh(LLMem *m);
/* A walk within a round: the list of pages used (m->used, which ll_mem_refresh reads again)
 * starts empty; the cache stays valid. */
void ll_mem_new_walk(LLMem *m);
/* The n pages (distinct, at most LL_PAGES_AHEAD) read into the cache in one system call: those
 * the reads to come are expected to use (the sampler: what the previous tick read before its
 * first walk, what a thread's previous walk read). */
void ll_mem_prefetch(LLMem *m, const uint64_t *pages, int n);
int ll_mem_read(LLMem *m, uint64_t addr, void *buf, size_t n);      /* 0 or an errno */
int ll_mem_read_raw(pid_t pid, uint64_t addr, void *buf, size_t n); /* uncached */
size_t ll_mem_read_many(pid_t pid, const uint64_t *addrs, size_t n, uint8_t *out, size_t size);

/* A field of a block read from the process, at any alignment. */
static inline uint64_t ll_rd64(const uint8_t *b, int off) {
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}
static inline int32_t ll_rd32(const uint8_t *b, int off) {
    int32_t v;
    memcpy(&v, b + off, 4);
    return v;
}

/* A str object's text as UTF-8 (NUL-terminated); its length, or -1.  A lone surrogate is
 * written as the text \udXXX; a string longer than `cap` allows is cut, and ends with U+2026. */
long ll_read_str(LLMem *m, const LLLayout *L, uint64_t addr, char *out, size_t cap);

/* A point of a function's line table: from this instruction offset (code units) on, the code is
 * on this line. */
typedef struct {
    long offset;
    long line;
} LLLinePoint;
size_t ll_decode_linetable(int minor, long firstline, const uint8_t *t, size_t n,
                           LLLinePoint *out, size_t cap);

/* LL_E_EXITED: the process has ended but is still listed (a zombie: its parent has not waited
 * for it yet). */
enum { LL_E_NOPROC = 1, LL_E_PERM = 2, LL_E_NOTPY = 3, LL_E_VERSION = 4, LL_E_LAYOUT = 5,
       LL_E_EXITED = 6 };
/* Where the layout came from: the compiled table alone (3.10-3.12), or the target's own
 * _Py_DebugOffsets table with the compiled one for what it does not publish (3.13+). */
enum { LL_LAYOUT_COMPILED = 0, LL_LAYOUT_PUBLISHED = 1 };
typedef struct {
    int minor;
    uint64_t runtime;   /* address of _PyRuntime */
    uint64_t code_type; /* address of PyCode_Type */
    char path[4096];    /* the file that holds them */
    LLLayout layout;    /* the offsets to read it with */
    int source;         /* LL_LAYOUT_* */
    int published;      /* how many of layout's fields the target's table gave */
    char warning[256];  /* a one-line warning for the user ("" if none) */
} LLPyInfo;
int ll_inspect(pid_t pid, LLPyInfo *info, char *why, size_t whylen); /* 0 or LL_E_* */
/* LL_E_NOPROC if the process is gone, LL_E_EXITED if it is a zombie (with a one-line reason in
 * `why`), else 0. */
int ll_process_ended(pid_t pid, char *why, size_t whylen);
const LLLayout *ll_layout(int minor); /* the compiled table for 3.minor, or NULL */
/* The layout from a _Py_DebugOffsets table (`table`, `n` bytes, read from the target) over the
 * compiled one; 0, or LL_E_* with a one-line reason in `why`. */
int ll_layout_from_debug_offsets(const uint8_t *table, size_t n, int minor, LLPyInfo *info,
                                 char *why, size_t whylen);
int ll_pthread_tid_offset(void); /* -1 if unknown */

#endif
