"""The line protocol of ``okapi client``: parsing commands and formatting results, with no I/O.

The format is the course service's (the README's table, "Using it"), which its fuzzer and YCSB driver
read back byte for byte, so it is exact: one command per input line, keywords upper case and
case-sensitive, words separated by ASCII whitespace; one result per command in input order::

    PUT k v        ->  PUT k found | PUT k not_found
    SWAP k v       ->  SWAP k old | SWAP k null
    GET k          ->  GET k v | GET k null
    DELETE k       ->  DELETE k found | DELETE k not_found
    SCAN a b       ->  SCAN a b BEGIN / "  k v" per pair (a <= k <= b, dictionary order) / SCAN END
    TX k1 k2 ...   ->  TX k1 k2 ... BEGIN / "  k v" or "  k null" per key, in order / TX END
    STOP           ->  STOP (and the client exits)

``TX`` (a read-only transaction, one causally consistent snapshot) is ours, in the same style. With
``okapi client --timestamps`` (ours too, for ``okapi fuzz``) the PUT, SWAP and DELETE lines end in
`` ts=<n>``: the server's timestamp of the write (``PUT k found ts=123``), which with the client's DC
is the write's last-writer-wins rank; without the flag the output is exactly the course's. With
``okapi client --counters`` (ours, for ``okapi fuzz --counters-ttls``) two more commands are
accepted, which the course's protocol does not have::

    INCR k         ->  INCR k n            (n: the counter's value after the increment)
    PUTEX k v ms   ->  PUTEX k found | PUTEX k not_found   (a PUT expiring ms milliseconds later)

A line
that is not a valid command yields exactly one line starting with ``ERROR `` and the client goes on,
so one bad line never desynchronises a driver that counts result lines. Blank lines are ignored.

Tokens (keys and values): any run of the bytes 0x21-0x7f, that is printable ASCII without the space,
plus DEL. The course text says to assume alphanumeric tokens, but its YCSB driver sends keys such as
``usertable_user6284781860667377211`` and values with punctuation and DEL, so every byte a token can
hold on a whitespace-separated line is accepted. A token with any other character (a control
character that is not whitespace, or anything outside ASCII, including bytes that are not UTF-8,
which reach the parser as U+FFFD) is refused with ``ERROR invalid token ...`` and nothing is sent:
such a byte could not come back as the same single token in a result line. A value written by
another client may hold any bytes: ``text`` prints it escaped, still one token (README).

Kept free of I/O and of the network so every corner of the format is unit-tested directly; the
client is anything with the ``KeyValueApi`` methods.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, cast

_TOKEN = re.compile(r"[\x21-\x7f]+")
#: What separates words: ASCII whitespace only. ``str.split()`` would also split on characters such
#: as U+001C or U+0085, silently turning one invalid token into two valid ones.
_SEPARATORS = re.compile(r"[ \t\n\r\v\f]+")
TOKEN_RULE = "keys and values are ASCII characters 0x21-0x7f: no spaces, control characters or non-ASCII"
_PLAIN = re.compile(rb"[\x21-\x7f]+")
#: How ``text`` writes the bytes of a value that is not a token (latin-1: one character per byte).
_ESCAPES = {**{byte: f"\\x{byte:02x}" for byte in range(256) if not 0x21 <= byte <= 0x7F}, ord("\\"): "\\\\"}


class CommandError(ValueError):
    """A line that is not a valid command; ``str()`` is the message after ``ERROR ``."""


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Swap:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Get:
    key: str


@dataclass(frozen=True, slots=True)
class Delete:
    key: str


@dataclass(frozen=True, slots=True)
class Scan:
    start: str
    end: str


@dataclass(frozen=True, slots=True)
class Tx:
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Stop:
    pass


@dataclass(frozen=True, slots=True)
class Incr:
    key: str


@dataclass(frozen=True, slots=True)
class PutEx:
    key: str
    value: str
    ttl_ms: int


Command = Put | Swap | Get | Delete | Scan | Tx | Stop | Incr | PutEx

# keyword -> (number of arguments, or None for "one or more"), usage
_SYNTAX: dict[str, tuple[int | None, str]] = {
    "PUT": (2, "PUT <key> <value>"),
    "SWAP": (2, "SWAP <key> <value>"),
    "GET": (1, "GET <key>"),
    "DELETE": (1, "DELETE <key>"),
    "SCAN": (2, "SCAN <start> <end>"),
    "TX": (None, "TX <key> [<key> ...]"),
    "STOP": (0, "STOP"),
}
#: ``--counters``: the commands beyond the course's
_COUNTER_SYNTAX: dict[str, tuple[int | None, str]] = {
    "INCR": (1, "INCR <key>"),
    "PUTEX": (3, "PUTEX <key> <value> <milliseconds>"),
}

HELP = """\
commands (keywords are upper case; keys and values are printable ASCII without spaces):
  PUT <key> <value>       write; prints "PUT <key> found" if the key had a value, else "not_found"
  SWAP <key> <value>      write and print the value replaced ("null" if none)
  GET <key>               print the value ("null" if none)
  DELETE <key>            delete; prints "found" or "not_found"
  SCAN <start> <end>      every key in [start, end] in dictionary order, from one consistent snapshot
  TX <key> [<key> ...]    read several keys from one causally consistent snapshot
  STOP                    exit (so do Ctrl-D, "exit" and "quit")
  help                    this text"""


def parse(line: str, counters: bool = False) -> Command | None:
    """The command on ``line``; None for a blank line; ``CommandError`` for anything malformed.
    ``counters``: INCR and PUTEX are commands too (``okapi client --counters``)."""
    words = [word for word in _SEPARATORS.split(line) if word]
    if not words:
        return None
    keyword, arguments = words[0], words[1:]
    known = {**_SYNTAX, **_COUNTER_SYNTAX} if counters else _SYNTAX
    syntax = known.get(keyword)
    if syntax is None:
        hint = " (keywords are upper case)" if keyword.upper() in known else ""
        raise CommandError(f"unknown command {_show(keyword)}{hint}; expected one of {', '.join(known)}")
    count, usage = syntax
    if count is None:
        if not arguments:
            raise CommandError(f"{keyword} needs at least one key: {usage}")
    elif len(arguments) != count:
        raise CommandError(f"{keyword} takes {count} argument{'s' if count != 1 else ''}, "
                           f"got {len(arguments)}: {usage}")
    for argument in arguments:
        if not _TOKEN.fullmatch(argument):
            raise CommandError(f"invalid token {_show(argument)}: {TOKEN_RULE}")
    if keyword == "PUT":
        return Put(arguments[0], arguments[1])
    if keyword == "SWAP":
        return Swap(arguments[0], arguments[1])
    if keyword == "GET":
        return Get(arguments[0])
    if keyword == "DELETE":
        return Delete(arguments[0])
    if keyword == "SCAN":
        return Scan(arguments[0], arguments[1])
    if keyword == "TX":
        return Tx(tuple(arguments))
    if keyword == "INCR":
        return Incr(arguments[0])
    if keyword == "PUTEX":
        if not arguments[2].isdigit() or not 0 < int(arguments[2]) <= 1 << 40:
            raise CommandError(f"PUTEX needs a positive number of milliseconds, got {_show(arguments[2])}")
        return PutEx(arguments[0], arguments[1], int(arguments[2]))
    return Stop()


def _show(token: str, limit: int = 40) -> str:
    """A token quoted for an error message, shortened and on one line."""
    shown = token if len(token) <= limit else token[:limit] + "..."
    return repr(shown)


# ------------------------------------------------------------------ formatting


def text(value: bytes) -> str:
    """A stored value as protocol text: one token on one line, whatever its bytes.

    A token (every byte in 0x21-0x7f, as this protocol writes them) prints exactly as stored, so the
    course's values, punctuation, backslash and DEL included, come back byte for byte. Any other
    value (written through the library, RESP or the native port: a space, a newline, NUL, non-ASCII)
    prints with each byte outside 0x21-0x7f as ``\\xHH`` and each backslash as ``\\\\``, which
    decodes back to the bytes exactly (README, "Using it")."""
    if _PLAIN.fullmatch(value):
        return value.decode("ascii")
    return value.decode("latin-1").translate(_ESCAPES)


def _or_null(value: bytes | None) -> str:
    return "null" if value is None else text(value)


def _ts(timestamp: int | None) -> str:
    """The `` ts=<n>`` suffix of a write's line (``--timestamps``), or nothing."""
    return "" if timestamp is None else f" ts={timestamp}"


def format_put(command: Put, found: bool, timestamp: int | None = None) -> list[str]:
    return [f"PUT {command.key} {'found' if found else 'not_found'}{_ts(timestamp)}"]


def format_swap(command: Swap, old: bytes | None, timestamp: int | None = None) -> list[str]:
    return [f"SWAP {command.key} {_or_null(old)}{_ts(timestamp)}"]


def format_get(command: Get, value: bytes | None) -> list[str]:
    return [f"GET {command.key} {_or_null(value)}"]


def format_delete(command: Delete, found: bool, timestamp: int | None = None) -> list[str]:
    return [f"DELETE {command.key} {'found' if found else 'not_found'}{_ts(timestamp)}"]


def format_scan(command: Scan, items: list[tuple[bytes, bytes]]) -> list[str]:
    return [f"SCAN {command.start} {command.end} BEGIN", *(f"  {text(k)} {text(v)}" for k, v in items), "SCAN END"]


def format_tx(command: Tx, values: list[bytes | None]) -> list[str]:
    lines = [f"TX {' '.join(command.keys)} BEGIN"]
    lines += [f"  {key} {_or_null(value)}" for key, value in zip(command.keys, values, strict=True)]
    lines.append("TX END")
    return lines


def format_error(message: str) -> str:
    """One ``ERROR`` line, whatever the message holds (a driver counts lines)."""
    return "ERROR " + " ".join(str(message).split())


# ------------------------------------------------------------------ execution


class KeyValueApi(Protocol):
    """What ``execute`` needs of a client (``okapikv.Client`` has it)."""

    def put(self, key: str, value: str) -> bool: ...
    def swap(self, key: str, value: str) -> bytes | None: ...
    def get(self, key: str) -> bytes | None: ...
    def delete(self, key: str) -> bool: ...
    def scan(self, start: str, end: str) -> list[tuple[bytes, bytes]]: ...
    def read_tx(self, keys: list[str]) -> list[bytes | None]: ...


class CounterApi(Protocol):
    """What ``execute`` needs of a client for INCR and PUTEX (``okapikv.Client`` has it)."""

    def incr(self, key: str, by: int = 1) -> int: ...
    def put(self, key: str, value: str, ttl: float | None = None) -> bool: ...


def _write_timestamp(client: KeyValueApi, timestamps: bool) -> int | None:
    """The timestamp of the write ``client`` just completed, when asked for and known.

    ``okapikv.Client`` keeps it as ``last_write_timestamp``; a client without one prints none."""
    if not timestamps:
        return None
    timestamp = getattr(client, "last_write_timestamp", None)
    return timestamp if isinstance(timestamp, int) else None


def execute(client: KeyValueApi, command: Command, timestamps: bool = False) -> list[str]:
    """Run one command and return its output lines (``STOP`` is the caller's business);
    ``timestamps``: end the PUT, SWAP and DELETE lines in `` ts=<n>``."""
    if isinstance(command, Put):
        found = client.put(command.key, command.value)
        return format_put(command, found, _write_timestamp(client, timestamps))
    if isinstance(command, Swap):
        old = client.swap(command.key, command.value)
        return format_swap(command, old, _write_timestamp(client, timestamps))
    if isinstance(command, Get):
        return format_get(command, client.get(command.key))
    if isinstance(command, Delete):
        found = client.delete(command.key)
        return format_delete(command, found, _write_timestamp(client, timestamps))
    if isinstance(command, Scan):
        return format_scan(command, client.scan(command.start, command.end))
    if isinstance(command, Tx):
        return format_tx(command, client.read_tx(list(command.keys)))
    if isinstance(command, Incr):
        return [f"INCR {command.key} {cast(CounterApi, client).incr(command.key)}"]
    if isinstance(command, PutEx):
        found = cast(CounterApi, client).put(command.key, command.value, ttl=command.ttl_ms / 1000)
        return [f"PUTEX {command.key} {'found' if found else 'not_found'}"]
    return ["STOP"]
