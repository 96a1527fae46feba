"""ember/_rules.py: the facts it shares with the C tracer come from C, and its policies."""
import types

import torch

import ember
import ember.testing
from ember import _C, _rules


def test_rule_numbers_are_the_tracers():
    """_rules' rule names are the tracer's rule numbers (csrc/trace/em_rules.def, _C.RULE_*)."""
    c = {k[len("RULE_"):]: v for k, v in vars(_C).items() if k.startswith("RULE_")}
    assert c == {name: getattr(_rules, name) for name in c}
    assert sorted(c.values()) == list(range(len(c)))
    assert {"UNKNOWN", "GRAPH", "CONST", "ABORT", "META_QUERY", "TRUE", "CTX"} <= set(c)


def _module(name, **attrs):
    m = types.ModuleType(name)
    vars(m).update(attrs)
    return m


def test_trusted_modules_by_exact_name_or_dotted_prefix():
    for name in ("torch", "torch.nn.functional", "torch._VF", "numpy", "numpy.linalg", "math", "operator",
                 "builtins"):
        assert _rules.trusted_module(_module(name)), name
    for name in ("torchvision", "torchvision_fake", "torchfoo", "torch_geometric", "numpyro", "mathx", "_operator",
                 "my.torch", ""):
        assert not _rules.trusted_module(_module(name)), name
    nameless = _module("x")
    del vars(nameless)["__name__"]
    assert not _rules.trusted_module(nameless)
    assert _rules.torch_module(_module("torch._VF")) and not _rules.torch_module(_module("torchvision.ops"))


def _scaled_by(module):
    g = {"m": module, "torch": torch}
    exec("def f(x):\n    return torch.relu(x) * m.scale\n", g)
    return g["f"]


def test_module_named_like_torch_is_guarded():
    """A module whose name only starts with "torch" is not torch's: its attributes are guarded,
    so a changed value is seen (it was baked into the graph as a constant)."""
    m = _module("torchvision_fake", scale=2)
    f = _scaled_by(m)
    cf = ember.compile(f)
    x = torch.ones(2)
    assert torch.equal(cf(x), f(x))
    m.scale = 3
    assert torch.equal(cf(x), f(x))
    assert len(ember.testing.entries(f)) == 2


def test_torch_module_attributes_stay_unguarded():
    """Attributes of torch's modules are read without guards (README, limitations): no guard on
    torch.relu, one compile."""
    f = _scaled_by(_module("torchfoo", scale=2))
    ember.compile(f)(torch.ones(2))
    guards = ember.testing.entries(f)[0]["guards"]
    assert "G['m'].scale" in guards and "relu" not in guards


def test_torch_dynamo_test_case_methods_are_inlined_and_re_searches_are_constants():
    import re

    import pytest
    pytest.importorskip("expecttest")
    import torch._dynamo.test_case as tc

    assert _rules.classify(tc.TestCase.assertEqual) == _rules.UNKNOWN  # Python code, inlined
    assert _rules.classify(torch._dynamo.graph_break) == _rules.ABORT  # TorchDynamo's machinery
    assert _rules.RULES[re.Pattern.search] == _rules.CONST
    assert re.Pattern.sub not in _rules.RULES  # a callable replacement would run while tracing
    assert _rules.is_const(re.compile("a").search("a"))
