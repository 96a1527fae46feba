"""Tests of ember's public API: ember.compile / disable / reset / config / set_logs,
CompiledModule, and the errors and warnings they raise.

tests/conftest.py resets ember's caches and counters before and after every test.
"""
import os
import threading
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
import ember.testing
from tests.helpers import counters, randn

THIS_FILE = os.path.basename(__file__)


def add_relu(x, y):
    """Adds and rectifies."""
    return torch.relu(x + y) * 2


@pytest.fixture
def xy():
    return randn(4, 3, seed=1), randn(4, 3, seed=2)


@pytest.fixture
def no_logs():
    try:
        yield
    finally:
        ember.set_logs("")


# ---------------------------------------------------------------------------
# ember.compile: call and decorator forms
# ---------------------------------------------------------------------------


def test_compile_as_call(xy):
    cf = ember.compile(add_relu)
    torch.testing.assert_close(cf(*xy), add_relu(*xy), rtol=0, atol=0)
    assert counters()["frames"] == 1
    assert counters()["aborts"] == 0
    torch.testing.assert_close(cf(*xy), add_relu(*xy), rtol=0, atol=0)
    assert counters()["frames"] == 1
    assert counters()["hits"] == 1


def test_compile_as_bare_decorator(xy):
    @ember.compile
    def f(x, y):
        return x * y - y

    x, y = xy
    torch.testing.assert_close(f(x, y), x * y - y, rtol=0, atol=0)
    assert counters()["frames"] == 1
    assert ember.testing.code_state(f)["mode"] == "compile"


def test_compile_as_decorator_with_arguments(xy):
    @ember.compile(fullgraph=False)
    def f(x, y):
        return torch.sigmoid(x) + y

    x, y = xy
    torch.testing.assert_close(f(x, y), torch.sigmoid(x) + y, rtol=0, atol=0)
    assert counters()["frames"] == 1


def test_compile_with_explicit_defaults(xy):
    cf = ember.compile(add_relu, backend="eager", fullgraph=True, dynamic=False, mode="default", options=None)
    torch.testing.assert_close(cf(*xy), add_relu(*xy), rtol=0, atol=0)
    assert counters()["frames"] == 1


def test_compiled_function_keeps_metadata():
    cf = ember.compile(add_relu)
    assert cf.__name__ == "add_relu"
    assert cf.__qualname__ == "add_relu"
    assert cf.__doc__ == "Adds and rectifies."
    assert cf.__module__ == add_relu.__module__
    assert cf.__wrapped__ is add_relu


def test_decorated_function_keeps_metadata():
    @ember.compile(fullgraph=False)
    def documented(x):
        """Some documentation."""
        return x + 1

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Some documentation."
    assert callable(documented.__wrapped__)
    assert documented.__wrapped__.__name__ == "documented"


# ---------------------------------------------------------------------------
# ember.compile: argument validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [3, "add_relu", [add_relu], object()])
def test_compile_non_callable_raises_type_error(obj):
    with pytest.raises(TypeError):
        ember.compile(obj)


def test_compile_unknown_backend_lists_eager():
    with pytest.raises(ValueError) as ei:
        ember.compile(add_relu, backend="no_such_backend")
    assert "eager" in str(ei.value)
    assert "no_such_backend" in str(ei.value)


def test_compile_unknown_mode_raises():
    with pytest.raises(ValueError):
        ember.compile(add_relu, mode="no-such-mode")


def test_compile_mode_and_options_together_raise():
    with pytest.raises(ValueError):
        ember.compile(add_relu, mode="default", options={"x": 1})


def test_compile_dynamic_bad_value_raises():
    with pytest.raises(ValueError, match="dynamic must be None, True or False"):
        ember.compile(add_relu, dynamic="yes")


def test_compile_errors_leave_nothing_compiled(xy):
    for kw in (dict(backend="nope"), dict(mode="nope"), dict(dynamic=1)):
        with pytest.raises(ValueError):
            ember.compile(add_relu, **kw)
    assert add_relu(*xy) is not None
    assert counters()["frames"] == 0
    assert ember.testing.code_state(add_relu) is None


def test_list_backends_contains_eager():
    backends = ember.list_backends()
    assert isinstance(backends, list)
    assert "eager" in backends


# ---------------------------------------------------------------------------
# nn.Module compile
# ---------------------------------------------------------------------------


class FunctionalLinear(nn.Module):
    """forward uses only torch functions and the module's own parameters."""

    def __init__(self, n_in=4, n_out=3):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.weight = nn.Parameter(torch.randn(n_out, n_in, generator=g))
        self.bias = nn.Parameter(torch.randn(n_out, generator=g))
        self.scale = 2.0

    def forward(self, x):
        return F.linear(x, self.weight, self.bias).relu() * self.scale


class UsesItem(nn.Module):
    """forward reads a tensor value (.item()): ember cannot capture it."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.weight = nn.Parameter(torch.randn(3, 4, generator=g))

    def forward(self, x):
        s = x.abs().max().item()
        return F.linear(x / s, self.weight)


class WithSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x).relu()


def test_compile_module_returns_module_with_eager_outputs():
    m = FunctionalLinear()
    cm = ember.compile(m)
    assert isinstance(cm, nn.Module)
    assert isinstance(cm, ember.CompiledModule)
    x = randn(5, 4)
    expected = m(x)
    torch.testing.assert_close(cm(x), expected, rtol=0, atol=0)
    torch.testing.assert_close(cm.forward(x), expected, rtol=0, atol=0)
    assert counters()["frames"] == 1
    assert counters()["aborts"] == 0


def test_compile_module_backward_matches_eager():
    m = FunctionalLinear()
    cm = ember.compile(m)
    x = randn(5, 4)
    cm(x).sum().backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x).sum().backward()
    for g, e in zip(got, [p.grad for p in m.parameters()]):
        torch.testing.assert_close(g, e)


def test_compile_module_item_breaks_the_graph_and_is_correct():
    m = UsesItem()
    cm = ember.compile(m)
    x = randn(5, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.EmberWarning)  # a graph break is not a fallback
        got = cm(x)
    torch.testing.assert_close(got, m(x), rtol=0, atol=0)
    c = counters()
    assert c["breaks"] == 1 and c["aborts"] == 0
    assert c["frames"] == 2  # forward up to .item(), and the resume function after it
    x2 = randn(5, 4, seed=9)
    torch.testing.assert_close(cm(x2), m(x2), rtol=0, atol=0)
    assert counters()["aborts"] == 0  # (the resume function specializes on the .item() value)


class LockedItem(nn.Module):
    """Reads a tensor value inside a with block of a C context manager (a lock): no graph break
    there, plain Python."""

    lock = threading.Lock()

    def forward(self, x):
        y = x * 2
        with self.lock:
            s = y.sum().item()
        return y + s


def test_compile_module_fallback_warns_and_is_correct():
    m = LockedItem()
    cm = ember.compile(m)
    x = randn(5, 4)
    with pytest.warns(ember.EmberWarning, match="could not compile `LockedItem.forward`"):
        got = cm(x)
    assert "the instruction cannot run on its own" in str(ember.testing.code_state(m)["reason"])
    torch.testing.assert_close(got, m(x), rtol=0, atol=0)
    assert counters()["aborts"] == 1
    assert counters()["frames"] == 0
    # Later calls keep running as plain Python, correctly, without aborting again.
    x2 = randn(5, 4, seed=9)
    torch.testing.assert_close(cm(x2), m(x2), rtol=0, atol=0)
    assert counters()["aborts"] == 1


def test_compile_module_with_submodule_is_correct():
    """Calling a submodule from forward: either captured (one frame, no abort, no warning)
    or run as plain Python (one abort, an EmberWarning); results are right either way."""
    m = WithSubmodule()
    cm = ember.compile(m)
    x = randn(5, 4)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = cm(x)
    torch.testing.assert_close(got, m.fc(x).relu(), rtol=0, atol=0)
    c = counters()
    assert c["frames"] + c["aborts"] == 1
    n_warn = sum(issubclass(w.category, ember.EmberWarning) for w in rec)
    assert n_warn == c["aborts"]
    x2 = randn(5, 4, seed=9)
    torch.testing.assert_close(cm(x2), m.fc(x2).relu(), rtol=0, atol=0)
    with torch.no_grad():
        m.fc.weight.mul_(-1)
    torch.testing.assert_close(cm(x2), m.fc(x2).relu(), rtol=0, atol=0)
    assert counters()["frames"] + counters()["aborts"] == 1


def test_compiled_module_state_dict_keys_equal_original():
    m = FunctionalLinear()
    cm = ember.compile(m)
    assert list(cm.state_dict().keys()) == list(m.state_dict().keys())
    for k, v in cm.state_dict().items():
        assert torch.equal(v, m.state_dict()[k])

    m2 = WithSubmodule()
    assert list(ember.compile(m2).state_dict().keys()) == list(m2.state_dict().keys())


def test_compiled_module_parameters_are_the_same_objects():
    m = FunctionalLinear()
    cm = ember.compile(m)
    cps, ops = list(cm.parameters()), list(m.parameters())
    assert len(cps) == len(ops) == 2
    assert all(a is b for a, b in zip(cps, ops))
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in m.named_parameters()]


def test_compiled_module_train_eval_forwarded():
    m = FunctionalLinear()
    cm = ember.compile(m)
    assert m.training and cm.training
    assert cm.eval() is cm
    assert m.training is False
    assert cm.training is False
    assert cm.train() is cm
    assert m.training is True
    assert cm.train(False) is cm
    assert m.training is False


def test_compiled_module_attribute_get_set_forwarded():
    m = FunctionalLinear()
    cm = ember.compile(m)
    assert cm.scale == 2.0
    assert cm.weight is m.weight
    cm.scale = 5.0
    assert m.scale == 5.0
    cm.new_attribute = "hello"
    assert m.new_attribute == "hello"
    m.other = 7
    assert cm.other == 7
    with pytest.raises(AttributeError):
        cm.does_not_exist  # noqa: B018


def test_compile_of_compiled_module_unwraps():
    m = FunctionalLinear()
    cm2 = ember.compile(ember.compile(m))
    assert isinstance(cm2, ember.CompiledModule)
    assert list(cm2.parameters())[0] is m.weight
    x = randn(2, 4)
    torch.testing.assert_close(cm2(x), m(x), rtol=0, atol=0)


def test_module_in_place_parameter_update_no_recompile():
    m = FunctionalLinear()
    cm = ember.compile(m)
    x = randn(5, 4)
    torch.testing.assert_close(cm(x), m(x), rtol=0, atol=0)
    assert counters()["frames"] == 1
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1)
    expected = F.linear(x, m.weight, m.bias).relu() * 2.0
    torch.testing.assert_close(cm(x), expected, rtol=0, atol=0)
    assert counters()["frames"] == 1
    assert counters()["recompiles"] == 0
    assert counters()["hits"] == 1


# ---------------------------------------------------------------------------
# CompiledModule: the wrapped module's protocols, copies and pickles
# ---------------------------------------------------------------------------


def _outcome(fn):
    """('ok', value) or ('raise', exception type) of fn()."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001
        return ("raise", type(e))


def _seq():
    torch.manual_seed(6)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


# each probe runs on the module and on ember.compile of a twin; answers must agree
_PROBES = {
    "bool": lambda m: bool(m),
    "len": lambda m: len(m),
    "iter": lambda m: [type(c).__name__ for c in m],
    "reversed": lambda m: [type(c).__name__ for c in reversed(m)],
    "getitem0": lambda m: type(m[0]).__name__,
    "getitem_slice": lambda m: (type(m[0:1]).__name__, len(m[0:1])),
    "contains": lambda m: ("a" in m, "zz" in m),
    "dir": lambda m: set(dir(m)) >= {"forward", "parameters", "training"},
}


@pytest.mark.parametrize("make", [
    _seq, lambda: nn.ModuleList(), lambda: nn.ModuleList([nn.ReLU(), nn.Tanh()]),
    lambda: nn.ModuleDict({"a": nn.ReLU()}), lambda: nn.ParameterList([nn.Parameter(torch.ones(2))]),
    lambda: nn.ParameterDict({"a": nn.Parameter(torch.ones(2))}), FunctionalLinear, lambda: nn.Linear(2, 2),
], ids=["Sequential", "empty ModuleList", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
        "no protocols", "Linear"])
@pytest.mark.parametrize("probe", sorted(_PROBES))
def test_compiled_module_protocols_answer_as_the_module(make, probe):
    m, twin = make(), make()
    cm = ember.compile(twin)
    assert _outcome(lambda: _PROBES[probe](cm)) == _outcome(lambda: _PROBES[probe](m))


def test_compiled_module_item_assignment_and_in_place_operators_change_the_module():
    m = _seq()
    cm = ember.compile(m)
    cm[1] = nn.Tanh()
    assert isinstance(m[1], nn.Tanh)
    del cm[1]
    assert len(m) == 2
    before = cm
    cm += nn.Sequential(nn.ReLU())  # Sequential.__iadd__ extends in place: the wrapper stays
    assert cm is before and len(m) == 3 and isinstance(m[2], nn.ReLU)
    both = cm + ember.compile(nn.Sequential(nn.Tanh()))  # as eager: a new plain Sequential
    assert type(both) is nn.Sequential and len(both) == 4 and len(m) == 3
    assert len(2 * cm) == len(cm * 2) == 6
    x = randn(3, 4)
    torch.testing.assert_close(cm(x), m(x), rtol=0, atol=0)
    with pytest.raises(ValueError):  # the module's own error
        cm += nn.ReLU()
    with pytest.raises(TypeError):
        ember.compile(nn.Linear(2, 2))[0] = nn.ReLU()


def test_compiled_module_equality_and_hash_are_the_modules():
    m = FunctionalLinear()
    cm = ember.compile(m)
    assert cm == m and cm == ember.compile(m) and hash(cm) == hash(m)
    assert cm != FunctionalLinear()
    assert m in {cm} and cm in [m]


def _copy_deepcopy(cm):
    import copy
    return copy.deepcopy(cm)


def _copy_pickle(cm):
    import pickle
    return pickle.loads(pickle.dumps(cm))


def _copy_torch_save(cm):
    import io
    buf = io.BytesIO()
    torch.save(cm, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("copier", [_copy_deepcopy, _copy_pickle, _copy_torch_save],
                         ids=["deepcopy", "pickle", "torch.save"])
def test_compiled_module_copies_are_compiled_modules_of_a_copy(copier):
    m = WithSubmodule()
    cm = ember.compile(m, fullgraph=True)
    x = randn(5, 4)
    expected = m(x)
    cm(x)
    c = copier(cm)
    assert isinstance(c, ember.CompiledModule) and c is not cm
    assert c._orig_mod is not m and c.fc.weight is not m.fc.weight
    assert c._ember_kwargs == cm._ember_kwargs and c._ember_kwargs["fullgraph"] is True
    assert list(c.state_dict()) == list(m.state_dict())
    for k, v in c.state_dict().items():
        torch.testing.assert_close(v, m.state_dict()[k], rtol=0, atol=0)
    ember.testing.reset_counters()
    torch.testing.assert_close(c(x), expected, rtol=0, atol=0)
    assert counters()["frames"] + counters()["hits"] == 1  # the copy runs compiled
    with torch.no_grad():
        c.fc.weight.zero_()  # the copy owns its parameters
    torch.testing.assert_close(cm(x), expected, rtol=0, atol=0)


def test_compiled_module_copy_keeps_the_backend():
    seen = []

    def counting(gm, example_inputs):
        seen.append(gm)
        return gm

    c = _copy_deepcopy(ember.compile(FunctionalLinear(), backend=counting))
    x = randn(2, 4)
    torch.testing.assert_close(c(x), FunctionalLinear()(x), rtol=0, atol=0)
    assert len(seen) == 1


# ---------------------------------------------------------------------------
# ember.compile(module, inplace=True)
# ---------------------------------------------------------------------------


class Generates(nn.Module):
    """generate() calls self(...), as transformers' generate does."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x))

    def generate(self, x, steps):
        for _ in range(steps):
            x = self(x)
        return x


def test_compile_inplace_makes_self_calls_compiled():
    m, twin = Generates(), Generates()
    x = randn(2, 4)
    with torch.no_grad():
        assert ember.compile(m, inplace=True) is m
        assert list(m.state_dict()) == list(twin.state_dict())
        torch.testing.assert_close(m.generate(x, 4), twin.generate(x, 4), rtol=0, atol=0)
    c = counters()
    assert c["frames"] == 1 and c["hits"] == 3 and c["aborts"] == 0
    assert len(ember.testing.entries(m)) == 1
    torch.testing.assert_close(m(x), twin(x), rtol=0, atol=0)  # a plain call too (with grad: a new entry)


def test_compiled_wrapper_does_not_compile_self_calls():
    """The wrapper form leaves the module as it is: generate() calls the plain module."""
    m = Generates()
    cm = ember.compile(m)
    cm.generate(randn(2, 4), 2)
    assert counters()["frames"] == 0


def test_compile_inplace_keeps_hooks_and_takes_the_backend():
    seen = []

    def counting(gm, example_inputs):
        seen.append(gm)
        return gm

    m, twin = Generates(), Generates()
    for mod in (m, twin):
        mod.register_forward_hook(lambda mod, args, out: out * 2)
    ember.compile(m, backend=counting, inplace=True)
    x = randn(3, 4)
    torch.testing.assert_close(m.generate(x, 2), twin.generate(x, 2), rtol=0, atol=0)
    assert seen  # (the hook, called from compiled code, is compiled as well)


def test_compile_inplace_copies_run_plain_as_nn_module_compile():
    import copy
    m = Generates()
    ember.compile(m, inplace=True)
    c = copy.deepcopy(m)  # nn.Module.__getstate__ drops the compiled call, as after m.compile()
    x = randn(2, 4)
    torch.testing.assert_close(c(x), m(x), rtol=0, atol=0)
    assert c._compiled_call_impl is None


def test_compile_inplace_of_a_function_raises():
    with pytest.raises(TypeError):
        ember.compile(add_relu, inplace=True)
    with pytest.raises(ValueError):
        ember.compile(Generates(), inplace="yes")


# ---------------------------------------------------------------------------
# EMBER_DISABLE
# ---------------------------------------------------------------------------


@pytest.fixture
def ember_disabled(monkeypatch):
    monkeypatch.setenv("EMBER_DISABLE", "1")
    monkeypatch.setattr(ember, "_disable_said", False)


def test_ember_disable_returns_functions_and_modules_unchanged(ember_disabled, capfd, xy):
    m = Generates()
    assert ember.compile(add_relu) is add_relu
    assert ember.compile(m) is m
    assert ember.compile(fullgraph=True)(add_relu) is add_relu
    assert ember.compile(m, inplace=True) is m and m._compiled_call_impl is None
    torch.testing.assert_close(ember.compile(add_relu)(*xy), add_relu(*xy), rtol=0, atol=0)
    m.generate(randn(2, 4), 2)
    assert counters()["frames"] == 0
    err = capfd.readouterr().err
    assert err.count("EMBER_DISABLE") == 1  # said once


def test_ember_disable_still_checks_arguments(ember_disabled):
    with pytest.raises(ValueError, match="did you mean"):
        ember.compile(add_relu, backend="inductr")
    with pytest.raises(TypeError):
        ember.compile(3)


def test_ember_disable_is_read_at_each_call(monkeypatch, xy):
    monkeypatch.setenv("EMBER_DISABLE", "0")
    cf = ember.compile(add_relu)
    assert cf is not add_relu
    cf(*xy)
    assert counters()["frames"] == 1
    monkeypatch.setenv("EMBER_DISABLE", "1")
    assert ember.compile(add_relu) is add_relu


# ---------------------------------------------------------------------------
# ember.disable / ember.reset
# ---------------------------------------------------------------------------


def test_disable_runs_plain_python(xy):
    def f(x, y):
        return x * y + 1

    d = ember.disable(f)
    assert callable(d)
    x, y = xy
    for _ in range(3):
        torch.testing.assert_close(d(x, y), x * y + 1, rtol=0, atol=0)
    state = ember.testing.code_state(f)
    assert state is None or state["mode"] != "compile"
    assert counters()["frames"] == 0
    assert ember.testing.entries(f) == []


def test_disable_as_decorator(xy):
    @ember.disable
    def f(x, y):
        return x - y

    x, y = xy
    torch.testing.assert_close(f(x, y), x - y, rtol=0, atol=0)
    assert counters()["frames"] == 0


def test_disable_non_callable_raises():
    with pytest.raises(TypeError):
        ember.disable(42)


def test_reset_makes_next_call_compile_again(xy):
    cf = ember.compile(add_relu)
    cf(*xy)
    cf(*xy)
    assert counters()["frames"] == 1
    assert len(ember.testing.entries(add_relu)) == 1
    ember.reset()
    assert ember.testing.entries(add_relu) == []
    torch.testing.assert_close(cf(*xy), add_relu(*xy), rtol=0, atol=0)
    assert counters()["frames"] == 2
    assert counters()["recompiles"] == 0
    assert len(ember.testing.entries(add_relu)) == 1


# ---------------------------------------------------------------------------
# ember.config
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", None])
def test_cache_size_limit_rejects_bad_values(bad):
    before = ember.config.cache_size_limit
    with pytest.raises(ValueError):
        ember.config.cache_size_limit = bad
    assert ember.config.cache_size_limit == before


def test_cache_size_limit_accepts_positive_int():
    try:
        ember.config.cache_size_limit = 3
        assert ember.config.cache_size_limit == 3
    finally:
        ember.config.cache_size_limit = 8
    assert ember.config.cache_size_limit == 8


def test_unknown_config_attribute_raises():
    with pytest.raises(AttributeError):
        ember.config.no_such_setting = 1
    with pytest.raises(AttributeError):
        ember.config.no_such_setting  # noqa: B018


# ---------------------------------------------------------------------------
# fullgraph / strict / fallback warnings
# ---------------------------------------------------------------------------


def uses_print(x):
    y = x * 2
    print("value")  # <-- unsupported
    return y


def uses_item(x):
    y = x.sum()
    if y.item() > 0:  # <-- unsupported (.item() itself is captured under fullgraph: a branch on it is not)
        return x + 1
    return x - 1


def _line_of(fn, marker):
    import inspect
    src, start = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if marker in line:
            return start + i
    raise AssertionError(marker)


@pytest.mark.parametrize("fn", [uses_print, uses_item])
def test_fullgraph_unsupported_names_file_and_line(fn):
    cf = ember.compile(fn, fullgraph=True)
    with pytest.raises(ember.Unsupported) as ei:
        cf(randn(3))
    msg = str(ei.value)
    assert THIS_FILE in msg
    assert f"{THIS_FILE}:{_line_of(fn, '# <-- unsupported')}" in msg


def test_strict_config_raises_unsupported():
    cf = ember.compile(uses_item)
    try:
        ember.config.strict = True
        with pytest.raises(ember.Unsupported) as ei:
            cf(randn(3))
    finally:
        ember.config.strict = False
    msg = str(ei.value)
    assert THIS_FILE in msg
    assert f"{THIS_FILE}:{_line_of(uses_item, '# <-- unsupported')}" in msg


LOCK = threading.Lock()


def item_in_loop(x):
    total = 0.0
    with LOCK:  # a break inside a with block of a C context manager: no graph break there
        for i in range(2):
            total += x[i].item()
    return total


def test_non_fullgraph_falls_back_with_warning():
    cf = ember.compile(item_in_loop)
    x = randn(3)
    with pytest.warns(ember.EmberWarning):
        got = cf(x)
    assert got == item_in_loop(x)
    assert counters()["aborts"] == 1
    assert ember.testing.code_state(item_in_loop)["mode"] == "fallback"
    # runs as plain Python afterwards, still correct, no second abort
    x2 = randn(3, seed=5)
    assert cf(x2) == item_in_loop(x2)
    assert counters()["aborts"] == 1


def test_non_fullgraph_breaks_the_graph_without_warning():
    cf = ember.compile(uses_item)
    x = randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.EmberWarning)
        assert torch.equal(cf(x), uses_item(x))
    assert counters()["breaks"] == 1 and counters()["aborts"] == 0


def test_unsupported_is_exported():
    assert issubclass(ember.Unsupported, Exception)
    assert issubclass(ember.EmberWarning, UserWarning)


def test_unsupported_is_caught_as_torch_compiles():
    # code written for torch.compile catches torch._dynamo.exc.Unsupported (a RuntimeError)
    import torch._dynamo.exc

    assert issubclass(ember.Unsupported, torch._dynamo.exc.Unsupported)
    cf = ember.compile(uses_print, fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported) as ei:
        cf(randn(3))
    assert type(ei.value) is ember.Unsupported and THIS_FILE in ei.value.msg


def test_fallback_warning_points_at_call_site():
    cf = ember.compile(item_in_loop)
    x = randn(3)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cf(x); line = _line_of(test_fallback_warning_points_at_call_site, "cf(x); line")  # noqa: E702
    ember_warnings = [w for w in rec if issubclass(w.category, ember.EmberWarning)]
    assert len(ember_warnings) == 1
    assert os.path.basename(ember_warnings[0].filename) == THIS_FILE
    assert ember_warnings[0].lineno == line


# ---------------------------------------------------------------------------
# warnings: at the user's line, once per reason and site, details in EMBER_LOGS=breaks
# ---------------------------------------------------------------------------


_LIBRARY_SRC = """
import threading
LOCK, RLOCK = threading.Lock(), threading.RLock()


def item_loop_a(x):
    total = 0.0
    with LOCK:  # a break inside a with block of a C context manager: no graph break there
        for i in range(2):
            total += x[i].item()
    return x * total


def item_loop_b(x):
    total = 0.0
    with LOCK:  # a break inside a with block of a C context manager: no graph break there
        for i in range(2):
            total += x[i].item()
    return x - total


def print_loop(x):
    with RLOCK:  # another reason: its own class's __enter__
        for i in range(2):
            print(end="")
    return x + 1


def entry(x):
    return item_loop_a(x) + item_loop_b(x)


def entry_two_reasons(x):
    return item_loop_a(x) + print_loop(x)
"""


@pytest.fixture
def library():
    """Functions of an installed package (their file is in site-packages, as transformers')."""
    import sysconfig
    path = os.path.join(sysconfig.get_paths()["purelib"], "ember_test_library", "core.py")
    ns = {"__name__": "ember_test_library.core"}
    exec(compile(_LIBRARY_SRC, path, "exec"), ns)
    return ns


def _ember_warnings(rec):
    return [w for w in rec if issubclass(w.category, ember.EmberWarning)]


def test_warning_points_at_the_user_call_not_into_the_library(library):
    cf = ember.compile(library["entry"])
    x = randn(3)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = cf(x); line = _line_of(test_warning_points_at_the_user_call_not_into_the_library, "got = cf(x)")  # noqa
    torch.testing.assert_close(got, library["entry"](x), rtol=0, atol=0)
    ws = _ember_warnings(rec)
    assert counters()["aborts"] == 2
    assert len(ws) == 1  # two functions, one reason, one call site: one warning
    assert os.path.basename(ws[0].filename) == THIS_FILE and ws[0].lineno == line
    msg = str(ws[0].message)
    assert "could not compile `item_loop_a` (ember_test_library/core.py:" in msg
    assert "EMBER_LOGS=breaks" in msg
    assert "Tensor.item" not in msg and "FOR_ITER" not in msg  # the internals are for the log


def test_warning_once_per_reason_and_site(library):
    x = randn(3)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ember.compile(library["entry_two_reasons"])(x)  # two reasons at one site: two warnings
        n_first = len(_ember_warnings(rec))
        ember.reset()
        for _ in range(2):
            ember.compile(library["entry"])(x)  # another site: warned once more, once
    assert n_first == 2
    ws = _ember_warnings(rec)
    assert len(ws) == 3
    assert len({(w.lineno, str(w.message)) for w in ws}) == 3
    assert all(os.path.basename(w.filename) == THIS_FILE for w in ws)


def test_breaks_log_has_the_details_the_warning_leaves_out(library, capfd, no_logs):
    ember.set_logs("breaks")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ember.EmberWarning)
        ember.compile(library["entry"])(randn(3))
    err = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("[ember:breaks]")]
    for fn in ("item_loop_a", "item_loop_b"):  # every frame, not once per reason
        (ln,) = [ln for ln in err if f"] {fn} (" in ln]
        assert "ember_test_library/core.py" in ln and "_thread.lock.__enter__" in ln and "cannot run on its own" in ln


def test_warnings_raised_while_tracing_are_not_shown(monkeypatch, xy):
    """What ember's own work warns about while it traces (meta runs, probes) is not the user's."""
    real_run = ember._rules.run

    def warning_run(*args, **kwargs):
        warnings.warn("raised inside ember's trace", UserWarning)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(ember._rules, "run", warning_run)
    filters = list(warnings.filters)
    cf = ember.compile(lambda x, y: torch.sin(x) @ y.t())
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = cf(*xy)
        warnings.warn("the user's own", UserWarning)
    assert counters()["frames"] == 1
    torch.testing.assert_close(got, torch.sin(xy[0]) @ xy[1].t(), rtol=0, atol=0)
    assert [str(w.message) for w in rec] == ["the user's own"]
    assert warnings.filters == filters


def autocast_cuda(x):
    with torch.autocast("cuda"):
        y = x * 2
    return y + 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_context_warning_of_a_compiled_block_points_at_user_code():
    x = randn(3)
    with warnings.catch_warnings(record=True) as eager:
        warnings.simplefilter("always")
        expected = autocast_cuda(x)
    cf = ember.compile(autocast_cuda)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = cf(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert counters()["frames"] == 1
    assert [str(w.message) for w in rec] == [str(w.message) for w in eager]  # once, not at trace time too
    assert all(os.path.basename(w.filename) == THIS_FILE for w in rec), [w.filename for w in rec]


# ---------------------------------------------------------------------------
# logging
# ---------------------------------------------------------------------------


def test_set_logs_graph_guards_recompiles(capfd, no_logs):
    def logged(x):
        return torch.tanh(x) * 3

    cf = ember.compile(logged)
    ember.set_logs("graph,guards,recompiles")
    cf(randn(4))
    err = capfd.readouterr().err
    assert "[ember:graph]" in err
    assert "tanh" in err
    assert "[ember:guards]" in err
    assert "TENSOR_MATCH" in err
    assert "[ember:recompiles]" not in err

    cf(randn(4, seed=3))  # cache hit: nothing printed
    assert "[ember:" not in capfd.readouterr().err

    cf(randn(6))
    err = capfd.readouterr().err
    rec = [line for line in err.splitlines() if line.startswith("[ember:recompiles]")]
    assert len(rec) == 2  # the guard that failed, then the dimension made symbolic
    assert "symbolic from now on" in rec[1] and "(None,)" in rec[1]
    assert "logged" in rec[0]
    assert "L['x']" in rec[0]  # the reason names the failed guard
    assert "6" in rec[0]  # ... and the new size
    assert "[ember:graph]" in err

    ember.set_logs("")
    cf(randn(7))
    assert "[ember:" not in capfd.readouterr().err


def test_set_logs_single_channel(capfd, no_logs):
    def f(x):
        return x - 1

    ember.set_logs("guards")
    ember.compile(f)(randn(2))
    err = capfd.readouterr().err
    assert "[ember:guards]" in err
    assert "[ember:graph]" not in err


def test_set_logs_bogus_raises(no_logs):
    with pytest.raises(ValueError):
        ember.set_logs("bogus")
    with pytest.raises(ValueError):
        ember.set_logs("graph,bogus")


def test_cuda_graph_backends_count_iterations():
    """CUDA graph trees tell one call of the user's function from the next by TorchDynamo's
    generation counter: a top-level call of a function compiled for them bumps it once."""
    from torch._dynamo.mutation_guard import GenerationTracker
    from ember import _C
    assert ember.backends.resolve("inductor", mode="reduce-overhead").cudagraphs
    assert not ember.backends.resolve("inductor").cudagraphs
    assert not ember.backends.resolve("inductor", mode="max-autotune-no-cudagraphs").cudagraphs
    inner = _C.CompiledFunction(lambda x: x + 1, _C.FLAG_ENABLED | _C.FLAG_ITERATION)
    outer = _C.CompiledFunction(lambda x: inner(x) * 2, _C.FLAG_ENABLED | _C.FLAG_ITERATION)
    g0 = GenerationTracker.generation
    outer(torch.ones(2))
    outer(torch.ones(2))
    assert GenerationTracker.generation - g0 == 2  # the inner call is part of the outer one
    plain = _C.CompiledFunction(lambda x: x, _C.FLAG_ENABLED)
    plain(torch.ones(2))
    assert GenerationTracker.generation - g0 == 2


def test_unsupported_python_version_says_what_to_do():
    """On an interpreter ember does not capture on (3.13 here, when this machine has one), both
    building and importing stop with a message naming the versions to use."""
    import glob
    import subprocess
    import sys
    cands = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    if not cands:
        pytest.skip("no CPython 3.13 on this machine")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([cands[0], "-c", "import ember"], capture_output=True, text=True, cwd=root)
    assert r.returncode != 0 and "ember captures on CPython 3.11 and 3.12" in r.stderr, r.stderr[-500:]
    r = subprocess.run([cands[0], "setup.py", "-q", "build_ext", "--dry-run"], capture_output=True, text=True, cwd=root)
    assert r.returncode != 0 and "build with a 3.11 or 3.12 interpreter" in r.stderr, r.stderr[-500:]
    assert sys.version_info[:2] in ((3, 11), (3, 12))


def test_warning_from_code_whose_globals_have_no_loader(tmp_path):
    """A program executed from a file into fresh globals (__loader__ and __spec__ both None, as a
    test runner or fuzzer may do) calling a function ember gives up on: the EmberWarning at that
    call site stays a warning, never an exception (3.12's warnings refuse such module globals)."""
    path = str(tmp_path / "hand_run.py")
    src = ("import threading\n"
           "LOCK = threading.Lock()\n"
           "def f(x):\n"
           "    with LOCK:\n"
           "        for i in range(2):\n"
           "            print(end='')\n"
           "            x = x + i\n"
           "    return x\n"
           "def run(cf, x):\n"
           "    return cf(x)\n")
    with open(path, "w") as fh:
        fh.write(src)
    g = {"__name__": "hand_run", "__loader__": None, "__spec__": None, "__file__": path}
    exec(compile(src, path, "exec"), g)
    cf = ember.compile(g["f"])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        torch.testing.assert_close(g["run"](cf, torch.ones(2)), torch.ones(2) + 1)
    assert any(issubclass(w.category, ember.EmberWarning) for w in rec)


def test_warning_in_a_script_read_from_stdin():
    """`python - < script.py`: __main__'s loader (BuiltinImporter) cannot give the source, so
    the EmberWarning at the call site is shown without its line, not replaced by an ImportError."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = ("import threading, torch, ember\n"
           "LOCK = threading.Lock()\n"
           "def f(x):\n"
           "    with LOCK:\n"
           "        for i in range(2):\n"
           "            x = x + float(x.sum().item())\n"
           "    return x\n"
           "print(ember.compile(f)(torch.ones(2)).tolist())\n")
    r = subprocess.run([sys.executable, "-"], input=src, capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, PYTHONPATH=root), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[9.0, 9.0]", r.stdout
    assert "EmberWarning" in r.stderr and "ImportError" not in r.stderr, r.stderr[-2000:]


def test_fullgraph_uncaught_exception_is_named_as_observed():
    # an exception the traced code raises and does not catch: under fullgraph, Unsupported says
    # so (TorchDynamo's "Observed exception"); without fullgraph the raise runs as Python
    def f(x):
        return {"a": x} | 1

    with pytest.raises(ember.Unsupported, match=r"Observed exception.*TypeError"):
        ember.compile(f, fullgraph=True)(randn(2))
    with pytest.raises(TypeError):
        ember.compile(f)(randn(2))
