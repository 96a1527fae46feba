"""Defect classes the differential fuzzer (ember/fuzz) found, each checked against eager over
several calls."""
import torch

import ember


def test_mutable_default_of_a_function_made_while_tracing_is_new_per_call():
    def fn(x):
        def h(z, memo=[], cfg={}):
            memo.append(1)
            cfg[len(memo)] = 1
            return z * len(memo) + len(cfg)
        return h(x)
    cf = ember.compile(fn)
    x = torch.ones(2)
    for _ in range(3):
        assert torch.equal(cf(x), fn(x))


def test_default_list_read_from_the_frame_is_the_frames_object():
    shared = []

    def fn(x, acc=shared):
        def h(z, memo=acc):
            memo.append(1)
            return z * len(memo)
        return h(x)
    cf = ember.compile(fn)
    x = torch.ones(2)
    got = [cf(x) for _ in range(3)]
    shared.clear()
    expected = [fn(x) for _ in range(3)]
    for g, e in zip(got, expected):
        assert torch.equal(g, e)


def test_immutable_defaults_of_a_function_made_while_tracing():
    def fn(x, k=3):
        def h(z, a=(1, 2.0), b=k):
            return z * a[1] * b
        return h(x)
    cf = ember.compile(fn)
    x = torch.ones(2)
    assert torch.equal(cf(x), fn(x)) and torch.equal(cf(x, 5), fn(x, 5))
