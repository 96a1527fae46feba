/* em_hop.c: torch.cond with a tensor predicate as one graph op. Each branch is traced on the
 * operands to learn what it returns, then its nodes are dropped; the op (_rules.cond_call)
 * calls at run time the branch the predicate selects, as eager's torch.cond does, and Python
 * backends get torch.ops.higher_order.cond (ember/backends/fx.py). A branch that changes
 * anything, reads a tensor the graph does not have yet, or whose result differs in metadata
 * from the other's breaks the graph: eager's torch.cond then runs (and raises what it raises);
 * so does a cond after a change to an object the trace replays after the graph.
 */
#include "em_rec.h"

#include "../pyver/em_state.h"

/* A branch the graph may hold as a constant: a function without defaults of the trace, the
 * same object on every call (known by identity, made while tracing, or a nested function
 * without a closure; one of the frame with a closure is guarded by identity here); one made
 * while tracing may have cells (made by the trace: the op makes the function again at run time
 * around their values, see branch_cells). 1 yes, 0 no, -1 on error. */
static int branch_ok(EmTracer *T, EmSym *s) {
    if (s->kind != SYM_OBJ || !PyFunction_Check(s->obj)) return 0;
    if (s->items.len) return em_sym_placeholder(s) && !s->pos;
    if (s->by_id == 2 && ((PyFunctionObject *)s->obj)->func_closure && s->src >= 0) {
        /* a nested function of the frame, guarded by its code: the graph calls this very
         * function (its cells read when it runs), so it is guarded by identity too */
        if (em_guard_check(T->P, EMG_ID, s->src, s->obj, 0)) return -1;
        s->by_id = 1;
    }
    return em_sym_placeholder(s) || s->by_id == 1 || (s->by_id == 2 && !((PyFunctionObject *)s->obj)->func_closure);
}

/* The values of branch b's cells as a tuple sym (the op's argument: graph values and
 * constants). Each must be a cell the trace made, holding a tensor or a constant: an object
 * (a module) would let the branch read tensors (parameters) the graph holds as inputs, which
 * a Python backend's copy of the branch would take for constants. NULL with *st set. */
static EmSym *branch_cells(EmTracer *T, EmSym *b, EmStatus *st) {
    EmSym *t = em_sym_new(T, SYM_TUPLE);
    *st = t ? EM_OK : EM_ERR;
    for (int32_t i = 0; t && i < b->items.len; i++) {
        EmSym *c = b->items.data[i], *v = c->kind == SYM_CELL && !c->pos && c->items.len ? c->items.data[0] : NULL;
        int ok = v && (v->kind == SYM_TENSOR || v->kind == SYM_CONST);
        if (!ok)
            return *st = em_trace_fail(T, EMA_CALL, "torch.cond: a branch closing over %s",
                                       v ? em_sym_describe(v) : "an unbound or program cell"),
                   NULL;
        if (em_vec_push(&t->items, v)) return *st = (PyErr_NoMemory(), EM_ERR), NULL;
    }
    return t;
}

/* The sum of the change counters of syms[0, n): a branch that changed a container the trace
 * made before it moves it. */
static uint64_t versions(const EmTracer *T, int32_t n) {
    uint64_t v = 0;
    for (int32_t i = 0; i < n; i++) v += (uint64_t)T->syms.data[i]->kver + T->syms.data[i]->mver;
    return v;
}

/* The meta value of a branch's result r: a tensor made by the branch, or a tuple or list of
 * such tensors (new reference), NULL without an exception when it is something else. */
static PyObject *result_meta(EmTracer *T, EmSym *r, int32_t nodes0) {
    if (r->kind == SYM_TENSOR) {
        PyObject *m = r->ref >= nodes0 ? em_sym_meta(T, r) : NULL;
        return Py_XNewRef(m);
    }
    if ((r->kind != SYM_TUPLE && r->kind != SYM_LIST) || r->seq_type || !r->items.len) return NULL;
    PyObject *c = r->kind == SYM_TUPLE ? PyTuple_New(r->items.len) : PyList_New(r->items.len);
    for (int32_t i = 0; c && i < r->items.len; i++) {
        EmSym *t = r->items.data[i];
        PyObject *m = t->kind == SYM_TENSOR && t->ref >= nodes0 ? em_sym_meta(T, t) : NULL;
        if (!m) {
            Py_DECREF(c);
            return NULL;
        }
        if (r->kind == SYM_TUPLE) PyTuple_SET_ITEM(c, i, Py_NewRef(m));
        else PyList_SET_ITEM(c, i, Py_NewRef(m));
    }
    return c;
}

/* Traces fn(*ops) and takes back everything it added to the graph: *meta is its result's meta
 * value (new reference). EM_OK, EM_ABORT (the reason recorded) or EM_ERR. */
static EmStatus trace_branch(EmTracer *T, EmSym *fn, EmSym *ops, PyObject **meta) {
    EmGraph *G = T->G;
    int32_t nodes0 = G->nodes.len, inputs0 = G->ninputs, syms0 = T->syms.len, mutated0 = T->mutated.len,
            ctx0 = T->ctx_open.len;
    uint32_t stores0 = T->store_ver;
    int grad0 = T->grad;
    uint64_t v0 = versions(T, syms0);
    EmSym *ret = NULL, *cells0[64];
    for (int32_t i = 0; i < fn->items.len && i < 64; i++)
        cells0[i] = fn->items.data[i]->items.len ? fn->items.data[i]->items.data[0] : NULL;
    if (fn->items.len > 64) return em_trace_fail(T, EMA_CALL, "torch.cond: a branch with more than 64 cells");
    EmStatus st = em_inline_closure(T, fn->obj, fn->items.len ? fn : NULL, ops ? ops->items.data : NULL,
                                    ops ? ops->items.len : 0, NULL, &ret);
    for (int32_t i = 0; st == EM_OK && i < fn->items.len; i++) /* a nonlocal write: the op's cells are copies */
        if ((fn->items.data[i]->items.len ? fn->items.data[i]->items.data[0] : NULL) != cells0[i])
            st = em_trace_fail(T, EMA_CALL, "torch.cond: a branch that writes a variable of its closure");
    if (st == EM_ABORT && T->exc) { /* eager's torch.cond does not hand a branch's exception on as it is */
        Py_CLEAR(T->exc);
        return em_trace_fail(T, EMA_CALL, "torch.cond: a branch that raises");
    }
    if (st != EM_OK) return st;
    const char *why = G->ninputs != inputs0                                   ? "reads a tensor new to the graph"
                      : T->store_ver != stores0 || T->mutated.len != mutated0 ? "changes an object"
                      : T->grad != grad0 || T->ctx_open.len != ctx0           ? "changes grad mode"
                      : versions(T, syms0) != v0                              ? "changes a container"
                      : em_graph_mutated(G, nodes0)                           ? "changes a tensor in place"
                                                                              : NULL;
    if (why) return em_trace_fail(T, EMA_CALL, "torch.cond: a branch that %s", why);
    *meta = result_meta(T, ret, nodes0);
    if (!*meta)
        return PyErr_Occurred() ? EM_ERR
                                : em_trace_fail(T, EMA_CALL, "torch.cond: a branch returning %s", em_sym_describe(ret));
    G->nodes.len = nodes0; /* its values live only inside the op */
    if (T->node_dims.len > nodes0) T->node_dims.len = nodes0;
    if (T->node_expr.len > nodes0) T->node_expr.len = nodes0;
    return EM_OK;
}

EmStatus em_known_cond(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    if (self || n < 3 || all[0]->kind != SYM_TENSOR) return CALL_NEXT; /* a constant predicate: inlined */
    if (kwnames || n > 4) return em_trace_fail(T, EMA_CALL, "torch.cond with keyword arguments");
    EmSym *pred = all[0], *ops = n == 4 ? all[3] : NULL;
    const EmNode *pn = &T->G->nodes.data[pred->ref];
    int64_t numel = 1;
    for (int d = 0; d < pn->ndim; d++) numel *= em_ir_sizes(T->G, pn)[d];
    if (numel != 1 || em_int_active(T))
        return em_trace_fail(T, EMA_CALL, "torch.cond with a predicate of %lld elements or symbolic sizes",
                             (long long)numel);
    if (ops && ((ops->kind != SYM_TUPLE && ops->kind != SYM_LIST) || ops->seq_type))
        return em_trace_fail(T, EMA_CALL, "torch.cond with operands in a %s", em_sym_describe(ops));
    for (int32_t i = 0; ops && i < ops->items.len; i++)
        if (ops->items.data[i]->kind != SYM_TENSOR)
            return em_trace_fail(T, EMA_CALL, "torch.cond with an operand %s", em_sym_describe(ops->items.data[i]));
    int ok = branch_ok(T, all[1]);
    if (ok > 0) ok = branch_ok(T, all[2]);
    if (ok <= 0)
        return ok < 0 ? EM_ERR : em_trace_fail(T, EMA_CALL, "torch.cond with a branch that is not a plain function");
    /* the branch runs as Python inside the graph: the trace's stores (globals, attributes,
     * cells) and changes to the frame's containers are made after the graph, so it would read
     * what they replace */
    if (T->stores.len || T->mutated.len)
        return em_trace_fail(T, EMA_CALL, "torch.cond after a change its branches could read");
    PyObject *mt = NULL, *mf = NULL;
    EmStatus st = EM_OK;
    EmSym *tcells = branch_cells(T, all[1], &st), *fcells = tcells ? branch_cells(T, all[2], &st) : NULL;
    if (!fcells) return st;
    st = trace_branch(T, all[1], ops, &mt);
    if (st == EM_OK) st = trace_branch(T, all[2], ops, &mf);
    PyObject *same = st == EM_OK ? PyObject_CallMethod(em_state.meta_run, "cond_same_meta", "OO", mt, mf) : NULL;
    PyObject *meta_fn = same == Py_True ? PyObject_CallMethod(em_state.meta_run, "cond_meta", "(O)", mt) : NULL;
    PyObject *call = meta_fn ? PyObject_GetAttrString(em_state.meta_run, "cond_call") : NULL;
    if (st == EM_OK && same && same != Py_True)
        st = em_trace_fail(T, EMA_CALL, "torch.cond: branches whose results differ in metadata");
    else if (st == EM_OK && !call) st = EM_ERR;
    if (st == EM_OK) {
        EmSym *args[6] = {pred,
                          em_sym_const(T, all[1]->obj),
                          em_sym_const(T, all[2]->obj),
                          ops ? ops : em_sym_new(T, SYM_TUPLE),
                          tcells,
                          fcells};
        int nargs = tcells->items.len || fcells->items.len ? 6 : 4;
        st = args[1] && args[2] && args[3] ? em_op_record(T, EMOP_CALL, call, args, nargs, NULL, meta_fn, out) : EM_ERR;
    }
    Py_XDECREF(mt);
    Py_XDECREF(mf);
    Py_XDECREF(same);
    Py_XDECREF(meta_fn);
    Py_XDECREF(call);
    return st;
}
