"""`is` between arguments (and what depends on it: `==` by identity, `in`) is decided per call:
the trace's answer is guarded by the arguments staying distinct (or the same) objects."""

import pytest
import torch

import ember


class Plain:
    pass


def is_op(a, b):
    return 1 if a is b else 2


def is_not_op(a, b):
    return 1 if a is not b else 2


def eq_op(a, b):
    return 1 if a == b else 2


def in_list(a, b):
    return 1 if a in [b] else 2


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
    for x, y in ((a, b), (c, c), (a, b), (c, c)):
        expected = fn(x, y)
        got = cf(x, y)
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(got, expected)
        else:
            assert got == expected, (x is y)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensor_identity_between_arguments(backend):
    cf = ember.compile(tensor_is, backend=backend)
    a, b, c = torch.ones(3), torch.ones(3), torch.full((3,), 2.0)
    for x, y in ((a, b), (c, c), (a, b), (c, c)):
        torch.testing.assert_close(cf(x, y), tensor_is(x, y))
