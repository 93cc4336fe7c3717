/* The local variables of a frame in a running process (`leadline dump --locals`), read as the
 * rest of the sampler reads: copies of its memory, through the layout of its version, never a
 * call into it.  The process runs on meanwhile, so anything read may be stale or torn: every
 * read is bounded, checked, and may fail, and a value that cannot be read is left out. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "locals.h"

#include <stdlib.h>
#include <string.h>

#include "procmem.h"

#define LL_MAX_LOCALS 256   /* variables of a frame read (more are left out) */
#define LL_STR_MAX 200      /* characters of a str shown */
#define LL_BYTES_MAX 100    /* bytes of a bytes object shown */
#define LL_NAME_MAX 128     /* bytes of a variable's name (UTF-8) */
#define LL_TYPE_NAME_MAX 64 /* bytes of a type's name */
#define LL_INT_DIGITS 4     /* 30-bit digits of an int read (120 bits) */
#define LL_LOCAL_ATTEMPTS 8 /* reads of a variable that changed while it was read */
/* co_localspluskinds (3.11+): a cell of the frame's own, a free variable from an enclosing
 * function (both hold a cell object once the function has begun), and a variable hidden from
 * locals() (3.12+: one of an inlined comprehension). */
#define LL_FAST_HIDDEN 0x10
#define LL_FAST_CELL 0x40
#define LL_FAST_FREE 0x80

void ll_locals_free(LLLocals *out) {
    free(out->data);
    memset(out, 0, sizeof *out);
}

static int put(LLLocals *out, const void *data, size_t n) {
    if (out->n + n > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->n + n) cap *= 2;
        uint8_t *d = realloc(out->data, cap);
        if (!d) return -1;
        out->data = d;
        out->cap = cap;
    }
    memcpy(out->data + out->n, data, n);
    out->n += n;
    return 0;
}

static int put_field(LLLocals *out, const void *data, size_t n) {
    uint16_t len = (uint16_t)(n > 65535 ? 65535 : n);
    return put(out, &len, 2) || put(out, data, len);
}

/* The type's name (tp_name: for a type of a C extension "module.Name") and flags; -1 if they
 * cannot be read. */
static int type_of(LLProc *p, uint64_t obj, char *name, uint64_t *flags) {
    const LLLayout *L = &p->layout;
    uint64_t type = 0, at = 0;
    if (ll_mem_read(&p->mem, obj + 8, &type, 8) || !type ||
        ll_mem_read(&p->mem, type + (uint64_t)L->type_flags, flags, 8) ||
        ll_mem_read(&p->mem, type + (uint64_t)L->type_name, &at, 8) || !at)
        return -1;
    /* A name near the end of a mapping: read what can be, a byte at a time past the first. */
    if (ll_mem_read(&p->mem, at, name, LL_TYPE_NAME_MAX)) {
        size_t i = 0;
        while (i < LL_TYPE_NAME_MAX - 1 && !ll_mem_read(&p->mem, at + i, name + i, 1) && name[i])
            i++;
        name[i] = 0;
    }
    name[LL_TYPE_NAME_MAX - 1] = 0;
    for (char *c = name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) return -1; /* not a name: stale */
    return name[0] ? 0 : -1;
}

/* An int of at most LL_INT_DIGITS digits as decimal text; its length, or 0 if it is larger
 * (*bits then its size in bits), -1 if it cannot be read. */
static int int_text(LLProc *p, uint64_t obj, char *text, uint64_t *bits) {
    const LLLayout *L = &p->layout;
    int64_t size = 0;
    if (L->long_size < 0 || L->long_digits < 0 ||
        ll_mem_read(&p->mem, obj + (uint64_t)L->long_size, &size, 8))
        return -1;
    /* 3.12+: lv_tag, the digit count above 3 bits of sign (0 positive, 1 zero, 2 negative). */
    /* Negated as unsigned: a torn read may give any size, INT64_MIN included. */
    uint64_t ndigits = L->minor >= 12 ? (uint64_t)size >> 3
                                      : (size < 0 ? (uint64_t)0 - (uint64_t)size : (uint64_t)size);
    int negative = L->minor >= 12 ? (size & 3) == 2 : size < 0;
    if (ndigits > LL_INT_DIGITS) {
        *bits = ndigits > (UINT64_MAX / 30) ? UINT64_MAX : ndigits * 30;
        return 0;
    }
    uint32_t digit[LL_INT_DIGITS] = {0};
    if (ndigits && ll_mem_read(&p->mem, obj + (uint64_t)L->long_digits, digit, ndigits * 4))
        return -1;
    unsigned __int128 v = 0;
    for (uint64_t i = ndigits; i-- > 0;) v = (v << 30) | (digit[i] & 0x3fffffffu);
    char rev[48];
    int n = 0;
    do {
        rev[n++] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    int k = 0;
    if (negative) text[k++] = '-';
    while (n) text[k++] = rev[--n];
    text[k] = 0;
    return k;
}

/* The value of an object of a built-in type, from its type's name and flags: its kind
 * (LL_VAL_*), and its value into `value` (*n bytes); LL_VAL_OBJECT if the type is none of
 * those, -1 if the value cannot be read.  A class of the program's own (a heap type) is never
 * taken for a built-in one by its name: one called `float` is an object. */
static int describe_value(LLProc *p, uint64_t obj, const char *type, uint64_t flags,
                          uint8_t *value, size_t *n) {
    const LLLayout *L = &p->layout;
    *n = 0;
    int builtin = !(flags & LL_TPFLAGS_HEAPTYPE);
    if (builtin && !strcmp(type, "NoneType")) return LL_VAL_NONE;
    if (builtin && (flags & LL_TPFLAGS_LONG) && (!strcmp(type, "int") || !strcmp(type, "bool"))) {
        uint64_t bits = 0;
        int len = int_text(p, obj, (char *)value, &bits);
        if (len < 0) return -1;
        if (!strcmp(type, "bool")) {
            value[0] = value[0] == '1';
            *n = 1;
            return LL_VAL_BOOL;
        }
        if (len == 0) {
            memcpy(value, &bits, 8);
            *n = 8;
            return LL_VAL_BIGINT;
        }
        *n = (size_t)len;
        return LL_VAL_INT;
    }
    if (builtin && !strcmp(type, "float") && L->float_value >= 0) {
        if (ll_mem_read(&p->mem, obj + (uint64_t)L->float_value, value, 8)) return -1;
        *n = 8;
        return LL_VAL_FLOAT;
    }
    if (builtin && (flags & LL_TPFLAGS_UNICODE) && !strcmp(type, "str")) {
        long len = ll_read_str(&p->mem, L, obj, (char *)value, LL_STR_MAX * 4 + 4);
        if (len < 0) return -1;
        *n = (size_t)len;
        /* ll_read_str ends a cut string with U+2026: said by the kind instead. */
        if (len >= 3 && !memcmp(value + len - 3, "\xe2\x80\xa6", 3)) {
            int64_t length = 0;
            if (!ll_mem_read(&p->mem, obj + (uint64_t)L->unicode_length, &length, 8) &&
                length > LL_STR_MAX) {
                *n -= 3;
                return LL_VAL_STR | LL_VAL_CUT;
            }
        }
        return LL_VAL_STR;
    }
    if (builtin && (flags & LL_TPFLAGS_BYTES) && !strcmp(type, "bytes")) {
        int64_t size = 0;
        if (ll_mem_read(&p->mem, obj + (uint64_t)L->bytes_size, &size, 8) || size < 0) return -1;
        size_t take = size > LL_BYTES_MAX ? LL_BYTES_MAX : (size_t)size;
        if (take && ll_mem_read(&p->mem, obj + (uint64_t)L->bytes_sval, value, take)) return -1;
        *n = take;
        return LL_VAL_BYTES | (size > LL_BYTES_MAX ? LL_VAL_CUT : 0);
    }
    if (flags & (LL_TPFLAGS_LIST | LL_TPFLAGS_TUPLE | LL_TPFLAGS_DICT)) {
        int64_t len = 0;
        int off = flags & LL_TPFLAGS_DICT ? L->dict_used : L->bytes_size; /* PyVarObject ob_size */
        if (off < 0 || ll_mem_read(&p->mem, obj + (uint64_t)off, &len, 8) || len < 0) return -1;
        memcpy(value, &len, 8);
        *n = 8;
        return LL_VAL_SIZED;
    }
    return LL_VAL_OBJECT;
}

/* The object at `obj` as describe_value gives it, into type (its type's name) and value; one
 * whose value cannot be read (a str longer than ll_read_str takes: by its length) is an
 * object, by its type and address.  -1 if not even its type can be read. */
static int describe(LLProc *p, uint64_t obj, char *type, uint8_t *value, size_t *n) {
    uint64_t flags = 0;
    if (type_of(p, obj, type, &flags)) return -1;
    int what = describe_value(p, obj, type, flags, value, n);
    if (what >= 0 && what != LL_VAL_OBJECT) return what;
    int64_t length = 0;
    if ((flags & LL_TPFLAGS_UNICODE) &&
        !ll_mem_read(&p->mem, obj + (uint64_t)p->layout.unicode_length, &length, 8) &&
        length > LL_STR_MAX) {
        memcpy(value, &length, 8);
        *n = 8;
        return LL_VAL_SIZED;
    }
    memcpy(value, &obj, 8);
    *n = 8;
    return LL_VAL_OBJECT;
}

/* The object a slot of localsplus holds: 3.14+ keep _PyStackRefs, the address with tag bits
 * (an int tagged in place of an object, all tag bits set, is none a variable holds); 0: none. */
static uint64_t slot_object(const LLLayout *L, uint64_t bits) {
    if (L->stackref_tag_bits <= 0) return bits;
    uint64_t tags = (uint64_t)L->stackref_tag_bits;
    return (bits & tags) == tags ? 0 : bits & ~tags;
}

/* Up to `room` item addresses of the tuple at `tuple` into items; how many, -1 if unread. */
static int tuple_items(LLProc *p, uint64_t tuple, uint64_t *items, int room) {
    const LLLayout *L = &p->layout;
    int64_t size = 0;
    if (!tuple || ll_mem_read(&p->mem, tuple + (uint64_t)L->bytes_size, &size, 8) || size < 0)
        return -1;
    int n = size > room ? room : (int)size;
    if (n && ll_mem_read(&p->mem, tuple + (uint64_t)L->tuple_items, items, (size_t)n * 8))
        return -1;
    return n;
}

/* The names of the frame's variables and their kinds (co_localspluskinds; on 3.10, which has
 * none, its locals, then its cells, then its free variables, as its frames lay them out): how
 * many, -1 if they cannot be read. */
static int variable_names(LLProc *p, uint64_t code, uint64_t *name_at, uint8_t *kind) {
    const LLLayout *L = &p->layout;
    uint64_t names = 0, kinds = 0;
    int32_t nlocals = 0;
    if (ll_mem_read(&p->mem, code + (uint64_t)L->code_localsplusnames, &names, 8) ||
        ll_mem_read(&p->mem, code + (uint64_t)L->code_nlocalsplus, &nlocals, 4) || nlocals < 0)
        return -1;
    int want = nlocals > LL_MAX_LOCALS ? LL_MAX_LOCALS : nlocals;
    int n = tuple_items(p, names, name_at, want);
    if (n < want) return -1;
    memset(kind, 0, LL_MAX_LOCALS);
    if (L->code_localspluskinds >= 0) {
        if (ll_mem_read(&p->mem, code + (uint64_t)L->code_localspluskinds, &kinds, 8) || !kinds ||
            (n && ll_mem_read(&p->mem, kinds + (uint64_t)L->bytes_sval, kind, (size_t)n)))
            return -1;
        return n;
    }
    const int offs[2] = {L->code_cellvars, L->code_freevars};
    const uint8_t kinds_of[2] = {LL_FAST_CELL, LL_FAST_FREE};
    for (int k = 0; k < 2 && offs[k] >= 0; k++) {
        uint64_t tuple = 0;
        if (ll_mem_read(&p->mem, code + (uint64_t)offs[k], &tuple, 8)) return -1;
        int more = tuple_items(p, tuple, name_at + n, LL_MAX_LOCALS - n);
        if (more < 0) return -1;
        memset(kind + n, kinds_of[k], (size_t)more);
        n += more;
    }
    return n;
}

/* The object variable i of the frame holds: the slot's, or for a cell the cell's content; 0 if
 * unbound, 1 if it cannot be read.  Read afresh (not from pages cached earlier) unless `held`:
 * the thread is stopped, and nothing it holds changes. */
static uint64_t variable_object(LLProc *p, uint64_t frame, int i, uint8_t kind, int held) {
    const LLLayout *L = &p->layout;
    uint64_t bits = 0;
    if (!held) ll_mem_forget(&p->mem);
    if (ll_mem_read(&p->mem, frame + (uint64_t)L->frame_localsplus + (uint64_t)i * 8, &bits, 8))
        return 1;
    uint64_t obj = slot_object(L, bits);
    if (!obj || !(kind & (LL_FAST_CELL | LL_FAST_FREE))) return obj;
    /* A cell of the frame's own, or from an enclosing function, holds the value (3.11+: an
     * argument that is a cell holds the argument itself until the function begins). */
    char type[LL_TYPE_NAME_MAX];
    uint64_t flags = 0;
    if (type_of(p, obj, type, &flags)) return 1;
    if (strcmp(type, "cell")) return obj;
    if (L->cell_ref < 0 || ll_mem_read(&p->mem, obj + (uint64_t)L->cell_ref, &obj, 8)) return 1;
    return obj;
}

int ll_frame_locals(LLLocals *out, LLProc *p, uint64_t frame, uint32_t serial, int index,
                    int held) {
    const LLLayout *L = &p->layout;
    if (L->frame_localsplus < 0 || L->code_localsplusnames < 0 || L->code_nlocalsplus < 0 ||
        L->type_name < 0 || L->type_flags < 0 || L->tuple_items < 0)
        return -1;
    uint64_t code = 0, code_type = 0;
    if (!held) ll_mem_forget(&p->mem);
    if (ll_mem_read(&p->mem, frame + (uint64_t)L->frame_code, &code, 8)) return -1;
    code = slot_object(L, code) & ~(uint64_t)7;
    if (!code || ll_mem_read(&p->mem, code + 8, &code_type, 8) || code_type != p->code_type)
        return -1;
    uint64_t name_at[LL_MAX_LOCALS];
    uint8_t kind[LL_MAX_LOCALS];
    int n = variable_names(p, code, name_at, kind);
    if (n <= 0) return n;
    int written = 0;
    size_t start = out->n;
    for (int i = 0; i < n; i++) {
        if (kind[i] & LL_FAST_HIDDEN) continue;
        char type[LL_TYPE_NAME_MAX] = "", name[LL_NAME_MAX * 4 + 4];
        uint8_t value[LL_STR_MAX * 4 + 8];
        size_t nvalue = 0;
        /* The process runs on: the value is read, then the variable again, and kept only if
         * it still holds the same object (else the object may have been freed and its memory
         * reused while it was read); a variable that changes under every attempt (a counter
         * of a running loop) is said to. */
        int what = LL_VAL_CHANGING;
        uint64_t obj = variable_object(p, frame, i, kind[i], held);
        if (held && obj > 1) what = describe(p, obj, type, value, &nvalue);
        for (int attempt = 0; !held && attempt < LL_LOCAL_ATTEMPTS && obj > 1; attempt++) {
            /* Read twice, the variable read again after each: its memory may have been freed
             * and reused, and the variable bound again to an object at the same address (a
             * loop's counter, whose ints take turns at two addresses), so that the variable
             * reads the same around a read of another object. */
            char type2[LL_TYPE_NAME_MAX] = "";
            uint8_t value2[sizeof value];
            size_t nvalue2 = 0;
            int got = describe(p, obj, type, value, &nvalue);
            uint64_t again = variable_object(p, frame, i, kind[i], held);
            int got2 = again == obj ? describe(p, obj, type2, value2, &nvalue2) : -2;
            uint64_t third = got2 == -2 ? again : variable_object(p, frame, i, kind[i], held);
            if (third == obj && got == got2 && nvalue == nvalue2 && !strcmp(type, type2) &&
                !memcmp(value, value2, nvalue)) {
                what = got;
                break;
            }
            obj = third;
        }
        if (obj == 0) continue; /* not bound (yet, or any more) */
        if (what == LL_VAL_CHANGING) {
            type[0] = 0;
            nvalue = 0;
        }
        long nname = ll_read_str(&p->mem, L, name_at[i], name, sizeof name);
        if (what < 0 || obj == 1 || nname <= 0) continue;
        uint32_t s = serial;
        uint16_t f = (uint16_t)index;
        uint8_t k = (uint8_t)what;
        size_t mark = out->n;
        if (put(out, &s, 4) || put(out, &f, 2) || put(out, &k, 1) ||
            put_field(out, name, (size_t)nname) || put_field(out, type, strlen(type)) ||
            put_field(out, value, nvalue)) {
            out->n = mark; /* out of memory: no record half written */
            return -1;
        }
        written++;
    }
    /* A thread read as it ran may have left the frame meanwhile, and another call taken its
     * place: its values are then another function's, under this one's names.  Kept only if
     * the frame still runs the same code. */
    uint64_t now = 0;
    if (!held) ll_mem_forget(&p->mem);
    if (!held && (ll_mem_read(&p->mem, frame + (uint64_t)L->frame_code, &now, 8) ||
                  (slot_object(L, now) & ~(uint64_t)7) != code)) {
        out->n = start;
        return -1;
    }
    return written;
}
