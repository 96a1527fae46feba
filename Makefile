# ember developer commands. `make demo` and `make test` set everything up on a fresh machine.
# Another interpreter: make test PY=python3.12 VENV=.venv-3.12 (each venv and build is its own).
PY      ?= python3
VENV    ?= .venv
VPY     := $(VENV)/bin/python
DEPS    := $(VENV)/.ember-deps
EXT     := $(shell $(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
SO      := ember/_C$(EXT)
CSRC    := $(shell find csrc -name '*.c' -o -name '*.h' -o -name '*.def' | grep -v em_opcodes_gen.h) setup.py tools/gen_opcodes.py
PYTEST  := PYTHONPATH=$(CURDIR) $(VPY) -m pytest
ASAN_LIBS := $(shell gcc -print-file-name=libasan.so) $(shell gcc -print-file-name=libstdc++.so)

.PHONY: setup build demo test test-fast asan bench fuzz lint clean

setup: $(DEPS) $(SO)

$(DEPS): pyproject.toml Makefile
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q torch==2.14.1 torchvision==0.29.1 transformers matplotlib pytest coverage numpy setuptools wheel
	touch $@

$(SO): $(DEPS) $(CSRC)
	EMBER_WERROR=1 $(VPY) setup.py -q build_ext --inplace --force

build: $(SO)

demo: setup
	PYTHONPATH=$(CURDIR) $(VPY) examples/quickstart.py

test: setup
	$(PYTEST) tests -q -m "not gpu"

# AddressSanitizer + UBSan: rebuild instrumented, run the suite, rebuild normally.
asan: $(DEPS)
	EMBER_ASAN=1 $(VPY) setup.py -q build_ext --inplace --force
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LD_PRELOAD="$(ASAN_LIBS)" EMBER_ASAN_RUN=1 $(PYTEST) tests -q -m "not gpu" -p no:cacheprovider; \
	  rc=$$?; EMBER_WERROR=1 $(VPY) setup.py -q build_ext --inplace --force; exit $$rc

bench: setup
	PYTHONPATH=$(CURDIR) $(VPY) -m ember.bench --small --out results

# differential fuzzer: random programs run eagerly and under ember.compile, compared call by call
FUZZ_SEED    ?= 1
FUZZ_COUNT   ?= 2000
FUZZ_BACKEND ?= eager
FUZZ_JOBS    ?= 2
FUZZ_OUT     ?= fuzz-out
fuzz: setup
	PYTHONPATH=$(CURDIR) $(VPY) -m ember.fuzz --seed $(FUZZ_SEED) --count $(FUZZ_COUNT) --backend $(FUZZ_BACKEND) \
	  --jobs $(FUZZ_JOBS) --out $(FUZZ_OUT) --minimize $(if $(filter aot_eager,$(FUZZ_BACKEND)),--triage-torch)

clean:
	rm -rf build ember/_C*.so csrc/pyver/em_opcodes_gen.h
