"""EMBER_LOGS=graph,guards,recompiles,breaks,bytecode,dynamic: which stage products are printed (to stderr);
dynamic: each symbolic size the trace pinned to its value, where, and the expression."""
import os
import re
import sys

CHANNELS = ("graph", "guards", "recompiles", "breaks", "bytecode", "dynamic")


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


_warned = set()  # keys of the warnings given since the last ember.reset(): each is given once
_WHERE = re.compile(r"^(\S.*?):(\d+): ")
_RESUME = re.compile(r"\.__resume_at_\d+$")
_KINDS = {"abort": "ember cannot capture it", "limit": "cache_size_limit reached", "internal": "internal error"}


def _short(filename):
    """A file name as a user reads it: relative to the current directory, or to site-packages."""
    from ._rules import _KEEP
    for d in _KEEP:
        if filename.startswith(d):
            return filename[len(d):]
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def _user_frame(f):
    """The innermost frame of the user's own code: neither torch's, ember's or the standard
    library's, nor an installed package's; else the innermost frame that is not torch's, ember's
    or the standard library's (the frame ember gave up on is not on the stack yet while the
    hook runs, so this is where it was called from)."""
    from ._rules import library_file, skip_file
    first = None
    while f is not None:
        name = f.f_code.co_filename
        if not skip_file(name):
            if not library_file(name):
                return f
            if first is None:
                first = f
        f = f.f_back
    return first


def user_warning(text, key):
    """An EmberWarning at the user's own line, once per (key, that line) until ember.reset()."""
    import warnings
    from . import EmberWarning
    f = _user_frame(sys._getframe(1))
    # a resume function's instruction may have no line (f_lineno None): its code's first line
    line = (f.f_lineno or f.f_code.co_firstlineno or 0) if f is not None else 0
    site = (f.f_code.co_filename, line) if f is not None else None
    if (key, site) in _warned:
        return
    _warned.add((key, site))
    if f is None:
        warnings.warn(text, EmberWarning, stacklevel=2)
        return
    args = (text, EmberWarning, f.f_code.co_filename, line)
    kw = dict(module=f.f_globals.get("__name__"), registry=f.f_globals.setdefault("__warningregistry__", {}))
    try:
        warnings.warn_explicit(*args, **kw, module_globals=f.f_globals)
    except (ValueError, ImportError):  # module globals whose loader cannot give the source: on 3.12
        # __loader__ and __spec__ None (code exec'd from a file); a script read from stdin, whose
        # __loader__ is BuiltinImporter; the warning is then shown without its source line
        warnings.warn_explicit(*args, **kw)


def warn(kind, code, why):
    """Called from C when ember gives up on a frame (it runs as plain Python from now on). kind:
    "abort" (code ember cannot capture), "limit" (cache_size_limit or accumulated_recompile_limit
    reached) or "internal". The
    details go to EMBER_LOGS=breaks; the user gets one EmberWarning per kind, reason and call
    site, at that call site, naming the function."""
    why = str(why)
    # a resume function (ember's continuation of a function after a graph break) is part of it
    name = _RESUME.sub("", code.co_qualname)
    part = "part of " if name != code.co_qualname else ""
    m = _WHERE.match(why)  # the line ember stopped at, when it is in this function's file
    line = m.group(2) if m and m.group(1) == code.co_filename else code.co_firstlineno
    where = f"{_short(code.co_filename)}:{line}"
    if "breaks" in enabled:
        log("breaks", f"{name} ({code.co_filename}:{code.co_firstlineno}) runs as plain Python "
                      f"({_KINDS[kind]}): {why}")
    if kind == "limit":
        lm = re.search(r"(accumulated_recompile_limit|cache_size_limit) \((\d+)\)", why)
        limit = f"ember.config.{lm.group(1)} ({lm.group(2)})" if lm else "a recompile limit"
        text = (f"ember reached {limit} compiling {part}`{name}` ({where}) (its inputs keep changing); it and "
                "the functions it calls run as plain Python from now on: raise the limit, or set "
                "EMBER_LOGS=recompiles to see what changed.")
        key = (kind,)
    elif kind == "internal":
        text = (f"ember could not compile {part}`{name}` ({where}) because of an internal error; it runs as plain "
                "Python. Set EMBER_LOGS=breaks for details (and please report them).")
        key = (kind,)
    else:
        text = (f"ember could not compile {part}`{name}` ({where}); it runs as plain Python. "
                "Set EMBER_LOGS=breaks for details.")
        key = (kind, _WHERE.sub("", why, count=1))
    user_warning(text, key)
