/* em_sym_obj.c: the operations of objects: OBJ syms (any other Python object: one read from the
 * frame, guarded by its type or its identity, or one the trace knows) and NEW syms (instances
 * made while tracing, em_obj.c). What an OBJ supports depends on more than its kind; the
 * predicates below name those cases, and each operation tries them in one stated order. Rows of
 * em_sym_ops[]; objects' attribute loads are in em_sym.c.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* 1 when OBJ s is an nn.Module, 0 when not, -1 on error. */
static int obj_is_module(const EmSym *s) { return em_is_module(s->obj); }

/* An object read from the frame, guarded by its type only, that is not an nn.Module: its own
 * protocol methods (__getitem__, __iter__) are traced. 1, 0, or -1 on error. */
static int obj_is_opaque_input(const EmSym *s) {
    if (!em_sym_type_guarded(s)) return 0;
    int mod = obj_is_module(s);
    return mod < 0 ? -1 : !mod;
}

/* A dict read from the frame and not wrapped whole (an instance's __dict__): looked up per key
 * (em_lazy_dict_get), with dict's methods. */
static int obj_is_frame_dict(const EmSym *s) { return s->src >= 0 && PyDict_CheckExact(s->obj); }

/* The same or an instance of a dict subclass: subscripts go to em_frame_dict_getitem. */
static int obj_is_frame_dict_or_subclass(const EmSym *s) { return s->src >= 0 && PyDict_Check(s->obj); }

/* self.__contains__(key) traced, for an object whose __contains__ may return any value. */
static EmStatus contains_dunder(EmTracer *T, EmSym *self, EmSym *key, int *found) {
    EmSym *r = NULL;
    EmStatus st = em_call_dunder(T, self, "__contains__", &key, 1, &r);
    return st == EM_OK ? em_sym_truth(T, r, found) : st;
}

/* Items of an object from the frame or made while tracing, by its own iteration protocol:
 * its __iter__ (traced), or the old one, self[0], self[1]... until IndexError. All taken at
 * once (README, limitations). */
static EmStatus obj_items(EmTracer *T, EmSym *s, EmSym **tmp_out) {
    PyTypeObject *tp = Py_TYPE(s->obj);
    PyObject *it_fn = _PyType_Lookup(tp, EM_STR(dunder_iter)), *gi = _PyType_Lookup(tp, EM_STR(dunder_getitem));
    if (it_fn || s->kind == SYM_NEW || !gi || !PyFunction_Check(gi)) {
        EmSym *r = NULL;
        EmStatus st = em_call_dunder(T, s, "__iter__", NULL, 0, &r);
        if (st != EM_OK) return st;
        if (r == s || r->kind == SYM_OBJ || r->kind == SYM_NEW) { /* an iterator object: stepped to its end */
            PyObject *nx = _PyType_Lookup(Py_TYPE(r->obj), EM_STR(dunder_next));
            if (!nx || !PyFunction_Check(nx))
                return em_trace_fail(T, EMA_VALUE, "iteration over %s (its __iter__ returns an object)", tp->tp_name);
            EmSym *it = NULL;
            if ((st = em_lazy_next_of(T, r, &it)) != EM_OK) return st;
            r = it;
        }
        return em_seq_items(T, r, tmp_out);
    }
    EmSym *items = em_sym_new(T, SYM_TUPLE);
    if (!items) return EM_ERR;
    for (long i = 0;; i++) {
        PyObject *iv = PyLong_FromLong(i);
        EmSym *k = iv ? em_sym_const(T, iv) : NULL, *v = NULL;
        Py_XDECREF(iv);
        if (!k) return EM_ERR;
        EmStatus st = em_call_dunder(T, s, "__getitem__", &k, 1, &v);
        if (st == EM_ABORT && T->exc && PyErr_GivenExceptionMatches(T->exc, PyExc_IndexError)) {
            Py_CLEAR(T->exc);
            break;
        }
        if (st != EM_OK) return st;
        if (em_vec_push(&items->items, v)) return PyErr_NoMemory(), EM_ERR;
    }
    *tmp_out = items;
    return EM_OK;
}

/* iter() of a user object (made while tracing, or an opaque input): its class's own __iter__,
 * traced; an object it returns that has a Python __next__ is stepped lazily (em_lazy_next_of),
 * interleaved with the loop as in Python. Anything else: its items (em_iter_over). */
static EmStatus obj_iter(EmTracer *T, EmSym *s, EmSym **out) {
    if (s->pos == EM_POS_IDICT) { /* an instance __dict__: its copy, as the trace changed it */
        EmSym *c = NULL;
        EmStatus st = em_instance_dict(T, s, &c);
        return st == EM_OK ? em_iter_of(T, c, out) : st;
    }
    /* a builtin iterator of the frame (a list_iterator, a generator, a zip...): iter(it) is it,
     * whose items Python takes later (FOR_ITER on it runs its loop as plain Python) */
    if (s->kind == SYM_OBJ && s->src >= 0 && !s->by_id && Py_TYPE(s->obj)->tp_iter == PyObject_SelfIter &&
        !(Py_TYPE(s->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return (*out = s), EM_OK;
    int user = s->kind == SYM_NEW ? 1 : obj_is_opaque_input(s);
    if (user < 0) return EM_ERR;
    PyObject *it_fn = user ? _PyType_Lookup(Py_TYPE(s->obj), EM_STR(dunder_iter)) : NULL;
    if (!it_fn || !PyFunction_Check(it_fn)) return em_iter_over(T, s, 0, out);
    EmSym *r = NULL;
    EmStatus st = em_call_dunder(T, s, "__iter__", NULL, 0, &r);
    if (st != EM_OK) return st;
    if (r->kind != SYM_OBJ && r->kind != SYM_NEW) return em_iter_of(T, r, out);
    PyObject *nx = _PyType_Lookup(Py_TYPE(r->obj), EM_STR(dunder_next));
    if (!nx || !PyFunction_Check(nx))
        return em_trace_fail(T, EMA_VALUE, "iteration over %s (its __iter__ returns an object)",
                             Py_TYPE(s->obj)->tp_name);
    return em_lazy_next_of(T, r, out);
}

/* ---- objects (OBJ) ---- */

static EmStatus obj_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    if (obj_is_frame_dict(base)) return em_sym_type_method(T, &PyDict_Type, base, name, method, out, self);
    return em_sym_obj_attr(T, base, name, method, out, self);
}

/* In this order: a dict read from the frame; an opaque input's own __getitem__, traced; a
 * container module (ModuleDict[name] traced, ModuleList[i] and Sequential[i] from its
 * members); else the value of an object known by identity. */
static EmStatus obj_getitem(EmTracer *T, EmSym *c, EmSym *key, EmSym **out) {
    EmSym *rw = NULL; /* changed by the trace: its items */
    EmStatus ist = em_frame_dict_items_rw(T, c, 0, &rw);
    if (ist != CALL_NEXT) return ist == EM_OK ? em_sym_getitem(T, rw, key, out) : ist;
    if (obj_is_frame_dict_or_subclass(c)) return em_frame_dict_getitem(T, c, key, out);
    int opaque = obj_is_opaque_input(c);
    if (opaque) return opaque < 0 ? EM_ERR : em_call_dunder(T, c, "__getitem__", &key, 1, out);
    if (key->kind == SYM_INT && c->src >= 0) { /* ModuleList[i] of a symbolic i: the module it picks, i pinned */
        int mod = obj_is_module(c);
        PyObject *v = mod == 1 ? em_int_value(T, key) : NULL;
        if (mod < 0 || (mod && !v)) return EM_ERR;
        key = v ? em_sym_const(T, v) : key;
        Py_XDECREF(v);
        if (!key) return EM_ERR;
    }
    int name_key = key->kind == SYM_CONST && PyUnicode_Check(key->obj) && c->src >= 0;
    int index_key = key->kind == SYM_CONST && (PyLong_CheckExact(key->obj) || PySlice_Check(key->obj));
    int mod = name_key || index_key ? obj_is_module(c) : 0;
    if (mod < 0) return EM_ERR;
    if (mod && name_key) return em_call_dunder(T, c, "__getitem__", &key, 1, out); /* ModuleDict[name]: traced */
    if (mod && em_module_own_dunder(c->obj, EM_STR(dunder_getitem))) /* a user module's own: traced */
        return em_call_dunder(T, c, "__getitem__", &key, 1, out);
    if (mod && index_key) { /* ModuleList[i], Sequential[i]; a slice is a list of the modules */
        EmSym *items = NULL;
        EmStatus st = em_module_items(T, c, 0, &items);
        return st == EM_OK ? em_sym_getitem(T, items, key, out) : st;
    }
    return em_sym_getitem_known(T, c, key, out);
}

/* In this order: a dict read from the frame, by a constant key (guarded per key); os.environ
 * (guarded per variable); a mutable object guarded by its type only (its own __contains__,
 * traced); else the value of an object known by identity. */
static EmStatus obj_contains(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    EmSym *v, *items = NULL;
    EmStatus ist = em_frame_dict_items_rw(T, c, 0, &items); /* changed by the trace: its items */
    if (ist != CALL_NEXT) return ist == EM_OK ? em_sym_contains(T, items, key, found) : ist;
    if (obj_is_frame_dict(c) && key->kind == SYM_CONST) return em_lazy_dict_get(T, c, key->obj, found, &v);
    if (obj_is_frame_dict_or_subclass(c) && em_key_of_frame(key) &&
        _PyType_Lookup(Py_TYPE(c->obj), EM_STR(dunder_contains)) ==
            _PyType_Lookup(&PyDict_Type, EM_STR(dunder_contains)))
        return em_lazy_dict_get_keyed(T, c, key, found, &v);
    if (c->obj == em_state.os_environ) return em_env_lookup(T, c, key, found, &v);
    if (em_sym_type_guarded(c)) return contains_dunder(T, c, key, found);
    return em_sym_contains_known(T, c, key, found);
}

/* True for objects whose type has no number, mapping or sequence slots, and for modules,
 * functions and classes; others would run their __bool__ or __len__. */
static EmStatus user_truth(EmTracer *T, EmSym *s, int *out);

static EmStatus obj_truth(EmTracer *T, EmSym *s, int *out) {
    if (s->pos == EM_POS_IDICT) {
        EmSym *c = NULL;
        EmStatus st = em_instance_dict(T, s, &c);
        return st == EM_OK ? em_sym_truth(T, c, out) : st;
    }
    if (em_sym_user_operand(s) && !PyDict_CheckExact(s->obj)) return user_truth(T, s, out); /* its class's methods */
    if (!Py_TYPE(s->obj)->tp_as_number && !Py_TYPE(s->obj)->tp_as_mapping && !Py_TYPE(s->obj)->tp_as_sequence) {
        *out = 1;
        return EM_OK;
    }
    if (PyModule_Check(s->obj) || PyFunction_Check(s->obj) || PyCFunction_Check(s->obj) || PyType_Check(s->obj)) {
        *out = 1;
        return EM_OK;
    }
    return em_trace_fail(T, EMA_VALUE, "truth value of %s", Py_TYPE(s->obj)->tp_name);
}

/* An opaque input by its own iteration protocol; a container module's members. */
static EmStatus obj_items_of(EmTracer *T, EmSym *s, EmSym **out) {
    int opaque = obj_is_opaque_input(s);
    if (opaque) return opaque < 0 ? EM_ERR : obj_items(T, s, out);
    int mod = obj_is_module(s);
    if (mod < 0) return EM_ERR;
    if (mod) return em_module_items(T, s, 0, out);
    if ((PyObject *)Py_TYPE(s->obj) == EM_KNOWN(enum_meta)) { /* an Enum class: its members, fixed when it was made */
        PyObject *m = PySequence_Tuple(s->obj);
        EmSym *r = m ? em_sym_new(T, SYM_TUPLE) : NULL;
        for (Py_ssize_t i = 0; r && i < PyTuple_GET_SIZE(m); i++) {
            EmSym *c = em_sym_const(T, PyTuple_GET_ITEM(m, i));
            if (!c || em_vec_push(&r->items, c)) r = c ? (PyErr_NoMemory(), NULL) : NULL;
        }
        Py_XDECREF(m);
        return (*out = r) ? EM_OK : EM_ERR;
    }
    return em_trace_fail(T, EMA_VALUE, "iteration over %s", em_sym_describe(s));
}

/* Container modules (ModuleList...): _rules.iter_type checks their __iter__. */
static EM_NEW PyObject *obj_iter_type(EmTracer *T, EmSym *s, int rev) {
    int mod = obj_is_module(s);
    return mod == 1 ? em_iter_type_of(Py_NewRef(s->obj), rev) : NULL;
}

const EmSymOps em_obj_ops = {
    .ident = EM_IDENT_OBJ,
    .getattr = obj_attr,
    .getitem = obj_getitem,
    .contains = obj_contains,
    .truth = obj_truth,
    .items = obj_items_of,
    .iter = obj_iter,
    .iter_type = obj_iter_type,
    .method = em_frame_dict_method,
    .call = em_obj_call,
};

/* ---- instances made while tracing (NEW): their class's methods, traced ---- */

static EmStatus new_getitem(EmTracer *T, EmSym *c, EmSym *key, EmSym **out) {
    return em_call_dunder(T, c, "__getitem__", &key, 1, out);
}

static EmStatus new_setitem(EmTracer *T, EmSym *c, EmSym *key, EmSym *v) {
    EmSym *kv[2] = {key, v}, *out = NULL;
    return em_call_dunder(T, c, "__setitem__", kv, 2, &out);
}

/* `key in c`: its class's __contains__ (the result's truth), else iteration as Python falls back
 * to: item by item (lazily: an iterator's state is as Python leaves it), `is` then ==. */
static EmStatus new_contains(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    EmSym *r = NULL, *it = NULL;
    if (_PyType_Lookup(Py_TYPE(c->obj), EM_STR(dunder_contains))) {
        EmStatus st = em_call_dunder(T, c, "__contains__", &key, 1, &r);
        return st == EM_OK ? em_sym_truth(T, r, found) : st;
    }
    PyTypeObject *tp = Py_TYPE(c->obj);
    if (!_PyType_Lookup(tp, EM_STR(dunder_iter)) && !_PyType_Lookup(tp, EM_STR(dunder_getitem)))
        return em_trace_raise_msg(T, PyExc_TypeError, "argument of type '%s' is not iterable", tp->tp_name);
    EmStatus st = em_iter_of(T, c, &it);
    for (*found = 0; st == EM_OK && !*found;) {
        EmSym *v = NULL, *one = NULL;
        if ((st = em_iter_next(T, it, &v)) != EM_OK || !v) break;
        if (!(one = em_sym_new(T, SYM_TUPLE)) || em_vec_push(&one->items, v))
            return one ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
        st = em_sym_contains(T, one, key, found);
    }
    return st;
}

/* True without __bool__ and __len__; the contents' truth for a builtin container's subclass. */
static EmStatus new_truth(EmTracer *T, EmSym *s, int *out) {
    PyTypeObject *tp = Py_TYPE(s->obj);
    PyObject *b = _PyType_Lookup(tp, EM_STR(dunder_bool)), *l = _PyType_Lookup(tp, EM_STR(dunder_len));
    if (!b && em_new_content_type(s) && l && !PyFunction_Check(l)) /* the container's own __len__ */
        return em_sym_truth(T, s->items.data[1], out);
    return user_truth(T, s, out);
}

/* A user object's truth: its class's __bool__, else __len__, traced; True without either. */
static EmStatus user_truth(EmTracer *T, EmSym *s, int *out) {
    PyTypeObject *tp = Py_TYPE(s->obj);
    PyObject *b = _PyType_Lookup(tp, EM_STR(dunder_bool)), *l = _PyType_Lookup(tp, EM_STR(dunder_len));
    if (!b && !l) {
        *out = 1;
        return EM_OK;
    }
    if ((b && PyFunction_Check(b)) || (!b && PyFunction_Check(l))) { /* the class's own, traced */
        EmSym *r = NULL;
        EmStatus st = em_call_dunder(T, s, b ? "__bool__" : "__len__", NULL, 0, &r);
        if (st != EM_OK) return st;
        if (r->kind != SYM_CONST || !(b ? PyBool_Check(r->obj) : PyLong_CheckExact(r->obj)))
            return em_trace_fail(T, EMA_VALUE, "truth value of a %s (not a constant)", tp->tp_name);
        *out = PyObject_IsTrue(r->obj);
        return *out < 0 ? EM_ERR : EM_OK;
    }
    if (!b && em_frame_items_method(s, l)) {
        EmSym *d = NULL; /* the base's own __len__ on a container subclass's instance from the frame */
        EmStatus st = em_frame_items(T, s, &d);
        return st == EM_OK ? em_sym_truth(T, d, out) : st;
    }
    return em_trace_fail(T, EMA_VALUE, "truth value of a %s", tp->tp_name);
}

/* Calling an instance made while tracing: its class's __call__ (a module's _call_impl), in
 * em_call's last step. */
static EmStatus new_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    (void)T, (void)fn, (void)self, (void)args, (void)nargs, (void)kwnames, (void)out;
    return CALL_NEXT;
}

const EmSymOps em_new_ops = {
    .ident = EM_IDENT_FRESH,
    .call = new_call,
    .getattr = em_sym_new_attr,
    .getitem = new_getitem,
    .setitem = new_setitem,
    .contains = new_contains,
    .truth = new_truth,
    .items = obj_items,
    .iter = obj_iter,
};

/* ---- operators of user objects: their classes' dunder methods, as Python dispatches ---- */

/* A user class's instance: made while tracing, or read from the frame (its type guarded). */
static int user_operand(const EmSym *s) {
    return (s->kind == SYM_NEW || (s->kind == SYM_OBJ && s->src >= 0)) && !PyType_Check(s->obj) &&
           PyType_HasFeature(Py_TYPE(s->obj), Py_TPFLAGS_HEAPTYPE) && !PyObject_TypeCheck(s->obj, em_state.tensor_type);
}

int em_sym_user_operand(const EmSym *s) { return user_operand(s); }

static const char *const op_names[][2] = {
    [EMOP_ADD] = {"__add__", "__radd__"},
    [EMOP_SUB] = {"__sub__", "__rsub__"},
    [EMOP_MUL] = {"__mul__", "__rmul__"},
    [EMOP_TRUEDIV] = {"__truediv__", "__rtruediv__"},
    [EMOP_FLOORDIV] = {"__floordiv__", "__rfloordiv__"},
    [EMOP_MOD] = {"__mod__", "__rmod__"},
    [EMOP_POW] = {"__pow__", "__rpow__"},
    [EMOP_MATMUL] = {"__matmul__", "__rmatmul__"},
    [EMOP_AND] = {"__and__", "__rand__"},
    [EMOP_OR] = {"__or__", "__ror__"},
    [EMOP_XOR] = {"__xor__", "__rxor__"},
    [EMOP_LSHIFT] = {"__lshift__", "__rlshift__"},
    [EMOP_RSHIFT] = {"__rshift__", "__rrshift__"},
    [EMOP_IADD] = {"__iadd__", NULL},
    [EMOP_ISUB] = {"__isub__", NULL},
    [EMOP_IMUL] = {"__imul__", NULL},
    [EMOP_ITRUEDIV] = {"__itruediv__", NULL},
    [EMOP_IFLOORDIV] = {"__ifloordiv__", NULL},
    [EMOP_IMOD] = {"__imod__", NULL},
    [EMOP_IPOW] = {"__ipow__", NULL},
    [EMOP_IMATMUL] = {"__imatmul__", NULL},
    [EMOP_IAND] = {"__iand__", NULL},
    [EMOP_IOR] = {"__ior__", NULL},
    [EMOP_IXOR] = {"__ixor__", NULL},
    [EMOP_ILSHIFT] = {"__ilshift__", NULL},
    [EMOP_IRSHIFT] = {"__irshift__", NULL},
    [EMOP_NEG] = {"__neg__", NULL},
    [EMOP_POS] = {"__pos__", NULL},
    [EMOP_INVERT] = {"__invert__", NULL},
    [EMOP_LT] = {"__lt__", "__gt__"},
    [EMOP_LE] = {"__le__", "__ge__"},
    [EMOP_EQ] = {"__eq__", "__eq__"},
    [EMOP_NE] = {"__ne__", "__ne__"},
    [EMOP_GT] = {"__gt__", "__lt__"},
    [EMOP_GE] = {"__ge__", "__le__"},
};

static int is_compare(EmOp op) { return op >= EMOP_LT && op <= EMOP_GE; }

static int declined(const EmSym *r) { return r->kind == SYM_CONST && r->obj == Py_NotImplemented; }

/* The builtin container family of type tp, as C's slots check their other operand: 1 set or
 * frozenset, 2 list, 3 dict, 4 tuple (subclasses included), 0 none. */
static int container_family(PyTypeObject *tp) {
    if (!tp) return 0;
    if (PyType_IsSubtype(tp, &PySet_Type) || PyType_IsSubtype(tp, &PyFrozenSet_Type)) return 1;
    if (PyType_IsSubtype(tp, &PyList_Type)) return 2;
    if (PyType_IsSubtype(tp, &PyDict_Type)) return 3;
    return PyType_IsSubtype(tp, &PyTuple_Type) ? 4 : 0;
}

/* A builtin container subclass's instance C's slots read by its items: one made in the trace
 * (NEW with contents) or one from the frame (em_frame_items), whose class has no Python
 * __iter__. */
static int slot_reads_items(const EmSym *x) {
    if (x->kind != SYM_NEW && (x->kind != SYM_OBJ || x->src < 0 || x->by_id)) return 0;
    PyTypeObject *tp = Py_TYPE(x->obj);
    if (x->kind == SYM_NEW ? !em_new_content_type(x)
                           : !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(PyList_Check(x->obj) || PyTuple_Check(x->obj) ||
                                                                        PyDict_Check(x->obj) || PyAnySet_Check(x->obj)))
        return 0;
    PyObject *it = _PyType_Lookup(tp, EM_STR(dunder_iter));
    return !it || !PyFunction_Check(it);
}

EmStatus em_slot_operand(EmTracer *T, EmSym *x, EmSym **out) {
    *out = x;
    if (!slot_reads_items(x)) return EM_OK;
    if (x->kind == SYM_NEW) return (*out = x->items.data[1]), EM_OK;
    return em_frame_items(T, x, out);
}

/* The operator a binary or comparison dunder name stands for: *reflected 1 for __rsub__-like
 * names; EMOP__COUNT for other names. */
static EmOp dunder_op(const char *name, int *reflected) {
    for (int r = 0; r < 2; r++)
        for (int op = 0; op < (int)(sizeof(op_names) / sizeof(op_names[0])); op++)
            if (op_names[op][r] && !strcmp(op_names[op][r], name) && op != EMOP_NEG && op != EMOP_POS &&
                op != EMOP_INVERT) {
                *reflected = r;
                return (EmOp)op;
            }
    return EMOP__COUNT;
}

static EmStatus const_out(EmTracer *T, PyObject *v, EmSym **out) {
    return (*out = em_sym_const(T, v)) ? EM_OK : EM_ERR;
}

EmStatus em_slot_call(EmTracer *T, const char *name, EmSym *c, EmSym **args, int nargs, EmSym **out, int *inplace) {
    *inplace = 0;
    int reflected = 0;
    EmOp op = dunder_op(name, &reflected);
    if (op != EMOP__COUNT && nargs == 1) {
        EmSym *y = NULL;
        EmStatus yst = em_slot_operand(T, args[0], &y);
        if (yst != EM_OK) return yst;
        int fam = container_family(em_sym_known_type(c)), yfam = container_family(em_sym_known_type(y));
        int repeat = (op == EMOP_MUL || op == EMOP_IMUL) && (fam == 2 || fam == 4);
        int extend = (op == EMOP_IADD && fam == 2) || (op == EMOP_IOR && fam == 3);
        PyTypeObject *yt = em_sym_known_type(y);
        if ((fam == 2 || fam == 4) && op == EMOP_ADD && !reflected && yfam != fam && yt) /* sq_concat's own error */
            return em_trace_raise_msg(T, PyExc_TypeError, "can only concatenate %s (not \"%s\") to %s",
                                      fam == 2 ? "list" : "tuple", yt->tp_name, fam == 2 ? "list" : "tuple");
        if (repeat && y->kind == SYM_CONST && !PyIndex_Check(y->obj)) /* sq_repeat's */
            return em_trace_raise_msg(T, PyExc_TypeError, "'%s' object cannot be interpreted as an integer",
                                      Py_TYPE(y->obj)->tp_name);
        if (!fam || (!yfam && !repeat && !extend) || (yfam && yfam != fam && !extend))
            return const_out(T, Py_NotImplemented, out); /* C's slots decline a foreign operand */
        *inplace = op >= EMOP_IADD && op <= EMOP_IRSHIFT;
        EmSym *ab[2] = {reflected ? y : c, reflected ? c : y};
        return em_apply_op(T, op, ab, 2, out);
    }
    if (!strcmp(name, "__len__") && !nargs) {
        Py_ssize_t n = c->kind == SYM_CONST ? PyObject_Size(c->obj)
                       : c->kind == SYM_LIST || c->kind == SYM_DICT || c->kind == SYM_SET || c->kind == SYM_TUPLE
                           ? c->items.len
                           : -2;
        if (n == -2) return em_trace_fail(T, EMA_VALUE, "len() of %s", em_sym_describe(c));
        PyObject *v = n < 0 ? NULL : PyLong_FromSsize_t(n);
        EmStatus st = v ? const_out(T, v, out) : EM_ERR;
        Py_XDECREF(v);
        return st;
    }
    if (!strcmp(name, "__iter__") && !nargs) return em_iter_of(T, c, out);
    if (!strcmp(name, "__contains__") && nargs == 1) {
        int found = 0;
        EmStatus st = em_sym_contains(T, c, args[0], &found);
        return st == EM_OK ? const_out(T, found ? Py_True : Py_False, out) : st;
    }
    if (!strcmp(name, "__getitem__") && nargs == 1) return em_sym_getitem(T, c, args[0], out);
    if ((!strcmp(name, "__setitem__") && nargs == 2) || (!strcmp(name, "__delitem__") && nargs == 1)) {
        EmStatus st = nargs == 2 ? em_sym_setitem(T, c, args[0], args[1]) : em_sym_delitem(T, c, args[0]);
        return st == EM_OK ? const_out(T, Py_None, out) : st;
    }
    return CALL_NEXT;
}

/* The operator as Python's TypeError names it. */
static const char *op_symbol(EmOp op) {
    static const char *const sym[] = {
        [EMOP_ADD] = "+",       [EMOP_SUB] = "-",         [EMOP_MUL] = "*",           [EMOP_TRUEDIV] = "/",
        [EMOP_FLOORDIV] = "//", [EMOP_MOD] = "%",         [EMOP_POW] = "** or pow()", [EMOP_MATMUL] = "@",
        [EMOP_AND] = "&",       [EMOP_OR] = "|",          [EMOP_XOR] = "^",           [EMOP_LSHIFT] = "<<",
        [EMOP_RSHIFT] = ">>",   [EMOP_IADD] = "+=",       [EMOP_ISUB] = "-=",         [EMOP_IMUL] = "*=",
        [EMOP_ITRUEDIV] = "/=", [EMOP_IFLOORDIV] = "//=", [EMOP_IMOD] = "%=",         [EMOP_IPOW] = "**=",
        [EMOP_IMATMUL] = "@=",  [EMOP_IAND] = "&=",       [EMOP_IOR] = "|=",          [EMOP_IXOR] = "^=",
        [EMOP_ILSHIFT] = "<<=", [EMOP_IRSHIFT] = ">>=",   [EMOP_NEG] = "-",           [EMOP_POS] = "+",
        [EMOP_INVERT] = "~",    [EMOP_LT] = "<",          [EMOP_LE] = "<=",           [EMOP_GT] = ">",
        [EMOP_GE] = ">=",
    };
    return sym[op] ? sym[op] : "?";
}

/* The dunder `name` of x's class (borrowed) with the guards that keep it: the class dict entry
 * that holds it, or its absence from every class of the MRO. NULL with *st EM_OK: absent. */
static PyObject *user_dunder(EmTracer *T, EmSym *x, const char *name, EmStatus *st) {
    *st = EM_ERR;
    PyTypeObject *tp = Py_TYPE(x->obj);
    PyObject *nm = PyUnicode_InternFromString(name);
    if (!nm) return NULL;
    EmSym *cls = em_sym_known(T, (PyObject *)tp, tp->tp_name);
    int known = cls ? em_class_attr_known(T, cls, nm) : -1;
    PyObject *f = known == 2 ? _PyType_Lookup(tp, nm) : NULL;
    Py_DECREF(nm);
    if (known < 0) return NULL;
    if (known == 0) {
        *st = em_trace_fail(T, EMA_VALUE, "%s of a %s (its class is not guarded)", name, tp->tp_name);
        return NULL;
    }
    if (x->kind == SYM_OBJ && em_sym_type_guarded(x) && em_guard_check(T->P, EMG_TYPE, x->src, (PyObject *)tp, 0))
        return NULL;
    *st = EM_OK;
    return f;
}

static EmStatus not_implemented(EmTracer *T, EmSym **out) {
    return (*out = em_sym_const(T, Py_NotImplemented)) ? EM_OK : EM_ERR;
}

/* x.name(y) as the operator calls it: the user's function inlined; object's default
 * comparisons (identity for ==, the inverse of __eq__ for !=); NotImplemented from a builtin
 * constant of a type unrelated to the user operand's (their C slots return it for foreign
 * types). *out is NotImplemented where the method declines. */
static EmStatus call_op_dunder(EmTracer *T, EmOp op, int reflected, EmSym *x, EmSym *y, EmSym **out) {
    const char *name = op_names[op][reflected];
    if (!user_operand(x) && y && slot_reads_items(y) && name &&
        container_family(em_sym_known_type(x)) == container_family(Py_TYPE(y->obj))) {
        int inplace; /* a builtin container's slot reads the other operand's contents */
        return em_slot_call(T, name, x, &y, 1, out, &inplace);
    }
    if (!user_operand(x)) {
        EmSym *u = y;
        int plain = x->kind == SYM_CONST && (x->obj == Py_None || PyLong_CheckExact(x->obj) || PyBool_Check(x->obj) ||
                                             PyFloat_CheckExact(x->obj) || PyUnicode_CheckExact(x->obj) ||
                                             PyTuple_CheckExact(x->obj) || PyBytes_CheckExact(x->obj));
        if (plain && PyUnicode_CheckExact(x->obj) && op == EMOP_MOD) plain = 0; /* str % obj formats */
        if (plain && PyTuple_CheckExact(x->obj) && (op == EMOP_MUL || op == EMOP_ADD)) plain = 0;
        if (plain && u && PyObject_TypeCheck(u->obj, Py_TYPE(x->obj))) plain = 0;
        /* a builtin container compared with an object of another family: its slot declines */
        int fam = x->kind == SYM_CONST || user_operand(x) ? 0 : container_family(em_sym_known_type(x));
        if (fam && u &&
            (op == EMOP_EQ || op == EMOP_NE || op == EMOP_LT || op == EMOP_LE || op == EMOP_GT || op == EMOP_GE) &&
            container_family(Py_TYPE(u->obj)) != fam)
            plain = 1;
        return plain ? not_implemented(T, out)
                     : em_trace_fail(T, EMA_VALUE, "operator %s on %s", name, em_sym_describe(x));
    }
    EmStatus st;
    PyObject *f = user_dunder(T, x, name, &st);
    if (st != EM_OK) return st;
    if (!f) return not_implemented(T, out);
    if (PyFunction_Check(f)) {
        EmSym *args[2] = {x, y};
        return em_inline(T, f, args, y ? 2 : 1, NULL, out);
    }
    PyTypeObject *ct = em_new_content_type(x);
    EmSym *items = ct && PyType_IsSubtype(ct, PyDescr_TYPE(f)) ? x->items.data[1] : NULL;
    if (!items && y && Py_IS_TYPE(f, &PyWrapperDescr_Type) && em_frame_items_method(x, f) &&
        (st = em_frame_items(T, x, &items)) != EM_OK)
        return st;
    if (items && y && Py_IS_TYPE(f, &PyWrapperDescr_Type)) { /* the builtin container's slot on x's items */
        int inplace;
        if ((st = em_slot_call(T, name, items, &y, 1, out, &inplace)) != EM_OK) return st;
        if (inplace && !declined(*out)) *out = x;
        return EM_OK;
    }
    PyObject *base = _PyType_Lookup(&PyBaseObject_Type, PyDescr_NAME(f) ? PyDescr_NAME(f) : Py_None);
    if (f == base && (op == EMOP_EQ || op == EMOP_NE) && y) {
        if (op == EMOP_NE) { /* object.__ne__: not __eq__, unless that declines */
            EmStatus s2 = call_op_dunder(T, EMOP_EQ, 0, x, y, out);
            if (s2 != EM_OK || ((*out)->kind == SYM_CONST && (*out)->obj == Py_NotImplemented)) return s2;
            int t;
            if ((s2 = em_sym_truth(T, *out, &t)) != EM_OK) return s2;
            return (*out = em_sym_const(T, t ? Py_False : Py_True)) ? EM_OK : EM_ERR;
        }
        int same;
        if ((st = em_sym_is(T, x, y, &same)) != EM_OK) return st;
        return same ? ((*out = em_sym_const(T, Py_True)) ? EM_OK : EM_ERR) : not_implemented(T, out);
    }
    if (f == base && is_compare(op)) return not_implemented(T, out);
    return em_trace_fail(T, EMA_VALUE, "%s.%s (not a Python function)", Py_TYPE(x->obj)->tp_name, name);
}

/* a <op> b where a or b is a user object (em_sym_user_operand): in-place method first, then
 * the reflected method first when b's class is a proper subclass of a's overriding it, then
 * a's, then b's reflected; == and != fall back to identity, other operators raise TypeError. */
/* u's class keeps the builtin container's operator op (neither its method nor the reflected
 * one, nor the binary one of an in-place op, is a Python function). */
static int keeps_builtin_op(EmSym *u, EmOp op) {
    if (u->kind != SYM_NEW && u->kind != SYM_OBJ) return 0;
    EmOp ops[2] = {op, op >= EMOP_IADD && op <= EMOP_IRSHIFT ? em_op_binary_of(op) : op};
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 2 && (size_t)ops[k] < sizeof(op_names) / sizeof(op_names[0]); r++) {
            const char *n = op_names[ops[k]][r];
            PyObject *nm = n ? PyUnicode_InternFromString(n) : NULL;
            PyObject *f = nm ? _PyType_Lookup(Py_TYPE(u->obj), nm) : NULL;
            Py_XDECREF(nm);
            if (f && PyFunction_Check(f)) return 0;
        }
    PyErr_Clear(); /* an interning failure only makes the answer "keeps" for that name */
    return 1;
}

EmStatus em_user_binop(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out) {
    EmStatus st;
    if ((a->kind == SYM_VIEW) != (b->kind == SYM_VIEW)) {
        /* a dict view and a container subclass's instance keeping the builtin operator: the
         * view's set operation or comparison reads the instance by its contents */
        EmSym **u = a->kind == SYM_VIEW ? &b : &a, *c = NULL;
        if (keeps_builtin_op(*u, op) && (st = em_slot_operand(T, *u, &c)) != EM_OK) return st;
        if (c && c != *u) {
            *u = c;
            return em_sym_binop(T, op, PyTuple_GET_ITEM(em_state.op_fns, op), a, b, out);
        }
    }
    EmOp asked = op;
    if (op >= EMOP_IADD && op <= EMOP_IRSHIFT) {
        if (user_operand(a)) {
            if ((st = call_op_dunder(T, op, 0, a, b, out)) != EM_OK || !declined(*out)) return st;
        }
        op = em_op_binary_of(op);
    }
    PyTypeObject *ta = em_sym_known_type(a), *tb = em_sym_known_type(b); /* a may be a container sym */
    if (!ta || !tb)
        return em_trace_fail(T, EMA_VALUE, "operator between %s and %s", em_sym_describe(a), em_sym_describe(b));
    int differ = ta != tb || is_compare(op);
    int rfirst = ta != tb && user_operand(b) && PyType_IsSubtype(tb, ta);
    if (rfirst && (st = call_op_dunder(T, op, 1, b, a, out)) != EM_OK) return st;
    if (!rfirst || declined(*out)) {
        if ((st = call_op_dunder(T, op, 0, a, b, out)) != EM_OK || !declined(*out)) return st;
        if (differ && !rfirst && (st = call_op_dunder(T, op, 1, b, a, out)) != EM_OK) return st;
    }
    if (!declined(*out)) return EM_OK;
    if (op == EMOP_EQ || op == EMOP_NE) {
        int same;
        if ((st = em_sym_is(T, a, b, &same)) != EM_OK) return st;
        return (*out = em_sym_const(T, (same ^ (op == EMOP_NE)) ? Py_True : Py_False)) ? EM_OK : EM_ERR;
    }
    PyObject *e = is_compare(op) ? PyUnicode_FromFormat("'%s' not supported between instances of '%s' and '%s'",
                                                        op_symbol(op), ta->tp_name, tb->tp_name)
                                 : PyUnicode_FromFormat("unsupported operand type(s) for %s: '%s' and '%s'",
                                                        op_symbol(asked), ta->tp_name, tb->tp_name);
    st = e ? em_trace_raise_new(T, PyExc_TypeError, e) : EM_ERR;
    Py_XDECREF(e);
    return st;
}

/* -a, +a, ~a of a user object: its method inlined. */
EmStatus em_user_unop(EmTracer *T, EmOp op, EmSym *a, EmSym **out) {
    EmStatus st = call_op_dunder(T, op, 0, a, NULL, out);
    if (st != EM_OK || !declined(*out)) return st;
    PyObject *e = PyUnicode_FromFormat("bad operand type for unary %s: '%s'", op_symbol(op), Py_TYPE(a->obj)->tp_name);
    st = e ? em_trace_raise_new(T, PyExc_TypeError, e) : EM_ERR;
    Py_XDECREF(e);
    return st;
}
