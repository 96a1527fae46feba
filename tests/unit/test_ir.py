"""Graph IR: metadata of every value (C inference for common elementwise ops, torch's meta
device for the rest) must equal what eager PyTorch produces; dumps are deterministic."""
import dis
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import ember
import ember.testing
from ember import _C, _rules

DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "bool", torch.float16: "f16",
      torch.bfloat16: "bf16", torch.int32: "i32"}


def _last_meta(graph_text):
    lines = [ln for ln in graph_text.splitlines() if ln.strip().startswith("%")]
    m = re.search(r": (\w+)\[([^\]]*)\] stride=\(([^)]*)\)", lines[-1])
    assert m, lines[-1]
    ints = lambda s: tuple(int(v) for v in s.split(",") if v.strip())  # noqa: E731
    return m.group(1), ints(m.group(2)), ints(m.group(3))


CASES = [
    ("add_same", lambda a, b: a + b, lambda: (torch.randn(4, 5), torch.randn(4, 5))),
    ("mul_scalar", lambda a, b: a * 2, lambda: (torch.randn(4, 5), None)),
    ("int_tensor_float_scalar", lambda a, b: a * 0.5, lambda: (torch.arange(6).view(2, 3), None)),
    ("int_truediv", lambda a, b: a / b, lambda: (torch.arange(6), torch.arange(1, 7))),
    ("compare", lambda a, b: a < b, lambda: (torch.randn(3, 3), torch.randn(3, 3))),
    ("broadcast", lambda a, b: a - b, lambda: (torch.randn(4, 1), torch.randn(1, 5))),
    ("noncontig", lambda a, b: a + b, lambda: (torch.randn(5, 4).t(), torch.randn(5, 4).t())),
    ("mixed_dtype", lambda a, b: a + b, lambda: (torch.randn(3), torch.randn(3, dtype=torch.float64))),
    ("neg_half", lambda a, b: -a, lambda: (torch.randn(2, 3).half(), None)),
    ("sigmoid_int", lambda a, b: torch.sigmoid(a), lambda: (torch.arange(4), None)),
    ("relu_call", lambda a, b: torch.relu(a), lambda: (torch.randn(2, 3, 4), None)),
    ("gelu_permuted", lambda a, b: F.gelu(a), lambda: (torch.randn(2, 3, 4).permute(2, 0, 1), None)),
    ("zero_dim", lambda a, b: a + b, lambda: (torch.randn(3), torch.tensor(2.0))),
    ("bool_and", lambda a, b: (a > 0) & (b > 0), lambda: (torch.randn(3), torch.randn(3))),
]


@pytest.mark.parametrize("fn, make", [(f, m) for _, f, m in CASES], ids=[n for n, _, _ in CASES])
def test_node_metadata_matches_eager(fn, make):
    a, b = make()
    ref = fn(a, b)
    got = ember.compile(fn)(a, b)
    torch.testing.assert_close(got, ref)
    dt, shape, stride = _last_meta(ember.testing.entries(fn)[0]["graph"])
    assert (dt, shape, stride) == (DT[ref.dtype], tuple(ref.shape), ref.stride())


def test_requires_grad_recorded():
    def f(x, w):
        return (x * w).sum()

    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    ember.compile(f)(x, w)
    g = ember.testing.entries(f)[0]["graph"]
    assert re.search(r"mul\(%0, %1\).* grad", g), g


def test_dump_is_deterministic():
    def f(x):
        return torch.tanh(x) * 2 + x.sum(dim=0, keepdim=True)

    x = torch.randn(3, 4)
    ember.compile(f)(x)
    first = ember.testing.entries(f)[0]["graph"]
    ember.reset()
    ember.compile(f)(x)
    assert ember.testing.entries(f)[0]["graph"] == first
    assert first.startswith("graph(inputs=1, ops=")


# what each Python operator is called in the graph (an oracle independent of csrc/ir/em_ops.def)
_OP_NAMES = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod", "**": "pow",
             "@": "matmul", "&": "and", "|": "or", "^": "xor", "<<": "lshift", ">>": "rshift"}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("sym", [sym for _nb, sym in dis._nb_ops], ids=[nb for nb, _sym in dis._nb_ops])
def test_every_binary_operator(sym, backend):
    """Every BINARY_OP operand becomes its own graph op, which the executor and FX export apply as
    Python does: the result, and for `a op= b` the mutation of a, equal eager's."""
    inplace = sym.endswith("=")
    src = f"def f(a, b):\n    a {sym} b\n    return a\n" if inplace else f"def f(a, b):\n    return a {sym} b\n"
    ns = {}
    exec(compile(src, f"<{sym}>", "exec"), ns)
    f = ns["f"]
    dtype = torch.float64 if sym in ("/", "/=") else torch.int64

    def make():
        return torch.tensor([[3, 5], [7, 9]], dtype=dtype), torch.tensor([[1, 2], [3, 1]], dtype=dtype)

    a, b = make()
    ref = f(a, b)
    a2, b2 = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the executor or to Python
        got = ember.compile(f, backend=backend)(a2, b2)
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(a2, a)
    name = ("i" if inplace else "") + _OP_NAMES[sym.rstrip("=") if inplace else sym]
    assert f" {name}(%0, %1)" in ember.testing.entries(f)[0]["graph"]


def test_inplace_operator_on_a_constant_exports():
    """`c -= t` with c a Python number is `c - t` in the exported FX graph."""
    def f(t):
        c = 10
        c -= t
        c **= t
        return c

    t = torch.tensor([1, 2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(ember.compile(f, backend="aot_eager")(t), f(t))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtype_numbers_are_torchs(dtype):
    """ember's dtype numbers (csrc/ir/em_dtypes.def, read in Python as _C.DTYPES) are c10's
    ScalarType numbers: c10's default dtype, read directly, agrees with _rules.dtype_num."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        direct = _C._gs_read(True)[3]
    except RuntimeError:
        pytest.skip("c10's global state cannot be read directly here")
    finally:
        torch.set_default_dtype(old)
    assert direct == _rules.dtype_num(dtype) >= 0
    assert _rules._DTYPES[direct] is dtype


def test_device_types_name_dumps_and_fx():
    """The device types of em_devices.def are what dumps print and FX export builds."""
    from ember.backends import fx
    assert _C.DEVICE_TYPES[0] == "cpu" and _C.DEVICE_TYPES[14] == "meta"
    assert fx._device(0, -1) == torch.device("cpu") and fx._device(1, 0) == torch.device("cuda", 0)
    with pytest.raises(fx._Unexportable):
        fx._device(99, -1)  # a device type ember does not name

    def f(x):
        return x + 1

    ember.compile(f)(torch.randn(2))
    assert re.search(r"add\(%0, 1\).*\) cpu$", ember.testing.entries(f)[0]["graph"], re.M)
