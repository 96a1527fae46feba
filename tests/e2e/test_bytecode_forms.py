"""Source constructs whose bytecode differs between CPython 3.11 and 3.12, each compared with
eager on the running interpreter. On 3.12 they compile to: LOAD_ATTR with its method bit,
LOAD_SUPER_ATTR, CALL without PRECALL, RETURN_CONST, END_FOR, BINARY_SLICE/STORE_SLICE, inlined
comprehensions (hidden locals, LOAD_FAST_AND_CLEAR, their exception-table entries),
CALL_INTRINSIC_1 and forward-only conditional jumps; graph breaks inside an inlined
comprehension run that comprehension's loop as plain Python and resume after it.
"""
import dis
import sys

import pytest
import torch

import ember
import ember.testing
from tests.helpers import randn

PY312 = sys.version_info >= (3, 12)


def run(fn, *args, graphs=1, breaks=0, calls=3, fullgraph=None, counted=True):
    """Compares with eager; `counted`: also the graphs and breaks (False where 3.11 differs: its
    comprehensions are functions of their own, and a function whose comprehension reads one of
    its variables has a cell, where ember does not break)."""
    expected = fn(*args)
    cf = ember.compile(fn, fullgraph=breaks == 0 if fullgraph is None else fullgraph)
    for _ in range(calls):
        torch.testing.assert_close(cf(*args), expected)
    c = ember.testing.counters()
    if counted:
        assert (c["frames"], c["breaks"], c["aborts"], c["fallbacks"]) == (graphs, breaks, 0, 0), c
    return cf


def opnames(fn):
    return {i.opname for i in dis.get_instructions(fn)}


# ---- attribute loads, super(), calls, returns ----


class Base(torch.nn.Module):
    scale = 3.0

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)

    def bias_term(self, x):
        return x + 1


class Derived(Base):
    scale = 5.0

    def forward(self, x):
        y = super().forward(x)  # LOAD_SUPER_ATTR, method form
        z = super(Derived, self).bias_term(y)  # two-argument form
        f = super().bias_term  # attribute form: a bound method
        return f(z) * self.scale


def test_super_forms():
    if PY312:
        assert "LOAD_SUPER_ATTR" in opnames(Derived.forward)
    torch.manual_seed(0)
    m = Derived()
    expected = m(randn(2, 4))
    cm = ember.compile(m, fullgraph=True)
    for _ in range(2):
        torch.testing.assert_close(cm(randn(2, 4)), expected)
    assert ember.testing.counters()["frames"] == 1


def _methods_and_kwargs(x, w):
    a = x.sum(dim=1, keepdim=True)  # LOAD_ATTR method bit, CALL with KW_NAMES
    b = torch.nn.functional.linear(x, w, bias=None)
    return a * b.relu().mean(-1, keepdim=True)


def test_method_loads_and_keyword_calls():
    run(_methods_and_kwargs, randn(3, 4), randn(5, 4, seed=1))


def _fill_and_return_none(x, out):
    out.copy_(x * 2)
    return None  # RETURN_CONST


def _return_constant(x):
    if x.dim() == 2:
        return 7  # RETURN_CONST on one path
    return x


def test_return_const():
    if PY312:
        assert "RETURN_CONST" in opnames(_fill_and_return_none)
    x = randn(3)
    out_e, out_c = torch.zeros(3), torch.zeros(3)
    assert _fill_and_return_none(x, out_e) is None
    cf = ember.compile(_fill_and_return_none, fullgraph=True)
    assert cf(x, out_c) is None
    torch.testing.assert_close(out_c, out_e)
    assert ember.compile(_return_constant, fullgraph=True)(randn(2, 2)) == 7


def _loops(x, ws):
    for w in ws:  # FOR_ITER / END_FOR
        x = x @ w
    total = 0
    for i in range(3):
        if i == 1:
            continue
        total += i
    for w in ws:
        if w.shape[0] == 4:
            break  # leaves the loop through its body (END_FOR not reached)
    return x * total, w


def test_loops_end_for_and_break():
    run(_loops, randn(2, 4), [randn(4, 4, seed=i) for i in range(3)])


def _none_tests(x, maybe, other):
    if maybe is None:  # POP_JUMP_IF_NOT_NONE (3.12), POP_JUMP_FORWARD_IF_NOT_NONE (3.11)
        x = x + 1
    if other is not None:
        x = x * other
    return +x, -x  # unary plus: CALL_INTRINSIC_1 INTRINSIC_UNARY_POSITIVE on 3.12


def test_none_jumps_and_unary_plus():
    if PY312:
        assert "CALL_INTRINSIC_1" in opnames(_none_tests)
    run(_none_tests, randn(3), None, randn(3, seed=1))


def _star_tuple(x, rest):
    shape = (*x.shape, *rest)  # LIST_TO_TUPLE (3.11) / CALL_INTRINSIC_1 INTRINSIC_LIST_TO_TUPLE (3.12)
    return x.reshape(shape[:2]) * len(shape)


def test_star_unpacking_into_a_tuple():
    run(_star_tuple, randn(2, 3), [1])


# ---- slices ----


def _slices(x, lst):
    a = x[1:3]  # BINARY_SLICE
    b = x[:, 1:]
    c = lst[1:]  # a list's slice
    y = x.clone()
    y[0:2] = 0.0  # STORE_SLICE on a tensor
    tmp = [x, x * 2, x * 3]
    tmp[0:2] = [x + 1]  # STORE_SLICE on a list made in the trace
    return a.sum() + b.sum() + len(c), y, tmp


def test_binary_and_store_slice():
    if PY312:
        assert {"BINARY_SLICE", "STORE_SLICE"} <= opnames(_slices)
    run(_slices, randn(4, 3), [1, 2, 3])


# ---- inlined comprehensions (PEP 709 on 3.12) ----


def _comprehensions(x, ws):
    ys = [x @ w for w in ws]
    d = {i: y.sum() for i, y in enumerate(ys)}
    s = {w.shape[0] for w in ws}
    nested = [[y * k for k in range(2)] for y in ys]
    return ys, d, len(s), nested


def test_comprehensions_in_one_graph():
    if PY312:
        assert "LOAD_FAST_AND_CLEAR" in opnames(_comprehensions)
    run(_comprehensions, randn(2, 4), [randn(4, 4, seed=i) for i in range(3)])


def _shadowing(x):
    w = 2.0
    ys = [x * w for w in (3.0, 4.0)]  # `w` inside is the comprehension's: the outer w is kept
    return ys[0] + ys[1] + w


def test_comprehension_keeps_the_shadowed_local():
    run(_shadowing, randn(3))


def _item_in_comprehension(x, ws):
    y = x.relu()
    vals = [w.sum().item() * 2 for w in ws]  # .item(): a break inside the comprehension's loop
    return y * sum(vals)


def test_break_inside_a_comprehension_resumes_after_it():
    """The graph before the comprehension, its loop as plain Python, the rest in the resume
    function: not the whole frame as plain Python."""
    run(_item_in_comprehension, randn(3), [randn(2, seed=i) for i in range(3)], graphs=2, breaks=1, counted=PY312)


def _break_in_nested_comprehension(x, groups):
    y = x * 2
    out = [[print(end="") or g * y for g in grp] for grp in groups]
    return y.sum(), out


def test_break_inside_a_nested_comprehension(capsys):
    groups = [[randn(3, seed=i), randn(3, seed=i + 5)] for i in range(2)]
    run(_break_in_nested_comprehension, randn(3), groups, graphs=2, breaks=1, counted=PY312)


def _break_with_shadowed_and_unbound(x, ws):
    w = x + 1  # bound before: restored after the comprehension
    parts = [print(end="") or v * 2 for v in ws]  # v: unbound before and after
    return w * len(parts), parts


def test_break_in_comprehension_restores_outer_names():
    run(_break_with_shadowed_and_unbound, randn(3), [randn(3, seed=i) for i in range(2)], graphs=2, breaks=1,
        counted=PY312)


def _break_in_comprehension_in_no_grad(x, ws):
    with torch.no_grad():
        y = x * 2
        vals = [print(end="") or (w * y).sum() for w in ws]
        z = y + sum(vals)
    return z, torch.is_grad_enabled()


def test_break_in_comprehension_inside_a_with_block():
    run(_break_in_comprehension_in_no_grad, randn(3), [randn(3, seed=i) for i in range(2)], graphs=2, breaks=1,
        counted=PY312)
    assert torch.is_grad_enabled()


def _raises_inside(x, ws):
    y = x * 2
    t = "outer"
    vals = [print(end="") or (1 // (len(w) - 2)) for w in ws]
    return y, vals, t


def test_exception_inside_a_broken_comprehension_propagates():
    cf = ember.compile(_raises_inside)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            cf(randn(3), [randn(3), randn(2)])
    torch.testing.assert_close(cf(randn(3), [randn(3)])[0], randn(3) * 2)


def _raises_in_comprehension_in_no_grad(x, ws):
    with torch.no_grad():
        y = x * 2
        vals = [print(end="") or (w * y).sum() if i < 1 else 1 // 0 for i, w in enumerate(ws)]
        z = y + sum(vals)
    return z


def test_exception_inside_a_broken_comprehension_leaves_the_with_block():
    """The comprehension's cleanup handler re-raises into the with block's handler, which exits
    the block (3.12: the transformed code's exception table had sent it to the loop's FOR_ITER,
    which crashed)."""
    cf = ember.compile(_raises_in_comprehension_in_no_grad)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            cf(randn(3), [randn(3, seed=i) for i in range(2)])
        assert torch.is_grad_enabled()
    x, ws = randn(3), [randn(3, seed=1)]
    torch.testing.assert_close(cf(x, ws), _raises_in_comprehension_in_no_grad(x, ws))


def _walrus(x, ws):
    y = x * 2
    vals = [(last := w.sum().item()) for w in ws]
    return y * last, vals


@pytest.mark.filterwarnings("ignore::ember.EmberWarning")
def test_comprehension_assigning_an_outer_name_is_still_correct():
    """`:=` inside a comprehension binds a local of the function: a break cannot run the loop
    on its own there (3.12), so the frame runs as plain Python; results are eager's."""
    x, ws = randn(3), [randn(2, seed=i) for i in range(3)]
    expected = _walrus(x, ws)
    cf = ember.compile(_walrus)
    for _ in range(2):
        got = cf(x, ws)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]


def test_fullgraph_break_inside_comprehension_raises():
    cf = ember.compile(_item_in_comprehension, fullgraph=True)
    with pytest.raises(ember.Unsupported):
        cf(randn(3), [randn(2)])


# ---- with blocks: 3.12 lays out the exit of a suppressing __exit__ as a backward jump ----


def _after_with(x):
    with torch.no_grad():
        y = x * 2
    print(end="")  # a break after the block: not inside a loop
    return y + 1


def test_break_after_a_with_block_is_not_a_loop():
    run(_after_with, randn(3), graphs=2, breaks=1)
