/* em_size.c: the symbolic size DAG (em_size.h): hash-consing, folding, evaluation, text. */
#include "em_size.h"

#include <stdio.h>

const char *const em_size_cmp_text[6] = {"==", "!=", "<", "<=", ">", ">="};

void em_size_init(EmSizes *S) { memset(S, 0, sizeof(*S)); }

void em_size_free(EmSizes *S) {
    em_vec_free(&S->nodes);
    em_vec_free(&S->hint);
    em_vec_free(&S->srcs);
    em_vec_free(&S->rels);
    em_vec_free(&S->sym_hint);
    em_vec_free(&S->sym_lo);
    em_vec_free(&S->sym_hi);
    free(S->index);
    S->index = NULL;
    S->index_cap = 0;
}

#define COPY_VEC(d, s)                                                           \
    do {                                                                         \
        if ((s)->len) {                                                          \
            if (em_vec_reserve((d), (s)->len)) return -1;                        \
            memcpy((d)->data, (s)->data, sizeof(*(s)->data) * (size_t)(s)->len); \
        }                                                                        \
        (d)->len = (s)->len;                                                     \
    } while (0)

int em_size_copy(EmSizes *dst, const EmSizes *src) {
    em_size_init(dst);
    COPY_VEC(&dst->nodes, &src->nodes);
    COPY_VEC(&dst->hint, &src->hint);
    COPY_VEC(&dst->srcs, &src->srcs);
    COPY_VEC(&dst->rels, &src->rels);
    COPY_VEC(&dst->sym_hint, &src->sym_hint);
    return 0;
}

/* Python's // and % on int64; 0 or -1 (division by zero, overflow). */
static int floordiv(int64_t a, int64_t b, int64_t *q) {
    if (b == 0 || (a == INT64_MIN && b == -1)) return -1;
    int64_t d = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) d--;
    *q = d;
    return 0;
}

static int pymod(int64_t a, int64_t b, int64_t *r) {
    if (b == 0) return -1;
    if (a == INT64_MIN && b == -1) return *r = 0, 0;
    int64_t m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    *r = m;
    return 0;
}

static int apply(EmSizeOp op, int64_t a, int64_t b, int64_t *r) {
    switch (op) {
        case EMS_ADD: return __builtin_add_overflow(a, b, r) ? -1 : 0;
        case EMS_MUL: return __builtin_mul_overflow(a, b, r) ? -1 : 0;
        case EMS_FLOORDIV: return floordiv(a, b, r);
        case EMS_MOD: return pymod(a, b, r);
        case EMS_MIN: return *r = a < b ? a : b, 0;
        case EMS_MAX: return *r = a > b ? a : b, 0;
        default: return -1;
    }
}

static uint32_t node_hash(const EmSizeNode *n) {
    uint64_t h = (uint64_t)n->op * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uint32_t)n->a + 0x7F4A7C15ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)(uint32_t)n->b + 0x85EBCA6Bull + (h << 6) + (h >> 2);
    h ^= (uint64_t)n->c + 0xC2B2AE35ull + (h << 6) + (h >> 2);
    return (uint32_t)(h ^ (h >> 32));
}

static int same_node(const EmSizeNode *x, const EmSizeNode *y) {
    return x->op == y->op && x->a == y->a && x->b == y->b && x->c == y->c;
}

static int rehash(EmSizes *S, int32_t cap) {
    int32_t *ix = calloc((size_t)cap, sizeof(int32_t));
    if (!ix) return -1;
    for (int32_t i = 0; i < S->nodes.len; i++) {
        if (S->nodes.data[i].op == EMS_SYM) continue; /* symbols are never looked up */
        uint32_t h = node_hash(&S->nodes.data[i]) & (uint32_t)(cap - 1);
        while (ix[h]) h = (h + 1) & (uint32_t)(cap - 1);
        ix[h] = i + 1;
    }
    free(S->index);
    S->index = ix;
    S->index_cap = cap;
    return 0;
}

/* The expression n (with hint), existing or appended. */
static int32_t intern(EmSizes *S, EmSizeNode n, int64_t hint) {
    if (S->index_cap < 2 * (S->nodes.len + 1) && rehash(S, S->index_cap ? S->index_cap * 2 : 64)) return -1;
    uint32_t mask = (uint32_t)(S->index_cap - 1), h = node_hash(&n) & mask;
    if (n.op != EMS_SYM)
        for (; S->index[h]; h = (h + 1) & mask)
            if (same_node(&S->nodes.data[S->index[h] - 1], &n)) return S->index[h] - 1;
    int32_t e = S->nodes.len;
    if (em_vec_push(&S->nodes, n) || em_vec_push(&S->hint, hint)) return -1;
    if (n.op != EMS_SYM) S->index[h] = e + 1;
    return e;
}

int32_t em_size_const(EmSizes *S, int64_t c) {
    EmSizeNode n = {.op = EMS_CONST, .a = -1, .b = -1, .c = c};
    return intern(S, n, c);
}

static int32_t new_sym(EmSizes *S, int64_t hint, int unb, int64_t lo, int64_t hi) {
    EmSizeNode n = {.op = EMS_SYM, .unb = (uint8_t)unb, .a = S->sym_hint.len, .b = -1, .c = 0};
    if (em_vec_push(&S->sym_hint, hint) || em_vec_push(&S->sym_lo, lo) || em_vec_push(&S->sym_hi, hi)) return -1;
    return intern(S, n, hint);
}

int32_t em_size_new_sym(EmSizes *S, int64_t hint) { return new_sym(S, hint, 0, 0, EM_SIZE_INF); }

int32_t em_size_new_unbacked(EmSizes *S, int64_t hint, int64_t lo, int64_t hi) {
    EM_ASSERT(lo <= hint && hint <= hi, "hint %lld outside [%lld, %lld]", (long long)hint, (long long)lo,
              (long long)hi);
    return new_sym(S, hint, 1, lo, hi);
}

void em_size_narrow(EmSizes *S, int32_t k, int64_t lo, int64_t hi) {
    if (lo > S->sym_lo.data[k]) S->sym_lo.data[k] = lo;
    if (hi < S->sym_hi.data[k]) S->sym_hi.data[k] = hi;
}

static int is_const(const EmSizes *S, int32_t e, int64_t c) {
    return S->nodes.data[e].op == EMS_CONST && S->nodes.data[e].c == c;
}

/* e = x <op> const (const on the right), else -1 for x. */
static int32_t const_operand(const EmSizes *S, int32_t e, EmSizeOp op, int64_t *c) {
    const EmSizeNode *n = &S->nodes.data[e];
    if (n->op != (uint8_t)op || S->nodes.data[n->b].op != EMS_CONST) return -1;
    *c = S->nodes.data[n->b].c;
    return n->a;
}

/* A product as its constant and its other factors (at most 16; -1 when more). */
typedef struct {
    int64_t c;
    int32_t f[16];
    int n;
} Factors;

static int factors(const EmSizes *S, int32_t e, Factors *out, int depth) {
    const EmSizeNode *n = &S->nodes.data[e];
    if (n->op == EMS_CONST) {
        return __builtin_mul_overflow(out->c, n->c, &out->c) ? -1 : 0;
    }
    if (n->op == EMS_MUL && depth < 16) return factors(S, n->a, out, depth + 1) || factors(S, n->b, out, depth + 1);
    if (out->n == 16) return -1;
    out->f[out->n++] = e;
    return 0;
}

int32_t em_size_op(EmSizes *S, EmSizeOp op, int32_t a, int32_t b);

/* a // b when b's factors are among a's and its constant divides a's: the rest of a, with
 * every cancelled factor that is not a symbol (symbols are >= 1) required non-zero; -2 when
 * b does not divide a so (-1: out of memory). */
static int32_t cancel(EmSizes *S, int32_t a, int32_t b) {
    Factors fa = {.c = 1}, fb = {.c = 1};
    if (factors(S, a, &fa, 0) || factors(S, b, &fb, 0) || fb.n == 0 || fb.c == 0 || fa.c % fb.c) return -2;
    for (int i = 0; i < fb.n; i++) {
        int k = 0;
        while (k < fa.n && fa.f[k] != fb.f[i]) k++;
        if (k == fa.n) return -2;
        fa.f[k] = fa.f[--fa.n];
    }
    int32_t zero = em_size_const(S, 0);
    if (zero < 0) return -1;
    for (int i = 0; i < fb.n; i++)
        if ((S->nodes.data[fb.f[i]].op != EMS_SYM || S->nodes.data[fb.f[i]].unb) &&
            em_size_require(S, EMSR_NE, fb.f[i], zero))
            return -1;
    int32_t r = em_size_const(S, fa.c / fb.c);
    for (int i = 0; r >= 0 && i < fa.n; i++) r = em_size_op(S, EMS_MUL, r, fa.f[i]);
    return r;
}

int32_t em_size_op(EmSizes *S, EmSizeOp op, int32_t a, int32_t b) {
    int64_t ha = S->hint.data[a], hb = S->hint.data[b], h, c1;
    if (apply(op, ha, hb, &h)) return -1;
    if (em_size_is_const(S, a) && em_size_is_const(S, b)) return em_size_const(S, h);
    int commutes = op == EMS_ADD || op == EMS_MUL || op == EMS_MIN || op == EMS_MAX;
    /* commutative: a constant goes right, else the older operand left */
    if (commutes && (em_size_is_const(S, a) || (!em_size_is_const(S, b) && b < a))) {
        int32_t t = a;
        a = b;
        b = t;
    }
    switch (op) {
        case EMS_ADD: {
            if (is_const(S, b, 0)) return a;
            int32_t x = const_operand(S, a, EMS_ADD, &c1);
            if (x >= 0 && em_size_is_const(S, b)) { /* (x + c1) + c2 */
                int64_t c;
                if (__builtin_add_overflow(c1, S->nodes.data[b].c, &c)) break;
                int32_t k = em_size_const(S, c);
                return k < 0 ? -1 : em_size_op(S, EMS_ADD, x, k);
            }
            break;
        }
        case EMS_MUL: {
            if (is_const(S, b, 1)) return a;
            if (is_const(S, b, 0)) return b;
            int32_t x = const_operand(S, a, EMS_MUL, &c1);
            if (x >= 0 && em_size_is_const(S, b)) { /* (x * c1) * c2 */
                int64_t c;
                if (__builtin_mul_overflow(c1, S->nodes.data[b].c, &c)) break;
                int32_t k = em_size_const(S, c);
                return k < 0 ? -1 : em_size_op(S, EMS_MUL, x, k);
            }
            break;
        }
        case EMS_FLOORDIV: {
            if (is_const(S, b, 1)) return a;
            int32_t q = cancel(S, a, b);
            if (q != -2) return q;
            int32_t x = const_operand(S, a, EMS_MUL, &c1);
            if (x >= 0 && em_size_is_const(S, b) && S->nodes.data[b].c != 0 && c1 % S->nodes.data[b].c == 0) {
                int32_t k = em_size_const(S, c1 / S->nodes.data[b].c); /* (x * c1) // c2, c2 | c1 */
                return k < 0 ? -1 : em_size_op(S, EMS_MUL, x, k);
            }
            break;
        }
        case EMS_MOD: {
            if (is_const(S, b, 1) || is_const(S, b, -1)) return em_size_const(S, 0);
            int32_t x = const_operand(S, a, EMS_MUL, &c1);
            if (x >= 0 && em_size_is_const(S, b) && S->nodes.data[b].c != 0 && c1 % S->nodes.data[b].c == 0)
                return em_size_const(S, 0);
            break;
        }
        case EMS_MIN:
        case EMS_MAX:
            if (a == b) return a;
            break;
        default: return -1;
    }
    EmSizeNode n = {.op = (uint8_t)op, .unb = S->nodes.data[a].unb | S->nodes.data[b].unb, .a = a, .b = b, .c = 0};
    return intern(S, n, h);
}

int32_t em_size_sub(EmSizes *S, int32_t a, int32_t b) {
    int32_t m = em_size_const(S, -1);
    int32_t nb = m < 0 ? -1 : em_size_op(S, EMS_MUL, b, m);
    return nb < 0 ? -1 : em_size_op(S, EMS_ADD, a, nb);
}

static int cmp_holds(EmSizeCmp cmp, int64_t x, int64_t y) {
    switch (cmp) {
        case EMSR_EQ: return x == y;
        case EMSR_NE: return x != y;
        case EMSR_LT: return x < y;
        case EMSR_LE: return x <= y;
        case EMSR_GT: return x > y;
        default: return x >= y;
    }
}

int em_size_cmp_hint(const EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b) {
    return cmp_holds(cmp, S->hint.data[a], S->hint.data[b]);
}

/* ---- ranges (unbacked symbols) ---- */

typedef struct {
    int64_t lo, hi; /* EM_SIZE_NINF / EM_SIZE_INF: unbounded */
} Range;

static const Range whole = {EM_SIZE_NINF, EM_SIZE_INF};

static int finite(int64_t v) { return v != EM_SIZE_NINF && v != EM_SIZE_INF; }

/* x * y with either unbounded: its sign's end (0 * unbounded is 0); an overflow unbounded. */
static int64_t mul_end(int64_t x, int64_t y) {
    int64_t r;
    if (x == 0 || y == 0) return 0;
    if (finite(x) && finite(y) && !__builtin_mul_overflow(x, y, &r) && finite(r)) return r;
    return (x < 0) != (y < 0) ? EM_SIZE_NINF : EM_SIZE_INF;
}

static int64_t add_end(int64_t x, int64_t y, int64_t unbounded) {
    int64_t r;
    if (!finite(x) || !finite(y) || __builtin_add_overflow(x, y, &r) || !finite(r)) return unbounded;
    return r;
}

static int64_t div_end(int64_t x, int64_t c) {
    int64_t q;
    if (!finite(x)) return (x < 0) != (c < 0) ? EM_SIZE_NINF : EM_SIZE_INF;
    return floordiv(x, c, &q) ? EM_SIZE_INF : q;
}

static Range range_of(const EmSizes *S, int32_t e, int depth) {
    const EmSizeNode *n = &S->nodes.data[e];
    if (n->op == EMS_CONST) return (Range){n->c, n->c};
    if (n->op == EMS_SYM) return n->a < S->sym_lo.len ? (Range){S->sym_lo.data[n->a], S->sym_hi.data[n->a]} : whole;
    if (depth > 64) return whole;
    Range x = range_of(S, n->a, depth + 1), y = range_of(S, n->b, depth + 1), r = whole;
    switch (n->op) {
        case EMS_ADD: return (Range){add_end(x.lo, y.lo, EM_SIZE_NINF), add_end(x.hi, y.hi, EM_SIZE_INF)};
        case EMS_MUL: {
            int64_t p[4] = {mul_end(x.lo, y.lo), mul_end(x.lo, y.hi), mul_end(x.hi, y.lo), mul_end(x.hi, y.hi)};
            r.lo = r.hi = p[0];
            for (int i = 1; i < 4; i++) {
                if (p[i] < r.lo) r.lo = p[i];
                if (p[i] > r.hi) r.hi = p[i];
            }
            return r;
        }
        case EMS_FLOORDIV:
            if (y.lo != y.hi || !finite(y.lo) || y.lo == 0) return whole;
            return y.lo > 0 ? (Range){div_end(x.lo, y.lo), div_end(x.hi, y.lo)}
                            : (Range){div_end(x.hi, y.lo), div_end(x.lo, y.lo)};
        case EMS_MOD:
            if (y.lo != y.hi || !finite(y.lo) || y.lo == 0) return whole;
            return y.lo > 0 ? (Range){0, y.lo - 1} : (Range){y.lo + 1, 0};
        case EMS_MIN: return (Range){x.lo < y.lo ? x.lo : y.lo, x.hi < y.hi ? x.hi : y.hi};
        case EMS_MAX: return (Range){x.lo > y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi};
        default: return whole;
    }
}

int em_size_decide(const EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b) {
    if (a == b) return cmp == EMSR_EQ || cmp == EMSR_LE || cmp == EMSR_GE;
    Range x = range_of(S, a, 0), y = range_of(S, b, 0);
    int lt = finite(x.hi) && finite(y.lo) && x.hi < y.lo, le = finite(x.hi) && finite(y.lo) && x.hi <= y.lo,
        gt = finite(x.lo) && finite(y.hi) && x.lo > y.hi, ge = finite(x.lo) && finite(y.hi) && x.lo >= y.hi;
    switch (cmp) {
        case EMSR_LT: return lt ? 1 : ge ? 0 : -1;
        case EMSR_LE: return le ? 1 : gt ? 0 : -1;
        case EMSR_GT: return gt ? 1 : le ? 0 : -1;
        case EMSR_GE: return ge ? 1 : lt ? 0 : -1;
        case EMSR_EQ: return le && ge ? 1 : lt || gt ? 0 : -1;
        default: return le && ge ? 0 : lt || gt ? 1 : -1;
    }
}

static int unbacked(const EmSizes *S, int32_t a, int32_t b) { return S->nodes.data[a].unb || S->nodes.data[b].unb; }

static void undecided(EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b) {
    if (!S->undecided++) S->first_undecided = (EmSizeRel){.cmp = (uint8_t)cmp, .lhs = a, .rhs = b};
}

int em_size_assume(EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b) {
    if (!unbacked(S, a, b)) return em_size_require(S, cmp, a, b);
    if (em_size_decide(S, cmp, a, b) == 1) return 0;
    static const EmSizeCmp flipped[] = {EMSR_EQ, EMSR_NE, EMSR_GT, EMSR_GE, EMSR_LT, EMSR_LE};
    if (em_size_is_const(S, a)) { /* the constant right */
        int32_t t = a;
        a = b;
        b = t;
        cmp = flipped[cmp];
    }
    const EmSizeNode *x = &S->nodes.data[a];
    int64_t off = 0, c;
    if (x->op == EMS_ADD && em_size_is_const(S, x->b)) {
        off = S->nodes.data[x->b].c;
        x = &S->nodes.data[x->a];
    }
    if (!em_size_is_const(S, b) || x->op != EMS_SYM || !x->unb || __builtin_sub_overflow(S->nodes.data[b].c, off, &c) ||
        !finite(c) || !finite(c + 1) || !finite(c - 1))
        return 0; /* nothing a range says: the op raises where it fails */
    switch (cmp) { /* sym cmp c */
        case EMSR_EQ: em_size_narrow(S, x->a, c, c); break;
        case EMSR_LT: em_size_narrow(S, x->a, EM_SIZE_NINF, c - 1); break;
        case EMSR_LE: em_size_narrow(S, x->a, EM_SIZE_NINF, c); break;
        case EMSR_GT: em_size_narrow(S, x->a, c + 1, EM_SIZE_INF); break;
        case EMSR_GE: em_size_narrow(S, x->a, c, EM_SIZE_INF); break;
        default: break; /* != c: nothing a range says */
    }
    return 0;
}

int em_size_require(EmSizes *S, EmSizeCmp cmp, int32_t a, int32_t b) {
    EM_ASSERT(em_size_cmp_hint(S, cmp, a, b), "relation %d does not hold at the hints", (int)cmp);
    if ((em_size_is_const(S, a) && em_size_is_const(S, b)) || (a == b && cmp != EMSR_NE)) return 0;
    if (unbacked(S, a, b)) {
        if (em_size_decide(S, cmp, a, b) != 1) undecided(S, cmp, a, b);
        return 0;
    }
    for (int32_t i = 0; i < S->rels.len; i++) {
        const EmSizeRel *r = &S->rels.data[i];
        if (r->cmp == cmp && r->lhs == a && r->rhs == b) return 0;
    }
    EmSizeRel r = {.cmp = (uint8_t)cmp, .lhs = a, .rhs = b};
    return em_vec_push(&S->rels, r);
}

int em_size_add_src(EmSizes *S, int32_t slot, int32_t dim, int32_t sym) {
    EmSizeSrc s = {.slot = slot, .dim = dim, .sym = sym};
    return em_vec_push(&S->srcs, s);
}

int em_size_eval(const EmSizes *S, const int64_t *symvals, int64_t *vals) {
    for (int32_t i = 0; i < S->nodes.len; i++) {
        const EmSizeNode *n = &S->nodes.data[i];
        if (n->op == EMS_CONST) vals[i] = n->c;
        else if (n->op == EMS_SYM) vals[i] = symvals[n->a];
        else if (apply((EmSizeOp)n->op, vals[n->a], vals[n->b], &vals[i])) return -1;
    }
    return 0;
}

int32_t em_size_check(const EmSizes *S, const int64_t *vals) {
    for (int32_t i = 0; i < S->rels.len; i++) {
        const EmSizeRel *r = &S->rels.data[i];
        if (!cmp_holds((EmSizeCmp)r->cmp, vals[r->lhs], vals[r->rhs])) return i;
    }
    return -1;
}

static int text_at(const EmSizes *S, int32_t e, EmStrBuf *out, int paren) {
    const EmSizeNode *n = &S->nodes.data[e];
    switch (n->op) {
        case EMS_CONST: return em_sb_printf(out, "%lld", (long long)n->c);
        case EMS_SYM: return em_sb_printf(out, n->unb ? "u%d" : "s%d", n->a); /* u: unbacked */
        case EMS_MIN:
        case EMS_MAX:
            if (em_sb_puts(out, n->op == EMS_MIN ? "min(" : "max(") || text_at(S, n->a, out, 0) ||
                em_sb_puts(out, ", ") || text_at(S, n->b, out, 0))
                return -1;
            return em_sb_puts(out, ")");
        default: {
            static const char *const sym[] = {
                [EMS_ADD] = " + ", [EMS_MUL] = "*", [EMS_FLOORDIV] = "//", [EMS_MOD] = "%"};
            int p = paren && n->op == EMS_ADD;
            if ((p && em_sb_puts(out, "(")) || text_at(S, n->a, out, n->op != EMS_ADD) || em_sb_puts(out, sym[n->op]) ||
                text_at(S, n->b, out, 1))
                return -1;
            return p ? em_sb_puts(out, ")") : 0;
        }
    }
}

int em_size_text(const EmSizes *S, int32_t e, EmStrBuf *out) { return text_at(S, e, out, 0); }

int em_size_rel_text(const EmSizes *S, const EmSizeRel *r, EmStrBuf *out) {
    if (em_size_text(S, r->lhs, out) || em_sb_printf(out, " %s ", em_size_cmp_text[r->cmp])) return -1;
    return em_size_text(S, r->rhs, out);
}
