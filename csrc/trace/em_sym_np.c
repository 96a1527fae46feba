/* em_sym_np.c: NumPy arrays over tensors (SYM_NDARRAY), traced as torch._numpy does it.
 * x.numpy() of a CPU tensor that does not require grad is an ndarray sym over x's sym (the same
 * graph value: a write through either is seen by both, as the shared memory makes it in eager);
 * numpy functions given tensors or ndarrays, ndarray methods, array-valued attributes,
 * operators and subscripts record graph calls of ember._np wrappers (functions of tensors);
 * metadata attributes (shape, dtype, strides...) are constants of the meta tensor. Anything
 * else asked of an ndarray aborts. An ndarray leaving the trace is made a numpy array over the
 * graph's tensor (em_trace.c, ember._np.to_numpy).
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* A helper of ember._rules called with args (new reference or NULL with an exception). */
static EM_NEW PyObject *np_helper(const char *name, PyObject *args) {
    PyObject *f = PyObject_GetAttrString(em_state.meta_run, name);
    PyObject *r = f && args ? PyObject_CallObject(f, args) : NULL;
    Py_XDECREF(f);
    Py_XDECREF(args);
    return r;
}

static EmSym *ndarray_of(EmTracer *T, EmSym *t) {
    EmSym *s = em_sym_new(T, SYM_NDARRAY);
    if (!s) return NULL;
    if (t->ref >= 0 && em_vec_push(&T->numpy_refs, t->ref)) return PyErr_NoMemory(), NULL;
    PyObject *np = PyImport_ImportModule("numpy");
    s->seq_type = np ? PyObject_GetAttrString(np, "ndarray") : NULL;
    Py_XDECREF(np);
    if (!s->seq_type || em_vec_push(&s->items, t)) return s->seq_type ? (PyErr_NoMemory(), NULL) : NULL;
    return s;
}

/* Eager numpy takes a tensor as an array through Tensor.numpy(): only one on the CPU that does
 * not require grad, and not a conjugate view. EM_OK, or the abort. */
static EmStatus array_able(EmTracer *T, EmSym *t) {
    const EmNode *n = &T->G->nodes.data[t->ref];
    if (n->requires_grad) return em_trace_fail(T, EMA_NOT_IN_GRAPH, "numpy array of a tensor that requires grad");
    if (n->dev_type != EMDEV_CPU) return em_trace_fail(T, EMA_NOT_IN_GRAPH, "numpy array of a tensor not on the CPU");
    if (em_dtype_class(n->dtype) == EMDC_COMPLEX || em_dtype_class(n->dtype) == EMDC_QUANT)
        return em_trace_fail(T, EMA_NOT_IN_GRAPH, "numpy array of a complex or quantized tensor");
    return EM_OK;
}

/* s with every ndarray (in tuples and lists too) replaced by its tensor, each tensor checked
 * (array_able): the argument as the wrapper receives it. NULL with the status in *st. */
static EmSym *as_tensors(EmTracer *T, EmSym *s, int depth, EmStatus *st) {
    if (depth > 8) return (*st = em_trace_fail(T, EMA_VALUE, "numpy argument nested too deep")), NULL;
    if (s->kind == SYM_NDARRAY) s = s->items.data[0];
    if (s->kind == SYM_TENSOR) return (*st = array_able(T, s)) == EM_OK ? s : NULL;
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || s->seq_type || !em_sym_has_tensor(s)) return s;
    EmSym *c = em_sym_new(T, s->kind);
    if (!c) return (*st = EM_ERR), NULL;
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *it = as_tensors(T, s->items.data[i], depth + 1, st);
        if (!it) return NULL;
        if (em_vec_push(&c->items, it)) return (*st = EM_ERR), PyErr_NoMemory(), NULL;
    }
    return c;
}

/* Marks ndarray a a numpy scalar (eager numpy gives one): its type that scalar's. */
static EmStatus make_scalar(EmTracer *T, EmSym *a) {
    PyObject *m = em_sym_meta(T, a->items.data[0]), *tp = m ? np_helper("np_scalar_type", PyTuple_Pack(1, m)) : NULL;
    if (!tp) return EM_ERR;
    Py_SETREF(a->seq_type, tp);
    a->pos = 1;
    return EM_OK;
}

/* A new array of scalar tensor t's value (np.asarray(s) of a numpy scalar: an array of its own). */
static EmStatus copy_of(EmTracer *T, EmSym *t, EmSym **out) {
    EmSym *a = ndarray_of(T, t);
    PyObject *m = a ? em_sym_meta(T, t) : NULL, *name = m ? PyUnicode_FromString("copy") : NULL;
    PyObject *info = name ? np_helper("np_attr_info", PyTuple_Pack(2, m, name)) : NULL;
    Py_XDECREF(name);
    if (!info) return EM_ERR;
    EmStatus st = em_np_call(T, PyTuple_GET_ITEM(info, 1), &a, 1, NULL, out);
    Py_DECREF(info);
    return st;
}

/* The sym of a wrapper's result r: a tensor is an ndarray (the argument's own when the wrapper
 * wrote into it and gave it back), a tuple or list of them a tuple or list of ndarrays. */
static EmStatus result_of(EmTracer *T, EmSym *r, EmSym **args, int n, EmSym **out) {
    if (r->kind == SYM_TENSOR) {
        for (int i = 0; i < n; i++)
            if (args[i]->kind == SYM_NDARRAY && args[i]->items.data[0] == r)
                return args[i]->pos ? copy_of(T, r, out) : ((*out = args[i]), EM_OK);
        return (*out = ndarray_of(T, r)) ? EM_OK : EM_ERR;
    }
    if (r->kind == SYM_TUPLE || r->kind == SYM_LIST)
        for (int32_t i = 0; i < r->items.len; i++)
            if (r->items.data[i]->kind == SYM_TENSOR && !(r->items.data[i] = ndarray_of(T, r->items.data[i])))
                return EM_ERR;
    *out = r;
    return EM_OK;
}

/* A probe's argument for s (ember._np.probe): an ndarray as _np.Arr(meta), a tensor as its meta
 * tensor, tuples and lists item by item, anything else its meta value. New reference, or NULL
 * (an exception set, or the abort's status in *st). */
static EM_NEW PyObject *probe_value(EmTracer *T, EmSym *s, int depth, EmStatus *st) {
    if (s->kind == SYM_NDARRAY) {
        PyObject *m = em_sym_meta(T, s->items.data[0]);
        return m ? np_helper("NpArr", PyTuple_Pack(2, m, s->pos ? Py_True : Py_False)) : NULL;
    }
    if (s->kind == SYM_TENSOR) return Py_XNewRef(em_sym_meta(T, s));
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || s->seq_type || depth > 8) {
        PyObject *v = em_meta_value(T, s);
        if (!v && !PyErr_Occurred()) *st = EM_ABORT;
        return v;
    }
    PyObject *r = s->kind == SYM_TUPLE ? PyTuple_New(s->items.len) : PyList_New(s->items.len);
    for (int32_t i = 0; r && i < s->items.len; i++) {
        PyObject *v = probe_value(T, s->items.data[i], depth + 1, st);
        if (!v) Py_CLEAR(r);
        else if (s->kind == SYM_TUPLE) PyTuple_SET_ITEM(r, i, v);
        else PyList_SET_ITEM(r, i, v);
    }
    return r;
}

/* What eager numpy's call gives (ember._np.probe; result: torch._numpy's, a meta value to
 * compare, or NULL): its answer as a new str, or NULL with the status in *st. */
static EM_NEW PyObject *probe(EmTracer *T, PyObject *wrapper, EmSym **args, int n, PyObject *kwnames, PyObject *result,
                              EmStatus *st) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *pos = PyTuple_New(n - nkw), *kw = PyDict_New();
    *st = EM_ERR;
    for (int i = 0; pos && kw && i < n; i++) {
        PyObject *v = probe_value(T, args[i], 0, st);
        if (!v || (i >= n - nkw && PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (n - nkw)), v))) {
            Py_XDECREF(v);
            Py_CLEAR(pos);
            break;
        }
        if (i < n - nkw) PyTuple_SET_ITEM(pos, i, v);
        else Py_DECREF(v);
    }
    PyObject *r = pos && kw ? np_helper("np_probe", PyTuple_Pack(4, wrapper, pos, kw, result ? result : Py_None))
                            : NULL;
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    if (r) *st = EM_OK; /* else EM_ABORT (em_meta_value recorded why) or EM_ERR */
    return r;
}

/* The meta value of a wrapper's result sym r, for the probe: a meta tensor, a tuple of them
 * (None for another item), or None. New reference, NULL with an exception. */
static EM_NEW PyObject *result_meta(EmTracer *T, EmSym *r) {
    if (r->kind == SYM_TENSOR) return Py_XNewRef(em_sym_meta(T, r));
    if (r->kind != SYM_TUPLE && r->kind != SYM_LIST) return Py_NewRef(Py_None);
    PyObject *t = PyTuple_New(r->items.len);
    for (int32_t i = 0; t && i < r->items.len; i++) {
        EmSym *it = r->items.data[i];
        PyObject *m = it->kind == SYM_TENSOR ? Py_XNewRef(em_sym_meta(T, it)) : Py_NewRef(Py_None);
        if (!m) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, m);
    }
    return t;
}

/* A tensor (not an ndarray) among s, in tuples and lists too. */
static int has_plain_tensor(EmSym *s, int depth) {
    if (s->kind == SYM_TENSOR) return 1;
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || depth > 8) return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if (has_plain_tensor(s->items.data[i], depth + 1)) return 1;
    return 0;
}

EmStatus em_np_call(EmTracer *T, PyObject *wrapper, EmSym **args, int n, PyObject *kwnames, EmSym **out) {
    EmSym *buf[64];
    if (n > 64) return em_trace_fail(T, EMA_CALL, "numpy call with more than 64 arguments");
    EmStatus st = EM_OK;
    int plain = 0;
    for (int i = 0; i < n; i++) {
        plain |= has_plain_tensor(args[i], 0);
        if (!(buf[i] = as_tensors(T, args[i], 0, &st))) return st;
    }
    EmSym *r = NULL;
    if ((st = em_op_record(T, EMOP_CALL, wrapper, buf, n, kwnames, NULL, &r)) != EM_OK) return st;
    /* what eager's numpy gives: an array, a scalar, or (given tensors) maybe a tensor; of the
     * dtypes and shapes torch._numpy's has, else the call runs as numpy */
    int zero_dim = r->kind == SYM_TENSOR && T->G->nodes.data[r->ref].ndim == 0;
    PyObject *res = result_meta(T, r);
    PyObject *kind = res ? probe(T, wrapper, args, n, kwnames, res, &st) : NULL;
    Py_XDECREF(res);
    const char *k = kind ? PyUnicode_AsUTF8(kind) : NULL;
    if (!k) return st == EM_OK ? EM_ERR : st;
    if (!strcmp(k, "mismatch"))
        st = em_trace_fail(T, EMA_NOT_IN_GRAPH, "a numpy call whose torch._numpy result differs in dtype or shape");
    else if (plain && strcmp(k, "array") && strcmp(k, "scalar"))
        st = em_trace_fail(T, EMA_NOT_IN_GRAPH, "a numpy call given a tensor (eager numpy's result: %s)", k);
    int scalar = zero_dim && !strcmp(k, "scalar"), contig = !strcmp(k, "array_c") && r->kind == SYM_TENSOR;
    Py_DECREF(kind);
    if (st != EM_OK) return st;
    if (contig) { /* numpy made a fresh C-ordered array where torch kept the argument's layout */
        PyObject *w = np_helper("np_contiguous", PyTuple_New(0));
        EmSym *a = w ? ndarray_of(T, r) : NULL;
        st = a ? em_np_call(T, w, &a, 1, NULL, out) : EM_ERR;
        Py_XDECREF(w);
        return st;
    }
    if ((st = result_of(T, r, args, n, out)) != EM_OK) return st;
    return scalar && (*out)->items.data[0] == r ? make_scalar(T, *out) : EM_OK;
}

/* s is a constant or a class (np.float32), or a tuple or list of such (a probe may be given it). */
static int plain_const(EmSym *s, int depth) {
    if (s->kind == SYM_CONST || (s->kind == SYM_OBJ && PyType_Check(s->obj))) return 1;
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || depth > 8) return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if (!plain_const(s->items.data[i], depth + 1)) return 0;
    return 1;
}

EmStatus em_np_function(EmTracer *T, PyObject *f, EmSym **args, int n, PyObject *kwnames, EmSym **out) {
    int tensors = 0, consts = 1;
    for (int i = 0; i < n; i++) {
        tensors |= em_sym_has_tensor(args[i]);
        consts &= plain_const(args[i], 0);
    }
    if (!tensors && !consts) return CALL_NEXT;
    PyObject *w = np_helper("np_function", PyTuple_Pack(1, f));
    if (!w) return EM_ERR;
    EmStatus st = w == Py_None ? CALL_NEXT : EM_OK;
    if (st == EM_OK && !tensors) { /* of constants: an array eager makes is made in the graph, a scalar is a constant */
        PyObject *kind = probe(T, w, args, n, kwnames, NULL, &st);
        if (kind && PyUnicode_CompareWithASCIIString(kind, "array")) st = CALL_NEXT;
        Py_XDECREF(kind);
    }
    if (st == EM_OK) st = em_np_call(T, w, args, n, kwnames, out);
    Py_DECREF(w);
    return st;
}

EmStatus em_np_op(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int n, EmSym **out) {
    if (op >= EMOP_IADD && op <= EMOP_IRSHIFT && args[0]->kind == SYM_NDARRAY && args[0]->pos) {
        op = em_op_binary_of(op); /* a numpy scalar is immutable: s += 1 makes a new one */
        fn = PyTuple_GET_ITEM(em_state.op_fns, op);
    }
    for (int i = 0; i < n; i++) /* eager's answer depends on numpy's and torch's versions: left to Python */
        if (args[i]->kind != SYM_NDARRAY && em_sym_has_tensor(args[i]))
            return em_trace_fail(T, EMA_VALUE, "%s between a numpy ndarray and a tensor", em_op_info[op].name);
    PyObject *w = np_helper("np_operator", PyTuple_Pack(1, fn));
    if (!w) return EM_ERR;
    EmStatus st = em_np_call(T, w, args, n, NULL, out);
    Py_DECREF(w);
    return st;
}

/* ---- the row ---- */

/* A metadata attribute's value v (a constant of the meta tensor): for symbolic sizes, shape is
 * the tuple of their syms and any other reading pins them. */
static EmStatus meta_attr(EmTracer *T, EmSym *a, const char *n, PyObject *v, EmSym **out) {
    EmSym *t = a->items.data[0];
    if (em_int_active(T) && em_node_has_sym_dims(T, t->ref)) {
        if (!strcmp(n, "shape")) {
            EmStatus st = em_tensor_shape(T, t, out);
            if (st == EM_OK) Py_CLEAR((*out)->seq_type); /* a plain tuple, not a torch.Size */
            return st;
        }
        if (strcmp(n, "ndim") && strcmp(n, "dtype") && strcmp(n, "itemsize")) {
            EmStatus st = em_node_specialize(T, t->ref);
            if (st != EM_OK) return st;
        }
    }
    return (*out = em_sym_const(T, v)) ? EM_OK : EM_ERR;
}

static EmStatus np_getattr(EmTracer *T, EmSym *a, PyObject *name, int method, EmSym **out, EmSym **self) {
    if (PyUnicode_Compare(name, EM_STR(dunder_class)) == 0) return *self = NULL, em_sym_type(T, a, out); /* type(a) */
    const char *n = PyUnicode_AsUTF8(name);
    PyObject *m = n ? em_sym_meta(T, a->items.data[0]) : NULL;
    PyObject *info = m ? np_helper("np_attr_info", PyTuple_Pack(2, m, name)) : NULL;
    if (!info) return EM_ERR;
    const char *kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(info, 0));
    PyObject *v = PyTuple_GET_ITEM(info, 1);
    EmStatus st;
    if (!kind) st = EM_ERR;
    else if (!strcmp(kind, "method")) {
        /* a numpy scalar's methods act on a temporary array of its value (s.fill(2) leaves s) */
        EmSym *on = a;
        st = a->pos ? copy_of(T, a->items.data[0], &on) : EM_OK;
        if (st == EM_OK && a->pos) st = make_scalar(T, on);
        if (st == EM_OK) st = em_sym_method(T, v, on, method, out, self);
    } else if (!strcmp(kind, "graph")) st = em_np_call(T, v, &a, 1, NULL, out);
    else if (!strcmp(kind, "value")) st = meta_attr(T, a, n, v, out);
    else st = em_trace_fail(T, EMA_ATTR, "%s of a numpy ndarray", n);
    Py_DECREF(info);
    return st;
}

static EmStatus np_getitem(EmTracer *T, EmSym *a, EmSym *key, EmSym **out) {
    EmSym *args[2] = {a, key};
    EmStatus st = em_np_op(T, EMOP_SUBSCR, PyTuple_GET_ITEM(em_state.op_fns, EMOP_SUBSCR), args, 2, out);
    if (st != EM_OK || !(*out)->pos) return st;
    /* a[i] that numpy gives as a scalar is a copy of the item (torch._numpy's is a view) */
    EmSym *s = *out;
    return (st = copy_of(T, s->items.data[0], out)) == EM_OK ? make_scalar(T, *out) : st;
}

/* iter(a): its items a[0], a[1]... taken at once (rows of a view each, or scalars). */
static EmStatus np_items(EmTracer *T, EmSym *a, EmSym **out) {
    EmSym *t = a->items.data[0];
    if (em_int_active(T) && em_node_has_sym_dims(T, t->ref)) {
        EmStatus st = em_node_specialize(T, t->ref);
        if (st != EM_OK) return st;
    }
    const EmNode *node = &T->G->nodes.data[t->ref];
    if (node->ndim == 0 || a->pos) {
        return em_trace_raise_msg(T, PyExc_TypeError, "iteration over a 0-d array");
    }
    int64_t n = em_ir_sizes(T->G, node)[0];
    if (n > 1024) return em_trace_fail(T, EMA_VALUE, "iteration over a numpy ndarray of more than 1024 rows");
    EmSym *l = em_sym_new(T, SYM_LIST);
    if (!l) return EM_ERR;
    for (int64_t i = 0; i < n; i++) {
        PyObject *k = PyLong_FromLongLong(i);
        EmSym *key = k ? em_sym_const(T, k) : NULL, *it = NULL;
        Py_XDECREF(k);
        if (!key) return EM_ERR;
        EmStatus st = np_getitem(T, a, key, &it);
        if (st != EM_OK) return st;
        if (em_vec_push(&l->items, it)) return PyErr_NoMemory(), EM_ERR;
    }
    *out = l;
    return EM_OK;
}

static EmStatus np_setitem(EmTracer *T, EmSym *a, EmSym *key, EmSym *v) {
    if (a->pos) { /* a numpy scalar is immutable */
        return em_trace_raise_msg(T, PyExc_TypeError, "'%s' object does not support item assignment",
                                  ((PyTypeObject *)a->seq_type)->tp_name);
    }
    PyObject *w = np_helper("np_setitem", PyTuple_New(0));
    if (!w) return EM_ERR;
    EmSym *args[3] = {a, key, v}, *r = NULL;
    EmStatus st = em_np_call(T, w, args, 3, NULL, &r);
    Py_DECREF(w);
    return st;
}

static EmStatus np_truth(EmTracer *T, EmSym *a, int *out) {
    (void)a;
    (void)out;
    return em_trace_fail(T, EMA_DATA_DEP, "truth value of a numpy ndarray");
}

const EmSymOps em_ndarray_ops = {
    .ident = EM_IDENT_UNKNOWN,
    .getattr = np_getattr,
    .getitem = np_getitem,
    .setitem = np_setitem,
    .truth = np_truth,
    .items = np_items,
};

EmStatus em_np_len(EmTracer *T, EmSym *a, EmSym **out) {
    EmSym *t = a->items.data[0];
    if (T->G->nodes.data[t->ref].ndim == 0 || a->pos) {
        return em_trace_raise_msg(T, PyExc_TypeError, "len() of unsized object");
    }
    return em_tensor_dim_size(T, t, 0, out);
}

EmSym *em_np_wrap(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    *st = EM_OK;
    if (strcmp(Py_TYPE(v)->tp_name, "numpy.ndarray")) return NULL;
    PyObject *conv = PyObject_GetAttrString(em_state.meta_run, "np_from_numpy");
    PyObject *t = conv ? PyObject_CallOneArg(conv, v) : NULL;
    if (!t) {
        Py_XDECREF(conv);
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return (*st = EM_ERR), NULL;
        PyErr_Clear(); /* an array the graph cannot take: an object */
        return NULL;
    }
    EmSym *a = NULL, *ts = NULL;
    int32_t tslot = em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)Py_TYPE(v), 0)
                        ? -1
                        : em_guard_call(T->P, slot, conv, "torch.from_numpy(%s)", 0);
    *st = EM_ERR;
    if (tslot >= 0 && (ts = em_sym_wrap(T, t, tslot, st)) && ts->kind == SYM_TENSOR) a = ndarray_of(T, ts);
    Py_DECREF(conv);
    Py_DECREF(t); /* the tensor sym holds it (spec) while the trace runs */
    if (a) *st = EM_OK;
    else if (*st == EM_OK) *st = em_trace_fail(T, EMA_INPUT, "numpy array");
    return a;
}

/* ---- known callables ---- */

/* torch's function `name` (borrowed from the torch module, or NULL with an exception). */
static PyObject *torch_fn(const char *name) {
    PyObject *torch = PyImport_ImportModule("torch"), *f = torch ? PyObject_GetAttrString(torch, name) : NULL;
    Py_XDECREF(torch);
    Py_XDECREF(f); /* the module keeps it */
    return f;
}

/* x.numpy(), x.numpy(force=b): an ndarray over x's sym (force=True: over x.detach()). */
EmStatus em_known_tensor_numpy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)fn;
    (void)self;
    int force = 0;
    if (kwnames && (n != 2 || PyTuple_GET_SIZE(kwnames) != 1 ||
                    PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "force") ||
                    all[1]->kind != SYM_CONST || !PyBool_Check(all[1]->obj)))
        return CALL_NEXT;
    if (kwnames) force = all[1]->obj == Py_True;
    else if (n != 1) return CALL_NEXT;
    if (all[0]->kind != SYM_TENSOR) return CALL_NEXT;
    EmSym *t = all[0];
    if (force && T->G->nodes.data[t->ref].requires_grad) {
        PyObject *detach = torch_fn("detach");
        EmStatus st = detach ? em_op_record(T, EMOP_CALL, detach, &t, 1, NULL, NULL, &t) : EM_ERR;
        if (st != EM_OK) return st;
    }
    EmStatus st = array_able(T, t);
    if (st != EM_OK) return st;
    return (*out = ndarray_of(T, t)) ? EM_OK : EM_ERR;
}

/* torch.tensor(a) of an ndarray sym: a contiguous copy of its tensor. */
EmStatus em_known_torch_tensor(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames || all[0]->kind != SYM_NDARRAY) return CALL_NEXT;
    PyObject *clone = torch_fn("clone"), *fmt = torch_fn("contiguous_format");
    PyObject *kw = clone && fmt ? Py_BuildValue("(s)", "memory_format") : NULL;
    EmSym *args[2] = {all[0]->items.data[0], kw ? em_sym_const(T, fmt) : NULL};
    EmStatus st = args[1] ? em_op_record(T, EMOP_CALL, clone, args, 2, kw, NULL, out) : EM_ERR;
    Py_XDECREF(kw);
    return st;
}

/* torch.from_numpy(a), torch.as_tensor(a) of an ndarray sym: a new tensor over its tensor's
 * memory, with its strides, that is no view (t.detach(): the array's tensor never requires grad):
 * not t itself, whose identity and metadata are its own (`t2.unsqueeze_(0)` changed the array;
 * fuzz 2806 #1223; view_as made a view, which detach_() refuses: fuzz 2811 #758). A numpy scalar is no array: torch.as_tensor makes a
 * tensor of its own (a copy; writes to it must not reach the immutable scalar), torch.from_numpy
 * raises (left to Python). */
EmStatus em_known_from_numpy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    if (n != 1 || kwnames || all[0]->kind != SYM_NDARRAY) return CALL_NEXT;
    if (all[0]->pos)
        return fn->obj == EM_KNOWN(as_tensor) ? em_known_torch_tensor(T, fn, self, all, n, kwnames, out)
                                              : em_trace_fail(T, EMA_CALL, "torch.from_numpy of a numpy scalar");
    PyObject *detach = torch_fn("detach");
    return detach ? em_op_record(T, EMOP_CALL, detach, all[0]->items.data, 1, NULL, NULL, out) : EM_ERR;
}
