/* em_guard.h: guard programs. The tracer builds one while it reads the frame: loads name
 * the values it touched (by their source path), checks record what it assumed. The hook
 * evaluates the flat program on every call without allocating; on a miss the program can
 * explain the first failing check in words.
 *
 * Returns: builders give 0, or -1 with a Python exception set (slots: the slot index, or -1);
 * checks of a value give 1 (holds), 0 (fails) or -1 (exception); readers 0 or -1.
 */
#ifndef EM_GUARD_H
#define EM_GUARD_H

#include <Python.h>

#include "../core/em_core.h"
#include "../ir/em_size.h"

typedef enum {
#define X(e, name, is_load) EMG_##e,
#include "em_guards.def"
#undef X
    EMG__COUNT
} EmGuardOp;

typedef struct {
    uint8_t op;
    uint8_t weak;  /* obj is borrowed, watched by a weak reference (em_guard_weaken) */
    int32_t slot;  /* destination (loads) or tested slot (checks) */
    int32_t base;  /* loads from another slot: its index */
    Py_ssize_t a;  /* index / length / spec / other slot */
    PyObject *obj; /* owned (or weak): name, key, type or constant */
    /* what the last run learnt of a dict this instruction reads (em_dict_tag; 0 none): a load
     * found memo_val (borrowed: the dict holds it) in dict memo_dict at tag memo_tag; a check
     * passed on memo_dict at memo_tag. A dict at the same tag is unchanged since. */
    uint64_t memo_tag;
    PyObject *memo_dict, *memo_val; /* borrowed, compared only */
    PyObject **memo_many;           /* NO_HOOKS: the dicts found (borrowed; malloc'd, one per name) */
} EmGInstr;

/* Tensor metadata captured at trace time (TENSOR check). */
typedef struct {
    PyTypeObject *type; /* owned */
    int dtype, dev_type, dev_index, requires_grad, ndim;
    uint64_t keyset;
    int64_t *sizes, *strides; /* owned, ndim each */
    /* dynamic dimensions (bit i: dimension i; < 64 dimensions): any size >= 2 matches, and
     * the strides are those of a dense tensor whose dimensions nest in `order` (innermost
     * first, owned, ndim entries) when order is set, else exactly `strides` */
    uint64_t dyn;
    int32_t *order;
    PyObject *py_dtype, *py_device, *py_sizes, *py_strides; /* owned; NULL when read directly */
} EmTensorSpec;

typedef struct {
    int grad;
    int autocast_cpu, autocast_cuda; /* 0: off; on: 1 + the ScalarType it casts to */
    int dtype;               /* default dtype as a ScalarType number (direct reads), else -1 */
    PyObject *default_dtype; /* borrowed singleton; set by em_guard_global_state_capture */
} EmGlobalState;

typedef struct EmGuardProg {
    EmVec(EmGInstr) ins;
    EmVec(EmTensorSpec) specs;
    EmVec(char *) names; /* per slot: printable source path, owned */
    EmVec(uint8_t) owned; /* per slot: 1 when the load returns an owned reference */
    EmVec(int32_t) load_ins; /* per slot: the index in ins of the load that writes it */
    PyObject *weakrefs; /* owned list: the weak references em_guard_weaken made, or NULL */
    int32_t nslots;
    int dead; /* invalidated: every run fails (set while the program may be running) */
    EmGlobalState gs;
    EmSizes sizes;      /* symbolic sizes the SHAPE check evaluates (empty without one) */
    int32_t *index; /* owned: open-addressing dedup index over ins while building (entries are
                       instruction numbers + 1, 0 empty; index_cap a power of two or 0) */
    int32_t index_cap;
} EmGuardProg;

/* What a guard program reads a frame through (all borrowed). */
typedef struct {
    PyObject *const *localsplus;
    PyObject *closure; /* tuple of cells or NULL */
    PyObject *globals, *builtins;
} EmFrameIn;

void em_guard_init(EmGuardProg *P);
void em_guard_free(EmGuardProg *P);

/* Sources: each returns its slot (deduplicated) or -1 with an exception set. */
int32_t em_guard_local(EmGuardProg *P, int idx, PyObject *name);
int32_t em_guard_closure(EmGuardProg *P, int idx, PyObject *name);
int32_t em_guard_free_cell(EmGuardProg *P, int idx, PyObject *name); /* the cell itself */
int32_t em_guard_global(EmGuardProg *P, PyObject *name);
int32_t em_guard_frame_globals(EmGuardProg *P); /* the frame's globals dict itself */
int32_t em_guard_odict(EmGuardProg *P, int32_t base, PyObject *name);
int32_t em_guard_dict(EmGuardProg *P, int32_t base, PyObject *key);
int32_t em_guard_attr(EmGuardProg *P, int32_t base, PyObject *name);
/* slots[base][slots[key]]: a dict's item whose key is another slot's object (a tensor) */
int32_t em_guard_dict_keyed(EmGuardProg *P, int32_t base, int32_t key);
int32_t em_guard_item(EmGuardProg *P, int32_t base, Py_ssize_t i, int is_list);
/* item i of an exact collections.deque (deque_type: kept alive by its module) */
int32_t em_guard_deque_item(EmGuardProg *P, int32_t base, Py_ssize_t i, PyObject *deque_type);
int32_t em_guard_weakref(EmGuardProg *P, int32_t base); /* the referent of a weakref.ref slot */
/* fn(base), owned; named by fmt from base's name and a ("torch.from_numpy(%s)") */
int32_t em_guard_call(EmGuardProg *P, int32_t base, PyObject *fn, const char *fmt, int a);
int32_t em_guard_view_dict(EmGuardProg *P, int32_t base); /* the dict of a dict view */
/* fn(slots[left]) (right < 0) or fn(slots[left], slots[right]), owned; sym names the operator
 * in the slot's name ("+", "-" for a unary minus). */
int32_t em_guard_op(EmGuardProg *P, PyObject *fn, const char *sym, int32_t left, int32_t right);
int32_t em_guard_global_in(EmGuardProg *P, int32_t gslot, int32_t bslot, PyObject *name);
/* A value the trace depends on through its identity (a function's globals, a closure cell);
 * label names it in dumps. */
int32_t em_guard_const(EmGuardProg *P, PyObject *obj, const char *label);
/* An object the trace made (a module of torch.nn): held strongly, as long as the program. */
int32_t em_guard_const_owned(EmGuardProg *P, PyObject *obj, const char *label);
int32_t em_guard_cell(EmGuardProg *P, int32_t base, PyObject *name);

/* Checks: 0 or -1 with an exception set. Duplicates are dropped. */
int em_guard_check(EmGuardProg *P, EmGuardOp op, int32_t slot, PyObject *obj, Py_ssize_t a);
/* The rich comparison cmp (Py_LT...) of slots left and right gives `expected`. */
int em_guard_compare(EmGuardProg *P, int32_t left, int cmp, int32_t right, int expected);
/* The load instruction that fills slot, or NULL. */
const EmGInstr *em_guard_load_of(const EmGuardProg *P, int32_t slot);
/* 1 when slot is loaded as an nn.Module's buffer (module.__dict__['_buffers'][name]), else 0. */
int em_guard_is_buffer(const EmGuardProg *P, int32_t slot);
int em_guard_check_tensor(EmGuardProg *P, int32_t slot, PyObject *tensor);
/* A TENSOR check whose dimensions in dyn (bit i: dimension i) may take any size >= 2. */
int em_guard_check_tensor_dyn(EmGuardProg *P, int32_t slot, PyObject *tensor, uint64_t dyn);
/* Size of dimension dim of the tensor in a slot that passed its TENSOR check. 0 or -1. */
int em_guard_tensor_size(PyObject *t, int dim, int64_t *out);
/* Where an exact Tensor or Parameter of a key set read directly keeps its data: 1 with *dev
 * (device type << 8 | index + 1) and *ptr (its storage's data pointer, 0 for an empty one or
 * a meta tensor); 0 when it cannot be read directly (the caller asks torch). No exception. */
int em_guard_tensor_storage(PyObject *t, int *dev, uintptr_t *ptr);
/* first[i] = the least j whose item holds the same memory as items[i] on the same device
 * (i for a non-tensor, a meta tensor or an empty storage). 1 when done, 0 when a tensor
 * cannot be read directly, -1 with an exception. Allocation-free up to 512 items. */
int em_guard_storage_groups(PyObject *const *items, int32_t n, int32_t *first);
/* The keys of dict d in its iteration order as a new tuple (an OrderedDict's own order, read
 * with its C iterator: no user code), NULL with an exception. */
EM_NEW PyObject *em_dict_keys_ordered(PyObject *EM_BORROWED d);
/* KEYS check: the dict in slot keeps d's keys in d's order (implies its length). */
int em_guard_check_keys(EmGuardProg *P, int32_t slot, PyObject *EM_BORROWED d);
/* A NO_HOOKS check on slot (an object with a __dict__): the hook dicts named in tuple names
 * are each an empty dict (an nn.Module called with no hooks). 0, or -1 with an exception. */
int em_guard_check_no_hooks(EmGuardProg *P, int32_t slot, PyObject *names);
/* TYPE_VERSION for tp when its attributes can change (a mutable heap type): 0 (added, or not
 * needed), 1 when tp has no version tag to guard, -1 on error. */
int em_guard_type_version(EmGuardProg *P, PyTypeObject *tp);
/* 1 when a function's default value v is a container or tensor the trace reads through a guard
 * slot of its own (fn.__defaults__[i]), so that EMG_FUNC does not compare it. */
int em_guard_default_by_slot(PyObject *EM_BORROWED v);
int em_guard_check_global_state(EmGuardProg *P);
/* Takes a copy of the trace's symbolic sizes and appends the SHAPE check (nothing when S has
 * no symbol). Called once, after every other check. 0 or -1. */
int em_guard_check_shape(EmGuardProg *P, const EmSizes *S);
/* The symbols' values on this call from the slots of a run that passed every check before
 * SHAPE, and every expression's value (vals: P->sizes.nodes.len entries). 1 when the sources
 * agree and every relation holds, 0 when not (*failed_rel: the relation, or -1: the sources),
 * -1 on error. */
int em_guard_shape_eval(const EmGuardProg *P, PyObject **slots, int64_t *vals, int32_t *failed_rel);

/* Trades the program's strong references to the objects it checks by identity (ID and TYPE
 * checks, constant loads) for weak references whose callback is `on_death` (called with
 * the weak reference when one of them dies; it must set P->dead before the object's memory
 * can be reused). Objects without weak reference support (None, bools, ints, dicts, cells,
 * tuples) stay strong. A program with dead set fails every run from the next instruction
 * on, so a borrowed pointer is never read after its object died. 0 or -1. */
int em_guard_weaken(EmGuardProg *P, PyObject *EM_BORROWED on_death);

/* Runs the program. slots must hold P->nslots entries. Returns 1 (pass), 0 (fail; *failed
 * = failing instruction) or -1 (error). Owned slots that were filled are released by
 * em_guard_release_slots, whatever the result. */
int em_guard_run(const EmGuardProg *P, const EmFrameIn *in, PyObject **slots, int32_t *failed);
void em_guard_release_slots(const EmGuardProg *P, PyObject **slots);

/* Describes why instruction `at` failed for this frame. Returns a new str or NULL. */
EM_NEW PyObject *em_guard_explain(const EmGuardProg *P, const EmFrameIn *in, int32_t at);
/* Deterministic dump of the program. Returns 0 or -1. */
int em_guard_dump(const EmGuardProg *P, EmStrBuf *out);

/* Tensor layout probing (em_guard_tensor.c). Called once at module init; returns 0 when the
 * direct field reads were verified, 1 when the Python attribute fallback is in use, -1 on
 * error. force_fallback selects the fallback (tests). */
int em_guard_tensor_probe(int force_fallback);
int em_guard_tensor_fast(void);
int em_guard_tensor_read(PyObject *t, EmTensorSpec *out); /* 0, or -1 with exception; py_* may stay NULL */
/* Why v fails the TENSOR check s (name: its source), or NULL with an exception. */
EM_NEW PyObject *em_guard_tensor_why(const char *name, PyObject *v, const EmTensorSpec *s);
int em_guard_tensor_match(PyObject *t, const EmTensorSpec *s); /* 1, 0, or -1 error */
/* Makes the dimensions in dyn of a spec just read dynamic. 0 or -1. */
int em_guard_tensor_make_dyn(EmTensorSpec *s, uint64_t dyn);
void em_guard_tensor_spec_free(EmTensorSpec *s);
/* Hot-path read (direct calls into c10 when verified, else torch's Python functions) and the
 * capture-time read that also records the default dtype object. 0 or -1. */
int em_guard_global_state_read(EmGlobalState *gs);
int em_guard_global_state_capture(EmGlobalState *gs);
int em_guard_global_state_equal(const EmGlobalState *a, const EmGlobalState *b);
/* Direct reads: resolve c10's GradMode::is_enabled, at::autocast::is_autocast_enabled and
 * c10::get_default_dtype_as_scalartype from the given libraries (0 or -1), and switch them
 * on after the caller verified them against torch's Python functions. Also resolves c10's
 * TensorImpl::requires_grad for tensor checks, used only once it agreed here with the Python
 * attribute on varied tensors (ember._C._rg_direct() says whether it is). */
int em_guard_global_state_resolve(const char *libc10, const char *libtorch_cpu);
int em_guard_global_state_read_direct(EmGlobalState *gs);
void em_guard_global_state_use_direct(int on);
int em_guard_global_state_set_fns(PyObject *grad, PyObject *autocast, PyObject *default_dtype);

#endif
