/* em_guard_tensor.c: cheap reads of tensor metadata for TENSOR_MATCH guards, and the
 * global-state snapshot. At import we locate the TensorImpl pointer inside torch's tensor
 * object and the size/stride/dtype/device/dispatch-key fields inside TensorImpl by probing
 * tensors whose metadata we know, then verify on more tensors. If any step disagrees, the
 * Python attribute path is used instead (slower, same answers).
 */
#include <dlfcn.h>

#include "em_guard.h"

#include "../ir/em_ir.h"
#include "../pyver/em_pyver.h"
#include "../pyver/em_state.h"

/* TensorImpl prefix the probe may scan: the dispatch-key word it ends at lies at bytes 168-175
 * under torch 2.14 and 176-183 under torch 2.11 (one more word before the sizes), and
 * TensorImpl has fields past it */
#define PROBE_IMPL_BYTES 192

static PyObject *call_torch(const char *expr) {
    PyObject *g = PyDict_New(), *r = NULL;
    if (!g) return NULL;
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch && PyDict_SetItemString(g, "torch", torch) == 0) r = PyRun_String(expr, Py_eval_input, g, g);
    Py_XDECREF(torch);
    Py_DECREF(g);
    return r;
}

static int64_t impl_word(const char *impl, Py_ssize_t off) {
    int64_t v;
    memcpy(&v, impl + off, sizeof(v));
    return v;
}

static const char *impl_of(PyObject *t) {
    const char *p;
    memcpy(&p, (const char *)t + em_state.impl_off, sizeof(p));
    return p;
}

/* Sizes and strides live in c10::SizesAndStrides: a size word, then either inline storage
 * (ss_inline sizes followed by ss_inline strides) or a pointer to sizes then strides. */
static int impl_dims(const char *impl, int64_t *ndim, const int64_t **sizes, const int64_t **strides) {
    int64_t n = impl_word(impl, em_state.ss_off);
    if (n < 0 || n > 64) return -1;
    *ndim = n;
    if (n <= em_state.ss_inline) {
        *sizes = (const int64_t *)(impl + em_state.ss_off + 8);
        *strides = *sizes + em_state.ss_inline;
    } else {
        const int64_t *ext;
        memcpy(&ext, impl + em_state.ss_off + 8, sizeof(ext));
        *sizes = ext;
        *strides = ext + n;
    }
    return 0;
}

static int read_py(PyObject *t, EmTensorSpec *s) {
    memset(s, 0, sizeof(*s));
    s->dtype = s->dev_type = s->dev_index = -1;
    PyObject *rg = NULL, *stride = NULL;
    s->type = (PyTypeObject *)Py_NewRef(Py_TYPE(t));
    if (!(s->py_dtype = PyObject_GetAttrString(t, "dtype"))) goto error;
    if (!(s->py_device = PyObject_GetAttrString(t, "device"))) goto error;
    PyObject *shape = PyObject_GetAttrString(t, "shape");
    if (!shape) goto error;
    s->py_sizes = PySequence_Tuple(shape);
    Py_DECREF(shape);
    if (!s->py_sizes) goto error;
    if (!(stride = PyObject_CallMethod(t, "stride", NULL))) goto error;
    s->py_strides = PySequence_Tuple(stride);
    Py_CLEAR(stride);
    if (!s->py_strides) goto error;
    if (!(rg = PyObject_GetAttrString(t, "requires_grad"))) goto error;
    s->requires_grad = PyObject_IsTrue(rg);
    Py_CLEAR(rg);
    s->ndim = (int)PyTuple_GET_SIZE(s->py_sizes);
    s->sizes = PyMem_Calloc((size_t)s->ndim + 1, sizeof(int64_t));
    s->strides = PyMem_Calloc((size_t)s->ndim + 1, sizeof(int64_t));
    if (!s->sizes || !s->strides) {
        PyErr_NoMemory();
        goto error;
    }
    for (int i = 0; i < s->ndim; i++) {
        s->sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(s->py_sizes, i));
        s->strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(s->py_strides, i));
    }
    if (PyErr_Occurred()) goto error;
    return 0; /* dtype/device numbers and keys stay -1/0: only direct reads fill them */
error:
    Py_XDECREF(stride);
    Py_XDECREF(rg);
    em_guard_tensor_spec_free(s);
    return -1;
}

/* dtype, device and dispatch keys from the probed layout. */
static void read_scalars(const char *impl, EmTensorSpec *s) {
    uint16_t dt;
    memcpy(&dt, impl + em_state.dtype_off, 2);
    s->dtype = dt;
    s->dev_type = (int8_t)impl[em_state.dev_off];
    s->dev_index = (int8_t)impl[em_state.dev_off + 1];
    memcpy(&s->keyset, impl + em_state.keyset_off, 8);
}

static int read_fast_fields(PyObject *t, EmTensorSpec *s) {
    const char *impl = impl_of(t);
    if (!impl) return -1;
    int64_t n;
    const int64_t *sz, *st;
    if (impl_dims(impl, &n, &sz, &st)) return -1;
    read_scalars(impl, s);
    if (s->ndim != (int)n) return -1;
    for (int i = 0; i < s->ndim; i++)
        if (s->sizes[i] != sz[i] || s->strides[i] != st[i]) return -1;
    return 0;
}

static int rg_of(PyObject *t);

/* Dispatch-key sets whose tensors read the same through the probed layout as through their
 * Python attributes (checked once per key set on an exact Tensor or Parameter). A key set
 * not here (sparse, nested, subclass, functional) takes the Python path at every read. */
static int keyset_verified(uint64_t ks) {
    for (int i = 0; i < em_state.n_verified_keys; i++)
        if (em_state.verified_keys[i] == ks) return 1;
    return 0;
}

static int plain_type(PyObject *t) { return Py_TYPE(t) == em_state.tensor_type || Py_TYPE(t) == em_state.param_type; }

/* Every field from the probed layout; the py_* fields stay NULL. */
static int read_direct(PyObject *t, const char *impl, EmTensorSpec *s) {
    int64_t n;
    const int64_t *sz, *st;
    if (impl_dims(impl, &n, &sz, &st)) return 1;
    memset(s, 0, sizeof(*s));
    s->ndim = (int)n;
    s->sizes = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    s->strides = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    if (!s->sizes || !s->strides) {
        em_guard_tensor_spec_free(s);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(s->sizes, sz, sizeof(int64_t) * (size_t)n);
    memcpy(s->strides, st, sizeof(int64_t) * (size_t)n);
    read_scalars(impl, s);
    s->type = (PyTypeObject *)Py_NewRef(Py_TYPE(t));
    if ((s->requires_grad = rg_of(t)) < 0) {
        em_guard_tensor_spec_free(s);
        return -1;
    }
    return 0;
}

int em_guard_tensor_read(PyObject *t, EmTensorSpec *s) {
    if (em_state.probe_ok && plain_type(t)) {
        const char *impl = impl_of(t);
        uint64_t ks;
        if (impl) memcpy(&ks, impl + em_state.keyset_off, 8);
        if (impl && keyset_verified(ks)) {
            int r = read_direct(t, impl, s);
            if (r <= 0) return r;
        }
    }
    if (read_py(t, s)) return -1;
    if (em_state.probe_ok && read_fast_fields(t, s)) {
        em_guard_tensor_spec_free(s);
        PyErr_SetString(PyExc_RuntimeError, "ember: tensor layout probe disagrees with torch");
        return -1;
    }
    if (em_state.probe_ok && plain_type(t) && !keyset_verified(s->keyset) &&
        em_state.n_verified_keys < EM_VERIFIED_KEYS)
        em_state.verified_keys[em_state.n_verified_keys++] = s->keyset;
    return 0;
}

static EM_NEW PyObject *dims_tuple(int n, const int64_t *v) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

static EM_NEW PyObject *dims_changed(const char *name, const char *what, int n, const int64_t *now, int en,
                                     const int64_t *expected) {
    PyObject *a = dims_tuple(n, now), *b = a ? dims_tuple(en, expected) : NULL;
    PyObject *res = b ? PyUnicode_FromFormat("%s %s is %R, expected %R", name, what, a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return res;
}

static int dims_match_dyn(const EmTensorSpec *s, const int64_t *sz, const int64_t *st);

/* Why sizes/strides fail a spec with dynamic dimensions. */
static EM_NEW PyObject *dyn_changed(const char *name, const EmTensorSpec *cur, const EmTensorSpec *s) {
    for (int i = 0; i < s->ndim; i++) {
        if ((s->dyn >> i) & 1 && cur->sizes[i] < 1)
            return PyUnicode_FromFormat("%s size(%d) is 0, a dynamic dimension takes sizes >= 1 (0 is specialized)",
                                        name, i);
        if (!((s->dyn >> i) & 1) && cur->sizes[i] != s->sizes[i])
            return PyUnicode_FromFormat("%s size(%d) is %lld, expected %lld", name, i, (long long)cur->sizes[i],
                                        (long long)s->sizes[i]);
    }
    return dims_changed(name, s->order ? "stride (not dense in the traced order)" : "stride", cur->ndim, cur->strides,
                        s->ndim, s->strides);
}

EM_NEW PyObject *em_guard_tensor_why(const char *name, PyObject *v, const EmTensorSpec *s) {
    EmTensorSpec cur;
    if (em_guard_tensor_read(v, &cur)) return NULL;
    PyObject *res;
    int num = cur.dtype >= 0 && s->dtype >= 0; /* both read through the probed layout */
    int dev_eq = num ? cur.dev_type == s->dev_type && cur.dev_index == s->dev_index
                     : PyObject_RichCompareBool(cur.py_device, s->py_device, Py_EQ) == 1;
    if (num ? cur.dtype != s->dtype : cur.py_dtype != s->py_dtype)
        res = num ? PyUnicode_FromFormat("%s dtype is torch.%s, expected torch.%s", name,
                                         em_dtype_torch_name(cur.dtype), em_dtype_torch_name(s->dtype))
                  : PyUnicode_FromFormat("%s dtype is %R, expected %R", name, cur.py_dtype, s->py_dtype);
    else if (!dev_eq)
        res = num ? PyUnicode_FromFormat("%s device is %s:%d, expected %s:%d", name, em_dev_name(cur.dev_type),
                                         cur.dev_index, em_dev_name(s->dev_type), s->dev_index)
                  : PyUnicode_FromFormat("%s device is %R, expected %R", name, cur.py_device, s->py_device);
    else if (cur.requires_grad != s->requires_grad)
        res = PyUnicode_FromFormat("%s requires_grad is %s, expected %s", name, cur.requires_grad ? "True" : "False",
                                   s->requires_grad ? "True" : "False");
    else if (cur.ndim != s->ndim || (!s->dyn && memcmp(cur.sizes, s->sizes, sizeof(int64_t) * (size_t)s->ndim)))
        res = dims_changed(name, "size", cur.ndim, cur.sizes, s->ndim, s->sizes);
    else if (s->dyn && !dims_match_dyn(s, cur.sizes, cur.strides)) res = dyn_changed(name, &cur, s);
    else if (!s->dyn && memcmp(cur.strides, s->strides, sizeof(int64_t) * (size_t)s->ndim))
        res = dims_changed(name, "stride", cur.ndim, cur.strides, s->ndim, s->strides);
    else res = PyUnicode_FromFormat("%s dispatch keys changed (inference or layout)", name);
    em_guard_tensor_spec_free(&cur);
    return res;
}

void em_guard_tensor_spec_free(EmTensorSpec *s) {
    Py_CLEAR(s->type);
    Py_CLEAR(s->py_dtype);
    Py_CLEAR(s->py_device);
    Py_CLEAR(s->py_sizes);
    Py_CLEAR(s->py_strides);
    PyMem_Free(s->sizes);
    PyMem_Free(s->strides);
    PyMem_Free(s->order);
    s->sizes = s->strides = NULL;
    s->order = NULL;
}

static int rg_of(PyObject *t) {
    if (EM_LIKELY(em_state.tensor_rg && em_state.probe_ok && plain_type(t))) return em_state.tensor_rg(impl_of(t));
    PyObject *r = em_state.requires_grad_get ? em_state.requires_grad_get(t, NULL)
                                             : PyObject_GetAttrString(t, "requires_grad");
    if (!r) return -1;
    int v = r == Py_True;
    Py_DECREF(r);
    return v;
}

/* Sizes and strides against a spec with dynamic dimensions. */
static int dims_match_dyn(const EmTensorSpec *s, const int64_t *sz, const int64_t *st) {
    for (int i = 0; i < s->ndim; i++)
        if ((s->dyn >> i) & 1 ? sz[i] < 1 : sz[i] != s->sizes[i]) return 0;
    if (!s->order) return !memcmp(st, s->strides, sizeof(int64_t) * (size_t)s->ndim);
    int64_t expect = 1;
    for (int k = 0; k < s->ndim; k++) {
        int d = s->order[k];
        if (st[d] != expect) return 0;
        expect *= sz[d];
    }
    return 1;
}

/* The order (innermost first) in which a tensor of these sizes and strides is dense, into
 * order; 0 when it is not dense. Ties (size-1 dimensions) put the later dimension inside. */
static int dense_order(int n, const int64_t *sz, const int64_t *st, int32_t *order) {
    for (int i = 0; i < n; i++) order[i] = n - 1 - i;
    for (int i = 1; i < n; i++) /* insertion sort by stride, stable */
        for (int j = i; j > 0 && st[order[j - 1]] > st[order[j]]; j--) {
            int32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t expect = 1;
    for (int k = 0; k < n; k++) {
        if (st[order[k]] != expect) return 0;
        expect *= sz[order[k]];
    }
    return 1;
}

int em_guard_tensor_make_dyn(EmTensorSpec *s, uint64_t dyn) {
    s->dyn = dyn;
    if (!dyn) return 0;
    s->order = PyMem_Calloc((size_t)s->ndim + 1, sizeof(int32_t));
    if (!s->order) return PyErr_NoMemory(), -1;
    if (!dense_order(s->ndim, s->sizes, s->strides, s->order)) {
        PyMem_Free(s->order);
        s->order = NULL;
    }
    return 0;
}

int em_guard_tensor_size(PyObject *t, int dim, int64_t *out) {
    if (EM_LIKELY(em_state.probe_ok)) {
        const char *impl = impl_of(t);
        int64_t n;
        const int64_t *sz, *st;
        if (impl && !impl_dims(impl, &n, &sz, &st) && dim < n) {
            *out = sz[dim];
            return 0;
        }
    }
    PyObject *v = PyObject_CallMethod(t, "size", "i", dim);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

int em_guard_tensor_match(PyObject *t, const EmTensorSpec *s) {
    if (Py_TYPE(t) != s->type) return 0;
    if (EM_LIKELY(em_state.probe_ok)) {
        const char *impl = impl_of(t);
        if (!impl) return 0;
        uint16_t dt;
        uint64_t ks;
        memcpy(&dt, impl + em_state.dtype_off, 2);
        memcpy(&ks, impl + em_state.keyset_off, 8);
        if (dt != s->dtype || ks != s->keyset || (int8_t)impl[em_state.dev_off] != s->dev_type ||
            (int8_t)impl[em_state.dev_off + 1] != s->dev_index)
            return 0;
        int64_t n;
        const int64_t *sz, *st;
        if (impl_dims(impl, &n, &sz, &st) || n != s->ndim) return 0;
        if (EM_UNLIKELY(s->dyn)) {
            if (!dims_match_dyn(s, sz, st)) return 0;
        } else {
            for (int i = 0; i < s->ndim; i++)
                if (sz[i] != s->sizes[i] || st[i] != s->strides[i]) return 0;
        }
        int rg = rg_of(t);
        return rg < 0 ? -1 : rg == s->requires_grad;
    }
    EmTensorSpec cur;
    if (read_py(t, &cur)) return -1;
    int ok = cur.requires_grad == s->requires_grad && cur.ndim == s->ndim;
    if (ok && s->dyn) ok = dims_match_dyn(s, cur.sizes, cur.strides);
    for (int i = 0; ok && !s->dyn && i < s->ndim; i++)
        ok = cur.sizes[i] == s->sizes[i] && cur.strides[i] == s->strides[i];
    if (ok) ok = cur.py_dtype == s->py_dtype;
    if (ok) {
        int e = PyObject_RichCompareBool(cur.py_device, s->py_device, Py_EQ);
        ok = e < 0 ? -1 : e;
    }
    em_guard_tensor_spec_free(&cur);
    return ok;
}

/* ---- probing ---- */

static int probe_layout(void) {
    PyObject *x = NULL, *cd = NULL, *lst = NULL;
    int ok = 0;
    x = call_torch("torch.empty(3, 5, 7, 11, dtype=torch.float64)");
    if (!x) goto done;
    cd = PyObject_GetAttrString(x, "_cdata");
    if (!cd) goto done;
    uintptr_t implv = (uintptr_t)PyLong_AsVoidPtr(cd);
    if (PyErr_Occurred()) goto done;
    Py_ssize_t basic = Py_TYPE(x)->tp_basicsize;
    em_state.impl_off = -1;
    for (Py_ssize_t off = sizeof(PyObject); off + 8 <= basic; off += 8) {
        uintptr_t v;
        memcpy(&v, (char *)x + off, sizeof(v));
        if (v == implv) {
            em_state.impl_off = off;
            break;
        }
    }
    if (em_state.impl_off < 0) goto done;
    const char *impl = (const char *)implv;
    /* sizes: a word 4 followed by 3, 5, 7, 11 */
    em_state.ss_off = -1;
    for (Py_ssize_t off = 8; off + 40 <= PROBE_IMPL_BYTES; off += 8) {
        if (impl_word(impl, off) == 4 && impl_word(impl, off + 8) == 3 && impl_word(impl, off + 16) == 5 &&
            impl_word(impl, off + 24) == 7 && impl_word(impl, off + 32) == 11) {
            em_state.ss_off = off;
            break;
        }
    }
    if (em_state.ss_off < 0) goto done;
    /* inline capacity: strides (385, 77, 11, 1) follow after `cap` size words */
    em_state.ss_inline = 0;
    for (int cap = 4; cap <= 8; cap++) {
        Py_ssize_t so = em_state.ss_off + 8 + 8 * cap;
        if (so + 32 <= PROBE_IMPL_BYTES && impl_word(impl, so) == 385 && impl_word(impl, so + 8) == 77 &&
            impl_word(impl, so + 16) == 11 && impl_word(impl, so + 24) == 1) {
            em_state.ss_inline = cap;
            break;
        }
    }
    if (!em_state.ss_inline) goto done;
    /* dtype: a 16-bit float64 after the dims, followed by device (cpu, index -1, has 1) */
    em_state.dtype_off = -1;
    for (Py_ssize_t off = em_state.ss_off + 8 + 16 * em_state.ss_inline; off + 5 <= PROBE_IMPL_BYTES; off += 2) {
        uint16_t d;
        memcpy(&d, impl + off, 2);
        if (d == EMDT_F64 && impl[off + 2] == EMDEV_CPU && (int8_t)impl[off + 3] == -1 && impl[off + 4] == 1) {
            em_state.dtype_off = off;
            em_state.dev_off = off + 2;
            break;
        }
    }
    if (em_state.dtype_off < 0) goto done;
    em_state.keyset_off = ((em_state.dev_off + 3) + 7) & ~(Py_ssize_t)7;
    if (em_state.keyset_off + 8 > PROBE_IMPL_BYTES) goto done;
    ok = 1;
done:
    Py_XDECREF(x);
    Py_XDECREF(cd);
    Py_XDECREF(lst);
    if (PyErr_Occurred()) PyErr_Clear();
    return ok;
}

static int64_t py_int_of(PyObject *x, const char *expr) {
    PyObject *g = PyDict_New(), *v = NULL;
    if (g && !PyDict_SetItemString(g, "x", x)) {
        PyObject *torch = PyImport_ImportModule("torch");
        if (torch && !PyDict_SetItemString(g, "torch", torch)) v = PyRun_String(expr, Py_eval_input, g, g);
        Py_XDECREF(torch);
    }
    int64_t r = v ? PyLong_AsLongLong(v) : -1;
    Py_XDECREF(v);
    Py_XDECREF(g);
    return r;
}

/* The storage fields: TensorImpl holds its StorageImpl* (torch._C._storage_address) at
 * storage_off, and the StorageImpl its data pointer at sdata_off (the first word equal to
 * untyped_storage().data_ptr(): DataPtr's data comes before its context, which the CPU
 * allocator sets to the same address). Checked on views, dtypes and a numpy array's memory. */
static void probe_storage(void) {
    static const char *cases[] = {"torch.zeros(6, 7, dtype=torch.float64)", "torch.zeros(8, dtype=torch.int16)[3:]",
                                  "torch.zeros(4, 5).t()", "torch.from_numpy(__import__('numpy').zeros(9))",
                                  "torch.nn.Parameter(torch.zeros(2, 3))"};
    em_state.storage_off = em_state.sdata_off = -1;
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        PyObject *x = call_torch(cases[i]);
        int64_t st = x ? py_int_of(x, "torch._C._storage_address(x)") : -1;
        int64_t data = x ? py_int_of(x, "x.untyped_storage().data_ptr()") : -1;
        const char *impl = x ? impl_of(x) : NULL;
        int ok = impl && st > 0 && data > 0;
        for (Py_ssize_t off = 8; ok && i == 0 && em_state.storage_off < 0 && off + 8 <= PROBE_IMPL_BYTES; off += 8)
            if (impl_word(impl, off) == st) em_state.storage_off = off;
        for (Py_ssize_t off = 8; ok && i == 0 && em_state.sdata_off < 0 && off + 8 <= 64; off += 8)
            if (impl_word((const char *)(uintptr_t)st, off) == data) em_state.sdata_off = off;
        ok = ok && em_state.storage_off >= 0 && em_state.sdata_off >= 0 &&
             impl_word(impl, em_state.storage_off) == st &&
             impl_word((const char *)(uintptr_t)st, em_state.sdata_off) == data;
        Py_XDECREF(x);
        if (!ok) {
            PyErr_Clear();
            em_state.storage_off = em_state.sdata_off = -1;
            return;
        }
    }
}

int em_guard_tensor_storage(PyObject *t, int *dev, uintptr_t *ptr) {
    if (!em_state.probe_ok || em_state.storage_off < 0 || !plain_type(t)) return 0;
    const char *impl = impl_of(t);
    uint64_t ks;
    if (!impl) return 0;
    memcpy(&ks, impl + em_state.keyset_off, 8);
    if (!keyset_verified(ks)) return 0;
    *dev = ((int)(uint8_t)impl[em_state.dev_off] << 8) | (int)(uint8_t)(impl[em_state.dev_off + 1] + 1);
    *ptr = 0;
    if ((int8_t)impl[em_state.dev_off] == EMDEV_META) return 1;
    const char *storage = (const char *)(uintptr_t)impl_word(impl, em_state.storage_off);
    if (storage) *ptr = (uintptr_t)impl_word(storage, em_state.sdata_off);
    return 1;
}

int em_guard_storage_groups(PyObject *const *items, int32_t n, int32_t *first) {
    uint64_t stack[2 * 512], *keys = n <= 512 ? stack : PyMem_Malloc(sizeof(uint64_t) * 2 * (size_t)n);
    if (!keys) return PyErr_NoMemory(), -1;
    int ok = 1;
    for (int32_t i = 0; i < n; i++) {
        int dev = 0;
        uintptr_t ptr = 0;
        if (PyObject_TypeCheck(items[i], em_state.tensor_type) && !em_guard_tensor_storage(items[i], &dev, &ptr)) {
            ok = 0;
            break;
        }
        keys[i] = ptr ? (uint64_t)dev : 0; /* no memory: alone */
        keys[n + i] = ptr;
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* the loop filled keys[0..2n) when ok */
    if (ok && em_first_same(keys, keys + n, n, first) < 0) ok = (PyErr_NoMemory(), -1);
#pragma GCC diagnostic pop
    if (keys != stack) PyMem_Free(keys);
    return ok;
}

/* Verifies the probed layout on varied tensors against the Python attributes, and that the
 * dispatch-key word tells meta and inference tensors apart from plain CPU tensors. */
static int verify_layout(void) {
    static const char *cases[] = {
        "torch.zeros(2, 3, dtype=torch.float32)",
        "torch.zeros(4, 6, dtype=torch.int64).t()",
        "torch.zeros(2, 3, 4, 5, 6, 7).permute(5, 4, 3, 2, 1, 0)",
        "torch.zeros((), dtype=torch.bool)",
        "torch.zeros(8, dtype=torch.bfloat16)[::2]",
        "torch.zeros(3, 3, device='meta', dtype=torch.float16)",
        "torch.nn.Parameter(torch.zeros(5, 1))",
        "torch.zeros(2, 2, 2, 2, 2, 0)",
    };
    static const int dtypes[] = {EMDT_F32, EMDT_I64, EMDT_F32, EMDT_BOOL, EMDT_BF16, EMDT_F16, EMDT_F32, EMDT_F32};
    static const int devs[] = {EMDEV_CPU, EMDEV_CPU, EMDEV_CPU, EMDEV_CPU, EMDEV_CPU, EMDEV_META, EMDEV_CPU, EMDEV_CPU};
    uint64_t cpu_keys = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        PyObject *t = call_torch(cases[i]);
        if (!t) return 0;
        EmTensorSpec s;
        int r = read_py(t, &s);
        if (r == 0) {
            em_state.probe_ok = 1;
            r = read_fast_fields(t, &s);
            em_state.probe_ok = 0;
            if (r == 0 && (s.dtype != dtypes[i] || s.dev_type != devs[i])) r = -1;
            if (r == 0 && i == 0) cpu_keys = s.keyset;
            if (r == 0 && devs[i] == EMDEV_META && s.keyset == cpu_keys) r = -1;
            em_guard_tensor_spec_free(&s);
        }
        Py_DECREF(t);
        if (r) {
            PyErr_Clear();
            return 0;
        }
    }
    PyObject *inf = call_torch(
        "(lambda m: (m.__enter__(), torch.zeros(2, 3), m.__exit__(None, None, None))[1])"
        "(torch.inference_mode())");
    if (!inf) {
        PyErr_Clear();
        return 0;
    }
    uint64_t ks;
    memcpy(&ks, impl_of(inf) + em_state.keyset_off, 8);
    Py_DECREF(inf);
    return ks != cpu_keys;
}

int em_guard_tensor_probe(int force_fallback) {
    PyObject *torch = PyImport_ImportModule("torch");
    if (!torch) return -1;
    PyObject *tb = PyObject_GetAttrString(torch, "Tensor");
    PyObject *param = tb ? PyObject_GetAttrString(torch, "nn") : NULL;
    PyObject *pcls = param ? PyObject_GetAttrString(param, "Parameter") : NULL;
    Py_XDECREF(param);
    Py_DECREF(torch);
    if (!pcls) {
        Py_XDECREF(tb);
        return -1;
    }
    Py_XSETREF(em_state.tensor_type, (PyTypeObject *)tb);
    Py_XSETREF(em_state.param_type, (PyTypeObject *)pcls);
    em_state.requires_grad_get = NULL;
    em_state.tensor_rg = NULL; /* verified again by em_guard_global_state_resolve */
    /* requires_grad is a getset descriptor on torch._C.TensorBase: call its getter directly */
    for (PyTypeObject *tp = em_state.tensor_type; tp; tp = tp->tp_base) {
        PyObject *d = em_type_dict(tp) ? PyDict_GetItemString(em_type_dict(tp), "requires_grad") : NULL;
        if (d && Py_IS_TYPE(d, &PyGetSetDescr_Type)) {
            em_state.requires_grad_get = ((PyGetSetDescrObject *)d)->d_getset->get;
            break;
        }
    }
    em_state.probe_ok = 0;
    em_state.n_verified_keys = 0;
    em_state.storage_off = em_state.sdata_off = -1;
    if (force_fallback) return 1;
    if (probe_layout() && verify_layout()) {
        em_state.probe_ok = 1;
        probe_storage();
        return 0;
    }
    return 1;
}

int em_guard_tensor_fast(void) { return em_state.probe_ok; }

/* ---- global state ---- */

int em_guard_global_state_set_fns(PyObject *grad, PyObject *autocast, PyObject *default_dtype) {
    Py_XSETREF(em_state.fn_grad, Py_NewRef(grad));
    Py_XSETREF(em_state.fn_autocast, Py_NewRef(autocast));
    Py_XSETREF(em_state.fn_default_dtype, Py_NewRef(default_dtype));
    if (!em_state.str_cpu) em_state.str_cpu = PyUnicode_InternFromString("cpu");
    if (!em_state.str_cuda) em_state.str_cuda = PyUnicode_InternFromString("cuda");
    return em_state.str_cpu && em_state.str_cuda ? 0 : -1;
}

static int call_bool(PyObject *fn, PyObject *arg) {
    PyObject *r = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
    if (!r) return -1;
    int v = r == Py_True;
    Py_DECREF(r);
    return v;
}

static int call_int(PyObject *fn, PyObject *arg) {
    PyObject *r = PyObject_CallOneArg(fn, arg);
    if (!r) return -1;
    long v = PyLong_AsLong(r);
    Py_DECREF(r);
    return v == -1 && PyErr_Occurred() ? -1 : (int)v;
}

typedef _Bool (*gs_bool_fn)(void);
typedef _Bool (*gs_autocast_fn)(int8_t);
typedef int8_t (*gs_autocast_dtype_fn)(int8_t);
typedef int8_t (*gs_dtype_fn)(void);

/* Whether c10's TensorImpl::requires_grad (fn) answers as the Python attribute on leaves and
 * non-leaves, parameters, detached and inference tensors. 0 with no exception when it does not
 * (or a case could not be made). */
static int rg_agrees(_Bool (*fn)(const void *)) {
    static const char *cases[] = {
        "torch.zeros(2)",
        "torch.zeros(2, requires_grad=True)",
        "torch.zeros(2, requires_grad=True) * 2",
        "(torch.zeros(2, requires_grad=True) * 2).detach()",
        "torch.zeros(2, requires_grad=True)[1:]",
        "torch.nn.Parameter(torch.zeros(2))",
        "torch.nn.Parameter(torch.zeros(2), requires_grad=False)",
        "(lambda m: (m.__enter__(), torch.zeros(2, requires_grad=True) * 1, m.__exit__(None, None, None))[1])"
        "(torch.no_grad())",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        PyObject *t = call_torch(cases[i]),
                 *r = t && em_state.requires_grad_get ? em_state.requires_grad_get(t, NULL) : NULL;
        int same = r && plain_type(t) && (r == Py_True) == fn(impl_of(t));
        Py_XDECREF(t);
        Py_XDECREF(r);
        if (!same) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

int em_guard_global_state_resolve(const char *libc10, const char *libtorch_cpu) {
    void *h1 = dlopen(libc10, RTLD_LAZY | RTLD_NOLOAD), *h2 = dlopen(libtorch_cpu, RTLD_LAZY | RTLD_NOLOAD);
    void *g = h1 ? dlsym(h1, "_ZN3c108GradMode10is_enabledEv") : NULL;
    void *d = h1 ? dlsym(h1, "_ZN3c1031get_default_dtype_as_scalartypeEv") : NULL;
    void *a = h2 ? dlsym(h2, "_ZN2at8autocast19is_autocast_enabledEN3c1010DeviceTypeE") : NULL;
    void *ad = h2 ? dlsym(h2, "_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE") : NULL;
    /* tensor checks' requires_grad reader lives in the same library (not global state) */
    void *rg = h1 ? dlsym(h1, "_ZNK3c1010TensorImpl13requires_gradEv") : NULL;
    /* the libraries stay loaded by torch; our extra references are dropped */
    if (h1) dlclose(h1);
    if (h2) dlclose(h2);
    em_state.tensor_rg = rg && em_state.probe_ok && rg_agrees((_Bool (*)(const void *))rg) ? (_Bool (*)(const void *))rg
                                                                                           : NULL;
    if (!g || !d || !a || !ad) return -1;
    em_state.gs_grad = g;
    em_state.gs_autocast = a;
    em_state.gs_autocast_dtype = ad;
    em_state.gs_dtype = d;
    return 0;
}

/* Autocast on a device type: 0 when off, else 1 + the ScalarType it casts to. */
static int autocast_code(int8_t device_type) {
    if (!((gs_autocast_fn)em_state.gs_autocast)(device_type)) return 0;
    return 1 + ((gs_autocast_dtype_fn)em_state.gs_autocast_dtype)(device_type);
}

int em_guard_global_state_read_direct(EmGlobalState *gs) {
    if (!em_state.gs_grad) {
        PyErr_SetString(PyExc_RuntimeError, "ember: direct global-state reads not resolved");
        return -1;
    }
    gs->grad = ((gs_bool_fn)em_state.gs_grad)();
    gs->autocast_cpu = autocast_code(EMDEV_CPU);
    gs->autocast_cuda = autocast_code(EMDEV_CUDA);
    gs->dtype = ((gs_dtype_fn)em_state.gs_dtype)();
    gs->default_dtype = NULL;
    return 0;
}

void em_guard_global_state_use_direct(int on) { em_state.gs_direct = on && em_state.gs_grad; }

int em_guard_global_state_read(EmGlobalState *gs) {
    if (EM_LIKELY(em_state.gs_direct)) return em_guard_global_state_read_direct(gs);
    if (!em_state.fn_grad) {
        PyErr_SetString(PyExc_RuntimeError, "ember: global-state readers not set up");
        return -1;
    }
    gs->grad = call_bool(em_state.fn_grad, NULL);
    gs->autocast_cpu = call_int(em_state.fn_autocast, em_state.str_cpu);
    gs->autocast_cuda = call_int(em_state.fn_autocast, em_state.str_cuda);
    if (gs->grad < 0 || gs->autocast_cpu < 0 || gs->autocast_cuda < 0) return -1;
    PyObject *d = PyObject_CallNoArgs(em_state.fn_default_dtype);
    if (!d) return -1;
    gs->default_dtype = d; /* dtype objects are singletons kept alive by torch */
    gs->dtype = -1;
    Py_DECREF(d);
    return 0;
}

int em_guard_global_state_capture(EmGlobalState *gs) {
    if (em_guard_global_state_read(gs)) return -1;
    PyObject *d = PyObject_CallNoArgs(em_state.fn_default_dtype);
    if (!d) return -1;
    gs->default_dtype = d;
    Py_DECREF(d);
    return 0;
}

int em_guard_global_state_equal(const EmGlobalState *a, const EmGlobalState *b) {
    if (a->grad != b->grad || a->autocast_cpu != b->autocast_cpu || a->autocast_cuda != b->autocast_cuda) return 0;
    return a->dtype >= 0 && b->dtype >= 0 ? a->dtype == b->dtype : a->default_dtype == b->default_dtype;
}
