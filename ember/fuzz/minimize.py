"""Minimizer: shrinks a failing program while the same kind of failure persists.

Reductions work on the program's syntax tree, largest first: delete a statement (in any body:
the function, helpers, the module), replace a compound statement by its body or its else,
delete an element of a list/tuple/dict literal or an argument of a call (the CALLS table
loses calls this way), replace an expression by one of its subexpressions, replace a number by
0 or 1. A candidate is kept when running it gives the same failure signature and raises no
eager exception the original program did not raise (so a deletion that leaves a name
undefined is not mistaken for progress). Candidates run in a worker subprocess (restarted
after a crash or hang), so crashes and hangs minimize too.
"""
import ast
import copy
import os
import time

from . import runner


def _bodies(tree):
    """(node, field) of every statement list in the tree."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            v = getattr(node, field, None)
            if isinstance(v, list) and v and isinstance(v[0], ast.stmt):
                yield node, field


def _paths(tree):
    """Stable addresses of nodes: list of (parent path, field, index) chains."""
    out = []

    def walk(node, path):
        out.append((path, node))
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        walk(v, path + ((field, i),))
            elif isinstance(value, ast.AST):
                walk(value, path + ((field, None),))

    walk(tree, ())
    return out


def _get(tree, path):
    node = tree
    for field, i in path:
        node = getattr(node, field) if i is None else getattr(node, field)[i]
    return node


# the harness's part of a program: whole definitions may go, their insides are not reduced
PROTECTED = {"make_args", "before_call", "state", "make_model", "__init__"}


def _protected(tree, path):
    """True inside a protected function or in a module-level statement other than a def/class
    (imports, global values; the CALLS table only loses elements)."""
    node = tree
    for depth, (field, i) in enumerate(path):
        node = getattr(node, field) if i is None else getattr(node, field)[i]
        if isinstance(node, ast.FunctionDef) and node.name in PROTECTED and depth < len(path) - 1:
            return True
        if depth == 0 and depth < len(path) - 1 and not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CALLS" for t in node.targets):
                return len(path) > 3  # CALLS = [...]: only its elements
            return True
    return False


def _candidates(src):
    """Smaller variants of src, biggest reductions first."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return
    nodes = [(p, n) for p, n in _paths(tree) if not _protected(tree, p)]
    # 1. statements: delete (whole function/class definitions first), hoist bodies
    stmt_paths = [p for p, n in nodes if isinstance(n, ast.stmt) and p]
    stmt_paths.sort(key=lambda p: (len(p), p))
    for p in stmt_paths:
        parent = _get(tree, p[:-1])
        field, i = p[-1]
        lst = getattr(parent, field)
        t2 = copy.deepcopy(tree)
        par2 = _get(t2, p[:-1])
        l2 = getattr(par2, field)
        node = l2[i]
        if len(lst) > 1:
            del l2[i]
        else:
            l2[i] = ast.Pass()
        yield t2
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With)):
            for sub in ("body", "orelse"):
                body = getattr(node, sub, None)
                if body:
                    t3 = copy.deepcopy(tree)
                    l3 = getattr(_get(t3, p[:-1]), field)
                    l3[i:i + 1] = copy.deepcopy(body)
                    yield t3
    # 2. elements of literals and call arguments
    for p, n in nodes:
        for field in ("elts", "args", "keywords"):
            v = getattr(n, field, None)
            if isinstance(v, list):
                for i in range(len(v)):
                    t2 = copy.deepcopy(tree)
                    del getattr(_get(t2, p), field)[i]
                    yield t2
        if isinstance(n, ast.Dict):
            for i in range(len(n.keys)):
                t2 = copy.deepcopy(tree)
                d = _get(t2, p)
                del d.keys[i]
                del d.values[i]
                yield t2
    # 3. expressions: a subexpression instead, numbers made 0 or 1
    for p, n in nodes:
        if not p or not isinstance(n, ast.expr) or isinstance(n, (ast.Name, ast.Constant)):
            if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool) \
                    and n.value not in (0, 1):
                for c in (0, 1):
                    t2 = copy.deepcopy(tree)
                    _get(t2, p).value = c
                    yield t2
            continue
        field, i = p[-1]
        if isinstance(_get(tree, p[:-1]), (ast.Assign, ast.AugAssign)) and field == "targets":
            continue
        if isinstance(n, ast.Call):  # an argument, or the object of a method call; not the callee
            subs = list(n.args) + [k.value for k in n.keywords]
            if isinstance(n.func, ast.Attribute):
                subs.append(n.func.value)
        else:
            subs = [c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr)]
        for c in subs:
            t2 = copy.deepcopy(tree)
            parent = _get(t2, p[:-1])
            repl = copy.deepcopy(c)
            if i is None:
                setattr(parent, field, repl)
            else:
                getattr(parent, field)[i] = repl
            yield t2


class _Checker:
    def __init__(self, backend, compiler, timeout, tmpdir, target, allowed_excs):
        self.backend, self.compiler, self.timeout, self.tmpdir = backend, compiler, timeout, tmpdir
        self.target, self.allowed = target, set(allowed_excs)
        self.path = os.path.join(tmpdir, f"min_{os.getpid()}_{time.monotonic_ns()}.py")
        self.checks = 0

    def run(self, src):
        self.checks += 1
        with open(self.path, "w") as f:
            f.write(src)
        req = {"path": self.path, "backend": self.backend, "compiler": self.compiler}
        return runner.run_jobs([req], jobs=1, timeout=self.timeout, tmpdir=self.tmpdir, batch=True, keep=True)[0]

    def same(self, src):
        res = self.run(src)
        return res["sig"] == self.target and set(res.get("eager_excs", [])) <= self.allowed, res


def minimize(src, backend="eager", compiler="ember", timeout=60.0, tmpdir="/tmp", budget_s=180.0, log=None):
    """The smallest variant of src found that fails the same way, and its result."""
    first = _Checker(backend, compiler, timeout, tmpdir, None, ()).run(src)
    if first["status"] == "ok":
        return src, first
    chk = _Checker(backend, compiler, timeout, tmpdir, first["sig"], first.get("eager_excs", []))
    best, best_res = src, first
    t0 = time.monotonic()
    progress = True
    start = 0  # candidates before the last accepted one were tried already: skip them once
    try:
        while progress and time.monotonic() - t0 < budget_s:
            progress = False
            for pos, tree in enumerate(_candidates(best)):
                if pos < start:
                    continue
                if time.monotonic() - t0 > budget_s:
                    break
                try:
                    cand = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
                except Exception:  # noqa: BLE001
                    continue
                if len(cand) >= len(best):
                    continue
                try:
                    compile(cand, "<min>", "exec")
                except SyntaxError:
                    continue
                ok, res = chk.same(cand)
                if ok:
                    best, best_res = cand, res
                    progress = True
                    start = pos
                    if log:
                        log(f"  minimize: {len(best)} chars ({chk.checks} checks)")
                    break  # restart from the smaller program
            else:
                if start:
                    start, progress = 0, True  # one more full pass
    finally:
        runner.shutdown_idle()
        try:
            os.unlink(chk.path)
        except OSError:
            pass
    return best, best_res


def repro_text(src, res, backend, compiler="ember"):
    """A standalone repro file: the program, what differs, and a main that checks it again."""
    detail = "\n".join("# " + line for line in res.get("detail", "").splitlines()[:30])
    return (f"# ember fuzz repro ({res['status']}: {res['sig']}), backend={backend!r}\n{detail}\n"
            "# run: PYTHONPATH=<ember checkout> python this_file.py\n\n"
            + src.rstrip("\n") + "\n\n\n"
            "if __name__ == '__main__':\n"
            "    from ember.fuzz.runner import run_file\n"
            f"    r = run_file(__file__, backend={backend!r}, compiler={compiler!r})\n"
            "    print(r['status'], r['sig'])\n"
            "    print(r['detail'])\n")
