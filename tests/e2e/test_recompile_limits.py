"""Recompile limits: a stream of new shapes through a function that calls helpers (each
with a graph break, so every helper and resume function is a code object with its own
cache) compiles a bounded number of times. At cache_size_limit (entries per code) or at
accumulated_recompile_limit (compiles of the outermost compiled frame and everything it
calls) that function and everything it calls run as plain Python, with one warning naming
the function, the limit and what to do, and a line under EMBER_LOGS=recompiles."""
import warnings

import pytest
import torch

import ember
import ember.testing


def h1(x):
    y = x * 2
    print(end="")  # graph break
    return y + 1


def h2(x):
    y = x.sin()
    print(end="")
    return y * 3


def outer(x):
    a = h1(x)
    print(end="")
    b = h2(a)
    return b.cos() + a


def shapes(start, stop):
    for n in range(start, stop):
        yield torch.randn(n, n % 5 + 1)


@pytest.fixture
def limits():
    saved = ember.config.cache_size_limit, ember.config.accumulated_recompile_limit
    yield
    ember.config.cache_size_limit, ember.config.accumulated_recompile_limit = saved
    ember.set_logs("")


def run_stream(f, xs):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for x in xs:
            torch.testing.assert_close(f(x), outer(x))
    return [str(w.message) for w in rec if issubclass(w.category, ember.EmberWarning)]


def compiles():
    c = ember.testing.counters()
    return c["frames"] + c["aborts"] - c["fallbacks"]  # attempts: successful or given up


def test_accumulated_limit_bounds_compiles_of_a_frame_and_its_callees(limits, capfd):
    ember.config.accumulated_recompile_limit = 12
    ember.set_logs("recompiles")
    f = ember.compile(outer)
    msgs = run_stream(f, shapes(1, 40))
    assert compiles() <= 12, ember.testing.counters()
    assert ember.testing.code_state(outer)["tree_compiles"] == 12
    limit_msgs = [m for m in msgs if "accumulated_recompile_limit" in m]
    assert len(limit_msgs) == 1, msgs
    assert "outer" in limit_msgs[0] and "(12)" in limit_msgs[0] and "raise the limit" in limit_msgs[0]
    err = capfd.readouterr().err
    assert "[ember:recompiles] outer" in err and "accumulated_recompile_limit (12) reached" in err
    state = ember.testing.code_state(outer)
    assert state["mode"] == "fallback" and state["callees_plain"], state
    # past the limit nothing compiles, whatever comes, and results stay right
    before = ember.testing.counters()
    assert run_stream(f, shapes(40, 70)) == []
    after = ember.testing.counters()
    assert (after["frames"], after["aborts"]) == (before["frames"], before["aborts"])


def outer_k(x, k):
    y = x * k  # guarded on k before the first break; the helpers see only y's shape
    return h2(h1(y))


def test_cache_size_limit_of_the_outer_frame_stops_its_callees_too(limits):
    """The outer frame reaches its own limit on a value its helpers do not see; after that,
    new shapes compile nothing in the helpers either (before, each went on to fill its own
    cache)."""
    ember.config.cache_size_limit = 3
    f = ember.compile(outer_k)
    x = torch.randn(4, 2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for k in range(5):
            torch.testing.assert_close(f(x, k), outer_k(x, k))
        entries = {fn: ember.testing.code_state(fn)["entries"] for fn in (h1, h2)}
        assert entries == {h1: 1, h2: 1}
        for xs in shapes(5, 30):
            torch.testing.assert_close(f(xs, 10), outer_k(xs, 10))
    msgs = [str(w.message) for w in rec if issubclass(w.category, ember.EmberWarning)]
    assert len(msgs) == 1 and "cache_size_limit (3)" in msgs[0] and "outer_k" in msgs[0], msgs
    assert {fn: ember.testing.code_state(fn)["entries"] for fn in (h1, h2)} == entries
    state = ember.testing.code_state(outer_k)
    assert state["mode"] == "fallback" and state["callees_plain"] and state["entries"] == 3, state


def test_default_limits_bound_a_stream_of_shapes(limits):
    f = ember.compile(outer)
    run_stream(f, shapes(1, 80))
    n = compiles()
    # outer, its resume functions (a break at each helper call and at print), h1, h2 and
    # theirs: at most cache_size_limit entries each, once the outer frame stops no more
    codes = ember._C._seen_codes()
    assert len(codes) <= 8, codes
    assert n <= len(codes) * ember.config.cache_size_limit, ember.testing.counters()
    run_stream(f, shapes(80, 120))
    assert compiles() == n


def test_a_callee_still_compiles_where_it_is_called_from_elsewhere(limits):
    ember.config.accumulated_recompile_limit = 4
    run_stream(ember.compile(outer), shapes(1, 10))
    assert ember.testing.code_state(outer)["callees_plain"]
    g = ember.compile(h1)
    x = torch.randn(50, 2)
    before = ember.testing.counters()["frames"]
    torch.testing.assert_close(g(x), h1(x))
    assert ember.testing.counters()["frames"] > before


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_accumulated_limit_rejects_bad_values(bad, limits):
    with pytest.raises(ValueError):
        ember.config.accumulated_recompile_limit = bad
    assert ember.config.accumulated_recompile_limit == 256
