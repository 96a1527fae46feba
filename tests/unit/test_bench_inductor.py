"""ember.bench.inductor: the generated-code comparison, the target verdicts, the report, and one real
cold first call per system (same kernels from both frontends)."""
import pytest

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
            got[system] = bi.child_cold("mlp_block", system, small=True, threads=1, code_dir=str(tmp_path))
        bi._reset(system)
    for system, r in got.items():
        assert r["graphs"] == 1 and r["breaks"] == 0 and r["kernels"] == 1, (system, r)
        assert r["max_err"] < 1e-4 and r["backend_ms"] > 0 and r["first_call_ms"] >= r["backend_ms"]
    assert got["ember"]["code"] == got["torch"]["code"]
    assert (tmp_path / "mlp_block_ember.py").read_text() == (tmp_path / "mlp_block_torch.py").read_text()
