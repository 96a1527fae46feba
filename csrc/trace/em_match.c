/* em_match.c: the opcodes of `match` statements (PEP 634), each built from traced operations
 * so that every kind of subject behaves as it does in Python: type(s) for the mapping and
 * sequence tests, len(s), s.get(key, missing) for mapping keys, isinstance and getattr with a
 * default (the absence guarded) for class patterns. Errors CPython raises (a non-class in a
 * class pattern, too many positional sub-patterns, a duplicate key) are raised in the trace.
 */
#include "../pyver/em_state.h"
#include "em_rec.h"

/* known(args...): a call of a builtin from em_known.def. */
static EmStatus call_known(EmTracer *T, PyObject *fn, const char *label, EmSym **args, int nargs, EmSym **out) {
    EmSym *f = em_sym_known(T, fn, label);
    return f ? em_call(T, f, NULL, args, nargs, NULL, out) : EM_ERR;
}

/* The type flags of s's type (guarded as type(s) guards it): 0 with *flags, else the status. */
static EmStatus type_flags(EmTracer *T, EmSym *s, unsigned long *flags) {
    EmSym *tp = NULL;
    EmStatus st = em_sym_type(T, s, &tp);
    if (st != EM_OK) return st;
    if (!tp || !tp->obj || !PyType_Check(tp->obj))
        return em_trace_fail(T, EMA_VALUE, "match on a %s of unknown type", em_sym_describe(s));
    *flags = PyType_GetFlags((PyTypeObject *)tp->obj);
    return EM_OK;
}

static EmStatus match_flag(EmTracer *T, unsigned long flag) {
    NEED(1);
    unsigned long flags = 0;
    EmStatus st = type_flags(T, TOP(1), &flags);
    return st == EM_OK ? em_push(T, em_sym_const(T, (flags & flag) ? Py_True : Py_False)) : st;
}

EmStatus h_match_mapping(EmTracer *T, const EmInstr *in) {
    (void)in;
    return match_flag(T, Py_TPFLAGS_MAPPING);
}

EmStatus h_match_sequence(EmTracer *T, const EmInstr *in) {
    (void)in;
    return match_flag(T, Py_TPFLAGS_SEQUENCE);
}

EmStatus h_get_len(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    EmSym *arg = TOP(1), *n = NULL;
    EmStatus st = call_known(T, EM_KNOWN(len), "len", &arg, 1, &n);
    return st == EM_OK ? em_push(T, n) : st;
}

/* A result of a lookup with the `missing` marker as its default: 1 when it gave the marker. */
static int is_missing(const EmSym *v) { return v->kind == SYM_CONST && v->obj == em_state.unbound; }

/* subject, keys -> subject, keys, (values...) or None: subject.get(key, missing) per key. */
EmStatus h_match_keys(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(2);
    EmSym *keys = TOP(1), *subject = TOP(2);
    if (keys->kind != SYM_CONST || !PyTuple_Check(keys->obj))
        return em_trace_fail(T, EMA_VALUE, "mapping pattern keys %s", em_sym_describe(keys));
    Py_ssize_t n = PyTuple_GET_SIZE(keys->obj);
    EmSym *res = em_sym_new(T, SYM_TUPLE), *get = NULL, *self = NULL;
    PyObject *seen = PySet_New(NULL), *gname = PyUnicode_InternFromString("get");
    EmStatus st = res && seen && gname ? EM_OK : EM_ERR;
    if (st == EM_OK && n) st = em_sym_getattr(T, subject, gname, 1, &get, &self);
    for (Py_ssize_t i = 0; st == EM_OK && i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(keys->obj, i);
        int dup = PySet_Contains(seen, k);
        if (dup < 0 || (!dup && PySet_Add(seen, k))) {
            st = EM_ERR;
            break;
        }
        if (dup) {
            PyObject *r = PyObject_Repr(k);
            st = r ? em_trace_raise_msg(T, PyExc_ValueError, "mapping pattern checks duplicate key (%U)", r) : EM_ERR;
            Py_XDECREF(r);
            break;
        }
        EmSym *args[2] = {em_sym_const(T, k), em_sym_const(T, em_state.unbound)}, *v = NULL;
        if (!args[0] || !args[1]) {
            st = EM_ERR;
            break;
        }
        st = em_call(T, get, self, args, 2, NULL, &v);
        if (st != EM_OK) break;
        if (is_missing(v)) {
            res = em_sym_const(T, Py_None);
            break;
        }
        if (em_vec_push(&res->items, v)) st = (PyErr_NoMemory(), EM_ERR);
    }
    Py_XDECREF(seen);
    Py_XDECREF(gname);
    if (st != EM_OK) return st;
    return res ? em_push(T, res) : EM_ERR;
}

/* getattr(o, name, missing) traced: *out the attribute or the marker. */
static EmStatus attr_or_missing(EmTracer *T, EmSym *o, PyObject *name, EmSym **out) {
    EmSym *args[3] = {o, em_sym_const(T, name), em_sym_const(T, em_state.unbound)};
    if (!args[1] || !args[2]) return EM_ERR;
    return call_known(T, EM_KNOWN(getattr), "getattr", args, 3, out);
}

/* Types whose instances match a single positional sub-pattern as themselves (PEP 634). */
static int matches_self(PyObject *cls) {
    PyTypeObject *const self_types[] = {&PyBool_Type,  &PyByteArray_Type, &PyBytes_Type, &PyDict_Type,
                                        &PyFloat_Type, &PyFrozenSet_Type, &PyLong_Type,  &PyList_Type,
                                        &PySet_Type,   &PyUnicode_Type,   &PyTuple_Type};
    for (size_t i = 0; i < sizeof(self_types) / sizeof(self_types[0]); i++)
        if (PyType_IsSubtype((PyTypeObject *)cls, self_types[i])) return 1;
    return 0;
}

/* The attributes class pattern cls(<count positional>, **names) extracts from subject into
 * res (a tuple sym), or *res = None when one is missing. */
static EmStatus class_attrs(EmTracer *T, EmSym *subject, EmSym *cls, PyObject *names, int count, EmSym **res) {
    PyObject *c = cls->obj, *margs = NULL, *seen = PySet_New(NULL);
    EmStatus st = seen ? EM_OK : EM_ERR;
    EmSym *ma = NULL;
    if (st == EM_OK && count) {
        PyObject *mname = PyUnicode_InternFromString("__match_args__");
        st = mname ? attr_or_missing(T, cls, mname, &ma) : EM_ERR;
        Py_XDECREF(mname);
    }
    if (st == EM_OK && count) {
        const char *cn = ((PyTypeObject *)c)->tp_name;
        if (is_missing(ma) && !matches_self(c)) {
            st = em_trace_raise_msg(T, PyExc_TypeError, "%s() accepts 0 positional sub-patterns (%d given)", cn, count);
        } else if (is_missing(ma) && count > 1) {
            st = em_trace_raise_msg(T, PyExc_TypeError, "%s() accepts 1 positional sub-pattern (%d given)", cn, count);
        } else if (!is_missing(ma)) {
            margs = ma->kind == SYM_CONST ? ma->obj : NULL;
            if (!margs || !PyTuple_Check(margs))
                st = ma->kind == SYM_CONST
                         ? em_trace_raise_msg(T, PyExc_TypeError, "%s.__match_args__ must be a tuple (got %s)", cn,
                                              Py_TYPE(ma->obj)->tp_name)
                         : em_trace_fail(T, EMA_VALUE, "__match_args__ of a %s", em_sym_describe(ma));
            else if (PyTuple_GET_SIZE(margs) < count)
                st = em_trace_raise_msg(T, PyExc_TypeError, "%s() accepts %zd positional sub-pattern%s (%d given)", cn,
                                        PyTuple_GET_SIZE(margs), PyTuple_GET_SIZE(margs) == 1 ? "" : "s", count);
        }
    }
    Py_ssize_t nk = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; st == EM_OK && i < count + nk; i++) {
        EmSym *v = NULL;
        PyObject *name = i < count ? (margs ? PyTuple_GET_ITEM(margs, i) : NULL) : PyTuple_GET_ITEM(names, i - count);
        if (!name) { /* int(x): the subject itself */
            v = subject;
        } else {
            if (!PyUnicode_Check(name)) {
                st = em_trace_raise_msg(T, PyExc_TypeError, "__match_args__ elements must be strings (got %s)",
                                        Py_TYPE(name)->tp_name);
                break;
            }
            int dup = PySet_Contains(seen, name);
            if (dup < 0 || (!dup && PySet_Add(seen, name))) {
                st = EM_ERR;
                break;
            }
            if (dup) {
                st = em_trace_raise_msg(T, PyExc_TypeError, "%s() got multiple sub-patterns for attribute %R",
                                        ((PyTypeObject *)c)->tp_name, name);
                break;
            }
            if ((st = attr_or_missing(T, subject, name, &v)) != EM_OK) break;
            if (is_missing(v)) {
                *res = em_sym_const(T, Py_None);
                break;
            }
        }
        if (em_vec_push(&(*res)->items, v)) st = (PyErr_NoMemory(), EM_ERR);
    }
    Py_XDECREF(seen);
    return st;
}

/* subject, cls, names -> (attributes...) or None */
EmStatus h_match_class(EmTracer *T, const EmInstr *in) {
    NEED(3);
    EmSym *names = POP(), *cls = POP(), *subject = POP(), *yes = NULL;
    if (names->kind != SYM_CONST || !PyTuple_Check(names->obj))
        return em_trace_fail(T, EMA_VALUE, "class pattern names %s", em_sym_describe(names));
    if ((cls->kind != SYM_CONST && cls->kind != SYM_OBJ) || !cls->obj)
        return em_trace_fail(T, EMA_VALUE, "class pattern on a %s", em_sym_describe(cls));
    if (!PyType_Check(cls->obj)) return em_trace_raise_msg(T, PyExc_TypeError, "called match pattern must be a class");
    EmSym *args[2] = {subject, cls};
    EmStatus st = call_known(T, EM_KNOWN(isinstance), "isinstance", args, 2, &yes);
    int truth = 0;
    if (st == EM_OK) st = em_sym_truth(T, yes, &truth);
    if (st != EM_OK) return st;
    EmSym *res = truth ? em_sym_new(T, SYM_TUPLE) : em_sym_const(T, Py_None);
    if (!res) return EM_ERR;
    if (truth && (st = class_attrs(T, subject, cls, names->obj, in->arg, &res)) != EM_OK) return st;
    return em_push(T, res);
}
