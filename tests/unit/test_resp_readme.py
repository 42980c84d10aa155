"""The README's Redis-protocol table names every command the RESP port serves and every one it
refuses (``okapikv.resp.commands``): the table is the port's documented interface."""

from __future__ import annotations

import re
from pathlib import Path

from okapikv.resp.commands import COMMANDS, REFUSED, SET_REFUSED

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("### The Redis protocol")
    return text[start:text.index("\n## ", start)]


def _named(section: str) -> set[str]:
    """Every upper-case word inside a backtick span of the section."""
    return {word for span in re.findall(r"`([^`]*)`", section) for word in re.findall(r"[A-Z][A-Z.]+", span)}


def test_every_served_and_refused_command_is_in_the_readme_table() -> None:
    named = _named(_section())
    served = {spec.name.upper() for spec in COMMANDS.values()}
    refused = {name.decode() for name in REFUSED} | {option.decode() for option in SET_REFUSED}
    assert served - named == set()
    assert refused - named == set()
