/* em_runtime.h: the `eager` backend. An EmCompiled owns a captured graph, the output tree
 * and the guard slots its inputs are read from; em_rt_call runs the graph by calling the
 * torch ops from C, one node at a time, releasing each value after its last use.
 */
#ifndef EM_RUNTIME_H
#define EM_RUNTIME_H

#include <Python.h>

#include "../ir/em_ir.h"
#include "../trace/em_trace.h"

typedef struct EmCompiled {
    EmGraph G;
    EmOut *out; /* owned, prefix order */
    int32_t nout;
    int32_t *input_slots; /* guard slot of graph input i */
    int32_t *frees;       /* per node: refs whose last use it is, -1 terminated runs */
    int32_t *free_at;     /* per node: first index in frees */
    uint8_t *is_output;
    int has_same;         /* the output tree has OUT_SAME entries (needs a memo per call) */
    PyObject *on_error;   /* owned or NULL: called when the graph fails (restores global state) */
} EmCompiled;

/* Takes G (moved: the caller's copy must not be freed), the output tree (moved) and input
 * slots (copied). Returns NULL with an exception set on failure (G and out are freed). */
EmCompiled *em_rt_compile(EmGraph *G, EmOut *out, int32_t nout, const int32_t *input_slots, int32_t nin);
void em_rt_free(EmCompiled *C);
/* Runs the graph on the guard slots of a passed guard program; returns the frame's return
 * value (new reference) or NULL with an exception set. */
EM_NEW PyObject *em_rt_call(EmCompiled *C, PyObject *const *slots);

#endif
