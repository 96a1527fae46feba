/* em_sym_item.c: SYM_ITEM, a Python number the graph computes: x.item() of a one-element tensor
 * the graph holds, and arithmetic on such numbers. x.item() is captured as TorchDynamo captures
 * it: under fullgraph (a break would fail the compile), or with capture_scalar_outputs
 * (ember.config's or TorchDynamo's); otherwise it breaks the graph as before.
 *
 * ref: its graph node (EMV_OBJ); obj: its type (int, float or bool). Its value is unknown
 * while tracing, so it goes only where the value cannot change what the trace decides:
 * - arithmetic and comparisons with numbers (other such numbers, constants, symbolic ints, float
 *   inputs), int(), float(), abs(), round(), math.floor/ceil/trunc: graph nodes whose result
 *   type follows from the operand types (a power whose type would depend on its exponent's
 *   sign is refused);
 * - an operand of a pointwise operator or torch function with tensors (x * s, torch.clamp(x,
 *   max=s)), a fill value (torch.full(size, s), x.masked_fill(m, s)), torch.tensor's data
 *   (em_item_call_check);
 * - torch._check(cond) / torch._check_is_size(i): a check node the graph runs (raising as eager
 *   does), and a bound on an int that later comparisons with constants use
 *   (`torch._check(n >= 0)` decides `if n >= 0:`: when it is false the check has raised);
 * - a return value or a value live at a graph break: a graph output.
 * - a size (torch.arange(n), x.new_zeros(n), x[:n]): an int item becomes an unbacked size
 *   symbol bound to its node (em_item_size; em_size.h): relations on it hold only where its
 *   range decides them, else the trace aborts (em_int_undecided).
 * Anything else that needs the value (a branch, str(), a dict key) aborts as data-dependent:
 * without fullgraph the graph breaks there, handing the number on.
 * Bounds: spec of an int item is (lo, hi), Python ints or None; a bool item made by comparing
 * an int item with a constant keeps items = [that item, the constant] and pos = the comparison
 * (Py_LT..Py_GE) with the item on the left.
 */
#include "em_sym_ops.h"

#include <math.h>

#include "../pyver/em_state.h"

_Static_assert(EMOP_GE - EMOP_LT == Py_GE - Py_LT && EMOP_EQ - EMOP_LT == Py_EQ - Py_LT,
               "ORDER CMP: the comparisons in rich-comparison order");

static EmSym *item_new(EmTracer *T, EmRef r, PyObject *tp) {
    EmSym *s = em_sym_new(T, SYM_ITEM);
    if (!s) return NULL;
    s->ref = r;
    s->obj = Py_NewRef(tp);
    s->expr = -1; /* no size symbol yet (em_item_size) */
    return s;
}

static int is_number_const(const EmSym *s) {
    return s->kind == SYM_CONST && (PyLong_CheckExact(s->obj) || PyBool_Check(s->obj) || PyFloat_CheckExact(s->obj));
}

/* An operand of number arithmetic with an item: another item, a number constant, a symbolic
 * int, a float input. */
static int is_operand(const EmSym *s) {
    return s->kind == SYM_ITEM || s->kind == SYM_INT || s->kind == SYM_FLOAT || is_number_const(s);
}

EM_NEW PyObject *em_item_dummy(const EmSym *s, int which) {
    if (s->obj == (PyObject *)&PyBool_Type) return Py_NewRef(which ? Py_False : Py_True);
    if (s->obj == (PyObject *)&PyLong_Type) return PyLong_FromLong(which ? 3 : 2);
    return PyFloat_FromDouble(which ? 2.5 : 1.5);
}

/* A value of operand s's type for working out a result's type (new reference). */
static EM_NEW PyObject *type_stand_in(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_ITEM) return em_item_dummy(s, 0);
    if (s->kind == SYM_INT) return PyLong_FromLongLong(em_size_hint(&T->sizes, s->expr));
    return Py_NewRef(s->obj); /* a constant's value; a float input's traced value */
}

/* Whether args (and the tuples and lists among them) hold a sym of kind `kind`. */
static int kind_among_at(EmSym **args, int nargs, uint8_t kind, int depth, long *left) {
    for (int i = 0; i < nargs && depth <= EM_MAX_NEST && --*left >= 0; i++) { /* a list may hold itself */
        EmSym *s = args[i];
        if (s->kind == kind) return 1;
        if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST) &&
            kind_among_at(s->items.data, s->items.len, kind, depth + 1, left))
            return 1;
    }
    return 0;
}

int em_float_among(EmSym **args, int nargs) {
    long left = EM_MAX_WALK;
    return kind_among_at(args, nargs, SYM_FLOAT, 0, &left);
}

int em_item_among(EmSym **args, int nargs) {
    long left = EM_MAX_WALK; /* past it: taken as holding none (the op's own walks abort there) */
    return kind_among_at(args, nargs, SYM_ITEM, 0, &left);
}

int32_t em_item_arg(EmTracer *T, EmSym *s, EmStatus *st) {
    if (!T->floats_ok) {
        *st = em_trace_fail(T, EMA_ITEM_DEP, "an op given a number from .item() where it may decide sizes");
        return -1;
    }
    int32_t a = em_ir_arg(T->G, EMARG_REF, s->ref, 0);
    if (a < 0) *st = EM_ERR, PyErr_NoMemory();
    return a;
}

/* A node op(operands) (fn, labelled `label`, the callable of a CALL) giving a number of type tp:
 * its item sym, or NULL with *st set. */
static EmSym *number_node(EmTracer *T, EmOp op, PyObject *fn, const char *label, EmSym **operands, int n, PyObject *tp,
                          EmStatus *st) {
    int floats_ok = T->floats_ok;
    T->floats_ok = 1; /* arithmetic on numbers: float inputs and items are values */
    int32_t a0 = em_node_args(T, operands, n, st);
    T->floats_ok = floats_ok;
    if (a0 < 0) return NULL;
    int32_t fnc = fn ? em_ir_const(T->G, EMC_OBJ, 0, 0, fn, label) : -1;
    EmRef r = fn && fnc < 0 ? -1 : em_ir_node(T->G, op, a0, n, -1, 0, fnc);
    if (r < 0) return *st = EM_ERR, PyErr_NoMemory(), NULL;
    T->G->nodes.data[r].vkind = EMV_OBJ;
    EmSym *s = item_new(T, r, tp);
    if (!s) *st = EM_ERR;
    return s;
}

/* Before a node that may raise at run time for some values (a division by zero, int(nan), a
 * check that fails): EM_OK where a raise there leaves the frame to run again as plain Python
 * (no node before it changed anything: em_trace_rerun_limit), which raises, or catches, where
 * and as eager does; else data-dependent (a graph break there: the instruction runs as Python,
 * after the graph and its side effects). */
static EmStatus may_raise(EmTracer *T, const char *what) {
    int32_t limit;
    int meta;
    if (em_trace_rerun_limit(T, &limit, &meta)) return EM_ERR;
    if (limit == T->G->nodes.len) return EM_OK;
    return em_trace_fail(T, EMA_DATA_DEP, "%s a number from .item() (it may raise after the graph changed a tensor)",
                         what);
}

/* ---- bounds ---- */

typedef struct {
    int has_lo, has_hi;
    long long lo, hi;
} Bounds;

static Bounds bounds_of(const EmSym *x) {
    Bounds b = {0, 0, 0, 0};
    if (!x->spec) return b;
    for (int i = 0; i < 2; i++) {
        PyObject *v = PyTuple_GET_ITEM(x->spec, i);
        int overflow = 0;
        long long k = v == Py_None ? 0 : PyLong_AsLongLongAndOverflow(v, &overflow);
        if (v == Py_None || overflow) continue;
        if (i) b.has_hi = 1, b.hi = k;
        else b.has_lo = 1, b.lo = k;
    }
    return b;
}

/* x CMP c (cmp: Py_LT..Py_GE) as x's bounds decide it: 1, 0, or -1 undecided. */
static int decide(const EmSym *x, int cmp, PyObject *c) {
    if (x->obj != (PyObject *)&PyLong_Type || !x->spec) return -1;
    double cd = PyFloat_CheckExact(c) ? PyFloat_AS_DOUBLE(c) : PyLong_AsDouble(c);
    if (cd == -1.0 && PyErr_Occurred()) return PyErr_Clear(), -1;
    if (isnan(cd) || fabs(cd) > 4503599627370496.0) return -1; /* 2**52: exact as doubles below it */
    Bounds b = bounds_of(x);
    if ((b.has_lo && llabs(b.lo) > 4503599627370496LL) || (b.has_hi && llabs(b.hi) > 4503599627370496LL)) return -1;
    double lo = (double)b.lo, hi = (double)b.hi;
    switch (cmp) {
        case Py_LT: return b.has_hi && hi < cd ? 1 : b.has_lo && lo >= cd ? 0 : -1;
        case Py_LE: return b.has_hi && hi <= cd ? 1 : b.has_lo && lo > cd ? 0 : -1;
        case Py_GT: return b.has_lo && lo > cd ? 1 : b.has_hi && hi <= cd ? 0 : -1;
        case Py_GE: return b.has_lo && lo >= cd ? 1 : b.has_hi && hi < cd ? 0 : -1;
        case Py_EQ:
        case Py_NE: {
            int eq = (b.has_lo && lo > cd) || (b.has_hi && hi < cd) || floor(cd) != cd ? 0
                     : b.has_lo && b.has_hi && lo == hi && lo == cd                    ? 1
                                                                                       : -1;
            return eq < 0 ? -1 : cmp == Py_EQ ? eq : !eq;
        }
        default: return -1;
    }
}

/* Narrows int item x's bounds to [lo, hi] (has_*: which ends are given), and its size
 * symbol's range. EM_OK or EM_ERR. */
static EmStatus narrow(EmTracer *T, EmSym *x, int has_lo, long long lo, int has_hi, long long hi) {
    if (x->expr >= 0)
        em_size_narrow(&T->sizes, T->sizes.nodes.data[x->expr].a, has_lo ? lo : EM_SIZE_NINF,
                       has_hi ? hi : EM_SIZE_INF);
    Bounds b = bounds_of(x);
    if (has_lo && (!b.has_lo || lo > b.lo)) b.has_lo = 1, b.lo = lo;
    if (has_hi && (!b.has_hi || hi < b.hi)) b.has_hi = 1, b.hi = hi;
    PyObject *l = b.has_lo ? PyLong_FromLongLong(b.lo) : Py_NewRef(Py_None);
    PyObject *h = b.has_hi ? PyLong_FromLongLong(b.hi) : Py_NewRef(Py_None);
    PyObject *t = l && h ? PyTuple_Pack(2, l, h) : NULL;
    Py_XDECREF(l);
    Py_XDECREF(h);
    if (!t) return EM_ERR;
    Py_XSETREF(x->spec, t);
    return EM_OK;
}

/* What checking bool item cond (true from here on) says of the int item it compares. */
static EmStatus learn(EmTracer *T, EmSym *cond) {
    if (cond->items.len != 2 || cond->items.data[0]->obj != (PyObject *)&PyLong_Type) return EM_OK;
    EmSym *x = cond->items.data[0];
    PyObject *c = cond->items.data[1]->obj;
    double cd = PyFloat_CheckExact(c) ? PyFloat_AS_DOUBLE(c) : PyLong_AsDouble(c);
    if (cd == -1.0 && PyErr_Occurred()) return PyErr_Clear(), EM_OK;
    if (isnan(cd) || fabs(cd) > 4503599627370496.0) return EM_OK;
    long long fl = (long long)floor(cd), ce = (long long)ceil(cd);
    switch (cond->pos) {
        case Py_GT: return narrow(T, x, 1, fl + 1, 0, 0);
        case Py_GE: return narrow(T, x, 1, ce, 0, 0);
        case Py_LT: return narrow(T, x, 0, 0, 1, ce - 1);
        case Py_LE: return narrow(T, x, 0, 0, 1, fl);
        case Py_EQ: return fl == ce ? narrow(T, x, 1, fl, 1, fl) : EM_OK;
        default: return EM_OK;
    }
}

/* ---- as sizes ---- */

/* The stand-in value of a size symbol: a number no static size is likely to be, >= 2 as
 * TorchDynamo's size-oblivious reasoning takes unbacked sizes, inside the item's bounds. */
#define ITEM_SIZE_HINT 7919

int32_t em_item_size(EmTracer *T, EmSym *s) { return em_item_size_hinted(T, s, ITEM_SIZE_HINT); }

int32_t em_item_size_hinted(EmTracer *T, EmSym *s, int64_t want) {
    if (s->kind != SYM_ITEM || s->obj != (PyObject *)&PyLong_Type) return -2;
    if (s->expr >= 0) return s->expr;
    Bounds b = bounds_of(s);
    int64_t lo = b.has_lo ? b.lo : EM_SIZE_NINF, hi = b.has_hi ? b.hi : EM_SIZE_INF;
    int64_t hint = want < lo ? lo : want > hi ? hi : want;
    if (lo > hi) return -2; /* its checks cannot all pass: it stays a number */
    if (!em_int_active(T)) T->dyn_from = T->G->nodes.len;
    int32_t e = em_size_new_unbacked(&T->sizes, hint, lo, hi);
    EmSymLeaf leaf = {.ref = s->ref, .slot = -1, .dim = EM_LEAF_ITEM, .expr = e};
    if (e < 0 || em_vec_push(&T->sym_leaf, leaf)) return PyErr_NoMemory(), -1;
    return s->expr = e;
}

/* s with its int items (s itself, or in a plain tuple, list or torch.Size) as their size
 * symbols: s when it holds none, else a new sym; NULL with *st set (a number other than an
 * int among them: data-dependent). */
static EmSym *as_sizes(EmTracer *T, EmSym *s, int depth, EmStatus *st) {
    if (s->kind == SYM_ITEM) {
        int32_t e = em_item_size(T, s);
        if (e == -1) return *st = EM_ERR, NULL;
        if (e == -2) return *st = em_trace_fail(T, EMA_ITEM_DEP, "a size given a number from .item()"), NULL;
        EmSym *r = em_int_sym(T, e);
        if (!r) *st = EM_ERR;
        return r;
    }
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || s->spec || depth > EM_MAX_NEST ||
        !em_item_among(s->items.data, s->items.len))
        return s;
    EmSym *r = em_sym_new(T, (EmSymKind)s->kind);
    if (!r) return *st = EM_ERR, NULL;
    r->seq_type = Py_XNewRef(s->seq_type);
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *it = as_sizes(T, s->items.data[i], depth + 1, st);
        if (!it) return NULL;
        if (em_vec_push(&r->items, it)) return *st = EM_ERR, PyErr_NoMemory(), NULL;
    }
    return r;
}

EmStatus em_item_sizes(EmTracer *T, EmSym **args, int nargs, EmSym **out) {
    EmStatus st = EM_OK;
    for (int i = 0; i < nargs; i++)
        if (!(out[i] = as_sizes(T, args[i], 0, &st))) return st;
    return EM_OK;
}

/* ---- the kind's operations ---- */

static EmStatus data_dep(EmTracer *T, const char *what) {
    return em_trace_fail(T, EMA_ITEM_DEP, "%s a number from .item()", what);
}

static EmStatus item_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    (void)base;
    (void)method;
    (void)out;
    (void)self;
    return em_trace_fail(T, EMA_ITEM_DEP, "attribute %s of a number from .item()", PyUnicode_AsUTF8(name));
}

static EmStatus item_truth(EmTracer *T, EmSym *s, int *out) {
    PyObject *zero = PyLong_FromLong(0);
    if (!zero) return EM_ERR;
    int d = decide(s, Py_NE, zero);
    Py_DECREF(zero);
    if (d < 0) return data_dep(T, "the truth value of");
    *out = d;
    return EM_OK;
}

/* The type of a op b on numbers of the operands' types, or NULL (no exception) when it is not
 * one number type whatever their values: a power of ints to an exponent of unknown sign (an
 * int or a float), a float to a non-integer power (a complex for a negative base). */
static PyObject *result_type(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b) {
    if (op == EMOP_POW) {
        int exp_int = b->kind == SYM_CONST && (PyLong_CheckExact(b->obj) || PyBool_Check(b->obj));
        int base_int = a->kind == SYM_ITEM
                           ? a->obj != (PyObject *)&PyFloat_Type
                           : a->kind == SYM_INT || (a->kind == SYM_CONST && !PyFloat_CheckExact(a->obj));
        if (!exp_int || (base_int && PyObject_RichCompareBool(b->obj, Py_False, Py_LT) != 0)) return NULL;
    }
    PyObject *x = type_stand_in(T, a), *y = x ? type_stand_in(T, b) : NULL;
    PyObject *r = y ? PyObject_CallFunctionObjArgs(fn, x, y, NULL) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    PyErr_Clear(); /* a constant divisor 0: eager raises it, the frame runs as Python */
    PyObject *tp = r && (PyLong_CheckExact(r) || PyBool_Check(r) || PyFloat_CheckExact(r)) ? (PyObject *)Py_TYPE(r)
                                                                                           : NULL;
    Py_XDECREF(r);
    return tp;
}

static EmStatus item_compare(EmTracer *T, int cmp, EmSym *a, EmSym *b, EmSym **out) {
    EmSym *x = a->kind == SYM_ITEM ? a : b, *c = x == a ? b : a;
    static const int swapped[] = {
        [Py_LT] = Py_GT, [Py_LE] = Py_GE, [Py_EQ] = Py_EQ, [Py_NE] = Py_NE, [Py_GT] = Py_LT, [Py_GE] = Py_LE};
    int xcmp = x == a ? cmp : swapped[cmp]; /* x xcmp c */
    int32_t ec = c->kind == SYM_ITEM || c->kind == SYM_INT                           ? c->expr
                 : x->expr >= 0 && c->kind == SYM_CONST && PyLong_CheckExact(c->obj) ? em_int_expr(T, c)
                                                                                     : -1;
    if (ec == -2) return EM_ERR;
    if (x->expr >= 0 && ec >= 0) { /* sizes: r.size(0) == n of r = arange(n) */
        int d = em_size_decide(&T->sizes,
                               (EmSizeCmp)(xcmp == Py_EQ   ? EMSR_EQ
                                           : xcmp == Py_NE ? EMSR_NE
                                           : xcmp == Py_LT ? EMSR_LT
                                           : xcmp == Py_LE ? EMSR_LE
                                           : xcmp == Py_GT ? EMSR_GT
                                                           : EMSR_GE),
                               x->expr, ec);
        if (d >= 0) return (*out = em_sym_const(T, d ? Py_True : Py_False)) ? EM_OK : EM_ERR;
    }
    if (is_number_const(c)) {
        int d = decide(x, xcmp, c->obj);
        if (d >= 0) return (*out = em_sym_const(T, d ? Py_True : Py_False)) ? EM_OK : EM_ERR;
    }
    EmSym *ops[2] = {a, b};
    EmStatus st = EM_OK;
    EmSym *r = number_node(T, (EmOp)(EMOP_LT + cmp), NULL, NULL, ops, 2, (PyObject *)&PyBool_Type, &st);
    if (!r) return st;
    if (is_number_const(c) && x->obj == (PyObject *)&PyLong_Type) { /* what torch._check(r) would tell */
        if (em_vec_push(&r->items, x) || em_vec_push(&r->items, c)) return PyErr_NoMemory(), EM_ERR;
        r->pos = xcmp;
    }
    *out = r;
    return EM_OK;
}

/* a <bin> b cannot raise whatever number a is: b a constant that is a nonzero divisor, a
 * non-negative int exponent of an int (a float's power may overflow), or a shift count from 0
 * to 63. */
static int cannot_raise(EmOp bin, const EmSym *a, const EmSym *b) {
    if (!is_number_const(b)) return 0;
    if (bin == EMOP_TRUEDIV || bin == EMOP_FLOORDIV || bin == EMOP_MOD) {
        int zero = PyObject_Not(b->obj);
        return zero == 0 && !(PyFloat_CheckExact(b->obj) && isnan(PyFloat_AS_DOUBLE(b->obj)));
    }
    if (PyFloat_CheckExact(b->obj)) return 0;
    int overflow = 0;
    long long k = PyLong_AsLongLongAndOverflow(b->obj, &overflow);
    if (overflow || (k == -1 && PyErr_Occurred())) return PyErr_Clear(), 0;
    int int_base = a->kind == SYM_ITEM ? a->obj != (PyObject *)&PyFloat_Type
                                       : a->kind == SYM_INT || (a->kind == SYM_CONST && !PyFloat_CheckExact(a->obj));
    return bin == EMOP_POW ? k >= 0 && int_base : k >= 0 && k < 64;
}

static EmStatus item_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    if (!is_operand(a) || !is_operand(b)) return data_dep(T, "an operator on a value other than a number and");
    if (op >= EMOP_LT && op <= EMOP_GE) return item_compare(T, Py_LT + (op - EMOP_LT), a, b, out);
    EmOp bin = op >= EMOP_IADD && op <= EMOP_IRSHIFT ? em_op_binary_of(op) : op; /* numbers: s += 1 is s + 1 */
    if (bin < EMOP_ADD || bin > EMOP_RSHIFT || bin == EMOP_MATMUL) return data_dep(T, "an operator on");
    PyObject *tp = result_type(T, bin, em_op_fn(bin), a, b);
    if (!tp) return data_dep(T, "the result type of an operator on");
    EmStatus st = EM_OK;
    if ((bin == EMOP_TRUEDIV || bin == EMOP_FLOORDIV || bin == EMOP_MOD || bin == EMOP_POW || bin == EMOP_LSHIFT ||
         bin == EMOP_RSHIFT) &&
        !cannot_raise(bin, a, b)) /* by zero, 0.0 ** -1, a negative shift, an overflow */
        st = may_raise(T, "an operator that may raise on");
    if (st != EM_OK) return st;
    EmSym *ops[2] = {a, b};
    *out = number_node(T, bin, NULL, NULL, ops, 2, tp, &st);
    return *out ? EM_OK : st;
}

static EmStatus item_unary(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out) {
    if (op != EMOP_NEG && op != EMOP_POS && op != EMOP_INVERT) return data_dep(T, "an operator on");
    PyObject *x = em_item_dummy(a, 0), *r = x ? PyObject_CallOneArg(fn, x) : NULL;
    Py_XDECREF(x);
    PyErr_Clear(); /* ~1.5: eager raises it */
    PyObject *tp = r && (PyLong_CheckExact(r) || PyFloat_CheckExact(r)) ? (PyObject *)Py_TYPE(r) : NULL;
    Py_XDECREF(r);
    if (!tp) return data_dep(T, "the result type of an operator on");
    EmStatus st = EM_OK;
    *out = number_node(T, op, NULL, NULL, &a, 1, tp, &st);
    return *out ? EM_OK : st;
}

const EmSymOps em_item_ops = {
    .ident = EM_IDENT_UNKNOWN,
    .getattr = item_getattr,
    .truth = item_truth,
    .binop = item_binop,
    .unary = item_unary,
};

/* ---- calls ---- */

EmStatus em_item_conv(EmTracer *T, PyObject *fn, EmSym *s, EmSym **out) {
    if (fn == (PyObject *)&PyBool_Type) { /* bool(n): itself for a bool, else n != 0 (a NaN is true) */
        if (s->obj == (PyObject *)&PyBool_Type) return (*out = s), EM_OK;
        EmStatus st = EM_OK;
        PyObject *zero = PyLong_FromLong(0);
        EmSym *args[2] = {s, zero ? em_sym_const(T, zero) : NULL};
        Py_XDECREF(zero);
        if (!args[1]) return EM_ERR;
        *out = number_node(T, EMOP_NE, em_op_fn(EMOP_NE), "ne", args, 2, (PyObject *)&PyBool_Type, &st);
        return *out ? EM_OK : st;
    }
    PyObject *x = em_item_dummy(s, 0), *r = x ? PyObject_CallOneArg(fn, x) : NULL;
    Py_XDECREF(x);
    if (!r) return PyErr_Clear(), data_dep(T, "a conversion of");
    PyObject *tp = PyLong_CheckExact(r)    ? (PyObject *)&PyLong_Type
                   : PyFloat_CheckExact(r) ? (PyObject *)&PyFloat_Type
                                           : NULL;
    Py_DECREF(r);
    if (!tp) return data_dep(T, "a conversion of");
    /* int(n), float(f), math.floor(n)...: the number itself */
    if (tp == s->obj && fn != EM_KNOWN(b_abs)) return (*out = s), EM_OK;
    EmStatus st = tp == (PyObject *)&PyLong_Type ? may_raise(T, "a conversion (int(nan) raises) of") : EM_OK;
    if (st != EM_OK) return st;
    PyObject *name = PyObject_GetAttrString(fn, "__name__");
    const char *label = name ? PyUnicode_AsUTF8(name) : NULL;
    if (!label) {
        Py_XDECREF(name);
        return EM_ERR;
    }
    *out = number_node(T, EMOP_CALL, fn, label, &s, 1, tp, &st);
    Py_DECREF(name);
    return *out ? EM_OK : st;
}

int em_capturing(EmTracer *T, const char *setting) {
    if (T->fullgraph) return 1;
    PyObject *r = PyObject_CallMethod(em_state.meta_run, setting, NULL);
    int on = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return on;
}

/* t.item() of tensor sym t: a SYM_ITEM, or CALL_NEXT where numbers are not captured or t has
 * not one element of a real type (eager raises; a complex). */
static EmStatus item_of(EmTracer *T, EmSym *t, EmSym **out) {
    if (t->kind != SYM_TENSOR || T->in_vmap) return CALL_NEXT;
    const EmNode *x = &T->G->nodes.data[t->ref];
    if (x->vkind != EMV_TENSOR) return CALL_NEXT;
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++) numel *= em_ir_sizes(T->G, x)[d];
    EmDtypeClass cls = em_dtype_class(x->dtype);
    PyObject *tp = cls == EMDC_BOOL    ? (PyObject *)&PyBool_Type
                   : cls == EMDC_INT   ? (PyObject *)&PyLong_Type
                   : cls == EMDC_FLOAT ? (PyObject *)&PyFloat_Type
                                       : NULL;
    if (numel != 1 || !tp) return CALL_NEXT; /* eager raises; a complex number */
    int on = em_capturing(T, "capture_scalar_outputs");
    if (on <= 0) return on < 0 ? EM_ERR : CALL_NEXT;
    EmStatus st = EM_OK;
    *out = number_node(T, EMOP_CALL, EM_KNOWN(tensor_item), "item", &t, 1, tp, &st);
    return *out ? EM_OK : st;
}

EmStatus em_known_tensor_item(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    return n == 1 && !kwnames ? item_of(T, all[0], out) : CALL_NEXT;
}

/* t.tolist() of tensor sym t with ndim dimensions left: its item, or a list of t[i]'s. */
static EmStatus tolist_of(EmTracer *T, EmSym *t, int ndim, EmSym **out) {
    if (!ndim) return item_of(T, t, out);
    int64_t len = em_ir_sizes(T->G, &T->G->nodes.data[t->ref])[0];
    EmSym *l = em_sym_new(T, SYM_LIST);
    if (!l) return EM_ERR;
    for (int64_t i = 0; i < len; i++) {
        PyObject *iv = PyLong_FromLongLong(i);
        EmSym *idx = iv ? em_sym_const(T, iv) : NULL, *row = NULL, *v = NULL;
        Py_XDECREF(iv);
        if (!idx) return EM_ERR;
        EmSym *args[2] = {t, idx};
        EmStatus st = em_op_record(T, EMOP_SUBSCR, NULL, args, 2, NULL, em_op_fn(EMOP_SUBSCR), &row);
        if (st == EM_OK) st = tolist_of(T, row, ndim - 1, &v);
        if (st != EM_OK) return st;
        if (em_vec_push(&l->items, v)) return PyErr_NoMemory(), EM_ERR;
    }
    *out = l;
    return EM_OK;
}

EmStatus em_known_tensor_tolist(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames || all[0]->kind != SYM_TENSOR || T->in_vmap) return CALL_NEXT;
    const EmNode *x = &T->G->nodes.data[all[0]->ref];
    if (x->vkind != EMV_TENSOR || x->ndim > 2 || (em_int_active(T) && em_node_has_sym_dims(T, all[0]->ref)))
        return CALL_NEXT; /* its length would be a size the guards do not fix */
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++) numel *= em_ir_sizes(T->G, x)[d];
    EmDtypeClass cls = em_dtype_class(x->dtype);
    if (numel > 64 || (cls != EMDC_BOOL && cls != EMDC_INT && cls != EMDC_FLOAT)) return CALL_NEXT;
    int on = em_capturing(T, "capture_scalar_outputs");
    if (on <= 0) return on < 0 ? EM_ERR : CALL_NEXT;
    return tolist_of(T, all[0], x->ndim, out);
}

EmStatus em_tensor_conv(EmTracer *T, PyObject *fn, EmSym *t, EmSym **out) {
    EmSym *item = NULL;
    EmStatus st = item_of(T, t, &item);
    return st == EM_OK ? em_item_conv(T, fn, item, out) : st;
}

EmStatus em_known_check(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    int is_size = fn->obj == EM_KNOWN(torch_check_size);
    PyObject *want = is_size ? (PyObject *)&PyLong_Type : (PyObject *)&PyBool_Type;
    if (n < 1 || all[0]->kind != SYM_ITEM || all[0]->obj != want) return CALL_NEXT;
    for (int i = 1; i < n; i++) /* message=None */
        if (all[i]->kind != SYM_CONST || all[i]->obj != Py_None) return CALL_NEXT;
    (void)kwnames;
    EmStatus st = may_raise(T, "a check of");
    if (st != EM_OK) return st;
    EmSym *node = number_node(T, EMOP_CALL, fn->obj, is_size ? "_check_is_size" : "_check", all, 1,
                              (PyObject *)Py_TYPE(Py_None), &st);
    if (!node) return st;
    st = is_size ? narrow(T, all[0], 1, 0, 0, 0) : learn(T, all[0]);
    if (st != EM_OK) return st;
    return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
}

/* The meta arguments of args with the stand-ins `which` for their numbers: 1 with *margs and
 * *mkw new references, 0 with both NULL (an exception set, or none: the trace aborted). */
static int stand_in_args(EmTracer *T, EmSym **args, int nargs, PyObject *kwnames, int which, PyObject **margs,
                         PyObject **mkw) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    T->item_dummy = which;
    T->stand_ins = 1;
    *margs = PyTuple_New(nargs - nkw);
    *mkw = *margs ? PyDict_New() : NULL;
    for (int i = 0; *mkw && i < nargs; i++) {
        PyObject *v = em_meta_value(T, args[i]);
        if (!v) {
            Py_CLEAR(*margs);
            Py_CLEAR(*mkw);
            break;
        }
        if (i < nargs - nkw) {
            PyTuple_SET_ITEM(*margs, i, v);
        } else {
            int e = PyDict_SetItem(*mkw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), v);
            Py_DECREF(v);
            if (e) {
                Py_CLEAR(*margs);
                Py_CLEAR(*mkw);
            }
        }
    }
    T->item_dummy = 0;
    T->stand_ins = 0;
    return *mkw != NULL;
}

EmStatus em_item_call_check(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                            int *as_sizes) {
    *as_sizes = 0;
    if (op != EMOP_CALL) {
        int ok = em_op_info[op].flags & EMF_POINTWISE; /* x * s */
        if (op == EMOP_SETITEM && nargs == 3) /* x[i] = s: only the value */
            ok = !em_item_among(args, 2) && args[1]->kind != SYM_FLOAT;
        if (!ok) return (*as_sizes = 1), EM_OK;
        /* an integer tensor to a negative power raises */
        return op == EMOP_POW || op == EMOP_IPOW ? may_raise(T, "a power of a tensor to") : EM_OK;
    }
    PyObject *r = PyObject_CallMethod(em_state.meta_run, "item_call_ok", "O", fn);
    int ok = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (ok <= 0) return ok < 0 ? EM_ERR : ((*as_sizes = 1), EM_OK);
    PyObject *a1 = NULL, *k1 = NULL, *a2 = NULL, *k2 = NULL;
    int floats_ok = T->floats_ok;
    T->floats_ok = 1;
    int made = stand_in_args(T, args, nargs, kwnames, 0, &a1, &k1) &&
               stand_in_args(T, args, nargs, kwnames, 1, &a2, &k2);
    T->floats_ok = floats_ok;
    PyObject *same = NULL;
    if (made) {
        PyObject *dev = em_result_device(T, args, nargs);
        same = PyObject_CallMethod(em_state.meta_run, "item_same_meta", "OOOOOO", fn, a1, k1, a2, k2,
                                   dev ? dev : Py_None);
    }
    Py_XDECREF(a1);
    Py_XDECREF(k1);
    Py_XDECREF(a2);
    Py_XDECREF(k2);
    if (!made) return PyErr_Occurred() ? EM_ERR : EM_ABORT;
    int t = same ? PyObject_IsTrue(same) : -1;
    Py_XDECREF(same);
    if (t < 0) return EM_ERR;
    *as_sizes = !t;
    return EM_OK;
}
