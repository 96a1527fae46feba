/* em_obj.c: Python objects the trace changes. Instances made while tracing (a class whose
 * __new__ is object's or a builtin container's: dict, OrderedDict, set, frozenset, list, tuple, and
 * whose metaclass keeps type.__call__) are SYM_NEW syms whose attributes and container contents
 * are tracked; the output tree makes them at run time. Attribute stores on objects from the frame are recorded and replayed by the output
 * tree (OUT_SETATTR) after the graph ran; reads in the same trace see the stored value.
 */
#include "../pyver/em_state.h"
#include "em_rec.h"
#include "structmember.h"

/* The Python function a class's __new__ (a staticmethod) wraps (borrowed: the staticmethod
 * holds it), or NULL (no error set) when it wraps none. */
static PyObject *py_new_func(PyTypeObject *cls) {
    PyObject *nw = _PyType_Lookup(cls, EM_STR(dunder_new));
    if (!nw || !Py_IS_TYPE(nw, &PyStaticMethod_Type)) return NULL;
    PyObject *f = PyObject_GetAttrString(nw, "__func__");
    Py_XDECREF(f); /* kept alive by nw */
    if (!f) PyErr_Clear();
    return f && PyFunction_Check(f) ? f : NULL;
}

/* The first builtin (non-heap) class in cls's MRO when instances of cls can be made while
 * tracing: object or a container em_new_content models, with type.__call__, and the base's
 * __new__ (*custom 0) or a Python __new__ of cls's (*custom 1, traced; it makes the instance
 * through the base's). */
static PyTypeObject *builtin_base_of(PyTypeObject *cls, int *custom, int type_call) {
    *custom = 0;
    if (!type_call && Py_TYPE(cls)->tp_call != PyType_Type.tp_call) return NULL;
    PyObject *mro = cls->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (b->tp_flags & Py_TPFLAGS_HEAPTYPE) continue;
        int ok = b == &PyBaseObject_Type || b == &PyDict_Type || b == &PySet_Type || b == &PyFrozenSet_Type ||
                 b == &PyList_Type || b == &PyTuple_Type || b == (PyTypeObject *)EM_KNOWN(OrderedDict);
        if (!ok || (cls->tp_alloc != b->tp_alloc && cls->tp_alloc != PyType_GenericAlloc)) return NULL;
        if (cls->tp_new == b->tp_new) return b;
        *custom = py_new_func(cls) != NULL;
        return *custom ? b : NULL;
    }
    return NULL;
}

/* builtin_base_of for a call of cls itself (its metaclass's __call__ type's). */
static PyTypeObject *builtin_base(PyTypeObject *cls, int *custom) { return builtin_base_of(cls, custom, 0); }

PyTypeObject *em_new_content_type(const EmSym *s) {
    if (s->kind != SYM_NEW || s->items.len < 2) return NULL;
    PyObject *mro = Py_TYPE(s->obj)->tp_mro;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(b->tp_flags & Py_TPFLAGS_HEAPTYPE)) return b;
    }
    return NULL;
}

EmSym *em_new_dict_items(const EmSym *s) {
    PyTypeObject *base = em_new_content_type(s);
    return base && PyType_IsSubtype(base, &PyDict_Type) && s->items.data[1]->kind == SYM_DICT ? s->items.data[1] : NULL;
}

/* The builtin container type base's constructor called on args: the contents of an instance of
 * a subclass (a DICT, LIST, or a set: CONST or SET sym). */
static EmStatus make_content(EmTracer *T, PyTypeObject *base, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    int dict = PyType_IsSubtype(base, &PyDict_Type);
    if (kwnames && !dict) return em_trace_fail(T, EMA_CALL, "%s() with keyword arguments", base->tp_name);
    EmSym *ctor = em_sym_known(T, dict ? (PyObject *)&PyDict_Type : (PyObject *)base, base->tp_name);
    EmStatus st = ctor ? em_call(T, ctor, NULL, args, nargs, kwnames, out) : EM_ERR;
    if (st != EM_OK) return st;
    EmSymKind want = dict ? SYM_DICT : base == &PyList_Type ? SYM_LIST : base == &PyTuple_Type ? SYM_TUPLE : SYM_SET;
    if (want == SYM_TUPLE && (*out)->kind == SYM_CONST && PyTuple_CheckExact((*out)->obj)) { /* tuple of constants */
        EmSym *t = em_sym_new(T, SYM_TUPLE);
        for (Py_ssize_t i = 0; t && i < PyTuple_GET_SIZE((*out)->obj); i++) {
            EmSym *c = em_sym_const(T, PyTuple_GET_ITEM((*out)->obj, i));
            if (!c || em_vec_push(&t->items, c)) t = c ? (PyErr_NoMemory(), NULL) : NULL;
        }
        if (!(*out = t)) return EM_ERR;
    }
    int ok = (*out)->kind == want && !(*out)->seq_type;
    if (want == SYM_SET)
        ok = (*out)->kind == SYM_SET ? (*out)->seq_type == (PyObject *)base
                                     : (*out)->kind == SYM_CONST && Py_IS_TYPE((*out)->obj, base);
    return ok ? EM_OK : em_trace_fail(T, EMA_CALL, "%s() contents of a %s", base->tp_name, em_sym_describe(*out));
}

/* A new instance of tp (a class builtin_base takes) with no attributes: a NEW sym over a
 * placeholder the base's __new__ makes (no user code runs), its contents base's empty value. */
static EmStatus make_instance(EmTracer *T, PyTypeObject *tp, PyTypeObject *base, EmSym **out) {
    PyObject *empty = PyTuple_New(0);
    PyObject *ph = empty ? base->tp_new(tp, empty, NULL) : NULL; /* the placeholder: an empty instance */
    Py_XDECREF(empty);
    if (!ph) return em_trace_abandon(T, EMA_CALL, "%s() while tracing", tp->tp_name);
    EmSym *s = em_sym_new(T, SYM_NEW), *attrs = em_sym_new(T, SYM_DICT), *items = NULL;
    if (!s || !attrs) {
        Py_DECREF(ph);
        return EM_ERR;
    }
    s->obj = ph;
    EmStatus st = base != &PyBaseObject_Type ? make_content(T, base, NULL, 0, NULL, &items) : EM_OK;
    if (st != EM_OK) return st;
    if (em_vec_push(&s->items, attrs) || (items && em_vec_push(&s->items, items))) return PyErr_NoMemory(), EM_ERR;
    *out = s;
    return EM_OK;
}

/* The base's own __init__ (or frozenset's __new__) on the call's arguments: s's contents
 * replaced (set's and list's __init__ clear first; dict's adds). */
static EmStatus init_content(EmTracer *T, EmSym *s, PyTypeObject *base, EmSym **args, int nargs, PyObject *kwnames) {
    EmSym *c = NULL;
    if (PyType_IsSubtype(base, &PyDict_Type) && s->items.data[1]->items.len)
        return em_trace_fail(T, EMA_CALL, "dict.__init__ of a dict that has items");
    EmStatus st = make_content(T, base, args, nargs, kwnames, &c);
    if (st == EM_OK) s->items.data[1] = c;
    return st;
}

/* A real instance like s (its class, its contents' known values; no attributes) made with C's
 * own functions, no user code run: new reference, NULL without an error when not known. */
static EM_NEW PyObject *new_like(EmTracer *T, EmSym *s, PyTypeObject *ct) {
    PyObject *c = em_sym_value(T, s->items.data[1]);
    if (!c) return NULL;
    PyObject *args = em_new_frozen(ct) ? PyTuple_Pack(1, c) : PyTuple_New(0);
    PyObject *inst = args ? ct->tp_new(Py_TYPE(s->obj), args, NULL) : NULL, *k, *v;
    Py_XDECREF(args);
    int rc = inst ? 0 : -1;
    if (inst && ct == &PySet_Type) {
        PyObject *it = PyObject_GetIter(c);
        while (it && !rc && (v = PyIter_Next(it))) {
            rc = PySet_Add(inst, v);
            Py_DECREF(v);
        }
        rc = !it || PyErr_Occurred() ? -1 : rc;
        Py_XDECREF(it);
    } else if (inst && ct == &PyList_Type) {
        for (Py_ssize_t i = 0; !rc && i < PyList_GET_SIZE(c); i++) rc = PyList_Append(inst, PyList_GET_ITEM(c, i));
    } else if (inst && !em_new_frozen(ct)) {
        Py_ssize_t p = 0;
        while (!rc && PyDict_Next(c, &p, &k, &v)) rc = PyDict_SetItem(inst, k, v);
    }
    Py_DECREF(c);
    if (rc) Py_CLEAR(inst);
    return inst;
}

EM_NEW PyObject *em_new_repr(EmTracer *T, EmSym *s) {
    /* a set or frozenset subclass's instance from the frame: its contents guarded (em_frame_items) */
    int frame_set = s->kind == SYM_OBJ && s->src >= 0 && !s->by_id && PyAnySet_Check(s->obj) &&
                    !PySet_CheckExact(s->obj) && !PyFrozenSet_CheckExact(s->obj);
    PyTypeObject *ct = frame_set ? (PySet_Check(s->obj) ? &PySet_Type : &PyFrozenSet_Type) : em_new_content_type(s);
    if (!ct || ct == (PyTypeObject *)EM_KNOWN(OrderedDict)) return NULL; /* OrderedDict's repr reads items() */
    PyTypeObject *tp = Py_TYPE(s->obj);
    PyObject *obj_str = _PyType_Lookup(&PyBaseObject_Type, EM_STR(dunder_str));
    if (_PyType_Lookup(tp, EM_STR(dunder_repr)) != _PyType_Lookup(ct, EM_STR(dunder_repr)) ||
        _PyType_Lookup(tp, EM_STR(dunder_str)) != obj_str)
        return NULL;
    EmSym *items = NULL;
    if (frame_set && em_frame_items(T, s, &items) != EM_OK) return NULL;
    PyObject *inst = frame_set ? Py_NewRef(s->obj) : new_like(T, s, ct);
    PyObject *r = inst ? PyObject_Repr(inst) : NULL;
    Py_XDECREF(inst);
    if (!r) PyErr_Clear();
    return r;
}

EmStatus em_new_content_call(EmTracer *T, PyObject *fn, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    PyTypeObject *ct = em_new_content_type(self);
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(fn));
    if (!n) return EM_ERR;
    EmSym *c = self->items.data[1];
    EmStatus st;
    if (!strcmp(n, "__init__")) { /* a subclass's __init__ calling its base's */
        int dict = PyType_IsSubtype(ct, &PyDict_Type);
        st = nargs && !dict ? init_content(T, self, ct, args, nargs, NULL)
             : nargs        ? em_dict_update(T, c, args, nargs, NULL, out)
                            : EM_OK;
        return st == EM_OK ? ((*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR) : st;
    }
    return em_builtin_on_items(T, fn, self, c, args, nargs, out);
}

EmStatus em_builtin_on_items(EmTracer *T, PyObject *fn, EmSym *self, EmSym *items, EmSym **args, int nargs,
                             EmSym **out) {
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(fn));
    if (!n) return EM_ERR;
    int inplace = 0;
    EmStatus st = em_slot_call(T, n, items, args, nargs, out, &inplace);
    PyObject *missing = !strcmp(n, "__getitem__") && nargs == 1 && PyDict_Check(self->obj)
                            ? _PyType_Lookup(Py_TYPE(self->obj), EM_STR(dunder_missing))
                            : NULL;
    if (st == EM_ABORT && missing && PyFunction_Check(missing) && T->exc &&
        PyErr_GivenExceptionMatches(T->exc, PyExc_KeyError)) { /* dict's subscript asks a subclass's __missing__ */
        Py_CLEAR(T->exc);
        return em_call_dunder(T, self, "__missing__", args, 1, out);
    }
    if (st == EM_OK && inplace && !((*out)->kind == SYM_CONST && (*out)->obj == Py_NotImplemented)) *out = self;
    if (st != CALL_NEXT) return st;
    if (!Py_IS_TYPE(fn, &PyMethodDescr_Type))
        return em_trace_fail(T, EMA_CALL, "%s.%s of a %s", PyDescr_TYPE(fn)->tp_name, n, em_sym_describe(self));
    EmSym *f = em_sym_const(T, fn);
    return f ? em_call(T, f, items, args, nargs, NULL, out) : EM_ERR;
}

/* object.__new__(cls) (dict's, OrderedDict's) called by a class's own __new__: the instance,
 * not initialized. CALL_NEXT for other calls. */
EmStatus em_obj_base_new(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    if (!PyCFunction_Check(f) || strcmp(((PyCFunctionObject *)f)->m_ml->ml_name, "__new__") || n < 1) return CALL_NEXT;
    PyObject *b = PyCFunction_GET_SELF(f), *cls = all[0]->obj;
    if ((all[0]->kind != SYM_CONST && all[0]->kind != SYM_OBJ) || !PyType_Check(cls) || !PyType_Check(b))
        return CALL_NEXT;
    if (kwnames && b != (PyObject *)&PyDict_Type && b != (PyObject *)&PyList_Type)
        return CALL_NEXT; /* dict's and list's (PyType_GenericNew) ignore their arguments */
    /* object.__new__ takes the class only; frozenset's and tuple's its contents; the others ignore the rest */
    if ((b == (PyObject *)&PyBaseObject_Type && n != 1) || (em_new_frozen((PyTypeObject *)b) && n > 2))
        return CALL_NEXT;
    int custom;
    /* b's __new__ or one the base shares (OrderedDict's is dict's) */
    PyTypeObject *base = builtin_base((PyTypeObject *)cls, &custom);
    if (!base || (base != (PyTypeObject *)b && base->tp_new != ((PyTypeObject *)b)->tp_new)) return CALL_NEXT;
    EmStatus gst;
    if (em_guard_class(T, (PyTypeObject *)cls, &gst) != EM_OK) return gst;
    EmStatus st = make_instance(T, (PyTypeObject *)cls, base, out);
    if (st == EM_OK && em_new_frozen(base) && n == 2) st = init_content(T, *out, base, all + 1, 1, NULL);
    return st;
}

/* A module class of torch.nn (not a user's: its __init__ runs no user code) called with
 * constant arguments: made now (ember._rules.make_torch_module: on the meta device, the
 * random state kept) when it holds no tensors (nn.ReLU(), nn.Dropout(p), nn.Flatten()), so
 * that every call's new module would compute the same; it is then read like a module of the
 * frame through a constant slot (returned, it is the same object on every call). Others
 * (*handled = 0), and user module classes, are made like any instance: Module.__init__ and the
 * class's own traced, the module a NEW sym (em_inline.c new_module_call runs its forward). */
static EmStatus new_torch_module(EmTracer *T, PyTypeObject *tp, EmSym **args, int nargs, PyObject *kwnames, EmSym **out,
                                 int *handled) {
    PyObject *mod = PyObject_GetAttrString((PyObject *)tp, "__module__");
    const char *mn = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    int torch_nn = mn && !strncmp(mn, "torch.nn.", 9);
    Py_XDECREF(mod);
    if (!torch_nn) return PyErr_Occurred() ? EM_ERR : EM_OK;
    for (int i = 0; i < nargs; i++)
        if (em_sym_has_tensor(args[i])) return EM_OK;
    PyObject *spec = em_call_spec(T, (PyObject *)tp, args, nargs, kwnames);
    PyObject *m = spec ? PyObject_CallMethod(em_state.meta_run, "make_torch_module", "(O)", spec) : NULL;
    Py_XDECREF(spec);
    EmStatus st = m || !PyErr_Occurred() ? EM_OK : EM_ERR;
    if (m && m != Py_None) {
        int32_t slot = em_guard_const_owned(T->P, m, tp->tp_name);
        *out = slot < 0 ? NULL : em_sym_wrap(T, m, slot, &st);
        *handled = *out != NULL;
    }
    Py_XDECREF(m);
    return st;
}

/* nn.Parameter(data, requires_grad=True) of a tensor: data.detach() in the graph, made to
 * require grad there when asked (a leaf made in the graph, as torch.ones(..., requires_grad=True)
 * is); its meta tensor a Parameter (isinstance), and where it leaves the trace the output tree
 * makes the graph's tensor one (build_out). *handled = 0 for other arguments. */
static EmStatus new_parameter(EmTracer *T, EmSym **args, int nargs, PyObject *kwnames, EmSym **out, int *handled) {
    static const char *const names[] = {"data", "requires_grad"};
    EmSym *bound[2] = {NULL, NULL};
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (npos > 2) return EM_OK;
    for (int i = 0; i < npos; i++) bound[i] = args[i];
    for (int i = 0; i < nkw; i++) {
        const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
        int at = !k ? -1 : !strcmp(k, names[0]) ? 0 : !strcmp(k, names[1]) ? 1 : -1;
        if (at < 0 || bound[at]) return PyErr_Occurred() ? EM_ERR : EM_OK;
        bound[at] = args[npos + i];
    }
    EmSym *data = bound[0], *rg = bound[1];
    if (!data || data->kind != SYM_TENSOR || (rg && (rg->kind != SYM_CONST || !PyBool_Check(rg->obj)))) return EM_OK;
    *handled = 1;
    int grad = !rg || rg->obj == Py_True;
    PyObject *detach = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "detach");
    EmSym *fn = detach ? em_sym_const(T, detach) : NULL, *p = NULL;
    Py_XDECREF(detach);
    EmStatus st = fn ? em_call(T, fn, data, NULL, 0, NULL, &p) : EM_ERR;
    if (st == EM_OK && grad) {
        PyObject *req = PyObject_GetAttrString((PyObject *)em_state.tensor_type, "requires_grad_");
        EmSym *rfn = req ? em_sym_const(T, req) : NULL, *r = NULL;
        Py_XDECREF(req);
        st = rfn ? em_call(T, rfn, p, NULL, 0, NULL, &r) : EM_ERR;
        if (st == EM_OK && r != p) st = em_trace_fail(T, EMA_CALL, "requires_grad_ of a new parameter");
    }
    if (st != EM_OK) return st;
    if (p->kind != SYM_TENSOR || p->src >= 0)
        return em_trace_fail(T, EMA_CALL, "nn.Parameter of a %s", em_sym_describe(data));
    PyObject *m = em_sym_meta(T, p);
    PyObject *pm = m ? PyObject_CallMethod(em_state.meta_run, "meta_parameter", "OO", m, grad ? Py_True : Py_False)
                     : NULL;
    if (!pm) return EM_ERR;
    Py_SETREF(p->obj, pm);
    *out = p;
    return EM_OK;
}

/* The value of argument s of a namedtuple() call, or NULL (an error set, or none: not a known
 * immutable value). Field names may be a list (a tuple of them is kept). */
static EM_NEW PyObject *namedtuple_arg(EmTracer *T, EmSym *s, int field_names) {
    PyObject *v = em_sym_value(T, s);
    if (v && field_names && PyList_Check(v)) Py_SETREF(v, PySequence_Tuple(v));
    if (v && !em_is_pure(v)) Py_CLEAR(v);
    return v;
}

EmStatus em_known_namedtuple(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    (void)self;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = n - nkw;
    PyObject *args = PyTuple_New(npos), *kw = PyDict_New(), *cls = NULL, *spec = NULL;
    EmStatus st = args && kw ? EM_OK : EM_ERR;
    for (Py_ssize_t i = 0; st == EM_OK && i < n; i++) {
        PyObject *k = i < npos ? NULL : PyTuple_GET_ITEM(kwnames, i - npos);
        PyObject *v = namedtuple_arg(T, all[i], k ? !PyUnicode_CompareWithASCIIString(k, "field_names") : i == 1);
        if (!v) {
            st = PyErr_Occurred()
                     ? EM_ERR
                     : em_trace_fail(T, EMA_CALL, "collections.namedtuple of a %s", em_sym_describe(all[i]));
        } else if (!k) {
            PyTuple_SET_ITEM(args, i, v);
        } else {
            st = PyDict_SetItem(kw, k, v) ? EM_ERR : EM_OK;
            Py_DECREF(v);
        }
    }
    PyObject *mod = st == EM_OK ? PyDict_GetItemString(kw, "module") : NULL;
    if (st == EM_OK && (!mod || mod == Py_None)) { /* namedtuple's own default: its caller's module */
        PyObject *name = PyDict_GetItemWithError(T->globals, EM_STR(dunder_name));
        if (!name && PyErr_Occurred()) st = EM_ERR;
        else if (PyDict_SetItemString(kw, "module", name ? name : EM_STR(dunder_main))) st = EM_ERR;
    }
    if (st == EM_OK && !(cls = PyObject_Call(fn->obj, args, kw)))
        st = em_trace_abandon(T, EMA_CALL, "collections.namedtuple raised");
    /* the entry keeps the twin alive: guards watch its functions' globals, whose death would
     * invalidate it */
    if (st == EM_OK && em_guard_const_owned(T->P, cls, "namedtuple class") < 0) st = EM_ERR;
    if (st == EM_OK && !T->made_classes && !(T->made_classes = PyDict_New())) st = EM_ERR;
    if (st == EM_OK && (!(spec = PyTuple_Pack(2, args, kw)) || PyDict_SetItem(T->made_classes, cls, spec))) st = EM_ERR;
    if (st == EM_OK && !(*out = em_sym_const(T, cls))) st = EM_ERR;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(cls);
    Py_XDECREF(spec);
    return st;
}

/* em_obj_new; type_call: the call is type.__call__(cls, ...) (a metaclass __call__'s
 * super().__call__), which makes the instance whatever cls's metaclass is. */
static EmStatus obj_new(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out,
                        int *handled, int type_call);

EmStatus em_obj_new(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out, int *handled) {
    return obj_new(T, cls, args, nargs, kwnames, out, handled, 0);
}

EmStatus em_obj_type_call(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out,
                          int *handled) {
    return obj_new(T, cls, args, nargs, kwnames, out, handled, 1);
}

static EmStatus obj_new(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out,
                        int *handled, int type_call) {
    *handled = 0;
    if (!PyType_Check(cls)) return EM_OK;
    if (cls == (PyObject *)em_state.param_type) {
        EmStatus st = new_parameter(T, args, nargs, kwnames, out, handled);
        if (st != EM_OK || *handled) return st;
    }
    if (PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)em_state.nn_module_type)) {
        EmStatus st = new_torch_module(T, (PyTypeObject *)cls, args, nargs, kwnames, out, handled);
        if (st != EM_OK || *handled) return st;
    }
    int custom;
    PyTypeObject *tp = (PyTypeObject *)cls, *base = builtin_base_of(tp, &custom, type_call);
    /* a builtin container itself: its constructor's rules did not take these arguments (its
     * contents would be made by that very call again) */
    if (!base || (tp == base && base != &PyBaseObject_Type)) return EM_OK;
    EmStatus gst;
    if (em_guard_class(T, tp, &gst) != EM_OK) return gst;
    PyObject *init = _PyType_Lookup(tp, EM_STR(dunder_init));
    int py_init = init && PyFunction_Check(init);
    if (!py_init && nargs && base == &PyBaseObject_Type && !custom) return EM_OK; /* object() with arguments raises */
    *handled = 1;
    EmSym *s = NULL;
    if (custom) { /* cls.__new__(cls, *args), traced; __init__ runs on an instance of cls */
        EmSym *all[65];
        if (nargs + 1 > 65) return em_trace_fail(T, EMA_CALL, "%s() with too many arguments", tp->tp_name);
        if (!(all[0] = em_sym_known(T, cls, tp->tp_name))) return EM_ERR;
        for (int i = 0; i < nargs; i++) all[i + 1] = args[i];
        EmStatus st = em_inline(T, py_new_func(tp), all, nargs + 1, kwnames, &s);
        if (st != EM_OK) return st;
        if (s->kind != SYM_NEW || !PyObject_TypeCheck(s->obj, tp)) return (*out = s), EM_OK;
        if (!py_init && nargs && (base == &PyBaseObject_Type || base == &PyFrozenSet_Type))
            return em_trace_fail(T, EMA_CALL, "%s: a builtin __init__ with arguments", tp->tp_name);
    } else {
        EmStatus st = make_instance(T, tp, base, &s);
        if (st == EM_OK && em_new_frozen(base) &&
            (nargs || kwnames)) /* frozenset's and tuple's __new__ take the contents */
            st = init_content(T, s, base, args, nargs, kwnames);
        if (st != EM_OK) return st;
    }
    if (!py_init && base != &PyBaseObject_Type && !em_new_frozen(base) && (nargs || kwnames)) {
        EmStatus st = init_content(T, s, base, args, nargs, kwnames); /* the container's own __init__ */
        if (st != EM_OK) return st;
    }
    if (py_init) {
        EmSym *all[65], *r = NULL;
        if (nargs + 1 > 65) return em_trace_fail(T, EMA_CALL, "%s() with too many arguments", tp->tp_name);
        all[0] = s;
        for (int i = 0; i < nargs; i++) all[i + 1] = args[i];
        EmStatus st = em_inline(T, init, all, nargs + 1, kwnames, &r);
        if (st != EM_OK) return st;
        if (r->kind != SYM_CONST || r->obj != Py_None)
            return em_trace_fail(T, EMA_CALL, "%s.__init__ returned a value", tp->tp_name);
    }
    *out = s;
    return EM_OK;
}

EmSym *em_global_stored(EmTracer *T, PyObject *gdict, PyObject *name) {
    for (int32_t i = T->stores.len - 3; i >= 0; i -= 3) {
        PyObject *o = T->stores.data[i]->obj;
        if ((o == gdict || (o && PyModule_Check(o) && PyModule_GetDict(o) == gdict)) &&
            PyUnicode_Compare(T->stores.data[i + 1]->obj, name) == 0)
            return T->stores.data[i + 2];
    }
    return NULL;
}

/* An instance of the frame with an instance dict (not a class or module): its dict, else NULL. */
static PyObject *frame_instance_dict(const EmSym *s) {
    return s->kind == SYM_OBJ && s->src >= 0 && s->obj && !PyType_Check(s->obj) && !PyModule_Check(s->obj)
               ? em_obj_dict(s->obj)
               : NULL;
}

/* Whether instances a and b of the frame share their instance dict (torch.fx's AttrProxy shares
 * its module's __dict__), guarded either way: 1, 0, or -1 with an exception. */
static int same_instance_dict(EmTracer *T, EmSym *a, EmSym *b) {
    int32_t da = em_guard_attr(T->P, a->src, EM_STR(dunder_dict));
    int32_t db = da < 0 ? -1 : em_guard_attr(T->P, b->src, EM_STR(dunder_dict));
    if (db < 0) return -1;
    int same = em_obj_dict(a->obj) == em_obj_dict(b->obj);
    return em_guard_check(T->P, same ? EMG_SAME : EMG_DISTINCT, da, NULL, db) ? -1 : same;
}

/* Whether frame instance a's __dict__ is the instance dict d (EM_POS_IDICT), guarded either
 * way: 1, 0, or -1 with an exception. */
static int dict_of_instance(EmTracer *T, EmSym *a, EmSym *d) {
    int32_t da = em_guard_attr(T->P, a->src, EM_STR(dunder_dict));
    if (da < 0) return -1;
    int same = em_obj_dict(a->obj) == d->obj;
    return da == d->src || !em_guard_check(T->P, same ? EMG_SAME : EMG_DISTINCT, da, NULL, d->src) ? same : -1;
}

/* A data descriptor of o's type named name (a property): it, not the instance dict, answers o.name
 * (one without __get__ leaves reads to the instance dict). */
static int data_descr(PyObject *o, PyObject *name) {
    PyObject *descr = _PyType_Lookup(Py_TYPE(o), name);
    return descr && Py_TYPE(descr)->tp_descr_set && Py_TYPE(descr)->tp_descr_get;
}

EmSym *em_obj_stored(EmTracer *T, EmSym *base, PyObject *name) {
    PyObject *d = frame_instance_dict(base);
    for (int32_t i = T->stores.len - 3; i >= 0; i -= 3) {
        EmSym *b = T->stores.data[i];
        if (PyUnicode_Compare(T->stores.data[i + 1]->obj, name) != 0) continue;
        if (b == base) return T->stores.data[i + 2];
        /* a store into another instance's dict that may be this one's (guarded so), or into
         * its __dict__ as a dict (o.__dict__[name] = v), unless a data descriptor answers */
        int same = !d                                                       ? 0
                   : frame_instance_dict(b)                                 ? same_instance_dict(T, base, b)
                   : b->pos == EM_POS_IDICT && !data_descr(base->obj, name) ? dict_of_instance(T, base, b)
                                                                            : 0;
        if (same == 1) return T->stores.data[i + 2];
        if (same < 0) return PyErr_Clear(), NULL;
    }
    return NULL;
}

/* The dict a store recorded on b writes into: b's instance dict, or b itself (an instance
 * __dict__ stored into as a dict, EM_POS_IDICT); NULL for other bases. Borrowed. */
static PyObject *store_dict(const EmSym *b) {
    return b->kind != SYM_OBJ || !b->obj ? NULL : b->pos == EM_POS_IDICT ? b->obj : em_obj_dict(b->obj);
}

/* A recorded store (or deletion: em_store_deleted) applied to c, a copy of an instance dict. */
static EmStatus idict_apply(EmSym *c, PyObject *name, EmSym *v) {
    if (!em_store_deleted(v)) return em_dict_set(c, name, v);
    int i = em_dict_find(c, name);
    if (i == -2) return EM_ERR;
    if (i >= 0) em_dict_remove(c, i);
    return EM_OK;
}

EmStatus em_instance_dict(EmTracer *T, EmSym *d, EmSym **out) {
    for (int32_t i = 0; i < T->idict_real.len; i++)
        if (T->idict_real.data[i] == d->obj) return (*out = T->idict_copy.data[i]) ? EM_OK : EM_ERR;
    PyObject *v = d->obj, *k, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(v, &pos, &k, &item))
        if (!PyUnicode_CheckExact(k))
            return em_trace_fail(T, EMA_VALUE, "an instance dict with a %s key", Py_TYPE(k)->tp_name);
    if (em_guard_check_keys(T->P, d->src, v)) return EM_ERR;
    EmStatus st = EM_OK;
    EmSym *c = em_sym_new(T, SYM_DICT);
    for (pos = 0; c && PyDict_Next(v, &pos, &k, &item);) {
        int32_t islot = em_guard_dict(T->P, d->src, k);
        EmSym *is = islot < 0 ? NULL : em_sym_wrap(T, item, islot, &st);
        if (!is) return st != EM_OK ? st : EM_ERR;
        if (em_vec_push(&c->items, is) || em_vec_push(&c->keys, Py_NewRef(k))) return PyErr_NoMemory(), EM_ERR;
    }
    if (!c) return EM_ERR;
    for (int32_t i = 0; i < T->stores.len; i += 3) { /* stores made before, in order */
        EmSym *b = T->stores.data[i];
        if (store_dict(b) == v && idict_apply(c, T->stores.data[i + 1]->obj, T->stores.data[i + 2]) != EM_OK)
            return EM_ERR;
    }
    if (em_vec_push(&T->idict_real, v) || em_vec_push(&T->idict_copy, c)) return PyErr_NoMemory(), EM_ERR;
    *out = c;
    return EM_OK;
}

EmSym *em_obj_dict_stored(EmTracer *T, PyObject *d, PyObject *name) {
    for (int32_t i = T->stores.len - 3; i >= 0; i -= 3) {
        EmSym *b = T->stores.data[i];
        if (store_dict(b) == d && PyUnicode_Compare(T->stores.data[i + 1]->obj, name) == 0)
            return T->stores.data[i + 2];
    }
    return NULL;
}

/* A store on base goes to the copy of its instance dict the trace read whole, if any. */
static EmStatus idict_update(EmTracer *T, EmSym *base, PyObject *name, EmSym *v) {
    PyObject *d = T->idict_real.len ? store_dict(base) : NULL;
    for (int32_t i = 0; d && i < T->idict_real.len; i++)
        if (T->idict_real.data[i] == d) return idict_apply(T->idict_copy.data[i], name, v);
    return EM_OK;
}

EmStatus em_obj_record_store(EmTracer *T, EmSym *base, PyObject *name, EmSym *v) {
    if (idict_update(T, base, name, v) != EM_OK) return EM_ERR;
    if (base->kind == SYM_TENSOR && base->src >= 0 && em_trace_meta_changed(T, base)) return EM_ERR; /* t.tag = v */
    T->store_ver++;
    EmSym *ns = NULL;
    for (int32_t i = 0; i < T->stores.len; i += 3)
        if (T->stores.data[i] == base && PyUnicode_Compare(T->stores.data[i + 1]->obj, name) == 0) {
            /* moved to the end: the stores stay in the order of their last writes, which the
             * replay and the newest-first reads (em_obj_stored) rely on where two entries name
             * one dict (o.a = 1; o.__dict__["a"] = 2; o.a = 3) */
            ns = T->stores.data[i + 1];
            memmove(&T->stores.data[i], &T->stores.data[i + 3], (size_t)(T->stores.len - i - 3) * sizeof(EmSym *));
            T->stores.len -= 3;
            break;
        }
    if (!ns && !(ns = em_sym_const(T, name))) return EM_ERR;
    if (em_vec_push(&T->stores, base) || em_vec_push(&T->stores, ns) || em_vec_push(&T->stores, v))
        return PyErr_NoMemory(), EM_ERR;
    return EM_OK;
}

int em_new_slot(const EmSym *s, PyObject *descr) {
    if (s->kind != SYM_NEW || !descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type) || _PyObject_GetDictPtr(s->obj))
        return 0;
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == 16 /* T_OBJECT_EX */ && !(m->flags & 1 /* READONLY */);
}

EmStatus em_obj_generic_set(EmTracer *T, EmSym *base, PyObject *name, EmSym *v) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    /* a function made while tracing (f.__name__ = ...): set on the function the output makes */
    int made_fn = base->kind == SYM_OBJ && base->src < 0 && !base->by_id && PyFunction_Check(base->obj);
    if (made_fn) return em_obj_record_store(T, base, name, v);
    if (base->kind != SYM_NEW &&
        (base->kind != SYM_OBJ || base->src < 0 || PyType_Check(base->obj) || PyModule_Check(base->obj)))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a %s", n, em_sym_describe(base));
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *descr = _PyType_Lookup(tp, name);
    if (em_new_slot(base, descr)) return em_dict_set(base->items.data[0], name, v);
    PyObject *dset = em_user_descr_method(descr, EM_STR(dunder_set));
    if (dset) { /* a descriptor of a Python class: type(descr).__set__(descr, o, v), traced */
        if (base->src >= 0 && em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        EmSym *args[3] = {em_sym_known(T, descr, n), base, v}, *r = NULL;
        return args[0] ? em_inline(T, dset, args, 3, NULL, &r) : EM_ERR;
    }
    if (descr && Py_TYPE(descr)->tp_descr_set) {
        if (!Py_IS_TYPE(descr, &PyProperty_Type))
            return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s through a descriptor", n);
        PyObject *fset = PyObject_GetAttrString(descr, "fset");
        if (!fset) return EM_ERR;
        EmSym *args[2] = {base, v}, *r = NULL;
        EmStatus st = PyFunction_Check(fset) ? em_inline(T, fset, args, 2, NULL, &r)
                                             : em_trace_fail(T, EMA_SIDE_EFFECT, "store to property .%s", n);
        Py_DECREF(fset);
        return st;
    }
    if (base->kind == SYM_NEW && !_PyObject_GetDictPtr(base->obj)) /* __slots__ without __dict__ */
        return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a %s without __dict__", n, tp->tp_name);
    if (base->kind == SYM_NEW) return em_dict_set(base->items.data[0], name, v);
    if (base->src >= 0 && em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
    if (!_PyObject_GetDictPtr(base->obj))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a %s without __dict__", n, tp->tp_name);
    return em_obj_record_store(T, base, name, v);
}

static EmStatus no_attribute(EmTracer *T, PyTypeObject *tp, PyObject *name) {
    return em_trace_raise_msg(T, PyExc_AttributeError, "'%s' object has no attribute '%U'", tp->tp_name, name);
}

/* del o.name of an instance of the frame whose class keeps object's __setattr__/__delattr__ and
 * has no data descriptor of that name: recorded as a store of a deleted marker (em_store_deleted),
 * replayed as the removal from its __dict__ after the graph. The attribute must be there: stored
 * in this trace, or in the instance dict (guarded there), else AttributeError as Python's. */
static EmStatus del_frame_attr(EmTracer *T, EmSym *base, PyObject *name) {
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *d = em_obj_dict(base->obj); /* NULL: none made yet, so empty */
    if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
    EmSym *stored = T->stores.len ? em_obj_stored(T, base, name) : NULL;
    if (em_store_deleted(stored)) return no_attribute(T, tp, name);
    if (!stored) {
        int has = d && PyDict_Check(d) ? PyDict_Contains(d, name) : 0;
        if (has < 0) return EM_ERR;
        if (!has) return em_guard_check(T->P, EMG_ABSENT, base->src, name, 0) ? EM_ERR : no_attribute(T, tp, name);
        if (em_guard_odict(T->P, base->src, name) < 0) return EM_ERR; /* there (the load fails if not) */
    }
    EmSym *gone = em_sym_new(T, SYM_NULL);
    if (!gone) return EM_ERR;
    gone->pos = EM_POS_DELETED;
    return em_obj_record_store(T, base, name, gone);
}

EmStatus em_obj_generic_del(EmTracer *T, EmSym *base, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *descr = _PyType_Lookup(tp, name);
    int data = descr && Py_TYPE(descr)->tp_descr_set;
    if (base->kind == SYM_OBJ && base->src >= 0 && !PyType_Check(base->obj) && !PyModule_Check(base->obj) &&
        _PyObject_GetDictPtr(base->obj) && !data)
        return del_frame_attr(T, base, name);
    if (base->kind != SYM_NEW || (data && !em_new_slot(base, descr)))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "del .%s of a %s", n, em_sym_describe(base));
    EmSym *attrs = base->items.data[0];
    int i = em_dict_find(attrs, name);
    if (i == -2) return EM_ERR;
    if (i < 0) return no_attribute(T, tp, name);
    em_dict_remove(attrs, i);
    return EM_OK;
}

EmStatus em_obj_del_attr(EmTracer *T, EmSym *base, PyObject *name) {
    const char *n = PyUnicode_AsUTF8(name);
    if (!n) return EM_ERR;
    if (base->kind != SYM_OBJ && base->kind != SYM_NEW)
        return em_trace_fail(T, EMA_SIDE_EFFECT, "del .%s of a %s", n, em_sym_describe(base));
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *hook = _PyType_Lookup(tp, EM_STR(dunder_delattr));
    if (hook && PyFunction_Check(hook)) { /* the class's own __delattr__, traced */
        if (base->kind == SYM_OBJ && base->src >= 0 && em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0))
            return EM_ERR;
        EmSym *args[2] = {base, em_sym_const(T, name)}, *r = NULL;
        return args[1] ? em_inline(T, hook, args, 2, NULL, &r) : EM_ERR;
    }
    /* object's __delattr__ (a C type with its own setattro has its own): the generic deletion, also
     * through the slot function of a class defining only __setattr__ */
    if (hook != _PyType_Lookup(&PyBaseObject_Type, EM_STR(dunder_delattr)))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "del .%s of a %s (own __delattr__)", n, tp->tp_name);
    return em_obj_generic_del(T, base, name);
}

/* t.grad = v: None, or a tensor of t's sizes, dtype and device (what Tensor's setter checks;
 * another aborts, and the break runs it as Python, which raises as eager). The gradient does
 * not change what later ops compute: the store is replayed after the graph, and t.grad read
 * later in the trace is v. */
static EmStatus store_grad(EmTracer *T, EmSym *base, PyObject *name, EmSym *v) {
    int ok = v->kind == SYM_CONST && v->obj == Py_None;
    if (!ok && v->kind == SYM_TENSOR && base->ref >= 0 && v->ref >= 0) {
        const EmNode *a = &T->G->nodes.data[base->ref], *b = &T->G->nodes.data[v->ref];
        int same_dev = PyObject_RichCompareBool(base->device, v->device, Py_EQ);
        if (same_dev < 0) return EM_ERR;
        ok = a->dtype == b->dtype && a->ndim == b->ndim && same_dev;
        for (int d = 0; ok && d < a->ndim; d++) {
            EmStatus st = EM_OK;
            int32_t ea = em_node_dim(T, base->ref, d, &st), eb = ea < 0 ? -1 : em_node_dim(T, v->ref, d, &st);
            if (ea < 0 || eb < 0) return st;
            ok = ea == eb;
        }
    }
    if (!ok) return em_trace_fail(T, EMA_SIDE_EFFECT, "Tensor.grad = %s of another kind", em_sym_describe(v));
    return em_obj_record_store(T, base, name, v);
}

/* t.data = v: aten.shallow_copy_data_(t, v) in the graph under no_grad (t takes v's storage,
 * sizes and strides, keeps its identity, requires_grad and version: the property's setter), so
 * later ops see the new data and the frame's tensor is changed by the graph itself. v of another
 * dtype or device, or a torch without the op: a break, the store runs as Python. */
static EmStatus store_data(EmTracer *T, EmSym *base, EmSym *v) {
    int ok = em_state.set_data != Py_None && v->kind == SYM_TENSOR && base->ref >= 0 && v->ref >= 0;
    if (ok) {
        int same_dev = PyObject_RichCompareBool(base->device, v->device, Py_EQ);
        if (same_dev < 0) return EM_ERR;
        ok = same_dev && T->G->nodes.data[base->ref].dtype == T->G->nodes.data[v->ref].dtype;
    }
    if (!ok) return em_trace_fail(T, EMA_SIDE_EFFECT, "Tensor.data = %s", em_sym_describe(v));
    int g = T->grad;
    if (g && em_ctx_set_grad(T, 0) != EM_OK) return EM_ERR;
    EmSym *fn = em_sym_const(T, em_state.set_data), *args[2] = {base, v}, *r = NULL;
    EmStatus st = fn ? em_call(T, fn, NULL, args, 2, NULL, &r) : EM_ERR;
    if (st == EM_OK && r != base) st = em_trace_fail(T, EMA_SIDE_EFFECT, "Tensor.data = v not in place");
    return st == EM_OK && g ? em_ctx_set_grad(T, 1) : st;
}

/* e.name = v of an exception the trace made (a constant: raised or made from constants in
 * this trace, never one of the frame's) and a constant v: set on it now, as eager sets it on
 * the exception it makes, where the class keeps such names in its __dict__ or BaseException's
 * own descriptors (no other descriptor, no own __setattr__). */
static EmStatus exc_store_attr(EmTracer *T, PyObject *e, PyObject *name, PyObject *v) {
    PyTypeObject *tp = Py_TYPE(e);
    PyObject *descr = _PyType_Lookup(tp, name);
    /* BaseException's own C descriptors (__context__, __cause__, __suppress_context__, args...)
     * run no user code; their TypeError for a wrong value is raised in the trace */
    int base_descr = descr && descr == _PyType_Lookup((PyTypeObject *)PyExc_BaseException, name);
    if (tp->tp_setattro != PyObject_GenericSetAttr || (descr && !base_descr) || !_PyObject_GetDictPtr(e))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a %s", PyUnicode_AsUTF8(name), tp->tp_name);
    return PyObject_SetAttr(e, name, v) ? em_trace_raise_pending(T, "exception attribute store") : EM_OK;
}

EmStatus em_obj_store_attr(EmTracer *T, EmSym *base, PyObject *name, EmSym *v) {
    if (base->kind == SYM_TENSOR) { /* t.tag = v: an attribute of its __dict__, set after the graph ran */
        if (!PyUnicode_CompareWithASCIIString(name, "grad")) return store_grad(T, base, name, v);
        if (!PyUnicode_CompareWithASCIIString(name, "data")) return store_data(T, base, v);
        PyObject *descr = _PyType_Lookup(em_state.tensor_type, name);
        if (descr) /* a property of Tensor (.data, .grad, .requires_grad...) or a method: not modelled */
            return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a tensor", PyUnicode_AsUTF8(name));
        return em_obj_record_store(T, base, name, v);
    }
    if (base->kind == SYM_CONST && v->kind == SYM_CONST && PyExceptionInstance_Check(base->obj))
        return exc_store_attr(T, base->obj, name, v->obj);
    if (base->kind != SYM_NEW && base->kind != SYM_OBJ)
        return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a %s", PyUnicode_AsUTF8(name),
                             em_sym_describe(base));
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *hook = _PyType_Lookup(tp, EM_STR(dunder_setattr));
    if (hook && PyFunction_Check(hook)) { /* the class's own __setattr__, traced */
        if (base->kind == SYM_OBJ && base->src >= 0 && em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0))
            return EM_ERR;
        EmSym *args[3] = {base, em_sym_const(T, name), v}, *r = NULL;
        if (!args[1]) return EM_ERR;
        return em_inline(T, hook, args, 3, NULL, &r);
    }
    if (base->kind == SYM_OBJ && base->src >= 0 && em_thread_local(tp) && !_PyType_Lookup(tp, name)) {
        /* a threading.local's attribute: the calling thread's, set after the graph (OUT_SETATTR
         * through its own __setattr__) and read back in the trace */
        if (em_guard_check(T->P, EMG_TYPE, base->src, (PyObject *)tp, 0)) return EM_ERR;
        return em_obj_record_store(T, base, name, v);
    }
    /* a class defining only __delattr__ gets CPython's slot function, which calls object's __setattr__ */
    if (tp->tp_setattro != PyObject_GenericSetAttr &&
        hook != _PyType_Lookup(&PyBaseObject_Type, EM_STR(dunder_setattr)))
        return em_trace_fail(T, EMA_SIDE_EFFECT, "attribute store .%s on a %s (own __setattr__)",
                             PyUnicode_AsUTF8(name), tp->tp_name);
    return em_obj_generic_set(T, base, name, v);
}

/* The calls replayed on a set of the frame the trace changed: set.<method>(caller's set, *args)
 * each (OUT_CALL of the method descriptor). */
static EmStatus replay_set_calls(EmTracer *T, EmSym *c) {
    for (int32_t k = 0; k + 1 < c->of.len; k += 2) {
        PyObject *args = c->of.data[k + 1]->obj;
        EmOut call = {.kind = OUT_CALL, .v = 1 + (int32_t)PyTuple_GET_SIZE(args), .obj = Py_NewRef(c->of.data[k]->obj)};
        if (em_vec_push(&T->out, call)) return Py_DECREF(call.obj), PyErr_NoMemory(), EM_ERR;
        if (em_vec_push(&T->out, ((EmOut){.kind = OUT_SLOT, .v = c->src}))) return PyErr_NoMemory(), EM_ERR;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
            EmOut a = {.kind = OUT_CONST, .obj = Py_NewRef(PyTuple_GET_ITEM(args, i))};
            if (em_vec_push(&T->out, a)) return Py_DECREF(a.obj), PyErr_NoMemory(), EM_ERR;
        }
    }
    return EM_OK;
}

/* _rules.iter_advance(the frame's iterator, taken, ended): what the trace took from a frame's
 * list, tuple or range iterator (em_lazy_peek_make) taken from it. */
static EmStatus replay_iter_advance(EmTracer *T, EmSym *it, int taken, int ended) {
    PyObject *fn = PyObject_GetAttrString(em_state.meta_run, "iter_advance");
    PyObject *n = fn ? PyLong_FromLong(taken) : NULL;
    EmOut outs[4] = {{.kind = OUT_CALL, .v = 3, .obj = fn},
                     {.kind = OUT_SLOT, .v = it->src},
                     {.kind = OUT_CONST, .obj = n},
                     {.kind = OUT_CONST, .obj = Py_NewRef(ended ? Py_True : Py_False)}};
    int i = 0;
    for (; fn && n && i < 4; i++)
        if (em_vec_push(&T->out, outs[i])) break;
    if (i == 4) return EM_OK;
    for (int k = i; k < 4; k++) Py_XDECREF(outs[k].obj);
    return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
}

EmStatus em_obj_effects_head(EmTracer *T) {
    int32_t n = T->stores.len / 3;
    for (int32_t i = 0; i < T->mutated.len; i++)
        n += em_set_changed(T->mutated.data[i]) ? T->mutated.data[i]->of.len / 2 : 1;
    if (!n) return EM_OK;
    EmOut last = {.kind = OUT_LAST, .v = n + 1};
    if (em_vec_push(&T->out, last)) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < T->mutated.len; i++) {
        EmSym *c = T->mutated.data[i];
        int taken, ended;
        if (em_lazy_peek_taken(c, &taken, &ended)) {
            EmStatus st = replay_iter_advance(T, c, taken, ended);
            if (st != EM_OK) return st;
            continue;
        }
        if (em_set_changed(c)) {
            EmStatus st = replay_set_calls(T, c);
            if (st != EM_OK) return st;
            continue;
        }
        EmOut si = {.kind = OUT_SETITEMS, .v = 2};
        EmStatus st = em_vec_push(&T->out, si) ? (PyErr_NoMemory(), EM_ERR) : em_trace_build_out(T, c, 1);
        if (st == EM_OK) st = em_trace_build_content(T, c);
        if (st != EM_OK) return st;
    }
    for (int32_t i = 0; i < T->stores.len; i += 3) {
        int del = em_store_deleted(T->stores.data[i + 2]);
        EmOut so = {
            .kind = del ? OUT_DELATTR : OUT_SETATTR, .v = 2 - del, .obj = Py_NewRef(T->stores.data[i + 1]->obj)};
        if (em_vec_push(&T->out, so)) {
            Py_DECREF(so.obj);
            return PyErr_NoMemory(), EM_ERR;
        }
        EmStatus st = em_trace_build_out(T, T->stores.data[i], 1);
        if (st == EM_OK && !del) st = em_trace_build_out(T, T->stores.data[i + 2], 1);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}
