"""Graphs a functional backend (AOTAutograd: aot_eager, Inductor) would get wrong run on ember's
executor instead, with eager's results: tensor metadata changed in place (requires_grad of an
input, detach_), out= that resizes its tensor, and inputs that share storage without being views
of one tensor (x and x.data across a graph break).
"""
import pytest
import torch

import ember
import ember.testing


def test_detach_in_place_on_an_input_clears_requires_grad():
    def fn(x):
        x.detach_()
        return x * 2
    x = torch.randn(3, requires_grad=True)
    out = ember.compile(fn, backend="aot_eager")(x)
    assert not x.requires_grad and not out.requires_grad


def test_out_argument_that_is_resized():
    def fn(x, z):
        torch.add(x, 1, out=z)
        return z * 2
    x = torch.randn(2, 3)
    z_e, z_c = torch.randn(3), torch.randn(3)
    with pytest.warns(UserWarning):  # torch warns that it resizes z
        expected = fn(x, z_e)
    got = ember.compile(fn, backend="aot_eager")(x, z_c)
    assert torch.equal(got, expected) and torch.equal(z_c, z_e)


def test_out_argument_resized_from_transposed_inputs_has_eagers_layout():
    # a TensorIterator kernel gives the resized out= tensor its inputs' layout where the meta
    # kernel makes it contiguous (fuzz 2704 #678: is_contiguous() took the wrong branch): the op
    # is not traced (a break), every layout query answers as eager
    def fn(y):
        t = torch.add(y, y, out=torch.empty(0))
        return (t * 2 if t.is_contiguous() else t.t()), t.stride()

    for y in (torch.randn(2, 3).t(), torch.randn(3, 2)):
        got, want = ember.compile(fn)(y), fn(y)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]
    ember.reset()
    with pytest.raises(ember.Unsupported, match="resizing its output"):
        ember.compile(fn, fullgraph=True)(torch.randn(2, 3).t())


def test_inputs_sharing_storage_without_a_view_relation():
    def fn(x):
        d = x.data
        c = x.chunk(2)
        x.add_(1)
        return c, d * 1
    x_e, x_c = torch.randn(1, 4), None
    x_c = x_e.clone()
    expected = fn(x_e)
    got = ember.compile(fn, backend="aot_eager")(x_c)
    torch.testing.assert_close(got, expected)
    assert torch.equal(x_c, x_e)


def test_views_of_one_input_mutated_through_another():
    def fn(x, y):
        x.add_(1)
        return y * 2
    cf = ember.compile(fn, backend="aot_eager")
    for _ in range(2):
        x = torch.zeros(4)
        assert torch.equal(cf(x, x[:2]), torch.full((2,), 2.0))


def test_in_place_shape_change_of_an_input():
    def fn(x, t):
        t.unsqueeze_(0)
        y = t.clamp(min=0.5)
        t.clamp_(min=0)
        return y * x.sum()
    x = torch.randn(3)
    t_e, t_c = torch.randn(3), None
    t_c = t_e.clone()
    expected = fn(x, t_e)
    got = ember.compile(fn, backend="aot_eager")(x, t_c)
    assert torch.equal(got, expected) and torch.equal(t_c, t_e) and t_c.shape == (1, 3)


def test_dead_value_at_a_graph_break_does_not_poison_gradients():
    # t / 0 is infinite; kept alive as an output of the first graph, its zero gradient times
    # an infinite derivative was NaN in x's gradient
    def fn(x):
        t = x * x
        dead = t / 0
        print("break")
        return (t * 3).sum()
    for backend in ("eager", "aot_eager"):
        x = torch.randn(2, requires_grad=True)
        ember.compile(fn, backend=backend)(x).backward()
        assert torch.equal(x.grad, 6 * x.detach()), (backend, x.grad)


def test_dead_cell_at_a_graph_break_does_not_poison_gradients():
    # on 3.11 the list comprehension captures `dead` (a cell variable): dead after the break, its
    # cell is handed on empty, so the infinite value is no output of the first graph (fuzz 2708
    # #6: x's gradient was NaN where eager's is None); a cell read after the break, or captured
    # by a lambda that may outlive the frame, keeps its value
    def fn(x, y):
        u = y * 3  # an output of the first graph too: its backward runs
        dead = x * float("inf")
        gone = [dead for _ in range(2)]  # noqa: F841 - dead after the break, as `dead` is
        print("break")
        return u.sum()

    def read_after(x, y):
        t = x * 2
        pair = [t for _ in range(2)]
        print("break", len(pair))
        return (y * t).sum()

    def comprehension_after(x, y):  # the cell is handed to a comprehension after the break
        t = x * 2
        print("break")
        return (y * sum([t for _ in range(2)])).sum()

    def lambda_kept(x, y):
        t = x * 2
        f = lambda: t  # noqa: E731
        print("break")
        return (y * f()).sum()

    for backend in ("eager", "aot_eager"):
        x = torch.randn((), requires_grad=True)
        y = torch.randn(2, requires_grad=True)
        ember.compile(fn, backend=backend)(x, y).backward()
        assert x.grad is None and torch.equal(y.grad, torch.full((2,), 3.0)), (backend, x.grad)
        for g in (read_after, comprehension_after, lambda_kept):
            xe, ye = torch.randn((), requires_grad=True), torch.randn(2, requires_grad=True)
            xc, yc = xe.detach().clone().requires_grad_(), ye.detach().clone().requires_grad_()
            g(xe, ye).backward()
            ember.compile(g, backend=backend)(xc, yc).backward()
            assert torch.equal(xc.grad, xe.grad) and torch.equal(yc.grad, ye.grad), (backend, g.__name__)


def test_backward_that_cannot_run_does_not_fail_the_forward():
    def fn(x, y):
        t = torch.atan2(y, x)  # its backward needs x
        x.t().clamp_(min=0)    # which is then changed in place: a backward would raise
        return t * 2
    x = torch.randint(-4, 5, (2, 1))
    y = torch.randn(2, 3, requires_grad=True)
    expected = fn(x.clone(), y)
    got = ember.compile(fn, backend="aot_eager")(x.clone(), y)
    torch.testing.assert_close(got, expected)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        got.sum().backward()


def test_backward_with_retain_graph_through_a_compiled_graph():
    def fn(x):
        t = torch.nan_to_num(x) * x
        t.sum().backward(retain_graph=True)
        t.sum().backward()
        return x.grad.clone()
    x_e = torch.randn(3, requires_grad=True)
    x_c = x_e.detach().clone().requires_grad_()
    assert torch.equal(ember.compile(fn, backend="aot_eager")(x_c), fn(x_e))


def test_expanded_input_mutated_through_a_view():
    # x_exp is an expand (its rows share memory) made before a graph break and mutated after it
    def fn(x, xs):
        t = x.unsqueeze(0).expand(2, *x.shape)
        xs.reverse()  # a list argument mutated: a graph break
        t[0].mul_(2)
        return t.roll(1)
    x_e = torch.arange(4.0).reshape(2, 2)
    x_c = x_e.clone()
    expected = fn(x_e, [1, 2])
    got = ember.compile(fn, backend="aot_eager")(x_c, [1, 2])
    assert torch.equal(got, expected) and torch.equal(x_c, x_e)


def test_value_read_only_before_a_graph_break_is_dead_after_it():
    def fn(x, xs):
        r = torch.sqrt(x)  # NaN where x < 0: its derivative is not finite
        t = r.relu() + x
        xs.append(1)       # a list argument mutated: a graph break; r is not read after it
        return (t * 3).sum() + (x * x).sum()
    for backend in ("eager", "aot_eager"):
        x_e = torch.tensor([-1.0, 4.0], requires_grad=True)
        x_c = x_e.detach().clone().requires_grad_()
        fn(x_e, []).backward()
        ember.compile(fn, backend=backend)(x_c, []).backward()
        assert torch.equal(torch.nan_to_num(x_c.grad, nan=123.0), torch.nan_to_num(x_e.grad, nan=123.0)), backend


def _grad_of_graph_value(y):
    t = y * 2
    s = (t * t).sum()
    return torch.autograd.grad(s, [t])[0]


def _backward_inputs_graph_value(y):
    t = y.sin()
    s = (t * 3).sum()
    s.backward(inputs=[t])
    return t.grad


def _autograd_backward_inputs_graph_value(y):
    t = y.sin()
    s = (t * 3).sum()
    torch.autograd.backward(s, inputs=(t,))
    return t.grad


@pytest.mark.parametrize("fn", [_grad_of_graph_value, _backward_inputs_graph_value,
                                _autograd_backward_inputs_graph_value])
def test_gradients_with_respect_to_a_value_the_graph_computes(fn):
    # fuzz 2805 #0 (and 2611 #65): t and a value computed from t are outputs of one graph, and
    # the break differentiates one with respect to the other; AOTAutograd returns t as an output
    # of its own, cut from the other, so such a graph runs on ember's executor
    y = torch.randn(3, requires_grad=True)
    y2 = y.detach().clone().requires_grad_()
    want = fn(y)
    got = ember.compile(fn, backend="aot_eager")(y2)
    assert torch.allclose(got, want)
    note = ember.testing.entries(fn)[0]["backend_note"]
    assert "gradients with respect to a value it computes" in note


def test_backward_with_respect_to_inputs_still_goes_to_the_backend():
    def fn(y):
        s = (y * 3).sum()
        s.backward()
        return y.grad
    y = torch.randn(3, requires_grad=True)
    assert torch.equal(ember.compile(fn, backend="aot_eager")(y), torch.full((3,), 3.0))
    assert ember.testing.entries(fn)[0]["fx_code"]


def _item_of_a_sum(x, y):
    t = y / 0
    return x * 2, t.sum().item()


def _truth_of_a_sum(x, y):
    t = y / 0
    if t.sum():
        return x * 2
    return x * 3


def _float_and_tolist(x, y):
    t = y / 0
    return x * float(t.sum()), t.tolist()


def _item_of_a_value_kept(x, y):
    s = (y * 2).sum()
    v = s.item()
    return x * 2 + s, v


@pytest.mark.parametrize("fn", [_item_of_a_sum, _truth_of_a_sum, _float_and_tolist, _item_of_a_value_kept])
def test_value_whose_data_a_break_reads_takes_no_part_in_the_backward(fn):
    # fuzz 2805 #325: t.sum() is a graph output only for .item() after the break; AOTAutograd
    # gave it a zero gradient and 0 * inf made y.grad NaN where eager's stays None (under
    # torch.compile too). Nothing else holding it, it leaves the graph detached.
    grads = []
    for f in (fn, ember.compile(fn, backend="aot_eager")):
        torch.manual_seed(0)
        x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
        out = f(x, y)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        grads.append((x.grad, y.grad))
    for want, got in zip(*grads):
        assert (want is None) == (got is None)
        if want is not None:
            assert torch.allclose(want, got, equal_nan=True)


def _view_made_without_grad_mode(x):
    with torch.set_grad_enabled(False):
        t = x.squeeze()
    return t


def test_view_made_without_grad_mode_and_returned_keeps_no_history():
    # fuzz 2810 #328 (under torch.compile too): eager's t is a view without autograd history, a
    # backward through it leaves x.grad None; AOTAutograd made the view again with grad mode on
    seen = []
    for f in (_view_made_without_grad_mode, ember.compile(_view_made_without_grad_mode, backend="aot_eager")):
        x = torch.randn(3, 1, requires_grad=True)
        out = f(x)
        out.sum().backward()
        seen.append((out.requires_grad, out.grad_fn is None, x.grad))
    assert seen[0] == seen[1] == (True, True, None)
    assert "view made without grad mode" in ember.testing.entries(_view_made_without_grad_mode)[0]["backend_note"]
