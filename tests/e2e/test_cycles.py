"""Walks over user values survive cycles and deep nesting: a self-referential list read by a
compiled function, lists built while tracing that hold themselves, deeply nested inputs. The
result is always eager's (the trace aborts or treats the value as opaque; it never crashes).
"""
import torch

import ember


def check(f, *args):
    want = f(*args)
    got = ember.compile(f)(*args)
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        assert torch.equal(got, want)
    else:
        assert repr(got) == repr(want)


def test_self_referential_list_input():
    root = []
    root.append(root)
    check(lambda x: x + len(root[0]), torch.ones(1))
    check(lambda x, r: x + len(r[0][0]), torch.ones(1), root)


def test_cycle_through_dict_and_tuple():
    d = {"a": []}
    d["a"].append(d)
    check(lambda x, d: x + len(d["a"]), torch.ones(1), d)


def test_list_made_while_tracing_holds_itself():
    def f(x):
        l = [x]
        l.append(l)
        return l[1][1][0] + len(l), torch.stack([l[0], l[1][0]])
    x = torch.ones(2)
    want, got = f(x), ember.compile(f)(x)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])


def test_deeply_nested_input():
    v = [torch.ones(1)]
    for _ in range(5000):
        v = [v]
    def f(x, v):
        n = 0
        while isinstance(v, list):
            v = v[0]
            n += 1
        return x + n
    check(f, torch.ones(1), v)
    check(lambda x, v: x + len(v), torch.ones(1), v)


def test_list_holding_itself_given_to_ops_and_builtins():
    def f(x):
        l = [x]
        l.append(l)
        n = len(l)
        try:
            torch.cat(l)
        except TypeError:
            n += 10
        return x + n
    check(f, torch.ones(2))


def test_shared_tuples_along_a_deep_chain():
    def f(x):
        t = (1,)
        for _ in range(40):
            t = (t, t)
        u, d = t, 0
        while len(u) == 2:
            u, d = u[1], d + 1
        return x + d, t[0][0][0]
    x = torch.ones(2)
    want, got = f(x), ember.compile(f)(x)
    assert torch.equal(want[0], got[0])
    a, b = want[1], got[1]  # (== on two such tuples is exponential in CPython itself)
    while len(a) == 2:
        assert len(b) == 2
        a, b = a[0], b[0]
    assert a == b


def test_dict_view_operations():
    d = {"a": 1, "b": 2}

    def f(x):
        k = d.keys()
        return x + 1, k - {"a"}, k | {"c"}, len(k), "b" in k, sorted(d.values())
    check(f, torch.ones(2))

    def g(x):
        try:
            d.keys() + d.keys()
        except TypeError:
            return x - 1
        return x + 1
    check(g, torch.ones(2))
