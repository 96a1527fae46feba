"""Higher-order ops (torch.cond, torch.utils.checkpoint...) inside compiled functions and
TorchDynamo's frame hook installed while ember's is: a function made while tracing is never
handed to real code (it graph-breaks or falls back), and two PEP 523 hooks that chain to each
other never loop. Each case runs in a fresh process, since the defects were a crash and a hang.
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = """
import warnings
import torch
import ember
warnings.simplefilter("ignore")
x = torch.ones(2)
f = {f}
want = f(x)
got = ember.compile(f)(x)
assert torch.equal(got, want), (got, want)
# the next compiled function in the process must compile and return
g = lambda x: x * 2
assert torch.equal(ember.compile(g)(x), x * 2)
print("ok")
"""


def run_program(src):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True, text=True, timeout=240,
                       env=env)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), (p.returncode, p.stdout[-2000:], p.stderr[-4000:])


@pytest.mark.parametrize("f", [
    "lambda x: torch.cond(True, lambda: x + 1, lambda: x - 1)",
    "lambda x: torch.cond(x.shape[0] > 1, lambda: x + 1, lambda: x - 1)",
    "lambda x: torch.cond(x.sum() > 1, lambda: x + 1, lambda: x - 1)",
    "lambda x: torch.cond(x.sum() > 1, lambda y: y + 1, lambda y: y - 1, (x,))",
    "lambda x: torch.utils.checkpoint.checkpoint(lambda y: y.sin() + x, x, use_reentrant=False)",
])
def test_higher_order_op_with_functions_made_while_tracing(f):
    run_program(PROGRAM.format(f=f))


def test_dynamo_compiled_function_called_from_ember():
    run_program("""
    import torch, ember
    inner = torch.compile(lambda y: y.cos() + 1, backend="eager")
    def f(x):
        return inner(x * 2) - 1
    x = torch.randn(3)
    assert torch.allclose(ember.compile(f)(x), f(x))
    assert torch.allclose(ember.compile(lambda x: x * 3)(x), x * 3)
    assert torch.allclose(inner(x), x.cos() + 1)
    print("ok")
    """)
