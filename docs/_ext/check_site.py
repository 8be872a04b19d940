"""Checks the built site as a browser would load it (make docs runs this).

    python docs/_ext/check_site.py build/docs/html

Every page of docs/ has its HTML page; every link, image and stylesheet a
page references inside the site exists (anchors within pages included);
each tutorial page shows its figure, a PNG that is really an image.
Exits 1, listing what is wrong, otherwise prints a summary."""
import html.parser
import pathlib
import sys
import urllib.parse

DOCS = pathlib.Path(__file__).resolve().parents[1]


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids, self.images = [], set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            value = attrs.get(key)
            if value and not value.startswith(("http:", "https:", "mailto:", "data:", "javascript:")):
                self.refs.append(value)
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])


def main(out):
    out = pathlib.Path(out)
    problems = []
    expected = [p.relative_to(DOCS).with_suffix(".html") for p in DOCS.rglob("*.rst")
                if "_ext" not in p.parts]
    expected += [pathlib.Path("tutorials/index.html"), pathlib.Path("tutorials/tutorial_heat_equation.html"),
                 pathlib.Path("tutorials/tutorial_insitu.html")]
    for rel in expected:
        if not (out / rel).is_file():
            problems.append(f"no page {rel}")
    pages = {p: Page() for p in out.rglob("*.html")}
    for path, page in pages.items():
        page.feed(path.read_text(errors="replace"))
    images = 0
    for path, page in pages.items():
        for ref in page.refs:
            parts = urllib.parse.urlsplit(ref)
            target = (path.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                problems.append(f"{path.relative_to(out)}: {ref} does not exist")
            elif parts.fragment and target.suffix == ".html" and target in pages and \
                    parts.fragment not in pages[target].ids:
                problems.append(f"{path.relative_to(out)}: no anchor #{parts.fragment} in {ref}")
        for src in page.images:
            target = path.parent / urllib.parse.unquote(src)
            if target.suffix == ".png":
                if target.is_file() and target.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
                    problems.append(f"{path.relative_to(out)}: {src} is not a PNG")
                images += 1
    for name in ("tutorial_heat_equation", "tutorial_insitu"):
        page = pages.get((out / "tutorials" / f"{name}.html"))
        if page is None or not any(f"sphx_glr_{name}_001.png" in src for src in page.images):
            problems.append(f"tutorials/{name}.html shows no figure of its own")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"site: {len(pages)} pages, {images} images, every link inside the site resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/docs/html"))
