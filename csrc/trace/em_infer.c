/* em_infer.c: result metadata inferred in C for the common elementwise ops (Python
 * arithmetic and comparisons, and the pointwise torch functions listed in ember/_rules.py),
 * when every tensor operand has the same shape, dtype and device and is contiguous. Other
 * cases return "not inferred" and the caller runs the op on meta tensors. The result's meta
 * tensor is made only if a later op needs it (em_sym_meta).
 */
#include "em_trace_int.h"

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

/* ---- elementwise results: TensorIterator's output layout (aten/src/ATen/TensorIterator.cpp) ----
 * The result has the operands' broadcast shape. When every operand has that shape (no
 * Python or 0-dim scalar among them) and all are contiguous, all channels-last, or all dense
 * with equal strides, it takes that layout; otherwise its dimensions are ordered as the
 * operands' strides order them (a broadcast dimension tells nothing) and it is dense in that
 * order. */

typedef struct {
    int ndim;
    const int64_t *sz, *st;
} EmOpnd;

/* a[0..n) == b[0..n); a 0-dim node's arrays may be NULL */
static int same_ints(const int64_t *a, const int64_t *b, int n) {
    return n == 0 || !memcmp(a, b, sizeof(int64_t) * (size_t)n);
}

static int64_t numel(int n, const int64_t *sz) {
    int64_t k = 1;
    for (int i = 0; i < n; i++) k *= sz[i];
    return k;
}

int em_node_contiguous(const EmGraph *G, const EmNode *n) {
    const int64_t *sz = em_ir_sizes(G, n), *st = em_ir_strides(G, n);
    int64_t z = 1;
    for (int d = n->ndim - 1; d >= 0; d--) {
        if (sz[d] == 0) return 0; /* empty: torch calls it contiguous; not answered here */
        if (sz[d] == 1) continue;
        if (st[d] != z) return 0;
        z *= sz[d];
    }
    return 1;
}

static int is_contig(int n, const int64_t *sz, const int64_t *st) {
    int64_t z = 1;
    for (int d = n - 1; d >= 0; d--) {
        if (sz[d] == 1) continue;
        if (st[d] != z) return 0;
        z *= sz[d];
    }
    return 1;
}

static int is_channels_last(int n, const int64_t *sz, const int64_t *st) {
    static const int order[4] = {1, 3, 2, 0};
    if (n != 4) return 0;
    int64_t z = 1;
    for (int i = 0; i < 4; i++) {
        int d = order[i];
        if (sz[d] == 1) continue;
        if (st[d] != z) return 0;
        z *= sz[d];
    }
    return 1;
}

static int is_dense(int n, const int64_t *sz, const int64_t *st) {
    if (n == 1) return sz[0] < 2 || st[0] == 1;
    int perm[64];
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = 1; i < n; i++) /* stable insertion sort: size < 2 last, else by stride */
        for (int j = i; j > 0; j--) {
            int a = perm[j - 1], b = perm[j];
            int b_first = sz[a] < 2 ? sz[b] >= 2 : (sz[b] >= 2 && st[b] < st[a]);
            if (!b_first) break;
            perm[j - 1] = b;
            perm[j] = a;
        }
    int64_t need = 1;
    for (int i = 0; i < n; i++) {
        if (sz[perm[i]] < 2) return 1;
        if (st[perm[i]] != need) return 0;
        need *= sz[perm[i]];
    }
    return 1;
}

static void contiguous_of(int n, const int64_t *sz, int64_t *st) {
    int64_t z = 1;
    for (int i = n - 1; i >= 0; i--) {
        st[i] = z;
        z *= sz[i] > 1 ? sz[i] : 1;
    }
}

/* 1 when dim a should come after dim b (TensorIterator's should_swap), -1 before, 0 unknown;
 * bst: each operand's strides in the broadcast shape (0 where broadcast). */
static int should_swap(int64_t (*bst)[64], int nops, const int64_t *shape, int a, int b) {
    for (int k = 0; k < nops; k++) {
        int64_t s0 = bst[k][a], s1 = bst[k][b];
        if (s0 == 0 || s1 == 0) continue;
        if (s0 < s1) return -1;
        if (s0 > s1) return 1;
        if (shape[a] > shape[b]) return 1;
    }
    return 0;
}

/* The general case: dims ordered by the operands' strides, dense in that order. */
static void ordered_layout(const EmOpnd *ops, int nops, EmInferred *r) {
    int n = r->ndim, perm[64];
    int64_t bst[8][64];
    for (int k = 0; k < nops; k++) {
        int off = n - ops[k].ndim;
        for (int i = 0; i < n; i++) {
            int j = i - off;
            bst[k][i] = j < 0 || (ops[k].sz[j] == 1 && r->sizes[i] != 1) ? 0 : ops[k].st[j];
        }
    }
    for (int i = 0; i < n; i++) perm[i] = n - 1 - i; /* fastest first */
    for (int i = 1; i < n; i++) {
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int c = should_swap(bst, nops, r->sizes, perm[d0], perm[d1]);
            if (c > 0) {
                int t = perm[d0];
                perm[d0] = perm[d1];
                perm[d1] = t;
                d1 = d0;
            } else if (c < 0) {
                break;
            }
        }
    }
    int inverted = 1;
    for (int j = 0; j < n; j++) inverted &= perm[j] == n - 1 - j;
    if (inverted) {
        contiguous_of(n, r->sizes, r->strides);
        return;
    }
    int64_t z = 1;
    for (int j = 0; j < n; j++) {
        r->strides[perm[j]] = z;
        z *= r->sizes[perm[j]];
    }
}

/* r->ndim, sizes and strides of an elementwise op's result; 0 when the shapes do not
 * broadcast, an operand is empty, or there are too many operands or dims. scalars: a Python
 * number is among the operands. */
static int elementwise_layout(const EmOpnd *ops, int nops, int scalars, EmInferred *r) {
    int n = 0, same = 1, any0 = scalars, anyd = 0;
    if (nops > 8) return 0;
    for (int k = 0; k < nops; k++) {
        if (ops[k].ndim > 60 || numel(ops[k].ndim, ops[k].sz) == 0) return 0;
        if (ops[k].ndim > n) n = ops[k].ndim;
        any0 |= ops[k].ndim == 0;
        anyd |= ops[k].ndim > 0;
    }
    r->ndim = n;
    for (int i = 0; i < n; i++) r->sizes[i] = 1;
    for (int k = 0; k < nops; k++) {
        int off = n - ops[k].ndim;
        if (k && (ops[k].ndim != ops[0].ndim || !same_ints(ops[k].sz, ops[0].sz, ops[k].ndim))) same = 0;
        for (int j = 0; j < ops[k].ndim; j++) {
            int64_t x = r->sizes[off + j], y = ops[k].sz[j];
            if (x != y && x != 1 && y != 1) return 0;
            if (x == 1) r->sizes[off + j] = y;
        }
    }
    if (same && !(any0 && anyd)) {
        int contig = 1, cl = 1, dense = 1, eq = 1;
        for (int k = 0; k < nops; k++) {
            contig &= is_contig(n, ops[k].sz, ops[k].st);
            cl &= is_channels_last(n, ops[k].sz, ops[k].st);
            dense &= is_dense(n, ops[k].sz, ops[k].st);
            eq &= same_ints(ops[k].st, ops[0].st, n);
        }
        if (contig) {
            contiguous_of(n, r->sizes, r->strides);
            return 1;
        }
        if (cl) {
            r->strides[1] = 1;
            r->strides[3] = r->sizes[1];
            r->strides[2] = r->strides[3] * r->sizes[3];
            r->strides[0] = r->strides[2] * r->sizes[2];
            return 1;
        }
        if (dense && eq) {
            if (n) memcpy(r->strides, ops[nops - 1].st, sizeof(int64_t) * (size_t)n);
            return 1;
        }
    }
    ordered_layout(ops, nops, r);
    return 1;
}

/* A Python int or float operand (a bool is an int subclass, not exact: not here). */
static int number_operand(EmSym *s, int *is_float) {
    if (s->kind != SYM_CONST) return 0;
    if (PyFloat_CheckExact(s->obj)) *is_float = 1;
    return PyLong_CheckExact(s->obj) || PyFloat_CheckExact(s->obj);
}

int em_infer_pointwise(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmInferred *r) {
    EmOpKind kind = em_op_info[op].kind;
    if (kwnames || T->autocast || nargs > 8) return 0; /* autocast changes result dtypes: the fake run decides */
    if (op == EMOP_CALL) {
        if (nargs != 1 || !em_state.pointwise_fns) return 0;
        int in = PySet_Contains(em_state.pointwise_fns, fn);
        if (in < 0) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
            PyErr_Clear(); /* an unhashable callable is not in the set */
        }
        if (in != 1) return 0;
    } else if (!(op == EMOP_ADD || op == EMOP_SUB || op == EMOP_MUL || op == EMOP_TRUEDIV || op == EMOP_POW ||
                 op == EMOP_NEG || op == EMOP_POS || kind == EMOK_COMPARE)) {
        return 0;
    }
    const EmGraph *G = T->G;
    const EmNode *ref = NULL;
    EmOpnd ops[8];
    int nops = 0, rg = 0, scalars = 0, float_scalar = 0;
    for (int i = 0; i < nargs; i++) {
        if (number_operand(args[i], &float_scalar)) {
            scalars = 1;
            continue;
        }
        if (args[i]->kind != SYM_TENSOR) return 0;
        const EmNode *n = &G->nodes.data[args[i]->ref];
        if (n->vkind != EMV_TENSOR || n->dtype < 0) return 0;
        if (ref && (n->dtype != ref->dtype || n->dev_type != ref->dev_type || n->dev_index != ref->dev_index))
            return 0; /* type promotion and devices: the meta run decides */
        ref = ref ? ref : n;
        ops[nops++] = (EmOpnd){n->ndim, em_ir_sizes(G, n), em_ir_strides(G, n)};
        rg |= n->requires_grad;
    }
    if (!ref) return 0;
    int d = ref->dtype;
    if (!is_float_dt(d) && !(is_int_dt(d) && !float_scalar && op != EMOP_TRUEDIV && op != EMOP_POW && op != EMOP_CALL))
        return 0;
    /* tensor ** number is aten's unary pow.Tensor_Scalar (the number is no operand); number **
     * tensor is pow.Scalar, always contiguous */
    if (!elementwise_layout(ops, nops, scalars && op != EMOP_POW, r)) return 0;
    if (op == EMOP_POW && args[0]->kind == SYM_CONST) contiguous_of(r->ndim, r->sizes, r->strides);
    if (kind == EMOK_COMPARE) {
        d = EMDT_BOOL;
        rg = 0;
    }
    r->dtype = d;
    r->dev_type = ref->dev_type;
    r->dev_index = ref->dev_index;
    r->requires_grad = rg && T->grad && is_float_dt(d);
    return 1;
}

/* ---- shape rules (ember/_rules.py SHAPE_RULES) ---- */

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

static void like_tensor(EmTracer *T, const EmNode *x, EmInferred *r) {
    r->dtype = x->dtype;
    r->dev_type = x->dev_type;
    r->dev_index = x->dev_index;
    r->requires_grad = x->requires_grad && T->grad;
}

/* f(x, numbers or None...): a floating x's dtype and the layout of a unary op on x (aten's
 * clamp and pow.Tensor_Scalar take the numbers as arguments, not as operands). */
static int rule_scalar_args(EmTracer *T, EmSym **args, int nargs, EmInferred *r) {
    const EmNode *x = tensor_node(T, args[0]);
    int fl = 0;
    if (!x || !is_float_dt(x->dtype)) return 0;
    for (int i = 1; i < nargs; i++)
        if (!number_operand(args[i], &fl) && !(args[i]->kind == SYM_CONST && args[i]->obj == Py_None)) return 0;
    EmOpnd o = {x->ndim, em_ir_sizes(T->G, x), em_ir_strides(T->G, x)};
    if (!elementwise_layout(&o, 1, 0, r)) return 0;
    like_tensor(T, x, r);
    return 1;
}

/* The reduced dims of `dim` (an int, or a non-empty tuple/list of distinct ints) as a mask. */
static int dims_mask(PyObject *dim, int ndim, uint64_t *mask) {
    int one = PyLong_Check(dim);
    if (!one && !PyTuple_Check(dim) && !PyList_Check(dim)) return 0;
    Py_ssize_t n = one ? 1 : PySequence_Fast_GET_SIZE(dim);
    *mask = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t d;
        if (!int_value(one ? dim : PySequence_Fast_GET_ITEM(dim, i), &d) || d < -ndim || d >= ndim) return 0;
        d = d < 0 ? d + ndim : d;
        if (*mask & ((uint64_t)1 << d)) return 0;
        *mask |= (uint64_t)1 << d;
    }
    return n > 0;
}

/* sum / mean(x, dim, keepdim=False) of a floating x: the dims dropped (kept as 1), contiguous. */
static int rule_reduce(EmTracer *T, EmSym **args, int nargs, PyObject *kwnames, Py_ssize_t npos, EmInferred *r) {
    const EmNode *x = tensor_node(T, args[0]);
    EmSym *dim = npos > 1 ? args[1] : NULL, *keep = npos > 2 ? args[2] : NULL;
    if (!x || !is_float_dt(x->dtype) || npos > 3 || x->ndim < 1 || x->ndim > 60) return 0;
    for (Py_ssize_t i = npos; i < nargs; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i - npos);
        EmSym **slot = !PyUnicode_CompareWithASCIIString(k, "dim")       ? &dim
                       : !PyUnicode_CompareWithASCIIString(k, "keepdim") ? &keep
                                                                         : NULL;
        if (!slot || *slot) return 0; /* dtype=, out=, or given twice */
        *slot = args[i];
    }
    uint64_t mask;
    if (!dim || dim->kind != SYM_CONST || !dims_mask(dim->obj, x->ndim, &mask)) return 0;
    if (keep && (keep->kind != SYM_CONST || !PyBool_Check(keep->obj))) return 0;
    const int64_t *xs = em_ir_sizes(T->G, x);
    r->ndim = 0;
    for (int i = 0; i < x->ndim; i++)
        if (!(mask & ((uint64_t)1 << i))) r->sizes[r->ndim++] = xs[i];
        else if (keep && keep->obj == Py_True) r->sizes[r->ndim++] = 1;
    contiguous_strides(r);
    like_tensor(T, x, r);
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
    if (npos < 1) return 0;
    if (kind == SR_SCALAR_ARGS) return rule_scalar_args(T, args, nargs, r);
    if (kind == SR_REDUCE) return rule_reduce(T, args, nargs, kwnames, npos, r);
    if (kind >= SR_VIEW_TRANSPOSE) return em_infer_view(T, kind, args, nargs, kwnames, r);
    const EmNode *x = tensor_node(T, args[0]);
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
