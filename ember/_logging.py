"""EMBER_LOGS=graph,guards,recompiles,breaks,bytecode: which stage products are printed (to stderr)."""
import os
import sys

CHANNELS = ("graph", "guards", "recompiles", "breaks", "bytecode")


def parse(spec):
    names = [s.strip() for s in (spec or "").split(",") if s.strip()]
    for n in names:
        if n not in CHANNELS and n != "all":
            raise ValueError(f"EMBER_LOGS: unknown channel {n!r}; channels: {', '.join(CHANNELS)}")
    if "all" in names:
        return set(CHANNELS)
    return set(names)


enabled = parse(os.environ.get("EMBER_LOGS", ""))


def log(channel, text):
    if isinstance(text, tuple):  # (label, code object): its disassembly
        import dis
        label, code = text
        text = f"{label}: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno})\n" + dis.Bytecode(code).dis()
    text = str(text).rstrip("\n")
    sys.stderr.write(f"[ember:{channel}] " + text.replace("\n", f"\n[ember:{channel}] ") + "\n")


def warn(msg):
    """Warns at the user's line: the innermost frame that is not torch's or ember's (the
    frame ember gave up on is not on the stack yet while the hook runs)."""
    import warnings
    from . import EmberWarning
    from ._rules import skip_file
    f = sys._getframe(1)
    while f is not None and skip_file(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        warnings.warn(str(msg), EmberWarning, stacklevel=2)
        return
    warnings.warn_explicit(str(msg), EmberWarning, f.f_code.co_filename, f.f_lineno,
                           module=f.f_globals.get("__name__"), registry=f.f_globals.setdefault("__warningregistry__", {}))
