"""What a benchmark measures: a store and the settings it runs with, named once.

Users name systems on the command line (``--protocols okapi,cure,okapi-bounded``) and those names
are what results.json, the CSVs and the plots show; the code works with the typed ``System`` that
``parse_system`` makes of a name, so a suite asks ``system.bounded_visibility`` rather than
matching a suffix of a string.

- an okapikv protocol (``okapikv.core.protocols``: okapi, cure, gentlerain, eventual), optionally
  with the cluster settings of a variant: ``okapi-piggyback`` (the USV rides on the GSV round, the
  paper's untried optimization, Okapi section 5; docs/protocol.md, "Stabilization") and
  ``okapi-bounded`` (servers hold client batches while remote visibility exceeds the UST bound);
- ``redis``: a local redis-server, the reference line a suite adds itself (not a ``--protocols``
  name).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from okapikv.core.deployment import PAPER_DC_NAMES

REDIS = "redis"
#: The paper's three regions (Okapi, section 5), the default DCs of the suites that emulate the WAN.
PAPER_DCS = PAPER_DC_NAMES


@dataclass(frozen=True, slots=True)
class System:
    """A store and the cluster settings it runs with; the options are ``ClusterConfig`` fields."""

    protocol: str  # an okapikv protocol, or REDIS
    piggyback_usv: bool = False
    bounded_visibility: bool = False

    @property
    def is_okapikv(self) -> bool:
        return self.protocol != REDIS

    @property
    def name(self) -> str:
        """The name users give and results show: the protocol, or the variant's name."""
        for name, system in VARIANTS.items():
            if system == self:
                return name
        options = [option for option in OPTIONS if getattr(self, option)]
        return "+".join([self.protocol, *options])

    def settings(self) -> dict[str, Any]:
        """The cluster settings this system changes from the defaults (``ClusterConfig`` fields)."""
        return {option: True for option in OPTIONS if getattr(self, option)}


#: The boolean cluster settings a system can turn on.
OPTIONS = tuple(field.name for field in fields(System) if field.name != "protocol")
#: Systems that are a protocol with non-default cluster settings, by the name users give them.
VARIANTS: dict[str, System] = {
    "okapi-piggyback": System("okapi", piggyback_usv=True),
    "okapi-bounded": System("okapi", bounded_visibility=True),
}
REDIS_SYSTEM = System(REDIS)


def known_names() -> list[str]:
    """Every name ``parse_system`` accepts: the protocols, then the variants."""
    from okapikv.core.protocols import protocol_names

    return [*protocol_names(), *sorted(VARIANTS)]


def parse_system(name: str) -> System:
    """The system a ``--protocols`` name stands for; ``ValueError`` for a name no one knows."""
    if name in VARIANTS:
        return VARIANTS[name]
    if name in known_names():
        return System(name)
    raise ValueError(f"unknown protocol {name!r}")


def parse_systems(text: str) -> tuple[System, ...]:
    """``--protocols``: comma-separated names, each parsed once; every unknown name in one error."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = known_names()
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"unknown protocol(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}")
    return tuple(parse_system(name) for name in names)
