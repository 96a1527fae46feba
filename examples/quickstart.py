"""ember quickstart: compile a real model (torchvision ResNet-18, random weights) and a small
function, then show the captured graph, the guards, the capture time and the speed against
eager PyTorch. Run with `make demo`."""
import statistics
import time
import warnings

import torch
import torch.nn.functional as F
import torchvision

import ember
import ember.testing


def timed_pair(a, b, *args, repeats=10):
    """Medians of a(*args) and b(*args), calls interleaved so machine noise hits both alike."""
    ta, tb = [], []
    for _ in range(repeats):
        for fn, ts in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn(*args)
            ts.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def show(title, text, limit):
    lines = text.rstrip("\n").split("\n")
    print(f"--- {title} ({len(lines)} lines) ---")
    print("\n".join(lines[:limit]))
    if len(lines) > limit:
        print(f"  ... {len(lines) - limit} more")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    warnings.simplefilter("always", ember.EmberWarning)

    # 1. A function: the graph and guards are small enough to read whole.
    def gelu_mlp(x, w1, w2):
        h = F.gelu(x @ w1.t())
        return F.layer_norm(h @ w2.t() + x, x.shape[-1:])

    x, w1, w2 = torch.randn(8, 64), torch.randn(256, 64), torch.randn(64, 256)
    f = ember.compile(gelu_mlp)
    ember.testing.reset_counters()
    t0 = time.perf_counter()
    out = f(x, w1, w2)
    first = time.perf_counter() - t0
    entry = ember.testing.entries(gelu_mlp)[0]
    print("== ember.compile(gelu_mlp) ==")
    show("graph", entry["graph"], 40)
    show("guards", entry["guards"], 20)
    print(f"first call (capture + run): {first * 1e3:.2f} ms; "
          f"max |ember - eager| = {(out - gelu_mlp(x, w1, w2)).abs().max().item():.2e}")

    # 2. A real model.
    ember.testing.reset_counters()
    model = torchvision.models.resnet18().eval()
    inp = torch.randn(2, 3, 160, 160)
    cmodel = ember.compile(model)
    with torch.no_grad():
        model(inp)  # warm torch up so the first compiled call measures ember, not torch's start
        t0 = time.perf_counter()
        got = cmodel(inp)
        first = time.perf_counter() - t0
        eager_step, ember_step = timed_pair(model, cmodel, inp)
        ref = model(inp)
    entry = ember.testing.entries(model)[0]
    c = ember.testing.counters()
    print()
    print("== ember.compile(torchvision.models.resnet18()) ==")
    show("graph", entry["graph"], 12)
    show("guards", entry["guards"], 8)
    print(f"graphs: {c['frames']}, frames run as plain Python: {c['aborts']}, ops in graph: {entry['ops']}, "
          f"graph inputs (params/buffers/inputs): {entry['inputs']}")
    print(f"capture time (trace, guards, compile; measured by ember): {entry['compile_s'] * 1e3:.1f} ms "
          f"(first call including one run: {first * 1e3:.1f} ms)")
    print(f"step time: eager {eager_step * 1e3:.2f} ms, ember {ember_step * 1e3:.2f} ms "
          f"(ratio {eager_step / ember_step:.2f}x; the eager backend runs the same kernels)")
    print(f"max |ember - eager| = {(got - ref).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
