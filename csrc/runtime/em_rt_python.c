/* em_rt_python.c: a graph run by a Python backend (any torch.compile backend). At its first
 * call the graph is exported as plain data and handed with the real inputs to
 * ember/backends/fx.py, which builds the GraphModule and calls the backend; later calls run the
 * compiled callable and store its outputs where the output tree reads them.
 */
#include "em_runtime.h"

#include <time.h>

#include "../cache/em_cache.h"
#include "../guard/em_guard.h"
#include "../pyver/em_state.h"

#define PY_STACK_ARGS 32

int em_rt_use_backend(EmCompiled *C, int32_t backend, PyObject *where) {
    if (!em_state.backends || backend <= 0 || backend >= PyList_GET_SIZE(em_state.backends)) {
        PyErr_Format(PyExc_SystemError, "ember: no backend number %d", (int)backend);
        return -1;
    }
    C->backend = backend;
    C->py_state = EMR_PY_PENDING;
    Py_XSETREF(C->where, Py_NewRef(where));
    return 0;
}

static EM_NEW PyObject *export_arg(const EmGraph *G, const EmArg *a) {
    if (a->kind == EMARG_REF) return Py_BuildValue("(ii)", 0, (int)a->v);
    if (a->kind == EMARG_CONST) return Py_BuildValue("(iO)", 1, (PyObject *)G->consts.data[a->v].obj);
    PyObject *items = PyTuple_New(a->n), *r = NULL;
    if (!items) return NULL;
    for (int32_t i = 0; i < a->n; i++) {
        PyObject *c = export_arg(G, &G->args.data[a->v + i]);
        if (!c) goto error;
        PyTuple_SET_ITEM(items, i, c);
    }
    r = Py_BuildValue("(iO)", a->kind == EMARG_TUPLE ? 2 : 3, items);
error:
    Py_DECREF(items);
    return r;
}

/* (dtype, dev_type, dev_index, requires_grad, sizes, strides) of a tensor node, else None. */
static EM_NEW PyObject *export_meta(const EmGraph *G, const EmNode *n) {
    if (n->vkind != EMV_TENSOR || n->dtype < 0) return Py_NewRef(Py_None);
    PyObject *sizes = PyTuple_New(n->ndim), *strides = PyTuple_New(n->ndim), *r = NULL;
    if (!sizes || !strides) goto error;
    const int64_t *sz = em_ir_sizes(G, n), *st = em_ir_strides(G, n);
    for (int i = 0; i < n->ndim; i++) {
        PyObject *a = PyLong_FromLongLong(sz[i]), *b = PyLong_FromLongLong(st[i]);
        if (!a || !b) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto error;
        }
        PyTuple_SET_ITEM(sizes, i, a);
        PyTuple_SET_ITEM(strides, i, b);
    }
    r = Py_BuildValue("(iiiiOO)", n->dtype, n->dev_type, n->dev_index, n->requires_grad, sizes, strides);
error:
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    return r;
}

static EM_NEW PyObject *export_node(const EmGraph *G, const EmNode *n) {
    PyObject *args = PyTuple_New(n->nargs), *target = NULL, *meta = NULL, *r = NULL;
    if (!args) return NULL;
    for (int32_t i = 0; i < n->nargs; i++) {
        PyObject *a = export_arg(G, &G->args.data[n->args + i]);
        if (!a) goto error;
        PyTuple_SET_ITEM(args, i, a);
    }
    switch (em_op_info[n->op].kind) {
        case EMOK_INPUT:
            target = Py_BuildValue("(is)", (int)n->aux, n->label >= 0 ? G->text.data + n->label : "input");
            break;
        case EMOK_CALL:
        case EMOK_GETATTR: target = Py_NewRef((PyObject *)G->consts.data[n->fn].obj); break;
        case EMOK_ITEM: target = PyLong_FromLong(n->aux); break;
        default: target = Py_NewRef(Py_None); break;
    }
    if (!target || !(meta = export_meta(G, n))) goto error;
    PyObject *kw = n->nkw ? (PyObject *)G->consts.data[n->kwnames].obj : Py_None;
    r = Py_BuildValue("(sOOOiO)", em_op_info[n->op].name, target, args, kw, (int)n->vkind, meta);
error:
    Py_DECREF(args);
    Py_XDECREF(target);
    Py_XDECREF(meta);
    return r;
}

EM_NEW PyObject *em_rt_export(const EmCompiled *C) {
    const EmGraph *G = &C->G;
    PyObject *nodes = PyTuple_New(G->nodes.len), *outs = PyTuple_New(C->n_fx_out), *r = NULL;
    if (!nodes || !outs) goto error;
    for (int32_t i = 0; i < G->nodes.len; i++) {
        PyObject *t = export_node(G, &G->nodes.data[i]);
        if (!t) goto error;
        PyTuple_SET_ITEM(nodes, i, t);
    }
    for (int32_t k = 0; k < C->n_fx_out; k++) {
        PyObject *v = PyLong_FromLong(C->fx_out[k]);
        if (!v) goto error;
        PyTuple_SET_ITEM(outs, k, v);
    }
    r = PyTuple_Pack(3, nodes, outs, C->in_syms ? C->in_syms : Py_None);
error:
    Py_XDECREF(nodes);
    Py_XDECREF(outs);
    return r;
}

/* The distinct graph outputs (the compiled callable returns each once) and the grad mode
 * the graph's last torch._C._set_grad_enabled call leaves. 0 or -1. */
static int plan_outputs(EmCompiled *C) {
    const EmGraph *G = &C->G;
    if (!C->fx_out && !(C->fx_out = malloc(sizeof(int32_t) * (size_t)(G->outputs.len + 1)))) {
        PyErr_NoMemory();
        return -1;
    }
    C->n_fx_out = 0;
    for (int32_t i = 0; i < G->outputs.len; i++) {
        int32_t ref = G->outputs.data[i], seen = 0;
        for (int32_t k = 0; k < C->n_fx_out; k++) seen |= C->fx_out[k] == ref;
        if (!seen) C->fx_out[C->n_fx_out++] = ref;
    }
    C->end_grad = -1;
    for (int32_t r = 0; r < G->nodes.len; r++) {
        const EmNode *n = &G->nodes.data[r];
        if (n->op != EMOP_CALL || n->nargs != 1 || G->consts.data[n->fn].obj != (void *)em_state.set_grad_enabled)
            continue;
        const EmArg *a = &G->args.data[n->args];
        if (a->kind == EMARG_CONST) C->end_grad = G->consts.data[a->v].obj == (void *)Py_True;
    }
    return 0;
}

/* The graph inputs in order, borrowed from the slots, into argv (nin entries). */
static void gather_inputs(const EmCompiled *C, PyObject *const *slots, PyObject **argv) {
    for (int32_t i = 0; i < C->G.ninputs; i++) argv[i] = slots[C->input_slots[i]];
}

/* The ((input, dim), ...) sizes the compiled callable takes before the inputs; 0 or -1. */
static int read_sym_args(EmCompiled *C, PyObject *pairs) {
    Py_ssize_t n = PyTuple_GET_SIZE(pairs);
    int32_t *a = n ? malloc(sizeof(int32_t) * 2 * (size_t)n) : NULL;
    if (n && !a) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(pairs, i);
        long in = -1, dim = -1;
        if (PyTuple_Check(p) && PyTuple_GET_SIZE(p) == 2) {
            in = PyLong_AsLong(PyTuple_GET_ITEM(p, 0));
            dim = PyLong_AsLong(PyTuple_GET_ITEM(p, 1));
        }
        if (in < 0 || in >= C->G.ninputs || dim < 0) {
            free(a);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: backend_compile gave a bad size input");
            return -1;
        }
        a[2 * i] = (int32_t)in;
        a[2 * i + 1] = (int32_t)dim;
    }
    free(C->sym_args);
    C->sym_args = a;
    C->n_sym_args = (int32_t)n;
    return 0;
}

/* C->alias_want from select.alias_want (a tuple of ints, one per input; absent or None: none). 0
 * or -1. */
static int read_alias_want(EmCompiled *C, PyObject *select) {
    PyObject *want = PyObject_GetAttrString(select, "alias_want");
    if (!want) return PyErr_ExceptionMatches(PyExc_AttributeError) ? (PyErr_Clear(), 0) : -1;
    int rc = 0;
    if (want != Py_None) {
        Py_ssize_t n = PyTuple_Check(want) ? PyTuple_GET_SIZE(want) : -1;
        int32_t *a = n == C->G.ninputs ? malloc(sizeof(int32_t) * (size_t)(n + 1)) : NULL;
        for (Py_ssize_t i = 0; a && i < n; i++) {
            long g = PyLong_AsLong(PyTuple_GET_ITEM(want, i));
            if (g < 0 || g > i) { /* a group is the position of its first member */
                free(a);
                a = NULL;
            } else {
                a[i] = (int32_t)g;
            }
        }
        if (!a) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: bad alias_want from the backend");
            rc = -1;
        } else {
            free(C->alias_want);
            C->alias_want = a;
        }
    }
    Py_DECREF(want);
    return rc;
}

/* 1 when the n graph inputs share memory as C->alias_want says, read in C; 0 when not, or when
 * one cannot be read directly (the Python check decides then). No exception. */
static int alias_same(const EmCompiled *C, PyObject *const *argv, int32_t n) {
    int32_t stack[512], *first = n <= 512 ? stack : PyMem_Malloc(sizeof(int32_t) * (size_t)n);
    int ok = first ? em_guard_storage_groups(argv, n, first) : 0;
    if (ok < 0) PyErr_Clear();
    ok = ok > 0 && !memcmp(first, C->alias_want, sizeof(int32_t) * (size_t)n);
    if (first != stack) PyMem_Free(first);
    return ok;
}

/* First call: export, hand the graph to the backend; 0 or -1. */
static int py_compile(EmCompiled *C, PyObject *const *slots) {
    PyObject *desc = NULL, *inputs = NULL, *res = NULL;
    int rc = -1;
    if (!em_state.backend_compile || !em_state.backends || C->backend >= PyList_GET_SIZE(em_state.backends)) {
        PyErr_SetString(PyExc_SystemError, "ember: Python backends are not set up");
        return -1;
    }
    if (plan_outputs(C)) return -1;
    if (C->G.own_executor) { /* its outputs' autograd links are needed as eager makes them */
        Py_XSETREF(C->py_info,
                   PyUnicode_FromString(C->G.own_executor == EM_OWN_GRAD_WRT_VALUE
                                            ? "runs on ember's executor: the code after it takes gradients with "
                                              "respect to a value it computes"
                                            : "runs on ember's executor: it returns a view made without grad mode of "
                                              "a tensor that requires grad"));
        C->py_state = EMR_PY_HERE;
        return C->py_info ? 0 : -1;
    }
    if (!(desc = em_rt_export(C)) || !(inputs = PyTuple_New(C->G.ninputs))) goto error;
    for (int32_t i = 0; i < C->G.ninputs; i++) PyTuple_SET_ITEM(inputs, i, Py_NewRef(slots[C->input_slots[i]]));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    res = PyObject_CallFunctionObjArgs(em_state.backend_compile, PyList_GET_ITEM(em_state.backends, C->backend), desc,
                                       inputs, C->where ? C->where : Py_None, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    C->backend_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!res) goto error;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 4 || !PyUnicode_Check(PyTuple_GET_ITEM(res, 1)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(res, 3))) {
        PyErr_SetString(PyExc_SystemError,
                        "ember: backend_compile must return (callable or None, str, select or None, sizes)");
        goto error;
    }
    PyObject *fn = PyTuple_GET_ITEM(res, 0), *check = PyTuple_GET_ITEM(res, 2);
    if (read_sym_args(C, PyTuple_GET_ITEM(res, 3))) goto error;
    if (check != Py_None) Py_XSETREF(C->py_check, Py_NewRef(check));
    if (check != Py_None && read_alias_want(C, check)) goto error;
    Py_XSETREF(C->py_info, Py_NewRef(PyTuple_GET_ITEM(res, 1)));
    if (fn == Py_None) {
        C->py_state = EMR_PY_HERE;
    } else {
        Py_XSETREF(C->py_fn, Py_NewRef(fn));
        C->py_state = EMR_PY_READY;
    }
    rc = 0;
error:
    Py_XDECREF(desc);
    Py_XDECREF(inputs);
    Py_XDECREF(res);
    return rc;
}

/* ints and floats are values: one passed twice aliases nothing */
static int is_value(PyObject *v) { return PyLong_CheckExact(v) || PyFloat_CheckExact(v); }

/* 1 when one object is passed as two graph inputs. The trace makes one input of an object
 * it meets twice (guarded), so the backend compiled a graph whose inputs were distinct;
 * called with one tensor in two places, a functional backend would miss that a mutation of
 * one is seen through the other (TorchDynamo guards this too). -1 on error. */
static int inputs_repeat(PyObject **argv, int32_t n) {
    if (n <= 16) {
        for (int32_t i = 1; i < n; i++)
            for (int32_t j = 0; j < i; j++)
                if (argv[i] == argv[j] && !is_value(argv[i])) return 1;
        return 0;
    }
    uint64_t stack[3 * 512], *keys = n <= 512 ? stack : PyMem_Malloc(sizeof(uint64_t) * 3 * (size_t)n);
    if (!keys) return PyErr_NoMemory(), -1;
    int32_t *first = (int32_t *)(keys + 2 * n);
    for (int32_t i = 0; i < n; i++) {
        int value = is_value(argv[i]);
        keys[i] = value ? 0 : (uint64_t)(uintptr_t)argv[i];
        keys[n + i] = !value;
    }
    int rep = em_first_same(keys, keys + n, n, first);
    if (keys != stack) PyMem_Free(keys);
    if (rep < 0) PyErr_NoMemory();
    return rep;
}

int em_rt_py_run(EmCompiled *C, PyObject *const *slots, PyObject **vals, int *ops_raised) {
    PyObject *stack[PY_STACK_ARGS], **argv = stack, *res = NULL, *seq = NULL;
    int32_t nin = C->G.ninputs, k = 0, nsym = 0;
    int rc = -1;
    if (C->py_state == EMR_PY_PENDING) {
        /* under the compile lock, so that two threads calling a new graph compile it once;
         * the state is read again once the lock is ours */
        em_cache_lock();
        int bad = C->py_state == EMR_PY_PENDING && py_compile(C, slots);
        em_cache_unlock();
        if (bad) return -1;
    }
    if (C->py_state == EMR_PY_HERE) return 1;
    nsym = C->n_sym_args;
    if (nsym + nin > PY_STACK_ARGS && !(argv = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nsym + nin)))) {
        PyErr_NoMemory();
        return -1;
    }
    gather_inputs(C, slots, argv + nsym);
    for (int32_t i = 0; i < nsym; i++) { /* the sizes (new references), read from the inputs */
        int64_t v;
        PyObject *t = argv[nsym + C->sym_args[2 * i]];
        if (em_guard_tensor_size(t, C->sym_args[2 * i + 1], &v) || !(argv[i] = PyLong_FromLongLong(v))) {
            nsym = i;
            goto error;
        }
    }
    int rep = inputs_repeat(argv + nsym, nin);
    if (rep) { /* this call runs on the C executor, which is exact for any aliasing */
        rc = rep < 0 ? -1 : 1;
        goto error;
    }
    PyObject *fn; /* a new reference: the entry may be dropped while it runs */
    if (C->py_check && !(C->alias_want && !nsym && alias_same(C, argv, nin))) {
        /* the compiled variant for these sizes; None: this call runs on the C executor */
        if (!(fn = PyObject_Vectorcall(C->py_check, argv, (size_t)(nsym + nin), NULL))) goto error;
        if (fn == Py_None) {
            Py_DECREF(fn);
            rc = 1;
            goto error;
        }
    } else {
        fn = Py_NewRef(C->py_fn);
    }
    res = PyObject_Vectorcall(fn, argv, (size_t)(nsym + nin), NULL);
    Py_DECREF(fn);
    *ops_raised = !res;
    if (!res || !(seq = PySequence_Fast(res, "ember: a compiled graph must return a sequence"))) goto error;
    if (PySequence_Fast_GET_SIZE(seq) != C->n_fx_out) {
        PyErr_Format(PyExc_RuntimeError, "ember: the backend's compiled graph of %S returned %zd values, expected %d",
                     C->where, PySequence_Fast_GET_SIZE(seq), (int)C->n_fx_out);
        goto error;
    }
    for (; k < C->n_fx_out; k++) vals[C->fx_out[k]] = Py_NewRef(PySequence_Fast_GET_ITEM(seq, k));
    if (C->end_grad >= 0) { /* as the eager executor would leave it (a with block left open at a break) */
        PyObject *g = PyObject_CallOneArg(em_state.set_grad_enabled, C->end_grad ? Py_True : Py_False);
        if (!g) goto error;
        Py_DECREF(g);
    }
    rc = 0;
error:
    if (rc != 0)
        for (int32_t i = 0; i < k; i++) Py_CLEAR(vals[C->fx_out[i]]);
    Py_XDECREF(seq);
    Py_XDECREF(res);
    for (int32_t i = 0; i < nsym; i++) Py_DECREF(argv[i]);
    if (argv != stack) PyMem_Free(argv);
    return rc;
}

EM_NEW PyObject *em_rt_info(void *compiled) {
    EmCompiled *C = compiled;
    PyObject *name = NULL, *r = NULL;
    const char *note = "", *code = "";
    if (C->backend > 0 && em_state.backends && C->backend < PyList_GET_SIZE(em_state.backends)) {
        name = PyObject_GetAttrString(PyList_GET_ITEM(em_state.backends, C->backend), "name");
        if (!name) return NULL;
    } else if (!(name = PyUnicode_FromString("eager"))) {
        return NULL;
    }
    if (C->py_state == EMR_PY_HERE && C->py_info) note = PyUnicode_AsUTF8(C->py_info);
    if (C->py_state == EMR_PY_READY && C->py_info) code = PyUnicode_AsUTF8(C->py_info);
    if (!note || !code) goto error;
    r = Py_BuildValue("{s:O,s:s,s:s,s:d}", "backend", name, "backend_note", note, "fx_code", code, "backend_s",
                      C->backend_s);
error:
    Py_DECREF(name);
    return r;
}
