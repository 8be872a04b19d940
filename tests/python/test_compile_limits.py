"""A C compiler that never finishes cannot hang Tack: a compile runs against
a time limit (TACK_COMPILE_TIMEOUT), a question put to a compiler (zig's
version, `--version` for the report) against a shorter one, and Ctrl-C
sent to the Python process stops the compiler at once. Whatever is stopped
goes with everything it started, reaped, leaving nothing in the cache.

The compiler is a script that records its own process id and its child's,
then waits for good. Each case runs in a child interpreter that makes
itself the subreaper of what its children leave behind
(PR_SET_CHILD_SUBREAPER), so that it can tell a compiler Tack reaped from
one left a zombie, and a child of the compiler killed from one left
running."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import tack  # noqa: F401  (the child imports the same package)

# How long a case's child may take before it counts as hung.
LIMIT = 30

HANGING_COMPILER = """\
#!/bin/sh
# A compiler that never finishes: it waits for a child of its own.
dir=$(dirname "$0")
sleep 600 &
echo $! > "$dir/child.pid"
echo $$ > "$dir/leader.pid"
wait
"""

PRELUDE = r"""
import ctypes, json, os, sys, threading, time
# What the compiler leaves when it goes comes to this process.
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
import tack

HERE = sys.argv[1]

def pid(name):
    with open(os.path.join(HERE, name)) as f:
        return int(f.read())

def running(p):
    try:
        with open(f"/proc/{p}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

def aftermath():
    # Reaps, for up to 2 s, whatever of the compiler came to this process;
    # what is still running then was left behind.
    reaped, deadline = {}, time.monotonic() + 2
    while True:
        try:
            p, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if p:
            reaped[p] = status
        elif time.monotonic() > deadline:
            break
        else:
            time.sleep(0.01)
    leader, child = pid("leader.pid"), pid("child.pid")
    cache = os.environ["TACK_CACHE_DIR"]
    return {"leader_reaped_by_tack": leader not in reaped and not os.path.exists(f"/proc/{leader}"),
            "child_running": running(child), "child_signalled": os.WIFSIGNALED(reaped.get(child, 0)),
            "left": sorted(reaped.keys() - {child}), "cache": sorted(os.listdir(cache)) if os.path.isdir(cache) else []}

def report(**facts):
    print(json.dumps(facts), flush=True)

KERNEL = "void fill(tack_index i, float v, float *y) { y[i] = v; }"
"""


# A build that fails: how long it took, its message, and what it left.
TIMED_BUILD = """
t = time.monotonic()
try:
    tack.Kernel(KERNEL)
except RuntimeError as e:
    report(after=time.monotonic() - t, message=str(e), **aftermath())
"""


def environment(tmp_path, **variables):
    env = {k: v for k, v in os.environ.items() if k not in ("TACK_CC", "TACK_CFLAGS", "TACK_COMPILE_TIMEOUT")}
    env["TACK_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(variables)
    return env


def hanging_compiler(tmp_path):
    cc = tmp_path / "hanging-cc"
    cc.write_text(HANGING_COMPILER)
    cc.chmod(0o755)
    return str(cc)


def start(tmp_path, body, env):
    return subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(body), str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    try:
        out, err = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the child hung for {LIMIT} s: {out}{err}")
    assert proc.returncode == 0, out + err
    return json.loads(out.strip().splitlines()[-1])


def assert_nothing_left(facts):
    assert facts["leader_reaped_by_tack"], facts
    assert not facts["child_running"] and facts["child_signalled"], facts
    assert facts["left"] == [], facts
    # Nothing cached, no temporary file: the directory is as it was made.
    assert facts["cache"] == [], facts


def test_a_compiler_that_never_finishes_is_stopped_at_its_time_limit(tmp_path):
    cc = hanging_compiler(tmp_path)
    facts = finish(start(tmp_path, TIMED_BUILD, environment(tmp_path, TACK_CC=cc, TACK_COMPILE_TIMEOUT="0.5")))
    print(f"RuntimeError {facts['after']:.3f} s after a compile with a 0.5 s limit began")
    # The limit, then SIGTERM ends the script at once.
    assert 0.5 <= facts["after"] < 2.0, facts
    message = facts["message"]
    assert f"the C compiler ({cc})" in message and "time limit of 0.5 s" in message, message
    assert "TACK_COMPILE_TIMEOUT" in message and "nothing was cached" in message, message
    assert_nothing_left(facts)


def test_ctrl_c_stops_a_compile_at_once(tmp_path):
    # No TACK_COMPILE_TIMEOUT: the default limit is minutes away.
    cc = hanging_compiler(tmp_path)
    proc = start(tmp_path, """
        try:
            tack.Kernel(KERNEL)
        except KeyboardInterrupt:
            report(raised=time.monotonic(), **aftermath())
    """, environment(tmp_path, TACK_CC=cc))
    deadline = time.monotonic() + LIMIT
    while not (tmp_path / "leader.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)  # to the interpreter alone, not to its process group
    facts = finish(proc)
    print(f"KeyboardInterrupt {1000 * (facts['raised'] - sent):.2f} ms after SIGINT, in a compile")
    assert 0 <= facts["raised"] - sent < 1.0, facts
    assert_nothing_left(facts)


def test_other_threads_run_while_the_compiler_runs(tmp_path):
    cc = hanging_compiler(tmp_path)
    facts = finish(start(tmp_path, """
        ticks = []
        stop = threading.Event()
        def tick():
            while not stop.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.01)
        t = threading.Thread(target=tick)
        t.start()
        time.sleep(0.05)
        try:
            tack.Kernel(KERNEL)
        except RuntimeError:
            pass
        stop.set()
        t.join()
        report(longest_stall=max(b - a for a, b in zip(ticks, ticks[1:])), **aftermath())
    """, environment(tmp_path, TACK_CC=cc, TACK_COMPILE_TIMEOUT="1")))
    # Held for the compile, the GIL would stall the thread for the whole second.
    assert facts["longest_stall"] < 0.3, facts
    assert_nothing_left(facts)


def test_a_zig_that_does_not_answer_its_version_is_stopped(tmp_path):
    # No compiler on PATH, and a ziglang module whose `version` never answers.
    (tmp_path / "bin").mkdir()
    zig = tmp_path / "modules" / "ziglang"
    zig.mkdir(parents=True)
    (zig / "__init__.py").write_text("")
    (zig / "__main__.py").write_text(textwrap.dedent(f"""
        import os, subprocess, time
        child = subprocess.Popen([{shutil.which("sleep")!r}, "600"])
        open({str(tmp_path / "child.pid")!r}, "w").write(str(child.pid))
        open({str(tmp_path / "leader.pid")!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """))
    env = environment(tmp_path, PATH=str(tmp_path / "bin"), PYTHONPATH=str(tmp_path / "modules"),
                      TACK_COMPILE_TIMEOUT="1")
    facts = finish(start(tmp_path, TIMED_BUILD, env))
    assert 1.0 <= facts["after"] < 3.0, facts
    assert "-P -m ziglang cannot run zig (no answer to version within 1 s; it was stopped)" in facts["message"], facts
    assert_nothing_left(facts)


def test_the_report_says_a_compiler_did_not_answer_its_version(tmp_path):
    cc = hanging_compiler(tmp_path)
    env = environment(tmp_path, TACK_CC=cc, TACK_COMPILE_TIMEOUT="0.5")
    t = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "tack"], env=env, capture_output=True, text=True, timeout=LIMIT)
    after = time.monotonic() - t
    assert run.returncode == 0, run.stderr
    cpu = " ".join(run.stdout.split("\n\ncpu ")[1].split("\n\n")[0].split())
    assert f"C compiler (no answer to --version within 0.5 s; it was stopped) {cc}" in cpu, cpu
    assert after < 10, after


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "1e400", "5 s"])
def test_a_time_limit_that_is_not_a_number_of_seconds_is_refused(tmp_path, value):
    run = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        try:
            tack.Kernel(KERNEL)
        except RuntimeError as e:
            print(e)
    """), str(tmp_path)], env=environment(tmp_path, TACK_COMPILE_TIMEOUT=value), capture_output=True, text=True,
        timeout=LIMIT)
    assert run.returncode == 0, run.stderr
    assert f"TACK_COMPILE_TIMEOUT={value} is not a number of seconds" in run.stdout, run.stdout
    assert "0 for no limit" in run.stdout, run.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_gcc_stopped_at_its_limit_leaves_no_temporary_file(tmp_path):
    # A header that is a FIFO nobody writes: gcc's cc1 waits to open it for
    # good, as on a dead network mount, with the assembly file it made
    # already in TMPDIR. gcc deletes it on SIGTERM; SIGKILL alone would
    # leave it there.
    fifo = tmp_path / "never.h"
    os.mkfifo(fifo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    gcc = shutil.which("gcc")
    facts = finish(start(tmp_path, f"""
        t = time.monotonic()
        try:
            tack.Kernel('#include "{fifo}"\\n' + KERNEL)
        except RuntimeError as e:
            report(after=time.monotonic() - t, message=str(e), tmp=os.listdir({str(tmp)!r}),
                   cache=os.listdir(os.environ["TACK_CACHE_DIR"]))
    """, environment(tmp_path, TACK_CC=gcc, TACK_COMPILE_TIMEOUT="1", TMPDIR=str(tmp))))
    assert f"the C compiler ({gcc}) did not finish within its time limit of 1 s" in facts["message"], facts
    assert facts["tmp"] == [] and facts["cache"] == [], facts
    assert facts["after"] < 3.0, facts
