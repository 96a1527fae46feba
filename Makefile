# ember developer commands. `make demo` and `make test` set everything up on a fresh machine.
# Another interpreter: make test PY=python3.12 VENV=.venv-3.12 (each venv and build is its own).
# DEBUG=1 builds ember with its internal asserts checked (EM_ASSERT): make test DEBUG=1.
PY      ?= python3
VENV    ?= .venv
DEBUG   ?= 0
VPY     := $(VENV)/bin/python
DEPS    := $(VENV)/.ember-deps
EXT     := $(shell $(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
SO      := ember/_C$(EXT)
CSRC    := $(shell find csrc -name '*.c' -o -name '*.h' -o -name '*.def' | grep -v em_opcodes_gen.h) setup.py tools/gen_opcodes.py
PYTEST  := PYTHONPATH=$(CURDIR) $(VPY) -m pytest
ASAN_LIBS := $(shell gcc -print-file-name=libasan.so) $(shell gcc -print-file-name=libstdc++.so)
# the flavour $(SO) was built in (release or debug), one file per interpreter
FLAVOUR := $(if $(filter 1,$(DEBUG)),debug,release)
STAMP   := build/flavour$(basename $(EXT))
BUILD   := EMBER_WERROR=1 EMBER_DEBUG=$(if $(filter 1,$(DEBUG)),1,0) $(VPY) setup.py -q build_ext --inplace --force
# lint: C files the formatter checks, its pinned version, and the function-length budget of trace/
CFILES  := $(shell find csrc -name '*.c' -o -name '*.h' | grep -v em_opcodes_gen.h | sort)
CLANG_FORMAT_VERSION := 20.1.8
CLANG_FORMAT ?= $(VENV)/bin/clang-format
FN_REPORT ?= 60
FN_BUDGET ?= 80
FN_BUDGET_FAIL ?= 1
FMT_ERRORS ?= 3

.PHONY: setup build demo test test-fast asan bench fuzz lint fmt clean FORCE

setup: $(DEPS) $(SO)

$(DEPS): pyproject.toml Makefile
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q torch==2.14.1 torchvision==0.29.1 transformers matplotlib pytest expecttest coverage numpy setuptools wheel \
	  clang-format==$(CLANG_FORMAT_VERSION)
	touch $@

$(SO): $(DEPS) $(CSRC) $(STAMP)
	$(BUILD)

# rewritten only when the flavour changes, which then rebuilds $(SO)
$(STAMP): FORCE
	@mkdir -p $(dir $@); echo $(FLAVOUR) | cmp -s - $@ || echo $(FLAVOUR) > $@

build: $(SO)

demo: setup
	PYTHONPATH=$(CURDIR) $(VPY) examples/quickstart.py

test: setup
	$(PYTEST) tests -q -m "not gpu"

# the suite without the tests marked slow, stopping at the first failure
test-fast: setup
	$(PYTEST) tests -q -m "not gpu and not slow" -x

# AddressSanitizer + UBSan (and EM_ASSERT): rebuild instrumented, run the suite, rebuild as before.
asan: $(DEPS)
	rm -f $(STAMP)
	EMBER_ASAN=1 $(VPY) setup.py -q build_ext --inplace --force
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LD_PRELOAD="$(ASAN_LIBS)" EMBER_ASAN_RUN=1 $(PYTEST) tests -q -m "not gpu" -p no:cacheprovider; \
	  rc=$$?; $(BUILD) && echo $(FLAVOUR) > $(STAMP); exit $$rc

# Checks that change nothing: functions of csrc/trace/ longer than FN_REPORT lines (failing over
# FN_BUDGET unless FN_BUDGET_FAIL=0), then the formatter (.clang-format) over csrc/ (showing
# FMT_ERRORS places per file, 0: all). Both run; the exit status says whether either failed.
# `make fmt` applies the formatter.
# the pinned formatter in the venv, installed if a venv set up before it was added lacks it
FMT_DEP := $(if $(filter $(VENV)/bin/clang-format,$(CLANG_FORMAT)),$(CLANG_FORMAT))
$(VENV)/bin/clang-format: | $(DEPS)
	$(VPY) -m pip install -q clang-format==$(CLANG_FORMAT_VERSION)

lint: $(DEPS) $(FMT_DEP)
	@rc=0; \
	$(VPY) tools/fnlen.py --report $(FN_REPORT) --budget $(FN_BUDGET) $(if $(filter 0,$(FN_BUDGET_FAIL)),--no-fail) \
	  csrc/trace || rc=1; \
	$(CLANG_FORMAT) --dry-run -Werror --ferror-limit=$(FMT_ERRORS) $(CFILES) || \
	  { rc=1; echo "lint: csrc/ is not formatted (at most $(FMT_ERRORS) places shown per file): make fmt formats it"; }; \
	exit $$rc

fmt: $(DEPS) $(FMT_DEP)
	$(CLANG_FORMAT) -i $(CFILES)

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

FORCE:
