/* em_size.h: symbolic sizes. A hash-consed DAG of integer expressions over symbols (the
 * dynamic dimensions of a frame's inputs, and Python ints that change between calls), the
 * relations a trace relied on, and where each symbol is read from. The tracer builds it;
 * the guard program keeps a copy and evaluates it from the input sizes on every call, into a
 * caller's buffer (no allocation). Pure C: no Python.h.
 *
 * Returns: builders give an expression index (>= 0), or -1 when out of memory; em_size_eval
 * 0, or -1 when an operation has no value (a division by zero, an overflow); other ints 0 or
 * -1 (out of memory).
 */
#ifndef EM_SIZE_H
#define EM_SIZE_H

#include "../core/em_core.h"

typedef enum { EMS_CONST, EMS_SYM, EMS_ADD, EMS_MUL, EMS_FLOORDIV, EMS_MOD, EMS_MIN, EMS_MAX } EmSizeOp;

typedef struct {
    uint8_t op;   /* EmSizeOp */
    uint8_t unb;  /* it reads an unbacked symbol (em_size_new_unbacked) */
    int32_t a, b; /* operands (expression indices, a < own index); SYM: a = symbol number */
    int64_t c;    /* CONST: the value */
} EmSizeNode;

/* Relations, as Python's comparisons of the two sides. */
typedef enum { EMSR_EQ, EMSR_NE, EMSR_LT, EMSR_LE, EMSR_GT, EMSR_GE } EmSizeCmp;
typedef struct {
    uint8_t cmp; /* EmSizeCmp */
    int32_t lhs, rhs;
} EmSizeRel;

/* Where a symbol's value comes from on a call: dimension `dim` of the tensor in guard slot
 * `slot`, or (dim -1) the Python int in it. A symbol read from several places (input
 * dimensions of one size share a symbol) must have the same value in each. */
typedef struct {
    int32_t slot, dim, sym;
} EmSizeSrc;

/* Largest number of expressions a program may hold (em_size_eval's buffer). */
#define EM_SIZE_MAX 1024

typedef struct EmSizes {
    EmVec(EmSizeNode) nodes;
    EmVec(int64_t) hint; /* per expression: its value when traced */
    EmVec(EmSizeSrc) srcs;
    EmVec(EmSizeRel) rels;
    EmVec(int64_t) sym_hint; /* per symbol */
    /* the tracer's copy only: */
    int32_t *index; /* hash-consing table: expression + 1, 0 empty */
    int32_t index_cap;
    EmVec(int64_t) sym_lo, sym_hi; /* per symbol: the range its values lie in (EM_SIZE_NINF/INF: none) */
    int32_t undecided;             /* relations on unbacked symbols their ranges did not decide */
    EmSizeRel first_undecided;
} EmSizes;

#define EM_SIZE_NINF INT64_MIN
#define EM_SIZE_INF INT64_MAX

void em_size_init(EmSizes *S);
void em_size_free(EmSizes *S);
/* Copies nodes, sources and relations (not the hash table). 0 or -1. */
int em_size_copy(EmSizes *dst, const EmSizes *src);

int32_t em_size_const(EmSizes *S, int64_t c);
/* A new symbol whose value is hint when traced, as an expression. */
int32_t em_size_new_sym(EmSizes *S, int64_t hint);
/* A new unbacked symbol: a value the graph computes (x.item()), read from no input and never
 * guarded. Its values lie in [lo, hi]; hint, in that range, stands for it in meta runs only.
 * A relation on it holds only where its range decides it (em_size_require). */
int32_t em_size_new_unbacked(EmSizes *S, int64_t hint, int64_t lo, int64_t hi);
/* Narrows symbol k's range to [lo, hi] (it stays as it was past either end). */
void em_size_narrow(EmSizes *S, int32_t k, int64_t lo, int64_t hi);
/* a <op> b for op ADD..MAX, folded and simplified; its hint follows Python's int semantics.
 * -1 also when the hint has no value (FLOORDIV or MOD by zero, overflow): the caller must
 * not build it. */
int32_t em_size_op(EmSizes *S, EmSizeOp op, int32_t a, int32_t b);
int32_t em_size_sub(EmSizes *S, int32_t a, int32_t b);
static inline int em_size_is_const(const EmSizes *S, int32_t e) { return S->nodes.data[e].op == EMS_CONST; }
static inline int64_t em_size_hint(const EmSizes *S, int32_t e) { return S->hint.data[e]; }
/* Whether cmp holds between the hints of a and b. */
int em_size_cmp_hint(const EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b);
/* Records that `a cmp b` must hold (it holds for the hints); nothing for constants or a
 * relation already recorded. A relation on an unbacked symbol is no guard: where the ranges
 * do not decide it true, it counts in S->undecided (the trace relied on a hint: it must not be
 * installed). 0 or -1. */
int em_size_require(EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b);
/* `a cmp b` for every value in the ranges (backed symbols: >= 0): 1 true, 0 false, -1 either. */
int em_size_decide(const EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b);
/* `a cmp b`, which the op being traced checks itself (it raises otherwise): required; on
 * unbacked symbols no guard (nothing to count undecided), and for an unbacked symbol plus a
 * constant against a constant its range narrowed. 0 or -1. */
int em_size_assume(EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b);
int em_size_add_src(EmSizes *S, int32_t slot, int32_t dim, int32_t sym);

/* Evaluates every expression from the symbols' values into vals (nodes.len entries). */
int em_size_eval(const EmSizes *S, const int64_t *symvals, int64_t *vals);
/* Index of the first relation vals break, or -1 when all hold. */
int32_t em_size_check(const EmSizes *S, const int64_t *vals);
/* Appends expression e as text ("s0*2 + 1"). 0 or -1. */
int em_size_text(const EmSizes *S, int32_t e, EmStrBuf *out);
int em_size_rel_text(const EmSizes *S, const EmSizeRel *r, EmStrBuf *out);
extern const char *const em_size_cmp_text[6];

#endif
