"""A short fixed-seed run of the differential fuzzer (python -m ember.fuzz): 40 programs,
eager backend, no wrong result, crash or hang."""
import time

from ember.fuzz import fuzz_run


def test_fuzz_short_run(tmp_path):
    t0 = time.monotonic()
    s = fuzz_run(seed=1, count=40, backend="eager", jobs=1, out=str(tmp_path), timeout=60)
    bad = [(f["index"], f["status"], f["sig"], f["detail"][:500]) for f in s["failures"]]
    assert s["counts"]["ok"] == 40, (s["line"], bad)
    assert time.monotonic() - t0 < 60
