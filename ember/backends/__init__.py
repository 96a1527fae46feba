"""Backend registry. `backend=` takes what torch.compile takes:

  "eager"      ember's C executor (the default): runs the graph op by op from C, no torch.fx
  "inductor"   torch's Inductor, through torch's own wrapper object (mode/options as torch.compile)
  any other name registered with TorchDynamo's backend registry ("aot_eager", "cudagraphs", ...)
  a callable   backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> callable

A Python backend gets each captured graph as a torch.fx.GraphModule (ember/backends/fx.py),
built at the graph's first call. Backends are registered with the C core once per distinct
(name, mode, options) or callable; compiled callables carry the backend's number in their
hook flags, and cache entries are kept per backend.
"""
import difflib
import inspect

from .. import _C


class Backend:
    """A resolved backend: `name` (for reports), `compiler` (the torch.compile-style callable,
    None for eager) and `index` (its number in the C registry)."""

    def __init__(self, name, compiler, index):
        self.name, self.compiler, self.index = name, compiler, index
        # CUDA graph trees (Inductor's reduce-overhead/max-autotune, the cudagraphs backend) tell
        # one call of the user's function from the next by TorchDynamo's generation counter
        self.cudagraphs = name == "cudagraphs" or bool(getattr(compiler, "config", {}).get("triton.cudagraphs"))

    def __repr__(self):
        return f"<ember backend {self.name!r} #{self.index}>"


EAGER = Backend("eager", None, 0)
_registry = {}  # key -> Backend (keys: ("name", name, mode, options repr) or ("fn", id(fn)))


def _torch_names(exclude_tags=()):
    """Names TorchDynamo's registry knows, less those with a tag in exclude_tags."""
    import torch._dynamo
    return set(torch._dynamo.list_backends(exclude_tags=exclude_tags))


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names to use: "eager" (ember's C executor) first, then TorchDynamo's
    registered backends, less those tagged with one of exclude_tags: by default, as
    torch._dynamo.list_backends(), its debug and test-only ones (aot_eager, ...) and
    experimental ones, which backend= accepts all the same; exclude_tags=() lists every name.
    A callable is accepted too."""
    return ["eager"] + sorted(_torch_names(tuple(exclude_tags or ())) - {"eager"})


def _did_you_mean(given, names):
    close = difflib.get_close_matches(given, sorted(names), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""


def _unknown(backend):
    every = set(list_backends(exclude_tags=()))
    hint = _did_you_mean(backend, every) if isinstance(backend, str) else ""
    return ValueError(f"ember: unknown backend {backend!r}; {hint}backends: {', '.join(list_backends())} "
                      "(ember.list_backends(exclude_tags=()) lists the debug ones too), or a callable "
                      "backend(gm, example_inputs)")


def modes():
    """The modes torch.compile takes (Inductor's: "default", "reduce-overhead", "max-autotune", ...)."""
    try:
        import torch._inductor
        return tuple(torch._inductor.list_mode_options())
    except Exception:  # a torch without Inductor's mode table
        return ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _check_mode_options(mode, options):
    if mode is not None and options is not None:
        raise ValueError("ember.compile: pass either mode or options, not both (as torch.compile)")
    if mode is not None and mode not in modes():
        hint = _did_you_mean(mode, modes()) if isinstance(mode, str) else ""
        raise ValueError(f"ember.compile: unknown mode {mode!r}; {hint}modes: {', '.join(modes())}")
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"ember.compile: options must be a dict, got {type(options).__name__}")


def _takes(fn, name):
    """True when fn declares a parameter `name` (a bare **kwargs does not count: it cannot tell
    whether the backend honours it)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    p = sig.parameters.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _register(key, name, compiler):
    b = _registry.get(key)
    if b is None:
        b = Backend(name, compiler, 0)
        b.index = _C._register_backend(b)
        _registry[key] = b
    return b


def resolve(backend="eager", mode=None, options=None, dynamic=None):
    """The Backend for ember.compile's arguments, or ValueError saying what is wrong (unknown
    name with the known ones, a mode or options the backend cannot honour, both given)."""
    _check_mode_options(mode, options)
    has_mode = mode not in (None, "default")
    if backend is None or (isinstance(backend, str) and backend == "eager"):
        if has_mode:
            raise ValueError(f"ember.compile: mode {mode!r} needs a backend that honours it (backend='inductor'); "
                             "backend 'eager' (ember's C executor) supports only mode='default'")
        if options:
            raise ValueError(f"ember.compile: backend 'eager' (ember's C executor) takes no options "
                             f"(got {sorted(options)}); options are for backend='inductor'")
        return EAGER
    if isinstance(backend, str):
        if backend not in _torch_names():
            raise _unknown(backend)
        name, target = backend, backend
    elif callable(backend):
        name, target = getattr(backend, "__name__", None) or type(backend).__name__, backend
    else:
        raise ValueError(f"ember: backend must be a name or a callable, got {type(backend).__name__}")
    opts_key = repr(sorted(options.items())) if options else ""
    key = ("name", name, mode if has_mode else None, opts_key) if isinstance(target, str) else \
        ("fn", id(target), mode if has_mode else None, opts_key)
    if key in _registry:
        return _registry[key]
    import torch
    if target == "inductor":
        try:
            compiler = torch._TorchCompileInductorWrapper(mode, options, dynamic)
        except RuntimeError as e:  # torch's message names the unknown option or its type
            raise ValueError(f"ember.compile: backend 'inductor': {e}") from None
    else:
        from torch._dynamo.backends.registry import lookup_backend
        fn = lookup_backend(target)
        for what, given in (("mode", has_mode), ("options", bool(options))):
            if given and not _takes(fn, what):
                raise ValueError(f"ember.compile: backend {name!r} does not take {what}= (given "
                                 f"{mode if what == 'mode' else options!r}); modes and options are honoured "
                                 "by backend='inductor' (ember passes them on as torch.compile does)")
        compiler = torch._TorchCompileWrapper(target, mode, options, dynamic)
    if key[0] == "fn":  # the registry keeps the callable (and so its id) alive
        compiler._ember_target = target
    return _register(key, name, compiler)


from .fx import BackendCompilerFailed, compile_graph  # noqa: E402

_C._set_backend_compiler(compile_graph)


def _new_iteration():
    """A top-level call of a function compiled for CUDA graphs: what TorchDynamo does on each
    entry of a compiled frame (outputs of the previous call may be overwritten from now on)."""
    from torch._dynamo.mutation_guard import GenerationTracker
    GenerationTracker.generation += 1


_C._set_new_iteration(_new_iteration)
