"""Generators and iterators made while tracing behave as CPython's: type(), isinstance(),
consumption by list/next/for/sum/any/zip (used up after one pass, partial consumption kept),
and the same type when they outlive the trace (returned, or live at a graph break). Type
questions (isinstance with namedtuples, ABCs, legacy tensor types, unions) and the
is_compiling family are answered as in eager code, or the trace aborts. Compared with eager.
"""
import collections
import collections.abc as cabc
import numbers
import types
import typing
import warnings

import pytest
import torch
import torch.nn as nn

import ember
import ember.testing


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def check(f, *args):
    want, got = f(*args), ember.compile(f)(*args)
    assert same(want, got), (want, got)
    return got


m = nn.Linear(3, 3)


def test_module_generators_answer_type_questions_without_being_consumed():
    f = lambda x: (isinstance(m.parameters(), types.GeneratorType), len(list(m.parameters())))
    assert check(f, torch.ones(3)) == (True, 2)

    def g(x):
        ps = m.parameters()
        gen = isinstance(ps, types.GeneratorType)
        t = type(ps) is types.GeneratorType
        ps = list(ps)
        return gen, t, len(ps), x + 1
    check(g, torch.ones(3))


def test_iterator_types():
    def f(x):
        d = {"a": x}
        return (type(iter([x, x])), type(iter((x, 1))), type(iter(d)), type(zip([x], [1])), type(enumerate([x])),
                type(reversed([x])), type(reversed((x,))), type(iter(range(3))), type(x for _ in range(2)),
                isinstance(iter([x]), cabc.Iterator), isinstance(zip([x]), cabc.Iterable), x + 1)
    check(f, torch.ones(2))


def test_iterators_used_up_and_partially_consumed():
    def f(x):
        it = iter([x, x + 1, x + 2, x + 3])
        a = next(it)
        b = [v for v in it]
        c = list(it)
        g = (v * 2 for v in (x, x))
        s = sum(g)
        rest = list(g)
        h = iter([0, 0, 3, 4, 0])
        found = any(h)
        tail = list(h)
        z = zip(iter([1, 2, 3]), iter([4, 5, 6]))
        first = next(z)
        return a, b, c, s, rest, found, tail, first, list(z)
    check(f, torch.ones(2))


@pytest.mark.parametrize("kind", ["list", "tuple", "gen", "zip", "enumerate", "dict", "reversed", "range"])
def test_iterator_outlives_the_trace(kind):
    def f(x):
        it = {"list": lambda: iter([x, x + 1, x + 2]), "tuple": lambda: iter((x, x + 1, x + 2)),
              "gen": lambda: (v for v in (x, x + 1, x + 2)), "zip": lambda: zip([x, x], [1, 2]),
              "enumerate": lambda: enumerate([x, x + 1], 5), "dict": lambda: iter({"a": x, "b": 2}),
              "reversed": lambda: reversed([x, x + 1]), "range": lambda: iter(range(2, 9, 3))}[kind]()
        first = next(it)
        return first, it
    x = torch.ones(2)
    want, got = f(x), ember.compile(f)(x)
    assert same(want[0], got[0]) and type(want[1]) is type(got[1])
    assert same(list(want[1]), list(got[1])) and list(got[1]) == []


def test_iterator_live_at_a_graph_break():
    def f(x):
        it = iter([x, x + 1, x + 2])
        first = next(it)
        print("break")
        return first, type(it), list(it), list(it)
    check(f, torch.ones(2))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_clip_grad_norm_in_a_compiled_training_step(backend):
    def run(compiled):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)

        def step(x, y):
            loss = ((net(x) - y) ** 2).sum() * 100
            loss.backward()
            return loss, torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        f = ember.compile(step, backend=backend) if compiled else step
        x, y = torch.randn(5, 3), torch.randn(5, 2)
        out = []
        for _ in range(3):
            opt.zero_grad()
            loss, norm = f(x, y)
            opt.step()
            out.append((loss.detach(), norm.detach()))
        return out
    want, got = run(False), run(True)
    for (l0, n0), (l1, n1) in zip(want, got):
        assert torch.allclose(l0, l1) and torch.allclose(n0, n1) and n1 > 0


P = collections.namedtuple("P", "a b")


class Q(typing.NamedTuple):
    a: torch.Tensor
    b: int


@typing.runtime_checkable
class HasA(typing.Protocol):
    a: int


def test_isinstance_questions():
    def f(x, p, q):
        made = P(x, 1)
        return (isinstance(p, P), isinstance(q, Q), isinstance(p, tuple), isinstance(made, P),
                isinstance(made, (int, P)), isinstance(q, int | Q), isinstance(p, cabc.Sequence),
                isinstance([x], cabc.MutableSequence), isinstance({}, cabc.Mapping), isinstance(3, numbers.Integral),
                isinstance(x, torch.FloatTensor), isinstance(x, torch.DoubleTensor), isinstance(x, torch.LongTensor),
                isinstance(x, torch.cuda.FloatTensor), isinstance(x, (torch.LongTensor, torch.FloatTensor)),
                isinstance(x.long(), torch.LongTensor), isinstance(x, torch.Tensor), x + 1)
    check(f, torch.ones(2), P(torch.ones(1), 2), Q(torch.ones(1), 3))
    check(f, torch.ones(2, dtype=torch.float64), P(torch.ones(1), 2), Q(torch.ones(1), 3))


def test_isinstance_protocol_is_right_or_aborts():
    class A:
        def __init__(self):
            self.a = 1
    check(lambda x: (isinstance(A(), HasA), x + 1), torch.ones(1))


def test_is_compiling_family():
    import torch._dynamo.external_utils as eu

    def f(x):
        return (torch._utils.is_compiling(), torch.compiler.is_compiling(), torch._dynamo.is_compiling(),
                eu.is_compiling(), x + 1)
    got = ember.compile(f)(torch.ones(1))
    assert got[:4] == (True, True, True, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch._utils.is_compiling is deprecated
        assert f(torch.ones(1))[:4] == (False, False, False, False)
    assert not torch.compiler.is_compiling()


def test_module_generator_live_at_a_graph_break():
    def f(x):
        ps = m.parameters()
        first = next(ps)
        print("break")
        return first * 1, type(ps), [p * 1 for p in ps], list(ps), x + 1
    check(f, torch.ones(3))


def test_dict_views_keep_their_type():
    d = {"a": 1, "b": 2}

    def f(x):
        k = d.keys()
        print("break")
        return x + 1, k, type(d.values()), len(d.items()), "a" in k, d.keys() - {"a"}
    check(f, torch.ones(2))
    check(lambda x: (type({"a": x}.items()), list({"a": x}.values())[0] + 1), torch.ones(2))


def test_torch_cond_with_a_constant_predicate_is_traced():
    f = lambda x: torch.cond(x.shape[0] > 1, lambda: x + 1, lambda: x - 1)
    g = lambda x: torch.cond(False, lambda y: y + 1, lambda y: y - 1, (x,))
    for fn in (f, g):
        ember.reset()
        ember.testing.reset_counters()
        check(fn, torch.ones(2))
        c = ember.testing.counters()
        assert (c["frames"], c["aborts"], c["fallbacks"]) == (1, 0, 0), c


def test_zip_and_enumerate_over_iterators_take_items_lazily():
    def f(x):
        it = iter([x, x + 1, x + 2, x + 3])
        e = enumerate(it)
        first = next(e)
        rest = list(it)  # Python: enumerate took one item only
        g = (v for v in (x, x * 2, x * 3, x * 4, x * 5))
        pairs = list(zip(g, g))  # the same iterator twice: items taken in turn
        a = iter([1, 2, 3])
        z = list(zip(a, [10]))
        left = list(a)  # zip took 1 and 2 (it stops when [10] ends after taking 2 from a)
        return first, rest, pairs, z, left
    check(f, torch.ones(2))

    def g(x):
        total = x * 0
        for i, v in enumerate(iter([x, x + 1])):
            total = total + v * i
        return total
    check(g, torch.ones(2))


def _drain(r):
    if isinstance(r, (map, filter)):
        return (type(r).__name__, [_drain(v) for v in r])
    if isinstance(r, tuple):
        return tuple(_drain(v) for v in r)
    return r


def map_returned(a, b):
    return map(lambda x: x.sum(), [a, b])


def map_partly_taken(a, b):
    m = map(lambda x, y: x * y, [a, b, a], (1, 2, 3))
    first = next(m)
    return first, m


def filters_returned(a, b):
    return filter(lambda t: t.dim() == 1, [a, b.view(2, 2), b]), filter(None, [0, 1, 2]), map(str, [1, 2])


def map_across_a_break(a, b):
    calls = []
    m = map(lambda x: calls.append(1) or x + 1, [a, b])
    print("brk")
    return list(m), len(calls)


@pytest.mark.parametrize("f", [map_returned, map_partly_taken, filters_returned, map_across_a_break])
def test_map_and_filter_leave_the_trace_lazy(f, capsys):
    def kinds(r):
        return tuple(kinds(v) for v in r) if isinstance(r, tuple) else type(r)
    a, b = torch.ones(4), torch.arange(4.0)
    raw = f(a, b)
    want_kinds, want = kinds(raw), _drain(raw)
    got = ember.compile(f)(a, b)
    assert kinds(got) == want_kinds  # a map is returned as a map, made lazily after the graph
    assert same(want, _drain(got))
    assert ember.testing.counters()["aborts"] == 0


def views_returned(x):
    d = {"a": x, "b": x * 2}
    return d.keys(), d.values(), d.items(), d


def view_of_a_frame_dict(x, d):
    d["z"] = x
    return d.keys()


def view_across_a_break(x):
    d = {"a": 1}
    k = d.keys()
    print("brk")
    d["b"] = 2
    return list(k)


def test_dict_views_leave_the_trace_as_views_of_their_dict(capsys):
    x = torch.ones(2)
    ks, vs, its, d = ember.compile(views_returned)(x)
    assert type(ks) is type({}.keys()) and type(vs) is type({}.values()) and type(its) is type({}.items())
    d["c"] = 3  # live views of the dict returned with them
    assert list(ks) == ["a", "b", "c"] and len(vs) == 3 and ("c", 3) in its
    frame_d = {"q": 1}
    k = ember.compile(view_of_a_frame_dict)(x, frame_d)
    frame_d["later"] = 0
    assert list(k) == ["q", "z", "later"]
    assert ember.compile(view_across_a_break)(x) == ["a", "b"]
    assert ember.testing.counters()["aborts"] == 0


class _Counter:
    """A user iterator: its own __iter__ and __next__, state in attributes."""

    def __init__(self, n):
        self.i = 0
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class _Box:
    def __init__(self, xs):
        self.xs = xs

    def __iter__(self):
        return _Counter(len(self.xs))


def _loop_changing_its_iterator(x, it):
    for v in it:
        x = x + v
        it.i += 10  # Python takes the next item after this: the loop ends after one
    return x, it.i


def _user_iterables_consumed(x, box):
    return x * sum([v for v in box]), list(_Counter(2)), tuple(box), 3 in _Counter(5), sorted(_Counter(3))


def _membership_stops_early(x):
    it = _Counter(5)
    return x + 1, 2 in it, it.i


@pytest.mark.parametrize("fn,make", [
    (_loop_changing_its_iterator, lambda: (torch.ones(2), _Counter(5))),
    (_user_iterables_consumed, lambda: (torch.ones(2), _Box([1, 2, 3]))),
    (_membership_stops_early, lambda: (torch.ones(2),)),
])
def test_user_iterators_are_stepped_item_by_item(fn, make):
    """An object whose __iter__ returns an object with a Python __next__ is stepped one item per
    loop iteration (interleaved with the body, as Python does); `in` without __contains__
    iterates until it finds the key. One graph, eager's values and iterator state."""
    want = fn(*make())
    got = ember.compile(fn, fullgraph=True)(*make())
    assert same(got, want), (got, want)


class _Plain:
    pass


def _in_a_plain_object(x):
    try:
        r = 1 in _Plain()
    except TypeError as e:
        r = str(e)
    return x + 1, r


def test_in_on_an_object_that_is_not_iterable_raises_pythons_typeerror():
    want = _in_a_plain_object(torch.ones(2))
    got = ember.compile(_in_a_plain_object, fullgraph=True)(torch.ones(2))
    assert same(got, want), (got, want)


def test_list_iterators_read_the_list_as_it_is_at_each_step():
    """iter(l) and enumerate(l) of a list the loop changes read it by index at each step, as
    CPython's (they aborted on any change: `for i, t in enumerate(l): l[i] = t * x`); once at
    their end they stay there."""
    from tests.helpers import exact_graph, randn

    def stores(a, b, c, x):
        l = [a, b, c]
        for i, t in enumerate(l):
            l[i] = t * x
        return l

    def grows_and_shrinks(x):
        l = [x, x + 1, x + 2]
        out = []
        for t in l:
            out.append(t)
            if len(l) < 5:
                l.append(t * 10)
        m = [x, x + 1, x + 2]
        for i, t in enumerate(m, 3):
            if i == 3:
                m.pop()
            m[0] = t + i
        return out, l, m

    def exhausted(x):
        l = [x]
        it = iter(l)
        a = next(it)
        b = next(it, None)
        l.append(x + 5)
        return a, b, list(it), l

    for f, args in ((stores, (randn(2), randn(2, seed=1), randn(2, seed=2), randn(2, seed=3))),
                    (grows_and_shrinks, (randn(2),)), (exhausted, (randn(2),))):
        ember.reset()
        ember.testing.reset_counters()
        exact_graph(f, *args)


def test_zip_of_lists_reads_the_lists_as_they_are_at_each_step():
    """zip() of lists the loop changes takes each list's item by index at each step, as CPython's
    (appends extend it up to the shortest list, pops end it early); zip(strict=True) over them
    raises CPython's ValueError at the end."""
    from tests.helpers import exact_graph, randn

    def grows(x):
        a, b = [x, x + 1, x + 2], [1, 2, 3, 4]
        out = []
        for t, c in zip(a, b):
            out.append(t * c)
            if len(a) < 5:
                a.append(t + 10)
        return out

    def shrinks(x):
        a, b = [x, x + 1, x + 2], [1, 2, 3]
        out = []
        for t, c in zip(a, b):
            out.append(t * c)
            b.pop()
        return out

    def strict(x):
        a, b = [x, x + 1], [1, 2]
        out = []
        try:
            for t, c in zip(a, b, strict=True):
                out.append(t * c)
                a.append(x)
        except ValueError as e:
            out.append(str(e))
        return out

    def stores(x, a):
        for i, (t, c) in enumerate(zip(a, [1, 2, 3])):
            a[i] = t * c
        return a

    for f, args in ((grows, (randn(2),)), (shrinks, (randn(2),)), (strict, (randn(2),)),
                    (stores, (randn(2), [randn(2), randn(2, seed=1), randn(2, seed=2)]))):
        ember.reset()
        ember.testing.reset_counters()
        if f is stores:  # the list argument is changed: a fresh one per call
            want = f(args[0], list(args[1]))
            cf = ember.compile(f, fullgraph=True)
            for _ in range(2):
                assert same(cf(args[0], list(args[1])), want)
            continue
        exact_graph(f, *args)


def test_lazy_zip_left_partly_consumed_is_returned_over_its_sources():
    # a zip over a lazy map leaves the trace as zip(*sources) where the trace left them, so
    # Python makes the rest of its items lazily (it aborted: "a lazy iterator (zip) left the trace")
    def whole(a):
        return zip([1, 2, 3], map(lambda x: x + 1, [1, 2, 3])), a + 1

    def started(a):
        z = zip([a, a * 2, a * 3], map(lambda x: x + 1, [1, 2, 3]))
        first = next(z)
        return z, first

    for f in (whole, started):
        x = torch.ones(2)
        got, want = ember.compile(f, fullgraph=True)(x), f(x)
        assert type(got[0]) is zip
        assert same(list(got[0]), list(want[0])) and same(got[1], want[1])


def _loop_over_passed_iterator(x, it):
    y = x + 1
    for t in it:
        y = y + t
    return y * 2


def _next_then_loop(x, it):
    y = x * next(it)
    for i, t in enumerate(it):
        y = y + t * i
        if i == 1:
            break
    return y, list(it)


def _gen(x):
    yield x
    yield x * 2
    yield x * 3


@pytest.mark.parametrize("fn", [_loop_over_passed_iterator, _next_then_loop])
@pytest.mark.parametrize("make", ["list_iterator", "generator", "map"])
def test_iterator_passed_in_is_iterated_by_python_around_compiled_code(fn, make):
    # a for loop over a builtin iterator argument ran the whole frame as plain Python
    # ("__iter__ of a list_iterator"): iter(it) is it, the loop runs as Python, the code around
    # it is compiled, and the iterator is left where eager leaves it
    x = torch.randn(3)

    def mk():
        if make == "list_iterator":
            return iter([x, x + 1, x + 2, x + 3])
        if make == "generator":
            return _gen(x)
        return map(torch.neg, [x, x + 1, x + 2])

    it1, it2 = mk(), mk()
    want, got = fn(x, it1), ember.compile(fn)(x, it2)
    assert same(got, want) and same(list(it2), list(it1))
    c = ember.testing.counters()
    assert c["frames"] >= 1 and c["aborts"] == 0, c


def _take_two(x, it):
    a = next(it)
    b = next(it, None)
    return x * a if b is None else x * a + b


def _take_all(x, it):
    for v in it:
        x = x + v
    return x, next(it, "end")


def _take_around_a_break(x, it):
    a = next(it)
    print("break")  # a graph break between two next() calls
    return x + a + next(it)


def _take_and_grow(x, it, l):
    a = next(it)
    l.append(x)  # the list the iterator reads, changed after the item was taken
    return a + 1, next(it, None)


def _grow_then_take(x, it, l):
    l.append(x * 5)  # changed before: next() must see the new item
    return [next(it), next(it, None)]


@pytest.mark.parametrize("fn", [_take_two, _take_all, _take_around_a_break])
@pytest.mark.parametrize("make", ["list", "tuple", "range", "exhausted", "advanced"])
def test_next_of_an_iterator_passed_in_takes_from_it(fn, make, capsys):
    # next() of a list, tuple or range iterator passed in was a graph break: its items are now
    # read by the guard without advancing it, and the real iterator is advanced after the graph
    x = torch.randn(3)

    def mk():
        if make == "list":
            return iter([x + 1, x + 2, x + 3])
        if make == "tuple":
            return iter((x + 1, 2.5))
        if make == "range":
            return iter(range(2, 9, 3))
        it = iter([x, x + 1, x + 2])
        for _ in range(3 if make == "exhausted" else 1):
            next(it)
        return it

    it1, it2 = mk(), mk()
    raised = False
    try:
        want = fn(x, it1)
    except StopIteration:
        raised = True  # the trace ends at the raise, which runs as Python
        with pytest.raises(StopIteration):
            ember.compile(fn)(x, it2)
    else:
        assert same(ember.compile(fn)(x, it2), want)
    assert same(list(it2), list(it1))
    c = ember.testing.counters()
    assert c["aborts"] == 0 and c["breaks"] == (fn is _take_around_a_break or raised), c


@pytest.mark.parametrize("fn", [_take_and_grow, _grow_then_take])
def test_next_of_an_iterator_over_a_list_the_trace_changes(fn):
    x = torch.randn(2)
    l1, l2 = [x, x + 1], [x, x + 1]
    it1, it2 = iter(l1), iter(l2)
    assert same(ember.compile(fn)(x, it2, l2), fn(x, it1, l1))
    assert same(l2, l1) and same(list(it2), list(it1))
    # taken to its end, an iterator stays there when its list grows afterwards
    l2.append(x)
    l1.append(x)
    assert same(list(it2), list(it1))


def test_next_of_a_data_iterator_compiles_once():
    def step(w, data):
        return w @ next(data)

    batches = [torch.randn(3, 2) for _ in range(12)]
    it1, it2 = iter(batches), iter(batches)
    w = torch.randn(4, 3)
    cf = ember.compile(step)
    for _ in range(10):
        assert same(cf(w, it2), step(w, it1))
    assert same(list(it2), list(it1))
    assert ember.testing.code_state(step)["compiles"] == 1


def test_next_of_a_range_iterator_becomes_symbolic():
    def add_next(x, it):
        return x + next(it)

    cf = ember.compile(add_next, fullgraph=True)
    it = iter(range(100))
    for i in range(10):
        assert same(cf(torch.zeros(2), it), torch.full((2,), float(i)))
    assert next(it) == 10
    assert ember.testing.code_state(add_next)["compiles"] <= 3


TAPE = []


def test_reversed_list_read_as_it_goes():  # a tape appended to while it is walked backwards
    def f(x):
        TAPE.clear()
        TAPE.extend([x, x + 1, x + 2])
        out = []
        for v in reversed(TAPE):
            if len(TAPE) < 5:
                TAPE.append(v * 2)  # past the iterator's index: not seen
            out.append(v + 1)
        return out, len(TAPE)

    want = f(torch.ones(2))
    ember.testing.reset_counters()
    got = ember.compile(f, fullgraph=True)(torch.ones(2))
    assert same(got, want)


@pytest.mark.parametrize("case", ["append_then_pop", "shrunk_past_it"])
def test_reversed_iterator_live_at_a_break_after_changes(case):
    def append_then_pop(x):
        l = [x, x + 1, x + 2]
        it = reversed(l)
        a = next(it)
        l.append(x * 10)
        print("break")  # noqa: T201
        b = next(it)
        l.pop(0)
        l.pop(0)
        return a, b, list(it)

    def shrunk_past_it(x):
        l = [x, x + 1, x + 2]
        it = reversed(l)
        a = next(it)
        l.pop()
        l.pop()
        print("break")  # noqa: T201
        return a, list(it)

    fn = {"append_then_pop": append_then_pop, "shrunk_past_it": shrunk_past_it}[case]
    assert same(ember.compile(fn)(torch.ones(2)), fn(torch.ones(2)))


def test_iterator_over_an_iterator_of_a_changed_list():  # was a wrong result: enumerate's items taken at once
    def f(x, l):
        out = []
        for i, v in enumerate(reversed(l)):
            if i < 2:
                l.append(v * 2)
            if i == 1:
                l.pop(0)
            out.append(v + x)
        return out, len(l)

    def args():
        return torch.ones(2), [torch.zeros(2), torch.ones(2) * 3, torch.ones(2) * 5]

    assert same(ember.compile(f)(*args()), f(*args()))
