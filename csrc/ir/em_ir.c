/* em_ir.c: construction, verification and the deterministic dump of EmGraph.
 * Consumes nodes, arguments and constants from the tracer; produces the graph the
 * backends and the runtime read. Pure C.
 */
#include <stdio.h>

#include "em_ir.h"

const EmOpInfo em_op_info[EMOP__COUNT] = {
#define X(e, name, kind, flags, nb, fn, py) {name, EMOK_##kind, flags, py},
#include "em_ops.def"
#undef X
};

void em_graph_init(EmGraph *G, void (*retain)(void *), void (*release)(void *)) {
    memset(G, 0, sizeof(*G));
    G->retain = retain;
    G->release = release;
}

void em_graph_free(EmGraph *G) {
    for (int32_t i = 0; i < G->consts.len; i++)
        if (G->consts.data[i].obj && G->release) G->release(G->consts.data[i].obj);
    em_vec_free(&G->nodes);
    em_vec_free(&G->args);
    em_vec_free(&G->consts);
    em_vec_free(&G->dims);
    em_vec_free(&G->outputs);
    em_vec_free(&G->text);
}

int32_t em_ir_text(EmGraph *G, const char *s) {
    int32_t n = (int32_t)strlen(s) + 1, at = G->text.len;
    if (em_vec_reserve(&G->text, n)) return -1;
    memcpy(G->text.data + at, s, (size_t)n);
    G->text.len += n;
    return at;
}

int32_t em_ir_const(EmGraph *G, EmConstKind kind, int64_t i, double f, void *obj, const char *text) {
    int32_t t = em_ir_text(G, text ? text : "?");
    if (t < 0) return -1;
    EmConst c = {.kind = (uint8_t)kind, .i = i, .f = f, .obj = obj, .text = t};
    if (em_vec_push(&G->consts, c)) return -1;
    if (obj && G->retain) G->retain(obj);
    return G->consts.len - 1;
}

int32_t em_ir_arg(EmGraph *G, EmArgKind kind, int32_t v, int32_t n) {
    EM_ASSERT(kind != EMARG_REF || (v >= 0 && v < G->nodes.len), "argument ref %%%d of %d nodes", v, G->nodes.len);
    EM_ASSERT(kind != EMARG_CONST || (v >= 0 && v < G->consts.len), "constant %d of %d", v, G->consts.len);
    EM_ASSERT(kind == EMARG_REF || kind == EMARG_CONST || (n >= 0 && v >= 0 && v + n <= G->args.len),
              "sequence argument [%d, %d) of %d", v, v + n, G->args.len);
    EmArg a = {.kind = (uint8_t)kind, .v = v, .n = n};
    if (em_vec_push(&G->args, a)) return -1;
    return G->args.len - 1;
}

EmRef em_ir_node(EmGraph *G, EmOp op, int32_t args, int32_t nargs, int32_t kwnames, int32_t nkw, int32_t fn) {
    EM_ASSERT((unsigned)op < EMOP__COUNT, "op %d", (int)op);
    EM_ASSERT(nargs >= 0 && nkw >= 0 && nkw <= nargs, "%d arguments, %d keywords", nargs, nkw);
    EM_ASSERT(nargs == 0 || (args >= 0 && args + nargs <= G->args.len), "arguments [%d, %d) of %d", args, args + nargs,
              G->args.len);
    EM_ASSERT(fn >= -1 && fn < G->consts.len, "callable constant %d of %d", fn, G->consts.len);
    EM_ASSERT(nkw == 0 || (kwnames >= 0 && kwnames + nkw < G->consts.len), "keyword names %d (+%d) of %d constants",
              kwnames, nkw, G->consts.len);
    EmNode n = {.op = (uint16_t)op,
                .vkind = EMV_OBJ,
                .dtype = -1,
                .dev_type = -1,
                .dev_index = -1,
                .args = args,
                .nargs = nargs,
                .kwnames = kwnames,
                .nkw = nkw,
                .fn = fn,
                .aux = -1,
                .label = -1};
    if (em_vec_push(&G->nodes, n)) return -1;
    return G->nodes.len - 1;
}

int em_ir_set_tensor(EmGraph *G, EmRef r, int dtype, int dev_type, int dev_index, int requires_grad, int ndim,
                     const int64_t *sizes, const int64_t *strides) {
    EM_ASSERT(ndim >= 0, "ndim %d", ndim);
    if (ndim > 255 || em_vec_reserve(&G->dims, 2 * ndim)) return -1;
    EmNode *n = em_ir_at(G, r);
    n->vkind = EMV_TENSOR;
    n->dtype = (int8_t)dtype;
    n->dev_type = (int8_t)dev_type;
    n->dev_index = (int8_t)dev_index;
    n->requires_grad = (uint8_t)requires_grad;
    n->ndim = (uint8_t)ndim;
    n->dims = G->dims.len;
    if (ndim) {
        memcpy(G->dims.data + G->dims.len, sizes, sizeof(int64_t) * (size_t)ndim);
        memcpy(G->dims.data + G->dims.len + ndim, strides, sizeof(int64_t) * (size_t)ndim);
    }
    G->dims.len += 2 * ndim;
    return 0;
}

int32_t em_ir_op_count(const EmGraph *G) {
    int32_t n = 0;
    for (int32_t i = 0; i < G->nodes.len; i++)
        if (G->nodes.data[i].op != EMOP_INPUT && G->nodes.data[i].op != EMOP_ITEM) n++;
    return n;
}

const EmDtypeInfo em_dtype_info[EMDT__COUNT] = {
#define X(e, name, torch_name, cls) {name, torch_name, EMDC_##cls},
#include "em_dtypes.def"
#undef X
};

const char *em_dtype_name(int dtype) {
    return dtype >= 0 && dtype < EMDT__COUNT ? em_dtype_info[dtype].name : "dtype?";
}

const char *em_dtype_torch_name(int dtype) {
    return dtype >= 0 && dtype < EMDT__COUNT ? em_dtype_info[dtype].torch_name : "<a dtype ember does not name>";
}

const EmDevInfo em_dev_info[EMDEV__COUNT] = {
#define X(e, number, name) {number, name},
#include "em_devices.def"
#undef X
};

const char *em_dev_name(int dev_type) {
    for (int i = 0; i < EMDEV__COUNT; i++)
        if (em_dev_info[i].type == dev_type) return em_dev_info[i].name;
    return "dev";
}

int em_dev_type_of(const char *name) {
    for (int i = 0; i < EMDEV__COUNT; i++)
        if (!strcmp(em_dev_info[i].name, name)) return em_dev_info[i].type;
    return EMDEV_OTHER;
}

static int dump_arg(const EmGraph *G, const EmArg *a, EmStrBuf *o) {
    switch (a->kind) {
        case EMARG_REF: return em_sb_printf(o, "%%%d", a->v);
        case EMARG_CONST: return em_sb_puts(o, G->text.data + G->consts.data[a->v].text);
        default: {
            int rc = em_sb_puts(o, a->kind == EMARG_TUPLE ? "(" : "[");
            for (int32_t i = 0; i < a->n && !rc; i++) {
                if (i) rc = em_sb_puts(o, ", ");
                if (!rc) rc = dump_arg(G, &G->args.data[a->v + i], o);
            }
            if (!rc && a->kind == EMARG_TUPLE && a->n == 1) rc = em_sb_puts(o, ",");
            return rc ? rc : em_sb_puts(o, a->kind == EMARG_TUPLE ? ")" : "]");
        }
    }
}

/* Keyword names are stored as a const whose text is "('a', 'b')"; the dump prints them
 * from the per-name text consts that follow it (the tracer pushes them). */
static int dump_meta(const EmGraph *G, const EmNode *n, EmStrBuf *o) {
    if (n->vkind == EMV_SEQ) return em_sb_puts(o, "  : seq");
    if (n->vkind == EMV_OBJ) return em_sb_puts(o, "  : obj");
    if (n->vkind == EMV_NONE) return em_sb_puts(o, "  : none");
    int rc = em_sb_printf(o, "  : %s[", em_dtype_name(n->dtype));
    const int64_t *sz = em_ir_sizes(G, n), *st = em_ir_strides(G, n);
    for (int i = 0; i < n->ndim && !rc; i++) rc = em_sb_printf(o, i ? ", %lld" : "%lld", (long long)sz[i]);
    if (!rc) rc = em_sb_puts(o, "] stride=(");
    for (int i = 0; i < n->ndim && !rc; i++) rc = em_sb_printf(o, i ? ", %lld" : "%lld", (long long)st[i]);
    if (!rc) rc = em_sb_printf(o, ") %s", em_dev_name(n->dev_type));
    if (!rc && n->dev_index >= 0) rc = em_sb_printf(o, ":%d", n->dev_index);
    if (!rc && n->requires_grad) rc = em_sb_puts(o, " grad");
    return rc;
}

int em_ir_dump(const EmGraph *G, EmStrBuf *o) {
    int rc = em_sb_printf(o, "graph(inputs=%d, ops=%d)\n", G->ninputs, em_ir_op_count(G));
    for (int32_t r = 0; r < G->nodes.len && !rc; r++) {
        const EmNode *n = &G->nodes.data[r];
        const EmOpInfo *info = &em_op_info[n->op];
        rc = em_sb_printf(o, "  %%%d = ", r);
        if (rc) break;
        if (n->op == EMOP_INPUT) {
            rc = em_sb_printf(o, "input %d %s", n->aux, G->text.data + n->label);
        } else if (n->op == EMOP_ITEM) {
            rc = em_sb_printf(o, "%%%d[%d]", G->args.data[n->args].v, n->aux);
        } else {
            if (n->op == EMOP_CALL) rc = em_sb_printf(o, "call %s(", G->text.data + G->consts.data[n->fn].text);
            else if (n->op == EMOP_GETATTR)
                rc = em_sb_printf(o, "getattr[%s](", G->text.data + G->consts.data[n->fn].text);
            else rc = em_sb_printf(o, "%s(", info->name);
            int32_t npos = n->nargs - n->nkw;
            for (int32_t i = 0; i < n->nargs && !rc; i++) {
                if (i) rc = em_sb_puts(o, ", ");
                if (!rc && i >= npos) {
                    /* keyword names: consts kwnames+1+k hold each name */
                    rc = em_sb_printf(o, "%s=", G->text.data + G->consts.data[n->kwnames + 1 + (i - npos)].text);
                }
                if (!rc) rc = dump_arg(G, &G->args.data[n->args + i], o);
            }
            if (!rc) rc = em_sb_puts(o, ")");
        }
        if (!rc) rc = dump_meta(G, n, o);
        if (!rc) rc = em_sb_puts(o, "\n");
    }
    if (!rc) rc = em_sb_puts(o, "  return (");
    for (int32_t i = 0; i < G->outputs.len && !rc; i++) rc = em_sb_printf(o, i ? ", %%%d" : "%%%d", G->outputs.data[i]);
    if (!rc) rc = em_sb_puts(o, ")\n");
    return rc;
}

static const char *verify_arg(const EmGraph *G, const EmArg *a, EmRef self, int depth) {
    if (depth > 32) return "argument nesting too deep";
    switch (a->kind) {
        case EMARG_REF:
            if (a->v < 0 || a->v >= self) return "argument refers forward or out of range";
            return NULL;
        case EMARG_CONST: return (a->v < 0 || a->v >= G->consts.len) ? "constant out of range" : NULL;
        case EMARG_TUPLE:
        case EMARG_LIST:
            if (a->v < 0 || a->v + a->n > G->args.len) return "sequence argument out of range";
            for (int32_t i = 0; i < a->n; i++) {
                const char *m = verify_arg(G, &G->args.data[a->v + i], self, depth + 1);
                if (m) return m;
            }
            return NULL;
        default: return "bad argument kind";
    }
}

const char *em_ir_verify(const EmGraph *G) {
    int32_t inputs = 0;
    for (EmRef r = 0; r < G->nodes.len; r++) {
        const EmNode *n = &G->nodes.data[r];
        if (n->op >= EMOP__COUNT) return "bad op";
        if (n->op == EMOP_INPUT) {
            if (n->aux != inputs++) return "inputs out of order";
            continue;
        }
        if (n->args < 0 || n->args + n->nargs > G->args.len) return "arguments out of range";
        if (n->nkw > n->nargs) return "more keywords than arguments";
        if (n->nkw && (n->kwnames < 0 || n->kwnames + n->nkw >= G->consts.len)) return "bad keyword names";
        if (n->op == EMOP_CALL && (n->fn < 0 || n->fn >= G->consts.len)) return "call without callable";
        for (int32_t i = 0; i < n->nargs; i++) {
            const char *m = verify_arg(G, &G->args.data[n->args + i], r, 0);
            if (m) return m;
        }
        if (n->vkind == EMV_TENSOR && n->dims + 2 * n->ndim > G->dims.len) return "metadata out of range";
    }
    if (inputs != G->ninputs) return "input count mismatch";
    for (int32_t i = 0; i < G->outputs.len; i++)
        if (G->outputs.data[i] < 0 || G->outputs.data[i] >= G->nodes.len) return "output out of range";
    return NULL;
}
