"""Graphs a functional backend (AOTAutograd: aot_eager, Inductor) would get wrong run on ember's
executor instead, with eager's results: tensor metadata changed in place (requires_grad of an
input, detach_), out= that resizes its tensor, and inputs that share storage without being views
of one tensor (x and x.data across a graph break).
"""
import pytest
import torch

import ember


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
