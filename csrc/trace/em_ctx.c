/* em_ctx.c: `with` blocks of context managers that change torch's global state
 * (torch.no_grad, enable_grad, set_grad_enabled, inference_mode, autocast), traced into the graph.
 * While the tracer is inside such a block it really enters a twin of the context (made from
 * the same constant arguments), so meta runs see the state the real ops will see; the twins
 * still entered when a trace ends are exited by em_ctx_unwind. The graph records the state
 * changes as calls: grad-mode contexts as torch._C._set_grad_enabled(mode), the others as
 * ember._rules.enter_ctx(spec) / exit_ctx(entered) pairs.
 * Helpers in ember/_rules.py: ctx_new, ctx_enter, ctx_exit, enter_ctx, exit_ctx, reenter.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* Records fn(args) as a graph node with no tensor result; args are the nargs graph
 * arguments from a0. The node's ref, or -1 with an exception. */
static EmRef record(EmTracer *T, PyObject *fn, const char *name, int32_t a0, int nargs, int vkind) {
    int32_t fnc = a0 < 0 ? -1 : em_ir_const(T->G, EMC_OBJ, 0, 0, fn, name);
    EmRef r = fnc < 0 ? -1 : em_ir_node(T->G, EMOP_CALL, a0, nargs, -1, 0, fnc);
    if (r < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    T->G->nodes.data[r].vkind = (uint8_t)vkind;
    T->state_ops |= fn == em_state.set_grad_enabled ? EM_STATE_GRAD : EM_STATE_OTHER;
    return r;
}

/* A graph argument holding constant v: its index, or -1. */
static int32_t const_arg(EmTracer *T, PyObject *v) {
    EmStatus st = EM_ERR;
    EmSym *a = em_sym_const(T, v);
    return a ? em_sym_arg(T, a, &st) : -1;
}

static EmStatus record_grad(EmTracer *T, int mode) {
    int32_t a = const_arg(T, mode ? Py_True : Py_False);
    return record(T, em_state.set_grad_enabled, "torch._C._set_grad_enabled", a, 1, EMV_NONE) < 0 ? EM_ERR : EM_OK;
}

/* The truth of helper(arg), a function of ember._rules (ctx_enter/ctx_exit answer the grad mode);
 * -1 on error. */
static int helper_grad(const char *helper, PyObject *arg) {
    PyObject *r = PyObject_CallMethod(em_state.meta_run, helper, "O", arg);
    if (!r) return -1;
    int g = PyObject_IsTrue(r);
    Py_DECREF(r);
    return g;
}

EM_NEW PyObject *em_call_spec(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *pos = PyTuple_New(npos), *kw = PyTuple_New(nkw), *spec = NULL;
    for (int i = 0; pos && kw && i < nargs; i++) {
        PyObject *v = em_sym_value(T, args[i]);
        if (!v) goto done;
        if (i < npos) {
            PyTuple_SET_ITEM(pos, i, v);
        } else {
            PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(kwnames, i - npos), v);
            Py_DECREF(v);
            if (!pair) goto done;
            PyTuple_SET_ITEM(kw, i - npos, pair);
        }
    }
    if (pos && kw) spec = PyTuple_Pack(3, fn, pos, kw);
done:
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    return spec;
}

static EmStatus ctx_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);

/* no_grad(f), enable_grad(f), inference_mode(f): torch's __new__ returns cls()(f), the
 * decorated function; 1 when cls(arg) is such a call, 0 when not, -1 on error. */
static int decorates(PyObject *cls, EmSym *arg) {
    if (arg->kind != SYM_OBJ || !PyCallable_Check(arg->obj) || PyBool_Check(arg->obj)) return 0;
    PyObject *r = PyObject_CallMethod(em_state.meta_run, "ctx_new_decorates", "O", cls);
    int d = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return d;
}

/* A context's maker as messages name it: a class, or a function returning a context. */
static const char *ctx_name(PyObject *cls) {
    if (PyType_Check(cls)) return ((PyTypeObject *)cls)->tp_name;
    const char *n = PyFunction_Check(cls) ? PyUnicode_AsUTF8(((PyFunctionObject *)cls)->func_qualname) : NULL;
    if (!n) PyErr_Clear();
    return n ? n : Py_TYPE(cls)->tp_name;
}

/* The entry holds a functorch level's number (a vmap's): guarded on no transform being
 * active when it runs, as none was while tracing (_rules.functorch_idle). */
static int guard_functorch_idle(EmTracer *T) {
    static PyObject *idle; /* owned for the process */
    if (!idle && !(idle = PyObject_GetAttrString(em_state.meta_run, "functorch_idle"))) return -1;
    return em_guard_query(T, idle, Py_True);
}

EmStatus em_ctx_make(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    int dec = nargs == 1 && !kwnames ? decorates(cls, args[0]) : 0;
    if (dec) {
        EmSym *made = NULL;
        EmStatus st = dec < 0 ? EM_ERR : em_ctx_make(T, cls, NULL, 0, NULL, &made);
        return st == EM_OK ? ctx_call(T, made, NULL, args, 1, NULL, out) : st;
    }
    PyObject *spec = em_call_spec(T, cls, args, nargs, kwnames), *res = NULL;
    EmStatus st = EM_ERR;
    if (!spec) {
        if (!PyErr_Occurred()) st = em_trace_fail(T, EMA_VALUE, "%s with a non-constant argument", ctx_name(cls));
        goto done;
    }
    /* the twin; set_grad_enabled changes grad mode as it is made */
    res = PyObject_CallMethod(em_state.meta_run, "ctx_new", "OOO", cls, PyTuple_GET_ITEM(spec, 1),
                              PyTuple_GET_ITEM(spec, 2));
    if (!res) {
        st = em_trace_abandon(T, EMA_CALL, "%s on these arguments", ctx_name(cls));
        goto done;
    }
    EmSym *s = em_sym_new(T, SYM_CTX);
    if (!s) goto done;
    s->obj = Py_NewRef(PyTuple_GET_ITEM(res, 0));
    s->grad_family = (int8_t)PyObject_IsTrue(PyTuple_GET_ITEM(res, 1));
    s->unbreakable = (int8_t)PyObject_IsTrue(PyTuple_GET_ITEM(res, 2));
    if (s->unbreakable && guard_functorch_idle(T)) goto done;
    s->spec = Py_NewRef(spec);
    s->prev_grad = (int8_t)T->grad;
    int g = helper_grad("grad_mode", Py_None);
    if (g < 0) goto done;
    if (s->grad_family && g != T->grad) { /* set_grad_enabled changes grad mode when made */
        if (T->ctx_open.len) T->grad_set_in_with = 1;
        T->grad = g;
        if (record_grad(T, g) != EM_OK) goto done;
        s->ctx_state = EM_CTX_IN_EFFECT;
    }
    *out = s;
    st = EM_OK;
done:
    Py_XDECREF(spec);
    Py_XDECREF(res);
    if (st == EM_ERR && !PyErr_Occurred()) PyErr_NoMemory();
    return st;
}

/* warnings.simplefilter/filterwarnings/resetwarnings inside a with block of
 * warnings.catch_warnings, which puts the filters back at its end: run now (inside the twin's
 * block, so the trace's own meta runs see them) and recorded as a graph call (ember._rules.call_spec),
 * so the graph's ops run under them. Outside such a block the change outlives the frame: the
 * call breaks the graph. */
EmStatus em_ctx_warn_filter(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    int inside = 0;
    for (int32_t i = 0; i < T->ctx_open.len; i++)
        inside |= (PyObject *)Py_TYPE(T->ctx_open.data[i]->obj) == EM_KNOWN(catch_warnings);
    const char *name = PyFunction_Check(fn->obj) ? PyUnicode_AsUTF8(((PyFunctionObject *)fn->obj)->func_qualname)
                                                 : NULL;
    if (!name) {
        PyErr_Clear();
        name = "?";
    }
    if (!inside)
        return em_trace_fail(T, EMA_SIDE_EFFECT, "warnings.%s outside a warnings.catch_warnings() block", name);
    PyObject *spec = em_call_spec(T, fn->obj, all, n, kwnames);
    if (!spec)
        return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "warnings.%s of non-constant arguments", name);
    PyObject *run = PyObject_GetAttrString(em_state.meta_run, "call_spec");
    PyObject *r = run ? PyObject_CallOneArg(run, spec) : NULL;
    EmStatus st = EM_ERR;
    if (!r) { /* it raised (a bad action): Python raises it at the call */
        st = run ? em_trace_raise_pending(T, "a warnings filter call raised") : EM_ERR;
    } else if (record(T, run, "call_spec", const_arg(T, spec), 1, EMV_NONE) >= 0) {
        T->grad_set_in_with = 1; /* a break could not re-enter the block with the change made */
        st = (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
    }
    Py_XDECREF(r);
    Py_XDECREF(run);
    Py_DECREF(spec);
    return st;
}

/* Whether autocast is on now, or a vmap level a twin entered (a twin entered or exited may
 * change either): C shape inference and folding are off while one is (em_infer.c, em_fold.c):
 * results come from meta runs (batched meta tensors inside a vmap). */
static int refresh_autocast(EmTracer *T) {
    EmGlobalState gs;
    if (em_guard_global_state_read(&gs)) return -1;
    int idle = helper_grad("functorch_idle", Py_None);
    if (idle < 0) return -1;
    T->in_vmap = !idle;
    T->autocast = gs.autocast_cpu || gs.autocast_cuda || !idle;
    return 0;
}

static EmStatus torch_before_with(EmTracer *T, EmSym *ctx, EmSym **exit_fn, EmSym **entered) {
    if (ctx->ctx_state == EM_CTX_MADE) {
        ctx->prev_grad = (int8_t)T->grad;
        if (!ctx->grad_family) { /* the node's value is the entered context, for its exit */
            ctx->ref = record(T, em_state.ctx_enter_fn, "enter_ctx", const_arg(T, ctx->spec), 1, EMV_OBJ);
            if (ctx->ref < 0) return EM_ERR;
        }
        int g = helper_grad("ctx_enter", ctx->obj);
        if (g < 0) return EM_ERR;
        if (ctx->grad_family && g != T->grad && record_grad(T, g) != EM_OK) return EM_ERR;
        T->grad = g;
    } else if (ctx->ctx_state == EM_CTX_IN_EFFECT) {
        /* made by set_grad_enabled (already in effect): its __enter__ changes nothing */
        if (helper_grad("ctx_enter", ctx->obj) < 0) return EM_ERR;
    } else {
        return em_trace_fail(T, EMA_VALUE, "a context manager entered twice");
    }
    if (refresh_autocast(T)) return EM_ERR;
    if (em_vec_push(&T->ctx_open, ctx)) return PyErr_NoMemory(), EM_ERR;
    ctx->ctx_state = EM_CTX_ENTERED;
    EmSym *x = em_sym_new(T, SYM_EXIT);
    if (!x || em_vec_push(&x->items, ctx)) return x ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    *exit_fn = x;
    /* grad-mode contexts and inference_mode enter as None, a vmap level as its number;
     * autocast's __enter__ returns the context itself, catch_warnings(record=True)'s the list it
     * records into, which the trace does not model (a use of `as x` aborts) */
    PyObject *v = PyObject_CallMethod(em_state.meta_run, "ctx_entered", "O", ctx->obj);
    if (!v) return EM_ERR;
    *entered = v == Py_NotImplemented ? em_sym_null(T) : em_sym_const(T, v);
    Py_DECREF(v);
    return *entered ? EM_OK : EM_ERR;
}

/* Records ctx's exit (graph only; the twin is exited by the caller or by unwinding); *grad is
 * the graph's grad mode before it, then after it. */
static EmStatus record_exit(EmTracer *T, EmSym *ctx, int *grad) {
    if (ctx->grad_family) { /* a block that changed nothing (no_grad inside no_grad) records nothing */
        int was = *grad;
        *grad = ctx->prev_grad;
        return ctx->prev_grad == was ? EM_OK : record_grad(T, ctx->prev_grad);
    }
    int32_t a = em_ir_arg(T->G, EMARG_REF, ctx->ref, 0);
    return record(T, em_state.ctx_exit_fn, "exit_ctx", a, 1, EMV_NONE) < 0 ? EM_ERR : EM_OK;
}

/* `with` of any other object (contextlib.nullcontext, a user's class): type(ctx).__enter__ is
 * called like any traced call and __exit__ bound; exit_fn is a SYM_EXIT holding (ctx, bound
 * __exit__), called at the block's normal end. An exception inside the block is not modeled
 * (em_exc.c); at a graph break inside it the resume function gets the bound __exit__ (em_trace.c
 * build_out), which it calls where the block ends, as the frame would. */
static EmStatus generic_before_with(EmTracer *T, EmSym *ctx, EmSym **exit_fn, EmSym **entered) {
    EmSym *exit_m = NULL, *enter = NULL, *self = NULL;
    EmStatus st = em_sym_getattr(T, ctx, EM_STR(dunder_exit), 0, &exit_m, &self);
    if (st == EM_OK) st = em_sym_getattr(T, ctx, EM_STR(dunder_enter), 1, &enter, &self);
    if (st == EM_OK) st = em_call(T, enter, self, NULL, 0, NULL, entered);
    if (st != EM_OK) return st;
    EmSym *x = em_sym_new(T, SYM_EXIT);
    if (!x || em_vec_push(&x->items, ctx) || em_vec_push(&x->items, exit_m))
        return x ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    *exit_fn = x;
    return EM_OK;
}

EmStatus em_ctx_with(EmTracer *T, EmSym *ctx, EmSym **exit_fn, EmSym **entered) {
    return ctx->kind == SYM_CTX ? torch_before_with(T, ctx, exit_fn, entered)
                                : generic_before_with(T, ctx, exit_fn, entered);
}

int em_ctx_is_generic_exit(const EmSym *exit_fn) { return exit_fn->items.data[0]->kind != SYM_CTX; }

EmStatus em_ctx_exit_call(EmTracer *T, EmSym *exit_fn, EmSym **args, int nargs, EmSym **out) {
    EmSym *ctx = exit_fn->items.data[0];
    if (em_ctx_is_generic_exit(exit_fn)) return em_call(T, exit_fn->items.data[1], NULL, args, nargs, NULL, out);
    if (nargs != 3 || ctx->ctx_state != EM_CTX_ENTERED || !T->ctx_open.len ||
        T->ctx_open.data[T->ctx_open.len - 1] != ctx)
        return em_trace_fail(T, EMA_CALL, "__exit__ of a context manager out of order");
    int none = 1, raised = args[1]->kind == SYM_CONST && PyExceptionInstance_Check(args[1]->obj) &&
                           args[2]->kind == SYM_TB; /* h_with_except_start's: torch's contexts let it pass */
    for (int i = 0; i < 3; i++) none &= args[i]->kind == SYM_CONST && args[i]->obj == Py_None;
    if (!none && !raised) return em_trace_fail(T, EMA_CALL, "__exit__ with these arguments");
    int grad = T->grad;
    EmStatus st = record_exit(T, ctx, &grad);
    if (st != EM_OK) return st;
    T->ctx_open.len--;
    ctx->ctx_state = EM_CTX_EXITED;
    int g = helper_grad("ctx_exit", ctx->obj);
    if (g < 0 || refresh_autocast(T)) return EM_ERR;
    T->grad = g;
    *out = em_sym_const(T, Py_None);
    return *out ? EM_OK : EM_ERR;
}

EmStatus em_ctx_close_all(EmTracer *T) {
    if (T->grad_set_in_with) /* re-entering the open blocks would not restore that state */
        return em_trace_fail(T, EMA_VALUE,
                             "a break after set_grad_enabled() or a warnings filter call inside a with block");
    for (int32_t i = 0; i < T->ctx_open.len; i++)
        if (T->ctx_open.data[i]->unbreakable) return em_trace_fail(T, EMA_VALUE, "a break inside a vmap level");
    int grad = T->grad;
    for (int32_t i = T->ctx_open.len - 1; i >= 0; i--) {
        EmStatus st = record_exit(T, T->ctx_open.data[i], &grad);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

void em_ctx_unwind(EmTracer *T) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (int32_t i = T->ctx_open.len - 1; i >= 0; i--) {
        EmSym *c = T->ctx_open.data[i];
        if (helper_grad("ctx_exit", c->obj) < 0) PyErr_Clear(); /* unwinding: the saved exception is the one told */
    }
    PyObject *r = PyObject_CallOneArg(em_state.set_grad_enabled, T->start_grad ? Py_True : Py_False);
    if (!r) PyErr_Clear(); /* unwinding: the saved exception is the one told */
    Py_XDECREF(r);
    PyErr_Restore(et, ev, tb);
}

int em_ctx_is_grad_exit(PyObject *f) {
    if (!PyMethod_Check(f)) return 0;
    PyObject *self = PyMethod_GET_SELF(f), *grad_ctx = PyObject_GetAttrString(em_state.meta_run, "GRAD_CTX");
    int is = 0;
    if (!grad_ctx) {
        PyErr_Clear(); /* ember._rules always has it: nothing to tell, and no grad exit either */
        return 0;
    }
    for (Py_ssize_t i = 0; PyTuple_Check(grad_ctx) && i < PyTuple_GET_SIZE(grad_ctx); i++)
        if ((PyObject *)Py_TYPE(self) == PyTuple_GET_ITEM(grad_ctx, i)) is = 1;
    Py_DECREF(grad_ctx);
    if (!is) return 0;
    PyObject *ex = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "__exit__");
    if (!ex) PyErr_Clear(); /* torch's own context type: a failed lookup is "not its __exit__" */
    is = ex == PyMethod_GET_FUNCTION(f);
    Py_XDECREF(ex);
    return is;
}

/* Reads attribute `name` of slot base as a new guarded slot; -1 on error. */
static int32_t attr_slot(EmTracer *T, int32_t base, const char *name) {
    PyObject *n = PyUnicode_InternFromString(name);
    int32_t s = n ? em_guard_attr(T->P, base, n) : -1;
    Py_XDECREF(n);
    return s;
}

EmStatus em_ctx_exit_input(EmTracer *T, EmSym *fn, EmSym **args, int nargs, EmSym **out) {
    /* the __exit__ of a grad-mode context entered before this frame (a resume function's
     * argument): it sets grad mode to the context's `prev`, which is guarded */
    PyObject *f = fn->obj, *self = PyMethod_GET_SELF(f);
    if (nargs != 3) return em_trace_fail(T, EMA_CALL, "__exit__ with %d arguments", nargs);
    for (int i = 0; i < 3; i++)
        if (args[i]->kind != SYM_CONST || args[i]->obj != Py_None)
            return em_trace_fail(T, EMA_CALL, "__exit__ with an exception");
    PyObject *prev = PyObject_GetAttrString(self, "prev");
    if (!prev) {
        return em_trace_abandon(T, EMA_CALL, "__exit__ of a context without `prev`");
    }
    int g = PyObject_IsTrue(prev);
    int32_t s_self = attr_slot(T, fn->src, "__self__"), s_func = attr_slot(T, fn->src, "__func__");
    int32_t s_prev = s_self < 0 ? -1 : attr_slot(T, s_self, "prev");
    int bad = g < 0 || s_func < 0 || s_prev < 0 ||
              em_guard_check(T->P, EMG_TYPE, s_self, (PyObject *)Py_TYPE(self), 0) ||
              em_guard_check(T->P, EMG_ID, s_func, PyMethod_GET_FUNCTION(f), 0) ||
              em_guard_check(T->P, EMG_EQ, s_prev, prev, 0);
    Py_DECREF(prev);
    if (bad || record_grad(T, g) != EM_OK) return EM_ERR;
    PyObject *r = PyObject_CallOneArg(em_state.set_grad_enabled, g ? Py_True : Py_False);
    if (!r) return EM_ERR;
    Py_DECREF(r);
    T->grad = g;
    *out = em_sym_const(T, Py_None);
    return *out ? EM_OK : EM_ERR;
}

EmStatus em_ctx_set_grad(EmTracer *T, int g) {
    if (record_grad(T, g) != EM_OK) return EM_ERR;
    PyObject *r = PyObject_CallOneArg(em_state.set_grad_enabled, g ? Py_True : Py_False);
    if (!r) return EM_ERR;
    Py_DECREF(r);
    T->grad = g;
    return EM_OK;
}

EmStatus em_known_set_grad(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)fn;
    (void)self;
    if (n != 1 || kwnames) return CALL_NEXT;
    if (all[0]->kind != SYM_CONST || !PyBool_Check(all[0]->obj))
        return em_trace_fail(T, EMA_VALUE, "torch._C._set_grad_enabled of a %s", em_sym_describe(all[0]));
    int g = all[0]->obj == Py_True;
    PyObject *r = PyObject_CallOneArg(em_state.set_grad_enabled, all[0]->obj);
    if (!r) return EM_ERR;
    Py_DECREF(r);
    if (g != T->grad && T->ctx_open.len) T->grad_set_in_with = 1;
    T->grad = g;
    if (record_grad(T, g) != EM_OK) return EM_ERR; /* also when unchanged: the program's call, as written */
    *out = em_sym_const(T, Py_None);
    return *out ? EM_OK : EM_ERR;
}

/* ctx(fn): a context object made while tracing and not yet entered, used as a decorator
 * (@torch.no_grad()): a partial of _rules.ctx_decorated(spec, fn), which calls fn inside a fresh
 * context made like it, as torch's decorator wrapper does. */
static EmStatus ctx_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    EmSym *f = self ? self : nargs == 1 ? args[0] : NULL;
    if (kwnames || nargs != !self || !f || (fn->ctx_state != EM_CTX_MADE && fn->ctx_state != EM_CTX_IN_EFFECT) ||
        f->kind != SYM_OBJ || !PyCallable_Check(f->obj))
        return em_trace_fail(T, EMA_CALL, "a context manager called (only as a decorator of a function)");
    if (fn->ctx_state == EM_CTX_IN_EFFECT) { /* set_grad_enabled's __call__ puts grad mode back first */
        PyObject *r = PyObject_CallOneArg(em_state.set_grad_enabled, fn->prev_grad ? Py_True : Py_False);
        if (!r) return EM_ERR;
        Py_DECREF(r);
        if (T->ctx_open.len) T->grad_set_in_with = 1;
        T->grad = fn->prev_grad;
        fn->ctx_state = EM_CTX_MADE;
        if (record_grad(T, T->grad) != EM_OK) return EM_ERR;
    }
    PyObject *helper = PyObject_GetAttrString(em_state.meta_run, "ctx_decorated");
    EmSym *h = helper ? em_sym_new(T, SYM_OBJ) : NULL, *spec = h ? em_sym_const(T, fn->spec) : NULL;
    EmSym *p = spec ? em_sym_new(T, SYM_PARTIAL) : NULL;
    if (h) {
        h->obj = Py_NewRef(helper);
        h->by_id = 1;
    }
    Py_XDECREF(helper);
    if (!p || em_vec_push(&p->items, h) || em_vec_push(&p->items, spec) || em_vec_push(&p->items, f))
        return p ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    p->pos = 2;
    *out = p;
    return EM_OK;
}

const EmSymOps em_ctx_ops = {.call = ctx_call};
