"""The narrow interface every causal-consistency protocol implements, and its name registry.

Modelled on aioquic's congestion-control registry: one abstract base with keyword-only hooks,
and a decorator that registers each variant by name. The partition server (``core.server``, over
``core.state``) owns the state (version vector, stable vector, store) and asks the protocol only the
questions on which Okapi, Cure and GentleRain differ (docs/protocol.md, "Operations", "Cure",
"GentleRain"):

- how a PUT is timestamped, and whether it must wait (``assign_timestamp``);
- what dependency vector a version stores and replicates (``stored_dv``, ``replicated_dv``);
- when a version is visible to a GET (``visible``) and to a snapshot (``visible_in_snapshot``);
- how a RO-TX / SCAN snapshot is chosen and whether the coordinator waits (``snapshot``);
- whether a partition serving a slice of it waits (``slice_wait``);
- how stabilization results update the server's stable vector (``on_stabilized``);
- how many metadata bytes a replicated update carries (``update_metadata_bytes``).

Contract every implementation keeps (tested in ``tests/unit/test_protocols.py`` and the property
tests), because the server's garbage collection and session handling depend on it:
- every hook takes keyword arguments only, so a variant cannot take two vectors in the wrong order;
- ``assign_timestamp`` returns a timestamp above ``previous`` and ``max_dependency``, or a wait;
- ``visible`` and ``visible_in_snapshot`` are monotonic: a version visible under a vector stays
  visible under any entry-wise larger one (so one "universally visible" version hides every older
  one from every later read);
- ``on_stabilized`` never moves the stable vector backwards;
- ``snapshot_floor`` is a lower bound, entry-wise, of every snapshot the server will coordinate from
  now on, given a stable vector that only grows and a clock that only moves forward.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from mypy_extensions import mypyc_attr

from okapikv.core.mvstore import Version
from okapikv.core.timestamps import WaitForClock
from okapikv.core.vectors import Vector

TIMESTAMP_BYTES = 8
DC_ID_BYTES = 4


@dataclass(frozen=True, slots=True)
class WaitForStable:
    """The coordinator cannot proceed before the DC's stable time reaches ``threshold``."""

    threshold: int
    reason: str


@mypyc_attr(allow_interpreted_subclasses=True)  # a base of Okapi (okapikv.core.server, PartitionServer: why)
class Protocol(ABC):
    """One causal-consistency protocol, bound to the DC of the server that uses it."""

    name: ClassVar[str]
    #: whether DCs run the UST round (GSV exchange -> USV). Only Okapi does.
    uses_usv: ClassVar[bool] = False
    #: whether the periodic stabilization (VV reports -> GSV) runs at all.
    stabilizes: ClassVar[bool] = True
    #: whether the protocol's stable time, snapshots and sessions are one timestamp (GentleRain):
    #: its stabilization reports and broadcasts one time (``core.stabilization.GstRound``), and its
    #: slices and sessions travel as one time (``okapikv.wire.convert``), not a vector.
    scalar: ClassVar[bool] = False

    def __init__(self, *, dc: int, num_dcs: int) -> None:
        self.dc = dc
        self.num_dcs = num_dcs

    # ---------------------------------------------------------------- writes

    @abstractmethod
    def assign_timestamp(self, *, previous: int, max_dependency: int, now_us: int) -> int | WaitForClock:
        """Timestamp of a new local version, strictly above ``previous`` and ``max_dependency``."""

    def stored_dv(self, *, dependency: Vector, timestamp: int) -> Vector | None:
        """Dependency vector kept with a new local version: the client's, local entry = timestamp;
        ``None`` when every other entry is 0, the vector ``Version.dv = None`` stands for."""
        before, after = dependency[: self.dc], dependency[self.dc + 1 :]
        if not any(before) and not any(after):
            # No tuple per version for what None already says (every version of a 1-DC cluster):
            # 306 -> 258 B/key with 1M 8-byte keys and values (scripts/measure_store_memory.py).
            return None
        return before + (timestamp,) + after

    def replicated_dv(self, *, version: Version) -> Vector | None:
        """What of the dependency vector travels with replication (Okapi, GentleRain: nothing)."""
        return None

    def update_metadata_bytes(self) -> int:
        """Consistency metadata per replicated update: source DC and timestamp, plus Cure's vector."""
        return DC_ID_BYTES + TIMESTAMP_BYTES

    # ---------------------------------------------------------------- reads

    @abstractmethod
    def visible(self, *, version: Version, stable: Vector) -> bool:
        """Whether a GET may return ``version`` given the server's stable vector. A version of this
        DC is visible whatever the vector (a client reads its own DC's writes at once), under every
        protocol: the server does not ask about those (``PartitionServer._visible``)."""

    @abstractmethod
    def snapshot(self, *, stable: Vector, dt: int, now_us: int) -> Vector | WaitForStable:
        """Snapshot vector of a RO-TX / SCAN at its coordinator (after merging the client's stable)."""

    def slice_wait(self, *, snapshot: Vector, now_us: int) -> WaitForClock | None:
        """Whether a partition must wait before serving its slice of a snapshot read."""
        return None

    #: whether serving a slice raises the partition's clock to the snapshot's local entry, so it never
    #: later creates a version the snapshot should have seen (updateClockOnTx).
    raises_clock_on_slice: ClassVar[bool] = True

    @abstractmethod
    def visible_in_snapshot(self, *, version: Version, snapshot: Vector) -> bool:
        """Whether ``version`` belongs to the snapshot ``snapshot``."""

    # ---------------------------------------------------------------- stabilization

    @abstractmethod
    def on_stabilized(self, *, stable: Vector, gsv: Vector, usv: Vector | None) -> Vector:
        """The server's new stable vector after a stabilization round (never moves backwards)."""

    def snapshot_floor(self, *, stable: Vector, now_us_packed: int) -> Vector:
        """A lower bound of every snapshot this server will coordinate from now on (for GC)."""
        return stable[: self.dc] + (now_us_packed,) + stable[self.dc + 1 :]


ProtocolFactory = Callable[..., Protocol]
_REGISTRY: dict[str, type[Protocol]] = {}


def register(cls: type[Protocol]) -> type[Protocol]:
    _REGISTRY[cls.name] = cls
    return cls


def protocol_names() -> list[str]:
    return sorted(_REGISTRY)


def is_scalar(name: str) -> bool:
    """Whether the protocol ``name`` sends sessions and snapshots as one time (``Protocol.scalar``):
    what a client learns from the cluster's protocol name."""
    cls = _REGISTRY.get(name)
    return cls is not None and cls.scalar


def create_protocol(name: str, *, dc: int, num_dcs: int) -> Protocol:
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; choose one of {', '.join(protocol_names())}") from None
    return cls(dc=dc, num_dcs=num_dcs)
