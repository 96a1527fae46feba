"""python -m ember.bench.inductor: ember.compile(m, backend="inductor") against torch.compile(m), per model.

Both run Inductor on the graph their frontend captured, so the comparison isolates the frontend: ember's
capture against TorchDynamo's in the first call, ember's cache hit and calling convention against
TorchDynamo's guards and wrapper in the steady state. Per model, in one run:

  cold first call   each system in its own fresh process with its own Inductor cache directory, empty
                    but for Inductor's one-time probe of the machine's vector ISAs (a dozen C++ test
                    builds, paid once per cache directory, the same for both systems), --repeats
                    times, alternating which system goes first; timed from the compile() call to the
                    first output: what the first call of a model not compiled before costs. Each frontend's own timers
                    give its capture time and its backend (AOTAutograd + Inductor) compile time.
  same kernels      the Python module Inductor writes for each graph in those cold runs, with comments,
                    size asserts and the benchmark harness removed and input names numbered in order of
                    use, compared between the systems.
  steady state      one process compiles both (the second one may load the first one's kernels from the
                    Inductor cache), then times eager, ember and torch.compile calls in rotating order,
                    round after round; the step is the median per system, the ratio ember / torch.compile
                    comes with a 95% bootstrap interval over the rounds.
  warm first call   in that process, after both frontends are reset: capture again, kernels from the cache.

The targets (issue [backends]): the step within 5% of torch.compile's (a faster step meets it), and a cold first call shorter
than torch.compile's by at least the capture time ember saves (torch capture - ember capture), i.e.
everything other than capture (Inductor compile, first run) no slower under ember.
Writes OUT/inductor_<device>[_small].json and .md; --readme rewrites that section of a README.
"""
import argparse
import contextlib
import datetime
import hashlib
import json
import os
import platform
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SYSTEMS = ("ember", "torch")
_CHILD = "--child"


# ---------------------------------------------------------------------------------------------- children

def _compile(system, model):
    import torch
    if system == "ember":
        import ember
        return ember.compile(model, backend="inductor")
    return torch.compile(model)


def _reset(system):
    import torch
    if system == "ember":
        import ember
        ember.reset()
    else:
        torch._dynamo.reset()


def _frontend_stats(system):
    """{graphs, breaks, capture_ms, backend_ms} from the frontend's own timers since its last reset."""
    if system == "ember":
        from ember import _C
        graphs = breaks = 0
        capture = backend = 0.0
        for code in _C._seen_codes():
            for e in _C.entries(code):
                graphs += 1
                breaks += bool(e["break"])
                capture += e.get("compile_s") or 0.0
                backend += e.get("backend_s") or 0.0
        return {"graphs": graphs, "breaks": breaks, "capture_ms": capture * 1e3, "backend_ms": backend * 1e3}
    from torch._dynamo.utils import compilation_time_metrics, counters
    total = sum(compilation_time_metrics.get("_compile.compile_inner", ()))
    backend = sum(compilation_time_metrics.get("OutputGraph.call_user_compiler", ()))
    return {"graphs": counters["stats"]["unique_graphs"], "breaks": sum(counters["graph_break"].values()),
            "capture_ms": (total - backend) * 1e3, "backend_ms": backend * 1e3}


def _clear_frontend_stats(system):
    _reset(system)
    if system == "torch":
        from torch._dynamo.utils import compilation_time_metrics, counters
        counters.clear()
        compilation_time_metrics.clear()


_ARG = re.compile(r"\barg\d+_\d+\b")


def normalize_code(code):
    """Inductor's output module reduced to what runs: no comments, size asserts or benchmark harness,
    inputs renamed in order of first use (the frontends order a graph's inputs differently)."""
    body = re.split(r"\ndef (?:get_args|benchmark_compiled_module)\(", code)[0]
    out, names, started = [], {}, False
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or "assert_size_stride" in s:
            continue
        if started:
            line = _ARG.sub(lambda m: names.setdefault(m.group(0), f"in{len(names)}"), line)
        elif "args.clear()" in s:
            started = True
        out.append(line.rstrip())
    # inputs are freed after their last use in placeholder order, which the frontends choose differently
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and out[j].lstrip().startswith("del ") and "#" not in out[j]:
            j += 1
        out[i:j] = sorted(out[i:j])
        i = max(j, i + 1)
    return "\n".join(out)


def _code_digest(codes):
    return hashlib.sha256("\n#--\n".join(normalize_code(c) for c in codes).encode()).hexdigest()[:16]


def _build(name, small):
    from .models import build
    model, inputs = build(name, small)
    return model.eval(), inputs


def _preimport(system):
    """The modules a first call through either frontend and Inductor loads (paid once per process,
    whichever frontend runs; TorchDynamo's capture timer would count those it happens to load first)."""
    import sympy  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch._functorch.aot_autograd  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
    if system == "ember":
        import ember  # noqa: F401


def child_cold(name, system, small, threads, code_dir):
    """One system's cold first call in this (fresh) process: {first_call_ms, capture_ms, backend_ms,
    graphs, breaks, max_err, code, kernels}."""
    import torch
    torch.set_num_threads(threads)
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    from .models import max_err
    model, inputs = _build(name, small)
    with torch.no_grad():
        ref = model(*inputs)
        t0 = time.perf_counter()
        _preimport(system)
        import_ms = (time.perf_counter() - t0) * 1e3
        _clear_frontend_stats(system)
        codes = []
        with mock.patch.object(GraphLowering, "save_output_code", codes.append):
            t0 = time.perf_counter()
            out = _compile(system, model)(*inputs)
            dt = time.perf_counter() - t0
    r = {"first_call_ms": dt * 1e3, **_frontend_stats(system), "import_ms": import_ms, "max_err": max_err(ref, out),
         "code": _code_digest(codes) if codes else None, "kernels": len(codes)}
    if code_dir and codes:
        with open(os.path.join(code_dir, f"{name}_{system}.py"), "w") as f:
            f.write("\n\n# ---- next graph ----\n\n".join(normalize_code(c) for c in codes))
    return r


def _bootstrap_ratio(a, b, n=2000, seed=0):
    """95% interval of median(a) / median(b) over rounds resampled with replacement (a, b paired)."""
    rng = random.Random(seed)
    k = len(a)
    got = []
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        got.append(statistics.median(a[i] for i in idx) / statistics.median(b[i] for i in idx))
    got.sort()
    return got[int(0.025 * n)], got[int(0.975 * n) - 1]


def child_steady(name, small, threads, warmup, rounds, min_rounds, budget_s):
    """Both systems in this process, steady state timed in rotating order; then warm first calls."""
    import torch
    torch.set_num_threads(threads)
    import ember
    import ember.testing

    from .models import max_err
    model, inputs = _build(name, small)
    fns = {"eager": model}
    errs = {}
    with torch.no_grad():
        ref = model(*inputs)
        for system in SYSTEMS:
            fns[system] = _compile(system, model)
            errs[system] = max_err(ref, fns[system](*inputs))
        for _ in range(warmup):
            for fn in fns.values():
                fn(*inputs)
        from torch._dynamo.utils import counters
        before = (ember.testing.counters()["frames"], counters["frames"]["total"])
        order = list(fns)
        samples = {k: [] for k in order}
        t_end = time.perf_counter() + budget_s
        for i in range(rounds):
            for k in order[i % 3:] + order[:i % 3]:
                fn = fns[k]
                t0 = time.perf_counter()
                fn(*inputs)
                samples[k].append(time.perf_counter() - t0)
            if i + 1 >= min_rounds and time.perf_counter() > t_end:
                break
        after = (ember.testing.counters()["frames"], counters["frames"]["total"])
        med = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
        lo, hi = _bootstrap_ratio(samples["ember"], samples["torch"])
        r = {"rounds": len(samples["eager"]), "step_ms": med, "ratio": med["ember"] / med["torch"],
             "ratio_lo": lo, "ratio_hi": hi, "max_err": errs,
             "steady_compiles": {"ember": after[0] - before[0], "torch": after[1] - before[1]}}
        warm = {}
        for system in SYSTEMS:  # a new wrapper each, after a reset: capture again, kernels from the cache
            _clear_frontend_stats(system)
            t0 = time.perf_counter()
            _compile(system, model)(*inputs)
            warm[system] = {"first_call_ms": (time.perf_counter() - t0) * 1e3, **_frontend_stats(system)}
        r["warm"] = warm
    return r


# ---------------------------------------------------------------------------------------------- parent

def _run_child(args, cache_dir, timeout):
    """Runs `python -m ember.bench.inductor --child ...` with its own Inductor cache; its JSON result or
    {'error': ...}."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "ember.bench.inductor", _CHILD] + args
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {p.returncode}: {tail[:300]}"}


@contextlib.contextmanager
def _cache_dir(template=None):
    """A temporary Inductor cache directory, a copy of template when given."""
    d = tempfile.mkdtemp(prefix="ember_inductor_bench_")
    try:
        if template:
            shutil.copytree(template, d, dirs_exist_ok=True)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _say(msg):
    print(f"[bench.inductor] {msg}", file=sys.stderr, flush=True)


def child_prime():
    """Inductor's probe of the vector ISAs, which it caches in its cache directory."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    return {"isa": str(pick_vec_isa())}


def child_warm():
    """A trivial compile through both systems, in a throwaway cache: the first process of a run would
    otherwise pay for reading torch's and the compiler's files from disk into the OS's file cache."""
    import torch
    x = torch.randn(8)
    for system in SYSTEMS:
        _compile(system, lambda t: torch.relu(t) + 1)(x)
    return {}


def measure(name, a, code_dir, template):
    """One model's row: cold first calls (a.repeats per system, fresh processes), the code comparison,
    the steady state and warm first calls (one process)."""
    row = {"model": name, "cold": {s: [] for s in SYSTEMS}, "errors": []}
    common = ["--threads", str(a.threads)] + (["--small"] if a.small else [])
    for rep in range(a.repeats):
        for system in (SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]):
            with _cache_dir(template) as d:
                r = _run_child(["cold", name, system, "--code-dir", code_dir or ""] + common, d, a.timeout)
            if "error" in r:
                row["errors"].append(f"{system} cold: {r['error']}")
            else:
                row["cold"][system].append(r)
            _say(f"{name} {system} cold #{rep + 1}: " + (r.get("error") or
                 f"first call {r['first_call_ms']:.0f} ms (capture {r['capture_ms']:.1f}, backend "
                 f"{r['backend_ms']:.0f}), graphs {r['graphs']}, code {r['code']}"))
    with _cache_dir() as d:
        r = _run_child(["steady", name, "--warmup", str(a.warmup), "--rounds", str(a.rounds), "--min-rounds",
                        str(a.min_rounds), "--budget", str(a.budget)] + common, d, a.timeout)
    if "error" in r:
        row["errors"].append(f"steady: {r['error']}")
    else:
        row["steady"] = r
        _say(f"{name} steady ({r['rounds']} rounds): ember {r['step_ms']['ember']:.3f} ms, torch.compile "
             f"{r['step_ms']['torch']:.3f} ms, eager {r['step_ms']['eager']:.3f} ms; ratio {r['ratio']:.3f} "
             f"[{r['ratio_lo']:.3f}, {r['ratio_hi']:.3f}]")
    summarize(row, a.tolerance)
    return row


def _med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def summarize(row, tolerance):
    """Adds the per-system medians of the cold runs and the two target verdicts."""
    cold = row["cold"]
    for s in SYSTEMS:
        for k in ("first_call_ms", "capture_ms", "backend_ms"):
            row[f"{s}_{k}"] = _med(cold[s], k)
        row[f"{s}_graphs"] = cold[s][0]["graphs"] if cold[s] else None
    codes = {s: {r["code"] for r in cold[s]} for s in SYSTEMS}
    row["same_code"] = (len(codes["ember"]) == 1 and codes["ember"] == codes["torch"] and None not in codes["ember"]) \
        if cold["ember"] and cold["torch"] else None
    if row["ember_first_call_ms"] is not None and row["torch_first_call_ms"] is not None:
        row["capture_saved_ms"] = row["torch_capture_ms"] - row["ember_capture_ms"]
        row["first_call_saved_ms"] = row["torch_first_call_ms"] - row["ember_first_call_ms"]
        row["first_call_target"] = row["first_call_saved_ms"] >= row["capture_saved_ms"]
    st = row.get("steady")
    if st:
        row["step_target"] = st["ratio"] <= 1 + tolerance
        row["step_interval_within"] = st["ratio_hi"] <= 1 + tolerance  # the whole 95% interval meets it


def header(a, argv):
    import torch
    from .__main__ import _cpu_name, _git_commit
    return {"schema": "ember.bench.inductor/1",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python -m ember.bench.inductor " + shlex.join(argv), "device": "cpu", "small": a.small,
            "models": a.model_names, "cpu": _cpu_name(), "cpu_count": os.cpu_count(), "threads": a.threads,
            "python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
            "ember_commit": _git_commit(), "repeats": a.repeats, "rounds": a.rounds, "budget_s": a.budget,
            "tolerance": a.tolerance, "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


# ---------------------------------------------------------------------------------------------- report

def _f(v, spec):
    return "-" if v is None else format(v, spec)


def _yes(v):
    return "-" if v is None else ("yes" if v else "**no**")


def markdown(result):
    from .report import describe_machine
    h = result["header"]
    lines = [f"Machine: {describe_machine(h)}. Device {h['device']}, {'small' if h['small'] else 'full-size'} "
             "configs, inference under torch.no_grad().", "", f"Command: `{h['command']}`", "",
             f"Cold first calls: the median of {h['repeats']} fresh processes per system, each with an empty Inductor "
             "cache (but for Inductor's one-time probe of the vector ISAs), timed from the compile() call. Capture and "
             "backend compile: each frontend's own timers in those runs; saved: torch.compile's minus ember's; the first "
             "call target: first call saved >= capture saved. A process's first capture also pays one-time costs "
             "(lazy imports, first fake-tensor dispatch) that the compile after it would otherwise pay: capture, warm "
             "is a second capture of the model in one process. Same kernels: the code "
             "Inductor generated for ember's graphs equals the code it generated for TorchDynamo's (comments and "
             "input names aside). Steps: medians of the rounds of one process (eager, ember, torch.compile timed in "
             f"rotating order); ratio = ember step / torch.compile step with its 95% bootstrap interval; target: at "
             f"most 1 + {h['tolerance']:g} (a faster step meets it).", "",
             "| model | graphs (ember / torch) | capture ms, cold (ember / torch) | backend compile ms (ember / torch) "
             "| first call ms (ember / torch) | first call saved ms | capture saved ms | first call target "
             "| capture ms, warm (ember / torch) | same kernels | step ms (ember / torch / eager) "
             "| step ratio [95% interval] | step target | warm first call ms (ember / torch) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        st = r.get("steady") or {}
        sm = st.get("step_ms") or {}
        warm = {s: (st.get("warm") or {}).get(s) or {} for s in SYSTEMS}
        ratio = (f"{st['ratio']:.3f} [{st['ratio_lo']:.3f}, {st['ratio_hi']:.3f}]" if st else "-")
        lines.append(
            f"| {r['model']} | {_f(r.get('ember_graphs'), 'd')} / {_f(r.get('torch_graphs'), 'd')} "
            f"| {_f(r.get('ember_capture_ms'), '.1f')} / {_f(r.get('torch_capture_ms'), '.1f')} "
            f"| {_f(r.get('ember_backend_ms'), '.0f')} / {_f(r.get('torch_backend_ms'), '.0f')} "
            f"| {_f(r.get('ember_first_call_ms'), '.0f')} / {_f(r.get('torch_first_call_ms'), '.0f')} "
            f"| {_f(r.get('first_call_saved_ms'), '.0f')} | {_f(r.get('capture_saved_ms'), '.0f')} "
            f"| {_yes(r.get('first_call_target'))} "
            f"| {_f(warm['ember'].get('capture_ms'), '.1f')} / {_f(warm['torch'].get('capture_ms'), '.1f')} "
            f"| {_yes(r.get('same_code'))} "
            f"| {_f(sm.get('ember'), '.3f')} / {_f(sm.get('torch'), '.3f')} / {_f(sm.get('eager'), '.3f')} "
            f"| {ratio} | {_yes(r.get('step_target'))} "
            f"| {_f(warm['ember'].get('first_call_ms'), '.0f')} / {_f(warm['torch'].get('first_call_ms'), '.0f')} |")
    errs = [f"- {r['model']}: {e}" for r in result["rows"] for e in r.get("errors", ())]
    if errs:
        lines += ["", "Errors:", ""] + errs
    rows = [r for r in result["rows"] if r.get("steady") and r.get("first_call_target") is not None]
    if rows:
        n_step = sum(bool(r["step_target"]) for r in rows)
        n_first = sum(bool(r["first_call_target"]) for r in rows)
        n_same = sum(bool(r.get("same_code")) for r in rows)
        lines += ["", f"Step at most {h['tolerance']:.0%} above torch.compile's: {n_step} of {len(rows)} models; cold first "
                  f"call shorter by at least the capture time saved: {n_first} of {len(rows)}; same kernels: "
                  f"{n_same} of {len(rows)}."]
    return "\n".join(lines) + "\n"


def write(result, a):
    stem = os.path.join(a.out, f"inductor_cpu{'_small' if a.small else ''}")
    os.makedirs(a.out, exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(stem + ".md", "w") as f:
        f.write(md)
    if a.readme:
        from .report import files_for, markers, update_readme
        files = files_for(stem + ".json", a.readme)
        begin, end = markers(os.path.basename(stem))
        section = "\n".join([begin.replace("python -m ember.bench ", "python -m ember.bench.inductor "), "",
                             "### ember + Inductor vs torch.compile", "",
                             f"Files: `{files['json']}`, `{files['md']}`.", "", md.rstrip("\n"), "", end]) + "\n"
        update_readme(a.readme, section)
    return stem


# ---------------------------------------------------------------------------------------------- main

def parse_args(argv):
    from .models import SUITE
    ap = argparse.ArgumentParser(prog="python -m ember.bench.inductor", description=__doc__.splitlines()[0],
                                 epilog="\n".join(__doc__.splitlines()[2:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(SUITE), help="comma-separated subset of the suite")
    ap.add_argument("--small", action="store_true", help="scaled-down configs and inputs (for a small CPU)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in every process")
    ap.add_argument("--repeats", type=int, default=3, help="cold first calls per system and model")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls per system before the steady state")
    ap.add_argument("--rounds", type=int, default=400, help="most timed rounds (one call of each system)")
    ap.add_argument("--min-rounds", type=int, default=40, help="fewest timed rounds")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of steady state after --min-rounds")
    ap.add_argument("--tolerance", type=float, default=0.05, help="the step target: |ratio - 1| at most this")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per child process")
    ap.add_argument("--out", default="results/inductor", help="directory for inductor_cpu[_small].json/.md")
    ap.add_argument("--readme", help="rewrite this README's section from the run")
    ap.add_argument("--keep-code", action="store_true", help="write the normalized generated code under OUT/code")
    ap.add_argument("--from", dest="from_json", metavar="JSON", help="render a saved run (.md, --readme) instead")
    a = ap.parse_args(argv)
    a.model_names = [n.strip() for n in a.models.split(",") if n.strip()]
    unknown = [n for n in a.model_names if n not in SUITE]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; suite: {', '.join(SUITE)}")
    return a


def _child_main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("prime", "warm", "cold", "steady"))
    ap.add_argument("model", nargs="?")
    ap.add_argument("system", nargs="?")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--code-dir", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--min-rounds", type=int, default=40)
    ap.add_argument("--budget", type=float, default=20.0)
    c = ap.parse_args(argv)
    if c.kind == "prime":
        r = child_prime()
    elif c.kind == "warm":
        r = child_warm()
    elif c.kind == "cold":
        r = child_cold(c.model, c.system, c.small, c.threads, c.code_dir)
    else:
        r = child_steady(c.model, c.small, c.threads, c.warmup, c.rounds, c.min_rounds, c.budget)
    print(json.dumps(r), flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [_CHILD]:
        return _child_main(argv[1:])
    a = parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            result = json.load(f)
        a.out, a.small = os.path.dirname(a.from_json) or ".", result["header"]["small"]
        for row in result["rows"]:
            summarize(row, result["header"]["tolerance"])
        write(result, a)
        print(markdown(result), end="")
        return result
    code_dir = os.path.join(a.out, "code") if a.keep_code else None
    if code_dir:
        os.makedirs(code_dir, exist_ok=True)
    result = {"header": header(a, argv), "rows": []}
    t0 = time.perf_counter()
    with _cache_dir() as template:
        r = _run_child(["prime"], template, a.timeout)
        result["header"]["isa"] = r.get("isa")
        with _cache_dir() as d:
            _run_child(["warm"], d, a.timeout)
        _say(f"Inductor's vector ISA probe: {r.get('isa') or r.get('error')}")
        for i, name in enumerate(a.model_names):
            _say(f"[{i + 1}/{len(a.model_names)}] {name}")
            result["rows"].append(measure(name, a, code_dir, template))
            if a.out:
                write(result, a)
    result["header"]["elapsed_s"] = round(time.perf_counter() - t0, 1)
    if a.out:
        _say(f"wrote {write(result, a)}.json/.md")
    print(markdown(result), end="")
    return result


if __name__ == "__main__":
    main()
