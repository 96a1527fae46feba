"""Runs one program eagerly and compiled and compares what they do; runs many programs in
worker subprocesses (a crash or hang is attributed to the program that caused it by running
it again alone in a fresh worker)."""
import collections
import collections.abc
import json
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import types
import warnings

STATUSES = ("ok", "wrong", "crash", "hang", "internal")


# ---- comparison ----

class Diff(Exception):
    def __init__(self, kind, msg):
        super().__init__(msg)
        self.kind, self.msg = kind, msg


def _float_same(a, b, exact):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if exact:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) or a == b


def _tensor_same(a, b, exact):
    import torch
    a, b = a.detach(), b.detach()
    if a.is_floating_point():
        if exact:
            same = (a == b) & (torch.signbit(a) == torch.signbit(b))
            return bool((same | (torch.isnan(a) & torch.isnan(b))).all())
        return bool(torch.isclose(a.double(), b.double(), rtol=1e-4, atol=1e-5, equal_nan=True).all())
    if a.is_complex():
        return bool(torch.isclose(a, b, equal_nan=True).all())
    return bool((a == b).all())


def compare(a, b, path, exact, seen=None, grads=False):
    """Raises Diff at the first difference between a (eager) and b (compiled)."""
    import torch
    seen = seen if seen is not None else set()
    if not exact and grads and {type(a), type(b)} == {type(None), torch.Tensor}:
        t = a if b is None else b
        if not bool(t.detach().any()):
            return  # a parameter the loss does not use: zeros instead of None (README: Backends)
    if type(a) is not type(b) and not _same_program_class(type(a), type(b)):
        raise Diff("type", f"{path}: {type(a).__name__} vs {type(b).__name__} ({_short(a)} vs {_short(b)})")
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype:
            raise Diff("dtype", f"{path}: dtype {a.dtype} vs {b.dtype}")
        if a.shape != b.shape:
            raise Diff("shape", f"{path}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
        if a.requires_grad != b.requires_grad:
            raise Diff("requires_grad", f"{path}: requires_grad {a.requires_grad} vs {b.requires_grad}")
        if exact and a.numel() > 1 and any(x != y for n, x, y in zip(a.shape, a.stride(), b.stride()) if n > 1):
            raise Diff("stride", f"{path}: stride {a.stride()} vs {b.stride()}")
        if not _tensor_same(a, b, exact):
            raise Diff("value", f"{path}: values differ\n  eager:    {_short(a)}\n  compiled: {_short(b)}")
        return
    np = sys.modules.get("numpy")
    if np is not None and isinstance(a, (np.ndarray, np.generic)):  # the type was compared above
        if a.dtype != b.dtype or np.shape(a) != np.shape(b):
            raise Diff("dtype", f"{path}: {a.dtype}{np.shape(a)} vs {b.dtype}{np.shape(b)}")
        if not _tensor_same(torch.as_tensor(np.array(a)), torch.as_tensor(np.array(b)), exact):
            raise Diff("value", f"{path}: values differ\n  eager:    {_short(a)}\n  compiled: {_short(b)}")
        return
    if isinstance(a, float):
        if not _float_same(a, b, exact):
            raise Diff("value", f"{path}: {a!r} vs {b!r}")
        return
    if isinstance(a, (int, str, bool, type(None), torch.dtype, torch.device, torch.Size, bytes)):
        if a != b:
            raise Diff("value", f"{path}: {a!r} vs {b!r}")
        return
    if isinstance(a, (types.ModuleType, type, types.FunctionType)):
        if getattr(a, "__qualname__", a.__name__) != getattr(b, "__qualname__", b.__name__):
            raise Diff("value", f"{path}: {a!r} vs {b!r}")
        return
    if callable(a) and not isinstance(a, (type, torch.nn.Module)) and not hasattr(a, "__dict__"):
        if getattr(a, "__qualname__", None) != getattr(b, "__qualname__", None):  # builtins, bound methods
            raise Diff("value", f"{path}: {a!r} vs {b!r}")
        return
    if isinstance(a, types.GeneratorType):
        return  # same type; not consumed
    if id(a) in seen:
        return
    seen.add(id(a))
    if isinstance(a, (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView)):
        compare(list(a), list(b), f"list({path})", exact, seen, grads)  # dict views: same type, then items
        return
    if isinstance(a, collections.deque):
        compare(a.maxlen, b.maxlen, f"{path}.maxlen", exact, seen, grads)
        compare(list(a), list(b), f"list({path})", exact, seen, grads)
        return
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise Diff("len", f"{path}: len {len(a)} vs {len(b)} ({_short(a)} vs {_short(b)})")
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", exact, seen, grads)
        return
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            raise Diff("keys", f"{path}: keys {list(a.keys())} vs {list(b.keys())}")
        for k in a:
            compare(a[k], b[k], f"{path}[{k!r}]", exact, seen)
        return
    if isinstance(a, torch.nn.Module):
        compare(dict(a.state_dict(keep_vars=True)), dict(b.state_dict(keep_vars=True)), f"{path}.state_dict()",
                exact, seen)
        for name in ("steps", "scale"):
            if hasattr(a, name) or hasattr(b, name):
                compare(getattr(a, name, None), getattr(b, name, None), f"{path}.{name}", exact, seen)
        return
    if hasattr(a, "__dict__"):
        compare(dict(vars(a)), dict(vars(b)), f"{path}.__dict__", exact, seen)
        return
    if hasattr(type(a), "__slots__"):
        slots = [n for n in type(a).__slots__ if hasattr(a, n) or hasattr(b, n)]
        compare({n: getattr(a, n, None) for n in slots}, {n: getattr(b, n, None) for n in slots}, path, exact, seen)
        return
    if a != b:
        raise Diff("value", f"{path}: {a!r} vs {b!r}")


def _same_program_class(a, b):
    """The eager and compiled runs load the program twice: its classes are distinct objects."""
    return (a.__qualname__ == b.__qualname__ and a.__module__ != b.__module__
            and a.__module__.startswith("_ember_fuzz_prog_") and b.__module__.startswith("_ember_fuzz_prog_"))


def _short(x, n=300):
    try:
        s = repr(x)
    except Exception as e:  # noqa: BLE001
        s = f"<repr failed: {e!r}>"
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[:n] + "..."


def _tensor_leaves(x, out=None, seen=None):
    import torch
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif id(x) in seen:
        return out
    elif isinstance(x, (list, tuple)):
        seen.add(id(x))
        for e in x:
            _tensor_leaves(e, out, seen)
    elif isinstance(x, dict):
        seen.add(id(x))
        for e in x.values():
            _tensor_leaves(e, out, seen)
    elif hasattr(x, "__dict__") and not isinstance(x, type) and not callable(x):
        seen.add(id(x))
        for e in vars(x).values():
            _tensor_leaves(e, out, seen)
    return out


def _aliasing(result, args):
    """For each tensor of the result: the argument tensor it is, or whose storage it shares."""
    ins = _tensor_leaves(args)
    outs = _tensor_leaves(result)
    sig = []
    for o in outs:
        tag = "new"
        for i, t in enumerate(ins):
            if o is t:
                tag = f"is arg tensor {i}"
                break
            try:
                if o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() and o.numel() and t.numel():
                    tag = f"view of arg tensor {i}"
            except Exception:  # noqa: BLE001
                pass
        sig.append(tag)
    return sig


def _exc(e):
    return None if e is None else f"{type(e).__name__}: {e}"


def _call(f, args, mod, k):
    try:
        if getattr(mod, "call", None) is not None:  # the program says how it is called
            return mod.call(f, k, args), None
        return f(*args), None
    except Exception as e:  # noqa: BLE001
        return None, e


def _backward(result, args, model):
    import torch
    outs = [t for t in _tensor_leaves(result) if t.requires_grad and t.is_floating_point()]
    if not outs:
        return None, None
    try:
        loss = sum((t.double() * (i + 1)).sum() for i, t in enumerate(outs))
        loss.backward()
    except Exception as e:  # noqa: BLE001
        return None, e
    leaves = [t for t in _tensor_leaves(args) if t.is_leaf and t.requires_grad]
    grads = [t.grad for t in leaves]
    if model is not None:
        grads += [p.grad for p in model.parameters()]
    return grads, None


def run_source(src, path, backend="eager", compiler="ember"):
    """Runs the program in src eagerly and compiled; returns a result dict: status ("ok",
    "wrong", "internal"), sig (the failure's kind, for the minimizer), detail, eager_excs."""
    import torch

    import ember
    from . import gen
    exact = backend == "eager" and compiler == "ember"
    res = {"status": "ok", "sig": "ok", "detail": "", "eager_excs": [], "path": path}
    try:
        mod_e = gen.load_module(src, path, "eager")
        mod_c = gen.load_module(src, path, "compiled")
    except Exception as e:  # noqa: BLE001
        res.update(status="internal", sig="internal:load", detail=f"program does not load: {_exc(e)}")
        return res
    ember.reset()
    if compiler == "torch":
        torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _run_pair(mod_e, mod_c, backend, compiler, exact, res)
    except Diff as d:
        res.update(status="wrong", sig="wrong:" + d.kind, detail=d.msg)
    except Exception as e:  # noqa: BLE001
        import traceback
        res.update(status="internal", sig="internal:harness", detail=traceback.format_exc())
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        if compiler == "ember":
            import ember.testing
            res["counters"] = ember.testing.counters()
            if res["counters"].get("aborts"):
                res["plain_reasons"] = _plain_reasons()
            ember.testing.reset_counters()
        gen.unload(mod_e)
        gen.unload(mod_c)
        ember.reset()
        if compiler == "torch":
            torch._dynamo.reset()
    return res


def _plain_reasons():
    """Why each code ember ran as plain Python did so (its abort reason, file and line left out)."""
    from ember import _C
    out = []
    for code in _C._seen_codes():
        st = _C.code_state(code)
        if st.get("mode") == "fallback" and st.get("reason"):
            why = re.sub(r"\(?[^\s()]+\.py:-?\d+\)?:?|0x[0-9a-f]+|_at_\d+", "", str(st["reason"]))
            out.append(" ".join(why.split())[:200])
    return out


def _compile(target, backend, compiler):
    import torch

    import ember
    if compiler == "torch":
        return torch.compile(target, backend=backend)
    # EMBER_FUZZ_DYNAMIC (python -m ember.fuzz --dynamic): ember.compile's `dynamic` for every program
    dyn = {"true": True, "false": False}.get(os.environ.get("EMBER_FUZZ_DYNAMIC", ""), None)
    return ember.compile(target, backend=backend, dynamic=dyn)


def _run_pair(mod_e, mod_c, backend, compiler, exact, res):
    import torch
    model_e = model_c = None
    if mod_e.make_model is not None:
        torch.manual_seed(0)
        model_e = mod_e.make_model()
        torch.manual_seed(0)
        model_c = mod_c.make_model()
        f_e, f_c = model_e, _compile(model_c, backend, compiler)
    else:
        f_e, f_c = mod_e.fn, _compile(mod_c.fn, backend, compiler)
    excs = set()
    for k in range(len(mod_e.CALLS)):
        where = f"call {k}"
        mod_e.before_call(k)
        mod_c.before_call(k)
        torch.manual_seed(k)
        args_e = mod_e.make_args(k)
        torch.manual_seed(k)
        args_c = mod_c.make_args(k)
        torch.manual_seed(k)
        r_e, e_e = _call(f_e, args_e, mod_e, k)
        torch.manual_seed(k)
        r_c, e_c = _call(f_c, args_c, mod_c, k)
        if e_e is not None:
            excs.add(type(e_e).__name__)
            res["eager_excs"] = sorted(excs)
        if (e_e is None) != (e_c is None) or (e_e is not None and type(e_e) is not type(e_c)):
            kind = f"exception:{type(e_e).__name__ if e_e else None}/{type(e_c).__name__ if e_c else None}"
            raise Diff(kind, f"{where}: raised\n  eager:    {_exc(e_e)}\n  compiled: {_exc(e_c)}"
                       + ("" if e_c is not None else f"\n  compiled returned {_short(r_c)}")
                       + ("" if e_e is not None else f"\n  eager returned {_short(r_e)}"))
        if e_e is not None and not isinstance(e_e, RuntimeError) and str(e_e) != str(e_c):
            raise Diff("exception-message", f"{where}: messages\n  eager:    {_exc(e_e)}\n  compiled: {_exc(e_c)}")
        if e_e is None:
            _wrap(compare, "result", r_e, r_c, f"{where}: result", exact)
            if exact:
                a_e, a_c = _aliasing(r_e, args_e), _aliasing(r_c, args_c)
                if a_e != a_c:
                    raise Diff("alias", f"{where}: result aliasing\n  eager:    {a_e}\n  compiled: {a_c}")
        _wrap(compare, "args", args_e, args_c, f"{where}: argument", exact)
        _wrap(compare, "state", mod_e.state(), mod_c.state(), f"{where}: globals/printed", exact)
        if model_e is not None:
            _wrap(compare, "module", model_e, model_c, f"{where}: module", exact)
        if getattr(mod_e, "GRAD", False) and e_e is None:
            g_e, be = _backward(r_e, args_e, model_e)
            g_c, bc = _backward(r_c, args_c, model_c)
            if (be is None) != (bc is None):
                raise Diff("backward-exception", f"{where}: backward raised\n  eager:    {_exc(be)}\n"
                           f"  compiled: {_exc(bc)}")
            _wrap(compare, "grad", g_e, g_c, f"{where}: gradients", exact, None, True)


def _wrap(fn, prefix, *a):
    try:
        fn(*a)
    except Diff as d:
        raise Diff(f"{prefix}:{d.kind}", d.msg) from None


def run_file(path, backend="eager", compiler="ember"):
    with open(path) as f:
        return run_source(f.read(), path, backend, compiler)


# ---- workers ----

class Worker:
    """A subprocess running programs one at a time (python -m ember.fuzz.worker)."""

    def __init__(self, tmpdir):
        self.log = os.path.join(tmpdir, f"worker-{os.getpid()}-{time.monotonic_ns()}.log")
        self.logf = open(self.log, "w")
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen([sys.executable, "-m", "ember.fuzz.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.logf, env=env, start_new_session=True,
                                     bufsize=0)  # unbuffered: a line select() saw is never left in a buffer
        self.job = None
        self.deadline = None
        self.ready = False  # set when the worker has imported torch and ember

    STARTUP_S = 120.0

    def send(self, job, timeout):
        self.job = job
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout + (0 if self.ready else self.STARTUP_S)
        self.proc.stdin.write((json.dumps(job["req"]) + "\n").encode())
        self.proc.stdin.flush()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.logf.close()

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.kill()
        self.logf.close()

    def stderr_tail(self, n=2000):
        try:
            self.logf.flush()
            with open(self.log, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""


def _death(worker):
    rc = worker.proc.wait()
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return {"status": "crash", "sig": f"crash:{name}", "detail": f"worker killed by {name}\n"
                + worker.stderr_tail()}
    return {"status": "crash", "sig": f"crash:exit{rc}", "detail": f"worker exited with {rc}\n"
            + worker.stderr_tail()}


def run_jobs(reqs, jobs=1, timeout=60.0, tmpdir="/tmp", batch=True, on_result=None, keep=False):
    """Runs each request (a dict for ember.fuzz.worker) and returns their results, in order.
    A worker that dies or runs past the timeout is replaced; the program it was running is run
    again alone in a fresh worker, whose outcome is the program's. keep: leave the idle workers
    running for the next call (shutdown_idle() ends them)."""
    pending = collections.deque((i, r, False) for i, r in enumerate(reqs))
    results = [None] * len(reqs)
    batch_fail = {}
    workers = []
    sel = selectors.DefaultSelector()
    try:
        while pending or workers:
            while pending and len(workers) < jobs:
                i, req, solo = pending.popleft()
                w = None
                if not solo and batch:
                    w = next((x for x in _idle if x.proc.poll() is None), None)
                    if w is not None:
                        _idle.remove(w)
                if w is None:
                    w = Worker(tmpdir)
                w.solo = solo or not batch
                w.send({"i": i, "req": req}, timeout)
                workers.append(w)
                sel.register(w.proc.stdout, selectors.EVENT_READ, w)
            now = time.monotonic()
            wait = max(0.0, min(w.deadline for w in workers) - now)
            events = sel.select(timeout=min(wait, 1.0))
            done = []
            for key, _ in events:
                w = key.data
                line = w.proc.stdout.readline()
                if line:
                    res = json.loads(line)
                    if res.get("ready"):
                        w.ready = True
                        w.deadline = time.monotonic() + w.timeout
                        continue
                else:
                    res = _death(w)
                done.append((w, res, bool(line)))
            now = time.monotonic()
            for w in workers:
                if w.deadline <= now and all(w is not d[0] for d in done):
                    done.append((w, {"status": "hang", "sig": "hang", "detail": f"no result after {timeout:.0f} s\n"
                                     + w.stderr_tail()}, False))
            for w, res, alive in done:
                sel.unregister(w.proc.stdout)
                workers.remove(w)
                i = w.job["i"]
                if res["status"] in ("crash", "hang") or not alive:
                    w.kill()
                    if not w.solo:  # attribute: run it again alone
                        batch_fail[i] = res
                        pending.appendleft((i, reqs[i], True))
                        continue
                    if res["status"] not in ("crash", "hang"):
                        res = _death(w)
                else:
                    if w.solo:
                        w.close()
                    else:
                        _idle.append(w)
                if i in batch_fail and res["status"] not in ("crash", "hang"):
                    first = batch_fail.pop(i)
                    res = dict(first, detail="only after other programs in the same worker (alone: "
                               + res["status"] + ")\n" + first["detail"])
                res["i"] = i
                results[i] = res
                if on_result:
                    on_result(i, res)
    finally:
        for w in workers:
            w.kill()
        if not keep:
            shutdown_idle()
    return results


_idle = []


def shutdown_idle():
    while _idle:
        _idle.pop().close()
