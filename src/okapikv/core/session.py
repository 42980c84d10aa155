"""The client side of a causal session (Okapi section 3.2), pure so every client shares it.

A session holds ``stable`` (USV_c in Okapi: the freshest stable vector the client has seen) and
``dt`` (dt_c: the highest timestamp of a local item it read or wrote). Its dependency vector DV_c is
``stable`` with the local entry replaced by ``dt``. Every request carries the session; every reply
returns a session the client merges entry-wise with max, so a session never moves backwards
(monotonic reads, read-your-writes, writes-follow-reads across partitions of a DC).

Moving a session to another DC (``adopt``, the client's failover). A session's entries are only
meaningful where they were earned: ``dt`` counts local items of the old DC, and ``stable`` may hold
values that are stable there but not here (Cure's GSV). Sending it as is to another DC would let
that DC merge those values into its own stable vector and declare stable what it has not received.
So the new DC first checks that everything the session depends on, its dependency vector
``DV_c = stable with the old DC's entry raised to dt``, is stable here (``DV_c[i] <= stable[i]``
for every other DC i; entries for the new DC itself are local items, always visible). Only then
does the client continue there, with a session built from the new DC's own stable vector and a
local dependency time covering what it depended on of this DC. Until then it must wait (its own
writes that had not left the old DC are exactly what can be missing); the client bounds that wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from okapikv.core.growth import fit
from okapikv.core.messages import Session
from okapikv.core.timestamps import physical_of
from okapikv.core.vectors import Vector, merge_max, zeros


class ClientSession:
    __slots__ = ("stable", "dt")

    def __init__(self, num_dcs: int) -> None:
        self.stable = zeros(num_dcs)
        self.dt = 0

    @property
    def current(self) -> Session:
        return Session(self.stable, self.dt)

    def merge(self, update: Session) -> None:
        """Merge a reply's session, entry by entry. Sessions of different lengths are fitted to the
        longer one first (a cluster whose DC list is extended online, ``okapikv.core.growth``): an
        entry a session lacks is 0, a DC it depends on nothing of."""
        stable, theirs = self.stable, update.stable
        if len(theirs) != len(stable):
            size = max(len(theirs), len(stable))
            stable, theirs = fit(stable, size), fit(theirs, size)
        self.stable = merge_max(stable, theirs)
        if update.dt > self.dt:
            self.dt = update.dt

    def rebase(self, num_dcs: int) -> None:
        """Start over for a cluster of another size (a client that reconnects elsewhere)."""
        if len(self.stable) != num_dcs:
            self.stable = zeros(num_dcs)
            self.dt = 0


@dataclass(frozen=True, slots=True)
class Adoption:
    """Whether a session from another DC can continue here, and with which session.

    ``behind_us[i]``: how far (physical microseconds) this DC's stable vector is behind what the
    session depends on of DC i (0 when covered): for the client's error message when it gives up.
    """

    ready: bool
    session: Session
    behind_us: tuple[int, ...]


def adopt(session: Session, *, from_dc: int, here_dc: int, stable: Vector) -> Adoption:
    """The failover rule (module docstring): ready once every dependency of ``session`` (a session
    of DC ``from_dc``) is stable in DC ``here_dc``, whose server has the stable vector ``stable``."""
    if not 0 <= from_dc < len(session.stable) or not 0 <= here_dc < len(stable):
        raise ValueError(f"DC index out of range 0..{len(stable) - 1}")
    dependency = list(session.stable)
    dependency[from_dc] = max(dependency[from_dc], session.dt)
    if len(dependency) != len(stable):  # one side knows an added DC (core.growth)
        if any(dependency[len(stable):]):  # depends on a DC this server does not know yet: not here
            return Adoption(False, session, (0,) * len(stable))
        dependency = list(fit(tuple(dependency), len(stable)))
    behind = tuple(
        0 if dc == here_dc or needed <= have else max(1, physical_of(needed) - physical_of(have))
        for dc, (needed, have) in enumerate(zip(dependency, stable, strict=True))
    )
    ready = not any(behind)
    return Adoption(ready, Session(stable, dependency[here_dc]) if ready else session, behind)
