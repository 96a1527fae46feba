"""Cache-hit overhead and first-call capture time: ember vs torch.compile(backend="eager").

    python -m ember.bench.overhead [--calls 20000] [--repeats 7] [--out results.json]

Per-call cost of a cache hit = (compiled call - eager call) on f(x, y) = x + y with
4-element tensors, measured side by side in one process (median over repeats of a loop).
Capture time = the first call of a freshly compiled function (trace, guards, compile with
the eager backend), for ember and for TorchDynamo, on the same functions and inputs.
"""
import argparse
import json
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import ember
import ember.testing


def add(x, y):
    return x + y


def pointwise_chain(x, y):
    a = F.gelu(x) * torch.sigmoid(y)
    b = torch.tanh(a + x * 0.5) - y.exp().clamp(max=4.0)
    return (b * b).sum(dim=-1)


def mlp(x, w1, b1, w2, b2):
    h = F.linear(x, w1, b1).relu()
    h = F.linear(h, w2, b2)
    return F.layer_norm(h, h.shape[-1:])


def attention(q, k, v):
    b, t, d = q.shape
    s = (q @ k.transpose(-2, -1)) / d ** 0.5
    p = s.softmax(dim=-1)
    o = p @ v
    return o.reshape(b, t, d).permute(1, 0, 2).contiguous()


def long_chain(x):
    for_copy = x
    y = x.sin() + 1
    y = y * 2 - x
    y = y.cos().abs() + y.exp().clamp(max=3)
    y = y.view(-1, 4).t().contiguous().view(-1)
    y = torch.cat([y, for_copy.view(-1)])
    y = y.relu() + y.sigmoid() * y.tanh()
    y = y[::2] * y[1::2]
    return y.sum(), y.mean(), y.max()


def cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return [
        ("add", add, (r(4), r(4))),
        ("pointwise_chain", pointwise_chain, (r(64, 256), r(64, 256))),
        ("mlp", mlp, (r(32, 128), r(256, 128), r(256), r(128, 256), r(128))),
        ("attention", attention, (r(2, 16, 32), r(2, 16, 32), r(2, 16, 32))),
        ("long_chain", long_chain, (r(64, 8),)),
    ]


def per_call(fn, args, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - t0) / calls


def hit_overhead(calls, repeats):
    x, y = torch.ones(4), torch.ones(4)
    torch._dynamo.reset()
    ember.reset()
    ce = ember.compile(add)
    ct = torch.compile(add, backend="eager")
    ce(x, y), ct(x, y)
    eager, emb, tc = [], [], []
    for _ in range(repeats):  # interleaved, so drift hits all three alike
        eager.append(per_call(add, (x, y), calls))
        emb.append(per_call(ce, (x, y), calls))
        tc.append(per_call(ct, (x, y), calls))
    e, m, t = (statistics.median(v) * 1e6 for v in (eager, emb, tc))
    return {"eager_call_us": e, "ember_call_us": m, "torch_compile_call_us": t,
            "ember_overhead_us": m - e, "torch_compile_overhead_us": t - e,
            "overhead_ratio": (t - e) / max(m - e, 1e-3)}


def capture_times(repeats):
    rows = []
    for name, fn, args in cases():
        em, tc = [], []
        for _ in range(repeats):
            ember.reset()
            cf = ember.compile(fn)
            t0 = time.perf_counter()
            got = cf(*args)
            em.append(time.perf_counter() - t0)
            torch._dynamo.reset()
            ct = torch.compile(fn, backend="eager")
            t0 = time.perf_counter()
            ct(*args)
            tc.append(time.perf_counter() - t0)
        c = ember.testing.counters()
        if not ember.testing.entries(fn):
            raise RuntimeError(f"ember did not compile {name}: {ember.testing.code_state(fn)}")
        ref = fn(*args)
        ok = all(torch.allclose(a, b) for a, b in zip(ref if isinstance(ref, tuple) else (ref,),
                                                      got if isinstance(got, tuple) else (got,)))
        e_ms, t_ms = statistics.median(em) * 1e3, statistics.median(tc) * 1e3
        rows.append({"function": name, "ember_capture_ms": e_ms, "dynamo_capture_ms": t_ms,
                     "speedup": t_ms / e_ms, "matches_eager": ok, "ember_aborts": c["aborts"]})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    ember.testing.reset_counters()
    res = {"machine": platform.machine(), "python": sys.version.split()[0], "torch": torch.__version__,
           "command": "python -m ember.bench.overhead " + " ".join(argv if argv is not None else sys.argv[1:])}
    res["hit"] = hit_overhead(a.calls, a.repeats)
    res["capture"] = capture_times(max(3, a.repeats // 2))
    h = res["hit"]
    print(f"cache hit on f(x, y) = x + y, 4-element tensors (median of {a.repeats} x {a.calls} calls)")
    print("| | per call | overhead over eager |")
    print("|---|---|---|")
    print(f"| eager | {h['eager_call_us']:.2f} us | |")
    print(f"| ember | {h['ember_call_us']:.2f} us | {h['ember_overhead_us']:.2f} us |")
    print(f"| torch.compile(backend=\"eager\") | {h['torch_compile_call_us']:.2f} us | "
          f"{h['torch_compile_overhead_us']:.2f} us |")
    print()
    print("first call (capture + guards + eager backend)")
    print("| function | ember | TorchDynamo | ratio |")
    print("|---|---|---|---|")
    for r in res["capture"]:
        print(f"| {r['function']} | {r['ember_capture_ms']:.2f} ms | {r['dynamo_capture_ms']:.1f} ms | "
              f"{r['speedup']:.0f}x |" + ("" if r["matches_eager"] and not r["ember_aborts"] else " (!)"))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    import ember.testing  # noqa: F401
    main()
