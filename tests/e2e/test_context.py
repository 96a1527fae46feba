"""`with` blocks of torch's global-state context managers (torch.no_grad, enable_grad,
set_grad_enabled, inference_mode, autocast) under ember.

Traced blocks become state changes inside the graph (one graph, no break); a graph break
inside a block leaves the block in the graph, enters it again around the unsupported
instruction (whose exceptions still run the block's __exit__) and in the resume function.
Every test compares results, requires_grad and the grad mode afterwards with eager.
"""

import io

import pytest
import torch

import ember
import ember.testing
from tests.helpers import counters, randn


def flat(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def check(fn, *args, graphs=None, breaks=None, calls=2):
    """fn eager vs compiled (called `calls` times): values, requires_grad, is_inference,
    and the grad mode after the call."""
    expected = fn(*args)
    grad_after = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    cf = ember.compile(fn)
    for _ in range(calls):
        got = cf(*args)
        assert torch.is_grad_enabled() == grad_after
        torch.set_grad_enabled(True)
        for g, e in zip(flat(got), flat(expected)):
            if isinstance(e, torch.Tensor):
                assert g.requires_grad == e.requires_grad
                assert g.is_inference() == e.is_inference()
                torch.testing.assert_close(g.detach(), e.detach())
            else:
                assert g == e
    c = counters()
    assert c["aborts"] == 0, c
    if graphs is not None:
        assert c["frames"] == graphs, c
    if breaks is not None:
        assert c["breaks"] == breaks, c
    return got


# ---------------------------------------------------------------------------
# traced into one graph
# ---------------------------------------------------------------------------


def no_grad_middle(x, w):
    y = x @ w
    with torch.no_grad():
        z = y * 2
        q = w + 1
    return y + z, q, z


def nested_grad_blocks(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = x * w
        c = b + 1
    return a, b, c


def set_grad_enabled_block(x, w):
    with torch.set_grad_enabled(False):
        a = x * w
    with torch.set_grad_enabled(True):
        b = x * w
    return a, b


def inference_block(x, w):
    with torch.inference_mode():
        a = x * 2
    return a, w * 3


def grad_mode_queries(x, w):
    with torch.no_grad():
        inside = torch.is_grad_enabled()
        y = w * 2
    return y, inside, torch.is_grad_enabled()


def _helper_no_grad(w):
    with torch.no_grad():
        return w * 2


def with_in_helper(x, w):
    return _helper_no_grad(w) + x * w


def return_inside_with(x, w):
    with torch.no_grad():
        return x * w


@pytest.mark.parametrize("fn", [no_grad_middle, nested_grad_blocks, set_grad_enabled_block, inference_block,
                                grad_mode_queries, with_in_helper, return_inside_with],
                         ids=lambda f: f.__name__)
def test_traced_block_is_one_graph(fn):
    check(fn, randn(3, 3), randn(3, 3, seed=1, requires_grad=True), graphs=1, breaks=0)


def test_block_under_callers_no_grad():
    x, w = randn(3, 3), randn(3, 3, seed=1, requires_grad=True)
    with torch.no_grad():
        got = ember.compile(nested_grad_blocks)(x, w)
        expected = nested_grad_blocks(x, w)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in expected] == [False, True, False]


def test_block_that_changes_no_grad_mode_records_nothing():
    # no_grad inside no_grad (or enable_grad inside grad mode) is no state change: TorchDynamo's
    # test_no_grad counts 3 ops for a + 1, + b, + 2
    def fn(a, b):
        x = a + 1
        with torch.no_grad():
            x = x + b
        return x + 2

    a, b = randn(3), randn(3)
    with torch.no_grad():
        assert torch.equal(ember.compile(fn)(a, b), fn(a, b))
    assert ember.testing.entries(fn)[0]["ops"] == 3
    ember.reset()
    w = randn(3, requires_grad=True)
    got = ember.compile(fn)(w, b)  # grad mode on: the block changes it, both ways recorded
    assert not got.requires_grad and torch.is_grad_enabled() and ember.testing.entries(fn)[0]["ops"] == 5


def _set_grad_made_before_a_break(x):
    x = x + 1
    ctx = torch.set_grad_enabled(False)  # in effect as it is made
    print("break")
    y = x * 2
    with ctx:
        x = x + 1
    return x, y, torch.is_grad_enabled()


def _no_grad_made_before_a_break(x):
    ctx = torch.no_grad()
    print("break")
    with ctx:
        y = x * 2
    return y, torch.is_grad_enabled()


def _no_grad_reused_after_a_break(x):
    ctx = torch.no_grad()
    with ctx:
        y = x * 2
    print("break")
    with ctx:
        z = x * 3
    return y, z, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [_set_grad_made_before_a_break, _no_grad_made_before_a_break,
                                _no_grad_reused_after_a_break])
def test_context_object_alive_at_a_break_is_made_again(fn, capsys):
    # TorchDynamo's test_inactive_context_graph_break_local: a grad-mode context made and not
    # inside its block at a break ran the frame as plain Python
    x = torch.zeros(3, requires_grad=True)
    want = fn(x)
    torch.set_grad_enabled(True)
    got = ember.compile(fn)(x)
    try:
        assert ember.testing.counters()["frames"] >= 2
        for a, b in zip(want, got):
            if isinstance(a, torch.Tensor):
                assert torch.equal(a, b) and a.requires_grad == b.requires_grad
            else:
                assert a == b
    finally:
        torch.set_grad_enabled(True)


def grad_off_and_return(x):
    torch.set_grad_enabled(False)
    return x * 2


def test_set_grad_enabled_call_outlives_the_frame():
    w = randn(3, requires_grad=True)
    try:
        got = ember.compile(grad_off_and_return)(w)
        assert not torch.is_grad_enabled()
        assert not got.requires_grad
    finally:
        torch.set_grad_enabled(True)
    assert counters()["aborts"] == 0


def cholesky_no_grad(x):
    with torch.no_grad():
        y = x * 2
        return torch.linalg.cholesky(y)


def test_graph_failing_inside_block_restores_grad_mode():
    cf = ember.compile(cholesky_no_grad)
    spd = torch.eye(3) + 0.1
    torch.testing.assert_close(cf(spd), cholesky_no_grad(spd))
    not_spd = -torch.eye(3)
    with pytest.raises(torch.linalg.LinAlgError):
        cf(not_spd)  # same guards, fails inside the graph while grad is off
    assert torch.is_grad_enabled()


def backward_through_block(x, w):
    with torch.no_grad():
        scale = w.abs().max() + 1
    return (x * w / scale).sum()


def test_backward_through_traced_block():
    x = randn(4)
    w1 = randn(4, seed=1, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    ember.compile(backward_through_block)(x, w1).backward()
    backward_through_block(x, w2).backward()
    torch.testing.assert_close(w1.grad, w2.grad)


# ---------------------------------------------------------------------------
# graph breaks inside blocks
# ---------------------------------------------------------------------------


def print_in_no_grad(x, w):
    y = x * w
    with torch.no_grad():
        z = y * 2
        print("grad inside:", torch.is_grad_enabled())
        u = z + w
    return y, z, u, y + u


def test_break_inside_no_grad_is_resumed(capsys):
    check(print_in_no_grad, randn(3), randn(3, seed=1, requires_grad=True), graphs=2, breaks=1, calls=1)
    assert capsys.readouterr().out == "grad inside: False\n" * 2  # eager, then compiled


def print_in_nested(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = a * w
            print("inner:", torch.is_grad_enabled())
            b = b + 1
        print("outer:", torch.is_grad_enabled())
        c = b * 2
    return a, b, c


def test_breaks_inside_nested_blocks(capsys):
    check(print_in_nested, randn(3), randn(3, seed=1, requires_grad=True), graphs=3, breaks=2, calls=1)
    assert capsys.readouterr().out == "inner: True\nouter: False\n" * 2


def test_resumed_blocks_hit_their_caches(capsys):
    cf = ember.compile(print_in_nested)
    x, w = randn(3), randn(3, seed=1, requires_grad=True)
    for _ in range(3):
        cf(x, w)
    c = counters()
    assert c["frames"] == 3 and c["hits"] == 6, c
    assert torch.is_grad_enabled()


class _FailingFile(io.StringIO):
    def write(self, s):
        raise OSError("disk full")


def failing_print_in_no_grad(x, f):
    with torch.no_grad():
        y = x * 2
        print(y.shape, file=f)
        return y


@pytest.mark.filterwarnings("ignore::ember.EmberWarning")  # _FailingFile.write runs as plain Python
def test_exception_at_the_break_runs_the_blocks_exit():
    cf = ember.compile(failing_print_in_no_grad)
    for _ in range(2):
        with pytest.raises(OSError, match="disk full"):
            cf(randn(3, requires_grad=True), _FailingFile())
        assert torch.is_grad_enabled()
    assert counters()["breaks"] >= 1  # (the failing write may break on its own too)


def _raises_after(y):
    raise ValueError("late")


def raise_after_break(x):
    with torch.no_grad():
        y = x * 2
        print("before")
        _raises_after(y)
    return y


@pytest.mark.filterwarnings("ignore::ember.EmberWarning")  # _raises_after runs as plain Python
def test_exception_in_the_resumed_block_runs_its_exit(capsys):
    cf = ember.compile(raise_after_break)
    with pytest.raises(ValueError, match="late"):
        cf(randn(3, requires_grad=True))
    assert torch.is_grad_enabled()


def print_in_inference(x):
    with torch.inference_mode():
        y = x * 2
        print("inference:", torch.is_inference_mode_enabled())
        z = y + 1
    return z


def test_break_inside_inference_mode(capsys):
    check(print_in_inference, randn(3), calls=1)
    assert capsys.readouterr().out == "inference: True\n" * 2


def print_in_with_in_try(x):
    try:
        with torch.no_grad():
            y = x * 2
            print("in try")
    finally:
        y = y + 1
    return y


def test_block_inside_try_breaks(capsys):
    check(print_in_with_in_try, randn(3, requires_grad=True), graphs=2, breaks=1)
    assert capsys.readouterr().out == "in try\n" * 3


def raise_in_with_in_try(x, path):
    y = x * 2
    try:
        with torch.no_grad():
            y = y + 1
            open(path).close()  # a break; raises for a missing file
    except OSError:
        y = y * 10  # grad mode is back on: the with block's exit ran first
    return y, torch.is_grad_enabled()


def test_exception_at_a_break_inside_a_block_inside_try():
    x = randn(3, requires_grad=True)
    for path in ("/dev/null", "/nonexistent/file"):
        want = raise_in_with_in_try(x, path)
        got = ember.compile(raise_in_with_in_try)(x, path)
        torch.testing.assert_close(got[0], want[0])
        assert got[0].requires_grad == want[0].requires_grad and got[1] == want[1]
        assert torch.is_grad_enabled()


# ---- torch.autocast ----

_LIN = torch.nn.Linear(8, 8)


def autocast_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _LIN(x)
        z = torch.softmax(y, -1)
        with torch.autocast("cpu", enabled=False):
            f32 = y.float() @ y.float().t()
        w = y @ y.t()
    return y, z, f32, w, (w.float() + 1).sum()


def test_autocast_block_is_traced_with_autocast_dtypes():
    got = check(autocast_block, randn(4, 8), graphs=1, breaks=0)
    assert [t.dtype for t in got] == [torch.bfloat16, torch.bfloat16, torch.float32, torch.bfloat16, torch.float32]
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_training_gradients_match_eager():
    lin = torch.nn.Linear(8, 4)
    twin = torch.nn.Linear(8, 4)
    twin.load_state_dict(lin.state_dict())

    def forward(m, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return m(x).float().pow(2).mean()

    x = randn(3, 8)
    ref = forward(twin, x)
    ref.backward()
    got = ember.compile(forward)(lin, x)
    got.backward()
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(lin.weight.grad, twin.weight.grad)
    assert counters()["breaks"] == 0


def test_compiled_function_called_inside_autocast():
    def f(x):
        return _LIN(x) + 1

    cf = ember.compile(f)
    x = randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = f(x)
        got = cf(x)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected)
    got = cf(x)  # outside autocast: the global-state guard recompiles
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, f(x))


def _matmul(x, w):
    return x @ w


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("direct", [True, False])
def test_autocast_dtype_is_guarded(backend, direct):
    """A graph traced under bfloat16 autocast is not reused under float16 autocast (nor the
    other way), with guards reading autocast from c10 directly or through torch's functions."""
    from ember import _C
    _C._gs_use_direct(direct)
    try:
        cf = ember.compile(_matmul, backend=backend)
        x, w = randn(4, 4), randn(4, 4, seed=1)
        for dt in (torch.bfloat16, torch.float16, None, torch.float16, torch.bfloat16):
            with torch.autocast("cpu", dtype=dt or torch.bfloat16, enabled=dt is not None):
                got, want = cf(x, w), _matmul(x, w)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want)
        assert ember.testing.counters()["frames"] == 3
    finally:
        _C._gs_use_direct(ember.global_state_guards_fast)


def test_requires_grad_of_a_tensor_made_before_a_no_grad_block():
    # fuzzer finding: the meta tensor of x[0] was made lazily inside the block, where its clone
    # did not require grad, and the branch went the other way
    def f(x, y):
        t = x[0]
        with torch.no_grad():
            if t.requires_grad:
                r = 1
            else:
                r = 2
            s = y.max().item()
        return r, s

    x = torch.randn(3, 1, requires_grad=True)
    y = torch.randn(3, 3)
    assert ember.compile(f)(x, y) == f(x, y)


VIEWS_OF_A_GRAD_TENSOR = ["x.t()", "x.view(-1)", "x.transpose(0, 1)", "x.unsqueeze(0)", "x.expand(2, 3)",
                          "x.reshape(2)", "x.permute(1, 0)", "x[0]", "x[:, None]", "x.narrow(0, 0, 1)", "x * 1"]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize("expr", VIEWS_OF_A_GRAD_TENSOR)
def test_requires_grad_of_a_view_made_without_grad_mode(expr, mode):
    # fuzz 2802 #671: a view of a tensor that requires grad requires grad in any grad mode (an
    # op that computes does not); the branch on it went the other way
    ns = {"torch": torch}
    exec(f"def f(x):\n    with torch.{mode}():\n        t = {expr}\n"
         "        r = t.requires_grad\n    return r, (t if r else None)\n", ns)
    f = ns["f"]
    x = torch.randn(2, 1, dtype=torch.float64, requires_grad=True)
    got, want = ember.compile(f, fullgraph=True)(x), f(x)
    assert got[0] == want[0] and (got[1] is None) == (want[1] is None)


def _nested_opposite_blocks_with_break(x):
    with torch.no_grad():
        with torch.enable_grad():
            print("break")
            a = torch.is_grad_enabled()
        b = torch.is_grad_enabled()
    y = x.sum()
    return y.requires_grad, a, b, torch.is_grad_enabled()


def _c_setter_then_context(x):
    torch._C._set_grad_enabled(False)  # what enable_grad.__exit__ calls, inlined
    torch.set_grad_enabled(True)
    return x * 2, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [_nested_opposite_blocks_with_break, _c_setter_then_context])
def test_grad_mode_after_direct_setter_calls_is_eagers(fn, capsys):
    """torch._C._set_grad_enabled called directly (a context's __exit__ traced in a resume
    function) changes the trace's grad mode too: the grad mode every later op sees, and the one
    left after the call, are eager's."""
    x = randn(3, requires_grad=True)
    want = fn(x)
    assert torch.is_grad_enabled()
    got = ember.compile(fn)(x)
    assert torch.is_grad_enabled(), "the compiled call left grad mode off"
    assert str(got) == str(want)


def _state_setters(x):
    n = torch.get_num_threads()
    torch.set_num_threads(n)
    torch._C._set_cudnn_benchmark(torch.backends.cudnn.benchmark)
    return x + 1


def test_torch_state_setters_break_the_graph():
    """Setters of torch's global state run in Python at a graph break (never recorded as graph
    ops that would also run while tracing)."""
    x = randn(3)
    torch.testing.assert_close(ember.compile(_state_setters)(x), x + 1)
    assert counters()["breaks"] >= 1 and counters()["aborts"] == 0


def _vmap_levels(x):
    level = torch._C._functorch._vmap_increment_nesting(3, "error")
    try:
        y = x * level
    finally:
        torch._C._functorch._vmap_decrement_nesting()
    return y


def test_functorch_level_changes_run_once_in_python():
    """torch._C functions that change functorch's level stack (no tensor argument, no device):
    never run while tracing (once there, an abandoned trace left a vmap level pushed and every
    later random op in the process failed), they run at a break."""
    from torch._C._functorch import maybe_current_level

    x = randn(3)
    want = _vmap_levels(x)
    assert maybe_current_level() is None
    got = ember.compile(_vmap_levels)(x)
    assert maybe_current_level() is None, "the compiled call left a vmap level pushed"
    torch.testing.assert_close(got, want)
    torch.rand(2)  # raises in vmap's randomness "error" mode


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_sdpa_kernel_block_is_one_graph(backend):
    """torch.nn.attention.sdpa_kernel: a with block the graph enters and leaves (the allowed SDPA
    backends set around the block's ops on ember's executor, left out for Python backends, whose
    own kernels run); the flags are restored after it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    def f(q):
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]):
            y = F.scaled_dot_product_attention(q, q, q)
        with sdpa_kernel(SDPBackend.MATH):
            z = F.scaled_dot_product_attention(q, q * 2, q)
        return y + z

    q = randn(1, 2, 4, 8)
    flags = torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()
    cf = ember.compile(f, fullgraph=True, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(cf(q), f(q))
    assert (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()) == flags
    c = counters()
    assert (c["frames"], c["breaks"], c["hits"], c["fallbacks"]) == (1, 0, 1, 0), c


class _ZerosForAdd(__import__("torch.overrides", fromlist=["BaseTorchFunctionMode"]).BaseTorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.add:
            return torch.zeros(2, 2)
        return super().__torch_function__(func, types, args, kwargs or {})


def _mode_block(x, y):
    with _ZerosForAdd():
        o = torch.add(x, 3)  # the mode's answer: zeros
    return torch.add(o, y)  # the mode left: zeros + y


def _mode_block_raises(x):
    with _ZerosForAdd():
        raise ValueError("inside")


@pytest.mark.parametrize("fullgraph", [False, True])
def test_torch_function_mode_block_runs_as_eager_and_leaves_no_mode(fullgraph):
    """A TorchFunctionMode entered in the compiled function: its __enter__ is not run while
    tracing (it pushes the mode), so the block runs as Python; the mode stack is as eager's."""
    from torch._C import _len_torch_function_stack

    x, y = torch.full((2, 2), 2.0), torch.full((2, 2), 3.0)
    want = _mode_block(x, y)
    cf = ember.compile(_mode_block, fullgraph=fullgraph)
    if fullgraph:
        with pytest.raises(ember.Unsupported):
            cf(x, y)
    else:
        torch.testing.assert_close(cf(x, y), want)
    assert _len_torch_function_stack() == 0
    with pytest.raises(ember.Unsupported if fullgraph else ValueError):
        ember.compile(_mode_block_raises, fullgraph=fullgraph)(x)
    assert _len_torch_function_stack() == 0
    torch.testing.assert_close(torch.add(x, 1), x + 1)


@torch.compiler.disable
def _not_compiled(x):
    if torch.compiler.is_compiling():  # True only where ember (or TorchDynamo) traces this frame
        raise RuntimeError("traced")
    return _helper_of_disabled(x) + 1


def _helper_of_disabled(x):  # called from a disabled frame: not compiled either (recursive)
    if torch.compiler.is_compiling():
        raise RuntimeError("traced")
    return x.sin()


class _DisabledBlock(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling():
            raise RuntimeError("traced")
        return x * 3


def test_torch_compiler_disable_is_honoured():
    """torch.compiler.disable(fn or module): the function, and what it calls, run as Python
    when called from compiled code (a graph break around the call)."""
    block = torch.compiler.disable(_DisabledBlock())

    def f(x):
        return _not_compiled(x.cos()) * 2 + block(x)

    x = randn(3)
    cf = ember.compile(f)
    for _ in range(2):
        torch.testing.assert_close(cf(x), f(x))
    assert counters()["breaks"] >= 1


def _callee_of_once(x):
    return x.sin() + (100 if torch.compiler.is_compiling() else 1)  # compiled: recursive=False


@torch.compiler.disable(recursive=False)
def _not_compiled_once(x):
    if torch.compiler.is_compiling():
        raise RuntimeError("traced")
    return _callee_of_once(x.cos())


def test_torch_compiler_disable_non_recursive():
    """disable(fn, recursive=False): fn's own frame runs as Python, the frames it calls are
    compiled (as TorchDynamo: is_compiling() is True there)."""
    def f(x):
        return _not_compiled_once(x.tan()) * 2

    x = randn(3)
    got = ember.compile(f)(x)
    torch.testing.assert_close(got, (x.tan().cos().sin() + 100) * 2)
