"""ember's differential fuzzer: random valid PyTorch programs run eagerly and under
ember.compile, compared call by call (outputs, mutated inputs, exceptions, side effects,
gradients). `python -m ember.fuzz --help`; gen (programs), runner (comparison and worker
processes), minimize (shrinking a failure to a repro)."""
import collections
import json
import os
import shutil
import tempfile
import time

from . import gen, minimize as _minimize, runner

__all__ = ["fuzz_run", "gen", "runner"]


def fuzz_run(seed, count, backend="eager", jobs=1, out=None, minimize=False, triage_torch=False, timeout=60.0,
             start=0, log=None, minimize_budget=180.0, minimize_per_kind=0, known_rate=None):
    """Generates and checks programs (seed, start..start+count-1); returns a summary dict with
    "counts", "failures" and the summary "line". minimize_per_kind > 0: minimize only that many
    failures of each signature (the others keep their full program)."""
    log = log or (lambda *_: None)
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="ember-fuzz-")
    if out:
        os.makedirs(out, exist_ok=True)
    reqs = [{"seed": seed, "index": i, "backend": backend, "dir": tmp, "known_rate": known_rate}
            for i in range(start, start + count)]
    done = [0]

    def on_result(i, res):
        done[0] += 1
        if res["status"] != "ok":
            log(f"[{done[0]}/{count}] program {seed}:{start + i}: {res['status']} ({res['sig']})")
        elif done[0] % 50 == 0:
            log(f"[{done[0]}/{count}] {time.monotonic() - t0:.0f} s")

    results = runner.run_jobs(reqs, jobs=jobs, timeout=timeout, tmpdir=tmp, on_result=on_result)
    counts = collections.Counter({k: 0 for k in runner.STATUSES})
    shared = 0
    failures = []
    minimized = collections.Counter()
    plain = 0  # programs (ok) with a frame ember ran as plain Python (an abort)
    why = collections.Counter()  # their reasons (each once per program)
    for i, res in enumerate(results):
        index = start + i
        res["index"] = index
        if res["status"] == "ok":
            counts["ok"] += 1
            plain += (res.get("counters") or {}).get("aborts", 0) > 0
            why.update(set(res.get("plain_reasons") or ()))
            continue
        path = res.get("path")
        if path and os.path.exists(path):
            with open(path) as f:
                src = f.read()
        else:  # a crash or hang: the worker died before reporting the path
            src = gen.generate(seed, index, known_rate)
            path = os.path.join(tmp, f"prog_{seed}_{index}.py")
            with open(path, "w") as f:
                f.write(src)
        if triage_torch and res["status"] != "internal":
            t = runner.run_jobs([{"path": path, "backend": backend, "compiler": "torch"}], jobs=1, timeout=timeout * 3,
                                tmpdir=tmp, batch=False)[0]
            res["torch"] = {"status": t["status"], "sig": t["sig"], "detail": t["detail"][:2000]}
            if t["status"] != "ok":
                shared += 1
                res["shared"] = True
                log(f"  program {seed}:{index}: shared with torch.compile ({t['sig']})")
        if not res.get("shared"):
            counts[res["status"]] += 1
        failures.append(res)
        if out:
            stem = os.path.join(out, f"{res['status']}-{seed}-{index}" + ("-shared" if res.get("shared") else ""))
            with open(stem + ".py", "w") as f:
                f.write(_minimize.repro_text(src, res, backend))
            with open(stem + ".json", "w") as f:
                json.dump(res, f, indent=1, default=str)
            if minimize and not res.get("shared") and res["status"] != "internal" and (
                    not minimize_per_kind or minimized[res["sig"]] < minimize_per_kind):
                minimized[res["sig"]] += 1
                log(f"  minimizing {seed}:{index} ({res['sig']})")
                # a hang is minimized with a shorter timeout: each hanging candidate costs it
                mt = min(timeout, 15.0) if res["status"] == "hang" else timeout
                small, sres = _minimize.minimize(src, backend=backend, timeout=mt, tmpdir=tmp,
                                                 budget_s=minimize_budget, log=log)
                res["minimized_sig"] = sres["sig"]
                with open(stem + ".min.py", "w") as f:
                    f.write(_minimize.repro_text(small, sres, backend))
    wall = time.monotonic() - t0
    line = (f"{count} programs: {counts['ok']} ok ({plain} with a frame run as plain Python), "
            f"{counts['wrong']} wrong, {counts['crash']} crash, "
            f"{counts['hang']} hang, {counts['internal']} internal-error")
    if triage_torch:
        line += f"; {shared} shared with torch.compile"
    line += f" ({backend}, seed {seed}, {wall:.0f} s)"
    summary = {"counts": dict(counts), "plain": plain, "plain_why": why.most_common(), "shared": shared,
               "failures": failures, "line": line, "wall_s": wall}
    if out:
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump({k: v for k, v in summary.items() if k != "failures"}, f, indent=1)
        shutil.rmtree(tmp, ignore_errors=True)  # the failing programs are in out
    elif failures:
        log(f"failing programs are in {tmp}")
    return summary
