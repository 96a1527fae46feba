"""Program generator of the differential fuzzer.

A program is Python source text, deterministic from (seed, index). It defines `fn` (or a small
`nn.Module` `Net` whose forward is the function under test), `CALLS` (the per-call knobs: shapes,
dtypes, Python constants), `make_args(k)`, `before_call(k)` (mutates globals between calls),
`state()` (the side effects to compare) and `GRAD` (whether the runner calls backward).

Validity comes from trial execution: the function body is built one statement at a time, and
each candidate is kept only if the program, run eagerly over every call, still runs (a probe at
the cursor records the live variables' values per call; the next statement is chosen from
what is really there: tensors with their shapes and dtypes, Python scalars, containers,
objects). A statement that raises is kept only when it raises in some calls but not all (an
exception compared as behaviour), or when it is a deliberate `raise`.
"""
import math
import random
import signal
import sys
import types
import warnings

import torch

HEADER = '''\
import collections
import dataclasses
import io
import math
import weakref

import numpy as np
import torch
import ember

OUT = io.StringIO()
G_F = 1.5
G_FLAG = True
G_LIST = [1, 2, 3]
G_T = torch.arange(4.0)
G_COUNT = 0
G_SET = {1, 2}


class Acc:
    K = 1

    def __init__(self, scale):
        self.scale = scale
        self.count = 0

    def apply(self, t):  # replaced per call by before_call (ACC_APPLY): a method changed on the class
        self.count += 1
        return t * self.scale

    @property
    def double(self):
        return self.scale * 2


def _apply_b(self, t):
    self.count += 2
    return t * self.scale + 1


ACC_APPLY = (Acc.apply, _apply_b)


class Vec:
    """operators through dunder methods: reflected, unary, ==, truth"""

    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        return Vec(self.t + (o.t if isinstance(o, Vec) else o))

    def __radd__(self, o):
        return Vec(o + self.t)

    def __mul__(self, o):
        return Vec(self.t * (o.t if isinstance(o, Vec) else o))

    def __neg__(self):
        return Vec(-self.t)

    def __eq__(self, o):
        return isinstance(o, Vec) and self.t is o.t

    def __bool__(self):
        return self.t.dim() > 0


@dataclasses.dataclass
class Pair:
    a: object
    b: object


P = collections.namedtuple("P", ["a", "b"])


@ember.disable
def opaque(t):
    return t * 2 + 1


@ember.disable
def opaque_raise(t, s):
    """a graph break that raises on half of the values (a try block's handler runs)"""
    if float(t.float().sum()) > s:
        raise ValueError(f"over {s}")
    return t - 1


def helper(t, s):
    return t * s - 1


def noisy(t, s=1):
    print("noisy", s, tuple(t.shape), file=OUT)
    return t + s


def itemy(t):
    v = t.sum().item()
    return t * v if v == v else t


def rec(t, n):
    return t if n <= 0 else rec(t * 0.5, n - 1)


class Slotted:
    __slots__ = ("v", "w")

    def __init__(self, v):
        self.v = v
        self.w = 0

    def bump(self, t):
        self.w += 1
        print("bump", self.w, file=OUT)
        return t + self.w


def state():
    return dict(out=OUT.getvalue(), G_F=G_F, G_FLAG=G_FLAG, G_LIST=G_LIST, G_T=G_T, G_COUNT=G_COUNT,
                G_SET=sorted(G_SET), K=Acc.K)
'''

FLOATS = ["0.5", "2.0", "-1.5", "0.0", "-0.0", "3", "1", "float('inf')", "float('-inf')", "float('nan')", "True"]
FLOAT_VALUES = [0.5, 1.0, -1.5, 0.0, -0.0, 2.0, float("inf"), float("-inf"), float("nan"), 3.25]
MAX_NUMEL = 4096
# code that hits defects already known (while they are being fixed) can be generated less often
# (--known-rate), so that a run finds the other ones. The classes these markers hit (global sets
# read stale, dict views, isinstance(t, FloatTensor), mutable defaults of nested functions,
# module parameter generators) are fixed: they are generated as often as other code.
KNOWN_MARKERS = ("G_SET", "FloatTensor", ".keys()", ".items()", "memo=[]", "gp")
KNOWN_RATE = 1.0


class Block:
    def __init__(self, header, body=None, orelse=None):
        self.header = header
        self.body = body if body is not None else []
        self.orelse = orelse  # None or list
        self.suffix = []  # statements after the filled body
        self.handlers = []  # (header, statements) after the body: a try block's except/finally clauses

    def __repr__(self):
        return f"Block({self.header!r}, {self.body!r}, {self.orelse!r})"


PROBE = object()


def render_body(stmts, indent):
    out = []
    pad = "    " * indent
    for s in stmts:
        if s is PROBE:
            out.append(pad + "_PROBE(locals())")
        elif isinstance(s, Block):
            out.append(pad + s.header)
            inner = render_body(list(s.body) + s.suffix, indent + 1)
            out.extend(inner or [pad + "    pass"])
            for header, stmts in s.handlers:
                out.append(pad + header)
                out.extend(render_body(stmts, indent + 1) or [pad + "    pass"])
            if s.orelse is not None:
                out.append(pad + "else:")
                out.extend(render_body(s.orelse, indent + 1) or [pad + "    pass"])
        else:
            for line in s.split("\n"):
                out.append(pad + line)
    return out


def describe(v):
    """What the generator needs to know about a live value."""
    if isinstance(v, torch.Tensor):
        return ("T", tuple(v.shape), v.dtype, v.requires_grad, v.is_leaf)
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, float):
        return ("f", v)
    if isinstance(v, list):
        return ("L", len(v), all(isinstance(e, torch.Tensor) for e in v))
    if isinstance(v, dict):
        return ("D", tuple(v.keys()))
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return ("tup", len(v), all(isinstance(e, torch.Tensor) for e in v))
    if isinstance(v, str):
        return ("s", v)
    return ("O", type(v).__name__)


class _Reject(Exception):
    pass


def _alarm(signum, frame):
    raise _Reject("slow")


class Generator:
    def __init__(self, seed, index, known_rate=None):
        self.seed, self.index = seed, index
        self.known_rate = KNOWN_RATE if known_rate is None else known_rate
        self.rng = random.Random(seed * 1_000_003 + index)
        self.counter = 0
        self.trials = 0

    # ---- helpers ----
    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))] if seq else None

    def chance(self, p):
        return self.rng.random() < p

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ---- inputs ----
    def make_signature(self):
        r = self.rng
        self.module = self.chance(0.25)
        self.grad = self.chance(0.25)
        dims = {"A": [r.randint(1, 4)], "B": [r.randint(2, 5)]}
        self.F = r.choice([3, 4])
        params = []
        shapes = [("A", "B"), ("B",), ("A", "B"), ("B", "A"), ("A", 1), ("A", "B", "F"), ("F",), ("A", "F"), (),
                  (1, "B"), ("A",)]
        ntens = r.randint(1, 3)
        if self.module:
            params.append(("x", "tensor", ("A", "F"), "float"))
            if self.chance(0.4):
                params.append(("img", "tensor", ("A", 2, "B", "B"), "float"))
            ntens -= 1
        names = iter(["x", "y", "z", "w"]) if not self.module else iter(["y", "z", "w"])
        for _ in range(max(ntens, 0 if self.module else 1)):
            shp = r.choice(shapes)
            kind = r.choice(["float", "float", "float", "int", "float64"])
            params.append((next(names), "tensor", shp, kind))
        for nm, kind in (("n", "int"), ("f", "float"), ("flag", "bool")):
            if self.chance(0.6):
                params.append((nm, kind, None, None))
        if self.chance(0.35):
            params.append(("xs", "list", None, None))
        if self.chance(0.3):
            params.append(("cfg", "dict", None, None))
        if self.chance(0.2):
            params.append(("acc", "obj", None, None))
        if self.chance(0.15):
            params.append(("pt", "ntuple", None, None))
        if self.chance(0.15) and not self.grad and any(p[0] == "x" and p[2] for p in params):
            params.append(("xa", "alias", None, None))
        self.params = params
        # calls: the first sets every knob, later ones change a few (or none: a cache hit)
        ncalls = r.randint(2, 5) if self.chance(0.8) else r.randint(6, 11)
        base = dict(A=dims["A"][0], B=dims["B"][0], F=self.F, dt="torch.float32", n=r.randint(0, 4),
                    f=r.choice(FLOAT_VALUES), flag=r.choice([True, False]), gf=1.5, gflag=True, glist=3,
                    alias=0, rg=True, nc=False, gt=0, ck=1, gs=2, dd=0, gm=True, kw=0,
                    r3=False, ca=0)
        calls = [base]
        knobs = ["A", "B", "dt", "n", "f", "flag", "gf", "gflag", "glist", "n", "f", "alias", "rg", "nc", "gt", "ck",
                 "gs", "f0", "f0", "n1", "dd", "gm", "kw", "kw", "r3", "ca"]
        for _ in range(ncalls - 1):
            c = dict(calls[-1])
            for _ in range(r.choice([0, 1, 1, 2, 3])):
                knob = r.choice(knobs)
                if knob == "kw":  # how many trailing arguments are passed by keyword
                    c["kw"] = r.randint(0, 2)
                elif knob == "r3":
                    c["r3"] = not c["r3"]
                elif knob == "dd":
                    c["dd"] = 1 - c["dd"]
                elif knob == "ca":  # Acc.apply replaced on the class
                    c["ca"] = 1 - c["ca"]
                elif knob == "gm":
                    c["gm"] = not c["gm"]
                elif knob in ("alias", "gt", "gs"):
                    c[knob] = r.randint(0, 2)
                elif knob == "ck":
                    c["ck"] = r.choice([1, 2, 1.0, True, -1])
                elif knob in ("rg", "nc"):
                    c[knob] = not c[knob]
                elif knob == "f0":  # same value, other sign of zero / nan / inf
                    c["f"] = r.choice([0.0, -0.0, float("nan"), float("inf"), -0.0])
                elif knob == "n1":  # same value, other type
                    v = c["n"]
                    c["n"] = r.choice([int(v), float(v), bool(v)]) if v in (0, 1) else r.choice([int(v), float(v)])
                if knob == "A":
                    c["A"] = r.randint(1, 4)
                elif knob == "B":
                    c["B"] = r.randint(2, 5)
                elif knob == "dt":
                    c["dt"] = r.choice(["torch.float32", "torch.float64"])
                elif knob == "n":
                    # mostly ints; sometimes the same value as a float or a bool (guard on type)
                    v = r.randint(0, 4)
                    c["n"] = r.choice([v, v, v, float(v), bool(v % 2)])
                elif knob == "f":
                    c["f"] = r.choice(FLOAT_VALUES)
                elif knob == "flag":
                    c["flag"] = not c["flag"]
                elif knob == "gf":
                    c["gf"] = r.choice([1.5, 2.0, -0.0, 0.0])
                elif knob == "gflag":
                    c["gflag"] = not c["gflag"]
                else:
                    c["glist"] = r.randint(1, 4)
            calls.append(c)
        self.calls = calls
        self.special = self.chance(0.2)  # nan/inf/-0.0 inside the input tensors

    def render_inputs(self):
        lines = ["CALLS = ["]
        for c in self.calls:
            items = ", ".join(f"{k}={_lit(v)}" for k, v in c.items())
            lines.append(f"    dict({items}),")
        lines.append("]")
        lines.append("")
        lines.append("")
        lines.append("def make_args(k):")
        lines.append("    c = CALLS[k]")
        lines.append("    g = torch.Generator().manual_seed(1000 + k)")
        lines.append("    A, B, F, dt = c['A'], c['B'], c['F'], c['dt']")
        out = []
        for name, kind, shp, tk in self.params:
            if kind == "tensor":
                dims = ", ".join(str(d) for d in shp)
                size = f"({dims},)" if dims else "()"
                if tk == "int":
                    lines.append(f"    {name} = torch.randint(-4, 5, {size}, generator=g)")
                else:
                    dt = "torch.float64" if tk == "float64" else "dt"
                    lines.append(f"    {name} = torch.randn({size}, generator=g, dtype={dt})")
                    if self.special and shp:
                        lines.append(f"    {name}.view(-1)[0] = float('nan') if k % 2 else -0.0")
                    if name == "x" and self.chance(0.2):  # one more dimension in some calls
                        lines.append("    if c['r3']:")
                        lines.append(f"        {name} = torch.stack([{name}, {name} * 2])")
                    if len(shp) >= 2 and self.chance(0.3):
                        lines.append(f"    if c['nc']:")
                        lines.append(f"        {name} = {name}.transpose(0, 1).contiguous().transpose(0, 1)")
                    if self.grad and tk != "int" and name in ("x", "y"):
                        lines.append(f"    {name}.requires_grad_(c['rg'] or k == 0)")
            elif kind in ("int", "float", "bool"):
                lines.append(f"    {name} = c[{name!r}]" if name != "flag" else "    flag = c['flag']")
            elif kind == "list":
                lines.append("    xs = [torch.randn(B, generator=g, dtype=dt) for _ in range(1 + A % 3)]")
            elif kind == "dict":
                lines.append("    cfg = {'scale': c['f'], 'on': c['flag'], 't': torch.randn(A, generator=g)}")
            elif kind == "obj":
                lines.append("    acc = Acc(c['n'])")
            elif kind == "ntuple":
                lines.append("    pt = P(torch.randn(B, generator=g, dtype=dt), c['n'])")
            elif kind == "alias":  # another view of x (or x itself, or a copy), changing between calls
                lines.append("    xa = x if c['alias'] == 1 else x[:1] if c['alias'] == 2 else x[:1].clone()")
            out.append(name)
        lines.append(f"    return ({', '.join(out)},)")
        lines.append("")
        lines.append("")
        lines.append("def call(f, k, args):")
        lines.append("    n = min(CALLS[k]['kw'], len(args))  # trailing arguments passed by keyword")
        lines.append("    if not n:")
        lines.append("        return f(*args)")
        lines.append(f"    names = {out!r}")
        lines.append("    return f(*args[:len(args) - n], **dict(zip(names[len(args) - n:], args[len(args) - n:])))")
        lines.append("")
        lines.append("")
        lines.append("def before_call(k):")
        lines.append("    global G_F, G_FLAG, G_LIST, G_T")
        lines.append("    c = CALLS[k]")
        lines.append("    G_F = c['gf']")
        lines.append("    G_FLAG = c['gflag']")
        lines.append("    G_LIST[:] = list(range(c['glist']))")
        lines.append("    G_SET.clear()")
        lines.append("    G_SET.update(range(c['gs']))")
        lines.append("    Acc.K = c['ck']")
        lines.append("    Acc.apply = ACC_APPLY[c['ca']]")
        lines.append("    torch.set_default_dtype(torch.float64 if c['dd'] else torch.float32)")
        lines.append("    torch.set_grad_enabled(c['gm'])")
        lines.append("    if c['gt'] == 1:")
        lines.append("        G_T = torch.arange(4.0) * (k + 1)")
        lines.append("    elif c['gt'] == 2:")
        lines.append("        G_T = torch.arange(4, dtype=torch.float64)")
        lines.append("")
        lines.append("")
        lines.append(f"GRAD = {self.grad}")
        return lines

    def render(self, body):
        lines = [f"# ember fuzz program: seed={self.seed} index={self.index}", HEADER.rstrip("\n"), "", ""]
        argnames = ", ".join(p[0] for p in self.params)
        if self.module:
            lines += ["class Net(torch.nn.Module):",
                      "    def __init__(self):",
                      "        super().__init__()",
                      f"        self.lin = torch.nn.Linear({self.F}, {self.F})",
                      "        self.conv = torch.nn.Conv2d(2, 2, 3, padding=1)",
                      f"        self.register_buffer('buf', torch.zeros({self.F}))",
                      "        self.scale = 0.5",
                      "        self.steps = 0",
                      "",
                      f"    def forward(self, {argnames}):",
                      "        global G_COUNT"]
            lines += render_body(body, 2) or ["        pass"]
            lines += ["", "", "def make_model():", "    return Net()", "", ""]
        else:
            lines += [f"def fn({argnames}):", "    global G_COUNT"]
            lines += render_body(body, 1) or ["    pass"]
            lines += ["", "", "make_model = None", "", ""]
        lines += self.render_inputs()
        return "\n".join(lines) + "\n"

    # ---- trial execution ----
    def trial(self, body):
        """Run the program eagerly over every call with a probe at the cursor. Returns
        (snapshots per reaching call, exception per call) or raises _Reject."""
        self.trials += 1
        src = self.render(body)
        snaps = {}
        mod = load_module(src, f"<fuzz-gen-{self.seed}-{self.index}>")
        k_box = [0]

        def probe(loc):
            if k_box[0] not in snaps:
                d = {}
                for name, v in loc.items():
                    if name.startswith("_") or name == "self":
                        continue
                    d[name] = describe(v)
                    if isinstance(v, torch.Tensor) and v.numel() > MAX_NUMEL:
                        raise _Reject("too big")
                snaps[k_box[0]] = d

        mod._PROBE = probe
        excs = {}
        model = None
        if self.module:
            torch.manual_seed(0)
            model = mod.make_model()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._run_calls(mod, model, k_box, excs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            torch.set_default_dtype(torch.float32)
            torch.set_grad_enabled(True)
            unload(mod)
        return snaps, excs

    def _run_calls(self, mod, model, k_box, excs):
        for k in range(len(self.calls)):
            k_box[0] = k
            mod.before_call(k)
            args = mod.make_args(k)
            try:
                r = mod.call(model or mod.fn, k, args)
                for v in _leaves(r):
                    if isinstance(v, torch.Tensor) and v.numel() > MAX_NUMEL:
                        raise _Reject("too big")
            except _Reject:
                raise
            except Exception as e:  # noqa: BLE001
                excs[k] = e

    # ---- the body ----
    def env(self, snaps):
        """name -> list of descriptors (one per call that reached the cursor)."""
        ks = sorted(snaps)
        if not ks:
            return {}
        names = set(snaps[ks[0]])
        for k in ks[1:]:
            names &= set(snaps[k])
        return {n: [snaps[k][n] for k in ks] for n in sorted(names)}

    def generate(self):
        self.make_signature()
        self.body = []
        self.snaps, excs = self.trial([PROBE])
        if excs:
            raise RuntimeError(f"fuzz generator: inputs fail: {excs}")
        nstmts = self.rng.randint(4, 14)
        self.fill(self.body, nstmts, depth=0)
        self.add_return(self.body)
        self.source = self.render(self.body)
        return self.source

    def try_add(self, stmts, cand, allow_raise=False):
        """Append cand (a list of statements) to stmts if the program still runs."""
        stmts.extend(cand)
        stmts.append(PROBE)
        try:
            snaps, excs = self.trial(self.body)
        except _Reject:
            snaps, excs = None, None
        except Exception:  # noqa: BLE001 - a statement that fails at definition (SyntaxError...)
            snaps, excs = None, None
        stmts.pop()
        ok = snaps is not None
        if ok and excs:
            raised_by_prog = [e for e in excs.values() if not isinstance(e, (ValueError,)) or "fuzz" not in str(e)]
            if allow_raise:
                ok = True
            elif len(excs) >= len(self.calls) or len(excs) > len(self.calls) // 2 or not self.chance(0.15):
                ok = False
            else:
                ok = all(isinstance(e, (ValueError, OverflowError, ZeroDivisionError, IndexError, KeyError,
                                        RuntimeError, TypeError)) for e in raised_by_prog)
        if not ok:
            del stmts[len(stmts) - len(cand):]
            return False
        if snaps:
            self.snaps = snaps
        return True

    def fill(self, stmts, n, depth):
        for _ in range(n):
            for _attempt in range(8):
                cand = self.statement(depth)
                if cand is None:
                    continue
                cand, allow_raise = cand
                blk = next((c for c in cand if isinstance(c, Block) and c.body == "FILL"), None)
                if blk is not None:
                    blk.body = list(getattr(blk, "prefix", []))
                    if blk.orelse == "FILL":
                        blk.orelse = []
                    before = list(stmts)
                    saved = self.snaps
                    stmts.extend(cand)
                    # the block's own statements, generated with the cursor inside it
                    blk.body.append(PROBE)
                    try:
                        s2, _ = self.trial(self.body)
                    except Exception:  # noqa: BLE001
                        s2 = None
                    blk.body.pop()
                    if s2:
                        self.snaps = s2
                    self.fill(blk.body, self.rng.randint(1, 3), depth + 1)
                    if blk.orelse is not None:
                        self.snaps = saved
                        self.fill(blk.orelse, self.rng.randint(0, 2), depth + 1)
                    if self.chance(0.2) and blk.header.startswith("if "):
                        self.add_return(blk.body)
                    stmts.append(PROBE)
                    try:
                        s3, _ = self.trial(self.body)
                    except Exception:  # noqa: BLE001
                        s3 = None
                    stmts.pop()
                    if s3 is None:
                        stmts[:] = before
                        self.snaps = saved
                        continue
                    self.snaps = s3 if s3 else saved
                    break
                if self.try_add(stmts, cand, allow_raise):
                    break

    # ---- pools ----
    def tensors(self, env, pred=None):
        out = []
        for name, ds in env.items():
            if all(d[0] == "T" for d in ds) and (pred is None or all(pred(d) for d in ds)):
                out.append(name)
        return out

    def ftensors(self, env):
        return self.tensors(env, lambda d: d[2].is_floating_point)

    def scalars(self, env, kinds=("i", "f", "b")):
        return [n for n, ds in env.items() if all(d[0] in kinds for d in ds)]

    def of_kind(self, env, kind):
        return [n for n, ds in env.items() if all(d[0] == kind for d in ds)]

    def scalar_expr(self, env):
        r = self.rng.random()
        sc = self.scalars(env)
        if r < 0.35 and sc:
            return self.pick(sc)
        if r < 0.45:
            return self.pick(["G_F", "len(G_LIST)", "G_LIST[-1] if G_LIST else 0"])
        if r < 0.55:
            ts = self.tensors(env, lambda d: len(d[1]) >= 1)
            if ts:
                return f"{self.pick(ts)}.shape[0]"
        return self.pick(FLOATS)

    def compatible(self, env, t, fn):
        """names of tensors u for which fn(shape_t, shape_u) holds in every call."""
        out = []
        for u in self.tensors(env):
            ok = True
            for dt, du in zip(env[t], env[u]):
                try:
                    ok = ok and fn(dt[1], du[1])
                except Exception:  # noqa: BLE001
                    ok = False
            if ok:
                out.append(u)
        return out

    def statement(self, depth):
        env = self.env(self.snaps)
        w = [("tensor", 30), ("binary", 18), ("view", 12), ("inplace", 10), ("scalar", 8), ("container", 10),
             ("object", 5), ("closure", 4), ("global", 4), ("gbreak", 8), ("raise", 2), ("misc", 8), ("numpy", 4),
             ("newer", 4), ("fold", 4), ("item", 4)]
        if self.module:
            w.append(("module", 12))
        if self.grad:
            w.append(("grad", 10))
        if depth < 2:
            w += [("if", 8), ("loop", 5), ("with", 2), ("try", 3)]
        total = sum(x[1] for x in w)
        r = self.rng.uniform(0, total)
        for kind, wt in w:
            r -= wt
            if r <= 0:
                break
        try:
            res = getattr(self, "s_" + kind)(env)
        except IndexError:
            return None
        if res is None:
            return None
        text = repr(res)
        if any(m in text for m in KNOWN_MARKERS) and not self.chance(self.known_rate):
            return None
        if isinstance(res, tuple):
            return res
        return res, False

    def s_tensor(self, env):
        ts = self.ftensors(env) if self.chance(0.8) else self.tensors(env)
        t = self.pick(ts)
        if t is None:
            return None
        s = self.scalar_expr(env)
        d = self.pick([0, -1])
        e = self.pick([
            "torch.relu({t})", "torch.sigmoid({t})", "torch.tanh({t})", "{t}.exp()", "{t}.abs()", "-{t}",
            "{t}.sin()", "torch.sqrt({t})", "torch.log({t})", "{t}.clamp(min={s})", "{t}.clamp(-1, 1)",
            "{t} * {s}", "{t} + {s}", "{t} / {s}", "{s} - {t}", "{t} ** 2", "torch.where({t} > 0, {t}, {s})",
            "{t}.sign()", "torch.nan_to_num({t})", "{t}.floor()", "{t}.reciprocal()",
            "torch.nn.functional.gelu({t})", "torch.softmax({t}, dim={d})", "{t}.cumsum({d})", "{t}.float()",
            "{t}.double()", "{t}.to(torch.float64)", "{t}.int()", "({t} > {s})", "{t}.sum()", "{t}.sum({d})",
            "{t}.mean(dim={d}, keepdim=True)", "{t}.amax({d})", "{t}.max()", "{t}.min({d}).values",
            "{t}.argmax()", "{t}.norm()", "{t} * G_F", "{t} + G_T[0]", "helper({t}, {s})", "{t} % 3",
            "torch.zeros_like({t})", "torch.ones({t}.shape)", "torch.full_like({t}, {s})",
            "torch.arange({t}.numel())", "{t}.new_ones(2)", "torch.tensor([{s}, 1.0])", "{t}.clone()",
            "{t}.detach()", "{t}.mul({s}).add(1)", "{t}.masked_fill({t} < 0, 0.0)", "torch.isnan({t})",
            "{t}.type_as(G_T)", "({t} * 2).sum(dim=-1)",
        ]).format(t=t, s=s, d=d)
        v = self.fresh("t")
        return [f"{v} = {e}"]

    def s_binary(self, env):
        t = self.pick(self.tensors(env))
        if t is None:
            return None
        kind = self.rng.random()
        if kind < 0.6:
            us = self.compatible(env, t, lambda a, b: torch.broadcast_shapes(a, b) is not None)
            u = self.pick(us)
            e = self.pick(["{t} + {u}", "{t} * {u}", "{t} - {u}", "torch.maximum({t}, {u})",
                           "torch.add({t}, {u}, alpha=2)", "{t} / {u}", "torch.where({t} > {u}, {t}, {u})",
                           "{t} == {u}", "torch.atan2({t}, {u})"])
        elif kind < 0.85:
            us = self.compatible(env, t, lambda a, b: len(a) >= 1 and len(b) >= 1 and
                                 (len(b) == 1 and a[-1] == b[0] or len(b) >= 2 and a[-1] == b[-2]))
            u = self.pick(us)
            e = self.pick(["{t} @ {u}", "torch.matmul({t}, {u})"])
            if u is None:
                us = self.compatible(env, t, lambda a, b: len(a) >= 1 and len(b) == 2 and a[-1] == b[-1])
                u = self.pick(us)
                e = self.pick(["{t} @ {u}.t()", "torch.nn.functional.linear({t}, {u})", "{t} @ {u}.mT"])
        else:
            us = self.compatible(env, t, lambda a, b: len(a) >= 1 and a[1:] == b[1:] and len(a) == len(b))
            u = self.pick(us)
            e = self.pick(["torch.cat([{t}, {u}], dim=0)", "torch.cat(({t}, {u}))"])
            if self.chance(0.3):
                us = self.compatible(env, t, lambda a, b: a == b)
                u = self.pick(us)
                e = "torch.stack([{t}, {u}])"
        if u is None:
            return None
        v = self.fresh("t")
        return [f"{v} = " + e.format(t=t, u=u)]

    def s_view(self, env):
        t = self.pick(self.tensors(env, lambda d: len(d[1]) >= 1))
        if t is None:
            t = self.pick(self.tensors(env))
            if t is None:
                return None
            return [f"{self.fresh('t')} = {t}.reshape(1, 1)"]
        nd = min(len(d[1]) for d in env[t])
        opts = ["{t}.view(-1)", "{t}.reshape(-1)", "{t}[1:]", "{t}[:1]", "{t}[::2]", "{t}[0]", "{t}[-1]",
                "{t}[..., -1]", "{t}[:, None]", "{t}.unsqueeze(0)", "{t}.unsqueeze(-1)", "{t}.flatten()",
                "{t}.squeeze()", "{t}.narrow(0, 0, 1)", "{t}.chunk(2)[0]", "{t}.split(1)[-1]", "{t}.contiguous()",
                "{t}.unbind(0)[0]", "{t}.select(0, 0)", "{t}.unsqueeze(0).expand(2, *{t}.shape)",
                "{t}[{t} > 0]", "{t}[torch.tensor([0])]", "{t}[[0, -1]]", "{t}.flip(0)", "{t}.roll(1)",
                "{t}.t()" if nd <= 2 else "{t}.transpose(0, 1)"]
        if nd >= 2:
            opts += ["{t}.transpose(0, 1)", "{t}.t()" if nd == 2 else "{t}.mT", "{t}.permute(1, 0, *range(2, {t}.dim()))",
                     "{t}[:, :2]", "{t}[1:, 1:]", "{t}.diagonal()",
                     "{t}.reshape({t}.shape[0], -1)", "{t}.view({t}.shape[0], -1)", "{t}[0, 0]",
                     "{t}.expand({t}.shape[0], {t}.shape[1])" if all(d[1][0] == 1 for d in env[t]) else "{t}.T"]
        e = self.pick(opts).format(t=t)
        v = self.fresh("t")
        return [f"{v} = {e}"]

    def s_inplace(self, env):
        ts = self.tensors(env)
        t = self.pick(ts)
        if t is None:
            return None
        s = self.scalar_expr(env)
        nd = min(len(d[1]) for d in env[t])
        us = self.compatible(env, t, lambda a, b: torch.broadcast_shapes(a, b) == a)
        u = self.pick(us) or t
        opts = ["{t}.add_({s})", "{t}.mul_({u})", "{t}.clamp_(min=0)", "{t}.zero_()", "{t}.fill_({s})",
                "{t}.copy_({u})", "{t}.relu_()", "torch.sigmoid_({t})", "{t}.sub_({u}, alpha=2)",
                "{t} += {u}", "{t} *= {s}", "{t}.div_(2)", "{t}.neg_()", "{t}.abs_()"]
        if nd >= 1:
            v = self.fresh("v")
            opts += ["{t}[0] = {s}", "{t}[..., 0] += {s}", "{t}[-1:] = 0", f"{v} = {{t}}[0]\n{v}.mul_(2)",
                     f"{v} = {{t}}.view(-1)\n{v}[0] = {{s}}", "{t}.unsqueeze_(0)", "{t}[:1].add_(1)",
                     "{t}.narrow(0, 0, 1).copy_({t}[-1:])", "{t}.masked_fill_({t} > 1, 1.0)"]
        if nd >= 2:
            opts += ["{t}.transpose(0, 1).add_(1)", "{t}.t_()" if nd == 2 else "{t}.transpose_(0, 1)",
                     "{t}[:, 0] = {t}[:, -1]", "{t}.diagonal().zero_()"]
        if self.chance(0.1):
            opts = ["{t}.requires_grad_()", "{t}.detach_()"]
        e = self.pick(opts).format(t=t, s=s, u=u)
        return [e]

    def s_scalar(self, env):
        sc = self.scalars(env)
        s = self.scalar_expr(env)
        s2 = self.scalar_expr(env)
        ts = self.tensors(env)
        t = self.pick(ts)
        opts = ["{s} + 1", "{s} * 2", "max({s}, {s2})", "abs({s})", "-{s}", "float({s})", "int({s})",
                "{s} // 2", "{s} if {s2} else 0", "{s} != {s}", "math.isnan({s})", "math.copysign(1.0, {s})",
                "round({s}, 2)", "str({s})", "type({s}).__name__", "isinstance({s}, int)", "{s} == 0",
                "math.floor({s})", "bool({s})", "{s} > {s2}", "min([{s}, {s2}, 2])", "divmod({s}, 3)[0]",
                "{s} / 2", "{s} ** 2", "math.sqrt(abs({s}))", "1 / ({s} + 0.5)", "repr({s})", "f'{{{s}}}'",
                "torch.tensor({s})", "torch.full((2,), {s})", "torch.tensor([{s}]).dtype", "{s} + True",
                "Acc.K * {s}", "{s} in G_SET", "hash({s}) if {s} == {s} else 0", "[{s}] * 2", "({s}, {s2}) == (1, 2)"]
        if t is not None:
            opts += ["{t}.dim()", "{t}.numel()", "{t}.shape[-1]" if all(len(d[1]) for d in env[t]) else "{t}.dim()",
                     "{t}.dtype", "{t}.dtype == torch.float64", "{t}.requires_grad", "{t}.is_contiguous()",
                     "len({t}.shape)", "{t}.size()", "tuple({t}.shape)", "{t}.stride()", "{t}.is_floating_point()",
                     "{t}.device.type", "torch.zeros({t}.shape[0] + 1)" if all(len(d[1]) for d in env[t]) else "{t}.ndim",
                     "{t}.new_full((2,), {s})", "{t}.sum().tolist()",
                     "{t}.element_size()", "{t}.data_ptr() == {t}.data_ptr()", "{t}.is_leaf"]
        if sc:
            s = self.pick(sc)
        e = self.pick(opts).format(s=s, s2=s2, t=t)
        return [f"{self.fresh('s')} = {e}"]

    def s_container(self, env):
        ts = self.tensors(env)
        t, u = self.pick(ts), self.pick(ts)
        if t is None:
            return None
        s = self.scalar_expr(env)
        lists = self.of_kind(env, "L")
        tlists = [n for n in lists if all(d[2] and d[1] > 0 for d in env[n])]
        dicts = self.of_kind(env, "D")
        tups = self.of_kind(env, "tup")
        opts = [
            lambda: [f"{self.fresh('l')} = [{t}, {u}]"],
            lambda: [f"{self.fresh('l')} = [{t} * i for i in range(3)]"],
            lambda: [f"{self.fresh('d')} = {{'a': {t}, 'n': {s}}}"],
            lambda: [f"{self.fresh('p')} = ({t}, {s})"],
            lambda: [f"{self.fresh('t')}, {self.fresh('t')} = {t}.relu(), {u} + 1"],
            lambda: [f"{self.fresh('d')} = dict(x={t}, y=[{u}, {s}])"],
            # tuple keys holding tensors (hashed by identity), tuple ==, list searches
            lambda: [f"{self.fresh('t')} = {{({t}, 'a'): {t} * 2, ({u}, 1): {u} + 1}}[({u}, 1)]"],
            lambda: [f"{self.fresh('s')} = (({t}, 1) in {{({t}, 1), ({u}, 2)}}, ({t}, 1) == ({t}, 1), "
                     f"len({{({t}, 'k'): 1, ({t}, 'k'): 2}}))"],
            lambda: [f"{self.fresh('s')} = [{s}, 'x', None].index(None) + [1, {s}, 1].count(1)"],
        ]
        if lists:
            lst = self.pick(lists)
            opts += [lambda: [f"{lst}.append({t})"], lambda: [f"{lst}.insert(0, {u})"],
                     lambda: [f"{self.fresh('s')} = len({lst})"], lambda: [f"{lst}.reverse()"],
                     lambda: [f"{lst}.extend([{t}, {s}])"], lambda: [f"{self.fresh('p')} = tuple({lst})"]]
        if tlists:
            lst = self.pick(tlists)
            opts += [lambda: [f"{self.fresh('t')} = {lst}.pop()"], lambda: [f"{lst}[0] = {t}"],
                     lambda: [f"{self.fresh('l')} = [e * 2 for e in {lst} if e.dim() > 0]"],
                     lambda: [f"{self.fresh('t')} = sum(e.sum() for e in {lst})"],
                     lambda: [f"{self.fresh('t')}, *{self.fresh('l')} = {lst}"],
                     lambda: [f"{self.fresh('t')} = torch.stack([e.sum() for e in {lst}])"],
                     lambda: [f"del {lst}[0]"],
                     lambda: [f"{self.fresh('t')} = {lst}[-1]"],
                     lambda: [f"{lst}[0].add_(1)"],
                     lambda: [f"{lst}.append({lst})"] if self.chance(0.2) else [f"{lst}.sort(key=lambda e: e.numel())"]]
        if dicts:
            dd = self.pick(dicts)
            opts += [lambda: [f"{dd}['k'] = {t}"], lambda: [f"{self.fresh('s')} = 'k' in {dd}"],
                     lambda: [f"{dd}.pop('a', None)"], lambda: [f"{dd}.update(z={u})"],
                     lambda: [f"{self.fresh('d')} = {{k: v * 2 for k, v in {dd}.items() if isinstance(v, torch.Tensor)}}"],
                     lambda: [f"{self.fresh('l')} = list({dd}.keys())"], lambda: [f"{self.fresh('l')} = sorted({dd})"],
                     lambda: [f"{self.fresh('s')} = len({dd})"],
                     lambda: [f"{self.fresh('t')} = {dd}.get('t', {t})"],
                     lambda: [f"{dd}.setdefault('q', {s})"],
                     lambda: [f"{self.fresh('kv')} = {dd}.keys()"],
                     lambda: [f"{self.fresh('kv')} = {dd}.items()"]]
        views = [n for n, ds in env.items() if all(d[0] == "O" and d[1] in ("dict_keys", "dict_items") for d in ds)]
        if views:
            kv = self.pick(views)
            opts += [lambda: [f"{self.fresh('l')} = list({kv})"], lambda: [f"{self.fresh('s')} = len({kv})"]]
        if tups:
            tp = self.pick(tups)
            opts += [lambda: [f"{self.fresh('l')} = list({tp})"], lambda: [f"{self.fresh('s')} = len({tp})"],
                     lambda: [f"{self.fresh('p')} = {tp} + ({t},)"]]
        return self.pick(opts)()

    def s_object(self, env):
        t = self.pick(self.ftensors(env)) or self.pick(self.tensors(env))
        s = self.scalar_expr(env)
        objs = [n for n, ds in env.items() if all(d[0] == "O" and d[1] == "Acc" for d in ds)]
        pairs = [n for n, ds in env.items() if all(d[0] == "O" and d[1] == "Pair" for d in ds)]
        nts = [n for n, ds in env.items() if all(d[0] == "O" and d[1] == "P" for d in ds)]
        vecs = [n for n, ds in env.items() if all(d[0] == "O" and d[1] == "Vec" for d in ds)]
        opts = [lambda: [f"{self.fresh('o')} = Acc({s})"], lambda: [f"{self.fresh('o')} = Vec({t})"],
                lambda: [f"{self.fresh('o')} = Pair({t}, {s})"],
                lambda: [f"{self.fresh('o')} = P({t}, {s})"]]
        if objs:
            o = self.pick(objs)
            opts += [lambda: [f"{self.fresh('t')} = {o}.apply({t})"], lambda: [f"{o}.count += 1"],
                     lambda: [f"{o}.scale = {s}"], lambda: [f"{self.fresh('s')} = {o}.double"],
                     lambda: [f"{self.fresh('s')} = {o}.count"], lambda: [f"{o}.extra = {t}"],
                     lambda: [f"{self.fresh('s')} = isinstance({o}, Acc)"],
                     # reads of the instance dict and hasattr after stores in the same call
                     lambda: [f"{o}.tag = {s}", f"{self.fresh('s')} = ({o}.__dict__['tag'], hasattr({o}, 'tag'), "
                              f"'tag' in {o}.__dict__, {o}.__dict__.get('scale', -1))"],
                     lambda: [f"{self.fresh('s')} = (hasattr({o}, 'extra'), {o}.__dict__.get('count'))"]]
        if pairs:
            o = self.pick(pairs)
            opts += [lambda: [f"{self.fresh('t')} = {o}.a + {o}.b"], lambda: [f"{o}.b = {s}"],
                     lambda: [f"{self.fresh('o')} = dataclasses.replace({o}, b=2)"]]
        if vecs:
            o, o2 = self.pick(vecs), self.pick(vecs)
            opts += [lambda: [f"{self.fresh('o')} = {o} + {o2}"], lambda: [f"{self.fresh('o')} = {s} + {o}"],
                     lambda: [f"{self.fresh('o')} = -{o} * {s}"], lambda: [f"{self.fresh('t')} = ({o} + {s}).t"],
                     lambda: [f"{self.fresh('s')} = ({o} == {o2}, {o} != None, {o} is {o2})"],
                     lambda: [f"{self.fresh('s')} = bool({o})"],
                     lambda: [f"{self.fresh('t')} = {o}.t if {o} else {t}"]]
        if nts:
            o = self.pick(nts)
            opts += [lambda: [f"{self.fresh('t')} = {o}.a * {o}[1]"],
                     lambda: [f"{self.fresh('t')}, {self.fresh('s')} = {o}"],
                     lambda: [f"{self.fresh('o')} = {o}._replace(b={s})"],
                     lambda: [f"{self.fresh('s')} = isinstance({o}, tuple)"]]
        if t is None:
            return None
        return self.pick(opts)()

    def s_closure(self, env):
        t = self.pick(self.ftensors(env)) or self.pick(self.tensors(env))
        u = self.pick(self.tensors(env))
        if t is None:
            return None
        s = self.scalar_expr(env)
        fname, v = self.fresh("h"), self.fresh("t")
        opts = [
            [f"def {fname}(z):\n    return z * {u} + {s}", f"{v} = {fname}({t})"],
            [f"{fname} = lambda z: torch.relu(z) * {s}", f"{v} = {fname}({t})"],
            [f"cnt = 0\ndef {fname}(z):\n    nonlocal cnt\n    cnt += 1\n    return z + cnt",
             f"{v} = {fname}({t}) + {fname}({t})"],
            [f"def {fname}(z, k=2):\n    def inner(q):\n        return q * k\n    return inner(z) - {u}",
             f"{v} = {fname}({t}, k=3)"],
            [f"{v} = (lambda a, b=1: a + b)({t})"],
            [f"def {fname}(z, memo=[]):\n    memo.append(1)\n    return z * len(memo)", f"{v} = {fname}({t})"],
            [f"try:\n    {v} = {t} * {{'a': 1}}['b']\nexcept KeyError:\n    {v} = {t} + 1"],
            [f"try:\n    {v} = [{t}][3]\nexcept IndexError as e:\n    {v} = {t} * len(str(e))"],
            [f"try:\n    {v} = {t} / 0\nfinally:\n    G_LIST.append(0)"],
        ]
        k, g, c = self.fresh("k"), self.fresh("g"), self.fresh("c")
        opts += [  # lazy generators, closures holding cells: state changed between making and using
            [f"{k} = [{s}]", f"{g} = (z * {k}[0] for z in [{t}, {u}])", f"{k}[0] = 2", f"{v} = sum({g})", f"del {g}"],
            [f"{k} = {s}", f"{fname} = lambda z: z * {k}", f"{k} = {k} + 1", f"{v} = {fname}({t})"],
            [f"{k} = []\ndef {fname}(a):\n    for i in range(3):\n        {k}.append(i)\n        yield a * (i + len({k}))",
             f"{v} = {t}", f"for {c} in {fname}({t}):\n    {v} = {v} + {c} * len({k})"],
            [f"def {fname}(a):\n    r = yield a\n    yield a * r", f"{g} = {fname}({t})", f"{v} = next({g})",
             f"{v} = {v} + {g}.send(3)", f"del {g}"],
            [f"{c} = {u}.clone()\ndef {fname}():\n    for i in range(2):\n        {c}.add_(1)\n        yield i",
             f"{v} = {t}", f"for i in {fname}():\n    {v} = {v} + {c}"],
            [f"{k} = [1]", f"{g} = map(lambda z: z + {k}[0], [{t}, {u}])", f"{k}[0] = {s}", f"{v} = list({g})[0]",
             f"del {g}"],
            [f"{k} = {{1, 2}}", f"{k}.add(3)", f"{k} |= {{{s} if isinstance({s}, int) else 4}}",
             f"{v} = {t} * len({k}) if 3 in {k} else {t}"],
            [f"{k} = collections.defaultdict(int)", f"for i in range(3):\n    {k}[i % 2] += 1",
             f"{v} = {t} * {k}[0]"],
        ]
        return self.pick(opts)

    def s_global(self, env):
        t = self.pick(self.tensors(env))
        s = self.scalar_expr(env)
        opts = ["G_COUNT += 1", f"G_LIST.append({s})", f"{self.fresh('s')} = G_FLAG and G_F > 1",
                f"{self.fresh('s')} = 1 in G_SET", f"{self.fresh('s')} = len(G_SET)", "G_T.add_(1)",
                f"{self.fresh('s')} = sorted(G_SET)", f"{self.fresh('t')} = G_T.sum() * Acc.K",
                f"{self.fresh('s')} = G_T.dtype",
                f"{self.fresh('s')} = sum(G_LIST)", f"{self.fresh('t')} = G_T * G_F"]
        if t is not None:
            opts += [f"{self.fresh('t')} = {t} * G_LIST[0] if G_LIST else {t}", f"{self.fresh('t')} = {t} + len(G_LIST)"]
        return [self.pick(opts)]

    def s_gbreak(self, env):
        t = self.pick(self.ftensors(env)) or self.pick(self.tensors(env))
        if t is None:
            return None
        s = self.scalar_expr(env)
        opts = [[f"print('v', {s}, {t}.shape, file=OUT)"],
                [f"{self.fresh('s')} = {t}.sum().item()"],
                [f"{self.fresh('s')} = {t}.max().item() > 0"],
                [f"{self.fresh('l')} = {t}.tolist()"],
                [f"{self.fresh('t')} = opaque({t})"],
                [f"{self.fresh('t')} = {t} * {t}.sum().item()"],
                [f"print(type({t}).__name__, {t}.dtype, file=OUT)"]]
        v, e = self.fresh("t"), self.fresh("e")
        opts += [  # breaks inside try blocks, the handler's path taken when the call raises
            [f"try:\n    {v} = opaque_raise({t}, 0.5)\n    {v} = {v} * 2\nexcept ValueError as {e}:\n"
             f"    {v} = {t} + len(str({e}))"],
            [f"{v} = {t}\ntry:\n    print('try', {s}, file=OUT)\n    {v} = opaque_raise({v}, 0.0)\nfinally:\n"
             f"    G_LIST.append(1)"],
            [f"try:\n    {v} = {t}.sum().item() + {s}\nexcept ZeroDivisionError:\n    {v} = 0.0"],
            # breaks inside except clauses: the try statement runs as Python
            [f"try:\n    {v} = opaque_raise({t}, 0.5)\nexcept ValueError as {e}:\n"
             f"    print('handler', len(str({e})), file=OUT)\n    {v} = {t} * 2"],
            [f"try:\n    if {s} > 1:\n        raise KeyError({s})\n    {v} = {t} + 1\nexcept KeyError:\n"
             f"    {v} = {t} * {t}.sum().item()"]]
        return self.pick(opts)

    def s_grad(self, env):
        """backward inside the function (a graph break), then the gradients read."""
        rg = self.tensors(env, lambda d: d[3] and d[2].is_floating_point)
        leaves = self.tensors(env, lambda d: d[3] and d[4])
        t = self.pick(rg)
        if t is None:
            return None
        v = self.fresh("t")
        opts = [[f"({t} * 2).sum().backward(retain_graph=True)"],
                [f"{v} = torch.autograd.grad({t}.sum(), [{t}], retain_graph=True)[0]"],
                [f"with torch.no_grad():\n    {v} = {t} * 2"], [f"{v} = {t}.detach().requires_grad_()"]]
        if leaves:
            lf = self.pick(leaves)
            opts += [[f"{v} = {lf}.grad.clone() if {lf}.grad is not None else {lf}.detach()"],
                     [f"{t}.sum().backward(retain_graph=True)", f"{v} = {lf}.grad * 1"],
                     [f"{lf}.grad = None"]]
        return self.pick(opts)

    def s_misc(self, env):
        ts = self.tensors(env)
        t, u = self.pick(ts), self.pick(ts)
        if t is None:
            return None
        s = self.scalar_expr(env)
        v, g = self.fresh("t"), self.fresh("g")
        lists = [n for n, ds in env.items() if all(d[0] == "L" and d[2] and d[1] > 0 for d in ds)]
        lst = self.pick(lists)
        opts = [
            [f"def {g}():\n    yield {t}\n    yield {u}", f"{v} = list({g}())[-1]"],
            [f"def {g}():\n    yield {t}\n    yield {u}", f"{v} = next({g}())"],
            [f"{v} = helper(*[{t}, {s}])"], [f"{v} = helper(**{{'t': {t}, 's': {s}}})"],
            [f"match {t}.shape:\n    case (n,):\n        {v} = {t} * n\n    case (1, m) | (m, 1):\n"
             f"        {v} = {t} + m\n    case (n, *rest) if n > 2:\n        {v} = {t} - len(rest)\n"
             f"    case _:\n        {v} = {t} * 2"],
            [f"match {{'k': {s}, 'v': {t}}}:\n    case {{'k': 0 | 1 as k, **rest}}:\n        {v} = {t} + k\n"
             f"    case {{'v': w, 'k': float(k)}} if k > 0:\n        {v} = w * k\n    case _:\n        {v} = {t} - 1"],
            [f"match P({t}, {s}):\n    case P(a, b) if isinstance(b, int):\n        {v} = a + b\n"
             f"    case P(a=a):\n        {v} = a * 3"],
            [f"{v} = {t}[...]"],
            [f"{v} = {t}.clone()", f"del {v}", f"{v} = {u}"],
            [f"if ({v} := {t}.sum()) is not None:\n    {self.fresh('s')} = 1"],
            [f"{self.fresh('l')} = [lambda i=i: i * 2 for i in range(3)]"],
            [f"{self.fresh('l')} = [(lambda: i)() for i in range(3)]"],
            ["G_COUNT = G_COUNT + len(G_LIST)"],
            [f"assert {t}.dim() < 5, 'fuzz assert'"],
            [f"{self.fresh('s')} = '{{}}-{{}}'.format({t}.shape, {s})"],
            [f"{v} = {t}.data * 2"], [f"{v} = {t}.mT if {t}.dim() >= 2 else {t}"],
            [f"{self.fresh('s')} = {t}.grad is None"],
            [f"{v} = {t}.to(torch.int32) * 2"], [f"{v} = ({t} > 0).sum()"], [f"{v} = {t}.bool() & ({u} != 0)"],
            [f"{self.fresh('l')} = list(map(lambda e: e + 1, [{t}, {u}]))"],
            [f"{self.fresh('l')} = list(zip([{t}, {u}], [1, 2]))"],
            [f"{self.fresh('d')} = collections.OrderedDict(a={t})"],
            [f"{self.fresh('d')} = collections.defaultdict(list)", ],
            [f"{v} = torch.no_grad()(helper)({t}, 2)"],
            [f"{v} = noisy({t}, {s})"], [f"{v} = itemy({t})"], [f"{v} = rec({t}, 2)"],
            [f"{self.fresh('o')} = Slotted({s})"],
            [f"{g} = lambda: {t}", f"{t} = {t} + 1", f"{v} = {g}()"],
            [f"{v} = torch.add({t}, {u}, out=torch.empty(0, dtype={t}.dtype))"],
            [f"torch.mul({t}, 2, out={t})"], [f"torch.add({t}, 1, out={u})"],
            [f"{v} = {t}.clone().index_add_(0, torch.tensor([0]), {t}[:1])"],
            [f"{v} = {t}.as_strided((1,), (1,))"], [f"{v} = {t}.new_zeros(3).scatter_(0, torch.tensor([1]), 1.0)"],
            [f"{v} = torch.zeros(int({t}.abs().sum().item()) % 3 + 1)"],
            [f"{v} = torch.tensor([1.5]) * {t}.sum()"],
            [f"{self.fresh('s')} = torch.get_default_dtype()"], [f"{self.fresh('s')} = torch.is_grad_enabled()"],
            [f"{v} = {t}.view({t}.dtype)"], [f"{v} = torch.ones(2).requires_grad_()", f"{v} = {v} * 2"],
            [f"{v} = sum([{t}, {t}], {t})"],
        ]
        sl = [n for n, ds in env.items() if all(d[0] == "O" and d[1] == "Slotted" for d in ds)]
        if sl:
            o = self.pick(sl)
            opts += [[f"{v} = {o}.bump({t})"], [f"{o}.v = {t}"], [f"{self.fresh('s')} = {o}.w"]]
        if lst:
            opts += [[f"{v} = min({lst}, key=lambda e: e.numel())"], [f"{v} = sorted({lst}, key=lambda e: e.dim())[0]"],
                     [f"{self.fresh('l')} = [e for e in {lst} if isinstance(e, torch.Tensor) and e.numel() > 1]"]]
        return self.pick(opts)

    def s_newer(self, env):
        """Bounded deques, `.data` stores, namedtuple classes made in the function, a class's
        __dict__, id() compared, weakrefs (to held objects and to temporaries)."""
        ts = self.tensors(env)
        t, u = self.pick(ts), self.pick(ts)
        if t is None:
            return None
        s = self.scalar_expr(env)
        v, q, n, o = self.fresh("t"), self.fresh("q"), self.fresh("N"), self.fresh("o")
        deques = [name for name, ds in env.items() if all(d[0] == "O" and d[1] == "deque" for d in ds)]
        opts = [
            [f"{q} = collections.deque([{t}, {s}], maxlen=2)", f"{q}.append({u})"],
            [f"{q} = collections.deque(maxlen=3)", f"{q}.extend([{t}, {u}, {t} * 2, {s}])", f"{q}.appendleft({u})"],
            [f"{v} = {t}.detach().clone()", f"{v}.data = {u}.detach() * 2"],
            [f"{t}.data = {t}.data * 2"],
            [f"{n} = collections.namedtuple('{n}', ['a', 'b'])", f"{self.fresh('o')} = {n}({t}, {s})._replace(b=3)"],
            [f"{self.fresh('s')} = ('K' in Acc.__dict__, Acc.__dict__.get('K', 0), "
             f"len([k for k in Acc.__dict__ if not k.startswith('_')]))"],
            [f"{self.fresh('s')} = (id({t}) == id({u}), id({t}) in {{id({u}): 1}})"],
            [f"{self.fresh('s')} = weakref.ref({t} * 2)() is None"],
            [f"{o} = Acc({s})", f"{self.fresh('s')} = weakref.ref({o})() is {o}"],
        ]
        fts = [n for n in self.tensors(env, lambda d: len(d[1]) >= 1 and d[1][0] > 0 and d[2].is_floating_point)]
        if fts:  # torch.vmap over the first dimension (traced: its level a context of the graph)
            f = self.pick(fts)
            opts += [[f"{v} = torch.vmap(lambda r: r * 2 + r.sum())({f})"],
                     [f"{v} = torch.vmap(lambda r, w: (r * w).sin(), in_dims=(0, None))({f}, {f}[0])"],
                     [f"{v} = torch.vmap(lambda r: (r.relu(), r.mean()))({f})[1]"]]
        if deques:
            dq = self.pick(deques)
            opts += [[f"{dq}.append({t})"], [f"{v} = {dq}[0] if {dq} else {t}"], [f"{self.fresh('s')} = len({dq})"],
                     [f"{dq}.rotate(1)"], [f"{self.fresh('s')} = {dq}.maxlen"]]
        return self.pick(opts)

    def s_fold(self, env):
        """Small tensors of constants whose values the trace knows (csrc/trace/em_fold.c): read
        as sizes, ints, branches and ranges; written in place with known and with run-time
        values (the latter must make the trace forget them)."""
        ts = self.tensors(env)
        t = self.pick(ts)
        if t is None:
            return None
        dim = f"{t}.shape[0]" if all(len(d[1]) for d in env[t]) else "3"
        k, v, s = self.fresh("k"), self.fresh("t"), self.fresh("s")
        opts = [
            [f"{k} = torch.div({dim}, 2, rounding_mode='trunc')", f"{v} = {t}.new_zeros(({k} + 1,)) + {k}"],
            [f"{k} = torch.tensor({dim}) // 2 + 1", f"{s} = int({k}) * 2 + {k}.item()"],
            [f"{k} = torch.tensor({dim})", f"{k}.sub_(1)", f"{v} = {t}.sum() * {k}",
             f"{s} = [i for i in range({k})]"],
            [f"{k} = torch.tensor([{dim}])", f"{k}.view(-1).add_(({t}.sum() > 0).long())", f"{s} = int({k})"],
            [f"{k} = torch.tensor([{dim}, 2])[0]", f"{k}.add_(({t}.sum() > 0).long())", f"{v} = {t}.new_ones({k})"],
            [f"{k} = torch.full((), {dim}) * 2", f"{v} = torch.arange({k}, dtype={t}.dtype)"],
            [f"{k} = torch.tensor(2.5) * {dim}", f"{s} = float({k}) if {k} > 1 else 0.0"],
            [f"{k} = torch.tensor({dim}, dtype=torch.float32).sqrt()", f"{v} = {t} * {k}",
             f"{s} = bool({k} > 1.5)"],
        ]
        return self.pick(opts)

    def s_item(self, env):
        """Numbers read with .item() (graph numbers under --capture-scalars, csrc/trace/em_sym_item.c):
        arithmetic on them, pointwise ops and fill values given them, torch.tensor of them,
        torch._check bounds deciding comparisons, branches on them (breaks)."""
        t = self.pick(self.ftensors(env))
        if t is None:
            return None
        v, s, n, b = self.fresh("t"), self.fresh("s"), self.fresh("s"), self.fresh("s")
        opts = [
            [f"{s} = {t}.sum().item()", f"{v} = {t} * {s} - {s} / 2 + ({s} > 0)"],
            [f"{s} = {t}.max().item() if {t}.numel() else 0.0", f"{v} = torch.clamp({t}, max={s})"],
            [f"{v} = {t}.masked_fill({t} > 0, {t}.mean().item()) if {t}.numel() else {t}"],
            [f"{s} = int({t}.abs().sum().item()) % 3", f"{v} = {t} + {s} * 2 - {s} // 2"],
            [f"{v} = torch.full_like({t}, {t}.sum().item())"],
            [f"{v} = torch.tensor([{t}.sum().item(), 1.0]) + {t}.sum()"],
            [f"{n} = ({t} > 0).sum().item()", f"torch._check({n} >= 0)",
             f"{v} = {t} * ({n} + 1) if {n} >= 0 else {t}"],
            [f"{b} = ({t}.sum() > 0).item()", f"{v} = {t} * ({b} + 1)"],
            [f"{s} = {t}.sum().item()", f"{v} = {t} + 1 if {s} > 0 else {t} - 1"],
            [f"{n} = ({t} > 0).sum().item()", f"{s} = abs(-{n}) ** 2 + float({n})", f"{v} = {t}.add({s})"],
            [f"{s} = {t}.flatten()[:2].tolist() if {t}.numel() >= 2 else [0.5, 1.5]", f"{v} = {t} * {s}[0] - {s}[1]"],
            # sizes from .item() (unbacked symbols): factories, arange, slices with checks, or a break
            [f"{n} = ({t} > 0).sum().item()", f"{v} = {t} + torch.arange({n}).float().sum() + len(torch.ones({n}, 2))"],
            [f"{n} = ({t} > 0).sum().item()", f"torch._check({n} >= 0)", f"torch._check({n} <= {t}.numel())",
             f"{v} = {t} * {t}.flatten()[:{n}].sum() - {t}.flatten()[{n}:].sum()"],
            [f"{n} = ({t} < 0).sum().item()", f"{v} = {t} * {t}.new_ones(max({n}, 3)).sum() + torch.zeros({n} + 1, 2).sum()"],
            [f"{n} = ({t} > 0).sum().item()", f"{v} = {t} + {t}.flatten()[:{n}].sum()"],
            [f"{n} = ({t} > 0).sum().item()", f"{s} = torch.arange(0, {n}, 2)",
             f"{v} = {t} + ({s}.shape[0] == ({n} + 1) // 2) + {s}.sum()"],
            [f"{n} = ({t}.flatten() > 0).sum().item()", f"{s} = {t}.flatten().split([{n}, {t}.numel() - {n}])",
             f"{v} = {t} + {s}[0].sum() - {s}[1].sum() * 2"],
            # result sizes from the data (nonzero, x[mask], masked_select): unbacked symbols
            [f"{s} = {t}[{t} > 0]", f"{v} = {t} + ({s} * 2).sum() + {s}.shape[0] + len({t}.nonzero())"],
            [f"{s} = {t}.masked_select({t} < 0.5)", f"{v} = {t} * {s}.abs().amax(0, keepdim=True).sum() if {s}.numel() else {t}"],
            [f"{s} = {t}.nonzero()", f"{v} = {t} + {s}.float().sum() - {t}.flatten()[:{s}.shape[0]].sum()"],
            [f"{s} = torch.where({t}.flatten() > 0)[0]", f"{v} = {t} + {t}.flatten()[{s}].sum() * 2 - {s}.float().mean()"],
        ]
        return self.pick(opts)

    def s_numpy(self, env):
        """NumPy on tensors (traced through torch._numpy): arrays, numpy functions, scalars,
        writes through an array into its tensor, arrays back to tensors. Only operations torch
        computes bit for bit as NumPy does (no transcendental functions, no float sums: their
        last bits may differ, as under TorchDynamo; max over an array holding both zeros takes
        them as np.abs'd values: torch.amax may give -0.0 where NumPy gives 0.0)."""
        t = self.pick(self.ftensors(env)) or self.pick(self.tensors(env))
        if t is None:
            return None
        a, v, s = self.fresh("a"), self.fresh("t"), self.fresh("s")
        src = f"{t}.detach().numpy()"
        opts = [
            [f"{a} = {src}", f"{v} = torch.from_numpy(np.abs({a} * 2) + 1) if {a}.dtype.kind == 'f' else {t}"],
            [f"{a} = {src}", f"{s} = np.max(np.abs({a})) if {a}.size else 0", f"{v} = {t} * 0 + torch.as_tensor({s})"],
            [f"{a} = {src}", f"{v} = torch.from_numpy(np.where({a} > 0, {a}, {a} * 0.5)) if {a}.ndim else {t}"],
            [f"{a} = {src}", f"{s} = ({a}.shape, {a}.ndim, {a}.dtype, len({a}) if {a}.ndim else 0)"],
            [f"{a} = {src}", f"{s} = np.abs({a}).max(axis=0) if {a}.ndim else np.abs({a}).max()", f"{v} = torch.as_tensor({s}) + 1"],
            [f"{a} = {t}.detach().clone().numpy()", f"{a} += 1", f"{v} = torch.from_numpy({a})"],
            [f"{a} = {src}", f"{s} = {a}[0] if {a}.ndim else {a}.item()"],
            [f"{a} = {src}", f"{v} = torch.tensor(np.concatenate([{a}.reshape(-1), {a}.reshape(-1)]))"],
            [f"{a} = np.arange(3)", f"{v} = {t} + torch.from_numpy({a}).sum()"],
            [f"{a} = {src}", f"print('np', {a}.shape, str({a}.dtype), file=OUT)", f"{v} = torch.as_tensor({a}.T.copy())"],
            [f"{a} = {src}", f"{s} = bool(({a} > 0).any())"],
        ]
        return self.pick(opts)

    def s_raise(self, env):
        c = self.cond(env)
        return [Block(f"if {c}:", [f"raise ValueError('fuzz raise ' + str({self.scalar_expr(env)}))"])], True

    def s_module(self, env):
        t = self.pick(self.tensors(env, lambda d: len(d[1]) >= 1 and d[1][-1] == self.F and d[2].is_floating_point))
        img = self.pick(self.tensors(env, lambda d: len(d[1]) == 4 and d[1][1] == 2 and d[2].is_floating_point))
        u = self.pick(self.ftensors(env))
        opts = [lambda: [f"{self.fresh('s')} = sum(p.numel() for p in self.parameters())"],
                lambda: ["self.steps += 1"],
                lambda: [f"{self.fresh('t')} = self.buf + self.steps"],
                lambda: [f"{self.fresh('l')} = [n for n, _ in self.named_buffers()]"],
                lambda: [f"{self.fresh('t')} = self.lin.weight.sum() * self.scale"],
                lambda: [f"{self.fresh('t')} = next(self.parameters()) * 2"],
                lambda: [f"{self.fresh('gp')} = self.parameters()", ],
                lambda: [f"{self.fresh('s')} = len(list(self.buffers()))"],
                lambda: [f"{self.fresh('t')} = self.lin.weight.t() @ self.lin.weight"]]
        if u is not None:  # a submodule replaced, then called in the same call
            opts.append(lambda: [f"self.act = torch.nn.Tanh() if len(G_LIST) % 2 else torch.nn.Identity()",
                                 f"{self.fresh('t')} = self.act({u})"])
        if t is not None:  # the module's storage changed, then read in the same call
            opts.append(lambda: [f"self.register_buffer('rb', {t}.detach() * 2)",
                                 f"{self.fresh('s')} = (hasattr(self, 'rb'), 'rb' in self._buffers)",
                                 f"{self.fresh('t')} = self.rb + 1"])
        gens = [n for n, ds in env.items() if all(d[0] == "O" and d[1] == "generator" for d in ds)]
        if gens:
            gp = self.pick(gens)
            opts += [lambda: [f"{self.fresh('t')} = next({gp}).sum()"], lambda: [f"{self.fresh('l')} = list({gp})"]]
        if t:
            opts += [lambda: [f"{self.fresh('t')} = self.lin({t})"], lambda: [f"self.buf.add_({t}.mean())"],
                     lambda: [f"{self.fresh('t')} = torch.nn.functional.linear({t}, self.lin.weight)"],
                     lambda: [f"{self.fresh('t')} = {t} + self.buf"]]
        if img:
            opts += [lambda: [f"{self.fresh('t')} = self.conv({img})"],
                     lambda: [f"{self.fresh('t')} = torch.nn.functional.max_pool2d(self.conv({img}), 2)"]]
        if u:
            opts += [lambda: ["acc_p = 0", "for p in self.parameters():", f"    acc_p = acc_p + p.sum()",
                              f"{self.fresh('t')} = {u} * acc_p"],
                     lambda: [f"{self.fresh('t')} = {u} * self.scale"]]
        return self.pick(opts)()

    def cond(self, env):
        sc = self.scalars(env, ("i", "f", "b"))
        ts = self.tensors(env)
        t = self.pick(ts)
        s = self.pick(sc) if sc else self.pick(["G_F", "len(G_LIST)"])
        opts = ["{s} > 1", "{s}", "not {s}", "{s} != {s}", "G_FLAG", "G_F > 1", "len(G_LIST) > 2",
                "isinstance({s}, float)", "type({s}) is int", "{s} == 0", "math.copysign(1.0, {s}) < 0",
                "1 in G_SET", "Acc.K == 1", "isinstance({s}, bool)", "str({s}).startswith('-')",
                "G_T.dtype == torch.float32"]
        if t:
            nd = min(len(d[1]) for d in env[t])
            opts += ["{t}.dim() == 2", "{t}.dtype == torch.float64", "{t}.sum() > 0", "{t}.requires_grad",
                     "torch.is_grad_enabled()", "{t}.is_contiguous()", "bool(({t} > 0).any())",
                     "isinstance({t}, torch.Tensor)", "{t}.is_floating_point()"]
            opts.append("isinstance({t}, torch.FloatTensor)")
            if nd >= 1:
                opts += ["{t}.shape[0] > 2", "{t}.size(0) == 1", "{t}.shape[-1] % 2 == 0"]
        for n, ds in env.items():
            if all(d[0] == "L" for d in ds):
                opts.append(f"len({n}) > 1")
            if all(d[0] == "D" for d in ds):
                opts.append(f"'k' in {n}")
        return self.pick(opts).format(s=s, t=t)

    def s_if(self, env):
        c = self.cond(env)
        return [Block(f"if {c}:", "FILL", "FILL" if self.chance(0.4) else None)]

    def s_loop(self, env):
        ints = [n for n, ds in env.items() if all(d[0] == "i" and 0 <= d[1] <= 4 for d in ds)]
        ts = self.tensors(env, lambda d: len(d[1]) >= 1 and d[1][0] <= 5)
        lists = [n for n, ds in env.items() if all(d[0] == "L" and d[1] <= 6 for d in ds)]
        opts = [f"for i in range({self.rng.randint(1, 3)}):"]
        if ints:
            opts.append(f"for i in range({self.pick(ints)}):")
        if ts:
            opts.append(f"for i in range({self.pick(ts)}.shape[0]):")
        if lists:
            opts.append(f"for i, e in enumerate({self.pick(lists)}):")
        if self.chance(0.25):
            j = self.fresh("j")
            blk = Block(f"while {j} < {self.rng.randint(1, 3)}:", "FILL")
            blk.prefix = [f"{j} += 1"]
            return [f"{j} = 0", blk]
        return [Block(self.pick(opts), "FILL")]

    def s_try(self, env):
        """a try block around generated code (loops and breaks in it), its handler's path taken
        when a call in it raises"""
        t = self.pick(self.ftensors(env)) or self.pick(self.tensors(env))
        if t is None:
            return None
        v, e = self.fresh("t"), self.fresh("e")
        blk = Block("try:", "FILL")
        form = self.rng.randrange(3)
        if form == 2:
            blk.handlers = [("finally:", ["G_LIST.append(2)"])]
            return [blk]
        blk.handlers = [(f"except ValueError as {e}:", [f"{v} = {t} + len(str({e}))"])] if form == 0 else \
            [("except (ValueError, KeyError):", [f"{v} = {t} * 2", "G_LIST.append(3)"])]
        if self.chance(0.6):
            blk.suffix = [f"{self.fresh('t')} = opaque_raise({t}, {self.pick(['0.0', '0.5', '2.0'])})"]
        if self.chance(0.3):
            blk.orelse = "FILL"
        return [blk]

    def s_with(self, env):
        return [Block(self.pick(["with torch.no_grad():", "with torch.enable_grad():",
                                 "with torch.set_grad_enabled(False):"]), "FILL")]

    def add_return(self, stmts):
        env = self.env(self.snaps)
        ts = self.tensors(env)
        others = [n for n, ds in env.items() if n not in ts and n != "self"]
        def age(n):
            digits = "".join(ch for ch in n if ch.isdigit())
            return -int(digits) if digits else 0
        ts = sorted(ts, key=age)[:4]
        pool = ts + sorted(others, key=age)[:2]
        if not pool:
            stmts.append("return None")
            return
        a, b = self.pick(pool), self.pick(pool)
        t = self.pick(ts) or a
        form = self.pick(["return {t}", "return {a}, {b}", "return [{a}, {b}]", "return {{'a': {a}, 'b': {t}}}",
                          "return P({a}, {b})", "return Pair({t}, {b})", "return ({t},)", "return {t}, {t}",
                          "return {t}"])
        # a while loop's counter (j) is fine to return
        stmts.append(form.format(a=a, b=b, t=t))


def _lit(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(v, str):
        return v  # dtypes are written as code
    return repr(v)


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for e in x:
            yield from _leaves(e)
    elif isinstance(x, dict):
        for e in x.values():
            yield from _leaves(e)
    else:
        yield x


_n_loaded = [0]


def load_module(src, filename, role=None):
    """A fresh module object made from src (registered in sys.modules while it lives, for
    dataclasses). role ("eager" or "compiled") is the module's __fuzz_role__ (for tests)."""
    _n_loaded[0] += 1
    name = f"_ember_fuzz_prog_{_n_loaded[0]}"
    mod = types.ModuleType(name)
    mod.__file__ = filename
    mod.__fuzz_role__ = role
    sys.modules[name] = mod
    try:
        exec(compile(src, filename, "exec"), mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def unload(mod):
    sys.modules.pop(mod.__name__, None)


def generate(seed, index, known_rate=None):
    """The source text of program (seed, index). known_rate: how often code that hits the
    already-known defects is kept (default KNOWN_RATE; 0 never, 1 as often as other code)."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        return Generator(seed, index, known_rate).generate()
    finally:
        torch.random.set_rng_state(state)
