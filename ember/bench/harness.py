"""Measurements behind `python -m ember.bench` (the columns are defined in ember/bench/__main__.py).

Backends are named SYSTEM:NAME[:MODE] ("ember:eager", "torch:inductor", "torch:inductor:max-autotune")
or "eager" (plain PyTorch). Every measurement of one model runs in one process on the same module and
inputs; a stage that raises becomes the row's error and the run goes on.
"""
import contextlib
import gc
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import types
import warnings

import torch

from .models import first_tensor, grad_err, max_err

ROW_FIELDS = ("model", "backend", "status", "error", "graphs", "breaks", "plain_python", "first_break",
              "capture_ms", "capture_warm_ms", "backend_compile_ms", "first_call_cold_ms", "first_call_warm_ms",
              "compile_cold_ms", "compile_warm_ms", "step_ms", "eager_step_ms", "speedup", "samples",
              "steady_compiles", "max_err", "peak_mem_mb", "peak_mem_kind", "peak_mem_note", "note")
OVERHEAD_FIELDS = ("backend", "status", "error", "call_us", "eager_call_us", "overhead_us")
STATUSES = ("ok", "error", "not supported")


def new_row(model, backend, **kw):
    row = dict.fromkeys(ROW_FIELDS)
    row.update(model=model, backend=backend, status="ok", note="")
    row.update(kw)
    return row


# ---------------------------------------------------------------------------------------------- errors

_LIB = re.compile(r"[^\s:()'\"]*/(?:site-packages|dist-packages|lib/python3\.\d+)/")


def short_path(text):
    """text with library paths cut to their package (transformers/...) and this checkout's to relative."""
    return _LIB.sub("", text).replace(os.getcwd() + os.sep, "")


def short_error(e):
    msg = str(e).strip().splitlines()
    return short_path(f"{type(e).__name__}: {msg[0] if msg else ''}")[:300]


def _log_exc(where):
    print(f"[bench] {where}:", file=sys.stderr)
    traceback.print_exc()


# ---------------------------------------------------------------------------------------------- backends

class Unsupported(Exception):
    """Raised by Backend.compile when the backend refuses the model before running anything."""


class Backend:
    """One row kind. compile(fn) returns the callable to time; the hooks collect graph counts and the
    frontend's own capture timer around a first call."""

    system = None

    def __init__(self, spec, name=None, mode=None):
        self.spec, self.name, self.mode = spec, name, mode

    def reset(self):
        pass

    def compile(self, fn):
        return fn

    def before_first_call(self):
        pass

    def first_call_stats(self):
        """{graphs, breaks, plain_python, first_break, capture_ms, backend_compile_ms} after a first call."""
        return {}

    def compiles_so_far(self):
        """How many frames the frontend compiled (for recompiles in steady state); None if unknown."""
        return None

    def cache_scope(self):
        """Context for one model's cold and warm first calls: a fresh, empty on-disk compile cache (the
        Inductor/Triton caches, also used by ember's torch backends); cleared in-memory caches."""
        return _fresh_compile_cache() if self.system else contextlib.nullcontext()


class PlainEager(Backend):
    def __init__(self):
        super().__init__("eager")


class EmberBackend(Backend):
    system = "ember"

    def reset(self):
        import ember
        ember.reset()

    def compile(self, fn):
        import ember
        kw = {"backend": self.name}
        if self.mode:
            kw["mode"] = self.mode
        try:
            return ember.compile(fn, **kw)
        except (ValueError, RuntimeError, NotImplementedError, TypeError) as e:
            raise Unsupported(short_error(e)) from e

    def before_first_call(self):
        import ember.testing
        self.reset()
        ember.testing.reset_counters()

    def first_call_stats(self):
        from ember import _C
        from ember._explain import _reason
        graphs = breaks = 0
        capture = 0.0
        first_break, plain = None, []
        for code in _C._seen_codes():
            for e in reversed(_C.entries(code)):  # oldest first
                graphs += 1
                capture += e.get("compile_s") or 0.0
                if e["break"]:
                    breaks += 1
                    first_break = first_break or short_path(str(_reason(e["break"])))
            state = _C.code_state(code)
            if state and state["mode"] == "fallback" and state["reason"]:
                plain.append(short_path(str(_reason(str(state["reason"])))))
        return {"graphs": graphs, "breaks": breaks, "plain_python": len(plain), "first_break": first_break,
                "first_plain_python": plain[0] if plain else None, "capture_ms": capture * 1e3}

    def compiles_so_far(self):
        import ember.testing
        return ember.testing.counters()["frames"]


class TorchBackend(Backend):
    system = "torch"

    def reset(self):
        torch._dynamo.reset()

    def compile(self, fn):
        kw = {"backend": self.name}
        if self.mode:
            kw["mode"] = self.mode
        try:
            return torch.compile(fn, **kw)
        except Exception as e:  # an unknown backend name or mode, a torch.compile that refuses this Python
            raise Unsupported(short_error(e)) from e

    def before_first_call(self):
        from torch._dynamo.utils import compilation_time_metrics, counters
        self.reset()
        counters.clear()
        compilation_time_metrics.clear()

    def first_call_stats(self):
        from torch._dynamo.utils import compilation_time_metrics, counters
        total = sum(compilation_time_metrics.get("_compile.compile_inner", ()))
        backend = sum(compilation_time_metrics.get("OutputGraph.call_user_compiler", ()))
        reasons = [k for k, v in counters["graph_break"].items() if v]
        return {"graphs": counters["stats"]["unique_graphs"], "breaks": sum(counters["graph_break"].values()),
                "first_break": short_path(str(reasons[0]))[:200] if reasons else None,
                "capture_ms": (total - backend) * 1e3 if total else None, "backend_compile_ms": backend * 1e3}

    def compiles_so_far(self):
        from torch._dynamo.utils import counters
        return counters["frames"]["total"]


def parse_backend(spec):
    """'eager' | 'ember:NAME[:MODE]' | 'torch:NAME[:MODE]' -> Backend (ValueError for other shapes)."""
    spec = spec.strip()
    if spec == "eager":
        return PlainEager()
    parts = spec.split(":")
    if len(parts) in (2, 3) and parts[0] in ("ember", "torch") and all(parts[1:]):
        cls = EmberBackend if parts[0] == "ember" else TorchBackend
        return cls(spec, parts[1], parts[2] if len(parts) == 3 else None)
    raise ValueError(f"backend {spec!r}: expected eager, ember:NAME[:MODE] or torch:NAME[:MODE]")


@contextlib.contextmanager
def _fresh_compile_cache():
    """An empty Inductor/Triton cache directory for the block and cleared in-memory compile caches
    (torch._inductor.utils.fresh_cache where torch has it), removed afterwards."""
    try:
        from torch._inductor.utils import fresh_cache
    except ImportError:
        try:
            from torch._inductor.utils import fresh_inductor_cache as fresh_cache
        except ImportError:
            fresh_cache = None
    if fresh_cache is not None:
        with fresh_cache():
            yield
        return
    d = tempfile.mkdtemp(prefix="ember_bench_cache_")
    old = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"] = d, os.path.join(d, "triton")
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(d, ignore_errors=True)


def reset_all():
    with contextlib.suppress(Exception):
        import ember
        ember.reset()
    torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------- memory

MEM_CUDA = "cuda max_memory_allocated"
MEM_RSS = "peak RSS"
MEM_PROCESS_RSS = "process peak RSS, not resettable"
CLEAR_REFS, STATUS = "/proc/self/clear_refs", "/proc/self/status"


def _release_freed_memory():
    """Collects garbage and hands the C allocator's free pages back to the system (glibc malloc_trim),
    so that what an earlier row freed but the allocator kept does not count in the next row's RSS."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes
            ctypes.CDLL(None).malloc_trim(0)


def _vm_hwm_kib():
    with open(STATUS) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])  # kB (KiB)
    raise OSError(f"no VmHWM line in {STATUS}")


class PeakMemory:
    """The peak memory of one span (a row's compile, first calls and timed steps), in MiB.
    cuda: torch.cuda.reset_peak_memory_stats() at start, torch.cuda.max_memory_allocated() at stop
    (tensors of PyTorch's caching allocator, CUDA graph pools included; not the CUDA context, not host
    memory). cpu: the process's peak RSS, reset at start by writing 5 to /proc/self/clear_refs (VmHWM
    becomes the current RSS) and read as VmHWM from /proc/self/status at stop; where that cannot be
    done, getrusage's ru_maxrss: the process's peak since it started, which no row can reset (the
    kind says so). stop() returns {peak_mem_mb, peak_mem_kind, peak_mem_note}; peak_mem_mb is None
    with the reason in peak_mem_note when nothing could be measured."""

    def __init__(self, device):
        self.device = device
        self.kind = self.why = None

    def start(self):
        _release_freed_memory()
        self.kind = self.why = None
        try:
            if self.device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                self.kind = MEM_CUDA
                return
            try:
                with open(CLEAR_REFS, "w") as f:
                    f.write("5")
                _vm_hwm_kib()
                self.kind = MEM_RSS
            except OSError as e:
                import resource  # noqa: F401  (the fallback's module; ImportError off Unix)
                self.kind = MEM_PROCESS_RSS
                self.why = (f"process peak since start (ru_maxrss), not reset per row: /proc/self/clear_refs "
                            f"or VmHWM unusable ({type(e).__name__}: {e})")
        except Exception as e:
            self.kind, self.why = None, f"peak memory not measured: {short_error(e)}"

    def stop(self):
        mb, kind, why = None, self.kind, self.why
        try:
            if kind == MEM_CUDA:
                torch.cuda.synchronize()
                mb = torch.cuda.max_memory_allocated() / 2**20
            elif kind == MEM_RSS:
                mb = _vm_hwm_kib() / 1024
            elif kind == MEM_PROCESS_RSS:
                import resource
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                mb = rss / 2**20 if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB elsewhere
        except Exception as e:
            mb, why = None, f"peak memory not measured: {short_error(e)}"
        return {"peak_mem_mb": None if mb is None else round(mb, 1), "peak_mem_kind": kind if mb is not None
                else None, "peak_mem_note": why}


# ---------------------------------------------------------------------------------------------- timing

class Settings:
    """What a run measures and how long it may take. device: 'cpu' or 'cuda'; warmup: untimed calls
    before the steady state; iters: the most timed (eager, backend) pairs; min_iters: the fewest;
    budget_s: after min_iters pairs, stop once the steady state has taken this long."""

    def __init__(self, device="cpu", small=False, train=False, warmup=3, iters=30, min_iters=5, budget_s=5.0):
        self.device, self.small, self.train = device, small, train
        self.warmup, self.iters, self.min_iters, self.budget_s = warmup, iters, min_iters, budget_s

    def sync(self):
        if self.device == "cuda":
            torch.cuda.synchronize()


class ModelBench:
    """One model on one device: a step is one inference call under no_grad, or with train one forward
    plus backward of the first output tensor's float sum (gradients zeroed before, outside the timing).
    Every compared call starts from the same parameters, buffers and RNG state."""

    def __init__(self, name, model, inputs, s):
        self.name, self.s = name, s
        model = model.to(s.device)
        model.train(s.train)
        if s.train:  # deterministic across backends (Inductor draws its own random numbers)
            for m in model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0
        inputs = tuple(t.to(s.device) if isinstance(t, torch.Tensor) else t for t in inputs)
        if s.train and not any(p.requires_grad for p in model.parameters()):  # gradients w.r.t. the inputs
            inputs = tuple(t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point()
                           else t for t in inputs)
        self.model, self.inputs = model, inputs
        self.state = {k: v.clone() for k, v in model.state_dict().items()}

    def restore(self):
        self.model.load_state_dict(self.state)
        torch.manual_seed(0)

    def _zero(self):
        if self.s.train:
            self.model.zero_grad(set_to_none=True)
            for t in self.inputs:
                if isinstance(t, torch.Tensor):
                    t.grad = None

    def timed(self, fn):
        """(seconds, output) of one step of fn."""
        self._zero()
        s = self.s
        s.sync()
        if s.train:
            t0 = time.perf_counter()
            out = fn(*self.inputs)
            first_tensor(out).float().sum().backward()
        else:
            with torch.no_grad():
                t0 = time.perf_counter()
                out = fn(*self.inputs)
        s.sync()
        return time.perf_counter() - t0, out

    def grads(self):
        g = {k: None if p.grad is None else p.grad.detach().clone() for k, p in self.model.named_parameters()}
        for i, t in enumerate(self.inputs):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                g[f"input{i}"] = None if t.grad is None else t.grad.detach().clone()
        return g

    def result(self, out):
        """What is compared against eager: the outputs, or with train the gradients."""
        return self.grads() if self.s.train else out

    def error(self, got):
        return grad_err(self.ref, got) if self.s.train else max_err(self.ref, got)

    def steady(self, fn, with_eager=True):
        """Median step times: warm-up calls, then timed pairs of an eager call and an fn call (eager first
        in every other pair), so that drift of a shared machine and order effects hit both alike.
        Returns (eager median or None, fn median, pairs)."""
        s = self.s
        for _ in range(s.warmup):
            self.timed(fn)
            if with_eager:
                self.timed(self.model)
        eager, got = [], []
        t_end = time.perf_counter() + s.budget_s
        while len(got) < s.iters and (len(got) < s.min_iters or time.perf_counter() < t_end):
            if with_eager and len(got) % 2 == 0:  # which one goes first alternates too
                eager.append(self.timed(self.model)[0])
            got.append(self.timed(fn)[0])
            if with_eager and len(got) % 2 == 0:
                eager.append(self.timed(self.model)[0])
        return (statistics.median(eager) if eager else None), statistics.median(got), len(got)

    # ------------------------------------------------------------------------------------------ rows

    def eager_row(self):
        """The plain PyTorch row; also records the reference result and the eager step time."""
        row = new_row(self.name, "eager")
        self.restore()
        mem = PeakMemory(self.s.device)
        mem.start()
        dt, out = self.timed(self.model)
        row["first_call_cold_ms"] = dt * 1e3
        self.ref = self.result(out)
        _, med, n = self.steady(self.model, with_eager=False)
        row.update(mem.stop())
        row.update(step_ms=med * 1e3, eager_step_ms=med * 1e3, speedup=1.0, samples=n, max_err=0.0)
        self.eager_step_ms = row["step_ms"]
        return row

    def backend_row(self, b):
        row = new_row(self.name, b.spec)
        notes = []
        mem = PeakMemory(self.s.device)
        mem.start()  # the span: both first calls (compiles included) and the steady state
        try:
            with b.cache_scope():
                for phase in ("cold", "warm"):
                    reset_all()
                    try:
                        fn = b.compile(self.model)
                    except Unsupported as e:
                        row.update(status="not supported", error=str(e))
                        return row
                    b.before_first_call()
                    self.restore()
                    try:
                        dt, out = self.timed(fn)
                    except Exception as e:
                        _log_exc(f"{self.name} {b.spec} first call ({phase})")
                        row.update(status="error", error=f"first call ({phase}): {short_error(e)}")
                        return row
                    st = b.first_call_stats()
                    row[f"first_call_{phase}_ms"] = dt * 1e3
                    row[f"compile_{phase}_ms"] = (dt * 1e3 - self.eager_step_ms)
                    if phase == "cold":
                        row.update({k: st.get(k) for k in ("graphs", "breaks", "plain_python", "first_break",
                                                           "capture_ms", "backend_compile_ms")})
                        row["max_err"] = self.error(self.result(out))
                        if row["max_err"] is None:
                            notes.append("output/gradient structure differs from eager")
                        if st.get("first_break"):
                            notes.append(f"break: {st['first_break']}")
                        if st.get("plain_python"):
                            notes.append(f"{st['plain_python']} frame(s) as plain Python, first: "
                                         f"{st['first_plain_python']}")
                    else:
                        row["capture_warm_ms"] = st.get("capture_ms")
            # steady state with the warm wrapper (its compiled kernels stay loaded after the cache scope)
            before = b.compiles_so_far()
            try:
                eager, med, n = self.steady(fn)
            except Exception as e:
                _log_exc(f"{self.name} {b.spec} steady state")
                row.update(status="error", error=f"steady state: {short_error(e)}")
                return row
            after = b.compiles_so_far()
            row.update(step_ms=med * 1e3, eager_step_ms=eager * 1e3, speedup=eager / med, samples=n)
            if before is not None and after is not None:
                row["steady_compiles"] = after - before
                if after != before:
                    notes.append(f"{after - before} compile(s) during the steady state")
        except Exception as e:
            _log_exc(f"{self.name} {b.spec}")
            row.update(status="error", error=short_error(e))
        finally:
            if row["status"] != "not supported":  # nothing of it ran
                row.update(mem.stop())
                if row["status"] == "error" and row["peak_mem_mb"] is not None:
                    row["peak_mem_note"] = "; ".join(filter(None, ("until the error", row["peak_mem_note"])))
            row["note"] = "; ".join(notes).replace("|", "/").replace("\n", " ")
            reset_all()
        return row


def measure_model(name, builder, backends, s, progress=None, on_row=None, stop=None):
    """Rows of one model, one per backend (the plain eager row first). A model that cannot be built or
    run eagerly gives an error row per backend. on_row(rows): called with the rows so far after each
    row (to save them as they come); stop(): checked before each backend, True leaves the remaining
    backends out (no rows: a time limit reached)."""
    say = progress or (lambda msg: None)
    with_eager = any(isinstance(b, PlainEager) for b in backends)
    saved = on_row or (lambda rows: None)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, inputs = builder(name, s.small)
        mb = ModelBench(name, model, inputs, s)
        eager = mb.eager_row()
    except Exception as e:
        _log_exc(f"{name} build/eager")
        err = f"model: {short_error(e)}"
        return [new_row(name, b.spec, status="error", error=err) for b in backends]
    say(f"{name} eager: step {eager['step_ms']:.2f} ms ({time.perf_counter() - t0:.1f} s)")
    rows = [eager]
    saved(rows if with_eager else rows[1:])
    for b in backends:
        if isinstance(b, PlainEager):
            continue
        if stop and stop():
            say(f"{name}: time is up, {b.spec} and the backends after it not measured")
            break
        t1 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ember's fallback warnings are counted in the row instead
            r = mb.backend_row(b)
        rows.append(r)
        saved(rows if with_eager else rows[1:])
        say(f"{name} {b.spec}: {describe(r)} ({time.perf_counter() - t1:.1f} s)")
    if not with_eager:
        rows = rows[1:]
    del mb, model, inputs
    gc.collect()
    if s.device == "cuda":
        torch.cuda.empty_cache()
    return rows


def describe(r):
    """One line of progress for a row."""
    if r["status"] != "ok":
        return f"{r['status'].upper()}: {r['error']}"
    f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    return (f"capture {f(r['capture_ms'], '.1f')} ms, first call cold {f(r['first_call_cold_ms'], '.1f')} ms / "
            f"warm {f(r['first_call_warm_ms'], '.1f')} ms, step {f(r['step_ms'], '.2f')} ms "
            f"({f(r['speedup'], '.2f')}x), graphs {f(r['graphs'], 'd')}, breaks {f(r['breaks'], 'd')}, "
            f"max err {f(r['max_err'], '.1e')}")


# ---------------------------------------------------------------------------------------------- overhead

def _tiny_add(x, y):
    return x + y


def _fresh_function(fn, tag):
    """A copy of fn with its own code object, so that each backend's cache entries stay its own."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name)


def overhead(backends, device="cpu", calls=10000, repeats=5, progress=None):
    """Per-call cost of a cache hit on f(x, y) = x + y with 4-element tensors, for each backend: the
    median over repeats of (loop of calls) / calls, the loops of all backends interleaved per repeat;
    overhead_us = call_us - the plain call's."""
    say = progress or (lambda msg: None)
    x, y = torch.ones(4, device=device), torch.ones(4, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    rows, fns = [], {}
    reset_all()
    for i, b in enumerate(backends):
        row = dict.fromkeys(OVERHEAD_FIELDS)
        row.update(backend=b.spec, status="ok")
        rows.append(row)
        if isinstance(b, PlainEager):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = b.compile(_fresh_function(_tiny_add, i))
                for _ in range(3):
                    f(x, y)
            fns[b.spec] = f
        except Unsupported as e:
            row.update(status="not supported", error=str(e))
        except Exception as e:
            _log_exc(f"overhead {b.spec}")
            row.update(status="error", error=short_error(e))
    fns["eager"] = _tiny_add
    samples = {k: [] for k in fns}

    def loop(f):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            f(x, y)
        sync()
        return (time.perf_counter() - t0) / calls

    for _ in range(repeats):
        for k, f in fns.items():
            samples[k].append(loop(f))
    eager_us = statistics.median(samples["eager"]) * 1e6
    for row in rows:
        if row["backend"] in samples and row["status"] == "ok":
            us = statistics.median(samples[row["backend"]]) * 1e6
            row.update(call_us=us, eager_call_us=eager_us, overhead_us=us - eager_us)
        say(f"overhead {row['backend']}: " + (f"{row['call_us']:.2f} us per call, {row['overhead_us']:.2f} us over "
                                              f"a plain call" if row["call_us"] is not None else
                                              f"{row['status'].upper()}: {row['error']}"))
    reset_all()
    return rows


def warm_up(backends, device="cpu"):
    """Pays one-time process costs (imports, first compile of each backend, lazy initialization) on a
    trivial function before the suite, so that the first model's cold call does not carry them."""
    x = torch.randn(8, device=device, requires_grad=True)
    for i, b in enumerate(backends):
        if isinstance(b, PlainEager):
            continue
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = b.compile(_fresh_function(_warm, i))
            f(x).sum().backward()
            with torch.no_grad():
                f(x)
    reset_all()


def _warm(x):
    return torch.relu(x) * 2 + 1
