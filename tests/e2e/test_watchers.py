"""Tools that watch the interpreter: a compiled function run under sys.settrace (pdb and other
debuggers), sys.setprofile (profilers) or sys.monitoring (coverage on 3.12) runs as plain
Python, so the tool sees every line and call as without ember, and the results are eager's;
EMBER_LOGS=breaks says why. Once the tool is gone, the function compiles as usual."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import ember
import ember.testing
from tests.helpers import randn


def body(x, w):
    y = x @ w
    z = y.relu()
    return z * 2 + 1


def traced(fn, *args, kinds=("call", "line", "return")):
    """fn(*args) under sys.settrace: (result, [(event, line)] of body's frames)."""
    seen = []

    def tracer(frame, event, arg):
        if frame.f_code is body.__code__ and event in kinds:
            seen.append((event, frame.f_lineno))
        return tracer

    sys.settrace(tracer)
    try:
        return fn(*args), seen
    finally:
        sys.settrace(None)


def test_settrace_sees_every_line_and_eager_results():
    x, w = randn(2, 3), randn(3, 3, seed=1)
    expected, seen_e = traced(body, x, w)
    cf = ember.compile(body)
    got, seen_c = traced(cf, x, w)
    torch.testing.assert_close(got, expected)
    assert seen_c == seen_e and len(seen_e) >= 5
    assert ember.testing.counters()["frames"] == 0
    torch.testing.assert_close(cf(x, w), expected)  # no tool: compiled
    assert ember.testing.counters()["frames"] == 1


def test_settrace_set_inside_the_program_after_compiling():
    """A debugger attached after the function was compiled (cache entries exist) still sees it."""
    x, w = randn(2, 3), randn(3, 3, seed=1)
    cf = ember.compile(body)
    cf(x, w)
    got, seen = traced(cf, x, w, kinds=("line",))
    torch.testing.assert_close(got, body(x, w))
    assert len(seen) == 3


def test_setprofile_sees_the_calls():
    x, w = randn(2, 3), randn(3, 3, seed=1)
    calls = []

    def prof(frame, event, arg):
        if frame.f_code is body.__code__:
            calls.append(event)

    cf = ember.compile(body)
    sys.setprofile(prof)
    try:
        got = cf(x, w)
    finally:
        sys.setprofile(None)
    torch.testing.assert_close(got, body(x, w))
    assert calls[0] == "call" and calls[-1] == "return"


def test_logs_say_why(capsys):
    ember.set_logs("breaks")
    try:
        cf = ember.compile(body)
        sys.settrace(lambda *a: None)
        try:
            cf(randn(2, 3), randn(3, 3))
        finally:
            sys.settrace(None)
    finally:
        ember.set_logs("")
    assert "runs as plain Python: sys.settrace is active" in capsys.readouterr().err


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_sys_monitoring_tool_sees_every_line():
    mon = sys.monitoring
    tool = 3
    x, w = randn(2, 3), randn(3, 3, seed=1)
    cf = ember.compile(body)
    cf(x, w)  # compiled before the tool starts: the cache entry must not hide the lines
    lines = []

    def on_line(code, line):
        if code is body.__code__:
            lines.append(line)

    mon.use_tool_id(tool, "ember-test")
    try:
        mon.register_callback(tool, mon.events.LINE, on_line)
        mon.set_events(tool, mon.events.LINE)
        got = cf(x, w)
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.LINE, None)
        mon.free_tool_id(tool)
    torch.testing.assert_close(got, body(x, w))
    first = body.__code__.co_firstlineno
    assert lines == [first + 1, first + 2, first + 3]
    hits = ember.testing.counters()["hits"]
    torch.testing.assert_close(cf(x, w), body(x, w))  # the tool is gone: the cache again
    assert ember.testing.counters()["hits"] == hits + 1


def test_coverage_run_counts_the_compiled_lines(tmp_path):
    pytest.importorskip("coverage")
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch, ember

        def f(x):
            y = x * 2
            if y.sum() > 100:
                y = y - 1
            return y + 1

        cf = ember.compile(f)
        for _ in range(3):
            torch.testing.assert_close(cf(torch.ones(3)), f(torch.ones(3)))
        print("ok")
    """))
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    if sys.version_info >= (3, 12):
        env["COVERAGE_CORE"] = "sysmon"  # coverage through sys.monitoring
    data = tmp_path / ".coverage"
    r = subprocess.run([sys.executable, "-m", "coverage", "run", f"--data-file={data}", str(script)],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "coverage", "report", f"--data-file={data}", "-m", str(script)],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    row = [ln for ln in r.stdout.splitlines() if "prog.py" in ln][0]
    missing = row.split("%")[-1].strip()
    assert missing == "7", r.stdout  # only `y = y - 1` never ran
