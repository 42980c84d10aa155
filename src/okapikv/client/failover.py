"""Moving a client's session to another DC when its own stays unreachable (sans I/O).

``fallback``: servers of other DCs to move to when the client's DC has been unreachable for
``failover_after_s`` (``okapikv.client.retry.Attempts`` decides when). The session moves only once
the new DC has everything it depends on (``AdoptSession``, the rule in
``okapikv.core.session.adopt``; docs/protocol.md, "Sessions"): read-your-writes and monotonic reads
hold across the move. Writes of the session that never left the old DC are what can be missing; the
client waits for them at most ``failover_wait_s``, then raises ``FailoverTimeout`` (they may arrive
when the old DC comes back). A write retried in the new DC after its old server failed may be
applied twice (at-least-once, as for any retry).

``Move`` is the procedure as a state machine the clients pump: ``next(now)`` says what to do
(``Ask`` a server, ``Wait``, ``Moved``: done, or the ``OkapiError`` it ends with), ``answer(reply, now)`` hands it the
reply or the ``Failure``. Every address is asked for its ``ClusterInfo`` in order; one of another
DC of the same cluster is asked to adopt the session until it can or ``failover_wait_s`` passes,
then the next. The same machine, given the DC, is the adoption of a session whose connections
another session of the client moved (``Move(adopter=...)``): the clients share their connections
with their forks, which move as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from random import Random
from typing import Any

from okapikv.client.operations import SessionState
from okapikv.client.retry import Failure, Wait
from okapikv.client.topology import Topology
from okapikv.core.backoff import Backoff
from okapikv.errors import FailoverTimeout, OkapiError, ProtocolMismatch, Unavailable
from okapikv.wire import okapikv_pb2 as pb

CLUSTER_INFO = "ClusterInfo"
ADOPT_SESSION = "AdoptSession"


@dataclass(frozen=True, slots=True)
class Ask:
    """Call RPC ``method`` (``CLUSTER_INFO`` or ``ADOPT_SESSION``) of the server at ``address`` with
    ``request`` within ``timeout_s``, and hand the reply (or its ``Failure``) to ``Move.answer``."""

    address: str
    method: str
    request: Any
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Moved:
    """The DC of ``topology`` adopted the session: continue there with ``session``."""

    topology: Topology
    session: pb.Session


def candidate(topology: Topology, current: Topology, address: str) -> bool:
    """Whether the server at ``address`` (``topology``, from its ClusterInfo) is another DC of the
    client's cluster; ``ProtocolMismatch`` if it belongs to another cluster (a wrong fallback)."""
    if topology.cluster_id != current.cluster_id or topology.num_dcs != current.num_dcs:
        raise ProtocolMismatch(f"fallback {address} belongs to cluster {topology.cluster_id}, "
                               f"not {current.cluster_id}")
    return topology.dc != current.dc


def adopt_request(state: SessionState, from_dc: int) -> pb.AdoptSessionRequest:
    return pb.AdoptSessionRequest(session=state.message(), from_dc=from_dc)


def outcome(reply: pb.AdoptSessionResponse, current: Topology) -> pb.Session | str:
    """The adopted session of a ready reply, else what the DC still lacks (for the
    ``FailoverTimeout`` message)."""
    if reply.ready:
        adopted: pb.Session = reply.session
        return adopted
    lag = [f"{current.dc_names[dc]} by {us / 1000:.1f} ms" for dc, us in enumerate(reply.behind_us) if us]
    return "lacks updates of " + ", ".join(lag)


def no_dc(dc_name: str, lagging: Sequence[str], failover_wait_s: float, addresses: Sequence[str]) -> Unavailable:
    """The error when no other DC took a session of DC ``dc_name``: ``lagging`` says why each one
    that answered did not."""
    if lagging:
        return FailoverTimeout(
            f"DC {dc_name} is unreachable and no other DC received every write the session depends "
            f"on within {failover_wait_s:g} s ({'; '.join(lagging)}); writes that had not left DC "
            f"{dc_name} reach the others only once it is back")
    return Unavailable(f"DC {dc_name} is unreachable and so is every fallback ({', '.join(addresses)})")


class Move:
    """One move of a session of DC ``from_dc`` (``request``: its ``AdoptSession`` request) away from
    the DC of ``current``, to the first of ``addresses`` whose DC adopts it (module docstring);
    with ``adopter``, only to that DC (whose servers the client already uses)."""

    __slots__ = ("_addresses", "_current", "_request", "_from_dc", "_wait_s", "_backoff", "_rng", "_index",
                 "_topology", "_adopter_address", "_deadline", "_number", "_behind", "_wait", "_lagging", "_result")

    def __init__(self, addresses: Sequence[str], current: Topology, request: pb.AdoptSessionRequest, *,
                 from_dc: int, wait_s: float, backoff: Backoff, rng: Random, now: float,
                 adopter: Topology | None = None) -> None:
        self._addresses = addresses
        self._current = current
        self._request = request
        self._from_dc = from_dc
        self._wait_s = wait_s
        self._backoff = backoff
        self._rng = rng
        self._lagging: list[str] = []
        self._wait: float | None = None  # a wait due before the next request
        self._result: Moved | OkapiError | None = None
        self._index = 0  # of the address asked (or to ask) for its ClusterInfo
        self._topology: Topology | None = None  # the DC asked to adopt the session
        self._adopter_address = ""  # the server of that DC asked
        self._deadline = 0.0  # of the adoption asked for
        self._number = 0  # adoption requests answered
        self._behind = ""
        if adopter is not None:
            self._index = len(addresses)
            self._adopt(adopter, adopter.addresses[0], now)

    def next(self, now: float) -> Ask | Wait | Moved | OkapiError:
        """What to do at ``now``."""
        if self._result is not None:
            return self._result
        if self._wait is not None:
            wait, self._wait = self._wait, None
            return Wait(wait)
        topology = self._topology
        if topology is not None:
            if now < self._deadline:
                return Ask(self._adopter_address, ADOPT_SESSION, self._request, self._deadline - now)
            self._lagging.append(f"DC {topology.dc_name} {self._behind or 'did not answer'}")
            self._topology = None
            self._index += 1
        if self._index >= len(self._addresses):
            self._result = no_dc(self._current.dc_names[self._from_dc], self._lagging, self._wait_s,
                                 self._addresses)
            return self._result
        return Ask(self._addresses[self._index], CLUSTER_INFO, pb.ClusterInfoRequest(), self._wait_s)

    def answer(self, reply: Any, now: float) -> None:
        """The reply to the last ``Ask`` (a ``Failure`` if the call failed)."""
        topology = self._topology
        if topology is None:
            self._described(reply, now)
            return
        if isinstance(reply, Failure):
            self._behind = f"did not answer ({reply.code or 'connection broken'})"
        else:
            adopted = outcome(reply, self._current)
            if not isinstance(adopted, str):
                self._result = Moved(topology, adopted)
                return
            self._behind = adopted
        self._number += 1
        self._wait = min(self._backoff.delay_s(self._number, self._rng), max(self._deadline - now, 0.0))

    def _described(self, reply: Any, now: float) -> None:
        address = self._addresses[self._index]
        if isinstance(reply, Failure):
            self._index += 1
            return
        try:
            topology = Topology.from_cluster_info(reply, address)
            other = candidate(topology, self._current, address)
        except OkapiError as error:  # a wrong fallback: it says so, rather than moving anywhere
            self._result = error
            return
        if other:
            self._adopt(topology, address, now)
        else:
            self._index += 1

    def _adopt(self, topology: Topology, address: str, now: float) -> None:
        self._topology = topology
        self._adopter_address = address
        self._deadline = now + self._wait_s
        self._number = 0
        self._behind = ""
