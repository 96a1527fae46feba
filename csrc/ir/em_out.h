/* em_out.h: how a compiled frame's return value (or the values a graph break hands on) is
 * rebuilt from the graph's outputs: the output program the tracer writes (trace/) and the
 * runtime reads (runtime/), a tree of EmOut entries in prefix order.
 */
#ifndef EM_OUT_H
#define EM_OUT_H

#include <Python.h>
#include <stdint.h>

typedef enum {
    OUT_VALUE,
    OUT_CONST,
    OUT_SLOT,
    OUT_TUPLE,
    OUT_LIST,
    OUT_DICT,
    OUT_ITER,
    OUT_REENTER,
    OUT_SAME, /* v: position of an earlier TUPLE/LIST/DICT/ITER/CELL/FUNC entry: the very object built there */
    OUT_BOUND, /* two children, self and the function: function.__get__(self) */
    OUT_LAST,  /* v children built in order; the value is the last (effects before a value) */
    OUT_SETATTR, /* object.__setattr__(child 0, obj, child 1), child 0 an exact dict (a
                  * module's globals): child 0[obj] = child 1; the value is None */
    OUT_NEWOBJ, /* obj = (class, dict item setter or None): an instance made with the class's
                 * builtin __new__; children: its attribute dict, then its dict items if any */
    OUT_SETCOPY, /* obj = a set of constants made while tracing: an exact copy of it (its
                  * iteration order too) per call */
    OUT_SETITEMS, /* child 0 (a list or dict from the frame) given the items of child 1 (a new
                   * list or dict), in place; the value is None */
    OUT_CELL,     /* a new cell: v = 1, holding its child's value; v = 0, empty */
    OUT_CALL,     /* obj(*children): weakref.ref(o) made while tracing, an ember._rules helper's result */
    OUT_FUNC,     /* obj = a function made while tracing: a new function like it (code, globals,
                   * names, defaults, __dict__ copied) whose closure is its first children (cells,
                   * one per free variable of its code); v one more: the last child is a tuple,
                   * its defaults */
    OUT_DELATTR,  /* `del child 0.obj` replayed: obj removed from child 0's __dict__ if there; None */
    OUT_GEN       /* a suspended generator made again: obj the trace's spec (code, unit of its yield,
                   * live local slots, stack NULL flags, line), which the driver replaces with the
                   * resume code (em_emit_gen_resume); children: the generator function, the own
                   * cells of its code, then the resume code's arguments; a new generator of that
                   * code (the function's globals, names and free variables), run to its first
                   * yield */
} EmOutKind;
typedef struct {
    uint8_t kind;
    int32_t v;     /* VALUE: graph output index; SLOT: guard slot; seqs: child count */
    PyObject *obj; /* CONST value; TUPLE type (namedtuple) or NULL; DICT keys tuple; REENTER
                    * the context's spec: a new one is made and entered, its __exit__ is the
                    * value (all owned) */
} EmOut;

#endif
