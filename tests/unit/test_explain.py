"""ember.explain: graphs, breaks with file/line/reason, op counts and guards of one run."""
import inspect
import threading

import torch

import ember


def two_breaks(x, y):
    a = x * 2
    print("between")  # break 1
    if a.sum() > 0:  # break 2
        b = a + y
    else:
        b = a - y
    return b * 3


def _line(fn, text):
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def test_explain_counts_graphs_and_breaks(capsys):
    x, y = torch.ones(3), torch.randn(3)
    rep = ember.explain(two_breaks)(x, y)
    torch.testing.assert_close(rep.out, two_breaks(x, y))
    assert rep.graph_count == 3
    assert rep.graph_break_count == 2
    assert rep.op_count == sum(rep.ops_per_graph) == 5
    assert len(rep.guards) == 3 and all("GLOBAL_STATE" in g for g in rep.guards)
    first, second = rep.break_reasons
    assert first.filename == __file__ and first.lineno == _line(two_breaks, "break 1")
    assert "print" in first.reason
    assert second.lineno == _line(two_breaks, "break 2") and "tensor" in second.reason


def test_explain_str_is_a_readable_summary():
    rep = ember.explain(two_breaks)(torch.ones(3), torch.randn(3))
    text = str(rep)
    assert "Graph count: 3" in text and "Graph break count: 2" in text
    assert f"{__file__}:{_line(two_breaks, 'break 1')}" in text
    assert "TENSOR_MATCH" in text


_LOCK = threading.Lock()


def loop_item(x):
    t = 0.0
    with _LOCK:  # a break inside a with block of a C context manager: no graph break there
        for i in range(2):
            t += x[i].item()
    return t


def test_explain_reports_frames_run_as_plain_python():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = ember.explain(loop_item)(torch.arange(3.0))
    assert rep.out == 1.0
    assert rep.graph_count == 0
    assert len(rep.plain_python) == 1 and "cannot run on its own" in rep.plain_python[0].reason


def test_explain_on_a_module():
    m = torch.nn.Linear(3, 2)
    rep = ember.explain(ember.compile(m))(torch.randn(4, 3))
    assert rep.graph_count == 1 and rep.graph_break_count == 0 and rep.op_count >= 1


def test_bytecode_logs_show_original_and_transformed_code(capsys):
    def whole(x):
        return x * 2

    def broken(x):
        y = x + 1
        print("side")
        return y * 2

    ember.set_logs("bytecode")
    try:
        ember.compile(whole)(torch.ones(2))
        ember.compile(broken)(torch.ones(2))
    finally:
        ember.set_logs("")
    err = capsys.readouterr().err
    assert "[ember:bytecode] original: test_bytecode_logs_show_original_and_transformed_code.<locals>.whole" in err
    assert "captured whole: no transformed bytecode" in err
    assert "[ember:bytecode] transformed" in err and "__ember_vals" in err
    assert "BINARY_OP" in err
