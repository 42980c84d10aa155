"""`okapi dc remove NAME` and `okapi dc add NAME`: take a DC lost for good out of a running
cluster, and bring it back (docs/operations.md, "Losing a region"; docs/protocol.md, "Membership").

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

`okapi dc add NAME` brings a removed DC back once every one of its servers answers (restarted on
empty data directories with ``--repair``: they fetch everything from the survivors). It takes the
next epoch with NAME joining, waits until NAME's servers have repaired and every live server counts
NAME again (each does once NAME has caught up there), then takes the next with NAME a member, which
lets its servers serve clients. Refused (exit 2): a DC that is not removed or joining, or one some
of whose servers do not answer.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc

from okapikv.cluster.config import ClusterConfig
from okapikv.cluster.status import TIMEOUT_S, Topology, resolve_topology
from okapikv.core.membership import JOINING, MEMBER, REMOVED, Membership, MembershipError
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
    repairing: str | None = None


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
    return ServerView(dc, partition, address, membership, tuple(counted), stats.stabilization.repairing)


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


def _start(args: argparse.Namespace, command: str) -> tuple[Topology, int, list[ServerView], Membership] | int:
    """The cluster, the DC's index, every server's answer and the newest membership; or an exit status."""
    try:
        topology = resolve_topology(args)
    except (ValueError, OSError) as error:
        print(f"okapi dc {command}: {error}", file=sys.stderr)
        return 2
    name = args.name
    if name not in topology.dcs:
        print(f"okapi dc {command}: no DC {name!r} in this cluster (its DCs: {', '.join(topology.dcs)})",
              file=sys.stderr)
        return 2
    views = survey(topology)
    live = [view.membership for view in views if view.membership is not None]
    if not live:
        print(f"okapi dc {command}: no server answers", file=sys.stderr)
        return 2
    return topology, topology.dcs.index(name), views, max(live, key=lambda m: m.key)


def _change(topology: Topology, views: list[ServerView], current: Membership, target: Membership,
            command: str) -> None:
    print(f"okapi dc {command}: membership epoch {current.epoch} -> {target.epoch} ({_describe(topology, target)})")
    live = [view for view in views if view.membership is not None]
    told = sum(_send(view, target, topology) for view in live)
    print(f"  told {told} of {len(live)} server(s) that answer; {len(views) - len(live)} do not answer")


def run_remove(args: argparse.Namespace) -> int:
    started = _start(args, "remove")
    if isinstance(started, int):
        return started
    topology, index, views, current = started
    name = args.name
    if current.states[index] == REMOVED:
        print(f"okapi dc remove: {name} is removed already (membership epoch {current.epoch}: "
              f"{_describe(topology, current)})")
        return 0
    answering = [view for view in views if view.membership is not None and view.dc == name]
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
    _change(topology, views, current, target, f"remove {name}")

    def done(view: ServerView) -> bool:
        return view.dc == name or (view.membership is not None and view.membership.key >= target.key
                                   and name not in view.counted)

    return _wait(topology, done, args.timeout, f"every live server holds epoch {target.epoch} and no longer counts "
                 f"{name}", f"still count {name} (a survivor that does not answer holds the relay back; the change "
                 "completes once it does)")


def run_add(args: argparse.Namespace) -> int:
    started = _start(args, "add")
    if isinstance(started, int):
        return started
    topology, index, views, current = started
    name = args.name
    state = current.states[index]
    if state == MEMBER:
        print(f"okapi dc add: {name} is a member already (membership epoch {current.epoch}: "
              f"{_describe(topology, current)})")
        return 0
    silent = [view for view in views if view.dc == name and view.membership is None]
    if silent:
        print(f"okapi dc add: {len(silent)} server(s) of {name} do not answer "
              f"({', '.join(view.address for view in silent)}); start them first, on empty data directories "
              "with --repair (docs/operations.md, \"Losing a region\")", file=sys.stderr)
        return 2
    target = current if state == JOINING else current.with_state(index, JOINING)
    if target is not current:
        _change(topology, views, current, target, f"add {name}")

    def caught_up(view: ServerView) -> bool:
        return (view.membership is not None and view.membership.key >= target.key and name in view.counted
                and view.repairing is None)

    status = _wait(topology, caught_up, args.timeout, f"{name} caught up: every live server counts it",
                   f"do not count {name} yet, or are repairing")
    if status:
        return status
    member = target.with_state(index, MEMBER)
    _change(topology, survey(topology), target, member, f"add {name}")

    def holds(view: ServerView) -> bool:
        return view.membership is not None and view.membership.key >= member.key

    return _wait(topology, holds, args.timeout, f"every live server holds epoch {member.epoch}: {name} serves clients",
                 "hold an older epoch")


def _learn(view: ServerView, toml: str, topology: Topology) -> bool:
    with open_channel(view.address, topology.tls) as channel:
        stub = pb_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.LearnConfig(pb.GrownConfig(toml=toml), timeout=TIMEOUT_S)
        except grpc.RpcError as error:
            print(f"  {view.dc}/p{view.partition} {view.address}: {error.code().name} {error.details()}",
                  file=sys.stderr)
            return False
    return True


def run_join(args: argparse.Namespace) -> int:
    """`okapi dc join NAME --config GROWN.toml`: the cluster grows by DC NAME, the last DC of the
    grown config (module docstring of ``okapikv.cluster.growth``; docs/operations.md, "Adding a
    region"). Every server of the running DCs must answer: each first takes the grown config (it
    then knows NAME's servers' addresses), then the next epoch, with NAME joining, goes to them and
    every server grows its vectors by one entry. NAME's servers start after this, empty, with
    ``--repair``; `okapi dc add NAME` then makes NAME a member once every server counts it."""
    try:
        text = Path(args.config).read_text(encoding="utf-8")
        grown = ClusterConfig.from_toml(text, source=args.config)
        topology = resolve_topology(args)
    except (ValueError, OSError) as error:
        print(f"okapi dc join: {error}", file=sys.stderr)
        return 2
    name = args.name
    if not grown.dcs or grown.dcs[-1] != name:
        print(f"okapi dc join: {name!r} must be the last DC of {args.config} (its DCs: {', '.join(grown.dcs)})",
              file=sys.stderr)
        return 2
    old = Topology(topology.cluster_id, topology.protocol, topology.dcs[:-1],
                   tuple(server for server in topology.servers if server[0] != name), topology.tls)
    views = survey(old)
    live = [view.membership for view in views if view.membership is not None]
    if not live:
        print("okapi dc join: no server answers", file=sys.stderr)
        return 2
    newest = max(live, key=lambda m: m.key)
    # a removed DC's servers are not asked (they start again from the grown config: `okapi dc add`)
    states = dict(zip(old.dcs, newest.states, strict=False))
    views = [view for view in views if states.get(view.dc) != REMOVED]
    silent = [view for view in views if view.membership is None]
    if silent:
        print(f"okapi dc join: {len(silent)} server(s) do not answer ({', '.join(view.address for view in silent)}); "
              "every server of the running DCs must take the grown config (remove a DC lost for good first: "
              "okapi dc remove)", file=sys.stderr)
        return 2
    current = newest
    if len(current.states) == len(grown.dcs):
        print(f"okapi dc join: {name} is in the cluster already (membership epoch {current.epoch}: "
              f"{_describe(topology, current)})")
        return 0
    if len(current.states) != len(old.dcs):
        print(f"okapi dc join: the servers' membership names {len(current.states)} DCs, the config "
              f"{len(old.dcs)} before {name}", file=sys.stderr)
        return 2
    learned = [view for view in views if _learn(view, text, topology)]
    if len(learned) != len(views):
        print(f"okapi dc join: {len(views) - len(learned)} server(s) refused the grown config; nothing else changed "
              "(a server that took it only knows NAME's addresses)", file=sys.stderr)
        return 2
    print(f"okapi dc join: {len(learned)} server(s) took the config of {len(grown.dcs)} DCs")
    target = current.with_new_dc()
    _change(topology, views, current, target, f"join {name}")

    def grown_view(view: ServerView) -> bool:
        return view.membership is not None and view.membership.key >= target.key

    status = _wait(old, grown_view, args.timeout, f"every server holds epoch {target.epoch}: {name} is joining",
                   "hold an older epoch")
    if status == 0:
        print(f"  next: start {name}'s servers with this config, empty data directories and --repair; "
              f"then okapi dc add {name} --config {args.config}")
    return status


def _wait(topology: Topology, done: Callable[[ServerView], bool], timeout_s: float, success: str,
          behind_says: str) -> int:
    """Until ``done`` holds for every server that answers; 0, or 1 after ``timeout_s``."""
    started = time.monotonic()
    while True:
        views = [view for view in survey(topology) if view.membership is not None]
        behind = [view for view in views if not done(view)]
        elapsed = time.monotonic() - started
        if not behind:
            print(f"  {success} ({len(views)} server(s), {elapsed:.1f} s)")
            return 0
        if elapsed >= timeout_s:
            print(f"  after {elapsed:.0f} s, {len(behind)} server(s) {behind_says}: "
                  f"{', '.join(f'{view.dc}/p{view.partition}' for view in behind)}", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
