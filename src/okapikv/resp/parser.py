"""Requests of the Redis protocol (RESP) from a byte stream: multibulk frames and inline commands.

A client sends each command as an array of bulk strings (``*2\\r\\n$3\\r\\nGET\\r\\n$1\\r\\nk\\r\\n``)
or, typed by a person or sent by redis-benchmark's PING_INLINE, as one line of words (``GET k``,
with Redis's quoting rules). ``feed`` takes whatever arrived and returns the complete commands and,
when the stream broke the protocol, the error to answer before the connection is closed (what
Redis does: the commands before the garbage still run).

Two parsers with one behaviour, chosen by ``make_parser``, each behind ``CanonicalFrames``:

- ``PythonParser``: a resumable state machine (the shape of Redis's ``processMultibulkBuffer``): a
  request split over many reads is never parsed again from its start, so a request of many
  elements costs the same whatever the reads' sizes. Every bound of ``RespLimits`` is checked from a
  header, before the bytes it announces are buffered.
- ``HiredisParser``: the C parser of the ``hiredis`` package for multibulk frames (the hot path of
  every client library). hiredis does not parse inline commands, applies none of our bounds and does
  not say how many bytes it consumed, so it keeps a copy of the bytes since the last request
  boundary: a frame hiredis cannot or must not take (an inline command, a bound broken, garbage) is
  handed, with those bytes, to a ``PythonParser``, which answers as it always does; a read that
  ends inside a request has the ``PythonParser`` check that request's headers so far, so bounds are
  enforced as early as without hiredis. Measured on this 2-core VM (2026-12-01, ``python -m
  okapikv.resp.parser``): see ``docs/resp.md``.

- ``CanonicalFrames``: in front of either, at a request boundary, takes the requests of a read that
  are written the way every client library writes them (``*3\r\n$3\r\nSET\r\n...``: canonical
  lengths, no CR LF inside a value, within the bounds) with one ``bytes.split`` and a check of each
  length against what it splits out, and hands the rest of the read, from the first request it does
  not take, to the parser behind it. A request it takes is one the parser behind it parses to the
  same arguments, so nothing answers differently; it saves the hiredis wrapper's bookkeeping per
  read, more than half the parsing's CPU per command (docs/resp.md, "Parsing").

Numbers in headers are decimal digits (leading zeros accepted, as hiredis does); a count of zero or
less is an empty command and is skipped, as Redis skips it; the two bytes after a bulk string are
skipped unread, as both Redis and hiredis do.
"""

from __future__ import annotations

import os
import re
from typing import Protocol

from okapikv.resp.limits import RespLimits

Command = list[bytes]
#: ``isspace`` of C, which Redis's inline splitting uses between arguments
_SPACES = frozenset(b" \n\r\t\v\f")
#: what ends an unquoted argument of an inline command (``sdssplitargs``)
_ENDS = frozenset(b" \n\r\t\0")
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = frozenset(b"0123456789abcdefABCDEF")
#: the type bytes of the aggregates hiredis preallocates from the header: array, set, push,
#: attribute (and map, for safety: hiredis-py builds it as it goes)
_AGGREGATES = (42, 126, 62, 124, 37)
#: the count of an aggregate header of 10 elements or more (more than 19 digits overflow hiredis's
#: reader, which refuses leading zeros)
_LARGE_COUNT = re.compile(rb"[1-9][0-9]{1,18}\r\n")


class Parser(Protocol):
    """What a connection needs of a parser."""

    def feed(self, data: bytes) -> tuple[list[Command], str | None]:
        """The commands completed by ``data`` and the protocol error that ends the stream, if any
        (the commands before it are valid; nothing after it is parsed)."""
        ...

    @property
    def partial(self) -> bool:
        """Whether part of a request is buffered (a half-sent frame)."""
        ...

    @property
    def partial_bytes(self) -> int:
        """What the half-sent request holds and has announced so far (its elements read, its
        buffered bytes, the announced length of the element being read): the server-wide input
        budget counts it (``okapikv.server.budgets``); 0 when no request is half-sent."""
        ...


def split_inline(line: bytes) -> list[bytes] | None:
    """The arguments of an inline command line, by Redis's ``sdssplitargs`` rules (double quotes
    with ``\\n \\r \\t \\b \\a \\xHH`` escapes, single quotes with ``\\'``); None for unbalanced
    quotes or a closing quote not followed by a space."""
    args: list[bytes] = []
    size = len(line)
    index = 0
    while True:
        while index < size and line[index] in _SPACES:
            index += 1
        if index >= size:
            return args
        current = bytearray()
        in_double = in_single = False
        while True:
            if in_double:
                if index >= size:
                    return None
                char = line[index]
                if (char == 92 and index + 3 < size and line[index + 1] == 120
                        and line[index + 2] in _HEX and line[index + 3] in _HEX):
                    current.append(int(line[index + 2:index + 4], 16))
                    index += 3
                elif char == 92 and index + 1 < size:
                    index += 1
                    current.append(_ESCAPES.get(line[index], line[index]))
                elif char == 34:
                    if index + 1 < size and line[index + 1] not in _SPACES:
                        return None
                    index += 1
                    break
                else:
                    current.append(char)
            elif in_single:
                if index >= size:
                    return None
                char = line[index]
                if char == 92 and index + 1 < size and line[index + 1] == 39:
                    index += 1
                    current.append(39)
                elif char == 39:
                    if index + 1 < size and line[index + 1] not in _SPACES:
                        return None
                    index += 1
                    break
                else:
                    current.append(char)
            else:
                if index >= size:
                    break
                char = line[index]
                if char in _ENDS:
                    index += 1
                    break
                if char == 34:
                    in_double = True
                elif char == 39:
                    in_single = True
                else:
                    current.append(char)
            index += 1
        args.append(bytes(current))


def _number(text: bytes | bytearray) -> int | None:
    """A header's number: optional minus sign and decimal digits, else None."""
    digits = text[1:] if text[:1] == b"-" else text
    if not digits or not digits.isdigit() or len(digits) > 18:
        return None
    return int(text)


class PythonParser:
    """The pure-Python parser (module docstring)."""

    __slots__ = ("_limits", "_buffer", "_args", "_remaining", "_bulk", "_held_bytes", "_offset", "boundary")

    def __init__(self, limits: RespLimits) -> None:
        self._limits = limits
        self._buffer = bytearray()
        self._args: Command | None = None  # the multibulk request being read
        self._remaining = 0  # its elements still to come
        self._bulk = -1  # length of the bulk string being read, -1 before its header
        self._held_bytes = 0  # bytes of ``_args`` so far
        self._offset = 0  # position in the stream of ``_buffer[0]``
        #: position in the stream where the last complete request (or skipped empty one) ended
        self.boundary = 0

    @property
    def partial(self) -> bool:
        return self._args is not None or bool(self._buffer)

    @property
    def partial_bytes(self) -> int:
        if not self.partial:
            return 0
        return self._held_bytes + max(len(self._buffer), self._bulk + 2)

    def feed(self, data: bytes) -> tuple[list[Command], str | None]:
        buffer = self._buffer
        buffer += data
        commands: list[Command] = []
        error: str | None = None
        position = 0
        size = len(buffer)
        limits = self._limits
        while True:
            if self._args is None:
                if position >= size:
                    break
                if buffer[position] != 42:  # '*': anything else is an inline command
                    newline = buffer.find(b"\n", position)
                    if newline < 0:
                        if size - position > limits.max_inline_bytes:
                            error = "Protocol error: too big inline request"
                        break
                    if newline - position > limits.max_inline_bytes:
                        error = "Protocol error: too big inline request"
                        break
                    args = split_inline(bytes(buffer[position:newline]))
                    if args is None:
                        error = "Protocol error: unbalanced quotes in request"
                        break
                    position = newline + 1
                    self.boundary = self._offset + position
                    if args:
                        commands.append(args)
                    continue
                newline = buffer.find(b"\r\n", position)
                if newline < 0:
                    if size - position > limits.max_inline_bytes:
                        error = "Protocol error: too big mbulk count string"
                    break
                count = _number(buffer[position + 1:newline])
                if count is None:
                    error = "Protocol error: invalid multibulk length"
                    break
                if count > limits.max_arguments:
                    error = (f"Protocol error: invalid multibulk length ({count} arguments; "
                             f"a command takes at most {limits.max_arguments})")
                    break
                position = newline + 2
                if count <= 0:
                    self.boundary = self._offset + position
                    continue  # an empty command, skipped as Redis skips it
                self._args, self._remaining, self._bulk, self._held_bytes = [], count, -1, 0
            args = self._args
            while self._remaining:
                if self._bulk < 0:
                    if position >= size:
                        break
                    if buffer[position] != 36:  # '$'
                        error = f"Protocol error: expected '$', got {chr(buffer[position])!r}"
                        break
                    newline = buffer.find(b"\r\n", position)
                    if newline < 0:
                        if size - position > limits.max_inline_bytes:
                            error = "Protocol error: too big bulk count string"
                        break
                    length = _number(buffer[position + 1:newline])
                    if length is None or length < 0:
                        error = "Protocol error: invalid bulk length"
                        break
                    if length > limits.max_bulk_bytes:
                        error = (f"Protocol error: invalid bulk length ({length} bytes; the value "
                                 f"limit is {limits.max_bulk_bytes})")
                        break
                    if self._held_bytes + length > limits.max_request_bytes:
                        error = f"Protocol error: a request of more than {limits.max_request_bytes} bytes"
                        break
                    self._bulk = length
                    position = newline + 2
                end = position + self._bulk
                if end + 2 > size:
                    break
                args.append(bytes(buffer[position:end]))
                self._held_bytes += self._bulk
                position = end + 2
                self._bulk = -1
                self._remaining -= 1
            if error is not None or self._remaining:
                break
            commands.append(args)
            self._args = None
            self.boundary = self._offset + position
        if error is not None:
            self._buffer = bytearray()
            self._args = None
            return commands, error
        del buffer[:position]
        self._offset += position
        return commands, None


class HiredisParser:
    """hiredis for multibulk frames, the ``PythonParser`` for the rest (module docstring).

    hiredis does not say where a frame ended, so each frame's length is computed from what it
    returned (a canonical encoding, checked against the bytes: a frame written otherwise, such as a
    length with leading zeros, is handed to the ``PythonParser``). ``_unattributed`` holds the bytes
    fed to hiredis that belong to no complete frame yet; while it holds part of a request, a shadow
    ``PythonParser`` reads the same bytes to enforce the bounds from each header."""

    __slots__ = ("_limits", "_hiredis", "_reader", "_unattributed", "_shadow", "_python")

    def __init__(self, limits: RespLimits) -> None:
        import hiredis

        self._hiredis = hiredis
        self._limits = limits
        self._reader = hiredis.Reader()
        self._unattributed = bytearray()
        self._shadow: PythonParser | None = None
        self._python: PythonParser | None = None  # in charge until the next request boundary

    @property
    def partial(self) -> bool:
        if self._python is not None:
            return self._python.partial
        return bool(self._unattributed)

    @property
    def partial_bytes(self) -> int:
        checker = self._python or self._shadow
        return checker.partial_bytes if checker is not None else len(self._unattributed)

    def feed(self, data: bytes) -> tuple[list[Command], str | None]:
        if not data:
            return [], None
        python = self._python
        if python is not None:
            parsed, error = python.feed(data)
            if error is None and not python.partial:
                self._python = None  # at a request boundary: back to hiredis
            return parsed, error
        if not self._unattributed and data[0] != 42:  # an inline command
            return self._hand_over(data, [])
        commands: list[Command] = []
        shadow = self._shadow
        if shadow is not None:
            # The shadow reads all of ``data`` first: every header in it is checked before hiredis
            # sees it, whichever frame it belongs to.
            checked, error = shadow.feed(data)
            if error is not None:
                self._reset()
                return checked, error  # the shadow started where hiredis's first frame here starts
            if not shadow.partial:
                self._shadow = None
        else:
            # No frame is half-read: hiredis would meet each header of ``data`` first. Each one
            # that announces an aggregate of 10 elements or more is let through only at a frame
            # boundary, as a request's count within the bound; anything else goes to the Python
            # parser from the last boundary (what it is, nested or part of a value, is its call).
            fed = 0
            for start, count in _large_aggregate_headers(data):
                if self._hiredis_frames(data[fed:start], commands):
                    return self._hand_over(bytes(self._unattributed) + data[start:], commands)
                fed = start
                if self._unattributed or data[start] != 42 or count > self._limits.max_arguments:
                    return self._hand_over(bytes(self._unattributed) + data[start:], commands)
            data = data[fed:] if fed else data
        unattributed = self._unattributed
        if self._hiredis_frames(data, commands) or (unattributed and unattributed[0] != 42):
            # a frame hiredis may not take, or an inline command begun after the last frame (which
            # hiredis would read as a reply, and a shadow would parse only to check it)
            return self._hand_over(bytes(unattributed), commands)
        if unattributed and self._shadow is None:
            shadow = self._shadow = PythonParser(self._limits)
            _, error = shadow.feed(bytes(unattributed))
            if error is not None:
                self._reset()
                return commands, error
        return commands, None

    def _hiredis_frames(self, data: bytes, commands: list[Command]) -> bool:
        """Feed ``data`` to hiredis and append the requests it completes to ``commands``; True when
        a frame is not one hiredis may take (``_unattributed`` then starts with that frame)."""
        if not data:
            return False
        unattributed = self._unattributed
        unattributed += data
        reader = self._reader
        reader.feed(data)
        limits = self._limits
        offset = 0
        try:
            while True:
                try:
                    frame = reader.gets()
                except self._hiredis.ProtocolError:
                    return True
                if frame is False:
                    return False
                size = _frame_size(frame, limits, unattributed, offset)
                if size is None:
                    return True
                offset += size
                if frame:
                    commands.append(frame)
        finally:
            del unattributed[:offset]

    def _reset(self) -> None:
        self._reader = self._hiredis.Reader()
        self._unattributed = bytearray()
        self._shadow = None

    def _hand_over(self, data: bytes, commands: list[Command]) -> tuple[list[Command], str | None]:
        """Let a ``PythonParser`` take the stream from a request boundary (``data`` from there)."""
        self._reset()
        python = PythonParser(self._limits)
        parsed, error = python.feed(data)
        commands.extend(parsed)
        if error is None and python.partial:
            self._python = python
        return commands, error


#: the canonical header of a bulk string of each length below ``_TABULATED`` (``$<len>``), and the
#: count of each canonical array header up to it (``*<count>``): a lookup costs a fraction of parsing
#: or formatting one (a larger request is the parser behind's)
_TABULATED = 1024
_BULK_HEADERS = [b"$%d" % length for length in range(_TABULATED)]
_ARRAY_COUNTS = {b"*%d" % count: count for count in range(1, _TABULATED)}


class CanonicalFrames:
    """The canonical requests of a read first, the rest to ``inner`` (module docstring).

    Work stays bounded by the bytes received: a read is split once, and only at a request boundary
    (``inner`` holds no part of a request), so every byte reaches ``inner`` at most once more."""

    __slots__ = ("_inner", "_max_arguments", "_max_bulk", "_max_request", "_taken")

    def __init__(self, inner: Parser, limits: RespLimits) -> None:
        self._inner = inner
        self._max_arguments = limits.max_arguments
        self._max_bulk = limits.max_bulk_bytes
        self._max_request = limits.max_request_bytes
        self._taken = True  # the last read was all canonical requests: ``inner`` holds nothing

    @property
    def partial(self) -> bool:
        return not self._taken and self._inner.partial

    @property
    def partial_bytes(self) -> int:
        return 0 if self._taken else self._inner.partial_bytes

    def feed(self, data: bytes) -> tuple[list[Command], str | None]:
        inner = self._inner
        if (not self._taken and inner.partial) or data[:1] != b"*":
            self._taken = False
            return inner.feed(data)
        commands, used = self._split(data)
        if used == len(data):
            self._taken = True
            return commands, None
        self._taken = False
        rest, error = inner.feed(data[used:] if used else data)
        if commands:
            commands += rest
            return commands, error
        return rest, error

    def _split(self, data: bytes) -> tuple[list[Command], int]:
        """The leading canonical requests of ``data`` and the bytes they take. Each element's
        header must be exactly ``$<len>`` of the part that follows it: a value holding CR LF makes
        that part shorter than announced, and bytes other than CR LF after a value make it longer,
        so either stops here, before the request, and the parser behind answers it."""
        parts = data.split(b"\r\n")
        last = len(parts) - 1  # parts[last] follows the final CR LF: never a whole element
        commands: list[Command] = []
        index = 0
        max_arguments, max_bulk, max_request = self._max_arguments, self._max_bulk, self._max_request
        safe_count = max_request // max(max_bulk, 1)  # no request of at most this many elements is too large
        headers, counts = _BULK_HEADERS, _ARRAY_COUNTS
        while index < last:
            count = counts.get(parts[index], 0)  # 0: not an array header written canonically
            end = index + 1 + 2 * count
            if count == 0 or count > max_arguments or end > last:
                break
            element = index + 1
            while element < end:
                length = len(parts[element + 1])
                if length > max_bulk or parts[element] != (
                        headers[length] if length < _TABULATED else b"$%d" % length):
                    break
                element += 2
            else:
                args = parts[index + 2:end:2]
                if count > safe_count and sum(map(len, args)) > max_request:
                    break
                commands.append(args)
                index = end
                continue
            break
        if index == last:
            return commands, len(data) - len(parts[last])
        return commands, sum(map(len, parts[:index])) + 2 * index


def _large_aggregate_headers(data: bytes) -> list[tuple[int, int]]:
    """Where ``data`` holds a header hiredis would answer with an aggregate of 10 or more elements
    (``_AGGREGATES``), and the count, in order. Shorter counts cost hiredis at most nine slots per
    four bytes received. Found with ``bytes.find`` (C, per type byte) rather than one regular
    expression, whose scan for a set of first bytes costs about ten times more per byte."""
    found: list[tuple[int, int]] = []
    last = len(data) - 4  # the shortest such header: a type byte, two digits, CR LF
    find = data.find
    for type_byte in _AGGREGATES:
        index = find(type_byte)
        while 0 <= index <= last:
            if 47 < data[index + 2] < 58:  # a second digit: cheap to test, rare outside such headers
                count = _LARGE_COUNT.match(data, index + 1)
                if count is not None:
                    found.append((index, int(data[index + 1:count.end() - 2])))
            index = find(type_byte, index + 1)
    if len(found) > 1:
        found.sort()
    return found


def _frame_size(frame: object, limits: RespLimits, data: bytearray, offset: int) -> int | None:
    """The bytes of ``frame`` (a hiredis reply) at ``data[offset:]`` if it is a request within the
    bounds, encoded canonically; else None.

    hiredis returns a simple string (``+text``) as bytes, as it does a bulk string, so each element
    must be seen to start with ``$`` where the canonical encoding puts it: the first element that is
    not a bulk string sits exactly there (every element before it was a bulk string of canonical
    length: hiredis refuses leading zeros), so this finds it (the fuzz target did not, before: a
    ``+`` element whose shorter encoding happened to end on a CR LF was taken for a request)."""
    if frame is None or frame == []:  # *-1 or *0: skipped
        newline = data.find(b"\r\n", offset)
        return newline + 2 - offset if newline >= 0 else None
    if type(frame) is not list or len(frame) > limits.max_arguments:
        return None
    count = str(len(frame)).encode()
    end = offset + len(count) + 3
    largest = limits.max_bulk_bytes
    size = len(data)
    for arg in frame:
        if type(arg) is not bytes or end >= size or data[end] != 36:  # '$'
            return None
        length = len(arg)
        if length > largest:
            return None
        end += length + (6 if length < 10 else 7 if length < 100 else 5 + len(str(length)))
    if (end > size or data[offset] != 42 or data[offset + 1:offset + 1 + len(count)] != count
            or data[end - 2:end] != b"\r\n"):
        return None
    return end - offset


#: picks the parser of a server process: ``python`` for the pure one, ``hiredis`` (or unset) for
#: hiredis's where it is installed (an operator's way around a hiredis problem, and how the tests run
#: a real server with each parser)
PARSER_VARIABLE = "OKAPI_RESP_PARSER"


def hiredis_preferred() -> bool:
    """What ``PARSER_VARIABLE`` asks for; ValueError for a value that names no parser."""
    choice = os.environ.get(PARSER_VARIABLE, "hiredis")
    if choice not in ("hiredis", "python"):
        raise ValueError(f"{PARSER_VARIABLE} must be hiredis or python, not {choice!r}")
    return choice == "hiredis"


def make_parser(limits: RespLimits, prefer_hiredis: bool = True) -> Parser:
    """hiredis's parser when the package is installed (and ``prefer_hiredis``), else the pure one,
    behind ``CanonicalFrames``."""
    inner: Parser = HiredisParser(limits) if prefer_hiredis and hiredis_available() else PythonParser(limits)
    return CanonicalFrames(inner, limits)


def hiredis_available() -> bool:
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return False
    return True
