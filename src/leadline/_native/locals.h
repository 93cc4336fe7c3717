/* `leadline dump --locals`: the local variables of a frame in a running process, read without
 * running any of its code (locals.c).  Each is written to a buffer as a record the Python side
 * turns into a bounded repr (record/locals.py). */
#ifndef LEADLINE_LOCALS_H
#define LEADLINE_LOCALS_H

#include <stddef.h>
#include <stdint.h>

#include "stackwalk.h"

/* What a value is known as (the order of record/locals.py's VALUE_KINDS). */
enum {
    LL_VAL_OBJECT = 0, /* any other object: its type's name and address */
    LL_VAL_NONE = 1,
    LL_VAL_BOOL = 2,  /* value: one byte, 0 or 1 */
    LL_VAL_INT = 3,   /* value: its decimal digits, a sign first if negative */
    LL_VAL_BIGINT = 4, /* an int too large to read: value its size in bits, 8 bytes */
    LL_VAL_FLOAT = 5, /* value: the double, 8 bytes */
    LL_VAL_STR = 6,   /* value: its text as UTF-8, cut (then U+2026) beyond LL_STR_MAX */
    LL_VAL_BYTES = 7, /* value: its first LL_BYTES_MAX bytes */
    LL_VAL_SIZED = 8, /* a list, tuple or dict (or subclass), or a str too long to read: value
                       * its length, 8 bytes */
    LL_VAL_CHANGING = 9, /* it held another object at each of LL_LOCAL_ATTEMPTS reads */
};
#define LL_VAL_CUT 0x80 /* or-ed into the kind: the value was cut */

/* A growing buffer of records: u32 thread serial, u16 frame (0: innermost), u8 kind, then the
 * variable's name, its type's name and its value, each as u16 length + bytes. */
typedef struct {
    uint8_t *data;
    size_t n, cap;
} LLLocals;

/* Appends the local variables of the frame at `frame` (st->frame_addr of a walk) of thread
 * `serial`, its index-th Python frame; how many were written, -1 if the frame or its code
 * could not be read (or it ran other code by the end).  `held`: the thread is stopped, and
 * each variable is read once; else twice, and again until the reads agree. */
int ll_frame_locals(LLLocals *out, LLProc *p, uint64_t frame, uint32_t serial, int index,
                    int held);
void ll_locals_free(LLLocals *out);

#endif
