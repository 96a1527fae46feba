"""`is` between arguments (and what depends on it: `==` by identity, `in`) is decided per call:
the trace's answer is guarded by the arguments staying distinct (or the same) objects."""

import pytest
import torch

import ember
import ember.testing


class Plain:
    pass


# each returns a tensor, so that ember compiles a graph (a frame without tensor ops runs as Python)
def is_op(a, b, t):
    return t * (1 if a is b else 2)


def is_not_op(a, b, t):
    return t * (1 if a is not b else 2)


def eq_op(a, b, t):
    return t * (1 if a == b else 2)


def in_list(a, b, t):
    return t * (1 if a in [b] else 2)


def tensor_is(x, y):
    return x * 10 if x is y else x + y


def big(n):
    return int("1" * n)  # an int not cached by CPython: equal values, distinct objects


MAKERS = {"object": Plain, "tensor": lambda: torch.ones(2), "str": lambda: "".join(["ab", "c"]),
          "int": lambda: big(30)}


CASES = [(fn, kind) for fn in (is_op, is_not_op, eq_op, in_list) for kind in sorted(MAKERS)
         if kind != "tensor" or fn in (is_op, is_not_op)]  # a tensor's == is elementwise


@pytest.mark.parametrize("fn,kind", CASES, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_identity_between_arguments_follows_each_call(fn, kind, backend):
    """An answer that depends on whether two arguments are the same object holds only while
    they are: distinct objects first, then one object twice, then distinct again."""
    make = MAKERS[kind]
    cf = ember.compile(fn, backend=backend)
    a, b = make(), make()
    c = make()
    t = torch.ones(2)
    for x, y in ((a, b), (c, c), (a, b), (c, c)):
        torch.testing.assert_close(cf(x, y, t), fn(x, y, t))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensor_identity_between_arguments(backend):
    cf = ember.compile(tensor_is, backend=backend)
    a, b, c = torch.ones(3), torch.ones(3), torch.full((3,), 2.0)
    for x, y in ((a, b), (c, c), (a, b), (c, c)):
        torch.testing.assert_close(cf(x, y), tensor_is(x, y))


@pytest.mark.parametrize("order", ["same_first", "distinct_first"])
def test_equal_constants_identity_in_any_call_order(order):
    """Two equal values passed as one object or as two objects: the `is` answer of each call
    is eager's whichever case was compiled first (constants are guarded by value, so the
    identity needs its own guard)."""
    cf = ember.compile(is_op)
    a, b = big(40), big(40)
    calls = [(a, a), (a, b)] if order == "same_first" else [(a, b), (a, a)]
    t = torch.ones(2)
    for x, y in calls * 2:
        torch.testing.assert_close(cf(x, y, t), is_op(x, y, t))
    assert len(ember.testing.entries(cf)) == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_contiguous_is_the_tensor_itself_when_contiguous(backend):
    """x.contiguous() returns x itself when x is contiguous (a copy otherwise), under ember too."""
    def f(x):
        y = x.contiguous()
        z = y * 2
        return z, y is x, y

    for x in (torch.randn(3, 4), torch.randn(4, 3).t(), torch.randn(2, 1, 3)[:, :, 1:]):
        want = f(x)
        got = ember.compile(f, backend=backend)(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
        assert (got[2] is x) == (want[2] is x)
        assert got[2].stride() == want[2].stride()
