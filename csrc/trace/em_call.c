/* em_call.c: what a call becomes (DESIGN.md: one table of rules, in ember/_rules.py, read
 * here): torch callables are recorded as graph nodes after running them on meta tensors;
 * tensor metadata queries and pure builtins on constants are evaluated; Python functions,
 * methods and modules are inlined (em_inline.c); container methods and structural builtins
 * are em_cont.c's; data-dependent and side-effecting calls abort.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* Rule numbers (em_rules.def; ember/_rules.py reads them as _C.RULE_*). */
enum {
#define X(name) RULE_##name,
#include "em_rules.def"
#undef X
};

static int rule_of(PyObject *fn) {
    PyObject *r = PyDict_GetItemWithError(em_state.rules, fn);
    if (!r) {
        if (PyErr_Occurred()) {
            PyErr_Clear(); /* unhashable */
        }
        r = PyObject_CallMethod(em_state.meta_run, "classify", "O", fn);
        if (!r) return -1;
        int v = (int)PyLong_AsLong(r);
        Py_DECREF(r);
        return v;
    }
    return (int)PyLong_AsLong(r);
}

/* Python value of a sym with tensors replaced by their meta tensors (new ref), handed to real
 * code (a meta run, a builtin evaluated on known values). NULL with a Python exception, or
 * NULL without one after em_trace_fail: a value that cannot be handed over (a function made
 * while tracing, an iterator, nesting deeper than EM_MAX_NEST, such as a cycle). */
static EM_NEW PyObject *meta_value_at(EmTracer *T, EmSym *s, int *has_tensor, int depth, long *left);

/* A dict view's: the view of its dict's meta value; values() of a dict keyed by tokens, of a
 * dict of its values keyed by 0..n-1 (the keys are never seen through it). */
static EM_NEW PyObject *meta_view(EmTracer *T, EmSym *s, int *has_tensor, int depth, long *left) {
    EmSym *ds = s->items.data[0];
    PyObject *d = NULL;
    if (s->pos == 'v' && em_dict_has_tokens(ds)) {
        d = PyDict_New();
        for (int32_t i = 0; d && i < ds->items.len; i++) {
            PyObject *v = meta_value_at(T, ds->items.data[i], has_tensor, depth + 1, left);
            PyObject *k = v ? PyLong_FromLong(i) : NULL;
            if (!k || PyDict_SetItem(d, k, v)) Py_CLEAR(d);
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
    } else {
        d = meta_value_at(T, ds, has_tensor, depth + 1, left);
    }
    PyObject *r = d ? em_view_of(s, d) : NULL;
    Py_XDECREF(d);
    return r;
}

/* A slice of its bounds' traced values (symbolic ones as SYM_INT in meta_value_at). */
static EM_NEW PyObject *meta_slice(EmTracer *T, EmSym *s) {
    PyObject *v[3];
    for (int i = 0; i < 3; i++) {
        EmSym *b = s->items.data[i];
        v[i] = b->kind == SYM_INT ? PyLong_FromLongLong(em_size_hint(&T->sizes, b->expr)) : Py_XNewRef(b->obj);
    }
    PyObject *r = v[0] && v[1] && v[2] ? PySlice_New(v[0], v[1], v[2]) : NULL;
    for (int i = 0; i < 3; i++) Py_XDECREF(v[i]);
    return r;
}

static EM_NEW PyObject *meta_value_at(EmTracer *T, EmSym *s, int *has_tensor, int depth, long *left) {
    if (depth > EM_MAX_NEST || --*left < 0) {
        em_trace_fail(T, EMA_VALUE, "a value nested more than %d deep (or holding itself)", EM_MAX_NEST);
        return NULL;
    }
    switch (s->kind) {
        case SYM_TENSOR: {
            *has_tensor = 1;
            PyObject *m = em_sym_meta(T, s);
            return m ? Py_NewRef(m) : NULL;
        }
        case SYM_OBJ:
            if (em_sym_placeholder(s)) {
                em_trace_fail(T, EMA_CALL, "real code given the function %s made while tracing",
                              PyUnicode_AsUTF8(((PyFunctionObject *)s->obj)->func_qualname));
                return NULL;
            }
            return Py_NewRef(s->obj);
        case SYM_CONST:
            if (em_set_changed(s)) { /* its copy's order is not the caller's set's */
                em_trace_fail(T, EMA_VALUE, "real code given a set of the frame the trace changed");
                return NULL;
            }
            return Py_NewRef(s->obj);
        case SYM_NEW: /* its placeholder: only type questions are asked of it (has_opaque) */ return Py_NewRef(s->obj);
        case SYM_INT: /* its traced value: an op's result sizes follow by rule or pin it (em_shape_sym) */
            return PyLong_FromLongLong(em_size_hint(&T->sizes, s->expr));
        case SYM_FLOAT: /* its traced value, for a pointwise operator's meta run; anything else uses its value */
            if (T->stand_ins) return PyFloat_FromDouble(T->item_dummy ? 2.5 : 1.5); /* em_item_call_check */
            return T->floats_ok || em_float_pin(T, s) == EM_OK ? Py_NewRef(s->obj) : NULL;
        case SYM_ITEM: /* a stand-in where its value cannot matter (em_item_call_check) */
            if (T->floats_ok) return em_item_dummy(s, T->item_dummy);
            return em_trace_fail(T, EMA_ITEM_DEP, "a number from .item() given to real code"), NULL;
        case SYM_SLICE: return meta_slice(T, s);
        case SYM_TUPLE:
        case SYM_LIST: {
            PyObject *r = s->kind == SYM_TUPLE ? PyTuple_New(s->items.len) : PyList_New(s->items.len);
            for (int32_t i = 0; r && i < s->items.len; i++) {
                PyObject *v = meta_value_at(T, s->items.data[i], has_tensor, depth + 1, left);
                if (!v) {
                    Py_CLEAR(r);
                    break;
                }
                if (s->kind == SYM_TUPLE) PyTuple_SET_ITEM(r, i, v);
                else PyList_SET_ITEM(r, i, v);
            }
            if (r && s->kind == SYM_TUPLE && s->seq_type) r = em_seq_retype(s->seq_type, r); /* x.shape: a Size */
            if (r && s->kind == SYM_LIST && s->seq_type) r = em_deque_from(s, r);
            return r;
        }
        case SYM_DICT: {
            PyObject *d = PyDict_New();
            for (int32_t i = 0; d && i < s->items.len; i++) {
                PyObject *v = meta_value_at(T, s->items.data[i], has_tensor, depth + 1, left);
                if (v && em_key_token_sym(s->keys.data[i])) /* a tensor or object key: not a value */
                    Py_SETREF(v, (em_trace_fail(T, EMA_VALUE, "real code given a dict keyed by %s",
                                                em_sym_describe(em_key_token_sym(s->keys.data[i]))),
                                  NULL));
                if (!v || PyDict_SetItem(d, s->keys.data[i], v)) Py_CLEAR(d);
                Py_XDECREF(v);
            }
            if (d && s->seq_type) { /* OrderedDict(d), defaultdict(factory, d): its own type */
                PyObject *fac = s->of.len ? meta_value_at(T, s->of.data[0], has_tensor, depth + 1, left) : NULL;
                if (s->of.len && !fac) Py_CLEAR(d);
                else
                    Py_SETREF(d, fac ? PyObject_CallFunctionObjArgs(s->seq_type, fac, d, NULL)
                                     : PyObject_CallOneArg(s->seq_type, d));
                Py_XDECREF(fac);
            }
            return d;
        }
        case SYM_VIEW: return meta_view(T, s, has_tensor, depth, left);
        default: em_trace_fail(T, EMA_CALL, "real code given a %s", em_sym_describe(s)); return NULL;
    }
}

static EM_NEW PyObject *meta_value(EmTracer *T, EmSym *s, int *has_tensor) {
    long left = EM_MAX_WALK;
    return meta_value_at(T, s, has_tensor, 0, &left);
}

EM_NEW PyObject *em_meta_value(EmTracer *T, EmSym *s) {
    int has_tensor = 0;
    return meta_value(T, s, &has_tensor);
}

/* The status after meta_value returned NULL. */
static EmStatus meta_value_status(void) { return PyErr_Occurred() ? EM_ERR : EM_ABORT; }

/* A sym (or a container holding one) that stands for a live Python object ember does not
 * model: evaluating a builtin on it would run user code or read unguarded state. */
static int has_opaque_at(EmSym *s, int depth, long *left) {
    if (depth > EM_MAX_NEST || --*left < 0) return 1;
    if (s->kind == SYM_OBJ) /* a nested function's cells are each call's own: not the ones seen now */
        return (!s->by_id && s->src >= 0) || em_sym_placeholder(s) || em_weakref_made(s) ||
               (s->by_id == 2 && ((PyFunctionObject *)s->obj)->func_closure);
    if (s->kind == SYM_ITER || s->kind == SYM_NULL || s->kind == SYM_CTX || s->kind == SYM_EXIT || s->kind == SYM_NEW ||
        s->kind == SYM_BOUND)
        return 1;
    if (s->kind == SYM_TUPLE || s->kind == SYM_LIST || s->kind == SYM_DICT || s->kind == SYM_VIEW)
        for (int32_t i = 0; i < s->items.len; i++)
            if (has_opaque_at(s->items.data[i], depth + 1, left)) return 1;
    return 0;
}

static int has_opaque(EmSym *s) {
    long left = EM_MAX_WALK;
    return has_opaque_at(s, 0, &left);
}

static PyObject *result_device_at(EmTracer *T, EmSym **args, int nargs, int depth, long *left) {
    PyObject *first = NULL;
    for (int i = 0; i < nargs && --*left >= 0; i++) {
        EmSym *s = args[i];
        PyObject *d = NULL;
        if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST) && depth < EM_MAX_NEST)
            d = result_device_at(T, s->items.data, s->items.len, depth + 1, left);
        else if (s->kind == SYM_TENSOR && T->G->nodes.data[s->ref].ndim != 0) d = s->device;
        if (d) return d;
        if (!first && s->kind == SYM_TENSOR) first = s->device;
    }
    return first;
}

PyObject *em_result_device(EmTracer *T, EmSym **args, int nargs) {
    long left = EM_MAX_WALK;
    return result_device_at(T, args, nargs, 0, &left);
}

/* Argument indices of each sym, then the headers copied contiguously: the node's args. */
int32_t em_node_args(EmTracer *T, EmSym **args, int nargs, EmStatus *st) {
    int32_t tmp[64];
    if (nargs > 64) {
        *st = em_trace_fail(T, EMA_CALL, "call with more than 64 arguments");
        return -1;
    }
    for (int i = 0; i < nargs; i++)
        if ((tmp[i] = em_sym_arg(T, args[i], st)) < 0) return -1;
    int32_t first = T->G->args.len;
    for (int i = 0; i < nargs; i++) {
        EmArg a = T->G->args.data[tmp[i]];
        if (em_ir_arg(T->G, a.kind, a.v, a.n) < 0) {
            *st = EM_ERR;
            PyErr_NoMemory();
            return -1;
        }
    }
    return first;
}

static int32_t kw_const(EmTracer *T, PyObject *kwnames) {
    if (!kwnames) return -1;
    PyObject *r = PyObject_Repr(kwnames);
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    int32_t c = u ? em_ir_const(T->G, EMC_OBJ, 0, 0, kwnames, u) : -1;
    Py_XDECREF(r);
    /* per-name text consts follow, for the dump */
    for (Py_ssize_t i = 0; c >= 0 && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (em_ir_const(T->G, EMC_OBJ, 0, 0, k, PyUnicode_AsUTF8(k)) < 0) c = -1;
    }
    if (c < 0 && !PyErr_Occurred()) PyErr_NoMemory();
    return c;
}

/* The str attribute `name` of o (borrowed from *keep, a new reference or NULL the caller
 * drops), or NULL. For names in messages and dumps only: whatever the lookup raises (a
 * property, a value that is no str) is dropped. */
static const char *name_attr(PyObject *o, const char *name, PyObject **keep) {
    *keep = PyObject_GetAttrString(o, name);
    const char *u = *keep && PyUnicode_Check(*keep) ? PyUnicode_AsUTF8(*keep) : NULL;
    if (!u) PyErr_Clear(); /* a name for messages: see above */
    return u;
}

const char *em_callable_name(PyObject *fn, char *buf, size_t n) {
    PyObject *q, *mod;
    const char *qs = name_attr(fn, "__qualname__", &q);
    if (!qs) {
        Py_XDECREF(q);
        qs = name_attr(fn, "__name__", &q);
    }
    if (!qs) {
        Py_XDECREF(q);
        snprintf(buf, n, "%s", Py_TYPE(fn)->tp_name);
        return buf;
    }
    const char *ms = name_attr(fn, "__module__", &mod);
    if (Py_IS_TYPE(fn, &PyMethodDescr_Type)) { /* list.sort, Tensor.abs (TensorBase's, as Tensor) */
        PyTypeObject *owner = PyDescr_TYPE(fn);
        ms = owner == em_state.tensor_type || (em_state.tensor_type && owner == em_state.tensor_type->tp_base)
                 ? "Tensor"
                 : owner->tp_name;
        qs = PyUnicode_AsUTF8(PyDescr_NAME(fn));
    }
    if (ms && !strncmp(ms, "torch._tensor", 13)) ms = NULL;
    if (qs && !strncmp(qs, "_VariableFunctionsClass.", 24)) qs += 24;
    snprintf(buf, n, "%s%s%s", ms ? ms : "", ms ? "." : "", qs ? qs : "?");
    Py_DECREF(q);
    Py_XDECREF(mod);
    return buf;
}

/* Records a node whose metadata was inferred in C (no meta run). */
static EmStatus record_inferred(EmTracer *T, EmOp op, PyObject *fn, const char *name, EmSym **args, int nargs,
                                PyObject *kwnames, const EmInferred *inf, EmSym **out) {
    PyObject *dev = NULL;
    for (int i = 0; i < nargs && !dev; i++)
        if (args[i]->kind == SYM_TENSOR) dev = args[i]->device;
    EmStatus st = EM_ERR;
    int32_t a0 = em_node_args(T, args, nargs, &st);
    if (a0 < 0) return st;
    int32_t fnc = -1, kwc = kwnames ? kw_const(T, kwnames) : -1;
    if (kwnames && kwc < 0) return EM_ERR;
    if (op == EMOP_CALL && (fnc = em_ir_const(T->G, EMC_OBJ, 0, 0, fn, name)) < 0) return PyErr_NoMemory(), EM_ERR;
    EmRef r = em_ir_node(T->G, op, a0, nargs, kwc, kwnames ? (int32_t)PyTuple_GET_SIZE(kwnames) : 0, fnc);
    if (r < 0 || em_ir_set_tensor(T->G, r, inf->dtype, inf->dev_type, inf->dev_index, inf->requires_grad, inf->ndim,
                                  inf->sizes, inf->strides))
        return PyErr_NoMemory(), EM_ERR;
    if (inf->requires_grad && !T->grad && T->start_grad && em_vec_push(&T->nograd_views, r))
        return PyErr_NoMemory(), EM_ERR; /* a view made without grad mode (em_trace.c out_node) */
    EmSym *s = em_sym_new(T, SYM_TENSOR);
    if (!s) return EM_ERR;
    s->ref = r;
    s->device = Py_NewRef(dev);
    /* a view of a tensor that requires grad: its meta tensor a view of the first such tensor's
     * (em_sym_meta), one step from it */
    EmSym *base = inf->view && inf->requires_grad && args[0]->kind == SYM_TENSOR ? args[0] : NULL;
    if (base && base->of.len) base = base->of.data[0];
    if (base && em_vec_push(&s->of, base)) return PyErr_NoMemory(), EM_ERR;
    *out = s; /* s->obj (its meta tensor) is made on demand by em_sym_meta */
    return EM_OK;
}

/* The call's arguments as meta values: *margs (positional, then fn for a GETATTR) and *mkw,
 * both new references. EM_OK, or the status with both NULL. */
static EmStatus meta_call_args(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                               PyObject **margs, PyObject **mkw) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int has_tensor = 0;
    EmStatus st = EM_ERR;
    *mkw = NULL;
    if (!(*margs = PyTuple_New(npos + (op == EMOP_GETATTR)))) return EM_ERR;
    for (Py_ssize_t i = 0; i < npos; i++) {
        PyObject *v = meta_value(T, args[i], &has_tensor);
        if (!v) {
            st = meta_value_status();
            goto fail;
        }
        PyTuple_SET_ITEM(*margs, i, v);
    }
    if (op == EMOP_GETATTR) PyTuple_SET_ITEM(*margs, npos, Py_NewRef(fn));
    if (!(*mkw = PyDict_New())) goto fail;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *v = meta_value(T, args[npos + i], &has_tensor);
        int bad = !v || PyDict_SetItem(*mkw, PyTuple_GET_ITEM(kwnames, i), v);
        if (!v) st = meta_value_status();
        Py_XDECREF(v);
        if (bad) goto fail;
    }
    return EM_OK;
fail:
    Py_CLEAR(*margs);
    Py_CLEAR(*mkw);
    return st;
}

/* The meta run raised: the trace aborts with the op's name and the exception's message. */
static EmStatus meta_run_failed(EmTracer *T, const char *name) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *msg = ev ? PyObject_Str(ev) : NULL;
    const char *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
    if (!m) PyErr_Clear(); /* the message is only decoration: whatever str() raised is dropped */
    EmStatus st = em_trace_fail(T, EMA_META, "%s (%.100s)", name, m ? m : "error");
    Py_XDECREF(msg);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    return st;
}

/* The sym of node r, whose meta result mres (on device rdev) is a tensor, a tuple/list of
 * tensors and Nones, or None (the caller checked). A tensor that is one of the arguments (an
 * in-place op) is that argument's sym, retargeted to r. */
/* Whether graph argument k (a tuple or list: one of its items) is node `old`. */
static int arg_refers(const EmGraph *G, int32_t k, EmRef old, int depth) {
    const EmArg *a = &G->args.data[k];
    if (a->kind == EMARG_REF) return a->v == old;
    if ((a->kind != EMARG_TUPLE && a->kind != EMARG_LIST) || depth > 16) return 0;
    for (int32_t c = 0; c < a->n; c++)
        if (arg_refers(G, a->v + c, old, depth + 1)) return 1;
    return 0;
}

/* Whether node `old` is an argument of a node made before node r (a view of it may exist). */
static int used_before(const EmGraph *G, EmRef old, EmRef r) {
    for (EmRef n = old + 1; n < r; n++) {
        const EmNode *x = &G->nodes.data[n];
        for (int32_t k = 0; k < x->nargs; k++)
            if (arg_refers(G, x->args + k, old, 0)) return 1;
    }
    return 0;
}

static EmStatus result_sym(EmTracer *T, EmRef r, PyObject *mres, PyObject *rdev, EmSym **args, int nargs, EmSym **out) {
    if (PyObject_TypeCheck(mres, em_state.tensor_type)) {
        for (int i = 0; i < nargs; i++)
            if (args[i]->kind == SYM_TENSOR && args[i]->obj == mres) {
                /* an in-place op that made the tensor require grad (requires_grad_(), add_(w)):
                 * views made of it before now require grad too, which their metas do not say */
                PyObject *rg = PyObject_GetAttrString(mres, "requires_grad");
                if (!rg) return EM_ERR;
                int grad = rg == Py_True;
                Py_DECREF(rg);
                if (grad && !T->G->nodes.data[args[i]->ref].requires_grad && used_before(T->G, args[i]->ref, r))
                    return em_trace_fail(T, EMA_VALUE,
                                         "an in-place op making a tensor that was used before require grad");
                if (em_sym_retarget(T, args[i], r, mres, rdev)) return EM_ERR;
                *out = args[i];
                return EM_OK;
            }
        /* inside a vmap, _remove_batch_dim of a batched wrapper of a tensor gives that tensor
         * itself (vmap(Tensor.acos_)(x) is x): the sym standing for it, now this node */
        for (int32_t i = T->in_vmap ? T->syms.len - 1 : -1; i >= 0; i--) {
            EmSym *s = T->syms.data[i];
            if (s->kind != SYM_TENSOR || s->obj != mres) continue;
            if (em_sym_retarget(T, s, r, mres, rdev)) return EM_ERR;
            *out = s;
            return EM_OK;
        }
        *out = em_sym_tensor(T, r, mres, rdev);
        return *out ? EM_OK : EM_ERR;
    }
    if (mres == Py_None) {
        T->G->nodes.data[r].vkind = EMV_NONE;
        *out = em_sym_const(T, Py_None);
        return *out ? EM_OK : EM_ERR;
    }
    T->G->nodes.data[r].vkind = EMV_SEQ;
    int is_list = PyList_Check(mres);
    EmSym *s = em_sym_new(T, is_list ? SYM_LIST : SYM_TUPLE);
    if (!s) return EM_ERR;
    if (!is_list && !PyTuple_CheckExact(mres)) s->seq_type = Py_NewRef((PyObject *)Py_TYPE(mres));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(mres); i++) {
        EmSym *it;
        if (PySequence_Fast_GET_ITEM(mres, i) == Py_None) { /* (out, None) results: a constant */
            it = em_sym_const(T, Py_None);
        } else {
            int32_t a = em_ir_arg(T->G, EMARG_REF, r, 0);
            EmRef ri = a < 0 ? -1 : em_ir_node(T->G, EMOP_ITEM, a, 1, -1, 0, -1);
            if (ri < 0) return PyErr_NoMemory(), EM_ERR;
            T->G->nodes.data[ri].aux = (int32_t)i;
            it = em_sym_tensor(T, ri, PySequence_Fast_GET_ITEM(mres, i), rdev);
        }
        if (!it || em_vec_push(&s->items, it)) return EM_ERR;
    }
    *out = s;
    return EM_OK;
}

/* What a meta run returned is a graph value: a tensor, None, or a tuple/list of tensors and Nones. */
static EmStatus check_meta_result(EmTracer *T, PyObject *mres, const char *name) {
    if (PyObject_TypeCheck(mres, em_state.tensor_type) || mres == Py_None) return EM_OK;
    if (!PyTuple_Check(mres) && !PyList_Check(mres))
        return em_trace_fail(T, EMA_DATA_DEP, "%s returning %s", name, Py_TYPE(mres)->tp_name);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(mres); i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(mres, i);
        if (!PyObject_TypeCheck(v, em_state.tensor_type) && v != Py_None)
            return em_trace_fail(T, EMA_DATA_DEP, "%s returning non-tensors", name);
    }
    return EM_OK;
}

/* Records the node of op (fn: the callable of a CALL, the name of a GETATTR) on args and
 * makes the result sym from the meta result mres on device rdev. */
static EmStatus record_meta_result(EmTracer *T, EmOp op, PyObject *fn, const char *name, EmSym **args, int nargs,
                                   PyObject *kwnames, PyObject *mres, PyObject *rdev, EmSym **out) {
    EmStatus st = check_meta_result(T, mres, name);
    if (st != EM_OK) return st;
    int32_t a0 = em_node_args(T, args, nargs, &st);
    if (a0 < 0) return st;
    int32_t fnc = -1, kwc = kw_const(T, kwnames);
    if (kwnames && kwc < 0) return EM_ERR;
    if (op == EMOP_CALL || op == EMOP_GETATTR) {
        fnc = em_ir_const(T->G, EMC_OBJ, 0, 0, fn, op == EMOP_CALL ? name : PyUnicode_AsUTF8(fn));
        if (fnc < 0) return PyErr_NoMemory(), EM_ERR;
    }
    int32_t nkw = kwnames ? (int32_t)PyTuple_GET_SIZE(kwnames) : 0;
    EmRef r = em_ir_node(T->G, op, a0, nargs, kwc, nkw, fnc);
    if (r < 0) return PyErr_NoMemory(), EM_ERR;
    return result_sym(T, r, mres, rdev, args, nargs, out);
}

EmStatus em_node_recall(EmTracer *T, EmRef r, PyObject *fn, const char *name, EmSym **args, int nargs,
                        PyObject *kwnames) {
    EmStatus st = EM_ERR;
    int32_t a0 = em_node_args(T, args, nargs, &st);
    if (a0 < 0) return st;
    int32_t kwc = kw_const(T, kwnames), fnc = kwnames && kwc < 0 ? -1 : em_ir_const(T->G, EMC_OBJ, 0, 0, fn, name);
    if (fnc < 0) return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
    EmNode *n = &T->G->nodes.data[r];
    n->op = EMOP_CALL;
    n->fn = fnc;
    n->args = a0;
    n->nargs = nargs;
    n->kwnames = kwc;
    n->nkw = kwnames ? (int32_t)PyTuple_GET_SIZE(kwnames) : 0;
    return EM_OK;
}

/* Records op on args as a graph node and makes the result sym: its metadata inferred in C
 * (em_infer.c) or from running meta_fn (fn when NULL) on meta values through _rules.run. */
static EmStatus op_record_sized(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                                PyObject *meta_fn, EmSym **out);
static EmStatus op_record(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                          PyObject *meta_fn, EmSym **out);

/* 1 for a bool operand of a subtraction: a bool tensor or a Python bool. */
static int bool_operand(EmTracer *T, const EmSym *s) {
    if (s->kind == SYM_CONST) return PyBool_Check(s->obj);
    return s->kind == SYM_TENSOR && s->ref >= 0 && T->G->nodes.data[s->ref].dtype == EMDT_BOOL;
}

/* A subtraction (`a - b`, `a -= b`, torch.sub/subtract/rsub and Tensor's) with one bool operand:
 * torch's CPU and CUDA kernels raise NotImplementedError, the meta kernel does not (it checks
 * two bool tensors only), so the trace raises it as eager does. CALL_NEXT for anything else. */
static EmStatus bool_subtraction(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames) {
    int sub = op == EMOP_SUB || op == EMOP_ISUB;
    for (int k = EMK_torch_sub; !sub && op == EMOP_CALL && k <= EMK_tensor_subtract_; k++)
        sub = fn == PyTuple_GET_ITEM(em_state.known, k);
    Py_ssize_t npos = nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    EmSym *a = npos >= 1 ? args[0] : NULL, *b = npos >= 2 ? args[1] : NULL;
    for (Py_ssize_t i = npos; sub && !b && i < nargs; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i - npos), "other") == 0) b = args[i];
    if (!sub || !a || !b || bool_operand(T, a) == bool_operand(T, b)) return CALL_NEXT; /* two: the meta kernel's */
    return em_trace_raise_msg(T, PyExc_NotImplementedError,
                              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                              "to invert a mask, use the `~` or `logical_not()` operator instead.");
}

int em_node_reaches(EmTracer *T, EmRef r, const EmRef *marks, int32_t nmarks) {
    int32_t n = T->G->nodes.len, cap = T->G->args.len + 1; /* a node is expanded once: one entry per argument */
    char *seen = calloc((size_t)n + 1, 1);
    EmRef *todo = malloc(sizeof(EmRef) * (size_t)cap);
    int top = 0, hit = 0;
    if (!seen || !todo) {
        free(seen);
        free(todo);
        return -1;
    }
    for (int32_t i = 0; i < nmarks; i++)
        if (marks[i] >= 0 && marks[i] < n) seen[marks[i]] = 2;
    todo[top++] = r;
    while (top) {
        EmRef x = todo[--top];
        if (x < 0 || x >= n || seen[x] == 1) continue;
        if (seen[x] == 2) {
            hit = 1;
            break;
        }
        seen[x] = 1;
        const EmNode *nd = &T->G->nodes.data[x];
        for (int32_t i = 0; i < nd->nargs; i++) {
            const EmArg *a = &T->G->args.data[nd->args + i];
            if (a->kind == EMARG_REF && top < cap) todo[top++] = a->v;
            for (int32_t k = 0; (a->kind == EMARG_TUPLE || a->kind == EMARG_LIST) && k < a->n; k++) {
                const EmArg *c = &T->G->args.data[a->v + k];
                if (c->kind == EMARG_REF && top < cap) todo[top++] = c->v;
            }
        }
    }
    free(seen);
    free(todo);
    return hit;
}

/* An in-place op changed node r's tensor: when that is an x.data read or a value computed from
 * one, every x.data node becomes GETATTR "data" (a tensor of its own version counter at run
 * time, as eager's: a backward that saved x does not see the change; such a graph runs on
 * ember's executor, see ember/backends/fx.py). */
static EmStatus data_written(EmTracer *T, EmRef r) {
    int hit = em_node_reaches(T, r, T->data_nodes.data, T->data_nodes.len);
    if (hit < 0) return PyErr_NoMemory(), EM_ERR;
    if (!hit) return EM_OK;
    PyObject *name = PyUnicode_InternFromString("data");
    int32_t c = name ? em_ir_const(T->G, EMC_OBJ, 0, 0, name, "data") : -1;
    Py_XDECREF(name);
    if (c < 0) return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
    for (int32_t i = 0; i < T->data_nodes.len; i++) {
        EmNode *n = &T->G->nodes.data[T->data_nodes.data[i]];
        n->op = EMOP_GETATTR;
        n->fn = c;
    }
    T->data_nodes.len = 0;
    return EM_OK;
}

/* x.to(other, ...) is x.to(other.device, other.dtype, ...): buf gets those arguments (the
 * other's metadata is the trace's, guarded), and their count is returned; 0 for any other
 * call, -1 on error. */
static int to_other(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmSym **buf) {
    static PyObject *to;
    if (!to && !(to = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "to"))) return -1; /* held for good */
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (op != EMOP_CALL || fn != to || nargs - nkw < 2 || args[1]->kind != SYM_TENSOR || nargs > 62) return 0;
    PyObject *m = em_sym_meta(T, args[1]), *dt = m ? PyObject_GetAttrString(m, "dtype") : NULL;
    buf[0] = args[0];
    buf[1] = dt ? em_sym_const(T, args[1]->device) : NULL;
    buf[2] = buf[1] ? em_sym_const(T, dt) : NULL;
    Py_XDECREF(dt);
    if (!buf[2]) return -1;
    for (int i = 2; i < nargs; i++) buf[i + 1] = args[i];
    return nargs + 1;
}

EmStatus em_op_record(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, PyObject *meta_fn,
                      EmSym **out) {
    if (op == EMOP_SUBSCR && nargs == 2 && !kwnames && (!meta_fn || meta_fn == em_op_fn(EMOP_SUBSCR))) {
        /* x[mask]: its size from the data (em_dyn_mask_index records it with its own meta_fn) */
        EmStatus dst = em_dyn_mask_index(T, args, out);
        if (dst != CALL_NEXT) return dst;
    }
    EmSym *moved[64];
    int nmoved = to_other(T, op, fn, args, nargs, kwnames, moved);
    if (nmoved < 0) return EM_ERR;
    if (nmoved) {
        args = moved;
        nargs = nmoved;
    }
    EmStatus bst = bool_subtraction(T, op, fn, args, nargs, kwnames);
    if (bst != CALL_NEXT) return bst;
    EmRef self = nargs && args[0]->kind == SYM_TENSOR ? args[0]->ref : -1, into = -1; /* into: an out= tensor */
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        EmSym *o = args[nargs - nkw + k];
        if (o->kind == SYM_TENSOR && !PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), "out"))
            into = o->ref;
    }
    if (into >= 0 && T->numpy_refs.len) { /* numpy's array holds its storage: eager's resize raises */
        int r = em_node_reaches(T, into, T->numpy_refs.data, T->numpy_refs.len);
        if (r < 0) return PyErr_NoMemory(), EM_ERR;
        if (r) { /* a break would drop the array (a dead local): the frame runs as Python */
            T->no_break = 1;
            return em_trace_fail(T, EMA_VALUE, "out= a tensor a numpy array was made over");
        }
    }
    /* a float input stays one only as an operand of a pointwise operator (em_sym_float.c); a
     * number the graph computes goes where its value cannot change the result's metadata */
    int items = em_item_among(args, nargs), as_sizes = 0;
    /* a float input given to a call: a graph input where the call's result metadata cannot
     * depend on it (a fill value, torch.tensor's data), else pinned (em_sym_float.c) */
    int floats = !items && op == EMOP_CALL && em_float_among(args, nargs);
    EmSym *sized[64];
    if (floats) {
        EmStatus fst = em_item_call_check(T, op, fn, args, nargs, kwnames, &as_sizes);
        if (fst != EM_OK) return fst;
        items = !as_sizes; /* its floats are values of the graph */
        as_sizes = 0;
    } else if (items) {
        EmStatus ist = em_item_call_check(T, op, fn, args, nargs, kwnames, &as_sizes);
        if (ist == EM_OK && as_sizes && nargs > 64) ist = em_trace_fail(T, EMA_VALUE, "more than 64 arguments");
        if (ist == EM_OK && as_sizes && op == EMOP_CALL) ist = em_split_hints(T, fn, args, nargs, kwnames);
        if (ist == EM_OK && as_sizes) ist = em_item_sizes(T, args, nargs, sized);
        if (ist != EM_OK) return ist;
        if (as_sizes) { /* torch.arange(n), x.new_zeros(n, 3): sizes from the graph */
            args = sized;
            items = 0;
        }
    }
    int floats_ok = T->floats_ok;
    T->floats_ok = items || (op != EMOP_CALL && (em_op_info[op].flags & EMF_POINTWISE));
    EmStatus st = op_record_sized(T, op, fn, args, nargs, kwnames, meta_fn, out);
    T->floats_ok = floats_ok;
    if (st == EM_ABORT && (as_sizes || em_int_holds_unbacked(T, args, nargs))) {
        Py_CLEAR(T->exc); /* its meta run had stand-ins for sizes from .item(): not eager's outcome */
        char name[160];
        if (op == EMOP_CALL) em_callable_name(fn, name, sizeof(name));
        else snprintf(name, sizeof(name), "%s", em_op_info[op].name);
        st = em_trace_fail(T, EMA_ITEM_DEP, "%s given a size from .item()", name);
    }
    if (st == EM_OK && T->data_nodes.len && self >= 0 &&
        (em_op_info[op].kind == EMOK_SETITEM || (*out == args[0] && args[0]->ref != self)))
        st = data_written(T, self);
    if (st == EM_OK && T->data_nodes.len && into >= 0) st = data_written(T, into);
    if (st == EM_OK) st = em_fold_after(T, op, fn, args, nargs, kwnames, self, into, *out);
    return st;
}

static EmStatus op_record_sized(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                                PyObject *meta_fn, EmSym **out) {
    if (!em_int_active(T)) return op_record(T, op, fn, args, nargs, kwnames, meta_fn, out);
    EmRef self = nargs && args[0]->kind == SYM_TENSOR ? args[0]->ref : -1;
    EmStatus st = op_record(T, op, fn, args, nargs, kwnames, meta_fn, out);
    if (st != EM_OK) return st;
    if (*out == args[0] && self >= 0 && (*out)->ref != self) /* in place: self's sizes when the op keeps them */
        return em_inplace_keeps_sizes(op, fn) ? em_node_copy_dims(T, (*out)->ref, self) : EM_OK;
    return em_shape_sym(T, op, fn, args, nargs, kwnames, *out);
}

/* s is a constant, or a plain tuple or list of such (depth levels at most). */
static int all_const(const EmSym *s, int depth) {
    if (s->kind == SYM_CONST) return 1;
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || s->seq_type || s->spec || depth <= 0) return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if (!all_const(s->items.data[i], depth - 1)) return 0;
    return 1;
}

/* Puts id(meta tensor) -> real tensor into d for each known tensor s holds; -1 on error. */
static int known_metas(EmTracer *T, EmSym *s, PyObject *d, int depth) {
    PyObject *real = em_fold_known(T, s);
    if (real) {
        PyObject *m = em_sym_meta(T, s), *id = m ? PyLong_FromVoidPtr(m) : NULL;
        int e = !id || PyDict_SetItem(d, id, real);
        Py_XDECREF(id);
        return e ? -1 : 0;
    }
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST && s->kind != SYM_DICT) || depth > 4) return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if (known_metas(T, s->items.data[i], d, depth + 1)) return -1;
    return 0;
}

/* The meta run raised (the exception pending): where it read the value of a tensor the trace
 * knows (x.view(k, -1)), _rules.run_known runs it again on those tensors' real values. Its
 * result, or NULL with the first exception pending. */
static EM_NEW PyObject *run_known(EmTracer *T, PyObject *fn, PyObject *margs, PyObject *mkw, PyObject *dev,
                                  EmSym **args, int nargs) {
    PyObject *et, *ev, *tb, *res = NULL;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *d = PyDict_New();
    int e = !d;
    for (int i = 0; !e && i < nargs; i++) e = known_metas(T, args[i], d, 0);
    if (!e && PyDict_GET_SIZE(d))
        res = PyObject_CallMethod(em_state.meta_run, "run_known", "OOOOO", fn, margs, mkw, dev ? dev : Py_None, d);
    Py_XDECREF(d);
    if (res) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return res;
    }
    PyErr_Clear(); /* the first failure is the one reported */
    PyErr_Restore(et, ev, tb);
    return NULL;
}

static EmStatus op_record(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                          PyObject *meta_fn, EmSym **out) {
    char name[160];
    if (op == EMOP_CALL) em_callable_name(fn, name, sizeof(name));
    else snprintf(name, sizeof(name), "%s", em_op_info[op].name);
    EmInferred inf;
    inf.view = 0;
    int inferred = em_infer_pointwise(T, op, fn, args, nargs, kwnames, &inf);
    if (inferred < 0) return EM_ERR;
    if (inferred) return record_inferred(T, op, fn, name, args, nargs, NULL, &inf, out);
    if (op == EMOP_CALL) inferred = em_infer_shape(T, fn, args, nargs, kwnames, &inf);
    else if (op == EMOP_SUBSCR && nargs == 2 && !T->autocast) /* a vmap level: batched meta runs */
        inferred = em_infer_getitem(T, args[0], args[1], &inf);
    if (inferred) return inferred < 0 ? EM_ERR : record_inferred(T, op, fn, name, args, nargs, kwnames, &inf, out);
    PyObject *margs, *mkw;
    EmStatus st = meta_call_args(T, op, fn, args, nargs, kwnames, &margs, &mkw);
    if (st != EM_OK) return st;
    PyObject *dev = em_result_device(T, args, nargs);
    int consts = 1; /* every argument a constant: a pure op of no tensor may run for real (em_fold.c) */
    for (int i = 0; i < nargs && consts; i++) consts = all_const(args[i], 4);
    PyObject *res = PyObject_CallMethod(em_state.meta_run, "run", "OOOOO", meta_fn ? meta_fn : fn, margs, mkw,
                                        dev ? dev : Py_None, consts ? Py_True : Py_False);
    if (!res && T->known_refs.len) res = run_known(T, meta_fn ? meta_fn : fn, margs, mkw, dev, args, nargs);
    Py_DECREF(margs);
    Py_DECREF(mkw);
    if (!res) return meta_run_failed(T, name);
    EmSym *numbers[64], **rec = args;
    if (PyTuple_GET_SIZE(res) == 3 && PyTuple_GET_ITEM(res, 2) == Py_True && nargs <= 64) {
        /* known tensors whose values the call read: recorded as those values (em_fold.c) */
        for (int i = 0; i < nargs; i++)
            if (!(numbers[i] = em_fold_numbers(T, args[i], 0))) {
                Py_DECREF(res);
                return EM_ERR;
            }
        rec = numbers;
    }
    st = record_meta_result(T, op, fn, name, rec, nargs, kwnames, PyTuple_GET_ITEM(res, 0), PyTuple_GET_ITEM(res, 1),
                            out);
    Py_DECREF(res);
    if (st == EM_ERR && !PyErr_Occurred()) PyErr_NoMemory();
    return st;
}

/* Returned by a step of em_call or a known callable's handler: the call is not its case, the
 * next step decides. Outside EmStatus's values, and never returned by em_call. */

/* A builtin given iterators: those that consume their iterable (_rules.ITER_CONSUMERS: sum,
 * sorted, "".join...) get a tuple of the items left, and the iterator is used up, for any/all
 * up to the item that decides (constant items only); other builtins keep the iterator (only
 * type questions may be asked of it). */
static EmStatus consume_iter_args(EmTracer *T, PyObject *f, EmSym **all, int n) {
    int how = -1;
    for (int i = 0; i < n; i++) {
        EmSym *it = all[i];
        if (it->kind != SYM_ITER) continue;
        if (how < 0) {
            PyObject *r = PyObject_CallMethod(em_state.meta_run, "iter_consumer", "O", f);
            how = r ? (int)PyLong_AsLong(r) : -1;
            Py_XDECREF(r);
            if (how < 0) return EM_ERR;
        }
        if (how == 0) return EM_OK; /* it keeps the iterator: only type questions reach here */
        EmSym *t = em_sym_new(T, SYM_TUPLE), *v = NULL;
        if (!t) return EM_ERR;
        if (how >= 2) { /* any (2) stops after a true item, all (3) after a false one: taken one at a time */
            for (;;) {
                EmStatus st = em_iter_take(T, it, &v);
                if (st != EM_OK) return st;
                if (!v) break;
                if (v->kind != SYM_CONST)
                    return em_trace_fail(T, EMA_CALL, "any()/all() over a %s", em_sym_describe(v));
                int b = PyObject_IsTrue(v->obj);
                if (b < 0) return EM_ERR;
                if (em_vec_push(&t->items, v)) return PyErr_NoMemory(), EM_ERR;
                if (b == (how == 2)) break;
            }
        } else {
            EmStatus ust = em_iter_use(T, it);
            if (ust != EM_OK) return ust;
            for (int32_t k = it->pos; k < it->items.len; k++)
                if (em_vec_push(&t->items, it->items.data[k])) return PyErr_NoMemory(), EM_ERR;
            it->pos = it->items.len;
        }
        all[i] = t;
    }
    return EM_OK;
}

/* isinstance(obj, cls) while tracing. Constants and objects from the frame answer for
 * themselves; tensors from their meta tensor and device (_rules.tensor_isinstance: the legacy
 * types such as torch.FloatTensor by dtype, device and layout, all guarded); values made while
 * tracing (tuples, namedtuples, lists, dicts, iterators, instances) from their type where cls's
 * metaclass decides by type (_rules.isinstance_by_type), else the trace aborts. */
static EmStatus call_isinstance(EmTracer *T, EmSym *obj, EmSym *cls, EmSym **out) {
    PyObject *c = em_sym_value(T, cls), *r = NULL;
    if (!c)
        return PyErr_Occurred() ? EM_ERR
                                : em_trace_fail(T, EMA_CALL, "isinstance with a %s as the class", em_sym_describe(cls));
    EmStatus st = EM_OK;
    if (obj->kind == SYM_CONST || (obj->kind == SYM_OBJ && !em_sym_placeholder(obj))) {
        int v = PyObject_IsInstance(obj->obj, c);
        r = v < 0 ? NULL : Py_NewRef(v ? Py_True : Py_False);
    } else if (obj->kind == SYM_TENSOR) {
        PyObject *m = em_sym_meta(T, obj);
        if (!m) st = EM_ERR;
        else
            r = PyObject_CallMethod(em_state.meta_run, "tensor_isinstance", "OOO", m,
                                    obj->device ? obj->device : Py_None, c);
    } else {
        EmSym *tp = NULL;
        st = em_sym_type(T, obj, &tp);
        if (st == EM_OK) r = PyObject_CallMethod(em_state.meta_run, "isinstance_by_type", "OO", tp->obj, c);
    }
    Py_DECREF(c);
    if (st != EM_OK) return st;
    if (!r) {
        return em_trace_abandon(T, EMA_CALL, "isinstance of a %s raised", em_sym_describe(obj));
    }
    if (r == Py_None) {
        Py_DECREF(r);
        return em_trace_fail(T, EMA_CALL, "isinstance of a %s with a class whose __instancecheck__ reads the object",
                             em_sym_describe(obj));
    }
    *out = em_sym_const(T, r);
    Py_DECREF(r);
    return *out ? EM_OK : EM_ERR;
}

/* args as builtin fn sees them: where fn only iterates its arguments (sum, min, max, any, all,
 * sorted), an instance of a builtin container's subclass without a Python __iter__ is its
 * contents (em_slot_operand, written to buf, which *args then is); else all. */
static EmStatus iterated_args(EmTracer *T, PyObject *fn, EmSym **all, int nargs, EmSym **buf, EmSym ***args) {
    static const char *const names[] = {"sum", "min", "max", "any", "all", "sorted", NULL};
    PyObject *m = PyCFunction_Check(fn) ? ((PyCFunctionObject *)fn)->m_module : NULL;
    *args = all;
    if (nargs > 64 || !m || !PyUnicode_Check(m) || PyUnicode_CompareWithASCIIString(m, "builtins")) return EM_OK;
    for (int i = 0; names[i]; i++)
        if (!strcmp(((PyCFunctionObject *)fn)->m_ml->ml_name, names[i])) {
            for (int k = 0; k < nargs; k++) {
                EmStatus st = em_slot_operand(T, all[k], &buf[k]);
                if (st != EM_OK) return st;
            }
            *args = buf;
            return EM_OK;
        }
    return EM_OK;
}

/* call_eval's callable raised (the exception pending): a pure function of constants raises
 * the same in Python, so the trace raises it; else the trace is abandoned. */
static EmStatus eval_raised(EmTracer *T, int rule, int has_tensor, EmSym **args, int nargs, const char *name) {
    int known = rule == RULE_CONST && !has_tensor;
    for (int i = 0; i < nargs && known; i++) known = all_const(args[i], 4);
    if (known && PyErr_ExceptionMatches(PyExc_Exception) && !PyErr_ExceptionMatches(PyExc_MemoryError) &&
        !PyErr_ExceptionMatches(PyExc_RecursionError))
        return em_trace_raise_pending(T, "a call raised on constants");
    return em_trace_abandon(T, rule == RULE_META_QUERY ? EMA_META : EMA_CALL, "%s on these arguments", name);
}

/* Evaluates fn on the known values of args (meta tensors in place of tensors). Tensor
 * results become graph calls; pure results constants; errors abort. */
static EmStatus call_eval(EmTracer *T, PyObject *fn, EmSym **all, int nargs, PyObject *kwnames, int rule, EmSym **out) {
    EmSym *buf[64], **args;
    EmStatus ist = iterated_args(T, fn, all, nargs, buf, &args);
    if (ist != EM_OK) return ist;
    int has_tensor = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *stack[65];
    char name[160];
    em_callable_name(fn, name, sizeof(name));
    if (nargs > 64) return em_trace_fail(T, EMA_CALL, "%s with too many arguments", name);
    int n = 0;
    EmStatus st = EM_ERR;
    /* only type-level questions may be asked of objects ember does not model */
    int introspect = fn == EM_KNOWN(isinstance) || fn == EM_KNOWN(issubclass) || fn == EM_KNOWN(callable) ||
                     fn == (PyObject *)&PyType_Type;
    /* questions about types a meta tensor answers as its tensor does (has_torch_function...) */
    int type_query = PySet_Contains(em_state.type_query_fns, fn) == 1;
    for (int i = 0; i < nargs && !introspect; i++)
        if (has_opaque(args[i])) return em_trace_fail(T, EMA_CALL, "%s on a %s", name, em_sym_describe(args[i]));
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind == SYM_ITER || args[i]->kind == SYM_NULL)
            return em_trace_fail(T, EMA_CALL, "%s on a %s", name, em_sym_describe(args[i]));
    int size_free = introspect || type_query || PySet_Contains(em_state.size_free_fns, fn) == 1;
    for (int i = 0; i < nargs && em_int_active(T) && !size_free; i++)
        if ((st = em_sym_specialize(T, args[i])) != EM_OK) return st; /* evaluated on values: pinned */
    for (; n < nargs; n++)
        /* type questions (callable(f)) may be asked of a function made while tracing: its stand-in
         * has its type */
        if (introspect && em_sym_placeholder(args[n])) stack[n] = Py_NewRef(args[n]->obj);
        else if (introspect && args[n]->kind == SYM_ITEM) stack[n] = em_item_dummy(args[n], 0); /* its type */
        else if (!(stack[n] = meta_value(T, args[n], &has_tensor))) {
            st = meta_value_status();
            goto done;
        }
    PyObject *r = PyObject_Vectorcall(fn, stack, (size_t)(nargs - nkw), kwnames);
    if (!r) {
        st = eval_raised(T, rule, has_tensor, args, nargs, name);
        goto done;
    }
    if (has_tensor && rule == RULE_CONST &&
        (PyObject_TypeCheck(r, em_state.tensor_type) || PyTuple_Check(r) || PyList_Check(r))) {
        /* a builtin applied to tensors that makes tensors (abs(x), sum(tensors)): an op */
        Py_DECREF(r);
        st = em_op_record(T, EMOP_CALL, fn, args, nargs, kwnames, NULL, out);
        goto done;
    }
    if (has_tensor && rule == RULE_CONST && !introspect && !type_query && fn != EM_KNOWN(len)) {
        /* str(t), repr(t), hash(t), format(t)...: the meta tensor's answer is not the tensor's */
        Py_DECREF(r);
        st = em_trace_fail(T, EMA_NOT_IN_GRAPH, "%s of a tensor", name);
        goto done;
    }
    if (PyList_CheckExact(r) || (PyTuple_CheckExact(r) && !has_tensor)) {
        EmSym *s = em_sym_new(T, PyList_CheckExact(r) ? SYM_LIST : SYM_TUPLE);
        for (Py_ssize_t i = 0; s && i < PySequence_Fast_GET_SIZE(r); i++) {
            EmSym *it = em_sym_const(T, PySequence_Fast_GET_ITEM(r, i));
            if (!it || em_vec_push(&s->items, it)) s = NULL;
        }
        Py_DECREF(r);
        *out = s;
        st = s ? EM_OK : EM_ERR;
        goto done;
    }
    PyObject *nm = PyUnicode_FromString("is_const");
    PyObject *chk = nm ? PyObject_CallMethodOneArg(em_state.meta_run, nm, r) : NULL;
    Py_XDECREF(nm);
    int pure = chk ? PyObject_IsTrue(chk) : -1;
    Py_XDECREF(chk);
    if (pure != 1) {
        if (pure == 0) st = em_trace_fail(T, EMA_DATA_DEP, "%s returning %s", name, Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        goto done;
    }
    *out = em_sym_const(T, r);
    Py_DECREF(r);
    st = *out ? EM_OK : EM_ERR;
done:
    for (int i = 0; i < n; i++) Py_DECREF(stack[i]);
    return st;
}

/* object.__ne__(self, other): self's type's __eq__ (traced), inverted unless NotImplemented. */
static EmStatus object_ne(EmTracer *T, EmSym *self, EmSym *other, EmSym **out) {
    EmSym *eq = NULL, *bound = NULL, *r = NULL;
    EmStatus st = em_sym_getattr(T, self, EM_STR(dunder_eq), 1, &eq, &bound);
    if (st == EM_OK)
        st = bound ? em_call(T, eq, bound, &other, 1, NULL, &r) : em_call(T, eq, NULL, &other, 1, NULL, &r);
    if (st != EM_OK) return st;
    if (r->kind == SYM_CONST && r->obj == Py_NotImplemented) return (*out = r), EM_OK;
    int truth = 0;
    if ((st = em_sym_truth(T, r, &truth)) != EM_OK) return st;
    *out = em_sym_const(T, truth ? Py_False : Py_True);
    return *out ? EM_OK : EM_ERR;
}

/* d.__get__(o[, type]) of a C attribute descriptor d (Tensor.shape): o.<d's name>, where that
 * lookup on o's type finds d itself (d is guarded by identity). */
static EmStatus descr_get(EmTracer *T, EmSym *d, EmSym **args, int nargs, EmSym **out) {
    PyObject *name = d->kind == SYM_OBJ ? PyDescr_NAME(d->obj) : NULL;
    int tensor = nargs >= 1 && args[0]->kind == SYM_TENSOR; /* a Tensor or a Parameter */
    PyTypeObject *tp = nargs < 1 || nargs > 2 ? NULL : tensor ? em_state.tensor_type : em_sym_known_type(args[0]);
    if (!name || !tp || _PyType_Lookup(tp, name) != d->obj ||
        (tensor && _PyType_Lookup(em_state.param_type, name) != d->obj))
        return em_trace_fail(T, EMA_CALL, "__get__ of a %s", em_sym_describe(d));
    if (em_sym_type_guarded(d)) {
        if (em_guard_check(T->P, EMG_ID, d->src, d->obj, 0)) return EM_ERR;
        d->by_id = 1;
    }
    EmSym *self = NULL;
    return em_sym_getattr(T, args[0], name, 0, out, &self);
}

/* A builtin method (a method or slot-wrapper descriptor) called on an instance made while
 * tracing, or object.__setattr__/__delattr__ on an object from the frame: object's attribute protocol,
 * a builtin container's methods on its contents. */
static EmStatus call_builtin_method(EmTracer *T, PyObject *fn, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    PyTypeObject *owner = PyDescr_TYPE(fn);
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(fn));
    if (!n) return EM_ERR;
    if (owner == &PyBaseObject_Type) {
        if (!strcmp(n, "__setattr__") && nargs == 2 && args[0]->kind == SYM_CONST && PyUnicode_Check(args[0]->obj)) {
            EmStatus st = em_obj_generic_set(T, self, args[0]->obj, args[1]);
            if (st != EM_OK) return st;
        } else if (!strcmp(n, "__delattr__") && nargs == 1 && args[0]->kind == SYM_CONST &&
                   PyUnicode_Check(args[0]->obj) && (self->kind == SYM_OBJ || self->kind == SYM_NEW)) {
            EmStatus st = em_obj_generic_del(T, self, args[0]->obj);
            if (st != EM_OK) return st;
        } else if (!strcmp(n, "__init__") && nargs == 0 && self->kind == SYM_NEW) {
        } else if (!strcmp(n, "__ne__") && nargs == 1) {
            return object_ne(T, self, args[0], out);
        } else if (!strcmp(n, "__eq__") && nargs == 1) { /* by identity, else NotImplemented */
            int same = 0;
            EmStatus st = em_sym_is(T, self, args[0], &same);
            if (st != EM_OK) return st;
            *out = em_sym_const(T, same ? Py_True : Py_NotImplemented);
            return *out ? EM_OK : EM_ERR;
        } else {
            return em_trace_fail(T, EMA_CALL, "object.%s on a %s", n, em_sym_describe(self));
        }
        *out = em_sym_const(T, Py_None);
        return *out ? EM_OK : EM_ERR;
    }
    if ((owner == &PyGetSetDescr_Type || owner == &PyMemberDescr_Type) && !strcmp(n, "__get__"))
        return descr_get(T, self, args, nargs, out);
    int lazy = !em_frame_dict_rw(self); /* until the trace changes it: guarded per key */
    if (lazy && self->kind == SYM_OBJ && PyDict_Check(self->obj) && self->src >= 0 && owner == &PyDict_Type &&
        !strcmp(n, "__getitem__") && nargs == 1)
        return em_dict_getitem(T, self, args[0], out);
    if (lazy && self->kind == SYM_OBJ && PyDict_Check(self->obj) && owner == &PyDict_Type &&
        (!strcmp(n, "get") || !strcmp(n, "__getitem__") || !strcmp(n, "__contains__")))
        return em_container_method(T, fn, self, args, nargs, out); /* dict's storage, guarded per key */
    PyTypeObject *ct = em_new_content_type(self);
    if (ct && PyType_IsSubtype(ct, owner)) return em_new_content_call(T, fn, self, args, nargs, out);
    if (em_frame_items_method(self, fn)) {
        EmSym *d = NULL; /* a dict or list subclass's instance from the frame: the base's methods on its items */
        EmStatus st = em_frame_items(T, self, &d);
        return st == EM_OK ? em_builtin_on_items(T, fn, self, d, args, nargs, out) : st;
    }
    return em_trace_fail(T, EMA_CALL, "%s.%s on a %s", owner->tp_name, n, em_sym_describe(self));
}

EmStatus em_call_dunder(EmTracer *T, EmSym *self, const char *name, EmSym **args, int nargs, EmSym **out) {
    PyObject *nm = PyUnicode_InternFromString(name);
    if (!nm) return EM_ERR;
    PyObject *f = _PyType_Lookup(Py_TYPE(self->obj), nm);
    Py_DECREF(nm);
    if (f && PyFunction_Check(f)) {
        EmSym *all[4];
        all[0] = self;
        for (int i = 0; i < nargs && i < 3; i++) all[i + 1] = args[i];
        return em_inline(T, f, all, nargs + 1, NULL, out);
    }
    if (!f) {
        PyObject *e = PyUnicode_FromFormat("'%s' object has no attribute '%s'", Py_TYPE(self->obj)->tp_name, name);
        EmStatus st = e ? em_trace_raise_new(T, PyExc_TypeError, e) : EM_ERR;
        Py_XDECREF(e);
        return st;
    }
    if ((self->kind == SYM_NEW && (Py_IS_TYPE(f, &PyMethodDescr_Type) || Py_IS_TYPE(f, &PyWrapperDescr_Type))) ||
        em_frame_items_method(self, f))
        return call_builtin_method(T, f, self, args, nargs, out);
    return em_trace_fail(T, EMA_VALUE, "%s of a %s", name, em_sym_describe(self));
}

/* A call of a partial: its bound arguments, then the call's; its keywords, then the call's
 * (which win). */
static EmStatus call_partial(EmTracer *T, EmSym *p, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int32_t bpos = p->pos, bkw = p->keys.len;
    EmSym *all[65];
    if (bpos + nargs + bkw > 64) return em_trace_fail(T, EMA_CALL, "partial call with too many arguments");
    int n = 0;
    for (int32_t i = 0; i < bpos; i++) all[n++] = p->items.data[1 + i];
    for (Py_ssize_t i = 0; i < npos; i++) all[n++] = args[i];
    PyObject *names = PyList_New(0);
    if (!names) return EM_ERR;
    for (int32_t i = 0; i < bkw; i++) { /* partial's keywords not given again by the call */
        int again = 0;
        for (Py_ssize_t k = 0; k < nkw && !again; k++)
            again = PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, k), p->keys.data[i]) == 0;
        if (again) continue;
        if (PyList_Append(names, p->keys.data[i])) goto error;
        all[n++] = p->items.data[1 + bpos + i];
    }
    for (Py_ssize_t k = 0; k < nkw; k++) {
        if (PyList_Append(names, PyTuple_GET_ITEM(kwnames, k))) goto error;
        all[n++] = args[npos + k];
    }
    PyObject *kw = PyList_GET_SIZE(names) ? PyList_AsTuple(names) : NULL;
    Py_DECREF(names);
    if (PyErr_Occurred()) return EM_ERR;
    EmStatus st = em_call(T, p->items.data[0], NULL, all, n, kw, out);
    Py_XDECREF(kw);
    return st;
error:
    Py_DECREF(names);
    return EM_ERR;
}

/* functools.partial(fn, *args, **kw) made while tracing; a partial of a partial is flattened
 * as functools does (its arguments first, its keywords updated by the new ones). */
static EmStatus make_partial(EmTracer *T, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw;
    if (npos < 1) return em_trace_fail(T, EMA_CALL, "functools.partial without a function");
    EmSym *fn = all[0], *base = fn->kind == SYM_PARTIAL ? fn->items.data[0] : fn;
    int32_t ipos = fn->kind == SYM_PARTIAL ? fn->pos : 0, ikw = fn->kind == SYM_PARTIAL ? fn->keys.len : 0;
    EmSym *pos[64], *kwv[64];
    PyObject *kwn[64];
    int np = 0, nk = 0;
    if (ipos + npos > 64 || ikw + nkw > 64) return em_trace_fail(T, EMA_CALL, "functools.partial with many arguments");
    for (int32_t i = 0; i < ipos; i++) pos[np++] = fn->items.data[1 + i];
    for (Py_ssize_t i = 1; i < npos; i++) pos[np++] = all[i];
    for (int32_t i = 0; i < ikw; i++) {
        kwn[nk] = fn->keys.data[i];
        kwv[nk++] = fn->items.data[1 + ipos + i];
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int k = 0;
        while (k < nk && PyUnicode_Compare(kwn[k], name)) k++;
        kwn[k] = name;
        kwv[k] = all[npos + i];
        if (k == nk) nk++;
    }
    EmSym *p = em_sym_new(T, SYM_PARTIAL);
    if (!p || em_vec_push(&p->items, base)) return p ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    p->pos = np;
    for (int i = 0; i < np; i++)
        if (em_vec_push(&p->items, pos[i])) return PyErr_NoMemory(), EM_ERR;
    for (int i = 0; i < nk; i++)
        if (em_vec_push(&p->items, kwv[i]) || em_vec_push(&p->keys, Py_NewRef(kwn[i]))) return PyErr_NoMemory(), EM_ERR;
    *out = p;
    return EM_OK;
}

/* A functools.partial read from the frame: its func, args and keywords through guarded slots. */
static EmStatus input_partial(EmTracer *T, EmSym *fn, EmSym **out) {
    PyObject *names[3] = {EM_STR(func), EM_STR(args), EM_STR(keywords)};
    EmSym *parts[3];
    EmStatus st = EM_ERR;
    for (int i = 0; i < 3; i++) {
        int32_t slot = em_guard_attr(T->P, fn->src, names[i]);
        PyObject *v = slot < 0 ? NULL : PyObject_GetAttr(fn->obj, names[i]);
        parts[i] = v ? em_sym_wrap(T, v, slot, &st) : NULL;
        Py_XDECREF(v);
        if (!parts[i]) return st;
    }
    if (parts[1]->kind == SYM_CONST && (st = em_seq_items(T, parts[1], &parts[1])) != EM_OK) return st;
    if (parts[1]->kind != SYM_TUPLE || parts[2]->kind != SYM_DICT)
        return em_trace_fail(T, EMA_CALL, "functools.partial with unusual state");
    EmSym *p = em_sym_new(T, SYM_PARTIAL);
    if (!p || em_vec_push(&p->items, parts[0])) return p ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    p->pos = parts[1]->items.len;
    for (int32_t i = 0; i < parts[1]->items.len; i++)
        if (em_vec_push(&p->items, parts[1]->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < parts[2]->keys.len; i++)
        if (em_vec_push(&p->items, parts[2]->items.data[i]) || em_vec_push(&p->keys, Py_NewRef(parts[2]->keys.data[i])))
            return PyErr_NoMemory(), EM_ERR;
    *out = p;
    return EM_OK;
}

/* A known callable's handler (em_known.def), and each of em_call's steps: fn is the callee's
 * sym, self the receiver of a method call or NULL, all self (when given) then the arguments,
 * keyword values last (n of them in all; kwnames names the last ones, or is NULL). Returns
 * EM_OK with *out, EM_ABORT, EM_ERR, or CALL_NEXT with *out untouched: not its case. */

/* A method of os.environ: get/[]/in answered from its _data dict, guarded per key. */
static EmStatus call_environ(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    const char *mn = PyUnicode_AsUTF8(((PyFunctionObject *)fn->obj)->func_name);
    int get = mn && !strcmp(mn, "get"), item = mn && !strcmp(mn, "__getitem__"),
        has = mn && !strcmp(mn, "__contains__");
    if (!mn) return EM_ERR;
    if ((get && (nargs == 1 || nargs == 2)) || ((item || has) && nargs == 1)) {
        int found;
        EmStatus st = em_env_lookup(T, self, args[0], &found, out);
        if (st != EM_OK) return st;
        if (has) *out = em_sym_const(T, found ? Py_True : Py_False);
        else if (!found && item) return em_trace_fail(T, EMA_VALUE, "missing environment variable");
        else if (!found) *out = nargs == 2 ? args[1] : em_sym_const(T, Py_None);
        return *out ? EM_OK : EM_ERR;
    }
    return CALL_NEXT;
}

/* A bound method read from the frame (stored in an attribute, passed in): its function and
 * self are guarded through their own slots, then called. */
static EmStatus call_input_method(EmTracer *T, EmSym *fn, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    int32_t fs = em_guard_attr(T->P, fn->src, EM_STR(dunder_func));
    int32_t ss = fs < 0 ? -1 : em_guard_attr(T->P, fn->src, EM_STR(dunder_self));
    if (ss < 0) return EM_ERR;
    EmStatus st;
    EmSym *fsym = em_sym_wrap(T, PyMethod_GET_FUNCTION(fn->obj), fs, &st);
    EmSym *ssym = fsym ? em_sym_wrap(T, PyMethod_GET_SELF(fn->obj), ss, &st) : NULL;
    if (!ssym) return st;
    return em_call(T, fsym, ssym, args, nargs, kwnames, out);
}

/* em_call's first step: calls decided by what fn's sym (or self's) is, not by the callee's
 * identity: a with block's __exit__; with a self, a method of os.environ (self's identity);
 * without one, syms whose object is not the callee (a bound method, a partial made while
 * tracing or read from the frame, a bound method or weakref.ref from the frame). It comes
 * first because the later steps take fn->obj for the callee; any other sym that is neither
 * an object nor a constant aborts here. The checks exclude each other (by kind, by self). */
/* ---- the call slots of the kinds' rows (em_sym_ops.h) ---- */

/* A constant callee: os.environ's methods here (their function may be a constant), anything
 * else by its value in em_call's later steps. */
EmStatus em_call_by_value(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames,
                          EmSym **out) {
    if (self && self->kind == SYM_OBJ && self->obj == em_state.os_environ && PyFunction_Check(fn->obj) && !kwnames)
        return call_environ(T, fn, self, args, nargs, out);
    return CALL_NEXT;
}

/* An object from the frame or a constant: os.environ's methods, partials, bound methods and
 * weak references read from the frame are taken apart here; anything else by its value. */
EmStatus em_obj_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    if (self && fn->src >= 0 && PyMethod_Check(fn->obj) && nargs < 64) {
        /* a bound method from the frame in a method call's place (3.11's call of a with block's
         * __exit__, held across a break): `self` is its first argument */
        EmSym *all[65] = {self};
        for (int i = 0; i < nargs; i++) all[i + 1] = args[i];
        return call_input_method(T, fn, all, nargs + 1, kwnames, out);
    }
    if (self) return em_call_by_value(T, fn, self, args, nargs, kwnames, out);
    if (em_weakref_made(fn)) { /* r() of weakref.ref(o) made while tracing: o, while something holds it */
        if (nargs || kwnames) return em_trace_fail(T, EMA_CALL, "a weakref called with arguments");
        EmSym *o = fn->items.data[0];
        if (o->src < 0 && !em_frames_hold(T, o)) /* made in the trace and maybe dead: Python answers */
            return em_trace_fail(T, EMA_VALUE, "a weakref to a %s the frames may no longer hold", em_sym_describe(o));
        return (*out = o), EM_OK;
    }
    if (fn->src < 0) return CALL_NEXT;
    if (Py_TYPE(fn->obj) == (PyTypeObject *)EM_KNOWN(partial)) {
        EmSym *p = NULL;
        EmStatus st = input_partial(T, fn, &p);
        return st == EM_OK ? call_partial(T, p, args, nargs, kwnames, out) : st;
    }
    if (PyMethod_Check(fn->obj)) return call_input_method(T, fn, args, nargs, kwnames, out);
    if (nargs == 0 && PyWeakref_CheckRefExact(fn->obj)) {
        /* ref(): its referent (or None), loaded through the weakref by the guard */
        int32_t slot = em_guard_weakref(T->P, fn->src);
        if (slot < 0) return EM_ERR;
        EmStatus st;
        *out = em_sym_wrap(T, PyWeakref_GetObject(fn->obj), slot, &st);
        return *out ? EM_OK : st;
    }
    return CALL_NEXT;
}

/* A self beside a callable that does not bind (a bound method, a partial): only CALL's
 * stack convention put it there (3.11 applies a decorator as [decorator, function]): the first
 * argument. all: room for nargs + 1. */
static EmSym **self_first(EmSym *self, EmSym **args, int *nargs, EmSym **all) {
    if (!self) return args;
    all[0] = self;
    for (int i = 0; i < *nargs; i++) all[i + 1] = args[i];
    ++*nargs;
    return all;
}

/* A bound method as a value: its function called with its self. */
static EmStatus bound_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames,
                           EmSym **out) {
    EmSym *all[66];
    if (nargs > 64) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
    args = self_first(self, args, &nargs, all);
    return em_call(T, fn->items.data[1], fn->items.data[0], args, nargs, kwnames, out);
}

static EmStatus partial_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames,
                             EmSym **out) {
    EmSym *all[66];
    if (nargs > 64) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
    args = self_first(self, args, &nargs, all);
    return call_partial(T, fn, args, nargs, kwnames, out);
}

/* The __exit__ a with block calls at its end: CALL 2 on (exit, None, None, None) on 3.12
 * hands the first None over as self, so it counts as an argument here. */
static EmStatus exit_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames,
                          EmSym **out) {
    EmSym *all[3];
    int n = 0;
    if (kwnames || nargs + (self != NULL) > 3) return em_trace_fail(T, EMA_CALL, "__exit__ with other arguments");
    if (self) all[n++] = self;
    for (int i = 0; i < nargs; i++) all[n++] = args[i];
    return em_ctx_exit_call(T, fn, all, n, out);
}

/* m.__self__, m.__func__; any other attribute of a bound method is its function's (as the
 * method object forwards it: m.__name__). */
static EmStatus bound_attr(EmTracer *T, EmSym *m, PyObject *name, int method, EmSym **out, EmSym **self) {
    *self = NULL;
    if (!PyUnicode_CompareWithASCIIString(name, "__self__")) return (*out = m->items.data[0]), EM_OK;
    if (!PyUnicode_CompareWithASCIIString(name, "__func__")) return (*out = m->items.data[1]), EM_OK;
    return em_sym_getattr(T, m->items.data[1], name, method, out, self);
}

const EmSymOps em_bound_ops = {.call = bound_call, .getattr = bound_attr};
/* p.func, p.args, p.keywords of a partial sym (args and keywords as new containers). */
static EmStatus partial_attr(EmTracer *T, EmSym *p, PyObject *name, int method, EmSym **out, EmSym **self) {
    (void)method;
    *self = NULL;
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    if (!strcmp(n, "func")) {
        *out = p->items.data[0];
        return EM_OK;
    }
    int args = !strcmp(n, "args");
    if (!args && strcmp(n, "keywords")) return em_trace_fail(T, EMA_ATTR, "functools.partial.%s", n);
    EmSym *r = em_sym_new(T, args ? SYM_TUPLE : SYM_DICT);
    for (int32_t i = 0; r && args && i < p->pos; i++)
        if (em_vec_push(&r->items, p->items.data[1 + i])) r = (PyErr_NoMemory(), NULL);
    for (int32_t i = 0; r && !args && i < p->keys.len; i++)
        if (em_dict_set(r, p->keys.data[i], p->items.data[1 + p->pos + i]) != EM_OK) r = NULL;
    return (*out = r) ? EM_OK : EM_ERR;
}

const EmSymOps em_partial_ops = {.getattr = partial_attr, .call = partial_call};
const EmSymOps em_exit_ops = {.call = exit_call};

/* em_call's first step: the callee's kind decides (its row's call slot). */
/* int(k), k.item(), `range(k)` of tensors whose values the trace knows (em_fold.c). */
static EmStatus call_fold_read(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)self;
    if (!T->known_refs.len || (fn->kind != SYM_CONST && fn->kind != SYM_OBJ)) return CALL_NEXT;
    return em_fold_read(T, fn->obj, all, n, kwnames, out);
}

static EmStatus call_by_kind(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    const EmSymOps *ops = em_sym_ops[fn->kind];
    if (!ops || !ops->call) return em_trace_fail(T, EMA_CALL, "a %s", em_sym_describe(fn));
    return ops->call(T, fn, self, self ? all + 1 : all, self ? n - 1 : n, kwnames, out);
}

/* ---- handlers of em_known.def's rows (EmCallFn) ---- */

/* nn.Module's member walks (their sets of seen objects are not traced) */
static EmStatus known_module_walk(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                  EmSym **out) {
    (void)all;
    (void)kwnames;
    if (!self || self->kind != SYM_OBJ || self->src < 0 || n != 1 || !em_is_module(self->obj)) return CALL_NEXT;
    int i = 0; /* the row's distance to module_children: EmModuleWalk * 2 + named */
    while (i < 7 && PyTuple_GET_ITEM(em_state.known, EMK_module_children + i) != fn->obj) i++;
    return em_module_members(T, self, (EmModuleWalk)(i / 2), i & 1, out);
}

static EmStatus known_object_getattribute(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                          EmSym **out) {
    (void)fn;
    (void)self;
    if (n == 2 && !kwnames && all[1]->kind == SYM_CONST && PyUnicode_Check(all[1]->obj))
        return em_sym_getattr_generic(T, all[0], all[1]->obj, out);
    return CALL_NEXT;
}

/* Whether instances of tp pickle by object's default recipe with their __dict__ as the whole
 * state: a Python class laid out as object plus a dict (no __slots__, no builtin base), keeping
 * object's __reduce_ex__, __reduce__ and __getstate__ and defining no __getnewargs(_ex)__. */
static int plain_reduce_type(PyTypeObject *tp) {
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || !tp->tp_dictoffset || tp->tp_itemsize ||
        _PyType_Lookup(tp, EM_STR(dunder_slots)) || _PyType_Lookup(tp, EM_STR(dunder_getnewargs_ex)) ||
        _PyType_Lookup(tp, EM_STR(dunder_getnewargs)))
        return 0;
    PyTypeObject *solid = tp;
    while (solid->tp_base && (solid->tp_flags & Py_TPFLAGS_HEAPTYPE)) solid = solid->tp_base;
    PyObject *const keep[] = {EM_STR(dunder_reduce_ex), EM_STR(dunder_reduce), EM_STR(dunder_getstate)};
    for (int i = 0; solid == &PyBaseObject_Type && i < 3; i++)
        if (_PyType_Lookup(tp, keep[i]) != _PyType_Lookup(&PyBaseObject_Type, keep[i])) return 0;
    return solid == &PyBaseObject_Type;
}

/* object.__reduce_ex__(o, protocol >= 2) of an instance of a plain Python class (plain_reduce_type;
 * from the frame or made in the trace): (copyreg.__newobj__, (cls,), o.__dict__ or None when it
 * is empty, None, None), as CPython's reduce_newobj makes it; copy.copy/deepcopy take it from
 * there (traced). */
static EmStatus known_object_reduce_ex(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                       EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 2 || kwnames || all[1]->kind != SYM_CONST || !PyLong_CheckExact(all[1]->obj) ||
        PyLong_AsLong(all[1]->obj) < 2 || (all[0]->kind != SYM_NEW && (all[0]->kind != SYM_OBJ || all[0]->src < 0)) ||
        !all[0]->obj || !plain_reduce_type(Py_TYPE(all[0]->obj)))
        return PyErr_Occurred() ? EM_ERR : CALL_NEXT;
    PyObject *copyreg = PyImport_ImportModule("copyreg");
    PyObject *newobj = copyreg ? PyObject_GetAttrString(copyreg, "__newobj__") : NULL;
    Py_XDECREF(copyreg);
    PyObject *dname = newobj ? PyUnicode_InternFromString("__dict__") : NULL;
    EmSym *d = NULL, *unused = NULL, *f = newobj ? em_sym_const(T, newobj) : NULL;
    Py_XDECREF(newobj);
    EmStatus st = f && dname ? em_sym_getattr(T, all[0], dname, 0, &d, &unused) : EM_ERR;
    Py_XDECREF(dname);
    int full = 0;
    if (st == EM_OK) st = em_sym_truth(T, d, &full);
    if (st != EM_OK) return st;
    EmSym *cls = em_sym_const(T, (PyObject *)Py_TYPE(all[0]->obj)), *args = em_sym_new(T, SYM_TUPLE);
    EmSym *none = em_sym_const(T, Py_None), *r = em_sym_new(T, SYM_TUPLE);
    if (!cls || !args || !none || !r || em_vec_push(&args->items, cls) || em_vec_push(&r->items, f) ||
        em_vec_push(&r->items, args) || em_vec_push(&r->items, full ? d : none) || em_vec_push(&r->items, none) ||
        em_vec_push(&r->items, none))
        return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
    *out = r;
    return EM_OK;
}

static EmStatus known_super(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (!kwnames) {
        if (n == 0) return em_super_noargs(T, out);
        if (n == 2) return em_super(T, all[0], all[1], out);
    }
    return CALL_NEXT;
}

/* str(o), repr(o) of a user object: its class's Python __str__ (else __repr__) or __repr__,
 * traced; its result must be a str. */
/* str(e) or repr(e) of an exception of the frame whose type keeps BaseException's (or
 * KeyError's) C __str__/__repr__: made from e.args, read through a guard, as those make it. */
static EmStatus exc_text(EmTracer *T, PyObject *f, EmSym *e, EmSym **out) {
    PyTypeObject *tp = Py_TYPE(e->obj), *base = (PyTypeObject *)PyExc_BaseException;
    int is_str = f == EM_KNOWN(str);
    int keyerr = is_str && tp->tp_str == ((PyTypeObject *)PyExc_KeyError)->tp_str;
    if (is_str ? tp->tp_str != base->tp_str && !keyerr : tp->tp_repr != base->tp_repr) return CALL_NEXT;
    PyObject *aname = PyUnicode_InternFromString("args");
    EmSym *args = NULL, *unused = NULL;
    EmStatus st = aname ? em_sym_getattr(T, e, aname, 0, &args, &unused) : EM_ERR;
    Py_XDECREF(aname);
    if (st != EM_OK) return st;
    PyObject *av = em_sym_value(T, args);
    if (!av || !PyTuple_Check(av) || !em_is_pure(av)) {
        Py_XDECREF(av);
        return PyErr_Occurred() ? EM_ERR
                                : em_trace_fail(T, EMA_VALUE, "str() of an exception whose args are not constants");
    }
    /* the args are constants (guarded): the text is the real one */
    PyObject *text = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(av);
    if (!is_str)
        text = n == 1 ? PyUnicode_FromFormat("%s(%R)", _PyType_Name(tp), PyTuple_GET_ITEM(av, 0))
                      : PyUnicode_FromFormat("%s%R", _PyType_Name(tp), av);
    else if (n == 0) text = PyUnicode_FromString("");
    else if (n == 1) text = keyerr ? PyObject_Repr(PyTuple_GET_ITEM(av, 0)) : PyObject_Str(PyTuple_GET_ITEM(av, 0));
    else text = PyObject_Str(av);
    Py_DECREF(av);
    if (!text) return em_trace_raise_pending(T, "str() of an exception");
    *out = em_sym_const(T, text);
    Py_DECREF(text);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus known_str(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    if (n == 1 && !kwnames && em_sym_type_guarded(all[0]) && PyExceptionInstance_Check(all[0]->obj) &&
        (fn->obj == EM_KNOWN(str) || fn->obj == EM_KNOWN(repr))) {
        EmStatus st = exc_text(T, fn->obj, all[0], out);
        if (st != CALL_NEXT) return st;
    }
    EmSymKind k = n == 1 && !kwnames ? all[0]->kind : SYM_NULL;
    if ((k == SYM_TUPLE || k == SYM_LIST || k == SYM_DICT || k == SYM_SET) &&
        (fn->obj == EM_KNOWN(str) || fn->obj == EM_KNOWN(repr)) &&
        (!all[0]->seq_type || all[0]->seq_type == (PyObject *)&PySet_Type ||
         all[0]->seq_type == (PyObject *)&PyFrozenSet_Type)) { /* a plain container: its items' reprs */
        static PyObject *crepr; /* ember._rules.container_repr, owned for the process */
        if (!crepr && !(crepr = PyObject_GetAttrString(em_state.meta_run, "container_repr"))) return EM_ERR;
        EmSym *f = em_sym_const(T, crepr);
        return f ? em_call(T, f, NULL, all, 1, NULL, out) : EM_ERR;
    }
    if (n != 1 || kwnames || !em_sym_user_operand(all[0])) return CALL_NEXT;
    PyTypeObject *tp = Py_TYPE(all[0]->obj);
    PyObject *s = _PyType_Lookup(tp, EM_STR(dunder_str)), *r = _PyType_Lookup(tp, EM_STR(dunder_repr));
    const char *name = NULL;
    if (fn->obj == EM_KNOWN(str) && s && PyFunction_Check(s)) name = "__str__";
    else if ((fn->obj == EM_KNOWN(repr) || s == _PyType_Lookup(&PyBaseObject_Type, EM_STR(dunder_str))) && r &&
             PyFunction_Check(r))
        name = "__repr__"; /* object.__str__ calls repr() */
    if (!name && (fn->obj == EM_KNOWN(str) || fn->obj == EM_KNOWN(repr))) {
        PyObject *shown = em_new_repr(T, all[0]); /* a container subclass's */
        *out = shown ? em_sym_const(T, shown) : NULL;
        Py_XDECREF(shown);
        if (shown || PyErr_Occurred()) return *out ? EM_OK : EM_ERR;
    }
    if (!name) return CALL_NEXT;
    EmStatus st = em_call_dunder(T, all[0], name, NULL, 0, out);
    if (st == EM_OK && ((*out)->kind != SYM_CONST || !PyUnicode_Check((*out)->obj)))
        return em_trace_fail(T, EMA_VALUE, "%s returned a %s", name, em_sym_describe(*out));
    return st;
}

/* traceback.clear_frames(tb) of the traceback a with block's __exit__ got for an exception
 * raised in the trace: it has no frames to clear (eager's would clear the frames' locals, which
 * nothing reads after). */
static EmStatus known_clear_frames(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                   EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames || all[0]->kind != SYM_TB) return CALL_NEXT;
    return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
}

/* bool(x) of a user object or container sym: its truth value as `if x` finds it. */
static EmStatus known_bool(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n == 1 && !kwnames && all[0]->kind == SYM_ITEM) return em_item_conv(T, fn->obj, all[0], out);
    if (n == 1 && !kwnames && all[0]->kind == SYM_TENSOR) /* bool(t) of a captured item: bool(t.item()) */
        return em_tensor_conv(T, fn->obj, all[0], out);
    if (n != 1 || kwnames || all[0]->kind == SYM_CONST || all[0]->kind == SYM_TENSOR) return CALL_NEXT;
    int t;
    EmStatus st = em_sym_truth(T, all[0], &t);
    if (st != EM_OK) return st;
    return (*out = em_sym_const(T, t ? Py_True : Py_False)) ? EM_OK : EM_ERR;
}

int em_module_own_dunder(PyObject *o, PyObject *name) {
    PyObject *f = _PyType_Lookup(Py_TYPE(o), name);
    if (!f || !PyFunction_Check(f)) return 0;
    PyObject *mod = ((PyFunctionObject *)f)->func_module;
    return !mod || !PyUnicode_Check(mod) || !PyUnicode_Tailmatch(mod, EM_STR(torch_nn_prefix), 0, 8, -1);
}

/* hash(o) of an instance (made in the trace or from the frame): its class's Python __hash__,
 * traced (an int, as hash() requires); a tuple or frozenset subclass keeping its base's, the
 * hash of its items (the base hashes only those). */
/* hash(t) of a tuple the trace holds (a namedtuple's too, without its own __hash__): each
 * item's hash traced as hash(item) (a constant, or the trace fails), combined by CPython's own
 * tuple hash over stand-ins of those hashes (_rules.HashAs). */
static EmStatus tuple_hash(EmTracer *T, EmSym *fn, EmSym *t, EmSym **out) {
    static PyObject *hash_as; /* ember._rules.HashAs, owned for the process */
    if (!hash_as && !(hash_as = PyObject_GetAttrString(em_state.meta_run, "HashAs"))) return EM_ERR;
    PyObject *stand = PyTuple_New(t->items.len);
    EmStatus st = stand ? EM_OK : EM_ERR;
    for (int32_t i = 0; st == EM_OK && i < t->items.len; i++) {
        EmSym *h = NULL;
        if ((st = em_call(T, fn, NULL, &t->items.data[i], 1, NULL, &h)) != EM_OK) break;
        if (h->kind != SYM_CONST || !PyLong_CheckExact(h->obj)) {
            st = em_trace_fail(T, EMA_CALL, "hash() of a tuple holding %s", em_sym_describe(t->items.data[i]));
            break;
        }
        PyObject *o = PyObject_CallFunction(hash_as, "Oi", h->obj, i);
        if (!o) st = EM_ERR;
        else PyTuple_SET_ITEM(stand, i, o);
    }
    Py_hash_t hv = st == EM_OK ? PyObject_Hash(stand) : -1;
    Py_XDECREF(stand);
    if (st != EM_OK) return st;
    PyObject *hr = hv == -1 ? NULL : PyLong_FromSsize_t(hv);
    *out = hr ? em_sym_const(T, hr) : NULL;
    Py_XDECREF(hr);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus known_hash(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    EmSym *a = n == 1 && !kwnames ? all[0] : NULL, *items = NULL;
    if (a && a->kind == SYM_TUPLE &&
        (!a->seq_type || _PyType_Lookup((PyTypeObject *)a->seq_type, EM_STR(dunder_hash)) ==
                             _PyType_Lookup(&PyTuple_Type, EM_STR(dunder_hash))))
        return tuple_hash(T, fn, a, out);
    if (!a || (a->kind != SYM_NEW && (a->kind != SYM_OBJ || a->src < 0 || a->by_id))) return CALL_NEXT;
    PyTypeObject *tp = Py_TYPE(a->obj);
    PyObject *h = _PyType_Lookup(tp, EM_STR(dunder_hash));
    if (h && PyFunction_Check(h)) {
        EmStatus st = em_call_dunder(T, a, "__hash__", NULL, 0, out);
        if (st != EM_OK) return st;
        if ((*out)->kind != SYM_CONST || !PyLong_CheckExact((*out)->obj))
            return em_trace_fail(T, EMA_CALL, "hash() of a %s (its __hash__ gave %s)", tp->tp_name,
                                 em_sym_describe(*out));
        /* as CPython's slot: an int beyond Py_hash_t hashed as an int, -1 made -2 */
        Py_hash_t hv = PyLong_AsSsize_t((*out)->obj);
        if (hv == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            hv = PyObject_Hash((*out)->obj);
        }
        PyObject *hr = PyLong_FromSsize_t(hv == -1 ? -2 : hv);
        *out = hr ? em_sym_const(T, hr) : NULL;
        Py_XDECREF(hr);
        return *out ? EM_OK : EM_ERR;
    }
    PyTypeObject *base = PyType_IsSubtype(tp, &PyTuple_Type)       ? &PyTuple_Type
                         : PyType_IsSubtype(tp, &PyFrozenSet_Type) ? &PyFrozenSet_Type
                                                                   : NULL;
    if (!base || h != _PyType_Lookup(base, EM_STR(dunder_hash))) return CALL_NEXT;
    EmStatus st = em_slot_operand(T, a, &items);
    if (st != EM_OK || items == a) return st != EM_OK ? st : CALL_NEXT;
    return em_call(T, fn, NULL, &items, 1, NULL, out);
}

static EmStatus known_len(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n == 1 && !kwnames && all[0]->kind == SYM_OBJ && all[0]->src >= 0 && PyDict_CheckExact(all[0]->obj)) {
        EmSym *c = NULL; /* an instance dict read whole (em_instance_dict) */
        EmStatus st = em_instance_dict(T, all[0], &c);
        PyObject *len = st == EM_OK ? PyLong_FromSsize_t(c->items.len) : NULL;
        if (len) *out = em_sym_const(T, len);
        Py_XDECREF(len);
        return st != EM_OK ? st : len && *out ? EM_OK : EM_ERR;
    }
    if (n == 1 && (all[0]->kind == SYM_NEW || (all[0]->kind == SYM_OBJ && all[0]->src >= 0 && !all[0]->by_id &&
                                               !PyDict_CheckExact(all[0]->obj) && !em_is_module(all[0]->obj))))
        return em_call_dunder(T, all[0], "__len__", NULL, 0, out);
    if (n == 1 && !kwnames &&
        (all[0]->kind == SYM_TUPLE || all[0]->kind == SYM_LIST || all[0]->kind == SYM_DICT ||
         all[0]->kind == SYM_VIEW || all[0]->kind == SYM_SET || em_set_changed(all[0]))) {
        EmSym *c = all[0]->kind == SYM_VIEW ? all[0]->items.data[0] : all[0];
        PyObject *len = PyLong_FromSsize_t(em_set_changed(c) ? PySet_GET_SIZE(c->obj) : c->items.len);
        *out = len ? em_sym_const(T, len) : NULL;
        Py_XDECREF(len);
        return *out ? EM_OK : EM_ERR;
    }
    if (n == 1 && !kwnames && all[0]->kind == SYM_NDARRAY) return em_np_len(T, all[0], out);
    if (n == 1 && !kwnames && all[0]->kind == SYM_TENSOR && em_int_active(T) && em_node_has_sym_dims(T, all[0]->ref) &&
        T->G->nodes.data[all[0]->ref].ndim > 0)
        return em_tensor_dim_size(T, all[0], 0, out); /* len(x): its first size */
    if (n == 1 && all[0]->kind == SYM_OBJ && em_is_module(all[0]->obj)) {
        if (em_module_own_dunder(all[0]->obj, EM_STR(dunder_len)))
            return em_call_dunder(T, all[0], "__len__", NULL, 0, out);
        EmSym *items = NULL;
        EmStatus st = em_module_items(T, all[0], 1, &items);
        if (st != EM_OK) return st;
        PyObject *len = PyLong_FromLong(items->items.len);
        if (!len) return EM_ERR;
        *out = em_sym_const(T, len);
        Py_DECREF(len);
        return *out ? EM_OK : EM_ERR;
    }
    return CALL_NEXT;
}

/* operator.length_hint(o[, default]) (it.__length_hint__() too): len(o) of a container the
 * trace holds, the items left of an iterator over such items; else the rule. */
static EmStatus known_length_hint(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                  EmSym **out) {
    if (kwnames || n < 1 || n > 2 || (n == 2 && all[1]->kind != SYM_CONST)) return CALL_NEXT;
    EmSymKind k = all[0]->kind;
    if (k == SYM_TUPLE || k == SYM_LIST || k == SYM_DICT || k == SYM_VIEW || k == SYM_SET)
        return known_len(T, fn, self, all, 1, NULL, out);
    return em_iter_length_hint(T, all[0], out);
}

/* getattr(o, "name"[, default]), hasattr(o, "name") and vars(o) */
static EmStatus known_getattr(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    PyObject *f = fn->obj;
    PyObject *o = all[0]->obj; /* vars(o) of an object with no __dict__ raises TypeError: Python's */
    if (f == EM_KNOWN(vars) && n == 1 && !kwnames && o && (all[0]->kind == SYM_OBJ || all[0]->kind == SYM_NEW) &&
        (PyType_Check(o) || PyModule_Check(o) || _PyObject_GetDictPtr(o))) {
        EmSym *self_out = NULL;
        return em_sym_getattr(T, all[0], EM_STR(dunder_dict), 0, out, &self_out);
    }
    int is_hasattr = f == EM_KNOWN(hasattr) && n == 2;
    if ((is_hasattr || (f == EM_KNOWN(getattr) && (n == 2 || n == 3))) && !kwnames && all[1]->kind == SYM_CONST &&
        PyUnicode_Check(all[1]->obj)) {
        if (n == 3 || is_hasattr) { /* the default / False when absence can be guarded */
            int known = is_hasattr ? em_sym_attr_known(T, all[0], all[1]->obj)
                                   : em_sym_attr_absent(T, all[0], all[1]->obj);
            if (known < 0) return EM_ERR;
            if (known) {
                *out = known == 2 ? em_sym_const(T, Py_True) : is_hasattr ? em_sym_const(T, Py_False) : all[2];
                return *out ? EM_OK : EM_ERR;
            }
        }
        EmSym *self_out = NULL;
        int h0 = T->handlers, raised0 = T->exc != NULL;
        T->missing_attr = 0;
        EmStatus st = em_sym_getattr(T, all[0], all[1]->obj, is_hasattr, out, &self_out);
        /* the lookup ended in an AttributeError no inlined frame could catch: the missing
         * attribute of a builtin lookup, or one a traced __getattr__ raised */
        int missing = (T->missing_attr && T->missing_handlers == h0) ||
                      (!raised0 && T->exc && PyErr_GivenExceptionMatches(T->exc, PyExc_AttributeError));
        if (st == EM_ABORT && (n == 3 || is_hasattr) && missing) {
            T->missing_attr = 0;
            Py_CLEAR(T->exc);
            *out = is_hasattr ? em_sym_const(T, Py_False) : all[2];
            return *out ? EM_OK : EM_ERR;
        }
        if (st == EM_OK && is_hasattr) *out = em_sym_const(T, Py_True);
        return st == EM_OK && !*out ? EM_ERR : st;
    }
    return CALL_NEXT;
}

static EmStatus known_callable(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)fn;
    (void)self;
    if (kwnames || n != 1 || (all[0]->kind != SYM_BOUND && all[0]->kind != SYM_PARTIAL)) return CALL_NEXT;
    return (*out = em_sym_const(T, Py_True)) ? EM_OK : EM_ERR;
}

static EmStatus known_type(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n == 1 && !kwnames) return em_sym_type(T, all[0], out);
    return CALL_NEXT;
}

static EmStatus known_partial(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    return make_partial(T, all, n, kwnames, out);
}

/* torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, **kwargs): fn(*args,
 * **kwargs), inlined. Its recomputation in backward saves memory only: values and gradients
 * are eager's (the RNG state it preserves is the one the forward used). With grad enabled,
 * use_reentrant=True (or unset: eager warns, then reentrant) detaches results from inputs that
 * need no grad, and a context_fn changes what runs: both not inlined (the rule decides). */
static const char *const checkpoint_own_kw[] = {"preserve_rng_state", "determinism_check", "debug", "early_stop",
                                                "respect_saved_tensors_hooks"};

static EmStatus known_checkpoint(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                 EmSym **out) {
    (void)fn;
    (void)self;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw, reentrant = -1, m = 0;
    if (npos < 1 || n > 64 || (all[0]->kind == SYM_CONST && all[0]->obj == Py_None)) return CALL_NEXT;
    EmSym *args[64];
    PyObject *names = PyTuple_New(nkw); /* the keywords fn gets; its length fixed below */
    if (!names) return EM_ERR;
    for (int i = 1; i < npos; i++) args[m++] = all[i];
    int nnames = 0;
    for (int k = 0; k < nkw; k++) {
        PyObject *kn = PyTuple_GET_ITEM(kwnames, k);
        EmSym *v = all[npos + k];
        int own = 0;
        for (size_t j = 0; j < sizeof(checkpoint_own_kw) / sizeof(*checkpoint_own_kw); j++)
            own |= !PyUnicode_CompareWithASCIIString(kn, checkpoint_own_kw[j]);
        if (!PyUnicode_CompareWithASCIIString(kn, "use_reentrant")) {
            if (v->kind != SYM_CONST || (v->obj != Py_True && v->obj != Py_False && v->obj != Py_None))
                return Py_DECREF(names), CALL_NEXT;
            reentrant = v->obj == Py_None ? -1 : v->obj == Py_True;
        } else if (!PyUnicode_CompareWithASCIIString(kn, "context_fn")) {
            return Py_DECREF(names), CALL_NEXT;
        } else if (!own) {
            args[m++] = v;
            PyTuple_SET_ITEM(names, nnames++, Py_NewRef(kn));
        }
    }
    if (reentrant != 0 && (T->grad || nnames)) return Py_DECREF(names), CALL_NEXT; /* eager raises for kwargs */
    if (_PyTuple_Resize(&names, nnames)) return EM_ERR;
    EmStatus st = em_call(T, all[0], NULL, args, m, nnames ? names : NULL, out);
    Py_DECREF(names);
    return st;
}

/* copy.deepcopy of s: containers made anew (memo: pairs old, new, so that a container held twice
 * is copied once), constants kept (a set copied); CALL_NEXT where s holds anything else (copy's
 * own deepcopy is traced then: objects by their reduce recipe). */
typedef EmVec(EmSym *) SymPairs;
static EmStatus deep_copy(EmTracer *T, EmSym *s, SymPairs *memo, int depth, EmSym **out) {
    for (int32_t i = 0; i < memo->len; i += 2)
        if (memo->data[i] == s) return (*out = memo->data[i + 1]), EM_OK;
    if (depth > EM_MAX_NEST) return em_trace_fail(T, EMA_CALL, "deepcopy nested too deep");
    if (s->kind == SYM_CONST) {
        if (!PySet_CheckExact(s->obj)) return (*out = s), EM_OK;
        PyObject *c = PySet_New(s->obj);
        *out = c ? em_sym_const(T, c) : NULL;
        Py_XDECREF(c);
        return *out ? EM_OK : EM_ERR;
    }
    if (s->kind != SYM_LIST && s->kind != SYM_DICT && s->kind != SYM_TUPLE) return CALL_NEXT;
    EmSym *c = em_sym_new(T, s->kind);
    if (!c || em_vec_push(memo, s) || em_vec_push(memo, c)) return c ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    if (s->seq_type) c->seq_type = Py_NewRef(s->seq_type);
    for (int32_t i = 0; i < s->of.len && s->kind == SYM_DICT; i++) /* a defaultdict's factory */
        if (em_vec_push(&c->of, s->of.data[i])) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *v = NULL;
        EmStatus st = deep_copy(T, s->items.data[i], memo, depth + 1, &v);
        if (st != EM_OK) return st;
        if (em_vec_push(&c->items, v)) return PyErr_NoMemory(), EM_ERR;
        if (s->kind == SYM_DICT && em_vec_push(&c->keys, Py_NewRef(s->keys.data[i]))) return PyErr_NoMemory(), EM_ERR;
    }
    *out = c;
    return EM_OK;
}

static EmStatus known_deepcopy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames) return CALL_NEXT;
    SymPairs memo = {0};
    EmStatus st = deep_copy(T, all[0], &memo, 0, out);
    em_vec_free(&memo);
    return st;
}

/* functools.update_wrapper(wrapper, wrapped, ...) (what @functools.wraps(wrapped) calls) for a
 * wrapper made while tracing and a wrapped function made while tracing or known by identity: the
 * real update_wrapper on the two function objects (the wrapper's own, made for this trace; its
 * attributes are constants of the wrapped's code). */
static EmStatus known_update_wrapper(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                     EmSym **out) {
    (void)self;
    if (n < 2 || n > 4 || !em_sym_placeholder(all[0])) return CALL_NEXT;
    PyObject *vals[4] = {Py_NewRef(all[0]->obj)};
    for (int i = 1; i < n; i++) {
        EmSym *a = all[i];
        int fnv = a->kind == SYM_OBJ && PyFunction_Check(a->obj) && (a->by_id || em_sym_placeholder(a));
        vals[i] = fnv ? Py_NewRef(a->obj) : em_sym_value(T, a);
        if (!vals[i]) {
            for (int k = 0; k < i; k++) Py_DECREF(vals[k]);
            return PyErr_Occurred() ? EM_ERR : CALL_NEXT;
        }
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *r = PyObject_Vectorcall(fn->obj, vals, (size_t)(n - nkw), kwnames);
    for (int k = 0; k < n; k++) Py_DECREF(vals[k]);
    if (!r) return em_trace_raise_pending(T, "update_wrapper raised");
    Py_DECREF(r); /* the wrapper itself */
    *out = all[0];
    return EM_OK;
}

/* tuple.__new__(namedtuple class, items); tuple.__new__(tuple, ...) is tuple(...);
 * list.__new__(list, ...) a new empty list (PyType_GenericNew ignores its arguments). Other
 * classes: the rule (a subclass's instance, em_obj.c). */
static EmStatus known_tuple_new(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)self;
    int exact = n >= 1 && (all[0]->kind == SYM_OBJ || all[0]->kind == SYM_CONST);
    if (exact && fn->obj == EM_KNOWN(list_new) && all[0]->obj == (PyObject *)&PyList_Type)
        return (*out = em_sym_new(T, SYM_LIST)) ? EM_OK : EM_ERR;
    if (exact && fn->obj == EM_KNOWN(tuple_new) && all[0]->obj == (PyObject *)&PyTuple_Type)
        return em_call(T, all[0], NULL, all + 1, n - 1, kwnames, out);
    if (fn->obj != EM_KNOWN(tuple_new)) return CALL_NEXT;
    if (n == 2 && !kwnames && (all[0]->kind == SYM_OBJ || all[0]->kind == SYM_CONST) && PyType_Check(all[0]->obj) &&
        em_is_namedtuple_type((PyTypeObject *)all[0]->obj)) {
        EmSym *items = NULL;
        EmStatus st = em_seq_items(T, all[1], &items);
        if (st != EM_OK) return st;
        EmSym *t = em_sym_new(T, SYM_TUPLE);
        if (!t) return EM_ERR;
        for (int32_t i = 0; i < items->items.len; i++)
            if (em_vec_push(&t->items, items->items.data[i])) return PyErr_NoMemory(), EM_ERR;
        t->seq_type = Py_NewRef(all[0]->obj);
        *out = t;
        return EM_OK;
    }
    return CALL_NEXT;
}

/* inspect.signature of a function known by identity (or a method of one): a constant */
static EmStatus known_signature(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)self;
    if (n == 1 && !kwnames) {
        EmSym *a = all[0];
        PyObject *target = NULL;
        if (a->kind == SYM_BOUND && PyFunction_Check(a->items.data[1]->obj) && a->items.data[0]->obj)
            target = PyMethod_New(a->items.data[1]->obj, a->items.data[0]->obj);
        else if ((a->kind == SYM_OBJ && a->by_id && PyFunction_Check(a->obj)) || (a->kind == SYM_CONST))
            target = Py_NewRef(a->obj);
        else return em_trace_fail(T, EMA_CALL, "inspect.signature of a %s", em_sym_describe(a));
        PyObject *sig = target ? PyObject_CallOneArg(fn->obj, target) : NULL;
        Py_XDECREF(target);
        if (!sig) { /* whatever it raised (user code runs: __signature__, __wrapped__...), Python raises
                     * again when it runs the call after the abort */
            return em_trace_abandon(T, EMA_CALL, "inspect.signature raised");
        }
        *out = em_sym_const(T, sig);
        Py_DECREF(sig);
        return *out ? EM_OK : EM_ERR;
    }
    return CALL_NEXT;
}

static EmStatus known_setattr(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n == 3 && !kwnames && all[1]->kind == SYM_CONST && PyUnicode_Check(all[1]->obj)) {
        EmStatus st = em_obj_store_attr(T, all[0], all[1]->obj, all[2]);
        if (st == EM_OK) *out = em_sym_const(T, Py_None);
        return st == EM_OK && !*out ? EM_ERR : st;
    }
    return CALL_NEXT;
}

/* delattr(o, "name"): `del o.name` (em_obj_del_attr), replayed after the graph. */
static EmStatus known_delattr(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 2 || kwnames || all[1]->kind != SYM_CONST || !PyUnicode_CheckExact(all[1]->obj)) return CALL_NEXT;
    EmStatus st = em_obj_del_attr(T, all[0], all[1]->obj);
    if (st == EM_OK) *out = em_sym_const(T, Py_None);
    return st == EM_OK && !*out ? EM_ERR : st;
}

static EmStatus known_dict(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw;
    if (npos == 1) { /* dict(m) of a user mapping: m read as a dict first */
        EmSym *d = NULL;
        EmStatus st = em_mapping_as_dict(T, all[0], &d);
        if (st == EM_OK) return em_make_dict(T, d, all + npos, kwnames, out);
        if (st != CALL_NEXT) return st;
    }
    if (npos == 0 || (npos == 1 && all[0]->kind != SYM_CONST && all[0]->kind != SYM_OBJ) ||
        (npos == 1 && all[0]->kind == SYM_CONST && PyTuple_CheckExact(all[0]->obj))) /* dict(((k, v), ...)) */
        return em_make_dict(T, npos ? all[0] : NULL, all + npos, kwnames, out);
    return CALL_NEXT;
}

/* OrderedDict(src, **kw), defaultdict(factory, src, **kw): dict syms of that type */
static EmStatus known_mappingproxy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                   EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames) return CALL_NEXT;
    return em_mappingproxy_of(T, all[0]->kind == SYM_VIEW && all[0]->pos == 'm' ? all[0]->items.data[0] : all[0], out);
}

static EmStatus known_dict_of(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw;
    int dd = fn->obj == EM_KNOWN(defaultdict);
    if (npos > 1 + dd) return CALL_NEXT;
    EmSym *factory = dd && npos ? all[0] : NULL, *src = npos > dd ? all[dd] : NULL;
    if (src && (src->kind == SYM_CONST || src->kind == SYM_OBJ) && !PyTuple_Check(src->obj)) return CALL_NEXT;
    return em_make_dict_of(T, fn->obj, factory, src, all + npos, kwnames, out);
}

static EmStatus known_deque(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw;
    EmSym *bound[2] = {NULL, NULL}; /* iterable, maxlen */
    if (npos > 2) return CALL_NEXT;
    for (Py_ssize_t i = 0; i < npos; i++) bound[i] = all[i];
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        int at = !PyUnicode_CompareWithASCIIString(k, "iterable") ? 0
                 : !PyUnicode_CompareWithASCIIString(k, "maxlen") ? 1
                                                                  : -1;
        if (at < 0 || bound[at]) return CALL_NEXT; /* Python's TypeError, from the call run as Python */
        bound[at] = all[npos + i];
    }
    PyObject *max = bound[1] ? bound[1]->obj : NULL;
    if (bound[1] && (bound[1]->kind != SYM_CONST || (max != Py_None && !PyLong_CheckExact(max))))
        return em_trace_fail(T, EMA_VALUE, "deque(maxlen=%s)", em_sym_describe(bound[1]));
    if (max && max != Py_None) {
        Py_ssize_t m = PyLong_AsSsize_t(max);
        if (m == -1 && PyErr_Occurred()) return EM_ERR;
        if (m < 0) {
            PyObject *msg = PyUnicode_FromString("maxlen must be non-negative");
            EmStatus st = msg ? em_trace_raise_new(T, PyExc_ValueError, msg) : EM_ERR;
            Py_XDECREF(msg);
            return st;
        }
    }
    return em_make_deque(T, fn->obj, bound[0], max, out);
}

/* set(it), frozenset(it) of an iterable sym (constants: the rule evaluates it) */
static EmStatus known_set(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    if (kwnames || n > 1) return CALL_NEXT;
    return em_make_set(T, fn->obj, n ? all[0] : NULL, out);
}

/* id(o) of an object made in the trace: a negative int of its own, the same for every id(o). */
static EmStatus fake_id(EmTracer *T, EmSym *o, EmSym **out) {
    if (!T->fake_ids && !(T->fake_ids = PyDict_New())) return EM_ERR;
    PyObject *key = PyLong_FromVoidPtr(o), *v = key ? PyDict_GetItemWithError(T->fake_ids, key) : NULL;
    if (v) Py_INCREF(v);
    else if (key && !PyErr_Occurred() && (v = PyLong_FromSsize_t(-16 * (PyDict_GET_SIZE(T->fake_ids) + 1))) &&
             PyDict_SetItem(T->fake_ids, key, v))
        Py_CLEAR(v);
    Py_XDECREF(key);
    *out = v ? em_sym_const(T, v) : NULL;
    Py_XDECREF(v);
    return *out ? EM_OK : EM_ERR;
}

/* The frame's object that sym s (a list or dict of the frame, wrapped whole) was made for
 * (T->seen read backwards), or NULL. Borrowed: the frame holds it. */
static PyObject *frame_object_of(EmTracer *T, const EmSym *s) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (s->src >= 0 && T->seen && PyDict_Next(T->seen, &pos, &k, &v)) {
        Py_ssize_t i = PyLong_AsSsize_t(v);
        if (i >= 0 && i < T->syms.len && T->syms.data[i] == s) return PyLong_AsVoidPtr(k);
    }
    if (PyErr_Occurred()) PyErr_Clear(); /* an index that is no int: not this one */
    return NULL;
}

int em_guard_query(EmTracer *T, PyObject *fn, PyObject *expect) {
    static PyObject *call_query; /* ember._rules.call_query, owned for the process */
    if (!call_query && !(call_query = PyObject_GetAttrString(em_state.meta_run, "call_query"))) return -1;
    int32_t base = em_guard_const(T->P, fn, "query");
    int32_t slot = base < 0 ? -1 : em_guard_call(T->P, base, call_query, "%s()", 0);
    return slot < 0 ? -1 : em_guard_check(T->P, EMG_EQ, slot, expect, 0);
}

/* A query of torch's global state that the GLOBAL_STATE guard does not check
 * (torch.are_deterministic_algorithms_enabled()): its answer now, a constant, the entry guarded
 * on the same answer (em_guard_query). */
static EmStatus known_state_query(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                  EmSym **out) {
    (void)all;
    if (self || n || kwnames || (fn->kind != SYM_CONST && fn->kind != SYM_OBJ)) return CALL_NEXT;
    PyObject *v = PyObject_CallNoArgs(fn->obj);
    if (!v) return EM_ERR;
    *out = em_guard_query(T, fn->obj, v) ? NULL : em_sym_const(T, v);
    Py_DECREF(v);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus known_id(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    /* an object known by identity, or one of the frame: a tensor, list or dict too (its identity
     * guarded) */
    EmSym *o = n == 1 ? all[0] : NULL;
    PyObject *obj = !o                                                ? NULL
                    : o->kind == SYM_OBJ && (o->src >= 0 || o->by_id) ? o->obj
                    : o->kind == SYM_TENSOR && o->src >= 0            ? o->spec
                    : o->kind == SYM_LIST || o->kind == SYM_DICT      ? frame_object_of(T, o)
                                                                      : NULL;
    if (!kwnames && o && !obj && o->kind == SYM_CONST && !em_set_made(o) && !PyExceptionInstance_Check(o->obj))
        obj = o->obj; /* a constant: that object wherever it appears (OUT_CONST) */
    if (!kwnames && o && !obj && o->src < 0 && o->kind != SYM_NULL) return fake_id(T, o, out);
    if (kwnames || !obj) return em_trace_fail(T, EMA_CALL, "id() of a %s", o ? em_sym_describe(o) : "call");
    if (o->src >= 0 && em_guard_check(T->P, EMG_ID, o->src, obj, 0)) return EM_ERR;
    PyObject *v = PyLong_FromVoidPtr(obj);
    *out = v ? em_sym_const(T, v) : NULL;
    Py_XDECREF(v);
    return *out ? EM_OK : EM_ERR;
}

/* weakref.ref(o) of an object or tensor of the frame or made in the trace (no callback): a sym
 * holding o, made again per call when it leaves the trace (em_trace.c); r() of one made in the
 * trace is o only while a frame provably holds o (em_frames_hold). */
static EmStatus known_weakref(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    EmSym *o = n == 1 && !kwnames ? all[0] : NULL;
    PyObject *obj = !o                                                           ? NULL
                    : o->kind == SYM_OBJ && o->src >= 0 && !PyType_Check(o->obj) ? o->obj
                    : o->kind == SYM_TENSOR && o->src >= 0                       ? o->spec
                    : o->kind == SYM_NEW && o->src < 0                           ? o->obj /* made here */
                    : o->kind == SYM_TENSOR && o->src < 0                        ? em_sym_meta(T, o)
                                                                                 : NULL;
    if (!obj && PyErr_Occurred()) return EM_ERR;
    if (!obj || !PyType_SUPPORTS_WEAKREFS(Py_TYPE(obj)))
        return em_trace_fail(T, EMA_CALL, "weakref.ref of a %s", o ? em_sym_describe(o) : "call with a callback");
    PyObject *r = PyWeakref_NewRef(obj, NULL);
    EmSym *s = r ? em_sym_new(T, SYM_OBJ) : NULL;
    if (!s) {
        Py_XDECREF(r);
        return EM_ERR;
    }
    s->obj = r;
    if (em_vec_push(&s->items, o)) return PyErr_NoMemory(), EM_ERR;
    *out = s;
    return EM_OK;
}

static EmStatus known_isinstance(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                 EmSym **out) {
    (void)fn;
    (void)self;
    if (!kwnames && n == 2) return call_isinstance(T, all[0], all[1], out);
    return CALL_NEXT;
}

static EmStatus known_iter(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (!kwnames && n == 1) return em_iter_of(T, all[0], out);
    return CALL_NEXT;
}

static EmStatus known_next(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (!kwnames && (n == 1 || n == 2) && all[0]->kind == SYM_ITER) {
        EmSym *v = NULL; /* next(it[, default]) */
        EmStatus ust = em_iter_take(T, all[0], &v);
        if (ust != EM_OK) return ust;
        if (v) {
            *out = v;
            return EM_OK;
        }
        if (n == 2) {
            *out = all[1];
            return EM_OK;
        }
        return em_trace_raise_new(T, PyExc_StopIteration, NULL);
    }
    EmSym *o = !kwnames && (n == 1 || n == 2) ? all[0] : NULL; /* an object with a Python __next__ */
    PyObject *nx = o && (o->kind == SYM_NEW || (o->kind == SYM_OBJ && o->src >= 0))
                       ? _PyType_Lookup(Py_TYPE(o->obj), EM_STR(dunder_next))
                       : NULL;
    if (!nx || !PyFunction_Check(nx)) return CALL_NEXT;
    EmStatus st = em_call_dunder(T, o, "__next__", NULL, 0, out);
    if (n == 2 && st == EM_ABORT && T->exc && PyErr_GivenExceptionMatches(T->exc, PyExc_StopIteration)) {
        Py_CLEAR(T->exc); /* next(o, default): the default at its end */
        *out = all[1];
        return EM_OK;
    }
    return st;
}

static EmStatus known_size_numel(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                 EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames || all[0]->kind != SYM_TUPLE) return CALL_NEXT;
    return em_size_numel(T, all[0], out);
}

static EmStatus known_itertools(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)self;
    EmStatus st = em_lazy_itertools(T, fn->obj, all, n, kwnames, out); /* chain/islice over a generator */
    return st != CALL_NEXT ? st : em_call_itertools(T, fn->obj, all, n, kwnames, out);
}

static EmStatus known_lazy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (fn->obj == EM_KNOWN(it_count)) {
        EmSym *v[2] = {NULL, NULL}; /* start, step: positional or by keyword; a symbolic int pinned */
        for (int i = 0; i < n; i++) {
            int at = i < n - nkw
                         ? i
                         : PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i - (n - nkw)), "step") == 0;
            if (all[i]->kind == SYM_INT && em_sym_specialize(T, all[i]) != EM_OK) return EM_ERR;
            if (at > 1 || v[at] ||
                (all[i]->kind != SYM_INT && (all[i]->kind != SYM_CONST || !PyNumber_Check(all[i]->obj))))
                return em_trace_fail(T, EMA_CALL, "itertools.count of these arguments");
            v[at] = all[i];
        }
        PyObject *num[2] = {NULL, NULL};
        for (int i = 0; i < 2; i++)
            num[i] = !v[i]                   ? NULL
                     : v[i]->kind == SYM_INT ? PyLong_FromLongLong(em_size_hint(&T->sizes, v[i]->expr))
                                             : Py_NewRef(v[i]->obj);
        EmStatus st = (v[0] && !num[0]) || (v[1] && !num[1])
                          ? EM_ERR
                          : em_lazy_make(T, EM_LAZY_COUNT, NULL, NULL, 0, num[0], num[1], out);
        Py_XDECREF(num[0]);
        Py_XDECREF(num[1]);
        return st;
    }
    if (nkw) return CALL_NEXT;
    if (fn->obj == EM_KNOWN(map) && n >= 2)
        return em_lazy_make(T, EM_LAZY_MAP, all[0], all + 1, n - 1, NULL, NULL, out);
    if (fn->obj == EM_KNOWN(it_starmap) && n == 2)
        return em_lazy_make(T, EM_LAZY_STARMAP, all[0], all + 1, 1, NULL, NULL, out);
    int ff = fn->obj == EM_KNOWN(it_filterfalse);
    if ((fn->obj == EM_KNOWN(filter) || ff) && n == 2) {
        int none = all[0]->kind == SYM_CONST && all[0]->obj == Py_None;
        return em_lazy_make(T, ff ? EM_LAZY_FILTERFALSE : EM_LAZY_FILTER, none ? NULL : all[0], all + 1, 1, NULL, NULL,
                            out);
    }
    if ((fn->obj == EM_KNOWN(it_takewhile) || fn->obj == EM_KNOWN(it_dropwhile)) && n == 2)
        return em_lazy_make(T, fn->obj == EM_KNOWN(it_takewhile) ? EM_LAZY_TAKEWHILE : EM_LAZY_DROPWHILE, all[0],
                            all + 1, 1, NULL, NULL, out);
    return CALL_NEXT;
}

/* tuple(), list(), enumerate(), zip(), reversed() over syms that hold tensors, modules or
 * iterators (over constants only: the rule evaluates them) */
static EmStatus known_sequence(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)self;
    /* of constants too: the iterator is made per call (a constant one would be shared) */
    if (!kwnames && n >= 1 && n <= 8) return em_call_sequence(T, fn->obj, all, n, 0, out);
    if (kwnames && n == 2 && PyTuple_GET_SIZE(kwnames) == 1 && fn->obj == (PyObject *)&PyEnum_Type &&
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "start") == 0)
        return em_call_sequence(T, fn->obj, all, n, 0, out); /* enumerate(xs, start=k) */
    return CALL_NEXT;
}

static EmStatus known_zip(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    EmStatus st = known_sequence(T, fn, self, all, n, kwnames, out);
    if (st != CALL_NEXT) return st;
    if (kwnames && PyTuple_GET_SIZE(kwnames) == 1 && n >= 2 && n <= 9 &&
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "strict") == 0 &&
        all[n - 1]->kind == SYM_CONST) {
        int strict = PyObject_IsTrue(all[n - 1]->obj);
        if (strict < 0) return EM_ERR;
        return em_call_sequence(T, fn->obj, all, n - 1, strict, out); /* zip(..., strict=b) */
    }
    return CALL_NEXT;
}

/* x.type(t) for a dtype or a legacy tensor type (or its name): x.to(device, dtype), which
 * returns x itself when nothing changes, as x.type does. */
static EmStatus tensor_type_to(EmTracer *T, EmSym *x, PyObject *t, EmSym **out) {
    PyObject *r = PyObject_CallMethod(em_state.meta_run, "tensor_type_target", "(O)", t);
    if (!r) return EM_ERR;
    if (r == Py_None) {
        Py_DECREF(r);
        return CALL_NEXT;
    }
    PyObject *to = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "to");
    EmSym *f = to ? em_sym_const(T, to) : NULL;
    PyObject *dev = PyTuple_GET_ITEM(r, 1);
    EmSym *args[3] = {x, NULL, NULL};
    int n = 1;
    if (dev != Py_None) args[n++] = em_sym_const(T, dev);
    args[n++] = em_sym_const(T, PyTuple_GET_ITEM(r, 0));
    EmStatus st = f && args[1] && args[n - 1] ? em_call(T, f, NULL, args, n, NULL, out) : EM_ERR;
    Py_XDECREF(to);
    Py_DECREF(r);
    return st;
}

static EmStatus known_tensor_type(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                  EmSym **out) {
    (void)fn;
    (void)self;
    if (n == 2 && !kwnames && all[0]->kind == SYM_TENSOR &&
        (all[1]->kind == SYM_CONST ||
         (all[1]->kind == SYM_OBJ && PyType_Check(all[1]->obj) && (all[1]->by_id || all[1]->src < 0))))
        return tensor_type_to(T, all[0], all[1]->obj, out);
    if (n != 1 || kwnames || all[0]->kind != SYM_TENSOR) return CALL_NEXT;
    PyObject *m = em_sym_meta(T, all[0]);
    PyObject *r = m ? PyObject_CallMethod(em_state.meta_run, "tensor_type_name", "OO", m, all[0]->device) : NULL;
    if (!r) return EM_ERR;
    *out = PyUnicode_Check(r) ? em_sym_const(T, r) : NULL;
    int known = PyUnicode_Check(r);
    Py_DECREF(r);
    if (!known) return CALL_NEXT;
    return *out ? EM_OK : EM_ERR;
}

/* x.contiguous() of a contiguous tensor is x itself (aten returns self): no graph op, and
 * `y is x` holds as in eager. Any other call: the rule (a graph op). */
static EmStatus known_contiguous(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                 EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames || all[0]->kind != SYM_TENSOR) return CALL_NEXT;
    if (em_int_active(T) && em_node_has_sym_dims(T, all[0]->ref)) return CALL_NEXT; /* contiguous at these sizes */
    const EmNode *x = &T->G->nodes.data[all[0]->ref];
    if (x->vkind != EMV_TENSOR || x->dtype < 0 || !em_node_contiguous(T->G, x)) return CALL_NEXT;
    *out = all[0];
    return EM_OK;
}

/* functools.reduce(function, iterable[, initial]): function called through em_call on the
 * running value and each item in turn, the items taken one at a time from iter(iterable), as
 * Python does (function may advance the same iterator; a list it grows aborts, em_iter_use). */
static EmStatus known_reduce(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (kwnames || n < 2 || n > 3) return CALL_NEXT;
    EmSym *it = NULL, *acc = n == 3 ? all[2] : NULL;
    EmStatus st = em_iter_of(T, all[1], &it);
    EmSym *v = NULL;
    while (st == EM_OK && (st = em_iter_take(T, it, &v)) == EM_OK && v) {
        EmSym *pair[2] = {acc, v};
        if (acc) st = em_call(T, all[0], NULL, pair, 2, NULL, &acc);
        else acc = v;
    }
    if (st != EM_OK) return st;
    if (acc) {
        *out = acc;
        return EM_OK;
    }
    PyObject *msg = PyUnicode_FromString("reduce() of empty iterable with no initial value");
    st = msg ? em_trace_raise_new(T, PyExc_TypeError, msg) : EM_ERR;
    Py_XDECREF(msg);
    return st;
}

/* The keyword named `name` among the call's keywords: its value, or NULL. */
static EmSym *kwarg(EmSym **all, int n, PyObject *kwnames, const char *name) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), name) == 0) return all[n - nkw + i];
    return NULL;
}

/* The items of a keyed call: the iterable's remaining ones (consumed) or the positional args. */
static EmStatus keyed_items(EmTracer *T, EmSym **all, int npos, EmSym ***items, int32_t *len) {
    if (npos >= 2) {
        *items = all;
        *len = npos;
        return EM_OK;
    }
    EmSym *it = NULL;
    EmStatus st = em_iter_of(T, all[0], &it);
    if (st != EM_OK || (st = em_iter_use(T, it)) != EM_OK) return st;
    *items = it->items.data + it->pos;
    *len = it->items.len - it->pos;
    it->pos = it->items.len;
    return EM_OK;
}

/* Python's answer on the keys: sorted's order (reverse: rev) or max/min's index, as a list of
 * indices or an int (new reference); NULL with no exception when the keys do not compare. */
static EM_NEW PyObject *keyed_order(PyObject *f, PyObject *keys, int rev) {
    PyObject *get = PyObject_GetAttr(keys, EM_STR(dunder_getitem));
    PyObject *idx = get ? PyObject_CallFunction((PyObject *)&PyRange_Type, "n", PyList_GET_SIZE(keys)) : NULL;
    PyObject *kw = idx ? Py_BuildValue("{s:O}", "key", get) : NULL, *r = NULL;
    if (kw && f == EM_KNOWN(sorted) && rev && PyDict_SetItemString(kw, "reverse", Py_True)) Py_CLEAR(kw);
    PyObject *args = kw ? PyTuple_Pack(1, idx) : NULL;
    if (args) r = PyObject_Call(f, args, kw);
    if (!r && PyErr_ExceptionMatches(PyExc_TypeError)) PyErr_Clear();
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(idx);
    Py_XDECREF(get);
    return r;
}

/* sorted/max/min with key=f: f is traced on each item in order (as Python calls it, once
 * each); its results must be constants, which Python itself orders. Without a key (or key=None):
 * the rule. */
/* The value sorted() compares for item s: a constant itself, a tuple of those, anything else a
 * token that does not compare (Python's sort on these stops with TypeError where it would
 * compare tensors). New reference; NULL with an exception. */
static EM_NEW PyObject *sort_stand_in(EmSym *s, int depth) {
    if (s->kind == SYM_CONST) return Py_NewRef(s->obj);
    if (s->kind != SYM_TUPLE || s->seq_type || depth > EM_MAX_NEST)
        return PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    PyObject *t = PyTuple_New(s->items.len);
    for (int32_t i = 0; t && i < s->items.len; i++) {
        PyObject *x = sort_stand_in(s->items.data[i], depth + 1);
        if (!x) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* sorted/max/min's answer where the keys are not all constants (objects with their own `<`,
 * symbolic ints, cmp_to_key's wrappers) or do not compare as stand-ins: _rules.keyed_sort or
 * keyed_best traced on the items and keys, so each comparison is one the trace makes (a user
 * __lt__ inlined, a size relation guarded, a tensor's truth data-dependent). flag: reverse for
 * sorted, is-max for max/min. */
static EmStatus keyed_traced(EmTracer *T, int flag, int is_sorted, EmSym **items, int32_t len, EmSym *keys,
                             EmSym **out) {
    static PyObject *fns[2]; /* ember._rules.keyed_best, keyed_sort: owned for the process */
    if (!fns[is_sorted] &&
        !(fns[is_sorted] = PyObject_GetAttrString(em_state.meta_run, is_sorted ? "keyed_sort" : "keyed_best")))
        return EM_ERR;
    EmSym *f = em_sym_const(T, fns[is_sorted]), *tup = em_sym_new(T, SYM_TUPLE);
    EmSym *args[3] = {tup, keys, em_sym_const(T, flag ? Py_True : Py_False)};
    for (int32_t i = 0; tup && i < len; i++)
        if (em_vec_push(&tup->items, items[i])) return PyErr_NoMemory(), EM_ERR;
    if (!f || !tup || !args[2]) return EM_ERR;
    return em_call(T, f, NULL, args, 3, NULL, out);
}

static EmStatus known_keyed(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    EmSym *key = kwarg(all, n, kwnames, "key"), *rev = kwarg(all, n, kwnames, "reverse");
    EmSym *dflt = kwarg(all, n, kwnames, "default");
    int npos = n - (int)(kwnames ? PyTuple_GET_SIZE(kwnames) : 0), is_sorted = fn->obj == EM_KNOWN(sorted);
    int known = 1 + (rev != NULL) + (dflt != NULL);
    if (!key && is_sorted && npos == 1 && !dflt && all[0]->kind != SYM_CONST && n - npos == known - 1) {
        key = NULL; /* sorted(items) of items holding tensors: by their stand-ins, Python's order */
    } else if (!key || (key->kind == SYM_CONST && key->obj == Py_None) || npos < 1 || n - npos != known ||
               (is_sorted && (npos != 1 || dflt)) || (!is_sorted && (rev || (dflt && npos != 1))) ||
               (rev && rev->kind != SYM_CONST))
        return CALL_NEXT;
    if (rev && rev->kind != SYM_CONST) return CALL_NEXT;
    int r = rev ? PyObject_IsTrue(rev->obj) : 0;
    EmSym **items;
    int32_t len;
    EmStatus st = r < 0 ? EM_ERR : keyed_items(T, all, npos, &items, &len);
    PyObject *keys = st == EM_OK ? PyList_New(len) : NULL;
    EmSym *ksyms = keys ? em_sym_new(T, SYM_LIST) : NULL; /* the keys as traced, for keyed_traced */
    int all_const = 1;
    for (int32_t i = 0; ksyms && st == EM_OK && i < len; i++) {
        EmSym *k = items[i];
        if (key && (st = em_call(T, key, NULL, &items[i], 1, NULL, &k)) != EM_OK) break;
        PyObject *x = key ? (k->kind == SYM_CONST ? Py_NewRef(k->obj) : NULL) : sort_stand_in(k, 0);
        if (!x && PyErr_Occurred()) st = EM_ERR;
        else if (em_vec_push(&ksyms->items, k)) st = (Py_XDECREF(x), PyErr_NoMemory(), EM_ERR);
        else if (x) PyList_SET_ITEM(keys, i, x);
        else all_const = 0;
    }
    if (st != EM_OK || !ksyms) {
        Py_XDECREF(keys); /* unset items are NULL, which list dealloc skips */
        return st == EM_OK ? EM_ERR : st;
    }
    if (!is_sorted && len == 0) { /* max() of an empty iterable: the default, or Python's ValueError */
        Py_DECREF(keys);
        if (dflt) return *out = dflt, EM_OK;
        return em_trace_fail(T, EMA_CALL, "%s of an empty sequence", is_sorted ? "sorted" : "max/min");
    }
    PyObject *order = all_const ? keyed_order(fn->obj, keys, r) : NULL;
    Py_DECREF(keys);
    if (!order && PyErr_Occurred()) return EM_ERR;
    if (!order) return keyed_traced(T, is_sorted ? r : fn->obj == EM_KNOWN(max), is_sorted, items, len, ksyms, out);
    if (!is_sorted) {
        *out = items[PyLong_AsSsize_t(order)];
        Py_DECREF(order);
        return EM_OK;
    }
    EmSym *l = em_sym_new(T, SYM_LIST);
    for (Py_ssize_t i = 0; l && i < PyList_GET_SIZE(order); i++)
        if (em_vec_push(&l->items, items[PyLong_AsSsize_t(PyList_GET_ITEM(order, i))])) l = (PyErr_NoMemory(), NULL);
    Py_DECREF(order);
    if (!l) return EM_ERR;
    *out = l;
    return EM_OK;
}

/* l.sort(key=..., reverse=...) of a list the trace may change: sorted()'s order (its keys
 * called on the items), written into l. As in CPython, l is empty while the keys run, keeps
 * its items when one raises, and a change made to it meanwhile raises ValueError. */
static EmStatus known_list_sort(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)fn;
    (void)self;
    if (n < 1 || all[0]->kind != SYM_LIST || all[0]->seq_type || !kwnames || n != 1 + (int)PyTuple_GET_SIZE(kwnames))
        return CALL_NEXT; /* no keywords: the list method's own sort */
    EmSym *sorted_fn = em_sym_const(T, EM_KNOWN(sorted)), *r = NULL, *none = NULL, *l = all[0];
    EmSym *items = em_sym_new(T, SYM_TUPLE);
    for (int32_t i = 0; items && i < l->items.len; i++)
        if (em_vec_push(&items->items, l->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    if (!sorted_fn || !items) return EM_ERR;
    EmStatus st = em_list_method(T, EM_CM_clear, "clear", l, NULL, 0, &none);
    if (st != EM_OK) return st;
    uint32_t ver = l->mver;
    all[0] = items; /* sorted(items, key=...): the keys see l empty */
    st = known_keyed(T, sorted_fn, NULL, all, n, kwnames, &r);
    all[0] = l;
    if (st == EM_OK && r->kind != SYM_LIST) return em_trace_fail(T, EMA_VALUE, "list.sort by keys");
    int changed = l->mver != ver;
    EmStatus put = l->items.len ? em_list_method(T, EM_CM_clear, "clear", l, NULL, 0, &none) : EM_OK;
    if (put == EM_OK) put = em_list_method(T, EM_CM_extend, "extend", l, st == EM_OK ? &r : &items, 1, &none);
    if (put != EM_OK || st != EM_OK) return put != EM_OK ? put : st;
    if (changed) return em_trace_raise_msg(T, PyExc_ValueError, "list modified during sort");
    *out = none;
    return EM_OK;
}

/* min(a, b, ...) / max(...) (or of one iterable) where a float graph input is among the values:
 * Python's loop, comparing each item with the best so far (item < best for min, item > best
 * for max), each comparison guarded as the trace decides it: the float is not pinned to its
 * value. The best item itself is the result. CALL_NEXT when no float input is among them. */
static EmStatus float_minmax(EmTracer *T, EmSym *fn, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    EmSym *seq = NULL, **items = all;
    int len = n;
    if (kwnames || n < 1) return CALL_NEXT;
    if (n == 1) {
        if (all[0]->kind != SYM_LIST && all[0]->kind != SYM_TUPLE) return CALL_NEXT;
        seq = all[0];
        items = seq->items.data;
        len = (int)seq->items.len;
    }
    int floats = 0;
    for (int i = 0; i < len; i++) floats |= items[i]->kind == SYM_FLOAT;
    if (!floats || len < 1) return CALL_NEXT;
    EmOp op = fn->obj == EM_KNOWN(min) ? EMOP_LT : EMOP_GT;
    EmSym *best = items[0];
    for (int i = 1; i < len; i++) {
        EmSym *r = NULL;
        int better = 0;
        EmStatus st = em_sym_binop(T, op, em_op_fn(op), items[i], best, &r);
        if (st == EM_OK) st = em_sym_truth(T, r, &better);
        if (st != EM_OK) return st;
        if (better) best = items[i];
    }
    *out = best;
    return EM_OK;
}

static EmStatus known_numconv(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    if (kwnames || n != 1) return CALL_NEXT;
    if (all[0]->kind == SYM_INT && fn->obj == EM_KNOWN(b_abs)) return em_int_abs(T, all[0], out);
    if (all[0]->kind == SYM_ITEM) return em_item_conv(T, fn->obj, all[0], out);
    if (all[0]->kind == SYM_TENSOR && (fn->obj == EM_KNOWN(b_int) || fn->obj == EM_KNOWN(b_float)))
        return em_tensor_conv(T, fn->obj, all[0], out); /* int(t): int(t.item()) */
    return all[0]->kind == SYM_FLOAT ? em_float_conv(T, fn->obj, all[0], out) : CALL_NEXT;
}

static EmStatus known_minmax(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    EmStatus st = known_keyed(T, fn, self, all, n, kwnames, out);
    if (st == CALL_NEXT) st = float_minmax(T, fn, all, n, kwnames, out);
    return st == CALL_NEXT ? em_known_minmax(T, fn, self, all, n, kwnames, out) : st;
}

/* em_call's second step: the callee's row in em_known.def, found by identity (a scan of
 * pointers: a dict would run a callable object's own __hash__ and __eq__, and refuse
 * unhashable ones), and its handler's answer. */
/* A call of an operator getter object of the frame: the function doing what it does
 * (ember._rules.getter_function, made from the getter's arguments) traced. */
static EmStatus call_getter(EmTracer *T, EmSym *fn, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyObject *f = PyObject_CallMethod(em_state.meta_run, "getter_function", "O", fn->obj);
    if (!f) return EM_ERR;
    EmStatus st = EM_OK;
    if (f == Py_None) st = CALL_NEXT;
    else if (!fn->by_id && em_guard_check(T->P, EMG_ID, fn->src, fn->obj, 0)) st = EM_ERR;
    else st = em_inline(T, f, all, n, kwnames, out); /* f lives in _rules._GETTER_FUNCS */
    Py_DECREF(f);
    return st;
}

static EmStatus call_known(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    static const EmCallFn handlers[EMK__COUNT] = {
#define X(name, path, handler) handler,
#include "em_known.def"
#undef X
    };
    for (int k = 0; k < EMK__COUNT; k++)
        if (PyTuple_GET_ITEM(em_state.known, k) == fn->obj)
            return handlers[k] ? handlers[k](T, fn, self, all, n, kwnames, out) : CALL_NEXT;
    int query = fn->kind == SYM_OBJ || fn->kind == SYM_CONST ? PySet_Contains(em_state.state_query_fns, fn->obj) : 0;
    if (query < 0) PyErr_Clear(); /* an unhashable callable is in no table */
    if (query == 1) return known_state_query(T, fn, self, all, n, kwnames, out); /* _rules.STATE_QUERIES */
    if ((fn->kind == SYM_OBJ || fn->kind == SYM_CONST) && PyDict_GET_SIZE(em_state.trace_as)) {
        PyObject *as = PyDict_GetItemWithError(em_state.trace_as, fn->obj); /* _rules.TRACE_AS */
        if (!as) PyErr_Clear(); /* an unhashable callable is in no table */
        if (as && PyFunction_Check(as)) return em_inline(T, as, all, n, kwnames, out);
        /* an itemgetter/attrgetter/methodcaller object (immutable: its identity guarded) */
        as = fn->kind == SYM_OBJ && (fn->src >= 0 || fn->by_id)
                 ? PyDict_GetItemWithError(em_state.trace_as, (PyObject *)Py_TYPE(fn->obj))
                 : NULL;
        if (!as && PyErr_Occurred()) return EM_ERR;
        if (as) return call_getter(T, fn, all, n, kwnames, out);
    }
    return CALL_NEXT;
}

/* ---- em_call's later steps ---- */

/* A namedtuple class called: its generated __new__ (which calls tuple.__new__) is traced. */
static EmStatus call_namedtuple(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyObject *nw = PyDict_GetItemWithError(em_type_dict((PyTypeObject *)f), EM_STR(dunder_new));
    PyObject *nf = nw && Py_IS_TYPE(nw, &PyStaticMethod_Type) ? PyObject_GetAttrString(nw, "__func__") : NULL;
    if (!nf || !PyFunction_Check(nf)) {
        Py_XDECREF(nf);
        if (PyErr_Occurred()) return EM_ERR; /* no memory: neither lookup runs user code */
        return em_trace_fail(T, EMA_CALL, "%s() (a namedtuple with its own __new__)", ((PyTypeObject *)f)->tp_name);
    }
    EmSym *cargs[65];
    if (n + 1 > 65) {
        Py_DECREF(nf);
        return em_trace_fail(T, EMA_CALL, "namedtuple with too many fields");
    }
    if (!(cargs[0] = em_sym_known(T, f, ((PyTypeObject *)f)->tp_name))) {
        Py_DECREF(nf);
        return EM_ERR;
    }
    for (int i = 0; i < n; i++) cargs[i + 1] = all[i];
    EmStatus st = em_inline(T, nf, cargs, n + 1, kwnames, out);
    Py_DECREF(nf);
    return st;
}

/* A structseq type (torch.return_types.max) called on one sequence of its fields, all visible:
 * a tuple of that type. CALL_NEXT for another type or call. */
static EmStatus call_structseq(EmTracer *T, PyTypeObject *tp, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    if (n != 1 || kwnames || em_is_namedtuple_type(tp) || !PyType_IsSubtype(tp, &PyTuple_Type)) return CALL_NEXT;
    PyObject *nf = PyDict_GetItemString(em_type_dict(tp), "n_fields"),
             *nsf = PyDict_GetItemString(em_type_dict(tp), "n_sequence_fields");
    if (!nf || !nsf || !PyLong_CheckExact(nf) || PyObject_RichCompareBool(nf, nsf, Py_EQ) != 1) return CALL_NEXT;
    EmSym *items = NULL;
    EmStatus st = em_seq_items(T, all[0], &items);
    if (st != EM_OK) return st;
    if (items->items.len != PyLong_AsLong(nf)) /* its constructor's TypeError, raised again by the frame */
        return em_trace_fail(T, EMA_CALL, "%s() of %d items", tp->tp_name, (int)items->items.len);
    EmSym *t = em_sym_new(T, SYM_TUPLE);
    if (!t) return EM_ERR;
    for (int32_t i = 0; i < items->items.len; i++)
        if (em_vec_push(&t->items, items->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    t->seq_type = Py_NewRef((PyObject *)tp);
    *out = t;
    return EM_OK;
}

/* itertools.chain.from_iterable(its): chain(*its) once its items are known. */
static EmStatus chain_from_iterable(EmTracer *T, EmSym *its, EmSym **out) {
    EmSym *items = NULL;
    EmStatus st = its->kind == SYM_ITER ? em_iter_use(T, its) : EM_OK;
    if (st != EM_OK || (st = em_seq_items(T, its, &items)) != EM_OK) return st;
    EmSym *chain = em_sym_known(T, EM_KNOWN(it_chain), "itertools.chain");
    return chain ? em_call(T, chain, NULL, items->items.data, (int)items->items.len, NULL, out) : EM_ERR;
}

/* dict.fromkeys bound to dict or a subclass of it (OrderedDict's own method among them). */
static int is_fromkeys(PyObject *f) {
    PyObject *cls = PyCFunction_GET_SELF(f);
    return cls && PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, &PyDict_Type) &&
           !strcmp(((PyCFunctionObject *)f)->m_ml->ml_name, "fromkeys");
}

/* cls.fromkeys(keys[, value]): of dict, OrderedDict or defaultdict (whose factory is then None)
 * a dict made while tracing; of another subclass, what Python does: cls(), then d[k] = value
 * for each key, both traced. Arguments Python refuses (none, three; value= except for an
 * OrderedDict's) raise its TypeError. */
static EmStatus fromkeys_call(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyObject *cls = PyCFunction_GET_SELF(f);
    int od = PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)EM_KNOWN(OrderedDict));
    if (n < 1 || n > 2 ||
        (kwnames && (!od || n != 2 || PyTuple_GET_SIZE(kwnames) != 1 ||
                     PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "value")))) {
        PyObject *spec = em_call_spec(T, f, all, n, kwnames), *r = NULL;
        PyObject *kw = spec ? PyDict_New() : NULL;
        for (Py_ssize_t i = 0; kw && i < PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 2)); i++) {
            PyObject *pair = PyTuple_GET_ITEM(PyTuple_GET_ITEM(spec, 2), i);
            if (PyDict_SetItem(kw, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1))) Py_CLEAR(kw);
        }
        if (kw) r = PyObject_Call(f, PyTuple_GET_ITEM(spec, 1), kw); /* raises before any effect */
        Py_XDECREF(kw);
        Py_XDECREF(spec);
        if (r || !PyErr_Occurred()) {
            Py_XDECREF(r);
            return em_trace_fail(T, EMA_CALL, "%s.fromkeys on these arguments", ((PyTypeObject *)cls)->tp_name);
        }
        return em_trace_raise_pending(T, "fromkeys of bad arguments");
    }
    EmSym *value = n == 2 ? all[1] : em_sym_const(T, Py_None);
    if (!value) return EM_ERR;
    if (cls == (PyObject *)&PyDict_Type || cls == EM_KNOWN(OrderedDict) || cls == EM_KNOWN(defaultdict)) {
        EmStatus st = em_dict_fromkeys(T, all[0], value, out);
        if (st == EM_OK && cls != (PyObject *)&PyDict_Type) (*out)->seq_type = Py_NewRef(cls);
        return st;
    }
    EmSym *c = em_sym_new(T, SYM_OBJ), *items = NULL;
    if (!c) return EM_ERR;
    c->obj = Py_NewRef(cls);
    c->by_id = 1;
    EmStatus st = all[0]->kind == SYM_ITER ? em_iter_use(T, all[0]) : EM_OK;
    if (st == EM_OK) st = em_seq_items(T, all[0], &items);
    if (st == EM_OK) st = em_call(T, c, NULL, NULL, 0, NULL, out);
    for (int32_t i = 0; st == EM_OK && i < items->items.len; i++)
        st = em_sym_setitem(T, *out, items->items.data[i], value);
    return st;
}

/* A method or slot wrapper of a builtin type called unbound on a value of that type (a
 * constant or container sym): a slot wrapper is the operation it stands for, a method the
 * bound call. */
/* dict.update(od, ...): dict's own method changing an OrderedDict, which bypasses its order
 * (eager's od then iterates without the keys dict.update added). Reads (dict.keys(od)) follow
 * the dict's storage, in the OrderedDict's order unless move_to_end changed that. */
static int bypasses_order(PyObject *f, EmSym *self) {
    static const char *const writes[] = {"update",  "__setitem__", "__delitem__", "setdefault", "pop",
                                         "popitem", "clear",       "__ior__",     NULL};
    PyTypeObject *tp = em_sym_known_type(self);
    if (PyDescr_TYPE(f) != &PyDict_Type || !tp || !PyType_IsSubtype(tp, &PyODict_Type)) return 0;
    for (int i = 0; writes[i]; i++)
        if (!PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), writes[i])) return 1;
    return 0;
}

static EmStatus unbound_builtin_method(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    if (Py_IS_TYPE(fn->obj, &PyWrapperDescr_Type)) {
        const char *n = PyUnicode_AsUTF8(PyDescr_NAME(fn->obj));
        if (!n) return EM_ERR;
        PyObject *msg = PyObject_CallMethod(em_state.meta_run, "arity_error", "OnO", fn->obj, (Py_ssize_t)nargs,
                                            Py_None);
        if (!msg) return EM_ERR;
        if (msg != Py_None) { /* p.__eq__(): the TypeError of the slot's argument count */
            EmStatus st = em_trace_raise_new(T, PyExc_TypeError, msg);
            Py_DECREF(msg);
            return st;
        }
        Py_DECREF(msg);
        int inplace;
        EmStatus st = em_slot_call(T, n, self, args, nargs, out, &inplace);
        if (st == EM_OK && inplace && !((*out)->kind == SYM_CONST && (*out)->obj == Py_NotImplemented)) *out = self;
        return st != CALL_NEXT ? st : em_trace_fail(T, EMA_CALL, "%s.%s", PyDescr_TYPE(fn->obj)->tp_name, n);
    }
    return em_call(T, fn, self, args, nargs, NULL, out);
}

/* e.with_traceback(None) of an exception raised in the trace (a constant, whose traceback is
 * None: nothing changes): e itself. CALL_NEXT for other calls. */
static EmStatus exc_with_traceback(EmTracer *T, PyObject *f, EmSym *self, EmSym **all, int n, EmSym **out) {
    EmSym *e = self;
    PyObject *bound = !e && PyCFunction_Check(f) ? PyCFunction_GET_SELF(f) : NULL; /* NULL: not a bound method */
    if (bound && n == 1 && PyExceptionInstance_Check(bound)) {
        if (strcmp(((PyCFunctionObject *)f)->m_ml->ml_name, "with_traceback")) return CALL_NEXT;
        e = em_sym_const(T, bound);
        if (!e) return EM_ERR;
    } else if (!e || n != 2 || !Py_IS_TYPE(f, &PyMethodDescr_Type) ||
               PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), "with_traceback")) {
        return CALL_NEXT;
    }
    EmSym *tb = all[n - 1];
    if (e->kind != SYM_CONST || !PyExceptionInstance_Check(e->obj) || tb->kind != SYM_CONST || tb->obj != Py_None)
        return CALL_NEXT;
    if (((PyBaseExceptionObject *)e->obj)->traceback) { /* one this trace raised never leaves it: cleared now */
        int raised = T->raised ? PySequence_Contains(T->raised, e->obj) : 0;
        if (raised <= 0) return raised < 0 ? EM_ERR : CALL_NEXT;
        if (PyException_SetTraceback(e->obj, Py_None)) return EM_ERR;
    }
    *out = e;
    return EM_OK;
}

static EmStatus call_by_type(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);

/* A builtin method descriptor called with keywords that name its next positional-or-keyword
 * parameters (_rules.kw_order: `od.move_to_end(k, last=False)`) is the same call with them
 * positional: call_by_type again without keywords. CALL_NEXT when the keywords are others. */
static EmStatus kw_as_positional(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                 EmSym **out) {
    int npos = n - (int)PyTuple_GET_SIZE(kwnames);
    if (npos < 1 || n > 16) return CALL_NEXT;
    PyObject *order = PyObject_CallMethod(em_state.meta_run, "kw_order", "OnO", fn->obj, (Py_ssize_t)(npos - 1),
                                          kwnames);
    if (!order) return EM_ERR;
    EmSym *pos[16];
    for (int i = 0; order != Py_None && i < n; i++)
        pos[i] = i < npos ? all[i] : all[npos + PyLong_AsLong(PyTuple_GET_ITEM(order, i - npos))];
    int none = order == Py_None;
    Py_DECREF(order);
    return none ? CALL_NEXT : call_by_type(T, fn, self, pos, n, NULL, out);
}

/* dict.__init__(o, ..., k=v) (OrderedDict's too) of a dict subclass's instance made while
 * tracing: its contents updated as dict's __init__ updates them. CALL_NEXT for other calls. */
static EmStatus dict_init_kw(EmTracer *T, PyObject *f, EmSym *o, EmSym **args, int nargs, PyObject *kwnames,
                             EmSym **out) {
    PyTypeObject *ct = em_new_content_type(o);
    if (!ct || !Py_IS_TYPE(f, &PyWrapperDescr_Type) || !PyType_IsSubtype(ct, PyDescr_TYPE(f)) ||
        !PyType_IsSubtype(PyDescr_TYPE(f), &PyDict_Type) ||
        PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), "__init__") != 0)
        return CALL_NEXT;
    if (nargs - PyTuple_GET_SIZE(kwnames) > 1)
        return em_trace_fail(T, EMA_CALL, "dict.__init__ with positional arguments");
    EmStatus st = em_dict_update(T, o->items.data[1], args, nargs, kwnames, out);
    return st == EM_OK ? ((*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR) : st;
}

/* cls(...) for a class whose metaclass defines __call__, as CPython's slot does: a __call__
 * that is no descriptor (TypedDict's is dict) is called with the arguments alone, a Python
 * function is inlined with the class first; any other kind CALL_NEXT. */
static EmStatus call_metaclass(EmTracer *T, EmSym *fn, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyTypeObject *meta = Py_TYPE(fn->obj);
    if (!(meta->tp_flags & Py_TPFLAGS_HEAPTYPE) || meta->tp_call == PyType_Type.tp_call || n > 63) return CALL_NEXT;
    PyObject *c = _PyType_Lookup(meta, EM_STR(dunder_call));
    if (!c) return CALL_NEXT;
    if (PyFunction_Check(c)) {
        EmSym *args[64];
        args[0] = fn;
        for (int i = 0; i < n; i++) args[i + 1] = all[i];
        return em_inline(T, c, args, n + 1, kwnames, out);
    }
    if (Py_TYPE(c)->tp_descr_get) return CALL_NEXT;
    EmSym *cs = em_sym_known(T, c, "metaclass __call__");
    return cs ? em_call(T, cs, NULL, all, n, kwnames, out) : EM_ERR;
}

/* cls.__subclasses__() of a class from the frame: its subclasses now, a new list, the list the
 * call gives guarded equal (a class defined or collected later recompiles). CALL_NEXT for
 * other calls. */
static EmStatus call_subclasses(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    if (!Py_IS_TYPE(f, &PyMethodDescr_Type) || PyDescr_TYPE(f) != &PyType_Type || n != 1 || kwnames ||
        all[0]->kind != SYM_OBJ || all[0]->src < 0 || !PyType_Check(all[0]->obj) ||
        PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), "__subclasses__"))
        return CALL_NEXT;
    PyObject *subs = PyObject_CallOneArg(f, all[0]->obj);
    if (!subs) return EM_ERR;
    int32_t slot = em_guard_call(T->P, all[0]->src, f, "%s.__subclasses__()", 0);
    EmStatus st = slot < 0 || em_guard_check(T->P, EMG_EQ, slot, subs, 0) ? EM_ERR : EM_OK;
    EmSym *l = st == EM_OK ? em_sym_new(T, SYM_LIST) : NULL;
    for (Py_ssize_t i = 0; l && i < PyList_GET_SIZE(subs); i++) {
        PyTypeObject *c = (PyTypeObject *)PyList_GET_ITEM(subs, i);
        EmSym *cs = em_sym_known(T, (PyObject *)c, c->tp_name);
        if (!cs || em_vec_push(&l->items, cs)) l = NULL;
    }
    Py_DECREF(subs);
    if (!l) return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
    *out = l;
    return EM_OK;
}

/* Calls that make instances of classes by their own rules: type.__call__(cls, ...) (a
 * metaclass __call__'s super().__call__), a namedtuple class, a class whose metaclass defines
 * __call__, a structseq class. CALL_NEXT for others. */
static EmStatus class_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyObject *f = fn->obj;
    EmStatus sst = call_subclasses(T, f, all, n, kwnames, out);
    if (sst != CALL_NEXT) return sst;
    if (Py_IS_TYPE(f, &PyWrapperDescr_Type) && PyDescr_TYPE(f) == &PyType_Type && n >= 1 &&
        (all[0]->kind == SYM_OBJ || all[0]->kind == SYM_CONST) && PyType_Check(all[0]->obj) &&
        !PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), "__call__")) {
        int handled;
        EmStatus st = em_obj_type_call(T, all[0]->obj, all + 1, n - 1, kwnames, out, &handled);
        if (st != EM_OK || handled) return st;
    }
    if (!PyType_Check(f)) return CALL_NEXT;
    if (em_is_namedtuple_type((PyTypeObject *)f)) return call_namedtuple(T, f, all, n, kwnames, out);
    if (self) return CALL_NEXT;
    if (fn->kind == SYM_OBJ) {
        EmStatus st = call_metaclass(T, fn, all, n, kwnames, out);
        if (st != CALL_NEXT) return st;
    }
    return call_structseq(T, (PyTypeObject *)f, all, n, kwnames, out);
}

/* em_call's third step: callees recognized by their type. The bound __exit__ of a grad-mode
 * context from the frame; a builtin method descriptor called on an instance (made while
 * tracing or from the frame) or on a container sym; a namedtuple class. */
static EmStatus call_by_type_impl(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                  EmSym **out) {
    EmSym **args = self ? all + 1 : all;
    int nargs = self ? n - 1 : n;
    PyObject *f = fn->obj;
    if (fn->kind == SYM_OBJ && fn->src >= 0 && em_ctx_is_grad_exit(f)) return em_ctx_exit_input(T, fn, all, n, out);
    EmStatus cst = class_call(T, fn, self, all, n, kwnames, out);
    if (cst != CALL_NEXT) return cst;
    if (kwnames && Py_IS_TYPE(f, &PyMethodDescr_Type)) {
        EmStatus st = kw_as_positional(T, fn, self, all, n, kwnames, out);
        if (st != CALL_NEXT) return st;
    }
    if (kwnames && (self || n)) { /* o.__init__(**kw) or dict.__init__(o, **kw) */
        EmStatus st = self ? dict_init_kw(T, f, self, args, nargs, kwnames, out)
                           : dict_init_kw(T, f, all[0], all + 1, n - 1, kwnames, out);
        if (st != CALL_NEXT) return st;
    }
    if (self && !kwnames) {
        EmStatus st = em_frame_dict_empty_view(T, f, self, nargs, out);
        if (st != CALL_NEXT) return st;
    }
    if (self && !kwnames &&
        (self->kind == SYM_NEW || (self->kind == SYM_OBJ && self->src >= 0 && !PyDict_CheckExact(self->obj))) &&
        (Py_IS_TYPE(f, &PyMethodDescr_Type) || Py_IS_TYPE(f, &PyWrapperDescr_Type)))
        return call_builtin_method(T, f, self, args, nargs, out);
    if (!self && n >= 1 && !kwnames && (Py_IS_TYPE(f, &PyMethodDescr_Type) || Py_IS_TYPE(f, &PyWrapperDescr_Type)) &&
        (all[0]->kind == SYM_NEW || (all[0]->kind == SYM_OBJ && all[0]->src >= 0 && !all[0]->by_id)) &&
        PyObject_TypeCheck(all[0]->obj, PyDescr_TYPE(f)))
        return call_builtin_method(T, f, all[0], all + 1, n - 1, out); /* dict.__getitem__(self, k) */
    if (!self && n >= 1 && !kwnames && (Py_IS_TYPE(f, &PyMethodDescr_Type) || Py_IS_TYPE(f, &PyWrapperDescr_Type)) &&
        all[0]->kind != SYM_OBJ && all[0]->kind != SYM_NEW && em_sym_known_type(all[0]) &&
        PyType_IsSubtype(em_sym_known_type(all[0]), PyDescr_TYPE(f)) && PyDescr_TYPE(f) != &PyBaseObject_Type)
        return unbound_builtin_method(T, fn, all[0], all + 1, n - 1, out); /* set.__sub__(p, q) */
    if (self && !kwnames && Py_IS_TYPE(f, &PyWrapperDescr_Type) && self->kind != SYM_OBJ && self->kind != SYM_NEW &&
        em_sym_known_type(self) && PyType_IsSubtype(em_sym_known_type(self), PyDescr_TYPE(f)) &&
        PyDescr_TYPE(f) != &PyBaseObject_Type)
        return unbound_builtin_method(T, fn, self, args, nargs, out); /* d.__or__(e) */
    if (self && !kwnames && /* the methods modelled take positional arguments only */
        (self->kind == SYM_LIST || self->kind == SYM_DICT || self->kind == SYM_TUPLE || self->kind == SYM_SET ||
         (self->kind == SYM_OBJ && PyDict_CheckExact(self->obj) && self->src >= 0)) &&
        Py_IS_TYPE(f, &PyMethodDescr_Type))
        return em_container_method(T, f, self, args, nargs, out);
    if (self && !kwnames && self->kind == SYM_ITER) return em_gen_method(T, f, self, args, nargs, out);
    if (!kwnames) {
        EmStatus st = exc_with_traceback(T, f, self, all, n, out);
        if (st != CALL_NEXT) return st;
    }
    EmSym *us = self ? self : n >= 1 ? all[0] : NULL; /* d.update(k=v), dict.update(d, k=v) */
    if (us && kwnames && (us->kind == SYM_DICT || us->kind == SYM_OBJ || em_new_dict_items(us)) &&
        Py_IS_TYPE(f, &PyMethodDescr_Type) && (PyDescr_TYPE(f) == &PyDict_Type || PyDescr_TYPE(f) == &PyODict_Type) &&
        em_sym_known_type(us) && PyType_IsSubtype(em_sym_known_type(us), PyDescr_TYPE(f)) &&
        !PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), "update") && !bypasses_order(f, us)) {
        EmSym *d = us->kind == SYM_NEW ? em_new_dict_items(us) : us; /* a dict subclass's instance: its items */
        EmStatus st = us->kind == SYM_OBJ ? em_frame_dict_items_rw(T, us, 1, &d) : EM_OK;
        if (st != CALL_NEXT)
            return st == EM_OK ? em_dict_update(T, d, self ? args : all + 1, self ? nargs : n - 1, kwnames, out) : st;
    }
    if (!self && PyCFunction_Check(f)) {
        EmStatus st = em_obj_base_new(T, f, all, n, kwnames, out);
        if (st != CALL_NEXT) return st;
    }
    if (!self && n == 1 && !kwnames && PyCFunction_Check(f) && PyCFunction_GET_SELF(f) == EM_KNOWN(it_chain) &&
        !strcmp(((PyCFunctionObject *)f)->m_ml->ml_name, "from_iterable"))
        return chain_from_iterable(T, all[0], out);
    if (!self && PyCFunction_Check(f) && is_fromkeys(f)) return fromkeys_call(T, f, all, n, kwnames, out);
    if (self && !kwnames &&
        (em_set_made(self) || em_set_of_frame(self) || (em_frozenset_const(self) && em_set_reads(f))))
        return em_set_method(T, f, self, args, nargs, out);
    return CALL_NEXT;
}

/* call_by_type, with dict's own methods changing an OrderedDict (dict.update(od, ...)): refused
 * for one of the frame (the replay would keep its order); one made in the trace is changed as a
 * dict and marked diverged (eager's order no longer follows its storage: em_dict_diverged). */
static EmStatus call_by_type(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyObject *f = fn->obj;
    EmSym *recv = self ? self : n >= 1 ? all[0] : NULL;
    int bypass = (fn->kind == SYM_CONST || fn->kind == SYM_OBJ) && recv &&
                 (Py_IS_TYPE(f, &PyMethodDescr_Type) || Py_IS_TYPE(f, &PyWrapperDescr_Type)) && bypasses_order(f, recv);
    if (bypass && !(recv->kind == SYM_DICT && recv->src < 0 && recv->pos == 0))
        return em_trace_fail(T, EMA_CALL, "dict.%s on an OrderedDict of the frame (it bypasses its order)",
                             PyUnicode_AsUTF8(PyDescr_NAME(f)));
    EmStatus st = call_by_type_impl(T, fn, self, all, n, kwnames, out);
    if (st == EM_OK && bypass) recv->diverged = 1;
    return st;
}

/* em_call's fourth step: the callee's _rules.py rule (methods of immutable builtin values are
 * CONST); CALL_NEXT for RULE_UNKNOWN. */
/* f is tuple's own method (index, count) bound to a constant tuple subclass instance that
 * keeps it (torch.Size(...).index(3)): pure, as on a tuple. */
static int tuple_own_method(PyObject *bound_to, PyObject *f) {
    if (!PyTuple_Check(bound_to) || !PyCFunction_Check(f)) return 0;
    const char *name = ((PyCFunctionObject *)f)->m_ml->ml_name;
    if (strcmp(name, "index") && strcmp(name, "count")) return 0;
    PyObject *key = PyUnicode_FromString(name);
    int own = key && _PyType_Lookup(Py_TYPE(bound_to), key) == _PyType_Lookup(&PyTuple_Type, key);
    Py_XDECREF(key);
    if (!key) PyErr_Clear(); /* out of memory: simply not pure here */
    return own;
}

/* str.isalnum(c), int.bit_length(n), tuple.index(t, v)...: a method of an immutable builtin
 * type called unbound on a constant of that type: pure, as its bound form. */
static int immutable_unbound(PyObject *f, EmSym **all, int n) {
    if (!Py_IS_TYPE(f, &PyMethodDescr_Type) || n < 1 || all[0]->kind != SYM_CONST) return 0;
    PyTypeObject *t = PyDescr_TYPE(f);
    return (t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyLong_Type || t == &PyFloat_Type ||
            t == &PyTuple_Type || t == &PyFrozenSet_Type || t == &PyComplex_Type) &&
           Py_IS_TYPE(all[0]->obj, t);
}

static EmStatus call_by_rule(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    PyObject *f = fn->obj;
    char name[160];
    EmStatus ost = em_operator_call(T, f, all, n, kwnames, out);
    if (ost != CALL_NEXT) return ost;
    PyObject *bound_to = PyCFunction_Check(f) ? PyCFunction_GET_SELF(f) : NULL;
    /* methods of immutable builtin values ("-".join, "{}".format, (1, 2).index): pure */
    /* and their types' class methods and __new__ (int.from_bytes, bool.__new__(bool, 1)) */
    int immutable_type = bound_to && PyCFunction_Check(f) &&
                         (bound_to == (PyObject *)&PyUnicode_Type || bound_to == (PyObject *)&PyBytes_Type ||
                          bound_to == (PyObject *)&PyLong_Type || bound_to == (PyObject *)&PyFloat_Type ||
                          bound_to == (PyObject *)&PyBool_Type || bound_to == (PyObject *)&PyComplex_Type);
    int rule = (bound_to &&
                (PyUnicode_CheckExact(bound_to) || PyBytes_CheckExact(bound_to) || PyLong_CheckExact(bound_to) ||
                 PyFloat_CheckExact(bound_to) || PyTuple_CheckExact(bound_to) || PyFrozenSet_CheckExact(bound_to) ||
                 PyBool_Check(bound_to) || PyComplex_CheckExact(bound_to) || immutable_type ||
                 tuple_own_method(bound_to, f))) ||
                       immutable_unbound(f, all, n)
                   ? RULE_CONST
                   : rule_of(f);
    /* classify asks the callable itself (isinstance reads its __class__, which may raise) */
    if (rule < 0) return em_trace_abandon(T, EMA_CALL, "a %s whose class cannot be read", Py_TYPE(f)->tp_name);
    if (rule == RULE_CONST) { /* a numpy function given tensors or ndarrays: its torch._numpy twin */
        EmStatus st = em_np_function(T, f, all, n, kwnames, out);
        if (st != CALL_NEXT) return st;
    }
    if (rule == RULE_CONST && PyCFunction_Check(f)) {
        EmStatus st = consume_iter_args(T, f, all, n);
        if (st != EM_OK) return st;
    }
    switch (rule) {
        case RULE_GRAPH:
            /* a torch function written in Python given a function made while tracing (torch.cond's
             * branches): its body is traced, since the stand-in cannot run */
            for (int i = 0; PyFunction_Check(f) && i < n; i++)
                if (em_sym_placeholder(all[i])) return em_inline(T, f, all, n, kwnames, out);
            return em_op_record(T, EMOP_CALL, f, all, n, kwnames, NULL, out);
        case RULE_CONST:
        case RULE_META_QUERY: return call_eval(T, f, all, n, kwnames, rule, out);
        case RULE_TRUE: *out = em_sym_const(T, Py_True); return *out ? EM_OK : EM_ERR;
        case RULE_CTX: return em_ctx_make(T, f, all, n, kwnames, out);
        case RULE_NUMPY: return em_np_call(T, f, all, n, kwnames, out);
        case RULE_ABORT: em_callable_name(f, name, sizeof(name)); return em_trace_fail(T, EMA_NOT_IN_GRAPH, "%s", name);
        default: break;
    }
    return CALL_NEXT;
}

/* An exception class called with constants: a constant. */
static EmStatus call_exception_class(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    int has_tensor = 0;
    PyObject *stack[9];
    if (n > 8) return em_trace_fail(T, EMA_CALL, "exception with many arguments");
    for (int i = 0; i < n; i++)
        if (all[i]->kind != SYM_CONST || !(stack[i] = meta_value(T, all[i], &has_tensor))) {
            for (int k = 0; k < i; k++) Py_DECREF(stack[k]);
            return PyErr_Occurred() ? EM_ERR
                                    : em_trace_fail(T, EMA_CALL, "exception made from a %s", em_sym_describe(all[i]));
        }
    PyObject *e = PyObject_Vectorcall(f, stack, (size_t)(n - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0)), kwnames);
    for (int i = 0; i < n; i++) Py_DECREF(stack[i]);
    if (!e) { /* whatever its __new__/__init__ raised, Python raises again when it runs the call after the abort */
        return em_trace_abandon(T, EMA_CALL, "making the exception raised");
    }
    *out = em_sym_const(T, e);
    Py_DECREF(e);
    return *out ? EM_OK : EM_ERR;
}

/* A functools.lru_cache function of arguments that hold no tensor: its __wrapped__ inlined, as
 * TorchDynamo does (a cache hit would skip the body: a body with side effects the graph would
 * show aborts; a tensor argument aborts: eager would return what it cached for that object even
 * after its values changed). */
static EmStatus call_lru_cached(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    for (int i = 0; i < n; i++)
        if (em_sym_has_tensor(all[i]) || all[i]->kind == SYM_INT || all[i]->kind == SYM_FLOAT)
            return em_trace_fail(T, EMA_CALL, "an lru_cache function given a %s", em_sym_describe(all[i]));
    PyObject *w = PyObject_GetAttrString(f, "__wrapped__");
    if (!w) return em_trace_abandon(T, EMA_CALL, "an lru_cache function without __wrapped__");
    uint32_t stores0 = T->store_ver;
    int32_t nodes0 = T->G->nodes.len;
    EmStatus st = PyFunction_Check(w) ? em_inline(T, w, all, n, kwnames, out)
                                      : em_trace_fail(T, EMA_CALL, "an lru_cache of a %s", Py_TYPE(w)->tp_name);
    Py_DECREF(w);
    if (st == EM_OK && (T->store_ver != stores0 || em_graph_mutated(T->G, nodes0)))
        st = em_trace_fail(T, EMA_CALL, "an lru_cache function with side effects");
    return st;
}

/* em_call's last step, for a callee without a rule: nn.Module.__call__ on a module, a Python
 * function or a module from the frame inlined, an exception or an instance made; else the
 * trace aborts. */
/* f (a function, or an lru_cache wrapper of one) marked by torch._dynamo.assume_constant_result
 * (`_dynamo_marked_constant`: transformers' install and hardware probes) and called with
 * constants: called now, its result a constant of the trace, not guarded (as TorchDynamo takes
 * it). CALL_NEXT for other calls. */
static EmStatus call_marked_constant(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    PyObject *mark = NULL, *vals[16];
    if (PyFunction_Check(f)) {
        PyObject *d = ((PyFunctionObject *)f)->func_dict;
        mark = d ? PyDict_GetItemWithError(d, EM_STR(dynamo_marked_constant)) : NULL;
        Py_XINCREF(mark);
    } else if (Py_IS_TYPE(f, (PyTypeObject *)EM_KNOWN(lru_wrapper))) {
        mark = PyObject_GetAttr(f, EM_STR(dynamo_marked_constant)); /* update_wrapper copied the function's */
    }
    int marked = mark && PyObject_IsTrue(mark) == 1;
    Py_XDECREF(mark);
    PyErr_Clear();
    if (!marked || n > 16) return CALL_NEXT;
    int k = 0;
    for (; k < n && (vals[k] = em_sym_value(T, all[k])); k++) {}
    PyObject *r = NULL;
    if (k == n) {
        Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        r = PyObject_Vectorcall(f, vals, (size_t)(n - nkw), kwnames);
    }
    for (int i = 0; i < k; i++) Py_DECREF(vals[i]);
    if (k < n) return PyErr_Occurred() ? EM_ERR : CALL_NEXT; /* an argument not known: traced */
    if (!r) return em_trace_abandon(T, EMA_CALL, "a function marked constant raised");
    EmStatus st = EM_OK;
    if (em_is_pure(r) || (PyTuple_CheckExact(r) && em_sym_tuple_key(r))) *out = em_sym_const(T, r);
    else st = em_trace_fail(T, EMA_VALUE, "a function marked constant returned a %s", Py_TYPE(r)->tp_name);
    Py_DECREF(r);
    return st == EM_OK && !*out ? EM_ERR : st;
}

static EmStatus call_unruled(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    PyObject *f = fn->obj;
    char name[160];
    if (f == em_module_base_call() && n >= 1 && (all[0]->kind == SYM_OBJ || all[0]->kind == SYM_NEW) &&
        em_is_module(all[0]->obj)) /* nn.Module.__call__(m, ...) */
        return em_module_call_impl(T, all[0], all + 1, n - 1, kwnames, out);
    EmStatus cst = call_marked_constant(T, f, all, n, kwnames, out);
    if (cst != CALL_NEXT) return cst;
    if (PyFunction_Check(f)) {
        return em_inline_closure(T, f, fn->items.len ? fn : NULL, all, n, kwnames, out);
    }
    if ((fn->kind == SYM_OBJ || fn->kind == SYM_NEW) && em_is_module(f))
        return em_inline_module(T, fn, all, n, kwnames, out);
    if (PyExceptionClass_Check(f)) return call_exception_class(T, f, all, n, kwnames, out);
    if (PyType_Check(f)) {
        int handled;
        EmStatus st = em_obj_new(T, f, all, n, kwnames, out, &handled);
        if (st != EM_OK || handled) return st;
    }
    if (Py_IS_TYPE(f, (PyTypeObject *)EM_KNOWN(lru_wrapper))) return call_lru_cached(T, f, all, n, kwnames, out);
    PyObject *call = (fn->kind == SYM_OBJ && fn->src >= 0 && !PyType_Check(f)) || fn->kind == SYM_NEW
                         ? _PyType_Lookup(Py_TYPE(f), EM_STR(dunder_call))
                         : NULL;
    if (call && PyFunction_Check(call) && n < 64) { /* an instance whose class defines __call__ in Python */
        if (fn->kind == SYM_OBJ && !fn->by_id && em_guard_check(T->P, EMG_TYPE, fn->src, (PyObject *)Py_TYPE(f), 0))
            return EM_ERR;
        EmSym *with_self[65] = {fn};
        for (int i = 0; i < n; i++) with_self[i + 1] = all[i];
        return em_inline(T, call, with_self, n + 1, kwnames, out);
    }
    em_callable_name(f, name, sizeof(name));
    return em_trace_fail(T, PyMethod_Check(f) ? EMA_INLINE : EMA_CALL, "%s", name);
}

/* What a call becomes: the first of em_call's steps to take it (each returns CALL_NEXT when
 * the call is not its case). The order matters where two steps could both take a call: the
 * kind checks come first because the other steps read fn->obj as the callee, and the table
 * comes before the type checks because object.__getattribute__ (a row) is also a slot
 * wrapper, which call_by_type would take as a builtin method; a rule applies only to
 * callables no earlier step took. */
EmStatus em_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    static const EmCallFn steps[] = {call_fold_read, call_by_kind, call_known,
                                     call_by_type,   call_by_rule, call_unruled};
    EmSym *all[65];
    if (nargs + 1 > 65) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
    int n = 0;
    if (self) all[n++] = self;
    for (int i = 0; i < nargs; i++) all[n++] = args[i];
    /* a bound on the C recursion of calls handled by calls (an inlined frame counts its own
     * depth too): a cycle in the handlers aborts instead of overflowing the C stack */
    if (T->call_depth >= EM_MAX_CALL_DEPTH) return em_trace_fail(T, EMA_CALL, "calls nested too deeply");
    T->call_depth++;
    EmStatus st = CALL_NEXT;
    for (size_t i = 0; st == CALL_NEXT && i < sizeof(steps) / sizeof(steps[0]); i++)
        st = steps[i](T, fn, self, all, n, kwnames, out);
    T->call_depth--;
    return st;
}
