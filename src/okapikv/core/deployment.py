"""The paper's deployment (Okapi, section 5): three AWS regions and the one-way WAN delays between them.

Pure data, defined once: the simulator's default WAN matrix (``okapikv.sim.config``), the DC names
``okapi up`` starts by default and its "realistic" WAN emulation (``okapikv.cluster.config``), and the
benchmarks' geo-replicated suites (``okapikv.bench``) all read it here. It lives in the core only
because every layer may import the core; nothing in the protocol depends on it.

The delays are about half of public inter-region round-trip times (Oregon - N. Virginia, Oregon -
Ireland, N. Virginia - Ireland).
"""

from __future__ import annotations

#: The regions, in the order of the rows and columns of ``PAPER_WAN_MS``.
PAPER_DC_NAMES: tuple[str, ...] = ("oregon", "virginia", "ireland")

#: One-way delays in ms between the regions of ``PAPER_DC_NAMES``.
PAPER_WAN_MS: tuple[tuple[float, ...], ...] = (
    (0.0, 35.0, 65.0),
    (35.0, 0.0, 38.0),
    (65.0, 38.0, 0.0),
)


def paper_delay_ms(a: str, b: str) -> float | None:
    """The one-way delay in ms between two of the paper's regions (0 from one to itself); None
    when either name is not one of ``PAPER_DC_NAMES``."""
    if a not in PAPER_DC_NAMES or b not in PAPER_DC_NAMES:
        return None
    return PAPER_WAN_MS[PAPER_DC_NAMES.index(a)][PAPER_DC_NAMES.index(b)]
