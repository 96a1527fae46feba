"""`with` blocks of objects other than torch's state contexts (contextlib.nullcontext, a user's
class with __enter__/__exit__): __enter__ and __exit__ are traced as calls, so a block whose
methods only touch Python state stays in one graph. An exception the trace raises inside the
block goes to __exit__ (traced, given the exception and a traceback the trace does not have), which
may suppress it; one it does not suppress travels on to a handler or out of the frame (which then
runs the raise as Python). A graph break inside the block hands the object's bound __exit__ to
the resume function, which calls it where the block ends: __exit__ runs exactly as in eager."""
import contextlib

import pytest
import torch

import ember
from tests.helpers import assert_same, counters, exact_graph, one_graph, randn


def maybe_autocast(device_type, enabled):
    """transformers' pattern: autocast only where it does something, else a nullcontext."""
    if torch.is_autocast_enabled(device_type) or enabled:
        return torch.autocast(device_type, enabled=enabled)
    return contextlib.nullcontext()


class Counting:
    """A context manager that counts its entries and exits and hands out itself."""

    def __init__(self):
        self.entered = self.exited = 0
        self.last_exc = "unset"

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, typ, val, tb):
        self.exited += 1
        self.last_exc = typ
        return False


class Swallowing:
    def __enter__(self):
        return 3

    def __exit__(self, typ, val, tb):
        return True  # suppresses any exception


def test_nullcontext_is_one_graph():
    def f(x):
        with contextlib.nullcontext():
            y = x * 2
        return y + 1

    one_graph(f, randn(4))


def test_nullcontext_enter_result():
    def f(x):
        with contextlib.nullcontext(3) as k:
            return x * k

    one_graph(f, randn(4))


def test_maybe_autocast_returning_nullcontext():
    def f(x):
        with maybe_autocast("cpu", enabled=False):
            y = x.float() @ x.float().t()
        return y.sum(0)

    one_graph(f, randn(3, 3))


def test_user_context_made_inside():
    def f(x):
        c = Counting()
        with c as same:
            y = x + same.entered
        return y, c.entered, c.exited, c.last_exc

    one_graph(f, randn(4))


def test_user_context_from_outside_keeps_its_side_effects():
    def f(x, c):
        with c:
            y = x * 3
        return y

    x = randn(4)
    mine, theirs = Counting(), Counting()
    expected = [f(x, theirs) for _ in range(3)]
    cf = ember.compile(f)
    got = [cf(x, mine) for _ in range(3)]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    assert (mine.entered, mine.exited, mine.last_exc) == (theirs.entered, theirs.exited, theirs.last_exc) == (3, 3,
                                                                                                                None)


def test_exception_inside_block_runs_exit_once():
    def f(x, c):
        with c:
            y = x + 1
            raise ValueError("inside")
        return y

    mine, theirs = Counting(), Counting()
    with pytest.raises(ValueError, match="inside"):
        f(randn(4), theirs)
    with pytest.raises(ValueError, match="inside"):
        ember.compile(f)(randn(4), mine)
    assert (mine.entered, mine.exited, mine.last_exc) == (theirs.entered, theirs.exited, theirs.last_exc)
    assert mine.last_exc is ValueError


def test_exception_suppressed_by_exit_is_one_graph():
    def f(x):
        y = x
        with Swallowing() as k:
            y = x * k
            raise KeyError("gone")
        c = Counting()
        with c:
            try:
                with Swallowing():
                    {}["missing"]
            except KeyError:
                y = y * 100  # never: the inner block suppressed it
        return y - 1, c.exited, c.last_exc

    one_graph(f, randn(4))


def test_exception_through_torch_contexts_to_a_handler_restores_grad_mode():
    def f(x):
        with torch.no_grad():
            try:
                with torch.enable_grad():
                    y = x * 2
                    raise ValueError("v")
            except ValueError:
                y = y + 1  # grad mode is no_grad's again here
            z = x * 3
        return y, z, torch.is_grad_enabled()

    x = randn(4, requires_grad=True)
    got, want = one_graph(f, x), f(x)
    assert [t.requires_grad for t in got[:2]] == [t.requires_grad for t in want[:2]] and got[2]


def test_assert_raises_inside_compiled_code():
    """unittest's assertRaises (its context manager's __exit__ reads the traceback only to clear
    its frames) in a compiled test body, both forms."""
    import unittest

    class Case(unittest.TestCase):
        def runTest(self):
            pass

    tc = Case()

    def f(x):
        s = {1, 2}
        tc.assertRaises(TypeError, lambda: s - 1)
        with tc.assertRaises(KeyError) as cm:
            {}["a"]
        return x + 1, type(cm.exception).__name__

    assert exact_graph(f, randn(3))[1] == "KeyError"

    def g(x):
        with tc.assertRaises(KeyError):
            pass  # assertRaises fails: eager's AssertionError, from the frame run as Python
        return x

    with pytest.raises(AssertionError):
        ember.compile(g)(randn(3))


def test_graph_break_inside_block_runs_exit_once():
    def f(x, c, log):
        with c:
            y = x * 2
            log.write("side")  # not capturable: the frame runs as plain Python
            y = y + 1
        return y

    import io
    mine, theirs = Counting(), Counting()
    x = randn(4)
    expected = f(x, theirs, io.StringIO())
    got = ember.compile(f)(x, mine, io.StringIO())
    torch.testing.assert_close(got, expected)
    assert (mine.entered, mine.exited) == (theirs.entered, theirs.exited) == (1, 1)


def test_graph_break_inside_blocks_of_python_context_managers_resumes(capsys):
    """The block before the break is a graph, the rest a resume function that ends the block
    with the object's own __exit__ (once; given the exception when the rest raises)."""
    def f(x, c):
        with contextlib.nullcontext():
            with c as k:
                y = x * 2
                print("break")
                y = y + k.entered
        return y

    def made_inside(x):
        c = Counting()
        with c:
            y = x + 1
            print("break")
        return y, c.entered, c.exited, c.last_exc

    def raising_after(x, c):
        with c:
            y = x + 1
            print("break")
            raise KeyError("after")
        return y

    mine, theirs = Counting(), Counting()
    x = randn(4)
    cf = ember.compile(f)
    for _ in range(2):
        torch.testing.assert_close(cf(x, mine), f(x, theirs))
    assert (mine.entered, mine.exited, mine.last_exc) == (theirs.entered, theirs.exited, theirs.last_exc)
    got, want = ember.compile(made_inside)(x), made_inside(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:] == (1, 1, None)
    mine, theirs = Counting(), Counting()
    with pytest.raises(KeyError):
        raising_after(x, theirs)
    with pytest.raises(KeyError):
        ember.compile(raising_after)(x, mine)
    assert (mine.entered, mine.exited, mine.last_exc) == (theirs.entered, theirs.exited, theirs.last_exc)
    assert mine.last_exc is KeyError
    c = counters()
    assert c["breaks"] >= 3 and c["aborts"] == 0, c  # the raise after the break: __exit__ as a call
    capsys.readouterr()


@contextlib.contextmanager
def _translating():
    try:
        yield
    except IndexError:
        raise ValueError("translated")  # noqa: B904


@contextlib.contextmanager
def _passing():
    try:
        yield
    finally:
        pass


@contextlib.contextmanager
def _swallowing(log):
    try:
        yield
    except KeyError as e:
        log.append(str(e))


def exception_through_generator_contexts(x):
    z = 0
    log = []
    with _passing():
        try:
            with _translating():
                raise IndexError
        except ValueError:
            z = 1
        except IndexError:
            z = 2
    with _swallowing(log):
        x = x + 1
        raise KeyError("k")
    return x * z, log


def test_exceptions_thrown_into_contextmanager_generators():
    """contextlib's __exit__ throws the exception into the generator (gen.throw(type, value,
    tb) on 3.11): it is caught, translated or swallowed there as in eager."""
    exact_graph(exception_through_generator_contexts, randn(2))


class _Suppressing:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, t, e, tb):
        self.log.append(("exit", t.__name__ if t else None, str(e) if e else None, tb is None))
        return True


def _raise_in_a_block_entered_before_a_break(x, ctx):
    with ctx:
        v = x.sum().item()  # a graph break: the resume function holds the block's __exit__
        raise ValueError(f"inner {v > 0}")
    return x + 1, ctx.log


def _raise_through_a_torch_block_entered_before_a_break(x):
    with torch.enable_grad():
        v = x.sum().item()
        if v == v:
            raise ValueError("boom")
    return x


def test_exceptions_leaving_blocks_entered_before_a_break():
    """In the resume function the block's __exit__ is the object's (a break handed it on): an
    exception leaving the block calls it as a call (a Python __exit__ traced, and it may
    suppress); it ran the resume function as plain Python (found by the fuzzer)."""
    cf = ember.compile(_raise_in_a_block_entered_before_a_break)
    for k in range(2):
        x = randn(2, seed=k)
        got, want = cf(x, _Suppressing()), _raise_in_a_block_entered_before_a_break(x, _Suppressing())
        assert_same(got, want)
    cg = ember.compile(_raise_through_a_torch_block_entered_before_a_break)
    for _ in range(2):
        with torch.no_grad():
            with pytest.raises(ValueError, match="boom"):
                cg(randn(2))
            assert not torch.is_grad_enabled()
    assert counters()["aborts"] == 0, counters()
