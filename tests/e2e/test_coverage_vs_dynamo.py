"""[coverage] acceptance: for constructs of issue 16, ember's graphs and breaks on a function are
no more than TorchDynamo's (torch.compile with a counting backend) on the same function, and
ember's results equal eager's."""

import collections
import functools
import itertools

import pytest
import torch
import torch._dynamo.testing

import ember
from tests.helpers import assert_same, counters, randn


def _gen_send(x):
    def g():
        v = yield 1
        yield v * 2

    it = g()
    return x * (next(it) + it.send(3))


def _closure_cells(x):
    n = 0

    def inc():
        nonlocal n
        n += 1

    inc()
    inc()
    return x * n


def _containers(x):
    s = {1, 2}
    s.add(3)
    d = collections.defaultdict(list)
    d["k"].append(x)
    od = collections.OrderedDict(a=1)
    od.move_to_end("a")
    q = collections.deque([x])
    q.appendleft(x + 1)
    return d["k"][0] * len(s) + q.popleft(), dict.fromkeys("ab", 0)


def _lazy_builtins(x):
    ys = list(map(lambda t: t * 2, [x, x + 1]))
    zs = list(filter(lambda v: v > 1, [0, 1, 2, 3]))
    it = list(itertools.islice(itertools.count(), 3))
    return ys[0] + ys[1] + sum(zs) + sum(it)


def _ops_and_partial(x):
    p = functools.partial(torch.add, other=2)
    y = x.clone()
    torch.ops.aten.add_.Tensor(y, 1)
    return torch.ops.aten.sin(p(x)) + y, p.keywords["other"]


def _print_break(x):
    y = x * 2
    print("between")
    return y + 1


def _cells_across_break(x):
    k = x.sum()

    def scale(t):
        return t * k

    y = scale(x)
    print("between")
    k = k + 1
    return scale(y)



class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * t

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return 2 * g * t


def _autograd_function_with_grad(x):
    w = x.detach().requires_grad_()
    return _Square.apply(w) + torch.nn.ReLU()(x)


class _Gate(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.inner = torch.nn.Sequential(torch.nn.GELU(), torch.nn.Identity())

    def forward(self, t):
        return self.inner(t) * self.k


def _module_made_in_trace(x):
    return _Gate(2.0)(x) + torch.nn.ReLU()(x)


_LIN = torch.nn.Linear(3, 3)


def _data_store_of_a_parameter(x):
    with torch.no_grad():
        _LIN.weight.data = _LIN.weight.data * 1.0
    return _LIN(x)


class _Att:
    k = 3


def _classes_ids_weakrefs(x):
    import sys
    import weakref
    P = collections.namedtuple("P", ["a", "b"])
    p = P(x, 2)._replace(b=3)
    a, o = [1], _Att()
    r = weakref.ref(o)
    q = collections.deque([x, x + 1], maxlen=2)
    q.append(x * 2)
    ok = (id(a) == id(a), "k" in _Att.__dict__, r() is o, len(sys.intern("ab")))
    return p.a * p.b + q[0] + sum(ok)


CASES = [_gen_send, _closure_cells, _containers, _lazy_builtins, _ops_and_partial, _print_break, _cells_across_break,
         _autograd_function_with_grad, _module_made_in_trace, _data_store_of_a_parameter, _classes_ids_weakrefs]


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__.strip("_") for f in CASES])
def test_graphs_and_breaks_no_more_than_torch_compile(fn, capsys):
    x = randn(3)
    torch._dynamo.reset()
    cnt = torch._dynamo.testing.CompileCounter()
    torch.compile(fn, backend=cnt)(x)
    assert_same(ember.compile(fn)(x), fn(x))
    c = counters()
    graphs = c["graphs"]  # compiled frames whose graph has an op: TorchDynamo's frame_count
    assert c["aborts"] == 0 and graphs <= max(cnt.frame_count, 1), (c, cnt.frame_count)
    torch._dynamo.reset()
