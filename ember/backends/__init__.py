"""Backend registry. Capture works for every backend; this stage runs graphs with `eager`
(ember's C executor). The names torch.compile knows are listed so that a typo gets a clear
error; they become usable when the torch.fx bridge lands (see README limitations)."""

BACKENDS = ("eager",)


def list_backends():
    return list(BACKENDS)


def resolve(backend):
    """Returns the backend's name, or raises ValueError listing the known ones."""
    if backend is None:
        return "eager"
    if callable(backend) and not isinstance(backend, str):
        raise ValueError("ember: callable backends are not supported yet; use backend='eager'")
    if not isinstance(backend, str):
        raise ValueError(f"ember: backend must be a name, got {type(backend).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"ember: unknown backend {backend!r}; known backends: {', '.join(BACKENDS)}")
    return backend
