"""`python -m tack`: what a bug report about Tack needs (tack.show_config()).

With options, what a C or C++ build needs to use the libtack this package
carries (the one `import tack` uses):
  --cflags      the compiler flags (the include directory)
  --libs        the linker flags (libtack.so.<abi> and a run path to it)
  --cmake-dir   the directory of TackConfig.cmake (Tack_DIR, or put it in
                CMAKE_PREFIX_PATH) for find_package(Tack)
  --include-dir, --library-dir   the two directories alone
"""

import sys

OPTIONS = ("--cflags", "--libs", "--cmake-dir", "--include-dir", "--library-dir")


def main(argv: list[str]) -> int:
    if not argv:
        from tack._config import show_config

        show_config()
        return 0
    unknown = [a for a in argv if a not in OPTIONS]
    if unknown:
        print(f"python -m tack: unknown option {unknown[0]}; use {', '.join(OPTIONS)} or none "
              "(a report for bug reports)", file=sys.stderr)
        return 2
    from tack import _build

    facts = {"--cflags": _build.cflags, "--libs": _build.libs, "--cmake-dir": _build._cmake_dir,
             "--include-dir": _build.get_include, "--library-dir": _build.get_library_dir}
    print(" ".join(facts[a]() for a in argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
