/* em_rec.h: opcode handlers of the symbolic interpreter (internal to trace/). Each handler
 * decodes, pops, calls a family helper and pushes; type knowledge lives with the symbol kinds
 * (em_sym_ops.h) and in em_call.c.
 */
#ifndef EM_REC_H
#define EM_REC_H

#include "em_trace_int.h"

EmStatus em_push(EmTracer *T, EmSym *s);

#define POP() (EM_ASSERT(T->sp > 0, "pop of an empty stack"), T->stack[--T->sp])
#define TOP(i) (*(EM_ASSERT((i) >= 0 && (i) <= T->sp, "TOP(%d) of %d", (int)(i), T->sp), &T->stack[T->sp - (i)]))
#define NEED(n)                                                                 \
    do {                                                                        \
        if (T->sp < (n)) return em_trace_fail(T, EMA_VALUE, "stack underflow"); \
    } while (0)
EmSym *em_local_get(EmTracer *T, int i, EmStatus *st);

#define X(name, fn) EmStatus fn(EmTracer *T, const EmInstr *in);
#include "em_trace_ops.def"
#undef X
/* handlers of opcodes only some versions have (the table lists those the running one has) */
EmStatus h_list_to_tuple(EmTracer *T, const EmInstr *in);
EmStatus h_load_fast_and_clear(EmTracer *T, const EmInstr *in);
EmStatus h_load_super_attr(EmTracer *T, const EmInstr *in);
EmStatus h_binary_slice(EmTracer *T, const EmInstr *in);
EmStatus h_store_slice(EmTracer *T, const EmInstr *in);
EmStatus h_delete_subscr(EmTracer *T, const EmInstr *in);
EmStatus h_end_for(EmTracer *T, const EmInstr *in);
EmStatus h_return_const(EmTracer *T, const EmInstr *in);
EmStatus h_end_send(EmTracer *T, const EmInstr *in);

#endif
