"""docs/environment.rst lists every TACK_* variable the code reads, and
nothing else: each of its three tables against the source it describes."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "environment.rst"

# How the code reads a variable: C's getenv (and secure_getenv), Python's
# os.environ / os.getenv, and the simulated drivers' own helpers, which
# take the name as a literal.
C_READ = re.compile(r'\b(?:secure_)?getenv\s*\(\s*"(TACK_\w+)"')
PY_READ = re.compile(r'\bos\.(?:environ\.get|getenv|environ\.setdefault)\s*\(\s*["\'](TACK_\w+)["\']'
                     r'|\bos\.environ\s*\[\s*["\'](TACK_\w+)["\']\s*\]')
SIM_READ = re.compile(r'\b\w*(?:getenv|env_int|env_size)\s*\(\s*"(TACK_\w+)"')


def read_in(paths, patterns):
    found = {}
    for path in paths:
        text = path.read_text(errors="replace")
        for pattern in patterns:
            for m in pattern.finditer(text):
                name = next(g for g in m.groups() if g)
                found.setdefault(name, f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}")
    return found


def table(name):
    """The variables in the first column of the list-table named `name`."""
    text = PAGE.read_text()
    start = text.index(f":name: {name}\n")
    end = text.find(".. list-table::", start)
    rows = text[start:end if end >= 0 else len(text)]
    return set(re.findall(r"^   \* - ``(TACK_\w+)``", rows, re.M))


def files(*globs):
    return [p for g in globs for p in sorted(ROOT.glob(g)) if p.is_file()]


def check(documented, read):
    missing = {name: where for name, where in read.items() if name not in documented}
    stale = documented - set(read)
    assert not missing, f"read by the code but not in {PAGE.name}: {missing}"
    assert not stale, f"in {PAGE.name} but read nowhere: {sorted(stale)}"


def test_the_library_s_variables_are_the_table_s():
    read = read_in(files("src/**/*.c", "src/**/*.h", "include/**/*.h", "python/**/*.py"), [C_READ, PY_READ])
    assert len(read) >= 10, read  # the scan itself works
    check(table("env-library"), read)


def test_the_examples_and_tests_variables_are_the_table_s():
    read = read_in(files("examples/**/*.py", "examples/**/*.c"), [C_READ, PY_READ])
    # In the tests, only Python's reads: C getenv there is in kernels a
    # test writes, reading a variable the test itself sets.
    read.update(read_in(files("tests/python/*.py"), [PY_READ]))
    # The library's own, set by the tests, are in the first table.
    library = table("env-library")
    read = {k: v for k, v in read.items() if k not in library and not k.startswith("TACK_SIM_")}
    check(table("env-examples"), read)


def test_the_simulated_drivers_variables_are_the_table_s():
    read = read_in(files("tests/sim/*.c"), [SIM_READ])
    assert read, "no variable found in tests/sim"
    check(table("env-simulated"), read)
