"""NumPy code on tensors, traced through torch._numpy (csrc/trace/em_sym_np.c).

`x.numpy()` in a trace is an ndarray sym over x's graph value; numpy functions, ndarray methods,
attributes and operators on such values become graph calls of `NpCall` wrappers: functions of
tensors that hand their tensor arguments to torch._numpy as arrays and give tnp arrays back as
tensors. Where an ndarray leaves the trace it is made a numpy array again (`to_numpy`).
"""

import operator

import torch

try:
    import numpy as np
    import torch._numpy as tnp
except ImportError:  # pragma: no cover - numpy ships with torch's test dependencies
    np = tnp = None

# numpy functions that write into an argument: their wrappers' names end in "_", as in-place
# torch ops do (em_graph_mutated reads the name)
_WRITES = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"})
_INPLACE_OPS = frozenset({operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                          operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
                          operator.ilshift, operator.irshift, operator.imatmul})


def _to_tnp(v, depth=0):
    if isinstance(v, torch.Tensor):
        return tnp.ndarray(v)
    if depth < 8 and type(v) in (tuple, list):
        return type(v)(_to_tnp(x, depth + 1) for x in v)
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name  # torch._numpy takes dtypes by name
    return v


def _to_torch(v, depth=0):
    if isinstance(v, tnp.ndarray):
        return v.tensor
    if depth < 8 and type(v) in (tuple, list):
        return type(v)(_to_torch(x, depth + 1) for x in v)
    if isinstance(v, tnp.DType):
        return np.dtype(v.name)
    return v


class NpCall:
    """fn over torch._numpy arrays as a function of tensors: tensor arguments (in tuples and
    lists too) are given as arrays, array results are given back as their tensors. In the
    graph, a call node's callable; its __name__ ends in "_" when it writes into an argument."""

    def __init__(self, fn, name, np_fn):
        self.fn = fn
        self.np_fn = np_fn  # the same on numpy arrays (probe)
        self.__name__ = self.__qualname__ = name
        self.__module__ = __name__

    def __call__(self, *args, device=None, **kwargs):
        # device: where arrays made of constants go (ember's meta run asks for "meta")
        if device is not None:
            with torch.device(device):
                return self(*args, **kwargs)
        return _to_torch(self.fn(*_to_tnp(args), **{k: _to_tnp(v) for k, v in kwargs.items()}))

    def __repr__(self):
        return f"ember._np.{self.__name__}"


_WRAPPERS = {}


def _wrapper(key, fn, name, np_fn):
    w = _WRAPPERS.get(key)
    if w is None:
        w = _WRAPPERS[key] = NpCall(fn, name, np_fn)
        from . import _rules
        _rules.RULES[w] = _rules.NUMPY
    return w


_FUNCTIONS = None


def _functions():
    """id(numpy callable) -> (the numpy callable, its torch._numpy twin): numpy's, numpy.fft's
    and numpy.linalg's functions and ufuncs that torch._numpy has (numpy.random is not traced:
    its stream is numpy's own)."""
    global _FUNCTIONS
    if _FUNCTIONS is None:
        table = {}
        if np is not None:
            for npm, tm in ((np, tnp), (np.fft, tnp.fft), (np.linalg, tnp.linalg)):
                for name in dir(tm):
                    f, t = getattr(npm, name, None), getattr(tm, name)
                    if (name.startswith("_") or f is None or isinstance(f, (type, type(np))) or isinstance(t, type)
                            or not callable(f) or not callable(t)):
                        continue
                    table[id(f)] = (f, t, name)
        _FUNCTIONS = table
    return _FUNCTIONS


def function(f):
    """The wrapper of numpy function f's torch._numpy twin, or None."""
    e = _functions().get(id(f))
    if e is None or e[0] is not f:
        return None
    name = e[2]
    return _wrapper(("f", name, id(e[1])), e[1], f"np_{name}{'_' if name in _WRITES else ''}", f)


def operator_wrapper(op):
    """The wrapper of a Python operator (operator.add...) on arrays."""
    name = getattr(op, "__name__", "op")
    return _wrapper(("o", op), op, f"np_{name}{'_' if op in _INPLACE_OPS else ''}", op)


def _setitem(a, key, value):
    a[key] = value
    return a


def setitem_wrapper():
    """a[key] = value on an array, returning a (so the trace sees it written in place)."""
    return _wrapper(("s",), _setitem, "np_setitem_", None)


def _method(name):
    return lambda a, *args, **kwargs: getattr(a, name)(*args, **kwargs)


def _attr(name):
    return lambda a: getattr(a, name)


def attr_info(meta, name):
    """What attribute `name` of an array over tensor meta is: ("method", wrapper),
    ("graph", wrapper) for an array-valued attribute (a.T), ("value", v) for one of its metadata
    (a.shape, a.dtype: v as numpy gives it), or ("none", None)."""
    a = tnp.ndarray(meta)
    try:
        v = getattr(a, name)
    except AttributeError:
        return "none", None
    if isinstance(v, type):  # a class (a.__class__ is answered by the tracer): not a method
        return "none", None
    if callable(v) and not isinstance(v, (tnp.ndarray, tnp.DType)):
        m = _method(name)
        return "method", _wrapper(("m", name), m, f"np_{name}{'_' if name in _WRITES else ''}", m)
    if isinstance(v, tnp.ndarray):
        a = _attr(name)
        return "graph", _wrapper(("a", name), a, f"np_{name}", a)
    v = _to_torch(v)
    from . import _rules
    return ("value", v) if _rules.is_const(v) else ("none", None)


class Arr:
    """In a probe's arguments: an ndarray of the trace (its meta tensor), not a tensor; scalar:
    one numpy gives as a numpy scalar."""

    def __init__(self, meta, scalar=False):
        self.meta, self.scalar = meta, scalar


_PROBE_NUMEL = 1 << 22


def _zeros_as(meta):
    """Zeros of meta's shape, dtype and strides (results follow their arguments' layouts)."""
    return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype).zero_()


def _stand_in(v, depth=0):
    """A probe's argument: an ndarray or a tensor of the meta tensor's shape, dtype and strides
    holding zeros, tuples and lists item by item."""
    if isinstance(v, Arr):
        a = _zeros_as(v.meta).numpy()
        return a[()] if v.scalar else a
    if isinstance(v, torch.Tensor):
        return _zeros_as(v)
    if depth < 8 and type(v) in (tuple, list):
        return type(v)(_stand_in(x, depth + 1) for x in v)
    return v


def _numel(v, depth=0):
    if isinstance(v, Arr):
        v = v.meta
    if isinstance(v, torch.Tensor):
        return v.numel()
    if depth < 8 and type(v) in (tuple, list):
        return sum(_numel(x, depth + 1) for x in v)
    return 0


def _agrees(r, meta):
    """How numpy's result r compares with torch._numpy's (meta tensors, tuples of them): 0 other
    dtypes, shapes or layouts; 1 the same; 2 the same once torch's is made C-contiguous (a
    fresh C-ordered array where torch keeps its argument's layout: a.T.copy())."""
    if isinstance(meta, torch.Tensor):
        try:
            dt = torch.empty((), dtype=meta.dtype).numpy().dtype
        except TypeError:  # bfloat16...: no numpy dtype
            return 0
        if not isinstance(r, (np.ndarray, np.generic)) or r.dtype != dt or tuple(r.shape) != tuple(meta.shape):
            return 0
        same = [r.strides[d] == meta.stride(d) * r.itemsize for d in range(meta.dim())]
        fresh_c = isinstance(r, np.ndarray) and r.flags.c_contiguous and r.flags.owndata
        if all(same) or (not fresh_c and all(s or meta.shape[d] <= 1 for d, s in enumerate(same))):
            return 1
        return 2 if fresh_c else 0
    if type(meta) in (tuple, list):
        if type(r) not in (tuple, list) or len(r) != len(meta):
            return 0
        ks = [_agrees(a, b) for a, b in zip(r, meta)]
        return 1 if all(k == 1 for k in ks) else 0
    return int(meta is None)


def probe(w, args, kwargs, meta=None):
    """What eager numpy gives for wrapper w's call on values of these shapes and dtypes (Arr:
    an ndarray; a meta tensor: a torch tensor, which numpy functions take in ways of their own:
    converted, or through the tensor's methods): "array" (arrays, or tuples and lists of them),
    "scalar" (a numpy scalar), "array_c" (an array torch._numpy's is once made C-contiguous),
    "mismatch" (either, of other dtypes, shapes or layouts than meta, the result torch._numpy
    gives), "other" (anything else: a tensor...), "error" (it raised), or
    "skip" (too large to run, or w writes into its argument). The values are zeros: a result
    that depends on them is found as it would be for any values only for its type, which is
    what is asked."""
    if w.np_fn is None or _numel((args, kwargs)) > _PROBE_NUMEL:
        return "skip"
    import warnings
    try:
        a, kw = _stand_in(args), {k: _stand_in(v) for k, v in kwargs.items()}
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            r = w.np_fn(*a, **kw)
    except Exception:
        return "error"
    if isinstance(r, np.generic):
        kind = "scalar"
    elif isinstance(r, np.ndarray) or (type(r) in (tuple, list) and all(isinstance(x, np.ndarray) for x in r)):
        kind = "array"
    else:
        return "other"
    if meta is None:
        return kind
    return {0: "mismatch", 1: kind, 2: "array_c"}[_agrees(r, meta)]


def _c_copy(a):
    return tnp.ndarray(a.tensor.clone(memory_format=torch.contiguous_format))


def contiguous_wrapper():
    """The wrapper copying an array into C order, strides of size-1 dimensions too (numpy's
    fresh result where torch's keeps its argument's layout)."""
    return _wrapper(("c",), _c_copy, "np_c_copy", None)


def scalar_type(meta):
    """The numpy scalar type of a 0-d result of meta's dtype (np.float32)."""
    return type(torch.zeros((), dtype=meta.dtype).numpy()[()])


def to_numpy_scalar(t):
    """Where an ndarray that eager numpy makes a scalar (np.sum(a)) leaves the trace: that scalar."""
    return t.numpy()[()]


def from_numpy(a):
    """The tensor over numpy array a of the frame (its memory), for arrays a graph can take: a
    writable array of a dtype torch has (complex excepted); else ValueError (a guard miss)."""
    if type(a) is not np.ndarray or not a.flags.writeable or a.dtype.kind not in "biuf":
        raise ValueError("not an array ember traces")
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    if base is a or base.dtype != a.dtype:
        return torch.from_numpy(a)
    # a view of another array: a view of the tensor over that array, so that two such inputs
    # share one storage, as their memory is shared (the backends check inputs that alias)
    n = a.itemsize
    return torch.from_numpy(base).as_strided(a.shape, [s // n for s in a.strides],
                                             (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // n)


def to_numpy(t):
    """Where an ndarray leaves the trace: the numpy array over the graph's tensor (sharing its
    memory, as x.numpy() does)."""
    return t.numpy()
