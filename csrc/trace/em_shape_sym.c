/* em_shape_sym.c: which input sizes are symbolic (ember.compile's `dynamic`, mark_dynamic,
 * automatic dynamic), and the symbolic sizes of op results, by rule (em_sym_rules.def, and
 * the rows of em_shape_rules.def whose result sizes follow from their operands).
 *
 * Every rule's answer is checked against the sizes the op really gave (its traced value):
 * a rule that disagrees leaves the node unknown, and a read of an unknown node's sizes pins
 * what it came from (em_sym_int.c). So a rule can make a trace less dynamic, never wrong.
 */
#include "em_sym_ops.h"

#include "../pyver/em_state.h"

/* ---- which inputs are symbolic ---- */

/* The dimensions listed in attribute `name` of tensor v (a set of ints, as torch's
 * mark_dynamic leaves them), as a mask; 0 when absent. */
static uint64_t marked(PyObject *v, PyObject *dict, const char *name) {
    PyObject *s = PyDict_GetItemString(dict, name); /* borrowed; no error: a str key */
    uint64_t m = 0;
    if (!s || !PyAnySet_Check(s)) return 0;
    Py_ssize_t pos = 0;
    PyObject *k;
    Py_hash_t h;
    while (_PySet_NextEntry(s, &pos, &k, &h))
        if (PyLong_CheckExact(k)) {
            long d = PyLong_AsLong(k);
            if (d >= 0 && d < 64) m |= (uint64_t)1 << d;
        }
    (void)v;
    return m;
}

/* The set of sizes that dimensions automatic dynamic made symbolic had before they changed,
 * kept in dyn_state under the key 0 (source names are str): borrowed, NULL on error. */
static PyObject *retired_sizes(EmTracer *T) {
    PyObject *key = PyLong_FromLong(0);
    PyObject *s = key ? PyDict_GetItemWithError(T->dyn_state, key) : NULL;
    if (!s && key && !PyErr_Occurred() && (s = PySet_New(NULL)) != NULL) {
        int rc = PyDict_SetItem(T->dyn_state, key, s);
        Py_DECREF(s); /* the dict holds it */
        if (rc) s = NULL;
    }
    Py_XDECREF(key);
    return s;
}

static void log_dynamic(PyObject *key, PyObject *now, PyObject *prev) {
    if (!(em_state.logs & EM_LOG_RECOMPILES) || !em_state.log) return;
    PyObject *msg = prev ? PyUnicode_FromFormat(
                               "%U: sizes %R differ from the last compile's %R: the changed "
                               "dimensions are symbolic from now on (automatic dynamic)",
                               key, now, prev)
                         : PyUnicode_FromFormat(
                               "%U: sizes %R, first seen in a recompile: a dimension as long as "
                               "one that changed before is symbolic (automatic dynamic)",
                               key, now);
    PyObject *r = msg ? PyObject_CallFunction(em_state.log, "sO", "recompiles", msg) : NULL;
    Py_XDECREF(msg);
    if (!r) PyErr_Clear(); /* a log that cannot be written does not stop the trace */
    Py_XDECREF(r);
}

/* AUTO: the dimensions whose size differs from what the last compile of this code saw at the
 * same source (or was already dynamic there); records these sizes. A source the last compiles
 * did not see (a KV cache made by the first call) has no history: its dimensions whose size
 * some symbolic dimension had before it changed (the prompt's length) are symbolic, since the
 * quantity they measure has been seen to change. */
static uint64_t changed_dims(EmTracer *T, int32_t slot, const int64_t *sizes, int ndim, EmStatus *st) {
    PyObject *key = PyUnicode_FromString(T->P->names.data[slot]);
    PyObject *retired = key ? retired_sizes(T) : NULL;
    if (!retired) return Py_XDECREF(key), *st = EM_ERR, (uint64_t)-1;
    PyObject *prev = PyDict_GetItemWithError(T->dyn_state, key);
    uint64_t m = 0, newly = 0;
    int same_rank = prev && PyTuple_Check(prev) && PyTuple_GET_SIZE(prev) == ndim;
    PyObject *now = PyErr_Occurred() ? NULL : PyTuple_New(ndim);
    for (int i = 0; now && i < ndim; i++) {
        PyObject *p = same_rank ? PyTuple_GET_ITEM(prev, i) : NULL, *x = NULL;
        int changed = p && (p == Py_None || PyLong_AsLongLong(p) != sizes[i]);
        if (changed && p != Py_None && PySet_Add(retired, p)) Py_CLEAR(now);
        if (!prev && now && PySet_GET_SIZE(retired) && sizes[i] >= 2) { /* no history */
            PyObject *v = PyLong_FromLongLong(sizes[i]);
            changed = v ? PySet_Contains(retired, v) : -1;
            Py_XDECREF(v);
            if (changed < 0) Py_CLEAR(now);
        }
        if (changed && i < 64) m |= (uint64_t)1 << i;
        if (changed && p != Py_None && i < 64) newly |= (uint64_t)1 << i;
        if (now && !(x = changed ? Py_NewRef(Py_None) : PyLong_FromLongLong(sizes[i]))) Py_CLEAR(now);
        if (now) PyTuple_SET_ITEM(now, i, x);
    }
    if (newly && now) log_dynamic(key, now, prev);
    int rc = now ? PyDict_SetItem(T->dyn_state, key, now) : -1;
    Py_XDECREF(now);
    Py_DECREF(key);
    if (rc) return *st = EM_ERR, (uint64_t)-1;
    return m;
}

uint64_t em_dyn_dims(EmTracer *T, PyObject *v, int32_t slot, EmRef ref, EmStatus *st) {
    const EmNode *n = &T->G->nodes.data[ref];
    const int64_t *sizes = em_ir_sizes(T->G, n);
    uint64_t dyn = 0, stat = 0;
    PyObject **dp = _PyObject_GetDictPtr(v);
    if (dp && *dp && PyDict_GET_SIZE(*dp)) { /* torch._dynamo.mark_dynamic / mark_static marks */
        dyn = marked(v, *dp, "_dynamo_dynamic_indices") | marked(v, *dp, "_dynamo_weak_dynamic_indices");
        stat = marked(v, *dp, "_dynamo_static_indices");
    }
    if (Py_TYPE(v) != em_state.param_type) { /* parameters, and buffers for dynamic=True, stay static */
        if (T->dyn_mode == EM_DYN_ALL && !em_guard_is_buffer(T->P, slot)) dyn |= ~(uint64_t)0;
        else if (T->dyn_mode == EM_DYN_AUTO && T->dyn_state) {
            uint64_t c = changed_dims(T, slot, sizes, n->ndim, st);
            if (c == (uint64_t)-1 && *st == EM_ERR) return c;
            dyn |= c;
        }
    }
    uint64_t m = 0;
    /* a dimension traced at size 0 or 1 stays specialized; a symbol (traced at >= 2) takes every size
     * >= 1 that its relations allow (a rule that treats size 1 apart records a relation saying so) */
    for (int i = 0; i < n->ndim && i < 64; i++)
        if ((dyn >> i) & 1 && !((stat >> i) & 1) && sizes[i] >= 2) m |= (uint64_t)1 << i;
    return m;
}

/* Bound `attr` of a _DimRange item as an int64 in *out: 1 when set, 0 for None, -1 on error. */
static int range_bound(PyObject *item, const char *attr, int64_t *out) {
    PyObject *b = PyObject_GetAttrString(item, attr);
    if (!b) return -1;
    int rc = 0;
    if (b != Py_None) {
        int overflow = 0;
        long long x = PyLong_Check(b) ? PyLong_AsLongLongAndOverflow(b, &overflow) : -1;
        if (!PyLong_Check(b) || (x == -1 && PyErr_Occurred())) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "ember: mark_dynamic's %s must be an int, got %s", attr,
                             Py_TYPE(b)->tp_name);
            rc = -1;
        } else {
            *out = overflow ? (overflow > 0 ? INT64_MAX : INT64_MIN) : x;
            rc = 1;
        }
    }
    Py_DECREF(b);
    return rc;
}

static EmStatus require_bound(EmTracer *T, int32_t e, EmSizeCmp cmp, int64_t bound, int d) {
    int32_t c = em_size_const(&T->sizes, bound);
    if (c < 0) return PyErr_NoMemory(), EM_ERR;
    if (!em_size_cmp_hint(&T->sizes, cmp, e, c)) {
        PyErr_Format(em_state.constraint_violation,
                     "ember: dimension %d of a mark_dynamic input has size %lld, outside its range (%s %lld)", d,
                     (long long)em_size_hint(&T->sizes, e), em_size_cmp_text[cmp], (long long)bound);
        return EM_ERR;
    }
    return em_size_require(&T->sizes, cmp, e, c) ? EM_ERR : EM_OK;
}

EmStatus em_dyn_ranges(EmTracer *T, PyObject *v, EmRef ref, uint64_t dyn) {
    PyObject **dp = _PyObject_GetDictPtr(v);
    PyObject *s = dp && *dp ? PyDict_GetItemString(*dp, "_dynamo_dynamic_range") : NULL; /* borrowed */
    if (!s || !PyAnySet_Check(s)) return EM_OK;
    Py_ssize_t pos = 0;
    PyObject *item;
    Py_hash_t h;
    while (_PySet_NextEntry(s, &pos, &item, &h)) {
        PyObject *dim = PyObject_GetAttrString(item, "dim");
        long d = dim && PyLong_Check(dim) ? PyLong_AsLong(dim) : -1;
        Py_XDECREF(dim);
        if (!dim) return EM_ERR;
        if (d == -1 && PyErr_Occurred()) PyErr_Clear(); /* a dimension beyond a long: none of ours */
        if (d < 0 || d >= 64 || !((dyn >> d) & 1)) continue; /* a static dimension keeps its guarded size */
        int64_t lo = 0, hi = 0;
        int has_lo = range_bound(item, "min", &lo), has_hi = has_lo < 0 ? -1 : range_bound(item, "max", &hi);
        if (has_lo < 0 || has_hi < 0) return EM_ERR;
        EmStatus st = EM_OK;
        int32_t e = em_node_dim(T, ref, (int)d, &st);
        if (e < 0) return st;
        if (has_lo && lo > 1 && (st = require_bound(T, e, EMSR_GE, lo, (int)d)) != EM_OK) return st;
        if (has_hi && (st = require_bound(T, e, EMSR_LE, hi, (int)d)) != EM_OK) return st;
    }
    return EM_OK;
}

/* Whether the guard loads slot from the frame: an argument, or a free variable's contents. */
/* Automatic dynamic of a scalar argument v in slot: 1 when it changed since the code's last
 * compile (its value kept in dyn_state by source name; None once it changed), else 0; -1 on
 * error. */
static int scalar_changed(EmTracer *T, PyObject *v, int32_t slot) {
    if (!T->dyn_state) return 0;
    PyObject *key = PyUnicode_FromString(T->P->names.data[slot]);
    if (!key) return -1;
    PyObject *prev = PyDict_GetItemWithError(T->dyn_state, key);
    int changed = 0;
    if (prev) /* nan != nan: a nan changed, as its guard failed */
        changed = prev == Py_None || Py_TYPE(prev) != Py_TYPE(v) ? 1 : PyObject_RichCompareBool(prev, v, Py_NE);
    int rc = changed < 0 || PyErr_Occurred() ? -1 : PyDict_SetItem(T->dyn_state, key, changed ? Py_None : v);
    Py_DECREF(key);
    return rc < 0 ? -1 : changed;
}

/* Where slot is read from, for automatic dynamic: 3 a local or closure variable of the frame,
 * 2 an item of a list, tuple or dict held by one (or one of its iterators gives), 1 something reached from one or from a global
 * through attributes (an nn.Module's step counter) or computed from one by the guard (int(f) of
 * a float input) too, 0 anything else. At most 6 deep. */
static int dyn_source_slot(const EmGuardProg *P, int32_t slot) {
    int kind = 3;
    for (int depth = 0; depth <= 6 && slot >= 0; depth++) {
        const EmGInstr *in = em_guard_load_of(P, slot);
        if (!in) return 0;
        if (in->op == EMG_LOAD_LOCAL || in->op == EMG_LOAD_CLOSURE) return kind;
        if (in->op == EMG_LOAD_GLOBAL) return 1;
        if (in->op == EMG_LOAD_ODICT || in->op == EMG_LOAD_ATTR || in->op == EMG_LOAD_OP) kind = 1; /* OP: int(f) */
        else if (in->op == EMG_LOAD_LIST_ITEM || in->op == EMG_LOAD_TUPLE_ITEM || in->op == EMG_LOAD_DICT ||
                 in->op == EMG_LOAD_CALL) /* CALL: _rules.iter_peek */
            kind = kind < 2 ? kind : 2;
        else if (in->op != EMG_LOAD_VIEW_DICT) return 0; /* the dict behind a view (d.items() passed on) */
        slot = in->base;
    }
    return 0;
}

int em_dyn_int(EmTracer *T, PyObject *v, int32_t slot) {
    int src = T->dyn_mode == EM_DYN_STATIC || !PyLong_CheckExact(v) ? 0 : dyn_source_slot(T->P, slot);
    if (!src) return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear(); /* beyond int64: a constant */
        return 0;
    }
    int sized = x >= 2 || x <= -2; /* 0, 1 and -1 stay constants, as sizes 0 and 1 do */
    if (T->dyn_mode == EM_DYN_ALL && src == 3) return sized; /* dynamic=True: arguments; others once they change */
    int changed = scalar_changed(T, v, slot);
    return changed < 0 ? -1 : changed && sized;
}

int em_dyn_float(EmTracer *T, PyObject *v, int32_t slot) {
    /* a float in a container of the frame too: a list of .item() values crossing a break */
    int src = T->dyn_mode == EM_DYN_STATIC || !PyFloat_CheckExact(v) ? 0 : dyn_source_slot(T->P, slot);
    if (!src) return 0;
    return T->dyn_mode == EM_DYN_ALL && src >= 2 ? 1 : scalar_changed(T, v, slot); /* and their items */
}

/* ---- result sizes ---- */

typedef struct {
    int32_t e[64];
    int n;
} Dims;

/* The dims of tensor sym t. 0, or -1 with *st set. */
static int dims_of(EmTracer *T, EmSym *t, Dims *d, EmStatus *st) {
    const EmNode *n = &T->G->nodes.data[t->ref];
    d->n = n->ndim;
    for (int i = 0; i < n->ndim; i++)
        if ((d->e[i] = em_node_dim(T, t->ref, i, st)) < 0) return -1;
    return 0;
}

static int is_tensor(const EmSym *s) { return s->kind == SYM_TENSOR; }

/* An int argument: its expression, -1 when it is not an int. */
static int32_t int_of(EmTracer *T, EmSym *s) {
    int32_t e = em_int_expr(T, s);
    if (e == -2) PyErr_Clear(); /* no memory for a constant: no rule (the node stays unknown) */
    return e < 0 ? -1 : e;
}

static int const_int(const EmSym *s, long *v) {
    if (s->kind != SYM_CONST || !PyLong_Check(s->obj) || PyBool_Check(s->obj)) return 0;
    *v = PyLong_AsLong(s->obj);
    return !(*v == -1 && PyErr_Occurred()) || (PyErr_Clear(), 0); /* beyond a long (OverflowError): no rule */
}

static int wrap(long d, int n, int *out) {
    if (d < -n || d >= n || n == 0) return 0;
    *out = (int)(d < 0 ? d + n : d);
    return 1;
}

/* The dimensions named by dim (an int, a tuple or list of ints, None or absent: all) of an
 * ndim-d tensor, as a mask in *out; 0 when dim is none of these. */
static int dim_mask(EmSym *dim, int ndim, uint64_t *out) {
    *out = 0;
    if (!dim || (dim->kind == SYM_CONST && dim->obj == Py_None)) return *out = ~(uint64_t)0, 1;
    EmSym **items = &dim;
    int n = 1;
    if (dim->kind == SYM_TUPLE || dim->kind == SYM_LIST) {
        items = dim->items.data;
        n = dim->items.len;
    } else if (dim->kind == SYM_CONST && PyTuple_CheckExact(dim->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dim->obj); i++) {
            PyObject *k = PyTuple_GET_ITEM(dim->obj, i);
            long d = PyLong_CheckExact(k) ? PyLong_AsLong(k) : LONG_MIN;
            int w;
            if (d == -1 && PyErr_Occurred()) PyErr_Clear(); /* beyond a long: no rule */
            if (!PyLong_CheckExact(k) || !wrap(d, ndim ? ndim : 1, &w)) return 0;
            *out |= (uint64_t)1 << w;
        }
        return 1;
    }
    for (int i = 0; i < n; i++) {
        long d;
        int w;
        if (!const_int(items[i], &d) || !wrap(d, ndim ? ndim : 1, &w)) return 0;
        *out |= (uint64_t)1 << w;
    }
    return 1;
}

/* s as a sequence of ints (a tuple or list, of constants or symbolic ints): their expressions. */
static int int_seq(EmTracer *T, EmSym *s, Dims *out) {
    if (s->kind == SYM_CONST && (PyTuple_CheckExact(s->obj) || PyList_CheckExact(s->obj))) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(s->obj);
        if (n > 64) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = PySequence_Fast_GET_ITEM(s->obj, i);
            long x = PyLong_CheckExact(v) ? PyLong_AsLong(v) : -1;
            if (!PyLong_CheckExact(v) || (x == -1 && PyErr_Occurred())) return PyErr_Clear(), 0;
            if ((out->e[i] = em_size_const(&T->sizes, x)) < 0) return PyErr_Clear(), 0;
        }
        out->n = (int)n;
        return 1;
    }
    if ((s->kind != SYM_TUPLE && s->kind != SYM_LIST) || s->items.len > 64) return 0;
    for (int32_t i = 0; i < s->items.len; i++)
        if ((out->e[i] = int_of(T, s->items.data[i])) < 0) return 0;
    out->n = s->items.len;
    return 1;
}

/* Sizes given as varargs from `from`, or as one tuple/list/Size: their expressions. */
static int size_list(EmTracer *T, EmSym **args, int from, int npos, Dims *out) {
    EmSym **items = args + from;
    int n = npos - from;
    if (n == 1 && args[from]->kind == SYM_CONST && !PyLong_Check(args[from]->obj)) return int_seq(T, args[from], out);
    if (n == 1 && (args[from]->kind == SYM_TUPLE || args[from]->kind == SYM_LIST)) {
        items = args[from]->items.data;
        n = args[from]->items.len;
    }
    if (n > 64) return 0;
    for (int i = 0; i < n; i++)
        if ((out->e[i] = int_of(T, items[i])) < 0) return 0;
    out->n = n;
    return 1;
}

/* The broadcast of nt size lists d into r: a size 1 (pinned when symbolic) gives way, other
 * sizes at one position are required equal. 1, or -1 with *st set. */
static int broadcast_dims(EmTracer *T, const Dims *d, int nt, Dims *r, EmStatus *st) {
    EmSizes *S = &T->sizes;
    r->n = 0;
    for (int t = 0; t < nt; t++)
        if (d[t].n > r->n) r->n = d[t].n;
    for (int k = 0; k < r->n; k++) {
        int32_t res = -1;
        for (int t = 0; t < nt; t++) {
            int at = d[t].n - r->n + k;
            if (at < 0) continue;
            int32_t e = d[t].e[at];
            if (em_size_hint(S, e) == 1) {
                if ((*st = em_int_specialize(T, e)) != EM_OK) return -1;
                continue;
            }
            if (res < 0) res = e;
            else if (res != e && em_size_require(S, EMSR_EQ, res, e)) return *st = EM_ERR, PyErr_NoMemory(), -1;
        }
        if (res < 0 && (res = em_size_const(S, 1)) < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
        r->e[k] = res;
    }
    return 1;
}

/* Elementwise broadcasting of the tensor operands' sizes. */
static int rule_broadcast(EmTracer *T, EmSym **args, int nargs, Dims *r, EmStatus *st) {
    Dims d[8];
    int nt = 0;
    for (int i = 0; i < nargs; i++) {
        if (!is_tensor(args[i])) continue;
        if (nt == 8) return 0; /* more operands than a rule reads: no rule */
        if (dims_of(T, args[i], &d[nt++], st)) return -1;
    }
    return broadcast_dims(T, d, nt, r, st);
}

static int rule_linear(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims w;
    if (npos < 2 || !is_tensor(args[0]) || !is_tensor(args[1])) return 0;
    if (dims_of(T, args[0], r, st) || dims_of(T, args[1], &w, st)) return -1;
    if (r->n < 1 || w.n != 2) return 0;
    /* the contracted dims agree (the op checked them) */
    if (em_size_require(&T->sizes, EMSR_EQ, r->e[r->n - 1], w.e[1])) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->e[r->n - 1] = w.e[0];
    return 1;
}

static int rule_matmul(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims a, b;
    if (npos != 2 || !is_tensor(args[0]) || !is_tensor(args[1])) return 0;
    if (dims_of(T, args[0], &a, st) || dims_of(T, args[1], &b, st)) return -1;
    if (a.n < 2 || b.n < 2) return 0;
    /* batch dims broadcast; the contracted dims agree (the op checked them) */
    Dims ba = a, bb = b;
    ba.n = a.n - 2;
    bb.n = b.n - 2;
    EmSizes *S = &T->sizes;
    if (em_size_require(S, EMSR_EQ, a.e[a.n - 1], b.e[b.n - 2])) return *st = EM_ERR, PyErr_NoMemory(), -1;
    int n = ba.n > bb.n ? ba.n : bb.n;
    for (int k = 0; k < n; k++) {
        int ia = ba.n - n + k, ib = bb.n - n + k;
        int32_t x = ia >= 0 ? ba.e[ia] : -1, y = ib >= 0 ? bb.e[ib] : -1, res;
        if (x >= 0 && em_size_hint(S, x) == 1 && (*st = em_int_specialize(T, x)) != EM_OK) return -1;
        if (y >= 0 && em_size_hint(S, y) == 1 && (*st = em_int_specialize(T, y)) != EM_OK) return -1;
        if (x < 0 || em_size_hint(S, x) == 1) res = y >= 0 ? y : x;
        else if (y < 0 || em_size_hint(S, y) == 1) res = x;
        else {
            res = x;
            if (x != y && em_size_require(S, EMSR_EQ, x, y)) return *st = EM_ERR, PyErr_NoMemory(), -1;
        }
        r->e[k] = res;
    }
    r->e[n] = a.e[a.n - 2];
    r->e[n + 1] = b.e[b.n - 1];
    r->n = n + 2;
    return 1;
}

/* The argument named kw, else positional argument i, else NULL. */
static EmSym *arg_at(EmSym **args, int npos, PyObject *kwnames, int i, const char *kw) {
    for (Py_ssize_t k = 0; kwnames && k < PyTuple_GET_SIZE(kwnames); k++)
        if (!PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), kw)) return args[npos + k];
    return i < npos ? args[i] : NULL;
}

/* x's sizes reduced over dim (an int, a tuple or list of ints, None or absent: all), kept as 1
 * with keep True: 1, 0 when dim or keep is not a constant of those, -1 with *st set. */
static int reduced_dims(EmTracer *T, EmSym *x, EmSym *dim, EmSym *keep, Dims *r, EmStatus *st) {
    Dims d;
    if (!is_tensor(x) || dims_of(T, x, &d, st)) return PyErr_Occurred() ? -1 : 0;
    int keepdim = 0;
    if (keep) {
        if (keep->kind != SYM_CONST || !PyBool_Check(keep->obj)) return 0;
        keepdim = keep->obj == Py_True;
    }
    uint64_t red;
    if (!dim_mask(dim, d.n, &red)) return 0;
    if (!red) red = ~(uint64_t)0; /* dim=() reduces every dimension */
    int32_t one = em_size_const(&T->sizes, 1);
    if (one < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->n = 0;
    for (int i = 0; i < d.n; i++)
        if (!((red >> i) & 1)) r->e[r->n++] = d.e[i];
        else if (keepdim) r->e[r->n++] = one;
    return 1;
}

static int rule_reduce(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    return reduced_dims(T, args[0], arg_at(args, npos, kwnames, 1, "dim"), arg_at(args, npos, kwnames, 2, "keepdim"), r,
                        st);
}

/* gather(x, dim, index): index's sizes. */
static int rule_gather(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *index = arg_at(args, npos, kwnames, 2, "index");
    if (!index || !is_tensor(index)) return 0;
    return dims_of(T, index, r, st) ? -1 : 1;
}

/* index_select(x, dim, index): x's sizes, dimension dim the index's length. */
static int rule_index_select(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *dim = arg_at(args, npos, kwnames, 1, "dim"), *index = arg_at(args, npos, kwnames, 2, "index");
    long d;
    int w;
    if (!is_tensor(args[0]) || !dim || !index || !is_tensor(index) || !const_int(dim, &d)) return 0;
    Dims ix;
    if (dims_of(T, args[0], r, st) || dims_of(T, index, &ix, st)) return -1;
    if (ix.n > 1 || !wrap(d, r->n ? r->n : 1, &w) || r->n == 0) return 0;
    r->e[w] = ix.n ? ix.e[0] : em_size_const(&T->sizes, 1);
    return r->e[w] < 0 ? (*st = EM_ERR, PyErr_NoMemory(), -1) : 1;
}

/* max/min(a, b) of two tensors: broadcast; else (x[, dim, keepdim]) as a reduction. */
static int rule_minmax(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *other = arg_at(args, npos, kwnames, 1, "other");
    if (other && is_tensor(other)) {
        EmSym *two[2] = {args[0], other};
        return rule_broadcast(T, two, 2, r, st);
    }
    return rule_reduce(T, args, npos, kwnames, r, st);
}

/* A reduction whose dim is positional argument dim_at (or dim=), keepdim positional keep_at
 * (or keepdim=; keep_at 0: none): rule_reduce's result. */
static int rule_reduce_at(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, int dim_at, int keep_at, Dims *r,
                          EmStatus *st) {
    EmSym *dim = arg_at(args, npos, kwnames, dim_at, "dim"),
          *keep = keep_at ? arg_at(args, npos, kwnames, keep_at, "keepdim") : NULL;
    if (npos > (keep_at > dim_at ? keep_at : dim_at) + 1) return 0; /* more than the rule reads */
    if (dim && dim->kind == SYM_CONST && PyBool_Check(dim->obj)) return 0; /* var(x, False): unbiased */
    return reduced_dims(T, args[0], dim, keep, r, st);
}

/* outer(a, b) of 1-d tensors: (len(a), len(b)). */
static int rule_outer(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims a, b;
    if (npos != 2 || !is_tensor(args[0]) || !is_tensor(args[1])) return 0;
    if (dims_of(T, args[0], &a, st) || dims_of(T, args[1], &b, st)) return -1;
    if (a.n != 1 || b.n != 1) return 0;
    *r = (Dims){.e = {a.e[0], b.e[0]}, .n = 2};
    return 1;
}

/* linspace/logspace(start, end, steps, ...): (steps,). */
static int rule_linspace(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r) {
    EmSym *steps = arg_at(args, npos, kwnames, 2, "steps");
    int32_t e = steps ? int_of(T, steps) : -1;
    if (e < 0) return 0;
    *r = (Dims){.e = {e}, .n = 1};
    return 1;
}

/* one_hot(x, num_classes): x's sizes, then num_classes (a constant >= 0; -1 reads the data). */
static int rule_one_hot(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *k = arg_at(args, npos, kwnames, 1, "num_classes");
    long c;
    if (!k || !const_int(k, &c) || c < 0 || !is_tensor(args[0])) return 0;
    if (dims_of(T, args[0], r, st)) return -1;
    if (r->n >= 64) return 0;
    if ((r->e[r->n++] = em_size_const(&T->sizes, c)) < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    return 1;
}

/* unflatten(x, dim, sizes): dimension dim replaced by sizes (none of them -1). */
static int rule_unflatten(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *dim = arg_at(args, npos, kwnames, 1, "dim"), *sizes = arg_at(args, npos, kwnames, 2, "sizes");
    long d;
    int w;
    Dims x, s;
    if (!is_tensor(args[0]) || !dim || !sizes || !const_int(dim, &d) || !int_seq(T, sizes, &s)) return 0;
    for (int i = 0; i < s.n; i++)
        if (em_size_is_const(&T->sizes, s.e[i]) && em_size_hint(&T->sizes, s.e[i]) < 0) return 0;
    if (dims_of(T, args[0], &x, st)) return -1;
    if (!wrap(d, x.n, &w) || x.n - 1 + s.n > 64) return 0;
    r->n = 0;
    for (int i = 0; i < x.n; i++)
        if (i != w) r->e[r->n++] = x.e[i];
        else
            for (int k = 0; k < s.n; k++) r->e[r->n++] = s.e[k];
    return 1;
}

/* movedim(x, source, destination) of single ints: x's sizes with that dimension moved. */
static int rule_movedim(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *src = arg_at(args, npos, kwnames, 1, "source"), *dst = arg_at(args, npos, kwnames, 2, "destination");
    long a, b;
    int from, to;
    Dims x;
    if (!is_tensor(args[0]) || !src || !dst || !const_int(src, &a) || !const_int(dst, &b)) return 0;
    if (dims_of(T, args[0], &x, st)) return -1;
    if (!wrap(a, x.n, &from) || !wrap(b, x.n, &to)) return 0;
    int32_t moved = x.e[from];
    r->n = 0;
    for (int i = 0; i < x.n; i++)
        if (i != from) r->e[r->n++] = x.e[i];
    memmove(&r->e[to + 1], &r->e[to], sizeof(int32_t) * (size_t)(r->n - to));
    r->e[to] = moved;
    r->n++;
    return 1;
}

/* expand_as/view_as/reshape_as(x, other): other's sizes. */
static int rule_as(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *other = arg_at(args, npos, kwnames, 1, "other");
    if (!other || !is_tensor(other)) return 0;
    return dims_of(T, other, r, st) ? -1 : 1;
}

/* x.repeat(*sizes): x's sizes, 1 before them up to len(sizes), times sizes. */
static int rule_repeat(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims x;
    if (npos < 2 || !is_tensor(args[0]) || !size_list(T, args, 1, npos, r)) return 0;
    if (dims_of(T, args[0], &x, st)) return -1;
    if (r->n < x.n) return 0; /* eager's error, from the meta run */
    for (int i = 0; i < x.n; i++) {
        int at = r->n - x.n + i;
        if ((r->e[at] = em_size_op(&T->sizes, EMS_MUL, r->e[at], x.e[i])) < 0)
            return *st = EM_ERR, PyErr_NoMemory(), -1;
    }
    return 1;
}

/* stack(tensors, dim=0): the tensors' sizes (required equal) with len(tensors) inserted at dim. */
static int rule_stack(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *seq = args[0], *dim = arg_at(args, npos, kwnames, 1, "dim");
    long d = 0;
    if ((seq->kind != SYM_TUPLE && seq->kind != SYM_LIST) || !seq->items.len || (dim && !const_int(dim, &d))) return 0;
    Dims x;
    for (int32_t i = 0; i < seq->items.len; i++) {
        EmSym *t = seq->items.data[i];
        if (!is_tensor(t)) return 0;
        if (dims_of(T, t, i ? &x : r, st)) return -1;
        if (i && x.n != r->n) return 0;
        for (int k = 0; i && k < x.n; k++)
            if (r->e[k] != x.e[k] && em_size_require(&T->sizes, EMSR_EQ, r->e[k], x.e[k]))
                return *st = EM_ERR, PyErr_NoMemory(), -1;
    }
    int w;
    if (r->n >= 64 || !wrap(d, r->n + 1, &w)) return 0;
    memmove(&r->e[w + 1], &r->e[w], sizeof(int32_t) * (size_t)(r->n - w));
    if ((r->e[w] = em_size_const(&T->sizes, seq->items.len)) < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->n++;
    return 1;
}

/* pad(x, pad[, mode, value]): dimension -1-i grown by pad[2i] + pad[2i+1]. */
static int rule_pad(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *pad = arg_at(args, npos, kwnames, 1, "pad");
    Dims p;
    if (!is_tensor(args[0]) || !pad || !int_seq(T, pad, &p) || p.n % 2) return 0;
    if (dims_of(T, args[0], r, st)) return -1;
    if (p.n / 2 > r->n) return 0;
    for (int32_t i = 0; i < p.n / 2; i++) {
        int32_t grow = em_size_op(&T->sizes, EMS_ADD, p.e[2 * i], p.e[2 * i + 1]), *e = &r->e[r->n - 1 - i];
        if (grow < 0 || (*e = em_size_op(&T->sizes, EMS_ADD, *e, grow)) < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    }
    return 1;
}

/* view/reshape(x, *shape): a -1 is the rest of numel. */
static int rule_view(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims x;
    if (npos < 2 || !is_tensor(args[0]) || dims_of(T, args[0], &x, st) || !size_list(T, args, 1, npos, r))
        return PyErr_Occurred() ? -1 : 0;
    EmSizes *S = &T->sizes;
    int infer = -1;
    int32_t numel = em_size_const(S, 1), rest = em_size_const(S, 1);
    for (int i = 0; i < x.n && numel >= 0; i++) numel = em_size_op(S, EMS_MUL, numel, x.e[i]);
    for (int i = 0; i < r->n && rest >= 0; i++)
        if (em_size_is_const(S, r->e[i]) && em_size_hint(S, r->e[i]) == -1) {
            if (infer >= 0) return 0;
            infer = i;
        } else {
            rest = em_size_op(S, EMS_MUL, rest, r->e[i]);
        }
    if (numel < 0 || rest < 0) return PyErr_Occurred() ? (*st = EM_ERR, -1) : 0;
    if (infer >= 0) {
        if (em_size_hint(S, rest) == 0) return 0;
        int32_t q = em_size_op(S, EMS_FLOORDIV, numel, rest);
        if (q < 0) return PyErr_Occurred() ? (*st = EM_ERR, -1) : 0;
        r->e[infer] = q;
    } else if (em_size_require(S, EMSR_EQ, numel, rest)) {
        return *st = EM_ERR, PyErr_NoMemory(), -1;
    }
    return 1;
}

static int rule_view_family(EmTracer *T, int rule, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims x;
    if (!is_tensor(args[0]) || dims_of(T, args[0], &x, st)) return PyErr_Occurred() ? -1 : 0;
    long a, b;
    int d0, d1;
    *r = x;
    switch (rule) {
        case SR_VIEW_TRANSPOSE:
            if (npos != 3 || !const_int(args[1], &a) || !const_int(args[2], &b) || !wrap(a, x.n, &d0) ||
                !wrap(b, x.n, &d1))
                return 0;
            r->e[d0] = x.e[d1];
            r->e[d1] = x.e[d0];
            return 1;
        case SR_VIEW_T:
            if (x.n == 2) {
                r->e[0] = x.e[1];
                r->e[1] = x.e[0];
            }
            return 1;
        case SR_VIEW_PERMUTE: {
            EmSym **items = args + 1;
            int n = npos - 1;
            if (n == 1 && (args[1]->kind == SYM_TUPLE || args[1]->kind == SYM_LIST)) {
                items = args[1]->items.data;
                n = args[1]->items.len;
            }
            if (n != x.n) return 0;
            for (int i = 0; i < n; i++) {
                if (!const_int(items[i], &a) || !wrap(a, x.n, &d0)) return 0;
                r->e[i] = x.e[d0];
            }
            return 1;
        }
        case SR_VIEW_UNSQUEEZE: {
            if (npos != 2 || !const_int(args[1], &a) || !wrap(a, x.n + 1, &d0) || x.n >= 64) return 0;
            int32_t one = em_size_const(&T->sizes, 1);
            if (one < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
            for (int i = x.n; i > d0; i--) r->e[i] = x.e[i - 1];
            r->e[d0] = one;
            r->n = x.n + 1;
            return 1;
        }
        case SR_VIEW_EXPAND: {
            if (!size_list(T, args, 1, npos, r) || r->n < x.n) return 0;
            for (int i = 0; i < r->n; i++) {
                int at = i - (r->n - x.n);
                if (em_size_is_const(&T->sizes, r->e[i]) && em_size_hint(&T->sizes, r->e[i]) == -1) {
                    if (at < 0) return 0;
                    r->e[i] = x.e[at];
                }
            }
            return 1;
        }
        default: return rule_view(T, args, npos, r, st);
    }
}

static int rule_factory(EmTracer *T, int rule, EmSym **args, int npos, Dims *r) {
    switch (rule) {
        case SYMR_FACTORY: return size_list(T, args, 0, npos, r);
        case SYMR_FULL: return npos == 2 && size_list(T, args, 0, 1, r);
        case SYMR_NEW_FACTORY: return size_list(T, args, 1, npos, r);
        case SYMR_NEW_FULL: return npos == 3 && size_list(T, args, 1, 2, r);
        default: return 0;
    }
}

/* arange(end), arange(start, end) and arange(start, end, step) of ints, a positive constant
 * step: (end - start + step - 1) // step, which arange requires >= 0 (it raises otherwise). */
static int rule_arange(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    long step = 1;
    if (npos < 1 || npos > 3 || (npos == 3 && (!const_int(args[2], &step) || step <= 0))) return 0;
    EmSizes *S = &T->sizes;
    int32_t lo = npos >= 2 ? int_of(T, args[0]) : em_size_const(S, 0), hi = int_of(T, args[npos >= 2]);
    if (lo < 0 || hi < 0) return 0;
    int32_t n = em_size_sub(S, hi, lo), k = em_size_const(S, step), k1 = em_size_const(S, step - 1),
            z = em_size_const(S, 0);
    if (n < 0 || z < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    if (em_size_hint(S, n) < 0) return 0;
    if (em_size_assume(S, EMSR_GE, n, z)) return *st = EM_ERR, PyErr_NoMemory(), -1; /* end >= start */
    if (step != 1) {
        int32_t up = k1 < 0 ? -1 : em_size_op(S, EMS_ADD, n, k1);
        n = up < 0 || k < 0 ? -1 : em_size_op(S, EMS_FLOORDIV, up, k);
    }
    if (n < 0 || em_size_require(S, EMSR_GE, n, z)) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->n = 1;
    r->e[0] = n;
    return 1;
}

static int rule_cat(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *seq = args[0], *dim = arg_at(args, npos, kwnames, 1, "dim");
    long d = 0;
    if ((seq->kind != SYM_TUPLE && seq->kind != SYM_LIST) || !seq->items.len || (dim && !const_int(dim, &d))) return 0;
    int w = -1;
    for (int32_t i = 0; i < seq->items.len; i++) {
        Dims x;
        EmSym *t = seq->items.data[i];
        if (!is_tensor(t)) return 0;
        if (dims_of(T, t, &x, st)) return -1;
        if (x.n == 1 && em_size_hint(&T->sizes, x.e[0]) == 0) { /* torch.cat skips 1-d empty tensors */
            if ((*st = em_int_specialize(T, x.e[0])) != EM_OK) return -1;
            continue;
        }
        if (w < 0) {
            if (!wrap(d, x.n, &w)) return 0;
            *r = x;
            continue;
        }
        if (x.n != r->n) return 0;
        for (int k = 0; k < x.n; k++)
            if (k == w) {
                if ((r->e[k] = em_size_op(&T->sizes, EMS_ADD, r->e[k], x.e[k])) < 0)
                    return *st = EM_ERR, PyErr_NoMemory(), -1;
            } else if (r->e[k] != x.e[k] && em_size_require(&T->sizes, EMSR_EQ, r->e[k], x.e[k])) {
                return *st = EM_ERR, PyErr_NoMemory(), -1;
            }
    }
    return w >= 0;
}

static int rule_embedding(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims w;
    if (npos < 2 || !is_tensor(args[0]) || !is_tensor(args[1])) return 0;
    if (dims_of(T, args[0], r, st) || dims_of(T, args[1], &w, st)) return -1;
    if (w.n != 2 || r->n >= 64) return 0;
    r->e[r->n++] = w.e[1];
    return 1;
}

static int rule_addmm(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims a, b;
    if (npos < 3 || !is_tensor(args[1]) || !is_tensor(args[2])) return 0;
    if (dims_of(T, args[1], &a, st) || dims_of(T, args[2], &b, st)) return -1;
    if (a.n != 2 || b.n != 2) return 0;
    if (em_size_require(&T->sizes, EMSR_EQ, a.e[1], b.e[0])) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->n = 2;
    r->e[0] = a.e[0];
    r->e[1] = b.e[1];
    return 1;
}

/* A bound of a step-1 slice along a dimension of size e, Python's clamping decided by the traced
 * values and guarded: None -> dflt (0 or e); b >= 0 -> min(b, e); b < 0 -> max(e + b, 0). The
 * expression, or -1 on error (no memory). */
static int32_t slice_bound(EmTracer *T, int32_t e, int32_t b, int32_t dflt) {
    EmSizes *S = &T->sizes;
    int32_t z = em_size_const(S, 0);
    if (b < 0 || z < 0) return b < 0 ? dflt : -1;
    int64_t hb = em_size_hint(S, b), he = em_size_hint(S, e);
    if (hb >= 0) {
        if (em_size_require(S, EMSR_GE, b, z)) return -1;
        if (hb <= he) return em_size_require(S, EMSR_LE, b, e) ? -1 : b;
        return em_size_require(S, EMSR_GT, b, e) ? -1 : e;
    }
    if (em_size_require(S, EMSR_LT, b, z)) return -1;
    int32_t x = em_size_op(S, EMS_ADD, e, b);
    if (x < 0) return -1;
    if (em_size_hint(S, x) >= 0) return em_size_require(S, EMSR_GE, x, z) ? -1 : x;
    return em_size_require(S, EMSR_LT, x, z) ? -1 : z;
}

/* The expression of a slice bound sym: -1 for None, -2 when it is not an int. */
static int32_t bound_expr(EmTracer *T, EmSym *b) {
    if (b->kind == SYM_CONST && b->obj == Py_None) return -1;
    int32_t e = int_of(T, b);
    return e < 0 ? -2 : e;
}

/* The size of x[start:stop] (step 1 or None) along a dimension of size e, the bounds given as
 * syms: an expression, -1 when not of that form, -2 on error. */
static int32_t slice_len(EmTracer *T, int32_t e, EmSym *start, EmSym *stop, EmSym *step) {
    EmSizes *S = &T->sizes;
    long sv = 1;
    if (!(step->kind == SYM_CONST && step->obj == Py_None) && !(const_int(step, &sv) && sv >= 1 && sv < (1L << 30)))
        return -1;
    int32_t bs = bound_expr(T, start), bt = bound_expr(T, stop);
    if (bs == -2 || bt == -2) return -1;
    int32_t z = em_size_const(S, 0);
    if (z < 0) return -2;
    int32_t lo = slice_bound(T, e, bs, z), hi = slice_bound(T, e, bt, e);
    if (lo < 0 || hi < 0) return -2;
    int32_t len = em_size_sub(S, hi, lo);
    if (len < 0) return -2;
    if (em_size_hint(S, len) < 0) return em_size_require(S, EMSR_LT, len, z) ? -2 : z;
    if (em_size_require(S, EMSR_GE, len, z)) return -2;
    if (sv == 1) return len;
    int32_t k = em_size_const(S, sv), k1 = em_size_const(S, sv - 1); /* a step k: ceil(len / k) */
    int32_t up = k < 0 || k1 < 0 ? -1 : em_size_op(S, EMS_ADD, len, k1);
    int32_t r = up < 0 ? -1 : em_size_op(S, EMS_FLOORDIV, up, k);
    return r < 0 ? -2 : r;
}

/* slice_len of a constant slice object. */
static int32_t const_slice_len(EmTracer *T, int32_t e, PyObject *sl) {
    PySliceObject *k = (PySliceObject *)sl;
    EmSym *b[3];
    PyObject *v[3] = {k->start, k->stop, k->step};
    for (int i = 0; i < 3; i++)
        if (!(b[i] = em_sym_const(T, v[i]))) return -2;
    return slice_len(T, e, b[0], b[1], b[2]);
}

/* An index tensor of an integer dtype (uint8 and bool ones are masks: their result's size is
 * data-dependent). */
static int int_index(EmTracer *T, const EmSym *s) {
    if (s->kind != SYM_TENSOR) return 0;
    int dt = T->G->nodes.data[s->ref].dtype;
    return dt == EMDT_I8 || dt == EMDT_I16 || dt == EMDT_I32 || dt == EMDT_I64;
}

/* x[i0, i1, ...] with integer index tensors for x's leading dimensions (x[t] for one): the
 * indices' broadcast sizes, then x's remaining sizes. */
static int rule_advanced(EmTracer *T, EmSym *x, EmSym *key, Dims *r, EmStatus *st) {
    EmSym **items = &key;
    int n = 1;
    Dims d, b;
    if (key->kind == SYM_TUPLE && !key->seq_type) {
        items = key->items.data;
        n = key->items.len;
    }
    for (int i = 0; i < n; i++)
        if (!int_index(T, items[i])) return 0;
    if (!is_tensor(x) || dims_of(T, x, &d, st)) return PyErr_Occurred() ? -1 : 0;
    if (n > d.n || n > 8) return 0;
    int ok = rule_broadcast(T, items, n, &b, st);
    if (ok != 1) return ok;
    if (b.n + d.n - n > 64) return 0;
    *r = b;
    for (int i = n; i < d.n; i++) r->e[r->n++] = d.e[i];
    return 1;
}

/* x[key], basic indexing by constants: ints, slices, None, Ellipsis. */
static int rule_getitem(EmTracer *T, EmSym *x, EmSym *key, Dims *r, EmStatus *st) {
    Dims d;
    if (key->kind == SYM_TENSOR || (key->kind == SYM_TUPLE && key->items.len && key->items.data[0]->kind == SYM_TENSOR))
        return rule_advanced(T, x, key, r, st);
    if (!is_tensor(x) || dims_of(T, x, &d, st)) return PyErr_Occurred() ? -1 : 0;
    /* items[i]: a constant key item; NULL for a symbolic one, ss[i]: a SYM_SLICE or SYM_INT */
    PyObject *items[64];
    EmSym *ss[64];
    int n = 0;
    if (key->kind == SYM_SLICE || key->kind == SYM_INT) {
        ss[n] = key;
        items[n++] = NULL;
    } else if (key->kind == SYM_TUPLE && !key->seq_type) {
        for (int32_t i = 0; i < key->items.len; i++) {
            EmSym *it = key->items.data[i];
            if (n == 64 || (it->kind != SYM_CONST && it->kind != SYM_SLICE && it->kind != SYM_INT)) return 0;
            ss[n] = it;
            items[n++] = it->kind == SYM_CONST ? it->obj : NULL;
        }
    } else if (key->kind == SYM_CONST && PyTuple_CheckExact(key->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key->obj); i++) {
            if (n == 64) return 0;
            items[n++] = PyTuple_GET_ITEM(key->obj, i);
        }
    } else if (key->kind == SYM_CONST) {
        items[n++] = key->obj;
    } else {
        return 0;
    }
    int used = 0, ell = -1;
    for (int i = 0; i < n; i++) {
        PyObject *k = items[i];
        if (!k) {
            used++;
        } else if (k == Py_Ellipsis) {
            if (ell >= 0) return 0;
            ell = i;
        } else if (k != Py_None) {
            if (!PySlice_Check(k) && !(PyLong_CheckExact(k))) return 0;
            used++;
        }
    }
    if (used > d.n) return 0;
    int32_t one = em_size_const(&T->sizes, 1);
    if (one < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    int at = 0;
    r->n = 0;
    for (int i = 0; i <= n; i++) {
        if (i == n || (ell >= 0 && i == ell)) { /* the dims an Ellipsis (or the end) leaves */
            int keep = i == n ? d.n - at : d.n - used;
            if (i == n && ell >= 0) keep = 0;
            for (int k = 0; k < keep && r->n < 64; k++) r->e[r->n++] = d.e[at++];
            continue;
        }
        PyObject *k = items[i];
        if (r->n >= 63) return 0;
        if (!k && ss[i]->kind == SYM_INT) at++; /* an index: in range (the op checked it at these sizes) */
        else if (!k) {
            EmSym **b = ss[i]->items.data;
            int32_t len = slice_len(T, d.e[at++], b[0], b[1], b[2]);
            if (len == -2) return *st = EM_ERR, PyErr_NoMemory(), -1;
            if (len < 0) return 0;
            r->e[r->n++] = len;
        } else if (k == Py_None) r->e[r->n++] = one;
        else if (PyLong_CheckExact(k)) at++;
        else {
            int32_t len = const_slice_len(T, d.e[at++], k);
            if (len == -2) return *st = EM_ERR, PyErr_NoMemory(), -1;
            if (len < 0) return 0;
            r->e[r->n++] = len;
        }
    }
    return 1;
}

static int rule_of(PyObject *fn, int *shape_rule);

/* The split family's name: 'u' unbind, 's' split / split_with_sizes, 0 any other. */
static char split_kind(PyObject *fn) {
    PyObject *qn = PyObject_GetAttrString(fn, "__name__");
    const char *name = qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : NULL;
    if (!name) PyErr_Clear(); /* a nameless callable: no rule */
    char k = !name                                                         ? 0
             : !strcmp(name, "unbind")                                     ? 'u'
             : !strcmp(name, "split") || !strcmp(name, "split_with_sizes") ? 's'
                                                                           : 0;
    Py_XDECREF(qn);
    return k;
}

/* The sections list of split(x, [n0, n1, ...], dim) (its items' expressions into e[64], *n
 * of them): 1, or 0 when it is not one of ints. */
static int split_sections(EmTracer *T, EmSym *sec, int32_t *e, int *n) {
    if (!sec || (sec->kind != SYM_TUPLE && sec->kind != SYM_LIST) || sec->items.len > 64) return 0;
    for (int32_t i = 0; i < sec->items.len; i++)
        if ((e[i] = int_of(T, sec->items.data[i])) < 0) return 0;
    *n = sec->items.len;
    return 1;
}

/* split(x, [n0, n1, ...], dim) with a symbolic section: item i's split dimension is ni, and
 * split checks that they sum to x's (it raises otherwise). */
static EmStatus split_by_sections(EmTracer *T, const Dims *x, int w, const int32_t *sec, int nsec, EmSym *out) {
    EmSizes *S = &T->sizes;
    int32_t sum = em_size_const(S, 0);
    for (int i = 0; sum >= 0 && i < nsec; i++) sum = em_size_op(S, EMS_ADD, sum, sec[i]);
    if (sum < 0 || em_size_hint(S, sum) != em_size_hint(S, x->e[w]) || out->items.len != nsec) return EM_OK;
    if (em_size_assume(S, EMSR_EQ, sum, x->e[w])) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < nsec; i++) {
        EmSym *it = out->items.data[i];
        if (it->kind != SYM_TENSOR || T->G->nodes.data[it->ref].ndim != x->n) return EM_OK;
        Dims r = *x;
        r.e[w] = sec[i];
        for (int k = 0; k < r.n; k++)
            if (em_size_hint(S, r.e[k]) != em_ir_sizes(T->G, &T->G->nodes.data[it->ref])[k]) return EM_OK;
        if (em_node_set_dims(T, it->ref, r.e, r.n)) return EM_ERR;
    }
    return EM_OK;
}

EmStatus em_split_hints(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames) {
    int shape_rule, npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    if (rule_of(fn, &shape_rule) != SYMR_SPLIT || split_kind(fn) != 's' || npos < 1 || !is_tensor(args[0]))
        return PyErr_Occurred() ? EM_ERR : EM_OK;
    EmSym *sec = arg_at(args, npos, kwnames, 1, "split_size_or_sections"), *dim = arg_at(args, npos, kwnames, 2, "dim");
    if (!sec) sec = arg_at(args, npos, kwnames, 1, "split_sizes");
    if (!sec) sec = arg_at(args, npos, kwnames, 1, "split_size");
    const EmNode *xn = &T->G->nodes.data[args[0]->ref];
    long dv = 0;
    int w;
    if (!sec || (sec->kind != SYM_TUPLE && sec->kind != SYM_LIST) || (dim && !const_int(dim, &dv)) ||
        !wrap(dv, xn->ndim, &w))
        return EM_OK;
    int64_t left = em_ir_sizes(T->G, xn)[w];
    int fresh = 0;
    for (int32_t i = 0; i < sec->items.len; i++) {
        EmSym *it = sec->items.data[i];
        int32_t e = it->kind == SYM_ITEM ? it->expr : int_of(T, it);
        if (it->kind == SYM_ITEM && e < 0) fresh++;
        else if (e >= 0) left -= em_size_hint(&T->sizes, e);
        else return EM_OK; /* a float item: em_item_sizes refuses it */
    }
    for (int32_t i = 0, k = 0; left >= 0 && i < sec->items.len; i++) { /* what is left, shared out */
        EmSym *it = sec->items.data[i];
        if (it->kind != SYM_ITEM || it->expr >= 0) continue;
        int64_t h = left / fresh + (++k == fresh ? left % fresh : 0);
        if (em_item_size_hinted(T, it, h) == -1) return EM_ERR;
    }
    return EM_OK;
}

/* split/chunk/unbind/...: the items' sizes, when the split dimension is a constant. */
static EmStatus rule_split(EmTracer *T, PyObject *fn, EmSym **args, int npos, PyObject *kwnames, EmSym *out) {
    Dims x;
    EmStatus st = EM_OK;
    if (npos < 1 || !is_tensor(args[0]) || out->kind != SYM_TUPLE) return EM_OK;
    if (dims_of(T, args[0], &x, &st)) return st;
    EmSym *dim = arg_at(args, npos, kwnames, 2, "dim");
    char kind = split_kind(fn);
    if (PyErr_Occurred()) return EM_ERR;
    int is_unbind = kind == 'u';
    if (is_unbind) dim = arg_at(args, npos, kwnames, 1, "dim");
    long dv = 0;
    int w;
    if ((dim && !const_int(dim, &dv)) || !wrap(dv, x.n, &w)) return em_sym_specialize(T, args[0]);
    int32_t sec[64];
    int nsec = 0;
    if (kind == 's' && npos >= 2 && split_sections(T, args[1], sec, &nsec)) {
        for (int i = 0; i < nsec; i++)
            if (!em_size_is_const(&T->sizes, sec[i])) return split_by_sections(T, &x, w, sec, nsec, out);
    }
    /* the number of pieces follows from the split dimension's size: the trace made that many */
    if ((st = em_int_specialize(T, x.e[w])) != EM_OK) return st;
    if ((x.e[w] = em_size_const(&T->sizes, em_size_hint(&T->sizes, x.e[w]))) < 0) return PyErr_NoMemory(), EM_ERR;
    for (int32_t i = 0; i < out->items.len; i++) {
        EmSym *it = out->items.data[i];
        if (it->kind != SYM_TENSOR) return EM_OK;
        const EmNode *n = &T->G->nodes.data[it->ref];
        Dims r = x;
        if (is_unbind) {
            for (int k = w; k < x.n - 1; k++) r.e[k] = x.e[k + 1];
            r.n = x.n - 1;
        } else if ((r.e[w] = em_size_const(&T->sizes, n->ndim > w ? em_ir_sizes(T->G, n)[w] : 0)) < 0) {
            return PyErr_NoMemory(), EM_ERR;
        }
        if (r.n != n->ndim) return EM_OK;
        for (int k = 0; k < r.n; k++)
            if (em_size_hint(&T->sizes, r.e[k]) != em_ir_sizes(T->G, n)[k]) return EM_OK;
        if (em_node_set_dims(T, it->ref, r.e, r.n)) return EM_ERR;
    }
    return EM_OK;
}

/* Item i of an int-or-tuple parameter (stride=2 or stride=(2, 1)); dflt when it is absent or
 * None. 0 when it is neither. */
static int int_param(EmSym *s, int i, long dflt, long *out) {
    *out = dflt;
    if (!s || (s->kind == SYM_CONST && s->obj == Py_None)) return 1;
    if (const_int(s, out)) return 1;
    PyObject *item = NULL;
    if (s->kind == SYM_CONST && (PyTuple_CheckExact(s->obj) || PyList_CheckExact(s->obj))) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(s->obj);
        if (n == 0) return 0;
        item = PySequence_Fast_GET_ITEM(s->obj, n == 1 ? 0 : i < n ? i : n - 1);
        if (n != 1 && i >= n) return 0;
    } else if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST) && s->items.len) {
        int32_t n = s->items.len;
        if (n != 1 && i >= n) return 0;
        EmSym *it = s->items.data[n == 1 ? 0 : i];
        return const_int(it, out);
    }
    if (!item || !PyLong_CheckExact(item)) return 0;
    *out = PyLong_AsLong(item);
    return !(*out == -1 && PyErr_Occurred()) || (PyErr_Clear(), 0); /* beyond a long (OverflowError): no rule */
}

/* (size + 2*pad - dil*(k - 1) - 1) // stride + 1, guarded to be at least 1 (the op refuses less). */
static int32_t window_out(EmTracer *T, int32_t size, long k, long stride, long pad, long dil) {
    EmSizes *S = &T->sizes;
    int32_t e = em_size_const(S, 2 * pad - dil * (k - 1) - 1);
    if (e >= 0) e = em_size_op(S, EMS_ADD, size, e);
    int32_t st = em_size_const(S, stride), one = em_size_const(S, 1);
    if (e >= 0 && st >= 0) e = em_size_op(S, EMS_FLOORDIV, e, st);
    if (e >= 0 && one >= 0) e = em_size_op(S, EMS_ADD, e, one);
    if (e >= 0 && !em_size_is_const(S, e) && em_size_require(S, EMSR_GE, e, one)) return -1;
    return e;
}

/* conv (weight: kernel sizes) and pooling (kernel parameter) over nsp spatial dimensions: the
 * leading sizes (batch, channels; conv: weight.size(0) channels), then each spatial size
 * through window_out. ceil_mode, string padding and non-constant parameters: no rule. */
static int rule_window(EmTracer *T, int rule, int nsp, EmSym **args, int npos, PyObject *kwnames, Dims *r,
                       EmStatus *st) {
    Dims x, w = {.n = 0};
    int conv = rule == SYMR_CONV;
    if (!is_tensor(args[0]) || dims_of(T, args[0], &x, st)) return PyErr_Occurred() ? -1 : 0;
    if (conv && (npos < 2 || !is_tensor(args[1]) || dims_of(T, args[1], &w, st))) return PyErr_Occurred() ? -1 : 0;
    if (conv) nsp = w.n - 2;
    if (nsp < 1 || x.n < nsp + 1 || x.n > nsp + 2) return 0;
    /* parameter positions: conv (x, w, bias, stride, padding, dilation, groups); max_pool (x,
     * kernel, stride, padding, dilation, ceil_mode); avg_pool (x, kernel, stride, padding, ceil_mode) */
    EmSym *stride = arg_at(args, npos, kwnames, conv ? 3 : 2, "stride"),
          *pad = arg_at(args, npos, kwnames, conv ? 4 : 3, "padding"),
          *dil = rule == SYMR_AVG_POOL ? NULL : arg_at(args, npos, kwnames, conv ? 5 : 4, "dilation"),
          *kern = conv ? NULL : arg_at(args, npos, kwnames, 1, "kernel_size"),
          *ceil = conv ? NULL : arg_at(args, npos, kwnames, rule == SYMR_MAX_POOL ? 5 : 4, "ceil_mode");
    if (ceil && !(ceil->kind == SYM_CONST && ceil->obj == Py_False)) return 0;
    *r = x;
    if (conv) {
        /* the input's channels are the weight's times groups (the op checked them) */
        long g;
        EmSym *groups = arg_at(args, npos, kwnames, 6, "groups");
        if (x.n == nsp + 2 && em_size_is_const(&T->sizes, w.e[1]) && int_param(groups, 0, 1, &g) && g >= 1) {
            int32_t c = em_size_const(&T->sizes, em_size_hint(&T->sizes, w.e[1]) * g);
            if (c < 0 || em_size_require(&T->sizes, EMSR_EQ, x.e[1], c)) return *st = EM_ERR, PyErr_NoMemory(), -1;
        }
        r->e[x.n - nsp - 1] = w.e[0];
    }
    for (int i = 0; i < nsp; i++) {
        long k, sv, p, d;
        int at = x.n - nsp + i;
        if (conv) {
            if (!em_size_is_const(&T->sizes, w.e[2 + i])) return 0;
            k = (long)em_size_hint(&T->sizes, w.e[2 + i]);
        } else if (!kern || !int_param(kern, i, 0, &k)) {
            return 0;
        }
        if (!int_param(stride, i, conv ? 1 : k, &sv) || !int_param(pad, i, 0, &p) || !int_param(dil, i, 1, &d) ||
            sv < 1 || k < 1 || d < 1 || p < 0)
            return 0;
        if (stride && !conv && stride->kind == SYM_TUPLE && !stride->items.len) sv = k; /* stride=[]: the kernel */
        if ((r->e[at] = window_out(T, x.e[at], k, sv, p, d)) < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    }
    return 1;
}

/* adaptive pools: the leading sizes, then output_size (an int, or a tuple whose None items keep
 * the input's size). */
static int rule_adaptive(EmTracer *T, int nsp, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    Dims x;
    EmSym *os = arg_at(args, npos, kwnames, 1, "output_size");
    if (!os || !is_tensor(args[0]) || dims_of(T, args[0], &x, st)) return PyErr_Occurred() ? -1 : 0;
    if (nsp < 1 || x.n < nsp + 1) return 0;
    *r = x;
    for (int i = 0; i < nsp; i++) {
        int at = x.n - nsp + i;
        EmSym *item = os->kind == SYM_TUPLE || os->kind == SYM_LIST ? (i < os->items.len ? os->items.data[i] : NULL)
                                                                    : NULL;
        long v;
        if (item && item->kind == SYM_CONST && item->obj == Py_None) continue;
        if (os->kind == SYM_CONST && PyTuple_CheckExact(os->obj) && PyTuple_GET_SIZE(os->obj) == nsp &&
            PyTuple_GET_ITEM(os->obj, i) == Py_None)
            continue; /* (1, None): that size is the input's */
        if (item) { /* an int, or a size (F.adaptive_avg_pool2d fills its Nones with the input's) */
            if ((r->e[at] = int_of(T, item)) < 0) return 0;
            continue;
        }
        if (!int_param(os, i, -1, &v) || v < 0) return 0;
        if ((r->e[at] = em_size_const(&T->sizes, v)) < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    }
    return 1;
}

static int rule_flatten(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    Dims x;
    if (!is_tensor(args[0]) || dims_of(T, args[0], &x, st)) return PyErr_Occurred() ? -1 : 0;
    long a = 0, b = -1;
    EmSym *sa = arg_at(args, npos, kwnames, 1, "start_dim"), *sb = arg_at(args, npos, kwnames, 2, "end_dim");
    if ((sa && !const_int(sa, &a)) || (sb && !const_int(sb, &b))) return 0;
    if (x.n == 0) {
        int32_t one = em_size_const(&T->sizes, 1);
        r->n = 1;
        r->e[0] = one;
        return one < 0 ? (*st = EM_ERR, PyErr_NoMemory(), -1) : 1;
    }
    int wa, wb;
    if (!wrap(a, x.n, &wa) || !wrap(b, x.n, &wb) || wa > wb) return 0;
    int32_t p = x.e[wa];
    for (int i = wa + 1; i <= wb && p >= 0; i++) p = em_size_op(&T->sizes, EMS_MUL, p, x.e[i]);
    if (p < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->n = 0;
    for (int i = 0; i < wa; i++) r->e[r->n++] = x.e[i];
    r->e[r->n++] = p;
    for (int i = wb + 1; i < x.n; i++) r->e[r->n++] = x.e[i];
    return 1;
}

/* scaled_dot_product_attention(q, k, v): the batch dimensions of q, k and v broadcast, but
 * where k's or v's size is neither q's nor 1 (enable_gqa's grouped heads: the op requires q's a
 * multiple of it, else raises) the result's is q's; then q's length and v's last size. */
static int rule_sdpa(EmTracer *T, EmSym **args, int npos, Dims *r, EmStatus *st) {
    Dims d[3];
    if (npos < 3) return 0;
    for (int t = 0; t < 3; t++) {
        if (!is_tensor(args[t])) return 0;
        if (dims_of(T, args[t], &d[t], st)) return -1;
        if (d[t].n < 2) return 0;
    }
    EmSizes *S = &T->sizes;
    int32_t len = d[0].e[d[0].n - 2], ev = d[2].e[d[2].n - 1];
    for (int t = 0; t < 3; t++) d[t].n -= 2;
    /* q's batch dims and k/v's whose size differs from q's (not 1): grouped heads, not broadcast */
    for (int t = 1; t < 3; t++)
        for (int i = 1; i <= d[t].n && i <= d[0].n; i++) {
            int32_t qe = d[0].e[d[0].n - i], e = d[t].e[d[t].n - i];
            int64_t hq = em_size_hint(S, qe), h = em_size_hint(S, e);
            if (h == hq || h == 1 || hq == 1) continue;
            d[t].e[d[t].n - i] = qe; /* stands for q's in the broadcast below: no relation */
        }
    if (broadcast_dims(T, d, 3, r, st) < 0) return -1;
    r->e[r->n++] = len;
    r->e[r->n++] = ev;
    return 1;
}

/* squeeze(x[, dim]): a dimension it looks at goes when its size is 1; the answer is guarded
 * (== 1 or != 1), so a symbolic size stays symbolic where it is not 1. */
static int rule_squeeze(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    Dims x;
    if (!is_tensor(args[0]) || dims_of(T, args[0], &x, st)) return PyErr_Occurred() ? -1 : 0;
    uint64_t look;
    if (!dim_mask(arg_at(args, npos, kwnames, 1, "dim"), x.n, &look)) return 0;
    EmSizes *S = &T->sizes;
    int32_t one = em_size_const(S, 1);
    if (one < 0) return *st = EM_ERR, PyErr_NoMemory(), -1;
    r->n = 0;
    for (int i = 0; i < x.n; i++) {
        int is_one = em_size_hint(S, x.e[i]) == 1;
        if ((look >> i) & 1 && em_size_require(S, is_one ? EMSR_EQ : EMSR_NE, x.e[i], one))
            return *st = EM_ERR, PyErr_NoMemory(), -1;
        if (!((look >> i) & 1) || !is_one) r->e[r->n++] = x.e[i];
    }
    return 1;
}

/* The rule of fn: an em_sym_rules.def row, else one mapped from em_shape_rules.def, else 0. */
static int rule_of(PyObject *fn, int *shape_rule) {
    *shape_rule = 0;
    PyObject *r = PyDict_GetItemWithError(em_state.sym_rules, fn);
    if (!r && !PyErr_Occurred()) r = PyDict_GetItemWithError(em_state.shape_rules, fn);
    else if (r) { /* a row, or (row, spatial dimensions) */
        if (PyTuple_Check(r)) *shape_rule = (int)PyLong_AsLong(PyTuple_GET_ITEM(r, 1));
        return (int)PyLong_AsLong(PyTuple_Check(r) ? PyTuple_GET_ITEM(r, 0) : r);
    }
    if (!r) {
        PyErr_Clear(); /* unhashable: no rule */
        return 0;
    }
    *shape_rule = (int)PyLong_AsLong(PyTuple_Check(r) ? PyTuple_GET_ITEM(r, 0) : r);
    switch (*shape_rule) {
        case SR_LIKE_FIRST: return SYMR_SAME;
        case SR_SCALAR_ARGS: return SYMR_BROADCAST; /* clamp(x, min=t), pow(x, t): t may broadcast x */
        case SR_LINEAR: return SYMR_LINEAR;
        case SR_REDUCE: return SYMR_REDUCE;
        default: return *shape_rule >= SR_VIEW_TRANSPOSE ? SYMR_VIEWS : 0;
    }
}

int em_inplace_keeps_sizes(EmOp op, PyObject *fn) {
    if (em_op_info[op].kind == EMOK_INPLACE) return op != EMOP_IMATMUL; /* x += y: y broadcasts to x */
    int shape_rule;
    int rule = op == EMOP_CALL && fn ? rule_of(fn, &shape_rule) : 0;
    PyErr_Clear(); /* no rule: the result's sizes stay unknown */
    return rule == SYMR_SAME;
}

/* Whether any argument holds a symbolic size (a SYM_INT, a tensor whose sizes may be
 * symbolic), nested in tuples and lists. */
static int any_sym(EmTracer *T, EmSym **args, int nargs, int depth) {
    for (int i = 0; i < nargs; i++) {
        EmSym *s = args[i];
        if (s->kind == SYM_INT || (s->kind == SYM_TENSOR && em_node_has_sym_dims(T, s->ref))) return 1;
        if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST || s->kind == SYM_SLICE) && depth < 4 &&
            any_sym(T, s->items.data, s->items.len, depth + 1))
            return 1;
    }
    return 0;
}

/* Whether args (nested in tuples and lists) hold a tensor of symbolic sizes. */
static int sym_tensor_held(EmTracer *T, EmSym **args, int nargs, int depth) {
    for (int i = 0; i < nargs; i++) {
        EmSym *s = args[i];
        if (s->kind == SYM_TENSOR && em_node_has_sym_dims(T, s->ref)) return 1;
        if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST) && depth < 4 &&
            sym_tensor_held(T, s->items.data, s->items.len, depth + 1))
            return 1;
    }
    return 0;
}

/* Pins every SYM_INT among args that reads an unbacked symbol: an op no rule covers given a
 * size from .item() (as a dim, a size) could have other metadata than its meta run's on the
 * stand-in (em_size_require counts the pin undecided: the trace aborts). */
static EmStatus pin_unbacked(EmTracer *T, EmSym **args, int nargs, int depth) {
    for (int i = 0; i < nargs; i++) {
        EmSym *s = args[i];
        EmStatus st = EM_OK;
        if (s->kind == SYM_INT && T->sizes.nodes.data[s->expr].unb) st = em_int_specialize(T, s->expr);
        else if ((s->kind == SYM_TUPLE || s->kind == SYM_LIST || s->kind == SYM_SLICE) && depth < 4)
            st = pin_unbacked(T, s->items.data, s->items.len, depth + 1);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* topk(x, k, dim=-1): x's sizes with dim's k. */
static int rule_topk(EmTracer *T, EmSym **args, int npos, PyObject *kwnames, Dims *r, EmStatus *st) {
    EmSym *k = arg_at(args, npos, kwnames, 1, "k"), *dim = arg_at(args, npos, kwnames, 2, "dim");
    long d = -1;
    int w;
    int32_t ke = k ? int_of(T, k) : -1;
    if (ke < 0 || (dim && !const_int(dim, &d))) return 0;
    if (dims_of(T, args[0], r, st)) return -1;
    if (!wrap(d, r->n ? r->n : 1, &w) || r->n == 0) return 0;
    r->e[w] = ke;
    return 1;
}

/* (values, indices) of max/min/median/mode(x, dim) or sort(x): each the reduction's sizes, or
 * x's. Sizes the rule does not match stay unknown (a read pins what they came from). */
static EmStatus tuple_alike(EmTracer *T, int rule, EmSym **args, int nargs, PyObject *kwnames, EmSym *out) {
    int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    Dims r = {.n = 0};
    EmStatus st = EM_OK;
    int ok = npos < 1 || !is_tensor(args[0]) ? 0
             : rule == SYMR_MINMAX           ? rule_reduce(T, args, npos, kwnames, &r, &st)
             : rule == SYMR_TOPK             ? rule_topk(T, args, npos, kwnames, &r, &st)
                                             : (dims_of(T, args[0], &r, &st) ? -1 : 1);
    if (ok < 0) return st == EM_OK ? EM_ERR : st;
    for (int32_t k = 0; ok == 1 && k < (rule == SYMR_MHA ? 1 : out->items.len); k++) { /* MHA: its weights unknown */
        EmSym *t = out->items.data[k];
        if (t->kind != SYM_TENSOR || T->G->nodes.data[t->ref].ndim != r.n) return pin_unbacked(T, args, nargs, 0);
        const EmNode *n = &T->G->nodes.data[t->ref];
        for (int i = 0; i < r.n; i++)
            if (em_size_hint(&T->sizes, r.e[i]) != em_ir_sizes(T->G, n)[i]) return pin_unbacked(T, args, nargs, 0);
        if (em_node_set_dims(T, t->ref, r.e, r.n)) return EM_ERR;
    }
    return ok == 1 ? EM_OK : pin_unbacked(T, args, nargs, 0);
}

/* The result sizes of fn(args) by its em_sym_rules.def row into *r: 1, 2 when they are static
 * (the data of torch.tensor), 0 when no rule applies, -1 with *st set. */
static int call_rule(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, Dims *rr, EmStatus *st) {
    int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0), shape_rule = 0, ok = 0;
    int rule = rule_of(fn, &shape_rule);
    if (PyErr_Occurred()) return *st = EM_ERR, -1;
    switch (rule) {
        case SYMR_SAME:
            if (npos >= 1 && is_tensor(args[0])) ok = dims_of(T, args[0], rr, st) ? -1 : 1;
            break;
        case SYMR_BROADCAST: ok = rule_broadcast(T, args, nargs, rr, st); break;
        case SYMR_LINEAR: ok = rule_linear(T, args, npos, rr, st); break;
        case SYMR_MATMUL: ok = rule_matmul(T, args, npos, rr, st); break;
        case SYMR_REDUCE: ok = npos >= 1 ? rule_reduce(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_VIEWS: ok = npos >= 1 ? rule_view_family(T, shape_rule, args, npos, rr, st) : 0; break;
        case SYMR_FACTORY:
        case SYMR_FULL:
        case SYMR_NEW_FACTORY:
        case SYMR_NEW_FULL: ok = rule_factory(T, rule, args, npos, rr); break;
        case SYMR_ARANGE: ok = rule_arange(T, args, npos, rr, st); break;
        case SYMR_CAT: ok = npos >= 1 ? rule_cat(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_EMBEDDING: ok = rule_embedding(T, args, npos, rr, st); break;
        case SYMR_EMBEDDING_W: {
            EmSym *sw[2] = {npos >= 2 ? args[1] : NULL, args[0]};
            ok = npos >= 2 ? rule_embedding(T, sw, 2, rr, st) : 0;
            break;
        }
        case SYMR_ADDMM: ok = rule_addmm(T, args, npos, rr, st); break;
        case SYMR_CONV:
        case SYMR_MAX_POOL:
        case SYMR_AVG_POOL: ok = npos >= 2 ? rule_window(T, rule, shape_rule, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_ADAPTIVE: ok = npos >= 1 ? rule_adaptive(T, shape_rule, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_FLATTEN: ok = npos >= 1 ? rule_flatten(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_SQUEEZE: ok = npos >= 1 ? rule_squeeze(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_SDPA: ok = rule_sdpa(T, args, npos, rr, st); break;
        case SYMR_GATHER: ok = npos >= 1 ? rule_gather(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_INDEX_SELECT: ok = npos >= 1 ? rule_index_select(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_MINMAX: ok = npos >= 1 && is_tensor(args[0]) ? rule_minmax(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_SORT: ok = npos >= 1 && is_tensor(args[0]) ? (dims_of(T, args[0], rr, st) ? -1 : 1) : 0; break;
        case SYMR_REDUCE_AT:
            ok = npos >= 1 ? rule_reduce_at(T, args, npos, kwnames, shape_rule / 10, shape_rule % 10, rr, st) : 0;
            break;
        case SYMR_AS: ok = npos >= 1 ? rule_as(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_REPEAT: ok = rule_repeat(T, args, npos, rr, st); break;
        case SYMR_STACK: ok = npos >= 1 ? rule_stack(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_PAD: ok = npos >= 1 ? rule_pad(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_OUTER: ok = rule_outer(T, args, npos, rr, st); break;
        case SYMR_LINSPACE: ok = rule_linspace(T, args, npos, kwnames, rr); break;
        case SYMR_ONE_HOT: ok = npos >= 1 ? rule_one_hot(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_UNFLATTEN: ok = npos >= 1 ? rule_unflatten(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_MOVEDIM: ok = npos >= 1 ? rule_movedim(T, args, npos, kwnames, rr, st) : 0; break;
        case SYMR_DATA:
        case SYMR_NEW_DATA: { /* symbolic numbers among the data are its values (graph values) */
            int skip = rule == SYMR_NEW_DATA && nargs >= 1;
            return sym_tensor_held(T, args + skip, nargs - skip, 0) ? 0 : 2;
        }
        default: break;
    }
    return ok;
}

EmStatus em_shape_sym(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmSym *out) {
    if (!em_int_active(T) || !out) return EM_OK;
    /* a tuple of tensors: its length is fixed by the op (max(dim), topk) or by a size (the split
     * family, whose rule pins it) */
    if (out->kind == SYM_TUPLE && op == EMOP_CALL && fn && any_sym(T, args, nargs, 0)) {
        int shape_rule;
        int rule = rule_of(fn, &shape_rule);
        if (PyErr_Occurred()) return EM_ERR;
        int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
        if (rule == SYMR_SPLIT) return rule_split(T, fn, args, npos, kwnames, out);
        return rule == SYMR_MINMAX || rule == SYMR_SORT || rule == SYMR_TOPK || rule == SYMR_MHA
                   ? tuple_alike(T, rule, args, nargs, kwnames, out)
                   : EM_OK;
    }
    if (out->kind != SYM_TENSOR) return EM_OK;
    const EmNode *n = &T->G->nodes.data[out->ref];
    if (n->vkind != EMV_TENSOR) return EM_OK;
    if (!any_sym(T, args, nargs, 0)) return em_node_set_dims(T, out->ref, NULL, 0) ? EM_ERR : EM_OK;
    int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0), ok = 0;
    EmStatus st = EM_OK;
    Dims r = {.n = 0};
    EmOpKind kind = em_op_info[op].kind;
    if ((em_op_info[op].flags & EMF_POINTWISE) && kind != EMOK_CALL) ok = rule_broadcast(T, args, nargs, &r, &st);
    else if (op == EMOP_MATMUL || op == EMOP_IMATMUL) ok = rule_matmul(T, args, npos, &r, &st);
    else if (op == EMOP_SUBSCR && npos == 2) ok = rule_getitem(T, args[0], args[1], &r, &st);
    else if (op == EMOP_CALL && fn && PySet_Contains(em_state.pointwise_fns, fn) == 1)
        ok = rule_broadcast(T, args, nargs, &r, &st); /* keyword operands too (other=, min=) */
    else if (op == EMOP_CALL && fn) {
        ok = call_rule(T, fn, args, nargs, kwnames, &r, &st);
    }
    if (ok < 0) return st == EM_OK ? EM_ERR : st;
    if (ok == 2) return em_node_set_dims(T, out->ref, NULL, 0) ? EM_ERR : EM_OK;
    n = &T->G->nodes.data[out->ref];
    if (n->ndim == 0) { /* no sizes to know; a size from .item() given to an op no rule covers is pinned */
        st = ok == 1 ? EM_OK : pin_unbacked(T, args, nargs, 0);
        return st != EM_OK ? st : em_node_set_dims(T, out->ref, NULL, 0) ? EM_ERR : EM_OK;
    }
    if (ok != 1 || r.n != n->ndim) /* unknown: a read pins what it came from */
        return pin_unbacked(T, args, nargs, 0);
    for (int i = 0; i < r.n; i++)
        if (em_size_hint(&T->sizes, r.e[i]) != em_ir_sizes(T->G, n)[i]) return pin_unbacked(T, args, nargs, 0);
    return em_node_set_dims(T, out->ref, r.e, r.n) ? EM_ERR : EM_OK;
}
