"""Counters: a PN-counter CRDT held in ordinary versions (docs/protocol.md, "Counters").

A counter update is a version like any other (timestamped, with its dependencies, replicated,
persisted, made visible by the protocol's rules); only its value is special: ``MAGIC`` followed by
the counter's *state*, never shown to clients. A state holds

- ``epoch``: the order ``(timestamp, source_dc)`` of the string or tombstone the counter started
  from (``(0, 0)``: the key had no version), and ``base``, that string's integer (0 for none);
- per DC, the cumulative totals ``(P, N)`` of the increments and decrements made in that DC since
  the epoch.

Each DC only ever raises its own totals, so states of one epoch merge by maximum per DC: the merge
is commutative, associative and idempotent, and a resent, caught-up or repaired version counts
once (a delta would count once per delivery). A read (``resolve``) merges every version of the
key visible to it:

- the *current epoch* is the newest of the visible strings and tombstones and the epochs the
  visible counter versions name; the same versions give the same epoch in every DC;
- a counter version of the current epoch contributes; one of an older epoch was reset by a SET or
  DELETE it did not see and contributes nothing (*a SET or DELETE wins over the increments it did
  not observe*, the same rule in every DC);
- the value is ``base + sum(P - N)``, rendered as a decimal integer like Redis's GET.

A DC's own totals are taken from its newest version in the chain, visible or not: the partition
is the only writer of its DC's entry, so the entry only grows (``increment``).

GC (``collectable``) may drop a version only when no snapshot that may still be read would count
it: it is older than the newest universally visible version and superseded by that version's
epoch, or its totals are dominated by the universally visible versions of the same epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from okapikv.core.mvstore import COUNTER_MAGIC, Version
from okapikv.core.vectors import Vector, merge_max

#: The first bytes of a counter's stored value. Client values may not start with them
#: (``reserved``), so a stored value is a counter exactly when it does.
MAGIC = COUNTER_MAGIC
#: Redis's integer range: INCR refuses a result outside it
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
NOT_AN_INTEGER = "value is not an integer or out of range"
OVERFLOW = "increment or decrement would overflow"

Order = tuple[int, int]
NO_EPOCH: Order = (0, 0)


@dataclass(frozen=True, slots=True)
class CounterState:
    epoch: Order
    base: int
    totals: tuple[tuple[int, int], ...]  # (P, N) per DC

    @property
    def value(self) -> int:
        return self.base + sum(p - n for p, n in self.totals)


def is_counter(value: bytes | None) -> bool:
    return value is not None and value.startswith(MAGIC)


def reserved(value: bytes) -> str | None:
    """Why a client's value cannot be stored, or None: values beginning with ``MAGIC`` would read
    as a counter's state."""
    if value.startswith(MAGIC):
        return f"values beginning with {MAGIC!r} are reserved for counters"
    return None


# ---------------------------------------------------------------- encoding


def _varint(value: int, out: bytearray) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode(state: CounterState) -> bytes:
    """``MAGIC``, epoch timestamp, epoch DC, base (zigzag), DC count, then (P, N) per DC, as varints."""
    out = bytearray(MAGIC)
    base = state.base
    for number in (*state.epoch, (base << 1) if base >= 0 else ((-base << 1) - 1), len(state.totals)):
        _varint(number, out)
    for p, n in state.totals:
        _varint(p, out)
        _varint(n, out)
    return bytes(out)


def decode(value: bytes) -> CounterState:
    numbers: list[int] = []
    shift = number = 0
    for byte in value[len(MAGIC):]:
        number |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        numbers.append(number)
        shift = number = 0
    epoch_ts, epoch_dc, zigzag, count = numbers[:4]
    pairs = numbers[4:]
    if len(pairs) != 2 * count:
        raise ValueError(f"a counter state of {count} DCs holds {len(pairs)} totals")
    base = zigzag >> 1 if not zigzag & 1 else -((zigzag + 1) >> 1)
    return CounterState((epoch_ts, epoch_dc), base, tuple(zip(pairs[0::2], pairs[1::2], strict=True)))


# ---------------------------------------------------------------- reads


def _merge_totals(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    return tuple((max(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b, strict=True))


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a read of a key finds: ``version`` (the newest visible, a string or tombstone), or a
    counter's merged ``state`` and the versions it merged (``contributors``, newest first)."""

    version: Version | None
    state: CounterState | None = None
    contributors: tuple[Version, ...] = ()


def resolve(chain: Sequence[Version], visible: Callable[[Version], bool], num_dcs: int) -> Resolved:
    """The key's content for a reader that sees the versions ``visible`` accepts (module docstring).
    ``chain`` is oldest first.

    Only the newest visible counter version of each DC is merged: a DC's versions dominate its
    older ones (its own entry only grows, and each of its writes merged a superset of what the one
    before it saw, a server's visible versions only growing; its epochs only move forward), so the
    scan stops once it has one of each DC, or at a visible string or tombstone (everything older
    is older than its epoch). An INCR costs the distance to those versions, not the chain's length."""
    epoch: Order | None = None
    string: Version | None = None
    counters: list[tuple[Version, CounterState]] = []
    seen: set[int] = set()
    for version in reversed(chain):
        if not visible(version):
            continue
        value = version.value
        if value is not None and value.startswith(MAGIC):
            if version.source_dc in seen:
                continue
            seen.add(version.source_dc)
            state = decode(value)
            counters.append((version, state))
            if epoch is None or state.epoch > epoch:
                epoch = state.epoch
            if len(seen) == num_dcs:
                break
        else:
            string = version
            if epoch is None or version.order > epoch:
                epoch = version.order
            break
    totals: tuple[tuple[int, int], ...] = ((0, 0),) * num_dcs
    base = 0
    merged: list[Version] = []
    for version, state in counters:
        if state.epoch == epoch:
            totals = _merge_totals(totals, state.totals)
            base = state.base
            merged.append(version)
    if not merged or epoch is None:  # no counter, or a string or tombstone newer than their epochs
        return Resolved(string)
    return Resolved(merged[0], CounterState(epoch, base, totals), tuple(merged))


def read_view(resolved: Resolved, num_dcs: int) -> Version | None:
    """What a reader is handed: the version itself, or for a counter a version holding its value in
    decimal, ordered as the newest merged version and depending on every merged one (its ``dv``
    the entry-wise maximum of theirs), so a session that read the sum depends on each increment."""
    if resolved.state is None:
        return resolved.version
    newest = resolved.contributors[0]
    dependency: Vector = newest.dependency_vector(num_dcs)
    for version in resolved.contributors[1:]:
        dependency = merge_max(dependency, version.dependency_vector(num_dcs))
    return Version(str(resolved.state.value).encode(), newest.timestamp, newest.source_dc, dependency)


# ---------------------------------------------------------------- INCR


def increment(chain: Sequence[Version], resolved: Resolved, dc: int, num_dcs: int, by: int) -> CounterState | str:
    """The state an increment of ``by`` in DC ``dc`` writes, given what its reader resolved; or why it
    is refused (Redis's messages): the key holds a string that is not a 64-bit integer, or the
    result leaves the 64-bit range."""
    state = resolved.state
    if state is None:
        version = resolved.version
        epoch, base = (NO_EPOCH, 0) if version is None else (version.order, 0)
        if version is not None and version.value is not None:
            parsed = parse_integer(version.value)
            if parsed is None:
                return NOT_AN_INTEGER
            base = parsed
        state = CounterState(epoch, base, ((0, 0),) * num_dcs)
    if not INT64_MIN <= state.value + by <= INT64_MAX:
        return OVERFLOW
    own_p, own_n = state.totals[dc]
    for version in reversed(chain):  # this DC's entry only grows: from its newest version, visible or not
        value = version.value
        if version.source_dc == dc and value is not None and value.startswith(MAGIC):
            other = decode(value)
            if other.epoch == state.epoch:
                own_p, own_n = max(own_p, other.totals[dc][0]), max(own_n, other.totals[dc][1])
            break
    own = (own_p + by, own_n) if by >= 0 else (own_p, own_n - by)
    totals = state.totals[:dc] + (own,) + state.totals[dc + 1 :]
    return CounterState(state.epoch, state.base, totals)


def parse_integer(value: bytes) -> int | None:
    """``value`` as Redis reads an integer (decimal, optional minus, no spaces or leading zeros or
    plus sign, within 64 bits), or None."""
    if not value or len(value) > 20:
        return None
    digits = value[1:] if value[:1] == b"-" else value
    if not digits.isdigit() or not digits.isascii() or (digits[:1] == b"0" and (len(digits) > 1 or value[:1] == b"-")):
        return None
    number = int(value)
    return number if INT64_MIN <= number <= INT64_MAX else None


# ---------------------------------------------------------------- GC


def collectable(chain: list[Version], keep_from: int, universally_visible: Callable[[Version], bool]) -> list[int]:
    """The positions below ``keep_from`` (the newest universally visible version, a counter) that GC
    may drop without changing any read a snapshot still allowed may make (module docstring): a
    version of an epoch older than the universally visible one, a string or tombstone below it (or
    its own, whose base its counters carry), and a counter version of that epoch older than a
    universally visible one of its DC, which dominates it (``resolve``). One pass, one decode each."""
    states = [decode(version.value) if version.value is not None and version.value.startswith(MAGIC) else None
              for version in chain[: keep_from + 1]]
    universal = [universally_visible(version) for version in chain[: keep_from + 1]]
    epoch = max(state.epoch if state is not None else chain[position].order
                for position, state in enumerate(states) if universal[position])
    newest: dict[int, int] = {}  # DC -> position of its newest universally visible counter version of the epoch
    for position in range(keep_from, -1, -1):
        state = states[position]
        if universal[position] and state is not None and state.epoch == epoch:
            newest.setdefault(chain[position].source_dc, position)
    drop: list[int] = []
    for position in range(keep_from):
        version, state = chain[position], states[position]
        if state is None:
            if version.order < epoch or (version.order == epoch and newest):
                drop.append(position)
        elif state.epoch < epoch or (state.epoch == epoch and newest.get(version.source_dc, -1) > position):
            drop.append(position)
    return drop
