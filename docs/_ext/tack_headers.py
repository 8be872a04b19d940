"""The public headers, as the C API reference reads them.

Tack's headers document each declaration in an ordinary C comment just
above it (or after it, on the same line, for enum values and struct
members). Hawkmoth reads only documentation comments (``/**``, ``/**<``), so
the build copies include/tack/*.h into build/docs/c-headers with each such
comment marked as one, and nothing else changed: the reference is made from
the very comments the headers carry, and no text is retyped. Comments inside
function bodies and macros stay plain, since they describe code, not API.

The comments are prose, not reStructuredText: ``plain_text`` turns a comment
into reST that shows it as written (``*out``, ``name_`` and backquotes would
otherwise be markup), and the Python docstrings go through the same."""
import pathlib
import re

_COMMENT = re.compile(r"/\*(?!\*)")


def mark_comments(text):
    """`text` (a header) with its API comments opened as /** (or /**< after
    code on the same line)."""
    out = []
    stack = []  # per open brace: "extern" (C++ linkage), "aggregate" or "block"
    since = ""  # code since the last ; { or }, to tell what a brace opens
    in_comment = False
    continued_macro = False
    commented = False  # the last non-blank line ended a comment
    branches = []  # the open braces at each enclosing #if
    for line in text.split("\n"):
        is_macro = continued_macro or line.lstrip().startswith("#")
        starts_macro = not continued_macro and is_macro
        continued_macro = is_macro and line.rstrip().endswith("\\")
        # A top-level declaration without a comment of its own (the second
        # of a group under one comment) gets an empty one, so that the
        # reference lists every declaration.
        if all(e == "extern" for e in stack) and not in_comment and not commented and \
                _undocumented_start(line, starts_macro) and not _names_defined_struct(line, text):
            out.append("/** */")
        # An enum value without a comment of its own (TACK_OK) is listed too.
        if stack and stack[-1] == "aggregate" and not in_comment and not commented and not is_macro and \
                re.match(r"^\s+[A-Za-z_]\w*\s*(=[^,/]*)?,?\s*$", line):
            out.append(re.match(r"^\s*", line).group(0) + "/** */")
        if line.strip():
            commented = line.rstrip().endswith("*/") and not is_macro
        if is_macro:
            # Each branch of a conditional starts from the braces open at
            # its #if (a C and a C++ spelling of one declaration).
            directive = line.lstrip()[1:].lstrip() if starts_macro else ""
            if directive.startswith("if"):
                branches.append(list(stack))
            elif directive.startswith(("else", "elif")) and branches:
                stack[:] = branches[-1]
            elif directive.startswith("endif") and branches:
                branches.pop()
            out.append(line)
            continue
        # A top-level declaration's comment on its own line, after it:
        # moved above it, where a function's documentation goes.
        trailing = _TRAILING.match(line)
        if trailing and all(e == "extern" for e in stack) and not in_comment:
            if out and out[-1] == "/** */":
                out.pop()
            out.append("/** " + trailing.group(2).strip() + " */")
            line = trailing.group(1)
            commented = False
        result, i = [], 0
        while i < len(line):
            if in_comment:
                end = line.find("*/", i)
                if end < 0:
                    result.append(line[i:])
                    i = len(line)
                else:
                    result.append(line[i:end + 2])
                    i = end + 2
                    in_comment = False
                continue
            if line.startswith("/*", i):
                documented = "block" not in stack
                code_before = line[:i].strip() != ""
                if documented and not line.startswith("/**", i):
                    result.append("/**<" if code_before else "/**")
                    i += 2
                else:
                    result.append("/*")
                    i += 2
                in_comment = True
                continue
            if line.startswith("//", i):
                result.append(line[i:])
                break
            c = line[i]
            if c == "{":
                stack.append("extern" if "extern" in since else
                             "aggregate" if re.search(r"\b(struct|enum|union)\b", since) else "block")
                since = ""
            elif c == "}":
                if stack:
                    stack.pop()
                since = ""
            elif c == ";":
                since = ""
            else:
                since += c
            result.append(c)
            i += 1
        since += " "
        out.append("".join(result))
    return "\n".join(out)


_TRAILING = re.compile(r"^(\S.*;)\s*/\*(?!\*)(.*)\*/\s*$")
_DECLARATION = re.compile(r"^(typedef|TACK_API|static inline)\b")
_CONSTANT = re.compile(r"^#define (TACK_\w+) \S")


def _names_defined_struct(line, text):
    """A typedef naming a struct the header defines: the struct is the entry."""
    m = re.match(r"^typedef struct (\w+) \1;", line)
    return bool(m) and re.search(r"^struct %s \{" % m.group(1), text, re.M) is not None


def _undocumented_start(line, is_macro):
    if is_macro:
        m = _CONSTANT.match(line)
        return bool(m) and m.group(1) != "TACK_API" and not m.group(1).endswith("_H")
    return bool(_DECLARATION.match(line))


def _file_comment_standalone(text):
    """The header's opening comment describes the file, not the include
    guard after it: an empty comment between keeps hawkmoth from attaching
    it there."""
    if text.startswith("/**"):
        end = text.find("*/") + 2
        return text[:end] + "\n/**/" + text[end:]
    return text


_MACRO = re.compile(r"^#define (\w+)\(([^)]*)\)[ \t]*\\\n((?:.*\\\n)*.*)$", re.M)


def _expand_generators(text):
    """A prototype, documented, before each use of a macro that defines a
    static inline function (tack_arg_i8 and its kin), so that the functions
    it generates are listed like any other."""
    for m in _MACRO.finditer(text):
        name, params = m.group(1), [p.strip() for p in m.group(2).split(",")]
        body = m.group(3).replace("\\\n", " ")
        sig = re.search(r"(static inline [^{;]*?\))", body)
        if not sig:
            continue

        def prototype(args, sig=sig.group(1), params=params):
            out = sig
            for p, a in zip(params, args):
                out = re.sub(r"\s*##\s*%s\b" % p, a, out)
                out = re.sub(r"\b%s\s*##\s*" % p, a, out)
                out = re.sub(r"\b%s\b" % p, a, out)
            return re.sub(r"\s+", " ", out)

        def use(u, name=name):
            args = [a.strip() for a in u.group(1).split(",")]
            return "/** From `%s(%s)`. */\n%s;\n%s" % (name, ", ".join(args), prototype(args), u.group(0))

        text = re.sub(r"^%s\(([^)]*)\)[ \t]*$" % name, use, text, flags=re.M)
    return text


def _comments_first(text):
    """Comments that follow code on its line (enum values, struct members,
    grouped declarations) moved onto a line of their own above it, where
    hawkmoth looks for a declaration's documentation; a comment that runs on
    over the next lines is joined into one. Lines continuing a macro keep
    theirs."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^([ \t]*)([^/\s][^/]*?)[ \t]*/\*(?!\*)(.*)$", line)
        continues_macro = bool(out) and out[-1].rstrip().endswith("\\")
        if not m or continues_macro or line.lstrip().startswith("*"):
            out.append(line)
            i += 1
            continue
        indent, code, rest = m.groups()
        parts = []
        j = i
        while "*/" not in rest and j + 1 < len(lines):
            parts.append(rest)
            j += 1
            rest = re.sub(r"^\s*\*(?!/)\s?", "", lines[j])
        if "*/" not in rest:
            out.append(line)
            i += 1
            continue
        head, tail = rest.split("*/", 1)
        if tail.strip():  # code after the comment: leave the line alone
            out.append(line)
            i += 1
            continue
        parts.append(head)
        words = " ".join(p.strip() for p in parts if p.strip())
        out.append(f"{indent}/* {words} */")
        out.append(indent + code)
        i = j + 1
    return "\n".join(out)


def _last_line_apart(text):
    """A comment's last line with text before its */ is split in two:
    hawkmoth strips the leading * of the lines between the first and a last
    line of */ alone."""
    return re.sub(r"^([ \t]*)\*( .*?\S)[ \t]*\*/[ \t]*$", r"\1*\2\n\1*/", text, flags=re.M)


def copy_headers(source, dest):
    """include/tack/*.h from `source` into `dest`/tack, comments marked.
    Returns the names copied."""
    dest = pathlib.Path(dest) / "tack"
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for header in sorted(pathlib.Path(source).glob("*.h")):
        text = mark_comments(_comments_first(header.read_text()))
        text = _last_line_apart(_expand_generators(_file_comment_standalone(text)))
        # A comment over #include lines describes the file, not the include.
        text = re.sub(r"\*/\n(\s*\n)*(?=#include)", "*/\n/**/\n", text)
        target = dest / header.name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        names.append(header.name)
    return names


_INLINE = re.compile(r"(\*\*|\*|``|`|\|_?|\b_\b|(?<=\w)__?(?=\W|$))")


def _escape(line):
    """One line of prose as reST that shows it as written: `code` becomes a
    literal, and the characters reST reads as markup are escaped."""
    parts = re.split(r"(`[^`]+`)", line)
    out = []
    for part in parts:
        if len(part) > 2 and part.startswith("`") and part.endswith("`"):
            out.append("``" + part[1:-1] + "``")
        else:
            part = part.replace("\\", "\\\\")
            part = re.sub(r"([*|`])", r"\\\1", part)
            part = re.sub(r"(?<=\w)_(?=\W|$)", r"\\_", part)
            out.append(part)
    return "".join(out)


def plain_text(lines):
    """A comment's or docstring's lines as reST: paragraphs escaped, and
    indented runs (code in a comment) kept verbatim as literal blocks."""
    result = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.startswith((" ", "\t")) and line.strip():
            block = []
            while i < n and (lines[i].startswith((" ", "\t")) or not lines[i].strip()):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            if result and result[-1].strip():
                result.append("")
            result.append("::")
            result.append("")
            result.extend("    " + b if b.strip() else "" for b in block)
            result.append("")
            continue
        stripped = line.strip()
        # A line that reST would read as a list item or a field starts a
        # paragraph of its own; keep it text.
        if re.match(r"^([-+*]|\d+[.)]|#\.)\s", stripped) or stripped.startswith(("-", "+", ":")):
            result.append("\\" + _escape(stripped))
        else:
            result.append(_escape(line))
        i += 1
    return result



def hawkmoth_config(root):
    """The settings of the C reference (docs/conf.py, and the test that
    builds the reference alone): the marked copy of the headers, parsed as
    C11 with Python's headers for <tack/python.h>."""
    import shutil
    import sysconfig

    root = pathlib.Path(root)
    headers = root / "build" / "docs" / "c-headers"
    copy_headers(root / "include" / "tack", headers)
    return {
        "hawkmoth_root": str(headers),
        "hawkmoth_clang": [f"-I{headers}", f"-I{sysconfig.get_paths()['include']}", "-std=c11", "-DTACK_API="],
        # Where the standard headers are, asked of the C compiler there is
        # (clang, else gcc): libclang's wheel carries none.
        "hawkmoth_compiler": shutil.which("clang") or shutil.which("gcc") or shutil.which("cc") or "clang",
    }
