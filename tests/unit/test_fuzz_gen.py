"""The fuzzer's program generator: deterministic per (seed, index); programs are valid Python
that run eagerly."""
import ast

import torch

from ember.fuzz import gen


def _run_eager(src, path):
    mod = gen.load_module(src, path)
    try:
        model = None
        if mod.make_model is not None:
            torch.manual_seed(0)
            model = mod.make_model()
        outs = []
        for k in range(len(mod.CALLS)):
            mod.before_call(k)
            try:
                outs.append((model or mod.fn)(*mod.make_args(k)))
            except ValueError as e:  # deliberate raises
                outs.append(e)
            except (OverflowError, ZeroDivisionError, IndexError, KeyError, RuntimeError, TypeError) as e:
                # the generator keeps a statement that raises these in some calls (Generator.try_add)
                outs.append(e)
        return outs
    finally:
        gen.unload(mod)


def test_deterministic_per_seed_and_index():
    a = [gen.generate(7, i) for i in range(4)]
    b = [gen.generate(7, i) for i in range(4)]
    assert a == b
    assert len(set(a)) == 4
    assert gen.generate(8, 0) != a[0]


def test_programs_are_valid_and_run_eagerly(tmp_path):
    kinds = set()
    for i in range(12):
        src = gen.generate(3, i)
        ast.parse(src)
        path = str(tmp_path / f"p{i}.py")
        outs = _run_eager(src, path)
        assert len(outs) >= 2
        kinds.add("module" if "class Net" in src else "fn")
    assert kinds == {"module", "fn"}


def test_generation_leaves_no_modules_behind():
    import sys
    before = {m for m in sys.modules if m.startswith("_ember_fuzz_prog_")}
    gen.generate(5, 1)
    after = {m for m in sys.modules if m.startswith("_ember_fuzz_prog_")}
    assert after == before
