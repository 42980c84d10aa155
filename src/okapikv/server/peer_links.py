"""The node's outgoing peer links, one per destination (``okapikv.server.links.OutgoingLink``),
opened on first use and closed when the destination's DC leaves the membership.

A link numbers its messages from 1, and the receiver skips the numbers it already handled from the
same sender identity (``okapikv.server.inbound.SequenceTable``). So a link that replaces one
closed by a membership change goes out under a fresh identity, as a restarted server's would:
under this incarnation's, its first messages would be skipped as already handled, silently (a
repair answered without its versions). Fault injection (``okapikv.server.faults``) cuts the links
to chosen DCs: their messages queue up until released.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from okapikv.cluster.config import ClusterConfig
from okapikv.core.membership import Membership
from okapikv.core.messages import ServerId
from okapikv.server.links import OutgoingLink
from okapikv.server.peer_encoding import Frame
from okapikv.wire.convert import batch_header


class PeerLinks:
    def __init__(self, config: ClusterConfig, server: ServerId, incarnation: int, credentials: Any = None) -> None:
        """``credentials`` (``grpc.ChannelCredentials``): dial peers with mutual TLS."""
        self.config = config
        self.server = server
        self._header = batch_header(config.cluster_id, server, incarnation)
        self._credentials = credentials
        #: destination -> its link (admission control reads it: ``okapikv.server.admission``)
        self.links: dict[ServerId, OutgoingLink] = {}
        self._linked: set[ServerId] = set()  # destinations this incarnation has opened a link to
        self._held_dcs: set[int] = set()  # fault injection: DCs our links are cut from

    def send(self, destination: ServerId, frames: list[Frame]) -> None:
        link = self.links.get(destination)
        if link is None:
            link = self._open(destination)
        for frame, size in frames:
            link.enqueue(frame, size)

    def _open(self, destination: ServerId) -> OutgoingLink:
        config = self.config
        target = config.server(destination.dc, destination.partition)
        header = self._header
        if destination in self._linked:  # a replacement: a fresh identity (module docstring)
            header = batch_header(config.cluster_id, self.server, random.getrandbits(62) + 1)
        self._linked.add(destination)
        link = OutgoingLink(
            destination=destination,
            label=target.label,
            address=target.peer_target,
            header=header,
            delay_s=config.delay_ms(self.server.dc, destination.dc) / 1000,
            max_batch_bytes=config.max_message_bytes // 2,
            max_message_bytes=config.max_message_bytes,
            credentials=self._credentials,
            server_name=config.tls.server_name if config.tls is not None else None,
            # The native port listens on the host of ``address``: not for a separate peer listener.
            native=config.native and config.tls is None and target.peer_address is None,
            connections=config.connections,
        )
        self.links[destination] = link
        if destination.dc in self._held_dcs:
            link.hold(True)
        link.start()
        return link

    def hold(self, dcs: set[int]) -> None:
        """Fault injection (``okapikv.server.faults``): cut the links to the servers of ``dcs``
        (their messages queue up); release the others."""
        self._held_dcs = set(dcs)
        for destination, link in self.links.items():
            link.hold(destination.dc in self._held_dcs)

    def close_removed(self, view: Membership, loop: asyncio.AbstractEventLoop | None) -> None:
        """Close the links to servers of DCs ``view`` does not count as members (nothing goes
        there any more: their queues would only grow)."""
        for destination in [d for d in self.links if view.states[d.dc] != "member"]:
            link = self.links.pop(destination)
            if loop is not None:
                loop.create_task(link.close())

    def connected(self, destination: ServerId) -> bool:
        link = self.links.get(destination)
        return link is not None and link.connected

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links.values()), return_exceptions=True)
