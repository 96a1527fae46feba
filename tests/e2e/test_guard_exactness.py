"""Guards must tell apart what Python tells apart: constants by exact type and value (floats
by sign, NaN equal to NaN), at any depth and from any source; mutable containers by their
current contents, never by a snapshot; dict key order where iteration follows it. And
tensors made to require grad inside a graph keep requires_grad under functional backends.
Every case compares ember with eager over calls that must not reuse a wrong entry.
"""
import collections
import math

import pytest
import torch

import ember
import ember.testing


def same(a, b):
    """Equal as eager's result: structure, Python types, tensor dtype and values (NaN equal)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
        assert torch.equal(torch.nan_to_num(a, nan=7.0), torch.nan_to_num(b, nan=7.0)), (a, b)
        assert torch.equal(torch.signbit(a), torch.signbit(b)) if a.is_floating_point() else True
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b)), (a, b)
    else:
        assert a == b, (a, b)


def run_all(fn, calls):
    """Compile fn once and run every argument tuple of calls in order, against eager."""
    cf = ember.compile(fn)
    for args in calls:
        same(cf(*args), fn(*args))


def probe(x, c):
    """What a constant decides: the dtype of x * c, its type, a branch on it, 1/c's sign."""
    kind = "float" if isinstance(c, float) else "bool" if isinstance(c, bool) else type(c).__name__
    r = x * c
    if isinstance(c, float) and c == 0.0:
        return r, kind, math.copysign(1.0, c)
    return r, kind


CONSTANTS = [1, 1.0, True, 0.0, -0.0, float("inf"), float("-inf"), float("nan"), 2, 2.0, False, 0, 1 + 0j]


def test_scalar_argument_distinguished_by_type_and_sign():
    x = torch.arange(3)
    run_all(probe, [(x, c) for c in CONSTANTS])


@pytest.mark.parametrize("wrap", [
    lambda c: (c, 2),
    lambda c: ((c,), 2),
    lambda c: (2, (3, (c,))),
], ids=["tuple", "nested", "deep"])
def test_constant_in_tuple_argument(wrap):
    def f(x, t):
        while isinstance(t, tuple):
            t = t[0] if not isinstance(t[0], int) or isinstance(t[0], bool) or len(t) == 1 else t[-1]
        return probe(x, t)
    x = torch.arange(3)
    run_all(f, [(x, wrap(c)) for c in CONSTANTS])


def test_star_args_and_tuple_in_dict():
    def f(x, *a, d=None):
        return probe(x, a[0]) + probe(x, d["k"][0])
    x = torch.arange(3)
    cf = ember.compile(f)
    for c in CONSTANTS:
        same(cf(x, c, d={"k": (c,)}), f(x, c, d={"k": (c,)}))


def test_frozenset_slice_and_range_constants():
    def f(x, s, sl, r):
        return x[sl] * len(s), [type(v).__name__ for v in sorted(s, key=repr)], r.stop, list(r)
    x = torch.arange(6)
    run_all(f, [(x, frozenset({1, 2}), slice(1, 4), range(0, 3, 2)),
                (x, frozenset({1.0, 2}), slice(1, 4), range(0, 4, 2)),
                (x, frozenset({True, 2}), slice(1, 4.0) if False else slice(1, 5), range(0, 4, 2))])


G = (1, 2)


def test_global_tuple_and_module_attribute_and_default():
    def f(x):
        return probe(x, G[0])
    cf = ember.compile(f)
    x = torch.arange(3)
    global G
    for c in CONSTANTS:
        G = (c, 2)
        same(cf(x), f(x))

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = (1,)

        def forward(self, x):
            return probe(x, self.scale[0])
    m = M()
    cm = ember.compile(m)
    for c in CONSTANTS:
        m.scale = (c,)
        same(cm(x), m(x))

    def g(x, t=((1,),)):
        return probe(x, t[0][0])
    cg = ember.compile(g)
    for c in CONSTANTS:
        g.__defaults__ = (((c,),),)
        same(cg(x), g(x))


S = {1, 2}


def test_global_set_mutated_after_compile():
    def f(x):
        return x * len(S), 3 in S, sorted(S)
    cf = ember.compile(f)
    x = torch.ones(2)
    same(cf(x), f(x))
    S.add(3)
    same(cf(x), f(x))
    S.discard(1)
    S.add(1.0)  # equal to 1, another type
    same(cf(x), f(x))
    assert [type(v) for v in sorted(S)] == [float, int, int]


def test_set_argument_contents_and_types():
    def f(x, s):
        return x * sum(s), sorted(type(v).__name__ for v in s)
    x = torch.arange(3)
    run_all(f, [(x, {1, 2}), (x, {1.0, 2}), (x, {True, 2}), (x, {0.0}), (x, {-0.0}), (x, {3})])


def test_dict_views_are_live():
    def f(x):
        d = {"a": x, "b": x * 2}
        k, v, it = d.keys(), d.values(), d.items()
        d["c"] = x * 3
        d.pop("a")
        return (len(k), list(k), [t + 1 for t in v], [name for name, _ in it], "c" in k, "a" in k,
                type(k).__name__, type(v).__name__, type(it).__name__, isinstance(k, list))
    x = torch.ones(2)
    cf = ember.compile(f)
    same(cf(x), f(x))
    c = ember.testing.counters()
    assert (c["breaks"], c["aborts"]) == (0, 0), c


def test_dict_view_returned_is_a_real_view():
    def f(x):
        d = {"a": x}
        return d.keys(), d.values()
    k, v = ember.compile(f)(torch.ones(2))
    assert type(k).__name__ == "dict_keys" and list(k) == ["a"]
    assert type(v).__name__ == "dict_values"


def test_dict_argument_key_order_guarded():
    def f(x, d):
        return [k for k in d], [v * x for v in d.values()]
    x = torch.ones(2)
    run_all(f, [(x, {"a": 1, "b": 2}), (x, {"b": 2, "a": 1}), (x, {"a": 1, "b": 2})])


class TwoParams(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.ones(2))
        self.b = torch.nn.Parameter(torch.full((2,), 2.0))
        self.register_buffer("u", torch.full((2,), 3.0))
        self.register_buffer("v", torch.full((2,), 4.0))

    def forward(self, x):
        ps, bs = list(self.parameters()), list(self.buffers())
        return x * ps[0] - ps[1] + bs[0] * 10 - bs[1]


def test_parameter_and_buffer_order_guarded():
    m = TwoParams()
    cm = ember.compile(m)
    x = torch.ones(2)
    same(cm(x), m(x))
    m._parameters["a"] = m._parameters.pop("a")  # now b, a
    same(cm(x), m(x))
    m._buffers["u"] = m._buffers.pop("u")
    same(cm(x), m(x))


def test_sequential_order_guarded():
    m = torch.nn.Sequential(collections.OrderedDict([("add", torch.nn.Identity()), ("relu", torch.nn.ReLU())]))
    m.add.forward = lambda x: x - 1
    cm = ember.compile(m)
    x = torch.full((2,), 0.5)
    same(cm(x), m(x))
    m._modules["add"] = m._modules.pop("add")  # relu first now
    same(cm(x), m(x))


class Parent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.sub(x) + 1


def test_forward_replaced_on_instance_after_compile():
    import types
    m = Parent()
    cm = ember.compile(m)
    x = torch.ones(2)
    same(cm(x), m(x))
    m.sub.forward = lambda x: x * 7
    same(cm(x), m(x))
    m.sub.forward = types.MethodType(lambda self, x: x * 5, m.sub)
    same(cm(x), m(x))
    del m.sub.forward
    same(cm(x), m(x))
    m.forward = types.MethodType(lambda self, x: x - 3, m)
    same(cm(x), m(x))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_leaf_made_in_graph_keeps_requires_grad(backend):
    def f(x):
        w = torch.ones(2, requires_grad=True)
        return w, (x * w).sum()
    w, loss = ember.compile(f, backend=backend)(torch.ones(2))
    assert w.requires_grad and w.is_leaf
    loss.backward()
    assert torch.equal(w.grad, torch.ones(2))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_requires_grad_on_intermediate(backend):
    def f(x):
        y = x * 2
        y.requires_grad_()
        return y, (y * y).sum()
    y, loss = ember.compile(f, backend=backend)(torch.ones(2))
    assert y.requires_grad
    loss.backward()
    assert torch.equal(y.grad, torch.full((2,), 4.0))


def test_dict_iteration_sees_values_stored_meanwhile():
    def f(x):
        d = {"a": x, "b": x * 2, "c": x * 3}
        for k in d:
            d[k] = d[k] + 1  # values may change while iterating; keys may not
        seen = []
        for k, v in d.items():
            d["c"] = x * 10  # a later value, read when iteration gets there
            seen.append(v)
        vals = []
        for v in d.values():
            d["b"] = x * 20
            vals.append(v)
        return seen, vals, list(d)
    x = torch.ones(2)
    cf = ember.compile(f)
    same(cf(x), f(x))
    c = ember.testing.counters()
    assert (c["breaks"], c["aborts"]) == (0, 0), c


@pytest.mark.parametrize("how", ["keys", "values", "items", "dict"])
def test_dict_changed_size_during_iteration_raises_as_in_python(how):
    def f(x):
        d = {"a": 1}
        src = {"keys": d.keys, "values": d.values, "items": d.items, "dict": lambda: d}[how]()
        for _ in src:
            d["b"] = 2
        return x + 1
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        f(torch.ones(2))
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        ember.compile(f)(torch.ones(2))


def test_recompile_reasons_name_what_changed_in_a_tensor(capfd):
    """EMBER_LOGS=recompiles says which property of which tensor failed its check."""
    def f(x):
        return x * 2

    cf = ember.compile(f)
    base = torch.randn(3, 4)
    cases = [(base.double(), "dtype is torch.float64, expected torch.float32"),
             (torch.randn(5, 4), "size is (5, 4), expected (3, 4)"),
             (torch.randn(4, 3).t(), "stride is (1, 3), expected (4, 1)"),
             (torch.randn(3, 4, requires_grad=True), "requires_grad is True, expected False"),
             (torch.randn(3, 4, device="meta"), "device is meta:-1, expected cpu:-1")]
    ember.set_logs("recompiles")
    try:
        cf(base)
        for x, why in cases:
            ember.reset()
            cf(base)
            capfd.readouterr()
            cf(x)
            err = capfd.readouterr().err
            assert why in err, (why, err)
    finally:
        ember.set_logs("")


def test_methods_follow_changes_to_their_class():
    """A method resolved through an object's class (or a base) is guarded by the class's
    version: a method replaced or added on the class or a base after the compile is called."""
    class A:
        def f(self, x):
            return x * 3

    class B(A):
        def g(self, x):
            return super().f(x)

    def fn(x, obj):
        return obj.f(x) + obj.g(x)

    cf = ember.compile(fn, fullgraph=True)
    x = torch.ones(3)
    same(cf(x, B()), fn(x, B()))
    A.f = lambda self, x: x * 5  # a base's method replaced
    same(cf(x, B()), fn(x, B()))
    B.f = lambda self, x: x * 7  # a method shadowing the base's added
    same(cf(x, B()), fn(x, B()))


def test_super_in_classmethod_and_class_constant_follow_changes():
    class A:
        coeff = 4

        @classmethod
        def add(cls, x):
            return x + 1

        def f(self, x):
            return x * 3

    class B(A):
        @classmethod
        def add(cls, x):
            return x + super().add(x) + super().coeff + super().f(None, x)

    def fn(x, obj):
        return obj.add(x)

    cf = ember.compile(fn, fullgraph=True)
    x = torch.ones(3)
    same(cf(x, B()), fn(x, B()))
    A.coeff = 10
    same(cf(x, B()), fn(x, B()))


def test_class_patched_and_put_back_keeps_its_entry():
    """A class attribute set and put back (as FX's tracer does to nn.Module) moves the class's
    version but not what the trace read: the entry is reused; a property replaced is seen."""
    class A:
        @property
        def k(self):
            return 2.0

        def f(self, x):
            return x * self.k

    def fn(x, a):
        return a.f(x)

    cf = ember.compile(fn, fullgraph=True)
    x = torch.ones(3)
    same(cf(x, A()), fn(x, A()))
    orig = A.f
    A.f = lambda self, x: x
    A.f = orig
    same(cf(x, A()), fn(x, A()))
    assert ember.testing.counters()["recompiles"] == 0
    del A.k
    A.k = property(lambda self: 5.0)
    same(cf(x, A()), fn(x, A()))
    assert ember.testing.counters()["recompiles"] == 1


def _t_(x, xa):
    xa.t_()
    return x.shape, x + 1


def _requires_grad_(x, xa):
    xa.requires_grad_()
    return x.requires_grad, x * 2


def _tagged(x, xa):
    xa.tag = 5
    return getattr(x, "tag", None), x * 3


@pytest.mark.parametrize("fn", [_t_, _requires_grad_, _tagged])
def test_two_tensor_arguments_that_are_one_object(fn):
    # the first compile sees two objects: an in-place change of one's sizes, requires_grad or
    # attributes is guarded to be none of the other inputs, so one object passed twice
    # recompiles (fuzz seed 2504 #590: x.shape read after xa.t_() with xa is x)
    cf = ember.compile(fn)
    for alias in (False, True, False, True):
        a = torch.randn(1, 4)
        b = a if alias else torch.randn(1, 4)
        a2 = a.clone()
        b2 = a2 if alias else b.clone()
        got, want = cf(a, b), fn(a2, b2)
        assert got[0] == want[0]
        assert torch.equal(got[1].detach(), want[1].detach())
    assert ember.testing.counters()["frames"] == 2


_KEEP = []


class _ClearsOnRepr:
    def __repr__(self):
        _KEEP.clear()  # the object an identity guard expects dies here
        return "_ClearsOnRepr()"


def test_explaining_a_guard_miss_runs_no_user_code():
    """The explanation of a guard's miss (kept for EMBER_LOGS=recompiles) names objects of user
    classes by type and address: repr() of them ran user code, a side effect eager has not (here
    emptying _KEEP), in which an object an identity guard holds weakly could die and then be
    read freed (fuzz 2603 #897: a crash)."""
    def f(x, o):
        return x + 1, (o is _KEEP[0]) if _KEEP else None

    cf = ember.compile(f)
    o1 = _ClearsOnRepr()
    _KEEP.append(o1)
    assert cf(torch.ones(1), o1)[1] is True
    del o1
    got = cf(torch.ones(1), _ClearsOnRepr())
    assert got[1] is False and len(_KEEP) == 1 and torch.equal(got[0], torch.full((1,), 2.0))


class _NonData:
    def __get__(self, obj, objtype=None):
        return 7 if obj is not None else self


class _WithMethod:
    nd = _NonData()

    def m(self):
        return 1


def test_instance_attribute_shadowing_a_method_or_non_data_descriptor_misses():
    # an instance dict entry set after the compile shadows the class's method (and a non-data
    # descriptor): the absence of the name in the instance dict is guarded, not assumed
    def f(x, c):
        return x + c.m() + c.nd

    cf = ember.compile(f, fullgraph=True)
    x, c = torch.zeros(2), _WithMethod()
    assert torch.equal(cf(x, c), f(x, c))
    c.__dict__["m"] = lambda: 50
    assert torch.equal(cf(x, c), f(x, c))
    c.__dict__["nd"] = 100
    assert torch.equal(cf(x, c), f(x, c))


class _ByGetattr:
    def __init__(self):
        self.table = {"offset": 5}

    def __getattr__(self, name):  # only for names the instance and its class lack
        return self.__dict__["table"][name]


class _ConfigDict(dict):
    def __getattr__(self, name):
        return self[name]


class _EasyDict(dict):
    __getattr__ = dict.__getitem__


@pytest.mark.parametrize("make", [_ByGetattr, lambda: _ConfigDict(offset=5), lambda: _EasyDict(offset=5)])
def test_getattr_answer_follows_the_instance_dict(make):
    # a read answered by __getattr__ guarded nothing of the instance dict: a value set there
    # later (which Python finds first) was not seen
    def f(cfg, x):
        return x + cfg.offset

    cf = ember.compile(f)
    x = torch.zeros(2)
    c = make()
    same(cf(c, x), f(c, x))
    object.__setattr__(c, "offset", 100)
    same(cf(c, x), f(c, x))
    if isinstance(c, dict):
        c2 = make()
        c2["offset"] = 7  # the dict's item, read by the traced __getattr__
        same(cf(c2, x), f(c2, x))


def test_class_attribute_absence_follows_the_class():
    # a name missing from a Python class raises AttributeError in the trace (copy.copy asks
    # getattr(cls, "__copy__", None)); its class's version tag notices the name added later
    class Plain:
        pass

    class Child(Plain):
        pass

    def f(x, o):
        return x + (1 if getattr(type(o), "extra", None) is None else 2)

    cf = ember.compile(f, fullgraph=True)
    x = torch.zeros(2)
    same(cf(x, Child()), f(x, Child()))
    Plain.extra = True  # on the base
    same(cf(x, Child()), f(x, Child()))


# ---- dict reads remembered between calls (a load or check skipped while its dict's tag stays) ----

class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 3
        self.table = {"a": 1.0, "b": 2.0}
        self.one = {"a": 1.0}
        self.od = collections.OrderedDict(p=1.0, q=2.0)

    def scale(self, x):
        return x * 2

    def forward(self, x):
        y = self.scale(x) * self.k
        for name, v in self.table.items():
            y = y * v - len(name)
        for name in self.one:
            y = y + ord(name)
        first = next(iter(self.od))
        return y, first


def _changes():
    """(what, change(m)): each changes what forward reads, in a way its dict's tag shows."""
    def swap_table(m):
        del m.table["a"]
        m.table["a"] = 1.0  # same items, order b, a

    def rename_one(m):
        del m.one["a"]
        m.one["b"] = 1.0  # one key, another one

    def replace_dict(m):
        m.__dict__ = dict(m.__dict__, k=5)

    return [("int attribute", lambda m: setattr(m, "k", 4)),
            ("same int again", lambda m: setattr(m, "k", m.k)),
            ("method shadowed on the instance", lambda m: setattr(m, "scale", lambda x: x * 7)),
            ("dict order", swap_table),
            ("the key of a one-key dict", rename_one),
            ("OrderedDict.move_to_end", lambda m: m.od.move_to_end("p")),
            ("instance dict replaced", replace_dict),
            ("forward hook added", lambda m: m.register_forward_hook(lambda mod, a, out: (out[0] + 100, out[1])))]


@pytest.mark.parametrize("what,change", _changes(), ids=[w for w, _ in _changes()])
def test_remembered_dict_reads_follow_changes(what, change):
    """The guard remembers what a dict load found (and that a key was absent, or a dict's keys
    matched) while the dict's tag is unchanged; every change is seen at the next call."""
    m, twin = _Scaled(), _Scaled()
    cm = ember.compile(m)
    x = torch.randn(3)
    for _ in range(3):
        same(cm(x), twin(x))
    change(m)
    change(twin)
    for _ in range(2):
        same(cm(x), twin(x))


class _Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.lin(x)) + self.lin(x)


def _hook_changes():
    """(what, change(m)): each adds, replaces or removes hooks of a submodule after the compile."""
    def removed(m):
        m.lin.register_forward_hook(lambda mod, a, out: out * 3).remove()

    def replaced_dict(m):
        m.act._forward_hooks = collections.OrderedDict({0: lambda mod, a, out: out - 5})

    return [("forward pre-hook", lambda m: m.lin.register_forward_pre_hook(lambda mod, a: (a[0] * 2,))),
            ("forward hook", lambda m: m.act.register_forward_hook(lambda mod, a, out: out + 100)),
            ("pre-hook with kwargs",
             lambda m: m.lin.register_forward_pre_hook(lambda mod, a, kw: ((a[0] + 1,), kw), with_kwargs=True)),
            ("forward hook always called",
             lambda m: m.act.register_forward_hook(lambda mod, a, out: out * 3, always_call=True)),
            ("backward hook", lambda m: m.lin.register_full_backward_hook(lambda mod, gi, go: None)),
            ("hook added and removed", removed),
            ("hook dict replaced", replaced_dict)]


@pytest.mark.parametrize("what,change", _hook_changes(), ids=[w for w, _ in _hook_changes()])
def test_submodule_hooks_added_after_the_compile_run(what, change):
    """A module called with no hooks is checked by one NO_HOOKS guard over its hook dicts (found
    again only when its __dict__ changes); a hook added, removed or a dict replaced later is seen
    at the next call."""
    import copy

    m = _Blocks()
    twin = copy.deepcopy(m)
    cm = ember.compile(m)
    x = torch.randn(2, 3)
    for _ in range(3):
        same(cm(x), twin(x))
    assert "NO_HOOKS" in ember.testing.entries(m)[0]["guards"]
    change(m)
    change(twin)
    for _ in range(2):
        same(cm(x), twin(x))
