/* em_state.h: all process-wide mutable state of ember in one struct (DESIGN.md convention
 * 10). Filled by py/em_module.c at import and by ember.__init__ through _C._setup; read by
 * every stage. Object fields are owned references unless marked borrowed.
 */
#ifndef EM_STATE_H
#define EM_STATE_H

#include <Python.h>

#include "../core/em_core.h"

#define EM_VERIFIED_KEYS 16

/* Interned names (core/em_strings.def): EM_STR(ID) is a borrowed str, valid from import on. */
typedef enum {
#define X(id, text) EMS_##id,
#include "../core/em_strings.def"
#undef X
    EMS__COUNT
} EmStrId;
#define EM_STR(id) (em_state.str[EMS_##id])

typedef struct {
    /* tensor layout, found by probing (guard/em_guard_tensor.c) */
    int probe_ok;
    PyObject *str[EMS__COUNT]; /* interned names, see EM_STR */
    int n_verified_keys; /* em_guard_tensor.c: key sets read directly */
    uint64_t verified_keys[EM_VERIFIED_KEYS];
    Py_ssize_t impl_off, ss_off, dtype_off, dev_off, keyset_off;
    Py_ssize_t storage_off, sdata_off; /* TensorImpl's StorageImpl*, its data pointer; -1: not probed */
    int ss_inline;
    getter requires_grad_get;
    _Bool (*tensor_rg)(const void *impl); /* c10::TensorImpl::requires_grad, once verified; or NULL */
    PyTypeObject *tensor_type, *param_type;

    /* global-state readers */
    PyObject *fn_grad, *fn_default_dtype, *str_cpu, *str_cuda;
    PyObject *fn_autocast; /* (device_type) -> 0 when autocast is off there, else 1 + its dtype's number */
    void *gs_grad, *gs_autocast, *gs_autocast_dtype, *gs_dtype; /* c10 functions for direct reads */
    int gs_direct;                          /* 1 once verified by ember._setup */

    /* rules and helpers handed over by ember/_setup (see ember/_rules.py) */
    PyObject *rules;      /* dict: id(callable) -> rule int */
    PyObject *pure_types; /* tuple of types whose instances are constants */
    PyObject *meta_run;   /* callable(fn, args, kwargs) -> meta result, with device rules */
    PyObject *warn;       /* callable(kind, code, why): a frame ember gave up on (ember/_logging.py) */
    PyObject *log;        /* callable(channel, text) */
    PyObject *skip_file;  /* callable(co_filename) -> bool: never intercept that file's code */
    PyObject *forced_codes; /* weakref.WeakSet: codes ember.compile was given directly (never skipped) */
    /* the codes of torch.compiler.disable's wrappers, recursive and not (_rules.DISABLE_*_CODE), or None */
    PyObject *disable_code, *disable_once_code;
    PyObject *nn_module_type; /* torch.nn.Module */
    PyObject *unsupported;    /* ember.Unsupported */
    PyObject *data_dependent; /* ember.DataDependentError (ember/_rules.py) */
    int abort_item; /* the last compile's first trace aborted on a use of a number from .item() (EMA_ITEM_DEP) */
    PyObject *constraint_violation; /* ember.ConstraintViolation: the caller's error, raised from the call */
    PyObject *known; /* tuple: the object of each row of trace/em_known.def, in row order (em_call.c) */
    PyObject *op_fns;        /* tuple indexed by EmOp: the Python operator of each op (meta runs) */
    PyObject *pointwise_fns; /* set of elementwise callables whose metadata C infers */
    PyObject *shape_rules;   /* dict callable -> shape rule (em_infer.c) */
    PyObject *sym_rules;     /* dict callable -> symbolic size rule (em_shape_sym.c) */
    PyObject *type_query_fns; /* set: CONST callables whose answer for a tensor depends only on its type */
    PyObject *size_free_fns;  /* set: queries whose answer does not depend on a tensor's sizes */
    PyObject *state_query_fns; /* set: queries of global state the GLOBAL_STATE guard does not check */
    PyObject *trace_as;       /* dict callable -> the Python function the trace calls instead */
    /* graph calls that change global state (helper attributes of the same names) */
    PyObject *object_getattribute; /* object.__getattribute__ (a slot wrapper) */
    PyObject *set_grad_enabled, *ctx_enter_fn, *ctx_exit_fn, *ctx_reenter_fn, *grad_restorer;
    PyObject *rerun_safe; /* fn -> bool: a graph call of fn changes nothing beyond its result */
    PyObject *rerun_memo; /* dict fn -> True: the torch callables rerun_safe said so of */
    PyObject *set_data; /* aten.shallow_copy_data_ (`t.data = v` in the graph), None where torch lacks it */
    PyObject *warnings_off, *warnings_on; /* () -> None: Python warnings ignored while ember traces */
    PyObject *os_environ;   /* os.environ: lookups guarded per key on its _data dict */
    PyObject *module_trust; /* dict module -> bool: _rules.trusted_module's answer (made on first use) */

    /* backends (ember/backends): list indexed by the backend number a compiled callable
     * carries in its hook flags; item 0 is None (`eager`, the C executor), the others are
     * Python backend objects. backend_compile(backend, graph, inputs, where) -> (fn, info)
     * builds the torch.fx graph and calls the backend (ember/backends/fx.py). */
    PyObject *backends;
    PyObject *backend_compile;
    PyObject *new_iteration; /* () -> None: TorchDynamo's generation counter + 1 (CUDA graph trees) */

    /* code extra slot and hook */
    Py_ssize_t extra_index;
    PyObject *code_registry; /* list of weak references to the codes that have an extra (cache/) */
    Py_ssize_t registry_live; /* its length after the last pruning */
    PyObject *resume_codes;  /* dict: (code, offset, live locals) -> resume code (driver/) */
    PyObject *unbound;       /* the value a resume function takes for a local that is unbound (emit/) */
    void *prev_eval; /* _PyFrameEvalFunction saved when the hook was installed */
    int hook_users;  /* threads with the hook enabled */
    Py_tss_t tss_enabled;
    Py_tss_t tss_root; /* EmRoot * of the outermost frame ember handles on this thread (hook/) */
    /* the compile lock (cache/em_cache.c): the thread holding it and how many times */
    PyThread_type_lock compile_lock;
    unsigned long compile_owner;
    int compile_depth;
    Py_tss_t tss_handed; /* the frame this thread handed to prev_eval (em_hook.c) */

    /* config (ember.config pushes changes through _C._set_config) */
    int cache_size_limit;
    int accumulated_recompile_limit;
    int strict;
    unsigned logs; /* EM_LOG_* bits */

    /* counters for ember.testing */
    long long n_frames, n_aborts, n_hits, n_recompiles, n_fallbacks, n_breaks;
    long long n_graphs; /* compiled frames whose graph has an op (n_frames counts empty ones too) */
    long long n_internal; /* frames run as plain Python after an internal error of ember's */
    long long n_reruns;   /* calls run again as plain Python after their graph raised (em_hook.c) */
} EmState;

enum {
    EM_LOG_GRAPH = 1,
    EM_LOG_GUARDS = 2,
    EM_LOG_RECOMPILES = 4,
    EM_LOG_BREAKS = 8,
    EM_LOG_BYTECODE = 16,
    EM_LOG_DYNAMIC = 32
};

extern EmState em_state;

#endif
