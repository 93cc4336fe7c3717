/* Python objects of a running process, read as CPython lays them out: copies of its memory
 * through the layout of its version (tools/gen_layouts.py), never a call into it.  The process
 * runs on meanwhile, so every read is bounded and may fail. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "pyobjects.h"

#include <stdlib.h>
#include <string.h>

#include "procmem.h"

/* dk_kind (3.11+): a split table's keys (an instance's, shared by its class) are str too. */
enum { DICT_KEYS_GENERAL = 0, DICT_KEYS_UNICODE = 1, DICT_KEYS_SPLIT = 2 };

#define LL_MAX_MODULES 65536 /* entries of sys.modules read to find a module */
#define LL_MAX_THREADS 4096  /* entries of threading._active read */
#define LL_THREAD_NAME_MAX 256

void ll_dict_entries_free(LLDictEntries *e) {
    free(e->entries);
    memset(e, 0, sizeof *e);
}

/* The entries of the keys object at `keys` (at most `max`).  3.11+ say their index width and
 * kind; 3.10's index width follows from dk_size, and its entries are all general. */
static int keys_entries(LLProc *p, uint64_t keys, size_t max, LLDictEntries *e) {
    const LLLayout *L = &p->layout;
    uint8_t k[64];
    memset(e, 0, sizeof *e);
    if (L->dictkeys_indices < 0 || L->dictkeys_indices > (int)sizeof k || L->dictkeys_nentries < 0)
        return -1;
    if (ll_mem_read(&p->mem, keys, k, (size_t)L->dictkeys_indices)) return -1;
    uint64_t index_bytes;
    int kind = DICT_KEYS_GENERAL;
    if (L->dictkeys_size >= 0) {
        uint64_t size = ll_rd64(k, L->dictkeys_size);
        if (size == 0 || size > (1ULL << 40) || (size & (size - 1))) return -1;
        unsigned width = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffULL ? 4 : 8;
        index_bytes = size * width;
    } else {
        if (L->dictkeys_log2_index_bytes < 0 || L->dictkeys_kind < 0) return -1;
        unsigned log2_index_bytes = k[L->dictkeys_log2_index_bytes];
        kind = k[L->dictkeys_kind];
        if (log2_index_bytes > 40 || kind < DICT_KEYS_GENERAL || kind > DICT_KEYS_SPLIT)
            return -1;
        index_bytes = (uint64_t)1 << log2_index_bytes;
    }
    int64_t n = (int64_t)ll_rd64(k, L->dictkeys_nentries);
    if (n < 0 || (uint64_t)n > (1ULL << 32)) return -1;
    if ((size_t)n > max) n = (int64_t)max;
    e->size = (size_t)(kind == DICT_KEYS_GENERAL ? L->dict_entry_size : L->dict_unicode_entry_size);
    e->key = kind == DICT_KEYS_GENERAL ? 8 : 0; /* after the general entry's hash */
    e->value = e->key + 8;
    e->n = (size_t)n;
    e->entries = malloc(e->n * e->size + 1);
    if (!e->entries) return -1;
    uint64_t at = keys + (uint64_t)L->dictkeys_indices + index_bytes;
    /* A large table (sys.modules) is read past the page cache, which it would only evict. */
    size_t bytes = e->n * e->size;
    if (bytes && (bytes > LL_PAGE ? ll_mem_read_raw(p->mem.pid, at, e->entries, bytes)
                                  : ll_mem_read(&p->mem, at, e->entries, bytes))) {
        ll_dict_entries_free(e);
        return -1;
    }
    return 0;
}

/* The dict at `dict`: its keys object and its values array (0 for a combined table). */
static int dict_parts(LLProc *p, uint64_t dict, uint64_t *type, uint64_t *keys, uint64_t *values) {
    const LLLayout *L = &p->layout;
    uint8_t d[64];
    if (L->dict_keys < 0 || L->dict_values < 0 || L->dict_values + 8 > (int)sizeof d ||
        ll_mem_read(&p->mem, dict, d, (size_t)L->dict_values + 8))
        return -1;
    if (type) *type = ll_rd64(d, 8);
    *keys = ll_rd64(d, L->dict_keys);
    *values = ll_rd64(d, L->dict_values);
    return *keys ? 0 : -1;
}

int ll_dict_entries(LLProc *p, uint64_t dict, size_t max, uint64_t *type, LLDictEntries *e) {
    uint64_t keys, values;
    memset(e, 0, sizeof *e);
    if (dict_parts(p, dict, type, &keys, &values) || values) return -1;
    return keys_entries(p, keys, max, e);
}

/* The index of the entry whose key is the ASCII str `key`, or -1.  The keys' first bytes are
 * read in as few system calls as the kernel allows. */
static long find_key(LLProc *p, const LLDictEntries *e, const char *key, int combined) {
    const LLLayout *L = &p->layout;
    size_t klen = strlen(key), size = (size_t)L->unicode_ascii_size + klen;
    uint64_t *addrs = malloc(sizeof *addrs * (e->n + 1));
    size_t *index = malloc(sizeof *index * (e->n + 1));
    uint8_t *heads = malloc(size * (e->n + 1));
    long found = -1;
    size_t m = 0;
    for (size_t i = 0; addrs && index && i < e->n; i++) {
        uint64_t k = ll_rd64(e->entries + i * e->size, e->key);
        /* (A combined table's entry without a value was deleted; a split table's values are
         * all elsewhere.) */
        if (k && (!combined || ll_rd64(e->entries + i * e->size, e->value))) {
            index[m] = i;
            addrs[m++] = k;
        }
    }
    for (size_t done = 0; heads && addrs && index && done < m && found < 0;) {
        size_t got = ll_mem_read_many(p->mem.pid, addrs + done, m - done, heads, size);
        for (size_t i = 0; i < got && found < 0; i++) {
            const uint8_t *h = heads + i * size;
            uint32_t state;
            memcpy(&state, h + L->unicode_state, 4);
            int64_t len = (int64_t)ll_rd64(h, L->unicode_length);
            int compact_ascii = ((state >> 5) & 1) && ((state >> 6) & 1);
            if (compact_ascii && len == (int64_t)klen &&
                !memcmp(h + L->unicode_ascii_size, key, klen))
                found = (long)index[done + i];
        }
        done += got + 1; /* the one that could not be read whole is skipped */
    }
    free(addrs);
    free(index);
    free(heads);
    return found;
}

/* The value under `key` in the keys at `keys`: the entry's own (values 0: a combined table)
 * or, split, the one at the entry's index in the values array at `values`. */
static uint64_t keys_get(LLProc *p, uint64_t keys, uint64_t values, const char *key, size_t max) {
    const LLLayout *L = &p->layout;
    LLDictEntries e;
    if (keys_entries(p, keys, max, &e)) return 0;
    uint64_t found = 0;
    long i = find_key(p, &e, key, !values);
    if (i >= 0 && !values) {
        found = ll_rd64(e.entries + (size_t)i * e.size, e.value);
    } else if (i >= 0 && L->dictvalues_values >= 0) {
        uint64_t at = values + (uint64_t)L->dictvalues_values + 8 * (uint64_t)i;
        if (ll_mem_read(&p->mem, at, &found, 8)) found = 0;
    }
    ll_dict_entries_free(&e);
    return found;
}

uint64_t ll_dict_get(LLProc *p, uint64_t dict, const char *key, size_t max) {
    uint64_t keys, values;
    if (dict_parts(p, dict, NULL, &keys, &values)) return 0;
    return keys_get(p, keys, values, key, max);
}

int ll_instances_supported(const LLLayout *L) {
    if (L->interp_modules < 0 || L->module_dict < 0 || L->dict_keys < 0 ||
        L->dictkeys_indices < 0 || L->heaptype_cached_keys < 0 || L->dictvalues_values < 0 ||
        L->type_flags < 0)
        return 0;
    return L->type_dictoffset >= 0 || L->managed_dict != -1;
}

/* The attribute `key` of the instance at `obj` (0: none, or it cannot be read), wherever its
 * version keeps an instance's attributes (gen_layouts.py). */
static uint64_t instance_attr(LLProc *p, uint64_t obj, const char *key) {
    const LLLayout *L = &p->layout;
    uint64_t type = 0, flags = 0, keys = 0, values = 0, dict = 0;
    if (ll_mem_read(&p->mem, obj + 8, &type, 8) || !type ||
        ll_mem_read(&p->mem, type + (uint64_t)L->type_flags, &flags, 8) ||
        !(flags & LL_TPFLAGS_HEAPTYPE) ||
        ll_mem_read(&p->mem, type + (uint64_t)L->heaptype_cached_keys, &keys, 8))
        return 0;
    if (L->type_dictoffset >= 0) { /* 3.10 */
        int64_t off = 0;
        if (ll_mem_read(&p->mem, type + (uint64_t)L->type_dictoffset, &off, 8) || off <= 0 ||
            off > 1 << 20 || ll_mem_read(&p->mem, obj + (uint64_t)off, &dict, 8))
            return 0;
    } else {
        if (L->tpflags_managed_dict < 0 || !(flags & (uint64_t)L->tpflags_managed_dict))
            return 0;
        if (L->tpflags_inline_values >= 0 && (flags & (uint64_t)L->tpflags_inline_values)) {
            uint8_t valid = 0;
            int64_t size = 0;
            if (ll_mem_read(&p->mem, type + (uint64_t)L->type_basicsize, &size, 8) || size < 16 ||
                size > 1 << 20)
                return 0;
            uint64_t at = obj + (uint64_t)size;
            if (!ll_mem_read(&p->mem, at + (uint64_t)L->dictvalues_valid, &valid, 1) && valid)
                values = at;
        }
        if (!values && L->managed_values != -1 &&
            ll_mem_read(&p->mem, obj + (uint64_t)(int64_t)L->managed_values, &values, 8))
            return 0;
        if (!values) {
            uint64_t word = 0;
            if (ll_mem_read(&p->mem, obj + (uint64_t)(int64_t)L->managed_dict, &word, 8))
                return 0;
            if (L->managed_values_tag > 0 && (word & 1))
                values = word + (uint64_t)L->managed_values_tag;
            else
                dict = word;
        }
    }
    if (values) return keys ? keys_get(p, keys, values, key, 256) : 0;
    return dict ? ll_dict_get(p, dict, key, 256) : 0;
}

int ll_read_small_int(LLProc *p, uint64_t obj, uint64_t *v) {
    const LLLayout *L = &p->layout;
    uint64_t type = 0, flags = 0;
    int64_t size = 0;
    uint32_t digit[3] = {0, 0, 0};
    if (L->long_size < 0 || L->long_digits < 0 || !obj ||
        ll_mem_read(&p->mem, obj + 8, &type, 8) || !type ||
        ll_mem_read(&p->mem, type + (uint64_t)L->type_flags, &flags, 8) ||
        !(flags & LL_TPFLAGS_LONG) ||
        ll_mem_read(&p->mem, obj + (uint64_t)L->long_size, &size, 8))
        return -1;
    /* 3.12+: the digit count above three tag bits, 2 in the low two for a negative number. */
    int64_t ndigits = L->minor >= 12 ? (int64_t)((uint64_t)size >> 3) : size;
    int negative = L->minor >= 12 ? (size & 3) == 2 : size < 0;
    if (negative || ndigits > 3) return -1;
    if (ndigits &&
        ll_mem_read(&p->mem, obj + (uint64_t)L->long_digits, digit, (size_t)ndigits * 4))
        return -1;
    if (ndigits == 3 && digit[2] >> 4) return -1; /* beyond 64 bits */
    *v = (uint64_t)digit[0] | (uint64_t)digit[1] << 30 | (uint64_t)digit[2] << 60;
    return 0;
}

long ll_thread_names(LLProc *p, uint64_t interp, uint8_t *out, size_t cap) {
    const LLLayout *L = &p->layout;
    uint64_t modules = 0, threading = 0, mdict = 0, active = 0;
    if (!interp || !ll_instances_supported(L) ||
        ll_mem_read(&p->mem, interp + (uint64_t)L->interp_modules, &modules, 8) || !modules ||
        !(threading = ll_dict_get(p, modules, "threading", LL_MAX_MODULES)) ||
        ll_mem_read(&p->mem, threading + (uint64_t)L->module_dict, &mdict, 8) || !mdict ||
        !(active = ll_dict_get(p, mdict, "_active", 4096)))
        return -1;
    LLDictEntries e;
    if (ll_dict_entries(p, active, LL_MAX_THREADS, NULL, &e)) return -1;
    size_t n = 0;
    for (size_t i = 0; i < e.n; i++) {
        uint64_t key = ll_rd64(e.entries + i * e.size, e.key);
        uint64_t thread = ll_rd64(e.entries + i * e.size, e.value), ident = 0, name;
        char text[LL_THREAD_NAME_MAX];
        if (!key || !thread || ll_read_small_int(p, key, &ident) ||
            !(name = instance_attr(p, thread, "_name")))
            continue;
        long len = ll_read_str(&p->mem, L, name, text, sizeof text);
        if (len <= 0 || n + 10 + (size_t)len > cap) continue;
        memcpy(out + n, &ident, 8);
        uint16_t l16 = (uint16_t)len;
        memcpy(out + n + 8, &l16, 2);
        memcpy(out + n + 10, text, (size_t)len);
        n += 10 + (size_t)len;
    }
    ll_dict_entries_free(&e);
    return (long)n;
}
