/* em_ir.h: the graph IR. A linear SSA array of fixed-size nodes addressed by index (EmRef),
 * a pooled argument section, a constant pool and per-node tensor metadata. Pure C: no
 * Python.h. Object constants are opaque handles owned by the graph through the
 * retain/release callbacks its creator installs.
 *
 * Returns (pure C, so no exception): an index (EmRef, constant, argument, text), or -1 when
 * out of memory; 0 or -1 likewise for the rest; em_ir_verify: NULL or what is wrong.
 */
#ifndef EM_IR_H
#define EM_IR_H

#include "../core/em_core.h"

typedef int32_t EmRef; /* index into EmGraph.nodes; -1 = none */

#define EMF_POINTWISE 0x1
#define EMF_MUTATES 0x2
#define EMF_INT_TO_FLOAT 0x4

typedef enum {
    EMOK_INPUT,
    EMOK_BINARY,
    EMOK_INPLACE,
    EMOK_UNARY,
    EMOK_COMPARE,
    EMOK_SUBSCR,
    EMOK_SETITEM,
    EMOK_GETATTR,
    EMOK_CALL,
    EMOK_ITEM
} EmOpKind;

typedef enum {
#define X(e, name, kind, flags, nb, fn, py) EMOP_##e,
#include "em_ops.def"
#undef X
    EMOP__COUNT
} EmOp;

typedef struct {
    const char *name;
    EmOpKind kind;
    unsigned flags;
    const char *py; /* the Python callable the op stands for, "module.name"; NULL if none */
} EmOpInfo;

extern const EmOpInfo em_op_info[EMOP__COUNT];

/* The BINARY op an INPLACE op is the in-place form of (ORDER OP in em_ops.def). */
static inline EmOp em_op_binary_of(EmOp op) { return (EmOp)(op - EMOP_IADD + EMOP_ADD); }
_Static_assert(EMOP_IADD - EMOP_ADD == EMOP_IRSHIFT - EMOP_RSHIFT, "ORDER OP: one INPLACE row per BINARY row");

/* Tensor dtypes: torch ScalarType numbers (em_dtypes.def). */
typedef enum { EMDC_NONE, EMDC_INT, EMDC_FLOAT, EMDC_COMPLEX, EMDC_BOOL, EMDC_QUANT } EmDtypeClass;

typedef enum {
#define X(e, name, torch_name, cls) EMDT_##e,
#include "em_dtypes.def"
#undef X
    EMDT__COUNT
} EmDtype;

typedef struct {
    const char *name;       /* short name, in dumps */
    const char *torch_name; /* torch.<torch_name> */
    EmDtypeClass cls;
} EmDtypeInfo;

extern const EmDtypeInfo em_dtype_info[EMDT__COUNT];

/* Class of a ScalarType number; EMDC_NONE for -1 and numbers past em_dtypes.def. */
static inline EmDtypeClass em_dtype_class(int dtype) {
    return dtype >= 0 && dtype < EMDT__COUNT ? em_dtype_info[dtype].cls : EMDC_NONE;
}

/* Device types: c10::DeviceType numbers (em_devices.def). */
typedef enum {
#define X(e, number, name) EMDEV_##e = number,
#include "em_devices.def"
#undef X
    EMDEV_OTHER = 99 /* a device type em_devices.def does not list */
} EmDevType;

enum {
    EMDEV__COUNT = 0
#define X(e, number, name) +1
#include "em_devices.def"
#undef X
};

typedef struct {
    int type; /* EmDevType */
    const char *name;
} EmDevInfo;

extern const EmDevInfo em_dev_info[EMDEV__COUNT];

/* Name of a device type ("dev" for one not listed); the type of a torch.device type string
 * (EMDEV_OTHER for one not listed). */
const char *em_dev_name(int dev_type);
int em_dev_type_of(const char *name);

/* Value kinds of a node's result. */
typedef enum { EMV_TENSOR = 0, EMV_SEQ = 1, EMV_OBJ = 2, EMV_NONE = 3 } EmValKind;

/* Argument of a node: a graph value, a constant, or a tuple/list of arguments. */
typedef enum { EMARG_REF, EMARG_CONST, EMARG_TUPLE, EMARG_LIST } EmArgKind;
typedef struct {
    uint8_t kind;
    int32_t v; /* REF: node; CONST: const index; TUPLE/LIST: first child in G->args */
    int32_t n; /* TUPLE/LIST: number of children */
} EmArg;

typedef enum { EMC_NONE, EMC_BOOL, EMC_INT, EMC_FLOAT, EMC_OBJ } EmConstKind;
typedef struct {
    uint8_t kind;
    int64_t i;
    double f;
    void *obj;    /* handle of the object this constant stands for (always set) */
    int32_t text; /* offset of its printable form in G->text */
} EmConst;

typedef struct {
    uint16_t op;     /* EmOp */
    uint8_t vkind;   /* EmValKind */
    int8_t dtype;    /* torch ScalarType number (EmDtype), -1 if not a tensor */
    int8_t dev_type; /* c10 DeviceType (EmDevType) */
    int8_t dev_index;
    uint8_t requires_grad;
    uint8_t ndim;
    int32_t dims;    /* first of 2*ndim entries in G->dims: sizes then strides */
    int32_t args;    /* first argument in G->args */
    int32_t nargs;   /* positional + keyword values (keywords last, as in vectorcall) */
    int32_t kwnames; /* const index of the keyword-name tuple, -1 if none */
    int32_t nkw;
    int32_t fn;      /* CALL: const index of the callable; GETATTR: of the name */
    int32_t aux;     /* INPUT: input number; ITEM: element index */
    int32_t label;   /* INPUT: offset of the source name in G->text, else -1 */
} EmNode;

/* Why a graph runs on ember's executor whatever its backend (EmGraph.own_executor). */
typedef enum {
    EM_OWN_NO = 0,
    EM_OWN_GRAD_WRT_VALUE, /* the code after it takes gradients with respect to a value it computes */
    EM_OWN_NOGRAD_VIEW     /* it returns a view made without grad mode of a tensor that requires grad */
} EmOwnExecutor;

typedef struct EmGraph {
    EmVec(EmNode) nodes;
    EmVec(EmArg) args;
    EmVec(EmConst) consts;
    EmVec(int64_t) dims;
    EmVec(EmRef) outputs;
    EmVec(char) text;
    int32_t ninputs;
    /* run on ember's executor, never exported to a backend (EmOwnExecutor: why) */
    uint8_t own_executor;
    void (*retain)(void *obj);
    void (*release)(void *obj);
} EmGraph;

void em_graph_init(EmGraph *G, void (*retain)(void *), void (*release)(void *));
void em_graph_free(EmGraph *G);

/* Constants: the graph retains `obj`; `text` is copied. Return the const index or -1. */
int32_t em_ir_const(EmGraph *G, EmConstKind kind, int64_t i, double f, void *obj, const char *text);
int32_t em_ir_text(EmGraph *G, const char *s);
/* Arguments: push one; a TUPLE/LIST header is pushed with em_ir_arg_seq after its children
 * were pushed contiguously (children are referenced by first index and count). */
int32_t em_ir_arg(EmGraph *G, EmArgKind kind, int32_t v, int32_t n);
/* Append a node; its arguments are the `nargs` args starting at `args`. Returns its ref. */
EmRef em_ir_node(EmGraph *G, EmOp op, int32_t args, int32_t nargs, int32_t kwnames, int32_t nkw, int32_t fn);
/* Set tensor metadata of a node (copies sizes/strides). Returns 0 or -1. */
int em_ir_set_tensor(EmGraph *G, EmRef r, int dtype, int dev_type, int dev_index, int requires_grad, int ndim,
                     const int64_t *sizes, const int64_t *strides);
static inline EmNode *em_ir_at(EmGraph *G, EmRef r) {
    EM_ASSERT(r >= 0 && r < G->nodes.len, "ref %%%d of %d nodes", r, G->nodes.len);
    return &G->nodes.data[r];
}
static inline const int64_t *em_ir_sizes(const EmGraph *G, const EmNode *n) { return G->dims.data + n->dims; }
static inline const int64_t *em_ir_strides(const EmGraph *G, const EmNode *n) {
    return G->dims.data + n->dims + n->ndim;
}

/* Deterministic text dump; appends to `out`. Returns 0 or -1. */
int em_ir_dump(const EmGraph *G, EmStrBuf *out);
/* Checks the invariants (refs point backwards, args in range). Returns NULL or a message. */
const char *em_ir_verify(const EmGraph *G);
/* Number of nodes that are not inputs. */
int32_t em_ir_op_count(const EmGraph *G);
const char *em_dtype_name(int dtype);
const char *em_dtype_torch_name(int dtype); /* torch.<this> */

#endif
