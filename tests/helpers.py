"""Helpers shared by the tests: seeded inputs, ember's counters, copies of arguments, and the
comparison of a compiled result with eager's. `from tests.helpers import randn, assert_same`."""
import numpy as np
import pytest
import torch

import ember.testing


def randn(*shape, seed=0, dtype=torch.float32, requires_grad=False):
    """A tensor of this shape drawn from its own generator seeded with `seed` (the same values
    whatever ran before). randn(2, 3) and randn((2, 3)) are the same."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype).requires_grad_(requires_grad)


def counters():
    """ember's counters since the last reset (tests/conftest.py resets them before each test)."""
    return ember.testing.counters()


def clone_tree(v):
    """Deep copy of arguments: tensors cloned (leaf-ness and requires_grad kept), tuples, lists
    and dicts rebuilt, other objects returned as they are."""
    if isinstance(v, torch.Tensor):
        c = v.detach().clone()
        if v.requires_grad:
            c.requires_grad_(True)
        return c
    if isinstance(v, tuple):
        return tuple(clone_tree(e) for e in v)
    if isinstance(v, list):
        return [clone_tree(e) for e in v]
    if isinstance(v, dict):
        return {k: clone_tree(e) for k, e in v.items()}
    return v


def assert_same(got, expected, path="out", *, rtol=None, atol=None, equal_nan=True, float_rel=0.0, float_abs=0.0):
    """got is eager's `expected`: the same structure (exact types of containers and Python values,
    lengths, dict keys in order) and tensors of the same shape, dtype, device and requires_grad
    whose values are close (rtol/atol: torch.testing.assert_close's, None for its defaults of the
    dtype; NaN equal to NaN unless equal_nan=False). Floats are equal, or within float_rel/
    float_abs; numpy arrays allclose. `path` names the value in messages."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{path}: expected Tensor, got {type(got)}"
        assert got.shape == expected.shape, f"{path}: shape {got.shape} != {expected.shape}"
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
        assert got.device == expected.device, f"{path}: device {got.device} != {expected.device}"
        assert got.requires_grad == expected.requires_grad, \
            f"{path}: requires_grad {got.requires_grad} != {expected.requires_grad}"
        torch.testing.assert_close(got.detach(), expected.detach(), rtol=rtol, atol=atol, equal_nan=equal_nan,
                                   msg=lambda m: f"{path}: {m}")
        return
    assert type(got) is type(expected), f"{path}: type {type(got)} != {type(expected)}"
    kw = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, float_rel=float_rel, float_abs=float_abs)
    if isinstance(expected, np.ndarray):
        np.testing.assert_allclose(got, expected)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), f"{path}: len {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{path}[{i}]", **kw)
    elif isinstance(expected, dict):
        assert list(got.keys()) == list(expected.keys()), f"{path}: keys {list(got)} != {list(expected)}"
        for k in expected:
            assert_same(got[k], expected[k], f"{path}[{k!r}]", **kw)
    elif isinstance(expected, float) and expected != expected and equal_nan:
        assert got != got, f"{path}: {got!r} != {expected!r}"
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=float_rel, abs=float_abs), f"{path}: {got!r} != {expected!r}"
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def one_graph(fn, *args, calls=2, fullgraph=False):
    """fn(*args) compiled: `calls` calls equal to eager's result, one frame compiled with no break
    or abort, every later call a cache hit. Returns the last result."""
    import ember
    import ember.testing
    expected = fn(*args)
    cf = ember.compile(fn, fullgraph=fullgraph)
    for _ in range(calls):
        got = cf(*args)
        torch.testing.assert_close(got, expected)
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c
    assert c["hits"] == calls - 1, c
    return got


def exact_graph(fn, *args):
    """fn(*args) under fullgraph=True, twice: equal to eager's (assert_same: Python values
    exactly), one frame with no break, the second call a cache hit. Returns the last result."""
    import ember
    want = fn(*args)
    cf = ember.compile(fn, fullgraph=True)
    for _ in range(2):
        got = cf(*args)
        assert_same(got, want)
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["hits"]) == (1, 0, 0, 1), c
    return got
