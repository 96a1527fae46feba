"""Result metadata ember infers in C (csrc/trace/em_infer.c: elementwise ops with broadcasting,
normalizations, activations, linear, convolutions, adaptive pooling) must equal what eager
PyTorch produces: each case's graph output carries the shape and strides of the real result."""

import re

import pytest
import torch

import ember
import ember.testing

F = torch.nn.functional


def g(seed, *shape):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


X = g(0, 2, 3, 9, 9)
W, B, WG, W1, WL, BL = g(1, 6, 3, 3, 3), g(2, 6), g(3, 6, 1, 3, 3), g(4, 4, 3, 5), g(5, 7, 9), g(6, 7)

CASES = {
    "conv2d": lambda x: F.conv2d(x, W, B, stride=2, padding=1),
    "conv2d_groups_dilation": lambda x: F.conv2d(x, WG, None, 1, (1, 2), (2, 1), 3),
    "conv1d": lambda x: F.conv1d(x.flatten(2), W1, padding=2),
    "linear": lambda x: F.linear(x, WL, BL),
    "linear_keywords": lambda x: F.linear(input=x, weight=WL, bias=BL),
    "conv2d_keywords": lambda x: F.conv2d(x, weight=W, bias=None, stride=(2,), padding=[1], groups=1),
    "batch_norm": lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3), False),
    "layer_norm": lambda x: F.layer_norm(x, (9,)),
    "hardswish": lambda x: F.hardswish(x),
    "softmax": lambda x: F.softmax(x, dim=-1),
    "softmax_dtype": lambda x: F.softmax(x, dim=-1, dtype=torch.float64),
    "dropout_eval": lambda x: F.dropout(x, 0.5, training=False),
    "broadcast_mean": lambda x: x * x.mean((2, 3), keepdim=True),
    "broadcast_rank": lambda x: torch.ones(9) - x,
    "broadcast_slice": lambda x: x[:, :1] + x,
    "adaptive_pool": lambda x: F.adaptive_avg_pool2d(x, 1),
    "adaptive_pool_none": lambda x: F.adaptive_avg_pool2d(x, (2, None)),
    "adaptive_pool1d": lambda x: F.adaptive_avg_pool1d(x.flatten(2), 4),
    "relu_inplace": lambda x: F.relu(x.clone(), inplace=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inferred_metadata_matches_eager(name):
    fn = CASES[name]

    def f(x):
        return fn(x)

    expected = f(X)
    cf = ember.compile(f)
    got = cf(X)
    torch.testing.assert_close(got, expected)
    dump = ember.testing.entries(cf)[0]
    text = dump["graph"] if isinstance(dump, dict) else dump[0]
    last = [line for line in text.splitlines() if line.strip().startswith("%")][-1]
    m = re.search(r":\s*(\w+)\[([\d, ]*)\] stride=\(([\d, ]*)\)", last)
    assert m, last
    sizes = tuple(int(v) for v in m.group(2).split(",") if v.strip())
    strides = tuple(int(v) for v in m.group(3).split(",") if v.strip())
    assert sizes == tuple(expected.shape) and strides == expected.stride(), (last, expected.stride())
    assert m.group(1) == {torch.float32: "f32", torch.float64: "f64"}[expected.dtype]
