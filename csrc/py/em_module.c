/* em_module.c: ember._C. Module init, the module state, the compiled-callable wrapper type
 * (CompiledFunction: sets this thread's hook flags around a call) and the functions the
 * Python package uses: setup, config, backend registry, reset, counters, cache inspection.
 */
#include "../cache/em_cache.h"
#include "../driver/em_driver.h"
#include "../emit/em_emit.h"
#include "../guard/em_guard.h"
#include "../hook/em_hook.h"
#include "../ir/em_ir.h"
#include "../pyver/em_pyver.h"
#include "../pyver/em_state.h"
#include "structmember.h"

EmState em_state;

/* ---- CompiledFunction ---- */

typedef struct {
    PyObject_HEAD PyObject *fn;
    PyObject *dict;
    int flags;
    vectorcallfunc vectorcall;
} CompiledFunction;

static PyObject *cf_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    CompiledFunction *c = (CompiledFunction *)self;
    if ((c->flags & EMH_ITERATION) && !(em_hook_flags() & EMH_ENABLED) && em_state.new_iteration) {
        /* a top-level call of a function compiled for CUDA graphs starts a new iteration */
        PyObject *r = PyObject_CallNoArgs(em_state.new_iteration);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    return em_hook_call(c->flags, c->fn, args, nargsf, kwnames);
}

static PyObject *cf_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    PyObject *fn;
    int flags;
    static char *kwlist[] = {"fn", "flags", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi", kwlist, &fn, &flags)) return NULL;
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "expected a callable, got %R", fn);
    CompiledFunction *c = (CompiledFunction *)tp->tp_alloc(tp, 0);
    if (!c) return NULL;
    c->fn = Py_NewRef(fn);
    c->flags = flags;
    c->vectorcall = cf_vectorcall;
    return (PyObject *)c;
}

static int cf_traverse(CompiledFunction *c, visitproc visit, void *arg) {
    Py_VISIT(c->fn);
    Py_VISIT(c->dict);
    return 0;
}

static int cf_clear(CompiledFunction *c) {
    Py_CLEAR(c->fn);
    Py_CLEAR(c->dict);
    return 0;
}

static void cf_dealloc(CompiledFunction *c) {
    PyObject_GC_UnTrack(c);
    cf_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyObject *cf_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMemberDef cf_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(CompiledFunction, fn), READONLY, "the original callable"},
    {"_ember_flags", T_INT, offsetof(CompiledFunction, flags), READONLY, "hook flags while it runs"},
    {"__dictoffset__", T_PYSSIZET, offsetof(CompiledFunction, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CompiledFunction, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef cf_getset[] = {{"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
                                  {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject CompiledFunctionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._C.CompiledFunction",
    .tp_basicsize = sizeof(CompiledFunction),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A callable that runs its wrapped callable with ember's frame hook flags set.",
    .tp_new = cf_new,
    .tp_dealloc = (destructor)cf_dealloc,
    .tp_traverse = (traverseproc)cf_traverse,
    .tp_clear = (inquiry)cf_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(CompiledFunction, vectorcall),
    .tp_descr_get = cf_descr_get,
    .tp_dictoffset = offsetof(CompiledFunction, dict),
    .tp_members = cf_members,
    .tp_getset = cf_getset,
};

/* ---- module functions ---- */

/* The object of each row of trace/em_known.def, in row order (a new tuple), or NULL with an
 * exception. A row's path is "module:qualname" (pkgutil.resolve_name); the tracer finds rows
 * by identity, so resolving a path twice must give the same object. */
static EM_NEW PyObject *known_resolve(void) {
    static const char *const paths[] = {
#define X(name, path, handler) path,
#include "../trace/em_known.def"
#undef X
    };
    Py_ssize_t n = (Py_ssize_t)(sizeof(paths) / sizeof(paths[0]));
    PyObject *pkgutil = PyImport_ImportModule("pkgutil"), *known = pkgutil ? PyTuple_New(n) : NULL;
    for (Py_ssize_t i = 0; known && i < n; i++) {
        PyObject *a = PyObject_CallMethod(pkgutil, "resolve_name", "s", paths[i]);
        PyObject *b = a ? PyObject_CallMethod(pkgutil, "resolve_name", "s", paths[i]) : NULL;
        if (b && b != a)
            PyErr_Format(PyExc_TypeError, "ember: %s (em_known.def) is made anew on each access", paths[i]);
        Py_XDECREF(b);
        if (!b || b != a) {
            Py_XDECREF(a);
            Py_CLEAR(known);
            break;
        }
        PyTuple_SET_ITEM(known, i, a);
    }
    Py_XDECREF(pkgutil);
    return known;
}

/* helper.<name>, which must be a dict (want_dict) or a set, into *slot (the reference replaces
 * the old one). 0, or -1 with an exception set. */
static int helper_table(PyObject *helper, const char *name, int want_dict, PyObject **slot) {
    PyObject *v = PyObject_GetAttrString(helper, name);
    if (!v) return -1;
    if (want_dict ? !PyDict_Check(v) : !PySet_Check(v)) {
        Py_DECREF(v);
        PyErr_Format(PyExc_TypeError, "ember: helper.%s must be a %s", name, want_dict ? "dict" : "set");
        return -1;
    }
    Py_XSETREF(*slot, v);
    return 0;
}

static PyObject *m_setup(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    PyObject *rules, *helper, *warn, *log, *skip, *pure, *nnmod, *ops, *grad, *autocast, *ddtype;
    int force_fallback = 0;
    static char *kwlist[] = {"rules",         "helper",         "warn",   "log",  "skip_file",
                             "pure_types",    "nn_module",      "op_fns", "grad", "autocast",
                             "default_dtype", "force_fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OOOOO!OO!OOO|p", kwlist, &PyDict_Type, &rules, &helper, &warn, &log,
                                     &skip, &PyTuple_Type, &pure, &nnmod, &PyDict_Type, &ops, &grad, &autocast, &ddtype,
                                     &force_fallback))
        return NULL;
    PyObject *fns = PyTuple_New(EMOP__COUNT);
    if (!fns) return NULL;
    for (int i = 0; i < EMOP__COUNT; i++) {
        PyObject *f = PyDict_GetItemString(ops, em_op_info[i].name);
        PyTuple_SET_ITEM(fns, i, Py_NewRef(f ? f : Py_None));
    }
    Py_XSETREF(em_state.op_fns, fns);
    if (helper_table(helper, "POINTWISE", 0, &em_state.pointwise_fns) ||
        helper_table(helper, "SHAPE_RULES", 1, &em_state.shape_rules) ||
        helper_table(helper, "SYM_RULES", 1, &em_state.sym_rules) ||
        helper_table(helper, "TYPE_QUERIES", 0, &em_state.type_query_fns) ||
        helper_table(helper, "SIZE_FREE", 0, &em_state.size_free_fns) ||
        helper_table(helper, "STATE_QUERIES", 0, &em_state.state_query_fns) ||
        helper_table(helper, "TRACE_AS", 1, &em_state.trace_as))
        return NULL;
    PyObject *dc = PyObject_GetAttrString(helper, "DISABLE_WRAPPER_CODE");
    if (!dc) return NULL;
    Py_XSETREF(em_state.disable_code, dc);
    if (!(dc = PyObject_GetAttrString(helper, "DISABLE_ONCE_CODE"))) return NULL;
    Py_XSETREF(em_state.disable_once_code, dc);
    Py_XSETREF(em_state.object_getattribute,
               PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__getattribute__"));
    if (!em_state.object_getattribute) return NULL;
    static const char *names[] = {"set_grad_enabled", "enter_ctx",  "exit_ctx",          "reenter",
                                  "grad_restorer",    "environ",    "warnings_off",      "warnings_on",
                                  "set_data",         "rerun_safe", "DataDependentError"};
    PyObject **slots[] = {&em_state.set_grad_enabled, &em_state.ctx_enter_fn,  &em_state.ctx_exit_fn,
                          &em_state.ctx_reenter_fn,   &em_state.grad_restorer, &em_state.os_environ,
                          &em_state.warnings_off,     &em_state.warnings_on,   &em_state.set_data,
                          &em_state.rerun_safe,       &em_state.data_dependent};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        PyObject *f = PyObject_GetAttrString(helper, names[i]);
        if (!f) return NULL;
        Py_XSETREF(*slots[i], f);
    }
    PyObject *known = known_resolve();
    if (!known) return NULL;
    Py_XSETREF(em_state.known, known);
    Py_XSETREF(em_state.rules, Py_NewRef(rules));
    if (!em_state.rerun_memo && !(em_state.rerun_memo = PyDict_New())) return NULL;
    Py_XSETREF(em_state.meta_run, Py_NewRef(helper));
    Py_XSETREF(em_state.warn, Py_NewRef(warn));
    Py_XSETREF(em_state.log, Py_NewRef(log));
    Py_XSETREF(em_state.skip_file, Py_NewRef(skip));
    Py_XSETREF(em_state.pure_types, Py_NewRef(pure));
    Py_XSETREF(em_state.nn_module_type, Py_NewRef(nnmod));
    if (em_guard_global_state_set_fns(grad, autocast, ddtype)) return NULL;
    int p = em_guard_tensor_probe(force_fallback);
    if (p < 0) return NULL;
    return PyBool_FromLong(p == 0);
}

static PyObject *m_gs_resolve(PyObject *self, PyObject *args) {
    (void)self;
    const char *a, *b;
    if (!PyArg_ParseTuple(args, "ss", &a, &b)) return NULL;
    return PyBool_FromLong(em_guard_global_state_resolve(a, b) == 0);
}

static PyObject *m_gs_read(PyObject *self, PyObject *direct) {
    (void)self;
    EmGlobalState gs;
    int r = PyObject_IsTrue(direct) ? em_guard_global_state_read_direct(&gs) : em_guard_global_state_capture(&gs);
    if (r) return NULL;
    return Py_BuildValue("(iiii)", gs.grad, gs.autocast_cpu, gs.autocast_cuda, gs.dtype);
}

static PyObject *m_rg_direct(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyBool_FromLong(em_state.tensor_rg && em_state.probe_ok);
}

static PyObject *m_gs_use_direct(PyObject *self, PyObject *on) {
    (void)self;
    em_guard_global_state_use_direct(PyObject_IsTrue(on));
    return PyBool_FromLong(em_state.gs_direct);
}

/* Appends a Python backend object (it needs a `name`) to the registry; returns its number,
 * which compiled callables carry in their flags (from FLAG_BACKEND_SHIFT up). */
static PyObject *m_register_backend(PyObject *self, PyObject *backend) {
    (void)self;
    if (!PyObject_HasAttrString(backend, "name")) return PyErr_Format(PyExc_TypeError, "a backend needs a name");
    Py_ssize_t n = PyList_GET_SIZE(em_state.backends);
    if (n >= (INT_MAX >> EMH_BACKEND_SHIFT)) return PyErr_Format(PyExc_OverflowError, "ember: too many backends");
    if (PyList_Append(em_state.backends, backend) < 0) return NULL;
    return PyLong_FromSsize_t(n);
}

static PyObject *m_backends(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyList_GetSlice(em_state.backends, 0, PyList_GET_SIZE(em_state.backends));
}

static PyObject *m_set_new_iteration(PyObject *self, PyObject *fn) {
    (void)self;
    Py_XSETREF(em_state.new_iteration, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *m_set_backend_compiler(PyObject *self, PyObject *fn) {
    (void)self;
    if (!PyCallable_Check(fn)) return PyErr_Format(PyExc_TypeError, "expected a callable");
    Py_XSETREF(em_state.backend_compile, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyObject *m_set_config(PyObject *self, PyObject *args) {
    (void)self;
    int limit, strict, acc_limit;
    unsigned int logs;
    if (!PyArg_ParseTuple(args, "iiIi", &limit, &strict, &logs, &acc_limit)) return NULL;
    em_state.cache_size_limit = limit;
    em_state.accumulated_recompile_limit = acc_limit;
    em_state.strict = strict;
    em_state.logs = logs;
    Py_RETURN_NONE;
}

static PyObject *m_reset(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    em_cache_reset();
    Py_RETURN_NONE;
}

static PyObject *m_after_fork_child(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    em_cache_after_fork();
    if (!em_state.compile_lock) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *m_counters(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "frames", em_state.n_frames, "aborts",
                         em_state.n_aborts, "hits", em_state.n_hits, "recompiles", em_state.n_recompiles, "fallbacks",
                         em_state.n_fallbacks, "breaks", em_state.n_breaks, "graphs", em_state.n_graphs, "internal",
                         em_state.n_internal, "reruns", em_state.n_reruns);
}

static PyObject *m_reset_counters(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    em_state.n_frames = em_state.n_aborts = em_state.n_hits = em_state.n_recompiles = em_state.n_fallbacks = 0;
    em_state.n_breaks = em_state.n_graphs = em_state.n_internal = em_state.n_reruns = 0;
    Py_RETURN_NONE;
}

static PyObject *m_entries(PyObject *self, PyObject *code) {
    (void)self;
    if (!PyCode_Check(code)) return PyErr_Format(PyExc_TypeError, "expected a code object");
    return em_cache_entries((PyCodeObject *)code);
}

static PyObject *m_code_state(PyObject *self, PyObject *code) {
    (void)self;
    if (!PyCode_Check(code)) return PyErr_Format(PyExc_TypeError, "expected a code object");
    EmExtra *x = em_cache_get((PyCodeObject *)code);
    if (!x) Py_RETURN_NONE;
    static const char *modes[] = {"compile", "skip", "fallback"};
    return Py_BuildValue("{s:s,s:i,s:i,s:i,s:O,s:O}", "mode", modes[x->mode], "entries", x->n_entries, "compiles",
                         x->n_compiles, "tree_compiles", x->tree_compiles, "callees_plain",
                         x->recursive ? Py_True : Py_False, "reason", x->reason ? x->reason : Py_None);
}

static PyObject *m_hook_active(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return Py_BuildValue("{s:i,s:i}", "users", em_state.hook_users, "flags", em_hook_flags());
}

/* Decodes and reassembles a code object (tests of the assembler). */
static PyObject *m_asm_roundtrip(PyObject *self, PyObject *code) {
    (void)self;
    if (!PyCode_Check(code)) return PyErr_Format(PyExc_TypeError, "expected a code object");
    EmAsm A;
    em_asm_init(&A);
    PyObject *r = NULL;
    if (em_asm_decode(&A, (PyCodeObject *)code) == 0)
        r = em_asm_build(&A, (PyCodeObject *)code, NULL, ((PyCodeObject *)code)->co_firstlineno);
    em_asm_free(&A);
    return r;
}

/* _trace(fn, slots): traces fn's code for a call whose argument slots (in co_varnames order:
 * positional, keyword-only, then the *args tuple and the **kwargs dict) hold the items of
 * slots, with the hook off for this thread; nothing is compiled or installed. Returns
 * em_driver_trace's dict. */
static PyObject *m_trace(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *fn, *slots;
    if (!PyArg_ParseTuple(args, "O!O!", &PyFunction_Type, &fn, &PyTuple_Type, &slots)) return NULL;
    PyFunctionObject *f = (PyFunctionObject *)fn;
    PyCodeObject *co = (PyCodeObject *)f->func_code;
    int nargs = co->co_argcount + co->co_kwonlyargcount + !!(co->co_flags & CO_VARARGS) +
                !!(co->co_flags & CO_VARKEYWORDS);
    if (PyTuple_GET_SIZE(slots) != nargs)
        return PyErr_Format(PyExc_TypeError, "ember: %U has %d argument slots, got %zd values", co->co_qualname, nargs,
                            PyTuple_GET_SIZE(slots));
    PyObject **localsplus = PyMem_Calloc((size_t)em_code_nlocalsplus(co) + 1, sizeof(PyObject *));
    if (!localsplus) return PyErr_NoMemory();
    for (int i = 0; i < nargs; i++) localsplus[i] = PyTuple_GET_ITEM(slots, i);
    EmFrameIn in = {localsplus, f->func_closure, f->func_globals, f->func_builtins};
    int prev = em_hook_enter(0);
    PyObject *r = em_driver_trace(co, &in);
    em_hook_exit(prev);
    PyMem_Free(localsplus);
    return r;
}

static PyObject *m_resume_codes(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyDict_Copy(em_state.resume_codes);
}

/* _storage_groups(args, skip): per item of args[skip:], the position (from skip) of the first
 * item whose storage holds the same memory on the same device (its own when none, or when not
 * a tensor); NotImplemented when a tensor's storage cannot be read directly (the caller asks
 * torch: ember/backends/fx.py _storage_groups, which this computes without Python calls). */
static PyObject *m_storage_groups(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *seq, *out = NULL;
    Py_ssize_t skip;
    if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &seq, &skip)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq) - skip;
    if (skip < 0 || n < 0 || n > INT32_MAX) return PyErr_Format(PyExc_ValueError, "ember: bad skip %zd", skip);
    int32_t *first = PyMem_Malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!first) return PyErr_NoMemory();
    int r = em_guard_storage_groups(&PyTuple_GET_ITEM(seq, skip), (int32_t)n, first);
    if (r == 0) out = Py_NewRef(Py_NotImplemented);
    else if (r > 0) out = PyTuple_New(n);
    for (Py_ssize_t i = 0; r > 0 && out && i < n; i++) {
        PyObject *g = PyLong_FromLong(first[i]);
        if (!g) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, g);
    }
    PyMem_Free(first);
    return out;
}

/* Codes ember compiled or gave up on since the last reset, in the order it first saw them. */
static PyObject *m_seen_codes(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    PyObject *out = PyList_New(0);
    PyObject *reg = em_state.code_registry;
    for (Py_ssize_t i = 0; out && reg && i < PyList_GET_SIZE(reg); i++) {
        PyObject *co = PyWeakref_GetObject(PyList_GET_ITEM(reg, i));
        if (co == Py_None) continue;
        EmExtra *x = em_cache_get((PyCodeObject *)co);
        if (x && x->mode != EMX_SKIP && PyList_Append(out, co) < 0) Py_CLEAR(out);
    }
    return out;
}

/* enter_ctx(spec): makes and enters the context of spec = (cls, args, kwargs as (name, value)
 * pairs), as a graph call, and returns it. Written in C so that no ember frame is on the stack
 * while the context is made: a warning its constructor gives (stacklevel=2, as torch.autocast
 * on a device that is not available) names the user's code, as in eager. */
static EM_NEW PyObject *ctx_make_enter(PyObject *EM_BORROWED spec) {
    PyObject *args = NULL, *kw = NULL, *obj = NULL, *r = NULL;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3)
        return PyErr_Format(PyExc_TypeError, "ember: enter_ctx expects (cls, args, kwargs pairs)");
    if (!(args = PySequence_Tuple(PyTuple_GET_ITEM(spec, 1))) || !(kw = PyDict_New())) goto error;
    if (PyDict_MergeFromSeq2(kw, PyTuple_GET_ITEM(spec, 2), 1) < 0) goto error;
    if (!(obj = PyObject_Call(PyTuple_GET_ITEM(spec, 0), args, kw))) goto error;
    if (!(r = PyObject_CallMethod(obj, "__enter__", NULL))) Py_CLEAR(obj);
error:
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(r);
    return obj;
}

static PyObject *m_enter_ctx(PyObject *self, PyObject *spec) {
    (void)self;
    return ctx_make_enter(spec);
}

/* reenter(spec): at a graph break inside a `with` block, the block's context made and entered
 * again; returns its __exit__ (the value the block keeps on the stack). */
static PyObject *m_reenter_ctx(PyObject *self, PyObject *spec) {
    (void)self;
    PyObject *obj = ctx_make_enter(spec);
    if (!obj) return NULL;
    PyObject *r = PyObject_GetAttrString(obj, "__exit__");
    Py_DECREF(obj);
    return r;
}

static PyMethodDef methods[] = {
    {"enter_ctx", m_enter_ctx, METH_O, "Graph call: make and enter the context of (cls, args, kwargs pairs)."},
    {"reenter_ctx", m_reenter_ctx, METH_O, "Make and enter the context of a spec again; returns its __exit__."},
    {"_storage_groups", m_storage_groups, METH_VARARGS,
     "(args, skip): per tensor of args[skip:], the first one sharing its memory; NotImplemented: ask torch."},
    {"_seen_codes", m_seen_codes, METH_NOARGS, "Codes compiled or run as plain Python since the last reset."},
    {"_resume_codes", m_resume_codes, METH_NOARGS, "Resume code objects generated so far (tests, debugging)."},
    {"_asm_roundtrip", m_asm_roundtrip, METH_O, "Decode and reassemble a code object (assembler tests)."},
    {"_trace", m_trace, METH_VARARGS, "(fn, argument slots): trace only; graph, guard and output dumps or the abort."},
    {"_setup", (PyCFunction)(void (*)(void))m_setup, METH_VARARGS | METH_KEYWORDS, "Hand rules and helpers to C."},
    {"_gs_resolve", m_gs_resolve, METH_VARARGS, "(libc10, libtorch_cpu): resolve direct global-state reads."},
    {"_gs_read", m_gs_read, METH_O, "(direct): (grad, autocast_cpu, autocast_cuda, dtype)."},
    {"_gs_use_direct", m_gs_use_direct, METH_O, "Switch direct global-state reads on or off."},
    {"_rg_direct", m_rg_direct, METH_NOARGS, "Whether tensor guards read requires_grad from c10 directly."},
    {"_set_config", m_set_config, METH_VARARGS, "(cache_size_limit, strict, log_bits, accumulated_recompile_limit)"},
    {"_register_backend", m_register_backend, METH_O, "Register a Python backend object; returns its number."},
    {"_set_new_iteration", m_set_new_iteration, METH_O,
     "(fn): called with no arguments when a function compiled with FLAG_ITERATION is called from outside compiled "
     "code (CUDA graph trees count iterations by it)."},
    {"_set_backend_compiler", m_set_backend_compiler, METH_O,
     "fn(backend, graph, inputs, where) -> (callable or None, str): compiles a graph for a Python backend."},
    {"_backends", m_backends, METH_NOARGS, "The backend registry (item 0: None, the eager executor)."},
    {"reset", m_reset, METH_NOARGS, "Drop every compiled entry of every code object."},
    {"_after_fork_child", m_after_fork_child, METH_NOARGS, "Renew the compile lock in a forked child."},
    {"counters", m_counters, METH_NOARGS, "Compile/hit counters."},
    {"reset_counters", m_reset_counters, METH_NOARGS, "Zero the counters."},
    {"entries", m_entries, METH_O, "Cache entries of a code object: graph and guard dumps."},
    {"code_state", m_code_state, METH_O, "What ember does with a code object."},
    {"hook_state", m_hook_active, METH_NOARGS, "Hook users and this thread's flags."},
    {NULL, NULL, 0, NULL}};

/* ---- tables the Python package reads (their one source: the .def files) ---- */

/* _C.OPS: per graph op, in op order, (name, Python callable "module.name" or None, name of
 * the BINARY op an INPLACE op is the in-place form of, or None). */
static EM_NEW PyObject *ops_table(void) {
    PyObject *t = PyTuple_New(EMOP__COUNT);
    for (int i = 0; t && i < EMOP__COUNT; i++) {
        const EmOpInfo *o = &em_op_info[i];
        const char *bin = o->kind == EMOK_INPLACE ? em_op_info[em_op_binary_of((EmOp)i)].name : NULL;
        PyObject *row = Py_BuildValue("(szz)", o->name, o->py, bin);
        if (!row) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, row);
    }
    return t;
}

/* _C.DTYPES: torch dtype names in ScalarType order; _C.DEVICE_TYPES: {c10 DeviceType: name}. */
static EM_NEW PyObject *dtypes_table(void) {
    PyObject *t = PyTuple_New(EMDT__COUNT);
    for (int i = 0; t && i < EMDT__COUNT; i++) {
        PyObject *name = PyUnicode_FromString(em_dtype_info[i].torch_name);
        if (!name) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, name);
    }
    return t;
}

static EM_NEW PyObject *devices_table(void) {
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < EMDEV__COUNT; i++) {
        PyObject *k = PyLong_FromLong(em_dev_info[i].type), *v = PyUnicode_FromString(em_dev_info[i].name);
        if (!k || !v || PyDict_SetItem(d, k, v)) Py_CLEAR(d);
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return d;
}

static int add_table(PyObject *m, const char *name, EM_NEW PyObject *table) {
    int rc = table ? PyModule_AddObjectRef(m, name, table) : -1;
    Py_XDECREF(table);
    return rc;
}

static int add_tables(PyObject *m) {
    if (add_table(m, "OPS", ops_table()) < 0 || add_table(m, "DTYPES", dtypes_table()) < 0 ||
        add_table(m, "DEVICE_TYPES", devices_table()) < 0)
        return -1;
    static const char *const rules[] = {
                                         /* _C.RULE_<NAME>: the row's position */
#define X(name) "RULE_" #name,
#include "../trace/em_rules.def"
#undef X
    };
    for (int i = 0; i < (int)(sizeof(rules) / sizeof(*rules)); i++)
        if (PyModule_AddIntConstant(m, rules[i], i) < 0) return -1;
    static const char *const shape_rules[] = {
                                               /* _C.SHAPE_<NAME>: the row's position + 1 */
#define X(name) "SHAPE_" #name,
#include "../trace/em_shape_rules.def"
#undef X
    };
    for (int i = 0; i < (int)(sizeof(shape_rules) / sizeof(*shape_rules)); i++)
        if (PyModule_AddIntConstant(m, shape_rules[i], i + 1) < 0) return -1;
    static const char *const sym_rules[] = {
                                             /* _C.SYMR_<NAME>: the row's position + 1 */
#define X(name) "SYMR_" #name,
#include "../trace/em_sym_rules.def"
#undef X
    };
    for (int i = 0; i < (int)(sizeof(sym_rules) / sizeof(*sym_rules)); i++)
        if (PyModule_AddIntConstant(m, sym_rules[i], i + 1) < 0) return -1;
    return 0;
}

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "ember._C", "ember's C core.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void); /* exported: the module entry point */
/* em_state.str: the names of core/em_strings.def, interned for the process. */
static int intern_names(void) {
    static const char *const texts[EMS__COUNT] = {
#define X(id, text) text,
#include "../core/em_strings.def"
#undef X
    };
    for (int i = 0; i < EMS__COUNT; i++)
        if (!em_state.str[i] && !(em_state.str[i] = PyUnicode_InternFromString(texts[i]))) return -1;
    return 0;
}

/* A new exception type ember._C.<name> added to module m: the module's reference is the one
 * kept in em_state (borrowed from then on). NULL on error. */
static PyObject *add_exception(PyObject *m, const char *name, const char *doc, PyObject *base) {
    char full[64];
    snprintf(full, sizeof full, "ember._C.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
    if (!e || PyModule_AddObjectRef(m, name, e) < 0) {
        Py_XDECREF(e);
        return NULL;
    }
    return e;
}

/* New reference to the base of ember.Unsupported: torch.compile's Unsupported, so code written to
 * catch torch._dynamo.exc.Unsupported catches ember's too; RuntimeError where torch._dynamo
 * cannot be imported. Never NULL without an error set. */
static PyObject *unsupported_base(void) {
    PyObject *exc = PyImport_ImportModule("torch._dynamo.exc");
    PyObject *base = exc ? PyObject_GetAttrString(exc, "Unsupported") : NULL;
    Py_XDECREF(exc);
    if (base && PyType_Check(base) && PyType_IsSubtype((PyTypeObject *)base, (PyTypeObject *)PyExc_RuntimeError))
        return base;
    Py_XDECREF(base);
    PyErr_Clear();
    return Py_NewRef(PyExc_RuntimeError);
}

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    if (intern_names() < 0) goto error;
    em_state.cache_size_limit = 8;
    em_state.accumulated_recompile_limit = 256;
    if (PyType_Ready(&CompiledFunctionType) < 0 || em_hook_init() < 0 || em_cache_init() < 0) goto error;
    if (PyModule_AddObjectRef(m, "CompiledFunction", (PyObject *)&CompiledFunctionType) < 0) goto error;
    PyObject *base = unsupported_base();
    em_state.unsupported = add_exception(m, "Unsupported",
                                         "ember could not capture code and was told not to fall back "
                                         "(fullgraph=True or ember.config.strict).",
                                         base);
    Py_DECREF(base);
    if (!em_state.unsupported || !(em_state.constraint_violation = add_exception(
                                       m, "ConstraintViolation",
                                       "A mark_dynamic input's size is outside the min/max it was marked with "
                                       "(torch.compile raises its ConstraintViolationError there).",
                                       PyExc_ValueError)))
        goto error;
    if (PyModule_AddIntConstant(m, "FLAG_ENABLED", EMH_ENABLED) < 0) goto error;
    if (PyModule_AddIntConstant(m, "FLAG_FULLGRAPH", EMH_FULLGRAPH) < 0) goto error;
    if (PyModule_AddIntConstant(m, "FLAG_ITERATION", EMH_ITERATION) < 0) goto error;
    if (PyModule_AddIntConstant(m, "FLAG_DYN_ALL", EMH_DYN_ALL) < 0) goto error;
    if (PyModule_AddIntConstant(m, "FLAG_DYN_STATIC", EMH_DYN_STATIC) < 0) goto error;
    if (PyModule_AddIntConstant(m, "FLAG_BACKEND_SHIFT", EMH_BACKEND_SHIFT) < 0) goto error;
    if (!(em_state.backends = PyList_New(1))) goto error;
    PyList_SET_ITEM(em_state.backends, 0, Py_NewRef(Py_None));
    if (PyModule_AddIntConstant(m, "LOG_GRAPH", EM_LOG_GRAPH) < 0) goto error;
    if (PyModule_AddIntConstant(m, "LOG_GUARDS", EM_LOG_GUARDS) < 0) goto error;
    if (PyModule_AddIntConstant(m, "LOG_RECOMPILES", EM_LOG_RECOMPILES) < 0) goto error;
    if (PyModule_AddIntConstant(m, "LOG_BREAKS", EM_LOG_BREAKS) < 0) goto error;
    if (PyModule_AddIntConstant(m, "LOG_BYTECODE", EM_LOG_BYTECODE) < 0) goto error;
    if (PyModule_AddIntConstant(m, "LOG_DYNAMIC", EM_LOG_DYNAMIC) < 0) goto error;
    if (add_tables(m) < 0) goto error;
    if (!(em_state.resume_codes = PyDict_New())) goto error;
    if (!(em_state.unbound = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type))) goto error;
    {   /* weak: a code compiled directly lives no longer than its function would */
        PyObject *wmod = PyImport_ImportModule("weakref");
        em_state.forced_codes = wmod ? PyObject_CallMethod(wmod, "WeakSet", NULL) : NULL;
        Py_XDECREF(wmod);
        if (!em_state.forced_codes) goto error;
    }
    if (PyModule_AddObjectRef(m, "forced_codes", em_state.forced_codes) < 0) goto error;
    return m;
error:
    Py_DECREF(m);
    return NULL;
}
