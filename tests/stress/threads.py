"""The long thread run: the workers of tests/python/test_threads.py (eight
Python threads exchanging with NumPy and PyTorch, handing objects to each
other and launching kernels) for --seconds (10 by default), then the
native-thread deleter rounds.

    python tests/stress/threads.py [--seconds S] [--threads N]
"""

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))

import tack  # noqa: E402
from test_threads import build_helper, check, native_round, run_threads  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    figures = run_threads(args.seconds, threads=args.threads)
    print(
        f"threads: {figures['threads']} threads for {figures['seconds']:.0f} s: {figures['exchanges']} exchanges, "
        f"{figures['launches']} kernel launches, {figures['taken']} hand-offs between threads; "
        f"live counts {figures['before']} -> {figures['after']}; errors {len(figures['errors'])}"
    )
    try:
        check(figures)
        before = dict(tack._tack.live_counts())
        with tempfile.TemporaryDirectory() as directory:
            helper = build_helper(directory)
            for _ in range(50):
                native_round(helper, per_source=64, threads=args.threads)
        after = dict(tack._tack.live_counts())
        assert after == before, f"native-thread deleters left {after} (before {before})"
        print(f"threads: 50 rounds of {3 * 64} exports deleted from {args.threads} native threads; counts balanced")
    except BaseException as exc:  # noqa: BLE001 -- report whatever broke
        print(f"threads: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
