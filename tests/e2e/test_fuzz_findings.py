"""Defect classes the differential fuzzer (ember/fuzz) found, each checked against eager over
several calls."""
import pytest
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


def test_tuple_returned_twice_is_one_object():
    import collections
    P = collections.namedtuple("P", ["a", "b"])

    def fn(x):
        p, t = P(x, 1), (x * 2, 2)
        return p, p, t, [t, (t,)]
    for backend in ("eager", "aot_eager"):
        r = ember.compile(fn, backend=backend)(torch.ones(2))
        assert r[0] is r[1] and type(r[0]) is P
        assert r[2] is r[3][0] is r[3][1][0]
    e = fn(torch.ones(2))
    assert e[0] is e[1] and e[2] is e[3][0]


def test_tuple_alive_at_a_graph_break_keeps_its_identity():
    def fn(x):
        t = (x + 1, 3)
        u = t
        print("break")
        return t is u, t
    same, t = ember.compile(fn)(torch.ones(2))
    assert same is True and torch.equal(t[0], torch.full((2,), 2.0))


def test_list_changed_while_iterated():
    def fn(x):
        lst = [x, x * 2, x * 3]
        out = []
        for i, e in enumerate(lst):
            out.append(e + i)
            lst.pop()  # Python's iterator sees the shorter list: one item only... and stops
        for e in lst:
            lst[0] = e * 10  # an item stored meanwhile is what the iterator reads
            out.append(e)
        return out, lst
    cf = ember.compile(fn)
    x = torch.ones(2)
    got, want = cf(x), fn(x)
    assert len(got[0]) == len(want[0]) and all(torch.equal(a, b) for a, b in zip(got[0], want[0]))
    assert all(torch.equal(a, b) for a, b in zip(got[1], want[1]))



def test_cell_variable_unbound_at_a_break_raises_unbound_local_error():
    """fuzz 1604:969: a variable a closure captures, read before it is assigned, after a graph
    break: the resume function held it as a free variable, whose unbound read raises NameError
    where the frame raises UnboundLocalError. Such a break now runs the frame as Python."""
    @ember.disable
    def opaque(t):
        return t

    def fn(x):
        opaque(x)
        try:
            return k  # noqa: F821 (assigned below: unbound here)
        except UnboundLocalError as e:
            kind = type(e).__name__
        h = lambda: k  # noqa: E731
        k = 1
        return x + h(), kind

    got, want = ember.compile(fn)(torch.ones(2)), fn(torch.ones(2))
    assert got[1] == want[1] == "UnboundLocalError" and torch.equal(got[0], want[0])


def test_operator_between_a_namedtuple_and_a_user_object():
    """fuzz 1605:430: `pt == obj` with pt a namedtuple (a tuple sym: no object behind it) and obj
    an instance made in the trace read pt's object for its type: a segfault."""
    import collections

    P = collections.namedtuple("P", "a b")

    class V:
        def __eq__(self, o):
            return isinstance(o, V)

    def fn(x, pt):
        v = V()
        return x + 1, pt == v, v == pt, pt != v, pt is v

    pt = P(torch.ones(2), 1)
    assert ember.compile(fn)(torch.ones(2), pt)[1:] == fn(torch.ones(2), pt)[1:]


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_function_with_a_mutable_default_made_in_the_trace_is_one_graph():
    """fuzz 1603:156 (aot_eager): `def h(z, memo=[])` inside the frame broke the graph; a value
    alive at that break became a graph output the loss never used, and AOTAutograd's zero
    gradient for it went through gelu' at a NaN (NaN in the input's gradient). Now the function
    is traced (its defaults are values of the trace), returned with a new list per call, and
    read through its slot when a resume function calls it."""
    from tests.helpers import assert_same, clone_tree

    def fn(y):
        t4 = y + 1
        t7 = torch.nn.functional.gelu(t4)

        def h8(z, memo=[]):
            memo.append(1)
            return z * len(memo)
        a = h8(t4)
        b = h8(t4)
        return (a + b) * 2, h8, t7.grad is None

    def with_break(x):
        def h(z, memo=[]):
            memo.append(1)
            return z * len(memo)
        y = h(x)
        print("break")
        return y + h(x) + h(x), h

    y = torch.tensor([float("nan"), 1.0, 2.0], requires_grad=True)
    for backend in ("eager", "aot_eager"):
        cf = ember.compile(fn, backend=backend, fullgraph=True)
        for _ in range(2):
            ye, yc = clone_tree(y), clone_tree(y)
            (re, he, ge), (rc, hc, gc) = fn(ye), cf(yc)
            re.sum().backward()
            rc.sum().backward()
            assert_same(rc, re)
            assert_same(yc.grad, ye.grad)
            assert gc == ge and hc is not he and hc.__defaults__ == he.__defaults__ == ([1, 1],)
    cb = ember.compile(with_break)
    x = torch.ones(2)
    for _ in range(3):
        (re, he), (rc, hc) = with_break(x), cb(x)
        assert_same(rc, re)
        assert hc.__defaults__ == he.__defaults__ == ([1, 1, 1],)


def test_default_values_of_a_global_function_are_read_through_its_slot():
    """A container or tensor default of a function called in the trace is the function's own
    object (its changes replayed, its contents guarded), not a constant of the trace."""
    from tests.helpers import assert_same

    W = torch.arange(3.0)

    def helper(x, t=[], w=W, *, d={}):
        t.append(1)
        d[len(t)] = x
        return x * len(t) + w

    def fn(x):
        return helper(x) * 2

    cf = ember.compile(fn)
    for i in range(4):
        x = torch.full((3,), float(i))
        got = cf(x)
        n = len(helper.__defaults__[0])
        assert n == i + 1 and helper.__kwdefaults__["d"][n] is x
        assert_same(got, (x * n + W) * 2)


def test_in_place_op_on_a_view_of_a_leaf_that_requires_grad_raises_after_earlier_effects():
    """fuzz 1606:667: `G.append(0); x[0] += 1` on a leaf that requires grad: eager appends, then
    raises. The trace's meta view of the leaf was no view (its metadata inferred in C), so the
    graph raised instead and the append, replayed after the graph, was lost."""
    log = []

    def index_view(x):
        log.append(0)
        x[0] += 1.0
        return x * 2

    def view_method(x):
        log.append(0)
        x.view(-1)[1:].mul_(2)
        return x * 2

    for fn in (index_view, view_method):
        for f in (fn, ember.compile(fn)):
            log.clear()
            x = torch.ones(2, 2, requires_grad=True)
            try:
                f(x)
            except RuntimeError as e:
                assert "view of a leaf Variable" in str(e)
            else:
                raise AssertionError("no error")
            assert log == [0]


def test_in_place_ops_on_views_allowed_by_autograd_stay_in_the_graph():
    """Views of non-leaves, and of leaves under no_grad, take in-place ops: one graph."""
    from tests.helpers import assert_same, clone_tree, counters

    def fn(x, w):
        y = w * 2
        y[0] += 1
        z = w.view(-1)[1:]
        with torch.no_grad():
            z.mul_(1.5)
        return x.t()[0].sum() + y.sum()

    args = (torch.randn(3, 3, requires_grad=True), torch.randn(3, requires_grad=True))
    ea, ca = clone_tree(args), clone_tree(args)
    re, rc = fn(*ea), ember.compile(fn)(*ca)
    re.backward()
    rc.backward()
    assert_same(rc, re)
    for g, e in zip(ca, ea):
        assert_same(g.grad, e.grad)
        assert_same(g, e)
    c = counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_slice_holding_a_tensor_is_no_constant(backend):
    """Dynamo repro test_slicing_dynamic_shape_setitem: `x[(3, slice(t, None))] = 0` with t a
    0-dim tensor; the slice, built in Python at a break, reached the resume function as a
    constant of the graph holding the tensor (guarded by ==; a real tensor in a FakeTensor
    graph made aot_eager fail). A slice or frozenset is a constant only when its parts are."""
    def fn(lengths, out):
        n = lengths[3]
        out[(3, slice(n, None, None))] = 0
        return (out,)

    cf = ember.compile(fn, backend=backend)
    for v in (3, 100, 7):
        x = torch.arange(10)
        x[3] = v
        got, want = cf(x, torch.ones(10, 20))[0], fn(x, torch.ones(10, 20))[0]
        assert torch.equal(got, want)


def test_object_an_effect_consumed_is_alive_where_the_output_names_it_again():
    """The output tree's memo holds what it built: a function made while tracing, the target
    of an attribute store replayed after the graph, is the very object returned (found by
    TorchDynamo's test_nesteduserfunction_setattr: a use after free)."""
    import gc

    def update(y):
        def wrapper():
            return y
        return wrapper

    def fn(t):
        w = update(123)
        w.__wrapped__ = 7
        return t.sin(), w

    cf = ember.compile(fn)
    t = torch.randn(3)
    for _ in range(3):
        y, w = cf(t)
        gc.collect()
        junk = [object() for _ in range(100)]
        del junk
        assert torch.equal(y, t.sin()) and w() == 123 and w.__wrapped__ == 7


def test_a_call_returning_a_value_that_is_no_constant_breaks_cleanly():
    """np.arange(5) evaluated while tracing returns an array: the trace names its type in the
    break reason after it released it (a use after free under ASan, TorchDynamo's
    test_dtypes_no_graphbreaks)."""
    np = pytest.importorskip("numpy")

    def fn(x, dt):
        return x + 1, np.arange(5, dtype=dt)

    cf = ember.compile(fn)
    for dt in (np.int64, np.float32):
        r, a = cf(torch.ones(2), dt)
        assert torch.equal(r, torch.full((2,), 2.0)) and a.dtype == dt and list(a) == [0, 1, 2, 3, 4]
