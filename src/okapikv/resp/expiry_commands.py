"""Expiring keys on the RESP port: SET's EX, PX, EXAT and PXAT, SETEX, PSETEX, EXPIRE, PEXPIRE,
EXPIREAT, PEXPIREAT, TTL, PTTL, PERSIST and GETEX (docs/protocol.md, "Expiry").

A key's expiry is part of its version: SET with an expiry writes both, and EXPIRE, PERSIST and
GETEX with an option write the key's value again with the new expiry, a write like any other
(last-writer-wins across DCs: the later write of the TTL wins). Which clock decides: the key's
server's, in the cluster's microseconds; an expiry in the past (EXPIRE 0, a negative TTL, EXAT
before now) makes the key absent at once, as Redis deletes it. On a counter key they set the
counter's expiry, part of its CRDT state (the latest expiry write wins; INCR keeps it). Replies
and errors are Redis's.
EXPIRE's NX, XX, GT and LT are refused: each is a condition another DC may be changing.
"""

from __future__ import annotations

from okapikv.core.counters import NOT_AN_INTEGER, parse_integer
from okapikv.resp import replies
from okapikv.resp.operations import SessionOperations
from okapikv.resp.operations import WantedExpiry as Expiry

#: the largest time to live or Unix time in milliseconds accepted (Redis refuses what overflows)
MAX_MS = 1 << 62
#: SET's options that set an expiry, and the factor to milliseconds; ``AT``: an absolute Unix time
_UNITS = {b"EX": (1000, False), b"PX": (1, False), b"EXAT": (1000, True), b"PXAT": (1, True)}

#: (name, arity, summary) of each command this module serves
EXPIRY_COMMANDS = (
    ("setex", 4, "PUT with a time to live in seconds (the expiry is part of the version)"),
    ("psetex", 4, "PUT with a time to live in milliseconds"),
    ("expire", -3, "a new version of the key: its value with the expiry (later TTL write wins)"),
    ("pexpire", -3, "EXPIRE in milliseconds"),
    ("expireat", -3, "EXPIRE at a Unix time in seconds"),
    ("pexpireat", -3, "EXPIRE at a Unix time in milliseconds"),
    ("ttl", 2, "the key's time left in seconds at its server (-2 absent, -1 no expiry)"),
    ("pttl", 2, "the key's time left in milliseconds"),
    ("persist", 2, "a new version of the key: its value without expiry (when it had one)"),
    ("getex", -2, "GET, and with EX/PX/EXAT/PXAT/PERSIST a new version with that expiry"),
)
_CONDITIONAL = ("okapikv has no conditional writes: an always-available, replicated write cannot check a "
                "condition that another DC may be changing at the same time")


def parse_expiry(unit: bytes, amount: bytes, command: str) -> Expiry | bytes:
    """``unit`` (EX, PX, EXAT, PXAT) and its argument, or Redis's error reply."""
    number = parse_integer(amount)
    if number is None:
        return replies.error(f"ERR {NOT_AN_INTEGER}")
    factor, absolute = _UNITS[unit]
    if number <= 0 and command in ("set", "setex", "psetex", "getex"):
        return replies.error(f"ERR invalid expire time in '{command}' command")
    if abs(number) * factor > MAX_MS:
        return replies.error(f"ERR invalid expire time in '{command}' command")
    if absolute:
        return Expiry(at_ms=max(number * factor, 1))
    if number <= 0:
        return Expiry(at_ms=1)  # in the past: absent at once
    return Expiry(ttl_ms=number * factor)


def parse_set_options(options: list[bytes], refused: dict[bytes, str]) -> tuple[bool, Expiry | None] | bytes:
    """SET's options after the value: (GET given, the expiry), or the error reply; the options
    in ``refused`` (NX, XX, KEEPTTL) are refused with their reason."""
    get = False
    found: Expiry | None = None
    position = 0
    while position < len(options):
        upper = options[position].upper()
        if upper == b"GET" and not get:
            get = True
        elif upper in _UNITS and found is None and position + 1 < len(options):
            parsed = parse_expiry(upper, options[position + 1], "set")
            if isinstance(parsed, bytes):
                return parsed
            found = parsed
            position += 1
        elif upper in refused:
            return replies.error(f"ERR SET {upper.decode()} is not supported: {refused[upper]}")
        else:
            return replies.error("ERR syntax error")
        position += 1
    return get, found


class ExpiryCommands:
    """The Executor's expiry commands (``okapikv.resp.commands.Executor`` inherits them)."""

    operations: SessionOperations
    resp3: bool

    async def _setex(self, args: list[bytes]) -> bytes:
        return await self._set_expiring(args, b"EX", "setex")

    async def _psetex(self, args: list[bytes]) -> bytes:
        return await self._set_expiring(args, b"PX", "psetex")

    async def _set_expiring(self, args: list[bytes], unit: bytes, command: str) -> bytes:
        parsed = parse_expiry(unit, args[2], command)
        if isinstance(parsed, bytes):
            return parsed
        await self.operations.put(args[1], args[3], parsed)
        return replies.OK

    async def _expire(self, args: list[bytes]) -> bytes:
        return await self._expire_by(args, b"EX", "expire")

    async def _pexpire(self, args: list[bytes]) -> bytes:
        return await self._expire_by(args, b"PX", "pexpire")

    async def _expireat(self, args: list[bytes]) -> bytes:
        return await self._expire_by(args, b"EXAT", "expireat")

    async def _pexpireat(self, args: list[bytes]) -> bytes:
        return await self._expire_by(args, b"PXAT", "pexpireat")

    async def _expire_by(self, args: list[bytes], unit: bytes, command: str) -> bytes:
        parsed = parse_expiry(unit, args[2], command)
        if isinstance(parsed, bytes):
            return parsed
        if len(args) > 3:
            option = args[3].upper()
            if option in (b"NX", b"XX", b"GT", b"LT"):
                return replies.error(f"ERR {command.upper()} {option.decode()} is not supported: {_CONDITIONAL}")
            return replies.error(f"ERR Unsupported option {args[3].decode(errors='replace')}")
        state = await self.operations.expire(args[1], parsed)
        return replies.integer(int(state.changed))

    async def _ttl(self, args: list[bytes]) -> bytes:
        ttl_us = (await self.operations.expire(args[1], None)).ttl_us
        return replies.integer(ttl_us if ttl_us < 0 else (ttl_us // 1000 + 500) // 1000)

    async def _pttl(self, args: list[bytes]) -> bytes:
        ttl_us = (await self.operations.expire(args[1], None)).ttl_us
        return replies.integer(ttl_us if ttl_us < 0 else (ttl_us + 999) // 1000)

    async def _persist(self, args: list[bytes]) -> bytes:
        return replies.integer(int((await self.operations.expire(args[1], Expiry(persist=True))).changed))

    async def _getex(self, args: list[bytes]) -> bytes:
        options = args[2:]
        wanted: Expiry | None = None
        if options:
            upper = options[0].upper()
            if upper == b"PERSIST" and len(options) == 1:
                wanted = Expiry(persist=True)
            elif upper in _UNITS and len(options) == 2:
                parsed = parse_expiry(upper, options[1], "getex")
                if isinstance(parsed, bytes):
                    return parsed
                wanted = parsed
            else:
                return replies.error("ERR syntax error")
        return replies.bulk_or_null((await self.operations.expire(args[1], wanted)).value, self.resp3)


__all__ = ["EXPIRY_COMMANDS", "Expiry", "ExpiryCommands", "parse_expiry", "parse_set_options"]
