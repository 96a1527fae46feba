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
