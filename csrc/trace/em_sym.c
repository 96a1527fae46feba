/* em_sym.c: symbolic values. Wrapping a real object read from the frame (installing the
 * guards the trace relies on), constants, tensors with their meta tensors and devices,
 * attribute loads (each kind's getattr slot, em_sym_ops.h), and conversion of syms into graph
 * arguments.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

EmSym *em_sym_new(EmTracer *T, EmSymKind kind) {
    EmSym *s = calloc(1, sizeof(EmSym));
    if (!s || em_vec_push(&T->syms, s)) {
        free(s);
        PyErr_NoMemory();
        return NULL;
    }
    s->kind = (uint8_t)kind;
    s->src = -1;
    s->ref = -1;
    s->out_at = -1;
    return s;
}

EmSym *em_sym_const(EmTracer *T, PyObject *v) {
    EmSym *s = em_sym_new(T, SYM_CONST);
    if (s) s->obj = Py_NewRef(v);
    return s;
}

EmSym *em_sym_null(EmTracer *T) { return em_sym_new(T, SYM_NULL); }

EmStatus em_sym_method(EmTracer *T, PyObject *fn, EmSym *self, int method, EmSym **out, EmSym **selfp) {
    EmSym *f = em_sym_new(T, SYM_OBJ);
    if (!f) return EM_ERR;
    f->obj = Py_NewRef(fn);
    f->by_id = 1;
    if (method) {
        *out = f;
        *selfp = self;
        return EM_OK;
    }
    EmSym *b = em_sym_new(T, SYM_BOUND);
    if (!b || em_vec_push(&b->items, self) || em_vec_push(&b->items, f)) return b ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    *out = b;
    return EM_OK;
}

const char *em_sym_describe(EmSym *s) {
    static const char *names[] = {"NULL",
                                  "constant",
                                  "tensor",
                                  "tuple",
                                  "list",
                                  "dict",
                                  "object",
                                  "iterator",
                                  "context manager",
                                  "__exit__ of a with block",
                                  "bound method",
                                  "functools.partial",
                                  "object made while tracing",
                                  "dict view",
                                  "int (a symbolic size)",
                                  "slice (with a symbolic bound)",
                                  "float (a graph input)",
                                  "cell",
                                  "set (holding tensors or objects)",
                                  "traceback of an exception raised in the trace",
                                  "numpy ndarray",
                                  "number the graph computes (.item())"};
    if (s->kind == SYM_OBJ || s->kind == SYM_CONST || s->kind == SYM_NEW) return Py_TYPE(s->obj)->tp_name;
    return names[s->kind];
}

/* ---- constants: which Python values are immutable and known ---- */

/* t is (a subclass of) one of ember._rules.PURE_TYPES: by the type itself, no user code runs. */
static int pure_type(PyTypeObject *t) {
    PyObject *types = em_state.pure_types;
    for (Py_ssize_t i = 0; types && PyTuple_Check(types) && i < PyTuple_GET_SIZE(types); i++) {
        PyObject *c = PyTuple_GET_ITEM(types, i);
        if (PyType_Check(c) && PyType_IsSubtype(t, (PyTypeObject *)c)) return 1;
    }
    return 0;
}

static int is_pure(PyObject *v, int depth);

/* An item a set may hold and stay a constant: a constant, or a class or function (hashed and
 * compared by identity; the guard's snapshot keeps it alive). */
static int set_item_pure(PyObject *k, int depth) {
    return (PyType_Check(k) && Py_TYPE(k)->tp_richcompare == PyType_Type.tp_richcompare &&
            Py_TYPE(k)->tp_hash == PyType_Type.tp_hash) ||
           PyFunction_Check(k) || PyCFunction_Check(k) || is_pure(k, depth);
}

static int is_pure(PyObject *v, int depth) {
    if (v == Py_None || v == Py_Ellipsis || v == Py_NotImplemented) return 1;
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || t == &PyUnicode_Type || t == &PyBytes_Type ||
        t == &PyComplex_Type || t == &PyRange_Type)
        return 1;
    if (t == &PySlice_Type) { /* slice(t, None) of a tensor t is no constant: its bound is t's value */
        PySliceObject *sl = (PySliceObject *)v;
        return depth <= 8 && is_pure(sl->start, depth + 1) && is_pure(sl->stop, depth + 1) &&
               is_pure(sl->step, depth + 1);
    }
    if (t == &PyFrozenSet_Type) { /* of constants, classes and functions (dataclasses' _ATOMIC_TYPES);
                                    * of tensors (hashed by identity) or other objects: not a constant */
        Py_ssize_t pos = 0;
        PyObject *k;
        Py_hash_t h;
        while (depth <= 8 && _PySet_NextEntry(v, &pos, &k, &h))
            if (!set_item_pure(k, depth + 1)) return 0;
        return depth <= 8;
    }
    if (PyTuple_Check(v)) {
        if (depth > 8) return 0;
        if (t != &PyTuple_Type && !pure_type(t))
            return 0; /* torch.Size is a pure tuple subclass; namedtuples are not */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++)
            if (!is_pure(PyTuple_GET_ITEM(v, i), depth + 1)) return 0;
        return 1;
    }
    return pure_type(t);
}

int em_sym_placeholder(const EmSym *s) {
    return s->kind == SYM_OBJ && s->src < 0 && !s->by_id && PyFunction_Check(s->obj);
}

static EM_NEW PyObject *sym_value_at(EmTracer *T, EmSym *s, int depth, long *left) {
    if (depth > EM_MAX_NEST || --*left < 0 || em_sym_placeholder(s)) return NULL;
    switch (s->kind) {
        case SYM_OBJ: /* a nested function's cells are those of the function each call passes */
            if (s->by_id == 2 && ((PyFunctionObject *)s->obj)->func_closure) return NULL;
            if (em_weakref_made(s)) return NULL; /* each call's referent: not the one seen now */
            return Py_NewRef(s->obj);
        case SYM_CONST: return Py_NewRef(s->obj);
        case SYM_INT: return em_int_value(T, s); /* its value is used: pinned */
        case SYM_FLOAT: return em_float_pin(T, s) == EM_OK ? Py_NewRef(s->obj) : NULL;
        case SYM_SLICE: return em_slice_value(T, s);
        case SYM_TUPLE:
        case SYM_LIST: {
            PyObject *r = s->kind == SYM_TUPLE ? PyTuple_New(s->items.len) : PyList_New(s->items.len);
            if (!r) return NULL;
            for (int32_t i = 0; i < s->items.len; i++) {
                PyObject *v = sym_value_at(T, s->items.data[i], depth + 1, left);
                if (!v) {
                    Py_DECREF(r);
                    return NULL;
                }
                if (s->kind == SYM_TUPLE) PyTuple_SET_ITEM(r, i, v);
                else PyList_SET_ITEM(r, i, v);
            }
            if (s->kind == SYM_TUPLE && s->seq_type) {
                PyObject *t = em_seq_retype(s->seq_type, r);
                if (!t) PyErr_Clear(); /* its type refused these values: not a known value (NULL, no error) */
                return t;
            }
            if (s->kind == SYM_LIST && s->seq_type) return em_deque_from(s, r); /* str(d) is "deque([...])" */
            return r;
        }
        case SYM_VIEW: { /* a view of a dict of known values, as the dict holds them now */
            EmSym *d = s->items.data[0];
            PyObject *dv = PyDict_New();
            for (int32_t i = 0; dv && i < d->items.len; i++) {
                PyObject *v = s->pos == 'k' ? Py_NewRef(Py_None) : sym_value_at(T, d->items.data[i], depth + 1, left);
                if (!v || em_key_token_sym(d->keys.data[i]) || PyDict_SetItem(dv, d->keys.data[i], v)) Py_CLEAR(dv);
                Py_XDECREF(v);
            }
            PyObject *r = dv ? em_view_of(s, dv) : NULL;
            Py_XDECREF(dv);
            return r;
        }
        default: return NULL;
    }
}

EM_NEW PyObject *em_seq_retype(PyObject *seq_type, EM_STEALS PyObject *items) {
    /* namedtuples take fields, structseqs (and torch.Size) a sequence */
    PyObject *t = em_is_namedtuple_type((PyTypeObject *)seq_type) ? PyObject_CallMethod(seq_type, "_make", "(O)", items)
                                                                  : PyObject_CallOneArg(seq_type, items);
    Py_DECREF(items);
    return t;
}

EM_NEW PyObject *em_sym_value(EmTracer *T, EmSym *s) {
    long left = EM_MAX_WALK;
    return sym_value_at(T, s, 0, &left);
}

int em_is_pure(PyObject *v) { return is_pure(v, 0); }

/* A tuple (a namedtuple too) that hashes and compares as its tuple of constants, classes and
 * functions (re's cache key (type(p), p, flags)): as a dict key or set item it is that value. */
static int tuple_key(PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (!PyTuple_Check(v) || t->tp_hash != PyTuple_Type.tp_hash || t->tp_richcompare != PyTuple_Type.tp_richcompare)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++)
        if (!set_item_pure(PyTuple_GET_ITEM(v, i), 1)) return 0;
    return 1;
}

int em_sym_tuple_key(PyObject *v) { return tuple_key(v); }

EmSym *em_sym_hashable(EmTracer *T, EmSym *s) {
    if (s->kind != SYM_TUPLE) return s;
    PyObject *v = em_sym_value(T, s);
    if (!v) return PyErr_Occurred() ? NULL : s;
    EmSym *c = is_pure(v, 0) || tuple_key(v) ? em_sym_const(T, v) : s;
    Py_DECREF(v);
    return c;
}

/* ---- tensors ---- */

static int dev_code(PyObject *dev, int *type, int *index) {
    *type = -1;
    *index = -1;
    if (!dev) return 0;
    PyObject *t = PyObject_GetAttrString(dev, "type"), *i = PyObject_GetAttrString(dev, "index");
    if (!t || !i) {
        Py_XDECREF(t);
        Py_XDECREF(i);
        return -1;
    }
    const char *ts = PyUnicode_AsUTF8(t);
    if (ts) *type = em_dev_type_of(ts);
    if (i != Py_None) *index = (int)PyLong_AsLong(i);
    Py_DECREF(t);
    Py_DECREF(i);
    return PyErr_Occurred() ? -1 : 0;
}

/* Writes node metadata from a tensor (real or meta). */
static int set_meta(EmTracer *T, EmRef r, PyObject *t, PyObject *dev) {
    EmTensorSpec s;
    if (em_guard_tensor_read(t, &s)) return -1;
    int dt = s.dtype, dtype_num = -1, type, index;
    if (dt < 0) { /* fallback path: number from the dtype's position in ember's table */
        PyObject *n = PyObject_CallMethod(em_state.meta_run, "dtype_num", "O", s.py_dtype);
        if (n) dtype_num = (int)PyLong_AsLong(n);
        Py_XDECREF(n);
        PyErr_Clear(); /* a dtype past ember's table has no number: -1 */
        dt = dtype_num;
    }
    int rc = dev_code(dev, &type, &index);
    if (!rc) rc = em_ir_set_tensor(T->G, r, dt, type, index, s.requires_grad, s.ndim, s.sizes, s.strides);
    if (!rc && s.requires_grad && !T->grad && T->start_grad && T->G->nodes.data[r].op != EMOP_INPUT)
        rc = em_vec_push(&T->nograd_views, r);
    if (rc && !PyErr_Occurred()) PyErr_NoMemory();
    em_guard_tensor_spec_free(&s);
    return rc;
}

EmSym *em_sym_tensor(EmTracer *T, EmRef r, PyObject *m, PyObject *dev) {
    EmSym *s = em_sym_new(T, SYM_TENSOR);
    if (!s) return NULL;
    s->ref = r;
    s->obj = Py_NewRef(m);
    s->device = Py_NewRef(dev);
    if (set_meta(T, r, m, dev)) return NULL;
    return s;
}

/* Whether nodes a and b differ in sizes, strides or requires_grad. */
static int layout_differs(const EmGraph *G, EmRef a, EmRef b) {
    const EmNode *x = &G->nodes.data[a], *y = &G->nodes.data[b];
    if (x->ndim != y->ndim || x->requires_grad != y->requires_grad) return 1;
    for (int i = 0; i < x->ndim; i++)
        if (em_ir_sizes(G, x)[i] != em_ir_sizes(G, y)[i] || em_ir_strides(G, x)[i] != em_ir_strides(G, y)[i]) return 1;
    return 0;
}

int em_sym_retarget(EmTracer *T, EmSym *s, EmRef r, PyObject *m, PyObject *dev) {
    EmRef old = s->ref;
    s->ref = r;
    Py_SETREF(s->obj, Py_NewRef(m));
    Py_SETREF(s->device, Py_NewRef(dev));
    if (set_meta(T, r, m, dev)) return -1;
    return s->src >= 0 && layout_differs(T->G, old, r) ? em_trace_meta_changed(T, s) : 0;
}

int em_trace_meta_changed(EmTracer *T, EmSym *s) {
    for (int32_t i = 0; i < T->meta_mut.len; i++)
        if (T->meta_mut.data[i] == s) return 0;
    return em_vec_push(&T->meta_mut, s) ? (PyErr_NoMemory(), -1) : 0;
}

int em_trace_alias_guards(EmTracer *T) {
    for (int32_t i = 0; i < T->meta_mut.len; i++) {
        EmSym *m = T->meta_mut.data[i];
        for (int32_t j = 0; j < T->syms.len; j++) {
            EmSym *o = T->syms.data[j];
            if (o == m || o->kind != SYM_TENSOR || o->src < 0 || o->src == m->src) continue;
            if (em_guard_check(T->P, EMG_DISTINCT, m->src, NULL, o->src)) return -1;
        }
    }
    return 0;
}

PyObject *em_sym_meta(EmTracer *T, EmSym *s) {
    if (s->obj) return s->obj;
    /* inferred in C: make the meta tensor now (ember/_rules.py meta_empty) */
    const EmNode *n = &T->G->nodes.data[s->ref];
    PyObject *sizes = PyTuple_New(n->ndim), *strides = PyTuple_New(n->ndim);
    for (int i = 0; sizes && strides && i < n->ndim; i++) {
        PyTuple_SET_ITEM(sizes, i, PyLong_FromLongLong(em_ir_sizes(T->G, n)[i]));
        PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(em_ir_strides(T->G, n)[i]));
    }
    /* a view of a tensor that requires grad (record_inferred): meta_view of its meta */
    PyObject *base = s->of.len ? em_sym_meta(T, s->of.data[0]) : NULL;
    PyObject *name = PyUnicode_FromString(base ? "meta_view" : "meta_empty");
    if (sizes && strides && name && !PyErr_Occurred()) {
        PyObject *argv[6] = {
            em_state.meta_run, sizes, strides, PyLong_FromLong(n->dtype), PyBool_FromLong(n->requires_grad), base};
        if (argv[3] && argv[4])
            s->obj = PyObject_VectorcallMethod(name, argv, (base ? 6 : 5) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(argv[3]);
        Py_XDECREF(argv[4]);
    }
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    Py_XDECREF(name);
    return s->obj;
}

static EmSym *wrap_tensor(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    PyTypeObject *tp = Py_TYPE(v);
    if (tp != em_state.tensor_type && tp != em_state.param_type) {
        *st = em_trace_fail(T, EMA_INPUT, "tensor subclass %s", tp->tp_name);
        return NULL;
    }
    PyObject *m = PyObject_CallMethod(em_state.meta_run, "meta_like", "O", v);
    if (!m) {
        *st = em_trace_abandon(T, EMA_INPUT, "tensor that has no meta equivalent");
        return NULL;
    }
    PyObject *dev = PyObject_GetAttrString(v, "device");
    EmSym *s = NULL;
    int32_t label = -1;
    EmRef r = em_ir_node(T->G, EMOP_INPUT, 0, 0, -1, 0, -1);
    if (dev && r >= 0) {
        label = em_ir_text(T->G, T->P->names.data[slot]);
        T->G->nodes.data[r].aux = T->G->ninputs++;
        T->G->nodes.data[r].label = label;
        if (label >= 0 && em_vec_push(&T->input_slots, slot) == 0) s = em_sym_tensor(T, r, m, dev);
        else PyErr_NoMemory();
    } else if (dev) {
        PyErr_NoMemory();
    }
    Py_XDECREF(dev);
    Py_DECREF(m);
    if (!s) return NULL;
    s->src = slot;
    s->spec = Py_NewRef(v);
    EmStatus dst = EM_OK;
    uint64_t dyn = em_dyn_dims(T, v, slot, r, &dst);
    if (dst != EM_OK) {
        *st = dst;
        return NULL;
    }
    if (em_guard_check_tensor_dyn(T->P, slot, v, dyn)) return NULL;
    if (dyn && (*st = em_int_input_dims(T, r, slot, dyn)) != EM_OK) return NULL;
    if (dyn && (*st = em_dyn_ranges(T, v, r, dyn)) != EM_OK) return NULL;
    return s;
}

static int pure_set(PyObject *v) {
    Py_ssize_t pos = 0;
    PyObject *k;
    Py_hash_t h;
    while (_PySet_NextEntry(v, &pos, &k, &h))
        if (!set_item_pure(k, 1)) return 0;
    return 1;
}

/* A namedtuple class: a tuple subclass with _fields and _make, and tuple's own storage. */
int em_is_namedtuple_type(PyTypeObject *tp) {
    /* no instance dict (3.12 keeps a subclass's managed dict out of its basic size) */
    return PyType_IsSubtype(tp, &PyTuple_Type) && _PyType_Lookup(tp, EM_STR(fields)) &&
           _PyType_Lookup(tp, EM_STR(make)) && tp->tp_basicsize == PyTuple_Type.tp_basicsize && !tp->tp_dictoffset;
}

EmStatus em_tuple_field(EmTracer *T, PyObject *descr, EmSym *items, EmSym **out) {
    if (!descr || (PyObject *)Py_TYPE(descr) != EM_KNOWN(tuplegetter)) return CALL_NEXT;
    PyObject *red = PyObject_CallMethod(descr, "__reduce__", NULL); /* (type, (index, doc)) */
    PyObject *args = red && PyTuple_Check(red) && PyTuple_GET_SIZE(red) == 2 ? PyTuple_GET_ITEM(red, 1) : NULL;
    Py_ssize_t i = args && PyTuple_Check(args) && PyTuple_GET_SIZE(args) >= 1
                       ? PyNumber_AsSsize_t(PyTuple_GET_ITEM(args, 0), PyExc_OverflowError)
                       : -1;
    Py_XDECREF(red);
    if (PyErr_Occurred()) return EM_ERR;
    if (items->kind != SYM_TUPLE || i < 0)
        return em_trace_fail(T, EMA_ATTR, "a namedtuple field of %s", em_sym_describe(items));
    if (i >= items->items.len) { /* Python's own error for a tuple shorter than its fields */
        PyObject *msg = PyUnicode_FromString("tuple index out of range");
        EmStatus st = msg ? em_trace_raise_new(T, PyExc_IndexError, msg) : EM_ERR;
        Py_XDECREF(msg);
        return st;
    }
    *out = items->items.data[i];
    return EM_OK;
}

/* Wraps the object read from guard slot `slot`. Installs the guards that make its use sound:
 * tensors TENSOR_MATCH, constants EQUALS or ID, containers TYPE+LEN (items wrapped too),
 * modules and callables ID, other objects TYPE. */
/* A list, tuple or namedtuple read from slot: its type and length guarded, each item wrapped
 * from its own slot. NULL with *st set on failure. */
static EmSym *wrap_seq(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    PyTypeObject *tp = Py_TYPE(v);
    int is_list = tp == &PyList_Type;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    if (em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)tp, 0) || em_guard_check(T->P, EMG_LEN, slot, NULL, n))
        return NULL;
    EmSym *s = em_sym_new(T, is_list ? SYM_LIST : SYM_TUPLE);
    for (Py_ssize_t i = 0; s && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(v, i);
        int32_t islot = em_guard_item(T->P, slot, i, is_list);
        EmSym *is = islot < 0 ? NULL : em_sym_wrap(T, item, islot, st);
        if (!is || em_vec_push(&s->items, is)) s = NULL;
    }
    if (s && tp != &PyTuple_Type && tp != &PyList_Type) s->seq_type = Py_NewRef((PyObject *)tp);
    return s;
}

/* An exact collections.deque read from slot: a LIST sym (seq_type deque, spec its maxlen) of its
 * items, its length and maxlen guarded, each item through its index's slot; its changes are
 * written back after the graph (em_sym_mutable). NULL with *st set on failure. */
static EmSym *wrap_deque(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    PyTypeObject *tp = Py_TYPE(v);
    Py_ssize_t n = PyObject_Length(v);
    PyObject *max = n < 0 ? NULL : PyObject_GetAttrString(v, "maxlen");
    PyObject *mname = max ? PyUnicode_InternFromString("maxlen") : NULL;
    int32_t mslot = mname ? em_guard_attr(T->P, slot, mname) : -1;
    Py_XDECREF(mname);
    EmSym *s = mslot < 0 || em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)tp, 0) ||
                       em_guard_check(T->P, EMG_LEN, slot, NULL, n) || em_guard_check(T->P, EMG_EQ, mslot, max, 0)
                   ? NULL
                   : em_sym_new(T, SYM_LIST);
    if (s) {
        s->seq_type = Py_NewRef((PyObject *)tp);
        s->spec = max != Py_None ? Py_NewRef(max) : NULL;
    }
    Py_XDECREF(max);
    for (Py_ssize_t i = 0; s && i < n; i++) {
        PyObject *item = PySequence_GetItem(v, i);
        int32_t islot = item ? em_guard_deque_item(T->P, slot, i, (PyObject *)tp) : -1;
        EmSym *is = islot < 0 ? NULL : em_sym_wrap(T, item, islot, st);
        Py_XDECREF(item);
        if (!is || em_vec_push(&s->items, is)) s = NULL;
    }
    return s;
}

/* A dict read from slot: its type and keys (constants, in order) guarded, each value wrapped
 * from its own slot. A dict with another key (a tensor's: an optimizer's state) is an object
 * guarded by its type, looked up per key (em_lazy_dict_get, em_lazy_dict_get_keyed). NULL with
 * *st set on failure. */
static EmSym *wrap_dict(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    Py_ssize_t pos = 0;
    PyObject *k, *item;
    while (PyDict_Next(v, &pos, &k, &item))
        if (!is_pure(k, 0)) {
            if (em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)Py_TYPE(v), 0)) return NULL;
            EmSym *s = em_sym_new(T, SYM_OBJ);
            if (s) s->obj = Py_NewRef(v);
            return s;
        }
    if (em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)Py_TYPE(v), 0) || em_guard_check_keys(T->P, slot, v))
        return NULL;
    EmSym *s = em_sym_new(T, SYM_DICT);
    pos = 0;
    while (s && PyDict_Next(v, &pos, &k, &item)) {
        int32_t islot = em_guard_dict(T->P, slot, k);
        EmSym *is = islot < 0 ? NULL : em_sym_wrap(T, item, islot, st);
        if (!is || em_vec_push(&s->items, is) || em_vec_push(&s->keys, Py_NewRef(k))) s = NULL;
    }
    return s;
}

static EmSym *wrap_obj(EmTracer *T, PyObject *v, int32_t slot);

/* numpy.iinfo(dt): a new object per call, equal to none: guarded by its type and dtype. */
static EmSym *wrap_iinfo(EmTracer *T, PyObject *v, int32_t slot) {
    EmSym *s = NULL;
    PyObject *dt = PyObject_GetAttrString(v, "dtype"), *nm = dt ? PyUnicode_FromString("dtype") : NULL;
    int32_t ds = nm ? em_guard_attr(T->P, slot, nm) : -1;
    if (ds >= 0 && !em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)Py_TYPE(v), 0) &&
        !em_guard_check(T->P, EMG_EQ, ds, dt, 0))
        s = em_sym_const(T, v);
    Py_XDECREF(dt);
    Py_XDECREF(nm);
    return s;
}

/* v is a view of an exact dict */
static int is_dict_view(PyObject *v) {
    PyTypeObject *tp = Py_TYPE(v);
    if (tp == &PyDictProxy_Type) return PyDict_CheckExact(em_mappingproxy_mapping(v));
    return (tp == &PyDictKeys_Type || tp == &PyDictValues_Type || tp == &PyDictItems_Type) &&
           PyDict_CheckExact((PyObject *)((_PyDictViewObject *)v)->dv_dict);
}

/* A view of a dict read from slot (d.keys() passed in): the view over the dict, read through the
 * view's own slot as any dict of the frame; the view object itself where it leaves the trace.
 * A dict the trace reads as an object (keys it cannot hold) leaves the view an object. */
static EmSym *wrap_view(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    PyTypeObject *tp = Py_TYPE(v);
    if (em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)tp, 0)) return NULL;
    int32_t dslot = em_guard_view_dict(T->P, slot);
    int proxy = tp == &PyDictProxy_Type;
    PyObject *dict = proxy ? em_mappingproxy_mapping(v) : (PyObject *)((_PyDictViewObject *)v)->dv_dict;
    EmSym *d = dslot < 0 ? NULL : em_sym_wrap(T, dict, dslot, st);
    if (!d) return NULL;
    if (d->kind != SYM_DICT) return wrap_obj(T, v, slot);
    EmSym *s = em_sym_new(T, SYM_VIEW);
    if (!s || em_vec_push(&s->items, d)) return s ? (PyErr_NoMemory(), NULL) : NULL;
    s->pos = tp == &PyDictKeys_Type ? 'k' : tp == &PyDictValues_Type ? 'v' : proxy ? 'm' : 'i';
    if (proxy) s->src = slot; /* it leaves the trace as itself */
    return s;
}

/* The items of a list or tuple subclass's instance from the frame (em_frame_items): its type and
 * length guarded, each item through its index's slot; a list's changes are written back after
 * the graph. */
static EmStatus frame_list_items(EmTracer *T, EmSym *self, EmSym **out) {
    PyObject *v = self->obj;
    int is_list = PyList_Check(v); /* else a tuple subclass's: its items, immutable */
    Py_ssize_t n = is_list ? PyList_GET_SIZE(v) : PyTuple_GET_SIZE(v);
    if (em_guard_check(T->P, EMG_TYPE, self->src, (PyObject *)Py_TYPE(v), 0) ||
        em_guard_check(T->P, EMG_LEN, self->src, NULL, n))
        return EM_ERR;
    EmStatus st = EM_OK;
    EmSym *l = em_sym_new(T, is_list ? SYM_LIST : SYM_TUPLE);
    if (l && is_list) l->src = self->src; /* a tuple's items are a new tuple where they leave the trace */
    for (Py_ssize_t i = 0; l && i < n && i < (is_list ? PyList_GET_SIZE(v) : PyTuple_GET_SIZE(v)); i++) {
        int32_t islot = em_guard_item(T->P, self->src, i, is_list);
        PyObject *item = is_list ? PyList_GET_ITEM(v, i) : PyTuple_GET_ITEM(v, i);
        EmSym *is = islot < 0 ? NULL : em_sym_wrap(T, item, islot, &st);
        if (!is || em_vec_push(&l->items, is)) l = NULL;
    }
    if (!l) {
        if (st != EM_OK) return st;
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return EM_ERR;
    }
    *out = l;
    return EM_OK;
}

int em_dict_type_writable(PyTypeObject *tp) {
    static const char *const names[] = {"__setitem__",  "__delitem__", "__getitem__",  "__iter__", "__len__",
                                        "__contains__", "keys",        "values",       "items",    "get",
                                        "pop",          "setdefault",  "update",       "clear",    "popitem",
                                        "__ior__",      "__eq__",      "__reversed__", NULL};
    if (!PyType_IsSubtype(tp, &PyDict_Type) || tp == &PyDict_Type) return 0;
    PyTypeObject *base = PyType_IsSubtype(tp, &PyODict_Type) ? &PyODict_Type : &PyDict_Type;
    for (int i = 0; names[i]; i++) {
        PyObject *n = PyUnicode_InternFromString(names[i]);
        int same = n && _PyType_Lookup(tp, n) == _PyType_Lookup(base, n);
        Py_XDECREF(n);
        if (!same) return PyErr_Clear(), 0;
    }
    PyObject *missing = _PyType_Lookup(tp, EM_STR(dunder_missing));
    return !missing || missing == _PyType_Lookup((PyTypeObject *)EM_KNOWN(defaultdict), EM_STR(dunder_missing));
}

EmStatus em_frame_dict_items_rw(EmTracer *T, EmSym *s, int make, EmSym **out) {
    if (s->kind != SYM_OBJ || s->src < 0 || s->by_id || !PyDict_Check(s->obj) || PyDict_CheckExact(s->obj) ||
        !em_dict_type_writable(Py_TYPE(s->obj)))
        return CALL_NEXT;
    if (!make && !s->of.len) return CALL_NEXT;
    return em_frame_items(T, s, out);
}

int em_frame_dict_rw(const EmSym *s) {
    return s->kind == SYM_OBJ && s->src >= 0 && !s->by_id && s->of.len && s->of.data[0]->kind == SYM_DICT &&
           s->of.data[0]->pos == EM_POS_FRAME_ITEMS_RW;
}

/* Key k of a frame dict read whole into DICT sym d: itself when pure, else (em_identity_key) a token
 * of its sym, read through a constant slot (the keys guard pins the object). Borrowed; NULL with
 * *st set on failure. */
static PyObject *frame_key(EmTracer *T, EmSym *d, PyObject *k, EmStatus *st) {
    if (is_pure(k, 0)) return k;
    int32_t slot = em_guard_const(T->P, k, Py_TYPE(k)->tp_name);
    EmSym *ks = slot < 0 ? NULL : em_sym_wrap(T, k, slot, st);
    PyObject *key = NULL;
    if (!ks) return NULL;
    if (em_dict_key(T, d, ks, 1, &key, st) < 0) return NULL;
    return key;
}

/* The items of a dict subclass's instance (em_frame_items): its type and keys in its order
 * guarded, each value through its key's slot; changed by the trace only for a type
 * em_dict_type_writable takes (a defaultdict's factory read for its missing keys). */
static EmStatus frame_dict_items(EmTracer *T, EmSym *self, EmSym **out) {
    PyObject *v = self->obj, *keys = em_dict_keys_ordered(v);
    if (!keys) return EM_ERR;
    EmStatus st = EM_OK;
    for (Py_ssize_t i = 0; st == EM_OK && i < PyTuple_GET_SIZE(keys); i++)
        if (!is_pure(PyTuple_GET_ITEM(keys, i), 0) &&
            (PyType_Check(PyTuple_GET_ITEM(keys, i)) || !em_identity_key(PyTuple_GET_ITEM(keys, i))))
            st = em_trace_fail(T, EMA_VALUE, "the items of a %s keyed by a %s", Py_TYPE(v)->tp_name,
                               Py_TYPE(PyTuple_GET_ITEM(keys, i))->tp_name);
    if (st == EM_OK && (em_guard_check(T->P, EMG_TYPE, self->src, (PyObject *)Py_TYPE(v), 0) ||
                        em_guard_check_keys(T->P, self->src, v)))
        st = EM_ERR;
    EmSym *d = st == EM_OK ? em_sym_new(T, SYM_DICT) : NULL;
    if (d) {
        d->src = self->src;
        d->pos = em_dict_type_writable(Py_TYPE(v)) ? EM_POS_FRAME_ITEMS_RW : EM_POS_FRAME_ITEMS;
        if (PyODict_Check(v)) d->seq_type = Py_NewRef(EM_KNOWN(OrderedDict));
    }
    if (d && d->pos == EM_POS_FRAME_ITEMS_RW && PyObject_TypeCheck(v, (PyTypeObject *)EM_KNOWN(defaultdict))) {
        PyObject *fname = PyUnicode_InternFromString("default_factory"); /* read for a missing key */
        EmSym *fac = NULL, *fself = NULL;
        st = fname ? em_sym_getattr(T, self, fname, 0, &fac, &fself) : EM_ERR;
        Py_XDECREF(fname);
        if (st != EM_OK || (!(fac->kind == SYM_CONST && fac->obj == Py_None) && em_vec_push(&d->of, fac))) d = NULL;
    }
    for (Py_ssize_t i = 0; d && i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i), *item = PyDict_GetItemWithError(v, k);
        int32_t islot = item ? em_guard_dict(T->P, self->src, k) : -1;
        EmSym *is = islot < 0 ? NULL : em_sym_wrap(T, item, islot, &st);
        PyObject *key = is ? frame_key(T, d, k, &st) : NULL; /* borrowed: a constant or a token */
        if (!key || em_vec_push(&d->items, is) || em_vec_push(&d->keys, Py_NewRef(key))) d = NULL;
    }
    Py_DECREF(keys);
    if (!d)
        return st != EM_OK ? st : PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "a dict changed while read");
    *out = d;
    return EM_OK;
}

/* The contents of a set or frozenset subclass's instance (em_frame_items): a constant set
 * (frozenset) of them, read-only, guarded by its type and its contents. */
static EmStatus frame_set_items(EmTracer *T, EmSym *self, EmSym **out) {
    PyObject *v = self->obj;
    if (!pure_set(v)) return em_trace_fail(T, EMA_VALUE, "a %s holding objects", Py_TYPE(v)->tp_name);
    if (em_guard_check(T->P, EMG_TYPE, self->src, (PyObject *)Py_TYPE(v), 0) ||
        em_guard_check(T->P, EMG_EQ, self->src, v, 0))
        return EM_ERR;
    PyObject *c = PySet_Check(v) ? PySet_New(v) : PyFrozenSet_New(v);
    EmSym *s = c ? em_sym_const(T, c) : NULL;
    Py_XDECREF(c);
    if (!s) return EM_ERR;
    s->src = self->src; /* a set of the frame: its read-only methods only (em_set_of_frame) */
    *out = s;
    return EM_OK;
}

EmStatus em_frame_items(EmTracer *T, EmSym *self, EmSym **out) {
    if (self->of.len) return (*out = self->of.data[0]), EM_OK;
    EmStatus st = PyList_Check(self->obj) || PyTuple_Check(self->obj) ? frame_list_items(T, self, out)
                  : PyAnySet_Check(self->obj)                         ? frame_set_items(T, self, out)
                                                                      : frame_dict_items(T, self, out);
    if (st == EM_OK && em_vec_push(&self->of, *out)) return PyErr_NoMemory(), EM_ERR;
    return st;
}

int em_frame_items_method(const EmSym *self, PyObject *fn) {
    if (self->kind != SYM_OBJ || self->src < 0 || self->by_id) return 0;
    if (!Py_IS_TYPE(fn, &PyMethodDescr_Type) && !Py_IS_TYPE(fn, &PyWrapperDescr_Type)) return 0;
    PyTypeObject *owner = PyDescr_TYPE(fn);
    if (PyList_Check(self->obj) && !PyList_CheckExact(self->obj)) return owner == &PyList_Type;
    if (PyTuple_Check(self->obj) && !PyTuple_CheckExact(self->obj)) return owner == &PyTuple_Type;
    if (PyAnySet_Check(self->obj)) /* a subclass's (exact sets are constants of the frame) */
        return !PySet_CheckExact(self->obj) && !PyFrozenSet_CheckExact(self->obj) &&
               PyObject_TypeCheck(self->obj, owner) && (owner == &PySet_Type || owner == &PyFrozenSet_Type) &&
               (Py_IS_TYPE(fn, &PyWrapperDescr_Type) || em_set_reads(fn));
    if (!PyDict_Check(self->obj) || (owner != &PyDict_Type && owner != &PyODict_Type)) return 0;
    if (em_dict_type_writable(Py_TYPE(self->obj))) return 1; /* its changes are written back */
    static const char *const reads[] = {"keys", "values",      "items",        "__iter__", "__len__",
                                        "get",  "__getitem__", "__contains__", NULL};
    for (int i = 0; reads[i]; i++)
        if (!PyUnicode_CompareWithASCIIString(PyDescr_NAME(fn), reads[i])) return 1;
    return 0;
}

/* A dict of str keys and pure values (keyword-only defaults compared by value). */
static int pure_dict(PyObject *d) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    if (!PyDict_CheckExact(d)) return 0;
    while (PyDict_Next(d, &pos, &k, &v))
        if (!PyUnicode_CheckExact(k) || !is_pure(v, 1)) return 0;
    return 1;
}

/* A nested function (made anew each time its def runs): guarded by its code and defaults
 * (EMG_FUNC), so each run's function passes; its cells are read through the slot
 * (em_inline.c). 0 or -1. */
static int guard_nested_function(EmTracer *T, PyFunctionObject *f, int32_t slot) {
    PyObject *d = f->func_defaults ? f->func_defaults : Py_None,
             *kd = f->func_kwdefaults ? f->func_kwdefaults : Py_None;
    long consts = (d != Py_None && is_pure(d, 0)) | (kd != Py_None && pure_dict(kd)) << 1;
    PyObject *spec = Py_BuildValue("(OOOl)", f->func_code, d, kd, consts);
    int rc = spec ? em_guard_check(T->P, EMG_FUNC, slot, spec, 0) : -1;
    Py_XDECREF(spec);
    return rc;
}

/* Any other object: modules, functions, classes and builtins guarded by identity (a nested
 * function by code: by_id 2), other objects by type. NULL on error. */
static EmSym *wrap_obj(EmTracer *T, PyObject *v, int32_t slot) {
    int by_id = PyModule_Check(v) || PyFunction_Check(v) || PyCFunction_Check(v) || PyType_Check(v) ||
                Py_IS_TYPE(v, &PyMethodDescr_Type) || Py_IS_TYPE(v, &PyWrapperDescr_Type) ||
                Py_IS_TYPE(v, &PyClassMethodDescr_Type);
    if (PyFunction_Check(v) && (((PyCodeObject *)((PyFunctionObject *)v)->func_code)->co_flags & CO_NESTED)) {
        if (guard_nested_function(T, (PyFunctionObject *)v, slot)) return NULL;
        by_id = 2;
    } else if (em_guard_check(T->P, by_id ? EMG_ID : EMG_TYPE, slot, by_id ? v : (PyObject *)Py_TYPE(v), 0)) {
        return NULL;
    }
    EmSym *s = em_sym_new(T, SYM_OBJ);
    if (s) {
        s->obj = Py_NewRef(v);
        s->by_id = (uint8_t)by_id;
    }
    return s;
}

/* Marks the container whose id is key while its items are wrapped (a cycle back to it
 * aborts). EM_OK, EM_ABORT (nested too deep) or EM_ERR. */
static EmStatus mark_wrapping(EmTracer *T, PyObject *key, PyTypeObject *tp) {
    if (T->wrap_depth >= EM_MAX_NEST)
        return em_trace_fail(T, EMA_INPUT, "%s nested more than %d deep", tp->tp_name, EM_MAX_NEST);
    PyObject *mark = PyLong_FromLong(-1);
    int bad = !mark || PyDict_SetItem(T->seen, key, mark);
    Py_XDECREF(mark);
    if (bad) return EM_ERR;
    T->wrap_depth++;
    return EM_OK;
}

/* An int or float argument whose value changed since the last compile (or any, with
 * dynamic=True): a SYM_INT or a SYM_FLOAT, read from its slot. NULL with *st
 * EM_OK when it stays a guarded constant. */
static EmSym *wrap_dyn_scalar(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    *st = EM_OK;
    if (T->dyn_mode != EM_DYN_AUTO && T->dyn_mode != EM_DYN_ALL) return NULL;
    int is_float = PyFloat_CheckExact(v);
    if (!is_float && !PyLong_CheckExact(v)) return NULL;
    int d = is_float ? em_dyn_float(T, v, slot) : em_dyn_int(T, v, slot);
    if (d < 0) return *st = EM_ERR, NULL;
    return !d ? NULL : is_float ? em_float_input(T, v, slot, st) : em_int_input(T, v, slot, st);
}

EmSym *em_sym_seen(EmTracer *T, PyObject *o) {
    PyObject *key = PyLong_FromVoidPtr(o);
    PyObject *idx = key ? PyDict_GetItemWithError(T->seen, key) : NULL;
    Py_XDECREF(key);
    long i = idx ? PyLong_AsLong(idx) : -1; /* -1: none, or being wrapped */
    return i >= 0 && i < T->syms.len ? T->syms.data[i] : NULL;
}

/* v reached again through slot, prev the sym made for it (*st is EM_ERR on entry): a constant
 * gets a sym per slot, guarded by value; anything else (a set the trace changed too) is prev,
 * the two slots guarded to hold the same object. */
static EmSym *wrap_seen(EmTracer *T, EmSym *prev, PyObject *v, int32_t slot, EmStatus *st) {
    if (prev->kind == SYM_CONST && !em_set_changed(prev)) {
        /* a constant is guarded by value, so each slot gets its own sym: an `is` between
         * two of them guards their identity (em_sym_is) */
        if (prev->src == slot || em_guard_check(T->P, EMG_EQ, slot, v, 0)) return prev->src == slot ? prev : NULL;
        EmSym *c = em_sym_const(T, v);
        if (c) c->src = slot;
        *st = c ? EM_OK : EM_ERR;
        return c;
    }
    if (prev->src >= 0 && prev->src != slot && em_guard_check(T->P, EMG_SAME, slot, NULL, prev->src)) return NULL;
    *st = EM_OK;
    return prev;
}

/* The sym of v, read from slot and not seen before, by its type (em_sym_wrap). NULL with *st. */
static EmSym *wrap_new(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    PyTypeObject *tp = Py_TYPE(v);
    if (PyObject_TypeCheck(v, em_state.tensor_type)) return wrap_tensor(T, v, slot, st);
    if (v == Py_None || v == Py_True || v == Py_False || v == Py_Ellipsis)
        return em_guard_check(T->P, EMG_ID, slot, v, 0) == 0 ? em_sym_const(T, v) : NULL;
    if (is_pure(v, 0) && !strcmp(tp->tp_name, "iinfo")) return wrap_iinfo(T, v, slot);
    if (is_pure(v, 0) || (PySet_CheckExact(v) && pure_set(v))) {
        /* a set of constants is guarded by its contents (the trace never mutates one it read) */
        return em_guard_check(T->P, EMG_EQ, slot, v, 0) == 0 ? em_sym_const(T, v) : NULL;
    }
    if (tp == &PyTuple_Type || tp == &PyList_Type || (PyTuple_Check(v) && em_is_namedtuple_type(tp)))
        return wrap_seq(T, v, slot, st);
    if (tp == &PyDict_Type) return wrap_dict(T, v, slot, st);
    if ((PyObject *)tp == EM_KNOWN(deque)) return wrap_deque(T, v, slot, st);
    if (is_dict_view(v)) return wrap_view(T, v, slot, st);
    if (tp == &PyListIter_Type || tp == &PyTupleIter_Type || tp == &PyRangeIter_Type) {
        /* its items read by the guard as the trace takes them, taken from it after the graph */
        return em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)tp, 0) ? NULL : em_lazy_peek_make(T, v);
    }
    EmSym *s = em_np_wrap(T, v, slot, st); /* an ndarray over the tensor that shares its memory */
    if (s || *st != EM_OK) return s;
    s = wrap_obj(T, v, slot);
    /* its class's attributes (or a class's own) as the trace resolves them */
    if (s && em_guard_class(T, PyType_Check(v) ? (PyTypeObject *)v : tp, st) != EM_OK) s = NULL;
    return s;
}

EmSym *em_sym_wrap(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    EmSym *n = wrap_dyn_scalar(T, v, slot, st);
    if (n || *st != EM_OK) return n;
    *st = EM_ERR;
    PyObject *key = PyLong_FromVoidPtr(v);
    if (!key) return NULL;
    PyObject *idx = PyDict_GetItemWithError(T->seen, key);
    if (idx && PyLong_AsLong(idx) < 0) { /* a container holding itself */
        Py_DECREF(key);
        *st = em_trace_fail(T, EMA_INPUT, "%s that holds itself", Py_TYPE(v)->tp_name);
        return NULL;
    }
    if (idx) {
        EmSym *prev = T->syms.data[PyLong_AsLong(idx)];
        Py_DECREF(key);
        return wrap_seen(T, prev, v, slot, st);
    }
    if (!idx && PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    PyTypeObject *tp = Py_TYPE(v);
    int container = tp == &PyTuple_Type || tp == &PyList_Type || tp == &PyDict_Type ||
                    (PyObject *)tp == EM_KNOWN(deque) || (PyTuple_Check(v) && em_is_namedtuple_type(tp));
    if (container && (*st = mark_wrapping(T, key, tp)) != EM_OK) {
        Py_DECREF(key);
        return NULL;
    }
    EmSym *s = wrap_new(T, v, slot, st);
    if (container) {
        T->wrap_depth--;
        if (!s) { /* forgotten: it is a constant when wrapped again; the failure's exception stays */
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            if (PyDict_DelItem(T->seen, key)) PyErr_Clear(); /* the key was put there above */
            PyErr_Restore(et, ev, tb);
        }
    }
    if (s) {
        if (s->src < 0) s->src = slot;
        /* remember which sym stands for this object (its index in T->syms) */
        int32_t at_i = T->syms.len - 1;
        while (at_i >= 0 && T->syms.data[at_i] != s) at_i--;
        PyObject *at = PyLong_FromLong(at_i);
        if (!at || PyDict_SetItem(T->seen, key, at)) s = NULL;
        Py_XDECREF(at);
        if (s) *st = EM_OK;
    } else if (*st == EM_ERR && !PyErr_Occurred()) {
        *st = EM_ABORT;
    }
    Py_DECREF(key);
    return s;
}

/* ---- graph arguments ---- */

static int32_t sym_arg_at(EmTracer *T, EmSym *s, EmStatus *st, int depth, long *left);

/* The graph argument of a CONST or OBJ sym: a constant of the graph. An object guarded by its
 * type only (its state unguarded) or a closure made while tracing aborts. -1 with *st set. */
static int32_t const_arg(EmTracer *T, EmSym *s, EmStatus *st) {
    if (s->kind == SYM_OBJ && s->items.len) { /* its closure lives in the trace only */
        *st = em_trace_fail(T, EMA_VALUE, "a closure made while tracing passed to an op");
        return -1;
    }
    if (em_sym_type_guarded(s)) { /* a module, a user object: it must not be baked into the graph */
        *st = em_trace_fail(T, EMA_VALUE, "%s instance passed to an op", Py_TYPE(s->obj)->tp_name);
        return -1;
    }
    PyObject *r = PyObject_Repr(s->obj);
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    if (!u) PyErr_Clear(); /* the text only labels the constant in dumps */
    EmConstKind k = s->obj == Py_None            ? EMC_NONE
                    : PyBool_Check(s->obj)       ? EMC_BOOL
                    : PyLong_CheckExact(s->obj)  ? EMC_INT
                    : PyFloat_CheckExact(s->obj) ? EMC_FLOAT
                                                 : EMC_OBJ;
    int overflow = 0; /* an int beyond int64 keeps only its object */
    int64_t iv = k == EMC_INT || k == EMC_BOOL ? PyLong_AsLongLongAndOverflow(s->obj, &overflow) : 0;
    double fv = k == EMC_FLOAT ? PyFloat_AS_DOUBLE(s->obj) : 0.0;
    int32_t c = em_ir_const(T->G, overflow ? EMC_OBJ : k, iv, fv, s->obj, u ? u : "<obj>");
    Py_XDECREF(r);
    if (c < 0) {
        *st = EM_ERR;
        PyErr_NoMemory();
        return -1;
    }
    return em_ir_arg(T->G, EMARG_CONST, c, 0);
}

/* The graph argument of a TUPLE or LIST sym: its items' arguments, contiguous (a namedtuple
 * must be a constant). -1 with *st set. */
static int32_t seq_arg(EmTracer *T, EmSym *s, EmStatus *st, int depth, long *left) {
    EmGraph *G = T->G;
    if (s->kind == SYM_TUPLE && s->seq_type && !(s->seq_type == EM_KNOWN(torch_Size) && em_int_active(T))) {
        PyObject *v = em_sym_value(T, s);
        if (v) {
            EmSym *c = em_sym_const(T, v);
            Py_DECREF(v);
            return c ? sym_arg_at(T, c, st, depth + 1, left) : -1;
        }
        *st = em_trace_fail(T, EMA_VALUE, "named tuple of tensors passed to an op");
        return -1;
    }
    /* children must be contiguous: convert each, then copy them to the end */
    int32_t n = s->items.len, first = -1;
    int32_t *tmp = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!tmp) return *st = EM_ERR, PyErr_NoMemory(), -1;
    for (int32_t i = 0; i < n; i++)
        if ((tmp[i] = sym_arg_at(T, s->items.data[i], st, depth + 1, left)) < 0) goto done;
    first = G->args.len;
    for (int32_t i = 0; i < n; i++) {
        EmArg a = G->args.data[tmp[i]];
        if (em_ir_arg(G, a.kind, a.v, a.n) < 0) {
            *st = EM_ERR;
            PyErr_NoMemory();
            first = -1;
            goto done;
        }
    }
done:
    free(tmp);
    return first < 0 ? -1 : em_ir_arg(G, s->kind == SYM_TUPLE ? EMARG_TUPLE : EMARG_LIST, first, n);
}

static int32_t sym_arg_at(EmTracer *T, EmSym *s, EmStatus *st, int depth, long *left) {
    if (depth > EM_MAX_NEST || --*left < 0) {
        *st = em_trace_fail(T, EMA_VALUE, "an op argument nested more than %d deep (or holding itself)", EM_MAX_NEST);
        return -1;
    }
    switch (s->kind) {
        case SYM_TENSOR: return em_ir_arg(T->G, EMARG_REF, s->ref, 0);
        case SYM_INT: {
            EmRef r = em_int_ref(T, s->expr, st);
            return r < 0 ? -1 : em_ir_arg(T->G, EMARG_REF, r, 0);
        }
        case SYM_SLICE: return em_slice_arg(T, s, st);
        case SYM_FLOAT: return em_float_arg(T, s, st);
        case SYM_ITEM: return em_item_arg(T, s, st);
        case SYM_CONST:
        case SYM_OBJ: return const_arg(T, s, st);
        case SYM_TUPLE:
        case SYM_LIST: return seq_arg(T, s, st, depth, left);
        default: *st = em_trace_fail(T, EMA_VALUE, "%s passed to an op", em_sym_describe(s)); return -1;
    }
}

int32_t em_sym_arg(EmTracer *T, EmSym *s, EmStatus *st) {
    long left = EM_MAX_WALK;
    return sym_arg_at(T, s, st, 0, &left);
}

/* ---- attributes ---- */

static EmSym *by_id_sym(EmTracer *T, PyObject *obj);

/* Attributes of a tensor that are state rather than metadata: x.data (x detached), x.grad (an
 * input's through a guarded slot), attributes stored on it in this trace or before it (an
 * input's own __dict__, through a guarded slot); else the abort. */
static EmStatus tensor_state_attr(EmTracer *T, EmSym *base, PyObject *name, const char *n, EmSym **out) {
    if (!strcmp(n, "data")) { /* x.data: x detached (the same storage), as x.detach() */
        PyObject *d = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "detach");
        EmSym *f = d ? by_id_sym(T, d) : NULL;
        EmStatus st = f ? em_call(T, f, base, NULL, 0, NULL, out) : EM_ERR;
        const EmNode *dn = st == EM_OK && (*out)->kind == SYM_TENSOR && (*out)->ref > base->ref
                               ? &T->G->nodes.data[(*out)->ref]
                               : NULL;
        if (dn && dn->op == EMOP_CALL && T->G->consts.data[dn->fn].obj == (void *)d &&
            em_vec_push(&T->data_nodes, (*out)->ref))
            st = (PyErr_NoMemory(), EM_ERR);
        Py_XDECREF(d);
        return st;
    }
    EmSym *stored = T->stores.len ? em_obj_stored(T, base, name) : NULL;
    if (stored) return (*out = stored), EM_OK; /* t.tag = v (or t.grad = v) earlier in this trace */
    if (!strcmp(n, "grad")) { /* an input's: read through a guarded slot (None, or a tensor input) */
        if (base->src < 0 || !base->spec) { /* made while tracing: no backward ran on it */
            *out = em_sym_const(T, Py_None);
            return *out ? EM_OK : EM_ERR;
        }
        int32_t slot = em_guard_attr(T->P, base->src, name);
        PyObject *g = slot < 0 ? NULL : PyObject_GetAttr(base->spec, name);
        EmStatus st = EM_ERR;
        *out = g ? em_sym_wrap(T, g, slot, &st) : NULL;
        Py_XDECREF(g);
        return *out ? EM_OK : st;
    }
    PyObject *own = base->spec && !_PyType_Lookup(Py_TYPE(base->spec), name) ? em_obj_dict(base->spec) : NULL;
    PyObject *v = own && PyDict_Check(own) ? PyDict_GetItemWithError(own, name) : NULL;
    if (v) { /* an input's own attribute (t.tag set before the call): read through a guarded slot */
        int32_t slot = em_guard_attr(T->P, base->src, name);
        EmStatus st = EM_ERR;
        *out = slot < 0 ? NULL : em_sym_wrap(T, v, slot, &st);
        return *out ? EM_OK : st;
    }
    if (PyErr_Occurred()) return EM_ERR;
    return em_trace_fail(T, EMA_ATTR, "Tensor.%s", n);
}

EmStatus em_sym_tensor_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    PyObject *m = em_sym_meta(T, base);
    if (!m) return EM_ERR;
    {
        /* x.view(...): the unbound method from the type, self = x (x.view as a value: bound) */
        PyObject *fn = _PyType_Lookup(Py_TYPE(m), name);
        if (fn && (method || PyFunction_Check(fn) || Py_IS_TYPE(fn, &PyMethodDescr_Type) ||
                   Py_IS_TYPE(fn, &PyWrapperDescr_Type)))
            return em_sym_method(T, fn, base, method, out, self);
    }
    if (!strcmp(n, "__class__")) return em_sym_type(T, base, out);
    if (!strcmp(n, "device")) {
        *out = em_sym_const(T, base->device);
        return *out ? EM_OK : EM_ERR;
    }
    if (!strcmp(n, "is_cuda") || !strcmp(n, "is_cpu") || !strcmp(n, "is_meta")) {
        PyObject *t = PyObject_GetAttrString(base->device, "type");
        if (!t) return EM_ERR;
        int eq = PyUnicode_CompareWithASCIIString(t, n + 3) == 0;
        Py_DECREF(t);
        *out = em_sym_const(T, eq ? Py_True : Py_False);
        return *out ? EM_OK : EM_ERR;
    }
    static const char *const meta_attrs[] = {"shape",     "dtype",        "ndim",     "requires_grad", "layout",
                                             "is_sparse", "is_quantized", "itemsize", "nbytes",        "is_leaf",
                                             "is_nested", "is_mkldnn",    NULL};
    static const char *const graph_attrs[] = {"T", "mT", "H", "mH", "real", "imag", NULL};
    /* grad_fn and is_leaf are not guarded: known for tensors that do not require grad and for
     * parameters made in the trace (leaves) */
    int leaf = !T->G->nodes.data[base->ref].requires_grad || (base->src < 0 && Py_IS_TYPE(m, em_state.param_type));
    if (!strcmp(n, "grad_fn")) {
        if (!leaf) return em_trace_fail(T, EMA_ATTR, "grad_fn of a tensor that requires grad");
        return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
    }
    for (int i = 0; meta_attrs[i]; i++)
        if (!strcmp(n, meta_attrs[i])) {
            if (!strcmp(n, "is_leaf") && (base->src < 0 ? !leaf : T->G->nodes.data[base->ref].requires_grad))
                return em_trace_fail(T, EMA_ATTR, "is_leaf of a tensor that requires grad");
            if (em_int_active(T) && em_node_has_sym_dims(T, base->ref) && !strcmp(n, "shape"))
                return em_tensor_shape(T, base, out);
            if (em_int_active(T) && em_node_has_sym_dims(T, base->ref) && !strcmp(n, "nbytes")) {
                EmStatus pst = em_node_specialize(T, base->ref); /* of the traced sizes */
                if (pst != EM_OK) return pst;
            }
            PyObject *v = PyObject_GetAttr(m, name);
            if (!v) return EM_ERR;
            *out = em_sym_const(T, v);
            Py_DECREF(v);
            return *out ? EM_OK : EM_ERR;
        }
    for (int i = 0; graph_attrs[i]; i++)
        if (!strcmp(n, graph_attrs[i])) {
            EmSym *args[1] = {base};
            return em_op_record(T, EMOP_GETATTR, name, args, 1, NULL, PyTuple_GET_ITEM(em_state.op_fns, EMOP_GETATTR),
                                out);
        }
    return tensor_state_attr(T, base, name, n, out);
}

/* Resolution on an object: instance dict, nn.Module parameters/buffers/modules, then the
 * type. Data descriptors on the type (properties) would run code: not supported yet. */
/* A class attribute `descr` found for instance sym base (type tp): functions become the
 * method (self = base), properties are inlined, static and class methods unwrapped. */
/* A classmethod wrapping a property: its __get__ gives the property's fget applied to the
 * class (CPython 3.11 and 3.12 chain the descriptors; 3.13 no longer does). */
static EmStatus class_property(EmTracer *T, EmSym *cls, PyObject *prop, const char *n, EmSym **out, EmSym **self) {
    PyObject *fget = PyObject_GetAttrString(prop, "fget");
    if (!fget) return EM_ERR;
    Py_DECREF(fget); /* kept alive by prop */
    if (!cls) return EM_ERR;
    if (!PyFunction_Check(fget)) return em_trace_fail(T, EMA_ATTR, "%s (a class property of a builtin)", n);
    *self = NULL;
    return em_inline(T, fget, &cls, 1, NULL, out);
}

static EmStatus class_attr(EmTracer *T, EmSym *base, PyTypeObject *tp, PyObject *descr, const char *n, int method,
                           EmSym **out, EmSym **self) {
    PyObject *fn = descr;
    EmSym *bound = base;
    if (Py_IS_TYPE(descr, &PyProperty_Type)) {
        PyObject *fget = PyObject_GetAttrString(descr, "fget");
        if (!fget) return EM_ERR;
        EmSym *g = PyFunction_Check(fget) || fget == Py_None ? NULL : em_sym_known(T, fget, "fget");
        EmStatus st = PyFunction_Check(fget) ? em_inline(T, fget, &base, 1, NULL, out)
                      : g                    ? em_call(T, g, NULL, &base, 1, NULL, out) /* a callable object */
                      : fget == Py_None
                          ? em_trace_fail(T, EMA_ATTR, "%s.%s (property without a getter)", tp->tp_name, n)
                          : EM_ERR;
        Py_DECREF(fget);
        return st;
    }
    if (Py_IS_TYPE(descr, &PyStaticMethod_Type) || Py_IS_TYPE(descr, &PyClassMethod_Type)) {
        int is_static = Py_IS_TYPE(descr, &PyStaticMethod_Type);
        PyObject *f = PyObject_GetAttrString(descr, "__func__");
        if (!f) return EM_ERR;
        Py_DECREF(f); /* kept alive by descr */
        if (!is_static && Py_IS_TYPE(f, &PyProperty_Type)) /* @classmethod over @property (3.11, 3.12) */
            return class_property(T, em_sym_known(T, (PyObject *)tp, tp->tp_name), f, n, out, self);
        if (!PyFunction_Check(f)) return em_trace_fail(T, EMA_ATTR, "%s.%s (wraps a builtin)", tp->tp_name, n);
        fn = f;
        bound = is_static ? NULL : em_sym_known(T, (PyObject *)tp, tp->tp_name);
        if (!is_static && !bound) return EM_ERR;
        if (!method && !is_static) return em_sym_method(T, fn, bound, 0, out, self);
    } else if (descr == em_state.object_getattribute || PyFunction_Check(descr) ||
               Py_IS_TYPE(descr, &PyMethodDescr_Type) || Py_IS_TYPE(descr, &PyWrapperDescr_Type) ||
               Py_IS_TYPE(descr, (PyTypeObject *)EM_KNOWN(lru_wrapper))) { /* its __get__ binds as a function's */
        if (!method) return em_sym_method(T, fn, bound, 0, out, self);
    } else if (em_user_descr_method(descr, EM_STR(dunder_get)) && base->kind == SYM_OBJ && base->src >= 0) {
        /* a non-data descriptor of a Python class the instance dict did not answer: its __get__ */
        EmSym *args[3] = {em_sym_known(T, descr, n), base, em_sym_known(T, (PyObject *)tp, tp->tp_name)};
        return args[0] && args[2] ? em_inline(T, em_user_descr_method(descr, EM_STR(dunder_get)), args, 3, NULL, out)
                                  : EM_ERR;
    } else {
        return em_trace_fail(T, EMA_ATTR, "%s.%s (descriptor)", tp->tp_name, n);
    }
    EmSym *f = em_sym_new(T, SYM_OBJ);
    if (!f) return EM_ERR;
    f->obj = Py_NewRef(fn);
    *out = f;
    *self = bound;
    return EM_OK;
}

/* Attribute of super(cls, obj) (a sym made by em_super: items[0] is obj's sym): looked up
 * in type(obj).__mro__ after cls. */
static EmStatus super_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    PyObject *sup = base->obj, *cls = PyObject_GetAttrString(sup, "__thisclass__");
    EmSym *obj = base->items.data[0];
    const char *n = PyUnicode_AsUTF8(name);
    if (!cls || !n) return EM_ERR;
    Py_DECREF(cls); /* kept alive by sup */
    /* super(cls, C) of a class C (in a classmethod): C's MRO, functions unbound */
    int of_class = PyType_Check(obj->obj) && PyType_IsSubtype((PyTypeObject *)obj->obj, (PyTypeObject *)cls);
    PyTypeObject *tp = of_class ? (PyTypeObject *)obj->obj : Py_TYPE(obj->obj);
    PyObject *mro = tp->tp_mro;
    Py_ssize_t i = 0, nm = mro ? PyTuple_GET_SIZE(mro) : 0;
    while (i < nm && PyTuple_GET_ITEM(mro, i) != cls) i++;
    for (i++; i < nm; i++) {
        PyTypeObject *owner = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *d = em_type_dict(owner);
        PyObject *v = d ? PyDict_GetItemWithError(d, name) : NULL;
        if (!v && PyErr_Occurred()) return EM_ERR;
        if (!v) continue;
        if (PyCFunction_Check(v) && !PyUnicode_CompareWithASCIIString(name, "__new__")) { /* object.__new__ */
            *self = NULL;
            EmSym *f = em_sym_new(T, SYM_OBJ);
            if (f) f->obj = Py_NewRef(v);
            return (*out = f) ? EM_OK : EM_ERR;
        }
        if (is_pure(v, 0) || (of_class && PyFunction_Check(v))) { /* a class constant; an unbound function */
            EmSym *os = em_sym_known(T, (PyObject *)owner, owner->tp_name);
            int32_t slot = os ? em_guard_odict(T->P, os->src, name) : -1;
            if (slot < 0) return EM_ERR;
            EmStatus st = EM_ERR;
            *self = NULL;
            *out = em_sym_wrap(T, v, slot, &st); /* the entry's value guarded */
            return *out ? EM_OK : st;
        }
        return class_attr(T, obj, tp, v, n, method, out, self);
    }
    return em_trace_fail(T, EMA_ATTR, "super().%s (not found)", n);
}

EmStatus em_super(EmTracer *T, EmSym *cls, EmSym *obj, EmSym **out) {
    if ((cls->kind != SYM_CONST && cls->kind != SYM_OBJ) || !PyType_Check(cls->obj) ||
        (obj->kind != SYM_OBJ && obj->kind != SYM_NEW && !(obj->kind == SYM_CONST && PyType_Check(obj->obj))))
        return em_trace_fail(T, EMA_CALL, "super() of a %s", em_sym_describe(obj));
    PyObject *sup = PyObject_CallFunctionObjArgs((PyObject *)&PySuper_Type, cls->obj, obj->obj, NULL);
    if (!sup) {
        return em_trace_abandon(T, EMA_CALL, "super() on these arguments");
    }
    EmSym *s = em_sym_new(T, SYM_OBJ);
    if (!s || em_vec_push(&s->items, obj)) {
        Py_DECREF(sup);
        return s ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    }
    s->obj = sup;
    *out = s;
    return EM_OK;
}

/* Inlines hook(base, name) for a type's Python __getattribute__ or __getattr__; a builtin's
 * method as __getattr__ (`__getattr__ = dict.__getitem__`) is called as one. */
static EmStatus inline_attr_hook(EmTracer *T, PyObject *hook, EmSym *base, PyObject *name, EmSym **out) {
    EmSym *args[2] = {base, em_sym_const(T, name)};
    if (!args[1]) return EM_ERR;
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *gattr = hook == _PyType_Lookup(tp, EM_STR(dunder_getattribute))
                          ? _PyType_Lookup(tp, EM_STR(dunder_getattr))
                          : NULL;
    if (PyFunction_Check(hook) && gattr && PyFunction_Check(gattr)) {
        /* as CPython's slot: an AttributeError of __getattribute__ asks __getattr__ */
        EmStatus st = em_inline(T, hook, args, 2, NULL, out);
        if (st != EM_ABORT || !T->exc || !PyErr_GivenExceptionMatches(T->exc, PyExc_AttributeError)) return st;
        Py_CLEAR(T->exc);
        return em_inline(T, gattr, args, 2, NULL, out);
    }
    if (PyFunction_Check(hook)) return em_inline(T, hook, args, 2, NULL, out);
    EmSym *f = em_sym_const(T, hook);
    return f ? em_call(T, f, NULL, args, 2, NULL, out) : EM_ERR;
}

static EmStatus obj_attr_impl(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self,
                              int generic);
static EmStatus new_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self, int generic);

/* A sym for an object whose identity the trace already knows (the type of a guarded
 * instance, a class found in a guarded class's MRO): its slot is a constant, so attribute
 * reads through it are guarded like those of any input. */
EmSym *em_sym_known(EmTracer *T, PyObject *EM_BORROWED obj, const char *label) {
    int32_t slot = em_guard_const(T->P, obj, label);
    if (slot < 0) return NULL;
    EmSym *s = em_sym_new(T, SYM_OBJ);
    if (!s) return NULL;
    s->obj = Py_NewRef(obj);
    s->by_id = 1;
    s->src = slot;
    return s;
}

static EmStatus known_out(EmTracer *T, PyObject *obj, const char *label, EmSym **out) {
    *out = em_sym_known(T, obj, label);
    return *out ? EM_OK : EM_ERR;
}

int em_dict_find(EmSym *d, PyObject *key) {
    for (int32_t i = 0; i < d->keys.len; i++) {
        int eq = PyObject_RichCompareBool(d->keys.data[i], key, Py_EQ);
        if (eq) return eq < 0 ? -2 : i;
    }
    return -1;
}

EmStatus em_dict_set(EmSym *d, PyObject *key, EmSym *v) {
    int i = em_dict_find(d, key);
    if (i == -2) return EM_ERR;
    d->mver++;
    if (i >= 0) {
        d->items.data[i] = v;
        return EM_OK;
    }
    if (em_vec_push(&d->keys, Py_NewRef(key)) || em_vec_push(&d->items, v)) return PyErr_NoMemory(), EM_ERR;
    d->kver++;
    return EM_OK;
}

/* ---- keys of dict syms that are objects hashed by identity (tensors, modules, instances) ----
 * Such a key is a token in the dict's keys: a capsule naming the key's sym, compared with the
 * others by identity; lookups compare tokens' syms with em_sym_is. Tokens never leave the trace:
 * values of dicts holding them are not known (em_sym_value, meta values), outputs rebuild them
 * from their syms. */
static const char key_token_name[] = "ember.dict_key";
/* A key hashed by its class's Python __hash__ (a frozen dataclass made while tracing): a token
 * of this name, its context the hash the key had when stored (as CPython keeps it). */
static const char value_token_name[] = "ember.dict_value_key";

EmSym *em_key_token_sym(PyObject *key) {
    if (!PyCapsule_CheckExact(key)) return NULL;
    if (PyCapsule_IsValid(key, key_token_name)) return (EmSym *)PyCapsule_GetPointer(key, key_token_name);
    return PyCapsule_IsValid(key, value_token_name) ? (EmSym *)PyCapsule_GetPointer(key, value_token_name) : NULL;
}

/* The hash a dict key has: a value token's stored hash, a constant's own; 0 (no error set) for
 * an identity token, whose hash no value key can share. */
static int key_hash(PyObject *key, Py_hash_t *h) {
    if (PyCapsule_CheckExact(key)) {
        if (!PyCapsule_IsValid(key, value_token_name)) return 0;
        *h = (Py_hash_t)(intptr_t)PyCapsule_GetContext(key);
        return 1;
    }
    *h = PyObject_Hash(key);
    if (*h == -1) PyErr_Clear();
    return *h != -1;
}

int em_value_hashed(const EmSym *k) {
    /* an object guarded by identity only is not: its hash would be taken once, unguarded */
    if (k->kind != SYM_NEW && (k->kind != SYM_OBJ || k->src < 0 || k->by_id || PyType_Check(k->obj))) return 0;
    PyTypeObject *tp = Py_TYPE(k->obj);
    PyObject *h = _PyType_Lookup(tp, EM_STR(dunder_hash));
    if (h && PyFunction_Check(h)) return 1;
    return (PyType_IsSubtype(tp, &PyTuple_Type) && h == _PyType_Lookup(&PyTuple_Type, EM_STR(dunder_hash))) ||
           (PyType_IsSubtype(tp, &PyFrozenSet_Type) && h == _PyType_Lookup(&PyFrozenSet_Type, EM_STR(dunder_hash)));
}

/* Python's lookup of key k hashed h among d's keys: the first stored key of hash h that is k
 * or compares equal to it (the stored key's __eq__ first, traced). Its index, -1 none, -2 with
 * *st set on an abort or error. */
static int32_t value_lookup(EmTracer *T, EmSym *d, EmSym *k, Py_hash_t h, EmStatus *st) {
    for (int32_t i = 0; i < d->keys.len; i++) {
        PyObject *kk = d->keys.data[i];
        Py_hash_t kh;
        if (em_key_token_sym(kk) == k) return i;
        if (!key_hash(kk, &kh) || kh != h) continue;
        EmSym *stored = em_dict_key_sym(T, kk);
        int eq = 0;
        if (!stored) return *st = EM_ERR, -2;
        int tuples = (em_set_item_kind(stored) == 2) + (em_set_item_kind(k) == 2);
        if (tuples == 1) continue; /* a tuple and an object: their real hashes differ */
        *st = tuples ? em_sym_items_eq(T, stored, k, 1, &eq) : em_sym_eq_truth(T, stored, k, &eq);
        if (*st == CALL_NEXT) *st = em_trace_fail(T, EMA_VALUE, "dict key %s", em_sym_describe(k));
        if (*st != EM_OK) return -2;
        if (eq) return i;
    }
    return -1;
}

static Py_hash_t tuple_key_hash_at(const EmSym *k, int depth) {
    Py_uhash_t acc = 0x27d4eb2f165667c5ULL;
    for (int32_t i = 0; i < k->items.len; i++) {
        const EmSym *it = k->items.data[i];
        Py_hash_t ih = it->kind == SYM_CONST                          ? PyObject_Hash(it->obj)
                       : it->kind == SYM_TUPLE && depth < EM_MAX_NEST ? tuple_key_hash_at(it, depth + 1)
                                                                      : 0x5bd1e995; /* hashed by identity */
        if (ih == -1) return -1;
        acc = (acc ^ (Py_uhash_t)ih) * 1000003ULL;
    }
    return acc == (Py_uhash_t)-1 ? 1546275796 : (Py_hash_t)acc;
}

int em_tuple_key_hash(const EmSym *k, Py_hash_t *h) {
    *h = tuple_key_hash_at(k, 0);
    return *h == -1 ? -1 : 0;
}

int em_value_hash(EmTracer *T, EmSym *k, Py_hash_t *h, EmStatus *st) {
    if (em_set_item_kind(k) == 2)
        return em_tuple_key_hash(k, h) ? (*st = em_trace_raise_pending(T, "unhashable dict key"), -1) : 0;
    EmSym *hf = em_sym_known(T, EM_KNOWN(hash), "hash"), *hv = NULL;
    if ((*st = hf ? em_call(T, hf, NULL, &k, 1, NULL, &hv) : EM_ERR) != EM_OK) return -1;
    if (hv->kind != SYM_CONST || !PyLong_CheckExact(hv->obj))
        return *st = em_trace_fail(T, EMA_VALUE, "dict key %s hashed to %s", em_sym_describe(k), em_sym_describe(hv)),
               -1;
    *h = PyLong_AsSsize_t(hv->obj);
    return *h == -1 && PyErr_Occurred() ? (*st = EM_ERR, -1) : 0;
}

/* em_dict_key of a key hashed by value (value_hashed, a tuple of objects compared by identity):
 * its hash (em_value_hash), then value_lookup. */
static int value_key(EmTracer *T, EmSym *d, EmSym *k, int make, PyObject **key, EmStatus *st) {
    Py_hash_t h;
    if (em_value_hash(T, k, &h, st)) return -1;
    int32_t i = value_lookup(T, d, k, h, st);
    if (i == -2 && *st == EM_OK) *st = EM_ERR;
    if (i != -1) return i == -2 ? -1 : ((*key = d->keys.data[i]), 0);
    if (!make) return 1;
    PyObject *tok = PyCapsule_New(k, value_token_name, NULL);
    if (!tok || PyCapsule_SetContext(tok, (void *)(intptr_t)h) ||
        (!T->key_tokens && !(T->key_tokens = PyList_New(0))) || PyList_Append(T->key_tokens, tok)) {
        Py_XDECREF(tok);
        return *st = EM_ERR, -1;
    }
    Py_DECREF(tok); /* T->key_tokens holds it */
    *key = tok;
    return 0;
}

/* A constant key k of dict d: a stored value key of the same hash that compares equal to it
 * (`d[(1, 2)]` finding a key whose __eq__ takes tuples) is the key found, else k itself. */
static int const_key(EmTracer *T, EmSym *d, EmSym *k, PyObject **key, EmStatus *st) {
    *key = k->obj;
    int tokens = 0;
    for (int32_t i = 0; !tokens && i < d->keys.len; i++) tokens = PyCapsule_IsValid(d->keys.data[i], value_token_name);
    Py_hash_t h;
    if (!tokens || !key_hash(k->obj, &h)) return 0;
    for (int32_t i = 0; i < d->keys.len; i++) {
        Py_hash_t kh;
        if (!PyCapsule_IsValid(d->keys.data[i], value_token_name) || !key_hash(d->keys.data[i], &kh) || kh != h)
            continue;
        int eq = 0;
        EmSym *stored = em_key_token_sym(d->keys.data[i]);
        *st = em_set_item_kind(stored) == 2 ? em_sym_items_eq(T, stored, k, 1, &eq)
                                            : em_sym_eq_truth(T, stored, k, &eq);
        if (*st == CALL_NEXT) *st = em_trace_fail(T, EMA_VALUE, "dict key %s", em_sym_describe(k));
        if (*st != EM_OK) return -1;
        if (eq) return (*key = d->keys.data[i]), 0;
    }
    return 0;
}

EmSym *em_dict_key_sym(EmTracer *T, PyObject *key) {
    EmSym *t = em_key_token_sym(key);
    return t ? t : em_sym_const(T, key);
}

int em_dict_has_tokens(const EmSym *d) {
    for (int32_t i = 0; i < d->keys.len; i++)
        if (em_key_token_sym(d->keys.data[i])) return 1;
    return 0;
}

int em_dict_key(EmTracer *T, EmSym *d, EmSym *k, int make, PyObject **key, EmStatus *st) {
    *st = EM_OK;
    *key = NULL;
    if (!(k = em_sym_hashable(T, k))) return *st = EM_ERR, -1;
    if (k->kind == SYM_CONST && (*st = em_unhashable(T, k)) != CALL_NEXT) return -1; /* a set */
    *st = EM_OK;
    if (k->kind == SYM_CONST) return const_key(T, d, k, key, st);
    if (em_set_item_kind(k) == 2 || (em_set_item_kind(k) != 1 && em_value_hashed(k)))
        return value_key(T, d, k, make, key, st);
    if (em_set_item_kind(k) != 1) {
        *st = em_unhashable(T, k);
        if (*st == CALL_NEXT) *st = em_trace_fail(T, EMA_VALUE, "dict key %s", em_sym_describe(k));
        return -1;
    }
    for (int32_t i = 0; i < d->keys.len; i++) {
        EmSym *t = em_key_token_sym(d->keys.data[i]);
        int same = 0;
        if (t && (*st = em_sym_is(T, t, k, &same)) != EM_OK) return -1;
        if (same) {
            *key = d->keys.data[i];
            return 0;
        }
    }
    if (!make) return 1;
    PyObject *tok = PyCapsule_New(k, key_token_name, NULL);
    if (!T->key_tokens && tok) T->key_tokens = PyList_New(0);
    if (!tok || !T->key_tokens || PyList_Append(T->key_tokens, tok)) {
        Py_XDECREF(tok);
        *st = EM_ERR;
        return -1;
    }
    Py_DECREF(tok); /* T->key_tokens holds it */
    *key = tok;
    return 0;
}

/* 1 when the trace may mutate container s: it was made while tracing, or it is the frame's
 * own **kwargs dict (a fresh dict no one else sees), which from then on is rebuilt in the
 * output tree like a dict made while tracing. 0 for other inputs. */
int em_sym_own(EmTracer *T, EmSym *s) {
    (void)T;
    if (s->src < 0) return 1;
    if (s->kind == SYM_DICT && s->pos == EM_POS_FRAME_KWARGS) {
        s->src = -1;
        s->out_at = -1;
        return 1;
    }
    return 0;
}

EmSym *em_sym_mutated_of(EmTracer *T, PyObject *o) {
    EmSym *s = T->mutated.len ? em_sym_seen(T, o) : NULL;
    for (int32_t i = 0; s && i < T->mutated.len; i++)
        if (T->mutated.data[i] == s) return s;
    if (PyErr_Occurred()) PyErr_Clear(); /* a lookup in T->seen: not found */
    return NULL;
}

/* name in the storage dicts of module o that the trace changed: 1 with *hit its value's sym, 0
 * when no changed dict holds it (*gone = 1 when one held it before the trace) */
static int module_changed_lookup(EmTracer *T, PyObject *o, PyObject *name, EmSym **hit, int *gone) {
    static const char *const tables[] = {"_parameters", "_buffers", "_modules", NULL};
    PyObject *od = em_obj_dict(o);
    *hit = NULL;
    *gone = 0;
    for (int t = 0; od && tables[t]; t++) {
        PyObject *tab = PyDict_GetItemString(od, tables[t]);
        EmSym *ms = tab && PyDict_Check(tab) ? em_sym_mutated_of(T, tab) : NULL;
        if (!ms) continue;
        int i = em_dict_find(ms, name);
        if (i == -2) return -1;
        if (i >= 0) {
            *hit = ms->items.data[i];
            return 1;
        }
        int had = PyDict_Contains(tab, name);
        if (had < 0) return -1;
        *gone |= had;
    }
    return 0;
}

int em_sym_mutable(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_DICT && s->seq_type == (PyObject *)&PyDictProxy_Type) return 0; /* a class's __dict__ */
    if (em_sym_own(T, s)) return 1;
    int rw = s->kind == SYM_DICT && s->pos == EM_POS_FRAME_ITEMS_RW; /* an OrderedDict's or defaultdict's too */
    int deque = s->kind == SYM_LIST && s->seq_type == EM_KNOWN(deque); /* a frame's exact deque (wrap_deque) */
    if ((s->kind != SYM_LIST && s->kind != SYM_DICT) || (s->seq_type && !rw && !deque) || s->src < 0 ||
        s->pos == EM_POS_FRAME_ITEMS)
        return 0;
    for (int32_t i = 0; i < T->mutated.len; i++)
        if (T->mutated.data[i] == s) return 1;
    return em_vec_push(&T->mutated, s) ? (PyErr_NoMemory(), -1) : 1;
}

/* key in d, d[key], d.get(key) on an exact dict read through a guard slot but not wrapped
 * whole (an instance __dict__): only the key's presence (LOAD_DICT) or absence (ABSENT) is
 * guarded. Sets *found; *out is the value's sym when found. */
EmStatus em_lazy_dict_get(EmTracer *T, EmSym *d, PyObject *key, int *found, EmSym **out) {
    *found = 0;
    *out = NULL;
    if (d->kind != SYM_OBJ || !PyDict_Check(d->obj) || d->src < 0)
        return em_trace_fail(T, EMA_VALUE, "lookup in %s", em_sym_describe(d));
    if (!PyDict_CheckExact(d->obj) && em_guard_check(T->P, EMG_TYPE, d->src, (PyObject *)Py_TYPE(d->obj), 0))
        return EM_ERR;
    if (!is_pure(key, 0) && !em_identity_key(key) && !tuple_key(key))
        return em_trace_fail(T, EMA_VALUE, "dict lookup by a %s", Py_TYPE(key)->tp_name);
    /* an instance's __dict__: the trace's stores on the instance (replayed after the graph) first */
    if (PyUnicode_Check(key) && (*out = em_obj_dict_stored(T, d->obj, key))) {
        *found = !em_store_deleted(*out);
        if (!*found) *out = NULL;
        return EM_OK;
    }
    PyObject *v = PyDict_GetItemWithError(d->obj, key);
    if (!v) {
        if (PyErr_Occurred()) return EM_ERR;
        return em_guard_check(T->P, EMG_ABSENT, d->src, key, 1) ? EM_ERR : EM_OK;
    }
    *found = 1;
    int32_t slot = em_guard_dict(T->P, d->src, key);
    if (slot < 0) return EM_ERR;
    EmStatus st;
    *out = em_sym_wrap(T, v, slot, &st);
    return *out ? EM_OK : st;
}

int em_identity_key(PyObject *k) {
    PyTypeObject *tp = Py_TYPE(k);
    if (tp == em_state.tensor_type || tp == em_state.param_type) return 1;
    return tp->tp_hash == PyBaseObject_Type.tp_hash && tp->tp_richcompare == PyBaseObject_Type.tp_richcompare;
}

int em_key_by_id(const EmSym *key) { return key->kind == SYM_OBJ && key->by_id == 1 && em_identity_key(key->obj); }

int em_key_of_frame(const EmSym *key) {
    if (key->kind == SYM_TENSOR) return key->src >= 0 && key->spec;
    /* an instance of the frame hashed by identity (guarded by its type only): looked up as itself */
    return key->kind == SYM_OBJ && key->src >= 0 && !key->by_id && !PyType_Check(key->obj) && em_identity_key(key->obj);
}

EmStatus em_lazy_dict_get_keyed(EmTracer *T, EmSym *d, EmSym *key, int *found, EmSym **out) {
    *found = 0;
    *out = NULL;
    if (d->kind != SYM_OBJ || !PyDict_Check(d->obj) || d->src < 0 || !em_key_of_frame(key))
        return em_trace_fail(T, EMA_VALUE, "lookup in %s by %s", em_sym_describe(d), em_sym_describe(key));
    if (!PyDict_CheckExact(d->obj) && em_guard_check(T->P, EMG_TYPE, d->src, (PyObject *)Py_TYPE(d->obj), 0))
        return EM_ERR;
    PyObject *v = PyDict_GetItemWithError(d->obj, key->kind == SYM_TENSOR ? key->spec : key->obj);
    if (!v) {
        if (PyErr_Occurred()) return EM_ERR;
        return em_guard_check(T->P, EMG_ABSENT_KEYED, d->src, NULL, key->src) ? EM_ERR : EM_OK;
    }
    *found = 1;
    int32_t slot = em_guard_dict_keyed(T->P, d->src, key->src);
    if (slot < 0) return EM_ERR;
    EmStatus st;
    *out = em_sym_wrap(T, v, slot, &st);
    return *out ? EM_OK : st;
}

EmStatus em_dict_getitem(EmTracer *T, EmSym *d, EmSym *key, EmSym **out) {
    int keyed = em_key_of_frame(key), found;
    if (key->kind != SYM_CONST && !keyed && !em_key_by_id(key))
        return em_trace_fail(T, EMA_VALUE, "dict lookup by %s", em_sym_describe(key));
    EmStatus st = keyed ? em_lazy_dict_get_keyed(T, d, key, &found, out)
                        : em_lazy_dict_get(T, d, key->obj, &found, out);
    if (st != EM_OK || found) return st;
    PyTypeObject *tp = Py_TYPE(d->obj);
    PyObject *missing = tp == &PyDict_Type ? NULL : _PyType_Lookup(tp, EM_STR(dunder_missing));
    EmSym *items = NULL; /* a defaultdict's __missing__ stores: into its items, written back */
    if (missing && missing == _PyType_Lookup((PyTypeObject *)EM_KNOWN(defaultdict), EM_STR(dunder_missing)) &&
        (st = em_frame_dict_items_rw(T, d, 1, &items)) != CALL_NEXT)
        return st == EM_OK ? em_sym_getitem(T, items, key, out) : st;
    if (keyed) /* a __missing__ of another kind would insert the tensor key: the frame runs it */
        return em_trace_fail(T, EMA_VALUE, "a tensor key absent from a dict of the frame");
    if (!missing) return em_trace_raise_new(T, PyExc_KeyError, key->obj);
    if (PyFunction_Check(missing)) return em_call_dunder(T, d, "__missing__", &key, 1, out);
    return em_trace_fail(T, EMA_VALUE, "missing key of a %s (its __missing__ cannot be traced)", tp->tp_name);
}

/* os.environ[key] / .get / in: the variable's encoded value in os.environ._data, guarded
 * (present with this value, or absent). */
EmStatus em_env_lookup(EmTracer *T, EmSym *env, EmSym *key, int *found, EmSym **out) {
    *found = 0;
    *out = NULL;
    if (key->kind != SYM_CONST || !PyUnicode_Check(key->obj) || env->src < 0)
        return em_trace_fail(T, EMA_VALUE, "os.environ lookup by a %s", em_sym_describe(key));
    PyObject *enc = PyObject_CallMethod(env->obj, "encodekey", "O", key->obj);
    PyObject *data = enc ? PyObject_GetAttr(env->obj, EM_STR(data)) : NULL;
    int32_t ds = data ? em_guard_odict(T->P, env->src, EM_STR(data)) : -1;
    EmStatus st = EM_ERR;
    if (ds < 0 || !PyDict_CheckExact(data)) goto done;
    PyObject *v = PyDict_GetItemWithError(data, enc);
    if (!v) {
        if (!PyErr_Occurred()) st = em_guard_check(T->P, EMG_ABSENT, ds, enc, 1) ? EM_ERR : EM_OK;
        goto done;
    }
    int32_t vs = em_guard_dict(T->P, ds, enc);
    if (vs < 0 || em_guard_check(T->P, EMG_EQ, vs, v, 0)) goto done;
    PyObject *dec = PyObject_CallMethod(env->obj, "decodevalue", "O", v);
    if (!dec) goto done;
    *out = em_sym_const(T, dec);
    Py_DECREF(dec);
    *found = 1;
    st = *out ? EM_OK : EM_ERR;
done:
    Py_XDECREF(enc);
    Py_XDECREF(data);
    if (st == EM_ERR && !PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: os.environ is not a dict");
    return st;
}

/* 1 when `name` is provably not an attribute of the object base stands for, with the guards
 * that keep it so installed; 0 when that cannot be shown this way; -1 on error. Covers
 * instances of types with the generic lookup (and nn.Module's parameter/buffer/module tables):
 * the type (guarded) has no such attribute and the instance dict (guarded) has no such key. */
static int attr_absent(EmTracer *T, EmSym *base, PyObject *name, int generic);

/* The Python type of a container-like sym (its type is not guarded: syms of these kinds are
 * exact or carry their type), or NULL. */
static PyTypeObject *kind_type(EmSym *s) {
    switch (s->kind) {
        case SYM_TUPLE: return (PyTypeObject *)(s->seq_type ? s->seq_type : (PyObject *)&PyTuple_Type);
        case SYM_LIST: return (PyTypeObject *)(s->seq_type ? s->seq_type : (PyObject *)&PyList_Type);
        case SYM_DICT: return (PyTypeObject *)(s->seq_type ? s->seq_type : (PyObject *)&PyDict_Type);
        case SYM_INT: return &PyLong_Type;
        case SYM_FLOAT: return &PyFloat_Type;
        case SYM_ITEM: return (PyTypeObject *)s->obj;
        case SYM_SLICE: return &PySlice_Type;
        case SYM_PARTIAL: return (PyTypeObject *)EM_KNOWN(partial);
        case SYM_VIEW:
            return s->pos == 'k'   ? &PyDictKeys_Type
                   : s->pos == 'v' ? &PyDictValues_Type
                   : s->pos == 'm' ? &PyDictProxy_Type
                                   : &PyDictItems_Type;
        case SYM_ITER:
        case SYM_SET:
        case SYM_NDARRAY: return (PyTypeObject *)s->seq_type;
        default: return NULL;
    }
}

EmStatus em_guard_class(EmTracer *T, PyTypeObject *tp, EmStatus *st) {
    int rc = em_guard_type_version(T->P, tp);
    *st = rc < 0   ? EM_ERR
          : rc > 0 ? em_trace_fail(T, EMA_VALUE, "class %s has no version tag to guard", tp->tp_name)
                   : EM_OK;
    return *st;
}

PyTypeObject *em_sym_known_type(const EmSym *s) {
    switch (s->kind) {
        case SYM_CONST:
        case SYM_NEW:
        case SYM_OBJ: return Py_TYPE(s->obj); /* an OBJ from the frame: its type or identity guarded */
        default: return kind_type((EmSym *)s);
    }
}

/* 1 when every class of tp's MRO is immutable (its attributes cannot change). */
static int static_mro(PyTypeObject *tp) {
    PyObject *mro = tp->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++)
        if (!(((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) return 0;
    return mro != NULL;
}

/* hasattr(cls, name) for a class from the frame whose metaclass is type: found in a class
 * of its MRO (that entry guarded) or absent from each (heap classes' dicts guarded). */
int em_class_attr_known(EmTracer *T, EmSym *base, PyObject *name) {
    PyTypeObject *cls = (PyTypeObject *)base->obj;
    /* a metaclass (abc.ABCMeta) whose own lookup is type's: no __getattribute__/__getattr__ */
    if (Py_TYPE(cls)->tp_getattro != PyType_Type.tp_getattro || base->src < 0) return 0;
    PyObject *mro = cls->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *c = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *d = em_type_dict(c);
        int has = d ? PyDict_Contains(d, name) : 0;
        if (has < 0) return -1;
        if (!(c->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
            if (has) return 2;
            continue;
        }
        EmSym *cs = c == cls ? base : em_sym_known(T, (PyObject *)c, c->tp_name);
        if (!cs) return -1;
        if (cs->src < 0) return 0;
        if (has) return em_guard_odict(T->P, cs->src, name) < 0 ? -1 : 2;
        if (em_guard_check(T->P, EMG_ABSENT, cs->src, name, 0)) return -1;
    }
    return _PyType_Lookup(Py_TYPE(cls), name) ? 2 : 1;
}

int em_sym_attr_absent(EmTracer *T, EmSym *base, PyObject *name) { return attr_absent(T, base, name, 0); }

/* hasattr's answer where it follows from the sym's kind: 1 absent, 2 present (without reading
 * the attribute), 0 not known this way, -1 error. */
int em_sym_attr_known(EmTracer *T, EmSym *base, PyObject *name) {
    int absent = attr_absent(T, base, name, 0);
    if (absent) return absent;
    if (base->kind == SYM_CONST) return 2;
    if (base->kind == SYM_OBJ && PyType_Check(base->obj)) return em_class_attr_known(T, base, name);
    PyTypeObject *tp = kind_type(base);
    if (!tp || !static_mro(tp)) return 0;
    PyObject *descr = _PyType_Lookup(tp, name);
    if (em_new_slot(base, descr)) {
        int i = em_dict_find(base->items.data[0], name);
        return i == -2 ? -1 : i >= 0 ? 2 : _PyType_Lookup(tp, EM_STR(dunder_getattr)) ? 0 : 1;
    }
    if (descr) return 2;
    /* instances with a __dict__: one made while tracing has only what was stored on it */
    if (tp->tp_dictoffset && (base->src >= 0 || (T->stores.len && em_obj_stored(T, base, name)))) return 0;
    return 1;
}

/* generic: object.__getattribute__'s answer, whatever the type's own lookup is. */
static int attr_absent(EmTracer *T, EmSym *base, PyObject *name, int generic) {
    if (base->kind == SYM_CONST) { /* an immutable value: its attributes are its type's */
        int has = PyObject_HasAttr(base->obj, name);
        return !has;
    }
    if (base->kind == SYM_TENSOR) {
        PyObject *m = em_sym_meta(T, base);
        if (!m) return -1;
        if (_PyType_Lookup(Py_TYPE(m), name)) return 0;
        if (T->stores.len && em_obj_stored(T, base, name)) return 0;
        PyObject *own = base->spec ? em_obj_dict(base->spec) : NULL;
        int has = own && PyDict_Check(own) ? PyDict_Contains(own, name) : 0;
        if (has) return has < 0 ? -1 : 0;
        /* no attribute of the type: a tensor made by the graph has no others; an input
         * tensor must not gain one in its __dict__ (guarded) */
        return base->src < 0 || em_guard_check(T->P, EMG_ABSENT, base->src, name, 0) == 0 ? 1 : -1;
    }
    if (base->kind != SYM_OBJ || base->src < 0 || PyType_Check(base->obj) || PyModule_Check(base->obj)) return 0;
    PyObject *o = base->obj;
    PyTypeObject *tp = Py_TYPE(o);
    EmSym *stored = T->stores.len ? em_obj_stored(T, base, name) : NULL;
    if (em_store_deleted(stored)) /* deleted in this trace: its class's lookup alone decides */
        return tp->tp_getattro == PyObject_GenericGetAttr && !_PyType_Lookup(tp, name) &&
               !_PyType_Lookup(tp, EM_STR(dunder_getattr));
    if (stored) return 0; /* set earlier in this trace */
    int is_mod = em_is_module(o);
    if (tp->tp_getattro != PyObject_GenericGetAttr && !is_mod && !generic) return 0;
    if (_PyType_Lookup(tp, name)) return 0;
    if (is_mod && T->mutated.len) { /* its storage changed in this trace: the trace's copy answers */
        EmSym *hit;
        int gone, r = module_changed_lookup(T, o, name, &hit, &gone);
        if (r) return r < 0 ? -1 : 0;
        if (gone) return 0;
    }
    PyObject *dict = em_obj_dict(o);
    if (dict) {
        int has = PyDict_Contains(dict, name);
        if (has) return has < 0 ? -1 : 0;
    }
    static const char *const tables[] = {"_parameters", "_buffers", "_modules", NULL};
    if (is_mod) {
        if (!dict) return 0;
        for (int i = 0; tables[i]; i++) {
            PyObject *tab = PyDict_GetItemString(dict, tables[i]);
            if (!tab || !PyDict_CheckExact(tab)) return 0;
            int has = PyDict_Contains(tab, name);
            if (has) return has < 0 ? -1 : 0;
        }
    }
    if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0) ||
        em_guard_check(T->P, EMG_ABSENT, base->src, name, 0))
        return -1;
    for (int i = 0; is_mod && tables[i]; i++) {
        PyObject *tn = PyUnicode_InternFromString(tables[i]);
        int32_t ts = tn ? em_guard_odict(T->P, base->src, tn) : -1;
        Py_XDECREF(tn);
        if (ts < 0 || em_guard_check(T->P, EMG_ABSENT, ts, name, 1)) return -1;
    }
    return 1;
}

/* type(s): the class, known from the guards that already describe s. */
EmStatus em_sym_type(EmTracer *T, EmSym *s, EmSym **out) {
    PyObject *tp = NULL;
    switch (s->kind) {
        case SYM_TENSOR: {
            PyObject *m = em_sym_meta(T, s);
            if (!m) return EM_ERR;
            tp = (PyObject *)Py_TYPE(m);
            break;
        }
        case SYM_CONST:
        case SYM_OBJ:
        case SYM_NEW:
        case SYM_CTX: tp = (PyObject *)Py_TYPE(s->obj); break;
        case SYM_TUPLE: tp = s->seq_type ? s->seq_type : (PyObject *)&PyTuple_Type; break;
        case SYM_LIST: tp = s->seq_type ? s->seq_type : (PyObject *)&PyList_Type; break;
        case SYM_INT: tp = (PyObject *)&PyLong_Type; break; /* an exact int (its input's type is guarded) */
        case SYM_SLICE: tp = (PyObject *)&PySlice_Type; break;
        case SYM_FLOAT: tp = (PyObject *)&PyFloat_Type; break; /* its input's type is guarded */
        case SYM_ITEM: tp = s->obj; break;
        case SYM_SET:
        case SYM_NDARRAY: tp = s->seq_type; break; /* numpy.ndarray, or a numpy scalar type */
        case SYM_DICT: tp = s->seq_type ? s->seq_type : (PyObject *)&PyDict_Type; break;
        case SYM_VIEW:
            tp = (PyObject *)(s->pos == 'k'   ? &PyDictKeys_Type
                              : s->pos == 'v' ? &PyDictValues_Type
                              : s->pos == 'm' ? &PyDictProxy_Type
                                              : &PyDictItems_Type);
            break;
        case SYM_ITER:
            if (s->seq_type) {
                tp = s->seq_type;
                break;
            }
            return em_trace_fail(T, EMA_VALUE, "type() of an iterator of unknown type");
        default: return em_trace_fail(T, EMA_VALUE, "type() of a %s", em_sym_describe(s));
    }
    if (s->kind == SYM_OBJ && s->src >= 0 && !s->by_id && em_guard_check(T->P, EMG_TYPE, s->src, tp, 0)) return EM_ERR;
    return known_out(T, tp, ((PyTypeObject *)tp)->tp_name, out);
}

/* Attributes that describe a function or code object rather than state: read as constants
 * (functions are guarded by identity; renaming one after compiling is not seen). */
static EmStatus describing_attr(EmTracer *T, EmSym *base, PyObject *name, const char *n, EmSym **out, int *done) {
    PyObject *o = base->obj;
    *done = 0;
    int is_code = PyCode_Check(o), made = em_sym_placeholder(base); /* made: a function made while tracing */
    int builtin = PyCFunction_Check(o) || Py_IS_TYPE(o, &PyMethodDescr_Type) || Py_IS_TYPE(o, &PyWrapperDescr_Type) ||
                  Py_IS_TYPE(o, &PyClassMethodDescr_Type);
    if (builtin && (!strcmp(n, "__name__") || !strcmp(n, "__qualname__"))) {
        /* a builtin, a builtin method of any object or a C method's descriptor: its C name */
        PyObject *v = PyObject_GetAttr(o, name);
        *done = 1;
        if (!v) return em_trace_abandon(T, EMA_ATTR, "%s.%s (not found)", Py_TYPE(o)->tp_name, n);
        *out = em_sym_const(T, v);
        Py_DECREF(v);
        return *out ? EM_OK : EM_ERR;
    }
    if (!is_code && !(PyFunction_Check(o) && (base->by_id || made))) return EM_OK;
    PyObject *fd = made ? ((PyFunctionObject *)o)->func_dict : NULL; /* what functools.update_wrapper set */
    int in_dict = fd && PyDict_Check(fd) && PyDict_GetItemWithError(fd, name);
    if (PyErr_Occurred()) return EM_ERR;
    if (!is_code && !in_dict && strcmp(n, "__name__") && strcmp(n, "__qualname__") && strcmp(n, "__module__") &&
        strcmp(n, "__doc__") && strcmp(n, "__code__"))
        return EM_OK;
    *done = 1;
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) {
        return em_trace_abandon(T, EMA_ATTR, "%s.%s (not found)", Py_TYPE(o)->tp_name, n);
    }
    EmStatus st;
    if (PyCode_Check(v)) st = known_out(T, v, "<code>", out);
    else if (is_pure(v, 0)) st = (*out = em_sym_const(T, v)) ? EM_OK : EM_ERR;
    else st = em_trace_fail(T, EMA_ATTR, "%s.%s (not a constant)", Py_TYPE(o)->tp_name, n);
    Py_DECREF(v);
    return st;
}

/* Attribute of a class (type.__getattribute__ semantics): a data descriptor of the metaclass
 * (__name__, __qualname__...), else the class's MRO (functions, static and class methods,
 * plain values guarded through the owning class's __dict__), else the metaclass. */
/* cls.__name__ (__qualname__, __module__, __doc__, __flags__ and the other layout numbers), a
 * data descriptor of type: its constant value (unguarded: README, limitations); other
 * metaclass data descriptors abort. */
/* cls.__dict__: a read-only DICT sym (seq_type mappingproxy, spec the class) of the class's own
 * namespace, its entries as they are now: the class's version tag is guarded (any change to
 * the class moves it). Values are constants or objects known by identity. */
static EmStatus class_dict(EmTracer *T, PyTypeObject *cls, EmSym **out) {
    EmStatus st;
    if (em_guard_class(T, cls, &st) != EM_OK) return st;
    PyObject *k, *v, *ns = cls->tp_dict;
    Py_ssize_t pos = 0;
    EmSym *d = em_sym_new(T, SYM_DICT);
    if (!d) return EM_ERR;
    d->seq_type = Py_NewRef((PyObject *)&PyDictProxy_Type);
    d->spec = Py_NewRef((PyObject *)cls);
    while (PyDict_Next(ns, &pos, &k, &v)) {
        if (!PyUnicode_Check(k))
            return em_trace_fail(T, EMA_ATTR, "%s.__dict__ with a %s key", cls->tp_name, Py_TYPE(k)->tp_name);
        EmSym *is = is_pure(v, 0) ? em_sym_const(T, v) : em_sym_known(T, v, Py_TYPE(v)->tp_name);
        if (!is) return EM_ERR;
        if (em_vec_push(&d->items, is) || em_vec_push(&d->keys, Py_NewRef(k))) return PyErr_NoMemory(), EM_ERR;
    }
    *out = d;
    return EM_OK;
}

static EmStatus type_name_attr(EmTracer *T, PyTypeObject *cls, PyObject *name, const char *n, EmSym **out) {
    if (!strcmp(n, "__dict__")) return class_dict(T, cls, out);
    int classes = !strcmp(n, "__mro__") || !strcmp(n, "__bases__") || !strcmp(n, "__base__");
    /* its layout, fixed when the class was made: __flags__ (TPFLAGS_MAPPING...), __basicsize__... */
    int layout = !strcmp(n, "__flags__") || !strcmp(n, "__basicsize__") || !strcmp(n, "__itemsize__") ||
                 !strcmp(n, "__dictoffset__") || !strcmp(n, "__weakrefoffset__");
    if (!classes && !layout && strcmp(n, "__name__") && strcmp(n, "__qualname__") && strcmp(n, "__module__") &&
        strcmp(n, "__doc__"))
        return em_trace_fail(T, EMA_ATTR, "%s.%s (metaclass descriptor)", cls->tp_name, n);
    PyObject *v = PyObject_GetAttr((PyObject *)cls, name);
    if (!v) return EM_ERR;
    int pure = is_pure(v, 0);
    if (classes) { /* classes, constants as the class itself is (unguarded, as __name__) */
        pure = PyType_Check(v) || v == Py_None || PyTuple_CheckExact(v);
        for (Py_ssize_t i = 0; PyTuple_CheckExact(v) && i < PyTuple_GET_SIZE(v); i++)
            pure &= PyType_Check(PyTuple_GET_ITEM(v, i));
    }
    *out = pure ? em_sym_const(T, v) : NULL;
    Py_DECREF(v);
    if (!pure) return em_trace_fail(T, EMA_ATTR, "%s.%s (not a constant)", cls->tp_name, n);
    return *out ? EM_OK : EM_ERR;
}

/* An OBJ sym for obj guarded by identity elsewhere (NULL on error). */
static EmSym *by_id_sym(EmTracer *T, PyObject *obj) {
    EmSym *fs = em_sym_new(T, SYM_OBJ);
    if (fs) {
        fs->obj = Py_NewRef(obj);
        fs->by_id = 1;
    }
    return fs;
}

/* A function, staticmethod or classmethod v found in a class's dict (entry guarded through
 * slot): the function (a classmethod's bound to the class base). */
static EmStatus class_function_attr(EmTracer *T, EmSym *base, PyObject *v, int32_t slot, const char *n, int method,
                                    EmSym **out, EmSym **self) {
    int is_static = Py_IS_TYPE(v, &PyStaticMethod_Type), is_cm = Py_IS_TYPE(v, &PyClassMethod_Type);
    if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
    PyObject *f = v;
    if (is_static || is_cm) {
        f = PyObject_GetAttrString(v, "__func__");
        if (!f) return EM_ERR;
        Py_DECREF(f); /* kept alive by v */
        if (is_cm && Py_IS_TYPE(f, &PyProperty_Type)) return class_property(T, base, f, n, out, self);
        if (!PyFunction_Check(f))
            return em_trace_fail(T, EMA_ATTR, "%s.%s (wraps a builtin)", ((PyTypeObject *)base->obj)->tp_name, n);
    }
    if (is_cm) return em_sym_method(T, f, base, method, out, self);
    *self = NULL;
    return (*out = by_id_sym(T, f)) ? EM_OK : EM_ERR;
}

/* A descriptor v read on a class: torch.autograd.Function.apply (a classmethod) becomes
 * ember._rules.function_apply bound to the class; a C classmethod is bound; an lru_cache
 * method, a property and a C attribute descriptor are themselves; a Python descriptor's
 * __get__(None, cls) is traced; others abort. */
/* ember._rules.function_apply where v is torch.autograd.Function's `apply` (a C classmethod,
 * or a Python one in older torch), else NULL (also on error, with the exception set). */
static PyObject *function_apply_for(PyObject *v) {
    static PyObject *fn_apply, *helper; /* owned for the process */
    if (!helper) {
        PyObject *rules = PyImport_ImportModule("ember._rules");
        PyObject *fa = rules ? PyObject_GetAttrString(rules, "_FUNCTION_APPLY") : NULL;
        PyObject *h = fa ? PyObject_GetAttrString(rules, "function_apply") : NULL;
        Py_XDECREF(rules);
        if (!h) {
            Py_XDECREF(fa);
            return NULL;
        }
        fn_apply = fa;
        helper = h;
    }
    return v == fn_apply && PyFunction_Check(helper) ? helper : NULL;
}

static EmStatus class_descr_attr(EmTracer *T, EmSym *base, PyObject *v, int32_t slot, const char *n, int method,
                                 EmSym **out, EmSym **self) {
    PyObject *helper = function_apply_for(v);
    if (helper) {
        if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
        return em_sym_method(T, helper, base, method, out, self);
    }
    if (PyErr_Occurred()) return EM_ERR;
    if (Py_IS_TYPE(v, (PyTypeObject *)EM_KNOWN(lru_wrapper))) { /* an lru_cache method: itself, as a function */
        if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
        *self = NULL;
        return (*out = by_id_sym(T, v)) ? EM_OK : EM_ERR;
    }
    if (Py_IS_TYPE(v, &PyClassMethodDescr_Type)) { /* dict.fromkeys: the C method bound to the class */
        if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
        PyObject *b = Py_TYPE(v)->tp_descr_get(v, NULL, base->obj);
        if (!b) return EM_ERR;
        *self = NULL;
        *out = by_id_sym(T, b);
        Py_DECREF(b);
        return *out ? EM_OK : EM_ERR;
    }
    if (Py_IS_TYPE(v, &PyProperty_Type) || Py_IS_TYPE(v, &PyGetSetDescr_Type) || Py_IS_TYPE(v, &PyMemberDescr_Type)) {
        /* C.prop: a property (or a C attribute descriptor) read on the class is itself */
        if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
        *self = NULL;
        return (*out = by_id_sym(T, v)) ? EM_OK : EM_ERR;
    }
    PyObject *get = em_user_descr_method(v, EM_STR(dunder_get));
    if (get) { /* a descriptor of a Python class (torch.distributions' lazy_property): __get__(None, cls) */
        if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
        EmSym *args[3] = {em_sym_known(T, v, n), em_sym_const(T, Py_None), base};
        *self = NULL;
        return args[0] && args[1] ? em_inline(T, get, args, 3, NULL, out) : EM_ERR;
    }
    return em_trace_fail(T, EMA_ATTR, "%s.%s (descriptor read on the class)", ((PyTypeObject *)base->obj)->tp_name, n);
}

static EmStatus type_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    PyTypeObject *cls = (PyTypeObject *)base->obj, *meta = Py_TYPE(cls);
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    /* pybind11's metaclass reads as type's but for an instancemethod in the class dict */
    PyObject *found = _PyType_Lookup(cls, name);
    int pybind = !strcmp(meta->tp_name, "pybind11_type") && !(found && PyInstanceMethod_Check(found));
    if (meta->tp_getattro != PyType_Type.tp_getattro && !pybind &&
        _PyType_Lookup(meta, EM_STR(dunder_getattribute)) != _PyType_Lookup(&PyType_Type, EM_STR(dunder_getattribute)))
        return em_trace_fail(T, EMA_ATTR, "%s.%s (metaclass with its own __getattribute__)", cls->tp_name, n);
    PyObject *mattr = _PyType_Lookup(meta, name);
    if (mattr && Py_TYPE(mattr)->tp_descr_set) return type_name_attr(T, cls, name, n, out);
    PyObject *mro = cls->tp_mro, *owner = NULL, *v = NULL;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro) && !v; i++) {
        owner = PyTuple_GET_ITEM(mro, i);
        PyObject *d = em_type_dict((PyTypeObject *)owner);
        v = d ? PyDict_GetItemWithError(d, name) : NULL;
        if (!v && PyErr_Occurred()) return EM_ERR;
    }
    if (!v) {
        if (mattr && PyFunction_Check(mattr)) /* a metaclass method: cls is self */
            return em_sym_method(T, mattr, base, method, out, self);
        if (mattr && Py_IS_TYPE(mattr, &PyMethodDescr_Type) && PyDescr_TYPE(mattr) == &PyType_Type) {
            /* a builtin method of type (cls.__subclasses__), bound to cls while neither cls's MRO
             * nor a Python metaclass defines the name (their version tags guarded) */
            EmStatus gst = EM_OK;
            if (em_guard_class(T, cls, &gst) != EM_OK ||
                ((meta->tp_flags & Py_TPFLAGS_HEAPTYPE) && em_guard_class(T, meta, &gst) != EM_OK))
                return gst;
            return em_sym_method(T, mattr, base, method, out, self);
        }
        if (mattr && !Py_TYPE(mattr)->tp_descr_get && (meta->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
            /* a plain attribute of the metaclass (a singleton's registry): read from the
             * metaclass while cls's MRO still lacks the name (its version tag guarded) */
            EmStatus gst = EM_OK;
            if (em_guard_class(T, cls, &gst) != EM_OK) return gst;
            EmSym *ms = em_sym_known(T, (PyObject *)meta, meta->tp_name);
            return ms ? type_attr(T, ms, name, method, out, self) : EM_ERR;
        }
        int fixed = !mattr && !(Py_TYPE(cls)->tp_flags & Py_TPFLAGS_HEAPTYPE); /* absent for good from builtins */
        for (Py_ssize_t i = 0; fixed && mro && i < PyTuple_GET_SIZE(mro); i++)
            fixed = !(((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_flags & Py_TPFLAGS_HEAPTYPE);
        /* absent for good from builtins; from a Python class while its version tag (and its
         * metaclass's) is as the trace found it, a metaclass __getattr__ aside */
        EmStatus gst = EM_OK;
        if (!fixed && !mattr && !_PyType_Lookup(meta, EM_STR(dunder_getattr)) &&
            em_guard_class(T, cls, &gst) == EM_OK &&
            ((meta->tp_flags & Py_TPFLAGS_HEAPTYPE) ? em_guard_class(T, meta, &gst) : EM_OK) == EM_OK)
            fixed = 1;
        if (gst != EM_OK) return gst;
        if (fixed) /* Python's AttributeError, in the trace */
            return em_trace_raise_msg(T, PyExc_AttributeError, "type object '%s' has no attribute '%U'", cls->tp_name,
                                      name);
        return em_trace_fail(T, EMA_ATTR, "%s.%s (not found on the class)", cls->tp_name, n);
    }
    /* the owner's dict entry is guarded: a class attribute reassigned later is noticed */
    EmSym *osym = owner == (PyObject *)cls ? base : em_sym_known(T, owner, ((PyTypeObject *)owner)->tp_name);
    if (!osym) return EM_ERR;
    if (osym->src < 0) return em_trace_fail(T, EMA_ATTR, "%s.%s of a class made while tracing", cls->tp_name, n);
    int32_t slot = em_guard_odict(T->P, osym->src, name);
    if (slot < 0) return EM_ERR;
    if (Py_IS_TYPE(v, &PyClassMethod_Type) && (function_apply_for(v) || PyErr_Occurred())) /* older torch's */
        return PyErr_Occurred() ? EM_ERR : class_descr_attr(T, base, v, slot, n, method, out, self);
    if (Py_IS_TYPE(v, &PyStaticMethod_Type) || Py_IS_TYPE(v, &PyClassMethod_Type) || PyFunction_Check(v))
        return class_function_attr(T, base, v, slot, n, method, out, self);
    if (Py_IS_TYPE(v, &PyMethodDescr_Type) || Py_IS_TYPE(v, &PyWrapperDescr_Type)) {
        /* list.append, object.__getattribute__: the descriptor itself */
        if (em_guard_check(T->P, EMG_ID, slot, v, 0)) return EM_ERR;
        return (*out = by_id_sym(T, v)) ? EM_OK : EM_ERR;
    }
    if (Py_TYPE(v)->tp_descr_get && !PyType_Check(v)) return class_descr_attr(T, base, v, slot, n, method, out, self);
    EmStatus st;
    *out = em_sym_wrap(T, v, slot, &st);
    return *out ? EM_OK : st;
}

EmStatus em_sym_obj_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    return obj_attr_impl(T, base, name, method, out, self, 0);
}

EmStatus em_sym_getattr_generic(EmTracer *T, EmSym *base, PyObject *name, EmSym **out) {
    EmSym *self = NULL;
    if (base->kind == SYM_NEW) return new_attr(T, base, name, 0, out, &self, 1);
    if (base->kind != SYM_OBJ)
        return em_trace_fail(T, EMA_ATTR, "object.__getattribute__ of a %s", em_sym_describe(base));
    return obj_attr_impl(T, base, name, 0, out, &self, 1);
}

/* Name of module o for messages: "?" when its __name__ is missing or not a str. */
static const char *module_label(PyObject *o) {
    PyObject *name = PyDict_GetItemString(PyModule_GetDict(o), "__name__");
    const char *s = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (!s && PyErr_Occurred()) PyErr_Clear(); /* AsUTF8 fails only on lone surrogates or memory */
    return s ? s : "?";
}

/* ember/_rules.py's answer (policy "trusted_module" or "torch_module") for module o: 1 or 0;
 * -1 with an exception. */
static int module_policy(PyObject *o, const char *policy) {
    PyObject *r = PyObject_CallMethod(em_state.meta_run, policy, "O", o);
    int yes = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return yes;
}

/* _rules.trusted_module's answer for module o, asked once per module for the process (it follows
 * the module's __name__): 1 or 0; -1 with an exception. */
static int module_trusted(PyObject *o) {
    if (!em_state.module_trust && !(em_state.module_trust = PyDict_New())) return -1;
    PyObject *r = PyDict_GetItemWithError(em_state.module_trust, o);
    if (r) return r == Py_True;
    if (PyErr_Occurred()) return -1;
    int yes = module_policy(o, "trusted_module");
    if (yes < 0 || PyDict_SetItem(em_state.module_trust, o, yes ? Py_True : Py_False) < 0) return -1;
    return yes;
}

/* v, an attribute of module o that is not guarded (trusted library modules): a constant, or
 * an object sym by identity; a tensor stored in a module is refused. */
/* v is an instance of a class made in Python or by pybind11 (torch.backends.cuda.matmul, ONNX's
 * GLOBALS, an SDPBackend member) that is no container, callable, class or module: a trusted
 * module's or class's object read by identity, its attributes guarded like an input's. */
static int settings_object(PyObject *v) {
    return !is_pure(v, 0) && (Py_TYPE(v)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyType_Check(v) && !PyCallable_Check(v) &&
           !PyModule_Check(v) && !PyDict_Check(v) && !PyList_Check(v) && !PyTuple_Check(v) && !PyAnySet_Check(v);
}

static EmStatus module_value(EmTracer *T, PyObject *o, PyObject *v, EmSym **out) {
    if (PyObject_TypeCheck(v, em_state.tensor_type))
        return em_trace_fail(T, EMA_ATTR, "tensor stored in module %s", module_label(o));
    if (settings_object(v)) /* torch.backends.cuda.matmul, ONNX's GLOBALS: its attributes guarded */
        return known_out(T, v, Py_TYPE(v)->tp_name, out);
    *out = is_pure(v, 0) ? em_sym_const(T, v) : em_sym_new(T, SYM_OBJ);
    if (*out && (*out)->kind == SYM_OBJ) (*out)->obj = Py_NewRef(v);
    return *out ? EM_OK : EM_ERR;
}

/* name, missing from module o's dict: torch's modules that resolve names in a __getattr__
 * (torch._VF) answer now, unguarded as their other attributes; other modules' may import
 * (not at trace time). */
static EmStatus module_getattr(EmTracer *T, PyObject *o, PyObject *name, const char *n, EmSym **out) {
    int lazy = Py_TYPE(o) != &PyModule_Type || PyDict_GetItemString(PyModule_GetDict(o), "__getattr__");
    int torch = lazy ? module_policy(o, "torch_module") : 0;
    if (torch < 0) return EM_ERR;
    if (torch) {
        PyObject *r = PyObject_GetAttr(o, name);
        if (r) {
            EmStatus st = module_value(T, o, r, out);
            Py_DECREF(r);
            return st;
        }
        /* whatever __getattr__ raised, the instruction raises again when it runs as Python */
        return em_trace_abandon(T, EMA_ATTR, "%s.%s (module attribute missing)", module_label(o), n);
    }
    return em_trace_fail(T, EMA_ATTR, "%s.%s (module attribute missing)", module_label(o), n);
}

/* An attribute of a module: guarded through the module's dict, except in trusted library
 * modules (ember/_rules.py trusted_module; README limitations) and those that say
 * __ember_trusted__. */
static EmStatus module_attr(EmTracer *T, EmSym *base, PyObject *name, const char *n, EmSym **out) {
    /* stored earlier in this trace: as a global of the module's functions, or as its attribute */
    EmSym *stored = T->stores.len ? em_global_stored(T, PyModule_GetDict(base->obj), name) : NULL;
    if (em_store_deleted(stored))
        return em_trace_fail(T, EMA_ATTR, "%s.%s (deleted in the trace)", module_label(base->obj), n);
    if (stored) return (*out = stored), EM_OK;
    PyObject *o = base->obj, *v = PyDict_GetItemWithError(PyModule_GetDict(o), name);
    if (!v) return PyErr_Occurred() ? EM_ERR : module_getattr(T, o, name, n, out);
    if (base->src >= 0 && !PyObject_HasAttrString(o, "__ember_trusted__")) {
        int trusted = module_trusted(o);
        if (trusted < 0) return EM_ERR;
        if (!trusted) {
            int32_t slot = em_guard_odict(T->P, base->src, name);
            if (slot < 0) return EM_ERR;
            EmStatus st;
            *out = em_sym_wrap(T, v, slot, &st);
            return *out ? EM_OK : st;
        }
    }
    return module_value(T, o, v, out);
}

/* o.__dict__ and o.__class__ of a guarded instance o (*done = 1); otherwise *done = 0. */
static EmStatus dunder_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, int *done) {
    PyObject *o = base->obj;
    PyTypeObject *tp = Py_TYPE(o);
    *done = 1;
    if (PyUnicode_Compare(name, EM_STR(dunder_dict)) == 0 && !method) {
        PyObject *od = em_obj_dict(o);
        if (!od && _PyObject_GetDictPtr(o)) {
            PyObject *made = PyObject_GenericGetDict(o, NULL); /* made on first use, as o.__dict__ does */
            if (!made) return EM_ERR;
            Py_DECREF(made);
            od = em_obj_dict(o);
        }
        if (!od || !PyDict_CheckExact(od))
            return em_trace_fail(T, EMA_ATTR, "%s.__dict__ (no plain instance dict)", tp->tp_name);
        if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        int32_t ds = em_guard_attr(T->P, base->src, name);
        EmSym *d = ds < 0 ? NULL : em_sym_new(T, SYM_OBJ);
        if (!d) return EM_ERR;
        d->obj = Py_NewRef(od);
        d->src = ds;
        d->pos = EM_POS_IDICT;
        *out = d;
        return EM_OK;
    }
    if (PyUnicode_Compare(name, EM_STR(dunder_class)) == 0 &&
        _PyType_Lookup(tp, name) == _PyType_Lookup(&PyBaseObject_Type, name)) {
        if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        return known_out(T, (PyObject *)tp, tp->tp_name, out);
    }
    *done = 0;
    return EM_OK;
}

PyTypeObject *em_thread_local(PyTypeObject *tp) {
    static PyTypeObject *local; /* _thread._local, owned for the process */
    if (!local) {
        PyObject *m = PyImport_ImportModule("_thread"), *lt = m ? PyObject_GetAttrString(m, "_local") : NULL;
        Py_XDECREF(m);
        if (!lt || !PyType_Check(lt)) return Py_XDECREF(lt), PyErr_Clear(), NULL;
        local = (PyTypeObject *)lt;
    }
    if (!tp) return local;
    return tp->tp_setattro == local->tp_setattro && tp->tp_getattro == local->tp_getattro &&
                   _PyType_Lookup(tp, EM_STR(dunder_setattr)) == _PyType_Lookup(local, EM_STR(dunder_setattr))
               ? local
               : NULL;
}

/* An attribute of a threading.local of the frame held in its instance dict (which is the
 * calling thread's): the value now, guarded by a getattr at guard time (the thread of each
 * call reads its own). CALL_NEXT when base is no such object or the name is its class's. */
static EmStatus thread_local_attr(EmTracer *T, EmSym *base, PyObject *name, PyObject *ga, EmSym **out, int *done) {
    PyTypeObject *lt = em_thread_local(NULL);
    if (!lt || ga != _PyType_Lookup(lt, EM_STR(dunder_getattribute)) || base->kind != SYM_OBJ || base->src < 0 ||
        _PyType_Lookup(Py_TYPE(base->obj), name))
        return CALL_NEXT;
    EmSym *stored = T->stores.len ? em_obj_stored(T, base, name) : NULL; /* set earlier in the trace */
    if (stored && !em_store_deleted(stored)) {
        *done = 1;
        return (*out = stored), EM_OK;
    }
    PyObject *v = PyObject_GetAttr(base->obj, name);
    if (!v) return PyErr_ExceptionMatches(PyExc_AttributeError) ? (PyErr_Clear(), CALL_NEXT) : EM_ERR;
    int32_t slot = em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)Py_TYPE(base->obj), 0)
                       ? -1
                       : em_guard_attr(T->P, base->src, name);
    EmStatus st = EM_ERR;
    *out = slot < 0 ? NULL : em_sym_wrap(T, v, slot, &st);
    Py_DECREF(v);
    *done = *out != NULL;
    return *out ? EM_OK : st;
}

/* A type whose attribute lookup is not object's: a Python __getattribute__ is inlined
 * (*done = 1); object's lookup followed by a Python __getattr__ sets *hook to it; anything
 * else aborts. */
static EmStatus getattribute_hook(EmTracer *T, EmSym *base, PyObject *name, const char *n, PyObject **hook, EmSym **out,
                                  int *done) {
    PyTypeObject *tp = Py_TYPE(base->obj);
    *done = 0;
    PyObject *ga = _PyType_Lookup(tp, EM_STR(dunder_getattribute));
    if (ga && PyFunction_Check(ga)) {
        *done = 1;
        if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        return inline_attr_hook(T, ga, base, name, out);
    }
    PyObject *gattr = _PyType_Lookup(tp, EM_STR(dunder_getattr));
    /* object's lookup: object's own __getattribute__ or a builtin base's wrapper of it (dict's) */
    int generic = ga && (ga == em_state.object_getattribute ||
                         (Py_IS_TYPE(ga, &PyWrapperDescr_Type) &&
                          ((PyWrapperDescrObject *)ga)->d_wrapped == (void *)PyObject_GenericGetAttr));
    if (!generic) {
        EmStatus st = thread_local_attr(T, base, name, ga, out, done);
        return st != CALL_NEXT ? st : em_trace_fail(T, EMA_ATTR, "%s.%s (custom __getattribute__)", tp->tp_name, n);
    }
    if (!gattr || (!PyFunction_Check(gattr) && !Py_IS_TYPE(gattr, &PyMethodDescr_Type) &&
                   !Py_IS_TYPE(gattr, &PyWrapperDescr_Type)))
        return em_trace_fail(T, EMA_ATTR, "%s.%s (a __getattr__ of type %s)", tp->tp_name, n,
                             gattr ? Py_TYPE(gattr)->tp_name : "?");
    *hook = gattr; /* object's lookup, then __getattr__ when it finds nothing */
    return EM_OK;
}

/* A __slots__ field of a guarded instance: guarded through getattr. */
static EmStatus slot_attr(EmTracer *T, EmSym *base, PyObject *name, const char *n, EmSym **out) {
    PyTypeObject *tp = Py_TYPE(base->obj);
    EmStatus st = EM_ERR;
    if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
    int32_t ms = em_guard_attr(T->P, base->src, name);
    if (ms < 0) return EM_ERR;
    PyObject *mv = PyObject_GetAttr(base->obj, name);
    if (!mv) { /* whatever the read raised (an empty slot's AttributeError), the instruction
                * raises again when it runs as Python */
        return em_trace_abandon(T, EMA_ATTR, "%s.%s (empty slot)", tp->tp_name, n);
    }
    if (Py_REFCNT(mv) == 1 && ((!T->keep && !(T->keep = PyList_New(0))) || PyList_Append(T->keep, mv))) {
        Py_DECREF(mv); /* a fresh object (ctx.saved_tensors): its id must stay its own */
        return EM_ERR;
    }
    *out = em_sym_wrap(T, mv, ms, &st);
    Py_DECREF(mv);
    return *out ? EM_OK : st;
}

/* The value of name in instance o's dict, or for an nn.Module without a class attribute
 * `name`, in its _parameters, _buffers or _modules (borrowed, NULL if none), with its guard
 * slot in *slot (-1 on error). -1 with an exception, else 0. */
static int instance_value(EmTracer *T, EmSym *base, PyObject *name, PyObject *descr, PyObject **v, int32_t *slot) {
    PyObject *o = base->obj, *od = em_obj_dict(o);
    *v = od ? PyDict_GetItemWithError(od, name) : NULL;
    *slot = -1;
    if (*v) {
        *slot = em_guard_odict(T->P, base->src, name);
    } else if (PyErr_Occurred()) {
        return -1;
    } else if (!descr && od && em_is_module(o)) {
        static const char *const tables[] = {"_parameters", "_buffers", "_modules", NULL};
        for (int i = 0; tables[i] && !*v; i++) {
            PyObject *tab = PyDict_GetItemString(od, tables[i]);
            PyObject *tn = PyUnicode_InternFromString(tables[i]);
            if (!tn) return -1;
            *v = tab && PyDict_Check(tab) ? PyDict_GetItemWithError(tab, name) : NULL;
            if (*v) {
                int32_t ts = em_guard_odict(T->P, base->src, tn);
                *slot = ts < 0 ? -1 : em_guard_dict(T->P, ts, name);
            }
            Py_DECREF(tn);
            if (PyErr_Occurred()) return -1;
        }
    }
    return 0;
}

/* AttributeError: a getattr(o, n, default) or hasattr() around it may use the absence. */
static EmStatus attr_not_found(EmTracer *T, EmSym *base, PyObject *name, const char *n) {
    int absent = attr_absent(T, base, name, 1);
    if (absent < 0) return EM_ERR;
    if (absent) {
        T->missing_attr = 1;
        T->missing_handlers = T->handlers;
    }
    return em_trace_fail(T, EMA_ATTR, "%s.%s (not found)", Py_TYPE(base->obj)->tp_name, n);
}

/* An attribute of a class the trace knows without a slot (torch.Tensor from the trusted torch
 * module) or of an operator packet (torch.ops.aten.add): trusted as its module is; a function
 * or descriptor read on the class (unbound: torch.Tensor.abs_), a class, an overload, or a
 * constant. */
static EmStatus trusted_class_attr(EmTracer *T, EmSym *base, PyObject *name, const char *n, EmSym **out, EmSym **self) {
    PyObject *v = PyObject_GetAttr(base->obj, name);
    if (!v) {
        PyErr_Clear(); /* Python raises the AttributeError again when the trace gives up */
        return em_trace_fail(T, EMA_ATTR, "%s.%s (not found)", ((PyTypeObject *)base->obj)->tp_name, n);
    }
    *self = NULL;
    if (is_pure(v, 0)) *out = em_sym_const(T, v);
    else if (PyFunction_Check(v) || PyCFunction_Check(v) || PyType_Check(v) || Py_IS_TYPE(v, &PyMethodDescr_Type) ||
             Py_IS_TYPE(v, &PyWrapperDescr_Type) || Py_IS_TYPE(v, &PyClassMethodDescr_Type) ||
             (!PyType_Check(base->obj) && PyCallable_Check(v)))
        *out = by_id_sym(T, v);
    else if (PyType_Check(base->obj) && settings_object(v))
        *out = em_sym_known(T, v, n); /* a class's constant object (a pybind11 enum member): read as an input */
    else {
        EmStatus st = em_trace_fail(T, EMA_ATTR, "%s.%s of a %s", ((PyTypeObject *)base->obj)->tp_name, n,
                                    Py_TYPE(v)->tp_name);
        Py_DECREF(v);
        return st;
    }
    Py_DECREF(v);
    return *out ? EM_OK : EM_ERR;
}

/* o.name after `del o.name` in this trace: AttributeError where o's class has no attribute of
 * that name and no __getattr__ (object's lookup then ends at the instance dict). */
static EmStatus deleted_attr(EmTracer *T, EmSym *base, PyObject *name, const char *n) {
    PyTypeObject *tp = Py_TYPE(base->obj);
    if (tp->tp_getattro != PyObject_GenericGetAttr || _PyType_Lookup(tp, name) ||
        _PyType_Lookup(tp, EM_STR(dunder_getattr)))
        return em_trace_fail(T, EMA_ATTR, "%s.%s after del of it in this trace", tp->tp_name, n);
    return em_trace_raise_msg(T, PyExc_AttributeError, "'%s' object has no attribute '%U'", tp->tp_name, name);
}

/* o.name of frame object base (o) whose type's attribute descr answers before the instance
 * dict: a property's getter, a member or C field, a namedtuple field, a Python class's data
 * descriptor's __get__ (traced); CALL_NEXT when the instance dict answers. */
static EmStatus descr_attr(EmTracer *T, EmSym *base, PyObject *descr, PyObject *name, const char *n, int method,
                           EmSym **out, EmSym **self) {
    PyObject *o = base->obj;
    PyTypeObject *tp = Py_TYPE(o);
    EmStatus st;
    if (Py_IS_TYPE(descr, &PyProperty_Type)) { /* a data descriptor: before the instance dict */
        if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        return class_attr(T, base, tp, descr, n, method, out, self);
    }
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) return slot_attr(T, base, name, n, out);
    /* the C fields of builtin exceptions (args, __cause__, __context__) and of an autograd
     * Function's ctx (saved_tensors, needs_input_grad: a compiled backward's): plain reads */
    if (Py_IS_TYPE(descr, &PyGetSetDescr_Type) &&
        ((PyExceptionInstance_Check(o) && !(PyDescr_TYPE(descr)->tp_flags & Py_TPFLAGS_HEAPTYPE)) ||
         (PyObject *)PyDescr_TYPE(descr) == EM_KNOWN(function_base)))
        return slot_attr(T, base, name, n, out);
    if (PyTuple_Check(o) && (PyObject *)Py_TYPE(descr) == EM_KNOWN(tuplegetter)) {
        EmSym *items = NULL; /* a namedtuple subclass's field: its items, guarded (em_frame_items) */
        if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        return (st = em_frame_items(T, base, &items)) == EM_OK ? em_tuple_field(T, descr, items, out) : st;
    }
    if (!Py_TYPE(descr)->tp_descr_set || !Py_TYPE(descr)->tp_descr_get) return CALL_NEXT; /* the dict's */
    PyObject *dget = em_user_descr_method(descr, EM_STR(dunder_get));
    if (!dget) return em_trace_fail(T, EMA_ATTR, "%s.%s (property or descriptor)", tp->tp_name, n);
    /* a data descriptor of a Python class: type(descr).__get__(descr, o, type(o)), traced */
    if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
    EmSym *args[3] = {em_sym_known(T, descr, n), base, em_sym_known(T, (PyObject *)tp, tp->tp_name)};
    return args[0] && args[2] ? em_inline(T, dget, args, 3, NULL, out) : EM_ERR;
}

/* generic: object.__getattribute__ semantics even when the type overrides it. */
static EmStatus obj_attr_impl(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self,
                              int generic) {
    PyObject *o = base->obj;
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    EmStatus st = EM_ERR;
    if (Py_IS_TYPE(o, &PySuper_Type) && base->items.len == 1) return super_attr(T, base, name, method, out, self);
    if (PyModule_Check(o)) return module_attr(T, base, name, n, out);
    int done;
    EmSym *stored = T->stores.len ? em_obj_stored(T, base, name) : NULL;
    if (em_store_deleted(stored)) return deleted_attr(T, base, name, n);
    if (stored) { /* written earlier in this trace (replayed after the graph) */
        *out = stored;
        return EM_OK;
    }
    if ((st = describing_attr(T, base, name, n, out, &done)) != EM_OK || done) return st;
    if (base->src < 0 && (PyType_Check(o) || PyObject_TypeCheck(o, (PyTypeObject *)EM_KNOWN(op_packet))))
        return trusted_class_attr(T, base, name, n, out, self);
    if (base->src < 0)
        return em_trace_fail(T, EMA_ATTR, "%s.%s of an object made while tracing", Py_TYPE(o)->tp_name, n);
    if (PyType_Check(o)) return type_attr(T, base, name, method, out, self);
    PyTypeObject *tp = Py_TYPE(o);
    if ((st = dunder_attr(T, base, name, method, out, &done)) != EM_OK || done) return st;
    PyObject *getattr_hook = NULL;
    if (!generic && tp->tp_getattro != PyObject_GenericGetAttr && !em_is_module(o) &&
        ((st = getattribute_hook(T, base, name, n, &getattr_hook, out, &done)) != EM_OK || done))
        return st;
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr && (st = descr_attr(T, base, descr, name, n, method, out, self)) != CALL_NEXT) return st;
    if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
    PyObject *v;
    int32_t slot;
    if (!descr && T->mutated.len && em_is_module(o)) { /* its storage changed in this trace */
        EmSym *hit;
        int gone, r = module_changed_lookup(T, o, name, &hit, &gone);
        if (r) return r < 0 ? EM_ERR : (*out = hit, EM_OK);
        if (gone) return em_trace_fail(T, EMA_ATTR, "%s.%s (removed from the module in this trace)", tp->tp_name, n);
    }
    if (instance_value(T, base, name, descr, &v, &slot)) return EM_ERR;
    if (v) {
        if (slot < 0) return EM_ERR;
        *out = em_sym_wrap(T, v, slot, &st);
        return *out ? EM_OK : st;
    }
    if (!descr && getattr_hook) { /* __getattr__ answers while the instance dict has no such name */
        int absent = attr_absent(T, base, name, 1);
        if (absent <= 0) return absent < 0 ? EM_ERR : em_trace_fail(T, EMA_ATTR, "%s.%s (changed)", tp->tp_name, n);
        return inline_attr_hook(T, getattr_hook, base, name, out);
    }
    if (!descr && em_is_module(o)) { /* a module class's own __getattr__ (nn.Module's reads the tables) */
        PyObject *ga = _PyType_Lookup(tp, EM_STR(dunder_getattr));
        if (ga && PyFunction_Check(ga) &&
            ga != _PyType_Lookup((PyTypeObject *)em_state.nn_module_type, EM_STR(dunder_getattr))) {
            int absent = attr_absent(T, base, name, 1);
            if (absent < 0) return EM_ERR;
            if (absent) return inline_attr_hook(T, ga, base, name, out);
        }
    }
    if (!descr) return attr_not_found(T, base, name, n);
    if (Py_TYPE(descr)->tp_descr_get) { /* a method, a non-data descriptor: unless the instance dict gets one */
        if (em_obj_dict(o) && em_guard_check(T->P, EMG_ABSENT, base->src, name, 0)) return EM_ERR;
        return class_attr(T, base, tp, descr, n, method, out, self);
    }
    /* a plain class attribute: guard its value through a generic getattr */
    slot = em_guard_attr(T->P, base->src, name);
    if (slot < 0) return EM_ERR;
    *out = em_sym_wrap(T, descr, slot, &st);
    return *out ? EM_OK : st;
}

static EmStatus new_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self, int generic);

EmStatus em_sym_new_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    return new_attr(T, base, name, method, out, self, 0);
}

/* 1 when the trace made a weakref.ref to o (made while tracing). */
static int weakref_made_of(EmTracer *T, const EmSym *o) {
    for (int32_t i = 0; i < T->syms.len; i++)
        if (em_weakref_made(T->syms.data[i]) && T->syms.data[i]->items.data[0] == o) return 1;
    return 0;
}

static EmStatus new_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self, int generic) {
    PyTypeObject *tp = Py_TYPE(base->obj);
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    PyObject *ga = _PyType_Lookup(tp, EM_STR(dunder_getattribute));
    if (ga && PyFunction_Check(ga) && !generic) return inline_attr_hook(T, ga, base, name, out);
    PyObject *descr = _PyType_Lookup(tp, name);
    EmSym *attrs = base->items.data[0];
    int slot = em_new_slot(base, descr); /* read from attrs; unset: as if no descriptor (__getattr__) */
    if (slot) descr = NULL;
    if (descr && em_new_content_type(base) == &PyTuple_Type) { /* a namedtuple subclass's field */
        EmStatus st = em_tuple_field(T, descr, base->items.data[1], out);
        if (st != CALL_NEXT) return *self = NULL, st;
    }
    PyObject *dget = em_user_descr_method(descr, EM_STR(dunder_get));
    if (descr && Py_TYPE(descr)->tp_descr_set && !Py_TYPE(descr)->tp_descr_get)
        descr = NULL; /* a data descriptor without __get__: the instance dict answers */
    if (descr && Py_TYPE(descr)->tp_descr_set) { /* data descriptors come first */
        if (Py_IS_TYPE(descr, &PyProperty_Type)) return class_attr(T, base, tp, descr, n, method, out, self);
        if (dget) { /* a Python class's: type(descr).__get__(descr, o, type(o)), traced */
            EmSym *args[3] = {em_sym_known(T, descr, n), base, em_sym_known(T, (PyObject *)tp, tp->tp_name)};
            return args[0] && args[2] ? em_inline(T, dget, args, 3, NULL, out) : EM_ERR;
        }
        if (!strcmp(n, "__dict__")) {
            *out = attrs;
            return EM_OK;
        }
        if (!strcmp(n, "__class__")) return known_out(T, (PyObject *)tp, tp->tp_name, out);
        if (!strcmp(n, "__weakref__") && !weakref_made_of(T, base)) /* no weak reference to it yet */
            return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
        return em_trace_fail(T, EMA_ATTR, "%s.%s (descriptor of an object made while tracing)", tp->tp_name, n);
    }
    for (int32_t i = 0; i < attrs->keys.len; i++) {
        int eq = PyObject_RichCompareBool(attrs->keys.data[i], name, Py_EQ);
        if (eq < 0) return EM_ERR;
        if (eq) {
            *out = attrs->items.data[i];
            return EM_OK;
        }
    }
    if (!descr) {
        PyObject *gattr = _PyType_Lookup(tp, EM_STR(dunder_getattr));
        if (gattr && PyFunction_Check(gattr)) return inline_attr_hook(T, gattr, base, name, out);
        if (!gattr) /* the trace owns every attribute of this object: none of that name */
            return em_trace_raise_msg(T, PyExc_AttributeError, "'%s' object has no attribute '%U'", tp->tp_name, name);
        T->missing_attr = 1;
        T->missing_handlers = T->handlers;
        return em_trace_fail(T, EMA_ATTR, "%s.%s (not set)", tp->tp_name, n);
    }
    if (PyFunction_Check(descr) || Py_IS_TYPE(descr, &PyStaticMethod_Type) || Py_IS_TYPE(descr, &PyClassMethod_Type) ||
        Py_IS_TYPE(descr, &PyMethodDescr_Type) || Py_IS_TYPE(descr, &PyWrapperDescr_Type) ||
        Py_IS_TYPE(descr, (PyTypeObject *)EM_KNOWN(lru_wrapper)))
        return class_attr(T, base, tp, descr, n, method, out, self);
    if (dget) { /* a Python class's non-data descriptor the instance dict did not answer: its __get__ */
        EmSym *args[3] = {em_sym_known(T, descr, n), base, em_sym_known(T, (PyObject *)tp, tp->tp_name)};
        return args[0] && args[2] ? em_inline(T, dget, args, 3, NULL, out) : EM_ERR;
    }
    EmSym *cls = em_sym_known(T, (PyObject *)tp, tp->tp_name), *ignored = NULL;
    return cls ? type_attr(T, cls, name, 0, out, &ignored) : EM_ERR;
}

/* Attribute of a constant: its value when that is a constant too (a read-only mapping of
 * constants becomes a DICT sym), a builtin method bound to it as an object. */
EmStatus em_sym_const_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    if (em_set_made(base) ||
        em_set_of_frame(base)) { /* s.add: set's descriptor with self, so the call knows which set */
        PyObject *d = _PyType_Lookup(&PySet_Type, name); /* s.__eq__ too: the slot's operation on s */
        if (d && (Py_IS_TYPE(d, &PyMethodDescr_Type) || Py_IS_TYPE(d, &PyWrapperDescr_Type)))
            return em_sym_method(T, d, base, method, out, self);
    }
    PyObject *slot = PyType_Check(base->obj) || Py_TYPE(base->obj)->tp_dictoffset
                         ? NULL
                         : _PyType_Lookup(Py_TYPE(base->obj), name);
    if (slot && Py_IS_TYPE(slot, &PyWrapperDescr_Type)) /* r.__iter__: the slot's operation on r */
        return em_sym_method(T, slot, base, method, out, self);
    PyObject *v = PyObject_GetAttr(base->obj, name);
    if (!v && !(Py_TYPE(base->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyErr_ExceptionMatches(PyExc_AttributeError))
        return em_trace_raise_pending(T, "attribute"); /* a builtin type's lookup: the same each time */
    if (!v) {
        PyErr_Clear(); /* whatever a constant's lookup raises, Python raises again when the trace gives up */
        return em_trace_fail(T, EMA_ATTR, "%s.%s", Py_TYPE(base->obj)->tp_name, PyUnicode_AsUTF8(name));
    }
    if (Py_IS_TYPE(v, &PyDictProxy_Type)) {
        /* a read-only mapping of a constant (Signature.parameters): a dict of constants */
        PyObject *items = PyMapping_Items(v);
        Py_DECREF(v);
        EmSym *d = items ? em_sym_new(T, SYM_DICT) : NULL;
        if (d) d->seq_type = Py_NewRef((PyObject *)&PyDictProxy_Type); /* read-only, as the proxy */
        for (Py_ssize_t i = 0; d && i < PyList_GET_SIZE(items); i++) {
            PyObject *kv = PyList_GET_ITEM(items, i);
            PyObject *k = PyTuple_GET_ITEM(kv, 0), *iv = PyTuple_GET_ITEM(kv, 1);
            if (!is_pure(k, 0) || !is_pure(iv, 0)) {
                Py_DECREF(items);
                return em_trace_fail(T, EMA_ATTR, "%s.%s (a mapping of non-constants)", Py_TYPE(base->obj)->tp_name,
                                     PyUnicode_AsUTF8(name));
            }
            EmSym *c = em_sym_const(T, iv);
            if (!c || em_vec_push(&d->items, c) || em_vec_push(&d->keys, Py_NewRef(k))) d = NULL;
        }
        Py_XDECREF(items);
        *out = d;
        return d ? EM_OK : EM_ERR;
    }
    if (PyType_Check(base->obj) && PyMethod_Check(v) && PyMethod_GET_SELF(v) == base->obj &&
        PyFunction_Check(PyMethod_GET_FUNCTION(v))) { /* a classmethod of a class made in the trace (_make) */
        PyObject *f = Py_NewRef(PyMethod_GET_FUNCTION(v));
        Py_DECREF(v);
        EmStatus st = em_sym_method(T, f, base, method, out, self);
        Py_DECREF(f);
        return st;
    }
    /* an exception's chain (__context__, __cause__) of exceptions the trace made or raised */
    int chained = PyExceptionInstance_Check(base->obj) && PyExceptionInstance_Check(v);
    /* a tuple of constants and classes: a type hint's __args__ (int | None) */
    if (!is_pure(v, 0) && !PyCFunction_Check(v) && !chained && !(PyTuple_CheckExact(v) && tuple_key(v))) {
        Py_DECREF(v);
        return em_trace_fail(T, EMA_ATTR, "%s.%s", Py_TYPE(base->obj)->tp_name, PyUnicode_AsUTF8(name));
    }
    *out = PyCFunction_Check(v) ? em_sym_new(T, SYM_OBJ) : em_sym_const(T, v);
    if (*out && (*out)->kind == SYM_OBJ) (*out)->obj = Py_NewRef(v);
    Py_DECREF(v);
    return *out ? EM_OK : EM_ERR;
}

int em_is_module(PyObject *o) { return PyType_IsSubtype(Py_TYPE(o), (PyTypeObject *)em_state.nn_module_type); }
