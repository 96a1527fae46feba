/* em_driver.c: runs the stages for one frame: trace it (graph, guards, output tree),
 * verify, hand the graph to its backend (the eager C executor, or a Python backend that
 * compiles it through torch.fx at the first call), and package the result as a cache entry
 * with its deterministic dumps. When the trace stops at an instruction ember cannot capture,
 * the frame is traced again up to that instruction and compiled with a graph break: the
 * graph returns the live values, and generated code runs the instruction as plain Python
 * and continues in a resume function (emit/em_resume.c).
 */
#include "em_driver.h"

#include <time.h>

#include "../emit/em_emit.h"
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

/* EMBER_LOGS=bytecode: the frame's code and what runs instead (the log callable
 * disassembles (label, code) pairs). */
static int log_code(PyCodeObject *co, PyObject *tcode) {
    if (!em_state.log) return 0;
    PyObject *r = PyObject_CallFunction(em_state.log, "s(sO)", "bytecode", "original", (PyObject *)co);
    Py_XDECREF(r);
    if (!r) return -1;
    r = tcode ? PyObject_CallFunction(em_state.log, "s(sO)", "bytecode",
                                      "transformed (runs the graph, the "
                                      "unsupported instruction, the resume function)",
                                      tcode)
              : PyObject_CallFunction(em_state.log, "ss", "bytecode",
                                      "captured whole: no transformed bytecode (the hook runs the graph and builds "
                                      "the return value)");
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static int n_arg_slots(PyCodeObject *co) {
    return co->co_argcount + co->co_kwonlyargcount + !!(co->co_flags & CO_VARARGS) + !!(co->co_flags & CO_VARKEYWORDS);
}

/* A conditional jump on a value's truth: a break runs it, and each side continues in its
 * own resume function. */
static int is_cond_jump(int op) {
    return (em_bc_flags[op] & (EMBCF_POP_JUMP_IF | EMBCF_NONE_TEST)) == EMBCF_POP_JUMP_IF;
}

#define BREAK_OK 1
#define BREAK_NEVER 0

/* Instructions a break may run as plain Python (em_break_ops.def): anything but control
 * flow, and conditional jumps on a value. */
static int breakable_op(int op) {
    if (is_cond_jump(op)) return 1;
    if (em_bc_is_jump[op]) return 0;
    switch (op) {
#define X(name, brk, pops) \
    case EMBC_##name: return brk;
#include "em_break_ops.def"
#undef X
        default: return BREAK_OK;
    }
}

/* x reads a variable the trace found unbound (it raised UnboundLocalError or NameError there):
 * run as plain Python, it raises the same, so a break there makes progress. */
static int unbound_read(const EmTracer *T, const EmInstr *x) {
    int load = x->op == EMBC_LOAD_FAST || x->op == EMBC_LOAD_DEREF;
#ifdef EMBC_LOAD_FAST_CHECK
    load |= x->op == EMBC_LOAD_FAST_CHECK;
#endif
    return load && T->exc && T->abort_root_at == x->at && PyErr_GivenExceptionMatches(T->exc, PyExc_NameError);
}

/* Stack slots instruction (op, arg) pops when known exactly, else -1 (em_break_ops.def). */
static int consumed(int op, int arg) {
    if (is_cond_jump(op)) return 1;
    switch (op) {
#define X(name, brk, pops) \
    case EMBC_##name: return pops;
#include "em_break_ops.def"
#undef X
        default: return -1;
    }
}

/* Resume code for (co, resume point, stack depth, live locals), shared by every entry that
 * breaks there. */
static PyObject *resume_code(PyCodeObject *co, const EmBreakPlan *plan, int resume_at) {
    PyObject *live = PyTuple_New(plan->nlive), *key = NULL, *code = NULL;
    if (!live) return NULL;
    for (int i = 0; i < plan->nlive; i++) PyTuple_SET_ITEM(live, i, PyLong_FromLong(plan->live[i]));
    PyObject *nulls = PyBytes_FromStringAndSize((const char *)plan->after_null, plan->stack_after);
    PyObject *maybe = plan->maybe ? PyBytes_FromStringAndSize((const char *)plan->maybe, plan->nlive)
                                  : Py_NewRef(Py_None);
    key = nulls && maybe ? Py_BuildValue("(OiiOOOK)", co, resume_at, plan->stack_after, live, nulls, maybe,
                                         (unsigned long long)plan->priv)
                         : NULL;
    Py_XDECREF(nulls);
    Py_XDECREF(maybe);
    Py_DECREF(live);
    if (!key) return NULL;
    code = PyDict_GetItemWithError(em_state.resume_codes, key);
    if (code) {
        Py_INCREF(code);
    } else if (!PyErr_Occurred()) {
        code = em_emit_resume(co, plan, resume_at);
        if (code && PyDict_SetItem(em_state.resume_codes, key, code)) Py_CLEAR(code);
    }
    Py_DECREF(key);
    return code;
}

/* Resume code for X raising inside a try block: it continues at the block's handler with the
 * stack below the block, a lasti (when the handler takes one) and the exception. */
static PyObject *exc_resume_code(PyCodeObject *co, const EmBreakPlan *plan) {
    EmBreakPlan e = *plan;
    e.stack_after = plan->try_.depth + !!plan->try_.lasti + 1;
    if (plan->try_.depth > plan->nstack || !(e.after_null = calloc((size_t)e.stack_after + 1, 1))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: a try block deeper than the stack");
        return NULL;
    }
    for (int t = 0; t < plan->try_.depth; t++) e.after_null[t] = plan->stack_val[t] < 0;
    PyObject *r = resume_code(co, &e, plan->try_.handler);
    free(e.after_null);
    return r;
}

/* A loop that runs as plain Python at a break passes the resume functions the locals the code
 * after it reads (live, filtered to those), as the loop leaves them, and, inside a try block,
 * those the block's handler reads (an exception raised in the loop continues there): each
 * flagged in *maybe when it may be unbound there (the loop deletes it, or first assigns it while
 * it was unbound at the loop's start). */
static EmStatus region_locals(EmTracer *T, PyCodeObject *co, const EmRegion *R, int *live, int *nlive,
                              uint8_t **maybe) {
    int n = co->co_nlocals;
    char *stored = malloc((size_t)n + 1), *deleted = malloc((size_t)n + 1), *after = malloc((size_t)n + 1);
    *maybe = calloc((size_t)n + 1, 1);
    EmStatus st = EM_OK;
    if (!stored || !deleted || !after || !*maybe) st = (PyErr_NoMemory(), EM_ERR);
    if (st == EM_OK) em_region_stores(co, R, stored, deleted, n);
    if (st == EM_OK && em_trace_locals_read(T, after, n, R->end)) st = EM_ERR;
    int depths[EM_MAX_WITH];
    EmTry t;
    if (st == EM_OK && em_exc_chain(co, R->cover, depths, EM_MAX_WITH, &t) >= 0 && t.handler >= 0) {
        char *caught = malloc((size_t)n + 1);
        if (!caught || em_trace_locals_read(T, caught, n, t.handler)) st = caught ? EM_ERR : (PyErr_NoMemory(), EM_ERR);
        for (int i = 0; st == EM_OK && i < n; i++) after[i] |= caught[i];
        free(caught);
    }
    int k = 0;
    for (int j = 0; st == EM_OK && j < *nlive; j++) /* only what the code after the loop reads */
        if (live[j] < n && after[live[j]]) {
            (*maybe)[k] = (uint8_t)deleted[live[j]];
            live[k++] = live[j];
        }
    for (int i = 0; st == EM_OK && i < n; i++) /* assigned first in the loop: bound, or not, after it */
        if (after[i] && stored[i] && !T->locals[i] && em_kind_plain_local(em_code_kind(co, i))) {
            (*maybe)[k] = 1;
            live[k++] = i;
        }
    if (st == EM_OK) *nlive = k;
    free(stored);
    free(deleted);
    free(after);
    return st;
}

/* Completes entry e for a trace that stopped at T->brk (the start of region R when R is
 * not NULL). Returns 0, or -1 with an exception. */
static int build_break(EmTracer *T, PyCodeObject *co, const EmFrameIn *in, EmEntry *e, EmStatus *st,
                       const EmRegion *R) {
    EmBreakPlan plan = {0};
    int rc = -1;
    PyObject *rcode = NULL, *resume = NULL, *rcode2 = NULL, *resume2 = NULL, *rcode3 = NULL, *resume3 = NULL;
    *st = R ? EM_OK : em_trace_detach_read_at_break(T);
    if (*st != EM_OK) goto done;
    *st = em_trace_break_outputs(T, &plan.stack_val, &plan.nstack, &plan.store_local, &plan.store_val, &plan.nstore,
                                 &plan.live, &plan.nlive, &plan.priv);
    /* code run as plain Python before the resume function (a region) that fills the frame's cell
     * or captures it: the resume function's own cell would not be that one */
    if (*st == EM_OK && R && (plan.priv & em_region_cells(co, R)))
        *st = em_trace_fail(T, EMA_VALUE, "a cell variable unbound at a break");
    if (*st != EM_OK) goto done;
    plan.at = T->brk.at;
    plan.next = T->brk.next;
    plan.op = T->brk.op;
    plan.arg = T->brk.arg;
    plan.kw_const = -1;
    plan.line = PyCode_Addr2Line(co, plan.at * 2);
    int effect = PyCompile_OpcodeStackEffect(plan.op, plan.arg);
#ifdef EMBC_PRECALL
    if (plan.op == EMBC_CALL) effect += PyCompile_OpcodeStackEffect(EMBC_PRECALL, plan.arg);
#endif
    if (T->kwnames)
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_consts); i++)
            if (PyTuple_GET_ITEM(co->co_consts, i) == T->kwnames) plan.kw_const = (int)i;
    if (R && R->loop && (*st = region_locals(T, co, R, plan.live, &plan.nlive, &plan.maybe)) != EM_OK) goto done;
    if (R) { /* a loop takes its iterator (a comprehension's, a for loop's) */
        plan.region = 1;
        plan.cover = R->cover;
        plan.next = R->end;
        plan.nspan = R->nspan;
        memcpy(plan.span, R->span, sizeof(plan.span));
        effect = -R->pops;
    }
    plan.stack_after = plan.nstack + effect;
    plan.jump_to = -1;
    if (!R && em_trace_grads_wrt_graph_value(T)) T->G->own_executor = EM_OWN_GRAD_WRT_VALUE;
    if (is_cond_jump(plan.op)) {
        plan.jump_to = em_jump_target(&T->brk);
        plan.stack_after = plan.nstack - 1;
    }
    if (plan.stack_after < 0) {
        PyErr_SetString(PyExc_SystemError, "ember: negative stack after a break");
        goto done;
    }
    /* NULLs that survive X: below a CALL's operands exactly; for other instructions any NULL
     * on the stack makes the break impossible (what X consumes is not known precisely) */
    if (!(plan.after_null = calloc((size_t)plan.stack_after + 1, 1))) {
        PyErr_NoMemory();
        goto done;
    }
    {
        int used = R ? R->pops : consumed(plan.op, plan.arg), keep = plan.nstack - (used < 0 ? 0 : used);
        for (int i = 0; i < plan.nstack; i++) {
            if (plan.stack_val[i] >= 0 || i >= keep) continue; /* a value, or consumed by X */
            if (used < 0) {
                *st = em_trace_fail(T, EMA_VALUE, "a pending call below %s", em_bc_names[plan.op]);
                goto done;
            }
            plan.after_null[i] = 1;
        }
        /* the NULL X itself pushes below a callable (a method load is emitted as attribute +
         * NULL, see em_emit_transformed) */
        int pushes_null = !R &&
                          (em_is_method_load(plan.op, plan.arg) || (plan.op == EMBC_LOAD_GLOBAL && (plan.arg & 1)));
        if (pushes_null && plan.stack_after >= 2) plan.after_null[plan.stack_after - 2] = 1;
    }
    /* a loop that only returns or raises, or a raise: no resume function */
    int no_exit = (R && R->loop && !R->exits) || (!R && (plan.op == EMBC_RAISE_VARARGS || plan.op == EMBC_RERAISE));
    if (!no_exit && !(rcode = resume_code(co, &plan, plan.next))) goto done;
    {
        int depths[EM_MAX_WITH];
        if (em_exc_chain(co, R ? R->cover : em_raise_cover(co, plan.at, plan.op), depths, EM_MAX_WITH, &plan.try_) <
            0) {
            PyErr_SetString(PyExc_SystemError, "ember: a break inside blocks it cannot leave");
            goto done;
        }
    }
    if (plan.try_.handler >= 0 && !(rcode3 = exc_resume_code(co, &plan))) goto done;
    int closure = co->co_nfreevars || co->co_ncellvars; /* the resume code then has free variables */
    resume = no_exit ? NULL : closure ? Py_NewRef(rcode) : PyFunction_New(rcode, in->globals);
    if (!resume && !no_exit) goto done;
    if (plan.jump_to >= 0) {
        if (!(rcode2 = resume_code(co, &plan, plan.jump_to))) goto done;
        resume2 = closure ? Py_NewRef(rcode2) : PyFunction_New(rcode2, in->globals);
        if (!resume2) goto done;
    }
    if (rcode3 && !(resume3 = closure ? Py_NewRef(rcode3) : PyFunction_New(rcode3, in->globals))) goto done;
    e->tcode = em_emit_transformed(co, &plan, resume, resume2, resume3);
    if (!e->tcode) goto done;
    EmExtra *tx = em_cache_get_or_new((PyCodeObject *)e->tcode);
    if (!tx) goto done;
    tx->mode = EMX_SKIP; /* the transformed code itself is never intercepted */
    e->nargs = n_arg_slots(co);
    rc = 0;
done:
    free(plan.stack_val);
    free(plan.store_local);
    free(plan.store_val);
    free(plan.live);
    free(plan.maybe);
    free(plan.after_null);
    Py_XDECREF(rcode);
    Py_XDECREF(resume);
    Py_XDECREF(rcode2);
    Py_XDECREF(resume2);
    Py_XDECREF(rcode3);
    Py_XDECREF(resume3);
    return rc;
}

/* The absences an aborted trace's refused imports depended on (EmTracer.sticky), guarded in P:
 * the entry with the break they caused fails once the import ran. 0, or -1 on error. */
static int guard_absences(EmGuardProg *P, PyObject *sticky) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sticky); i++) {
        PyObject *t = PyList_GET_ITEM(sticky, i);
        PyObject *where = PyTuple_GET_ITEM(t, 0), *key = PyTuple_GET_ITEM(t, 1);
        int in_dict = PyTuple_GET_ITEM(t, 2) == Py_True;
        int32_t slot = em_guard_const(P, where, in_dict ? "sys.modules" : "<package>");
        if (slot < 0 || em_guard_check(P, EMG_ABSENT, slot, key, in_dict)) return -1;
    }
    return 0;
}

EmDriverResult em_driver_compile(PyCodeObject *co, const EmFrameIn *in, int allow_break, int32_t backend, int dyn_mode,
                                 PyObject *dyn_state, EmEntry **out, PyObject **why) {
    EmTracer T;
    EmGraph G;
    EmStrBuf gtxt = {0}, ktxt = {0};
    EmDriverResult res = EMD_ERR;
    EmEntry *e = em_entry_new();
    PyObject *first_why = NULL, *sticky = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *out = NULL;
    *why = NULL;
    em_state.abort_item = 0;
    if (!e) return EMD_ERR;
    em_graph_init(&G, obj_retain, obj_release);
    EmStatus st = em_trace_run(&T, co, in, &G, &e->P, -1, dyn_mode, dyn_state, !allow_break);
    for (int again = 0; st != EM_ERR && T.retrace && again < 8; again++) { /* from the state it left */
        em_trace_free(&T);
        em_graph_free(&G);
        em_guard_free(&e->P);
        em_guard_init(&e->P);
        em_graph_init(&G, obj_retain, obj_release);
        st = em_trace_run(&T, co, in, &G, &e->P, -1, dyn_mode, dyn_state, !allow_break);
    }
    if (st == EM_ABORT) {
        if (!(first_why = em_trace_abort_message(&T))) goto done;
        em_state.abort_item = T.abort == EMA_ITEM_DEP;
        int at = T.abort_root_at;
        /* an exception raised by the frame that left it through its with blocks and finally
         * clauses: the break is at that raise (which runs them for real) */
        if (T.exc && T.exc == T.raise_exc && T.raise_at >= 0) at = T.raise_at;
        const char *whynot = "the instruction cannot run on its own", *cwhy = NULL;
        EmInstr x;
        EmRegion R;
        /* inside an inlined comprehension: the break runs the comprehension's loop whole */
        int region = at >= 0 ? em_comprehension_span(co, at, &R, &cwhy) : 0;
        if (region < 0) goto done;
        if (region) at = R.start;
        if (cwhy) whynot = cwhy;
        if (T.no_break) whynot = "a break there would drop state the frame holds";
        if (at >= 0) em_decode_op(T.bytes, T.n_units, at, &x);
        int possible = allow_break && at >= 0 && !cwhy && !T.no_break &&
                       (region || breakable_op(x.op) || unbound_read(&T, &x)) &&
                       em_break_possible(co, at, region ? &R : NULL, &whynot);
        /* inside a loop: the loop runs as Python; in an except clause: the try statement */
        static int (*const spans[])(PyCodeObject *, int, EmRegion *, const char **) = {em_loop_span, em_try_span};
        for (size_t k = 0; !possible && allow_break && T.abort_root_at >= 0 && !cwhy && !T.no_break && k < 2; k++) {
            const char *swhy = NULL;
            int sr = spans[k](co, T.abort_root_at, &R, &swhy);
            if (sr < 0) goto done;
            if (sr) {
                region = 1;
                at = R.start;
                possible = em_break_possible(co, at, &R, &whynot);
            } else if (swhy) {
                whynot = swhy;
            }
        }
        if (!possible) {
            *why = allow_break ? PyUnicode_FromFormat("%U (no graph break: %s)", first_why, whynot)
                               : Py_NewRef(first_why);
            res = *why ? EMD_ABORT : EMD_ERR;
            goto done;
        }
        /* trace again, stopping just before the instruction */
        sticky = Py_XNewRef(T.sticky);
        em_trace_free(&T);
        em_graph_free(&G);
        em_guard_free(&e->P);
        em_guard_init(&e->P);
        em_graph_init(&G, obj_retain, obj_release);
        st = em_trace_run(&T, co, in, &G, &e->P, at, dyn_mode, dyn_state, !allow_break);
        if (st == EM_OK && T.broke) {
            if (build_break(&T, co, in, e, &st, region ? &R : NULL)) {
                if (st == EM_ABORT) {
                    *why = PyUnicode_FromFormat("%U (no graph break: %s)", first_why, T.abort_detail);
                    res = *why ? EMD_ABORT : EMD_ERR;
                }
                goto done;
            }
            int line = PyCode_Addr2Line(co, at * 2); /* a handler's PUSH_EXC_INFO has none: the break's */
            if (line < 0) line = PyCode_Addr2Line(co, T.abort_root_at * 2);
            PyObject *where = PyUnicode_FromFormat("%U:%d: ", co->co_filename, line);
            int inner = where && !PyUnicode_Tailmatch(first_why, where, 0, PyUnicode_GET_LENGTH(where), -1);
            PyObject *reason = !where ? NULL
                               : region && R.loop
                                   ? PyUnicode_FromFormat("%Ua %s that runs as plain Python (inside it, at %U)", where,
                                                          R.is_try ? "try statement" : "loop", first_why)
                               : inner
                                   ? PyUnicode_FromFormat("%Ua call that cannot be captured whole (inside it, at %U)",
                                                          where, first_why)
                                   : Py_NewRef(first_why);
            Py_XDECREF(where);
            const char *ru = reason ? PyUnicode_AsUTF8(reason) : NULL;
            e->break_reason = ru ? strdup(ru) : NULL;
            Py_XDECREF(reason);
            if (!e->break_reason) {
                PyErr_NoMemory();
                goto done;
            }
            em_state.n_breaks++;
            if ((em_state.logs & EM_LOG_BREAKS) && log_text("breaks", e->break_reason)) goto done;
            if (sticky && guard_absences(&e->P, sticky)) goto done;
        } else if (st == EM_ABORT || (st == EM_OK && !T.broke)) {
            *why = PyUnicode_FromFormat("%U (no graph break: the replay did not reach it)", first_why);
            res = *why ? EMD_ABORT : EMD_ERR;
            goto done;
        } else {
            goto done;
        }
    } else if (st != EM_OK) {
        goto done;
    }
    if (!e->tcode && G.ninputs == 0 && em_ir_op_count(&G) == 0) {
        res = EMD_NOGRAPH;
        goto done;
    }
    if (T.sizes.nodes.len > EM_SIZE_MAX) { /* the SHAPE check evaluates into a fixed buffer */
        *why = PyUnicode_FromFormat("%U:%d: more than %d symbolic size expressions", co->co_filename,
                                    co->co_firstlineno, EM_SIZE_MAX);
        res = *why ? EMD_ABORT : EMD_ERR;
        goto done;
    }
    if (em_guard_check_shape(&e->P, &T.sizes) || em_trace_alias_guards(&T)) goto done;
    /* the guard dump (reprs of every object the guards check) is made when asked: entries()
     * or EMBER_LOGS=guards */
    if (em_ir_dump(&G, &gtxt) || ((em_state.logs & EM_LOG_GUARDS) && em_guard_dump(&e->P, &ktxt))) {
        PyErr_NoMemory();
        goto done;
    }
    e->op_count = em_ir_op_count(&G);
    e->ninputs = G.ninputs;
    if (em_trace_rerun_limit(&T, &e->rerun_limit, &e->rerun_meta) < 0) goto done;
    PyObject *in_syms = backend > 0 ? em_trace_input_syms(&T) : NULL;
    if (backend > 0 && !in_syms) goto done;
    for (int32_t i = 0; i < T.out.len; i++) /* suspended generators: their resume code */
        if (T.out.data[i].kind == OUT_GEN) {
            PyObject *gcode = em_emit_gen_resume(T.out.data[i].obj);
            if (!gcode) goto done;
            Py_SETREF(T.out.data[i].obj, gcode);
        }
    EmCompiled *C = em_rt_compile(&G, T.out.data, T.out.len, T.input_slots.data, T.input_slots.len);
    T.out.data = NULL; /* moved */
    T.out.len = T.out.cap = 0;
    if (!C) {
        Py_XDECREF(in_syms);
        goto done;
    }
    C->in_syms = in_syms;
    e->compiled = C;
    e->free_compiled = compiled_free;
    e->info_compiled = em_rt_info;
    e->backend = backend;
    if (T.state_ops && !(C->on_error = PyObject_CallOneArg(em_state.grad_restorer, T.start_grad ? Py_True : Py_False)))
        goto done;
    if (backend > 0) { /* compiled by the Python backend at the first call */
        PyObject *where = PyUnicode_FromFormat("%U (%U:%d)", co->co_qualname, co->co_filename, co->co_firstlineno);
        int bad = !where || em_rt_use_backend(C, backend, where);
        Py_XDECREF(where);
        if (bad) goto done;
    }
    e->graph_text = gtxt.s;
    e->guard_text = ktxt.s;
    gtxt.s = ktxt.s = NULL;
    if ((em_state.logs & EM_LOG_GRAPH) && log_text("graph", e->graph_text)) goto done;
    if ((em_state.logs & EM_LOG_GUARDS) && log_text("guards", e->guard_text)) goto done;
    if ((em_state.logs & EM_LOG_BYTECODE) && log_code(co, e->tcode)) goto done;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->compile_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *out = e;
    e = NULL;
    res = EMD_OK;
done:
    em_trace_free(&T);
    em_graph_free(&G);
    em_sb_free(&gtxt);
    em_sb_free(&ktxt);
    em_entry_decref(e);
    Py_XDECREF(first_why);
    Py_XDECREF(sticky);
    return res;
}

/* ---- trace only (tests: golden dumps of what the tracer produces) ---- */

static const char *const abort_names[] = {
#define X(e, fmt) #e,
#include "../trace/em_aborts.def"
#undef X
};

/* Appends repr(o) (str(o) when repr is 0) to b. 0 or -1 with an exception. */
static int put_text(EmStrBuf *b, PyObject *o, int repr) {
    PyObject *r = repr ? PyObject_Repr(o) : PyObject_Str(o);
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    int rc = u ? em_sb_puts(b, u) : -1;
    Py_XDECREF(r);
    if (!u) return -1;
    return rc ? (PyErr_NoMemory(), -1) : 0;
}

/* The output tree in prefix order, one entry a line: its position, indentation by depth, then
 * the entry (a leaf's value, a node's child count). *at: the entry to dump, advanced past its
 * subtree. 0 or -1 with an exception. */
static int out_dump(const EmTracer *T, int32_t *at, int depth, EmStrBuf *b) {
    if (*at >= T->out.len || depth > 64) {
        PyErr_SetString(PyExc_SystemError, "ember: malformed output tree");
        return -1;
    }
    int32_t pos = (*at)++;
    const EmOut *o = &T->out.data[pos];
    static const char *const kinds[] = {/* in EmOutKind's order */
                                        "value",    "const", "slot",  "tuple", "list",    "dict",   "iter",
                                        "reenter",  "same",  "bound", "last",  "setattr", "newobj", "setcopy",
                                        "setitems", "cell",  "call",  "func",  "delattr", "gen"};
    EM_ASSERT((size_t)o->kind < sizeof(kinds) / sizeof(kinds[0]), "output kind %d", o->kind);
    int nchild = 0, rc = em_sb_printf(b, "%3d: %*s%s", pos, 2 * depth, "", kinds[o->kind]);
    switch (o->kind) {
        case OUT_VALUE: rc = rc ? rc : em_sb_printf(b, " %d = %%%d", o->v, T->G->outputs.data[o->v]); break;
        case OUT_SLOT: rc = rc ? rc : em_sb_printf(b, " %s", T->P->names.data[o->v]); break;
        case OUT_SAME: rc = rc ? rc : em_sb_printf(b, " @%d", o->v); break;
        case OUT_BOUND:
        case OUT_SETATTR:
        case OUT_SETITEMS: nchild = 2; break;
        case OUT_DELATTR: nchild = 1; break;
        case OUT_CONST:
        case OUT_SETCOPY:
        case OUT_REENTER: break;
        default: nchild = o->v; rc = rc ? rc : em_sb_printf(b, " %d", o->v);
    }
    if (rc || (o->obj && em_sb_putc(b, ' '))) return PyErr_NoMemory(), -1;
    /* a namedtuple's type, an iterator's maker and a new object's class by name; constants,
     * dict keys, attribute names and context specs by repr */
    PyObject *named = NULL;
    if (o->kind == OUT_NEWOBJ) named = PyTuple_GET_ITEM(o->obj, 0);
    else if (o->kind == OUT_GEN && PyTuple_Check(o->obj) && /* the trace's spec: code and unit */
             em_sb_printf(b, "%s@%d", PyUnicode_AsUTF8(((PyCodeObject *)PyTuple_GET_ITEM(o->obj, 0))->co_qualname),
                          (int)PyLong_AsLong(PyTuple_GET_ITEM(o->obj, 1))))
        return PyErr_NoMemory(), -1;
    else if (o->kind == OUT_TUPLE || o->kind == OUT_ITER || o->kind == OUT_FUNC || o->kind == OUT_CALL) named = o->obj;
    if (named) {
        PyObject *q = PyObject_GetAttrString(named, "__qualname__");
        int bad = !q || put_text(b, q, 0);
        Py_XDECREF(q);
        if (bad) return -1;
    } else if (o->obj && o->kind != OUT_GEN && put_text(b, o->obj, 1)) {
        return -1;
    }
    if (em_sb_putc(b, '\n')) return PyErr_NoMemory(), -1;
    for (int i = 0; i < nchild; i++)
        if (out_dump(T, at, depth + 1, b)) return -1;
    return 0;
}

EM_NEW PyObject *em_driver_trace(PyCodeObject *co, const EmFrameIn *in) {
    EmTracer T;
    EmGraph G;
    EmGuardProg P;
    EmStrBuf gtxt = {0}, ktxt = {0}, otxt = {0};
    PyObject *res = NULL;
    em_graph_init(&G, obj_retain, obj_release);
    em_guard_init(&P);
    EmStatus st = em_trace_run(&T, co, in, &G, &P, -1, EM_DYN_STATIC, NULL, 0);
    if (st == EM_OK && em_guard_check_shape(&P, &T.sizes)) st = EM_ERR;
    if (st == EM_ABORT) {
        PyObject *why = em_trace_abort_message(&T);
        if (why)
            res = Py_BuildValue("{s:O,s:O,s:O,s:N,s:s}", "graph", Py_None, "guards", Py_None, "out", Py_None, "abort",
                                why, "abort_kind", abort_names[T.abort]);
    } else if (st == EM_OK) {
        int32_t at = 0;
        if (em_ir_dump(&G, &gtxt) || em_guard_dump(&P, &ktxt)) PyErr_NoMemory();
        else if (!out_dump(&T, &at, 0, &otxt))
            res = Py_BuildValue("{s:s,s:s,s:s,s:O,s:O}", "graph", gtxt.s, "guards", ktxt.s, "out", otxt.s, "abort",
                                Py_None, "abort_kind", Py_None);
    }
    em_trace_free(&T);
    em_graph_free(&G);
    em_guard_free(&P);
    em_sb_free(&gtxt);
    em_sb_free(&ktxt);
    em_sb_free(&otxt);
    return res;
}
