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
#undef Py_BUILD_CORE

#include "em_opcodes_gen.h"

#if PY_VERSION_HEX >= 0x030C0000
#define EM_PY312 1
#define EM_CAPTURE_SUPPORTED 0 /* 3.12 frame hook: callee-owned frames not handled yet */
#else
#define EM_PY312 0
#define EM_CAPTURE_SUPPORTED 1
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
/* A frame that has run no instruction yet (not a resumed generator or coroutine). */
static inline int em_frame_fresh(EmPyFrame *f) {
    return _PyInterpreterFrame_LASTI(f) < 0 && f->owner == FRAME_OWNED_BY_THREAD;
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

/* Instruction stream of a code object, de-specialized (co_code). */
static inline EM_NEW PyObject *em_code_bytes(PyCodeObject *co) { return PyCode_GetCode(co); }
static inline int em_code_nlocalsplus(PyCodeObject *co) { return co->co_nlocalsplus; }
static inline int em_code_nfree(PyCodeObject *co) { return co->co_nfreevars; }
static inline int em_code_kind(PyCodeObject *co, int i) {
    return (unsigned char)PyBytes_AS_STRING(co->co_localspluskinds)[i];
}
static inline PyObject *em_code_name(PyCodeObject *co, int i) {
    return PyTuple_GET_ITEM(co->co_localsplusnames, i);
}

/* Decoded instruction: code-unit index of the instruction (after its EXTENDED_ARGs). */
typedef struct {
    int op, arg;
    int at;   /* code unit of the opcode */
    int next; /* code unit of the next instruction (after inline caches) */
} EmInstr;

/* Decodes the instruction starting at code unit `at` (which may be an EXTENDED_ARG). */
static inline void em_decode(const unsigned char *code, int n_units, int at, EmInstr *out) {
    int arg = 0;
    while (at < n_units && code[2 * at] == EM_OP_EXTENDED_ARG) {
        arg = (arg << 8) | code[2 * at + 1];
        at++;
    }
    out->op = code[2 * at];
    out->arg = (arg << 8) | code[2 * at + 1];
    out->at = at;
    out->next = at + 1 + em_op_caches[out->op];
}

/* Operand decoding that differs between versions. */
/* The exception-table entry covering code unit u (3.11/3.12 format, Objects/exception_handling_notes.txt):
 * 1 with its handler, stack depth and lasti flag, 0 if none, -1 if the table cannot be read. */
static inline int em_exc_entry(PyCodeObject *co, int u, int *handler, int *depth, int *lasti) {
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
#ifdef EM_OP_LOAD_METHOD
    *name = arg;
    *method = op == EM_OP_LOAD_METHOD;
#else
    (void)op;
    *name = arg >> 1;
    *method = arg & 1;
#endif
}

/* Target of a relative jump, in code units. */
static inline int em_jump_target(const EmInstr *in) {
    switch (in->op) {
#ifdef EM_OP_JUMP_BACKWARD
        case EM_OP_JUMP_BACKWARD:
#endif
#ifdef EM_OP_JUMP_BACKWARD_NO_INTERRUPT
        case EM_OP_JUMP_BACKWARD_NO_INTERRUPT:
#endif
#ifdef EM_OP_POP_JUMP_BACKWARD_IF_FALSE
        case EM_OP_POP_JUMP_BACKWARD_IF_FALSE:
        case EM_OP_POP_JUMP_BACKWARD_IF_TRUE:
        case EM_OP_POP_JUMP_BACKWARD_IF_NONE:
        case EM_OP_POP_JUMP_BACKWARD_IF_NOT_NONE:
#endif
            return in->next - in->arg;
        default: return in->next + in->arg;
    }
}

#endif
