"""The client's decisions, apart from its I/O: where an operation goes and what a failure means.

Both clients (``sync.py``, blocking; ``aio.py``, asyncio) are drivers of this policy: they send,
wait and move as it says, and it never sends, sleeps, reads a clock or touches asyncio. It is given
the time (``now``, seconds on the driver's clock), every failure as a ``retry.Failure`` and every
reply of a move, and answers with decisions as values:

- routing: an operation on a key goes to its partition's server of the client's DC
  (``Topology.partition_of``); a RO-TX or SCAN to the session's own server (``coordinator``,
  ``read_coordinator``: the paper's collocated client, docs/design.md "Who coordinates a snapshot
  read"), the next server of the DC after each failure (``retry.Attempts``, ``rotate``); and after
  ``failover_after_s`` of a DC not answering, everything to the first fallback DC that can adopt
  the session (``failover.Move``);
- judging an attempt that failed (``retry.Attempts.judge``): retry after a backoff with jitter
  (``okapikv.core.backoff.Backoff``, drawn from the seeded ``rng`` the client passes in) within ``timeout_s``,
  fail over, or raise (a refusal the same request would meet again, ``OutcomeUnknown`` for a
  write that may have been applied by a client that applies writes at most once, ``Unavailable``
  or ``Overloaded`` at the timeout);
- adopting a session in another DC (``failover.Move``): at most ``failover_wait_s`` of waiting for
  the DC to have every write the session depends on, else ``FailoverTimeout``.

A ``Policy`` is one client's settings; the objects it makes hold one operation's (or one move's)
state, so a test drives them with a fake clock and a seeded random source.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from random import Random

from okapikv.client.failover import Move, adopt_request
from okapikv.client.operations import SessionState
from okapikv.client.retry import Attempts
from okapikv.client.topology import Topology
from okapikv.core.backoff import DEFAULT_BACKOFF, Backoff

#: Who coordinates a session's RO-TX and SCAN: ``session``, the session's own server (the paper's
#: clients are collocated with the server they open their session with, section 5); ``first-key``,
#: a RO-TX at the server of its first key (that key's slice then needs no hop inside the DC) and
#: a SCAN at the DC's servers in turn.
COORDINATORS = ("session", "first-key")


class Policy:
    """One client's settings: its ``addresses`` (the server it was given, then its fallback
    servers in other DCs), ``timeout_s`` per operation, ``backoff``, ``failover_after_s``,
    ``failover_wait_s``, ``at_most_once`` (writes), ``coordinator`` (``COORDINATORS``) and the
    random source of its jitter."""

    __slots__ = ("addresses", "timeout_s", "backoff", "failover_after_s", "failover_wait_s", "at_most_once",
                 "rng", "window_s", "coordinator", "_scans")

    def __init__(self, address: str, fallback: Sequence[str] = (), *, timeout_s: float = 30.0,
                 backoff: Backoff = DEFAULT_BACKOFF, failover_after_s: float = 2.0, failover_wait_s: float = 10.0,
                 at_most_once: bool = False, coordinator: str = "session", rng: Random) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        if coordinator not in COORDINATORS:
            raise ValueError(f"coordinator must be one of {', '.join(COORDINATORS)}, not {coordinator!r}")
        self.coordinator = coordinator
        self._scans = itertools.count()  # first-key: the DC's servers in turn for SCANs
        if failover_after_s <= 0 or failover_wait_s <= 0:
            raise ValueError("failover_after_s and failover_wait_s must be positive")
        self.addresses: tuple[str, ...] = (address, *(a for a in fallback if a != address))
        self.timeout_s = timeout_s
        self.backoff = backoff
        self.failover_after_s = failover_after_s
        self.failover_wait_s = failover_wait_s
        self.at_most_once = at_most_once
        self.rng = rng
        #: how long an operation's first attempt may take: the timeout, or with fallback DCs as long
        #: as the DC may stay silent before the session moves (what ``Attempts`` allows it too)
        self.window_s = min(timeout_s, failover_after_s) if self.fails_over else timeout_s

    @property
    def fails_over(self) -> bool:
        return len(self.addresses) > 1

    def with_timeout(self, timeout_s: float) -> Policy:
        return Policy(self.addresses[0], self.addresses[1:], timeout_s=timeout_s, backoff=self.backoff,
                      failover_after_s=self.failover_after_s, failover_wait_s=self.failover_wait_s,
                      at_most_once=self.at_most_once, coordinator=self.coordinator, rng=self.rng)

    def session_server(self, topology: Topology, ordinal: int) -> int:
        """The partition whose server is the session's own in the DC of ``topology``: for the
        client's first session (``ordinal`` 0) the server it was given, when that server is of this
        DC; each further session (a fork, ``ordinal`` 1, 2, ...) the next server of the DC, so many
        sessions of one client spread over the DC as clients collocated with each server would. In
        a DC the client was not given a server of (after a failover) the ordinal alone chooses."""
        addresses = topology.addresses
        given = addresses.index(self.addresses[0]) if self.addresses[0] in addresses else 0
        return (given + ordinal) % len(addresses)

    def read_coordinator(self, topology: Topology, ordinal: int, first_key: bytes | None) -> int:
        """The partition whose server coordinates a RO-TX (``first_key``: its first key) or a SCAN
        (``first_key`` None) of session ``ordinal``, as ``coordinator`` says."""
        if self.coordinator == "session":
            return self.session_server(topology, ordinal)
        if first_key is not None:
            return topology.partition_of(first_key)
        return next(self._scans) % len(topology.addresses)

    def attempts(self, what: str, addresses: Sequence[str], *, started: float, start: int = 0,
                 rotate: bool = False, writes: bool = False, once: bool = False,
                 fails_over: bool = True) -> Attempts:
        """The decisions of an operation (``fails_over``: one that may move to a fallback DC; RPCs
        such as ClusterInfo and Stats do not) begun at ``started`` whose first attempt failed;
        ``once``: applied at most once whatever ``at_most_once`` says (an increment)."""
        return Attempts(what, addresses, started=started, timeout_s=self.timeout_s, backoff=self.backoff,
                        rng=self.rng, start=start, rotate=rotate,
                        at_most_once=(self.at_most_once and writes) or once,
                        after_s=self.failover_after_s if fails_over and self.fails_over else None)

    def move(self, current: Topology, state: SessionState, from_dc: int, now: float) -> Move:
        """Moving ``state`` (a session of DC ``from_dc``) away from the DC of ``current``."""
        return Move(self.addresses, current, adopt_request(state, from_dc), from_dc=from_dc,
                    wait_s=self.failover_wait_s, backoff=self.backoff, rng=self.rng, now=now)

    def adoption(self, topology: Topology, state: SessionState, from_dc: int, now: float) -> Move:
        """Having the DC of ``topology`` (where the client's connections moved) adopt ``state``."""
        return Move(self.addresses, topology, adopt_request(state, from_dc), from_dc=from_dc,
                    wait_s=self.failover_wait_s, backoff=self.backoff, rng=self.rng, now=now, adopter=topology)
