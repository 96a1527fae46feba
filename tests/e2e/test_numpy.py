"""NumPy code on tensors (issue 16): `x.numpy()`, numpy functions, ndarray methods, attributes,
operators and subscripts are traced through torch._numpy into the graph (csrc/trace/em_sym_np.c);
an ndarray leaving the trace is a numpy array over the graph's tensor. Results against eager:
types, dtypes and values; what cannot be traced breaks the graph, never a wrong result."""

import warnings

import numpy as np
import pytest
import torch

import ember
from tests.helpers import clone_tree, counters, exact_graph, randn


def _same_arrays(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same_arrays(g, w)
    elif isinstance(want, np.ndarray):
        assert type(got) is np.ndarray, type(got)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    elif isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    else:
        assert type(got) is type(want) and got == want, (got, want)


def compare(fn, *args):
    """fn compiled (breaks allowed) on clones of args: eager's results and arguments after."""
    eager_args, comp_args = clone_tree(args), clone_tree(args)
    want = fn(*eager_args)
    _same_arrays(ember.compile(fn)(*comp_args), want)
    _same_arrays(comp_args, eager_args)


def one_numpy_graph(fn, *args):
    """fn under fullgraph=True, twice: eager's results (numpy arrays as numpy arrays of eager's
    dtype), one graph, the second call a cache hit."""
    want = fn(*args)
    cf = ember.compile(fn, fullgraph=True)
    for _ in range(2):
        _same_arrays(cf(*args), want)
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["hits"]) == (1, 0, 0, 1), c


def attributes(x):
    a = x.numpy()
    return a.itemsize, a.strides, a.shape, a.ndim, a.size, a.nbytes, a.dtype, torch.from_numpy(a.T) * 2


def functions(x):
    m = np.mean(x.numpy(), 1)
    s = np.sum(m)
    return torch.from_numpy(np.asarray(s)), np.linalg.norm(x.numpy(), axis=0), np.fft.fftshift(x.numpy())


def methods(x):
    a = x.numpy()
    return a.copy(), a.transpose(1, 0), a.reshape([1, a.size]), a.max(axis=0), a.all(axis=0), a.astype(np.float64)


def operators(x):
    a = x.numpy()
    b = a * 2 + 1
    return a + a, a - b, -a, a > 0, a @ a.T, np.where(a > 0, a, 0.0), b[1:, ::2], b[1, 2]


def tensors_given_to_numpy(x):
    return np.ones_like(x, dtype=np.float64), np.full_like(x, 2.5, dtype=np.dtype("float")), np.stack([x, x])


def meshgrid(x, y):
    r1, r2 = np.meshgrid(x.numpy(), y.numpy())
    return torch.from_numpy(r1) + torch.from_numpy(r2)


def back_to_torch(x):
    a = np.exp(x.numpy())
    return torch.from_numpy(a) + torch.as_tensor(np.sin(a)) + x


@pytest.mark.parametrize("fn", [attributes, functions, methods, operators, tensors_given_to_numpy, back_to_torch])
def test_numpy_code_is_one_graph(fn):
    one_numpy_graph(fn, randn(3, 4))


def test_meshgrid_of_two_arrays():
    one_numpy_graph(meshgrid, randn(3), randn(5))


def int_arrays(x):
    a = x.numpy()
    s = np.sum(a)
    t = s
    s += 1  # a numpy scalar: a new one, t unchanged
    return a // 2, a % 3, s, t, a.mean(), (a * 1.5).dtype, a[1, 2], np.asarray(a.max()), a.max(axis=0)


def test_integer_arrays_follow_numpy_promotion():
    one_numpy_graph(int_arrays, torch.arange(12, dtype=torch.int32).reshape(3, 4))


def writes_through_array(x):
    y = x + 1
    a = y.numpy()
    a += 1
    a[0] = 7.0
    a[:, 1] *= 2
    return y * 2, a


def test_writes_into_an_array_are_seen_by_its_tensor():
    x = randn(3, 4)
    one_numpy_graph(writes_through_array, x)


def returned_twice(x):
    a = (x * 2).numpy()
    return a, a


def test_array_returned_twice_is_one_array():
    cf = ember.compile(returned_twice, fullgraph=True)
    a, b = cf(randn(3))
    assert a is b


def array_returned_shares_memory(x):
    y = x * 2
    return y, y.numpy()


def test_array_returned_shares_its_tensors_memory():
    y, a = ember.compile(array_returned_shares_memory, fullgraph=True)(randn(3))
    a[0] = 100.0
    assert y[0].item() == 100.0


def dynamic_shape(x):
    a = x.numpy()
    return a.shape, a.sum(axis=0)


def test_shape_of_a_symbolic_tensor():
    cf = ember.compile(dynamic_shape, dynamic=True)
    for n in (3, 5, 7):
        x = randn(n, 2)
        _same_arrays(cf(x), dynamic_shape(x))
    assert counters()["frames"] == 1


def requires_grad_numpy(x):
    y = x * 2
    return y.detach().numpy().sum(), y.numpy()


def test_numpy_of_a_tensor_that_requires_grad_raises_as_eager():
    x = randn(3).requires_grad_()
    with pytest.raises(RuntimeError, match="requires grad"):
        requires_grad_numpy(x)
    with pytest.raises(RuntimeError, match="requires grad"):
        ember.compile(requires_grad_numpy)(x)


def data_dependent(x):
    a = x.numpy()
    if a.sum() > 0:  # truth of an array: a break
        return x + 1
    return x - 1


def to_list(x):
    a = x.numpy()
    return a.tolist(), x + 1


def boolean_mask(x):
    a = x.numpy()
    return a[a > 0], x + 1


def tensor_through_method(x):
    # numpy hands a tensor to its own methods here (x.clip, x.exp): eager's result is a tensor
    return np.clip(x, -0.5, 0.5), np.exp(x), np.sum(x.numpy())


@pytest.mark.parametrize("fn", [data_dependent, to_list, boolean_mask, tensor_through_method])
def test_untraceable_numpy_breaks_the_graph(fn):
    compare(fn, randn(4))
    assert counters()["aborts"] == 0


def array_times_tensor(x):
    y = x + 1
    return y.numpy() * y


def test_array_and_tensor_operands_run_as_eager():
    x = randn(3)
    try:
        want = array_times_tensor(x)
    except Exception as e:  # numpy's and torch's versions decide
        with pytest.raises(type(e)):
            ember.compile(array_times_tensor)(x)
    else:
        _same_arrays(ember.compile(array_times_tensor)(x), want)


def numpy_random(x):
    return x + torch.from_numpy(np.random.rand(3).astype(np.float32)).sum() * 0


def test_numpy_random_is_not_traced():
    compare(numpy_random, randn(3))


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_numpy_graph_on_a_torch_compile_backend(backend):
    x = randn(3, 4)
    cf = ember.compile(operators, backend=backend, fullgraph=True)
    _same_arrays(cf(x), operators(x))


def test_graphs_no_more_than_torch_compile():
    import torch._dynamo.testing
    x = randn(3, 4)
    torch._dynamo.reset()
    cnt = torch._dynamo.testing.CompileCounter()
    torch.compile(functions, backend=cnt)(x)
    _same_arrays(ember.compile(functions)(x), functions(x))
    assert counters()["frames"] <= cnt.frame_count
    torch._dynamo.reset()



def array_argument(x, arr):
    return torch.from_numpy(arr * 2) + x, arr.sum(axis=0)


def test_array_arguments_are_graph_inputs_guarded_like_tensors():
    cf = ember.compile(array_argument)
    x = randn(3)
    for arr in (np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)):
        _same_arrays(cf(x, arr), array_argument(x, arr))
    assert (counters()["frames"], counters()["hits"]) == (1, 1)
    arr64 = np.ones((2, 3))  # another dtype: a guard miss, compiled again
    _same_arrays(cf(x, arr64), array_argument(x, arr64))
    assert counters()["frames"] == 2


def writes_into_argument(arr):
    arr += 1
    arr[0, 0] = -1
    return arr


def test_writes_into_an_array_argument_reach_the_callers_array():
    arr, want = np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32)
    got = ember.compile(writes_into_argument, fullgraph=True)(arr)
    writes_into_argument(want)
    np.testing.assert_array_equal(arr, want)
    assert got is arr or np.shares_memory(got, arr)


def test_arrays_ember_cannot_take_are_objects():
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    for a in (ro, np.ones(3, np.complex64), np.array(["a", "b"])):
        got = ember.compile(lambda t, a: (t + 1, a.shape))(randn(3), a)
        assert got[1] == a.shape


def array_across_break(x):
    a = (x * 2).numpy()
    print("break")
    return torch.from_numpy(a + 1) * x, type(a)


def test_array_handed_on_at_a_break(capsys):
    x = randn(3)
    want = array_across_break(x)
    got = ember.compile(array_across_break)(x)
    _same_arrays(got, want)
    assert counters()["aborts"] == 0


def types_of_arrays(x):
    a = x.numpy()
    s = a.sum()
    return type(a), type(s), isinstance(a, np.ndarray), isinstance(s, np.generic), isinstance(s, np.ndarray)


def test_type_and_isinstance_of_arrays_and_scalars():
    one_numpy_graph(types_of_arrays, randn(3))


def write_then_read(a, b):
    a += 1
    return b * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_array_arguments_sharing_memory(backend):
    # compiled for distinct arrays, then called with one array twice and with overlapping views
    cf = ember.compile(write_then_read, backend=backend)
    cf(np.ones(3, np.float32), np.ones(3, np.float32))
    arr, ref = np.ones(3, np.float32), np.ones(3, np.float32)
    np.testing.assert_array_equal(cf(arr, arr), write_then_read(ref, ref))
    arr, ref = np.ones(4, np.float32), np.ones(4, np.float32)
    np.testing.assert_array_equal(cf(arr[1:], arr[:3]), write_then_read(ref[1:], ref[:3]))
    np.testing.assert_array_equal(arr, ref)


def arrays_of_constants(x):
    r = torch.from_numpy(np.arange(4, dtype=np.float32)) + x
    return r, np.array([[1.0, 2.0]]), np.zeros((2, 3), dtype=np.int32), np.sqrt(2.0), np.float32(2) * x


def lengths_and_rows(x):
    a = x.numpy()
    total = 0.0
    for row in a:  # rows: arrays (views)
        total = total + row
    items = [v for v in a[0]]  # numpy scalars
    return len(a), total, items, type(items[0])


def scalar_item_is_a_copy(x):
    a = (x * 1).numpy()
    v = a[0, 1]
    a[0, 1] = 100.0
    return v, a


def copies(x):
    a = x.numpy(force=True)
    t = torch.tensor(a[:, ::2])
    t.add_(1)
    return t, t.is_contiguous(), a


@pytest.mark.parametrize("fn", [arrays_of_constants, lengths_and_rows, scalar_item_is_a_copy, copies])
def test_more_numpy_in_one_graph(fn):
    one_numpy_graph(fn, randn(3, 4))


def test_len_and_iteration_of_a_zero_dim_array_raise_as_eager():
    def f(x):
        s = np.sum(x.numpy())
        return len(s)

    with pytest.raises(TypeError):
        ember.compile(f)(randn(3))


def layouts(x):
    a = x.numpy()
    b, c = a.T.copy(), np.copy(a.T)  # ndarray.copy: C order; np.copy: the argument's order
    return torch.as_tensor(b), torch.as_tensor(c), a.T * 2, np.exp(a.T)


def test_result_layouts_are_numpys():
    x = randn(3, 4)
    want = layouts(x)
    got = ember.compile(layouts, fullgraph=True)(x)
    for g, w in zip(got, want):
        assert (g.stride() if isinstance(g, torch.Tensor) else g.strides) == \
            (w.stride() if isinstance(w, torch.Tensor) else w.strides)


def test_iinfo_arguments_equal_by_dtype_share_a_compile():
    """numpy.iinfo(dt) is a new object per call: guarded by its dtype, not its identity."""
    def f(a, info):
        return a + info.max

    cf = ember.compile(f)
    a = torch.zeros(3, dtype=torch.int64)
    for dt in (np.dtype(int), np.ones((1,), dtype=int).dtype, np.dtype("int64")):
        torch.testing.assert_close(cf(a, np.iinfo(dt)), f(a, np.iinfo(dt)))
    assert counters()["frames"] == 1
    torch.testing.assert_close(cf(a, np.iinfo(np.int16)), f(a, np.iinfo(np.int16)))
    assert counters()["frames"] == 2


def scalar_made_a_tensor(x):
    s = np.sum(x.numpy())
    t = torch.as_tensor(s)
    t += 1  # a tensor of its own: the numpy scalar stays
    return s, t, torch.tensor(np.max(x.numpy()))


def test_numpy_scalar_made_a_tensor_is_a_copy():
    one_numpy_graph(scalar_made_a_tensor, torch.arange(4.0))


def scalars_are_immutable(x):
    s = np.sum(x.numpy())
    s.fill(0)  # on a temporary array of its value
    try:
        s[()] = 5
    except TypeError as e:
        return s, str(e), s.astype(np.float64)


def test_numpy_scalars_stay_immutable():
    one_numpy_graph(scalars_are_immutable, torch.arange(4.0))


def test_class_of_an_array_is_its_type():
    def f(x):
        return x.__class__, issubclass(x.__class__, np.ndarray), type(x), np.sum(x).__class__

    exact_graph(f, np.ones(3))


def test_from_numpy_is_a_new_tensor_over_the_same_memory():
    # fuzz 2806 #1223: torch.from_numpy(x.numpy()) was x itself, so unsqueeze_ on it changed the
    # array's shape (and x's); it is a new tensor sharing the memory
    def f(x):
        a = x.numpy()
        t = torch.from_numpy(a)
        t2 = torch.as_tensor(a)
        t.unsqueeze_(0)
        t2.add_(1)
        return a, t, t is x, t2 is x, x.shape, torch.from_numpy(a) is t

    x = torch.arange(6.0).reshape(3, 2)
    want, got = f(x.clone()), ember.compile(f, fullgraph=True)(x.clone())
    assert got[0].shape == want[0].shape == (3, 2) and np.array_equal(got[0], want[0])
    assert torch.equal(got[1], want[1]) and got[2:] == want[2:]


@pytest.mark.parametrize("dynamic", [None, True])
def test_from_numpy_keeps_strides_and_is_no_view(dynamic):
    # fuzz 2811 #758, #837: a view (view_as) refused detach_() and took contiguous strides
    def f(y):
        a = y[::2].numpy()
        t = torch.from_numpy(a)
        s = t.stride()
        t.detach_()
        return t, s, t._is_view()

    y = torch.randn(6, 2)
    want, got = f(y), ember.compile(f, dynamic=dynamic)(y)
    assert torch.equal(got[0], want[0]) and got[0].stride() == want[0].stride() and got[1:] == want[1:]


def test_out_into_a_tensor_a_numpy_array_holds_raises_as_eager():  # fuzz 3405 #166
    def f(x):
        t = x[[]]
        a = t.numpy()  # noqa: F841 (alive to the end of the frame: t's storage cannot be resized)
        torch.add(x, 1, out=t)
        return t

    with pytest.raises(RuntimeError, match="not resizable"):
        f(torch.randn(2, 1, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ember.EmberWarning)  # the frame runs as Python
        with pytest.raises(RuntimeError, match="not resizable"):
            ember.compile(f)(torch.randn(2, 1, 4))
