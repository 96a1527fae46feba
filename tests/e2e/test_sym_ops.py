"""What each kind of Python value does under the operations opcodes apply to it: subscripts,
item stores, `in`, `is`, truth, iteration, and the methods of lists, tuples and dicts. Each case
is compared with eager and must be one graph with no break and no fallback.
"""

import torch

import ember
import ember.testing


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def one_graph(fn, *args, calls=2):
    expected = fn(*args)
    cf = ember.compile(fn, fullgraph=True)
    for _ in range(calls):
        got = cf(*args)
        torch.testing.assert_close(got, expected)
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c
    assert c["hits"] == calls - 1, c
    return got


def test_iterating_a_tensor_whose_metadata_was_inferred():
    def f(x):
        y = x + 1  # metadata inferred in C: its meta tensor is made when iteration asks for it
        out = []
        for row in y:
            out.append(row * 2)
        return out, [r - 1 for r in (x * 3)]

    one_graph(f, randn(3, 4))

