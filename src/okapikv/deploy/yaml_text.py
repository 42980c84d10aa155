"""A small block-style YAML writer for the generated compose files and manifests.

Why not PyYAML: a server install should not need it, and what is written here is plain data
(mappings, lists, strings, numbers, booleans). Strings are written double-quoted with JSON escapes,
which YAML reads back exactly (JSON strings are YAML double-quoted scalars), so "0", "true" or
"on" stay strings; a multi-line string becomes a literal block (``|``), read back line for line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_AMBIGUOUS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _key(key: str) -> str:
    return key if _PLAIN_KEY.match(key) and key.lower() not in _AMBIGUOUS else json.dumps(key)


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _is_block_text(value: object) -> bool:
    """Whether a literal block reads back exactly: several lines, one final newline, no leading
    space on the first line, no trailing spaces, tabs or carriage returns."""
    return (isinstance(value, str) and "\n" in value.rstrip("\n") and value.endswith("\n")
            and not value.endswith("\n\n") and not value.startswith(" ") and "\r" not in value
            and not any(line != line.rstrip() or "\t" in line for line in value.splitlines()))


def _lines(value: object, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        lines: list[str] = []
        for key, item in value.items():
            lines += _entry(f"{pad}{_key(str(key))}:", item, indent)
        return lines
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            if isinstance(item, Mapping) and item:
                inner = _lines(item, indent + 2)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines += inner[1:]
            else:
                lines += _entry(f"{pad}-", item, indent)
        return lines
    return [pad + _scalar(value)]


def _entry(head: str, item: object, indent: int) -> list[str]:
    if _is_block_text(item):
        assert isinstance(item, str)
        return [f"{head} |"] + [" " * (indent + 2) + line if line else "" for line in item.splitlines()]
    if isinstance(item, Mapping | list | tuple) and item:
        return [head] + _lines(item, indent + 2)
    return [f"{head} {_lines(item, 0)[0]}"]


def dump(value: object) -> str:
    """``value`` as a YAML document."""
    return "\n".join(_lines(value, 0)) + "\n"

