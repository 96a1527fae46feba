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

--device cuda: every process builds the model and inputs on the GPU, every timing (cold and warm first
calls, each steady-state call) is bracketed by torch.cuda.synchronize(), the header names the GPU; the
primed cache directory also holds what Triton builds once per cache directory (its CUDA driver
helpers: a trivial kernel compiled in it). --threads defaults to 1 on cpu, to torch's default on cuda.

Time: per model, 2 x --repeats cold processes (interpreter, imports and CUDA start, then a cold
compile) and one steady-state process (two compiles, warm-up, up to --budget s of rounds, two warm
compiles). The rows are saved after every process (a row still being measured says partial), so a
run killed at any point leaves OUT/inductor_*.json/.md with what was done; SIGTERM ends the run the
same way (its child killed, exit 143). To fit a time limit: --max-time S (start no process after S s;
the models left are listed as not run; a process that has started runs to its end or --timeout),
--repeats 1 --budget 3 --rounds 100 --min-rounds 20 (about 4 processes of 10-60 s per model on an
H200), a --models subset, --timeout for one process. --from A.json,B.json merges runs of several
parts (rows in suite order, a later part's row replacing an earlier one's) into OUT and --readme; one
file re-renders that run.
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
DEFAULT_OUT = "results/inductor"


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


def _setup(device, threads):
    """A child's torch: its thread count (None: torch's default) and, for cuda, a usable GPU."""
    import torch
    if threads:
        torch.set_num_threads(threads)
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no CUDA device")
    return torch


def _sync(device):
    """Waits for the device's queued work (cuda), so that a timing covers it."""
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def _build(name, small, device="cpu"):
    """The suite model in eval mode and its inputs, both on device."""
    import torch

    from .models import build
    model, inputs = build(name, small)
    model = model.eval().to(device)
    return model, tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)


def _preimport(system, device="cpu"):
    """The modules a first call through either frontend and Inductor loads (paid once per process,
    whichever frontend runs; TorchDynamo's capture timer would count those it happens to load first)."""
    import sympy  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch._functorch.aot_autograd  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
    if device == "cuda":
        with contextlib.suppress(Exception):
            import torch._inductor.codegen.triton  # noqa: F401
            import triton  # noqa: F401
    if system == "ember":
        import ember  # noqa: F401


def child_cold(name, system, small, threads, code_dir, device="cpu"):
    """One system's cold first call in this (fresh) process: {first_call_ms, capture_ms, backend_ms,
    graphs, breaks, max_err, code, kernels}."""
    torch = _setup(device, threads)
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    from .models import max_err
    model, inputs = _build(name, small, device)
    with torch.no_grad():
        ref = model(*inputs)  # eager first: CUDA context, cuBLAS/cuDNN handles and the like are not charged
        _sync(device)
        t0 = time.perf_counter()
        _preimport(system, device)
        import_ms = (time.perf_counter() - t0) * 1e3
        _clear_frontend_stats(system)
        codes = []
        with mock.patch.object(GraphLowering, "save_output_code", codes.append):
            _sync(device)
            t0 = time.perf_counter()
            out = _compile(system, model)(*inputs)
            _sync(device)
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


def child_steady(name, small, threads, warmup, rounds, min_rounds, budget_s, device="cpu"):
    """Both systems in this process, steady state timed in rotating order (each call between two
    device synchronizations on cuda); then warm first calls."""
    torch = _setup(device, threads)
    import ember
    import ember.testing

    from .models import max_err
    model, inputs = _build(name, small, device)
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
                _sync(device)
                t0 = time.perf_counter()
                fn(*inputs)
                _sync(device)
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
            _sync(device)
            t0 = time.perf_counter()
            _compile(system, model)(*inputs)
            _sync(device)
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


def child_prime(device="cpu"):
    """What Inductor and Triton build once per cache directory, built in it: Inductor's probe of the
    vector ISAs; on cuda also Triton's CUDA driver helpers, by compiling a trivial kernel (on 3 elements,
    unlike any kernel of the suite). {isa, gpu}."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    r = {"isa": str(pick_vec_isa())}
    if device == "cuda":
        torch = _setup(device, None)
        torch.compile(lambda t: torch.sin(t) * 3 + 1)(torch.ones(3, device="cuda"))
        torch.cuda.synchronize()
        torch._dynamo.reset()
        r["gpu"] = torch.cuda.get_device_name(0)
    return r


def child_warm(device="cpu"):
    """A trivial compile through both systems, in a throwaway cache: the first process of a run would
    otherwise pay for reading torch's and the compiler's files from disk into the OS's file cache."""
    torch = _setup(device, None)
    x = torch.randn(8, device=device)
    for system in SYSTEMS:
        _compile(system, lambda t: torch.relu(t) + 1)(x)
    _sync(device)
    return {}


def _left(a):
    """Seconds left under --max-time (inf without one)."""
    return a.deadline - time.perf_counter() if a.deadline else float("inf")


def _common_args(a):
    return ["--device", a.device] + (["--threads", str(a.threads)] if a.threads else []) + \
        (["--small"] if a.small else [])


def measure(name, a, code_dir, template, save=None):
    """One model's row: cold first calls (a.repeats per system, fresh processes), the code comparison,
    the steady state and warm first calls (one process). save(row): called after every process, with
    the row as it stands ('partial': True until it is whole); a process is started only while --max-time
    leaves time (else the row stays partial, saying so in its errors)."""
    row = {"model": name, "partial": True, "cold": {s: [] for s in SYSTEMS}, "errors": []}
    saved = save or (lambda r: None)
    common = _common_args(a)

    def out_of_time(what):
        if _left(a) > 0:
            return False
        row["errors"].append(f"{what} not measured: --max-time {a.max_time:g} s reached")
        _say(f"{name}: {row['errors'][-1]}")
        return True

    for rep in range(a.repeats):
        for system in (SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]):
            if out_of_time(f"{system} cold #{rep + 1} and what follows"):
                summarize(row, a.tolerance)
                saved(row)
                return row
            with _cache_dir(template) as d:
                r = _run_child(["cold", name, system, "--code-dir", code_dir or ""] + common, d, a.timeout)
            if "error" in r:
                row["errors"].append(f"{system} cold: {r['error']}")
            else:
                row["cold"][system].append(r)
            _say(f"{name} {system} cold #{rep + 1}: " + (r.get("error") or
                 f"first call {r['first_call_ms']:.0f} ms (capture {r['capture_ms']:.1f}, backend "
                 f"{r['backend_ms']:.0f}), graphs {r['graphs']}, code {r['code']}"))
            summarize(row, a.tolerance)
            saved(row)
    if not out_of_time("steady state and warm first calls"):
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
        row["partial"] = False
    summarize(row, a.tolerance)
    saved(row)
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
            "command": "python -m ember.bench.inductor " + shlex.join(argv), "device": a.device, "small": a.small,
            "models": a.model_names, "cpu": _cpu_name(), "cpu_count": os.cpu_count(),
            # --threads, else torch's default, which the child processes get too
            "threads": a.threads or torch.get_num_threads(),
            "gpu": None,  # cuda: torch.cuda.get_device_name(0), read in the first child process
            "python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
            "ember_commit": _git_commit(), "repeats": a.repeats, "warmup": a.warmup, "rounds": a.rounds,
            "min_rounds": a.min_rounds, "budget_s": a.budget, "tolerance": a.tolerance, "timeout_s": a.timeout,
            "max_time_s": a.max_time or None, "complete": False,
            "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


# ---------------------------------------------------------------------------------------------- report

def _f(v, spec):
    return "-" if v is None else format(v, spec)


def _yes(v):
    return "-" if v is None else ("yes" if v else "**no**")


def markdown(result):
    from .report import command_lines, describe_machine
    h = result["header"]
    cuda = h.get("device") == "cuda"
    primed = "Inductor's one-time probe of the vector ISAs" + (" and what Triton builds once per cache directory"
                                                               if cuda else "")
    lines = [f"Machine: {describe_machine(h)}. Device {h['device']}, {'small' if h['small'] else 'full-size'} "
             "configs, inference under torch.no_grad().", "", *command_lines(h), "",
             f"Cold first calls: the median of {h['repeats']} fresh processes per system, each with an empty Inductor "
             f"cache (but for {primed}), timed from the compile() call"
             + (" to the first output, the GPU synchronized at both ends (every timing below too)" if cuda else "")
             + ". Capture and "
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
            f"| {r['model']}{' (partial)' if r.get('partial') else ''} "
            f"| {_f(r.get('ember_graphs'), 'd')} / {_f(r.get('torch_graphs'), 'd')} "
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


def _stem(a):
    return os.path.join(a.out, f"inductor_{a.device}{'_small' if a.small else ''}")


def write(result, a, readme=False):
    """OUT/inductor_<device>[_small].json and .md; with readme, --readme's section too. Returns the stem."""
    stem = _stem(a)
    os.makedirs(a.out, exist_ok=True)
    with open(stem + ".json.tmp", "w") as f:  # a run killed while writing keeps the last whole file
        json.dump(result, f, indent=1)
    os.replace(stem + ".json.tmp", stem + ".json")
    md = markdown(result)
    with open(stem + ".md", "w") as f:
        f.write(md)
    if readme and a.readme:
        from .report import files_for, markers, update_readme
        files = files_for(stem + ".json", a.readme)
        begin, end = markers(os.path.basename(stem))
        section = "\n".join([begin.replace("python -m ember.bench ", "python -m ember.bench.inductor "), "",
                             "### ember + Inductor vs torch.compile" + _heading_device(result), "",
                             f"Files: `{files['json']}`, `{files['md']}`.", "", md.rstrip("\n"), "", end]) + "\n"
        update_readme(a.readme, section)
    return stem


def _heading_device(result):
    h = result.get("header", {})
    return f" ({h.get('gpu') or 'GPU'})" if h.get("device") == "cuda" else ""


# ---------------------------------------------------------------------------------------------- main

def parse_args(argv):
    from .models import SUITE
    ap = argparse.ArgumentParser(prog="python -m ember.bench.inductor", description=__doc__.splitlines()[0],
                                 epilog="\n".join(__doc__.splitlines()[2:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(SUITE), help="comma-separated subset of the suite")
    ap.add_argument("--small", action="store_true", help="scaled-down configs and inputs (for a small CPU)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="where the models, inputs and compiled kernels run (cuda: Triton kernels)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads in every process (default: 1 on cpu, torch's default on cuda)")
    ap.add_argument("--repeats", type=int, default=3, help="cold first calls per system and model")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls per system before the steady state")
    ap.add_argument("--rounds", type=int, default=400, help="most timed rounds (one call of each system)")
    ap.add_argument("--min-rounds", type=int, default=40, help="fewest timed rounds")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of steady state after --min-rounds")
    ap.add_argument("--tolerance", type=float, default=0.05, help="the step target: |ratio - 1| at most this")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per child process")
    ap.add_argument("--max-time", type=float, default=0, metavar="S",
                    help="start no child process after S seconds (0: no limit); the rest is listed as not run")
    ap.add_argument("--out", default=None, help=f"directory for inductor_<device>[_small].json/.md (default "
                    f"{DEFAULT_OUT}; with --from one file: beside it)")
    ap.add_argument("--readme", help="rewrite this README's section from the run")
    ap.add_argument("--keep-code", action="store_true", help="write the normalized generated code under OUT/code")
    ap.add_argument("--from", dest="from_json", metavar="A.json[,B.json...]",
                    help="render saved runs (.md, --readme) instead of measuring; several are merged into one")
    a = ap.parse_args(argv)
    if a.threads is None and a.device == "cpu":
        a.threads = 1
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
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--code-dir", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--min-rounds", type=int, default=40)
    ap.add_argument("--budget", type=float, default=20.0)
    c = ap.parse_args(argv)
    if c.kind == "prime":
        r = child_prime(c.device)
    elif c.kind == "warm":
        r = child_warm(c.device)
    elif c.kind == "cold":
        r = child_cold(c.model, c.system, c.small, c.threads, c.code_dir, c.device)
    else:
        r = child_steady(c.model, c.small, c.threads, c.warmup, c.rounds, c.min_rounds, c.budget, c.device)
    print(json.dumps(r), flush=True)


def render_saved(a, argv):
    """--from: one saved run re-rendered (next to it unless --out is given), or several merged
    (report.merge: rows in suite order, a later part's row replacing an earlier one's) into --out."""
    from .models import SUITE
    from .report import load_parts, merge
    paths, results = load_parts(a.from_json)
    if len(results) == 1:
        result = results[0]
        a.out = a.out or os.path.dirname(paths[0]) or "."
    else:
        result = merge(results, paths, "python -m ember.bench.inductor " + shlex.join(argv), order=SUITE)
        a.out = a.out or DEFAULT_OUT
    h = result["header"]
    a.device, a.small = h.get("device", "cpu"), h["small"]
    if len(results) > 1 and os.path.abspath(_stem(a) + ".json") in map(os.path.abspath, paths):
        raise SystemExit(f"--from: the merged run would overwrite the part {_stem(a)}.json; pick another --out")
    for row in result["rows"]:
        summarize(row, h["tolerance"])
    write(result, a, readme=True)
    print(markdown(result), end="")
    return result


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [_CHILD]:
        return _child_main(argv[1:])
    a = parse_args(argv)
    if a.from_json:
        return render_saved(a, argv)
    a.out = DEFAULT_OUT if a.out is None else a.out
    if a.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("python -m ember.bench.inductor: --device cuda: torch sees no CUDA device")
    code_dir = os.path.join(a.out, "code") if a.keep_code and a.out else None
    if code_dir:
        os.makedirs(code_dir, exist_ok=True)
    result = {"header": header(a, argv), "rows": []}
    h = result["header"]
    t0 = time.perf_counter()
    a.deadline = t0 + a.max_time if a.max_time else None

    current = []  # the row being measured

    def save(row=None):
        """The files as they stand: the rows so far and the one being measured."""
        if row is not None:
            current[:] = [row]
        rows = result["rows"] + current
        h["elapsed_s"] = round(time.perf_counter() - t0, 1)
        done = {r["model"] for r in rows}
        h["not_run"] = [f"{r['model']} (partial)" for r in rows if r.get("partial")] + \
            [m for m in a.model_names if m not in done]
        if a.out:
            write(dict(result, rows=rows), a)

    from .__main__ import Terminated, sigterm_stops_the_run
    try:
        with sigterm_stops_the_run(), _cache_dir() as template:
            r = _run_child(["prime", "--device", a.device], template, a.timeout)
            h["isa"] = r.get("isa")
            if a.device == "cuda":
                if "error" in r:
                    h["prime_error"] = r["error"]
                import torch
                h["gpu"] = r.get("gpu") or torch.cuda.get_device_name(0)
            with _cache_dir() as d:
                _run_child(["warm", "--device", a.device], d, a.timeout)
            _say(f"Inductor's vector ISA probe: {r.get('isa') or r.get('error')}")
            for i, name in enumerate(a.model_names):
                if _left(a) <= 0:
                    h["interrupted"] = f"--max-time {a.max_time:g} s reached"
                    _say(f"{h['interrupted']}: {', '.join(a.model_names[i:])} not measured")
                    break
                _say(f"[{i + 1}/{len(a.model_names)}] {name} ({a.device})")
                row = measure(name, a, code_dir, template, save=save)
                result["rows"].append(row)
                current.clear()
                if row["partial"]:
                    h["interrupted"] = f"--max-time {a.max_time:g} s reached"
                save()
    except KeyboardInterrupt as e:
        h["interrupted"] = (f"{'SIGTERM' if isinstance(e, Terminated) else 'interrupted (KeyboardInterrupt)'} "
                            f"after {time.perf_counter() - t0:.0f} s")
        save()
        _say(f"{h['interrupted']}: the rows measured so far are in {_stem(a)}.json/.md" if a.out else h["interrupted"])
        raise SystemExit(143 if isinstance(e, Terminated) else 130) from None
    h["complete"] = not h.get("interrupted")
    save()
    if a.out:
        write(result, a, readme=True)
        _say(f"wrote {_stem(a)}.json/.md")
    print(markdown(result), end="")
    return result


if __name__ == "__main__":
    main()
