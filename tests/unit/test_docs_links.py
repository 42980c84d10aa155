"""The documentation points only inside the repository: every relative link of README.md and
docs/**/*.md, and every file path it quotes as code, names a file of this repository; a link's
``#anchor`` names a heading of its target; and every section the code cites by name (``docs/x.md,
"Heading"`` or ``README, "Heading"``, in src/, tests/ and scripts/) is a heading of that document."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"`([^`\s]+)`")
#: A code span that is a path: it has a folder and a file extension of the kinds the docs quote.
PATH = re.compile(r"^\.{0,2}/?[\w.-]+(/[\w.-]+)*/[\w.-]+\.(md|png|csv|json|py|sh|toml|proto|txt)$")


def _targets(document: Path) -> list[tuple[str, str]]:
    text = document.read_text(encoding="utf-8")
    found = [("link", target) for target in LINK.findall(text)]
    found += [("path", span) for span in CODE.findall(text) if PATH.match(span)]
    return found


def _resolves_inside(document: Path, target: str, kind: str) -> bool:
    path = target.split("#", 1)[0]
    if not path:
        return True  # an anchor in the same document
    bases = [document.parent] if kind == "link" else [document.parent, ROOT]
    for base in bases:
        resolved = (base / path).resolve()
        if resolved.is_relative_to(ROOT) and resolved.exists():
            return True
    return False


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_and_quoted_paths_resolve_inside_the_repository(document: Path) -> None:
    broken = [f"{kind} {target}" for kind, target in _targets(document)
              if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not _resolves_inside(document, target, kind)]
    assert not broken, f"{document.relative_to(ROOT)} points outside the repository or at nothing: {broken}"


def test_the_check_finds_links() -> None:
    assert any(kind == "link" for kind, _ in _targets(ROOT / "README.md"))
    assert not _resolves_inside(ROOT / "README.md", "../outside-the-repository.md", "path")


def _headings(document: Path) -> list[str]:
    """The document's headings, as text (markup backticks removed), outside code blocks."""
    headings, fenced = [], False
    for line in document.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            headings.append(match.group(1).replace("`", "").strip())
    return headings


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_link_anchors_name_a_heading() -> None:
    broken = []
    for document in DOCUMENTS:
        for kind, target in _targets(document):
            path, _, anchor = target.partition("#")
            if kind != "link" or not anchor or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            linked = (document.parent / path).resolve() if path else document
            if linked.suffix == ".md" and anchor not in {_slug(h) for h in _headings(linked)}:
                broken.append(f"{document.relative_to(ROOT)}: {target}")
    assert broken == []


#: ``docs/protocol.md, "Operations", "Cure"`` or ``README, "Using it"``, across line breaks of a
#: docstring or a comment.
CITATION = re.compile(r'(docs/[\w/.-]+\.md|README(?:\.md)?)(?:[,;] ?| )\(?((?:"[^"]{2,80}"(?:, ?)?)+)')


def _citations(text: str) -> list[tuple[str, str]]:
    flat = re.sub(r"\n[ \t]*(?:# ?)?", " ", text)
    return [(document, name) for document, names in CITATION.findall(flat) for name in re.findall(r'"([^"]+)"', names)]


def _cited_in_code() -> list[tuple[Path, str, str]]:
    found = []
    for folder in ("src", "tests", "scripts"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".sh") and "egg-info" not in str(path) and path.name != "test_docs_links.py":
                found += [(path, document, name) for document, name in _citations(path.read_text(encoding="utf-8"))]
    return found


def test_sections_cited_by_the_code_exist() -> None:
    cited = _cited_in_code()
    assert len(cited) > 30  # the walk finds the citations
    broken = []
    for path, document, name in cited:
        target = ROOT / ("README.md" if document.startswith("README") else document)
        headings = _headings(target) if target.is_file() else []
        if not any(heading == name or heading.startswith((name + " ", name + ":", name + ",")) for heading in headings):
            broken.append(f"{path.relative_to(ROOT)}: {document}, \"{name}\"")
    assert broken == [], "cited sections that are not headings of their document"


def test_the_citation_check_reads_broken_lines() -> None:
    text = '''(docs/protocol.md,\n    "Sessions"); # docs/operations.md, "Clocks: the maximum offset", "TLS"'''
    assert _citations(text) == [("docs/protocol.md", "Sessions"), ("docs/operations.md", "Clocks: the maximum offset"),
                                ("docs/operations.md", "TLS")]
    assert _slug("Repair from the replicas (--repair)") == "repair-from-the-replicas---repair"
