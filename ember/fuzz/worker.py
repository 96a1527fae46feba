"""Worker process: reads one JSON request a line on stdin, writes one JSON result a line.

A request is {"seed": S, "index": I, "backend": B, "compiler": "ember"|"torch", "dir": D}
(the program is generated here and written to D) or {"path": P, "backend": B, ...}."""
import json
import os
import sys


def main():
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray output of programs and libraries goes to the log, not the protocol
    import torch
    torch.set_num_threads(1)
    from . import gen, runner
    proto.write(json.dumps({"ready": True}) + "\n")  # the per-program timeout starts now
    proto.flush()
    for line in sys.stdin:
        req = json.loads(line)
        backend = req.get("backend", "eager")
        compiler = req.get("compiler", "ember")
        if "path" in req:
            path = req["path"]
            with open(path) as f:
                src = f.read()
        else:
            path = os.path.join(req.get("dir", "/tmp"), f"prog_{req['seed']}_{req['index']}.py")
            if req.get("known_rate") is not None:
                path = path[:-3] + f"_k{req['known_rate']}.py"
            try:
                src = gen.generate(req["seed"], req["index"], req.get("known_rate"))
            except Exception:  # noqa: BLE001
                import traceback
                res = {"status": "internal", "sig": "internal:generate", "detail": traceback.format_exc(),
                       "eager_excs": [], "path": None}
                proto.write(json.dumps(res) + "\n")
                proto.flush()
                continue
            with open(path, "w") as f:
                f.write(src)
        print(f"== {path} ({compiler}, {backend})", file=sys.stderr, flush=True)
        res = runner.run_source(src, path, backend, compiler)
        proto.write(json.dumps(res) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
