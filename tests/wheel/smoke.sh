#!/usr/bin/env bash
# The wheel as a user gets it: a new venv outside the source tree, and the
# wheel installed from its file. First without its dependencies, so NumPy
# is really absent: tack imports, runs a kernel on its own arrays, and
# tack.array says to install NumPy. Then with them (NumPy): zero-copy both
# ways with NumPy, a CPU kernel and python -m tack (smoke.py). Last with the
# [cc] extra and no C compiler on PATH: zig's builds the kernel.
#
#   tests/wheel/smoke.sh PYTHON WHEEL
#
# PYTHON makes the venv and runs pip (22.3 or later, for --python).
set -euo pipefail
py=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # not resolved: a venv's python keeps its pip
wheel=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tack-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$py" -m venv --without-pip "$work/venv"
install() { "$py" -m pip --python "$work/venv/bin/python" install -q --no-compile "$@"; }
install --no-deps "$wheel"
# Away from the source tree, whose python/tack must not be the one imported;
# a kernel cache of its own, so that the kernel really compiles.
cd "$work"
export TACK_CACHE_DIR=$work/cache
"$work/venv/bin/python" "$root/tests/wheel/smoke.py" --without-numpy
install "$wheel"
"$work/venv/bin/python" "$root/tests/wheel/smoke.py"
# pip install tack-arrays[cc] on a machine whose PATH has no C compiler.
install "${wheel}[cc]"
mkdir "$work/no-compiler"
env -u TACK_CC PATH="$work/no-compiler" "$work/venv/bin/python" "$root/tests/wheel/smoke.py" --zig
echo "wheel: $(basename "$wheel") installs and works in a new venv"
