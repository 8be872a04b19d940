# make demo: build, install into .venv, run the walkthrough.
# make test: C tests (ASan + UBSan), then the Python suite against real NumPy, PyTorch and VTK.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MESON := $(VENV)/bin/meson
BUILD := build
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all venv build install ctest pytest test demo bench clean help

all: install

help:
	@echo "make demo    build, install into $(VENV) and run python -m tack.demo"
	@echo "make test    C tests under ASan/UBSan, then pytest"
	@echo "make install (re)build the extension into $(VENV)"
	@echo "make ctest   C tests only;  make pytest  Python tests only;  make bench  benchmarks"

$(VENV)/.stamp: requirements-dev.txt
	@command -v cc >/dev/null || (apt-get update && apt-get install -y gcc)
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

test: ctest pytest

demo: install
	$(PY) -m tack.demo

bench: install
	$(PY) bench/exchange.py

clean:
	rm -rf $(BUILD)
