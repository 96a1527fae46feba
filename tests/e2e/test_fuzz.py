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


def test_fuzz_cli_summary_line(tmp_path, capsys):
    from ember.fuzz.__main__ import main
    rc = main(["--seed", "2", "--count", "3", "--start", "5", "--backend", "eager", "-q", "--out", str(tmp_path)])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("3 programs: 3 ok (") and "with a frame run as plain Python), 0 wrong, 0 crash, " \
        "0 hang, 0 internal-error" in line, line
    assert rc == 0
    assert (tmp_path / "summary.json").exists()


def test_fuzz_short_run_dynamic(tmp_path, monkeypatch):
    """The same with dynamic=True for every program (python -m ember.fuzz --dynamic true)."""
    from ember.fuzz import runner
    runner.shutdown_idle()  # workers read EMBER_FUZZ_DYNAMIC when they start
    monkeypatch.setenv("EMBER_FUZZ_DYNAMIC", "true")
    try:
        s = fuzz_run(seed=3, count=40, backend="eager", jobs=1, out=str(tmp_path), timeout=60)
    finally:
        runner.shutdown_idle()
    bad = [(f["index"], f["status"], f["sig"], f["detail"][:500]) for f in s["failures"]]
    assert s["counts"]["ok"] == 40, (s["line"], bad)
