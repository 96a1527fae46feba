/* em_hook.c: the PEP 523 callback. Enabled per thread while a compiled callable runs;
 * chains to the hook that was installed before ours. A fresh frame of a code ember may
 * compile is looked up in its co_extra cache: a hit runs the compiled graph directly from
 * here (a frame captured whole needs no bytecode), a miss compiles through the driver, and
 * anything ember cannot capture runs as plain Python.
 */
#include "em_hook.h"

#include "../driver/em_driver.h"
#include "../pyver/em_pyver.h"
#include "../pyver/em_state.h"
#include "../runtime/em_runtime.h"
#include "../trace/em_trace.h"

#define HOOK_STACK_SLOTS 64

static inline int tls_flags(void) { return (int)(intptr_t)PyThread_tss_get(&em_state.tss_enabled); }
static inline void tls_set(int f) { PyThread_tss_set(&em_state.tss_enabled, (void *)(intptr_t)f); }

int em_hook_flags(void) { return tls_flags(); }

static PyObject *em_eval(PyThreadState *ts, EmPyFrame *f, int throwflag);
/* The outermost frame ember handles on a thread (its extra is held by that frame's em_eval):
 * compiles below it count against its accumulated recompile limit. */
typedef struct {
    EmExtra *x;
    PyCodeObject *co;
} EmRoot;

static PyObject *em_eval_cached(PyThreadState *ts, EmPyFrame *f, int throwflag, EmExtra *x, int flags, EmRoot *root,
                                int *handed);

/* Evaluates the frame as plain Python with this thread's hook flags restored, so that the
 * functions it calls are intercepted again. Sets *handed: the evaluator owns the frame now
 * (see em_frame_release). */
static PyObject *eval_plain(PyThreadState *ts, EmPyFrame *f, int throwflag, int flags, int *handed);

/* Hands the frame to the hook installed before ours. A hook may chain back to ours (TorchDynamo's
 * shim, installed while ember's hook is, saves ours as its previous one, and ember may then save
 * the shim): the frame handed over is remembered per thread, and em_eval evaluates a frame that
 * comes back to it with CPython's default evaluator, so that hooks chaining to each other never
 * loop. */
static inline PyObject *eval_prev(PyThreadState *ts, EmPyFrame *f, int throwflag) {
    EmEvalFn prev = (EmEvalFn)em_state.prev_eval;
    if (!prev) return _PyEval_EvalFrameDefault(ts, f, throwflag);
    void *outer = PyThread_tss_get(&em_state.tss_handed);
    PyThread_tss_set(&em_state.tss_handed, f);
    PyObject *r = prev(ts, f, throwflag);
    PyThread_tss_set(&em_state.tss_handed, outer);
    return r;
}

int em_hook_init(void) {
    if (PyThread_tss_create(&em_state.tss_enabled) || PyThread_tss_create(&em_state.tss_root) ||
        PyThread_tss_create(&em_state.tss_handed)) {
        PyErr_SetString(PyExc_RuntimeError, "ember: cannot create thread-local storage");
        return -1;
    }
    return 0;
}

int em_hook_enter(int flags) {
    int prev = tls_flags();
    if ((flags & EMH_ENABLED) && !(prev & EMH_ENABLED)) {
        if (em_state.hook_users++ == 0) {
            EmEvalFn cur = em_eval_get();
            if (cur != em_eval) {
                em_state.prev_eval = cur == _PyEval_EvalFrameDefault ? NULL : (void *)cur;
                em_eval_set(em_eval);
            }
        }
    } else if (!(flags & EMH_ENABLED) && (prev & EMH_ENABLED)) {
        em_state.hook_users--;
    }
    tls_set(flags);
    return prev;
}

void em_hook_exit(int prev) {
    int cur = tls_flags();
    if ((cur & EMH_ENABLED) && !(prev & EMH_ENABLED)) {
        if (--em_state.hook_users == 0 && em_eval_get() == em_eval)
            em_eval_set(em_state.prev_eval ? (EmEvalFn)em_state.prev_eval : _PyEval_EvalFrameDefault);
    } else if (!(cur & EMH_ENABLED) && (prev & EMH_ENABLED)) {
        em_state.hook_users++;
    }
    tls_set(prev);
}

EM_NEW PyObject *em_hook_call(int flags, PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    int prev = em_hook_enter(flags);
    PyObject *r = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    em_hook_exit(prev);
    return r;
}

/* Codes ember never intercepts: generators and coroutines, module and class bodies (not
 * CO_OPTIMIZED: they run once, on a locals dict), and files ember/_rules.py's skip_file
 * names (torch, ember, the standard library, code backends generate). Asked once per code. */
static int skip_code(PyCodeObject *co) {
    if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) return 1;
    if (!(co->co_flags & CO_OPTIMIZED)) return 1;
    int saved = em_hook_enter(0); /* the Python code asked here is not intercepted */
    int forced = em_state.forced_codes ? PySequence_Contains(em_state.forced_codes, (PyObject *)co) : 0; /* WeakSet */
    if (forced < 0) PyErr_Clear();
    PyObject *r = forced != 1 && em_state.skip_file ? PyObject_CallOneArg(em_state.skip_file, co->co_filename) : NULL;
    em_hook_exit(saved);
    if (forced == 1 || !em_state.skip_file) return 0;
    int v = r ? PyObject_IsTrue(r) : 0;
    Py_XDECREF(r);
    if (v < 0 || !r) {
        PyErr_Clear();
        return 0;
    }
    return v;
}

static void call_quiet(PyObject *fn, const char *channel, PyObject *msg) {
    if (!fn) return;
    PyObject *r = channel ? PyObject_CallFunction(fn, "sO", channel, msg) : PyObject_CallOneArg(fn, msg);
    if (!r) PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
}

/* Calls warnings_off or warnings_on (ember/_rules.py), keeping any pending exception. */
static void warnings_switch(PyObject *fn) {
    if (!fn) return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *r = PyObject_CallNoArgs(fn);
    if (!r) PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
    PyErr_Restore(et, ev, tb);
}

/* Stops compiling this code: it runs as plain Python from now on, and ember's warn(kind, code,
 * why) tells the user (kind: "abort", "limit" or "internal"). Under fullgraph or strict, raises
 * ember.Unsupported instead (ember.DataDependentError for a use of a number from .item() that
 * needs its value, as torch.compile raises UserError there), returning -1. */
static int fall_back(EmExtra *x, PyCodeObject *co, PyObject *EM_STEALS why, int flags, const char *kind) {
    em_state.n_aborts++;
    if ((flags & EMH_FULLGRAPH) || em_state.strict) {
        int item = em_state.abort_item && em_state.data_dependent && !strcmp(kind, "abort");
        PyErr_SetObject(item ? em_state.data_dependent : em_state.unsupported, why);
        Py_DECREF(why);
        return -1;
    }
    x->mode = EMX_FALLBACK;
    Py_XSETREF(x->reason, why);
    if (em_state.warn) {
        PyObject *r = PyObject_CallFunction(em_state.warn, "sOO", kind, (PyObject *)co, why);
        if (!r) PyErr_WriteUnraisable(em_state.warn);
        Py_XDECREF(r);
    }
    return 0;
}

/* Whether o holds something ember compiles: a tensor, an nn.Module (or its class), a numpy
 * array, in lists, tuples, dicts and namedtuples down to a few levels. *budget bounds the walk;
 * spent, the answer is yes. Other objects count as holding none (TorchDynamo's has_tensor). */
static int holds_torch(PyObject *o, int depth, int *budget) {
    if (--*budget < 0 || depth > 6) return 1;
    PyTypeObject *tp = Py_TYPE(o);
    if (PyType_IsSubtype(tp, em_state.tensor_type) || PyType_IsSubtype(tp, (PyTypeObject *)em_state.nn_module_type) ||
        (PyType_Check(o) && PyType_IsSubtype((PyTypeObject *)o, (PyTypeObject *)em_state.nn_module_type)) ||
        !strcmp(tp->tp_name, "numpy.ndarray"))
        return 1;
    if (PyTuple_Check(o)) { /* a namedtuple's fields too: the tuple's storage, no user code */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
            if (holds_torch(PyTuple_GET_ITEM(o, i), depth + 1, budget)) return 1;
        return 0;
    }
    if (PyList_CheckExact(o)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) {
            PyObject *it = Py_NewRef(PyList_GET_ITEM(o, i)); /* held: the walk runs no code, but stays safe */
            int r = holds_torch(it, depth + 1, budget);
            Py_DECREF(it);
            if (r) return 1;
        }
        return 0;
    }
    if (PyDict_CheckExact(o)) {
        PyObject *vals = PyDict_Values(o); /* a copy: the walk runs no code, but stays safe */
        int r = !vals;
        for (Py_ssize_t i = 0; vals && !r && i < PyList_GET_SIZE(vals); i++)
            r = holds_torch(PyList_GET_ITEM(vals, i), depth + 1, budget);
        if (!vals) PyErr_Clear();
        Py_XDECREF(vals);
        return r;
    }
    if (PyCell_Check(o)) return PyCell_GET(o) && holds_torch(PyCell_GET(o), depth, budget);
    return 0;
}

/* Whether a frame has nothing ember compiles: no torch or numpy module among the globals its
 * code names, nothing holds_torch takes in its locals (TorchDynamo's has_tensor_in_frame). A
 * callee of plain Python that cannot be traced (a comprehension over a real dict iterator under
 * a frame that made no graph) then runs as plain Python without a word, even with fullgraph. */
static int frame_without_torch(EmPyFrame *f, PyCodeObject *co) {
    PyObject *g = em_frame_globals(f);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_names); i++) {
        PyObject *v = PyDict_GetItemWithError(g, PyTuple_GET_ITEM(co->co_names, i));
        if (!v && PyErr_Occurred()) return PyErr_Clear(), 0;
        if (!v || !PyModule_Check(v)) continue;
        const char *n = PyModule_GetName(v);
        if (!n) return PyErr_Clear(), 0;
        if (!strcmp(n, "torch") || !strncmp(n, "torch.", 6) || !strcmp(n, "numpy") || !strncmp(n, "numpy.", 6))
            return 0;
    }
    PyObject *const *loc = em_frame_locals(f);
    int budget = 4096;
    for (int i = 0; i < em_code_nlocalsplus(co); i++)
        if (loc[i] && holds_torch(loc[i], 0, &budget)) return 0;
    return 1;
}

/* The function object of an entry's transformed code for this frame (new reference). Cached
 * on the entry for a function without a closure; a closure holds user objects (the cells of
 * the frame's function), which an entry must not keep alive, so one is made per call then. */
static PyObject *transformed_func(EmEntry *e, PyFunctionObject *fn) {
    if (e->tfunc && !fn->func_closure && ((PyFunctionObject *)e->tfunc)->func_globals == fn->func_globals)
        return Py_NewRef(e->tfunc);
    PyObject *f = PyFunction_New(e->tcode, fn->func_globals);
    if (!f) return NULL;
    if (fn->func_closure && PyFunction_SetClosure(f, fn->func_closure) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    if (!fn->func_closure) Py_XSETREF(e->tfunc, Py_NewRef(f));
    return f;
}

/* Runs an entry: the graph, then for a graph break the transformed code with the frame's
 * arguments and the graph's values (with this thread's hook flags back on, so the resume
 * function and everything called from plain Python are intercepted again). NULL with an
 * exception; or NULL without one and *rerun set: the graph's ops raised an Exception before
 * anything of the frame ran (its side effects and the code after the graph run after it) and
 * changed nothing outside the graph, so the frame runs as plain Python instead, raising where
 * and as eager does, after the side effects that come before it. */
static PyObject *run_entry(EmEntry *e, PyObject **slots, EmPyFrame *f, PyFunctionObject *fn, int flags, int *rerun) {
    int32_t at;
    PyObject *r = em_rt_call((EmCompiled *)e->compiled, slots, &at); /* hook already off (em_eval) */
    int unchanged = at >= 0 && (at < e->rerun_limit || (at == e->rerun_limit && e->rerun_meta));
    if (!r && unchanged && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        em_state.n_reruns++;
        *rerun = 1;
        return NULL;
    }
    if (!r || !e->tcode) return r;
    PyObject *vals = r, *stack_argv[17], **argv = stack_argv;
    PyObject *func = transformed_func(e, fn);
    if (!func) {
        Py_DECREF(vals);
        return NULL;
    }
    if (e->nargs + 1 > 17 && !(argv = PyMem_Malloc(sizeof(PyObject *) * ((size_t)e->nargs + 1)))) {
        Py_DECREF(func);
        Py_DECREF(vals);
        return PyErr_NoMemory();
    }
    PyObject *const *loc = em_frame_locals(f);
    for (int i = 0; i < e->nargs; i++) argv[i] = loc[i];
    argv[e->nargs] = vals;
    tls_set(flags);
    r = PyObject_Vectorcall(func, argv, (size_t)e->nargs + 1, NULL);
    tls_set(0);
    Py_DECREF(func);
    Py_DECREF(vals);
    if (argv != stack_argv) PyMem_Free(argv);
    return r;
}

/* Runs an entry whose guards passed (the caller holds it), then releases the slots' owned
 * references. */
static PyObject *run_guarded(EmEntry *e, PyObject **slots, EmPyFrame *f, PyFunctionObject *fn, int flags, int *rerun) {
    PyObject *res = run_entry(e, slots, f, fn, flags, rerun);
    em_guard_release_slots(&e->P, slots);
    return res;
}

static PyObject *eval_plain(PyThreadState *ts, EmPyFrame *f, int throwflag, int flags, int *handed) {
    *handed = 1;
    tls_set(flags);
    PyObject *r = eval_prev(ts, f, throwflag);
    tls_set(0);
    return r;
}

static PyObject *em_eval(PyThreadState *ts, EmPyFrame *f, int throwflag) {
    if (em_state.prev_eval && PyThread_tss_get(&em_state.tss_handed) == (void *)f) /* see eval_prev */
        return _PyEval_EvalFrameDefault(ts, f, throwflag);
    int flags = tls_flags();
    /* a hook installed after ours (TorchDynamo compiling or running torch.cond's branches, a
     * torch.compile'd function) calls ours as its previous one: its frames are its own */
    if (!(flags & EMH_ENABLED) || throwflag || em_eval_get() != em_eval) return eval_prev(ts, f, throwflag);
    EmPyFrame *caller = em_thread_frame(ts);
    PyObject *by = caller ? (PyObject *)em_frame_code(caller) : NULL;
    if (by && by == em_state.disable_code) {
        /* called by torch.compiler.disable's wrapper: it and all it calls run as Python */
        tls_set(0);
        PyObject *r = eval_prev(ts, f, throwflag);
        tls_set(flags);
        return r;
    }
    if (by && by == em_state.disable_once_code) return eval_prev(ts, f, throwflag); /* recursive=False: this frame */
    PyCodeObject *co = em_frame_code(f);
    EmExtra *x = em_cache_get(co);
    if (x && x->mode == EMX_SKIP) return eval_prev(ts, f, throwflag);
    if (!em_frame_fresh(f) || !em_frame_releasable(f)) return eval_prev(ts, f, throwflag);
    int fresh = !x;
    if (fresh && !(x = em_cache_get_or_new(co))) {
        PyErr_Clear();
        return eval_prev(ts, f, throwflag);
    }
    /* ours until the frame is handed back: ember.reset() in another thread (or in this
     * one, from the frame's own code) detaches the extra, and frees it once we let go */
    em_extra_incref(x);
    PyObject *res;
    const char *watcher;
    if (fresh && skip_code(co)) {
        x->mode = EMX_SKIP;
        res = eval_prev(ts, f, throwflag);
    } else if ((watcher = em_watcher_active(ts))) {
        /* the tool must see every line and call of the frame, as without ember */
        if (!x->watch_told && (em_state.logs & EM_LOG_BREAKS)) {
            x->watch_told = 1;
            tls_set(0);
            PyObject *msg = PyUnicode_FromFormat("%U (%U:%d) runs as plain Python: %s", co->co_qualname,
                                                 co->co_filename, co->co_firstlineno, watcher);
            if (msg) call_quiet(em_state.log, "breaks", msg);
            else PyErr_WriteUnraisable(NULL);
            Py_XDECREF(msg);
            tls_set(flags);
        }
        res = eval_prev(ts, f, throwflag);
    } else {
        /* from here on ember's own work (guards, explanations, compiling) must not be
         * intercepted: the hook is off for this thread until we hand the frame back */
        tls_set(0);
        EmRoot *root = PyThread_tss_get(&em_state.tss_root), mine = {x, co};
        if (!root) PyThread_tss_set(&em_state.tss_root, &mine);
        int handed = 0;
        res = em_eval_cached(ts, f, throwflag, x, flags, root ? root : &mine, &handed);
        if (!handed) em_frame_release(ts, f); /* answered without evaluating it (3.12: ours to pop) */
        if (!root) PyThread_tss_set(&em_state.tss_root, NULL);
        tls_set(flags);
    }
    em_extra_decref(x);
    return res;
}

/* A miss: how many entries for this backend were tried, the first that failed (a
 * reference) and the failing guard instruction, and the extra's push count at the start. */
typedef struct {
    int n_mine;
    EmEntry *first_fail;
    int32_t failed;
    unsigned gen;
} EmMiss;

/* Runs the first entry whose guards pass: 1 (*res is the frame's result, or NULL with an
 * exception, or NULL with *rerun set: see run_entry), 0 on a miss (m filled in; the caller drops m->first_fail), -1 on error. Each
 * entry is held while its guards and graph run (either may let other threads run, or run
 * code that resets or invalidates), and the walk goes on through the entry it stood on. */
static int lookup(EmExtra *x, const EmFrameIn *in, EmPyFrame *f, PyFunctionObject *fn, int flags, int32_t backend,
                  EmMiss *m, PyObject **res, int *rerun) {
    PyObject *stack_slots[HOOK_STACK_SLOTS], **slots = stack_slots;
    m->n_mine = 0;
    m->first_fail = NULL;
    m->failed = -1;
    m->gen = x->gen;
    EmEntry *e = x->head;
    if (e) em_entry_incref(e);
    while (e) {
        if (e->backend == backend && !e->P.dead) { /* else compiled for another backend, or invalidated */
            m->n_mine++;
            if (e->P.nslots > HOOK_STACK_SLOTS && !(slots = PyMem_Malloc(sizeof(PyObject *) * (size_t)e->P.nslots))) {
                em_entry_decref(e);
                PyErr_NoMemory();
                return -1;
            }
            int32_t at = -1;
            int ok = em_guard_run(&e->P, in, slots, &at);
            if (ok == 1) {
                em_state.n_hits++;
                e->hits++;
                em_cache_move_front(x, e);
                *res = run_guarded(e, slots, f, fn, flags, rerun);
                if (slots != stack_slots) PyMem_Free(slots);
                em_entry_decref(e);
                return 1;
            }
            em_guard_release_slots(&e->P, slots);
            if (slots != stack_slots) {
                PyMem_Free(slots);
                slots = stack_slots;
            }
            if (ok < 0) PyErr_Clear(); /* a guard that raised is a failed guard */
            if (!m->first_fail) {
                em_entry_incref(e);
                m->first_fail = e;
                m->failed = at;
            }
        }
        EmEntry *next = e->next;
        if (next) em_entry_incref(next);
        em_entry_decref(e);
        e = next;
    }
    return 0;
}

/* Runs a fresh entry for the frame it was compiled from. */
static PyObject *run_fresh(PyThreadState *ts, EmPyFrame *f, int throwflag, EmExtra *x, int flags, EmEntry *ne,
                           const EmFrameIn *in, int *handed) {
    PyCodeObject *co = em_frame_code(f);
    PyObject *stack_slots[HOOK_STACK_SLOTS], *res = NULL;
    PyObject **slots = ne->P.nslots > HOOK_STACK_SLOTS ? PyMem_Malloc(sizeof(PyObject *) * (size_t)ne->P.nslots)
                                                       : stack_slots;
    if (!slots) return PyErr_NoMemory();
    int32_t failed = -1;
    int ok = ne->P.dead ? 0 : em_guard_run(&ne->P, in, slots, &failed);
    int rerun = 0;
    if (ok == 1) res = run_guarded(ne, slots, f, em_frame_func(f), flags, &rerun);
    else em_guard_release_slots(&ne->P, slots);
    if (slots != stack_slots) PyMem_Free(slots);
    if (rerun) return eval_plain(ts, f, throwflag, flags, handed);
    if (ok == 1) return res;
    if (ne->P.dead) { /* an object it guards died already: just this call runs as plain Python */
        PyErr_Clear();
        return eval_plain(ts, f, throwflag, flags, handed);
    }
    /* the new guards must hold for the frame they came from */
    PyErr_Clear();
    em_state.n_internal++;
    PyObject *why = PyUnicode_FromFormat("%U:%d: guards of a fresh compile failed (internal error)", co->co_filename,
                                         co->co_firstlineno);
    if (!why || fall_back(x, co, why, 0, "internal") < 0) return NULL;
    return eval_plain(ts, f, throwflag, flags, handed);
}

/* The frame's call through the cache: a hit runs the entry; a miss compiles (one compile at
 * a time in the process: the compile lock) unless the code falls back; then the new entry
 * runs. x is held by the caller. */
/* Runs the frame as plain Python with the hook off for this thread: the functions it calls
 * run as plain Python too (a code past a recompile limit). */
static PyObject *eval_alone(PyThreadState *ts, EmPyFrame *f, int throwflag, int *handed) {
    *handed = 1;
    return eval_prev(ts, f, throwflag);
}

/* Logs (EMBER_LOGS=recompiles) and warns once that code x hit a recompile limit; x and
 * everything it calls run as plain Python from now on. 0, or -1 (fullgraph, strict). */
static int limit_hit(EmExtra *x, PyCodeObject *co, PyObject *EM_STEALS detail, int flags) {
    PyObject *why = detail ? PyUnicode_FromFormat(
                                 "%U (%U:%d): %U; it and the functions it calls run as plain Python from now on (to "
                                 "compile more, raise the limit in ember.config; to compile less, keep the changing "
                                 "sizes or values stable)",
                                 co->co_qualname, co->co_filename, co->co_firstlineno, detail)
                           : NULL;
    Py_XDECREF(detail);
    if (!why) return -1;
    em_state.n_fallbacks++;
    if (em_state.logs & EM_LOG_RECOMPILES) call_quiet(em_state.log, "recompiles", why);
    if (fall_back(x, co, why, flags, "limit") < 0) return -1;
    x->recursive = 1;
    return 0;
}

static PyObject *em_eval_cached(PyThreadState *ts, EmPyFrame *f, int throwflag, EmExtra *x, int flags, EmRoot *root,
                                int *handed) {
    PyCodeObject *co = em_frame_code(f);
    PyFunctionObject *fn = em_frame_func(f);
    EmFrameIn in = {em_frame_locals(f), fn->func_closure, em_frame_globals(f), em_frame_builtins(f)};
    PyObject *res = NULL, *reason = NULL;
    int32_t backend = em_hook_backend(flags);
    EmMiss m;
    int had_fail;
    for (;;) {
        int rerun = 0;
        int r = lookup(x, &in, f, fn, flags, backend, &m, &res, &rerun);
        if (rerun) return eval_plain(ts, f, throwflag, flags, handed);
        if (r) return r > 0 ? res : NULL;
        if (x->mode == EMX_FALLBACK) {
            em_entry_decref(m.first_fail);
            return x->recursive ? eval_alone(ts, f, throwflag, handed) : eval_plain(ts, f, throwflag, flags, handed);
        }
        /* the guard failure is explained before waiting: the entry may be gone after */
        reason = m.first_fail ? em_guard_explain(&m.first_fail->P, &in, m.failed) : NULL;
        if (m.first_fail && !reason) PyErr_Clear();
        had_fail = m.first_fail != NULL;
        em_entry_decref(m.first_fail);
        m.first_fail = NULL;
        em_cache_lock(); /* may let other threads run */
        if (x->gen == m.gen && x->mode != EMX_FALLBACK) break;
        /* another thread compiled this code meanwhile (or gave up on it): look again */
        em_cache_unlock();
        Py_CLEAR(reason);
    }

    /* miss: compile (the hook stays off for this thread meanwhile), holding the lock, unless a
     * limit says otherwise: this code's own (entries per code) or the accumulated one of the
     * outermost frame (compiles of it and everything below it). Past either, the frame runs as
     * plain Python with its callees, so that a stream of new shapes cannot go on compiling in
     * the functions it calls (TorchDynamo skips the frame recursively too). */
    EmExtra *rx = root->x;
    if (rx->tree_compiles >= em_state.accumulated_recompile_limit) {
        Py_XDECREF(reason);
        int bad = 0;
        if (!(rx->mode == EMX_FALLBACK && rx->recursive))
            bad = limit_hit(rx, root->co,
                            PyUnicode_FromFormat("accumulated_recompile_limit (%d) reached: %d compiles of it and of "
                                                 "the functions it called (the next one: %U (%U:%d))",
                                                 em_state.accumulated_recompile_limit, rx->tree_compiles,
                                                 co->co_qualname, co->co_filename, co->co_firstlineno),
                            flags) < 0;
        em_cache_unlock();
        return bad ? NULL : eval_alone(ts, f, throwflag, handed);
    }
    if (had_fail && m.n_mine >= em_state.cache_size_limit) {
        PyObject *detail = PyUnicode_FromFormat("cache_size_limit (%d) reached; last guard failure: %S",
                                                em_state.cache_size_limit, reason ? reason : Py_None);
        Py_XDECREF(reason);
        int bad = limit_hit(x, co, detail, flags) < 0;
        em_cache_unlock();
        return bad ? NULL : eval_alone(ts, f, throwflag, handed);
    }
    if (had_fail) {
        em_state.n_recompiles++;
        if ((em_state.logs & EM_LOG_RECOMPILES) && reason) {
            PyObject *msg = PyUnicode_FromFormat("recompiling %U (%U:%d): %U", co->co_qualname, co->co_filename,
                                                 co->co_firstlineno, reason);
            if (msg) call_quiet(em_state.log, "recompiles", msg);
            Py_XDECREF(msg);
        }
    }
    Py_XDECREF(reason);
    EmEntry *ne = NULL;
    PyObject *why = NULL;
    int allow_break = !(flags & EMH_FULLGRAPH) && !em_state.strict;
    x->n_compiles++;
    rx->tree_compiles++; /* the root's own compiles count too */
    /* warnings raised while tracing (meta and fake-tensor runs, twins of context managers,
     * device probes) come from ember's work, not from the user's program: ignored */
    warnings_switch(em_state.warnings_off);
    /* tracing allocates many small objects and frees them together: the cyclic collector would
     * run over and over while it does (a tenth of capture time); it runs after instead */
    int gc_was = PyGC_Disable();
    /* sizes: symbolic by ember.compile's `dynamic` (Python backends get SymInt placeholders) */
    int dyn_mode = flags & EMH_DYN_ALL ? EM_DYN_ALL : flags & EMH_DYN_STATIC ? EM_DYN_STATIC : EM_DYN_AUTO;
    if (dyn_mode != EM_DYN_STATIC && !x->dyn_state &&
        !(x->dyn_state = PyDict_New())) { /* dynamic=True: globals, attributes */
        em_cache_unlock();
        return NULL;
    }
    EmDriverResult dr = em_driver_compile(co, &in, allow_break, backend, dyn_mode, x->dyn_state, &ne, &why);
    if (gc_was) PyGC_Enable();
    warnings_switch(em_state.warnings_on);
    switch (dr) {
        case EMD_OK:
            em_state.n_frames++;
            em_state.n_graphs += ne->op_count > 0;
            em_entry_incref(ne); /* ours while it runs; the list takes the other */
            em_cache_push(x, ne);
            em_cache_unlock();
            res = run_fresh(ts, f, throwflag, x, flags, ne, &in, handed);
            em_entry_decref(ne);
            return res;
        case EMD_NOGRAPH:
            x->mode = EMX_SKIP;
            em_cache_unlock();
            return eval_plain(ts, f, throwflag, flags, handed);
        case EMD_ABORT: {
            if (root->x != x && frame_without_torch(f, co)) { /* nothing to compile: plain Python, silently */
                x->mode = EMX_FALLBACK;
                Py_XSETREF(x->reason, why);
                em_cache_unlock();
                return eval_plain(ts, f, throwflag, flags, handed);
            }
            int bad = fall_back(x, co, why, flags, "abort") < 0;
            em_cache_unlock();
            return bad ? NULL : eval_plain(ts, f, throwflag, flags, handed);
        }
        default: {
            /* internal error: never crash the program; report it and run the frame as is */
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            if (et && (!PyErr_GivenExceptionMatches(et, PyExc_Exception) ||
                       PyErr_GivenExceptionMatches(et, em_state.constraint_violation))) {
                /* KeyboardInterrupt or SystemExit while tracing, or a size outside its
                 * mark_dynamic range: the program's own, raised from the call as Python (or
                 * torch.compile) would; nothing is remembered, the next call compiles */
                PyErr_Restore(et, ev, tb);
                em_cache_unlock();
                return NULL;
            }
            em_state.n_internal++;
            why = PyUnicode_FromFormat("%U:%d: internal error %S", co->co_filename, co->co_firstlineno,
                                       ev ? ev : Py_None);
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            int bad = !why || fall_back(x, co, why, 0, "internal") < 0;
            em_cache_unlock();
            return bad ? NULL : eval_plain(ts, f, throwflag, flags, handed);
        }
    }
}
