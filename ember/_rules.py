"""What a call becomes, decided in one place (DESIGN.md), and the helpers the C tracer calls.

Rules, keyed by the callable object:
  GRAPH       put into the graph (torch functions, Tensor methods, torch.nn.functional)
  CONST       pure: evaluated at trace time on known values (builtins, math, operator);
              applied to tensors it becomes a graph op when the result is a tensor
  ABORT       depends on tensor values or has side effects ember cannot replay yet
  META_QUERY  tensor metadata query (size, dim, ...): evaluated on the meta tensor
  TRUE        answers True while tracing (torch.compiler.is_compiling and friends)
  CTX         a context manager of global state (grad mode, inference mode): its `with`
              block is traced, the state changes recorded in the graph (csrc/trace/em_ctx.c)

The tracer calls `classify` for callables missing from RULES; the answer is memoized.
`run` runs a callable on meta tensors and tells the device of its result (devices are
tracked by ember, since meta tensors have none).
"""
import abc
import builtins
import collections
import enum
import inspect
import itertools
import math
import operator
import os
import re
import sys
import types
import typing
import warnings

import torch

from . import _C



def _user_error():
    try:
        from torch._dynamo.exc import UserError, UserErrorType
        return (UserError,), UserErrorType.ANTI_PATTERN
    except Exception:  # noqa: BLE001 - no torch._dynamo: ember.Unsupported alone
        return (), None


_USER_ERROR, _ANTI_PATTERN = _user_error()


class DataDependentError(_C.Unsupported, *_USER_ERROR):
    """ember could not capture a use of a number from .item() that needs its value (a branch, a
    size relation its checks do not decide) under fullgraph=True: torch.compile raises its
    UserError there, which this is too. torch._check(...) the bounds the code needs, or let the
    graph break."""

    def __init__(self, msg):
        RuntimeError.__init__(self, msg)
        self.msg, self.error_type, self.real_stack = msg, _ANTI_PATTERN, None
        self.skip_frame, self.category, self.gb_type, self.logged = False, None, "", False


UNKNOWN, GRAPH, CONST, ABORT, META_QUERY, TRUE, CTX = (_C.RULE_UNKNOWN, _C.RULE_GRAPH, _C.RULE_CONST, _C.RULE_ABORT,
                                                       _C.RULE_META_QUERY, _C.RULE_TRUE, _C.RULE_CTX)
NUMPY = _C.RULE_NUMPY  # an ember._np wrapper: a graph call on ndarrays (csrc/trace/em_sym_np.c)

RULES = {}
META = torch.device("meta")
_TensorBase = torch._C.TensorBase


def _set(rule, objs):
    for o in objs:
        if o is not None:
            try:
                RULES[o] = rule
            except TypeError:
                pass


_set(CONST, [getattr(builtins, n) for n in (
    "abs", "all", "any", "bool", "chr", "divmod", "float", "format", "int", "isinstance", "issubclass",
    "len", "max", "min", "ord", "pow", "repr", "round", "sorted", "str", "sum", "tuple", "list", "range",
    "slice", "callable", "reversed", "enumerate", "zip", "hash", "type", "complex", "bin", "hex", "oct", "ascii")])
_set(CONST, [v for v in vars(math).values() if callable(v)])
_set(CONST, [sys.intern])  # of a str constant: the interned one (the same object at run time)
_set(CONST, [os.fspath])  # of a str or bytes constant: itself (an object with __fspath__ is not a constant)
# a compiled pattern's searches and a match's reads (re's cache hands the same Pattern back):
# functions of their constants (sub/subn are not: a callable replacement would run now)
_set(CONST, [re.Pattern.search, re.Pattern.match, re.Pattern.fullmatch, re.Pattern.findall, re.Pattern.split,
             re.Match.group, re.Match.groups, re.Match.groupdict, re.Match.span, re.Match.start, re.Match.end])
_set(CONST, [v for k, v in vars(operator).items() if callable(v) and not k.startswith("_")])
_set(CONST, [torch.Size, torch.Size.numel, torch.device, torch.get_default_dtype, torch.is_grad_enabled,
             torch.is_autocast_enabled, torch.is_inference_mode_enabled, torch.finfo, torch.iinfo,
             # autocast's state: the GLOBAL_STATE guard checks it (on and dtype, cpu and cuda)
             getattr(torch._C, "_is_any_autocast_enabled", None), getattr(torch, "is_autocast_cpu_enabled", None),
             getattr(torch, "get_autocast_dtype", None), getattr(torch, "get_autocast_cpu_dtype", None),
             getattr(torch, "get_autocast_gpu_dtype", None),
             torch.broadcast_shapes, torch.is_tensor, torch.is_floating_point, torch.is_complex,
             torch.promote_types, torch.result_type, torch.can_cast,
             torch.jit.is_scripting, torch.jit.is_tracing, torch.cuda.is_available,
             getattr(torch, "get_default_device", None), torch._C._get_tracing_state,
             # no torch dispatch mode is active while ember's graphs run (README, limitations)
             getattr(torch._C, "_len_torch_dispatch_stack", None),
             getattr(torch._C, "_are_functorch_transforms_active", None),
             # set once per process (rename_privateuse1_backend refuses a second name)
             getattr(torch._C, "_get_privateuse1_backend_name", None),
             getattr(getattr(torch.backends, "mha", None), "get_fastpath_enabled", None),
             torch._C._has_torch_function, torch._C._has_torch_function_unary,
             torch._C._has_torch_function_variadic, torch.overrides.has_torch_function,
             torch.overrides.has_torch_function_unary, torch.overrides.has_torch_function_variadic,
             torch.overrides.is_tensor_like])
# CONST callables whose answer for a tensor depends only on its type (the tensor guards
# check the exact type, and meta tensors keep Parameter-ness): answered on meta tensors
TYPE_QUERIES = {torch._C._has_torch_function, torch._C._has_torch_function_unary,
                torch._C._has_torch_function_variadic, torch.overrides.has_torch_function,
                torch.overrides.has_torch_function_unary, torch.overrides.has_torch_function_variadic,
                torch.is_tensor, torch.is_floating_point, torch.is_complex, torch.overrides.is_tensor_like}
# queries of global state no guard of the GLOBAL_STATE kind checks (matmul and cuDNN settings,
# the autograd engine's checkpoint flag): answered now, a constant, the entry guarded on the same
# answer (csrc/trace/em_call.c known_state_query)
STATE_QUERIES = {f for f in (
    getattr(torch._C, n, None) for n in (
        "_get_cublas_allow_tf32", "_get_cublas_allow_fp16_reduced_precision_reduction",
        "_get_cublas_allow_bf16_reduced_precision_reduction", "_get_cublas_allow_fp16_accumulation",
        "_get_cudnn_allow_tf32", "_get_cudnn_enabled", "_get_cudnn_benchmark", "_get_cudnn_deterministic",
        "_get_mkldnn_enabled", "_get_float32_matmul_precision"))
    if f is not None}
if hasattr(torch.autograd, "_is_checkpoint_valid"):
    STATE_QUERIES.add(torch.autograd._is_checkpoint_valid)
# (torch.compiler.is_dynamo_compiling stays False: ember is not TorchDynamo, and torch.cond
# then runs its eager path, which calls the chosen branch for a constant predicate)
_set(TRUE, [torch.compiler.is_compiling, getattr(torch._dynamo, "is_compiling", None),
            getattr(torch._utils, "is_compiling", None),
            getattr(sys.modules.get("torch._dynamo.external_utils"), "is_compiling", None)])
_T = torch.Tensor
_set(META_QUERY, [getattr(_T, n, None) for n in (
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous", "element_size",
    "is_floating_point", "is_complex", "is_signed", "storage_offset", "__len__", "has_names")] + [torch.numel])
# queries whose answer for a tensor does not depend on its sizes: asked of a tensor with symbolic
# sizes, they do not pin them (csrc/trace/em_call.c call_eval)
SIZE_FREE = {getattr(_T, n) for n in ("dim", "ndimension", "element_size", "is_floating_point", "is_complex",
                                      "is_signed", "has_names") if hasattr(_T, n)} | TYPE_QUERIES
_set(ABORT, [getattr(_T, n, None) for n in (
    "item", "tolist", "numpy", "data_ptr", "__bool__", "__int__", "__float__", "__index__", "__complex__",
    "backward", "register_hook", "retain_grad", "untyped_storage", "storage", "get_device", "__iter__",
    "__array__", "__repr__", "__str__", "__format__", "equal", "is_nonzero", "nonzero", "record_stream",
    "__reduce_ex__", "__setstate__", "share_memory_", "pin_memory", "is_pinned")])
_set(ABORT, [torch.equal, torch.is_nonzero, torch.allclose, torch.manual_seed, torch.seed,
             torch.set_default_dtype, getattr(torch, "set_default_device", None),
             torch.use_deterministic_algorithms, torch.save, torch.load, torch.cuda.synchronize,
             torch.nonzero, torch.unique, torch.masked_select, torch.autograd.grad, torch.autograd.backward,
             torch.set_printoptions,
             torch.get_rng_state, torch.set_rng_state, torch.random.fork_rng])
# TorchDynamo itself (torch.compile inside a compiled function, torch.cond's tensor-predicate
# path): never traced, it runs at a graph break (see also _classify)
_set(ABORT, [torch.compile, getattr(torch._dynamo, "optimize", None)])
# torch._dynamo.decorators.leaf_function: its wrapper (inlined: _classify) calls this, traced as
# _shim_leaf_call: a graph op (leaf_op) whose meta run is the registered fake implementation
_LEAF_CALL = getattr(sys.modules.get("torch._dynamo.decorators"), "_invoke_leaf_function_python", None)
_set(ABORT, [print, input, open, builtins.exec, builtins.eval, builtins.id, builtins.setattr,
             builtins.delattr, builtins.vars, builtins.globals, builtins.locals])


# ---- callables traced as another (csrc/trace/em_call.c call_known) ----

def _record_function(name, args=None):
    """torch.autograd.profiler.record_function inside a graph: no profiler range (TorchDynamo
    drops them too); the block runs."""
    import contextlib
    return contextlib.nullcontext()


def _generation_tag(*cls_obj):
    """TorchDynamo's tag of a module made while tracing (its patched nn.Module.__init__, see
    _classify): nothing; the module the output tree makes is never tagged, as one made before
    TorchDynamo ran is not."""


# operator.itemgetter/attrgetter/methodcaller made in the trace: functions doing what they do
# (a closure over the arguments); one leaving the trace aborts (csrc/trace/em_trace.c
# out_closure: the caller would get a function, not the operator object)
import functools as _functools  # noqa: E402
_functools_partial_probe = _functools.partial(print)


def _shim_itemgetter(item, *items):
    if not items:
        def itemgetter(obj):
            return obj[item]
    else:
        keys = (item,) + items

        def itemgetter(obj):
            return tuple([obj[k] for k in keys])
    return itemgetter


def _shim_attrgetter(attr, *attrs):
    def resolve(obj, name):
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj

    if not attrs:
        def attrgetter(obj):
            return resolve(obj, attr)
    else:
        names = (attr,) + attrs

        def attrgetter(obj):
            return tuple([resolve(obj, n) for n in names])
    return attrgetter


def _shim_methodcaller(name, /, *args, **kwargs):
    def methodcaller(obj):
        return getattr(obj, name)(*args, **kwargs)
    return methodcaller


_GETTER_FUNCS = {}  # operator getter object -> its shim (kept alive while ember traces calls of it)


def getter_function(g):
    """The function doing what the itemgetter, attrgetter or methodcaller object g does (the shim
    made from the arguments g was made with, read through its __reduce__), or None."""
    if type(g) not in (operator.itemgetter, operator.attrgetter, operator.methodcaller):
        return None
    fn = _GETTER_FUNCS.get(g)
    if fn is None:
        ctor, args = g.__reduce__()[:2]
        if type(ctor) is type(_functools_partial_probe):  # methodcaller with keywords: partial(cls, name, **kw)
            fn = _shim_methodcaller(*ctor.args, *args, **ctor.keywords)
        else:
            fn = TRACE_AS[ctor](*args)
        _GETTER_FUNCS[g] = fn
    return fn


def _log_api_usage_once(event):
    """torch._C._log_api_usage_once in a traced frame (nn.Module.__init__): torch's usage
    logging, once per process per event; not repeated by the graph (TorchDynamo drops it too)."""
    return None


def _re_sub_of(pattern, repl, string, count, flags, n):
    """re.sub (n False) or re.subn of constants with a str or bytes replacement: the result."""
    return (re.subn if n else re.sub)(pattern, repl, string, count=count, flags=flags)


_set(CONST, [_re_sub_of])


def _re_sub(pattern, repl, string, count=0, flags=0):
    """re.sub in a traced frame: a function of its constants for a str or bytes replacement (a
    callable one is called per match by re's code: a graph break there)."""
    if isinstance(repl, (str, bytes)):
        return _re_sub_of(pattern, repl, string, count, flags, False)
    return re._compile(pattern, flags).sub(repl, string, count)


def _re_subn(pattern, repl, string, count=0, flags=0):
    """re.subn in a traced frame, as _re_sub."""
    if isinstance(repl, (str, bytes)):
        return _re_sub_of(pattern, repl, string, count, flags, True)
    return re._compile(pattern, flags).subn(repl, string, count)


def _legacy_tensor_shim(cls):
    """torch.LongTensor(...) of a CPU legacy tensor type: data given as a list or tuple is
    torch.tensor(data, dtype=), sizes torch.empty(sizes, dtype=), as the constructor makes them
    (none: an empty tensor; on the CPU whatever the default device); any other form is the
    constructor's own call."""
    dtype = cls.dtype

    def make(*args, **kwargs):
        if not kwargs and len(args) == 1 and type(args[0]) in (list, tuple):
            return torch.tensor(args[0], dtype=dtype, device="cpu")
        if not kwargs and all(type(a) is int for a in args):
            return torch.empty(args or (0,), dtype=dtype, device="cpu")
        return type(cls).__call__(cls, *args, **kwargs)  # not the shim again: the trace breaks there
    return make


def _sym_max(a, b):
    """torch.sym_max of Python numbers (traced: symbolic sizes stay symbolic through max): a float
    when either is one."""
    if isinstance(a, float) or isinstance(b, float):
        return float(max(a, b))
    return max(a, b)


def _sym_min(a, b):
    """torch.sym_min, as _sym_max."""
    if isinstance(a, float) or isinstance(b, float):
        return float(min(a, b))
    return min(a, b)


class _CmpKey:
    """functools.cmp_to_key(cmp)(obj) made in the trace: compares by cmp(a, b) against 0, as
    the C KeyWrapper does."""

    def __init__(self, cmp, obj):
        self.cmp = cmp
        self.obj = obj

    def __lt__(self, other):
        return self.cmp(self.obj, other.obj) < 0

    def __gt__(self, other):
        return self.cmp(self.obj, other.obj) > 0

    def __eq__(self, other):
        return self.cmp(self.obj, other.obj) == 0

    def __le__(self, other):
        return self.cmp(self.obj, other.obj) <= 0

    def __ge__(self, other):
        return self.cmp(self.obj, other.obj) >= 0

    __hash__ = None


def _shim_cmp_to_key(mycmp):
    return _functools.partial(_CmpKey, mycmp)


real_cmp_to_key = _functools.cmp_to_key  # what a cmp_to_key made in the trace is when it leaves it


class HashAs:
    """A stand-in of hash h, equal only to itself, for item i of a set the trace holds whose
    item hashes by its own __hash__ (csrc/trace/em_cont.c set_value_items: Python's order)."""

    __slots__ = ("h", "i")

    def __init__(self, h, i):
        self.h = h
        self.i = i

    def __hash__(self):
        return self.h


_NOTHING = object()  # no value yet (the groupby shim's state)


def _shim_groupby(iterable, key=None):
    """itertools.groupby made in the trace: CPython's algorithm (itertoolsmodule.c groupby_next,
    _grouper_next) as a generator of (key, group) whose groups are generators; a group left
    behind yields nothing once the next one starts. Keys are compared `target == current` (an
    identical key is equal without ==), as PyObject_RichCompareBool does."""
    it = iter(iterable)
    s = [_NOTHING, _NOTHING, _NOTHING, 0]  # target key, current key, current value, current group

    def step():
        v = next(it)
        s[2] = v
        s[1] = v if key is None else key(v)

    def grouper(n, target):
        while s[3] == n:
            if s[2] is _NOTHING:
                try:
                    step()
                except StopIteration:
                    return
            if not (target is s[1] or target == s[1]):
                return
            r = s[2]
            s[2] = s[1] = _NOTHING
            yield r

    n = 0
    while True:
        s[3] = 0
        while not (s[1] is not _NOTHING and (s[0] is _NOTHING or not (s[0] is s[1] or s[0] == s[1]))):
            try:
                step()
            except StopIteration:
                return
        s[0] = s[1]
        n += 1
        s[3] = n
        yield s[1], grouper(n, s[0])


class _Tee:
    """One iterator of itertools.tee made in the trace: a shared linked list of the values taken
    ([value, next link]); tee() of such an iterator shares its list, as CPython's copies do."""

    def __init__(self, iterable):
        if isinstance(iterable, _Tee):  # iter() of one is itself
            self.iterator = iterable.iterator
            self.link = iterable.link
        else:
            self.iterator = iter(iterable)
            self.link = [None, None]

    def __iter__(self):
        return self

    def __next__(self):
        link = self.link
        if link[1] is None:
            link[0] = next(self.iterator)
            link[1] = [None, None]
        value, self.link = link
        return value


def _shim_tee(iterable, n=2):
    """itertools.tee made in the trace: n _Tee iterators over one list of values (of a _Tee: it
    and n - 1 copies of it, as CPython's tee of a tee object)."""
    if not isinstance(n, int):
        raise TypeError(f"'{type(n).__name__}' object cannot be interpreted as an integer")
    if n < 0:
        raise ValueError("n must be >= 0")
    if n == 0:
        return ()
    first = iterable if isinstance(iterable, _Tee) else _Tee(iterable)  # a tee's own iterator is the first
    result = [first]
    for _ in range(n - 1):
        result.append(_Tee(first))
    return tuple(result)


def _repr_guard_codes():
    import dataclasses
    import reprlib
    codes = [reprlib.recursive_repr()(lambda self: "").__code__]
    if hasattr(dataclasses, "_recursive_repr"):
        codes.append(dataclasses._recursive_repr(lambda self: "").__code__)
    return tuple(codes)


# the code of reprlib.recursive_repr's (and dataclasses') wrapper: a call of one is a call of the
# repr it wraps (its free variable user_function), its guard against recursive reprs (keyed by
# id() and thread) left out (csrc/trace/em_inline.c)
REPR_GUARD_CODES = _repr_guard_codes()


def container_repr(c):
    """repr() of a list, tuple, dict, set or frozenset the trace holds whose items are not all
    constants: CPython's text, each item's repr() traced (csrc/trace/em_call.c known_str)."""
    if isinstance(c, dict):
        return "{" + ", ".join([repr(k) + ": " + repr(v) for k, v in c.items()]) + "}"
    inner = ", ".join([repr(v) for v in c])
    if isinstance(c, tuple):
        return "(" + inner + ("," if len(c) == 1 else "") + ")"
    if isinstance(c, list):
        return "[" + inner + "]"
    if not c:
        return type(c).__name__ + "()"
    return "{" + inner + "}" if isinstance(c, set) else "frozenset({" + inner + "})"


def _shim_count_elements(mapping, iterable):
    """collections' C helper _count_elements (Counter.update of an iterable), as its pure-Python
    fallback in collections does it."""
    mapping_get = mapping.get
    for elem in iterable:
        mapping[elem] = mapping_get(elem, 0) + 1


# heapq's C functions made in the trace: heapq's own Python sift functions (the reference
# implementation the C module mirrors, comparison for comparison)
import heapq as _heapq  # noqa: E402


def _shim_heapify(x):
    for i in reversed(range(len(x) // 2)):
        _heapq._siftup(x, i)


def _shim_heappush(heap, item):
    heap.append(item)
    _heapq._siftdown(heap, 0, len(heap) - 1)


def _heap_pop(heap, siftup):
    last = heap.pop()
    if heap:
        first = heap[0]
        heap[0] = last
        siftup(heap, 0)
        return first
    return last


def _shim_heappop(heap):
    return _heap_pop(heap, _heapq._siftup)


def _shim_heapreplace(heap, item):
    first = heap[0]
    heap[0] = item
    _heapq._siftup(heap, 0)
    return first


def _shim_heappushpop(heap, item):
    if heap and heap[0] < item:
        item, heap[0] = heap[0], item
        _heapq._siftup(heap, 0)
    return item


def _shim_heapify_max(x):
    for i in reversed(range(len(x) // 2)):
        _heapq._siftup_max(x, i)


def _shim_heapreplace_max(heap, item):
    first = heap[0]
    heap[0] = item
    _heapq._siftup_max(heap, 0)
    return first


def _shim_heappop_max(heap):
    return _heap_pop(heap, _heapq._siftup_max)


def keyed_sort(items, keys, reverse):
    """sorted()'s result for items by keys that are not constants (csrc/trace/em_call.c
    known_keyed), traced: keys compared with `<` only, stably, reverse as CPython's list.sort
    does it (the run reversed, sorted, reversed back); a binary insertion sort, CPython's own for
    lists shorter than 64."""
    order = list(range(len(keys)))
    if reverse:
        order.reverse()
    for i in range(1, len(order)):
        pivot = order[i]
        lo, hi = 0, i
        while lo < hi:
            mid = (lo + hi) >> 1
            if keys[pivot] < keys[order[mid]]:
                hi = mid
            else:
                lo = mid + 1
        del order[i]
        order.insert(lo, pivot)
    if reverse:
        order.reverse()
    return [items[i] for i in order]


def keyed_best(items, keys, is_max):
    """max()/min()'s result for items by keys that are not constants, traced: each key compared
    with the best so far (`key > best` for max, `key < best` for min), as CPython does."""
    best = 0
    for i in range(1, len(keys)):
        if (keys[i] > keys[best]) if is_max else (keys[i] < keys[best]):
            best = i
    return items[best]


def leaf_op(real_impl, fake_impl, names, *values):
    """A leaf_function call as a graph op: the real function through torch's own entry (at run
    time; under AOTAutograd's tracing its HOP runs the fake one). values: the positional
    arguments, then those of the keywords names."""
    k = len(values) - len(names)
    return _LEAF_CALL(real_impl, fake_impl, values[:k], dict(zip(names, values[k:])))


def _leaf_meta(real_impl, fake_impl, names, *values):
    """leaf_op's meta result: the fake implementation on the meta arguments."""
    k = len(values) - len(names)
    return fake_impl(*values[:k], **dict(zip(names, values[k:])))


def _shim_leaf_call(real_impl, fake_impl, args, kwargs, mutates_args=None, hook_fn=None, hook_fake_fn=None):
    """torch._dynamo.decorators._invoke_leaf_function_python as traced: a graph op (leaf_op);
    one that mutates its arguments or has a backward hook runs at a graph break."""
    if mutates_args or hook_fn is not None or hook_fake_fn is not None:
        return _leaf_call_at_break(real_impl, fake_impl, args, kwargs, mutates_args=mutates_args, hook_fn=hook_fn,
                                   hook_fake_fn=hook_fake_fn)
    return leaf_op(real_impl, fake_impl, tuple(kwargs), *args, *kwargs.values())


def nonstrict_op(fn, *args, **kwargs):
    """A call of a function torch._dynamo.nonstrict_trace wraps while tracing: a graph op that
    calls it (its meta run runs its Python on meta values, as TorchDynamo's non-strict tracing)."""
    return fn(*args, **kwargs)


def _shim_nonstrict_trace(fn):
    """torch._dynamo.nonstrict_trace(fn) applied while tracing."""
    return _functools.partial(nonstrict_op, fn)


def _leaf_call_at_break(*args, **kwargs):
    """_invoke_leaf_function_python itself (ABORT: it runs at a graph break)."""
    return _LEAF_CALL(*args, **kwargs)


_set(GRAPH, [leaf_op, nonstrict_op])
_set(ABORT, [_leaf_call_at_break])

TRACE_AS = {torch.autograd.profiler.record_function: _record_function, operator.itemgetter: _shim_itemgetter,
            torch.sym_max: _sym_max, torch.sym_min: _sym_min,
            re.sub: _re_sub, re.subn: _re_subn,
            operator.attrgetter: _shim_attrgetter, operator.methodcaller: _shim_methodcaller,
            torch._C._log_api_usage_once: _log_api_usage_once, _functools.cmp_to_key: _shim_cmp_to_key,
            itertools.groupby: _shim_groupby, itertools.tee: _shim_tee}
if _LEAF_CALL is not None:
    TRACE_AS[_LEAF_CALL] = _shim_leaf_call
for _nst in {getattr(sys.modules.get("torch._dynamo.decorators"), "nonstrict_trace", None),
             getattr(torch.compiler, "nonstrict_trace", None)} - {None}:
    TRACE_AS[_nst] = _shim_nonstrict_trace
try:
    import _heapq as _c_heapq
    for _name, _shim in (("heapify", _shim_heapify), ("heappush", _shim_heappush), ("heappop", _shim_heappop),
                         ("heapreplace", _shim_heapreplace), ("heappushpop", _shim_heappushpop),
                         ("_heapify_max", _shim_heapify_max), ("_heapreplace_max", _shim_heapreplace_max),
                         ("_heappop_max", _shim_heappop_max)):
        if hasattr(_c_heapq, _name) and hasattr(_heapq, "_siftup") and hasattr(_heapq, "_siftup_max"):
            TRACE_AS[getattr(_c_heapq, _name)] = _shim
except ImportError:  # heapq's own Python functions run (traced as they are)
    pass
try:
    from _collections import _count_elements as _c_count_elements
    TRACE_AS[_c_count_elements] = _shim_count_elements
except ImportError:  # collections' own Python version runs (traced as it is)
    pass
for _name in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
              "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"):
    if hasattr(torch, _name):
        TRACE_AS[getattr(torch, _name)] = _legacy_tensor_shim(getattr(torch, _name))
_mutation_guard = sys.modules.get("torch._dynamo.mutation_guard")
if _mutation_guard is not None and hasattr(_mutation_guard, "GenerationTracker"):
    for _tag in (_mutation_guard.GenerationTracker.tag, _mutation_guard.GenerationTracker.tag.__func__):
        TRACE_AS[_tag] = _generation_tag  # the bound classmethod (equal per access) and its function


# ---- classes made in the trace (csrc/trace/em_obj.c known_namedtuple) ----

def namedtuple_again(spec):
    """A namedtuple class made by the call the trace saw (spec: its arguments), made per call as
    eager makes one."""
    args, kwargs = spec
    return collections.namedtuple(*args, **kwargs)


def namedtuple_make(cls, items):
    return cls._make(items)


def class_dict(cls):
    """cls.__dict__ where the trace's read of it (csrc/trace/em_sym.c class_dict) leaves it."""
    return cls.__dict__


def call_kw(fn, args, kwargs):
    """fn(*args, **kwargs): a generator not started where it leaves the trace, made again by
    the call that made it (csrc/trace/em_trace.c out_iter)."""
    return fn(*args, **kwargs)


def _ended():
    return
    yield


def ended_generator():
    """A generator at its end: one made in the trace that ran to its end (or was closed) where
    it leaves the trace (csrc/trace/em_trace.c out_iter)."""
    g = _ended()
    for _ in g:
        pass
    return g


# ---- torch.cond with a tensor predicate (csrc/trace/em_hop.c) ----

def cond_same_meta(a, b):
    """True when two branch results (a meta tensor, or a tuple or list of them) agree in
    structure, shape, strides, dtype, device and requires_grad."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(cond_same_meta(x, y) for x, y in zip(a, b))
    return (a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
            and a.requires_grad == b.requires_grad)


def cond_meta(result):
    """The meta function of a cond op: the traced branch's result."""
    return lambda *args: result


def _storages(v):
    if isinstance(v, torch.Tensor):
        return [v.untyped_storage().data_ptr()] if v.untyped_storage().nbytes() else []
    return [p for x in v for p in _storages(x)] if isinstance(v, (tuple, list)) else []


def with_cells(fn, cells):
    """fn (a function made while tracing) made again around fresh cells holding `cells`: the
    closure of this call's branch."""
    if not cells:
        return fn
    f = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                           tuple(types.CellType(c) for c in cells))
    f.__kwdefaults__ = fn.__kwdefaults__
    return f


class _Aliased(Exception):
    pass


class _CondGrads(torch.autograd.Function):
    """The selected branch of a cond op with eager torch.cond's autograd: every input tensor
    that needs a gradient (an operand, or a tensor either branch's cells hold) gets one, zeros
    where the branch does not use it, and the floating outputs need gradients."""

    @staticmethod
    def forward(ctx, run, spec_box, *inputs):
        import torch.utils._pytree as pytree
        with torch.enable_grad():
            inner = [t.detach().requires_grad_(t.requires_grad) for t in inputs]
            out = run(inner)
        if set(_storages(out)) & set(_storages(inner)):
            raise _Aliased()
        flat, spec = pytree.tree_flatten(out)
        spec_box.append(spec)
        ctx.inner, ctx.flat = inner, flat
        for o in flat:
            if not o.is_floating_point() and not o.is_complex():
                ctx.mark_non_differentiable(o)
        return tuple(o.detach() for o in flat)

    @staticmethod
    def backward(ctx, *grads):
        want = [t for t in ctx.inner if t.requires_grad]
        outs = [(o, g) for o, g in zip(ctx.flat, grads) if o.requires_grad and g is not None]
        got = torch.autograd.grad([o for o, _ in outs], want, [g for _, g in outs], allow_unused=True,
                                  retain_graph=True) if outs and want else [None] * len(want)
        by_input = dict(zip(map(id, want), got))
        res = [by_input.get(id(t)) if t.requires_grad else None for t in ctx.inner]
        return (None, None) + tuple(torch.zeros_like(t) if t.requires_grad and r is None else r
                                    for t, r in zip(ctx.inner, res))


def cond_call(pred, true_fn, false_fn, operands, true_cells=(), false_cells=()):
    """torch.cond in a graph: the branch pred selects, called on the operands (a branch with a
    closure made again around its cells' values); with an input that needs a gradient, through
    _CondGrads (eager's cond gives every input a gradient). A result that shares memory with an
    operand is refused by eager's torch.cond: it then runs, and raises."""
    import torch.utils._pytree as pytree
    tf, ff = with_cells(true_fn, true_cells), with_cells(false_fn, false_cells)
    cells = tuple(true_cells) + tuple(false_cells)
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in tuple(operands) + cells):
        slots = [i for i, c in enumerate(cells) if isinstance(c, torch.Tensor)]
        n, mine = len(operands), range(len(true_cells)) if pred else range(len(true_cells), len(cells))

        def run(inner):
            vals = list(cells)
            for k, i in enumerate(slots):
                vals[i] = inner[n + k]
            fn = with_cells(true_fn if pred else false_fn, [vals[i] for i in mine])
            return fn(*inner[:n])

        box = []
        try:
            flat = _CondGrads.apply(run, box, *operands, *(cells[i] for i in slots))
        except _Aliased:
            return torch.cond(pred, tf, ff, operands)
        return pytree.tree_unflatten(list(flat), box[0])
    out = (tf if pred else ff)(*operands)
    if set(_storages(out)) & set(_storages(operands)):
        return torch.cond(pred, tf, ff, operands)
    return out


# ---- context managers of global state (csrc/trace/em_ctx.c) ----

GRAD_CTX = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)
# autocast: its twin is entered while tracing the block, and ops inside it run on fake tensors
# of their real device (meta tensors do not apply autocast's dtype rules), see run()
# warnings.catch_warnings: entered and left by the graph (the filters its block sets apply to
# the graph's ops); with record=True its `as w` list is not modelled (a use of it aborts), nor
# is module= (a filter set in its block would change the warnings module's filters)
_set(CTX, GRAD_CTX + (torch.inference_mode, torch.autocast, warnings.catch_warnings))
# torch.nn.attention.sdpa_kernel: the SDPA backends allowed in its block, set and restored by
# the graph around the block's ops on ember's executor (Python backends leave it out, as
# catch_warnings: their own attention kernels run)
_set(CTX, [getattr(getattr(torch.nn, "attention", None), "sdpa_kernel", None)])
# torch.vmap: its implementation is traced; the level it enters (vmap_increment_nesting) is a
# context of the graph, the batch dimension added to and removed from tensors graph calls, on
# batched meta tensors while tracing (as TorchDynamo puts them in its graphs); the vmap
# decompositions are loaded once, at trace time
try:
    from torch._functorch import predispatch as _predispatch, vmap as _vmap_mod
    _set(CTX, [_vmap_mod.vmap_increment_nesting])
    _set(GRAPH, [_predispatch._add_batch_dim, _predispatch._remove_batch_dim])
    _set(CONST, [_predispatch.lazy_load_decompositions])
    _FUNCTORCH_CTX = (_vmap_mod.vmap_increment_nesting,)
except (ImportError, AttributeError):  # another torch's layout: vmap breaks
    _FUNCTORCH_CTX = ()
set_grad_enabled = torch._C._set_grad_enabled
# `t.data = v` in the graph (em_obj.c store_data); older torch lacks the op: such stores break
set_data = getattr(getattr(torch.ops.aten, "shallow_copy_data_", None), "default", None)


def grad_mode(_=None):
    return torch.is_grad_enabled()


_ENTERED = {}  # id(twin) -> (twin, what its __enter__ returned)


def ctx_entered(obj):
    """What the twin obj's __enter__ returned, the value `as x` binds where it is a constant
    (None for grad-mode contexts and catch_warnings without record=True; the vmap level);
    NotImplemented where the trace does not model it (autocast's self, record=True's list)."""
    v = _ENTERED.pop(id(obj), (None, NotImplemented))[1]
    return v if v is None or type(v) is int else NotImplemented


def call_query(fn):
    """Guard load: fn(), a state query the entry depends on (csrc/trace/em_call.c em_guard_query)."""
    return fn()


def functorch_idle(_=None):
    """Whether no functorch transform is active (a graph with a vmap level holds its number)."""
    return torch._C._functorch.peek_interpreter_stack() is None


# twin -> entered: the vmap levels the trace's twins hold (an entry goes with its twin's sym)
_FUNCTORCH_TWINS = __import__("weakref").WeakKeyDictionary()


def _functorch_levels_are_the_traces():
    """Whether every active functorch level is one a twin of the trace entered (a vmap inside a
    traced vmap): the graph then makes them all, from a start it guards idle."""
    level = torch._C._functorch.maybe_current_level()
    return (level or 0) == sum(1 for entered in _FUNCTORCH_TWINS.values() if entered)


def ctx_new(cls, args, kwargs):
    """The tracer's twin of a context the traced code makes: (object, changes only grad mode,
    holds a functorch level: the entry is guarded on no transform being active)."""
    if cls is warnings.catch_warnings and dict(kwargs).get("module") is not None:
        raise TypeError("warnings.catch_warnings(module=) is not modelled")
    functorch = cls in _FUNCTORCH_CTX
    if functorch and not _functorch_levels_are_the_traces():
        raise TypeError("vmap inside a functorch transform the trace did not enter is not modelled")
    twin = cls(*args, **dict(kwargs))
    if functorch:
        _FUNCTORCH_TWINS[twin] = False
    return twin, cls in GRAD_CTX, functorch


def make_torch_module(spec):
    """A torch.nn module class called while tracing (spec = (cls, args, kwargs pairs)): the
    module, made on the meta device with the random state kept, when it holds no tensors (its
    parameters, buffers and plain attributes, its children's too): each call's own module would
    compute the same. Else None.
    An exception it raises is cleared (the call runs as Python and raises it)."""
    cls, args, kwargs = spec
    cpu_state = torch.random.get_rng_state()
    try:
        with torch.device("meta"):
            m = cls(*args, **dict(kwargs))
    except Exception:
        return None
    finally:
        torch.random.set_rng_state(cpu_state)
    for sub in m.modules():
        if any(isinstance(v, torch.Tensor) for v in vars(sub).values()):
            return None
        if sub._parameters or sub._buffers:
            return None
    return m


def call_spec(spec):
    """Graph call: fn(*args, **kwargs) of spec = (fn, args, kwargs pairs), a change of global
    state the graph makes in its place (a warnings filter inside a catch_warnings block)."""
    fn, pos, kw = spec
    fn(*pos, **dict(kw))


def ctx_new_decorates(cls):
    """cls(f) of a callable f is cls()(f), the decorated function (torch's grad-mode classes
    without a mode argument, and inference_mode, whose __new__ does so)."""
    return issubclass(cls, torch.autograd.grad_mode._NoParamDecoratorContextManager) or cls is torch.inference_mode


def ctx_decorated(spec, fn, *args, **kwargs):
    """A function decorated, while tracing, with a context object of torch's (@torch.no_grad()):
    traced in place of the wrapper torch's decorator returns, which calls fn inside a fresh
    context made like the decorating one (spec = (cls, args, kwargs pairs))."""
    cls, pos, kw = spec
    with cls(*pos, **dict(kw)):
        return fn(*args, **kwargs)


def ctx_enter(obj):
    _ENTERED[id(obj)] = (obj, obj.__enter__())
    if type(obj).__hash__ is object.__hash__ and obj in _FUNCTORCH_TWINS:
        _FUNCTORCH_TWINS[obj] = True
    return torch.is_grad_enabled()


def ctx_exit(obj):
    _ENTERED.pop(id(obj), None)
    if type(obj).__hash__ is object.__hash__:
        _FUNCTORCH_TWINS.pop(obj, None)
    obj.__exit__(None, None, None)
    return torch.is_grad_enabled()


# Graph call: makes and enters the context of spec = (cls, args, kwargs pairs). In C, so that a
# warning given while the context is made names the user's code, not this file.
enter_ctx = _C.enter_ctx


def exit_ctx(obj):
    """Graph call: leaves a context enter_ctx entered."""
    obj.__exit__(None, None, None)


# At a graph break inside a `with` block: the block's context made and entered again (the graph
# left it), as the value of the block's __exit__ on the stack.
reenter = _C.reenter_ctx


def remake_ctx(spec, prev):
    """A torch context made in the trace and not inside its block at a break (made, or exited),
    made again for the code after it (csrc/trace/em_trace.c build_out). Making set_grad_enabled
    sets grad mode, which the graph already did: the mode stays as the graph left it, and the
    object restores `prev`, the mode before the program made it, on exit."""
    cls, args, kwargs = spec
    mode = torch.is_grad_enabled()
    obj = cls(*args, **dict(kwargs))
    torch._C._set_grad_enabled(mode)
    if prev is not None and hasattr(obj, "prev"):
        obj.prev = prev
    return obj


def grad_restorer(mode):
    """What a graph that changes grad mode runs when it fails: grad mode as it found it."""
    return lambda: torch._C._set_grad_enabled(mode)


# names of torch callables that draw from a random generator or change state beyond their
# result (a `_`-suffixed or out= call is a mutation: em_graph_mutated)
_RERUN_UNSAFE = re.compile(r"rand|dropout|bernoulli|multinomial|^normal|log_normal|poisson|uniform|"
                           r"exponential|cauchy|geometric|gumbel|rrelu|shuffle|seed|backward|"
                           r"scaled_dot_product|attention|hook|^grad|grad$|cuda|stream|event|synchronize")
_RERUN_SAFE_NUMBERS = frozenset((int, float, abs, round, math.floor, math.ceil, math.trunc))  # graph numbers' calls


def rerun_safe(fn):
    """Whether a graph call of fn changes nothing outside its result (no random stream drawn,
    no state changed), so that a graph made of such calls that raised may run its frame again
    as plain Python. Unknown callables (not torch's) are not."""
    if any(fn is f for f in _RERUN_SAFE_NUMBERS):
        return True
    name = getattr(fn, "__name__", None)
    from ._np import NpCall
    if type(fn) is NpCall:  # torch._numpy's function of tensors; a name ending in "_" writes an argument
        return not name.endswith("_") and not _RERUN_UNSAFE.search(name.lower())
    owner = getattr(fn, "__objclass__", None)
    mod = getattr(owner if owner is not None else fn, "__module__", None)
    ok = (isinstance(name, str) and isinstance(mod, str) and mod.split(".")[0] == "torch"
          and not isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                                  torch._ops.HigherOrderOperator))
          and not _RERUN_UNSAFE.search(name.lower()))
    return ok  # memoized in C for torch's callables (a user's may die: not held here)


def imported(name, globals_, fromlist, level):
    """The module `import` gives without running import code now, or None: the module (and
    every name of fromlist) must already be loaded."""
    import sys
    if level:
        package = globals_.get("__package__") or (globals_.get("__spec__") and globals_["__spec__"].parent)
        if not package:
            return None
        try:
            import importlib.util
            name = importlib.util.resolve_name("." * level + name, package)
        except (ImportError, ValueError):
            return None
    mod = sys.modules.get(name)
    if mod is None:
        return None
    if not fromlist:
        return sys.modules.get(name.partition(".")[0])
    for f in fromlist:
        if f == "*" or not hasattr(mod, f):
            return None
    return mod


def import_missing(name, globals_, fromlist, level):
    """What an import that imported() refused lacks: (container, key, in_a_dict) triples, a
    module name absent from sys.modules or a submodule absent from its package's attributes. A
    frame that breaks there keeps those absences guarded, so that it is traced again (and the
    import captured) once the import ran (csrc/driver/em_driver.c)."""
    import sys
    if level:
        package = globals_.get("__package__") or (globals_.get("__spec__") and globals_["__spec__"].parent)
        if not package:
            return []
        try:
            import importlib.util
            name = importlib.util.resolve_name("." * level + name, package)
        except (ImportError, ValueError):
            return []
    mod = sys.modules.get(name)
    if mod is None:
        return [(sys.modules, name, True)]
    return [(mod, f, False) for f in fromlist or () if f != "*" and not hasattr(mod, f)]


environ = os.environ  # reads of it are answered at trace time, guarded per key (em_call.c)


def classify(fn):
    """Rule for a callable not yet in RULES, memoized only for callables that live as long as
    their module or class (see _lasting): RULES is never a reason a user object (a module, a
    callable instance, a function or class made at run time) stays alive."""
    rule = _classify(fn)
    if _lasting(fn, rule):
        try:
            RULES[fn] = rule
        except TypeError:
            pass
    return rule


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE
_C_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.ClassMethodDescriptorType)


def _self_inplace(schema):
    """An operator schema that writes its first argument only, and returns it (Tensor(a!))."""
    writes = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    rets = schema.returns
    return (writes == [0] and len(rets) == 1 and rets[0].alias_info is not None and rets[0].alias_info.is_write
            and rets[0].alias_info.before_set == schema.arguments[0].alias_info.before_set)


def _lasting(fn, rule):
    """True for callables that may be kept in a process-wide table: C functions of modules and
    of built-in types, descriptors of C types, torch's Python operators (rule GRAPH) and
    static types. Bound methods, instances, user functions and classes are not kept."""
    if isinstance(fn, types.BuiltinFunctionType):
        self_obj = getattr(fn, "__self__", None)
        return isinstance(self_obj, (types.ModuleType, type(None))) or (
            isinstance(self_obj, type) and not self_obj.__flags__ & _HEAPTYPE)
    if isinstance(fn, _C_DESCRIPTORS):
        return True
    if isinstance(fn, types.FunctionType):
        return rule != UNKNOWN and fn.__code__ is not _NONSTRICT_CODE  # a wrapper made per decorated function
    if isinstance(fn, type):
        return not fn.__flags__ & _HEAPTYPE
    return False


try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy ships with torch's test dependencies
    _np = None

# numpy callables that are not functions of their arguments alone (state, files, writes into
# an argument); numpy.random and the file and test helpers are excluded by module
_NUMPY_EFFECTS = frozenset({
    "seterr", "seterrcall", "geterr", "geterrcall", "set_printoptions", "get_printoptions", "printoptions",
    "setbufsize", "getbufsize", "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
    "fromfile", "tofile", "copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "nditer",
    "memmap", "errstate", "frombuffer", "from_dlpack", "show_config", "info", "source", "lookfor"})


def _numpy_pure(fn):
    """A numpy function, ufunc or value type whose result depends only on its arguments: called
    with constants while tracing (CONST), its result is a constant when immutable (a numpy scalar,
    a dtype, finfo); an array is not (the call breaks the graph)."""
    if _np is None:
        return False
    if isinstance(fn, type):
        return fn in (_np.iinfo, _np.finfo, _np.dtype) or issubclass(fn, _np.generic)
    if isinstance(fn, types.BuiltinMethodType) and isinstance(getattr(fn, "__self__", None), _np.generic):
        return fn.__name__ not in ("tofile", "dump", "dumps", "setflags", "fill", "itemset", "put", "resize")
    mod = getattr(fn, "__module__", None) or ""
    if not isinstance(mod, str) or not (mod == "numpy" or mod.startswith("numpy.")):
        return False
    if mod.startswith(("numpy.random", "numpy.testing", "numpy.ctypeslib", "numpy.f2py", "numpy.distutils")):
        return False
    return getattr(fn, "__name__", None) not in _NUMPY_EFFECTS


# torch's setters of global or thread state (torch.set_num_threads, torch._C._set_default_dtype,
# autocast and sdp flags, the dispatch and torch-function stacks...): they run at a graph break.
# The trace models the state it reads (grad mode, autocast, default dtype) only through the
# calls it knows (set_grad_enabled, autocast contexts: em_ctx.c); as a graph op such a setter
# would also run while tracing and leave later ops inferred for the state before it.
_STATE_SETTER = re.compile(r"^_?(set|push|pop|enter|exit)_|(^|_)(increment|decrement)_")  # _vmap_increment_nesting


def _state_setter(fn):
    if not isinstance(fn, (types.BuiltinFunctionType, types.FunctionType)):
        return False
    mod = getattr(fn, "__module__", None) or ""  # a method bound to a tensor has none
    name = getattr(fn, "__name__", "")
    return isinstance(mod, str) and (mod == "torch" or mod.startswith("torch.")) and isinstance(name, str) and \
        bool(_STATE_SETTER.search(name))


def _inner_code(fn, name):
    """The code of the function named name that fn defines (its closure's), or None."""
    codes = [c for c in getattr(getattr(fn, "__code__", None), "co_consts", ()) if isinstance(c, types.CodeType)
             and c.co_name == name]
    return codes[0] if len(codes) == 1 else None


# the wrapper torch._dynamo.nonstrict_trace makes (functools.wraps gives it the function's names)
_NONSTRICT_CODE = _inner_code(getattr(sys.modules.get("torch._dynamo.decorators"), "nonstrict_trace", None), "wrapped")


def _classify(fn):
    if _NONSTRICT_CODE is not None and getattr(fn, "__code__", None) is _NONSTRICT_CODE:
        return GRAPH  # an op: the function called at run time, run on meta values to trace
    if isinstance(fn, types.FunctionType) and fn.__dict__.get("_torchdynamo_disable") is True:
        return ABORT  # a torch.compiler.disable wrapper: runs at a break (the hook does not compile what it calls)
    if isinstance(fn, enum.EnumMeta) and type(fn).__call__ is enum.EnumMeta.__call__:
        return CONST  # E(1): the member of that value (looked up, nothing made)
    if _state_setter(fn):
        return ABORT
    if _numpy_pure(fn):
        return CONST
    if isinstance(fn, type):
        return UNKNOWN
    self_obj = getattr(fn, "__self__", None)
    if isinstance(fn, types.BuiltinMethodType) and isinstance(self_obj, PURE_TYPES):
        # a method of an immutable value (torch.Size(...).numel): its descriptor's rule
        desc = getattr(type(self_obj), getattr(fn, "__name__", ""), None)
        try:
            if RULES.get(desc) == CONST:
                return CONST
        except TypeError:
            pass
    if isinstance(fn, torch._ops.HigherOrderOperator):
        return ABORT  # torch.ops.higher_order.*: they run at a graph break
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        # torch.ops.<ns>.<op>[.<overload>] (aten's, or registered with torch.library): a graph op
        # when the overloads a call may reach are functional, or change only their first
        # argument and return it (aten.add_: the trace sees the result is that argument, as for
        # x.add_()); a packet's out= overloads are reached only through out=, which ember treats
        # as a mutation of its own
        overloads = [fn] if isinstance(fn, torch._ops.OpOverload) else [
            getattr(fn, o, None) for o in fn.overloads() if not o.startswith("out") and not o.endswith("_out")]
        if overloads and all(o is not None and (not o._schema.is_mutable or _self_inplace(o._schema))
                             for o in overloads):
            return GRAPH
        return ABORT
    objclass = getattr(fn, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(objclass, _TensorBase):
        return GRAPH
    mod = getattr(fn, "__module__", None) or ""
    if isinstance(fn, types.BuiltinFunctionType):
        self_obj = getattr(fn, "__self__", None)
        if isinstance(self_obj, type) and self_obj.__module__.startswith("torch"):
            mod = mod or "torch"  # torch._C._VariableFunctions methods
        if mod == "torch" or mod.startswith("torch.") and not mod.startswith(("torch._dynamo", "torch.compiler")):
            return GRAPH
    if mod.startswith("torch._dynamo") and callable(fn):
        if isinstance(fn, types.FunctionType) and fn.__qualname__ == "leaf_function.<locals>.inner":
            return UNKNOWN  # inlined: it calls _invoke_leaf_function_python (TRACE_AS: leaf_op)
        if mod == "torch._dynamo.test_case" and isinstance(fn, types.FunctionType):
            return UNKNOWN  # its TestCase's assertEqual, Python code TorchDynamo traces too
        if getattr(fn, "__qualname__", None) == "install_generation_tagging_init.<locals>.patched_init":
            return UNKNOWN  # nn.Module.__init__ once TorchDynamo ran: the original, then a tag (_generation_tag)
        return ABORT  # TorchDynamo's machinery (disable wrappers, set_eval_frame): runs at a break
    elif isinstance(fn, types.FunctionType) and mod in _GRAPH_PY_MODULES and not (
            mod == "torch.nn.init" and fn.__name__.startswith("_")) and not (
            mod == "torch.overrides" and "." in getattr(fn, "__qualname__", "")) and \
            fn.__name__ not in ("__enter__", "__exit__"):
        # torch's Python-level operators; any other Python function (nn.Module methods, user
        # code, nn.init's private helpers such as _calculate_correct_fan, which compute Python
        # values from sizes, the methods of torch.overrides' mode classes and any class's
        # __enter__/__exit__, which push modes or set state: as GRAPH calls they would run
        # while tracing) is inlined
        return GRAPH
    return UNKNOWN


# the codes of the functions torch.compiler.disable wraps a callable in (each calls it directly;
# None where this torch has none): the hook (csrc/hook) does not compile a frame the first calls
# nor anything that frame calls, and does not compile a frame the second (recursive=False) calls
DISABLE_WRAPPER_CODE = _inner_code(
    getattr(getattr(sys.modules.get("torch._dynamo.eval_frame"), "DisableContext", None), "__call__", None), "_fn")
DISABLE_ONCE_CODE = _inner_code(
    getattr(sys.modules.get("torch._dynamo.external_utils"), "get_nonrecursive_disable_wrapper", None),
    "nonrecursive_disable_wrapper")

_GRAPH_PY_MODULES = {"torch", "torch.functional", "torch.nn.functional", "torch._tensor", "torch.random",
                     "torch.nn.init", "torch.utils.checkpoint", "torch.autograd.function", "torch._jit_internal",
                     "torch.overrides", "torch.fft", "torch.linalg", "torch.special"}


# ---- iterators and type questions ----

# builtins that take an iterable and consume it: an iterator argument is evaluated on its
# remaining items, and is used up (whole, or for any/all up to the item that decides); any
# other builtin given an iterator only asks type questions of it or aborts
ITER_CONSUMERS = {f: None for f in (sum, max, min, sorted, tuple, list, set, frozenset, dict, math.prod,
                                    math.fsum, str.join, bytes.join)}
ITER_CONSUMERS[any] = True  # stops after the first true item
ITER_CONSUMERS[all] = False  # stops after the first false item


def iter_consumer(fn):
    """For a builtin (or a bound builtin method such as "-".join): 0 when it does not consume an
    iterable argument, 1 when it consumes it whole, 2 for any, 3 for all."""
    self = getattr(fn, "__self__", None)
    if self is not None and not isinstance(self, (types.ModuleType, type)):
        fn = getattr(type(self), getattr(fn, "__name__", ""), None)
    try:
        if fn not in ITER_CONSUMERS:
            return 0
    except TypeError:
        return 0
    stop = ITER_CONSUMERS[fn]
    return 1 if stop is None else 2 if stop else 3


def _enumerate(items):
    return enumerate((v for _, v in items), items[0][0] if items else 0)


def _range_iter(items):
    step = items[1] - items[0] if len(items) > 1 else 1
    return iter(range(items[0], items[0] + step * len(items), step) if items else range(0))


# iterator type -> a function making one of that type over the items it has left (a tuple),
# for an iterator made while tracing that outlives the trace (returned, or live at a graph break)
def iter_at(c, pos, what):
    """An iterator over list or dict c that leaves a trace at a graph break: Python's own, which
    reads c as it goes (the code after the break may change c), past the pos items the graph
    took. what: 'l' iter(list), 'r' reversed(list) (pos: the index of its next item, -1 when
    it is done), 'k'/'v'/'i' a dict's keys/values/items."""
    if what == "l":
        it = iter(c)
        it.__setstate__(pos)
        return it
    if what == "r":
        it = reversed(c)
        it.__setstate__(pos)
        return it
    it = iter(c) if what == "k" else iter(c.values()) if what == "v" else iter(c.items())
    for _ in range(pos):
        next(it)
    return it


def enumerate_at(c, pos, count):
    """enumerate(list c) that leaves a trace at a graph break: Python's over c itself (see
    iter_at), past the pos items the graph took, the next one numbered count."""
    return enumerate(iter_at(c, pos, "l"), count)


def _iter_state(it):
    """(seq, index) of a list, tuple or range iterator, read without advancing it: its next item
    is seq[index]; seq is empty once it is exhausted (a range: the values left, index 0)."""
    r = it.__reduce__()
    seq = r[1][0]
    if len(r) < 3 or r[2] is None:  # exhausted, or a 3.12 range iterator: seq is what is left
        return seq, 0
    return seq, max(r[2], 0)


def iter_peek(j, it):
    """The item next(it) gives after j more calls, it left as it is (a frame's list, tuple or
    range iterator the trace takes items from: csrc/trace/em_lazy.c). IndexError (the guard
    fails) when it has fewer items left."""
    seq, i = _iter_state(it)
    if i + j >= len(seq):
        raise IndexError(j)
    return seq[i + j]


def iter_peeker(j):
    """iter_peek(j, it) as a function of it (a guard's load)."""
    return _functools.partial(iter_peek, j)


def iter_left(it):
    """How many items next(it) still gives (a frame's list, tuple or range iterator)."""
    seq, i = _iter_state(it)
    return max(len(seq) - i, 0)


def iter_advance(it, taken, ended):
    """The changes a trace made to a frame's list, tuple or range iterator, made on it after the
    graph: `taken` items taken, then (ended) taken to its end as the trace found it."""
    for _ in range(taken):
        next(it)
    if ended:
        for _ in it:
            pass


def zip_at(pos, whats, *args):
    """zip(...) that leaves a trace at a graph break: over each list or dict argument itself
    (iter_at with its kind in whats), over the remaining items of each other one (whats None)."""
    return zip(*[iter(a) if w is None else iter_at(a, pos, w) for a, w in zip(args, whats)])


def accumulate_of(src, func, initial):
    """itertools.accumulate(src, func, initial=initial) not started when it leaves a trace."""
    return itertools.accumulate(src, func, initial=initial)


def _pairwise(items):
    return itertools.pairwise([items[0][0], *(p[1] for p in items)] if items else ())


# an iterator of each type over the items left (a list made in the trace), of that type
ITER_REBUILD = {
    types.GeneratorType: lambda items: (x for x in items),
    itertools.repeat: lambda items: itertools.repeat(items[0], len(items)) if items else itertools.repeat(None, 0),
    itertools.chain: lambda items: itertools.chain(items),
    itertools.islice: lambda items: itertools.islice(items, None),
    itertools.pairwise: _pairwise,
    type(iter([])): lambda items: iter(list(items)),
    type(iter(())): iter,
    type(reversed([])): lambda items: reversed(list(items)[::-1]),
    reversed: lambda items: reversed(items[::-1]),
    zip: lambda items: zip(*zip(*items)) if items else zip(),
    enumerate: _enumerate,
    type(iter({})): lambda items: iter(dict.fromkeys(items)),
    type(iter({}.values())): lambda items: iter(dict(enumerate(items)).values()),
    type(iter({}.items())): lambda items: iter(dict(items).items()),
    type(iter(range(0))): _range_iter,
}


def tensor_type_name(meta, device):
    """x.type() of a tensor of meta's dtype on device ('torch.FloatTensor', 'torch.cuda.HalfTensor'):
    a function of the dtype and device the guards fix; None for other devices."""
    name = torch.empty(0, dtype=meta.dtype).type()
    if device.type == "cpu":
        return name
    if device.type == "cuda":
        return name.replace("torch.", "torch.cuda.", 1)
    return None


def tensor_type_target(t):
    """x.type(t) as x.to(...): (dtype, device type or None) for a dtype, a legacy tensor type or
    its name ('torch.HalfTensor', 'torch.cuda.HalfTensor'); None for anything else."""
    if isinstance(t, torch.dtype):
        return t, None
    name = t if isinstance(t, str) else getattr(t, "__module__", "") + "." + getattr(t, "__name__", "")
    dev = "cuda" if name.startswith("torch.cuda.") else "cpu" if name.startswith("torch.") else None
    base = name.replace("torch.cuda.", "torch.", 1)
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int8, torch.int16,
               torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128):
        if dev and torch.empty(0, dtype=dt).type() == base:
            return dt, dev
    return None


def iter_type(v):
    """The type of iter(v) (or, for v = ("reversed", x), of reversed(x)) for a constant, or a
    torch container module whose __iter__ only reads its members; None otherwise."""
    fn = iter
    if type(v) is tuple and len(v) == 2 and v[0] == "reversed":
        fn, v = reversed, v[1]
    if isinstance(v, torch.nn.Module) and not getattr(type(v).__iter__, "__module__", "").startswith("torch.nn"):
        return None
    try:
        return type(fn(v))
    except Exception:
        return None


_BY_TYPE_CHECKS = (type.__dict__["__instancecheck__"], abc.ABCMeta.__instancecheck__)
# metaclasses whose __instancecheck__ adds a True only for some tensors (Parameter's, Buffer's
# marker attributes): for any other type they answer as type's
_TENSOR_ONLY_CHECKS = tuple(type(c).__instancecheck__ for c in (torch.nn.Parameter, getattr(torch.nn, "Buffer", None))
                            if c is not None and "__instancecheck__" in type(c).__dict__)
_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)
# legacy tensor types (torch.FloatTensor, torch.cuda.LongTensor...): the device type and layout
# their module stands for
_LEGACY_KIND = {"torch": ("cpu", False), "torch.cuda": ("cuda", False), "torch.sparse": ("cpu", True),
                "torch.cuda.sparse": ("cuda", True)}


def isinstance_by_type(tp, cls, depth=0):
    """isinstance(x, cls) for a value made while tracing whose type (and __class__) is tp: True or
    False where cls's metaclass decides by type (type, ABCMeta: collections.abc, numbers), None
    where it cannot be decided from the type (typing.Protocol, other __instancecheck__)."""
    if isinstance(cls, tuple) or isinstance(cls, types.UnionType):
        if depth > 16:
            return None
        for c in (cls.__args__ if isinstance(cls, types.UnionType) else cls):
            r = isinstance_by_type(tp, c, depth + 1)
            if r is None or r:
                return r
        return False
    if not isinstance(cls, type):
        return None
    if tp is cls:
        return True
    check = type(cls).__instancecheck__
    if check not in _BY_TYPE_CHECKS and (check not in _TENSOR_ONLY_CHECKS or issubclass(tp, torch.Tensor)):
        return None
    try:
        return issubclass(tp, cls)
    except Exception:
        return None


def tensor_isinstance(meta, device, cls, depth=0):
    """isinstance(t, cls) for a tensor from its meta tensor and its device (both guarded): legacy
    tensor types by dtype, device type and layout, other classes as the meta tensor answers (it
    keeps the tensor's type)."""
    if isinstance(cls, tuple) or isinstance(cls, types.UnionType):
        if depth > 16:
            raise TypeError("isinstance: classes nested too deep")
        return any(tensor_isinstance(meta, device, c, depth + 1)
                   for c in (cls.__args__ if isinstance(cls, types.UnionType) else cls))
    if type(cls) is _LEGACY_TENSOR_TYPE:
        kind = _LEGACY_KIND.get(cls.__module__)
        return kind is not None and meta.dtype == cls.dtype and (device.type, meta.is_sparse) == kind
    return isinstance(meta, cls)


# ---- which files ember never intercepts ----

def _dirs():
    import os
    import site
    import sysconfig
    sep = os.sep
    pkgs = {os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))}
    for mod in ("numpy", "sympy", "typing_extensions", "functorch", "triton", "_pytest", "pytest", "pluggy",
                "_distutils_hack", "setuptools", "pkg_resources"):
        try:
            m = __import__(mod)
        except Exception:
            continue
        f = getattr(m, "__file__", None)
        if f:
            pkgs.add(f if f.endswith(("/" + mod + ".py",)) else os.path.dirname(f))
    keep = set(site.getsitepackages() + [site.getusersitepackages()])
    keep |= {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    stdlib = {os.path.dirname(os.__file__), os.path.dirname(sysconfig.__file__)}
    norm = lambda ps: tuple(sorted(p if p.endswith(".py") else p.rstrip(sep) + sep for p in ps if p))  # noqa: E731
    return norm(pkgs), norm(keep), norm(stdlib)


_PKGS, _KEEP, _STDLIB = _dirs()
# torch's code whose frames ember compiles when they run as Python inside a compiled call (a
# break at the call of one): the optimizers' step functions, as TorchDynamo's inline list has it
_TORCH_COMPILED = (os.path.join(os.path.dirname(torch.__file__), "optim", ""),)
# ember's benchmark models are user code, though they ship inside the package
_USER_CODE = (os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench") + os.sep,)
_skip_cache = {}


def _backend_generated(filename):
    """Code a torch.compile backend generated: torch.fx GraphModules ("<eval_with_key>.N") and
    Inductor's modules in its cache directory (the backward of a compiled graph runs them, and
    compiles them lazily, while the user's code around it may run under ember)."""
    if filename.startswith("<eval_with_key>"):
        return True
    utils = sys.modules.get("torch._inductor.runtime.cache_dir_utils")  # loaded before it generates any
    if utils is None:
        return False
    try:
        return filename.startswith(os.path.join(utils.cache_dir(), ""))
    except Exception:
        return False


def skip_file(filename):
    """True for code ember never compiles: torch, ember, numpy, the standard library and code
    that backends generate (third-party packages in site-packages, such as torchvision or
    transformers, are compiled)."""
    r = _skip_cache.get(filename)
    if r is None:
        if filename.startswith("<frozen ") or filename == "<string>":
            r = True  # the import system; code generated by exec/eval (namedtuple, dataclasses)
        elif _backend_generated(filename):
            r = True
        elif filename.startswith(_USER_CODE) or filename.startswith(_TORCH_COMPILED):
            r = False
        elif filename.startswith(_PKGS):
            r = True
        elif filename.startswith(_KEEP):
            r = False
        else:
            r = filename.startswith(_STDLIB)
        _skip_cache[filename] = r
    return r


# Modules whose attributes the tracer reads without guards (README, limitations): these and
# their submodules, by name ("torch.nn" is torch's; "torchvision" is not).
TRUSTED_MODULES = frozenset({"torch", "numpy", "math", "operator", "builtins"})


def _package(module):
    """The top-level package of a module object, from its __name__ ("torch.nn" -> "torch")."""
    name = vars(module).get("__name__")
    return name.partition(".")[0] if isinstance(name, str) else None


def trusted_module(module):
    """True when the tracer reads the module's attributes without guards."""
    return _package(module) in TRUSTED_MODULES


def torch_module(module):
    """True for torch and its submodules: a name missing from such a module's dict is looked up
    through its __getattr__ while tracing (torch._VF), unguarded as its other attributes."""
    return _package(module) == "torch"


def library_file(filename):
    """True for code of an installed package (site-packages) that is not ember's user code: not
    a place a user's warning should point at."""
    return filename.startswith(_KEEP) and not filename.startswith(_USER_CODE)


# Python warnings while ember traces: ignored (warnings_off / warnings_on bracket each compile;
# the filter is inserted and removed in place, so the warning registries stay valid)
_QUIET = ("ignore", None, Warning, None, 0)


def warnings_off():
    warnings.filters.insert(0, _QUIET)


def warnings_on():
    filters = warnings.filters
    for i, f in enumerate(filters):
        if f is _QUIET:
            del filters[i]
            return


# ---- values ----

# enum members are singletons compared by identity: constants like ints; signatures are immutable
# typing._Final: typing's special forms and aliases (List, List[Tensor], Optional[int], TypeVars),
# immutable and compared by value; types.GenericAlias: list[int]; types.UnionType: int | None
# numpy's scalars (np.float32(2.0)), dtypes and finfo/iinfo are immutable values too
_NUMPY_VALUES = (_np.generic, _np.dtype, _np.finfo, _np.iinfo) if _np is not None else ()
PURE_TYPES = (torch.dtype, torch.device, torch.Size, torch.memory_format, torch.layout, torch.finfo,
              torch.iinfo, type(Ellipsis), type(None), enum.Enum, inspect.Signature, inspect.Parameter,
              typing._Final, types.GenericAlias, types.UnionType, type(sys.version_info), re.Pattern, re.Match) + _NUMPY_VALUES
_SCALARS = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), slice, range, torch.dtype,
            torch.device, torch.memory_format, torch.layout, torch.finfo, torch.iinfo, re.Pattern, re.Match) + _NUMPY_VALUES


def is_const(v, depth=0):
    """True when v is an immutable value the tracer may treat as a constant."""
    if isinstance(v, _SCALARS):
        return True
    if isinstance(v, enum.Enum) and type(type(v)) is enum.EnumMeta:
        return True  # a member: a singleton of its class (E(1) is E.A)
    if isinstance(v, (tuple, frozenset)) and depth < 8 and not isinstance(v, torch.Tensor):
        if type(v) is tuple or isinstance(v, (torch.Size, frozenset)):
            return all(is_const(x, depth + 1) for x in v)
    return False


# the dtypes ember names, in torch's ScalarType order (csrc/ir/em_dtypes.def)
_DTYPES = [getattr(torch, name) for name in _C.DTYPES]


def dtype_num(dt):
    """torch's ScalarType number of a dtype (used when tensor fields cannot be read directly)."""
    try:
        return _DTYPES.index(dt)
    except ValueError:
        return -1


# ---- meta execution ----

_is_functorch_wrapped = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", lambda t: False)


def meta_like(t):
    if _is_functorch_wrapped(t):  # a vmap's batched tensor (a frame called inside a transform)
        raise TypeError("a functorch-wrapped tensor has no meta equivalent")
    if torch.is_inference_mode_enabled() and not t.is_inference():
        with torch.inference_mode(False):  # first read inside a traced inference_mode block
            return meta_like(t)
    m = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=META, requires_grad=t.requires_grad)
    if type(t) is torch.nn.Parameter:
        m = torch.nn.Parameter(m, requires_grad=t.requires_grad)
    return m


def meta_parameter(m, requires_grad):
    """The meta tensor of an nn.Parameter made in the trace (em_obj.c new_parameter)."""
    return torch.nn.Parameter(m, requires_grad=requires_grad)


# NumPy on tensors (csrc/trace/em_sym_np.c): the wrappers of numpy functions, operators, item
# stores and ndarray attributes, and the conversion of an ndarray leaving the trace
from ._np import (attr_info as np_attr_info, function as np_function, operator_wrapper as np_operator,  # noqa: E402
                  setitem_wrapper as np_setitem, to_numpy, to_numpy_scalar, probe as np_probe, Arr as NpArr,
                  scalar_type as np_scalar_type, from_numpy as np_from_numpy,
                  contiguous_wrapper as np_contiguous)


_ARITY = {}


def arity_error(descr, npos, kwnames):
    key = (descr, npos, kwnames)
    if key not in _ARITY:
        _ARITY[key] = _arity_error(descr, npos, kwnames)
    return _ARITY[key]


_KW_ORDER = {}


def kw_order(descr, npos, kwnames):
    """For a call of builtin method descriptor `descr` with npos positional arguments after
    self and keyword arguments kwnames: the index in kwnames of each argument in the order of
    the method's positional-or-keyword parameters npos, npos + 1, ..., when the keywords name
    exactly those parameters (`od.move_to_end(k, last=False)`, `od.popitem(last=False)`): the
    call is then the same call with positional arguments. None otherwise."""
    key = (descr, npos, kwnames)
    if key not in _KW_ORDER:
        _KW_ORDER[key] = _kw_order(descr, npos, kwnames)
    return _KW_ORDER[key]


def _kw_order(descr, npos, kwnames):
    try:
        params = list(inspect.signature(descr).parameters.values())[1:]
    except (ValueError, TypeError):
        return None
    where = {p.name: i for i, p in enumerate(params) if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
    at = [where.get(k, -1) for k in kwnames]
    if sorted(at) != list(range(npos, npos + len(kwnames))):
        return None
    return tuple(at.index(npos + j) for j in range(len(kwnames)))


_STUBS = {}


def _stub_of(fn):
    """A function with fn's parameters (names, kinds, how many defaults, qualname) and an empty
    body: binding arguments to it raises what binding them to fn raises, without running fn."""
    code = fn.__code__
    stub = _STUBS.get(code)
    if stub is None:
        names = code.co_varnames
        npos, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
        params = list(names[:npos])
        if nposonly:
            params.insert(nposonly, "/")
        at = npos + nkwonly
        if code.co_flags & inspect.CO_VARARGS:
            params.append("*" + names[at])
            at += 1
        elif nkwonly:
            params.append("*")
        params[len(params):] = names[npos:npos + nkwonly]
        if code.co_flags & inspect.CO_VARKEYWORDS:
            params.append("**" + names[at])
        ns = {}
        try:
            exec(f"def stub({', '.join(params)}):\n    pass\n", ns)  # noqa: S102 - names from a code object
        except SyntaxError:  # a parameter that is no identifier (a comprehension's .0)
            return None
        stub = ns["stub"]
        if len(_STUBS) > 512:
            _STUBS.clear()
        _STUBS[code] = stub
    return stub


def kwargs_twice_error(fn, key):
    """The TypeError of f(k=..., **{k: ...}): CPython names the callable as _PyObject_FunctionStr
    does (module.qualname(), no module for builtins)."""
    try:
        qual = fn.__qualname__
    except Exception:  # noqa: BLE001 - CPython falls back to str() on any error
        name = str(fn)
    else:
        mod = getattr(fn, "__module__", None)
        name = f"{mod}.{qual}()" if mod is not None and mod != "builtins" else f"{qual}()"
    return TypeError(f"{name} got multiple values for keyword argument '{key}'")


def call_arity_error(fn, npos, kwnames):
    """The TypeError CPython raises binding npos positional arguments and these keyword names to
    Python function fn whatever their values (too many or too few, an unknown or repeated
    keyword), or None when they bind. fn does not run: its stub is called."""
    stub = _stub_of(fn)
    if stub is None:
        return None
    stub.__qualname__ = fn.__qualname__
    stub.__defaults__ = (None,) * len(fn.__defaults__ or ())
    stub.__kwdefaults__ = dict.fromkeys(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    try:
        stub(*([None] * npos), **dict.fromkeys(kwnames or ()))
    except TypeError as e:
        return e
    return None


def _arity_error(descr, npos, kwnames):
    """The message of the TypeError calling method descriptor `descr` of a builtin type with
    npos positional arguments after self and these keyword names raises whatever their values
    (too many or too few arguments, an unknown keyword), or None: CPython checks a builtin
    method's arguments before it reads its object, so an empty instance raises it."""
    kw = {k: None for k in kwnames or ()}
    try:
        inspect.signature(descr).bind(None, *([None] * npos), **kw)
        return None
    except ValueError:  # no signature (METH_NOARGS, METH_O): CPython's own message tells
        pass
    except TypeError:
        pass
    try:
        empty = descr.__objclass__()
    except Exception:  # a type with no empty instance (mappingproxy)
        return None
    try:
        descr(empty, *([None] * npos), **kw)
    except TypeError as e:
        return str(e) if _ARITY_MESSAGE.search(str(e)) else None
    except Exception:
        return None
    return None


_ARITY_MESSAGE = re.compile(
    r"takes (no|exactly|at most|at least) .*argument|expected (at most |at least )?\d+ argument|unexpected keyword|"
    r"takes no keyword|missing required")


def dict_view(d, what):
    """d.keys(), d.values(), d.items() or MappingProxyType(d) (what: 'k', 'v', 'i', 'm'): a view made in the trace, over
    the dict the graph's output gives."""
    if what == "m":
        return types.MappingProxyType(d)
    return d.keys() if what == "k" else d.values() if what == "v" else d.items()


def fresh_exception(e, _memo=None):
    """A new exception equal to e, one made while tracing from constants: the graph's output
    makes one per call, as each call of the Python code makes its own (its chain copied too)."""
    import copy
    memo = {} if _memo is None else _memo
    if id(e) in memo:
        return memo[id(e)]
    new = memo[id(e)] = copy.copy(e)  # type(e)(*e.args), its __dict__ (ImportError's name)
    if e.__cause__ is not None:
        new.__cause__ = fresh_exception(e.__cause__, memo)
    if e.__context__ is not None:
        new.__context__ = fresh_exception(e.__context__, memo)
    new.__suppress_context__ = e.__suppress_context__
    return new


def as_parameter(t):
    """Where an nn.Parameter made in the trace leaves it: the graph's tensor (a leaf, detached in
    the graph) made one in place, so that every reference to it, in the graph's other outputs
    and effects, is the same Parameter."""
    if type(t) is torch.Tensor:
        t.__class__ = torch.nn.Parameter
    return t


def meta_empty(sizes, strides, dtype_num, requires_grad):
    """Meta tensor for a value whose metadata ember inferred in C. A result that requires
    grad is made a non-leaf, as the real one is (in-place ops on it are allowed)."""
    dt = _DTYPES[dtype_num]
    m = torch.empty_strided(sizes, strides, dtype=dt, device=META)
    if not requires_grad:
        return m
    # made inside a traced no_grad or inference_mode block, the clone would not require grad
    with torch.inference_mode(False), torch.enable_grad():
        c = m.requires_grad_().clone()
        if c.stride() == tuple(strides):
            return c
        # clone keeps the strides of dense layouts only (an expand's 0 strides become dense ones,
        # and is_contiguous() would answer for those): a view of a non-leaf keeps them exactly
        n = 1 + sum((k - 1) * st for k, st in zip(sizes, strides)) if all(sizes) else 0
        return torch.empty(n, dtype=dt, device=META).requires_grad_().clone().as_strided(sizes, strides)


def meta_view(sizes, strides, dtype_num, requires_grad, base):
    """Meta tensor of a view of `base` (a meta tensor) that ember inferred in C: a view of base
    itself where base is a leaf that requires grad or a view of one (an in-place op on it then
    raises as on the real tensor), else as meta_empty."""
    root = base._base if base._is_view() else base
    if requires_grad and root.is_leaf and root.requires_grad:
        with torch.inference_mode(False), torch.enable_grad():
            return base.as_strided(sizes, strides)
    return meta_empty(sizes, strides, dtype_num, requires_grad)


# elementwise, one tensor in, same dtype out (for floating dtypes): metadata inferred in C
POINTWISE = set()
for _name in ("relu", "sigmoid", "tanh", "exp", "log", "sin", "cos", "sqrt", "rsqrt", "abs", "neg", "exp2",
              "log1p", "expm1", "reciprocal", "erf", "floor", "ceil", "round", "trunc", "sign", "square"):
    for _ns in (torch, _T):
        _f = getattr(_ns, _name, None)
        if _f is not None:
            POINTWISE.add(_f)
for _f in (torch.nn.functional.relu, torch.nn.functional.gelu, torch.nn.functional.silu,
           torch.nn.functional.sigmoid, torch.nn.functional.tanh, torch._C._nn.gelu, torch._C._nn.silu):
    POINTWISE.add(_f)


# result shapes C infers from the operands (csrc/trace/em_infer.c), keyed by callable; the rules
# are the rows of csrc/trace/em_shape_rules.def
SHAPE_LIKE_FIRST, SHAPE_LINEAR, SHAPE_CONV, SHAPE_ADAPTIVE_POOL = (_C.SHAPE_LIKE_FIRST, _C.SHAPE_LINEAR, _C.SHAPE_CONV,
                                                                   _C.SHAPE_ADAPTIVE_POOL)
SHAPE_SCALAR_ARGS, SHAPE_REDUCE = _C.SHAPE_SCALAR_ARGS, _C.SHAPE_REDUCE
_F = torch.nn.functional
SHAPE_RULES = {}
_NN = torch._C._nn


def _fns(owner, names):
    """The callables of owner named in names that this torch has."""
    return [f for f in (getattr(owner, n, None) for n in names.split()) if f is not None]


for _f in (_fns(_F, "batch_norm layer_norm group_norm dropout hardswish hardsigmoid relu6 silu gelu relu "
                    "leaky_relu elu mish softmax log_softmax") + _fns(torch, "batch_norm layer_norm softmax") +
           _fns(_T, "softmax") + _fns(_NN, "hardswish hardsigmoid")):
    SHAPE_RULES[_f] = SHAPE_LIKE_FIRST
for _f in _fns(torch, "clamp clip clamp_min clamp_max pow") + _fns(_T, "clamp clip clamp_min clamp_max pow"):
    SHAPE_RULES[_f] = SHAPE_SCALAR_ARGS
for _f in _fns(torch, "sum mean") + _fns(_T, "sum mean"):
    SHAPE_RULES[_f] = SHAPE_REDUCE
for _names, _rule in (("transpose swapaxes swapdims", _C.SHAPE_VIEW_TRANSPOSE), ("t", _C.SHAPE_VIEW_T),
                      ("permute", _C.SHAPE_VIEW_PERMUTE), ("unsqueeze", _C.SHAPE_VIEW_UNSQUEEZE),
                      ("expand", _C.SHAPE_VIEW_EXPAND), ("view", _C.SHAPE_VIEW_VIEW),
                      ("reshape", _C.SHAPE_VIEW_RESHAPE)):
    for _f in _fns(torch, _names) + _fns(_T, _names):
        SHAPE_RULES[_f] = _rule
for _f in _fns(_F, "linear") + _fns(_NN, "linear"):
    SHAPE_RULES[_f] = SHAPE_LINEAR
for _f in _fns(_F, "conv1d conv2d conv3d") + _fns(torch, "conv1d conv2d conv3d"):
    SHAPE_RULES[_f] = SHAPE_CONV
for _nsp, _owner, _name in ((1, _F, "adaptive_avg_pool1d"), (2, _F, "adaptive_avg_pool2d"),
                            (3, _F, "adaptive_avg_pool3d"), (1, torch, "adaptive_avg_pool1d"),
                            (2, _NN, "adaptive_avg_pool2d"), (3, _NN, "adaptive_avg_pool3d")):
    for _f in _fns(_owner, _name):
        SHAPE_RULES[_f] = (SHAPE_ADAPTIVE_POOL, _nsp)


# How the symbolic sizes of an op's result follow from its operands' (csrc/trace/em_shape_sym.c);
# the numbers are the rows of csrc/trace/em_sym_rules.def. Callables in SHAPE_RULES or POINTWISE
# need no row here.
SYM_RULES = {}
_SAME_NAMES = ("float double half bfloat16 int long short bool char byte to type_as contiguous clone detach "
               "cpu cuda requires_grad_ masked_fill_ tril triu tril_ triu_ cumsum cumprod flip roll "
               "dropout dropout_ alpha_dropout zero_ fill_ copy_ nan_to_num rms_norm rsqrt tanh sigmoid relu gelu "
               "silu softplus softmax log_softmax layer_norm group_norm batch_norm instance_norm normalize neg "
               "abs exp log sqrt sin cos erf logical_not bitwise_not sign floor ceil round relu_ gelu_ silu_ "
               "hardtanh leaky_relu elu mish hardswish hardsigmoid relu6 sigmoid_ tanh_ mul_ add_ sub_ div_ "
               "zeros_like ones_like empty_like full_like rand_like randn_like randint_like scatter scatter_ "
               "scatter_add scatter_add_ scatter_reduce scatter_reduce_ index_add index_add_ index_copy index_copy_ "
               "index_fill index_fill_ masked_scatter masked_scatter_")
for _names, _owners, _rule in (
        (_SAME_NAMES, (_T, torch, _F), _C.SYMR_SAME),
        ("where masked_fill lerp addcmul addcdiv", (_T, torch), _C.SYMR_BROADCAST),  # the mask may broadcast x
        ("matmul bmm mm", (_T, torch), _C.SYMR_MATMUL),
        ("sum mean amax amin prod any all logsumexp nansum", (_T, torch), _C.SYMR_REDUCE),
        ("zeros ones empty rand randn", (torch,), _C.SYMR_FACTORY),
        ("full", (torch,), _C.SYMR_FULL),
        ("new_zeros new_ones new_empty", (_T,), _C.SYMR_NEW_FACTORY),
        ("new_full", (_T,), _C.SYMR_NEW_FULL),
        ("arange", (torch,), _C.SYMR_ARANGE),
        ("cat concat concatenate", (torch,), _C.SYMR_CAT),
        ("embedding", (_F,), _C.SYMR_EMBEDDING),
        ("embedding", (torch,), _C.SYMR_EMBEDDING_W),
        ("addmm", (_T, torch), _C.SYMR_ADDMM),
        ("split chunk unbind split_with_sizes tensor_split", (_T, torch), _C.SYMR_SPLIT),
        ("scaled_dot_product_attention", (_F, torch._C._nn), _C.SYMR_SDPA),
        ("conv1d conv2d conv3d", (_F, torch), _C.SYMR_CONV),
        ("flatten", (_T, torch), _C.SYMR_FLATTEN),
        ("squeeze", (_T, torch), _C.SYMR_SQUEEZE),
        ("tensor as_tensor scalar_tensor", (torch,), _C.SYMR_DATA),
        ("new_tensor", (_T,), _C.SYMR_NEW_DATA),
        ("gather", (_T, torch), _C.SYMR_GATHER),
        ("index_select", (_T, torch), _C.SYMR_INDEX_SELECT),
        ("max min median nanmedian mode", (_T, torch), _C.SYMR_MINMAX),
        ("sort argsort cummax cummin", (_T, torch), _C.SYMR_SORT),
        ("topk", (_T, torch), _C.SYMR_TOPK),
        ("argmax argmin", (_T, torch), (_C.SYMR_REDUCE_AT, 12)),
        ("var std", (_T, torch), (_C.SYMR_REDUCE_AT, 13)),
        ("norm", (_T, torch), (_C.SYMR_REDUCE_AT, 23)),
        ("count_nonzero", (_T, torch), (_C.SYMR_REDUCE_AT, 10)),
        ("expand_as view_as reshape_as", (_T,), _C.SYMR_AS),
        ("repeat", (_T,), _C.SYMR_REPEAT),
        ("stack", (torch,), _C.SYMR_STACK),
        ("pad", (_NN, _F), _C.SYMR_PAD),
        ("_native_multi_head_attention", (torch,), _C.SYMR_MHA),
        ("outer ger", (_T, torch), _C.SYMR_OUTER),
        ("linspace logspace", (torch,), _C.SYMR_LINSPACE),
        ("one_hot", (_F, torch._C._nn), _C.SYMR_ONE_HOT),
        ("unflatten", (_T, torch), _C.SYMR_UNFLATTEN),
        ("movedim moveaxis", (_T, torch), _C.SYMR_MOVEDIM),
        ("linear", (_F, _NN), _C.SYMR_LINEAR)):
    for _o in _owners:
        for _f in _fns(_o, _names):
            SYM_RULES.setdefault(_f, _rule)
# pools: (row, spatial dimensions), the number in the name
for _base, _rule in (("max_pool", _C.SYMR_MAX_POOL), ("avg_pool", _C.SYMR_AVG_POOL),
                     ("adaptive_avg_pool", _C.SYMR_ADAPTIVE), ("adaptive_max_pool", _C.SYMR_ADAPTIVE)):
    for _nsp in (1, 2, 3):
        for _o in (torch, _NN, _F):
            for _f in _fns(_o, f"{_base}{_nsp}d"):
                SYM_RULES.setdefault(_f, (_rule, _nsp))


def _device(d):
    d = torch.device(d)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
    return d


def _has_tensor(x):
    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_tensor(i) for i in x)
    if isinstance(x, dict):
        return any(_has_tensor(i) for i in x.values())
    return False


_MOVES = {getattr(_T, "to"): "to", getattr(_T, "cuda"): "cuda", getattr(_T, "cpu"): "cpu"}


def _move(kind, args, kwargs, device):
    self, rest, new = args[0], [], device
    for a in args[1:]:
        if isinstance(a, (torch.device, str)) or (kind == "cuda" and type(a) is int):
            new = _device(a if kind != "cuda" or not isinstance(a, int) else torch.device("cuda", a))
        elif isinstance(a, torch.Tensor):
            raise NotImplementedError("Tensor.to(other_tensor)")
        else:
            rest.append(a)
    if "device" in kwargs:
        d = kwargs.pop("device")
        new = device if d is None else _device(d)
    if kind == "cuda" and new == device and device.type != "cuda":
        new = _device("cuda")
    if kind == "cpu":
        new = torch.device("cpu")
    out = self.to(*rest, **kwargs) if kind == "to" else self
    if new != device:
        out = torch.empty_strided(out.size(), out.stride(), dtype=out.dtype, device=META,
                                  requires_grad=out.requires_grad)
    return out, new


def _all_meta(x):
    if isinstance(x, torch.Tensor):
        return x.device.type == "meta"
    if isinstance(x, (list, tuple)):
        return all(_all_meta(i) for i in x)
    return True


def _autocast_on(device):
    try:
        return torch.is_autocast_enabled((device or torch.device("cpu")).type)
    except (RuntimeError, TypeError):
        return False


_fake_mode = None


def _run_fake(fn, args, kwargs, device, mode=None):
    """fn on fake tensors of the real device, so that autocast picks the result dtypes it
    would; the results come back as meta tensors. mode: the FakeTensorMode (else ember's)."""
    global _fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_map
    if _fake_mode is None:
        _fake_mode = FakeTensorMode()
    mode = mode if mode is not None else _fake_mode

    def to_fake(t):
        if isinstance(t, torch.Tensor) and t.device.type == "meta":
            with mode:
                f = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
            return f.requires_grad_() if t.requires_grad and f.is_floating_point() else f
        return t

    def to_meta(t):
        if isinstance(t, torch.Tensor):
            return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=META,
                                       requires_grad=t.requires_grad)
        return t

    fargs, fkwargs = tree_map(to_fake, args), tree_map(to_fake, kwargs)
    with mode:
        out = fn(*fargs, **fkwargs)
    return tree_map(to_meta, out)


_leaf_fake_mode = None


def _leaf_fake(args, kwargs, device):
    """leaf_op's meta result: its fake implementation on fake tensors of the real device; real
    tensors it reads (a module's parameters given to it) are taken as constants."""
    global _leaf_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    if _leaf_fake_mode is None:
        _leaf_fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    return _run_fake(_leaf_meta, args, kwargs, device, _leaf_fake_mode)


# Meta results by call signature: in a model the same op runs on the same shapes layer after
# layer, and a meta run through Python decompositions costs ~10 us to ~2 ms (attention). A result
# is kept only for out-of-place calls whose outputs are fresh tensors (not views, not inputs), as
# (sizes, strides, dtype, requires_grad) records from which new meta tensors are made per hit.
_MEMO = {}
_MEMO_MAX = 8192
_KEY_SCALARS = (int, float, bool, str, type(None), type(Ellipsis), torch.dtype, torch.device, torch.memory_format,
                torch.layout)


def _memo_key(x, depth=0):
    if isinstance(x, torch.Tensor):
        if x.device.type != "meta" or x.layout != torch.strided:
            raise TypeError
        return (type(x), tuple(x.shape), x.stride(), x.dtype, x.requires_grad, x.storage_offset(), x.is_conj(),
                x.is_neg())
    t = type(x)
    if t in _KEY_SCALARS:
        return (t, x)
    if t is slice:
        return (t, _memo_key(x.start), _memo_key(x.stop), _memo_key(x.step))
    if (t is tuple or t is list or t is torch.Size) and depth < 4:
        return (t,) + tuple(_memo_key(i, depth + 1) for i in x)
    raise TypeError  # anything else: not cached


def _call_key(fn, args, kwargs):
    name = getattr(fn, "__name__", "")
    if name.endswith("_") or "out" in kwargs:  # in place (operator.iadd & co.: _record sees the input come back)
        return None
    if not _lasting(fn, GRAPH):  # the memo must not keep user objects (or their meta tensors) alive
        return None
    try:
        hash(fn)
        return (fn, torch.is_grad_enabled(), torch.get_default_dtype(), _memo_key(tuple(args)),
                tuple(sorted((k, _memo_key(v)) for k, v in kwargs.items())))
    except TypeError:
        return None


def _tensors(x, depth=0):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)) and depth < 4:
        for i in x:
            yield from _tensors(i, depth + 1)
    elif isinstance(x, dict) and depth < 4:
        for i in x.values():
            yield from _tensors(i, depth + 1)


def _record(out, ins):
    """The result as rebuildable records, or None when it must not be shared: an input or a
    view that may alias one (ins: the call's input tensors, their bases included). A view of a
    tensor made inside the call (matmul's folded bmm, attention's math path) aliases nothing
    the trace can see: it is kept as a fresh tensor of the same sizes and strides."""
    if out is None:
        return ("none",)
    if isinstance(out, torch.Tensor):
        if type(out) is not torch.Tensor or out.layout != torch.strided or any(out is a for a in ins):
            return None
        if out._is_view() and (out.storage_offset() != 0 or any(out._base is a for a in ins)):
            return None
        return ("t", tuple(out.shape), out.stride(), out.dtype, out.requires_grad)
    if type(out) in (tuple, list):
        items = [_record(o, ins) for o in out]
        return None if any(i is None for i in items) else (type(out), items)
    return None


class _NonLeaf(torch.autograd.Function):
    """A fresh meta tensor of the given sizes, strides and dtype that requires grad as an op's
    result does: not a leaf (an in-place op on a leaf that requires grad raises, and is_leaf
    must answer False), not a view."""

    @staticmethod
    def forward(ctx, seed, sizes, strides, dtype):
        return torch.empty_strided(sizes, strides, dtype=dtype, device=META)

    @staticmethod
    def backward(ctx, g):
        return None, None, None, None


_SEED = torch.empty((), device=META, requires_grad=True)


def _rebuild(rec):
    kind = rec[0]
    if kind == "none":
        return None
    if kind == "t":
        if rec[4]:
            with torch.enable_grad():
                return _NonLeaf.apply(_SEED, rec[1], rec[2], rec[3])
        return torch.empty_strided(rec[1], rec[2], dtype=rec[3], device=META)
    return kind(_rebuild(r) for r in rec[1])


def _memo_run(fn, args, kwargs):
    """fn(*args, **kwargs) on meta values, through the memo when the call has a key."""
    # inside a vmap level results are batched, which records do not rebuild: no memo
    key = _call_key(fn, args, kwargs) if functorch_idle() else None
    rec = _MEMO.get(key) if key is not None else None
    if rec is not None:
        return _rebuild(rec)
    out = fn(*args, **kwargs)
    if key is not None and _all_meta(out):
        ins = list(_tensors((args, kwargs)))
        ins += [t._base for t in ins if t._base is not None]
        rec = _record(out, ins)
        if rec is not None:
            if len(_MEMO) >= _MEMO_MAX:
                _MEMO.clear()
            _MEMO[key] = rec
    return out


# matrix products whose CPU and CUDA kernels refuse operands of different dtypes (outside
# autocast) while their meta kernels promote: checked before the meta run, so the trace stops
# where eager raises (a graph raising there would skip the side effects eager made before it)
_SAME_DTYPE = set(_fns(torch, "matmul mm bmm mv dot vdot addmm addmv addbmm baddbmm einsum tensordot") +
                  _fns(_T, "matmul mm bmm mv dot vdot addmm addmv addbmm baddbmm __matmul__ __rmatmul__") +
                  _fns(torch.nn.functional, "linear bilinear") + [operator.matmul])


def _check_same_dtype(fn, args, kwargs):
    dts = {t.dtype for t in _tensors((args, kwargs))}
    if len(dts) > 1:
        raise RuntimeError(f"expected the operands of {getattr(fn, '__name__', fn)} to have one dtype, got "
                           f"{sorted(map(str, dts))}")


def _check_resized_out(fn, args, kwargs, given):
    """fn(..., out=t) resized t: CPU and CUDA kernels built on TensorIterator give it the
    functional result's strides (following the inputs' layout) where the meta kernel makes it
    contiguous, other kernels keep it contiguous. Where the two layouts differ the meta answer
    cannot be trusted: the call is not traced."""
    try:
        functional = fn(*args, **{k: v for k, v in kwargs.items() if k != "out"})
    except Exception:
        functional = None
    if not isinstance(functional, torch.Tensor) or functional.stride() != given.stride():
        raise NotImplementedError(f"{getattr(fn, '__name__', fn)}(out=) resizing its output: the layout eager "
                                  "gives it depends on the kernel")


def run(fn, args, kwargs, device, consts=False):
    """Runs fn on meta values; returns (result, device of the result). consts: every argument
    is a constant of the trace (no symbolic size), so a pure op of no tensor runs for real."""
    if fn is leaf_op:  # the fake implementation, written for fake tensors of the real device
        device = device if device is not None else torch.get_default_device()
        return _leaf_fake(args, kwargs, device), device
    kind = _MOVES.get(fn)
    if kind is not None:
        return _move(kind, args, kwargs, device)
    if device is not None and "device" not in kwargs and _autocast_on(device):
        return _run_fake(fn, args, kwargs, device), device
    if fn in _SAME_DTYPE:
        _check_same_dtype(fn, args, kwargs)
    if "device" in kwargs:
        d = kwargs["device"]
        device = _device(d) if d is not None else (device or torch.get_default_device())
        kwargs["device"] = META
        out = _memo_run(fn, args, kwargs)
    elif device is None and not _has_tensor(args) and not _has_tensor(kwargs):
        device = torch.get_default_device()
        try:
            out = _memo_run(fn, args, dict(kwargs, device=META))
        except TypeError:
            # no device to make it on: a builtin run here could change torch's state for real
            # (torch._C._vmap_increment_nesting...); the call is not traced. torch's Python
            # functions of constants (torch._check(True)) run
            if isinstance(fn, types.FunctionType):
                out = fn(*args, **kwargs)
            elif consts and _pure_op(fn, False):
                # a pure torch op of Python numbers (torch.div(n, 8, rounding_mode="trunc")): run
                # as eager runs it (a 0-dim tensor, on the device eager picks); the trace folds its
                # value when the numbers are constants (csrc/trace/em_fold.c)
                real = fn(*args, **kwargs)
                if not isinstance(real, torch.Tensor) or real.dim() != 0:
                    raise NotImplementedError(f"{getattr(fn, '__name__', fn)} of no tensor takes no device")
                return (torch.empty((), dtype=real.dtype, device=META, requires_grad=real.requires_grad),
                        real.device)
            else:
                raise NotImplementedError(f"{getattr(fn, '__name__', fn)} of no tensor takes no device") from None
    else:
        given = kwargs.get("out")
        before = tuple(given.shape) if isinstance(given, torch.Tensor) else None
        try:
            out = _memo_run(fn, args, kwargs)
        except RuntimeError as e:
            if "cannot be called on meta tensors" not in str(e) or not any(t.dim() == 0 for t in _tensors((args, kwargs))):
                raise
            out = _run_scalar_values(fn, args, kwargs, e, device)
        if before is not None and tuple(given.shape) != before:
            _check_resized_out(fn, args, kwargs, given)
    if not _all_meta(out):
        raise NotImplementedError("creates tensor data while tracing")
    return out, device if device is not None else torch.device("cpu")


# ---------------------------------------------------------------------------------------------- known small tensors

# the ops folded on real values (csrc/trace/em_fold.c): Python's operators, and torch builtins
# that are ATen ops neither random (nondeterministic_seeded) nor reading uninitialized memory
_FOLD_OPERATORS = frozenset(getattr(operator, n) for n in (
    "add sub mul truediv floordiv mod pow matmul and_ or_ xor lshift rshift neg pos invert lt le eq ne gt ge "
    "getitem").split())
_FOLD_INPLACE = frozenset(getattr(operator, n) for n in (
    "iadd isub imul itruediv ifloordiv imod ipow imatmul iand ior ixor ilshift irshift setitem").split())
_PURE = {}


def _pure_op(fn, inplace):
    """Whether fn run on real values does what its graph node does, and nothing else: an
    operator, or a torch builtin (torch.div, Tensor.sub_) whose ATen ops are not random and do
    not return uninitialized memory. inplace: fn may write its first argument (Tensor.sub_,
    operator.isub, operator.setitem); otherwise it must not."""
    try:
        if fn in _FOLD_OPERATORS:
            return not inplace
        if fn in _FOLD_INPLACE:
            return inplace
        hit = _PURE.get(fn)
    except TypeError:  # unhashable
        return False
    if hit is None:
        hit = _PURE[fn] = _aten_pure(fn)
    return hit == (2 if inplace else 1)


def _aten_pure(fn):
    """0: not an ATen op folded; 1: a functional one; 2: an in-place one (name_)."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or name.startswith("__") or "empty" in name:
        return 0
    if getattr(torch._C._VariableFunctions, name, None) is not fn and \
            getattr(torch._C.TensorBase, name, None) is not fn:
        return 0
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return 0
    try:
        for o in packet.overloads():
            op = getattr(packet, o)
            if _BAD_TAGS & set(op.tags):
                return 0
            if "out" in o or name.endswith("_"):
                continue
            # a functional op that writes an argument (batch_norm's running statistics, which
            # not every schema marks as written)
            if op._schema.is_mutable or any(a.name in _RUNNING for a in op._schema.arguments):
                return 0
    except (AttributeError, RuntimeError):
        return 0
    return 2 if name.endswith("_") else 1


_BAD_TAGS = {getattr(torch.Tag, n) for n in ("nondeterministic_seeded", "inplace_view", "maybe_aliasing_or_mutating")
             if hasattr(torch.Tag, n)}
_RUNNING = {"running_mean", "running_var"}


# ---- numbers the graph computes (csrc/trace/em_sym_item.c) ----

def capture_scalar_outputs():
    """Whether x.item() is captured outside fullgraph: ember.config's setting, or TorchDynamo's
    (a program written for torch.compile sets that one)."""
    from ._config import config
    if config.capture_scalar_outputs:
        return True
    dyn = sys.modules.get("torch._dynamo.config")
    return bool(getattr(dyn, "capture_scalar_outputs", False))


def capture_dynamic_output_shape_ops():
    """Whether nonzero/masked_select/x[mask] are captured outside fullgraph: ember.config's
    setting, or TorchDynamo's."""
    from ._config import config
    if config.capture_dynamic_output_shape_ops:
        return True
    dyn = sys.modules.get("torch._dynamo.config")
    return bool(getattr(dyn, "capture_dynamic_output_shape_ops", False))


def _stand_in_count(n):
    """How many elements a data-dependent result of at most n stands in with in meta runs: n - 1
    where that is >= 2 (unequal to n, which other sizes may be), else n."""
    return n - 1 if n >= 3 else n


def nonzero_meta(x, *, as_tuple=False):
    """torch.nonzero's result for a meta run: (count, x.dim()) int64, count a stand-in; with
    as_tuple (torch.where(x)) its columns, as eager's unbind(1) gives them (one for a 0-d x)."""
    if not isinstance(x, torch.Tensor):
        raise NotImplementedError("nonzero of a non-tensor")
    n, d = _stand_in_count(x.numel()), max(x.dim(), 1) if as_tuple else x.dim()
    r = torch.empty_strided((n, d), (1, n), dtype=torch.long, device=x.device)  # eager's layout
    return r.unbind(1) if as_tuple else r


def where_meta(cond):
    return nonzero_meta(cond, as_tuple=True)


def masked_select_meta(x, mask):
    if not isinstance(x, torch.Tensor) or not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise NotImplementedError("masked_select of a non-bool mask")
    b = torch.broadcast_shapes(x.shape, mask.shape)
    return torch.empty((_stand_in_count(math.prod(b)),), dtype=x.dtype, device=x.device)


def unique_meta(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique's results for a meta run (dim=None): values (count,) of x's dtype, a stand-in
    count; the inverse of x's sizes; counts (count,) int64."""
    if not isinstance(x, torch.Tensor) or dim is not None:
        raise NotImplementedError("unique along a dim")
    c = _stand_in_count(x.numel())
    out = [torch.empty((c,), dtype=x.dtype, device=x.device)]
    if return_inverse:
        out.append(torch.empty(x.shape, dtype=torch.long, device=x.device))
    if return_counts:
        out.append(torch.empty((c,), dtype=torch.long, device=x.device))
    return out[0] if len(out) == 1 else tuple(out)


def mask_index_meta(x, mask):
    """x[mask] of a bool mask over x's leading dimensions: (count,) + the rest of x."""
    if mask.dtype != torch.bool or mask.dim() == 0 or mask.dim() > x.dim() or x.shape[:mask.dim()] != mask.shape:
        raise NotImplementedError("x[mask] of another mask")
    return torch.empty((_stand_in_count(mask.numel()),) + tuple(x.shape[mask.dim():]), dtype=x.dtype,
                       device=x.device)


# callables whose numbers fill or are the data of their result: its metadata does not depend on
# them, only on their types (a size among them shows in em_item_call_check's second meta run)
_ITEM_FILLS = frozenset(("tensor", "as_tensor", "scalar_tensor", "full", "full_like", "new_full", "fill",
                         "fill_", "masked_fill", "masked_fill_", "where", "index_fill", "index_fill_"))
_ITEM_OK = {}


def item_call_ok(fn):
    """Whether fn may be given a number the graph computes: a torch builtin with a pointwise
    ATen overload (torch.clamp, Tensor.add), or one of _ITEM_FILLS."""
    try:
        hit = _ITEM_OK.get(fn)
    except TypeError:
        return False
    if hit is None:
        hit = _ITEM_OK[fn] = _item_ok(fn)
    return hit


def _item_ok(fn):
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or name.startswith("__"):
        return False
    if getattr(torch._C._VariableFunctions, name, None) is not fn and \
            getattr(torch._C.TensorBase, name, None) is not fn and getattr(torch, name, None) is not fn:
        return False
    if name in _ITEM_FILLS or name.startswith("_foreach_"):  # a foreach op's scalars apply item by item
        return True
    packet = getattr(torch.ops.aten, name, None)
    try:
        return packet is not None and any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())
    except (AttributeError, RuntimeError):
        return False


def _same_meta(a, b, depth=0):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and \
            a.dtype == b.dtype and a.device == b.device and a.layout == b.layout and \
            (a.layout != torch.strided or (a.stride() == b.stride() and a.storage_offset() == b.storage_offset()))
    if type(a) is not type(b) or depth > 4:
        return False
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_same_meta(x, y, depth + 1) for x, y in zip(a, b))
    return a is b or a == b


def item_same_meta(fn, args1, kwargs1, args2, kwargs2, device):
    """Whether fn gives results of the same metadata on the two sets of stand-ins for the numbers
    the graph computes (a size among them differs)."""
    try:
        r1 = run(fn, args1, kwargs1, device)
        r2 = run(fn, args2, kwargs2, device)
    except Exception:
        return False
    return _same_meta(r1[0], r2[0]) and r1[1] == r2[1]


def pure(fn):
    """Whether fn, given a tensor whose value the trace knows, leaves it as it was
    (csrc/trace/em_fold.c forgets the values it knows otherwise)."""
    return _pure_op(fn, False)


def fold(fn, args, kwargs, inplace):
    """fn on real values (tensors the trace knows, constants), as eager runs it, for a small
    tensor whose value the trace keeps (csrc/trace/em_fold.c). The result: a plain strided
    tensor of at most one element (for inplace, the first argument itself), or None where fn is
    not folded or raised (the graph raises it, or computes it, at run time)."""
    if not _pure_op(fn, inplace) or "out" in kwargs:
        return None
    try:
        with torch.no_grad():
            r = fn(*args, **kwargs)
    except Exception:
        return None
    if inplace:
        r = args[0]
    if type(r) is not torch.Tensor or r.layout != torch.strided or r.is_quantized or r.numel() > 1:
        return None
    return r


_FULL_KW = ("dtype", "device")


def fold_factory(real):
    """(torch.full, (size, value, dtype, device), keyword names) making a CPU tensor equal to
    `real` (a folded tensor of constants alone), or None where it would differ (grad, strides)."""
    if real.requires_grad or real.device.type != "cpu" or \
            real.stride() != torch.empty(real.shape, device=META).stride():
        return None
    return torch.full, (tuple(real.shape), real.item() if real.numel() else 0, real.dtype, real.device), _FULL_KW


def _swap_known(x, known, depth=0):
    if isinstance(x, torch.Tensor):
        return known.get(id(x), x)
    if depth > 4:
        return x
    if type(x) in (tuple, list):
        return type(x)(_swap_known(i, known, depth + 1) for i in x)
    if type(x) is torch.Size:
        return x
    if type(x) is slice:
        return slice(*(_swap_known(i, known, depth + 1) for i in (x.start, x.stop, x.step)))
    if type(x) is dict:
        return {k: _swap_known(v, known, depth + 1) for k, v in x.items()}
    return x


def run_known(fn, args, kwargs, device, known):
    """run() again after the meta run read the value of a tensor the trace knows (x.view(n, -1)
    for n = torch.div(x.size(1), 4, rounding_mode="trunc")): those tensors are their real
    values (known: id(meta tensor) -> real tensor), the others meta. Returns (result, device,
    as_numbers): as_numbers when the call gives the same result with those tensors as Python
    numbers, which the graph then records in their place (a backend sees x.view(3, 2, 4))."""
    a, k = _swap_known(args, known), _swap_known(kwargs, known)
    out = fn(*a, **k)
    numbers = {i: t.item() for i, t in known.items()}
    try:
        same = _meta_of(fn(*_swap_known(args, numbers), **_swap_known(kwargs, numbers))) == _meta_of(out)
    except Exception:
        same = False
    if type(out) is torch.Tensor and out.device.type != "meta" and not any(
            t.device.type == "meta" for t in _tensors((a, k))):
        # made of known values alone (torch.arange(k)): eager's device, the metadata as a meta tensor
        device = out.device
        out = torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device=META,
                                  requires_grad=out.requires_grad)
    if not _all_meta(out):
        raise NotImplementedError("creates tensor data while tracing")
    return out, device if device is not None else torch.device("cpu"), same


def _scalar_at(x, which, v, seen, depth=0):
    """x with its `which`-th 0-dim meta tensor (in order; seen counts them) a CPU one holding v."""
    if isinstance(x, torch.Tensor):
        if x.dim() == 0 and x.device.type == "meta":
            seen[0] += 1
            if seen[0] - 1 == which:
                return torch.full((), v, dtype=x.dtype)
        return x
    if type(x) in (list, tuple) and depth < 4:
        return type(x)(_scalar_at(i, which, v, seen, depth + 1) for i in x)
    if type(x) is dict and depth < 4:
        return {k: _scalar_at(i, which, v, seen, depth + 1) for k, i in x.items()}
    return x


def _meta_of(x):
    if isinstance(x, torch.Tensor):
        return (x.device.type, x.dtype, tuple(x.shape), x.stride())
    if isinstance(x, (list, tuple)):
        return tuple(_meta_of(i) for i in x)
    return x if isinstance(x, (int, float, bool, str, type(None))) else type(x)


def _run_scalar_values(fn, args, kwargs, err, device):
    """fn whose meta kernel reads the value of a 0-dim tensor argument as a Scalar
    (addcmul_(value=t), _foreach_pow(t, xs)): run with one such tensor at a time a CPU scalar, of
    two values; the result's metadata must not depend on the value (else the meta error stands:
    arange(t) cannot be inferred). A function that makes a CPU tensor of the values
    (torch.tensor([t, 2])): all of them CPU scalars, a result on the CPU, the operands on the CPU."""
    n = sum(1 for t in _tensors((args, kwargs)) if t.dim() == 0 and t.device.type == "meta")
    picks = [range(n)] if device is None or device.type == "cpu" else []
    picks += [(which,) for which in range(n)]
    for which in picks:
        outs = []
        for v in (1, 3):
            a, k = args, kwargs
            for w in reversed(which) if isinstance(which, range) else which:
                a, k = _scalar_at(a, w, v, [0]), _scalar_at(k, w, v, [0])
            try:
                outs.append(fn(*a, **k))
            except RuntimeError:
                break
        if len(outs) < 2 or _meta_of(outs[0]) != _meta_of(outs[1]):
            continue
        if _all_meta(outs[0]):
            return outs[0]
        o = outs[0]
        if isinstance(which, range) and type(o) is torch.Tensor and o.device.type == "cpu":
            return torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device=META, requires_grad=o.requires_grad)
    raise err


def _callable(qualname):
    module, _, name = qualname.rpartition(".")
    return getattr(sys.modules[module], name)


# the Python callable of each graph op that has one (csrc/ir/em_ops.def), keyed by op name
OP_FNS = {name: _callable(py) for name, py, _binary in _C.OPS if py is not None}


# ---------------------------------------------------------------------------------------------- autograd.Function

class InferenceCtx:
    """The ctx of a torch.autograd.Function whose forward ember traces because no input needs a
    gradient: nothing is saved for a backward that cannot run."""

    def __init__(self, n_inputs):
        self.needs_input_grad = (False,) * n_inputs
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        pass

    def save_for_forward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        self.materialize_grads = value


_FUNCTION_APPLY = torch.autograd.Function.__dict__["apply"]
_SETUP_CONTEXT = torch.autograd.Function.setup_context


def _apply_takes_keywords():
    """Whether this torch's apply takes keywords (2.14's C apply binds them to forward's
    parameters; 2.11's raises TypeError "apply() takes no keyword arguments", with or without
    setup_context)."""
    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k=1):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, None

    try:
        Probe.apply(torch.zeros(()), k=2)
    except TypeError:
        return False
    return True


_APPLY_TAKES_KEYWORDS = _apply_takes_keywords()


class TracedCtx:
    """The ctx of a torch.autograd.Function whose forward ember traces while an input needs a
    gradient: it keeps what forward saves and the attributes it sets, which replay_function
    hands to the backward at run time. What it does not model makes the call break."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._ember_saved = ()
        self._ember_nondiff = ()
        self._ember_materialize = True

    def save_for_backward(self, *tensors):
        self._ember_saved = tensors

    def save_for_forward(self, *tensors):
        not_modelled()

    def mark_dirty(self, *tensors):
        not_modelled()

    def mark_non_differentiable(self, *tensors):
        self._ember_nondiff = self._ember_nondiff + tensors

    def set_materialize_grads(self, value):
        self._ember_materialize = bool(value)


def not_modelled():
    """Called by traced helpers where the real call must run instead (the call breaks)."""
    raise RuntimeError("ember: not modelled")


class _ReplayState:
    def __init__(self, cls, saved, attrs, outs, nondiff=(), materialize=True):
        self.cls, self.saved, self.attrs, self.outs = cls, saved, attrs, outs
        self.nondiff, self.materialize = nondiff, materialize


class _BackwardCtx:
    pass


class _Replay(torch.autograd.Function):
    """Connects the outputs of a custom Function's forward (computed by the graph, without
    autograd history) to its inputs through its own backward."""

    @staticmethod
    def forward(ctx, state, *args):
        ctx.state = state
        ctx.not_tensor = tuple(i for i, a in enumerate(args) if not isinstance(a, torch.Tensor))
        ctx.save_for_backward(*state.saved)
        ctx.mark_non_differentiable(*[state.outs[i] for i in state.nondiff])
        ctx.set_materialize_grads(state.materialize)
        return state.outs

    @staticmethod
    def backward(ctx, *grads):
        st, user = ctx.state, _BackwardCtx()
        for k, v in st.attrs:
            setattr(user, k, v)
        user.saved_tensors = ctx.saved_tensors
        user.needs_input_grad = ctx.needs_input_grad[1:]
        user.materialize_grads = st.materialize
        res = st.cls.backward(user, *grads)
        res = tuple(res) if isinstance(res, tuple) else (res,)
        for i in ctx.not_tensor:  # as eager's node for the Function's own inputs
            if i < len(res) and res[i] is not None:
                raise RuntimeError(f"function {st.cls.__name__}Backward returned a gradient different than None at "
                                   f"position {i + 1}, but the corresponding forward input was not a Variable")
        return (None,) + res


def replay_function(cls, saved, attrs, args, out, consts=(), nondiff=(), materialize=True):
    """Graph call: the tensor outputs `out` of cls.forward (traced) given cls's backward:
    cls.apply's tensor outputs for the same values. consts: (position, value) of forward's
    outputs that are not tensors (handed to backward's count of gradients as eager's are);
    nondiff: positions of the outputs forward marked non-differentiable; materialize: its
    set_materialize_grads."""
    single = isinstance(out, torch.Tensor) and not consts
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    for i, v in consts:
        outs.insert(i, v)
    r = _Replay.apply(_ReplayState(cls, saved, attrs, tuple(outs), nondiff, materialize), *args)
    if single:
        return r[0]
    at = {i for i, _ in consts}
    return tuple(v for i, v in enumerate(r) if i not in at)


def _traced_apply(cls, args):
    """cls.apply(*args) with an input needing a gradient: forward traced under no_grad with a
    TracedCtx, its outputs tied to cls.backward by a replay_function graph call."""
    ctx = TracedCtx(tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args))
    with torch.no_grad():
        if cls.setup_context is not _SETUP_CONTEXT:  # forward(*args) with a separate setup_context
            out = cls.forward(*args)
            cls.setup_context(ctx, args, out)
        else:
            out = cls.forward(ctx, *args)
    outs = (out,) if isinstance(out, torch.Tensor) else out
    if not isinstance(outs, tuple) or not any(isinstance(o, torch.Tensor) for o in outs):
        not_modelled()  # no tensor output
    if any(o is a for o in outs for a in args):  # an input returned as is: eager's output is a view of it
        with torch.no_grad():
            outs = tuple(o.view_as(o) if any(o is a for a in args) else o for o in outs)
        out = outs[0] if isinstance(out, torch.Tensor) else outs
    consts = tuple((i, o) for i, o in enumerate(outs) if not isinstance(o, torch.Tensor))
    tensors = tuple(o for o in outs if isinstance(o, torch.Tensor))
    nondiff = tuple(i for i, o in enumerate(outs) if any(o is t for t in ctx._ember_nondiff))
    attrs = tuple((k, v) for k, v in ctx.__dict__.items() if not k.startswith("_ember_") and k != "needs_input_grad")
    # the node's inputs are its tensor arguments; any other (a user object, a module: no graph
    # constant) only counts as a position whose gradient is None
    args = tuple(a if isinstance(a, torch.Tensor) else None for a in args)
    if not consts:
        return replay_function(cls, ctx._ember_saved, attrs, args, out, (), nondiff, ctx._ember_materialize)
    r = replay_function(cls, ctx._ember_saved, attrs, args, tensors, consts, nondiff, ctx._ember_materialize)
    r = list(r)
    for i, v in consts:
        r.insert(i, v)
    return tuple(r)


_set(GRAPH, [replay_function])
_set(ABORT, [not_modelled])


def function_apply(cls, *args, **kwargs):
    """What the tracer calls for `cls.apply(*args)` (cls a torch.autograd.Function): its forward,
    traced, when no tensor argument needs a gradient (the output then has no autograd history in
    eager either); with one that does, the forward traced and its outputs tied to its backward
    (_traced_apply); a Function of forms not modelled: the real apply, which the tracer cannot
    enter (the call breaks). Run for real (`cls.apply` passed on to real code: torch.vmap's
    function), it is the real apply (vmap rules, functorch transforms)."""
    if not torch.compiler.is_compiling():
        return _FUNCTION_APPLY.__get__(None, cls)(*args, **kwargs)
    if torch._C._are_functorch_transforms_active():  # inside a traced vmap: its vmap rule applies
        return real_apply(cls, args, kwargs)
    if kwargs or cls.setup_context is not _SETUP_CONTEXT:  # the arguments forward is given
        plan = apply_args_plan(cls, len(args), tuple(kwargs))
        if plan is None:
            return _FUNCTION_APPLY.__get__(None, cls)(*args, **kwargs)
        args, kwargs = tuple(args[v] if k == 0 else kwargs[v] if k == 1 else v for k, v in plan), {}
    if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return _traced_apply(cls, args)
    if torch.is_grad_enabled():
        with torch.no_grad():  # as apply runs forward
            return _inference_apply(cls, args, kwargs)
    return _inference_apply(cls, args, kwargs)


def apply_args_plan(cls, nargs, names):
    """How apply(*args, **kwargs) (nargs positional, keywords `names`) passes its arguments to
    forward, as torch's apply does, each an input of the node: each keyword put at its
    parameter's position in forward's own code (its __signature__ and __wrapped__ ignored); with
    setup_context (forward(*args)) the parameters not given are their defaults; keywords only
    where this torch's apply takes them. Per position:
    (0, i) args[i], (1, name) kwargs[name] or (2, default); None where apply raises (a keyword
    naming no positional parameter past the arguments, a parameter left out) or a default is not
    a plain constant. Evaluated on constants while tracing."""
    fwd = cls.forward
    if not isinstance(fwd, types.FunctionType):
        return None
    code = fwd.__code__
    old = cls.setup_context is _SETUP_CONTEXT  # forward(ctx, *args)
    params = code.co_varnames[int(old):code.co_argcount]
    at = {p: i for i, p in enumerate(params)}
    varargs = bool(code.co_flags & inspect.CO_VARARGS)  # forward(x, *rest): the extra positionals
    if (nargs > len(params) and not varargs) or any(n not in at or at[n] < nargs for n in names):
        return None
    if names and not _APPLY_TAKES_KEYWORDS:
        return None
    if nargs > len(params):
        return None if names else tuple((0, i) for i in range(nargs))
    by_pos = {at[n]: n for n in names}
    defaults = fwd.__defaults__ or ()
    first_default = code.co_argcount - len(defaults)  # in the code's numbering (ctx included)
    last = len(params) - 1 if not old else max(by_pos, default=nargs - 1)
    plan = []
    for i in range(last + 1):
        if i < nargs:
            plan.append((0, i))
        elif i in by_pos:
            plan.append((1, by_pos[i]))
        elif not old and i + int(old) >= first_default and \
                type(defaults[i + int(old) - first_default]) in (type(None), bool, int, float, str):
            plan.append((2, defaults[i + int(old) - first_default]))
        else:
            return None
    return tuple(plan)


_set(CONST, [apply_args_plan])


def real_apply(cls, args, kwargs):
    """cls.apply(*args, **kwargs) itself, which the trace does not enter (the call breaks)."""
    return _FUNCTION_APPLY.__get__(None, cls)(*args, **kwargs)


_set(ABORT, [real_apply])
_set(CONST, [torch._C._are_functorch_transforms_active])  # the state a graph's guards fix (vmap levels)


def _inference_apply(cls, args, kwargs):
    ctx = InferenceCtx(len(args))
    if cls.setup_context is not _SETUP_CONTEXT:  # forward(*args) with a separate setup_context
        out = cls.forward(*args, **kwargs)
        cls.setup_context(ctx, args, out)
    else:
        out = cls.forward(ctx, *args, **kwargs)
    return _not_inputs(out, args)


def _not_inputs(out, args):
    """apply's outputs where forward returned an input as is: a view of it, or (an input that
    requires grad, with grad mode off) a detached alias; never the input itself."""
    def fresh(o):
        if not isinstance(o, torch.Tensor) or not any(o is a for a in args):
            return o
        return o.detach() if o.requires_grad else o.view_as(o)
    return tuple(fresh(o) for o in out) if type(out) is tuple else fresh(out)
