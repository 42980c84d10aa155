"""A cluster grows by one DC online (docs/protocol.md, "Membership", "A new DC").

Every vector has one entry per DC, so a new DC d (index ``num_dcs``) makes every vector one entry
longer. The servers do not grow at one instant: each grows when it adopts a membership that names
d (``okapikv.core.membership``: a ``MembershipUpdate`` or the admin RPC with one more state), and
until every one has, servers that know d and servers that do not exchange messages. Two rules keep
that sound, both defined here (``PartitionServer.grow`` applies the first to what its
collaborators keep, with this module's ``fit``):

- **Growth** (``grow``): a server's vectors get an entry for d. Its ``vv[d]`` is 0 ("nothing from d
  yet"); so are its stable, GSV and horizon entries for d, except under a scalar protocol
  (GentleRain), whose stable vector repeats one time in every entry: there the new entry repeats it
  too, so the GST, ``min(stable)``, does not fall back. Every stored dependency vector, every parked
  request and every pending report is fitted the same way (a dependency on d that no one could have
  is 0).
- **Fitting** (``fit``, ``fit_message``): a vector from a server or client that knows fewer DCs is
  padded with 0, which is what it means (it depends on nothing of d, and has nothing of d); a vector
  that names more DCs than this server knows is cut to the DCs it knows. Cutting is sound because
  d joins as ``joining``: its servers refuse clients until it is a member, and ``okapi dc add``
  makes it one only once every server counts it, so before every server has grown no write of d
  exists for anything to depend on, and a minimum's entries for the other DCs stay lower bounds
  whatever happens to d's. A client request whose session names more DCs is cut only when the
  extra entries are 0, and refused otherwise (``session_problem``): it depends on a write of a DC
  this server does not know yet.

A server grows only up to ``PartitionServer.dc_limit`` (the DCs its driver has addresses for: `okapi
dc join` gives every server the grown config first); a message from a DC a server does not know is
dropped and changes nothing (the new DC's servers announce their membership first on every link).

A joining DC is not counted in any minimum until it has caught up at that server
(``Members.check_joining``), so the 0 entries never hold the others' stable vectors back, and the
stable vector never moves backwards: the old entries are kept and the new one starts at its floor.

Invariants (tested in ``tests/unit/test_core_growth.py``):
- growth keeps every old entry of every vector and adds one entry per new DC;
- ``fit(v, n)`` has ``n`` entries, agrees with ``v`` on the first ``min(len(v), n)`` and is 0 after;
- ``fit_message`` returns the message itself when every vector in it already fits.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from okapikv.core import messages
from okapikv.core.config import MAX_DCS
from okapikv.core.messages import Session
from okapikv.core.mvstore import Version
from okapikv.core.protocols import create_protocol
from okapikv.core.state import PartitionState
from okapikv.core.vectors import Vector

T = TypeVar("T")


class GrowthError(ValueError):
    """A growth that must not be made (fewer DCs, beyond ``MAX_DCS``, or a single-DC cluster)."""


def fit(vector: Vector, size: int) -> Vector:
    """``vector`` with exactly ``size`` entries: padded with 0 or cut (module docstring)."""
    length = len(vector)
    if length == size:
        return vector
    if length < size:
        return vector + (0,) * (size - length)
    return vector[:size]


def _pad(vector: Vector, size: int, scalar: bool) -> Vector:
    """A state vector grown to ``size``: 0 for the new entries, or a scalar protocol's one time."""
    if len(vector) >= size:
        return vector
    return vector + ((min(vector) if scalar and vector else 0),) * (size - len(vector))


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which fields of a message class hold vectors, and which hold messages that may."""

    vectors: tuple[str, ...]
    nested: tuple[str, ...]
    #: the message's one vector is its session's (every single-key client request): checked in place
    session_only: bool = False


_PLANS: dict[type, _Plan] = {}
#: message fields that may hold messages with vectors (a session, a page, a repair answer, updates)
_NESTED = ("session", "snapshot", "repair", "updates", "items")


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        types = messages.field_types(cls)
        vectors = tuple(name for name, declared in types if "Vector" in declared)
        nested = tuple(name for name, _ in types if name in _NESTED and name not in vectors)
        plan = _PLANS[cls] = _Plan(vectors, nested, not vectors and nested == ("session",))
    return plan


def session_only(kind: type) -> bool:
    """Whether a message of ``kind`` holds one vector, its session's (every single-key client
    request): fitted when ``len(message.session.stable)`` differs from the size, else as it is."""
    return _plan(kind).session_only


def fit_message(message: T, size: int) -> T:
    """``message`` with every vector in it fitted to ``size`` entries (``fit``); the message itself
    when every one fits already, which is the common case (every message a server handles passes
    here): it costs a length check per vector and allocates nothing."""
    kind = type(message)
    plan = _PLANS.get(kind)
    if plan is None:
        if not messages.is_message(message):
            return message
        plan = _plan(kind)
    if plan.session_only and len(message.session.stable) == size:  # type: ignore[attr-defined]
        return message
    changes: dict[str, Any] | None = None
    for name in plan.vectors:
        value = getattr(message, name)
        if value is not None and len(value) != size:
            if len(value) > size and kind is Session and any(value[size:]):
                continue  # refused by the server, not cut (``session_problem``)
            changes = changes or {}
            changes[name] = fit(value, size)
    for name in plan.nested:
        value = getattr(message, name)
        if isinstance(value, tuple):
            if not value or getattr(value[0], "dv", 0) is None and name == "updates":
                continue  # a stream without dependency vectors (every protocol's but Cure's)
            fitted: list[Any] | None = None
            for position, item in enumerate(value):
                new = fit_message(item, size)
                if new is not item and fitted is None:
                    fitted = list(value[:position])
                if fitted is not None:
                    fitted.append(new)
            if fitted is not None:
                changes = changes or {}
                changes[name] = tuple(fitted)
        elif value is not None:
            fitted_value = fit_message(value, size)
            if fitted_value is not value:
                changes = changes or {}
                changes[name] = fitted_value
    return messages.replace(message, **changes) if changes else message


def session_problem(stable: Vector, size: int) -> str | None:
    """Why a client's session vector cannot be fitted to ``size`` DCs, or None: it names more DCs and
    depends on one of them (module docstring)."""
    if len(stable) <= size:
        return None
    unknown = [dc for dc in range(size, len(stable)) if stable[dc]]
    if not unknown:
        return None
    return (f"session vector has {len(stable)} entries and depends on DC index {unknown[0]}, which this server "
            f"does not know yet (it knows {size} DCs): the cluster is growing; retry shortly")


def grow(state: PartitionState, size: int, limit: int | None) -> bool:
    """Grow what a server's mechanisms share (``PartitionState``) to ``size`` DCs (module
    docstring): its config and protocol, its vectors, its store's dependency vectors and what is
    parked; ``limit``: ``PartitionServer.dc_limit``. Whether it grew (False: ``size`` DCs
    already); a growth that must not be made raises ``GrowthError`` and changes nothing. The
    server fits what its collaborators keep per DC after it (``PartitionServer.grow``)."""
    old = state.num_dcs
    if size == old:
        return False
    if size < old:
        raise GrowthError(f"a cluster of {old} DCs cannot shrink to {size}; remove a DC instead (okapi dc remove)")
    if size > MAX_DCS:
        raise GrowthError(f"a cluster has at most {MAX_DCS} DCs")
    if limit is not None and size > limit:
        raise GrowthError(f"this server knows the addresses of {limit} DCs, not {size}: give it the grown "
                          "config first (okapi dc join)")
    if old < 2:
        raise GrowthError("a cluster of one DC cannot grow online (its servers run no replication): restart it "
                          "with the larger config")
    config = replace(state.config, num_dcs=size)
    state.config = config
    state.num_dcs = size
    state.protocol = create_protocol(config.protocol, dc=state.dc, num_dcs=size)
    scalar = state.protocol.scalar
    stable, gsv, horizon = (_pad(vector, size, scalar) for vector in (state.stable, state.gsv, state.horizon))
    for dc in range(old, size):  # through the vectors' holders (``okapikv.core.clock``, ``okapikv.core.stable``)
        state.version_vector.add_dc(0)
        state.add_dc(stable[dc], gsv[dc], horizon[dc])
    state.store.fit_dependencies(lambda version: fit_version(version, size))
    state.parked = [replace(parked, message=fit_message(parked.message, size)) for parked in state.parked]
    state.next_tick = deque(replace(parked, message=fit_message(parked.message, size)) for parked in state.next_tick)
    return True


def fit_version(version: Version, size: int) -> Version:
    """``version`` with its dependency vector fitted to ``size`` DCs (``fit``): a version stored or
    recovered under a shorter DC list."""
    dv = version.dv
    if dv is None or len(dv) == size:
        return version
    return Version(version.value, version.timestamp, version.source_dc, fit(dv, size))
