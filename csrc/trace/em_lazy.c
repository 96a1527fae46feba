/* em_lazy.c: lazy iterators. A generator made while tracing keeps its frame, suspended at its
 * last yield, and runs on to the next one when an item is taken, so its body interleaves with
 * its consumer as in Python (a generator that reads a variable the consumer changes sees the
 * change). map(), filter(), itertools.count() and zip()/enumerate() over a lazy iterator make
 * an item when one is taken, calling their function then. Items made are appended to the ITER
 * sym's items, so a consumer that takes everything (em_iter_use) runs the producer to its end
 * and then reads a plain iterator.
 */
#include "em_rec.h"

#include "../pyver/em_state.h"

#define EM_LAZY_MAX_ITEMS 65536 /* an infinite iterator taken whole stops here (an abort) */

struct EmLazy {
    EmLazyKind kind;
    uint8_t done;    /* no more items */
    uint8_t running; /* GEN: its frame is on the trace's stack (a resume of it aborts) */
    uint8_t started; /* GEN: ran to its first yield at least */
    uint8_t fin;     /* GEN: in T->fin_gens (suspended where closing it runs a handler) */
    /* GEN in T->fin_gens: where the last reachability walk found it from (em_gen_finalize's
     * quick check): hint, the sym at local (hint_stack 0) or stack slot hint_idx of the frame at
     * depth hint_depth; NULL when only the trace's stores or cells reached it */
    EmSym *hint;
    int hint_depth, hint_idx, hint_stack;
    int eh;          /* GEN: its code has an exception table */
    EmFrame fr;      /* GEN: the suspended frame (locals, stack, code_bytes owned) */
    EmSym *yielded;  /* GEN: the value of the yield that suspended it, while handing it over */
    EmSym *retval;   /* GEN: the value its return gave (StopIteration.value), NULL: None */
    EmSym *call;     /* GEN: the call that made it, a tuple sym (args tuple, kwargs dict) of... */
    PyObject *func;  /* GEN: ...this function (owned), made in the trace as `closure` (or NULL) */
    EmSym *closure;
    EmSym *fn;       /* MAP, FILTER: the function (FILTER: NULL for filter(None, ...)) */
    EmSym **srcs;    /* MAP, FILTER, ZIP, ENUM: their iterators (malloc'd) */
    int nsrc;
    int strict;            /* ZIP: zip(strict=True) (sources of unequal lengths raise ValueError) */
    PyObject *next, *step; /* ENUM (next), COUNT (next, step): owned */
    int cur;               /* CHAIN: the source being taken from */
    long long cnt, nxt, stop, stride; /* ISLICE: items taken, index of the next one given, stop (-1:
                                       * none), step: as CPython's islice keeps them; ACCUMULATE,
                                       * CYCLE: cnt the items given; CHAIN: nxt the sources
                                       * iter() was taken of (when reached, as CPython's) */
    EmSym *total;           /* ACCUMULATE: the last item given (or the initial one), NULL before */
    EmVec(EmSym *) saved;   /* CYCLE: the source's items, given again once it ends (cur 1) */
    PyObject *frame_it;     /* PEEK: the frame's iterator (owned); started: in T->mutated */
};

void em_lazy_free(EmLazy *L) {
    if (!L) return;
    free(L->fr.locals);
    free(L->fr.stack);
    Py_XDECREF(L->fr.code_bytes);
    free(L->srcs);
    em_vec_free(&L->saved);
    Py_XDECREF(L->next);
    Py_XDECREF(L->step);
    Py_XDECREF(L->func);
    Py_XDECREF(L->frame_it);
    free(L);
}

int em_lazy_done(const EmSym *it) { return !it->lazy || it->lazy->done; }

EmSym *em_gen_call(EmTracer *T, const EmSym *it, EmSym **fn) {
    const EmLazy *L = it->lazy;
    if (!L || L->kind != EM_LAZY_GEN || L->started || L->done || it->items.len || !L->call) return NULL;
    /* the function: the one made in the trace with a closure, the frame's own (its slot), or
     * that object (a constant of the output: held, unlike a weak identity guard) */
    *fn = L->closure ? L->closure : em_sym_seen(T, L->func);
    if (!*fn && !PyErr_Occurred()) *fn = em_sym_const(T, L->func);
    return *fn ? L->call : NULL;
}

/* The handler of the exception-table entry covering unit u, past the try and with blocks whose
 * handler it is (their own cleanup entries lead to the block around them) and a 3.12 `yield
 * from` loop's CLEANUP_THROW: 1 when u is inside an except clause's body (the exception it
 * handles is alive there), 0 when not, -1 for a table of a shape not known. */
static int in_except_body(const EmFrame *fr, int u) {
    for (int steps = 0; steps < 64; steps++) {
        int h, d, lasti, r = em_exc_entry(fr->code, u, &h, &d, &lasti);
        if (r <= 0) return r;
        EmInstr a;
        if (h >= fr->n_units) return -1;
        em_decode(fr->bytes, fr->n_units, h, &a);
#ifdef EMBC_CALL_INTRINSIC_1
        if (a.op == EMBC_CALL_INTRINSIC_1 && a.arg == 3) return 0; /* 3.12's wrapper of the body */
#endif
#ifdef EMBC_CLEANUP_THROW
        if (a.op == EMBC_CLEANUP_THROW) {
            u = h;
            continue;
        }
#endif
        if (a.op == EMBC_COPY && a.arg == 3) return 1; /* an except clause's cleanup */
        if (a.op != EMBC_PUSH_EXC_INFO) return -1;
        /* a try or with block: the block around it covers its handler's cleanup */
        int c, cd, cl;
        if (em_exc_entry(fr->code, h, &c, &cd, &cl) != 1) return -1;
        u = c;
    }
    return -1;
}

int em_gen_suspended(EmTracer *T, const EmSym *it, EmSym **fn, const EmFrame **fr) {
    const EmLazy *L = it->lazy;
    if (!L || L->kind != EM_LAZY_GEN || L->running || it->pos != it->items.len) return 0;
    if (L->done) return 2;
    if (!L->started) return 0;
    EmInstr y;
    em_decode(L->fr.bytes, L->fr.n_units, L->fr.cur, &y);
    if (y.op != EMBC_YIELD_VALUE || y.next != L->fr.ip || in_except_body(&L->fr, L->fr.cur) != 0) return 0;
    *fn = L->closure ? L->closure : em_sym_seen(T, L->func);
    if (!*fn && !PyErr_Occurred()) *fn = em_sym_const(T, L->func);
    *fr = &L->fr;
    return *fn ? 1 : -1;
}

int em_lazy_parts(const EmSym *it, EmSym **fn, EmSym ***srcs, int *n) {
    const EmLazy *L = it->lazy;
    if (!L || L->done || (L->kind != EM_LAZY_MAP && L->kind != EM_LAZY_FILTER && L->kind != EM_LAZY_ZIP) || L->strict ||
        it->items.len != it->pos)
        return 0;
    *fn = L->fn;
    *srcs = L->srcs;
    *n = L->nsrc;
    return 1;
}

int em_lazy_remake(EmTracer *T, const EmSym *it, EmSym **args, int *n, const char **helper) {
    const EmLazy *L = it->lazy;
    *helper = NULL;
    if (!L || L->done || it->items.len != it->pos) return 0;
    if ((L->kind == EM_LAZY_ACCUMULATE || L->kind == EM_LAZY_CYCLE) && !L->cnt && !L->cur && !L->saved.len) {
        args[0] = L->srcs[0]; /* not started: made again over its source where the trace left it */
        *n = 1;
        if (L->kind == EM_LAZY_CYCLE) return 1;
        *helper = "accumulate_of"; /* accumulate(src, func, initial=...) */
        args[1] = L->fn ? L->fn : em_sym_const(T, Py_None);
        args[2] = L->total ? L->total : em_sym_const(T, Py_None);
        *n = 3;
        return args[1] && args[2] ? 1 : -1;
    }
    if (L->kind == EM_LAZY_ISLICE) { /* islice(src, next index, stop, step), counted from where src is */
        PyObject *v[3] = {PyLong_FromLongLong(L->nxt - L->cnt),
                          L->stop == -1 ? Py_NewRef(Py_None) : PyLong_FromLongLong(L->stop - L->cnt),
                          PyLong_FromLongLong(L->stride)};
        args[0] = L->srcs[0];
        for (int i = 0; i < 3; i++) {
            args[i + 1] = v[i] ? em_sym_const(T, v[i]) : NULL;
            Py_XDECREF(v[i]);
        }
        *n = 4;
        return args[1] && args[2] && args[3] ? 1 : -1;
    }
    if (L->kind == EM_LAZY_CHAIN && L->nsrc - L->cur <= 4) { /* chain(*the sources left) */
        *n = L->nsrc - L->cur;
        for (int i = 0; i < *n; i++) args[i] = L->srcs[L->cur + i];
        return 1;
    }
    if (L->kind != EM_LAZY_REPEAT && L->kind != EM_LAZY_COUNT) return 0;
    if (L->kind == EM_LAZY_COUNT) { /* count(next, step) */
        args[0] = em_sym_const(T, L->next);
        args[1] = args[0] ? em_sym_const(T, L->step) : NULL;
        *n = 2;
        return args[1] ? 1 : -1;
    }
    args[0] = L->fn; /* repeat(x) for ever, repeat(x, times left) */
    *n = 1;
    if (L->stop == -1) return 1;
    PyObject *left = PyLong_FromLongLong(L->stop - L->cnt);
    args[(*n)++] = left ? em_sym_const(T, left) : NULL;
    Py_XDECREF(left);
    return args[1] ? 1 : -1;
}

EM_NEW PyObject *em_gen_exc(PyObject *exc) {
    if (!PyErr_GivenExceptionMatches(exc, PyExc_StopIteration)) return Py_NewRef(exc);
    PyObject *r = PyObject_CallFunction(PyExc_RuntimeError, "s", "generator raised StopIteration");
    if (!r) return NULL;
    PyException_SetCause(r, Py_NewRef(exc));
    PyException_SetContext(r, Py_NewRef(exc));
    return r;
}

static EmSym *new_lazy_iter(EmTracer *T, EmLazyKind kind, PyObject *type) {
    EmSym *it = em_sym_new(T, SYM_ITER);
    if (!it) return NULL;
    if (!(it->lazy = calloc(1, sizeof(EmLazy)))) return PyErr_NoMemory(), NULL;
    it->lazy->kind = kind;
    it->seq_type = Py_NewRef(type);
    return it;
}

EmStatus em_gen_make(EmTracer *T, const EmFrame *fr, int eh, PyObject *func, EmSym *closure, EmSym *call, EmSym **out) {
    EmSym *it = new_lazy_iter(T, EM_LAZY_GEN, (PyObject *)&PyGen_Type);
    if (!it) {
        free(fr->locals);
        free(fr->stack);
        Py_XDECREF(fr->code_bytes);
        return EM_ERR;
    }
    it->lazy->fr = *fr;
    it->lazy->fr.parent = NULL;
    it->lazy->eh = eh;
    it->lazy->call = call;
    it->lazy->func = Py_NewRef(func);
    it->lazy->closure = closure;
    *out = it;
    return EM_OK;
}

EmStatus em_gen_yield(EmTracer *T, EmSym *v) {
    EmLazy *L = T->gen_items ? T->gen_items->lazy : NULL;
    if (!L || !L->running) return em_trace_fail(T, EMA_OPCODE, "YIELD_VALUE outside a generator");
    L->yielded = v;
    T->done = 1;
    return EM_OK;
}

/* Whether closing generator L, suspended at a yield, runs a handler there: one covers the
 * yield, other than the one CPython 3.12 wraps every generator in (which only turns a
 * StopIteration into a RuntimeError). */
static int cleanup_pending(const EmLazy *L) {
    int h, d, lasti;
    if (em_exc_entry(L->fr.code, L->fr.cur, &h, &d, &lasti) != 1) return 0;
    EmInstr at;
    em_decode(L->fr.bytes, L->fr.n_units, h, &at);
#ifdef EMBC_CALL_INTRINSIC_1
    if (at.op == EMBC_CALL_INTRINSIC_1 && at.arg == 3) return 0; /* INTRINSIC_STOPITERATION_ERROR */
#endif
    return 1;
}

static EmStatus fin_add(EmTracer *T, EmSym *it) {
    if (em_vec_push(&T->fin_gens, it)) return PyErr_NoMemory(), EM_ERR;
    it->lazy->fin = 1;
    return EM_OK;
}

/* Runs generator it's frame from where it stopped: with v pushed (the value of the yield it
 * is suspended at; NULL at its start) or, exc non-NULL, with exc raised at that yield. *out: the
 * next value yielded, or NULL when it returned (L->retval) or raised (the abort). */
static EmStatus gen_run(EmTracer *T, EmSym *it, EmSym *v, PyObject *exc, EmSym **out) {
    EmLazy *L = it->lazy;
    *out = NULL;
    if (L->running) return em_trace_fail(T, EMA_VALUE, "a generator resumed while it runs");
    if (T->depth >= EM_MAX_DEPTH) return em_trace_fail(T, EMA_INLINE, "generator (inlining too deep)");
    const EmFrame saved = T->frame;
    T->frame = L->fr;
    T->frame.parent = &saved;
    T->frame.gen_items = it;
    T->frame.done = 0;
    L->yielded = NULL;
    L->running = 1;
    T->depth++;
    T->handlers += L->eh;
    EmStatus st = EM_OK;
    if (exc) { /* raised at the yield it stopped at: a handler there continues, else it ends */
        Py_XSETREF(T->exc, Py_NewRef(exc));
        int c = L->started ? em_trace_catch(T, T->cur) : 0;
        if (c < 0) st = EM_ERR;
        else if (!c) st = em_trace_fail(T, EMA_VALUE, "an exception thrown into a generator");
    } else if (L->started && v) { /* v NULL: resumed where its frame was set to go on */
        st = em_push(T, v);
    }
    L->started = 1;
    if (st == EM_OK) st = em_trace_loop(T);
    T->handlers -= L->eh;
    T->depth--;
    L->running = 0;
    L->fr = T->frame;
    L->fr.parent = NULL;
    T->frame = saved;
    if (st != EM_OK) { /* an exception leaving a generator ends it; a StopIteration is PEP 479's RuntimeError */
        L->done = 1;
        if (st == EM_ABORT && T->exc) {
            PyObject *e = em_gen_exc(T->exc);
            if (!e) return EM_ERR;
            Py_SETREF(T->exc, e);
        }
        return st;
    }
    if (L->yielded) {
        *out = L->yielded;
        L->yielded = NULL;
        return L->eh && !L->fin && cleanup_pending(L) ? fin_add(T, it) : EM_OK;
    }
    L->done = 1;
    L->retval = L->fr.retval;
    return EM_OK;
}

static int is_none(const EmSym *v) { return !v || (v->kind == SYM_CONST && v->obj == Py_None); }

EmStatus em_gen_send(EmTracer *T, EmSym *it, EmSym *v, EmSym **out, EmSym **ret) {
    *out = *ret = NULL;
    if (it->kind != SYM_ITER) return em_trace_fail(T, EMA_VALUE, "send() to a %s", em_sym_describe(it));
    EmLazy *L = it->lazy;
    if (!L || L->kind != EM_LAZY_GEN) {
        if (!is_none(v)) return em_trace_fail(T, EMA_VALUE, "send() of a value to a plain iterator");
        return em_iter_take(T, it, out);
    }
    if (it->pos < it->items.len) /* items an earlier em_iter_use made: taken in order */
        return em_trace_fail(T, EMA_VALUE, "send() to a generator already run ahead");
    if (L->done) return EM_OK;
    if (!L->started && !is_none(v)) {
        PyObject *msg = PyUnicode_FromString("can't send non-None value to a just-started generator");
        EmStatus st = msg ? em_trace_raise_new(T, PyExc_TypeError, msg) : EM_ERR;
        Py_XDECREF(msg);
        return st;
    }
    EmSym *none = v ? v : em_sym_const(T, Py_None);
    if (!none) return EM_ERR;
    EmStatus st = gen_run(T, it, none, NULL, out);
    if (st == EM_OK && *out) { /* keep the iterator's items in step: the value is taken */
        if (em_vec_push(&it->items, *out)) return PyErr_NoMemory(), EM_ERR;
        it->pos = it->items.len;
    }
    if (st == EM_OK && !*out) *ret = L->retval;
    return st;
}

/* The StopIteration a generator that returned ret (NULL: None) raises to send()/throw(). */
static EmStatus stop_iteration(EmTracer *T, EmSym *ret) {
    PyObject *rv = ret ? em_sym_value(T, ret) : Py_NewRef(Py_None);
    if (!rv) return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "a generator's return value");
    EmStatus st = rv == Py_None ? em_trace_raise_new(T, PyExc_StopIteration, NULL)
                                : em_trace_raise_new(T, PyExc_StopIteration, rv);
    Py_DECREF(rv);
    return st;
}

static EmStatus gen_throw(EmTracer *T, EmSym *it, PyObject *exc, int closing, EmSym **out);

/* The target of the SEND the `yield from` generator L is suspended in loops back to. */
static int send_target(const EmLazy *L) {
    EmInstr resume, back, send;
    em_decode(L->fr.bytes, L->fr.n_units, L->fr.ip, &resume);
    em_decode(L->fr.bytes, L->fr.n_units, resume.next, &back);
    if (back.op != EMBC_JUMP_BACKWARD_NO_INTERRUPT) return -1;
    em_decode(L->fr.bytes, L->fr.n_units, em_jump_target(&back), &send);
    return send.op == EMBC_SEND ? em_jump_target(&send) : -1;
}

/* throw()/close() into generator it suspended in `yield from`, as CPython's _gen_throw: a
 * GeneratorExit closes the inner iterator, then is raised in it (or what closing raised is);
 * another exception is thrown into an inner generator (a plain iterator has no throw(): it is
 * raised in it), whose next value it yields (EM_OK, *v), or whose return value ends the loop
 * (it resumes past the SEND with that value: EM_OK, *v NULL, *own Py_None), or whose exception
 * is raised in it (*own: raised where the loop's handler would raise it). CALL_NEXT with *own
 * (or none: exc) when exc is to be raised in it at its yield. */
static EmStatus delegate_throw(EmTracer *T, EmSym *it, PyObject *exc, int closing, EmSym **v, PyObject **own) {
    EmLazy *L = it->lazy;
    EmSym *sub = L->fr.sp > 0 ? L->fr.stack[L->fr.sp - 1] : NULL;
    if (!sub || sub->kind != SYM_ITER) return em_trace_fail(T, EMA_VALUE, "throw() into a yield from a non-iterator");
    int gen = sub->lazy && sub->lazy->kind == EM_LAZY_GEN;
    EmSym *ignored = NULL;
    EmStatus st = EM_OK;
    *v = NULL;
    if (closing || PyErr_GivenExceptionMatches(exc, PyExc_GeneratorExit)) {
        PyObject *e = gen ? PyObject_CallNoArgs(PyExc_GeneratorExit) : NULL;
        if (gen && !e) return EM_ERR;
        st = gen ? gen_throw(T, sub, e, 1, &ignored) : EM_OK;
        Py_XDECREF(e);
    } else if (gen) {
        st = gen_throw(T, sub, exc, 0, v);
        if (st == EM_OK) return EM_OK;
    }
    if (st == EM_OK) return CALL_NEXT;
    if (st != EM_ABORT || !T->exc) return st;
    *own = T->exc; /* what the inner one raised */
    T->exc = NULL;
    int target = send_target(L);
    if (target < 0) return em_trace_fail(T, EMA_VALUE, "a yield from of an unknown shape");
    if (!closing && PyErr_GivenExceptionMatches(*own, PyExc_StopIteration)) { /* it returned */
        PyObject *rv = ((PyStopIterationObject *)*own)->value;
        EmSym *r = em_sym_const(T, rv ? rv : Py_None);
        Py_SETREF(*own, Py_NewRef(Py_None));
        if (!r) return EM_ERR;
#ifdef EMBC_END_SEND
        L->fr.stack[L->fr.sp++] = r; /* [receiver, value]: END_SEND drops the receiver */
#else
        L->fr.stack[L->fr.sp - 1] = r;
#endif
        L->fr.ip = target;
        return CALL_NEXT;
    }
    return CALL_NEXT;
}

/* An exception raised in generator L at the yield of its `yield from` loop: 3.12 raises it at
 * the loop's CLEANUP_THROW (the handler of that yield), which re-raises it to the handler
 * around the loop; 3.11 at the yield. */
static void raise_in_loop(EmLazy *L) {
#ifdef EMBC_CLEANUP_THROW
    int h, d, lasti;
    if (em_exc_entry(L->fr.code, L->fr.cur, &h, &d, &lasti) == 1) {
        EmInstr at;
        em_decode(L->fr.bytes, L->fr.n_units, h, &at);
        if (at.op == EMBC_CLEANUP_THROW) L->fr.cur = h;
    }
#else
    (void)L;
#endif
}

/* gen.throw(exc) and gen.close() (exc GeneratorExit). */
static EmStatus gen_throw(EmTracer *T, EmSym *it, PyObject *exc, int closing, EmSym **out) {
    EmLazy *L = it->lazy;
    if (it->pos < it->items.len) return em_trace_fail(T, EMA_VALUE, "throw() into a generator already run ahead");
    if (L->done || (!L->started && closing)) {
        L->done = 1;
        if (closing) return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
        return em_trace_raise(T, exc, "thrown into a finished generator");
    }
    if (!L->started) {
        L->done = 1;
        return em_trace_raise(T, exc, "thrown into a generator before its start");
    }
    EmInstr next;
    em_decode(L->fr.bytes, L->fr.n_units, L->fr.ip, &next);
    EmSym *v = NULL;
    PyObject *own = NULL; /* the exception raised in it instead of exc (owned) */
    EmStatus st = EM_OK;
    if (next.op == EMBC_RESUME && next.arg >= 2) { /* suspended in `yield from`: the inner one first */
        st = delegate_throw(T, it, exc, closing, &v, &own);
        if (st != CALL_NEXT) {
            if (st != EM_OK || !v) return st;
            if (em_vec_push(&it->items, v)) return PyErr_NoMemory(), EM_ERR;
            it->pos = it->items.len;
            *out = v;
            return EM_OK;
        }
        st = EM_OK;
        v = NULL;
        if (own != Py_None) raise_in_loop(L);
    }
    if (own && own != Py_None) exc = own;
    st = own == Py_None ? gen_run(T, it, NULL, NULL, &v) : gen_run(T, it, NULL, exc, &v);
    Py_XDECREF(own);
    if (closing) {
        if (st == EM_OK && v) /* it stays suspended at that yield, as CPython's */
            return em_trace_raise_msg(T, PyExc_RuntimeError, "generator ignored GeneratorExit");
        if (st == EM_ABORT && T->exc &&
            (PyErr_GivenExceptionMatches(T->exc, PyExc_GeneratorExit) ||
             PyErr_GivenExceptionMatches(T->exc, PyExc_StopIteration))) {
            Py_CLEAR(T->exc);
            st = EM_OK;
        }
        if (st != EM_OK) return st;
        return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
    }
    if (st != EM_OK) return st;
    if (v) {
        if (em_vec_push(&it->items, v)) return PyErr_NoMemory(), EM_ERR;
        it->pos = it->items.len;
        *out = v;
        return EM_OK;
    }
    return stop_iteration(T, L->retval);
}

/* ---- closing generators no one refers to (em_gen_finalize) ---- */

#define EM_MAX_FIN_VISITS 4000000L /* syms all reachability walks of one trace visit at most */

typedef EmVec(EmSym *) SymStack;

static int reach(EmTracer *T, SymStack *todo, EmSym *s) {
    if (!s || s->mark == T->walk_epoch) return 0;
    s->mark = T->walk_epoch;
    return em_vec_push(todo, s) ? (PyErr_NoMemory(), -1) : 0;
}

static int reach_all(EmTracer *T, SymStack *todo, EmSym **v, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (reach(T, todo, v[i])) return -1;
    return 0;
}

/* What sym s refers to: its items, key tokens, `of` syms and a lazy producer's parts (a
 * suspended generator's frame; a running one's is a frame of the chain). */
static int reach_parts(EmTracer *T, SymStack *todo, EmSym *s) {
    if (reach_all(T, todo, s->items.data, s->items.len) || reach_all(T, todo, s->of.data, s->of.len)) return -1;
    for (int32_t i = 0; i < s->keys.len; i++)
        if (reach(T, todo, em_key_token_sym(s->keys.data[i]))) return -1;
    const EmLazy *L = s->lazy;
    if (!L) return 0;
    EmSym *parts[7] = {L->fn, L->closure, L->call, L->yielded, L->retval, L->fr.retval, L->total};
    if (reach_all(T, todo, parts, 7) || reach_all(T, todo, L->srcs, L->nsrc) ||
        reach_all(T, todo, L->saved.data, L->saved.len))
        return -1;
    if (L->kind != EM_LAZY_GEN || L->running) return 0;
    return reach_all(T, todo, L->fr.locals, L->fr.nlocals) || reach_all(T, todo, L->fr.stack, L->fr.sp) ? -1 : 0;
}

/* Marks what todo's syms reach (the walk's stamp). 1 done, 0 too many syms visited, -1 error. */
static int drain(EmTracer *T, SymStack *todo) {
    while (todo->len) {
        if (++T->walk_visits > EM_MAX_FIN_VISITS) return 0;
        if (reach_parts(T, todo, todo->data[--todo->len])) return -1;
    }
    return 1;
}

/* After the walk from root, the sym at (depth, stack, idx) of a frame (depth -2: one of the
 * trace's own roots, global_roots): the suspended generators it reached first keep it as their
 * hint. */
static void note_hints(EmTracer *T, EmSym *root, int depth, int stack, int idx) {
    for (int32_t i = 0; i < T->fin_gens.len; i++) {
        EmLazy *L = T->fin_gens.data[i]->lazy;
        if (T->fin_gens.data[i]->mark != T->walk_epoch || L->hint_depth != -1) continue; /* not yet hinted */
        L->hint = root;
        L->hint_depth = depth;
        L->hint_stack = stack;
        L->hint_idx = idx;
    }
}

/* The roots outside the frames: the return value, the exception being handled, the trace's
 * stores, the lists and dicts of the frame it changed, the program's cells, open contexts,
 * instance dict copies. 0, or -1 with an exception. */
static int push_roots(SymStack *roots, EmSym *const *v, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (v[i] && em_vec_push(roots, v[i])) return PyErr_NoMemory(), -1;
    return 0;
}

static int global_roots(EmTracer *T, SymStack *roots) {
    EmSym *one[2] = {T->retval, T->handled};
    return push_roots(roots, one, 2) || push_roots(roots, T->stores.data, T->stores.len) ||
                   push_roots(roots, T->mutated.data, T->mutated.len) ||
                   push_roots(roots, T->prog_cells.data, T->prog_cells.len) ||
                   push_roots(roots, T->ctx_open.data, T->ctx_open.len) ||
                   push_roots(roots, T->idict_copy.data, T->idict_copy.len)
               ? -1
               : 0;
}

/* The frames' slots (locals, then the stack: a caller's whole stack, the arguments of the call
 * in progress being above its top) and each frame's running generator, one root at a time. */
static int mark_frames(EmTracer *T, SymStack *todo) {
    int depth = T->depth, r = 1;
    for (const EmFrame *f = &T->frame; r == 1 && f; f = f->parent, depth--) {
        int nstack = f == &T->frame ? f->sp : f->stack_cap;
        for (int i = 0; r == 1 && i < f->nlocals + nstack; i++) {
            EmSym *s = i < f->nlocals ? f->locals[i] : f->stack[i - f->nlocals];
            if (!s || s->mark == T->walk_epoch) continue;
            if (reach(T, todo, s) || (r = drain(T, todo)) < 0) return -1;
            if (r == 1) note_hints(T, s, depth, i >= f->nlocals, i < f->nlocals ? i : i - f->nlocals);
        }
        if (r == 1 && (reach(T, todo, f->gen_items) || (r = drain(T, todo)) < 0)) return -1;
    }
    return r;
}

/* Marks (s->mark = T->walk_epoch) every sym the program can still reach: the frames' slots
 * (mark_frames), the trace's stores, the lists and dicts of the frame it changed, the
 * program's cells, open contexts; at the root's return its return value instead of its frame.
 * Each suspended generator found from a frame slot keeps it as a hint. 1 done, 0 too many syms
 * visited, -1 error. */
static int mark_live(EmTracer *T, int at_return) {
    SymStack todo = {0};
    T->walk_epoch++;
    for (int32_t i = 0; i < T->fin_gens.len; i++) {
        T->fin_gens.data[i]->lazy->hint = NULL;
        T->fin_gens.data[i]->lazy->hint_depth = -1;
    }
    SymStack roots = {0};
    int r = at_return ? 1 : mark_frames(T, &todo);
    if (r == 1 && global_roots(T, &roots)) r = -1;
    for (int32_t i = 0; r == 1 && i < roots.len; i++) {
        if (roots.data[i]->mark == T->walk_epoch) continue;
        if (reach(T, &todo, roots.data[i]) || (r = drain(T, &todo)) < 0) r = -1;
        else if (r == 1) note_hints(T, roots.data[i], -2, 0, i);
    }
    em_vec_free(&roots);
    em_vec_free(&todo);
    return r;
}

/* Whether suspended generator g is still reached from the frame slot of its hint: that slot
 * holds the same sym, from which a walk finds g (cheap: what one root reaches). 1 yes, 0 not
 * known so, -1 error. */
static int still_held(EmTracer *T, EmSym *g) {
    const EmLazy *L = g->lazy;
    if (!L->hint || L->hint_depth == -1 || L->hint_depth > T->depth) return 0;
    if (L->hint_depth == -2) { /* one of the trace's own roots: still one of them */
        SymStack roots = {0};
        int found = 0;
        if (global_roots(T, &roots)) return em_vec_free(&roots), -1;
        for (int32_t i = 0; !found && i < roots.len; i++) found = roots.data[i] == L->hint;
        em_vec_free(&roots);
        if (!found) return 0;
    } else {
        const EmFrame *f = &T->frame;
        for (int d = T->depth; f && d > L->hint_depth; d--) f = f->parent;
        if (!f) return 0;
        int n = L->hint_stack ? (f == &T->frame ? f->sp : f->stack_cap) : f->nlocals;
        if (L->hint_idx >= n || (L->hint_stack ? f->stack : f->locals)[L->hint_idx] != L->hint) return 0;
    }
    SymStack todo = {0};
    T->walk_epoch++;
    int r = reach(T, &todo, L->hint) ? -1 : 1;
    while (r == 1 && todo.len && g->mark != T->walk_epoch) {
        if (++T->walk_visits > EM_MAX_FIN_VISITS) r = 0;
        else if (reach_parts(T, &todo, todo.data[--todo.len])) r = -1;
    }
    em_vec_free(&todo);
    return r == 1 ? g->mark == T->walk_epoch : r;
}

/* gen.close() of a generator CPython finalizes: what its handlers raise CPython reports as
 * unraisable and goes on, which the trace does not model (an abort). */
static EmStatus finalize_one(EmTracer *T, EmSym *it) {
    PyObject *e = PyObject_CallNoArgs(PyExc_GeneratorExit);
    EmSym *out = NULL;
    EmStatus st = e ? gen_throw(T, it, e, 1, &out) : EM_ERR;
    Py_XDECREF(e);
    if (st == EM_ABORT && T->exc) {
        Py_CLEAR(T->exc);
        st = em_trace_fail(T, EMA_VALUE, "a generator whose cleanup raises when it is finalized");
    }
    return st;
}

int em_sym_held_elsewhere(EmTracer *T, EmSym **slot) {
    EmSym *s = *slot;
    *slot = NULL;
    int r = mark_live(T, 0);
    *slot = s;
    return r < 0 ? -1 : r == 0 || s->mark == T->walk_epoch;
}

EmStatus em_gen_finalize(EmTracer *T, int at_return) {
    if (T->finalizing) return EM_OK;
    for (int round = 0; round < 16; round++) {
        int32_t n = 0; /* the suspended ones left, in the order they were suspended */
        for (int32_t i = 0; i < T->fin_gens.len; i++) {
            EmSym *g = T->fin_gens.data[i];
            if (g->lazy->done || (!g->lazy->running && !cleanup_pending(g->lazy))) g->lazy->fin = 0;
            else T->fin_gens.data[n++] = g;
        }
        T->fin_gens.len = n;
        if (!n) return EM_OK;
        int held = !at_return;
        for (int32_t i = 0; held == 1 && i < n; i++)
            held = T->fin_gens.data[i]->lazy->running ? 1 : still_held(T, T->fin_gens.data[i]);
        if (held < 0) return EM_ERR;
        if (held) return EM_OK;
        int m = mark_live(T, at_return);
        if (m <= 0)
            return m < 0 ? EM_ERR : em_trace_fail(T, EMA_TOO_LONG, "finding which suspended generators are still used");
        EmSym *dead = NULL;
        for (int32_t i = 0; !dead && i < n; i++)
            if (T->fin_gens.data[i]->mark != T->walk_epoch && !T->fin_gens.data[i]->lazy->running)
                dead = T->fin_gens.data[i];
        if (!dead) return EM_OK;
        T->finalizing = 1;
        EmStatus st = finalize_one(T, dead);
        T->finalizing = 0;
        dead->lazy->done = 1;
        if (st != EM_OK) return st;
    }
    return em_trace_fail(T, EMA_VALUE, "generators finalized one after another");
}

EmStatus em_gen_method(EmTracer *T, PyObject *f, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    if (self->kind != SYM_ITER || !self->lazy || self->lazy->kind != EM_LAZY_GEN ||
        (!Py_IS_TYPE(f, &PyMethodDescr_Type) && !Py_IS_TYPE(f, &PyWrapperDescr_Type)) || PyDescr_TYPE(f) != &PyGen_Type)
        return CALL_NEXT;
    const char *name = PyUnicode_AsUTF8(PyDescr_NAME(f));
    if (!name) return EM_ERR;
    EmSym *ret = NULL;
    if ((!strcmp(name, "send") && nargs == 1) || (!strcmp(name, "__next__") && nargs == 0)) {
        EmStatus st = em_gen_send(T, self, nargs ? args[0] : NULL, out, &ret);
        return st != EM_OK || *out ? st : stop_iteration(T, ret);
    }
    if (!strcmp(name, "close") && nargs == 0) {
        PyObject *e = PyObject_CallNoArgs(PyExc_GeneratorExit);
        if (!e) return EM_ERR;
        EmStatus st = gen_throw(T, self, e, 1, out);
        Py_DECREF(e);
        return st;
    }
    if (!strcmp(name, "throw") && nargs == 1 && (args[0]->kind == SYM_CONST || args[0]->kind == SYM_OBJ)) {
        PyObject *a = args[0]->obj, *e = NULL;
        if (PyExceptionInstance_Check(a)) e = Py_NewRef(a);
        else if (PyExceptionClass_Check(a)) e = PyObject_CallNoArgs(a);
        else return em_trace_fail(T, EMA_VALUE, "throw() of a %s", Py_TYPE(a)->tp_name);
        if (!e) return EM_ERR;
        EmStatus st = gen_throw(T, self, e, 0, out);
        Py_DECREF(e);
        return st;
    }
    /* throw(type, value[, traceback]), the legacy form contextlib's __exit__ uses: value when it
     * is an instance of type, else type(); the traceback (one the trace has none of) left out */
    if (!strcmp(name, "throw") && (nargs == 2 || nargs == 3) &&
        (args[0]->kind == SYM_CONST || args[0]->kind == SYM_OBJ) && PyExceptionClass_Check(args[0]->obj) &&
        args[1]->kind == SYM_CONST &&
        (nargs == 2 || args[2]->kind == SYM_TB || (args[2]->kind == SYM_CONST && args[2]->obj == Py_None))) {
        PyObject *tp = args[0]->obj, *v = args[1]->obj, *e = NULL;
        if (v != Py_None && !PyObject_TypeCheck(v, (PyTypeObject *)tp))
            return em_trace_fail(T, EMA_VALUE, "throw() of a value not of the type thrown");
        e = v == Py_None ? PyObject_CallNoArgs(tp) : Py_NewRef(v);
        if (!e) return EM_ERR;
        EmStatus st = gen_throw(T, self, e, 0, out);
        Py_DECREF(e);
        return st;
    }
    return em_trace_fail(T, EMA_CALL, "generator.%s with %d arguments", name, nargs);
}

EmStatus em_lazy_make(EmTracer *T, EmLazyKind kind, EmSym *fn, EmSym **srcs, int n, PyObject *start, PyObject *step,
                      EmSym **out) {
    static PyTypeObject *const types[] = {[EM_LAZY_MAP] = &PyMap_Type,
                                          [EM_LAZY_FILTER] = &PyFilter_Type,
                                          [EM_LAZY_ZIP] = &PyZip_Type,
                                          [EM_LAZY_ENUM] = &PyEnum_Type};
    if (kind == EM_LAZY_GEN || n > 8) return em_trace_fail(T, EMA_CALL, "a lazy iterator over %d iterables", n);
    PyObject *type = kind == EM_LAZY_COUNT         ? EM_KNOWN(it_count)
                     : kind == EM_LAZY_STARMAP     ? EM_KNOWN(it_starmap)
                     : kind == EM_LAZY_CHAIN       ? EM_KNOWN(it_chain)
                     : kind == EM_LAZY_ISLICE      ? EM_KNOWN(it_islice)
                     : kind == EM_LAZY_FILTERFALSE ? EM_KNOWN(it_filterfalse)
                     : kind == EM_LAZY_TAKEWHILE   ? EM_KNOWN(it_takewhile)
                     : kind == EM_LAZY_DROPWHILE   ? EM_KNOWN(it_dropwhile)
                     : kind == EM_LAZY_REPEAT      ? EM_KNOWN(it_repeat)
                     : kind == EM_LAZY_ACCUMULATE  ? EM_KNOWN(it_accumulate)
                     : kind == EM_LAZY_CYCLE       ? EM_KNOWN(it_cycle)
                                                   : (PyObject *)types[kind];
    EmSym *it = new_lazy_iter(T, kind, type);
    if (!it) return EM_ERR;
    EmLazy *L = it->lazy;
    L->fn = fn;
    L->strict = kind == EM_LAZY_ZIP && start == Py_True;
    if (L->strict) start = NULL;
    L->next = start ? Py_NewRef(start) : PyLong_FromLong(0);
    L->step = step ? Py_NewRef(step) : PyLong_FromLong(1);
    if (!L->next || !L->step) return EM_ERR;
    if (n && !(L->srcs = calloc((size_t)n, sizeof(EmSym *)))) return PyErr_NoMemory(), EM_ERR;
    for (int i = 0; i < n; i++) { /* chain takes iter() of each when it reaches it (lazy_next) */
        EmStatus st = kind == EM_LAZY_CHAIN ? ((L->srcs[i] = srcs[i]), EM_OK) : em_iter_of(T, srcs[i], &L->srcs[i]);
        if (st != EM_OK) return st;
        L->nsrc++;
    }
    *out = it;
    return EM_OK;
}

/* An islice bound: a non-negative int constant, or None (*v = -1: no stop; start 0, step 1). */
static int slice_arg(EmSym *s, long long *v) {
    if (s->kind != SYM_CONST) return 0;
    if (s->obj == Py_None) return (*v = -1), 1;
    if (!PyLong_CheckExact(s->obj)) return 0;
    *v = PyLong_AsLongLong(s->obj);
    if (*v == -1 && PyErr_Occurred()) PyErr_Clear();
    return *v >= 0;
}

/* repeat(x) for ever, or more times than the stand-ins take: lazy. CALL_NEXT for other calls. */
static EmStatus lazy_repeat(EmTracer *T, EmSym **args, int n, PyObject *kwnames, EmSym **out) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    EmSym *bound[2] = {NULL, NULL}; /* object, times */
    for (int i = 0; i < n && i < 2; i++) {
        PyObject *k = i < n - nkw ? NULL : PyTuple_GET_ITEM(kwnames, i - (n - nkw));
        int at = !k                                               ? i
                 : !PyUnicode_CompareWithASCIIString(k, "times")  ? 1
                 : !PyUnicode_CompareWithASCIIString(k, "object") ? 0
                                                                  : -1;
        if (at < 0 || bound[at]) return CALL_NEXT;
        bound[at] = args[i];
    }
    long long times = -1;
    if (n > 2 || !bound[0] || (bound[1] && (bound[1]->kind != SYM_CONST || !PyLong_CheckExact(bound[1]->obj))))
        return CALL_NEXT;
    int overflow = 0;
    if (bound[1] && (times = PyLong_AsLongLongAndOverflow(bound[1]->obj, &overflow)) == -1 && PyErr_Occurred())
        return EM_ERR;
    if (overflow) times = overflow > 0 ? LLONG_MAX : 0; /* beyond int64: for ever, or none */
    if (times != -1 && times <= 4096) return CALL_NEXT; /* a few: the stand-ins (em_call_itertools) */
    EmStatus st = em_lazy_make(T, EM_LAZY_REPEAT, bound[0], NULL, 0, NULL, NULL, out);
    if (st == EM_OK) (*out)->lazy->stop = times < 0 && bound[1] ? 0 : times; /* repeat(x, -3) is empty */
    return st;
}

/* accumulate(iterable, func=None, *, initial=None), by position or keyword. */
static EmStatus lazy_accumulate(EmTracer *T, EmSym **args, int n, PyObject *kwnames, EmSym **out) {
    static const char *const names[] = {"iterable", "func", "initial"};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    EmSym *bound[3] = {NULL, NULL, NULL};
    if (n - nkw > 2) return CALL_NEXT; /* Python's TypeError, from the stand-ins */
    for (int i = 0; i < n; i++) {
        int at = i < n - nkw ? i : -1;
        for (int k = 0; at < 0 && k < 3; k++)
            if (!PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i - (n - nkw)), names[k])) at = k;
        if (at < 0 || bound[at]) return CALL_NEXT;
        bound[at] = args[i];
    }
    if (!bound[0]) return CALL_NEXT;
    EmStatus st = em_lazy_make(T, EM_LAZY_ACCUMULATE, is_none(bound[1]) ? NULL : bound[1], bound, 1, NULL, NULL, out);
    if (st == EM_OK && !is_none(bound[2])) (*out)->lazy->total = bound[2];
    return st;
}

/* The positions of f's arguments that are iterables, as a bit mask (~0u: every positional one). */
static unsigned iterable_args(PyObject *f) {
    if (f == EM_KNOWN(it_chain) || f == EM_KNOWN(it_product) || f == EM_KNOWN(it_zip_longest)) return ~0u;
    if (f == EM_KNOWN(it_compress)) return 3u;
    return f == EM_KNOWN(it_islice) || f == EM_KNOWN(it_pairwise) || f == EM_KNOWN(it_permutations) ||
                   f == EM_KNOWN(it_combinations) || f == EM_KNOWN(it_combinations_r) || f == EM_KNOWN(it_cycle) ||
                   f == EM_KNOWN(it_accumulate)
               ? 1u
               : 0u;
}

EmStatus em_lazy_itertools(EmTracer *T, PyObject *f, EmSym **args, int n, PyObject *kwnames, EmSym **out) {
    unsigned its = iterable_args(f);
    int npos = n - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    for (int i = 0; i < npos && i < 32; i++) /* a tensor iterated: its rows, as iter(x) */
        if ((its >> i & 1u) && args[i]->kind == SYM_TENSOR) {
            EmStatus st = em_iter_of(T, args[i], &args[i]);
            if (st != EM_OK) return st;
        }
    if (f == EM_KNOWN(it_repeat)) return lazy_repeat(T, args, n, kwnames, out);
    if (f == EM_KNOWN(it_accumulate)) return lazy_accumulate(T, args, n, kwnames, out);
    if (f == EM_KNOWN(it_cycle) && n == 1 && !kwnames)
        return em_lazy_make(T, EM_LAZY_CYCLE, NULL, args, 1, NULL, NULL, out);
    int lazy = 0, chain = f == EM_KNOWN(it_chain), islice = f == EM_KNOWN(it_islice), shared = 0;
    for (int i = 0; i < n; i++) lazy |= args[i]->kind == SYM_ITER && !em_lazy_done(args[i]);
    for (int i = 0; i < n && (chain || islice); i++) /* an iterator the caller goes on using, a list it changes */
        shared |= args[i]->kind == SYM_ITER || args[i]->kind == SYM_LIST || args[i]->kind == SYM_DICT ||
                  args[i]->kind == SYM_SET;
    if (lazy && (f == EM_KNOWN(it_product) || f == EM_KNOWN(it_permutations) || f == EM_KNOWN(it_combinations) ||
                 f == EM_KNOWN(it_combinations_r))) { /* they take their iterables whole when made, as here */
        for (int i = 0; i < n; i++)
            for (int made = 1; made && args[i]->kind == SYM_ITER && args[i]->lazy;) {
                EmStatus st = em_lazy_step(T, args[i], &made);
                if (st != EM_OK) return st;
            }
        return CALL_NEXT;
    }
    if (!(lazy || shared) || kwnames || (!chain && !islice)) return CALL_NEXT;
    if (chain) return em_lazy_make(T, EM_LAZY_CHAIN, NULL, args, n, NULL, NULL, out);
    long long start = 0, stop = -1, step = 1; /* islice(it, stop) / islice(it, start, stop[, step]) */
    int ok = n == 2 ? slice_arg(args[1], &stop)
                    : (n == 3 || n == 4) && slice_arg(args[1], &start) && slice_arg(args[2], &stop) &&
                          (n == 3 || slice_arg(args[3], &step));
    if (start < 0) start = 0; /* None */
    if (step < 0) step = 1;   /* None */
    if (!ok || step == 0) return em_trace_fail(T, EMA_CALL, "itertools.islice with these bounds");
    EmStatus st = em_lazy_make(T, EM_LAZY_ISLICE, NULL, args, 1, NULL, NULL, out);
    if (st == EM_OK) {
        EmLazy *L = (*out)->lazy;
        L->nxt = start;
        L->stop = stop;
        L->stride = step;
    }
    return st;
}

/* islice's next, as CPython's: skip to the next index given, stop at stop. */
static EmStatus islice_next(EmTracer *T, EmLazy *L, EmSym **v) {
    EmSym *x = NULL;
    while (L->cnt < L->nxt) {
        EmStatus st = em_iter_take(T, L->srcs[0], &x);
        if (st != EM_OK || !x) return st;
        L->cnt++;
    }
    if (L->stop != -1 && L->cnt >= L->stop) return EM_OK;
    EmStatus st = em_iter_take(T, L->srcs[0], &x);
    if (st != EM_OK || !x) return st;
    L->cnt++;
    L->nxt += L->stride;
    if (L->stop != -1 && L->nxt > L->stop) L->nxt = L->stop;
    *v = x;
    return EM_OK;
}

EmStatus em_lazy_next_of(EmTracer *T, EmSym *obj, EmSym **out) {
    EmSym *it = new_lazy_iter(T, EM_LAZY_NEXT, (PyObject *)Py_TYPE(obj->obj));
    if (!it) return EM_ERR;
    it->lazy->fn = obj;
    *out = it;
    return EM_OK;
}

EmSym *em_lazy_peek_make(EmTracer *T, PyObject *v) {
    EmSym *it = new_lazy_iter(T, EM_LAZY_PEEK, (PyObject *)Py_TYPE(v));
    if (it) it->lazy->frame_it = Py_NewRef(v);
    return it;
}

int em_lazy_peek_taken(const EmSym *it, int *taken, int *ended) {
    const EmLazy *L = it->lazy;
    if (!L || L->kind != EM_LAZY_PEEK) return 0;
    *taken = it->pos;
    *ended = L->done && it->pos >= it->items.len;
    return 1;
}

/* The guard slot of _rules.<helper>(j, it) (j < 0: helper(it)) for PEEK iterator it, named
 * by fmt; -1 with an exception. */
static int32_t peek_slot(EmTracer *T, EmSym *it, const char *helper, int j, const char *fmt) {
    PyObject *fn = j < 0 ? PyObject_GetAttrString(em_state.meta_run, helper)
                         : PyObject_CallMethod(em_state.meta_run, helper, "i", j);
    int32_t slot = fn ? em_guard_call(T->P, it->src, fn, fmt, j) : -1;
    Py_XDECREF(fn);
    return slot;
}

/* PEEK's next item: the item j = it->items.len ahead of where the frame's iterator is, read by
 * the guard (a miss when it has fewer left); at its end (*v NULL) the count left is guarded.
 * An iterator over a list the trace changed aborts (the guard reads the list as it was). */
static EmStatus peek_next(EmTracer *T, EmSym *it, EmSym **v) {
    EmLazy *L = it->lazy;
    int j = (int)it->items.len;
    if (!L->started && em_vec_push(&T->mutated, it)) return PyErr_NoMemory(), EM_ERR;
    L->started = 1;
    PyObject *state = PyObject_CallMethod(em_state.meta_run, "_iter_state", "O", L->frame_it);
    if (!state) return em_trace_abandon(T, EMA_VALUE, "the state of a %s", Py_TYPE(L->frame_it)->tp_name);
    PyObject *seq = PyTuple_GET_ITEM(state, 0);
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(state, 1)), n = PyObject_Length(seq);
    EmStatus st = EM_ERR;
    if (PyList_Check(seq) && em_sym_mutated_of(T, seq)) {
        st = em_trace_fail(T, EMA_VALUE, "next() of an iterator over a list the trace changed");
    } else if (i >= 0 && n >= 0 && i + j >= n) {
        PyObject *jo = PyLong_FromLong(j);
        int32_t slot = jo ? peek_slot(T, it, "iter_left", -1, "iter_left(%s)") : -1;
        st = slot >= 0 && !em_guard_check(T->P, EMG_EQ, slot, jo, 0) ? EM_OK : EM_ERR;
        Py_XDECREF(jo);
    } else if (i >= 0 && n >= 0) {
        PyObject *item = PySequence_GetItem(seq, i + j);
        int32_t slot = item ? peek_slot(T, it, "iter_peeker", j, "iter_peek(%s, %d)") : -1;
        if (slot >= 0) *v = em_sym_wrap(T, item, slot, &st);
        Py_XDECREF(item);
    }
    Py_DECREF(state);
    return st;
}

EmSym *em_lazy_next_obj(const EmSym *it) {
    const EmLazy *L = it->lazy;
    return L && L->kind == EM_LAZY_NEXT && !L->done && it->pos == it->items.len ? L->fn : NULL;
}

/* obj.__next__() traced: its value, or *v NULL at the StopIteration it raises. */
static EmStatus next_dunder(EmTracer *T, EmSym *obj, EmSym **v) {
    EmStatus st = em_call_dunder(T, obj, "__next__", NULL, 0, v);
    if (st == EM_ABORT && T->exc && PyErr_GivenExceptionMatches(T->exc, PyExc_StopIteration)) {
        Py_CLEAR(T->exc);
        *v = NULL;
        return EM_OK;
    }
    return st;
}

/* The next item of a MAP, FILTER, ZIP, ENUM, COUNT, CHAIN, ISLICE or NEXT iterator in *v (NULL: at its end). */
/* takewhile's next: the source's item while the predicate holds, then none for ever (cnt 1);
 * dropwhile's: the source's items from the first the predicate refuses (cnt 1 once it did). */
static EmStatus while_next(EmTracer *T, EmLazy *L, EmSym **v) {
    int take = L->kind == EM_LAZY_TAKEWHILE;
    if (take && L->cnt) return EM_OK;
    for (;;) {
        EmSym *x = NULL, *r = NULL;
        EmStatus st = em_iter_take(T, L->srcs[0], &x);
        if (st != EM_OK || !x || (!take && L->cnt)) return st == EM_OK ? (*v = x), EM_OK : st;
        int t = 0;
        if ((st = em_call(T, L->fn, NULL, &x, 1, NULL, &r)) != EM_OK || (st = em_sym_truth(T, r, &t)) != EM_OK)
            return st;
        if (take) return t ? ((*v = x), EM_OK) : ((L->cnt = 1), EM_OK);
        if (!t) {
            L->cnt = 1;
            return (*v = x), EM_OK;
        }
    }
}

/* zip(strict=True) at the end of source i: CPython's ValueError unless every source ends
 * together (the later ones are asked for one more item, as CPython asks). */
static EmStatus strict_end(EmTracer *T, EmLazy *L, int i) {
    const char *shorter = "shorter";
    for (int j = 1; !i && j < L->nsrc; j++) {
        EmSym *x = NULL;
        EmStatus st = em_iter_take(T, L->srcs[j], &x);
        if (st != EM_OK) return st;
        if (x) {
            i = j;
            shorter = "longer";
        }
    }
    if (!i) return EM_OK;
    return em_trace_raise_msg(T, PyExc_ValueError, "zip() argument %d is %s than argument%s%d", i + 1, shorter,
                              i == 1 ? " " : "s 1-", i);
}

/* accumulate's next, as CPython's: the initial value first, then each item added (or given to
 * func) to the last given; the first item as it is when there is no initial value. */
static EmStatus accumulate_next(EmTracer *T, EmLazy *L, EmSym **v) {
    EmSym *x = NULL;
    if (L->cnt++ == 0 && L->total) return (*v = L->total), EM_OK;
    EmStatus st = em_iter_take(T, L->srcs[0], &x);
    if (st != EM_OK || !x) return st;
    EmSym *ab[2] = {L->total, x};
    if (L->total) st = L->fn ? em_call(T, L->fn, NULL, ab, 2, NULL, &x) : em_apply_op(T, EMOP_ADD, ab, 2, &x);
    if (st == EM_OK) *v = L->total = x;
    return st;
}

/* cycle's next, as CPython's: the source's items (each saved), then the saved ones in turn. */
static EmStatus cycle_next(EmTracer *T, EmLazy *L, EmSym **v) {
    if (!L->cur) {
        EmStatus st = em_iter_take(T, L->srcs[0], v);
        if (st != EM_OK || *v) return st == EM_OK && em_vec_push(&L->saved, *v) ? (PyErr_NoMemory(), EM_ERR) : st;
        L->cur = 1;
    }
    if (L->saved.len) *v = L->saved.data[L->cnt++ % L->saved.len];
    return EM_OK;
}

static EmStatus lazy_next(EmTracer *T, EmLazy *L, EmSym **v) {
    EmSym *items[9];
    *v = NULL;
    if (L->kind == EM_LAZY_NEXT) return next_dunder(T, L->fn, v);
    if (L->kind == EM_LAZY_ACCUMULATE) return accumulate_next(T, L, v);
    if (L->kind == EM_LAZY_CYCLE) return cycle_next(T, L, v);
    if (L->kind == EM_LAZY_ISLICE) return islice_next(T, L, v);
    for (; L->kind == EM_LAZY_CHAIN && L->cur < L->nsrc; L->cur++) {
        EmStatus st = L->cur < L->nxt ? EM_OK : em_iter_of(T, L->srcs[L->cur], &L->srcs[L->cur]);
        L->nxt = L->cur + 1;
        if (st == EM_OK) st = em_iter_take(T, L->srcs[L->cur], v);
        if (st != EM_OK || *v) return st;
    }
    if (L->kind == EM_LAZY_CHAIN) return EM_OK;
    if (L->kind == EM_LAZY_REPEAT) { /* fn, stop times (-1: for ever) */
        if (L->stop != -1 && L->cnt >= L->stop) return EM_OK;
        L->cnt++;
        return (*v = L->fn), EM_OK;
    }
    if (L->kind == EM_LAZY_TAKEWHILE || L->kind == EM_LAZY_DROPWHILE) return while_next(T, L, v);
    if (L->kind == EM_LAZY_STARMAP) { /* fn(*item) */
        EmSym *item = NULL, *args = NULL;
        EmStatus st = em_iter_take(T, L->srcs[0], &item);
        if (st != EM_OK || !item) return st;
        if ((st = em_seq_items(T, item, &args)) != EM_OK) return st;
        if (args->items.len > 64) return em_trace_fail(T, EMA_CALL, "starmap with more than 64 arguments");
        return em_call(T, L->fn, NULL, args->items.data, (int)args->items.len, NULL, v);
    }
    if (L->kind == EM_LAZY_COUNT || L->kind == EM_LAZY_ENUM) {
        EmSym *c = em_sym_const(T, L->next);
        PyObject *nx = c ? PyNumber_Add(L->next, L->step) : NULL;
        if (!nx) return EM_ERR;
        Py_SETREF(L->next, nx);
        if (L->kind == EM_LAZY_COUNT) return (*v = c), EM_OK;
        items[0] = c;
    }
    for (;;) {
        int base = L->kind == EM_LAZY_ENUM;
        for (int i = 0; i < L->nsrc; i++) {
            EmStatus st = em_iter_take(T, L->srcs[i], &items[base + i]);
            if (st != EM_OK) return st;
            if (!items[base + i]) /* the shortest source ends it (zip, map) */
                return L->strict ? strict_end(T, L, i) : EM_OK;
        }
        int k = base + L->nsrc;
        if (L->kind == EM_LAZY_MAP) return em_call(T, L->fn, NULL, items, k, NULL, v);
        if (L->kind == EM_LAZY_FILTER || L->kind == EM_LAZY_FILTERFALSE) {
            EmSym *keep = items[0];
            if (L->fn) {
                EmStatus st = em_call(T, L->fn, NULL, items, 1, NULL, &keep);
                if (st != EM_OK) return st;
            }
            int t = 0;
            EmStatus st = em_sym_truth(T, keep, &t);
            if (st != EM_OK) return st;
            if (!t == (L->kind == EM_LAZY_FILTER)) continue;
            return (*v = items[0]), EM_OK;
        }
        EmSym *tup = em_sym_new(T, SYM_TUPLE); /* ZIP, ENUM */
        for (int i = 0; tup && i < k; i++)
            if (em_vec_push(&tup->items, items[i])) return PyErr_NoMemory(), EM_ERR;
        return (*v = tup) ? EM_OK : EM_ERR;
    }
}

EmStatus em_lazy_step(EmTracer *T, EmSym *it, int *made) {
    EmLazy *L = it->lazy;
    *made = 0;
    if (L->done) return EM_OK;
    if (it->items.len >= EM_LAZY_MAX_ITEMS)
        return em_trace_fail(T, EMA_TOO_LONG, "an iterator of more than %d items taken whole", EM_LAZY_MAX_ITEMS);
    EmSym *v = NULL;
    EmStatus st;
    if (L->kind == EM_LAZY_GEN) {
        EmSym *none = em_sym_const(T, Py_None);
        st = none ? gen_run(T, it, none, NULL, &v) : EM_ERR;
    } else if (L->kind == EM_LAZY_PEEK) {
        st = peek_next(T, it, &v);
    } else {
        st = lazy_next(T, L, &v);
    }
    if (st != EM_OK) {
        L->done = 1;
        return st;
    }
    if (!v) {
        L->done = 1;
        return EM_OK;
    }
    if (em_vec_push(&it->items, v)) return PyErr_NoMemory(), EM_ERR;
    *made = 1;
    return EM_OK;
}
