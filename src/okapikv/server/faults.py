"""Fault injection for tests: cut a server's peer links to chosen DCs, and repair them.

Enabled only when the server runs with ``OKAPI_FAULT_INJECTION=1`` in its environment (never in a
normal deployment: without it the method does not exist). It adds one unary method,
``/okapikv.Fault/HoldLinks``, whose request and response are JSON bytes (no protobuf schema, since
it is no part of the API)::

    request:  {"dcs": ["virginia"]}     hold every outgoing link to those DCs; [] releases all
    response: {"held": ["virginia"]}

A held link sends nothing and keeps its messages queued in order (``OutgoingLink.hold``), exactly
what a network cut looks like to the protocol (links are reliable: a cut delays, never loses). To
cut DC X off, hold every link from X's servers to the other DCs and from theirs to X.
"""

from __future__ import annotations

import json
import os

import grpc
import grpc.aio

from okapikv.server.node import PartitionNode

ENVIRONMENT_VARIABLE = "OKAPI_FAULT_INJECTION"
SERVICE = "okapikv.Fault"
HOLD_LINKS = f"/{SERVICE}/HoldLinks"


def enabled() -> bool:
    return os.environ.get(ENVIRONMENT_VARIABLE, "") == "1"


def register(server: grpc.aio.Server, node: PartitionNode) -> bool:
    """Add the fault-injection service when enabled; returns whether it was added."""
    if not enabled():
        return False

    async def hold_links(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            names = json.loads(request or b"{}").get("dcs", [])
            dcs = {node.config.dc_index(str(name)) for name in names}
        except (ValueError, AttributeError, TypeError) as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad HoldLinks request: {error}")
        node.peer_links.hold(dcs)
        return json.dumps({"held": [node.config.dcs[dc] for dc in sorted(dcs)]}).encode()

    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "HoldLinks": grpc.unary_unary_rpc_method_handler(
            hold_links, request_deserializer=None, response_serializer=None
        ),
    })
    server.add_generic_rpc_handlers((handler,))
    return True
