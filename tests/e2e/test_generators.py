"""Generators and the lazy builtins ([coverage]): a generator made while tracing runs its body
when an item is taken, interleaved with its consumer as in Python (em_lazy.c); map(), filter(),
itertools.count() and zip()/enumerate() over such iterators take items one at a time. Each case
is one graph (fullgraph=True) whose results equal eager's exactly; what cannot be a graph runs as
Python with the same result."""

import itertools

import torch

import ember
import ember.testing
from tests.helpers import assert_same, counters, randn
from tests.helpers import exact_graph as one_graph


def test_generator_reads_state_changed_after_it_was_made():
    def f(x):
        ks = [1]
        g = (x * ks[0] for _ in range(2))
        ks[0] = 3  # the body runs when list() takes the items: it sees 3
        return list(g)

    one_graph(f, randn(3))


def test_generator_closure_reassigned_after_it_was_made_runs_as_python():
    def f(x):
        k = 1
        g = (x * k for _ in range(2))
        k = 2
        return list(g)

    x = randn(3)
    assert_same(ember.compile(f)(x), f(x))


def test_generator_interleaves_with_its_consumer():
    def f(x):
        log = []
        y = x.clone()

        def g():
            for i in range(3):
                log.append(i)
                y.add_(1)
                yield x * i

        out = []
        for t in g():
            out.append(t + len(log) + y)
        return out, log

    one_graph(f, randn(3))


def test_generator_send_and_next_with_default():
    def f(x):
        def g():
            v = yield 1
            w = yield v * 2
            yield w + 1

        it = g()
        a = next(it)
        b = it.send(3)
        c = it.send(10)
        return x * (a + b + c), next(it, "end"), list(it)

    one_graph(f, randn(3))


def test_send_non_none_to_a_fresh_generator_raises_as_python():
    def f(x):
        def g():
            yield 1

        try:
            g().send(2)
        except TypeError:
            return x + 1
        return x

    one_graph(f, randn(3))


def test_yield_from_passes_values_and_the_return_value():
    def f(x):
        def inner():
            got = yield x
            yield x + got
            return 5

        def outer():
            r = yield from inner()
            yield x * r
            yield from [x - 1, x - 2]

        it = outer()
        first = next(it)
        return first, it.send(2), list(it)

    one_graph(f, randn(3))


def test_infinite_generator_and_itertools_count():
    def f(x):
        def nat():
            i = 0
            while True:
                yield i
                i += 1

        out = x
        for v in nat():
            if v > 3:
                break
            out = out + v
        return out, [t * i for i, t in zip(itertools.count(1, 2), [x, x + 1])]

    one_graph(f, randn(3))


def test_stop_iteration_inside_a_generator_is_a_runtime_error():
    def f(x):
        def g():
            yield 1
            next(iter([]))  # PEP 479

        try:
            list(g())
        except RuntimeError:
            return x + 1
        return x

    one_graph(f, randn(3))


def test_generator_throw_and_close():
    def f(x):
        def g():
            try:
                yield 1
                yield 2
            except ValueError:
                yield 7

        it = g()
        a = next(it)
        b = it.throw(ValueError)
        it2 = g()
        next(it2)
        it2.close()
        return x * (a + b), list(it2), list(it)

    one_graph(f, randn(3))


def test_any_stops_at_the_deciding_item():
    def f(x):
        seen = []

        def g():
            for i in range(5):
                seen.append(i)
                yield i > 1

        return x * len(seen), any(g()), len(seen), all(v < 3 for v in [1, 5, 2]), seen

    one_graph(f, randn(3))


def test_map_and_filter_call_their_function_when_items_are_taken():
    def f(x):
        k = [1]
        m = map(lambda t: t * k[0], [x, x + 1])
        k[0] = 5
        ys = list(m)
        zs = list(filter(lambda v: v > 1, [0, 1, 2, 3]))
        ws = list(map(lambda a, b: a + b, [x, x], (1, 2, 3)))  # the shortest ends it
        nz = list(filter(None, [0, 1, 2, None, "", "a"]))
        return ys, sum(zs), ws, nz, list(map(str, range(3)))

    one_graph(f, randn(3))


def test_zip_and_enumerate_over_generators():
    def f(x):
        def g():
            for i in range(3):
                yield x * i

        pairs = [a + b for a, b in zip(g(), [x, x, x, x])]
        return pairs, list(enumerate(g(), 1)), list(zip(g(), map(lambda t: t + 1, [x])))

    one_graph(f, randn(3))


def test_generator_consumed_by_an_inlined_function_and_builtins():
    def total(it):
        s = 0
        for v in it:
            s = s + v
        return s

    def f(x):
        return (
            total(t * 2 for t in [x, x]),
            sum(x * i for i in range(4)),
            tuple(x + i for i in range(2)),
            max(i * 2 for i in range(3)),
            sorted((3 - i for i in range(3)), key=lambda v: v),
        )

    one_graph(f, randn(3))


def test_generator_not_started_leaves_the_trace_made_by_its_call_again():
    """A generator returned (or alive at a break) before it ran: its call made again per call,
    after the graph, so it runs lazily as eager's does; the closure's cells are the frame's."""

    def genexpr(x):
        ys = [x, x + 1]
        return (y * 2 for y in ys), ys

    def gen_fn(x):
        def g(k, *, scale=1):
            yield x * k * scale
            yield x + k

        return g(2, scale=3)

    x = randn(3)
    for f in (genexpr, gen_fn):
        cf = ember.compile(f, fullgraph=True)
        for _ in range(2):
            got, want = cf(x), f(x)
            if f is genexpr:
                got[1].append(x * 10)  # the generator reads the list lazily, as eager's
                want[1].append(x * 10)
                got, want = got[0], want[0]
            assert_same(list(got), list(want))
    c = counters()
    assert c["aborts"] == 0 and c["frames"] == 2 and c["hits"] == 2


def _sub(x):
    yield x + 1
    yield x + 2


def _outer(x):
    yield from _sub(x)
    yield x + 3


def test_started_generator_leaves_the_trace_suspended_where_it_was():
    """A generator the trace advanced leaves it as a generator suspended at that yield (OUT_GEN:
    its frame made again from a resume code), which goes on as the original would: next, send,
    throw and close, a `yield from` delegating to an inner one, a finally clause, a cell a
    returned closure shares. One graph per function, no break."""
    log = []

    def counted(x):
        k = 0

        def gen():
            nonlocal k
            try:
                while k < 4:
                    k += 1
                    got = yield x * k
                    if got is not None:
                        k = got
            finally:
                log.append("finally")
            return "ret"

        g = gen()
        next(g)
        return g, (lambda: k)

    def advanced(x):
        g = _outer(x)
        next(g)
        return g

    def genexpr(x, xs):
        g = (x * v for v in xs)
        next(g)
        return g

    def ended(x):
        g = _sub(x)
        return g, list(g), x.sin()

    x = randn(3)
    for compiled in (False, True):
        run = (lambda f: ember.compile(f, fullgraph=True)) if compiled else (lambda f: f)
        del log[:]
        g, k = run(counted)(x)
        a = [next(g), k(), g.send(0), k(), list(g), k()]
        g2, _ = run(counted)(x)
        g2.close()
        g3, _ = run(counted)(x)
        try:
            g3.throw(KeyError("k"))
        except KeyError as e:
            a.append(repr(e))
        xs = [1, 2]
        g4 = run(genexpr)(x, xs)
        xs.append(5)  # the generator reads the list lazily, as eager's
        a += [list(run(advanced)(x)), list(g4), list(log)]
        g5, items, _ = run(ended)(x)
        a += [items, list(g5), next(g5, "end")]
        if compiled:
            got = a
        else:
            want = a
    assert_same(got, want)
    c = counters()
    assert c["aborts"] == 0 and c["breaks"] == 0 and c["frames"] == 4, c


def test_started_generator_reads_what_the_caller_changes_later():
    """The generator made again holds the frame's tensors themselves: an in-place change the
    caller makes after the call is what its later items read (not values computed in the trace)."""
    def f(x):
        def g():
            x.add_(1)
            yield x.clone()
            yield x * 2

        gen = g()
        next(gen)
        return gen

    x1, x2 = torch.ones(2), torch.ones(2)
    got = ember.compile(f, fullgraph=True)(x1)
    want = f(x2)
    x1.mul_(10)
    x2.mul_(10)
    assert_same(list(got), list(want))
    assert_same(x1, x2)


def test_started_generator_alive_at_a_break():
    """A generator alive at a graph break is handed to the resume function as a suspended
    generator: the code on both sides of the break is compiled."""
    def f(x):
        g = _sub(x)
        a = next(g)
        print("", end="")  # a break
        return a, g, x.cos()

    x = randn(3)
    got, want = ember.compile(f)(x), f(x)
    assert_same((got[0], list(got[1]), got[2]), (want[0], list(want[1]), want[2]))
    c = counters()
    assert c["aborts"] == 0 and c["breaks"] == 1, c


def test_generator_suspended_in_an_except_clause_runs_as_python():
    """Suspended inside an except clause, a generator holds the exception it handles, which a
    generator made again would not: it is not made again (correct results, run as Python)."""
    import sys

    def gen(x):
        try:
            raise ValueError("v")
        except ValueError:
            yield x
            yield sys.exc_info()[0]

    def f(x):
        g = gen(x)
        next(g)
        return g

    x = randn(3)
    assert list(ember.compile(f)(x)) == list(f(x)) == [ValueError]


def test_islice_chain_and_starmap_over_lazy_iterators():
    import operator

    def f(x):
        def gen():
            i = 0
            while True:
                yield x * i
                i += 1

        a = list(itertools.islice(itertools.count(), 3))
        b = list(itertools.islice(gen(), 1, 7, 2))
        c = list(itertools.chain((i for i in range(2)), [x], itertools.islice(itertools.count(5), 2)))
        g = gen()
        d = list(itertools.islice(g, 2)), next(g)  # islice took exactly two
        e = list(itertools.islice(gen(), 0))
        s = list(itertools.starmap(operator.mul, [(1, 2), (x, 4)]))
        return a, b, c, d, e, list(itertools.islice(gen(), 3, 4)), s

    one_graph(f, randn(3))


def test_set_methods_stop_at_the_deciding_item_of_a_generator():
    """set.isdisjoint / issuperset take a generator's items one at a time and stop at the first
    that decides: the generator's later code does not run (it ran to its end: a wrong branch)."""
    def run(compiled):
        n = [0]

        def gen():
            for i in (1, 2, 3):
                n[0] += i
                yield i

        def f(x):
            a = {2, 4, 5}.isdisjoint(gen())
            b = {1, 3}.issuperset(gen())
            c = {1, 2, 3}.issuperset(gen())
            return (x.sin() if n[0] == 12 else x.cos()), a, b, c, n[0]

        return (ember.compile(f, fullgraph=True) if compiled else f)(torch.ones(2))

    got, want = run(True), run(False)
    assert want[1:] == (False, False, True, 12)
    assert got[1:] == want[1:] and torch.equal(got[0], want[0])


def _reset():
    ember.reset()
    ember.testing.reset_counters()


def test_extending_a_container_takes_a_lazy_iterators_items_one_at_a_time():
    """CPython's extend/update loops add each item before taking the next: a map's function or
    a generator that reads the container sees it grow."""
    import collections

    def lst(a):
        y = [1]
        y.extend(map(lambda z: z + y[-1], range(3)))
        y += (z + y[-1] for z in range(2))
        return a + 1, y

    def deq(a):
        y = collections.deque([1])
        y.extendleft(map(lambda z: z + y[0], range(3)))
        b = collections.deque([1], maxlen=2)
        b.extend(map(lambda z: z + b[0], range(3)))
        return a + 1, y, b

    def sets(a):
        s = {0}
        s.update(len(s) + i for i in range(3))
        s.difference_update(x for x in range(9) if len(s) > 3)
        return a + 1, sorted(s)

    def dicts(a):
        d = {"x": 0}
        d.update((str(i), len(d)) for i in range(3))
        d.update(((str(i), len(d)) for i in range(5, 6)), k=len(d))
        return a + 1, d

    for f in (lst, deq, sets, dicts):
        _reset()
        one_graph(f, randn(2))


_FIN = []


def _fin_gen(t):
    try:
        yield t
        yield t
    finally:
        _FIN.append("fin")


def test_a_suspended_generator_is_closed_when_its_last_reference_goes():
    """CPython closes a generator when nothing refers to it any more (its finally clause runs
    then): at the frame's return, after the call that took a temporary one, when its variable is
    rebound, when the helper frame holding it returns."""
    def at_return(t):
        gen = _fin_gen(t)
        next(gen)
        return t + 1

    def temporary(t):
        v = next(_fin_gen(t))
        _FIN.append("after")
        return v + 1

    def helper(t):
        g = _fin_gen(t)
        return next(g) * 2

    def in_helper(t):
        r = helper(t)
        _FIN.append("after")
        return r

    def rebound(t):
        g = _fin_gen(t)
        next(g)
        g = None
        _FIN.append("after")
        h = _fin_gen(t)
        next(h)
        kept = [h]
        del h
        _FIN.append("kept")
        return t + 1, len(kept)

    class Holder:
        pass

    holder = Holder()

    def stored(t):  # held by an attribute store across a long stretch, then dropped
        g = _fin_gen(t)
        next(g)
        holder.g = g
        del g
        for _ in range(50):
            t = t + 1
        holder.g = None
        _FIN.append("after")
        return t

    for f in (at_return, temporary, in_helper, rebound, stored):
        _FIN.clear()
        want = f(randn(2))
        want_log = list(_FIN)
        _FIN.clear()
        _reset()
        got = ember.compile(f, fullgraph=True)(randn(2))
        assert_same(got, want)
        assert _FIN == want_log, (f.__name__, _FIN, want_log)
        c = counters()
        assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c


def test_throw_into_a_generator_that_returns_raises_stop_iteration_with_its_value():
    def whoo():
        try:
            yield 1
        except ValueError:
            return 2  # noqa: B901
        finally:
            return 3  # noqa: B012, SIM107, B901

    def f(t):
        gen = whoo()
        next(gen)
        try:
            gen.throw(ValueError)
        except StopIteration as e:
            return t + e.args[0], e.value

    one_graph(f, randn(2))


def test_in_takes_an_iterators_items_up_to_the_one_found():
    def f(x):
        log = []

        def g():
            for i in range(5):
                log.append(i)
                yield i

        it = g()
        a = 2 in it
        b = list(it)
        return x + 1, a, b, 9 in iter([1, 2]), 1 in map(lambda v: v - 1, [3, 2, 1]), log

    one_graph(f, randn(2))


_YF = []


def _yf_inner():
    try:
        yield 1
        yield 2
    except ValueError:
        _YF.append("inner caught")
        yield 10
    finally:
        _YF.append("inner fin")
    return 7


def _yf_outer():
    try:
        r = yield from _yf_inner()
        _YF.append(("got", r))
        yield r
    except KeyError:
        _YF.append("outer caught")
        yield 99
    finally:
        _YF.append("outer fin")


def _yf_plain():
    r = yield from [1, 2]
    return r


def test_throw_and_close_into_a_generator_delegating_with_yield_from():
    """As CPython's _gen_throw: the inner generator gets the exception first (its return value
    ends the yield from, its exception goes on in the outer one); close() closes the inner one,
    then the outer; a plain iterator has no throw(): the outer one gets it."""
    def caught_inside(x):
        g = _yf_outer()
        a = next(g)
        b = g.throw(ValueError)
        c = next(g)
        return x + a + b + c, list(_YF)

    def caught_outside(x):
        g = _yf_outer()
        a = next(g)
        return x + a + g.throw(KeyError), list(_YF)

    def closed(x):
        g = _yf_outer()
        next(g)
        g.close()
        return x + 1, list(_YF)

    def plain(x):
        g = _yf_plain()
        next(g)
        try:
            g.throw(ValueError("v"))
        except ValueError as e:
            return x + 1, str(e)

    for f in (caught_inside, caught_outside, closed, plain):
        _YF.clear()
        want = f(randn(2))
        _YF.clear()
        _reset()
        got = ember.compile(f, fullgraph=True)(randn(2))
        assert_same(got, want)
        assert counters()["frames"] == 1


def test_close_of_a_generator_that_yields_raises_runtime_error():
    def g():
        try:
            yield 1
        except GeneratorExit:
            yield 2
        yield 3

    def f(x):
        it = g()
        next(it)
        try:
            it.close()
        except RuntimeError as e:
            m = str(e)
        return x + next(it), m

    one_graph(f, randn(2))
