# make demo: build, install into .venv, run the walkthrough.
# make test: C tests (ASan + UBSan), then the Python suite against real NumPy, PyTorch and VTK.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MESON := $(VENV)/bin/meson
BUILD := build
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all venv sysdeps build install ctest pytest pytest-pythons test demo bench clean help

# Debian packages: a C compiler; clang for the fuzzer; the Level Zero and HIP
# headers, against which tests check our driver declarations (they skip
# where the headers are absent); shellcheck for tests/gpu/run.sh. Installed
# only when missing and root.
SYSDEPS := gcc clang libclang-rt-14-dev libze-dev libamdhip64-dev openmpi-bin libopenmpi-dev shellcheck

all: install

help:
	@echo "make demo    build, install into $(VENV) and run python -m tack.demo"
	@echo "make test    C tests under ASan/UBSan, then pytest"
	@echo "make install (re)build the extension into $(VENV)"
	@echo "make ctest   C tests only;  make pytest  Python tests only;  make bench  benchmarks"
	@echo "make pytest-pythons  the Python tests on another CPython (3.13, 3.12), NumPy only"

sysdeps:
	@missing=""; for p in $(SYSDEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing$$missing"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) || \
				echo "could not install$$missing: the tests that need them skip"; \
		else echo "missing$$missing (not root): the tests that need them skip"; fi; \
	fi

$(VENV)/.stamp: requirements-dev.txt
	@$(MAKE) --no-print-directory sysdeps
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp

install: $(VENV)/.stamp
	$(PY) -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=$(BUILD)/py .

build: install

$(BUILD)/ctest/build.ninja: $(VENV)/.stamp
	$(MESON) setup $(BUILD)/ctest -Dpython=false -Dtests=true -Db_sanitize=address,undefined \
		-Dbuildtype=debug -Db_lundef=false --wipe >/dev/null 2>&1 || \
	$(MESON) setup $(BUILD)/ctest -Dpython=false -Dtests=true -Db_sanitize=address,undefined \
		-Dbuildtype=debug -Db_lundef=false

ctest: $(BUILD)/ctest/build.ninja
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
		$(MESON) test -C $(BUILD)/ctest --print-errorlogs

pytest: install
	cd tests/python && ../../$(PY) -m pytest -q -p no:cacheprovider .

# The suite again on the newest other CPython (3.13, 3.12) found on PATH or
# in pyenv, with NumPy only; says so and passes when there is none.
pytest-pythons: install
	tests/pythons/run.sh

test: ctest pytest pytest-pythons fuzz-corpus

demo: install
	$(PY) -m tack.demo

bench: install
	$(PY) bench/exchange.py

clean:
	rm -rf $(BUILD)

# ---- hardening: the DLPack import fuzzer and the long stress runs
# make fuzz         fuzz the C DLPack import for FUZZ_SECONDS (default 60);
#                   new inputs go to build/fuzz/corpus, crashes to build/fuzz/artifacts
# make fuzz-corpus  run the committed seed corpus once (skips without clang)
# make stress       1,000,000-exchange soak, 10 s of threads, ThreadSanitizer,
#                   the C tests and the soak under valgrind
FUZZ_SECONDS ?= 60
FUZZ_FLAGS ?=
FUZZ_BIN := $(BUILD)/fuzz/fuzz_import

.PHONY: fuzz fuzz-corpus stress

fuzz:
	@tests/fuzz/build.sh $(FUZZ_BIN) || { echo "fuzz: cannot build the fuzzer (above)"; exit 1; }
	@mkdir -p $(BUILD)/fuzz/corpus $(BUILD)/fuzz/artifacts
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -timeout=20 -print_final_stats=1 \
		-artifact_prefix=$(BUILD)/fuzz/artifacts/ $(FUZZ_FLAGS) $(BUILD)/fuzz/corpus tests/fuzz/corpus

fuzz-corpus:
	@tests/fuzz/run_corpus.sh $(FUZZ_BIN)

stress: install
	STRESS_BUILD=$(BUILD) tests/stress/run.sh
