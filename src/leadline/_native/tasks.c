/* asyncio tasks, read from a running process as its stacks are (stackwalk.c): a thread that runs
 * a task has, below the task's coroutines, the event loop's own frames (run_forever, _run_once,
 * Handle._run), the same in every sample.  The task is found, and the stack cut there:
 *
 *  - the running task: 3.14+ keep it in the thread state (asyncio_running_task); 3.11-3.13 in
 *    the _asyncio module's dict of running tasks (loop -> task), found once through sys.modules
 *    and the module's dict, and read each tick that a walk met a coroutine's frame;
 *  - it is the thread's only if its coroutine's frame (inside the coroutine object) is in the
 *    chain just walked: that both checks a read made while the program runs, and says where the
 *    task's stack begins.  The walk and the read of the running task are microseconds apart: a
 *    step that ended in between (0.4% of samples of tasks that run 2 ms a step, read from
 *    another process) leaves no running task, or the next one; the tasks found lately are
 *    tried too, each still checked by its coroutine's frame;
 *  - it is named as the program named it (get_name()): a string, or from 3.13 a number that
 *    stands for "Task-N".
 *
 * Every read goes through the page cache (procmem.c), so the pages it needs join the next
 * tick's one batched read; a thread of a program that does not use asyncio costs nothing. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leadline.h"
#include "procmem.h"
#include "pyobjects.h"

#define LL_TASK_NAMES 256                /* (task, name) pairs remembered */
/* How often to look for the _asyncio module again while it is not found: a look costs two
 * reads of sys.modules' header, and a search of its keys when it has changed. */
#define LL_TASK_LOOKUP_NS 10000000u
#define LL_MAX_LOOPS 16                  /* running tasks (one a loop) looked at */
#define LL_MAX_MODULES 65536             /* entries of sys.modules read to find _asyncio */
#define LL_TASK_NAME_MAX 1024            /* bytes of a task's name kept (then cut) */

struct LLTaskName {
    uint64_t task, name;
    uint32_t func;
};

void ll_tasks_free(LLTasks *a) {
    free(a->names);
    free(a->by_str);
    memset(a, 0, sizeof *a);
}

int ll_tasks_supported(const LLLayout *L) {
    if (L->gen_iframe < 0 || L->task_coro < 0 || L->task_name < 0) return 0;
    if (L->tstate_asyncio_task >= 0) return 1;
    return L->interp_modules >= 0 && L->module_dict >= 0 && L->dict_keys >= 0 &&
           L->dictkeys_indices >= 0;
}

/* 3.11-3.13: the _asyncio module's dict of running tasks, _asyncio._current_tasks.  Its keys
 * are searched again only once sys.modules has changed (another table, or more entries). */
static void find_current_tasks(LLTasks *a, LLProc *p, uint64_t interp) {
    const LLLayout *L = &p->layout;
    uint64_t modules = 0, module = 0, mdict = 0, tasks = 0, type = 0, keys = 0;
    int64_t n = 0;
    LLDictEntries e;
    if (ll_mem_read(&p->mem, interp + (uint64_t)L->interp_modules, &modules, 8) || !modules ||
        ll_mem_read(&p->mem, modules + (uint64_t)L->dict_keys, &keys, 8) || !keys ||
        ll_mem_read(&p->mem, keys + (uint64_t)L->dictkeys_nentries, &n, 8))
        return;
    if (keys == a->modules_keys && n == a->modules_n) return;
    if (!(module = ll_dict_get(p, modules, "_asyncio", LL_MAX_MODULES))) {
        a->modules_keys = keys; /* not imported: not looked for again until sys.modules grows */
        a->modules_n = n;
        return;
    }
    /* Imported, perhaps not yet initialised: looked for again at the next lookup. */
    if (ll_mem_read(&p->mem, module + (uint64_t)L->module_dict, &mdict, 8) || !mdict) return;
    if (!(tasks = ll_dict_get(p, mdict, "_current_tasks", 4096))) return;
    if (ll_dict_entries(p, tasks, 0, &type, &e)) return;
    ll_dict_entries_free(&e);
    a->current_tasks = tasks;
    a->dict_type = type;
}

/* The running tasks the thread may be running, into out (how many): 3.14+ the one its state
 * names, 3.11-3.13 each loop's. */
static int running_tasks(LLTasks *a, LLStacks *st, LLProc *p, uint64_t interp, uint64_t tstate,
                         uint64_t *out, uint64_t now_ns) {
    const LLLayout *L = &p->layout;
    if (L->tstate_asyncio_task >= 0) {
        uint64_t task = 0;
        if (ll_mem_read(&p->mem, tstate + (uint64_t)L->tstate_asyncio_task, &task, 8) || !task)
            return 0;
        out[0] = task;
        return 1;
    }
    if (!a->current_tasks) {
        if (now_ns < a->next_lookup_ns || !interp) return 0;
        a->next_lookup_ns = now_ns + LL_TASK_LOOKUP_NS;
        find_current_tasks(a, p, interp);
        if (!a->current_tasks) return 0;
    }
    LLDictEntries e;
    uint64_t type = 0;
    if (ll_dict_entries(p, a->current_tasks, LL_MAX_LOOPS, &type, &e) || type != a->dict_type) {
        ll_dict_entries_free(&e);
        a->current_tasks = 0; /* no longer the dict it was: look for it again */
        return 0;
    }
    int n = 0;
    for (size_t i = 0; i < e.n; i++) {
        uint64_t task = ll_rd64(e.entries + i * e.size, e.value);
        if (task && ll_rd64(e.entries + i * e.size, e.key)) out[n++] = task;
    }
    ll_dict_entries_free(&e);
    return n;
}

/* ---- names ---- */

/* The task's name, as get_name() gives it, into text (its length; -1 if it cannot be read). */
static long task_name_text(LLProc *p, uint64_t name, char *text, size_t cap) {
    const LLLayout *L = &p->layout;
    uint64_t type = 0, flags = 0;
    if (!name || ll_mem_read(&p->mem, name + 8, &type, 8) || !type ||
        ll_mem_read(&p->mem, type + (uint64_t)L->type_flags, &flags, 8))
        return -1;
    if (flags & LL_TPFLAGS_UNICODE) return ll_read_str(&p->mem, L, name, text, cap);
    /* "Task-N": N small and positive. */
    uint64_t v = 0;
    if (ll_read_small_int(p, name, &v)) return -1;
    return snprintf(text, cap, "Task-%llu", (unsigned long long)v);
}

/* The function that stands for the task named by the object at `name`; 0 if it cannot be read
 * or out of memory.  One function a name, whichever tasks bear it. */
static uint32_t task_func(LLTasks *a, LLStacks *st, LLProc *p, uint64_t task, uint64_t name) {
    if (!a->names && !(a->names = calloc(LL_TASK_NAMES, sizeof *a->names))) return 0;
    LLTaskName *slot = &a->names[((task >> 4) ^ (name >> 4)) % LL_TASK_NAMES];
    if (slot->func && slot->task == task && slot->name == name) return slot->func;
    char text[LL_TASK_NAME_MAX * 4 + 1];
    long len = task_name_text(p, name, text, sizeof text);
    if (len < 0) return 0;
    uint32_t sid = ll_intern_str(st, text, (size_t)len);
    if (!sid) return 0;
    if (sid >= a->nby_str) {
        size_t cap = a->nby_str ? a->nby_str : 256;
        while (cap <= sid) cap *= 2;
        uint32_t *t = realloc(a->by_str, cap * sizeof *t);
        if (!t) return 0;
        memset(t + a->nby_str, 0, (cap - a->nby_str) * sizeof *t);
        a->by_str = t;
        a->nby_str = cap;
    }
    if (!a->by_str[sid]) a->by_str[sid] = ll_new_func(st, LL_FUNC_TASK, "asyncio", text, (size_t)len);
    *slot = (LLTaskName){task, name, a->by_str[sid]};
    return slot->func;
}

/* ---- the stack ---- */

#define LL_RECENT_TASKS (sizeof(((LLTasks *)0)->recent) / sizeof(uint64_t))

/* `task` first among the recent ones. */
static void seen_task(LLTasks *a, uint64_t task) {
    size_t i = 0;
    while (i + 1 < LL_RECENT_TASKS && a->recent[i] != task) i++;
    memmove(a->recent + 1, a->recent, i * sizeof a->recent[0]);
    a->recent[0] = task;
}

int ll_task_stack(LLTasks *a, LLStacks *st, LLProc *p, uint64_t interp, uint64_t tstate, int *n,
                  uint32_t *task, uint64_t now_ns) {
    const LLLayout *L = &p->layout;
    if (!st->has_gen) return 0; /* no coroutine's frame in the walk: no task runs there */
    uint64_t tasks[LL_MAX_LOOPS + LL_RECENT_TASKS];
    int nt = running_tasks(a, st, p, interp, tstate, tasks, now_ns);
    for (size_t i = 0; i < LL_RECENT_TASKS && a->recent[i]; i++) tasks[nt++] = a->recent[i];
    int head = L->task_coro > L->task_name ? L->task_coro : L->task_name;
    uint8_t tb[512];
    if ((size_t)head + 8 > sizeof tb) return 0;
    for (int i = 0; i < nt; i++) {
        if (ll_mem_read(&p->mem, tasks[i], tb, (size_t)head + 8)) continue;
        uint64_t coro = ll_rd64(tb, L->task_coro);
        if (!coro) continue;
        uint64_t frame = coro + (uint64_t)L->gen_iframe;
        /* The task's coroutine's frame, outermost of its stack: the frames below are the loop's. */
        for (int f = *n - 1; f >= 0; f--) {
            if (st->frame_addr[f] != frame) continue;
            uint32_t func = task_func(a, st, p, tasks[i], ll_rd64(tb, L->task_name));
            if (!func) return 0;
            seen_task(a, tasks[i]);
            *n = f + 1;
            *task = func;
            return 1;
        }
    }
    return 0;
}

/* ---- waiting tasks (3.14+) ---- */

#define LL_MAX_TASKS_READ 4096 /* tasks of one thread looked at a tick */
#define LL_MAX_AWAITS 64       /* coroutines of one await chain */

int ll_waiting_tasks_supported(const LLLayout *L) {
    return L->tstate_asyncio_tasks >= 0 && L->task_node >= 0 && L->frame_stackpointer >= 0 &&
           L->gen_frame_state >= 0 && L->gen_yield_from_states > 0 && ll_tasks_supported(L);
}

/* The coroutine the one at `coro` awaits, if it is in an await and awaits a coroutine (of
 * `type`, its own): the top of its frame's stack (3.15: the top or the one below it); 0 if
 * none. */
static uint64_t awaited(LLProc *p, uint64_t coro, uint64_t type) {
    const LLLayout *L = &p->layout;
    int8_t state = 0;
    uint64_t sp = 0;
    /* (A state read from the program's memory may be anything: the shift stays within the
     * mask's 31 bits.) */
    if (ll_mem_read(&p->mem, coro + (uint64_t)L->gen_frame_state, &state, 1) || state < -8 ||
        state > 22 || !(((unsigned)L->gen_yield_from_states >> (state + 8)) & 1u))
        return 0;
    uint64_t frame = coro + (uint64_t)L->gen_iframe;
    if (ll_mem_read(&p->mem, frame + (uint64_t)L->frame_stackpointer, &sp, 8) || sp < frame)
        return 0;
    for (int back = 1; back <= 2; back++) {
        uint64_t ref = 0, t = 0;
        if (ll_mem_read(&p->mem, sp - 8 * (uint64_t)back, &ref, 8)) return 0;
        uint64_t obj = ref & ~(uint64_t)7; /* a _PyStackRef: the object, tag bits cleared */
        if (obj && !ll_mem_read(&p->mem, obj + 8, &t, 8) && t == type) return obj;
    }
    return 0;
}

/* The stack of the task at `task` (its first bytes in tb), waiting; 0 if it cannot be read. */
static uint32_t waiting_stack(LLTasks *a, LLStacks *st, LLProc *p, uint64_t task,
                              const uint8_t *tb) {
    const LLLayout *L = &p->layout;
    uint64_t coro = ll_rd64(tb, L->task_coro), type = 0;
    if (!coro || ll_mem_read(&p->mem, coro + 8, &type, 8) || !type) return 0;
    uint64_t chain[LL_MAX_AWAITS], frames[LL_MAX_AWAITS];
    int k = 0;
    for (uint64_t c = coro; c && k < LL_MAX_AWAITS; c = awaited(p, c, type))
        chain[k++] = c + (uint64_t)L->gen_iframe;
    for (int i = 0; i < k; i++) frames[i] = chain[k - 1 - i]; /* innermost first */
    int named = 0;
    if (ll_walk_frames(st, p, frames, k, &named) != LL_WALK_OK || !named) return 0;
    uint32_t func = task_func(a, st, p, task, ll_rd64(tb, L->task_name));
    uint32_t root = func ? ll_intern_stack(st, 0, func, 0) : 0;
    return root ? ll_intern_walk(st, root, named) : 0;
}

int ll_waiting_tasks(LLTasks *a, LLStacks *st, LLProc *p, uint64_t tstate, uint32_t *stacks,
                     int max) {
    const LLLayout *L = &p->layout;
    if (!ll_waiting_tasks_supported(L)) return 0;
    uint64_t head = tstate + (uint64_t)L->tstate_asyncio_tasks, node = 0, running = 0;
    if (ll_mem_read(&p->mem, head, &node, 8) ||
        ll_mem_read(&p->mem, tstate + (uint64_t)L->tstate_asyncio_task, &running, 8))
        return 0;
    int size = L->task_node + 8;
    if (L->task_coro + 8 > size) size = L->task_coro + 8;
    if (L->task_name + 8 > size) size = L->task_name + 8;
    uint8_t tb[512];
    if ((size_t)size > sizeof tb) return 0;
    int n = 0;
    for (int seen = 0; node && node != head && n < max && seen < LL_MAX_TASKS_READ; seen++) {
        uint64_t task = node - (uint64_t)L->task_node;
        if (ll_mem_read(&p->mem, task, tb, (size_t)size)) break; /* the list changed: stop */
        node = ll_rd64(tb, L->task_node);
        if (task == running) continue; /* its thread's sample has it */
        uint32_t stack = waiting_stack(a, st, p, task, tb);
        if (stack) stacks[n++] = stack;
    }
    return n;
}
