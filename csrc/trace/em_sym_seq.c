/* em_sym_seq.c: the operations of tuple and list syms (items in a vector) and of iterators
 * (ITER syms: the items they will yield, taken when they were made, and the lists or dicts made
 * while tracing they still read). Rows of em_sym_ops[]; consumes and produces syms.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* ---- tuples and lists ---- */

static EmStatus tuple_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    if (base->seq_type == EM_KNOWN(torch_Size)) /* Size's own methods (numel) and tuple's */
        return em_sym_type_method(T, (PyTypeObject *)base->seq_type, base, name, method, out, self);
    if (base->seq_type) { /* a namedtuple's (or structseq's) field */
        PyObject *fields = PyObject_GetAttrString(base->seq_type, "_fields");
        if (!fields && PyErr_ExceptionMatches(PyExc_AttributeError)) { /* a structseq */
            PyErr_Clear(); /* only the AttributeError of a type without _fields */
            fields = PyObject_GetAttrString(base->seq_type, "__match_args__");
        }
        if (!fields) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return EM_ERR;
            PyErr_Clear(); /* only the AttributeError: neither field list, a plain tuple's method */
            return em_sym_type_method(T, &PyTuple_Type, base, name, method, out, self);
        }
        Py_ssize_t n = PySequence_Size(fields);
        if (n < 0) {
            Py_DECREF(fields);
            return EM_ERR;
        }
        for (Py_ssize_t i = 0; i < n && i < base->items.len; i++) {
            PyObject *f = PySequence_GetItem(fields, i);
            int eq = f ? PyObject_RichCompareBool(f, name, Py_EQ) : -1;
            Py_XDECREF(f);
            if (eq < 0) {
                Py_DECREF(fields);
                return EM_ERR;
            }
            if (eq) {
                Py_DECREF(fields);
                *out = base->items.data[i];
                return EM_OK;
            }
        }
        Py_DECREF(fields);
        PyObject *d = _PyType_Lookup((PyTypeObject *)base->seq_type, name); /* its class's own */
        if (d && PyFunction_Check(d)) return em_sym_method(T, d, base, method, out, self); /* _replace, _asdict */
        if (d && Py_IS_TYPE(d, &PyClassMethod_Type)) { /* _make */
            PyObject *f = PyObject_GetAttrString(d, "__func__");
            EmSym *cls = f ? em_sym_const(T, base->seq_type) : NULL;
            Py_XDECREF(f); /* kept alive by d */
            if (!cls) return EM_ERR;
            return PyFunction_Check(f)
                       ? em_sym_method(T, f, cls, method, out, self)
                       : em_trace_fail(T, EMA_ATTR, "%s (a builtin classmethod)", PyUnicode_AsUTF8(name));
        }
        if (d && Py_IS_TYPE(d, &PyStaticMethod_Type)) { /* a user's static method */
            PyObject *f = PyObject_GetAttrString(d, "__func__");
            EmSym *fs = f ? em_sym_new(T, SYM_OBJ) : NULL;
            if (fs) fs->obj = Py_NewRef(f);
            Py_XDECREF(f);
            *self = NULL;
            return (*out = fs) ? EM_OK : EM_ERR;
        }
        if (d && Py_IS_TYPE(d, &PyProperty_Type)) { /* a user's property */
            PyObject *fget = PyObject_GetAttrString(d, "fget");
            if (!fget) return EM_ERR;
            *self = NULL;
            EmStatus st = PyFunction_Check(fget)
                              ? em_inline(T, fget, &base, 1, NULL, out)
                              : em_trace_fail(T, EMA_ATTR, "%s (a builtin property)", PyUnicode_AsUTF8(name));
            Py_DECREF(fget);
            return st;
        }
        if (d && (PyTuple_CheckExact(d) || PyUnicode_CheckExact(d) || PyLong_CheckExact(d))) { /* _fields */
            *self = NULL;
            return (*out = em_sym_const(T, d)) ? EM_OK : EM_ERR;
        }
    }
    return em_sym_type_method(T, &PyTuple_Type, base, name, method, out, self);
}

/* Methods of its type: list's, or a deque's own, and a deque's maxlen. */
static EmStatus list_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    if (base->seq_type && !PyUnicode_CompareWithASCIIString(name, "maxlen")) {
        *self = NULL;
        return (*out = em_sym_const(T, base->spec ? base->spec : Py_None)) ? EM_OK : EM_ERR;
    }
    return em_sym_type_method(T, base->seq_type ? (PyTypeObject *)base->seq_type : &PyList_Type, base, name, method,
                              out, self);
}

/* seq[k] for an int or slice constant k. */
static EmStatus seq_getitem(EmTracer *T, EmSym *c, EmSym *k, EmSym **out) {
    if (k->kind == SYM_INT) { /* a symbolic index: the item it picks, the index pinned */
        PyObject *v = em_int_value(T, k);
        k = v ? em_sym_const(T, v) : NULL;
        Py_XDECREF(v);
        if (!k) return EM_ERR;
    }
    if (k->kind != SYM_CONST) return em_trace_fail(T, EMA_VALUE, "index by %s", em_sym_describe(k));
    Py_ssize_t n = c->items.len;
    if (PyLong_Check(k->obj)) {
        Py_ssize_t i = PyNumber_AsSsize_t(k->obj, PyExc_IndexError); /* too large: Python's IndexError */
        if (i == -1 && PyErr_Occurred()) return em_trace_raise_pending(T, "index out of range");
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
            PyObject *msg = PyUnicode_FromFormat("%s index out of range", c->kind == SYM_LIST ? "list" : "tuple");
            EmStatus st = msg ? em_trace_raise_new(T, PyExc_IndexError, msg) : EM_ERR;
            Py_XDECREF(msg);
            return st;
        }
        *out = c->items.data[i];
        return EM_OK;
    }
    if (PySlice_Check(k->obj) && c->kind == SYM_LIST && c->seq_type)
        return em_trace_fail(T, EMA_VALUE, "a deque sliced (Python raises TypeError)");
    if (PySlice_Check(k->obj)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(k->obj, &start, &stop, &step) < 0) return EM_ERR;
        Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
        EmSym *s = em_sym_new(T, c->kind == SYM_LIST ? SYM_LIST : SYM_TUPLE);
        if (s && c->seq_type == EM_KNOWN(torch_Size)) s->seq_type = Py_NewRef(c->seq_type); /* a Size's slice is one */
        for (Py_ssize_t i = 0; s && i < len; i++)
            if (em_vec_push(&s->items, c->items.data[start + i * step])) s = NULL;
        *out = s;
        return s ? EM_OK : EM_ERR;
    }
    return em_trace_fail(T, EMA_VALUE, "index of type %s", Py_TYPE(k->obj)->tp_name);
}

/* lst[a:b] = seq on a list made while tracing (step 1; an extended slice keeps the length). */
static EmStatus list_store_slice(EmTracer *T, EmSym *c, PyObject *slice, EmSym *v) {
    if (v->kind == SYM_ITER) { /* lst[a:b] = map(...): its items, as list() would take them */
        EmSym *items = NULL;
        EmStatus ist = em_seq_items(T, v, &items);
        if (ist != EM_OK) return ist;
        v = items;
    }
    if (v->kind != SYM_LIST && v->kind != SYM_TUPLE) {
        PyTypeObject *vt = em_sym_known_type(v); /* a number, None: not iterable */
        if (v->kind == SYM_CONST && vt && !vt->tp_iter && !PySequence_Check(v->obj))
            return em_stand_in_list_raise(T, c->items.len, slice, v->obj); /* this Python's message */
        return em_trace_fail(T, EMA_VALUE, "slice store of %s", em_sym_describe(v));
    }
    Py_ssize_t start, stop, step, n = c->items.len, m = v->items.len;
    if (PySlice_Unpack(slice, &start, &stop, &step) < 0) return EM_ERR;
    Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
    EmSym **src = malloc(sizeof(EmSym *) * ((size_t)m + 1)); /* v may be c itself */
    if (!src) return PyErr_NoMemory(), EM_ERR;
    if (m) memcpy(src, v->items.data, sizeof(EmSym *) * (size_t)m);
    EmStatus st = EM_OK;
    if (step != 1) {
        if (len != m)
            st = em_trace_raise_msg(T, PyExc_ValueError,
                                    "attempt to assign sequence of size %zd to extended slice of size %zd", m, len);
        for (Py_ssize_t i = 0; st == EM_OK && i < m; i++) c->items.data[start + i * step] = src[i];
    } else {
        if (stop < start) stop = start;
        Py_ssize_t tail = n - stop, nn = start + m + tail;
        if (nn > n) {
            for (Py_ssize_t i = n; i < nn && st == EM_OK; i++)
                if (em_vec_push(&c->items, NULL)) st = (PyErr_NoMemory(), EM_ERR);
        }
        if (st == EM_OK && c->items.data) { /* NULL only for an empty list given no items */
            memmove(c->items.data + start + m, c->items.data + stop, sizeof(EmSym *) * (size_t)tail);
            if (m) memcpy(c->items.data + start, src, sizeof(EmSym *) * (size_t)m);
        }
        if (st == EM_OK) c->items.len = (int32_t)nn;
    }
    free(src);
    if (st == EM_OK) {
        c->mver++;
        if (step == 1 && m != len) c->kver++;
    }
    return st;
}

static EmStatus list_setitem(EmTracer *T, EmSym *c, EmSym *key, EmSym *v) {
    EmStatus st = em_sym_store_check(T, c, key);
    if (st != EM_OK) return st;
    if (PySlice_Check(key->obj) && c->seq_type) return em_trace_fail(T, EMA_VALUE, "a slice store into a deque");
    if (PySlice_Check(key->obj)) return list_store_slice(T, c, key->obj, v);
    if (PyLong_Check(key->obj)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key->obj, PyExc_IndexError); /* too large: Python's IndexError */
        if (i == -1 && PyErr_Occurred()) return em_trace_raise_pending(T, "index out of range");
        if (i < 0) i += c->items.len;
        if (i < 0 || i >= c->items.len) return em_trace_fail(T, EMA_VALUE, "list index out of range");
        c->items.data[i] = v;
        c->mver++;
        return EM_OK;
    }
    return em_trace_fail(T, EMA_VALUE, "item store into %s", em_sym_describe(c));
}

static EmStatus seq_truth(EmTracer *T, EmSym *s, int *out) {
    *out = s->items.len > 0;
    return EM_OK;
}

static EmStatus seq_concat(EmTracer *T, EmSym *a, EmSym *b, EmSym **out) {
    EmSym *s = em_sym_new(T, a->kind);
    if (!s) return EM_ERR;
    if (a->seq_type) s->seq_type = Py_NewRef(a->seq_type); /* torch.Size + tuple is a Size */
    for (int32_t i = 0; i < a->items.len; i++)
        if (em_vec_push(&s->items, a->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < b->items.len; i++)
        if (em_vec_push(&s->items, b->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    *out = s;
    return EM_OK;
}

/* l += it, l *= n: l itself changed, as list.__iadd__ (extend) and __imul__ do (every other
 * name for the list sees it). */
static EmStatus list_inplace(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out) {
    EmSym *r = NULL;
    EmStatus st;
    if (op == EMOP_IADD) {
        st = em_list_method(T, EM_CM_extend, "extend", a, &b, 1, &r);
    } else {
        if (b->kind != SYM_CONST || !PyLong_CheckExact(b->obj)) return em_trace_fail(T, EMA_VALUE, "list *= a non-int");
        long times = PyLong_AsLong(b->obj);
        if (times == -1 && PyErr_Occurred()) return EM_ERR;
        if (times > 0 && (int64_t)times * a->items.len > 65536)
            return em_trace_fail(T, EMA_VALUE, "a sequence repeated to more than 65536 items");
        EmSym *once = em_sym_new(T, SYM_TUPLE);
        for (int32_t i = 0; once && i < a->items.len; i++)
            if (em_vec_push(&once->items, a->items.data[i])) once = (PyErr_NoMemory(), NULL);
        if (!once) return EM_ERR;
        st = em_list_method(T, EM_CM_clear, "clear", a, NULL, 0, &r);
        for (long t = 0; st == EM_OK && t < times; t++) st = em_list_method(T, EM_CM_extend, "extend", a, &once, 1, &r);
    }
    if (st == EM_OK) *out = a;
    return st;
}

/* a == b / a != b of two tuples (or two lists) as Python compares them: lengths, then item by
 * item, each `x is y or x == y` (em_sym_items_eq); CALL_NEXT where that would run code. */
static EmStatus seq_equal(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out) {
    int eq = 0;
    EmStatus st = em_sym_items_eq(T, a, b, 0, &eq);
    if (st == CALL_NEXT) st = em_seq_eq_traced(T, a, b, &eq); /* items with their own __eq__ */
    if (st != EM_OK) return st;
    *out = em_sym_const(T, eq == (op == EMOP_EQ) ? Py_True : Py_False);
    return *out ? EM_OK : EM_ERR;
}

/* a + b of two plain tuples (a += b too) or two lists: the items of both, whatever they are;
 * other operators on known values. */
static EmStatus seq_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out) {
    if (op == EMOP_EQ || op == EMOP_NE) { /* a tuple or list and another, or a tuple constant */
        EmStatus est = seq_equal(T, op, a, b, out);
        if (est != CALL_NEXT) return est;
    }
    if (op == EMOP_LT || op == EMOP_LE || op == EMOP_GT || op == EMOP_GE) { /* item by item, traced */
        EmStatus ost = em_seq_order_traced(T, op, a, b, out);
        if (ost != CALL_NEXT) return ost;
    }
    if ((a->kind == SYM_LIST && a->seq_type) || (b->kind == SYM_LIST && b->seq_type))
        return em_trace_fail(T, EMA_VALUE, "an operator on a deque");
    if (a->kind == SYM_LIST && (op == EMOP_IADD || op == EMOP_IMUL)) return list_inplace(T, op, a, b, out);
    int size_a = a->seq_type == EM_KNOWN(torch_Size);
    if ((op == EMOP_ADD || op == EMOP_IADD) && a->kind == b->kind &&
        (a->kind == SYM_TUPLE || (a->kind == SYM_LIST && op == EMOP_ADD)) &&
        (!a->seq_type || (size_a && (!b->seq_type || b->seq_type == a->seq_type))))
        return seq_concat(T, a, b, out);
    EmSym *seq = a->kind == SYM_CONST ? b : a, *k = seq == a ? b : a; /* [x] * 3, 2 * (x,): the items repeated */
    if (op == EMOP_MUL && !seq->seq_type && k->kind == SYM_CONST && PyLong_CheckExact(k->obj)) {
        long times = PyLong_AsLong(k->obj);
        if (times == -1 && PyErr_Occurred()) return EM_ERR;
        if (times > 0 && (int64_t)times * seq->items.len > 65536)
            return em_trace_fail(T, EMA_VALUE, "a sequence repeated to more than 65536 items");
        EmSym *r = em_sym_new(T, seq->kind);
        for (long t = 0; r && t < times; t++)
            for (int32_t i = 0; r && i < seq->items.len; i++)
                if (em_vec_push(&r->items, seq->items.data[i])) r = (PyErr_NoMemory(), NULL);
        return (*out = r) ? EM_OK : EM_ERR;
    }
    EmSym *args[2] = {a, b};
    return em_sym_eval(T, fn, args, 2, out);
}

static EmStatus seq_items(EmTracer *T, EmSym *s, EmSym **out) {
    *out = s;
    return EM_OK;
}

/* `key in seq`, as list.__contains__: each item in order, `item is key or item == key` (an
 * __eq__ of theirs traced), until one is; comparing a tensor's values gives up. */
static EmStatus seq_contains(EmTracer *T, EmSym *c, EmSym *key, int *found) {
    EmSym *r = NULL;
    EmStatus st = c->kind == SYM_LIST ? em_list_method(T, EM_CM___contains__, "__contains__", c, &key, 1, &r)
                                      : em_tuple_method(T, EM_CM___contains__, "__contains__", c, &key, 1, &r);
    if (st == EM_OK) *found = r->obj == Py_True;
    return st;
}

static EM_NEW PyObject *tuple_iter_type(EmTracer *T, EmSym *s, int rev) {
    return em_iter_type_of(PyTuple_New(0), rev); /* namedtuples iterate as tuples */
}

static EM_NEW PyObject *list_iter_type(EmTracer *T, EmSym *s, int rev) { /* a deque's are its own */
    return em_iter_type_of(s->seq_type ? PyObject_CallNoArgs(s->seq_type) : PyList_New(0), rev);
}

const EmSymOps em_tuple_ops = {
    .getattr = tuple_attr,
    .getitem = seq_getitem,
    .contains = seq_contains,
    .truth = seq_truth,
    .binop = seq_binop,
    .items = seq_items,
    .iter_type = tuple_iter_type,
    .method = em_tuple_method,
};

const EmSymOps em_list_ops = {
    .getattr = list_attr,
    .getitem = seq_getitem,
    .setitem = list_setitem,
    .contains = seq_contains,
    .truth = seq_truth,
    .binop = seq_binop,
    .items = seq_items,
    .iter_type = list_iter_type,
    .method = em_list_method,
};

/* ---- iterators ---- */

EmStatus em_iter_over(EmTracer *T, EmSym *s, char what, EmSym **out) {
    EmSym *items = NULL;
    EmStatus st = em_seq_items(T, s, &items);
    if (st != EM_OK) return st;
    EmSym *it = em_sym_new(T, SYM_ITER);
    if (!it) return EM_ERR;
    for (int32_t i = 0; i < items->items.len; i++)
        if (em_vec_push(&it->items, items->items.data[i])) return PyErr_NoMemory(), EM_ERR;
    it->seq_type = em_iter_type(T, s, 0);
    if (!it->seq_type && PyErr_Occurred()) return EM_ERR;
    st = em_iter_watch(T, it, s, what);
    if (st != EM_OK) return st;
    *out = it;
    return EM_OK;
}

EM_NEW PyObject *em_iter_type_of(PyObject *sample, int rev) {
    if (!sample) return NULL;
    PyObject *arg = rev ? Py_BuildValue("(sN)", "reversed", sample) : sample;
    PyObject *r = arg ? PyObject_CallMethod(em_state.meta_run, "iter_type", "(N)", arg) : NULL;
    if (r && (r == Py_None || !PyType_Check(r))) Py_CLEAR(r); /* unknown: iter_type said None */
    return r;
}

EmStatus em_iter_watch(EmTracer *T, EmSym *it, EmSym *src, char what) {
    if (src->kind == SYM_VIEW) src = src->items.data[0];
    if (em_set_made(src)) /* Python's set iterator checks the size (RuntimeError when it changed) */
        return em_vec_push(&it->of, src) || em_vec_push(&it->of_ver, (uint32_t)PySet_GET_SIZE(src->obj))
                   ? (PyErr_NoMemory(), EM_ERR)
                   : EM_OK;
    if (src->kind != SYM_LIST && src->kind != SYM_DICT) return EM_OK; /* lists and dicts from the frame change too */
    if (!it->of.len) it->of_what = what;
    if (em_vec_push(&it->of, src) || em_vec_push(&it->of_ver, it->of.len == 1 && what ? src->kver : src->mver))
        return PyErr_NoMemory(), EM_ERR;
    return EM_OK;
}

/* Iterator it (iter(), enumerate() or reversed() of one list made in the trace or changed list
 * of the frame, not lazy) after that list changed: CPython's reads the list by index at each
 * next, so the items from it->pos on are the list's (enumerate's numbered on; reversed's from
 * the next index down); its version taken anew.
 * 1 done, 0 not such an iterator, -1 error. */
static int refresh_zip(EmTracer *T, EmSym *it);

static int refresh_list_iter(EmTracer *T, EmSym *it) {
    if (!it->lazy && it->seq_type == (PyObject *)&PyZip_Type) return refresh_zip(T, it);
    EmSym *l = it->of.len == 1 ? it->of.data[0] : NULL;
    if (it->lazy || it->of_what || !l || l->kind != SYM_LIST || l->seq_type || !it->seq_type) return 0;
    if (it->seq_type == (PyObject *)&PyListRevIter_Type) { /* reversed(l): l[i], l[i - 1]... l[0] from the */
        int32_t next = it->items.len - 1 - it->pos; /* next index on; none once past l's end */
        it->items.len = it->pos;
        for (int32_t k = next < l->items.len ? next : -1; k >= 0; k--)
            if (em_vec_push(&it->items, l->items.data[k])) return PyErr_NoMemory(), -1;
        it->of_ver.data[0] = l->mver;
        return 1;
    }
    int enumerated = it->seq_type == (PyObject *)&PyEnum_Type;
    if (!enumerated && it->seq_type != (PyObject *)&PyListIter_Type) return 0;
    long start = 0;
    if (enumerated) { /* one list argument (its spec: ('l', 0)); numbered from its first item's number */
        PyObject *e = it->spec && PyTuple_Check(it->spec) && PyTuple_GET_SIZE(it->spec) == 1
                          ? PyTuple_GET_ITEM(it->spec, 0)
                          : NULL;
        EmSym *first = it->items.len ? it->items.data[0] : NULL;
        if (!e || !PyTuple_Check(e) || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(e, 0), "l") != 0 || !first ||
            first->kind != SYM_TUPLE || first->items.len != 2 || first->items.data[0]->kind != SYM_CONST ||
            !PyLong_CheckExact(first->items.data[0]->obj))
            return PyErr_Occurred() ? (PyErr_Clear(), 0) : 0;
        start = PyLong_AsLong(first->items.data[0]->obj);
        if (start == -1 && PyErr_Occurred()) return PyErr_Clear(), 0;
    }
    it->items.len = it->pos <= it->items.len ? it->pos : it->items.len;
    for (int32_t k = it->items.len; k < l->items.len; k++) {
        EmSym *v = l->items.data[k];
        if (enumerated) {
            PyObject *n = PyLong_FromLong(start + k);
            EmSym *c = n ? em_sym_const(T, n) : NULL, *t = c ? em_sym_new(T, SYM_TUPLE) : NULL;
            Py_XDECREF(n);
            if (!t || em_vec_push(&t->items, c) || em_vec_push(&t->items, v))
                return PyErr_Occurred() ? -1 : (PyErr_NoMemory(), -1);
            v = t;
        }
        if (em_vec_push(&it->items, v)) return PyErr_NoMemory(), -1;
    }
    it->of_ver.data[0] = l->mver;
    return 1;
}

/* zip() of lists only (each read directly: spec ('l', k)) after one changed: CPython's takes
 * each list's item by index at each next, so the items from it->pos on are tuples of the lists'
 * items, up to the shortest list; versions taken anew. 1 done, 0 not such a zip, -1 error. */
static int refresh_zip(EmTracer *T, EmSym *it) {
    Py_ssize_t n = it->spec && PyTuple_Check(it->spec) ? PyTuple_GET_SIZE(it->spec) : 0;
    EmSym *cols[8];
    int32_t len = INT32_MAX;
    if (!n || n > 8 || n != it->of.len) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(it->spec, i);
        if (!PyTuple_Check(e) || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(e, 0), "l") != 0) return 0;
        long k = PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
        if (k < 0 || k >= it->of.len) return PyErr_Occurred() ? (PyErr_Clear(), 0) : 0;
        cols[i] = it->of.data[k];
        if (cols[i]->kind != SYM_LIST || cols[i]->seq_type) return 0;
        if (cols[i]->items.len < len) len = cols[i]->items.len;
    }
    it->items.len = it->pos <= it->items.len ? it->pos : it->items.len;
    for (int32_t k = it->items.len; k < len; k++) {
        EmSym *t = em_sym_new(T, SYM_TUPLE);
        for (Py_ssize_t i = 0; t && i < n; i++)
            if (em_vec_push(&t->items, cols[i]->items.data[k])) return PyErr_NoMemory(), -1;
        if (!t || em_vec_push(&it->items, t)) return t ? (PyErr_NoMemory(), -1) : -1;
    }
    for (int32_t k = 0; k < it->of.len; k++) it->of_ver.data[k] = it->of.data[k]->mver;
    return 1;
}

/* Before each use of an iterator: one lent to zip()/enumerate() aborts; one over lists or dicts
 * made while tracing aborts if they changed since it was made (Python reads them lazily: it
 * may raise RuntimeError, stop early or see new items), except that a dict iterated directly
 * takes the values stored meanwhile (as Python's does) and aborts only on a key added or
 * removed. */
static EmStatus iter_check(EmTracer *T, EmSym *it) {
    if (it->lent) return em_trace_fail(T, EMA_VALUE, "an iterator used again after zip()/enumerate() took it");
    for (int32_t k = 0; k < it->of.len; k++) {
        EmSym *c = it->of.data[k];
        if (c->kind == SYM_CONST) {
            if ((uint32_t)PySet_GET_SIZE(c->obj) != it->of_ver.data[k]) {
                PyObject *msg = PyUnicode_FromString("Set changed size during iteration");
                EmStatus st = msg ? em_trace_raise_new(T, PyExc_RuntimeError, msg) : EM_ERR;
                Py_XDECREF(msg);
                return st;
            }
        } else if (k == 0 && it->of_what) {
            if (c->kver != it->of_ver.data[0] || c->items.len != it->items.len)
                return em_trace_fail(T, EMA_VALUE, "a dict changed size during iteration");
        } else if (c->mver != it->of_ver.data[k]) {
            int r = refresh_list_iter(T, it);
            if (r < 0) return EM_ERR;
            if (!r) return em_trace_fail(T, EMA_VALUE, "a %s changed during iteration over it", em_sym_describe(c));
        }
    }
    EmSym *d = it->of.len ? it->of.data[0] : NULL;
    for (int32_t i = it->pos; d && it->of_what && it->of_what != 'k' && i < d->items.len; i++) {
        EmSym *v = d->items.data[i];
        if (it->of_what == 'i') {
            EmSym *key = em_dict_key_sym(T, d->keys.data[i]), *t = key ? em_sym_new(T, SYM_TUPLE) : NULL;
            if (!t || em_vec_push(&t->items, key) || em_vec_push(&t->items, v))
                return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
            v = t;
        }
        it->items.data[i] = v;
    }
    return EM_OK;
}

EmStatus em_iter_use(EmTracer *T, EmSym *it) {
    EmStatus st = iter_check(T, it);
    for (int made = 1; st == EM_OK && made && !em_lazy_done(it);) st = em_lazy_step(T, it, &made);
    return st;
}

EmStatus em_iter_take(EmTracer *T, EmSym *it, EmSym **out) {
    EmStatus st = iter_check(T, it);
    *out = NULL;
    if (st != EM_OK) return st;
    if (it->pos >= it->items.len && !em_lazy_done(it)) {
        int made = 0;
        if ((st = em_lazy_step(T, it, &made)) != EM_OK) return st;
    }
    if (it->pos < it->items.len) *out = it->items.data[it->pos++];
    else if (!it->lazy && (it->seq_type == (PyObject *)&PyListIter_Type || it->seq_type == (PyObject *)&PyEnum_Type))
        it->of.len = it->of_ver.len = 0; /* CPython's list iterator, once at its end, stays there */
    return EM_OK;
}

EmStatus em_iter_length_hint(EmTracer *T, EmSym *it, EmSym **out) {
    if (it->kind != SYM_ITER || it->lazy || !it->seq_type || !PyType_Check(it->seq_type) ||
        !_PyType_Lookup((PyTypeObject *)it->seq_type, EM_STR(dunder_length_hint)))
        return CALL_NEXT;
    EmStatus st = iter_check(T, it);
    PyObject *n = st == EM_OK ? PyLong_FromLong(it->pos < it->items.len ? it->items.len - it->pos : 0) : NULL;
    *out = n ? em_sym_const(T, n) : NULL;
    Py_XDECREF(n);
    return st != EM_OK ? st : *out ? EM_OK : EM_ERR;
}

/* iter(it) is it. */
static EmStatus iter_self(EmTracer *T, EmSym *s, EmSym **out) {
    *out = s;
    return EM_OK;
}

/* The items not yet taken; the iterator is used up. */
static EmStatus iter_items(EmTracer *T, EmSym *s, EmSym **tmp_out) {
    EmStatus ust = em_iter_use(T, s);
    if (ust != EM_OK) return ust;
    EmSym *r = em_sym_new(T, SYM_TUPLE);
    for (int32_t i = s->pos; r && i < s->items.len; i++)
        if (em_vec_push(&r->items, s->items.data[i])) r = NULL;
    if (!r) return PyErr_Occurred() ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
    s->pos = s->items.len;
    *tmp_out = r;
    return EM_OK;
}

/* A generator's methods (send, close, throw) are its type's; it.__iter__() and it.__next__()
 * of any iterator are iter(it) and next(it) (called as methods). */
static EmStatus iter_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self) {
    int it = !PyUnicode_CompareWithASCIIString(name, "__iter__"),
        nx = !PyUnicode_CompareWithASCIIString(name, "__next__");
    if (!method && nx) /* it.__next__ as a value: next bound to it */
        return em_sym_method(T, EM_KNOWN(next), base, 0, out, self);
    if (method && !PyUnicode_CompareWithASCIIString(name, "__length_hint__") && !base->lazy) {
        *out = em_sym_known(T, EM_KNOWN(length_hint), "length_hint"); /* operator.length_hint(it) */
        *self = base;
        return *out ? EM_OK : EM_ERR;
    }
    if (method && (it || nx)) {
        *out = it ? em_sym_known(T, EM_KNOWN(iter), "iter") : em_sym_known(T, EM_KNOWN(next), "next");
        *self = base;
        return *out ? EM_OK : EM_ERR;
    }
    if (!base->lazy || !base->seq_type || !PyType_Check(base->seq_type))
        return em_trace_fail(T, EMA_VALUE, "attribute %s of an iterator", PyUnicode_AsUTF8(name));
    return em_sym_type_method(T, (PyTypeObject *)base->seq_type, base, name, method, out, self);
}

/* `x in it`: CPython takes items until one is x or equal to it (item == x), the rest left. */
static EmStatus iter_contains(EmTracer *T, EmSym *it, EmSym *x, int *found) {
    *found = 0;
    for (;;) {
        EmSym *v = NULL;
        EmStatus st = em_iter_take(T, it, &v);
        if (st != EM_OK || !v) return st;
        if (v == x || (v->kind == SYM_CONST && x->kind == SYM_CONST && v->obj == x->obj)) return (*found = 1), EM_OK;
        if ((st = em_sym_eq_truth(T, v, x, found)) != EM_OK || *found) return st;
    }
}

const EmSymOps em_iter_ops = {
    .contains = iter_contains,
    .getattr = iter_attr,
    .items = iter_items,
    .iter = iter_self,
    .next = em_iter_take,
};
