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
        if (r == s || r->kind == SYM_OBJ || r->kind == SYM_NEW)
            return em_trace_fail(T, EMA_VALUE, "iteration over %s (its __iter__ returns an object)", tp->tp_name);
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

/* ---- objects (OBJ) ---- */

static EmStatus obj_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    if (obj_is_frame_dict(base)) return em_sym_type_method(T, &PyDict_Type, base, name, method, out, self);
    return em_sym_obj_attr(T, base, name, method, out, self);
}

/* In this order: a dict read from the frame; an opaque input's own __getitem__, traced; a
 * container module (ModuleDict[name] traced, ModuleList[i] and Sequential[i] from its
 * members); else the value of an object known by identity. */
static EmStatus obj_getitem(EmTracer *T, EmSym *c, EmSym *key, EmSym **out) {
    if (obj_is_frame_dict_or_subclass(c)) return em_frame_dict_getitem(T, c, key, out);
    int opaque = obj_is_opaque_input(c);
    if (opaque) return opaque < 0 ? EM_ERR : em_call_dunder(T, c, "__getitem__", &key, 1, out);
    int name_key = key->kind == SYM_CONST && PyUnicode_Check(key->obj) && c->src >= 0;
    int index_key = key->kind == SYM_CONST && (PyLong_CheckExact(key->obj) || PySlice_Check(key->obj));
    int mod = name_key || index_key ? obj_is_module(c) : 0;
    if (mod < 0) return EM_ERR;
    if (mod && name_key) return em_call_dunder(T, c, "__getitem__", &key, 1, out); /* ModuleDict[name]: traced */
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
    EmSym *v;
    if (obj_is_frame_dict(c) && key->kind == SYM_CONST) return em_lazy_dict_get(T, c, key->obj, found, &v);
    if (c->obj == em_state.os_environ) return em_env_lookup(T, c, key, found, &v);
    if (em_sym_type_guarded(c)) return contains_dunder(T, c, key, found);
    return em_sym_contains_known(T, c, key, found);
}

/* True for objects whose type has no number, mapping or sequence slots, and for modules,
 * functions and classes; others would run their __bool__ or __len__. */
static EmStatus obj_truth(EmTracer *T, EmSym *s, int *out) {
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

static EmStatus new_contains(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    EmSym *r = NULL;
    EmStatus st = em_call_dunder(T, c, "__contains__", &key, 1, &r);
    if (st != EM_OK) return st;
    if (r->kind != SYM_CONST || !PyBool_Check(r->obj)) return em_trace_fail(T, EMA_VALUE, "__contains__ result");
    *found = r->obj == Py_True;
    return EM_OK;
}

/* True without __bool__ and __len__; dict's own __len__ for a dict subclass's instance. */
static EmStatus new_truth(EmTracer *T, EmSym *s, int *out) {
    PyTypeObject *tp = Py_TYPE(s->obj);
    PyObject *b = _PyType_Lookup(tp, EM_STR(dunder_bool)), *l = _PyType_Lookup(tp, EM_STR(dunder_len));
    if (!b && !l) {
        *out = 1;
        return EM_OK;
    }
    if (!b && s->items.len > 1 && !PyFunction_Check(l)) { /* dict's own __len__ */
        *out = s->items.data[1]->items.len > 0;
        return EM_OK;
    }
    return em_trace_fail(T, EMA_VALUE, "truth value of a %s", tp->tp_name);
}

const EmSymOps em_new_ops = {
    .getattr = em_sym_new_attr,
    .getitem = new_getitem,
    .setitem = new_setitem,
    .contains = new_contains,
    .truth = new_truth,
    .items = obj_items,
};
