"""The fuzzer's runner (crash/hang attribution) and minimizer, on synthetic failures."""
import textwrap

from ember.fuzz import minimize, runner

# The runner loads a program twice (__fuzz_role__ "eager" and "compiled"): this one returns a
# different value from its compiled copy, whatever the compiler does. The rest is noise to remove.
WRONG = textwrap.dedent('''\
    import torch
    ROLE = 1 if __fuzz_role__ == "compiled" else 0
    NOISE = [1, 2, 3]


    def unused(a):
        return a * 2


    def state():
        return {}


    def fn(x, n):
        y = x * 2
        z = torch.relu(y) + n
        w = z.sum(0)
        q = [y, z]
        if n > 1:
            w = w + 1
        return x + ROLE, w, q


    make_model = None
    CALLS = [dict(n=1), dict(n=2), dict(n=3)]


    def make_args(k):
        return (torch.ones(2, 3), CALLS[k]["n"])


    def before_call(k):
        pass
    ''')

OK = WRONG.replace("x + ROLE", "x + 0")


def test_runner_compares(tmp_path):
    p = tmp_path / "w.py"
    p.write_text(WRONG)
    r = runner.run_file(str(p))
    assert r["status"] == "wrong" and r["sig"] == "wrong:result:value", r
    p.write_text(OK)
    assert runner.run_file(str(p))["status"] == "ok"


def test_crash_and_hang_attributed(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(OK)
    crash = tmp_path / "crash.py"
    crash.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(600)\n")
    reqs = [{"path": str(p)} for p in (good, crash, good, hang, good)]
    res = runner.run_jobs(reqs, jobs=1, timeout=8, tmpdir=str(tmp_path))
    assert [r["status"] for r in res] == ["ok", "crash", "ok", "hang", "ok"]
    # the signal that killed it (ASan builds turn a SIGSEGV into SIGABRT)
    assert res[1]["sig"] in ("crash:SIGSEGV", "crash:SIGABRT")


def test_minimizer_shrinks_a_synthetic_failure(tmp_path):
    small, res = minimize.minimize(WRONG, tmpdir=str(tmp_path), timeout=30, budget_s=60)
    assert res["sig"] == "wrong:result:value"
    assert len(small) < len(WRONG) * 0.8
    assert "unused" not in small and "NOISE" not in small and "relu" not in small and "q = " not in small
    rep = minimize.repro_text(small, res, "eager")
    p = tmp_path / "repro.py"
    p.write_text(rep)
    assert runner.run_file(str(p))["sig"] == "wrong:result:value"


def test_compare_dict_views_by_type_and_items():
    import pytest
    import torch
    from ember.fuzz.runner import Diff, compare
    a = {"t": torch.ones(2), "k": 1}
    compare(a.items(), dict(a).items(), "r", True)
    compare(a.keys(), dict(a).keys(), "r", True)
    with pytest.raises(Diff):
        compare(a.values(), {"t": torch.zeros(2), "k": 1}.values(), "r", True)
    with pytest.raises(Diff):
        compare(a.keys(), list(a), "r", True)
