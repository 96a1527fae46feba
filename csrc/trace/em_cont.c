/* em_cont.c: Python containers the trace models — list, tuple and dict methods on container
 * syms (the kinds' method slots, em_sym_ops.h, one function per method of
 * em_cont_methods.def), dict(...) and the structural builtins tuple/list/enumerate/zip/reversed
 * over syms. Called from the call dispatch (em_call.c); consumes and produces syms, records no
 * graph ops. */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

void em_dict_remove(EmSym *d, int i) {
    Py_DECREF(d->keys.data[i]);
    for (int32_t k = i + 1; k < d->keys.len; k++) {
        d->keys.data[k - 1] = d->keys.data[k];
        d->items.data[k - 1] = d->items.data[k];
    }
    d->keys.len--;
    d->items.len--;
    d->kver++;
    d->mver++;
}

/* A list sym of d's keys, values or (key, value) tuples (what = 'k', 'v', 'i'). */
static EmSym *dict_view(EmTracer *T, EmSym *d, char what) {
    EmSym *r = em_sym_new(T, SYM_LIST);
    for (int32_t i = 0; r && i < d->keys.len; i++) {
        EmSym *k = what != 'v' ? em_dict_key_sym(T, d->keys.data[i]) : d->items.data[i], *it = k;
        if (k && what == 'i' && (it = em_sym_new(T, SYM_TUPLE)) &&
            (em_vec_push(&it->items, k) || em_vec_push(&it->items, d->items.data[i])))
            it = (PyErr_NoMemory(), NULL);
        if (!it || em_vec_push(&r->items, it)) r = NULL;
    }
    return r;
}

EmSym *em_view_items(EmTracer *T, EmSym *view) { return dict_view(T, view->items.data[0], em_view_what(view)); }

/* ---- methods of list, tuple and dict syms: reads on any, mutations only on containers made
 * while tracing (em_sym_own), and lookups in dicts read through a slot. Each is a row of
 * em_cont_methods.def; the kind's row of em_sym_ops[] picks the kind's set. ---- */

/* d.get(k[, default]), d.__getitem__(k), d.__contains__(k) with these arguments. */
static int is_key_read(EmContMethod m, int nargs) {
    return (m == EM_CM_get && (nargs == 1 || nargs == 2)) ||
           ((m == EM_CM___getitem__ || m == EM_CM___contains__) && nargs == 1);
}

/* The result of a key read (is_key_read) when key args[0] is in the dict (found, value v) or
 * not. */
static EmStatus key_result(EmTracer *T, EmContMethod m, int found, EmSym *v, EmSym **args, int nargs, EmSym **out) {
    if (m == EM_CM___contains__) *out = em_sym_const(T, found ? Py_True : Py_False);
    else if (found) *out = v;
    else if (m == EM_CM___getitem__) return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
    else *out = nargs == 2 ? args[1] : em_sym_const(T, Py_None);
    return *out ? EM_OK : EM_ERR;
}

/* A dict read through a slot (em_lazy_dict_get): key reads only. */
EmStatus em_frame_dict_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs,
                              EmSym **out) {
    if (!is_key_read(m, nargs)) {
        int whole = nargs == 0 && (m == EM_CM_keys || m == EM_CM_values || m == EM_CM_items || m == EM_CM_copy ||
                                   m == EM_CM___len__ || m == EM_CM___iter__);
        if (!whole || !PyDict_CheckExact(self->obj)) return em_trace_fail(T, EMA_SIDE_EFFECT, "dict.%s on an input", n);
        EmSym *c = NULL; /* a read of the whole dict: its copy, as the trace changed it */
        EmStatus st = em_instance_dict(T, self, &c);
        return st == EM_OK ? em_dict_method(T, m, n, c, args, nargs, out) : st;
    }
    int keyed = em_key_of_frame(args[0]);
    if (args[0]->kind != SYM_CONST && !keyed && !em_key_by_id(args[0]))
        return em_trace_fail(T, EMA_VALUE, "dict.%s by a %s", n, em_sym_describe(args[0]));
    int found = 0;
    EmSym *v = NULL;
    EmStatus st = keyed ? em_lazy_dict_get_keyed(T, self, args[0], &found, &v)
                        : em_lazy_dict_get(T, self, args[0]->obj, &found, &v);
    return st == EM_OK ? key_result(T, m, found, v, args, nargs, out) : st;
}

static EmStatus dict_key_read(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs,
                              EmSym **out) {
    PyObject *key;
    EmStatus st;
    int absent = em_dict_key(T, self, args[0], 0, &key, &st);
    if (absent < 0) return st;
    int i = absent ? -1 : em_dict_find(self, key);
    if (i == -2) return EM_ERR;
    if (i < 0 && m == EM_CM___getitem__ && args[0]->kind != SYM_CONST) /* KeyError(key): not a value here */
        return em_trace_fail(T, EMA_VALUE, "dict.%s of a missing %s key", n, em_sym_describe(args[0]));
    return key_result(T, m, i >= 0, i >= 0 ? self->items.data[i] : NULL, args, nargs, out);
}

/* seq.index(x), seq.count(x), x in seq (m), by value equality, as Python: only constants can be
 * compared while tracing (and an item that is x itself). index and `in` stop at the first
 * match, as Python's do (the items after it are never compared); remove (m) finds as index. */
/* An index bound of seq.index(x, start, stop) (an int, a symbolic one pinned) clamped as CPython
 * does for a sequence of len items. 1 done, 0 not an int, -1 error. */
static int index_bound(EmTracer *T, EmSym *s, Py_ssize_t len, Py_ssize_t *out) {
    if (s->kind == SYM_INT) {
        if (em_sym_specialize(T, s) != EM_OK) return -1;
        *out = (Py_ssize_t)em_size_hint(&T->sizes, s->expr);
    } else if (s->kind == SYM_CONST && PyLong_Check(s->obj)) {
        *out = PyNumber_AsSsize_t(s->obj, NULL); /* clipped to the Py_ssize_t range, as CPython's */
        if (*out == -1 && PyErr_Occurred()) return -1;
    } else {
        return 0;
    }
    if (*out < 0) *out += len;
    *out = *out < 0 ? 0 : *out > len ? len : *out;
    return 1;
}

static EmStatus seq_find_in(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym *x, Py_ssize_t lo,
                            Py_ssize_t hi, EmSym **out);

/* seq.index(x, start[, stop]) (args: x, start, stop). */
static EmStatus seq_index_from(EmTracer *T, const char *n, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    Py_ssize_t len = self->items.len, lo = 0, hi = len;
    int r = index_bound(T, args[1], len, &lo);
    if (r > 0 && nargs == 3) r = index_bound(T, args[2], len, &hi);
    if (r <= 0) return r < 0 ? EM_ERR : em_trace_fail(T, EMA_VALUE, "%s.index bounds", em_sym_describe(self));
    return seq_find_in(T, EM_CM_index, n, self, args[0], lo, hi, out);
}

static EmStatus seq_find(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym *x, EmSym **out) {
    return seq_find_in(T, m, n, self, x, 0, self->items.len, out);
}

static EmStatus seq_find_in(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym *x, Py_ssize_t lo,
                            Py_ssize_t hi, EmSym **out) {
    PyObject *want = x->kind == SYM_CONST ? x->obj : NULL;
    long cnt = 0, at = -1;
    for (Py_ssize_t i = lo; i < hi && (m == EM_CM_count || at < 0); i++) {
        EmSym *it = self->items.data[i];
        int eq = 0;
        if (!want || it->kind != SYM_CONST) { /* `it is x or it == x`, an __eq__ of theirs traced */
            EmStatus st = em_sym_items_eq(T, it, x, 0, &eq);
            if (st == CALL_NEXT && it->kind != SYM_TENSOR && x->kind != SYM_TENSOR) st = em_sym_eq_truth(T, it, x, &eq);
            if (st == CALL_NEXT)
                return em_trace_fail(T, EMA_VALUE, "%s.%s comparing a %s", em_sym_describe(self), n,
                                     em_sym_describe(it->kind != SYM_CONST ? it : x));
            if (st != EM_OK) return st;
        } else if ((eq = PyObject_RichCompareBool(it->obj, want, Py_EQ)) < 0) {
            return EM_ERR;
        }
        if (eq) {
            cnt++;
            if (at < 0) at = i;
        }
    }
    if ((m == EM_CM_index || m == EM_CM_remove) && at < 0) {
        if (!want && m == EM_CM_index && self->kind == SYM_LIST) /* its message holds repr(x) */
            return em_trace_fail(T, EMA_VALUE, "%s.%s of a %s not in it", em_sym_describe(self), n, em_sym_describe(x));
        PyObject *msg = m == EM_CM_remove ? PyUnicode_FromString("list.remove(x): x not in list")
                        : self->kind != SYM_LIST
                            ? PyUnicode_FromString("tuple.index(x): x not in tuple")
                            : PyUnicode_FromFormat("%R is not in %s", want, self->seq_type ? "deque" : "list");
        EmStatus st = msg ? em_trace_raise_new(T, PyExc_ValueError, msg) : EM_ERR;
        Py_XDECREF(msg);
        return st;
    }
    if (m == EM_CM___contains__) {
        *out = em_sym_const(T, cnt ? Py_True : Py_False);
        return *out ? EM_OK : EM_ERR;
    }
    PyObject *r = PyLong_FromLong(m == EM_CM_count ? cnt : at);
    *out = r ? em_sym_const(T, r) : NULL;
    Py_XDECREF(r);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus cont_len(EmTracer *T, EmSym *self, EmSym **out) {
    PyObject *len = PyLong_FromLong(self->items.len);
    *out = len ? em_sym_const(T, len) : NULL;
    Py_XDECREF(len);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus dict_iter_method(EmTracer *T, EmSym *self, EmSym **out) {
    EmSym *keys = dict_view(T, self, 'k'), *it = keys ? em_sym_new(T, SYM_ITER) : NULL;
    if (!it) return EM_ERR;
    it->seq_type = Py_NewRef((PyObject *)&PyDictIterKey_Type);
    EmStatus wst = em_iter_watch(T, it, self, 'k');
    if (wst != EM_OK) return wst;
    it->items = keys->items; /* moved */
    keys->items.data = NULL;
    keys->items.len = keys->items.cap = 0;
    *out = it;
    return EM_OK;
}

/* d.keys(), d.values(), d.items() (m): a live view. */
static EmStatus dict_view_method(EmTracer *T, EmContMethod m, EmSym *self, EmSym **out) {
    EmSym *v = em_sym_new(T, SYM_VIEW);
    if (!v || em_vec_push(&v->items, self)) return v ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    v->pos = m == EM_CM_keys ? 'k' : m == EM_CM_values ? 'v' : 'i';
    *out = v;
    return EM_OK;
}

/* d.keys(), d.values(), d.items() of an empty dict subclass read from the frame (an OrderedDict
 * of hooks): its emptiness guarded, a view of an empty dict. CALL_NEXT for other calls. */
EmStatus em_frame_dict_empty_view(EmTracer *T, PyObject *f, EmSym *self, int nargs, EmSym **out) {
    if (nargs || self->kind != SYM_OBJ || self->src < 0 || !PyDict_Check(self->obj) || PyDict_GET_SIZE(self->obj) ||
        !Py_IS_TYPE(f, &PyMethodDescr_Type) || !PyType_IsSubtype(Py_TYPE(self->obj), PyDescr_TYPE(f)))
        return CALL_NEXT;
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(f));
    if (!n) return EM_ERR;
    EmContMethod m = !strcmp(n, "keys")     ? EM_CM_keys
                     : !strcmp(n, "values") ? EM_CM_values
                     : !strcmp(n, "items")  ? EM_CM_items
                                            : EM_CM__COUNT;
    if (m == EM_CM__COUNT) return CALL_NEXT;
    if (em_guard_check(T->P, EMG_TYPE, self->src, (PyObject *)Py_TYPE(self->obj), 0) ||
        em_guard_check(T->P, EMG_LEN, self->src, NULL, 0))
        return EM_ERR;
    EmSym *d = em_sym_new(T, SYM_DICT);
    return d ? dict_view_method(T, m, d, out) : EM_ERR;
}

static EmStatus cont_copy(EmTracer *T, EmSym *self, EmSym **out) {
    int is_dict = self->kind == SYM_DICT;
    EmSym *c = em_sym_new(T, self->kind);
    if (c && self->kind != SYM_TUPLE && self->seq_type &&
        self->seq_type != (PyObject *)&PyDictProxy_Type) { /* an OrderedDict's, defaultdict's, deque's copy keeps
                                                             * its type (a class __dict__'s is a dict) */
        c->seq_type = Py_NewRef(self->seq_type);
        if (self->kind == SYM_LIST) c->spec = Py_XNewRef(self->spec); /* a deque's maxlen */
        if (self->of.len && em_vec_push(&c->of, self->of.data[0])) return PyErr_NoMemory(), EM_ERR;
    }
    for (int32_t i = 0; c && i < self->items.len; i++)
        if (em_vec_push(&c->items, self->items.data[i]) ||
            (is_dict && em_vec_push(&c->keys, Py_NewRef(self->keys.data[i]))))
            c = (PyErr_NoMemory(), NULL);
    *out = c;
    return c ? EM_OK : EM_ERR;
}

/* Before any other method, which would mutate self: self must be a container the trace made
 * or a list or dict from the frame (em_sym_mutable); the mutation is counted (mver) for the
 * iterators that read it. */
static EmStatus mutation_of(EmTracer *T, EmSym *self, const char *n) {
    int own = em_sym_mutable(T, self);
    if (own < 0) return EM_ERR;
    if (!own) return em_trace_fail(T, EMA_SIDE_EFFECT, "%s.%s on an input", em_sym_describe(self), n);
    self->mver++;
    return EM_OK;
}

static EmStatus none_out(EmTracer *T, EmSym **out) {
    *out = em_sym_const(T, Py_None);
    return *out ? EM_OK : EM_ERR;
}

static EmStatus extend_lazily(EmTracer *T, EmSym *self, EmSym *it, int left, EmSym **out);

/* list.extend(src): src a list, tuple or dict view, or any iterable whose items the trace knows
 * (an iterator is consumed, as Python consumes it: a lazy one an item at a time). */
static EmStatus list_extend(EmTracer *T, EmSym *self, EmSym *src, EmSym **out) {
    EmSym *seq = src;
    if (src->kind == SYM_ITER && !em_lazy_done(src)) return extend_lazily(T, self, src, 0, out);
    if (src->kind != SYM_LIST && src->kind != SYM_TUPLE) {
        EmStatus st = src->kind == SYM_ITER ? em_iter_use(T, src) : EM_OK;
        if (st != EM_OK || (st = em_seq_items(T, src, &seq)) != EM_OK) return st;
    }
    int32_t cnt = seq->items.len; /* the count before: l.extend(l) doubles l once */
    for (int32_t i = 0; i < cnt; i++)
        if (em_vec_push(&self->items, seq->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    return none_out(T, out);
}

static void list_drop(EmSym *self, Py_ssize_t i) {
    for (Py_ssize_t k = i + 1; k < self->items.len; k++) self->items.data[k - 1] = self->items.data[k];
    self->items.len--;
}

/* l.remove(x): the first item equal to x (seq_find's comparisons), ValueError when none. */
static EmStatus list_remove(EmTracer *T, EmSym *self, EmSym *x, EmSym **out) {
    EmSym *at = NULL;
    EmStatus st = seq_find(T, EM_CM_remove, "remove", self, x, &at);
    if (st != EM_OK) return st;
    list_drop(self, PyLong_AsSsize_t(at->obj));
    return none_out(T, out);
}

static EmStatus list_reverse(EmTracer *T, EmSym *self, EmSym **out) {
    for (int32_t i = 0, j = self->items.len - 1; i < j; i++, j--) {
        EmSym *t = self->items.data[i];
        self->items.data[i] = self->items.data[j];
        self->items.data[j] = t;
    }
    return none_out(T, out);
}

/* l.sort() of constants: Python's own stable sort of the values (list(range(n)).sort(key=vals
 * .__getitem__)), the syms permuted alike. Anything else (a tensor, a symbolic int) aborts. */
/* l.sort() of items that are not all constants (tuples of objects, objects with their own <):
 * _rules.keyed_sort traced on the items as their own keys, its order written into l. */
static EmStatus list_sort_traced(EmTracer *T, EmSym *self, EmSym **out) {
    static PyObject *ks; /* ember._rules.keyed_sort, owned for the process */
    if (!ks && !(ks = PyObject_GetAttrString(em_state.meta_run, "keyed_sort"))) return EM_ERR;
    EmSym *f = em_sym_const(T, ks), *tup = em_sym_new(T, SYM_TUPLE), *r = NULL;
    for (int32_t i = 0; tup && i < self->items.len; i++)
        if (em_vec_push(&tup->items, self->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    EmSym *args[3] = {tup, tup, em_sym_const(T, Py_False)};
    EmStatus st = f && tup && args[2] ? em_call(T, f, NULL, args, 3, NULL, &r) : EM_ERR;
    if (st != EM_OK) return st;
    if (r->kind != SYM_LIST || r->items.len != self->items.len) return em_trace_fail(T, EMA_VALUE, "list.sort");
    memcpy(self->items.data, r->items.data, sizeof(EmSym *) * (size_t)r->items.len);
    self->mver++;
    return none_out(T, out);
}

static EmStatus list_sort(EmTracer *T, EmSym *self, EmSym **out) {
    int32_t n = self->items.len;
    for (int32_t i = 0; i < n; i++)
        if (self->items.data[i]->kind != SYM_CONST) return list_sort_traced(T, self, out);
    PyObject *vals = PyList_New(n), *key = NULL, *order = PyList_New(n), *sort = NULL;
    EmSym **was = PyMem_Malloc(sizeof(EmSym *) * (size_t)(n ? n : 1));
    EmStatus st = EM_ERR;
    if (!vals || !order || !was) goto done;
    for (int32_t i = 0; i < n; i++) {
        PyObject *ix = PyLong_FromLong(i);
        if (!ix) goto done;
        PyList_SET_ITEM(vals, i, Py_NewRef(self->items.data[i]->obj));
        PyList_SET_ITEM(order, i, ix);
    }
    if (!(key = PyObject_GetAttr(vals, EM_STR(dunder_getitem))) || !(sort = PyObject_GetAttr(order, EM_STR(sort))))
        goto done;
    PyObject *kw = Py_BuildValue("{s:O}", "key", key), *r = kw ? PyObject_VectorcallDict(sort, NULL, 0, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(r);
    if (!r) { /* incomparable values: the comparisons traced, which raise as Python does */
        PyErr_Clear();
        st = list_sort_traced(T, self, out);
        goto done;
    }
    memcpy(was, self->items.data, sizeof(EmSym *) * (size_t)n);
    for (int32_t i = 0; i < n; i++) self->items.data[i] = was[PyLong_AsLong(PyList_GET_ITEM(order, i))];
    st = none_out(T, out);
done:
    if (st == EM_ERR && !PyErr_Occurred()) PyErr_NoMemory();
    PyMem_Free(was);
    Py_XDECREF(vals);
    Py_XDECREF(key);
    Py_XDECREF(sort);
    Py_XDECREF(order);
    return st;
}

/* The index argument of list.pop/insert (def when not given), as Python adjusts a negative one. */
static EmStatus list_index_arg(EmTracer *T, const char *n, EmSym *self, EmSym **args, int nargs, Py_ssize_t def,
                               Py_ssize_t *i) {
    *i = def;
    if (nargs >= 1) {
        if (args[0]->kind != SYM_CONST || !PyLong_Check(args[0]->obj))
            return em_trace_fail(T, EMA_CALL, "list.%s index", n);
        *i = PyLong_AsSsize_t(args[0]->obj); /* too large: Python's OverflowError */
        if (*i == -1 && PyErr_Occurred()) return em_trace_raise_pending(T, "list index too large");
    }
    if (*i < 0) *i += self->items.len;
    return EM_OK;
}

static EmStatus list_pop(EmTracer *T, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    Py_ssize_t i, len = self->items.len;
    EmStatus st = list_index_arg(T, "pop", self, args, nargs, -1, &i);
    if (st != EM_OK) return st;
    if (i < 0 || i >= len)
        return em_trace_raise_msg(T, PyExc_IndexError, len ? "pop index out of range" : "pop from empty list");
    *out = self->items.data[i];
    list_drop(self, i);
    return EM_OK;
}

static EmStatus list_insert(EmTracer *T, EmSym *self, EmSym **args, EmSym **out) {
    Py_ssize_t i, len = self->items.len;
    EmStatus st = list_index_arg(T, "insert", self, args, 2, 0, &i);
    if (st != EM_OK) return st;
    if (i < 0) i = 0;
    if (i > len) i = len;
    if (em_vec_push(&self->items, args[1])) return PyErr_NoMemory(), EM_ERR;
    for (Py_ssize_t k = len; k > i; k--) self->items.data[k] = self->items.data[k - 1];
    self->items.data[i] = args[1];
    return none_out(T, out);
}

/* A deque's own methods (appendleft, popleft, extendleft, rotate) and its pop(), which takes no
 * index and says "deque" when empty. CALL_NEXT: a method it shares with list. */
static EmStatus deque_method(EmTracer *T, const char *n, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    int left = !strcmp(n, "popleft");
    if ((left || !strcmp(n, "pop")) && nargs == 0) {
        if (!self->items.len) {
            PyObject *msg = PyUnicode_FromString("pop from an empty deque");
            EmStatus st = msg ? em_trace_raise_new(T, PyExc_IndexError, msg) : EM_ERR;
            Py_XDECREF(msg);
            return st;
        }
        *out = self->items.data[left ? 0 : self->items.len - 1];
        list_drop(self, left ? 0 : self->items.len - 1);
        return EM_OK;
    }
    if (!strcmp(n, "pop")) return em_trace_fail(T, EMA_CALL, "deque.pop with arguments");
    if (!strcmp(n, "appendleft") && nargs == 1) {
        PyObject *zero = PyLong_FromLong(0);
        EmSym *at = zero ? em_sym_const(T, zero) : NULL, *ins[2] = {at, args[0]};
        Py_XDECREF(zero);
        return at ? list_insert(T, self, ins, out) : EM_ERR;
    }
    if (!strcmp(n, "extendleft") && nargs == 1 && args[0]->kind == SYM_ITER && !em_lazy_done(args[0]))
        return extend_lazily(T, self, args[0], 1, out);
    if (!strcmp(n, "extendleft") && nargs == 1) {
        EmSym *items = NULL;
        EmStatus st = args[0]->kind == SYM_ITER ? em_iter_use(T, args[0]) : EM_OK;
        if (st != EM_OK || (st = em_seq_items(T, args[0], &items)) != EM_OK) return st;
        for (int32_t i = 0; i < items->items.len; i++) {
            if (em_vec_push(&self->items, NULL)) return PyErr_NoMemory(), EM_ERR;
            for (int32_t k = self->items.len - 1; k > 0; k--) self->items.data[k] = self->items.data[k - 1];
            self->items.data[0] = items->items.data[i];
        }
        return none_out(T, out);
    }
    if (!strcmp(n, "rotate") && nargs <= 1) {
        long r = 1, len = self->items.len;
        if (nargs && (args[0]->kind != SYM_CONST || !PyLong_CheckExact(args[0]->obj)))
            return em_trace_fail(T, EMA_VALUE, "deque.rotate by a %s", em_sym_describe(args[0]));
        if (nargs && (r = PyLong_AsLong(args[0]->obj)) == -1 && PyErr_Occurred()) return EM_ERR;
        if (len > 1 && (r %= len) != 0) {
            EmSym **tmp = malloc(sizeof(EmSym *) * (size_t)len);
            if (!tmp) return PyErr_NoMemory(), EM_ERR;
            for (long i = 0; i < len; i++) tmp[((i + r) % len + len) % len] = self->items.data[i];
            memcpy(self->items.data, tmp, sizeof(EmSym *) * (size_t)len);
            free(tmp);
        }
        return none_out(T, out);
    }
    return CALL_NEXT;
}

/* A bounded deque's maxlen (its spec), or -1. */
static Py_ssize_t deque_maxlen(const EmSym *s) {
    return s->kind == SYM_LIST && s->seq_type && s->spec ? PyLong_AsSsize_t(s->spec) : -1;
}

/* Drops items of a bounded deque beyond its maxlen: from the left (append, extend), or from the
 * right (appendleft, extendleft), as the deque itself drops them one at a time. */
static void deque_trim(EmSym *s, int from_left) {
    Py_ssize_t max = deque_maxlen(s);
    while (max >= 0 && s->items.len > max) list_drop(s, from_left ? 0 : s->items.len - 1);
}

/* l.extend(it) (deque.extendleft(it): left) of a lazy iterator: CPython's loop takes an item,
 * adds it (a bounded deque dropping one at the other end), then takes the next, so code the
 * iterator runs (a map's function, a generator) sees self grow. */
static EmStatus extend_lazily(EmTracer *T, EmSym *self, EmSym *it, int left, EmSym **out) {
    for (;;) {
        EmSym *v = NULL;
        EmStatus st = em_iter_take(T, it, &v);
        if (st != EM_OK) return st;
        if (!v) return none_out(T, out);
        if (em_vec_push(&self->items, v)) return PyErr_NoMemory(), EM_ERR;
        for (int32_t k = self->items.len - 1; left && k > 0; k--) self->items.data[k] = self->items.data[k - 1];
        if (left) self->items.data[0] = v;
        self->mver++;
        deque_trim(self, !left);
    }
}

EmStatus em_make_deque(EmTracer *T, PyObject *type, EmSym *src, PyObject *maxlen, EmSym **out) {
    EmSym *items = NULL, *d = em_sym_new(T, SYM_LIST);
    EmStatus st = !d ? EM_ERR : src && src->kind == SYM_ITER ? em_iter_use(T, src) : EM_OK;
    if (st != EM_OK || (src && (st = em_seq_items(T, src, &items)) != EM_OK)) return st;
    for (int32_t i = 0; items && i < items->items.len; i++)
        if (em_vec_push(&d->items, items->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    d->seq_type = Py_NewRef(type);
    d->spec = maxlen && maxlen != Py_None ? Py_NewRef(maxlen) : NULL;
    deque_trim(d, 1);
    *out = d;
    return EM_OK;
}

EM_NEW PyObject *em_deque_maker(const EmSym *s) {
    if (!s->spec) return Py_NewRef(s->seq_type);
    PyObject *args = PyTuple_Pack(1, s->seq_type), *kw = Py_BuildValue("{sO}", "maxlen", s->spec);
    PyObject *r = args && kw ? PyObject_Call(EM_KNOWN(partial), args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

EM_NEW PyObject *em_deque_from(const EmSym *s, EM_STEALS PyObject *items) {
    PyObject *make = items ? em_deque_maker(s) : NULL, *d = make ? PyObject_CallOneArg(make, items) : NULL;
    Py_XDECREF(make);
    Py_XDECREF(items);
    return d;
}

static EmStatus list_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs,
                            EmSym **out);

/* A bounded deque keeps its last maxlen items; insert into a full one raises. */
EmStatus em_list_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    Py_ssize_t max = deque_maxlen(self);
    if (max >= 0 && m == EM_CM_insert && nargs == 2 && self->items.len >= max) {
        PyObject *msg = PyUnicode_FromString("deque already at its maximum size");
        EmStatus st = msg ? em_trace_raise_new(T, PyExc_IndexError, msg) : EM_ERR;
        Py_XDECREF(msg);
        return st;
    }
    EmStatus st = list_method(T, m, n, self, args, nargs, out);
    if (st == EM_OK && max >= 0) deque_trim(self, strcmp(n, "appendleft") && strcmp(n, "extendleft"));
    return st;
}

static EmStatus list_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs,
                            EmSym **out) {
    if (self->seq_type && (m == EM_CM__COUNT || m == EM_CM_pop)) { /* a deque */
        EmStatus dst = mutation_of(T, self, n);
        if (dst == EM_OK) dst = deque_method(T, n, self, args, nargs, out);
        if (dst != CALL_NEXT) return dst;
    }
    switch (m) {
        case EM_CM_index:
        case EM_CM_count:
        case EM_CM___contains__:
            if (nargs == 1) return seq_find(T, m, n, self, args[0], out);
            if (m == EM_CM_index && (nargs == 2 || nargs == 3)) return seq_index_from(T, n, self, args, nargs, out);
            break;
        case EM_CM___len__:
            if (nargs == 0) return cont_len(T, self, out);
            break;
        case EM_CM_copy:
            if (nargs == 0) return cont_copy(T, self, out);
            break;
        default: break;
    }
    EmStatus st = mutation_of(T, self, n);
    if (st != EM_OK) return st;
    switch (m) {
        case EM_CM_append:
            if (nargs != 1) break;
            if (em_vec_push(&self->items, args[0])) return PyErr_NoMemory(), EM_ERR;
            return none_out(T, out);
        case EM_CM_extend:
            if (nargs == 1) return list_extend(T, self, args[0], out);
            break;
        case EM_CM_remove:
            if (nargs == 1) return list_remove(T, self, args[0], out);
            break;
        case EM_CM_clear:
            if (nargs != 0) break;
            self->items.len = 0;
            return none_out(T, out);
        case EM_CM_reverse:
            if (nargs == 0) return list_reverse(T, self, out);
            break;
        case EM_CM_sort:
            if (nargs == 0) return list_sort(T, self, out);
            break;
        case EM_CM_pop:
            if (nargs <= 1) return list_pop(T, self, args, nargs, out);
            if (nargs == 2) return em_trace_fail(T, EMA_CALL, "list.%s arguments", n);
            break;
        case EM_CM_insert:
            if (nargs == 2) return list_insert(T, self, args, out);
            if (nargs < 2) return em_trace_fail(T, EMA_CALL, "list.%s arguments", n);
            break;
        default: break;
    }
    return em_trace_fail(T, EMA_CALL, "%s.%s", em_sym_describe(self), n);
}

EmStatus em_size_numel(EmTracer *T, EmSym *size, EmSym **out) {
    PyObject *one = PyLong_FromLong(1), *mul = PyTuple_GET_ITEM(em_state.op_fns, EMOP_MUL);
    EmSym *acc = one ? em_sym_const(T, one) : NULL;
    Py_XDECREF(one);
    EmStatus st = acc ? EM_OK : EM_ERR;
    for (int32_t i = 0; st == EM_OK && i < size->items.len; i++)
        st = em_sym_binop(T, EMOP_MUL, mul, acc, size->items.data[i], &acc);
    if (st == EM_OK) *out = acc;
    return st;
}

EmStatus em_tuple_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs,
                         EmSym **out) {
    if (m == EM_CM__COUNT && nargs == 0 && self->seq_type == EM_KNOWN(torch_Size) && strcmp(n, "numel") == 0)
        return em_size_numel(T, self, out);
    if ((m == EM_CM_index || m == EM_CM_count || m == EM_CM___contains__) && nargs == 1)
        return seq_find(T, m, n, self, args[0], out);
    if (m == EM_CM_index && (nargs == 2 || nargs == 3)) return seq_index_from(T, n, self, args, nargs, out);
    EmStatus st = mutation_of(T, self, n); /* a tuple has none: the input's reason, else the call's */
    return st == EM_OK ? em_trace_fail(T, EMA_CALL, "%s.%s", em_sym_describe(self), n) : st;
}

/* d.pop(k[, default]). */
static EmStatus dict_pop(EmTracer *T, EmSym *self, PyObject *key, EmSym **args, int nargs, EmSym **out) {
    int i = key ? em_dict_find(self, key) : -1;
    if (i == -2) return EM_ERR;
    if (i < 0 && nargs == 1)
        return args[0]->kind == SYM_CONST ? em_trace_raise_new(T, PyExc_KeyError, args[0]->obj)
                                          : em_trace_fail(T, EMA_VALUE, "dict.pop of a missing key");
    *out = i >= 0 ? self->items.data[i] : args[1];
    if (i >= 0) em_dict_remove(self, i);
    return EM_OK;
}

/* d.setdefault(k[, default]) and d.__setitem__(k, v) (m). */
static EmStatus dict_store(EmTracer *T, EmContMethod m, EmSym *self, PyObject *key, EmSym **args, int nargs,
                           EmSym **out) {
    int i = em_dict_find(self, key);
    if (i == -2) return EM_ERR;
    if (m == EM_CM_setdefault && i >= 0) {
        *out = self->items.data[i];
        return EM_OK;
    }
    EmSym *v = nargs == 2 ? args[1] : em_sym_const(T, Py_None);
    if (!v) return EM_ERR;
    if (i >= 0) self->items.data[i] = v;
    else if (em_vec_push(&self->keys, Py_NewRef(key)) || em_vec_push(&self->items, v)) return PyErr_NoMemory(), EM_ERR;
    else self->kver++;
    if (m == EM_CM_setdefault) {
        *out = v;
        return EM_OK;
    }
    return none_out(T, out);
}

/* od.move_to_end(key[, last]) of an OrderedDict sym. */
static EmStatus odict_move_to_end(EmTracer *T, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    int last = 1;
    if (args[0]->kind != SYM_CONST || (nargs == 2 && args[1]->kind != SYM_CONST))
        return em_trace_fail(T, EMA_VALUE, "move_to_end of a %s", em_sym_describe(args[0]));
    if (nargs == 2 && (last = PyObject_IsTrue(args[1]->obj)) < 0) return EM_ERR;
    int i = em_dict_find(self, args[0]->obj);
    if (i == -2) return EM_ERR;
    if (i < 0) return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
    PyObject *k = self->keys.data[i];
    EmSym *v = self->items.data[i];
    int32_t to = last ? self->keys.len - 1 : 0, step = last ? 1 : -1;
    for (int32_t j = i; j != to; j += step) {
        self->keys.data[j] = self->keys.data[j + step];
        self->items.data[j] = self->items.data[j + step];
    }
    self->keys.data[to] = k;
    self->items.data[to] = v;
    self->kver++; /* the order changed: Python's iterators over it raise */
    return none_out(T, out);
}

static EmStatus dict_update(EmTracer *T, EmSym *self, EmSym *o, EmSym **out) {
    for (int32_t k = 0; k < o->keys.len; k++)
        if (em_dict_set(self, o->keys.data[k], o->items.data[k]) != EM_OK) return EM_ERR;
    return none_out(T, out);
}

/* The reads of a dict sym: 1 with *st set when m with nargs arguments is one, else 0. */
static int dict_read(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs, EmSym **out,
                     EmStatus *st) {
    if (is_key_read(m, nargs)) *st = dict_key_read(T, m, n, self, args, nargs, out);
    else if (nargs) return 0;
    else if (m == EM_CM___len__) *st = cont_len(T, self, out);
    else if (m == EM_CM___iter__) *st = dict_iter_method(T, self, out);
    else if (m == EM_CM_keys || m == EM_CM_values || m == EM_CM_items) *st = dict_view_method(T, m, self, out);
    else if (m == EM_CM_copy) *st = cont_copy(T, self, out);
    else return 0;
    return 1;
}

EmStatus em_dict_diverged(EmTracer *T, const char *what) {
    return em_trace_fail(T, EMA_VALUE, "%s an OrderedDict changed by dict's own methods (eager's order differs)", what);
}

EmStatus em_dict_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    EmStatus st;
    static const char *const ordered[] = {"keys",     "values",       "items",    "copy",    "popitem", "move_to_end",
                                          "__iter__", "__reversed__", "__repr__", "__str__", "__or__",  "__ror__",
                                          NULL};
    for (int i = 0; self->diverged && ordered[i]; i++)
        if (!strcmp(n, ordered[i])) return em_dict_diverged(T, n);
    if (dict_read(T, m, n, self, args, nargs, out, &st)) return st;
    if ((st = mutation_of(T, self, n)) != EM_OK) return st;
    int by_key = ((m == EM_CM_pop || m == EM_CM_setdefault) && nargs >= 1) || (m == EM_CM___setitem__ && nargs == 2);
    if (by_key && nargs <= 2) {
        PyObject *key;
        int absent = em_dict_key(T, self, args[0], m != EM_CM_pop, &key, &st);
        if (absent < 0) return st;
        return m == EM_CM_pop ? dict_pop(T, self, absent ? NULL : key, args, nargs, out)
                              : dict_store(T, m, self, key, args, nargs, out);
    }
    if (m == EM_CM___delitem__ && nargs == 1 && args[0]->kind == SYM_CONST) {
        int i = em_dict_find(self, args[0]->obj);
        if (i == -2) return EM_ERR;
        if (i < 0) return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
        em_dict_remove(self, i);
        return none_out(T, out);
    }
    if (m == EM_CM_update && nargs <= 1) return em_dict_update(T, self, args, nargs, NULL, out);
    if (m == EM_CM_clear && nargs == 0) {
        while (self->keys.len) em_dict_remove(self, self->keys.len - 1);
        return none_out(T, out);
    }
    int odict = self->seq_type && !strcmp(((PyTypeObject *)self->seq_type)->tp_name, "collections.OrderedDict");
    if (odict && m == EM_CM__COUNT && !strcmp(n, "move_to_end") && (nargs == 1 || nargs == 2))
        return odict_move_to_end(T, self, args, nargs, out);
    int last = 1; /* OrderedDict.popitem(last) */
    if (odict && m == EM_CM_popitem && nargs == 1 &&
        (args[0]->kind != SYM_CONST || (last = PyObject_IsTrue(args[0]->obj)) < 0))
        return args[0]->kind != SYM_CONST ? em_trace_fail(T, EMA_VALUE, "popitem(last=%s)", em_sym_describe(args[0]))
                                          : EM_ERR;
    if (m == EM_CM_popitem && nargs == (odict && nargs == 1)) { /* the last (first) item, a (key, value) tuple */
        if (!self->keys.len)
            return odict ? em_trace_raise_new(T, PyExc_KeyError, EM_STR(dictionary_is_empty))
                         : em_trace_raise_new(T, PyExc_KeyError, EM_STR(popitem_empty));
        int32_t i = last ? self->keys.len - 1 : 0;
        EmSym *k = em_dict_key_sym(T, self->keys.data[i]), *t = k ? em_sym_new(T, SYM_TUPLE) : NULL;
        if (!t || em_vec_push(&t->items, k) || em_vec_push(&t->items, self->items.data[i]))
            return t ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
        em_dict_remove(self, i);
        *out = t;
        return EM_OK;
    }
    return em_trace_fail(T, EMA_CALL, "%s.%s", em_sym_describe(self), n);
}

static EmStatus dict_add_pair(EmTracer *T, EmSym *d, EmSym *p, int32_t i);

EmStatus em_dict_update(EmTracer *T, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    EmStatus st = mutation_of(T, self, "update");
    if (st != EM_OK) return st;
    if (npos > 1) return em_trace_fail(T, EMA_CALL, "dict.update with %d positional arguments", (int)npos);
    if (npos == 1 && args[0]->kind == SYM_VIEW && args[0]->pos == 'm' && !nkw) /* from a mappingproxy: its dict */
        return dict_update(T, self, args[0]->items.data[0], out);
    if (npos == 1 && args[0]->kind == SYM_DICT && !nkw) return dict_update(T, self, args[0], out);
    EmSym *src = npos ? args[0] : NULL;
    /* a dict subclass's instance made while tracing whose iteration is dict's: its items, as
     * CPython's merge reads them (a subclass's own __iter__ or keys() would be called) */
    if (src && em_new_dict_items(src) && Py_TYPE(src->obj)->tp_iter == PyDict_Type.tp_iter && !nkw)
        return dict_update(T, self, em_new_dict_items(src), out);
    if (src && src->kind == SYM_OBJ && src->pos == EM_POS_IDICT) { /* o.__dict__: as the trace has it */
        if ((st = em_instance_dict(T, args[0], &src)) != EM_OK) return st;
        if (!nkw) return dict_update(T, self, src, out);
    }
    for (int32_t i = 0; npos == 1 && args[0]->kind == SYM_ITER && !em_lazy_done(args[0]); i++) {
        EmSym *p = NULL; /* pairs of a lazy iterator stored as taken, as CPython's loop does */
        if ((st = em_iter_take(T, args[0], &p)) != EM_OK) return st;
        if (!p) {
            npos = 0;
            break;
        }
        if ((st = dict_add_pair(T, self, p, i)) != EM_OK) return st;
    }
    if (npos == 0 && !nkw) return none_out(T, out);
    EmSym *tmp = NULL; /* the other mapping or pairs, then the keywords, as dict() would take them */
    st = em_make_dict(T, npos ? src : NULL, args + (nargs - nkw), kwnames, &tmp);
    return st == EM_OK ? dict_update(T, self, tmp, out) : st;
}

EmStatus em_make_dict_of(EmTracer *T, PyObject *type, EmSym *factory, EmSym *src, EmSym **kwvals, PyObject *kwnames,
                         EmSym **out) {
    EmStatus st = em_make_dict(T, src, kwvals, kwnames, out);
    if (st != EM_OK) return st;
    (*out)->seq_type = Py_NewRef(type);
    if (factory && !(factory->kind == SYM_CONST && factory->obj == Py_None) && em_vec_push(&(*out)->of, factory))
        return PyErr_NoMemory(), EM_ERR;
    return EM_OK;
}

EmStatus em_dict_missing(EmTracer *T, EmSym *d, PyObject *key, EmSym **out) {
    if (!d->of.len) return CALL_NEXT;
    EmStatus st = mutation_of(T, d, "__missing__");
    if (st == EM_OK) st = em_call(T, d->of.data[0], NULL, NULL, 0, NULL, out);
    return st == EM_OK ? em_dict_set(d, key, *out) : st;
}

EmStatus em_dict_fromkeys(EmTracer *T, EmSym *keys, EmSym *value, EmSym **out) {
    EmSym *items = NULL, *d = em_sym_new(T, SYM_DICT);
    EmStatus st = !d ? EM_ERR : keys->kind == SYM_ITER ? em_iter_use(T, keys) : EM_OK;
    if (st != EM_OK || (st = em_seq_items(T, keys, &items)) != EM_OK) return st;
    if (!value && !(value = em_sym_const(T, Py_None))) return EM_ERR;
    for (int32_t i = 0; st == EM_OK && i < items->items.len; i++) {
        EmSym *k = items->items.data[i];
        if (k->kind != SYM_CONST && (st = em_unhashable(T, k)) != CALL_NEXT) return st; /* [[]]: Python's TypeError */
        if (k->kind != SYM_CONST) return em_trace_fail(T, EMA_VALUE, "dict.fromkeys of a %s", em_sym_describe(k));
        if (PyObject_Hash(k->obj) == -1) return em_trace_raise_pending(T, "unhashable dict.fromkeys key");
        st = em_dict_set(d, k->obj, value);
    }
    if (st == EM_OK) *out = d;
    return st;
}

/* A user mapping (an instance of a Python class with keys(): a collections.abc.Mapping) as a
 * dict sym made while tracing, as dict(m) and {**m} read it: its keys (its keys() traced; the
 * Mapping mixin's keys() iterates the mapping itself), then m[k] for each, traced. CALL_NEXT
 * when m is not such an object. */
EmStatus em_mapping_as_dict(EmTracer *T, EmSym *m, EmSym **out) {
    if (m->kind == SYM_OBJ && m->pos == EM_POS_IDICT) return em_instance_dict(T, m, out);
    if (m->kind == SYM_VIEW && m->pos == 'm')
        return (*out = m->items.data[0]), EM_OK; /* a mappingproxy: its dict, read */
    /* a dict subclass of the frame iterating as dict: CPython copies its storage (dict_merge's
     * fast path), whatever its own keys() or __getitem__; else it reads keys() then m[k], which
     * are its items in order where both are dict's or OrderedDict's own */
    if (m->kind == SYM_OBJ && m->src >= 0 && !m->by_id && PyDict_Check(m->obj) && !PyDict_CheckExact(m->obj)) {
        PyTypeObject *tp = Py_TYPE(m->obj);
        PyObject *kf = _PyType_Lookup(tp, EM_STR(keys)), *gf = _PyType_Lookup(tp, EM_STR(dunder_getitem));
        if (tp->tp_iter == PyDict_Type.tp_iter ||
            ((kf == _PyType_Lookup(&PyDict_Type, EM_STR(keys)) ||
              kf == _PyType_Lookup((PyTypeObject *)EM_KNOWN(OrderedDict), EM_STR(keys))) &&
             gf == _PyType_Lookup(&PyDict_Type, EM_STR(dunder_getitem))))
            return em_frame_items(T, m, out);
    }
    if (!em_sym_user_operand(m) || PyDict_Check(m->obj)) return CALL_NEXT;
    PyObject *kf = _PyType_Lookup(Py_TYPE(m->obj), EM_STR(keys));
    if (!kf || !PyFunction_Check(kf)) return CALL_NEXT;
    EmStatus st;
    EmSym *keys = NULL, *items = NULL, *d = em_sym_new(T, SYM_DICT);
    if (!d) return EM_ERR;
    PyObject *mixin = PyObject_GetAttrString(EM_KNOWN(abc_mapping), "keys");
    if (!mixin) return EM_ERR;
    Py_DECREF(mixin); /* kept alive by the class */
    if (kf == mixin) keys = m;
    else if ((st = em_inline(T, kf, &m, 1, NULL, &keys)) != EM_OK) return st;
    if ((st = em_seq_items(T, keys, &items)) != EM_OK) return st;
    for (int32_t i = 0; i < items->items.len; i++) {
        EmSym *k = items->items.data[i], *v = NULL;
        if (k->kind != SYM_CONST) return em_trace_fail(T, EMA_VALUE, "a mapping with a %s key", em_sym_describe(k));
        if ((st = em_sym_getitem(T, m, k, &v)) != EM_OK || (st = em_dict_set(d, k->obj, v)) != EM_OK) return st;
    }
    *out = d;
    return EM_OK;
}

/* Item i of dict()'s or update()'s iterable that is not a (key, value) pair: CPython's error for
 * the first item (for a later one, update() would have stored the ones before: the trace fails);
 * a number or None is no sequence (TypeError), a tuple or list of another length a ValueError. */
static EmStatus bad_pair(EmTracer *T, EmSym *p, int32_t i) {
    int seq = p->kind == SYM_TUPLE || p->kind == SYM_LIST;
    int num = p->kind == SYM_CONST && (PyLong_Check(p->obj) || PyFloat_Check(p->obj) || p->obj == Py_None);
    if (i == 0 && seq)
        return em_trace_raise_msg(T, PyExc_ValueError,
                                  "dictionary update sequence element #0 has length %zd; 2 is required",
                                  (Py_ssize_t)p->items.len);
    if (i == 0 && num)
        return em_trace_raise_msg(T, PyExc_TypeError,
                                  "cannot convert dictionary update sequence element #0 to a sequence");
    return em_trace_fail(T, EMA_VALUE, "dict() of an item that is not a (key, value) pair");
}

/* Pair p (item i of an iterable of pairs) stored into dict sym d, as dict(pairs) stores it. */
static EmStatus dict_add_pair(EmTracer *T, EmSym *d, EmSym *p, int32_t i) {
    EmStatus st;
    if (p->kind == SYM_CONST && PyTuple_CheckExact(p->obj) && (st = em_seq_items(T, p, &p)) != EM_OK) return st;
    if ((p->kind != SYM_TUPLE && p->kind != SYM_LIST) || p->items.len != 2) return bad_pair(T, p, i);
    PyObject *key;
    if (em_dict_key(T, d, p->items.data[0], 1, &key, &st) < 0) return st;
    return em_dict_set(d, key, p->items.data[1]);
}

/* An object (made in the trace or of the frame, not a dict) whose class has a keys(): dict()
 * and update() take it as a mapping, as CPython's dict_update_arg. */
static int mapping_like(const EmSym *src) {
    if ((src->kind != SYM_NEW && src->kind != SYM_OBJ) || !src->obj || PyDict_Check(src->obj) ||
        PyType_Check(src->obj) || PyModule_Check(src->obj))
        return 0;
    return _PyType_Lookup(Py_TYPE(src->obj), EM_STR(keys)) != NULL;
}

/* d updated from mapping src as CPython's dict_merge does for a non-dict: for each key of
 * src.keys(), d[key] = src[key] (keys(), its iteration and __getitem__ traced). */
static EmStatus merge_mapping(EmTracer *T, EmSym *d, EmSym *src) {
    EmSym *fn = NULL, *self = NULL, *keys = NULL, *it = NULL;
    EmStatus st = em_sym_getattr(T, src, EM_STR(keys), 1, &fn, &self);
    if (st == EM_OK) st = em_call(T, fn, self, NULL, 0, NULL, &keys);
    if (st == EM_OK) st = em_iter_of(T, keys, &it);
    for (int32_t i = 0; st == EM_OK; i++) {
        EmSym *k = NULL, *v = NULL;
        PyObject *key;
        if ((st = em_iter_take(T, it, &k)) != EM_OK || !k) return st;
        if ((st = em_sym_getitem(T, src, k, &v)) != EM_OK) return st;
        if (em_dict_key(T, d, k, 1, &key, &st) < 0) return st;
        st = em_dict_set(d, key, v);
    }
    return st;
}

/* dict(src, **kw) made while tracing: src a dict sym or an iterable of (key, value) pairs
 * with constant keys; then the keywords. */
EmStatus em_make_dict(EmTracer *T, EmSym *src, EmSym **kwvals, PyObject *kwnames, EmSym **out) {
    EmSym *d = em_sym_new(T, SYM_DICT);
    if (!d) return EM_ERR;
    EmStatus st = EM_OK;
    if (src && src->kind == SYM_VIEW && src->pos == 'm') src = src->items.data[0]; /* a mappingproxy: its dict */
    if (src && src->kind == SYM_DICT) {
        for (int32_t i = 0; st == EM_OK && i < src->items.len; i++)
            st = em_dict_set(d, src->keys.data[i], src->items.data[i]);
    } else if (src && mapping_like(src)) {
        st = merge_mapping(T, d, src);
    } else if (src) {
        EmSym *pairs = NULL;
        if ((st = em_seq_items(T, src, &pairs)) != EM_OK) return st;
        for (int32_t i = 0; st == EM_OK && i < pairs->items.len; i++) st = dict_add_pair(T, d, pairs->items.data[i], i);
    }
    for (Py_ssize_t i = 0; st == EM_OK && kwnames && i < PyTuple_GET_SIZE(kwnames); i++)
        st = em_dict_set(d, PyTuple_GET_ITEM(kwnames, i), kwvals[i]);
    if (st == EM_OK) *out = d;
    return st;
}

/* ---- itertools over syms: the real function on stand-ins ---- */

#define ITERTOOLS_MAX_ITEMS 4096

typedef struct {
    PyObject *ids;        /* dict: id(token) -> index in syms */
    EmVec(EmSym *) syms;  /* what each token stands for */
    PyObject *keep;       /* list: the tokens, alive while their ids are keys */
} Stand;

/* The stand-in of sym s: a constant's value, a token for anything else (new reference). */
static EM_NEW PyObject *stand_for(Stand *S, EmSym *s) {
    if (s->kind == SYM_CONST) return Py_NewRef(s->obj);
    PyObject *tok = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type), *key = tok ? PyLong_FromVoidPtr(tok) : NULL;
    PyObject *ix = key ? PyLong_FromSsize_t(S->syms.len) : NULL;
    int bad = !ix || PyDict_SetItem(S->ids, key, ix) || PyList_Append(S->keep, tok) || em_vec_push(&S->syms, s);
    Py_XDECREF(key);
    Py_XDECREF(ix);
    if (bad) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        Py_XDECREF(tok);
        return NULL;
    }
    return tok;
}

/* The argument a: a container sym's items as a list of stand-ins (an iterator's are taken and it
 * is lent: Python's lazy iteration owns it now), any other sym its own stand-in. */
static EmStatus stand_arg(EmTracer *T, Stand *S, EmSym *a, EmSym *result, PyObject **v) {
    int cont = a->kind == SYM_LIST || a->kind == SYM_TUPLE || a->kind == SYM_ITER || a->kind == SYM_VIEW ||
               a->kind == SYM_DICT;
    if (!cont) return (*v = stand_for(S, a)) ? EM_OK : EM_ERR;
    EmSym *seq = NULL;
    if (a->kind == SYM_ITER && !em_lazy_done(a)) /* Python's takes its items later, one by one */
        return em_trace_fail(T, EMA_CALL, "an itertools function over a lazy iterator (%s)",
                             ((PyTypeObject *)a->seq_type)->tp_name);
    EmStatus st = a->kind == SYM_ITER ? em_iter_use(T, a) : EM_OK;
    if (st != EM_OK || (st = em_seq_items(T, a, &seq)) != EM_OK) return st;
    if (a->kind == SYM_ITER) a->lent = 1;
    else if ((st = em_iter_watch(T, result, a, 0)) != EM_OK) return st;
    PyObject *l = PyList_New(seq->items.len);
    for (int32_t i = 0; l && i < seq->items.len; i++) {
        PyObject *x = stand_for(S, seq->items.data[i]);
        if (!x) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, x);
    }
    *v = l;
    return l ? EM_OK : EM_ERR;
}

/* A result value back as a sym: a token its sym, a tuple a tuple sym of its items, anything
 * else (a value the function computed from constants) a constant. */
static EmSym *unstand(EmTracer *T, Stand *S, PyObject *x, int depth) {
    PyObject *key = PyLong_FromVoidPtr(x);
    PyObject *ix = key ? PyDict_GetItemWithError(S->ids, key) : NULL;
    Py_XDECREF(key);
    if (ix) return S->syms.data[PyLong_AsSsize_t(ix)];
    if (PyErr_Occurred()) return NULL;
    if (!PyTuple_CheckExact(x) || depth > 0) return em_sym_const(T, x);
    EmSym *t = em_sym_new(T, SYM_TUPLE);
    for (Py_ssize_t i = 0; t && i < PyTuple_GET_SIZE(x); i++) {
        EmSym *it = unstand(T, S, PyTuple_GET_ITEM(x, i), depth + 1);
        if (!it || em_vec_push(&t->items, it)) t = it ? (PyErr_NoMemory(), NULL) : NULL;
    }
    return t;
}

static EmStatus itertools_run(EmTracer *T, Stand *S, PyObject *f, PyObject **vals, int n, PyObject *kwnames, EmSym *r) {
    PyObject *res = PyObject_Vectorcall(f, vals, (size_t)(n - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0)), kwnames);
    PyObject *it = res ? PyObject_GetIter(res) : NULL, *x;
    Py_XDECREF(res);
    if (!it) { /* it raised on these arguments (or a token met arithmetic): Python raises it at run time */
        PyErr_Clear();
        return em_trace_fail(T, EMA_CALL, "%s on these arguments", ((PyTypeObject *)f)->tp_name);
    }
    r->seq_type = Py_NewRef((PyObject *)Py_TYPE(it));
    EmStatus st = EM_OK;
    while (st == EM_OK && (x = PyIter_Next(it))) {
        EmSym *s = r->items.len < ITERTOOLS_MAX_ITEMS ? unstand(T, S, x, 0) : NULL;
        Py_DECREF(x);
        if (r->items.len >= ITERTOOLS_MAX_ITEMS)
            st = em_trace_fail(T, EMA_CALL, "%s of more than %d items", ((PyTypeObject *)f)->tp_name,
                               ITERTOOLS_MAX_ITEMS);
        else if (!s || em_vec_push(&r->items, s)) st = s ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
    }
    if (st == EM_OK && PyErr_Occurred()) {
        PyErr_Clear();
        st = em_trace_fail(T, EMA_CALL, "%s raised while iterating", ((PyTypeObject *)f)->tp_name);
    }
    Py_DECREF(it);
    return st;
}

EmStatus em_call_itertools(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out) {
    if (n > 16) return em_trace_fail(T, EMA_CALL, "%s with %d arguments", ((PyTypeObject *)f)->tp_name, n);
    Stand S = {.ids = PyDict_New(), .keep = PyList_New(0)};
    PyObject *vals[16] = {0};
    EmSym *r = S.ids && S.keep ? em_sym_new(T, SYM_ITER) : NULL;
    EmStatus st = r ? EM_OK : EM_ERR;
    for (int i = 0; st == EM_OK && i < n; i++) st = stand_arg(T, &S, all[i], r, &vals[i]);
    if (st == EM_OK) st = itertools_run(T, &S, f, vals, n, kwnames, r);
    if (st == EM_OK) *out = r;
    for (int i = 0; i < n; i++) Py_XDECREF(vals[i]);
    Py_XDECREF(S.ids);
    Py_XDECREF(S.keep);
    em_vec_free(&S.syms);
    return st;
}

/* tuple(), list(), enumerate(), zip(), reversed() over syms: their items rearranged, no
 * graph op. enumerate's optional start must be a constant int. */
/* Iterator r made by zip/enumerate/reversed over all[0..n) watches the lists and dicts its
 * arguments read (lazily, as Python's does); for zip and enumerate (spec) r->spec says what each
 * argument is (em_trace.c out_live_iter): (kind, index in r->of) for a list or dict read as it
 * goes, False for an iterator over one, None for anything else. */
static EmStatus watch_args(EmTracer *T, EmSym *r, EmSym **all, int n, int spec) {
    if (spec && !(r->spec = PyTuple_New(n))) return EM_ERR;
    for (int i = 0; i < n; i++) {
        int32_t at = r->of.len;
        EmStatus wst = em_iter_watch(T, r, all[i], 0);
        if (wst != EM_OK) return wst;
        if (!spec) continue;
        EmSym *a = all[i];
        int what = r->of.len == at + 1 ? (a->kind == SYM_LIST && !a->seq_type ? 'l'
                                          : a->kind == SYM_DICT               ? 'k'
                                          : a->kind == SYM_VIEW               ? a->pos
                                                                              : 0)
                                       : 0;
        int over_mutable = 0;
        for (int32_t k = 0; a->kind == SYM_ITER && k < a->of.len; k++)
            over_mutable |= a->of.data[k]->kind == SYM_LIST || a->of.data[k]->kind == SYM_DICT;
        PyObject *e = what ? Py_BuildValue("(Ci)", what, (int)at) : Py_NewRef(over_mutable ? Py_False : Py_None);
        if (!e) return EM_ERR;
        PyTuple_SET_ITEM(r->spec, i, e);
    }
    return EM_OK;
}

/* The length of a container sym or a sized constant, known without taking its items; -1 when not. */
static Py_ssize_t sized_len(const EmSym *s) {
    if (s->kind == SYM_TUPLE || s->kind == SYM_LIST || s->kind == SYM_DICT || s->kind == SYM_SET) return s->items.len;
    if (s->kind != SYM_CONST || !PySequence_Check(s->obj)) return -1;
    Py_ssize_t n = PyObject_Size(s->obj);
    if (n < 0) PyErr_Clear();
    return n;
}

/* Whether iterator it reads lists or dicts as it goes. */
static int reads_containers(const EmSym *it) {
    for (int32_t k = 0; k < it->of.len; k++)
        if (it->of.data[k]->kind == SYM_LIST || it->of.data[k]->kind == SYM_DICT) return 1;
    return 0;
}

EmStatus em_call_sequence(EmTracer *T, PyObject *f, EmSym **all, int n, int strict, EmSym **out) {
    int is_enum = f == (PyObject *)&PyEnum_Type, is_zip = f == (PyObject *)&PyZip_Type;
    long start = 0;
    if (is_enum && n == 2) {
        if (all[1]->kind != SYM_CONST || !PyLong_Check(all[1]->obj))
            return em_trace_fail(T, EMA_CALL, "enumerate start");
        start = PyLong_AsLong(all[1]->obj);
        n = 1;
    }
    if (!is_zip && n != 1) return em_trace_fail(T, EMA_CALL, "%s with %d arguments", ((PyTypeObject *)f)->tp_name, n);
    if (f == (PyObject *)&PyReversed_Type && all[0]->kind == SYM_ITER)
        return em_trace_fail(T, EMA_CALL, "reversed() of an iterator");
    /* zip/enumerate over a lazy iterator, or one over lists or dicts (enumerate(reversed(l)),
     * whose items follow changes to them): lazy too, taking an item per item taken */
    int lazy = 0;
    for (int i = 0; (is_enum || is_zip) && i < n; i++)
        lazy |= all[i]->kind == SYM_ITER && (!em_lazy_done(all[i]) || reads_containers(all[i]));
    for (int i = 0; strict && i < n; i++) /* unequal lengths (or a list the loop may change) raise at the end: lazily */
        lazy |= all[i]->kind == SYM_LIST || sized_len(all[0]) != sized_len(all[i]);
    if (lazy) {
        PyObject *from = is_enum ? PyLong_FromLong(start) : Py_XNewRef(strict ? Py_True : NULL);
        if (is_enum && !from) return EM_ERR;
        EmStatus st = em_lazy_make(T, is_enum ? EM_LAZY_ENUM : EM_LAZY_ZIP, NULL, all, n, from, NULL, out);
        Py_XDECREF(from);
        return st;
    }
    EmSym *seqs[8];
    int32_t len = -1;
    for (int i = 0; i < n; i++) { /* the same iterator twice (zip(it, it)) takes items in turn */
        if (all[i]->kind != SYM_ITER) continue;
        EmStatus ust = em_iter_use(T, all[i]);
        if (ust != EM_OK) return ust;
        for (int k = 0; k < i; k++)
            if (all[k] == all[i])
                return em_trace_fail(T, EMA_CALL, "%s over the same iterator twice", ((PyTypeObject *)f)->tp_name);
    }
    for (int i = 0; i < n; i++) {
        EmStatus st = em_seq_items(T, all[i], &seqs[i]);
        if (st != EM_OK) return st;
        if (strict && len >= 0 && seqs[i]->items.len != len) /* an iterator's items: Python raises at the end */
            return em_trace_fail(T, EMA_CALL, "zip(strict=True) over iterators of different lengths");
        if (len < 0 || seqs[i]->items.len < len) len = seqs[i]->items.len;
    }
    EmSymKind kind = f == (PyObject *)&PyTuple_Type ? SYM_TUPLE : f == (PyObject *)&PyList_Type ? SYM_LIST : SYM_ITER;
    for (int i = 0; kind == SYM_ITER && i < n; i++) /* lazy in Python: the iterators are theirs now */
        if (all[i]->kind == SYM_ITER) all[i]->lent = 1;
    EmSym *r = em_sym_new(T, kind);
    if (!r) return EM_ERR;
    if (kind == SYM_ITER) {
        EmStatus wst = watch_args(T, r, all, n, is_zip || is_enum);
        if (wst != EM_OK) return wst;
        r->seq_type = is_enum || is_zip ? Py_NewRef(f) : em_iter_type(T, all[0], 1);
        if (!r->seq_type && PyErr_Occurred()) return EM_ERR;
    }
    for (int32_t k = 0; k < len; k++) {
        EmSym *item;
        if (is_enum || is_zip) {
            if (!(item = em_sym_new(T, SYM_TUPLE))) return EM_ERR;
            if (is_enum) {
                PyObject *iv = PyLong_FromLong(start + k);
                EmSym *c = iv ? em_sym_const(T, iv) : NULL;
                Py_XDECREF(iv);
                if (!c || em_vec_push(&item->items, c)) return c ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
            }
            for (int i = 0; i < n; i++)
                if (em_vec_push(&item->items, seqs[i]->items.data[k])) return PyErr_NoMemory(), EM_ERR;
        } else {
            item = seqs[0]->items.data[f == (PyObject *)&PyReversed_Type ? len - 1 - k : k];
        }
        if (em_vec_push(&r->items, item)) return PyErr_NoMemory(), EM_ERR;
    }
    *out = r;
    return EM_OK;
}

/* ---- sets ---- */

/* How set membership compares x: 0 a constant (by value), 1 an object hashed by identity (a
 * tensor; an object with object's __hash__ and __eq__), 2 a tuple of such items and such tuples
 * (compared item by item: em_sym_items_eq), -1 none of these (the trace gives up). A constant
 * and an object hashed by identity are taken as never equal (their hashes would have to
 * collide). */
static int set_item_kind_at(const EmSym *x, int depth) {
    if (x->kind == SYM_CONST) return 0;
    if (x->kind == SYM_TENSOR || x->kind == SYM_PARTIAL) return 1; /* a partial hashes by identity */
    if (x->kind == SYM_OBJ || x->kind == SYM_NEW) { /* a class too, unless its metaclass hashes */
        PyTypeObject *tp = Py_TYPE(x->obj);
        /* a module's builtin function (torch.add): hashed and compared by its module and C function, one
         * object per function */
        if (PyCFunction_Check(x->obj) &&
            (!PyCFunction_GET_SELF(x->obj) || PyModule_Check(PyCFunction_GET_SELF(x->obj))))
            return 1;
        return tp->tp_hash == PyBaseObject_Type.tp_hash && tp->tp_richcompare == PyBaseObject_Type.tp_richcompare ? 1
                                                                                                                  : -1;
    }
    if (x->kind != SYM_TUPLE || !em_seq_plain_eq(x->seq_type) || depth >= EM_MAX_NEST) return -1;
    for (int32_t i = 0; i < x->items.len; i++)
        if (set_item_kind_at(x->items.data[i], depth + 1) < 0) return -1;
    return 2;
}

int em_set_item_kind(const EmSym *x) { return set_item_kind_at(x, 0); }

static EmStatus unhashable_at(EmTracer *T, EmSym *x, int depth) {
    if (x->kind == SYM_TUPLE && em_seq_plain_eq(x->seq_type) && depth < EM_MAX_NEST)
        for (int32_t i = 0; i < x->items.len; i++) { /* hash((a, [1])): a's hash, then the list's */
            EmSym *it = x->items.data[i];
            int k = em_set_item_kind(it);
            if (k == 0 && PyObject_Hash(it->obj) == -1) return em_trace_raise_pending(T, "unhashable tuple item");
            EmStatus st = k == 2 || k < 0 ? unhashable_at(T, it, depth + 1) : CALL_NEXT;
            if (st != CALL_NEXT || k < 0) return st; /* an item whose hash is not known ends the walk */
        }
    PyTypeObject *tp = em_sym_known_type(x);
    if (!tp || tp->tp_hash != PyObject_HashNotImplemented) return CALL_NEXT;
    return em_trace_raise_msg(T, PyExc_TypeError, "unhashable type: '%s'", tp->tp_name);
}

EmStatus em_unhashable(EmTracer *T, EmSym *x) { return unhashable_at(T, x, 0); }

/* The hash item it of a set is stored under when a value-hashed item could equal it: a
 * constant's own, a value-hashed object's traced hash (traced again at each lookup). 1 with *h,
 * 0 for other items (hashed by identity: no such item equals them), -1 with *st set. */
static int set_value_hash(EmTracer *T, EmSym *it, Py_hash_t *h, EmStatus *st) {
    if (it->kind == SYM_CONST) {
        if ((*h = PyObject_Hash(it->obj)) != -1) return 1;
        PyErr_Clear();
        return 0;
    }
    if (!em_value_hashed(it)) return 0;
    return em_value_hash(T, it, h, st) ? -1 : 1;
}

/* Python's lookup of x among s's items where x or a stored item is hashed by its own
 * __hash__ (em_value_hashed): the first item that is x, or has x's hash and compares equal to
 * it (the stored item's == first, traced). Its index, -1 none, -2 with *st set. */
static int32_t set_value_find(EmTracer *T, EmSym *s, EmSym *x, EmStatus *st) {
    Py_hash_t h, ih;
    int r = set_value_hash(T, x, &h, st);
    if (r <= 0) return r < 0 ? -2 : (*st = em_trace_fail(T, EMA_VALUE, "a set holding a %s", em_sym_describe(x)), -2);
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *it = s->items.data[i];
        if (it == x) return i;
        if ((r = set_value_hash(T, it, &ih, st)) < 0) return -2;
        if (!r || ih != h || (it->kind == SYM_CONST && x->kind == SYM_CONST)) continue;
        int eq = 0;
        if ((*st = em_sym_eq_truth(T, it, x, &eq)) == CALL_NEXT)
            *st = em_trace_fail(T, EMA_VALUE, "a set holding a %s", em_sym_describe(x));
        if (*st != EM_OK) return -2;
        if (eq) return i;
    }
    return -1;
}

/* 1 when set sym s holds an item hashed by its own __hash__. */
static int set_has_value_items(const EmSym *s) {
    for (int32_t i = 0; i < s->items.len; i++)
        if (em_value_hashed(s->items.data[i])) return 1;
    return 0;
}

/* The index of x among set sym s's items, -1 when absent; -2 with *st set otherwise. */
static int32_t set_find(EmTracer *T, EmSym *s, EmSym *x, EmStatus *st) {
    *st = EM_OK;
    if (!(x = em_sym_hashable(T, x))) return *st = EM_ERR, -2;
    if (em_value_hashed(x)) return set_value_find(T, s, x, st);
    int kx = em_set_item_kind(x);
    if (kx < 0 && (*st = em_unhashable(T, x)) != CALL_NEXT) return -2;
    *st = EM_OK;
    if (kx < 0) return *st = em_trace_fail(T, EMA_VALUE, "a set holding a %s", em_sym_describe(x)), -2;
    Py_hash_t h;
    if ((kx == 0 && PyObject_Hash(x->obj) == -1) || (kx == 2 && em_tuple_key_hash(x, &h)))
        return *st = em_trace_raise_pending(T, "unhashable set item"), -2;
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *it = s->items.data[i];
        if (em_set_item_kind(it) != kx) continue;
        int same;
        if (kx == 0) same = PyObject_RichCompareBool(it->obj, x->obj, Py_EQ);
        else if (kx == 1 && (*st = em_sym_is(T, it, x, &same)) != EM_OK) return -2;
        else if (kx == 2 && (*st = em_sym_items_eq(T, it, x, 1, &same)) != EM_OK) {
            if (*st == CALL_NEXT) *st = em_trace_fail(T, EMA_VALUE, "a set holding %s", em_sym_describe(x));
            return -2;
        }
        if (same < 0) return *st = EM_ERR, -2;
        if (same) return i;
    }
    if (kx == 0 && set_has_value_items(s)) { /* a constant may equal such an item: Python asks it */
        int32_t at = set_value_find(T, s, x, st);
        if (at != -1) return at;
    }
    return -1;
}

/* A constant set made while tracing given an item that is not a constant: a SET sym, in place. */
static EmStatus set_to_sym(EmTracer *T, EmSym *s) {
    PyObject *it = PyObject_GetIter(s->obj), *v;
    if (!it) return EM_ERR;
    EmVec(EmSym *) items = {0};
    while ((v = PyIter_Next(it))) {
        EmSym *c = em_sym_const(T, v);
        Py_DECREF(v);
        if (!c || em_vec_push(&items, c)) {
            Py_DECREF(it);
            em_vec_free(&items);
            return c ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return em_vec_free(&items), EM_ERR;
    s->seq_type = Py_NewRef((PyObject *)Py_TYPE(s->obj));
    Py_CLEAR(s->obj);
    s->kind = SYM_SET;
    for (int32_t i = 0; i < items.len; i++)
        if (em_vec_push(&s->items, items.data[i])) return em_vec_free(&items), PyErr_NoMemory(), EM_ERR;
    em_vec_free(&items);
    return EM_OK;
}

EmStatus em_set_add_item(EmTracer *T, EmSym *s, EmSym *x) {
    EmStatus st;
    if (!(x = em_sym_hashable(T, x))) return EM_ERR;
    if (s->kind == SYM_CONST && x->kind == SYM_CONST)
        return PySet_Add(s->obj, x->obj) ? em_trace_raise_pending(T, "unhashable set item") : EM_OK;
    if ((st = em_unhashable(T, x)) != CALL_NEXT) return st; /* s.add([1]): TypeError, s unchanged */
    if (s->kind == SYM_CONST && (st = set_to_sym(T, s)) != EM_OK) return st;
    int32_t at = set_find(T, s, x, &st);
    if (at == -2) return st;
    return at >= 0 || !em_vec_push(&s->items, x) ? EM_OK : (PyErr_NoMemory(), EM_ERR);
}

EmStatus em_set_of_items(EmTracer *T, PyObject *type, EmSym **items, int32_t n, EmSym **out) {
    PyObject *set = PySet_New(NULL);
    if (!set) return EM_ERR;
    EmSym *s = em_sym_const(T, set);
    Py_DECREF(set);
    if (!s) return EM_ERR;
    for (int32_t i = 0; i < n; i++) {
        EmStatus st = em_set_add_item(T, s, items[i]);
        if (st != EM_OK) return st;
    }
    if (type == (PyObject *)&PyFrozenSet_Type) {
        if (s->kind == SYM_SET) Py_SETREF(s->seq_type, Py_NewRef(type));
        else {
            PyObject *fs = PyFrozenSet_New(s->obj);
            s = fs ? em_sym_const(T, fs) : NULL;
            Py_XDECREF(fs);
            if (!s) return EM_ERR;
        }
    }
    *out = s;
    return EM_OK;
}

static EmStatus set_contains(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    EmStatus st;
    int32_t at = set_find(T, c, key, &st);
    if (at == -2) return st;
    *found = at >= 0;
    return EM_OK;
}

static EmStatus set_truth(EmTracer *T, EmSym *s, int *out) {
    (void)T;
    *out = s->items.len > 0;
    return EM_OK;
}

/* The items of set sym s, constants and objects hashed by their own __hash__, in Python's
 * order: a real set built in s's order of the constants and stand-ins of the objects' hashes
 * (_rules.HashAs), read back. */
static EmStatus set_value_items(EmTracer *T, EmSym *s, EmSym **out) {
    static PyObject *hash_as; /* ember._rules.HashAs, owned for the process */
    if (!hash_as && !(hash_as = PyObject_GetAttrString(em_state.meta_run, "HashAs"))) return EM_ERR;
    PyObject *set = PySet_New(NULL), *v = NULL;
    EmStatus st = set ? EM_OK : EM_ERR;
    for (int32_t i = 0; st == EM_OK && i < s->items.len; i++) {
        EmSym *it = s->items.data[i];
        Py_hash_t h = 0;
        if (it->kind != SYM_CONST && em_value_hash(T, it, &h, &st)) break;
        PyObject *stand = it->kind == SYM_CONST ? Py_NewRef(it->obj) : PyObject_CallFunction(hash_as, "ni", h, i);
        if (!stand || PySet_Add(set, stand)) st = EM_ERR;
        Py_XDECREF(stand);
    }
    EmSym *r = st == EM_OK ? em_sym_new(T, SYM_TUPLE) : NULL;
    PyObject *iter = r ? PyObject_GetIter(set) : NULL;
    while (iter && (v = PyIter_Next(iter))) {
        EmSym *item = NULL;
        if (Py_TYPE(v) == (PyTypeObject *)hash_as) {
            PyObject *at = PyObject_GetAttrString(v, "i");
            long i = at ? PyLong_AsLong(at) : -1;
            Py_XDECREF(at);
            item = i >= 0 && i < s->items.len ? s->items.data[i] : NULL;
        } else {
            item = em_sym_const(T, v);
        }
        Py_DECREF(v);
        if (!item || em_vec_push(&r->items, item)) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            break;
        }
    }
    Py_XDECREF(iter);
    Py_XDECREF(set);
    if (st != EM_OK) return st;
    if (!r || PyErr_Occurred()) return EM_ERR;
    *out = r;
    return EM_OK;
}

/* Its items in Python's order: known only when they are all constants or objects hashed by
 * their own __hash__ (an identity hash's order follows ids). */
static EmStatus set_items(EmTracer *T, EmSym *s, EmSym **out) {
    EmSym *c = NULL;
    int values = 0;
    for (int32_t i = 0; i < s->items.len; i++) {
        EmSym *it = s->items.data[i];
        if (it->kind == SYM_CONST) continue;
        if (!em_value_hashed(it))
            return em_trace_fail(T, EMA_VALUE, "iteration over a set holding a %s (its order follows ids)",
                                 em_sym_describe(it));
        values = 1;
    }
    if (values) return set_value_items(T, s, out);
    EmStatus st = em_set_of_items(T, (PyObject *)&PySet_Type, s->items.data, s->items.len, &c);
    return st == EM_OK ? em_seq_items(T, c, out) : st;
}

static EmStatus set_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    return em_sym_type_method(T, (PyTypeObject *)base->seq_type, base, name, method, out, self);
}

/* add, discard, remove, clear, update, copy, __contains__, __len__ of a SET sym. */
static EmStatus set_method(EmTracer *T, EmContMethod m, const char *n, EmSym *self, EmSym **args, int nargs,
                           EmSym **out) {
    (void)m;
    EmStatus st = EM_OK;
    int frozen = self->seq_type == (PyObject *)&PyFrozenSet_Type;
    if (!strcmp(n, "__len__") && !nargs) {
        PyObject *len = PyLong_FromLong(self->items.len);
        *out = len ? em_sym_const(T, len) : NULL;
        Py_XDECREF(len);
        return *out ? EM_OK : EM_ERR;
    }
    if (!strcmp(n, "__contains__") && nargs == 1) {
        int found = 0;
        if ((st = set_contains(T, self, args[0], &found)) != EM_OK) return st;
        return (*out = em_sym_const(T, found ? Py_True : Py_False)) ? EM_OK : EM_ERR;
    }
    if (!strcmp(n, "copy") && !nargs)
        return frozen ? (*out = self, EM_OK)
                      : em_set_of_items(T, (PyObject *)&PySet_Type, self->items.data, self->items.len, out);
    if (frozen) return em_trace_fail(T, EMA_CALL, "frozenset.%s", n);
    if (!strcmp(n, "add") && nargs == 1) st = em_set_add_item(T, self, args[0]);
    else if ((!strcmp(n, "discard") || !strcmp(n, "remove")) && nargs == 1) {
        int32_t at = set_find(T, self, args[0], &st);
        if (at == -2) return st;
        if (at < 0 && n[0] == 'r') return em_trace_fail(T, EMA_VALUE, "set.remove of an absent item");
        if (at >= 0) {
            memmove(self->items.data + at, self->items.data + at + 1,
                    sizeof(EmSym *) * (size_t)(self->items.len - at - 1));
            self->items.len--;
        }
    } else if (!strcmp(n, "clear") && !nargs) {
        self->items.len = 0;
    } else if (!strcmp(n, "update") && nargs == 1 && args[0]->kind == SYM_ITER && !em_lazy_done(args[0])) {
        for (EmSym *v = NULL; (st = em_iter_take(T, args[0], &v)) == EM_OK && v;) st = em_set_add_item(T, self, v);
    } else if (!strcmp(n, "update") && nargs == 1) {
        EmSym *items = NULL;
        if ((st = em_seq_items(T, args[0], &items)) != EM_OK) return st;
        for (int32_t i = 0; st == EM_OK && i < items->items.len; i++)
            st = em_set_add_item(T, self, items->items.data[i]);
    } else {
        return em_trace_fail(T, EMA_CALL, "set.%s of a set holding tensors or objects", n);
    }
    if (st == EM_OK) *out = em_sym_const(T, Py_None);
    return st != EM_OK ? st : *out ? EM_OK : EM_ERR;
}

const EmSymOps em_set_ops = {
    .ident = EM_IDENT_FRESH,
    .getattr = set_attr,
    .contains = set_contains,
    .truth = set_truth,
    .items = set_items,
    .method = set_method,
};

/* ---- sets of constants ---- */

EmStatus em_make_set(EmTracer *T, PyObject *type, EmSym *src, EmSym **out) {
    EmSym *items = NULL;
    if (src && src->kind == SYM_SET) /* set(s), frozenset(s): its items, in no order */
        return em_set_of_items(T, type, src->items.data, src->items.len, out);
    EmStatus st = src && src->kind == SYM_ITER ? em_iter_use(T, src) : EM_OK;
    if (st != EM_OK || (src && (st = em_seq_items(T, src, &items)) != EM_OK)) return st;
    for (int32_t i = 0; items && i < items->items.len; i++)
        if (items->items.data[i]->kind != SYM_CONST)
            return em_set_of_items(T, type, items->items.data, items->items.len, out);
    PyObject *l = PyList_New(0);
    for (int32_t i = 0; l && items && i < items->items.len; i++) {
        EmSym *v = items->items.data[i];
        if (PyList_Append(l, v->obj)) Py_CLEAR(l);
    }
    PyObject *r = l ? PyObject_CallOneArg(type, l) : NULL;
    Py_XDECREF(l);
    if (!r)
        return PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError) ? em_trace_raise_pending(T, "unhashable")
                                                                           : EM_ERR;
    *out = em_sym_const(T, r);
    Py_DECREF(r);
    return *out ? EM_OK : EM_ERR;
}

int em_set_reads(PyObject *f) {
    static const char *const reads[] = {
        "isdisjoint", "issubset",     "issuperset", "union", "intersection", "difference", "symmetric_difference",
        "copy",       "__contains__", "__len__",    NULL};
    if (!Py_IS_TYPE(f, &PyMethodDescr_Type) || (PyDescr_TYPE(f) != &PySet_Type && PyDescr_TYPE(f) != &PyFrozenSet_Type))
        return 0;
    for (int i = 0; reads[i]; i++)
        if (!PyUnicode_CompareWithASCIIString(PyDescr_NAME(f), reads[i])) return 1;
    return 0;
}

/* s.isdisjoint(it) / s.issuperset(it) of an iterator: Python takes its items one at a time and
 * stops at the first that decides (a generator's later code does not run). */
static EmStatus set_early_stop(EmTracer *T, EmSym *self, EmSym *it, int disjoint, EmSym **out) {
    int answer = 1;
    for (;;) {
        EmSym *v = NULL;
        EmStatus st = em_iter_take(T, it, &v);
        if (st != EM_OK) return st;
        if (!v) break;
        if (v->kind != SYM_CONST) return em_trace_fail(T, EMA_CALL, "a set method over a %s", em_sym_describe(v));
        int in = PySet_Contains(self->obj, v->obj);
        if (in < 0) return PyErr_ExceptionMatches(PyExc_TypeError) ? em_trace_raise_pending(T, "unhashable") : EM_ERR;
        if (in == disjoint) { /* disjoint: an item in s; superset: an item not in s */
            answer = 0;
            break;
        }
    }
    *out = em_sym_const(T, answer ? Py_True : Py_False);
    return *out ? EM_OK : EM_ERR;
}

static int name_in(const char *n, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(n, names[i])) return 1;
    return 0;
}

/* set methods that change it, replayed on a set of the frame (pop is not: which item it
 * takes follows the table's order); those whose answer does not depend on the order */
static const char *const set_changes[] = {"add",
                                          "discard",
                                          "remove",
                                          "clear",
                                          "update",
                                          "difference_update",
                                          "intersection_update",
                                          "symmetric_difference_update",
                                          NULL};
static const char *const set_order_free[] = {"isdisjoint", "issubset", "issuperset", "__contains__", "__len__", NULL};

/* Before a change to set self of the frame: self becomes the trace's copy of the set (the first
 * time; another sym of the same set would not see the changes: the trace gives up), in
 * T->mutated. */
static EmStatus own_frame_set(EmTracer *T, EmSym *self) {
    if (self->pos == EM_POS_SET_CHANGED) return EM_OK;
    for (int32_t i = 0; i < T->syms.len; i++)
        if (T->syms.data[i] != self && T->syms.data[i]->kind == SYM_CONST && T->syms.data[i]->obj == self->obj)
            return em_trace_fail(T, EMA_SIDE_EFFECT, "a change to a set of the frame read twice");
    PyObject *c = PySet_New(self->obj);
    if (!c) return EM_ERR;
    Py_SETREF(self->obj, c);
    self->pos = EM_POS_SET_CHANGED;
    return em_vec_push(&T->mutated, self) ? (PyErr_NoMemory(), EM_ERR) : EM_OK;
}

/* Method f (a change) of a set of the frame, given the arguments' values vals: recorded in
 * self->of to be replayed on the caller's set after the graph, an iterable argument as the
 * tuple of its items in its order. */
static EmStatus record_set_call(EmTracer *T, PyObject *f, int elem, EmSym *self, PyObject **vals, int nargs) {
    PyObject *snap = PyTuple_New(nargs);
    for (int i = 0; snap && i < nargs; i++) {
        PyObject *v = elem ? Py_NewRef(vals[i]) : PySequence_Tuple(vals[i]);
        if (!v) Py_CLEAR(snap);
        else PyTuple_SET_ITEM(snap, i, v);
    }
    if (!snap) return EM_ERR; /* the call itself took them: no error but memory */
    EmSym *fs = em_sym_const(T, f), *as = fs ? em_sym_const(T, snap) : NULL;
    Py_DECREF(snap);
    if (!as) return EM_ERR;
    return em_vec_push(&self->of, fs) || em_vec_push(&self->of, as) ? (PyErr_NoMemory(), EM_ERR) : EM_OK;
}

/* s.update(it) / s.difference_update(it) of a lazy iterator: CPython adds (discards) each item
 * before taking the next, so code the iterator runs sees s change: s.add / s.discard (name)
 * per item. */
static EmStatus set_update_lazily(EmTracer *T, EmSym *self, EmSym *it, PyObject *name, EmSym **out) {
    PyObject *f = _PyType_Lookup(&PySet_Type, name);
    EmStatus st = EM_OK;
    for (EmSym *v = NULL; st == EM_OK && (st = em_iter_take(T, it, &v)) == EM_OK && v;)
        st = em_set_method(T, f, self, &v, 1, out);
    return st == EM_OK ? none_out(T, out) : st;
}

EmStatus em_set_method(EmTracer *T, PyObject *f, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    if (!Py_IS_TYPE(f, &PyMethodDescr_Type) || !PyObject_TypeCheck(self->obj, PyDescr_TYPE(f)) ||
        (PyDescr_TYPE(f) != &PySet_Type && PyDescr_TYPE(f) != &PyFrozenSet_Type))
        return CALL_NEXT;
    int consts = 1;
    for (int i = 0; i < nargs; i++) consts &= args[i]->kind == SYM_CONST;
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(f));
    if (!n) return EM_ERR;
    int change = em_set_of_frame(self) && name_in(n, set_changes);
    if (change) {
        EmStatus ost = own_frame_set(T, self);
        if (ost != EM_OK) return ost;
    } else if (em_set_changed(self) && !name_in(n, set_order_free)) {
        return em_trace_fail(T, EMA_VALUE, "set.%s of a set of the frame the trace changed (its order)", n);
    } else if (em_set_of_frame(self) && !em_set_reads(f)) {
        return em_trace_fail(T, EMA_SIDE_EFFECT, "set.%s of a set of the frame", n);
    }
    if (nargs == 1 && args[0]->kind == SYM_ITER && !em_lazy_done(args[0]) &&
        (!strcmp(n, "update") || !strcmp(n, "difference_update")))
        return set_update_lazily(T, self, args[0], n[0] == 'u' ? EM_STR(add) : EM_STR(discard), out);
    if (!consts && nargs == 1 && em_set_made(self) && (!strcmp(n, "add") || !strcmp(n, "update"))) {
        /* s.add(t), s.update(ts) of something not a constant: s becomes a SET sym */
        EmSym *items = NULL;
        EmStatus st = n[0] == 'a' ? em_set_add_item(T, self, args[0]) : em_seq_items(T, args[0], &items);
        for (int32_t i = 0; st == EM_OK && items && i < items->items.len; i++)
            st = em_set_add_item(T, self, items->items.data[i]);
        if (st != EM_OK) return st;
        return (*out = em_sym_const(T, Py_None)) ? EM_OK : EM_ERR;
    }
    if (nargs == 1 && args[0]->kind == SYM_ITER && (!strcmp(n, "isdisjoint") || !strcmp(n, "issuperset")))
        return set_early_stop(T, self, args[0], n[2] == 'd', out);
    if (nargs > 8) return em_trace_fail(T, EMA_CALL, "a set method with %d arguments", nargs);
    PyObject *vals[9] = {self->obj};
    EmStatus st = EM_OK;
    int elem = !strcmp(n, "add") || !strcmp(n, "discard") || !strcmp(n, "remove") || !strcmp(n, "__contains__");
    for (int i = 0; i < nargs && st == EM_OK; i++) { /* read only: known values of constants and containers */
        EmSym *a = args[i]; /* a container subclass's instance: its contents */
        if (!elem) st = em_slot_operand(T, args[i], &a);
        if (st == EM_OK && a->kind == SYM_ITER && !em_lazy_done(a)) st = em_iter_use(T, a);
        if (st == EM_OK && a->kind == SYM_ITER) {
            EmSym *items = NULL;
            if ((st = em_seq_items(T, a, &items)) == EM_OK) a = items;
        }
        if (st == EM_OK && !(vals[i + 1] = em_sym_value(T, a)))
            st = PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "a set method given a %s", em_sym_describe(a));
    }
    PyObject *r = st == EM_OK ? PyObject_Vectorcall(f, vals, (size_t)nargs + 1, NULL) : NULL;
    if (r && change) st = record_set_call(T, f, elem, self, vals + 1, nargs);
    else if (!r && st == EM_OK && change) { /* it may have changed the copy part way: not replayable */
        PyErr_Clear(); /* Python raises it again */
        st = em_trace_fail(T, EMA_SIDE_EFFECT, "set.%s of a set of the frame that raises", n);
    }
    for (int i = 1; i <= nargs; i++) Py_XDECREF(vals[i]);
    if (st != EM_OK) {
        Py_XDECREF(r);
        return st;
    }
    if (!r) return em_trace_raise_pending(T, "a set method raised"); /* KeyError of remove(), pop() of an empty set */
    *out = em_sym_const(T, r);
    Py_DECREF(r);
    return *out ? EM_OK : EM_ERR;
}
