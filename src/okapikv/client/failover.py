"""Moving a client's session to another DC when its own stays unreachable (both clients).

``fallback``: servers of other DCs to move to when the client's DC has been unreachable for
``failover_after_s``. The session moves only once the new DC has everything it depends on
(``AdoptSession``, the rule in ``okapikv.core.session.adopt``): read-your-writes and monotonic reads
hold across the move. Writes of the session that never left the old DC are what can be missing; the
client waits for them at most ``failover_wait_s``, then raises ``FailoverTimeout`` (they may arrive
when the old DC comes back). A write retried in the new DC after its old server failed may be
applied twice (at-least-once, as for any retry).

What the two clients share is here: the request, the reading of a reply, the checks and the errors.
How they wait differs (blocking calls, coroutines), and so does what moves: the blocking ``Client``
moves its own channels, an ``AsyncClient`` moves the connections all its forks share (see there).
"""

from __future__ import annotations

from collections.abc import Sequence

from okapikv.client.operations import SessionState
from okapikv.client.topology import Topology
from okapikv.errors import FailoverTimeout, ProtocolMismatch, Unavailable
from okapikv.wire import okapikv_pb2 as pb


def check_parameters(failover_after_s: float, failover_wait_s: float) -> None:
    if failover_after_s <= 0 or failover_wait_s <= 0:
        raise ValueError("failover_after_s and failover_wait_s must be positive")


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
