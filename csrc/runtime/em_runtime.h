/* em_runtime.h: running a compiled graph. An EmCompiled owns a captured graph, the output
 * tree and the guard slots its inputs are read from. With the `eager` backend em_rt_call runs
 * the graph by calling the torch ops from C, one node at a time, releasing each value after
 * its last use (em_rt_eager.c); with a Python backend (any torch.compile backend) the graph
 * is exported to torch.fx and compiled at its first call, and later calls run the compiled
 * callable (em_rt_python.c). Either way the output tree is built from the graph's outputs.
 *
 * Returns: em_rt_call a new reference to the frame's value, or NULL with an exception;
 * em_rt_compile NULL with an exception; other ints 0, or -1 with an exception (em_rt_py_run
 * also 1: not run by the backend, the C executor runs this call).
 */
#ifndef EM_RUNTIME_H
#define EM_RUNTIME_H

#include <Python.h>

#include "../ir/em_ir.h"
#include "../ir/em_out.h"

typedef struct EmCompiled {
    EmGraph G;
    EmOut *out; /* owned, prefix order */
    int32_t nout;
    int32_t *input_slots; /* guard slot of graph input i */
    int32_t *frees;       /* per node: refs whose last use it is, -1 terminated runs */
    int32_t *free_at;     /* per node: first index in frees */
    uint8_t *is_output;
    int has_same;         /* the output tree has OUT_SAME entries (needs a memo per call) */
    int32_t *pins;        /* owned or NULL: the slots OUT_SLOT reads when the tree has effects (a
                           * write-back may drop the last reference a borrowed slot had): held
                           * while the tree is built */
    int32_t npins;
    PyObject *on_error;   /* owned or NULL: called when the graph fails (restores global state) */
    /* Python backend (backend > 0, index in em_state.backends) */
    int32_t backend;
    int py_state;         /* EmPyState */
    PyObject *py_fn;      /* owned: the backend's compiled callable (EMR_PY_READY) */
    PyObject *py_info;    /* owned str: the FX code given to the backend, or why the graph
                           * runs on the C executor instead (EMR_PY_HERE) */
    PyObject *where;      /* owned str: the frame, for messages: "qualname (file:line)" */
    int32_t *fx_out;      /* refs of the values the compiled callable returns, in order */
    int32_t n_fx_out;
    int end_grad;         /* grad mode the graph leaves behind, -1 = as it found it */
    double backend_s;     /* wall time of the export and the backend's compile */
    PyObject *in_syms;    /* owned or NULL: the inputs' symbols (em_trace_input_syms), exported */
    int32_t *sym_args;    /* owned: (input, dim) pairs, the sizes passed before the inputs */
    int32_t n_sym_args;
    PyObject *py_check;   /* owned or NULL: select(sizes, inputs) -> the compiled callable for these
                           * sizes (ember/backends/fx.py _Variants), None: run on the C executor */
    int32_t *alias_want;  /* owned or NULL: when py_check only asks that the inputs share memory as
                           * these groups say (_Variants.alias_want), a call whose groups read in C
                           * match takes py_fn without it */
} EmCompiled;

typedef enum {
    EMR_PY_NONE = 0, /* eager backend */
    EMR_PY_PENDING,  /* Python backend, compiled at the first call */
    EMR_PY_READY,    /* compiled: py_fn runs the graph */
    EMR_PY_HERE      /* the graph cannot be exported: it runs on the C executor */
} EmPyState;

/* Takes G (moved: the caller's copy must not be freed), the output tree (moved) and input
 * slots (copied). Returns NULL with an exception set on failure (G and out are freed). */
EmCompiled *em_rt_compile(EmGraph *G, EmOut *out, int32_t nout, const int32_t *input_slots, int32_t nin);
void em_rt_free(EmCompiled *C);
/* Runs the graph on the guard slots of a passed guard program; returns the frame's return
 * value (new reference) or NULL with an exception set; *failed_at is then the index of the
 * graph's node that raised (the node count when the graph ran on a Python backend) when the
 * exception came from the graph's ops (no output, store or other side effect of the output tree
 * ran), else -1. */
EM_NEW PyObject *em_rt_call(EmCompiled *C, PyObject *const *slots, int32_t *failed_at);
/* Makes C run on Python backend number `backend` (> 0); where names the frame (borrowed).
 * 0 or -1 with an exception. */
int em_rt_use_backend(EmCompiled *C, int32_t backend, PyObject *EM_BORROWED where);
/* Entry information for ember._C.entries: {"backend", "backend_note", "fx_code", "backend_s"}. */
EM_NEW PyObject *em_rt_info(void *compiled);

/* ---- internal to runtime/ (em_rt_python.c) ---- */
/* The graph as plain Python data for ember/backends/fx.py: (nodes, outputs), one tuple
 * (op, target, args, kwnames, vkind, meta) per node; arguments are (0, ref), (1, constant),
 * (2, tuple of arguments) or (3, list of arguments). */
EM_NEW PyObject *em_rt_export(const EmCompiled *C);
/* Python backend path of em_rt_call: compiles at the first call (which may decide the graph
 * runs here), else runs the compiled callable and stores its outputs in vals (new
 * references, indexed by node). 0 done, 1 run the graph here (not exportable, or this call
 * passes one tensor as two inputs), -1 error. */
int em_rt_py_run(EmCompiled *C, PyObject *const *slots, PyObject **vals, int *ops_raised);

#endif
