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
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time

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


def build(cache, cc, source=KERNEL, script=BUILD, **extra):
    env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_CC=cc)
    env.pop("TACK_CFLAGS", None)
    env.pop("TACK_CACHE_MAX", None)
    env.update(extra)
    try:
        proc = subprocess.run([sys.executable, "-c", script, source], env=env, capture_output=True, text=True,
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


def trailer(name, body):
    """The trailer the cache writes after a file's bytes (see
    src/kernel/store.c): their size, the SHA-256 of the file's name (the
    digest of its whole key) and their SHA-256."""
    return b"tack-cache-2 %020d %s %s\n" % (len(body), hashlib.sha256(name.encode()).hexdigest().encode(),
                                             hashlib.sha256(body).hexdigest().encode())


TRAILER_SIZE = len(trailer("", b""))


def trailer_ok(path):
    data = path.read_bytes()
    body, tail = data[:-TRAILER_SIZE], data[-TRAILER_SIZE:]
    return tail == trailer(path.name, body)


def with_trailer(data, name):
    return data + trailer(name, data)


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
    target.write_bytes(with_trailer(so.read_bytes(), name))
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


SPIRV_BUILD = r"""
import ctypes, json, os, sys
import tack
ocloc = ctypes.CDLL(os.environ["TACK_OCLOC_LIBRARY"])
ocloc.tack_sim_ocloc_stats.restype = ctypes.c_longlong
k = tack.Kernel(sys.argv[1], device="level_zero")
cache = os.environ["TACK_CACHE_DIR"]
print(json.dumps({"compiled": ocloc.tack_sim_ocloc_stats(b"invocations") > 1,
                  "spirv": sorted(f for f in os.listdir(cache) if f.endswith(".spv"))}))
"""


def test_spirv_copied_over_another_kernels_is_compiled_again(tmp_path):
    """The GPU caches' files are bound to their keys as the host objects
    are: one kernel's SPIR-V under another's name is not used for it."""
    import simdriver
    libraries = {}
    for name in ("level_zero", "ocloc"):
        libraries[name], why_not = simdriver.build(name, tmp_path)
        if libraries[name] is None:
            pytest.skip(why_not)
    cache = private(tmp_path / "cache")
    env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_LEVEL_ZERO_LIBRARY=libraries["level_zero"],
               TACK_OCLOC_LIBRARY=libraries["ocloc"])
    env.pop("TACK_CACHE_MAX", None)

    def build_spirv(source):
        r = subprocess.run([sys.executable, "-c", SPIRV_BUILD, source], env=env, capture_output=True, text=True,
                           timeout=LIMIT)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)

    first = build_spirv("void fill(tack_index i, float v, float *y) { y[i] = v; }")
    both = build_spirv("void twice(tack_index i, float v, float *y) { y[i] = 2 * v; }")
    assert first["compiled"] and both["compiled"] and len(both["spirv"]) == 2, both
    (other,) = set(both["spirv"]) - set(first["spirv"])
    (cache / other).write_bytes((cache / first["spirv"][0]).read_bytes())
    again = build_spirv("void twice(tack_index i, float v, float *y) { y[i] = 2 * v; }")
    assert again["compiled"], "another kernel's SPIR-V was used"
    assert trailer_ok(cache / other)


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


# --------------------------------------------------------------------------
# the compiler's command line: every word of TACK_CC and TACK_CFLAGS

VALUE_KERNEL = """
#ifndef VALUE
#define VALUE 1
#endif
void value(tack_index i, int32_t *y) { y[i] = VALUE; }
"""


def test_long_tack_cc_and_tack_cflags_reach_the_compiler_whole(tmp_path):
    # 32 words of TACK_CC and 7 of TACK_CFLAGS overran the command line
    # (a stack overflow); a 17th word of TACK_CFLAGS was dropped unsaid.
    cache = private(tmp_path / "cache")
    long_cc = "cc" + " -w" * 31
    assert build(cache, long_cc, VALUE_KERNEL, TACK_CFLAGS=" ".join(["-w"] * 7)) == {"y": [1] * 5}
    for words in (17, 40):
        flags = " ".join(["-w"] * (words - 1) + [f"-DVALUE={words}"])
        assert build(cache, long_cc, VALUE_KERNEL, TACK_CFLAGS=flags) == {"y": [words] * 5}, words


# --------------------------------------------------------------------------
# a cache directory reached through a link that changes


def test_a_link_retargeted_during_a_build_does_not_redirect_it(tmp_path):
    """TACK_CACHE_DIR a link to a private directory, retargeted once the
    build has begun (here by the compiler itself, so the race is won every
    time): the object is written into, and loaded from, the directory that
    was checked, and nothing lands in the new target."""
    checked, other = private(tmp_path / "checked"), private(tmp_path / "other")
    link = tmp_path / "cache-link"
    link.symlink_to(checked)
    swapping = tmp_path / "cc-swapping"
    swapping.write_text(f'#!/bin/sh\nln -sfn "{other}" "{link}"\nexec cc "$@"\n')
    swapping.chmod(0o755)
    assert build(link, str(swapping)) == {"y": [0, 3, 6, 9, 12]}
    assert os.readlink(link) == str(other), "the compiler did not retarget the link"
    assert os.listdir(other) == [], "files were written through the retargeted link"
    assert trailer_ok(cached_object(checked))


# --------------------------------------------------------------------------
# an object bound to its key

OTHER_KERNEL = "void times5(tack_index i, int32_t *y) { y[i] = (int32_t)i * 5; }"


def test_an_object_copied_over_another_kernels_is_rebuilt(tmp_path, cc):
    script, log = cc
    cache = private(tmp_path / "cache")
    assert build(cache, script) == {"y": [0, 3, 6, 9, 12]}
    first = cached_object(cache)
    assert build(cache, script, OTHER_KERNEL) == {"y": [0, 5, 10, 15, 20]}
    second = [cache / f for f in os.listdir(cache) if f.endswith(".so") and cache / f != first]
    assert len(second) == 1 and calls(log) == 2
    second[0].write_bytes(first.read_bytes())  # whole, with a trailer that matches its bytes
    assert build(cache, script, OTHER_KERNEL) == {"y": [0, 5, 10, 15, 20]}
    assert calls(log) == 3 and trailer_ok(second[0])
    assert build(cache, script) == {"y": [0, 3, 6, 9, 12]} and calls(log) == 3


# --------------------------------------------------------------------------
# memory and disk held for good

MANY_SOURCES = r"""
import gc, json, os, sys
import tack

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

pad = "/* " + "x" * (1 << 20) + " */\n"
y = tack.zeros(4, tack.i32)

def attempt(n):
    try:
        tack.Kernel(f"void big{n}(tack_index i, int32_t *y) {{ y[i] = {n}; }}\n" + pad)(y)
    except RuntimeError:
        pass

for n in range(3):
    attempt(n)
gc.collect()
before = rss()
for n in range(3, 303):
    attempt(n)
gc.collect()
print(json.dumps({"before": before, "after": rss()}))
"""


def test_sources_of_kernels_gone_are_not_kept(tmp_path):
    """300 kernels of 1 MiB sources (each refused by a compiler that fails,
    so that nothing else is kept): the process keeps at most the memo's
    16 MiB of them, not every source it has seen."""
    cache = private(tmp_path / "cache")
    result = build(cache, "false", "", script=MANY_SOURCES)
    grown = (result["after"] - result["before"]) / (1 << 20)
    print(f"RSS before {result['before'] / (1 << 20):.1f} MiB, after 300 x 1 MiB sources "
          f"{result['after'] / (1 << 20):.1f} MiB: +{grown:.1f} MiB")
    assert grown < 48, f"the process kept {grown:.0f} MiB after 300 kernels of 1 MiB sources were dropped"


SEVERAL_KERNELS = r"""
import json, os, sys
import tack

cache = os.environ["TACK_CACHE_DIR"]
y = tack.zeros(4, tack.i32)

def source(n):
    return f"void k{n}(tack_index i, int32_t *y) {{ y[i] = {n}; }}"

def size():
    return sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache))

def objects():
    return sorted(f for f in os.listdir(cache) if f.endswith(".so"))

tack.Kernel(source(0))(y)
first = objects()
sizes, alive = [], []
for n in range(1, 7):
    # The first kernel used again before each new one: the most recently
    # used, it is never the one evicted.
    tack.Kernel(source(0))(y)
    alive.append(tack.Kernel(source(n)))
    sizes.append(size())
# Each loaded while the others stay loaded, each runs its own code.
ran = []
for k in alive:
    k(y)
    ran.append(y.to_numpy().tolist()[0])
print(json.dumps({"sizes": sizes, "first": first, "objects": objects(), "ran": ran,
                  "object_size": os.path.getsize(os.path.join(cache, first[0]))}))
"""


@pytest.mark.parametrize("written", ["{k}K", "{k}k", "{bytes}"])
def test_the_cache_keeps_to_tack_cache_max(tmp_path, cc, written):
    script, log = cc
    cache = private(tmp_path / "cache")
    # Room for about three objects with their sources.
    probe = private(tmp_path / "probe")
    assert build(probe, script) == {"y": [0, 3, 6, 9, 12]}
    one = sum(f.stat().st_size for f in probe.iterdir())
    bound = (3 * one + one // 2) // 1024 * 1024
    value = written.format(k=bound // 1024, bytes=bound)
    result = build(cache, script, "", script=SEVERAL_KERNELS, TACK_CACHE_MAX=value)
    print(f"one object with its source {one} bytes, TACK_CACHE_MAX={value}; cache sizes {result['sizes']}")
    assert max(result["sizes"]) <= bound, result
    assert result["ran"] == [1, 2, 3, 4, 5, 6], result
    assert result["first"][0] in result["objects"], "the most recently used object was evicted"
    # Older ones went (sources first, the oldest files): 7 objects were made.
    assert 2 <= len(result["objects"]) <= bound // result["object_size"] < 7, result


@pytest.mark.parametrize("value", ["lots", "12Q", "-5", "1.5G", "99999999999999999999G"])
def test_a_malformed_tack_cache_max_is_refused(tmp_path, cc, value):
    cache = private(tmp_path / "cache")
    result = build(cache, cc[0], TACK_CACHE_MAX=value)
    assert "TACK_CACHE_MAX" in result.get("error", "") and value in result["error"], result
    assert calls(cc[1]) == 0


def test_temporary_files_of_writers_that_died_are_removed(tmp_path, cc):
    """What a killed compile leaves under a temporary name counts against
    no bound and is never used: removed once a day old, when a file is
    stored. A fresh one (a compile under way) and a file that only looks
    alike are left alone."""
    cache = private(tmp_path / "cache")
    day = 24 * 3600
    names = {"tmp-4242-0-1f2e.so": 2 * day, "tmp-4242-1-1f2f.c": 2 * day, "tmp-4242-2-1f30.part": 2 * day,
             "tmp-4243-0-aa.so": 60, "tmp-notes.txt": 2 * day}
    now = time.time()
    for name, age in names.items():
        (cache / name).write_bytes(b"x" * 4096)
        os.utime(cache / name, (now - age, now - age))
    assert build(cache, cc[0]) == {"y": [0, 3, 6, 9, 12]}
    left = sorted(f for f in os.listdir(cache) if f.startswith("tmp-"))
    assert left == ["tmp-4243-0-aa.so", "tmp-notes.txt"], left


# --------------------------------------------------------------------------
# compiles that fail for reasons other than the source


def test_a_compiler_that_writes_nothing_is_named(tmp_path):
    cache = private(tmp_path / "cache")
    result = build(cache, "true")
    message = result.get("error", "")
    assert "produced no object" in message and "true" in message, result
    assert "status 0" in message and "TACK_CC" in message, message
    assert "/true -O3" in message and "-shared" in message and "-o <object> <source>" in message, message  # the command run
    assert not [f for f in os.listdir(cache) if f.startswith("tmp-")]


NO_DESCRIPTORS = r"""
import json, os, resource, sys
import tack
y = tack.zeros(5, tack.i32)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
try:
    tack.Kernel(sys.argv[1])(y)
    outcome = {"y": y.to_numpy().tolist()}
except RuntimeError as e:
    outcome = {"error": str(e)}
for fd in held:
    os.close(fd)
print(json.dumps(outcome))
"""


def test_a_compile_with_no_descriptor_free_says_so(tmp_path, cc):
    cache = private(tmp_path / "cache")
    result = build(cache, cc[0], script=NO_DESCRIPTORS)
    message = result.get("error", "")
    assert "too many open files" in message.lower() and "ulimit -n" in message, result
    assert "TACK_CACHE_DIR" not in message, message


# --------------------------------------------------------------------------
# many objects loaded at once: each is loaded through /proc/self/fd, whose
# numbers are used again once closed, and the dynamic loader answers a name
# it has seen with the object it loaded under it

MANY = r"""
import json, sys, time
import tack
n = int(sys.argv[1])
start = time.perf_counter()
kernels = [tack.Kernel(f"void k{j}(tack_index i, int32_t *y) {{ y[i] = {j} + (int32_t)i; }}") for j in range(n)]
seconds = time.perf_counter() - start
y = tack.zeros(3, tack.i32)
wrong = []
for j, k in enumerate(kernels):
    k(y)
    if y.to_numpy().tolist() != [j, j + 1, j + 2]:
        wrong.append(j)
# The same sources again while the first are alive, then once all are gone.
again = [tack.Kernel(f"void k{j}(tack_index i, int32_t *y) {{ y[i] = {j} + (int32_t)i; }}") for j in range(n)]
for j, k in enumerate(again):
    k(y)
    if y.to_numpy().tolist() != [j, j + 1, j + 2]:
        wrong.append(j)
del kernels, again, k
for j in range(n):
    tack.Kernel(f"void k{j}(tack_index i, int32_t *y) {{ y[i] = {j} + (int32_t)i; }}")(y)
    if y.to_numpy().tolist() != [j, j + 1, j + 2]:
        wrong.append(j)
print(json.dumps({"wrong": wrong, "seconds": seconds}))
"""

THREADS = r"""
import json, sys, threading
import tack
errors, wrong = [], []
def work(t):
    try:
        ks = [tack.Kernel(f"void t{t}k{j}(tack_index i, int32_t *y) {{ y[i] = {100 * t + j}; }}") for j in range(6)]
        y = tack.zeros(3, tack.i32)
        for j, k in enumerate(ks):
            k(y)
            if y.to_numpy().tolist() != [100 * t + j] * 3:
                wrong.append((t, j))
    except Exception as e:
        errors.append(str(e))
threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"errors": errors, "wrong": wrong}))
"""


def run_many(cache, script, *args, limit=300):
    # -O0: these kernels are about loading, not code; it halves each compile.
    env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_CFLAGS=f"{os.environ.get('TACK_CFLAGS', '')} -O0")
    env.pop("TACK_CACHE_MAX", None)
    try:
        proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading many kernels did not finish within {limit} s")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_two_hundred_kernels_load_at_once_from_a_cold_and_a_warm_cache(tmp_path):
    """Each distinct kernel alive at once is its own object, however many:
    built cold, loaded warm, the same sources again beside them, and again
    after all were closed."""
    cache = private(tmp_path / "cache")
    cold = run_many(cache, MANY, 200)
    assert cold["wrong"] == [], cold
    assert len([f for f in os.listdir(cache) if f.endswith(".so")]) == 200
    warm = run_many(cache, MANY, 200)
    assert warm["wrong"] == [], warm
    # Loading from the cache stays cheap per kernel however many are loaded
    # (no look through every mapping of the process per load): seconds for
    # 200 here, were it quadratic; a few hundredths when it is not.
    assert warm["seconds"] < 5, warm


def test_sixteen_threads_each_load_six_kernels_of_their_own(tmp_path):
    cache = private(tmp_path / "cache")
    for _ in ("cold", "warm"):
        result = run_many(cache, THREADS)
        assert result == {"errors": [], "wrong": []}, result


# Removes every object as soon as it is published, as another process's
# eviction does under a TACK_CACHE_MAX smaller than one object.
REMOVER = r"""
import os, sys, time
cache, stop = sys.argv[1], sys.argv[2]
removed = 0
while not os.path.exists(stop):
    for e in os.scandir(cache):
        if e.name.startswith("cpu-") and e.name.endswith(".so"):
            try:
                os.unlink(e.path)
                removed += 1
            except FileNotFoundError:
                pass
print(removed)
"""


def test_an_object_evicted_by_another_process_before_it_is_loaded_is_loaded_all_the_same(tmp_path, cc):
    """Between publishing an object and loading it, a process holds the
    store to TACK_CACHE_MAX, here by removing a directory full of older
    files (seconds): another process's eviction removes the object then.
    The build still succeeds, with the object just built."""
    cache = private(tmp_path / "cache")
    for i in range(20000):
        (cache / f"pad-{i:064x}.so").touch()
    stop = tmp_path / "stop"
    remover = subprocess.Popen([sys.executable, "-c", REMOVER, str(cache), str(stop)], stdout=subprocess.PIPE,
                               text=True)
    try:
        result = build(cache, cc[0], TACK_CACHE_MAX="1")
    finally:
        stop.touch()
        removed = remover.communicate(timeout=LIMIT)[0]
    assert result == {"y": [0, 3, 6, 9, 12]}, result
    assert int(removed) >= 1  # the object was taken away before it was loaded
    assert not [f for f in os.listdir(cache) if f.startswith("pad-")]


# --------------------------------------------------------------------------
# TACK_CPU_TARGET: code for this CPU, or for any CPU of its architecture

PORTABLE_MARCH = {"x86_64": "-march=x86-64-v2", "aarch64": "-march=armv8-a"}


def logging_cc(directory):
    """A compiler that writes each command line it is run with to a log."""
    log = directory / "cc-commands.log"
    script = directory / "cc-logging"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec cc "$@"\n')
    script.chmod(0o755)
    return str(script), log


def compiles(log):
    # Only the compiles: a compiler is also asked its version.
    return [line for line in log.read_text().splitlines() if " -o " in line] if log.exists() else []


def test_tack_cpu_target_portable_builds_baseline_code_under_its_own_key(tmp_path):
    import platform
    cache = private(tmp_path / "cache")
    cc, log = logging_cc(tmp_path)
    assert build(cache, cc) == {"y": [0, 3, 6, 9, 12]}
    native = compiles(log)
    assert len(native) == 1 and ("-march=native" in native[0].split()) == (platform.machine() in PORTABLE_MARCH)
    assert build(cache, cc, TACK_CPU_TARGET="portable") == {"y": [0, 3, 6, 9, 12]}
    portable = compiles(log)[1:]
    assert len(portable) == 1, portable  # another key: compiled again, not the native object
    words = portable[0].split()
    assert "-march=native" not in words
    if platform.machine() in PORTABLE_MARCH:
        assert PORTABLE_MARCH[platform.machine()] in words, words
    assert len([f for f in os.listdir(cache) if f.endswith(".so")]) == 2
    # Each is kept under its own key: neither is compiled again.
    assert build(cache, cc, TACK_CPU_TARGET="native") == {"y": [0, 3, 6, 9, 12]}
    assert build(cache, cc, TACK_CPU_TARGET="portable") == {"y": [0, 3, 6, 9, 12]}
    assert len(compiles(log)) == 2


@pytest.mark.parametrize("value", ["fast", "NATIVE", "x86-64-v3", " portable"])
def test_an_unknown_tack_cpu_target_is_refused(tmp_path, cc, value):
    cache = private(tmp_path / "cache")
    message = build(cache, cc[0], TACK_CPU_TARGET=value).get("error", "")
    assert f"TACK_CPU_TARGET={value} is not a target" in message, message
    assert "native" in message and "portable" in message and "valgrind" in message, message
    assert calls(cc[1]) == 0  # refused before anything is compiled


VALGRIND_RUN = r"""
import tack
k = tack.Kernel("void f(tack_index i, float a, float *y) { y[i] = a * (float)i + y[i]; }")
y = tack.zeros(4096, tack.f32)
k(2.0, y)
print("sum", float(y.to_numpy().sum()))
"""


@pytest.mark.not_asan(reason="valgrind cannot run a process built with AddressSanitizer")
@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind is not installed")
def test_portable_kernels_run_under_valgrind(tmp_path):
    """valgrind's CPU has fewer instructions than the host (no AVX-512):
    native code may stop there with SIGILL, portable code runs."""
    cache = private(tmp_path / "cache")
    env = dict(os.environ, TACK_CACHE_DIR=str(cache), TACK_CPU_TARGET="portable")
    env.pop("TACK_CFLAGS", None)
    try:
        proc = subprocess.run(["valgrind", "-q", sys.executable, "-c", VALGRIND_RUN], env=env, capture_output=True,
                              text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("a kernel under valgrind did not finish within 240 s")
    assert "Illegal opcode" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0 and f"sum {2.0 * 4095 * 4096 / 2}" in proc.stdout, proc.stderr[-3000:]
