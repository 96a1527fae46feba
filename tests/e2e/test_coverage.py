"""Ordinary Python that must be a graph ([coverage]): list and dict methods on containers made
while tracing, queries of torch's global state. Each case is one graph (fullgraph=True) whose
results equal eager's, or raises what eager raises."""

import pytest
import torch

import ember
from tests.helpers import assert_same, counters, randn


def one_graph(fn, *args):
    """fn(*args) under fullgraph=True, twice: equal to eager's (assert_same: Python values
    exactly), one frame with no break, the second call a cache hit."""
    want = fn(*args)
    cf = ember.compile(fn, fullgraph=True)
    for _ in range(2):
        got = cf(*args)
        assert_same(got, want)
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["hits"]) == (1, 0, 0, 1), c
    return got


def test_list_remove_clear_reverse_sort_extend():
    def f(x):
        a = [1, 2, 3]
        a.insert(0, 5)
        a.extend([6])
        a.remove(2)
        a.sort()
        a.reverse()
        p = a.pop()
        t = [x, x + 1, x * 2]
        t.reverse()
        t.extend((x - 1,))
        t.extend(range(2))  # any iterable the trace knows
        t.extend({"k": 0}.values())
        t.remove(t[0])  # found by identity before any tensor is compared
        q = [3, 1.5, 2, True, -4]
        q.sort()
        w = ["b", "a", "c"]
        w.sort()
        c = [x]
        c.clear()
        return x * p + t[0] + t[2], a, q, w, len(c), len(t)

    one_graph(f, randn(3))


def test_list_sort_is_stable_and_keeps_the_objects():
    def f(x):
        vals = [2.0, 1, 2, 1.0, True]  # equal values keep their order (1, 1.0, True; 2.0, 2)
        vals.sort()
        return x, vals, [type(v).__name__ for v in vals]

    got = one_graph(f, randn(2))
    assert got[2] == ["int", "float", "bool", "float", "int"]


def test_list_extend_with_itself_doubles_once():
    def f(x):
        a = [x, 1]
        a.extend(a)
        return a

    one_graph(f, randn(2))


def test_list_remove_missing_raises_as_python():
    def f(x):
        a = [1, 2]
        try:
            a.remove(3)
        except ValueError as e:
            return x + 1, str(e)
        return x, ""

    one_graph(f, randn(2))


def test_list_sort_of_tensors_or_incomparable_values_is_not_captured():
    def tensors(x):
        a = [x, x + 1]
        a.sort()
        return a

    def mixed(x):
        a = [1, "a"]
        try:
            a.sort()
        except TypeError:
            return x
        return x + 1

    x = randn(3)
    with pytest.raises(ember.Unsupported, match="list.sort of a tensor"):
        ember.compile(tensors, fullgraph=True)(x)
    assert_same(ember.compile(mixed)(x), mixed(x))  # runs as Python does


def test_dict_popitem_and_clear():
    def f(x):
        d = {"a": 1, "b": x}
        k, v = d.popitem()
        e = dict(d, c=x * 2)
        e.clear()
        d["z"] = v + 1
        return k, v, d, len(e)

    one_graph(f, randn(2))


def test_dict_popitem_empty_raises_key_error():
    def f(x):
        try:
            {}.popitem()
        except KeyError as e:
            return x * 2, e.args
        return x, ()

    one_graph(f, randn(2))


def test_tensor_in_a_list_by_identity():
    def f(x):
        y = x + 1
        lst = [x, y]
        return x in lst, y in (y,), 3 in [1, 3], lst.index(x), lst.count(1) if False else 0

    one_graph(f, randn(2))


def test_input_list_methods_stay_python():
    """A mutation of a list read from the frame is not replayed yet: the frame falls back (or
    breaks), never changes the caller's list differently from eager."""
    def f(x, lst):
        lst.sort()
        lst.reverse()
        return x * lst[0]

    a, b = [3, 1, 2], [3, 1, 2]
    cf = ember.compile(f)
    assert_same(cf(randn(2), a), f(randn(2), b))
    assert a == b


def test_autocast_state_queries_are_guarded_constants():
    """torch functions answering about autocast's state are constants of the trace, which the
    global-state guard checks (a change recompiles)."""
    def f(x):
        on = torch._C._is_any_autocast_enabled()
        dt = torch.get_autocast_dtype("cpu") if on else None
        return (x * 2 if on else x + 1), dt, torch.is_autocast_cpu_enabled()

    cf = ember.compile(f, fullgraph=True)
    x = randn(3)
    assert_same(cf(x), f(x))
    for dt in (torch.bfloat16, torch.float16):
        with torch.autocast("cpu", dtype=dt):
            assert_same(cf(x), f(x))
    assert_same(cf(x), f(x))
    c = counters()
    assert c["frames"] == 3 and c["breaks"] == 0
