"""End-to-end capture tests for ember.

Every case below is a module-level function written inside the subset of
Python that ember captures today (straight-line code, torch / F calls,
tensor methods, shape-dependent `if`, in-place ops on inputs, ...).  Each
one must be captured as exactly ONE graph, with no abort, must give the same
results as eager (including mutations of the inputs), and must hit the cache
on a second call with identical inputs.

The fixture in tests/conftest.py resets ember's caches and counters before
every test.
"""

import math

import pytest
import torch

import ember
import ember.testing  # noqa: F401
from tests.helpers import assert_same, counters, randn

F = torch.nn.functional

# Module-level constants read as globals by some cases.
SCALE = 0.5
OFFSET = 3
EPS = 1e-5
NEG_INF = float("-inf")


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def randns(*shapes, seed=0, dtype=torch.float32):
    """Deterministic tuple of random tensors, one per shape."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(s, generator=g, dtype=dtype) for s in shapes)


def randint(high, *shape, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g)


def run_and_compare(cf, fn, make_inputs):
    """Run eager and compiled on identical fresh inputs; compare outputs and
    the (possibly mutated) inputs afterwards."""
    eager_inputs = make_inputs()
    compiled_inputs = make_inputs()
    assert_same(compiled_inputs, eager_inputs, "inputs")  # make_inputs is deterministic
    expected = fn(*eager_inputs)
    got = cf(*compiled_inputs)
    assert_same(got, expected, "out")
    assert_same(compiled_inputs, eager_inputs, "inputs after call")


# ---------------------------------------------------------------------------
# cases: arithmetic, operators, python values
# ---------------------------------------------------------------------------


def add_mul(x, y):
    return (x + y) * 2 - y / 3


def unary_chain(x):
    return torch.sin(x).exp().abs().sqrt() + x.neg().tanh()


def unary_ops(x):
    return -x, +x, x.abs(), torch.sigmoid(x), F.softplus(x), torch.erf(x), x.reciprocal()


def compare_ops(x, y):
    return x > y, x <= 0.5, x == x, (x != y).float(), x >= y, x < 0


def pow_mod_floordiv(x):
    return x ** 2, 2 ** x, x % 1.5, x // 0.7, x.abs() ** 0.5


def python_number_math(x):
    a = 3
    b = a * 2 + 1
    c = b / 2
    d = b // 2
    e = -a ** 2
    return x * c + d - e, c, d, e, b % 4


def augassign_locals(x):
    y = x * 1
    y += 1
    y *= 2
    y -= x
    y /= 3
    n = 2
    n += 3
    n *= 2
    n -= 1
    return y, n


def global_constants(x):
    return x * SCALE + OFFSET, math.pi * x, x - math.e, x.clamp(min=-OFFSET)


def builtins_on_constants(x):
    n = len(x.shape)
    m = max(x.shape[0], x.shape[1])
    k = min(3, x.ndim)
    return x * n + m - k + abs(-2), int(2.7), float(n), max(1, 2, 3), min(x.shape)


def isinstance_branch(x):
    if isinstance(x, torch.Tensor):
        return x + 1
    return x


def logical_tensor_ops(x, y):
    m = (x > 0) & (y < 0)
    n = (x > 0) | ~(y > 0)
    return m, n, m ^ n, torch.logical_and(m, n)


def bitwise_int_ops(x):
    i = (x.abs() * 10).long()
    return i & 3, i | 4, i << 1, i >> 1, i ^ 5


def int_tensor_promotion(x):
    i = (x * 5).long()
    return i + 1.5, i * 2, i / 2, i // 3, i.float().mean()


def number_compare_from_shape(x):
    n = x.shape[0]
    return x * (n > 2), n == 4, n != 3, n >= 4


def scale_from_numel(x):
    n = x.numel()
    scale = 1.0 / n
    return x.sum() * scale, scale, n


# ---------------------------------------------------------------------------
# cases: tensor attributes and shapes
# ---------------------------------------------------------------------------


def shape_attrs(x):
    return x + 0, x.shape, x.ndim, x.dim(), x.numel(), x.size(), x.size(1), x.stride()


def shape_unpack(x):
    b, c, h, w = x.shape
    return x.reshape(b, c, h * w).mean(-1), b * c, h + w


def dtype_device_attrs(x):
    if x.dtype == torch.float32 and not x.is_cuda:
        y = x.double()
    else:
        y = x
    z = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
    return y, z + x


def transpose_attrs(x, y):
    return x.T @ x, y.mT.contiguous(), y.mT @ y


def requires_grad_branch(x):
    if x.requires_grad:
        return x * 2
    return x * 3


def shape_if(x):
    if x.shape[0] > 2:
        y = x * 2
    else:
        y = x - 1
    if x.ndim == 3:
        y = y.sum(0)
    return y


def shape_if_else_taken(x):
    if x.shape[-1] % 2 == 1:
        return x[..., :-1]
    else:
        return x.flip(-1)


# ---------------------------------------------------------------------------
# cases: constant arguments
# ---------------------------------------------------------------------------


def const_args(x, scale, use_relu, bias):
    y = x * scale
    if use_relu:
        y = F.relu(y)
    if bias is not None:
        y = y + bias
    return y


def const_dim_keepdim(x, dim, keepdim):
    return x.sum(dim, keepdim=keepdim), x.amax(dim=dim, keepdim=keepdim)


# ---------------------------------------------------------------------------
# cases: containers, subscripts, returns
# ---------------------------------------------------------------------------


def containers_subscripts(x):
    t = (x, x + 1, x * 2)
    l = [t[0], t[2]]
    d = {"a": l[1], "b": t[1]}
    return d["a"] - d["b"], l[-1], t[1:]


def return_nested(x):
    return {"sum": x.sum(), "pair": (x.mean(), [x.max(), x.min()]), "n": x.shape[0]}


def return_list(x):
    return [x + 1, x - 1]


def return_dict_mixed_keys(x):
    return {0: x * 2, "k": [x.shape[0], x.shape[1]], "t": (x.sum(1),)}


def tensor_subscripts(x):
    return x[0], x[:, 1:3], x[..., None], x[::2], x[-1, -2], x[1:, ::2], x[None, :, 0]


def index_tensor(x, idx):
    return x[idx], x[:, idx], torch.index_select(x, 0, idx)


def chunk_unpack_glu(x):
    a, b = x.chunk(2, dim=-1)
    return a * torch.sigmoid(b)


def split_sizes(x):
    parts = x.split([1, 2, 3], dim=1)
    return parts[0].sum(), parts[2], len(parts)


def cat_stack(x, y):
    return torch.cat([x, y], dim=0), torch.stack((x, y), dim=1), torch.cat((x, y), -1)


def tuple_swap(x, y):
    a, b = y, x
    a, b = b * 2, a + 1
    return a, b


# ---------------------------------------------------------------------------
# cases: views, broadcasting
# ---------------------------------------------------------------------------


def view_chain(x):
    return x.view(2, 3, 4).permute(2, 0, 1).contiguous().flatten(1).unsqueeze(0).squeeze(0).transpose(0, 1)


def expand_repeat(x):
    return x.unsqueeze(1).expand(-1, 3, -1) + 1, x.repeat(2, 1), x.expand(2, x.shape[0], x.shape[1]).sum(0)


def broadcasting(x, y):
    return x[:, None] + y[None, :], x.unsqueeze(-1) * y, x.reshape(-1, 1) - y


def reshape_infer(x):
    return x.reshape(-1), x.view(x.shape[0], -1).sum(-1), x.flatten(), torch.reshape(x, (4, -1))


def flip_roll(x):
    return torch.flip(x, [0]), x.roll(1, dims=-1), torch.rot90(x, 1, (0, 1))


# ---------------------------------------------------------------------------
# cases: in-place ops on inputs (mutation must be visible to the caller)
# ---------------------------------------------------------------------------


def inplace_methods(x, y):
    x.add_(1)
    x.mul_(y)
    return x * 2


def inplace_setitem(x, y):
    x[0] = 5
    x[:, 1] = y
    return x.sum()


def inplace_augassign_input(x):
    x += 1
    x *= 2
    return x


def inplace_clamp_masked_fill(x, y):
    x.clamp_(min=-0.5, max=0.5)
    y.masked_fill_(y < 0, 0.0)
    return x + y


def inplace_noncontiguous_input(x):
    x.mul_(2)
    return x.sum(0)


def inplace_through_view(x, y):
    x[1:].add_(y)
    return x.mean()


def inplace_one_of_two(x, y):
    y.sub_(x)
    return x + y


# ---------------------------------------------------------------------------
# cases: dtypes
# ---------------------------------------------------------------------------


def dtype_conversions(x):
    return x.float(), x.to(torch.float64), x.half(), x.long(), x.to(dtype=torch.int32), x.bool()


def half_arith(x):
    h = x.half()
    return (h * 2 + 1).float(), h.sum(dtype=torch.float32)


def type_as_and_keywords(x, i):
    return i.type_as(x) + x, x.to(dtype=torch.float16, copy=True), x.mean(dim=0, dtype=torch.float64)


def int_tensors(x):
    i = torch.arange(12).reshape(3, 4)
    return i * x.long(), i % 3 == 0, i.sum()


# ---------------------------------------------------------------------------
# cases: reductions
# ---------------------------------------------------------------------------


def reductions(x):
    return (
        x.sum(),
        x.sum(dim=1),
        x.mean(dim=(0, 1), keepdim=True),
        x.amax(-1),
        x.argmax(dim=0),
        x.std(dim=1),
        x.var(),
        torch.logsumexp(x, dim=-1),
        x.prod(0),
        x.amin(dim=(1, 2)),
    )


def max_with_dim(x):
    return x.max(dim=1)


def min_with_dim_subscript(x):
    r = torch.min(x, 0)
    return r[0] * 2, r[1] + 1


def max_unpack(x):
    values, indices = torch.max(x, dim=-1)
    return values * 2, indices + 1


def full_max_min(x):
    return x.max(), x.min(), torch.max(x, x.flip(0)), x.argmax()


def std_var_keywords(x):
    return x.std(dim=-1, unbiased=False), x.var(0, keepdim=True), x.std(correction=0), torch.var_mean(x, dim=1)


def softmaxes(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1), x.softmax(0), torch.softmax(x, -1), x.log_softmax(-1)


def cumulative_sort_topk(x):
    return torch.cumsum(x, 1), x.cumprod(0), x.topk(2, dim=-1), torch.sort(x, dim=0, descending=True)


def norms(x):
    return x.norm(dim=-1), torch.linalg.vector_norm(x, dim=0), F.normalize(x, dim=-1)


# ---------------------------------------------------------------------------
# cases: matmul family
# ---------------------------------------------------------------------------


def matmuls(x, y):
    return x @ y, torch.mm(x, y), torch.matmul(x, y), x.matmul(y)


def batched_matmuls(a, b):
    return torch.bmm(a, b), a @ b, a @ b[0]


def einsums(a, b, x):
    return torch.einsum("bij,bjk->bik", a, b), torch.einsum("ij->j", x), torch.einsum("ij,ij->", x, x)


def linear(x, w, b):
    return F.linear(x, w, b), F.linear(x, w), x @ w.t() + b


def mlp_residual(x, w1, b1, w2):
    h = F.gelu(F.linear(x, w1, b1))
    return F.linear(h, w2) + x


def attention(q, k, v, mask):
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / d ** 0.5
    scores = scores.masked_fill(mask == 0, NEG_INF)
    p = scores.softmax(dim=-1)
    return p @ v, p


def multihead_split(x, w_qkv):
    b, t, c = x.shape
    nh = 2
    qkv = x @ w_qkv
    q, k, v = qkv.split(c, dim=-1)
    q = q.view(b, t, nh, c // nh).transpose(1, 2)
    k = k.view(b, t, nh, c // nh).transpose(1, 2)
    v = v.view(b, t, nh, c // nh).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
    att = F.softmax(att, dim=-1)
    y = att @ v
    return y.transpose(1, 2).contiguous().view(b, t, c)


def half_matmul(x, w):
    return (x.half() @ w.half()).float()


# ---------------------------------------------------------------------------
# cases: elementwise nn functions, masks
# ---------------------------------------------------------------------------


def where_clamp_masked_fill(x, y):
    return (
        torch.where(x > 0, x, y),
        x.clamp(-0.5, 0.5),
        x.clamp(min=0),
        x.masked_fill(x < 0, 0.0),
        torch.where(x > y, x, 0.0),
        torch.clamp(y, max=0.1),
    )


def activations(x):
    return F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), torch.relu(x), x.relu(), F.leaky_relu(x, 0.1)


def layer_norms(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=EPS), F.layer_norm(x, x.shape[-1:])


def manual_layer_norm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + EPS) * w + b


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def dropout_eval(x):
    return F.dropout(x, p=0.5, training=False) * 2


def rotary(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def losses(logits, target, y):
    logp = F.log_softmax(logits, -1)
    manual = -logp[torch.arange(logits.shape[0]), target].mean()
    return manual, F.cross_entropy(logits, target), F.mse_loss(logits, y), F.nll_loss(logp, target)


def gather_scatter(x, idx):
    return x.gather(1, idx), torch.zeros_like(x).scatter(1, idx, 1.0), x.scatter_add(1, idx, x[:, :2])


def tri_diag(x):
    return torch.tril(x), x.triu(1), torch.diagonal(x), torch.eye(x.shape[0]) * x, x.diag()


# ---------------------------------------------------------------------------
# cases: conv / pool / embedding
# ---------------------------------------------------------------------------


def conv2d_variants(x, w, b):
    return F.conv2d(x, w, b, stride=1, padding=1), F.conv2d(x, w, stride=2)


def pools(x):
    return F.max_pool2d(x, 2), F.avg_pool2d(x, kernel_size=3, stride=1, padding=1), F.adaptive_avg_pool2d(x, 1)


def conv_block(x, w, b, fc_w, fc_b):
    h = F.relu(F.conv2d(x, w, b, padding=1))
    h = F.max_pool2d(h, 2)
    h = h.flatten(1)
    return F.linear(h, fc_w, fc_b)


def embedding(idx, w):
    e = F.embedding(idx, w)
    return e, e.sum(1), w[idx]


def embedding_plus_position(idx, tok, pos):
    t = idx.shape[1]
    p = torch.arange(t)
    return F.embedding(idx, tok) + F.embedding(p, pos)


# ---------------------------------------------------------------------------
# cases: factory functions
# ---------------------------------------------------------------------------


def factories(x):
    return (
        torch.zeros(x.shape),
        torch.ones(x.shape[0], 3, dtype=torch.float64),
        torch.arange(x.shape[1]),
        torch.full((2, x.shape[0]), 7.0),
        torch.zeros_like(x),
        x.new_zeros(4, 2),
        torch.ones_like(x, dtype=torch.int64),
        x + 1,
    )


def arange_positions(x):
    pos = torch.arange(x.shape[0], dtype=x.dtype)
    return x + pos[:, None], torch.arange(0, 10, 2), torch.linspace(0, 1, x.shape[1])


def empty_like_fill(x):
    return torch.empty_like(x).fill_(2.0) * x


def new_factories(x):
    return x.new_ones(2, 3), x.new_full((2, 2), 3.0), torch.full_like(x, x.shape[1]), x.new_empty(x.shape).zero_()


def causal_mask(x):
    t = x.shape[-1]
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    return x.masked_fill(~mask, NEG_INF).softmax(-1)


# ---------------------------------------------------------------------------
# cases: non-contiguous inputs
# ---------------------------------------------------------------------------


def noncontig_transposed(x):
    return x * 2 + 1, x.contiguous(), x.sum(0), x.stride()


def noncontig_strided(x):
    return x @ x.T, x.reshape(-1), x.stride()


def noncontig_expanded(x, y):
    return x + 1, x * y, x.contiguous()


def noncontig_permuted_4d(x):
    return x.reshape(x.shape[0], -1), F.relu(x).mean(dim=(2, 3))


# ---------------------------------------------------------------------------
# case table
# ---------------------------------------------------------------------------


def _noncontig_t():
    return (randn(4, 3).t(),)


def _noncontig_strided():
    return (randn(3, 8)[:, ::2],)


def _noncontig_expanded():
    return (randn(3, 1).expand(3, 4), randn(3, 4, seed=1))


def _noncontig_permuted():
    return (randn(2, 5, 5, 3).permute(0, 3, 1, 2),)


CASES = [
    # arithmetic / operators / python values
    ("add_mul", add_mul, lambda: randns((3, 4), (3, 4))),
    ("add_mul_broadcast_scalar_tensor", add_mul, lambda: randns((3, 4), ())),
    ("unary_chain", unary_chain, lambda: randns((5, 6))),
    ("unary_ops", unary_ops, lambda: randns((4, 5))),
    ("compare_ops", compare_ops, lambda: randns((3, 4), (3, 4))),
    ("pow_mod_floordiv", pow_mod_floordiv, lambda: randns((3, 4))),
    ("python_number_math", python_number_math, lambda: randns((2, 3))),
    ("augassign_locals", augassign_locals, lambda: randns((3, 3))),
    ("global_constants", global_constants, lambda: randns((4,))),
    ("builtins_on_constants", builtins_on_constants, lambda: randns((3, 5))),
    ("isinstance_branch", isinstance_branch, lambda: randns((3,))),
    ("logical_tensor_ops", logical_tensor_ops, lambda: randns((4, 4), (4, 4))),
    ("bitwise_int_ops", bitwise_int_ops, lambda: randns((3, 4))),
    ("int_tensor_promotion", int_tensor_promotion, lambda: randns((3, 4))),
    ("number_compare_from_shape", number_compare_from_shape, lambda: randns((4, 2))),
    ("scale_from_numel", scale_from_numel, lambda: randns((4, 5))),
    # attributes / shapes
    ("shape_attrs", shape_attrs, lambda: randns((2, 3, 4))),
    ("shape_unpack", shape_unpack, lambda: randns((2, 3, 4, 5))),
    ("dtype_device_attrs", dtype_device_attrs, lambda: randns((3, 4))),
    ("dtype_device_attrs_float64", dtype_device_attrs, lambda: randns((3, 4), dtype=torch.float64)),
    ("transpose_attrs", transpose_attrs, lambda: randns((3, 4), (2, 3, 5))),
    ("requires_grad_branch", requires_grad_branch, lambda: randns((3,))),
    ("shape_if_big_3d", shape_if, lambda: randns((4, 2, 3))),
    ("shape_if_small_2d", shape_if, lambda: randns((2, 3))),
    ("shape_if_else_odd", shape_if_else_taken, lambda: randns((2, 5))),
    ("shape_if_else_even", shape_if_else_taken, lambda: randns((2, 4))),
    # constant arguments
    ("const_args_relu_nobias", const_args, lambda: (randn(3, 4), 2, True, None)),
    ("const_args_norelu_bias", const_args, lambda: (randn(3, 4), 0.5, False, randn(4, seed=1))),
    ("const_dim_keepdim", const_dim_keepdim, lambda: (randn(3, 4, 5), 1, True)),
    ("const_dim_neg_nokeep", const_dim_keepdim, lambda: (randn(3, 4, 5), -1, False)),
    # containers / subscripts / returns
    ("containers_subscripts", containers_subscripts, lambda: randns((2, 3))),
    ("return_nested", return_nested, lambda: randns((3, 4))),
    ("return_list", return_list, lambda: randns((3,))),
    ("return_dict_mixed_keys", return_dict_mixed_keys, lambda: randns((2, 3))),
    ("tensor_subscripts", tensor_subscripts, lambda: randns((5, 6))),
    ("index_tensor", index_tensor, lambda: (randn(5, 5), torch.tensor([0, 3, 3, 1]))),
    ("chunk_unpack_glu", chunk_unpack_glu, lambda: randns((3, 8))),
    ("split_sizes", split_sizes, lambda: randns((2, 6))),
    ("cat_stack", cat_stack, lambda: randns((2, 3), (2, 3))),
    ("tuple_swap", tuple_swap, lambda: randns((3,), (3,))),
    # views / broadcasting
    ("view_chain", view_chain, lambda: randns((6, 4))),
    ("expand_repeat", expand_repeat, lambda: randns((2, 3))),
    ("broadcasting", broadcasting, lambda: randns((3,), (4,))),
    ("reshape_infer", reshape_infer, lambda: randns((2, 4, 3))),
    ("flip_roll", flip_roll, lambda: randns((3, 4))),
    # in-place on inputs
    ("inplace_methods", inplace_methods, lambda: randns((3, 4), (3, 4))),
    ("inplace_setitem", inplace_setitem, lambda: randns((3, 4), (3,))),
    ("inplace_augassign_input", inplace_augassign_input, lambda: randns((2, 3))),
    ("inplace_clamp_masked_fill", inplace_clamp_masked_fill, lambda: randns((3, 3), (3, 3))),
    ("inplace_noncontiguous_input", inplace_noncontiguous_input, _noncontig_t),
    ("inplace_through_view", inplace_through_view, lambda: randns((4, 3), (3, 3))),
    ("inplace_one_of_two", inplace_one_of_two, lambda: randns((3,), (3,))),
    # dtypes
    ("dtype_conversions", dtype_conversions, lambda: randns((3, 4))),
    ("half_arith", half_arith, lambda: randns((3, 4))),
    ("type_as_and_keywords", type_as_and_keywords, lambda: (randn(3, 4), randint(5, 3, 4))),
    ("int_tensors", int_tensors, lambda: randns((3, 4))),
    # reductions
    ("reductions", reductions, lambda: randns((3, 4, 5))),
    ("max_with_dim", max_with_dim, lambda: randns((3, 5))),
    ("min_with_dim_subscript", min_with_dim_subscript, lambda: randns((4, 3))),
    ("max_unpack", max_unpack, lambda: randns((2, 3, 4))),
    ("full_max_min", full_max_min, lambda: randns((4, 3))),
    ("std_var_keywords", std_var_keywords, lambda: randns((4, 5))),
    ("softmaxes", softmaxes, lambda: randns((3, 6))),
    ("cumulative_sort_topk", cumulative_sort_topk, lambda: randns((4, 5))),
    ("norms", norms, lambda: randns((3, 4))),
    # matmul family
    ("matmuls", matmuls, lambda: randns((3, 4), (4, 5))),
    ("batched_matmuls", batched_matmuls, lambda: randns((2, 3, 4), (2, 4, 5))),
    ("einsums", einsums, lambda: randns((2, 3, 4), (2, 4, 5), (3, 4))),
    ("linear", linear, lambda: randns((2, 5), (3, 5), (3,))),
    ("mlp_residual", mlp_residual, lambda: randns((2, 3, 8), (16, 8), (16,), (8, 16))),
    ("attention", attention, lambda: (*randns((2, 4, 8), (2, 4, 8), (2, 4, 8)), torch.tril(torch.ones(4, 4)))),
    ("multihead_split", multihead_split, lambda: randns((2, 5, 8), (8, 24))),
    ("half_matmul", half_matmul, lambda: randns((4, 8), (8, 3))),
    # elementwise nn functions / masks
    ("where_clamp_masked_fill", where_clamp_masked_fill, lambda: randns((3, 4), (3, 4))),
    ("activations", activations, lambda: randns((4, 5))),
    ("layer_norms", layer_norms, lambda: randns((2, 3, 8), (8,), (8,))),
    ("manual_layer_norm", manual_layer_norm, lambda: randns((2, 3, 8), (8,), (8,))),
    ("rms_norm", rms_norm, lambda: randns((2, 3, 8), (8,))),
    ("dropout_eval", dropout_eval, lambda: randns((4, 4))),
    ("rotary", rotary, lambda: randns((2, 3, 8), (3, 4), (3, 4))),
    ("losses", losses, lambda: (randn(4, 5), randint(5, 4), randn(4, 5, seed=2))),
    ("gather_scatter", gather_scatter, lambda: (randn(3, 5), randint(5, 3, 2))),
    ("tri_diag", tri_diag, lambda: randns((4, 4))),
    # conv / pool / embedding
    ("conv2d_variants", conv2d_variants, lambda: randns((2, 3, 8, 8), (4, 3, 3, 3), (4,))),
    ("pools", pools, lambda: randns((2, 3, 6, 6))),
    ("conv_block", conv_block, lambda: randns((2, 3, 8, 8), (4, 3, 3, 3), (4,), (5, 64), (5,))),
    ("embedding", embedding, lambda: (randint(10, 2, 3), randn(10, 4))),
    ("embedding_plus_position", embedding_plus_position, lambda: (randint(10, 2, 5), *randns((10, 4), (8, 4)))),
    # factories
    ("factories", factories, lambda: randns((3, 4))),
    ("arange_positions", arange_positions, lambda: randns((5, 3))),
    ("empty_like_fill", empty_like_fill, lambda: randns((3, 4))),
    ("new_factories", new_factories, lambda: randns((3, 4))),
    ("causal_mask", causal_mask, lambda: randns((2, 4, 4))),
    # non-contiguous inputs
    ("noncontig_transposed", noncontig_transposed, _noncontig_t),
    ("noncontig_strided", noncontig_strided, _noncontig_strided),
    ("noncontig_expanded", noncontig_expanded, _noncontig_expanded),
    ("noncontig_permuted_4d", noncontig_permuted_4d, _noncontig_permuted),
    ("noncontig_linear", linear, lambda: (randn(5, 2).t(), randn(5, 3, seed=1).t(), randn(6, seed=2)[::2])),
    ("noncontig_matmuls", matmuls, lambda: (randn(4, 3).t(), randn(8, 5)[::2])),
]


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn, make_inputs",
    [(fn, make) for _, fn, make in CASES],
    ids=[name for name, _, _ in CASES],
)
def test_capture(fn, make_inputs):
    cf = ember.compile(fn)
    run_and_compare(cf, fn, make_inputs)
    run_and_compare(cf, fn, make_inputs)
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 1, c
    assert c["hits"] >= 1, c


def test_case_names_unique():
    names = [name for name, _, _ in CASES]
    assert len(names) == len(set(names))


def test_recompile_on_new_shape():
    cf = ember.compile(add_mul)
    run_and_compare(cf, add_mul, lambda: randns((3, 4), (3, 4)))
    run_and_compare(cf, add_mul, lambda: randns((5, 2), (5, 2)))
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 2, c
    assert c["recompiles"] >= 1, c
    # both specializations are cached now
    run_and_compare(cf, add_mul, lambda: randns((3, 4), (3, 4)))
    run_and_compare(cf, add_mul, lambda: randns((5, 2), (5, 2)))
    c = counters()
    assert c["frames"] == 2, c
    assert c["hits"] >= 2, c


def test_recompile_takes_other_shape_branch():
    cf = ember.compile(shape_if)
    run_and_compare(cf, shape_if, lambda: randns((4, 2, 3)))
    run_and_compare(cf, shape_if, lambda: randns((2, 3)))
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 2, c


def test_recompile_on_const_arg_change():
    cf = ember.compile(const_args)
    run_and_compare(cf, const_args, lambda: (randn(3, 4), 2, True, None))
    run_and_compare(cf, const_args, lambda: (randn(3, 4), 2, False, None))
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 2, c
    run_and_compare(cf, const_args, lambda: (randn(3, 4), 2, True, None))
    assert counters()["frames"] == 2


def test_recompile_on_dtype_change():
    cf = ember.compile(unary_chain)
    run_and_compare(cf, unary_chain, lambda: randns((3, 4)))
    run_and_compare(cf, unary_chain, lambda: randns((3, 4), dtype=torch.float64))
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 2, c


def test_two_functions_compile_separately():
    cf1 = ember.compile(add_mul)
    cf2 = ember.compile(unary_chain)
    run_and_compare(cf1, add_mul, lambda: randns((3, 4), (3, 4)))
    run_and_compare(cf2, unary_chain, lambda: randns((3, 4)))
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 2, c


def test_reset_drops_cache():
    cf = ember.compile(add_mul)
    run_and_compare(cf, add_mul, lambda: randns((3, 4), (3, 4)))
    assert counters()["frames"] == 1
    ember.reset()
    ember.testing.reset_counters()
    run_and_compare(cf, add_mul, lambda: randns((3, 4), (3, 4)))
    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 1, c
    assert c["hits"] == 0, c


def _sin_sum(x):
    y = (x * 2).sin().sum()
    return y


def test_requires_grad_backward():
    def make_leaf():
        return randn(5, 3).requires_grad_(True)

    x_eager = make_leaf()
    y_eager = _sin_sum(x_eager)
    y_eager.backward()

    cf = ember.compile(_sin_sum)
    x_comp = make_leaf()
    y_comp = cf(x_comp)
    assert y_comp.requires_grad
    assert_same(y_comp.detach(), y_eager.detach())
    y_comp.backward()
    assert x_comp.grad is not None
    assert_same(x_comp.grad, x_eager.grad, "x.grad")
    assert_same(x_comp.grad, 2 * torch.cos(2 * x_comp.detach()), "x.grad (analytic)")

    c = counters()
    assert c["aborts"] == 0, c
    assert c["frames"] == 1, c
