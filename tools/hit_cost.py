"""Cost of a cache hit on whole models, ember against torch.compile, side by side in one run.

Both compile each model with a no-op backend (its graph runs once at compile time and every
call returns that result), so a call costs the frontend's work only: guards, reading the graph
inputs, the per-call checks, the call into the compiled function. Lower is better.

    python tools/hit_cost.py [--device cpu|cuda] [--calls N] MODEL...   (torchvision model names)
"""
import argparse
import time

import torch
import torchvision

import ember


def nop(gm, example_inputs):
    with torch.no_grad():
        out = gm(*example_inputs)
    return lambda *args: out


def best_us(fn, x, calls, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(x)
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best / 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--device", default="cpu")
    p.add_argument("--calls", type=int, default=1000)
    a = p.parse_args()
    x = torch.randn(1, 3, 64, 64, device=a.device)
    print(f"cache hit with a no-op backend, {a.device}, best of 5 x {a.calls} calls, two interleaved rounds (us)")
    for name in a.models:
        m = getattr(torchvision.models, name)().eval().to(a.device)
        with torch.no_grad():
            ce = ember.compile(m, backend=nop)
            torch._dynamo.reset()
            ct = torch.compile(m, backend=nop)
            for f in (ce, ct):
                f(x), f(x)
            e1, t1 = best_us(ce, x, a.calls), best_us(ct, x, a.calls)
            e, t = min(e1, best_us(ce, x, a.calls)), min(t1, best_us(ct, x, a.calls))
        print(f"{name:24s} ember {e:8.1f}   torch.compile {t:8.1f}   ratio {t / e:5.2f}x")


if __name__ == "__main__":
    main()
