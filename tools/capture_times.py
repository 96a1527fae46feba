"""Capture times of the public suite models under ember (eager backend), for before/after
comparisons of the tracer on one machine.

Usage: PYTHONPATH=<checkout> python tools/capture_times.py [MODELS] [N]
MODELS: comma-separated suite names (default: all of ember.bench.models' suite); N captures per
model (default 4), each after ember.reset(). Prints a dict {model: [capture ms, ...]} (the sum
of the cache entries' compile_s, as ember.bench's "capture ms"). Run two checkouts alternately,
several processes each, and compare medians without each process's first capture (one-time
costs of the process); on a shared machine compare minima too.
"""
import sys

import torch

import ember
from ember import _C
from ember.bench import models

SUITE = ("resnet18,resnet50,mobilenet_v3_large,vit_b_16,bert,gpt2,llama,t5_encoder,pointwise_chain,"
         "mlp_block")


def capture_ms():
    return sum((e.get("compile_s") or 0.0) for c in _C._seen_codes() for e in _C.entries(c)) * 1e3


def main():
    names = (sys.argv[1] if len(sys.argv) > 1 else SUITE).split(",")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    out = {}
    for name in names:
        m, inp = models.build(name, small=False)
        if not isinstance(inp, (tuple, list)):
            inp = (inp,)
        times = []
        with torch.no_grad():
            for _ in range(n):
                ember.reset()
                ember.compile(m, backend="eager")(*inp)
                times.append(round(capture_ms(), 3))
        out[name] = times
    print(repr(out))


if __name__ == "__main__":
    main()
