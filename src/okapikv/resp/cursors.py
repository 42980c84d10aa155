"""SCAN cursors that every Redis client can hold: decimal numbers below 2**64.

A SCAN over okapikv's ordered keys goes on after the last key it returned, so the cursor must name
that key. Redis clients parse cursors as unsigned 64-bit integers (go-redis, Jedis, Lettuce,
node-redis), so a cursor cannot carry an arbitrary key of up to 1 KiB. Two kinds of cursor:

- a key of at most ``INLINE_KEY_BYTES`` (7) bytes is the cursor itself: the number whose big-endian
  bytes are 0x01 and the key (below 2**56), stateless, valid on every server and forever;
- a longer key is kept in the server's ``CursorTable`` and the cursor is its entry's number (at or
  above 2**62, so the kinds never meet). The table is bounded (``CURSOR_TABLE_ENTRIES`` entries,
  oldest out first): a cursor used after its entry was pushed out, or on another server, gets
  ``ERR cursor expired``, and the SCAN starts again from 0. Entries go as fast as SCANs make them,
  so only a client that interleaves more than that many SCANs page by page loses one.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict

INLINE_KEY_BYTES = 7
CURSOR_TABLE_ENTRIES = 16_384
#: Table cursors are in [TABLE_BASE, 2**63): above every inline cursor, within a signed 64-bit integer.
TABLE_BASE = 1 << 62


class CursorTable:
    """The resume keys of long-keyed SCAN cursors of one server's RESP port (module docstring)."""

    __slots__ = ("_entries", "_next", "capacity")

    def __init__(self, capacity: int = CURSOR_TABLE_ENTRIES) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, bytes] = OrderedDict()
        # a random start: a cursor of an earlier run of this server is not taken for one of this run
        self._next = TABLE_BASE + secrets.randbelow(1 << 60)

    def encode(self, last_key: bytes) -> bytes:
        """The cursor of a SCAN that returned ``last_key`` last."""
        if len(last_key) <= INLINE_KEY_BYTES:
            return str(int.from_bytes(b"\x01" + last_key, "big")).encode()
        number = self._next
        self._next = number + 1 if number + 1 < 1 << 63 else TABLE_BASE
        self._entries[number] = last_key
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return str(number).encode()

    def decode(self, cursor: bytes) -> bytes | None | str:
        """Where the SCAN after ``cursor`` starts (the smallest key above the cursor's key; the
        empty key for cursor 0); None for a cursor no SCAN returned; the reason for an expired one."""
        if cursor == b"0":
            return b""
        if not cursor.isdigit() or cursor[:1] == b"0" or len(cursor) > 20:
            return None
        number = int(cursor)
        if number >= TABLE_BASE:
            if number >= 1 << 63:
                return None
            key = self._entries.get(number)
            if key is None:
                return "cursor expired (this server keeps the last few thousand); SCAN again from 0"
            return key + b"\x00"
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        if raw[:1] != b"\x01" or not 1 < len(raw) <= INLINE_KEY_BYTES + 1:
            return None
        return raw[1:] + b"\x00"
