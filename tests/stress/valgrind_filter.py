"""Reads valgrind --xml reports and fails on any error that involves Tack.

A run of Python with NumPy and PyTorch under valgrind reports errors in the
interpreter and in those libraries that are not ours; an error counts here
when one frame of its stack (for a leak: of the allocation's stack) is in
Tack: a function named tack_*, or code from the _tack extension or libtack.

    python tests/stress/valgrind_filter.py report.xml [...]
"""

import sys
import xml.etree.ElementTree as ET


# Memory still pointed at (or into) at exit: static state made once, such
# as the module's types and interned names, which is not a leak.
NOT_ERRORS = {"Leak_PossiblyLost", "Leak_StillReachable"}


def tack_frame(frame):
    fn = frame.findtext("fn") or ""
    obj = frame.findtext("obj") or ""
    return fn.startswith("tack_") or "/_tack." in obj or "libtack" in obj


def describe(error):
    kind = error.findtext("kind")
    what = error.findtext("what") or error.findtext("xwhat/text") or ""
    frames = []
    for frame in error.iter("frame"):
        fn = frame.findtext("fn") or frame.findtext("ip")
        where = frame.findtext("file")
        line = frame.findtext("line")
        frames.append(f"    {fn}" + (f" ({where}:{line})" if where else ""))
    return f"{kind}: {what}\n" + "\n".join(frames[:12])


def main(paths):
    ours, others = [], 0
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            print(f"valgrind: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        for error in root.iter("error"):
            if error.findtext("kind") in NOT_ERRORS:
                continue
            if any(tack_frame(f) for f in error.iter("frame")):
                ours.append(describe(error))
            else:
                others += 1
    for text in ours:
        print(text, file=sys.stderr)
    print(f"valgrind: {len(ours)} errors involving Tack; {others} elsewhere (interpreter, NumPy, PyTorch) ignored")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
