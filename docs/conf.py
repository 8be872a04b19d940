"""Sphinx configuration of Tack's documentation (make docs)."""
import os
import pathlib
import sys

import tack

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

import tack_headers  # noqa: E402

project = "Tack"
author = "the Tack authors"
copyright = "the Tack authors"
release = version = tack.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx_gallery.gen_gallery",
    "hawkmoth",
    "tack_docs",
]

html_theme = "furo"
html_title = f"Tack {release}"
html_static_path = []
templates_path = []
exclude_patterns = ["_build", "tutorials/*.ipynb", "tutorials/*.py.md5", "tutorials/*.zip"]
nitpicky = True
default_role = "code"
highlight_language = "none"

# ---- the Python reference: autodoc over the built extension's docstrings
autodoc_default_options = {"members": True, "undoc-members": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"

# ---- the C reference: hawkmoth over the headers, comments marked as docs
globals().update(tack_headers.hawkmoth_config(ROOT))

# Types the reference names but does not define: C's and Python's own.
nitpick_ignore_regex = [
    ("c:identifier", r"u?int(8|16|32|64)_t|u?intptr_t|size_t|ptrdiff_t|bool|FILE"),
    ("c:identifier", r"Py\w+"),
]

# ---- tutorials: scripts under examples/tutorials, run by the build
sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples" / "tutorials")],
    "gallery_dirs": ["tutorials"],
    "filename_pattern": r"/tutorial_",
    "ignore_pattern": r"__init__\.py",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "image_scrapers": ("matplotlib",),
    "remove_config_comments": True,
    "show_memory": False,
    "show_signature": False,
    "reset_modules": ("matplotlib",),
    "min_reported_time": 1000,
}
os.environ.setdefault("MPLBACKEND", "Agg")
