"""Capture time on the public model suite: ember vs TorchDynamo (torch.compile(backend="eager")).

    python -m ember.bench.models [--small] [--models resnet18,bert,...] [--out results] [--train]

Per model, in one process, on the same module and inputs (random weights from a config, no downloads):
eager output; ember's first call of ember.compile(model) and TorchDynamo's first call of
torch.compile(model, backend="eager") (each freshly reset, timed with time.perf_counter), their ratio,
ember's graph and break counts from ember.explain, and the max abs error of ember's output against eager.
The first-call times include one execution of the model (its eager time is eager_ms in the JSON).
--train times one forward + backward of sum(first output tensor) in train mode instead and compares the
parameter gradients. --small scales every model down (a whole run takes well under 2 minutes on 2 cores).
A model that raises in ember or TorchDynamo becomes a row carrying the error; the run goes on.
Writes <out>/models_cpu[_small][_train].json and .md and prints the markdown table.

HF models run with use_cache=False (one forward pass, no KV-cache objects in the output).
"""
import argparse
import faulthandler
import json
import os
import platform
import re
import statistics
import sys
import time
import traceback
import warnings

import torch

import ember

SUITE = ("resnet18", "resnet50", "mobilenet_v3_large", "vit_b_16", "bert", "gpt2", "llama", "t5_encoder")


# ---------------------------------------------------------------------------------------------- models

def _ids(vocab, batch, seq):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1))


def _image(batch, size):
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))


def build(name, small):
    """(model, example_inputs) for a suite model: random weights (torch.manual_seed(0)), training mode as
    constructed (callers pick eval()/train()). small=True: reduced depth/width and inputs (CNNs keep their
    architecture on 64x64 images; transformers get 2 layers, hidden 128, batch 2, seq 32)."""
    torch.manual_seed(0)
    if name in ("resnet18", "resnet50", "mobilenet_v3_large"):
        import torchvision.models as tvm
        return getattr(tvm, name)(), (_image(1, 64 if small else 224),)
    if name == "vit_b_16":
        import torchvision.models as tvm
        if small:
            m = tvm.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64,
                                      mlp_dim=128, num_classes=10)
            return m, (_image(2, 32),)
        return tvm.vit_b_16(), (_image(1, 224),)
    batch, seq = (2, 32) if small else (1, 128)
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
               else T5Config(d_model=512, num_layers=6))
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
    """ref, got: {param name: grad or None}. Max abs difference; None when a grad exists in one only."""
    err = 0.0
    for k, g in ref.items():
        h = got.get(k)
        if (g is None) != (h is None):
            return None
        if g is not None:
            err = max(err, float((g.double() - h.double()).abs().max()))
    return err


# ---------------------------------------------------------------------------------------------- measuring

_LIB = re.compile(r"[^\s:()]*/(?:site-packages|lib/python3\.\d+)/")


def _path(text):
    """text with library paths cut to their package (transformers/...) and this checkout's to relative."""
    return _LIB.sub("", text).replace(os.getcwd() + os.sep, "")


def _short(e):
    msg = str(e).strip().splitlines()
    return _path(f"{type(e).__name__}: {msg[0] if msg else ''}")[:300]


class _Runner:
    """One step of a model (inference under no_grad, or train forward + backward). Every step starts from
    the same parameters/buffers and RNG state, so eager, ember and TorchDynamo see identical conditions."""

    def __init__(self, model, inputs, train):
        self.model, self.inputs, self.train = model, inputs, train
        self.state = {k: v.clone() for k, v in model.state_dict().items()}

    def __call__(self, fn):
        """Runs fn(*inputs) once; returns (seconds, output, {param: grad} or None)."""
        self.model.load_state_dict(self.state)
        torch.manual_seed(0)
        if not self.train:
            with torch.no_grad():
                t0 = time.perf_counter()
                out = fn(*self.inputs)
                return time.perf_counter() - t0, out, None
        self.model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        out = fn(*self.inputs)
        first_tensor(out).sum().backward()
        dt = time.perf_counter() - t0
        return dt, out, {k: None if p.grad is None else p.grad.detach().clone()
                         for k, p in self.model.named_parameters()}


def _err(ref, ref_grads, out, grads):
    return grad_err(ref_grads, grads) if grads is not None else max_err(ref, out)


def measure(name, small, train):
    """One row: {model, graphs, breaks, first_break, plain_python, ember_ms, dynamo_ms, ratio, max_err,
    dynamo_graphs, dynamo_breaks, dynamo_max_err, eager_ms, note}. max_err is ember vs eager (outputs, or
    parameter grads with train); graphs/breaks come from ember.explain. Fields a raising stage could not
    measure are None; the errors go to note (their tracebacks to stderr)."""
    row = {"model": name, "graphs": None, "breaks": None, "first_break": None, "plain_python": None,
           "ember_ms": None, "dynamo_ms": None, "ratio": None, "max_err": None, "dynamo_graphs": None,
           "dynamo_breaks": None, "dynamo_max_err": None, "eager_ms": None, "note": ""}
    notes = []
    ember.reset()
    torch._dynamo.reset()
    try:
        model, inputs = build(name, small)
        model.train(train)
        run = _Runner(model, inputs, train)
        _, ref, ref_grads = run(model)  # warm-up (first-call costs of the eager kernels)
        row["eager_ms"] = statistics.median(run(model)[0] for _ in range(3)) * 1e3
    except Exception as e:
        traceback.print_exc()
        row["note"] = f"eager: {_short(e)}"
        return row

    try:
        cm = ember.compile(model)
        dt, out, grads = run(cm)
        row["ember_ms"] = dt * 1e3
        row["max_err"] = _err(ref, ref_grads, out, grads)
        if row["max_err"] is None:
            notes.append("ember output/grads differ in structure from eager")
    except Exception as e:
        traceback.print_exc()
        notes.append(f"ember: {_short(e)}")
    try:
        model.load_state_dict(run.state)
        with torch.no_grad() if not train else torch.enable_grad():
            rep = ember.explain(model)(*inputs)
        row["graphs"], row["breaks"], row["plain_python"] = (rep.graph_count, rep.graph_break_count,
                                                             len(rep.plain_python))
        if rep.break_reasons:
            row["first_break"] = _path(str(rep.break_reasons[0]))
            notes.append(f"break: {row['first_break']}")
        if rep.plain_python:
            first = _path(str(rep.plain_python[0]))
            notes.append(f"{len(rep.plain_python)} frame(s) as plain Python, first: {first}")
    except Exception as e:
        traceback.print_exc()
        notes.append(f"ember.explain: {_short(e)}")
    ember.reset()

    try:
        from torch._dynamo.utils import counters
        torch._dynamo.reset()
        counters.clear()
        tm = torch.compile(model, backend="eager")
        dt, out, grads = run(tm)
        row["dynamo_ms"] = dt * 1e3
        row["dynamo_max_err"] = _err(ref, ref_grads, out, grads)
        row["dynamo_graphs"] = counters["stats"]["unique_graphs"]
        row["dynamo_breaks"] = sum(counters["graph_break"].values())
        if row["dynamo_graphs"] != 1 or row["dynamo_breaks"]:
            notes.append(f"TorchDynamo: {row['dynamo_graphs']} graph(s), {row['dynamo_breaks']} break(s)")
    except Exception as e:
        traceback.print_exc()
        notes.append(f"TorchDynamo: {_short(e)}")
    torch._dynamo.reset()

    if row["ember_ms"] and row["dynamo_ms"]:
        row["ratio"] = row["dynamo_ms"] / row["ember_ms"]
    row["note"] = "; ".join(notes).replace("|", "/").replace("\n", " ")
    return row


def _warm_up():
    """One-time costs (imports, first guard builds) are paid on a trivial function before the suite, so
    the first model does not carry them."""
    def f(x):
        return torch.relu(x) + 1
    x = torch.randn(4)
    ember.compile(f)(x)
    torch.compile(f, backend="eager")(x)
    ember.reset()
    torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------- report

def _fmt(v, spec, unit=""):
    return "-" if v is None else f"{v:{spec}}{unit}"


def markdown(header, rows):
    mode = "train step (forward + backward), grad error" if header["train"] else "inference (no_grad)"
    lines = [f"model suite, {'small' if header['small'] else 'full'} configs, {mode}; first call of a "
             f"freshly compiled model, one process, {header['threads']} thread(s), {header['platform']}, "
             f"torch {header['torch']}",
             "",
             "| model | graphs | breaks | ember capture (ms) | TorchDynamo (ms) | ratio | max err | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {_fmt(r['graphs'], 'd')} | {_fmt(r['breaks'], 'd')} | "
                     f"{_fmt(r['ember_ms'], '.1f')} | {_fmt(r['dynamo_ms'], '.1f')} | {_fmt(r['ratio'], '.1f', 'x')} | "
                     f"{_fmt(r['max_err'], '.2e')} | {r['note']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="scaled-down configs and inputs")
    ap.add_argument("--models", default=",".join(SUITE), help=f"comma-separated subset of {','.join(SUITE)}")
    ap.add_argument("--out", default="results", help="directory for models_cpu*.json/.md ('' writes nothing)")
    ap.add_argument("--train", action="store_true", help="time a forward + backward step in train mode")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; suite: {', '.join(SUITE)}")
    faulthandler.enable()  # a crash in the C core still shows where it happened
    warnings.simplefilter("ignore", ember.EmberWarning)  # the rows report frames run as plain Python
    torch.set_num_threads(a.threads)
    header = {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
              "threads": a.threads, "torch": torch.__version__, "python": sys.version.split()[0],
              "small": a.small, "train": a.train,
              "command": "python -m ember.bench.models " + " ".join(argv if argv is not None else sys.argv[1:])}
    try:
        import transformers
        header["transformers"] = transformers.__version__
    except ImportError:
        pass
    try:
        import torchvision
        header["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    _warm_up()
    rows = []
    for n in names:
        print(f"[models] {n} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        r = measure(n, a.small, a.train)
        rows.append(r)
        print(f"[models] {n}: ember {_fmt(r['ember_ms'], '.1f', ' ms')}, "
              f"TorchDynamo {_fmt(r['dynamo_ms'], '.1f', ' ms')}, graphs {r['graphs']}, breaks {r['breaks']} "
              f"({time.perf_counter() - t0:.1f} s)" + (f" -- {r['note']}" if r["note"] else ""),
              file=sys.stderr, flush=True)
    md = markdown(header, rows)
    print(md, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        stem = os.path.join(a.out, "models_cpu" + ("_small" if a.small else "") + ("_train" if a.train else ""))
        with open(stem + ".json", "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=2)
        with open(stem + ".md", "w") as f:
            f.write(md)
    return rows


if __name__ == "__main__":
    main()
