/* em_rec.h: opcode handlers of the symbolic interpreter (internal to trace/). Each handler
 * decodes, pops, calls a family helper and pushes; type knowledge lives in em_sym.c and
 * em_call.c.
 */
#ifndef EM_REC_H
#define EM_REC_H

#include "em_trace.h"

EmStatus em_push(EmTracer *T, EmSym *s);

#define POP() (T->stack[--T->sp])
#define TOP(i) (T->stack[T->sp - (i)])
#define NEED(n)                                                                     \
    do {                                                                            \
        if (T->sp < (n)) return em_trace_fail(T, EMA_VALUE, "stack underflow"); \
    } while (0)
EmSym *em_local_get(EmTracer *T, int i, EmStatus *st);

#define X(name, fn) EmStatus fn(EmTracer *T, const EmInstr *in);
#include "em_trace_ops.def"
#undef X

#endif
