"""python -m ember.fuzz --seed S --count N --backend eager|aot_eager [--jobs J] [--out DIR] [--minimize]
[--triage-torch] [--start I] [--timeout T] [--dynamic none|true|false] [--capture-scalars]"""
import argparse
import os
import sys

from . import fuzz_run


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ember.fuzz", description="ember's differential fuzzer")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="directory for failing programs and their minimized repros")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--minimize-budget", type=float, default=180.0, help="seconds per failure")
    ap.add_argument("--minimize-per-kind", type=int, default=0,
                    help="minimize at most this many failures of each kind (0: all)")
    ap.add_argument("--triage-torch", action="store_true",
                    help="re-run each failure under torch.compile(backend=...) and count shared ones apart")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program before it counts as a hang")
    ap.add_argument("--known-rate", type=float, default=None,
                    help="how often code hitting already-known defects is generated (0..1, default 1: as often as other code)")
    ap.add_argument("--dynamic", choices=("none", "true", "false"), default="none",
                    help="ember.compile's dynamic= for every program (default None: automatic dynamic)")
    ap.add_argument("--capture-scalars", action="store_true",
                    help="x.item(), x.nonzero(), x[mask] captured in the graph (ember.config.capture_scalar_outputs "
                         "and capture_dynamic_output_shape_ops) in every program")
    ap.add_argument("--why", action="store_true",
                    help="list why frames ran as plain Python (each reason, with the number of programs)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    os.environ["EMBER_FUZZ_DYNAMIC"] = a.dynamic  # read by the workers (runner._compile)
    if a.capture_scalars:
        os.environ["EMBER_CAPTURE_SCALAR_OUTPUTS"] = "1"  # ember.config's defaults in the workers
        os.environ["EMBER_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS"] = "1"
    log = (lambda *_: None) if a.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    summary = fuzz_run(a.seed, a.count, a.backend, jobs=a.jobs, out=a.out, minimize=a.minimize,
                       triage_torch=a.triage_torch, timeout=a.timeout, start=a.start, log=log,
                       minimize_budget=a.minimize_budget, minimize_per_kind=a.minimize_per_kind, known_rate=a.known_rate)
    if a.why:
        for reason, n in summary["plain_why"]:
            print(f"{n:5d}  {reason}")
    print(summary["line"])
    return 1 if summary["counts"]["wrong"] + summary["counts"]["crash"] + summary["counts"]["hang"] \
        + summary["counts"]["internal"] else 0


if __name__ == "__main__":
    sys.exit(main())
