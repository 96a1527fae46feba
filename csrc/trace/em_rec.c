/* em_rec.c: opcode handlers, grouped by family (stack, loads/stores, operators,
 * containers, calls, control flow). Each pops its inputs, asks the operations of the values'
 * kinds (em_sym_ops.c) or em_call.c, and pushes its result. Handlers consume EmInstr; they
 * produce stack effects only.
 */
#include "em_rec.h"

#include "../pyver/em_state.h"

/* ---- stack ---- */

EmStatus h_nop(EmTracer *T, const EmInstr *in) {
    (void)T;
    (void)in;
    return EM_OK;
}
EmStatus h_pop_top(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    T->sp--;
    return EM_OK;
}
EmStatus h_push_null(EmTracer *T, const EmInstr *in) {
    (void)in;
    return em_push(T, em_sym_null(T));
}
EmStatus h_copy(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    return em_push(T, TOP(in->arg));
}
EmStatus h_swap(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    EmSym *t = TOP(1);
    TOP(1) = TOP(in->arg);
    TOP(in->arg) = t;
    return EM_OK;
}

/* ---- loads and stores ---- */

EmStatus h_load_const(EmTracer *T, const EmInstr *in) {
    PyObject *v = PyTuple_GET_ITEM(T->code->co_consts, in->arg);
    return em_push(T, em_sym_const(T, v));
}
/* `assert` failing: the builtin AssertionError (the assert statement does not look it up). */
EmStatus h_load_assertion_error(EmTracer *T, const EmInstr *in) {
    (void)in;
    return em_push(T, em_sym_const(T, PyExc_AssertionError));
}
/* builtins.__build_class__, guarded as a global lookup that finds it in the builtins: the class
 * statement's call of it is a break (each call makes a new class), run by the generated code. */
EmStatus h_load_build_class(EmTracer *T, const EmInstr *in) {
    (void)in;
    PyObject *name = EM_STR(dunder_build_class);
    int in_globals = PyDict_Contains(T->globals, name);
    PyObject *v = in_globals || !PyDict_Check(T->builtins) ? NULL : PyDict_GetItemWithError(T->builtins, name);
    if (!v) return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "__build_class__ not found in builtins");
    int32_t slot = T->gslot < 0 ? em_guard_global(T->P, name) : em_guard_global_in(T->P, T->gslot, T->bslot, name);
    if (slot < 0) return EM_ERR;
    EmStatus st;
    EmSym *s = em_sym_wrap(T, v, slot, &st);
    return s ? em_push(T, s) : st;
}
EmStatus h_load_fast(EmTracer *T, const EmInstr *in) {
    EmStatus st;
    EmSym *s = em_local_get(T, in->arg, &st);
    return s ? em_push(T, s) : st;
}
EmStatus h_store_fast(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmSym *v = POP();
    T->locals[in->arg] = v->kind == SYM_NULL ? NULL : v; /* a NULL: a comprehension restores an unbound local */
    return EM_OK;
}
/* Pushes the local (NULL when unbound) and unbinds it: an inlined comprehension saving a
 * name it uses as its own (PEP 709). */
EmStatus h_load_fast_and_clear(EmTracer *T, const EmInstr *in) {
    EmStatus st = EM_OK;
    EmSym *v = T->locals[in->arg] ? em_local_get(T, in->arg, &st) : em_sym_null(T);
    if (!v) return st;
    T->locals[in->arg] = NULL;
    return em_push(T, v);
}
EmStatus h_delete_fast(EmTracer *T, const EmInstr *in) {
    T->locals[in->arg] = NULL;
    return EM_OK;
}
/* Cell variables: a local holds its value until a closure made while tracing captures it
 * (h_load_closure), then the SYM_CELL shared with the closures, read and written through.
 * A free variable holds the SYM_CELL of its program cell (em_prog_cell). */
static EmSym *cell_of(EmTracer *T, int i) {
    EmSym *s = T->locals[i];
    return s && s->kind == SYM_CELL ? s : NULL;
}

/* Index of program cell `cell` in the intercepted function's closure, or -1. */
static int top_index(EmTracer *T, PyObject *cell) {
    for (Py_ssize_t k = 0; T->in.closure && k < PyTuple_GET_SIZE(T->in.closure); k++)
        if (PyTuple_GET_ITEM(T->in.closure, k) == cell) return (int)k;
    return -1;
}

EmSym *em_prog_cell(EmTracer *T, PyObject *cell) {
    for (int32_t i = 0; i < T->prog_cells.len; i++)
        if (T->prog_cells.data[i]->obj == cell) return T->prog_cells.data[i];
    EmSym *c = em_sym_new(T, SYM_CELL);
    if (!c) return NULL;
    c->pos = 1;
    c->obj = Py_NewRef(cell);
    if (em_vec_push(&T->prog_cells, c)) return PyErr_NoMemory(), NULL;
    return c;
}

int32_t em_prog_cell_slot(EmTracer *T, EmSym *c, PyObject *name, int32_t via) {
    if (c->src < 0) {
        int fi = top_index(T, c->obj);
        if (fi >= 0) {
            c->src = em_guard_free_cell(T->P, fi, name);
        } else if (via >= 0) {
            c->src = via;
        } else {
            PyObject *lab = PyUnicode_FromFormat("cell[%U]", name);
            const char *labu = lab ? PyUnicode_AsUTF8(lab) : NULL;
            c->src = labu ? em_guard_const(T->P, c->obj, labu) : -1;
            Py_XDECREF(lab);
        }
        if (c->src < 0) return -1;
    }
    /* the trace took the cell reached through via for this one: so must every call */
    if (via >= 0 && via != c->src && em_guard_check(T->P, EMG_SAME, via, NULL, c->src)) return -1;
    return c->src;
}

/* The value of program cell c read as variable `name`: the value the trace wrote, else the
 * cell's contents, read (and guarded) once. NULL with *st. */
static EmSym *prog_cell_value(EmTracer *T, EmSym *c, PyObject *name, EmStatus *st) {
    *st = EM_OK;
    if (c->items.len) return c->items.data[0];
    if (!PyCell_GET(c->obj)) { /* empty, guarded so: the free variable's read raises NameError */
        int32_t cell = em_prog_cell_slot(T, c, name, -1);
        *st = cell < 0 || em_guard_check(T->P, EMG_CELL_EMPTY, cell, NULL, 0)
                  ? EM_ERR
                  : em_trace_raise_msg(T, PyExc_NameError,
                                       "cannot access free variable '%U' where it is not associated with a value "
                                       "in enclosing scope",
                                       name);
        return NULL;
    }
    int fi = top_index(T, c->obj);
    int32_t cs = fi >= 0 ? -1 : em_prog_cell_slot(T, c, name, -1);
    int32_t slot = fi >= 0 ? em_guard_closure(T->P, fi, name) : cs < 0 ? -1 : em_guard_cell(T->P, cs, name);
    if (slot < 0) {
        *st = EM_ERR;
        return NULL;
    }
    PyObject *v = PyCell_GET(c->obj);
    if (!v) {
        *st = em_trace_fail(T, EMA_VALUE, "read of the empty closure cell %s", PyUnicode_AsUTF8(name));
        return NULL;
    }
    EmSym *w = em_sym_wrap(T, v, slot, st);
    if (w && em_vec_push(&c->items, w)) {
        *st = EM_ERR;
        return PyErr_NoMemory(), NULL;
    }
    return w;
}

EmSym *em_local_value(EmTracer *T, int i, EmStatus *st) {
    EmSym *c = cell_of(T, i);
    if (!c) return em_local_get(T, i, st);
    if (c->pos == 1) return prog_cell_value(T, c, em_code_name(T->code, i), st);
    *st = EM_OK;
    if (c->items.len) return c->items.data[0];
    if (em_code_kind(T->code, i) & EM_CO_FAST_FREE)
        *st = em_trace_raise_msg(T, PyExc_NameError,
                                 "cannot access free variable '%U' where it is not associated with a value in "
                                 "enclosing scope",
                                 em_code_name(T->code, i));
    else
        *st = em_trace_raise_msg(T, PyExc_UnboundLocalError,
                                 "cannot access local variable '%U' where it is not associated with a value",
                                 em_code_name(T->code, i));
    return NULL;
}

EmStatus h_load_deref(EmTracer *T, const EmInstr *in) {
    EmStatus st = EM_OK;
    EmSym *v = em_local_value(T, in->arg, &st);
    return v ? em_push(T, v) : st;
}

/* A write to a program cell changes the trace's value of it and is replayed after the graph
 * (cell.cell_contents = value, with the attribute stores). */
EmStatus h_store_deref(EmTracer *T, const EmInstr *in) {
    EmSym *c = cell_of(T, in->arg);
    PyObject *name = em_code_name(T->code, in->arg);
    if (!c && (em_code_kind(T->code, in->arg) & EM_CO_FAST_FREE))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "write to the free variable %s without a cell",
                             PyUnicode_AsUTF8(name));
    if (!c) return h_store_fast(T, in);
    NEED(1);
    EmSym *v = POP();
    if (c->pos == 1 && em_prog_cell_slot(T, c, name, -1) < 0) return EM_ERR;
    c->items.len = 0;
    if (em_vec_push(&c->items, v)) return PyErr_NoMemory(), EM_ERR;
    return c->pos == 1 ? em_obj_record_store(T, c, EM_STR(cell_contents), v) : EM_OK;
}
EmStatus h_store_attr(EmTracer *T, const EmInstr *in) {
    NEED(2);
    EmSym *base = POP(), *v = POP();
    return em_obj_store_attr(T, base, PyTuple_GET_ITEM(T->code->co_names, in->arg), v);
}

EmStatus h_delete_attr(EmTracer *T, const EmInstr *in) {
    NEED(1);
    return em_obj_del_attr(T, POP(), PyTuple_GET_ITEM(T->code->co_names, in->arg));
}

/* The sym of the globals dict of the frame being traced that global stores were recorded on
 * (em_obj_record_store, replayed as dict items), NULL when none was. */
static EmSym *globals_stored(EmTracer *T) {
    for (int32_t i = 0; i < T->stores.len; i += 3) {
        EmSym *b = T->stores.data[i];
        if (b->kind == SYM_OBJ && b->obj == T->globals) return b;
    }
    return NULL;
}

/* A global store: the trace's value of the global from now on (h_load_global), written to the
 * globals dict after the graph ran (from its slot: the frame's globals, or the function's
 * module's), with the attribute stores. */
static EmSym *globals_sym(EmTracer *T) {
    EmSym *g = globals_stored(T);
    if (!g) {
        int32_t slot = T->gslot >= 0 ? T->gslot : em_guard_frame_globals(T->P);
        if (slot < 0 || !(g = em_sym_new(T, SYM_OBJ))) return NULL;
        g->obj = Py_NewRef(T->globals);
        g->src = slot;
        g->by_id = 1;
    }
    return g;
}

EmStatus h_store_global(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmSym *v = POP(), *g = globals_sym(T);
    return g ? em_obj_record_store(T, g, PyTuple_GET_ITEM(T->code->co_names, in->arg), v) : EM_ERR;
}

/* `del name` of a global: a store of the deleted marker (em_store_deleted), replayed as the
 * globals dict's deletion; NameError where the name is not there (absent now, guarded so, or
 * deleted earlier in the trace). */
EmStatus h_delete_global(EmTracer *T, const EmInstr *in) {
    PyObject *name = PyTuple_GET_ITEM(T->code->co_names, in->arg);
    EmSym *g = globals_sym(T), *stored = g && T->stores.len ? em_global_stored(T, T->globals, name) : NULL;
    if (!g) return EM_ERR;
    int has = stored ? !em_store_deleted(stored) : PyDict_Contains(T->globals, name);
    if (has < 0) return EM_ERR;
    if (!stored && (has ? em_guard_dict(T->P, g->src, name) < 0 /* its load fails when it is not there */
                        : em_guard_check(T->P, EMG_ABSENT, g->src, name, 1) < 0))
        return EM_ERR;
    if (!has) return em_trace_raise_msg(T, PyExc_NameError, "name '%U' is not defined", name);
    EmSym *gone = em_sym_new(T, SYM_NULL);
    if (!gone) return EM_ERR;
    gone->pos = EM_POS_DELETED;
    return em_obj_record_store(T, g, name, gone);
}

/* A global found neither in the globals (absent, guarded so, or deleted in the trace: deleted)
 * nor in the builtins: NameError, as Python raises. */
static EmStatus undefined_global(EmTracer *T, PyObject *name, int deleted) {
    if (!PyDict_Check(T->builtins)) return em_trace_fail(T, EMA_VALUE, "undefined global %s", PyUnicode_AsUTF8(name));
    int32_t gs = T->gslot >= 0 ? T->gslot : em_guard_frame_globals(T->P);
    int32_t bs = T->bslot >= 0 ? T->bslot : em_guard_const(T->P, T->builtins, "builtins");
    if (gs < 0 || bs < 0 || (!deleted && em_guard_check(T->P, EMG_ABSENT, gs, name, 1)) ||
        em_guard_check(T->P, EMG_ABSENT, bs, name, 1))
        return EM_ERR;
    return em_trace_raise_msg(T, PyExc_NameError, "name '%U' is not defined", name);
}

EmStatus h_load_global(EmTracer *T, const EmInstr *in) {
    PyObject *name = PyTuple_GET_ITEM(T->code->co_names, in->arg >> 1);
    if ((in->arg & 1) && em_push(T, em_sym_null(T)) != EM_OK) return EM_ERR;
    EmSym *stored = T->stores.len ? em_global_stored(T, T->globals, name) : NULL;
    if (stored && !em_store_deleted(stored)) return em_push(T, stored);
    PyObject *v = stored ? NULL : PyDict_GetItemWithError(T->globals, name); /* deleted: the builtin */
    if (!v && !PyErr_Occurred() && PyDict_Check(T->builtins)) v = PyDict_GetItemWithError(T->builtins, name);
    if (!v) return PyErr_Occurred() ? EM_ERR : undefined_global(T, name, stored != NULL);
    int32_t slot;
    if (stored) { /* deleted in the trace: the builtin, read from the builtins dict */
        int32_t bs = T->bslot >= 0 ? T->bslot : em_guard_const(T->P, T->builtins, "builtins");
        slot = bs < 0 ? -1 : em_guard_dict(T->P, bs, name);
    } else if (T->gslot < 0) {
        slot = em_guard_global(T->P, name);
    } else {
        slot = em_guard_global_in(T->P, T->gslot, T->bslot, name);
    }
    if (slot < 0) return EM_ERR;
    EmStatus st;
    EmSym *s = em_sym_wrap(T, v, slot, &st);
    return s ? em_push(T, s) : st;
}

/* Pushes an attribute load's result: the value, or for a method load (method, self) or
 * (NULL, value). */
static EmStatus push_attr(EmTracer *T, int method, EmSym *out, EmSym *self) {
    if (!method) return em_push(T, out);
    EmStatus st = em_push(T, self ? out : em_sym_null(T));
    return st == EM_OK ? em_push(T, self ? self : out) : st;
}

EmStatus h_load_attr(EmTracer *T, const EmInstr *in) {
    int ni, method;
    em_load_attr_arg(in->op, in->arg, &ni, &method);
    NEED(1);
    EmSym *base = POP(), *out = NULL, *self = NULL;
    EmStatus st = em_sym_getattr(T, base, PyTuple_GET_ITEM(T->code->co_names, ni), method, &out, &self);
    return st == EM_OK ? push_attr(T, method, out, self) : st;
}

/* super().name and super(C, obj).name in one instruction (3.12): the stack holds the global
 * `super`, the class and the object (the __class__ cell and the first argument for the
 * zero-argument form). */
EmStatus h_load_super_attr(EmTracer *T, const EmInstr *in) {
    int ni, method, two;
    em_super_attr_arg(in->arg, &ni, &method, &two);
    NEED(3);
    EmSym *obj = TOP(1), *cls = TOP(2), *g = TOP(3), *sup = NULL, *out = NULL, *self = NULL;
    T->sp -= 3;
    if (!em_sym_is_obj(g, (PyObject *)&PySuper_Type))
        return em_trace_fail(T, EMA_CALL, "the name super is not the builtin super");
    EmStatus st = em_super(T, cls, obj, &sup);
    if (st == EM_OK) st = em_sym_getattr(T, sup, PyTuple_GET_ITEM(T->code->co_names, ni), method, &out, &self);
    return st == EM_OK ? push_attr(T, method, out, self) : st;
}
#ifdef EMBC_LOAD_METHOD
EmStatus h_load_method(EmTracer *T, const EmInstr *in) { return h_load_attr(T, in); }
#endif

/* ---- operators ---- */

/* BINARY_OP's operand (CPython's NB_* number) of each graph op; -1 for ops that are not
 * Python binary operators. */
#define EM_NB_NONE (-1)
static const int8_t op_nb[EMOP__COUNT] = {
#define X(e, name, kind, flags, nb, fn, py) EM_NB_##nb,
#include "../ir/em_ops.def"
#undef X
};
#undef EM_NB_NONE

static EmOp nb_op(int arg) {
    for (int op = 0; arg >= 0 && op < EMOP__COUNT; op++)
        if (op_nb[op] == arg) return (EmOp)op;
    return EMOP__COUNT;
}

EmStatus em_apply_op(EmTracer *T, EmOp op, EmSym **args, int n, EmSym **out) {
    for (int i = 0; i < n; i++)
        if (args[i]->kind == SYM_NDARRAY) return em_np_op(T, op, em_op_fn(op), args, n, out);
    int tens = 0; /* a tuple or list holding tensors is still a sequence: (x, 1) + (2,) concatenates */
    for (int i = 0; i < n; i++)
        tens |= args[i]->kind != SYM_TUPLE && args[i]->kind != SYM_LIST && em_sym_has_tensor(args[i]);
    if (tens) return em_op_record(T, op, NULL, args, n, NULL, em_op_fn(op), out);
    if (n == 2) return em_sym_binop(T, op, em_op_fn(op), args[0], args[1], out);
    return n == 1 ? em_sym_unop(T, op, em_op_fn(op), args[0], out) : em_sym_eval(T, em_op_fn(op), args, n, out);
}

EmStatus em_operator_call(EmTracer *T, PyObject *f, EmSym **args, int n, PyObject *kwnames, EmSym **out) {
    if (kwnames || !PyCFunction_Check(f) || n < 1 || n > 2) return CALL_NEXT;
    PyObject *add = em_op_fn(EMOP_ADD); /* a function of the operator module: bound to that module */
    if (!PyCFunction_Check(add) || PyCFunction_GET_SELF(f) != PyCFunction_GET_SELF(add)) return CALL_NEXT;
    for (int op = 0; op < EMOP__COUNT; op++) {
        if (em_op_fn((EmOp)op) != f) continue;
        int unary = op == EMOP_NEG || op == EMOP_POS || op == EMOP_INVERT;
        int binary = op_nb[op] >= 0 || (op >= EMOP_LT && op <= EMOP_GE);
        return (unary && n == 1) || (binary && n == 2) ? em_apply_op(T, (EmOp)op, args, n, out) : CALL_NEXT;
    }
    /* the operators without a graph op: identity, membership, truth */
    const char *name = ((PyCFunctionObject *)f)->m_ml->ml_name;
    int is = !strcmp(name, "is_"), is_not = !strcmp(name, "is_not"), r = 0;
    EmStatus st = CALL_NEXT;
    if ((is || is_not) && n == 2) st = em_sym_is(T, args[0], args[1], &r), r ^= is_not;
    else if (!strcmp(name, "contains") && n == 2) st = em_sym_contains(T, args[0], args[1], &r);
    else if ((!strcmp(name, "truth") || !strcmp(name, "not_")) && n == 1)
        st = em_sym_truth(T, args[0], &r), r ^= name[0] == 'n';
    if (st == EM_OK) *out = em_sym_const(T, r ? Py_True : Py_False);
    return st;
}

EmStatus h_binary_op(EmTracer *T, const EmInstr *in) {
    NEED(2);
    EmOp op = nb_op(in->arg);
    if (op == EMOP__COUNT) return em_trace_fail(T, EMA_OPCODE, "BINARY_OP %d", in->arg);
    EmSym *args[2] = {TOP(2), TOP(1)}, *out = NULL;
    T->sp -= 2;
    EmStatus st = em_apply_op(T, op, args, 2, &out);
    return st == EM_OK ? em_push(T, out) : st;
}

EmStatus h_unary(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmOp op = in->op == EMBC_UNARY_NEGATIVE ? EMOP_NEG : EMOP_INVERT;
#ifdef EMBC_UNARY_POSITIVE
    if (in->op == EMBC_UNARY_POSITIVE) op = EMOP_POS;
#endif
    EmSym *args[1] = {POP()}, *out = NULL;
    EmStatus st = em_apply_op(T, op, args, 1, &out);
    return st == EM_OK ? em_push(T, out) : st;
}

EmStatus h_unary_not(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    int t;
    EmStatus st = em_sym_truth(T, POP(), &t);
    return st == EM_OK ? em_push(T, em_sym_const(T, t ? Py_False : Py_True)) : st;
}

EmStatus h_compare_op(EmTracer *T, const EmInstr *in) {
    NEED(2);
    static const EmOp cmp[] = {EMOP_LT, EMOP_LE, EMOP_EQ, EMOP_NE, EMOP_GT, EMOP_GE};
    int c = em_compare_arg(in->arg);
    if (c < 0 || c > 5) return em_trace_fail(T, EMA_OPCODE, "COMPARE_OP %d", in->arg);
    EmSym *args[2] = {TOP(2), TOP(1)}, *out = NULL;
    T->sp -= 2;
    EmStatus st = em_apply_op(T, cmp[c], args, 2, &out);
    return st == EM_OK ? em_push(T, out) : st;
}

EmStatus h_is_op(EmTracer *T, const EmInstr *in) {
    NEED(2);
    EmSym *b = POP(), *a = POP();
    int same;
    EmStatus st = em_sym_is(T, a, b, &same);
    return st == EM_OK ? em_push(T, em_sym_const(T, (same ^ in->arg) ? Py_True : Py_False)) : st;
}

EmStatus h_contains_op(EmTracer *T, const EmInstr *in) {
    NEED(2);
    EmSym *c = POP(), *k = POP();
    int found;
    EmStatus st = em_sym_contains(T, c, k, &found);
    return st == EM_OK ? em_push(T, em_sym_const(T, (found ^ in->arg) ? Py_True : Py_False)) : st;
}

/* ---- containers ---- */

EmStatus h_binary_subscr(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(2);
    EmSym *c = TOP(2), *key = TOP(1), *out = NULL;
    T->sp -= 2;
    EmStatus st = em_sym_getitem(T, c, key, &out);
    return st == EM_OK ? em_push(T, out) : st;
}

EmStatus h_store_subscr(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(3);
    /* stack: value, container, key (TOS) */
    EmSym *key = TOP(1), *c = TOP(2), *v = TOP(3);
    T->sp -= 3;
    return em_sym_setitem(T, c, key, v);
}

EmStatus h_delete_subscr(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(2);
    EmSym *key = TOP(1), *c = TOP(2);
    T->sp -= 2;
    return em_sym_delitem(T, c, key);
}

EmStatus h_build_slice(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    EmSym *p[3] = {NULL, NULL, NULL}, *r = NULL;
    for (int i = in->arg - 1; i >= 0; i--) p[i] = POP();
    EmStatus st = em_slice_build(T, p, in->arg, &r);
    return st == EM_OK ? em_push(T, r) : st;
}

/* container[start:stop] (3.12): a slice, then a subscript. */
EmStatus h_binary_slice(EmTracer *T, const EmInstr *in) {
    EmInstr two = *in;
    two.arg = 2;
    EmStatus st = h_build_slice(T, &two);
    return st == EM_OK ? h_binary_subscr(T, in) : st;
}
/* container[start:stop] = value (3.12). */
EmStatus h_store_slice(EmTracer *T, const EmInstr *in) {
    EmInstr two = *in;
    two.arg = 2;
    EmStatus st = h_build_slice(T, &two);
    return st == EM_OK ? h_store_subscr(T, in) : st;
}

EmStatus h_build_seq(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    EmSym *s = em_sym_new(T, in->op == EMBC_BUILD_LIST ? SYM_LIST : SYM_TUPLE);
    if (!s || em_vec_reserve(&s->items, in->arg)) return EM_ERR;
    for (int i = in->arg; i >= 1; i--) s->items.data[s->items.len++] = TOP(i);
    T->sp -= in->arg;
    return em_push(T, s);
}

static EmStatus dict_put(EmTracer *T, EmSym *d, EmSym *k, EmSym *v) {
    PyObject *key;
    EmStatus st;
    return em_dict_key(T, d, k, 1, &key, &st) < 0 ? st : em_dict_set(d, key, v);
}

EmStatus h_build_map(EmTracer *T, const EmInstr *in) {
    NEED(2 * in->arg);
    EmSym *d = em_sym_new(T, SYM_DICT);
    if (!d) return EM_ERR;
    for (int i = in->arg; i >= 1; i--) {
        EmStatus st = dict_put(T, d, TOP(2 * i), TOP(2 * i - 1));
        if (st != EM_OK) return st;
    }
    T->sp -= 2 * in->arg;
    return em_push(T, d);
}

EmStatus h_build_const_key_map(EmTracer *T, const EmInstr *in) {
    NEED(in->arg + 1);
    EmSym *keys = POP();
    if (keys->kind != SYM_CONST || !PyTuple_Check(keys->obj)) return em_trace_fail(T, EMA_VALUE, "dict keys");
    EmSym *d = em_sym_new(T, SYM_DICT);
    if (!d) return EM_ERR;
    for (int i = 0; i < in->arg; i++) {
        EmSym *k = em_sym_const(T, PyTuple_GET_ITEM(keys->obj, i));
        if (!k) return EM_ERR;
        EmStatus st = dict_put(T, d, k, TOP(in->arg - i));
        if (st != EM_OK) return st;
    }
    T->sp -= in->arg;
    return em_push(T, d);
}

EmStatus h_list_append(EmTracer *T, const EmInstr *in) {
    NEED(in->arg + 1);
    EmSym *v = POP(), *l = TOP(in->arg);
    if (l->kind != SYM_LIST) return em_trace_fail(T, EMA_VALUE, "LIST_APPEND");
    l->mver++;
    return em_vec_push(&l->items, v) ? (PyErr_NoMemory(), EM_ERR) : EM_OK;
}

EmStatus h_list_extend(EmTracer *T, const EmInstr *in) {
    NEED(in->arg + 1);
    EmSym *v = POP(), *l = TOP(in->arg), *items = NULL;
    if (l->kind != SYM_LIST) return em_trace_fail(T, EMA_VALUE, "LIST_EXTEND");
    l->mver++;
    EmStatus st = em_seq_items(T, v, &items);
    if (st != EM_OK) return st;
    for (int32_t i = 0; i < items->items.len; i++)
        if (em_vec_push(&l->items, items->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    return EM_OK;
}

EmStatus h_unpack_sequence(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmSym *s = POP(), *items = NULL;
    EmStatus st = em_seq_items(T, s, &items);
    if (st != EM_OK) return st;
    if (items->items.len != in->arg)
        return em_trace_fail(T, EMA_VALUE, "unpacking %d values into %d", items->items.len, in->arg);
    for (int i = in->arg - 1; i >= 0; i--)
        if ((st = em_push(T, items->items.data[i])) != EM_OK) return st;
    return EM_OK;
}

EmStatus h_unpack_ex(EmTracer *T, const EmInstr *in) {
    NEED(1);
    int before = in->arg & 0xff, after = in->arg >> 8;
    EmSym *s = POP(), *items = NULL;
    EmStatus st = em_seq_items(T, s, &items);
    if (st != EM_OK) return st;
    int32_t n = items->items.len;
    if (n < before + after)
        return em_trace_fail(T, EMA_VALUE, "unpacking %d values into at least %d", n, before + after);
    for (int32_t i = n - 1; i >= n - after; i--)
        if ((st = em_push(T, items->items.data[i])) != EM_OK) return st;
    EmSym *star = em_sym_new(T, SYM_LIST);
    for (int32_t i = before; star && i < n - after; i++)
        if (em_vec_push(&star->items, items->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    if ((st = em_push(T, star)) != EM_OK) return st;
    for (int32_t i = before - 1; i >= 0; i--)
        if ((st = em_push(T, items->items.data[i])) != EM_OK) return st;
    return EM_OK;
}

/* ---- calls ---- */

EmStatus h_kw_names(EmTracer *T, const EmInstr *in) {
    T->kwnames = PyTuple_GET_ITEM(T->code->co_consts, in->arg);
    return EM_OK;
}

EmStatus h_call(EmTracer *T, const EmInstr *in) {
    int n = in->arg;
    NEED(n + 2);
    PyObject *kw = T->kwnames;
    T->kwnames = NULL;
    EmSym **args = &TOP(n), *second = TOP(n + 1), *first = TOP(n + 2), *out = NULL;
    EmSym *fn = first->kind == SYM_NULL ? second : first, *self = first->kind == SYM_NULL ? NULL : second;
    EmStatus st = em_call(T, fn, self, args, n, kw, &out);
    T->sp -= n + 2;
    return st == EM_OK ? em_push(T, out) : st;
}

/* A tensor the graph computes (not one of its inputs) that requires grad: s, or an item of s. */
static int graph_grad_value(EmTracer *T, const EmSym *s) {
    if (s->kind == SYM_TUPLE || s->kind == SYM_LIST) {
        for (int32_t i = 0; i < s->items.len; i++)
            if (graph_grad_value(T, s->items.data[i])) return 1;
        return 0;
    }
    if (s->kind != SYM_TENSOR || s->ref < 0) return 0;
    const EmNode *n = &T->G->nodes.data[s->ref];
    return n->op != EMOP_INPUT && n->requires_grad;
}

int em_trace_grads_wrt_graph_value(EmTracer *T) {
    if (T->brk.op != EMBC_CALL || T->sp < T->brk.arg + 2) return 0;
    int n = T->brk.arg, nkw = T->kwnames ? (int)PyTuple_GET_SIZE(T->kwnames) : 0;
    EmSym **args = &TOP(n), *first = TOP(n + 2), *second = TOP(n + 1);
    EmSym *fn = first->kind == SYM_NULL ? second : first;
    int bound = first->kind != SYM_NULL;
    if (fn->kind != SYM_OBJ && fn->kind != SYM_CONST) return 0;
    /* the position of `inputs` among the arguments after self */
    int at = fn->obj == EM_KNOWN(autograd_grad)       ? 1
             : fn->obj == EM_KNOWN(autograd_backward) ? 5
             : fn->obj == EM_KNOWN(tensor_backward)   ? 4 - bound
                                                      : -1;
    if (at < 0) return 0;
    if (at < n - nkw && graph_grad_value(T, args[at])) return 1;
    for (int i = 0; i < nkw; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(T->kwnames, i), "inputs") == 0 &&
            graph_grad_value(T, args[n - nkw + i]))
            return 1;
    return 0;
}

/* The frame slot holding the tensor whose data the instruction at the break reads and then
 * drops: the receiver of t.item(), t.tolist(), t.__bool__()..., the argument of bool(t),
 * float(t), int(t), a conditional jump's operand; NULL for any other instruction. */
static EmSym **read_at_break(EmTracer *T) {
    static const char *const methods[] = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", NULL};
    if (T->brk.op != EMBC_CALL)
        return T->sp >= 1 && (em_bc_flags[T->brk.op] & (EMBCF_POP_JUMP_IF | EMBCF_NONE_TEST)) == EMBCF_POP_JUMP_IF
                   ? &TOP(1)
                   : NULL;
    int n = T->brk.arg;
    if (T->sp < n + 2 || T->kwnames || n > 1) return NULL;
    EmSym *first = TOP(n + 2), *second = TOP(n + 1);
    if (n == 1 && first->kind == SYM_NULL && (second->kind == SYM_OBJ || second->kind == SYM_CONST) &&
        (second->obj == (PyObject *)&PyBool_Type || second->obj == (PyObject *)&PyFloat_Type ||
         second->obj == (PyObject *)&PyLong_Type))
        return &TOP(1);
    if (n != 0 || first->kind == SYM_NULL || !first->obj) return NULL;
    int found = 0;
    for (int i = 0; !found && methods[i]; i++) {
        PyObject *m = PyObject_GetAttrString((PyObject *)em_state.tensor_type, methods[i]);
        if (!m) PyErr_Clear(); /* not one of them */
        found = m && m == first->obj;
        Py_XDECREF(m);
    }
    return found ? &TOP(1) : NULL;
}

EmStatus em_trace_detach_read_at_break(EmTracer *T) {
    EmSym **slot = read_at_break(T), *t = slot ? *slot : NULL;
    if (!t || t->kind != SYM_TENSOR || t->ref < 0) return EM_OK;
    const EmNode *n = &T->G->nodes.data[t->ref];
    if (n->op == EMOP_INPUT || !n->requires_grad) return EM_OK;
    int held = em_sym_held_elsewhere(T, slot);
    if (held) return held < 0 ? EM_ERR : EM_OK;
    PyObject *detach = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "detach");
    EmSym *fn = detach ? em_sym_const(T, detach) : NULL, *out = NULL;
    Py_XDECREF(detach);
    EmStatus st = fn ? em_call(T, fn, NULL, &t, 1, NULL, &out) : EM_ERR;
    if (st == EM_OK) *slot = out;
    return st;
}

EmStatus h_call_ex(EmTracer *T, const EmInstr *in) {
    int has_kw = in->arg & 1;
    NEED(3 + has_kw);
    EmSym *kw = has_kw ? POP() : NULL, *pos = POP(), *fn = POP(), *null = POP(), *items = NULL, *out = NULL;
    if (null->kind != SYM_NULL) return em_trace_fail(T, EMA_OPCODE, "CALL_FUNCTION_EX on a bound method");
    EmStatus st = em_seq_items(T, pos, &items);
    if (st != EM_OK) return st;
    if (kw && kw->kind != SYM_DICT) return em_trace_fail(T, EMA_VALUE, "**kwargs of %s", em_sym_describe(kw));
    int np = items->items.len, nk = kw ? kw->items.len : 0;
    EmSym *args[64];
    if (np + nk > 64) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
    for (int i = 0; i < np; i++) args[i] = items->items.data[i];
    PyObject *names = NULL;
    if (nk) {
        if (!(names = PyTuple_New(nk))) return EM_ERR;
        for (int i = 0; i < nk; i++) {
            PyTuple_SET_ITEM(names, i, Py_NewRef(kw->keys.data[i]));
            args[np + i] = kw->items.data[i];
            if (!PyUnicode_Check(kw->keys.data[i])) { /* Python raises TypeError: let it */
                Py_DECREF(names);
                return em_trace_fail(T, EMA_VALUE, "**kwargs with a key that is not a str");
            }
        }
    }
    st = em_call(T, fn, NULL, args, np + nk, names, &out);
    Py_XDECREF(names);
    return st == EM_OK ? em_push(T, out) : st;
}

EmStatus h_before_with(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    EmSym *ctx = POP(), *exit_fn = NULL, *entered = NULL;
    EmStatus st = em_ctx_with(T, ctx, &exit_fn, &entered);
    if (st != EM_OK) return st;
    if ((st = em_push(T, exit_fn)) != EM_OK) return st;
    return em_push(T, entered);
}

/* ---- functions made while tracing: comprehensions, generator expressions, lambdas ---- */

/* A cell variable's cell is made on its first capture (h_load_closure). A free variable's slot
 * holds its program cell, but for 3.12's inlined comprehension that saved it away
 * (LOAD_FAST_AND_CLEAR): MAKE_CELL there makes a new cell of the comprehension's own. */
EmStatus h_make_cell(EmTracer *T, const EmInstr *in) {
    if (!(em_code_kind(T->code, in->arg) & EM_CO_FAST_FREE) || cell_of(T, in->arg)) return EM_OK;
    EmStatus st = EM_OK;
    EmSym *v = T->locals[in->arg] ? em_local_get(T, in->arg, &st) : NULL, *c = NULL;
    if (st != EM_OK) return st;
    if (!(c = em_sym_new(T, SYM_CELL))) return EM_ERR;
    if (v && em_vec_push(&c->items, v)) return PyErr_NoMemory(), EM_ERR;
    T->locals[in->arg] = c;
    return EM_OK;
}

/* The variable's cell, made on its first capture with the local's value (an unbound local: an
 * empty cell); a free variable's is its program cell's, which then gets a guard slot (a
 * closure over it may leave the trace). */
EmStatus h_load_closure(EmTracer *T, const EmInstr *in) {
    EmSym *c = cell_of(T, in->arg), *v = NULL;
    if (c && c->pos == 1 && em_prog_cell_slot(T, c, em_code_name(T->code, in->arg), -1) < 0) return EM_ERR;
    if (c) return em_push(T, c);
    if (em_code_kind(T->code, in->arg) & EM_CO_FAST_FREE)
        return em_trace_fail(T, EMA_VALUE, "the free variable %s without a cell",
                             PyUnicode_AsUTF8(em_code_name(T->code, in->arg)));
    EmStatus st = EM_OK;
    if (T->locals[in->arg] && !(v = em_local_get(T, in->arg, &st))) return st;
    if (!(c = em_sym_new(T, SYM_CELL))) return EM_ERR;
    if (v && em_vec_push(&c->items, v)) return PyErr_NoMemory(), EM_ERR;
    T->locals[in->arg] = c;
    return em_push(T, c);
}

/* A default value a function made while tracing may hold as a Python object: a constant, an
 * object itself, or a tuple of those. A list or dict would be a copy made once, where Python
 * makes a new one each time the def runs (and shares one read from the frame). */
static int default_ok(EmSym *s, int depth) {
    if (s->kind == SYM_CONST || s->kind == SYM_OBJ) return 1;
    if (s->kind != SYM_TUPLE || s->seq_type || depth > 8) return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if (!default_ok(s->items.data[i], depth + 1)) return 0;
    return 1;
}

/* Sets the positional defaults of fn (a function made while tracing) from the tuple sym d:
 * their values when default_ok, else placeholders (None), the values being syms the function's
 * sym holds (h_make_function). EM_OK, EM_ABORT or EM_ERR. */
static EmStatus fn_defaults(EmTracer *T, PyObject *fn, EmSym *d) {
    if (!d) return EM_OK;
    PyObject *v = NULL;
    if (default_ok(d, 0)) {
        if (!(v = em_sym_value(T, d)))
            return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "non-constant default values");
    } else if (d->kind != SYM_TUPLE || d->seq_type) {
        return em_trace_fail(T, EMA_VALUE, "a function made while tracing with defaults in a %s", em_sym_describe(d));
    } else { /* placeholders: the function is never called as it is */
        v = PyTuple_New(d->items.len);
        for (int32_t i = 0; v && i < d->items.len; i++) PyTuple_SET_ITEM(v, i, Py_NewRef(Py_None));
        if (!v) return EM_ERR;
    }
    int r = PyFunction_SetDefaults(fn, v);
    Py_DECREF(v);
    return r ? EM_ERR : EM_OK;
}

EmStatus h_make_function(EmTracer *T, const EmInstr *in) {
    int flags = in->arg;
    NEED(1 + !!(flags & 1) + !!(flags & 2) + !!(flags & 4) + !!(flags & 8));
    EmSym *code = POP(), *closure = flags & 8 ? POP() : NULL;
    if (flags & 4) (void)POP();
    EmSym *kwdefaults = flags & 2 ? POP() : NULL; /* a dict: name -> default */
    EmSym *defaults = flags & 1 ? POP() : NULL;
    if (code->kind != SYM_CONST || !PyCode_Check(code->obj))
        return em_trace_fail(T, EMA_VALUE, "MAKE_FUNCTION of a %s", em_sym_describe(code));
    PyCodeObject *co = (PyCodeObject *)code->obj;
    if (closure && closure->kind != SYM_TUPLE)
        return em_trace_fail(T, EMA_VALUE, "a closure made while tracing (%s)", PyUnicode_AsUTF8(co->co_qualname));
    PyObject *fn = PyFunction_NewWithQualName(code->obj, T->globals, co->co_qualname);
    if (!fn) return EM_ERR;
    EmSym *s = em_sym_new(T, SYM_OBJ);
    if (!s) {
        Py_DECREF(fn);
        return EM_ERR;
    }
    s->obj = fn;
    EmSym *sym_defaults = defaults && !default_ok(defaults, 0) ? defaults : NULL;
    EmStatus st = fn_defaults(T, fn, defaults);
    if (st != EM_OK) return st;
    if (kwdefaults) { /* as the positional defaults: values the function object may hold */
        if (kwdefaults->kind != SYM_DICT)
            return em_trace_fail(T, EMA_VALUE, "keyword-only defaults in a %s", em_sym_describe(kwdefaults));
        PyObject *kd = PyDict_New();
        for (int32_t i = 0; kd && i < kwdefaults->items.len; i++) {
            EmSym *v = kwdefaults->items.data[i];
            PyObject *pv = default_ok(v, 0) ? em_sym_value(T, v) : NULL;
            if (!pv || PyDict_SetItem(kd, kwdefaults->keys.data[i], pv)) {
                Py_XDECREF(pv);
                Py_DECREF(kd);
                return PyErr_Occurred() ? EM_ERR
                                        : em_trace_fail(T, EMA_VALUE, "a keyword-only default made while tracing");
            }
            Py_DECREF(pv);
        }
        int r = kd ? PyFunction_SetKwDefaults(fn, kd) : -1;
        Py_XDECREF(kd);
        if (r) return EM_ERR;
    }
    for (int32_t i = 0; closure && i < closure->items.len; i++)
        if (em_vec_push(&s->items, closure->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; sym_defaults && i < sym_defaults->items.len; i++)
        if (em_vec_push(&s->items, sym_defaults->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    s->pos = sym_defaults ? sym_defaults->items.len : 0;
    return em_push(T, s);
}

EmStatus h_return_generator(EmTracer *T, const EmInstr *in) {
    (void)in;
    if (!T->gen_items) return em_trace_fail(T, EMA_OPCODE, "RETURN_GENERATOR");
    return em_push(T, em_sym_const(T, Py_None)); /* the value the first send() resumes with */
}

EmStatus h_yield_value(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    return em_gen_yield(T, POP()); /* the value sent on resume is pushed then (em_lazy.c) */
}

/* GET_YIELD_FROM_ITER: iter(x), a generator being its own. */
EmStatus h_get_yield_from_iter(EmTracer *T, const EmInstr *in) { return h_get_iter(T, in); }

/* SEND: [receiver, v] -> [receiver, value yielded], or at the receiver's return its value and a
 * jump: 3.11 replaces the receiver with it, 3.12 pushes it above (END_SEND then pops the
 * receiver). */
EmStatus h_send(EmTracer *T, const EmInstr *in) {
    NEED(2);
    EmSym *v = POP(), *recv = TOP(1), *out = NULL, *ret = NULL;
    EmStatus st = em_gen_send(T, recv, v, &out, &ret);
    if (st != EM_OK) return st;
    if (out) return em_push(T, out);
    if (!ret && !(ret = em_sym_const(T, Py_None))) return EM_ERR;
#ifdef EMBC_END_SEND
    st = em_push(T, ret);
#else
    TOP(1) = ret;
#endif
    T->ip = em_jump_target(in);
    return st;
}
#ifdef EMBC_END_SEND
EmStatus h_end_send(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(2);
    EmSym *v = POP();
    TOP(1) = v;
    return EM_OK;
}
#endif

EmStatus h_map_add(EmTracer *T, const EmInstr *in) {
    NEED(in->arg + 2);
    EmSym *v = POP(), *k = POP(), *d = TOP(in->arg);
    if (d->kind != SYM_DICT || d->src >= 0) return em_trace_fail(T, EMA_VALUE, "MAP_ADD into a %s", em_sym_describe(d));
    return dict_put(T, d, k, v);
}

/* f(k=..., **{k: ...}): CPython's TypeError, naming f (a constant or an object's sym); any other
 * callable sym fails the trace. */
static EmStatus twice_error(EmTracer *T, EmSym *f, PyObject *key) {
    if (!f->obj || em_sym_placeholder(f) || (f->kind != SYM_CONST && f->kind != SYM_OBJ))
        return em_trace_fail(T, EMA_VALUE, "keyword argument given twice");
    PyObject *e = PyObject_CallMethod(em_state.meta_run, "kwargs_twice_error", "OO", f->obj, key);
    EmStatus st = e ? em_trace_raise(T, e, "raises TypeError") : EM_ERR;
    Py_XDECREF(e);
    return st;
}

/* DICT_MERGE (f(**a, **b): a repeated key is an error) and DICT_UPDATE ({**a, **b}) into a
 * dict made while tracing, from a dict sym whose keys are known. */
EmStatus h_dict_merge(EmTracer *T, const EmInstr *in) {
    NEED(in->arg + 1);
    int merge = in->op == EMBC_DICT_MERGE;
    EmSym *src = POP(), *d = TOP(in->arg);
    if (src->kind != SYM_DICT) { /* {**m} of a user mapping */
        EmStatus mst = em_mapping_as_dict(T, src, &src);
        if (mst != EM_OK && mst != CALL_NEXT) return mst;
    }
    if (d->kind != SYM_DICT || d->src >= 0 || src->kind != SYM_DICT)
        return em_trace_fail(T, EMA_VALUE, "%s of a %s", em_bc_names[in->op], em_sym_describe(src));
    for (int32_t k = 0; k < src->keys.len; k++) {
        for (int32_t i = 0; merge && i < d->keys.len; i++) {
            int eq = PyObject_RichCompareBool(d->keys.data[i], src->keys.data[k], Py_EQ);
            if (eq < 0) return EM_ERR;
            if (eq) return twice_error(T, TOP(in->arg + 2), src->keys.data[k]);
        }
        EmSym *key = em_dict_key_sym(T, src->keys.data[k]);
        EmStatus st = key ? dict_put(T, d, key, src->items.data[k]) : EM_ERR;
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

EmStatus h_list_to_tuple(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    EmSym *l = POP();
    if (l->kind != SYM_LIST) return em_trace_fail(T, EMA_VALUE, "LIST_TO_TUPLE of a %s", em_sym_describe(l));
    EmSym *t = em_sym_new(T, SYM_TUPLE);
    if (!t) return EM_ERR;
    for (int32_t i = 0; i < l->items.len; i++)
        if (em_vec_push(&t->items, l->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    return em_push(T, t);
}

#ifdef EMBC_CALL_INTRINSIC_1
/* 3.12's intrinsic functions of one operand: the ones ordinary functions use. */
EmStatus h_call_intrinsic_1(EmTracer *T, const EmInstr *in) {
    switch (in->arg) {
        case EM_INTRINSIC1_UNARY_POSITIVE: {
            NEED(1);
            EmSym *args[1] = {POP()}, *out = NULL;
            EmStatus st = em_apply_op(T, EMOP_POS, args, 1, &out);
            return st == EM_OK ? em_push(T, out) : st;
        }
        case EM_INTRINSIC1_LIST_TO_TUPLE: return h_list_to_tuple(T, in);
        case EM_INTRINSIC1_STOPITERATION_ERROR: { /* a generator's PEP 479 handler */
            NEED(1);
            EmSym *e = TOP(1);
            if (e->kind != SYM_CONST)
                return em_trace_fail(T, EMA_VALUE, "STOPITERATION_ERROR of a %s", em_sym_describe(e));
            PyObject *x = em_gen_exc(e->obj);
            EmSym *r = x ? em_sym_const(T, x) : NULL;
            Py_XDECREF(x);
            if (!r) return EM_ERR;
            TOP(1) = r;
            return EM_OK;
        }
        default:
            return em_trace_fail(T, EMA_OPCODE, "CALL_INTRINSIC_1 %s",
                                 in->arg < (int)(sizeof(em_intrinsic1_names) / sizeof(*em_intrinsic1_names))
                                     ? em_intrinsic1_names[in->arg]
                                     : "?");
    }
}
EmStatus h_call_intrinsic_2(EmTracer *T, const EmInstr *in) {
    return em_trace_fail(T, EMA_OPCODE, "CALL_INTRINSIC_2 %s",
                         in->arg < (int)(sizeof(em_intrinsic2_names) / sizeof(*em_intrinsic2_names))
                             ? em_intrinsic2_names[in->arg]
                             : "?");
}
#endif

/* ---- control flow ---- */

EmStatus h_jump(EmTracer *T, const EmInstr *in) {
    T->ip = em_jump_target(in);
    return EM_OK;
}

EmStatus h_pop_jump_if(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmSym *c = POP();
    int holds; /* the jump's test: `c is None`, or the truth of c */
    if (em_bc_flags[in->op] & EMBCF_NONE_TEST) {
        if (c->kind == SYM_NULL) return em_trace_fail(T, EMA_VALUE, "None test of NULL");
        holds = em_sym_is_obj(c, Py_None);
    } else {
        EmStatus st = em_sym_truth(T, c, &holds);
        if (st != EM_OK) return st;
    }
    if ((em_bc_flags[in->op] & EMBCF_JUMP_IF_TRUE) ? holds : !holds) T->ip = em_jump_target(in);
    return EM_OK;
}

#ifdef EMBC_JUMP_IF_FALSE_OR_POP
EmStatus h_jump_or_pop(EmTracer *T, const EmInstr *in) {
    NEED(1);
    int t;
    EmStatus st = em_sym_truth(T, TOP(1), &t);
    if (st != EM_OK) return st;
    int jump_when = in->op != EMBC_JUMP_IF_FALSE_OR_POP;
    if (t == jump_when) T->ip = em_jump_target(in);
    else T->sp--;
    return EM_OK;
}
#endif

EmStatus h_get_iter(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    EmSym *it = NULL;
    EmStatus st = em_iter_of(T, POP(), &it);
    return st == EM_OK ? em_push(T, it) : st;
}

EmStatus h_for_iter(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmSym *v = NULL;
    EmStatus st = em_iter_next(T, TOP(1), &v);
    if (st != EM_OK) return st;
    if (v) return em_push(T, v);
    T->sp--;
    T->ip = em_for_iter_exit(in);
    return EM_OK;
}
/* The end of a for loop that exits through its body's break is never reached by FOR_ITER's
 * exhaustion (it jumps past END_FOR): pops what is left. */
EmStatus h_end_for(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(EM_END_FOR_POPS);
    T->sp -= EM_END_FOR_POPS;
    return EM_OK;
}

/* The value of a plain list, tuple, dict or set (of such, down to constants): new reference,
 * or NULL (an error set only when Python failed). */
static EM_NEW PyObject *plain_value(EmSym *s, int depth) {
    if (s->kind == SYM_CONST) return Py_NewRef(s->obj);
    int set = s->kind == SYM_SET &&
              (s->seq_type == (PyObject *)&PySet_Type || s->seq_type == (PyObject *)&PyFrozenSet_Type);
    if (depth > 16 || (s->seq_type && !set) ||
        (s->kind != SYM_LIST && s->kind != SYM_TUPLE && s->kind != SYM_DICT && !set))
        return NULL;
    PyObject *r = s->kind == SYM_DICT ? PyDict_New() : PyList_New(0);
    for (int32_t i = 0; r && i < s->items.len; i++) {
        PyObject *v = plain_value(s->items.data[i], depth + 1);
        int bad = !v || (s->kind == SYM_DICT
                             ? em_key_token_sym(s->keys.data[i]) != NULL || PyDict_SetItem(r, s->keys.data[i], v)
                             : PyList_Append(r, v));
        Py_XDECREF(v);
        if (bad) Py_CLEAR(r);
    }
    if (!r || s->kind == SYM_LIST || s->kind == SYM_DICT) return r;
    PyObject *t = s->kind == SYM_TUPLE ? PyList_AsTuple(r) : PyObject_CallOneArg(s->seq_type, r);
    Py_DECREF(r);
    return t;
}

EmStatus h_format_value(EmTracer *T, const EmInstr *in) {
    int has_spec = (in->arg & 4) != 0;
    NEED(1 + has_spec);
    EmSym *spec = has_spec ? POP() : NULL, *v = POP();
    PyObject *shown = (v->kind == SYM_NEW || v->kind == SYM_OBJ) && !spec && (in->arg & 3) != 3 ? em_new_repr(T, v)
                                                                                                : NULL;
    if (shown) { /* f"{s}", f"{s!r}" of a container subclass's instance: its base's repr */
        EmSym *r = em_sym_const(T, shown);
        Py_DECREF(shown);
        return r ? em_push(T, r) : EM_ERR;
    }
    if (PyErr_Occurred()) return EM_ERR;
    if (em_sym_user_operand(v) && (in->arg & 3) != 3 &&
        (!spec || (spec->kind == SYM_CONST && PyUnicode_Check(spec->obj) && !PyUnicode_GET_LENGTH(spec->obj)))) {
        /* f"{o}", f"{o!s}", f"{o!r}" of a user object whose format is object's: its str() or repr() */
        PyObject *fmt = _PyType_Lookup(Py_TYPE(v->obj), EM_STR(dunder_format));
        if ((in->arg & 3) || fmt == _PyType_Lookup(&PyBaseObject_Type, EM_STR(dunder_format))) {
            EmSym *f = em_sym_known(T, (in->arg & 3) == 2 ? EM_KNOWN(repr) : EM_KNOWN(str), "str"), *r = NULL;
            EmStatus st = f ? em_call(T, f, NULL, &v, 1, NULL, &r) : EM_ERR;
            return st == EM_OK ? em_push(T, r) : st;
        }
    }
    if (v->kind == SYM_INT) { /* a symbolic int or float input formatted: its value, pinned */
        PyObject *val = em_int_value(T, v);
        v = val ? em_sym_const(T, val) : NULL;
        Py_XDECREF(val);
        if (!v) return EM_ERR;
    } else if (v->kind == SYM_FLOAT && em_float_pin(T, v) != EM_OK) {
        return EM_ERR;
    }
    /* a list, tuple, dict or set of constants: formatted as that value (no user code runs) */
    PyObject *known = v->kind != SYM_CONST && (!spec || spec->kind == SYM_CONST) ? plain_value(v, 0) : NULL;
    if (PyErr_Occurred()) return EM_ERR;
    int plain = v->kind == SYM_TUPLE || v->kind == SYM_LIST || v->kind == SYM_DICT || v->kind == SYM_SET;
    int empty_spec = !spec ||
                     (spec->kind == SYM_CONST && PyUnicode_Check(spec->obj) && !PyUnicode_GET_LENGTH(spec->obj));
    if (!known && plain && empty_spec && (in->arg & 3) != 3) { /* its str() or repr(): its items' reprs */
        EmSym *f = em_sym_known(T, EM_KNOWN(repr), "repr"), *r = NULL;
        EmStatus st = f ? em_call(T, f, NULL, &v, 1, NULL, &r) : EM_ERR;
        return st == EM_OK ? em_push(T, r) : st;
    }
    if ((v->kind != SYM_CONST && !known) || (spec && spec->kind != SYM_CONST))
        return em_trace_fail(T, EMA_VALUE, "f-string of %s", em_sym_describe(v));
    PyObject *conv = known ? known : Py_NewRef(v->obj), *tmp = NULL;
    switch (in->arg & 3) {
        case 1: tmp = PyObject_Str(conv); break;
        case 2: tmp = PyObject_Repr(conv); break;
        case 3: tmp = PyObject_ASCII(conv); break;
        default: tmp = Py_NewRef(conv); break;
    }
    Py_DECREF(conv);
    if (!tmp) return EM_ERR;
    PyObject *r = PyObject_Format(tmp, spec ? spec->obj : NULL);
    Py_DECREF(tmp);
    if (!r) return EM_ERR;
    EmSym *s = em_sym_const(T, r);
    Py_DECREF(r);
    return em_push(T, s);
}

EmStatus h_build_string(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    PyObject *parts = PyTuple_New(in->arg);
    if (!parts) return EM_ERR;
    for (int i = 0; i < in->arg; i++) {
        EmSym *p = TOP(in->arg - i);
        if (p->kind != SYM_CONST || !PyUnicode_Check(p->obj)) {
            Py_DECREF(parts);
            return em_trace_fail(T, EMA_VALUE, "string of %s", em_sym_describe(p));
        }
        PyTuple_SET_ITEM(parts, i, Py_NewRef(p->obj));
    }
    T->sp -= in->arg;
    PyObject *empty = PyUnicode_FromString("");
    PyObject *r = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    if (!r) return EM_ERR;
    EmSym *s = em_sym_const(T, r);
    Py_DECREF(r);
    return em_push(T, s);
}

EmStatus h_return_value(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    T->retval = POP();
    T->done = 1;
    return EM_OK;
}
EmStatus h_return_const(EmTracer *T, const EmInstr *in) {
    T->retval = em_sym_const(T, PyTuple_GET_ITEM(T->code->co_consts, in->arg));
    if (!T->retval) return PyErr_Occurred() ? EM_ERR : EM_ABORT;
    T->done = 1;
    return EM_OK;
}

/* ---- imports: only of modules already imported (no import code runs while tracing) ---- */

EmStatus h_import_name(EmTracer *T, const EmInstr *in) {
    NEED(2);
    EmSym *fromlist = POP(), *level = POP();
    PyObject *name = PyTuple_GET_ITEM(T->code->co_names, in->arg);
    if (fromlist->kind != SYM_CONST || level->kind != SYM_CONST)
        return em_trace_fail(T, EMA_VALUE, "import with computed arguments");
    PyObject *mod = PyObject_CallMethod(em_state.meta_run, "imported", "OOOO", name, T->globals, fromlist->obj,
                                        level->obj);
    if (!mod) return EM_ERR;
    if (mod == Py_None) {
        Py_DECREF(mod);
        PyObject *miss = PyObject_CallMethod(em_state.meta_run, "import_missing", "OOOO", name, T->globals,
                                             fromlist->obj, level->obj);
        if (!miss) return EM_ERR;
        if (!T->sticky && !(T->sticky = PyList_New(0))) {
            Py_DECREF(miss);
            return EM_ERR;
        }
        int e = PyList_SetSlice(T->sticky, PyList_GET_SIZE(T->sticky), PyList_GET_SIZE(T->sticky), miss);
        Py_DECREF(miss);
        if (e) return EM_ERR;
        return em_trace_fail(T, EMA_NOT_IN_GRAPH, "import of %s (not imported yet: it would run import code)",
                             PyUnicode_AsUTF8(name));
    }
    const char *mn = PyModule_Check(mod) ? PyModule_GetName(mod) : NULL;
    if (!mn) PyErr_Clear(); /* a label for dumps only */
    EmSym *s = em_sym_known(T, mod, mn ? mn : "<module>");
    Py_DECREF(mod);
    return s ? em_push(T, s) : EM_ERR;
}

EmStatus h_import_from(EmTracer *T, const EmInstr *in) {
    NEED(1);
    EmSym *mod = TOP(1), *out = NULL, *self = NULL;
    EmStatus st = em_sym_getattr(T, mod, PyTuple_GET_ITEM(T->code->co_names, in->arg), 0, &out, &self);
    return st == EM_OK ? em_push(T, out) : st;
}

/* ---- sets: of constants only, a real set object owned by the trace ---- */

EmStatus h_build_set(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    EmSym *s = NULL;
    EmStatus st = em_set_of_items(T, (PyObject *)&PySet_Type, &TOP(in->arg), in->arg, &s);
    if (st != EM_OK) return st;
    T->sp -= in->arg;
    return em_push(T, s);
}

EmStatus h_set_add(EmTracer *T, const EmInstr *in) {
    NEED(in->arg + 1);
    EmSym *v = POP(), *set = TOP(in->arg), *items = NULL;
    if ((set->kind != SYM_CONST || !PySet_CheckExact(set->obj)) && set->kind != SYM_SET)
        return em_trace_fail(T, EMA_VALUE, "SET_ADD");
    int update = in->op == EMBC_SET_UPDATE;
    if (update) {
        EmStatus st = em_seq_items(T, v, &items);
        if (st != EM_OK) return st;
    }
    int32_t n = update ? items->items.len : 1;
    for (int32_t i = 0; i < n; i++) {
        EmSym *x = update ? items->items.data[i] : v;
        EmStatus st = em_set_add_item(T, set, x);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}
