/* em_exc.c: exceptions inside traced code. A raise the trace can prove (an operator on
 * constants that raises, a missing key of a dict whose keys are known, `raise` of an
 * exception made from constants) travels up as an abort carrying the exception; the loop of
 * each frame looks for a handler in its exception table and, when there is one, continues there
 * as CPython would (a with block's handler calls its __exit__ with the exception: h_with_except_start). Unhandled, it stays an abort: the root
 * instruction then runs as plain Python at a graph break and raises for real.
 */
#include <stdarg.h>

#include "../pyver/em_state.h"
#include "em_rec.h"

/* exc raised while T->handled is handled: exc.__context__ is it, as CPython sets it, cutting
 * the handled exception's context chain where it reaches exc (no new cycle; an old cycle ends
 * the walk). 0; -1 when the handled exception is not an object the trace has (one of the
 * frame's: the context of a constant cannot name it). */
static int set_context(EmTracer *T, PyObject *exc) {
    EmSym *h = T->handled;
    if (!h || !PyExceptionInstance_Check(exc)) return 0;
    if (h->kind != SYM_CONST) return -1;
    PyObject *hv = h->obj;
    if (hv == exc || !PyExceptionInstance_Check(hv)) return 0;
    PyObject *o = hv, *slow = hv;
    for (int toggle = 0;;) {
        PyObject *c = PyException_GetContext(o); /* new reference or NULL */
        if (!c) break;
        Py_DECREF(c); /* kept alive by o */
        if (c == exc) {
            PyException_SetContext(o, NULL);
            break;
        }
        o = c;
        if (o == slow) break; /* a cycle that was there before */
        if (toggle) {
            PyObject *s = PyException_GetContext(slow);
            Py_XDECREF(s);
            slow = s;
        }
        toggle = !toggle;
    }
    PyException_SetContext(exc, Py_NewRef(hv));
    return 0;
}

/* exc raised (chain: a new raise, which sets its context; else a re-raise, which does not) */
static EmStatus raise_obj(EmTracer *T, PyObject *exc, int chain, const char *detail) {
    if (chain && set_context(T, exc))
        return em_trace_fail(T, EMA_VALUE, "%s while an exception of the frame is handled", detail);
    if (!T->raised && !(T->raised = PyList_New(0))) return EM_ERR;
    if (PyList_Append(T->raised, exc)) return EM_ERR;
    Py_XSETREF(T->exc, Py_NewRef(exc));
    return em_trace_fail(T, EMA_RAISE, "%s", detail);
}

EmStatus em_trace_raise(EmTracer *T, PyObject *exc, const char *fmt, ...) {
    char detail[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return raise_obj(T, exc, 1, detail);
}

EmStatus em_trace_raise_new(EmTracer *T, PyObject *type, PyObject *arg) {
    PyObject *e = arg ? PyObject_CallOneArg(type, arg) : PyObject_CallNoArgs(type);
    if (!e) return EM_ERR;
    PyObject *r = PyObject_Repr(e);
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    if (!u) PyErr_Clear(); /* a repr for the message only: the type's name instead */
    EmStatus st = em_trace_raise(T, e, "raises %s", u ? u : ((PyTypeObject *)type)->tp_name);
    Py_XDECREF(r);
    Py_DECREF(e);
    return st;
}

EmStatus em_trace_raise_msg(EmTracer *T, PyObject *type, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    EmStatus st = msg ? em_trace_raise_new(T, type, msg) : EM_ERR;
    Py_XDECREF(msg);
    return st;
}

EmStatus em_trace_raise_pending(EmTracer *T, const char *what) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    EmStatus st = ev && PyExceptionInstance_Check(ev) ? em_trace_raise(T, ev, "%s", what)
                                                      : em_trace_fail(T, EMA_VALUE, "%s", what);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    return st;
}

int em_trace_catch(EmTracer *T, int at) {
    int h, d, lasti;
    if (!T->exc) return 0;
    int r = em_exc_entry(T->code, at, &h, &d, &lasti);
    if (r != 1) return r;
    if (d > T->sp || h >= T->n_units) return 0;
    T->sp = d;
    if (lasti) {
        PyObject *li = PyLong_FromLong(at);
        EmSym *s = li ? em_sym_const(T, li) : NULL;
        Py_XDECREF(li);
        if (!s || em_push(T, s) != EM_OK) return -1;
    }
    EmSym *e = em_sym_const(T, T->exc);
    if (!e || em_push(T, e) != EM_OK) return -1;
    Py_CLEAR(T->exc);
    T->ip = h;
    return 1;
}

/* ---- handlers ---- */

EmStatus h_push_exc_info(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    EmSym *v = POP(), *prev = T->handled ? T->handled : em_sym_const(T, Py_None);
    if (!prev) return EM_ERR;
    T->handled = v;
    EmStatus st = em_push(T, prev);
    return st == EM_OK ? em_push(T, v) : st;
}

EmStatus h_pop_except(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(1);
    EmSym *v = POP();
    T->handled = v->kind == SYM_CONST && v->obj == Py_None ? NULL : v;
    return EM_OK;
}

EmStatus h_check_exc_match(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(2);
    EmSym *type = POP(), *exc = TOP(1);
    /* the exception: one the trace raised, or one from the frame (a resume function entered at
     * a handler), whose type is guarded */
    int known = exc->kind == SYM_CONST ||
                (exc->kind == SYM_OBJ && em_sym_type_guarded(exc) && PyExceptionInstance_Check(exc->obj));
    if ((type->kind != SYM_OBJ && type->kind != SYM_CONST && type->kind != SYM_TUPLE) || !known)
        return em_trace_fail(T, EMA_VALUE, "except clause on a %s", em_sym_describe(type));
    PyObject *tv = em_sym_value(T, type);
    if (!tv) return PyErr_Occurred() ? EM_ERR : em_trace_fail(T, EMA_VALUE, "except clause type");
    int m = PyErr_GivenExceptionMatches(exc->obj, tv);
    Py_DECREF(tv);
    return em_push(T, em_sym_const(T, m ? Py_True : Py_False));
}

/* raise e (chain: a new raise, not RERAISE or a bare `raise`) */
static EmStatus raise_sym(EmTracer *T, EmSym *e, int chain) {
    if (e->kind == SYM_CONST && PyExceptionInstance_Check(e->obj)) {
        PyObject *r = PyObject_Repr(e->obj);
        const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
        if (!u) PyErr_Clear(); /* a repr for the message only */
        char detail[160];
        snprintf(detail, sizeof(detail), "raise %s", u ? u : "?");
        Py_XDECREF(r);
        return raise_obj(T, e->obj, chain, detail);
    }
    if ((e->kind == SYM_OBJ || e->kind == SYM_CONST) && PyExceptionClass_Check(e->obj))
        return em_trace_raise_new(T, e->obj, NULL);
    return em_trace_fail(T, EMA_VALUE, "raise of a %s", em_sym_describe(e));
}

/* RERAISE n pops the exception only (n > 0: the lasti n below it is read, not popped). */
EmStatus h_reraise(EmTracer *T, const EmInstr *in) {
    NEED(1 + in->arg);
    return raise_sym(T, POP(), 0);
}

/* A with block left by an exception: exit(type, exc, tb) called, its result pushed (true
 * suppresses the exception). Stack: exit, lasti, previous exception, exc. tb is a SYM_TB (the
 * exception was raised in the trace: its traceback is no object ember has). */
EmStatus h_with_except_start(EmTracer *T, const EmInstr *in) {
    (void)in;
    NEED(4);
    EmSym *exit_fn = TOP(4), *exc = TOP(1);
    if (exc->kind != SYM_CONST || !PyExceptionInstance_Check(exc->obj))
        return em_trace_fail(T, EMA_VALUE, "a with block left by an exception (%s)", em_sym_describe(exc));
    EmSym *args[3] = {em_sym_const(T, (PyObject *)Py_TYPE(exc->obj)), exc, em_sym_new(T, SYM_TB)}, *r = NULL;
    if (!args[0] || !args[2]) return EM_ERR;
    /* a block entered before a break: the resume function holds its __exit__, called as a call */
    EmStatus st = exit_fn->kind == SYM_EXIT ? em_ctx_exit_call(T, exit_fn, args, 3, &r)
                                            : em_call(T, exit_fn, NULL, args, 3, NULL, &r);
    return st == EM_OK ? em_push(T, r) : st;
}

/* a constant, or an exception class (known by identity) */
static int const_exc(const EmSym *s) {
    return s->kind == SYM_CONST || (s->kind == SYM_OBJ && PyExceptionClass_Check(s->obj));
}

EmStatus h_raise_varargs(EmTracer *T, const EmInstr *in) {
    NEED(in->arg);
    if (in->arg == 0) {
        if (!T->handled) return em_trace_fail(T, EMA_VALUE, "bare raise with no exception being handled");
        return raise_sym(T, T->handled, 0);
    }
    EmSym *cause = in->arg == 2 ? POP() : NULL, *e = POP();
    if (!cause) return raise_sym(T, e, 1);
    /* raise e from cause: e.__cause__ set (and __suppress_context__) on the exception raised */
    if (!const_exc(cause) || !const_exc(e))
        return em_trace_fail(T, EMA_VALUE, "raise from a %s", em_sym_describe(cause));
    PyObject *c = cause->obj;
    PyObject *ev = PyExceptionClass_Check(e->obj) ? PyObject_CallNoArgs(e->obj) : Py_NewRef(e->obj); /* owned */
    if (!ev) return em_trace_raise_pending(T, "raise");
    if (!PyExceptionInstance_Check(ev)) {
        Py_DECREF(ev);
        return raise_sym(T, e, 1); /* what it raises (a TypeError) is not modelled */
    }
    if (PyExceptionClass_Check(c)) {
        if (!(c = PyObject_CallNoArgs(c))) {
            Py_DECREF(ev);
            return em_trace_raise_pending(T, "raise from");
        }
    } else if (c == Py_None || PyExceptionInstance_Check(c)) {
        c = c == Py_None ? NULL : Py_NewRef(c);
    } else {
        Py_DECREF(ev);
        return em_trace_raise_msg(T, PyExc_TypeError, "exception causes must derive from BaseException");
    }
    PyException_SetCause(ev, c); /* steals c; sets __suppress_context__ */
    EmSym *es = em_sym_const(T, ev);
    Py_DECREF(ev);
    return es ? raise_sym(T, es, 1) : EM_ERR;
}
