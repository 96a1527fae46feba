/* em_driver.c: runs the stages for one frame: trace it (graph, guards, output tree),
 * verify, hand the graph to the eager backend, and package the result as a cache entry
 * with its deterministic dumps; logs graph and guards when asked.
 */
#include "em_driver.h"

#include "../pyver/em_state.h"
#include "../runtime/em_runtime.h"
#include "../trace/em_trace.h"

static void obj_retain(void *o) { Py_INCREF((PyObject *)o); }
static void obj_release(void *o) { Py_DECREF((PyObject *)o); }
static void compiled_free(void *c) { em_rt_free(c); }

static int log_text(const char *channel, const char *text) {
    if (!em_state.log) return 0;
    PyObject *r = PyObject_CallFunction(em_state.log, "ss", channel, text);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

EmDriverResult em_driver_compile(PyCodeObject *co, const EmFrameIn *in, EmEntry **out, PyObject **why) {
    EmTracer T;
    EmGraph G;
    EmStrBuf gtxt = {0}, ktxt = {0};
    EmDriverResult res = EMD_ERR;
    EmEntry *e = calloc(1, sizeof(EmEntry));
    *out = NULL;
    *why = NULL;
    if (!e) {
        PyErr_NoMemory();
        return EMD_ERR;
    }
    em_guard_init(&e->P);
    em_graph_init(&G, obj_retain, obj_release);
    EmStatus st = em_trace_run(&T, co, in, &G, &e->P);
    if (st == EM_ABORT) {
        *why = em_trace_abort_message(&T);
        res = *why ? EMD_ABORT : EMD_ERR;
        goto done;
    }
    if (st != EM_OK) goto done;
    if (G.ninputs == 0 && em_ir_op_count(&G) == 0) {
        res = EMD_NOGRAPH;
        goto done;
    }
    if (em_ir_dump(&G, &gtxt) || em_guard_dump(&e->P, &ktxt)) {
        PyErr_NoMemory();
        goto done;
    }
    e->op_count = em_ir_op_count(&G);
    e->ninputs = G.ninputs;
    EmCompiled *C = em_rt_compile(&G, T.out.data, T.out.len, T.input_slots.data, T.input_slots.len);
    T.out.data = NULL; /* moved */
    T.out.len = T.out.cap = 0;
    if (!C) goto done;
    e->compiled = C;
    e->free_compiled = compiled_free;
    e->graph_text = gtxt.s;
    e->guard_text = ktxt.s;
    gtxt.s = ktxt.s = NULL;
    if ((em_state.logs & EM_LOG_GRAPH) && log_text("graph", e->graph_text)) goto done;
    if ((em_state.logs & EM_LOG_GUARDS) && log_text("guards", e->guard_text)) goto done;
    *out = e;
    e = NULL;
    res = EMD_OK;
done:
    em_trace_free(&T);
    em_graph_free(&G);
    em_sb_free(&gtxt);
    em_sb_free(&ktxt);
    em_entry_free(e);
    return res;
}
