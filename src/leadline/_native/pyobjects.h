/* Python objects of a running process read as CPython lays them out (pyobjects.c): dicts
 * (combined and split), an instance's attributes, small ints, and the names the program gave
 * its threads (threading._active: before 3.14 the system knows none of them, and from 3.14 on
 * only their first 15 bytes).  Every read may fail: the process runs on meanwhile. */
#ifndef LEADLINE_PYOBJECTS_H
#define LEADLINE_PYOBJECTS_H

#include <stddef.h>
#include <stdint.h>

#include "stackwalk.h"

/* The entries of a dict's keys: n entries of `size` bytes, the key and value at those offsets
 * of each (malloc'd; ll_dict_entries_free). */
typedef struct {
    uint8_t *entries;
    size_t n, size;
    int key, value;
} LLDictEntries;

void ll_dict_entries_free(LLDictEntries *e);

/* The entries of the combined dict at `dict` (at most `max`), and its type into *type if not
 * NULL; -1 if it cannot be read or is split (its values are elsewhere: ll_dict_get reads
 * those). */
int ll_dict_entries(LLProc *p, uint64_t dict, size_t max, uint64_t *type, LLDictEntries *e);

/* The value under the ASCII string key `key` of the dict at `dict`, combined or split (0: none
 * found, or it cannot be read). */
uint64_t ll_dict_get(LLProc *p, uint64_t dict, const char *key, size_t max);

/* Whether the layout knows dicts and instances well enough for ll_thread_names. */
int ll_instances_supported(const LLLayout *L);

/* The value of the int at `obj` into *v if it is one of at most 64 bits and not negative; 0,
 * or -1. */
int ll_read_small_int(LLProc *p, uint64_t obj, uint64_t *v);

/* The names the program gave its threads: threading._active's Thread objects' _name, as
 * (ident, name) pairs.  Written into `out` as records: ident (8 bytes), name length (2), name
 * (UTF-8); how many bytes (at most cap), or -1 if threading cannot be found. */
long ll_thread_names(LLProc *p, uint64_t interp, uint8_t *out, size_t cap);

#endif
