"""tools/fnlen.py, the function-length report of `make lint`: a brace matcher that must not be
fooled by braces in comments, literals, preprocessor lines or initializers."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import fnlen  # noqa: E402

SRC = r'''/* a comment with { braces } */
#define OPEN {
#define MULTI(x) \
    do { x; } while (0)
static const char *names[] = {"a{", "}b"};
typedef struct { int a; } S;

static int small(int x) { return x; }

EmStatus longer(EmTracer *T,
                int n) {
    const char *s = "}}}";  // and a } here
    char c = '{';
    if (n) {
        return 1;
    }
    return 0;
}
'''


def test_functions_found_with_their_lengths():
    assert fnlen.functions(SRC) == [("small", 8, 1), ("longer", 11, 8)]


def test_report_and_budget(tmp_path):
    body = "\n".join(["    x++;"] * 70)
    (tmp_path / "a.c").write_text(f"int f(void) {{\n{body}\n}}\nint g(void) {{ return 0; }}\n")
    run = lambda *a: subprocess.run([sys.executable, os.path.join(REPO, "tools", "fnlen.py"), *a, str(tmp_path)],
                                    capture_output=True, text=True)
    r = run("--report", "60", "--budget", "80")
    assert r.returncode == 0 and f"{tmp_path / 'a.c'}:1: f: 72 lines" in r.stdout
    r = run("--report", "60", "--budget", "70")
    assert r.returncode == 1 and "OVER BUDGET" in r.stdout
    assert run("--budget", "70", "--no-fail").returncode == 0
