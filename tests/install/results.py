"""The tally the install checks share: one line per failure, then a
closing "<what>: N passed, M failed" line."""

passed = 0
failed = []


def check(name, ok, detail=""):
    """Counts one check; a failure prints its name and what was seen."""
    global passed
    if ok:
        passed += 1
    else:
        failed.append(name)
        print(f"FAIL {name}" + (f"\n{detail}" if detail else ""))
    return ok


def summary(what):
    """Prints the closing line; the exit status: 1 on any failure."""
    print(f"{what}: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0
