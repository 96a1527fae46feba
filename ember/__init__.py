"""ember: a just-in-time compiler for PyTorch programs with its core in C.

    model = ember.compile(model)      # or @ember.compile on a function

ember intercepts calls through its own PEP 523 frame hook, walks the bytecode with a symbolic
interpreter written in C, records tensor operations into a graph, guards the assumptions it
made and caches the result on the code object. See README.md for what works today.
"""
import functools
import os
import sys

import torch

from . import _C, _logging, _rules
from ._config import config
from ._explain import BreakReason, ExplainOutput, explain
from .backends import BackendCompilerFailed, list_backends, resolve as _resolve_backend

__all__ = ["compile", "disable", "reset", "explain", "config", "list_backends", "Unsupported", "EmberWarning",
           "BackendCompilerFailed"]

Unsupported = _C.Unsupported
Unsupported.__module__ = "ember"


class EmberWarning(UserWarning):
    """ember could not capture some code and runs it as plain Python."""


def _push_config():
    bits = 0
    for name, bit in (("graph", _C.LOG_GRAPH), ("guards", _C.LOG_GUARDS), ("recompiles", _C.LOG_RECOMPILES),
                      ("breaks", _C.LOG_BREAKS), ("bytecode", _C.LOG_BYTECODE)):
        if name in _logging.enabled:
            bits |= bit
    _C._set_config(config.cache_size_limit, bool(config.strict), bits, config.accumulated_recompile_limit)


def _setup():
    fast = _C._setup(
        rules=_rules.RULES, helper=_rules, warn=_logging.warn, log=_logging.log,
        skip_file=_rules.skip_file, pure_types=_rules.PURE_TYPES, nn_module=torch.nn.Module,
        op_fns=_rules.OP_FNS, grad=torch._C.is_grad_enabled, autocast=torch._C.is_autocast_enabled,
        default_dtype=torch.get_default_dtype, force_fallback=config.force_python_tensor_guards)
    _push_config()
    return fast


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
        return (int(torch.is_grad_enabled()), int(torch.is_autocast_enabled("cpu")),
                int(torch.is_autocast_enabled("cuda")), _rules.dtype_num(torch.get_default_dtype()))

    def agree():
        return tuple(_C._gs_read(True)) == py()

    ok = agree()
    old_dtype = torch.get_default_dtype()
    try:
        with torch.no_grad():
            ok = ok and agree()
        with torch.autocast("cpu"):
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
    attributes, parameters, state_dict and train()/eval() are the original module's."""

    def __init__(self, mod, call):
        torch.nn.Module.__init__(self)
        object.__setattr__(self, "_orig_mod", mod)  # not a submodule: state_dict keys stay the same
        object.__setattr__(self, "_ember_call", call)

    training = property(lambda self: self._orig_mod.training,
                        lambda self, v: self.__dict__.get("_orig_mod") is not None
                        and setattr(self._orig_mod, "training", v))

    def forward(self, *args, **kwargs):
        return self._ember_call(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self._ember_call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(object.__dir__(self)))

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"

    def _self_or_result(self, r):
        return self if r is self._orig_mod else r


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


def compile(fn_or_module=None, *, backend="eager", fullgraph=False, dynamic=None, mode=None, options=None):
    """Compile a function or nn.Module with ember. Usable as a call or a decorator:

        model = ember.compile(model)
        @ember.compile(fullgraph=True)
        def f(x): ...

    backend: "eager" (ember's C executor, the default), "inductor", "aot_eager", any name
    TorchDynamo's registry knows (ember.list_backends()), or a callable
    backend(gm: torch.fx.GraphModule, example_inputs) -> callable, as torch.compile takes;
    a Python backend compiles each captured graph at its first call. mode ("default",
    "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs") and options (a dict of
    Inductor settings) are passed on as torch.compile does; a backend that cannot honour them
    raises ValueError. fullgraph: raise ember.Unsupported instead of running code ember cannot
    capture as plain Python. dynamic: None/False (shapes are specialized; True raises).
    """
    if dynamic not in (None, False):
        raise ValueError("ember.compile: dynamic=True is not supported yet (shapes are specialized; "
                         "use dynamic=None or False)")
    if not isinstance(fullgraph, bool):
        raise ValueError("ember.compile: fullgraph must be True or False")
    be = _resolve_backend(backend, mode=mode, options=options, dynamic=dynamic)
    if fn_or_module is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options)
    if not callable(fn_or_module):
        raise TypeError(f"ember.compile expects a function or torch.nn.Module, got {type(fn_or_module).__name__}")
    if not _C.CAPTURE_SUPPORTED:
        raise RuntimeError(
            f"ember: capture on Python {sys.version_info[0]}.{sys.version_info[1]} is not supported yet "
            "(CPython 3.11 is); run on Python 3.11, or use torch.compile on this interpreter")
    flags = _C.FLAG_ENABLED | (_C.FLAG_FULLGRAPH if fullgraph else 0) | (be.index << _C.FLAG_BACKEND_SHIFT)
    if isinstance(fn_or_module, CompiledModule):
        fn_or_module = fn_or_module._orig_mod
    if isinstance(fn_or_module, torch.nn.Module):
        _force(getattr(type(fn_or_module), "forward", None))
        return CompiledModule(fn_or_module, _C.CompiledFunction(fn_or_module, flags))
    _force(fn_or_module)
    wrapped = _C.CompiledFunction(getattr(fn_or_module, "__wrapped__", None)
                                  if isinstance(fn_or_module, _C.CompiledFunction) else fn_or_module, flags)
    try:
        functools.update_wrapper(wrapped, fn_or_module)
    except (AttributeError, TypeError):
        pass
    return wrapped


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
    """Drop every compiled entry of every function (the next calls compile again) and the cache of
    meta results the tracer keeps."""
    _C.reset()
    _rules._MEMO.clear()
