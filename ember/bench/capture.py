"""Capture time of whole models: ember vs TorchDynamo (torch.compile(backend="eager")).

    python -m ember.bench.capture [--models resnet18,mobilenet_v3_large] [--size 64]

Capture = first call of a freshly compiled model minus one eager step, measured side by side
in one process on the same model and input (random weights, no downloads, one thread).
Models that ember cannot capture whole yet are reported with their frame counts.
"""
import argparse
import statistics
import time

import torch

import ember
import ember.testing


def _models():
    import torchvision.models as tvm
    return {"resnet18": tvm.resnet18, "resnet50": tvm.resnet50, "mobilenet_v3_large": tvm.mobilenet_v3_large,
            "vit_b_16": tvm.vit_b_16}


def _step(fn, x):
    t0 = time.perf_counter()
    fn(x)
    return time.perf_counter() - t0


def measure(name, size, repeats):
    m = _models()[name]().eval()
    x = torch.randn(1, 3, size, size)
    with torch.no_grad():
        m(x)
        eager = statistics.median(_step(m, x) for _ in range(5))
        caps = []
        for _ in range(repeats):
            ember.reset()
            ember.testing.reset_counters()
            caps.append(_step(ember.compile(m), x) - eager)
        c = ember.testing.counters()
        torch._dynamo.reset()
        dyn = _step(torch.compile(m, backend="eager"), x) - eager
    e = statistics.median(caps)
    return {"model": name, "ember_ms": e * 1e3, "dynamo_ms": dyn * 1e3, "ratio": dyn / e, "graphs": c["frames"],
            "frames_plain_python": c["aborts"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v3_large")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"capture time, input 1x3x{a.size}x{a.size}, median of {a.repeats} for ember")
    print("| model | ember | TorchDynamo | ratio | graphs | frames run as plain Python |")
    print("|---|---|---|---|---|---|")
    for n in a.models.split(","):
        r = measure(n, a.size, a.repeats)
        print(f"| {n} | {r['ember_ms']:.0f} ms | {r['dynamo_ms']:.0f} ms | {r['ratio']:.0f}x | {r['graphs']} | "
              f"{r['frames_plain_python']} |")


if __name__ == "__main__":
    main()
