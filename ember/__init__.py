"""ember: a just-in-time compiler for PyTorch programs with its core in C.

    model = ember.compile(model)      # or @ember.compile on a function

ember intercepts calls through its own PEP 523 frame hook, walks the bytecode with a symbolic
interpreter written in C, records tensor operations into a graph, guards the assumptions it
made and caches the result on the code object. See README.md for what works today.
"""
import functools
import operator
import os
import sys

if sys.version_info[:2] not in ((3, 11), (3, 12)):
    raise ImportError(f"ember captures on CPython 3.11 and 3.12; this is Python {sys.version.split()[0]}. "
                      "Use a 3.11 or 3.12 interpreter, or torch.compile on this one.")

import torch  # noqa: E402

from . import _C, _logging, _rules  # noqa: E402
DataDependentError = _rules.DataDependentError
DataDependentError.__module__ = "ember"
from ._config import config
from ._explain import BreakReason, ExplainOutput, explain
from .backends import BackendCompilerFailed, list_backends, resolve as _resolve_backend

__all__ = ["compile", "disable", "reset", "explain", "config", "list_backends", "Unsupported", "DataDependentError", "ConstraintViolation", "EmberWarning",
           "BackendCompilerFailed", "mark_dynamic", "mark_static", "maybe_mark_dynamic"]

Unsupported = _C.Unsupported
Unsupported.__module__ = "ember"
ConstraintViolation = _C.ConstraintViolation
ConstraintViolation.__module__ = "ember"


class EmberWarning(UserWarning):
    """ember could not capture some code and runs it as plain Python."""


def _push_config():
    bits = 0
    for name, bit in (("graph", _C.LOG_GRAPH), ("guards", _C.LOG_GUARDS), ("recompiles", _C.LOG_RECOMPILES),
                      ("breaks", _C.LOG_BREAKS), ("bytecode", _C.LOG_BYTECODE),
                      ("dynamic", _C.LOG_DYNAMIC)):
        if name in _logging.enabled:
            bits |= bit
    _C._set_config(config.cache_size_limit, bool(config.strict), bits, config.accumulated_recompile_limit)


def _setup():
    fast = _C._setup(
        rules=_rules.RULES, helper=_rules, warn=_logging.warn, log=_logging.log,
        skip_file=_rules.skip_file, pure_types=_rules.PURE_TYPES, nn_module=torch.nn.Module,
        op_fns=_rules.OP_FNS, grad=torch._C.is_grad_enabled, autocast=_autocast_code,
        default_dtype=torch.get_default_dtype, force_fallback=config.force_python_tensor_guards)
    _push_config()
    return fast


def _autocast_code(device_type):
    """What guards compare for autocast on a device type: 0 when off, else 1 + the number of
    the dtype it casts to (a graph traced under bfloat16 autocast is not one for float16)."""
    if not torch.is_autocast_enabled(device_type):
        return 0
    return 1 + _rules.dtype_num(torch.get_autocast_dtype(device_type))


def _setup_global_state_reads():
    """Direct reads of grad mode, autocast and default dtype from c10 (no Python call per
    guard check), switched on only if they agree with torch's functions in every state we
    can set here; otherwise guards call torch's Python functions."""
    import os
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    if config.force_python_tensor_guards:
        return False
    if not _C._gs_resolve(os.path.join(lib, "libc10.so"), os.path.join(lib, "libtorch_cpu.so")):
        return False

    def py():
        return (int(torch.is_grad_enabled()), _autocast_code("cpu"), _autocast_code("cuda"),
                _rules.dtype_num(torch.get_default_dtype()))

    def agree():
        return tuple(_C._gs_read(True)) == py()

    ok = agree()
    old_dtype = torch.get_default_dtype()
    try:
        with torch.no_grad():
            ok = ok and agree()
        with torch.autocast("cpu"):
            ok = ok and agree()
        with torch.autocast("cpu", dtype=torch.float16):
            ok = ok and agree()
        torch.set_default_dtype(torch.float64)
        ok = ok and agree()
    except Exception:
        ok = False
    finally:
        torch.set_default_dtype(old_dtype)
    ok = ok and agree()
    return bool(_C._gs_use_direct(ok))


tensor_guards_fast = _setup()
if hasattr(os, "register_at_fork"):  # a compile lock another thread held at fork is renewed
    os.register_at_fork(after_in_child=_C._after_fork_child)
global_state_guards_fast = _setup_global_state_reads()


def set_logs(spec):
    """Same as EMBER_LOGS: a comma-separated list of graph, guards, recompiles (or '')."""
    _logging.enabled = _logging.parse(spec)
    _push_config()


class CompiledModule(torch.nn.Module):
    """What ember.compile returns for an nn.Module: calls go through the compiled forward;
    attributes, parameters, state_dict, train()/eval() and the container protocols (len, iter,
    [], in, bool, +, ...) are the original module's. Equality and hashing are the original
    module's too (a CompiledModule equals the module it wraps). copy.deepcopy, pickle and
    torch.save give a CompiledModule of the copied module, compiled with the same arguments."""

    def __init__(self, mod, call, compile_kwargs=None):
        torch.nn.Module.__init__(self)
        object.__setattr__(self, "_orig_mod", mod)  # not a submodule: state_dict keys stay the same
        object.__setattr__(self, "_ember_call", call)
        object.__setattr__(self, "_ember_kwargs", dict(compile_kwargs or {}))

    training = property(lambda self: self._orig_mod.training,
                        lambda self, v: self.__dict__.get("_orig_mod") is not None
                        and setattr(self._orig_mod, "training", v))

    def forward(self, *args, **kwargs):
        return self._ember_call(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._ember_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            mod = self.__dict__["_orig_mod"]
        except KeyError:
            raise AttributeError(name) from None
        return getattr(mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(object.__dir__(self)))

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"

    def __reduce__(self):
        # a copy is compiled again from the copied module (compiled code is not copied)
        return (_compiled_module, (self._orig_mod, self._ember_kwargs))

    def _self_or_result(self, r):
        return self if r is self._orig_mod else r


def _compiled_module(mod, kwargs):
    """Unpickles (and deep-copies) a CompiledModule: compiles the copied module again."""
    return compile(mod, **kwargs)


def _unwrap(x):
    return x._orig_mod if type(x) is CompiledModule else x


def _forward(name):
    def method(self, *args, **kwargs):
        return self._self_or_result(getattr(self._orig_mod, name)(*args, **kwargs))
    method.__name__ = name
    return method


for _name in ("state_dict", "load_state_dict", "parameters", "named_parameters", "buffers", "named_buffers",
              "children", "named_children", "modules", "named_modules", "train", "eval", "to", "cuda", "cpu",
              "float", "double", "half", "bfloat16", "zero_grad", "requires_grad_", "apply", "get_submodule",
              "get_parameter", "get_buffer", "register_buffer", "register_parameter", "add_module",
              "register_forward_hook", "register_forward_pre_hook", "extra_repr"):
    setattr(CompiledModule, _name, _forward(_name))


# Python looks these up on the type, so __getattr__ does not forward them: each applies the
# operator to the original module (CompiledModule operands unwrapped), giving its answer or its
# error (len() of a module without __len__ raises TypeError; bool() of one without __len__ or
# __bool__ is True). An in-place operator that returns the original module returns self.
def _protocol(name, op, reflected=False, inplace=False):
    if inplace:
        def method(self, *args):
            return self._self_or_result(op(self._orig_mod, *map(_unwrap, args)))
    elif reflected:
        def method(self, other):
            return op(_unwrap(other), self._orig_mod)
    else:
        def method(self, *args):
            return op(self._orig_mod, *map(_unwrap, args))
    method.__name__ = name
    return method


def _contains(a, b):
    return b in a


for _name, _op in (("__len__", len), ("__iter__", iter), ("__reversed__", reversed), ("__bool__", bool),
                   ("__contains__", _contains), ("__getitem__", operator.getitem),
                   ("__setitem__", operator.setitem), ("__delitem__", operator.delitem),
                   ("__eq__", operator.eq), ("__ne__", operator.ne), ("__hash__", hash),
                   ("__lt__", operator.lt), ("__le__", operator.le), ("__gt__", operator.gt),
                   ("__ge__", operator.ge), ("__neg__", operator.neg), ("__pos__", operator.pos),
                   ("__invert__", operator.invert), ("__abs__", abs)):
    setattr(CompiledModule, _name, _protocol(_name, _op))
for _n in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift",
           "rshift"):
    _op = getattr(operator, _n + "_" if _n in ("and", "or") else _n)
    setattr(CompiledModule, f"__{_n}__", _protocol(f"__{_n}__", _op))
    setattr(CompiledModule, f"__r{_n}__", _protocol(f"__r{_n}__", _op, reflected=True))
    setattr(CompiledModule, f"__i{_n}__", _protocol(f"__i{_n}__", getattr(operator, f"i{_n}"), inplace=True))


def compile(fn_or_module=None, *, backend="eager", fullgraph=False, dynamic=None, mode=None, options=None,
            inplace=False):
    """Compile a function or nn.Module with ember. Usable as a call or a decorator:

        model = ember.compile(model)
        ember.compile(model, inplace=True)     # model itself runs compiled, self(...) included
        @ember.compile(fullgraph=True)
        def f(x): ...

    backend: "eager" (ember's C executor, the default), "inductor", "aot_eager", any name
    TorchDynamo's registry knows (ember.list_backends()), or a callable
    backend(gm: torch.fx.GraphModule, example_inputs) -> callable, as torch.compile takes;
    a Python backend compiles each captured graph at its first call. mode (one of torch's
    Inductor modes: "default", "reduce-overhead", "max-autotune", ...) and options (a dict of
    Inductor settings) are passed on as torch.compile does; a backend that cannot honour them
    raises ValueError. fullgraph: raise ember.Unsupported instead of running code ember cannot
    capture as plain Python. dynamic (the `eager` backend; graphs for Python backends keep their
    traced sizes for now): None (default) specializes every size at the first compile and makes a
    dimension whose size changed symbolic at the next one (automatic dynamic, as TorchDynamo
    does); True makes every dimension of every input tensor (parameters excepted) and every int
    argument symbolic from the first compile; False never does (mark_dynamic still does). A size
    traced as 0 or 1 is specialized; a symbolic one also takes size 1 unless the trace treated 1
    apart (a branch on it, squeeze), and never 0.
    inplace: for an nn.Module, compile the module itself, as nn.Module.compile() does (its
    calls run compiled, including self(...) from its own methods such as generate()), and
    return it; without it, a CompiledModule wrapper is returned and the module is unchanged.
    With EMBER_DISABLE=1 in the environment, the arguments are checked and fn_or_module is
    returned unchanged.
    """
    if not (dynamic is None or dynamic is True or dynamic is False):
        raise ValueError(f"ember.compile: dynamic must be None, True or False, got {dynamic!r}")
    if not isinstance(fullgraph, bool):
        raise ValueError("ember.compile: fullgraph must be True or False")
    if not isinstance(inplace, bool):
        raise ValueError("ember.compile: inplace must be True or False")
    be = _resolve_backend(backend, mode=mode, options=options, dynamic=dynamic)
    kwargs = dict(backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options)
    if fn_or_module is None:
        return functools.partial(compile, inplace=inplace, **kwargs)
    if not callable(fn_or_module):
        raise TypeError(f"ember.compile expects a function or torch.nn.Module, got {type(fn_or_module).__name__}")
    if inplace and not isinstance(fn_or_module, torch.nn.Module):
        raise TypeError(f"ember.compile(..., inplace=True) compiles an nn.Module in place; got "
                        f"{type(fn_or_module).__name__} (for a function: fn = ember.compile(fn))")
    if _disabled():
        return fn_or_module
    flags = _C.FLAG_ENABLED | (_C.FLAG_FULLGRAPH if fullgraph else 0) | (be.index << _C.FLAG_BACKEND_SHIFT)
    flags |= _C.FLAG_DYN_ALL if dynamic is True else _C.FLAG_DYN_STATIC if dynamic is False else 0
    flags |= _C.FLAG_ITERATION if be.cudagraphs else 0
    if inplace:
        mod = _unwrap(fn_or_module)
        _force(getattr(type(mod), "forward", None))
        # nn.Module._wrapped_call_impl calls _compiled_call_impl instead of _call_impl when set
        # (nn.Module.compile sets it too); hooks run as plain Python around the compiled forward
        mod._compiled_call_impl = _C.CompiledFunction(mod._call_impl, flags)
        return fn_or_module
    if isinstance(fn_or_module, CompiledModule):
        fn_or_module = fn_or_module._orig_mod
    if isinstance(fn_or_module, torch.nn.Module):
        _force(getattr(type(fn_or_module), "forward", None))
        return CompiledModule(fn_or_module, _C.CompiledFunction(fn_or_module, flags), kwargs)
    _force(fn_or_module)
    wrapped = _C.CompiledFunction(getattr(fn_or_module, "__wrapped__", None)
                                  if isinstance(fn_or_module, _C.CompiledFunction) else fn_or_module, flags)
    try:
        functools.update_wrapper(wrapped, fn_or_module)
    except (AttributeError, TypeError):
        pass
    return wrapped


_disable_said = False


def _disabled():
    """True when EMBER_DISABLE is set to 1/true/yes/on (read at each ember.compile); says so on
    stderr once per process."""
    global _disable_said
    if os.environ.get("EMBER_DISABLE", "").strip().lower() not in ("1", "true", "yes", "on"):
        return False
    if not _disable_said:
        _disable_said = True
        _logging.log("disable", "EMBER_DISABLE is set: ember.compile returns functions and modules unchanged "
                                "(nothing is compiled)")
    return True


def _force(fn):
    """The code the user compiled is compiled even where ember skips the file (a torch
    module's forward, a function in the standard library)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        _C.forced_codes.add(code)


def disable(fn=None):
    """Never compile fn: it (and everything it calls) runs as plain Python, even when called
    from compiled code. Usable as a decorator."""
    if fn is None:
        return disable
    if not callable(fn):
        raise TypeError(f"ember.disable expects a callable, got {type(fn).__name__}")
    wrapped = _C.CompiledFunction(fn, 0)
    try:
        functools.update_wrapper(wrapped, fn)
    except (AttributeError, TypeError):
        pass
    return wrapped


def reset():
    """Drop every compiled entry of every function (the next calls compile again), the cache of
    meta results the tracer keeps, and the memory of the warnings already given."""
    _C.reset()
    _rules._MEMO.clear()
    _logging._warned.clear()


# ---- dynamic shapes: the marks are torch's own (torch._dynamo.mark_dynamic sets the same
# attributes), so a tensor marked for either compiler is marked for both ----

try:  # torch's record of mark_dynamic's bounds, so that torch.compile reads ember's marks too
    from torch._dynamo.decorators import _DimRange
except ImportError:  # pragma: no cover - a torch without it
    import collections
    _DimRange = collections.namedtuple("_DimRange", "dim min max")


def _dims(t, index, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"ember.{what} expects a tensor, got {type(t).__name__}")
    dims = [index] if isinstance(index, int) else list(index)
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or not -t.dim() <= d < max(t.dim(), 1):
            raise IndexError(f"ember.{what}: dimension {d!r} is out of range for a tensor of {t.dim()} dimensions")
    return [d % t.dim() for d in dims]


def mark_dynamic(t, index, min=None, max=None):
    """Makes dimension(s) `index` of tensor t symbolic whenever t is a compiled frame's input
    (torch._dynamo.mark_dynamic, whose marks ember honours too). A size traced as 0 or 1 stays
    specialized.
    min/max: the sizes the dimension may take, guarded as torch guards them: t's size outside them
    raises ember.ConstraintViolation (a ValueError), as does a compile of a torch-marked tensor whose
    size is outside them; a later call with a size outside them fails the guard and recompiles."""
    for bound in (min, max):
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
            raise TypeError(f"ember.mark_dynamic: min and max must be ints, got {type(bound).__name__}")
    for d in _dims(t, index, "mark_dynamic"):
        if min is not None or max is not None:
            lo, hi = (min if min is not None else 0), (max if max is not None else sys.maxsize)
            if not lo <= t.size(d) <= hi:
                raise ConstraintViolation(f"ember.mark_dynamic: size {t.size(d)} of dimension {d} is outside "
                                 f"[{lo}, {hi}]")
        attrs = getattr(t, "__dict__")
        attrs.setdefault("_dynamo_dynamic_indices", set()).add(d)
        attrs.setdefault("_dynamo_dynamic_range", set()).add(_DimRange(d, min, max))


def maybe_mark_dynamic(t, index):
    """Like mark_dynamic, as a hint: the dimension is symbolic unless the trace pins it."""
    for d in _dims(t, index, "maybe_mark_dynamic"):
        getattr(t, "__dict__").setdefault("_dynamo_weak_dynamic_indices", set()).add(d)


def mark_static(t, index=None):
    """Keeps dimension(s) `index` (all when None) of tensor t specialized, whatever `dynamic` says."""
    dims = range(t.dim()) if index is None else _dims(t, index, "mark_static")
    getattr(t, "__dict__").setdefault("_dynamo_static_indices", set()).update(dims)
