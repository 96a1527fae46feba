"""What each kind of Python value does under the operations opcodes apply to it: subscripts,
item stores, `in`, `is`, truth, iteration, and the methods of lists, tuples and dicts. Each case
is compared with eager and must be one graph with no break and no fallback.
"""

import collections

import pytest
import torch

import ember
import ember.testing
from tests.helpers import one_graph, randn


def one_graph_fg(fn, *args, calls=2):
    return one_graph(fn, *args, calls=calls, fullgraph=True)


def test_iterating_a_tensor_whose_metadata_was_inferred():
    def f(x):
        y = x + 1  # metadata inferred in C: its meta tensor is made when iteration asks for it
        out = []
        for row in y:
            out.append(row * 2)
        return out, [r - 1 for r in (x * 3)]

    one_graph_fg(f, randn(3, 4))


def test_dict_methods_on_a_dict_made_while_tracing():
    def f(x):
        d = {"a": x, "b": x * 2}
        d.setdefault("c", x + 1)
        kept = d.setdefault("a", None)
        d["e"] = x - 1
        popped = d.pop("b") + d.pop("zz", x)
        d.pop("e")
        d.update({"f": x * 3})
        c = d.copy()
        c["g"] = x
        got = d.get("a") + d.get("nope", x) + d["c"] + kept + popped
        return (got, len(list(d.keys())), list(d.values()), [v for _, v in d.items()], len(d), len(c),
                "a" in d, d.__contains__("q"), len(list(iter(d))), d.__getitem__("a"), "g" in d)

    one_graph_fg(f, randn(3))


def test_list_and_tuple_methods():
    def f(x):
        lst = [x, x + 1]
        lst.append(x * 2)
        lst.insert(0, x - 1)
        lst.insert(-1, x * 3)
        lst.insert(100, x)
        lst.extend((x, x))
        lst.extend([x + 5])
        a, b, c = lst.pop(), lst.pop(0), lst.pop(-2)
        k = [1, 2, 2, 3]
        t = (1, 2, 1)
        return (a + b + c, len(lst), lst, k.index(2), k.count(2), 3 in k, 4 in k,
                len(k.copy()), t.count(1), t.index(2), 5 in t)

    one_graph_fg(f, randn(3))


def test_exceptions_raised_by_container_methods_are_caught():
    def f(x):
        d = {"a": x}
        try:
            y = d["missing"]
        except KeyError:
            y = x * 5
        try:
            d.pop("zz")
        except KeyError:
            y = y + 1
        try:
            [1, 2].index(3)
        except ValueError:
            y = y + 2
        try:
            (x, x)[5]
        except IndexError:
            y = y * 3
        return y

    one_graph_fg(f, randn(3))


class Config:
    def __init__(self, scale):
        self.scale = scale
        self.name = "cfg"


def test_dict_of_an_object_read_from_the_frame_is_read_per_key():
    def f(x, cfg):
        d = cfg.__dict__
        y = x * d["scale"] * d.get("scale") * (2 if "name" in d else 3)
        return y * (1 if d.get("nope") is None else 5), d.__contains__("zz"), d.get("nope", 4)

    one_graph_fg(f, randn(3), Config(2.0))
    cf = ember.compile(f, fullgraph=True)
    cfg = Config(2.0)
    cf(randn(3), cfg)
    cfg.scale = 3.0  # guarded per key: a new value is a new graph
    torch.testing.assert_close(cf(randn(3), cfg), f(randn(3), cfg))


class Containers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ml = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.md = torch.nn.ModuleDict({"a": torch.nn.Linear(4, 4)})
        self.seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))

    def forward(self, x):
        x = self.ml[1](x)
        x = self.md["a"](x)
        for m in self.seq[1:]:
            x = m(x)
        return self.ml[-1](x), len(self.ml), "a" in self.md


def test_module_containers_by_index_name_and_slice():
    torch.manual_seed(0)
    one_graph_fg(Containers(), randn(2, 4))


def test_identity_and_truth_by_kind():
    def helper():
        pass

    def f(x, none, obj):
        r = x
        if none is None:
            r = r + 1
        if obj is not None:
            r = r * 2
        if x is not None and x is not r:
            r = r - 1
        if [x] and not {} and not () and {"k": x} and helper:
            r = r * 3
        if obj is obj and helper is not f and none is not obj:
            r = r + 4
        return r, not [], not (x,)

    one_graph_fg(f, randn(3), None, Config(1.0))



def test_an_index_too_large_raises_as_in_python():
    def f(x):
        y = x
        lst = [x, x]
        try:
            lst[2**70] = x + 1
        except IndexError:
            y = y + 1
        try:
            (x, x)[-2**70]
        except IndexError:
            y = y * 2
        try:
            lst.insert(2**70, x)
        except OverflowError:
            y = y - 1
        try:
            lst.pop(-2**70)
        except OverflowError:
            y = y * 3
        return y, lst

    one_graph_fg(f, randn(3))


class Level:
    """Equal to the number it holds now: comparing it reads its state."""

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other

    __hash__ = object.__hash__


def _level_in(x, k):
    return x + 1 if k in (1, 2) else x - 1


def _level_in_list(x, k):
    return x + 1 if 1 in [k] else x - 1


def _level_in_tuple_eq(x, k):
    return x + 1 if (k, 0) == (1, 0) else x - 1


def test_comparisons_by_an_objects_own_eq_are_not_baked_in():
    """An object read from the frame is guarded by its type only: `k in (1, 2)`, `1 in [k]`,
    `(k, 0) == (1, 0)` run its __eq__, whose answer depends on its state."""
    x = randn(3)
    for fn in (_level_in, _level_in_list, _level_in_tuple_eq):
        cf = ember.compile(fn)
        k = Level(1)
        for v in (1, 5, 2):
            k.v = v
            torch.testing.assert_close(cf(x, k), fn(x, k))


class Ordered(collections.OrderedDict):
    pass


def _ordered_items(x):
    r = Ordered()
    r["a"] = x
    r.__setitem__("b", x + 1)
    r.setdefault("c", x)
    return r


def _setitem_one_argument(x):
    r = Ordered()
    r["a"] = x * 2
    dict.__setitem__(r, "b")
    return r


def test_dict_methods_of_an_instance_made_while_tracing_check_their_arguments():
    x = randn(3)
    got = ember.compile(_ordered_items, fullgraph=True)(x)
    assert type(got) is Ordered and list(got) == ["a", "b", "c"]
    torch.testing.assert_close(dict(got), dict(_ordered_items(x)))
    with pytest.raises(TypeError, match="expected 2 arguments"):
        ember.compile(_setitem_one_argument)(x)


def test_torch_sym_max_and_min():  # TorchDynamo's test_sym_max_creates_graph_node
    def fn(x):
        m = torch.sym_max(x.size(0), x.size(1))
        return x.sum() + m, m, torch.sym_min(x.size(0), 2.5), torch.sym_max(3, 4.0)

    for dyn in (False, True):
        ember.reset()
        cf = ember.compile(fn, fullgraph=True, dynamic=dyn)
        for shape in ((4, 8), (9, 3)):
            x = torch.randn(*shape)
            got, want = cf(x), fn(x)
            torch.testing.assert_close(got[0], want[0])
            assert got[1:] == want[1:] and [type(v) for v in got[1:]] == [type(v) for v in want[1:]]
