"""The documentation points only inside the repository: every relative link of
README.md and docs/*.md, and every file path it quotes as code, names a file of this repository."""

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
