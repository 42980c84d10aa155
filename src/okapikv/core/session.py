"""The client side of a causal session (Okapi section 3.2), pure so every client shares it.

A session holds ``stable`` (USV_c in Okapi: the freshest stable vector the client has seen) and
``dt`` (dt_c: the highest timestamp of a local item it read or wrote). Its dependency vector DV_c is
``stable`` with the local entry replaced by ``dt``. Every request carries the session; every reply
returns a session the client merges entry-wise with max, so a session never moves backwards
(monotonic reads, read-your-writes, writes-follow-reads across partitions of a DC).
"""

from __future__ import annotations

from okapikv.core.messages import Session
from okapikv.core.vectors import merge_max, zeros


class ClientSession:
    __slots__ = ("stable", "dt")

    def __init__(self, num_dcs: int) -> None:
        self.stable = zeros(num_dcs)
        self.dt = 0

    @property
    def current(self) -> Session:
        return Session(self.stable, self.dt)

    def merge(self, update: Session) -> None:
        if len(update.stable) == len(self.stable):
            self.stable = merge_max(self.stable, update.stable)
        if update.dt > self.dt:
            self.dt = update.dt

    def rebase(self, num_dcs: int) -> None:
        """Start over for a cluster of another size (a client that reconnects elsewhere)."""
        if len(self.stable) != num_dcs:
            self.stable = zeros(num_dcs)
            self.dt = 0
