"""The guides (docs/*.md) are pages of the built docs site (tools/docs_guides.py, run by
tools/docs.sh): every guide gets a page under the index's Guides, and every link from one guide to
another guide or to one of its headings leads somewhere (else the site build fails, naming it)."""

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import docs_guides  # noqa: E402  pylint: disable=wrong-import-position


def test_every_guide_is_a_page_of_the_site_and_its_links_between_guides_resolve(tmp_path):
    (tmp_path / "index.rst").write_text("bridge.hpc\n==========\n")
    names = docs_guides.write(str(tmp_path))
    assert names == sorted(entry[:-3] for entry in os.listdir(os.path.join(REPO, "docs")) if entry.endswith(".md"))
    index = (tmp_path / "index.rst").read_text()
    for name in names:
        assert "   guides/%s\n" % name in index
        page = (tmp_path / "guides" / (name + ".rst")).read_text()
        assert page.splitlines()[2], "a title"
    docs_guides.write(str(tmp_path))
    assert (tmp_path / "index.rst").read_text() == index, "written once"


def test_a_link_to_a_missing_heading_fails_naming_it():
    found = {"a": ("A", "# A\n\n## Here\n\n[ok](#here) [there](b.md#gone)\n"), "b": ("B", "# B\n\n## Only\n")}
    with pytest.raises(SystemExit, match="docs/a.md: b.md#gone"):
        docs_guides.rendered(found)
    pages = docs_guides.rendered({"a": found["a"][:1] + ("# A\n\n## Here\n\n[ok](#here) [b](b.md#only) [f](../deploy/)\n",),
                                  "b": found["b"]})
    assert '<a href="a.html#here">ok</a>' in pages["a"] and '<a href="b.html#only">b</a>' in pages["a"]
    assert '<span title="../deploy/">f</span>' in pages["a"]
