"""Helpers for tests: compile counters and cache inspection."""
from . import _C


def counters():
    """{'frames', 'aborts', 'hits', 'recompiles', 'fallbacks'}: counts since the last reset_counters()."""
    return _C.counters()


def reset_counters():
    _C.reset_counters()


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
