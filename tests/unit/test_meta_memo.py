"""ember._rules.run's cache of meta results: a repeated call signature is answered from the cache
with fresh tensors of the same metadata; views, in-place calls and anything whose metadata the key
does not capture are not cached."""
import torch
import torch.nn.functional as F

from ember import _rules


def meta(*shape, requires_grad=False, dtype=torch.float32):
    return torch.empty(shape, device="meta", dtype=dtype, requires_grad=requires_grad)


def run(fn, *args, **kwargs):
    out, dev = _rules.run(fn, args, kwargs, torch.device("cpu"))
    assert dev == torch.device("cpu")
    return out


def test_repeated_signature_is_cached_with_fresh_results():
    _rules._MEMO.clear()
    q = meta(2, 4, 8, 16)
    a = run(F.scaled_dot_product_attention, q, q, q)
    assert len(_rules._MEMO) == 1
    b = run(F.scaled_dot_product_attention, meta(2, 4, 8, 16), meta(2, 4, 8, 16), meta(2, 4, 8, 16))
    assert len(_rules._MEMO) == 1  # answered from the cache
    assert b is not a and (b.shape, b.stride(), b.dtype) == (a.shape, a.stride(), a.dtype)
    c = run(F.scaled_dot_product_attention, meta(2, 4, 9, 16), meta(2, 4, 9, 16), meta(2, 4, 9, 16))
    assert c.shape == (2, 4, 9, 16) and len(_rules._MEMO) == 2


def test_key_holds_dtype_strides_requires_grad_and_grad_mode():
    _rules._MEMO.clear()
    x = meta(3, 4)
    assert run(torch.mm, x, meta(4, 5)).dtype == torch.float32
    assert run(torch.mm, meta(3, 4, dtype=torch.float64), meta(4, 5, dtype=torch.float64)).dtype == torch.float64
    t = meta(4, 3).t()  # same shape, other strides
    assert run(torch.relu, t).stride() == torch.relu(t).stride()
    assert run(torch.relu, x).stride() == (4, 1)
    w = meta(3, 4, requires_grad=True)
    assert run(torch.relu, w).requires_grad
    with torch.no_grad():
        assert not run(torch.relu, w).requires_grad


def test_views_and_in_place_calls_are_not_cached():
    _rules._MEMO.clear()
    x = meta(3, 4)
    v = run(torch.Tensor.view, x, 12)
    assert v._is_view() and len(_rules._MEMO) == 0
    y = run(torch.Tensor.add_, x, 1)
    assert y is x and len(_rules._MEMO) == 0
    out = meta(3, 4)
    assert run(torch.add, x, 1, out=out) is out and len(_rules._MEMO) == 0


def test_memo_and_rules_keep_no_user_object_alive():
    """Only callables that live as long as their module or class are keys: a callable object,
    a module, a bound method or a class made at run time is answered but not kept."""
    import gc
    import weakref

    class Scaler:
        def __call__(self, t):
            return torch.mul(t, 2)

        def method(self, t):
            return torch.relu(t)

    class Local(torch.nn.Module):
        pass

    _rules._MEMO.clear()
    s, mod = Scaler(), torch.nn.Linear(2, 2)
    refs = [weakref.ref(o) for o in (s, mod, Local)]
    for fn in (s, s.method, mod, Local):
        _rules.classify(fn)
        assert fn not in _rules.RULES
    run(s, meta(3))
    run(s.method, meta(3))
    assert _rules._MEMO == {}
    run(torch.relu, meta(3))
    assert len(_rules._MEMO) == 1  # torch's own callables are still memoized
    assert _rules.classify(torch.relu) == _rules.GRAPH
    del s, mod, Local, fn
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_view_of_an_intermediate_is_cached_view_of_an_input_is_not():
    _rules._MEMO.clear()
    a, b = meta(2, 3, 4), meta(2, 4, 5)
    m = run(torch.einsum, "bij,bjk->bki", a, b)  # a view of its bmm's result, aliasing no input
    assert m._is_view() and len(_rules._MEMO) == 1
    again = run(torch.einsum, "bij,bjk->bki", meta(2, 3, 4), meta(2, 4, 5))
    assert not again._is_view() and (again.shape, again.stride()) == (m.shape, m.stride())
    x = meta(3, 4)
    d = run(torch.diagonal, x)  # a view of the input itself
    assert d._base is x and len(_rules._MEMO) == 1
    base = meta(6, 4)
    v = base[1:4]  # an input that is itself a view: a result viewing its base aliases it too
    run(torch.narrow, v, 0, 0, 2)
    assert len(_rules._MEMO) == 1


def test_factory_calls_are_cached_by_their_arguments():
    _rules._MEMO.clear()
    out, dev = _rules.run(torch.arange, (5,), {"device": torch.device("cpu")}, None)
    assert out.shape == (5,) and out.device.type == "meta" and dev == torch.device("cpu")
    assert len(_rules._MEMO) == 1
    out2, _ = _rules.run(torch.arange, (5,), {"device": torch.device("cpu")}, None)
    assert out2 is not out and out2.shape == (5,) and len(_rules._MEMO) == 1
    out3, _ = _rules.run(torch.arange, (7,), {"device": torch.device("cpu")}, None)
    assert out3.shape == (7,) and len(_rules._MEMO) == 2
    z, dev = _rules.run(torch.zeros, (2, 3), {}, None)  # no device given: the default device's
    assert z.shape == (2, 3) and z.device.type == "meta" and dev == torch.get_default_device()
