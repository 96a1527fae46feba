"""Function lengths of C sources: lines from a function's opening brace to its closing brace.

Usage: python tools/fnlen.py [--report N] [--budget M] [--no-fail] PATH...
PATH is a .c/.h file or a directory (searched for .c files). Lists every function longer than
N lines (default 60), longest first, as `file:line: name: L lines`; exits 1 when one is longer
than M lines (default 80), unless --no-fail. A brace matcher, not a parser: comments, string
and character literals and preprocessor lines (with their continuations) are blanked first;
a function is a top-level `{` whose header ends with `)` and holds no `=` (an initializer).
"""
import argparse
import os
import re
import sys


def blank(src):
    """src with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a directive, up to an unescaped newline
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", src[i + 1:j - 1]) + c)
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


_NAME = re.compile(r"([A-Za-z_]\w*)\s*\($")


def functions(src):
    """[(name, first line, length in lines)] of the function definitions in C source src."""
    text = blank(src)
    found, depth, header_from, start = [], 0, 0, None
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                header = text[header_from:i]
                start = None
                if header.rstrip().endswith(")") and "=" not in header:
                    # the name: the identifier before the header's first top-level "("
                    p = header.find("(")
                    m = _NAME.search(header[:p + 1]) if p >= 0 else None
                    if m:
                        start = (m.group(1), i)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:  # unbalanced (braces split across #if branches): start over
                depth = 0
            if depth == 0:
                if start:
                    name, at = start
                    first = text.count("\n", 0, at) + 1
                    last = text.count("\n", 0, i) + 1
                    found.append((name, first, last - first + 1))
                    start = None
                header_from = i + 1
        elif c == ";" and depth == 0:
            header_from = i + 1
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in sorted(os.walk(p)):
                for f in sorted(files):
                    if f.endswith(".c"):
                        yield os.path.join(root, f)
        else:
            yield p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--report", type=int, default=60, help="list functions longer than this (lines)")
    ap.add_argument("--budget", type=int, default=80, help="fail when a function is longer than this")
    ap.add_argument("--no-fail", action="store_true", help="report only; exit 0 whatever the lengths")
    args = ap.parse_args(argv)
    rows = []
    for path in sources(args.paths):
        with open(path, encoding="utf-8") as f:
            rows += [(length, path, line, name) for name, line, length in functions(f.read())]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    long_ = [r for r in rows if r[0] > args.report]
    over = [r for r in rows if r[0] > args.budget]
    for length, path, line, name in long_:
        mark = "  OVER BUDGET" if length > args.budget else ""
        print(f"{path}:{line}: {name}: {length} lines{mark}")
    print(f"fnlen: {len(rows)} functions, {len(long_)} over {args.report} lines, "
          f"{len(over)} over the budget of {args.budget}")
    return 1 if over and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
