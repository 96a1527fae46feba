"""ember.explain(fn)(*args, **kwargs): compile and run fn once, then report what ember did."""
import re
from dataclasses import dataclass, field
from typing import Any, List

from . import _C


@dataclass
class BreakReason:
    filename: str
    lineno: int
    reason: str

    def __str__(self):
        return f"{self.filename}:{self.lineno}: {self.reason}"


@dataclass
class ExplainOutput:
    graphs: List[str] = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: List[BreakReason] = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: List[int] = field(default_factory=list)
    guards: List[str] = field(default_factory=list)
    backends: List[str] = field(default_factory=list)  # per graph: the backend that ran it
    backend_notes: List[str] = field(default_factory=list)  # per graph: why not that backend, or ""
    plain_python: List[BreakReason] = field(default_factory=list)  # frames ember gave up on
    # per graph: its symbolic sizes ("s0 = L['x'].size(0)") and the relations its guards check
    # ("s0 > 4"); empty for a graph of static sizes
    symbols: List[List[str]] = field(default_factory=list)
    relations: List[List[str]] = field(default_factory=list)
    out: Any = None

    def __str__(self):
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 f"Op count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += [f"  {i + 1}. {b}" for i, b in enumerate(self.break_reasons)]
        if self.plain_python:
            lines.append("Frames run as plain Python:")
            lines += [f"  {b}" for b in self.plain_python]
        for i, (g, k) in enumerate(zip(self.graphs, self.guards)):
            be = self.backends[i] if i < len(self.backends) else "eager"
            note = self.backend_notes[i] if i < len(self.backend_notes) else ""
            lines.append(f"Graph {i + 1} (backend: {be}{'; ran on ember eager: ' + note if note else ''}):")
            if i < len(self.symbols) and self.symbols[i]:
                lines.append("  symbolic sizes: " + "; ".join(self.symbols[i]) +
                             (" (relations: " + "; ".join(self.relations[i]) + ")" if self.relations[i] else ""))
            lines += ["  " + ln for ln in g.rstrip().splitlines()]
            lines.append("  guards:")
            lines += ["  " + ln for ln in k.rstrip().splitlines()]
        return "\n".join(lines)


_WHERE = re.compile(r"^(.*?):(\d+): (.*)$", re.S)


def _reason(text):
    m = _WHERE.match(text)
    if not m:
        return BreakReason("?", 0, text)
    return BreakReason(m.group(1), int(m.group(2)), m.group(3))


def explain(fn, **compile_kwargs):
    """Returns a callable: ember.explain(fn)(*args, **kwargs) drops ember's caches, compiles
    and runs fn once with these arguments, and returns an ExplainOutput (graphs, breaks with
    file, line and reason, op counts, guards, the backend of each graph; print it for a
    summary). fn may be compiled already; else compile_kwargs go to ember.compile
    (ember.explain(fn, backend="aot_eager")(x))."""
    import ember

    def run(*args, **kwargs):
        ember.reset()
        compiled = fn if isinstance(fn, (_C.CompiledFunction, ember.CompiledModule)) else \
            ember.compile(fn, **compile_kwargs)
        rep = ExplainOutput()
        rep.out = compiled(*args, **kwargs)
        for code in _C._seen_codes():
            for e in reversed(_C.entries(code)):  # oldest first
                rep.graphs.append(e["graph"])
                rep.guards.append(e["guards"])
                lines = [ln.strip() for ln in e["guards"].splitlines()]
                rep.symbols.append([ln[len("SYMBOL "):] for ln in lines if ln.startswith("SYMBOL ")])
                rep.relations.append([ln[len("SHAPE "):] for ln in lines if ln.startswith("SHAPE ")])
                rep.ops_per_graph.append(e["ops"])
                rep.backends.append(e.get("backend", "eager"))
                rep.backend_notes.append(e.get("backend_note", ""))
                if e["break"]:
                    rep.break_reasons.append(_reason(e["break"]))
            state = _C.code_state(code)
            if state and state["mode"] == "fallback" and state["reason"]:
                rep.plain_python.append(_reason(str(state["reason"])))
        rep.graph_count = len(rep.graphs)
        rep.graph_break_count = len(rep.break_reasons)
        rep.op_count = sum(rep.ops_per_graph)
        return rep

    return run
