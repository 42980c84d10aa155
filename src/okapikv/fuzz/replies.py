"""What an ``okapi client`` answers, parsed into the history's completion fields.

Write timestamps: the checkers need the store's last-writer-wins order, ``(timestamp, DC)``, which
the course protocol does not print (``PUT k found``). So the clients run with ``--timestamps``, which
ends the PUT, SWAP and DELETE lines in `` ts=<n>`` (the server's timestamp of the write), and every
successful write is recorded with its timestamp and its client's DC index (the index of the DC in the
cluster's protocol order, the source DC the store breaks timestamp ties with). With them the causal
checker ranks the writes of each key and checks every read against its causal past, and convergence
means agreement with the winning write. A client that prints no timestamp (an older ``okapi client``,
a stand-in) is still accepted: its writes are recorded without one, the checkers then check only what
needs no order (thin-air reads, causal cycles, scan shape and range), and the summary says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import IO, Any

from okapikv.fuzz.plan import Command


class ReplyError(ValueError):
    """A client's output that is not the protocol's answer to the command sent."""


#: the `` ts=<n>`` that ``okapi client --timestamps`` ends a PUT, SWAP or DELETE line with
_TIMESTAMP = re.compile(r"ts=([0-9]+)")


def parse_reply(command: Command, lines: Sequence[str]) -> dict[str, Any]:
    """The history's ok fields for ``lines``, the complete output for ``command``."""
    first = lines[0]
    words = first.split(" ")
    f = command.f
    if f == "scan":
        if first != f"SCAN {command.start} {command.end} BEGIN" or lines[-1] != "SCAN END":
            raise ReplyError(f"expected a SCAN {command.start} {command.end} block, got {list(lines[:3])}")
        items = []
        for line in lines[1:-1]:
            parts = line.split(" ")
            if len(parts) != 4 or parts[:2] != ["", ""]:
                raise ReplyError(f"malformed SCAN item line {line!r}")
            items.append((parts[2], parts[3]))
        return {"items": tuple(items)}
    stamp: dict[str, Any] = {}
    if f in ("put", "swap", "delete") and len(words) == 4:
        match = _TIMESTAMP.fullmatch(words[3])
        if match is None:
            raise ReplyError(f"expected '{f.upper()} {command.key} ... ts=<n>', got {first!r}")
        stamp = {"timestamp": int(match.group(1))}
        words = words[:3]
    if len(words) != 3 or words[0] != f.upper() or words[1] != command.key:
        raise ReplyError(f"expected '{f.upper()} {command.key} ...', got {first!r}")
    result = words[2]
    if f in ("put", "delete"):
        if result not in ("found", "not_found"):
            raise ReplyError(f"expected found or not_found, got {first!r}")
        return {"found": result == "found", **stamp}
    value = None if result == "null" else result
    return {"old": value, **stamp} if f == "swap" else {"read": value}


def read_reply(stream: IO[str], command: Command) -> list[str]:
    """The lines answering ``command`` (several for SCAN); ``EOFError`` if the client exited."""
    first = _read_line(stream)
    lines = [first]
    if command.f == "scan" and first.endswith(" BEGIN") and first.startswith("SCAN "):
        while lines[-1] != "SCAN END":
            lines.append(_read_line(stream))
    return lines


def _read_line(stream: IO[str]) -> str:
    line = stream.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")
