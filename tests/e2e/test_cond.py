"""torch.cond with a tensor predicate: one graph op that runs the branch the predicate selects
(csrc/trace/em_hop.c), on ember's executor and on Python backends (torch.ops.higher_order.cond),
with gradients; branches that change state, return aliases or differ in metadata break the
graph and eager's torch.cond runs (tests/e2e/test_higher_order.py runs those in processes of
their own, since eager's torch.cond calls TorchDynamo)."""
import pytest
import torch

import ember
from tests.helpers import assert_same, clone_tree, counters, randn


def two_outputs(x, y):
    def t(a, b):
        return (a.sin() * b, a + 1)

    def e(a, b):
        return (a.cos() - b, a * 2)

    z = x * 2
    u, v = torch.cond(z.sum() > 0, t, e, (z, y))
    return u + v, torch.cond(y[0] > 0, lambda a: [a.exp()], lambda a: [a.tanh()], [y])


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_cond_is_one_graph_and_picks_the_branch_each_call(backend):
    cf = ember.compile(two_outputs, backend=backend, fullgraph=True)
    for sign in (1.0, -1.0, 1.0):
        args = (randn(3, requires_grad=True) * sign, randn(3, seed=1, requires_grad=True) * sign)
        args = tuple(a.detach().requires_grad_() for a in args)
        ea, ca = clone_tree(args), clone_tree(args)
        want, got = two_outputs(*ea), cf(*ca)
        assert_same(got, want)
        (want[0].sum() + want[1][0].sum()).backward()
        (got[0].sum() + got[1][0].sum()).backward()
        for g, e in zip(ca, ea):
            assert_same(g.grad, e.grad)
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c


def closures(x, w):
    y = x * 2
    k = 3

    def t(v):
        return (v * w).sin() + y * k

    def e(v):
        return v.cos() - y

    return torch.cond(x.sum() > 0, t, e, (x,))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_cond_branches_closing_over_tensors_and_constants_are_one_graph(backend):
    """Cells of branches made in the trace hold graph values: the op makes the branch again
    around them each call (Python backends get them as lifted operands)."""
    cf = ember.compile(closures, backend=backend, fullgraph=True)
    for sign in (1.0, -1.0, 1.0):
        x, w = randn(3).abs() * sign, randn(3, seed=1)
        xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        want, got = closures(xe, we), cf(xc, wc)
        assert_same(got, want)
        want.sum().backward()
        got.sum().backward()
        # eager's cond gives every input a gradient: zeros for w when the branch using it is not taken
        assert_same((xc.grad, wc.grad), (xe.grad, we.grad))
    c = counters()
    assert (c["frames"], c["breaks"]) == (1, 0), c


def test_cond_gives_unused_operands_a_zero_gradient_as_eager():
    def f(x, w):
        return torch.cond(x.sum() > 0, lambda a, b: a * b, lambda a, b: a.cos(), (x, w))

    for sign in (1.0, -1.0):
        x, w = randn(3).abs() * sign, randn(3, seed=1)
        args_e = (x.clone().requires_grad_(), w.clone().requires_grad_())
        args_c = (x.clone().requires_grad_(), w.clone().requires_grad_())
        f(*args_e).sum().backward()
        ember.compile(f, fullgraph=True)(*args_c).sum().backward()
        assert_same([a.grad for a in args_c], [a.grad for a in args_e])


def test_cond_branch_closing_over_an_object_breaks_and_matches_eager():
    lin = torch.nn.Linear(3, 3)

    def f(x):
        m = lin

        def t(v):
            return m(v)

        return torch.cond(x.sum() > 0, t, lambda v: v * 2, (x,))

    x = randn(3)
    assert_same(ember.compile(f)(x), f(x))


def test_branches_of_the_frame_with_closures_are_guarded_by_identity():
    # eager torch.cond compiles a call of torch.ops.higher_order.cond on the branches it was
    # given: functions of the caller, closing over its variables
    from torch._higher_order_ops.cond import cond_op

    def make(k):
        return (lambda x: x.sin() + k), (lambda x: x.cos() - k)

    def f(p, x, tf, ff):
        return cond_op(p, tf, ff, [x]) * 2

    cf = ember.compile(f, fullgraph=True)
    for k in (1, 2):
        tf, ff = make(k)
        for p in (True, False, True):
            assert_same(cf(torch.tensor(p), randn(3), tf, ff), f(torch.tensor(p), randn(3), tf, ff))
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["recompiles"], c["hits"]) == (2, 0, 0, 1, 4), c
