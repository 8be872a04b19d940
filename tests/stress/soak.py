"""The long lifetime soak: the engine of tests/python/test_soak.py run for
1,000,000 exchanges (after a warm-up), mixing both DLPack versions, NumPy,
PyTorch and Tack, reshape chains and random drop orders.

Passes when every producer was released, Tack's live counters are back
where they started and resident memory grew less than --rss-limit-kib
(4 MiB by default); prints the figures either way.

    python tests/stress/soak.py [--exchanges N] [--seed S] [--no-rss]
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))

from test_soak import check, soak  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rss-limit-kib", type=int, default=4096)
    parser.add_argument("--no-rss", action="store_true", help="do not judge resident memory (under valgrind)")
    args = parser.parse_args()
    figures = soak(args.exchanges, seed=args.seed, warmup=min(20000, max(1000, args.exchanges // 20)))
    print(
        f"soak: {figures['exchanges']} exchanges ({figures['legacy']} legacy, {figures['versioned']} versioned "
        f"in all), {figures['origins_made']} NumPy/PyTorch producers, all released: "
        f"{figures['origins_freed'] == figures['origins_made']}; resident memory growth "
        f"{figures['rss_growth_kib']} KiB; {figures['seconds']:.1f} s; live counts {figures['counts_after']}"
    )
    print("soak figures: " + json.dumps(figures))
    try:
        check(figures, rss_limit_kib=1 << 40 if args.no_rss else args.rss_limit_kib)
    except AssertionError as exc:
        print(f"soak: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
