/* em_sym_int.c: SYM_INT, an int that depends on symbolic sizes. Its value when traced (the
 * hint) is known; what the trace relies on is an expression of T->sizes over the symbols (the
 * dynamic dimensions of the frame's tensors, the ints that changed between calls).
 *
 * - Arithmetic (+ - * // %, unary -, min, max) builds expressions; comparisons and truth
 *   give constants and record the relation that decided them (a guard).
 * - Anything else that needs its value (an index, range(), a float, a call evaluated on
 *   constants) specializes it: the guard pins the expression to its hint, and the value is a
 *   constant from then on.
 * - As an op argument or a return value it is a graph value: nodes computing the expression
 *   from the inputs' sizes (x.size(d), int arithmetic), made once per expression.
 * - The sizes of a tensor sym: per graph node, one expression per dimension; for a node
 *   whose sizes no rule gave (em_shape_sym.c), the first read of its sizes specializes the
 *   symbols of everything it was computed from (sound: with those pinned, the sizes are the
 *   traced ones).
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* ---- the per-node tables ---- */

static int32_t dims_at(const EmTracer *T, EmRef r);

static int grow_to(EmTracer *T, EmRef r) {
    while (T->node_dims.len <= r) {
        int32_t d = dims_at(T, T->node_dims.len);
        if (em_vec_push(&T->node_dims, d)) return PyErr_NoMemory(), -1;
    }
    return 0;
}

int em_int_active(const EmTracer *T) { return T->sizes.sym_hint.len > 0; }

/* node_dims of r, with the defaults of nodes not in the table. */
static int32_t dims_at(const EmTracer *T, EmRef r) {
    if (r < T->node_dims.len) return T->node_dims.data[r];
    /* an input's dims are set when it is wrapped with symbols: any other input is static */
    return em_int_active(T) && r >= T->dyn_from && T->G->nodes.data[r].op != EMOP_INPUT ? EM_DIMS_UNKNOWN
                                                                                        : EM_DIMS_STATIC;
}

int em_node_set_dims(EmTracer *T, EmRef r, const int32_t *exprs, int ndim) {
    if (grow_to(T, r)) return -1;
    int all_const = 1;
    for (int i = 0; i < ndim; i++) all_const &= em_size_is_const(&T->sizes, exprs[i]);
    if (all_const) {
        T->node_dims.data[r] = EM_DIMS_STATIC;
        return 0;
    }
    T->node_dims.data[r] = T->dim_exprs.len;
    for (int i = 0; i < ndim; i++)
        if (em_vec_push(&T->dim_exprs, exprs[i])) return PyErr_NoMemory(), -1;
    return 0;
}

EmStatus em_node_copy_dims(EmTracer *T, EmRef to, EmRef from) {
    int32_t d = dims_at(T, from);
    if (grow_to(T, to)) return EM_ERR;
    T->node_dims.data[to] = d;
    return EM_OK;
}

static int set_node_expr(EmTracer *T, EmRef r, int32_t e) {
    while (T->node_expr.len <= r)
        if (em_vec_push(&T->node_expr, -1)) return PyErr_NoMemory(), -1;
    T->node_expr.data[r] = e;
    return 0;
}

/* ---- specialization ---- */

/* EMBER_LOGS=dynamic: "file:line: s0*2 pinned to 6". 0 or -1. */
static int log_pin(EmTracer *T, int32_t e) {
    EmStrBuf b = {0};
    if (em_size_text(&T->sizes, e, &b)) return PyErr_NoMemory(), -1;
    PyObject *msg = PyUnicode_FromFormat("%U:%d: %s pinned to %lld", T->code->co_filename, em_trace_lineno(T), b.s,
                                         (long long)em_size_hint(&T->sizes, e));
    em_sb_free(&b);
    PyObject *r = msg ? PyObject_CallFunction(em_state.log, "sO", "dynamic", msg) : NULL;
    Py_XDECREF(msg);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

EmStatus em_int_specialize(EmTracer *T, int32_t e) {
    if (em_size_is_const(&T->sizes, e)) return EM_OK;
    int32_t c = em_size_const(&T->sizes, em_size_hint(&T->sizes, e));
    if (c < 0) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < T->sizes.rels.len; i++) /* pinned before */
        if (T->sizes.rels.data[i].cmp == EMSR_EQ && T->sizes.rels.data[i].lhs == e && T->sizes.rels.data[i].rhs == c)
            return EM_OK;
    if ((em_state.logs & EM_LOG_DYNAMIC) && em_state.log && log_pin(T, e)) return EM_ERR;
    return em_size_require(&T->sizes, EMSR_EQ, e, c) ? (PyErr_NoMemory(), EM_ERR) : EM_OK;
}

EmStatus em_int_undecided(EmTracer *T) {
    Py_CLEAR(T->exc); /* a raise traced after the decision: the frame runs as Python, which raises it */
    EmStrBuf b = {0};
    if (em_size_rel_text(&T->sizes, &T->sizes.first_undecided, &b)) return PyErr_NoMemory(), EM_ERR;
    EmStatus st = em_trace_fail(T, EMA_ITEM_DEP, "the size relation %s of a number from .item()", b.s);
    em_sb_free(&b);
    return st;
}

static EmStatus specialize_arg(EmTracer *T, const EmArg *a, uint8_t *seen, int depth);

/* Pins the sizes of node r and of everything it was computed from (seen: per node, walked). */
static EmStatus specialize_node(EmTracer *T, EmRef r, uint8_t *seen, int depth) {
    if (seen[r]) return EM_OK;
    seen[r] = 1;
    if (depth > 10000) return em_trace_fail(T, EMA_VALUE, "a graph too deep to specialize its sizes");
    if (r < T->node_expr.len && T->node_expr.data[r] >= 0) return em_int_specialize(T, T->node_expr.data[r]);
    int32_t d = dims_at(T, r);
    const EmNode *n = &T->G->nodes.data[r];
    if (d >= 0) {
        for (int i = 0; i < n->ndim; i++) {
            EmStatus st = em_int_specialize(T, T->dim_exprs.data[d + i]);
            if (st != EM_OK) return st;
        }
        T->node_dims.data[r] = EM_DIMS_STATIC;
        return EM_OK;
    }
    if (d == EM_DIMS_STATIC || n->op == EMOP_INPUT) return EM_OK;
    for (int32_t i = 0; i < n->nargs; i++) {
        EmStatus st = specialize_arg(T, &T->G->args.data[n->args + i], seen, depth + 1);
        if (st != EM_OK) return st;
    }
    T->node_dims.data[r] = EM_DIMS_STATIC;
    return EM_OK;
}

static EmStatus specialize_arg(EmTracer *T, const EmArg *a, uint8_t *seen, int depth) {
    if (a->kind == EMARG_REF) return specialize_node(T, a->v, seen, depth);
    if (a->kind != EMARG_TUPLE && a->kind != EMARG_LIST) return EM_OK;
    for (int32_t i = 0; i < a->n; i++) {
        EmStatus st = specialize_arg(T, &T->G->args.data[a->v + i], seen, depth + 1);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

EmStatus em_node_specialize(EmTracer *T, EmRef r) {
    if (!em_int_active(T)) return EM_OK;
    uint8_t *seen = calloc((size_t)T->G->nodes.len + 1, 1);
    if (!seen) return PyErr_NoMemory(), EM_ERR;
    if (grow_to(T, T->G->nodes.len - 1)) {
        free(seen);
        return EM_ERR;
    }
    EmStatus st = specialize_node(T, r, seen, 0);
    free(seen);
    return st;
}

EmStatus em_sym_specialize(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_INT) return em_int_specialize(T, s->expr);
    if (s->kind == SYM_FLOAT) return em_float_pin(T, s);
    if (s->kind == SYM_TENSOR) return em_node_specialize(T, s->ref);
    if (s->kind == SYM_TUPLE || s->kind == SYM_LIST || s->kind == SYM_SLICE)
        for (int32_t i = 0; i < s->items.len; i++) {
            EmStatus st = em_sym_specialize(T, s->items.data[i]);
            if (st != EM_OK) return st;
        }
    return EM_OK;
}

int32_t em_node_dim(EmTracer *T, EmRef r, int d, EmStatus *st) {
    const EmNode *n = &T->G->nodes.data[r];
    int32_t at = dims_at(T, r);
    if (at == EM_DIMS_UNKNOWN) {
        if ((*st = em_node_specialize(T, r)) != EM_OK) return -1;
        at = EM_DIMS_STATIC;
    }
    int32_t e = at >= 0 ? T->dim_exprs.data[at + d] : em_size_const(&T->sizes, em_ir_sizes(T->G, n)[d]);
    if (e < 0) *st = (PyErr_NoMemory(), EM_ERR);
    return e;
}

int em_node_has_sym_dims(const EmTracer *T, EmRef r) { return dims_at(T, r) != EM_DIMS_STATIC; }

static int holds_unbacked(const EmTracer *T, EmSym **args, int nargs, int depth) {
    const EmSizes *S = &T->sizes;
    for (int i = 0; i < nargs; i++) {
        const EmSym *s = args[i];
        if (s->kind == SYM_INT && S->nodes.data[s->expr].unb) return 1;
        if (s->kind == SYM_TENSOR) {
            int32_t d = dims_at(T, s->ref);
            for (int k = 0; d >= 0 && k < T->G->nodes.data[s->ref].ndim; k++)
                if (S->nodes.data[T->dim_exprs.data[d + k]].unb) return 1;
        }
        if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST || s->kind == SYM_SLICE) && depth < 4 &&
            holds_unbacked(T, s->items.data, s->items.len, depth + 1))
            return 1;
    }
    return 0;
}

int em_int_holds_unbacked(const EmTracer *T, EmSym **args, int nargs) {
    return T->sizes.sym_lo.len && holds_unbacked(T, args, nargs, 0);
}

/* ---- SYM_INT values ---- */

EmSym *em_int_sym(EmTracer *T, int32_t e) {
    if (em_size_is_const(&T->sizes, e)) {
        PyObject *v = PyLong_FromLongLong(em_size_hint(&T->sizes, e));
        EmSym *s = v ? em_sym_const(T, v) : NULL;
        Py_XDECREF(v);
        return s;
    }
    EmSym *s = em_sym_new(T, SYM_INT);
    if (s) s->expr = e;
    return s;
}

int32_t em_int_expr(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_INT) return s->expr;
    if (s->kind != SYM_CONST || !PyLong_Check(s->obj)) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(s->obj, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear(); /* an int beyond int64 is no size: it stays a constant */
        return -1;
    }
    int32_t e = em_size_const(&T->sizes, v);
    return e < 0 ? (PyErr_NoMemory(), -2) : e;
}

EM_NEW PyObject *em_int_value(EmTracer *T, EmSym *s) {
    if (em_int_specialize(T, s->expr) != EM_OK) return NULL;
    return PyLong_FromLongLong(em_size_hint(&T->sizes, s->expr));
}

/* ---- graph values ---- */

static EmRef int_node(EmTracer *T, EmOp op, PyObject *fn, const EmArg *args, int nargs, EmStatus *st) {
    int32_t a0 = T->G->args.len;
    for (int i = 0; i < nargs; i++)
        if (em_ir_arg(T->G, (EmArgKind)args[i].kind, args[i].v, args[i].n) < 0) goto nomem;
    int32_t fnc = -1;
    if (fn) {
        fnc = em_ir_const(T->G, EMC_OBJ, 0, 0, fn, "size");
        if (fnc < 0) goto nomem;
    }
    EmRef r = em_ir_node(T->G, op, a0, nargs, -1, 0, fnc);
    if (r < 0) goto nomem;
    T->G->nodes.data[r].vkind = EMV_OBJ;
    return r;
nomem:
    *st = EM_ERR;
    PyErr_NoMemory();
    return -1;
}

static int32_t int_const_arg(EmTracer *T, int64_t v) {
    PyObject *o = PyLong_FromLongLong(v);
    if (!o) return -1;
    char text[32];
    snprintf(text, sizeof(text), "%lld", (long long)v);
    int32_t c = em_ir_const(T->G, EMC_INT, v, 0, o, text);
    Py_DECREF(o);
    return c;
}

EmRef em_int_ref(EmTracer *T, int32_t e, EmStatus *st) {
    while (T->expr_ref.len <= e)
        if (em_vec_push(&T->expr_ref, -1)) return *st = EM_ERR, PyErr_NoMemory(), -1;
    if (T->expr_ref.data[e] >= 0) return T->expr_ref.data[e];
    const EmSizeNode n = T->sizes.nodes.data[e];
    EmRef r = -1;
    if (n.op == EMS_CONST) {
        *st = em_trace_fail(T, EMA_VALUE, "a constant size as a graph value"); /* callers pass constants */
        return -1;
    }
    if (n.op == EMS_SYM) {
        const EmSymLeaf *leaf = &T->sym_leaf.data[n.a];
        if (leaf->dim == EM_LEAF_ITEM) { /* unbacked: the number node itself */
            r = leaf->ref;
        } else if (leaf->dim < 0) { /* an int input: the graph reads its slot */
            r = em_ir_node(T->G, EMOP_INPUT, 0, 0, -1, 0, -1);
            if (r < 0 || em_vec_push(&T->input_slots, leaf->slot)) return *st = EM_ERR, PyErr_NoMemory(), -1;
            T->G->nodes.data[r].aux = T->G->ninputs++;
            T->G->nodes.data[r].vkind = EMV_OBJ;
            T->G->nodes.data[r].label = em_ir_text(T->G, T->P->names.data[leaf->slot]);
        } else {
            int32_t c = int_const_arg(T, leaf->dim);
            if (c < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
            EmArg args[2] = {{EMARG_REF, leaf->ref, 0}, {EMARG_CONST, c, 0}};
            r = int_node(T, EMOP_CALL, EM_KNOWN(tensor_size), args, 2, st);
        }
    } else {
        static const EmOp ops[] = {
            [EMS_ADD] = EMOP_ADD, [EMS_MUL] = EMOP_MUL, [EMS_FLOORDIV] = EMOP_FLOORDIV, [EMS_MOD] = EMOP_MOD};
        EmArg args[2];
        for (int i = 0; i < 2; i++) {
            int32_t x = i ? n.b : n.a;
            if (em_size_is_const(&T->sizes, x)) {
                int32_t c = int_const_arg(T, em_size_hint(&T->sizes, x));
                if (c < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
                args[i] = (EmArg){EMARG_CONST, c, 0};
            } else {
                EmRef xr = em_int_ref(T, x, st);
                if (xr < 0) return -1;
                args[i] = (EmArg){EMARG_REF, xr, 0};
            }
        }
        if (n.op == EMS_MIN || n.op == EMS_MAX)
            r = int_node(T, EMOP_CALL, n.op == EMS_MIN ? EM_KNOWN(min) : EM_KNOWN(max), args, 2, st);
        else r = int_node(T, ops[n.op], NULL, args, 2, st);
    }
    if (r < 0) return -1;
    if (set_node_expr(T, r, e)) return *st = EM_ERR, -1;
    T->expr_ref.data[e] = r;
    return r;
}

/* ---- the kind's operations ---- */

static const EmSizeOp size_ops[EMOP__COUNT] = {
    [EMOP_ADD] = EMS_ADD,           [EMOP_IADD] = EMS_ADD,           [EMOP_MUL] = EMS_MUL, [EMOP_IMUL] = EMS_MUL,
    [EMOP_FLOORDIV] = EMS_FLOORDIV, [EMOP_IFLOORDIV] = EMS_FLOORDIV, [EMOP_MOD] = EMS_MOD, [EMOP_IMOD] = EMS_MOD,
};

static EmSym *expr_result(EmTracer *T, int32_t e, EmStatus *st) {
    EmSym *s = e >= 0 ? em_int_sym(T, e) : NULL;
    *st = s ? EM_OK : EM_ERR;
    if (e < 0 && !PyErr_Occurred()) PyErr_NoMemory();
    return s;
}

/* a ** k (k products, 0 <= k <= 8), a << k (a * 2**k) or a >> k (a // 2**k) of a constant k:
 * an expression; -1 when op is none of these or the result overflows (error set: no memory). */
static int32_t power_or_shift(EmSizes *S, EmOp op, int32_t a, int32_t b) {
    int64_t k = em_size_hint(S, b);
    if (!em_size_is_const(S, b) || k < 0) return -1;
    if ((op == EMOP_POW || op == EMOP_IPOW) && k <= 8) {
        int32_t e = em_size_const(S, 1);
        for (; e >= 0 && k > 0; k--) e = em_size_op(S, EMS_MUL, e, a);
        return e;
    }
    int shift = op == EMOP_LSHIFT || op == EMOP_ILSHIFT   ? EMS_MUL
                : op == EMOP_RSHIFT || op == EMOP_IRSHIFT ? EMS_FLOORDIV
                                                          : 0;
    int32_t p2 = shift && k <= 32 ? em_size_const(S, (int64_t)1 << k) : -1;
    return p2 < 0 ? -1 : em_size_op(S, (EmSizeOp)shift, a, p2);
}

/* a <op> b where both are ints (exprs ea, eb): an expression, a decided comparison, or the
 * operator on the specialized values. */
static EmStatus int_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    int32_t ea = em_int_expr(T, a), eb = em_int_expr(T, b);
    if (ea == -2 || eb == -2) return EM_ERR;
    EmStatus st = EM_OK;
    if (ea >= 0 && eb >= 0) {
        EmSizes *S = &T->sizes;
        int is_sub = op == EMOP_SUB || op == EMOP_ISUB;
        if (size_ops[op] || is_sub) {
            int64_t hb = em_size_hint(S, eb);
            if ((op == EMOP_FLOORDIV || op == EMOP_IFLOORDIV || op == EMOP_MOD || op == EMOP_IMOD) && hb == 0)
                goto by_value; /* raises ZeroDivisionError on the values */
            if (!em_size_is_const(S, eb) && size_ops[op] && (size_ops[op] == EMS_FLOORDIV || size_ops[op] == EMS_MOD)) {
                /* dividing by a symbol: never zero, its sign guarded (Python's rounding follows it) */
                int32_t z = em_size_const(S, 0);
                if (z < 0 || em_size_require(S, hb > 0 ? EMSR_GT : EMSR_LT, eb, z)) return PyErr_NoMemory(), EM_ERR;
            }
            int32_t e = is_sub ? em_size_sub(S, ea, eb) : em_size_op(S, size_ops[op], ea, eb);
            if (e >= 0 || PyErr_Occurred()) {
                *out = expr_result(T, e, &st);
                return st;
            }
            goto by_value; /* overflow: Python's ints do not; the values decide */
        }
        int32_t e = power_or_shift(S, op, ea, eb);
        if (e >= 0 || PyErr_Occurred()) {
            *out = expr_result(T, e, &st);
            return st;
        }
        if (em_op_info[op].kind == EMOK_COMPARE) {
            EmSizeCmp c = (EmSizeCmp)(op == EMOP_EQ   ? EMSR_EQ
                                      : op == EMOP_NE ? EMSR_NE
                                      : op == EMOP_LT ? EMSR_LT
                                      : op == EMOP_LE ? EMSR_LE
                                      : op == EMOP_GT ? EMSR_GT
                                                      : EMSR_GE);
            int holds = em_size_cmp_hint(S, c, ea, eb);
            static const EmSizeCmp negated[] = {EMSR_NE, EMSR_EQ, EMSR_GE, EMSR_GT, EMSR_LE, EMSR_LT};
            if (em_size_require(S, holds ? c : negated[c], ea, eb)) return PyErr_NoMemory(), EM_ERR;
            *out = em_sym_const(T, holds ? Py_True : Py_False);
            return *out ? EM_OK : EM_ERR;
        }
    }
by_value:
    if ((a->kind == SYM_INT && (st = em_int_specialize(T, a->expr)) != EM_OK) ||
        (b->kind == SYM_INT && (st = em_int_specialize(T, b->expr)) != EM_OK))
        return st;
    EmSym *args[2] = {a, b};
    return em_sym_eval(T, fn, args, 2, out);
}

EmStatus em_int_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    return int_binop(T, op, fn, a, b, out);
}

EmStatus em_int_unary(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out) {
    if (op == EMOP_NEG || op == EMOP_POS) {
        int32_t m = em_size_const(&T->sizes, op == EMOP_NEG ? -1 : 1);
        EmStatus st;
        *out = expr_result(T, m < 0 ? -1 : em_size_op(&T->sizes, EMS_MUL, a->expr, m), &st);
        return st;
    }
    EmStatus st = em_int_specialize(T, a->expr);
    return st == EM_OK ? em_sym_eval(T, fn, &a, 1, out) : st;
}

EmStatus em_int_abs(EmTracer *T, EmSym *a, EmSym **out) {
    EmSizes *S = &T->sizes;
    int32_t z = em_size_const(S, 0);
    int neg = em_size_hint(S, a->expr) < 0;
    if (z < 0 || em_size_require(S, neg ? EMSR_LT : EMSR_GE, a->expr, z)) return PyErr_NoMemory(), EM_ERR;
    if (!neg) return (*out = a), EM_OK;
    return em_int_unary(T, EMOP_NEG, NULL, a, out);
}

static EmStatus int_truth(EmTracer *T, EmSym *s, int *out) {
    int32_t z = em_size_const(&T->sizes, 0);
    if (z < 0) return PyErr_NoMemory(), EM_ERR;
    *out = em_size_hint(&T->sizes, s->expr) != 0;
    return em_size_require(&T->sizes, *out ? EMSR_NE : EMSR_EQ, s->expr, z) ? (PyErr_NoMemory(), EM_ERR) : EM_OK;
}

/* n.attr: of the specialized value (n.real, n.bit_length()). */
static EmStatus int_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    PyObject *v = em_int_value(T, base);
    EmSym *c = v ? em_sym_const(T, v) : NULL;
    Py_XDECREF(v);
    return c ? em_sym_getattr(T, c, name, method, out, self) : EM_ERR;
}

const EmSymOps em_int_ops = {
    .ident = EM_IDENT_UNKNOWN,
    .getattr = int_getattr,
    .truth = int_truth,
    .binop = em_int_binop,
    .unary = em_int_unary,
};

/* ---- inputs ---- */

/* A symbol for a dynamic dimension of size hint read from (slot, dim) of input node ref:
 * an earlier symbol of the same size when there is one (duck sizing: the SHAPE guard checks
 * they stay equal), else a new one. */
static int32_t dim_symbol(EmTracer *T, EmRef ref, int32_t slot, int dim, int64_t hint) {
    EmSizes *S = &T->sizes;
    for (int32_t k = 0; k < S->sym_hint.len; k++)
        if (S->sym_hint.data[k] == hint && T->sym_leaf.data[k].dim >= 0 && T->sym_leaf.data[k].slot >= 0)
            return em_size_add_src(S, slot, dim, k) ? -1 : T->sym_leaf.data[k].expr;
    if (!em_int_active(T)) T->dyn_from = T->G->nodes.len;
    int32_t k = S->sym_hint.len, e = em_size_new_sym(S, hint);
    EmSymLeaf leaf = {.ref = ref, .slot = slot, .dim = dim, .expr = e};
    if (e < 0 || em_vec_push(&T->sym_leaf, leaf) || em_size_add_src(S, slot, dim, k)) return -1;
    return e;
}

EmStatus em_int_input_dims(EmTracer *T, EmRef ref, int32_t slot, uint64_t dyn) {
    int ndim = T->G->nodes.data[ref].ndim;
    int32_t exprs[64];
    for (int i = 0; i < ndim; i++) {
        int64_t size = em_ir_sizes(T->G, &T->G->nodes.data[ref])[i];
        int32_t nsym = T->sizes.sym_hint.len;
        exprs[i] = (dyn >> i) & 1 ? dim_symbol(T, ref, slot, i, size) : em_size_const(&T->sizes, size);
        if (exprs[i] < 0) return PyErr_NoMemory(), EM_ERR;
        /* a new symbol's value is read now, at the graph's start: an op of the graph may later
         * change the input's own sizes (x.t_(), out=, resize_) */
        EmStatus st = EM_OK;
        if (T->sizes.sym_hint.len > nsym && em_int_ref(T, exprs[i], &st) < 0) return st;
    }
    return em_node_set_dims(T, ref, exprs, ndim) ? EM_ERR : EM_OK;
}

/* An int argument v read from slot as a symbol: v itself when positive, else -s of a symbol s
 * the guard reads as -v (symbols, like sizes, are positive: a negative v stays negative, a
 * change of sign is a guard miss). */
EmSym *em_int_input(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    int overflow = 0;
    long long hint = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || hint == LLONG_MIN || (hint == -1 && PyErr_Occurred())) {
        PyErr_Clear(); /* beyond int64: not a size, stays a guarded constant */
        return NULL;
    }
    *st = EM_ERR;
    if (em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)&PyLong_Type, 0)) return NULL;
    int32_t from = hint < 0 ? em_guard_op(T->P, EM_KNOWN(operator_neg), "-", slot, -1) : slot;
    if (from < 0) return NULL;
    if (!em_int_active(T)) T->dyn_from = T->G->nodes.len;
    EmSizes *S = &T->sizes;
    int32_t k = S->sym_hint.len, e = em_size_new_sym(S, hint < 0 ? -hint : hint), one = em_size_const(S, 1),
            zero = em_size_const(S, 0);
    EmSymLeaf leaf = {.ref = -1, .slot = from, .dim = -1, .expr = e};
    if (e < 0 || one < 0 || zero < 0 || em_vec_push(&T->sym_leaf, leaf) || em_size_add_src(S, from, -1, k) ||
        em_size_require(S, EMSR_GE, e, one) || (hint < 0 && (e = em_size_sub(S, zero, e)) < 0)) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    EmSym *s = em_int_sym(T, e);
    if (s) {
        s->src = slot;
        *st = EM_OK;
    }
    return s;
}

/* ---- sizes read from tensors ---- */

EmStatus em_tensor_dim_size(EmTracer *T, EmSym *t, int d, EmSym **out) {
    EmStatus st = EM_OK;
    int32_t e = em_node_dim(T, t->ref, d, &st);
    if (e < 0) return st;
    *out = em_int_sym(T, e);
    return *out ? EM_OK : EM_ERR;
}

EmStatus em_tensor_shape(EmTracer *T, EmSym *t, EmSym **out) {
    const EmNode *n = &T->G->nodes.data[t->ref];
    EmSym *s = em_sym_new(T, SYM_TUPLE);
    if (!s) return EM_ERR;
    s->seq_type = Py_NewRef(EM_KNOWN(torch_Size));
    for (int i = 0; i < n->ndim; i++) {
        EmSym *it = NULL;
        EmStatus st = em_tensor_dim_size(T, t, i, &it);
        if (st != EM_OK) return st;
        if (em_vec_push(&s->items, it)) return PyErr_NoMemory(), EM_ERR;
    }
    *out = s;
    return EM_OK;
}

EmStatus em_tensor_numel(EmTracer *T, EmSym *t, EmSym **out) {
    const EmNode *n = &T->G->nodes.data[t->ref];
    int32_t e = em_size_const(&T->sizes, 1);
    EmStatus st = EM_OK;
    for (int i = 0; e >= 0 && i < n->ndim; i++) {
        int32_t d = em_node_dim(T, t->ref, i, &st);
        if (d < 0) return st;
        e = em_size_op(&T->sizes, EMS_MUL, e, d);
    }
    *out = expr_result(T, e, &st);
    return st;
}

/* Whether sizes read from tensor t are symbolic (else the meta tensor answers). */
static int sym_sizes(EmTracer *T, EmSym *t) {
    return t->kind == SYM_TENSOR && em_int_active(T) && em_node_has_sym_dims(T, t->ref) &&
           T->G->nodes.data[t->ref].vkind == EMV_TENSOR;
}

/* x.size(), x.size(d), x.shape[d]... with symbolic sizes. known_* handlers (em_known.def):
 * CALL_NEXT when the sizes are not symbolic (the rule answers on the meta tensor). */
EmStatus em_known_tensor_size(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n < 1 || n > 2 || kwnames || !sym_sizes(T, all[0])) return CALL_NEXT;
    if (n == 1) return em_tensor_shape(T, all[0], out);
    if (all[1]->kind != SYM_CONST || !PyLong_CheckExact(all[1]->obj)) return CALL_NEXT;
    int nd = T->G->nodes.data[all[0]->ref].ndim;
    long d = PyLong_AsLong(all[1]->obj);
    if (d == -1 && PyErr_Occurred()) return EM_ERR;
    if (d < -nd || d >= nd) return CALL_NEXT; /* IndexError from the meta tensor */
    return em_tensor_dim_size(T, all[0], (int)(d < 0 ? d + nd : d), out);
}

EmStatus em_known_tensor_numel(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                               EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames || !sym_sizes(T, all[0])) return CALL_NEXT;
    return em_tensor_numel(T, all[0], out);
}

/* Layout queries (stride(), is_contiguous(), storage_offset()) of a tensor with symbolic
 * sizes: its sizes are pinned first, then the rule answers on the meta tensor. */
EmStatus em_known_tensor_layout(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)fn;
    (void)self;
    (void)kwnames;
    (void)out;
    if (n >= 1 && all[0]->kind == SYM_TENSOR && em_int_active(T)) {
        EmStatus st = em_node_specialize(T, all[0]->ref);
        if (st != EM_OK) return st;
    }
    return CALL_NEXT;
}

/* min(a, b, ...) / max(...) of ints, one at least symbolic: an expression. */
EmStatus em_known_minmax(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    EmSym *sized[8];
    int items = 0;
    for (int i = 0; i < n; i++)
        if (all[i]->kind == SYM_ITEM) items += all[i]->obj == (PyObject *)&PyLong_Type ? 1 : n + 1;
    if (items && items <= n && n >= 2 && n <= 8 && !kwnames) { /* max(n, 1024) of an int item: a size */
        EmStatus st = em_item_sizes(T, all, n, sized);
        if (st != EM_OK) return st;
        all = sized;
    }
    int any = 0;
    for (int i = 0; i < n; i++) any |= all[i]->kind == SYM_INT;
    if (!any || kwnames || n < 2) {
        if (!any) return CALL_NEXT;
        EmStatus st = EM_OK; /* min(seq), key=...: on the values */
        for (int i = 0; i < n && st == EM_OK; i++) st = em_sym_specialize(T, all[i]);
        return st == EM_OK ? CALL_NEXT : st;
    }
    int32_t e = -1;
    for (int i = 0; i < n; i++) {
        int32_t x = em_int_expr(T, all[i]);
        if (x == -2) return EM_ERR;
        if (x < 0) { /* a float or other value among them: on the values */
            EmStatus st = EM_OK;
            for (int k = 0; k < n && st == EM_OK; k++) st = em_sym_specialize(T, all[k]);
            return st == EM_OK ? CALL_NEXT : st;
        }
        e = e < 0 ? x : em_size_op(&T->sizes, fn->obj == EM_KNOWN(min) ? EMS_MIN : EMS_MAX, e, x);
        if (e < 0) return PyErr_NoMemory(), EM_ERR;
    }
    EmStatus st;
    *out = expr_result(T, e, &st);
    return st;
}

/* ---- the symbols of the graph's inputs (for the FX export) ---- */

/* 1 when symbol k is pinned: a relation holds its expression equal to a constant. */
static int sym_pinned(const EmTracer *T, int32_t k) {
    const EmSizes *S = &T->sizes;
    int32_t e = T->sym_leaf.data[k].expr;
    for (int32_t i = 0; i < S->rels.len; i++) {
        const EmSizeRel *r = &S->rels.data[i];
        if (r->cmp == EMSR_EQ &&
            ((r->lhs == e && em_size_is_const(S, r->rhs)) || (r->rhs == e && em_size_is_const(S, r->lhs))))
            return 1;
    }
    return 0;
}

static EM_NEW PyObject *input_syms(const EmTracer *T, const EmNode *n, int32_t slot) {
    const EmSizes *S = &T->sizes;
    if (n->vkind != EMV_TENSOR) { /* an int input: it is one, since the graph reads it */
        for (int32_t i = 0; i < S->srcs.len; i++)
            if (S->srcs.data[i].slot == slot && S->srcs.data[i].dim < 0 && !sym_pinned(T, S->srcs.data[i].sym))
                return PyLong_FromLong(S->srcs.data[i].sym);
        return Py_NewRef(Py_None);
    }
    PyObject *dims = PyTuple_New(n->ndim);
    if (!dims) return NULL;
    for (int d = 0; d < n->ndim; d++) {
        int32_t k = -1;
        for (int32_t i = 0; i < S->srcs.len && k < 0; i++)
            if (S->srcs.data[i].slot == slot && S->srcs.data[i].dim == d && !sym_pinned(T, S->srcs.data[i].sym))
                k = S->srcs.data[i].sym;
        PyObject *v = PyLong_FromLong(k);
        if (!v) return Py_DECREF(dims), NULL;
        PyTuple_SET_ITEM(dims, d, v);
    }
    return dims;
}

static EM_NEW PyObject *inputs_syms(const EmTracer *T) {
    const EmGraph *G = T->G;
    PyObject *r = PyTuple_New(G->ninputs);
    if (!r) return NULL;
    for (int32_t i = 0; i < G->ninputs; i++) PyTuple_SET_ITEM(r, i, Py_NewRef(Py_None));
    for (int32_t ref = 0; ref < G->nodes.len; ref++) {
        const EmNode *n = &G->nodes.data[ref];
        if (n->op != EMOP_INPUT) continue;
        EM_ASSERT(n->aux >= 0 && n->aux < G->ninputs && n->aux < T->input_slots.len, "input number %d", n->aux);
        PyObject *v = input_syms(T, n, T->input_slots.data[n->aux]);
        if (!v) return Py_DECREF(r), NULL;
        PyTuple_SetItem(r, n->aux, v);
    }
    return r;
}

/* The expressions as (op, a, b, value) rows (value: a constant's, a symbol's hint) and the
 * relations as (cmp, lhs, rhs) rows, ops and comparisons by name. */
static EM_NEW PyObject *size_program(const EmSizes *S) {
    static const char *const ops[] = {
        [EMS_CONST] = "const",       [EMS_SYM] = "sym", [EMS_ADD] = "add", [EMS_MUL] = "mul",
        [EMS_FLOORDIV] = "floordiv", [EMS_MOD] = "mod", [EMS_MIN] = "min", [EMS_MAX] = "max"};
    static const char *const cmps[] = {
        [EMSR_EQ] = "==", [EMSR_NE] = "!=", [EMSR_LT] = "<", [EMSR_LE] = "<=", [EMSR_GT] = ">", [EMSR_GE] = ">="};
    PyObject *exprs = PyTuple_New(S->nodes.len), *rels = PyTuple_New(S->rels.len), *r = NULL;
    if (!exprs || !rels) goto error;
    for (int32_t i = 0; i < S->nodes.len; i++) {
        const EmSizeNode *n = &S->nodes.data[i];
        long long v = n->op == EMS_SYM ? (long long)S->sym_hint.data[n->a] : (long long)n->c;
        PyObject *row = Py_BuildValue("(siiL)", ops[n->op], (int)n->a, (int)n->b, v);
        if (!row) goto error;
        PyTuple_SET_ITEM(exprs, i, row);
    }
    for (int32_t i = 0; i < S->rels.len; i++) {
        const EmSizeRel *x = &S->rels.data[i];
        PyObject *row = Py_BuildValue("(sii)", cmps[x->cmp], (int)x->lhs, (int)x->rhs);
        if (!row) goto error;
        PyTuple_SET_ITEM(rels, i, row);
    }
    r = PyTuple_Pack(2, exprs, rels);
error:
    Py_XDECREF(exprs);
    Py_XDECREF(rels);
    return r;
}

EM_NEW PyObject *em_trace_input_syms(const EmTracer *T) {
    if (!em_int_active(T) && !T->float_input) return Py_NewRef(Py_None);
    PyObject *ins = inputs_syms(T), *prog = ins ? size_program(&T->sizes) : NULL, *r = NULL;
    if (prog) r = PyTuple_Pack(2, ins, prog);
    Py_XDECREF(ins);
    Py_XDECREF(prog);
    return r;
}
