"""Expiry (TTL): a key's expiry is part of its version (docs/protocol.md, "Expiry").

A version written with an expiry holds ``MAGIC``, the expiry as 8 bytes (big-endian microseconds
of the cluster's physical clock, the HLC's physical part: ``okapikv.core.timestamps``) and then
the client's value, so it is replicated, persisted, caught up and repaired with the version,
unchanged. Client values may not begin with ``MAGIC`` (``reserved``).

The rule, the same in every DC: a version whose expiry is at or before the reading server's
physical clock (``now_us``, the clock every core step is given) reads as absent, as a tombstone
would (``view``). Each DC decides with its own clock, so a key is absent in every DC once every
DC's clock has passed the expiry: at most the cluster's maximum clock offset after the expiry's
own DC saw it pass (``max_clock_offset_us``, which servers enforce).

EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, PERSIST and GETEX with an option write a new version of the
key, its value with the new expiry, depending on the version they read: concurrent writes of a
key's expiry (or of its value) resolve by last-writer-wins like any write, so the later write of
the TTL wins, in every DC. GC collects an expired version as it collects a tombstone. A counter's
expiry is not an envelope but part of its merged state (``okapikv.core.counters``).

A request's expiry is one signed number (``resolve``): 0 none, positive an absolute expiry in the
cluster's microseconds, negative a time to live in microseconds from the key's server's clock.
"""

from __future__ import annotations

from okapikv.core.mvstore import EXPIRY_MAGIC, Version

MAGIC = EXPIRY_MAGIC
_HEADER = len(MAGIC) + 8


def reserved(value: bytes) -> str | None:
    if value.startswith(MAGIC):
        return f"values beginning with {MAGIC!r} are reserved for expiring values"
    return None


def resolve(expires: int, now_us: int) -> int:
    """A request's expiry (module docstring) as an absolute time; 0: none. An absolute time at or
    before 0 is 1 (the key expires at once, as Redis's EXPIREAT in the past deletes it)."""
    if expires < 0:
        return now_us - expires
    return expires


def wrap(value: bytes, expires_us: int) -> bytes:
    """``value`` expiring at ``expires_us`` (0: ``value`` itself, no expiry)."""
    if not expires_us:
        return value
    return MAGIC + max(expires_us, 1).to_bytes(8, "big") + value


def split(value: bytes) -> tuple[bytes, int]:
    """A stored value's client value and expiry (0: none)."""
    if not value.startswith(MAGIC):
        return value, 0
    return value[_HEADER:], int.from_bytes(value[len(MAGIC):_HEADER], "big")


def expired(version: Version, now_us: int) -> bool:
    value = version.value
    return value is not None and value.startswith(MAGIC) and split(value)[1] <= now_us


def view(version: Version | None, now_us: int) -> Version | None:
    """What a reader at ``now_us`` is handed: an expiring version's client value, or, once expired,
    a version of no value (absent, as a tombstone) with the same order and dependencies."""
    if version is None or version.value is None or not version.value.startswith(MAGIC):
        return version
    payload, expires_us = split(version.value)
    return Version(payload if expires_us > now_us else None, version.timestamp, version.source_dc, version.dv)


def remaining_us(version: Version | None, now_us: int) -> int:
    """Redis's TTL in microseconds: -2 absent (or expired), -1 no expiry, else the time left."""
    if version is None or version.value is None:
        return -2
    _, expires_us = split(version.value)
    if not expires_us:
        return -1
    return expires_us - now_us if expires_us > now_us else -2
