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

#define HOOK_STACK_SLOTS 64

static inline int tls_flags(void) { return (int)(intptr_t)PyThread_tss_get(&em_state.tss_enabled); }
static inline void tls_set(int f) { PyThread_tss_set(&em_state.tss_enabled, (void *)(intptr_t)f); }

int em_hook_flags(void) { return tls_flags(); }

static PyObject *em_eval(PyThreadState *ts, EmPyFrame *f, int throwflag);
static PyObject *em_eval_cached(PyThreadState *ts, EmPyFrame *f, int throwflag, EmExtra *x, int flags);

/* Evaluates the frame as plain Python with this thread's hook flags restored, so that the
 * functions it calls are intercepted again. */
static PyObject *eval_plain(PyThreadState *ts, EmPyFrame *f, int throwflag, int flags);

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
    if (PyThread_tss_create(&em_state.tss_enabled) || PyThread_tss_create(&em_state.tss_handed)) {
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
    if (em_state.forced_codes && PySet_Contains(em_state.forced_codes, (PyObject *)co) == 1) return 0;
    if (!em_state.skip_file) return 0;
    int saved = em_hook_enter(0);
    PyObject *r = PyObject_CallOneArg(em_state.skip_file, co->co_filename);
    em_hook_exit(saved);
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

/* Stops compiling this code: it runs as plain Python from now on. Under fullgraph or
 * strict, raises ember.Unsupported instead (returns -1). */
static int fall_back(EmExtra *x, PyObject *EM_STEALS why, int flags, const char *what) {
    em_state.n_aborts++;
    if ((flags & EMH_FULLGRAPH) || em_state.strict) {
        PyErr_SetObject(em_state.unsupported, why);
        Py_DECREF(why);
        return -1;
    }
    x->mode = EMX_FALLBACK;
    Py_XSETREF(x->reason, why);
    PyObject *msg = PyUnicode_FromFormat("ember: %s; running it as plain Python: %U", what, why);
    if (msg) call_quiet(em_state.warn, NULL, msg);
    else PyErr_Clear();
    Py_XDECREF(msg);
    return 0;
}

/* The function object of an entry's transformed code for this frame's closure (cached). */
static PyObject *transformed_func(EmEntry *e, PyFunctionObject *fn) {
    if (e->tfunc && e->tfunc_closure == fn->func_closure) return e->tfunc;
    PyObject *f = PyFunction_New(e->tcode, fn->func_globals);
    if (!f) return NULL;
    if (fn->func_closure && PyFunction_SetClosure(f, fn->func_closure) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    Py_XSETREF(e->tfunc, f);
    Py_XSETREF(e->tfunc_closure, Py_XNewRef(fn->func_closure));
    return f;
}

/* Runs an entry: the graph, then for a graph break the transformed code with the frame's
 * arguments and the graph's values (with this thread's hook flags back on, so the resume
 * function and everything called from plain Python are intercepted again). */
static PyObject *run_entry(EmEntry *e, PyObject **slots, EmPyFrame *f, PyFunctionObject *fn, int flags) {
    PyObject *r = em_rt_call((EmCompiled *)e->compiled, slots); /* hook already off (em_eval) */
    if (!r || !e->tcode) return r;
    PyObject *vals = r, *stack_argv[17], **argv = stack_argv;
    PyObject *func = transformed_func(e, fn);
    if (!func) {
        Py_DECREF(vals);
        return NULL;
    }
    if (e->nargs + 1 > 17 && !(argv = PyMem_Malloc(sizeof(PyObject *) * ((size_t)e->nargs + 1)))) {
        Py_DECREF(vals);
        return PyErr_NoMemory();
    }
    PyObject *const *loc = em_frame_locals(f);
    for (int i = 0; i < e->nargs; i++) argv[i] = loc[i];
    argv[e->nargs] = vals;
    Py_INCREF(func); /* a recompile inside may replace e->tfunc */
    tls_set(flags);
    r = PyObject_Vectorcall(func, argv, (size_t)e->nargs + 1, NULL);
    tls_set(0);
    Py_DECREF(func);
    Py_DECREF(vals);
    if (argv != stack_argv) PyMem_Free(argv);
    return r;
}

/* Runs an entry whose guards passed, then releases the slots' owned references. The entry
 * may be dropped while it runs (ember.reset() from user code after a break), so what the
 * slots own is copied first and the entry is not touched afterwards. */
static PyObject *run_guarded(EmEntry *e, PyObject **slots, EmPyFrame *f, PyFunctionObject *fn, int flags) {
    int32_t nslots = e->P.nslots;
    uint8_t owned_copy[HOOK_STACK_SLOTS], *owned = owned_copy;
    if (nslots > HOOK_STACK_SLOTS && !(owned = PyMem_Malloc((size_t)nslots))) {
        em_guard_release_slots(&e->P, slots);
        return PyErr_NoMemory();
    }
    if (nslots) memcpy(owned, e->P.owned.data, (size_t)nslots);
    PyObject *res = run_entry(e, slots, f, fn, flags);
    for (int32_t i = 0; i < nslots; i++)
        if (owned[i]) Py_CLEAR(slots[i]);
    if (owned != owned_copy) PyMem_Free(owned);
    return res;
}

static PyObject *eval_plain(PyThreadState *ts, EmPyFrame *f, int throwflag, int flags) {
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
    PyCodeObject *co = em_frame_code(f);
    EmExtra *x = em_cache_get(co);
    if (x && x->mode == EMX_SKIP) return eval_prev(ts, f, throwflag);
    if (!em_frame_fresh(f)) return eval_prev(ts, f, throwflag);
    if (!x) {
        x = em_cache_get_or_new(co);
        if (!x) {
            PyErr_Clear();
            return eval_prev(ts, f, throwflag);
        }
        if (skip_code(co)) {
            x->mode = EMX_SKIP;
            return eval_prev(ts, f, throwflag);
        }
    }
    /* from here on ember's own work (guards, explanations, compiling) must not be
     * intercepted: the hook is off for this thread until we hand the frame back */
    tls_set(0);
    PyObject *res = em_eval_cached(ts, f, throwflag, x, flags);
    tls_set(flags);
    return res;
}

static PyObject *em_eval_cached(PyThreadState *ts, EmPyFrame *f, int throwflag, EmExtra *x, int flags) {
    PyCodeObject *co = em_frame_code(f);
    PyFunctionObject *fn = em_frame_func(f);
    EmFrameIn in = {em_frame_locals(f), fn->func_closure, em_frame_globals(f), em_frame_builtins(f)};
    PyObject *stack_slots[HOOK_STACK_SLOTS], **slots = stack_slots, *res = NULL;
    int32_t failed = -1, backend = em_hook_backend(flags), n_mine = 0;
    EmEntry *prev = NULL, *first_fail = NULL;
    for (EmEntry *e = x->head; e; prev = e, e = e->next) {
        if (e->backend != backend) continue; /* compiled for another backend */
        n_mine++;
        if (e->P.nslots > HOOK_STACK_SLOTS) {
            slots = PyMem_Malloc(sizeof(PyObject *) * (size_t)e->P.nslots);
            if (!slots) return PyErr_NoMemory();
        }
        int32_t at = -1;
        int ok = em_guard_run(&e->P, &in, slots, &at);
        if (ok == 1) {
            em_state.n_hits++;
            e->hits++;
            em_cache_move_front(x, prev, e);
            res = run_guarded(e, slots, f, fn, flags);
            if (slots != stack_slots) PyMem_Free(slots);
            return res;
        }
        em_guard_release_slots(&e->P, slots);
        if (slots != stack_slots) {
            PyMem_Free(slots);
            slots = stack_slots;
        }
        if (ok < 0) PyErr_Clear(); /* a guard that raised is a failed guard */
        if (!first_fail) {
            first_fail = e;
            failed = at;
        }
    }
    if (x->mode == EMX_FALLBACK) return eval_plain(ts, f, throwflag, flags);

    /* miss: compile (the hook stays off for this thread meanwhile) */
    PyObject *reason = first_fail ? em_guard_explain(&first_fail->P, &in, failed) : NULL;
    if (first_fail && !reason) PyErr_Clear();
    if (first_fail && n_mine >= em_state.cache_size_limit) {
        PyObject *why = PyUnicode_FromFormat("%U:%d: cache_size_limit (%d) reached; last guard failure: %S",
                                             co->co_filename, co->co_firstlineno, em_state.cache_size_limit,
                                             reason ? reason : Py_None);
        Py_XDECREF(reason);
        em_state.n_fallbacks++;
        if (!why || fall_back(x, why, flags, "recompile limit hit") < 0) return NULL;
        return eval_plain(ts, f, throwflag, flags);
    }
    if (first_fail) {
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
    EmDriverResult dr = em_driver_compile(co, &in, allow_break, backend, &ne, &why);
    x->n_compiles++;
    switch (dr) {
        case EMD_OK:
            em_state.n_frames++;
            em_cache_push(x, ne);
            slots = ne->P.nslots > HOOK_STACK_SLOTS ? PyMem_Malloc(sizeof(PyObject *) * (size_t)ne->P.nslots)
                                                    : stack_slots;
            if (!slots) return PyErr_NoMemory();
            {
                int ok = em_guard_run(&ne->P, &in, slots, &failed);
                if (ok == 1) res = run_guarded(ne, slots, f, fn, flags);
                else em_guard_release_slots(&ne->P, slots);
                if (slots != stack_slots) PyMem_Free(slots);
                if (ok == 1) return res;
                /* the new guards must hold for the frame they came from */
                PyErr_Clear();
                why = PyUnicode_FromFormat("%U:%d: guards of a fresh compile failed (internal error)",
                                           co->co_filename, co->co_firstlineno);
                if (!why || fall_back(x, why, 0, "internal error") < 0) return NULL;
                return eval_plain(ts, f, throwflag, flags);
            }
        case EMD_NOGRAPH: x->mode = EMX_SKIP; return eval_plain(ts, f, throwflag, flags);
        case EMD_ABORT:
            if (fall_back(x, why, flags, "could not capture a frame") < 0) return NULL;
            return eval_plain(ts, f, throwflag, flags);
        default: {
            /* internal error: never crash the program; report it and run the frame as is */
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            why = PyUnicode_FromFormat("%U:%d: internal error %S", co->co_filename, co->co_firstlineno,
                                       ev ? ev : Py_None);
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            if (!why || fall_back(x, why, 0, "internal error while compiling") < 0) return NULL;
            return eval_plain(ts, f, throwflag, flags);
        }
    }
}
