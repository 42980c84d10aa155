"""The Admin service of a partition server: membership changes (`okapi dc remove`, docs/operations.md,
"Losing a region") and the grown config of a new DC (`okapi dc join`, "Adding a region").

Served on the client port, with the same credentials as the KeyValue service (with TLS client
authentication on, only a client certificate the cluster trusts may call it): a client that may
write may already delete every key, and the change itself is checked by the core (at least one
member DC, a known state, an epoch after the server's).
"""

from __future__ import annotations

import grpc
import grpc.aio

from okapikv.cluster.config import ClusterConfig
from okapikv.core.membership import Membership, MembershipError
from okapikv.server.node import PartitionNode
from okapikv.server.servicers import guarded
from okapikv.wire import okapikv_pb2 as pb
from okapikv.wire import okapikv_pb2_grpc as pb_grpc


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
        """`okapi dc join`: the cluster's config with one new DC (``PartitionNode.learn_config``);
        a config that is not that is refused (INVALID_ARGUMENT) and changes nothing."""
        node = self.node
        try:
            grown = ClusterConfig.from_toml(request.toml, source="the grown config")
        except ValueError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        problem = node.learn_config(grown)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        return pb.GrownConfigResponse(dcs=node.config.dcs)
