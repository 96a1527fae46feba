/* em_trace.h: the symbolic interpreter. It walks a frame's bytecode over symbolic values
 * (EmSym), records tensor operations into an EmGraph, records the assumptions it made into
 * an EmGuardProg and describes the return value as an output tree. It never runs real
 * kernels: result metadata comes from torch's meta device, with devices tracked here.
 *
 * Returns, throughout trace/: an EmStatus (EM_OK; EM_ABORT with T->abort set, the frame is
 * not captured here; EM_ERR with a Python exception set). A function returning a pointer
 * (EmSym *, a new PyObject *) gives NULL with the same meaning: an exception set is EM_ERR,
 * none is an abort already recorded. Queries return 1/0, and -1 with an exception when they
 * can fail (em_infer_*: 1 inferred, 0 not, -1 error).
 */
#ifndef EM_TRACE_H
#define EM_TRACE_H

#include "../guard/em_guard.h"
#include "../ir/em_ir.h"
#include "../ir/em_out.h"
#include "../ir/em_size.h"
#include "../pyver/em_pyver.h"

typedef enum {
#define X(e, fmt) EMA_##e,
#include "em_aborts.def"
#undef X
    EMA__COUNT
} EmAbort;

typedef struct EmSym EmSym; /* a symbolic value: em_trace_int.h */

/* Which input dimensions are symbolic (ember.compile's `dynamic`). */
typedef enum {
    EM_DYN_STATIC = 0, /* dynamic=False: none (mark_dynamic still makes its dimensions symbolic) */
    EM_DYN_AUTO = 1,   /* dynamic=None: a dimension whose size changed since the last compile */
    EM_DYN_ALL = 2     /* dynamic=True: every dimension of every input tensor but parameters */
} EmDynMode;

/* Where symbol k is read from: dimension dim of graph input ref (guard slot slot), (dim -1,
 * ref -1) the Python int in slot, or (dim EM_LEAF_ITEM, slot -1) the int the graph's node ref
 * computes (an unbacked symbol: x.item()); expr: the symbol as an expression. */
typedef struct {
    EmRef ref;
    int32_t slot, dim, expr;
} EmSymLeaf;
#define EM_LEAF_ITEM (-2)

/* The state of one frame being traced: the intercepted frame's, or an inlined call's. An
 * inlined call saves its caller's as a whole (`EmFrame saved = T->frame`) and puts it back on
 * return, so every field declared here is saved and restored with the others. */
#define EM_FRAME_FIELDS                                                                     \
    PyCodeObject *code;     /* borrowed */                                                      \
    PyObject *code_bytes;   /* owned by whoever set up the frame (em_trace_run, em_inline) */ \
    const unsigned char *bytes;                                                             \
    int n_units;                                                                            \
    EmSym **locals;         /* nlocals entries; NULL = unbound */                                   \
    int nlocals;                                                                            \
    EmSym **stack;          /* stack_cap entries, sp used */                                         \
    int sp, stack_cap;                                                                      \
    PyObject *kwnames;      /* borrowed from co_consts, pending for the next CALL */             \
    int ip;                 /* code unit of the next instruction */                                         \
    int cur;                /* code unit of the current instruction */                                     \
    PyObject *globals, *builtins; /* of the function being traced (borrowed) */             \
    int32_t gslot, bslot;   /* guard slots of those dicts in an inlined frame, -1 = root's */ \
    EmSym *retval;                                                                          \
    int done;                                                                               \
    EmSym *gen_items;       /* tracing a generator expression: the ITER its yields go to */       \
    const struct EmFrame *parent; /* the caller's state while this frame runs; NULL at the root */
typedef struct EmFrame {
    EM_FRAME_FIELDS
} EmFrame;

enum { EM_STATE_GRAD = 1, EM_STATE_OTHER = 2 };

typedef struct EmTracer {
    EmGraph *G;
    EmGuardProg *P;
    /* the current frame, by field (T->sp) or whole (T->frame) */
    union {
        struct {
            EM_FRAME_FIELDS
        };
        EmFrame frame;
    };
    EmFrameIn in;      /* the intercepted frame's inputs */
    int depth;         /* inlining depth, 0 = the intercepted frame */
    int call_depth;    /* em_call calls in progress, one inside another (em_call.c) */
    long steps;
    /* bookkeeping */
    PyObject *seen;    /* dict: id(object) -> index in syms of the sym made for it, -1 while its
                        * items are being wrapped (em_sym_wrap) */
    int wrap_depth;    /* containers being wrapped, outermost first (em_sym_wrap) */
    EmVec(EmSym *) syms; /* every sym, freed at the end */
    EmVec(int32_t) input_slots; /* guard slot of each graph input */
    /* nodes made inside a block without grad mode (the trace started with it) that require grad:
     * views of tensors that do, with no autograd history (an output of one: em_trace.c out_node) */
    EmVec(EmRef) nograd_views;
    /* nodes of x.data reads, recorded as x.detach() (which shares x's version counter): made
     * GETATTR "data" nodes (eager's own alias, with a counter of its own) once an in-place op
     * changes one of them or a value computed from one (em_call.c data_written) */
    EmVec(EmRef) data_nodes;
    /* small tensors whose values the trace knows: node known_refs[i] is known_vals[i], a real
     * tensor (a list, owned; em_fold.c) */
    EmVec(EmRef) known_refs;
    PyObject *known_vals;
    /* tensors a numpy array was made over (x.numpy(): em_sym_np.c): eager cannot resize their
     * storage, so out= into one (or a view of one) is not traced */
    EmVec(EmRef) numpy_refs;
    /* what a refused import lacked: (container, key, in_a_dict) triples (a list, owned; NULL if
     * none); a break the abort leads to keeps them guarded absent (em_driver.c) */
    PyObject *sticky;
    EmVec(EmOut) out;
    /* graph breaks */
    int break_at;      /* code unit of the root instruction to break at, -1 = none */
    int broke;         /* the trace stopped at break_at (stack and locals kept) */
    EmInstr brk;       /* that instruction */
    int abort_root_at; /* code unit of the root instruction that aborted, -1 if none */
    int no_break;      /* the abort may not become a graph break (state the break would drop:
                        * a numpy array no later code reads still holds its tensor's storage) */
    /* the root frame's last RAISE_VARARGS that raised (-1: none) and what it raised (kept alive
     * by `raised`): an exception that then leaves the frame through with blocks and finally
     * clauses breaks the graph there */
    int raise_at;
    PyObject *raise_exc;
    int retrace;       /* the trace changed what it read before (a lazy module initialized): the
                        * guards it made may not hold, the frame is traced again (em_driver.c) */
    int32_t *arg_slots; /* per local: guard slot of the argument it started as, or -1 */
    /* functions made while tracing (em_inline.c) */
    /* global state (em_ctx.c) */
    int grad;          /* grad mode at the current point of the trace */
    int start_grad;    /* grad mode when the trace started (restored when it ends) */
    int state_ops;     /* the graph changes global state: EM_STATE_GRAD | EM_STATE_OTHER */
    int grad_set_in_with; /* set_grad_enabled() was called inside an open with block */
    int autocast;      /* autocast is on, or a vmap level, at the current point of the trace:
                        * results are inferred by meta (or fake) runs only */
    int in_vmap;       /* a vmap level a twin entered is active */
    EmVec(EmSym *) ctx_open; /* contexts entered (their twins really entered), innermost last */
    /* attribute stores on objects from the frame, replayed by the output tree (em_obj.c):
     * triples (object, name constant, value), in the order of their last writes; store_ver
     * counts the writes (a write to a name stored before leaves stores.len as it was) */
    EmVec(EmSym *) stores;
    uint32_t store_ver;
    /* lists and dicts from the frame the trace changed (em_sym_mutable): their items are
     * written back after the graph ran (OUT_SETITEMS) */
    EmVec(EmSym *) mutated;
    /* tensors of the frame whose sizes or strides an in-place op changed (x.t_(), resize_):
     * em_trace_alias_guards guards them to be no other tensor input */
    EmVec(EmSym *) meta_mut;
    PyObject *key_tokens; /* list (NULL until one is made): the dict-key tokens (em_dict_key) */
    /* generators suspended with cleanup code pending (em_gen_finalize); the walk's stamp, how
     * many syms walks have visited (capped), and whether a close is being traced */
    EmVec(struct EmSym *) fin_gens;
    uint32_t walk_epoch;
    long walk_visits;
    int finalizing;
    /* program cells the trace reached (em_prog_cell), one SYM_CELL each */
    EmVec(EmSym *) prog_cells;
    /* getattr(o, n, default) / hasattr through Python code: the generic lookup found no such
     * attribute (absence guarded) with `missing_handlers` inlined frames having exception
     * handlers; `handlers` counts those frames now (em_inline.c) */
    int handlers, missing_attr, missing_handlers;
    /* exceptions (em_exc.c): the one being raised (owned; the abort status carries it up to a
     * frame whose exception table has a handler for it) and the one being handled (the
     * value PUSH_EXC_INFO saves), NULL for none */
    PyObject *exc;
    EmSym *handled;
    PyObject *raised; /* the exceptions raised in this trace (a list, owned; NULL: none) */
    PyObject *keep;   /* values read from the frame that nothing else holds (a C getter's fresh
                       * result): kept until the trace ends, so that no later object takes their
                       * ids (T->seen) (a list, owned; NULL: none) */
    /* classes made in the trace (collections.namedtuple): dict class -> (args, kwargs) to make
     * it again (owned; NULL: none). The class is the trace's twin; where it (or an instance)
     * leaves the trace a new class is made per call, once per output tree (made_out: dict class
     * -> the index of its entry in T->out). */
    PyObject *made_classes, *made_out;
    /* id() of objects made in the trace (no object of the frame is them): dict sym address ->
     * a negative int unique in this trace (no real id is negative; owned; NULL: none). Such an
     * int leaving the trace is id() of the object's output (em_trace.c out_value); a value
     * computed from it is not (README, limitations). */
    PyObject *fake_ids;
    /* instance dicts of frame objects read whole (em_instance_dict): the real dicts (borrowed,
     * alive in their objects) and the trace's copies, which later attribute stores update */
    EmVec(PyObject *) idict_real;
    EmVec(EmSym *) idict_copy;
    /* symbolic sizes (em_sym_int.c): the expressions and relations, where each symbol is read
     * from, and per graph node its sizes: node_dims[r] is the first of its ndim expressions in
     * dim_exprs, EM_DIMS_STATIC (its traced sizes) or EM_DIMS_UNKNOWN (no rule gave them: a
     * read specializes what it was computed from); nodes from dyn_from on default to
     * unknown, earlier ones to static. expr_ref: per expression, the graph node computing it
     * (-1: none yet); node_expr: per node, the expression an int node computes (-1: none). */
    EmSizes sizes;
    int dyn_mode;        /* EmDynMode */
    int float_input;     /* a graph input is a float (SYM_FLOAT): the FX export makes it a SymFloat */
    int floats_ok;       /* em_op_record of a pointwise operator: a float input stays one */
    int fullgraph;       /* a break would fail the compile: x.item() is captured (em_sym_item.c) */
    int item_dummy;      /* which stand-in a SYM_ITEM is in meta runs (em_item_dummy) */
    int stand_ins;       /* em_item_call_check's meta runs: a SYM_FLOAT is a stand-in too */
    PyObject *dyn_state; /* borrowed dict or NULL: source name -> sizes seen (automatic dynamic) */
    EmVec(EmSymLeaf) sym_leaf;
    EmVec(int32_t) node_dims, dim_exprs, expr_ref, node_expr;
    int32_t dyn_from;
    /* abort */
    EmAbort abort;
    int abort_line;
    PyObject *abort_file; /* owned */
    char abort_detail[200];
} EmTracer;

/* Traces the frame. Returns EM_OK (graph, guards and out filled), EM_ABORT (reason in T) or
 * EM_ERR (Python exception set). The caller owns G and P and must call em_trace_free. */
EmStatus em_trace_run(EmTracer *T, PyCodeObject *code, const EmFrameIn *in, EmGraph *G, EmGuardProg *P, int break_at,
                      int dyn_mode, PyObject *dyn_state, int fullgraph);
/* read[i] (i < n, plain locals) = 1 when local i may be read by the code reachable from code
 * unit `from` of the traced frame (every one when it may read its locals by name). 0, or -1
 * with an exception set. */
int em_trace_locals_read(EmTracer *T, char *read, int n, int from);
/* After a trace that broke: the output tree is a tuple of the stack values (NULLs skipped)
 * then the changed locals (for a cell variable its cell: OUT_CELL); fills the plan's stack,
 * store and live lists (malloc'd; live: plain locals only). *priv: bit i set for cell variable i
 * (not an argument) unbound at the break that the code after it may read before it stores it:
 * the resume function makes a cell of its own for it (an unbound read there raises
 * UnboundLocalError, as the frame's does, where a free variable's raises NameError). */
EmStatus em_trace_break_outputs(EmTracer *T, int **stack_val, int *nstack, int **store_local, int **store_val,
                                int *nstore, int **live, int *nlive, uint64_t *priv);
/* After a trace that broke at a call: 1 when the call takes gradients with respect to a tensor
 * the graph computes (torch.autograd.grad(outputs, inputs), backward(inputs=...)), else 0. A
 * functional backend returns such a tensor as an output of its own, cut from the values the
 * graph computes from it (`autograd.grad(t.sum(), t)` raised "not used in the graph"). */
int em_trace_grads_wrt_graph_value(EmTracer *T);
/* After a trace that broke where the instruction reads a tensor's data and drops it
 * (t.item(), bool(t), `if t:`): a tensor the graph computes that requires grad and that nothing
 * else holds is handed on detached. As a graph output it would take part in the backward:
 * AOTAutograd gives it a zero gradient, and 0 * inf made a gradient NaN where eager's is None
 * (fuzz 2805 #325). EM_OK, or EM_ERR/EM_ABORT. */
EmStatus em_trace_detach_read_at_break(EmTracer *T);
void em_trace_free(EmTracer *T);
/* After a trace, for the FX export (which makes the symbols SymInts): None for a trace without
 * symbols or float inputs, else (inputs, (exprs, relations)). inputs: per graph input, a tuple of per-dimension
 * symbol numbers (-1: static; pinned symbols count as static) for a tensor, a symbol number for
 * an int, None for an input without one (a float input: always). exprs: the size expressions as (EmSizeOp, a, b, value)
 * rows (value: a constant's, a symbol's traced value); relations: (EmSizeCmp, lhs, rhs) rows,
 * all of which the guards check. New reference, NULL with an exception on error. */
EM_NEW PyObject *em_trace_input_syms(const EmTracer *T);
/* How far the traced graph may have run and raised with nothing changed outside its results
 * (no in-place op, random draw or global state but grad mode before): *limit the first node that
 * changes something (the node count when none does; -1 when its global state forbids any rerun),
 * *meta 1 when that node is an in-place op on metadata that checks before it changes (detach_()
 * of a view raises, changing nothing), or when there is none. 0, or -1 with an exception
 * (em_inline.c). */
int em_trace_rerun_limit(EmTracer *T, int32_t *limit, int *meta);
/* Guards each tensor of the frame whose metadata the trace changed in place to be none of the
 * other tensor inputs (the trace read the other's sizes as its own). 0, or -1 with an exception. */
int em_trace_alias_guards(EmTracer *T);
/* Formats the abort as "file:line: reason". Returns a new str. */
EM_NEW PyObject *em_trace_abort_message(const EmTracer *T);
/* Records an abort (why, the message) at the current instruction: EM_ABORT, or EM_ERR when a
 * Python exception is already set. */
EmStatus em_trace_fail(EmTracer *T, EmAbort why, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
