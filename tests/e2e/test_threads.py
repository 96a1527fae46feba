"""Threads: compiled callables called, compiled and reset from several threads at once.

The GIL is released inside torch ops (while tracing, on meta tensors, and while graphs run),
so another thread can compile the same code object, run its entries or call ember.reset()
in the middle of any of these; every result must equal eager and nothing may be freed while
in use (run this file under `make asan` too).
"""
import sys
import threading

import torch

import ember
import ember.testing


def shared(x, y):
    return torch.relu(x * 2 + y).sum(0)


def with_break(x):
    y = torch.sin(x) + 1
    print(end="")  # a graph break: transformed code and a resume function
    return (y * x).mean(0)


def helper(x):
    return x.cos() * 3


def outer(x, n):
    z = helper(x) + n
    if n % 2:
        z = helper(z)
    return z - 1


def through_backend(x):
    return (x * x + 1).sum(1)


def forward_backend(gm, example_inputs):
    """A Python backend: the graph's first call compiles it under the compile lock."""
    return gm.forward


def apply(fn, x):
    return fn(x) * 2


def make_arg(k):
    def g(y):  # a fresh function per call: guarded by identity (weakly), invalidated when it dies
        return y - k
    return g


def make_distinct(k):
    def distinct(x):
        return torch.tanh(x + k) * k
    return distinct


FNS = [(shared, lambda x: (x, x + 1)), (with_break, lambda x: (x,)), (outer, lambda x: (x, 3)),
       (outer, lambda x: (x, 4)), (apply, lambda x: (make_arg(x.shape[0] % 2), x))]


def worker(tid, iters, errors, barrier):
    compiled = [(ember.compile(f), f, args) for f, args in FNS]
    compiled.append((ember.compile(through_backend, backend=forward_backend), through_backend, lambda x: (x,)))
    distinct = make_distinct(tid + 1)
    cd = ember.compile(distinct)
    barrier.wait()
    try:
        for i in range(iters):
            n = 2 + (i + tid) % 3  # changing shapes: recompiles
            x = torch.randn(n, 3)
            for cf, f, args in compiled:
                a = args(x)
                torch.testing.assert_close(cf(*a), f(*a))
            torch.testing.assert_close(cd(x), distinct(x))
            if (i + tid) % 7 == 0:
                ember.reset()
            if i % 25 == 0:  # a fresh compiled callable of a fresh closure
                cd = ember.compile(make_distinct(tid + 1))
    except BaseException as e:  # noqa: BLE001 - reported in the main thread
        errors.append((tid, repr(e)))


def test_eight_threads_compile_call_and_reset_concurrently():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often
    errors = []
    n_threads, iters = 8, 150
    barrier = threading.Barrier(n_threads)
    threads = [threading.Thread(target=worker, args=(t, iters, errors, barrier)) for t in range(n_threads)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock?)"
    assert errors == [], errors
    c = ember.testing.counters()
    assert c["frames"] > 0 and c["hits"] > 0, c
    # still usable afterwards, from this thread
    ember.reset()
    x = torch.randn(4, 3)
    torch.testing.assert_close(ember.compile(shared)(x, x), shared(x, x))


def test_two_threads_missing_on_one_code_compile_it_once():
    """A thread that misses while another compiles the same code waits for the compile lock
    and then finds the new entry instead of compiling a second copy."""
    ember.reset()
    ember.testing.reset_counters()
    cf = ember.compile(shared)
    x = torch.randn(5, 3)
    barrier = threading.Barrier(4)
    out, errors = [], []

    def go():
        barrier.wait()
        try:
            out.append(cf(x, x))
        except BaseException as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    for o in out:
        torch.testing.assert_close(o, shared(x, x))
    assert ember.testing.code_state(shared)["entries"] == 1
    assert ember.testing.counters()["frames"] == 1


def test_fork_while_another_thread_holds_the_compile_lock():
    """A child forked while another thread compiles (holding the compile lock, which that
    thread will never release in the child) compiles normally."""
    import os
    import time

    started, release = threading.Event(), threading.Event()

    def slow_backend(gm, example_inputs):
        started.set()
        release.wait(60)
        return gm.forward

    x = torch.randn(3, 3)
    t = threading.Thread(target=lambda: ember.compile(through_backend, backend=slow_backend)(x))
    t.start()
    assert started.wait(60)
    pid = os.fork()
    if pid == 0:  # the child: only this thread exists
        code = 3
        try:
            code = 0 if torch.equal(ember.compile(shared)(x, x), shared(x, x)) else 1
        finally:
            os._exit(code)
    release.set()
    t.join(60)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung on the compile lock")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


_local = threading.local()


def reads_a_thread_local(x):
    return torch.cat([x, _local.t]) * _local.k


def test_threading_local_attributes_are_each_threads_own():
    """A threading.local's attributes are read in the trace, each guarded by a getattr at guard
    time: a call from another thread reads that thread's values (and recompiles for another
    constant), never the compiling thread's."""
    from tests.helpers import assert_same

    ember.reset()
    cf = ember.compile(reads_a_thread_local, fullgraph=True)
    x = torch.ones(1)
    _local.t, _local.k = torch.full((1,), 2.0), 3
    results = {}

    def worker():
        _local.t, _local.k = torch.zeros(1), 5
        results["other"] = (cf(x), reads_a_thread_local(x))
        _local.t = torch.full((1,), 7.0)
        results["other2"] = (cf(x), reads_a_thread_local(x))

    assert_same(cf(x), reads_a_thread_local(x))
    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert_same(*results["other"])
    assert_same(*results["other2"])
    assert_same(cf(x), reads_a_thread_local(x))
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"]) == (2, 0, 0), c


def stores_to_a_thread_local(x, loc):
    loc.t = x
    loc.n = 3
    return x + loc.n, loc.t is x


def test_stores_to_a_threading_local_go_to_the_calling_threads_values():
    """Attribute stores on a threading.local are replayed after the graph through its own
    __setattr__: the calling thread's values change, another thread's do not."""
    ember.reset()
    loc = threading.local()
    cf = ember.compile(stores_to_a_thread_local, fullgraph=True)
    x = torch.ones(2)
    out, same = cf(x, loc)
    assert torch.equal(out, x + 3) and same and loc.t is x and loc.n == 3
    seen = {}

    def worker():
        y = torch.zeros(2)
        seen["out"] = cf(y, loc)
        seen["mine"] = loc.t is y

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert torch.equal(seen["out"][0], torch.full((2,), 3.0)) and seen["out"][1] and seen["mine"]
    assert loc.t is x  # this thread's value is untouched
    c = ember.testing.counters()
    assert (c["breaks"], c["aborts"]) == (0, 0), c
