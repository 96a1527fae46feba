"""A graph op that raises when the graph runs (an error its metadata did not show: `max()` of an
empty tensor, an index out of range). Side effects of the frame are replayed after its graph, so
a graph that raised would have dropped those that come before the failing op in the program;
where the graph changed nothing outside itself, the call runs again as plain Python (eager's
exception, after eager's side effects); a graph that wrote into a tensor keeps raising as it did
(README limitations)."""
import pytest
import torch

import ember
from tests.helpers import counters, randn

LOG = []


class Box:
    pass


def run_both(fn, make_args, backend="eager"):
    """Calls eager fn and compiled fn on fresh arguments, three times; returns what each
    raised and LOG after each call."""
    cf = ember.compile(fn, backend=backend)
    seen = []
    for f in (fn, cf):
        out = []
        for _ in range(3):
            LOG.clear()
            args = make_args()
            try:
                f(*args)
                err = None
            except Exception as e:  # noqa: BLE001 - the exception is the result compared
                err = (type(e), str(e))
            out.append((err, list(LOG), [a.__dict__.copy() for a in args if isinstance(a, Box)]))
        seen.append(out)
    return seen


def appends_then_raises(x):
    LOG.append(1)
    y = x * 2
    LOG.append(y.shape[0])
    return y[1:].max()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_side_effects_before_an_op_that_raises_when_the_graph_runs(backend):
    eager, compiled = run_both(appends_then_raises, lambda: (randn(1, 5),), backend)
    assert compiled == eager
    assert eager[0][0][0] is RuntimeError and eager[0][1] == [1, 1]
    c = counters()
    assert (c["frames"], c["reruns"]) == (1, 3), c


def appends_then_raises_with_numpy(x):
    LOG.append(1)
    a = x.numpy()
    m = a.max()  # torch._numpy's function of tensors: changes nothing outside its result
    LOG.append(m.ndim)
    return torch.nn.functional.gelu(torch.arange(x.numel()))  # no Long kernel: raises when run


def test_a_graph_with_numpy_calls_that_raises_runs_again_as_python():
    eager, compiled = run_both(appends_then_raises_with_numpy, lambda: (randn(4),))
    assert compiled == eager
    assert eager[0][0][0] is NotImplementedError and eager[0][1] == [1, 0]


def stores_then_indexes(x, i, box):
    box.seen = x.sum()
    box.n = 3
    LOG.append("before")
    return x[i]


def test_attribute_stores_before_an_index_out_of_range():
    eager, compiled = run_both(stores_then_indexes, lambda: (randn(4), torch.tensor([7]), Box()))
    assert [(e, log, [sorted(d) for d in boxes]) for e, log, boxes in compiled] == \
        [(e, log, [sorted(d) for d in boxes]) for e, log, boxes in eager]
    assert eager[0][0][0] is IndexError


def breaks_then_raises(x):
    y = x + 1
    print("", end="")  # a graph break: the resume function's graph raises
    LOG.append("after print")
    return y[1:].max()


def test_a_resume_functions_graph_that_raises_runs_it_again_as_python():
    eager, compiled = run_both(breaks_then_raises, lambda: (randn(1, 3),))
    assert compiled == eager
    c = counters()
    assert c["breaks"] == 1 and c["reruns"] == 3, c


def good_then_bad(x):
    LOG.append("called")
    return x[1:].max()


def test_a_graph_that_raises_only_for_some_inputs_stays_compiled_for_the_others():
    cf = ember.compile(good_then_bad, dynamic=False)
    LOG.clear()
    assert cf(randn(3, 2)).item() == randn(3, 2)[1:].max().item()
    with pytest.raises(RuntimeError):
        cf(randn(1, 2))
    assert LOG == ["called", "called"]
    c = counters()
    assert c["reruns"] == 1 and c["frames"] == 2, c


def writes_then_raises(x):
    LOG.append(1)
    x.add_(1)
    return x[1:].max()


def test_a_graph_that_wrote_into_a_tensor_is_not_run_again():
    """Running the frame again would add 1 twice: the graph's exception goes to the caller as
    it comes, without the side effects before it (the README's limitation)."""
    cf = ember.compile(writes_then_raises)
    x = torch.zeros(1, 3)
    LOG.clear()
    with pytest.raises(RuntimeError, match="numel"):
        cf(x)
    assert x.tolist() == [[1.0, 1.0, 1.0]]
    assert counters()["reruns"] == 0


def draws_then_raises(x):
    LOG.append(1)
    return (x + torch.rand(x.shape))[1:].max()


def test_a_graph_that_draws_random_numbers_is_not_run_again():
    cf = ember.compile(draws_then_raises)
    torch.manual_seed(0)
    with pytest.raises(RuntimeError):
        cf(torch.zeros(1, 3))
    after = torch.rand(1)
    torch.manual_seed(0)
    torch.rand(1, 3)
    assert torch.equal(after, torch.rand(1))  # the stream advanced once, as eager's
    assert counters()["reruns"] == 0


def no_grad_then_raises(x):
    LOG.append(torch.is_grad_enabled())
    with torch.no_grad():
        y = x * 2
        LOG.append(torch.is_grad_enabled())
        z = y[1:].max()
    return z


def test_a_graph_that_changes_grad_mode_runs_again_with_grad_mode_restored():
    eager, compiled = run_both(no_grad_then_raises, lambda: (randn(1, 3, requires_grad=True),))
    assert compiled == eager
    assert torch.is_grad_enabled()
    assert counters()["reruns"] == 3


def raises_then_writes(x, z):
    LOG.append(1)
    try:
        m = x[1:].max()  # raises before the graph writes into z
    except RuntimeError:
        m = x.sum()
        LOG.append("caught")
    z.add_(m)
    return z


def test_a_graph_that_raises_before_its_first_write_runs_again_as_python():
    # the failing op comes before any in-place op: nothing changed, so the frame runs again as
    # plain Python (eager's handler runs, and z is written once)
    eager, compiled = run_both(raises_then_writes, lambda: (randn(1, 3), torch.zeros(3)))
    assert compiled == eager and eager[0][1] == [1, "caught"]
    assert counters()["reruns"] == 3
    cf = ember.compile(raises_then_writes)
    z = torch.zeros(3)
    cf(torch.ones(1, 3), z)
    assert z.tolist() == [3.0, 3.0, 3.0]


def detaches_a_view(x):
    try:
        x.detach_()  # an input that is a view: raises when run, changing nothing
    finally:
        LOG.append("finally")
    return x


def test_an_in_place_metadata_op_that_raises_runs_the_frame_again_as_python():
    # fuzz 2704 #667: the finally's append was dropped (the graph raised, the replay never ran)
    eager, compiled = run_both(detaches_a_view, lambda: (randn(2, 3).t(),))
    assert compiled == eager and eager[0][1] == ["finally"]
    assert eager[0][0][0] is RuntimeError
    assert counters()["reruns"] == 3


def _bool_minus_tensor(x, y):
    y.copy_(x)
    try:
        return True - x
    finally:
        LOG.append(2)


def _sub_bool_tensor_in_place(x, y):
    y.copy_(x)
    try:
        return x.clone().sub_(x > 0)
    finally:
        LOG.append(3)


@pytest.mark.parametrize("fn", [_bool_minus_tensor, _sub_bool_tensor_in_place])
def test_subtraction_with_one_bool_operand_raises_in_the_trace(fn):
    # fuzz 2806 #517: the meta kernel lets `True - x` pass (it checks two bool tensors only), the
    # graph raised when it ran, after an in-place op, so the finally block's append was lost
    def make_args():
        return torch.randn(()), torch.zeros(1, 1, dtype=torch.long)
    eager, compiled = run_both(fn, make_args)
    assert compiled == eager and eager[0][0][0] is NotImplementedError
