/* Reading a CPython process from outside its interpreter: its own process or another one.
 *
 * Everything here works on a pid and never takes the GIL.  Memory is read with
 * process_vm_readv(2), so a pointer that went stale under the reader gives EFAULT instead of a
 * crash (the same holds for the sampler's own process).  Finding the interpreter is done as
 * debuggers do: the mapped python executable or libpython is located in /proc/PID/maps, its
 * ELF symbol table gives the addresses of _PyRuntime and PyCode_Type, and the version comes from
 * the Py_Version symbol (3.11+) or the file name (3.10).  Field offsets per version come from
 * layouts.h, generated from each CPython's own headers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "procmem.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

int ll_mem_read_raw(pid_t pid, uint64_t addr, void *buf, size_t n) {
    struct iovec local = {buf, n};
    struct iovec remote = {(void *)(uintptr_t)addr, n};
    ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (r == (ssize_t)n) return 0;
    if (r >= 0) return EFAULT;
    return errno;
}

/* Reads `n` blocks of `size` bytes, one at each of `addrs`, into consecutive slots of `out`, in
 * as few system calls as the kernel allows (IOV_MAX blocks each).  Returns how many blocks, from
 * the first, were read whole. */
size_t ll_mem_read_many(pid_t pid, const uint64_t *addrs, size_t n, uint8_t *out, size_t size) {
    enum { BATCH = 1024 };
    struct iovec local[BATCH], remote[BATCH];
    size_t done = 0;
    while (done < n) {
        size_t k = n - done < BATCH ? n - done : BATCH;
        for (size_t i = 0; i < k; i++) {
            local[i] = (struct iovec){out + (done + i) * size, size};
            remote[i] = (struct iovec){(void *)(uintptr_t)addrs[done + i], size};
        }
        ssize_t r = process_vm_readv(pid, local, k, remote, k, 0);
        if (r < 0) return done;
        size_t whole = (size_t)r / size;
        done += whole;
        if (whole < k) return done;
    }
    return done;
}

/* The cache's slots are in sets of LL_PAGE_WAYS, a page's set chosen by its number: two pages a
 * tick needs whose numbers fall in one set (with one slot a set, one run in three or four of a
 * busy loop on 3.10, whose frames are objects of their own) would otherwise take each other's
 * slot, and one of them be read again, alone, every tick. */
#define LL_PAGE_WAYS 2

/* The slot that holds `page`, or (*hit = 0) the one of its set to read it into: one not valid,
 * else the one used least lately; never one of the `ntaken` slots in `taken` (NULL when none
 * is free). */
static LLPageSlot *slot_of(LLMem *m, uint64_t page, LLPageSlot *const *taken, int ntaken,
                           int *hit) {
    LLPageSlot *set = &m->slots[((page / LL_PAGE) % (LL_PAGE_SLOTS / LL_PAGE_WAYS)) * LL_PAGE_WAYS];
    LLPageSlot *victim = NULL;
    *hit = 0;
    for (int w = 0; w < LL_PAGE_WAYS; w++) {
        LLPageSlot *s = &set[w];
        int busy = 0;
        for (int j = 0; j < ntaken; j++) busy |= taken[j] == s;
        if (busy) continue;
        if (s->gen == m->gen && s->page == page) {
            *hit = 1;
            return s;
        }
        if (!victim || (victim->gen == m->gen && (s->gen != m->gen || s->used < victim->used)))
            victim = s;
    }
    return victim;
}

/* Reads through a small cache of whole pages, valid until the next ll_mem_forget(): the frames
 * of one stack, and the code objects they run, mostly share a few pages. */
int ll_mem_read(LLMem *m, uint64_t addr, void *buf, size_t n) {
    uint8_t *out = buf;
    while (n > 0) {
        uint64_t page = addr & ~(uint64_t)(LL_PAGE - 1);
        size_t off = (size_t)(addr - page);
        size_t take = LL_PAGE - off < n ? LL_PAGE - off : n;
        int hit;
        LLPageSlot *s = slot_of(m, page, NULL, 0, &hit);
        if (!hit) {
            if (s->page != page) s->used = 0; /* another page: not used in this round yet */
            int err = ll_mem_read_raw(m->pid, page, s->data, LL_PAGE);
            if (err) {
                m->reads++; /* the whole page's, which failed */
                s->gen = 0;
                /* The page may be only partly readable (the end of a mapping is page aligned,
                 * so this is rare); try exactly what was asked for. */
                err = ll_mem_read_raw(m->pid, addr, out, take);
                m->reads++;
                if (err) return err;
                out += take;
                addr += take;
                n -= take;
                continue;
            }
            m->reads++;
            s->page = page;
            s->gen = m->gen;
        }
        if (s->used != m->round) { /* a page read whole, first used in this round */
            s->used = m->round;
            if (m->nused < LL_PAGES_AHEAD) m->used[m->nused++] = page;
        }
        memcpy(out, s->data + off, take);
        out += take;
        addr += take;
        n -= take;
    }
    return 0;
}

void ll_mem_forget(LLMem *m) {
    if (++m->gen == 0) m->gen = 1;
}

/* Reads the n pages (distinct) into their slots in one system call; those read whole are valid. */
static void read_pages(LLMem *m, const uint64_t *pages, int n) {
    struct iovec local[LL_PAGES_AHEAD], remote[LL_PAGES_AHEAD];
    LLPageSlot *slot[LL_PAGES_AHEAD];
    int k = 0;
    for (int i = 0; i < n && i < LL_PAGES_AHEAD; i++) {
        /* A slot of the page's set that this call has not taken yet (more pages of one set
         * than it has slots: the first ones asked for). */
        int hit;
        LLPageSlot *s = slot_of(m, pages[i], slot, k, &hit);
        if (!s) continue;
        slot[k] = s;
        s->gen = 0;
        if (s->page != pages[i]) s->used = 0; /* another page: not used in this round yet */
        s->page = pages[i];
        local[k] = (struct iovec){s->data, LL_PAGE};
        remote[k] = (struct iovec){(void *)(uintptr_t)pages[i], LL_PAGE};
        k++;
    }
    if (!k) return;
    ssize_t r = process_vm_readv(m->pid, local, (unsigned long)k, remote, (unsigned long)k, 0);
    m->reads++;
    for (int j = 0; r > 0 && j < k && (size_t)r >= (size_t)(j + 1) * LL_PAGE; j++)
        slot[j]->gen = m->gen;
}

void ll_mem_new_round(LLMem *m) {
    ll_mem_forget(m);
    ll_mem_new_walk(m);
}

void ll_mem_new_walk(LLMem *m) {
    if (++m->round == 0) m->round = 1;
    m->nused = 0;
}

void ll_mem_refresh(LLMem *m) {
    ll_mem_forget(m);
    read_pages(m, m->used, m->nused);
}

void ll_mem_prefetch(LLMem *m, const uint64_t *pages, int n) { read_pages(m, pages, n); }

int ll_mem_init(LLMem *m, pid_t pid) {
    m->pid = pid;
    m->gen = 1;
    m->round = 1;
    m->nused = 0;
    m->reads = 0;
    m->slots = calloc(LL_PAGE_SLOTS, sizeof(LLPageSlot));
    return m->slots ? 0 : ENOMEM;
}

void ll_mem_free(LLMem *m) {
    free(m->slots);
    m->slots = NULL;
}

/* ---- strings ---- */

static size_t put_utf8(char *o, uint32_t c) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

long ll_read_str(LLMem *m, const LLLayout *L, uint64_t addr, char *out, size_t cap) {
    uint8_t h[128];
    if (!addr || cap < 16 || (size_t)L->unicode_compact_size > sizeof h) return -1;
    if (ll_mem_read(m, addr, h, (size_t)L->unicode_compact_size)) return -1;
    uint32_t state;
    int64_t length;
    memcpy(&state, h + L->unicode_state, 4);
    memcpy(&length, h + L->unicode_length, 8);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    /* A length beyond any name's means the pointer went stale: not a string we can trust. */
    if (!compact || (kind != 1 && kind != 2 && kind != 4) || length < 0 || length > 65536)
        return -1;
    /* Longer names are cut (then an ellipsis): read no more characters than can be written. */
    int64_t take = length;
    if ((uint64_t)take > (cap - 1) / 4) take = (int64_t)((cap - 1) / 4);
    uint64_t data = addr + (uint64_t)(ascii ? L->unicode_ascii_size : L->unicode_compact_size);
    size_t nbytes = (size_t)take * kind;
    uint8_t *raw = malloc(nbytes ? nbytes : 1);
    if (!raw) return -1;
    if (nbytes && ll_mem_read(m, data, raw, nbytes)) {
        free(raw);
        return -1;
    }
    size_t o = 0;
    int64_t i;
    for (i = 0; i < take; i++) {
        uint32_t c;
        if (kind == 1) c = raw[i];
        else if (kind == 2) c = (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8;
        else memcpy(&c, raw + 4 * i, 4);
        char one[8];
        size_t k;
        if (c >= 0xD800 && c <= 0xDFFF) {
            /* A lone surrogate (an undecodable file name, a name the program built) cannot be
             * UTF-8: it is written as the text \udXXX, as Python's own error output and the
             * tracer write it. */
            static const char hex[] = "0123456789abcdef";
            one[0] = '\\';
            one[1] = 'u';
            for (int d = 0; d < 4; d++) one[2 + d] = hex[(c >> (12 - 4 * d)) & 0xF];
            k = 6;
        } else {
            k = put_utf8(one, c > 0x10FFFF ? 0xFFFD : c);
        }
        size_t reserve = i + 1 < length ? 3 : 0; /* room for the ellipsis of a cut name */
        if (o + k + reserve + 1 > cap) break;
        memcpy(out + o, one, k);
        o += k;
    }
    free(raw);
    if (i < length) o += put_utf8(out + o, 0x2026);
    out[o] = 0;
    return (long)o;
}

/* ---- line tables ----
 * Both of CPython's encodings are turned into leadline's: the points (offset in code units,
 * line) where the line changes, starting from (0, first line), entries without a line skipped.
 * This is exactly what co_lines() gives (tests compare the two on thousands of functions). */

typedef struct {
    LLLinePoint *pts;
    size_t n, cap;
    long prev_line;
} Points;

static void add_point(Points *p, long off, long line) {
    if (line < 0 || line == p->prev_line || p->n >= p->cap) return;
    if (p->n && p->pts[p->n - 1].offset == off) {
        p->pts[p->n - 1].line = line; /* a zero-length range before it: the later line wins */
    } else {
        p->pts[p->n++] = (LLLinePoint){off, line};
    }
    p->prev_line = line;
}

static uint64_t lt_varint(const uint8_t *t, size_t n, size_t *pos) {
    uint64_t v = 0;
    int shift = 0;
    while (*pos < n && shift < 60) {
        uint8_t b = t[(*pos)++];
        v |= (uint64_t)(b & 63) << shift;
        shift += 6;
        if (!(b & 64)) break;
    }
    return v;
}

static long lt_svarint(const uint8_t *t, size_t n, size_t *pos) {
    uint64_t v = lt_varint(t, n, pos);
    return (v & 1) ? -(long)(v >> 1) : (long)(v >> 1);
}

/* Line numbers add up deltas read from another process, whose table may be torn or not a line
 * table at all: they wrap rather than overflow (signed overflow is undefined; UBSan found it). */
static inline long line_add(long line, long delta) {
    return (long)((unsigned long)line + (unsigned long)delta);
}

size_t ll_decode_linetable(int minor, long firstline, const uint8_t *t, size_t n,
                           LLLinePoint *out, size_t cap) {
    Points p = {out, 0, cap, firstline};
    long line = firstline, addr = 0;
    size_t pos = 0;
    if (minor <= 10) {
        /* PEP 626: pairs (bytes of bytecode, signed line delta); -128 means no line. */
        for (; pos + 1 < n; pos += 2) {
            int sdelta = t[pos];
            int ldelta = (int8_t)t[pos + 1];
            long this_line = -1;
            if (ldelta != -128) {
                line = line_add(line, ldelta);
                this_line = line;
            }
            if (sdelta) add_point(&p, addr / 2, this_line);
            addr += sdelta;
        }
        return p.n;
    }
    /* 3.11+ location table (Objects/locations.md): entries of 1-8 code units. */
    while (pos < n) {
        uint8_t b = t[pos++];
        if (!(b & 0x80)) break;
        int code = (b >> 3) & 15, len = (b & 7) + 1;
        long this_line;
        if (code == 15) {
            this_line = -1;
        } else if (code == 14) {
            line = line_add(line, lt_svarint(t, n, &pos));
            lt_varint(t, n, &pos);
            lt_varint(t, n, &pos);
            lt_varint(t, n, &pos);
            this_line = line;
        } else if (code == 13) {
            line = line_add(line, lt_svarint(t, n, &pos));
            this_line = line;
        } else if (code >= 10) {
            line = line_add(line, code - 10);
            pos += 2;
            this_line = line;
        } else {
            pos += 1;
            this_line = line;
        }
        add_point(&p, addr, this_line);
        addr += len;
    }
    return p.n;
}

/* ---- finding the interpreter ---- */

#define LL_PERM_MESSAGE                                                                     \
    "not permitted to read process %s%ld: reading another process's memory needs ptrace "  \
    "access to it (the same user and a dumpable process, with kernel.yama.ptrace_scope 0 " \
    "if Yama is on; or root with CAP_SYS_PTRACE)"

static void say(char *why, size_t n, const char *fmt, const char *a, long b) {
    if (why && n) snprintf(why, n, fmt, a, b);
}

typedef struct {
    uint64_t runtime, code_type, version;
    uint64_t first_load; /* p_vaddr of the PT_LOAD with offset 0, page aligned */
    int debug_build;     /* defines _Py_NegativeRefcount: built with Py_DEBUG (Py_REF_DEBUG) */
} ElfSyms;

/* Looks the symbols up in an ELF file's .dynsym and .symtab. */
static int elf_symbols(const char *path, ElfSyms *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f == MAP_FAILED) return -1;
    int found = -1;
    const Elf64_Ehdr *eh = (const void *)f;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff == 0 || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size ||
        eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > size)
        goto done;
    memset(out, 0, sizeof *out);
    const Elf64_Phdr *ph = (const void *)(f + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD) {
            out->first_load = (ph[i].p_vaddr - ph[i].p_offset) & ~(uint64_t)(LL_PAGE - 1);
            break;
        }
    }
    const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_SYMTAB) continue;
        if (sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > size || strs->sh_offset + strs->sh_size > size)
            continue;
        const Elf64_Sym *sym = (const void *)(f + sh[i].sh_offset);
        size_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *names = (const char *)(f + strs->sh_offset);
        for (size_t k = 0; k < nsym; k++) {
            if (sym[k].st_name >= strs->sh_size || sym[k].st_value == 0) continue;
            const char *nm = names + sym[k].st_name;
            size_t left = strs->sh_size - sym[k].st_name;
            if (strnlen(nm, left) == left) continue;
            if (!strcmp(nm, "_PyRuntime")) out->runtime = sym[k].st_value;
            else if (!strcmp(nm, "PyCode_Type")) out->code_type = sym[k].st_value;
            else if (!strcmp(nm, "Py_Version")) out->version = sym[k].st_value;
            else if (!strcmp(nm, "_Py_NegativeRefcount")) out->debug_build = 1;
        }
    }
    found = out->runtime && out->code_type ? 0 : -1;
done:
    munmap((void *)f, size);
    return found;
}

/* "python3.13t", "libpython3.14t.so.1.0": the name of a free-threaded build. */
static int free_threaded_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = strstr(base, "python3.");
    if (!p) return 0;
    p += 8;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == 'd') p++; /* a debug build: python3.14d, python3.14td */
    return *p == 't' || (p[0] == 'd' && p[1] == 't');
}

/* "python3.12", "libpython3.10.so.1.0" -> 12 (and *major = 3); 0 if the name says nothing. */
static int version_from_name(const char *path, int *major) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = strstr(base, "python");
    if (!p) return -1;
    p += 6;
    if (p[0] < '0' || p[0] > '9' || p[1] != '.') return 0;
    *major = p[0] - '0';
    return atoi(p + 2);
}

const LLLayout *ll_layout(int minor) {
    for (size_t i = 0; i < sizeof ll_layouts / sizeof ll_layouts[0]; i++)
        if (ll_layouts[i].minor == minor) return &ll_layouts[i];
    return NULL;
}

#define LL_NLAYOUTS (sizeof ll_layouts / sizeof ll_layouts[0])
#define LL_NDEBUG (sizeof ll_debug_slots / sizeof ll_debug_slots[0])
/* LLLayout is a run of ints (minor first, then one per field): walked as an array below. */
#define LL_LAYOUT_INTS ((int)(sizeof(LLLayout) / sizeof(int)))
#define LL_DEBUG_COOKIE "xdebugpy"
#define LL_FREE_THREADED_WHY                                                                  \
    "which leadline does not support: its frames and objects are laid out differently"
/* Every offset the sampler reads lies within the first few KB of its struct (the largest,
 * PyInterpreterState's threads, at 7.3 KB in 3.13-3.15): a table that says otherwise is not
 * one to trust. */
#define LL_MAX_OFFSET 65536

int ll_layout_from_debug_offsets(const uint8_t *table, size_t n, int minor, LLPyInfo *info,
                                 char *why, size_t whylen) {
    const LLDebugSlots *slots = NULL, *newest = &ll_debug_slots[LL_NDEBUG - 1];
    for (size_t i = 0; i < LL_NDEBUG; i++)
        if (ll_debug_slots[i].minor == minor) slots = &ll_debug_slots[i];
    int newer = !slots && minor > newest->minor;
    if (newer) slots = newest;
    if (!slots || n < (size_t)slots->table_size) {
        if (why && whylen)
            snprintf(why, whylen, "no known debug-offsets layout for Python 3.%d", minor);
        return LL_E_VERSION;
    }
    if (memcmp(table, LL_DEBUG_COOKIE, 8) != 0) {
        if (why && whylen)
            snprintf(why, whylen,
                     "the interpreter's debug offsets (_Py_DebugOffsets) are damaged: no "
                     "\"" LL_DEBUG_COOKIE "\" cookie at _PyRuntime; refusing to guess its layout");
        return LL_E_LAYOUT;
    }
    uint64_t version, free_threaded;
    memcpy(&version, table + slots->version, 8);
    memcpy(&free_threaded, table + slots->free_threaded, 8);
    int tmajor = (int)((version >> 24) & 0xFF), tminor = (int)((version >> 16) & 0xFF);
    if (tmajor != 3 || tminor != minor) {
        if (why && whylen)
            snprintf(why, whylen,
                     "the interpreter's debug offsets (_Py_DebugOffsets) are damaged: they say "
                     "Python %d.%d (version 0x%08llx), the interpreter says 3.%d",
                     tmajor, tminor, (unsigned long long)version, minor);
        return LL_E_LAYOUT;
    }
    if (free_threaded) {
        if (why && whylen)
            snprintf(why, whylen,
                     "Python 3.%d is a free-threaded build (Py_GIL_DISABLED), "
                     LL_FREE_THREADED_WHY,
                     minor);
        return LL_E_VERSION;
    }
    const LLLayout *base = ll_layout(minor);
    if (!base) base = &ll_layouts[LL_NLAYOUTS - 1];
    info->layout = *base;
    info->layout.minor = minor;
    int *out = (int *)&info->layout;
    const int *at = (const int *)&slots->at, *bound = (const int *)&slots->bound;
    int published = 0;
    for (int i = 1; i < LL_LAYOUT_INTS; i++) {
        if (at[i] < 0) continue;
        uint64_t v, size = LL_MAX_OFFSET;
        memcpy(&v, table + at[i], 8);
        /* Each section of the table states the size of its struct: an offset must lie in it
         * (or be it, for the sizes the sampler reads). */
        if (bound[i] >= 0) memcpy(&size, table + bound[i], 8);
        if (v >= LL_MAX_OFFSET || v > size) {
            if (why && whylen)
                snprintf(why, whylen,
                         "the interpreter's debug offsets (_Py_DebugOffsets) are damaged: an "
                         "offset of %llu bytes at byte %d of the table, in a struct of %llu",
                         (unsigned long long)v, at[i], (unsigned long long)size);
            return LL_E_LAYOUT;
        }
        out[i] = (int)v;
        published++;
    }
    info->source = LL_LAYOUT_PUBLISHED;
    info->published = published;
    if (newer)
        snprintf(info->warning, sizeof info->warning,
                 "Python 3.%d is newer than any leadline knows (3.10 to 3.%d): sampling it with "
                 "the offsets it publishes",
                 minor, newest->minor);
    return 0;
}

static int inspect(pid_t pid, LLPyInfo *info, char *why, size_t whylen);

/* A process that has ended stays listed, as a zombie (state Z; X while it is being removed),
 * until its parent waits for it: its /proc files are there but empty (no mappings) and reading
 * its memory fails with ESRCH.  Each of those would otherwise say something false ("not a
 * Python process", "no such process"). */
int ll_process_ended(pid_t pid, char *why, size_t whylen) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) {
        if (fd < 0 && errno != ENOENT && errno != ESRCH) return 0; /* unreadable: not known */
        say(why, whylen, "no such process: %s%ld", "", (long)pid);
        return LL_E_NOPROC;
    }
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x')) {
        say(why, whylen,
            "process %s%ld has exited (a zombie: its parent has not waited for it yet)", "",
            (long)pid);
        return LL_E_EXITED;
    }
    return 0;
}

int ll_inspect(pid_t pid, LLPyInfo *info, char *why, size_t whylen) {
    memset(info, 0, sizeof *info);
    int ended = ll_process_ended(pid, why, whylen);
    if (ended) return ended;
    int rc = inspect(pid, info, why, whylen);
    /* It may have ended while it was read (its maps emptied, its memory gone; with only the
     * executable's mapping seen, a shared-library Python looks like an unsupported one). */
    if (rc == LL_E_NOTPY || rc == LL_E_NOPROC || rc == LL_E_LAYOUT || rc == LL_E_VERSION) {
        ended = ll_process_ended(pid, why, whylen);
        if (ended) return ended;
    }
    return rc;
}

/* What the mappings tell of the interpreter besides LLPyInfo's fields. */
typedef struct {
    int name_major, name_minor; /* the version in a mapped file's name (0: none) */
    int debug_build;            /* the interpreter's symbols are a Py_DEBUG build's */
    int free_threaded;          /* its file's name is a free-threaded build's */
} MappedPython;

/* Whether `file`, mapped from `start` in the process, holds the interpreter (its ELF symbols
 * give _PyRuntime): 0, with `info` filled from it; LL_E_PERM if its version could not be read
 * for want of permission; LL_E_NOTPY if it does not. */
static int interpreter_in(pid_t pid, const char *file, unsigned long start, LLPyInfo *info,
                          MappedPython *m) {
    int maj = 0, mn = version_from_name(file, &maj);
    if (mn > 0 && !m->name_minor) {
        m->name_major = maj;
        m->name_minor = mn;
    }
    ElfSyms sy;
    char rooted[4200];
    snprintf(rooted, sizeof rooted, "/proc/%d/root%s", (int)pid, file);
    if (elf_symbols(rooted, &sy) != 0 && elf_symbols(file, &sy) != 0) return LL_E_NOTPY;
    uint64_t bias = start - sy.first_load;
    m->debug_build = sy.debug_build;
    m->free_threaded = free_threaded_name(file);
    info->runtime = bias + sy.runtime;
    info->code_type = bias + sy.code_type;
    snprintf(info->path, sizeof info->path, "%s", file);
    info->minor = mn > 0 ? mn : 0;
    if (sy.version) {
        uint64_t hex = 0;
        int err = ll_mem_read_raw(pid, bias + sy.version, &hex, sizeof hex);
        if (err == EPERM || err == EACCES) return LL_E_PERM;
        if (!err) {
            info->minor = (int)((hex >> 16) & 0xFF);
            m->name_major = (int)((hex >> 24) & 0xFF);
        }
    }
    return 0;
}

/* The first phase: the python executable or libpython among the process's mappings, its
 * symbols' addresses and its version.  0, or LL_E_* with a one-line reason in `why`. */
static int find_interpreter(pid_t pid, LLPyInfo *info, MappedPython *m, char *why,
                            size_t whylen) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "re");
    if (!maps) {
        int e = errno;
        if (e == ENOENT || e == ESRCH) {
            say(why, whylen, "no such process: %s%ld", "", (long)pid);
            return LL_E_NOPROC;
        }
        say(why, whylen, LL_PERM_MESSAGE, "", (long)pid);
        return LL_E_PERM;
    }
    char line[4600];
    char seen[8][4096];
    int nseen = 0;
    int rc = LL_E_NOTPY;
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end, offset;
        char perms[8];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &offset, &name_at) <
                4 ||
            !name_at)
            continue;
        char *file = line + name_at;
        file[strcspn(file, "\n")] = 0;
        if (file[0] != '/' || offset != 0) continue;
        const char *base = strrchr(file, '/') + 1;
        if (strncmp(base, "python", 6) != 0 && strncmp(base, "libpython", 9) != 0) continue;
        int dup = 0;
        for (int i = 0; i < nseen; i++) dup |= !strcmp(seen[i], file);
        if (dup || nseen >= 8 || strlen(file) >= sizeof seen[0]) continue;
        strcpy(seen[nseen++], file);
        rc = interpreter_in(pid, file, start, info, m);
        if (rc != LL_E_NOTPY) break;
    }
    fclose(maps);
    if (rc == LL_E_PERM) {
        say(why, whylen, LL_PERM_MESSAGE, "", (long)pid);
        return rc;
    }
    if (rc != 0) {
        if (m->name_minor) {
            char v[32];
            snprintf(v, sizeof v, "%d.%d", m->name_major, m->name_minor);
            if (why && whylen)
                snprintf(why, whylen,
                         "process %ld runs Python %s, which leadline does not support "
                         "(3.10 to 3.%d)",
                         (long)pid, v, ll_layouts[LL_NLAYOUTS - 1].minor);
            return LL_E_VERSION;
        }
        say(why, whylen, "process %s%ld is not a Python process (no libpython or python "
            "executable with _PyRuntime is mapped)", "", (long)pid);
        return LL_E_NOTPY;
    }
    return 0;
}

/* The second: whether leadline can sample that Python.  0, or LL_E_VERSION with a one-line
 * reason in `why`. */
static int check_version(pid_t pid, LLPyInfo *info, const MappedPython *m, char *why,
                         size_t whylen) {
    if (m->name_major && m->name_major != 3) info->minor = 0;
    const LLLayout *compiled = ll_layout(info->minor);
    int newest = ll_layouts[LL_NLAYOUTS - 1].minor;
    if ((m->name_major && m->name_major != 3) || info->minor < 10 ||
        (!compiled && info->minor < ll_debug_slots[0].minor)) {
        if (why && whylen)
            snprintf(why, whylen,
                     "process %ld runs Python %d.%d, which leadline does not support "
                     "(3.10 to 3.%d)",
                     (long)pid, m->name_major ? m->name_major : 3,
                     m->name_minor ? m->name_minor : info->minor, newest);
        return LL_E_VERSION;
    }
    if (m->free_threaded) {
        if (why && whylen)
            snprintf(why, whylen,
                     "process %ld runs a free-threaded build of Python 3.%d (%s), "
                     LL_FREE_THREADED_WHY,
                     (long)pid, info->minor, info->path);
        return LL_E_VERSION;
    }
    return 0;
}

/* The third: the offsets to read the interpreter with, into info->layout.  0, or LL_E_* with a
 * one-line reason in `why`. */
static int read_layout(pid_t pid, LLPyInfo *info, int debug_build, char *why, size_t whylen) {
    /* One read of _PyRuntime: it proves the process readable and, from 3.13 on, holds the
     * _Py_DebugOffsets table first (as long as the longest one leadline knows). */
    int published = info->minor >= ll_debug_slots[0].minor;
    uint8_t table[4096];
    size_t want = 8;
    for (size_t i = 0; published && i < LL_NDEBUG; i++)
        if ((size_t)ll_debug_slots[i].table_size > want)
            want = (size_t)ll_debug_slots[i].table_size;
    int err = ll_mem_read_raw(pid, info->runtime, table, want);
    if (err == EPERM || err == EACCES) {
        say(why, whylen, LL_PERM_MESSAGE, "", (long)pid);
        return LL_E_PERM;
    }
    if (err == ESRCH) {
        say(why, whylen, "no such process: %s%ld", "", (long)pid);
        return LL_E_NOPROC;
    }
    if (!published) {
        /* Before 3.13 nothing is published: the compiled table, which a debug build (other
         * thread-state and frame layouts) would not match. */
        if (debug_build) {
            if (why && whylen)
                snprintf(why, whylen,
                         "process %ld runs a debug build of Python 3.%d (Py_DEBUG), whose "
                         "layouts leadline can read only from 3.13 on, where the interpreter "
                         "publishes them",
                         (long)pid, info->minor);
            return LL_E_VERSION;
        }
        info->layout = *ll_layout(info->minor); /* check_version made sure there is one */
        info->source = LL_LAYOUT_COMPILED;
    } else {
        if (err) {
            say(why, whylen, "cannot read the interpreter state of process %s%ld", "", (long)pid);
            return LL_E_NOTPY;
        }
        char reason[400] = "";
        int rc2 = ll_layout_from_debug_offsets(table, want, info->minor, info, reason,
                                               sizeof reason);
        if (rc2) {
            if (why && whylen) snprintf(why, whylen, "process %ld: %s", (long)pid, reason);
            return rc2;
        }
    }
    return 0;
}

static int inspect(pid_t pid, LLPyInfo *info, char *why, size_t whylen) {
    MappedPython m = {0};
    int rc = find_interpreter(pid, info, &m, why, whylen);
    if (!rc) rc = check_version(pid, info, &m, why, whylen);
    if (!rc) rc = read_layout(pid, info, m.debug_build, why, whylen);
    return rc;
}

/* glibc keeps a thread's kernel id inside its struct pthread, whose address is the pthread_t
 * that CPython stores as thread_id.  Python 3.10 has no native_thread_id, so the sampler finds
 * the tid there, at the offset measured once in this process (same C library). */
int ll_pthread_tid_offset(void) {
    static int offset = -2;
    if (offset != -2) return offset;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    const pid_t *p = (const pid_t *)(uintptr_t)pthread_self();
    offset = -1;
    for (int i = 0; i < 1024; i++) {
        if (p[i] == tid) {
            offset = i * (int)sizeof(pid_t);
            break;
        }
    }
    return offset;
}
