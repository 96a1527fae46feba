/* em_cache.c: the co_extra cache. Extras are created on first interception, registered so
 * that reset can drop them, and freed with the code object by CPython (extra free hook).
 */
#include "em_cache.h"

#include "../pyver/em_pyver.h"
#include "../pyver/em_state.h"

void em_entry_free(EmEntry *e) {
    if (!e) return;
    em_guard_free(&e->P);
    if (e->compiled && e->free_compiled) e->free_compiled(e->compiled);
    free(e->graph_text);
    free(e->guard_text);
    free(e->break_reason);
    Py_XDECREF(e->tcode);
    Py_XDECREF(e->tfunc);
    Py_XDECREF(e->tfunc_closure);
    free(e);
}

static void extra_free(void *p) {
    EmExtra *x = p;
    if (!x) return;
    EmEntry *e = x->head;
    while (e) {
        EmEntry *next = e->next;
        em_entry_free(e);
        e = next;
    }
    Py_XDECREF(x->reason);
    free(x);
}

int em_cache_init(void) {
    em_state.extra_index = em_code_extra_index(extra_free);
    if (em_state.extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "ember: no code extra slot available");
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

/* Codes with an extra, so reset can find them: strong references until reset. */
static PyObject *registry(void) {
    if (!em_state.code_registry) em_state.code_registry = PyList_New(0);
    return em_state.code_registry;
}

EmExtra *em_cache_get_or_new(PyCodeObject *co) {
    EmExtra *x = em_cache_get(co);
    if (x) return x;
    x = calloc(1, sizeof(EmExtra));
    PyObject *reg = registry();
    if (!x || !reg) {
        free(x);
        PyErr_NoMemory();
        return NULL;
    }
    if (PyList_Append(reg, (PyObject *)co) < 0 || em_code_set_extra((PyObject *)co, em_state.extra_index, x) < 0) {
        free(x);
        return NULL;
    }
    return x;
}

void em_cache_push(EmExtra *x, EmEntry *e) {
    e->next = x->head;
    x->head = e;
    x->n_entries++;
}

void em_cache_move_front(EmExtra *x, EmEntry *prev, EmEntry *e) {
    if (!prev) return;
    prev->next = e->next;
    e->next = x->head;
    x->head = e;
}

void em_cache_reset(void) {
    PyObject *reg = registry();
    if (!reg) return;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(reg); i++) {
        PyObject *co = PyList_GET_ITEM(reg, i);
        /* CPython calls extra_free on the value it replaces */
        if (em_code_set_extra(co, em_state.extra_index, NULL) < 0) PyErr_Clear();
    }
    PyList_SetSlice(reg, 0, PyList_GET_SIZE(reg), NULL);
    if (em_state.resume_codes) PyDict_Clear(em_state.resume_codes);
}

EM_NEW PyObject *em_cache_entries(PyCodeObject *co) {
    PyObject *lst = PyList_New(0);
    EmExtra *x = em_cache_get(co);
    for (EmEntry *e = x ? x->head : NULL; lst && e; e = e->next) {
        PyObject *t = Py_BuildValue("{s:s,s:s,s:i,s:i,s:L,s:s,s:d,s:O}", "graph", e->graph_text ? e->graph_text : "",
                                    "guards", e->guard_text ? e->guard_text : "", "ops", e->op_count,
                                    "inputs", e->ninputs, "hits", e->hits, "break",
                                    e->break_reason ? e->break_reason : "", "compile_s", e->compile_s, "code",
                                    e->tcode ? e->tcode : Py_None);
        PyObject *info = t && e->compiled && e->info_compiled ? e->info_compiled(e->compiled) : NULL;
        if (t && e->compiled && e->info_compiled && (!info || PyDict_Update(t, info))) Py_CLEAR(t);
        Py_XDECREF(info);
        if (!t || PyList_Append(lst, t)) Py_CLEAR(lst);
        Py_XDECREF(t);
    }
    return lst;
}
