/* em_resume.c: code objects for graph breaks. The transformed code of the broken frame
 * rebuilds the stack and changed locals from the graph's values, runs the unsupported
 * instruction and calls the resume function; the resume function is the original code with a
 * prologue that pushes the saved stack and jumps to the instruction after the break.
 * Consumes an EmBreakPlan; produces code objects (built from the original by replace()).
 */
#include "../pyver/em_state.h"
#include "em_emit.h"

int em_exc_chain(PyCodeObject *co, int at, int *depths, int max, EmTry *t) {
    t->handler = -1;
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) {
        PyErr_Clear();
        return -1;
    }
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n_units = (int)(PyBytes_GET_SIZE(bytes) / 2), n = 0, u = at, rc = 0;
    for (;;) {
        int h, d, lasti, r = em_exc_entry(co, u, &h, &d, &lasti);
        if (r <= 0) {
            rc = r;
            break;
        }
        /* a with block's handler: PUSH_EXC_INFO, WITH_EXCEPT_START; a try block's: PUSH_EXC_INFO
         * then its except or finally code; anything else is the cleanup of an except clause */
        EmInstr a, b;
        if (h >= n_units || (em_decode(code, n_units, h, &a), a.op != EMBC_PUSH_EXC_INFO) || a.next >= n_units) {
            rc = -1;
            break;
        }
        em_decode(code, n_units, a.next, &b);
        if (b.op != EMBC_WITH_EXCEPT_START) {
            *t = (EmTry){.handler = h, .depth = d, .lasti = lasti};
            break;
        }
        /* the with handler is covered by its cleanup, whose own cover (if any) is the
         * enclosing block's handler */
        int cleanup, cd, cl;
        if (n == max || em_exc_entry(co, h, &cleanup, &cd, &cl) != 1) {
            rc = -1;
            break;
        }
        depths[n++] = d;
        u = cleanup;
    }
    Py_DECREF(bytes);
    return rc < 0 ? -1 : n;
}

int em_raise_cover(PyCodeObject *co, int at, int op) {
    int h, d, lasti;
    if (op != EMBC_RERAISE || em_exc_entry(co, at, &h, &d, &lasti) != 1) return at;
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) {
        PyErr_Clear();
        return at;
    }
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2), ok = h < n;
    EmInstr a, b, c;
    if (ok) em_decode(code, n, h, &a);
    ok = ok && a.op == EMBC_COPY && a.arg == 3 && a.next < n;
    if (ok) em_decode(code, n, a.next, &b);
    ok = ok && b.op == EMBC_POP_EXCEPT && b.next < n;
    if (ok) em_decode(code, n, b.next, &c);
    ok = ok && c.op == EMBC_RERAISE;
    Py_DECREF(bytes);
    return ok ? h : at;
}

static int has_class_cell(PyCodeObject *co) {
    for (int i = co->co_nlocalsplus - co->co_nfreevars; i < co->co_nlocalsplus; i++)
        if (!PyUnicode_CompareWithASCIIString(em_code_name(co, i), "__class__")) return 1;
    return 0;
}

/* Cell variables of co in slot order (arguments a closure captures included): fills
 * cells[0..] with their slots (when cells is not NULL) and returns their number. */
static int cell_slots(PyCodeObject *co, int *cells) {
    int n = 0;
    for (int i = 0; i < co->co_nlocalsplus - co->co_nfreevars; i++)
        if (em_code_kind(co, i) & EM_CO_FAST_CELL) {
            if (cells) cells[n] = i;
            n++;
        }
    return n;
}

int em_break_possible(PyCodeObject *co, int at, const EmRegion *R, const char **why) {
    /* zero-argument super() reads local 0, which the resume function's closure would hold */
    if (co->co_nlocalsplus > 0 && (em_code_kind(co, 0) & EM_CO_FAST_CELL) && has_class_cell(co)) {
        *why = "super() in a method whose first argument an inner function captures";
        return 0;
    }
    if (co->co_argcount == 0 && has_class_cell(co)) { /* there super() raises; a resume function has arguments */
        *why = "super() in a function without a first argument";
        return 0;
    }
    if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
        *why = "generator or coroutine";
        return 0;
    }
    int depths[EM_MAX_WITH];
    EmTry t;
    int cover = R ? R->cover : at;
    if (!R) {
        PyObject *cb = em_code_bytes(co);
        if (!cb) {
            PyErr_Clear();
            *why = "no code";
            return 0;
        }
        EmInstr xi;
        em_decode_op((const unsigned char *)PyBytes_AS_STRING(cb), (int)(PyBytes_GET_SIZE(cb) / 2), at, &xi);
        Py_DECREF(cb);
        cover = em_raise_cover(co, at, xi.op);
    }
    if (em_exc_chain(co, cover, depths, EM_MAX_WITH, &t) < 0) {
        *why = "inside an except clause, or blocks of unexpected shape";
        return 0;
    }
    /* inside a loop: control that leaves X (or the comprehension) can come back to it */
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) {
        PyErr_Clear();
        *why = "no code";
        return 0;
    }
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2), ok = 1, top = 0, h, d, lasti;
    char *seen = calloc((size_t)n + 1, 1);
    int *work = malloc(sizeof(int) * (3 * (size_t)n + 4));
    if (!seen || !work) {
        free(seen);
        free(work);
        Py_DECREF(bytes);
        *why = "out of memory";
        return 0;
    }
    EmInstr x;
    em_decode_op(code, n, at, &x); /* `at` is the opcode's unit: its EXTENDED_ARG prefixes count */
    int first = at; /* the instruction's first unit: a jump back to a prefix is a jump to it */
    while (first > 0 && code[2 * (first - 1)] == EMBC_EXTENDED_ARG) first--;
    int cu = R ? R->cover : first; /* a unit in the blocks around the region (a try's: its cleanup) */
    int lo = R && R->start < cu ? R->start : cu, hi = R ? R->end : x.next;
    if (R) {
        work[top++] = R->end;
    } else {
        if (!em_asm_is_terminal(x.op)) work[top++] = x.next;
        if (em_bc_is_jump[x.op]) work[top++] = em_jump_target(&x);
    }
    if (em_exc_entry(co, cu, &h, &d, &lasti) == 1) work[top++] = h;
    while (top && ok) {
        int u = work[--top];
        if (u < 0 || u >= n || seen[u]) continue;
        seen[u] = 1;
        if (u >= lo && u < hi) {
            *why = "inside a loop body";
            ok = 0;
            break;
        }
        EmInstr in;
        em_decode(code, n, u, &in);
        if (em_exc_entry(co, in.at, &h, &d, &lasti) == 1) work[top++] = h;
        if (em_bc_is_jump[in.op]) work[top++] = em_jump_target(&in);
        if (!em_asm_is_terminal(in.op)) work[top++] = in.next;
    }
    free(seen);
    free(work);
    Py_DECREF(bytes);
    return ok;
}

int em_comprehension_span(PyCodeObject *co, int at, EmRegion *R, const char **why) {
    memset(R, 0, sizeof(*R));
#ifdef EMBC_LOAD_FAST_AND_CLEAR
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) return -1;
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2), prev = -1, found = 0, saved[256], nsaved = 0;
    /* the outermost comprehension around `at`: each opens with a run of LOAD_FAST_AND_CLEAR
     * (the k names it saves), a SWAP, BUILD_LIST/SET/MAP 0, SWAP and its loop's FOR_ITER */
    for (int u = 0; u < n && !found;) {
        EmInstr in;
        em_decode(code, n, u, &in);
        if (in.op == EMBC_LOAD_FAST_AND_CLEAR && prev != EMBC_LOAD_FAST_AND_CLEAR && in.at <= at) {
            EmInstr x = in;
            int k = 0, steps = 0;
            while (x.op == EMBC_LOAD_FAST_AND_CLEAR && x.next < n && k < 256) {
                saved[k++] = x.arg;
                em_decode(code, n, x.next, &x);
            }
            while (x.op != EMBC_FOR_ITER && steps++ < 4 && x.next < n) em_decode(code, n, x.next, &x);
            if (x.op == EMBC_FOR_ITER && x.at <= at && at < em_for_iter_exit(&x)) {
                R->cover = in.at;
                R->start = x.at;
                R->end = em_for_iter_exit(&x);
                R->pops = 1; /* its iterator */
                nsaved = k;
                found = 1;
            }
        }
        prev = in.op;
        u = in.next;
    }
    int ok = 1;
    if (found) {
        /* handler blocks of the entries inside (not the block around the comprehension), each
         * running to its RERAISE without jumps; every local stored is one a comprehension saved */
        int outer = -1, d, lasti, h;
        if (em_exc_entry(co, R->cover, &outer, &d, &lasti) != 1) outer = -1;
        for (int u = R->start; u < R->end && ok;) {
            EmInstr in;
            em_decode(code, n, u, &in);
            if (in.op == EMBC_LOAD_FAST_AND_CLEAR && nsaved < 256) saved[nsaved++] = in.arg;
            if (em_exc_entry(co, in.at, &h, &d, &lasti) == 1 && h != outer && (h < R->start || h >= R->end)) {
                int known = 0;
                for (int j = 0; j < R->nspan; j++) known |= R->span[2 * j] == h;
                if (!known && R->nspan == EM_MAX_SPAN) ok = 0;
                int v = h;
                for (int steps = 0; ok && !known && v < n; steps++) {
                    EmInstr x;
                    em_decode(code, n, v, &x);
                    if (em_bc_is_jump[x.op] || steps > 64) ok = 0;
                    v = x.next;
                    if (x.op == EMBC_RERAISE) break;
                }
                if (ok && !known) {
                    R->span[2 * R->nspan] = h;
                    R->span[2 * R->nspan + 1] = v;
                    R->nspan++;
                }
            }
            u = in.next;
        }
        for (int r = -1; r < R->nspan && ok; r++) {
            int lo = r < 0 ? R->start : R->span[2 * r], hi = r < 0 ? R->end : R->span[2 * r + 1];
            for (int u = lo; u < hi && ok;) {
                EmInstr in;
                em_decode(code, n, u, &in);
                if (in.op == EMBC_STORE_FAST || in.op == EMBC_DELETE_FAST || in.op == EMBC_STORE_DEREF) {
                    int mine = 0;
                    for (int j = 0; j < nsaved; j++) mine |= saved[j] == in.arg;
                    if (!mine) {
                        ok = 0;
                        *why = "a comprehension that assigns a variable of the function (:=)";
                    }
                }
                u = in.next;
            }
        }
        if (!ok && !*why) *why = "a comprehension of unexpected shape";
    }
    Py_DECREF(bytes);
    if (!found || !ok) {
        R->nspan = 0;
        return 0;
    }
    return 1;
#else
    (void)co;
    (void)at;
    (void)why;
    return 0;
#endif
}

/* One pass of em_loop_span's walk: marks in `in` (units [head, n]) the code reachable from the
 * loop head without passing `end`, nor the handler `outer` of a block around the loop. 1 when
 * done, 2 when a jump from [head, end) leaves past end (the walk is redone to its target, set
 * in *end), 0 with *why for a shape that cannot run on its own. */
static int loop_walk(PyCodeObject *co, const unsigned char *code, int n, int head, int *end, int outer, char *in,
                     int *work, int *exits, const char **why) {
    int top = 0;
    memset(in, 0, (size_t)n + 1);
    *exits = 0;
    work[top++] = head;
    while (top) {
        int u = work[--top];
        if (u == *end) *exits = 1;
        if (u == *end || (u < n && in[u])) continue;
        if (u < head || u >= n) {
            *why = "a loop whose code jumps before its head";
            return 0;
        }
        EmInstr x;
        em_decode(code, n, u, &x);
        for (int v = u; v < x.next && v < n; v++) in[v] = 1;
        int h, d, lasti, e = em_exc_entry(co, x.at, &h, &d, &lasti);
        if (e < 0) {
            *why = "an exception table ember cannot read";
            return 0;
        }
        if (e && h != outer) work[top++] = h;
        if (em_bc_is_jump[x.op]) {
            int t = em_jump_target(&x);
            if (u < *end && t > *end) { /* a break past the loop's else clause */
                *end = t;
                return 2;
            }
            work[top++] = t;
        }
        if (!em_asm_is_terminal(x.op)) work[top++] = x.next;
    }
    return 1;
}

/* The blocks outside [R->start, R->end) that em_loop_span's walk reached, as R->span runs; each
 * must end in an instruction that does not fall through. 1, or 0 with *why. */
static int loop_spans(const unsigned char *code, int n, const char *in, EmRegion *R, const char **why) {
    for (int u = 0; u < n;) {
        if (!in[u] || (u >= R->start && u < R->end)) {
            u++;
            continue;
        }
        int a = u, last = -1;
        while (u < n && in[u] && !(u >= R->start && u < R->end)) {
            EmInstr x;
            em_decode(code, n, u, &x);
            last = x.op;
            u = x.next;
        }
        if (R->nspan == EM_MAX_SPAN || last < 0 || !em_asm_is_terminal(last)) {
            *why = R->nspan == EM_MAX_SPAN ? "a loop with too many handler blocks" : "a loop of unexpected shape";
            return 0;
        }
        R->span[2 * R->nspan] = a;
        R->span[2 * R->nspan + 1] = u;
        R->nspan++;
    }
    return 1;
}

/* 1 when the instruction at unit `to` is reached from unit `from` (falling through, jumping,
 * and through exception handlers); seen and work hold n + 1 and 3n + 4 entries. */
static int reaches(PyCodeObject *co, const unsigned char *code, int n, int from, int to, char *seen, int *work) {
    int top = 0;
    memset(seen, 0, (size_t)n + 1);
    work[top++] = from;
    while (top) {
        int u = work[--top];
        if (u < 0 || u >= n || seen[u]) continue;
        seen[u] = 1;
        EmInstr x;
        em_decode(code, n, u, &x);
        if (x.at == to) return 1;
        int h, d, lasti;
        if (em_exc_entry(co, x.at, &h, &d, &lasti) == 1) work[top++] = h;
        if (em_bc_is_jump[x.op]) work[top++] = em_jump_target(&x);
        if (!em_asm_is_terminal(x.op)) work[top++] = x.next;
    }
    return 0;
}

int em_loop_span(PyCodeObject *co, int at, EmRegion *R, const char **why) {
    memset(R, 0, sizeof(*R));
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) return -1;
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2), head = -1, end = -1, rc = 0;
    char *reach_seen = malloc((size_t)n + 1);
    int *reach_work = malloc(sizeof(int) * (3 * (size_t)n + 4));
    if (!reach_seen || !reach_work) {
        free(reach_seen);
        free(reach_work);
        Py_DECREF(bytes);
        PyErr_NoMemory();
        return -1;
    }
    for (int u = 0; u < n;) { /* the outermost loop: the lowest backward target at or before `at` */
        EmInstr x;
        em_decode(code, n, u, &x);
        if (em_bc_is_jump[x.op] && em_bc_is_backward[x.op]) {
            int t = em_jump_target(&x);
            /* a back edge the code from its target comes back to (3.12's handlers laid out at the
             * code's end jump back to where a try statement continues: no loop) */
            if (t <= at && at <= x.at && (head < 0 || t < head) &&
                reaches(co, code, n, t, x.at, reach_seen, reach_work)) {
                head = t;
                end = x.next;
            }
        }
        u = x.next;
    }
    /* `at` past every back edge around it: in a handler block laid out after the loop (3.12),
     * which the loop's walk reaches */
    for (int u = 0; u < n && at < n;) { /* the outermost: the lowest head */
        EmInstr x;
        em_decode(code, n, u, &x);
        if (em_bc_is_jump[x.op] && em_bc_is_backward[x.op] && x.at < at && (head < 0 || em_jump_target(&x) < head)) {
            int t = em_jump_target(&x), lend = x.next, ex = 0, out = -1, od, ol;
            if (em_exc_entry(co, t, &out, &od, &ol) != 1) out = -1;
            if (reaches(co, code, n, t, x.at, reach_seen, reach_work) &&
                loop_walk(co, code, n, t, &lend, out, reach_seen, reach_work, &ex, why) == 1 && reach_seen[at]) {
                head = t;
                end = x.next;
            }
            *why = NULL;
        }
        u = x.next;
    }
    free(reach_seen);
    free(reach_work);
    char *in = head >= 0 ? malloc((size_t)n + 1) : NULL;
    int *work = head >= 0 ? malloc(sizeof(int) * (3 * (size_t)n + 4)) : NULL;
    if (head < 0 || !in || !work) {
        if (head >= 0) rc = (PyErr_NoMemory(), -1);
        goto done;
    }
    EmInstr hx;
    em_decode(code, n, head, &hx);
    if (hx.op == EMBC_FOR_ITER && em_for_iter_exit(&hx) > end) end = em_for_iter_exit(&hx);
    int outer, d, lasti;
    if (em_exc_entry(co, hx.at, &outer, &d, &lasti) != 1) outer = -1;
    int walked = 2, exits = 0;
    for (int rounds = 0; walked == 2 && rounds < 64; rounds++)
        walked = loop_walk(co, code, n, head, &end, outer, in, work, &exits, why);
    if (walked != 1) {
        if (walked == 2) *why = "a loop of unexpected shape";
        goto done;
    }
    R->start = head; /* its EXTENDED_ARG prefixes, for the walk's marks; then its opcode's unit */
    R->end = end;
    R->loop = 1;
    R->exits = exits;
    R->pops = hx.op == EMBC_FOR_ITER;
    rc = loop_spans(code, n, in, R, why);
    R->start = R->cover = hx.at;
done:
    free(in);
    free(work);
    Py_DECREF(bytes);
    if (rc != 1) R->nspan = 0;
    return rc;
}

/* The unit where the handlers of the try block whose handler starts at h0 continue when one
 * completes: the target of the jump after a POP_EXCEPT (and the `as` name's deletion), found
 * walking the handler code from h0 (not its exception edges); -1 when none completes. */
static int try_join(const unsigned char *code, int n, int h0, char *seen, int *work) {
    int top = 0, join = -1;
    memset(seen, 0, (size_t)n + 1);
    work[top++] = h0;
    while (top && join < 0) {
        int u = work[--top];
        if (u < 0 || u >= n || seen[u]) continue;
        seen[u] = 1;
        EmInstr x;
        em_decode(code, n, u, &x);
        if (x.op == EMBC_POP_EXCEPT) { /* POP_EXCEPT [LOAD_CONST None, STORE_FAST e, DELETE_FAST e] jump */
            EmInstr y = x;
            for (int k = 0; k < 4 && y.next < n; k++) {
                em_decode(code, n, y.next, &y);
                if (y.op != EMBC_LOAD_CONST && y.op != EMBC_STORE_FAST && y.op != EMBC_DELETE_FAST) break;
            }
            if (em_bc_is_jump[y.op] && em_asm_is_terminal(y.op)) join = em_jump_target(&y);
            continue;
        }
        if (em_bc_is_jump[x.op]) work[top++] = em_jump_target(&x);
        if (!em_asm_is_terminal(x.op)) work[top++] = x.next;
    }
    return join;
}

int em_try_span(PyCodeObject *co, int at, EmRegion *R, const char **why) {
    memset(R, 0, sizeof(*R));
    int h, d, lasti, rc = 0;
    if (em_exc_entry(co, at, &h, &d, &lasti) != 1) return 0;
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) return -1;
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int n = (int)(PyBytes_GET_SIZE(bytes) / 2);
    char *in = malloc((size_t)n + 1);
    int *work = malloc(sizeof(int) * (3 * (size_t)n + 4));
    if (!in || !work) {
        rc = (PyErr_NoMemory(), -1);
        goto done;
    }
    /* the try statement whose handler code holds `at`: `at` is covered by the statement's
     * cleanup (COPY 3, POP_EXCEPT, RERAISE 1), directly or through the block that deletes an
     * `as` name (covered by the cleanup itself); its handler's PUSH_EXC_INFO is covered by that
     * cleanup too, and its protected range (the try block) by the handler */
    int head = -1, h0 = -1, join = -1, c = h;
    for (int k = 0; k < 4 && c >= 0; k++) {
        EmInstr a;
        if (c >= n) goto done;
        em_decode(code, n, c, &a);
        if (a.op == EMBC_PUSH_EXC_INFO) goto done; /* `at` is in a try block, not a handler */
        if (a.op == EMBC_COPY && a.arg == 3) break;
        int hc, dc, lc; /* a block deleting an `as` name: its own cover is the cleanup */
        c = em_exc_entry(co, c, &hc, &dc, &lc) == 1 ? hc : -1;
    }
    for (int u = 0; u < n && c >= 0 && h0 < 0;) {
        EmInstr x;
        em_decode(code, n, u, &x);
        int hx, dx, lx;
        if (x.op == EMBC_PUSH_EXC_INFO && em_exc_entry(co, x.at, &hx, &dx, &lx) == 1 && hx == c) h0 = x.at;
        u = x.next;
    }
    int bend = -1; /* the first unit after the try block's last */
    for (int u = 0; u < n && h0 >= 0;) {
        EmInstr x;
        em_decode(code, n, u, &x);
        int hx, dx, lx;
        if (em_exc_entry(co, x.at, &hx, &dx, &lx) == 1 && hx == h0) {
            if (head < 0) head = x.at;
            bend = x.next;
        }
        u = x.next;
    }
    if (head <= 0 || bend < 0 || bend >= n) goto done;
    *why = "an except clause of a try statement of unexpected shape";
    join = try_join(code, n, h0, in, work);
    if (join < 0 && bend != h0) { /* no handler completes: where the try block's own path goes on */
        EmInstr b; /* (a return whose value the block computes ends it: no statement boundary) */
        em_decode(code, n, bend, &b);
        int jump = em_bc_is_jump[b.op] && em_asm_is_terminal(b.op);
        join = jump ? em_jump_target(&b) : em_asm_is_terminal(b.op) ? -1 : b.at;
    }
    if (join < 0) join = n; /* every path returns or raises: the region runs to the code's end */
    /* the blocks around the statement: those its cleanup reports to (the region's cover), whose
     * handler the walk leaves out */
    int outer, od, ol;
    int eo = em_exc_entry(co, c, &outer, &od, &ol);
    if (eo < 0) goto done;
    if (eo == 0) outer = -1;
    int cover = c, start = head, pops = 0;
    if (!reaches(co, code, n, 0, head, in, work)) {
        /* a resume function entered at the handler (the exception came through a graph break in
         * the try block): it never reaches the try block, so the region starts at the handler,
         * the exception (and a lasti) on the stack. Laid out after the join point (3.12's cold
         * handler blocks), its code is all spans: [start, end) is empty, and jumps to the join
         * point leave the region */
        int hh, dh, lh;
        if (em_exc_entry(co, head, &hh, &dh, &lh) != 1) goto done;
        start = h0;
        pops = 1 + !!lh;
    }
    int end = join, walked = 2, exits = 0;
    for (int rounds = 0; walked == 2 && rounds < 64; rounds++)
        walked = loop_walk(co, code, n, start, &end, outer, in, work, &exits, why);
    if (walked != 1) goto done;
    R->start = start;
    R->pops = pops;
    R->end = end;
    R->loop = R->is_try = 1; /* the function's own code: the locals it assigns are handed on as a loop's */
    R->exits = exits;
    rc = loop_spans(code, n, in, R, why);
    R->cover = cover;
    if (rc == 1) *why = NULL;
done:
    free(in);
    free(work);
    Py_DECREF(bytes);
    if (rc != 1) R->nspan = 0;
    return rc;
}

void em_region_stores(PyCodeObject *co, const EmRegion *R, char *stored, char *deleted, int n) {
    memset(stored, 0, (size_t)n);
    memset(deleted, 0, (size_t)n);
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) {
        PyErr_Clear();
        memset(stored, 1, (size_t)n);
        memset(deleted, 1, (size_t)n);
        return;
    }
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int units = (int)(PyBytes_GET_SIZE(bytes) / 2);
    for (int r = -1; r < R->nspan; r++) {
        int lo = r < 0 ? R->start : R->span[2 * r], hi = r < 0 ? R->end : R->span[2 * r + 1];
        for (int u = lo; u < hi && u < units;) {
            EmInstr x;
            em_decode(code, units, u, &x);
            if ((x.op == EMBC_STORE_FAST || x.op == EMBC_STORE_DEREF) && x.arg < n) stored[x.arg] = 1;
            if ((x.op == EMBC_DELETE_FAST || x.op == EMBC_DELETE_DEREF) && x.arg < n) deleted[x.arg] = 1;
            u = x.next;
        }
    }
    Py_DECREF(bytes);
}

uint64_t em_region_cells(PyCodeObject *co, const EmRegion *R) {
    PyObject *bytes = em_code_bytes(co);
    if (!bytes) {
        PyErr_Clear();
        return ~(uint64_t)0;
    }
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(bytes);
    int units = (int)(PyBytes_GET_SIZE(bytes) / 2);
    uint64_t cells = 0;
    for (int r = -1; r < R->nspan; r++) {
        int lo = r < 0 ? R->start : R->span[2 * r], hi = r < 0 ? R->end : R->span[2 * r + 1];
        for (int u = lo; u < hi && u < units;) {
            EmInstr x;
            em_decode(code, units, u, &x);
            if (x.op == EMBC_STORE_DEREF || x.op == EMBC_DELETE_DEREF || x.op == EMBC_LOAD_CLOSURE)
                cells |= x.arg < 64 ? (uint64_t)1 << x.arg : ~(uint64_t)0;
            u = x.next;
        }
    }
    Py_DECREF(bytes);
    return cells;
}

static int n_arg_slots(PyCodeObject *co) {
    return co->co_argcount + co->co_kwonlyargcount + !!(co->co_flags & CO_VARARGS) + !!(co->co_flags & CO_VARKEYWORDS);
}

static EM_NEW PyObject *tuple_append(PyObject *t, PyObject *v, int *index) {
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    PyObject *r = PyTuple_New(n + 1);
    if (!r) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(r, i, Py_NewRef(PyTuple_GET_ITEM(t, i)));
    PyTuple_SET_ITEM(r, n, Py_NewRef(v));
    *index = (int)n;
    return r;
}

/* Adds v to the consts tuple *consts (replacing it), returning its index, or -1. */
static int add_const(PyObject **consts, PyObject *v) {
    int idx;
    PyObject *r = tuple_append(*consts, v, &idx);
    if (!r) return -1;
    Py_SETREF(*consts, r);
    return idx;
}

static int add_int_const(PyObject **consts, long v) {
    PyObject *o = PyLong_FromLong(v);
    if (!o) return -1;
    int r = add_const(consts, o);
    Py_DECREF(o);
    return r;
}

/* The transformed code being assembled: its locals are co's with __ember_vals after the
 * arguments and ntemps temporaries after the locals (cells and free variables after those). */
typedef struct {
    EmAsm A;
    PyObject *consts; /* co's constants and those added (owned) */
    int line, nargs, nlocals, ntemps, nslots, nfree, ncell;
    int *cells; /* slots of co's cell variables */
} Tx;

static int tx_op(Tx *x, int op, int arg) { return em_asm_op(&x->A, op, arg, x->line); }
static int tx_slot(const Tx *x, int i) { return i < x->nargs ? i : i < x->nlocals ? i + 1 : i + 1 + x->ntemps; }
static int tx_temp(const Tx *x, int t) { return x->nlocals + 1 + t; }
static int tx_const(Tx *x, PyObject *v) { return add_const(&x->consts, v); }

#ifdef EMBC_LOAD_FAST_CHECK
#define EM_LOAD_CHECKED EMBC_LOAD_FAST_CHECK
#else
#define EM_LOAD_CHECKED EMBC_LOAD_FAST
#endif
#ifdef EMBC_POP_JUMP_FORWARD_IF_FALSE
#define EM_JUMP_IF_FALSE EMBC_POP_JUMP_FORWARD_IF_FALSE
#else
#define EM_JUMP_IF_FALSE EMBC_POP_JUMP_IF_FALSE
#endif

/* Pushes local `slot`, or em_state.unbound when it is unbound: the checked load under an
 * exception entry (stack depth `depth` below it) whose handler drops the UnboundLocalError. */
static int tx_load_maybe(Tx *x, int slot, int depth) {
    EmAsm *A = &x->A;
    int s = em_asm_label(A), e = em_asm_label(A), h = em_asm_label(A), join = em_asm_label(A);
    int k = tx_const(x, em_state.unbound);
    if (s < 0 || e < 0 || h < 0 || join < 0 || k < 0) return -1;
    EmAsmExc entry = {.start = s, .end = e, .target = h, .depth = depth, .lasti = 0};
    if (em_vec_push(&A->exc, entry)) return PyErr_NoMemory(), -1;
    em_asm_place(A, s);
    if (tx_op(x, EM_LOAD_CHECKED, slot)) return -1;
    em_asm_place(A, e);
    if (em_asm_jump(A, EMBC_JUMP_FORWARD, join, x->line)) return -1;
    em_asm_place(A, h);
    if (tx_op(x, EMBC_POP_TOP, 0) || tx_op(x, EMBC_LOAD_CONST, k)) return -1;
    em_asm_place(A, join);
    return 0;
}

/* Returns r(*live_locals, *stack) from the code placed here, the stack being the top `depth`
 * slots (NULLs, flagged in nulls, left out: the resume function pushes them). r is the
 * resume function, or its code, made into a function over the frame's cells and free
 * variables. 0, or -1 with an exception. */
static int tx_call_resume(Tx *x, const EmBreakPlan *plan, int depth, const uint8_t *nulls, PyObject *r) {
    int nvals = 0, k;
    for (int t = depth - 1; t >= 0; t--) {
        if (nulls[t]) { /* a NULL can only be consumed by a call: tuple() */
            if ((k = tx_const(x, (PyObject *)&PyTuple_Type)) < 0 || tx_op(x, EMBC_LOAD_CONST, k)) return -1;
#ifdef EMBC_PRECALL
            if (tx_op(x, EMBC_PRECALL, 0)) return -1;
#endif
            if (tx_op(x, EMBC_CALL, 0) || tx_op(x, EMBC_POP_TOP, 0)) return -1;
        } else {
            if (tx_op(x, EMBC_STORE_FAST, tx_temp(x, t))) return -1;
            nvals++;
        }
    }
    for (int j = 0; j < plan->nlive; j++)
        if (plan->maybe && plan->maybe[j] ? tx_load_maybe(x, tx_slot(x, plan->live[j]), j)
                                          : tx_op(x, EMBC_LOAD_FAST, tx_slot(x, plan->live[j])))
            return -1;
    if (tx_op(x, EMBC_BUILD_TUPLE, plan->nlive)) return -1;
    if (nvals) {
        for (int t = 0; t < depth; t++)
            if (!nulls[t] && tx_op(x, EMBC_LOAD_FAST, tx_temp(x, t))) return -1;
        if (tx_op(x, EMBC_BUILD_TUPLE, nvals) || tx_op(x, EMBC_BINARY_OP, 0)) return -1; /* + : concatenation */
    }
    if (tx_op(x, EMBC_PUSH_NULL, 0) || tx_op(x, EMBC_SWAP, 2) || (k = tx_const(x, r)) < 0) return -1;
    if (x->ncell + x->nfree) { /* the resume function's closure: the cells, then the free variables */
        int n = 0;
        for (int c = 0; c < x->ncell; c++, n++) {
            if (x->cells[c] < 64 && ((plan->priv >> x->cells[c]) & 1)) { /* its own cell */
                n--;
                continue;
            }
            if (tx_op(x, EMBC_LOAD_CLOSURE, tx_slot(x, x->cells[c]))) return -1;
        }
        for (int f = 0; f < x->nfree; f++, n++)
            if (tx_op(x, EMBC_LOAD_CLOSURE, tx_slot(x, x->nslots + f))) return -1;
        if (tx_op(x, EMBC_BUILD_TUPLE, n) || tx_op(x, EMBC_LOAD_CONST, k) || tx_op(x, EMBC_MAKE_FUNCTION, 8)) return -1;
    } else if (tx_op(x, EMBC_LOAD_CONST, k)) {
        return -1;
    }
    return tx_op(x, EMBC_SWAP, 2) || tx_op(x, EMBC_CALL_FUNCTION_EX, 0) || tx_op(x, EMBC_RETURN_VALUE, 0) ? -1 : 0;
}

/* The prologue: the frame's cells made, the stack and the changed locals rebuilt from
 * __ember_vals, KW_NAMES/PRECALL of a CALL at X. 0 or -1. */
static int tx_prologue(Tx *x, const EmBreakPlan *plan) {
    for (int c = 0; c < x->ncell; c++)
        if (tx_op(x, EMBC_MAKE_CELL, tx_slot(x, x->cells[c]))) return -1;
    if ((x->nfree && tx_op(x, EMBC_COPY_FREE_VARS, x->nfree)) || tx_op(x, EMBC_RESUME, 0) ||
        tx_op(x, EMBC_LOAD_FAST, x->nargs)) /* __ember_vals: the argument after the original ones */
        return -1;
    for (int s = 0; s < plan->nstack; s++) {
        int k = plan->stack_val[s] < 0 ? 0 : add_int_const(&x->consts, plan->stack_val[s]);
        if (k < 0) return -1;
        if (plan->stack_val[s] < 0
                ? tx_op(x, EMBC_PUSH_NULL, 0)
                : tx_op(x, EMBC_COPY, 1) || tx_op(x, EMBC_LOAD_CONST, k) || tx_op(x, EMBC_BINARY_SUBSCR, 0))
            return -1;
        if (tx_op(x, EMBC_SWAP, 2)) return -1;
    }
    for (int j = 0; j < plan->nstore; j++) {
        int k = add_int_const(&x->consts, plan->store_val[j]);
        if (k < 0 || tx_op(x, EMBC_COPY, 1) || tx_op(x, EMBC_LOAD_CONST, k) || tx_op(x, EMBC_BINARY_SUBSCR, 0) ||
            tx_op(x, EMBC_STORE_FAST, tx_slot(x, plan->store_local[j])))
            return -1;
    }
    if (tx_op(x, EMBC_POP_TOP, 0)) return -1;
#ifdef EMBC_KW_NAMES
    if (plan->kw_const >= 0 && tx_op(x, EMBC_KW_NAMES, plan->kw_const)) return -1;
#endif
#ifdef EMBC_PRECALL
    if (plan->op == EMBC_CALL && tx_op(x, EMBC_PRECALL, plan->arg)) return -1;
#endif
    return 0;
}

/* X itself between labels xs and xe; *branch: for a conditional jump, the label of its target. */
static int tx_x(Tx *x, PyCodeObject *co, const EmBreakPlan *plan, int cond, int *branch) {
    EmAsm *A = &x->A;
    if (cond) { /* X is a conditional jump on a value: each side continues in its own resume */
        return (*branch = em_asm_label(A)) < 0 || em_asm_jump(A, plan->op, *branch, x->line) ? -1 : 0;
    }
    if (plan->region) { /* a whole comprehension: its handler blocks first (jumped over), then its code */
        int body = em_asm_label(A), first = A->ins.len + 1;
        int ranges[2 * (EM_MAX_SPAN + 1)];
        if (body < 0 || em_asm_jump(A, EMBC_JUMP_FORWARD, body, x->line)) return -1;
        for (int r = 0; r < plan->nspan; r++) {
            ranges[2 * r] = plan->span[2 * r];
            ranges[2 * r + 1] = plan->span[2 * r + 1];
        }
        ranges[2 * plan->nspan] = plan->at;
        ranges[2 * plan->nspan + 1] = plan->next;
        if (em_asm_decode_ranges(A, co, ranges, plan->nspan + 1)) return -1;
        for (int32_t i = first; i < A->ins.len; i++) {
            EmAsmInstr *ci = &A->ins.data[i];
            if (ci->orig == plan->at) A->labels.data[body] = i;
            if (em_bc_has_local[ci->op]) ci->arg = tx_slot(x, ci->arg);
        }
        return 0;
    }
    if (em_bc_has_local[plan->op]) return tx_op(x, plan->op, tx_slot(x, plan->arg));
    if (plan->op == EMBC_RERAISE) return tx_op(x, EMBC_RERAISE, 0); /* its lasti is the original code's */
    if (em_is_method_load(plan->op, plan->arg)) { /* always (NULL, bound method): the NULL is known */
        int op = plan->op, arg = plan->arg;
        em_plain_attr_load(&op, &arg);
        return tx_op(x, op, arg) || tx_op(x, EMBC_PUSH_NULL, 0) || tx_op(x, EMBC_SWAP, 2) ? -1 : 0;
    }
    return tx_op(x, plan->op, plan->arg);
}

/* An exception X raises inside the frame's open with blocks runs their __exit__ (handlers
 * innermost first, as CPython lays them out; the contexts ember traces never suppress an
 * exception, so __exit__'s answer is dropped), then, inside a try block, continues at the
 * block's handler in rexc (with the stack below it, a lasti when it takes one, and the
 * exception). 0 or -1. */
static int tx_handlers(Tx *x, const EmBreakPlan *plan, const int *depths, int nwith, int xs, int xe, PyObject *rexc) {
    EmAsm *A = &x->A;
    int cover_s = xs, cover_e = xe;
    for (int k = 0; k < nwith; k++) {
        int h = em_asm_label(A), c = em_asm_label(A), ce = em_asm_label(A);
        if (h < 0 || c < 0 || ce < 0) return -1;
        EmAsmExc body = {.start = cover_s, .end = cover_e, .target = h, .depth = depths[k], .lasti = 1};
        EmAsmExc hand = {.start = h, .end = c, .target = c, .depth = depths[k] + 2, .lasti = 1};
        if (em_vec_push(&A->exc, body) || em_vec_push(&A->exc, hand)) return PyErr_NoMemory(), -1;
        em_asm_place(A, h);
        if (tx_op(x, EMBC_PUSH_EXC_INFO, 0) || tx_op(x, EMBC_WITH_EXCEPT_START, 0) || tx_op(x, EMBC_POP_TOP, 0) ||
            tx_op(x, EMBC_RERAISE, 2))
            return -1;
        em_asm_place(A, c);
        if (tx_op(x, EMBC_COPY, 3) || tx_op(x, EMBC_POP_EXCEPT, 0) || tx_op(x, EMBC_RERAISE, 1)) return -1;
        em_asm_place(A, ce);
        cover_s = c; /* the cleanup is covered by the enclosing block's handler */
        cover_e = ce;
    }
    if (!rexc) return 0;
    int d = plan->try_.depth, lasti = !!plan->try_.lasti, n = d + lasti + 1, h = em_asm_label(A), rc = -1;
    uint8_t *nulls = calloc((size_t)n + 1, 1); /* the exception path's NULLs: those below the try block */
    EmAsmExc to = {.start = cover_s, .end = cover_e, .target = h, .depth = d, .lasti = 0};
    if (h < 0 || !nulls || em_vec_push(&A->exc, to)) {
        free(nulls);
        return PyErr_NoMemory(), -1;
    }
    for (int t = 0; t < d && t < plan->nstack; t++) nulls[t] = plan->stack_val[t] < 0;
    em_asm_place(A, h); /* the stack below the try block, the exception */
    int zero = lasti ? add_int_const(&x->consts, 0) : 0; /* the handler's lasti: unit 0 of the resume
                                                          * function, which has X's line */
    if (zero >= 0 && (!lasti || !(tx_op(x, EMBC_LOAD_CONST, zero) || tx_op(x, EMBC_SWAP, 2))))
        rc = tx_call_resume(x, plan, n, nulls, rexc);
    free(nulls);
    return rc;
}

/* varnames: the original ones with __ember_vals after the arguments, then temporaries. */
static EM_NEW PyObject *tx_varnames(PyCodeObject *co, int nargs, int ntemps) {
    PyObject *orig = PyCode_GetVarnames(co), *varnames = NULL;
    if (!orig) return NULL;
    Py_ssize_t nv = PyTuple_GET_SIZE(orig);
    varnames = PyTuple_New(nv + 1 + ntemps);
    for (Py_ssize_t i = 0, o = 0; varnames && i < nv + 1 + ntemps; i++) {
        PyObject *name = i == nargs ? PyUnicode_FromString("__ember_vals")
                         : i > nv   ? PyUnicode_FromFormat("__ember_t%zd", i - nv - 1)
                                    : Py_NewRef(PyTuple_GET_ITEM(orig, o++));
        if (!name) Py_CLEAR(varnames);
        else PyTuple_SET_ITEM(varnames, i, name);
    }
    Py_DECREF(orig);
    return varnames;
}

#define FLAGS_NO_STAR(f) ((f) & ~(CO_VARARGS | CO_VARKEYWORDS))

EM_NEW PyObject *em_emit_transformed(PyCodeObject *co, const EmBreakPlan *plan, PyObject *resume, PyObject *resume2,
                                     PyObject *rexc) {
    Tx x = {.line = plan->line, .nargs = n_arg_slots(co), .nfree = co->co_nfreevars, .nlocals = co->co_nlocals};
    em_asm_init(&x.A);
    x.nslots = co->co_nlocalsplus - x.nfree;
    x.ncell = cell_slots(co, NULL);
    x.cells = malloc(sizeof(int) * ((size_t)x.ncell + 1));
    /* temporaries that take the stack apart after X (or below the try block, the exception) */
    x.ntemps = plan->stack_after > plan->try_.depth + 2 ? plan->stack_after : plan->try_.depth + 2;
    x.consts = Py_NewRef(co->co_consts);
    PyObject *varnames = NULL, *kw = NULL, *res = NULL;
    int depths[EM_MAX_WITH], branch = -1, xs = em_asm_label(&x.A), xe = em_asm_label(&x.A);
    EmTry t;
    int nwith = em_exc_chain(co, plan->region ? plan->cover : em_raise_cover(co, plan->at, plan->op), depths,
                             EM_MAX_WITH, &t);
    if (!x.cells || xs < 0 || xe < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    if (nwith < 0 || (t.handler >= 0) != !!rexc) {
        PyErr_SetString(PyExc_SystemError, "ember: a break inside blocks it cannot leave");
        goto done;
    }
    cell_slots(co, x.cells);
    if (tx_prologue(&x, plan)) goto done;
    em_asm_place(&x.A, xs);
    if (tx_x(&x, co, plan, !!resume2, &branch)) goto done;
    em_asm_place(&x.A, xe);
    if (!resume) { /* a loop that only returns or raises: nothing runs after it */
        int none = tx_const(&x, Py_None);
        if (none < 0 || tx_op(&x, EMBC_LOAD_CONST, none) || tx_op(&x, EMBC_RETURN_VALUE, 0)) goto done;
    }
    for (int side = 0; resume && side < (resume2 ? 2 : 1); side++) {
        if (side) em_asm_place(&x.A, branch);
        if (tx_call_resume(&x, plan, plan->stack_after, plan->after_null, side ? resume2 : resume)) goto done;
    }
    if (tx_handlers(&x, plan, depths, nwith, xs, xe, rexc)) goto done;
    if (!(varnames = tx_varnames(co, x.nargs, x.ntemps))) goto done;
    kw = Py_BuildValue("{s:O,s:O,s:i,s:i,s:i,s:i,s:i}", "co_consts", x.consts, "co_varnames", varnames, "co_argcount",
                       x.nargs + 1, "co_posonlyargcount", 0, "co_kwonlyargcount", 0, "co_flags",
                       FLAGS_NO_STAR(co->co_flags), "co_nlocals", (int)PyTuple_GET_SIZE(varnames));
    if (kw) res = em_asm_build(&x.A, co, kw, co->co_firstlineno);
done:
    if (!res && !PyErr_Occurred()) PyErr_NoMemory();
    em_asm_free(&x.A);
    free(x.cells);
    Py_XDECREF(x.consts);
    Py_XDECREF(varnames);
    Py_XDECREF(kw);
    return res;
}

#define OP(op, arg)                                       \
    do {                                                  \
        if (em_asm_op(&A, (op), (arg), line)) goto nomem; \
    } while (0)

EM_NEW PyObject *em_emit_resume(PyCodeObject *co, const EmBreakPlan *plan, int resume_at) {
    PyObject *bytes = PyCode_GetCode(co);
    if (!bytes) return NULL;
    /* a point given at an instruction's EXTENDED_ARG prefix (after a call, a long jump): the
     * decoded instruction is named by its opcode's unit */
    while ((Py_ssize_t)resume_at * 2 + 1 < PyBytes_GET_SIZE(bytes) &&
           (unsigned char)PyBytes_AS_STRING(bytes)[2 * resume_at] == EMBC_EXTENDED_ARG)
        resume_at++;
    Py_DECREF(bytes);
    EmAsm A;
    em_asm_init(&A);
    int line = plan->line, nfree = co->co_nfreevars, nlocals = co->co_nlocals, nplus = co->co_nlocalsplus;
    int ncell = cell_slots(co, NULL), ncellarg = 0, npriv = 0;
    for (int i = 0; i < nplus && i < 64; i++) npriv += (int)((plan->priv >> i) & 1);
    int m = 0; /* stack values passed as arguments: the NULLs are pushed by the prologue */
    for (int t = 0; t < plan->stack_after; t++) m += !plan->after_null[t];
    for (int i = 0; i < nlocals; i++) ncellarg += !!(em_code_kind(co, i) & EM_CO_FAST_CELL);
    int nnew = m + nlocals - ncellarg;
    int *map = malloc(sizeof(int) * ((size_t)nplus + 1));
    PyObject *varnames = PyTuple_New(nnew), *freevars = PyTuple_New(ncell - npriv + nfree);
    PyObject *cellvars = PyTuple_New(npriv), *kw = NULL, *res = NULL, *name = NULL, *qual = NULL;
    if (!map || !varnames || !freevars || !cellvars) {
        if (!map) PyErr_NoMemory();
        goto done;
    }
    /* varnames: the live locals (in their order, so a live local 0 stays local 0, which
     * zero-argument super() reads), then the stack values, then the other locals; the cells
     * of its own (plan->priv), then the frame's other cells and its free variables, which
     * are the free variables */
    for (int i = 0; i < nplus; i++) map[i] = -1;
    int at = 0;
    for (int j = 0; j < plan->nlive; j++) map[plan->live[j]] = at++;
    for (int t = 0; t < m; t++, at++) {
        PyObject *nm = PyUnicode_FromFormat("__ember_stack%d", t);
        if (!nm) goto done;
        PyTuple_SET_ITEM(varnames, at, nm);
    }
    for (int i = 0, f = 0, p = 0; i < nplus; i++) {
        int kind = em_code_kind(co, i);
        if (i < 64 && ((plan->priv >> i) & 1)) {
            map[i] = nnew + p;
            PyTuple_SET_ITEM(cellvars, p++, Py_NewRef(em_code_name(co, i)));
        } else if (kind & (EM_CO_FAST_CELL | EM_CO_FAST_FREE)) {
            map[i] = nnew + npriv + f;
            PyTuple_SET_ITEM(freevars, f++, Py_NewRef(em_code_name(co, i)));
        } else if (map[i] < 0) {
            map[i] = at++;
        }
        if (i < nlocals && !(kind & EM_CO_FAST_CELL))
            PyTuple_SET_ITEM(varnames, map[i], Py_NewRef(em_code_name(co, i)));
    }
    /* prologue */
    int body = em_asm_label(&A);
    if (body < 0) goto nomem;
    for (int p = 0; p < npriv; p++) OP(EMBC_MAKE_CELL, nnew + p);
    if (ncell - npriv + nfree) OP(EMBC_COPY_FREE_VARS, ncell - npriv + nfree);
    if (co->co_flags & CO_GENERATOR) { /* made into a generator at its call, which runs on from here */
        OP(EMBC_RETURN_GENERATOR, 0);
        OP(EMBC_POP_TOP, 0);
    }
    OP(EMBC_RESUME, 0);
    int nconsts = (int)PyTuple_GET_SIZE(co->co_consts), maybe = 0; /* the unbound marker: a const after co's */
    for (int j = 0; plan->maybe && j < plan->nlive; j++) { /* a local passed as unbound: deleted */
        if (!plan->maybe[j]) continue;
        int skip = em_asm_label(&A);
        if (skip < 0) goto nomem;
        maybe = 1;
        OP(EMBC_LOAD_FAST, j);
        OP(EMBC_LOAD_CONST, nconsts);
        OP(EMBC_IS_OP, 0);
        if (em_asm_jump(&A, EM_JUMP_IF_FALSE, skip, line)) goto nomem;
        OP(EMBC_DELETE_FAST, j);
        em_asm_place(&A, skip);
    }
    for (int t = 0, a = 0; t < plan->stack_after; t++) {
        if (plan->after_null[t]) OP(EMBC_PUSH_NULL, 0);
        else OP(EMBC_LOAD_FAST, plan->nlive + a++);
    }
    if (em_asm_jump(&A, EMBC_JUMP_FORWARD, body, line)) goto nomem;
    /* the original instructions, locals renumbered */
    int first = A.ins.len;
    if (em_asm_decode(&A, co)) goto done;
    for (int32_t i = first; i < A.ins.len; i++) {
        EmAsmInstr *in = &A.ins.data[i];
        if (in->orig == resume_at) A.labels.data[body] = i;
        if (em_bc_has_local[in->op]) in->arg = map[in->arg];
    }
    if (A.labels.data[body] < first) {
        PyErr_SetString(PyExc_SystemError, "ember: resume point not found");
        goto done;
    }
    int rline = PyCode_Addr2Line(co, resume_at * 2);
    name = PyUnicode_FromFormat("__resume_%U_at_%d", co->co_name, rline > 0 ? rline : plan->line);
    qual = PyUnicode_FromFormat("%U.__resume_at_%d", co->co_qualname, rline > 0 ? rline : plan->line);
    if (!name || !qual) goto done;
    kw = Py_BuildValue("{s:O,s:O,s:O,s:i,s:i,s:i,s:i,s:O,s:O,s:i}", "co_varnames", varnames, "co_freevars", freevars,
                       "co_cellvars", cellvars, "co_argcount", m + plan->nlive, "co_posonlyargcount", 0,
                       "co_kwonlyargcount", 0, "co_flags", FLAGS_NO_STAR(co->co_flags), "co_name", name, "co_qualname",
                       qual, "co_nlocals", nnew);
    if (kw && maybe) {
        PyObject *consts = PyTuple_New(nconsts + 1);
        for (int i = 0; consts && i < nconsts; i++)
            PyTuple_SET_ITEM(consts, i, Py_NewRef(PyTuple_GET_ITEM(co->co_consts, i)));
        if (consts) PyTuple_SET_ITEM(consts, nconsts, Py_NewRef(em_state.unbound));
        if (!consts || PyDict_SetItemString(kw, "co_consts", consts)) Py_CLEAR(kw);
        Py_XDECREF(consts);
    }
    if (kw) res = em_asm_build(&A, co, kw, co->co_firstlineno);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    em_asm_free(&A);
    free(map);
    Py_XDECREF(varnames);
    Py_XDECREF(freevars);
    Py_XDECREF(cellvars);
    Py_XDECREF(kw);
    Py_XDECREF(name);
    Py_XDECREF(qual);
    return res;
}

EM_NEW PyObject *em_emit_gen_resume(PyObject *spec) {
    PyObject *code, *live, *nulls;
    int at, line;
    if (!PyArg_ParseTuple(spec, "O!iO!O!i", &PyCode_Type, &code, &at, &PyTuple_Type, &live, &PyBytes_Type, &nulls,
                          &line))
        return NULL;
    Py_ssize_t nlive = PyTuple_GET_SIZE(live);
    int *slots = malloc(sizeof(int) * ((size_t)nlive + 1));
    if (!slots) return PyErr_NoMemory();
    for (Py_ssize_t j = 0; j < nlive; j++) slots[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(live, j));
    EmBreakPlan plan = {.nlive = (int)nlive,
                        .live = slots,
                        .stack_after = (int)PyBytes_GET_SIZE(nulls),
                        .after_null = (uint8_t *)PyBytes_AS_STRING(nulls),
                        .line = line,
                        .jump_to = -1,
                        .kw_const = -1};
    PyObject *r = PyErr_Occurred() ? NULL : em_emit_resume((PyCodeObject *)code, &plan, at);
    free(slots);
    return r;
}
