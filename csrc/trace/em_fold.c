/* em_fold.c: small tensors whose values the trace knows.
 *
 * A tensor of at most one element that a pure torch op makes from constants
 * (torch.div(n, 8, rounding_mode="trunc"), torch.tensor(3)), or from such tensors and
 * constants (`k - 1`), is also computed for real while tracing, by eager's kernel on eager's
 * device: its value follows from values the guards pin, as FakeTensor's constant propagation
 * has it. Where Python reads that value (int(k), k.item(), `if k:`, a size: x.view(k, -1)), the
 * trace reads the real tensor instead of breaking; the graph still computes the tensor.
 *
 * T->known_refs[i] is a node whose value is T->known_vals[i] (a real tensor). An in-place op
 * on a known tensor whose operands are all known runs for real too: the real views of it see
 * the change as the graph's do. Any other write to a known tensor, or to a value computed from
 * one (a view the trace did not fold), forgets every known value. Ops are folded through
 * _rules.fold, which runs only operators and ATen ops that are neither random nor uninitialized.
 */
#include "../pyver/em_state.h"
#include "em_trace_int.h"

/* Values with at most this many containers and items are folded; more is not worth it. */
#define FOLD_MAX_ITEMS 64

/* The real tensor of node r (borrowed), or NULL when the trace does not know it. */
static PyObject *known_of(const EmTracer *T, EmRef r) {
    for (int32_t i = T->known_refs.len - 1; i >= 0; i--)
        if (T->known_refs.data[i] == r) return PyList_GET_ITEM(T->known_vals, i);
    return NULL;
}

PyObject *em_fold_known(const EmTracer *T, const EmSym *s) {
    return s->kind == SYM_TENSOR && s->ref >= 0 && T->known_refs.len ? known_of(T, s->ref) : NULL;
}

static int known_add(EmTracer *T, EmRef r, PyObject *v) {
    if (!T->known_vals && !(T->known_vals = PyList_New(0))) return -1;
    if (PyList_Append(T->known_vals, v)) return -1;
    if (em_vec_push(&T->known_refs, r)) return PyErr_NoMemory(), -1;
    return 0;
}

static void known_forget(EmTracer *T) {
    T->known_refs.len = 0;
    if (T->known_vals) PyList_SetSlice(T->known_vals, 0, PyList_GET_SIZE(T->known_vals), NULL);
}

/* s as a real value (new reference): a constant, a known tensor, or a plain tuple or list of
 * such; NULL (no exception) when s is anything else. *left bounds the walk. */
static EM_NEW PyObject *real_value(EmTracer *T, EmSym *s, int *left) {
    if (--*left < 0) return NULL;
    if (s->kind == SYM_CONST) return em_set_changed(s) ? NULL : Py_NewRef(s->obj);
    if (s->kind == SYM_TENSOR) return Py_XNewRef(em_fold_known(T, s));
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || s->seq_type) return NULL;
    PyObject *r = s->kind == SYM_TUPLE ? PyTuple_New(s->items.len) : PyList_New(s->items.len);
    for (int32_t i = 0; r && i < s->items.len; i++) {
        PyObject *v = real_value(T, s->items.data[i], left);
        if (!v) {
            Py_CLEAR(r);
            break;
        }
        if (s->kind == SYM_TUPLE) PyTuple_SET_ITEM(r, i, v);
        else PyList_SET_ITEM(r, i, v);
    }
    if (!r && PyErr_Occurred()) PyErr_Clear(); /* an allocation failure: simply not folded */
    return r;
}

/* fn run by _rules.fold on the args' real values: the real tensor (new reference), or NULL
 * (no exception) when an argument is not known or fn is not folded. */
static EM_NEW PyObject *fold_call(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, int inplace) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int left = FOLD_MAX_ITEMS;
    PyObject *pos = PyTuple_New(npos), *kw = PyDict_New(), *r = NULL;
    int ok = pos && kw;
    for (Py_ssize_t i = 0; ok && i < nargs; i++) {
        PyObject *v = real_value(T, args[i], &left);
        if (!v) ok = 0;
        else if (i < npos) PyTuple_SET_ITEM(pos, i, v);
        else {
            ok = !PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - npos), v);
            Py_DECREF(v);
        }
    }
    if (ok) r = PyObject_CallMethod(em_state.meta_run, "fold", "OOOO", fn, pos, kw, inplace ? Py_True : Py_False);
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    if (r == Py_None) Py_CLEAR(r);
    if (!r) PyErr_Clear(); /* not folded: the graph computes it, the trace does not know it */
    return r;
}

/* The tensors s holds (itself, or through tuples and lists): bit 1 when one is known, bit 2
 * when one is not. */
static int tensors_held(const EmTracer *T, EmSym *s, int depth) {
    if (s->kind == SYM_TENSOR) return em_fold_known(T, s) ? 1 : 2;
    int r = 0;
    for (int32_t i = 0; (s->kind == SYM_TUPLE || s->kind == SYM_LIST) && depth <= 4 && i < s->items.len; i++)
        r |= tensors_held(T, s->items.data[i], depth + 1);
    return r;
}

/* A write to node r that was not run for real: when r is known, or computed from a known
 * node (a view the trace did not fold), every known value may be stale and is forgotten. */
static EmStatus written(EmTracer *T, EmRef r) {
    if (!T->known_refs.len) return EM_OK;
    int hit = em_node_reaches(T, r, T->known_refs.data, T->known_refs.len);
    if (hit < 0) return PyErr_NoMemory(), EM_ERR;
    if (hit) known_forget(T);
    return EM_OK;
}

/* The in-place op (on args[0], node self_before until now) run for real when its target is
 * known and its operands too; else the write forgets what it may have changed. */
static EmStatus fold_inplace(EmTracer *T, PyObject *f, EmSym **args, int nargs, PyObject *kwnames, EmRef self_before) {
    PyObject *was = T->known_refs.len ? known_of(T, self_before) : NULL;
    if (!was || !f || T->autocast) return written(T, self_before);
    if (args[0]->ref != self_before && known_add(T, args[0]->ref, was)) return EM_ERR;
    PyObject *r = fold_call(T, f, args, nargs, kwnames, 1);
    if (!r) known_forget(T); /* the target is known and changed: not run here, not known */
    Py_XDECREF(r);
    return EM_OK;
}

/* The size of node r's tensor when it is static and at most one element, else -1. */
static int small_static(EmTracer *T, EmRef r) {
    const EmNode *n = &T->G->nodes.data[r];
    if (n->vkind != EMV_TENSOR || (em_int_active(T) && em_node_has_sym_dims(T, r))) return -1;
    int64_t numel = 1;
    for (int d = 0; d < n->ndim; d++) numel *= em_ir_sizes(T->G, n)[d];
    return numel <= 1 ? (int)numel : -1;
}

/* Node r, a tensor made of constants alone whose value is real, becomes torch.full(size,
 * value, dtype=, device=) where _rules.fold_factory says it may: a factory, which AOTAutograd's
 * functionalization tracks (torch.div(8, 4) of no tensor makes a tensor it does not, and an
 * in-place op on it then fails to compile). */
static EmStatus as_factory(EmTracer *T, EmRef r, PyObject *real) {
    PyObject *spec = PyObject_CallMethod(em_state.meta_run, "fold_factory", "O", real);
    if (!spec) return PyErr_Clear(), EM_OK; /* the node stays as it was */
    EmStatus st = EM_OK;
    if (spec != Py_None) {
        PyObject *vals = PyTuple_GET_ITEM(spec, 1);
        EmSym *a[4];
        for (int i = 0; i < 4 && st == EM_OK; i++)
            if (!(a[i] = em_sym_const(T, PyTuple_GET_ITEM(vals, i)))) st = EM_ERR;
        if (st == EM_OK)
            st = em_node_recall(T, r, PyTuple_GET_ITEM(spec, 0), "torch.full", a, 4, PyTuple_GET_ITEM(spec, 2));
    }
    Py_DECREF(spec);
    return st;
}

EmStatus em_fold_after(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                       EmRef self_before, EmRef into, EmSym *out) {
    PyObject *f = op == EMOP_CALL ? fn : em_op_info[op].kind == EMOK_GETATTR ? NULL : em_op_fn(op);
    if (into >= 0 && written(T, into) != EM_OK) return EM_ERR;
    if (self_before >= 0 && (em_op_info[op].kind == EMOK_SETITEM || (out == args[0] && args[0]->ref != self_before)))
        return fold_inplace(T, f, args, nargs, kwnames, self_before);
    if (T->known_refs.len && f) { /* an op that may write a known tensor it is given (foreach_add_, batch_norm) */
        int given = 0;
        for (int i = 0; i < nargs && !given; i++) given = tensors_held(T, args[i], 0) & 1;
        PyObject *p = given ? PyObject_CallMethod(em_state.meta_run, "pure", "O", f) : NULL;
        if (given && !p) return EM_ERR;
        if (p && p != Py_True) known_forget(T);
        Py_XDECREF(p);
    }
    if (!f || T->autocast || !out || out->kind != SYM_TENSOR || out->ref < 0 || (nargs && out == args[0]) ||
        into >= 0 || small_static(T, out->ref) < 0)
        return EM_OK;
    int tensors = 0;
    for (int i = 0; i < nargs; i++) tensors |= tensors_held(T, args[i], 0);
    if (tensors & 2) return EM_OK; /* a tensor the trace does not know */
    PyObject *r = fold_call(T, f, args, nargs, kwnames, 0);
    EmStatus st = !r ? EM_OK : known_add(T, out->ref, r) ? EM_ERR : tensors ? EM_OK : as_factory(T, out->ref, r);
    Py_XDECREF(r);
    return st;
}

/* Whether f reads the value of a tensor argument as a Python number: Tensor.item, tolist,
 * __int__, __float__, __bool__, __index__, __complex__; int, float, bool, complex, range;
 * operator.index; math.floor, ceil, trunc. */
static int reads_value(PyObject *f) {
    static const char *const methods[] = {"item",     "tolist",    "__int__",     "__float__",
                                          "__bool__", "__index__", "__complex__", NULL};
    if (f == (PyObject *)&PyLong_Type || f == (PyObject *)&PyFloat_Type || f == (PyObject *)&PyBool_Type ||
        f == (PyObject *)&PyComplex_Type || f == (PyObject *)&PyRange_Type)
        return 1;
    if (Py_IS_TYPE(f, &PyMethodDescr_Type)) {
        PyTypeObject *owner = PyDescr_TYPE(f);
        if (owner != em_state.tensor_type && owner != em_state.tensor_type->tp_base) return 0;
        for (int i = 0; methods[i]; i++)
            if (!PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), methods[i])) return 1;
        return 0;
    }
    PyObject *m = PyCFunction_Check(f) ? ((PyCFunctionObject *)f)->m_module : NULL;
    if (!m || !PyUnicode_Check(m)) return 0;
    const char *name = ((PyCFunctionObject *)f)->m_ml->ml_name;
    if (!PyUnicode_CompareWithASCIIString(m, "operator")) return !strcmp(name, "index");
    if (!PyUnicode_CompareWithASCIIString(m, "math"))
        return !strcmp(name, "floor") || !strcmp(name, "ceil") || !strcmp(name, "trunc");
    return 0;
}

/* A number or a flat list of numbers (what tolist() of one element gives). */
static int plain_number(PyObject *v) {
    return PyLong_CheckExact(v) || PyBool_Check(v) || PyFloat_CheckExact(v) || PyComplex_CheckExact(v) ||
           PyRange_Check(v);
}

EmStatus em_fold_read(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    if (!T->known_refs.len || n < 1 || n > 3 || kwnames) return CALL_NEXT;
    int any = 0;
    for (int i = 0; i < n; i++) {
        if (em_fold_known(T, all[i])) any = 1;
        else if (all[i]->kind != SYM_CONST) return CALL_NEXT;
    }
    if (!any || !reads_value(f)) return CALL_NEXT;
    PyObject *stack[3];
    for (int i = 0; i < n; i++) {
        PyObject *k = em_fold_known(T, all[i]);
        stack[i] = k ? k : all[i]->obj;
    }
    PyObject *r = PyObject_Vectorcall(f, stack, (size_t)n, NULL);
    if (!r) { /* eager raises it too (a value out of range): the call runs as Python */
        return em_trace_abandon(T, EMA_CALL, "reading the value of a tensor the trace knows raised");
    }
    int flat = PyList_CheckExact(r);
    for (Py_ssize_t i = 0; flat && i < PyList_GET_SIZE(r); i++) flat = plain_number(PyList_GET_ITEM(r, i));
    if (!flat && !plain_number(r)) {
        Py_DECREF(r);
        return CALL_NEXT;
    }
    if (flat) {
        EmSym *s = em_sym_new(T, SYM_LIST);
        for (Py_ssize_t i = 0; s && i < PyList_GET_SIZE(r); i++) {
            EmSym *it = em_sym_const(T, PyList_GET_ITEM(r, i));
            if (!it || em_vec_push(&s->items, it)) s = NULL;
        }
        *out = s;
    } else {
        *out = em_sym_const(T, r);
    }
    Py_DECREF(r);
    return *out ? EM_OK : EM_ERR;
}

EmSym *em_fold_numbers(EmTracer *T, EmSym *s, int depth) {
    PyObject *real = em_fold_known(T, s);
    if (real) {
        PyObject *v = PyObject_CallMethod(real, "item", NULL);
        EmSym *c = v ? em_sym_const(T, v) : NULL;
        Py_XDECREF(v);
        return c;
    }
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || depth > 4) return s;
    EmSym *r = s;
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *it = em_fold_numbers(T, s->items.data[i], depth + 1);
        if (!it) return NULL;
        if (it == s->items.data[i] && r == s) continue;
        if (r == s) { /* the first item replaced: a copy of s from here on */
            if (!(r = em_sym_new(T, s->kind))) return NULL;
            r->seq_type = Py_XNewRef(s->seq_type);
            for (int32_t k = 0; k < i; k++)
                if (em_vec_push(&r->items, s->items.data[k])) return PyErr_NoMemory(), NULL;
        }
        if (em_vec_push(&r->items, it)) return PyErr_NoMemory(), NULL;
    }
    return r;
}
