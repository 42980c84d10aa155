"""Clock skew models: the fixed clock offset each server of an experiment gets.

The paper's evaluation injects no skew of its own: its servers run NTP, so each clock is off by an
amount of its own, independent of every other server's (section 5). Cure's RO-TX waits are
between the servers of one DC (a slice waits for its partition's clock to reach the coordinator's,
docs/protocol.md "Cure"), so how offsets are laid out over the servers decides those waits: the
model is stated with every result (docs/benchmarks.md, "Clock skew models"). With X the skew
parameter in microseconds and the servers in DC-major order (every partition of DC 0, then DC 1):

- ``uniform``: independent offsets, each uniform in [0, X] (integers), drawn in server order
  (the paper-like model, and the simulator's);
- ``half-normal``: independent offsets |N(0, X)|, as the research group's simulator CC-SIM draws
  them (X is the standard deviation; an offset may exceed X);
- ``dc-major``: fixed offsets spread evenly over [0, X] in server order, the first server 0 and
  the last X, so the servers of one DC are close to each other and the DCs far apart.

The draws come from the caller's random source (a seeded ``random.Random``), so the core takes no
randomness of its own (docs/design.md, "A pure core, two drivers").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

UNIFORM = "uniform"
HALF_NORMAL = "half-normal"
DC_MAJOR = "dc-major"
SKEW_MODELS = (UNIFORM, HALF_NORMAL, DC_MAJOR)


class Draws(Protocol):
    """What the models draw from (``random.Random`` has both)."""

    def randint(self, a: int, b: int) -> int: ...

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float: ...


def check_model(model: str) -> str:
    """``model`` if it is one of ``SKEW_MODELS``; else ``ValueError`` naming them."""
    if model not in SKEW_MODELS:
        raise ValueError(f"unknown clock skew model {model!r}; choose one of {', '.join(SKEW_MODELS)}")
    return model


def clock_offsets_us(model: str, skew_us: int, count: int, draws: Draws) -> tuple[int, ...]:
    """The offsets of ``count`` servers in DC-major order under ``model`` with parameter
    ``skew_us`` (module docstring); ``draws`` is only used by the random models."""
    check_model(model)
    if skew_us < 0:
        raise ValueError(f"clock skew must not be negative, not {skew_us} us")
    if skew_us == 0 or count == 0:
        return (0,) * count
    if model == UNIFORM:
        return tuple(draws.randint(0, skew_us) for _ in range(count))
    if model == HALF_NORMAL:
        return tuple(round(abs(draws.gauss(0.0, skew_us))) for _ in range(count))
    return tuple(round(skew_us * position / (count - 1)) if count > 1 else 0 for position in range(count))


def max_skew_in_dc_us(offsets_us: Sequence[int], partitions: int) -> int:
    """The largest difference between two offsets of servers of one DC (``offsets_us`` in DC-major
    order, ``partitions`` servers per DC): what bounds a Cure slice's wait for its clock."""
    if partitions < 1:
        raise ValueError("a DC has at least one partition")
    dcs = [offsets_us[start:start + partitions] for start in range(0, len(offsets_us), partitions)]
    return max((max(dc) - min(dc) for dc in dcs if dc), default=0)
