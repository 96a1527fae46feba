"""The public model suite of `python -m ember.bench`: builders (random weights, no downloads) and
helpers that read tensors out of model outputs.

    model, inputs = build("resnet18", small=True)

Full-size configurations and inputs follow the torch.compile anchors
(shared/anchors/torch_compile_baseline.py): torchvision models at batch 8, 3x224x224; Hugging Face
models from their configs at batch 4, sequence 128 (Llama: hidden 1024, 4 layers, 16 heads, 4 KV
heads, vocab 32000; T5 encoder: d_model 512, 6 layers); pointwise_chain on two 64 x 2^18 tensors and
mlp_block (Linear 1024->4096, GELU, Linear 4096->1024, LayerNorm) on 256 x 1024. `small=True` scales
every model down for a 2-core CPU: CNNs keep their architecture on one 64x64 image, ViT and the
transformers get 2 layers of width 64-128 at batch 2, sequence 32, the synthetic models 1/64 of the
elements.
"""
import torch
import torch.nn.functional as F

SUITE = ("resnet18", "resnet50", "mobilenet_v3_large", "vit_b_16", "bert", "gpt2", "llama", "t5_encoder",
         "pointwise_chain", "mlp_block")


def _ids(vocab, batch, seq):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))


def _randn(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class PointwiseChain(torch.nn.Module):
    """The anchors' memory-bound pointwise chain ending in a row reduction."""

    def forward(self, x, y):
        a = F.gelu(x) * torch.sigmoid(y)
        b = torch.tanh(a + x * 0.5) - y.exp().clamp(max=4.0)
        return (b * b).sum(dim=-1)


def mlp_block(d, hidden):
    return torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, d),
                               torch.nn.LayerNorm(d))


def build(name, small):
    """(model, example_inputs) for a suite model: random weights (torch.manual_seed(0)), training mode as
    constructed (callers pick eval()/train()), inputs on the CPU."""
    torch.manual_seed(0)
    if name in ("resnet18", "resnet50", "mobilenet_v3_large"):
        import torchvision.models as tvm
        return getattr(tvm, name)(), ((_randn(1, 3, 64, 64) if small else _randn(8, 3, 224, 224)),)
    if name == "vit_b_16":
        import torchvision.models as tvm
        if small:
            m = tvm.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64,
                                      mlp_dim=128, num_classes=10)
            return m, (_randn(2, 3, 32, 32),)
        return tvm.vit_b_16(), (_randn(8, 3, 224, 224),)
    if name == "pointwise_chain":
        n = 1 << (18 if small else 24)
        return PointwiseChain(), (_randn(64, n // 64), _randn(64, n // 64, seed=2))
    if name == "mlp_block":
        return (mlp_block(256, 1024), (_randn(64, 256),)) if small else (mlp_block(1024, 4096), (_randn(256, 1024),))
    batch, seq = (2, 32) if small else (4, 128)
    if name == "bert":
        from transformers import BertConfig, BertModel
        cfg = (BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                          vocab_size=1000, max_position_embeddings=128) if small else BertConfig())
        return BertModel(cfg), (_ids(cfg.vocab_size, batch, seq),)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = (GPT2Config(n_embd=128, n_layer=2, n_head=2, vocab_size=1000, n_positions=128, bos_token_id=999,
                          eos_token_id=999) if small else GPT2Config())
        cfg.use_cache = False
        return GPT2LMHeadModel(cfg), (_ids(cfg.vocab_size, batch, seq),)
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        if small:
            cfg = LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                              intermediate_size=256, vocab_size=1000, max_position_embeddings=128)
        else:
            cfg = LlamaConfig(hidden_size=1024, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
                              intermediate_size=2816, vocab_size=32000)
        cfg.use_cache = False
        return LlamaForCausalLM(cfg), (_ids(cfg.vocab_size, batch, seq),)
    if name == "t5_encoder":
        from transformers import T5Config, T5EncoderModel
        cfg = (T5Config(d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4, vocab_size=1000) if small
               else T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8))
        cfg.use_cache = False
        return T5EncoderModel(cfg), (_ids(cfg.vocab_size, batch, seq),)
    raise ValueError(f"unknown model {name!r}; suite: {', '.join(SUITE)}")


# ---------------------------------------------------------------------------------------------- outputs

def tensors(out):
    """Every tensor of a model output in order: a tensor, tuple/list, dict or HF ModelOutput (whose
    .values() are its non-None fields), nested."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):  # ModelOutput is an OrderedDict
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in tensors(o)]
    return []


def first_tensor(out):
    ts = tensors(out)
    if not ts:
        raise TypeError(f"model output {type(out).__name__} holds no tensor")
    return ts[0]


def max_err(ref, got):
    """Max abs difference over pairwise tensors (float); None when the structures disagree."""
    a, b = tensors(ref), tensors(got)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return None
    return max((float((x.detach().double() - y.detach().double()).abs().max()) if x.numel() else 0.0
                for x, y in zip(a, b)), default=0.0)


def grad_err(ref, got):
    """ref, got: {name: grad or None}. Max abs difference; None when a grad exists in one only."""
    err = 0.0
    for k, g in ref.items():
        h = got.get(k)
        if (g is None) != (h is None):
            return None
        if g is not None:
            err = max(err, float((g.double() - h.double()).abs().max()))
    return err
