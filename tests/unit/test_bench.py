"""The benchmark harness itself (python -m ember.bench) on a tiny model: the JSON schema, the markdown
table, the chart file, the README section, rows for failing models and unsupported backends. No test
looks at a timing's value."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch

import ember
from ember.bench import harness, report
from ember.bench.__main__ import _backend_specs, main, parse_args
from ember.bench.models import SUITE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAST = ["--iters", "3", "--min-iters", "2", "--warmup", "1", "--budget", "0", "--overhead-calls", "50",
        "--overhead-repeats", "2"]
BACKENDS = "eager,ember:eager,torch:eager,ember:nonexistent"


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return {"out": torch.relu(self.lin(x)) * 2, "aux": x.sum()}


class Broken(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("this model always fails")


def broken_build(name, small):
    raise ImportError("no such package")


BUILDERS = {
    "tiny": lambda name, small: (Tiny(), (torch.randn(4, 8),)),
    "broken_build": broken_build,
    "broken_forward": lambda name, small: (Broken(), (torch.randn(4, 8),)),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    readme = out / "README.md"
    readme.write_text("# project\n\n## Results\n\nold text\n\n## Limitations\n\nnone\n")
    argv = ["--models", "broken_build,tiny,broken_forward", "--backends", BACKENDS, "--out", str(out),
            "--readme", str(readme), *FAST]
    result = main(argv, builders=BUILDERS)
    return result, out, readme


def rows_of(result, model):
    return {r["backend"]: r for r in result["rows"] if r["model"] == model}


def test_json_schema(run):
    result, out, _ = run
    with open(out / "bench_cpu.json") as f:
        saved = json.load(f)
    assert set(saved) == {"header", "rows", "overhead"}
    h = saved["header"]
    assert h["schema"] == "ember.bench/1" and h["complete"] is True
    assert h["command"].startswith("python -m ember.bench --models broken_build,tiny")
    for k in ("device", "python", "torch", "cpu_count", "threads", "ember_commit", "date", "backends", "small"):
        assert k in h, k
    assert h["backends"] == BACKENDS.split(",")
    assert len(saved["rows"]) == 3 * 4
    for r in saved["rows"]:
        assert tuple(r) == harness.ROW_FIELDS
        assert r["status"] in harness.STATUSES
    assert [r["backend"] for r in saved["overhead"]] == BACKENDS.split(",")
    for r in saved["overhead"]:
        assert tuple(r) == harness.OVERHEAD_FIELDS


def test_rows_of_a_model_that_works(run):
    rows = rows_of(run[0], "tiny")
    assert list(rows) == BACKENDS.split(",")
    for b in ("eager", "ember:eager", "torch:eager"):
        r = rows[b]
        assert r["status"] == "ok" and r["error"] is None, r
        for k in ("first_call_cold_ms", "step_ms", "eager_step_ms", "speedup"):
            assert isinstance(r[k], float) and r[k] > 0, (b, k, r[k])
        assert r["samples"] >= 2
        assert r["max_err"] == 0.0
    for b in ("ember:eager", "torch:eager"):
        r = rows[b]
        assert (r["graphs"], r["breaks"], r["steady_compiles"]) == (1, 0, 0), r
        assert r["capture_ms"] > 0 and r["capture_warm_ms"] > 0 and r["first_call_warm_ms"] > 0
    assert rows["ember:eager"]["plain_python"] == 0
    assert rows["eager"]["graphs"] is None and rows["eager"]["speedup"] == 1.0


def test_peak_memory_per_row(run):
    """Every row that ran has its own peak: on CPU the process's peak RSS, reset before the row."""
    rows = rows_of(run[0], "tiny")
    for b in ("eager", "ember:eager", "torch:eager"):
        r = rows[b]
        assert isinstance(r["peak_mem_mb"], (int, float)) and r["peak_mem_mb"] >= 1, (b, r)
        assert r["peak_mem_kind"] == harness.MEM_RSS and r["peak_mem_note"] is None, r
    assert rows["ember:nonexistent"]["peak_mem_mb"] is None  # nothing of it ran
    for r in rows_of(run[0], "broken_build").values():
        assert r["peak_mem_mb"] is None


def test_peak_memory_fallback_says_it_is_the_process_peak(monkeypatch, tmp_path):
    """Where /proc/self/clear_refs cannot be written, the peak is ru_maxrss and the row says so."""
    monkeypatch.setattr(harness, "CLEAR_REFS", str(tmp_path / "no" / "clear_refs"))
    m = harness.PeakMemory("cpu")
    m.start()
    got = m.stop()
    assert got["peak_mem_kind"] == harness.MEM_PROCESS_RSS and got["peak_mem_mb"] >= 1, got
    assert "not reset per row" in got["peak_mem_note"]
    row = harness.new_row("tiny", "eager", step_ms=1.0, **got)
    md = "\n".join(report.memory_lines([row]) + report.main_table([row]))
    assert "since it started (getrusage ru_maxrss" in md and "peak mem: process peak since start" in md


def test_peak_memory_not_measured_is_an_empty_cell_with_a_reason(monkeypatch, tmp_path):
    """The reset works, but the peak cannot be read at the end: no number, the reason instead."""
    monkeypatch.setattr(harness, "CLEAR_REFS", str(tmp_path / "clear_refs"))  # writable: a plain file
    (tmp_path / "status").write_text("VmHWM:\t   100 kB\n")
    monkeypatch.setattr(harness, "STATUS", str(tmp_path / "status"))
    m = harness.PeakMemory("cpu")
    m.start()
    monkeypatch.setattr(harness, "STATUS", str(tmp_path / "gone"))
    got = m.stop()
    assert got["peak_mem_mb"] is None and got["peak_mem_kind"] is None
    assert got["peak_mem_note"].startswith("peak memory not measured: FileNotFoundError"), got
    row = harness.new_row("tiny", "eager", **got)
    line = report.main_table([row])[-1]
    assert line.split(" | ")[-2] == "" and "peak mem: peak memory not measured" in line, line


def test_saved_run_without_peak_memory_renders_as_before():
    row = {k: v for k, v in harness.new_row("tiny", "eager", step_ms=1.0).items() if not k.startswith("peak_mem")}
    md = report.markdown({"header": {}, "rows": [row]})
    assert "peak mem" not in md and "| max err | note |" in md


def test_unsupported_backend_is_a_row(run):
    r = rows_of(run[0], "tiny")["ember:nonexistent"]
    assert r["status"] == "not supported"
    assert "ValueError" in r["error"] and "unknown backend 'nonexistent'" in r["error"]
    assert r["step_ms"] is None
    o = {x["backend"]: x for x in run[0]["overhead"]}
    assert o["ember:nonexistent"]["status"] == "not supported"
    assert o["ember:eager"]["status"] == "ok" and o["ember:eager"]["call_us"] > 0


def test_failing_models_are_rows_and_the_run_goes_on(run):
    result = run[0]
    for model, text in (("broken_build", "ImportError: no such package"),
                        ("broken_forward", "RuntimeError: this model always fails")):
        rows = rows_of(result, model)
        assert list(rows) == BACKENDS.split(",")
        for r in rows.values():
            assert r["status"] == "error" and text in r["error"], r
    assert [r["model"] for r in result["rows"]][-1] == "broken_forward"  # measured after the failures


def test_markdown_table(run):
    _, out, _ = run
    md = (out / "bench_cpu.md").read_text()
    assert "Command: `python -m ember.bench --models" in md
    assert "| model | backend | graphs | breaks | capture ms |" in md
    assert "| max err | peak mem MB | note |" in md
    assert "peak mem MB: the process's peak resident set (VmHWM) over that row's run" in md
    assert "| tiny | ember:eager | 1 | 0 |" in md and "| tiny | torch:eager | 1 | 0 |" in md
    assert "**not supported**: ValueError: ember: unknown backend 'nonexistent'" in md
    assert "| broken_forward | ember:eager | | | | | | | | | | | **error**: model: RuntimeError: this model" in md
    rows = rows_of(run[0], "tiny")
    for b in ("eager", "ember:eager", "torch:eager"):  # the peak is a cell of its own, just before the note
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| tiny | {b} |"))
        assert line.split(" | ")[-2] == format(rows[b]["peak_mem_mb"], ".0f"), line
    assert "Capture, ember vs TorchDynamo" in md and "Cache hit on `f(x, y) = x + y`" in md
    assert "![speedup and compile time per model and backend](bench_cpu.png)" in md


def test_chart_is_a_png(run):
    pytest.importorskip("matplotlib")
    _, out, _ = run
    with open(out / "bench_cpu.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_readme_section(run):
    result, out, readme = run
    begin, end = report.markers("bench_cpu")
    text = readme.read_text()
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.index("## Results") < text.index(begin) < text.index("old text") < text.index("## Limitations")
    section = text[text.index(begin):text.index(end)]
    assert "Machine: " in section and "Command: `python -m ember.bench" in section
    assert "`bench_cpu.json`" in section and "| tiny | ember:eager |" in section
    # regenerating from the saved JSON replaces the section instead of adding one
    report.main([str(out / "bench_cpu.json"), "--readme", str(readme)])
    assert readme.read_text() == text
    # another kind of run gets its own section, before the placeholder line when there is one
    other = tmp_copy = out / "README2.md"
    tmp_copy.write_text(f"## Results\n\nintro\n\n{report.PLACE}\n\n## Limitations\n")
    report.update_readme(other, report.readme_section(result, report.files_for(str(out / "bench_cpu.json"), other)))
    saved = dict(result, header=dict(result["header"], train=True))
    report.update_readme(other, report.readme_section(saved, {"json": "bench_cpu_train.json"}))
    t = other.read_text()
    b2 = report.markers("bench_cpu_train")[0]
    assert t.index("intro") < t.index(begin) < t.index(b2) < t.index(report.PLACE) < t.index("## Limitations")


def test_train_step_rows(tmp_path):
    result = main(["--models", "tiny", "--backends", "eager,ember:eager,torch:eager", "--train", "--out",
                   str(tmp_path), "--no-overhead", *FAST], builders=BUILDERS)
    assert result["header"]["train"] is True and (tmp_path / "bench_cpu_train.json").exists()
    for r in result["rows"]:
        assert r["status"] == "ok" and r["max_err"] == 0.0, r  # over the parameter gradients


def test_backend_names():
    assert _backend_specs("", "cpu") == ["eager", "ember:eager", "torch:eager"]
    assert _backend_specs("", "cuda") == ["eager", "ember:eager", "ember:inductor", "ember:inductor:reduce-overhead",
                                          "torch:eager", "torch:inductor", "torch:inductor:reduce-overhead"]
    assert _backend_specs("+ember:aot_eager", "cuda")[-2:] == ["torch:inductor:reduce-overhead", "ember:aot_eager"]
    assert [harness.parse_backend(s).spec for s in _backend_specs("", "cuda")] == _backend_specs("", "cuda")


def test_backend_modes_reach_the_compilers(monkeypatch):
    """ember:NAME:MODE calls ember.compile(model, backend=NAME, mode=MODE), torch:NAME:MODE torch.compile
    alike; without a MODE no mode is passed."""
    calls = []
    monkeypatch.setattr(ember, "compile", lambda fn, **kw: calls.append(("ember", kw)) or fn)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: calls.append(("torch", kw)) or fn)
    for spec in ("ember:inductor:reduce-overhead", "torch:inductor:reduce-overhead", "ember:inductor",
                 "torch:inductor"):
        harness.parse_backend(spec).compile(abs)
    assert calls == [("ember", {"backend": "inductor", "mode": "reduce-overhead"}),
                     ("torch", {"backend": "inductor", "mode": "reduce-overhead"}),
                     ("ember", {"backend": "inductor"}), ("torch", {"backend": "inductor"})]
    assert _backend_specs("+torch:inductor,ember:inductor", "cpu")[-2:] == ["torch:inductor", "ember:inductor"]
    assert _backend_specs("torch:eager, eager,torch:eager", "cpu") == ["torch:eager", "eager"]
    b = harness.parse_backend("torch:inductor:max-autotune")
    assert (b.system, b.name, b.mode) == ("torch", "inductor", "max-autotune")
    assert harness.parse_backend("eager").system is None
    for bad in ("inductor", "jax:eager", "ember:", "torch:a:b:c"):
        with pytest.raises(ValueError):
            harness.parse_backend(bad)


def test_isolated_model_that_dies_is_a_row(tmp_path):
    """--isolate: each model in its own process; one that does not come back (here: over --timeout)
    becomes error rows and the run still writes its files."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "ember.bench", "--models", "mlp_block", "--small", "--isolate",
                        "--timeout", "0.01", "--backends", "eager,torch:eager", "--no-overhead", "--out",
                        str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    with open(tmp_path / "bench_cpu_small.json") as f:
        rows = json.load(f)["rows"]
    assert [(r["model"], r["backend"], r["status"]) for r in rows] == [("mlp_block", "eager", "error"),
                                                                       ("mlp_block", "torch:eager", "error")]
    assert rows[0]["error"].startswith("timed out after")
    assert (tmp_path / "bench_cpu_small.png").exists() and (tmp_path / "bench_cpu_small.md").exists()


# ---------------------------------------------------------------------------------------------- parts, time limits

def _part(models, backends=("eager", "ember:eager"), device="cuda", overhead=False, **header):
    """A saved run as python -m ember.bench writes it, rows without timings."""
    h = {"schema": "ember.bench/1", "device": device, "small": False, "train": False, "gpu": "NVIDIA H200",
         "command": f"python -m ember.bench --device {device} --models {','.join(models)}", "date": "2026-12-01T10:00",
         "models": list(models), "backends": list(backends), "complete": True, "elapsed_s": 100.0, "not_run": [],
         "torch": "2.11.0", "python": "3.12.3", "threads": 16, "ember_commit": "abc1234"}
    h.update(header)
    rows = [harness.new_row(m, b, step_ms=1.0, eager_step_ms=1.0, speedup=1.0, first_call_cold_ms=10.0)
            for m in models for b in backends]
    out = {"header": h, "rows": rows}
    if overhead:
        out["overhead"] = [dict(dict.fromkeys(harness.OVERHEAD_FIELDS), backend=b, status="ok", call_us=1.0,
                                eager_call_us=1.0, overhead_us=0.0) for b in backends]
    return out


def _save(path, result):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return str(path)


def test_merge_puts_rows_in_suite_order_and_notes_the_parts():
    a = _part(["bert", "resnet18"], overhead=True)
    b = _part(["mlp_block", "resnet50"], backends=("eager", "ember:eager", "torch:eager"), gpu="NVIDIA H200 NVL",
              command="python -m ember.bench --device cuda --models mlp_block,resnet50 --no-overhead")
    m = report.merge([a, b], ["p1/bench_cuda.json", "p2/bench_cuda.json"], "python -m ember.bench --from x,y",
                     order=SUITE)
    assert [(r["model"], r["backend"]) for r in m["rows"]] == [
        ("resnet18", "eager"), ("resnet18", "ember:eager"), ("resnet50", "eager"), ("resnet50", "ember:eager"),
        ("resnet50", "torch:eager"), ("bert", "eager"), ("bert", "ember:eager"), ("mlp_block", "eager"),
        ("mlp_block", "ember:eager"), ("mlp_block", "torch:eager")]
    h = m["header"]
    assert h["command"] == a["header"]["command"] and h["gpu"] == "NVIDIA H200"  # the first part's header
    assert [p["command"] for p in h["parts"]] == [a["header"]["command"], b["header"]["command"]]
    assert [p["file"] for p in h["parts"]] == ["p1/bench_cuda.json", "p2/bench_cuda.json"]
    assert h["models"] == ["resnet18", "resnet50", "bert", "mlp_block"]
    assert h["backends"] == ["eager", "ember:eager", "torch:eager"]
    assert h["complete"] is True and h["not_run"] == [] and h["elapsed_s"] == 200.0
    assert any(n.startswith("gpu differs between parts: NVIDIA H200, NVIDIA H200 NVL") for n in h["merge_notes"])
    assert m["overhead"] == a["overhead"]
    md = report.markdown(m)
    assert "Commands: 2 runs merged by `python -m ember.bench --from x,y`" in md
    assert f"1. `{a['header']['command']}`" in md and f"2. `{b['header']['command']}`" in md
    assert md.index("| resnet18 | eager |") < md.index("| resnet50 | eager |") < md.index("| bert | eager |")


def test_merge_a_later_part_replaces_rows_and_fills_what_was_not_run():
    a = _part(["resnet18", "bert"], complete=False, interrupted="--max-time 480 s reached",
              not_run=["bert ember:eager", "gpt2"])
    a["rows"] = [r for r in a["rows"] if (r["model"], r["backend"]) != ("bert", "ember:eager")]
    a["rows"][1].update(status="error", error="first call (cold): boom")  # resnet18 ember:eager
    b = _part(["resnet18", "bert"], backends=("ember:eager",))
    m = report.merge([a, b], ["a.json", "b.json"], "merge", order=SUITE)
    by = {(r["model"], r["backend"]): r for r in m["rows"]}
    assert by[("resnet18", "ember:eager")]["status"] == "ok"  # part 2 re-ran it
    assert [(r["model"], r["backend"]) for r in m["rows"]] == [("resnet18", "eager"), ("resnet18", "ember:eager"),
                                                               ("bert", "eager"), ("bert", "ember:eager")]
    assert m["header"]["not_run"] == ["gpt2"] and m["header"]["complete"] is False
    assert "resnet18 ember:eager: the row of part 2 replaces part 1's" in m["header"]["merge_notes"]
    md = report.markdown(m)
    assert "cut short (--max-time 480 s reached)" in md and "Not measured when this was written: gpt2." in md


def test_merge_refuses_runs_of_another_kind():
    with pytest.raises(ValueError, match="device"):
        report.merge([_part(["bert"]), _part(["gpt2"], device="cpu")], ["a.json", "b.json"], "merge")
    with pytest.raises(ValueError, match="small"):
        report.merge([_part(["bert"]), _part(["gpt2"], small=True)], ["a.json", "b.json"], "merge")


def test_from_merges_saved_parts_into_out_and_readme(tmp_path, capsys):
    p1 = _save(tmp_path / "p1" / "bench_cuda.json", _part(["gpt2", "resnet18"], overhead=True))
    p2 = _save(tmp_path / "p2" / "bench_cuda.json", _part(["llama"]))
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Results\n")
    out = tmp_path / "merged"
    result = main(["--from", f"{p1},{p2}", "--out", str(out), "--readme", str(readme)])  # no GPU needed
    saved = json.loads((out / "bench_cuda.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert [r["model"] for r in saved["rows"]] == ["resnet18"] * 2 + ["gpt2"] * 2 + ["llama"] * 2
    assert saved["header"]["merge_command"] == f"python -m ember.bench --from {p1},{p2} --out {out} --readme {readme}"
    assert [p["file"] for p in saved["header"]["parts"]] == [p1, p2]
    md = (out / "bench_cuda.md").read_text()
    assert "Commands: 2 runs merged" in md and "| llama | ember:eager |" in md
    text = readme.read_text()
    assert report.markers("bench_cuda")[0] in text and "`merged/bench_cuda.json`" in text
    assert "| gpt2 | eager |" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # a merge never overwrites one of its parts
        main(["--from", f"{p1},{p2}", "--out", str(tmp_path / "p1")])
    with pytest.raises(SystemExit):  # only runs of one kind
        main(["--from", f"{p1},{_save(tmp_path / 'p3' / 'bench_cpu.json', _part(['bert'], device='cpu'))}",
              "--out", str(tmp_path / "m3")])
    # one file: re-rendered to --out
    one = main(["--from", p2, "--out", str(tmp_path / "one")])
    assert "parts" not in one["header"] and (tmp_path / "one" / "bench_cuda.md").exists()


def test_rows_are_saved_as_they_come_and_an_interrupted_run_keeps_them(tmp_path, monkeypatch):
    """A run stopped in the middle of a model (SIGTERM and Ctrl-C raise in the main thread) leaves the
    JSON and .md with every row measured so far, the rest listed as not run."""
    seen = []
    real = harness.ModelBench.backend_row

    def backend_row(self, b):
        seen.append(json.loads((tmp_path / "bench_cpu.json").read_text()))  # saved before this row began
        if self.name == "tiny2" and b.spec == "torch:eager":
            raise KeyboardInterrupt
        return real(self, b)

    monkeypatch.setattr(harness.ModelBench, "backend_row", backend_row)
    builders = dict(BUILDERS, tiny2=BUILDERS["tiny"])
    with pytest.raises(SystemExit) as e:
        main(["--models", "tiny,tiny2,broken_build", "--backends", "eager,ember:eager,torch:eager", "--out",
              str(tmp_path), "--no-overhead", *FAST], builders=builders)
    assert e.value.code == 130
    assert [[(r["model"], r["backend"]) for r in s["rows"]] for s in seen] == [
        [("tiny", "eager")], [("tiny", "eager"), ("tiny", "ember:eager")],
        [("tiny", "eager"), ("tiny", "ember:eager"), ("tiny", "torch:eager"), ("tiny2", "eager")],
        [("tiny", "eager"), ("tiny", "ember:eager"), ("tiny", "torch:eager"), ("tiny2", "eager"),
         ("tiny2", "ember:eager")]]
    assert seen[0]["header"]["complete"] is False and seen[0]["header"]["not_run"] == [
        "tiny ember:eager", "tiny torch:eager", "tiny2", "broken_build"]
    saved = json.loads((tmp_path / "bench_cpu.json").read_text())
    assert [(r["model"], r["backend"]) for r in saved["rows"]] == [
        ("tiny", "eager"), ("tiny", "ember:eager"), ("tiny", "torch:eager"), ("tiny2", "eager"),
        ("tiny2", "ember:eager")]
    h = saved["header"]
    assert h["complete"] is False and h["interrupted"].startswith("interrupted (KeyboardInterrupt) after")
    assert h["not_run"] == ["tiny2 torch:eager", "broken_build"]
    md = (tmp_path / "bench_cpu.md").read_text()
    assert "Cut short: interrupted (KeyboardInterrupt)" in md
    assert "Not measured when this was written: tiny2 torch:eager, broken_build." in md


def test_max_time_leaves_out_what_it_has_no_time_for(tmp_path):
    result = main(["--models", "tiny,broken_build", "--backends", "eager,ember:eager", "--out", str(tmp_path),
                   "--max-time", "1e-9", *FAST], builders=BUILDERS)
    h = result["header"]
    assert result["rows"] == [] and result["overhead"] == []
    assert h["complete"] is False and h["interrupted"].startswith("--max-time 1e-09 s reached")
    assert h["not_run"] == ["tiny", "broken_build"] and h["max_time_s"] == 1e-9
    assert json.loads((tmp_path / "bench_cpu.json").read_text())["header"]["not_run"] == ["tiny", "broken_build"]


def test_measure_model_saves_each_row_and_stops_between_backends():
    backends = [harness.parse_backend(b) for b in ("eager", "ember:eager", "torch:eager")]
    s = harness.Settings(warmup=0, iters=2, min_iters=1, budget_s=0)
    saved, checks = [], []
    rows = harness.measure_model("tiny", BUILDERS["tiny"], backends, s, on_row=lambda rs: saved.append(list(rs)),
                                 stop=lambda: checks.append(1) or len(checks) > 1)
    assert [r["backend"] for r in rows] == ["eager", "ember:eager"]  # stopped before torch:eager
    assert [[r["backend"] for r in x] for x in saved] == [["eager"], ["eager", "ember:eager"]]


def test_sigterm_raises_in_the_run():
    import signal
    from ember.bench.__main__ import Terminated, sigterm_stops_the_run
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_stops_the_run():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # the handler runs between bytecodes
                time.sleep(0.01)
    assert signal.getsignal(signal.SIGTERM) is before


def test_cuda_device_argument(capsys):
    _, a = parse_args(["--device", "cuda", "--models", "bert,gpt2"])
    assert a.device == "cuda" and a.threads is None and a.backend_specs == _backend_specs("", "cuda")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is there: the no-device error cannot be seen")
    with pytest.raises(SystemExit):
        main(["--device", "cuda", "--models", "mlp_block", "--out", ""])
    assert "--device cuda: torch sees no CUDA device" in capsys.readouterr().err


def test_commit_named_by_the_environment(monkeypatch):
    """A copy of the tree run elsewhere (the GPU machine) names the commit it was sent from."""
    from ember.bench.__main__ import _git_commit
    monkeypatch.setenv("EMBER_COMMIT", "abc1234")
    assert _git_commit() == "abc1234"
    monkeypatch.delenv("EMBER_COMMIT")
    assert _git_commit() != "abc1234"


def test_dynamic_bench_rows_and_markdown():
    pytest.importorskip("torchvision")
    from ember.bench import dynamic
    ref_row, ref = dynamic.run_sweep("resnet18", "eager", "cpu", None)
    row, _ = dynamic.run_sweep("resnet18", "ember:eager", "cpu", ref)
    assert row["shapes"] == 16 and row["equal"] is True and row["max_abs_err"] == 0.0
    assert 1 <= row["compiles"] <= 4 and row["plain_python"] == 0
    md = dynamic.markdown({"device": "cpu", "torch": "t", "python": "p", "commit": "c"}, [ref_row, row])
    assert "| resnet18 | ember:eager | 16 |" in md


def test_dynamic_bench_isolated_rows(tmp_path):
    """--isolate: every row in its own process, repeated in alternating order; medians and ranges."""
    pytest.importorskip("torchvision")
    from ember.bench import dynamic
    dynamic.main(["--models", "resnet18", "--backends", "ember:eager", "--isolate", "2", "--out", str(tmp_path)])
    import json
    res = json.loads((tmp_path / "dynamic_cpu.json").read_text())
    assert res["meta"]["isolate"] == 2
    rows = {r["backend"]: r for r in res["rows"]}
    assert set(rows) == {"eager", "ember:eager"}
    em = rows["ember:eager"]
    assert em["equal"] is True and em["plain_python"] == 0 and 1 <= em["compiles"] <= 4
    times = [r["sweep_total_s"] for r in em["runs"]]
    assert len(times) == 2 and min(times) <= em["sweep_total_s"] <= max(times)
    assert "| resnet18 | ember:eager | 16 |" in (tmp_path / "dynamic_cpu.md").read_text()
