/* em_cont.c: Python containers the trace models — list and dict methods on container syms,
 * dict(...) and the structural builtins tuple/list/enumerate/zip/reversed over syms. Called
 * from the call dispatch (em_call.c); consumes and produces syms, records no graph ops. */
#include "em_trace.h"

#include "../pyver/em_state.h"

static void dict_remove(EmSym *d, int i) {
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
        EmSym *k = what != 'v' ? em_sym_const(T, d->keys.data[i]) : d->items.data[i], *it = k;
        if (k && what == 'i' && (it = em_sym_new(T, SYM_TUPLE)) &&
            (em_vec_push(&it->items, k) || em_vec_push(&it->items, d->items.data[i])))
            it = (PyErr_NoMemory(), NULL);
        if (!it || em_vec_push(&r->items, it)) r = NULL;
    }
    return r;
}

EmSym *em_view_items(EmTracer *T, EmSym *view) {
    return dict_view(T, view->items.data[0], (char)view->pos);
}

/* Methods of lists and dicts the trace models: reads on any, mutations only on containers
 * made while tracing (em_sym_own), and lookups in dicts read through a slot. */
EmStatus em_container_method(EmTracer *T, PyObject *fn, EmSym *self, EmSym **args, int nargs, EmSym **out) {
    const char *n = PyUnicode_AsUTF8(PyDescr_NAME(fn));
    if (!n) return EM_ERR;
    *out = NULL;
    if (self->kind == SYM_OBJ) { /* a dict read through a slot (em_lazy_dict_get) */
        int found = 0;
        if ((!strcmp(n, "get") && (nargs == 1 || nargs == 2)) || (!strcmp(n, "__contains__") && nargs == 1) ||
            (!strcmp(n, "__getitem__") && nargs == 1)) {
            if (args[0]->kind != SYM_CONST) return em_trace_fail(T, EMA_VALUE, "dict.%s by a %s", n, em_sym_describe(args[0]));
            EmStatus st = em_lazy_dict_get(T, self, args[0]->obj, &found, out);
            if (st != EM_OK) return st;
            if (n[0] == '_' && n[2] == 'c') *out = em_sym_const(T, found ? Py_True : Py_False);
            else if (!found && n[0] == '_') return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
            else if (!found) *out = nargs == 2 ? args[1] : em_sym_const(T, Py_None);
            return *out ? EM_OK : EM_ERR;
        }
        return em_trace_fail(T, EMA_SIDE_EFFECT, "dict.%s on an input", n);
    }
    int is_dict = self->kind == SYM_DICT, is_list = self->kind == SYM_LIST;
    /* reads */
    if (is_dict && (!strcmp(n, "get") || !strcmp(n, "__getitem__") || !strcmp(n, "__contains__")) &&
        nargs >= 1 && nargs <= 2 - (n[0] == '_')) {
        if (args[0]->kind != SYM_CONST) return em_trace_fail(T, EMA_VALUE, "dict.%s by a %s", n, em_sym_describe(args[0]));
        int i = em_dict_find(self, args[0]->obj);
        if (i == -2) return EM_ERR;
        if (n[0] == '_' && n[2] == 'c') *out = em_sym_const(T, i >= 0 ? Py_True : Py_False);
        else if (i >= 0) *out = self->items.data[i];
        else if (n[0] == '_') return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
        else *out = nargs == 2 ? args[1] : em_sym_const(T, Py_None);
        return *out ? EM_OK : EM_ERR;
    }
    int is_seq = is_list || self->kind == SYM_TUPLE;
    if (is_seq && nargs == 1 && (!strcmp(n, "index") || !strcmp(n, "count") || !strcmp(n, "__contains__"))) {
        /* by value equality, as Python: only constants can be compared while tracing */
        PyObject *want = args[0]->kind == SYM_CONST ? args[0]->obj : NULL;
        long cnt = 0, at = -1;
        for (int32_t i = 0; i < self->items.len; i++) {
            EmSym *it = self->items.data[i];
            if (!want || it->kind != SYM_CONST) {
                if (it == args[0]) { /* the same object: equal by identity */
                    cnt++;
                    if (at < 0) at = i;
                    continue;
                }
                return em_trace_fail(T, EMA_VALUE, "%s.%s comparing a %s", em_sym_describe(self), n,
                                     em_sym_describe(it->kind != SYM_CONST ? it : args[0]));
            }
            int eq = PyObject_RichCompareBool(it->obj, want, Py_EQ);
            if (eq < 0) return EM_ERR;
            if (eq) {
                cnt++;
                if (at < 0) at = i;
            }
        }
        if (n[0] == 'i' && at < 0) {
            PyObject *msg = PyUnicode_FromFormat("%R is not in %s", want, self->kind == SYM_LIST ? "list" : "tuple");
            EmStatus st = msg ? em_trace_raise_new(T, PyExc_ValueError, msg) : EM_ERR;
            Py_XDECREF(msg);
            return st;
        }
        if (n[0] == '_') {
            *out = em_sym_const(T, cnt ? Py_True : Py_False);
            return *out ? EM_OK : EM_ERR;
        }
        PyObject *r = PyLong_FromLong(n[0] == 'i' ? at : cnt);
        *out = r ? em_sym_const(T, r) : NULL;
        Py_XDECREF(r);
        return *out ? EM_OK : EM_ERR;
    }
    if ((is_dict || is_list) && nargs == 0 && !strcmp(n, "__len__")) {
        PyObject *len = PyLong_FromLong(self->items.len);
        *out = len ? em_sym_const(T, len) : NULL;
        Py_XDECREF(len);
        return *out ? EM_OK : EM_ERR;
    }
    if (is_dict && nargs == 0 && !strcmp(n, "__iter__")) {
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
    if (is_dict && nargs == 0 && (!strcmp(n, "keys") || !strcmp(n, "values") || !strcmp(n, "items"))) {
        EmSym *v = em_sym_new(T, SYM_VIEW);
        if (!v || em_vec_push(&v->items, self)) return v ? (PyErr_NoMemory(), EM_ERR) : EM_ERR;
        v->pos = n[0];
        *out = v;
        return EM_OK;
    }
    if ((is_dict || is_list) && nargs == 0 && !strcmp(n, "copy")) {
        EmSym *c = em_sym_new(T, self->kind);
        for (int32_t i = 0; c && i < self->items.len; i++)
            if (em_vec_push(&c->items, self->items.data[i]) ||
                (is_dict && em_vec_push(&c->keys, Py_NewRef(self->keys.data[i]))))
                c = (PyErr_NoMemory(), NULL);
        *out = c;
        return c ? EM_OK : EM_ERR;
    }
    /* mutations */
    int own = em_sym_own(T, self);
    if (own < 0) return EM_ERR;
    if (!own) return em_trace_fail(T, EMA_SIDE_EFFECT, "%s.%s on an input", em_sym_describe(self), n);
    self->mver++;
    if (is_list && !strcmp(n, "append") && nargs == 1) {
        if (em_vec_push(&self->items, args[0])) return PyErr_NoMemory(), EM_ERR;
    } else if (is_list && !strcmp(n, "extend") && nargs == 1 &&
               (args[0]->kind == SYM_LIST || args[0]->kind == SYM_TUPLE)) {
        EmSym *src = args[0];
        int32_t cnt = src->items.len;
        for (int32_t i = 0; i < cnt; i++)
            if (em_vec_push(&self->items, src->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    } else if (is_list && (!strcmp(n, "pop") || !strcmp(n, "insert")) && nargs <= 2) {
        int is_pop = n[0] == 'p';
        if ((is_pop && nargs > 1) || (!is_pop && nargs != 2)) return em_trace_fail(T, EMA_CALL, "list.%s arguments", n);
        Py_ssize_t i = is_pop ? -1 : 0, len = self->items.len;
        if (nargs >= 1) {
            if (nargs && (args[0]->kind != SYM_CONST || !PyLong_Check(args[0]->obj)))
                return em_trace_fail(T, EMA_CALL, "list.%s index", n);
            if (nargs) i = PyLong_AsSsize_t(args[0]->obj);
        }
        if (i < 0) i += len;
        if (is_pop) {
            if (i < 0 || i >= len) return em_trace_fail(T, EMA_VALUE, "pop from an empty list or bad index");
            *out = self->items.data[i];
            for (Py_ssize_t k = i + 1; k < len; k++) self->items.data[k - 1] = self->items.data[k];
            self->items.len--;
            return EM_OK;
        }
        if (i < 0) i = 0;
        if (i > len) i = len;
        if (em_vec_push(&self->items, args[1])) return PyErr_NoMemory(), EM_ERR;
        for (Py_ssize_t k = len; k > i; k--) self->items.data[k] = self->items.data[k - 1];
        self->items.data[i] = args[1];
    } else if (is_dict && (!strcmp(n, "pop") || !strcmp(n, "setdefault") || !strcmp(n, "__setitem__")) &&
               nargs >= 1 && nargs <= 2) {
        if (args[0]->kind != SYM_CONST) return em_trace_fail(T, EMA_VALUE, "dict.%s by a %s", n, em_sym_describe(args[0]));
        int i = em_dict_find(self, args[0]->obj);
        if (i == -2) return EM_ERR;
        if (n[0] == 'p') {
            if (i < 0 && nargs == 1) return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
            *out = i >= 0 ? self->items.data[i] : args[1];
            if (i >= 0) dict_remove(self, i);
            return EM_OK;
        }
        if (n[0] == 's' && i >= 0) {
            *out = self->items.data[i];
            return EM_OK;
        }
        EmSym *v = nargs == 2 ? args[1] : em_sym_const(T, Py_None);
        if (!v) return EM_ERR;
        if (i >= 0) self->items.data[i] = v;
        else if (em_vec_push(&self->keys, Py_NewRef(args[0]->obj)) || em_vec_push(&self->items, v))
            return PyErr_NoMemory(), EM_ERR;
        else
            self->kver++;
        if (n[0] == 's' && n[1] == 'e' && n[2] == 't') {
            *out = v;
            return EM_OK;
        }
    } else if (is_dict && !strcmp(n, "__delitem__") && nargs == 1 && args[0]->kind == SYM_CONST) {
        int i = em_dict_find(self, args[0]->obj);
        if (i == -2) return EM_ERR;
        if (i < 0) return em_trace_raise_new(T, PyExc_KeyError, args[0]->obj);
        dict_remove(self, i);
    } else if (is_dict && !strcmp(n, "update") && nargs == 1 && args[0]->kind == SYM_DICT) {
        EmSym *o = args[0];
        for (int32_t k = 0; k < o->keys.len; k++)
            if (em_dict_set(self, o->keys.data[k], o->items.data[k]) != EM_OK) return EM_ERR;
    } else {
        return em_trace_fail(T, EMA_CALL, "%s.%s", em_sym_describe(self), n);
    }
    *out = em_sym_const(T, Py_None);
    return *out ? EM_OK : EM_ERR;
}

/* dict(src, **kw) made while tracing: src a dict sym or an iterable of (key, value) pairs
 * with constant keys; then the keywords. */
EmStatus em_make_dict(EmTracer *T, EmSym *src, EmSym **kwvals, PyObject *kwnames, EmSym **out) {
    EmSym *d = em_sym_new(T, SYM_DICT);
    if (!d) return EM_ERR;
    EmStatus st = EM_OK;
    if (src && src->kind == SYM_DICT) {
        for (int32_t i = 0; st == EM_OK && i < src->items.len; i++)
            st = em_dict_set(d, src->keys.data[i], src->items.data[i]);
    } else if (src) {
        EmSym *pairs = NULL;
        if ((st = em_seq_items(T, src, &pairs)) != EM_OK) return st;
        for (int32_t i = 0; st == EM_OK && i < pairs->items.len; i++) {
            EmSym *p = pairs->items.data[i];
            if ((p->kind != SYM_TUPLE && p->kind != SYM_LIST) || p->items.len != 2 ||
                p->items.data[0]->kind != SYM_CONST)
                return em_trace_fail(T, EMA_VALUE, "dict() of an item that is not a (constant key, value) pair");
            st = em_dict_set(d, p->items.data[0]->obj, p->items.data[1]);
        }
    }
    for (Py_ssize_t i = 0; st == EM_OK && kwnames && i < PyTuple_GET_SIZE(kwnames); i++)
        st = em_dict_set(d, PyTuple_GET_ITEM(kwnames, i), kwvals[i]);
    if (st == EM_OK) *out = d;
    return st;
}

/* tuple(), list(), enumerate(), zip(), reversed() over syms: their items rearranged, no
 * graph op. enumerate's optional start must be a constant int. */
EmStatus em_call_sequence(EmTracer *T, PyObject *f, EmSym **all, int n, int strict, EmSym **out) {
    int is_enum = f == (PyObject *)&PyEnum_Type, is_zip = f == (PyObject *)&PyZip_Type;
    long start = 0;
    if (is_enum && n == 2) {
        if (all[1]->kind != SYM_CONST || !PyLong_Check(all[1]->obj)) return em_trace_fail(T, EMA_CALL, "enumerate start");
        start = PyLong_AsLong(all[1]->obj);
        n = 1;
    }
    if (!is_zip && n != 1) return em_trace_fail(T, EMA_CALL, "%s with %d arguments", ((PyTypeObject *)f)->tp_name, n);
    if (f == (PyObject *)&PyReversed_Type && all[0]->kind == SYM_ITER)
        return em_trace_fail(T, EMA_CALL, "reversed() of an iterator");
    EmSym *seqs[8];
    int32_t len = -1;
    for (int i = 0; i < n; i++) { /* the same iterator twice (zip(it, it)) takes items in turn */
        if (all[i]->kind != SYM_ITER) continue;
        EmStatus ust = em_iter_use(T, all[i]);
        if (ust != EM_OK) return ust;
        for (int k = 0; k < i; k++)
            if (all[k] == all[i]) return em_trace_fail(T, EMA_CALL, "%s over the same iterator twice", ((PyTypeObject *)f)->tp_name);
    }
    for (int i = 0; i < n; i++) {
        EmStatus st = em_seq_items(T, all[i], &seqs[i]);
        if (st != EM_OK) return st;
        if (strict && len >= 0 && seqs[i]->items.len != len) /* Python raises once iteration gets there */
            return em_trace_fail(T, EMA_CALL, "zip(strict=True) over sequences of different lengths");
        if (len < 0 || seqs[i]->items.len < len) len = seqs[i]->items.len;
    }
    EmSymKind kind = f == (PyObject *)&PyTuple_Type ? SYM_TUPLE : f == (PyObject *)&PyList_Type ? SYM_LIST : SYM_ITER;
    for (int i = 0; kind == SYM_ITER && i < n; i++) /* lazy in Python: the iterators are theirs now */
        if (all[i]->kind == SYM_ITER) all[i]->lent = 1;
    EmSym *r = em_sym_new(T, kind);
    if (!r) return EM_ERR;
    for (int i = 0; kind == SYM_ITER && i < n; i++) { /* and the containers they read, lazily too */
        EmStatus wst = em_iter_watch(T, r, all[i], 0);
        if (wst != EM_OK) return wst;
    }
    if (kind == SYM_ITER) {
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

