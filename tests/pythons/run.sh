#!/usr/bin/env bash
# The Python suite again on the newest other CPython installed here: the
# extension is C against the CPython API, whose rules change between
# versions (3.12 deprecated PyErr_Fetch; 3.13 stopped setting
# Py_TPFLAGS_VALID_VERSION_TAG and made PyObject_HasAttr report pending
# errors). Only NumPy and the test tools are installed for it, so the tests
# of PyTorch, VTK, MPI, Warp and JAX skip there; they run on the main one.
#
#     tests/pythons/run.sh              # newest of 3.13, 3.12 found
#     OTHER_PYTHON=/path/to/python tests/pythons/run.sh
#
# Looks on PATH, then in pyenv's versions. Finds none: says so, exits 0.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

find_python() {
    local v p
    for v in 3.13 3.12; do
        if p=$(command -v "python$v" 2>/dev/null) && "$p" -c '' 2>/dev/null; then
            echo "$p"; return
        fi
        local root
        root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
        for p in "$root"/versions/"$v"*/bin/"python$v"; do
            if [ -x "$p" ] && "$p" -c '' 2>/dev/null; then
                echo "$p"; return
            fi
        done
    done
}

PY=${OTHER_PYTHON:-$(find_python)}
if [ -z "$PY" ]; then
    echo "pythons: no CPython 3.12 or 3.13 here; the suite ran on $(.venv/bin/python -V 2>&1) only"
    exit 0
fi
VERSION=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV=$ROOT/build/venv-$VERSION
echo "pythons: the suite on Python $VERSION ($PY)"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
"$VENV/bin/python" -m pip install -q "numpy>=2.1" pytest hypothesis "meson>=1.1" "meson-python>=0.18" ninja
PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps \
    -Cbuild-dir="build/py-$VERSION" -Csetup-args=-Dwerror=true .
cd tests/python
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider .
