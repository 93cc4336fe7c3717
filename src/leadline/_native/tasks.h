/* asyncio tasks: which task a thread is running, found from the interpreter's own state, and
 * its stack cut where the task's coroutine starts, with the task at its root (tasks.c). */
#ifndef LEADLINE_TASKS_H
#define LEADLINE_TASKS_H

#include <stdint.h>

#include "stackwalk.h"

typedef struct LLTaskName LLTaskName;

/* What a process's tasks are read with, between ticks. */
typedef struct {
    /* 3.11-3.13: the _asyncio module's dict of running tasks (loop -> task) and its type; 0
     * until found, looked for again at next_lookup_ns. */
    uint64_t current_tasks, dict_type;
    uint64_t next_lookup_ns;
    uint64_t modules_keys; /* sys.modules' table and entries when last searched */
    int64_t modules_n;
    LLTaskName *names; /* (task, name object) -> function, LL_TASK_NAMES of them */
    /* The tasks found running lately, newest first (0: none): a task whose step ended between
     * the walk and the read of the running task is still found by its coroutine's frame. */
    uint64_t recent[8];
    uint32_t *by_str;  /* a task name's string id -> its function id */
    size_t nby_str;
} LLTasks;

void ll_tasks_free(LLTasks *a);

/* Whether the layout this process is read with knows its tasks (3.11+). */
int ll_tasks_supported(const LLLayout *L);

/* After a walk (st->frames, *n of them, and st->frame_addr): if the thread whose state is at
 * `tstate` is running an asyncio task whose coroutine's frame is in
 * the walk, the frames below that one (the event loop's) are replaced by the task, a function
 * of kind LL_FUNC_TASK named as the task is.  1 if so, with *n the frames kept and *task the
 * task's function; 0 otherwise (the walk as it was). */
int ll_task_stack(LLTasks *a, LLStacks *st, LLProc *p, uint64_t interp, uint64_t tstate, int *n,
                  uint32_t *task, uint64_t now_ns);

/* --async all (3.14+): the stacks of the tasks of the thread whose state is at `tstate` that
 * are waiting (every task of its list but the one running), each the task at the root, then
 * the coroutines awaiting each other, outermost first, down to the one that waits: into
 * stacks (how many; at most max). */
int ll_waiting_tasks(LLTasks *a, LLStacks *st, LLProc *p, uint64_t tstate, uint32_t *stacks,
                     int max);
int ll_waiting_tasks_supported(const LLLayout *L);

#endif
