/* em_emit.c: decode a code object into an EmAsm and assemble an EmAsm back into a code
 * object. Layout follows CPython 3.11/3.12: 2-byte code units, EXTENDED_ARG prefixes, zeroed
 * inline caches, relative jumps measured from the unit after the jump's caches; the line
 * table (InternalDocs/locations.md: codes 13 and 15 only) and exception table
 * (InternalDocs/exception_handling.md) are written from scratch.
 */
#include "em_emit.h"

#include <limits.h>

void em_asm_init(EmAsm *A) { memset(A, 0, sizeof(*A)); }

void em_asm_free(EmAsm *A) {
    em_vec_free(&A->ins);
    em_vec_free(&A->labels);
    em_vec_free(&A->exc);
}

int em_asm_label(EmAsm *A) {
    if (em_vec_push(&A->labels, -1)) return -1;
    return A->labels.len - 1;
}

void em_asm_place(EmAsm *A, int label) {
    EM_ASSERT(label >= 0 && label < A->labels.len, "label %d of %d", label, A->labels.len);
    EM_ASSERT(A->labels.data[label] < 0, "label %d placed twice", label);
    A->labels.data[label] = A->ins.len;
}

int em_asm_op(EmAsm *A, int op, int arg, int line) {
    EmAsmInstr in = {.op = op, .arg = arg, .target = -1, .line = line, .orig = -1};
    return em_vec_push(&A->ins, in);
}

int em_asm_is_jump(int op) { return em_bc_is_jump[op & 255]; }

int em_asm_jump(EmAsm *A, int op, int label, int line) {
    EM_ASSERT(label >= 0 && label < A->labels.len, "jump to label %d of %d", label, A->labels.len);
    EmAsmInstr in = {.op = op, .arg = 0, .target = label, .line = line, .orig = -1};
    return em_vec_push(&A->ins, in);
}

/* ---- decoding ---- */

static int exc_varint(const unsigned char **p, const unsigned char *end, int *out) {
    int v = 0;
    for (;;) {
        if (*p >= end) return -1;
        unsigned char b = *(*p)++;
        v = (v << 6) | (b & 63);
        if (!(b & 64)) break;
    }
    *out = v;
    return 0;
}

int em_asm_decode(EmAsm *A, PyCodeObject *co) {
    int whole[2] = {0, INT_MAX};
    return em_asm_decode_ranges(A, co, whole, 1);
}

int em_asm_decode_ranges(EmAsm *A, PyCodeObject *co, const int *given, int nranges) {
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) return -1;
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2), rc = -1;
    int *label_at = calloc((size_t)n + 1, sizeof(int)); /* code unit -> label + 1 (0: none) */
    int *index_at = malloc(sizeof(int) * ((size_t)n + 1)); /* code unit -> instruction index */
    unsigned char *decoded = calloc((size_t)n + 1, 1);     /* code unit -> 1: an instruction decoded */
    int *ranges = malloc(sizeof(int) * (2 * (size_t)nranges + 1)); /* given, each start at its prefixes */
    if (!label_at || !index_at || !decoded || !ranges) {
        PyErr_NoMemory();
        goto done;
    }
    for (int r = 0; r < 2 * nranges; r++) ranges[r] = given[r];
    for (int r = 0; r < nranges; r++) /* a range given by an opcode's unit starts at its EXTENDED_ARGs */
        while (ranges[2 * r] > 0 && ranges[2 * r] <= n && code[2 * (ranges[2 * r] - 1)] == EMBC_EXTENDED_ARG)
            ranges[2 * r]--;
    for (int i = 0; i <= n; i++) index_at[i] = -1;
    /* pass 1: instructions (appended after any already in A), range after range; jump
     * targets recorded as units for now. The end of a range is a position too (the index
     * after its last instruction), where an exception-table entry may end. */
    int32_t first = A->ins.len;
    for (int r = 0; r < nranges; r++) {
        int lo = ranges[2 * r], hi = ranges[2 * r + 1] < n ? ranges[2 * r + 1] : n;
        for (int at = lo; at < hi;) {
            EmInstr in;
            int start = at;
            em_decode(code, n, at, &in);
            int line = PyCode_Addr2Line(co, in.at * 2);
            index_at[start] = A->ins.len;
            decoded[start] = 1;
            EmAsmInstr ai = {.op = in.op, .arg = in.arg, .target = -1, .line = line, .orig = in.at};
            if (em_bc_is_jump[in.op]) {
                ai.target = em_jump_target(&in); /* a unit, turned into a label below */
                if (em_bc_is_backward[in.op] && em_bc_flip[in.op] >= 0) ai.op = em_bc_flip[in.op];
                ai.arg = 0;
            }
            if (em_vec_push(&A->ins, ai)) {
                PyErr_NoMemory();
                goto done;
            }
            at = in.next;
        }
        if (index_at[hi] < 0) index_at[hi] = A->ins.len;
    }
    /* labels for every jump target and exception-table boundary */
#define LABEL_FOR(unit, out)                                                                                   \
    do {                                                                                                       \
        int u_ = (unit);                                                                                       \
        if (u_ < 0 || u_ > n || index_at[u_] < 0) {                                                            \
            PyErr_Format(PyExc_SystemError, "ember: jump or handler to unit %d outside the decoded code", u_); \
            goto done;                                                                                         \
        }                                                                                                      \
        if (!label_at[u_]) {                                                                                   \
            int l_ = em_asm_label(A);                                                                          \
            if (l_ < 0) {                                                                                      \
                PyErr_NoMemory();                                                                              \
                goto done;                                                                                     \
            }                                                                                                  \
            A->labels.data[l_] = index_at[u_];                                                                 \
            label_at[u_] = l_ + 1;                                                                             \
        }                                                                                                      \
        (out) = label_at[u_] - 1;                                                                              \
    } while (0)
    for (int32_t i = first; i < A->ins.len; i++)
        if (A->ins.data[i].target >= 0) LABEL_FOR(A->ins.data[i].target, A->ins.data[i].target);
    {
        /* entries whose handler was decoded, clipped to the decoded ranges */
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(co->co_exceptiontable);
        const unsigned char *end = p + PyBytes_GET_SIZE(co->co_exceptiontable);
        while (p < end) {
            int start, len, target, dl;
            if (exc_varint(&p, end, &start) || exc_varint(&p, end, &len) || exc_varint(&p, end, &target) ||
                exc_varint(&p, end, &dl)) {
                PyErr_SetString(PyExc_SystemError, "ember: bad exception table");
                goto done;
            }
            /* (a handler at the end of a range was not decoded: index_at maps it to the
             * instruction after the range) */
            if (target < 0 || target >= n || !decoded[target]) continue;
            for (int r = 0; r < nranges; r++) {
                int lo = ranges[2 * r] > start ? ranges[2 * r] : start;
                int hi = ranges[2 * r + 1] < start + len ? ranges[2 * r + 1] : start + len;
                if (hi > n) hi = n;
                if (lo >= hi) continue;
                EmAsmExc e = {.depth = dl >> 1, .lasti = dl & 1};
                LABEL_FOR(lo, e.start);
                LABEL_FOR(hi, e.end);
                LABEL_FOR(target, e.target);
                if (em_vec_push(&A->exc, e)) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
        }
    }
#undef LABEL_FOR
    rc = 0;
done:
    free(label_at);
    free(index_at);
    free(decoded);
    free(ranges);
    Py_DECREF(bytes);
    return rc;
}

/* ---- assembly ---- */

static int ext_count(unsigned arg) { return arg > 0xFFFFFF ? 3 : arg > 0xFFFF ? 2 : arg > 0xFF ? 1 : 0; }

/* Lays out A: fills each jump's op (direction) and arg, and unit offsets (size n+1). */
static int layout(EmAsm *A, int *off) {
    int32_t n = A->ins.len;
    for (int round = 0; round < 16; round++) {
        int at = 0, changed = 0;
        for (int32_t i = 0; i < n; i++) {
            off[i] = at;
            EmAsmInstr *in = &A->ins.data[i];
            at += ext_count((unsigned)in->arg) + 1 + em_bc_caches[in->op];
        }
        off[n] = at;
        for (int32_t i = 0; i < n; i++) {
            EmAsmInstr *in = &A->ins.data[i];
            if (in->target < 0) continue;
            int t = A->labels.data[in->target];
            if (t < 0 || t > n) {
                PyErr_SetString(PyExc_SystemError, "ember: jump to an unplaced label");
                return -1;
            }
            int next = off[i] + ext_count((unsigned)in->arg) + 1 + em_bc_caches[in->op];
            int back = off[t] < next;
            int op = in->op;
            if (back != em_bc_is_backward[op]) {
                if (em_bc_flip[op] < 0) {
                    PyErr_Format(PyExc_SystemError, "ember: %s cannot jump %s", em_bc_names[op],
                                 back ? "backward" : "forward");
                    return -1;
                }
                op = em_bc_flip[op];
            }
            int arg = back ? next - off[t] : off[t] - next;
            if (op != in->op || arg != in->arg) {
                if (ext_count((unsigned)arg) != ext_count((unsigned)in->arg)) changed = 1;
                in->op = op;
                in->arg = arg;
            }
        }
        if (!changed) {
            /* offsets are final only if a full pass left every size as it was */
            int at2 = 0;
            for (int32_t i = 0; i < n; i++) {
                if (off[i] != at2) changed = 1;
                at2 += ext_count((unsigned)A->ins.data[i].arg) + 1 + em_bc_caches[A->ins.data[i].op];
            }
            if (!changed) return 0;
        }
    }
    PyErr_SetString(PyExc_SystemError, "ember: jump layout did not converge");
    return -1;
}

static int put(EmStrBuf *b, unsigned char c) { return em_sb_putc(b, c); }

static int line_varint(EmStrBuf *b, unsigned v) {
    while (v >= 64) {
        if (put(b, (unsigned char)(64 | (v & 63)))) return -1;
        v >>= 6;
    }
    return put(b, (unsigned char)v);
}

static int exc_varint_put(EmStrBuf *b, unsigned v, int mark) {
    int shift = 0;
    while ((v >> shift) >= 64) shift += 6;
    for (; shift >= 0; shift -= 6) {
        unsigned char c = (unsigned char)((v >> shift) & 63);
        if (shift) c |= 64;
        if (mark) c |= 128, mark = 0;
        if (put(b, c)) return -1;
    }
    return 0;
}

int em_asm_is_terminal(int op) { return !!(em_bc_flags[op] & EMBCF_NO_FALLTHROUGH); }

static int stack_depth(EmAsm *A, int *out) {
    int32_t n = A->ins.len;
    int *depth = malloc(sizeof(int) * ((size_t)n + 1)), *work = malloc(sizeof(int) * ((size_t)n + 1) * 4);
    int nwork = 0, maxd = 0, rc = -1;
    if (!depth || !work) {
        PyErr_NoMemory();
        goto done;
    }
    for (int32_t i = 0; i <= n; i++) depth[i] = -1;
#define SEED(i, d)                                          \
    do {                                                    \
        int i_ = (i), d_ = (d);                             \
        EM_ASSERT(d_ >= 0, "stack depth %d at %d", d_, i_); \
        if (i_ < n && d_ > depth[i_]) {                     \
            depth[i_] = d_;                                 \
            if (nwork >= 4 * (n + 1)) goto overflow;        \
            work[nwork++] = i_;                             \
        }                                                   \
    } while (0)
    SEED(0, 0);
    for (int32_t k = 0; k < A->exc.len; k++) {
        EmAsmExc *e = &A->exc.data[k];
        SEED(A->labels.data[e->target], e->depth + e->lasti + 1);
    }
    while (nwork) {
        int i = work[--nwork], d = depth[i];
        if (d > maxd) maxd = d;
        EmAsmInstr *in = &A->ins.data[i];
        int op = in->op;
        if (op == EMBC_EXTENDED_ARG || op == EMBC_CACHE) continue;
        if (in->target >= 0) {
            int ej = PyCompile_OpcodeStackEffectWithJump(op, in->arg, 1);
            SEED(A->labels.data[in->target], d + ej);
            if (d + ej > maxd) maxd = d + ej;
        }
        if (!em_asm_is_terminal(op)) {
            int e = PyCompile_OpcodeStackEffectWithJump(op, in->arg, 0);
#ifdef EMBC_RETURN_GENERATOR
            if (op == EMBC_RETURN_GENERATOR) e = 1; /* the value sent in when it resumes */
#endif
            if (d + e > maxd) maxd = d + e;
            SEED(i + 1, d + e);
        }
    }
#undef SEED
    *out = maxd;
    rc = 0;
    goto done;
overflow:
    PyErr_SetString(PyExc_SystemError, "ember: stack depth analysis overflow");
done:
    free(depth);
    free(work);
    return rc;
}

EM_NEW PyObject *em_asm_build(EmAsm *A, PyCodeObject *co, PyObject *replace_kw, int firstlineno) {
    int32_t n = A->ins.len;
    int *off = malloc(sizeof(int) * ((size_t)n + 1)), *win = NULL;
    EmStrBuf code = {0}, lines = {0}, exc = {0};
    PyObject *kw = NULL, *res = NULL, *meth = NULL, *empty = NULL;
    if (!off) return PyErr_NoMemory();
    if (layout(A, off)) goto done;
    int prev_line = firstlineno;
    for (int32_t i = 0; i < n; i++) {
        EmAsmInstr *in = &A->ins.data[i];
        unsigned arg = (unsigned)in->arg;
        int ext = ext_count(arg);
        for (int k = ext; k >= 1; k--)
            if (put(&code, EMBC_EXTENDED_ARG) || put(&code, (unsigned char)((arg >> (8 * k)) & 255))) goto nomem;
        if (put(&code, (unsigned char)in->op) || put(&code, (unsigned char)(arg & 255))) goto nomem;
        for (int c = 0; c < em_bc_caches[in->op]; c++)
            if (put(&code, 0) || put(&code, 0)) goto nomem;
        /* line table: entries of at most 8 units */
        int units = ext + 1 + em_bc_caches[in->op];
        while (units > 0) {
            int len = units > 8 ? 8 : units;
            units -= len;
            if (in->line < 0) {
                if (put(&lines, (unsigned char)(0x80 | (15 << 3) | (len - 1)))) goto nomem;
            } else {
                int d = in->line - prev_line;
                unsigned zz = d < 0 ? ((unsigned)(-d) << 1) | 1 : (unsigned)d << 1;
                if (put(&lines, (unsigned char)(0x80 | (13 << 3) | (len - 1))) || line_varint(&lines, zz)) goto nomem;
                prev_line = in->line;
            }
        }
    }
    /* exception table: each instruction is covered by the first entry of A->exc that covers
     * it (entries may nest: an inner one is listed before the outer); CPython wants sorted,
     * disjoint ranges, written here as runs of instructions with the same entry */
    if (!(win = malloc(sizeof(int) * ((size_t)n + 1)))) goto nomem;
    for (int32_t i = 0; i < n; i++) win[i] = -1;
    for (int32_t k = 0; k < A->exc.len; k++) {
        EmAsmExc *e = &A->exc.data[k];
        for (int32_t i = A->labels.data[e->start]; i < A->labels.data[e->end] && i < n; i++)
            if (win[i] < 0) win[i] = k;
    }
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && win[j] == win[i]) j++;
        if (win[i] >= 0) {
            EmAsmExc *e = &A->exc.data[win[i]];
            int s = off[i], t = off[j], h = off[A->labels.data[e->target]];
            if (exc_varint_put(&exc, (unsigned)s, 1) || exc_varint_put(&exc, (unsigned)(t - s), 0) ||
                exc_varint_put(&exc, (unsigned)h, 0) || exc_varint_put(&exc, (unsigned)(e->depth << 1 | e->lasti), 0))
                goto nomem;
        }
        i = j;
    }
    int maxd;
    if (stack_depth(A, &maxd)) goto done;
    kw = replace_kw ? PyDict_Copy(replace_kw) : PyDict_New();
    if (!kw) goto done;
    PyObject *b1 = PyBytes_FromStringAndSize(code.s ? code.s : "", (Py_ssize_t)code.len);
    PyObject *b2 = PyBytes_FromStringAndSize(lines.s ? lines.s : "", (Py_ssize_t)lines.len);
    PyObject *b3 = PyBytes_FromStringAndSize(exc.s ? exc.s : "", (Py_ssize_t)exc.len);
    PyObject *sd = PyLong_FromLong(maxd), *fl = PyLong_FromLong(firstlineno);
    int bad = !b1 || !b2 || !b3 || !sd || !fl || PyDict_SetItemString(kw, "co_code", b1) ||
              PyDict_SetItemString(kw, "co_linetable", b2) || PyDict_SetItemString(kw, "co_exceptiontable", b3) ||
              PyDict_SetItemString(kw, "co_stacksize", sd) || PyDict_SetItemString(kw, "co_firstlineno", fl);
    Py_XDECREF(b1);
    Py_XDECREF(b2);
    Py_XDECREF(b3);
    Py_XDECREF(sd);
    Py_XDECREF(fl);
    if (bad) goto done;
    meth = PyObject_GetAttrString((PyObject *)co, "replace");
    empty = PyTuple_New(0);
    if (meth && empty) res = PyObject_Call(meth, empty, kw);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    free(off);
    free(win);
    em_sb_free(&code);
    em_sb_free(&lines);
    em_sb_free(&exc);
    Py_XDECREF(kw);
    Py_XDECREF(meth);
    Py_XDECREF(empty);
    return res;
}
