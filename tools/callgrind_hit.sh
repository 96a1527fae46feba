#!/usr/bin/env bash
# Instructions per cache-hit call of f(x, y) = x + y, ember vs eager, counted by callgrind
# (repeatable, unlike timings): runs N1 and N2 calls and divides the difference.
# Usage: tools/callgrind_hit.sh [N1 N2]   (needs valgrind; takes a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
n1=${1:-1000}; n2=${2:-11000}
py=${PY:-.venv/bin/python}
cat > /tmp/ember_cg.py <<'PY'
import sys, torch, ember
def add(x, y): return x + y
x, y = torch.ones(4), torch.ones(4)
f = ember.compile(add) if sys.argv[1] == "ember" else add
f(x, y); f(x, y)
for _ in range(int(sys.argv[2])): f(x, y)
PY
count() { PYTHONPATH=. valgrind --tool=callgrind --callgrind-out-file=/dev/null "$py" /tmp/ember_cg.py "$1" "$2" 2>&1 | sed -n 's/.*Collected : //p'; }
for mode in eager ember; do
  a=$(count $mode $n1); b=$(count $mode $n2)
  echo "$mode: $(( (b - a) / (n2 - n1) )) instructions per call"
done
