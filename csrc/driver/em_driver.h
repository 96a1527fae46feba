/* em_driver.h: the only module that sees every stage: trace -> IR checks -> guards ->
 * backend compile -> cache entry.
 */
#ifndef EM_DRIVER_H
#define EM_DRIVER_H

#include "../cache/em_cache.h"

typedef enum { EMD_OK, EMD_ABORT, EMD_NOGRAPH, EMD_ERR } EmDriverResult;

/* Compiles the frame. EMD_OK: *out is a new entry (not yet in the cache). EMD_ABORT:
 * *why is a new str naming file, line and reason. EMD_NOGRAPH: the frame touches no tensor
 * (run it as plain Python). EMD_ERR: exception set. allow_break = 0 (fullgraph, strict) turns
 * what would be a graph break into EMD_ABORT. backend: the number of the backend that runs the
 * graph (0 = eager, the C executor; others compile it through torch.fx at the first call). */
EmDriverResult em_driver_compile(PyCodeObject *co, const EmFrameIn *in, int allow_break, int32_t backend, int dyn_mode,
                                 PyObject *dyn_state, EmEntry **out, PyObject **why);

/* Traces the frame and stops there: nothing is compiled, cached or installed (tests compare the
 * dumps). A new dict: "graph", "guards" and "out" (the output tree), deterministic text, with
 * "abort" and "abort_kind" None when the trace completes; when it aborts, "abort" is "file:line:
 * reason", "abort_kind" the reason's name in em_aborts.def and the dumps None. NULL with an
 * exception on error. */
EM_NEW PyObject *em_driver_trace(PyCodeObject *co, const EmFrameIn *in);

#endif
