"""What both clients share for failover (``okapikv.client.failover``) and the session replacement
it ends with (``SessionState.replace``); the moves themselves, with real servers, are in
``tests/integration/test_durability.py``."""

from __future__ import annotations

import dataclasses

import pytest

from okapikv.client import failover
from okapikv.client.aio import AsyncClient
from okapikv.client.operations import SessionState
from okapikv.client.sync import Client
from okapikv.client.topology import Topology
from okapikv.errors import FailoverTimeout, ProtocolMismatch, Unavailable
from okapikv.wire import okapikv_pb2 as pb

HERE = Topology(cluster_id="c1", protocol="okapi", dc=0, dc_names=("a", "b", "c"), num_partitions=2,
                addresses=("127.0.0.1:1", "127.0.0.1:2"), max_key_bytes=1024, max_value_bytes=4096,
                max_message_bytes=1 << 20)


def test_only_another_dc_of_the_same_cluster_is_a_candidate() -> None:
    assert failover.candidate(dataclasses.replace(HERE, dc=1), HERE, "x:1")
    assert not failover.candidate(HERE, HERE, "x:1")
    with pytest.raises(ProtocolMismatch, match="fallback x:1 belongs to cluster c2, not c1"):
        failover.candidate(dataclasses.replace(HERE, cluster_id="c2", dc=1), HERE, "x:1")
    with pytest.raises(ProtocolMismatch):
        failover.candidate(dataclasses.replace(HERE, dc=1, dc_names=("a", "b")), HERE, "x:1")


def test_the_error_says_which_dc_lacks_what() -> None:
    reply = pb.AdoptSessionResponse(ready=False, behind_us=[0, 0, 2500])
    lag = failover.outcome(reply, HERE)
    assert lag == "lacks updates of c by 2.5 ms"
    assert failover.outcome(pb.AdoptSessionResponse(ready=True, session=pb.Session(stable=[1, 2, 3], dt=4)),
                            HERE) == pb.Session(stable=[1, 2, 3], dt=4)
    error = failover.no_dc("a", [f"DC b {lag!s}"], 10, ["x:1"])
    assert isinstance(error, FailoverTimeout)
    assert "DC a is unreachable" in str(error) and "(DC b lacks updates of c by 2.5 ms)" in str(error)
    error = failover.no_dc("a", [], 10, ["x:1", "y:2"])
    assert type(error) is Unavailable and "so is every fallback (x:1, y:2)" in str(error)


def test_a_replaced_session_is_the_adopted_one_not_a_merge() -> None:
    state = SessionState(3)
    state.merge(pb.Session(stable=[50, 40, 30], dt=90))
    wire_before = state.wire()
    state.replace(pb.Session(stable=[20, 45, 10], dt=60))
    assert state.current.stable == (20, 45, 10) and state.current.dt == 60
    assert state.wire() != wire_before
    assert state.message() == pb.Session(stable=[20, 45, 10], dt=60)


@pytest.mark.parametrize(("after", "wait"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)])
def test_failover_times_must_be_positive(after: float, wait: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        AsyncClient("127.0.0.1:1", fallback=["127.0.0.1:2"], failover_after_s=after, failover_wait_s=wait)
    with pytest.raises(ValueError, match="must be positive"):
        Client("127.0.0.1:1", fallback=["127.0.0.1:2"], failover_after_s=after, failover_wait_s=wait)
