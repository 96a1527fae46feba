/* em_infer_view.c: result metadata of view ops inferred in C (ATen's geometry: transpose,
 * permute, unsqueeze, expand, view and reshape, and basic indexing with
 * ints, slices, None and Ellipsis). A view is a new tensor object, never one of its operands;
 * its storage offset is not tracked. Anything else (a dim out of range, a shape that does not
 * fit, a non-constant operand, a tensor index) is "not inferred": the meta run decides, and
 * raises where eager raises.
 */
#include "em_trace_int.h"

/* A constant int in *v; 0 when s is not one (bool is not: aten refuses it as a dim). */
static int const_int(EmSym *s, int64_t *v) {
    int overflow = 0;
    if (!s || s->kind != SYM_CONST || !PyLong_CheckExact(s->obj)) return 0;
    *v = PyLong_AsLongLongAndOverflow(s->obj, &overflow);
    return !overflow && !(*v == -1 && PyErr_Occurred());
}

static int wrap_dim(int64_t d, int ndim, int *out) {
    int n = ndim > 0 ? ndim : 1; /* a 0-dim tensor takes dims -1 and 0 */
    if (d < -n || d >= n) return 0;
    *out = (int)(d < 0 ? d + n : d);
    return 1;
}

/* The ints of f(x, a, b, ...) or f(x, (a, b, ...)) from args[1..]: the sequence a constant
 * tuple, list or torch.Size, or a tuple or list made while tracing whose items are constants.
 * Their count, or -1. */
static int int_args(EmSym **args, int nargs, int64_t *v, int max) {
    EmSym *one = nargs == 2 ? args[1] : NULL;
    if (one && one->kind == SYM_CONST && (PyTuple_Check(one->obj) || PyList_Check(one->obj))) {
        PyObject *o = one->obj;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        if (n > max) return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(o, i);
            int overflow = 0;
            if (!PyLong_CheckExact(e)) return -1;
            v[i] = PyLong_AsLongLongAndOverflow(e, &overflow);
            if (overflow) return -1;
        }
        return (int)n;
    }
    if (one && (one->kind == SYM_TUPLE || one->kind == SYM_LIST)) {
        if (one->items.len > max) return -1;
        for (int32_t i = 0; i < one->items.len; i++)
            if (!const_int(one->items.data[i], &v[i])) return -1;
        return (int)one->items.len;
    }
    if (nargs - 1 > max) return -1;
    for (int i = 1; i < nargs; i++)
        if (!const_int(args[i], &v[i - 1])) return -1;
    return nargs - 1;
}

static void copy_dims(EmInferred *r, const EmGraph *G, const EmNode *x) {
    r->ndim = x->ndim;
    if (x->ndim) {
        memcpy(r->sizes, em_ir_sizes(G, x), sizeof(int64_t) * (size_t)x->ndim);
        memcpy(r->strides, em_ir_strides(G, x), sizeof(int64_t) * (size_t)x->ndim);
    }
}

static int view_transpose(EmInferred *r, EmSym **args, int nargs) {
    int64_t d[2];
    int a, b;
    if (nargs != 3 || !const_int(args[1], &d[0]) || !const_int(args[2], &d[1])) return 0;
    if (!wrap_dim(d[0], r->ndim, &a) || !wrap_dim(d[1], r->ndim, &b)) return 0;
    if (r->ndim == 0) return 1;
    int64_t t = r->sizes[a];
    r->sizes[a] = r->sizes[b];
    r->sizes[b] = t;
    t = r->strides[a];
    r->strides[a] = r->strides[b];
    r->strides[b] = t;
    return 1;
}

static int view_t(EmInferred *r, int nargs) {
    if (nargs != 1 || r->ndim > 2) return 0;
    if (r->ndim == 2) {
        int64_t t = r->sizes[0];
        r->sizes[0] = r->sizes[1];
        r->sizes[1] = t;
        t = r->strides[0];
        r->strides[0] = r->strides[1];
        r->strides[1] = t;
    }
    return 1;
}

static int view_permute(EmInferred *r, EmSym **args, int nargs) {
    int64_t p[64], sz[64], st[64];
    int n = int_args(args, nargs, p, 64), seen[64] = {0};
    if (n != r->ndim) return 0;
    for (int i = 0; i < n; i++) {
        int d;
        if (!wrap_dim(p[i], n, &d) || seen[d]++) return 0;
        sz[i] = r->sizes[d];
        st[i] = r->strides[d];
    }
    memcpy(r->sizes, sz, sizeof(int64_t) * (size_t)n);
    memcpy(r->strides, st, sizeof(int64_t) * (size_t)n);
    return 1;
}

/* ATen's inferUnsqueezeGeometry: size 1 at d, stride sizes[d] * strides[d] (1 past the end). */
static int unsqueeze_at(EmInferred *r, int d) {
    if (r->ndim >= 63) return 0;
    int64_t st = d >= r->ndim ? 1 : r->sizes[d] * r->strides[d];
    memmove(r->sizes + d + 1, r->sizes + d, sizeof(int64_t) * (size_t)(r->ndim - d));
    memmove(r->strides + d + 1, r->strides + d, sizeof(int64_t) * (size_t)(r->ndim - d));
    r->sizes[d] = 1;
    r->strides[d] = st;
    r->ndim++;
    return 1;
}

static int view_unsqueeze(EmInferred *r, EmSym **args, int nargs) {
    int64_t d;
    int at;
    if (nargs != 2 || !const_int(args[1], &d) || !wrap_dim(d, r->ndim + 1, &at)) return 0;
    return unsqueeze_at(r, at);
}

/* ATen's inferExpandGeometry. */
static int view_expand(EmInferred *r, EmSym **args, int nargs) {
    int64_t want[64], sz[64], st[64];
    int n = int_args(args, nargs, want, 60);
    if (n < r->ndim) return 0;
    if (r->ndim == 0) { /* a 0-dim tensor expands with every stride 0 */
        for (int i = 0; i < n; i++) {
            if (want[i] < 0) return 0;
            sz[i] = want[i];
            st[i] = 0;
        }
    }
    for (int i = r->ndim ? n - 1 : -1; i >= 0; i--) {
        int dim = r->ndim - n + i;
        int64_t size = dim >= 0 ? r->sizes[dim] : 1;
        int64_t stride = dim >= 0 ? r->strides[dim] : (i + 1 < n ? sz[i + 1] * st[i + 1] : 1);
        int64_t target = want[i];
        if (target == -1) {
            if (dim < 0) return 0;
            target = size;
        }
        if (target < 0) return 0;
        if (size != target) {
            if (size != 1) return 0;
            size = target;
            stride = 0;
        }
        sz[i] = size;
        st[i] = stride;
    }
    r->ndim = n;
    memcpy(r->sizes, sz, sizeof(int64_t) * (size_t)n);
    memcpy(r->strides, st, sizeof(int64_t) * (size_t)n);
    return 1;
}

/* ATen's computeStride: the strides of shape `want` viewing r's memory; 0 when no view can. */
static int view_strides(const EmInferred *r, const int64_t *want, int n, int64_t *out) {
    int64_t numel = 1;
    for (int i = 0; i < r->ndim; i++) numel *= r->sizes[i];
    if (r->ndim == 0) {
        for (int i = 0; i < n; i++) out[i] = 1;
        return 1;
    }
    if (numel == 0) {
        if (n == r->ndim && !memcmp(want, r->sizes, sizeof(int64_t) * (size_t)n)) {
            memcpy(out, r->strides, sizeof(int64_t) * (size_t)n);
            return 1;
        }
        for (int d = n - 1; d >= 0; d--) out[d] = d == n - 1 ? 1 : (want[d + 1] > 1 ? want[d + 1] : 1) * out[d + 1];
        return 1;
    }
    int vd = n - 1;
    int64_t base = r->strides[r->ndim - 1], tn = 1, vn = 1;
    for (int td = r->ndim - 1; td >= 0; td--) {
        tn *= r->sizes[td];
        if (td == 0 || (r->sizes[td - 1] != 1 && r->strides[td - 1] != tn * base)) {
            while (vd >= 0 && (vn < tn || want[vd] == 1)) {
                out[vd] = vn * base;
                vn *= want[vd];
                vd--;
            }
            if (vn != tn) return 0;
            if (td > 0) {
                base = r->strides[td - 1];
                tn = vn = 1;
            }
        }
    }
    return vd == -1;
}

/* view / reshape: the new shape (one -1 inferred) over r's memory; reshape copies (a
 * contiguous result) where view cannot. */
static int view_reshape(EmInferred *r, EmSym **args, int nargs, int copy_ok) {
    int64_t want[64], st[64], total = 1, known = 1;
    int n = int_args(args, nargs, want, 60), infer = -1;
    if (n < 0) return 0;
    for (int i = 0; i < r->ndim; i++) total *= r->sizes[i];
    for (int i = 0; i < n; i++) {
        if (want[i] == -1) {
            if (infer >= 0) return 0;
            infer = i;
        } else if (want[i] < 0) {
            return 0;
        } else {
            known *= want[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || total % known) return 0;
        want[infer] = total / known;
    } else if (known != total) {
        return 0;
    }
    if (view_strides(r, want, n, st)) {
        memcpy(r->strides, st, sizeof(int64_t) * (size_t)n);
    } else {
        if (!copy_ok) return 0;
        r->view = 0;
        int64_t z = 1;
        for (int i = n - 1; i >= 0; i--) {
            r->strides[i] = z;
            z *= want[i] > 1 ? want[i] : 1;
        }
    }
    r->ndim = n;
    memcpy(r->sizes, want, sizeof(int64_t) * (size_t)n);
    return 1;
}

int em_infer_view(EmTracer *T, int rule, EmSym **args, int nargs, PyObject *kwnames, EmInferred *r) {
    if (kwnames || nargs < 1 || args[0]->kind != SYM_TENSOR) return 0;
    const EmNode *x = &T->G->nodes.data[args[0]->ref];
    if (x->vkind != EMV_TENSOR || x->dtype < 0 || x->ndim > 60) return 0;
    copy_dims(r, T->G, x);
    r->view = 1;
    int ok;
    switch (rule) {
        case SR_VIEW_TRANSPOSE: ok = view_transpose(r, args, nargs); break;
        case SR_VIEW_T: ok = view_t(r, nargs); break;
        case SR_VIEW_PERMUTE: ok = view_permute(r, args, nargs); break;
        case SR_VIEW_UNSQUEEZE: ok = view_unsqueeze(r, args, nargs); break;
        case SR_VIEW_EXPAND: ok = view_expand(r, args, nargs); break;
        case SR_VIEW_VIEW: ok = view_reshape(r, args, nargs, 0); break;
        case SR_VIEW_RESHAPE: ok = view_reshape(r, args, nargs, 1); break;
        default: ok = 0;
    }
    if (!ok) return PyErr_Occurred() ? -1 : 0;
    r->dtype = x->dtype;
    r->dev_type = x->dev_type;
    r->dev_index = x->dev_index;
    r->requires_grad = x->requires_grad; /* a view of a tensor that requires grad does, in any grad mode */
    return 1;
}

/* ---- basic indexing: x[i], x[a:b:c], x[None], x[...] and tuples of them ---- */

/* One index item applied at dim *d of r; 0 when it is not basic or out of range. */
static int index_item(EmInferred *r, PyObject *k, int *d) {
    if (k == Py_None) return unsqueeze_at(r, *d) ? (++*d, 1) : 0;
    if (PyLong_CheckExact(k)) {
        int overflow = 0;
        int64_t i = PyLong_AsLongLongAndOverflow(k, &overflow);
        if (overflow || *d >= r->ndim) return 0;
        int64_t n = r->sizes[*d];
        if (i < -n || i >= n) return 0; /* IndexError: the meta run raises it */
        memmove(r->sizes + *d, r->sizes + *d + 1, sizeof(int64_t) * (size_t)(r->ndim - *d - 1));
        memmove(r->strides + *d, r->strides + *d + 1, sizeof(int64_t) * (size_t)(r->ndim - *d - 1));
        r->ndim--;
        return 1;
    }
    if (PySlice_Check(k)) {
        Py_ssize_t start, stop, step;
        /* a bound whose __index__ raises: not inferred, the meta run raises it */
        if (*d >= r->ndim || PySlice_Unpack(k, &start, &stop, &step) < 0) return PyErr_Clear(), 0;
        if (step <= 0) return 0; /* torch refuses negative steps: the meta run raises */
        Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)r->sizes[*d], &start, &stop, step);
        r->sizes[*d] = len;
        r->strides[*d] *= step;
        ++*d;
        return 1;
    }
    return 0;
}

static int index_items(EmInferred *r, PyObject **items, Py_ssize_t n) {
    int consumed = 0, ells = 0, orig = r->ndim, d = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_Ellipsis) ells++;
        else if (items[i] != Py_None) consumed++;
    }
    if (ells > 1 || consumed > orig) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_Ellipsis) d += orig - consumed; /* the dims no other item takes */
        else if (!index_item(r, items[i], &d)) return 0;
    }
    return 1;
}

int em_infer_getitem(EmTracer *T, EmSym *x, EmSym *key, EmInferred *r) {
    PyObject *items[64];
    Py_ssize_t n;
    if (x->kind != SYM_TENSOR) return 0;
    const EmNode *xn = &T->G->nodes.data[x->ref];
    if (xn->vkind != EMV_TENSOR || xn->dtype < 0 || xn->ndim > 60) return 0;
    if (key->kind == SYM_CONST && PyTuple_CheckExact(key->obj)) {
        n = PyTuple_GET_SIZE(key->obj);
        if (n > 64) return 0;
        for (Py_ssize_t i = 0; i < n; i++) items[i] = PyTuple_GET_ITEM(key->obj, i);
    } else if (key->kind == SYM_CONST) {
        n = 1;
        items[0] = key->obj;
    } else if (key->kind == SYM_TUPLE && !key->seq_type && key->items.len <= 64) {
        n = key->items.len;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (key->items.data[i]->kind != SYM_CONST) return 0;
            items[i] = key->items.data[i]->obj;
        }
    } else {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] != Py_None && items[i] != Py_Ellipsis && !PyLong_CheckExact(items[i]) && !PySlice_Check(items[i]))
            return 0;
    copy_dims(r, T->G, xn);
    if (!index_items(r, items, n)) return PyErr_Occurred() ? -1 : 0;
    r->view = 1;
    r->dtype = xn->dtype;
    r->dev_type = xn->dev_type;
    r->dev_index = xn->dev_index;
    r->requires_grad = xn->requires_grad; /* a view: in any grad mode */
    return 1;
}
