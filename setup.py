"""Builds ember._C from every C source under csrc/ (C11). The opcode table is generated
first from the interpreter that builds (tools/gen_opcodes.py). EMBER_WERROR=1 turns
warnings into errors (CI); EMBER_DEBUG=1 builds with EM_ASSERT checked (-DEM_DEBUG -O1 -g);
EMBER_ASAN=1 builds with AddressSanitizer, UBSan and EM_ASSERT checked."""
import glob
import os
import subprocess
import sys

if sys.version_info[:2] not in ((3, 11), (3, 12)):
    sys.exit(f"ember builds for CPython 3.11 and 3.12 (its frame hook and bytecode tables are per version); "
             f"this is Python {sys.version.split()[0]}: build with a 3.11 or 3.12 interpreter")

from setuptools import Extension, setup  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
# generated per interpreter, outside the source tree, so 3.11 and 3.12 builds never mix
GEN = os.path.join(ROOT, "build", "gen-%d.%d" % sys.version_info[:2])
os.makedirs(GEN, exist_ok=True)
subprocess.check_call([sys.executable, os.path.join(ROOT, "tools", "gen_opcodes.py"),
                       os.path.join(GEN, "em_opcodes_gen.h")])

flags = ["-std=c11", "-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes",
         "-Wno-unused-parameter", "-Wno-missing-field-initializers", "-fvisibility=hidden"]
link = []
if os.environ.get("EMBER_WERROR") == "1":
    flags.append("-Werror")
if os.environ.get("EMBER_ASAN") == "1":
    flags += ["-DEM_DEBUG", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
              "-fno-sanitize-recover=undefined"]
    link += ["-fsanitize=address,undefined"]
elif os.environ.get("EMBER_DEBUG") == "1":
    flags += ["-DEM_DEBUG", "-O1", "-g"]
else:
    flags += ["-O2"]

sources = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "csrc", "**", "*.c"), recursive=True))

setup(ext_modules=[Extension("ember._C", sources=sources, include_dirs=[os.path.relpath(GEN, ROOT)],
                             extra_compile_args=flags, extra_link_args=link, libraries=["dl"])])
