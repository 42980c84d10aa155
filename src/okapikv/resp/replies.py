"""Replies of the Redis protocol, as bytes, for RESP2 and RESP3 (``HELLO 3``).

The two versions differ only where RESP3 has a type of its own: a null is ``_`` instead of RESP2's
null bulk string (or null array), and a map is ``%`` instead of a flat array of keys and values.
Everything else (simple strings, errors, integers, bulk strings, arrays) is written the same way.

An error's text is one line: carriage returns and newlines in it become spaces (a reply must never
break the framing the client parses).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

OK = b"+OK\r\n"
PONG = b"+PONG\r\n"
QUEUED = b"+QUEUED\r\n"
NULL_BULK = b"$-1\r\n"
NULL_ARRAY = b"*-1\r\n"
NULL3 = b"_\r\n"
EMPTY_ARRAY = b"*0\r\n"
ZERO = b":0\r\n"
ONE = b":1\r\n"

#: a reply value as the command handlers build it: bytes, str, int, None, a list (array) or a dict
#: (map); ``Simple`` is a simple string, ``Error`` an error reply.
Value = object


class Simple(str):
    """A simple string reply (``+OK``)."""


class Error(str):
    """An error reply; the text starts with its code (``ERR ...``, ``EXECABORT ...``)."""


def error(text: str) -> bytes:
    return b"-" + _line(text) + b"\r\n"


def simple(text: str) -> bytes:
    return b"+" + _line(text) + b"\r\n"


def integer(value: int) -> bytes:
    return b":%d\r\n" % value


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def null(resp3: bool) -> bytes:
    return NULL3 if resp3 else NULL_BULK


def bulk_or_null(value: bytes | None, resp3: bool) -> bytes:
    if value is None:
        return NULL3 if resp3 else NULL_BULK
    return b"$%d\r\n%s\r\n" % (len(value), value)


def array(items: Sequence[bytes]) -> bytes:
    """An array of already encoded replies."""
    return b"*%d\r\n" % len(items) + b"".join(items)


def bulk_array(values: Iterable[bytes | None], resp3: bool) -> bytes:
    parts = [bulk_or_null(value, resp3) for value in values]
    return b"*%d\r\n" % len(parts) + b"".join(parts)


def encode(value: Value, resp3: bool) -> bytes:
    """Any reply value (see ``Value``): str and bytes become bulk strings."""
    if isinstance(value, Error):
        return error(value)
    if isinstance(value, Simple):
        return simple(value)
    if value is None:
        return null(resp3)
    if isinstance(value, bool):
        return integer(int(value))
    if isinstance(value, int):
        return integer(value)
    if isinstance(value, bytes):
        return bulk(value)
    if isinstance(value, str):
        return bulk(value.encode())
    if isinstance(value, dict):
        parts = [encode(part, resp3) for pair in value.items() for part in pair]
        return (b"%%%d\r\n" % len(value) if resp3 else b"*%d\r\n" % len(parts)) + b"".join(parts)
    if isinstance(value, list | tuple):
        return array([encode(item, resp3) for item in value])
    raise TypeError(f"no RESP encoding for {type(value).__name__}")


def _line(text: str) -> bytes:
    return text.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")
