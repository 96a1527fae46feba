"""Routes TorchDynamo's test files to ember (tools/dynamo_tests/README.md): torch.compile,
torch._dynamo.optimize and optimize_assert become ember.compile (nopython / optimize_assert:
fullgraph=True; the inductor backend: eager), torch._dynamo.reset also resets ember."""
import torch
import torch._dynamo
import torch._dynamo.testing

import ember


def _ember(fn, backend="eager", fullgraph=False, dynamic=None):
    if backend is None or backend == "inductor":
        backend = "eager"
    return ember.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, disable=disable)
    if disable:
        return model
    return _ember(model, backend=backend, fullgraph=fullgraph, dynamic=dynamic)


def optimize(backend="inductor", *, nopython=False, dynamic=None, **kw):
    return lambda fn: _ember(fn, backend=backend, fullgraph=nopython, dynamic=dynamic)


def optimize_assert(backend, *, dynamic=None, **kw):
    return lambda fn: _ember(fn, backend=backend, fullgraph=True, dynamic=dynamic)


_reset = torch._dynamo.reset


def reset():
    ember.reset()
    _reset()


torch.compile = compile
torch._dynamo.optimize = optimize
torch._dynamo.optimize_assert = optimize_assert
torch._dynamo.testing.optimize_assert = optimize_assert
torch._dynamo.reset = reset
torch._dynamo.testing.reset = reset

# config keys of another torch version (enable_trace_contextlib_contextmanager, gone where
# tracing contextmanagers is always on) are dropped rather than failing the test at import
_patch = type(torch._dynamo.config).patch


def _patch_known(self, arg1=None, arg2=None, **kwargs):
    if isinstance(arg1, dict):
        kwargs, arg1 = {**arg1, **kwargs}, None
    known = {k: v for k, v in kwargs.items() if k in self._config}
    if isinstance(arg1, str) and arg1 not in self._config:
        arg1 = arg2 = None
    return _patch(self, arg1, arg2, **known) if arg1 is not None else _patch(self, **known)


type(torch._dynamo.config).patch = _patch_known
