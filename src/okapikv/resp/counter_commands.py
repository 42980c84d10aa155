"""INCR, INCRBY, DECR and DECRBY on the RESP port: okapikv's counters (docs/protocol.md, "Counters").

A counter is a PN-counter CRDT (``okapikv.core.counters``): increments made concurrently in
several DCs are all kept, where last-writer-wins would lose all but one. The replies and errors
are Redis's: the value after the increment (as the connection's session sees it, its own
increments included), ``-ERR value is not an integer or out of range`` for a key holding a string
that is not a 64-bit integer or an increment that is not one, ``-ERR increment or decrement would
overflow`` for a result outside 64 bits. INCRBYFLOAT is refused: a float's sum depends on the
order of its additions, which DCs do not share.
"""

from __future__ import annotations

from okapikv.core.counters import NOT_AN_INTEGER, OVERFLOW, parse_integer
from okapikv.resp import replies
from okapikv.resp.operations import SessionOperations

_SUMMARY = ("INCR of a PN-counter CRDT at the key's server: every DC's increments kept (merged by "
            "maximum per DC), the value the session sees returned")

#: (name, arity, the increment's sign: 1 or -1, whether the increment is an argument)
COUNTER_COMMANDS = (("incr", 2, 1, False), ("incrby", 3, 1, True), ("decr", 2, -1, False), ("decrby", 3, -1, True))
COUNTER_SUMMARY = _SUMMARY
#: the reason INCRBYFLOAT is refused
NO_FLOAT = ("a float counter's sum depends on the order of its additions, which DCs do not share; use "
            "INCRBY with integer units")


class CounterCommands:
    """The Executor's counter commands (``okapikv.resp.commands.Executor`` inherits them)."""

    operations: SessionOperations

    async def _incr(self, args: list[bytes]) -> bytes:
        return await self._add(args[1], 1)

    async def _decr(self, args: list[bytes]) -> bytes:
        return await self._add(args[1], -1)

    async def _incrby(self, args: list[bytes]) -> bytes:
        by = parse_integer(args[2])
        if by is None:
            return replies.error(f"ERR {NOT_AN_INTEGER}")
        return await self._add(args[1], by)

    async def _decrby(self, args: list[bytes]) -> bytes:
        by = parse_integer(args[2])
        if by is None:
            return replies.error(f"ERR {NOT_AN_INTEGER}")
        if by == -(1 << 63):  # its negation leaves 64 bits (Redis's own message)
            return replies.error("ERR decrement would overflow")
        return await self._add(args[1], -by)

    async def _add(self, key: bytes, by: int) -> bytes:
        return replies.integer(await self.operations.incr(key, by))


__all__ = ["COUNTER_COMMANDS", "COUNTER_SUMMARY", "NO_FLOAT", "OVERFLOW", "CounterCommands"]
