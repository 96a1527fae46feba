"""Leak tests: many cache-hit calls and many compile/reset cycles must not leak
Python objects, references or memory.

Bounds are generous (no timings): a leak of one small object per call shows up as
>= 100k objects / several MB; an honest run stays near zero.
"""
import gc
import os
import sys
import tracemalloc
import weakref

import torch

import ember
import ember.testing

N_HITS = 100_000
N_CYCLES = 1_000
MAX_RSS_GROWTH = 20 * 2**20  # bytes
MAX_OBJECT_GROWTH = 1_000  # gc-tracked objects
MAX_TRACED_GROWTH = 1 * 2**20  # bytes allocated through Python's allocators


def add(x, y):
    return x + y


def rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def snapshot(*objs):
    gc.collect()
    gc.collect()
    return {
        "rss": rss_bytes(),
        "objects": len(gc.get_objects()),
        "traced": tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0,
        "refs": [sys.getrefcount(o) for o in objs],
    }


def check(before, after, what):
    rss = after["rss"] - before["rss"]
    objects = after["objects"] - before["objects"]
    traced = after["traced"] - before["traced"]
    assert after["refs"] == before["refs"], f"{what}: reference counts changed {before['refs']} -> {after['refs']}"
    assert objects < MAX_OBJECT_GROWTH, f"{what}: {objects} more gc-tracked objects"
    assert traced < MAX_TRACED_GROWTH, f"{what}: {traced} more bytes traced by tracemalloc"
    if not os.environ.get("EMBER_ASAN_RUN"):  # AddressSanitizer's quarantine keeps freed memory
        assert rss < MAX_RSS_GROWTH, f"{what}: RSS grew by {rss / 2**20:.1f} MiB"


def test_no_leak_on_cache_hits_and_compile_reset_cycles():
    cf = ember.compile(add)
    x = torch.arange(4.0)
    y = torch.full((4,), 0.5)
    expected = x + y
    watched = (x, y, cf, add, add.__code__)

    # warm-up: allocator pools, lazy imports, the first compile
    for _ in range(1_000):
        cf(x, y)
    for _ in range(50):
        ember.reset()
        cf(x, y)
    ember.testing.reset_counters()

    tracemalloc.start()
    try:
        before = snapshot(*watched)
        for _ in range(N_HITS):
            out = cf(x, y)
        del out
        after_hits = snapshot(*watched)
        for _ in range(N_CYCLES):
            ember.reset()
            out = cf(x, y)
        del out
        after_cycles = snapshot(*watched)
    finally:
        tracemalloc.stop()

    c = ember.testing.counters()
    assert c["hits"] == N_HITS, c
    assert c["frames"] == N_CYCLES, c
    assert c["aborts"] == 0 and c["recompiles"] == 0, c
    torch.testing.assert_close(cf(x, y), expected, rtol=0, atol=0)

    check(before, after_hits, f"{N_HITS} cache hits")
    check(after_hits, after_cycles, f"{N_CYCLES} compile/reset cycles")
    check(before, after_cycles, "whole run")


def test_no_leak_of_outputs():
    """Every output of a compiled call is freed once the caller drops it."""
    import weakref
    cf = ember.compile(add)
    x, y = torch.arange(4.0), torch.ones(4)
    cf(x, y)
    refs = []
    for _ in range(100):
        refs.append(weakref.ref(cf(x, y)))
    gc.collect()
    assert all(r() is None for r in refs)
    ember.reset()
    r = weakref.ref(cf(x, y))
    gc.collect()
    assert r() is None


class Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x * self.weight


def test_compiled_modules_and_arguments_are_released():
    """Cache entries must not keep modules, parameters or arguments alive."""
    import weakref
    x = torch.arange(4.0)
    refs = []
    for _ in range(200):
        m = Holder()
        cm = ember.compile(m)
        torch.testing.assert_close(cm(x), x * m.weight, rtol=0, atol=0)
        a = torch.ones(4)
        cm(a)
        refs += [weakref.ref(m), weakref.ref(m.weight), weakref.ref(cm), weakref.ref(a)]
        del m, cm, a
    gc.collect()
    assert ember.testing.counters()["frames"] == 1  # one entry serves every instance
    assert sum(r() is not None for r in refs) == 0


# ---- the cache keeps no user object alive (weak identity guards, no strong memo keys) ----

class Leaf(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class WithBreak(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Leaf(), Leaf()

    def forward(self, x):
        y = self.a(x)
        print(end="")  # graph break: transformed code, a resume function, separate entries
        return self.b(y) + 1


def live(cls):
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def test_compiled_model_is_freed_with_its_submodules():
    m = torch.nn.Sequential(Leaf(), torch.nn.ReLU(), Leaf())
    refs = [weakref.ref(s) for s in m.modules()]
    c = ember.compile(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(c(x), m(x))
    del m, c
    gc.collect()
    assert [r() for r in refs if r() is not None] == []


def test_build_compile_call_drop_loop_does_not_grow():
    x = torch.randn(2, 4)
    for cls in (Leaf, WithBreak):
        base = live(cls)
        for i in range(30):
            m = cls()
            c = ember.compile(m)
            torch.testing.assert_close(c(x), m(x))
            del m, c
            assert live(cls) == base, f"{cls.__name__}: {live(cls) - base} alive after {i + 1} rounds"


def test_module_passed_as_an_argument_is_not_kept_alive():
    f = ember.compile(lambda mod, x: mod(x) * 2)
    x = torch.randn(2, 4)
    for _ in range(3):
        m = WithBreak()
        r = weakref.ref(m)
        torch.testing.assert_close(f(m, x), m(x) * 2)
        del m
        gc.collect()
        assert r() is None


def test_entry_of_a_dead_identity_guarded_object_is_invalidated_and_freed():
    """A class passed as an argument is guarded by identity: the entry holds it weakly, and
    when it dies the entry is dropped, never to match an object that reuses its address."""
    def apply(cls, x):
        return x * cls.k + 1

    f = ember.compile(apply)
    x = torch.randn(3)
    cls = type("C", (), {"k": 2.0})
    cls_ref = weakref.ref(cls)
    torch.testing.assert_close(f(cls, x), x * 2.0 + 1)
    assert ember.testing.code_state(apply)["entries"] == 1
    del cls
    gc.collect()
    assert cls_ref() is None
    assert ember.testing.code_state(apply)["entries"] == 0
    for k in (3.0, 4.0):  # new classes, maybe at the old address: compiled afresh
        cls = type("C", (), {"k": k})
        torch.testing.assert_close(f(cls, x), x * k + 1)
        del cls


def test_entry_for_a_closure_does_not_keep_its_cells_alive():
    """A nested function passed as an argument is guarded by its code, its cells read through
    it: the entry keeps neither the function nor what its cells hold, and serves the next
    closure the same def makes."""
    def apply(fn, x):
        return fn(x) + 1

    f = ember.compile(apply)
    x = torch.randn(3)

    def make(k):
        held = torch.nn.Linear(3, 3)

        def g(y):
            return held(y) * k  # a closure over a module: only g keeps it
        return g, weakref.ref(held)

    g, held_ref = make(2.0)
    torch.testing.assert_close(f(g, x), g(x) + 1)
    del g
    gc.collect()
    assert held_ref() is None
    for _ in range(2):
        g = make(2.0)[0]
        torch.testing.assert_close(f(g, x), g(x) + 1)
        del g
    assert ember.testing.code_state(apply)["entries"] == 1


def test_code_registry_does_not_keep_codes_alive():
    ns = {}
    exec(compile("def fresh(x):\n    return x * 3\n", "<fresh-code>", "exec"), ns)  # a code no module holds
    fn = ns.pop("fresh")
    code_ref = weakref.ref(fn.__code__)
    torch.testing.assert_close(ember.compile(fn)(torch.ones(2)), torch.full((2,), 3.0))
    assert ember.testing.code_state(fn)["entries"] == 1
    del fn, ns
    gc.collect()
    assert code_ref() is None


def dyn(x, n):
    b, s = x.shape
    y = x.view(b * s)[: b * s - 1] + n
    return y.sum(), y.shape, x[:, : s // 2]


def test_no_leak_with_symbolic_sizes():
    """Hits of a graph with symbolic sizes (new sizes every call: the SHAPE check, size nodes)
    and compile/reset cycles of it."""
    cf = ember.compile(dyn, dynamic=True)
    xs = [torch.randn(b, s) for b in (2, 3, 5) for s in (4, 6, 7)]
    for i, x in enumerate(xs):  # warm up: one compile, then hits
        cf(x, i + 2)
    before = snapshot(dyn, cf, xs[0])
    for i in range(20_000):
        cf(xs[i % len(xs)], i % 5 + 2)
    check(before, snapshot(dyn, cf, xs[0]), "dynamic hits")
    before = snapshot(dyn, xs[0])
    for i in range(300):
        ember.reset()
        ember.compile(dyn, dynamic=True)(xs[i % len(xs)], 3)
        ember.compile(dyn)(xs[(i + 1) % len(xs)], 4)
    ember.reset()
    check(before, snapshot(dyn, xs[0]), "dynamic compile/reset cycles")
    assert ember.testing.counters()["fallbacks"] == 0
