/* em_trace_int.h: internal to trace/: the symbolic values (EmSym), the operations on them,
 * the opcode handlers' helpers and every module's entry points. Code outside trace/ includes
 * em_trace.h only.
 */
#ifndef EM_TRACE_INT_H
#define EM_TRACE_INT_H

#include "em_trace.h"

typedef enum {
    SYM_NULL,   /* the NULL a call sequence pushes */
    SYM_CONST,  /* immutable Python value known at trace time (obj) */
    SYM_TENSOR, /* graph value (ref), its meta tensor (obj) and device */
    SYM_TUPLE,  /* items; seq_type = namedtuple/structseq type or NULL */
    SYM_LIST,   /* items, created while tracing or read from an input */
    SYM_DICT,   /* keys (constants) and items */
    SYM_OBJ,    /* any other Python object (module, function, nn.Module...) */
    SYM_ITER,   /* iterator over items of a sequence: items, pos */
    SYM_CTX,    /* context manager of torch's global state (em_ctx.c): obj = its twin, spec */
    SYM_EXIT,   /* the __exit__ BEFORE_WITH pushes: items[0] = the context (a SYM_CTX, or any object
                 * whose bound __exit__ is items[1]) */
    SYM_BOUND,  /* a bound method as a value: items[0] = self, items[1] = the function's sym */
    SYM_PARTIAL, /* functools.partial made while tracing or read from the frame: items[0] = the
                  * function, then pos bound positional arguments, then the keyword values
                  * (names in keys) */
    SYM_NEW,    /* an instance made while tracing (em_obj.c): obj = a placeholder of its class,
                 * items[0] = its attributes (a DICT sym), items[1] = its dict items when the
                 * class derives from dict */
    SYM_VIEW,   /* d.keys()/values()/items() of a DICT sym made while tracing (items[0]): a live
                 * view, read at each use; pos = 'k', 'v' or 'i'; or types.MappingProxyType(d)
                 * (pos 'm', of a dict made while tracing or read from the frame: src its slot) */
    SYM_INT,    /* an int depending on symbolic sizes: expr, an expression of T->sizes (em_sym_int.c) */
    SYM_SLICE,  /* a slice with a symbolic bound: items = start, stop, step (em_sym_slice.c) */
    SYM_FLOAT,  /* a float argument that is a graph input: obj = its traced value (em_sym_float.c) */
    SYM_CELL,   /* the cell of a variable once a closure made while tracing captured it: items[0] its
                 * value (none: unbound); pos 1: a cell of the program (obj; src: its guard slot
                 * once made), items[0] its value once read or written (writes replayed) */
    SYM_SET,    /* a set made while tracing holding more than constants (tensors, objects hashed by
                 * identity): items (distinct: constants by value, others by identity), seq_type
                 * set or frozenset; its iteration order (by id) is unknown (em_cont.c) */
    SYM_TB,     /* the traceback a with block's __exit__ is given for an exception raised in the trace
                 * (em_exc.c): no object ember has; only `tb is None` (False) is answered and
                 * traceback.clear_frames(tb) does nothing; any other use aborts */
    SYM_NDARRAY, /* a numpy array over a tensor (x.numpy(), numpy calls on tensors: em_sym_np.c): items[0]
                  * the tensor sym, seq_type numpy.ndarray; pos 1: a 0-d result eager numpy gives
                  * as a numpy scalar (np.sum(a)) */
    SYM_ITEM,   /* a Python number the graph computes (x.item(), arithmetic on such): ref its node,
                 * obj its type (int, float or bool); its value is unknown (em_sym_item.c) */
    SYM__COUNT
} EmSymKind;

/* pos of a SYM_NULL local realized on its first read (em_local_get); of a DICT sym. */
enum {
    EM_POS_LAZY_ARG = -2,  /* an argument of the intercepted frame: obj = its value, src = its slot */
    EM_POS_FRAME_KWARGS = -4, /* DICT: the frame's own **kwargs dict (em_sym_own may take it over) */
    EM_POS_FRAME_ITEMS = -5,  /* DICT: the items of a dict subclass's instance from the frame, read-only
                               * (em_frame_items) */
    EM_POS_FRAME_ITEMS_RW = -6, /* DICT: the same for a type em_dict_type_writable takes: the trace may
                                 * change them (written back after the graph, em_sym_mutable) */
    EM_POS_SET_CHANGED = -7,    /* CONST: a set of the frame the trace changed: obj is the trace's copy,
                                 * `of` the calls (method, arguments) replayed on the caller's set
                                 * after the graph (em_cont.c own_frame_set) */
    EM_POS_IDICT = -8,          /* OBJ: a frame instance's __dict__ read through its slot: item stores
                                 * by str keys are recorded as stores on it (em_obj_record_store) */
    EM_POS_DELETED = -9         /* NULL: the value of a recorded store that is `del o.name` */
};
/* A lazy iterator's producer (em_lazy.c), owned by its ITER sym: a generator made while
 * tracing (its suspended frame), map(), filter(), itertools.count(), or zip()/enumerate() over
 * a lazy iterator. Its items are made when taken, interleaved with the consumer as in Python. */
typedef enum {
    EM_LAZY_GEN,
    EM_LAZY_MAP,
    EM_LAZY_FILTER,
    EM_LAZY_ZIP,
    EM_LAZY_ENUM,
    EM_LAZY_COUNT,
    EM_LAZY_CHAIN,
    EM_LAZY_ISLICE,
    EM_LAZY_STARMAP,
    EM_LAZY_FILTERFALSE, /* itertools.filterfalse: FILTER's items its predicate refuses */
    EM_LAZY_TAKEWHILE,   /* itertools.takewhile / dropwhile: fn the predicate */
    EM_LAZY_DROPWHILE,
    EM_LAZY_REPEAT,      /* itertools.repeat(x[, times]): fn x */
    EM_LAZY_ACCUMULATE,  /* itertools.accumulate(it[, func][, initial]): fn func (NULL: +) */
    EM_LAZY_CYCLE,       /* itertools.cycle(it): its items, then those saved, for ever */
    EM_LAZY_NEXT, /* a user object's iterator: its class's __next__, traced per item */
    EM_LAZY_PEEK  /* a frame's list, tuple or range iterator: the items it would give, read by
                   * the guard without advancing it (em_lazy_peek_make) */
} EmLazyKind;
typedef struct EmLazy EmLazy;
/* ctx_state of a CTX sym. */
typedef enum {
    EM_CTX_MADE = 0,     /* made, not entered */
    EM_CTX_ENTERED = 1,  /* entered (its twin really entered) */
    EM_CTX_EXITED = 2,
    EM_CTX_IN_EFFECT = 3 /* made by set_grad_enabled(), which takes effect when called */
} EmCtxState;

struct EmSym {
    uint8_t kind;
    int32_t src;    /* guard slot it was read from, -1 if made while tracing */
    PyObject *obj;  /* CONST value, OBJ object, TENSOR meta tensor (all owned) */
    PyObject *device; /* TENSOR: the real torch.device (owned) */
    EmRef ref;      /* TENSOR: graph node */
    PyObject *seq_type; /* TUPLE: namedtuple/structseq type; ITER: the iterator's Python type (a
                         * generator, list_iterator, zip...), NULL when unknown; DICT: OrderedDict
                         * or defaultdict, NULL for a dict; LIST: collections.deque (its maxlen
                         * in spec), NULL for a list; DICT: mappingproxy for a class's
                         * __dict__ (read-only) (owned) */
    EmVec(EmSym *) items;
    EmVec(PyObject *) keys; /* DICT: owned keys, parallel to items */
    int32_t pos;    /* ITER: position; PARTIAL: bound positional count; VIEW: 'k', 'v', 'i';
                     * SYM_NULL, DICT: an EM_POS_* value; OBJ (a function made while tracing): how
                     * many of its items (after its closure's cells) are its positional defaults */
    uint8_t by_id;  /* OBJ: 1 guarded by identity (or a constant of a trusted module); 2 a
                     * nested function guarded by code and defaults (EMG_FUNC) */
    uint8_t lent;   /* ITER: handed to zip()/enumerate(), which took all its items at once while
                     * Python's take them lazily: any further use of it aborts the trace */
    uint8_t diverged; /* DICT of an OrderedDict made while tracing that dict's own methods changed
                       * (dict.update(od, ...)): eager's order no longer follows its storage, so
                       * a use that reads the order (iteration, views, its output) aborts */
    uint32_t kver, mver; /* LIST/DICT made while tracing: key insertions and removals (dicts) and
                          * all mutations (both) so far */
    EmVec(EmSym *) of; /* ITER: the lists or dicts made while tracing whose items it holds;
                        * DICT (a defaultdict): of.data[0] its default_factory, if not None;
                        * TENSOR (a view inferred in C of one that requires grad): its base;
                        * OBJ (a dict subclass's instance from the frame): its items once read
                        * (em_frame_items) */
    EmVec(uint32_t) of_ver; /* their versions when it was made (em_iter_use checks them) */
    char of_what;   /* ITER: 'k', 'v' or 'i' when it iterates dict of.data[0]'s keys, values or items
                     * directly (it reads values stored meanwhile, as Python's does), else 0 */
    /* CTX: (cls, args, kwargs pairs) to make it again (owned); grad mode to restore on exit;
     * ctx_state an EmCtxState; grad_family: its changes are recorded as _set_grad_enabled
     * calls (else as enter/exit helper calls, ref = the enter node). TENSOR read from the
     * frame: the tensor itself (owned), for reads of its state (x.grad). LIST (a bounded deque):
     * its maxlen, an int. DICT of seq_type mappingproxy (a class's __dict__): the class.
     * CTX unbreakable: a break inside its block is refused (a vmap level: the graph's batched
     * tensors cannot leave it). */
    PyObject *spec;
    int8_t prev_grad, ctx_state, grad_family, unbreakable;
    int32_t out_at; /* TUPLE/LIST/DICT/ITER made while tracing: its entry in the output tree, or -1 */
    int32_t expr;   /* INT: its expression in T->sizes */
    EmLazy *lazy;   /* ITER: its producer when lazy (owned), else NULL */
    uint32_t mark;  /* the last reachability walk that reached it (em_gen_finalize) */
};

/* Frames inlined (and generator frames resumed) at most, one inside another. */
#define EM_MAX_DEPTH 48
/* em_call calls in progress at most, one inside another (inlined frames' included). */
#define EM_MAX_CALL_DEPTH 400

/* em_trace_fail after Python code the trace ran for the program (a call, an attribute read)
 * raised: an Exception is dropped (the frame runs as Python, which raises it again), anything
 * else (KeyboardInterrupt, SystemExit, MemoryError) stays and the status is EM_ERR. */
EmStatus em_trace_abandon(EmTracer *T, EmAbort why, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
EmSym *em_sym_new(EmTracer *T, EmSymKind kind);
EmSym *em_sym_const(EmTracer *T, PyObject *EM_BORROWED v);
EmSym *em_sym_null(EmTracer *T);
/* A by-identity OBJ sym for an object the trace knows from other guards, with a constant slot. */
EmSym *em_sym_known(EmTracer *T, PyObject *EM_BORROWED obj, const char *label);
/* The Python function type(descr).name (EM_STR(dunder_get) or (dunder_set)) of a descriptor an
 * instance of a Python class is (borrowed), or NULL. */
static inline PyObject *em_user_descr_method(PyObject *descr, PyObject *name) {
    if (!descr || !(Py_TYPE(descr)->tp_flags & Py_TPFLAGS_HEAPTYPE)) return NULL;
    PyObject *f = _PyType_Lookup(Py_TYPE(descr), name);
    return f && PyFunction_Check(f) ? f : NULL;
}
/* The method fn of self: (fn, self) for a method load, else a SYM_BOUND value. */
EmStatus em_sym_method(EmTracer *T, PyObject *EM_BORROWED fn, EmSym *self, int method, EmSym **out, EmSym **selfp);
/* Wraps a value read from a guard slot, installing guards; NULL with status in *st. */
EmSym *em_sym_wrap(EmTracer *T, PyObject *EM_BORROWED v, int32_t slot, EmStatus *st);
/* Meta tensor of a tensor sym (created lazily). Borrowed, NULL on error. */
PyObject *em_sym_meta(EmTracer *T, EmSym *s);
/* Makes a TENSOR sym for graph node r from meta result m (borrowed) on device dev. */
EmSym *em_sym_tensor(EmTracer *T, EmRef r, PyObject *m, PyObject *dev);
/* Points an existing tensor sym at node r (an op returned its argument). 0 or -1. */
int em_sym_retarget(EmTracer *T, EmSym *s, EmRef r, PyObject *m, PyObject *dev);
/* Python value of a sym when it is fully known at trace time (new ref), else NULL without
 * exception. */
EM_NEW PyObject *em_sym_value(EmTracer *T, EmSym *s);
/* 1 when v is a constant: a value the trace may fold (None, numbers, strings, tuples of them...). */
int em_is_pure(PyObject *v);
/* 1 when tuple v hashes and compares as its tuple of constants, classes and functions. */
int em_sym_tuple_key(PyObject *v);
/* The tuple `items` (stolen) as an instance of seq_type (a namedtuple, structseq or torch.Size
 * type): a new reference, or NULL with the exception the type raised. */
EM_NEW PyObject *em_seq_retype(PyObject *seq_type, EM_STEALS PyObject *items);
/* Lookups in a dict read through a slot without wrapping it whole; absence proofs; type(). */
int em_sym_own(EmTracer *T, EmSym *s);
/* DICT syms: the index of key (-1 absent, -2 error set); store key -> v (0 or EM_ERR); remove
 * the item at index i (em_cont.c). */
void em_dict_remove(EmSym *d, int i);
/* Whether descr (found on s's class) is a __slots__ member of an instance s made while tracing
 * that has no __dict__: its value is kept in s's attribute dict like any attribute's (set on
 * the instance the output makes, through the member). */
int em_new_slot(const EmSym *s, PyObject *descr);
int em_dict_find(EmSym *d, PyObject *key);
/* A tensor read from the frame (hashed by identity), as a key of a dict of the frame: looked up
 * through a LOAD_DICT_KEYED slot, its absence guarded by ABSENT_KEYED. */
/* Whether dict key k is hashed and compared by identity (a tensor; an object, class included,
 * whose type keeps object's __hash__ and __eq__). */
int em_identity_key(PyObject *k);
/* Whether key is such an object known by identity (a by-identity OBJ sym): looked up as itself. */
int em_key_by_id(const EmSym *key);
int em_key_of_frame(const EmSym *key);
/* s as a dict key or set item: a tuple made while tracing of constants (hashed by value) is
 * that constant tuple; anything else is s. NULL with an exception on error. */
EmSym *em_sym_hashable(EmTracer *T, EmSym *s);
/* Whether object sym k (made while tracing, or one of the frame's that is no class) hashes by a
 * Python __hash__ of its class, or as a tuple or frozenset subclass by its items: a dict key or
 * set item by value (em_dict_key and the set lookups trace its hash and the == of stored keys
 * of that hash, as CPython's lookup). */
int em_value_hashed(const EmSym *k);
/* The hash a value-hashed key k (or a tuple key, em_tuple_key_hash) is stored under: its
 * traced hash(). 0, -1 with *st set. */
int em_value_hash(EmTracer *T, EmSym *k, Py_hash_t *h, EmStatus *st);
/* Guards the entry on fn() == expect when it runs (a LOAD_CALL of ember._rules.call_query on
 * fn, then EQ): a state query outside the GLOBAL_STATE guard. 0, -1 with an exception. */
int em_guard_query(EmTracer *T, PyObject *fn, PyObject *expect);
/* _thread._local (tp NULL), or tp when its attribute protocol is _thread._local's own (a
 * threading.local or a subclass not overriding it); NULL otherwise. Borrowed. */
PyTypeObject *em_thread_local(PyTypeObject *tp);
/* The hash a tuple key of em_set_item_kind 2 is stored under within the trace: its constants'
 * hashes and its shape (its identity-hashed items' own hashes are not known until run time;
 * lookups compare them with em_sym_items_eq). 0, -1 with Python's exception set (an unhashable
 * constant). */
int em_tuple_key_hash(const EmSym *k, Py_hash_t *h);
/* x is of a type that does not hash (a list, dict or set; a class setting __hash__ = None):
 * Python's TypeError raised in the trace; CALL_NEXT for anything else (em_cont.c). */
EmStatus em_unhashable(EmTracer *T, EmSym *x);
EmStatus em_lazy_dict_get_keyed(EmTracer *T, EmSym *d, EmSym *key, int *found, EmSym **out);
EmStatus em_dict_set(EmSym *d, PyObject *key, EmSym *v);
/* The key of dict sym d that key sym k is: a constant's value, or for an object hashed by
 * identity the token of d's key that is the same object (else, when make, a new token the
 * tracer holds). *key borrowed. 0 found or made; 1 absent (make 0); -1 with *st (abort/error). */
int em_dict_key(EmTracer *T, EmSym *d, EmSym *k, int make, PyObject **key, EmStatus *st);
/* 1 when dict subclass tp's methods the trace models (item access, iteration, update, pop,
 * setdefault, clear, popitem...) are all dict's or OrderedDict's own and its __missing__ is none
 * or defaultdict's: its instances from the frame may be changed by the trace, the changes
 * written back with the mapping protocol (no user code runs). */
int em_dict_type_writable(PyTypeObject *tp);
/* 1 when s is an instance of such a type read from the frame whose items the trace holds
 * (em_frame_items made them): reads go to those items. */
int em_frame_dict_rw(const EmSym *s);
/* The items of such an instance s (em_frame_items), made now when make, else only when made
 * before (a change made them: later reads see the changes); CALL_NEXT when s is no such
 * instance (or, make 0, its items were not made). */
EmStatus em_frame_dict_items_rw(EmTracer *T, EmSym *s, int make, EmSym **out);
/* The sym a key of a dict sym stands for: a token's sym, else a constant of the key. */
EmSym *em_dict_key_sym(EmTracer *T, PyObject *key);
/* The sym a token key names, NULL for other keys. */
EmSym *em_key_token_sym(PyObject *key);
/* 1 when dict sym d has a key that is a token. */
int em_dict_has_tokens(const EmSym *d);
int em_is_namedtuple_type(PyTypeObject *tp);
/* A namedtuple field's descriptor (collections' _tuplegetter) read on an instance whose items
 * are TUPLE sym items: *out its item; CALL_NEXT when descr is no such descriptor. */
EmStatus em_tuple_field(EmTracer *T, PyObject *descr, EmSym *items, EmSym **out);
/* Records that tensor s of the frame changed in a way another input that is the same object
 * would show (its layout, requires_grad, an attribute): em_trace_alias_guards. 0 or -1. */
int em_trace_meta_changed(EmTracer *T, EmSym *s);
/* A builtin container whose __new__ takes the contents (an instance made in the trace gets
 * them at once, em_obj.c): frozenset, tuple. */
static inline int em_new_frozen(const PyTypeObject *b) { return b == &PyFrozenSet_Type || b == &PyTuple_Type; }
EmStatus em_env_lookup(EmTracer *T, EmSym *env, EmSym *key, int *found, EmSym **out);
EmStatus em_lazy_dict_get(EmTracer *T, EmSym *d, PyObject *key, int *found, EmSym **out);
int em_sym_attr_absent(EmTracer *T, EmSym *base, PyObject *name);
int em_sym_attr_known(EmTracer *T, EmSym *base, PyObject *name);
/* hasattr(cls, name) for a class sym from the frame (metaclass type): 2 present, 1 absent (each
 * with its guards), 0 not known this way, -1 error. */
int em_class_attr_known(EmTracer *T, EmSym *base, PyObject *name);
int em_sym_user_operand(const EmSym *s);
/* The Python type of s where its kind (or its guards) fix it without a further guard; NULL when
 * not known this way (tensors, iterators of unknown type, other kinds). */
PyTypeObject *em_sym_known_type(const EmSym *s);
/* Guards that tp's attributes (its dict, its bases') stay as the trace resolves them
 * (TYPE_VERSION; nothing for immutable types). Sets and returns *st. */
EmStatus em_guard_class(EmTracer *T, PyTypeObject *tp, EmStatus *st);
EmStatus em_user_binop(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out);
EmStatus em_user_unop(EmTracer *T, EmOp op, EmSym *a, EmSym **out);
/* object.__new__(cls) (or dict's) inside a class's own __new__: the instance, uninitialized.
 * CALL_NEXT for other calls. */
EmStatus em_obj_base_new(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_frame_dict_empty_view(EmTracer *T, PyObject *f, EmSym *self, int nargs, EmSym **out);
EmStatus em_mapping_as_dict(EmTracer *T, EmSym *m, EmSym **out);
/* A set (type: set or frozenset) of the n syms items: a constant when they all are, else a SET
 * sym (em_cont.c). */
EmStatus em_set_of_items(EmTracer *T, PyObject *type, EmSym **items, int32_t n, EmSym **out);
/* x added to set sym s (a SET sym, or a constant set made while tracing, which becomes one). */
EmStatus em_set_add_item(EmTracer *T, EmSym *s, EmSym *x);
EmStatus em_sym_type(EmTracer *T, EmSym *s, EmSym **out);
/* ---- operations on syms, dispatched on the kind (em_sym_ops.c; the kinds' rows: em_sym_ops.h) ----
 * Each returns EM_OK, EM_ABORT (reason in T) or EM_ERR; the syms it gives back belong to the
 * trace. */
/* base.name; method: a method load, which gives the function and *self (NULL: a plain value). */
EmStatus em_sym_getattr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self);
/* c[key]; c[key] = v; key in c (*found 0 or 1); bool(s) (*out 0 or 1). */
EmStatus em_sym_getitem(EmTracer *T, EmSym *c, EmSym *key, EmSym **out);
EmStatus em_sym_setitem(EmTracer *T, EmSym *c, EmSym *key, EmSym *v);
/* del c[key]: a list's item or step-1 slice, a dict's key (KeyError, IndexError as Python's). */
EmStatus em_sym_delitem(EmTracer *T, EmSym *c, EmSym *key);
EmStatus em_sym_contains(EmTracer *T, EmSym *c, EmSym *key, int *found);
EmStatus em_sym_truth(EmTracer *T, EmSym *s, int *out);
/* a <op> b, fn being op's Python operator, for operands that hold no tensor. */
EmStatus em_sym_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out);
/* bool(a == b), traced (a's __eq__ first, as Python's ==): *eq. EM_OK, EM_ABORT or EM_ERR. */
EmStatus em_sym_eq_truth(EmTracer *T, EmSym *a, EmSym *b, int *eq);
/* a == b of two tuples (or two lists) as Python's: lengths, then each pair of items `x is y or
 * x == y`, the == traced (a user __eq__ inlined), until one differs. CALL_NEXT where a or b is
 * no such sequence or their kinds differ. */
EmStatus em_seq_eq_traced(EmTracer *T, EmSym *a, EmSym *b, int *eq);
/* a < b (op LT, LE, GT or GE) of two tuples (or two lists) as Python's: the first pair of items
 * that are not equal (== traced) compared with op, its result the answer; else the lengths.
 * CALL_NEXT where a or b is no such sequence or their kinds differ. */
EmStatus em_seq_order_traced(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out);
/* <op> a for an operand that holds no tensor (NEG, POS, INVERT). */
EmStatus em_sym_unop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out);
/* `a is b`: *same 0 or 1. */
EmStatus em_sym_is(EmTracer *T, EmSym *a, EmSym *b, int *same);
/* next(it): its next item, or *out NULL when it is exhausted. */
EmStatus em_iter_next(EmTracer *T, EmSym *it, EmSym **out);
/* 1 when s is the Python object v itself (a constant, or an object sym of it), else 0. */
int em_sym_is_obj(const EmSym *s, PyObject *v);
/* 1 when s holds a tensor (nested in tuples and lists); deeper than EM_MAX_NEST (or a list
 * holding itself) counts as one, so that the caller takes its general path. */
int em_sym_has_tensor(EmSym *s);
/* fn(*args) on the known values of args (a Python operator): a constant (a list sym for a list);
 * aborts when a value is not known, or raises what fn raised. */
EmStatus em_sym_eval(EmTracer *T, PyObject *fn, EmSym **args, int n, EmSym **out);
/* An object read from the frame and guarded by its type only, not its identity: its state (its
 * attributes, its items) is not guarded by that. */
/* The dict method a VIEW sym stands for: "keys", "values" or "items" (a mappingproxy, pos
 * 'm', iterates as keys). */
static inline const char *em_view_method(const EmSym *view) {
    return view->pos == 'k' || view->pos == 'm' ? "keys" : view->pos == 'v' ? "values" : "items";
}
/* The view of real dict d that VIEW sym view stands for (new reference; NULL with an exception):
 * d.keys(), d.values(), d.items(), or types.MappingProxyType(d). */
static inline EM_NEW PyObject *em_view_of(const EmSym *view, PyObject *d) {
    return view->pos == 'm' ? PyDictProxy_New(d) : PyObject_CallMethod(d, em_view_method(view), NULL);
}
/* Whether dict sym s is the trace's copy of an instance dict (T->idict_copy). */
static inline int em_sym_idict_copy(const EmTracer *T, const EmSym *s) {
    for (int32_t i = 0; i < T->idict_copy.len; i++)
        if (T->idict_copy.data[i] == s) return 1;
    return 0;
}
/* What iterating VIEW sym view gives: 'k', 'v' or 'i' (a mappingproxy's keys). */
/* types.MappingProxyType(d) of DICT sym d (made in the trace or the frame's): a live read-only
 * VIEW ('m'); CALL_NEXT for a dict that stands for another (a class's __dict__, an instance
 * dict's copy). */
EmStatus em_mappingproxy_of(EmTracer *T, EmSym *d, EmSym **out);
static inline char em_view_what(const EmSym *view) { return view->pos == 'm' ? 'k' : (char)view->pos; }
static inline int em_sym_type_guarded(const EmSym *s) { return s->kind == SYM_OBJ && s->src >= 0 && !s->by_id; }
/* object.__getattribute__(base, name): the generic lookup, bypassing a type's override. */
EmStatus em_sym_getattr_generic(EmTracer *T, EmSym *base, PyObject *name, EmSym **out);
/* super(cls, obj) as a sym whose attributes resolve along type(obj).__mro__ after cls. */
EmStatus em_super(EmTracer *T, EmSym *cls, EmSym *obj, EmSym **out);
/* super() with no arguments in the frame being traced: __class__ and the first local. */
EmStatus em_super_noargs(EmTracer *T, EmSym **out);
/* Walks over nested values (syms' items, objects read from the frame) stop at this depth:
 * deeper nesting, and cycles (a list that holds itself), abort the trace. */
#define EM_MAX_NEST 64
/* ...and visit at most this many values in all (tuples shared along a deep chain would
 * otherwise be walked exponentially often). */
#define EM_MAX_WALK 100000
/* A function made while tracing (MAKE_FUNCTION): its object is a stand-in without the closure
 * cells and defaults the sym holds, so it must never run or reach real code. */
int em_sym_placeholder(const EmSym *s);
/* 1 when o's own type is torch.nn.Module or a subclass (no __class__ property runs; never fails). */
int em_is_module(PyObject *o);
/* Graph argument for a sym (tensors become refs, constants consts). -1 on abort/error with
 * *st set. */
int32_t em_sym_arg(EmTracer *T, EmSym *s, EmStatus *st);
const char *em_sym_describe(EmSym *s);

EmStatus em_call(EmTracer *T, EmSym *fn, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
EmStatus em_op_record(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, PyObject *meta_fn,
                      EmSym **out);

int em_trace_lineno(EmTracer *T);
/* Result metadata inferred in C (em_infer.c): 1 when inferred, 0 when the meta run must
 * decide, -1 with a Python exception set. em_infer_pointwise: Python arithmetic and
 * comparisons and the unary torch functions of ember/_rules.py POINTWISE, on tensors of one
 * dtype and device and Python numbers, any layout (TensorIterator's result layout).
 * em_infer_shape: the rules of ember/_rules.py SHAPE_RULES (em_shape_rules.def). */
typedef struct {
    int dtype, dev_type, dev_index, requires_grad, ndim;
    int view; /* 1: a view of the first operand (a view rule or basic indexing; not a reshape's copy) */
    int64_t sizes[64], strides[64];
} EmInferred;
int em_infer_pointwise(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmInferred *r);
int em_infer_shape(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmInferred *r);
/* The rows of em_shape_rules.def (0: no rule); the VIEW_ rows come last. */
typedef enum {
    SR_NONE,
#define X(name) SR_##name,
#include "em_shape_rules.def"
#undef X
} EmShapeRule;
/* em_infer_view.c: views (a VIEW_ rule) and basic indexing x[key]; same convention. */
int em_infer_view(EmTracer *T, int rule, EmSym **args, int nargs, PyObject *kwnames, EmInferred *r);
int em_infer_getitem(EmTracer *T, EmSym *x, EmSym *key, EmInferred *r);
/* 1 when node n (a tensor) is contiguous and not empty. */
int em_node_contiguous(const EmGraph *G, const EmNode *n);
/* Inlines a call of the Python function `func` (em_inline.c). em_inline_closure: of a function
 * made while tracing, whose sym `closure` holds the values of its free variables as items, then
 * its last `pos` items its positional defaults (NULL: cells and defaults read from func). */
EmStatus em_inline(EmTracer *T, PyObject *func, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
EmStatus em_inline_closure(EmTracer *T, PyObject *func, EmSym *closure, EmSym **args, int nargs, PyObject *kwnames,
                           EmSym **out);
/* Calls of nn.Module instances and iteration/indexing of module containers (em_inline.c). */
EmStatus em_inline_module(EmTracer *T, EmSym *mod, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
/* nn.Module.__call__'s work for module sym mod (hooks, then forward), whatever its class's
 * __call__ is; em_module_base_call: nn.Module.__call__ itself (borrowed, NULL on error). */
EmStatus em_module_call_impl(EmTracer *T, EmSym *mod, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
PyObject *em_module_base_call(void);
EmStatus em_module_items(EmTracer *T, EmSym *mod, int want_keys, EmSym **out);
/* nn.Module's own children()/modules()/parameters()/buffers() (named: the named_ forms, as
 * (name, value) pairs) with their default arguments, on a module read from the frame: an
 * iterator over what they would yield, in their order, each object once (a repeat is guarded
 * to stay the same object), None entries skipped; every _modules/_parameters/_buffers dict
 * walked is guarded by its length and each key. */
typedef enum { EM_WALK_CHILDREN, EM_WALK_MODULES, EM_WALK_PARAMETERS, EM_WALK_BUFFERS } EmModuleWalk;
EmStatus em_module_members(EmTracer *T, EmSym *mod, EmModuleWalk what, int named, EmSym **out);
/* Context managers of global state (em_ctx.c). */
int em_ctx_class(PyObject *fn);
EmStatus em_ctx_make(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
/* Small tensors whose values the trace knows (em_fold.c). em_fold_known: the real tensor of
 * tensor sym s (borrowed), or NULL (no exception) when not known. em_fold_after: after op was
 * recorded (self_before: args[0]'s node before it, into: an out= tensor's, -1 if none), its
 * result's value when it follows from known ones, or what its write made stale forgotten. */
PyObject *em_fold_known(const EmTracer *T, const EmSym *s);
EmStatus em_fold_after(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                       EmRef self_before, EmRef into, EmSym *out);
/* A call reading known tensors' values as Python numbers (int(k), k.item(), range(k)): its
 * constant result; CALL_NEXT when the call is not one (a step of em_call). */
EmStatus em_fold_read(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* s with each known tensor in it (through tuples and lists) its value as a Python number
 * (item()); s itself when it holds none; NULL on error. */
EmSym *em_fold_numbers(EmTracer *T, EmSym *s, int depth);
/* Node r becomes a call of fn (named name in dumps) on args (em_call.c). */
EmStatus em_node_recall(EmTracer *T, EmRef r, PyObject *fn, const char *name, EmSym **args, int nargs,
                        PyObject *kwnames);
/* 1 when node r is one of marks or computed from one (through its arguments), 0 when not, -1
 * out of memory (em_call.c). */
int em_node_reaches(EmTracer *T, EmRef r, const EmRef *marks, int32_t nmarks);
/* Besides EmStatus: a step of em_call (or a kind's call slot) that does not handle this call;
 * the next step decides. *out is untouched. */
#define CALL_NEXT ((EmStatus)1)
/* BEFORE_WITH: *exit_fn (a SYM_EXIT) and *entered (what __enter__ returned). */
EmStatus em_ctx_with(EmTracer *T, EmSym *ctx, EmSym **exit_fn, EmSym **entered);
int em_ctx_is_generic_exit(const EmSym *exit_fn); /* 1: the exit of a with block of a non-torch object */
EmStatus em_ctx_exit_call(EmTracer *T, EmSym *exit_fn, EmSym **args, int nargs, EmSym **out);
/* The bound __exit__ of a grad-mode context made before the trace (an input), and its call. */
int em_ctx_is_grad_exit(PyObject *f);
EmStatus em_ctx_exit_input(EmTracer *T, EmSym *fn, EmSym **args, int nargs, EmSym **out);
/* At a break: records the exits of the contexts still open, innermost first. */
EmStatus em_ctx_close_all(EmTracer *T);
/* Exits the twins still entered and puts grad mode back as the trace found it; keeps any
 * pending exception. */
void em_ctx_unwind(EmTracer *T);
/* Exceptions (em_exc.c). em_trace_raise: `exc` (borrowed instance) is raised at the current
 * instruction, certainly (it follows from guarded or constant values); returns EM_ABORT with
 * the reason, which a handler in an enclosing try block may catch. em_trace_catch: called by
 * the loop on an abort; 1 when the current frame has a handler for the pending exception (the
 * stack and ip are set to it), 0 otherwise, -1 on error. */
EmStatus em_trace_raise(EmTracer *T, PyObject *exc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
EmStatus em_trace_raise_new(EmTracer *T, PyObject *type, PyObject *arg);
/* em_trace_raise_new of type with the message PyUnicode_FromFormat(fmt, ...). */
EmStatus em_trace_raise_msg(EmTracer *T, PyObject *type, const char *fmt, ...);
/* em_trace_raise of the Python exception pending now, which the same constants raise at run
 * time; the exception is cleared. */
EmStatus em_trace_raise_pending(EmTracer *T, const char *what);
int em_trace_catch(EmTracer *T, int at);
/* Objects made while tracing and attribute stores (em_obj.c). */
/* Records base.name = v, replayed after the graph (the last value per object and name). */
EmStatus em_obj_record_store(EmTracer *T, EmSym *base, PyObject *name, EmSym *v);
/* A call of class cls that makes an instance while tracing; *handled = 0 when cls is not
 * one ember can make (the caller goes on with its other rules). */
EmStatus em_obj_new(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out, int *handled);
/* type.__call__(cls, ...): em_obj_new whatever cls's metaclass (its own __call__ calling super's). */
EmStatus em_obj_type_call(EmTracer *T, PyObject *cls, EmSym **args, int nargs, PyObject *kwnames, EmSym **out,
                          int *handled);
/* The builtin container an instance made while tracing derives from (dict, OrderedDict, set,
 * frozenset, list: its items[1] holds the contents as a DICT, LIST, or set CONST/SET sym),
 * NULL for other syms. */
PyTypeObject *em_new_content_type(const EmSym *s);
/* Such an instance's dict contents (a DICT sym) when it derives from dict; NULL otherwise. */
EmSym *em_new_dict_items(const EmSym *s);
/* The abort for a use of an OrderedDict sym marked diverged that reads its order. */
EmStatus em_dict_diverged(EmTracer *T, const char *what);
/* fn, a method or slot wrapper of that container's type, called on such an instance: run on its
 * contents (in-place operators answer the instance; __init__ replaces or adds contents). */
EmStatus em_new_content_call(EmTracer *T, PyObject *fn, EmSym *self, EmSym **args, int nargs, EmSym **out);
/* repr(s) (and str(s)) of an instance made while tracing (or of a set subclass's instance from
 * the frame, its contents guarded) whose class keeps its builtin container base's __repr__ and
 * object's __str__, from its contents' known values: a new str, NULL without an error when not
 * known (NULL with an error on failure). */
EM_NEW PyObject *em_new_repr(EmTracer *T, EmSym *s);
/* The items of a dict, list or set subclass's instance read from the frame (OBJ self, src >= 0):
 * a DICT sym the trace only reads (its type and keys in its order guarded, each value through its
 * key's slot), a LIST sym changed as a list of the frame (its type and length guarded, its items
 * written back after the graph), or a set constant read only (its type and contents guarded);
 * one per trace (kept in self->of). */
EmStatus em_frame_items(EmTracer *T, EmSym *self, EmSym **out);
/* 1 when fn (a method or slot wrapper) is list's and self such a list, a read of dict or
 * OrderedDict (keys, values, items, iteration, len, get, [], in) and self such a dict, or a slot
 * wrapper or read-only method of set/frozenset and self such a set: the method runs on
 * em_frame_items's sym. */
int em_frame_items_method(const EmSym *self, PyObject *fn);
/* fn, a method or slot wrapper of a builtin container, called on self whose items (contents) are
 * the container sym items: the slot's operation (em_slot_call; an in-place operator answers
 * self) or the method on items (em_obj.c). */
EmStatus em_builtin_on_items(EmTracer *T, PyObject *fn, EmSym *self, EmSym *items, EmSym **args, int nargs,
                             EmSym **out);
/* What a builtin container's C code reads of operand x: the items of an instance of a
 * container subclass without a Python __iter__, made in the trace or read from the frame
 * (em_frame_items, guarded), else x. */
EmStatus em_slot_operand(EmTracer *T, EmSym *x, EmSym **out);
/* Slot wrapper `name` (an operator dunder, __len__, __iter__, __contains__, __getitem__,
 * __setitem__, __delitem__) of a builtin container called on c, a value of that container (not
 * an instance of a subclass), with args: the operation it stands for; NotImplemented where the
 * C slot declines a foreign operand; *inplace 1 for in-place operators (c changed). CALL_NEXT for
 * other names (em_sym_obj.c). */
EmStatus em_slot_call(EmTracer *T, const char *name, EmSym *c, EmSym **args, int nargs, EmSym **out, int *inplace);
/* The operator op on n (1 or 2) operands: a graph op when one holds a tensor, else the left
 * operand's kind decides (em_sym_binop) (em_rec.c). */
EmStatus em_apply_op(EmTracer *T, EmOp op, EmSym **args, int n, EmSym **out);
/* operator.add(a, b), operator.ior(a, b), operator.neg(a)... (the functions of the graph's
 * binary, in-place, comparison and unary ops): as the bytecode operator does, em_apply_op.
 * CALL_NEXT for other callables and arities. */
/* The value real code sees for s: its meta tensors in place of its tensors (containers rebuilt,
 * ints and floats their traced values). New reference, or NULL with the trace aborted (no
 * exception) or an exception set. */
EM_NEW PyObject *em_meta_value(EmTracer *T, EmSym *s);
EmStatus em_operator_call(EmTracer *T, PyObject *f, EmSym **args, int n, PyObject *kwnames, EmSym **out);
/* dict.__getitem__(d, key) on a dict (or subclass) read from the frame: the key's value
 * (guarded per key), else the subclass's __missing__ traced, else KeyError; defaultdict's C
 * __missing__ (it inserts) aborts. */
EmStatus em_dict_getitem(EmTracer *T, EmSym *d, EmSym *key, EmSym **out);
/* A method of a list/tuple/dict sym or of a dict read through a slot (the method descriptor fn;
 * reads on any, mutations on containers made while tracing): the kind's method slot
 * (em_sym_ops.c), the methods themselves in em_cont.c. */
EmStatus em_container_method(EmTracer *T, PyObject *fn, EmSym *self, EmSym **args, int nargs, EmSym **out);
/* The current contents of a dict view sym as a new LIST sym (NULL on error). */
EmSym *em_view_items(EmTracer *T, EmSym *view);
/* view op other for a comparison op where a keys or items view meets another such view or a
 * set (either side): CPython's dictview_richcompare (sizes, then each item of one side looked up
 * in the other, an items view's values compared == traced). CALL_NEXT for other operands. */
EmStatus em_view_compare(EmTracer *T, EmOp op, EmSym *a, EmSym *b, EmSym **out);
/* OrderedDict(src, **kw) (factory NULL) or defaultdict(factory, src, **kw) (factory a sym, None
 * for none) as a dict sym of that type; src and kwvals as em_make_dict's. */
EmStatus em_make_dict_of(EmTracer *T, PyObject *type, EmSym *factory, EmSym *src, EmSym **kwvals, PyObject *kwnames,
                         EmSym **out);
/* d[key] of a missing key of a defaultdict sym with a factory: factory() stored and returned;
 * CALL_NEXT when d has none (KeyError). */
EmStatus em_dict_missing(EmTracer *T, EmSym *d, PyObject *key, EmSym **out);
/* deque(src, maxlen) (src NULL: deque(); maxlen NULL or None: unbounded, else an int >= 0) as a
 * list sym of type deque (its maxlen the sym's spec). */
EmStatus em_make_deque(EmTracer *T, PyObject *type, EmSym *src, PyObject *maxlen, EmSym **out);
/* What makes deque sym s's type at run time from its items: deque, or a partial of it with s's
 * maxlen. */
EM_NEW PyObject *em_deque_maker(const EmSym *s);
/* The deque deque sym s stands for, of the list `items` (stolen; NULL: returns NULL). */
EM_NEW PyObject *em_deque_from(const EmSym *s, EM_STEALS PyObject *items);
/* d.update(other, **kw) of a dict sym made while tracing (nargs counts the keywords' values). */
EmStatus em_dict_update(EmTracer *T, EmSym *self, EmSym **args, int nargs, PyObject *kwnames, EmSym **out);
/* dict.fromkeys(keys[, value]) of an iterable of constants; value NULL: None. */
EmStatus em_dict_fromkeys(EmTracer *T, EmSym *keys, EmSym *value, EmSym **out);
/* dict(src, **kw): src NULL, a dict sym or (constant key, value) pairs; kwvals parallel to kwnames. */
EmStatus em_make_dict(EmTracer *T, EmSym *src, EmSym **kwvals, PyObject *kwnames, EmSym **out);
/* tuple/list/enumerate/zip/reversed (f) over n syms; strict: zip(strict=True). */
EmStatus em_call_sequence(EmTracer *T, PyObject *f, EmSym **all, int n, int strict, EmSym **out);
/* size.numel() of a torch.Size tuple sym: the product of its items (ints or symbolic ints). */
EmStatus em_size_numel(EmTracer *T, EmSym *size, EmSym **out);
/* An itertools function f (chain, product, combinations, permutations, zip_longest, islice,
 * repeat, accumulate, pairwise, compress) over n syms (kwvals parallel to kwnames): f runs on
 * stand-ins (a container's items that are not constants become tokens) and its finite result
 * is mapped back, as an iterator sym. CALL_NEXT-free: any other case aborts. */
EmStatus em_call_itertools(EmTracer *T, PyObject *f, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* iter(s): s itself for an iterator, else an iterator over s's items (em_seq_items). */
EmStatus em_iter_of(EmTracer *T, EmSym *s, EmSym **out);
/* Before a use of iterator `it` that takes all its items (it->items from it->pos on): EM_OK
 * when it may be consumed or kept (not lent to zip()/enumerate(), its containers unchanged),
 * a lazy one run to its end; else the abort. */
EmStatus em_iter_use(EmTracer *T, EmSym *it);
/* next(it): its next item in *out, NULL when it is exhausted (a lazy one makes it now). */
EmStatus em_iter_take(EmTracer *T, EmSym *it, EmSym **out);
/* it.__length_hint__() of an iterator over items the trace holds whose type has one (a list,
 * tuple, set, dict or range iterator): the items not yet taken, a constant; CALL_NEXT for
 * other iterators. */
EmStatus em_iter_length_hint(EmTracer *T, EmSym *it, EmSym **out);
/* The exception CPython raises for l[key] = v (v NULL: del l[key]) on a list of n items, where
 * the trace knows it raises for the key's or value's type alone: raised in the trace (an
 * abort; the trace fails where that list does not raise). */
EmStatus em_stand_in_list_raise(EmTracer *T, Py_ssize_t n, PyObject *key, PyObject *v);

/* Sets of constants are CONST syms holding a real set; one made while tracing (src < 0, a fresh
 * object) may be changed in place by its methods and operators, one read from the frame not. */
static inline int em_set_of_frame(const EmSym *s) {
    return s->kind == SYM_CONST && PySet_CheckExact(s->obj) && s->src >= 0;
}
/* A set of the frame the trace changed (EM_POS_SET_CHANGED): only uses that do not depend on its
 * order are answered (its copy may iterate in another order than the caller's set). */
static inline int em_set_changed(const EmSym *s) { return em_set_of_frame(s) && s->pos == EM_POS_SET_CHANGED; }
/* 1 when a local or stack value of the frame being traced or of a caller holds sym o (a few
 * levels into containers, attributes and cells): o is alive then. 0: not known to be. */
int em_frames_hold(EmTracer *T, const EmSym *o);
/* weakref.ref(o) made while tracing (em_call.c known_weakref): items[0] is o. */
static inline int em_weakref_made(const EmSym *s) {
    return s->kind == SYM_OBJ && s->src < 0 && PyWeakref_CheckRefExact(s->obj) && s->items.len == 1;
}
/* How set membership compares x: 0 a constant (by value), 1 an object hashed by identity (a
 * tensor; an object with object's __hash__ and __eq__), -1 neither. */
int em_set_item_kind(const EmSym *x);
static inline int em_set_made(const EmSym *s) { return s->kind == SYM_CONST && PySet_CheckExact(s->obj) && s->src < 0; }
/* A frozenset constant (read-only methods run on it). */
static inline int em_frozenset_const(const EmSym *s) { return s->kind == SYM_CONST && PyFrozenSet_CheckExact(s->obj); }
/* self.<f>(*args) for a method descriptor f of set on a set made while tracing: run on the set
 * itself with the arguments' known values. CALL_NEXT: not such a call. */
EmStatus em_set_method(EmTracer *T, PyObject *f, EmSym *self, EmSym **args, int nargs, EmSym **out);
/* 1 when method descriptor f of set only reads the set (a set of the frame may take it). */
int em_set_reads(PyObject *f);
/* set(it)/frozenset(it) over an iterable sym of constants (src NULL: set()): a CONST of a fresh set. */
EmStatus em_make_set(EmTracer *T, PyObject *type, EmSym *src, EmSym **out);

/* ---- lazy iterators (em_lazy.c) ---- */
/* A generator object for the frame fr of a generator function's call, set up but not run (its
 * locals, stack and code_bytes taken over, freed on error too; eh: its code has an exception
 * table): an ITER sym whose body runs up to its next yield each time an item is taken. func
 * (made in the trace as closure, or NULL) was called with `call` (em_gen_call). */
EmStatus em_gen_make(EmTracer *T, const EmFrame *fr, int eh, PyObject *func, EmSym *closure, EmSym *call, EmSym **out);
/* The arguments of the call of *fn that made generator `it` (a tuple sym: positional tuple,
 * keyword dict) while it has not started, else NULL (an error set, or none): where it leaves
 * the trace, that call made again gives the same generator. */
EmSym *em_gen_call(EmTracer *T, const EmSym *it, EmSym **fn);
/* Generator `it` as it can leave the trace: 1 when it is suspended at a yield outside any
 * except clause, every item it made taken (*fn the function that made it, as em_gen_call's,
 * and *fr its frame there); 2 when it has ended; 0 otherwise (running, run ahead, or suspended
 * where its handled exception would be lost); -1 on error. */
int em_gen_suspended(EmTracer *T, const EmSym *it, EmSym **fn, const EmFrame **fr);
/* YIELD_VALUE in the generator being run: suspends it with v as the item taken. */
EmStatus em_gen_yield(EmTracer *T, EmSym *v);
/* gen.send(v) (v NULL: next(gen)): the value yielded, or *out NULL and *ret (may be NULL) the
 * value the generator returned: StopIteration. Also for a plain iterator (v NULL or None). */
EmStatus em_gen_send(EmTracer *T, EmSym *it, EmSym *v, EmSym **out, EmSym **ret);
/* Generators made in the trace that are suspended where a handler would run if they were
 * closed (a try/finally or with block around the yield): CPython closes one when its last
 * reference goes. Called after each instruction while there are such generators (T->fin_gens)
 * and at the root frame's return (at_return: its locals are gone, only its return value and
 * the trace's stores reach objects): each one no frame, store or reachable object refers to
 * any longer is closed now, its finally code traced. EM_OK, EM_ABORT or EM_ERR. */
EmStatus em_gen_finalize(EmTracer *T, int at_return);
/* Whether anything but frame slot *slot can still reach the sym there (the frames, the trace's
 * stores, changed containers, cells, contexts): 1 (or not known: the walk gave up), 0, or -1
 * with an exception. */
int em_sym_held_elsewhere(EmTracer *T, EmSym **slot);
/* gen.send/close/throw/__next__ called as a method f of ITER sym self. CALL_NEXT: not one. */
EmStatus em_gen_method(EmTracer *T, PyObject *f, EmSym *self, EmSym **args, int nargs, EmSym **out);
/* map(fn, *srcs) (kind MAP), itertools.starmap(fn, src) (STARMAP), filter(fn or None, src) (FILTER), zip(*srcs) (ZIP,
 * `start` Py_True for strict=True), enumerate(src, start) (ENUM, start in `start`),
 * itertools.count(start, step) (COUNT, no srcs): a lazy ITER sym; srcs are iterables (iter()
 * is taken of each). */
EmStatus em_lazy_make(EmTracer *T, EmLazyKind kind, EmSym *fn, EmSym **srcs, int n, PyObject *start, PyObject *step,
                      EmSym **out);
/* itertools.chain(*its) / islice(it, ...) (args: the call's arguments) when one of the
 * iterables is a lazy iterator not yet at its end: a lazy ITER sym; CALL_NEXT otherwise. */
EmStatus em_lazy_itertools(EmTracer *T, PyObject *f, EmSym **args, int n, PyObject *kwnames, EmSym **out);
/* The next item of lazy iterator it appended to it->items, or *made 0 at its end. */
EmStatus em_lazy_step(EmTracer *T, EmSym *it, int *made);
/* 1 when lazy iterator it has made its last item. */
int em_lazy_done(const EmSym *it);
/* A map, filter or zip (not strict) not at its end whose items made so far were all taken: 1
 * with its function (NULL: filter(None, ...), zip) and source iterators, else 0. */
int em_lazy_parts(const EmSym *it, EmSym **fn, EmSym ***srcs, int *n);
/* The arguments that make a lazy itertools.repeat, count, islice or chain (of up to 4 sources
 * left) in the state it was left in, or an accumulate or cycle not started (args room for 4): 1 with args[0..*n) set and *helper the
 * ember._rules function to call on them (NULL: the iterator's type), 0 for other iterators,
 * -1 on error. */
int em_lazy_remake(EmTracer *T, const EmSym *it, EmSym **args, int *n, const char **helper);
/* Iteration over user object obj (an instance made while tracing or from the frame) whose class
 * has a Python __next__: a lazy ITER sym calling it per item (StopIteration ends it). */
EmStatus em_lazy_next_of(EmTracer *T, EmSym *obj, EmSym **out);
/* A list, tuple or range iterator v of the frame (read from a slot): a lazy ITER sym whose
 * j-th item is the guard's _rules.iter_peek(j, v) (its end: the count left guarded), the
 * real iterator untouched until the graph has run; the first item taken puts the sym in
 * T->mutated, and em_lazy_peek_taken says what to take from v then. NULL on error. */
EmSym *em_lazy_peek_make(EmTracer *T, PyObject *EM_BORROWED v);
/* For a PEEK iterator: 1 with the items the trace took from it and whether it took it to its
 * end (the frame's iterator is advanced so: _rules.iter_advance), else 0. */
int em_lazy_peek_taken(const EmSym *it, int *taken, int *ended);
/* The object a NEXT iterator steps, when every item it made was taken (it can leave the trace
 * as that object), else NULL. */
EmSym *em_lazy_next_obj(const EmSym *it);
/* The exception a generator frame raises for exc (new reference): PEP 479's RuntimeError for
 * a StopIteration, else exc itself. */
EM_NEW PyObject *em_gen_exc(PyObject *exc);
void em_lazy_free(EmLazy *L);
/* Makes iterator `it` watch container src (a LIST, DICT or dict VIEW; others are ignored):
 * what 'k', 'v', 'i' for a dict iterated directly, else 0. EM_OK or EM_ERR (no memory). */
EmStatus em_iter_watch(EmTracer *T, EmSym *it, EmSym *src, char what);
/* The type of iter(x) (rev: of reversed(x)) for the value sym src stands for (new ref), NULL
 * without an exception when ember cannot tell it without running user code. */
EM_NEW PyObject *em_iter_type(EmTracer *T, EmSym *src, int rev);
EmStatus em_call_dunder(EmTracer *T, EmSym *self, const char *name, EmSym **args, int nargs, EmSym **out);
EmStatus em_obj_store_attr(EmTracer *T, EmSym *base, PyObject *name, EmSym *v);
/* 1 when graph nodes from `from` on change a value in place (in-place operators, item stores,
 * torch's trailing-underscore methods, out= arguments) (em_inline.c). */
int em_graph_mutated(EmGraph *G, int32_t from);
/* The Python operator function of graph op `op` (operator.add...), borrowed (em_sym_ops.c). */
PyObject *em_op_fn(EmOp op);
/* The value the trace last stored as global `name` of the module whose dict is gdict (a global
 * store in a function of that module, or an attribute store on the module), or NULL (em_obj.c). */
EmSym *em_global_stored(EmTracer *T, PyObject *gdict, PyObject *name);
/* Module o's class has its own `name` method: a Python function from outside torch.nn (whose
 * containers' ModuleList.__len__ and such are read from their members) (em_call.c). */
int em_module_own_dunder(PyObject *o, PyObject *name);
/* del base.name of an instance made while tracing or of the frame: its class's Python
 * __delattr__ traced, or object's (em_obj_generic_del). */
EmStatus em_obj_del_attr(EmTracer *T, EmSym *base, PyObject *name);
/* object.__delattr__(base, name): removed from an instance made while tracing, or recorded as
 * a deletion on an instance of the frame (replayed after the graph). */
EmStatus em_obj_generic_del(EmTracer *T, EmSym *base, PyObject *name);
/* object.__setattr__ semantics on base (the type's own __setattr__ already traced). */
EmStatus em_obj_generic_set(EmTracer *T, EmSym *base, PyObject *name, EmSym *v);
/* The value an earlier store of this trace gave base.name, or NULL. */
EmSym *em_obj_stored(EmTracer *T, EmSym *base, PyObject *name);
/* Whether a stored value (em_obj_stored, em_obj_dict_stored) is a deletion: the attribute is gone. */
static inline int em_store_deleted(const EmSym *v) { return v && v->kind == SYM_NULL && v->pos == EM_POS_DELETED; }
/* The value an earlier store of this trace gave `name` on the object of the frame whose
 * instance dict is d (o.__dict__ read after o.name = v), or NULL. */
EmSym *em_obj_dict_stored(EmTracer *T, PyObject *d, PyObject *name);
/* Frame dict d (an object's __dict__ read through a slot) read whole: a dict sym of its items
 * (keys guarded in order, values through their slots) with the trace's stores on the object
 * applied; one per dict, which later attribute stores on the object update. */
EmStatus em_instance_dict(EmTracer *T, EmSym *d, EmSym **out);
/* The sym of the frame's list or dict o when the trace changed it (in T->mutated), else NULL. */
EmSym *em_sym_mutated_of(EmTracer *T, PyObject *o);
/* Attribute of an instance made while tracing (em_sym.c). */
EmStatus em_sym_new_attr(EmTracer *T, EmSym *base, PyObject *name, int method, EmSym **out, EmSym **self);
/* Pushes OUT_LAST and the stores to replay when the trace made any (before the value's tree). */
EmStatus em_obj_effects_head(EmTracer *T);
EmStatus em_trace_build_content(EmTracer *T, EmSym *s);
/* 1 when the trace may change container s: em_sym_own, or a plain list or dict from the frame
 * (recorded in T->mutated: its items are written back after the graph); 0 for other inputs. */
int em_sym_mutable(EmTracer *T, EmSym *s);
EmStatus em_trace_build_out(EmTracer *T, EmSym *s, int depth);
/* Graph arguments for syms, contiguous: the first index, or -1 with *st set (em_call.c). */
int32_t em_node_args(EmTracer *T, EmSym **args, int nargs, EmStatus *st);
/* The device an op's result is on, from its tensor arguments (borrowed; NULL: none). */
PyObject *em_result_device(EmTracer *T, EmSym **args, int nargs);
/* fn's printable name (module.qualname) in buf; returns buf. */
const char *em_callable_name(PyObject *fn, char *buf, size_t n);
/* The interpreter loop over the current frame state (em_trace.c). */
EmStatus em_trace_loop(EmTracer *T);
/* Items of an iterable sym as a tuple/list sym (an iterator's remaining items, which
 * uses it up; a constant sequence; a dict's keys; a module container). */
EmStatus em_seq_items(EmTracer *T, EmSym *s, EmSym **out);
/* Realizes a lazily wrapped local (argument or free variable). */
EmSym *em_local_get(EmTracer *T, int i, EmStatus *st);
/* The value of local i of the current frame, through its cell for a cell or free variable.
 * NULL with *st. */
EmSym *em_local_value(EmTracer *T, int i, EmStatus *st);
/* The one SYM_CELL (pos 1, obj the cell) standing for program cell `cell` (made on first
 * use): every frame's free variable over that cell holds it, so what one frame writes the
 * later reads of every frame see. NULL on error. */
EmSym *em_prog_cell(EmTracer *T, PyObject *cell);
/* The guard slot of program cell c's object, made once: the intercepted function's closure
 * item when c is one of its cells (whichever this call's function has), else the first slot
 * `via` it was reached through (a nested function's __closure__ item), else the constant
 * cell. A via that is not that slot is guarded to hold the same cell. -1 on error. */
int32_t em_prog_cell_slot(EmTracer *T, EmSym *c, PyObject *name, int32_t via);
/* The sym the trace made for object o read from the frame, or NULL (with an exception on error). */
EmSym *em_sym_seen(EmTracer *T, PyObject *o);

/* Rows of em_known.def: the callables em_call answers itself (call_known in em_call.c). */
typedef enum {
#define X(name, path, handler) EMK_##name,
#include "em_known.def"
#undef X
    EMK__COUNT
} EmKnown;
/* The object of em_known.def's row NAME (borrowed: em_state.known holds it). */
#define EM_KNOWN(name) PyTuple_GET_ITEM(em_state.known, EMK_##name)
/* The handlers of em_known.def rows kept outside em_call.c (the signature of a kind's call
 * slot; CALL_NEXT: the rule decides). */
typedef EmStatus (*EmCallFn)(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_tensor_size(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_tensor_numel(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_tensor_layout(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out);
EmStatus em_known_tensor_numpy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_from_numpy(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_torch_tensor(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* collections.namedtuple(...) of known immutable values: the class made now, the trace's twin
 * (T->made_classes keeps the call's arguments, module= filled in as namedtuple would from its
 * caller's globals), made again per call where it leaves the trace. */
EmStatus em_known_namedtuple(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* Grad mode g for the ops the trace records next, recorded in the graph and set while tracing
 * (an op the trace wraps in no_grad itself: `t.data = v`). */
EmStatus em_ctx_set_grad(EmTracer *T, int g);
/* torch._C._set_grad_enabled(mode) called directly (a context's __exit__ inlined): the
 * trace's grad mode changes with the real one, recorded as a graph call (em_ctx.c). */
EmStatus em_known_set_grad(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* len(a) of an ndarray sym (em_sym_np.c). */
EmStatus em_np_len(EmTracer *T, EmSym *a, EmSym **out);
/* NumPy on tensors (em_sym_np.c). em_np_call: wrapper (an ember._np.NpCall) called on args,
 * ndarrays given as their tensors, tensor results made ndarrays. em_np_function: numpy
 * function f given tensors or ndarrays, as its torch._numpy twin (CALL_NEXT: f has none, or no
 * argument holds a tensor). em_np_op: an operator with an ndarray operand. */
EmStatus em_np_call(EmTracer *T, PyObject *wrapper, EmSym **args, int n, PyObject *kwnames, EmSym **out);
EmStatus em_np_function(EmTracer *T, PyObject *f, EmSym **args, int n, PyObject *kwnames, EmSym **out);
EmStatus em_np_op(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int n, EmSym **out);
/* A numpy array v of the frame read from slot: an ndarray over a graph input, the tensor
 * torch.from_numpy(v) a guard slot of its own makes per call. NULL with *st EM_OK: v is no
 * array ember traces (the caller wraps it otherwise). */
EmSym *em_np_wrap(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st);
EmStatus em_known_cond(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_minmax(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* The arguments of a call of fn as (fn, positional tuple, keyword (name, value) pairs) of
 * their constant values (em_ctx.c); NULL without an exception when one is not a constant. */
EM_NEW PyObject *em_call_spec(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames);
/* warnings.simplefilter/filterwarnings/resetwarnings (em_ctx.c). */
EmStatus em_ctx_warn_filter(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);

/* ---- slices with symbolic bounds (em_sym_slice.c) ---- */
/* BUILD_SLICE's slice of n bounds: a constant slice of constant bounds, a SYM_SLICE when one is a
 * symbolic int, else the abort; em_slice_make: always a SYM_SLICE (the rest of the bounds None). */
EmStatus em_slice_build(EmTracer *T, EmSym **bounds, int n, EmSym **out);
EmStatus em_slice_make(EmTracer *T, EmSym **bounds, int n, EmSym **out);
/* Its value with the bounds pinned (new reference, NULL with an exception), as a constant sym. */
EM_NEW PyObject *em_slice_value(EmTracer *T, EmSym *s);
EmSym *em_slice_pinned(EmTracer *T, EmSym *s);
/* Its graph argument: a node making slice(start, stop, step) from the bounds at run time. */
int32_t em_slice_arg(EmTracer *T, EmSym *s, EmStatus *st);

/* ---- symbolic sizes (em_sym_int.c; rules for op results: em_shape_sym.c) ---- */
/* The rows of em_sym_rules.def (0: no rule). */
typedef enum {
    SYMR_NONE,
#define X(name) SYMR_##name,
#include "em_sym_rules.def"
#undef X
} EmSymRule;
enum { EM_DIMS_STATIC = -1, EM_DIMS_UNKNOWN = -2 };
/* 1 once the trace has a symbol (before that every size is its traced value). */
int em_int_active(const EmTracer *T);
/* A SYM_INT for expression e, or a constant when e is one. NULL on error. */
EmSym *em_int_sym(EmTracer *T, int32_t e);
/* The expression of an int sym (SYM_INT, or a constant int): -1 when s is not one, -2 on error. */
int32_t em_int_expr(EmTracer *T, EmSym *s);
/* Pins expression e to its traced value (a guard); em_sym_specialize: every symbolic size s
 * holds (an int, a tensor's sizes and what they came from, nested in tuples and lists). */
EmStatus em_int_specialize(EmTracer *T, int32_t e);
EmStatus em_sym_specialize(EmTracer *T, EmSym *s);
EmStatus em_node_specialize(EmTracer *T, EmRef r);
/* The value of a SYM_INT, pinned (new reference; NULL with an exception on error). */
EM_NEW PyObject *em_int_value(EmTracer *T, EmSym *s);
/* Whether args (nested in tuples, lists and slices) hold a size from .item(): a SYM_INT or a
 * tensor's dimension that reads an unbacked symbol. */
int em_int_holds_unbacked(const EmTracer *T, EmSym **args, int nargs);
/* The trace relied on a relation of an unbacked symbol (a size from .item()) that its range
 * does not decide: a data-dependent failure at the current instruction. */
EmStatus em_int_undecided(EmTracer *T);
/* The graph node that computes expression e (not a constant) from the inputs. -1 with *st. */
EmRef em_int_ref(EmTracer *T, int32_t e, EmStatus *st);
EmStatus em_int_binop(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym *b, EmSym **out);
EmStatus em_int_unary(EmTracer *T, EmOp op, PyObject *fn, EmSym *a, EmSym **out);
/* abs(a) of a SYM_INT: a or -a, its sign guarded. */
EmStatus em_int_abs(EmTracer *T, EmSym *a, EmSym **out);
/* Dimension d of node r as an expression (-1 with *st set); its dims: exprs[ndim] (0 or -1). */
int32_t em_node_dim(EmTracer *T, EmRef r, int d, EmStatus *st);
int em_node_set_dims(EmTracer *T, EmRef r, const int32_t *exprs, int ndim);
/* Node `to` has the sizes of node `from` (an in-place op's result). */
EmStatus em_node_copy_dims(EmTracer *T, EmRef to, EmRef from);
/* 1 when node r's sizes may be symbolic (symbolic, or not known: em_node_dim decides). */
int em_node_has_sym_dims(const EmTracer *T, EmRef r);
/* Inputs: the symbols of input node ref's dimensions in dyn (read from slot); a SYM_INT for
 * the int v in slot (NULL, *st untouched: it stays a constant). */
EmStatus em_int_input_dims(EmTracer *T, EmRef ref, int32_t slot, uint64_t dyn);
EmSym *em_int_input(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st);
/* Sizes of a tensor sym: one dimension, its torch.Size (a tuple sym), its numel. */
EmStatus em_tensor_dim_size(EmTracer *T, EmSym *t, int d, EmSym **out);
EmStatus em_tensor_shape(EmTracer *T, EmSym *t, EmSym **out);
EmStatus em_tensor_numel(EmTracer *T, EmSym *t, EmSym **out);
/* Which dimensions of input tensor v (guard slot slot) are symbolic in this trace (em_shape_sym.c):
 * a mask, (uint64_t)-1 with *st set on error. */
uint64_t em_dyn_dims(EmTracer *T, PyObject *v, int32_t slot, EmRef ref, EmStatus *st);
/* The ranges of mark_dynamic(v, d, min=, max=) (v._dynamo_dynamic_range, torch's and ember's)
 * as guarded relations of the symbols of v's dimensions in dyn (input node ref): a call
 * outside them fails the guard and recompiles. A traced size outside its range raises
 * ember.ConstraintViolation (a ValueError the hook passes to the caller). */
EmStatus em_dyn_ranges(EmTracer *T, PyObject *v, EmRef ref, uint64_t dyn);
/* Whether the int v in slot is symbolic in this trace (automatic dynamic). -1 on error. */
int em_dyn_int(EmTracer *T, PyObject *v, int32_t slot);
/* Whether the float v in slot is a graph input in this trace (automatic dynamic). -1 on error. */
int em_dyn_float(EmTracer *T, PyObject *v, int32_t slot);
/* ---- float inputs (em_sym_float.c) ---- */
/* A SYM_FLOAT for the float v in slot (its type guarded). NULL with *st on error. */
EmSym *em_float_input(EmTracer *T, PyObject *v, int32_t slot, EmStatus *st);
/* Pins a SYM_FLOAT (its value guarded; the sym becomes a constant); no-op for other kinds. */
EmStatus em_float_pin(EmTracer *T, EmSym *s);
/* fn(a) for a SYM_FLOAT a and fn int, float, round, abs, math.floor/ceil/trunc: float(a) is a,
 * an int result the int read from the guard's fn(a) (EMG_LOAD_OP; a constant guarded by value,
 * or a symbolic int once it changed), a float result a SYM_FLOAT; CALL_NEXT where fn raises
 * (the caller pins a). */
EmStatus em_float_conv(EmTracer *T, PyObject *fn, EmSym *a, EmSym **out);
/* The graph argument of a SYM_FLOAT: its input, or (outside a pointwise operator) pinned. */
int32_t em_float_arg(EmTracer *T, EmSym *s, EmStatus *st);
/* em_sym_item.c. x.item() of a tensor sym: a SYM_ITEM (CALL_NEXT when numbers are not captured). */
EmStatus em_known_tensor_item(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* x.tolist() where numbers are captured, of a tensor of static sizes, at most two dimensions and
 * 64 elements: nested lists of x[i][j].item(); CALL_NEXT otherwise. */
/* em_sym_dynout.c: x.nonzero(), x.masked_select(m) and x[mask] where captured: a node whose
 * first dimension is an unbacked symbol; CALL_NEXT otherwise. em_dyn_mask_index: args x, mask. */
EmStatus em_known_nonzero(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_masked_select(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out);
EmStatus em_known_unique(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_known_where(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
EmStatus em_dyn_mask_index(EmTracer *T, EmSym **args, EmSym **out);
EmStatus em_known_tensor_tolist(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames,
                                EmSym **out);
/* torch._check(c) of a bool SYM_ITEM, torch._check_is_size(i) of an int one: a check node and a
 * bound on the value; CALL_NEXT for any other argument. */
EmStatus em_known_check(EmTracer *T, EmSym *fn, EmSym *self, EmSym **all, int n, PyObject *kwnames, EmSym **out);
/* int(s), float(s), abs(s) of a SYM_ITEM: a graph node; CALL_NEXT for anything else. */
EmStatus em_item_conv(EmTracer *T, PyObject *fn, EmSym *s, EmSym **out);
/* int(t) or float(t) of a one-element tensor sym t where numbers are captured: fn of t.item();
 * CALL_NEXT otherwise. */
EmStatus em_tensor_conv(EmTracer *T, PyObject *fn, EmSym *t, EmSym **out);
/* The graph argument of a SYM_ITEM: its node where T->floats_ok (its value cannot change the
 * op's result metadata), else the abort (data-dependent). */
int32_t em_item_arg(EmTracer *T, EmSym *s, EmStatus *st);
/* A stand-in for s's value in a meta run (new reference): one of two of its type (which: 0 or
 * 1), for em_item_call_check's comparison. */
EM_NEW PyObject *em_item_dummy(const EmSym *s, int which);
/* Whether args (or the tuples and lists among them) hold a SYM_ITEM; a SYM_FLOAT. */
int em_item_among(EmSym **args, int nargs);
int em_float_among(EmSym **args, int nargs);
/* Whether what the _rules setting `setting` (capture_scalar_outputs,
 * capture_dynamic_output_shape_ops) says is captured is captured in this trace: always under
 * fullgraph, as TorchDynamo does. 1, 0, -1 on error. */
int em_capturing(EmTracer *T, const char *setting);
/* Before recording op(args) holding a SYM_ITEM: EM_OK with *as_sizes 0 when its result
 * metadata cannot depend on the number's value (a pointwise operator or torch function, a fill
 * value, torch.tensor's data; checked by a second meta run on other stand-ins), 1 when it may
 * (the numbers are to be sizes: em_item_sizes); or a failure. */
EmStatus em_item_call_check(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames,
                            int *as_sizes);
/* The size symbol of int item s (an unbacked symbol bound to its node, made at its first use
 * as a size): its expression; -2 when s is no int item (or its bounds are empty), -1 on error. */
int32_t em_item_size(EmTracer *T, EmSym *s);
/* em_item_size with the stand-in `hint` (clamped into its bounds) where it makes the symbol. */
int32_t em_item_size_hinted(EmTracer *T, EmSym *s, int64_t hint);
/* Before em_item_sizes for split(x, [n0, n1, ...]) / split_with_sizes of int items: makes
 * their symbols with stand-ins that sum to the split dimension's traced size (the meta run
 * checks the sum). EM_OK, or EM_ERR. */
EmStatus em_split_hints(EmTracer *T, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames);
/* args with their int items (in plain tuples and lists too) as SYM_INTs of their size symbols,
 * into out[nargs]; a float or bool item among them fails (data-dependent). */
EmStatus em_item_sizes(EmTracer *T, EmSym **args, int nargs, EmSym **out);
/* 1 when an in-place op (its result is its first argument, retargeted) keeps that argument's
 * sizes (x += y, x.mul_(y)); 0 for one that may change them (x.t_(), x.resize_()). */
int em_inplace_keeps_sizes(EmOp op, PyObject *fn);
/* The symbolic sizes of op result node r (a tensor sym out) from its arguments, by the rules
 * of em_shape_sym.c; without a rule the node stays unknown. */
EmStatus em_shape_sym(EmTracer *T, EmOp op, PyObject *fn, EmSym **args, int nargs, PyObject *kwnames, EmSym *out);

#endif
