"""Sphinx glue for Tack's pages: docstrings and header comments are prose,
shown as written (see tack_headers.plain_text)."""
from tack_headers import plain_text


def _docstring(app, what, name, obj, options, lines):
    lines[:] = plain_text(list(lines))


def _header_comment(app, lines, transform, options):
    lines[:] = plain_text(list(lines))


def setup(app):
    app.connect("autodoc-process-docstring", _docstring)
    app.connect("hawkmoth-process-docstring", _header_comment)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
