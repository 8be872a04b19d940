"""The kernel cache as input: damaged files are rebuilt, not loaded; files
another user planted or could have written are never loaded; a cache
directory others can write is refused.

Every build runs in a fresh interpreter with a time limit: what these tests
guard against is a process killed inside dlopen, or code someone else put
in the cache running in it. The "other user" cases need root (to give a
file or a directory to uid 65534) and skip otherwise; CI runs as root."""

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

OTHER_UID = 65534  # nobody
LIMIT = 60

KERNEL = "void times3(tack_index i, int32_t *y) { y[i] = (int32_t)i * 3; }"

BUILD = r"""
import json, os, sys
import tack
try:
    k = tack.Kernel(sys.argv[1])
    y = tack.zeros(5, tack.i32)
    k(y)
    print(json.dumps({"y": y.to_numpy().tolist()}))
except RuntimeError as e:
    print(json.dumps({"error": str(e)}))
"""

# What someone else would plant under the name the kernel's hash predicts:
# an object with the entry point, whose constructor runs on load.
PLANTED = r"""
#include <stdint.h>
#include <stdio.h>
__attribute__((constructor)) static void planted(void)
{
    FILE *f = fopen("%s", "w");
    if (f) {
        fputs("planted code ran", f);
        fclose(f);
    }
}
void tack_kernel_entry(int64_t begin, int64_t end, void *const *args)
{
    int32_t *y = *(int32_t *const *)args[0];
    for (int64_t i = begin; i < end; i++)
        y[i] = -1;
}
"""


def counting_cc(directory):
    log = directory / "cc-calls.log"
    script = directory / "cc-counting"
    script.write_text(f'#!/bin/sh\necho x >> "{log}"\nexec cc "$@"\n')
    script.chmod(0o755)
    return str(script), log


def calls(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


def build(cache, cc, source=KERNEL):
    env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_CC=cc)
    env.pop("TACK_CFLAGS", None)
    try:
        proc = subprocess.run([sys.executable, "-c", BUILD, source], env=env, capture_output=True, text=True,
                              timeout=LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"building a kernel from the cache hung (killed after {LIMIT} s)")
    if proc.returncode < 0:
        pytest.fail(f"building a kernel from the cache killed the process with "
                    f"{signal.Signals(-proc.returncode).name}\n{proc.stderr[-2000:]}")
    assert proc.returncode == 0, f"building a kernel from the cache failed (exit {proc.returncode}):\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def private(path):
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    return path


def cached_object(cache):
    objects = [f for f in os.listdir(cache) if f.startswith("cpu-") and f.endswith(".so")]
    assert len(objects) == 1, objects
    return cache / objects[0]


def trailer_ok(path):
    """The object ends with the trailer the cache writes: its size and
    SHA-256 (see src/kernel/cache.c)."""
    data = path.read_bytes()
    body, tail = data[:-99], data[-99:]
    return tail == b"tack-cache-1 %020d %s\n" % (len(body), hashlib.sha256(body).hexdigest().encode())


def with_trailer(data):
    return data + b"tack-cache-1 %020d %s\n" % (len(data), hashlib.sha256(data).hexdigest().encode())


@pytest.fixture
def cc(tmp_path):
    return counting_cc(tmp_path)


def need_root():
    if os.geteuid() != 0:
        pytest.skip("giving a file or directory to another user (uid 65534) needs root")


# --------------------------------------------------------------------------
# damaged objects

DAMAGE = {
    "cut to 4096 bytes": lambda data: data[:4096],
    "cut to nothing": lambda data: b"",
    "a page of zeros inside": lambda data: data[:4096] + bytes(4096) + data[8192:],
    "one flipped byte": lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:],
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_cached_object_is_rebuilt(tmp_path, cc, damage):
    script, log = cc
    cache = private(tmp_path / "cache")
    assert build(cache, script) == {"y": [0, 3, 6, 9, 12]}
    obj = cached_object(cache)
    assert calls(log) == 1
    obj.write_bytes(damage(obj.read_bytes()))
    # Loading it would fault inside dlopen; it is built again instead.
    assert build(cache, script) == {"y": [0, 3, 6, 9, 12]}
    assert calls(log) == 2
    assert trailer_ok(obj)
    # And the rebuilt one is loaded from then on.
    assert build(cache, script) == {"y": [0, 3, 6, 9, 12]} and calls(log) == 2


# --------------------------------------------------------------------------
# planted objects


def plant(tmp_path, cc, cache):
    """Builds the kernel once in a scratch cache to learn its name, then
    puts a planted object under that name in `cache`, with a trailer that
    matches (the attacker can compute a SHA-256 too). Returns its path and
    the marker its constructor would write."""
    script, _ = cc
    scratch = private(tmp_path / "scratch")
    assert build(scratch, script) == {"y": [0, 3, 6, 9, 12]}
    name = cached_object(scratch).name
    marker = tmp_path / "planted-code-ran"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED % marker)
    so = tmp_path / "planted.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    target = cache / name
    target.write_bytes(with_trailer(so.read_bytes()))
    return target, marker


def test_an_object_others_can_write_is_not_loaded(tmp_path, cc):
    cache = private(tmp_path / "cache")
    target, marker = plant(tmp_path, cc, cache)
    target.chmod(0o666)
    assert build(cache, cc[0]) == {"y": [0, 3, 6, 9, 12]}
    assert not marker.exists(), "code in a file others could write ran"
    # Replaced by this user's own build, which nobody else can write.
    st = target.stat()
    assert st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and trailer_ok(target)


def test_an_object_another_user_owns_is_not_loaded(tmp_path, cc):
    need_root()
    cache = private(tmp_path / "cache")
    target, marker = plant(tmp_path, cc, cache)
    os.chown(target, OTHER_UID, OTHER_UID)
    target.chmod(0o644)
    assert build(cache, cc[0]) == {"y": [0, 3, 6, 9, 12]}
    assert not marker.exists(), "code another user owns ran"
    assert target.stat().st_uid == os.geteuid() and trailer_ok(target)


def test_a_link_in_the_cache_is_not_followed(tmp_path, cc):
    cache = private(tmp_path / "cache")
    target, marker = plant(tmp_path, cc, cache)
    elsewhere = tmp_path / "elsewhere.so"
    target.rename(elsewhere)
    target.symlink_to(elsewhere)
    assert build(cache, cc[0]) == {"y": [0, 3, 6, 9, 12]}
    assert not marker.exists(), "code behind a link ran"
    assert not target.is_symlink() and trailer_ok(target)


# --------------------------------------------------------------------------
# directories that are not private


def refused(result, cache):
    assert "error" in result, f"a cache directory that is not private was used: {result}"
    message = result["error"]
    assert str(cache) in message and "private" in message and "TACK_CACHE_DIR" in message, message
    return message


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o770, 0o730], ids=["shared 1777", "0777", "group 0770",
                                                                     "group-writable 0730"])
def test_a_cache_directory_others_can_write_is_refused(tmp_path, cc, mode):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(mode)
    message = refused(build(cache, cc[0]), cache)
    assert f"mode {mode:04o}" in message
    assert calls(cc[1]) == 0  # nothing was compiled into it either


def test_a_planted_object_in_a_shared_cache_does_not_run(tmp_path, cc):
    # The case as an attacker sets it up: a shared 1777 cache, the object
    # under the predicted name, owned by its planter where we can say so.
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o1777)
    target, marker = plant(tmp_path, cc, cache)
    if os.geteuid() == 0:
        os.chown(target, OTHER_UID, OTHER_UID)
    refused(build(cache, cc[0]), cache)
    assert not marker.exists(), "planted code ran"


def test_a_cache_directory_of_another_user_is_refused(tmp_path, cc):
    need_root()
    cache = private(tmp_path / "theirs")
    os.chown(cache, OTHER_UID, OTHER_UID)
    message = refused(build(cache, cc[0]), cache)
    assert f"uid {OTHER_UID}" in message


def test_a_cache_directory_inside_one_others_can_write_is_refused(tmp_path, cc):
    # Whoever can write the parent can rename the cache away and put their
    # own in its place, unless the parent is sticky (as /tmp is).
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)
    cache = private(parent / "cache")
    message = refused(build(cache, cc[0]), cache)
    assert str(parent) in message
    parent.chmod(0o1777)
    assert build(cache, cc[0]) == {"y": [0, 3, 6, 9, 12]}


def test_a_new_cache_directory_is_made_private(tmp_path, cc):
    old = os.umask(0)
    try:
        cache = tmp_path / "a" / "b" / "cache"
        assert build(cache, cc[0]) == {"y": [0, 3, 6, 9, 12]}
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    # Those above it are not open to others either, whatever the umask.
    assert not (tmp_path / "a").stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    # Nor what is stored in it.
    obj = cached_object(cache)
    assert not obj.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)


# --------------------------------------------------------------------------
# what a key holds: an upgraded ocloc compiles again

LEVEL_ZERO_BUILD = r"""
import ctypes, json, os, sys
import tack
ocloc = ctypes.CDLL(os.environ["TACK_OCLOC_LIBRARY"])
ocloc.tack_sim_ocloc_stats.restype = ctypes.c_longlong
k = tack.Kernel("void fill(tack_index i, float v, float *y) { y[i] = v; }", device="level_zero")
compiles = ocloc.tack_sim_ocloc_stats(b"invocations")
cache = os.environ["TACK_CACHE_DIR"]
print(json.dumps({"compiled": compiles > 1, "spirv": sorted(f for f in os.listdir(cache) if f.endswith(".spv"))}))
"""


def test_the_spirv_key_holds_the_ocloc_version(tmp_path):
    import simdriver
    libraries = {}
    for name in ("level_zero", "ocloc"):
        libraries[name], why_not = simdriver.build(name, tmp_path)
        if libraries[name] is None:
            pytest.skip(why_not)
    cache = tmp_path / "cache"

    def build_with(version):
        env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_LEVEL_ZERO_LIBRARY=libraries["level_zero"],
                   TACK_OCLOC_LIBRARY=libraries["ocloc"], TACK_SIM_OCLOC_VERSION=version)
        r = subprocess.run([sys.executable, "-c", LEVEL_ZERO_BUILD], env=env, capture_output=True, text=True,
                           timeout=LIMIT)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)

    # The version query is one invocation; a compile is another.
    first = build_with("25.18.33578")
    assert first["compiled"] and len(first["spirv"]) == 1, first
    again = build_with("25.18.33578")
    assert not again["compiled"] and again["spirv"] == first["spirv"], again
    # The same libocloc file, upgraded in place: not the old SPIR-V.
    upgraded = build_with("25.31.34666")
    assert upgraded["compiled"] and len(upgraded["spirv"]) == 2, upgraded


SAME_SOURCE_TWICE = r"""
import json, os, sys
import tack
y = tack.zeros(5, tack.i32)
first = tack.Kernel(sys.argv[1])
first(y)
seen = [sorted(f for f in os.listdir(os.environ["TACK_CACHE_DIR"]) if f.endswith(".so"))]
# The same source again in this process, once as it was and once with
# other compiler flags: the object's name remembered for the first must
# serve only the first.
tack.Kernel(sys.argv[1])(y)
seen.append(sorted(f for f in os.listdir(os.environ["TACK_CACHE_DIR"]) if f.endswith(".so")))
os.environ["TACK_CFLAGS"] = "-DTACK_TEST_OTHER_FLAGS=1"
tack.Kernel(sys.argv[1])(y)
seen.append(sorted(f for f in os.listdir(os.environ["TACK_CACHE_DIR"]) if f.endswith(".so")))
print(json.dumps({"seen": seen, "y": y.to_numpy().tolist()}))
"""


def test_a_source_built_again_in_one_process_is_named_by_all_it_was_built_with(tmp_path, cc):
    """A new Kernel of a source already built in the process reuses its
    object's name, but only for the same compiler and flags: with other
    TACK_CFLAGS it is another object."""
    cache = private(tmp_path / "cache")
    counting, log = counting_cc(tmp_path)
    env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_CC=counting)
    env.pop("TACK_CFLAGS", None)
    r = subprocess.run([sys.executable, "-c", SAME_SOURCE_TWICE, KERNEL], env=env, capture_output=True, text=True,
                       timeout=LIMIT)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    first, again, other_flags = result["seen"]
    assert len(first) == 1 and again == first, result
    assert len(other_flags) == 2 and set(first) < set(other_flags), result
    assert result["y"] == [0, 3, 6, 9, 12]
    assert calls(log) == 2, "one compile for each set of flags, none for the source built again"
