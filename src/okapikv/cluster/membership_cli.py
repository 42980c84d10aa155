"""`okapi dc remove NAME`: take a DC lost for good out of a running cluster (docs/operations.md,
"Losing a region"; docs/protocol.md, "Membership").

The cluster is found as `okapi status` finds it (``--connect HOST:PORT``, ``--config FILE`` or the
local cluster `okapi up` started last). Every server is asked for its ClusterInfo: the newest
membership among the answers is the cluster's, and whether NAME's servers answer says whether the
DC is really gone. Refused (exit 2, nothing changed): an unknown name, the last member DC, and a
DC some of whose servers answer, unless ``--force``. Otherwise the next epoch, with NAME removed,
goes to every server that answers (``Admin.ChangeMembership``; each also passes it on over the
peer links), and the command waits, up to ``--timeout``, until every live server holds it and no
longer counts NAME in its stable vectors (the survivors have relayed what NAME sent to some of
them only). Exit 0 when that happened, 1 when the change was made but some server did not get
there in time (it will, once it is reachable: the change travels on the peer links).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from okapikv.cluster.status import TIMEOUT_S, Topology, resolve_topology
from okapikv.core.membership import REMOVED, Membership, MembershipError
from okapikv.tls import open_channel
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc
from okapikv.wire.stats import from_json

POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class ServerView:
    """One server's answer: its membership and the DCs it counts, or None when it does not answer."""

    dc: str
    partition: int
    address: str
    membership: Membership | None
    counted: tuple[str, ...] = ()


def _ask(dc: str, partition: int, address: str, topology: Topology) -> ServerView:
    with open_channel(address, topology.tls) as channel:
        stub = pb_grpc.KeyValueStub(channel)  # type: ignore[no-untyped-call]
        try:
            info = stub.ClusterInfo(pb.ClusterInfoRequest(), timeout=TIMEOUT_S)
            stats = from_json(stub.Stats(pb.StatsRequest(), timeout=TIMEOUT_S).json)
        except grpc.RpcError:
            return ServerView(dc, partition, address, None)
    states = tuple(info.dc_states) or ("member",) * len(topology.dcs)
    try:
        membership = Membership(info.membership_epoch, states)
    except MembershipError:
        return ServerView(dc, partition, address, None)
    counted = stats.membership.counted_dcs if stats.membership is not None else topology.dcs
    return ServerView(dc, partition, address, membership, tuple(counted))


def survey(topology: Topology) -> list[ServerView]:
    """Every server's membership, asked in parallel."""
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(topology.servers)))) as pool:
        futures = [pool.submit(_ask, dc, partition, address, topology) for dc, partition, address in topology.servers]
    return [future.result() for future in futures]


def _send(view: ServerView, membership: Membership, topology: Topology) -> bool:
    with open_channel(view.address, topology.tls) as channel:
        stub = pb_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.ChangeMembership(pb.MembershipChange(epoch=membership.epoch, states=membership.states),
                                  timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            print(f"  {view.dc}/p{view.partition} {view.address}: {error.code().name} {error.details()}",
                  file=sys.stderr)
            return False
    return True


def _describe(topology: Topology, membership: Membership) -> str:
    return ", ".join(f"{name} {state}" for name, state in zip(topology.dcs, membership.states, strict=True))


def run_remove(args: argparse.Namespace) -> int:
    try:
        topology = resolve_topology(args)
    except (ValueError, OSError) as error:
        print(f"okapi dc remove: {error}", file=sys.stderr)
        return 2
    name = args.name
    if name not in topology.dcs:
        print(f"okapi dc remove: no DC {name!r} in this cluster (its DCs: {', '.join(topology.dcs)})", file=sys.stderr)
        return 2
    index = topology.dcs.index(name)
    views = survey(topology)
    live = [view for view in views if view.membership is not None]
    if not live:
        print("okapi dc remove: no server answers", file=sys.stderr)
        return 2
    current = max((view.membership for view in live if view.membership is not None), key=lambda m: m.key)
    if current.states[index] == REMOVED:
        print(f"okapi dc remove: {name} is removed already (membership epoch {current.epoch}: "
              f"{_describe(topology, current)})")
        return 0
    answering = [view for view in live if view.dc == name]
    if answering and not args.force:
        print(f"okapi dc remove: {len(answering)} server(s) of {name} answer "
              f"({', '.join(view.address for view in answering)}); a DC that is up is removed only with --force "
              "(its clients are then refused and its writes not yet at every survivor are lost)", file=sys.stderr)
        return 2
    try:
        target = current.with_state(index, REMOVED)
    except MembershipError as error:
        print(f"okapi dc remove: {error}", file=sys.stderr)
        return 2
    print(f"okapi dc remove {name}: membership epoch {current.epoch} -> {target.epoch} ({_describe(topology, target)})")
    told = sum(_send(view, target, topology) for view in live)
    silent = len(views) - len(live)
    print(f"  told {told} of {len(live)} server(s) that answer; {silent} do not answer")
    return _wait(topology, target, name, args.timeout)


def _wait(topology: Topology, target: Membership, name: str, timeout_s: float) -> int:
    """Until every live server of a member DC holds ``target`` and no longer counts ``name``."""
    started = time.monotonic()
    while True:
        views = [view for view in survey(topology) if view.membership is not None and view.dc != name]
        behind = [view for view in views if view.membership is not None
                  and (view.membership.key < target.key or name in view.counted)]
        elapsed = time.monotonic() - started
        if not behind:
            print(f"  every live server ({len(views)}) holds epoch {target.epoch} and no longer counts {name} "
                  f"({elapsed:.1f} s)")
            return 0
        if elapsed >= timeout_s:
            print(f"  after {elapsed:.0f} s, {len(behind)} server(s) still count {name}: "
                  f"{', '.join(f'{view.dc}/p{view.partition}' for view in behind)} (a survivor that does not "
                  "answer holds the relay back; the change completes once it does)", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
