"""python -m ember.bench: ember against plain PyTorch and torch.compile on the public model suite.

    python -m ember.bench [--small] [--models resnet18,bert,...] [--device cpu|cuda] [--train]
                          [--backends eager,ember:inductor,torch:inductor:reduce-overhead,...]
                          [--out results] [--readme README.md] [--isolate] [--max-time SECONDS]
    python -m ember.bench --from part1/bench_cuda.json,part2/bench_cuda.json --out results [--readme README.md]

Models: resnet18, resnet50, mobilenet_v3_large, vit_b_16 (torchvision), bert, gpt2, llama, t5_encoder
(transformers), pointwise_chain, mlp_block (synthetic, as in shared/anchors/torch_compile_baseline.py),
all with random weights from a config, no downloads (ember/bench/models.py; --small scales them down).

Backends, one row each per model, named SYSTEM:NAME[:MODE]:
  eager            plain PyTorch: the reference of every speedup and error
  ember:NAME       ember.compile(model, backend=NAME[, mode=MODE])
  torch:NAME       torch.compile(model, backend=NAME[, mode=MODE]), i.e. TorchDynamo + NAME
Default on CPU: eager,ember:eager,torch:eager. With --device cuda: eager, ember:eager, ember:inductor,
ember:inductor:reduce-overhead, torch:eager, torch:inductor, torch:inductor:reduce-overhead (MODE
reduce-overhead: Inductor with CUDA graphs). On CPU the Inductor backends are opt-in (--backends
+torch:inductor adds to the defaults): a cold compile of one small model takes tens of seconds on a
2-core machine (C++ compiles), which would make a --small run take ~15 minutes.
A backend that refuses the model when compiling (ember's ValueError for a backend it does not have,
or an interpreter ember does not capture on) is a row with status "not supported" and the message; one that raises later is a row with status "error"; the run goes on.

What is measured (one process, the same module and inputs for every backend; backends run one after
the other; --isolate runs each model in its own process, so a crash or --timeout is that model's rows):
  step        one inference call under torch.no_grad(), or with --train one forward plus backward of
              the first output tensor's float sum (gradients zeroed outside the timing, nn.Dropout set
              to p=0 so that every backend computes the same thing). With --device cuda every timing
              is bracketed by torch.cuda.synchronize().
  first call cold   the first call of a freshly compiled model with the compiler's caches empty:
              ember.reset() and torch._dynamo.reset() before, a fresh empty Inductor/Triton cache
              directory and cleared in-memory compile caches (torch._inductor.utils.fresh_cache).
              One-time process costs (imports, a backend's first use) are paid before the suite on a
              trivial function, so they are charged to no model.
  first call warm   the same right after: frontends reset again and a new wrapper compiled, with the
              process warm and the on-disk caches holding this model's artifacts (Inductor's FX graph,
              AOTAutograd and kernel caches hit; ember, which has no persistent cache yet, traces again).
  compile_cold_ms, compile_warm_ms (JSON)  that first call minus the eager row's median step.
  capture ms  the frontend's own timer for the cold first call. ember: the sum of its cache entries'
              compile_s (driver time: trace, guards, backend compile, code emission), frames it gave up
              on as plain Python not included; for ember backends other than eager this includes that
              backend's compile. TorchDynamo: its '_compile.compile_inner' time minus
              'OutputGraph.call_user_compiler' (the backend), from torch._dynamo.utils.
              compilation_time_metrics; backend_compile_ms holds the latter.
  step ms     median of the steady state: warm-up steps, then pairs of one eager step and one step of
              the warm wrapper, alternating (at least --min-iters, at most --iters pairs, stopping once
              --budget seconds have passed); speedup = median eager step / median backend step of the
              same pairs. steady_compiles counts frames compiled during these steps (recompiles).
  graphs, breaks    ember: its cache entries after the cold call (breaks = entries ending in a graph
              break; plain_python = frames it ran as plain Python); TorchDynamo: counters['stats']
              ['unique_graphs'] and the sum of counters['graph_break'].
  max err     max abs difference of the cold first call's outputs (with --train: the parameter and
              input gradients) against eager from the same parameters, buffers and RNG state.
  peak mem MB the peak memory of the row's run, in MiB (peak_mem_mb, with peak_mem_kind in the JSON):
              for eager its first call and steady steps, for a backend its cold and warm compiles and
              first calls and its steady state (eager steps included). --device cuda:
              torch.cuda.max_memory_allocated() after torch.cuda.reset_peak_memory_stats() at the start
              (tensors of PyTorch's caching allocator, CUDA graph pools included; not the CUDA context,
              not host memory). cpu: the process's peak RSS (VmHWM from /proc/self/status, reset by
              writing 5 to /proc/self/clear_refs at the start), i.e. the whole process resident at once,
              interpreter, torch and the model's parameters (and a copy) included, child processes not;
              where clear_refs cannot be written, getrusage's ru_maxrss, the peak since the process
              started (kind "process peak RSS, not resettable"). Garbage is collected and freed heap
              handed back (malloc_trim) before each row. Not measured: an empty cell, the reason in the
              note (peak_mem_note).
  overhead    per-call cost of a cache hit on f(x, y) = x + y with 4-element tensors: median over
              repeats of a loop of calls, every backend's loop interleaved in each repeat, minus the
              plain call's.
Timings on a shared machine move between runs; read the ratios, measured side by side in one run.

Writes <out>/bench_<device>[_small][_train].json (header + rows + overhead), .md (the tables) and .png
(per model and backend: the speedup, and the cold first call beside one eager step, i.e. what compiling
costs; needs matplotlib, else the run says so and goes on), prints the tables, and with
--readme rewrites that README's results section from the run (python -m ember.bench.report does it
from a saved JSON).

Runs under a time limit, in parts:
  saved as it goes  the JSON and .md are rewritten after every row (with --isolate after every model,
              the child saving its rows as they come), so a run killed at any point leaves the rows
              measured until then; the header says complete: false and not_run lists what is missing
              (MODEL for a whole model, MODEL BACKEND for one row). SIGTERM or Ctrl-C ends the run the
              same way (the child process of --isolate killed), then the files are written, exit 143/130.
  --max-time S  start no model and no backend after S seconds from the start (a backend that has
              started runs to its end: leave a cold compile's time, a minute on a GPU, under a hard
              limit); what was left out is in not_run, and the run ends normally (chart, README).
  --from A.json,B.json  merges saved runs of one kind (same device, --small, --train) into one report
              at --out (and --readme): each (model, backend) once, in suite order, a later part's row
              replacing an earlier one's (re-run what failed or was cut, then merge it last); the header
              is the first part's, with each part's command; the cache-hit overhead is the first part's
              that measured one. Keep the parts in other directories than --out (a part is never
              overwritten). One file re-renders that run.
  e.g. --device cuda in two parts of 5-8 minutes each on an H200 under a 10-minute limit (the slow part:
  4 cold Inductor compiles per model, 1-40 s each; `timeout` sends SIGTERM, which still writes the
  files), then the merge (on any machine; a third part re-running what is missing goes last):
    timeout 560 python -m ember.bench --device cuda --budget 2 --max-time 450 --no-overhead --out out/p1 \\
        --models resnet18,resnet50,mobilenet_v3_large,vit_b_16,pointwise_chain
    timeout 560 python -m ember.bench --device cuda --budget 2 --max-time 450 --out out/p2 \\
        --models bert,gpt2,llama,t5_encoder,mlp_block
    python -m ember.bench --from out/p1/bench_cuda.json,out/p2/bench_cuda.json --out results --readme README.md
"""
import argparse
import contextlib
import datetime
import faulthandler
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

import torch

from . import harness, report
from .models import SUITE, build

DEFAULT_BACKENDS = ("eager", "ember:eager", "torch:eager")
DEFAULT_BACKENDS_CUDA = ("eager", "ember:eager", "ember:inductor", "ember:inductor:reduce-overhead", "torch:eager",
                         "torch:inductor", "torch:inductor:reduce-overhead")


def _backend_specs(text, device):
    """--backends: a comma list; a list starting with '+' adds to the defaults (which depend on device)."""
    defaults = list(DEFAULT_BACKENDS_CUDA if device == "cuda" else DEFAULT_BACKENDS)
    if not text:
        specs = defaults
    elif text.startswith("+"):
        specs = defaults + [s for s in text[1:].split(",") if s.strip()]
    else:
        specs = [s for s in text.split(",") if s.strip()]
    return list(dict.fromkeys(s.strip() for s in specs))


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m ember.bench", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--models", default=",".join(SUITE), help="comma-separated subset of the suite")
    ap.add_argument("--small", action="store_true", help="scaled-down configs and inputs (for a small CPU)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--backends", default="", help="comma list of eager, ember:NAME[:MODE], torch:NAME[:MODE]; "
                    "'+a,b' adds to the defaults (cpu: " + ",".join(DEFAULT_BACKENDS) + "; cuda: " +
                    ",".join(DEFAULT_BACKENDS_CUDA) + ")")
    ap.add_argument("--train", action="store_true", help="time a training step (forward + backward)")
    ap.add_argument("--out", default="results", help="directory for bench_*.json/.md/.png ('' writes nothing)")
    ap.add_argument("--readme", default="", help="rewrite this README's results section from the run")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads (default: 1 on cpu, torch's default on cuda)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps before the steady state")
    ap.add_argument("--iters", type=int, default=30, help="most timed (eager, backend) step pairs")
    ap.add_argument("--min-iters", type=int, default=5, help="fewest timed step pairs")
    ap.add_argument("--budget", type=float, default=5.0, help="seconds of steady state after --min-iters")
    ap.add_argument("--overhead-calls", type=int, default=10000)
    ap.add_argument("--overhead-repeats", type=int, default=5)
    ap.add_argument("--no-overhead", action="store_true", help="skip the cache-hit overhead measurement")
    ap.add_argument("--isolate", action="store_true", help="each model in its own process")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per model with --isolate")
    ap.add_argument("--max-time", type=float, default=0, metavar="S",
                    help="start no model or backend after S seconds (0: no limit); what is left is not_run")
    ap.add_argument("--from", dest="from_json", default="", metavar="A.json[,B.json...]",
                    help="render saved runs instead of measuring: one re-renders it, several are merged "
                    "(rows in suite order, a later part's row replacing an earlier one's) into --out/--readme")
    ap.add_argument("--child-json", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.backend_specs = _backend_specs(a.backends, a.device)
    a.model_names = [n.strip() for n in a.models.split(",") if n.strip()]
    return ap, a


def _git_commit():
    """The checkout's commit ("-dirty" when the code differs), or EMBER_COMMIT when set: a copy of
    the tree whose .git is not the checkout's (the GPU machine's) names the commit it was sent from."""
    if os.environ.get("EMBER_COMMIT"):
        return os.environ["EMBER_COMMIT"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        sha = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        # "-dirty": the code differs from the commit (README.md and results/ are what runs write)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!README.md", ":!results"], capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha + ("-dirty" if dirty else "")) or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine_header(a, argv):
    h = {"schema": "ember.bench/1", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
         "command": "python -m ember.bench " + shlex.join(argv), "device": a.device, "small": a.small,
         "train": a.train, "backends": a.backend_specs, "models": a.model_names, "platform": platform.platform(),
         "machine": platform.machine(), "cpu": _cpu_name(), "cpu_count": os.cpu_count(),
         "threads": torch.get_num_threads(), "python": sys.version.split()[0], "torch": torch.__version__,
         "ember_commit": _git_commit(), "warmup": a.warmup, "iters": a.iters, "min_iters": a.min_iters,
         "budget_s": a.budget, "overhead_calls": a.overhead_calls, "overhead_repeats": a.overhead_repeats,
         "isolate": a.isolate, "max_time_s": a.max_time or None,
         "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    for mod in ("torchvision", "transformers"):
        try:
            h[mod] = __import__(mod).__version__
        except ImportError:
            h[mod] = None
    h["gpu"] = torch.cuda.get_device_name(0) if a.device == "cuda" else None
    try:
        from ember import _C  # noqa: F401
        h["ember_loaded"] = True
    except Exception as e:  # the extension did not load: ember rows will say why
        h["ember_loaded"] = f"{type(e).__name__}: {e}"
    return h


def _say(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, as an exception: the run stops where it is and writes what it measured."""


def _on_sigterm(signum, frame):
    raise Terminated("SIGTERM")


@contextlib.contextmanager
def sigterm_stops_the_run():
    """SIGTERM (a time limit's kill, `timeout`) raises Terminated in the main thread for the block, so
    that a child process is killed and the rows so far written instead of the process just dying."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _isolated(name, argv, a, timeout, max_time=None, on_rows=None):
    """Runs one model in a child process; returns (rows, not_run): its rows, or an error row per backend
    the child neither measured nor left out on purpose (max_time: the child's --max-time). Interrupted
    (SIGTERM, Ctrl-C), it kills the child and hands on_rows the rows the child had saved."""
    skip_next = {"--models", "--out", "--readme", "--timeout", "--child-json", "--max-time"}
    args, it = [], iter(argv)
    for x in it:
        if x in skip_next:
            next(it, None)
        elif x.split("=", 1)[0] in skip_next or x in ("--isolate", "--no-overhead"):
            continue
        else:
            args.append(x)
    with tempfile.TemporaryDirectory(prefix="ember_bench_") as d:
        out = os.path.join(d, "rows.json")
        cmd = [sys.executable, "-m", "ember.bench", *args, "--models", name, "--out", "", "--no-overhead",
               "--child-json", out] + (["--max-time", f"{max_time:.0f}"] if max_time else [])
        tail = []
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        def pump():
            for line in p.stderr:
                sys.stderr.write(line)
                tail.append(line.rstrip())
                del tail[:-20]

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        try:
            rc = p.wait(timeout=timeout)
            why = None if rc == 0 else (f"process killed by signal {-rc}" if rc < 0 else f"process exited {rc}")
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            why = f"timed out after {timeout:.0f} s"
        except BaseException:  # SIGTERM, Ctrl-C: the child goes with the run
            p.kill()
            p.wait()
            if on_rows and os.path.exists(out):
                with contextlib.suppress(Exception), open(out) as f:
                    on_rows(json.load(f)["rows"])
            raise
        finally:
            t.join(timeout=5)
        rows, skipped = [], []
        if os.path.exists(out):
            with open(out) as f:
                saved = json.load(f)
            rows, skipped = saved["rows"], saved.get("not_run") or []
        if name in skipped or (why is None and len(rows) + len(skipped) == len(a.backend_specs)):
            return rows, skipped
        last = next((ln for ln in reversed(tail) if ln.strip() and not ln.startswith("[bench]")), "")
        done = {r["backend"] for r in rows} | {x.split(" ", 1)[1] for x in skipped if " " in x}
        return rows + [harness.new_row(name, s, status="error", error=f"{why or 'no result'}; last output: "
                                       f"{harness.short_path(last)[:200]}") for s in a.backend_specs
                       if s not in done], skipped


def missing_rows(result):
    """What the run was asked for and has no row of: MODEL (no row at all) or MODEL BACKEND."""
    h = result["header"]
    have = {(r["model"], r["backend"]) for r in result["rows"]}
    out = []
    for m in h["models"]:
        if not any(x == m for x, _ in have):
            out.append(m)
        else:
            out += [f"{m} {b}" for b in h["backends"] if (m, b) not in have]
    return out


def _stem(a):
    return os.path.join(a.out, f"bench_{a.device}" + ("_small" if a.small else "") + ("_train" if a.train else ""))


def write(result, a, files_only=False):
    """Writes <out>/bench_*.{json,md,png} (files_only: the JSON and .md, no chart); returns the JSON path
    (or None with --out '')."""
    if not a.out:
        return None
    os.makedirs(a.out, exist_ok=True)
    stem = _stem(a)
    with open(stem + ".json.tmp", "w") as f:  # a run killed while writing keeps the last whole file
        json.dump(result, f, indent=1)
    os.replace(stem + ".json.tmp", stem + ".json")
    if files_only:
        with open(stem + ".md", "w") as f:
            f.write(report.markdown(result))
        return stem + ".json"
    try:
        why = report.chart(result, stem + ".png")
    except Exception as e:  # a chart never costs the run its tables
        why = f"no chart: {harness.short_error(e)}"
    if why:
        _say(why)
        result["header"]["chart"] = why
        with open(stem + ".json", "w") as f:
            json.dump(result, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(report.markdown(result, chart=os.path.basename(stem + ".png") if not why else None))
    return stem + ".json"


def _readme(ap, a, result, path):
    if a.readme:
        if not path:
            ap.error("--readme needs --out (the README links the result files)")
        report.update_readme(a.readme, report.readme_section(result, report.files_for(path, a.readme)))
        _say(f"rewrote the results section of {a.readme}")


def render_saved(ap, a, argv):
    """--from: one saved run re-rendered, or several merged (report.merge), to --out and --readme."""
    try:
        paths, results = report.load_parts(a.from_json)
        result = results[0] if len(results) == 1 else report.merge(
            results, paths, "python -m ember.bench " + shlex.join(argv), order=SUITE)
    except (OSError, ValueError, KeyError) as e:
        ap.error(f"--from: {type(e).__name__}: {e}")
    h = result["header"]
    a.device, a.small, a.train = h.get("device", "cpu"), bool(h.get("small")), bool(h.get("train"))
    if a.out and len(paths) > 1 and os.path.abspath(_stem(a) + ".json") in map(os.path.abspath, paths):
        ap.error(f"--from: the merged run would overwrite the part {_stem(a)}.json; pick another --out")
    path = write(result, a)
    if path:
        _say(f"wrote {os.path.splitext(path)[0]}.json/.md" + ("" if h.get("chart") else "/.png")
             + (f" from {len(paths)} parts" if len(paths) > 1 else ""))
    print(report.markdown(result), end="")
    _readme(ap, a, result, path)
    return result


def main(argv=None, builders=None):
    """Runs the benchmark; returns {'header', 'rows', 'overhead'}. builders: extra {name: build(name,
    small)} models the --models list may name (tests use it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap, a = parse_args(argv)
    if a.from_json:
        return render_saved(ap, a, argv)
    known = dict.fromkeys(SUITE, build)
    known.update(builders or {})
    unknown = [n for n in a.model_names if n not in known]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; suite: {', '.join(SUITE)}")
    try:
        backends = [harness.parse_backend(s) for s in a.backend_specs]
    except ValueError as e:
        ap.error(str(e))
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    if a.isolate and builders:
        ap.error("--isolate runs only the suite's models")
    faulthandler.enable()  # a crash in the C core still shows where it happened
    torch.set_num_threads(a.threads if a.threads else (1 if a.device == "cpu" else torch.get_num_threads()))
    s = harness.Settings(device=a.device, small=a.small, train=a.train, warmup=a.warmup, iters=a.iters,
                         min_iters=a.min_iters, budget_s=a.budget)
    t_start = time.perf_counter()
    result = {"header": machine_header(a, argv), "rows": [], "overhead": []}
    h = result["header"]
    h["complete"] = False
    left = (lambda: a.max_time - (time.perf_counter() - t_start)) if a.max_time else (lambda: float("inf"))
    cut = f"--max-time {a.max_time:g} s reached"
    current = []  # the rows of the model being measured

    def save(rows_of_model=None, final=False):
        """The files as they stand: the rows so far and those of the model being measured."""
        if rows_of_model is not None:
            current[:] = rows_of_model
        partial = dict(result, rows=result["rows"] + current)
        h["not_run"] = missing_rows(partial)
        h["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        if a.child_json:  # for the parent of --isolate
            with open(a.child_json + ".tmp", "w") as f:
                json.dump({"header": h, "rows": partial["rows"],
                           "not_run": h["not_run"] if final else []}, f)
            os.replace(a.child_json + ".tmp", a.child_json)
        elif a.out:
            write(partial, a, files_only=not final)

    try:
        with sigterm_stops_the_run():
            if not a.isolate:
                _say(f"warming up {', '.join(b.spec for b in backends if b.system)} on a trivial function")
                harness.warm_up(backends, a.device)
            for i, name in enumerate(a.model_names):
                if left() <= 0:
                    _say(f"{cut}: {', '.join(a.model_names[i:])} not measured")
                    h["interrupted"] = cut
                    break
                t0 = time.perf_counter()
                _say(f"[{i + 1}/{len(a.model_names)}] {name} ({'small' if a.small else 'full'}, "
                     f"{'train' if a.train else 'inference'}, {a.device})")
                if a.isolate:
                    rows, skipped = _isolated(name, argv, a, min(a.timeout, left() + 120),
                                              max_time=max(1.0, left()) if a.max_time else None, on_rows=save)
                else:
                    rows = harness.measure_model(name, known[name], backends, s, progress=_say, on_row=save,
                                                 stop=lambda: left() <= 0)
                    skipped = len(rows) < len(backends)
                if skipped:
                    h["interrupted"] = cut
                result["rows"] += rows
                current.clear()
                _say(f"[{i + 1}/{len(a.model_names)}] {name} done in {time.perf_counter() - t0:.1f} s "
                     f"(total {time.perf_counter() - t_start:.0f} s)")
                save()  # what was measured so far survives a crash
            if a.child_json:
                save(final=True)
                return result
            if not a.no_overhead:
                if left() > 0:
                    _say(f"cache-hit overhead on a tiny function ({a.overhead_repeats} x {a.overhead_calls} calls)")
                    result["overhead"] = harness.overhead(backends, a.device, a.overhead_calls, a.overhead_repeats,
                                                          progress=_say)
                else:
                    h["interrupted"] = cut + " (before the cache-hit overhead)"
    except KeyboardInterrupt as e:
        what = "SIGTERM" if isinstance(e, Terminated) else "interrupted (KeyboardInterrupt)"
        h["interrupted"] = f"{what} after {time.perf_counter() - t_start:.0f} s"
        _say(f"{h['interrupted']}: writing the rows measured so far")
        save(final=True)
        raise SystemExit(143 if isinstance(e, Terminated) else 130) from None
    h["complete"] = not h.get("interrupted")
    save(final=True)
    if not a.child_json:
        print(report.markdown(result), end="")
    _readme(ap, a, result, _stem(a) + ".json" if a.out else None)
    return result


if __name__ == "__main__":
    main()
