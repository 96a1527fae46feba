"""Bytecode assembler: decoding a code object and assembling it again gives a code object
that CPython accepts, that dis reads, whose line numbers are the original ones and that
behaves like the original (exceptions, loops, closures, with-blocks, generators)."""
import dis
import types

import pytest

from ember import _C


def plain(a, b=2):
    return a * b + 1


def branches(x):
    if x > 3:
        y = x * 2
    elif x < -3:
        y = -x
    else:
        y = 0
    return y


def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        total += i
        if total > 1000:
            break
    while n > 0:
        n -= 7
    return total, n


def try_except(x):
    try:
        r = 10 // x
    except ZeroDivisionError as e:
        r = str(e)
    finally:
        x = None
    return r


def with_block(path_list):
    import contextlib
    out = []
    with contextlib.suppress(KeyError):
        out.append(1)
        {}["missing"]
        out.append(2)
    return out


def closure(k):
    def inner(v):
        return v + k
    return inner(5), [inner(i) for i in range(3)]


def gen(n):
    for i in range(n):
        yield i * i


def big_function(x):
    # many constants and a long body: forces EXTENDED_ARG on jumps and operands
    s = 0
    for i in range(x):
        s += i
        if i == 1: s += 1
        if i == 2: s += 2
        if i == 3: s += 3
        if i == 4: s += 4
        if i == 5: s += 5
        if i == 6: s += 6
        if i == 7: s += 7
        if i == 8: s += 8
        if i == 9: s += 9
        if i == 10: s += 10
        if i == 11: s += 11
        if i == 12: s += 12
        if i == 13: s += 13
        if i == 14: s += 14
        if i == 15: s += 15
        if i == 16: s += 16
        if i == 17: s += 17
        if i == 18: s += 18
        if i == 19: s += 19
        if i == 20: s += 20
        if i == 21: s += 21
        if i == 22: s += 22
        if i == 23: s += 23
        if i == 24: s += 24
        if i == 25: s += 25
        if i == 26: s += 26
        if i == 27: s += 27
        if i == 28: s += 28
        if i == 29: s += 29
        if i == 30: s += 30
    return s


def raising(x):
    if x:
        raise ValueError("boom")
    return 1


CASES = [
    (plain, [(3,), (3, 4)]),
    (branches, [(5,), (-5,), (0,)]),
    (loops, [(10,), (100,), (0,)]),
    (try_except, [(2,), (0,)]),
    (with_block, [([],)]),
    (closure, [(7,)]),
    (big_function, [(40,)]),
]


def rebuilt(fn):
    code = _C._asm_roundtrip(fn.__code__)
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


@pytest.mark.parametrize("fn, calls", CASES, ids=[c[0].__name__ for c in CASES])
def test_roundtrip_behaves_like_original(fn, calls):
    new = rebuilt(fn)
    for args in calls:
        assert new(*args) == fn(*args)
    dis.dis(new.__code__, file=open("/dev/null", "w"))
    assert [ln for _, _, ln in new.__code__.co_lines() if ln] == [ln for _, _, ln in fn.__code__.co_lines() if ln] \
        or {ln for _, _, ln in new.__code__.co_lines() if ln} == {ln for _, _, ln in fn.__code__.co_lines() if ln}
    assert new.__code__.co_stacksize >= 1


def test_generator_roundtrip():
    new = rebuilt(gen)
    assert list(new(5)) == list(gen(5))


@pytest.mark.parametrize("fn", [c[0] for c in CASES] + [gen, raising], ids=lambda f: f.__name__)
def test_roundtrip_is_byte_identical(fn):
    # CPython's own layout is what our assembler reproduces for unedited code
    code = _C._asm_roundtrip(fn.__code__)
    o = fn.__code__
    assert code.co_code == o.co_code
    assert code.co_exceptiontable == o.co_exceptiontable
    assert list(code.co_lines()) == list(o.co_lines())
    assert code.co_stacksize == o.co_stacksize


def test_traceback_names_the_original_line():
    new = rebuilt(raising)
    with pytest.raises(ValueError) as info:
        new(1)
    tb = info.traceback[-1]
    assert tb.lineno + 1 == raising.__code__.co_firstlineno + 2
    assert new(0) == 1


def test_extended_args_present():
    code = _C._asm_roundtrip(big_function.__code__)
    assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(code)) or len(code.co_code) < 512
    assert types.FunctionType(code, globals())(40) == big_function(40)
