"""EMBER_LOGS=graph,guards,recompiles: which stage products are printed (to stderr)."""
import os
import sys

CHANNELS = ("graph", "guards", "recompiles")


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
    text = str(text).rstrip("\n")
    sys.stderr.write(f"[ember:{channel}] " + text.replace("\n", f"\n[ember:{channel}] ") + "\n")


def warn(msg):
    import warnings
    from . import EmberWarning
    warnings.warn(str(msg), EmberWarning, stacklevel=3)
