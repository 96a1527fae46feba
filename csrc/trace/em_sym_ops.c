/* em_sym_ops.c: the operations on syms that opcode handlers call, dispatched on the sym's kind
 * through em_sym_ops[] (each kind's row lives with its family, em_sym_ops.h), the rows of
 * constants and tensors (a tensor's operations are graph ops, em_op_record), and the
 * evaluation on known values that several kinds share.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

const EmSymOps *const em_sym_ops[SYM__COUNT] = {
    [SYM_CONST] = &em_const_ops, [SYM_TENSOR] = &em_tensor_ops,   [SYM_TUPLE] = &em_tuple_ops,
    [SYM_LIST] = &em_list_ops,   [SYM_DICT] = &em_dict_ops,       [SYM_OBJ] = &em_obj_ops,
    [SYM_ITER] = &em_iter_ops,   [SYM_NEW] = &em_new_ops,         [SYM_VIEW] = &em_view_ops,
    [SYM_BOUND] = &em_bound_ops, [SYM_PARTIAL] = &em_partial_ops, [SYM_EXIT] = &em_exit_ops,
    [SYM_INT] = &em_int_ops,     [SYM_SLICE] = &em_slice_ops,     [SYM_FLOAT] = &em_float_ops,
    [SYM_CTX] = &em_ctx_ops,     [SYM_SET] = &em_set_ops,         [SYM_NDARRAY] = &em_ndarray_ops,
    [SYM_ITEM] = &em_item_ops,
};

/* NULL, CTX: values the trace only passes along. */
static const EmSymOps no_ops;

static const EmSymOps *ops_of(const EmSym *s) {
    const EmSymOps *o = em_sym_ops[s->kind];
    return o ? o : &no_ops;
}

/* The abort for an operation s's kind does not have. */
static EmStatus no_op(EmTracer *T, const char *what, EmSym *s) {
    return em_trace_fail(T, EMA_VALUE, "%s of %s", what, em_sym_describe(s));
}

PyObject *em_op_fn(EmOp op) { return PyTuple_GET_ITEM(em_state.op_fns, op); }

EmStatus em_sym_eq_truth(EmTracer *T, EmSym *a, EmSym *b, int *eq) {
    EmSym *r = NULL;
    EmStatus st = em_sym_binop(T, EMOP_EQ, em_op_fn(EMOP_EQ), a, b, &r);
    return st == EM_OK ? em_sym_truth(T, r, eq) : st;
}

int em_seq_plain_eq(PyObject *seq_type) {
    PyTypeObject *tp = (PyTypeObject *)seq_type; /* a namedtuple subclass may define __eq__/__hash__ */
    return !seq_type || seq_type == EM_KNOWN(torch_Size) ||
           (em_is_namedtuple_type(tp) && tp->tp_richcompare == PyTuple_Type.tp_richcompare &&
            tp->tp_hash == PyTuple_Type.tp_hash);
}

/* 't' a tuple compared as tuple's == compares (a sym or a constant), 'l' a plain list, 0 neither. */
static int seq_like(const EmSym *s) {
    if (s->kind == SYM_TUPLE) return em_seq_plain_eq(s->seq_type) ? 't' : 0;
    if (s->kind == SYM_LIST) return s->seq_type ? 0 : 'l';
    if (s->kind == SYM_CONST && PyTuple_Check(s->obj))
        return Py_TYPE(s->obj)->tp_richcompare == PyTuple_Type.tp_richcompare ? 't' : 0;
    return 0;
}

static Py_ssize_t seq_len(const EmSym *s) { return s->kind == SYM_CONST ? PyTuple_GET_SIZE(s->obj) : s->items.len; }

static EmSym *seq_item(EmTracer *T, EmSym *s, Py_ssize_t i) {
    return s->kind == SYM_CONST ? em_sym_const(T, PyTuple_GET_ITEM(s->obj, i)) : s->items.data[i];
}

static EmStatus items_eq_at(EmTracer *T, EmSym *x, EmSym *y, int lookup, int depth, int *eq) {
    if (x == y) return (*eq = 1), EM_OK;
    if (depth > EM_MAX_NEST) return CALL_NEXT;
    if (x->kind == SYM_CONST && y->kind == SYM_CONST) {
        int r = PyObject_RichCompareBool(x->obj, y->obj, Py_EQ);
        if (r < 0) return PyErr_Clear(), CALL_NEXT; /* Python raises it: not decided here */
        return (*eq = r), EM_OK;
    }
    int sx = seq_like(x), sy = seq_like(y);
    if (sx && sy) {
        *eq = sx == sy && seq_len(x) == seq_len(y);
        for (Py_ssize_t i = 0; *eq && i < seq_len(x); i++) {
            EmSym *a = seq_item(T, x, i), *b = a ? seq_item(T, y, i) : NULL;
            EmStatus st = b ? items_eq_at(T, a, b, lookup, depth + 1, eq) : EM_ERR;
            if (st != EM_OK) return st;
        }
        return EM_OK;
    }
    int kx = em_set_item_kind(x), ky = em_set_item_kind(y);
    if (!((kx == 1 && (ky == 0 || ky == 1)) || (ky == 1 && kx == 0))) return CALL_NEXT;
    EmStatus st = em_sym_is(T, x, y, eq);
    /* distinct tensors: == compares their values, unless a lookup's hashes (their ids) differed */
    return st == EM_OK && !*eq && !lookup && (x->kind == SYM_TENSOR || y->kind == SYM_TENSOR) ? CALL_NEXT : st;
}

EmStatus em_sym_items_eq(EmTracer *T, EmSym *x, EmSym *y, int lookup, int *eq) {
    return items_eq_at(T, x, y, lookup, 0, eq);
}

EmStatus em_seq_order_traced(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out) {
    int sa = seq_like(a);
    if (!sa || sa != seq_like(b)) return CALL_NEXT;
    Py_ssize_t na = seq_len(a), nb = seq_len(b);
    for (Py_ssize_t i = 0; i < na && i < nb; i++) {
        EmSym *x = seq_item(T, a, i), *y = x ? seq_item(T, b, i) : NULL;
        if (!y) return EM_ERR;
        if (x == y || (x->kind == SYM_CONST && y->kind == SYM_CONST && x->obj == y->obj)) continue;
        int eq = 0;
        EmStatus st = em_sym_eq_truth(T, x, y, &eq);
        if (st != EM_OK) return st;
        if (!eq) return em_sym_binop(T, op, em_op_fn(op), x, y, out); /* the first differing pair decides */
    }
    int r = op == EMOP_LT ? na < nb : op == EMOP_LE ? na <= nb : op == EMOP_GT ? na > nb : na >= nb;
    return (*out = em_sym_const(T, r ? Py_True : Py_False)) ? EM_OK : EM_ERR;
}

EmStatus em_seq_eq_traced(EmTracer *T, EmSym *a, EmSym *b, int *eq) {
    int sa = seq_like(a);
    if (!sa || sa != seq_like(b)) return CALL_NEXT;
    *eq = seq_len(a) == seq_len(b);
    for (Py_ssize_t i = 0; *eq && i < seq_len(a); i++) {
        EmSym *x = seq_item(T, a, i), *y = x ? seq_item(T, b, i) : NULL;
        if (!y) return EM_ERR;
        if (x == y || (x->kind == SYM_CONST && y->kind == SYM_CONST && x->obj == y->obj)) continue;
        EmStatus st = em_sym_eq_truth(T, x, y, eq);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* ---- dispatch ---- */

EmStatus em_sym_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    *self = NULL;
    EmSymKind k = base->kind;
    if ((k == SYM_TUPLE || k == SYM_LIST || k == SYM_DICT || k == SYM_SET) &&
        !PyUnicode_Compare(name, EM_STR(dunder_class))) { /* object's __class__: type(c) */
        PyTypeObject *tp = em_sym_known_type(base);
        PyObject *cls_descr = _PyType_Lookup(&PyBaseObject_Type, EM_STR(dunder_class));
        if (tp && _PyType_Lookup(tp, EM_STR(dunder_class)) == cls_descr) return em_sym_type(T, base, out);
    }
    const EmSymOps *o = ops_of(base);
    if (o->getattr) return o->getattr(T, base, name, method, out, self);
    return em_trace_fail(T, EMA_ATTR, "%s of %s", PyUnicode_AsUTF8(name), em_sym_describe(base));
}

/* key as a container other than a tensor or an array takes it (em_sym_hashable). */
static EmSym *key_for(EmTracer *T, EmSym *c, EmSym *key) {
    return c->kind == SYM_TENSOR || c->kind == SYM_NDARRAY ? key : em_sym_hashable(T, key);
}

/* A sequence indexed by a tensor the trace knows (x.shape[torch.tensor(1)]): the index its
 * __index__ gives, as the sequence's subscript takes it; key itself otherwise. NULL on error. */
static EmSym *known_index(EmTracer *T, EmSym *c, EmSym *key) {
    PyObject *real = key->kind == SYM_TENSOR ? em_fold_known(T, key) : NULL;
    int seq = c->kind == SYM_TUPLE || c->kind == SYM_LIST ||
              (c->kind == SYM_CONST && (PyTuple_Check(c->obj) || PyUnicode_Check(c->obj) || PyRange_Check(c->obj)));
    if (!real || !seq) return key;
    PyObject *i = PyNumber_Index(real);
    if (!i) return PyErr_Clear(), key; /* not an integer: Python's TypeError comes from the subscript */
    EmSym *k = em_sym_const(T, i);
    Py_DECREF(i);
    return k;
}

EmStatus em_sym_getitem(EmTracer *T, EmSym *c, EmSym *key, EmSym **out) {
    if (!(key = known_index(T, c, key))) return EM_ERR;
    if (!(key = key_for(T, c, key))) return EM_ERR;
    /* a slice with a symbolic bound stays symbolic only for a tensor */
    if (key->kind == SYM_SLICE && c->kind != SYM_TENSOR && !(key = em_slice_pinned(T, key))) return EM_ERR;
    /* before c's kind is asked: a key that holds a tensor makes the subscript a graph op,
     * whatever c is, but for a tensor (or a tuple holding one) as a dict's key */
    int dict_key = (c->kind == SYM_OBJ && c->src >= 0 && PyDict_Check(c->obj) && em_key_of_frame(key)) ||
                   (c->kind == SYM_DICT && em_set_item_kind(key) >= 1);
    const EmSymOps *o = em_sym_has_tensor(key) && !dict_key && c->kind != SYM_NDARRAY ? &em_tensor_ops : ops_of(c);
    return o->getitem ? o->getitem(T, c, key, out) : no_op(T, "subscript", c);
}

EmStatus em_sym_setitem(EmTracer *T, EmSym *c, EmSym *key, EmSym *v) {
    if (!(key = key_for(T, c, key))) return EM_ERR;
    if (key->kind == SYM_SLICE && c->kind != SYM_TENSOR && !(key = em_slice_pinned(T, key))) return EM_ERR;
    EmSym *items = NULL; /* a defaultdict (...) of the frame: its items, written back after the graph */
    EmStatus ist = em_frame_dict_items_rw(T, c, 1, &items);
    if (ist != CALL_NEXT) return ist == EM_OK ? em_sym_setitem(T, items, key, v) : ist;
    if (c->kind == SYM_OBJ && c->pos == EM_POS_IDICT) { /* o.__dict__[k] = v: a store on o's dict */
        if (key->kind == SYM_CONST && PyUnicode_CheckExact(key->obj)) return em_obj_record_store(T, c, key->obj, v);
        return em_trace_fail(T, EMA_SIDE_EFFECT, "item store into an instance __dict__ by %s", em_sym_describe(key));
    }
    const EmSymOps *o = ops_of(c);
    if (o->setitem) return o->setitem(T, c, key, v);
    if (c->kind == SYM_VIEW) /* a dict view or a mappingproxy: read-only, whatever the key */
        return em_trace_raise_msg(T, PyExc_TypeError, "'%s' object does not support item assignment",
                                  em_sym_known_type(c)->tp_name);
    EmStatus st = em_sym_store_check(T, c, key);
    return st == EM_OK ? em_trace_fail(T, EMA_VALUE, "item store into %s", em_sym_describe(c)) : st;
}

/* del l[a:b:k] (k != 1) of a list made while tracing: the items it names dropped. */
static EmStatus del_extended_slice(EmTracer *T, EmSym *c, EmSym *key) {
    EmStatus ok = em_sym_store_check(T, c, key); /* a list of the frame: written back after the graph */
    if (ok != EM_OK) return ok;
    PyObject *slice = key->obj;
    Py_ssize_t start, stop, step, n = c->items.len;
    if (PySlice_Unpack(slice, &start, &stop, &step) < 0) return em_trace_raise_pending(T, "a bad slice");
    Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step), k = 0;
    char *gone = len ? calloc((size_t)n, 1) : NULL;
    if (len && !gone) return PyErr_NoMemory(), EM_ERR;
    for (Py_ssize_t i = 0; i < len; i++) gone[start + i * step] = 1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!gone || !gone[i]) c->items.data[k++] = c->items.data[i];
    c->items.len = (int32_t)k;
    c->mver++;
    free(gone);
    return EM_OK;
}

EmStatus em_stand_in_list_raise(EmTracer *T, Py_ssize_t n, PyObject *key, PyObject *v) {
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) PyList_SET_ITEM(l, i, Py_NewRef(Py_None));
    int r = !l ? -2 : v ? PyObject_SetItem(l, key, v) : PyObject_DelItem(l, key);
    Py_XDECREF(l);
    if (r == -2) return EM_ERR;
    if (r < 0) return em_trace_raise_pending(T, v ? "list item store" : "list item deletion");
    return em_trace_fail(T, EMA_VALUE, "list item %s by a %s", v ? "store" : "deletion", Py_TYPE(key)->tp_name);
}

EmStatus em_sym_delitem(EmTracer *T, EmSym *c, EmSym *key) {
    if (!(key = key_for(T, c, key))) return EM_ERR;
    if (key->kind == SYM_SLICE && c->kind != SYM_TENSOR && !(key = em_slice_pinned(T, key))) return EM_ERR;
    EmSym *r = NULL;
    EmStatus ist = em_frame_dict_items_rw(T, c, 1, &r);
    if (ist != CALL_NEXT) return ist == EM_OK ? em_sym_delitem(T, r, key) : ist;
    if (c->kind == SYM_DICT && key->kind == SYM_CONST) return em_dict_method(T, EM_CM_pop, "pop", c, &key, 1, &r);
    if (c->kind == SYM_VIEW) /* read-only, whatever the key */
        return em_trace_raise_msg(T, PyExc_TypeError, "'%s' object does not support item deletion",
                                  em_sym_known_type(c)->tp_name);
    if (c->kind != SYM_LIST || c->seq_type || key->kind != SYM_CONST)
        return em_trace_fail(T, EMA_VALUE, "del of an item of %s", em_sym_describe(c));
    if (PySlice_Check(key->obj)) {
        PyObject *step = ((PySliceObject *)key->obj)->step;
        if (step != Py_None && !(PyLong_CheckExact(step) && PyLong_AsLong(step) == 1))
            return del_extended_slice(T, c, key);
        EmSym *empty = em_sym_new(T, SYM_LIST);
        return empty ? em_sym_setitem(T, c, key, empty) : EM_ERR;
    }
    if (!PyIndex_Check(key->obj)) /* Python's TypeError, from a list of as many items */
        return em_stand_in_list_raise(T, c->items.len, key->obj, NULL);
    int overflow = 0;
    PyObject *ik = PyNumber_Index(key->obj); /* a bool, an int subclass: its int */
    long long i = ik ? PyLong_AsLongLongAndOverflow(ik, &overflow) : -1, n = c->items.len;
    Py_XDECREF(ik);
    if (i == -1 && PyErr_Occurred()) return EM_ERR;
    if (i < 0) i += n;
    if (overflow || i < 0 || i >= n) {
        PyObject *msg = PyUnicode_FromString("list assignment index out of range");
        EmStatus st = msg ? em_trace_raise_new(T, PyExc_IndexError, msg) : EM_ERR;
        Py_XDECREF(msg);
        return st;
    }
    PyObject *at = PyLong_FromLongLong(i);
    EmSym *idx = at ? em_sym_const(T, at) : NULL;
    Py_XDECREF(at);
    return idx ? em_list_method(T, EM_CM_pop, "pop", c, &idx, 1, &r) : EM_ERR;
}

EmStatus em_sym_store_check(EmTracer *T, EmSym *c, EmSym *key) {
    int own = em_sym_mutable(T, c);
    if (own < 0) return EM_ERR;
    if (!own) return em_trace_fail(T, EMA_SIDE_EFFECT, "item store into an input %s", em_sym_describe(c));
    if (key->kind != SYM_CONST &&
        !(c->kind == SYM_DICT && (em_set_item_kind(key) >= 1 || em_value_hashed(key)))) { /* a dict's: em_dict_key */
        EmStatus st = c->kind == SYM_DICT ? em_unhashable(T, key) : CALL_NEXT;
        return st != CALL_NEXT ? st : em_trace_fail(T, EMA_VALUE, "item store with key %s", em_sym_describe(key));
    }
    return EM_OK;
}

/* `k in s` of a set or frozenset s with a set k (a subclass's instance too): CPython looks up
 * frozenset(k) (set_contains), here when k's items are constants: *key replaced. EM_OK, EM_ABORT
 * or EM_ERR. */
static EmStatus set_key_frozen(EmTracer *T, EmSym *c, EmSym **key) {
    PyTypeObject *ct = em_sym_known_type(c), *kt = em_sym_known_type(*key);
    if (!ct || !kt || !PyType_IsSubtype(kt, &PySet_Type) ||
        !(PyType_IsSubtype(ct, &PySet_Type) || PyType_IsSubtype(ct, &PyFrozenSet_Type)))
        return EM_OK;
    EmSym *items = *key;
    EmStatus st = (*key)->kind == SYM_NEW ? em_slot_operand(T, *key, &items) : EM_OK;
    if (st != EM_OK || items->kind != SYM_CONST || !PyAnySet_Check(items->obj)) return st;
    PyObject *fz = PyFrozenSet_New(items->obj);
    EmSym *r = fz ? em_sym_const(T, fz) : NULL;
    Py_XDECREF(fz);
    return r ? ((*key = r), EM_OK) : EM_ERR;
}

EmStatus em_sym_contains(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    if (!(key = key_for(T, c, key))) return EM_ERR;
    EmStatus fst = set_key_frozen(T, c, &key);
    if (fst != EM_OK) return fst;
    const EmSymOps *o = ops_of(c);
    return o->contains ? o->contains(T, c, key, found) : no_op(T, "'in'", c);
}

EmStatus em_sym_truth(EmTracer *T, EmSym *s, int *out) {
    const EmSymOps *o = ops_of(s);
    return o->truth ? o->truth(T, s, out) : em_trace_fail(T, EMA_VALUE, "truth value of %s", em_sym_describe(s));
}

/* A constant tuple as a TUPLE sym of its items (to concatenate it with a tuple sym). */
static EmSym *tuple_sym(EmTracer *T, EmSym *c) {
    EmSym *s = em_sym_new(T, SYM_TUPLE);
    for (Py_ssize_t i = 0; s && i < PyTuple_GET_SIZE(c->obj); i++) {
        EmSym *it = em_sym_const(T, PyTuple_GET_ITEM(c->obj, i));
        if (!it || em_vec_push(&s->items, it)) s = NULL;
    }
    if (!s && !PyErr_Occurred()) PyErr_NoMemory();
    return s;
}

/* Which family of builtin types tp's == is: 1 set/frozenset, 2 dict, 3 list, 4 tuple (their
 * subclasses keeping the base's ==), 5 str, bytes, int, float, bool or None; 0 any other. */
static int eq_family(PyTypeObject *tp) {
    static PyTypeObject *const bases[] = {&PySet_Type, &PyFrozenSet_Type, &PyDict_Type, &PyList_Type, &PyTuple_Type};
    static const int family[] = {1, 1, 2, 3, 4};
    for (int i = 0; tp && i < 5; i++)
        if (PyType_IsSubtype(tp, bases[i])) return tp->tp_richcompare == bases[i]->tp_richcompare ? family[i] : 0;
    return tp == &PyUnicode_Type || tp == &PyBytes_Type || tp == &PyLong_Type || tp == &PyFloat_Type ||
                   tp == &PyBool_Type || tp == Py_TYPE(Py_None)
               ? 5
               : 0;
}

/* Whether a == b is False whatever their values: each one's == answers NotImplemented for the
 * other's type ([1] == (1,), a set and a dict), so Python compares identities, and objects of
 * different types are different objects. */
static int never_equal(EmSym *a, EmSym *b) {
    int fa = eq_family(em_sym_known_type(a)), fb = eq_family(em_sym_known_type(b));
    return fa && fb && fa != fb;
}

static int is_proxy(const EmSym *s) { return s->kind == SYM_VIEW && s->pos == 'm'; }

/* ==, != and | with a mappingproxy: its dict's (CPython's mappingproxy compares and ors its
 * mapping); `proxy |= x` raises. CALL_NEXT for other operators. */
static EmStatus proxy_binop(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out) {
    if (op == EMOP_IOR && is_proxy(a))
        return em_trace_raise_msg(T, PyExc_TypeError, "'|=' is not supported by mappingproxy; use '|' instead");
    if (op != EMOP_EQ && op != EMOP_NE && op != EMOP_OR && op != EMOP_IOR) return CALL_NEXT;
    EmSym *x = is_proxy(a) ? a->items.data[0] : a, *y = is_proxy(b) ? b->items.data[0] : b;
    return em_sym_binop(T, op, PyTuple_GET_ITEM(em_state.op_fns, op), x, y, out);
}

EmStatus em_sym_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    if (is_proxy(a) || is_proxy(b)) {
        EmStatus pst = proxy_binop(T, op, a, b, out);
        if (pst != CALL_NEXT) return pst;
    }
    if ((op == EMOP_ADD || op == EMOP_IADD) && a->kind != b->kind) { /* (-1,) + x.shape[1:] */
        if (a->kind == SYM_CONST && PyTuple_CheckExact(a->obj) && b->kind == SYM_TUPLE && !(a = tuple_sym(T, a)))
            return EM_ERR;
        if (b->kind == SYM_CONST && PyTuple_CheckExact(b->obj) && a->kind == SYM_TUPLE && !(b = tuple_sym(T, b)))
            return EM_ERR;
    }
    /* a symbolic int decides, on either side; so does a sequence times a constant (2 * [x]) */
    if (a->kind == SYM_VIEW || b->kind == SYM_VIEW) { /* keys/items views compare as sets */
        EmStatus vst = em_view_compare(T, op, a, b, out);
        if (vst != CALL_NEXT) return vst;
    }
    if ((op == EMOP_EQ || op == EMOP_NE) && never_equal(a, b))
        return (*out = em_sym_const(T, op == EMOP_NE ? Py_True : Py_False)) ? EM_OK : EM_ERR;
    if (em_sym_user_operand(a) || em_sym_user_operand(b)) return em_user_binop(T, op, a, b, out);
    if ((em_set_changed(a) || em_set_changed(b)) && !(op >= EMOP_LT && op <= EMOP_GE) &&
        !(op >= EMOP_IADD && op <= EMOP_IRSHIFT && em_set_of_frame(a))) /* a new set in its copy's order */
        return em_trace_fail(T, EMA_VALUE, "%s of a set of the frame the trace changed", em_op_info[op].name);
    int right = (b->kind == SYM_INT && a->kind != SYM_ITEM) || b->kind == SYM_ITEM ||
                (a->kind == SYM_CONST && (b->kind == SYM_TUPLE || b->kind == SYM_LIST || b->kind == SYM_FLOAT));
    const EmSymOps *o = ops_of(right ? b : a);
    if (o->binop) return o->binop(T, op, fn, a, b, out);
    if (op >= EMOP_IADD && op <= EMOP_IRSHIFT && em_set_of_frame(a)) { /* s |= t: the method, replayed */
        const char *m = op == EMOP_IOR    ? "update"
                        : op == EMOP_IAND ? "intersection_update"
                        : op == EMOP_ISUB ? "difference_update"
                        : op == EMOP_IXOR ? "symmetric_difference_update"
                                          : NULL;
        if (!m || b->kind != SYM_CONST || !PyAnySet_Check(b->obj))
            return em_trace_fail(T, EMA_SIDE_EFFECT, "in-place operator on a set read from the frame");
        PyObject *name = PyUnicode_FromString(m), *f = name ? _PyType_Lookup(&PySet_Type, name) : NULL;
        Py_XDECREF(name);
        EmSym *r = NULL;
        EmStatus st = f ? em_set_method(T, f, a, &b, 1, &r) : EM_ERR;
        return st == EM_OK ? ((*out = a), EM_OK) : st;
    }
    EmSym *args[2] = {a, b};
    return em_sym_eval(T, fn, args, 2, out);
}

EmStatus em_sym_unop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out) {
    const EmSymOps *o = ops_of(a);
    if (em_sym_user_operand(a)) return em_user_unop(T, op, a, out);
    return o->unary ? o->unary(T, op, fn, a, out) : em_sym_eval(T, fn, &a, 1, out);
}

EmStatus em_seq_items(EmTracer *T, EmSym *s, EmSym **out) {
    if (em_set_changed(s)) /* the trace's copy may iterate in another order than the caller's set */
        return em_trace_fail(T, EMA_VALUE, "iteration over a set of the frame the trace changed");
    const EmSymOps *o = ops_of(s);
    return o->items ? o->items(T, s, out) : no_op(T, "iteration", s);
}

EmStatus em_iter_of(EmTracer *T, EmSym *s, EmSym **out) {
    const EmSymOps *o = ops_of(s);
    if (o->iter) return o->iter(T, s, out);
    return o->items ? em_iter_over(T, s, 0, out) : no_op(T, "iteration", s);
}

EmStatus em_iter_next(EmTracer *T, EmSym *it, EmSym **out) {
    const EmSymOps *o = ops_of(it);
    return o->next ? o->next(T, it, out) : no_op(T, "next()", it);
}

EM_NEW PyObject *em_iter_type(EmTracer *T, EmSym *src, int rev) {
    const EmSymOps *o = ops_of(src);
    return o->iter_type ? o->iter_type(T, src, rev) : NULL;
}

/* Methods of list, tuple and dict the trace models, by name (em_cont_methods.def). */
static EmContMethod cont_method(const char *n) {
    static const char *const names[] = {
#define X(name) #name,
#include "em_cont_methods.def"
#undef X
    };
    for (int m = 0; m < EM_CM__COUNT; m++)
        if (!strcmp(n, names[m])) return (EmContMethod)m;
    return !strcmp(n, "__copy__") ? EM_CM_copy : EM_CM__COUNT; /* a defaultdict's or deque's copy() */
}

EmStatus em_container_method(EmTracer *T, PyObject *fn, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(fn));
    if (!n) return EM_ERR;
    *out = NULL;
    const EmSymOps *o = ops_of(self);
    if (!o->method) return em_trace_fail(T, EMA_CALL, "%s.%s", em_sym_describe(self), n);
    /* arguments the method cannot take whatever their values: Python's TypeError */
    PyObject *msg = PyObject_CallMethod(em_state.meta_run, "arity_error", "OnO", fn, (Py_ssize_t)nargs, Py_None);
    if (!msg) return EM_ERR;
    if (msg != Py_None) {
        EmStatus st = em_trace_raise_new(T, PyExc_TypeError, msg);
        Py_DECREF(msg);
        return st;
    }
    Py_DECREF(msg);
    if ((self->kind == SYM_LIST || self->kind == SYM_TUPLE || self->kind == SYM_SET) && !strncmp(n, "__", 2)) {
        /* l.__getitem__(i) (a method of list, not a slot wrapper): the operation */
        int inplace;
        EmStatus st = em_slot_call(T, n, self, args, nargs, out, &inplace);
        if (st != CALL_NEXT) return st;
    }
    if (o->method) return o->method(T, cont_method(n), n, self, args, nargs, out);
    return em_trace_fail(T, EMA_CALL, "%s.%s", em_sym_describe(self), n);
}

/* The answer `same` of an `is` between syms a and b holds for later calls only while their
 * slots stay the same / distinct objects: guarded, unless a guard already pins each one's
 * identity or either was made while tracing (no input can be it). EM_OK or EM_ERR. */
static EmStatus guard_identity(EmTracer *T, const EmSym *a, const EmSym *b, int same) {
    if (a == b || a->src < 0 || b->src < 0 || a->src == b->src) return EM_OK;
    if ((a->kind == SYM_OBJ && a->by_id == 1) && (b->kind == SYM_OBJ && b->by_id == 1)) return EM_OK;
    return em_guard_check(T->P, same ? EMG_SAME : EMG_DISTINCT, a->src, NULL, b->src) ? EM_ERR : EM_OK;
}

/* Whether s is a list, dict or set the trace made (a new object: one sym stands for it), not
 * a read-only stand-in for a mapping proxy nor the trace's copy of an instance dict. */
static int made_container(const EmTracer *T, const EmSym *s) {
    if ((s->kind != SYM_LIST && s->kind != SYM_DICT && s->kind != SYM_SET) || s->src >= 0) return 0;
    return s->seq_type != (PyObject *)&PyDictProxy_Type && !em_sym_idict_copy(T, s);
}

EmStatus em_sym_is(EmTracer *T, EmSym *a, EmSym *b, int *same) {
    EmIdent ia = ops_of(a)->ident, ib = ops_of(b)->ident;
    int by_obj = (ia == EM_IDENT_OBJ || ia == EM_IDENT_CONST) && (ib == EM_IDENT_OBJ || ib == EM_IDENT_CONST);
    if (a == b || by_obj) {
        *same = a == b || a->obj == b->obj;
        return guard_identity(T, a, b, *same);
    }
    if (ia == EM_IDENT_CONST || ib == EM_IDENT_CONST || ia == EM_IDENT_FRESH || ib == EM_IDENT_FRESH) {
        *same = 0;
        return guard_identity(T, a, b, 0);
    }
    PyTypeObject *ta = em_sym_known_type(a), *tb = em_sym_known_type(b);
    if ((ta && tb && ta != tb) || made_container(T, a) || made_container(T, b)) {
        /* objects of different types are different objects, as is a container made while tracing
         * from any object another sym stands for */
        *same = 0;
        return EM_OK;
    }
    return em_trace_fail(T, EMA_VALUE, "'is' between %s and %s", em_sym_describe(a), em_sym_describe(b));
}

int em_sym_is_obj(const EmSym *s, PyObject *v) {
    EmIdent i = ops_of(s)->ident;
    return (i == EM_IDENT_OBJ || i == EM_IDENT_CONST) && s->obj == v;
}

EmStatus em_sym_type_method(EmTracer *T, PyTypeObject *tp, EmSym *base, PyObject *name, int method, EmSym **out,
                            EmSym **self) {
    /* list.append etc.: the unbound method of the builtin type, self = the sym */
    PyObject *fn = _PyType_Lookup(tp, name);
    if (fn && (Py_IS_TYPE(fn, &PyMethodDescr_Type) || Py_IS_TYPE(fn, &PyWrapperDescr_Type)))
        return em_sym_method(T, fn, base, method, out, self); /* d.__or__: the slot's operation on base */
    if (!fn && (!tp->tp_dictoffset || made_container(T, base)) && tp->tp_getattro == PyObject_GenericGetAttr)
        /* nowhere else to find it: no instance dict, or the empty one of an OrderedDict made here */
        return em_trace_raise_msg(T, PyExc_AttributeError, "'%s' object has no attribute '%U'", tp->tp_name, name);
    return em_trace_fail(T, EMA_ATTR, "%s of %s", PyUnicode_AsUTF8(name), em_sym_describe(base));
}

/* ---- known values ---- */

static int has_tensor_at(EmSym *s, int depth, long *left) {
    if (depth > EM_MAX_NEST || --*left < 0) return 1;
    if (s->kind == SYM_TENSOR || s->kind == SYM_NDARRAY) return 1;
    if (s->kind == SYM_TUPLE || s->kind == SYM_LIST)
        for (int32_t i = 0; i < s->items.len; i++)
            if (has_tensor_at(s->items.data[i], depth + 1, left)) return 1;
    return 0;
}

int em_sym_has_tensor(EmSym *s) {
    long left = EM_MAX_WALK;
    return has_tensor_at(s, 0, &left);
}

/* 1 when s is, or holds in tuples and lists, an object read from the frame and guarded by its
 * type only whose type compares or hashes by its own code: comparing it reads state that no guard
 * covers (an object comparing by identity does not). Deeper than EM_MAX_NEST counts as one. */
static int compares_by_state_at(EmSym *s, int depth, long *left) {
    if (depth > EM_MAX_NEST || --*left < 0) return 1;
    if (em_sym_type_guarded(s)) {
        PyTypeObject *tp = Py_TYPE(s->obj);
        return tp->tp_richcompare != PyBaseObject_Type.tp_richcompare || tp->tp_hash != PyBaseObject_Type.tp_hash;
    }
    if (s->kind == SYM_TUPLE || s->kind == SYM_LIST)
        for (int32_t i = 0; i < s->items.len; i++)
            if (compares_by_state_at(s->items.data[i], depth + 1, left)) return 1;
    return 0;
}

static int compares_by_state(EmSym *s) {
    long left = EM_MAX_WALK;
    return compares_by_state_at(s, 0, &left);
}

/* A constant (or a list sym of constants) for r, the result of an operator on known values. */
static EmSym *known_result(EmTracer *T, PyObject *r) {
    if (!PyList_CheckExact(r)) return em_sym_const(T, r);
    EmSym *s = em_sym_new(T, SYM_LIST);
    for (Py_ssize_t i = 0; s && i < PyList_GET_SIZE(r); i++) {
        EmSym *it = em_sym_const(T, PyList_GET_ITEM(r, i));
        if (!it || em_vec_push(&s->items, it)) s = NULL;
    }
    return s;
}

EmStatus em_sym_eval(EmTracer *T, PyObject *fn, EmSym **args, int n, EmSym **out) {
    PyObject *vals[3] = {NULL, NULL, NULL};
    EmStatus st = EM_OK;
    for (int i = 0; i < n; i++)
        if (em_sym_type_guarded(args[i])) {
            /* guarded by its type only: what the operator reads of it is not guarded */
            st = em_trace_fail(T, EMA_VALUE, "operator on a %s read from the frame", Py_TYPE(args[i]->obj)->tp_name);
            goto done;
        } else if (compares_by_state(args[i])) {
            st = em_trace_fail(T, EMA_VALUE, "operator on a %s holding an object read from the frame",
                               em_sym_describe(args[i]));
            goto done;
        } else if (!(vals[i] = em_sym_value(T, args[i]))) {
            st = PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "operator on %s", em_sym_describe(args[i]));
            goto done;
        }
    PyObject *r = PyObject_Vectorcall(fn, vals, (size_t)n, NULL);
    if (!r) { /* the same values raise the same exception at run time */
        st = em_trace_raise_pending(T, "operator raised on constants");
        goto done;
    }
    *out = known_result(T, r);
    Py_DECREF(r);
    if (!*out) st = EM_ERR;
done:
    for (int i = 0; i < n; i++) Py_XDECREF(vals[i]);
    return st;
}

EmStatus em_sym_getitem_known(EmTracer *T, EmSym *c, EmSym *key, EmSym **out) {
    EmSym *args[2] = {c, key};
    return em_sym_eval(T, em_op_fn(EMOP_SUBSCR), args, 2, out);
}

/* An instance made while tracing of a tuple or frozenset subclass that hashes and compares as
 * its base: its contents, which every lookup finds as it finds the instance; else key. */
static EmStatus plain_content_key(EmTracer *T, EmSym *key, EmSym **out) {
    *out = key;
    if (key->kind != SYM_NEW || !em_value_hashed(key)) return EM_OK;
    PyTypeObject *tp = Py_TYPE(key->obj), *base = PyType_IsSubtype(tp, &PyTuple_Type)       ? &PyTuple_Type
                                                  : PyType_IsSubtype(tp, &PyFrozenSet_Type) ? &PyFrozenSet_Type
                                                                                            : NULL;
    if (!base || tp->tp_richcompare != base->tp_richcompare || tp->tp_hash != base->tp_hash) return EM_OK;
    return em_slot_operand(T, key, out);
}

EmStatus em_sym_contains_known(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    EmStatus kst = plain_content_key(T, key, &key);
    if (kst != EM_OK) return kst;
    /* a tensor, or an object made while tracing hashed by identity, is no key of a set or dict
     * of constants (one of the frame's may hold its functions: they are its constants) */
    if (key->kind != SYM_OBJ && em_set_item_kind(key) == 1 &&
        ((c->kind == SYM_CONST && PyAnySet_Check(c->obj)) || c->kind == SYM_DICT)) {
        *found = 0;
        return EM_OK;
    }
    int hashed = c->kind == SYM_DICT || (c->kind == SYM_CONST && (PyAnySet_Check(c->obj) || PyDict_Check(c->obj)));
    EmStatus ust = hashed && key->kind != SYM_CONST ? em_unhashable(T, key) : CALL_NEXT; /* [] in d: TypeError */
    if (ust != CALL_NEXT) return ust;
    EmIdent ik = ops_of(key)->ident;
    if (ik != EM_IDENT_OBJ && ik != EM_IDENT_CONST)
        return em_trace_fail(T, EMA_VALUE, "'in' with %s", em_sym_describe(key));
    if (compares_by_state(key) || compares_by_state(c)) /* its __eq__ or __hash__ would read its state */
        return em_trace_fail(T, EMA_VALUE, "'in' comparing an object read from the frame");
    PyObject *cv = em_sym_value(T, c);
    if (!cv) return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "'in' on %s", em_sym_describe(c));
    *found = PySequence_Contains(cv, key->obj);
    Py_DECREF(cv);
    if (*found < 0) {
        PyErr_Clear(); /* whatever it raised, Python raises again when the trace gives up */
        return em_trace_fail(T, EMA_VALUE, "'in' raised");
    }
    /* an object guarded by its type compares by identity: the answer holds while each such
     * comparison would give the same */
    int seq = c->kind == SYM_TUPLE || c->kind == SYM_LIST;
    for (int32_t i = 0; seq && i < c->items.len; i++) {
        EmSym *it = c->items.data[i];
        if (!em_sym_type_guarded(key) && !em_sym_type_guarded(it)) continue;
        EmStatus st = guard_identity(T, key, it, key->obj == it->obj);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* ---- constants ---- */

static EmStatus const_truth(EmTracer *T, EmSym *s, int *out) {
    int r = PyObject_IsTrue(s->obj);
    if (r < 0) return EM_ERR;
    *out = r;
    return EM_OK;
}

static EmStatus const_items(EmTracer *T, EmSym *s, EmSym **out) {
    if (em_is_pure(s->obj) && !Py_TYPE(s->obj)->tp_iter && !PySequence_Check(s->obj)) {
        PyObject *it = PyObject_GetIter(s->obj); /* a number, None: Python's TypeError, raised here */
        if (!it) return em_trace_raise_pending(T, "iteration over a non-iterable");
        Py_DECREF(it);
    }
    PyObject *seq = PySequence_Fast(s->obj, "");
    if (!seq) {
        PyErr_Clear(); /* not iterable, or iterating it raised: Python raises it again when the trace gives up */
        return em_trace_fail(T, EMA_VALUE, "iteration over %s", Py_TYPE(s->obj)->tp_name);
    }
    EmSym *r = em_sym_new(T, SYM_TUPLE);
    for (Py_ssize_t i = 0; r && i < PySequence_Fast_GET_SIZE(seq); i++) {
        EmSym *it = em_sym_const(T, PySequence_Fast_GET_ITEM(seq, i));
        if (!it || em_vec_push(&r->items, it)) r = NULL;
    }
    Py_DECREF(seq);
    *out = r;
    return r ? EM_OK : EM_ERR;
}

static EM_NEW PyObject *const_iter_type(EmTracer *T, EmSym *s, int rev) {
    return em_iter_type_of(Py_NewRef(s->obj), rev);
}

const EmSymOps em_const_ops = {
    .ident = EM_IDENT_CONST,
    .getattr = em_sym_const_attr,
    .getitem = em_sym_getitem_known,
    .contains = em_sym_contains_known,
    .truth = const_truth,
    .items = const_items,
    .iter_type = const_iter_type,
    .call = em_call_by_value,
};

/* ---- tensors: their operations are graph ops ---- */

/* c[key] for a tensor c, or for a key that holds a tensor (whatever c is). */
static EmStatus tensor_getitem(EmTracer *T, EmSym *c, EmSym *key, EmSym **out) {
    EmSym *args[2] = {c, key};
    return em_op_record(T, EMOP_SUBSCR, NULL, args, 2, NULL, em_op_fn(EMOP_SUBSCR), out);
}

static EmStatus tensor_setitem(EmTracer *T, EmSym *c, EmSym *key, EmSym *v) {
    EmSym *args[3] = {c, key, v}, *out = NULL;
    return em_op_record(T, EMOP_SETITEM, NULL, args, 3, NULL, em_op_fn(EMOP_SETITEM), &out);
}

static EmStatus tensor_truth(EmTracer *T, EmSym *s, int *out) {
    PyObject *known = em_fold_known(T, s); /* a value the trace knows (em_fold.c) */
    int b = known ? PyObject_IsTrue(known) : -1;
    if (b >= 0) return (*out = b), EM_OK;
    if (known) PyErr_Clear(); /* bool() of several values raises: so does Python, which runs it */
    return em_trace_fail(T, EMA_TENSOR_BRANCH, "bool() of a tensor");
}

/* Iterating a tensor of known (guarded) shape is x.unbind(0). */
static EmStatus tensor_items(EmTracer *T, EmSym *s, EmSym **out) {
    PyObject *m = em_sym_meta(T, s); /* made now for a tensor whose metadata C inferred */
    if (!m) return EM_ERR;
    if (!PyObject_TypeCheck(m, em_state.tensor_type))
        return em_trace_fail(T, EMA_DATA_DEP, "iteration over %s", em_sym_describe(s));
    PyObject *dim = PyObject_CallMethod(m, "dim", NULL);
    long nd = dim ? PyLong_AsLong(dim) : -1;
    Py_XDECREF(dim);
    if (nd < 0) return EM_ERR;
    if (nd == 0) {
        PyObject *msg = PyUnicode_FromString("iteration over a 0-d tensor");
        EmStatus st = msg ? em_trace_raise_new(T, PyExc_TypeError, msg) : EM_ERR;
        Py_XDECREF(msg);
        return st;
    }
    PyObject *unbind = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "unbind");
    if (!unbind) return EM_ERR;
    EmSym *r = NULL;
    EmStatus st = em_op_record(T, EMOP_CALL, unbind, &s, 1, NULL, NULL, &r);
    Py_DECREF(unbind);
    if (st != EM_OK) return st;
    if (r->kind != SYM_TUPLE && r->kind != SYM_LIST) return em_trace_fail(T, EMA_VALUE, "unbind result");
    *out = r;
    return EM_OK;
}

static EM_NEW PyObject *tensor_iter_type(EmTracer *T, EmSym *s, int rev) {
    return rev ? NULL : Py_NewRef((PyObject *)&PyTupleIter_Type); /* iter(t.unbind(0)) */
}

const EmSymOps em_tensor_ops = {
    .ident = EM_IDENT_FRESH,
    .getattr = em_sym_tensor_attr,
    .getitem = tensor_getitem,
    .setitem = tensor_setitem,
    .truth = tensor_truth,
    .items = tensor_items,
    .iter_type = tensor_iter_type,
};
