"""Numbers the graph computes (csrc/trace/em_sym_item.c): x.item() of a one-element tensor is
captured under fullgraph, ember.config.capture_scalar_outputs or TorchDynamo's
capture_scalar_outputs, as TorchDynamo captures it. The number goes where its value cannot
change what the trace decides (arithmetic, pointwise ops, fill values, torch.tensor's data,
torch._check); a use that needs the value (a branch, a size) breaks the graph, or under
fullgraph raises ember.Unsupported. Every case is compared with eager, on every backend where
the graph is handed to torch.fx."""

import math

import pytest
import torch

import ember
import ember.testing
from tests.helpers import assert_same, counters, randn
from tests.helpers import exact_graph as one_graph

BACKENDS = ["eager", "aot_eager"]


def _graph_text(fn):
    return "\n".join(str(e["graph"]) for e in ember.testing.entries(fn))


def _exact_on(backend, fn, *args):
    if backend == "eager":
        return one_graph(fn, *args)
    want = fn(*args)
    cf = ember.compile(fn, backend=backend, fullgraph=True)
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("error", ember.EmberWarning)  # handed to the backend, not the executor
        for _ in range(2):
            assert_same(cf(*args), want)
    return want


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_returned(backend):
    def f(x):
        return torch.max(x).int().item()

    _exact_on(backend, f, torch.tensor([[10.6763, 11.7445, -2.2369]]))
    cf = ember.compile(f, backend=backend, fullgraph=True)
    assert cf(torch.tensor([[1.0, 61.2, 5.0]])) == 61  # the value of each call, not a constant


@pytest.mark.parametrize("backend", BACKENDS)
def test_arithmetic_on_items(backend):
    def f(x, y, n):
        s = x.sum().item()
        k = n.item()
        return y * s + (s - 1) / 2, k // 3, -k, k % 4, k * 2 + 1, s ** 2, k ** 3, k / 2, k >= 3, s != k

    _exact_on(backend, f, randn(3), randn(3, seed=1), torch.tensor(7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_and_int_types_follow_python(backend):
    def f(b, n):
        t = b.item()  # a bool
        k = n.item()
        return t + t, t & t, k << 2, k >> 1, k ^ 5, ~k, abs(-k), float(k), int(k), t * 1.5

    want = f(torch.tensor(True), torch.tensor(6))
    # AOTAutograd refuses bool arithmetic on its unbacked symbols: the graph runs on ember's executor
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore", ember.EmberWarning)
        assert_same(ember.compile(f, backend=backend, fullgraph=True)(torch.tensor(True), torch.tensor(6)), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conversions(backend):
    def f(v):
        x = v.item()
        return int(x), float(x), abs(-x), round(x), math.floor(x), math.ceil(x), math.trunc(-x)

    _exact_on(backend, f, torch.tensor(2.75))


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointwise_ops_and_fills(backend):
    def f(x, m):
        v = m.item()
        y = x.clone()
        y[y > 0] = v
        return (torch.clamp(x, max=v), x.masked_fill(x > 0, v), torch.full((3,), v), torch.where(x > 0, x, v),
                x.add(v), torch.full_like(x, v), y, x.new_full((2,), v))

    _exact_on(backend, f, randn(5), torch.tensor(0.3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_of_items(backend):  # TorchDynamo's test_symfloat_to_tensor
    def f(v, n):
        return (torch.tensor([v.item()]), torch.tensor([[v.item()], [2.0]]), torch.tensor(v.item()),
                torch.tensor((v.item(), n.item())))

    _exact_on(backend, f, randn(1), torch.tensor(4))


def test_foreach_scalar():
    def f(a, val):
        return torch._foreach_pow([a.abs()], 1 - val.item())

    one_graph(f, randn(4, 4), torch.tensor(0.5, dtype=torch.float64))


def test_check_is_a_runtime_assert_and_a_bound():  # TorchDynamo's test_deferred_runtime_asserts
    def f(x):
        y = x.item()
        torch._check(y >= 0)
        if y >= 0:  # decided by the check: no break
            return x * 2
        return x * 3

    one_graph(f, torch.tensor([3]))
    cf = ember.compile(f, fullgraph=True)
    with pytest.raises(RuntimeError):  # as eager's torch._check(False)
        cf(torch.tensor([-2]))
    with pytest.raises(RuntimeError):
        f(torch.tensor([-2]))


def _checked(x, t):
    torch._check(t.item() >= 0)  # its result unused: the backend must keep the check
    k = t.item()
    torch._check_is_size(k)
    return x * x.amax().item() + k


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_checks_raise_on_every_backend(backend):
    """A check whose result nothing uses still raises on the fx backends (the fake run's
    deferred assert alone would be dropped by AOTAutograd)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates _check_is_size
        x = randn(4, 3)
        _exact_on(backend, _checked, x, torch.tensor(2))
        cf = ember.compile(_checked, backend=backend, fullgraph=True)
        for t in (torch.tensor(-1), torch.tensor([-3])):
            with pytest.raises(RuntimeError):
                _checked(x, t)
            with pytest.raises(RuntimeError):
                cf(x, t)


def test_check_bounds_decide_comparisons():
    def f(x):
        n = x.item()
        torch._check(n > 2)
        torch._check(n <= 10)
        if n < 5:  # not decided by the checks
            return x
        return x + 1

    with pytest.raises(ember.Unsupported, match="truth value"):
        ember.compile(f, fullgraph=True)(torch.tensor(4))
    ember.reset()
    ember.testing.reset_counters()

    def g(x):
        n = x.item()
        torch._check(n > 2)
        torch._check(n <= 10)
        return (n > 1, n >= 3, n < 11, n != 0, n == 20, bool(n))

    one_graph(g, torch.tensor(4))


def test_branch_on_an_item_breaks_with_the_number_handed_on():
    def f(x, n):
        v = n.item()
        w = v * 2
        if v > 2:
            return x + w
        return x - w

    ember.config.capture_scalar_outputs = True
    try:
        cf = ember.compile(f)
        for k in (3, 1, 5, 2):
            assert_same(cf(randn(3), torch.tensor(k)), f(randn(3), torch.tensor(k)))
        assert counters()["breaks"] >= 1
        assert "call item" in _graph_text(f)
    finally:
        ember.config.capture_scalar_outputs = False


def test_not_captured_without_fullgraph_or_the_setting():
    def f(x, n):
        return x * n.item()

    cf = ember.compile(f)
    assert_same(cf(randn(3), torch.tensor(2.0)), f(randn(3), torch.tensor(2.0)))
    assert "call item" not in _graph_text(f)  # the graph breaks at .item(), as TorchDynamo's default


def test_dynamo_setting_is_honoured():
    def f(x, n):
        return x * n.item()

    import torch._dynamo.config as dc
    with dc.patch(capture_scalar_outputs=True):
        cf = ember.compile(f)
        assert_same(cf(randn(3), torch.tensor(2.0)), f(randn(3), torch.tensor(2.0)))
    assert "call item" in _graph_text(f)
    assert counters()["breaks"] == 0


@pytest.mark.parametrize("body", [
    "x.view(v, -1)",  # a size no rule follows: its meta run had a stand-in
    "x.sum(dim=v - 1)",
    "x[v:]",
    "str(v)",
    "{v: 1}",
    "math.sqrt(v)",
    "v.bit_length()",
    "[0] * v",
])
def test_uses_that_need_the_value_are_refused(body):
    ns = {"torch": torch, "math": math}
    exec(f"def f(x, n):\n    v = n.item()\n    return {body}\n", ns)
    f = ns["f"]
    with pytest.raises(ember.Unsupported, match="item"):
        ember.compile(f, fullgraph=True)(randn(4, 4), torch.tensor(2))
    ember.reset()
    ember.config.capture_scalar_outputs = True
    try:  # without fullgraph: a break there, eager's result
        assert_same(ember.compile(f)(randn(4, 4), torch.tensor(2)), f(randn(4, 4), torch.tensor(2)))
    finally:
        ember.config.capture_scalar_outputs = False


def test_item_of_a_tensor_changed_later_is_its_value_then():
    def f(x):
        s = x.sum().item()
        x.add_(1)
        return x * s, s

    a, b = randn(3), randn(3)
    want = f(a)
    got = ember.compile(f, fullgraph=True)(b)
    assert_same(got, want)
    assert_same(b, a)


def test_item_of_many_elements_raises_as_eager():
    def f(x):
        return x.item()

    with pytest.raises(ember.Unsupported):
        ember.compile(f, fullgraph=True)(randn(3))
    with pytest.raises(RuntimeError):  # a later call's one element: the graph's item raises as eager's
        cf = ember.compile(lambda x: x.sum(0).item(), fullgraph=True)
        cf(randn(1, 1))
        cf(randn(2, 2))


def test_a_raise_caught_by_the_frame_runs_it_as_python():  # fuzz 3402 #667
    def f(x, n):
        v = n.item()
        try:
            r = int(v)  # int(nan) raises ValueError
        except ValueError:
            r = -1
        try:
            q = 1 / v
        except ZeroDivisionError:
            q = 0.0
        return x * r + q

    cf = ember.compile(f, fullgraph=True)
    for n in (torch.tensor(2.5), torch.tensor(float("nan")), torch.tensor(0.0)):
        assert_same(cf(randn(3), n), f(randn(3), n))


def test_a_raise_after_a_write_breaks_there():
    def f(x, n):
        x.add_(1)  # a raise after it would leave the frame half done: the division runs as Python
        v = n.item()
        try:
            r = 1 / v
        except ZeroDivisionError:
            r = 0.0
        return x * r

    ember.config.capture_scalar_outputs = True
    try:
        cf = ember.compile(f)
        for n in (torch.tensor(0), torch.tensor(4)):
            a, b = randn(3), randn(3)
            assert_same(cf(a, n), f(b, n))
            assert_same(a, b)
    finally:
        ember.config.capture_scalar_outputs = False
    ember.reset()
    with pytest.raises(ember.Unsupported, match="may raise"):
        ember.compile(f, fullgraph=True)(randn(3), torch.tensor(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_operators_that_cannot_raise_stay_in_the_graph_after_a_write(backend):
    """A division by a nonzero constant, an int's non-negative int power, a shift by 0..63
    cannot raise: no break after a write (the break's extra graph output gave NaN gradients
    under AOTAutograd's coarse autograd node; fuzz 3512 #13)."""
    def f(y, t):
        h = torch.cat([y])
        h[0] = 0
        s, n = y.sum().item(), t.item()
        return h * (s / 2 - s // 4), n ** 2 + (n << 3) - (n >> 1) + n // 2 + n % 3

    y = randn(3, 4).requires_grad_()
    _exact_on(backend, f, y, torch.tensor(5))


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_and_float_of_a_tensor_are_its_item_converted(backend):
    def f(x, t):
        return x * int(t) + float(t), float(x.sum()), int(t.sum() * 2.7), int(-t)

    _exact_on(backend, f, randn(3), torch.tensor([2.7]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_of_a_tensor_is_its_item_converted(backend):
    def f(mask, x):  # bool(n) of a number from .item(): n != 0 (a NaN is true), a bool itself
        return bool((mask == 0).all()), bool(mask.sum() * 0.0), bool(x.sum() + float("nan")), bool(mask.any())

    for m in (torch.zeros(2, 3), torch.tensor([[0.0, 1.0], [0.0, 0.0]])):
        ember.reset()
        ember.testing.reset_counters()
        _exact_on(backend, f, m, randn(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_tolist_of_a_small_tensor_is_numbers(backend):
    def f(x, t, m):
        a, b = t.tolist()
        return x * a + b, m.tolist(), x.sum().tolist(), a + b

    _exact_on(backend, f, randn(3), torch.tensor([2, 5]), torch.tensor([[1.5, 2.0], [3.0, 4.5]]))


def test_tolist_of_a_symbolic_length_breaks():
    def f(x):
        return x.tolist()

    with pytest.raises(ember.Unsupported):
        ember.compile(f, fullgraph=True, dynamic=True)(randn(3))


# sizes from .item(): an int item used as a size is an unbacked symbol bound to its node (its
# value comes from the graph at run time); what the trace decides from it must follow from its
# bounds (torch._check) or from what the op checks itself (arange's length >= 0)
def _arange_checked(x):  # TorchDynamo's test_torch_check
    y = x.item()
    torch._check(y >= 0)
    return torch.arange(0, y)


def _arange_length(x):  # test_arange_length_with_float32_dtype: r.size(0) == y is decided
    y = x.item()
    r = torch.arange(y, dtype=torch.float32)
    if r.size(0) == y:
        return r + 1
    return r


def _empty_of_arithmetic(x):  # test_unbacked_empty_tensor
    n = x.item()
    return torch.empty((n - 1) // 2).fill_(3.0)


def _ones_max(x):  # test_item_max
    return torch.ones(max(x.item(), 1024))


def _padding_mask(lengths):  # test_unbacked_arange_in_bounds
    row = torch.arange(0, lengths.max().item(), 1)
    mask = (row < lengths.unsqueeze(-1)).type(torch.float32)
    return mask[:, :, None]


def _slice_checked(x, t):
    n = t.item()
    torch._check(n >= 0)
    torch._check(n <= x.size(0))
    return x[:n] * 2, x[n:].sum()


def _factories(x, t):
    n = t.item()
    return (torch.full((n,), 1.5), x.new_zeros(n, 2), torch.zeros(n).sum() + x.sum(), len(torch.ones(n, 3)),
            torch.arange(0, n, 2))


def _split_by_items(x, counts):  # test_split_aot_autograd; MoE-style routing by counts
    sizes = counts.tolist()
    parts = torch.split(x, sizes)
    return [p.sum(0) * 2 for p in parts] + [x.split(sizes, dim=0)[0].shape[0] + 1]


def _split_with_sizes(x, i):
    y, z = i.tolist()
    a, b = x.split_with_sizes([y, z])
    return a * 2, b.sum()


_SIZED = [
    (_arange_checked, [(torch.tensor([3]),), (torch.tensor([0]),), (torch.tensor([7]),)]),
    (_arange_length, [(torch.tensor([300]),), (torch.tensor([1]),)]),
    (_empty_of_arithmetic, [(torch.tensor([4]),), (torch.tensor([1]),), (torch.tensor([9]),)]),
    (_ones_max, [(torch.tensor([1000]),), (torch.tensor([2000]),)]),
    (_padding_mask, [(torch.tensor([5, 4, 4, 4], dtype=torch.int32),), (torch.tensor([2, 7, 1, 3], dtype=torch.int32),)]),
    (_slice_checked, [(randn(10), torch.tensor(4)), (randn(10), torch.tensor(0)), (randn(10), torch.tensor(10))]),
    (_factories, [(randn(3), torch.tensor(5)), (randn(3), torch.tensor(1)), (randn(3), torch.tensor(0))]),
    (_split_by_items, [(randn(12, 3), torch.tensor([5, 4, 3])), (randn(12, 3), torch.tensor([0, 12, 0]))]),
    (_split_with_sizes, [(randn(10), torch.tensor([7, 3])), (randn(10), torch.tensor([10, 0]))]),
]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn,calls", _SIZED, ids=[f.__name__ for f, _ in _SIZED])
def test_sizes_from_items(backend, fn, calls):
    """One graph for every value (no recompile), eager's results, on the backend itself."""
    import warnings
    cf = ember.compile(fn, backend=backend, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.EmberWarning)  # handed to the backend, not the executor
        for args in calls:
            assert_same(cf(*args), fn(*args))
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c
    assert "call item" in _graph_text(fn)


def test_sizes_from_items_under_inductor():
    import warnings
    for fn, calls in _SIZED[:2] + _SIZED[4:6]:
        ember.reset()
        cf = ember.compile(fn, backend="inductor", fullgraph=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ember.EmberWarning)
            for args in calls:
                assert_same(cf(*args), fn(*args))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_sizes_from_items_raise_as_eager(backend):
    """A size eager refuses (arange's negative length, empty's negative size, a failed check)
    raises there too: the graph holds no assumption about the values."""
    for fn, args in [(_arange_checked, (torch.tensor([-1]),)), (_arange_length, (torch.tensor([-5]),)),
                     (_empty_of_arithmetic, (torch.tensor([-2]),)), (_slice_checked, (randn(10), torch.tensor(11))),
                     (_split_with_sizes, (randn(10), torch.tensor([3, 3]))),  # split checks the sum
                     (_split_with_sizes, (randn(10), torch.tensor([12, -2])))]:
        ember.reset()
        cf = ember.compile(fn, backend=backend, fullgraph=True)
        cf(*{_slice_checked: (randn(10), torch.tensor(3)),
             _split_with_sizes: (randn(10), torch.tensor([4, 6]))}.get(fn, (torch.tensor([5]),)))
        with pytest.raises(RuntimeError):
            fn(*args)
        with pytest.raises(RuntimeError):
            cf(*args)


@pytest.mark.parametrize("body", [
    "x[:v]",  # v <= 4 and v >= 0 are not known: Python's clamping would be decided
    "torch.zeros(v) + x",  # broadcasting decides v == 4
    "torch.zeros(v).shape[0] > 3",
    "[i for i in range(v)]",
    "torch.zeros(v).view(-1, 2)",
    "torch.zeros(v, 2).squeeze(0)",
    "x.narrow(0, 0, v)",
    "torch.ones(v).sum(dim=v - 1)",
])
def test_size_relations_not_decided_are_data_dependent(body):
    ns = {"torch": torch}
    exec(f"def f(x, n):\n    v = n.item()\n    return {body}\n", ns)
    f = ns["f"]
    with pytest.raises(ember.Unsupported, match="item"):
        ember.compile(f, fullgraph=True)(randn(4), torch.tensor(2))
    ember.reset()
    ember.config.capture_scalar_outputs = True
    try:  # without fullgraph: a break there, eager's result (or error) for every value
        cf = ember.compile(f)
        for k in (2, 4, 1, 0, 6, -1):
            try:
                want = f(randn(4), torch.tensor(k))
            except (RuntimeError, IndexError) as e:
                with pytest.raises(type(e)):
                    cf(randn(4), torch.tensor(k))
            else:
                assert_same(cf(randn(4), torch.tensor(k)), want)
    finally:
        ember.config.capture_scalar_outputs = False


def test_data_dependent_uses_raise_torch_compiles_user_error():
    """Under fullgraph, a use of a number from .item() that needs its value raises
    ember.DataDependentError: an ember.Unsupported, and the UserError torch.compile raises
    there (TorchDynamo's test_torch_check_nonnegative, test_issue111918). Other refusals stay
    plain ember.Unsupported."""
    import torch._dynamo.exc as dexc

    def branch(x):
        y = x.item()
        torch._check(y >= 0)
        if y == 0:
            return x
        return torch.arange(0, y)

    def size(x, t):
        return x[:t.item()]

    def tensor_branch(x):
        return x if x.sum() > 0 else -x

    for fn, args in ((branch, (torch.tensor([3]),)), (size, (randn(4), torch.tensor(2)))):
        with pytest.raises(dexc.UserError) as e:
            ember.compile(fn, fullgraph=True)(*args)
        assert isinstance(e.value, ember.DataDependentError) and isinstance(e.value, ember.Unsupported)
        assert e.value.error_type == dexc.UserErrorType.ANTI_PATTERN
        ember.reset()
    with pytest.raises(ember.Unsupported) as e:
        ember.compile(tensor_branch, fullgraph=True)(randn(3))
    assert not isinstance(e.value, dexc.UserError)


# ops whose result size depends on the data (nonzero, masked_select, x[mask]): captured under
# fullgraph or capture_dynamic_output_shape_ops, that size an unbacked symbol read from the node
def _selections(x):
    y = x[x > 0]
    return y * 2, torch.nonzero(x), x.masked_select(x < 0).sum(), y.shape[0] + 1, len(x.nonzero())


def _rows(x, w):
    keep = x.sum(1) > 0
    sel = x[keep]
    return sel @ w, keep.nonzero().squeeze(1).float().mean(), sel.shape, (sel + 1).relu().sum(0)


def _where_keep(x, scores):  # detection-style: indices of the scores above a threshold
    keep = torch.where(scores > 0.2)[0]
    rows, cols = x.nonzero(as_tuple=True)
    return scores[keep] * 2, keep, rows + cols, torch.where(x > 0, x, 0.0), x[rows, cols].sum()


def _uniques(labels, x):  # torch.unique's count from the data; its inverse of the input's sizes
    u = torch.unique(labels)
    v, inv, cnt = torch.unique(labels, return_inverse=True, return_counts=True)
    w = labels.unique(sorted=True, return_counts=False)
    return u * 2, v, inv, x[inv].sum(0), cnt.float().mean(), w.shape[0] + 1, u.sum()


_DATA_SIZED = [
    (_selections, [(randn(7, seed=s),) for s in range(3)] + [(torch.zeros(7),), (torch.ones(7),)]),
    (_uniques, [(torch.tensor(v), randn(6, 2, seed=1)) for v in ([3, 1, 3, 2, 1, 9], [5] * 6, [0, 1, 2, 3, 4, 5])]),
    (_rows, [(randn(6, 3, seed=s), randn(3, 2, seed=9)) for s in range(3)]),
    (_where_keep, [(randn(4, 5, seed=s), randn(8, seed=s + 3).abs()) for s in range(3)]),
]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn,calls", _DATA_SIZED, ids=[f.__name__ for f, _ in _DATA_SIZED])
def test_data_dependent_result_sizes(backend, fn, calls):
    """One graph for every count (no recompile), eager's results, on the backend itself."""
    import warnings
    cf = ember.compile(fn, backend=backend, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.EmberWarning)
        for args in calls:
            assert_same(cf(*args), fn(*args))
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c


def _layouts(x):
    s = x.nonzero()
    s.contiguous()
    rows, cols, deps = x.nonzero(as_tuple=True)
    return s, s.contiguous(), s.t(), s[:, 1], rows, torch.where(x > 0)[2], x.masked_select(x > 0)


def _counts_as_data(a):  # a count from the data in a tensor's data: its shape is the list's
    n = a.nonzero().squeeze(-1).numel()
    return a.new_tensor([n, n + 1, n * 2]), torch.tensor([[n], [a.shape[0] - n]]) + 1


def test_data_dependent_count_as_tensor_data():
    cf = ember.compile(_counts_as_data, backend="eager", fullgraph=True)
    for a in (torch.tensor([1, 0, 0, 5]), torch.tensor([1, 1, 1, 5]), torch.zeros(4, dtype=torch.long)):
        assert_same(cf(a), _counts_as_data(a))
    assert counters()["frames"] == 1


def _same_layout(a, b):  # strides of the dimensions of more than one element (as is_contiguous reads them)
    return a.shape == b.shape and (a.numel() == 0 or all(x == y for n, x, y in zip(a.shape, a.stride(), b.stride()) if n > 1))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_data_dependent_result_layouts(backend):
    """nonzero's result is eager's (count, dim) of strides (1, count), its columns contiguous."""
    cf = ember.compile(_layouts, backend=backend, fullgraph=True)
    for x in (randn(2, 4, 4, seed=1), torch.zeros(2, 3, 3), torch.eye(3).reshape(1, 3, 3), randn(3, 1, 2, seed=2)):
        got, want = cf(x), _layouts(x)
        assert_same(got, want)
        for g, w in zip(got, want):
            assert _same_layout(g, w), (g.shape, g.stride(), w.stride())


def test_data_dependent_result_sizes_under_inductor():
    import warnings
    for fn, calls in _DATA_SIZED:
        ember.reset()
        cf = ember.compile(fn, backend="inductor", fullgraph=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ember.EmberWarning)
            for args in calls:
                got, want = cf(*args), fn(*args)
                for g, w in zip(got, want):
                    if isinstance(w, torch.Tensor):
                        torch.testing.assert_close(g, w, equal_nan=True)
                    else:
                        assert g == w


def test_data_dependent_result_sizes_break_by_default():
    """Without fullgraph or the setting, nonzero breaks the graph (TorchDynamo's default)."""
    def f(x):
        return x.nonzero() + 1

    assert_same(ember.compile(f)(randn(5)), f(randn(5)))
    assert counters()["breaks"] + counters()["fallbacks"] >= 1
    ember.reset()
    ember.testing.reset_counters()
    ember.config.capture_dynamic_output_shape_ops = True
    try:
        assert_same(ember.compile(f)(randn(5)), f(randn(5)))
        assert (counters()["frames"], counters()["breaks"]) == (1, 0)
    finally:
        ember.config.capture_dynamic_output_shape_ops = False


@pytest.mark.parametrize("body", [
    "x[x > 0] + x",  # broadcasting the count against 5
    "x[x > 0].view(-1, 2)",
    "x.nonzero().shape[0] > 2",
    "x[:x.nonzero().shape[0]]",  # Python's clamping: count <= 5 is known, count >= 0 too: no break
])
def test_data_dependent_result_sizes_where_decided(body):
    ns = {"torch": torch}
    exec(f"def f(x):\n    return {body}\n", ns)
    f = ns["f"]
    ember.config.capture_dynamic_output_shape_ops = True
    try:
        cf = ember.compile(f)
        for s in range(4):
            x = randn(5, seed=s)
            try:
                want = f(x)
            except RuntimeError as e:
                with pytest.raises(type(e)):
                    cf(x)
            else:
                assert_same(cf(x), want)
    finally:
        ember.config.capture_dynamic_output_shape_ops = False


@pytest.mark.parametrize("capture", [False, True])
def test_zero_dim_mask_index_is_data_dependent(capture):
    """x[x > 0] of a 0-d x has 0 or 1 elements: the meta kernel answers 1 whatever the mask
    holds, so the trace must not take its size from there (it said 1 for a 0-element result;
    found by fuzz 3511 #214 under aot_eager). A mask among other indices likewise."""
    def f(x, y):
        s = x[x > 0]
        u = x[(x > 0).to(torch.uint8)]  # a uint8 index is a mask too
        return s.shape[0], s * 2, y[y.sum() > 0, :1].sum(), u.shape[0]

    ember.config.capture_dynamic_output_shape_ops = capture
    try:
        for backend in ("eager", "aot_eager"):
            ember.reset()
            cf = ember.compile(f, backend=backend)
            for v in (0.5, -0.5, 2.0, 0.0):
                x, y = torch.tensor(v), randn(2, 3, seed=int(v * 10))
                assert_same(cf(x, y), f(x, y))
    finally:
        ember.config.capture_dynamic_output_shape_ops = False
