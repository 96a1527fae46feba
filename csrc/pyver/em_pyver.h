/* em_pyver.h: the only place that knows the Python version (PY_VERSION_HEX appears nowhere
 * else). Frame field access, the PEP 523 install calls, co_extra and code-object helpers,
 * as static inlines over CPython's internal frame layout (Include/internal/pycore_frame.h
 * of 3.11 and 3.12). Unknown versions fail the build.
 */
#ifndef EM_PYVER_H
#define EM_PYVER_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "ember supports CPython 3.11 and 3.12: check the frame layout in pyver/ before adding a version"
#endif

#if PY_VERSION_HEX >= 0x030C0000
#undef _PyGC_FINALIZED
#endif
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030C0000
#include <internal/pycore_interp.h>
#endif
#undef Py_BUILD_CORE

#include "em_opcodes_gen.h"

#if PY_VERSION_HEX >= 0x030C0000
#define EM_PY312 1
#else
#define EM_PY312 0
#endif

#define EM_CO_FAST_LOCAL 0x20
#define EM_CO_FAST_CELL 0x40
#define EM_CO_FAST_FREE 0x80

typedef struct _PyInterpreterFrame EmPyFrame;
typedef PyObject *(*EmEvalFn)(PyThreadState *, EmPyFrame *, int);

static inline PyCodeObject *em_frame_code(EmPyFrame *f) { return f->f_code; }
static inline PyObject *const *em_frame_locals(EmPyFrame *f) { return f->localsplus; }
static inline PyObject *em_frame_globals(EmPyFrame *f) { return f->f_globals; }
static inline PyObject *em_frame_builtins(EmPyFrame *f) { return f->f_builtins; }
static inline PyFunctionObject *em_frame_func(EmPyFrame *f) {
#if EM_PY312
    return (PyFunctionObject *)f->f_funcobj;
#else
    return f->f_func;
#endif
}
/* The thread's innermost running frame: at the hook, the caller of the frame it was given
 * (a fresh frame is linked into the chain only once evaluated); NULL at the top. */
static inline EmPyFrame *em_thread_frame(PyThreadState *ts) { return ts->cframe ? ts->cframe->current_frame : NULL; }
/* A frame that has run no instruction yet (not a resumed generator or coroutine). */
static inline int em_frame_fresh(EmPyFrame *f) {
    return _PyInterpreterFrame_LASTI(f) < 0 && f->owner == FRAME_OWNED_BY_THREAD;
}

/* Whether the hook may answer for the frame without evaluating it: on 3.12 it must then
 * release the frame itself (em_frame_release), which ember does only for a frame that has no
 * frame object (a fresh frame is not linked into the thread's frame chain, so none can be
 * made for it while the hook runs). */
static inline int em_frame_releasable(EmPyFrame *f) {
#if EM_PY312
    return f->frame_obj == NULL;
#else
    (void)f;
    return 1;
#endif
}

/* Releases a fresh frame the hook answered for without evaluating it. 3.11: the caller
 * (_PyEval_Vector) clears and pops the frame after the hook returns: nothing to do. 3.12: the
 * callee owns its frame (the default evaluator clears and pops it on return), so a hook that
 * does not evaluate it must drop its references (locals, function, code) and pop it off the
 * thread's data stack, freeing the chunk when the frame opened it. CPython's own helpers for
 * this are not exported: this follows clear_thread_frame (Python/ceval.c),
 * _PyFrame_ClearExceptCode (Python/frame.c; no frame object here) and _PyThreadState_PopFrame
 * (Python/pystate.c) of 3.12. f must be the top frame of ts's data stack. */
static inline void em_frame_release(PyThreadState *ts, EmPyFrame *f) {
#if EM_PY312
    for (int i = 0; i < f->stacktop; i++) Py_XDECREF(f->localsplus[i]);
    f->stacktop = 0;
    Py_CLEAR(f->f_locals);
    Py_DECREF(f->f_funcobj);
    PyCodeObject *co = f->f_code;
    PyObject **base = (PyObject **)f;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0]) {
        _PyStackChunk *prev = chunk->previous; /* the root chunk is never popped */
        ts->datastack_chunk = prev;
        ts->datastack_top = &prev->data[prev->top];
        ts->datastack_limit = (PyObject **)((char *)prev + prev->size);
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    } else {
        ts->datastack_top = base;
    }
    Py_DECREF(co);
#else
    (void)ts;
    (void)f;
#endif
}

/* Why a tool that watches the interpreter is active for this thread (sys.settrace,
 * sys.setprofile, or on 3.12 any sys.monitoring tool such as coverage's), or NULL: such a
 * tool must see the frame's lines and calls, so ember runs the frame as plain Python. */
static inline const char *em_watcher_active(PyThreadState *ts) {
    if (ts->c_tracefunc) return "sys.settrace is active (a debugger or tracer)";
    if (ts->c_profilefunc) return "sys.setprofile is active (a profiler)";
#if EM_PY312
    /* tools 0-5 are sys.monitoring's users; 6 and 7 carry setprofile and settrace, checked
     * per thread above */
    const uint8_t *tools = ts->interp->monitors.tools;
    for (int e = 0; e < _PY_MONITORING_UNGROUPED_EVENTS; e++)
        if (tools[e] & 0x3F) return "a sys.monitoring tool is active (coverage, a debugger or a profiler)";
#endif
    return NULL;
}

static inline EmEvalFn em_eval_get(void) {
    return (EmEvalFn)_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}
static inline void em_eval_set(EmEvalFn fn) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), (_PyFrameEvalFunction)fn);
}

static inline Py_ssize_t em_code_extra_index(freefunc free_fn) {
#if EM_PY312
    return PyUnstable_Eval_RequestCodeExtraIndex(free_fn);
#else
    return _PyEval_RequestCodeExtraIndex(free_fn);
#endif
}
static inline int em_code_get_extra(PyObject *code, Py_ssize_t i, void **out) {
#if EM_PY312
    return PyUnstable_Code_GetExtra(code, i, out);
#else
    return _PyCode_GetExtra(code, i, out);
#endif
}
static inline int em_code_set_extra(PyObject *code, Py_ssize_t i, void *v) {
#if EM_PY312
    return PyUnstable_Code_SetExtra(code, i, v);
#else
    return _PyCode_SetExtra(code, i, v);
#endif
}

/* A type's own namespace (borrowed; the type keeps it alive). 3.12 keeps the dict of a
 * static builtin type (object, int, ...) in the interpreter, with tp_dict NULL. */
static inline PyObject *em_type_dict(PyTypeObject *tp) {
#if EM_PY312
    PyObject *d = PyType_GetDict(tp);
    Py_XDECREF(d);
    return d;
#else
    return tp->tp_dict;
#endif
}

/* An object's __dict__ (borrowed) or NULL when it has none yet: a type's namespace, else the
 * instance dict (3.12 makes a class instance's dict from its inline values on first ask). */
static inline PyObject *em_obj_dict(PyObject *o) {
    if (PyType_Check(o)) return em_type_dict((PyTypeObject *)o);
    PyObject **dp = _PyObject_GetDictPtr(o);
    return dp ? *dp : NULL;
}

/* A dict's version tag: CPython gives it a new value, unique across dicts, at the dict's
 * making and at each change of it (PEP 509; deprecated in 3.12, kept and bumped through 3.13;
 * 3.12's watcher bits may change it with no change of the dict, never the reverse). */
static inline uint64_t em_dict_tag(PyObject *d) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return ((PyDictObject *)d)->ma_version_tag;
#pragma GCC diagnostic pop
}

/* Instruction stream of a code object, de-specialized (co_code). */
static inline EM_NEW PyObject *em_code_bytes(PyCodeObject *co) { return PyCode_GetCode(co); }
static inline int em_code_nlocalsplus(PyCodeObject *co) { return co->co_nlocalsplus; }
static inline int em_code_nfree(PyCodeObject *co) { return co->co_nfreevars; }
static inline int em_code_kind(PyCodeObject *co, int i) {
    return (unsigned char)PyBytes_AS_STRING(co->co_localspluskinds)[i];
}
static inline PyObject *em_code_name(PyCodeObject *co, int i) { return PyTuple_GET_ITEM(co->co_localsplusnames, i); }

/* Decoded instruction: code-unit index of the instruction (after its EXTENDED_ARGs). */
typedef struct {
    int op, arg;
    int at;   /* code unit of the opcode */
    int next; /* code unit of the next instruction (after inline caches) */
} EmInstr;

/* Decodes the instruction starting at code unit `at` (which may be an EXTENDED_ARG). */
static inline void em_decode(const unsigned char *code, int n_units, int at, EmInstr *out) {
    int arg = 0;
    while (at < n_units && code[2 * at] == EMBC_EXTENDED_ARG) {
        arg = (arg << 8) | code[2 * at + 1];
        at++;
    }
    out->op = code[2 * at];
    out->arg = (arg << 8) | code[2 * at + 1];
    out->at = at;
    out->next = at + 1 + em_bc_caches[out->op];
}

/* The instruction whose opcode is at unit `op_at` (an EmInstr's `at`), its EXTENDED_ARG prefixes
 * (the units before it) included: em_decode from `op_at` itself would lose its high bits. */
static inline void em_decode_op(const unsigned char *code, int n_units, int op_at, EmInstr *out) {
    int start = op_at;
    while (start > 0 && code[2 * (start - 1)] == EMBC_EXTENDED_ARG) start--;
    em_decode(code, n_units, start, out);
}

/* Operand decoding that differs between versions. */
/* The exception-table entry covering code unit u (3.11/3.12 format, Objects/exception_handling_notes.txt):
 * 1 with its handler, stack depth and lasti flag, 0 if none, -1 if the table cannot be read (then
 * the three are 0). */
static inline int em_exc_entry(PyCodeObject *co, int u, int *handler, int *depth, int *lasti) {
    *handler = *depth = *lasti = 0;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(co->co_exceptiontable);
    const unsigned char *end = p + PyBytes_GET_SIZE(co->co_exceptiontable);
    while (p < end) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            int x = 0;
            unsigned char b;
            do {
                if (p >= end) return -1;
                b = *p++;
                x = (x << 6) | (b & 63);
            } while (b & 64);
            v[k] = x;
        }
        if (u >= v[0] && u < v[0] + v[1]) {
            *handler = v[2];
            *depth = v[3] >> 1;
            *lasti = v[3] & 1;
            return 1;
        }
    }
    return 0;
}

static inline int em_compare_arg(int arg) { return EM_PY312 ? arg >> 4 : arg; }
static inline void em_load_attr_arg(int op, int arg, int *name, int *method) {
#ifdef EMBC_LOAD_METHOD
    *name = arg;
    *method = op == EMBC_LOAD_METHOD;
#else
    (void)op;
    *name = arg >> 1;
    *method = arg & 1;
#endif
}

/* LOAD_SUPER_ATTR's operand (3.12): name index, method load, two-argument super(). */
static inline void em_super_attr_arg(int arg, int *name, int *method, int *two) {
    *name = arg >> 2;
    *method = arg & 1;
    *two = (arg >> 1) & 1;
}

/* A method-form attribute load (3.11 LOAD_METHOD, 3.12 LOAD_ATTR with bit 0): pushes
 * (method, self) or (NULL, value). em_plain_attr_load gives the plain load of the same name
 * (one value pushed). */
static inline int em_is_method_load(int op, int arg) {
#ifdef EMBC_LOAD_METHOD
    (void)arg;
    return op == EMBC_LOAD_METHOD;
#else
    return (op == EMBC_LOAD_ATTR || op == EMBC_LOAD_SUPER_ATTR) && (arg & 1);
#endif
}
static inline void em_plain_attr_load(int *op, int *arg) {
#ifdef EMBC_LOAD_METHOD
    *op = EMBC_LOAD_ATTR;
#else
    *arg &= ~1;
#endif
}

/* Stack slots END_FOR pops (3.12: the iterator and the last value). */
#define EM_END_FOR_POPS 2

/* Target of a relative jump, in code units. */
static inline int em_jump_target(const EmInstr *in) {
    switch (in->op) {
#ifdef EMBC_JUMP_BACKWARD
        case EMBC_JUMP_BACKWARD:
#endif
#ifdef EMBC_JUMP_BACKWARD_NO_INTERRUPT
        case EMBC_JUMP_BACKWARD_NO_INTERRUPT:
#endif
#ifdef EMBC_POP_JUMP_BACKWARD_IF_FALSE
        case EMBC_POP_JUMP_BACKWARD_IF_FALSE:
        case EMBC_POP_JUMP_BACKWARD_IF_TRUE:
        case EMBC_POP_JUMP_BACKWARD_IF_NONE:
        case EMBC_POP_JUMP_BACKWARD_IF_NOT_NONE:
#endif
            return in->next - in->arg;
        default: return in->next + in->arg;
    }
}

/* Where FOR_ITER continues once its iterator is exhausted (it pops the iterator first):
 * 3.11 at its target; 3.12 past the END_FOR its target is. */
static inline int em_for_iter_exit(const EmInstr *in) {
#ifdef EMBC_END_FOR
    return em_jump_target(in) + 1 + em_bc_caches[EMBC_END_FOR];
#else
    return em_jump_target(in);
#endif
}

/* The mapping a types.MappingProxyType object p reads (borrowed): CPython's mappingproxyobject
 * (Objects/descrobject.c) is a PyObject_HEAD and the mapping, on 3.11 to 3.13. */
static inline PyObject *em_mappingproxy_mapping(PyObject *p) {
    typedef struct {
        PyObject_HEAD PyObject *mapping;
    } EmMappingProxy;
    return ((EmMappingProxy *)p)->mapping;
}

/* A fast-local kind that only the function's own code reads (not a cell, free variable; on
 * 3.12 a comprehension's hidden local counts as plain). */
static inline int em_kind_plain_local(int kind) { return (kind & ~0x10) == EM_CO_FAST_LOCAL; }

#endif
