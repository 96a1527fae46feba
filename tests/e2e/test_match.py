"""`match` statements (PEP 634) traced: mapping, sequence, class, value, or- and as-patterns
and guards on every kind of subject, compared with eager; the errors CPython raises in a
pattern are raised the same."""
import collections
import dataclasses
import enum

import pytest
import torch

import ember
import ember.testing
from tests.helpers import assert_same, randn


@dataclasses.dataclass
class Pt:
    x: int
    y: int


class Plain:
    def __init__(self, a):
        self.a = a


class Color(enum.Enum):
    RED = 1
    BLUE = 2


Pair = collections.namedtuple("Pair", "left right")


def on_config(t, cfg):
    match cfg:
        case {"mode": "add", "k": k}:
            return t + k
        case {"mode": "mul", **rest}:
            return t * rest.get("k", 2), sorted(rest)
        case [a, b, *c]:
            return t + a + b + len(c)
        case (1 | 2) as n:
            return t - n
        case str() if cfg.startswith("x"):
            return t * 10
        case Color.RED:
            return t + 100
        case float(v):
            return t * v
        case _:
            return t * 0


def on_objects(t, p):
    match p:
        case Pt(x=0, y=yy):
            return t + yy
        case Pt(xx, 5):
            return t + xx
        case Pair(l, r):
            return t * l + r
        case Plain(a=[_, _]):
            return t - 1
        case Plain(a=aa):
            return t + aa
        case None:
            return t
    return -t


CONFIGS = [{"mode": "add", "k": 3}, {"mode": "mul"}, {"mode": "mul", "k": 5, "z": 1}, [1, 2, 3, 4], (5, 6),
           [1], 1, 2, "xy", "ab", Color.RED, Color.BLUE, 7.5, {"other": 1}]
OBJECTS = [Pt(0, 4), Pt(3, 5), Pt(1, 1), Pair(2, 3), Plain([1, 2]), Plain(7), None, "s"]


@pytest.mark.parametrize("cfg", CONFIGS, ids=repr)
def test_match_on_configs(cfg):
    ember.reset()
    x = randn(3)
    assert_same(ember.compile(on_config, fullgraph=True)(x, cfg), on_config(x, cfg))


@pytest.mark.parametrize("p", OBJECTS, ids=repr)
def test_match_on_objects(p):
    ember.reset()
    x = randn(3)
    assert_same(ember.compile(on_objects, fullgraph=True)(x, p), on_objects(x, p))


def on_shape(t):
    match t.shape:
        case (n,):
            return t * n
        case (1, m):
            return t.sum(0) + m
        case (n, m):
            return t.sum(1) * (n - m)
        case _:
            return t.flatten()


def on_tensor(v):
    match v:
        case torch.Tensor() if v.dim() == 0:
            return v + 1
        case torch.Tensor():
            return v.sum()
        case [torch.Tensor() as a, torch.Tensor() as b]:
            return a * b
        case {"w": torch.Tensor() as w, **kw}:
            return w * len(kw)


def made_in_the_trace(t):
    d = {"kind": "scale", "by": t.shape[0]}
    items = [t, t + 1]
    out = []
    for v in (d, items, Pt(t.shape[0], 2), (1, 2, 3)):
        match v:
            case {"kind": "scale", "by": b}:
                out.append(t * b)
            case [p, q]:
                out.append(p - q)
            case Pt(x, y):
                out.append(t + x * y)
            case (a, *rest):
                out.append(t + a + len(rest))
    return out


@pytest.mark.parametrize("shape", [(3,), (1, 4), (2, 3), (2, 2, 2)])
def test_match_on_shapes(shape):
    ember.reset()
    x = randn(*shape)
    assert_same(ember.compile(on_shape, fullgraph=True)(x), on_shape(x))


def test_match_on_tensors_and_values_made_in_the_trace():
    for v in (randn(()), randn(3), [randn(2), randn(2, seed=1)], {"w": randn(2), "a": 1, "b": 2}):
        ember.reset()
        assert_same(ember.compile(on_tensor, fullgraph=True)(v), on_tensor(v))
    ember.reset()
    ember.testing.reset_counters()
    x = randn(3)
    assert_same(ember.compile(made_in_the_trace, fullgraph=True)(x), made_in_the_trace(x))
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (1, 0, 0), c


def too_many_positional(t, p):
    match p:
        case Pt(a, b, c):
            return t + a + b + c
    return t


def not_a_class(t, p, cls):
    match p:
        case cls():
            return t
    return -t


def self_match_twice(t, n):
    match n:
        case int(a, b):
            return t + a + b
    return t


def duplicate_attribute(t, p):
    match p:
        case Pt(x, x=y):
            return t + y
    return t


def duplicate_key(t, d, k1, k2):
    match d:
        case {Keys.A: a, Keys.B: b}:
            return t + a + b
    return t


class Keys:
    A = "a"
    B = "a"


@pytest.mark.parametrize("fn,args", [
    (too_many_positional, (Pt(1, 2),)), (not_a_class, (Pt(1, 2), "notaclass")), (self_match_twice, (3,)),
    (duplicate_attribute, (Pt(1, 2),)), (duplicate_key, ({"a": 1, "b": 2}, 1, 2))], ids=lambda v: getattr(v, "__name__", ""))
def test_pattern_errors_raise_as_in_python(fn, args):
    x = randn(3)
    with pytest.raises(Exception) as want:
        fn(x, *args)
    ember.reset()
    with pytest.raises(type(want.value)) as got:
        ember.compile(fn)(x, *args)
    assert str(got.value) == str(want.value)


def frame_mapping(t, d):
    match d:
        case {"scale": s, "shift": b}:
            return t * s + b
        case {"scale": s}:
            return t * s
    return t


def test_frame_dict_subjects_are_guarded_by_their_keys():
    cf = ember.compile(frame_mapping)
    x = randn(3)
    for d in ({"scale": 2.0, "shift": 1.0}, {"scale": 3.0}, {"other": 1}, {"scale": 2.0, "shift": 1.0}):
        assert_same(cf(x, d), frame_mapping(x, d))
    assert ember.testing.counters()["aborts"] == 0
