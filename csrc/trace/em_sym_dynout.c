/* em_sym_dynout.c: ops whose result size depends on the data (x.nonzero(), torch.where(c),
 * x.masked_select(m), x[mask] of a bool mask), captured as TorchDynamo's capture_dynamic_output_shape_ops captures
 * them: under fullgraph or that setting (ember.config's or TorchDynamo's); otherwise the rules
 * refuse them (a graph break), as before.
 *
 * The op is a graph node whose meta result holds a stand-in count (_rules.*_meta). Its first
 * dimension is an unbacked symbol read from the node at run time (x.size(0) of the result),
 * its range [0, the number of elements it selects from]: relations on it hold only where the
 * range decides them (em_size.h), anything else is data-dependent.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* The number of elements of tensor sym t when its sizes are static, else -1. */
static int64_t static_numel(EmTracer *T, const EmSym *t) {
    if (em_int_active(T) && em_node_has_sym_dims(T, t->ref)) return -1;
    const EmNode *n = &T->G->nodes.data[t->ref];
    int64_t k = 1;
    for (int d = 0; d < n->ndim; d++)
        if (__builtin_mul_overflow(k, em_ir_sizes(T->G, n)[d], &k)) return -1;
    return k;
}

static int is_tensor_of(EmTracer *T, const EmSym *s, int bool_only) {
    if (s->kind != SYM_TENSOR) return 0;
    const EmNode *n = &T->G->nodes.data[s->ref];
    return n->vkind == EMV_TENSOR && (!bool_only || n->dtype == EMDT_BOOL);
}

/* Records op(args) with meta function _rules.<meta_name>: a tensor, or a tuple of tensors, whose
 * first dimension is a new unbacked symbol in [0, bound] (bound < 0: unbounded) and others
 * those of x from dimension `from` on (x NULL: the meta result's). CALL_NEXT where the op is
 * not captured. */
static EmStatus dyn_output(EmTracer *T, const char *meta_name, EmOp op, PyObject *fn, EmSym **args, int nargs,
                           PyObject *kwnames, int64_t bound, EmSym *x, int from, EmSym **out) {
    if (T->in_vmap) return CALL_NEXT;
    int on = em_capturing(T, "capture_dynamic_output_shape_ops");
    if (on <= 0) return on < 0 ? EM_ERR : CALL_NEXT;
    PyObject *meta_fn = PyObject_GetAttrString(em_state.meta_run, meta_name);
    if (!meta_fn) return EM_ERR;
    EmStatus st = em_op_record(T, op, fn, args, nargs, kwnames, meta_fn, out);
    Py_DECREF(meta_fn);
    if (st != EM_OK) return st;
    /* a tensor, or a tuple of tensors of that count (torch.where(c)) */
    EmSym **items = (*out)->kind == SYM_TUPLE ? (*out)->items.data : out;
    int nitems = (*out)->kind == SYM_TUPLE ? (*out)->items.len : 1;
    int32_t e = -1;
    for (int k = 0; k < nitems; k++) {
        if (items[k]->kind != SYM_TENSOR) return em_trace_fail(T, EMA_META, "%s returning a non-tensor", meta_name);
        EmRef r = items[k]->ref;
        const EmNode *n = &T->G->nodes.data[r];
        if (n->ndim < 1 || n->ndim > 64) return em_trace_fail(T, EMA_META, "%s of %d dimensions", meta_name, n->ndim);
        if (e < 0) { /* the count: read from the first result at run time */
            if (!em_int_active(T)) T->dyn_from = T->G->nodes.len;
            e = em_size_new_unbacked(&T->sizes, em_ir_sizes(T->G, n)[0], 0, bound < 0 ? EM_SIZE_INF : bound);
            EmSymLeaf leaf = {.ref = r, .slot = -1, .dim = 0, .expr = e};
            if (e < 0 || em_vec_push(&T->sym_leaf, leaf)) return PyErr_NoMemory(), EM_ERR;
        }
        int32_t exprs[64];
        exprs[0] = e;
        for (int i = 1; i < n->ndim; i++) {
            exprs[i] = x ? em_node_dim(T, x->ref, from + i - 1, &st)
                         : em_size_const(&T->sizes, em_ir_sizes(T->G, &T->G->nodes.data[r])[i]);
            if (exprs[i] < 0) return st != EM_OK ? st : (PyErr_NoMemory(), EM_ERR);
        }
        if (em_node_set_dims(T, r, exprs, T->G->nodes.data[r].ndim)) return EM_ERR;
    }
    return EM_OK;
}

EmStatus em_known_nonzero(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (n - nkw != 1 || nkw > 1 || !is_tensor_of(T, all[0], 0)) return CALL_NEXT;
    if (nkw && (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "as_tuple") ||
                all[1]->kind != SYM_CONST || !PyBool_Check(all[1]->obj)))
        return CALL_NEXT;
    return dyn_output(T, "nonzero_meta", EMOP_CALL, fn->obj, all, n, kwnames, static_numel(T, all[0]), NULL, 0, out);
}

EmStatus em_known_where(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    if (n != 1 || kwnames || !is_tensor_of(T, all[0], 0)) return CALL_NEXT; /* where(c, x, y): the rule's */
    return dyn_output(T, "where_meta", EMOP_CALL, fn->obj, all, 1, NULL, static_numel(T, all[0]), NULL, 0, out);
}

EmStatus em_known_masked_select(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)self;
    if (n != 2 || kwnames || !is_tensor_of(T, all[0], 0) || !is_tensor_of(T, all[1], 1)) return CALL_NEXT;
    int64_t a = static_numel(T, all[0]), b = static_numel(T, all[1]), bound = -1; /* the broadcast's <= a * b */
    if (a >= 0 && b >= 0 && __builtin_mul_overflow(a, b, &bound)) bound = -1;
    return dyn_output(T, "masked_select_meta", EMOP_CALL, fn->obj, all, 2, NULL, bound, NULL, 0, out);
}

/* A bool or uint8 tensor: an index of either is a mask. */
static int is_mask(EmTracer *T, const EmSym *s) {
    return is_tensor_of(T, s, 0) &&
           (T->G->nodes.data[s->ref].dtype == EMDT_BOOL || T->G->nodes.data[s->ref].dtype == EMDT_U8);
}

EmStatus em_dyn_mask_index(EmTracer *T, EmSym **args, EmSym **out) {
    if (!is_tensor_of(T, args[0], 0)) return CALL_NEXT;
    EmSym *k = args[1];
    if ((k->kind == SYM_TUPLE || k->kind == SYM_LIST) && !k->seq_type) { /* x[m, 1]: a mask among indices */
        for (int32_t i = 0; i < k->items.len; i++)
            if (is_mask(T, k->items.data[i]))
                return em_trace_fail(T, EMA_DATA_DEP, "indexing by a mask among other indices");
        return CALL_NEXT;
    }
    if (!is_mask(T, k)) return CALL_NEXT;
    int mdim = T->G->nodes.data[k->ref].ndim;
    if (mdim > T->G->nodes.data[args[0]->ref].ndim) return CALL_NEXT; /* eager's IndexError, from the meta run */
    if (mdim == 0) /* the meta kernel answers one element whatever the mask holds; torch's fake one guards */
        return em_trace_fail(T, EMA_DATA_DEP, "indexing by a 0-d mask");
    if (!is_tensor_of(T, k, 1)) return CALL_NEXT; /* a uint8 mask: the meta run refuses it (a break) */
    return dyn_output(T, "mask_index_meta", EMOP_SUBSCR, NULL, args, 2, NULL, static_numel(T, args[1]), args[0], mdim,
                      out);
}

/* torch.unique(x, sorted, return_inverse, return_counts, dim=None): (the flags as constants,
 * positional or by keyword) its values and counts of a new unbacked count in [0, x.numel()],
 * its inverse of x's sizes. CALL_NEXT for other forms (a dim: the rule's). */
EmStatus em_known_unique(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    static const char *const names[] = {"input", "sorted", "return_inverse", "return_counts", "dim"};
    EmSym *a[5] = {NULL, NULL, NULL, NULL, NULL};
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw;
    if (npos < 1 || npos > 5) return CALL_NEXT;
    for (int i = 0; i < npos; i++) a[i] = all[i];
    for (int k = 0; k < nkw; k++) {
        int i = 0;
        while (i < 5 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), names[i])) i++;
        if (i == 5 || a[i]) return CALL_NEXT; /* Python's TypeError, from the call run as Python */
        a[i] = all[npos + k];
    }
    int flag[5] = {0, 1, 0, 0, 0};
    for (int i = 1; i < 4; i++) {
        if (a[i] && (a[i]->kind != SYM_CONST || !PyBool_Check(a[i]->obj))) return CALL_NEXT;
        if (a[i]) flag[i] = a[i]->obj == Py_True;
    }
    if (!is_tensor_of(T, a[0], 0) || (a[4] && !(a[4]->kind == SYM_CONST && a[4]->obj == Py_None))) return CALL_NEXT;
    int on = em_capturing(T, "capture_dynamic_output_shape_ops");
    if (on <= 0 || T->in_vmap) return on < 0 ? EM_ERR : CALL_NEXT;
    PyObject *meta_fn = PyObject_GetAttrString(em_state.meta_run, "unique_meta");
    if (!meta_fn) return EM_ERR;
    EmStatus st = em_op_record(T, EMOP_CALL, fn->obj, all, n, kwnames, meta_fn, out);
    Py_DECREF(meta_fn);
    if (st != EM_OK) return st;
    int nitems = (*out)->kind == SYM_TUPLE ? (*out)->items.len : 1;
    if (nitems != 1 + flag[2] + flag[3]) return em_trace_fail(T, EMA_META, "unique_meta's results");
    EmSym **items = (*out)->kind == SYM_TUPLE ? (*out)->items.data : out;
    int64_t bound = static_numel(T, a[0]);
    if (!em_int_active(T)) T->dyn_from = T->G->nodes.len;
    int32_t e = em_size_new_unbacked(&T->sizes, em_ir_sizes(T->G, &T->G->nodes.data[items[0]->ref])[0], 0,
                                     bound < 0 ? EM_SIZE_INF : bound);
    EmSymLeaf leaf = {.ref = items[0]->ref, .slot = -1, .dim = 0, .expr = e};
    if (e < 0 || em_vec_push(&T->sym_leaf, leaf)) return PyErr_NoMemory(), EM_ERR;
    for (int k = 0; k < nitems; k++) {
        EmRef r = items[k]->ref;
        int inverse = flag[2] && k == 1, nd = T->G->nodes.data[r].ndim;
        int32_t exprs[64];
        if (nd > 64 || (!inverse && nd != 1)) return em_trace_fail(T, EMA_META, "unique_meta's result %d", k);
        for (int i = 0; i < nd; i++)
            if ((exprs[i] = inverse ? em_node_dim(T, a[0]->ref, i, &st) : e) < 0)
                return st != EM_OK ? st : (PyErr_NoMemory(), EM_ERR);
        if (em_node_set_dims(T, r, exprs, nd)) return EM_ERR;
    }
    return EM_OK;
}
