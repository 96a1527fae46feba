/* em_sym_float.c: SYM_FLOAT, a Python float argument of the frame whose value changed since the
 * code's last compile (or any, with dynamic=True): a graph input rather
 * than a guarded constant, so a frame or resume function taking a changing float (a learning
 * rate, the value of an .item() that crossed a graph break) compiles once, not per value.
 *
 * obj: its traced value (owned); src: its guard slot (the guard checks its type only); ref: its
 * graph input, made at its first use as a graph value (-1 before).
 * - An operand of a pointwise Python operator with a tensor (x * s, s - x, x ** s) is a graph
 *   value: such an op's result sizes and dtype do not depend on the float's value.
 * - Anything else that needs it (an argument of any other call: torch.arange(s), interpolate's
 *   scale factor; arithmetic on floats, comparisons, truth, attributes) pins it: the guard then
 *   checks its value, and it is a constant from then on (em_float_pin turns the sym into one).
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

/* ---- the kind's operations: each needs the value, so each pins it first ---- */

static EmStatus float_truth(EmTracer *T, EmSym *s, int *out) {
    EmStatus st = em_float_pin(T, s);
    if (st != EM_OK) return st;
    *out = PyFloat_AS_DOUBLE(s->obj) != 0.0;
    return EM_OK;
}

static EmStatus float_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    EmStatus st = em_float_pin(T, base);
    return st == EM_OK ? em_sym_getattr(T, base, name, method, out, self) : st;
}

static EmStatus float_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    (void)op;
    EmStatus st = em_float_pin(T, a);
    if (st == EM_OK) st = em_float_pin(T, b);
    EmSym *args[2] = {a, b};
    return st == EM_OK ? em_sym_binop(T, op, fn, args[0], args[1], out) : st;
}

static EmStatus float_unary(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out) {
    EmStatus st = em_float_pin(T, a);
    return st == EM_OK ? em_sym_unop(T, op, fn, a, out) : st;
}

const EmSymOps em_float_ops = {
    .ident = EM_IDENT_UNKNOWN,
    .getattr = float_getattr,
    .truth = float_truth,
    .binop = float_binop,
    .unary = float_unary,
};
