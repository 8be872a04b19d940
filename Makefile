# make demo: build, install into .venv, run the walkthrough.
# make test: C tests (ASan + UBSan), then the Python suite against real NumPy, PyTorch and VTK
#            (and again against an ASan + UBSan build of the extension),
#            then the C install, the public headers, the wheel and the docs (make docs).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MESON := $(VENV)/bin/meson
BUILD := build
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all venv sysdeps build install ctest pytest pytest-asan asan-install pytest-pythons test demo bench clean help \
	install-c wheel sdist test-install test-headers test-wheel

# Debian packages: a C compiler; clang for the fuzzer; the Level Zero and HIP
# headers, against which tests check our driver declarations (they skip
# where the headers are absent); shellcheck for the shell scripts; a C++
# compiler, pkg-config and CMake, with which the installed library is used.
# Installed only when missing and root.
SYSDEPS := gcc clang libclang-rt-14-dev libze-dev libamdhip64-dev openmpi-bin libopenmpi-dev shellcheck \
	g++ pkg-config cmake

all: install

help:
	@echo "make demo    build, install into $(VENV) and run python -m tack.demo and examples/insitu"
	@echo "make test    C tests under ASan/UBSan, then pytest"
	@echo "make install (re)build the extension into $(VENV)"
	@echo "make ctest   C tests only;  make pytest  Python tests only;  make bench  benchmarks"
	@echo "make pytest-asan  the Python tests against the extension built with ASan and UBSan"
	@echo "make pytest-pythons  the Python tests on another CPython (3.13, 3.12), NumPy only"
	@echo "make install-c PREFIX=<dir>  the C library, headers, tack.pc, CMake package (DESTDIR respected)"
	@echo "make wheel   dist/tack_arrays-*-manylinux_2_28_x86_64.whl;  make sdist  dist/tack_arrays-*.tar.gz"
	@echo "make docs    the documentation site (Sphinx, docs/) into build/docs/html, warnings as errors"

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
	@# An older NVRTC beside the newest the requirements bring, for the tests
	@# of the choice between NVRTCs (tests/python/test_cuda_code.py, which
	@# skips those cases without it).
	$(PY) -m pip install -q --no-deps --target $(VENV)/nvrtc-13.0 "nvidia-cuda-nvrtc==13.0.*" || \
		echo "could not install NVRTC 13.0 into $(VENV)/nvrtc-13.0: the tests that need two NVRTCs skip"
	touch $@

venv: $(VENV)/.stamp

# Development builds turn warnings into errors; users' builds do not.
# A distribution named "tack" in the venv is this package under its old name.
install: $(VENV)/.stamp
	$(if $(wildcard $(VENV)/lib/python*/site-packages/tack-[0-9]*.dist-info),$(PY) -m pip uninstall -q -y tack)
	$(PY) -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=$(BUILD)/py -Csetup-args=-Dwerror=true .

build: install

$(BUILD)/ctest/build.ninja: $(VENV)/.stamp
	$(MESON) setup $(BUILD)/ctest -Dpython=false -Dtests=true -Db_sanitize=address,undefined \
		-Dbuildtype=debug -Db_lundef=false -Dwerror=true -Dtest_hooks=true --wipe >/dev/null 2>&1 || \
	$(MESON) setup $(BUILD)/ctest -Dpython=false -Dtests=true -Db_sanitize=address,undefined \
		-Dbuildtype=debug -Db_lundef=false -Dwerror=true -Dtest_hooks=true

ctest: $(BUILD)/ctest/build.ninja
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
		$(MESON) test -C $(BUILD)/ctest --print-errorlogs

pytest: install
	cd tests/python && ../../$(PY) -m pytest -q -p no:cacheprovider .

# The suite again against the extension built with AddressSanitizer and
# UndefinedBehaviorSanitizer, so that a use after free or an overflow in the
# extension fails the run rather than passing by luck. A second build
# (build/asan) installed into a folder of its own, which PYTHONPATH puts
# before the venv's site-packages: the normal install stays as it is.
# CPython is not instrumented, so the ASan runtime is preloaded (the
# extension's UBSan runtime loads as its dependency), and libstdc++ with it:
# ASan finds the C++ throw it intercepts only in libraries loaded before it
# starts, and PyTorch throws through it. Leaks are not checked here (CPython
# keeps memory at exit by design; the C tests check libtack's leaks). A
# report goes to build/asan/report.<pid>, printed when the run fails, since
# pytest's capture would lose a process's last words.
# tests/python/conftest.py skips what cannot run or is too slow under the
# sanitizers, saying why.
ASAN_BUILD := $(BUILD)/asan
ASAN_SITE := $(abspath $(ASAN_BUILD))/site
ASAN_REPORT := $(abspath $(ASAN_BUILD))/report
ASAN_CC ?= gcc
ASAN_PRELOAD = $(shell $(ASAN_CC) -print-file-name=libasan.so) $(shell $(ASAN_CC) -print-file-name=libstdc++.so.6)

asan-install: $(VENV)/.stamp
	CC=$(ASAN_CC) $(PY) -m pip install -q --no-build-isolation --no-deps --upgrade --target $(ASAN_SITE) \
		-Cbuild-dir=$(ASAN_BUILD)/py -Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false \
		-Csetup-args=-Dbuildtype=debugoptimized -Csetup-args=-Dwerror=true .
	@# Tack looks for NVRTC's wheel beside its own package, as it is installed.
	$(if $(wildcard $(VENV)/lib/python3*/site-packages/nvidia),ln -sfn $(abspath $(firstword $(wildcard $(VENV)/lib/python3*/site-packages/nvidia))) $(ASAN_SITE)/nvidia)

pytest-asan: asan-install
	@rm -f $(ASAN_REPORT).*
	cd tests/python && LD_PRELOAD="$(ASAN_PRELOAD)" PYTHONPATH=$(ASAN_SITE) TACK_SANITIZED=$(ASAN_SITE) \
		ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:allocator_may_return_null=1:log_path=$(ASAN_REPORT) \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(ASAN_REPORT) \
		../../$(PY) -m pytest -q -p no:cacheprovider . || { s=$$?; cat $(ASAN_REPORT).* 2>/dev/null; exit $$s; }

# The suite again on the newest other CPython (3.13, 3.12) found on PATH or
# in pyenv, with NumPy only; says so and passes when there is none.
pytest-pythons: install
	tests/pythons/run.sh

test: ctest pytest pytest-asan pytest-pythons fuzz-corpus test-install test-headers test-wheel docs

demo: install
	$(PY) -m tack.demo
	$(PY) examples/insitu/run.py

# The documentation site: Sphinx over docs/, warnings as errors and every
# cross-reference checked (nitpicky); the tutorials under examples/tutorials
# run and draw their figures on the CPU, offscreen; then every page, link
# and figure of the built site is checked to exist. Autodoc imports the
# extension make install built; what Sphinx needs comes with the venv
# (requirements-dev.txt).
DOCS_OUT := $(BUILD)/docs/html
.PHONY: docs
docs: install
	MPLBACKEND=Agg $(PY) -m sphinx -b html -E -W --keep-going -n -q docs $(DOCS_OUT)
	$(PY) docs/_ext/check_site.py $(DOCS_OUT)
	@echo "docs: $(DOCS_OUT)/index.html"

# The in-situ example alone: a C simulation that embeds Python (examples/insitu).
.PHONY: insitu
insitu: install
	$(PY) examples/insitu/run.py

bench: install
	$(PY) bench/exchange.py

clean:
	rm -rf $(BUILD) docs/tutorials docs/sg_execution_times.rst

# ---- installing: the C library, and the Python distribution (tack-arrays)
# make install-c PREFIX=<dir>  include/tack/*.h, lib/libtack.so (SONAME libtack.so.<abi>),
#                              lib/libtack.a, lib/pkgconfig/tack.pc, lib/cmake/Tack/;
#                              DESTDIR=<dir> stages the install under <dir> (packaging)
# make wheel    dist/tack_arrays-<version>-<python>-manylinux_2_28_x86_64.whl, built with
#               zig's C compiler against glibc 2.28 (RHEL 8) and checked by auditwheel
# make sdist    dist/tack_arrays-<version>.tar.gz (the committed tree)
PREFIX ?= /usr/local
DESTDIR ?=
C_BUILD ?= $(BUILD)/c
C_SETUP_ARGS ?=
# install-c needs Meson and Ninja alone: without the development venv it
# makes a small one for them.
TOOLS := $(BUILD)/tools
C_MESON := $(if $(wildcard $(VENV)/.stamp),$(MESON),$(TOOLS)/bin/meson)

$(TOOLS)/bin/meson:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -q "meson>=1.1" ninja

install-c: $(C_MESON)
	@prefix="$(abspath $(PREFIX))"; export PATH="$(abspath $(dir $(C_MESON))):$$PATH"; \
	if [ ! -f $(C_BUILD)/build.ninja ]; then \
		$(C_MESON) setup $(C_BUILD) -Dpython=false -Dlibdir=lib -Dincludedir=include --prefix="$$prefix" \
			$(C_SETUP_ARGS) >/dev/null || exit 1; \
	elif [ "$$(cat $(C_BUILD)/.tack-prefix 2>/dev/null)" != "$$prefix" ]; then \
		$(C_MESON) configure $(C_BUILD) -Dprefix="$$prefix" || exit 1; \
	fi; \
	echo "$$prefix" > $(C_BUILD)/.tack-prefix; \
	DESTDIR="$(DESTDIR)" $(C_MESON) install -C $(C_BUILD) --quiet && \
	echo "install-c: Tack installed in $(DESTDIR)$$prefix"

WHEEL_BUILD := $(BUILD)/wheel
WHEEL_PLATFORM := manylinux_2_28_x86_64
ZIG_TARGET := x86_64-linux-gnu.2.28
# Everything the wheel is built from: unchanged, the last wheel is reused.
WHEEL_INPUTS := Makefile meson.build meson.options pyproject.toml README.md LICENSE \
	$(shell find src include python cmake -type f ! -name '*.pyc' 2>/dev/null)

wheel: $(WHEEL_BUILD)/.stamp

$(WHEEL_BUILD)/.stamp: $(VENV)/.stamp $(WHEEL_INPUTS)
	@mkdir -p $(WHEEL_BUILD)
	@{ echo "[binaries]"; \
	  echo "c = ['$(abspath $(PY))', '-m', 'ziglang', 'cc', '-target', '$(ZIG_TARGET)']"; \
	  echo "ar = ['$(abspath $(PY))', '-m', 'ziglang', 'ar']"; \
	  echo "[built-in options]"; \
	  echo "c_args = ['-g0']"; \
	  echo "c_link_args = ['-s']"; } > $(WHEEL_BUILD)/zig.ini.new
	@# Meson does not notice a changed machine file: build afresh then.
	@cmp -s $(WHEEL_BUILD)/zig.ini.new $(WHEEL_BUILD)/zig.ini || rm -rf $(WHEEL_BUILD)/build
	@mv $(WHEEL_BUILD)/zig.ini.new $(WHEEL_BUILD)/zig.ini
	rm -rf $(WHEEL_BUILD)/raw
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(WHEEL_BUILD)/raw -Cbuild-dir=$(WHEEL_BUILD)/build \
		-Csetup-args=--native-file=$(abspath $(WHEEL_BUILD))/zig.ini -Csetup-args=-Dwerror=true .
	rm -f dist/tack_arrays-*.whl
	@# libtack stays in tack/lib under its SONAME, never grafted under a hashed
	@# name: a host's libtack of that SONAME must be the one the extension binds.
	$(VENV)/bin/auditwheel repair --plat $(WHEEL_PLATFORM) --exclude 'libtack.so.*' -w dist \
		$(WHEEL_BUILD)/raw/tack_arrays-*.whl \
		>$(WHEEL_BUILD)/repair.log 2>&1 || { cat $(WHEEL_BUILD)/repair.log; exit 1; }
	$(VENV)/bin/auditwheel show dist/tack_arrays-*.whl | tr '\n' ' ' | grep -q '"$(WHEEL_PLATFORM)"' || \
		{ $(VENV)/bin/auditwheel show dist/tack_arrays-*.whl; exit 1; }
	@ls dist/tack_arrays-*-$(WHEEL_PLATFORM).whl
	@touch $@

sdist: $(VENV)/.stamp
	$(PY) -m build --sdist --no-isolation --outdir dist .

# The C library installed as a user installs it (warnings as errors here),
# then staged once more under DESTDIR; tests/install/library.py builds the C
# example against it with pkg-config and CMake, shared and static.
C_TEST := $(abspath $(BUILD))/c-install
test-install: $(VENV)/.stamp
	@rm -rf $(C_TEST)/prefix $(C_TEST)/destdir
	@$(MAKE) --no-print-directory install-c C_BUILD=$(C_TEST)/build PREFIX=$(C_TEST)/prefix \
		C_SETUP_ARGS=-Dwerror=true >/dev/null
	@$(MAKE) --no-print-directory install-c C_BUILD=$(C_TEST)/build PREFIX=$(C_TEST)/prefix \
		DESTDIR=$(C_TEST)/destdir >/dev/null
	$(PY) tests/install/library.py --prefix $(C_TEST)/prefix --destdir $(C_TEST)/destdir --work $(C_TEST)/work

# The public headers with the upstream DLPack header (PyTorch's copy).
test-headers: $(VENV)/.stamp
	$(PY) tests/install/headers.py

# The wheel in a new venv outside the source tree.
test-wheel: wheel
	tests/wheel/smoke.sh $(PY) dist/tack_arrays-*-$(WHEEL_PLATFORM).whl

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
