"""The public model suite in small configurations (ember.bench.models.build(name, small=True),
random weights): captured by ember with outputs and gradients equal to eager.

Every model must be one graph with no break, in inference and in a training step, and an
optimizer's in-place parameter updates must not cause a recompile. The same suite runs through
the torch.fx export: training under backend="aot_eager", inference under Inductor.
"""

import copy
import warnings

import pytest
import torch

import ember
import ember.testing
from ember.bench.models import build, tensors

TORCHVISION = ["resnet18", "resnet50", "mobilenet_v3_large", "vit_b_16"]
HF = ["bert", "gpt2", "llama", "t5_encoder"]
WHOLE = TORCHVISION + HF


def _needs(name):
    if name in HF:
        pytest.importorskip("transformers")


def assert_outputs_close(got, expected):
    g, e = tensors(got), tensors(expected)
    assert len(g) == len(e) and g, (len(g), len(e))
    for a, b in zip(g, e):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def train_step(model, inputs):
    out = model(*inputs)
    loss = tensors(out)[0].float().sum()
    loss.backward()
    return loss


@pytest.mark.parametrize("name", TORCHVISION + HF)
def test_inference_matches_eager(name):
    _needs(name)
    model, inputs = build(name, small=True)
    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ember.EmberWarning)
            got = ember.compile(model)(*inputs)
    assert_outputs_close(got, expected)
    if name in WHOLE:
        c = ember.testing.counters()
        assert (c["frames"], c["breaks"], c["aborts"], c["fallbacks"]) == (1, 0, 0, 0), c


def train_both(name, **compile_kwargs):
    """One training step of the small model, eager and compiled from the same weights and
    dropout masks: (model, eager twin, compiled loss, eager loss)."""
    _needs(name)
    model, inputs = build(name, small=True)
    model.train()
    twin = copy.deepcopy(model)
    torch.manual_seed(1)
    ref = train_step(twin, inputs)
    torch.manual_seed(1)  # same dropout masks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ember.EmberWarning)
        loss = train_step(ember.compile(model, **compile_kwargs), inputs)
    torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-4)
    return model, twin


def assert_one_graph():
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["fallbacks"]) == (1, 0, 0, 0), c


@pytest.mark.parametrize("name", TORCHVISION + HF)
def test_training_step_matches_eager(name):
    model, twin = train_both(name)
    for (n, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        assert (p.grad is None) == (q.grad is None), n
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=n)
    for (n, b), (_, c) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(b, c, msg=n)  # batch-norm running statistics
    if name in WHOLE:
        assert_one_graph()


def test_optimizer_steps_do_not_recompile():
    model, inputs = build("resnet18", small=True)
    model.train()
    twin = copy.deepcopy(model)
    cm = ember.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt2 = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        for o, m in ((opt, cm), (opt2, twin)):
            o.zero_grad()
            train_step(m, inputs)
            o.step()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    c = ember.testing.counters()
    assert c["frames"] == 1 and c["recompiles"] == 0 and c["hits"] == 2, c


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_kv_cache_decoding_step_matches_eager(name):
    """use_cache=True (the default): the DynamicCache made while tracing comes out as a real
    cache object, and a decoding step fed with it gives eager's logits, all without breaks."""
    pytest.importorskip("transformers")
    model, (ids,) = build(name, small=True)
    model.eval()
    nxt = torch.randint(0, 100, (ids.shape[0], 1), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        e1 = model(ids, use_cache=True)
        e2 = model(nxt, cache=e1.cache, use_cache=True)
        cm = ember.compile(model)
        c1 = cm(ids, use_cache=True)
        assert type(c1.cache) is type(e1.cache)
        c2 = cm(nxt, cache=c1.cache, use_cache=True)
    torch.testing.assert_close(c1.logits, e1.logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(c2.logits, e2.logits, rtol=1e-4, atol=1e-5)
    c = ember.testing.counters()
    assert (c["breaks"], c["aborts"], c["fallbacks"]) == (0, 0, 0), c


@pytest.mark.parametrize("name", TORCHVISION + HF)
def test_suite_under_aot_eager_matches_eager_in_training(name):
    """The FX export path (backend="aot_eager": AOTAutograd over ember's GraphModule) on the
    whole suite: loss and gradients equal to eager, one graph."""
    model, twin = train_both(name, backend="aot_eager")
    for (n, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        if p.grad is not None and q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4, msg=n)
        else:  # a parameter the loss does not reach: None in eager, zeros under AOTAutograd
            assert (p.grad is None or not p.grad.any()) and (q.grad is None or not q.grad.any()), n
    assert_one_graph()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vit_b_16"] + HF)
def test_suite_under_inductor_matches_eager_in_inference(name):
    """Inductor's kernels over ember's capture (its own tests compile resnet18; the other CNNs
    take tens of seconds each to compile on two cores, see README's backend table)."""
    _needs(name)
    model, inputs = build(name, small=True)
    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
        got = ember.compile(model, backend="inductor")(*inputs)
    g, e = tensors(got), tensors(expected)
    assert len(g) == len(e) and g
    for a, b in zip(g, e):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["fallbacks"]) == (1, 0, 0, 0), c


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_encoder_decoder_with_its_cache_is_one_graph(family):
    """transformers' encoder-decoder models make their cache in forward from a deep copy of the
    config (get_text_config: copy.deepcopy, delattr, setattr through its validators): one graph,
    eager's outputs."""
    transformers = pytest.importorskip("transformers")
    if family == "t5":
        cfg = transformers.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, vocab_size=100)
        model = transformers.T5Model(cfg)
    else:
        cfg = transformers.BartConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                                      decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                      vocab_size=100, max_position_embeddings=64)
        model = transformers.BartModel(cfg)
    model.eval()
    g = torch.Generator().manual_seed(0)
    ids, dec = torch.randint(0, 100, (2, 8), generator=g), torch.randint(0, 100, (2, 4), generator=g)
    with torch.no_grad():
        expected = model(input_ids=ids, decoder_input_ids=dec)
        cm = ember.compile(model)
        for _ in range(2):
            got = cm(input_ids=ids, decoder_input_ids=dec)
            torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=1e-4, atol=1e-5)
    c = ember.testing.counters()
    assert (c["frames"], c["breaks"], c["aborts"], c["fallbacks"], c["hits"]) == (1, 0, 0, 0, 1), c
