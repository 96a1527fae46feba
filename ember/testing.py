"""Helpers for tests: compile counters, cache inspection and the trace-only entry point."""
import inspect
import types

import torch

from . import _C, _rules


def counters():
    """{'frames', 'graphs', 'aborts', 'hits', 'recompiles', 'fallbacks', ..., 'backend_compiles'}: counts
    since the last reset_counters(); graphs: compiled frames whose graph has an op (TorchDynamo's
    frame_count: it compiles no empty graph); backend_compiles: graphs a Python backend compiled (a
    graph with symbolic sizes may have several variants, ember/backends/fx.py); reruns: calls
    whose graph raised and that ran again as plain Python (a graph changing nothing outside
    itself; the side effects before the failing op are then eager's)."""
    from .backends import fx
    c = _C.counters()
    # an internal error exporting a graph to torch.fx (it ran on ember's executor) counts too
    return {**c, "internal": c["internal"] + fx.COUNTS["export_internal"], "backend_compiles": fx.COUNTS["compiles"]}


def reset_counters():
    from .backends import fx
    _C.reset_counters()
    fx.COUNTS["compiles"] = fx.COUNTS["export_internal"] = 0


def entries(fn):
    """Cache entries of a function (or compiled wrapper): list of dicts with graph and guards text."""
    code = _code_of(fn)
    return _C.entries(code)


def code_state(fn):
    return _C.code_state(_code_of(fn))


def _code_of(fn):
    fn = getattr(fn, "__wrapped__", fn)
    if hasattr(fn, "forward") and not hasattr(fn, "__code__"):
        fn = type(fn).forward
    fn = getattr(fn, "__func__", fn)
    return fn.__code__


def trace(fn, *args, **kwargs):
    """Traces fn for a call with these arguments, and stops there: nothing is compiled, cached or
    installed. Returns a dict: "graph", "guards" and "out" (the graph, the guard program and the
    output tree, as deterministic text) with "abort" and "abort_kind" None when the trace
    completes; when it aborts, "abort" ("file:line: reason") and "abort_kind" (the reason's row
    in csrc/trace/em_aborts.def) with the dumps None. fn: a function, a bound method, an
    nn.Module (its forward) or a compiled callable (what it wraps)."""
    fn = getattr(fn, "__wrapped__", fn)
    if isinstance(fn, torch.nn.Module):
        fn = fn.forward
    if isinstance(fn, types.MethodType):
        fn, args = fn.__func__, (fn.__self__,) + args
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"ember.testing.trace: expected a Python function, got {type(fn).__name__}")
    bound = inspect.Signature.from_callable(fn, follow_wrapped=False).bind(*args, **kwargs)
    bound.apply_defaults()
    co = fn.__code__
    nslots = co.co_argcount + co.co_kwonlyargcount + bool(co.co_flags & inspect.CO_VARARGS) + \
        bool(co.co_flags & inspect.CO_VARKEYWORDS)
    slots = tuple(bound.arguments[name] for name in co.co_varnames[:nslots])
    _rules.warnings_off()  # as while compiling: warnings of the trace's own work are ember's
    try:
        return _C._trace(fn, slots)
    finally:
        _rules.warnings_on()
