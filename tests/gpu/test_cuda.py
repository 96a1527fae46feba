"""ember on a CUDA device: every result is compared with eager PyTorch on the same inputs.

Run on a machine with a GPU (the device tool):  python -m pytest tests/gpu -q -p no:cacheprovider
Without CUDA every test is skipped, and `-m "not gpu"` deselects them.

What is covered: CUDA inputs and parameters under ember's own executor (backend="eager"); the
device guards (CPU then CUDA inputs, CPU scalars with CUDA tensors, moves inside a function,
branches on x.is_cuda); CUDA autocast in bfloat16 and float16, around the compiled call and
inside the compiled function; Inductor, mode="reduce-overhead" (CUDA graphs) and
mode="max-autotune-no-cudagraphs"; SGD training steps; graph breaks.

Tolerances. ember's executor runs the kernels eager PyTorch runs, so its float32 results are
compared at EXEC (1e-5); under autocast at the tolerance of the autocast dtype (LOWP). Inductor
fuses kernels and reorders reductions: INDUCTOR (1e-3) in float32, LOWP_INDUCTOR under autocast
(Inductor keeps low-precision intermediates in float32, eager rounds each one). TF32 is switched
off for the whole module (cuDNN allows it by default), so that float32 convolutions and matrix
products do not depend on which algorithm each side picks.

Sizes are tiny and iterations few: the Inductor tests dominate the run time (about fifteen small
compiles and one autotuned matrix product).
"""
import contextlib
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember
import ember.testing

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run through the device tool)"),
]

CUDA = torch.device("cuda", 0)
CPU = torch.device("cpu")
LOWP = [torch.bfloat16, torch.float16]

EXEC = dict(rtol=1e-5, atol=1e-5)
INDUCTOR = dict(rtol=1e-3, atol=1e-3)
LOWP_TOL = {torch.bfloat16: dict(rtol=1.6e-2, atol=1e-3), torch.float16: dict(rtol=1e-3, atol=1e-3)}
LOWP_INDUCTOR = {torch.bfloat16: dict(rtol=4e-2, atol=4e-2), torch.float16: dict(rtol=1e-2, atol=1e-2)}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def counters():
    return ember.testing.counters()


def rand(*shape, seed=0, device=CUDA):
    """The same values on any device: drawn on the CPU from a seeded generator, then moved."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(device)


def flat(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def assert_same(got, expected, rtol=None, atol=None, path="out"):
    """Same structure, and tensors of the same dtype, shape, device and requires_grad with close
    values (rtol/atol None: assert_close's defaults for the dtype)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), (path, type(got))
        assert (got.dtype, got.shape, got.device) == (expected.dtype, expected.shape, expected.device), \
            (path, got.dtype, got.shape, got.device, expected.dtype, expected.shape, expected.device)
        assert got.requires_grad == expected.requires_grad, (path, got.requires_grad)
        torch.testing.assert_close(got.detach(), expected.detach(), rtol=rtol, atol=atol,
                                   msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), (path, got)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_same(a, b, rtol, atol, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=rtol or 0, abs=atol or 0), (path, got, expected)
    else:
        assert got == expected, (path, got, expected)


def assert_graphs(frames, breaks=0, **more):
    """The counters since the test began: `frames` graphs captured, no abort and no fallback to
    plain Python (a fallback would pass every value check while compiling nothing)."""
    c = counters()
    want = dict(frames=frames, breaks=breaks, aborts=0, fallbacks=0, **more)
    assert {k: c[k] for k in want} == want, c


def assert_on_backend(fn, backend):
    """Every graph of fn went to the backend (none was left to ember's executor)."""
    entries = ember.testing.entries(fn)
    assert entries
    for e in entries:
        assert e.get("backend") == backend and e.get("backend_note") == "", \
            {k: e.get(k) for k in ("backend", "backend_note", "graph")}


class MLP(nn.Module):
    def __init__(self, d_in=16, hidden=32, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class ConvBlock(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


MODELS = {"mlp": (MLP, (8, 16)), "conv": (ConvBlock, (4, 3, 8, 8))}


def build(name, device=CUDA):
    """(model, inputs(seed)) with the same weights on every call."""
    cls, shape = MODELS[name]
    torch.manual_seed(0)
    return cls().to(device), (lambda seed=0: rand(*shape, seed=seed, device=device))


def same_state(model, twin, **tol):
    for (n, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        torch.testing.assert_close(p, q, **tol, msg=lambda m: f"parameter {n}: {m}")
    for (n, b), (_, c) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(b, c, **(tol if b.is_floating_point() else {}),
                                   msg=lambda m: f"buffer {n}: {m}")


@pytest.fixture(autouse=True, scope="module")
def _no_tf32():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _reset_torch_compile():
    torch._dynamo.reset()
    from torch._inductor import cudagraph_trees
    cudagraph_trees.reset_cudagraph_trees()  # in torch._dynamo.reset() too, in recent versions


@pytest.fixture
def fresh_cudagraphs():
    """CUDA graph trees are process-wide state (one tree manager per device, and the mark-step
    counter): each test that records graphs starts and ends with none."""
    _reset_torch_compile()
    yield
    _reset_torch_compile()


@pytest.fixture
def graph_counts(monkeypatch):
    """How many CUDA graphs were captured and replayed (torch.cuda.CUDAGraph.capture_end and
    replay, which Inductor's CUDA graph trees call). A tree manager captures an empty graph when
    it is made (to keep its memory pool), and a recording is followed by one replay that makes
    its outputs: `replays > captures` means that a recorded graph was replayed again."""
    counts = {"captures": 0, "replays": 0}
    capture_end, replay = torch.cuda.CUDAGraph.capture_end, torch.cuda.CUDAGraph.replay

    def counting_capture_end(self, *a, **k):
        counts["captures"] += 1
        return capture_end(self, *a, **k)

    def counting_replay(self, *a, **k):
        counts["replays"] += 1
        return replay(self, *a, **k)

    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_end", counting_capture_end)
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", counting_replay)
    return counts


def inductor_counters():
    from torch._dynamo.utils import counters as torch_counters
    return dict(torch_counters["inductor"])


# ---------------------------------------------------------------------------
# 1. CUDA inputs and parameters, ember's executor
# ---------------------------------------------------------------------------


def mixed_ops(x, y):
    a = torch.sin(x) * y + 1
    b = a @ y.t()
    c = torch.where(b > 0, b, b * 0.1)
    d = F.dropout(a, 0.5, training=True)  # CUDA RNG: same seed, same mask
    idx = torch.arange(x.shape[0], device=x.device)
    e = x.new_zeros(x.shape[0]).index_add(0, idx, a[:, 0])
    return c.softmax(-1), a.mean(dim=0, keepdim=True), d, e, torch.cumsum(a, 1)[:, -1]


def test_function_on_cuda_matches_eager():
    x, y = rand(4, 6), rand(4, 6, seed=1)
    torch.manual_seed(1)
    expected = mixed_ops(x, y)
    cf = ember.compile(mixed_ops)
    torch.manual_seed(1)
    got = cf(x, y)
    assert_same(got, expected, **EXEC)
    assert all(t.device == CUDA for t in got)
    assert_graphs(1)
    assert "cuda" in ember.testing.entries(mixed_ops)[0]["graph"]  # ember tracked the device
    torch.manual_seed(2)
    expected = mixed_ops(x, y)
    torch.manual_seed(2)
    assert_same(cf(x, y), expected, **EXEC)  # the cached graph, a new dropout mask
    assert_graphs(1, hits=1)


def test_function_with_grad_on_cuda_matches_eager():
    x = rand(4, 6).requires_grad_()
    y = rand(4, 6, seed=1)
    xe = x.detach().clone().requires_grad_()

    def f(x, y):
        return (torch.tanh(x @ y.t()) * x.sum(1, keepdim=True)).square().mean()

    expected = f(xe, y)
    expected.backward()
    got = ember.compile(f)(x, y)
    got.backward()
    assert_same(got, expected, **EXEC)
    torch.testing.assert_close(x.grad, xe.grad, **EXEC)
    assert_graphs(1)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_module_inference_on_cuda_matches_eager(name, grad):
    model, inputs = build(name)
    model.eval()
    cm = ember.compile(model)
    with torch.set_grad_enabled(grad):
        for seed in range(2):
            x = inputs(seed)
            assert_same(cm(x), model(x), **EXEC)
    assert_graphs(1, hits=1)


def test_module_train_mode_updates_buffers_as_eager():
    """Batch norm in train mode on CUDA: outputs and running statistics as eager's."""
    model, inputs = build("conv")
    model.train()
    twin = copy.deepcopy(model)
    cm = ember.compile(model)
    for seed in range(2):
        x = inputs(seed)
        assert_same(cm(x), twin(x), **EXEC)
    same_state(model, twin, **EXEC)
    assert model.bn.num_batches_tracked.item() == 2
    assert_graphs(1, hits=1)


# ---------------------------------------------------------------------------
# 2. device guards
# ---------------------------------------------------------------------------


def project(x, w):
    y = torch.tanh(x @ w)
    bias = torch.arange(y.shape[-1], device=y.device, dtype=y.dtype) / 10
    return y + bias, y.sum(0)


def test_cpu_then_cuda_inputs_recompile():
    cf = ember.compile(project)
    x, w = rand(4, 5, device=CPU), rand(5, 3, seed=1, device=CPU)
    for device in (CPU, CUDA, CPU, CUDA):
        args = (x.to(device), w.to(device))
        got = cf(*args)
        assert_same(got, project(*args), **EXEC)
        assert {t.device for t in got} == {device}
    assert_graphs(2, hits=2)
    assert counters()["recompiles"] >= 1
    graphs = [e["graph"] for e in ember.testing.entries(project)]
    assert len(graphs) == 2 and sum("cuda" in g for g in graphs) == 1, graphs


def by_device(x):
    if x.is_cuda:
        return x * 2
    return x - 1


def test_branch_on_device_is_guarded():
    """A branch on x.is_cuda: each device gets its own graph (a missing device guard would run
    the other device's branch)."""
    cf = ember.compile(by_device)
    x = rand(3, device=CPU)
    for device in (CPU, CUDA, CPU):
        got = cf(x.to(device))
        assert_same(got, by_device(x.to(device)), **EXEC)
        assert got.device == device
    assert_graphs(2, hits=1)
    assert counters()["recompiles"] >= 1


def test_module_moved_to_cuda_recompiles():
    model, inputs = build("mlp", device=CPU)
    model.eval()
    cm = ember.compile(model)
    x = inputs()
    with torch.no_grad():
        assert_same(cm(x), model(x), **EXEC)
        assert cm.cuda() is cm  # Module.cuda() on the wrapper moves the module, returns the wrapper
        assert next(model.parameters()).device == CUDA
        got = cm(x.to(CUDA))
        assert_same(got, model(x.to(CUDA)), **EXEC)
        assert got.device == CUDA
    assert_graphs(2)
    assert counters()["recompiles"] >= 1


def scale_shift(x, s):
    return x * s + s


def test_cpu_scalar_tensor_with_cuda_tensor():
    """A 0-dim CPU tensor mixes with CUDA tensors (as in eager); moving it to CUDA recompiles."""
    cf = ember.compile(scale_shift)
    x = rand(4)
    for s in (torch.tensor(3.0), torch.tensor(-2.0), torch.tensor(3.0, device=CUDA)):
        got = cf(x, s)
        assert_same(got, scale_shift(x, s), **EXEC)
        assert got.device == CUDA
    assert_graphs(2, hits=1)
    assert counters()["recompiles"] >= 1


def moves(x):
    a = x.to("cuda:0") * 2
    b = a.sum().cpu()
    c = torch.zeros(2, device="cuda") + a.mean()  # "cuda" is the current device: cuda:0
    d = torch.ones(2, device=torch.device("cuda")) * 3
    e = x.cuda() - 1
    return a, b, c, d, e, x.to(a.device, dtype=torch.float64), a.to(x.device)


def test_moves_between_devices_inside_function():
    cf = ember.compile(moves)
    x = rand(3, device=CPU)
    for device in (CPU, CUDA, CPU):
        got = cf(x.to(device))
        expected = moves(x.to(device))
        assert_same(got, expected, **EXEC)  # compares each result's device
        assert [t.device.type for t in got] == ["cuda", "cpu", "cuda", "cuda", "cuda", "cuda", device.type]
    assert_graphs(2, hits=1)


def add(x, y):
    return x + y


def test_device_mismatch_raises_as_eager():
    x, y = rand(3, device=CPU), rand(3, seed=1)
    with pytest.raises(RuntimeError, match="device"):
        add(x, y)
    cf = ember.compile(add)
    with pytest.raises(RuntimeError, match="device"):
        cf(x, y)
    assert_same(cf(x.to(CUDA), y), add(x.to(CUDA), y), **EXEC)  # still usable


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_gpu_recompiles():
    cf = ember.compile(project)
    x, w = rand(4, 5, device=CPU), rand(5, 3, seed=1, device=CPU)
    for device in (torch.device("cuda", 0), torch.device("cuda", 1)):
        args = (x.to(device), w.to(device))
        got = cf(*args)
        assert_same(got, project(*args), **EXEC)
        assert {t.device for t in got} == {device}
    assert_graphs(2)
    assert counters()["recompiles"] >= 1


# ---------------------------------------------------------------------------
# 3. CUDA autocast (bfloat16, float16)
# ---------------------------------------------------------------------------


def linear_x2(lin, x):
    return lin(x) * 2 + 1


@pytest.mark.parametrize("dtype", LOWP, ids=str)
def test_autocast_around_compiled_call(dtype):
    lin = nn.Linear(16, 16).to(CUDA)
    x = rand(8, 16)
    cf = ember.compile(linear_x2)
    with torch.autocast("cuda", dtype=dtype):
        expected = linear_x2(lin, x)
        got = cf(lin, x)
    assert got.dtype == expected.dtype == dtype
    assert_same(got, expected, **LOWP_TOL[dtype])
    got = cf(lin, x)  # outside autocast: the global-state guard recompiles
    assert got.dtype == torch.float32
    assert_same(got, linear_x2(lin, x), **EXEC)
    assert_graphs(2)
    assert counters()["recompiles"] >= 1


def autocast_inside(lin, x, dtype):
    with torch.autocast("cuda", dtype=dtype):
        y = lin(x)  # low precision
        p = torch.softmax(y, -1)  # float32 under CUDA autocast
        with torch.autocast("cuda", enabled=False):
            f = y.float() @ y.float().t()  # float32
        w = y @ y.t()  # low precision
        n = F.layer_norm(w, w.shape[-1:])  # float32
    return y, p, f, w, n, (w.float() + 1).sum()


@pytest.mark.parametrize("dtype", LOWP, ids=str)
def test_autocast_inside_compiled_function(dtype):
    lin = nn.Linear(16, 16).to(CUDA)
    x = rand(8, 16)
    expected = autocast_inside(lin, x, dtype)
    cf = ember.compile(autocast_inside)
    for _ in range(2):
        got = cf(lin, x, dtype)
        assert [t.dtype for t in got] == [t.dtype for t in expected]
        assert expected[0].dtype == dtype
        assert_same(got, expected, **LOWP_TOL[dtype])
        assert not torch.is_autocast_enabled("cuda")
    assert_graphs(1, hits=1)


def autocast_loss(lin, x, dtype):
    with torch.autocast("cuda", dtype=dtype):
        return torch.tanh(lin(x)).float().pow(2).mean()


@pytest.mark.parametrize("dtype", LOWP, ids=str)
def test_autocast_gradients_match_eager(dtype):
    torch.manual_seed(0)
    lin = nn.Linear(16, 8).to(CUDA)
    twin = copy.deepcopy(lin)
    x = rand(8, 16)
    ref = autocast_loss(twin, x, dtype)
    ref.backward()
    got = ember.compile(autocast_loss)(lin, x, dtype)
    got.backward()
    assert_same(got, ref, **LOWP_TOL[dtype])
    for (n, p), (_, q) in zip(lin.named_parameters(), twin.named_parameters()):
        assert p.grad.dtype == q.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, q.grad, **LOWP_TOL[dtype], msg=lambda m: f"{n}.grad: {m}")
    assert_graphs(1)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_autocast_dtype_change_between_calls(backend):
    """bfloat16, then float16, then no autocast, then bfloat16 around the same compiled function:
    each call gives eager's dtype (torch.compile guards on the autocast dtype, not only on
    whether autocast is on)."""
    lin = nn.Linear(16, 16).to(CUDA)
    x = rand(8, 16)
    cf = ember.compile(linear_x2, backend=backend)
    for dtype in (torch.bfloat16, torch.float16, None, torch.bfloat16):
        with torch.autocast("cuda", dtype=dtype) if dtype else contextlib.nullcontext():
            expected = linear_x2(lin, x)
            got = cf(lin, x)
        assert got.dtype == expected.dtype, f"under autocast {dtype}: {got.dtype}, eager {expected.dtype}"
        tol = LOWP_TOL[dtype] if dtype else EXEC
        assert_same(got, expected, **(tol if backend == "eager" else LOWP_INDUCTOR.get(dtype, INDUCTOR)))
    assert counters()["aborts"] == 0


@pytest.mark.parametrize("dtype", LOWP, ids=str)
def test_autocast_inside_under_inductor(dtype):
    lin = nn.Linear(16, 16).to(CUDA)
    x = rand(8, 16)
    expected = autocast_inside(lin, x, dtype)
    got = ember.compile(autocast_inside, backend="inductor")(lin, x, dtype)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    assert_same(got, expected, **LOWP_INDUCTOR[dtype])
    assert not torch.is_autocast_enabled("cuda")
    assert_graphs(1)
    assert_on_backend(autocast_inside, "inductor")


# ---------------------------------------------------------------------------
# 4. Inductor
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inductor_module_on_cuda_matches_eager(name):
    model, inputs = build(name)
    model.eval()
    cm = ember.compile(model, backend="inductor")
    with torch.no_grad():
        for seed in range(2):
            x = inputs(seed)
            got = cm(x)
            assert_same(got, model(x), **INDUCTOR)
            assert got.device == CUDA
    assert_graphs(1, hits=1)
    assert_on_backend(model, "inductor")


def pointwise_chain(x, y):
    z = torch.sigmoid(x) * torch.tanh(y) + x.square()
    return z.sum(-1), z.amax(0), F.silu(z)


def test_inductor_function_on_cuda_matches_eager():
    x, y = rand(64, 32), rand(64, 32, seed=1)
    cf = ember.compile(pointwise_chain, backend="inductor")
    assert_same(cf(x, y), pointwise_chain(x, y), **INDUCTOR)
    assert_graphs(1)
    assert_on_backend(pointwise_chain, "inductor")


def causal_attention(q, k, v):
    t = q.shape[-2]
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.expand(q.shape[0], 1, t, t))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_symbolic_sizes_reach_cuda_backends(backend):
    """sdpa on CUDA with symbolic sizes (its fake run pads through the Python dispatcher): one
    backend compile for every sequence length and batch."""
    import ember.testing
    ember.testing.reset_counters()
    cf = ember.compile(causal_attention, backend=backend, dynamic=True)
    for b, t in ((2, 16), (3, 24), (4, 40)):
        q, k, v = (rand(b, 4, t, 32, seed=s) for s in range(3))
        assert_same(cf(q, k, v), causal_attention(q, k, v), **INDUCTOR)
    assert ember.testing.counters()["backend_compiles"] == 1


def scaled_residual(x, s):
    return (x * s).sigmoid() + (x - s) * s


def test_float_input_reaches_inductor_on_cuda():
    """A changing float is a SymFloat input on CUDA too (its float64 CPU scalar tensor next to
    CUDA tensors, as under TorchDynamo): one more compile, then any value."""
    import ember.testing
    ember.testing.reset_counters()
    cf = ember.compile(scaled_residual, backend="inductor")
    x = rand(64, 32)
    for s in (0.25, 0.5, 0.75, -1.5, 3.0):
        assert_same(cf(x, s), scaled_residual(x, s), **INDUCTOR)
    c = ember.testing.counters()
    assert c["frames"] == 2 and c["backend_compiles"] == 2 and c["fallbacks"] == 0


def test_float_input_under_cuda_graphs_is_a_constant(fresh_cudagraphs):
    """Under CUDA graphs a float input is compiled as a constant per value (TorchDynamo
    specializes floats there too): every value still equals eager's."""
    cf = ember.compile(scaled_residual, backend="inductor", mode="reduce-overhead")
    x = rand(64, 32)
    for s in (0.25, 0.5, 0.25, 0.75):
        assert_same(cf(x, s).clone(), scaled_residual(x, s), **INDUCTOR)


# ---------------------------------------------------------------------------
# 5. mode="reduce-overhead" (CUDA graphs)
#
# As under torch.compile(mode="reduce-overhead"), the outputs of a call live in the CUDA graph
# pool. torch.compile starts a new generation of its graph trees at every call of a compiled
# function, after which the outputs of the previous call may be overwritten (reading one may
# raise RuntimeError "accessing tensor output of CUDAGraphs that has been overwritten by a
# subsequent run"); a clone stays right. Users compare or copy outputs before the next call, or call
# torch.compiler.cudagraph_mark_step_begin() per iteration. The tests below hold ember to what
# torch.compile does on the same calls, and to recording once and replaying.
# ---------------------------------------------------------------------------


def test_reduce_overhead_fresh_inputs_each_call(fresh_cudagraphs, graph_counts):
    """Fresh inputs of one shape, each output compared at once and dropped: the first call
    warms up, the second records, the later ones replay; all equal eager's."""
    model, inputs = build("mlp")
    model.eval()
    cm = ember.compile(model, backend="inductor", mode="reduce-overhead")
    with torch.no_grad():
        for seed in range(6):
            x = inputs(seed)
            y = cm(x)
            assert_same(y, model(x), **INDUCTOR)
            del y
    assert_graphs(1, hits=5)
    assert_on_backend(model, "inductor")
    assert graph_counts["captures"] >= 1 and graph_counts["replays"] > graph_counts["captures"], \
        (graph_counts, inductor_counters())


def held_outputs(fn, xs, mark_steps):
    """Calls fn on each x, holding every output; then reads each held output: ("raises", None)
    for torch's overwritten-output error, else ("values", its values on the CPU)."""
    held = []
    for x in xs:
        if mark_steps:
            torch.compiler.cudagraph_mark_step_begin()
        held.append(fn(x))
    out = []
    for y in held:
        try:
            out.append(("values", y.cpu()))
        except RuntimeError as e:
            assert "overwritten" in str(e), e
            out.append(("raises", None))
    return out


def test_reduce_overhead_held_outputs(fresh_cudagraphs, graph_counts):
    """Outputs held across later calls behave as under torch.compile(mode="reduce-overhead"):
    where torch's held output has its eager values or raises, so does ember's (an output torch
    lets later calls overwrite silently may be overwritten under ember too); clones are right;
    with cudagraph_mark_step_begin the graph is recorded once and replayed."""
    model, inputs = build("mlp")
    model.eval()
    xs = [inputs(seed) for seed in range(4)]
    with torch.no_grad():
        expected = [model(x).cpu() for x in xs]
        for mark_steps in (False, True):
            _reset_torch_compile()
            theirs = held_outputs(torch.compile(model, mode="reduce-overhead"), xs, mark_steps)
            _reset_torch_compile()
            ember.reset()
            cm = ember.compile(model, backend="inductor", mode="reduce-overhead")
            clones = [cm(x).clone() for x in xs]
            for c, e in zip(clones, expected):
                torch.testing.assert_close(c.cpu(), e, **INDUCTOR)
            _reset_torch_compile()  # the same history as torch's: a fresh compile, then the held calls
            ember.reset()
            before = dict(graph_counts)
            mine = held_outputs(ember.compile(model, backend="inductor", mode="reduce-overhead"), xs, mark_steps)
            for k, ((tk, tv), (mk, mv), e) in enumerate(zip(theirs, mine, expected)):
                torch_right = tk == "raises" or torch.allclose(tv, e, **INDUCTOR)
                if torch_right:  # torch keeps this output right (or refuses it): so must ember
                    assert mk == "raises" or torch.allclose(mv, e, **INDUCTOR), (mark_steps, k, theirs, mine)
            if mark_steps:
                replays = graph_counts["replays"] - before["replays"]
                captures = graph_counts["captures"] - before["captures"]
                assert replays > captures, (before, graph_counts, inductor_counters())


def held_loop(fn, xs):
    """`for x in xs: y = fn(x)`: each call runs while the previous output is still held (the
    usual inference loop); returns clones of the outputs."""
    outs, y = [], None
    for x in xs:
        y = fn(x)
        outs.append(y.clone())
    del y
    return outs


def test_reduce_overhead_replays_while_previous_output_is_held(fresh_cudagraphs, graph_counts):
    """In the usual loop the previous output is alive during each call. torch.compile still
    records once and replays (each call of its compiled function starts a new generation of the
    graph trees: torch._dynamo.mutation_guard.GenerationTracker.generation += 1 on entry);
    ember's calls must do the same, not warm up (run without CUDA graphs) at every call."""
    model, inputs = build("mlp")
    model.eval()
    xs = [inputs(seed) for seed in range(6)]
    with torch.no_grad():
        expected = [model(x) for x in xs]
        ref = torch.compile(copy.deepcopy(model), mode="reduce-overhead")
        for got, e in zip(held_loop(ref, xs), expected):
            torch.testing.assert_close(got, e, **INDUCTOR)
        torch_counts = dict(graph_counts)
        assert torch_counts["replays"] > torch_counts["captures"] >= 1, torch_counts  # torch's own behaviour
        _reset_torch_compile()
        graph_counts.update(captures=0, replays=0)
        cm = ember.compile(model, backend="inductor", mode="reduce-overhead")
        for got, e in zip(held_loop(cm, xs), expected):
            torch.testing.assert_close(got, e, **INDUCTOR)
    assert_graphs(1, hits=5)
    assert graph_counts["replays"] > graph_counts["captures"] >= 1, \
        f"ember: {graph_counts}, torch.compile: {torch_counts} (CUDA graphs captured/replayed in 6 calls)"


# ---------------------------------------------------------------------------
# 6. mode="max-autotune-no-cudagraphs"
# ---------------------------------------------------------------------------


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


def test_max_autotune_no_cudagraphs_matches_eager():
    torch.manual_seed(0)
    model = Tiny().to(CUDA).eval()
    cm = ember.compile(model, backend="inductor", mode="max-autotune-no-cudagraphs")
    with torch.no_grad():
        for seed in range(2):
            x = rand(16, 16, seed=seed)
            assert_same(cm(x), model(x), **INDUCTOR)
    assert_graphs(1, hits=1)
    assert_on_backend(model, "inductor")


# ---------------------------------------------------------------------------
# 7. training steps
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_training_steps_match_eager(backend):
    """Three SGD steps (momentum) through the compiled forward, from the weights of an eager twin:
    losses each step, then parameters and batch-norm statistics, as eager's."""
    model, inputs = build("conv")
    model.train()
    twin = copy.deepcopy(model)
    cm = ember.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_ref = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    tol = EXEC if backend == "eager" else dict(rtol=1e-3, atol=1e-4)
    g = torch.Generator().manual_seed(5)
    for step in range(3):
        x, target = inputs(step), torch.randint(0, 4, (4,), generator=g).to(CUDA)
        losses = []
        for m, o in ((cm, opt), (twin, opt_ref)):
            o.zero_grad()
            loss = F.cross_entropy(m(x), target)
            loss.backward()
            o.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1], **tol, msg=lambda m: f"loss of step {step}: {m}")
    same_state(model, twin, **tol)
    assert_graphs(1, hits=2, recompiles=0)  # the optimizer's in-place updates do not recompile
    if backend != "eager":
        assert_on_backend(model, backend)


# ---------------------------------------------------------------------------
# 8. graph breaks
# ---------------------------------------------------------------------------


def break_print(x, w):
    y = torch.tanh(x @ w)
    print("between graphs:", tuple(y.shape), y.device)
    return y.softmax(-1) * 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_graph_break_print_on_cuda(backend, capsys):
    x, w = rand(4, 8), rand(8, 8, seed=1)
    expected = break_print(x, w)
    eager_out = capsys.readouterr().out
    got = ember.compile(break_print, backend=backend)(x, w)
    assert capsys.readouterr().out == eager_out == "between graphs: (4, 8) cuda:0\n"
    assert_same(got, expected, **(EXEC if backend == "eager" else INDUCTOR))
    assert_graphs(2, breaks=1)
    if backend != "eager":
        assert_on_backend(break_print, backend)


def break_item(x):
    m = x.abs().mean()
    s = m.item()  # a device-to-host read: the graph breaks here
    return x / s + m, s


def test_graph_break_item_on_cuda():
    cf = ember.compile(break_item)
    x = rand(5, 3)
    got = cf(x)
    assert_same(got, break_item(x), **EXEC)
    assert got[0].device == CUDA
    assert_graphs(2, breaks=1)
    for seed in (1, 2):  # new values of s
        x = rand(5, 3, seed=seed)
        assert_same(cf(x), break_item(x), **EXEC)
    assert counters()["aborts"] == 0 and counters()["fallbacks"] == 0


def captured_items(x, t):
    n = x.amax().item()  # a graph number (fullgraph): a device-to-host read inside the graph
    torch._check(t.item() >= 0)
    return x * n + torch.full((4,), n * 2.0, device=x.device), torch.tensor([n, 1.5], device=x.device)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_captured_items_on_cuda(backend):
    """Numbers from .item() captured under fullgraph reach every backend on CUDA as graph
    numbers (unbacked SymFloats for the fx backends): one graph, eager's values for new data."""
    cf = ember.compile(captured_items, backend=backend, fullgraph=True)
    for seed in (0, 1, 2):
        x, t = rand(8, 4, seed=seed), torch.tensor(seed, device=CUDA)
        assert_same(cf(x, t), captured_items(x, t), **INDUCTOR)
    assert_graphs(1)
    with pytest.raises(RuntimeError):
        cf(rand(8, 4), torch.tensor(-1, device=CUDA))


def sized_by_items(lengths, x):
    row = torch.arange(0, lengths.max().item(), device=lengths.device)  # a size from .item()
    mask = (row < lengths.unsqueeze(-1)).to(x.dtype)
    n = lengths.min().item()
    torch._check(n >= 0)
    torch._check(n <= x.size(0))
    return mask * x.sum(), x[:n] * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_sizes_from_items_on_cuda(backend):
    """Sizes from .item() (unbacked symbols): one graph for every value on CUDA."""
    cf = ember.compile(sized_by_items, backend=backend, fullgraph=True)
    for lengths in ([5, 4, 4, 4], [2, 7, 1, 3], [3, 3, 3, 8]):
        t, x = torch.tensor(lengths, device=CUDA), rand(8, seed=len(lengths))
        assert_same(cf(t, x), sized_by_items(t, x), **INDUCTOR)
    assert_graphs(1)


def selected_rows(x, w):
    keep = x.sum(1) > 0
    sel = x[keep]  # its count from the data: an unbacked size
    return sel @ w, keep.nonzero().squeeze(1).float().mean(), x.masked_select(x < 0).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_data_dependent_result_sizes_on_cuda(backend):
    cf = ember.compile(selected_rows, backend=backend, fullgraph=True)
    w = rand(3, 2, seed=9)
    for seed in range(3):
        x = rand(6, 3, seed=seed)
        assert_same(cf(x, w), selected_rows(x, w), **INDUCTOR)
    assert_graphs(1)


def test_tensor_guards_and_storage_reads_are_direct_on_cuda():
    """CUDA tensors are read through the probed layout (this torch build's TensorImpl): their
    guards and the storage check of graphs with in-place ops make no Python calls."""
    x = rand(4, 3)
    y = rand(3, device="cpu")
    ember.compile(lambda a, b, c: (a + 1, b * 2, c))(x, x[1:], y)
    assert ember.tensor_guards_fast
    assert ember._C._storage_groups((x, x[1:], y, rand(2)), 0) == (0, 0, 2, 3)


def test_small_tensors_of_constants_on_cuda_are_folded():
    """torch.div of sizes (a CPU tensor) and torch.tensor(..., device=cuda) whose values are
    read as sizes and ints: computed for real while tracing, on eager's device, one graph."""

    def f(x):
        n = torch.div(x.size(1), 4, rounding_mode="trunc")
        k = torch.tensor(x.shape[0], device=x.device) * 2
        k.sub_(1)
        y = x.view(x.size(0), n, 4) * n
        return y.sum(-1) + int(k), torch.arange(k, device=x.device), k

    for backend in ("eager", "inductor"):
        ember.reset()
        x = rand(3, 8)
        expected = f(x)
        got = ember.compile(f, backend=backend, fullgraph=True)(x)
        assert_same(got, expected, **(EXEC if backend == "eager" else INDUCTOR))
        assert got[2].device == CUDA
