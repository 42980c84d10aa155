"""What a client and its forks share, in both clients: the DC they use and one link per server of it.

A fork is a new causal session over the same links (benchmarks run thousands of sessions over a
few connections; the RESP port forwards through forks). So the links belong to the client that
opened them, and they move as a whole: the first session whose operation finds the DC gone moves
them (``okapikv.client.failover``), every move is a new ``generation``, and each session remembers
the generation (and DC) it belongs to, so that its next operation on newer links first has the new
DC adopt it. The links of a DC left behind are retired, not closed (operations may still be in
flight on them), and closed with the others when the client that owns them closes.

How a link is opened and closed (blocking calls, coroutines) is the drivers' part (``sync.py``,
``aio.py``); this is the bookkeeping they share.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

from okapikv.client.policy import Policy
from okapikv.client.topology import Topology
from okapikv.errors import OkapiError

L = TypeVar("L")


class Connections(Generic[L]):
    """The topology of the DC in use, its links (``links[p]``: the server of partition p) and the
    generation; ``retired``: the links of DCs left behind."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.topology: Topology | None = None
        self.links: list[L] = []
        self.retired: list[L] = []
        #: incremented at each move to another DC: a session of an older generation must be adopted
        self.generation = 0
        self.closed = False
        self._sessions = itertools.count(1)

    def install(self, topology: Topology, open_link: Callable[[Topology, str], L]) -> None:
        """Use the DC of ``topology``: a link to each of its servers (``open_link``)."""
        by_address: dict[str, L] = {}
        for address in topology.addresses:
            if address not in by_address:
                by_address[address] = open_link(topology, address)
        self.retired.extend(self.links)
        self.links = [by_address[address] for address in topology.addresses]
        self.topology = topology

    def move(self, topology: Topology, open_link: Callable[[Topology, str], L]) -> None:
        """Move to the DC of ``topology`` (another session must have it adopt theirs)."""
        self.install(topology, open_link)
        self.generation += 1

    def departing(self, generation: int) -> Topology | None:
        """The topology to leave after an operation on the links of ``generation`` found their DC
        gone: None if they moved since (another session moved them; this one need only be
        adopted). ``OkapiError`` once closed."""
        if self.closed or self.topology is None:
            raise OkapiError("the client was closed")
        return self.topology if self.generation == generation else None

    def probe(self, address: str, probes: dict[str, L], open_probe: Callable[[str], L]) -> L:
        """A link for a move's RPCs to ``address``: the one in use, else the one in ``probes``,
        opened (``open_probe``) if there is none; the caller closes ``probes`` once done."""
        topology = self.topology
        if topology is not None and address in topology.addresses:
            return self.links[topology.addresses.index(address)]
        link = probes.get(address)
        if link is None:
            link = probes[address] = open_probe(address)
        return link

    def next_session(self) -> int:
        """The ordinal of a new session over these links (the first one's is 0): it chooses the
        session's own server (``Policy.session_server``)."""
        return next(self._sessions)

    def shut(self) -> list[L]:
        """Mark the connections closed; every link to close (once each)."""
        self.closed = True
        links, self.links = self.links, []
        return list(dict.fromkeys([*links, *self.retired]))
