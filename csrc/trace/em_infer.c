/* em_infer.c: result metadata inferred in C for the common elementwise ops (Python
 * arithmetic and comparisons, and the pointwise torch functions listed in ember/_rules.py),
 * when every tensor operand has the same shape, dtype and device and is contiguous. Other
 * cases return "not inferred" and the caller runs the op on meta tensors. The result's meta
 * tensor is made only if a later op needs it (em_sym_meta).
 */
#include "em_trace.h"

#include "../pyver/em_state.h"

enum { DT_U8 = 0, DT_I64 = 4, DT_F16 = 5, DT_F32 = 6, DT_F64 = 7, DT_BOOL = 11, DT_BF16 = 15 };

static int is_float_dt(int d) { return d == DT_F16 || d == DT_F32 || d == DT_F64 || d == DT_BF16; }
static int is_int_dt(int d) { return d >= DT_U8 && d <= DT_I64; }

static int contiguous(const EmGraph *G, const EmNode *n) {
    const int64_t *sz = em_ir_sizes(G, n), *st = em_ir_strides(G, n);
    int64_t expect = 1;
    for (int i = n->ndim - 1; i >= 0; i--) {
        if (sz[i] != 1 && st[i] != expect) return 0;
        expect *= sz[i];
    }
    return 1;
}

/* Returns 1 and fills the result metadata when inferred; 0 when the meta device must decide. */
int em_infer_pointwise(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                       int *dtype, const EmNode **like, int *requires_grad) {
    EmOpKind kind = em_op_info[op].kind;
    if (kwnames) return 0;
    if (op == EMOP_CALL) {
        if (nargs != 1 || !em_state.pointwise_fns) return 0;
        int r = PySet_Contains(em_state.pointwise_fns, fn);
        if (r != 1) {
            PyErr_Clear();
            return 0;
        }
    } else if (!(op == EMOP_ADD || op == EMOP_SUB || op == EMOP_MUL || op == EMOP_TRUEDIV || op == EMOP_NEG ||
                 op == EMOP_POS || kind == EMOK_COMPARE)) {
        return 0;
    }
    const EmGraph *G = T->G;
    const EmNode *ref = NULL;
    int rg = 0, has_float_scalar = 0;
    for (int i = 0; i < nargs; i++) {
        EmSym *s = args[i];
        if (s->kind == SYM_TENSOR) {
            const EmNode *n = &G->nodes.data[s->ref];
            if (n->vkind != EMV_TENSOR || n->dtype < 0) return 0;
            if (!ref) {
                if (!contiguous(G, n)) return 0;
                ref = n;
            } else if (n->dtype != ref->dtype || n->ndim != ref->ndim || n->dev_type != ref->dev_type ||
                       n->dev_index != ref->dev_index ||
                       (n->ndim && memcmp(em_ir_sizes(G, n), em_ir_sizes(G, ref), sizeof(int64_t) * n->ndim)) ||
                       !contiguous(G, n)) {
                return 0;
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
    if (!is_float_dt(d) && !(is_int_dt(d) && !has_float_scalar && op != EMOP_TRUEDIV && op != EMOP_CALL))
        return 0;
    if (kind == EMOK_COMPARE) {
        d = DT_BOOL;
        rg = 0;
    }
    *dtype = d;
    *like = ref;
    *requires_grad = rg && T->grad && is_float_dt(d);
    return 1;
}
