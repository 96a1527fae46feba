/* em_infer.c: result metadata inferred in C for the common elementwise ops (Python
 * arithmetic and comparisons, and the pointwise torch functions listed in ember/_rules.py),
 * when every tensor operand has the same shape, dtype and device and is contiguous. Other
 * cases return "not inferred" and the caller runs the op on meta tensors. The result's meta
 * tensor is made only if a later op needs it (em_sym_meta).
 */
#include "em_trace.h"

#include "../pyver/em_state.h"

static int is_float_dt(int d) { return em_dtype_class(d) == EMDC_FLOAT; }
static int is_int_dt(int d) { return em_dtype_class(d) == EMDC_INT; }

static int contiguous(const EmGraph *G, const EmNode *n) {
    const int64_t *sz = em_ir_sizes(G, n), *st = em_ir_strides(G, n);
    int64_t expect = 1;
    for (int i = n->ndim - 1; i >= 0; i--) {
        if (sz[i] != 1 && st[i] != expect) return 0;
        expect *= sz[i];
    }
    return 1;
}

/* Broadcasts shape b (nb dims) into a (*na dims, updated); 0 when they do not broadcast. */
static int broadcast_into(int64_t *a, int *na, const int64_t *b, int nb) {
    int n = *na > nb ? *na : nb;
    if (n > 60) return 0;
    int64_t r[64];
    for (int i = 0; i < n; i++) {
        int ia = *na - n + i, ib = nb - n + i;
        int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
        if (x != y && x != 1 && y != 1) return 0;
        r[i] = x == 1 ? y : x;
    }
    memcpy(a, r, sizeof(int64_t) * (size_t)n);
    *na = n;
    return 1;
}

int em_infer_pointwise(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, int *dtype,
                       const EmNode **like, int *requires_grad, int64_t *bshape, int *bndim) {
    EmOpKind kind = em_op_info[op].kind;
    if (kwnames || T->autocast) return 0; /* autocast changes result dtypes: the fake run decides */
    if (op == EMOP_CALL) {
        if (nargs != 1 || !em_state.pointwise_fns) return 0;
        int r = PySet_Contains(em_state.pointwise_fns, fn);
        if (r < 0) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
            PyErr_Clear(); /* an unhashable callable is not in the set */
        }
        if (r != 1) return 0;
    } else if (!(op == EMOP_ADD || op == EMOP_SUB || op == EMOP_MUL || op == EMOP_TRUEDIV || op == EMOP_NEG ||
                 op == EMOP_POS || kind == EMOK_COMPARE)) {
        return 0;
    }
    const EmGraph *G = T->G;
    const EmNode *ref = NULL;
    int rg = 0, has_float_scalar = 0, broadcasted = 0, bnd = 0;
    int bcast = bshape != NULL && op != EMOP_CALL;
    for (int i = 0; i < nargs && bcast; i++) /* the broadcast shape starts from the first tensor */
        if (args[i]->kind == SYM_TENSOR) {
            const EmNode *n = &G->nodes.data[args[i]->ref];
            if (n->ndim > 60) return 0;
            bnd = n->ndim;
            if (n->ndim) memcpy(bshape, em_ir_sizes(G, n), sizeof(int64_t) * (size_t)n->ndim);
            break;
        }
    for (int i = 0; i < nargs; i++) {
        EmSym *s = args[i];
        if (s->kind == SYM_TENSOR) {
            const EmNode *n = &G->nodes.data[s->ref];
            if (n->vkind != EMV_TENSOR || n->dtype < 0) return 0;
            if (!ref) {
                if (!contiguous(G, n)) return 0;
                ref = n;
            } else if (n->dtype != ref->dtype || n->dev_type != ref->dev_type || n->dev_index != ref->dev_index ||
                       !contiguous(G, n)) {
                return 0;
            } else if (n->ndim != ref->ndim ||
                       (n->ndim && memcmp(em_ir_sizes(G, n), em_ir_sizes(G, ref), sizeof(int64_t) * n->ndim))) {
                if (!bcast) return 0;
                /* broadcasting contiguous operands: a contiguous result of the broadcast shape */
                if (!broadcast_into(bshape, &bnd, em_ir_sizes(G, n), n->ndim)) return 0;
                broadcasted = 1;
            }
            rg |= n->requires_grad;
        } else if (s->kind == SYM_CONST && (PyLong_CheckExact(s->obj) || PyFloat_CheckExact(s->obj))) {
            has_float_scalar |= PyFloat_CheckExact(s->obj);
        } else {
            return 0;
        }
    }
    if (!ref) return 0;
    int d = ref->dtype;
    if (!is_float_dt(d) && !(is_int_dt(d) && !has_float_scalar && op != EMOP_TRUEDIV && op != EMOP_CALL)) return 0;
    if (kind == EMOK_COMPARE) {
        d = EMDT_BOOL;
        rg = 0;
    }
    *dtype = d;
    *like = ref;
    *requires_grad = rg && T->grad && is_float_dt(d);
    if (bshape) *bndim = broadcasted ? bnd : -1;
    return 1;
}

/* ---- shape rules (ember/_rules.py SHAPE_RULES) ---- */

enum {
    SR_NONE,
#define X(name) SR_##name,
#include "em_shape_rules.def"
#undef X
};

static const EmNode *tensor_node(EmTracer *T, EmSym *s) {
    if (s->kind != SYM_TENSOR) return NULL;
    const EmNode *n = &T->G->nodes.data[s->ref];
    return n->vkind == EMV_TENSOR && n->dtype >= 0 ? n : NULL;
}

static void contiguous_strides(EmInferred *r) {
    int64_t st = 1;
    for (int i = r->ndim - 1; i >= 0; i--) {
        r->strides[i] = st;
        st *= r->sizes[i] > 1 ? r->sizes[i] : 1;
    }
}

/* An int constant into *v; 0 when x is not an int or does not fit. */
static int int_value(PyObject *x, int64_t *v) {
    int overflow = 0;
    if (!PyLong_Check(x)) return 0;
    *v = PyLong_AsLongLongAndOverflow(x, &overflow); /* cannot fail on an int but by overflow */
    return !overflow;
}

/* An int or a sequence of 1 or nsp ints (a CONST sym) into v[0..nsp); 0 when it is something else. */
static int int_params(EmSym *s, int nsp, int64_t *v) {
    if (!s || s->kind != SYM_CONST) return 0;
    PyObject *o = s->obj;
    if (PyLong_Check(o)) {
        for (int i = 0; i < nsp; i++)
            if (!int_value(o, &v[i])) return 0;
        return 1;
    }
    if (!PyTuple_Check(o) && !PyList_Check(o)) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n != 1 && n != nsp) return 0;
    for (int i = 0; i < nsp; i++)
        if (!int_value(PySequence_Fast_GET_ITEM(o, n == 1 ? 0 : i), &v[i])) return 0;
    return 1;
}

/* The operands of a shape rule: the first positional operand x is a contiguous floating
 * tensor; every other operand is a constant (not a dtype, not inplace=True) or a floating
 * tensor on x's device. Fills r's dtype, device and requires_grad; 0 when not. */
static int rule_operands(EmTracer *T, EmSym **args, int nargs, PyObject *kwnames, Py_ssize_t npos, const EmNode *x,
                         EmInferred *r) {
    if (!x || !is_float_dt(x->dtype) || !contiguous(T->G, x) || x->ndim > 60) return 0;
    int rg = x->requires_grad;
    for (int i = 1; i < nargs; i++) {
        EmSym *s = args[i];
        if (s->kind == SYM_CONST) {
            if (!strcmp(Py_TYPE(s->obj)->tp_name, "torch.dtype")) return 0; /* softmax(x, dtype=...) */
            if (i >= npos && s->obj == Py_True &&
                !PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i - npos), "inplace"))
                return 0; /* the result is the operand itself */
            continue;
        }
        const EmNode *n = tensor_node(T, s);
        if (!n || n->dev_type != x->dev_type || n->dev_index != x->dev_index || !is_float_dt(n->dtype)) return 0;
        rg |= n->requires_grad;
    }
    r->dtype = x->dtype;
    r->dev_type = x->dev_type;
    r->dev_index = x->dev_index;
    r->requires_grad = rg && T->grad;
    return 1;
}

/* Operands of linear / convN by position or keyword, in the order of `names`; 0 when a
 * keyword is not one of them or is given twice. */
enum { OPD_INPUT, OPD_WEIGHT, OPD_BIAS, OPD_STRIDE, OPD_PADDING, OPD_DILATION, OPD_GROUPS, OPD__COUNT };
static int bind_operands(EmSym **args, Py_ssize_t npos, PyObject *kwnames, EmSym *op[OPD__COUNT]) {
    static const char *const names[OPD__COUNT] = {"input", "weight", "bias", "stride", "padding", "dilation", "groups"};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (npos > OPD__COUNT) return 0;
    for (int k = 0; k < OPD__COUNT; k++) op[k] = k < npos ? args[k] : NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        int k = 0;
        while (k < OPD__COUNT && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), names[k])) k++;
        if (k == OPD__COUNT || op[k]) return 0;
        op[k] = args[npos + i];
    }
    return 1;
}

/* No bias, a constant one (None), or a tensor of x's dtype. */
static int bias_ok(EmTracer *T, const EmNode *x, EmSym *bias) {
    if (!bias || bias->kind != SYM_TENSOR) return 1;
    const EmNode *b = tensor_node(T, bias);
    return b && b->dtype == x->dtype;
}

/* linear(input, weight, bias): x's shape with its last dimension weight's first. */
static int rule_linear(EmTracer *T, const EmNode *x, EmSym *op[OPD__COUNT], EmInferred *r) {
    const EmNode *w = tensor_node(T, op[OPD_WEIGHT]);
    const int64_t *xs = em_ir_sizes(T->G, x);
    if (!w || w->dtype != x->dtype || !contiguous(T->G, w) || !bias_ok(T, x, op[OPD_BIAS])) return 0;
    const int64_t *ws = em_ir_sizes(T->G, w);
    if (w->ndim != 2 || x->ndim < 1 || xs[x->ndim - 1] != ws[1] || op[OPD_STRIDE]) return 0;
    r->ndim = x->ndim;
    memcpy(r->sizes, xs, sizeof(int64_t) * (size_t)x->ndim);
    r->sizes[x->ndim - 1] = ws[0];
    return 1;
}

/* adaptive_avg_pool{1,2,3}d(input, output_size): batch and channels, then output_size (an
 * int, or one entry per spatial dimension, None keeping the input's). 1/0/-1. */
static int rule_adaptive_pool(EmTracer *T, const EmNode *x, int nsp, EmSym **args, Py_ssize_t npos, PyObject *kwnames,
                              EmInferred *r) {
    const int64_t *xs = em_ir_sizes(T->G, x);
    int64_t osz[3];
    if (nsp < 1 || nsp > 3 || npos != 2 || kwnames || x->ndim != nsp + 2 || args[1]->kind != SYM_CONST) return 0;
    PyObject *o = args[1]->obj;
    for (int i = 0; i < nsp; i++) {
        PyObject *v = PyLong_Check(o) ? o : NULL;
        if (!v && (PyTuple_Check(o) || PyList_Check(o)) && PySequence_Fast_GET_SIZE(o) == nsp)
            v = PySequence_Fast_GET_ITEM(o, i);
        if (v == Py_None) {
            osz[i] = xs[2 + i];
        } else if (v && PyLong_Check(v)) {
            int overflow;
            osz[i] = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (osz[i] == -1 && PyErr_Occurred()) return -1;
            if (overflow) return 0;
        } else {
            return 0;
        }
        if (osz[i] < 1) return 0;
    }
    r->ndim = x->ndim;
    r->sizes[0] = xs[0];
    r->sizes[1] = xs[1];
    memcpy(r->sizes + 2, osz, sizeof(int64_t) * (size_t)nsp);
    return 1;
}

/* convNd(input, weight, bias, stride, padding, dilation, groups) on a batched input. */
static int rule_conv(EmTracer *T, const EmNode *x, EmSym *op[OPD__COUNT], EmInferred *r) {
    const EmNode *w = tensor_node(T, op[OPD_WEIGHT]);
    if (!w || w->dtype != x->dtype || !contiguous(T->G, w) || !bias_ok(T, x, op[OPD_BIAS])) return 0;
    const int64_t *xs = em_ir_sizes(T->G, x), *ws = em_ir_sizes(T->G, w);
    int nsp = w->ndim - 2;
    int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1}, groups = 1;
    if (nsp < 1 || nsp > 3 || x->ndim != nsp + 2) return 0;
    if ((op[OPD_STRIDE] && !int_params(op[OPD_STRIDE], nsp, stride)) ||
        (op[OPD_PADDING] && !int_params(op[OPD_PADDING], nsp, pad)) ||
        (op[OPD_DILATION] && !int_params(op[OPD_DILATION], nsp, dil)))
        return 0;
    if (op[OPD_GROUPS]) {
        int overflow;
        if (op[OPD_GROUPS]->kind != SYM_CONST || !PyLong_Check(op[OPD_GROUPS]->obj)) return 0;
        groups = PyLong_AsLongLongAndOverflow(op[OPD_GROUPS]->obj, &overflow);
        if (groups == -1 && PyErr_Occurred()) return -1;
        if (overflow) return 0;
    }
    if (groups < 1 || xs[1] != ws[1] * groups || ws[0] % groups) return 0;
    r->ndim = x->ndim;
    r->sizes[0] = xs[0];
    r->sizes[1] = ws[0];
    for (int i = 0; i < nsp; i++) {
        if (stride[i] < 1 || dil[i] < 1 || pad[i] < 0) return 0;
        int64_t span = xs[2 + i] + 2 * pad[i] - dil[i] * (ws[2 + i] - 1) - 1;
        if (span < 0) return 0; /* the op raises */
        r->sizes[2 + i] = span / stride[i] + 1;
    }
    return 1;
}

int em_infer_shape(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmInferred *r) {
    if (!em_state.shape_rules || nargs < 1 || T->autocast) return 0;
    PyObject *rule = PyDict_GetItemWithError(em_state.shape_rules, fn);
    if (!rule) {
        if (!PyErr_Occurred()) return 0;
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
        PyErr_Clear(); /* an unhashable callable has no rule */
        return 0;
    }
    int kind = (int)PyLong_AsLong(PyTuple_Check(rule) ? PyTuple_GET_ITEM(rule, 0) : rule);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    const EmNode *x = npos >= 1 ? tensor_node(T, args[0]) : NULL;
    if (!rule_operands(T, args, nargs, kwnames, npos, x, r)) return 0;
    EmSym *op[OPD__COUNT];
    int ok;
    switch (kind) {
        case SR_LIKE_FIRST:
            r->ndim = x->ndim;
            if (x->ndim) memcpy(r->sizes, em_ir_sizes(T->G, x), sizeof(int64_t) * (size_t)x->ndim);
            ok = 1;
            break;
        case SR_LINEAR: ok = bind_operands(args, npos, kwnames, op) && rule_linear(T, x, op, r); break;
        case SR_CONV: ok = bind_operands(args, npos, kwnames, op) ? rule_conv(T, x, op, r) : 0; break;
        case SR_ADAPTIVE_POOL:
            ok = rule_adaptive_pool(T, x, (int)PyLong_AsLong(PyTuple_GET_ITEM(rule, 1)), args, npos, kwnames, r);
            break;
        default: ok = 0;
    }
    if (ok == 1) contiguous_strides(r);
    return ok;
}
