"""Guard tests: when ember must recompile (and when it must not), and that results
always equal eager PyTorch.

tests/conftest.py resets ember's caches and counters before and after every test.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn

import ember
import ember.testing
from tests.helpers import assert_same, counters, randn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Module-level values read as globals by the functions below.
SCALE = 2.0
W = torch.arange(6.0).reshape(2, 3)


def same(got, expected):
    """A tensor equal to eager's, value for value (NaN equal to NaN)."""
    assert isinstance(expected, torch.Tensor)
    assert_same(got, expected, rtol=0, atol=0)


def sin_mul(x, y):
    return (x * y).sin() + x


# ---------------------------------------------------------------------------
# tensor properties
# ---------------------------------------------------------------------------


def test_recompile_on_new_shape():
    cf = ember.compile(sin_mul)
    x, y = randn(3, 4, seed=1), randn(3, 4, seed=2)
    same(cf(x, y), sin_mul(x, y))
    assert counters()["frames"] == 1
    x2, y2 = randn(5, 4, seed=3), randn(5, 4, seed=4)
    same(cf(x2, y2), sin_mul(x2, y2))
    assert counters()["frames"] == 2
    assert counters()["recompiles"] == 1
    # both entries stay cached
    same(cf(x, y), sin_mul(x, y))
    same(cf(x2, y2), sin_mul(x2, y2))
    assert counters()["frames"] == 2
    assert counters()["hits"] == 2
    assert len(ember.testing.entries(sin_mul)) == 2


def test_recompile_on_broadcast_shape():
    cf = ember.compile(sin_mul)
    x, y = randn(3, 4, seed=1), randn(3, 4, seed=2)
    same(cf(x, y), sin_mul(x, y))
    y1 = randn(1, 4, seed=3)
    same(cf(x, y1), sin_mul(x, y1))
    assert counters()["frames"] == 2
    assert counters()["recompiles"] == 1


def test_recompile_on_new_dtype():
    cf = ember.compile(sin_mul)
    x, y = randn(3, 4, seed=1), randn(3, 4, seed=2)
    same(cf(x, y), sin_mul(x, y))
    xd, yd = x.double(), y.double()
    out = cf(xd, yd)
    assert out.dtype == torch.float64
    same(out, sin_mul(xd, yd))
    assert counters()["frames"] == 2
    assert counters()["recompiles"] == 1
    # mixed dtypes promote as eager does
    out = cf(x, yd)
    same(out, sin_mul(x, yd))
    assert counters()["frames"] == 3
    xi = torch.arange(12).reshape(3, 4)
    same(cf(xi, xi), sin_mul(xi, xi))
    assert counters()["frames"] == 4
    assert counters()["recompiles"] == 3


def test_recompile_on_new_requires_grad():
    cf = ember.compile(sin_mul)
    x, y = randn(3, 4, seed=1), randn(3, 4, seed=2)
    out = cf(x, y)
    same(out, sin_mul(x, y))
    assert not out.requires_grad

    xr = x.clone().requires_grad_()
    out = cf(xr, y)
    assert out.requires_grad
    assert out.grad_fn is not None
    assert counters()["frames"] == 2
    assert counters()["recompiles"] == 1
    out.sum().backward()
    got = xr.grad.clone()
    xr.grad = None
    sin_mul(xr, y).sum().backward()
    torch.testing.assert_close(got, xr.grad)

    # back to requires_grad=False: the first entry is hit again
    out = cf(x, y)
    assert not out.requires_grad
    assert counters()["frames"] == 2


def test_recompile_on_non_contiguous_input():
    cf = ember.compile(sin_mul)
    x, y = randn(3, 4, seed=1), randn(3, 4, seed=2)
    same(cf(x, y), sin_mul(x, y))
    xt = randn(4, 3, seed=5).t()  # same shape (3, 4), strides (1, 3)
    assert xt.shape == x.shape and xt.stride() != x.stride()
    out = cf(xt, y)
    same(out, sin_mul(xt, y))
    assert counters()["frames"] == 2
    assert counters()["recompiles"] == 1
    # contiguous again: cache hit on the first entry
    same(cf(x, y), sin_mul(x, y))
    assert counters()["frames"] == 2


def strides_matter(x):
    return x.view(-1) * 2 if x.is_contiguous() else x.reshape(-1) + 1


def test_stride_dependent_branch():
    cf = ember.compile(strides_matter)
    x = randn(3, 4)
    same(cf(x), strides_matter(x))
    xt = randn(4, 3).t()
    same(cf(xt), strides_matter(xt))
    assert counters()["frames"] == 2
    same(cf(x), strides_matter(x))
    assert counters()["frames"] == 2


# ---------------------------------------------------------------------------
# globals, module attributes, python arguments
# ---------------------------------------------------------------------------


def times_scale(x):
    return x * SCALE


def test_changed_global_constant(monkeypatch):
    cf = ember.compile(times_scale)
    x = randn(5)
    same(cf(x), x * 2.0)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 5.0)
    same(cf(x), x * 5.0)
    assert counters()["recompiles"] == 1
    assert counters()["frames"] == 2
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3)  # int now
    same(cf(x), x * 3)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 2.0)
    same(cf(x), x * 2.0)
    assert counters()["frames"] == 3


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(randn(4, seed=7))
        self.scale = 2.0

    def forward(self, x):
        return (x * self.weight) * self.scale


def test_changed_module_attribute():
    m = Scaled()
    cm = ember.compile(m)
    x = randn(3, 4)
    same(cm(x), m(x))
    assert counters()["frames"] == 1
    m.scale = 3.5
    out = cm(x)
    same(out, m(x))
    same(out, (x * m.weight) * 3.5)
    assert counters()["recompiles"] == 1
    assert counters()["frames"] == 2
    cm.scale = -1.0  # set through the wrapper; it changed before: a graph input now (automatic dynamic)
    same(cm(x), (x * m.weight) * -1.0)
    assert counters()["frames"] == 2


def test_replaced_parameter_object():
    m = Scaled()
    cm = ember.compile(m)
    x = randn(3, 4)
    same(cm(x), m(x))
    m.weight = nn.Parameter(randn(4, seed=11))
    same(cm(x), m(x))


def int_arg(x, n):
    return x * n + n


def test_changed_int_argument():
    cf = ember.compile(int_arg)
    x = randn(4)
    same(cf(x, 2), int_arg(x, 2))
    same(cf(x, 3), int_arg(x, 3))
    assert counters()["recompiles"] == 1
    assert counters()["frames"] == 2
    same(cf(x, 2), int_arg(x, 2))
    same(cf(x, 3), int_arg(x, 3))
    assert counters()["frames"] == 2
    same(cf(x, 2.5), int_arg(x, 2.5))


def test_int_float_bool_arguments_are_distinguished():
    # 2 == 2.0 == ... but the result dtype differs for an integer tensor
    cf = ember.compile(int_arg)
    xi = torch.arange(4)
    for n in (2, 2.0, 1, True, 1.0, 2):
        got, expected = cf(xi, n), int_arg(xi, n)
        same(got, expected)
    # 2, then 2.0 (changed: a float input from then on, which 1.0 reuses), 1, True
    assert counters()["frames"] == 4


def divide(x, d):
    return x / d


def test_float_argument_signed_zero():
    cf = ember.compile(divide)
    x = torch.ones(3)
    same(cf(x, 0.0), divide(x, 0.0))  # +inf
    same(cf(x, -0.0), divide(x, -0.0))  # -inf in eager


def test_float_argument_nan():
    cf = ember.compile(divide)
    x = torch.ones(3)
    for d in (float("nan"), 2.0, float("nan")):
        same(cf(x, d), divide(x, d))
    assert counters()["fallbacks"] == 0


def bool_arg(x, flag):
    if flag:
        return x + 1
    return x - 1


def test_bool_argument():
    cf = ember.compile(bool_arg)
    x = randn(4)
    same(cf(x, True), x + 1)
    same(cf(x, False), x - 1)
    assert counters()["recompiles"] == 1
    assert counters()["frames"] == 2
    same(cf(x, True), x + 1)
    same(cf(x, False), x - 1)
    assert counters()["frames"] == 2


def optional_arg(x, y):
    if y is None:
        return x * 2
    return x + y


def test_none_vs_tensor_argument():
    cf = ember.compile(optional_arg)
    x, y = randn(4, seed=1), randn(4, seed=2)
    same(cf(x, None), x * 2)
    same(cf(x, y), x + y)
    assert counters()["recompiles"] == 1
    assert counters()["frames"] == 2
    same(cf(x, None), x * 2)
    same(cf(x, y), x + y)
    assert counters()["frames"] == 2


def test_recompile_explanation_does_not_capture_other_frames():
    cf = ember.compile(optional_arg)
    x, y = randn(4, seed=1), randn(4, seed=2)
    cf(x, None)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        same(cf(x, y), x + y)
    assert [str(w.message) for w in rec if issubclass(w.category, ember.EmberWarning)] == []
    assert counters()["aborts"] == 0
    assert counters()["frames"] == 2


class Marker:
    def __repr__(self):
        return "Marker()"


def optional_flag(x, y):
    if y is None:
        return x * 2
    return x + 1


def test_recompile_explanation_does_not_intercept_user_repr():
    cf = ember.compile(optional_flag)
    x = randn(4)
    same(cf(x, None), x * 2)
    same(cf(x, Marker()), x + 1)
    assert counters()["frames"] == 2
    assert ember.testing.code_state(Marker.__repr__) is None


def plus_w(x):
    return x + W


def test_replaced_global_tensor(monkeypatch):
    cf = ember.compile(plus_w)
    x = randn(2, 3)
    same(cf(x), x + W)
    new_w = torch.full((2, 3), 10.0)
    monkeypatch.setattr(sys.modules[__name__], "W", new_w)
    same(cf(x), x + new_w)
    # in-place update of the global tensor is seen as well
    with torch.no_grad():
        new_w.add_(1)
    same(cf(x), x + new_w)
    # a global tensor of another shape
    wide = torch.ones(4, 2, 3)
    monkeypatch.setattr(sys.modules[__name__], "W", wide)
    same(cf(x), x + wide)


# ---------------------------------------------------------------------------
# global state
# ---------------------------------------------------------------------------


def test_grad_mode_change():
    cf = ember.compile(sin_mul)
    x = randn(3, 4, seed=1).requires_grad_()
    y = randn(3, 4, seed=2)
    out = cf(x, y)
    assert out.requires_grad
    assert counters()["frames"] == 1
    with torch.no_grad():
        out = cf(x, y)
        expected = sin_mul(x, y)
    assert counters()["recompiles"] == 1
    assert counters()["frames"] == 2
    same(out, expected)
    assert not out.requires_grad
    # grad mode on again: first entry, result requires grad again
    out = cf(x, y)
    assert out.requires_grad
    assert counters()["frames"] == 2


def matmul(x, w):
    return x @ w


def test_autocast_change():
    cf = ember.compile(matmul)
    x, w = randn(2, 3, seed=1), randn(3, 4, seed=2)
    same(cf(x, w), matmul(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = cf(x, w), matmul(x, w)
    assert expected.dtype == torch.bfloat16
    same(got, expected)
    assert counters()["recompiles"] == 1
    assert cf(x, w).dtype == torch.float32


def ones_plus(x):
    return torch.ones(3) + x.sum()


def test_default_dtype_change():
    cf = ember.compile(ones_plus)
    x = randn(3)
    same(cf(x), ones_plus(x))
    assert cf(x).dtype == torch.float32
    try:
        torch.set_default_dtype(torch.float64)
        expected = ones_plus(x)
        got = cf(x)
    finally:
        torch.set_default_dtype(torch.float32)
    assert expected.dtype == torch.float64
    same(got, expected)
    assert counters()["recompiles"] == 1
    same(cf(x), ones_plus(x))
    assert cf(x).dtype == torch.float32


# ---------------------------------------------------------------------------
# cache size limit
# ---------------------------------------------------------------------------


def test_cache_size_limit_fallback():
    cf = ember.compile(sin_mul, dynamic=False)  # every new size is a new entry
    try:
        ember.config.cache_size_limit = 2
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            for n in range(1, 5):
                x, y = randn(n, seed=n), randn(n, seed=10 + n)
                same(cf(x, y), sin_mul(x, y))
            # the earlier shapes are still right
            for n in range(1, 5):
                x, y = randn(n, seed=n), randn(n, seed=10 + n)
                same(cf(x, y), sin_mul(x, y))
    finally:
        ember.config.cache_size_limit = 8
    assert counters()["frames"] == 2
    msgs = [str(w.message) for w in rec if issubclass(w.category, ember.EmberWarning)]
    assert any("cache_size_limit" in m for m in msgs), msgs
    assert len(msgs) == 1, msgs
    assert ember.testing.code_state(sin_mul)["mode"] == "fallback"


# ---------------------------------------------------------------------------
# aliasing and mutation
# ---------------------------------------------------------------------------


def test_same_tensor_twice_then_distinct():
    cf = ember.compile(sin_mul)
    x, y = randn(3, seed=1), randn(3, seed=2)
    same(cf(x, x), sin_mul(x, x))
    same(cf(x, y), sin_mul(x, y))
    same(cf(y, y), sin_mul(y, y))
    same(cf(y, x), sin_mul(y, x))


def add_then(a, b):
    a.add_(1)
    return a + b


def test_mutation_with_aliased_inputs():
    cf = ember.compile(add_then)
    base = torch.arange(3.0)
    for make in (lambda: (base.clone(), base.clone() * 2),
                 lambda: (lambda t: (t, t))(base.clone()),
                 lambda: (base.clone(), base.clone() * 2)):
        ce, ee = make(), make()
        got, expected = cf(*ce), add_then(*ee)
        same(got, expected)
        for c, e in zip(ce, ee):
            same(c, e)


def mutate_then_double(x):
    x.add_(1)
    return x * 2


def test_in_place_mutation_of_input():
    cf = ember.compile(mutate_then_double)
    xc = randn(4)
    xe = xc.clone()
    for _ in range(3):
        same(cf(xc), mutate_then_double(xe))
        same(xc, xe)
    assert counters()["frames"] == 1
    assert counters()["hits"] == 2


# ---------------------------------------------------------------------------
# dumps
# ---------------------------------------------------------------------------


def test_guard_dump():
    cf = ember.compile(sin_mul)
    cf(randn(3, 4), randn(3, 4))
    entries = ember.testing.entries(sin_mul)
    assert len(entries) == 1
    guards = entries[0]["guards"]
    assert "TENSOR_MATCH" in guards
    assert "L['x']" in guards
    assert "L['y']" in guards
    assert "GLOBAL_STATE" in guards


class _Deep(nn.Module):
    """Many modules reached through equal names built at run time (distinct str objects)."""

    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))
        self.scale = 2.0

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = b(x) * getattr(self, "sc" + "ale") + len(self.blocks) + i
        return x


def test_guards_are_deduplicated():
    """Each source is loaded once and each check made once, however often the trace reads it
    (the builder's dedup index: equal names compare by value)."""
    m = _Deep(200)
    x = randn(2, 4)
    cf = ember.compile(m)
    same(cf(x), m(x))
    (entry,) = ember.testing.entries(m.forward)
    lines = entry["guards"].splitlines()
    assert len(lines) == len(set(lines)), [l for l in lines if lines.count(l) > 1][:3]
    assert sum("['scale']" in l or ".scale" in l for l in lines) <= 2  # the load and its check
    assert sum(l.strip().startswith("GLOBAL_STATE") for l in lines) == 1
    # every parameter checked once
    assert sum(l.strip().startswith("TENSOR_MATCH") for l in lines) == 2 * 200 + 1
    m.scale = 3.0
    same(cf(x), m(x))


def test_graph_dump():
    cf = ember.compile(sin_mul)
    cf(randn(3, 4), randn(3, 4))
    graph = ember.testing.entries(sin_mul)[0]["graph"]
    assert "input 0" in graph
    assert "input 1" in graph
    assert "mul" in graph
    assert "sin" in graph
    assert "add" in graph


# ---------------------------------------------------------------------------
# the Python (fallback) tensor-guard path
# ---------------------------------------------------------------------------

_SUBPROCESS_CODE = textwrap.dedent("""
    import json, torch, ember, ember.testing as T
    assert ember.config.force_python_tensor_guards is True
    def f(x, y):
        return (x * y).sin() + x
    cf = ember.compile(f)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    xt = torch.randn(4, 3, generator=g).t()
    xr = x.clone().requires_grad_()
    out = []
    for a, b in [(x, y), (x, y), (torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)),
                 (x.double(), y.double()), (xt, y), (xr, y), (x, y), (xt, y)]:
        got, exp = cf(a, b), f(a, b)
        out.append(bool(torch.equal(got, exp)) and got.dtype == exp.dtype
                   and got.requires_grad == exp.requires_grad)
    print(json.dumps({"ok": out, "counters": T.counters(), "fast": ember.tensor_guards_fast}))
""")


def test_python_tensor_guards_subprocess():
    import json
    env = dict(os.environ)
    env["EMBER_PYTHON_TENSOR_GUARDS"] = "1"
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("EMBER_LOGS", None)
    r = subprocess.run([sys.executable, "-c", _SUBPROCESS_CODE], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["fast"] is False
    assert all(res["ok"]), res
    c = res["counters"]
    # (3,4) f32, (5,4), f64, strided, requires_grad: 5 compiles; the rest are hits
    assert c["frames"] == 5, c
    assert c["recompiles"] == 4, c
    assert c["hits"] == 3, c
    assert c["aborts"] == 0, c


@pytest.mark.skipif(os.environ.get("EMBER_PYTHON_TENSOR_GUARDS") == "1", reason="Python tensor guards forced")
def test_requires_grad_read_directly_follows_changes():
    """Tensor checks read requires_grad through c10's TensorImpl::requires_grad once it agreed
    with the Python attribute at import (the getter cost 30 ns a tensor); a change of it on a
    parameter, an input made to require grad, or a leaf detached is seen at the next call."""
    assert ember._C._rg_direct()
    lin = torch.nn.Linear(3, 2)
    cf = ember.compile(lambda m, x: m(x))
    x = torch.randn(4, 3)
    seen = []
    for w, b, xg in ((0, 0, 0), (1, 0, 0), (0, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 0), (1, 1, 1)):
        lin.weight.requires_grad_(bool(w))
        lin.bias.requires_grad_(bool(b))
        xi = x.clone().requires_grad_(bool(xg))
        got, want = cf(lin, xi), lin(xi)
        assert got.requires_grad == want.requires_grad == bool(w or b or xg)
        assert torch.equal(got, want)
        seen.append(got.requires_grad)
    assert seen == [False, True, False, True, True, False, True]


def test_tensor_layout_probe_reads_this_torch():
    """The probe of TensorImpl's layout (sizes, strides, dtype, device, dispatch keys, storage)
    succeeds on the torch builds ember supports; without it every tensor check reads Python
    attributes (2 us each: a resnet50 hit took 0.5 ms)."""
    x = torch.randn(4, 3)
    ember.compile(lambda a, b: (a + 1, b + 1))(x, x[1:])
    assert ember.tensor_guards_fast
    assert ember._C._storage_groups((x, x[1:], torch.randn(2)), 0) == (0, 0, 2)
