"""ember.bench.inductor: the generated-code comparison, the target verdicts, the report, and one real
cold first call per system (same kernels from both frontends)."""
import json

import pytest
import torch

from ember.bench import inductor as bi

_CODE = '''
# AOT ID: ['{aot}_inference']
from torch._inductor.runtime import x
cpp_fused_gelu_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
#include "prefix.h"
extern "C" void kernel(float* in_out_ptr0) {{ in_out_ptr0[0] = 1; }}
\'\'\')
class Runner:
    def call(self, args):
        {unpack} = args
        args.clear()
        assert_size_stride_grouped(({names}), ((64, 256),), ((256, 1),), 'input')
        buf0 = empty_strided_cpu((64, 1024), (1024, 1), torch.float32)
        # Topologically Sorted Source Nodes: [{src}], Original ATen: [aten.addmm]
        extern_kernels.addmm({b}, {x}, reinterpret_tensor({w}, (256, 1024), (1, 256), 0), out=buf0)
        {dels}
        cpp_fused_gelu_0(buf0){tail}
        return (buf0, )
def get_args():
    {x} = rand_strided((64, 256), (256, 1), device='cpu', dtype=torch.float32)
    return [{names}]
def benchmark_compiled_module(args, times=10, repeat=10):
    pass
'''


def _code(order, aot=0, src="linear", tail=""):
    """Inductor-like output for addmm(b, x, w) whose inputs x, w, b are placeholders in `order`."""
    names = {role: f"arg{order.index(role)}_1" for role in "xwb"}
    unpack = ", ".join(f"arg{i}_1" for i in range(3))
    dels = "\n        ".join(f"del {names[r]}" for r in order)
    return _CODE.format(aot=aot, unpack=unpack, names=", ".join(names[r] for r in order), src=src, dels=dels,
                        tail=tail, **names)


def test_same_program_with_other_input_order_and_comments_is_the_same_code():
    a, b = _code("xwb", aot=0, src="linear"), _code("wbx", aot=1, src="input_1")
    assert a != b
    assert bi.normalize_code(a) == bi.normalize_code(b)
    assert bi._code_digest([a]) == bi._code_digest([b])


def test_a_different_program_is_different_code():
    a, b = _code("xwb"), _code("xwb", tail="\n        buf0.add_(1)")
    assert bi.normalize_code(a) != bi.normalize_code(b)
    # the kernel source counts too
    assert bi.normalize_code(a) != bi.normalize_code(a.replace("in_out_ptr0[0] = 1", "in_out_ptr0[0] = 2"))


def test_normalized_code_drops_the_harness_and_renames_by_use():
    n = bi.normalize_code(_code("bxw"))
    assert "rand_strided" not in n and "benchmark_compiled_module" not in n and "assert_size_stride" not in n
    assert "extern_kernels.addmm(in0, in1, reinterpret_tensor(in2," in n


def _cold(first, capture, backend, code="c"):
    return {"first_call_ms": first, "capture_ms": capture, "backend_ms": backend, "graphs": 1, "code": code}


def _row(ember_first, torch_first, ratio, hi=None, codes=("c", "c")):
    row = {"model": "m", "errors": [],
           "cold": {"ember": [_cold(ember_first, 10, ember_first - 10, codes[0])] * 2,
                    "torch": [_cold(torch_first, 500, torch_first - 500, codes[1])] * 2},
           "steady": {"rounds": 50, "step_ms": {"eager": 2.0, "ember": ratio, "torch": 1.0}, "ratio": ratio,
                      "ratio_lo": ratio - 0.01, "ratio_hi": hi or ratio + 0.01,
                      "warm": {"ember": {"first_call_ms": 20, "capture_ms": 9}, "torch": {"first_call_ms": 90,
                                                                                         "capture_ms": 70}}}}
    bi.summarize(row, 0.05)
    return row


def test_targets():
    ok = _row(ember_first=1000, torch_first=1600, ratio=1.02)
    assert ok["capture_saved_ms"] == 490 and ok["first_call_saved_ms"] == 600
    assert ok["first_call_target"] and ok["step_target"] and ok["same_code"]
    late = _row(ember_first=1200, torch_first=1600, ratio=1.06)  # saved 400 < 490; 6% slower
    assert not late["first_call_target"] and not late["step_target"]
    faster = _row(ember_first=1000, torch_first=1600, ratio=0.8)  # a faster step meets the target
    assert faster["step_target"] and faster["step_interval_within"]
    assert _row(1000, 1600, 1.0, codes=("c", "d"))["same_code"] is False


def test_markdown_reports_rows_verdicts_and_errors():
    rows = [_row(1000, 1600, 1.02), _row(1200, 1600, 1.06)]
    rows[1]["errors"].append("torch cold: timed out after 9 s")
    result = {"header": {"device": "cpu", "small": True, "command": "python -m ember.bench.inductor --small",
                         "repeats": 2, "tolerance": 0.05, "cpu": "cpu", "cpu_count": 2, "threads": 1},
              "rows": rows}
    md = bi.markdown(result)
    assert "| m | 1 / 1 | 10.0 / 500.0 |" in md
    assert "| 1.020 [1.010, 1.030] | yes |" in md and "| 1.060 [1.050, 1.070] | **no** |" in md
    assert "- m: torch cold: timed out after 9 s" in md
    assert "1 of 2 models; cold first call shorter by at least the capture time saved: 1 of 2" in md


def test_unknown_model_is_an_error(capsys):
    with pytest.raises(SystemExit):
        bi.parse_args(["--models", "resnet18,nope"])
    assert "unknown model(s) nope" in capsys.readouterr().err


def test_cold_first_call_of_each_frontend_compiles_the_same_kernels(tmp_path):
    """A real cold compile per system (each in its own empty Inductor cache): ember's graph of the
    MLP block makes Inductor write the same program as TorchDynamo's, and both give eager's output."""
    from torch._inductor.utils import fresh_cache
    got = {}
    for system in bi.SYSTEMS:
        with fresh_cache():
            got[system] = bi.child_cold("mlp_block", system, small=True, threads=1, code_dir=str(tmp_path),
                                        device="cpu")
        bi._reset(system)
    for system, r in got.items():
        assert r["graphs"] == 1 and r["breaks"] == 0 and r["kernels"] == 1, (system, r)
        assert r["max_err"] < 1e-4 and r["backend_ms"] > 0 and r["first_call_ms"] >= r["backend_ms"]
    assert got["ember"]["code"] == got["torch"]["code"]
    assert (tmp_path / "mlp_block_ember.py").read_text() == (tmp_path / "mlp_block_torch.py").read_text()


# ---------------------------------------------------------------------------------------------- device, parts, limits


def test_device_and_threads_arguments():
    a = bi.parse_args(["--models", "bert"])
    assert a.device == "cpu" and a.threads == 1 and a.out is None
    assert bi._common_args(a) == ["--device", "cpu", "--threads", "1"]
    a = bi.parse_args(["--device", "cuda", "--small"])
    assert a.device == "cuda" and a.threads is None  # torch's default in every process
    assert bi._common_args(a) == ["--device", "cuda", "--small"]
    a = bi.parse_args(["--device", "cuda", "--threads", "8", "--max-time", "300"])
    assert bi._common_args(a) == ["--device", "cuda", "--threads", "8"] and a.max_time == 300
    a.out = "o"
    assert bi._stem(a) == "o/inductor_cuda" and bi._stem(bi.parse_args(["--small", "--out", "o"])) == \
        "o/inductor_cpu_small"


def test_cuda_without_a_gpu_is_an_error():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is there")
    with pytest.raises(SystemExit, match="--device cuda: torch sees no CUDA device"):
        bi.main(["--device", "cuda", "--models", "mlp_block", "--out", ""])
    with pytest.raises(RuntimeError, match="no CUDA device"):
        bi._setup("cuda", None)


def test_build_puts_model_and_inputs_on_the_device():
    model, inputs = bi._build("mlp_block", small=True, device="cpu")
    assert not model.training and all(t.device.type == "cpu" for t in inputs)
    assert all(p.device.type == "cpu" for p in model.parameters())
    bi._sync("cpu")  # nothing to wait for


class FakeChildren:
    """_run_child without processes: canned results, the arguments recorded, the saved JSON read back
    at each call (what a run killed right then would leave)."""

    def __init__(self, out, stem, interrupt_at=None):
        self.out, self.stem, self.interrupt_at = out, stem, interrupt_at
        self.calls, self.saved = [], []

    def __call__(self, args, cache_dir, timeout):
        path = self.out / f"{self.stem}.json"
        self.saved.append(json.loads(path.read_text()) if path.exists() else None)
        self.calls.append(list(args))
        kind = args[0]
        if (kind, args[1] if len(args) > 1 else None) == self.interrupt_at:
            raise KeyboardInterrupt
        if kind == "prime":
            return {"isa": "avx512", **({"gpu": "NVIDIA H200"} if "cuda" in args else {})}
        if kind == "warm":
            return {}
        if kind == "cold":
            return {**_cold(1000 if args[2] == "ember" else 1500, 10 if args[2] == "ember" else 400, 900),
                    "breaks": 0, "max_err": 0.0, "kernels": 1, "import_ms": 1.0}
        return {"rounds": 50, "step_ms": {"eager": 2.0, "ember": 1.0, "torch": 1.0}, "ratio": 1.0,
                "ratio_lo": 0.99, "ratio_hi": 1.01, "max_err": {"ember": 0.0, "torch": 0.0},
                "steady_compiles": {"ember": 0, "torch": 0},
                "warm": {s: {"first_call_ms": 50, "capture_ms": 5} for s in bi.SYSTEMS}}


FAST = ["--repeats", "1", "--small"]


def test_rows_are_saved_after_every_process_on_the_chosen_device(tmp_path, monkeypatch):
    fake = FakeChildren(tmp_path, "inductor_cpu_small")
    monkeypatch.setattr(bi, "_run_child", fake)
    result = bi.main(["--models", "mlp_block,bert", "--out", str(tmp_path), *FAST])
    assert [c[0] for c in fake.calls] == ["prime", "warm", "cold", "cold", "steady", "cold", "cold", "steady"]
    for c in fake.calls[2:]:
        assert c[-5:] == ["--device", "cpu", "--threads", "1", "--small"], c
    assert fake.calls[0] == ["prime", "--device", "cpu"]
    # what a kill just before each process would have left
    assert fake.saved[2] is None
    s = fake.saved[4]  # before mlp_block's steady process: its two cold runs
    assert [r["model"] for r in s["rows"]] == ["mlp_block"] and s["rows"][0]["partial"] is True
    assert len(s["rows"][0]["cold"]["ember"]) == 1 and s["header"]["not_run"] == ["mlp_block (partial)", "bert"]
    s = fake.saved[5]  # before bert's first cold run
    assert s["rows"][0]["partial"] is False and s["rows"][0]["steady"]["ratio"] == 1.0
    assert s["header"]["not_run"] == ["bert"] and s["header"]["complete"] is False
    h = result["header"]
    assert h["device"] == "cpu" and h["gpu"] is None and h["threads"] == 1 and h["complete"] is True
    assert h["not_run"] == [] and [r["model"] for r in result["rows"]] == ["mlp_block", "bert"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inductor_cpu_small.json", "inductor_cpu_small.md"]
    md = (tmp_path / "inductor_cpu_small.md").read_text()
    assert "| mlp_block | 1 / 1 |" in md and "(partial)" not in md and "Not measured" not in md


def test_an_interrupted_run_keeps_its_rows(tmp_path, monkeypatch):
    fake = FakeChildren(tmp_path, "inductor_cpu_small", interrupt_at=("steady", "bert"))
    monkeypatch.setattr(bi, "_run_child", fake)
    with pytest.raises(SystemExit) as e:
        bi.main(["--models", "mlp_block,bert,gpt2", "--out", str(tmp_path), *FAST])
    assert e.value.code == 130
    saved = json.loads((tmp_path / "inductor_cpu_small.json").read_text())
    h = saved["header"]
    assert [(r["model"], r["partial"]) for r in saved["rows"]] == [("mlp_block", False), ("bert", True)]
    assert len(saved["rows"][1]["cold"]["torch"]) == 1 and "steady" not in saved["rows"][1]
    assert h["complete"] is False and h["interrupted"].startswith("interrupted (KeyboardInterrupt)")
    assert h["not_run"] == ["bert (partial)", "gpt2"]
    md = (tmp_path / "inductor_cpu_small.md").read_text()
    assert "| bert (partial) | 1 / 1 |" in md and "Not measured when this was written: bert (partial), gpt2." in md


def test_max_time_starts_no_process_after_it(tmp_path, monkeypatch):
    fake = FakeChildren(tmp_path, "inductor_cpu_small")
    monkeypatch.setattr(bi, "_run_child", fake)
    monkeypatch.setattr(bi, "_left", lambda a: 1.0 if len(fake.calls) < 4 else 0.0)  # time for 2 processes
    result = bi.main(["--models", "mlp_block,bert", "--out", str(tmp_path), "--max-time", "60", *FAST])
    assert [c[0] for c in fake.calls] == ["prime", "warm", "cold", "cold"]
    (row,) = result["rows"]
    assert row["partial"] is True and row["ember_first_call_ms"] == 1000 and "steady" not in row
    assert row["errors"] == ["steady state and warm first calls not measured: --max-time 60 s reached"]
    h = result["header"]
    assert h["complete"] is False and h["interrupted"] == "--max-time 60 s reached"
    assert h["not_run"] == ["mlp_block (partial)", "bert"] and h["max_time_s"] == 60


def test_from_merges_parts_in_suite_order(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bi, "_run_child", FakeChildren(tmp_path, "none"))
    bi.main(["--models", "mlp_block,gpt2", "--out", str(tmp_path / "p1"), *FAST])
    bi.main(["--models", "resnet18", "--out", str(tmp_path / "p2"), *FAST])
    p1, p2 = (str(tmp_path / p / "inductor_cpu_small.json") for p in ("p1", "p2"))
    capsys.readouterr()
    out = tmp_path / "merged"
    result = bi.main(["--from", f"{p1},{p2}", "--out", str(out)])
    assert [r["model"] for r in result["rows"]] == ["resnet18", "gpt2", "mlp_block"]
    h = result["header"]
    assert [p["file"] for p in h["parts"]] == [p1, p2] and h["complete"] is True
    assert h["command"].startswith("python -m ember.bench.inductor --models mlp_block,gpt2")
    md = (out / "inductor_cpu_small.md").read_text()
    assert "Commands: 2 runs merged by `python -m ember.bench.inductor --from" in md
    assert "--models resnet18 --out" in md and md.index("| resnet18 |") < md.index("| gpt2 |")
    assert "3 models" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="would overwrite the part"):
        bi.main(["--from", f"{p1},{p2}", "--out", str(tmp_path / "p2")])
    # one file re-renders it beside itself
    again = bi.main(["--from", p2])
    assert [r["model"] for r in again["rows"]] == ["resnet18"] and "parts" not in again["header"]
