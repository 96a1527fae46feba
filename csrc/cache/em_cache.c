/* em_cache.c: the co_extra cache. Extras are created on first interception, registered so
 * that reset can drop them, and released with the code object by CPython (extra free hook)
 * or by reset; extras and entries are freed when their last user lets go (em_cache.h).
 * Also the process-wide compile lock.
 */
#include "em_cache.h"

#include "../pyver/em_pyver.h"
#include "../pyver/em_state.h"

EmEntry *em_entry_new(void) {
    EmEntry *e = calloc(1, sizeof(EmEntry));
    if (!e) {
        PyErr_NoMemory();
        return NULL;
    }
    e->refcnt = 1;
    em_guard_init(&e->P);
    return e;
}

/* Frees what the entry owns but its successor (em_entry_decref walks on). */
static void entry_destroy(EmEntry *e) {
    if (e->watch) { /* its weak references may outlive it (weakref.getweakrefs) */
        PyCapsule_SetContext(e->watch, NULL);
        Py_CLEAR(e->watch);
    }
    em_guard_free(&e->P);
    if (e->compiled && e->free_compiled) e->free_compiled(e->compiled);
    free(e->graph_text);
    free(e->guard_text);
    free(e->break_reason);
    Py_XDECREF(e->tcode);
    Py_XDECREF(e->tfunc);
    free(e);
}

void em_entry_decref(EmEntry *e) {
    /* iterative: a long list is not freed by recursion */
    while (e && --e->refcnt == 0) {
        EmEntry *next = e->next;
        e->next = NULL;
        e->owner = NULL;
        entry_destroy(e);
        e = next;
    }
}

void em_extra_decref(EmExtra *x) {
    if (!x || --x->refcnt > 0) return;
    for (EmEntry *e = x->head; e; e = e->next) e->owner = NULL;
    EmEntry *head = x->head;
    x->head = NULL;
    PyObject *reason = x->reason, *dyn_state = x->dyn_state;
    x->reason = x->dyn_state = NULL;
    free(x);
    em_entry_decref(head); /* may run finalizers: x is gone by then */
    Py_XDECREF(reason);
    Py_XDECREF(dyn_state);
}

/* CPython's free hook of the extra slot: the code died or reset replaced the extra. */
static void extra_free(void *p) { em_extra_decref(p); }

int em_cache_init(void) {
    em_state.extra_index = em_code_extra_index(extra_free);
    if (em_state.extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "ember: no code extra slot available");
        return -1;
    }
    if (!(em_state.compile_lock = PyThread_allocate_lock())) {
        PyErr_SetString(PyExc_RuntimeError, "ember: cannot allocate the compile lock");
        return -1;
    }
    return 0;
}

EmExtra *em_cache_get(PyCodeObject *co) {
    void *p = NULL;
    if (em_code_get_extra((PyObject *)co, em_state.extra_index, &p) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return p;
}

/* Codes with an extra, so reset can find them: weak references (a code that dies takes
 * its extra along; CPython frees it), pruned of dead ones as the list doubles. */
static PyObject *registry(void) {
    if (!em_state.code_registry) em_state.code_registry = PyList_New(0);
    return em_state.code_registry;
}

static int registry_add(PyCodeObject *co) {
    PyObject *reg = registry();
    if (!reg) return -1;
    Py_ssize_t n = PyList_GET_SIZE(reg);
    if (n >= 64 && n >= 2 * em_state.registry_live) { /* prune */
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *wr = PyList_GET_ITEM(reg, i);
            if (PyWeakref_GetObject(wr) == Py_None) continue;
            Py_INCREF(wr);
            PyList_SetItem(reg, k++, wr); /* releases what was at k */
        }
        if (PyList_SetSlice(reg, k, n, NULL) < 0) return -1;
        em_state.registry_live = k;
    }
    PyObject *wr = PyWeakref_NewRef((PyObject *)co, NULL);
    int rc = wr ? PyList_Append(reg, wr) : -1;
    Py_XDECREF(wr);
    return rc;
}

EmExtra *em_cache_get_or_new(PyCodeObject *co) {
    EmExtra *x = em_cache_get(co);
    if (x) return x;
    if (!(x = calloc(1, sizeof(EmExtra)))) {
        PyErr_NoMemory();
        return NULL;
    }
    x->refcnt = 1; /* the extra slot's */
    if (registry_add(co) < 0 || em_code_set_extra((PyObject *)co, em_state.extra_index, x) < 0) {
        free(x);
        return NULL;
    }
    return x;
}

/* Weak reference callback of an entry's guarded objects (self: the entry's watch capsule). */
static PyObject *entry_died(PyObject *cap, PyObject *wr) {
    Py_INCREF(wr); /* freeing the entry drops its weak references, this one included */
    EmEntry *e = PyCapsule_GetContext(cap);
    if (e) {
        PyCapsule_SetContext(cap, NULL);
        e->P.dead = 1;
        em_cache_unlink(e);
    }
    Py_DECREF(wr);
    Py_RETURN_NONE;
}

static PyMethodDef entry_died_def = {"entry_died", entry_died, METH_O, "An object an ember cache entry guards died."};

/* Makes the entry's identity guards weak; on failure they stay strong. */
static void entry_watch(EmEntry *e) {
    PyObject *cap = PyCapsule_New(e, "ember.entry", NULL);
    PyObject *fn = cap ? PyCFunction_New(&entry_died_def, cap) : NULL;
    if (fn && PyCapsule_SetContext(cap, e) == 0) {
        e->watch = Py_NewRef(cap);
        if (em_guard_weaken(&e->P, fn) < 0) PyErr_Clear();
    }
    if (PyErr_Occurred()) PyErr_Clear();
    Py_XDECREF(fn);
    Py_XDECREF(cap);
}

void em_cache_push(EmExtra *x, EmEntry *e) {
    e->next = x->head; /* the head's reference moves to e->next */
    e->owner = x;
    x->head = e;
    x->n_entries++;
    x->gen++;
    if (!e->watch) entry_watch(e);
}

/* The link that points at e in x's list, or NULL. */
static EmEntry **link_to(EmExtra *x, EmEntry *e) {
    for (EmEntry **p = &x->head; *p; p = &(*p)->next)
        if (*p == e) return p;
    return NULL;
}

void em_cache_move_front(EmExtra *x, EmEntry *e) {
    if (x->head == e || e->owner != x) return;
    EmEntry **p = link_to(x, e);
    if (!p) return;
    *p = e->next; /* references move along with the pointers */
    e->next = x->head;
    x->head = e;
}

void em_cache_unlink(EmEntry *e) {
    EmExtra *x = e->owner;
    EmEntry **p = x ? link_to(x, e) : NULL;
    e->owner = NULL;
    if (!p) return;
    *p = e->next;
    if (e->next) em_entry_incref(e->next); /* e keeps its own link: a walker on e goes on */
    x->n_entries--;
    em_entry_decref(e); /* the list's reference */
}

void em_cache_reset(void) {
    /* a fresh registry first: what dropping the extras runs (finalizers, weakref callbacks,
     * another thread taking the GIL) may register codes, which belong to the new one */
    PyObject *reg = em_state.code_registry;
    em_state.code_registry = NULL;
    em_state.registry_live = 0;
    for (Py_ssize_t i = 0; reg && i < PyList_GET_SIZE(reg); i++) {
        PyObject *co = PyWeakref_GetObject(PyList_GET_ITEM(reg, i));
        if (co == Py_None) continue;
        Py_INCREF(co);
        /* CPython calls extra_free on the value it replaces */
        if (em_code_set_extra(co, em_state.extra_index, NULL) < 0) PyErr_Clear();
        Py_DECREF(co);
    }
    Py_XDECREF(reg);
    if (em_state.resume_codes) PyDict_Clear(em_state.resume_codes);
}

/* The entry's guard dump, made at the first ask (the driver skips it: reprs cost). A dead
 * program's weakly held objects may be gone: it is not dumped. Borrowed; NULL = no memory. */
static const char *guard_text(EmEntry *e) {
    if (e->guard_text) return e->guard_text;
    if (e->P.dead) return "  (invalidated: an object the guards checked was freed)\n";
    EmStrBuf b = {0};
    if (em_guard_dump(&e->P, &b)) {
        em_sb_free(&b);
        return NULL;
    }
    e->guard_text = b.s ? b.s : strdup("");
    return e->guard_text;
}

EM_NEW PyObject *em_cache_entries(PyCodeObject *co) {
    PyObject *lst = PyList_New(0);
    EmExtra *x = em_cache_get(co);
    EmEntry *e = x ? x->head : NULL;
    if (e) em_entry_incref(e); /* info_compiled may run Python code */
    while (lst && e) {
        const char *gt = guard_text(e);
        if (!gt) {
            Py_CLEAR(lst);
            PyErr_NoMemory();
            break;
        }
        PyObject *t = Py_BuildValue("{s:s,s:s,s:i,s:i,s:L,s:s,s:d,s:O}", "graph", e->graph_text ? e->graph_text : "",
                                    "guards", gt, "ops", e->op_count, "inputs", e->ninputs, "hits", e->hits, "break",
                                    e->break_reason ? e->break_reason : "", "compile_s", e->compile_s, "code",
                                    e->tcode ? e->tcode : Py_None);
        PyObject *info = t && e->compiled && e->info_compiled ? e->info_compiled(e->compiled) : NULL;
        if (t && e->compiled && e->info_compiled && (!info || PyDict_Update(t, info))) Py_CLEAR(t);
        Py_XDECREF(info);
        if (!t || PyList_Append(lst, t)) Py_CLEAR(lst);
        Py_XDECREF(t);
        EmEntry *next = e->next;
        if (next) em_entry_incref(next);
        em_entry_decref(e);
        e = next;
    }
    em_entry_decref(e);
    return lst;
}

void em_cache_lock(void) {
    unsigned long me = PyThread_get_thread_ident();
    if (em_state.compile_depth > 0 && em_state.compile_owner == me) {
        em_state.compile_depth++;
        return;
    }
    if (!PyThread_acquire_lock(em_state.compile_lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(em_state.compile_lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    em_state.compile_owner = me;
    em_state.compile_depth = 1;
}

void em_cache_after_fork(void) {
    /* only the forking thread exists in the child: a lock another thread held would never
     * be released there */
    int mine = em_state.compile_depth > 0 && em_state.compile_owner == PyThread_get_thread_ident();
    em_state.compile_lock = PyThread_allocate_lock(); /* the old one is left as it was */
    if (em_state.compile_lock && mine) PyThread_acquire_lock(em_state.compile_lock, WAIT_LOCK);
    if (!mine) {
        em_state.compile_owner = 0;
        em_state.compile_depth = 0;
    }
}

void em_cache_unlock(void) {
    if (--em_state.compile_depth > 0) return;
    em_state.compile_owner = 0;
    PyThread_release_lock(em_state.compile_lock);
}
