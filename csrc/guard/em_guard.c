/* em_guard.c: guard program builder, the allocation-free evaluator run on every call,
 * the explainer for misses and the deterministic dump. Consumes sources and assumptions
 * from the tracer; produces an EmGuardProg owned by a cache entry.
 */
#include "em_guard.h"

#include "../pyver/em_pyver.h"

#include <math.h>

#include "../pyver/em_state.h"

static const char *const g_names[] = {
#define X(e, name, is_load) name,
#include "em_guards.def"
#undef X
};
static const uint8_t g_is_load[] = {
#define X(e, name, is_load) is_load,
#include "em_guards.def"
#undef X
};

void em_guard_init(EmGuardProg *P) { memset(P, 0, sizeof(*P)); }

void em_guard_free(EmGuardProg *P) {
    for (int32_t i = 0; i < P->ins.len; i++) {
        if (!P->ins.data[i].weak) Py_XDECREF(P->ins.data[i].obj);
        free(P->ins.data[i].memo_many);
    }
    Py_CLEAR(P->weakrefs); /* dropped after the objects they watch are no longer read */
    for (int32_t i = 0; i < P->specs.len; i++) em_guard_tensor_spec_free(&P->specs.data[i]);
    for (int32_t i = 0; i < P->names.len; i++) free(P->names.data[i]);
    em_vec_free(&P->ins);
    em_vec_free(&P->specs);
    em_vec_free(&P->names);
    em_vec_free(&P->owned);
    em_vec_free(&P->load_ins);
    em_size_free(&P->sizes);
    free(P->index);
    P->index = NULL;
    P->index_cap = 0;
    P->nslots = 0;
}

/* ---- the dedup index: an instruction's identity is (op, where, a, obj) where `where` is the
 * base of a load and the tested slot of a check; loads compare obj by value for exact str
 * (names and keys), checks by identity; a TENSOR or KEYS check is one per slot, GLOBAL_STATE
 * one per program. ---- */

static void g_key(const EmGInstr *in, int32_t *where, Py_ssize_t *a, PyObject **obj) {
    *where = g_is_load[in->op] ? in->base : in->slot;
    *a = in->op == EMG_TENSOR || in->op == EMG_TYPE_VERSION ? 0 : in->a;
    /* a TYPE_VERSION is found by its class (the first item of its snapshot, a weak reference) */
    *obj = in->op == EMG_KEYS           ? NULL
           : in->op == EMG_TYPE_VERSION ? PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(in->obj, 0))
                                        : in->obj;
}

static uint64_t g_hash(uint8_t op, int32_t where, Py_ssize_t a, PyObject *obj) {
    uint64_t h = (uint64_t)op * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)(uint32_t)where + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
    h ^= ((uint64_t)a + 0x8CB92BA72F3D8DD7ull) * 0x94D049BB133111EBull;
    /* a str's hash is cached and cannot fail */
    uint64_t o = obj && g_is_load[op] && PyUnicode_CheckExact(obj) ? (uint64_t)PyObject_Hash(obj)
                                                                   : (uint64_t)(uintptr_t)obj;
    h ^= (o + 0x2545F4914F6CDD1Dull) * 0xD6E8FEB86659FD93ull;
    return h ^ (h >> 29);
}

static int same_obj(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!a || !b) return 0;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) return PyUnicode_Compare(a, b) == 0;
    return 0;
}

/* The earlier instruction with this identity, or NULL. */
static EmGInstr *g_find(const EmGuardProg *P, uint8_t op, int32_t where, Py_ssize_t a, PyObject *obj) {
    if (!P->index_cap) return NULL;
    uint32_t mask = (uint32_t)P->index_cap - 1;
    for (uint32_t j = (uint32_t)g_hash(op, where, a, obj) & mask;; j = (j + 1) & mask) {
        int32_t k = P->index[j];
        if (!k) return NULL;
        EmGInstr *in = &P->ins.data[k - 1];
        int32_t w;
        Py_ssize_t ia;
        PyObject *io;
        g_key(in, &w, &ia, &io);
        if (in->op == op && w == where && ia == a && (g_is_load[op] ? same_obj(io, obj) : io == obj)) return in;
    }
}

static void g_index_put(EmGuardProg *P, int32_t i) {
    const EmGInstr *in = &P->ins.data[i];
    int32_t w;
    Py_ssize_t a;
    PyObject *o;
    g_key(in, &w, &a, &o);
    uint32_t mask = (uint32_t)P->index_cap - 1;
    uint32_t j = (uint32_t)g_hash(in->op, w, a, o) & mask;
    while (P->index[j]) j = (j + 1) & mask;
    P->index[j] = i + 1;
}

/* Keeps the index at most half full; 0 or -1 (out of memory). */
static int g_index_grow(EmGuardProg *P) {
    if ((int64_t)(P->ins.len + 1) * 2 <= P->index_cap) return 0;
    int32_t cap = P->index_cap ? P->index_cap * 2 : 64;
    int32_t *idx = calloc((size_t)cap, sizeof(int32_t));
    if (!idx) return -1;
    free(P->index);
    P->index = idx;
    P->index_cap = cap;
    for (int32_t i = 0; i < P->ins.len; i++) g_index_put(P, i);
    return 0;
}

/* Slots name values the program has loaded before: a load's base and a check's slots come
 * from earlier loads (a check of the global state reads no slot). */
static int g_push(EmGuardProg *P, EmGuardOp op, int32_t slot, int32_t base, Py_ssize_t a, PyObject *EM_BORROWED obj) {
    EM_ASSERT(op == EMG_GLOBAL_STATE || op == EMG_SHAPE || op == EMG_TYPE_VERSION ? slot == -1
                                                                                  : slot >= 0 && slot < P->nslots,
              "%s: slot %d of %d", g_names[op], (int)slot, (int)P->nslots);
    EM_ASSERT(base >= -1 && base < (g_is_load[op] ? slot : P->nslots), "%s: base slot %d, slot %d", g_names[op],
              (int)base, (int)slot);
    EM_ASSERT((op != EMG_SAME && op != EMG_DISTINCT && op != EMG_ABSENT_KEYED && op != EMG_LOAD_DICT_KEYED) ||
                  (a >= 0 && a < P->nslots),
              "%s: other slot %zd of %d", g_names[op], a, (int)P->nslots);
    EM_ASSERT(op != EMG_LOAD_GLOBAL || base < 0 || (a >= 0 && a < slot), "LOAD_GLOBAL: builtins slot %zd, slot %d", a,
              (int)slot);
    EM_ASSERT(op != EMG_TENSOR || (a >= 0 && a < P->specs.len), "TENSOR: spec %zd of %d", a, (int)P->specs.len);
    EmGInstr in = {.op = (uint8_t)op, .slot = slot, .base = base, .a = a, .obj = obj};
    if (g_index_grow(P) || em_vec_push(&P->ins, in)) {
        PyErr_NoMemory();
        return -1;
    }
    g_index_put(P, P->ins.len - 1);
    Py_XINCREF(obj);
    return 0;
}

/* Deduplicating load: the slot of an identical earlier load, or a new one. */
static int32_t g_load(EmGuardProg *P, EmGuardOp op, int32_t base, Py_ssize_t a, PyObject *obj, const char *name,
                      int owned) {
    EmGInstr *prev = g_find(P, (uint8_t)op, base, a, obj);
    if (prev) return prev->slot;
    int32_t slot = P->nslots;
    char *copy = strdup(name);
    if (!copy || em_vec_push(&P->names, copy) || em_vec_push(&P->owned, (uint8_t)owned)) {
        free(copy);
        PyErr_NoMemory();
        return -1;
    }
    P->nslots++;
    if (g_push(P, op, slot, base, a, obj)) return -1;
    if (em_vec_push(&P->load_ins, P->ins.len - 1)) return PyErr_NoMemory(), -1;
    return slot;
}

/* Whether repr(o) is Python's own for a value of a builtin type (no user __repr__ runs). */
static int plain_value(PyObject *o, int depth) {
    PyTypeObject *t = Py_TYPE(o);
    if (o == Py_None || o == Py_Ellipsis || t == &PyBool_Type || t == &PyLong_Type || t == &PyFloat_Type ||
        t == &PyComplex_Type || t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyCode_Type ||
        t == &PyCFunction_Type || t == &PyFunction_Type || t == &PyType_Type || t == &PyRange_Type)
        return 1;
    if ((t == &PyTuple_Type || t == &PyList_Type) && depth < 4 && PySequence_Fast_GET_SIZE(o) <= 64) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++)
            if (!plain_value(PySequence_Fast_GET_ITEM(o, i), depth + 1)) return 0;
        return 1;
    }
    return 0;
}

/* repr(o) for guard names and messages without running user code (a __repr__ with side effects,
 * or in which an object a guard holds weakly dies): Python's for builtin values, else
 * "<type object at address>". New reference, NULL with an exception. */
static EM_NEW PyObject *safe_repr(PyObject *o) {
    if (!o) return PyUnicode_FromString("?");
    if (plain_value(o, 0)) return PyObject_Repr(o);
    return PyUnicode_FromFormat("<%s object at %p>", Py_TYPE(o)->tp_name, (void *)o);
}

static int32_t g_named(EmGuardProg *P, EmGuardOp op, int32_t base, Py_ssize_t a, PyObject *obj, const char *fmt,
                       PyObject *fmtarg, int owned) {
    EmGInstr *prev = g_find(P, (uint8_t)op, base, a, obj);
    if (prev) return prev->slot; /* before formatting the name */
    PyObject *s = fmtarg ? PyUnicode_FromFormat(fmt, base >= 0 ? P->names.data[base] : "", fmtarg)
                         : PyUnicode_FromFormat(fmt, base >= 0 ? P->names.data[base] : "", (int)a);
    if (!s) return -1;
    const char *u = PyUnicode_AsUTF8(s);
    int32_t r = u ? g_load(P, op, base, a, obj, u, owned) : -1;
    Py_DECREF(s);
    return r;
}

int32_t em_guard_local(EmGuardProg *P, int idx, PyObject *name) {
    return g_named(P, EMG_LOAD_LOCAL, -1, idx, NULL, "%sL['%U']", name, 0);
}
int32_t em_guard_closure(EmGuardProg *P, int idx, PyObject *name) {
    return g_named(P, EMG_LOAD_CLOSURE, -1, idx, NULL, "%sL['%U']", name, 0);
}
int32_t em_guard_free_cell(EmGuardProg *P, int idx, PyObject *name) {
    return g_named(P, EMG_LOAD_FREE_CELL, -1, idx, NULL, "%sL['%U'].cell", name, 0);
}
int32_t em_guard_global(EmGuardProg *P, PyObject *name) {
    return g_named(P, EMG_LOAD_GLOBAL, -1, 0, name, "%sG['%U']", name, 0);
}
int32_t em_guard_frame_globals(EmGuardProg *P) { return g_load(P, EMG_LOAD_GLOBALS, -1, 0, NULL, "globals()", 0); }
int32_t em_guard_global_in(EmGuardProg *P, int32_t gslot, int32_t bslot, PyObject *name) {
    /* named like a root global: the function's module is implied by the function's guard */
    return g_named(P, EMG_LOAD_GLOBAL, gslot, bslot, name, "%s['%U']", name, 0);
}
int32_t em_guard_const(EmGuardProg *P, PyObject *obj, const char *label) {
    return g_load(P, EMG_LOAD_CONST, -1, 0, obj, label, 0);
}
int32_t em_guard_const_owned(EmGuardProg *P, PyObject *obj, const char *label) {
    return g_load(P, EMG_LOAD_CONST, -1, 1, obj, label, 0);
}
int32_t em_guard_cell(EmGuardProg *P, int32_t base, PyObject *name) {
    return g_named(P, EMG_LOAD_CELL, base, 0, NULL, "%s.cell['%U']", name, 0);
}
int32_t em_guard_odict(EmGuardProg *P, int32_t base, PyObject *name) {
    return g_named(P, EMG_LOAD_ODICT, base, 0, name, "%s.%U", name, 0);
}
int32_t em_guard_dict(EmGuardProg *P, int32_t base, PyObject *key) {
    EmGInstr *prev = g_find(P, EMG_LOAD_DICT, base, 0, key);
    if (prev) return prev->slot;
    PyObject *k = safe_repr(key);
    int32_t r = k ? g_named(P, EMG_LOAD_DICT, base, 0, key, "%s[%U]", k, 0) : -1;
    Py_XDECREF(k);
    return r;
}
int32_t em_guard_dict_keyed(EmGuardProg *P, int32_t base, int32_t key) {
    PyObject *s = PyUnicode_FromFormat("%s[%s]", P->names.data[base], P->names.data[key]);
    const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
    int32_t r = u ? g_load(P, EMG_LOAD_DICT_KEYED, base, key, NULL, u, 0) : -1;
    Py_XDECREF(s);
    return r;
}
int32_t em_guard_attr(EmGuardProg *P, int32_t base, PyObject *name) {
    return g_named(P, EMG_LOAD_ATTR, base, 0, name, "%s.%U", name, 1);
}
int32_t em_guard_weakref(EmGuardProg *P, int32_t base) {
    return g_named(P, EMG_LOAD_WEAKREF, base, 0, NULL, "%s()", NULL, 0);
}
int32_t em_guard_call(EmGuardProg *P, int32_t base, PyObject *fn, const char *fmt, int a) {
    return g_named(P, EMG_LOAD_CALL, base, a, fn, fmt, NULL, 1);
}
int32_t em_guard_view_dict(EmGuardProg *P, int32_t base) {
    return g_named(P, EMG_LOAD_VIEW_DICT, base, 0, NULL, "%s.mapping", NULL, 0);
}
int32_t em_guard_op(EmGuardProg *P, PyObject *fn, const char *sym, int32_t left, int32_t right) {
    PyObject *s = right < 0 ? PyUnicode_FromFormat("(%s%s)", sym, P->names.data[left])
                            : PyUnicode_FromFormat("(%s %s %s)", P->names.data[left], sym, P->names.data[right]);
    const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
    int32_t r = u ? g_load(P, EMG_LOAD_OP, left, right, fn, u, 1) : -1;
    Py_XDECREF(s);
    return r;
}
int32_t em_guard_item(EmGuardProg *P, int32_t base, Py_ssize_t i, int is_list) {
    return g_named(P, is_list ? EMG_LOAD_LIST_ITEM : EMG_LOAD_TUPLE_ITEM, base, i, NULL, "%s[%d]", NULL, 0);
}
int32_t em_guard_deque_item(EmGuardProg *P, int32_t base, Py_ssize_t i, PyObject *deque_type) {
    return g_named(P, EMG_LOAD_LIST_ITEM, base, i, deque_type, "%s[%d]", NULL, 0);
}

/* The load instruction writing slot, or NULL. */
static const EmGInstr *load_of(const EmGuardProg *P, int32_t slot) {
    return slot >= 0 && slot < P->load_ins.len ? &P->ins.data[P->load_ins.data[slot]] : NULL;
}

const EmGInstr *em_guard_load_of(const EmGuardProg *P, int32_t slot) { return load_of(P, slot); }

int em_guard_is_buffer(const EmGuardProg *P, int32_t slot) {
    const EmGInstr *in = load_of(P, slot), *tab = in && in->op == EMG_LOAD_DICT ? load_of(P, in->base) : NULL;
    return tab && tab->op == EMG_LOAD_ODICT && PyUnicode_Check(tab->obj) &&
           !PyUnicode_CompareWithASCIIString(tab->obj, "_buffers");
}

int em_guard_check(EmGuardProg *P, EmGuardOp op, int32_t slot, PyObject *obj, Py_ssize_t a) {
    if (op == EMG_EQ && (PySet_CheckExact(obj) || (PyAnySet_Check(obj) && !PyFrozenSet_CheckExact(obj)))) {
        /* a set is mutable: compare with a snapshot of its contents (a == 1 marks it; a == 2: the
         * contents of a set or frozenset subclass's instance, whose type another guard checks) */
        PyObject *snap = PyFrozenSet_New(obj);
        if (!snap) return -1;
        int rc = g_push(P, op, slot, -1, PySet_CheckExact(obj) ? 1 : 2, snap);
        Py_DECREF(snap);
        return rc;
    }
    if (g_find(P, (uint8_t)op, slot, op == EMG_TENSOR ? 0 : a, obj)) return 0;
    return g_push(P, op, slot, -1, a, obj);
}

int em_guard_compare(EmGuardProg *P, int32_t left, int cmp, int32_t right, int expected) {
    Py_ssize_t a = (Py_ssize_t)right * 16 + cmp * 2 + !!expected;
    if (g_find(P, EMG_COMPARE, left, a, NULL)) return 0;
    return g_push(P, EMG_COMPARE, left, -1, a, NULL);
}

int em_guard_check_tensor(EmGuardProg *P, int32_t slot, PyObject *tensor) {
    return em_guard_check_tensor_dyn(P, slot, tensor, 0);
}

int em_guard_check_tensor_dyn(EmGuardProg *P, int32_t slot, PyObject *tensor, uint64_t dyn) {
    if (g_find(P, EMG_TENSOR, slot, 0, NULL)) return 0;
    EmTensorSpec s;
    if (em_guard_tensor_read(tensor, &s)) return -1;
    if (em_guard_tensor_make_dyn(&s, dyn)) {
        em_guard_tensor_spec_free(&s);
        return -1;
    }
    if (em_vec_push(&P->specs, s)) {
        em_guard_tensor_spec_free(&s);
        PyErr_NoMemory();
        return -1;
    }
    return g_push(P, EMG_TENSOR, slot, -1, P->specs.len - 1, NULL);
}

/* tp's version tag, assigned by a lookup through the type cache when it has none (0 when none
 * can be: its tags are used up). */
static unsigned int type_tag(PyTypeObject *tp, PyObject *name) {
    if (!tp->tp_version_tag) (void)_PyType_Lookup(tp, name);
    return tp->tp_version_tag;
}

/* How the snapshot of a class dict holds a value v without keeping objects alive: a weak
 * reference where v takes one; an int, float, str, bytes, bool or None: (v,); a descriptor of a
 * class: (its address, its name); a property, classmethod or staticmethod: (its address, weak
 * references to the functions it wraps); anything else (a class-level container: what a trace
 * reads of it is guarded through its own slot): (its address, None). */
static const char *const wrapped_fns[] = {"fget", "fset", "fdel", "__func__", NULL};

static int is_wrapper(PyObject *v) {
    return Py_IS_TYPE(v, &PyProperty_Type) || Py_IS_TYPE(v, &PyClassMethod_Type) || Py_IS_TYPE(v, &PyStaticMethod_Type);
}

static int is_class_descr(PyObject *v) {
    return Py_IS_TYPE(v, &PyGetSetDescr_Type) || Py_IS_TYPE(v, &PyMemberDescr_Type) ||
           Py_IS_TYPE(v, &PyMethodDescr_Type) || Py_IS_TYPE(v, &PyWrapperDescr_Type) ||
           Py_IS_TYPE(v, &PyClassMethodDescr_Type);
}

static EM_NEW PyObject *weak_or_held(PyObject *v) {
    if (PyType_SUPPORTS_WEAKREFS(Py_TYPE(v)) && !PyWeakref_Check(v)) return PyWeakref_NewRef(v, NULL);
    if (v == Py_None || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v) ||
        PyBytes_CheckExact(v) || PyBool_Check(v))
        return PyTuple_Pack(1, v);
    if (is_class_descr(v)) return Py_BuildValue("(NO)", PyLong_FromVoidPtr(v), PyDescr_NAME(v));
    if (!is_wrapper(v)) return Py_BuildValue("(NO)", PyLong_FromVoidPtr(v), Py_None);
    PyObject *r = PyList_New(0), *addr = PyLong_FromVoidPtr(v);
    int bad = !r || !addr || PyList_Append(r, addr);
    for (int i = 0; !bad && wrapped_fns[i]; i++) {
        PyObject *f = PyObject_GetAttrString(v, wrapped_fns[i]), *w = NULL;
        if (!f) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) bad = 1;
            PyErr_Clear();
            continue;
        }
        w = PyType_SUPPORTS_WEAKREFS(Py_TYPE(f)) ? PyWeakref_NewRef(f, NULL)
                                                 : Py_BuildValue("(N)", PyLong_FromVoidPtr(f));
        bad = !w || PyList_Append(r, w);
        Py_XDECREF(w);
        Py_DECREF(f);
    }
    Py_XDECREF(addr);
    PyObject *t = !bad ? PyList_AsTuple(r) : NULL;
    Py_XDECREF(r);
    return t;
}

/* 1 when cur is the value h holds, 0 when not, -1 on error. */
static int held_is(PyObject *h, PyObject *cur) {
    if (PyWeakref_Check(h)) return cur == PyWeakref_GET_OBJECT(h);
    if (PyTuple_GET_SIZE(h) == 1) return cur == PyTuple_GET_ITEM(h, 0);
    if (PyLong_AsVoidPtr(PyTuple_GET_ITEM(h, 0)) != (void *)cur) return 0;
    if (is_class_descr(cur)) return PyUnicode_Compare(PyDescr_NAME(cur), PyTuple_GET_ITEM(h, 1)) == 0;
    if (!is_wrapper(cur)) return 1;
    for (Py_ssize_t i = 1, k = 0; wrapped_fns[k]; k++) { /* the functions it wraps, in order */
        PyObject *f = PyObject_GetAttrString(cur, wrapped_fns[k]);
        if (!f) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            continue;
        }
        PyObject *w = i < PyTuple_GET_SIZE(h) ? PyTuple_GET_ITEM(h, i++) : NULL;
        int same = w && (PyWeakref_Check(w) ? f == PyWeakref_GET_OBJECT(w)
                                            : (void *)f == PyLong_AsVoidPtr(PyTuple_GET_ITEM(w, 0)));
        Py_DECREF(f);
        if (!same) return 0;
    }
    return 1;
}

/* c's own dict as the snapshot holds it (name -> held value), or None for an immutable class.
 * A version tag names one state of one class for the process's life: the snapshot of a tag is
 * made once and shared by every program (cache: tag -> snapshot; it holds no object alive but
 * small constants, and is cleared when large). */
static EM_NEW PyObject *dict_snapshot(PyTypeObject *c, PyObject *name) {
    static PyObject *cache;
    if (!(c->tp_flags & Py_TPFLAGS_HEAPTYPE) || (c->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) return Py_NewRef(Py_None);
    if (!cache && !(cache = PyDict_New())) return NULL;
    unsigned int tag = type_tag(c, name);
    PyObject *key = tag ? PyLong_FromUnsignedLong(tag) : NULL;
    PyObject *snap = key ? Py_XNewRef(PyDict_GetItemWithError(cache, key)) : NULL;
    if (snap || PyErr_Occurred()) {
        Py_XDECREF(key);
        return snap;
    }
    PyObject *d = em_type_dict(c), *k, *v, *copy = PyDict_New();
    Py_ssize_t pos = 0;
    while (d && copy && PyDict_Next(d, &pos, &k, &v)) {
        PyObject *h = weak_or_held(v);
        if (!h || PyDict_SetItem(copy, k, h)) Py_CLEAR(copy);
        Py_XDECREF(h);
    }
    if (copy && key) {
        if (PyDict_GET_SIZE(cache) >= 4096) PyDict_Clear(cache);
        if (PyDict_SetItem(cache, key, copy)) Py_CLEAR(copy);
    }
    Py_XDECREF(key);
    return copy;
}

/* (weak tp, its MRO held weakly, per MRO class its dict_snapshot, a name for type_tag) */
static EM_NEW PyObject *type_snapshot(PyTypeObject *tp, PyObject *name) {
    Py_ssize_t n = PyTuple_GET_SIZE(tp->tp_mro);
    PyObject *mro = PyTuple_New(n), *dicts = PyTuple_New(n), *wtp = PyWeakref_NewRef((PyObject *)tp, NULL);
    for (Py_ssize_t i = 0; mro && dicts && i < n; i++) {
        PyTypeObject *c = (PyTypeObject *)PyTuple_GET_ITEM(tp->tp_mro, i);
        PyObject *wc = PyWeakref_NewRef((PyObject *)c, NULL), *ds = dict_snapshot(c, name);
        if (!wc || !ds) {
            Py_XDECREF(wc);
            Py_XDECREF(ds);
            Py_CLEAR(mro);
            break;
        }
        PyTuple_SET_ITEM(mro, i, wc);
        PyTuple_SET_ITEM(dicts, i, ds);
    }
    PyObject *snap = mro && dicts && wtp ? PyTuple_Pack(4, wtp, mro, dicts, name) : NULL;
    Py_XDECREF(mro);
    Py_XDECREF(dicts);
    Py_XDECREF(wtp);
    return snap;
}

static PyTypeObject *snap_type(PyObject *snap) { /* NULL once the class died */
    PyObject *tp = PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(snap, 0));
    return tp == Py_None ? NULL : (PyTypeObject *)tp;
}

int em_guard_type_version(EmGuardProg *P, PyTypeObject *tp) {
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || (tp->tp_flags & Py_TPFLAGS_IMMUTABLETYPE)) return 0;
    if (g_find(P, EMG_TYPE_VERSION, -1, 0, (PyObject *)tp)) return 0;
    PyObject *name = PyUnicode_InternFromString("__init__");
    unsigned int tag = name ? type_tag(tp, name) : 0;
    if (!name || !tag || !tp->tp_mro) {
        Py_XDECREF(name);
        return name ? 1 : -1;
    }
    /* a tag that moved without a change to what the snapshot holds (a class attribute patched
     * and put back, as FX's tracer does to nn.Module) is taken anew */
    PyObject *snap = type_snapshot(tp, name);
    Py_DECREF(name);
    int rc = snap ? g_push(P, EMG_TYPE_VERSION, -1, -1, (Py_ssize_t)tag, snap) : -1;
    Py_XDECREF(snap);
    return rc;
}

/* TYPE_VERSION whose tag moved: 1 (the tag taken anew) when tp's MRO and every MRO class's dict
 * hold what the trace saw, else 0 (-1 on error). Off the hot path: the tag moves only when a
 * class changed. */
static int type_unchanged(EmGInstr *in) {
    PyObject *snap = in->obj, *mro = PyTuple_GET_ITEM(snap, 1), *dicts = PyTuple_GET_ITEM(snap, 2);
    PyTypeObject *tp = snap_type(snap);
    if (!tp || !tp->tp_mro || PyTuple_GET_SIZE(tp->tp_mro) != PyTuple_GET_SIZE(mro)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *c = PyTuple_GET_ITEM(tp->tp_mro, i), *was = PyTuple_GET_ITEM(dicts, i);
        if (c != PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(mro, i))) return 0;
        if (was == Py_None) continue; /* an immutable class */
        PyObject *now = em_type_dict((PyTypeObject *)c);
        if (!now || PyDict_GET_SIZE(now) != PyDict_GET_SIZE(was)) return 0;
        Py_ssize_t pos = 0;
        PyObject *k, *h;
        while (PyDict_Next(was, &pos, &k, &h)) {
            PyObject *cur = PyDict_GetItemWithError(now, k);
            if (!cur) return PyErr_Occurred() ? -1 : 0;
            int same = held_is(h, cur);
            if (same <= 0) return same;
        }
    }
    in->a = (Py_ssize_t)type_tag(tp, PyTuple_GET_ITEM(snap, 3));
    return 1;
}

PyObject *em_dict_keys_ordered(PyObject *d) {
    if (!PyODict_Check(d)) {
        PyObject *keys = PyDict_Keys(d), *t = keys ? PyList_AsTuple(keys) : NULL;
        Py_XDECREF(keys);
        return t;
    }
    PyObject *it = PyODict_Type.tp_iter(d), *k; /* OrderedDict's own order (move_to_end changes it) */
    PyObject *l = it ? PyList_New(0) : NULL;
    while (l && (k = PyIter_Next(it))) {
        if (PyList_Append(l, k)) Py_CLEAR(l);
        Py_DECREF(k);
    }
    Py_XDECREF(it);
    if (PyErr_Occurred()) Py_CLEAR(l);
    PyObject *t = l ? PyList_AsTuple(l) : NULL;
    Py_XDECREF(l);
    return t;
}

int em_guard_check_keys(EmGuardProg *P, int32_t slot, PyObject *d) {
    if (g_find(P, EMG_KEYS, slot, 0, NULL)) return 0;
    PyObject *t = em_dict_keys_ordered(d);
    if (!t) return -1;
    int rc = g_push(P, EMG_KEYS, slot, -1, 0, t);
    Py_DECREF(t);
    return rc;
}

int em_guard_check_no_hooks(EmGuardProg *P, int32_t slot, PyObject *names) {
    if (g_find(P, EMG_NO_HOOKS, slot, 0, names)) return 0;
    PyObject **many = calloc((size_t)PyTuple_GET_SIZE(names) + 1, sizeof(PyObject *));
    if (!many) return PyErr_NoMemory(), -1;
    if (g_push(P, EMG_NO_HOOKS, slot, -1, 0, names)) {
        free(many);
        return -1;
    }
    P->ins.data[P->ins.len - 1].memo_many = many;
    return 0;
}

int em_guard_check_global_state(EmGuardProg *P) {
    if (g_find(P, EMG_GLOBAL_STATE, -1, 0, NULL)) return 0;
    if (em_guard_global_state_capture(&P->gs)) return -1;
    return g_push(P, EMG_GLOBAL_STATE, -1, -1, 0, NULL);
}

int em_guard_check_shape(EmGuardProg *P, const EmSizes *S) {
    if (!S->srcs.len && !S->rels.len) return 0; /* no symbol, or only unbacked ones: nothing to check */
    if (S->nodes.len > EM_SIZE_MAX) { /* symbols are expressions too: this bounds both buffers */
        PyErr_Format(PyExc_RuntimeError, "ember: more than %d symbolic size expressions", EM_SIZE_MAX);
        return -1;
    }
    em_size_free(&P->sizes);
    if (em_size_copy(&P->sizes, S)) return PyErr_NoMemory(), -1;
    return g_push(P, EMG_SHAPE, -1, -1, 0, NULL);
}

int em_guard_shape_eval(const EmGuardProg *P, PyObject **slots, int64_t *vals, int32_t *failed_rel) {
    const EmSizes *S = &P->sizes;
    int64_t symvals[EM_SIZE_MAX];
    uint8_t have[EM_SIZE_MAX];
    int32_t nsym = S->sym_hint.len;
    *failed_rel = -1;
    memset(have, 0, (size_t)nsym);
    for (int32_t i = 0; i < S->srcs.len; i++) {
        const EmSizeSrc *src = &S->srcs.data[i];
        PyObject *o = slots[src->slot];
        int64_t v;
        if (src->dim >= 0) {
            if (em_guard_tensor_size(o, src->dim, &v)) return -1;
        } else {
            int overflow = 0;
            if (!o || !PyLong_CheckExact(o)) return 0;
            v = PyLong_AsLongLongAndOverflow(o, &overflow);
            if (overflow) return 0;
            if (v == -1 && PyErr_Occurred()) return -1;
        }
        if (!have[src->sym]) {
            have[src->sym] = 1;
            symvals[src->sym] = v;
        } else if (symvals[src->sym] != v) {
            return 0;
        }
    }
    for (int32_t k = 0; k < nsym; k++) /* an unbacked symbol (no source, in no relation): its hint */
        if (!have[k]) symvals[k] = S->sym_hint.data[k];
    if (em_size_eval(S, symvals, vals)) return 0;
    *failed_rel = em_size_check(S, vals);
    return *failed_rel < 0;
}

static int shape_match(const EmGuardProg *P, PyObject **slots) {
    int64_t vals[EM_SIZE_MAX];
    int32_t rel;
    return em_guard_shape_eval(P, slots, vals, &rel);
}

/* Weak candidates: identity checks and constant loads of objects that support weak
 * references. */
static int weak_candidate(const EmGInstr *in) {
    if (!in->obj || !PyType_SUPPORTS_WEAKREFS(Py_TYPE(in->obj))) return 0;
    return in->op == EMG_ID || in->op == EMG_TYPE || (in->op == EMG_LOAD_CONST && !in->a);
}

int em_guard_weaken(EmGuardProg *P, PyObject *on_death) {
    PyObject *made = PyDict_New(); /* id(obj) -> its weak reference (one per object) */
    if (!made) return -1;
    if (!P->weakrefs && !(P->weakrefs = PyList_New(0))) goto error;
    for (int32_t i = 0; i < P->ins.len; i++) {
        EmGInstr *in = &P->ins.data[i];
        if (in->weak || !weak_candidate(in)) continue;
        PyObject *key = PyLong_FromVoidPtr(in->obj);
        if (!key) goto error;
        PyObject *wr = PyDict_GetItemWithError(made, key);
        if (!wr && !PyErr_Occurred()) {
            wr = PyWeakref_NewRef(in->obj, on_death);
            int bad = !wr || PyDict_SetItem(made, key, wr) || PyList_Append(P->weakrefs, wr);
            Py_XDECREF(wr); /* the list holds it */
            if (bad) wr = NULL;
        }
        Py_DECREF(key);
        if (!wr) goto error;
    }
    Py_DECREF(made);
    /* now the strong references go (an object only the program held dies here, and its
     * callback marks the program dead) */
    for (int32_t i = 0; i < P->ins.len; i++) {
        EmGInstr *in = &P->ins.data[i];
        if (in->weak || !weak_candidate(in)) continue;
        in->weak = 1;
        Py_DECREF(in->obj);
    }
    return 0;
error:
    Py_DECREF(made);
    return -1;
}

/* ---- evaluation (hot path: no allocation) ---- */

/* d[key] for a load: the value the last run found when d is unchanged since (no hash lookup). */
static PyObject *memo_get(EmGInstr *in, PyObject *d, PyObject *key) {
    uint64_t tag = em_dict_tag(d);
    if (tag == in->memo_tag && d == in->memo_dict) return in->memo_val;
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v) {
        in->memo_tag = tag;
        in->memo_dict = d;
        in->memo_val = v;
    }
    return v;
}

/* A check on dict d that passed at the last run and d unchanged since: 1; else 0. */
static int memo_passed(const EmGInstr *in, PyObject *d) { return em_dict_tag(d) == in->memo_tag && d == in->memo_dict; }

/* r (a check's result on dict d) remembered when it passed; returns r. */
static int memo_pass(EmGInstr *in, PyObject *d, int r) {
    if (r == 1) {
        in->memo_tag = em_dict_tag(d);
        in->memo_dict = d;
    }
    return r;
}

static PyObject *odict_get(EmGInstr *in, PyObject *o, PyObject *name) {
    PyObject *d = em_obj_dict(o);
    return d ? memo_get(in, d, name) : NULL;
}

/* -0.0 differs from 0.0 (1/x differs). A NaN is only itself: hash(nan) and `is` depend on the
 * object (const_same tested identity first). */
static int same_float(double x, double y) { return x == y && signbit(x) == signbit(y); }

static int const_same(PyObject *v, PyObject *c, int depth);

/* The one type of all items of set c when it is int, str or bytes (equal items of such a type
 * are the same constant), else NULL. */
static PyTypeObject *simple_item_type(PyObject *c) {
    Py_ssize_t pos = 0;
    PyObject *y;
    Py_hash_t h;
    PyTypeObject *one = NULL;
    while (_PySet_NextEntry(c, &pos, &y, &h)) {
        PyTypeObject *t = Py_TYPE(y);
        if ((t != &PyLong_Type && t != &PyUnicode_Type && t != &PyBytes_Type) || (one && one != t)) return NULL;
        one = t;
    }
    return one;
}

/* Sets of constants: every item of v has an exactly equal item in c, and the sizes agree (so
 * the matching is one to one). A set whose items are all ints, all strs or all bytes only needs
 * the items' type and a hash lookup; other sets compare item by item. */
static int set_same(PyObject *v, PyObject *c, int depth) {
    if (PySet_GET_SIZE(v) != PySet_GET_SIZE(c)) return 0;
    PyTypeObject *one = simple_item_type(c);
    Py_ssize_t pos = 0;
    PyObject *x, *y;
    Py_hash_t h;
    while (_PySet_NextEntry(v, &pos, &x, &h)) {
        if (one) {
            if (Py_TYPE(x) != one) return 0;
            int r = PySet_Contains(c, x);
            if (r != 1) return r;
            continue;
        }
        int found = 0;
        Py_ssize_t cpos = 0;
        while (!found && _PySet_NextEntry(c, &cpos, &y, &h)) {
            found = const_same(x, y, depth + 1);
            if (found < 0) return -1;
        }
        if (!found) return 0;
    }
    return 1;
}

static int const_same(PyObject *v, PyObject *c, int depth);

/* An OrderedDict's keys in its own order (not its storage's, which move_to_end leaves) are the
 * tuple want's (lengths already equal). */
static int odict_keys_same(PyObject *d, PyObject *want) {
    PyObject *it = PyODict_Type.tp_iter(d), *k;
    int r = it ? 1 : -1;
    for (Py_ssize_t i = 0; r == 1 && (k = PyIter_Next(it)); i++) {
        r = i >= PyTuple_GET_SIZE(want)      ? 0
            : k == PyTuple_GET_ITEM(want, i) ? 1
                                             : const_same(k, PyTuple_GET_ITEM(want, i), 0);
        Py_DECREF(k);
    }
    Py_XDECREF(it);
    return PyErr_Occurred() ? -1 : r;
}

/* 1 when v is the constant c: the same exact type and the same value, floats and complex
 * numbers by value and sign, tuples, slices and ranges item by item, sets as above; 0 when not,
 * -1 on error. c is immutable (a set's guard holds a frozenset snapshot, see em_guard_check). */
static int const_same(PyObject *v, PyObject *c, int depth) {
    if (v == c) return 1;
    if (Py_TYPE(v) != Py_TYPE(c)) return 0;
    if (depth > 32) return PyObject_RichCompareBool(v, c, Py_EQ);
    if (PyFloat_CheckExact(v)) return same_float(PyFloat_AS_DOUBLE(v), PyFloat_AS_DOUBLE(c));
    /* a complex number holding a NaN, like a NaN float, is only itself */
    if (PyComplex_CheckExact(v)) {
        Py_complex x = PyComplex_AsCComplex(v), y = PyComplex_AsCComplex(c);
        return same_float(x.real, y.real) && same_float(x.imag, y.imag);
    }
    if (PyTuple_Check(v)) {
        Py_ssize_t n = PyTuple_GET_SIZE(v);
        if (n != PyTuple_GET_SIZE(c)) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = const_same(PyTuple_GET_ITEM(v, i), PyTuple_GET_ITEM(c, i), depth + 1);
            if (r != 1) return r;
        }
        return 1;
    }
    if (PySlice_Check(v)) {
        PySliceObject *a = (PySliceObject *)v, *b = (PySliceObject *)c;
        int r = const_same(a->start, b->start, depth + 1);
        if (r == 1) r = const_same(a->stop, b->stop, depth + 1);
        if (r == 1) r = const_same(a->step, b->step, depth + 1);
        return r;
    }
    if (PyRange_Check(v)) { /* range(0, 3, 2) == range(0, 4, 2), but their .stop differ */
        static const char *const parts[] = {"start", "stop", "step"};
        for (int i = 0; i < 3; i++) {
            PyObject *x = PyObject_GetAttrString(v, parts[i]), *y = x ? PyObject_GetAttrString(c, parts[i]) : NULL;
            int r = y ? PyObject_RichCompareBool(x, y, Py_EQ) : -1;
            Py_XDECREF(x);
            Py_XDECREF(y);
            if (r != 1) return r;
        }
        return 1;
    }
    if (PyAnySet_Check(v)) return set_same(v, c, depth);
    return PyObject_RichCompareBool(v, c, Py_EQ);
}

static int eq_const(PyObject *v, PyObject *c, Py_ssize_t is_set) {
    if (is_set == 2) return PyAnySet_Check(v) ? set_same(v, c, 0) : 0;
    if (is_set) return PySet_CheckExact(v) ? set_same(v, c, 0) : 0;
    return const_same(v, c, 0);
}

static int gs_match(const EmGlobalState *want) {
    EmGlobalState now;
    if (em_guard_global_state_read(&now)) return -1;
    return em_guard_global_state_equal(&now, want);
}

int em_guard_default_by_slot(PyObject *v) {
    return PyList_Check(v) || PyDict_Check(v) || PyAnySet_Check(v) || PyByteArray_Check(v) ||
           PyObject_TypeCheck(v, em_state.tensor_type);
}

/* One default value of a function against the one seen: equal when bit `consts` says the
 * defaults were all constants, else the same object; one the trace reads through a slot of its
 * own (em_guard_default_by_slot) is not compared. */
static int default_match(PyObject *h, PyObject *want, int consts) {
    if (h == want || em_guard_default_by_slot(want)) return 1;
    return consts ? const_same(h, want, 0) : 0;
}

/* EMG_FUNC: v a function of code spec[0] whose defaults and keyword defaults are spec[1] and
 * spec[2] (tuple, dict or None): the same objects, or item by item as default_match, bit k of
 * spec[3] saying whether they are all constants. */
static int func_match(PyObject *v, PyObject *spec) {
    if (!PyFunction_Check(v)) return 0;
    PyFunctionObject *f = (PyFunctionObject *)v;
    if (f->func_code != PyTuple_GET_ITEM(spec, 0)) return 0;
    PyObject *have[2] = {f->func_defaults, f->func_kwdefaults};
    long consts = PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
    for (int k = 0; k < 2; k++) {
        PyObject *want = PyTuple_GET_ITEM(spec, k + 1), *h = have[k] ? have[k] : Py_None;
        if (h == want) continue;
        if (h == Py_None || want == Py_None) return 0;
        int c = !!(consts & (1 << k)), r = 1;
        if (k == 0) {
            if (PyTuple_GET_SIZE(h) != PyTuple_GET_SIZE(want)) return 0;
            for (Py_ssize_t i = 0; r == 1 && i < PyTuple_GET_SIZE(h); i++)
                r = default_match(PyTuple_GET_ITEM(h, i), PyTuple_GET_ITEM(want, i), c);
        } else {
            if (!PyDict_Check(h) || PyDict_GET_SIZE(h) != PyDict_GET_SIZE(want)) return 0;
            Py_ssize_t pos = 0;
            PyObject *key, *w;
            while (r == 1 && PyDict_Next(want, &pos, &key, &w)) {
                PyObject *hv = PyDict_GetItemWithError(h, key);
                r = hv ? default_match(hv, w, c) : PyErr_Occurred() ? -1 : 0;
            }
        }
        if (r != 1) return r;
    }
    return 1;
}

/* EMG_COMPARE: 1 when the comparison gives the expected truth, else 0 (one that raises too).
 * No identity shortcut: a NaN compares unequal to itself, as in Python. */
static int compare_holds(PyObject **slots, const EmGInstr *in) {
    PyObject *r = PyObject_RichCompare(slots[in->slot], slots[in->a >> 4], (int)((in->a >> 1) & 7));
    int t = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (t < 0) PyErr_Clear();
    return t == (int)(in->a & 1);
}

/* EMG_NO_HOOKS: the dicts o.__dict__ holds under in->obj's names, found again only when
 * o.__dict__ changed since the last run (they are the objects it holds then), each empty. */
static int no_hooks(EmGInstr *in, PyObject *o) {
    PyObject *d = em_obj_dict(o);
    Py_ssize_t n = PyTuple_GET_SIZE(in->obj);
    if (!d) return 0;
    if (!memo_passed(in, d)) {
        in->memo_dict = NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *h = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(in->obj, i));
            if (!h || !PyDict_Check(h)) return PyErr_Occurred() ? -1 : 0;
            in->memo_many[i] = h;
        }
        in->memo_tag = em_dict_tag(d);
        in->memo_dict = d;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyDict_GET_SIZE(in->memo_many[i])) return 0;
    return 1;
}

static const char *const cmp_names[] = {"<", "<=", "==", "!=", ">", ">="};

/* Returns 1 pass, 0 fail, -1 error. */
static int g_step(const EmGuardProg *P, const EmGInstr *in, const EmFrameIn *f, PyObject **slots) {
    PyObject *v = NULL, *b = in->base >= 0 ? slots[in->base] : NULL;
    switch ((EmGuardOp)in->op) {
        case EMG_LOAD_LOCAL: v = f->localsplus[in->a]; break;
        case EMG_LOAD_CLOSURE:
            if (!f->closure || in->a >= PyTuple_GET_SIZE(f->closure)) return 0;
            v = PyCell_GET(PyTuple_GET_ITEM(f->closure, in->a));
            break;
        case EMG_LOAD_GLOBAL: {
            PyObject *g = b ? b : f->globals, *bi = b ? slots[in->a] : f->builtins;
            v = PyDict_GetItemWithError(g, in->obj);
            if (!v && !PyErr_Occurred() && PyDict_CheckExact(bi)) v = PyDict_GetItemWithError(bi, in->obj);
            break;
        }
        case EMG_LOAD_FREE_CELL:
            if (!f->closure || in->a >= PyTuple_GET_SIZE(f->closure)) return 0;
            v = PyTuple_GET_ITEM(f->closure, in->a);
            break;
        case EMG_LOAD_GLOBALS: v = f->globals; break;
        case EMG_LOAD_CONST: v = in->obj; break;
        case EMG_LOAD_CELL: v = PyCell_GET(b); break;
        case EMG_LOAD_ODICT: v = odict_get((EmGInstr *)in, b, in->obj); break;
        case EMG_LOAD_DICT: /* dict storage: a subclass's __getitem__ is not consulted */
            if (!PyDict_Check(b)) return 0;
            v = memo_get((EmGInstr *)in, b, in->obj);
            break;
        case EMG_LOAD_DICT_KEYED:
            if (!PyDict_Check(b)) return 0;
            v = PyDict_GetItemWithError(b, slots[in->a]);
            break;
        case EMG_LOAD_ATTR:
            v = PyObject_GetAttr(b, in->obj);
            if (!v && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
            break;
        case EMG_LOAD_TUPLE_ITEM: /* tuple storage: a namedtuple's items (its type is guarded) */
            if (!PyTuple_Check(b) || in->a >= PyTuple_GET_SIZE(b)) return 0;
            v = PyTuple_GET_ITEM(b, in->a);
            break;
        case EMG_LOAD_LIST_ITEM: /* the storage of a list (a subclass's too: its type is guarded) */
            if (in->obj) { /* of an exact deque (obj its type): borrowed, as the deque holds it */
                if (!Py_IS_TYPE(b, (PyTypeObject *)in->obj) || in->a >= PyObject_Length(b)) return 0;
                v = PySequence_GetItem(b, in->a);
                Py_XDECREF(v);
                break;
            }
            if (!PyList_Check(b) || in->a >= PyList_GET_SIZE(b)) return 0;
            v = PyList_GET_ITEM(b, in->a);
            break;
        case EMG_LOAD_WEAKREF:
            if (!PyWeakref_CheckRefExact(b)) return 0;
            v = PyWeakref_GetObject(b); /* borrowed; the referent is kept alive by its owners */
            break;
        case EMG_LOAD_CALL:
            v = PyObject_CallOneArg(in->obj, b);
            if (!v && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear(); /* not convertible now: a miss */
            break;
        case EMG_LOAD_VIEW_DICT:
            if (Py_IS_TYPE(b, &PyDictProxy_Type)) {
                v = em_mappingproxy_mapping(b);
                break;
            }
            if (!Py_IS_TYPE(b, &PyDictKeys_Type) && !Py_IS_TYPE(b, &PyDictValues_Type) &&
                !Py_IS_TYPE(b, &PyDictItems_Type))
                return 0;
            v = (PyObject *)((_PyDictViewObject *)b)->dv_dict;
            break;
        case EMG_LOAD_OP: {
            PyObject *args[2] = {b, in->a >= 0 ? slots[in->a] : NULL};
            v = PyObject_Vectorcall(in->obj, args, in->a >= 0 ? 2 : 1, NULL);
            if (!v && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear(); /* 1.0 / 0.0: a miss */
            break;
        }
        case EMG_COMPARE: return compare_holds(slots, in);
        case EMG_CELL_EMPTY: return PyCell_Check(slots[in->slot]) && !PyCell_GET(slots[in->slot]);
        case EMG_TYPE: return (PyObject *)Py_TYPE(slots[in->slot]) == in->obj;
        case EMG_ID: return slots[in->slot] == in->obj;
        case EMG_FUNC: return func_match(slots[in->slot], in->obj);
        case EMG_EQ: return eq_const(slots[in->slot], in->obj, in->a);
        case EMG_LEN: { /* a list's, tuple's or dict's storage (a subclass's own __len__ is never run) */
            PyObject *o = slots[in->slot];
            Py_ssize_t n = PyList_Check(o)    ? PyList_GET_SIZE(o)
                           : PyTuple_Check(o) ? PyTuple_GET_SIZE(o)
                           : PyDict_Check(o)  ? PyDict_GET_SIZE(o)
                                              : PyObject_Length(o);
            if (n < 0) return -1;
            return n == in->a;
        }
        case EMG_KEYS: {
            PyObject *d = slots[in->slot], *k, *val;
            if (!PyDict_Check(d) || PyDict_GET_SIZE(d) != PyTuple_GET_SIZE(in->obj)) return 0;
            if (!PyTuple_GET_SIZE(in->obj)) return 1; /* empty (a module's hooks, mostly): nothing to walk */
            if (PyODict_Check(d) && PyTuple_GET_SIZE(in->obj) > 1) /* move_to_end leaves the dict's tag */
                return odict_keys_same(d, in->obj);
            if (memo_passed(in, d)) return 1;
            Py_ssize_t pos = 0, i = 0;
            while (PyDict_Next(d, &pos, &k, &val)) {
                PyObject *want = PyTuple_GET_ITEM(in->obj, i++);
                int r = k == want ? 1 : const_same(k, want, 0);
                if (r != 1) return r;
            }
            return memo_pass((EmGInstr *)in, d, 1);
        }
        case EMG_TENSOR: return em_guard_tensor_match(slots[in->slot], &P->specs.data[in->a]);
        case EMG_SAME: return slots[in->slot] == slots[in->a];
        case EMG_DISTINCT: return slots[in->slot] != slots[in->a];
        case EMG_ABSENT: {
            PyObject *d = slots[in->slot];
            if (!in->a) {
                d = em_obj_dict(d);
            } else if (!PyDict_Check(d)) {
                return 0;
            }
            if (!d) return 1;
            if (memo_passed(in, d)) return 1;
            int has = PyDict_Contains(d, in->obj);
            return has < 0 ? -1 : memo_pass((EmGInstr *)in, d, !has);
        }
        case EMG_NO_HOOKS: return no_hooks((EmGInstr *)in, slots[in->slot]);
        case EMG_ABSENT_KEYED: {
            PyObject *d = slots[in->slot];
            int has = PyDict_Check(d) ? PyDict_Contains(d, slots[in->a]) : 1;
            return has < 0 ? -1 : !has;
        }
        case EMG_GLOBAL_STATE: return gs_match(&P->gs);
        case EMG_TYPE_VERSION: {
            PyTypeObject *tp = snap_type(in->obj);
            return tp && ((in->a && tp->tp_version_tag == (unsigned int)in->a) || type_unchanged((EmGInstr *)in));
        }
        case EMG_SHAPE: return shape_match(P, slots);
        default: return -1;
    }
    if (!v) return PyErr_Occurred() ? -1 : 0;
    slots[in->slot] = v;
    return 1;
}

int em_guard_run(const EmGuardProg *P, const EmFrameIn *f, PyObject **slots, int32_t *failed) {
    for (int32_t i = 0; i < P->nslots; i++) slots[i] = NULL;
    for (int32_t i = 0; i < P->ins.len; i++) {
        /* a guarded object died (maybe during this run, in Python code a step ran) */
        int r = EM_UNLIKELY(P->dead) ? 0 : g_step(P, &P->ins.data[i], f, slots);
        if (r != 1) {
            if (failed) *failed = i;
            return r;
        }
    }
    return 1;
}

void em_guard_release_slots(const EmGuardProg *P, PyObject **slots) {
    for (int32_t i = 0; i < P->nslots; i++)
        if (P->owned.data[i]) Py_CLEAR(slots[i]);
}

/* ---- misses and dumps (may allocate) ---- */

static EM_NEW PyObject *shape_why(const EmGuardProg *P, PyObject **slots);

EM_NEW /* fmt (a %s for name, then two %U) with safe_repr of a and b (b NULL: an empty string). */
    static EM_NEW PyObject *
    describe2(const char *name, const char *fmt, PyObject *a, PyObject *b) {
    PyObject *ra = safe_repr(a), *rb = b ? safe_repr(b) : PyUnicode_FromString("");
    PyObject *res = ra && rb ? PyUnicode_FromFormat(fmt, name, ra, rb) : NULL;
    Py_XDECREF(ra);
    Py_XDECREF(rb);
    return res;
}

PyObject *em_guard_explain(const EmGuardProg *P, const EmFrameIn *f, int32_t at) {
    if (P->dead) return PyUnicode_FromString("an object the guards checked by identity died");
    const EmGInstr *in = &P->ins.data[at];
    const char *name = in->slot >= 0 ? P->names.data[in->slot] : "";
    if (g_is_load[in->op]) {
        const char *base = in->base >= 0 ? P->names.data[in->base] : "frame";
        return PyUnicode_FromFormat("%s is missing (from %s)", name, base);
    }
    PyObject **slots = PyMem_Calloc((size_t)P->nslots + 1, sizeof(PyObject *));
    if (!slots) return PyErr_NoMemory();
    PyObject *res = NULL;
    for (int32_t i = 0; i < at && !P->dead; i++)
        if (g_step(P, &P->ins.data[i], f, slots) != 1) break;
    PyObject *v = in->slot >= 0 ? slots[in->slot] : NULL;
    switch (P->dead ? EMG__COUNT : (EmGuardOp)in->op) {
        case EMG__COUNT: res = PyUnicode_FromString("an object the guards checked by identity died"); break;
        case EMG_TYPE:
            res = PyUnicode_FromFormat("type(%s) is %s, expected %s", name, v ? Py_TYPE(v)->tp_name : "?",
                                       ((PyTypeObject *)in->obj)->tp_name);
            break;
        case EMG_ID: res = describe2(name, "%s is %U, expected the object %U", v, in->obj); break;
        case EMG_EQ: res = describe2(name, "%s == %U, expected %U", v, in->obj); break;
        case EMG_CELL_EMPTY: res = PyUnicode_FromFormat("%s now holds a value, expected it empty", name); break;
        case EMG_COMPARE: {
            PyObject *rv = safe_repr(v);
            res = rv ? PyUnicode_FromFormat("%s %s %s is %s (%s is %U), expected the opposite", name,
                                            cmp_names[(in->a >> 1) & 7], P->names.data[in->a >> 4],
                                            in->a & 1 ? "False" : "True", name, rv)
                     : NULL;
            Py_XDECREF(rv);
        } break;
        case EMG_FUNC:
            res = describe2(name, "%s is %U, expected a function of code %U", v, PyTuple_GET_ITEM(in->obj, 0));
            break;
        case EMG_LEN: res = PyUnicode_FromFormat("len(%s) changed, expected %zd", name, in->a); break;
        case EMG_KEYS:
            res = describe2(name, "the keys of %s changed, expected %U in this order%U", in->obj, NULL);
            break;
        case EMG_ABSENT: res = describe2(name, "%s now has %U, expected it absent%U", in->obj, NULL); break;
        case EMG_NO_HOOKS:
            res = describe2(name, "%s has hooks now (or its hook dicts changed), expected none of %U%U", in->obj, NULL);
            break;
        case EMG_ABSENT_KEYED:
            res = PyUnicode_FromFormat("%s now has %s, expected it absent", name, P->names.data[in->a]);
            break;
        case EMG_SAME:
            res = PyUnicode_FromFormat("%s is no longer the same object as %s", name, P->names.data[in->a]);
            break;
        case EMG_DISTINCT:
            res = PyUnicode_FromFormat("%s is now the same object as %s", name, P->names.data[in->a]);
            break;
        case EMG_TYPE_VERSION:
            res = PyUnicode_FromFormat("class %s changed (an attribute of it or of a base class set or deleted)",
                                       snap_type(in->obj) ? snap_type(in->obj)->tp_name : "(dead)");
            break;
        case EMG_GLOBAL_STATE: {
            EmGlobalState now;
            if (em_guard_global_state_capture(&now) == 0)
                res = PyUnicode_FromFormat(
                    "global state changed: grad_enabled %d->%d, autocast cpu %d->%d, cuda %d->%d, "
                    "default dtype %R->%R",
                    P->gs.grad, now.grad, P->gs.autocast_cpu, now.autocast_cpu, P->gs.autocast_cuda, now.autocast_cuda,
                    P->gs.default_dtype, now.default_dtype);
            break;
        }
        case EMG_TENSOR: {
            const EmTensorSpec *s = &P->specs.data[in->a];
            if (!v || Py_TYPE(v) != s->type)
                res = PyUnicode_FromFormat("type(%s) is %s, expected %s", name, v ? Py_TYPE(v)->tp_name : "?",
                                           s->type->tp_name);
            else res = em_guard_tensor_why(name, v, s);
            break;
        }
        case EMG_SHAPE: res = shape_why(P, slots); break;
        default: res = PyUnicode_FromFormat("guard %s on %s failed", g_names[in->op], name); break;
    }
    em_guard_release_slots(P, slots);
    PyMem_Free(slots);
    if (!res) {
        PyErr_Clear();
        res = PyUnicode_FromFormat("guard %s on %s failed", g_names[in->op], name);
    }
    return res;
}

/* Appends fmt with the slot's name and repr(obj) ("?" if repr fails). 0 or -1. */
static int dump_repr(EmStrBuf *o, const char *fmt, const char *name, PyObject *obj) {
    PyObject *r = safe_repr(obj);
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    if (!u) PyErr_Clear();
    int rc = em_sb_printf(o, fmt, name, u ? u : "?");
    Py_XDECREF(r);
    return rc;
}

/* "x.size(1)" or "n": where a symbol's source reads it. */
static int src_text(const EmGuardProg *P, const EmSizeSrc *src, EmStrBuf *o) {
    const char *name = P->names.data[src->slot];
    return src->dim >= 0 ? em_sb_printf(o, "%s.size(%d)", name, src->dim) : em_sb_puts(o, name);
}

static int dump_shape(const EmGuardProg *P, EmStrBuf *o) {
    const EmSizes *S = &P->sizes;
    int rc = 0;
    for (int32_t i = 0; i < S->srcs.len && !rc; i++) {
        const EmSizeSrc *src = &S->srcs.data[i];
        rc = em_sb_printf(o, "  SYMBOL s%d = ", src->sym);
        if (!rc) rc = src_text(P, src, o);
        if (!rc) rc = em_sb_puts(o, "\n");
    }
    for (int32_t i = 0; i < S->rels.len && !rc; i++) {
        rc = em_sb_puts(o, "  SHAPE ");
        if (!rc) rc = em_size_rel_text(S, &S->rels.data[i], o);
        if (!rc) rc = em_sb_puts(o, "\n");
    }
    return rc;
}

/* Why the SHAPE check failed on this call. */
static EM_NEW PyObject *shape_why(const EmGuardProg *P, PyObject **slots) {
    const EmSizes *S = &P->sizes;
    int64_t vals[EM_SIZE_MAX];
    int32_t rel;
    int r = em_guard_shape_eval(P, slots, vals, &rel);
    if (r < 0) return NULL;
    EmStrBuf b = {0};
    int rc = 0;
    if (r == 1) rc = em_sb_puts(&b, "the sizes now pass (they changed meanwhile)");
    else if (rel < 0) rc = em_sb_puts(&b, "sizes the trace found equal now differ, or an int is no longer an int");
    else {
        rc = em_sb_puts(&b, "size relation ");
        if (!rc) rc = em_size_rel_text(S, &S->rels.data[rel], &b);
        if (!rc) rc = em_sb_puts(&b, " does not hold (");
        for (int32_t i = 0, first = 1; i < S->srcs.len && !rc; i++) {
            const EmSizeSrc *src = &S->srcs.data[i];
            int dup = 0;
            for (int32_t j = 0; j < i; j++) dup |= S->srcs.data[j].sym == src->sym;
            if (dup) continue;
            rc = em_sb_printf(&b, "%ss%d = ", first ? "" : ", ", src->sym);
            if (!rc) rc = src_text(P, src, &b);
            int64_t v = 0;
            for (int32_t e = 0; e < S->nodes.len; e++)
                if (S->nodes.data[e].op == EMS_SYM && S->nodes.data[e].a == src->sym) v = vals[e];
            if (!rc) rc = em_sb_printf(&b, " = %lld", (long long)v);
            first = 0;
        }
        if (!rc) rc = em_sb_puts(&b, ")");
    }
    PyObject *res = rc ? PyErr_NoMemory() : PyUnicode_FromString(b.s ? b.s : "");
    em_sb_free(&b);
    return res;
}

int em_guard_dump(const EmGuardProg *P, EmStrBuf *o) {
    int rc = 0;
    for (int32_t i = 0; i < P->ins.len && !rc; i++) {
        const EmGInstr *in = &P->ins.data[i];
        if (g_is_load[in->op]) continue;
        const char *name = in->slot >= 0 ? P->names.data[in->slot] : "";
        switch ((EmGuardOp)in->op) {
            case EMG_TYPE:
                rc = em_sb_printf(o, "  TYPE_MATCH %s %s\n", name, ((PyTypeObject *)in->obj)->tp_name);
                break;
            case EMG_ID: rc = dump_repr(o, "  ID_MATCH %s %s\n", name, in->obj); break;
            case EMG_EQ: rc = dump_repr(o, "  EQUALS %s == %s\n", name, in->obj); break;
            case EMG_CELL_EMPTY: rc = em_sb_printf(o, "  CELL_EMPTY %s\n", name); break;
            case EMG_COMPARE:
                rc = em_sb_printf(o, "  COMPARE (%s %s %s) is %s\n", name, cmp_names[(in->a >> 1) & 7],
                                  P->names.data[in->a >> 4], in->a & 1 ? "True" : "False");
                break;
            case EMG_FUNC:
                rc = dump_repr(o, "  FUNCTION_MATCH %s (code, defaults, kwdefaults) %s\n", name, in->obj);
                break;
            case EMG_LEN: rc = em_sb_printf(o, "  LENGTH %s == %zd\n", name, in->a); break;
            case EMG_KEYS: rc = dump_repr(o, "  DICT_KEYS %s == %s\n", name, in->obj); break;
            case EMG_SAME: rc = em_sb_printf(o, "  SAME_OBJECT %s is %s\n", name, P->names.data[in->a]); break;
            case EMG_DISTINCT:
                rc = em_sb_printf(o, "  DISTINCT_OBJECT %s is not %s\n", name, P->names.data[in->a]);
                break;
            case EMG_ABSENT: {
                const char *u = PyUnicode_Check(in->obj) ? PyUnicode_AsUTF8(in->obj) : "?";
                if (!u) PyErr_Clear();
                rc = em_sb_printf(o, "  ABSENT %s%s %s\n", name, in->a ? "" : ".__dict__", u ? u : "?");
                break;
            }
            case EMG_NO_HOOKS: rc = dump_repr(o, "  NO_HOOKS %s %s\n", name, in->obj); break;
            case EMG_ABSENT_KEYED: rc = em_sb_printf(o, "  ABSENT %s %s\n", name, P->names.data[in->a]); break;
            case EMG_TYPE_VERSION:
                rc = em_sb_printf(o, "  TYPE_VERSION %s\n",
                                  snap_type(in->obj) ? snap_type(in->obj)->tp_name : "(dead)");
                break;
            case EMG_GLOBAL_STATE: {
                PyObject *r = PyObject_Repr(P->gs.default_dtype);
                const char *u = r ? PyUnicode_AsUTF8(r) : "?";
                rc = em_sb_printf(o, "  GLOBAL_STATE grad=%d autocast_cpu=%d autocast_cuda=%d default_dtype=%s\n",
                                  P->gs.grad, P->gs.autocast_cpu, P->gs.autocast_cuda, u ? u : "?");
                Py_XDECREF(r);
                break;
            }
            case EMG_TENSOR: {
                const EmTensorSpec *s = &P->specs.data[in->a];
                rc = em_sb_printf(o, "  TENSOR_MATCH %s %s dtype=%d device=%d:%d requires_grad=%d size=(", name,
                                  s->type->tp_name, s->dtype, s->dev_type, s->dev_index, s->requires_grad);
                for (int d = 0; d < s->ndim && !rc; d++)
                    rc = (s->dyn >> d) & 1 ? em_sb_puts(o, d ? ", None" : "None")
                                           : em_sb_printf(o, d ? ", %lld" : "%lld", (long long)s->sizes[d]);
                if (!rc && s->order) {
                    rc = em_sb_puts(o, ") stride=dense(");
                    for (int d = 0; d < s->ndim && !rc; d++) rc = em_sb_printf(o, d ? ", %d" : "%d", s->order[d]);
                } else if (!rc) {
                    rc = em_sb_puts(o, ") stride=(");
                    for (int d = 0; d < s->ndim && !rc; d++)
                        rc = em_sb_printf(o, d ? ", %lld" : "%lld", (long long)s->strides[d]);
                }
                if (!rc) rc = em_sb_puts(o, ")\n");
                break;
            }
            case EMG_SHAPE: rc = dump_shape(P, o); break;
            default: break;
        }
    }
    if (rc) PyErr_NoMemory();
    return rc;
}
