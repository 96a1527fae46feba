"""The tracer alone, through ember.testing.trace (nothing compiled or installed): whole graph,
guard and output-tree dumps compared exactly with golden text, one per feature. A change to
what the tracer records shows up here as a diff, before any end-to-end test notices.
"""
import collections
import inspect
import re

import ember.testing
from tests.helpers import randn


def _norm(text):
    """Addresses (0x...) are the only run-dependent part of a dump."""
    return None if text is None else re.sub(r"0x[0-9a-f]+", "0x?", text)


def golden(fn, *args, **kwargs):
    r = ember.testing.trace(fn, *args, **kwargs)
    return {k: _norm(v) for k, v in r.items()}


def pointwise(x, y):
    return (x + y).relu() * 2 - y.sigmoid()


def test_pointwise():
    r = golden(pointwise, randn(2, 3), randn(2, 3, seed=1))
    assert r["abort"] is None and r["abort_kind"] is None
    assert r["graph"] == """\
graph(inputs=2, ops=5)
  %0 = input 0 L['x']  : f32[2, 3] stride=(3, 1) cpu
  %1 = input 1 L['y']  : f32[2, 3] stride=(3, 1) cpu
  %2 = add(%0, %1)  : f32[2, 3] stride=(3, 1) cpu
  %3 = call Tensor.relu(%2)  : f32[2, 3] stride=(3, 1) cpu
  %4 = mul(%3, 2)  : f32[2, 3] stride=(3, 1) cpu
  %5 = call Tensor.sigmoid(%1)  : f32[2, 3] stride=(3, 1) cpu
  %6 = sub(%4, %5)  : f32[2, 3] stride=(3, 1) cpu
  return (%6)
"""
    assert r["guards"] == """\
  GLOBAL_STATE grad=1 autocast_cpu=0 autocast_cuda=0 default_dtype=torch.float32
  TENSOR_MATCH L['x'] Tensor dtype=6 device=0:-1 requires_grad=0 size=(2, 3) stride=(3, 1)
  TENSOR_MATCH L['y'] Tensor dtype=6 device=0:-1 requires_grad=0 size=(2, 3) stride=(3, 1)
"""
    assert r["out"] == "  0: value 0 = %6\n"


def branchy(x, n=3, *rest, scale=True, **extra):
    if x.dim() == 2 and n > 2:  # folded: the sizes and n are guarded constants
        x = x * n
    else:
        x = x - 1
    if scale:
        return x.sum(1), n, (x, [1, "a"]), {"k": x.t()}
    return x


def test_constant_folded_branch_and_output_tree():
    r = golden(branchy, randn(2, 3))
    assert r["abort"] is None
    assert r["graph"] == """\
graph(inputs=1, ops=3)
  %0 = input 0 L['x']  : f32[2, 3] stride=(3, 1) cpu
  %1 = mul(%0, 3)  : f32[2, 3] stride=(3, 1) cpu
  %2 = call Tensor.sum(%1, 1)  : f32[2] stride=(1) cpu
  %3 = call Tensor.t(%1)  : f32[3, 2] stride=(1, 3) cpu
  return (%2, %1, %3)
"""
    assert r["guards"] == """\
  GLOBAL_STATE grad=1 autocast_cpu=0 autocast_cuda=0 default_dtype=torch.float32
  TENSOR_MATCH L['x'] Tensor dtype=6 device=0:-1 requires_grad=0 size=(2, 3) stride=(3, 1)
  EQUALS L['n'] == 3
  ID_MATCH L['scale'] True
"""
    assert r["out"] == """\
  0: tuple 4
  1:   value 0 = %2
  2:   const 3
  3:   tuple 2
  4:     value 1 = %1
  5:     list 2
  6:       const 1
  7:       const 'a'
  8:   dict 1 ('k',)
  9:     value 2 = %3
"""


def test_other_side_of_the_branch_from_keyword_arguments():
    r = golden(branchy, randn(4), 1, scale=False)
    assert r["graph"] == """\
graph(inputs=1, ops=1)
  %0 = input 0 L['x']  : f32[4] stride=(1) cpu
  %1 = sub(%0, 1)  : f32[4] stride=(1) cpu
  return (%1)
"""
    assert r["guards"] == """\
  GLOBAL_STATE grad=1 autocast_cpu=0 autocast_cuda=0 default_dtype=torch.float32
  TENSOR_MATCH L['x'] Tensor dtype=6 device=0:-1 requires_grad=0 size=(4) stride=(1)
  ID_MATCH L['scale'] False
"""
    assert r["out"] == "  0: value 0 = %1\n"


Pair = collections.namedtuple("Pair", "a b")


class Box:
    pass


class Made:
    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v


def structures(x, box):
    t = (x, 1)
    box.attr = x + 1  # replayed after the graph runs
    it = iter([x, x * 2])
    next(it)
    made = Made(x)
    return Pair(x.sin(), 2), t, t, it, made, made.get


def test_output_tree_of_structures():
    r = golden(structures, randn(2), Box())
    assert r["graph"] == """\
graph(inputs=1, ops=3)
  %0 = input 0 L['x']  : f32[2] stride=(1) cpu
  %1 = add(%0, 1)  : f32[2] stride=(1) cpu
  %2 = mul(%0, 2)  : f32[2] stride=(1) cpu
  %3 = call Tensor.sin(%0)  : f32[2] stride=(1) cpu
  return (%1, %3, %0, %2)
"""
    assert r["out"] == """\
  0: last 2
  1:   setattr 'attr'
  2:     slot L['box']
  3:     value 0 = %1
  4:   tuple 6
  5:     tuple 2 Pair
  6:       value 1 = %3
  7:       const 2
  8:     tuple 2
  9:       value 2 = %0
 10:       const 1
 11:     same @8
 12:     call 3 iter_at
 13:       list 2
 14:         value 2 = %0
 15:         value 3 = %2
 16:       const 1
 17:       const 'l'
 18:     newobj 1 Made
 19:       dict 1 ('v',)
 20:         value 2 = %0
 21:     bound
 22:       same @18
 23:       const <function Made.get at 0x?>
"""


def prints(x):
    y = x.cos()
    print(y)  # abort: print is not captured
    return y


def test_abort():
    r = golden(prints, randn(2))
    line = inspect.getsourcelines(prints)[1] + 2
    assert r == {
        "graph": None, "guards": None, "out": None, "abort_kind": "NOT_IN_GRAPH",
        "abort": f"{__file__}:{line}: builtins.print is not put in a graph (it reads tensor data, has side "
                 "effects or changes global state)",
    }


def test_nothing_is_compiled_or_installed():
    ember.testing.trace(pointwise, randn(2), randn(2))
    assert ember.testing.counters()["frames"] == 0
    assert ember.testing.code_state(pointwise) is None
    assert ember.testing.entries(pointwise) == []
