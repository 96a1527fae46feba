"""Symbolic sizes (issue [dynamic-shapes]): the three `dynamic` settings, automatic dynamic,
marks, relations guarded from branches, 0/1 specialization, ints that change, sizes that
cross graph breaks, and the constructs of size arithmetic — each against eager, with the
number of compiles it took."""
import pytest
import torch
import torch.nn.functional as F

import ember
import ember.testing
from tests.helpers import assert_same, counters, one_graph, randn


def run_all(f, cf, calls):
    for args in calls:
        assert_same(cf(*args), f(*args))


def frames():
    return counters()["frames"]


def test_dynamic_true_one_compile_for_every_size():
    def f(x, y):
        b, s = x.shape
        z = (x + y).view(b * s)
        return z * 2, x.size(0) + 1, x.shape

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, m, seed=n), randn(n, m, seed=m)) for n, m in ((3, 4), (5, 4), (7, 9), (2, 2))])
    assert frames() == 1
    guards = ember.testing.entries(f)[0]["guards"]
    assert "size=(None, None)" in guards and "SYMBOL s0 = L['x'].size(0)" in guards


def test_dynamic_false_recompiles_per_size():
    def f(x):
        return x.view(x.size(0) * x.size(1)) + 1

    cf = ember.compile(f, dynamic=False)
    run_all(f, cf, [(randn(n, 3),) for n in (2, 3, 4)])
    assert frames() == 3


def test_automatic_dynamic_second_compile_is_generic():
    def f(x):
        return F.relu(x.reshape(-1, 2 * x.shape[-1])).sum(0)

    cf = ember.compile(f)
    run_all(f, cf, [(randn(n, 6, seed=n),) for n in (4, 6, 8, 10, 12, 16, 20)])
    assert frames() == 2  # static, then dynamic in dim 0
    assert "size=(None, 6)" in ember.testing.entries(f)[0]["guards"]


def test_branch_on_size_guards_the_relation():
    def f(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 3),) for n in (2, 3, 6, 9, 4, 5)])
    assert frames() == 2  # one per side of the branch
    texts = " ".join(e["guards"] for e in ember.testing.entries(f))
    assert "s0 > 4" in texts and "s0 <= 4" in texts


def test_size_one_takes_the_symbolic_graph_zero_is_specialized():
    def f(x):
        return x.sum(0) * x.shape[0], x.unsqueeze(0).expand(2, -1, -1).mean(0)

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 4),) for n in (3, 1, 0, 5, 1, 0)])
    assert frames() == 2  # n >= 1 (the trace never asked whether n is 1), n == 0


def f_branch_on_one(x):
    if x.shape[0] == 1:
        return x + 1
    return x * 2


def f_squeeze(x):
    y = x.squeeze()  # drops the dimensions of size 1: whether x.size(0) is 1 decides its rank
    return y * y.dim(), x.squeeze((0, 1)).sum(-1)


@pytest.mark.parametrize("f", [f_branch_on_one, f_squeeze])
def test_size_one_asked_by_the_trace_is_guarded(f):
    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 7, 8),) for n in (3, 1, 5, 1)])
    assert frames() == 2
    texts = " ".join(e["guards"] for e in ember.testing.entries(f))
    assert "s0 != 1" in texts


def test_automatic_dynamic_takes_size_one_afterwards():
    # batch 1 after the generic compile: no third compile (sizes 0 and 1 of a dimension traced
    # at >= 2 are not specialized unless the trace treated them apart)
    def f(x, m):
        h = F.softmax(x @ x.transpose(-1, -2), -1).masked_fill(m, 0.0)
        return h.view(h.shape[0], -1).relu().mean(-1), h.size(0) * 2

    cf = ember.compile(f)
    shapes = [(4, 6), (3, 5), (1, 7), (1, 6), (2, 2), (1, 1), (5, 1)]
    run_all(f, cf, [(randn(b, s, 3, seed=b * 10 + s), torch.rand(b, s, s, generator=torch.Generator().manual_seed(s))
                     > 0.5) for b, s in shapes])
    assert frames() == 2  # static; dynamic in b and s, which takes b == 1 and s == 1 too


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_size_one_after_generic_compile_python_backends(backend):
    # a ShapeEnv assumes its size symbols >= 2 (Inductor makes squeeze(0) a no-op): a call with
    # a size 1 gets a compiled variant with that size static, not a wrong result
    def f(x, y):
        return (x @ y) * x.shape[0], x.sum(0), x.unsqueeze(1).mean(0)

    cf = ember.compile(f, backend=backend)
    run_all(f, cf, [(randn(b, 4, seed=b), randn(4, 3, seed=9)) for b in (3, 5, 1, 2, 1, 7)])
    assert frames() == 2
    assert counters()["backend_compiles"] == 3  # static, symbolic, symbolic with b static 1


def test_int_argument_that_changes_becomes_symbolic():
    def f(x, n):
        return x[:, :4] * n + n // 2, n * 3

    cf = ember.compile(f)
    run_all(f, cf, [(randn(3, 5), n) for n in (2, 3, 4, 5, 9, 10)])
    assert frames() == 2


def test_negative_int_argument_that_changes_becomes_symbolic():
    # a negative int is -s of a positive symbol the guard reads as -n: one compile per sign
    def f(x, n):
        return x * n + n // 3 - n % 5 + x.sum(0) * abs(n), -n, n * n

    cf = ember.compile(f)
    ns = (-10, -22, -7, -3, -2, -1000, 5, 9, 2, 100, -4)
    run_all(f, cf, [(randn(2, 3), n) for n in ns])
    assert frames() == 3
    assert any("SYMBOL s0 = (-L['n'])" in e["guards"] for e in ember.testing.entries(f))


@pytest.mark.parametrize("sign", [1, -1])
def test_int_arithmetic_that_stays_symbolic(sign):
    # division by a symbol guards its sign (Python rounds toward -inf either way), powers by a
    # constant are products, shifts by a constant multiply or floor-divide
    def f(x, n, m):
        return x * (7 // n) + (m // n) - (m % n) + n**2 + n**3 - (n << 3) + (m >> 1) + (n >> 2), n**0

    cf = ember.compile(f)
    calls = [(randn(3), sign * n, m) for n, m in ((5, 11), (3, -13), (2, 17), (9, -4), (4, 100), (6, -7))]
    run_all(f, cf, calls)
    assert frames() <= 3  # the first values, then m's and n's sign


def test_loop_over_range_of_size_pins_it():
    def f(x):
        out = x
        for _ in range(x.shape[0]):
            out = out + 1
        return out

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 2),) for n in (2, 3, 2, 3)])
    assert frames() == 2
    assert "s0 == 2" in ember.testing.entries(f)[-1]["guards"]


def test_growing_cache_by_cat():
    def step(cache, x):
        cache = torch.cat([cache, x], dim=1)
        return cache, cache.mean(1), cache.shape[1]

    cf = ember.compile(step)
    cache = randn(2, 3, 4)
    ref = cache.clone()
    for i in range(12):
        x = randn(2, 1, 4, seed=i)
        (cache, m, n), (ref, rm, rn) = cf(cache, x), step(ref, x)
        assert_same((cache, m, n), (ref, rm, rn))
    assert frames() == 2


def test_attention_mask_from_sequence_length():
    def f(q, k):
        s = q.shape[1]
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        w = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        w = w.masked_fill(~mask, float("-inf")).softmax(-1)
        pos = torch.arange(s).unsqueeze(0).expand(q.shape[0], s)
        return w @ k, pos

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(2, n, 8, seed=n), randn(2, n, 8, seed=n + 1)) for n in (3, 5, 8, 13)])
    assert frames() <= 2


def test_factories_and_new_tensors_take_symbolic_sizes():
    def f(x):
        b, s = x.shape
        z = torch.zeros(b, s + 1)
        o = x.new_ones(b, 2 * s)
        full = torch.full((s,), 3.0)
        return z.sum(), o.shape, full, x.new_zeros(x.shape)

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, m),) for n, m in ((2, 3), (4, 5), (3, 7))])
    assert frames() == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensors_made_from_sizes_keep_them_symbolic(backend):
    """torch.tensor/as_tensor/scalar_tensor/new_tensor of sizes: the sizes are the data, not
    the result's shape, which the data's nesting gives: one compile for every size."""
    def f(x):
        b, s = x.shape
        t = torch.tensor([b, s * 2]) + 1
        u = x.new_tensor([[s], [b - 1]]) * x.sum()
        v = torch.as_tensor([float(3), s], dtype=torch.float32).sum() + x
        return t, u, v, torch.scalar_tensor(s - 1) * 2, torch.tensor(b)

    cf = ember.compile(f, dynamic=True, backend=backend)
    run_all(f, cf, [(randn(n, m),) for n, m in ((2, 3), (4, 5), (3, 7))])
    assert frames() == 1


def test_mark_dynamic_and_mark_static():
    def f(x):
        return x.reshape(x.shape[0], -1).sum(1)

    cf = ember.compile(f, dynamic=False)
    xs = [randn(n, 3, 4) for n in (2, 3, 5)]
    for x in xs:
        ember.mark_dynamic(x, 0)
    run_all(f, cf, [(x,) for x in xs])
    assert frames() == 1
    ember.reset()
    ember.testing.reset_counters()

    def g(x):
        return x * x.shape[0]

    cg = ember.compile(g, dynamic=True)
    ys = [randn(n, 2) for n in (2, 3)]
    for y in ys:
        ember.mark_static(y, 0)
    run_all(g, cg, [(y,) for y in ys])
    assert frames() == 2


def test_torch_mark_dynamic_is_honoured():
    def f(x):
        return x.view(-1) * x.size(0)

    cf = ember.compile(f, dynamic=False)
    xs = [randn(n, 3) for n in (2, 4, 6)]
    for x in xs:
        torch._dynamo.mark_dynamic(x, 0)
    run_all(f, cf, [(x,) for x in xs])
    assert frames() == 1


def test_mark_dynamic_errors():
    x = randn(4, 3)
    with pytest.raises(IndexError):
        ember.mark_dynamic(x, 2)
    with pytest.raises(ValueError, match="outside"):
        ember.mark_dynamic(x, 0, min=5, max=10)
    with pytest.raises(TypeError):
        ember.mark_dynamic([1, 2], 0)


@pytest.mark.parametrize("mark", ["ember", "torch"])
def test_mark_dynamic_range_is_guarded(mark):
    """mark_dynamic's min/max are guards, as torch's: sizes inside run the symbolic graph, a
    size outside fails the guard and compiles again; a marked tensor whose traced size is outside
    its range is an error at the mark (ember) or at the compile (torch's mark)."""
    def f(x):
        return x.view(-1) * x.size(0)

    cf = ember.compile(f, dynamic=False)
    marker = ember.mark_dynamic if mark == "ember" else torch._dynamo.mark_dynamic
    x = randn(5, 3)
    marker(x, 0, min=4, max=8)
    assert_same(cf(x), f(x))
    for n in (4, 6, 8):
        y = randn(n, 3, seed=n)
        marker(y, 0, min=4, max=8)
        assert_same(cf(y), f(y))
    assert frames() == 1
    assert "4 <=" in ember.testing.entries(f)[0]["guards"] or "<= 8" in ember.testing.entries(f)[0]["guards"]
    for n in (9, 3):  # outside [4, 8]: the guard fails; unmarked, each is a graph of its own
        y = randn(n, 3, seed=n)
        assert_same(cf(y), f(y))
    assert frames() == 3 and counters()["fallbacks"] == 0
    if mark == "torch":
        z = randn(12, 3)
        marker(z, 0, min=4, max=8)
        with pytest.raises(ember.ConstraintViolation, match="outside its range"):
            cf(z)
        assert_same(cf(randn(6, 3)), f(randn(6, 3)))  # nothing remembered: the next call runs
    with pytest.raises(TypeError):
        ember.mark_dynamic(x, 0, min=2.5)


def test_stride_read_pins_sizes():
    def f(x):
        y = x.transpose(0, 1)
        return y * y.stride(0), y.is_contiguous()

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 3),) for n in (2, 4, 2)])
    assert frames() == 2


def test_unruled_op_pins_what_it_came_from():
    def f(x):
        d = torch.diag(x[:, 0])  # no size rule
        return d.view(d.shape[0], -1)[:, :1] + x

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 3),) for n in (2, 4, 4)])
    assert frames() == 2


_RULED = [  # ops whose result sizes follow from their operands' symbolic ones: no pin
    lambda x: x.max(dim=1)[0].view(x.shape[0], 1) + x,
    lambda x: x.min(1, keepdim=True).indices + x.median(dim=0).values + torch.max(x, x.flip(0)),
    lambda x: x.sort(dim=-1)[0] + x.argsort(0) + x.cummax(0).values + x.topk(2, dim=1).values.sum(1, keepdim=True),
    lambda x: x.gather(1, x.argsort(1)[:, :2]).sum(1) + x.index_select(0, torch.arange(x.shape[0])).sum(1),
    lambda x: x.argmax(1, keepdim=True) + x.var(1, True, True) + x.std(dim=0) + x.norm(2, 1, True) + x.max(),
    lambda x: torch.full_like(x, 2) + torch.zeros_like(x).scatter(1, x.argsort(1), x) + torch.lerp(x, x * 2, 0.5),
    lambda x: x[:1].expand_as(x) + x.t().reshape_as(x) + x.repeat((2, 1))[:x.shape[0]] + x.repeat(1, 2)[:, :3],
    lambda x: torch.stack([x, x * 2], dim=-1).sum(-1) + F.pad(x, (1, 1))[:, 1:-1] + F.pad(x, (0, 0, 0, x.shape[0]))[1:1 + x.shape[0]],
    lambda x: x.view((x.shape[0], 3, 1)).squeeze(-1) + torch.count_nonzero(x > 0, 1)[:, None],
    lambda x: torch.cat([x[..., ::2, :], x[1::2]], 0).sum(0) + x[::3].sum(0) + x[:, 1::2].sum(1, keepdim=True),
    lambda x: torch.outer(x[:, 0], x[0]).sum(1, keepdim=True) + torch.linspace(0, 1, x.shape[0])[:, None] +
    F.one_hot(x.argmax(1), 3) + x.reshape(-1).unflatten(0, (x.shape[0], 3)) + x[None].movedim(0, -1).squeeze(-1),
]


def test_native_attention_fast_path_keeps_sizes_symbolic():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()

    def f(x):
        return mha(x, x, x, need_weights=False)[0] + 1

    cf = ember.compile(f, dynamic=True)
    with torch.no_grad():  # eval and no grad: torch._native_multi_head_attention
        run_all(f, cf, [(randn(2, n, 8, seed=n),) for n in (3, 5, 6)])
    assert frames() == 1


@pytest.mark.parametrize("k", range(len(_RULED)))
def test_ruled_ops_keep_sizes_symbolic(k):
    f = _RULED[k]
    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 3, seed=n),) for n in (2, 4, 5, 7)])
    assert frames() == 1


def test_sizes_cross_a_graph_break():
    def f(x):
        n = x.shape[0] * 2
        print_ = str(n)  # a graph break (str of a symbolic int pins it, print would break)
        torch._dynamo.graph_break()
        return x.repeat(2, 1)[:n] + len(print_)

    cf = ember.compile(f)
    run_all(f, cf, [(randn(n, 3, seed=n),) for n in (2, 3, 4, 5)])


def test_module_inputs_dynamic_parameters_static():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    cm = ember.compile(m, dynamic=True)
    with torch.no_grad():
        for b, s in ((2, 3), (4, 5), (3, 9), (8, 2)):
            x = randn(b, s, 8)
            assert_same(cm(x), m(x))
    assert frames() == 1


class Recording:
    """A torch.compile-style backend that keeps the GraphModules and example inputs it is given."""

    def __init__(self):
        self.graphs, self.inputs = [], []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        self.inputs.append(list(example_inputs))
        return gm.forward


def placeholder_shapes(gm):
    """The shapes of the tensor placeholders (the SymInt placeholders of sizes come first)."""
    return [n.meta["val"].shape for n in gm.graph.find_nodes(op="placeholder")
            if isinstance(n.meta["val"], torch.Tensor)]


def test_python_backend_gets_symint_placeholders():
    def f(x):
        return x.view(x.shape[0] * 2, -1) + 1

    be = Recording()
    cf = ember.compile(f, backend=be, dynamic=True)
    run_all(f, cf, [(randn(n, 4),) for n in (2, 3, 7)])
    assert frames() == 1 and len(be.graphs) == 1
    (shape,) = placeholder_shapes(be.graphs[0])
    assert isinstance(shape[0], torch.SymInt) and shape[1] == 4
    first = be.graphs[0].graph.find_nodes(op="placeholder")[0]  # the size, lifted as TorchDynamo does
    assert first.meta["val"] is shape[0] or str(first.meta["val"]) == str(shape[0])
    assert be.inputs[0][0] is first.meta["val"]
    sizes = [n for n in be.graphs[0].graph.nodes if n.op == "call_method" and n.target == "size"]
    assert sizes and isinstance(sizes[0].meta["val"], torch.SymInt)


def test_python_backend_int_argument_is_a_symint_input():
    def f(x, n):
        return x.reshape(n, -1) * n

    be = Recording()
    cf = ember.compile(f, backend=be, dynamic=True)
    run_all(f, cf, [(randn(12), 3), (randn(12), 4), (randn(20), 5)])
    assert frames() == 1 and len(be.graphs) == 1
    assert any(isinstance(v, torch.SymInt) for v in be.inputs[0])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_python_backend_automatic_dynamic_compiles_twice(backend):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    cm = ember.compile(m, backend=backend)
    with torch.no_grad():
        for b in (3, 5, 9, 4, 12):
            x = randn(b, 8, seed=b)
            assert_same(cm(x), m(x), rtol=1e-5, atol=1e-5)
    assert frames() == 2 and counters()["backend_compiles"] == 2  # static, then symbolic in the batch dimension
    assert "size=(None, 8)" in ember.testing.entries(type(m).forward)[0]["guards"]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_with_symbolic_shapes(backend):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    ref = [p.detach().clone() for p in m.parameters()]
    cm = ember.compile(lambda x, y: F.mse_loss(m(x), y), backend=backend, dynamic=True)
    em = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    with torch.no_grad():
        for p, r in zip(em.parameters(), ref):
            p.copy_(r)
    for b in (4, 7, 10):
        x, y = randn(b, 6, seed=b), randn(b, 3, seed=b + 1)
        loss = cm(x, y)
        loss.backward()
        want = F.mse_loss(em(x), y)
        want.backward()
        assert_same(loss, want, rtol=1e-5, atol=1e-6)
        for p, q in zip(m.parameters(), em.parameters()):
            assert_same(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert frames() == 1 and counters()["backend_compiles"] == 1


def test_backend_assumptions_get_their_own_variant():
    """A backend whose code depends on the sizes it saw (as Inductor's choices may) adds guards
    to the ShapeEnv; ember compiles a variant per set of assumptions, and a call no variant takes
    compiles another rather than run a variant made for other sizes."""
    from torch._guards import TracingContext
    seen = []

    def picky(gm, example_inputs):
        fake = next(n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")
                    if isinstance(n.meta["val"], torch.Tensor))
        big = bool(fake.shape[0] > 4)  # a guard in the ShapeEnv
        assert TracingContext.get().fake_mode is fake.fake_mode
        seen.append(big)
        forward = gm.forward
        return (lambda *a: tuple(t * 2 for t in forward(*a))) if big else forward

    def f(x):
        return x + 1

    cf = ember.compile(f, backend=picky, dynamic=True)
    for n, doubled in ((3, False), (6, True), (2, False), (9, True), (4, False)):
        x = randn(n, 2, seed=n)
        assert_same(cf(x), (x + 1) * 2 if doubled else x + 1)
    assert frames() == 1 and seen == [False, True] and counters()["backend_compiles"] == 2


def test_symbolic_export_failure_compiles_per_size(monkeypatch):
    """When torch cannot run a graph with symbolic sizes (an op's fake kernel refusing SymInts),
    the backend gets a static graph per input size, as TorchDynamo with static shapes: a variant
    per size, checked per call, never the wrong variant and never a warning."""
    import warnings
    real = ember.backends.fx._Builder.propagate

    def refuse_symbols(self, gm):
        if any(isinstance(d, torch.SymInt) for v in self.placeholder_vals if isinstance(v, torch.Tensor)
               for d in v.shape):
            raise RuntimeError("SymIntArrayRef expected to contain only concrete integers")
        return real(self, gm)

    monkeypatch.setattr(ember.backends.fx._Builder, "propagate", refuse_symbols)
    be = Recording()

    def f(x, n):
        return x.reshape(n, -1).sum(0) * n

    cf = ember.compile(f, backend=be, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_all(f, cf, [(randn(12), 3), (randn(12), 4), (randn(20), 5), (randn(12), 3)])
    assert frames() == 1 and counters()["backend_compiles"] == 3
    assert all(isinstance(d, int) for g in be.graphs for s in placeholder_shapes(g) for d in s)


def test_buffers_stay_static_with_dynamic_true():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    be = Recording()
    cm = ember.compile(m, backend=be, dynamic=True)
    with torch.no_grad():
        for b, hw in ((2, 8), (5, 11)):
            x = randn(b, 3, hw, hw + 2, seed=b)
            assert_same(cm(x), m(x), rtol=1e-5, atol=1e-5)
    assert frames() == 1
    shapes = placeholder_shapes(be.graphs[0])
    assert any(isinstance(d, torch.SymInt) for d in shapes[0])
    assert all(isinstance(d, int) for s in shapes[1:] for d in s)  # weights and running stats


def test_contracted_dimensions_are_pinned():
    """x @ w, F.linear and conv need the input's inner size to match the weight's: the trace
    guards it, so the graph (and a backend's) sees it as a constant; another size fails the guard
    and raises as eager does."""
    lin, conv = torch.nn.Linear(5, 3), torch.nn.Conv2d(2, 4, 1)
    be = Recording()

    def f(x, img):
        return lin(x), conv(img)

    cf = ember.compile(f, backend=be, dynamic=True)
    with torch.no_grad():
        for n in (2, 3):
            args = (randn(n, 5), randn(n, 2, 4, 4))
            assert_same(cf(*args), f(*args))
        shapes = placeholder_shapes(be.graphs[0])
        assert shapes[0][1] == 5 and isinstance(shapes[0][1], int)
        with pytest.raises(RuntimeError):
            cf(randn(2, 6), randn(2, 2, 4, 4))
    assert any("SHAPE s1 == 5" in e["guards"] for e in ember.testing.entries(f))


def test_size_arithmetic_matches_python():
    def f(x, n):
        s = x.shape[0]
        vals = (s + n, s - n, s * n, s // n, s % n, -s, min(s, n), max(s, n), s // 2, (s + 1) % 3)
        return x.sum() + sum(vals), vals

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(s), n) for s, n in ((5, 2), (9, 4), (13, 5), (2, 7))])


def test_indexing_splitting_and_size_tuples():
    def f(x, w):
        b, s, d = x.shape
        h = x[:, 1:, :] + x[:, :-1]
        q, k = (x @ w).split(d, dim=2)
        shape = (-1,) + x.shape[1:2] + (d,)
        a = F.scaled_dot_product_attention(q[:, None], k[:, None], k[:, None])
        return h[..., None].float(), q.reshape(shape), a, x[:, -2:], x.size()[:-1] + (4,)

    cf = ember.compile(f, dynamic=False)
    w = randn(8, 16, seed=9)
    xs = [randn(b, s, 8, seed=b * s) for b, s in ((2, 3), (3, 5), (4, 7))]
    for x in xs:
        ember.mark_dynamic(x, [0, 1])  # the split dimension stays static
    run_all(f, cf, [(x, w) for x in xs])
    assert frames() == 1


def test_transformer_sweep_compiles_a_few_times():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=97, n_positions=64)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    cm = ember.compile(m)
    shapes = [(2, 8), (4, 12), (3, 5), (1, 9), (2, 16), (4, 4), (1, 6), (3, 11)]
    with torch.no_grad():
        for b, s in shapes:
            ids = torch.randint(0, 97, (b, s), generator=torch.Generator().manual_seed(b * s))
            assert_same(cm(input_ids=ids).logits, m(input_ids=ids).logits, rtol=1e-5, atol=1e-5)
    c = counters()
    assert c["fallbacks"] == 0 and c["aborts"] == 0
    assert c["frames"] <= 3  # static, then batch and sequence symbolic, then batch 1


# ---- fuzzer findings (ember.fuzz --dynamic true), one per class ----

def test_size_as_a_value_keeps_its_type():
    def f(x):
        return "{}-{}".format(x.shape, 1), str(x.shape[1:]), x.shape

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 3),) for n in (4, 5)])


def test_in_place_ops_that_change_sizes():
    def f(x, y, z):
        y.t_()
        torch.add(x, 1, out=z)  # z is resized to x's sizes
        return y.shape, y * 2, torch.ones(z.shape), torch.ones(x.shape)

    cf = ember.compile(f, dynamic=True)
    for n in (2, 3, 5):
        args = (randn(n, 3), randn(n, 4), randn(1, 3))
        assert_same(cf(*[a.clone() for a in args]), f(*[a.clone() for a in args]))


def test_pieces_counted_by_a_size_pin_it():
    def f(x):
        rows = x.unbind()
        parts = x.chunk(2, dim=0)
        halves = x.split(2)
        return len(rows), rows[-1] * 2, parts[-1].sum(), halves[0] + 1, [r.sum() for r in x]

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 3, seed=n),) for n in (3, 2, 4, 5, 3)])
    assert frames() == 4  # one per number of rows seen


def test_vision_model_batch_and_resolution():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).eval()
    cm = ember.compile(m)
    with torch.no_grad():
        for b, hw in ((2, 64), (3, 64), (5, 64), (4, 48), (7, 80), (6, 56)):
            x = randn(b, 3, hw, hw, seed=b)
            assert_same(cm(x), m(x), rtol=1e-5, atol=1e-5)
    assert frames() == 3  # static, batch symbolic, then resolution too


def test_conv_pool_flatten_rules():
    def f(x, w):
        y = F.conv2d(x, w, stride=2, padding=1)
        y = F.max_pool2d(y, 3, 2, 1)
        z = F.avg_pool2d(y, 2)
        a = F.adaptive_avg_pool2d(y, (1, None))
        return torch.flatten(z, 1), a.shape, z.flatten(2).shape

    cf = ember.compile(f, dynamic=False)
    w = randn(4, 3, 3, 3, seed=1)
    xs = [randn(b, 3, hw, hw + 4, seed=hw) for b, hw in ((2, 16), (3, 20), (5, 33))]
    for x in xs:
        ember.mark_dynamic(x, [0, 2, 3])
    run_all(f, cf, [(x, w) for x in xs])
    assert frames() == 1


def test_dynamic_log_names_each_pin(capfd):
    def f(x):
        return x * len(list(range(x.shape[0])))

    ember.set_logs("dynamic")
    try:
        ember.compile(f, dynamic=True)(randn(3, 2))
    finally:
        ember.set_logs("")
    err = capfd.readouterr().err
    assert "[ember:dynamic]" in err and "s0 pinned to 3" in err and "test_dynamic_shapes.py" in err


def test_type_and_isinstance_of_symbolic_ints():
    def f(x, n):
        s = x.shape[0]
        return x * 2, type(s) is int, isinstance(s, int), type(n).__name__, isinstance(n, (int, float))

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(k), k) for k in (3, 4, 5)])
    assert frames() == 1


def test_generate_with_a_growing_cache():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=97, n_positions=64)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 97, (1, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = m.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)
        m.forward = ember.compile(m.forward)
        out = m.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)
    assert torch.equal(out, ref)
    c = counters()
    assert c["fallbacks"] == 0 and c["frames"] <= 3  # prompt; one token; then every length


def test_advanced_indexing_by_integer_tensors():
    # transformers' padding mask: padding_mask[batch_idx, kv_idx] over broadcast aranges
    def f(mask, x):
        b, n = mask.shape
        bi = torch.arange(b)[:, None, None, None]
        kv = torch.arange(n)[None, None, None, :]
        m = mask[bi, kv].to(x.device) & (kv <= torch.arange(n)[None, None, :, None])
        rows = x[torch.arange(b)]
        return m, m.shape, rows * 2

    cf = ember.compile(f, dynamic=True)
    calls = [(torch.rand(b, n, generator=torch.Generator().manual_seed(n)) > 0.3, randn(b, n, 11)) for b, n in
             ((2, 5), (3, 7), (4, 9))]
    run_all(f, cf, calls)
    assert frames() == 1


def test_slices_with_symbolic_bounds():
    class Attn(torch.nn.Module):  # nanoGPT's causal mask buffer, sliced to the sequence length
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))
            self.pos = torch.nn.Parameter(randn(16, 8))

        def forward(self, x, n):
            B, T, C = x.size()
            att = (x @ x.transpose(-1, -2)).unsqueeze(1)
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
            s = slice(1, T)
            lst = list(range(10))[:T]  # a list's slice: the bound is pinned
            return (att, x + self.pos[:T], x[:, T // 2:], x[:, -T + 1:], x[:, :-n], x[:, n:], x[:, s], s.stop,
                    len(lst), x[:, T - 1])

    m = Attn()
    cm = ember.compile(m, dynamic=True)
    with torch.no_grad():
        for T, n in ((3, 2), (5, 3), (7, 2), (9, 4), (12, 5)):
            x = randn(2, T, 8, seed=T)
            assert_same(cm(x, n), m(x, n))
    assert frames() == 5  # len(lst) pins T
    ember.reset()
    ember.testing.reset_counters()

    def g(x, n):
        return x[:, :n] * 2, x[n:], x[-n:]

    cg = ember.compile(g, dynamic=True)
    run_all(g, cg, [(randn(9, 9, seed=k), k) for k in (2, 3, 7, 12, 4)])
    assert frames() == 2  # n <= 9, then n > 9 (the slice clamps)


def test_symbolic_slice_bounds_follow_python_clamping():
    # every sign and clamp of start and stop against the size, one compile per outcome class
    def f(x, a, b):
        return x[a:b], x[:, a:], x[:b]

    cf = ember.compile(f, dynamic=True)
    vals = (-12, -7, -3, -2, 2, 3, 5, 7, 12)
    ember.config.cache_size_limit = 64
    try:
        for n in (4, 6, 9):
            x = randn(n, n, seed=n)
            for a in vals:
                for b in vals:
                    assert_same(cf(x, a, b), f(x, a, b))
    finally:
        ember.config.cache_size_limit = 8
    c = counters()
    assert c["fallbacks"] == 0 and c["hits"] > 0 and 1 < c["frames"] < 64


def test_explain_reports_symbols_and_relations():
    def f(x):
        return x * 2 if x.shape[0] > 2 else x

    rep = ember.explain(f, dynamic=True)(randn(5, 3))
    assert rep.symbols == [["s0 = L['x'].size(0)", "s1 = L['x'].size(1)"]]
    assert rep.relations == [["s0 > 2"]]
    assert "symbolic sizes: s0 = L['x'].size(0)" in str(rep)


def test_slice_with_a_symbolic_and_a_tensor_bound():
    def f(x, t):
        return x[x.shape[0] // 2:t] * 2

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(n, 2), torch.tensor(n - 1)) for n in (4, 6, 9)])


def test_float_argument_that_changes_becomes_an_input():
    """A float argument whose value changed is a graph input at the next compile: pointwise
    operators with tensors take it as it comes; one compile serves every later value."""
    def f(x, s):
        y = x * s + (1.0 - x) / s
        y = y - s * x ** s
        y *= s
        return y, s

    cf = ember.compile(f)
    run_all(f, cf, [(randn(3, seed=k).abs() + 0.5, 0.5 + k) for k in range(6)])
    assert frames() == 2  # the value, then any value
    assert "L['s'] ==" not in ember.testing.entries(f)[0]["guards"]


def test_float_that_decides_sizes_or_branches_is_pinned():
    def f(x, s):
        if s > 2.0:
            x = x + torch.arange(0.0, s)[: x.shape[0]].sum()
        return torch.full((2,), s) * x.sum() + F.dropout(x, p=min(s / 10, 0.5), training=False).sum()

    cf = ember.compile(f)
    run_all(f, cf, [(randn(2), s) for s in (1.5, 2.5, 3.5, 1.25, 4.0, 3.5)])
    assert frames() == 5  # every distinct value compiles: each use pins it
    assert counters()["fallbacks"] == 0


def test_float_crossing_a_graph_break_compiles_the_resume_function_once():
    def f(x):
        v = x.sum().item()  # a graph break: v is an argument of the resume function
        return x * v + 1

    cf = ember.compile(f)
    run_all(f, cf, [(randn(4, seed=k),) for k in range(6)])
    assert frames() <= 3  # the frame, the resume function twice (a value, then any)


def test_float_crossing_a_break_into_fills_and_data_compiles_once():
    """A float that crossed a break given to a call whose result metadata cannot depend on it
    (torch.tensor's data, a fill value, a pointwise torch function's scalar) is a graph input
    there too, not pinned per value (a recompile storm to the cache limit before)."""
    def f(x):
        s = x.sum().item()  # a graph break: s is an argument of the resume function
        return (torch.tensor([s, 1.0]) + x.sum(), torch.full_like(x, s), x.masked_fill(x > 0, s),
                torch.clamp(x, max=s), torch.full((2,), s * 2))

    cf = ember.compile(f)
    run_all(f, cf, [(randn(3, seed=k),) for k in range(10)])
    assert frames() <= 3 and counters()["fallbacks"] == 0, counters()


def test_float_deciding_a_size_stays_pinned():
    def f(x, s):
        return torch.arange(0.0, 2.0, s), torch.nn.functional.interpolate(x, scale_factor=s)

    cf = ember.compile(f)
    run_all(f, cf, [(randn(1, 1, 4), s) for s in (0.5, 0.25, 1.0, 0.5, 2.0)])


def test_arithmetic_and_branches_on_a_changing_float_compile_per_outcome():
    """Arithmetic on a float input (with constants and other such floats) is computed by the
    guard with Python's operators, and a comparison or truth test guards its outcome, not the
    value: a new value compiles only when a branch goes the other way."""
    def f(x, lr, m):
        t = lr + 0.5
        u = -t * 2 / m
        if t > 1:
            y = x * u
        else:
            y = x - u
        if u:
            y = y + 1
        t += m
        return y, t, u // 3, u % 2.5, t ** 2, 3 - t

    cf = ember.compile(f)
    vals = [(0.25, 2.0), (0.75, 2.0), (1.5, 3.0), (2.0, 0.5), (-0.5, 4.0), (1.25, 1.5), (0.6, 2.5),
            (0.1, -1.0), (-0.5, 1.0), (float("nan"), 2.0)]
    run_all(f, cf, [(randn(2), lr, m) for lr, m in vals])
    # static; lr an input; lr and m inputs (t > 1, u != 0); (t <= 1, u == 0); (t <= 1, u != 0),
    # which nan takes too (it compares false, and is true)
    assert frames() == 5, counters()
    guards = "".join(e["guards"] for e in ember.testing.entries(f))
    assert "COMPARE ((L['lr'] + 0.5) > 1) is True" in guards


def test_min_and_max_of_a_changing_float_guard_their_comparisons():
    """min()/max() given a float input compare as Python's loop does, each comparison guarded:
    the float is not pinned to its value (it recompiled on every new value, fuzz 2604 #322)."""
    def f(x, s):
        return x * min([s, 2.0, 2]) + max(s, 0.5), min(s, 7)

    cf = ember.compile(f)
    run_all(f, cf, [(randn(2), s) for s in (1.5, 0.25, 3.0, 1.75, 0.1, -2.0, 2.5, float("nan"))])
    # static; then per outcome of (s < 2.0, s > 0.5): (T, T), (T, F), (F, T)
    assert frames() == 4, counters()


def test_int_round_floor_of_a_changing_float_guard_the_int_not_the_float():
    """int(), round(), math.floor/ceil/trunc of a float input are constants guarded as that call
    of it: a new value compiles only when one of them changes (the float was pinned and every
    value compiled: fuzz 2702 #690, `torch.zeros(int(v) % 3 + 1)` after an .item() break);
    abs() and float() of it stay inputs; int(inf) raises as Python's."""
    import math

    def f(x, s):
        return (torch.zeros(int(s) % 3 + 1) + x * abs(s) + float(s), round(s), math.floor(s), math.ceil(s),
                math.trunc(-s))

    cf = ember.compile(f)
    run_all(f, cf, [(randn(2), s) for s in (0.25, 0.5, 0.75, 0.125, 0.3, 1.25, 1.375, 0.6)])
    # the value (0.25); then round(s) == 0 with int(s) == 0 (0.5, then 0.125 and 0.3); round(s) == 1
    # with int(s) == 0 (0.75, then 0.6); int(s) == 1 (1.25, then 1.375)
    guards = ember.testing.entries(f)[0]["guards"]  # the newest compile's (the first pins every value)
    assert "(int L['s']) == " in guards and "L['s'] ==" not in guards.replace("(int L['s'])", "")
    assert frames() == 4, counters()
    with pytest.raises(OverflowError):
        cf(randn(2), float("inf"))


def test_int_of_a_changing_float_becomes_a_symbolic_int():
    # int(v) of the .item() crossing a break: guarded by value, then (once it changed) a symbolic
    # int like any int of the frame, so sizes made from it compile once
    def f(x):
        v = x.sum().item()
        return torch.zeros(int(v) % 3 + 1) + x.sum(), torch.ones(int(v)).sum()

    cf = ember.compile(f)
    run_all(f, cf, [(torch.tensor([2.5 * k, 0.25]),) for k in range(1, 9)])
    assert frames() <= 4, counters()  # the frame; the resume function: the value, any float, any int


class _Cfg:
    def __init__(self, val):
        self.val = val


def test_a_float_attribute_read_many_times_is_one_graph_input():
    """Each read of a changing float attribute is the same graph input (three inputs of one
    name made the torch.fx export fail: duplicate argument 'L_cfg_val')."""
    def f(x, cfg):
        for _ in range(3):
            x = x + cfg.val
        return x

    import warnings

    cf = ember.compile(f, backend="aot_eager")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run_all(f, cf, [(randn(2), _Cfg(v)) for v in (1.0, 0.5, 2.0, -1.5)])
    assert frames() == 2, counters()
    assert not [w for w in seen if "could not hand a graph" in str(w.message)], [str(w.message) for w in seen]


def test_float_arithmetic_that_raises_or_leaves_floats_for_a_value():
    """A value for which the guard's arithmetic raises (1 / 0) or gives no float (a complex
    power) fails the guard: the next compile sees it as eager does."""
    def f(x, s):
        try:
            r = 1.0 / (s - 1.0)
        except ZeroDivisionError:
            r = -1.0
        return x * r, (s - 2.0) ** 0.5

    cf = ember.compile(f)
    run_all(f, cf, [(randn(2), s) for s in (3.0, 4.0, 5.0, 1.0, 6.0, 1.5)])
    assert counters()["fallbacks"] == 0


def test_float_arithmetic_giving_nan_pins_its_operands():
    """A nan passes an equality guard only as the same object, and the guard would compute a
    new one per call: arithmetic that gives nan pins its operands instead (found by the fuzzer:
    the fresh guards failed on their own frame)."""
    def f(x, s):
        t = s + float("nan")
        return x * 2, t != t, str(t)

    cf = ember.compile(f)
    run_all(f, cf, [(randn(2), s) for s in (0.5, 1.5, 1.5, 2.5)])


def test_item_value_crossing_a_break_used_in_arithmetic_compiles_once():
    """`v = loss.item()` handed to the resume function, then scaled and tested: the resume
    function compiles for the value, then once for any value (per outcome of `if`)."""
    def f(x):
        v = x.sum().item()  # a graph break
        w = v * 0.5 + 1
        if w:
            return x * w, w
        return x, w

    cf = ember.compile(f)
    run_all(f, cf, [(randn(4, seed=k),) for k in range(8)])
    assert frames() <= 3, counters()


def test_floats_in_a_list_crossing_a_break_are_inputs_once_they_change():
    """x.tolist() hands the resume function a list of floats: an item whose value changed is a
    graph input at the next compile, as a float argument is."""
    def f(x):
        vals = x.tolist()  # a graph break
        return x * vals[0] + vals[1], vals[2] * 2

    cf = ember.compile(f)
    run_all(f, cf, [(randn(3, seed=k),) for k in range(8)])
    assert frames() <= 3, counters()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_python_backend_takes_float_arithmetic_as_an_input(backend):
    def f(x, s):
        t = s * 2 - 1
        return (x * t).sin(), t

    cf = ember.compile(f, backend=backend)
    for k, s in enumerate((0.5, 1.5, 2.5, -3.0)):
        x = randn(3, seed=k)
        assert_same(cf(x, s), f(x, s), rtol=1e-5, atol=1e-6)
    assert frames() == 2 and counters()["backend_compiles"] == 2


@pytest.mark.parametrize("dynamic", [True, False])
def test_float_inputs_with_dynamic_true_and_false(dynamic):
    def f(x, s):
        return x * s

    cf = ember.compile(f, dynamic=dynamic)
    run_all(f, cf, [(randn(3), s) for s in (0.5, 1.5, 2.5)])
    assert frames() == (1 if dynamic else 3)


def test_python_backend_takes_a_float_input_as_torchdynamo_does():
    """A float that became a graph input reaches a Python backend as TorchDynamo passes one: a
    float64 0-dim tensor placeholder whose .item() is a SymFloat the graph's ops take."""
    def f(x, s):
        return x * s - s

    be = Recording()
    cf = ember.compile(f, backend=be)
    run_all(f, cf, [(randn(3), s) for s in (0.5, 1.5, 2.5, -0.0, 7.25)])
    assert frames() == 2 and len(be.graphs) == 2
    ph = be.graphs[1].graph.find_nodes(op="placeholder")
    t = ph[1].meta["val"]
    assert t.dtype == torch.float64 and t.dim() == 0
    item = next(n for n in be.graphs[1].graph.nodes if n.op == "call_method" and n.target == "item")
    assert item.args[0] is ph[1] and isinstance(item.meta["val"], torch.SymFloat)
    ex = be.inputs[1][1]
    assert isinstance(ex, torch.Tensor) and ex.dtype == torch.float64 and ex.item() == 1.5


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_python_backend_float_inputs_compile_once(backend):
    """Changing floats (a learning rate, a scale) compile once more, then any value runs: in
    pointwise ops, powers, with gradients; nan, inf and -0.0 arrive as they are."""
    def f(x, s, t):
        y = (x * s + t).sin() - s * x ** 2
        return y / t, y.sum() * s

    cf = ember.compile(f, backend=backend)
    vals = [(0.5, 0.25), (1.5, 0.25), (1.5, 3.0), (-2.0, 0.75), (-0.0, 1.0), (0.0, -1.0), (7.0, 1e-3),
            (float("nan"), 2.0), (float("inf"), 2.0)]
    for k, (s, t) in enumerate(vals):
        x = randn(4, 3, seed=k).requires_grad_()
        xe = x.detach().clone().requires_grad_()
        got, want = cf(x, s, t), f(xe, s, t)
        for g, w in zip(got, want):
            assert_same(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
        if s == s and abs(s) != float("inf"):
            got[1].backward()
            want[1].backward()
            assert_same(x.grad, xe.grad, rtol=1e-5, atol=1e-6)
    assert frames() == 3 and counters()["fallbacks"] == 0  # static, then t, then s as inputs
    assert counters()["backend_compiles"] <= 4


def test_python_backend_float_variant_for_specialized_floats():
    """A backend that specializes a float input (its ShapeEnv guards the value) gets a variant
    per value it assumed; a value it did not see never runs a variant made for another."""
    seen = []

    def picky(gm, example_inputs):
        item = next(n for n in gm.graph.nodes if n.op == "call_method" and n.target == "item")
        v = float(item.meta["val"])  # specializes: a guard on the float's value
        seen.append(v)
        forward = gm.forward
        return lambda *a: tuple(o + v for o in forward(*a))

    def f(x, s):
        return x * s

    cf = ember.compile(f, backend=picky, dynamic=True)
    for s in (0.5, 1.5, 0.5, 2.5, 1.5):
        x = randn(3, seed=int(s * 2))
        assert_same(cf(x, s), f(x, s) + s)
    assert seen == [0.5, 1.5, 2.5]


def test_float_input_read_by_python_code_is_pinned_exactly():
    """A float input whose value Python code reads (math.copysign, str, a dict key) is pinned
    to its exact value: -0.0 and 0.0 are different constants (found by the fuzzer)."""
    import math

    def f(x, s):
        return x.mul(math.copysign(1.0, s)) * s, str(s)

    cf = ember.compile(f)
    run_all(f, cf, [(randn(2), s) for s in (2.0, -0.0, 0.0, 0.0, -0.0, 3.0)])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cache_first_seen_in_a_recompile_grows_without_another(backend):
    # generate(): the prompt's call, then one token at a time with a cache as long as the
    # prompt; the cache has no history, but its length is the prompt's, which just changed
    def step(ids, cache=None):
        h = ids.float().unsqueeze(-1) * torch.ones(8)
        if cache is not None:
            h = torch.cat([cache, h], 1)
        att = torch.softmax(h @ h.transpose(1, 2) / 8, -1) @ h
        return att[:, -1:], h

    cs = ember.compile(step, backend=backend)
    ids = torch.arange(16).view(1, 16)
    out, cache = cs(ids)
    ref_out, ref_cache = step(ids)
    assert_same((out, cache), (ref_out, ref_cache), rtol=1e-4, atol=1e-4)
    for t in range(5):
        tok = torch.tensor([[t]])
        out, cache = cs(tok, cache)
        ref_out, ref_cache = step(tok, ref_cache)
        assert_same((out, cache), (ref_out, ref_cache), rtol=1e-4, atol=1e-4)
    assert frames() == 2


def test_sdpa_with_grouped_heads_keeps_sizes_symbolic():
    # k and v with fewer heads than q (enable_gqa): the result has q's heads, no relation
    # between the head counts (one was recorded, false at the traced sizes: recompiles)
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True) * q.shape[2]

    cf = ember.compile(f, dynamic=True)
    run_all(f, cf, [(randn(2, 8, s, 16, seed=s), randn(2, 2, s, 16, seed=s + 1), randn(2, 2, s, 16, seed=s + 2))
                    for s in (5, 7, 9)])
    assert frames() == 1


def test_symbolic_int_indexing_a_container_is_pinned():
    # dynamic=True makes the int symbolic; picking a module of a ModuleList or Sequential, or an
    # item of a list or tuple, by it pins it (a guard): each index compiles once, answers eager's
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
            self.acts = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())

        def forward(self, x, c):
            return self.layers[c](x), self.acts[c - 1](x), [1, 2, 3][c] * x, (4, 5, 6)[c], self.layers[c:][0](x)

    m = M()
    f = ember.compile(m, fullgraph=True, dynamic=True)
    x = randn(2)
    for c in (1, 2, 1):
        assert_same(f(x, c), m(x, c))
    c = counters()
    assert c["frames"] == 2 and c["hits"] == 1, c


_STEP = 0


@pytest.mark.parametrize("dynamic", [None, True])
def test_int_and_float_attributes_and_globals_that_change_become_symbolic(dynamic):
    # a module's step counter, a decaying float attribute and a global counter, each changed
    # per call: automatic dynamic makes them inputs (as TorchDynamo does), not a recompile per
    # value until the cache limit; 0 and 1 stay specialized, as for arguments
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0
            self.temp = 1.0

        def forward(self, x):
            global _STEP
            _STEP += 1
            self.steps += 1
            self.temp *= 0.9
            return x * self.steps + _STEP + x * self.temp

    global _STEP
    m, m2 = Net(), Net()
    om = ember.compile(m2, dynamic=dynamic)  # dynamic=True: globals and attributes once they change
    x = randn(3)
    for _ in range(12):
        g0 = _STEP
        want = m(x)
        _STEP = g0
        assert_same(om(x), want)
        assert (m.steps, m.temp) == (m2.steps, m2.temp)
    c = counters()
    assert c["frames"] == 3 and c["hits"] == 9, c


def test_torch_numel_as_the_method():
    def f(a):
        return a + torch.numel(a) + a.numel() + a.nelement()

    one_graph(f, randn(3), fullgraph=True)
    ember.reset()
    ember.testing.reset_counters()
    cf = ember.compile(f, dynamic=True, fullgraph=True)
    run_all(f, cf, [(randn(n),) for n in (3, 4, 5)])
    assert frames() == 1, counters()


def test_float_plus_a_bool_and_floats_behind_a_dict_view_stay_inputs():
    # v + flag (a bool argument) is float arithmetic the guard computes (it pinned v: fuzz 2707
    # #506); a float read through d.items() passed on becomes an input once it changes
    def plus_flag(x, flag):
        v = x.sum().item() + flag
        return x * v

    def through_view(x, kv):
        return x * dict(kv)["scale"]

    cf = ember.compile(plus_flag)
    run_all(plus_flag, cf, [(randn(3, seed=k), True) for k in range(6)])
    assert frames() <= 3, counters()
    ember.reset()
    ember.testing.reset_counters()
    cf = ember.compile(through_view)
    run_all(through_view, cf, [(randn(3), {"scale": 0.5 + k}.items()) for k in range(6)])
    assert frames() == 2, counters()


def test_f_string_of_a_symbolic_size_or_float_input_formats_its_value():
    # f"{x.shape[0]}" of a symbolic size was refused (the whole graph); it pins the value, as
    # str() of one does, so each size gets its own compile and string
    def f(x, n, g):
        return x + 1, f"{x.shape[0]} rows, n={n:>4}, g={g:.2f} {n!r}"

    cf = ember.compile(f, dynamic=True, fullgraph=True)
    for k in (3, 5, 3):
        got, want = cf(randn(k), k + 2, k * 0.5), f(randn(k), k + 2, k * 0.5)
        assert got[1] == want[1] and got[0].shape == want[0].shape
