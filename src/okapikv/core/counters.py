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

A counter may expire (docs/protocol.md, "Expiry of counters"): the expiry is part of the state, a
last-writer-wins register ``expires`` (absolute microseconds, 0 none) tagged with the order
``expiry_order`` of the write that set it (an EXPIRE or PERSIST of the counter, or the expiring
string it started from). States of one epoch merge it by that order (the latest expiry write wins,
in every DC); INCR keeps it. A counter whose merged expiry has passed by the reader's clock reads
as absent, and an INCR on it starts a new epoch: ``(*expiry_order, 1)``, ordered just after the
expiry write and before any later write, the same in every DC that saw that expiry (so concurrent
increments after one expiry all count), from 0.

GC (``collectable``) may drop a version only when no snapshot that may still be read would count
it: it is older than the newest universally visible version and superseded by that version's
epoch, or its totals are dominated by the universally visible versions of the same epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from okapikv.core import expiry
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

#: ``(timestamp, source DC)``, and for the epoch a counter starts after an expiry ``(timestamp,
#: source DC, 1)`` of the expiry's write: it sorts after that write and before every later one
Order = tuple[int, ...]
NO_EPOCH: Order = (0, 0)
#: ``expiry_order`` of an EXPIRE or PERSIST not yet written: ``stamped`` gives it its version's order
PENDING: Order = (-1, -1)


@dataclass(frozen=True, slots=True)
class CounterState:
    epoch: Order
    base: int
    totals: tuple[tuple[int, int], ...]  # (P, N) per DC
    expires: int = 0  # absolute microseconds of the cluster's physical clock; 0: none
    expiry_order: Order = NO_EPOCH  # the write that set ``expires``; NO_EPOCH: none ever did

    @property
    def value(self) -> int:
        return self.base + sum(p - n for p, n in self.totals)

    def expired(self, now_us: int) -> bool:
        return 0 < self.expires <= now_us

    def remaining_us(self, now_us: int) -> int:
        """Redis's TTL in microseconds: -2 expired, -1 no expiry, else the time left."""
        if not self.expires:
            return -1
        return self.expires - now_us if self.expires > now_us else -2


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
    """``MAGIC``, epoch timestamp, epoch DC, base (zigzag), DC count, then (P, N) per DC, as varints;
    then, for a state with an expiry, an expiry write or an epoch after an expiry: the expiry, its
    write's timestamp and DC, and 1 for an epoch after an expiry (else 0)."""
    assert state.expiry_order != PENDING, "an expiry write's state is encoded once stamped"
    out = bytearray(MAGIC)
    base = state.base
    for number in (*state.epoch[:2], (base << 1) if base >= 0 else ((-base << 1) - 1), len(state.totals)):
        _varint(number, out)
    for p, n in state.totals:
        _varint(p, out)
        _varint(n, out)
    if state.expires or state.expiry_order != NO_EPOCH or len(state.epoch) > 2:
        for number in (state.expires, *state.expiry_order, len(state.epoch) - 2):
            _varint(number, out)
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
    pairs = numbers[4:4 + 2 * count]
    trailer = numbers[4 + 2 * count:]
    if len(pairs) != 2 * count or len(trailer) not in (0, 4):
        raise ValueError(f"a counter state of {count} DCs holds {len(numbers) - 4} numbers")
    base = zigzag >> 1 if not zigzag & 1 else -((zigzag + 1) >> 1)
    totals = tuple(zip(pairs[0::2], pairs[1::2], strict=True))
    if not trailer:
        return CounterState((epoch_ts, epoch_dc), base, totals)
    expires, expiry_ts, expiry_dc, after_expiry = trailer
    epoch: Order = (epoch_ts, epoch_dc, 1) if after_expiry else (epoch_ts, epoch_dc)
    return CounterState(epoch, base, totals, expires, (expiry_ts, expiry_dc))


def stamped(state: CounterState, order: Order) -> CounterState:
    """``state`` with a PENDING expiry write given its version's ``order`` (the register's tag)."""
    if state.expiry_order != PENDING:
        return state
    return CounterState(state.epoch, state.base, state.totals, state.expires, order)


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
    base = expires = 0
    expiry_order = NO_EPOCH
    merged: list[Version] = []
    for version, state in counters:
        if state.epoch == epoch:
            totals = _merge_totals(totals, state.totals)
            base = state.base
            if state.expiry_order > expiry_order:  # the latest expiry write wins
                expires, expiry_order = state.expires, state.expiry_order
            merged.append(version)
    if not merged or epoch is None:  # no counter, or a string or tombstone newer than their epochs
        return Resolved(string)
    return Resolved(merged[0], CounterState(epoch, base, totals, expires, expiry_order), tuple(merged))


def read_view(resolved: Resolved, num_dcs: int, now_us: int) -> Version | None:
    """What a reader at ``now_us`` is handed: the version itself (``expiry.view``), or for a counter
    a version holding its value in decimal (no value once expired), ordered as the newest merged
    version and depending on every merged one (its ``dv`` the entry-wise maximum of theirs), so a
    session that read the sum depends on each increment."""
    state = resolved.state
    if state is None:
        return expiry.view(resolved.version, now_us)
    newest = resolved.contributors[0]
    dependency: Vector = newest.dependency_vector(num_dcs)
    for version in resolved.contributors[1:]:
        dependency = merge_max(dependency, version.dependency_vector(num_dcs))
    value = None if state.expired(now_us) else str(state.value).encode()
    return Version(value, newest.timestamp, newest.source_dc, dependency)


# ---------------------------------------------------------------- INCR


def increment(chain: Sequence[Version], resolved: Resolved, dc: int, num_dcs: int, by: int,
              now_us: int) -> CounterState | str:
    """The state an increment of ``by`` in DC ``dc`` at ``now_us`` writes, given what its reader
    resolved; or why it is refused (Redis's messages): the key holds a string that is not a 64-bit
    integer, or the result leaves the 64-bit range. The expiry is kept (Redis's INCR keeps the
    TTL): an expiring integer string's becomes the counter's; an expired counter or string starts
    the epoch after its expiry, from 0 and without one."""
    state = _current(resolved, num_dcs, now_us)
    if isinstance(state, str):
        return state
    if not INT64_MIN <= state.value + by <= INT64_MAX:
        return OVERFLOW
    state = _with_own(chain, state, dc)
    own_p, own_n = state.totals[dc]
    own = (own_p + by, own_n) if by >= 0 else (own_p, own_n - by)
    return CounterState(state.epoch, state.base, state.totals[:dc] + (own,) + state.totals[dc + 1:],
                        state.expires, state.expiry_order)


def set_expiry(chain: Sequence[Version], resolved: Resolved, dc: int, expires_us: int) -> CounterState:
    """The state an EXPIRE (``expires_us`` absolute) or PERSIST (0) of a live counter in DC ``dc``
    writes: the counter as read, its own entry as ``increment`` takes it, the new expiry tagged
    PENDING until its version's order is known (``stamped``)."""
    assert resolved.state is not None
    state = _with_own(chain, resolved.state, dc)
    return CounterState(state.epoch, state.base, state.totals, expires_us, PENDING)


def _current(resolved: Resolved, num_dcs: int, now_us: int) -> CounterState | str:
    """The state an increment builds on: the merged counter, or one started from the string,
    tombstone or nothing the reader found; after an expiry, the epoch that follows it."""
    zeros = ((0, 0),) * num_dcs
    state = resolved.state
    if state is not None:
        if state.expired(now_us):
            return CounterState((*state.expiry_order[:2], 1), 0, zeros)
        return state
    version = resolved.version
    if version is None or version.value is None:
        return CounterState(NO_EPOCH if version is None else version.order, 0, zeros)
    payload, expires = expiry.split(version.value)
    if 0 < expires <= now_us:
        return CounterState((*version.order, 1), 0, zeros)
    parsed = parse_integer(payload)
    if parsed is None:
        return NOT_AN_INTEGER
    return CounterState(version.order, parsed, zeros, expires, version.order if expires else NO_EPOCH)


def _with_own(chain: Sequence[Version], state: CounterState, dc: int) -> CounterState:
    """``state`` with DC ``dc``'s entry, and the expiry if newer, taken from that DC's newest
    version of the epoch, visible or not: the partition is its entry's only writer, so the entry
    only grows, and each of its versions holds the latest expiry write it knew (``resolve``
    merges only a DC's newest version)."""
    for version in reversed(chain):
        value = version.value
        if version.source_dc == dc and value is not None and value.startswith(MAGIC):
            other = decode(value)
            if other.epoch != state.epoch:
                return state
            (p, n), (own_p, own_n) = state.totals[dc], other.totals[dc]
            totals = state.totals[:dc] + ((max(p, own_p), max(n, own_n)),) + state.totals[dc + 1:]
            expires, order = state.expires, state.expiry_order
            if other.expiry_order > order:
                expires, order = other.expires, other.expiry_order
            return CounterState(state.epoch, state.base, totals, expires, order)
    return state


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
