/* em_sym_dict.c: the operations of dict syms (constant keys, items in parallel vectors), of
 * their live views (d.keys(), d.values(), d.items()), and subscripts of dicts read from the
 * frame without being wrapped whole (OBJ syms, guarded per key). Rows of em_sym_ops[].
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* ---- dict syms ---- */

/* Methods of its type (OrderedDict's, defaultdict's, dict's); a defaultdict's default_factory. */
static EmStatus dict_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    PyTypeObject *tp = base->seq_type ? (PyTypeObject *)base->seq_type : &PyDict_Type;
    if (base->seq_type && !PyUnicode_CompareWithASCIIString(name, "default_factory") && _PyType_Lookup(tp, name)) {
        *self = NULL;
        *out = base->of.len ? base->of.data[0] : em_sym_const(T, Py_None);
        return *out ? EM_OK : EM_ERR;
    }
    return em_sym_type_method(T, tp, base, name, method, out, self);
}

static EmStatus dict_getitem(EmTracer *T, EmSym *d, EmSym *k, EmSym **out) {
    PyObject *key;
    EmStatus st;
    int absent = em_dict_key(T, d, k, 0, &key, &st);
    if (absent < 0) return st;
    int i = absent ? -1 : em_dict_find(d, key);
    if (i == -2) return EM_ERR;
    if (i < 0) {
        if (absent && d->of.len && em_dict_key(T, d, k, 1, &key, &st) < 0) return st; /* a defaultdict's new key */
        st = em_dict_missing(T, d, key, out);
        if (st != CALL_NEXT) return st;
        return k->kind == SYM_CONST ? em_trace_raise_new(T, PyExc_KeyError, k->obj)
                                    : em_trace_fail(T, EMA_VALUE, "index by a missing %s key", em_sym_describe(k));
    }
    *out = d->items.data[i];
    return EM_OK;
}

static EmStatus dict_setitem(EmTracer *T, EmSym *d, EmSym *key, EmSym *v) {
    EmStatus st = em_sym_store_check(T, d, key);
    PyObject *k;
    if (st == EM_OK && em_dict_key(T, d, key, 1, &k, &st) < 0) return st;
    return st == EM_OK ? em_dict_set(d, k, v) : st;
}

static EmStatus dict_contains(EmTracer *T, EmSym *d, EmSym *key, int *found) {
    if (key->kind != SYM_CONST && em_set_item_kind(key) < 1 && !em_value_hashed(key))
        return em_sym_contains_known(T, d, key, found);
    PyObject *k;
    EmStatus st;
    int absent = em_dict_key(T, d, key, 0, &k, &st);
    if (absent < 0) return st;
    int i = absent ? -1 : em_dict_find(d, k);
    if (i == -2) return EM_ERR;
    *found = i >= 0;
    return EM_OK;
}

static EmStatus dict_truth(EmTracer *T, EmSym *s, int *out) {
    *out = s->items.len > 0;
    return EM_OK;
}

/* Its keys. */
static EmStatus dict_items(EmTracer *T, EmSym *s, EmSym **out) {
    if (s->diverged) return em_dict_diverged(T, "iteration over");
    EmSym *r = em_sym_new(T, SYM_TUPLE);
    for (int32_t i = 0; r && i < s->keys.len; i++) {
        EmSym *it = em_dict_key_sym(T, s->keys.data[i]);
        if (!it || em_vec_push(&r->items, it)) r = NULL;
    }
    *out = r;
    return r ? EM_OK : EM_ERR;
}

/* iter(d): over its keys, reading the values stored meanwhile (em_iter_use). */
static EmStatus dict_iter(EmTracer *T, EmSym *s, EmSym **out) {
    return s->diverged ? em_dict_diverged(T, "iteration over") : em_iter_over(T, s, 'k', out);
}

static EM_NEW PyObject *dict_iter_type(EmTracer *T, EmSym *s, int rev) { /* an OrderedDict's are its own */
    int own_type = s->seq_type && s->seq_type != (PyObject *)&PyDictProxy_Type; /* a class __dict__'s: dict's */
    return em_iter_type_of(own_type ? PyObject_CallNoArgs(s->seq_type) : PyDict_New(), rev);
}

/* d | e (a new dict of d's type: copy, then update) and d |= e (d itself updated, as
 * dict.__ior__ does); e a dict. == and != on known values (a dict holding a tensor would
 * compare tensors: the trace gives up). Other operators are not a dict's. */
/* The value of dict sym d whose values are constants (an OrderedDict's its type, which compares
 * in order), or of a constant; NULL without an error otherwise (tensors, objects whose __eq__
 * the comparison would run). */
static EM_NEW PyObject *dict_value(EmSym *d) {
    if (d->kind == SYM_CONST) return Py_NewRef(d->obj);
    if (d->kind != SYM_DICT) return NULL;
    PyObject *r = d->seq_type == EM_KNOWN(OrderedDict) ? PyObject_CallNoArgs(d->seq_type) : PyDict_New();
    for (int32_t i = 0; r && i < d->items.len; i++)
        if (d->items.data[i]->kind != SYM_CONST || em_key_token_sym(d->keys.data[i]) ||
            PyObject_SetItem(r, d->keys.data[i], d->items.data[i]->obj))
            Py_CLEAR(r);
    return r;
}

/* dict a == dict b as CPython compares them: lengths, then a's items in order, each key looked
 * up in b (em_dict_key: a key hashed by its own __hash__ compared by its traced ==) and the
 * values compared `is`, then == (a user __eq__ traced; tensors' values leave it undecided); two
 * OrderedDicts equal as dicts then compare their keys' order (keys that are no tokens). */
static EmStatus dict_equal(EmTracer *T, EmSym *a, EmSym *b, int *eq) {
    if (a->kind != SYM_DICT || b->kind != SYM_DICT) return CALL_NEXT;
    *eq = a->keys.len == b->keys.len;
    for (int32_t i = 0; *eq && i < a->keys.len; i++) {
        EmSym *ks = em_dict_key_sym(T, a->keys.data[i]);
        PyObject *bk = NULL;
        EmStatus st = EM_OK;
        int r = ks ? em_dict_key(T, b, ks, 0, &bk, &st) : (st = EM_ERR, -1);
        if (r < 0) return st;
        int32_t j = r == 0 ? em_dict_find(b, bk) : -1;
        if (j == -2) return PyErr_Clear(), CALL_NEXT;
        if (j < 0) return (*eq = 0), EM_OK;
        EmSym *x = a->items.data[i], *y = b->items.data[j];
        if (x == y) continue;
        st = em_sym_items_eq(T, x, y, 0, eq);
        if (st == CALL_NEXT) st = em_sym_eq_truth(T, x, y, eq); /* the stored value's __eq__ first */
        if (st != EM_OK) return st;
    }
    int od = a->seq_type == EM_KNOWN(OrderedDict) && b->seq_type == EM_KNOWN(OrderedDict);
    if (*eq && od && (em_dict_has_tokens(a) || em_dict_has_tokens(b))) return CALL_NEXT;
    for (int32_t i = 0; *eq && od && i < a->keys.len; i++) {
        int r = PyObject_RichCompareBool(a->keys.data[i], b->keys.data[i], Py_EQ);
        if (r < 0) return PyErr_Clear(), CALL_NEXT;
        *eq = r;
    }
    return EM_OK;
}

/* What a dict sym's type is to `|`: 0 dict (a subclass too, whose __or__ is dict's: its result
 * is a dict), 1 OrderedDict, 2 defaultdict; -1 anything else (a mapping proxy, their subclasses,
 * no dict sym). */
static int or_kind(const EmSym *s) {
    if (s->kind != SYM_DICT) return -1;
    if (!s->seq_type) return 0;
    if (s->seq_type == (PyObject *)&PyODict_Type) return 1;
    return strcmp(((PyTypeObject *)s->seq_type)->tp_name, "collections.defaultdict") ? -1 : 2;
}

static EmStatus dict_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    PyTypeObject *tb = em_sym_known_type(b), *ta = em_sym_known_type(a);
    int both_ordered = ta && tb && PyType_IsSubtype(ta, &PyODict_Type) && PyType_IsSubtype(tb, &PyODict_Type);
    if ((a->kind == SYM_DICT && a->diverged) || (b->kind == SYM_DICT && b->diverged)) /* == with a dict: its storage */
        if (!(op == EMOP_EQ || op == EMOP_NE) || both_ordered) return em_dict_diverged(T, "an operator on");
    if ((op == EMOP_EQ || op == EMOP_NE) && tb && !PyType_IsSubtype(tb, &PyDict_Type))
        return (*out = em_sym_const(T, op == EMOP_NE ? Py_True : Py_False)) ? EM_OK : EM_ERR; /* never equal */
    int eq = 0;
    EmStatus est = op == EMOP_EQ || op == EMOP_NE ? dict_equal(T, a, b, &eq) : CALL_NEXT;
    if (est != EM_OK && est != CALL_NEXT) return est;
    if (est == EM_OK) return (*out = em_sym_const(T, eq == (op == EMOP_EQ) ? Py_True : Py_False)) ? EM_OK : EM_ERR;
    if (op == EMOP_EQ || op == EMOP_NE) { /* on known values: a tensor value is not one */
        PyObject *va = dict_value(a), *vb = va ? dict_value(b) : NULL;
        PyObject *r = vb ? PyObject_RichCompare(va, vb, op == EMOP_EQ ? Py_EQ : Py_NE) : NULL;
        Py_XDECREF(va);
        Py_XDECREF(vb);
        if (!r && !PyErr_Occurred())
            return em_trace_fail(T, EMA_VALUE, "%s of %s and %s", em_op_info[op].name, em_sym_describe(a),
                                 em_sym_describe(b));
        *out = r ? em_sym_const(T, r) : NULL;
        Py_XDECREF(r);
        return *out ? EM_OK : EM_ERR;
    }
    (void)fn;
    if (op == EMOP_OR && a->kind == SYM_DICT && tb && !PyType_IsSubtype(tb, &PyDict_Type)) {
        /* dict's | takes dicts only (b is no user object: em_sym_binop asked it first) */
        return em_trace_raise_msg(T, PyExc_TypeError, "unsupported operand type(s) for |: '%s' and '%s'",
                                  em_sym_known_type(a)->tp_name, tb->tp_name);
    }
    if (op == EMOP_IOR && a->kind == SYM_DICT && a->seq_type != (PyObject *)&PyDictProxy_Type) {
        EmSym *r = NULL; /* |= updates from any mapping or pairs, in place */
        EmStatus st = em_dict_method(T, EM_CM_update, "update", a, &b, 1, &r);
        if (st == EM_OK) *out = a;
        return st;
    }
    int ka = or_kind(a), kb = or_kind(b);
    if (op != EMOP_OR || ka < 0 || kb < 0)
        return em_trace_fail(T, EMA_VALUE, "operator %s on %s and %s", em_op_info[op].name, em_sym_describe(a),
                             em_sym_describe(b));
    /* a | b: a copy of a of the type whose __or__ answers (b's, an OrderedDict or defaultdict,
     * when a is a plain dict: it is a subclass overriding the slot), with that operand's
     * default factory; then updated from b (dict_or, odict_or, defdict_or) */
    EmSym *by = ka == 0 && kb > 0 ? b : a, *d = NULL, *r = NULL;
    EmStatus st = by->seq_type ? em_make_dict_of(T, by->seq_type, by->of.len ? by->of.data[0] : NULL, a, NULL, NULL, &d)
                               : em_make_dict(T, a, NULL, NULL, &d);
    if (st == EM_OK) st = em_dict_method(T, EM_CM_update, "update", d, &b, 1, &r);
    if (st == EM_OK) *out = d;
    return st;
}

const EmSymOps em_dict_ops = {
    .binop = dict_binop,
    .getattr = dict_attr,
    .getitem = dict_getitem,
    .setitem = dict_setitem,
    .contains = dict_contains,
    .truth = dict_truth,
    .items = dict_items,
    .iter = dict_iter,
    .iter_type = dict_iter_type,
    .method = em_dict_method,
};

/* ---- views of dict syms: what the dict (items[0]) holds when they are used ---- */

static EmStatus view_items(EmTracer *T, EmSym *s, EmSym **out) {
    *out = em_view_items(T, s);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus view_iter(EmTracer *T, EmSym *s, EmSym **out) { return em_iter_over(T, s, em_view_what(s), out); }

/* iter(d.keys()) and the like: a view of an empty dict stands in */
static EM_NEW PyObject *view_iter_type(EmTracer *T, EmSym *s, int rev) {
    PyObject *d = PyDict_New();
    PyObject *sample = d ? em_view_of(s, d) : NULL;
    Py_XDECREF(d);
    return em_iter_type_of(sample, rev);
}

EmStatus em_mappingproxy_of(EmTracer *T, EmSym *d, EmSym **out) {
    /* a class's __dict__ (a snapshot) and instance dict copies are not the dict itself */
    if (d->kind != SYM_DICT || d->seq_type == (PyObject *)&PyDictProxy_Type || em_sym_idict_copy(T, d))
        return CALL_NEXT;
    EmSym *v = em_sym_new(T, SYM_VIEW);
    if (!v || em_vec_push(&v->items, d)) return v ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    v->pos = 'm';
    *out = v;
    return EM_OK;
}

/* view.__contains__, view.__iter__...: the view type's slot wrappers and methods, self = the view.
 * A mappingproxy's reads (mappingproxy's own methods, which call its dict's) are its dict's;
 * a keys/values/items view's .mapping is a mappingproxy of its dict. */
static EmStatus view_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    static const char *const reads[] = {"keys",         "values",  "items",    "get",          "copy", "__getitem__",
                                        "__contains__", "__len__", "__iter__", "__reversed__", NULL};
    if (base->pos != 'm' && PyUnicode_CompareWithASCIIString(name, "mapping") == 0) {
        EmStatus st = em_mappingproxy_of(T, base->items.data[0], out);
        if (st == EM_OK) *self = NULL;
        return st == CALL_NEXT
                   ? em_trace_fail(T, EMA_VALUE, "mapping of a view of %s", em_sym_describe(base->items.data[0]))
                   : st;
    }
    for (int i = 0; base->pos == 'm' && reads[i]; i++)
        if (PyUnicode_CompareWithASCIIString(name, reads[i]) == 0)
            return em_sym_getattr(T, base->items.data[0], name, method, out, self);
    return em_sym_type_method(T, em_sym_known_type(base), base, name, method, out, self);
}

static EmStatus view_getitem(EmTracer *T, EmSym *v, EmSym *key, EmSym **out) {
    return v->pos == 'm' ? em_sym_getitem(T, v->items.data[0], key, out) : em_sym_getitem_known(T, v, key, out);
}

static EmStatus view_contains(EmTracer *T, EmSym *v, EmSym *key, int *found) {
    return v->pos == 'm' ? em_sym_contains(T, v->items.data[0], key, found) : em_sym_contains_known(T, v, key, found);
}

static EmStatus view_truth(EmTracer *T, EmSym *v, int *out) {
    if (v->pos != 'm') return em_trace_fail(T, EMA_VALUE, "truth value of %s", em_sym_describe(v));
    return em_sym_truth(T, v->items.data[0], out);
}

/* x in view b as dictview's contains: a keys view looks the key up in its dict (em_dict_key), an
 * items view the pair's key, then compares the value found == the pair's (traced); a set, a
 * set's membership. */
static EmStatus view_has(EmTracer *T, EmSym *b, EmSym *x, int *found) {
    if (b->kind != SYM_VIEW) return em_sym_contains(T, b, x, found);
    EmSym *d = b->items.data[0], *key = x, *val = NULL;
    if (b->pos == 'i') {
        EmSym *pair = x->kind == SYM_CONST && PyTuple_CheckExact(x->obj) ? NULL : x;
        if (!pair && PyTuple_GET_SIZE(x->obj) == 2) {
            key = em_sym_const(T, PyTuple_GET_ITEM(x->obj, 0));
            val = em_sym_const(T, PyTuple_GET_ITEM(x->obj, 1));
            if (!key || !val) return EM_ERR;
        } else if (pair && pair->kind == SYM_TUPLE && !pair->seq_type && pair->items.len == 2) {
            key = pair->items.data[0];
            val = pair->items.data[1];
        } else {
            return (*found = 0), EM_OK; /* not a (key, value) pair */
        }
    }
    PyObject *k = NULL;
    EmStatus st = EM_OK;
    int r = em_dict_key(T, d, key, 0, &k, &st);
    if (r < 0) return st;
    int32_t j = r == 0 ? em_dict_find(d, k) : -1;
    if (j == -2) return EM_ERR;
    *found = j >= 0;
    if (!*found || !val || d->items.data[j] == val) return EM_OK;
    return em_sym_eq_truth(T, d->items.data[j], val, found); /* the stored value's __eq__ first */
}

EmStatus em_view_compare(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out) {
    int set_like_a = a->kind == SYM_VIEW && (a->pos == 'k' || a->pos == 'i'),
        set_like_b = b->kind == SYM_VIEW && (b->pos == 'k' || b->pos == 'i');
    int set_b = b->kind == SYM_SET || (b->kind == SYM_CONST && PyAnySet_Check(b->obj));
    int set_a = a->kind == SYM_SET || (a->kind == SYM_CONST && PyAnySet_Check(a->obj));
    if (!(op >= EMOP_LT && op <= EMOP_GE) || !((set_like_a && (set_like_b || set_b)) || (set_a && set_like_b)))
        return CALL_NEXT;
    if (!set_like_a) { /* a set op a view: the view's reflected comparison */
        static const EmOp flip[] = {[EMOP_LT] = EMOP_GT, [EMOP_LE] = EMOP_GE, [EMOP_EQ] = EMOP_EQ,
                                    [EMOP_NE] = EMOP_NE, [EMOP_GT] = EMOP_LT, [EMOP_GE] = EMOP_LE};
        return em_view_compare(T, flip[op], b, a, out);
    }
    EmSym *ia = em_view_items(T, a), *ib = set_like_b ? em_view_items(T, b) : NULL;
    if (!ia || (set_like_b && !ib)) return EM_ERR;
    Py_ssize_t la = ia->items.len, lb = set_like_b ? ib->items.len : -1;
    if (!set_like_b) {
        EmSym *n = NULL, *lf = em_sym_known(T, EM_KNOWN(len), "len");
        EmStatus lst = lf ? em_call(T, lf, NULL, &b, 1, NULL, &n) : EM_ERR;
        if (lst != EM_OK) return lst;
        if (n->kind != SYM_CONST || !PyLong_Check(n->obj)) return em_trace_fail(T, EMA_VALUE, "len() of a set");
        lb = PyLong_AsSsize_t(n->obj);
    }
    /* dictview_richcompare: sizes first, then every item of the smaller side in the other */
    int r = 0, sub = op == EMOP_LT || op == EMOP_LE || op == EMOP_EQ || op == EMOP_NE;
    int sizes = op == EMOP_EQ || op == EMOP_NE ? la == lb
                : op == EMOP_LT                ? la < lb
                : op == EMOP_LE                ? la <= lb
                : op == EMOP_GT                ? la > lb
                                               : la >= lb;
    if (sizes) {
        EmSym *items = sub ? ia : (set_like_b ? ib : NULL), *other = sub ? b : a;
        if (!items) { /* a set's items, in its order */
            EmStatus ist = em_seq_items(T, b, &items);
            if (ist != EM_OK) return ist;
        }
        r = 1;
        for (int32_t i = 0; r && i < items->items.len; i++) {
            EmStatus st = view_has(T, other, items->items.data[i], &r);
            if (st != EM_OK) return st;
        }
    }
    if (op == EMOP_NE) r = !r;
    return (*out = em_sym_const(T, r ? Py_True : Py_False)) ? EM_OK : EM_ERR;
}

const EmSymOps em_view_ops = {
    .getattr = view_attr,
    .getitem = view_getitem,
    .contains = view_contains,
    .truth = view_truth,
    .items = view_items,
    .iter = view_iter,
    .iter_type = view_iter_type,
};

/* ---- dicts read from the frame ---- */

/* d[key] on a dict (or dict subclass) read from the frame and not wrapped whole: a
 * subclass's Python __getitem__ is traced, dict's own is em_dict_getitem. */
EmStatus em_frame_dict_getitem(EmTracer *T, EmSym *d, EmSym *key, EmSym **out) {
    PyTypeObject *tp = Py_TYPE(d->obj);
    PyObject *gi = _PyType_Lookup(tp, EM_STR(dunder_getitem));
    if (gi == _PyType_Lookup(&PyDict_Type, EM_STR(dunder_getitem))) return em_dict_getitem(T, d, key, out);
    if (gi && PyFunction_Check(gi)) return em_call_dunder(T, d, "__getitem__", &key, 1, out);
    return em_trace_fail(T, EMA_VALUE, "subscript of a %s (its __getitem__ is not dict's)", tp->tp_name);
}
