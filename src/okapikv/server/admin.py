"""The Admin service of a partition server: membership changes (`okapi dc remove`, docs/operations.md,
"Losing a region") and the grown config of a new DC (`okapi dc join`, "Adding a region").

Served on the client port, with the same credentials as the KeyValue service (with TLS client
authentication on, only a client certificate the cluster trusts may call it): a client that may
write may already delete every key, and the change itself is checked by the core (at least one
member DC, a known state, an epoch after the server's).
"""

from __future__ import annotations

import dataclasses
import logging

import grpc
import grpc.aio

from okapikv.cluster.config import ClusterConfig
from okapikv.cluster.growth import grown_config_problem
from okapikv.core.membership import Membership, MembershipError
from okapikv.server.node import PartitionNode
from okapikv.server.servicers import guarded
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc

log = logging.getLogger("okapikv.server")


def learn_config(node: PartitionNode, grown: ClusterConfig) -> str | None:
    """`okapi dc join`: give ``node`` ``grown``, its cluster's config with one new DC
    (``okapikv.cluster.growth``), so that its core may grow to it when the membership naming it
    arrives (``okapikv.core.growth``) and the links to the new DC's servers can open
    (``peer_links``). Why a separate step: a server must know the new DC's addresses before any
    message goes there. Returns the problem, or None (also when ``grown`` is the config already)."""
    grown = dataclasses.replace(grown, tls=node.config.tls)  # its paths were resolved where it was read
    if grown == node.config:
        return None
    problem = grown_config_problem(node.config, grown)
    if problem is not None:
        return problem
    node.config = node.startup.config = node.peer_links.config = grown
    node.core.dc_limit = len(grown.dcs)
    node.lag_samples.counts.append({})
    log.warning("%s: learned the config of %d DCs (%s joins)", node.label, len(grown.dcs), grown.dcs[-1],
                extra={"event": "config_grown", "dcs": list(grown.dcs)})
    return None


class AdminServicer(pb_grpc.AdminServicer):
    def __init__(self, node: PartitionNode) -> None:
        self.node = node

    @guarded
    async def ChangeMembership(
        self, request: pb.MembershipChange, context: grpc.aio.ServicerContext
    ) -> pb.MembershipChangeResponse:
        node = self.node
        try:
            view = Membership(request.epoch, tuple(request.states))
        except MembershipError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        if len(view.states) not in (node.num_dcs, len(node.config.dcs)):  # the latter: `okapi dc join`
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(view.states)} DC states for a cluster of {node.num_dcs} DCs")
        adopted = node.change_membership(view)
        current = node.core.membership
        return pb.MembershipChangeResponse(epoch=current.epoch, states=current.states, adopted=adopted)

    @guarded
    async def LearnConfig(self, request: pb.GrownConfig, context: grpc.aio.ServicerContext) -> pb.GrownConfigResponse:
        """`okapi dc join`: the cluster's config with one new DC (``learn_config``);
        a config that is not that is refused (INVALID_ARGUMENT) and changes nothing."""
        node = self.node
        try:
            grown = ClusterConfig.from_toml(request.toml, source="the grown config")
        except ValueError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        problem = learn_config(node, grown)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        return pb.GrownConfigResponse(dcs=node.config.dcs)
