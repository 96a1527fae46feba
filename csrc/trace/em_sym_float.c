/* em_sym_float.c: SYM_FLOAT, a Python float argument of the frame whose value changed since the
 * code's last compile (or any, with dynamic=True): a graph input rather
 * than a guarded constant, so a frame or resume function taking a changing float (a learning
 * rate, the value of an .item() that crossed a graph break) compiles once, not per value.
 *
 * obj: its traced value (owned); src: its guard slot (the guard checks its type only); ref: its
 * graph input, made at its first use as a graph value (-1 before).
 * - An operand of a pointwise Python operator with a tensor (x * s, s - x, x ** s) is a graph
 *   value: such an op's result sizes and dtype do not depend on the float's value.
 * - Arithmetic (+ - * / // % **, unary - and +) with another such float or an int or float
 *   constant is a SYM_FLOAT too, whose slot the guard computes with Python's own operator from
 *   its operands' slots (EMG_LOAD_OP; its type checked: a float); a comparison with one, and
 *   truth, guard the outcome (EMG_COMPARE), not the value: `v = loss.item() + 0.5; if v > 1:`
 *   compiles once per outcome of the branch; int(), round(), math.floor/ceil/trunc of one are
 *   an int read from that call of it (guarded by value, then a symbolic int once it changed, as
 *   any int of the frame), abs() a float.
 * - Anything else that needs it (an argument of any other call: torch.arange(s), interpolate's
 *   scale factor; str, attributes, operands of other kinds) pins it: the guard then checks its
 *   value, and it is a constant from then on (em_float_pin turns the sym into one).
 * The FX export for Python backends passes such an input as TorchDynamo does: a float64 0-dim
 * tensor whose .item() is a SymFloat (em_trace_input_syms: None for it).
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

EmSym *em_float_input(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st) {
    if (em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)&PyFloat_Type, 0)) {
        *st = EM_ERR;
        return NULL;
    }
    EmSym *s = em_sym_new(T, SYM_FLOAT);
    if (!s) {
        *st = EM_ERR;
        return NULL;
    }
    s->obj = Py_NewRef(v);
    s->src = slot;
    return s;
}

EmStatus em_float_pin(EmTracer *T, EmSym *s) {
    if (s->kind != SYM_FLOAT) return EM_OK;
    if (em_guard_check(T->P, EMG_EQ, s->src, s->obj, 0)) return EM_ERR;
    s->kind = SYM_CONST; /* every use of it from now on: a constant guarded by value */
    return EM_OK;
}

int32_t em_float_arg(EmTracer *T, EmSym *s, EmStatus *st) {
    if (!T->floats_ok) { /* not an operand of a pointwise operator: its value may decide sizes */
        if ((*st = em_float_pin(T, s)) != EM_OK) return -1;
        return em_sym_arg(T, s, st);
    }
    for (int32_t i = 0; s->ref < 0 && i < T->input_slots.len; i++) /* its slot an input already (read twice) */
        if (T->input_slots.data[i] == s->src)
            for (EmRef r = 0; s->ref < 0 && r < T->G->nodes.len; r++)
                if (T->G->nodes.data[r].op == EMOP_INPUT && T->G->nodes.data[r].aux == i) s->ref = r;
    if (s->ref < 0) {
        EmRef r = em_ir_node(T->G, EMOP_INPUT, 0, 0, -1, 0, -1);
        if (r < 0 || em_vec_push(&T->input_slots, s->src)) return *st = EM_ERR, PyErr_NoMemory(), -1;
        EmNode *n = &T->G->nodes.data[r];
        n->aux = T->G->ninputs++;
        n->vkind = EMV_OBJ;
        n->label = em_ir_text(T->G, T->P->names.data[s->src]);
        s->ref = r;
        T->float_input = 1;
    }
    int32_t a = em_ir_arg(T->G, EMARG_REF, s->ref, 0);
    if (a < 0) *st = EM_ERR, PyErr_NoMemory();
    return a;
}

/* ---- the kind's operations ---- */

_Static_assert(EMOP_POW - EMOP_ADD == 6, "ORDER OP: + - * / // % ** (float_binop's names)");
_Static_assert(EMOP_LE - EMOP_LT == Py_LE - Py_LT && EMOP_GE - EMOP_LT == Py_GE - Py_LT,
               "ORDER OP: the comparisons in rich-comparison order");

/* The guard slot of an operand of float arithmetic: a SYM_FLOAT's own, a constant int, bool or
 * float's constant slot; -1 for anything else (the operation pins). */
static int32_t operand_slot(EmTracer *T, EmSym *s) {
    if (s->kind == SYM_FLOAT) return s->src;
    if (s->kind != SYM_CONST || !(PyFloat_CheckExact(s->obj) || PyLong_CheckExact(s->obj) || PyBool_Check(s->obj)))
        return -1;
    PyObject *r = PyObject_Repr(s->obj);
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    int32_t slot = u ? em_guard_const(T->P, s->obj, u) : -1;
    Py_XDECREF(r);
    return slot;
}

/* fn(a[, b]) of floats (b NULL: unary): a SYM_FLOAT the guard computes (EM_OK, *out set), or
 * CALL_NEXT when an operand is not one or the result is not a float (the caller pins). */
static EmStatus float_op(EmTracer *T, PyObject *fn, const char *sym, EmSym *a, EmSym *b, EmSym **out) {
    int32_t la = operand_slot(T, a), lb = b ? operand_slot(T, b) : -1;
    if (la < 0 || (b && lb < 0)) return PyErr_Occurred() ? EM_ERR : CALL_NEXT;
    PyObject *args[2] = {a->obj, b ? b->obj : NULL};
    PyObject *r = PyObject_Vectorcall(fn, args, b ? 2 : 1, NULL);
    /* an error or another type (a complex power): pinned, raised; a nan: only itself passes
     * an equality guard, and each guard run computes a new one (its operands are pinned) */
    if (!r || !PyFloat_CheckExact(r) || Py_IS_NAN(PyFloat_AS_DOUBLE(r))) {
        Py_XDECREF(r);
        PyErr_Clear();
        return CALL_NEXT;
    }
    int32_t slot = em_guard_op(T->P, fn, sym, la, lb);
    EmSym *s = slot < 0 || em_guard_check(T->P, EMG_TYPE, slot, (PyObject *)&PyFloat_Type, 0)
                   ? NULL
                   : em_sym_new(T, SYM_FLOAT);
    if (!s) {
        Py_DECREF(r);
        return EM_ERR;
    }
    s->obj = r;
    s->src = slot;
    *out = s;
    return EM_OK;
}

EmStatus em_float_conv(EmTracer *T, PyObject *fn, EmSym *a, EmSym **out) {
    if (fn == (PyObject *)&PyFloat_Type) return (*out = a), EM_OK; /* float(f) is f itself */
    PyObject *name = PyObject_GetAttrString(fn, "__name__");
    PyObject *sym = name ? PyUnicode_FromFormat("%U ", name) : NULL;
    const char *u = sym ? PyUnicode_AsUTF8(sym) : NULL;
    PyObject *r = u ? PyObject_CallOneArg(fn, a->obj) : NULL;
    EmStatus st = EM_ERR;
    if (!r && u) { /* int(inf), int(nan): pinned, and the call raises as Python's */
        PyErr_Clear();
        st = CALL_NEXT;
    } else if (r && PyFloat_CheckExact(r)) { /* abs(f): a float input too */
        st = float_op(T, fn, u, a, NULL, out);
    } else if (r && PyLong_CheckExact(r)) { /* the int read from fn(f) (f may change within it):
                                              * guarded by value, or a symbolic int once it changed */
        int32_t slot = em_guard_op(T->P, fn, u, a->src, -1);
        st = EM_ERR;
        *out = slot < 0 ? NULL : em_sym_wrap(T, r, slot, &st);
        st = *out ? EM_OK : st == EM_OK ? EM_ERR : st;
    } else if (r) {
        st = CALL_NEXT;
    }
    Py_XDECREF(r);
    Py_XDECREF(sym);
    Py_XDECREF(name);
    return st;
}

/* a CMP b of floats: a constant bool, the outcome guarded; CALL_NEXT as float_op. */
static EmStatus float_compare(EmTracer *T, int cmp, EmSym *a, EmSym *b, EmSym **out) {
    int32_t la = operand_slot(T, a), lb = operand_slot(T, b);
    if (la < 0 || lb < 0) return PyErr_Occurred() ? EM_ERR : CALL_NEXT;
    PyObject *r = PyObject_RichCompare(a->obj, b->obj, cmp);
    int t = r ? PyObject_IsTrue(r) : -1;
    if (t < 0 || !PyBool_Check(r)) {
        Py_XDECREF(r);
        PyErr_Clear();
        return CALL_NEXT;
    }
    *out = em_guard_compare(T->P, la, cmp, lb, t) ? NULL : em_sym_const(T, r);
    Py_DECREF(r);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus float_truth(EmTracer *T, EmSym *s, int *out) {
    PyObject *z = PyFloat_FromDouble(0.0);
    EmSym *zero = z ? em_sym_const(T, z) : NULL, *r = NULL;
    Py_XDECREF(z);
    EmStatus st = zero ? float_compare(T, Py_NE, s, zero, &r) : EM_ERR;
    if (st == EM_OK) {
        *out = r->obj == Py_True;
        return EM_OK;
    }
    if (st != CALL_NEXT || (st = em_float_pin(T, s)) != EM_OK) return st;
    *out = PyFloat_AS_DOUBLE(s->obj) != 0.0;
    return EM_OK;
}

static EmStatus float_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    EmStatus st = em_float_pin(T, base);
    return st == EM_OK ? em_sym_getattr(T, base, name, method, out, self) : st;
}

static EmStatus float_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    static const char *const syms[] = {"+", "-", "*", "/", "//", "%", "**"};
    EmOp bin = op >= EMOP_IADD && op <= EMOP_IRSHIFT ? em_op_binary_of(op) : op; /* x += v of floats: x + v */
    EmStatus st = CALL_NEXT;
    if (bin >= EMOP_ADD && bin <= EMOP_POW) st = float_op(T, em_op_fn(bin), syms[bin - EMOP_ADD], a, b, out);
    else if (op >= EMOP_LT && op <= EMOP_GE) st = float_compare(T, Py_LT + (op - EMOP_LT), a, b, out);
    if (st != CALL_NEXT) return st;
    st = em_float_pin(T, a);
    if (st == EM_OK) st = em_float_pin(T, b);
    EmSym *args[2] = {a, b};
    return st == EM_OK ? em_sym_binop(T, op, fn, args[0], args[1], out) : st;
}

static EmStatus float_unary(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out) {
    EmStatus st = op == EMOP_NEG || op == EMOP_POS ? float_op(T, em_op_fn(op), op == EMOP_NEG ? "-" : "+", a, NULL, out)
                                                   : CALL_NEXT;
    if (st != CALL_NEXT) return st;
    st = em_float_pin(T, a);
    return st == EM_OK ? em_sym_unop(T, op, fn, a, out) : st;
}

const EmSymOps em_float_ops = {
    .ident = EM_IDENT_UNKNOWN,
    .getattr = float_getattr,
    .truth = float_truth,
    .binop = float_binop,
    .unary = float_unary,
};
