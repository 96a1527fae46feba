"""Small tensors whose values the trace knows (csrc/trace/em_fold.c): a tensor of at most one
element made by a pure torch op from constants, or from such tensors (torch.div(n, 8,
rounding_mode="trunc") - 1), is computed for real while tracing, so reading its value (a size
argument, int(), .item(), `if t:`, range()) is no graph break. Each case is compared with eager;
writes that the trace does not run for real make it forget the values (never a stale size)."""

import pytest
import torch

import ember
import ember.testing
from tests.helpers import assert_same, counters, randn
from tests.helpers import exact_graph as one_graph


def _graph_text(fn):
    return "\n".join(str(e["graph"]) for e in ember.testing.entries(fn))


def test_div_of_sizes_is_a_size():  # transformers' Longformer/LED chunking
    def f(x):
        n = torch.div(x.size(1), 4, rounding_mode="trunc")
        chunks = torch.div(x.size(1), 4, rounding_mode="trunc") - 1
        y = x.view(x.size(0), n, 4)
        z = y.new_zeros((x.size(0), chunks + 1, 4))
        s = list(y.size())
        s[1] = s[1] * 2 - 1
        return y * n + z, s

    one_graph(f, randn(3, 8))
    text = _graph_text(f)
    assert "view(%0, 3, 2, 4)" in text  # the value, not the tensor, is the graph's size
    assert "torch.full((), 2" in text  # the tensor of constants: a factory (see test_aot_backends)


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_aot_backends_take_folded_graphs(backend):
    def f(x):
        c = torch.div(x.size(1), 4, rounding_mode="trunc")
        c.sub_(1)  # in place on a tensor of no tensor: compiles once it is a factory
        k = torch.full((), x.shape[0]) * 2
        return x.view(x.size(0), c, -1) + c, torch.arange(k) + x.sum()

    x = randn(3, 8)
    want = f(x)
    cf = ember.compile(f, backend=backend, fullgraph=True)
    for _ in range(2):
        assert_same(cf(x), want, rtol=1e-6, atol=1e-6)


def test_reading_known_values_is_no_break():
    def f(x):
        c = torch.tensor(x.shape[1]) // 2
        t = torch.tensor(2.0).sqrt()
        r = [i * 2 for i in range(c)]
        out = x[:, : int(c)] * c.item() + float(t)
        if t > 1.4:
            out = out + 1
        if c == 4:
            out = out * 2
        return out, r, c.tolist(), bool(c)

    one_graph(f, randn(3, 8))


def test_in_place_ops_on_known_values_run_for_real():
    def f(x):
        c = torch.div(x.size(1), 4, rounding_mode="trunc")
        c.sub_(1)
        d = c.clone()
        d += 2
        v = d.view(1)  # a view folded: it sees the write below
        d.mul_(2)
        e = torch.tensor([5, 6])[1]  # one element of a tensor the trace does not fold
        return x.view(v.item(), -1), c, d, v, e

    one_graph(f, randn(2, 12))


def _stale(*fns):
    """Each fn writes its known tensor with a value only the run knows: the trace must not keep
    the old value (the size would be wrong: eager raises or reshapes differently)."""
    for f in fns:
        ember.reset()
        x = randn(2, 12)
        want = f(x)
        got = ember.compile(f)(x)
        assert_same(got, want)


def test_writes_the_trace_does_not_run_forget_known_values():
    def through_folded_view(x):
        c = torch.div(x.size(1), 4, rounding_mode="trunc")  # 3
        c.view(1).add_((x.sum() > -1e9).long())  # 4 at run time
        return x.view(x.size(0), c, -1)

    def through_unfolded_view(x):
        c = torch.div(x.size(1), 4, rounding_mode="trunc")
        c[None].add_((x.sum() > -1e9).long())
        return x.view(x.size(0), c, -1)

    def out_arg(x):
        c = torch.tensor(3)
        torch.add(c, (x.sum() > -1e9).long(), out=c)
        return x.view(x.size(0), c, -1)

    def setitem(x):
        c = torch.tensor([3])
        c[0] = (x.sum() > -1e9).long() + 3
        return x.view(x.size(0), int(c), -1)

    def copy(x):
        c = torch.tensor(3)
        c.copy_((x.sum() > -1e9).long() + 3)
        return x.view(x.size(0), c, -1)

    def base_written(x):
        c = torch.tensor([3])
        v = c[0]  # folded: a real view of c
        c.add_((x.sum() > -1e9).long())
        return x.view(x.size(0), v, -1)

    _stale(through_folded_view, through_unfolded_view, out_arg, setitem, copy, base_written)


def test_random_values_are_not_folded():
    def f(x):
        r = torch.randint(1, 4, ())
        return x * int(r), r

    x = randn(3)
    cf = ember.compile(f)
    for seed in (0, 1, 2, 3):
        torch.manual_seed(seed)
        want = f(x)
        torch.manual_seed(seed)
        assert_same(cf(x), want)


def test_sizes_stay_guarded_and_symbolic_sizes_are_not_folded():
    def f(x):
        n = torch.div(x.size(1), 4, rounding_mode="trunc")
        return x.view(x.size(0), n, -1) * n

    for dynamic in (False, True):
        ember.reset()
        cf = ember.compile(f, dynamic=dynamic)
        for cols in (8, 12, 16, 12):
            x = randn(2, cols)
            assert_same(cf(x), f(x))


def test_empty_and_float_known_tensors():
    def f(x):
        e = torch.tensor([], dtype=x.dtype)  # known, zero elements
        h = torch.tensor(0.1, dtype=torch.float16) * 3
        return torch.cat([e, x]) * h, float(h)

    one_graph(f, randn(4))


def test_fold_counts_against_torch_dynamo():
    """The Longformer/LED pattern is one graph, as TorchDynamo's (its FakeTensor constants)."""
    def f(x):
        seq_len = x.size(1)
        chunks_count = torch.div(seq_len, 4, rounding_mode="trunc") - 1
        y = x.reshape(x.size(0), torch.div(seq_len, 4, rounding_mode="trunc"), 4)
        z = y.new_zeros((x.size(0), chunks_count + 1, 4, 9))
        return y.sum() + z.sum()

    one_graph(f, randn(2, 16))
    c = counters()
    assert c["breaks"] == 0


def test_ops_that_may_write_their_arguments_forget_known_values():
    def foreach(x):
        c = torch.tensor([3])
        torch._foreach_add_([c], [(x.sum() > -1e9).long()])  # writes c, not through its first argument
        return x.view(x.size(0), int(c), -1)

    def batch_norm_stats(x):
        mean, var = torch.zeros(1), torch.ones(1)
        torch.nn.functional.batch_norm(x.reshape(-1, 1), mean, var, training=True, momentum=1.0)
        return x * mean.item(), var

    _stale(foreach, batch_norm_stats)


def test_sequences_indexed_by_known_tensors():
    def f(x):
        idx = torch.tensor(1)
        dim_size = x.shape[idx]  # the index __index__ gives, as the tuple's subscript takes it
        return x.reshape(-1, dim_size), [10, 20, 30][idx + 1], (4, 5, 6)[idx], "abc"[idx]

    one_graph(f, randn(2, 3, 4))

    def g(x):
        return (4, 5)[torch.tensor(1.0)]  # not an integer: Python's TypeError

    with pytest.raises(TypeError):
        g(randn(2))
    with pytest.raises(TypeError):
        ember.compile(g)(randn(2))
