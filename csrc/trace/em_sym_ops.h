/* em_sym_ops.h: per-kind symbol operations (internal to trace/). Each symbol kind answers the
 * operations that opcode handlers apply to a value in one row, EmSymOps; handlers call the
 * dispatchers declared in em_trace.h (em_sym_getitem, em_sym_contains...), which pick the row
 * by kind. A NULL slot, or a kind without a row, means the kind has no such operation: the
 * dispatcher aborts the trace with a reason naming the kind.
 */
#ifndef EM_SYM_OPS_H
#define EM_SYM_OPS_H

#include "em_trace_int.h"

/* A method of list, tuple or dict the trace models (em_cont_methods.def); EM_CM__COUNT: any other. */
typedef enum {
#define X(name) EM_CM_##name,
#include "em_cont_methods.def"
#undef X
    EM_CM__COUNT
} EmContMethod;

/* What `a is b` can know of a sym of this kind (em_sym_is). */
typedef enum {
    EM_IDENT_UNKNOWN, /* nothing without more knowledge: `is` aborts */
    EM_IDENT_OBJ,     /* it is the object s->obj */
    EM_IDENT_CONST,   /* it is s->obj, which only a CONST or OBJ sym can also be */
    EM_IDENT_FRESH    /* an object no other sym stands for (a tensor: inputs are deduplicated
                       * by identity, in-place results reuse their sym) */
} EmIdent;

/* Every slot returns EM_OK, EM_ABORT (reason in T) or EM_ERR (Python exception set); the syms
 * it gives back are owned by the trace. */
typedef struct EmSymOps {
    EmIdent ident;
    /* base.name: the value, or for a method load the function and *self (NULL: a plain value) */
    EmStatus (*getattr)(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self);
    /* c[key], for a key that holds no tensor (em_sym_getitem records those first) */
    EmStatus (*getitem)(EmTracer *T, EmSym *c, EmSym *key, EmSym **out);
    /* c[key] = v */
    EmStatus (*setitem)(EmTracer *T, EmSym *c, EmSym *key, EmSym *v);
    /* key in c: *found 0 or 1 */
    EmStatus (*contains)(EmTracer *T, EmSym *c, EmSym *key, int *found);
    /* bool(s) */
    EmStatus (*truth)(EmTracer *T, EmSym *s, int *out);
    /* a <op> b (fn: op's Python operator) for operands that hold no tensor; NULL: evaluated on
     * their known values (em_sym_eval) */
    EmStatus (*binop)(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out);
    /* <op> a (NEG, POS, INVERT), fn its Python operator; NULL: evaluated on the known value */
    EmStatus (*unary)(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out);
    /* all items of iterable s at once, as a TUPLE or LIST sym (em_seq_items) */
    EmStatus (*items)(EmTracer *T, EmSym *s, EmSym **out);
    /* iter(s); NULL for a kind with items: an iterator over them (em_iter_over) */
    EmStatus (*iter)(EmTracer *T, EmSym *s, EmSym **out);
    /* next(it): the item, or *out NULL when it is exhausted */
    EmStatus (*next)(EmTracer *T, EmSym *it, EmSym **out);
    /* type(iter(s)) (rev: of reversed(s)), a new reference; NULL without an exception when
     * ember cannot tell without running user code */
    EM_NEW PyObject *(*iter_type)(EmTracer *T, EmSym *s, int rev);
    /* self.<m>(*args) for a method of the builtin type the kind models (em_container_method);
     * name: m's name, also for a method outside the table (m == EM_CM__COUNT) */
    EmStatus (*method)(EmTracer *T, EmContMethod m, const char *name, EmSym *self, EmSym **args, int nargs,
                       EmSym **out);
    /* fn(*args) where fn is a sym of this kind (self: the receiver of a method call, or NULL;
     * args: the arguments, keyword values last, named by kwnames); CALL_NEXT: em_call's later
     * steps (known callables, rules) decide by fn's value. NULL: a kind that cannot be called. */
    EmStatus (*call)(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
} EmSymOps;

/* The rows, in the file of each kind family: em_sym_ops.c (CONST, TENSOR), em_sym_seq.c
 * (TUPLE, LIST, ITER), em_sym_dict.c (DICT, VIEW), em_sym_obj.c (OBJ, NEW), em_call.c (the
 * kinds that are only called: BOUND, PARTIAL, EXIT), em_sym_int.c (INT), em_sym_slice.c (SLICE),
 * em_sym_float.c (FLOAT), em_sym_item.c (ITEM). */
extern const EmSymOps em_const_ops, em_tensor_ops, em_tuple_ops, em_list_ops, em_iter_ops, em_dict_ops, em_view_ops,
    em_obj_ops, em_new_ops, em_bound_ops, em_partial_ops, em_exit_ops, em_int_ops, em_slice_ops, em_float_ops,
    em_ctx_ops, em_set_ops, em_ndarray_ops, em_item_ops;
/* The call slots em_call.c implements for rows kept elsewhere. */
EmStatus em_obj_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
EmStatus em_call_by_value(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
/* Indexed by EmSymKind; NULL for a kind with no operations. */
extern const EmSymOps *const em_sym_ops[SYM__COUNT];

/* ---- helpers the rows share ---- */

/* Attribute loads of each kind (em_sym.c). */
EmStatus em_sym_tensor_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self);
EmStatus em_sym_obj_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self);
EmStatus em_sym_const_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self);
/* base.name for a method descriptor of the builtin type tp that base's kind models (list.append):
 * the method with self = base; else the abort naming base's kind (em_sym_ops.c). */
EmStatus em_sym_type_method(EmTracer *T, PyTypeObject *tp, EmSym *base, PyObject *name, int method, EmSym **out,
                            EmSym **self);
/* The checks before c[key] = v on a container that is not a tensor: c was made while tracing
 * (em_sym_own) and key is a constant. EM_OK, else the abort. */
EmStatus em_sym_store_check(EmTracer *T, EmSym *c, EmSym *key);
/* c[key] / key in c evaluated on the known values of c and key (constants, objects known by
 * identity, views of dicts of constants); aborts when they are not known (em_sym_ops.c). */
EmStatus em_sym_getitem_known(EmTracer *T, EmSym *c, EmSym *key, EmSym **out);
EmStatus em_sym_contains_known(EmTracer *T, EmSym *c, EmSym *key, int *found);
/* d[key] on a dict (or dict subclass) read from the frame and not wrapped whole, an OBJ sym
 * (em_sym_dict.c). */
EmStatus em_frame_dict_getitem(EmTracer *T, EmSym *d, EmSym *key, EmSym **out);
/* iter(src): an ITER sym over src's items (taken now: em_seq_items), of the Python type of
 * iter(src), watching src (what: as em_iter_watch) (em_sym_seq.c). */
/* Items x and y compared as tuple and dict comparisons do, `x is y or x == y`, where that runs
 * no code of theirs: the same sym, two constants, two tuples (or lists) item by item, an object
 * compared by identity (em_set_item_kind 1) with such an object or a constant (em_sym_is, which
 * may guard). lookup: as a dict or set lookup after equal hashes, where distinct tensors (hashed
 * by id) are unequal without ==. *eq set; CALL_NEXT for any other pair; EM_ABORT, EM_ERR
 * (em_sym_ops.c). */
EmStatus em_sym_items_eq(EmTracer *T, EmSym *x, EmSym *y, int lookup, int *eq);
/* Whether a tuple or list of this seq_type compares as tuple's == does: none, a namedtuple,
 * torch.Size. */
int em_seq_plain_eq(PyObject *seq_type);
EmStatus em_iter_over(EmTracer *T, EmSym *src, char what, EmSym **out);
/* type(iter(sample)) (rev: of reversed(sample)) by ember/_rules.py iter_type; steals sample (NULL:
 * making it failed, the exception is set). A new reference, or NULL (with an exception only on
 * error). */
EM_NEW PyObject *em_iter_type_of(EM_STEALS PyObject *sample, int rev);
/* The methods of dict read through a slot (an OBJ sym of a dict, em_cont.c). */
EmStatus em_frame_dict_method(EmTracer *T, EmContMethod m, const char *name, EmSym *self, EmSym **args, int nargs,
                              EmSym **out);
/* The methods of list, tuple and dict syms (em_cont.c). */
EmStatus em_list_method(EmTracer *T, EmContMethod m, const char *name, EmSym *self, EmSym **args, int nargs,
                        EmSym **out);
EmStatus em_tuple_method(EmTracer *T, EmContMethod m, const char *name, EmSym *self, EmSym **args, int nargs,
                         EmSym **out);
EmStatus em_dict_method(EmTracer *T, EmContMethod m, const char *name, EmSym *self, EmSym **args, int nargs,
                        EmSym **out);

#endif
