/* em_trace.c: the interpreter loop. Sets up symbolic locals for a fresh frame, decodes one
 * instruction at a time, dispatches through the handler table (em_trace_ops.def) and
 * turns the returned value into the output tree. Aborts carry a reason from em_aborts.def.
 */
#include <stdarg.h>
#include <stdio.h>

#include "em_rec.h"

#include "../pyver/em_state.h"

#define EM_MAX_STEPS 200000

static const char *const abort_fmt[] = {
#define X(e, fmt) fmt,
#include "em_aborts.def"
#undef X
};

static EmStatus fail_v(EmTracer *T, EmAbort why, const char *fmt, va_list ap) {
    char detail[160];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    T->abort = why;
    T->abort_line = em_trace_lineno(T);
    Py_XSETREF(T->abort_file, Py_NewRef(T->code->co_filename));
    snprintf(T->abort_detail, sizeof(T->abort_detail), abort_fmt[why], detail);
    return EM_ABORT;
}

EmStatus em_trace_fail(EmTracer *T, EmAbort why, const char *fmt, ...) {
    if (PyErr_Occurred()) return EM_ERR;
    va_list ap;
    va_start(ap, fmt);
    EmStatus st = fail_v(T, why, fmt, ap);
    va_end(ap);
    return st;
}

EmStatus em_trace_abandon(EmTracer *T, EmAbort why, const char *fmt, ...) {
    if (PyErr_Occurred() && (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError)))
        return EM_ERR;
    PyErr_Clear(); /* the program's own Exception: Python raises it again (see em_trace.h) */
    va_list ap;
    va_start(ap, fmt);
    EmStatus st = fail_v(T, why, fmt, ap);
    va_end(ap);
    return st;
}

int em_trace_lineno(EmTracer *T) { return PyCode_Addr2Line(T->code, T->cur * 2); }

EM_NEW PyObject *em_trace_abort_message(const EmTracer *T) {
    return PyUnicode_FromFormat("%U:%d: %s", T->abort_file ? T->abort_file : T->code->co_filename, T->abort_line,
                                T->abort_detail);
}

/* Stack helpers for handlers. */
EmStatus em_push(EmTracer *T, EmSym *s) {
    if (!s) return PyErr_Occurred() ? EM_ERR : EM_ABORT;
    EM_ASSERT(T->sp >= 0, "stack depth %d", T->sp);
    if (T->sp >= T->stack_cap) return em_trace_fail(T, EMA_VALUE, "stack overflow");
    T->stack[T->sp++] = s;
    return EM_OK;
}

static EmStatus setup_locals(EmTracer *T) {
    PyCodeObject *co = T->code;
    int n = em_code_nlocalsplus(co), nfree = em_code_nfree(co);
    int nargs = co->co_argcount + co->co_kwonlyargcount + !!(co->co_flags & CO_VARARGS) +
                !!(co->co_flags & CO_VARKEYWORDS);
    T->nlocals = n;
    T->locals = calloc((size_t)n + 1, sizeof(EmSym *));
    T->stack_cap = co->co_stacksize + 8;
    T->stack = calloc((size_t)T->stack_cap, sizeof(EmSym *));
    T->arg_slots = malloc(sizeof(int32_t) * ((size_t)n + 1));
    if (!T->locals || !T->stack || !T->arg_slots) return PyErr_NoMemory(), EM_ERR;
    for (int i = 0; i <= n; i++) T->arg_slots[i] = -1;
    for (int i = 0; i < n; i++) {
        PyObject *name = em_code_name(co, i);
        int kind = em_code_kind(co, i);
        PyObject *v = NULL;
        int32_t slot = -1;
        if (kind & EM_CO_FAST_FREE) { /* read (and guarded) on first use */
            int fi = i - (n - nfree);
            if (!T->in.closure || fi >= PyTuple_GET_SIZE(T->in.closure)) continue;
            if (!(T->locals[i] = em_prog_cell(T, PyTuple_GET_ITEM(T->in.closure, fi)))) return EM_ERR;
            continue;
        } else if (i < nargs) {
            v = T->in.localsplus[i];
            if (!v) continue;
            slot = em_guard_local(T->P, i, name);
        } else {
            continue;
        }
        if (slot < 0) return EM_ERR;
        T->arg_slots[i] = slot;
        /* wrapping is lazy for arguments: done on first load (em_local_get) */
        EmSym *s = em_sym_new(T, SYM_NULL);
        if (!s) return EM_ERR;
        s->src = slot;
        s->pos = EM_POS_LAZY_ARG;
        s->obj = Py_NewRef(v);
        T->locals[i] = s;
    }
    return EM_OK;
}

/* Realizes an argument the first time it is read. */
EmSym *em_local_get(EmTracer *T, int i, EmStatus *st) {
    EmSym *s = T->locals[i];
    *st = EM_OK;
    if (!s) { /* CPython's error (the driver breaks at such a read in the frame itself: it raises there) */
        *st = em_trace_raise_msg(T, PyExc_UnboundLocalError,
                                 "cannot access local variable '%U' where it is not associated with a value",
                                 em_code_name(T->code, i));
        return NULL;
    }
    if (s->kind == SYM_NULL && s->pos == EM_POS_LAZY_ARG) {
        EmSym *w = em_sym_wrap(T, s->obj, s->src, st);
        if (!w) return NULL;
        PyCodeObject *co = T->code;
        if (w->kind == SYM_DICT && (co->co_flags & CO_VARKEYWORDS) &&
            i == co->co_argcount + co->co_kwonlyargcount + !!(co->co_flags & CO_VARARGS))
            w->pos = EM_POS_FRAME_KWARGS;
        T->locals[i] = w;
        return w;
    }
    return s;
}

typedef EmStatus (*EmHandler)(EmTracer *T, const EmInstr *in);

static EmStatus dispatch(EmTracer *T, const EmInstr *in) {
    switch (in->op) {
#define X(name, fn) \
    case EMBC_##name: return fn(T, in);
#include "em_trace_ops.def"
#undef X
        default: return em_trace_fail(T, EMA_OPCODE, "%s", em_bc_names[in->op]);
    }
}

static EmStatus same_out(EmTracer *T, EmSym *s) {
    EmOut o = {.kind = OUT_SAME, .v = s->out_at};
    return em_vec_push(&T->out, o) ? (PyErr_NoMemory(), EM_ERR) : EM_OK;
}

static EmStatus build_out(EmTracer *T, EmSym *s, int depth);

/* Appends entry o, which owns o->obj (released when the append fails). */
static EmStatus push_out(EmTracer *T, EmOut o) {
    if (!em_vec_push(&T->out, o)) return EM_OK;
    Py_XDECREF(o.obj);
    return PyErr_NoMemory(), EM_ERR;
}

/* Appends the trees of items[from, to). */
static EmStatus out_children(EmTracer *T, EmSym **items, int32_t from, int32_t to, int depth) {
    for (int32_t i = from; i < to; i++) {
        EmStatus st = build_out(T, items[i], depth + 1);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* A graph value (a tensor, a symbolic int): a graph output (each node output once). */
static EmStatus out_node(EmTracer *T, EmRef ref) {
    /* AOTAutograd makes an output that is a view again, in the grad mode the graph ends in: a
     * view made without grad mode would get autograd history eager's has not */
    for (int32_t i = 0; i < T->nograd_views.len && !T->G->own_executor; i++)
        if (T->nograd_views.data[i] == ref) T->G->own_executor = EM_OWN_NOGRAD_VIEW;
    int32_t idx = -1;
    for (int32_t i = 0; i < T->G->outputs.len; i++)
        if (T->G->outputs.data[i] == ref) idx = i;
    if (idx < 0) {
        idx = T->G->outputs.len;
        if (em_vec_push(&T->G->outputs, ref)) return PyErr_NoMemory(), EM_ERR;
    }
    return push_out(T, (EmOut){.kind = OUT_VALUE, .v = idx});
}

/* Appends OUT_CALL of ember._rules' function `name` over the nargs trees that follow. */
static EmStatus push_helper_call(EmTracer *T, const char *name, int32_t nargs) {
    PyObject *f = PyObject_GetAttrString(em_state.meta_run, name);
    return f ? push_out(T, (EmOut){.kind = OUT_CALL, .v = nargs, .obj = f}) : EM_ERR;
}

/* A constant sym for the int v (NULL on error). */
static EmSym *int_const(EmTracer *T, long v) {
    PyObject *o = PyLong_FromLong(v);
    EmSym *s = o ? em_sym_const(T, o) : NULL;
    Py_XDECREF(o);
    return s;
}

/* An nn.Parameter made in the trace (em_obj.c new_parameter): the graph's tensor made one in
 * place (ember._rules.as_parameter), every time it appears. */
static EmStatus out_parameter(EmTracer *T, EmSym *s) {
    EmStatus st = push_helper_call(T, "as_parameter", 1);
    return st == EM_OK ? out_node(T, s->ref) : st;
}

static EmStatus out_int(EmTracer *T, EmSym *s) {
    EmStatus st = EM_OK;
    EmRef r = em_int_ref(T, s->expr, &st);
    return r < 0 ? st : out_node(T, r);
}

/* A set made while tracing: an exact copy of it per call (OUT_SETCOPY), as the one set each
 * call of the Python code makes. The trace's set is not changed after the trace. */
static EmStatus out_set(EmTracer *T, EmSym *s) {
    if (s->out_at >= 0) return same_out(T, s);
    s->out_at = T->out.len;
    return push_out(T, (EmOut){.kind = OUT_SETCOPY, .obj = Py_NewRef(s->obj)});
}

/* An exception made while tracing (from constants): a new equal one per call
 * (ember._rules.fresh_exception), one object wherever the tree names it. One the trace raised
 * is not: eager's has a traceback. */
static EmStatus out_exception(EmTracer *T, EmSym *s) {
    int raised = T->raised ? PySequence_Contains(T->raised, s->obj) : 0;
    if (raised < 0) return EM_ERR;
    if (raised) return em_trace_fail(T, EMA_RETURN, "a %s raised while tracing", Py_TYPE(s->obj)->tp_name);
    if (s->out_at >= 0) return same_out(T, s);
    s->out_at = T->out.len;
    EmStatus st = push_helper_call(T, "fresh_exception", 1);
    return st == EM_OK ? push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(s->obj)}) : st;
}

/* The spec (borrowed) of a class made in the trace (T->made_classes), or NULL. */
static PyObject *made_class_spec(EmTracer *T, PyObject *cls) {
    return T->made_classes && PyType_Check(cls) ? PyDict_GetItemWithError(T->made_classes, cls) : NULL;
}

/* A class made in the trace: made again per call (ember._rules.namedtuple_again), one object
 * wherever the tree names it (its instances' class too). */
static EmStatus out_made_class(EmTracer *T, PyObject *cls, PyObject *spec) {
    if (!T->made_out && !(T->made_out = PyDict_New())) return EM_ERR;
    PyObject *at = PyDict_GetItemWithError(T->made_out, cls);
    if (at) return push_out(T, (EmOut){.kind = OUT_SAME, .v = (int32_t)PyLong_AsLong(at)});
    PyObject *here = PyErr_Occurred() ? NULL : PyLong_FromSsize_t(T->out.len);
    int bad = !here || PyDict_SetItem(T->made_out, cls, here);
    Py_XDECREF(here);
    if (bad) return EM_ERR;
    EmStatus st = push_helper_call(T, "namedtuple_again", 1);
    return st == EM_OK ? push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(spec)}) : st;
}

/* 1 when constant v is, holds or is an instance of a class made in the trace (containers
 * looked into a few levels deep), 0 if not, -1 on error. */
static int holds_made(EmTracer *T, PyObject *v, int depth) {
    if (made_class_spec(T, v) || made_class_spec(T, (PyObject *)Py_TYPE(v))) return 1;
    if (PyErr_Occurred()) return -1;
    if (depth > 4) return 0;
    PyObject *items = PyDict_Check(v)                                            ? PyDict_Items(v)
                      : PyTuple_Check(v) || PyList_Check(v) || PyAnySet_Check(v) ? PySequence_List(v)
                                                                                 : NULL;
    if (!items) return PyErr_Occurred() ? -1 : 0;
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(items); i++)
        r = holds_made(T, PyList_GET_ITEM(items, i), depth + 1);
    Py_DECREF(items);
    return r;
}

/* 1 when sym o is item `depth` levels down of s (a container's item, an object's attribute, a
 * cell's value). */
static int holds(const EmSym *s, const EmSym *o, int depth) {
    if (s == o) return 1;
    if (!s || depth > 4 || s->kind == SYM_TENSOR || s->kind == SYM_CONST || s->kind == SYM_ITER ||
        em_weakref_made(s)) /* a weakref does not hold its referent */
        return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if (holds(s->items.data[i], o, depth + 1)) return 1;
    return 0;
}

int em_frames_hold(EmTracer *T, const EmSym *o) {
    for (const EmFrame *f = &T->frame; f; f = f->parent) {
        for (int i = 0; i < f->nlocals; i++)
            if (holds(f->locals[i], o, 0)) return 1;
        for (int i = 0; i < f->sp; i++)
            if (holds(f->stack[i], o, 0)) return 1;
    }
    return 0;
}

/* The object sym whose id() in the trace is int v (T->fake_ids), or NULL (an error set, or not
 * such an int). */
static EmSym *fake_id_of(EmTracer *T, PyObject *v) {
    if (!T->fake_ids || !PyLong_CheckExact(v) || _PyLong_Sign(v) >= 0) return NULL;
    PyObject *k, *fake;
    Py_ssize_t pos = 0;
    while (PyDict_Next(T->fake_ids, &pos, &k, &fake)) {
        int eq = PyObject_RichCompareBool(fake, v, Py_EQ);
        if (eq) return eq < 0 ? NULL : (EmSym *)PyLong_AsVoidPtr(k);
    }
    return NULL;
}

/* A constant, or an object of the frame (that very object, from its slot). */
static EmStatus out_value(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_CONST) {
        if (em_set_made(s)) return out_set(T, s); /* a fresh set per call, as Python makes */
        EmSym *of = fake_id_of(T, s->obj);
        if (of || PyErr_Occurred()) { /* id(o) of an object made in the trace: id() of o's output */
            PyObject *id = of ? PyDict_GetItemString(PyEval_GetBuiltins(), "id") : NULL;
            EmStatus st = id ? push_out(T, (EmOut){.kind = OUT_CALL, .v = 1, .obj = Py_NewRef(id)}) : EM_ERR;
            return st == EM_OK ? build_out(T, of, 0) : st;
        }
        if (T->made_classes) {
            PyObject *spec = made_class_spec(T, s->obj);
            if (spec) return out_made_class(T, s->obj, spec);
            int held = PyErr_Occurred() ? -1 : holds_made(T, s->obj, 0);
            if (held)
                return held < 0 ? EM_ERR : em_trace_fail(T, EMA_RETURN, "a constant holding a class made in the trace");
        }
        if (PyExceptionInstance_Check(s->obj)) return out_exception(T, s);
        if (PySet_CheckExact(s->obj)) return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src});
        return push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(s->obj)});
    }
    if (s->src < 0) /* a constant of the trace (method, function of a trusted module) */
        return push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(s->obj)});
    return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src});
}

/* A cell made while tracing (a variable a closure captured): a new cell per call holding the
 * value the trace ended with, one object wherever the tree names it (closures, the frame's
 * slot at a break). A cell of the program is that cell (its writes replayed as stores). */
static EmStatus out_cell(EmTracer *T, EmSym *s, int depth) {
    if (s->pos == 1) /* the program's cell itself (its slot made when a closure captured it) */
        return s->src < 0 ? em_trace_fail(T, EMA_RETURN, "a cell of the program without a slot")
                          : push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src});
    if (s->out_at >= 0) return same_out(T, s);
    s->out_at = T->out.len;
    int full = s->items.len > 0;
    EmStatus st = push_out(T, (EmOut){.kind = OUT_CELL, .v = full});
    return st == EM_OK ? out_children(T, s->items.data, 0, full, depth) : st;
}

/* A function made while tracing with a closure or defaults of the trace: a new one per call
 * over the cells' outputs, then (if it has them) the tuple of its defaults. */
static EmStatus out_closure(EmTracer *T, EmSym *s, int depth) {
    if (s->out_at >= 0) return same_out(T, s);
    PyObject *own = PyModule_Check(em_state.meta_run) ? PyModule_GetDict(em_state.meta_run) : NULL;
    if (own && PyFunction_GET_GLOBALS(s->obj) == own) /* ember._rules' stand-in for operator.itemgetter... */
        return em_trace_fail(T, EMA_RETURN, "an operator.%s made in the trace left it",
                             PyUnicode_AsUTF8(((PyFunctionObject *)s->obj)->func_name));
    s->out_at = T->out.len;
    int32_t ncells = s->items.len - s->pos;
    EmStatus st = push_out(T, (EmOut){.kind = OUT_FUNC, .v = ncells + !!s->pos, .obj = Py_NewRef(s->obj)});
    if (st == EM_OK) st = out_children(T, s->items.data, 0, ncells, depth);
    if (st == EM_OK && s->pos) st = push_out(T, (EmOut){.kind = OUT_TUPLE, .v = s->pos});
    return st == EM_OK && s->pos ? out_children(T, s->items.data, ncells, s->items.len, depth + 1) : st;
}

/* A partial: read from the frame, the object itself; made while tracing,
 * _rules.call_kw(functools.partial, (func, *args), {keywords}) per call (once per output). */
static EmStatus out_partial(EmTracer *T, EmSym *s, int depth) {
    if (s->src >= 0) return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src});
    if (s->out_at >= 0) return same_out(T, s);
    s->out_at = T->out.len;
    PyObject *key_cls = PyObject_GetAttrString(em_state.meta_run, "_CmpKey"); /* cmp_to_key's stand-in */
    if (!key_cls) return EM_ERR;
    EmSym *f = s->items.data[0];
    int is_key = (f->kind == SYM_CONST || f->kind == SYM_OBJ) && f->obj == key_cls && s->pos == 1 && !s->keys.len;
    Py_DECREF(key_cls);
    if (is_key) { /* functools.cmp_to_key(cmp): the real one again */
        EmStatus st = push_helper_call(T, "real_cmp_to_key", 1);
        return st == EM_OK ? build_out(T, s->items.data[1], depth + 1) : st;
    }
    PyObject *names = PyTuple_New(s->keys.len);
    for (int32_t i = 0; names && i < s->keys.len; i++) PyTuple_SET_ITEM(names, i, Py_NewRef(s->keys.data[i]));
    EmStatus st = names ? push_helper_call(T, "call_kw", 3) : EM_ERR;
    if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(EM_KNOWN(partial))});
    if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_TUPLE, .v = 1 + s->pos});
    if (st == EM_OK) st = out_children(T, s->items.data, 0, 1 + s->pos, depth + 1);
    if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_DICT, .v = s->keys.len, .obj = Py_NewRef(names)});
    Py_XDECREF(names);
    return st == EM_OK ? out_children(T, s->items.data, 1 + s->pos, s->items.len, depth + 1) : st;
}

/* The keys of DICT sym d as a new tuple (NULL on error). */
static PyObject *dict_keys_tuple(EmSym *d) {
    PyObject *keys = PyTuple_New(d->keys.len);
    for (int32_t i = 0; keys && i < d->keys.len; i++) PyTuple_SET_ITEM(keys, i, Py_NewRef(d->keys.data[i]));
    return keys;
}

/* make(pairs) at run time (OUT_ITER): dict sym s's (key, value) pairs, each key built from its
 * sym (a token's: the tensor or object it stands for). make is stolen. */
static EmStatus out_pairs(EmTracer *T, EmSym *s, PyObject *make, int depth) {
    EmVec(EmSym *) pairs = {0};
    EmStatus st = EM_OK;
    for (int32_t i = 0; st == EM_OK && i < s->keys.len; i++) {
        EmSym *k = em_dict_key_sym(T, s->keys.data[i]), *p = k ? em_sym_new(T, SYM_TUPLE) : NULL;
        if (!p || em_vec_push(&p->items, k) || em_vec_push(&p->items, s->items.data[i]) || em_vec_push(&pairs, p))
            st = p ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    }
    if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_ITER, .obj = make, .v = pairs.len});
    else Py_DECREF(make);
    if (st == EM_OK) st = out_children(T, pairs.data, 0, pairs.len, depth);
    em_vec_free(&pairs);
    return st;
}

/* A dict made while tracing that is an OrderedDict or defaultdict (its type, a defaultdict's
 * bound to its factory) or has keys that are tokens: made at run time from its pairs. */
static EmStatus out_dict_of(EmTracer *T, EmSym *s, int depth) {
    PyObject *make = NULL;
    if (!s->seq_type) {
        make = Py_NewRef((PyObject *)&PyDict_Type);
    } else if (s->of.len || s->seq_type == EM_KNOWN(defaultdict)) { /* defaultdict: partial(defaultdict, factory) */
        EmSym *f = s->of.len ? s->of.data[0] : NULL; /* a function made while tracing without a closure: that
                                                     * function, as out_value; none: None */
        PyObject *fac = !f                                    ? Py_NewRef(Py_None)
                        : f->kind == SYM_OBJ && !f->items.len ? Py_NewRef(f->obj)
                                                              : em_sym_value(T, f);
        PyObject *partial = fac ? PyImport_ImportModule("functools") : NULL;
        if (!fac && !PyErr_Occurred())
            return em_trace_fail(T, EMA_RETURN, "a defaultdict whose factory is not a value");
        make = partial ? PyObject_CallMethod(partial, "partial", "OO", s->seq_type, fac) : NULL;
        Py_XDECREF(fac);
        Py_XDECREF(partial);
        if (!make) return EM_ERR;
    } else {
        make = Py_NewRef(s->seq_type);
    }
    s->out_at = T->out.len;
    return out_pairs(T, s, make, depth);
}

/* A tuple, list or dict: read from the frame, the object itself; made while tracing, built
 * once (OUT_SAME where it appears again: `r = (t, 1); return r, r`). */
static EmStatus out_container(EmTracer *T, EmSym *s, int depth) {
    if (s->src >= 0) return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src}); /* never mutated while tracing */
    if (s->diverged) return em_dict_diverged(T, "leaving the trace:");
    if (s->out_at >= 0) return same_out(T, s);
    if (s->kind == SYM_DICT && s->seq_type == (PyObject *)&PyDictProxy_Type) { /* cls.__dict__, read per call */
        if (!s->spec) return em_trace_fail(T, EMA_RETURN, "a mappingproxy of no class");
        s->out_at = T->out.len;
        EmStatus st = push_helper_call(T, "class_dict", 1);
        return st == EM_OK ? push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(s->spec)}) : st;
    }
    int fake_keys = 0; /* keys that are id()s of objects made in the trace: built per call too */
    for (int32_t i = 0; s->kind == SYM_DICT && T->fake_ids && !fake_keys && i < s->keys.len; i++)
        if (!(fake_keys = fake_id_of(T, s->keys.data[i]) != NULL) && PyErr_Occurred()) return EM_ERR;
    if (s->kind == SYM_DICT && (s->seq_type || fake_keys || em_dict_has_tokens(s))) return out_dict_of(T, s, depth);
    if (s->kind == SYM_LIST && s->seq_type) { /* a deque: deque(items) at run time */
        s->out_at = T->out.len;
        PyObject *make = em_deque_maker(s);
        EmStatus st = make ? push_out(T, (EmOut){.kind = OUT_ITER, .obj = make, .v = s->items.len}) : EM_ERR;
        return st == EM_OK ? out_children(T, s->items.data, 0, s->items.len, depth) : st;
    }
    PyObject *made = s->kind == SYM_TUPLE && s->seq_type ? made_class_spec(T, s->seq_type) : NULL;
    if (made) { /* an instance of a class made in the trace: of the class made for this call */
        s->out_at = T->out.len;
        EmStatus st = push_helper_call(T, "namedtuple_make", 2);
        if (st == EM_OK) st = out_made_class(T, s->seq_type, made);
        if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_TUPLE, .v = s->items.len});
        return st == EM_OK ? out_children(T, s->items.data, 0, s->items.len, depth) : st;
    }
    if (PyErr_Occurred()) return EM_ERR;
    EmOut o = {.kind = s->kind == SYM_TUPLE ? OUT_TUPLE : s->kind == SYM_LIST ? OUT_LIST : OUT_DICT, .v = s->items.len};
    if (s->kind == SYM_TUPLE && s->seq_type) o.obj = Py_NewRef(s->seq_type);
    if (s->kind == SYM_DICT && !(o.obj = dict_keys_tuple(s))) return EM_ERR;
    s->out_at = T->out.len;
    EmStatus st = push_out(T, o);
    return st == EM_OK ? out_children(T, s->items.data, 0, s->items.len, depth) : st;
}

/* The items of a list or dict s from the frame, as a new list or dict (OUT_SETITEMS's second
 * child). */
EmStatus em_trace_build_content(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_DICT && em_dict_has_tokens(s)) return out_pairs(T, s, Py_NewRef((PyObject *)&PyDict_Type), 1);
    EmOut o = {.kind = s->kind == SYM_LIST ? OUT_LIST : OUT_DICT, .v = s->items.len};
    if (s->kind == SYM_DICT && !(o.obj = dict_keys_tuple(s))) return EM_ERR;
    EmStatus st = push_out(T, o);
    return st == EM_OK ? out_children(T, s->items.data, 0, s->items.len, 1) : st;
}

/* An iterator over known items: made again at run time as an iterator of its type
 * (_rules.ITER_REBUILD) over the items not yet taken. */
/* zip(...) leaving the trace: Python's zip over each list or dict argument itself (iter_at past
 * the pos items taken) and over the rest of the items of any other argument (a tuple, a range:
 * not changed by later code), ember._rules.zip_at. */
static EmStatus out_zip(EmTracer *T, EmSym *s, int depth) {
    Py_ssize_t n = PyTuple_GET_SIZE(s->spec);
    PyObject *whats = PyTuple_New(n);
    EmSym *ps = int_const(T, s->pos), *ws = NULL;
    for (Py_ssize_t i = 0; whats && i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(s->spec, i);
        PyTuple_SET_ITEM(whats, i, e == Py_None ? Py_NewRef(Py_None) : Py_NewRef(PyTuple_GET_ITEM(e, 0)));
    }
    if (whats) ws = em_sym_const(T, whats);
    Py_XDECREF(whats);
    if (!ps || !ws) return EM_ERR;
    s->out_at = T->out.len;
    EmStatus st = push_helper_call(T, "zip_at", 2 + (int32_t)n);
    if (st == EM_OK) st = build_out(T, ps, depth + 1);
    if (st == EM_OK) st = build_out(T, ws, depth + 1);
    for (Py_ssize_t i = 0; st == EM_OK && i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(s->spec, i);
        if (e != Py_None) {
            st = build_out(T, s->of.data[PyLong_AsLong(PyTuple_GET_ITEM(e, 1))], depth + 1);
            continue;
        }
        EmSym *col = em_sym_new(T, SYM_TUPLE); /* the argument's items not taken yet */
        for (int32_t k = s->pos; col && k < s->items.len; k++)
            if (em_vec_push(&col->items, s->items.data[k]->items.data[i])) col = NULL;
        st = col ? build_out(T, col, depth + 1) : (PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR));
    }
    return st;
}

/* An iterator over one list or dict (made in the trace or the frame's) itself: Python's over
 * the very container (ember._rules.iter_at), which sees the changes the code after the graph
 * makes. CALL_NEXT for other iterators, rebuilt from their remaining items. */
static EmStatus out_live_iter(EmTracer *T, EmSym *s, int depth) {
    EmSym *c = s->of.len == 1 ? s->of.data[0] : NULL;
    const char *what = NULL;
    if (c && c->kind == SYM_DICT && s->of_what) {
        what = s->of_what == 'k' ? "k" : s->of_what == 'v' ? "v" : "i";
    } else if (c && c->kind == SYM_LIST && !c->seq_type && s->seq_type) {
        const char *tn = ((PyTypeObject *)s->seq_type)->tp_name;
        what = !strcmp(tn, "list_iterator") ? "l" : !strcmp(tn, "list_reverseiterator") ? "r" : NULL;
    }
    int32_t at = s->pos; /* iter_at's position: the items taken; for reversed(), the next index */
    if (what && what[0] == 'r') {
        EmStatus ust = em_iter_use(T, s); /* its items anew if the list changed since */
        if (ust != EM_OK) return ust;
        at = s->items.len - 1 - s->pos;
    }
    /* enumerate(list): Python's over that list, counting on from the next item's index */
    EmSym *next = s->pos < s->items.len ? s->items.data[s->pos] : NULL;
    PyObject *arg0 = s->spec && PyTuple_Check(s->spec) && PyTuple_GET_SIZE(s->spec) ? PyTuple_GET_ITEM(s->spec, 0)
                                                                                    : NULL;
    int direct = arg0 && PyTuple_Check(arg0) && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(arg0, 0), "l") == 0;
    int is_enum = s->seq_type == (PyObject *)&PyEnum_Type && direct && c && c->kind == SYM_LIST && !c->seq_type &&
                  next && next->kind == SYM_TUPLE && next->items.len == 2 && next->items.data[0]->kind == SYM_CONST;
    if (is_enum) what = "l";
    int over_iter = 0; /* an argument an iterator over a list or dict: its snapshot could be stale */
    for (Py_ssize_t i = 0; s->spec && PyTuple_Check(s->spec) && i < PyTuple_GET_SIZE(s->spec); i++)
        over_iter |= PyTuple_GET_ITEM(s->spec, i) == Py_False;
    if (over_iter)
        return em_trace_fail(T, EMA_RETURN, "a %s over an iterator of a list or dict left the trace",
                             ((PyTypeObject *)s->seq_type)->tp_name);
    if (!what && s->seq_type == (PyObject *)&PyZip_Type && s->spec && PyTuple_Check(s->spec))
        return out_zip(T, s, depth);
    if (!what) {
        for (int32_t k = 0; k < s->of.len; k++) /* another iterator over them would be a snapshot */
            if (s->of.data[k]->kind == SYM_LIST || s->of.data[k]->kind == SYM_DICT)
                return em_trace_fail(T, EMA_RETURN, "a %s over a %s left the trace",
                                     s->seq_type ? ((PyTypeObject *)s->seq_type)->tp_name : "iterator",
                                     em_sym_describe(s->of.data[k]));
        return CALL_NEXT;
    }
    PyObject *w = PyUnicode_FromString(what);
    EmSym *ps = int_const(T, at), *ws = w ? em_sym_const(T, w) : NULL;
    Py_XDECREF(w);
    if (!ps || !ws) return EM_ERR;
    s->out_at = T->out.len;
    EmStatus st = push_helper_call(T, is_enum ? "enumerate_at" : "iter_at", 3);
    if (st == EM_OK) st = build_out(T, c, depth + 1);
    if (st == EM_OK) st = build_out(T, ps, depth + 1);
    return st == EM_OK ? build_out(T, is_enum ? next->items.data[0] : ws, depth + 1) : st;
}

/* An iterator made again by its type (or the ember._rules function helper), called on args
 * (em_lazy_remake), once per output. */
static EmStatus out_remade(EmTracer *T, EmSym *s, EmSym **args, int n, const char *helper, int depth) {
    if (s->out_at >= 0) return same_out(T, s);
    s->out_at = T->out.len;
    EmStatus st = helper ? push_helper_call(T, helper, n)
                         : push_out(T, (EmOut){.kind = OUT_CALL, .v = n, .obj = Py_NewRef(s->seq_type)});
    for (int i = 0; st == EM_OK && i < n; i++) st = build_out(T, args[i], depth + 1);
    return st;
}

/* A map, filter or zip the trace has not run to its end: map(fn, *sources) (filter(fn, source),
 * zip(*sources)) made after the graph over its sources where the trace left them, so Python
 * makes the rest of its items lazily, as it would have (n <= 8: em_lazy_make's bound). */
static EmStatus out_lazy_map(EmTracer *T, EmSym *s, EmSym *fn, EmSym **srcs, int n, int depth) {
    EmSym *args[9];
    int zip = s->seq_type == (PyObject *)&PyZip_Type;
    if (!zip && !(args[0] = fn ? fn : em_sym_const(T, Py_None))) return EM_ERR;
    for (int i = 0; i < n; i++) args[!zip + i] = srcs[i];
    return out_remade(T, s, args, !zip + n, NULL, depth);
}

/* A view of a dict (keys(), values(), items()): that view of the dict's output, made per call.
 * Not of an instance dict read whole: its copy is not the object's own __dict__. */
static EmStatus out_view(EmTracer *T, EmSym *s, int depth) {
    EmSym *d = s->items.data[0];
    if (em_sym_idict_copy(T, d)) return em_trace_fail(T, EMA_RETURN, "a view of an instance dict");
    if (s->pos == 'm' && s->src >= 0) return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src}); /* the frame's */
    if (s->out_at >= 0) return same_out(T, s);
    char what[2] = {(char)s->pos, 0};
    PyObject *w = PyUnicode_FromString(what);
    EmSym *ws = w ? em_sym_const(T, w) : NULL;
    Py_XDECREF(w);
    if (!ws) return EM_ERR;
    s->out_at = T->out.len;
    EmStatus st = push_helper_call(T, "dict_view", 2);
    if (st == EM_OK) st = build_out(T, d, depth + 1);
    return st == EM_OK ? build_out(T, ws, depth + 1) : st;
}

/* A generator made in the trace, suspended at a yield (em_gen_suspended): per call, a new
 * generator of the resume code the driver makes from OUT_GEN's spec (em_emit_gen_resume),
 * given its frame's cells, live locals and stack as the trace left them and advanced to that
 * yield, so it goes on from there as the original would. The children are the function, the
 * code's own cells in slot order, the live locals, then the stack (its NULLs left out) with
 * the yielded value's place last. out_at is set after them: a generator its own frame refers
 * to is not rebuilt (nesting too deep). */
static EmStatus out_gen(EmTracer *T, EmSym *s, EmSym *fn, const EmFrame *fr, int depth) {
    PyCodeObject *co = fr->code;
    int nslots = em_code_nlocalsplus(co) - em_code_nfree(co), n = 1;
    PyObject *live = PyList_New(0), *nulls = PyBytes_FromStringAndSize(NULL, fr->sp + 1), *spec = NULL;
    for (int i = 0; live && i < nslots; i++) {
        if (em_code_kind(co, i) & EM_CO_FAST_CELL) {
            n++;
        } else if (fr->locals[i]) {
            PyObject *k = PyLong_FromLong(i);
            if (!k || PyList_Append(live, k)) Py_CLEAR(live);
            Py_XDECREF(k);
            n++;
        }
    }
    for (int t = 0; nulls && t <= fr->sp; t++) {
        int null = t < fr->sp && fr->stack[t]->kind == SYM_NULL;
        PyBytes_AS_STRING(nulls)[t] = (char)null;
        n += !null;
    }
    PyObject *lt = live ? PyList_AsTuple(live) : NULL;
    if (lt && nulls) spec = Py_BuildValue("(OiOOi)", co, fr->cur, lt, nulls, PyCode_Addr2Line(co, fr->cur * 2));
    Py_XDECREF(live);
    Py_XDECREF(lt);
    Py_XDECREF(nulls);
    if (!spec) return EM_ERR;
    int32_t at = T->out.len;
    EmStatus st = push_out(T, (EmOut){.kind = OUT_GEN, .v = n, .obj = spec});
    if (st == EM_OK) st = build_out(T, fn, depth + 1);
    for (int i = 0; st == EM_OK && i < nslots; i++) { /* the cells: one a closure holds, or a new one */
        EmSym *v = fr->locals[i];
        if (!(em_code_kind(co, i) & EM_CO_FAST_CELL)) continue;
        if (v && v->kind == SYM_CELL) {
            st = build_out(T, v, depth + 1);
            continue;
        }
        st = push_out(T, (EmOut){.kind = OUT_CELL, .v = !!v});
        if (st == EM_OK && v) st = build_out(T, v, depth + 1);
    }
    for (int i = 0; st == EM_OK && i < nslots; i++)
        if (fr->locals[i] && !(em_code_kind(co, i) & EM_CO_FAST_CELL)) st = build_out(T, fr->locals[i], depth + 1);
    for (int t = 0; st == EM_OK && t < fr->sp; t++)
        if (fr->stack[t]->kind != SYM_NULL) st = build_out(T, fr->stack[t], depth + 1);
    EmSym *none = st == EM_OK ? em_sym_const(T, Py_None) : NULL;
    if (st == EM_OK) st = none ? build_out(T, none, depth + 1) : EM_ERR;
    if (st == EM_OK) s->out_at = at;
    return st;
}

static EmStatus out_iter(EmTracer *T, EmSym *s, int depth) {
    int taken, ended;
    if (em_lazy_peek_taken(s, &taken, &ended)) /* the frame's own, advanced (em_obj_effects_head) */
        return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src});
    if (!em_lazy_done(s)) { /* Python makes its items later, after the graph: not made here */
        EmSym *fn, **srcs, *call;
        int n;
        if (em_lazy_parts(s, &fn, &srcs, &n)) return out_lazy_map(T, s, fn, srcs, n, depth);
        EmSym *remade[4];
        const char *helper;
        int r = em_lazy_remake(T, s, remade, &n, &helper); /* repeat(x[, left]), count(next, step)... */
        if (r) return r < 0 ? EM_ERR : out_remade(T, s, remade, n, helper, depth);
        EmSym *obj = em_lazy_next_obj(s); /* a user iterator: the object itself, in its state */
        if (obj) return build_out(T, obj, depth + 1);
        const EmFrame *gfr;
        int susp = em_gen_suspended(T, s, &fn, &gfr);
        if (susp < 0) return EM_ERR;
        if (susp == 1) return s->out_at >= 0 ? same_out(T, s) : out_gen(T, s, fn, gfr, depth);
        if ((call = em_gen_call(T, s, &fn))) { /* a generator not started: made by its call again */
            if (s->out_at >= 0) return same_out(T, s);
            s->out_at = T->out.len;
            EmStatus st = push_helper_call(T, "call_kw", 3);
            if (st == EM_OK) st = build_out(T, fn, depth + 1);
            return st == EM_OK ? out_children(T, call->items.data, 0, 2, depth) : st;
        }
        if (PyErr_Occurred()) return EM_ERR;
        return em_trace_fail(T, EMA_RETURN, "a lazy iterator (%s) left the trace before its end",
                             ((PyTypeObject *)s->seq_type)->tp_name);
    }
    EmSym *gfn;
    const EmFrame *gfr;
    int gstate = em_gen_suspended(T, s, &gfn, &gfr);
    if (gstate < 0) return EM_ERR;
    if (gstate == 2) { /* a generator at its end: an ended one, made per call */
        if (s->out_at >= 0) return same_out(T, s);
        s->out_at = T->out.len;
        return push_helper_call(T, "ended_generator", 0);
    }
    EmStatus st = em_iter_use(T, s);
    if (st != EM_OK) return st;
    if (s->out_at >= 0) return same_out(T, s);
    if ((st = out_live_iter(T, s, depth)) != CALL_NEXT) return st;
    PyObject *table = PyObject_GetAttrString(em_state.meta_run, "ITER_REBUILD");
    PyObject *make = table && s->seq_type ? PyDict_GetItemWithError(table, s->seq_type) : NULL;
    Py_XDECREF(table);
    if (!make && PyErr_Occurred()) return EM_ERR;
    if (!make)
        return em_trace_fail(T, EMA_RETURN, "an iterator (%s) left the trace",
                             s->seq_type ? ((PyTypeObject *)s->seq_type)->tp_name : "of unknown type");
    s->out_at = T->out.len;
    st = push_out(T, (EmOut){.kind = OUT_ITER, .obj = Py_NewRef(make), .v = s->items.len - s->pos});
    return st == EM_OK ? out_children(T, s->items.data, s->pos, s->items.len, depth) : st;
}

/* An instance made while tracing: made at run time with its class's builtin __new__ (a
 * frozenset's given its contents, built first), its attribute dict then set as its __dict__ and
 * its contents put in with the base's filler (dict: __setitem__ per item; set: update; list:
 * extend). */
static EmStatus out_newobj(EmTracer *T, EmSym *s, int depth) {
    if (s->out_at >= 0) return same_out(T, s);
    PyTypeObject *ct = em_new_content_type(s);
    const char *fill = !ct || em_new_frozen(ct) ? NULL
                       : ct == &PySet_Type      ? "update"
                       : ct == &PyList_Type     ? "extend"
                                                : "__setitem__";
    PyObject *filler = Py_None;
    if (fill) {
        PyObject *name = PyUnicode_InternFromString(fill);
        if (!name) return EM_ERR;
        filler = _PyType_Lookup(ct, name);
        Py_DECREF(name);
        if (!filler) return em_trace_fail(T, EMA_RETURN, "%s without a builtin %s", ct->tp_name, fill);
    }
    s->out_at = T->out.len;
    PyObject *spec = PyTuple_Pack(2, (PyObject *)Py_TYPE(s->obj), filler);
    EmStatus st = spec ? push_out(T, (EmOut){.kind = OUT_NEWOBJ, .v = s->items.len, .obj = spec}) : EM_ERR;
    int frozen = em_new_frozen(ct);
    if (st == EM_OK && frozen) st = build_out(T, s->items.data[1], depth + 1);
    if (st == EM_OK) st = build_out(T, s->items.data[0], depth + 1);
    if (st == EM_OK && ct && !frozen) st = build_out(T, s->items.data[1], depth + 1);
    return st;
}

/* Appends the output tree of s. A tuple, list, dict or iterator made while tracing is built once:
 * where it appears again (two names, or inside another output) the tree says OUT_SAME, so
 * the frame sees one object, as eager Python does. */
static EmStatus build_out(EmTracer *T, EmSym *s, int depth) {
    if (depth > 32) return em_trace_fail(T, EMA_RETURN, "nesting too deep");
    switch (s->kind) {
        case SYM_TENSOR:
            return s->src < 0 && s->obj && Py_IS_TYPE(s->obj, em_state.param_type) ? out_parameter(T, s)
                                                                                   : out_node(T, s->ref);
        case SYM_INT: return out_int(T, s);
        case SYM_NDARRAY: { /* a numpy array over the graph's tensor, one per call wherever it appears */
            if (s->out_at >= 0) return same_out(T, s);
            s->out_at = T->out.len;
            EmStatus st = push_helper_call(T, s->pos ? "to_numpy_scalar" : "to_numpy", 1);
            return st == EM_OK ? out_node(T, s->items.data[0]->ref) : st;
        }
        case SYM_FLOAT: return push_out(T, (EmOut){.kind = OUT_SLOT, .v = s->src}); /* the frame's own float */
        case SYM_ITEM: return out_node(T, s->ref);
        case SYM_CONST: return out_value(T, s);
        case SYM_SET: /* a set (or frozenset) of its items' outputs, made per call */
            if (s->out_at >= 0) return same_out(T, s);
            s->out_at = T->out.len;
            return push_out(T, (EmOut){.kind = OUT_ITER, .obj = Py_NewRef(s->seq_type), .v = s->items.len}) == EM_OK
                       ? out_children(T, s->items.data, 0, s->items.len, depth)
                       : EM_ERR;
        case SYM_OBJ:
            if (!s->items.len) return out_value(T, s);
            if (PyFunction_Check(s->obj)) return out_closure(T, s, depth);
            if (em_weakref_made(s)) { /* weakref.ref(o), made per call */
                EmStatus st = push_out(
                    T, (EmOut){.kind = OUT_CALL, .v = 1, .obj = Py_NewRef((PyObject *)Py_TYPE(s->obj))});
                return st == EM_OK ? out_children(T, s->items.data, 0, 1, depth) : st;
            }
            return em_trace_fail(T, EMA_RETURN, "a %s object left the trace", Py_TYPE(s->obj)->tp_name); /* super() */
        case SYM_CELL: return out_cell(T, s, depth);
        case SYM_PARTIAL: return out_partial(T, s, depth);
        case SYM_SLICE: { /* slice(start, stop, step) of its bounds' values, made per call */
            EmStatus st = push_out(T, (EmOut){.kind = OUT_CALL, .v = 3, .obj = Py_NewRef((PyObject *)&PySlice_Type)});
            return st == EM_OK ? out_children(T, s->items.data, 0, 3, depth) : st;
        }
        case SYM_TUPLE:
        case SYM_LIST:
        case SYM_DICT: return out_container(T, s, depth);
        case SYM_ITER: return out_iter(T, s, depth);
        case SYM_VIEW: return out_view(T, s, depth);
        case SYM_NEW: return out_newobj(T, s, depth);
        case SYM_BOUND: { /* a bound method: fn.__get__(self) at run time; children self, fn */
            EmStatus st = push_out(T, (EmOut){.kind = OUT_BOUND, .v = 2});
            return st == EM_OK ? out_children(T, s->items.data, 0, 2, depth) : st;
        }
        case SYM_CTX: { /* made (or exited), not inside its block: made again (_rules.remake_ctx) */
            if (s->ctx_state == EM_CTX_ENTERED) return em_trace_fail(T, EMA_RETURN, "a context manager in use");
            if (s->out_at >= 0) return same_out(T, s);
            s->out_at = T->out.len;
            PyObject *prev = s->ctx_state == EM_CTX_IN_EFFECT ? PyBool_FromLong(s->prev_grad) : Py_NewRef(Py_None);
            EmStatus st = prev ? push_helper_call(T, "remake_ctx", 2) : EM_ERR;
            if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(s->spec)});
            if (st == EM_OK) st = push_out(T, (EmOut){.kind = OUT_CONST, .obj = Py_NewRef(prev)});
            Py_XDECREF(prev);
            return st;
        }
        case SYM_EXIT: /* a with block open at a break: left by the graph, entered again */
            if (em_ctx_is_generic_exit(s)) /* its __exit__ bound to it, as the frame holds it */
                return build_out(T, s->items.data[1], depth + 1);
            if (s->items.data[0]->ctx_state != EM_CTX_ENTERED)
                return em_trace_fail(T, EMA_RETURN, "__exit__ of a closed block");
            return push_out(T, (EmOut){.kind = OUT_REENTER, .obj = Py_NewRef(s->items.data[0]->spec)});
        default: return em_trace_fail(T, EMA_RETURN, "%s", em_sym_describe(s));
    }
}

EmStatus em_trace_loop(EmTracer *T) {
    EmStatus st = EM_OK;
    while (st == EM_OK && !T->done) {
        if (T->ip >= T->n_units) {
            st = em_trace_fail(T, EMA_VALUE, "ran off the end of the code");
            break;
        }
        if (++T->steps > EM_MAX_STEPS) {
            st = em_trace_fail(T, EMA_TOO_LONG, "more than %d instructions", EM_MAX_STEPS);
            break;
        }
        EmInstr ins;
        em_decode(T->bytes, T->n_units, T->ip, &ins);
        if (T->depth == 0 && ins.at == T->break_at) {
            T->brk = ins;
            T->broke = T->done = 1;
            break;
        }
        T->cur = ins.at;
        T->ip = ins.next;
        st = dispatch(T, &ins);
        EM_ASSERT(T->sp >= 0 && T->sp <= T->stack_cap, "stack depth %d of %d after %s", T->sp, T->stack_cap,
                  em_bc_names[ins.op]);
        if (T->sizes.undecided && st != EM_ERR) st = em_int_undecided(T);
        if (st == EM_ABORT && T->exc && T->depth == 0 && ins.op == EMBC_RAISE_VARARGS) {
            T->raise_at = ins.at;
            T->raise_exc = T->exc;
        }
        if (st == EM_ABORT && T->exc) { /* a raise: does this frame handle it? */
            int c = em_trace_catch(T, ins.at);
            if (c < 0) return EM_ERR;
            if (c) {
                st = EM_OK;
                continue;
            }
        }
        if (st == EM_OK && T->fin_gens.len) st = em_gen_finalize(T, 0);
        if (st == EM_ABORT && T->depth == 0) T->abort_root_at = ins.at;
    }
    return st;
}

/* The value of local i has not changed since the frame started. */
static int local_unchanged(EmTracer *T, int i) {
    EmSym *s = T->locals[i];
    if (!s) return 1;
    if (s->kind == SYM_NULL && s->pos == EM_POS_LAZY_ARG) return 1;
    return T->arg_slots[i] >= 0 && s->src == T->arg_slots[i];
}

/* A walk over the frame's code from code unit `from` (jumps, fall through, exception
 * handlers), each instruction once: visit answers WALK_ON (go on to its successors), WALK_PRUNE
 * (not past it) or WALK_STOP (end the walk). Returns WALK_ON when it ran out of code, WALK_STOP
 * when visit stopped it, WALK_UNKNOWN at an exception table it cannot read, -1 with an exception. */
enum { WALK_ON = 0, WALK_PRUNE = 1, WALK_STOP = 2, WALK_UNKNOWN = 3 };
static int code_walk(EmTracer *T, int from, int (*visit)(const EmInstr *in, void *ctx), void *ctx) {
    char *seen = calloc((size_t)T->n_units + 1, 1);
    int *work = malloc(sizeof(int) * (3 * (size_t)T->n_units + 3)), top = 0, rc = WALK_ON;
    if (!seen || !work) {
        free(seen);
        free(work);
        PyErr_NoMemory();
        return -1;
    }
    work[top++] = from;
    while (top && rc == WALK_ON) {
        int at = work[--top];
        if (at < 0 || at >= T->n_units || seen[at]) continue;
        seen[at] = 1;
        EmInstr in;
        em_decode_op(T->bytes, T->n_units, at, &in); /* `from` is a break's opcode unit */
        int v = visit(&in, ctx);
        if (v == WALK_STOP) rc = WALK_STOP;
        if (v != WALK_ON) continue;
        int handler, depth, lasti, e = em_exc_entry(T->code, in.at, &handler, &depth, &lasti);
        if (e < 0) {
            rc = WALK_UNKNOWN;
            break;
        }
        if (e) work[top++] = handler;
        if (em_bc_is_jump[in.op]) work[top++] = em_jump_target(&in);
        if (!(em_bc_flags[in.op] & EMBCF_NO_FALLTHROUGH)) work[top++] = in.next;
    }
    free(seen);
    free(work);
    return rc;
}

typedef struct {
    char *read;
    int n;
} LocalsRead;

static int visit_local_reads(const EmInstr *in, void *ctx) {
    LocalsRead *r = ctx;
    int reads = in->op == EMBC_LOAD_FAST || in->op == EMBC_DELETE_FAST;
#ifdef EMBC_LOAD_FAST_CHECK
    reads |= in->op == EMBC_LOAD_FAST_CHECK;
#endif
#ifdef EMBC_LOAD_FAST_AND_CLEAR
    reads |= in->op == EMBC_LOAD_FAST_AND_CLEAR;
#endif
#ifdef EMBC_LOAD_FAST_LOAD_FAST
    if (in->op == EMBC_LOAD_FAST_LOAD_FAST) {
        if ((in->arg >> 4) < r->n) r->read[in->arg >> 4] = 1;
        if ((in->arg & 15) < r->n) r->read[in->arg & 15] = 1;
    }
#endif
    if (reads && in->arg < r->n) r->read[in->arg] = 1;
    return WALK_ON;
}

/* Marks in read[i] (n fast locals) the locals the code may read from code unit `from` on:
 * LOAD_FAST and the like, DELETE_FAST, in any instruction reachable from there (jumps, fall
 * through, exception handlers); all of them when it may read its locals by name (locals(),
 * vars(), eval, exec, dir, frame objects). Another local is dead at a graph break at `from`: it
 * is not an output of the graph nor a local of the resume function (TorchDynamo prunes by
 * liveness too). Kept as a graph output, a dead value gets a zero gradient from AOTAutograd,
 * which an infinite derivative turns into NaN. 0 or -1 with an exception set. */
/* Whether the frame's code may read its locals by name (locals(), vars(), eval, exec, dir,
 * frame objects): 1, 0, or -1 with an exception. */
static int reads_locals_by_name(EmTracer *T) {
    static const char *const by_name[] = {"locals",    "vars",         "eval",     "exec", "dir",
                                          "_getframe", "currentframe", "f_locals", NULL};
    PyObject *names = T->code->co_names;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++) {
        const char *nm = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, j));
        if (!nm) return -1;
        for (int k = 0; by_name[k]; k++)
            if (!strcmp(nm, by_name[k])) return 1;
    }
    return 0;
}

int em_trace_locals_read(EmTracer *T, char *read, int n, int from) {
    int by_name = reads_locals_by_name(T);
    if (by_name) {
        memset(read, 1, (size_t)n);
        return by_name < 0 ? -1 : 0;
    }
    memset(read, 0, (size_t)n);
    LocalsRead r = {read, n};
    int rc = code_walk(T, from, visit_local_reads, &r);
    if (rc == WALK_UNKNOWN) memset(read, 1, (size_t)n); /* every local may be read */
    return rc < 0 ? -1 : 0;
}

static int visit_cell_read(const EmInstr *in, void *ctx) {
    int slot = *(const int *)ctx;
    int reads = in->op == EMBC_LOAD_DEREF || in->op == EMBC_DELETE_DEREF;
#ifdef EMBC_LOAD_CLASSDEREF
    reads |= in->op == EMBC_LOAD_CLASSDEREF;
#endif
#ifdef EMBC_LOAD_FROM_DICT_OR_DEREF
    reads |= in->op == EMBC_LOAD_FROM_DICT_OR_DEREF;
#endif
    if (reads && in->arg == slot) return WALK_STOP;
    return in->op == EMBC_STORE_DEREF && in->arg == slot ? WALK_PRUNE : WALK_ON; /* bound from there on */
}

/* Whether cell variable `slot` may be read (or deleted) by the frame's own code from code unit
 * `from` on before it is stored: 1, 0, or -1 with an exception. Unbound at a break and not read
 * first, it is handed on as the frame's empty cell (the resume function's free variable), which
 * the code after the break fills. */
static int cell_read_first(EmTracer *T, int slot, int from) {
    int rc = code_walk(T, from, visit_cell_read, &slot);
    return rc < 0 ? -1 : rc != WALK_ON;
}

/* Whether every code object nested in co (at any depth) that names `name` among its free
 * variables is a list, set or dict comprehension's (Python 3.11): such a function runs to its
 * end where it is made and is never kept, so once the frame's own code no longer reads the
 * variable nobody reads its cell. 1, 0, or -1 with an exception. */
static int captured_by_comprehensions_only(PyCodeObject *co, PyObject *name, int depth) {
    if (depth > 8) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_consts); i++) {
        PyObject *c = PyTuple_GET_ITEM(co->co_consts, i);
        if (!PyCode_Check(c)) continue;
        PyCodeObject *cc = (PyCodeObject *)c;
        int captures = 0;
        for (int k = em_code_nlocalsplus(cc) - em_code_nfree(cc); k < em_code_nlocalsplus(cc) && !captures; k++) {
            int eq = PyUnicode_Compare(em_code_name(cc, k), name);
            if (eq == -1 && PyErr_Occurred()) return -1;
            captures = eq == 0;
        }
        const char *nm = PyUnicode_AsUTF8(cc->co_name);
        if (!nm) return -1;
        if (captures && strcmp(nm, "<listcomp>") && strcmp(nm, "<setcomp>") && strcmp(nm, "<dictcomp>")) return 0;
        int r = captured_by_comprehensions_only(cc, name, depth + 1);
        if (r <= 0) return r;
    }
    return 1;
}

/* A bound cell variable `slot` that is dead at a graph break at code unit `from`: the frame's
 * code does not read it from there before storing it (nor hand its cell to a closure it makes),
 * nor by name, and only comprehensions captured it (3.11's list comprehension over it). Handed on empty, it is no graph output (a
 * dead value kept as one gets a zero gradient from AOTAutograd, NaN after an infinite
 * derivative: fuzz 2708 #6). 1, 0, or -1 with an exception. */
static int visit_cell_use(const EmInstr *in, void *ctx) {
    int slot = *(const int *)ctx;
#ifdef EMBC_LOAD_CLOSURE
    if (in->op == EMBC_LOAD_CLOSURE && in->arg == slot) return WALK_STOP; /* a closure made after it reads it */
#endif
    return visit_cell_read(in, ctx);
}

static int dead_cell(EmTracer *T, int slot, int from) {
    if (em_code_kind(T->code, slot) != EM_CO_FAST_CELL) return 0; /* an argument's cell too: kept */
    int r = code_walk(T, from, visit_cell_use, &slot);
    r = r < 0 ? -1 : r != WALK_ON; /* read (or made a closure's) before it is stored */
    if (r == 0) r = reads_locals_by_name(T);
    if (r) return r < 0 ? -1 : 0;
    return captured_by_comprehensions_only(T->code, em_code_name(T->code, slot), 0);
}

/* The outputs of the stack's values at a break (stack_val[s]: the index of slot s's among the
 * outputs counted by *k, -1 for a NULL). */
static EmStatus break_stack_outputs(EmTracer *T, int *stack_val, int *k) {
    for (int s = 0; s < T->sp; s++) {
        if (T->stack[s]->kind == SYM_NULL) {
            stack_val[s] = -1;
            continue;
        }
        EmStatus st = build_out(T, T->stack[s], 0);
        if (st != EM_OK) return st;
        stack_val[s] = (*k)++;
    }
    return EM_OK;
}

EmStatus em_trace_break_outputs(EmTracer *T, int **stack_val, int *nstack, int **store_local, int **store_val,
                                int *nstore, int **live, int *nlive, uint64_t *priv) {
    *priv = 0;
    int n = T->code->co_nlocals, k = 0, nslots = em_code_nlocalsplus(T->code) - em_code_nfree(T->code);
    *stack_val = malloc(sizeof(int) * ((size_t)T->sp + 1));
    *store_local = malloc(sizeof(int) * ((size_t)nslots + 1));
    *store_val = malloc(sizeof(int) * ((size_t)nslots + 1));
    *live = malloc(sizeof(int) * ((size_t)n + 1));
    if (!*stack_val || !*store_local || !*store_val || !*live) return PyErr_NoMemory(), EM_ERR;
    EmStatus cst = em_ctx_close_all(T); /* the outputs enter the open blocks again */
    if (cst != EM_OK) return cst;
    EmStatus est = em_obj_effects_head(T);
    if (est != EM_OK) return est;
    int32_t head_at = T->out.len;
    EmOut head = {.kind = OUT_TUPLE, .v = 0};
    if (em_vec_push(&T->out, head)) return PyErr_NoMemory(), EM_ERR;
    EmStatus sst = break_stack_outputs(T, *stack_val, &k);
    if (sst != EM_OK) return sst;
    *nstack = T->sp;
    *nstore = *nlive = 0;
    PyCodeObject *co = T->code;
    int nargs = co->co_argcount + co->co_kwonlyargcount + !!(co->co_flags & CO_VARARGS) +
                !!(co->co_flags & CO_VARKEYWORDS);
    char *read = malloc((size_t)n + 1);
    if (!read) return PyErr_NoMemory(), EM_ERR;
    if (em_trace_locals_read(T, read, n, T->brk.at)) {
        free(read);
        return EM_ERR;
    }
    for (int i = 0; i < nslots; i++) {
        EmSym *s = T->locals[i];
        int cell = !!(em_code_kind(co, i) & EM_CO_FAST_CELL);
        /* a cell variable unbound at the break: in the resume function it is a free variable,
         * whose unbound read raises NameError where the frame's raises UnboundLocalError; one no
         * closure holds yet is the resume function's own cell then (*priv) */
        if (cell && (!s || (s->kind == SYM_CELL && s->pos != 1 && !s->items.len))) {
            int first = cell_read_first(T, i, T->brk.at);
            if (first > 0 && !s && i < 64 && em_code_kind(co, i) == EM_CO_FAST_CELL) {
                *priv |= (uint64_t)1 << i;
                continue;
            }
            if (first) {
                free(read);
                return first < 0 ? EM_ERR : em_trace_fail(T, EMA_VALUE, "a cell variable unbound at a break");
            }
            if (!s) continue; /* the transformed code's MAKE_CELL makes it empty */
        }
        if (!s) {
            if (T->arg_slots[i] >= 0) {
                free(read);
                return em_trace_fail(T, EMA_VALUE, "argument deleted before a break");
            }
            continue;
        }
        int dead = cell ? dead_cell(T, i, T->brk.at) /* the transformed code's MAKE_CELL makes it empty */
                        : i >= nargs && !read[i] && em_kind_plain_local(em_code_kind(co, i));
        if (dead) {
            if (dead > 0) continue;
            free(read);
            return EM_ERR;
        }
        /* a cell variable is passed on in its cell (the resume function's closure): the cell a
         * closure captured, or a new one holding a changed value, stored into its slot */
        if (!cell) (*live)[(*nlive)++] = i;
        if (s->kind != SYM_CELL && local_unchanged(T, i)) continue;
        EmStatus st = EM_OK;
        if (cell && s->kind != SYM_CELL) st = push_out(T, (EmOut){.kind = OUT_CELL, .v = 1});
        if (st == EM_OK) st = build_out(T, s, 0);
        if (st != EM_OK) {
            free(read);
            return st;
        }
        (*store_local)[*nstore] = i;
        (*store_val)[(*nstore)++] = k++;
    }
    free(read);
    T->out.data[head_at].v = k;
    return T->sizes.undecided ? em_int_undecided(T) : EM_OK; /* building the outputs relied on one */
}

EmStatus em_trace_run(EmTracer *T, PyCodeObject *code, const EmFrameIn *in, EmGraph *G, EmGuardProg *P, int break_at,
                      int dyn_mode, PyObject *dyn_state, int fullgraph) {
    memset(T, 0, sizeof(*T));
    T->fullgraph = fullgraph;
    T->dyn_mode = dyn_mode;
    T->dyn_state = dyn_state;
    T->break_at = break_at;
    T->abort_root_at = -1;
    T->raise_at = -1;
    T->G = G;
    T->P = P;
    T->code = code;
    T->in = *in;
    T->code_bytes = em_code_bytes(code);
    if (!T->code_bytes) return EM_ERR;
    T->bytes = (const unsigned char *)PyBytes_AS_STRING(T->code_bytes);
    T->n_units = (int)(PyBytes_GET_SIZE(T->code_bytes) / 2);
    if (!(T->seen = PyDict_New())) return EM_ERR;
    if (em_guard_check_global_state(P)) return EM_ERR;
    T->grad = T->start_grad = P->gs.grad;
    T->autocast = P->gs.autocast_cpu || P->gs.autocast_cuda;
    T->globals = in->globals;
    T->builtins = in->builtins;
    T->gslot = T->bslot = -1;
    EmStatus st = setup_locals(T);
    if (st == EM_OK) st = em_trace_loop(T);
    if (st == EM_OK && !T->broke && T->fin_gens.len) st = em_gen_finalize(T, 1);
    em_ctx_unwind(T);
    if (st == EM_OK && !T->broke && T->ctx_open.len) st = em_trace_fail(T, EMA_VALUE, "returned inside a with block");
    if (st == EM_OK && !T->broke) st = em_obj_effects_head(T);
    if (st == EM_OK && !T->broke) st = build_out(T, T->retval, 0);
    if (st == EM_OK && T->sizes.undecided) st = em_int_undecided(T); /* after the last instruction */
    if (st == EM_OK) {
        const char *bad = em_ir_verify(G);
        if (bad) {
            PyErr_Format(PyExc_SystemError, "ember: graph verifier: %s", bad);
            st = EM_ERR;
        }
    }
    return st;
}

EmStatus em_trace_build_out(EmTracer *T, EmSym *s, int depth) { return build_out(T, s, depth); }

void em_trace_free(EmTracer *T) {
    for (int32_t i = 0; i < T->syms.len; i++) {
        EmSym *s = T->syms.data[i];
        Py_XDECREF(s->obj);
        Py_XDECREF(s->device);
        Py_XDECREF(s->seq_type);
        Py_XDECREF(s->spec);
        for (int32_t k = 0; k < s->keys.len; k++) Py_DECREF(s->keys.data[k]);
        em_vec_free(&s->items);
        em_vec_free(&s->keys);
        em_vec_free(&s->of);
        em_vec_free(&s->of_ver);
        em_lazy_free(s->lazy);
        free(s);
    }
    em_vec_free(&T->syms);
    em_vec_free(&T->ctx_open);
    em_vec_free(&T->stores);
    em_vec_free(&T->mutated);
    em_vec_free(&T->meta_mut);
    Py_CLEAR(T->key_tokens);
    em_vec_free(&T->prog_cells);
    em_vec_free(&T->fin_gens);
    Py_CLEAR(T->exc);
    Py_CLEAR(T->raised);
    Py_CLEAR(T->keep);
    Py_CLEAR(T->made_classes);
    Py_CLEAR(T->made_out);
    Py_CLEAR(T->fake_ids);
    em_vec_free(&T->idict_real);
    em_vec_free(&T->idict_copy);
    for (int32_t i = 0; i < T->out.len; i++) Py_XDECREF(T->out.data[i].obj);
    em_vec_free(&T->out);
    em_vec_free(&T->input_slots);
    em_size_free(&T->sizes);
    em_vec_free(&T->sym_leaf);
    em_vec_free(&T->nograd_views);
    em_vec_free(&T->data_nodes);
    em_vec_free(&T->known_refs);
    em_vec_free(&T->numpy_refs);
    Py_CLEAR(T->known_vals);
    Py_CLEAR(T->sticky);
    em_vec_free(&T->node_dims);
    em_vec_free(&T->dim_exprs);
    em_vec_free(&T->expr_ref);
    em_vec_free(&T->node_expr);
    free(T->locals);
    free(T->stack);
    free(T->arg_slots);
    T->arg_slots = NULL;
    Py_CLEAR(T->seen);
    Py_CLEAR(T->abort_file);
    Py_CLEAR(T->code_bytes);
    T->locals = NULL;
    T->stack = NULL;
}
