/* em_emit.h: the bytecode assembler. An EmAsm is an instruction list with labels (jump
 * targets are labels, never offsets), per-instruction source lines and exception-table
 * entries over label ranges. em_asm_build lays it out (EXTENDED_ARG, inline CACHE units,
 * relative jumps with forward/backward variants chosen from the layout), writes the line
 * and exception tables, computes the stack depth and builds a code object from a template.
 * em_asm_decode does the reverse for an existing code object.
 *
 * Returns: 0, or -1 with a Python exception set (no memory, a layout it cannot build);
 * em_asm_label a label or -1; code objects are new references, NULL with an exception set.
 */
#ifndef EM_EMIT_H
#define EM_EMIT_H

#include "../core/em_core.h"
#include "../pyver/em_pyver.h"

typedef struct {
    int op;     /* opcode (a jump's forward variant; em_asm_build picks the direction) */
    int arg;    /* operand; for jumps, filled by the assembler */
    int target; /* label of a jump's target, -1 otherwise */
    int line;   /* source line, -1 for none */
    int orig;   /* code unit of the opcode in the decoded code object, -1 if new */
} EmAsmInstr;

/* An exception-table entry. Entries may overlap: an instruction is covered by the first
 * entry in EmAsm.exc that covers it (list inner blocks before outer ones). */
typedef struct {
    int start, end, target; /* labels: [start, end) covered, handler */
    int depth, lasti;
} EmAsmExc;

typedef struct {
    EmVec(EmAsmInstr) ins;
    EmVec(int32_t) labels; /* label -> index of the instruction it precedes, -1 = unplaced */
    EmVec(EmAsmExc) exc;
} EmAsm;

void em_asm_init(EmAsm *A);
void em_asm_free(EmAsm *A);
int em_asm_label(EmAsm *A);              /* new unplaced label, or -1 (no memory) */
void em_asm_place(EmAsm *A, int label);  /* label = the next instruction appended */
int em_asm_op(EmAsm *A, int op, int arg, int line); /* 0 or -1 */
int em_asm_jump(EmAsm *A, int op, int label, int line);
int em_asm_is_jump(int op);
/* An instruction after which control never falls through to the next one. */
int em_asm_is_terminal(int op);

/* Decodes co into A (EXTENDED_ARG folded, caches dropped, jumps as labels). 0 or -1. */
int em_asm_decode(EmAsm *A, PyCodeObject *co);
/* Decodes the instructions of co in code-unit ranges [ranges[2i], ranges[2i+1]) (i < nranges),
 * appended in that order, with the exception-table entries whose handler is among them
 * (clipped to the ranges). Every jump must land inside the ranges (-1 with SystemError
 * otherwise). */
int em_asm_decode_ranges(EmAsm *A, PyCodeObject *co, const int *ranges, int nranges);

/* Builds a code object: `replace` keyword arguments applied to template `co` (a dict that
 * may set co_consts, co_names, co_varnames, co_argcount, ...), with co_code, co_linetable,
 * co_exceptiontable, co_stacksize and co_firstlineno computed from A. New ref or NULL. */
EM_NEW PyObject *em_asm_build(EmAsm *A, PyCodeObject *co, PyObject *replace_kw, int firstlineno);

/* ---- graph breaks (em_resume.c) ---- */

#define EM_MAX_SPAN 8

/* The try block innermost around a code unit (past the with blocks inside it). */
typedef struct {
    int handler;     /* code unit of its handler (PUSH_EXC_INFO), -1 for none */
    int depth, lasti; /* its exception-table entry's stack depth and lasti flag */
} EmTry;

/* What the transformed code of a frame that breaks at instruction X must do. Stack slots
 * and changed locals are rebuilt from a tuple of values the graph returns (the extra
 * argument `__ember_vals`), X runs as plain Python, then the resume function continues
 * with the live locals and the stack after X as arguments. */
typedef struct {
    int at, next;     /* code units of X's opcode and of the instruction after X */
    int op, arg;      /* X */
    int kw_const;     /* KW_NAMES operand pending for a CALL at X, or -1 */
    int nstack;       /* stack depth before X */
    int *stack_val;   /* per slot: index into the values tuple, -1 for a NULL */
    int nstore;
    int *store_local; /* slots to store from the values tuple (a cell variable's slot: its cell) ... */
    int *store_val;   /* ... and the index of each value */
    int nlive;
    int *live;        /* plain locals passed to the resume function, in order */
    uint64_t priv;    /* bit i: cell variable i is the resume functions' own cell, not a free variable
                       * (unbound at the break, held by no closure: em_trace_break_outputs) */
    uint8_t *maybe;   /* per live local (NULL: none): 1 when it may be unbound there (a loop run as
                       * Python assigned it first or deleted it): passed as em_state.unbound then,
                       * which the resume function deletes */
    int stack_after;  /* stack depth after X */
    int jump_to;      /* X a conditional jump: code unit of its target, else -1 */
    uint8_t *after_null; /* per slot of the stack after X: 1 for a NULL (a pending call's) */
    int line;         /* source line of X */
    EmTry try_;       /* the try block around X: if X raises, its handler continues in a resume function */
    /* X the loop of an inlined comprehension (em_comprehension_span): code units [at, next)
     * and the handler blocks run as plain Python */
    int region, cover;         /* X a comprehension's loop; cover: the unit it opens at */
    int nspan;
    int span[2 * EM_MAX_SPAN]; /* handler blocks [span[2i], span[2i+1]) */
} EmBreakPlan;

/* The loop of an inlined comprehension (3.12, PEP 709), which a break inside it runs whole as
 * plain Python: from its FOR_ITER (the names it uses saved and cleared, its result started)
 * to where the loop exits, plus the handler blocks of its exception entries (which restore
 * the names and re-raise) found elsewhere in the code. */
typedef struct {
    int start, end; /* code units [start, end): FOR_ITER .. its exit */
    int cover;      /* the comprehension's first unit (outside its own exception entry) */
    int nspan;
    int span[2 * EM_MAX_SPAN]; /* handler blocks [span[2i], span[2i+1]) */
    int loop;       /* a loop of the function's own (em_loop_span), not a comprehension's */
    int exits;      /* a loop: control reaches `end` (else it only returns or raises) */
    int pops;       /* values its code takes off the stack (a for loop's iterator): 1 or 0 */
    int is_try;     /* a try statement (em_try_span), run as a loop is (`loop` set too) */
} EmRegion;
/* Fills R for the outermost comprehension whose loop holds code unit `at`: 1; 0 when `at`
 * is in none (or the interpreter inlines none); 0 with *why when it is in one that cannot run
 * on its own (it assigns a variable of the function, :=); -1 on error. */
int em_comprehension_span(PyCodeObject *co, int at, EmRegion *R, const char **why);
/* Fills R for the outermost loop holding code unit `at` (a for or while loop: from the target
 * of its backward jump to where it exits, past an else clause its break skips), which a break
 * inside it runs whole as plain Python, with the blocks its exception handlers and their jumps
 * reach outside it (the handler of a block around the loop excluded): 1; 0 when `at` is in no
 * loop, or with *why in one of a shape that cannot run on its own; -1 on error. */
int em_loop_span(PyCodeObject *co, int at, EmRegion *R, const char **why);
/* Fills R for the try statement one of whose except (or finally) clauses holds code unit
 * `at`, which a break inside the clause runs whole as plain Python (the try block and its
 * handlers, as a loop region: from the try block's first unit to where its handlers continue,
 * with handler blocks laid out elsewhere as spans): 1; 0 when `at` is in no handler, or with
 * *why for a shape that cannot run on its own; -1 on error. */
int em_try_span(PyCodeObject *co, int at, EmRegion *R, const char **why);
/* The local slots loop region R stores (stored[i]) and deletes (deleted[i]), for i < n. */
void em_region_stores(PyCodeObject *co, const EmRegion *R, char *stored, char *deleted, int n);
/* The cell slots (localsplus indices below 64; all bits when unknown) region R stores into,
 * deletes or captures in a closure. */
uint64_t em_region_cells(PyCodeObject *co, const EmRegion *R);

#define EM_MAX_WITH 16
/* Stack depths (exception-table depth: the block's __exit__ is the value below it) of the
 * with blocks open at code unit `at`, innermost first, up to the innermost try block around
 * them (*t); returns their number, or -1 inside an except clause (or more than max blocks,
 * or an exception table of unexpected shape). */
int em_exc_chain(PyCodeObject *co, int at, int *depths, int max, EmTry *t);
/* The code unit whose exception entries are the blocks around a break at X (code unit at,
 * opcode op): at, or for a RERAISE ending an except clause or a finally block's exception path,
 * the clause's cleanup (COPY 3, POP_EXCEPT, RERAISE 1), which a break there skips: its
 * transformed code never entered the clause, so the exception state the cleanup would restore
 * is already the current one. */
int em_raise_cover(PyCodeObject *co, int at, int op);
/* Whether a frame of co can break at X (not in a loop body or a try block), or run
 * comprehension loop R there when R is not NULL. Returns 1, or 0 with a reason in why. */
int em_break_possible(PyCodeObject *co, int at, const EmRegion *R, const char **why);
/* Code of the resume function that continues co at code unit resume_at (the instruction
 * after X, or a jump's target) with the stack after X; the frame's cells and free variables
 * are its free variables (the transformed code makes it with them). New ref or NULL. */
EM_NEW PyObject *em_emit_resume(PyCodeObject *co, const EmBreakPlan *plan, int resume_at);
/* The resume code of a generator suspended at a yield, from OUT_GEN's spec (code, unit of the
 * yield, live local slots, per stack slot a NULL flag, line; em_out.h): a generator function
 * over the live locals and the stack values (the yielded value's last) whose first run pushes
 * them and runs that yield again, so it stops where the original did; its free variables are
 * the code's cells, then its free variables. New reference, or NULL with an exception. */
EM_NEW PyObject *em_emit_gen_resume(PyObject *spec);
/* Transformed code of co for the break; resume is the resume function (NULL: a loop region that
 * never exits, after which nothing runs) (co without cells
 * or free variables) or its code (built over the frame's cells and closure at run time); resume2, for a
 * conditional jump at X, continues at the jump's target; rexc, for X inside a try block,
 * continues at the block's handler with the stack below it, a lasti (when the handler takes
 * one) and the exception. */
EM_NEW PyObject *em_emit_transformed(PyCodeObject *co, const EmBreakPlan *plan, PyObject *resume, PyObject *resume2,
                                     PyObject *rexc);

#endif
