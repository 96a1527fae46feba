/* em_inline.c: inlining. A call of a Python function is traced in place: its arguments are
 * bound to a fresh set of symbolic locals, the interpreter runs its bytecode over the same
 * graph and guards, and its return value replaces the call. nn.Module calls inline forward
 * (after checking the module has no hooks); module containers iterate and index through
 * their _modules dict, with guards on what was read.
 */
#include "em_rec.h"

#include "../pyver/em_state.h"

static int kw_index(PyCodeObject *co, PyObject *name, int lo, int hi) {
    for (int i = lo; i < hi; i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(co->co_localsplusnames, i), name, Py_EQ);
        if (eq) return eq < 0 ? -2 : i;
    }
    return -1;
}

/* The guard slot of fn.__defaults__ (kw 0) or fn.__kwdefaults__ (kw 1): under fn's own slot
 * when the trace read fn from one, else under fn as a constant (owned). -1 on error. */
static int32_t defaults_slot(EmTracer *T, PyFunctionObject *fn, int kw) {
    EmSym *fs = em_sym_seen(T, (PyObject *)fn);
    if (!fs && PyErr_Occurred()) return -1;
    int32_t base = fs && fs->src >= 0 ? fs->src : em_guard_const_owned(T->P, (PyObject *)fn, "function");
    return base < 0 ? -1 : em_guard_attr(T->P, base, kw ? EM_STR(dunder_kwdefaults) : EM_STR(dunder_defaults));
}

/* The sym of the default value v of fn's parameter (positional default d, or keyword-only
 * `name`): an immutable value a constant; a container or tensor read through the slot
 * fn.__defaults__[d] (fn.__kwdefaults__[name]) as any value of the frame, its contents guarded
 * and its changes replayed (`def f(x, memo=[])`); any other object (a sentinel such as
 * dataclasses' _HAS_DEFAULT_FACTORY, a function, a class) by identity, its state read through
 * guards. NULL with *st set. */
static EmSym *default_sym(EmTracer *T, PyFunctionObject *fn, PyObject *v, Py_ssize_t d, PyObject *name, EmStatus *st) {
    EmSym *s = NULL;
    if (PyLong_Check(v) || PyFloat_Check(v) || v == Py_None || PyBool_Check(v) || PyUnicode_Check(v) ||
        PyTuple_Check(v))
        s = em_sym_const(T, v);
    else if (em_guard_default_by_slot(v)) {
        int32_t ds = defaults_slot(T, fn, name != NULL);
        int32_t slot = ds < 0 ? -1 : name ? em_guard_dict(T->P, ds, name) : em_guard_item(T->P, ds, d, 0);
        return slot < 0 ? (*st = EM_ERR, NULL) : em_sym_wrap(T, v, slot, st);
    } else s = em_sym_known(T, v, "default");
    if (!s) *st = EM_ERR;
    return s;
}

/* Arguments that do not bind to fn's parameters (what names the first problem): the TypeError
 * CPython raises for them, raised in the trace (_rules.call_arity_error binds them to a stub of
 * fn's signature); where that finds none, the trace fails. */
static EmStatus arity_fail(EmTracer *T, PyFunctionObject *fn, int nargs, PyObject *kwnames, const char *what) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *e = PyObject_CallMethod(em_state.meta_run, "call_arity_error", "OnO", (PyObject *)fn, nargs - nkw,
                                      kwnames ? kwnames : Py_None);
    if (!e) return EM_ERR;
    EmStatus st = e != Py_None ? em_trace_raise(T, e, "raises %s", Py_TYPE(e)->tp_name)
                               : em_trace_fail(T, EMA_INLINE, "%s (%s)",
                                               PyUnicode_AsUTF8(((PyCodeObject *)fn->func_code)->co_qualname), what);
    Py_DECREF(e);
    return st;
}

/* Binds call arguments to the parameters of `fn` (Python's rules for positional, keyword,
 * default, *args and **kwargs parameters); def_syms: the positional defaults of a function made
 * while tracing (fn holds placeholders), else NULL. Returns EM_OK with locals filled. */
static EmStatus bind_args(EmTracer *T, PyFunctionObject *fn, EmSym **def_syms, EmSym **args, int nargs,
                          PyObject *kwnames, EmSym **locals) {
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    int npos_params = co->co_argcount, nkwonly = co->co_kwonlyargcount;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int has_var = !!(co->co_flags & CO_VARARGS), has_kw = !!(co->co_flags & CO_VARKEYWORDS);
    int var_at = npos_params + nkwonly, kw_at = var_at + has_var;
    EmSym *varargs = NULL, *varkw = NULL;
    if (has_var && !(varargs = em_sym_new(T, SYM_TUPLE))) return EM_ERR;
    if (has_kw && !(varkw = em_sym_new(T, SYM_DICT))) return EM_ERR;
    for (int i = 0; i < npos; i++) {
        if (i < npos_params) locals[i] = args[i];
        else if (varargs) {
            if (em_vec_push(&varargs->items, args[i])) return PyErr_NoMemory(), EM_ERR;
        } else return arity_fail(T, fn, nargs, kwnames, "too many positional arguments");
    }
    for (int k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int at = kw_index(co, name, co->co_posonlyargcount, npos_params + nkwonly);
        if (at == -2) return EM_ERR;
        if (at >= 0) {
            if (locals[at]) return arity_fail(T, fn, nargs, kwnames, "argument given twice");
            locals[at] = args[npos + k];
        } else if (varkw) {
            if (em_vec_push(&varkw->keys, Py_NewRef(name)) || em_vec_push(&varkw->items, args[npos + k]))
                return PyErr_NoMemory(), EM_ERR;
        } else {
            return arity_fail(T, fn, nargs, kwnames, "unexpected keyword");
        }
    }
    PyObject *defs = fn->func_defaults;
    int ndefs = defs ? (int)PyTuple_GET_SIZE(defs) : 0;
    for (int i = 0; i < npos_params; i++) {
        if (locals[i]) continue;
        int d = i - (npos_params - ndefs);
        if (d < 0) return arity_fail(T, fn, nargs, kwnames, "missing argument");
        EmStatus st = EM_OK;
        if (!(locals[i] = def_syms ? def_syms[d] : default_sym(T, fn, PyTuple_GET_ITEM(defs, d), d, NULL, &st)))
            return st;
    }
    for (int i = npos_params; i < npos_params + nkwonly; i++) {
        if (locals[i]) continue;
        PyObject *v = fn->func_kwdefaults
                          ? PyDict_GetItemWithError(fn->func_kwdefaults, PyTuple_GET_ITEM(co->co_localsplusnames, i))
                          : NULL;
        if (!v) return PyErr_Occurred() ? EM_ERR : arity_fail(T, fn, nargs, kwnames, "missing keyword argument");
        EmStatus st = EM_OK;
        if (!(locals[i] = default_sym(T, fn, v, 0, PyTuple_GET_ITEM(co->co_localsplusnames, i), &st))) return st;
    }
    if (varargs) locals[var_at] = varargs;
    if (varkw) locals[kw_at] = varkw;
    return EM_OK;
}

/* The __name__ of a call node's callable, for the checks below: 1 set (*u, borrowed from *nm, which
 * the caller releases), 0 where it cannot be read. */
static int call_name(const EmGraph *G, const EmNode *n, PyObject **nm, const char **u) {
    PyObject *f = (PyObject *)G->consts.data[n->fn].obj;
    *nm = PyObject_GetAttrString(f, "__name__");
    *u = *nm && PyUnicode_Check(*nm) ? PyUnicode_AsUTF8(*nm) : NULL;
    if (!*u) PyErr_Clear();
    return *u != NULL;
}

/* Whether node n changes a tensor in place (an in-place op, a call with out=). */
static int node_mutates(const EmGraph *G, const EmNode *n) {
    if (em_op_info[n->op].flags & EMF_MUTATES) return 1;
    if (n->op != EMOP_CALL) return 0;
    PyObject *nm;
    const char *u;
    int named = call_name(G, n, &nm, &u);
    size_t len = named ? strlen(u) : 0;
    int inplace = !named || (len > 1 && u[len - 1] == '_' && u[0] != '_'); /* unnamed: counts as mutating */
    Py_XDECREF(nm);
    if (inplace) return 1;
    if (n->nkw) {
        PyObject *kw = (PyObject *)G->consts.data[n->kwnames].obj;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kw); i++)
            if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kw, i), "out") == 0) return 1;
    }
    return 0;
}

int em_graph_mutated(EmGraph *G, int32_t from) {
    for (int32_t r = from; r < G->nodes.len; r++)
        if (node_mutates(G, &G->nodes.data[r])) return 1;
    return 0;
}

/* An in-place op that changes only metadata and checks its tensor before changing it
 * (x.detach_() of a view raises, changing nothing): when it raises, nothing changed. */
static int metadata_checked(const EmGraph *G, const EmNode *n) {
    static const char *const names[] = {"detach_",   "requires_grad_", "t_",         "transpose_",  "swapdims_",
                                        "swapaxes_", "squeeze_",       "unsqueeze_", "as_strided_", NULL};
    PyObject *nm;
    const char *u;
    int hit = 0;
    if (n->op != EMOP_CALL) return 0;
    if (call_name(G, n, &nm, &u))
        for (int i = 0; names[i] && !hit; i++) hit = !strcmp(u, names[i]);
    Py_XDECREF(nm);
    return hit;
}

/* 1 when running call node n changes nothing outside its result (ember._rules.rerun_safe of its
 * callable, memoized for torch's), 0 when it may, -1 on error. */
static int call_rerun_safe(EmTracer *T, const EmNode *n) {
    PyObject *f = (PyObject *)T->G->consts.data[n->fn].obj;
    if (T->state_ops && f == em_state.set_grad_enabled) return 1; /* a failure restores grad mode */
    PyObject *ok = em_state.rerun_memo ? PyDict_GetItemWithError(em_state.rerun_memo, f) : NULL; /* borrowed */
    if (ok) return PyObject_IsTrue(ok);
    PyErr_Clear(); /* unhashable: asked each time */
    if (!(ok = PyObject_CallOneArg(em_state.rerun_safe, f))) return -1;
    int t = PyObject_IsTrue(ok);
    /* torch's callables, which live as long as the program (a user's may not) */
    if (t == 1 && em_state.rerun_memo && PyDict_GET_SIZE(em_state.rerun_memo) < 4096 &&
        PyDict_SetItem(em_state.rerun_memo, f, ok))
        PyErr_Clear();
    Py_DECREF(ok);
    return t;
}

int em_trace_rerun_limit(EmTracer *T, int32_t *limit, int *meta) {
    EmGraph *G = T->G;
    *meta = 1; /* none changes anything: a failure anywhere (a Python backend's, reported as the node count) */
    *limit = (T->state_ops & EM_STATE_OTHER) ? -1 : G->nodes.len;
    for (int32_t r = 0; *limit >= 0 && r < G->nodes.len; r++) {
        const EmNode *n = &G->nodes.data[r];
        int t = node_mutates(G, n) ? 0 : n->op != EMOP_CALL ? 1 : call_rerun_safe(T, n);
        if (t < 0) return -1;
        if (!t) {
            *limit = r;
            *meta = metadata_checked(G, n);
            break;
        }
    }
    return PyErr_Occurred() ? -1 : 0;
}

EmStatus em_inline(EmTracer *T, PyObject *func, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    return em_inline_closure(T, func, NULL, args, nargs, kwnames, out);
}

/* The free variables of fn among locals[n - nfree, n): the values a function made while
 * tracing holds (closure's items), else lazy reads of fn's cells (em_local_get). */
static EmStatus bind_free_vars(EmTracer *T, PyFunctionObject *fn, EmSym *closure, EmSym **locals, int n, int nfree) {
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    if (closure && closure->items.len - closure->pos != nfree)
        return em_trace_fail(T, EMA_INLINE, "%s (closure size)", PyUnicode_AsUTF8(co->co_qualname));
    /* a nested function from a slot (guarded by code: each call's own) has its cells read
     * from that function's __closure__; another function's cells are constants */
    EmSym *fs = closure || !fn->func_closure ? NULL : em_sym_seen(T, (PyObject *)fn);
    int32_t clo = -1;
    if (!fs && PyErr_Occurred()) return EM_ERR;
    if (fs && fs->kind == SYM_OBJ && fs->by_id == 2 && fs->src >= 0 &&
        (clo = em_guard_attr(T->P, fs->src, EM_STR(dunder_closure))) < 0)
        return EM_ERR;
    for (int i = n - nfree; i < n; i++) {
        int k = i - (n - nfree);
        if (closure) {
            locals[i] = closure->items.data[k];
            continue;
        }
        PyObject *cell = fn->func_closure ? PyTuple_GET_ITEM(fn->func_closure, k) : NULL;
        if (!cell) continue;
        if (!(locals[i] = em_prog_cell(T, cell))) return EM_ERR;
        PyObject *lab = clo >= 0 ? NULL : PyUnicode_FromFormat("cell[%U.%U]", co->co_qualname, em_code_name(co, i));
        const char *labu = lab ? PyUnicode_AsUTF8(lab) : NULL;
        int32_t via = clo >= 0 ? em_guard_item(T->P, clo, k, 0) : labu ? em_guard_const(T->P, cell, labu) : -1;
        Py_XDECREF(lab);
        if (via < 0 || em_prog_cell_slot(T, locals[i], em_code_name(co, i), via) < 0) return EM_ERR;
    }
    return EM_OK;
}

/* The guard slots of fn's globals and builtins in the frame being entered (caller: the state
 * it was called from): the caller's when the dicts are the same, -1 (the intercepted
 * frame's inputs) for that frame's globals, else constant slots. EM_OK or EM_ERR. */
static EmStatus frame_globals(EmTracer *T, PyFunctionObject *fn, const EmFrame *caller) {
    T->gslot = caller->gslot;
    T->bslot = caller->bslot;
    if (fn->func_globals == caller->globals && caller->gslot < 0) return EM_OK;
    if (fn->func_globals == T->in.globals) {
        T->gslot = T->bslot = -1;
        return EM_OK;
    }
    PyObject *mod = PyDict_GetItemString(fn->func_globals, "__name__");
    const char *mn = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : "?";
    char label[200];
    snprintf(label, sizeof(label), "G(%s)", mn ? mn : "?");
    T->gslot = em_guard_const(T->P, fn->func_globals, label);
    T->bslot = em_guard_const(T->P, fn->func_builtins, "builtins");
    return T->gslot < 0 || T->bslot < 0 ? EM_ERR : EM_OK;
}

/* The arguments of a call as a tuple sym (positional args tuple, keyword args dict), for a
 * generator it makes (em_gen_call). NULL on error. */
static EmSym *gen_call(EmTracer *T, EmSym **args, int nargs, PyObject *kwnames) {
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    EmSym *call = em_sym_new(T, SYM_TUPLE), *pos = em_sym_new(T, SYM_TUPLE), *kw = em_sym_new(T, SYM_DICT);
    if (!call || !pos || !kw) return NULL;
    int bad = em_vec_push(&call->items, pos) || em_vec_push(&call->items, kw);
    for (int i = 0; !bad && i < npos; i++) bad = em_vec_push(&pos->items, args[i]);
    for (int i = 0; !bad && i < nkw; i++)
        bad = em_vec_push(&kw->items, args[npos + i]) ||
              em_vec_push(&kw->keys, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
    return bad ? (PyErr_NoMemory(), NULL) : call;
}

/* The repr function a reprlib.recursive_repr wrapper fn (or dataclasses') wraps, borrowed; NULL
 * (no exception) for other functions. A recursive repr then recurses until the trace's depth
 * limit, which aborts: the call runs as Python. */
static PyObject *repr_guarded(PyFunctionObject *fn) {
    static PyObject *codes; /* ember._rules.REPR_GUARD_CODES, owned for the process */
    if (!codes && !(codes = PyObject_GetAttrString(em_state.meta_run, "REPR_GUARD_CODES"))) return PyErr_Clear(), NULL;
    int hit = 0;
    for (Py_ssize_t i = 0; PyTuple_Check(codes) && i < PyTuple_GET_SIZE(codes); i++)
        hit |= PyTuple_GET_ITEM(codes, i) == fn->func_code;
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    int nfree = em_code_nfree(co), first = em_code_nlocalsplus(co) - nfree;
    for (int k = 0; hit && fn->func_closure && k < nfree; k++)
        if (!PyUnicode_CompareWithASCIIString(em_code_name(co, first + k), "user_function")) {
            PyObject *f = PyCell_GET(PyTuple_GET_ITEM(fn->func_closure, k));
            return f && PyFunction_Check(f) ? f : NULL;
        }
    return NULL;
}

EmStatus em_inline_closure(EmTracer *T, PyObject *func, EmSym *closure, EmSym **args, int nargs, PyObject *kwnames,
                           EmSym **out) {
    PyFunctionObject *fn = (PyFunctionObject *)func;
    PyObject *wrapped = closure ? NULL : repr_guarded(fn);
    EmSym *fs = wrapped ? em_sym_seen(T, func) : NULL; /* one guarded by code only: its cells are not constants */
    if (wrapped && !(fs && fs->kind == SYM_OBJ && fs->by_id == 2))
        return em_inline_closure(T, wrapped, NULL, args, nargs, kwnames, out);
    if (PyErr_Occurred()) return EM_ERR;
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    if (T->depth >= EM_MAX_DEPTH)
        return em_trace_fail(T, EMA_INLINE, "%s (inlining too deep)", PyUnicode_AsUTF8(co->co_qualname));
    /* a generator (expression or function): a lazy iterator that runs this frame when an item is
     * taken (em_lazy.c) */
    int is_gen = !!(co->co_flags & CO_GENERATOR);
    if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE))
        return em_trace_fail(T, EMA_INLINE, "%s (coroutine)", PyUnicode_AsUTF8(co->co_qualname));
    int n = em_code_nlocalsplus(co), nfree = em_code_nfree(co);
    EmSym **locals = calloc((size_t)n + 1, sizeof(EmSym *));
    EmSym **stack = calloc((size_t)co->co_stacksize + 8, sizeof(EmSym *));
    PyObject *bytes = em_code_bytes(co);
    EmStatus st = EM_ERR;
    if (!locals || !stack || !bytes) {
        if (!bytes && !PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    EmSym **def_syms = closure && closure->pos ? closure->items.data + closure->items.len - closure->pos : NULL;
    if ((st = bind_args(T, fn, def_syms, args, nargs, kwnames, locals)) != EM_OK ||
        (st = bind_free_vars(T, fn, closure, locals, n, nfree)) != EM_OK)
        goto done;
    const EmFrame saved = T->frame;
    T->frame = (EmFrame){.code = co,
                         .code_bytes = bytes,
                         .bytes = (const unsigned char *)PyBytes_AS_STRING(bytes),
                         .n_units = (int)(PyBytes_GET_SIZE(bytes) / 2),
                         .locals = locals,
                         .nlocals = n,
                         .stack = stack,
                         .stack_cap = co->co_stacksize + 8,
                         .globals = fn->func_globals,
                         .builtins = fn->func_builtins,
                         .parent = &saved};
    if ((st = frame_globals(T, fn, &saved)) != EM_OK) {
        T->frame = saved;
        goto done;
    }
    int eh = PyBytes_GET_SIZE(co->co_exceptiontable) > 0;
    if (is_gen) {
        const EmFrame gen = T->frame;
        T->frame = saved;
        EmSym *call = gen_call(T, args, nargs, kwnames);
        st = call ? em_gen_make(T, &gen, eh, func, closure, call, out) : EM_ERR; /* takes locals, stack, bytes */
        if (!call) {
            free(gen.locals);
            free(gen.stack);
            Py_XDECREF(gen.code_bytes);
        }
        locals = NULL;
        stack = NULL;
        bytes = NULL;
        goto done;
    }
    T->handlers += eh;
    T->depth++;
    st = em_trace_loop(T);
    T->depth--;
    T->handlers -= eh;
    EmSym *ret = T->retval;
    T->frame = saved;
    if (st == EM_OK) *out = ret;
done:
    free(locals);
    free(stack);
    Py_XDECREF(bytes);
    return st;
}

/* ---- nn.Module ---- */

static int is_container_iter(PyObject *tp_iter, const char **kind) {
    /* torch.nn containers iterate their _modules (values; ModuleDict: keys); ParameterList its
     * _parameters ("params": stored under "0", "1"... in order) */
    if (!tp_iter || !PyFunction_Check(tp_iter)) return 0;
    PyObject *q = ((PyFunctionObject *)tp_iter)->func_qualname;
    PyObject *m = ((PyFunctionObject *)tp_iter)->func_module;
    if (!m || !PyUnicode_Check(m) || PyUnicode_CompareWithASCIIString(m, "torch.nn.modules.container")) return 0;
    const char *qs = PyUnicode_AsUTF8(q);
    if (!qs) return 0;
    if (!strcmp(qs, "ModuleDict.__iter__")) *kind = "keys";
    else if (!strcmp(qs, "Sequential.__iter__") || !strcmp(qs, "ModuleList.__iter__")) *kind = "values";
    else if (!strcmp(qs, "ParameterList.__iter__")) *kind = "params";
    else return 0;
    return 1;
}

/* One level of nn.Module storage: the dict attribute `attr` (_modules, _parameters, _buffers)
 * of a module sym and its slot, with a KEYS guard (its keys in order: walks and iteration
 * follow that order; each key is then loaded by name). NULL, with or without an exception, if absent. */
static PyObject *module_storage(EmTracer *T, EmSym *mod, const char *attr, int32_t *slot) {
    PyObject *md = em_obj_dict(mod->obj);
    PyObject *d = md ? PyDict_GetItemString(md, attr) : NULL;
    if (!d || !PyDict_Check(d)) return NULL;
    if (em_sym_mutated_of(T, d)) return NULL; /* changed in this trace: the walk would read the old */
    PyObject *name = PyUnicode_InternFromString(attr);
    if (!name) return NULL;
    *slot = em_guard_odict(T->P, mod->src, name);
    Py_DECREF(name);
    if (*slot < 0 || em_guard_check_keys(T->P, *slot, d)) return NULL;
    return d;
}

EmStatus em_module_items(EmTracer *T, EmSym *mod, int want_keys, EmSym **out) {
    const char *kind = NULL;
    PyObject *iname = PyUnicode_InternFromString("__iter__");
    if (!iname) return EM_ERR;
    PyObject *tp_iter = _PyType_Lookup(Py_TYPE(mod->obj), iname);
    Py_DECREF(iname);
    if (mod->src < 0 || !is_container_iter(tp_iter, &kind))
        return em_trace_fail(T, EMA_VALUE, "iteration over %s", Py_TYPE(mod->obj)->tp_name);
    if (em_guard_check(T->P, EMG_TYPE, mod->src, (PyObject *)Py_TYPE(mod->obj), 0)) return EM_ERR;
    int32_t mslot;
    int params = !strcmp(kind, "params");
    PyObject *d = module_storage(T, mod, params ? "_parameters" : "_modules", &mslot);
    if (!d)
        return PyErr_Occurred()
                   ? EM_ERR
                   : em_trace_fail(T, EMA_VALUE, "module without its storage, or storage changed in this trace");
    EmSym *s = em_sym_new(T, SYM_TUPLE);
    if (!s) return EM_ERR;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int keys = want_keys || !strcmp(kind, "keys");
    PyObject *len = params ? PyObject_GetAttrString(mod->obj, "_size") : NULL;
    if (params && (!len || !PyLong_CheckExact(len) || PyLong_AsSsize_t(len) != PyDict_GET_SIZE(d) || keys)) {
        Py_XDECREF(len); /* holding other than parameters (plain tensors are attributes): not modelled */
        PyErr_Clear();
        return em_trace_fail(T, EMA_VALUE, "iteration over a ParameterList holding other than parameters");
    }
    if (params) { /* its length guarded too: an item that is no parameter would not change _parameters */
        PyObject *nm = PyUnicode_InternFromString("_size");
        int32_t ls = nm ? em_guard_attr(T->P, mod->src, nm) : -1;
        Py_XDECREF(nm);
        if (ls < 0 || em_guard_check(T->P, EMG_EQ, ls, len, 0)) {
            Py_DECREF(len);
            return EM_ERR;
        }
    }
    Py_XDECREF(len);
    for (Py_ssize_t i = 0; params && PyDict_Next(d, &pos, &k, &v); i++) { /* keys "0", "1"... in order */
        PyObject *want = PyUnicode_FromFormat("%zd", i);
        int eq = want ? PyUnicode_Compare(k, want) : -1;
        Py_XDECREF(want);
        if (eq) return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "a ParameterList out of order");
    }
    pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        EmSym *it;
        if (keys) {
            it = em_sym_const(T, k);
        } else {
            EmStatus st;
            int32_t slot = em_guard_dict(T->P, mslot, k);
            it = slot < 0 ? NULL : em_sym_wrap(T, v, slot, &st);
            if (!it) return slot < 0 ? EM_ERR : st;
        }
        if (!it || em_vec_push(&s->items, it)) return EM_ERR;
    }
    *out = s;
    return EM_OK;
}

typedef struct {
    EmVec(EmSym *) syms;      /* members in order */
    EmVec(PyObject *) names;  /* owned, parallel */
    EmVec(PyObject *) seen;   /* borrowed objects, for identity dedup */
    EmVec(int32_t) seen_slot; /* parallel: the slot each was first read through */
} EmWalk;

static void walk_free(EmWalk *w) {
    for (int32_t i = 0; i < w->names.len; i++) Py_DECREF(w->names.data[i]);
    em_vec_free(&w->syms);
    em_vec_free(&w->names);
    em_vec_free(&w->seen);
    em_vec_free(&w->seen_slot);
}

/* 1 when obj was met before (its slot then guarded to be that same object), 0 when new
 * (remembered), -1 on error. */
static int walk_seen(EmTracer *T, EmWalk *w, PyObject *obj, int32_t slot) {
    for (int32_t i = 0; i < w->seen.len; i++)
        if (w->seen.data[i] == obj) return em_guard_check(T->P, EMG_SAME, slot, NULL, w->seen_slot.data[i]) ? -1 : 1;
    if (em_vec_push(&w->seen, obj) || em_vec_push(&w->seen_slot, slot)) return PyErr_NoMemory(), -1;
    return 0;
}

static PyObject *join_name(PyObject *prefix, PyObject *name) {
    return PyUnicode_GET_LENGTH(prefix) ? PyUnicode_FromFormat("%U.%U", prefix, name) : Py_NewRef(name);
}

/* The trace's own storage dict `attr` of mod: its copy where the trace changed a frame module's
 * (self.act = m in forward), the dict sym of a module made in the trace; NULL (no error set)
 * where the real one, guarded, answers. */
static EmSym *traced_storage(EmTracer *T, EmSym *mod, const char *attr) {
    if (mod->kind == SYM_NEW) {
        EmSym *attrs = mod->items.len ? mod->items.data[0] : NULL;
        PyObject *name = attrs && attrs->kind == SYM_DICT ? PyUnicode_FromString(attr) : NULL;
        int i = name ? em_dict_find(attrs, name) : -1;
        Py_XDECREF(name);
        if (i == -2) PyErr_Clear();
        return i >= 0 && attrs->items.data[i]->kind == SYM_DICT ? attrs->items.data[i] : NULL;
    }
    PyObject *md = em_obj_dict(mod->obj), *cur = md ? PyDict_GetItemString(md, attr) : NULL;
    EmSym *changed = cur && PyDict_Check(cur) ? em_sym_mutated_of(T, cur) : NULL;
    return changed && changed->kind == SYM_DICT ? changed : NULL;
}

static EmStatus walk_modules(EmTracer *T, EmSym *mod, PyObject *prefix, EmWalk *w, int depth);

/* walk_modules over the children in a traced _modules dict c (traced_storage). */
static EmStatus walk_traced_modules(EmTracer *T, EmSym *c, PyObject *prefix, EmWalk *w, int depth) {
    for (int32_t i = 0; i < c->keys.len; i++) {
        PyObject *k = c->keys.data[i];
        EmSym *m = c->items.data[i];
        if (m->kind == SYM_CONST && m->obj == Py_None) continue;
        if (!PyUnicode_Check(k)) return em_trace_fail(T, EMA_VALUE, "a submodule with a non-str name");
        if ((m->kind != SYM_OBJ && m->kind != SYM_NEW) || !em_is_module(m->obj))
            return em_trace_fail(T, EMA_VALUE, "a submodule that is not a module object");
        PyObject *sub = join_name(prefix, k);
        EmStatus st = sub ? walk_modules(T, m, sub, w, depth + 1) : EM_ERR;
        Py_XDECREF(sub);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* named_modules() from mod: pre-order, each module once (by identity), None children skipped. */
static EmStatus walk_modules(EmTracer *T, EmSym *mod, PyObject *prefix, EmWalk *w, int depth) {
    if (depth > 64) return em_trace_fail(T, EMA_VALUE, "module tree deeper than 64");
    int r = 0;
    if (mod->kind == SYM_NEW) { /* made in the trace: once by its sym */
        for (int32_t i = 0; i < w->syms.len && !r; i++) r = w->syms.data[i] == mod;
    } else if (mod->src < 0) {
        return em_trace_fail(T, EMA_VALUE, "members of a module not read from the frame");
    } else if (em_guard_check(T->P, EMG_TYPE, mod->src, (PyObject *)Py_TYPE(mod->obj), 0)) {
        return EM_ERR;
    } else {
        r = walk_seen(T, w, mod->obj, mod->src);
    }
    if (r) return r < 0 ? EM_ERR : EM_OK;
    if (em_vec_push(&w->syms, mod)) return PyErr_NoMemory(), EM_ERR;
    if (em_vec_push(&w->names, Py_NewRef(prefix))) {
        Py_DECREF(prefix);
        w->syms.len--;
        return PyErr_NoMemory(), EM_ERR;
    }
    EmSym *traced = traced_storage(T, mod, "_modules");
    if (traced) return walk_traced_modules(T, traced, prefix, w, depth);
    if (mod->kind == SYM_NEW) return em_trace_fail(T, EMA_VALUE, "a module made while tracing without _modules");
    int32_t mslot;
    PyObject *d = module_storage(T, mod, "_modules", &mslot);
    if (!d)
        return PyErr_Occurred()
                   ? EM_ERR
                   : em_trace_fail(T, EMA_VALUE, "module without _modules, or _modules changed in this trace");
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        EmStatus st;
        int32_t slot = em_guard_dict(T->P, mslot, k);
        if (slot < 0) return EM_ERR;
        if (v == Py_None) {
            if (em_guard_check(T->P, EMG_ID, slot, Py_None, 0)) return EM_ERR;
            continue;
        }
        if (!PyUnicode_Check(k)) return em_trace_fail(T, EMA_VALUE, "a submodule with a non-str name");
        EmSym *m = em_sym_wrap(T, v, slot, &st);
        if (!m) return st;
        if (m->kind != SYM_OBJ) return em_trace_fail(T, EMA_VALUE, "a submodule that is not a module object");
        PyObject *sub = join_name(prefix, k);
        if (!sub) return EM_ERR;
        st = walk_modules(T, m, sub, w, depth + 1);
        Py_DECREF(sub);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* Appends member m named prefix.k to w; 0, or -1 with an exception. */
static int walk_add(EmWalk *w, EmSym *m, PyObject *prefix, PyObject *k) {
    PyObject *nm = join_name(prefix, k);
    if (!nm) return -1;
    if (em_vec_push(&w->syms, m)) {
        Py_DECREF(nm);
        return PyErr_NoMemory(), -1;
    }
    if (em_vec_push(&w->names, nm)) {
        Py_DECREF(nm);
        w->syms.len--;
        return PyErr_NoMemory(), -1;
    }
    return 0;
}

/* walk_storage over a traced storage dict c (traced_storage: self.buf = t in forward, a module
 * made in the trace): its entries as they are now, each object once (one read from the frame by identity,
 * guarded; one made in the trace by its sym). */
static EmStatus walk_changed_storage(EmTracer *T, EmSym *c, const char *attr, PyObject *prefix, EmWalk *w) {
    for (int32_t i = 0; i < c->keys.len; i++) {
        PyObject *k = c->keys.data[i];
        EmSym *v = c->items.data[i];
        if (v->kind == SYM_CONST && v->obj == Py_None) continue;
        if (!PyUnicode_Check(k)) return em_trace_fail(T, EMA_VALUE, "a %s entry with a non-str name", attr);
        if (v->kind != SYM_TENSOR) return em_trace_fail(T, EMA_VALUE, "a %s entry %s", attr, em_sym_describe(v));
        int dup = 0;
        for (int32_t j = 0; j < w->syms.len && !dup; j++) dup = w->syms.data[j] == v;
        PyObject *real = v->src >= 0 ? v->spec : NULL; /* a tensor read from the frame: itself */
        if (!dup && v->src >= 0 && !real) return em_trace_fail(T, EMA_VALUE, "a %s entry not known as an object", attr);
        int r = dup || !real ? 0 : walk_seen(T, w, real, v->src);
        if (r < 0) return EM_ERR;
        if (dup || r) continue;
        if (walk_add(w, v, prefix, k)) return EM_ERR;
    }
    return EM_OK;
}

/* Appends the entries of mod's storage dict `attr` to w as nn.Module's _named_members does:
 * None entries skipped (guarded None), each object once (walk_seen), named prefix.key. */
static EmStatus walk_storage(EmTracer *T, EmSym *mod, const char *attr, PyObject *prefix, EmWalk *w) {
    int32_t dslot;
    EmSym *traced = traced_storage(T, mod, attr);
    if (traced) return walk_changed_storage(T, traced, attr, prefix, w);
    if (mod->kind == SYM_NEW) return em_trace_fail(T, EMA_VALUE, "a module made while tracing without %s", attr);
    PyObject *d = module_storage(T, mod, attr, &dslot);
    if (!d)
        return PyErr_Occurred()
                   ? EM_ERR
                   : em_trace_fail(T, EMA_VALUE, "module without %s, or %s changed in this trace", attr, attr);
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        int32_t slot = em_guard_dict(T->P, dslot, k);
        if (slot < 0) return EM_ERR;
        if (v == Py_None) {
            if (em_guard_check(T->P, EMG_ID, slot, Py_None, 0)) return EM_ERR;
            continue;
        }
        if (!PyUnicode_Check(k)) return em_trace_fail(T, EMA_VALUE, "a %s entry with a non-str name", attr);
        EmStatus st;
        EmSym *m = em_sym_wrap(T, v, slot, &st);
        if (!m) return st;
        int r = walk_seen(T, w, v, slot);
        if (r) {
            if (r < 0) return EM_ERR;
            continue;
        }
        if (walk_add(w, m, prefix, k)) return EM_ERR;
    }
    return EM_OK;
}

EmStatus em_module_members(EmTracer *T, EmSym *mod, EmModuleWalk what, int named, EmSym **out) {
    EmWalk mods = {0}, mem = {0};
    PyObject *empty = PyUnicode_FromString("");
    if (!empty) return EM_ERR;
    EmStatus st;
    if (what == EM_WALK_CHILDREN) {
        if (mod->src < 0) st = em_trace_fail(T, EMA_VALUE, "children of a module made while tracing");
        else if (em_guard_check(T->P, EMG_TYPE, mod->src, (PyObject *)Py_TYPE(mod->obj), 0)) st = EM_ERR;
        else st = walk_storage(T, mod, "_modules", empty, &mem);
    } else {
        st = walk_modules(T, mod, empty, &mods, 0);
        const char *attr = what == EM_WALK_PARAMETERS ? "_parameters" : "_buffers";
        for (int32_t i = 0; st == EM_OK && what != EM_WALK_MODULES && i < mods.syms.len; i++)
            st = walk_storage(T, mods.syms.data[i], attr, mods.names.data[i], &mem);
    }
    EmWalk *got = what == EM_WALK_MODULES ? &mods : &mem;
    EmSym *s = st == EM_OK ? em_sym_new(T, SYM_ITER) : NULL;
    if (st == EM_OK && !s) st = EM_ERR;
    if (s) /* a generator in Python, whose body only reads: made again over the items left when it
            * outlives the trace (gen stays 0) */
        s->seq_type = Py_NewRef((PyObject *)&PyGen_Type);
    for (int32_t i = 0; s && st == EM_OK && i < got->syms.len; i++) {
        EmSym *it = got->syms.data[i];
        if (named) {
            EmSym *name = em_sym_const(T, got->names.data[i]);
            if (!name || !(it = em_sym_new(T, SYM_TUPLE)) || em_vec_push(&it->items, name) ||
                em_vec_push(&it->items, got->syms.data[i]))
                st = PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
        }
        if (st == EM_OK && em_vec_push(&s->items, it)) st = (PyErr_NoMemory(), EM_ERR);
    }
    if (st == EM_OK) *out = s;
    walk_free(&mods);
    walk_free(&mem);
    Py_DECREF(empty);
    return st;
}

/* torch.nn.modules.module's global hooks (register_module_forward_hook and the like) run on
 * every module call: inlining a call assumes there are none, guarded (each dict empty). */
static EmStatus no_global_hooks(EmTracer *T) {
    static const char *const names[] = {"_global_forward_pre_hooks", "_global_forward_hooks",
                                        "_global_backward_pre_hooks", "_global_backward_hooks"};
    static PyObject *dicts[4]; /* owned for the process; set together, once all are found */
    if (!dicts[0]) {
        PyObject *mm = PyImport_ImportModule("torch.nn.modules.module");
        if (!mm) return EM_ERR;
        PyObject *md = PyModule_GetDict(mm), *found[4];
        for (int i = 0; i < 4; i++) {
            found[i] = PyDict_GetItemString(md, names[i]);
            if (!found[i] || !PyDict_Check(found[i])) {
                Py_DECREF(mm);
                return em_trace_fail(T, EMA_INLINE, "torch.nn.modules.module.%s is not a dict", names[i]);
            }
        }
        for (int i = 0; i < 4; i++) dicts[i] = Py_NewRef(found[i]);
        Py_DECREF(mm);
    }
    for (int i = 0; i < 4; i++) {
        if (PyDict_GET_SIZE(dicts[i]))
            return em_trace_fail(T, EMA_INLINE, "a module call with global hooks (%s)", names[i]);
        int32_t slot = em_guard_const(T->P, dicts[i], names[i]);
        if (slot < 0 || em_guard_check(T->P, EMG_LEN, slot, NULL, 0)) return EM_ERR;
    }
    return EM_OK;
}

/* nn.Module.__call__ (the function nn.Module's class dict holds). Borrowed. */
PyObject *em_module_base_call(void) {
    return _PyType_Lookup((PyTypeObject *)em_state.nn_module_type, EM_STR(dunder_call));
}

EmStatus em_inline_module(EmTracer *T, EmSym *mod, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    PyTypeObject *tp = Py_TYPE(mod->obj);
    if (mod->kind != SYM_NEW && mod->src < 0) return em_trace_fail(T, EMA_INLINE, "%s made while tracing", tp->tp_name);
    PyObject *call = _PyType_Lookup(tp, EM_STR(dunder_call)), *base_call = em_module_base_call();
    if (call == base_call) return em_module_call_impl(T, mod, args, nargs, kwnames, out);
    /* a class's own __call__ (written in Python) runs as written, the type guarded; its
     * super().__call__(...) comes back to em_module_call_impl through em_call */
    if (!call || !PyFunction_Check(call))
        return em_trace_fail(T, EMA_INLINE, "%s.__call__ (not a Python function)", tp->tp_name);
    if (mod->kind != SYM_NEW && em_guard_check(T->P, EMG_TYPE, mod->src, (PyObject *)tp, 0)) return EM_ERR;
    EmSym *all[65];
    if (nargs + 1 > 65) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
    all[0] = mod;
    for (int i = 0; i < nargs; i++) all[i + 1] = args[i];
    return em_inline(T, call, all, nargs + 1, kwnames, out);
}

/* The module's hook dicts (md: its __dict__), each guarded by its keys: forward pre-hooks and
 * forward hooks into hdict/hslot when there are any, as _call_impl calls them, and the dicts
 * marking those that take the keyword arguments into hdict[2], hdict[3] (pre, post); the
 * other kinds must be absent. */
static EmStatus module_hooks(EmTracer *T, EmSym *mod, PyObject *md, PyObject *hdict[4], int32_t hslot[2]) {
    static const char *const hooks[] = {"_forward_pre_hooks",
                                        "_forward_hooks",
                                        "_backward_hooks",
                                        "_backward_pre_hooks",
                                        "_forward_pre_hooks_with_kwargs",
                                        "_forward_hooks_with_kwargs",
                                        "_forward_hooks_always_called",
                                        NULL};
    static PyObject *names_of[1 << 7]; /* per set of the dicts present: their names (owned) */
    PyTypeObject *tp = Py_TYPE(mod->obj);
    int present = 0, empty = 1;
    for (int i = 0; hooks[i]; i++) {
        PyObject *h = PyDict_GetItemString(md, hooks[i]);
        if (h) present |= 1 << i;
        if (h && (!PyDict_Check(h) || PyDict_GET_SIZE(h))) empty = 0;
    }
    if (empty) { /* none (the common case): one check of them all */
        if (!names_of[present]) {
            PyObject *names = PyTuple_New(__builtin_popcount((unsigned)present));
            for (int i = 0, k = 0; names && hooks[i]; i++) {
                if (!(present & (1 << i))) continue;
                PyObject *nm = PyUnicode_InternFromString(hooks[i]);
                if (!nm) Py_CLEAR(names);
                else PyTuple_SET_ITEM(names, k++, nm);
            }
            if (!names) return EM_ERR;
            names_of[present] = names;
        }
        return em_guard_check_no_hooks(T->P, mod->src, names_of[present]) ? EM_ERR : EM_OK;
    }
    for (int i = 0; hooks[i]; i++) {
        PyObject *h = PyDict_GetItemString(md, hooks[i]);
        if (!h) continue;
        int kw_marks = i == 4 || i == 5;
        if (!PyDict_Check(h) || (i >= 2 && !kw_marks && PyDict_GET_SIZE(h)))
            return em_trace_fail(T, EMA_INLINE, "%s has %s", tp->tp_name, hooks[i]);
        PyObject *name = PyUnicode_InternFromString(hooks[i]);
        int32_t slot = name ? em_guard_odict(T->P, mod->src, name) : -1;
        Py_XDECREF(name);
        if (slot < 0 || em_guard_check_keys(T->P, slot, h)) return EM_ERR; /* hooks run in key order */
        if (i < 2 && PyDict_GET_SIZE(h)) {
            hdict[i] = h;
            hslot[i] = slot;
        }
        if (kw_marks && PyDict_GET_SIZE(h)) hdict[i - 2] = h;
    }
    return EM_OK;
}

/* self.forward as _call_impl reads it: the instance's own (*own_fwd, guarded by identity) or
 * the class's (*fwd, a Python function, or a staticmethod's: *fwd its function, called without
 * self; the instance's guarded absent). */
static EmStatus module_forward(EmTracer *T, EmSym *mod, PyObject *md, PyObject **fwd, EmSym **own_fwd) {
    PyTypeObject *tp = Py_TYPE(mod->obj);
    PyObject *fwd_name = PyUnicode_InternFromString("forward");
    if (!fwd_name) return EM_ERR;
    PyObject *own = PyDict_GetItemWithError(md, fwd_name);
    EmStatus st = EM_OK;
    *fwd = _PyType_Lookup(tp, fwd_name);
    *own_fwd = NULL;
    if (own) {
        int32_t oslot = em_guard_odict(T->P, mod->src, fwd_name);
        *own_fwd = oslot < 0 ? NULL : em_sym_wrap(T, own, oslot, &st);
        if (!*own_fwd && oslot < 0) st = EM_ERR;
    } else if (PyErr_Occurred() || em_guard_check(T->P, EMG_ABSENT, mod->src, fwd_name, 0)) {
        st = EM_ERR;
    }
    Py_DECREF(fwd_name);
    if (st == EM_OK && !*own_fwd && *fwd && Py_IS_TYPE(*fwd, &PyStaticMethod_Type)) {
        PyObject *fn = PyObject_GetAttrString(*fwd, "__func__"); /* held by the staticmethod */
        Py_XDECREF(fn);
        if (fn && PyFunction_Check(fn)) {
            *fwd = fn;
            *own_fwd = NULL;
            return CALL_NEXT; /* a static forward */
        }
        PyErr_Clear();
    }
    if (st == EM_OK && !*own_fwd && (!*fwd || !PyFunction_Check(*fwd)))
        return em_trace_fail(T, EMA_INLINE, "%s.forward (not a Python function)", tp->tp_name);
    return st;
}

/* A pre-hook's (args, kwargs) result into *pos and *kw (a tuple and a dict of str keys). */
static EmStatus hook_args_kwargs(EmTracer *T, EmSym *r, EmSym **pos, EmSym **kw) {
    if (r->kind != SYM_TUPLE || r->seq_type || r->items.len != 2)
        return em_trace_fail(T, EMA_CALL, "a forward pre-hook with kwargs returned no (args, kwargs) pair");
    EmSym *a = r->items.data[0], *k = r->items.data[1];
    if (a->kind != SYM_TUPLE || k->kind != SYM_DICT || k->seq_type)
        return em_trace_fail(T, EMA_CALL, "a forward pre-hook's (args, kwargs) of other types");
    for (int32_t i = 0; i < k->keys.len; i++)
        if (!PyUnicode_CheckExact(k->keys.data[i]))
            return em_trace_fail(T, EMA_CALL, "a forward pre-hook's kwargs with a key that is not a str");
    *pos = a;
    *kw = k;
    return EM_OK;
}

/* One hook (key hk of dict h, guarded through slot hslot) called as hook(mod, *pos) (post:
 * hook(mod, *pos, *out)), or, when hk is in with_kw, hook(mod, *pos, *kw) (post: hook(mod,
 * *pos, *kw, *out)); a pre-hook's non-None result replaces the positional arguments *pos (a
 * single value becomes the only one) or, with kw, both; a post-hook's the output. */
static EmStatus run_hook(EmTracer *T, EmSym *mod, PyObject *h, PyObject *hk, int32_t hslot, PyObject *with_kw, int post,
                         EmSym **pos, EmSym **kw, EmSym **out) {
    EmStatus st = EM_ERR;
    PyObject *hv = PyDict_GetItemWithError(h, hk);
    int32_t slot = hv ? em_guard_dict(T->P, hslot, hk) : -1;
    EmSym *hook = slot < 0 ? NULL : em_sym_wrap(T, hv, slot, &st);
    if (!hook) return hv || PyErr_Occurred() ? st : em_trace_fail(T, EMA_INLINE, "a hook removed while tracing");
    int takes_kw = with_kw ? PyDict_Contains(with_kw, hk) : 0;
    if (takes_kw < 0) return EM_ERR;
    EmSym *ca[4] = {mod, *pos, takes_kw ? *kw : (post ? *out : NULL), post && takes_kw ? *out : NULL}, *r = NULL;
    if ((st = em_call(T, hook, NULL, ca, 2 + takes_kw + post, NULL, &r)) != EM_OK) return st;
    if (r->kind == SYM_CONST && r->obj == Py_None) return EM_OK;
    if (post) {
        *out = r;
        return EM_OK;
    }
    if (takes_kw) return hook_args_kwargs(T, r, pos, kw);
    if (r->kind != SYM_TUPLE) {
        EmSym *t = em_sym_new(T, SYM_TUPLE);
        if (!t || em_vec_push(&t->items, r)) return t ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
        r = t;
    }
    *pos = r;
    return EM_OK;
}

/* Each hook of dict h in its order (an OrderedDict's own: register_*_hook(prepend=True) moves a
 * hook to the front), by run_hook. */
static EmStatus run_hooks(EmTracer *T, EmSym *mod, PyObject *h, int32_t hslot, PyObject *with_kw, int post, EmSym **pos,
                          EmSym **kw, EmSym **out) {
    PyObject *order = em_dict_keys_ordered(h);
    EmStatus st = order ? EM_OK : EM_ERR;
    for (Py_ssize_t i = 0; st == EM_OK && i < PyTuple_GET_SIZE(order); i++)
        st = run_hook(T, mod, h, PyTuple_GET_ITEM(order, i), hslot, with_kw, post, pos, kw, out);
    Py_XDECREF(order);
    return st;
}

/* The hooks' view of a call's arguments: *pos a tuple of the positional ones, *kw a dict of
 * the keyword ones. */
static EmStatus hook_view(EmTracer *T, EmSym **args, int nargs, PyObject *kwnames, EmSym **pos, EmSym **kw) {
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (!(*pos = em_sym_new(T, SYM_TUPLE)) || !(*kw = em_sym_new(T, SYM_DICT))) return EM_ERR;
    for (int i = 0; i < npos; i++)
        if (em_vec_push(&(*pos)->items, args[i])) return PyErr_NoMemory(), EM_ERR;
    for (int i = 0; i < nkw; i++) {
        PyObject *k = Py_NewRef(PyTuple_GET_ITEM(kwnames, i));
        if (em_vec_push(&(*kw)->keys, k)) return Py_DECREF(k), PyErr_NoMemory(), EM_ERR;
        if (em_vec_push(&(*kw)->items, args[npos + i])) return PyErr_NoMemory(), EM_ERR;
    }
    return EM_OK;
}

/* _call_impl of a module made while tracing (its attributes in items[0]): its hook dicts
 * (made by Module.__init__ in the trace) must be empty; forward is its own or its class's. */
static EmStatus new_module_call(EmTracer *T, EmSym *mod, EmSym **all, int nargs, PyObject *kwnames, EmSym **out) {
    static const char *const hooks[] = {"_forward_pre_hooks",
                                        "_forward_hooks",
                                        "_backward_hooks",
                                        "_backward_pre_hooks",
                                        "_forward_hooks_always_called",
                                        NULL};
    PyTypeObject *tp = Py_TYPE(mod->obj);
    EmSym *attrs = mod->items.data[0];
    for (int i = 0; hooks[i]; i++) {
        PyObject *name = PyUnicode_FromString(hooks[i]);
        int at = name ? em_dict_find(attrs, name) : -2;
        Py_XDECREF(name);
        if (at == -2) return EM_ERR;
        EmSym *h = at >= 0 ? attrs->items.data[at] : NULL;
        if (h && (h->kind != SYM_DICT || h->items.len))
            return em_trace_fail(T, EMA_INLINE, "a %s made while tracing with %s", tp->tp_name, hooks[i]);
    }
    int at = em_dict_find(attrs, EM_STR(forward));
    if (at == -2) return EM_ERR;
    if (at >= 0) return em_call(T, attrs->items.data[at], NULL, all + 1, nargs, kwnames, out);
    PyObject *f = _PyType_Lookup(tp, EM_STR(forward));
    if (!f || !PyFunction_Check(f))
        return em_trace_fail(T, EMA_INLINE, "%s.forward (not a Python function)", tp->tp_name);
    return em_inline(T, f, all, nargs + 1, kwnames, out);
}

/* A lazy module of the frame (torch.nn LazyModuleMixin) not initialized yet: its parameters
 * inferred now, as its forward pre-hook would on this first call (module._infer_parameters
 * given the arguments' meta values: their tensors' meta tensors; the parameters are made and
 * initialized for real, and the module becomes its cls_to_become), so that the call is traced
 * as that of the module it then is. */
static EmStatus lazy_init(EmTracer *T, EmSym *mod, PyObject *md, EmSym **args, int nargs, PyObject *kwnames) {
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *pos = PyTuple_New(nargs - nkw), *kw = PyDict_New(), *r = NULL;
    EmStatus st = pos && kw ? EM_OK : EM_ERR;
    for (int i = 0; st == EM_OK && i < nargs; i++) {
        PyObject *v = em_meta_value(T, args[i]);
        if (!v) {
            st = PyErr_Occurred() ? EM_ERR : EM_ABORT;
            break;
        }
        if (i < nargs - nkw) {
            PyTuple_SET_ITEM(pos, i, v);
            continue;
        }
        if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), v)) st = EM_ERR;
        Py_DECREF(v);
    }
    if (st == EM_OK && !(r = PyObject_CallMethod(mod->obj, "_infer_parameters", "OOO", mod->obj, pos, kw)))
        st = em_trace_abandon(T, EMA_INLINE, "%s: inferring its parameters raised", Py_TYPE(mod->obj)->tp_name);
    if (r) T->retrace = 1; /* it changed: the guards made before may not hold (once it failed: no retrace) */
    if (st == EM_OK && PyDict_GetItemWithError(md, EM_STR(initialize_hook)))
        st = em_trace_fail(T, EMA_INLINE, "%s still lazy after inferring its parameters", Py_TYPE(mod->obj)->tp_name);
    Py_XDECREF(r);
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    return st == EM_OK && PyErr_Occurred() ? EM_ERR : st;
}

EmStatus em_module_call_impl(EmTracer *T, EmSym *mod, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    PyTypeObject *tp = Py_TYPE(mod->obj);
    if (mod->kind != SYM_NEW && mod->src < 0) return em_trace_fail(T, EMA_INLINE, "%s made while tracing", tp->tp_name);
    EmStatus st = no_global_hooks(T);
    if (st != EM_OK) return st;
    if (mod->kind == SYM_NEW) {
        EmSym *all[65];
        if (nargs + 1 > 65) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
        all[0] = mod;
        for (int i = 0; i < nargs; i++) all[i + 1] = args[i];
        return new_module_call(T, mod, all, nargs, kwnames, out);
    }
    PyObject *md = em_obj_dict(mod->obj);
    if (!md) return em_trace_fail(T, EMA_INLINE, "%s without __dict__", tp->tp_name);
    if (PyDict_GetItemWithError(md, EM_STR(initialize_hook))) {
        if ((st = lazy_init(T, mod, md, args, nargs, kwnames)) != EM_OK) return st;
        tp = Py_TYPE(mod->obj);
    } else if (PyErr_Occurred()) return EM_ERR;
    if (em_guard_check(T->P, EMG_TYPE, mod->src, (PyObject *)tp, 0)) return EM_ERR;
    PyObject *hdict[4] = {NULL, NULL, NULL, NULL}, *fwd;
    int32_t hslot[2] = {-1, -1};
    EmSym *own_fwd;
    int is_static = 0;
    if ((st = module_hooks(T, mod, md, hdict, hslot)) != EM_OK) return st;
    if ((st = module_forward(T, mod, md, &fwd, &own_fwd)) == CALL_NEXT) is_static = 1, st = EM_OK;
    if (st != EM_OK) return st;
    EmSym *all[65];
    if (nargs + 1 > 65) return em_trace_fail(T, EMA_CALL, "call with too many arguments");
    all[0] = mod;
    for (int i = 0; i < nargs; i++) all[i + 1] = args[i];
    EmSym *pos = NULL, *kw = NULL; /* the arguments as the hooks see them */
    PyObject *names = Py_XNewRef(kwnames);
    if ((hdict[0] || hdict[1]) && (st = hook_view(T, args, nargs, kwnames, &pos, &kw)) != EM_OK) goto done;
    if (hdict[0] && (st = run_hooks(T, mod, hdict[0], hslot[0], hdict[2], 0, &pos, &kw, NULL)) != EM_OK) goto done;
    if (pos) { /* forward(*args, **kwargs) as the pre-hooks left them */
        if (pos->items.len + kw->items.len + 1 > 65) {
            st = em_trace_fail(T, EMA_CALL, "call with too many arguments");
            goto done;
        }
        Py_CLEAR(names);
        if (kw->items.len && !(names = PyTuple_New(kw->items.len))) {
            st = EM_ERR;
            goto done;
        }
        for (int32_t i = 0; i < pos->items.len; i++) all[i + 1] = pos->items.data[i];
        for (int32_t i = 0; i < kw->items.len; i++) {
            all[pos->items.len + 1 + i] = kw->items.data[i];
            PyTuple_SET_ITEM(names, i, Py_NewRef(kw->keys.data[i]));
        }
        nargs = pos->items.len + kw->items.len;
    }
    st = own_fwd     ? em_call(T, own_fwd, NULL, all + 1, nargs, names, out)
         : is_static ? em_inline(T, fwd, all + 1, nargs, names, out)
                     : em_inline(T, fwd, all, nargs + 1, names, out);
    if (st == EM_OK && hdict[1]) st = run_hooks(T, mod, hdict[1], hslot[1], hdict[3], 1, &pos, &kw, out);
done:
    Py_XDECREF(names);
    return st;
}

EmStatus em_super_noargs(EmTracer *T, EmSym **out) {
    PyCodeObject *co = T->code;
    int n = em_code_nlocalsplus(co), cls_at = -1;
    for (int i = 0; i < n; i++) {
        if (!(em_code_kind(co, i) & EM_CO_FAST_FREE)) continue;
        if (PyUnicode_CompareWithASCIIString(em_code_name(co, i), "__class__") == 0) cls_at = i;
    }
    if (cls_at < 0 || (co->co_argcount + co->co_kwonlyargcount < 1 && !(co->co_flags & CO_VARARGS)))
        return em_trace_fail(T, EMA_CALL, "super() without a __class__ cell or an argument");
    EmStatus st = EM_OK;
    EmSym *cls = em_local_value(T, cls_at, &st);
    if (!cls) return st;
    EmSym *obj = em_local_value(T, 0, &st);
    if (!obj) return st;
    return em_super(T, cls, obj, out);
}
