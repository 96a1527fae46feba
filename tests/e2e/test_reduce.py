"""functools.reduce while tracing (em_known.def's reduce row): the function is called on the
running value and each item in turn, as traced calls, so a reduction over tensors, shapes or
modules is one graph. Each case is compared with eager; what ember cannot take falls back.
"""

import functools
import operator

import pytest
import torch

import ember
import ember.testing
from tests.helpers import exact_graph, one_graph, randn


def one_graph_fg(fn, *args, calls=2):
    return one_graph(fn, *args, calls=calls, fullgraph=True)


def outcome(fn, *args):
    """(result, None) or (None, (exception type, message))."""
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - the outcome itself is compared
        return None, (type(e), str(e))


def test_reduce_over_tensors_with_a_torch_function():
    def f(x, y):
        return functools.reduce(torch.add, [x, y, x * y])

    one_graph_fg(f, randn(3, 4), randn(3, 4, seed=1))


def test_reduce_with_an_inlined_lambda_and_operator():
    def f(a, b, c):
        prod = functools.reduce(lambda p, q: p @ q, [a, b, c])
        return functools.reduce(operator.add, (prod, a), c)

    one_graph_fg(f, randn(4, 4), randn(4, 4, seed=1), randn(4, 4, seed=2))


def test_reduce_over_a_shape_is_a_constant():
    def f(x):
        return x.reshape(functools.reduce(operator.mul, x.shape, 1), 1).sum(0)

    one_graph_fg(f, randn(2, 3, 4))


def test_reduce_over_a_generator_and_a_dict():
    d = {"a": randn(3), "b": randn(3, seed=1)}

    def f(x):
        s = functools.reduce(lambda acc, t: acc + t.relu(), (x * k for k in range(1, 4)))
        return functools.reduce(lambda acc, k: acc * d[k], d, s)

    one_graph_fg(f, randn(3, seed=2))


def test_reduce_of_one_item_returns_it_and_of_none_the_initial():
    def f(x):
        one = functools.reduce(torch.mul, [x])
        none = functools.reduce(torch.mul, [], x + 1)
        return one, none, one is x

    one_graph_fg(f, randn(3))


def test_reduce_takes_items_lazily_from_an_iterator_its_function_also_advances():
    def f(x):
        it = iter([x, x * 2, x * 3, x * 4, x * 5])

        def step(acc, item):
            return acc + item * next(it, x).sum()

        return functools.reduce(step, it)

    one_graph_fg(f, randn(3))


def test_reduce_of_an_empty_iterable_raises_as_python_does():
    def f(x):
        try:
            functools.reduce(torch.add, [])
        except TypeError as e:
            return x + len(str(e))
        return x

    one_graph_fg(f, randn(3))

    def g(x):
        return functools.reduce(torch.add, (), *x)

    assert outcome(ember.compile(g), ()) == outcome(g, ())
    assert outcome(ember.compile(g), (randn(3),))[0] is not None


@pytest.mark.parametrize("case", ["keyword", "data_dependent", "not_iterable"])
def test_reduce_it_cannot_take_falls_back_with_eager_results(case):
    def keyword(x):
        return functools.reduce(torch.add, [x, x], initial=x)  # a TypeError before Python 3.14

    def data_dependent(x):
        return functools.reduce(lambda a, b: a + b if b.sum().item() > 0 else a - b, [x, x + 1, x + 2])

    def not_iterable(x):
        return functools.reduce(torch.add, torch.add, x)

    fn = {"keyword": keyword, "data_dependent": data_dependent, "not_iterable": not_iterable}[case]
    x = randn(3)
    want, want_exc = outcome(fn, x)
    got, got_exc = outcome(ember.compile(fn), x)
    assert got_exc == want_exc
    if want_exc is None:
        torch.testing.assert_close(got, want)
    ember.reset()
    with pytest.raises((ember.Unsupported, TypeError)):
        ember.compile(fn, fullgraph=True)(x)


def test_reduce_over_a_list_its_function_grows():
    """reduce's iterator reads the list at each step, as CPython's: items the function appends
    are reduced too (this aborted before list iterators read a changing list)."""
    def growing_list(x):
        items = [x, x + 1]

        def grow(a, b):
            if len(items) < 4:
                items.append(b * 2)
            return a + b

        return functools.reduce(grow, items), len(items)

    exact_graph(growing_list, randn(3))
