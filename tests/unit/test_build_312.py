"""The extension must build on CPython 3.12 too (the GPU machines run it), where
ember.compile refuses capture with a clear error. Builds with a 3.12 interpreter when this
machine has one (pyenv or PATH); skipped otherwise."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _find_312():
    for cand in [shutil.which("python3.12")] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))):
        if cand and os.path.exists(cand):
            inc = subprocess.run([cand, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                                 capture_output=True, text=True).stdout.strip()
            if os.path.exists(os.path.join(inc, "internal", "pycore_frame.h")):
                return cand
    return None


@pytest.mark.skipif(sys.version_info[:2] == (3, 12), reason="this interpreter is 3.12: the main build covers it")
def test_extension_builds_on_python_312(tmp_path):
    py = _find_312()
    if py is None:
        pytest.skip("no CPython 3.12 with internal headers on this machine")
    venv = tmp_path / "venv"
    subprocess.run([py, "-m", "venv", str(venv)], check=True)
    vpy = str(venv / "bin" / "python")
    r = subprocess.run([vpy, "-m", "pip", "install", "-q", "setuptools", "wheel"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("could not install setuptools for 3.12: " + r.stderr[-300:])
    env = dict(os.environ, EMBER_WERROR="1")
    r = subprocess.run([vpy, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
                        "--build-temp", str(tmp_path / "tmp")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert glob.glob(str(tmp_path / "lib" / "ember" / "_C.cpython-312*.so"))
