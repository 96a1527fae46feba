/* em_sym_slice.c: SYM_SLICE, a slice with a symbolic bound (x[:, :n] where n is a size):
 * items[0..2] are its start, stop and step syms (constants or SYM_INTs). Indexing a tensor with
 * it is a graph op whose key is made at run time (slice(start, stop, step) from the bounds'
 * graph values), and its result's size follows from the bounds (em_shape_sym.c); any other use
 * (a list's slice, its value) pins the bounds and takes the constant slice.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

EmStatus em_slice_build(EmTracer *T, EmSym **bounds, int n, EmSym **out) {
    PyObject *v[3] = {Py_None, Py_None, Py_None};
    int sym = 0;
    EmSym *sized[3];
    if (em_item_among(bounds, n)) { /* x[:n] of an int item: a size */
        EmStatus st = em_item_sizes(T, bounds, n, sized);
        if (st != EM_OK) return st;
        bounds = sized;
    }
    for (int i = 0; i < n; i++) {
        if (bounds[i]->kind != SYM_CONST && bounds[i]->kind != SYM_INT)
            return em_trace_fail(T, EMA_VALUE, "slice bound %s", em_sym_describe(bounds[i]));
        sym |= bounds[i]->kind == SYM_INT;
        v[i] = bounds[i]->obj;
    }
    if (sym) return em_slice_make(T, bounds, n, out);
    PyObject *s = PySlice_New(v[0], v[1], n == 3 ? v[2] : NULL);
    if (!s) return EM_ERR;
    *out = em_sym_const(T, s);
    Py_DECREF(s);
    return *out ? EM_OK : EM_ERR;
}

/* bounds: constants and SYM_INTs only (em_slice_build checks). */
EmStatus em_slice_make(EmTracer *T, EmSym **bounds, int n, EmSym **out) {
    EmSym *s = em_sym_new(T, SYM_SLICE);
    if (!s) return EM_ERR;
    for (int i = 0; i < 3; i++) {
        EmSym *b = i < n ? bounds[i] : em_sym_const(T, Py_None);
        if (!b || em_vec_push(&s->items, b)) return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
    }
    *out = s;
    return EM_OK;
}

EM_NEW PyObject *em_slice_value(EmTracer *T, EmSym *s) {
    PyObject *v[3] = {NULL, NULL, NULL}, *r = NULL;
    for (int i = 0; i < 3; i++) {
        EmSym *b = s->items.data[i];
        v[i] = b->kind == SYM_INT ? em_int_value(T, b) : Py_XNewRef(b->obj); /* pinned */
        if (!v[i]) goto done;
    }
    r = PySlice_New(v[0], v[1], v[2]);
done:
    for (int i = 0; i < 3; i++) Py_XDECREF(v[i]);
    return r;
}

EmSym *em_slice_pinned(EmTracer *T, EmSym *s) {
    PyObject *v = em_slice_value(T, s);
    EmSym *c = v ? em_sym_const(T, v) : NULL;
    Py_XDECREF(v);
    return c;
}

int32_t em_slice_arg(EmTracer *T, EmSym *s, EmStatus *st) {
    EmArg args[3];
    for (int i = 0; i < 3; i++) {
        int32_t a = em_sym_arg(T, s->items.data[i], st);
        if (a < 0) return -1;
        args[i] = T->G->args.data[a];
    }
    int32_t a0 = T->G->args.len;
    for (int i = 0; i < 3; i++)
        if (em_ir_arg(T->G, (EmArgKind)args[i].kind, args[i].v, args[i].n) < 0) goto nomem;
    int32_t fnc = em_ir_const(T->G, EMC_OBJ, 0, 0, (PyObject *)&PySlice_Type, "slice");
    if (fnc < 0) goto nomem;
    EmRef r = em_ir_node(T->G, EMOP_CALL, a0, 3, -1, 0, fnc);
    if (r < 0) goto nomem;
    return em_ir_arg(T->G, EMARG_REF, r, 0);
nomem:
    *st = EM_ERR;
    PyErr_NoMemory();
    return -1;
}

/* s.start / s.stop / s.step: the bound's sym; anything else of the pinned slice. */
static EmStatus slice_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    static const char *const fields[] = {"start", "stop", "step"};
    for (int i = 0; i < 3 && !method; i++)
        if (!PyUnicode_CompareWithASCIIString(name, fields[i])) {
            *out = base->items.data[i];
            return EM_OK;
        }
    EmSym *c = em_slice_pinned(T, base);
    return c ? em_sym_getattr(T, c, name, method, out, self) : EM_ERR;
}

static EmStatus slice_truth(EmTracer *T, EmSym *s, int *out) {
    (void)T;
    (void)s;
    *out = 1; /* a slice is always true */
    return EM_OK;
}

static EmStatus slice_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    (void)op;
    EmSym *x = a->kind == SYM_SLICE ? em_slice_pinned(T, a) : a, *y = b->kind == SYM_SLICE ? em_slice_pinned(T, b) : b;
    if (!x || !y) return EM_ERR;
    EmSym *args[2] = {x, y};
    return em_sym_eval(T, fn, args, 2, out);
}

const EmSymOps em_slice_ops = {
    .ident = EM_IDENT_UNKNOWN,
    .getattr = slice_getattr,
    .truth = slice_truth,
    .binop = slice_binop,
};
