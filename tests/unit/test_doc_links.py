"""Issue 40: every link of the README and the documentation stays inside the repository and resolves.

A link is a Markdown inline link or image (``[text](target)``, ``![alt](target)``), a reference
definition (``[id]: target``), an autolink (``<https://...>``) or an HTML ``href``/``src``; code
blocks and code spans are not links. A target with a scheme (``https:``, ``mailto:`` ...) or one
that resolves outside the repository is refused; a relative target must name an existing file, and
its ``#fragment`` a heading or ``<a id>`` of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        REPO / "README.md",
        REPO / "CHANGELOG.md",
        REPO / "charts" / "nova-operator" / "README.md",
        *(REPO / "docs").rglob("*.md"),
    ]
)

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]+)>")
_HTML = re.compile(r"\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def links(text: str) -> list[str]:
    """The link targets of Markdown ``text``, code left out."""
    prose = _CODE_SPAN.sub("", _FENCE.sub("", text))
    return [m[1] for pattern in (_INLINE, _REFDEF, _AUTOLINK, _HTML) for m in pattern.finditer(prose)]


def _slug(heading: str) -> str:
    heading = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", heading))


def anchors(text: str) -> set[str]:
    plain = _FENCE.sub("", text)
    out = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", plain))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", plain, re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def problems(page: Path, repo: Path = REPO) -> list[str]:
    out = []
    for target in links(page.read_text()):
        where = f"{page.relative_to(repo)}: {target}"
        if _SCHEME.match(target):
            out.append(f"{where}: points outside the repository")
            continue
        path_part, _, fragment = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.is_relative_to(repo.resolve()):
            out.append(f"{where}: points outside the repository")
        elif not dest.exists():
            out.append(f"{where}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest.read_text()):
            out.append(f"{where}: no such anchor in {dest.name}")
    return out


def test_the_pages_are_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in PAGES}
    assert {"README.md", "docs/README.md", "docs/install.md", "docs/benchmarks.md", "CHANGELOG.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_stays_in_the_repository_and_resolves(page: Path) -> None:
    assert problems(page) == []


def test_no_page_names_the_workspace_outside_the_repository() -> None:
    for page in PAGES:
        assert "../shared" not in page.read_text(), page


def test_the_readme_shows_the_generated_picture() -> None:
    assert "docs/architecture.svg" in links((REPO / "README.md").read_text())


def test_the_scan_sees_each_kind_of_bad_link(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text('# A heading, here\n\n<a id="custom"></a>\n')
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "[web](https://example.org/x) ![img](http://example.org/i.png) <https://example.org>\n"
        "[up](../../outside.md) [gone](missing.md) [anchor](there.md#nope)\n"
        "[ok](there.md#a-heading-here) [ok2](there.md#custom) [self](#title)\n"
        '[ref]: mailto:someone@example.org\n<img src="//cdn.example.org/x.png">\n'
        "`[code](https://example.org/in-code)`\n```\n[fenced](https://example.org/fenced)\n```\n# Title\n"
    )
    found = problems(page, tmp_path)
    assert [p.split(": ", 2)[1] for p in found] == [
        "https://example.org/x",
        "http://example.org/i.png",
        "../../outside.md",
        "missing.md",
        "there.md#nope",
        "mailto:someone@example.org",
        "https://example.org",
        "//cdn.example.org/x.png",
    ]


def test_the_readme_table_names_only_children_the_code_gives_and_every_deployment() -> None:
    from nova_operator import naming
    from nova_operator.renderers import compute_pool

    readme = (REPO / "README.md").read_text()
    table = readme.split("| object | name | what it is |", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\{(?:nova|pool)\}[^`]*)`", table))
    given = {"{nova}" + s for suffixes in naming.CHILD_SUFFIXES.values() for s in suffixes}
    given.add(compute_pool.daemonset_name("{pool}"))
    assert named
    assert named <= given, named - given
    deployments = {"{nova}" + s for s in naming.CHILD_SUFFIXES["Deployment"]}
    assert deployments <= named
    assert {"{nova}-db-archive", "{nova}-compute-config", "{nova}-db-sync"} <= named
