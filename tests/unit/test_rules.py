"""ember/_rules.py: the facts it shares with the C tracer come from C, and its policies."""
from ember import _C, _rules


def test_rule_numbers_are_the_tracers():
    """_rules' rule names are the tracer's rule numbers (csrc/trace/em_rules.def, _C.RULE_*)."""
    c = {k[len("RULE_"):]: v for k, v in vars(_C).items() if k.startswith("RULE_")}
    assert c == {name: getattr(_rules, name) for name in c}
    assert sorted(c.values()) == list(range(len(c)))
    assert {"UNKNOWN", "GRAPH", "CONST", "ABORT", "META_QUERY", "TRUE", "CTX"} <= set(c)
