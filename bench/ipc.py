"""Passing an array to another process and back over one Unix socket:
tack.send_array / tack.receive_array (a descriptor and a 608-byte header;
the pages are shared, not copied) against pickling a NumPy array of the
same bytes (protocol 5) over the same kind of socket, in the same run.

    python bench/ipc.py              # 1 MiB, 2,000 round trips per repeat
    python bench/ipc.py --quick      # fewer round trips
    python bench/ipc.py --mib 64     # another size

A round trip is: this process sends, the echo process receives and sends
what it got back, this process receives. "touch" variants also read every
byte on both sides once per trip (tack: to_numpy(), a copy), the cost a
consumer that reads the data pays on top; pickling has already paid it.
"""

import argparse
import os
import pickle
import socket
import struct
import subprocess
import sys
import time

import numpy as np

import tack

ECHO = r"""
import os, pickle, socket, struct, sys
import numpy as np
import tack

sock = socket.socket(fileno=int(sys.argv[1]))
mode = sys.argv[2]

def recv_exactly(n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError
        got += k
    return buf

while True:
    if mode.startswith("tack"):
        try:
            a = tack.receive_array(sock)
        except RuntimeError:
            break
        if mode == "tack-touch":
            a.to_numpy()
        tack.send_array(sock, a)
        del a
    else:
        try:
            (n,) = struct.unpack("=Q", recv_exactly(8))
        except EOFError:
            break
        x = pickle.loads(recv_exactly(n))
        data = pickle.dumps(x, protocol=5)
        sock.sendall(struct.pack("=Q", len(data)) + data)
"""


def recv_exactly(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError
        got += k
    return buf


def run(mode, nbytes, trips, repeat):
    """Best-of-`repeat` microseconds per round trip."""
    mine, theirs = socket.socketpair()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, "-c", ECHO, str(theirs.fileno()), mode], pass_fds=[theirs.fileno()],
                            env=env)
    theirs.close()
    values = np.arange(nbytes // 4, dtype=np.float32)
    a = tack.empty(values.shape, "float32", exportable=True)
    a.from_numpy(values)
    best = float("inf")
    try:
        for r in range(repeat + 1):  # the first repeat warms up
            t0 = time.perf_counter()
            for _ in range(trips):
                if mode.startswith("tack"):
                    tack.send_array(mine, a)
                    b = tack.receive_array(mine)
                    if mode == "tack-touch":
                        b.to_numpy()
                    del b
                else:
                    data = pickle.dumps(values, protocol=5)
                    mine.sendall(struct.pack("=Q", len(data)) + data)
                    (n,) = struct.unpack("=Q", recv_exactly(mine, 8))
                    pickle.loads(recv_exactly(mine, n))
            if r:
                best = min(best, (time.perf_counter() - t0) / trips * 1e6)
    finally:
        mine.close()
        proc.wait(timeout=60)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer round trips")
    parser.add_argument("--mib", type=float, default=1.0, help="array size in MiB (default 1)")
    args = parser.parse_args(argv)
    nbytes = int(args.mib * (1 << 20)) // 4 * 4
    trips = 200 if args.quick else 2000
    repeat = 3 if args.quick else 5
    print(f"round trip of a {nbytes / (1 << 20):g} MiB float32 array between two processes over a Unix socket "
          f"(best of {repeat} x {trips} trips)")
    results = {}
    for mode in ("tack", "pickle", "tack-touch"):
        results[mode] = run(mode, nbytes, trips if mode != "pickle" or nbytes <= (8 << 20) else trips // 10, repeat)
        print(f"  {mode:<11} {results[mode]:10.1f} us")
    print(f"  tack.send_array/receive_array: {results['pickle'] / results['tack']:.1f}x faster than pickling; "
          f"reading every byte on both sides as well: {results['pickle'] / results['tack-touch']:.1f}x")


if __name__ == "__main__":
    main()
