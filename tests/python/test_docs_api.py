"""The C API reference lists every public function of include/tack/*.h.

docs/api/c.rst is built alone, with the settings of the site (hawkmoth
over the headers' comments), and the functions the built page documents
are compared with those the headers declare: every TACK_API declaration,
every public static inline function (python.h's, kernel.h's argument
constructors), and those a header's macro generates (tack_arg_i8 ...). A
header left out of the page, or a declaration hawkmoth cannot see, fails
here by name."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADERS = ROOT / "include" / "tack"

pytestmark = pytest.mark.not_asan(reason="builds the C reference with Sphinx; nothing there is the extension")

pytest.importorskip("hawkmoth", reason="make docs's requirements (requirements-dev.txt) are not installed")
pytest.importorskip("clang.cindex", reason="the libclang wheel (requirements-dev.txt) is not installed")


def without_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def declared_functions():
    """name -> header of every public function the headers declare."""
    found = {}
    for header in sorted(HEADERS.glob("*.h")):
        text = without_comments(header.read_text())
        code = re.sub(r"^#define\b(?:.*\\\n)*.*$", "", text, flags=re.M)  # outside macros
        names = re.findall(r"\bTACK_API\b[^;{]*?\b(tack_\w+)\s*\(", code)
        names += re.findall(r"\bstatic\s+inline\b[^;{]*?\b(tack_\w+)\s*\(", code)
        # Functions a macro defines, named by pasting an argument on.
        for m in re.finditer(r"^#define\s+(\w+)\(([^)]*)\)((?:.*\\\n)*.*)$", text, re.M):
            params = [p.strip() for p in m.group(2).split(",")]
            paste = re.search(r"\bstatic\s+inline\b[^;{]*?\b(tack_\w*)\s*##\s*(\w+)\s*\(", m.group(3))
            if paste and paste.group(2) in params:
                k = params.index(paste.group(2))
                for use in re.finditer(r"^%s\(([^)]*)\)" % m.group(1), code, re.M):
                    names.append(paste.group(1) + use.group(1).split(",")[k].strip())
        for name in names:
            if not name.endswith("_"):  # a trailing underscore marks a header's private helper
                found.setdefault(name, header.name)
    return found


def test_the_header_scan_finds_the_api():
    found = declared_functions()
    for name in ("tack_array_empty", "tack_kernel_launch_nd", "tack_py_import", "tack_arg_array", "tack_arg_i8",
                 "tack_arg_c128", "tack_kernel_set_interrupt", "tack_array_release"):
        assert name in found, name
    assert len(found) > 120


@pytest.fixture(scope="module")
def built_reference(tmp_path_factory):
    src = tmp_path_factory.mktemp("c-reference")
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'docs' / '_ext')!r})\n"
        "import tack_headers\n"
        f"globals().update(tack_headers.hawkmoth_config({str(ROOT)!r}))\n"
        "extensions = ['sphinx.ext.autodoc', 'hawkmoth', 'tack_docs']\n"
        "suppress_warnings = ['ref.doc', 'toc.not_included']\n")
    (src / "index.rst").write_text((ROOT / "docs" / "api" / "c.rst").read_text())
    out = src / "html"
    r = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(src), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return (out / "index.html").read_text()


def test_every_public_function_is_in_the_c_reference(built_reference):
    documented = set(re.findall(r'id="c\.(tack_\w+)"', built_reference))
    missing = {name: header for name, header in declared_functions().items() if name not in documented}
    assert not missing, f"public functions missing from docs/api/c.rst's built page: {missing}"


def test_the_reference_carries_the_headers_comments(built_reference):
    """The text comes from the comments, not retyped: a sentence of a
    header comment appears on the page."""
    text = re.sub(r"<[^>]+>", "", built_reference)
    assert "On error *out is untouched" in text.replace("\n", " ")
