/* em_rt_eager.c: executes an EmGraph op by op with the C API (PyNumber_*, vectorcall of the
 * recorded torch callables) and rebuilds the frame's return value from the output tree.
 * Consumes EmCompiled and the guard slots of a hit; produces the return value.
 */
#include "em_runtime.h"

#include "../pyver/em_pyver.h"
#include "../pyver/em_set.h"
#include "../pyver/em_state.h"

#define RT_STACK_ARGS 16

static void release_out(EmOut *out, int32_t n) {
    for (int32_t i = 0; i < n; i++) Py_XDECREF(out[i].obj);
    free(out);
}

static void note_use(int32_t *last, const EmGraph *G, const EmArg *a, int32_t at) {
    if (a->kind == EMARG_REF) last[a->v] = at;
    else if (a->kind == EMARG_TUPLE || a->kind == EMARG_LIST)
        for (int32_t i = 0; i < a->n; i++) note_use(last, G, &G->args.data[a->v + i], at);
}

EmCompiled *em_rt_compile(EmGraph *G, EmOut *out, int32_t nout, const int32_t *input_slots, int32_t nin) {
    EmCompiled *C = calloc(1, sizeof(EmCompiled));
    int32_t n = G->nodes.len, *last = NULL;
    if (!C) goto nomem;
    C->G = *G;
    memset(G, 0, sizeof(*G));
    C->out = out;
    C->nout = nout;
    out = NULL;
    C->input_slots = malloc(sizeof(int32_t) * (size_t)(nin + 1));
    C->free_at = malloc(sizeof(int32_t) * (size_t)(n + 1));
    C->frees = malloc(sizeof(int32_t) * (size_t)(n + 1));
    C->is_output = calloc((size_t)n + 1, 1);
    last = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!C->input_slots || !C->free_at || !C->frees || !C->is_output || !last) goto nomem;
    if (nin) memcpy(C->input_slots, input_slots, sizeof(int32_t) * (size_t)nin);
    for (int32_t i = 0; i < C->G.outputs.len; i++) C->is_output[C->G.outputs.data[i]] = 1;
    for (int32_t i = 0; i < nout; i++) C->has_same |= C->out[i].kind == OUT_SAME;
    int effects = 0;
    for (int32_t i = 0; i < nout; i++)
        effects |= C->out[i].kind == OUT_SETITEMS || C->out[i].kind == OUT_SETATTR || C->out[i].kind == OUT_CALL ||
                   C->out[i].kind == OUT_DELATTR;
    for (int32_t i = 0; effects && i < nout; i++) {
        if (C->out[i].kind != OUT_SLOT) continue;
        int seen = 0;
        for (int32_t k = 0; k < C->npins; k++) seen |= C->pins[k] == C->out[i].v;
        if (seen) continue;
        if (!C->pins && !(C->pins = malloc(sizeof(int32_t) * (size_t)nout))) goto nomem;
        C->pins[C->npins++] = C->out[i].v;
    }
    /* last use of every value; a value never used dies right after it is made */
    for (int32_t r = 0; r < n; r++) {
        last[r] = r;
        const EmNode *nd = &C->G.nodes.data[r];
        if (nd->op == EMOP_INPUT) continue;
        for (int32_t i = 0; i < nd->nargs; i++) note_use(last, &C->G, &C->G.args.data[nd->args + i], r);
    }
    /* bucket refs by their last use (counting sort) */
    for (int32_t r = 0; r <= n; r++) C->free_at[r] = 0;
    for (int32_t r = 0; r < n; r++)
        if (!C->is_output[r]) C->free_at[last[r] + 1]++;
    for (int32_t r = 0; r < n; r++) C->free_at[r + 1] += C->free_at[r];
    int32_t *fill = calloc((size_t)n + 1, sizeof(int32_t));
    if (!fill) goto nomem;
    for (int32_t r = 0; r < n; r++)
        if (!C->is_output[r]) C->frees[C->free_at[last[r]] + fill[last[r]]++] = r;
    free(fill);
    free(last);
    return C;
nomem:
    free(last);
    if (out) release_out(out, nout);
    if (C) em_rt_free(C);
    else em_graph_free(G);
    PyErr_NoMemory();
    return NULL;
}

void em_rt_free(EmCompiled *C) {
    if (!C) return;
    em_graph_free(&C->G);
    Py_XDECREF(C->on_error);
    Py_XDECREF(C->py_fn);
    Py_XDECREF(C->py_info);
    Py_XDECREF(C->where);
    Py_XDECREF(C->in_syms);
    Py_XDECREF(C->py_check);
    free(C->alias_want);
    free(C->sym_args);
    free(C->fx_out);
    if (C->out) release_out(C->out, C->nout);
    free(C->input_slots);
    free(C->frees);
    free(C->pins);
    free(C->free_at);
    free(C->is_output);
    free(C);
}

/* Value of an argument: borrowed for refs and consts, new for tuples/lists (*owned = 1). */
static PyObject *arg_value(const EmGraph *G, PyObject **vals, const EmArg *a, int *owned) {
    *owned = 0;
    switch (a->kind) {
        case EMARG_REF: return vals[a->v];
        case EMARG_CONST: return (PyObject *)G->consts.data[a->v].obj;
        default: {
            PyObject *s = a->kind == EMARG_TUPLE ? PyTuple_New(a->n) : PyList_New(a->n);
            for (int32_t i = 0; s && i < a->n; i++) {
                int o;
                PyObject *v = arg_value(G, vals, &G->args.data[a->v + i], &o);
                if (!v) {
                    Py_CLEAR(s);
                    break;
                }
                if (!o) Py_INCREF(v);
                if (a->kind == EMARG_TUPLE) PyTuple_SET_ITEM(s, i, v);
                else PyList_SET_ITEM(s, i, v);
            }
            *owned = 1;
            return s;
        }
    }
}

/* pow's binaryfuncs: CPython's BINARY_OP calls them without a modulus */
static PyObject *power_nomod(PyObject *a, PyObject *b) { return PyNumber_Power(a, b, Py_None); }
static PyObject *inplace_power_nomod(PyObject *a, PyObject *b) { return PyNumber_InPlacePower(a, b, Py_None); }

/* The function of each BINARY and INPLACE op (em_ops.def); NULL for the other ops. */
static const binaryfunc binary_fns[EMOP__COUNT] = {
#define X(e, name, kind, flags, nb, fn, py) fn,
#include "../ir/em_ops.def"
#undef X
};

/* ORDER CMP (em_ops.def): COMPARE op LT + k is the rich comparison Py_LT + k */
_Static_assert(EMOP_LE - EMOP_LT == Py_LE - Py_LT && EMOP_EQ - EMOP_LT == Py_EQ - Py_LT &&
                   EMOP_NE - EMOP_LT == Py_NE - Py_LT && EMOP_GT - EMOP_LT == Py_GT - Py_LT &&
                   EMOP_GE - EMOP_LT == Py_GE - Py_LT,
               "ORDER CMP");

static PyObject *binary(EmOp op, PyObject *a, PyObject *b) {
    if (binary_fns[op]) return binary_fns[op](a, b);
    if (em_op_info[op].kind == EMOK_COMPARE) return PyObject_RichCompare(a, b, Py_LT + (int)(op - EMOP_LT));
    if (op == EMOP_SUBSCR) return PyObject_GetItem(a, b);
    PyErr_SetString(PyExc_SystemError, "ember: bad binary op");
    return NULL;
}

static PyObject *run_node(const EmGraph *G, const EmNode *n, PyObject **vals) {
    PyObject *stack[RT_STACK_ARGS], **argv = stack, *res = NULL;
    uint8_t owned[RT_STACK_ARGS], *own = owned;
    int32_t na = n->nargs, got = 0;
    if (na > RT_STACK_ARGS) {
        argv = PyMem_Malloc(sizeof(PyObject *) * (size_t)na);
        own = PyMem_Malloc((size_t)na);
        if (!argv || !own) {
            PyMem_Free(argv == stack ? NULL : argv);
            PyMem_Free(own == owned ? NULL : own);
            return PyErr_NoMemory();
        }
    }
    for (; got < na; got++) {
        int o;
        argv[got] = arg_value(G, vals, &G->args.data[n->args + got], &o);
        own[got] = (uint8_t)o;
        if (!argv[got]) goto done;
    }
    switch (em_op_info[n->op].kind) {
        case EMOK_BINARY:
        case EMOK_INPLACE:
        case EMOK_COMPARE:
        case EMOK_SUBSCR: res = binary((EmOp)n->op, argv[0], argv[1]); break;
        case EMOK_UNARY:
            res = n->op == EMOP_NEG   ? PyNumber_Negative(argv[0])
                  : n->op == EMOP_POS ? PyNumber_Positive(argv[0])
                                      : PyNumber_Invert(argv[0]);
            break;
        case EMOK_SETITEM:
            if (PyObject_SetItem(argv[0], argv[1], argv[2]) == 0) res = Py_NewRef(Py_None);
            break;
        case EMOK_GETATTR: res = PyObject_GetAttr(argv[0], (PyObject *)G->consts.data[n->fn].obj); break;
        case EMOK_CALL: {
            PyObject *kw = n->nkw ? (PyObject *)G->consts.data[n->kwnames].obj : NULL;
            res = PyObject_Vectorcall((PyObject *)G->consts.data[n->fn].obj, argv, (size_t)(na - n->nkw), kw);
            break;
        }
        case EMOK_ITEM: res = PySequence_GetItem(argv[0], n->aux); break;
        default: PyErr_SetString(PyExc_SystemError, "ember: bad node kind"); break;
    }
done:
    for (int32_t i = 0; i < got; i++)
        if (own[i]) Py_XDECREF(argv[i]);
    if (argv != stack) {
        PyMem_Free(argv);
        PyMem_Free(own);
    }
    return res;
}

/* Whether dict d's keys that items holds come first in items, in d's order: then deleting d's
 * other keys and setting items' in order leaves items' order. 1, 0 or -1. */
static int keeps_order(PyObject *d, PyObject *items) {
    Py_ssize_t pd = 0, pi = 0;
    PyObject *k, *v, *ik, *iv;
    while (PyDict_Next(d, &pd, &k, &v)) {
        int in = PyDict_Contains(items, k);
        if (in <= 0) {
            if (in < 0) return -1;
            continue;
        }
        if (!PyDict_Next(items, &pi, &ik, &iv)) return 0;
        int same = PyObject_RichCompareBool(k, ik, Py_EQ);
        if (same <= 0) return same;
    }
    return 1;
}

/* A dict subclass's instance target (a defaultdict, an OrderedDict: the trace checked their item
 * methods are dict's or OrderedDict's own) given items, in its own order (its iterator) by the
 * mapping protocol, as set_items does for a dict. 0 or -1. */
static int set_mapping_items(PyObject *target, PyObject *items) {
    PyObject *keys = PySequence_List(target), *k, *v;
    if (!keys) return -1;
    Py_ssize_t pi = 0, n = PyList_GET_SIZE(keys);
    int keep = 1, rc = 0;
    for (Py_ssize_t i = 0; keep && i < n; i++) { /* keeps_order, in target's own order */
        int in = PyDict_Contains(items, PyList_GET_ITEM(keys, i));
        if (in < 0) keep = -1;
        else if (in && !PyDict_Next(items, &pi, &k, &v)) keep = 0;
        else if (in) keep = PyObject_RichCompareBool(PyList_GET_ITEM(keys, i), k, Py_EQ);
    }
    if (keep < 0) rc = -1;
    else if (!keep) {
        PyObject *r = PyObject_CallMethod(target, "clear", NULL);
        rc = r ? 0 : -1;
        Py_XDECREF(r);
    }
    for (Py_ssize_t i = 0; keep > 0 && !rc && i < n; i++) {
        int in = PyDict_Contains(items, PyList_GET_ITEM(keys, i));
        rc = in < 0 ? -1 : in ? 0 : PyObject_DelItem(target, PyList_GET_ITEM(keys, i));
    }
    Py_DECREF(keys);
    Py_ssize_t p = 0;
    while (!rc && PyDict_Next(items, &p, &k, &v)) rc = PyObject_SetItem(target, k, v);
    return rc;
}

/* target (a list or dict from the frame) given the contents of items (a new one) in place: a
 * list all at once; a dict by deleting the keys it lost and setting the others in order, or,
 * when a key moved, cleared and refilled. 0 or -1. */
static int set_items(PyObject *target, PyObject *items) {
    if (PyList_Check(target) && PyList_CheckExact(items)) /* a list subclass's storage as list's methods change it */
        return PyList_SetSlice(target, 0, PY_SSIZE_T_MAX, items);
    if (!PyList_Check(target) && PySequence_Check(target) && PyList_CheckExact(items)) { /* an exact deque */
        PyObject *r = PyObject_CallMethod(target, "clear", NULL);
        Py_XSETREF(r, r ? PyObject_CallMethod(target, "extend", "(O)", items) : NULL);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    if (PyDict_Check(target) && !PyDict_CheckExact(target) && PyDict_CheckExact(items))
        return set_mapping_items(target, items);
    if (!PyDict_CheckExact(target) || !PyDict_CheckExact(items)) {
        PyErr_SetString(PyExc_SystemError, "ember: items written back into something not a list or dict");
        return -1;
    }
    int keep = keeps_order(target, items);
    if (keep < 0) return -1;
    if (!keep) {
        PyDict_Clear(target);
        return PyDict_Update(target, items);
    }
    PyObject *gone = PyList_New(0), *k, *v;
    Py_ssize_t p = 0;
    while (gone && PyDict_Next(target, &p, &k, &v)) {
        int in = PyDict_Contains(items, k);
        if (in < 0 || (!in && PyList_Append(gone, k))) Py_CLEAR(gone);
    }
    int rc = gone ? 0 : -1;
    for (Py_ssize_t i = 0; !rc && i < PyList_GET_SIZE(gone); i++) rc = PyDict_DelItem(target, PyList_GET_ITEM(gone, i));
    Py_XDECREF(gone);
    for (p = 0; !rc && PyDict_Next(items, &p, &k, &v);) rc = PyDict_SetItem(target, k, v);
    return rc;
}

/* A new function like tmpl (a function made while tracing): its code, globals, names,
 * defaults, annotations and a copy of its __dict__ (what functools.wraps set); no closure yet. */
static EM_NEW PyObject *function_like(PyObject *tmpl) {
    PyFunctionObject *t = (PyFunctionObject *)tmpl;
    PyObject *f = PyFunction_NewWithQualName(t->func_code, t->func_globals, t->func_qualname);
    if (!f) return NULL;
    PyFunctionObject *n = (PyFunctionObject *)f;
    Py_XSETREF(n->func_name, Py_XNewRef(t->func_name));
    Py_XSETREF(n->func_doc, Py_XNewRef(t->func_doc));
    Py_XSETREF(n->func_module, Py_XNewRef(t->func_module));
    int rc = PyFunction_SetDefaults(f, t->func_defaults ? t->func_defaults : Py_None);
    if (!rc) rc = PyFunction_SetKwDefaults(f, t->func_kwdefaults ? t->func_kwdefaults : Py_None);
    if (!rc && t->func_annotations) rc = PyFunction_SetAnnotations(f, t->func_annotations);
    if (!rc && t->func_dict && !(n->func_dict = PyDict_Copy(t->func_dict))) rc = -1;
    if (rc) Py_CLEAR(f);
    return f;
}

/* Whether o is a threading.local (its attribute protocol _thread._local's): a store the trace
 * recorded on it goes through its own __setattr__, to the calling thread's dict. */
static int thread_local(PyObject *o) {
    static setattrofunc local_set; /* _thread._local's slot, found once */
    if (!local_set) {
        PyObject *m = PyImport_ImportModule("_thread"), *lt = m ? PyObject_GetAttrString(m, "_local") : NULL;
        Py_XDECREF(m);
        if (lt && PyType_Check(lt)) local_set = ((PyTypeObject *)lt)->tp_setattro;
        Py_XDECREF(lt);
        PyErr_Clear();
        if (!local_set) return 0;
    }
    return Py_TYPE(o)->tp_setattro == local_set;
}

static PyObject *rebuild_out(const EmCompiled *C, PyObject **vals, PyObject *const *slots, int32_t *at,
                             PyObject **memo);

/* OUT_GEN at *at - 1 (its children next): a function of the resume code over the generator
 * function's globals, names and free variables (after the code's own cells), called on the
 * arguments and run to the yield its code starts with. New reference or NULL. */
static EM_NEW PyObject *rebuild_gen(const EmCompiled *C, PyObject **vals, PyObject *const *slots, int32_t *at,
                                    PyObject **memo) {
    const EmOut *o = &C->out[*at - 1];
    PyCodeObject *code = (PyCodeObject *)o->obj;
    int nargs = code->co_argcount, nown = o->v - 1 - nargs;
    PyObject *fn = rebuild_out(C, vals, slots, at, memo), *cl = NULL, *args = NULL, *f = NULL, *gen = NULL;
    if (!fn) return NULL;
    if (!PyFunction_Check(fn) || nown < 0) {
        PyErr_SetString(PyExc_SystemError, "ember: a generator's function is not a function");
        goto done;
    }
    PyObject *free = PyFunction_GET_CLOSURE(fn);
    Py_ssize_t nfree = free ? PyTuple_GET_SIZE(free) : 0;
    if (nown + nfree != code->co_nfreevars) {
        PyErr_SetString(PyExc_SystemError, "ember: a generator's closure does not match its code");
        goto done;
    }
    if (!(cl = PyTuple_New(nown + nfree)) || !(args = PyTuple_New(nargs))) goto done;
    for (int i = 0; i < nown + nargs; i++) {
        PyObject *c = rebuild_out(C, vals, slots, at, memo);
        if (!c) goto done;
        PyTuple_SET_ITEM(i < nown ? cl : args, i < nown ? i : i - nown, c);
    }
    for (Py_ssize_t j = 0; j < nfree; j++) PyTuple_SET_ITEM(cl, nown + j, Py_NewRef(PyTuple_GET_ITEM(free, j)));
    PyFunctionObject *g = (PyFunctionObject *)fn;
    if (!(f = PyFunction_NewWithQualName((PyObject *)code, g->func_globals, g->func_qualname))) goto done;
    Py_XSETREF(((PyFunctionObject *)f)->func_name, Py_XNewRef(g->func_name));
    if (PyFunction_SetClosure(f, cl) || !(gen = PyObject_Call(f, args, NULL))) goto done;
    PyObject *first = Py_TYPE(gen)->tp_iternext ? Py_TYPE(gen)->tp_iternext(gen) : NULL; /* the yield again */
    if (!first) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: a generator made again did not stop");
        Py_CLEAR(gen);
    }
    Py_XDECREF(first);
done:
    Py_DECREF(fn);
    Py_XDECREF(cl);
    Py_XDECREF(args);
    Py_XDECREF(f);
    return gen;
}

/* memo (NULL when the tree has no OUT_SAME): per position, the TUPLE/LIST/DICT/ITER/NEWOBJ/CELL/FUNC/CALL
 * object built there (a strong reference, released when the whole tree is built: an object
 * an effect consumed, such as the target of OUT_SETATTR, stays alive for a later OUT_SAME). */
static PyObject *rebuild_out(const EmCompiled *C, PyObject **vals, PyObject *const *slots, int32_t *at,
                             PyObject **memo) {
    int32_t pos = *at;
    const EmOut *o = &C->out[(*at)++];
    switch (o->kind) {
        case OUT_SAME:
            if (!memo || !memo[o->v]) {
                PyErr_SetString(PyExc_SystemError, "ember: output refers to an object not built");
                return NULL;
            }
            return Py_NewRef(memo[o->v]);
        case OUT_VALUE: return Py_NewRef(vals[C->G.outputs.data[o->v]]);
        case OUT_CONST: return Py_NewRef(o->obj);
        case OUT_SETCOPY: {
            PyObject *s = em_set_clone(o->obj);
            if (s && memo) memo[pos] = Py_NewRef(s);
            return s;
        }
        case OUT_SLOT: return Py_NewRef(slots[o->v]);
        case OUT_REENTER: return PyObject_CallOneArg(em_state.ctx_reenter_fn, o->obj);
        case OUT_TUPLE:
        case OUT_ITER:
        case OUT_LIST: {
            PyObject *s = o->kind == OUT_LIST ? PyList_New(o->v) : PyTuple_New(o->v);
            if (s && memo && o->kind == OUT_LIST) memo[pos] = Py_NewRef(s);
            for (int32_t i = 0; i < o->v; i++) {
                PyObject *v = s ? rebuild_out(C, vals, slots, at, memo) : NULL;
                if (!v) {
                    Py_XDECREF(s);
                    return NULL;
                }
                if (o->kind == OUT_LIST) PyList_SET_ITEM(s, i, v);
                else PyTuple_SET_ITEM(s, i, v);
            }
            if (o->kind == OUT_TUPLE && o->obj) {
                /* namedtuples take fields as arguments; structseqs take one sequence */
                PyObject *r = PyObject_HasAttr(o->obj, EM_STR(make))
                                  ? PyObject_CallMethodOneArg(o->obj, EM_STR(make), s)
                                  : PyObject_CallOneArg(o->obj, s);
                Py_DECREF(s);
                if (r && memo) memo[pos] = Py_NewRef(r);
                return r;
            }
            if (o->kind == OUT_ITER) { /* obj: makes an iterator of the traced one's type */
                PyObject *it = o->obj ? PyObject_CallOneArg(o->obj, s) : PyObject_GetIter(s);
                Py_DECREF(s);
                if (it && memo) memo[pos] = Py_NewRef(it);
                return it;
            }
            if (memo && o->kind == OUT_TUPLE) memo[pos] = Py_NewRef(s);
            return s;
        }
        case OUT_LAST: {
            PyObject *v = NULL;
            for (int32_t i = 0; i < o->v; i++) {
                Py_XDECREF(v);
                if (!(v = rebuild_out(C, vals, slots, at, memo))) return NULL;
            }
            return v;
        }
        case OUT_SETATTR: {
            PyObject *target = rebuild_out(C, vals, slots, at, memo);
            PyObject *v = target ? rebuild_out(C, vals, slots, at, memo) : NULL;
            int rc = !v                          ? -1
                     : PyDict_CheckExact(target) ? PyDict_SetItem(target, o->obj, v) /* a global store */
                     : thread_local(target)      ? PyObject_SetAttr(target, o->obj, v) /* this thread's */
                                                 : PyObject_GenericSetAttr(target, o->obj, v);
            Py_XDECREF(target);
            Py_XDECREF(v);
            return rc ? NULL : Py_NewRef(Py_None);
        }
        case OUT_DELATTR: { /* gone from its __dict__, or from the globals dict (stored in the trace
                             * only: not there) */
            PyObject *target = rebuild_out(C, vals, slots, at, memo);
            PyObject *d = !target || PyDict_CheckExact(target) ? Py_XNewRef(target) /* a global's deletion */
                                                               : PyObject_GenericGetDict(target, NULL);
            int rc = d ? PyDict_DelItem(d, o->obj) : -1;
            if (rc && d && PyErr_ExceptionMatches(PyExc_KeyError)) rc = (PyErr_Clear(), 0);
            Py_XDECREF(target);
            Py_XDECREF(d);
            return rc ? NULL : Py_NewRef(Py_None);
        }
        case OUT_SETITEMS: {
            PyObject *target = rebuild_out(C, vals, slots, at, memo);
            PyObject *items = target ? rebuild_out(C, vals, slots, at, memo) : NULL;
            int rc = items ? set_items(target, items) : -1;
            Py_XDECREF(target);
            Py_XDECREF(items);
            return rc ? NULL : Py_NewRef(Py_None);
        }
        case OUT_NEWOBJ: { /* children: [contents,] attrs [, contents] (em_trace.c out_newobj) */
            PyTypeObject *tp = (PyTypeObject *)PyTuple_GET_ITEM(o->obj, 0), *base = tp;
            for (Py_ssize_t i = 0; base->tp_flags & Py_TPFLAGS_HEAPTYPE && i < PyTuple_GET_SIZE(tp->tp_mro); i++)
                base = (PyTypeObject *)PyTuple_GET_ITEM(tp->tp_mro, i); /* its builtin base's __new__: no user code */
            PyObject *filler = PyTuple_GET_ITEM(o->obj, 1), *contents = NULL;
            int frozen = base == &PyFrozenSet_Type || base == &PyTuple_Type; /* __new__ takes the contents */
            if (frozen && !(contents = rebuild_out(C, vals, slots, at, memo))) return NULL;
            PyObject *args = frozen ? PyTuple_Pack(1, contents) : PyTuple_New(0);
            PyObject *inst = args ? base->tp_new(tp, args, NULL) : NULL;
            Py_XDECREF(args);
            Py_CLEAR(contents);
            if (inst && memo) memo[pos] = Py_NewRef(inst);
            PyObject *attrs = inst ? rebuild_out(C, vals, slots, at, memo) : NULL;
            /* the trace's __dict__ is the instance's (o.__dict__ returned names this object) */
            int rc = !attrs ? -1 : _PyObject_GetDictPtr(inst) ? PyObject_GenericSetDict(inst, attrs, NULL) : 0;
            if (!rc && !_PyObject_GetDictPtr(inst) && PyDict_Check(attrs)) { /* __slots__ members, no user code */
                PyObject *k, *v;
                Py_ssize_t p = 0;
                while (!rc && PyDict_Next(attrs, &p, &k, &v)) rc = PyObject_GenericSetAttr(inst, k, v);
            }
            Py_XDECREF(attrs);
            if (!rc && o->v > 1 && !frozen) {
                PyObject *d = rebuild_out(C, vals, slots, at, memo), *k, *v, *r = NULL;
                Py_ssize_t p = 0;
                rc = d ? 0 : -1;
                if (d && PyDict_Check(d)) {
                    while (!rc && PyDict_Next(d, &p, &k, &v)) {
                        r = PyObject_CallFunctionObjArgs(filler, inst, k, v, NULL);
                        rc = r ? 0 : -1;
                        Py_XDECREF(r);
                    }
                } else if (d) {
                    r = PyObject_CallFunctionObjArgs(filler, inst, d, NULL);
                    rc = r ? 0 : -1;
                    Py_XDECREF(r);
                }
                Py_XDECREF(d);
            }
            if (rc) Py_CLEAR(inst);
            return inst;
        }
        case OUT_BOUND: {
            PyObject *self = rebuild_out(C, vals, slots, at, memo);
            PyObject *fn = self ? rebuild_out(C, vals, slots, at, memo) : NULL;
            descrgetfunc get = fn ? Py_TYPE(fn)->tp_descr_get : NULL;
            PyObject *r = get ? get(fn, self, (PyObject *)Py_TYPE(self)) : NULL;
            if (fn && !get) PyErr_SetString(PyExc_SystemError, "ember: bound method of a non-descriptor");
            Py_XDECREF(self);
            Py_XDECREF(fn);
            return r;
        }
        case OUT_CELL: {
            PyObject *c = PyCell_New(NULL), *v = NULL;
            if (c && memo) memo[pos] = Py_NewRef(c);
            if (c && o->v && (!(v = rebuild_out(C, vals, slots, at, memo)) || PyCell_Set(c, v))) Py_CLEAR(c);
            Py_XDECREF(v);
            return c;
        }
        case OUT_CALL: {
            PyObject *args = PyTuple_New(o->v);
            for (int32_t i = 0; args && i < o->v; i++) {
                PyObject *c = rebuild_out(C, vals, slots, at, memo);
                if (c) PyTuple_SET_ITEM(args, i, c);
                else Py_CLEAR(args);
            }
            PyObject *r = args ? PyObject_Call(o->obj, args, NULL) : NULL;
            Py_XDECREF(args);
            if (r && memo) memo[pos] = Py_NewRef(r); /* an ndarray named twice: one array */
            return r;
        }
        case OUT_FUNC: {
            PyObject *f = function_like(o->obj);
            Py_ssize_t ncells = f ? em_code_nfree((PyCodeObject *)PyFunction_GET_CODE(f)) : 0;
            PyObject *cl = f && ncells ? PyTuple_New(ncells) : NULL;
            int bad = !f || (ncells && !cl);
            if (f && memo) memo[pos] = Py_NewRef(f);
            for (int32_t i = 0; !bad && i < ncells; i++) {
                PyObject *c = rebuild_out(C, vals, slots, at, memo);
                if (c) PyTuple_SET_ITEM(cl, i, c);
                else bad = 1;
            }
            if (!bad && cl && PyFunction_SetClosure(f, cl)) bad = 1;
            if (!bad && o->v > ncells) { /* its defaults, made per call */
                PyObject *d = rebuild_out(C, vals, slots, at, memo);
                bad = !d || PyFunction_SetDefaults(f, d);
                Py_XDECREF(d);
            }
            if (bad) Py_CLEAR(f);
            Py_XDECREF(cl);
            return f;
        }
        case OUT_GEN: {
            PyObject *r = rebuild_gen(C, vals, slots, at, memo);
            if (r && memo) memo[pos] = Py_NewRef(r);
            return r;
        }
        case OUT_DICT: {
            PyObject *d = PyDict_New();
            if (d && memo) memo[pos] = Py_NewRef(d);
            for (int32_t i = 0; i < o->v; i++) {
                PyObject *v = d ? rebuild_out(C, vals, slots, at, memo) : NULL;
                if (!v || PyDict_SetItem(d, PyTuple_GET_ITEM(o->obj, i), v)) {
                    Py_XDECREF(v);
                    Py_XDECREF(d);
                    return NULL;
                }
                Py_DECREF(v);
            }
            return d;
        }
        default: PyErr_SetString(PyExc_SystemError, "ember: bad output"); return NULL;
    }
}

EM_NEW PyObject *em_rt_call(EmCompiled *C, PyObject *const *slots, int32_t *failed_at) {
    const EmGraph *G = &C->G;
    int32_t n = G->nodes.len;
    PyObject *stackvals[64], **vals = n <= 64 ? stackvals : PyMem_Calloc((size_t)n, sizeof(PyObject *));
    PyObject *res = NULL;
    *failed_at = -1;
    if (!vals) return PyErr_NoMemory();
    int32_t r = 0;
    if (C->py_state == EMR_PY_PENDING || C->py_state == EMR_PY_READY) {
        memset(vals, 0, sizeof(PyObject *) * (size_t)n);
        int ops_raised = 0, rc = em_rt_py_run(C, slots, vals, &ops_raised);
        if (ops_raised) *failed_at = n; /* somewhere in the graph */
        if (rc < 0) goto done; /* r = 0: em_rt_py_run left nothing in vals */
        if (rc == 0) r = n;    /* the outputs are in vals; the rest stays NULL */
    }
    for (; r < n; r++) {
        const EmNode *nd = &G->nodes.data[r];
        vals[r] = nd->op == EMOP_INPUT ? Py_NewRef(slots[C->input_slots[nd->aux]]) : run_node(G, nd, vals);
        if (!vals[r]) {
            *failed_at = r;
            goto done;
        }
        for (int32_t k = C->free_at[r]; k < C->free_at[r + 1]; k++) Py_CLEAR(vals[C->frees[k]]);
    }
    int32_t at = 0;
    PyObject **memo = C->has_same ? PyMem_Calloc((size_t)C->nout, sizeof(PyObject *)) : NULL;
    if (C->has_same && !memo) {
        PyErr_NoMemory();
        goto done;
    }
    for (int32_t i = 0; i < C->npins; i++) Py_XINCREF(slots[C->pins[i]]);
    res = C->nout ? rebuild_out(C, vals, slots, &at, memo) : Py_NewRef(Py_None);
    for (int32_t i = 0; i < C->npins; i++) Py_XDECREF(slots[C->pins[i]]);
    for (int32_t i = 0; memo && i < C->nout; i++) Py_XDECREF(memo[i]);
    PyMem_Free(memo);
done:
    if (!res && C->on_error) { /* put global state back as the graph found it */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *x = PyObject_CallNoArgs(C->on_error);
        if (!x) PyErr_Clear();
        Py_XDECREF(x);
        PyErr_Restore(et, ev, tb);
    }
    /* values still alive: outputs, and everything after a failure */
    for (int32_t i = 0; i < r; i++)
        if (C->is_output[i] || r < n) Py_XDECREF(vals[i]);
    if (vals != stackvals) PyMem_Free(vals);
    return res;
}
