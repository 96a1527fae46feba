/* em_set.h: an exact copy of a set: its hash table copied slot by slot (dummies too), so the
 * copy iterates in the same order as the original, which set(s) and s.copy() do not promise
 * (they rebuild the table at the size its item count asks for). CPython's set layout
 * (cpython/setobject.h), the same in 3.11 and 3.12.
 */
#ifndef EM_SET_H
#define EM_SET_H

#include <Python.h>
#include <string.h>

/* A new set with src's table (src an exact set). NULL with an exception. */
static inline PyObject *em_set_clone(PyObject *src) {
    PySetObject *s = (PySetObject *)src, *r = (PySetObject *)PySet_New(NULL);
    if (!r) return NULL;
    if (s->mask != r->mask) {
        setentry *t = PyMem_New(setentry, (size_t)s->mask + 1);
        if (!t) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
        memset(t, 0, sizeof(setentry) * ((size_t)s->mask + 1));
        r->table = t;
        r->mask = s->mask;
    }
    for (Py_ssize_t i = 0; i <= s->mask; i++) {
        PyObject *k = s->table[i].key;
        if (!k) continue;
        r->table[i].key = Py_NewRef(k);
        r->table[i].hash = s->table[i].hash;
    }
    r->fill = s->fill;
    r->used = s->used;
    r->finger = s->finger;
    return (PyObject *)r;
}

#endif
