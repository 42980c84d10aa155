"""Bounded visibility, on request (docs/design.md, "Bounded visibility, on request"): with
``bounded_visibility = true`` (Okapi only) a server also holds client work while a remote DC's
newest visible update here is older than Okapi's UST bound for it (section 3.3; docs/protocol.md,
"Stabilization"), putting replication before client intake at saturation.

Why a module of its own, outside the admission policy every server runs
(``okapikv.server.admission``): the bound comes from the config's emulated ``wan_ms``, so the
control means something only on local and emulated clusters, where the benchmarks use it
(`okapi bench --protocols okapi-bounded`, the fast suite's replication phase); on real machines,
where ``wan_ms`` is 0, every real WAN delay would count as lag. A server whose config leaves it off
never builds one. A DC more than ``VISIBILITY_GIVE_UP_US`` past its bound is cut, not slow: it
holds nothing back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from okapikv.cluster.config import ClusterConfig
from okapikv.core.timestamps import physical_of

#: Client work is held once a remote DC's newest visible update here is older than the UST path
#: plus this many stabilization periods (``visibility_bounds_us``): 1.5 periods below the bound the
#: benchmark holds Okapi to (3 periods, ``benchmarks.suites.acceptance``), the margin for the
#: control's own reaction (the lag goes on rising for a few ms after batches are held). 3 DCs x 1
#: partition at saturation on 2 cores, lag p99 against the bound: holding at the bound, 2-6 ms over
#: (13.2-14.1k PUT/s); at 2 periods, -1 .. +1 ms (11.5-12.7k); at 1.5, 0.3-3 ms under (10.2-12.0k).
ADMISSION_VISIBILITY_PERIODS = 1.5
#: Past its visibility threshold by more than this, a DC is cut, not slow.
VISIBILITY_GIVE_UP_US = 1_000_000


def visibility_bounds_us(config: ClusterConfig, dc: int) -> tuple[int, ...]:
    """Per DC i, how old the newest visible update of i may be at DC ``dc`` under Okapi's UST
    (section 3.3): it reaches every DC k, k's knowledge of it reaches ``dc``, plus
    ``ADMISSION_VISIBILITY_PERIODS`` stabilization periods; 0 for ``dc`` itself."""
    wan = config.wan_ms
    dcs = range(len(config.dcs))
    return tuple(
        0 if source == dc else round(1000 * (max(wan[source][k] + wan[k][dc] for k in dcs)
                                             + ADMISSION_VISIBILITY_PERIODS * config.stabilization_interval_ms))
        for source in dcs
    )


class VisibilityBound:
    """Whether some remote DC's visibility here is past its bound (``behind``, the admission
    policy's ``also_hold``). ``clock_us`` and ``stable``: the server's clock and stable vector now."""

    __slots__ = ("_bounds_us", "_clock_us", "_stable")

    def __init__(self, bounds_us: Sequence[int], clock_us: Callable[[], int],
                 stable: Callable[[], Sequence[int]]) -> None:
        self._bounds_us = tuple(bounds_us)
        self._clock_us = clock_us
        self._stable = stable

    def behind(self) -> bool:
        """Whether some remote DC's newest visible update here is older than its bound
        (``visibility_bounds_us``) but not by more than ``VISIBILITY_GIVE_UP_US``."""
        now_us = self._clock_us()
        # strict=False: a DC that joined after the start (`okapi dc join`) has no bound until a restart
        for entry, bound in zip(self._stable(), self._bounds_us, strict=False):
            if bound:
                lag = now_us - physical_of(entry)
                if bound < lag < bound + VISIBILITY_GIVE_UP_US:
                    return True
        return False


def visibility_hold(config: ClusterConfig, dc: int, uses_usv: bool, clock_us: Callable[[], int],
                    stable: Callable[[], Sequence[int]]) -> Callable[[], bool] | None:
    """The admission policy's ``also_hold`` for a server of DC ``dc``: None unless the config asks
    for bounded visibility and the protocol has Okapi's UST (``uses_usv``)."""
    if not (config.bounded_visibility and uses_usv):
        return None
    return VisibilityBound(visibility_bounds_us(config, dc), clock_us, stable).behind
